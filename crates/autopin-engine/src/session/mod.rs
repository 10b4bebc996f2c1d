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

mod grain;
mod growth;
mod margin;
mod phases;
mod probe;
mod risk;
use crate::phase::{PhaseWatch, Trigger, WatchParams};
use crate::report::{
    CandidateRecord, DecisionRecord, ObjectiveCheck, ProbeRecord, Report, SearchRecord, Start,
    ThreadRate, TimelinePoint,
};
use crate::strategy::{ProbeOutcome, Step, Strategy, COLLAPSE, WARMUP_CUT};
use autopin_human::{duration, plural, quantity};
use autopin_placement::Pinning;
use grain::Granularity;
use growth::ThreadGrowth;
use margin::Evidence;
use phases::{Parked, PhaseMemo};
use probe::ProbeAccumulator;
use std::collections::BTreeMap;

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

/// Work lost to probes, in seconds of the decided candidate's rate: every probe of another
/// candidate (its warm-up included, taken to run at the probe's rate) of `seconds` at
/// `score` did `seconds × score` of work where the decided candidate would have done
/// `seconds × best`, `best` being the decided candidate's rate over all its probes (their
/// work ÷ their time). Probe by probe, not from each candidate's mean score: a candidate far
/// behind is cut after one tick or its warm-up, so its short probes read its slow states
/// and its long ones its fast states, and a mean over probes would weigh 20 ms like 200 ms
/// (GROMACS beside a busy CPU: 0.32 s from the means where its probes lost 0.11 s).
/// A probe that did better than the decided candidate lost nothing (it counts zero, never
/// as a gain: the cost is what the search took, and a tie kept over a faster-looking probe
/// is the decision's doing, not the search's). The decided candidate's own probes are its
/// rate, so they lose nothing either. Never negative. Items: (candidate, score, seconds).
fn lost_work(
    probes: impl Iterator<Item = (usize, f64, f64)> + Clone,
    decided: usize,
) -> Option<f64> {
    let (work, time) = probes
        .clone()
        .filter(|&(c, _, _)| c == decided)
        .fold((0.0, 0.0), |(w, t), (_, s, secs)| (w + s * secs, t + secs));
    let best = Some(work / time).filter(|b| time > 0.0 && *b > 0.0)?;
    Some(
        probes
            .filter(|&(c, _, _)| c != decided)
            .map(|(_, s, secs)| secs * (1.0 - s / best).max(0.0))
            .sum(),
    )
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
    /// The objective is progress the program reports itself (heartbeats, OpenMP
    /// constructs): the init ends as soon as the start-up's clean tail has been seen for
    /// `STARTUP_ENOUGH` (the OS placement's first probe), not when the init time is over.
    /// CPU time or counted events would also count a program reading its input.
    pub startup_ends_init: bool,
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
            startup_ends_init: false,
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

/// Least clean start-up time that makes the OS placement's first probe, seconds: most of
/// a tick (ticks wake a little late or early).
const MIN_STARTUP_PROBE: f64 = 0.07;

/// The most of the start-up's clean tail kept as a first probe, seconds: once it holds this
/// much it starts again. A start-up waited out in full (a program born pinned off busy
/// CPUs, searched after 1.5 s) is long, and a program's first second is not its rate: GROMACS
/// beside a busy CPU ran 10 000 OpenMP constructs/s over its first 1.3 s and 13 000 after,
/// and that 1.3 s, weighed by its length, held its pinning level with an OS placement of
/// 4 000–12 000 for 13 probes. The tail kept is 0.1–0.3 s, as long as a probe.
const STARTUP_TAIL: f64 = 0.3;

/// A clean start-up tail this long ends the init (`SessionConfig::startup_ends_init`):
/// one tick. Beside a busy CPU every further tick of the start-up, where the OS placed the
/// threads, may run at a fraction of the pinning's rate, and a second tick adds little to
/// the OS placement's judgement: the race waits for its third probe and eighth tick (or its
/// swing) anyway, and one tick is enough for the half-the-leader rule. (Two ticks before:
/// GROMACS beside a busy CPU ran 1.031× the best fixed pinning with them, 1.021× with one,
/// 7 interleaved rounds; docs/search.md.)
pub(crate) const STARTUP_ENOUGH: f64 = 0.1;

/// How often a watched probe is looked at between its ticks (`Session::look_due`), seconds:
/// a collapse then costs a look, not the rest of a tick. GROMACS's OS placement beside a
/// busy CPU read 13 000 OpenMP constructs/s at one tick and 190 at the next, a whole tick
/// at 1.5% of the leader's rate.
const LOOK: f64 = 0.02;

/// The looks at a watched probe gather into ticks at least this long, seconds (most of the
/// driver's 0.1 s tick): the race's tick statistics keep their length.
const LOOK_TICK: f64 = 0.09;

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

    /// When a look at the probe in progress is due before the next tick (session time):
    /// `LOOK` after the last reading, for a probe of a candidate the strategy watches
    /// (`Strategy::watched`) on an objective fine enough that a look that short reads a
    /// collapse. None otherwise. A driver that reads its counters then and hands the reading
    /// to `on_interval` lets a collapse end the probe a look after it began.
    pub fn look_due(&self) -> Option<f64> {
        match &self.state {
            State::Measure(acc) if self.looks_at(acc.cand) => Some(self.last_reading + LOOK),
            _ => None,
        }
    }

    /// A reading of a probe being watched (`looks_at`; a look, or a tick) that shows a
    /// collapse: clean, fine enough to be a rate, and far below the leader by the strategy's
    /// judgement (`Strategy::collapsed`). The probe ends there.
    fn collapsed_at_look(&self, iv: &Interval, dt: f64, rate: f64) -> bool {
        let State::Measure(acc) = &self.state else {
            return false;
        };
        let clean = !iv.disturbed && !iv.phase_changed && iv.phase == acc.phase;
        let cand = acc.cand;
        let score = self.score(rate);
        clean
            && self.grain.resolves(dt, COLLAPSE)
            && self
                .strategy
                .as_ref()
                .is_some_and(|s| s.collapsed(cand, score))
    }

    /// Whether probes of `cand` are looked at between ticks now.
    fn looks_at(&self, cand: usize) -> bool {
        self.grain.resolves(LOOK, COLLAPSE)
            && self.strategy.as_ref().is_some_and(|s| s.watched(cand))
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

    /// Feeds one interval; returns what to do.
    /// Readings of the program's start-up taken before the session began (while the
    /// objective was being chosen), in order: they count as the session's own start-up.
    pub fn seed_startup(&mut self, intervals: &[Interval]) {
        for iv in intervals {
            self.grain.observe(iv.amount, (iv.end - iv.start).max(1e-9));
            self.note_startup(iv);
        }
    }

    /// Keeps the start-up's clean tail for the OS placement's first probe: what follows the
    /// first interval that counted anything (before it the program was loading), since the
    /// last change of its threads (a program still creating threads is not yet the program
    /// the search will see).
    fn note_startup(&mut self, iv: &Interval) {
        if !self.startup_probed() || self.searches_started > 0 {
            return;
        }
        if !self.startup_progressed {
            self.startup_progressed = iv.amount > 0.0;
            return;
        }
        if iv.disturbed || iv.phase_changed {
            self.startup = None;
            return;
        }
        let dt = (iv.end - iv.start).max(1e-9);
        if self
            .startup
            .as_ref()
            .is_some_and(|a| a.good_time >= STARTUP_TAIL - 0.5 * dt)
        {
            self.startup = None;
        }
        self.startup
            .get_or_insert_with(|| {
                ProbeAccumulator::new(usize::MAX, 0.0, iv.start, f64::INFINITY, iv.phase.clone())
            })
            .add(iv, dt);
    }

    /// Whether the start-up's tail is a candidate's probe: the program started where the
    /// OS places it, or pinned to a candidate's CPUs.
    fn startup_probed(&self) -> bool {
        self.cfg.startup_is_os || self.cfg.startup_pinned.is_some()
    }

    /// The candidate the program ran on during its start-up: the OS placement, or the
    /// candidate whose CPUs its threads were pinned to at birth (None when the list for
    /// the threads found has no such candidate).
    fn startup_candidate(&self, os: Option<usize>) -> Option<usize> {
        let Some(cpus) = &self.cfg.startup_pinned else {
            return os.filter(|_| self.cfg.startup_is_os);
        };
        let n = self.tracked.max(1);
        let born = Pinning::from_cpus(cpus.clone()).cpus_for(n);
        self.candidates
            .iter()
            .position(|c| !c.is_unpinned() && c.cpus_for(n) == born)
    }

    /// The start-up's tail as its candidate's first probe (the OS placement's, or the
    /// pinning it was born on), when the first search begins with the program still
    /// there, in the phase it started in.
    fn startup_probe(&mut self, os: Option<usize>) -> Option<ProbeAccumulator> {
        let mut acc = self.startup.take()?;
        let usable = self.searches_started == 1
            && self.applied.is_none()
            && acc.phase == self.phase
            && acc.off_phase == 0
            && acc.good_time >= MIN_STARTUP_PROBE
            && self
                .strategy
                .as_ref()
                .is_some_and(|s| s.takes_earlier_probes());
        acc.cand = self.startup_candidate(os).filter(|_| usable)?;
        Some(acc)
    }

    pub fn on_interval(&mut self, iv: &Interval) -> Vec<Action> {
        let dt = (iv.end - iv.start).max(1e-9);
        let rate = iv.amount / dt;
        self.tracked = iv.tracked;
        self.saw_threads(iv.tracked, iv.existed);
        let applied = self.applied.and_then(|i| self.report_id(i));
        self.report.timeline.push(TimelinePoint {
            t: iv.end,
            rate,
            candidate: applied,
            state: self.state_name().into(),
            phase: iv.phase.clone().or_else(|| self.phase.clone()),
        });
        let now = iv.end;
        self.last_reading = now;
        // A deadline counts as reached at the tick nearest to it: ticks wake a little late
        // or early (sleep jitter), and waiting for the next one would stretch every warm-up
        // and probe by a whole tick.
        let slack = 0.5 * dt;
        self.grain.observe(iv.amount, dt);
        let mut out = Vec::new();
        // A program that announces phases is searched phase by phase: probes of different
        // phases are never compared (their rates can differ by orders of magnitude).
        if iv.phase.is_some() && iv.phase != self.phase {
            // The start-up's tail starts again in the new phase. A program that names its
            // phase as its work begins (syncbench announces its barrier phase before the
            // first barrier) made progress in the interval that spans the change: that is the
            // first interval with progress, which the start-up drops anyway (the program was
            // loading before it), so the clean tail starts with the next interval instead of
            // a tick later.
            if matches!(self.state, State::Init { .. }) && self.searches_started == 0 {
                self.startup = None;
                self.startup_progressed |= iv.amount > 0.0;
            }
            let to = iv.phase.clone();
            self.switch_phase(now, to, &mut out);
            return out;
        }
        if matches!(self.state, State::Init { .. }) {
            self.note_startup(iv);
        } else if self.candidates.len() > 1 && !self.stood_back {
            if let Some(was) = self.growth.outgrown(now, self.tracked) {
                self.search_for_more_threads(now, was, &mut out);
                return out;
            }
        }
        // A watched probe's readings (looks between its ticks) gather into ticks.
        let watched = match &self.state {
            State::Measure(acc) => self.looks_at(acc.cand),
            _ => false,
        };
        if let State::Measure(acc) = &mut self.state {
            acc.tick = if watched { LOOK_TICK } else { 0.0 };
        }
        let collapsed = watched && self.collapsed_at_look(iv, dt, rate);
        match &mut self.state {
            State::Init { until } => {
                // Nothing to compare while the program reports no progress at all (a
                // heartbeat before its work loop starts): wait, up to `init_extra` more.
                let idle = iv.amount <= 0.0 && now < *until + self.cfg.init_extra;
                // The rest of the init would only keep the program where the OS placed it,
                // which beside a busy CPU can be several times slower than the pinning the
                // search finds.
                let seen = self.cfg.startup_ends_init
                    && self
                        .startup
                        .as_ref()
                        .is_some_and(|a| a.good_time >= STARTUP_ENOUGH - slack);
                if (now >= *until - slack || seen) && !idle {
                    self.first_search(now, &mut out);
                } else if now >= *until - slack && !self.said_no_progress {
                    self.said_no_progress = true;
                    out.push(Action::Message(format!(
                        "warning: the objective ({}) has measured no progress yet, {now:.1} s into the program; probing waits for it, up to {:.1} s more",
                        self.cfg.unit,
                        (*until + self.cfg.init_extra - now).max(0.0)
                    )));
                }
            }
            State::Warmup {
                cand,
                until,
                measure,
                asked,
                warmup,
                phase,
            } => {
                if now >= *until - slack {
                    let (cand, measure, asked, warmup) = (*cand, *measure, *asked, *warmup);
                    let phase = phase.clone();
                    let mut acc = ProbeAccumulator::new(cand, warmup, now, now + measure, phase);
                    acc.asked_until = now + asked;
                    // A warm-up that already shows the candidate far behind the leader (a
                    // spinning barrier whose threads now share a CPU, a thread on a busy CPU)
                    // is its probe: a tick more of it would be work lost. The reading must be
                    // clean (no thread came or went, one phase) and fine enough to be a rate.
                    let clean = !iv.disturbed && !iv.phase_changed && iv.phase == acc.phase;
                    let readable = clean && self.grain.resolves(dt, WARMUP_CUT);
                    let score = self.score(rate);
                    if let Some(s) = self.strategy.as_mut().filter(|_| readable) {
                        s.warmed_up(cand, score);
                    }
                    let behind = readable
                        && self
                            .strategy
                            .as_ref()
                            .is_some_and(|s| s.behind_at_warmup(cand, score));
                    if behind {
                        // The warm-up was the measurement.
                        acc.warmup = 0.0;
                        acc.start = iv.start;
                        acc.add(iv, dt);
                        self.finish_probe(now, acc, &mut out);
                    } else {
                        self.state = State::Measure(acc);
                    }
                }
            }
            State::Measure(acc) if collapsed => {
                // The collapse is a tick of its own, after those of the probe so far.
                acc.add_alone(iv, dt);
                acc.ended_collapsed = true;
                let acc = acc.clone();
                self.finish_probe(now, acc, &mut out);
            }
            State::Measure(acc) => {
                acc.add(iv, dt);
                // A probe that has seen no completed unit of a coarse objective (an OpenMP
                // region longer than the probe) knows nothing yet: it goes on, up to
                // `Granularity::MAX_PROBE`. Not when a tenth of the program's rate so far
                // would have shown enough units in that time: then seeing none is the
                // candidate's collapse, and every further tick of it is lost (16 threads of
                // syncbench, 300 000 beats/s, beside a busy CPU counted no beat where the OS
                // placed them, and the probe went on waiting for one for 3.5 s).
                let elapsed = now - acc.start;
                let blind = self.grain.counts_units()
                    && acc.good_amount <= 0.0
                    && elapsed < Granularity::MAX_PROBE
                    && !self.grain.resolves(elapsed, COLLAPSE);
                // The strategy may end a probe early once its ticks put the candidate out of
                // the running (each further tick of it is lost work). Not on a coarse
                // objective, whose ticks are mostly rounding.
                let hib = self.cfg.higher_is_better;
                let seen_enough = !blind
                    && !self.grain.coarse()
                    && now < acc.until - slack
                    && self.strategy.as_ref().is_some_and(|s| {
                        let ticks: Vec<f64> = acc.rates.iter().map(|r| oriented(hib, *r)).collect();
                        !ticks.is_empty() && s.seen_enough(acc.cand, &ticks)
                    });
                // A probe lengthened to see `MIN_UNITS` units at the rate seen so far (a
                // start-up that paused, GROMACS reading its input after its first
                // construct) ends once it has seen them and lasted as long as asked.
                let grain_seen = acc.until > acc.asked_until + slack
                    && now >= acc.asked_until - slack
                    && acc.good_amount >= Granularity::MIN_UNITS;
                if seen_enough {
                    let acc = acc.clone();
                    self.finish_probe(now, acc, &mut out);
                } else if blind && now >= acc.until - slack {
                    acc.until = now + dt;
                } else if now >= acc.until - slack || grain_seen {
                    let acc = acc.clone();
                    self.finish_probe(now, acc, &mut out);
                }
            }
            State::Decided {
                since_report,
                amount,
            } => {
                *since_report += dt;
                *amount += iv.amount;
                if *since_report >= self.cfg.report_every - 1e-9 {
                    let r = *amount / *since_report;
                    *since_report = 0.0;
                    *amount = 0.0;
                    let label = self.applied().map(|c| c.label.clone()).unwrap_or_default();
                    out.push(Action::Message(format!(
                        "t={now:.1}s rate {} with {label}",
                        quantity(r, &self.cfg.unit)
                    )));
                }
                let score = self.score(rate);
                // Phase changes are handled above; the watch looks for rate drops within a
                // phase (programs that announce no phases), skipping mixed intervals.
                let watch = if iv.phase_changed {
                    None
                } else {
                    self.watch.as_mut()
                };
                if let Some(w) = watch {
                    if let Some(trig) = w.observe(now, dt, score, None) {
                        let why = match &trig {
                            Trigger::RateDrop {
                                reference,
                                observed,
                            } => format!(
                                "rate dropped to {:.0}% of the decided rate",
                                100.0 * observed / reference.max(1e-300)
                            ),
                            Trigger::PhaseChange { from, to } => {
                                format!(
                                    "program phase changed from {} to {to}",
                                    from.clone().unwrap_or_else(|| "(none)".into())
                                )
                            }
                        };
                        self.search_again(now, why, &mut out);
                    }
                }
            }
        }
        out
    }

    /// The program has run more threads than the candidates were made for (`was`) long
    /// enough to be its shape: whatever was probed or decided placed fewer threads, so a new
    /// search begins with a list made for the threads it runs now (see `growth`).
    fn search_for_more_threads(&mut self, now: f64, was: usize, out: &mut Vec<Action>) {
        let why = format!(
            "the program now runs {} (the candidates were made for {})",
            plural(self.tracked as u64, "thread", "threads"),
            plural(was as u64, "thread", "threads")
        );
        self.search_again(now, why, out);
    }

    /// A new search of the current phase at `now`, for `why`: a search still running ends
    /// there (its time counted), and the phase's decision is forgotten.
    fn search_again(&mut self, now: f64, why: String, out: &mut Vec<Action>) {
        self.close_open_search(now);
        out.push(Action::Message(format!(
            "t={now:.1}s {why}: searching again"
        )));
        let key = self.phase.clone();
        self.phases.entry(key).or_default().decided = None;
        self.begin_search(now, why, out);
    }

    /// The program entered phase `to` at `now` (the interval that spans the change is not
    /// used). An unfinished search is parked and resumed when its phase returns; the new
    /// phase gets its decided pinning back, its parked search resumed, or a new search.
    fn switch_phase(&mut self, now: f64, to: Option<String>, out: &mut Vec<Action>) {
        let from = std::mem::replace(&mut self.phase, to.clone());
        let name = |p: &Option<String>| p.clone().unwrap_or_else(|| "(none)".into());
        match &self.state {
            State::Init { .. } => return,
            State::Warmup { .. } | State::Measure(_) => {
                if let Some(strategy) = self.strategy.take() {
                    // Searches begun before the program named any phase measured a mix;
                    // they are dropped rather than resumed.
                    if from.is_some() {
                        let elapsed = self.search_before + (now - self.search_start);
                        self.count_search_time(now);
                        self.phases.entry(from.clone()).or_default().parked = Some(Parked {
                            strategy,
                            search: self.search,
                            elapsed,
                        });
                    } else {
                        self.count_search_time(now);
                    }
                }
                out.push(Action::Message(format!(
                    "t={now:.1}s phase {} → {} during the search: current probe dropped",
                    name(&from),
                    name(&to)
                )));
            }
            State::Decided { .. } => {
                out.push(Action::Message(format!(
                    "t={now:.1}s phase {} → {}",
                    name(&from),
                    name(&to)
                )));
            }
        }
        self.enter_phase(now, out);
    }

    /// Continues in the (new) current phase: its decision, its parked search, or a new one.
    fn enter_phase(&mut self, now: f64, out: &mut Vec<Action>) {
        let key = self.phase.clone();
        let phase_name = key.clone().unwrap_or_else(|| "(none)".into());
        let memo = self.phases.entry(key.clone()).or_default();
        if let Some((label, score)) = memo.decided.clone() {
            let remembered = memo.remembered;
            if self.candidates.is_empty() {
                self.load_candidates(out);
            }
            let found = self.candidates.iter().position(|c| c.label == label);
            // A phase's pinning remembered from an earlier run is applied without a search,
            // which the rule for risky decisions never allows a stacked pinning: such a
            // phase is searched.
            let threads = self.tracked.max(1);
            if let Some(idx) =
                found.filter(|&i| remembered && self.candidates[i].shares_cpus(threads))
            {
                out.push(Action::Message(format!(
                    "phase {phase_name}: the pinning remembered for it, {}, stacks the program's threads: the phase is searched rather than applied unchecked",
                    self.candidates[idx].label
                )));
                let memo = self.phases.entry(key.clone()).or_default();
                memo.decided = None;
                memo.remembered = false;
                memo.searched = false;
            } else if let Some(idx) = found {
                if self.applied != Some(idx) {
                    self.applied = Some(idx);
                    out.push(Action::Apply(idx));
                }
                if remembered {
                    self.decide_from_memory(now, idx, score);
                    out.push(Action::Message(format!(
                        "phase {phase_name}: applying the pinning remembered for it, {label} (no search; the phase watch holds it to its rate then)"
                    )));
                } else {
                    out.push(Action::Message(format!(
                        "phase {phase_name}: applying its decided pinning {label}"
                    )));
                }
                if let Some(w) = self.watch.as_mut() {
                    w.decided(now, score, key);
                }
                self.state = State::Decided {
                    since_report: 0.0,
                    amount: 0.0,
                };
                return;
            }
        }
        let memo = self.phases.entry(key.clone()).or_default();
        if let Some(p) = memo.parked.take() {
            self.strategy = Some(p.strategy);
            self.search = p.search;
            self.search_before = p.elapsed;
            self.search_start = now;
            out.push(Action::Message(format!(
                "phase {phase_name}: resuming search {} ({:.1} s spent so far)",
                p.search, p.elapsed
            )));
            self.next_step(now, out);
            return;
        }
        let counted = key.is_some() && !memo.searched;
        if counted && self.phase_searches >= self.cfg.max_phase_searches {
            out.push(Action::Message(format!(
                "phase {phase_name}: new phase not searched ({} phases searched already); keeping the current pinning",
                self.phase_searches
            )));
            if let Some(w) = self.watch.as_mut() {
                w.decided(now, None, key);
            }
            self.state = State::Decided {
                since_report: 0.0,
                amount: 0.0,
            };
            return;
        }
        self.begin_search(now, format!("new phase {phase_name}"), out);
    }

    /// Records the decision of a phase remembered from an earlier run, applied now on
    /// candidate `idx` (its `score` then on the higher-is-better scale).
    fn decide_from_memory(&mut self, now: f64, idx: usize, score: Option<f64>) {
        let phase = self.phase.clone().unwrap_or_default();
        let reason = format!("remembered for phase {phase} from an earlier run");
        let rec = self.decision_on(now, idx, score, &reason, DecisionRecord::FROM_MEMORY);
        if let Some(m) = self.phases.get_mut(&self.phase) {
            m.remembered = false;
        }
        self.keep_decision(rec);
    }

    /// A decision for the current phase on candidate `idx` at `now` (`score` on the
    /// higher-is-better scale), nothing known of a runner-up or of the search's cost: the
    /// caller adds what it knows.
    fn decision_on(
        &self,
        now: f64,
        idx: usize,
        score: Option<f64>,
        reason: &str,
        strategy: &str,
    ) -> DecisionRecord {
        let cand = self
            .candidates
            .get(idx)
            .cloned()
            .unwrap_or_else(Pinning::unpinned);
        DecisionRecord {
            search: self.search,
            at: now,
            candidate: cand.label.clone(),
            candidate_index: self.report_id(idx).unwrap_or(idx),
            cpus: cand.cpus_for(self.tracked.max(1)),
            rate: score.map(|v| on_scale(self.cfg.higher_is_better, v)),
            runner_up: None,
            runner_up_rate: None,
            margin: None,
            margin_ci: None,
            reason: reason.to_string(),
            strategy: strategy.to_string(),
            phase: self.phase.clone(),
            search_cost: None,
        }
    }

    /// A decision taken: the one in force, and one more in the report's list.
    fn keep_decision(&mut self, rec: DecisionRecord) {
        self.report.decision = Some(rec.clone());
        self.report.decisions.push(rec);
        self.decided_once = true;
    }

    /// The start-up is over: the first search begins, unless the program is in a phase
    /// decided in an earlier run, whose pinning then applies at once.
    fn first_search(&mut self, now: f64, out: &mut Vec<Action>) {
        let remembered = self
            .phases
            .get(&self.phase)
            .is_some_and(|m| m.remembered && m.decided.is_some());
        if remembered {
            self.enter_phase(now, out);
        } else {
            self.begin_search(now, "start".into(), out);
        }
    }

    /// The candidates for the threads tracked now (the applied one keeps its index when
    /// the list is the same).
    fn load_candidates(&mut self, out: &mut Vec<Action>) {
        let CandidateList {
            pinnings: cands,
            note,
            busy,
        } = (self.make_candidates)(self.tracked.max(1));
        if busy.is_some() {
            self.report.busy_cpus = busy;
        }
        if let Some(n) = note {
            out.push(Action::Message(n.clone()));
            self.report
                .notes
                .push(format!("search {}: {n}", self.search));
        }
        // Keep the applied candidate's index meaningful across re-searches.
        let applied_label = self.applied().map(|c| c.label.clone());
        let same = cands.len() == self.candidates.len()
            && cands
                .iter()
                .zip(&self.candidates)
                .all(|(a, b)| a.label == b.label);
        if !same {
            // Parked searches refer to candidate indexes of the old list.
            for m in self.phases.values_mut() {
                m.parked = None;
            }
        }
        self.candidates = cands;
        self.growth.made_for(self.tracked);
        self.applied =
            applied_label.and_then(|l| self.candidates.iter().position(|c| c.label == l));
        self.report_ids = (0..self.candidates.len())
            .map(|i| self.report_candidate(i))
            .collect();
    }

    /// Candidate `i`'s index among the report's candidates, where it is added when it is
    /// not there yet (a pinning is the same candidate by its label and CPUs).
    fn report_candidate(&mut self, i: usize) -> usize {
        let rec = CandidateRecord::from(self.report.candidates.len(), &self.candidates[i]);
        match self
            .report
            .candidates
            .iter()
            .position(|c| c.label == rec.label && c.cpus == rec.cpus)
        {
            Some(r) => r,
            None => {
                self.report.candidates.push(rec);
                self.report.candidates.len() - 1
            }
        }
    }

    /// Candidate `i` of the current list among the report's candidates.
    fn report_id(&self, i: usize) -> Option<usize> {
        self.report_ids.get(i).copied()
    }

    /// What the current search measured of each candidate of its list, the start-up left
    /// out: the evidence behind every margin a decision states (`margin`) and the rule for
    /// risky decisions (`risk`).
    fn evidence(&self) -> Vec<Evidence> {
        let mut ev = vec![Evidence::default(); self.candidates.len()];
        let probes = self
            .report
            .probes
            .iter()
            .filter(|p| p.search == self.search && !p.startup && p.duration > 0.0);
        for p in probes {
            if let Some(i) = self.report_ids.iter().position(|&r| r == p.candidate) {
                ev[i].add(
                    self.score(p.rate),
                    p.duration,
                    p.ticks.iter().map(|t| self.score(*t)),
                );
            }
        }
        ev
    }

    fn begin_search(&mut self, now: f64, trigger: String, out: &mut Vec<Action>) {
        self.search = self.searches_started;
        self.searches_started += 1;
        let memo = self.phases.entry(self.phase.clone()).or_default();
        if self.phase.is_some() && !memo.searched {
            memo.searched = true;
            self.phase_searches += 1;
        }
        self.load_candidates(out);
        let mut strat = (self.make_strategy)(self.candidates.len(), self.search);
        let os = self.candidates.iter().position(|c| c.is_unpinned());
        if let Some(os) = os {
            strat.set_os_placement(os);
        }
        strat.set_busy_neighbours(
            self.report
                .busy_cpus
                .as_ref()
                .is_some_and(|b| !b.is_empty()),
        );
        let threads = self.tracked.max(1);
        for (i, c) in self.candidates.iter().enumerate() {
            if c.shares_cpus(threads) {
                strat.set_shares_cpus(i);
            }
        }
        if self.cfg.check_first && self.search == 0 {
            strat.set_incumbent(0);
            // A remembered pinning that stacks the threads is never confirmed by its own
            // rate alone: the rule for risky decisions wants it measured against the
            // others.
            let stacks = self
                .candidates
                .first()
                .is_some_and(|c| c.shares_cpus(threads));
            if let Some(r) = self.cfg.check_rate.filter(|_| !stacks) {
                strat.expect_incumbent(self.score(r));
            }
        }
        self.strategy_name = strat.name().to_string();
        self.report.strategy = self.strategy_name.clone();
        self.strategy = Some(strat);
        self.search_start = now;
        self.search_before = 0.0;
        self.report.searches.push(SearchRecord {
            index: self.search,
            start: now,
            trigger,
            candidates: self.candidates.len(),
            phase: self.phase.clone(),
        });
        out.push(Action::Message(format!(
            "search {}: {} for {}, strategy {}{}",
            self.search,
            plural(self.candidates.len() as u64, "candidate", "candidates"),
            plural(self.tracked as u64, "thread", "threads"),
            self.strategy_name,
            self.phase
                .as_ref()
                .map(|p| format!(", program phase {p}"))
                .unwrap_or_default()
        )));
        if let Some(acc) = self.startup_probe(os) {
            self.record_probe(acc, true, out);
        }
        self.next_step(now, out);
    }

    /// Asks the strategy for its next step and takes it: a probe to set up, or a decision.
    fn next_step(&mut self, now: f64, out: &mut Vec<Action>) {
        let Some(strategy) = self.strategy.as_mut() else {
            return;
        };
        match strategy.next(self.search_before + now - self.search_start) {
            Step::Probe {
                candidate,
                warmup,
                measure,
            } => {
                // A probe must be long enough to see the program progress.
                let asked = measure;
                let measure = measure.max(self.grain.min_probe());
                let candidate = candidate.min(self.candidates.len().saturating_sub(1));
                // No thread moves when the candidate is the one applied, or the OS placement
                // before anything was pinned: nothing to warm up again.
                let stays = self.applied == Some(candidate)
                    || (self.applied.is_none() && self.candidates[candidate].is_unpinned());
                let warmup = if stays { 0.0 } else { warmup };
                if self.applied != Some(candidate) {
                    self.applied = Some(candidate);
                    out.push(Action::Apply(candidate));
                }
                let phase = self.phase.clone();
                self.state = if warmup > 0.0 {
                    State::Warmup {
                        cand: candidate,
                        until: now + warmup,
                        measure,
                        asked,
                        warmup,
                        phase,
                    }
                } else {
                    let mut acc = ProbeAccumulator::new(candidate, 0.0, now, now + measure, phase);
                    acc.asked_until = now + asked;
                    State::Measure(acc)
                };
            }
            Step::Decide(d) => {
                let idx = d.candidate.min(self.candidates.len().saturating_sub(1));
                self.decide(now, idx, d, out);
            }
        }
    }

    /// The search decided for candidate `idx` (`d`, the strategy's decision): the rule for
    /// risky decisions (`risk`) may keep a safer candidate instead; the margin the record
    /// states is the one that rule reads (`margin`).
    fn decide(
        &mut self,
        now: f64,
        idx: usize,
        d: crate::strategy::Decision,
        out: &mut Vec<Action>,
    ) {
        let evidence = self.evidence();
        let threads = self.tracked.max(1);
        let entries: Vec<risk::Entry> = self
            .candidates
            .iter()
            .zip(&evidence)
            .map(|(c, e)| risk::Entry {
                label: &c.label,
                stacks: c.shares_cpus(threads),
                os: c.is_unpinned(),
                evidence: e,
            })
            .collect();
        let (idx, runner, reason, score) = match risk::check(idx, &entries) {
            risk::Guard::Stands => (idx, d.runner_up, d.reason.clone(), d.score),
            risk::Guard::NothingSafer => (
                idx,
                d.runner_up,
                format!(
                    "{}; every candidate stacks the program's threads, so nothing safer was there to keep",
                    d.reason
                ),
                d.score,
            ),
            risk::Guard::Replace { by, why } => (
                by,
                Some(idx),
                format!("{why} (the search had ended: {})", d.reason),
                evidence[by].score(),
            ),
        };
        let runner = runner.filter(|&r| r != idx && r < self.candidates.len());
        if self.applied != Some(idx) {
            self.applied = Some(idx);
            out.push(Action::Apply(idx));
        }
        let cand = self
            .candidates
            .get(idx)
            .cloned()
            .unwrap_or_else(Pinning::unpinned);
        let m = runner.and_then(|r| margin::compare(&evidence[idx], &evidence[r]));
        let hib = self.cfg.higher_is_better;
        let rec = DecisionRecord {
            runner_up: runner
                .and_then(|r| self.candidates.get(r))
                .map(|c| c.label.clone()),
            runner_up_rate: runner
                .and_then(|r| evidence[r].score())
                .map(|v| on_scale(hib, v)),
            margin: m.map(|m| m.margin),
            margin_ci: m.and_then(|m| m.half),
            search_cost: self.search_cost(idx),
            ..self.decision_on(
                now,
                idx,
                evidence[idx].score().or(score),
                &reason,
                &self.strategy_name,
            )
        };
        self.report.search_cost += rec.search_cost.unwrap_or(0.0);
        let margin = rec
            .margin_text()
            .map(|m| format!(", {m}"))
            .unwrap_or_default();
        let cost = rec
            .search_cost
            .map(|c| format!("; the search cost {c:.2} s of work at its rate"))
            .unwrap_or_default();
        out.push(Action::Message(format!(
            "decided after {:.1} s{}: {}{} ({}{cost})",
            self.search_before + now - self.search_start,
            self.phase
                .as_ref()
                .map(|p| format!(" for phase {p}"))
                .unwrap_or_default(),
            cand.label,
            margin,
            rec.reason
        )));
        self.strategy = None;
        self.phases.entry(self.phase.clone()).or_default().decided =
            Some((cand.label.clone(), score));
        self.count_search_time(now);
        self.keep_decision(rec);
        if let Some(w) = self.watch.as_mut() {
            w.decided(now, score, self.phase.clone());
        }
        self.state = State::Decided {
            since_report: 0.0,
            amount: 0.0,
        };
    }

    fn finish_probe(&mut self, now: f64, acc: ProbeAccumulator, out: &mut Vec<Action>) {
        self.record_probe(acc, false, out);
        self.next_step(now, out);
    }

    /// Puts a probe in the report and before the strategy; `startup`: measured while the
    /// program started, before the search.
    fn record_probe(&mut self, mut acc: ProbeAccumulator, startup: bool, out: &mut Vec<Action>) {
        acc.flush();
        // Intervals where threads came or went are left out so that a half-counted thread
        // does not look like a rate change; with continuous churn nothing would be left, so
        // then every interval counts and the probe says so.
        let churn = acc.good_time <= 0.0;
        let (amount, time, threads) = if churn {
            (acc.all_amount, acc.all_time, &acc.per_thread_all)
        } else {
            (acc.good_amount, acc.good_time, &acc.per_thread)
        };
        // Not one unit in the whole (extended) probe: the rate is below one unit per probe,
        // not zero; that upper bound is what the strategy sees.
        let unseen = self.grain.counts_units() && amount <= 0.0 && time > 0.0;
        // The start-up's tail is not lengthened until it has seen enough units to be a rate,
        // as a probe is (`Granularity::MIN_UNITS`): with fewer, it is the OS placement's
        // first probe no more, and the search probes it first instead. Seeing none says the
        // program paused (GROMACS reads its input after its first constructs), not how fast
        // it runs where the OS placed it: taken as a rate, it made the OS placement look as
        // if it collapsed ("×2.8" where its probes in the search were 1.5× behind).
        if startup && self.grain.counts_units() && amount < Granularity::MIN_UNITS {
            let place = if self
                .candidates
                .get(acc.cand)
                .is_some_and(|c| !c.is_unpinned())
            {
                "the pinning it started on"
            } else {
                "the OS placement"
            };
            out.push(Action::Message(if unseen {
                format!(
                    "the start-up's last {} counted nothing ({}): a pause, not a rate; {place} is probed in the search",
                    duration(time),
                    self.cfg.unit
                )
            } else {
                format!(
                    "the start-up's last {} counted only {amount} ({}; a probe sees {} or more): too few for a rate; {place} is probed in the search",
                    duration(time),
                    self.cfg.unit,
                    Granularity::MIN_UNITS
                )
            }));
            return;
        }
        let rate = if unseen {
            1.0 / time
        } else if time > 0.0 {
            amount / time
        } else {
            0.0
        };
        let label = self
            .candidates
            .get(acc.cand)
            .map(|c| c.label.clone())
            .unwrap_or_default();
        let per_thread = threads
            .iter()
            .map(|(tid, (index, a, t))| ThreadRate {
                tid: *tid,
                index: *index,
                rate: if *t > 0.0 { a / t } else { 0.0 },
            })
            .collect();
        let ticks = if churn { Vec::new() } else { acc.rates.clone() };
        self.report.probes.push(ProbeRecord {
            search: self.search,
            candidate: self.report_id(acc.cand).unwrap_or(acc.cand),
            label: label.clone(),
            start: acc.start,
            warmup: acc.warmup,
            duration: time,
            rate,
            ticks,
            per_thread,
            intervals: acc.intervals,
            disturbed_intervals: acc.disturbed,
            churn,
            phase: acc.phase.clone(),
            off_phase_intervals: acc.off_phase,
            progress_rate: acc
                .progress
                .filter(|p| !churn && p.1 > 0.0)
                .map(|p| p.0 / p.1),
            startup,
        });
        if let Some((_, _, name)) = acc.progress {
            self.progress_source = Some(name);
        }
        out.push(Action::Message(format!(
            "probe {label:<24} {}{} over {}{}",
            if unseen { "below " } else { "" },
            quantity(rate, &self.cfg.unit),
            duration(time),
            if churn {
                " (threads changing throughout)"
            } else if startup {
                " (the end of the start-up)"
            } else {
                ""
            }
        )));
        let cv = autopin_stats::cv(&acc.rates);
        let range = (!acc.rates.is_empty()).then(|| {
            acc.rates
                .iter()
                .map(|r| self.score(*r))
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                    (lo.min(x), hi.max(x))
                })
        });
        // A probe that ended at a look reading a collapse is taken, by the strategy, as
        // having run its planned length in that state: the state carries on past the look
        // (GROMACS's stacked threads stayed so for seconds), and a mean over the fast part
        // and a few ms of the slow one would read the candidate faster than it runs.
        let (rest, slow) = match acc.rates.last() {
            Some(&slow) if acc.ended_collapsed => ((acc.until - acc.start - time).max(0.0), slow),
            _ => (0.0, 0.0),
        };
        let rate = (rate * time + slow * rest) / (time + rest).max(1e-12);
        let score = self.score(rate);
        if let Some(s) = self.strategy.as_mut() {
            if time > 0.0 {
                s.record(ProbeOutcome {
                    candidate: acc.cand,
                    score,
                    duration: time + rest,
                    interval_cv: cv,
                    interval_range: range,
                    intervals: acc.rates.len(),
                    ended_collapsed: acc.ended_collapsed,
                });
            }
        }
    }

    /// The program ended (or autopin stops) at `now`: finalize the report.
    /// The report's `decision` is the pinning in force at the end: with phases, the last
    /// decision for the phase the program was in, not the last decision taken (which may
    /// be another phase's).
    fn settle_decision_in_force(&mut self) {
        if self.phase.is_none() || self.stood_back {
            return;
        }
        if let Some(d) = self
            .report
            .decisions
            .iter()
            .rev()
            .find(|d| d.phase == self.phase)
        {
            self.report.decision = Some(d.clone());
        }
    }

    /// Work the current search lost, in seconds of the decided candidate's rate (see
    /// [`lost_work`]). None when the decided candidate was never probed.
    fn search_cost(&self, decided: usize) -> Option<f64> {
        self.cost_of_search(self.search, self.report_id(decided)?)
    }

    /// [`Self::search_cost`] of search `search`, against the report's candidate `decided`.
    fn cost_of_search(&self, search: usize, decided: usize) -> Option<f64> {
        // The start-up's probe was not the search's doing: the program ran there anyway.
        let probes = self
            .report
            .probes
            .iter()
            .filter(|p| p.search == search && p.duration > 0.0 && !p.startup)
            .map(|p| (p.candidate, self.score(p.rate), p.warmup + p.duration));
        lost_work(probes, decided)
    }

    /// Adds the current search segment, from `search_start` to `now`, to the report's
    /// search time.
    fn count_search_time(&mut self, now: f64) {
        self.report.search_time += (now - self.search_start).max(0.0);
    }

    /// A search still running at the end counts in the search time up to `now`.
    fn close_open_search(&mut self, now: f64) {
        if matches!(self.state, State::Warmup { .. } | State::Measure(_)) {
            self.count_search_time(now);
            self.search_start = now;
        }
    }

    /// Where a program that ended before any probe ran: the place it started in.
    fn where_it_ran(&self) -> String {
        match (self.report.start, &self.cfg.startup_pinned) {
            (Start::Os, _) => "where the OS placed it".into(),
            (Start::PinnedAtBirth, Some(cpus)) => format!(
                "pinned to {}, off the CPUs busy with other work at launch",
                autopin_placement::cpu_text(cpus)
            ),
            (Start::PinnedAtBirth, None) => "on the CPUs it was pinned to at birth".into(),
            (Start::Attached, _) => "where it ran before autopin attached".into(),
        }
    }

    pub fn finish(&mut self, now: f64, exit_status: Option<i32>) -> &Report {
        self.close_open_search(now);
        self.settle_decision_in_force();
        self.count_parked_searches();
        self.report.wall_time = now;
        self.report.exit_status = exit_status;
        self.report.complete = self.decided_once || self.stood_back;
        self.report.objective_check = self.objective_check();
        if self.stood_back {
            // The program's own binding is the answer; the report says so.
        } else if !self.decided_once {
            let ended = ended_by(exit_status);
            let total_init = self.cfg.init + self.cfg.init_waited;
            self.report.incomplete_reason = Some(match self.state {
                State::Init { until } if self.said_no_progress && now > until => format!(
                    "{ended} after {now:.1} s without any progress the objective ({}) could measure, so there was nothing to compare: it ran {}",
                    self.cfg.unit,
                    self.where_it_ran()
                ),
                State::Init { .. } => format!(
                    "{ended} after {now:.1} s, before autopin tried any pinning (it lets a program start for {total_init:.1} s first): it ran {}",
                    self.where_it_ran()
                ),
                _ => {
                    let best = self.best_so_far();
                    let cost = self.count_open_search();
                    format!(
                        "{ended} after {now:.1} s, during the search and before a decision ({} taken){}{}",
                        plural(self.report.probes.len() as u64, "probe", "probes"),
                        best.map(|b| format!("; best so far: {b}"))
                            .unwrap_or_default(),
                        cost.map(|c| format!("; the search cost {:.2} s of its work at that rate", c.max(0.0)))
                            .unwrap_or_default()
                    )
                }
            });
        } else if !self.is_decided() {
            let cost = self.count_open_search();
            self.report.notes.push(format!(
                "{} during re-search {}; the last decision stands{}",
                ended_by(exit_status),
                self.search,
                research_cost(cost)
            ));
        }
        &self.report
    }
}

