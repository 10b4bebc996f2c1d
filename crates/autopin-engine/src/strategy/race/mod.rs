//! `race`: successive elimination over interleaved short probes, judged to keep the work the
//! program loses small (docs/search.md explains the choices and the alternatives rejected).
//!
//! - **Each candidate's noise is its own.** A candidate is described by the logarithm of its
//!   mean probe rate (its work; a geometric mean would undervalue a swinging candidate), and
//!   the variance of one probe estimated from its own data — the spread between its probes,
//!   or the spread of the sampling ticks inside its probes divided by their number, whichever
//!   is larger (never below `noise_floor`). One candidate whose rate swings (the OS placement
//!   beside a busy CPU) widens only its own interval; the OS placement's ticks are not taken
//!   as independent, and it is judged by the half-the-leader and ceiling rules alone until it has been
//!   probed `os_probes` times and seen for `os_ticks` ticks.
//! - **Elimination** of a challenger by the leader (the highest mean) when any of these holds,
//!   each at the level `error` a comparison (one probe's ticks: `ONE_PROBE_ERROR`):
//!   a t-test on the log ratio — paired over the rounds that probed both once there are two
//!   (the machine's slow load changes hit both probes of a round and cancel), Welch's on the
//!   per-candidate variances before that; order dominance (every probe of the challenger below every probe of the
//!   leader, p = 1 / C(n_leader + n_challenger, n_challenger)); every sampling tick of the
//!   challenger below half of every tick of the leader; or a challenger whose ticks swing and
//!   never rose above the leader's mean (by more than `ceiling`), its mean well below it
//!   (`under_ceiling`: the leader is at worst `ceiling` behind it). A challenger seen in one probe only is
//!   dropped by the t-test only when the gap is at least `decisive_gap`, with the tick noise
//!   inflated by `one_probe_allowance` (drift slower than a probe is invisible to its ticks);
//!   a leader seen in one probe eliminates no candidate seen in more (its probe may have been
//!   a lucky one). The tests run after every probe, not only at a round's end: a candidate
//!   ruled out by the leader's newest probe is not probed again in that round.
//! - **Allocation by cost.** Probes of a candidate far behind the leader are lost work: they
//!   keep the base length. Only the leader and challengers within `close` of it, whose probes
//!   are noisier than `target_cv`, get longer probes (×1.5 a round, after `min_rounds`) — a
//!   close call costs little per second and needs slow fluctuations averaged out. A probe
//!   whose first ticks are below `cut_below` of the leader's lowest ends there
//!   (`seen_enough`); one whose warm-up already reads below `WARMUP_CUT` of it is the warm-up
//!   alone (`behind_at_warmup`), and a pinning read so at two warm-ups goes. Before the first
//!   round, four pinnings or more are scouted, each read for its warm-up alone, and the
//!   first round probes the best scouted first, so the rest can be cut short against it.
//! - **No decision without evidence.** No survivor confidently more than `tolerance` better
//!   than the leader ends the search with the leader (the reason states that bound);
//!   survivors confidently within `indistinct` of it, or a budget that ends before the
//!   leader is confidently ahead, keep the OS's own placement when it survives, or else the
//!   first surviving candidate, and the reason says so.
//!
//! Its rooms: `params` (the settings), `arm` (what is known of one candidate), `estimate`
//! (means, each candidate's own noise, the gap between two), `swing` (candidates whose rate
//! swings), `eliminate` (who goes), `judge` (when the race is over and what it keeps),
//! `schedule` (what to probe next, for how long), `cut` (probes that end early), `record` (a
//! probe's outcome taken in); the tests are in `tests/`.

mod arm;
mod cut;
mod eliminate;
mod estimate;
mod judge;
mod params;
mod record;
mod schedule;
mod swing;
#[cfg(test)]
mod tests;

pub use params::{RaceParams, SettingError};

use super::{ProbeOutcome, Step, Strategy, COLLAPSE};
use arm::Arm;
use eliminate::Why;

/// One search by the race: what it knows of each candidate, and where the rounds stand.
pub struct Race {
    p: RaceParams,
    arms: Vec<Arm>,
    queue: Vec<usize>,
    rounds: usize,
    /// The OS's own placement among the candidates.
    os_placement: Option<usize>,
    /// The pinning in force that a search checks (see [`Strategy::set_incumbent`]).
    incumbent: Option<usize>,
    /// The incumbent's score when it was decided (see [`Strategy::expect_incumbent`]).
    expected: Option<f64>,
    /// Why each eliminated candidate went.
    eliminated: Vec<Option<Why>>,
    /// Other work keeps some of the program's CPUs busy (`Strategy::set_busy_neighbours`).
    busy_neighbours: bool,
    /// Candidates still to scout, and the one being scouted (`next_scout`).
    scout_queue: Vec<usize>,
    scouting: Option<usize>,
    /// The scouting pass was planned (it is planned once, before the first round).
    scouted: bool,
    /// The search's clock when the probe being measured was planned.
    clock: f64,
    /// A change of the whole machine's load was taken out of the probes before it
    /// (`take_out_level_change`; once a search).
    level_changed: bool,
    /// The reading at the end of the warm-up in progress (`Strategy::warmed_up`), and the
    /// candidate it was of.
    warm_reading: Option<(usize, f64)>,
    /// Each whole probe of a pinning after a move: the share of its rate its warm-up missed.
    warmup_deficits: Vec<f64>,
    /// The warm-up is `quiet_warmup` now: a whole probe after a move showed no stall.
    quiet_moves: bool,
    /// How long the program had run when the search started (`Strategy::set_started_at`).
    started_at: f64,
    /// The start-up's reading of the pinning born on is a probe of the first round
    /// (`Strategy::set_settled_start`).
    settled_start: bool,
    /// The pinning born on, whose start-up reading was taken as its probe of the first
    /// round (`settled_start`).
    born_tail: Option<usize>,
}

