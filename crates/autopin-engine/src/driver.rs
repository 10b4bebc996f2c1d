//! The driver: the loop that connects a [`Session`] to the OS traits. Every `tick` it polls
//! the threads, pins newcomers, reads the counters, turns the difference into an
//! [`Interval`] and carries out the session's actions. The same loop runs the real program
//! and the simulated machine.

use crate::error::EngineError;
use crate::pinner::{PinError, Pinner};
use crate::sensors::{Clock, Meter, Reading, ThreadSnapshot, ThreadSource};
use crate::session::{Action, Interval, Session};
use autopin_objective::progress::{TeamFlags, TeamState};
use autopin_placement::Pinning;
use autopin_topology::CpuSet;
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// Sampling interval, seconds.
    pub tick: f64,
    /// CPUs an unpinned thread may use (the target's original affinity).
    pub allowed: CpuSet,
    /// Stop after this many seconds even if the target still runs (attach mode: detach);
    /// None = until the target ends.
    pub max_time: Option<f64>,
    /// Attached targets: remember each thread's CPU mask before its first re-pin, use it
    /// for "unpinned" (never widen a mask the user or a cgroup set), and put it back when
    /// autopin detaches without a decision.
    pub keep_masks: bool,
    /// Seconds the target has already run when the driver starts (e.g. waiting for its
    /// heartbeat): every time in the report counts from the target's start.
    pub started: f64,
    /// A thread whose CPU mask someone else changed since autopin set it makes autopin
    /// stand back (false with `--override-binding`: autopin pins it again).
    pub respect_own_binding: bool,
}

/// Where the driver last put one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placed {
    /// The [`Pinned::applied`] count when it was placed: a later candidate moves it.
    applied: u64,
    /// Its CPU then (None: its unpinned mask), for a move that would leave it where it is.
    cpu: Option<u32>,
}

/// What the driver has done to the target's threads.
#[derive(Default)]
struct Pinned {
    /// Where each tracked thread was last placed, and under which applied candidate (a
    /// count, not the label: a label can list thousands of CPUs, and this is written for
    /// every thread at every move).
    with: HashMap<u32, Placed>,
    /// Candidates applied so far: each Apply counts one, and the threads placed under an
    /// earlier count are due to move.
    applied: u64,
    /// The tracked threads and the applied count when every tracked thread was last seen
    /// placed: while neither changes there is nothing to look at (at thousands of threads
    /// a walk over them every tick cost more than the rest of the tick).
    settled: Option<(ThreadSet, u64)>,
    /// tid → CPU mask before autopin first touched it (attached targets only).
    original: HashMap<u32, CpuSet>,
    /// tid → its mask right after autopin set it (what was asked, when that lies inside the
    /// allowed CPUs, as the kernel then keeps it exactly; else as read back): a thread whose
    /// mask differs later was bound by someone else (the program itself, or a tool).
    set: BTreeMap<u32, CpuSet>,
    /// Re-pins done, for the rotation of the threads looked at before one.
    repins: usize,
    /// Masks set by the last pass.
    last_moved: usize,
    /// The thread the next periodic look at those masks starts from (they are looked at a
    /// few at a time, in tid order, so thousands of threads cost a few system calls a second).
    check_from: u32,
    /// The applied count under which the kernel last refused a thread's mask, and how many
    /// threads it refused then.
    refused: (u64, usize),
    /// tid → the CPU the kernel ran it on when it last left the OS placement for a pinning:
    /// the OS placement's next probe starts the thread there (see `pin_tracked`).
    os_cpus: HashMap<u32, u32>,
    /// Whether the thread source was told that autopin sets the masks now
    /// ([`ThreadSource::moving_threads`]).
    told_source: bool,
}

impl Pinned {
    /// Threads the kernel refused under the candidate applied last.
    fn refused_last(&self) -> usize {
        if self.refused.0 == self.applied {
            self.refused.1
        } else {
            0
        }
    }
}

