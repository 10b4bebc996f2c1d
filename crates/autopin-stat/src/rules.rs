//! The thresholds and tests the verdicts are made of, in one place: `stat` applies them to
//! one program over its watch ([`crate::analyze`]), `top` to every thread of the machine at
//! each refresh (autopin-top's flags). A rule changed here changes both.

use crate::thread_stat::ThreadStat;
use std::collections::{BTreeMap, BTreeSet};

/// A thread counts as working from this share of a CPU on.
pub const WORKING: f64 = 0.05;
/// Waiting for a CPU this share of the time or more is contention.
pub const WAITING: f64 = 0.2;
/// Other work taking this much of a CPU makes that CPU busy (a busy neighbour).
pub const NEIGHBOUR: f64 = 0.2;
/// Migrations per second of a working thread worth a verdict.
pub const MIGRATING: f64 = 20.0;
/// The working threads' CPU time is on nodes holding less than this share of the pages:
/// their memory is mostly remote.
pub const LOCAL_PAGES: f64 = 0.5;
/// Fewer pages than this (4 MiB of 4 KiB pages) say nothing about where memory lives.
pub const PAGES_WORTH_A_LOOK: u64 = 1024;
/// A thread taking this share of a CPU or more is busy enough to feel an SMT sibling.
pub const BUSY: f64 = 0.5;

/// The thread ran enough to count as working.
pub fn is_working(t: &ThreadStat) -> bool {
    t.cpu_share >= WORKING
}

/// The thread works and waited for a CPU a good share of the time.
pub fn is_waiting(t: &ThreadStat) -> bool {
    is_working(t) && t.run_delay_fraction >= WAITING
}

/// The CPUs the threads were seen running on.
pub fn cpus_used(threads: &[&ThreadStat]) -> BTreeSet<u32> {
    threads
        .iter()
        .flat_map(|t| t.cpus.iter().copied())
        .collect()
}

/// Working threads crowd their CPUs: more of them than CPUs they run on, and one of them
/// waits for a CPU.
pub fn crowded(working: &[&ThreadStat]) -> bool {
    working.iter().any(|t| is_waiting(t)) && working.len() > cpus_used(working).len()
}

/// The CPUs of `allowed` (in its order) that no working thread uses and no other work keeps
/// busy: where threads could go.
pub fn free_cpus(allowed: &[u32], used: &BTreeSet<u32>, busy: &BTreeSet<u32>) -> Vec<u32> {
    allowed
        .iter()
        .copied()
        .filter(|c| !used.contains(c) && !busy.contains(c))
        .collect()
}

/// The thread moved between CPUs often enough over `seconds` to be worth a verdict.
pub fn is_migrating(t: &ThreadStat, seconds: f64) -> bool {
    t.migrations
        .is_some_and(|m| m as f64 / seconds.max(1e-9) >= MIGRATING)
}

/// Busy threads that share a core's hardware threads: of `working`, those taking at least
/// [`BUSY`] of one CPU, by core, for each core where they run on two CPUs or more. Also
/// the busy threads themselves and the cores they keep busy.
pub struct SmtShare<'a> {
    pub busy: Vec<&'a ThreadStat>,
    pub busy_cores: BTreeSet<usize>,
    pub shared: BTreeMap<usize, Vec<&'a ThreadStat>>,
}

pub fn smt_share<'a>(working: &[&'a ThreadStat], core_of: &BTreeMap<u32, usize>) -> SmtShare<'a> {
    let busy: Vec<&ThreadStat> = working
        .iter()
        .copied()
        .filter(|t| t.cpu_share >= BUSY)
        .collect();
    let mut per_core: BTreeMap<usize, Vec<&ThreadStat>> = BTreeMap::new();
    for t in &busy {
        if let (1, Some(core)) = (t.cpus.len(), core_of.get(&t.cpus[0])) {
            per_core.entry(*core).or_default().push(t);
        }
    }
    let busy_cores = per_core.keys().copied().collect();
    let shared = per_core
        .into_iter()
        .filter(|(_, ts)| ts.iter().map(|t| t.cpus[0]).collect::<BTreeSet<_>>().len() >= 2)
        .collect();
    SmtShare {
        busy,
        busy_cores,
        shared,
    }
}

