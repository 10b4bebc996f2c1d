//! Strategies: pure planners that say which candidate to probe next and when to decide.
//! They see only probe results (a rate per probe) and the search clock; the [`crate::session`]
//! turns their steps into pin/measure actions.

mod autopin1;
mod fixed;
mod level_change;
mod race;

pub use autopin1::{Autopin1, Autopin1Params};
pub use fixed::Fixed;
pub use race::{Race, RaceParams, SettingError};

use serde::Serialize;

/// What a strategy learned from one probe. `score` is the objective oriented so that more is
/// better (the session inverts lower-is-better objectives).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeOutcome {
    pub candidate: usize,
    pub score: f64,
    pub duration: f64,
    /// Relative spread of the sampling intervals inside the probe (noise estimate).
    pub interval_cv: Option<f64>,
    /// Lowest and highest score of the sampling intervals inside the probe (None when the
    /// probe had no usable interval).
    pub interval_range: Option<(f64, f64)>,
    /// Sampling intervals behind `interval_cv` (0 when unknown).
    pub intervals: usize,
    /// The probe ended at a look that read a collapse ([`Strategy::collapsed`]): `score`
    /// takes its planned length as spent in that state.
    pub ended_collapsed: bool,
}

/// The strategy's next step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Pin `candidate`, wait `warmup` seconds, then measure for `measure` seconds.
    Probe {
        candidate: usize,
        warmup: f64,
        measure: f64,
    },
    /// Stop searching and keep this candidate.
    Decide(Decision),
}

/// A decision and how sure the strategy is about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub candidate: usize,
    /// Mean score of the winner over its probes (None for `fixed`, which measures nothing).
    pub score: Option<f64>,
    /// The best other candidate still in the running at the end, and its mean score.
    pub runner_up: Option<usize>,
    pub runner_up_score: Option<f64>,
    /// (winner − runner-up) / runner-up: how much better the winner looked.
    pub margin: Option<f64>,
    /// Half-width of the confidence interval of that relative difference (None when the
    /// strategy does not compute one, e.g. autopin1 with one probe per candidate).
    pub margin_ci: Option<f64>,
    /// Why the search stopped.
    pub reason: String,
}

impl Decision {
    /// A decision taken without measurements: `candidate`, with nothing to compare.
    pub fn unmeasured(candidate: usize, reason: impl Into<String>) -> Self {
        Decision {
            candidate,
            score: None,
            runner_up: None,
            runner_up_score: None,
            margin: None,
            margin_ci: None,
            reason: reason.into(),
        }
    }
}