/// Threads whose mask is compared with what autopin set, per periodic look.
const MASK_CHECKS: usize = 16;
/// Up to this many tracked threads, every thread's mask is looked at before autopin re-pins
/// it; beyond, about this many a re-pin, a different share each time (the periodic looks
/// cover the rest), so a program of thousands of threads does not pay a system call per
/// thread per move for it.
const REPIN_CHECKS: usize = 256;
/// Seconds between periodic looks at the masks autopin set.
const MASK_CHECK_PERIOD: f64 = 1.0;
/// Up to this many tracked threads, the OS placement resumes where it left off: a thread's
/// CPU is read when it leaves it (a /proc read each) and it is put back there first when it
/// returns (a system call more). Beyond, a move of thousands of threads would cost that
/// many more, and the OS placement starts where the last pinning left the threads.
const OS_RESUME_MAX: usize = 256;

/// How the driver loop ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The target's exit status when it ended (None when detached or unknown).
    pub exit_status: Option<i32>,
    pub ended: bool,
    /// Seconds since the start.
    pub elapsed: f64,
    /// Pinning failures that were not fatal (thread gone).
    pub pin_warnings: Vec<String>,
    /// Threads whose mask the kernel refused under the candidate applied last (the
    /// decision, when there is one): they do not run where the report's pinning says.
    pub refused_last: usize,
    /// The target's context switches per second while it was watched (when its thread
    /// source reports them), for the perturbation estimate.
    pub switch_rate: Option<f64>,
    /// Threads whose original CPU mask was put back when autopin detached.
    pub restored: usize,
}

pub struct Driver<'a> {
    pub clock: &'a mut dyn Clock,
    pub threads: &'a mut dyn ThreadSource,
    pub pinner: &'a dyn Pinner,
    pub meter: &'a mut dyn Meter,
    pub on_message: &'a mut dyn FnMut(f64, &str),
    /// Called after each interval (to write partial reports, check for stop requests);
    /// returning false stops the loop (detach).
    pub keep_going: &'a mut dyn FnMut(&Session) -> bool,
}

/// The shortest interval the driver reads on its own account (a warm-up's end): shorter
/// ones would be mostly the cost of reading.
const MIN_INTERVAL: f64 = 0.005;

/// The driver's period once a decision is in force: newcomers join the decided pinning and
/// the phase watch reads the rate at this pace. Every reading scans the program's threads and
/// reads each thread's counters, which for a program of thousands of threads costs more than
/// the watch needs (it acts on drops that last seconds).
pub const DECIDED_TICK: f64 = 0.5;

fn target_cpus(c: &Pinning, index: usize, unpinned: &CpuSet) -> CpuSet {
    match c.cpu_for(index) {
        Some(cpu) => CpuSet::from_cpus([cpu]),
        None => unpinned.clone(),
    }
}

