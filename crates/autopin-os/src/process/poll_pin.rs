//! Pinning by watching /proc: the fallback for programs the preload library cannot reach
//! (static binaries). New threads are found by polling /proc/PID/task and pinned by the
//! plan's rules, so each runs unpinned (on its creator's CPU, since it inherits that
//! affinity) for up to one polling interval.

use super::launch::Launched;
use super::proc_scan::{ProcFs, ProcThread, ThreadOrder};
use autopin_engine::pin_plan::{PinPlan, PlanCursor};
use autopin_engine::pinner::{PinError, Pinner};
use autopin_topology::CpuSet;
use std::io;
use std::time::Duration;

/// What happened to one newly seen thread.
#[derive(Debug)]
pub struct PinOutcome {
    pub index: usize,
    pub tid: i32,
    /// The CPU it was pinned to, or None when the skip mask left it unpinned.
    pub cpu: Option<u32>,
    pub result: Result<(), PinError>,
}

/// Applies a [`PinPlan`] to threads as scans discover them.
#[derive(Debug)]
pub struct PollPinner {
    plan: PinPlan,
    cursor: PlanCursor,
    order: ThreadOrder,
    unpinned: CpuSet,
}

impl PollPinner {
    /// `unpinned` is the affinity skipped threads get (the CPUs the program could use
    /// before pinning).
    pub fn new(pid: i32, plan: PinPlan, unpinned: CpuSet) -> Self {
        let cursor = plan.cursor();
        PollPinner {
            plan,
            cursor,
            order: ThreadOrder::new(pid),
            unpinned,
        }
    }

    /// Pins the threads of `scan` not seen before, in creation order.
    pub fn step(&mut self, scan: &[ProcThread], pinner: &dyn Pinner) -> Vec<PinOutcome> {
        let mut out = Vec::new();
        for (index, t) in self.order.observe(scan) {
            let cpu = if index == 0 {
                Some(self.plan.main_cpu())
            } else {
                self.cursor.next_created()
            };
            let set = match cpu {
                Some(c) => CpuSet::from_cpus([c]),
                None => self.unpinned.clone(),
            };
            let result = pinner.set_affinity(t.tid, &set);
            out.push(PinOutcome {
                index,
                tid: t.tid,
                cpu,
                result,
            });
        }
        out
    }
}

/// Polls the launched program until it exits, pinning its threads; returns its exit
/// code. `warn` receives one line per distinct problem (a thread that vanished before it
/// could be pinned is not a problem).
pub fn pin_by_polling(
    launched: &mut Launched,
    plan: &PinPlan,
    unpinned: CpuSet,
    pinner: &dyn Pinner,
    procfs: &ProcFs,
    mut warn: impl FnMut(&str),
) -> io::Result<i32> {
    const FAST: Duration = Duration::from_millis(1);
    const SLOW: Duration = Duration::from_millis(50);
    let mut poller = PollPinner::new(launched.pid(), plan.clone(), unpinned);
    let mut interval = FAST;
    let mut warned = false;
    loop {
        if let Some(code) = launched.try_wait()? {
            return Ok(code);
        }
        // The process can end between try_wait and the scan: then the next try_wait says so.
        let scan = procfs.threads(launched.pid()).unwrap_or_default();
        let outcomes = poller.step(&scan, pinner);
        for o in &outcomes {
            match &o.result {
                Ok(()) | Err(PinError::Gone(_)) => {}
                Err(e) if !warned => {
                    warn(&format!(
                        "thread {} (#{}) left unpinned: {e}",
                        o.tid, o.index
                    ));
                    warned = true;
                }
                Err(_) => {}
            }
        }
        // Poll fast while threads are appearing, back off while nothing changes.
        interval = if outcomes.is_empty() {
            (interval * 2).min(SLOW)
        } else {
            FAST
        };
        std::thread::sleep(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_engine::pin_plan::SkipMask;
    use autopin_engine::pinner::RecordingPinner;

    fn t(tid: i32, start: u64) -> ProcThread {
        ProcThread {
            tid,
            start_time: start,
            comm: String::new(),
        }
    }

    #[test]
    fn pins_in_discovery_order_with_skips() {
        let plan = PinPlan::new(vec![2, 3], SkipMask::parse("0x1").unwrap()).unwrap();
        let pinner = RecordingPinner::new();
        let mut p = PollPinner::new(10, plan, CpuSet::from_cpus([0, 1, 2, 3]));
        let first = p.step(&[t(10, 1), t(11, 2)], &pinner);
        assert_eq!(
            first.iter().map(|o| o.cpu).collect::<Vec<_>>(),
            vec![Some(2), None]
        );
        let second = p.step(&[t(10, 1), t(11, 2), t(12, 3), t(13, 3)], &pinner);
        assert_eq!(
            second.iter().map(|o| (o.tid, o.cpu)).collect::<Vec<_>>(),
            vec![(12, Some(3)), (13, Some(2))]
        );
        assert_eq!(
            pinner.calls(),
            vec![
                (10, CpuSet::from_cpus([2])),
                (11, CpuSet::from_cpus([0, 1, 2, 3])),
                (12, CpuSet::from_cpus([3])),
                (13, CpuSet::from_cpus([2])),
            ]
        );
    }

    #[test]
    fn vanished_threads_are_reported_not_fatal() {
        let plan = PinPlan::new(vec![0], SkipMask::none()).unwrap();
        let pinner = RecordingPinner::new();
        pinner.mark_gone(11);
        let mut p = PollPinner::new(10, plan, CpuSet::from_cpus([0]));
        let out = p.step(&[t(10, 1), t(11, 2)], &pinner);
        assert!(matches!(out[1].result, Err(PinError::Gone(11))));
    }
}
