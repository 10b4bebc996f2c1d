//! What the race knows of one candidate (`Arm`): each probe's score, length, round and start,
//! the spread of its ticks, the lowest and highest of them, and what ended each probe.

/// What the race knows about one candidate.
#[derive(Debug, Clone)]
pub(super) struct Arm {
    /// Score of each probe (more is better).
    pub(super) scores: Vec<f64>,
    /// How long each probe measured, seconds.
    pub(super) lengths: Vec<f64>,
    /// The round each probe was taken in (0: before the search, e.g. the start-up).
    pub(super) rounds: Vec<usize>,
    /// Σ (ticks − 1) · (variance of ln(tick score) inside the probe), and Σ (ticks − 1).
    pub(super) within_ss: f64,
    pub(super) within_df: f64,
    /// Ticks behind `within_*`, and the probes they came from.
    pub(super) ticks: f64,
    pub(super) tick_probes: f64,
    pub(super) alive: bool,
    pub(super) probe_len: f64,
    /// Sampling ticks seen over all probes.
    pub(super) seen_ticks: f64,
    /// The widest span of one probe's ticks (highest ÷ lowest; 1 before any).
    pub(super) probe_swing: f64,
    /// Probes that ended at their warm-up in a collapse (below `COLLAPSE` of the leader).
    pub(super) warmup_collapses: usize,
    /// A reading longer than a warm-up is in `range`.
    pub(super) ranged_whole: bool,
    /// The candidate puts two threads or more on one CPU (`Strategy::set_shares_cpus`).
    pub(super) shares_cpus: bool,
    /// The candidate runs fewer threads than the program's own count, on CPUs free of other
    /// work (`Strategy::set_fewer_threads`).
    pub(super) fewer_threads: bool,
    /// Its reading in the scouting pass (a warm-up alone, before the first round: see
    /// `Race::next_scout`) and the search's clock when it was taken.
    pub(super) scout: Option<(f64, f64)>,
    /// Probes of the search that ended at their warm-up (`Strategy::behind_at_warmup`).
    pub(super) warmup_cuts: usize,
    /// When each probe began, on the search's clock (`Race::take_out_level_change`).
    pub(super) starts: Vec<f64>,
    /// The lowest and highest tick of each probe that counts towards `Arm::range` (None:
    /// it counts for none).
    pub(super) ranges: Vec<Option<(f64, f64)>>,
    /// Each probe ended at a look that read a collapse (`Strategy::collapsed`).
    pub(super) ended_collapsed: Vec<bool>,
}

impl Arm {
    /// A candidate not probed yet, whose first probe is to last `probe_len` seconds.
    pub(super) fn fresh(probe_len: f64) -> Self {
        Arm {
            scores: Vec::new(),
            lengths: Vec::new(),
            rounds: Vec::new(),
            within_ss: 0.0,
            within_df: 0.0,
            ticks: 0.0,
            tick_probes: 0.0,
            alive: true,
            probe_len,
            seen_ticks: 0.0,
            probe_swing: 1.0,
            warmup_collapses: 0,
            ranged_whole: false,
            shares_cpus: false,
            fewer_threads: false,
            scout: None,
            warmup_cuts: 0,
            starts: Vec::new(),
            ranges: Vec::new(),
            ended_collapsed: Vec::new(),
        }
    }

    /// No probe of the search has measured it yet (none at all, or only before the
    /// search: the program's start-up, a remembered pinning's check).
    pub(super) fn unsearched(&self) -> bool {
        self.searched_probes() == 0
    }

    /// Its probes of the search (those before it, the start-up's or a check's, left out).
    pub(super) fn searched_probes(&self) -> usize {
        self.rounds.iter().filter(|&&r| r > 0).count()
    }

    /// The highest reading of its probes of the search: each probe's highest tick, or its
    /// score where it had no ticks (0 with none).
    pub(super) fn searched_high(&self) -> f64 {
        (0..self.scores.len())
            .filter(|&i| self.rounds[i] > 0)
            .map(|i| self.ranges[i].map_or(self.scores[i], |(_, hi)| hi.max(self.scores[i])))
            .fold(0.0, f64::max)
    }

    /// Probe `i` measured more than its warm-up.
    pub(super) fn whole(&self, i: usize, warmup: f64) -> bool {
        !warmup_only(self.lengths[i], warmup)
    }

    /// Lowest and highest tick score over all probes (None before a tick that counts).
    pub(super) fn range(&self) -> Option<(f64, f64)> {
        self.ranges.iter().flatten().fold(None, |r, &(lo, hi)| {
            Some(r.map_or((lo, hi), |(x, y)| (x.min(lo), y.max(hi))))
        })
    }

    /// Lowest and highest probe score (infinite with no probe).
    pub(super) fn score_range(&self) -> (f64, f64) {
        self.scores
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
                (lo.min(*s), hi.max(*s))
            })
    }
}

/// A probe of this length measured no more than its warm-up (the probe
/// `Strategy::behind_at_warmup` ended there).
pub(super) fn warmup_only(duration: f64, warmup: f64) -> bool {
    duration <= 1.5 * warmup
}
