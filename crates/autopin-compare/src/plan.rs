//! A comparison in the run path's shape: the front end fills a [`Request`] with plain
//! values, [`ComparePlan::new`] validates all of it in one place before the first run,
//! [`compare`] carries it out and returns a [`Comparison`] — the experiment, its summaries,
//! the document every export is built from — and [`Comparison::verdict`] says how it ended
//! as a typed [`CompareError`] with its exit status.

use crate::experiment::{compile_metric, Config, Event, Setup};
use crate::report::Document;
use crate::runner::{Interrupt, Runner};
use crate::runs::{Experiment, RunRecord};
use crate::stats::Better;
use crate::strategy::{parse_strategy, MachineCheck, Strategy};
use crate::summary::{failure_reasons, summarize, StrategySummary, SummaryConfig};
use autopin_launch::LaunchError;
use std::ffi::{OsStr, OsString};

/// What the user asked for, as plain values.
#[derive(Debug, Clone)]
pub struct Request {
    pub program: Vec<OsString>,
    pub strategies: Vec<String>,
    pub baseline: Option<String>,
    pub runs: usize,
    pub warmup: usize,
    pub seed: u64,
    pub metric: Option<String>,
    pub higher_is_better: bool,
    pub ignore_failure: bool,
    pub alpha: f64,
    pub adaptive: bool,
    pub max_runs: Option<usize>,
    pub equivalence: f64,
    pub bootstrap: usize,
}

/// Why a comparison did not give a result, and the exit status that says so.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Bad input (exit status 2).
    #[error("{0}")]
    Usage(String),
    /// The program cannot be started at all (127 not found, 126 not executable).
    #[error("cannot start the program: {0}")]
    CannotStart(#[from] LaunchError),
    /// SIGINT/SIGTERM stopped the experiment; completed runs were kept (130).
    #[error("compare interrupted; kept {runs} completed run(s)")]
    Interrupted { runs: usize },
    /// No run succeeded, so nothing could be compared (1).
    #[error("{0}")]
    AllFailed(String),
    /// autopin's own failure (1).
    #[error("{0}")]
    Internal(String),
}

impl CompareError {
    pub fn exit_status(&self) -> i32 {
        match self {
            CompareError::Usage(_) => 2,
            CompareError::CannotStart(e) => e.exit_code(),
            CompareError::Interrupted { .. } => 130,
            CompareError::AllFailed(_) | CompareError::Internal(_) => 1,
        }
    }
}

/// A validated comparison.
#[derive(Debug, Clone)]
pub struct ComparePlan {
    pub program: Vec<OsString>,
    pub strategies: Vec<Strategy>,
    pub baseline: usize,
    pub config: Config,
    pub metric_regex: Option<String>,
}

impl ComparePlan {
    /// Checks everything before the first run: the program starts, the numbers are in range,
    /// every strategy is valid on the machine; the baseline is added when it is not listed.
    pub fn new(r: Request, check: &MachineCheck) -> Result<ComparePlan, CompareError> {
        let usage = |m: String| CompareError::Usage(m);
        let Some(prog) = r.program.first() else {
            return Err(usage(
                "no program given; usage: autopin compare --runs RUNS --strategy S ... -- PROGRAM [ARGS]"
                    .into(),
            ));
        };
        check_program(prog)?;
        if r.runs == 0 {
            return Err(usage(
                "--runs must be at least 1 (2 or more to test differences)".into(),
            ));
        }
        if r.strategies.is_empty() {
            return Err(usage(
                "no strategies given; name at least one with --strategy (e.g. --strategy none --strategy 0,1)".into(),
            ));
        }
        if !(r.alpha > 0.0 && r.alpha < 1.0) {
            return Err(usage(format!(
                "--alpha must be between 0 and 1, got {}",
                r.alpha
            )));
        }
        if !(0.0..1.0).contains(&r.equivalence) {
            return Err(usage(format!(
                "--equivalence must be in [0, 1), got {}",
                r.equivalence
            )));
        }
        let adaptive_max_runs = match (r.adaptive, r.max_runs) {
            (true, Some(m)) if m < r.runs => {
                return Err(usage(format!("--max-runs {m} is below --runs {}", r.runs)))
            }
            (true, Some(m)) => Some(m),
            (true, None) => Some(r.runs.saturating_mul(5).max(30)),
            (false, Some(_)) => {
                return Err(usage("--max-runs only applies with --adaptive".into()))
            }
            (false, None) => None,
        };
        let metric = match &r.metric {
            Some(p) => Some(compile_metric(p).map_err(|e| usage(e.to_string()))?),
            None if r.higher_is_better => {
                return Err(usage(
                    "--higher-is-better needs --metric (wall time is always lower-is-better)"
                        .into(),
                ))
            }
            None => None,
        };
        let (strategies, baseline) = strategies(&r, check)?;
        let summary = SummaryConfig {
            alpha: r.alpha,
            better: if r.higher_is_better {
                Better::Higher
            } else {
                Better::Lower
            },
            include_failures: r.ignore_failure,
            bootstrap_resamples: r.bootstrap,
            seed: r.seed,
            equivalence: r.equivalence,
            uses_metric: metric.is_some(),
        };
        Ok(ComparePlan {
            program: r.program,
            strategies,
            baseline,
            config: Config {
                runs: r.runs,
                warmup: r.warmup,
                seed: r.seed,
                metric,
                summary,
                adaptive_max_runs,
            },
            metric_regex: r.metric,
        })
    }