/// How the program ended, for the report: "the program ended", or, for an exit status a
/// signal gives (128 + N), "the program was interrupted (SIGINT)" and the like: Ctrl-C is
/// not the program's own end.
fn ended_by(exit_status: Option<i32>) -> String {
    let signal = exit_status
        .filter(|s| (129..=128 + 64).contains(s))
        .map(|s| s - 128);
    match signal {
        Some(2) => "the program was interrupted (SIGINT, Ctrl-C)".into(),
        Some(15) => "the program was terminated (SIGTERM)".into(),
        Some(9) => "the program was killed (SIGKILL)".into(),
        Some(1) => "the program was ended by SIGHUP (its terminal closed)".into(),
        Some(n) => format!("the program was ended by signal {n}"),
        None => "the program ended".into(),
    }
}

/// " (the re-search cost X s of its work)", or nothing when no cost is known.
fn research_cost(cost: Option<f64>) -> String {
    cost.map(|c| format!(" (the re-search cost {:.2} s of its work)", c.max(0.0)))
        .unwrap_or_default()
}

impl Session {
    /// autopin stops watching a program that still runs (attach `--duration`) at `now`;
    /// `restored` threads got their original CPU mask back.
    pub fn detach(&mut self, now: f64, restored: usize) -> &Report {
        self.close_open_search(now);
        self.settle_decision_in_force();
        self.count_parked_searches();
        self.report.wall_time = now;
        self.report.exit_status = None;
        self.report.complete = self.decided_once || self.stood_back;
        if self.stood_back {
            // The program's own binding stays; the report says so.
        } else if !self.decided_once {
            let cost = self.count_open_search();
            self.report.incomplete_reason = Some(format!(
                "autopin detached after {now:.1} s while the program was still running, during the {} phase and before a decision ({} probe(s) taken); {restored} thread(s) got their original CPU mask back{}",
                self.state_name(),
                self.report.probes.len(),
                cost.map(|c| format!("; the search cost {:.2} s of work against its best so far", c.max(0.0)))
                    .unwrap_or_default()
            ));
        } else if !self.is_decided() {
            let cost = self.count_open_search();
            self.report.notes.push(format!(
                "autopin detached during re-search {}; the last decision stands{}",
                self.search,
                research_cost(cost)
            ));
        }
        &self.report
    }