/// A candidate-search policy. `elapsed` is the time since the search started.
pub trait Strategy {
    fn name(&self) -> &'static str;
    /// What makes this search decide as it does given the same probe outcomes: its name,
    /// parameters and candidate count. Ranks that search together compare it, since only
    /// searches of the same settings take their decisions in the same round.
    fn settings(&self) -> String {
        self.name().to_string()
    }
    fn next(&mut self, elapsed: f64) -> Step;
    fn record(&mut self, outcome: ProbeOutcome);
    /// Which candidate is the OS's own placement (unpinned), if any: a search whose
    /// candidates cannot be told apart keeps it rather than pin for nothing.
    fn set_os_placement(&mut self, _candidate: usize) {}
    /// Whether other work keeps some of the program's CPUs busy when the search starts. The
    /// OS placement's rate then depends on where the kernel puts the threads beside that
    /// work, which may change after the search (a thread moved onto a busy CPU, two stacked
    /// on a free one), while a pinning's cannot: a search that cannot tell the OS placement
    /// from the best pinning keeps the pinning. Ignored by default.
    fn set_busy_neighbours(&mut self, _busy: bool) {}
    /// How long the program had run when the search started, seconds: a deadline counted
    /// from the program's start (the race's `deadline`). Ignored by default.
    fn set_started_at(&mut self, _program_seconds: f64) {}
    /// The program ran its start-up on the pinning it was born on for as long as a search
    /// waits there (`SearchParams::born_wait`): that pinning's start-up reading, given
    /// before the first step, is a probe of the search, not a start-up's. Ignored by
    /// default.
    fn set_settled_start(&mut self) {}
    /// A candidate that puts two of the program's threads or more on one CPU: a collapse
    /// right after a move to it is what it does (threads waiting for each other on one
    /// CPU), where after a move to any other it may be the move's own stall. Ignored by
    /// default.
    fn set_shares_cpus(&mut self, _candidate: usize) {}
    /// A candidate that runs fewer threads than the program would (a team of the CPUs free
    /// of other work, docs/threads.md). Ignored by default.
    fn set_fewer_threads(&mut self, _candidate: usize) {}
    /// Which candidate is in force already and stays unless another is shown better (a
    /// remembered decision being checked): it is what indistinguishable candidates keep.
    fn set_incumbent(&mut self, _candidate: usize) {}
    /// The incumbent's score when it was decided: a first probe of it at about that score
    /// confirms it without a probe of any other candidate. Ignored by default.
    fn expect_incumbent(&mut self, _score: f64) {}
    /// Whether the probe of `candidate` in progress may end now, given the scores of its
    /// sampling intervals so far: one far behind the leader need not be watched for the
    /// whole probe (each further interval is work the program loses). Never, by default.
    fn seen_enough(&self, _candidate: usize, _ticks: &[f64]) -> bool {
        false
    }
    /// Whether the probe of `candidate` ends at its warm-up, read at `score`: it already
    /// shows the candidate so far behind the leader that no tick of it is needed, or the
    /// strategy wanted no more than that reading (the race's scouts). Its probe is then the
    /// warm-up alone. Never, by default.
    fn behind_at_warmup(&self, _candidate: usize, _score: f64) -> bool {
        false
    }
    /// Whether a probe of `candidate` is looked at between its ticks (`Session::look_due`):
    /// its rate may fall away within a probe, and each tick of a collapse is work lost.
    /// Never, by default.
    fn watched(&self, _candidate: usize) -> bool {
        false
    }
    /// Whether a look at a watched probe of `candidate`, read at `score`, shows a collapse
    /// that ends the probe there (the strategy then takes the probe's outcome as ending in
    /// that state). Never, by default.
    fn collapsed(&self, _candidate: usize, _score: f64) -> bool {
        false
    }
    /// The score read when the warm-up of a probe of `candidate` ended (the session reads it
    /// when the reading is clean and fine enough to be a rate), before the probe's outcome
    /// is recorded. Ignored by default.
    fn warmed_up(&mut self, _candidate: usize, _score: f64) {}
    /// Whether probes recorded before the first `next` (the OS placement measured while the
    /// program started) count as that candidate's first: it is then not probed again in the
    /// first round. Never, by default (a strategy with a fixed probe order keeps it).
    fn takes_earlier_probes(&self) -> bool {
        false
    }
    /// What moving the threads onto a probe's candidate cost autopin (its CPU seconds):
    /// the new shortest probe when the strategy lengthened its probes for it, so that moves
    /// take a small share of a CPU. Ignored by default.
    fn move_cost(&mut self, _cpu_seconds: f64) -> Option<f64> {
        None
    }
}

/// A warm-up read below this share of the leader's lowest tick is the candidate's whole probe
/// ([`Strategy::behind_at_warmup`]). A cold cache slows a good pinning far less in its first
/// 20 ms (a last-level cache refills in a few milliseconds); a spinning barrier whose threads
/// now share a CPU, or a thread moved onto a busy CPU, reads 2–1000× slower from the start.
pub const WARMUP_CUT: f64 = 0.4;

/// A warm-up read below this share of the leader's lowest tick shows a collapse.
pub const COLLAPSE: f64 = 0.1;

/// Per-candidate mean scores; None for candidates never probed.
pub(crate) fn means(samples: &[Vec<f64>]) -> Vec<Option<f64>> {
    samples.iter().map(|s| autopin_stats::mean(s)).collect()
}

/// Index of the highest mean among `alive` candidates that have one.
pub(crate) fn best_of(means: &[Option<f64>], alive: &[bool]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, m) in means.iter().enumerate() {
        if let (Some(m), true) = (m, alive[i]) {
            if best.is_none_or(|b| *m > means[b].unwrap_or(f64::NEG_INFINITY)) {
                best = Some(i);
            }
        }
    }
    best
}

/// Decision from means only (no confidence interval): winner, runner-up, margin.
pub(crate) fn decide_by_means(
    samples: &[Vec<f64>],
    alive: &[bool],
    reason: &str,
) -> Option<Decision> {
    let m = means(samples);
    let best = best_of(&m, alive)?;
    let mut others = alive.to_vec();
    others[best] = false;
    let runner = best_of(&m, &others);
    let best_score = m[best];
    let runner_score = runner.and_then(|r| m[r]);
    Some(Decision {
        candidate: best,
        score: best_score,
        runner_up: runner,
        runner_up_score: runner_score,
        margin: match (best_score, runner_score) {
            (Some(b), Some(r)) if r > 0.0 => Some((b - r) / r),
            _ => None,
        },
        margin_ci: None,
        reason: reason.to_string(),
    })
}
