//! The driver: the loop that connects a [`Session`] to the OS traits. Every `tick` it polls
//! the threads, pins newcomers, reads the counters, turns the difference into an
//! [`Interval`] and carries out the session's actions. The same loop runs the real program
//! and the simulated machine.

use crate::candidate::Candidate;
use crate::os::{Clock, Meter, Reading, ThreadSource};
use crate::session::{Action, Interval, Session};
use crate::target::affinity::{PinError, Pinner};
use autopin_topology::CpuSet;
use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// Sampling interval, seconds.
    pub tick: f64,
    /// CPUs an unpinned thread may use (the target's original affinity).
    pub allowed: CpuSet,
    /// Stop after this many seconds even if the target still runs (attach mode: detach);
    /// None = until the target ends.
    pub max_time: Option<f64>,
}

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
}

/// A failure that stops the driver (e.g. no permission to pin the target's threads).
#[derive(Debug, Clone, PartialEq)]
pub struct DriverError(pub String);

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
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

fn target_cpus(c: &Candidate, index: usize, allowed: &CpuSet) -> CpuSet {
    match c.cpu_for(index) {
        Some(cpu) => CpuSet::from_cpus([cpu]),
        None => allowed.clone(),
    }
}

impl Driver<'_> {
    fn pin(&self, tid: u32, cpus: &CpuSet, warnings: &mut Vec<String>) -> Result<(), DriverError> {
        match self.pinner.set_affinity(tid as i32, cpus) {
            Ok(()) => Ok(()),
            Err(PinError::Gone(_)) => Ok(()),
            Err(e @ PinError::Permission { .. }) => Err(DriverError(e.to_string())),
            Err(e) => {
                if warnings.len() < 20 {
                    warnings.push(e.to_string());
                }
                Ok(())
            }
        }
    }

    /// Runs until the target ends (or `max_time`, or `keep_going` says stop).
    pub fn run(
        &mut self,
        session: &mut Session,
        cfg: &DriverConfig,
    ) -> Result<Outcome, DriverError> {
        let t0 = self.clock.now();
        let mut warnings = Vec::new();
        for a in session.start(0.0) {
            if let Action::Message(m) = a {
                (self.on_message)(0.0, &m);
            }
        }
        let mut snap = self.threads.poll().map_err(DriverError)?;
        let mut prev: Reading = self.meter.read(&snap.all).map_err(DriverError)?;
        let mut prev_t = 0.0;
        // Which candidate (by label) each tracked thread was last pinned with.
        let mut pinned_with: HashMap<u32, String> = HashMap::new();
        let mut counting = true;
        let mut step = 0u64;
        loop {
            if let Some(status) = snap.ended {
                let now = self.clock.now() - t0;
                session.finish(now, status);
                return Ok(Outcome {
                    exit_status: status,
                    ended: true,
                    elapsed: now,
                    pin_warnings: warnings,
                });
            }
            step += 1;
            let next = step as f64 * cfg.tick;
            self.clock.sleep_until(t0 + next);
            let now = self.clock.now() - t0;
            snap = self.threads.poll().map_err(DriverError)?;
            if snap.ended.is_some() {
                continue;
            }
            let mut actions = Vec::new();
            if counting {
                let cur = self.meter.read(&snap.all).map_err(DriverError)?;
                let iv = interval(&prev, &cur, prev_t, now, &snap);
                actions = session.on_interval(&iv);
                prev = cur;
                prev_t = now;
            }
            for a in actions {
                match a {
                    Action::Message(m) => (self.on_message)(now, &m),
                    Action::Apply(_) => pinned_with.clear(),
                }
            }
            // Pin every tracked thread not yet pinned with the applied candidate (all of
            // them right after an Apply, newcomers otherwise).
            if let Some(c) = session.applied().cloned() {
                for (tid, index) in &snap.tracked {
                    if pinned_with.get(tid) != Some(&c.label) {
                        self.pin(*tid, &target_cpus(&c, *index, &cfg.allowed), &mut warnings)?;
                        pinned_with.insert(*tid, c.label.clone());
                    }
                }
                let live: BTreeSet<u32> = snap.tracked.iter().map(|t| t.0).collect();
                pinned_with.retain(|t, _| live.contains(t));
            }
            if counting && !session.wants_counting() {
                self.meter.pause();
                counting = false;
            }
            if !(self.keep_going)(session) || cfg.max_time.is_some_and(|m| now >= m) {
                session.finish(now, None);
                return Ok(Outcome {
                    exit_status: None,
                    ended: false,
                    elapsed: now,
                    pin_warnings: warnings,
                });
            }
        }
    }
}

/// The interval between two readings. Per-thread amounts count only threads present in
/// both readings; a changed thread set marks the interval disturbed.
pub fn interval(
    prev: &Reading,
    cur: &Reading,
    t0: f64,
    t1: f64,
    snap: &crate::os::ThreadSnapshot,
) -> Interval {
    let index: HashMap<u32, usize> = snap.tracked.iter().cloned().collect();
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
        tracked: snap.tracked.len(),
        phase: cur.phase.clone(),
        phase_changed: matches!((prev.phase_seq, cur.phase_seq), (Some(a), Some(b)) if a != b),
        progress: match (prev.progress, cur.progress) {
            (Some((a, _)), Some((b, name))) => Some(((b - a).max(0.0), name)),
            _ => None,
        },
    }
}