impl Driver<'_> {
    /// Sets `tid`'s CPUs: whether they were set (Some(true)), the thread is gone
    /// (Some(false)), or the kernel refused them (None; with a warning).
    fn pin(
        &self,
        tid: u32,
        cpus: &CpuSet,
        warnings: &mut Vec<String>,
    ) -> Result<Option<bool>, EngineError> {
        match self.pinner.set_affinity(tid as i32, cpus) {
            Ok(()) => Ok(Some(true)),
            Err(PinError::Gone(_)) => Ok(Some(false)),
            Err(e @ PinError::Permission { .. }) => Err(EngineError::Permission(e.to_string())),
            Err(e) => {
                if warnings.len() < 20 {
                    warnings.push(e.to_string());
                }
                Ok(None)
            }
        }
    }

    /// Pins every tracked thread not yet pinned with the applied candidate (all of them
    /// right after an Apply, newcomers otherwise).
    fn pin_tracked(
        &mut self,
        session: &Session,
        snap: &ThreadSnapshot,
        pinned: &mut Pinned,
        cfg: &DriverConfig,
        warnings: &mut Vec<String>,
    ) -> Result<Option<String>, EngineError> {
        let Some(c) = session.applied() else {
            return Ok(None);
        };
        // Nothing applied and no thread came or went since every thread was placed.
        let tracked = ThreadSet::of_tracked(&snap.tracked);
        if pinned.settled == Some((tracked, pinned.applied)) {
            return Ok(None);
        }
        // Which threads' masks are looked at before they are moved: all of them, or every
        // stride-th from a rotating start.
        let stride = snap.tracked.len().div_ceil(REPIN_CHECKS).max(1);
        let offset = pinned.repins % stride;
        if !pinned.told_source {
            self.threads.moving_threads();
            pinned.told_source = true;
        }
        let mut moved = false;
        pinned.last_moved = 0;
        for (i, (tid, index)) in snap.tracked.iter().enumerate() {
            let before = pinned.with.get(tid).copied();
            if before.is_some_and(|p| p.applied == pinned.applied) {
                continue;
            }
            let cpu = c.cpu_for(*index);
            let placed = Placed {
                applied: pinned.applied,
                cpu,
            };
            // A thread the new candidate leaves on its CPU keeps its mask: a move between two
            // candidates that share most places costs only the threads that change (a system
            // call each, thousands a move). Only while masks are watched: with
            // --override-binding every move sets each mask again, whoever changed it.
            if cfg.respect_own_binding && before.is_some_and(|p| p.cpu == cpu) {
                pinned.with.insert(*tid, placed);
                continue;
            }
            moved = true;
            pinned.last_moved += 1;
            if cfg.respect_own_binding && i % stride == offset {
                if let Some(what) = self.bound_by_someone_else(*tid, pinned) {
                    return Ok(Some(what));
                }
            }
            if cfg.keep_masks && !pinned.original.contains_key(tid) {
                if let Ok(mask) = self.pinner.affinity(*tid as i32) {
                    pinned.original.insert(*tid, mask);
                }
            }
            let unpinned = pinned.original.get(tid).unwrap_or(&cfg.allowed);
            let target = target_cpus(c, *index, unpinned);
            if snap.tracked.len() <= OS_RESUME_MAX {
                self.resume_os(*tid, before, cpu, unpinned, &mut pinned.os_cpus, warnings)?;
            }
            let set = match self.pin(*tid, &target, warnings)? {
                Some(set) => set,
                None => {
                    if pinned.refused.0 != pinned.applied {
                        pinned.refused = (pinned.applied, 0);
                    }
                    pinned.refused.1 += 1;
                    false
                }
            };
            pinned.with.insert(*tid, placed);
            if cfg.respect_own_binding && set {
                // Inside the allowed CPUs the kernel keeps exactly what was asked.
                if target.is_subset(&cfg.allowed) {
                    pinned.set.insert(*tid, target);
                } else if let Ok(mask) = self.pinner.affinity(*tid as i32) {
                    pinned.set.insert(*tid, mask);
                }
            }
        }
        if moved {
            pinned.repins += 1;
        }
        // Threads gone since the last pass are forgotten (none are when the tracked threads
        // are those of the last pass, and a move changed only where they are).
        if pinned.settled.map(|s| s.0) != Some(tracked) {
            let live: HashSet<u32> = snap.tracked.iter().map(|t| t.0).collect();
            pinned.with.retain(|t, _| live.contains(t));
            pinned.set.retain(|t, _| live.contains(t));
            pinned.os_cpus.retain(|t, _| live.contains(t));
        }
        pinned.settled = Some((tracked, pinned.applied));
        Ok(None)
    }

    /// The OS placement resumes where it left off. A thread it placed is moved to a pinning:
    /// its CPU then is noted. Moved back to the OS placement, it goes to that CPU first and
    /// only then gets its unpinned mask, which leaves a running thread where it is. Without
    /// this, a probe of the OS placement starts where the last pinning put the threads, and
    /// the kernel takes 0.1–0.2 s to place them its own way: beside a busy CPU such a probe
    /// read as fast as the pinning before it (GROMACS: 18 800 OpenMP constructs/s against
    /// the pinning's 18 800, where whole runs of the OS placement took 1.5× as long), and
    /// the race needed rounds more to see the OS placement's own rate. Resumed, its probes
    /// join up into one stretch of the OS placement, as if the program had run there.
    fn resume_os(
        &self,
        tid: u32,
        before: Option<Placed>,
        cpu: Option<u32>,
        unpinned: &CpuSet,
        os_cpus: &mut HashMap<u32, u32>,
        warnings: &mut Vec<String>,
    ) -> Result<(), EngineError> {
        match cpu {
            // Leaving the OS placement: where does the kernel run it? (A thread not yet
            // placed by autopin is the OS's when its mask is the unpinned one: not a
            // thread pinned at its birth.)
            Some(_) => {
                let os_placed = match before {
                    Some(p) => p.cpu.is_none(),
                    None => self
                        .pinner
                        .affinity(tid as i32)
                        .is_ok_and(|m| m == *unpinned),
                };
                if os_placed {
                    match self.pinner.cpu_of(tid as i32) {
                        Some(at) => os_cpus.insert(tid, at),
                        None => os_cpus.remove(&tid),
                    };
                }
            }
            // Back to it from a pinning on another CPU.
            None => {
                let at = os_cpus.get(&tid).copied();
                if let (Some(at), Some(from)) = (at, before.and_then(|p| p.cpu)) {
                    if at != from && unpinned.contains(at) {
                        let _ = self.pin(tid, &CpuSet::from_cpus([at]), warnings)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Says how, when `tid`'s CPU mask is no longer the one autopin set.
    fn bound_by_someone_else(&self, tid: u32, pinned: &Pinned) -> Option<String> {
        let ours = pinned.set.get(&tid)?;
        let now = self.pinner.affinity(tid as i32).ok()?;
        (now != *ours).then(|| {
            format!(
                "thread {tid}'s CPUs became {} after autopin set {}",
                now.to_list(),
                ours.to_list()
            )
        })
    }

    /// A few of the masks autopin set, compared with the threads' masks now (round robin).
    fn look_at_masks(&self, pinned: &mut Pinned) -> Option<String> {
        // The next few threads from where the last look ended, wrapping around.
        let next: Vec<u32> = pinned
            .set
            .range(pinned.check_from..)
            .chain(pinned.set.range(..pinned.check_from))
            .map(|(t, _)| *t)
            .take(MASK_CHECKS)
            .collect();
        pinned.check_from = next.last().map_or(0, |t| t.wrapping_add(1));
        next.into_iter()
            .find_map(|t| self.bound_by_someone_else(t, pinned))
    }

    /// The program binds its own threads: autopin stands back and forgets its own masks
    /// (nothing of the program's binding is undone at the end).
    fn stand_back(&mut self, session: &mut Session, now: f64, what: &str, pinned: &mut Pinned) {
        for a in session.stand_back(now, what) {
            if let Action::Message(m) = a {
                (self.on_message)(now, &m);
            }
        }
        pinned.original.clear();
        pinned.set.clear();
    }

    // Over 100 lines on purpose: the driver's one loop. The pace, the grid of readings, the
    // last reading and whether it still counts are its locals, carried from tick to tick; in
    // pieces they would become a struct every piece reads and writes.
    /// Runs until the target ends (or `max_time`, or `keep_going` says stop).
    pub fn run(
        &mut self,
        session: &mut Session,
        cfg: &DriverConfig,
    ) -> Result<Outcome, EngineError> {
        // Ticks count from now; report times from the target's start.
        let ticks_from = self.clock.now();
        let t0 = ticks_from - cfg.started;
        let mut warnings = Vec::new();
        for a in session.start(cfg.started) {
            if let Action::Message(m) = a {
                (self.on_message)(cfg.started, &m);
            }
        }
        let mut snap = self.threads.poll().map_err(EngineError::from)?;
        let mut prev: Reading = self.meter.read(&snap.all).map_err(EngineError::from)?;
        // The threads the last reading was taken on: a meter that reads the program's total
        // (no per-thread amounts) still needs a changed thread set to mark the interval.
        let mut prev_set = ThreadSet::of(&snap.all);
        let mut prev_t = cfg.started;
        let mut pinned = Pinned::default();
        // Start-up already over (the objective's choice waited it out): the first probe
        // starts now rather than a tick later.
        for a in session.begin_if_due(cfg.started, snap.tracked.len()) {
            if let Action::Message(m) = a {
                (self.on_message)(cfg.started, &m);
            }
        }
        if let Some(what) = self.pin_tracked(session, &snap, &mut pinned, cfg, &mut warnings)? {
            self.stand_back(session, cfg.started, &what, &mut pinned);
        }
        let mut counting = true;
        let mut next_mask_check = cfg.started + MASK_CHECK_PERIOD;
        // The tick grid: readings every `tick` from `grid_from`. A warm-up shorter than a
        // tick ends with a reading of its own and the grid starts again from there, so a
        // move costs its warm-up, not a whole tick.
        let mut grid_from = ticks_from;
        let mut step = 0u64;
        let mut period = cfg.tick;
        let mut last_wake = ticks_from;
        // The team size last asked of the program's OpenMP runtime (0: its own count): the
        // one asked before its start, if any (the start-up may have applied a candidate
        // since, whose team is asked below).
        let mut team_wanted = want_word(session.team_asked_at_birth());
        // The library's view of the teams at the last reading.
        let mut team_before: Option<TeamState> = self.meter.team();
        loop {
            if let Some(status) = snap.ended {
                let now = self.clock.now() - t0;
                session.saw_threads(0, snap.existed);
                session.finish(now, status);
                return Ok(Outcome {
                    exit_status: status,
                    ended: true,
                    elapsed: now,
                    pin_warnings: warnings,
                    refused_last: pinned.refused_last(),
                    switch_rate: self.threads.switch_rate(),
                    restored: 0,
                });
            }
            // A new pace (a decision came into force, or a search started again) counts
            // from the last reading.
            let pace = if session.is_decided() || session.stood_back() {
                cfg.tick.max(DECIDED_TICK)
            } else {
                cfg.tick
            };
            if pace != period {
                period = pace;
                grid_from = last_wake;
                step = 0;
                if counting {
                    self.meter.whole_program(session.is_decided());
                    prev = self.meter.read(&snap.all).map_err(EngineError::from)?;
                    team_before = self.meter.team();
                    prev_set = ThreadSet::of(&snap.all);
                    prev_t = self.clock.now() - t0;
                }
            }
            step += 1;
            let mut tick_at = grid_from + step as f64 * period;
            if let Some(m) = cfg.max_time {
                // Detach on time even at the slow pace.
                tick_at = tick_at.min(t0 + m).max(last_wake + MIN_INTERVAL);
            }
            // (A warm-up's end, or a look at a watched probe between ticks.)
            let warm_end = session
                .warmup_ends()
                .or_else(|| session.look_due())
                .map(|t| t + t0)
                .filter(|w| *w < tick_at - MIN_INTERVAL);
            let wake = warm_end.unwrap_or(tick_at);
            // Sleep to the next reading, but wake when the program ends: autopin's exit then
            // follows the program's at once.
            let left = wake - self.clock.now();
            if left > 0.0 && !self.threads.wait_for_end(left) {
                self.clock.sleep_until(wake);
            }
            let now = self.clock.now() - t0;
            last_wake = now + t0;
            if warm_end.is_some() {
                grid_from = now + t0;
                step = 0;
            }
            snap = self.threads.poll().map_err(EngineError::from)?;
            if snap.ended.is_some() {
                continue;
            }
            session.saw_threads(snap.tracked.len(), snap.existed);
            let mut actions = Vec::new();
            if counting {
                let cur = self.meter.read(&snap.all).map_err(EngineError::from)?;
                let set = ThreadSet::of(&snap.all);
                let mut iv = interval(&prev, &cur, prev_t, now, &snap);
                iv.disturbed |= set != prev_set;
                // A team size asked of the program reaches it at its next region's start;
                // until the library says it applied it, a region begun under the team
                // before runs on. An interval measured the candidate's team only where
                // it was in force at both its readings: one in which the region began
                // ran the team before for a part nobody can tell (a want the program
                // refuses never comes: its candidate runs the program's own team, and is
                // measured as it runs).
                let team_now = self.meter.team();
                let lags = |t: &Option<TeamState>| {
                    t.is_some_and(|t| t.applied != team_wanted && !t.flags.has(TeamFlags::REFUSED))
                };
                // (Before any candidate, the start-up measures whatever team ran: a team
                // asked at birth reaches the program at its second region, or never in a
                // program of one long region, whose start-up is its own count's.)
                iv.team_lag =
                    session.applied().is_some() && (lags(&team_now) || lags(&team_before));
                team_before = team_now;
                actions = session.on_interval(&iv);
                prev = cur;
                prev_set = set;
                prev_t = now;
            }
            let mut applied = false;
            for a in actions {
                match a {
                    Action::Message(m) => (self.on_message)(now, &m),
                    Action::Apply(_) => {
                        pinned.applied += 1;
                        applied = true;
                    }
                }
            }
            // A candidate with a team size asks the program's runtime for it; any other
            // gives the program its own count back.
            let want = want_word(session.team_asked());
            if want != team_wanted {
                self.meter.want_team(want);
                team_wanted = want;
            }
            // What a move costs autopin, for the strategy's probe lengths.
            let cpu_before = applied.then(|| self.clock.cpu_seconds()).flatten();
            let mut own = self.pin_tracked(session, &snap, &mut pinned, cfg, &mut warnings)?;
            if let (Some(a), Some(b)) = (cpu_before, self.clock.cpu_seconds()) {
                if own.is_none() && pinned.last_moved > 0 {
                    session.moved((b - a).max(0.0), pinned.last_moved);
                }
            }
            if own.is_none() && cfg.respect_own_binding && now >= next_mask_check {
                next_mask_check = now + MASK_CHECK_PERIOD;
                own = self.look_at_masks(&mut pinned);
            }
            if let Some(what) = own {
                self.stand_back(session, now, &what, &mut pinned);
            }
            if counting && !session.wants_counting() {
                self.meter.pause();
                counting = false;
            }
            if !(self.keep_going)(session) || cfg.max_time.is_some_and(|m| now >= m) {
                // Leaving the program as it was found unless there is a decision to keep.
                let mut restored = 0;
                if session.report.decision.is_none() {
                    for (tid, mask) in &pinned.original {
                        if self.pinner.set_affinity(*tid as i32, mask).is_ok() {
                            restored += 1;
                        }
                    }
                }
                session.detach(now, restored);
                return Ok(Outcome {
                    exit_status: None,
                    ended: false,
                    elapsed: now,
                    pin_warnings: warnings,
                    refused_last: pinned.refused_last(),
                    switch_rate: self.threads.switch_rate(),
                    restored,
                });
            }
        }
    }
}

/// Which threads a reading was taken on, in 16 bytes whatever their number: how many, and
/// an order-free sum of their mixed ids (two different sets of equal size share it by chance
/// only, about once in 2^64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ThreadSet {
    count: usize,
    sum: u64,
}

impl ThreadSet {
    fn of(threads: &[u32]) -> ThreadSet {
        Self::of_ids(threads.iter().copied())
    }

    /// The set of the tracked threads' ids (a thread's index follows from its id).
    fn of_tracked(tracked: &[(u32, usize)]) -> ThreadSet {
        Self::of_ids(tracked.iter().map(|t| t.0))
    }

    fn of_ids(ids: impl Iterator<Item = u32>) -> ThreadSet {
        let mix = |t: u32| {
            // splitmix64's finaliser: neighbouring ids land far apart.
            let mut z = u64::from(t).wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        ids.fold(ThreadSet { count: 0, sum: 0 }, |s, t| ThreadSet {
            count: s.count + 1,
            sum: s.sum.wrapping_add(mix(t)),
        })
    }
}

/// A team size as the preload library's `want` word reads it (0: the program's own count).
pub fn want_word(team: Option<usize>) -> u32 {
    team.map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The interval between two readings. Per-thread amounts count only threads present in
/// both readings; a changed thread set marks the interval disturbed.
pub fn interval(
    prev: &Reading,
    cur: &Reading,
    t0: f64,
    t1: f64,
    snap: &crate::sensors::ThreadSnapshot,
) -> Interval {
    // Thread → index, for per-thread amounts only: a meter that reads the program as a whole
    // (thousands of threads) has none, and needs no map of them every tick.
    let index: HashMap<u32, usize> = if cur.per_thread.is_empty() {
        HashMap::new()
    } else {
        snap.tracked.iter().cloned().collect()
    };
    let mut per_thread = Vec::new();
    let mut sum = 0.0;
    for (tid, v) in &cur.per_thread {
        if let Some(p) = prev.per_thread.get(tid) {
            let d = (v - p).max(0.0);
            sum += d;
            if let Some(i) = index.get(tid) {
                per_thread.push((*tid, *i, d));
            }
        }
    }
    let same = prev.per_thread.len() == cur.per_thread.len()
        && prev
            .per_thread
            .keys()
            .all(|k| cur.per_thread.contains_key(k));
    let amount = match (prev.total, cur.total) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => sum,
    };
    Interval {
        start: t0,
        end: t1,
        amount,
        per_thread,
        disturbed: !same,
        team_lag: false,
        tracked: snap.tracked.len(),
        existed: snap.existed,
        phase: cur.phase.clone(),
        phase_changed: matches!((prev.phase_seq, cur.phase_seq), (Some(a), Some(b)) if a != b),
        progress: match (prev.progress, cur.progress) {
            (Some((a, _)), Some((b, name))) => Some(((b - a).max(0.0), name)),
            _ => None,
        },
    }
}