/// The cores of the `allowed` CPUs that are not among `busy_cores`.
pub fn idle_cores(
    allowed: &[u32],
    core_of: &BTreeMap<u32, usize>,
    busy_cores: &BTreeSet<usize>,
) -> BTreeSet<usize> {
    allowed
        .iter()
        .filter_map(|c| core_of.get(c))
        .copied()
        .filter(|c| !busy_cores.contains(c))
        .collect()
}

/// How near the working threads run to their pages: weighted by each thread's CPU time, the
/// share of the pages on its own node(s) (`local`), the CPU time weighed (`time`) and that
/// time per node the threads ran on.
#[derive(Debug, Clone, PartialEq)]
pub struct Locality {
    pub local: f64,
    pub time: f64,
    pub per_node: BTreeMap<u32, f64>,
}

impl Locality {
    /// The threads run mostly far from their memory.
    pub fn remote(&self) -> bool {
        self.time > 0.0 && self.local / self.time < LOCAL_PAGES
    }
}

/// [`Locality`] of `working` over `pages` (node, pages); None when there are too few pages
/// to tell or no working thread.
pub fn locality(working: &[&ThreadStat], pages: &[(u32, u64)]) -> Option<Locality> {
    let total: u64 = pages.iter().map(|p| p.1).sum();
    if total < PAGES_WORTH_A_LOOK || working.is_empty() {
        return None;
    }
    let on = |node: u32| pages.iter().find(|p| p.0 == node).map_or(0, |p| p.1);
    // A thread seen on CPUs of several nodes counts each alike.
    let mut out = Locality {
        local: 0.0,
        time: 0.0,
        per_node: BTreeMap::new(),
    };
    for t in working.iter().filter(|t| !t.numa_nodes.is_empty()) {
        let k = t.numa_nodes.len() as f64;
        for n in &t.numa_nodes {
            out.local += t.cpu_share / k * on(*n) as f64 / total as f64;
            *out.per_node.entry(*n).or_default() += t.cpu_share / k;
        }
        out.time += t.cpu_share;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(share: f64, wait: f64, cpus: &[u32]) -> ThreadStat {
        ThreadStat {
            tid: 1,
            name: "t".into(),
            cpu_share: share,
            run_delay_fraction: wait,
            cpus: cpus.to_vec(),
            migrations: Some(0),
            voluntary_switches: 0,
            involuntary_switches: 0,
            numa_nodes: Vec::new(),
            counters: BTreeMap::new(),
            metrics: BTreeMap::new(),
            multiplexed: Vec::new(),
        }
    }

    #[test]
    fn two_waiting_threads_on_one_cpu_crowd_it_and_one_each_does_not() {
        let (a, b) = (t(0.5, 0.5, &[0]), t(0.5, 0.5, &[0]));
        assert!(crowded(&[&a, &b]));
        let (a, b) = (t(0.9, 0.3, &[0]), t(0.9, 0.3, &[1]));
        assert!(!crowded(&[&a, &b]));
        // Nobody waits: sharing a CPU by turns (each asleep while the other runs).
        let (a, b) = (t(0.4, 0.0, &[0]), t(0.4, 0.0, &[0]));
        assert!(!crowded(&[&a, &b]));
    }

    #[test]
    fn free_cpus_leave_out_the_used_and_the_busy() {
        let used = BTreeSet::from([0]);
        let busy = BTreeSet::from([2]);
        assert_eq!(free_cpus(&[0, 1, 2, 3], &used, &busy), vec![1, 3]);
    }

    #[test]
    fn busy_threads_on_two_siblings_of_a_core_share_it() {
        let core_of = BTreeMap::from([(0, 0), (1, 0), (2, 1), (3, 1)]);
        let (a, b, c) = (t(0.9, 0.0, &[0]), t(0.9, 0.0, &[1]), t(0.2, 0.0, &[2]));
        let s = smt_share(&[&a, &b, &c], &core_of);
        assert_eq!(s.busy.len(), 2);
        assert_eq!(s.shared.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(
            idle_cores(&[0, 1, 2, 3], &core_of, &s.busy_cores),
            BTreeSet::from([1])
        );
    }
}