/// The most autopin's moves of the threads may take of one CPU while the race searches
/// (see `move_cost`).
const MOVE_SHARE: f64 = 0.01;

impl Race {
    pub fn new(p: RaceParams, candidates: usize) -> Self {
        let base = p.base_probe();
        Race {
            arms: vec![Arm::fresh(base); candidates],
            p,
            queue: Vec::new(),
            rounds: 0,
            os_placement: None,
            incumbent: None,
            expected: None,
            eliminated: vec![None; candidates],
            busy_neighbours: false,
            scout_queue: Vec::new(),
            scouting: None,
            scouted: false,
            clock: 0.0,
            level_changed: false,
            warm_reading: None,
            warmup_deficits: Vec::new(),
            quiet_moves: false,
            started_at: 0.0,
            settled_start: false,
            born_tail: None,
        }
    }

    /// Candidates still in the running.
    pub fn survivors(&self) -> Vec<usize> {
        (0..self.arms.len())
            .filter(|&i| self.arms[i].alive)
            .collect()
    }
}

/// The wiring: what the session tells the race is kept here, what it asks is answered in the
/// rooms (`schedule`, `cut`, `record`).
impl Strategy for Race {
    fn name(&self) -> &'static str {
        "race"
    }

    fn settings(&self) -> String {
        format!(
            "race over {} candidates, {:?}, OS placement {:?}, busy neighbours {}",
            self.arms.len(),
            self.p,
            self.os_placement,
            self.busy_neighbours
        )
    }

    fn next(&mut self, elapsed: f64) -> Step {
        self.next_step(elapsed)
    }

    fn set_incumbent(&mut self, candidate: usize) {
        self.incumbent = (candidate < self.arms.len()).then_some(candidate);
    }

    fn expect_incumbent(&mut self, score: f64) {
        self.expected = (score.is_finite() && score > 0.0).then_some(score);
    }

    fn takes_earlier_probes(&self) -> bool {
        true
    }

    fn set_settled_start(&mut self) {
        self.settled_start = true;
    }

    fn set_busy_neighbours(&mut self, busy: bool) {
        self.busy_neighbours = busy;
    }

    fn set_started_at(&mut self, program_seconds: f64) {
        if program_seconds.is_finite() && program_seconds >= 0.0 {
            self.started_at = program_seconds;
        }
    }

    fn set_shares_cpus(&mut self, candidate: usize) {
        if let Some(a) = self.arms.get_mut(candidate) {
            a.shares_cpus = true;
        }
    }

    fn set_fewer_threads(&mut self, candidate: usize) {
        if let Some(a) = self.arms.get_mut(candidate) {
            a.fewer_threads = true;
        }
    }

    fn set_os_placement(&mut self, candidate: usize) {
        self.os_placement = Some(candidate);
    }

    /// A probe lasts at least 1/`MOVE_SHARE` times the CPU time its move took: a program of
    /// thousands of threads costs a system call per thread a move (about 5 ms at 2000
    /// threads), which at the base probe's pace is several % of a CPU; a few threads cost
    /// microseconds and leave the probes as they are.
    fn move_cost(&mut self, cpu_seconds: f64) -> Option<f64> {
        let floor = (cpu_seconds / MOVE_SHARE).min(self.p.max_probe);
        if floor.is_nan() || floor <= self.p.min_probe {
            return None;
        }
        self.p.min_probe = floor;
        for a in &mut self.arms {
            a.probe_len = a.probe_len.max(floor);
        }
        Some(floor)
    }

    fn seen_enough(&self, c: usize, ticks: &[f64]) -> bool {
        self.cut_on_ticks(c, ticks)
    }

    fn behind_at_warmup(&self, c: usize, score: f64) -> bool {
        self.cut_at_warmup(c, score)
    }

    /// The OS placement beside CPUs busy with other work: the kernel may stack its threads
    /// (or put one beside the busy work) at any moment, and a probe that began in its fast
    /// state would spend its remaining ticks in the slow one (GROMACS: 13 000 constructs/s
    /// at one tick, 190 at the next, for a whole tick). Once another candidate has ticks
    /// to tell a collapse by.
    fn watched(&self, c: usize) -> bool {
        self.os_placement == Some(c) && self.busy_neighbours && self.look_reference(c).is_some()
    }

    /// A look below `COLLAPSE` of the lowest tick of the leader, or of the best other
    /// survivor when `c` leads (as a warm-up's collapse is judged, stalls allowed for).
    /// Below `cut_below` where the leader is a team of the free CPUs that outnumbers the
    /// OS placement (`Race::outnumbering_team`): the look is then all the OS placement
    /// needs (its every look below that goes), and the rest of its tick was lost work
    /// (0.08 s at 0.75 of the team in a 2.3 s program beside a busy CPU).
    fn collapsed(&self, c: usize, score: f64) -> bool {
        self.look_reference(c).is_some_and(|r| {
            let share = match self.outnumbering_team(r, c) {
                Some(_) => self.p.cut_below,
                None => COLLAPSE,
            };
            self.warmup_below(r, score, share)
        })
    }

    fn warmed_up(&mut self, candidate: usize, score: f64) {
        self.warm_reading = Some((candidate, score));
    }

    fn record(&mut self, outcome: ProbeOutcome) {
        self.take_outcome(outcome);
    }
}