    /// Counts what the search still open when autopin stops watching cost (the program's
    /// work was lost all the same), and returns it: a first search against its best
    /// candidate so far, a re-search against the pinning that stays (once probed in it).
    fn count_open_search(&mut self) -> Option<f64> {
        let cost = if self.decided_once {
            self.report
                .decision
                .as_ref()
                .and_then(|d| self.cost_of_search(self.search, d.candidate_index))
        } else {
            self.unfinished_cost(self.search)
        };
        self.report.search_cost += cost.unwrap_or(0.0);
        cost
    }

    /// What search `search`, left without a decision, cost against its best candidate so
    /// far (the best mean probe rate, as [`Self::best_so_far`] names it).
    fn unfinished_cost(&self, search: usize) -> Option<f64> {
        let (label, _) =
            crate::report::ranked_by_mean(&self.report.probes, search, self.cfg.higher_is_better)
                .into_iter()
                .next()?;
        let best = self
            .report
            .probes
            .iter()
            .find(|p| p.search == search && p.label == label)?
            .candidate;
        self.cost_of_search(search, best)
    }

    /// Searches parked by a phase change that never came back to them: what their probes
    /// cost against the best of each so far is counted, and said in a note.
    fn count_parked_searches(&mut self) {
        let parked: Vec<(Option<String>, usize)> = self
            .phases
            .iter()
            .filter_map(|(phase, memo)| memo.parked.as_ref().map(|p| (phase.clone(), p.search)))
            .collect();
        for (phase, search) in parked {
            let Some(cost) = self.unfinished_cost(search) else {
                continue;
            };
            self.report.search_cost += cost;
            self.report.notes.push(format!(
                "search {search} (phase {}) was left unfinished when its phase ended and did not come back; it cost {:.2} s of work against its best so far",
                phase.unwrap_or_else(|| "(none)".into()),
                cost.max(0.0)
            ));
        }
    }

