//! The session: a pure state machine between the OS-facing driver and a strategy.
//!
//! It is fed one observation per sampling interval (objective amount, per-thread amounts,
//! whether threads were born or exited, the heartbeat phase) and answers with actions (apply
//! candidate k, print a progress line). It owns the timing (init, warm-up, measure), turns
//! strategy steps into probes, keeps the decision, runs the `PhaseWatch` afterwards and
//! records everything for the report. No OS calls, so a simulated 96-CPU machine runs
//! through it in milliseconds.
//!
//! Phases: when the program names its phases (heartbeat channel), each phase has its own
//! search, and probes of different phases are never compared — a barrier phase and a
//! streaming phase can differ 1000× in beats/s. An interval that spans a phase change is
//! left out. A phase change during a search parks that phase's search (resumed when the
//! phase returns); entering a phase already decided re-applies its winner; a new phase gets
//! its own search, for at most `max_phase_searches` phases. Programs that name no phases
//! are watched for rate drops instead (`PhaseWatch`).
//!
//! Its rooms: `states` (one reading, by the state it finds: init, warm-up, probe, decided),
//! `startup` (the start-up's tail as a first probe), `search` (a search begun, its
//! candidates, the strategy's steps taken), `probe` (one probe as it accumulates), `record`
//! (probe accounting: a finished probe into the report and before the strategy, and the
//! evidence of a search), `grain` (how coarse the objective is), `growth` (threads that
//! outgrow the candidates), `phases` (program phases: what is remembered of each, and a
//! phase change), `decide` (a decision, through the rule for risky decisions in `risk`, with
//! its `margin`), `cost` (what a search cost), `finish` (the end: the program's, or a
//! detach). This file holds the types the driver sees and the session's small questions.

mod cost;
mod decide;
mod finish;
mod grain;
mod growth;
mod margin;
mod phases;
mod probe;
mod record;
mod risk;
mod search;
mod startup;
mod states;

use crate::phase::{PhaseWatch, WatchParams};
use crate::report::Report;
use crate::strategy::Strategy;
use autopin_placement::Pinning;
use grain::Granularity;
use growth::ThreadGrowth;
use phases::PhaseMemo;
use probe::ProbeAccumulator;
use std::collections::BTreeMap;

pub(crate) use startup::STARTUP_ENOUGH;

/// A rate as a score, more being better (lower-is-better objectives are inverted).
fn oriented(higher_is_better: bool, rate: f64) -> f64 {
    if higher_is_better {
        rate
    } else if rate > 0.0 {
        1.0 / rate
    } else {
        0.0
    }
}

