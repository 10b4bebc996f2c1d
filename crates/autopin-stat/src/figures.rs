//! What was measured between two looks: each thread's share of a CPU and of waiting, the
//! CPUs it ran on, its migrations and switches; the other processes that ran on the
//! program's CPUs; the cgroup's throttling; the program's own progress; where its pages
//! are. Figures say what happened, never what it means: that is [`crate::verdict`]'s.

use crate::context::Context;
use crate::rules::{self, NEIGHBOUR};
use crate::sample::{CpusSeen, Snapshot, ThreadSample};
use crate::thread_stat::ThreadStat;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The figures of one period (the whole watch, or one `-I` interval).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// Seconds between the first and the last sample.
    pub seconds: f64,
    pub threads: Vec<ThreadStat>,
    /// Other processes that took CPU time on the program's CPUs: (pid, name, share of a
    /// CPU, the CPUs).
    pub neighbours: Vec<(i32, String, f64, Vec<u32>)>,
    /// Seconds the cgroup quota held the program back (None: no quota counters).
    pub throttled_seconds: Option<f64>,
    /// Heartbeats the program reported a second (None: it reported none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeats_per_second: Option<f64>,
    /// OpenMP constructs its threads completed a second (None: not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub openmp_constructs_per_second: Option<f64>,
    /// Where the process's pages were at the end: (NUMA node, pages); empty on a machine of
    /// one node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pages_per_node: Vec<(u32, u64)>,
}

/// The figures between `first` and `last`; `seen` holds the CPUs each thread ran on in the
/// looks between them.
pub fn measure(first: &Snapshot, last: &Snapshot, seen: &CpusSeen, ctx: &Context) -> Figures {
    let wall = (last.t - first.t).max(1e-9);
    let multi_node = ctx.multi_node();
    let threads = thread_figures(first, last, seen, ctx, wall);
    let working: Vec<&ThreadStat> = threads.iter().filter(|t| rules::is_working(t)).collect();
    let neighbours = busy_neighbours(first, last, &rules::cpus_used(&working), wall);
    let throttled_seconds = match (first.throttling, last.throttling) {
        (Some(a), Some(b)) => Some(b.throttled_ns.saturating_sub(a.throttled_ns) as f64 * 1e-9),
        _ => None,
    };
    let pages_per_node = if multi_node {
        // The last look that read the pages: where they are now.
        [last, first]
            .iter()
            .map(|s| s.pages.clone())
            .find(|p| !p.is_empty())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let (a, b) = (
        first.progress.unwrap_or_default(),
        last.progress.unwrap_or_default(),
    );
    Figures {
        seconds: wall,
        threads,
        neighbours,
        throttled_seconds,
        heartbeats_per_second: (b.beats > 0).then(|| b.beats.saturating_sub(a.beats) as f64 / wall),
        openmp_constructs_per_second: b
            .openmp
            .map(|n| n.saturating_sub(a.openmp.unwrap_or(0)) as f64 / wall),
        pages_per_node,
    }
}

/// Each thread of `last` over the `wall` seconds since `first`.
fn thread_figures(
    first: &Snapshot,
    last: &Snapshot,
    seen: &CpusSeen,
    ctx: &Context,
    wall: f64,
) -> Vec<ThreadStat> {
    let multi_node = ctx.multi_node();
    let before: BTreeMap<i32, &ThreadSample> = first.threads.iter().map(|t| (t.tid, t)).collect();
    last.threads
        .iter()
        .map(|t| {
            // A thread born since the first sample: its counters are its whole life.
            let b = before.get(&t.tid);
            let d = |now: u64, then: fn(&ThreadSample) -> u64| {
                now.saturating_sub(b.map_or(0, |b| then(b)))
            };
            let mut cpus = seen.of(t.tid);
            if cpus.is_empty() {
                // Never caught running: where it sits is all there is to say.
                cpus.insert(t.cpu);
            }
            let numa_nodes: BTreeSet<u32> = cpus
                .iter()
                .filter_map(|c| ctx.node_of.get(c).copied())
                .collect();
            ThreadStat {
                tid: t.tid,
                name: t.name.clone(),
                cpu_share: d(t.cpu_ns, |b| b.cpu_ns) as f64 * 1e-9 / wall,
                run_delay_fraction: d(t.wait_ns, |b| b.wait_ns) as f64 * 1e-9 / wall,
                cpus: cpus.into_iter().collect(),
                migrations: t
                    .migrations
                    .map(|m| m.saturating_sub(b.and_then(|b| b.migrations).unwrap_or(0))),
                voluntary_switches: d(t.voluntary_switches, |b| b.voluntary_switches),
                involuntary_switches: d(t.involuntary_switches, |b| b.involuntary_switches),
                numa_nodes: if multi_node {
                    numa_nodes.into_iter().collect()
                } else {
                    Vec::new()
                },
                counters: BTreeMap::new(),
                metrics: BTreeMap::new(),
                multiplexed: Vec::new(),
            }
        })
        .collect()
}

/// The other processes that took at least [`NEIGHBOUR`] of a CPU on `program_cpus`, the
/// busiest first. A process first seen at `last` has no share to tell.
fn busy_neighbours(
    first: &Snapshot,
    last: &Snapshot,
    program_cpus: &BTreeSet<u32>,
    wall: f64,
) -> Vec<(i32, String, f64, Vec<u32>)> {
    let earlier: BTreeMap<i32, u64> = first.neighbours.iter().map(|n| (n.pid, n.cpu_ns)).collect();
    let mut neighbours: Vec<(i32, String, f64, Vec<u32>)> = last
        .neighbours
        .iter()
        .filter_map(|n| {
            let share = n.cpu_ns.saturating_sub(*earlier.get(&n.pid)?) as f64 * 1e-9 / wall;
            let on: Vec<u32> = n
                .cpus
                .iter()
                .copied()
                .filter(|c| program_cpus.contains(c))
                .collect();
            (share >= NEIGHBOUR && !on.is_empty()).then(|| (n.pid, n.name.clone(), share, on))
        })
        .collect();
    neighbours.sort_by(|a, b| b.2.total_cmp(&a.2));
    neighbours
}