    /// The candidate with the best mean probe rate in the current search, for a search the
    /// program's end cut short.
    fn best_so_far(&self) -> Option<String> {
        crate::report::ranked_by_mean(&self.report.probes, self.search, self.cfg.higher_is_better)
            .into_iter()
            .next()
            .map(|(l, r)| format!("{l} ({})", quantity(r, &self.cfg.unit)))
    }

    /// How well the objective tracked the program's own progress over the probes (sanity
    /// check; None when the program's progress was not known besides the objective).
    fn objective_check(&self) -> Option<ObjectiveCheck> {
        let source = self.progress_source?;
        let pairs: Vec<(f64, f64)> = self
            .report
            .probes
            .iter()
            .filter_map(|p| p.progress_rate.map(|g| (p.rate, g)))
            .collect();
        let t = autopin_perf::tracking(&pairs, self.cfg.higher_is_better)?;
        Some(ObjectiveCheck {
            progress: source.to_string(),
            tracking: t,
        })
    }
}

#[cfg(test)]
mod plain_words_tests {
    use super::*;
    use crate::strategy::{Race, RaceParams};

    fn session(init: f64, waited: f64) -> Session {
        let cfg = SessionConfig {
            init,
            init_waited: waited,
            watch: None,
            ..SessionConfig::default()
        };
        Session::new(
            cfg,
            Box::new(|_| vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])].into()),
            Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
        )
    }

    fn message(a: &[Action]) -> String {
        a.iter()
            .filter_map(|x| match x {
                Action::Message(m) => Some(m.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn start_says_how_long_the_program_ran_before_probing() {
        let m = message(&session(0.0, 0.5).start(0.0));
        assert!(!m.contains("0.0 s"), "{m}");
        assert!(
            m.contains("has run 0.5 s") && m.contains("probing starts now"),
            "{m}"
        );
        let m = message(&session(0.5, 0.0).start(0.0));
        assert_eq!(m, "letting the program start for 0.5 s before probing");
    }

    #[test]
    fn a_program_that_ends_before_probing_is_explained_in_plain_words() {
        let mut s = session(0.0, 0.5);
        s.start(0.0);
        let r = s.finish(2.0, Some(0));
        let why = r.incomplete_reason.clone().unwrap();
        assert!(
            why.contains("ended after 2.0 s")
                && why.contains("before autopin tried any pinning")
                && why.contains("where the OS placed it"),
            "{why}"
        );
        assert!(!why.contains("init phase"), "{why}");
    }

    /// A session whose first search is left after one round: candidate 0 runs at 100/s,
    /// candidate 1 at 105/s, too close to decide on one probe each. Returns it and the time.
    fn search_left_after_a_round() -> (Session, f64) {
        let mut s = session(0.0, 0.0);
        s.start(0.0);
        let mut t = 0.0;
        while t < 1.9 {
            let rate = match s.applied {
                Some(1) => 105.0,
                _ => 100.0,
            };
            let iv = Interval {
                start: t,
                end: t + 0.1,
                amount: rate * 0.1,
                tracked: 1,
                ..Interval::default()
            };
            s.on_interval(&iv);
            t += 0.1;
            if s.report.probes.len() >= 2 && !s.is_decided() {
                break;
            }
        }
        assert!(!s.is_decided(), "a 5% gap is not decided on one probe each");
        (s, t)
    }

    /// The report's search cost is what the probes of candidate 0 lost against candidate
    /// 1's 105/s.
    fn assert_cost_is_what_candidate_0_lost(s: &Session) {
        let on_0: f64 = s
            .report
            .probes
            .iter()
            .filter(|p| p.candidate == 0 && !p.startup)
            .map(|p| p.warmup + p.duration)
            .sum();
        assert!(on_0 > 0.0, "{:?}", s.report.probes);
        let want = on_0 * (1.0 - 100.0 / 105.0);
        assert!(
            (s.report.search_cost - want).abs() < 1e-6,
            "{} vs {want}",
            s.report.search_cost
        );
    }

    #[test]
    fn a_search_cut_short_names_the_best_so_far() {
        // The program ends after the first round.
        let (mut s, t) = search_left_after_a_round();
        // The search ran from the start to the end: its time is in the report.
        let searched = s.finish(t, Some(0)).search_time;
        assert!((searched - t).abs() < 0.15, "searched {searched} of {t} s");
        let why = s.report.incomplete_reason.clone().unwrap();
        assert!(why.contains("during the search"), "{why}");
        assert!(why.contains("best so far: 1"), "{why}");
        // The unfinished search still cost the program its probes of candidate 0, at 100/s
        // where the best so far did 105/s.
        assert_cost_is_what_candidate_0_lost(&s);
        assert!(why.contains("the search cost 0.0"), "{why}");
    }

    #[test]
    fn a_search_autopin_detached_from_still_counts_what_it_cost() {
        // autopin stops watching (attach --duration) after the first round.
        let (mut s, t) = search_left_after_a_round();
        let r = s.detach(t, 1);
        let why = r.incomplete_reason.clone().unwrap();
        assert!(why.contains("before a decision"), "{why}");
        assert!(why.contains("the search cost 0.0"), "{why}");
        assert_cost_is_what_candidate_0_lost(&s);
    }

    #[test]
    fn a_re_search_cut_short_still_counts_what_it_cost() {
        // CPU 1 does 100/s, CPU 0 50/s: the search keeps CPU 1. At 10 s CPU 1 drops to
        // 52/s (too close to CPU 0 to decide on a probe each), the watch starts a
        // re-search, and the program ends during it once both have been probed again (the
        // cost is against the kept pinning's rate in the re-search: without a probe of it
        // there, none is stated).
        let cfg = SessionConfig {
            init: 0.5,
            ..SessionConfig::default()
        };
        let mut s = Session::new(
            cfg,
            Box::new(|_| vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])].into()),
            Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
        );
        s.start(0.0);
        let mut t = 0.0;
        let mut researching = false;
        while t < 40.0 {
            let rate = match (s.applied, t >= 10.0) {
                (Some(1), false) => 100.0,
                (Some(1), true) => 52.0,
                _ => 50.0,
            };
            s.on_interval(&Interval {
                start: t,
                end: t + 0.1,
                amount: rate * 0.1,
                tracked: 1,
                ..Interval::default()
            });
            t += 0.1;
            researching = s.search > 0 && !s.is_decided();
            let probed = |c| {
                s.report
                    .probes
                    .iter()
                    .any(|p| p.search > 0 && p.candidate == c)
            };
            if researching && probed(0) && probed(1) {
                break;
            }
        }
        assert!(researching, "a re-search: {:?}", s.report.decisions);
        let first = s.report.search_cost;
        let r = s.finish(t, Some(0));
        let note = r
            .notes
            .iter()
            .find(|n| n.contains("during re-search"))
            .expect("a note");
        assert!(note.contains("the re-search cost"), "{note}");
        // CPU 0 (50/s) was probed against CPU 1 at 52/s: the re-search lost work.
        assert!(r.search_cost > first, "{} after {first}", r.search_cost);
    }

    #[test]
    fn a_search_its_phase_never_came_back_to_still_counts_what_it_cost() {
        // Phase "a": CPU 1 does 102/s and CPU 0 100/s, too close to decide in a round. At
        // 1.2 s, a round into its search, the program enters phase "b" for good, where the
        // two are 10× apart; it ends at 6 s with phase a's search parked.
        let mut s = session(0.5, 0.0);
        s.start(0.0);
        let mut t = 0.0;
        while t < 6.0 - 1e-9 {
            let b = t >= 1.2 - 1e-9;
            let rate = match (s.applied, b) {
                (Some(1), false) => 102.0,
                (_, false) => 100.0,
                (Some(1), true) => 1000.0,
                (_, true) => 100.0,
            };
            s.on_interval(&Interval {
                start: t,
                end: t + 0.1,
                amount: rate * 0.1,
                tracked: 1,
                phase: Some(if b { "b" } else { "a" }.into()),
                ..Interval::default()
            });
            t += 0.1;
        }
        let a_probes: Vec<_> = s
            .report
            .probes
            .iter()
            .filter(|p| p.phase.as_deref() == Some("a") && !p.startup)
            .map(|p| (p.candidate, p.warmup + p.duration))
            .collect();
        assert!(
            a_probes.iter().any(|(c, _)| *c == 0),
            "{:?}",
            s.report.probes
        );
        let before = s.report.search_cost;
        let r = s.finish(t, Some(0));
        let note = r
            .notes
            .iter()
            .find(|n| n.contains("phase a") && n.contains("unfinished"))
            .unwrap_or_else(|| panic!("a note: {:?}", r.notes));
        assert!(note.contains("cost"), "{note}");
        // Its probes of CPU 0 (100/s) lost against CPU 1's 102/s.
        let on_0: f64 = a_probes
            .iter()
            .filter(|(c, _)| *c == 0)
            .map(|(_, d)| d)
            .sum();
        let want = on_0 * (1.0 - 100.0 / 102.0);
        assert!(
            (r.search_cost - before - want).abs() < 1e-6,
            "{} - {before} vs {want}",
            r.search_cost
        );
    }

    /// Feeds intervals of 0.1 s at a constant rate from `t` until `until`.
    fn feed(s: &mut Session, mut t: f64, until: f64) -> f64 {
        while t < until - 1e-9 {
            s.on_interval(&Interval {
                start: t,
                end: t + 0.1,
                amount: 10.0,
                tracked: 1,
                ..Interval::default()
            });
            t += 0.1;
        }
        t
    }

    #[test]
    fn a_watched_probe_that_collapses_ends_a_look_after() {
        // The OS placement beside a busy CPU 0 runs at 10 000 units/s until its threads are
        // stacked at 1.25 s and at 100/s from then on; CPU 1 runs at 12 000/s. Readings come
        // as the driver takes them: every 0.1 s, at a warm-up's end and, in a watched
        // probe, at every look.
        let rate = |applied: Option<usize>, t: f64| match applied {
            Some(1) => 12_000.0,
            _ if t < 1.25 => 10_000.0,
            _ => 100.0,
        };
        let collapse_probe = |looks: bool| {
            let mut s = os_or_cpu1(Some(vec![0]));
            s.start(0.5);
            s.begin_if_due(0.5, 1);
            let mut t = 0.5;
            let mut grid = t;
            while t < 10.0 && !s.is_decided() {
                let early = s
                    .warmup_ends()
                    .or_else(|| s.look_due().filter(|_| looks))
                    .filter(|&w| w > t + 1e-9 && w < grid + 0.1 - 1e-9);
                let end = early.unwrap_or(grid + 0.1);
                grid = if early.is_some() { end } else { grid + 0.1 };
                // The amount over [t, end], the rate changing at 1.25 s.
                let fast = (end.min(1.25) - t).max(0.0);
                let amount = rate(s.applied, 0.0) * fast + rate(s.applied, 2.0) * (end - t - fast);
                s.on_interval(&Interval {
                    start: t,
                    end,
                    amount: amount.round(),
                    tracked: 1,
                    ..Interval::default()
                });
                t = end;
            }
            let d = s.report.decision.clone().expect("decided");
            assert_eq!(d.cpus, Some(vec![1]), "{}", d.reason);
            let p = s
                .report
                .probes
                .iter()
                .find(|p| p.candidate == 0 && p.start < 1.25 && p.start + p.duration > 1.25)
                .cloned()
                .expect("a probe of the OS placement across its collapse");
            (p.start + p.duration, s.report.search_cost)
        };
        let (ended, cost) = collapse_probe(true);
        // It ended at the first look past the collapse, not at the next tick.
        assert!(ended <= 1.25 + 0.02 + 1e-6, "ended at {ended}");
        let (ended_ticks, cost_ticks) = collapse_probe(false);
        assert!(ended_ticks > ended + 0.05, "{ended_ticks} vs {ended}");
        assert!(cost < cost_ticks, "{cost} vs {cost_ticks}");
    }

    #[test]
    fn the_cpus_busy_with_other_work_reach_the_search() {
        // The OS placement and a pinning that run alike: on an idle machine the search keeps
        // the OS placement; when the candidate list says CPU 0 is busy with other work, it
        // keeps the pinning (`Strategy::set_busy_neighbours`).
        let decided = |busy: Option<Vec<u32>>| {
            let mut s = os_or_cpu1(busy);
            s.start(0.5);
            s.begin_if_due(0.5, 1);
            feed(&mut s, 0.5, 25.0);
            let d = s.report.decision.clone().expect("decided");
            (d.cpus, d.reason)
        };
        let (idle, why) = decided(None);
        assert_eq!(idle, None, "the OS placement: {why}");
        let (busy, why) = decided(Some(vec![0]));
        assert_eq!(busy, Some(vec![1]), "{why}");
        assert!(why.contains("busy with other work"), "{why}");
    }

    /// A session racing the OS placement against CPU 1, its search due at once (the program
    /// ran 0.5 s already), the candidate list made beside the CPUs `busy` with other work.
    fn os_or_cpu1(busy: Option<Vec<u32>>) -> Session {
        Session::new(
            SessionConfig {
                init: 0.0,
                init_waited: 0.5,
                watch: None,
                ..SessionConfig::default()
            },
            Box::new(move |_| CandidateList {
                pinnings: vec![Pinning::unpinned(), Pinning::from_cpus(vec![1])],
                note: None,
                busy: busy.clone(),
            }),
            Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
        )
    }

    #[test]
    fn a_search_due_at_the_start_begins_at_once_and_skips_needless_warm_ups() {
        let mut s = os_or_cpu1(None);
        s.start(0.5);
        // No threads known yet: nothing to plan for.
        assert!(s.begin_if_due(0.5, 0).is_empty());
        let m = message(&s.begin_if_due(0.5, 1));
        assert!(m.contains("search 0: 2 candidates for 1 thread"), "{m}");
        feed(&mut s, 0.5, 3.0);
        let p = &s.report.probes;
        assert!(p.len() >= 3, "{p:?}");
        // The OS placement first: nothing was pinned yet, so no warm-up, and it starts when
        // the search does.
        assert_eq!((p[0].candidate, p[0].warmup), (0, 0.0), "{p:?}");
        assert!((p[0].start - 0.5).abs() < 1e-6, "{p:?}");
        // Moving to CPU 1 warms up; probing it again right after does not.
        assert_eq!(p[1].candidate, 1);
        assert!(p[1].warmup > 0.0, "{p:?}");
        if p[2].candidate == 1 {
            assert_eq!(p[2].warmup, 0.0, "{p:?}");
        } else {
            assert!(p[2].warmup > 0.0, "{p:?}");
        }
        // Before the start-up is over, nothing begins early.
        let mut late = session(0.5, 0.0);
        late.start(0.0);
        assert!(late.begin_if_due(0.0, 1).is_empty());
    }

    #[test]
    fn a_start_up_that_counted_nothing_at_its_end_is_a_pause_not_a_rate() {
        // GROMACS completes a few OpenMP constructs, then reads its input: the start-up's
        // tail, where the OS placed it, counts nothing.
        let (m, s) = after_start_up(&[3.0, 0.0, 0.0]);
        assert!(
            m.contains("the start-up's last 200 ms counted nothing (OpenMP constructs/s): a pause, not a rate; the OS placement is probed in the search"),
            "{m}"
        );
        // Born on CPU 1 (beside CPUs busy at launch), the pause is that pinning's.
        let (born, _) = after_start_up_on(&[3.0, 0.0, 0.0], Some(vec![1]));
        assert!(
            born.contains("a pause, not a rate; the pinning it started on is probed in the search"),
            "{born}"
        );
        let p = &s.report.probes;
        assert!(p.iter().all(|p| !p.startup), "{p:?}");
        // The OS placement is probed in the search first, where the program already is.
        assert_eq!((p[0].candidate, p[0].warmup), (0, 0.0), "{p:?}");
        assert!(p.iter().all(|p| p.rate > 500.0), "{p:?}");
        // The margin is the probes' 1000 against 600, not against a pause read as a rate.
        let d = s.report.decision.clone().expect("decided");
        assert_eq!(d.candidate_index, 1);
        let margin = d.margin.expect("a margin");
        assert!((0.5..0.8).contains(&margin), "{d:?}");
        // On an idle machine a quiet OS placement 1.67× behind is judged on its three probes
        // (it waited for eight ticks, and the decision came at 2.9 s after five rounds).
        assert!(d.at < 2.0, "{d:?}");
        let os = p.iter().filter(|p| p.candidate == 0).count();
        assert_eq!(os, 3, "{p:?}");
    }

    #[test]
    fn a_start_up_tail_that_counted_too_few_units_is_no_rate() {
        // Three units in the start-up's last 0.2 s (a rate of 15 ± 5 a second, mostly
        // rounding) are not the OS placement's first probe either; ten or more are.
        let (m, s) = after_start_up(&[3.0, 2.0, 1.0]);
        assert!(
            m.contains("the start-up's last 200 ms counted only 3 (OpenMP constructs/s; a probe sees 10 or more): too few for a rate"),
            "{m}"
        );
        assert!(s.report.probes.iter().all(|p| !p.startup));
        let (m, s) = after_start_up(&[3.0, 6.0, 6.0]);
        assert!(!m.contains("the start-up's last"), "{m}");
        let first = &s.report.probes[0];
        assert!(first.startup && first.candidate == 0, "{first:?}");
        assert!((first.rate - 60.0).abs() < 1e-6, "{first:?}");
    }

    /// A session whose OpenMP start-up (seeded, as the run does, from the 0.3 s it waited)
    /// counted `startup` units in each 0.1 s, run until it decides. Once it computes, the
    /// program runs at 600 units/s where the OS places it and at 1000 on the pinning.
    /// Returns what it said and the session.
    fn after_start_up(startup: &[f64]) -> (String, Session) {
        after_start_up_on(startup, None)
    }

    /// `after_start_up`, with the program born pinned to `born` (None: where the OS places
    /// it).
    fn after_start_up_on(startup: &[f64], born: Option<Vec<u32>>) -> (String, Session) {
        let mut s = Session::new(
            SessionConfig {
                init: 0.0,
                init_waited: 0.3,
                startup_is_os: born.is_none(),
                startup_pinned: born,
                unit: "OpenMP constructs/s".into(),
                watch: None,
                ..SessionConfig::default()
            },
            Box::new(|_| vec![Pinning::unpinned(), Pinning::from_cpus(vec![1])].into()),
            Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
        );
        let startup: Vec<Interval> = startup
            .iter()
            .enumerate()
            .map(|(i, &amount)| Interval {
                start: 0.1 * i as f64,
                end: 0.1 * (i + 1) as f64,
                amount,
                tracked: 2,
                ..Interval::default()
            })
            .collect();
        s.seed_startup(&startup);
        let mut said = s.start(0.3);
        said.extend(s.begin_if_due(0.3, 2));
        let mut t: f64 = 0.3;
        while t < 20.0 && !s.is_decided() {
            let amount = if s.applied == Some(1) { 100.0 } else { 60.0 };
            said.extend(s.on_interval(&Interval {
                start: t,
                end: t + 0.1,
                amount,
                tracked: 2,
                ..Interval::default()
            }));
            t += 0.1;
        }
        (message(&said), s)
    }

    #[test]
    fn an_objective_that_never_moves_is_named_and_explained() {
        let mut s = Session::new(
            SessionConfig {
                init: 0.5,
                unit: "beats/s".into(),
                watch: None,
                ..SessionConfig::default()
            },
            Box::new(|_| vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])].into()),
            Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
        );
        s.start(0.0);
        let mut said = Vec::new();
        let mut t = 0.0;
        while t < 4.0 {
            said.extend(s.on_interval(&Interval {
                start: t,
                end: t + 0.1,
                amount: 0.0,
                tracked: 1,
                ..Interval::default()
            }));
            t += 0.1;
        }
        let m = message(&said);
        assert_eq!(m.matches("has measured no progress yet").count(), 1, "{m}");
        assert!(m.contains("(beats/s)"), "{m}");
        let why = s.finish(t, Some(0)).incomplete_reason.clone().unwrap();
        assert!(
            why.contains("without any progress the objective (beats/s)"),
            "{why}"
        );
        assert!(!why.contains("before autopin tried"), "{why}");
    }
}