/// One sampling interval as the driver saw it.
#[derive(Debug, Clone, Default)]
pub struct Interval {
    pub start: f64,
    pub end: f64,
    /// Objective amount over the interval (instructions, heartbeats, joules...), counted
    /// only over threads present for the whole interval.
    pub amount: f64,
    /// (tid, tracked index, amount) for threads present for the whole interval.
    pub per_thread: Vec<(u32, usize, f64)>,
    /// Threads were born or exited during the interval.
    pub disturbed: bool,
    /// The team size asked of the program's OpenMP runtime was not in force at one of the
    /// interval's readings: a region begun under the team before ran for some of it, so what
    /// was measured is not the candidate's (a region keeps its team until it ends). Probes
    /// leave it out.
    pub team_lag: bool,
    /// Number of tracked (pinned) threads at the end of the interval.
    pub tracked: usize,
    /// Threads the target has had so far, where known (see `ThreadSnapshot::existed`).
    pub existed: Option<usize>,
    /// Phase name most recently announced through the heartbeat channel.
    pub phase: Option<String>,
    /// The program announced a phase change during the interval (its rate mixes two
    /// phases): probes leave it out.
    pub phase_changed: bool,
    /// The program's own progress over the interval (heartbeats or OpenMP constructs) and
    /// its name, when known besides the objective.
    pub progress: Option<(f64, &'static str)>,
}

impl Interval {
    /// Whether the interval is wholly the probe's in `phase`: no thread came or went, the
    /// candidate's team was in force, and the program stayed in that phase.
    pub(crate) fn clean_in(&self, phase: &Option<String>) -> bool {
        !self.disturbed && !self.team_lag && !self.phase_changed && self.phase == *phase
    }
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Re-pin every tracked thread according to candidate k (and new threads from now on).
    Apply(usize),
    /// A progress line for stderr.
    Message(String),
}

/// Makes the strategy for a search: (number of candidates, search index) → strategy.
pub type StrategyFactory = Box<dyn FnMut(usize, usize) -> Box<dyn Strategy>>;
/// Makes the candidates for the number of tracked threads.
pub type CandidateFactory = Box<dyn FnMut(usize) -> CandidateList>;

/// The candidates of one search, and what the user should know about how they were made.
#[derive(Debug, Clone, Default)]
pub struct CandidateList {
    pub pinnings: Vec<Pinning>,
    /// A line for stderr and the report (e.g. which CPUs were found busy).
    pub note: Option<String>,
    /// The CPUs other work kept busy when the list was made (None: not watched): the
    /// report's `busy_cpus`, and what a remembered decision keeps of its surroundings.
    pub busy: Option<Vec<u32>>,
}

impl From<Vec<Pinning>> for CandidateList {
    fn from(pinnings: Vec<Pinning>) -> Self {
        CandidateList {
            pinnings,
            note: None,
            busy: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Seconds to let the program initialize before the first probe (paper's `i`).
    pub init: f64,
    /// Print the running rate every this many seconds after a decision (paper's `t`).
    pub report_every: f64,
    /// PhaseWatch settings; None disables re-searching.
    pub watch: Option<WatchParams>,
    pub higher_is_better: bool,
    /// Unit for progress lines (e.g. "instructions/s").
    pub unit: String,
    /// At most this many distinct program phases get their own search; later new phases
    /// keep the pinning in force.
    pub max_phase_searches: usize,
    /// After `init`, wait up to this many more seconds while the objective stays at zero.
    pub init_extra: f64,
    /// Seconds the program already ran before the session started (e.g. while autopin
    /// watched for a heartbeat to choose the objective); part of the init time, for messages.
    pub init_waited: f64,
    /// The first search checks its first candidate, already in force (a remembered
    /// decision): what it cannot show worse stays.
    pub check_first: bool,
    /// The checked candidate's rate when it was decided (in this run's unit), when known.
    pub check_rate: Option<f64>,
    /// The program starts where the OS places it (launched, nothing applied at its birth):
    /// the end of its start-up is the OS placement's first probe.
    pub startup_is_os: bool,
    /// The program starts pinned to these CPUs (in thread creation order, wrapping), a
    /// candidate's pinning chosen around CPUs busy at launch: the end of its start-up is
    /// that candidate's first probe, as it would be the OS placement's.
    pub startup_pinned: Option<Vec<u32>>,
    /// The program's OpenMP regions are asked for this team size from birth (fewer
    /// threads plausible at launch), on the first of `startup_pinned`'s CPUs: until a
    /// candidate is applied the team asked stays this, and the start-up's tail is the
    /// matching team candidate's first probe where the search offers one.
    pub startup_team: Option<usize>,
    /// The objective is progress the program reports itself (heartbeats, OpenMP
    /// constructs): the init ends as soon as the start-up's clean tail has been seen for
    /// `STARTUP_ENOUGH` (the OS placement's first probe), not when the init time is over.
    /// CPU time or counted events would also count a program reading its input.
    pub startup_ends_init: bool,
    /// The program was born on a pinning off the busy CPUs and the first search waited
    /// until it had run `born_wait` there: the start-up's tail is a reading of a program
    /// well past its first second, as good as a probe of the search
    /// (`Strategy::set_settled_start`).
    pub startup_settled: bool,
    /// Phases decided in an earlier run: (phase, candidate label, the rate it was decided
    /// at). Entering one applies its pinning without a search; the phase watch holds it to
    /// that rate.
    pub remembered_phases: Vec<(String, String, Option<f64>)>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            init: 0.5,
            report_every: 5.0,
            watch: Some(WatchParams::default()),
            higher_is_better: true,
            unit: "/s".into(),
            max_phase_searches: 4,
            init_extra: 5.0,
            init_waited: 0.0,
            check_first: false,
            check_rate: None,
            startup_is_os: false,
            startup_pinned: None,
            startup_team: None,
            startup_ends_init: false,
            startup_settled: false,
            remembered_phases: Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
enum State {
    Init {
        until: f64,
    },
    Warmup {
        cand: usize,
        until: f64,
        measure: f64,
        /// The probe length the strategy asked for (`measure` may be longer for the grain).
        asked: f64,
        warmup: f64,
        phase: Option<String>,
    },
    Measure(ProbeAccumulator),
    Decided {
        since_report: f64,
        amount: f64,
    },
}

pub struct Session {
    cfg: SessionConfig,
    make_candidates: CandidateFactory,
    make_strategy: StrategyFactory,
    candidates: Vec<Pinning>,
    strategy: Option<Box<dyn Strategy>>,
    strategy_name: String,
    state: State,
    applied: Option<usize>,
    search: usize,
    searches_started: usize,
    search_start: f64,
    /// Search time of the current search spent before `search_start` (earlier segments of
    /// the same phase, interrupted by other phases).
    search_before: f64,
    watch: Option<PhaseWatch>,
    tracked: usize,
    phase: Option<String>,
    phases: BTreeMap<Option<String>, PhaseMemo>,
    phase_searches: usize,
    /// When the program entered its current phase (session time).
    phase_since: f64,
    /// Phases left sooner than `BRIEF_PHASE` after they were entered, during a search.
    brief_phases: usize,
    /// The program's phases change faster than a probe can measure one: it is searched as
    /// one program, its phase names set aside (`Session::set_phases_aside`).
    phases_aside: bool,
    decided_once: bool,
    /// Name of the program's own progress measure seen in probes (for the objective check).
    progress_source: Option<&'static str>,
    /// The start-up is over but the objective still reads zero, and the user was told.
    said_no_progress: bool,
    /// When the last reading ended (session time).
    last_reading: f64,
    /// How coarse the objective is, learned during start-up.
    grain: Granularity,
    /// The program set its own threads' CPUs while autopin ran: autopin stands back.
    stood_back: bool,
    /// The start-up's clean tail, where the OS placed the program (see `note_startup`).
    startup: Option<ProbeAccumulator>,
    /// The objective counted something during start-up (what came before was loading).
    startup_progressed: bool,
    /// The threads the candidate list was made for, against those the program runs.
    growth: ThreadGrowth,
    /// Each candidate's index among the report's candidates, which hold every candidate of
    /// every search (a re-search's list may differ): every index the report states is one
    /// of those.
    report_ids: Vec<usize>,
    pub report: Report,
}

/// A rate as a score (higher is better) or a score as a rate: the same for an objective
/// where more is better, the inverse where less is (the map is its own inverse).
fn on_scale(higher_is_better: bool, v: f64) -> f64 {
    if higher_is_better || v <= 0.0 {
        v
    } else {
        1.0 / v
    }
}

impl Session {
    pub fn new(
        cfg: SessionConfig,
        make_candidates: CandidateFactory,
        make_strategy: StrategyFactory,
    ) -> Self {
        let watch = cfg.watch.map(PhaseWatch::new);
        let phases = cfg
            .remembered_phases
            .iter()
            .map(|(phase, label, rate)| {
                // The watch compares scores (higher is better).
                let score = rate.map(|r| on_scale(cfg.higher_is_better, r));
                let memo = PhaseMemo {
                    decided: Some((label.clone(), score)),
                    searched: true,
                    remembered: true,
                    ..PhaseMemo::default()
                };
                (Some(phase.clone()), memo)
            })
            .collect();
        Session {
            cfg,
            make_candidates,
            make_strategy,
            candidates: Vec::new(),
            strategy: None,
            strategy_name: String::new(),
            state: State::Init { until: 0.0 },
            applied: None,
            search: 0,
            searches_started: 0,
            search_start: 0.0,
            search_before: 0.0,
            watch,
            tracked: 0,
            phase: None,
            phases,
            phase_searches: 0,
            phase_since: 0.0,
            brief_phases: 0,
            phases_aside: false,
            decided_once: false,
            progress_source: None,
            said_no_progress: false,
            last_reading: 0.0,
            grain: Granularity::default(),
            stood_back: false,
            startup: None,
            startup_progressed: false,
            growth: ThreadGrowth::default(),
            report_ids: Vec::new(),
            report: Report {
                tool: "autopin".into(),
                ..Default::default()
            },
        }
    }

    /// Starts the session at `now`: waits `init` seconds before the first search.
    pub fn start(&mut self, now: f64) -> Vec<Action> {
        self.state = State::Init {
            until: now + self.cfg.init,
        };
        let total = self.cfg.init + self.cfg.init_waited;
        // A program pinned at its birth (a remembered decision, a strategy that starts on its
        // first candidate) did not run where the OS placed it.
        let place = if self.cfg.startup_is_os {
            "where the OS placed it"
        } else {
            "on the CPUs it started on"
        };
        let msg = if self.cfg.init_waited > 0.0 && self.cfg.init <= 0.0 {
            format!(
                "the program has run {:.1} s {place}; probing starts now",
                self.cfg.init_waited
            )
        } else if self.cfg.init_waited > 0.0 && self.cfg.startup_ends_init && self.startup_probed()
        {
            format!(
                "the program has run {:.1} s {place}; probing starts once {STARTUP_ENOUGH:.1} s of its progress has been seen, within {:.1} s",
                self.cfg.init_waited, self.cfg.init
            )
        } else if self.cfg.init_waited > 0.0 {
            format!(
                "the program has run {:.1} s {place}; probing starts in {:.1} s ({total:.1} s start-up in all)",
                self.cfg.init_waited, self.cfg.init
            )
        } else {
            format!("letting the program start for {total:.1} s before probing")
        };
        vec![Action::Message(msg)]
    }

    /// Begins the first search at `now` when the start-up time is already over (the
    /// objective's choice waited it out) and the program's threads are known, instead of
    /// at the first measured interval.
    pub fn begin_if_due(&mut self, now: f64, tracked: usize) -> Vec<Action> {
        let mut out = Vec::new();
        if let State::Init { until } = self.state {
            if tracked > 0 && self.cfg.init_waited > 0.0 && now >= until - 1e-9 {
                self.tracked = tracked;
                self.report.threads_seen = self.report.threads_seen.max(tracked);
                self.first_search(now, &mut out);
            }
        }
        out
    }

    /// The candidates of the current search.
    pub fn candidates(&self) -> &[Pinning] {
        &self.candidates
    }

    /// The candidate currently applied (None before the first probe, and once autopin
    /// stood back from a program that pins itself).
    pub fn applied(&self) -> Option<&Pinning> {
        if self.stood_back {
            return None;
        }
        self.applied.and_then(|i| self.candidates.get(i))
    }

    /// The team size asked of the program's OpenMP runtime before its start (None: none).
    pub fn team_asked_at_birth(&self) -> Option<usize> {
        self.cfg.startup_team
    }

    /// The team size to ask of the program's OpenMP runtime now (None: its own count): the
    /// applied candidate's, or before any, the one asked at birth.
    pub fn team_asked(&self) -> Option<usize> {
        match (self.stood_back, self.applied()) {
            (true, _) => None,
            (false, Some(p)) => p.team,
            (false, None) => self.cfg.startup_team,
        }
    }

    /// False once nothing needs the counters any more: decided, no PhaseWatch and no
    /// periodic rate output, or stood back. The driver then stops counting so it no longer
    /// taxes the target.
    pub fn wants_counting(&self) -> bool {
        !(self.stood_back
            || self.is_decided() && self.watch.is_none() && !self.cfg.report_every.is_finite())
    }

    /// The program changed its own threads' CPUs (`what` says how) at `now`: its binding is
    /// deliberate, and fighting it would label probes with pinnings that were never in
    /// force. The search ends, nothing is pinned any more, and the report names the
    /// program's own binding as the final pinning. `--override-binding` keeps the search.
    pub fn stand_back(&mut self, now: f64, what: &str) -> Vec<Action> {
        if self.stood_back {
            return Vec::new();
        }
        self.close_open_search(now);
        self.stood_back = true;
        self.report.decision = None;
        self.report.own_binding = Some(what.to_string());
        let msg = format!(
            "{what}: the program binds its own threads, so autopin stands back (no more probes or pinning) and leaves that binding in force; --override-binding lets autopin choose"
        );
        self.report.notes.push(msg.clone());
        vec![Action::Message(msg)]
    }

    /// True once autopin stood back from a program that pins itself.
    pub fn stood_back(&self) -> bool {
        self.stood_back
    }

    /// When the warm-up in progress ends (session time), None outside a warm-up. A driver
    /// that reads its counters at that moment, rather than at the next tick, makes a short
    /// warm-up cost its own length.
    pub fn warmup_ends(&self) -> Option<f64> {
        match self.state {
            State::Warmup { until, .. } => Some(until),
            _ => None,
        }
    }

    /// What moving `threads` threads onto the applied candidate cost autopin (CPU seconds):
    /// the strategy may lengthen its probes so that moves stay a small share of a CPU, and
    /// the report then says so (one note, with the latest length).
    pub fn moved(&mut self, cpu_seconds: f64, threads: usize) {
        let Some(floor) = self
            .strategy
            .as_mut()
            .and_then(|s| s.move_cost(cpu_seconds))
        else {
            return;
        };
        const NOTE: &str = "probes of at least ";
        let note = format!(
            "{NOTE}{floor:.2} s: moving {threads} threads took {:.1} ms of autopin's CPU, which shorter probes would repeat more often",
            cpu_seconds * 1e3
        );
        match self.report.notes.iter_mut().find(|n| n.starts_with(NOTE)) {
            Some(n) => *n = note,
            None => self.report.notes.push(note),
        }
    }

    /// Counts the threads a poll saw (`tracked` now, `existed` so far where the source
    /// counts births): the report's `threads_seen`, kept up also while nothing is counted.
    pub fn saw_threads(&mut self, tracked: usize, existed: Option<usize>) {
        self.report.threads_seen = self
            .report
            .threads_seen
            .max(tracked)
            .max(existed.unwrap_or(0));
    }

    /// True once a decision was taken and no search is running.
    pub fn is_decided(&self) -> bool {
        matches!(self.state, State::Decided { .. })
    }

    fn score(&self, rate: f64) -> f64 {
        oriented(self.cfg.higher_is_better, rate)
    }

    fn state_name(&self) -> &'static str {
        match self.state {
            State::Init { .. } => "init",
            State::Warmup { .. } => "warmup",
            State::Measure(_) => "probe",
            State::Decided { .. } => "decided",
        }
    }
}

#[cfg(test)]
mod plain_words_tests;

#[cfg(test)]
mod risk_tests;

#[cfg(test)]
mod search_cost_tests;
