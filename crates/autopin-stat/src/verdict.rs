//! From two snapshots to per-thread figures and verdicts.

use crate::sample::{CpusSeen, Snapshot, ThreadSample};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A thread counts as working from this share of a CPU on.
const WORKING: f64 = 0.05;
/// Waiting for a CPU this share of the time or more is contention.
const WAITING: f64 = 0.2;
/// Another process taking this much of a CPU the program uses is a busy neighbour.
const NEIGHBOUR: f64 = 0.2;
/// Migrations per second of a working thread worth a verdict.
const MIGRATING: f64 = 20.0;

/// What the analysis needs to know beyond the samples.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The CPUs the program may use.
    pub allowed: Vec<u32>,
    /// CPU → its core (SMT siblings share one); empty when unknown.
    pub core_of: BTreeMap<u32, usize>,
    /// How the program is named in suggestions (e.g. `./solver`, or `PID 4242`).
    pub program: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadStat {
    pub tid: i32,
    pub name: String,
    /// Share of one CPU it ran.
    pub cpu_share: f64,
    /// Share of the time it was runnable but waited for a CPU.
    pub run_delay_fraction: f64,
    /// The CPUs it was seen on.
    pub cpus: Vec<u32>,
    /// Migrations between CPUs in the period (None: the kernel does not say).
    pub migrations: Option<u64>,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

/// One finding, with what shows it and what to try.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Stable name: contention, busy_neighbour, migrations, imbalance, throttled,
    /// smt_shared, idle_cpus.
    pub kind: &'static str,
    pub text: String,
    pub evidence: Vec<String>,
    pub suggestion: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatReport {
    /// Seconds between the first and the last sample.
    pub seconds: f64,
    pub threads: Vec<ThreadStat>,
    /// Other processes that took CPU time on the program's CPUs: (pid, name, share of a
    /// CPU, the CPUs).
    pub neighbours: Vec<(i32, String, f64, Vec<u32>)>,
    /// Seconds the cgroup quota held the program back (None: no quota counters).
    pub throttled_seconds: Option<f64>,
    pub verdicts: Vec<Verdict>,
}

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

fn list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The figures and verdicts between `first` and `last`; `seen` holds the CPUs each thread
/// ran on in the looks between them.
pub fn analyze(first: &Snapshot, last: &Snapshot, seen: &CpusSeen, ctx: &Context) -> StatReport {
    let wall = (last.t - first.t).max(1e-9);
    let before: BTreeMap<i32, &ThreadSample> = first.threads.iter().map(|t| (t.tid, t)).collect();
    let threads: Vec<ThreadStat> = last
        .threads
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
            }
        })
        .collect();
    let program_cpus: BTreeSet<u32> = threads
        .iter()
        .filter(|t| t.cpu_share >= WORKING)
        .flat_map(|t| t.cpus.iter().copied())
        .collect();
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
    let throttled_seconds = match (first.throttling, last.throttling) {
        (Some(a), Some(b)) => Some(b.throttled_ns.saturating_sub(a.throttled_ns) as f64 * 1e-9),
        _ => None,
    };
    let mut verdicts = Vec::new();
    let working: Vec<&ThreadStat> = threads.iter().filter(|t| t.cpu_share >= WORKING).collect();
    let waiting: Vec<&ThreadStat> = working
        .iter()
        .copied()
        .filter(|t| t.run_delay_fraction >= WAITING)
        .collect();
    let used: BTreeSet<u32> = working
        .iter()
        .flat_map(|t| t.cpus.iter().copied())
        .collect();
    let free: Vec<u32> = ctx
        .allowed
        .iter()
        .copied()
        .filter(|c| !used.contains(c) && !neighbours.iter().any(|n| n.3.contains(c)))
        .collect();
    if !waiting.is_empty() {
        // The program's own working threads crowd its CPUs: more of them than CPUs they run on.
        let crowded = working.len() > used.len();
        if crowded {
            verdicts.push(Verdict {
                kind: "contention",
                text: format!(
                    "{} working thread(s) share {} CPU(s) ({}): each waits for a CPU",
                    working.len(),
                    used.len(),
                    list(&used.iter().copied().collect::<Vec<_>>())
                ),
                evidence: waiting
                    .iter()
                    .map(|t| {
                        format!(
                            "thread {} ({}): runs {}, waits {} of the time",
                            t.tid,
                            t.name,
                            pct(t.cpu_share),
                            pct(t.run_delay_fraction)
                        )
                    })
                    .collect(),
                suggestion: if ctx.allowed.len() < working.len() {
                    format!(
                        "it may use {} CPU(s) for {} working threads: as many threads as CPUs (e.g. OMP_NUM_THREADS={}), or more CPUs (taskset, the job's cgroup)",
                        ctx.allowed.len(),
                        working.len(),
                        ctx.allowed.len()
                    )
                } else if free.is_empty() {
                    format!(
                        "`autopin run -- {}` finds the placement that suffers least",
                        ctx.program
                    )
                } else {
                    format!(
                        "spread the threads: `autopin run -- {}` (CPUs {} are idle)",
                        ctx.program,
                        list(&free)
                    )
                },
            });
        }
        if !neighbours.is_empty() {
            verdicts.push(Verdict {
                kind: "busy_neighbour",
                text: format!(
                    "another process takes CPU time on the program's CPUs: {}",
                    neighbours
                        .iter()
                        .map(|n| format!("PID {} ({}) {} of CPU {}", n.0, n.1, pct(n.2), list(&n.3)))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                evidence: waiting
                    .iter()
                    .map(|t| {
                        format!(
                            "thread {} ({}) on CPU {}: waits {} of the time",
                            t.tid,
                            t.name,
                            list(&t.cpus),
                            pct(t.run_delay_fraction)
                        )
                    })
                    .collect(),
                suggestion: if free.is_empty() {
                    format!("`autopin run -- {}` moves the threads to where they wait least", ctx.program)
                } else {
                    format!(
                        "`autopin run -- {}` moves the threads off the busy CPUs, or `taskset -c {}`",
                        ctx.program,
                        list(&free)
                    )
                },
            });
        }
    }
    let migrating: Vec<&ThreadStat> = working
        .iter()
        .copied()
        .filter(|t| t.migrations.is_some_and(|m| m as f64 / wall >= MIGRATING))
        .collect();
    if !migrating.is_empty() {
        verdicts.push(Verdict {
            kind: "migrations",
            text: format!("{} thread(s) bounce between CPUs", migrating.len()),
            evidence: migrating
                .iter()
                .map(|t| {
                    format!(
                        "thread {} ({}): {:.0} migrations/s over CPUs {}",
                        t.tid,
                        t.name,
                        t.migrations.unwrap_or(0) as f64 / wall,
                        list(&t.cpus)
                    )
                })
                .collect(),
            suggestion: format!("pin the threads: `autopin run -- {}`", ctx.program),
        });
    }
    if waiting.is_empty() && working.len() >= 2 {
        let max = working.iter().map(|t| t.cpu_share).fold(0.0, f64::max);
        let idle: Vec<&ThreadStat> = working
            .iter()
            .copied()
            .filter(|t| t.cpu_share < max / 3.0)
            .collect();
        if !idle.is_empty() {
            verdicts.push(Verdict {
                kind: "imbalance",
                text: format!(
                    "{} of {} working threads run less than a third of the busiest ({})",
                    idle.len(),
                    working.len(),
                    pct(max)
                ),
                evidence: idle
                    .iter()
                    .map(|t| format!("thread {} ({}): runs {}", t.tid, t.name, pct(t.cpu_share)))
                    .collect(),
                suggestion: "balance the work (a dynamic schedule, smaller chunks); pinning cannot help threads that have nothing to do".into(),
            });
        }
    }
    if let Some(s) = throttled_seconds.filter(|s| *s > 0.0) {
        verdicts.push(Verdict {
            kind: "throttled",
            text: format!(
                "the cgroup's CPU quota held the program back {:.2} s of {wall:.2} s",
                s
            ),
            evidence: vec![format!("cpu.stat throttled time grew by {s:.3} s")],
            suggestion: "a larger quota (cpu.max / cpu.cfs_quota_us), or as many threads as the quota's CPUs".into(),
        });
    }
    if !ctx.core_of.is_empty() {
        let busy: Vec<&ThreadStat> = working
            .iter()
            .copied()
            .filter(|t| t.cpu_share >= 0.5)
            .collect();
        let mut per_core: BTreeMap<usize, Vec<&ThreadStat>> = BTreeMap::new();
        for t in &busy {
            if let (1, Some(core)) = (t.cpus.len(), ctx.core_of.get(&t.cpus[0])) {
                per_core.entry(*core).or_default().push(t);
            }
        }
        let busy_cores: BTreeSet<usize> = per_core.keys().copied().collect();
        let idle_cores: BTreeSet<usize> = ctx
            .allowed
            .iter()
            .filter_map(|c| ctx.core_of.get(c))
            .copied()
            .filter(|c| !busy_cores.contains(c))
            .collect();
        let shared: Vec<(&usize, &Vec<&ThreadStat>)> = per_core
            .iter()
            .filter(|(_, ts)| ts.iter().map(|t| t.cpus[0]).collect::<BTreeSet<_>>().len() >= 2)
            .collect();
        if !shared.is_empty() && !idle_cores.is_empty() {
            verdicts.push(Verdict {
                kind: "smt_shared",
                text: format!(
                    "busy threads share a core's hardware threads while {} core(s) are idle",
                    idle_cores.len()
                ),
                evidence: shared
                    .iter()
                    .map(|(core, ts)| {
                        format!(
                            "core {core}: threads {}",
                            ts.iter()
                                .map(|t| format!("{} (CPU {})", t.tid, t.cpus[0]))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })
                    .collect(),
                suggestion: format!(
                    "one thread per core: `autopin pin -c E:N:{}:1:2 -- {}`",
                    busy.len(),
                    ctx.program
                ),
            });
        }
    }
    if waiting.is_empty()
        && !working.is_empty()
        && working.iter().all(|t| t.cpu_share >= 0.9)
        && !free.is_empty()
    {
        verdicts.push(Verdict {
            kind: "idle_cpus",
            text: format!(
                "every working thread runs all the time and {} CPU(s) it may use stay idle ({})",
                free.len(),
                list(&free)
            ),
            evidence: vec![format!(
                "{} working thread(s) on CPUs {}",
                working.len(),
                list(&used.iter().copied().collect::<Vec<_>>())
            )],
            suggestion: format!(
                "more threads (e.g. OMP_NUM_THREADS={})",
                working.len() + free.len()
            ),
        });
    }
    StatReport {
        seconds: wall,
        threads,
        neighbours,
        throttled_seconds,
        verdicts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Neighbour;

    fn thread(tid: i32, cpu: u32, cpu_ms: u64, wait_ms: u64) -> ThreadSample {
        ThreadSample {
            tid,
            name: format!("t{tid}"),
            cpu_ns: cpu_ms * 1_000_000,
            wait_ns: wait_ms * 1_000_000,
            cpu,
            migrations: Some(0),
            voluntary_switches: 0,
            involuntary_switches: 0,
        }
    }

    fn ctx() -> Context {
        Context {
            allowed: vec![0, 1],
            core_of: BTreeMap::new(),
            program: "./prog".into(),
        }
    }

    fn kinds(r: &StatReport) -> Vec<&'static str> {
        r.verdicts.iter().map(|v| v.kind).collect()
    }

    fn looked(looks: &[&Snapshot]) -> CpusSeen {
        let mut seen = CpusSeen::default();
        for l in looks {
            seen.record(l);
        }
        seen
    }

    fn snap(t: f64, threads: Vec<ThreadSample>) -> Snapshot {
        Snapshot {
            t,
            threads,
            ..Snapshot::default()
        }
    }

    #[test]
    fn two_threads_on_one_cpu_are_contention_with_half_the_time_waiting() {
        let a = snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 0, 0, 0)]);
        let b = snap(1.0, vec![thread(1, 0, 500, 500), thread(2, 0, 500, 500)]);
        let r = analyze(&a, &b, &looked(&[&a, &b]), &ctx());
        assert_eq!(kinds(&r), vec!["contention"]);
        assert!((r.threads[0].run_delay_fraction - 0.5).abs() < 1e-9);
        assert!(
            r.verdicts[0].suggestion.contains("CPUs 1 are idle"),
            "{:?}",
            r.verdicts
        );
    }

    #[test]
    fn a_cpu_a_new_thread_sat_on_before_it_ran_is_not_one_it_uses() {
        // Thread 2 first seen on CPU 1 with no CPU time (its parent's CPU, before the kernel
        // placed it): both ran on CPU 0 only, and that is contention.
        let a = snap(0.0, vec![thread(1, 0, 10, 0), thread(2, 1, 0, 0)]);
        let b = snap(1.0, vec![thread(1, 0, 500, 500), thread(2, 0, 500, 500)]);
        let r = analyze(&a, &b, &looked(&[&a, &b]), &ctx());
        assert_eq!(r.threads[1].cpus, vec![0]);
        assert_eq!(kinds(&r), vec!["contention"]);
    }

    #[test]
    fn a_cpu_a_thread_was_caught_on_once_is_not_one_it_uses() {
        // Thread 2 ran on CPU 1 in one look of ten, on CPU 0 in the others.
        let mut looks = vec![snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 1, 50, 0)])];
        for i in 1..10u64 {
            looks.push(snap(
                i as f64 * 0.1,
                vec![
                    thread(1, 0, 50 * i, 50 * i),
                    thread(2, 0, 50 + 50 * i, 50 * i),
                ],
            ));
        }
        let refs: Vec<&Snapshot> = looks.iter().collect();
        let r = analyze(&looks[0], &looks[9], &looked(&refs), &ctx());
        assert_eq!(r.threads[1].cpus, vec![0]);
        assert_eq!(kinds(&r), vec!["contention"]);
    }

    #[test]
    fn two_threads_on_two_cpus_have_no_verdict() {
        let a = snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 1, 0, 0)]);
        let b = snap(1.0, vec![thread(1, 0, 990, 2), thread(2, 1, 990, 3)]);
        let r = analyze(&a, &b, &looked(&[&a, &b]), &ctx());
        assert!(r.verdicts.is_empty(), "{:?}", r.verdicts);
    }

    #[test]
    fn a_neighbour_on_the_programs_cpu_is_named() {
        let n = |ms: u64| Neighbour {
            pid: 77,
            name: "spin".into(),
            cpu_ns: ms * 1_000_000,
            cpus: vec![0],
        };
        let mut a = snap(0.0, vec![thread(1, 0, 0, 0)]);
        a.neighbours.push(n(0));
        let mut b = snap(1.0, vec![thread(1, 0, 500, 500)]);
        b.neighbours.push(n(500));
        let r = analyze(&a, &b, &looked(&[&a, &b]), &ctx());
        assert_eq!(kinds(&r), vec!["busy_neighbour"]);
        assert!(
            r.verdicts[0].text.contains("PID 77 (spin)"),
            "{}",
            r.verdicts[0].text
        );
    }

    #[test]
    fn bouncing_idle_and_throttled_threads_are_said() {
        let mut a = snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 1, 0, 0)]);
        a.throttling = Some(Default::default());
        let mut t1 = thread(1, 1, 900, 0);
        t1.migrations = Some(100);
        let mut b = snap(1.0, vec![t1, thread(2, 1, 100, 0)]);
        b.throttling = Some(crate::sample::Throttling {
            periods: 10,
            throttled_periods: 3,
            throttled_ns: 200_000_000,
        });
        let r = analyze(&a, &b, &looked(&[&a, &b]), &ctx());
        assert_eq!(kinds(&r), vec!["migrations", "imbalance", "throttled"]);
    }
}