#[cfg(test)]
mod risk_tests;

#[cfg(test)]
mod search_cost_tests {
    use super::*;
    use crate::strategy::{Race, RaceParams};

    fn two_cpus(_: usize) -> CandidateList {
        vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])].into()
    }

    /// Runs a session whose candidate k progresses at `rate(k)` units a second (rounded to
    /// whole units per reading when `whole`), until it decides or `until` seconds pass. As
    /// the driver does, readings come every 0.1 s and when a warm-up ends.
    fn run(rate: impl Fn(Option<usize>) -> f64, whole: bool, until: f64) -> Session {
        let mut carry = 0.0;
        run_readings(
            |applied, dt| {
                let mut amount = rate(applied) * dt + carry;
                if whole {
                    carry = amount.fract();
                    amount = amount.trunc();
                }
                amount
            },
            until,
        )
    }

    /// [`run`] where `amount(applied, seconds)` is what each reading counts.
    fn run_readings(amount: impl FnMut(Option<usize>, f64) -> f64, until: f64) -> Session {
        run_threads(two_cpus, 1, amount, until)
    }

    /// [`run_readings`] of a program of `threads` threads among the candidates `cands`.
    pub(super) fn run_threads(
        cands: fn(usize) -> CandidateList,
        threads: usize,
        mut amount: impl FnMut(Option<usize>, f64) -> f64,
        until: f64,
    ) -> Session {
        let cfg = SessionConfig {
            init: 0.5,
            watch: None,
            ..SessionConfig::default()
        };
        let mut s = Session::new(
            cfg,
            Box::new(cands),
            Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
        );
        s.start(0.0);
        let mut t = 0.0;
        while t < until && !s.is_decided() {
            let end = s
                .warmup_ends()
                .filter(|&w| w > t + 1e-9 && w < t + 0.1)
                .unwrap_or(t + 0.1);
            let amount = amount(s.applied, end - t);
            s.on_interval(&Interval {
                start: t,
                end,
                amount,
                tracked: threads,
                ..Interval::default()
            });
            t = end;
        }
        s
    }

    #[test]
    fn warm_ups_that_show_a_stalling_move_lengthen_close_calls_probes() {
        // CPU 0 does 100/s and CPU 1 98/s, each reading up to 12% up or down (a close call with
        // noisy probes). When each warm-up reads 30% of the rate (a move stalls the program
        // for 14 ms of its 20), the session hands those readings to the race, which then
        // lengthens the close call's probes and says why; when the warm-ups read the rate,
        // every probe keeps the base length.
        let wobble = [1.12, 0.9, 1.06, 0.94, 0.98];
        let session = |warm: f64| {
            let mut k = 0;
            run_readings(
                |a, dt| {
                    let rate = if a == Some(1) { 98.0 } else { 100.0 };
                    k += 1;
                    let share = if dt < 0.05 { warm } else { wobble[k % 5] };
                    rate * share * dt
                },
                20.0,
            )
        };
        let base = RaceParams::default().probe;
        let s = session(0.3);
        let p = &s.report.probes;
        assert!(
            p.iter().any(|p| p.duration > base + 0.05),
            "{p:?} {:?}",
            s.report.decision
        );
        let reason = &s.report.decision.as_ref().expect("decided").reason;
        assert!(
            reason.contains("a move cost the program about 14 ms"),
            "{reason}"
        );
        let s = session(1.0);
        let p = &s.report.probes;
        assert!(p.iter().all(|p| p.duration < base + 0.05), "{p:?}");
    }

    #[test]
    fn a_pinning_that_stacks_threads_is_ended_at_its_first_collapse() {
        // Two threads: `1,1` puts both on CPU 1, where spinning barrier threads wait for
        // each other (1000× slower). Its first collapsed warm-up is what it does, not the
        // stall of a move, so it is not looked at again.
        fn stacked(_: usize) -> CandidateList {
            vec![
                Pinning::from_cpus(vec![0, 1]),
                Pinning::from_cpus(vec![1, 1]),
            ]
            .into()
        }
        let s = run_threads(
            stacked,
            2,
            |a, dt| if a == Some(0) { 1e5 * dt } else { 100.0 * dt },
            20.0,
        );
        let p = &s.report.probes;
        assert_eq!(p.iter().filter(|p| p.candidate == 1).count(), 1, "{p:?}");
        assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
    }

    #[test]
    fn a_warm_up_far_below_the_leader_is_the_whole_probe() {
        // Candidate 1 runs 1000× slower (a spinning barrier whose threads share a CPU): its
        // 20 ms warm-up already says so, and no tick of it follows. It is ended at its
        // second look, a warm-up again (one collapse may be a stall of the move itself).
        let s = run(|a| if a == Some(0) { 1e5 } else { 100.0 }, false, 20.0);
        let p = &s.report.probes;
        let on_1: Vec<_> = p.iter().filter(|p| p.candidate == 1).collect();
        assert_eq!(on_1.len(), 2, "{p:?}");
        for w in on_1 {
            assert_eq!(w.intervals, 1, "{p:?}");
            assert!(w.duration < 0.05 && w.warmup == 0.0, "{p:?}");
        }
        assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
        // So does a fifth of the leader (a thread moved onto a busy CPU): below
        // `WARMUP_CUT`, more than a cold cache explains.
        let s = run(|a| if a == Some(0) { 1e5 } else { 2e4 }, false, 20.0);
        let p = &s.report.probes;
        assert_eq!((p[1].candidate, p[1].intervals), (1, 1), "{p:?}");
        assert!(p[1].duration < 0.05 && p[1].warmup == 0.0, "{p:?}");
        // Half of the leader is behind, but a warm-up that low could still be a cold start:
        // it gets its one tick.
        let s = run(|a| if a == Some(0) { 1e5 } else { 5e4 }, false, 20.0);
        let p = &s.report.probes;
        assert!((p[1].duration - 0.1).abs() < 1e-9, "{p:?}");
        // Whole units too few to tell a collapse in 20 ms (1000/s: 2 units in a warm-up at
        // the leader's rate) are not read as one: the probe is measured after its warm-up
        // (and, seeing no unit, goes on until it sees one).
        let s = run(|a| if a == Some(0) { 1000.0 } else { 1.0 }, true, 20.0);
        let p = &s.report.probes;
        assert!(p[1].warmup > 0.0 && p[1].duration >= 0.1 - 1e-9, "{p:?}");
        assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
    }

    #[test]
    fn lost_work_counts_each_probe_for_its_own_length() {
        // The decided candidate 0: 100/s over 0.2 s and 120/s over 0.2 s, 110/s as a whole.
        // Candidate 1: one whole probe at 99/s (0.2 s) and two cuts of 20 ms at 1/s, the
        // way a candidate that swings into a collapse is probed. Lost: 0.2 × (1 − 99/110) +
        // 2 × 0.02 × (1 − 1/110) = 0.02 + 0.039636… A mean over its three probes (33.7/s)
        // would say 0.24 × 0.694 = 0.167 s: four times what the probes lost.
        let probes = [
            (0, 100.0, 0.2),
            (1, 99.0, 0.2),
            (0, 120.0, 0.2),
            (1, 1.0, 0.02),
            (1, 1.0, 0.02),
        ];
        let lost = lost_work(probes.iter().copied(), 0).expect("a cost");
        let want = 0.2 * (1.0 - 99.0 / 110.0) + 0.04 * (1.0 - 1.0 / 110.0);
        assert!((lost - want).abs() < 1e-12, "{lost} vs {want}");
        // A probe better than the decided rate lost nothing (the cost is never negative);
        // a candidate never probed has no rate to count in.
        let lost = lost_work([(0, 100.0, 1.0), (1, 110.0, 0.5)].into_iter(), 0).expect("cost");
        assert_eq!(lost, 0.0);
        assert_eq!(lost_work([(1, 50.0, 1.0)].into_iter(), 0), None);
        assert_eq!(lost_work([(1, 50.0, 1.0)].into_iter(), 0), None);
    }

    #[test]
    fn the_report_states_what_the_search_cost() {
        // CPU 1 does 100/s, CPU 0 50/s: every second probing CPU 0 loses half a second of
        // CPU 1's work.
        let s = run(|a| if a == Some(1) { 100.0 } else { 50.0 }, false, 20.0);
        let d = s.report.decision.clone().expect("decided");
        assert_eq!(d.candidate_index, 1);
        let on_0: f64 = s
            .report
            .probes
            .iter()
            .filter(|p| p.candidate == 0)
            .map(|p| p.warmup + p.duration)
            .sum();
        let cost = d.search_cost.expect("a cost");
        assert!(on_0 > 0.0);
        assert!(
            (cost - 0.5 * on_0).abs() < 1e-6,
            "cost {cost}, {on_0} s on CPU 0"
        );
        assert!((s.report.search_cost - cost).abs() < 1e-12);
    }

    #[test]
    fn a_probe_far_below_the_leader_ends_after_one_tick() {
        // Candidate 0 does 100/s and is probed first; candidate 1 does 45/s, below half of
        // every tick of the leader after its first tick (but not so far below it that its
        // warm-up alone would say so): the rest of its probe would be lost work, so it ends
        // there and the search decides.
        let s = run(|a| if a == Some(0) { 100.0 } else { 45.0 }, false, 20.0);
        let p = &s.report.probes;
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!((p[0].candidate, p[0].intervals), (0, 2), "{p:?}");
        assert_eq!((p[1].candidate, p[1].intervals), (1, 1), "{p:?}");
        assert!((p[1].duration - 0.1).abs() < 1e-9, "{p:?}");
        assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
    }

    #[test]
    fn a_probe_close_to_the_leader_runs_its_length_one_well_behind_ends_early() {
        // At 85/s candidate 1 is within the cut (0.8 of the leader's lowest tick): its probe
        // runs its planned length. At 60/s its first tick already says it is well behind,
        // so the rest of the probe is not spent on it (it is still judged on that tick).
        let s = run(|a| if a == Some(0) { 100.0 } else { 85.0 }, false, 20.0);
        let p = &s.report.probes;
        assert_eq!((p[1].candidate, p[1].intervals), (1, 2), "{p:?}");
        let s = run(|a| if a == Some(0) { 100.0 } else { 60.0 }, false, 20.0);
        let p = &s.report.probes;
        assert_eq!((p[1].candidate, p[1].intervals), (1, 1), "{p:?}");
        assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
    }

    #[test]
    fn a_probe_lengthened_for_a_paused_start_up_ends_once_it_has_seen_enough() {
        // The start-up completes a unit or two (GROMACS after its first constructs, reading
        // its input): the grain then looks coarse and the first probe is planned seconds
        // long. The program runs at 800–1000 units/s once probed: the probe ends when it has
        // lasted the length the strategy asked for and seen its 10 units, not seconds later.
        let ticks = std::cell::Cell::new(0);
        let s = run(
            |a| {
                ticks.set(ticks.get() + 1);
                match a {
                    // 3 units in the first tick, then a pause: 6 a second over the start-up.
                    None if ticks.get() == 1 => 30.0,
                    None => 0.0,
                    Some(0) => 1000.0,
                    Some(_) => 800.0,
                }
            },
            true,
            20.0,
        );
        let p = &s.report.probes;
        assert!(!p.is_empty());
        for probe in p {
            assert!(probe.duration < 0.35, "{p:?}");
        }
        assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
    }

    #[test]
    fn a_fine_objective_that_counts_nothing_is_a_collapse_not_a_coarse_grain() {
        // 16 threads of a barrier loop, 300 000 beats a second: on CPU 1 the program counts
        // its warm-up's beats, then stalls (a spinning thread shares a CPU with another
        // job) and counts none. At a tenth of its rate a tick would have seen thousands, so
        // the probe ends at its length instead of waiting seconds for a beat.
        let s = run_readings(
            |applied, dt| {
                let stalled = applied == Some(1) && dt > 0.05;
                if stalled {
                    0.0
                } else {
                    (3e5 * dt).round()
                }
            },
            20.0,
        );
        let p = &s.report.probes;
        let on_1: Vec<&ProbeRecord> = p.iter().filter(|p| p.candidate == 1).collect();
        assert!(!on_1.is_empty(), "{p:?}");
        for probe in &on_1 {
            assert!(probe.duration < 0.25, "{p:?}");
        }
        let d = s.report.decision.clone().expect("decided");
        assert_eq!(d.candidate_index, 0);
        assert!(d.at < 1.5, "{d:?}");
    }

    #[test]
    fn a_coarse_objective_gets_probes_long_enough_to_see_it() {
        // 2–4 whole units a second (an OpenMP region of 250–500 ms): a 0.2 s probe would
        // see 0 or 1 of them. Probes are made long enough to see about 10, so none reads zero
        // and the 2× better CPU is found.
        let s = run(|a| if a == Some(1) { 4.0 } else { 2.0 }, true, 60.0);
        assert!(s.report.probes.len() >= 2);
        for (i, p) in s.report.probes.iter().enumerate() {
            assert!(p.rate > 0.0, "a probe read zero: {p:?}");
            // The first probe starts before the grain is known: it goes on until it saw a
            // unit. Later ones are planned long enough from the start.
            if i > 0 {
                assert!(p.duration >= 2.0 - 1e-9, "probe {i} of {} s", p.duration);
            }
        }
        assert_eq!(s.report.decision.expect("decided").candidate_index, 1);
    }
}
