//! The data of an experiment: each strategy's measured runs. Apart from `experiment` (which
//! schedules the runs) so that `summary` can read them without importing the scheduler
//! that imports it.

use crate::strategy::Strategy;
use serde::Serialize;

/// One measured run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    /// Round number (0-based, warm-up rounds not counted).
    pub round: usize,
    /// Position of this run in the whole experiment (0-based, warm-ups not counted).
    pub seq: usize,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub max_rss_kib: u64,
    /// Context switches and page faults of the run, as the kernel counted them.
    pub counters: crate::runner::KernelCounters,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// True when the program exited with status 0.
    pub success: bool,
    /// The program-reported metric, when `--metric` was given and it matched.
    pub metric: Option<f64>,
    /// Why the metric is missing, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_error: Option<String>,
    /// The CPUs a random strategy drew for this run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<u32>>,
}

/// The state and result of an experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub strategies: Vec<Strategy>,
    pub baseline: usize,
    /// Per strategy, its measured runs in order.
    pub records: Vec<Vec<RunRecord>>,
    pub warmup_runs: usize,
    pub rounds: usize,
    pub interrupted: bool,
    /// The strategy and stderr tail of the last failed run, to say why when all failed.
    pub last_failure: Option<(String, String)>,
}