    /// Runs per strategy the plan may reach (adaptive mode's limit, or the fixed count).
    pub fn max_runs(&self) -> usize {
        self.config.adaptive_max_runs.unwrap_or(self.config.runs)
    }

    /// Runs planned before adaptive mode adds any.
    pub fn planned_runs(&self) -> usize {
        (self.config.warmup + self.config.runs) * self.strategies.len()
    }
}

/// The strategies to compare, each validated against the machine, and the baseline's index.
fn strategies(r: &Request, check: &MachineCheck) -> Result<(Vec<Strategy>, usize), CompareError> {
    let mut out: Vec<Strategy> = Vec::new();
    for s in &r.strategies {
        let st = parse_strategy(s, check).map_err(|e| CompareError::Usage(e.to_string()))?;
        if out.iter().any(|x| x.name == st.name) {
            return Err(CompareError::Usage(format!(
                "strategy `{}` is listed twice",
                st.name
            )));
        }
        out.push(st);
    }
    let baseline = match &r.baseline {
        None => 0,
        Some(b) => {
            let st = parse_strategy(b, check)
                .map_err(|e| CompareError::Usage(format!("--baseline: {e}")))?;
            match out.iter().position(|x| x.name == st.name) {
                Some(i) => i,
                None => {
                    out.insert(0, st);
                    0
                }
            }
        }
    };
    Ok((out, baseline))
}

/// The program must start, before any run: under a pinning strategy it is started by
/// `autopin pin`, and a missing program would only show as failed runs.
fn check_program(prog: &OsStr) -> Result<(), CompareError> {
    autopin_launch::check_program(prog, std::env::var_os("PATH").as_deref())
        .map(|_| ())
        .map_err(CompareError::CannotStart)
}

/// What a comparison produced: the runs (also those completed before an interrupt or a
/// launch failure), their summaries, and how it ended.
pub struct Comparison {
    pub experiment: Experiment,
    pub summaries: Vec<StrategySummary>,
    /// The launch failure that stopped the experiment early, if one did.
    pub stopped_by: Option<LaunchError>,
}

/// Carries out `plan`: interleaved, randomly ordered rounds of every strategy.
pub fn compare(
    plan: &ComparePlan,
    setup: &Setup,
    runner: &mut dyn Runner,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(Event),
) -> Comparison {
    let mut experiment = Experiment::new(plan.strategies.clone(), plan.baseline);
    let stopped_by = experiment
        .run(setup, &plan.config, runner, interrupt, progress)
        .err();
    let summaries = summarize(&experiment, &plan.config.summary);
    Comparison {
        experiment,
        summaries,
        stopped_by,
    }
}

impl Comparison {
    /// The document the table and every export are built from.
    pub fn document<'a>(&'a self, plan: &ComparePlan) -> Document<'a> {
        let e = &self.experiment;
        Document {
            program: plan
                .program
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            baseline: e.strategies[e.baseline].name.clone(),
            runs_per_strategy: plan.config.runs,
            warmup_runs: e.warmup_runs,
            rounds: e.rounds,
            seed: plan.config.seed,
            alpha: plan.config.summary.alpha,
            value: if plan.config.summary.uses_metric {
                "metric"
            } else {
                "wall_s"
            },
            better: plan.config.summary.better,
            metric_regex: plan.metric_regex.clone(),
            interrupted: e.interrupted,
            strategies: &self.summaries,
        }
    }

    /// Runs measured, failed ones included.
    pub fn measured(&self) -> usize {
        self.summaries.iter().map(|s| s.runs.len()).sum()
    }

    /// How the comparison ended: Ok when it compared something (failed runs are counted and
    /// noted); else the reason, whose exit status the front end returns.
    pub fn verdict(self, plan: &ComparePlan) -> Result<(), CompareError> {
        if let Some(e) = self.stopped_by {
            return Err(CompareError::CannotStart(e));
        }
        if self.experiment.interrupted {
            return Err(CompareError::Interrupted {
                runs: self.measured(),
            });
        }
        if self.measured() > 0 && self.summaries.iter().all(|s| s.n_used == 0) {
            return Err(CompareError::AllFailed(
                self.all_failed_message(&plan.config.summary),
            ));
        }
        Ok(())
    }

    /// "every run failed (6 runs of 2 strategies: exit status 3) ..." with the end of the
    /// last failed run's stderr.
    fn all_failed_message(&self, cfg: &SummaryConfig) -> String {
        let e = &self.experiment;
        let runs: Vec<RunRecord> = e.records.iter().flatten().cloned().collect();
        let reasons = failure_reasons(&runs, cfg).join(", ");
        let strategies = match e.strategies.len() {
            1 => "1 strategy".to_string(),
            n => format!("{n} strategies"),
        };
        let mut msg = format!(
            "every run failed ({} run(s) of {strategies}: {reasons}); nothing to compare",
            runs.len()
        );
        if !cfg.include_failures && reasons.contains("exit status") {
            msg.push_str(" (--ignore-failure measures runs that exit non-zero)");
        }
        if let Some((strategy, tail)) = e
            .last_failure
            .as_ref()
            .filter(|(_, t)| !t.trim().is_empty())
        {
            msg.push_str(&format!(
                "\nautopin: the last failed run (`{strategy}`) ended its stderr with:"
            ));
            for l in tail_lines(tail) {
                msg.push_str(&format!("\n    | {l}"));
            }
        }
        msg
    }
}

/// The last three lines of a run's stderr, in order.
pub fn tail_lines(tail: &str) -> Vec<&str> {
    let mut v: Vec<&str> = tail.lines().rev().take(3).collect();
    v.reverse();
    v
}
