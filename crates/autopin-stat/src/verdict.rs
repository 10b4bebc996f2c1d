//! What the figures mean: the verdicts, each with its evidence and a command to try, and
//! the report that joins them to the figures.

use crate::context::Context;
use crate::figures::Figures;
use crate::rules;
use crate::sample::{pages_mib, CpusSeen, Snapshot};
use crate::thread_stat::ThreadStat;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One finding, with what shows it and what to try.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Stable name: contention, busy_neighbour, migrations, imbalance, throttled,
    /// smt_shared, idle_cpus, numa_remote.
    pub kind: &'static str,
    pub text: String,
    pub evidence: Vec<String>,
    pub suggestion: String,
}

/// With `-I`: how many intervals were judged, and in how many each kind of verdict was
/// found, so that the whole run's verdicts say where they differ from the intervals'.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IntervalTally {
    pub intervals: usize,
    /// Verdict kind → the intervals it was found in.
    pub found: BTreeMap<String, usize>,
}

impl IntervalTally {
    /// Counts one interval's report.
    pub fn add(&mut self, r: &StatReport) {
        self.intervals += 1;
        let kinds: BTreeSet<&str> = r.verdicts.iter().map(|v| v.kind).collect();
        for k in kinds {
            *self.found.entry(k.to_string()).or_default() += 1;
        }
    }
}

/// One period's report: what was measured, what it means, and (with `-g`, `-I`) how the
/// counters counted and what the intervals found. Its JSON is flat: the figures' fields
/// first, as `--json` has always written them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatReport {
    #[serde(flatten)]
    pub figures: Figures,
    pub verdicts: Vec<Verdict>,
    /// The `-g` event groups counted (empty: none asked for).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// With `-g`: the groups' events that were not counted, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters_missing: Option<Vec<crate::groups::Missing>>,
    /// With `-g`: how the counters counted, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counting_mode: Option<String>,
    /// With `-g`: the estimated slowdown counting caused (0.01 = 1%): the program's context
    /// switches a second × the measured cost of a counted switch, over the CPUs it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counting_overhead: Option<f64>,
    /// With `-I`: what the intervals found (see [`IntervalTally`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<IntervalTally>,
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

/// "CPU 1 is idle", "CPUs 1,3 are idle".
fn idle_phrase(cpus: &[u32]) -> String {
    match cpus {
        [one] => format!("CPU {one} is idle"),
        _ => format!("CPUs {} are idle", list(cpus)),
    }
}

/// Advice that moves `threads` working threads onto the `free` CPUs: a pinning with a CPU
/// for each when there are enough, never one that stacks them (two threads pinned to one
/// free CPU wait for each other there, which is what the verdict is about). With fewer free
/// CPUs than threads, the search (which also weighs the busy CPUs) or fewer threads.
fn move_to_free(ctx: &Context, threads: usize, free: &[u32]) -> String {
    if free.len() >= threads {
        format!(
            "`{}` moves the threads off the busy CPUs, or `{}` ({})",
            ctx.optimize(""),
            ctx.pin(&list(&free[..threads])),
            idle_phrase(free)
        )
    } else {
        format!(
            "`{}` finds where they wait least ({}: too few for {threads} working threads, and pinning them all there would stack them; fewer threads, e.g. OMP_NUM_THREADS={}, may run faster there)",
            ctx.optimize(""),
            idle_phrase(free),
            free.len()
        )
    }
}

/// The figures and verdicts between `first` and `last`; `seen` holds the CPUs each thread
/// ran on in the looks between them.
pub fn analyze(first: &Snapshot, last: &Snapshot, seen: &CpusSeen, ctx: &Context) -> StatReport {
    let figures = crate::figures::measure(first, last, seen, ctx);
    let verdicts = judge(&figures, ctx);
    StatReport {
        figures,
        verdicts,
        groups: Vec::new(),
        counters_missing: None,
        counting_mode: None,
        counting_overhead: None,
        intervals: None,
    }
}

/// What every rule of a verdict looks at: the figures, the machine, and what the figures
/// say of the program's threads and CPUs.
struct Scene<'a> {
    ctx: &'a Context,
    figures: &'a Figures,
    /// The threads that ran enough to count ([`rules::is_working`]).
    working: Vec<&'a ThreadStat>,
    /// The working threads that waited for a CPU ([`rules::is_waiting`]).
    waiting: Vec<&'a ThreadStat>,
    /// The CPUs the working threads ran on.
    used: BTreeSet<u32>,
    /// The CPUs the program may use that neither it nor a busy neighbour ran on.
    free: Vec<u32>,
}

impl<'a> Scene<'a> {
    fn of(figures: &'a Figures, ctx: &'a Context) -> Self {
        let working: Vec<&ThreadStat> = figures
            .threads
            .iter()
            .filter(|t| rules::is_working(t))
            .collect();
        let waiting = working
            .iter()
            .copied()
            .filter(|t| rules::is_waiting(t))
            .collect();
        let used = rules::cpus_used(&working);
        let neighbour_cpus: BTreeSet<u32> = figures
            .neighbours
            .iter()
            .flat_map(|n| n.3.clone())
            .collect();
        let free = rules::free_cpus(&ctx.allowed, &used, &neighbour_cpus);
        Scene {
            ctx,
            figures,
            working,
            waiting,
            used,
            free,
        }
    }
}

/// The rules of the verdicts, in the order the report prints what they find.
const RULES: [fn(&Scene) -> Option<Verdict>; 8] = [
    contention,
    busy_neighbour,
    migrations,
    imbalance,
    throttled,
    smt_shared,
    idle_cpus,
    numa_remote,
];

/// What the figures mean: each verdict whose rule ([`crate::rules`]) they meet, in the
/// order the report prints them.
pub fn judge(figures: &Figures, ctx: &Context) -> Vec<Verdict> {
    let scene = Scene::of(figures, ctx);
    RULES.iter().filter_map(|rule| rule(&scene)).collect()
}

/// The program's own working threads crowd its CPUs: more of them than CPUs they run on,
/// and some wait.
fn contention(s: &Scene) -> Option<Verdict> {
    let Scene {
        ctx,
        working,
        waiting,
        used,
        free,
        ..
    } = s;
    if waiting.is_empty() || !rules::crowded(working) {
        return None;
    }
    Some(Verdict {
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
                "`{}` finds the placement that suffers least",
                ctx.optimize("")
            )
        } else {
            format!(
                "spread the threads: `{}` ({})",
                ctx.optimize(""),
                idle_phrase(free)
            )
        },
    })
}

/// Another process takes CPU time on the CPUs where the program's threads wait.
fn busy_neighbour(s: &Scene) -> Option<Verdict> {
    let Scene {
        ctx,
        figures,
        working,
        waiting,
        free,
        ..
    } = s;
    let neighbours = &figures.neighbours;
    if waiting.is_empty() || neighbours.is_empty() {
        return None;
    }
    Some(Verdict {
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
            format!(
                "`{}` moves the threads to where they wait least",
                ctx.optimize("")
            )
        } else {
            move_to_free(ctx, working.len(), free)
        },
    })
}

/// Working threads move between CPUs often ([`rules::is_migrating`]).
fn migrations(s: &Scene) -> Option<Verdict> {
    let wall = s.figures.seconds;
    let migrating: Vec<&ThreadStat> = s
        .working
        .iter()
        .copied()
        .filter(|t| rules::is_migrating(t, wall))
        .collect();
    if migrating.is_empty() {
        return None;
    }
    let ctx = s.ctx;
    Some(Verdict {
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
        suggestion: format!("pin the threads: `{}`", ctx.optimize("")),
    })
}

/// Nobody waits, yet some working threads run less than a third of the busiest: the work,
/// not the placement, is uneven.
fn imbalance(s: &Scene) -> Option<Verdict> {
    let working = &s.working;
    if !s.waiting.is_empty() || working.len() < 2 {
        return None;
    }
    let max = working.iter().map(|t| t.cpu_share).fold(0.0, f64::max);
    let idle: Vec<&ThreadStat> = working
        .iter()
        .copied()
        .filter(|t| t.cpu_share < max / 3.0)
        .collect();
    if idle.is_empty() {
        return None;
    }
    Some(Verdict {
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
            })
}

/// The cgroup's CPU quota held the program back.
fn throttled(s: &Scene) -> Option<Verdict> {
    let wall = s.figures.seconds;
    let held = s.figures.throttled_seconds.filter(|h| *h > 0.0)?;
    Some(Verdict {
        kind: "throttled",
        text: format!("the cgroup's CPU quota held the program back {held:.2} s of {wall:.2} s"),
        evidence: vec![format!("cpu.stat throttled time grew by {held:.3} s")],
        suggestion:
            "a larger quota (cpu.max / cpu.cfs_quota_us), or as many threads as the quota's CPUs"
                .into(),
    })
}

/// Busy threads share a core's hardware threads while whole cores the program may use
/// are idle.
fn smt_shared(s: &Scene) -> Option<Verdict> {
    let ctx = s.ctx;
    if ctx.core_of.is_empty() {
        return None;
    }
    let rules::SmtShare {
        busy,
        busy_cores,
        shared,
    } = rules::smt_share(&s.working, &ctx.core_of);
    let idle_cores = rules::idle_cores(&ctx.allowed, &ctx.core_of, &busy_cores);
    if shared.is_empty() || idle_cores.is_empty() {
        return None;
    }
    Some(Verdict {
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
            "one thread per core: `{}`",
            ctx.pin(&format!("E:N:{}:1:2", busy.len()))
        ),
    })
}

/// Every working thread runs all the time, none waits, and CPUs the program may use stay
/// idle: more threads could use them.
fn idle_cpus(s: &Scene) -> Option<Verdict> {
    let Scene {
        working,
        waiting,
        used,
        free,
        ..
    } = s;
    let all_busy = !working.is_empty() && working.iter().all(|t| t.cpu_share >= 0.9);
    if !waiting.is_empty() || !all_busy || free.is_empty() {
        return None;
    }
    Some(Verdict {
        kind: "idle_cpus",
        text: format!(
            "every working thread runs all the time and {} CPU(s) it may use stay idle ({})",
            free.len(),
            list(free)
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
    })
}

/// The working threads run on nodes that hold few of the process's pages: weighted by each
/// thread's CPU time, the share of the pages on its own node is below [`LOCAL_PAGES`].
fn numa_remote(s: &Scene) -> Option<Verdict> {
    let (working, pages, ctx) = (&s.working, &s.figures.pages_per_node[..], s.ctx);
    let l = rules::locality(working, pages).filter(rules::Locality::remote)?;
    let (local, time, busy_nodes) = (l.local, l.time, l.per_node);
    let total: u64 = pages.iter().map(|p| p.1).sum();
    let mut by_pages = pages.to_vec();
    by_pages.sort_by_key(|p| std::cmp::Reverse(p.1));
    let (home, home_pages) = by_pages[0];
    let threads_on: Vec<String> = busy_nodes
        .iter()
        .map(|(n, s)| {
            format!(
                "node {n} ({:.0}% of the working threads' CPU time)",
                100.0 * s / time
            )
        })
        .collect();
    let home_cpus: Vec<u32> = ctx
        .node_of
        .iter()
        .filter(|(c, n)| **n == home && ctx.allowed.contains(c))
        .map(|(c, _)| *c)
        .collect();
    Some(Verdict {
        kind: "numa_remote",
        text: format!(
            "the working threads run far from their memory: only {} of the pages are on their own node(s)",
            pct(local / time)
        ),
        evidence: vec![
            format!("threads run on {}", threads_on.join(", ")),
            format!(
                "pages: {}",
                by_pages
                    .iter()
                    .map(|(n, p)| format!("node {n} {} ({:.0} MiB)", pct(*p as f64 / total as f64), pages_mib(*p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ],
        suggestion: if home_cpus.is_empty() {
            format!(
                "move the pages after the threads: `{}`",
                ctx.optimize("--migrate-memory ")
            )
        } else {
            format!(
                "run the threads where the memory is (node {home}, {:.0} MiB): `{}`, or move the pages after them: `{}`",
                pages_mib(home_pages),
                ctx.pin(&list(&home_cpus)),
                ctx.optimize("--migrate-memory ")
            )
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Subject;
    use crate::sample::{Neighbour, ThreadSample};

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
            subject: Subject::Command(vec!["./prog".into()]),
            node_of: BTreeMap::new(),
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
    fn a_thread_that_ended_before_the_last_look_is_in_the_report() {
        // Two spinning threads share CPU 0; thread 2 ends between the second look and the
        // last. Its last counters still count: the report names both, and both waited.
        let first = snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 0, 0, 0)]);
        let second = snap(1.0, vec![thread(1, 0, 500, 500), thread(2, 0, 500, 500)]);
        let last = snap(1.5, vec![thread(1, 0, 1000, 500)]);
        let ended = last.ended_since(&second);
        assert_eq!(ended.len(), 1);
        let seen = looked(&[&first, &second, &last]);
        let r = analyze(&first, &last.with_ended(&ended), &seen, &ctx());
        assert_eq!(r.figures.threads.len(), 2, "{r:?}");
        let two = r
            .figures
            .threads
            .iter()
            .find(|t| t.tid == 2)
            .expect("thread 2");
        assert!((two.cpu_share - 0.5 / 1.5).abs() < 1e-9, "{two:?}");
        // Without the ended threads, the report lost it.
        assert_eq!(
            analyze(&first, &last, &seen, &ctx()).figures.threads.len(),
            1
        );
    }

    #[test]
    fn suggestions_quote_the_command_and_attach_to_a_watched_process() {
        let started = Context {
            subject: Subject::Command(vec![
                "sh".into(),
                "-c".into(),
                "while :; do :; done".into(),
                "it's".into(),
            ]),
            ..ctx()
        };
        assert_eq!(
            started.optimize(""),
            "autopin run -- sh -c 'while :; do :; done' 'it'\\''s'"
        );
        assert_eq!(
            started.pin("E:N:2:1:2"),
            "autopin pin -c E:N:2:1:2 -- sh -c 'while :; do :; done' 'it'\\''s'"
        );
        let watched = Context {
            subject: Subject::Process(4242),
            ..ctx()
        };
        assert_eq!(
            watched.optimize("--migrate-memory "),
            "autopin attach --migrate-memory 4242"
        );
        assert_eq!(
            watched.pin("0,1"),
            "autopin attach --strategy fixed --candidates 0,1 4242"
        );
    }

    /// Two nodes: CPUs 0,1 on node 0 and 2,3 on node 1.
    fn two_nodes() -> Context {
        Context {
            allowed: vec![0, 1, 2, 3],
            node_of: BTreeMap::from([(0, 0), (1, 0), (2, 1), (3, 1)]),
            ..ctx()
        }
    }

    #[test]
    fn threads_far_from_their_pages_are_numa_remote_and_near_them_are_not() {
        let looks = |cpus: [u32; 2], pages: Vec<(u32, u64)>| {
            let a = snap(
                0.0,
                vec![thread(1, cpus[0], 0, 0), thread(2, cpus[1], 0, 0)],
            );
            let mut b = snap(
                1.0,
                vec![thread(1, cpus[0], 900, 0), thread(2, cpus[1], 900, 0)],
            );
            b.pages = pages;
            let mut seen = CpusSeen::default();
            seen.record(&a);
            seen.record(&b);
            analyze(&a, &b, &seen, &two_nodes())
        };
        // Running on node 1, 90% of 64 MiB on node 0.
        let r = looks([2, 3], vec![(0, 14_746), (1, 1_638)]);
        let v = r
            .verdicts
            .iter()
            .find(|v| v.kind == "numa_remote")
            .unwrap_or_else(|| panic!("{:?}", r.verdicts));
        assert!(v.text.contains("10%"), "{}", v.text);
        assert!(v.evidence[0].contains("node 1"), "{:?}", v.evidence);
        assert!(v.suggestion.contains("-c 0,1"), "{}", v.suggestion);
        assert_eq!(r.figures.threads[0].numa_nodes, vec![1]);
        assert_eq!(r.figures.pages_per_node, vec![(0, 14_746), (1, 1_638)]);
        // The same threads on node 0, near the pages: nothing to say.
        let r = looks([0, 1], vec![(0, 14_746), (1, 1_638)]);
        assert!(
            r.verdicts.iter().all(|v| v.kind != "numa_remote"),
            "{:?}",
            r.verdicts
        );
        // Too few pages to mean anything.
        let r = looks([2, 3], vec![(0, 900), (1, 10)]);
        assert!(
            r.verdicts.iter().all(|v| v.kind != "numa_remote"),
            "{:?}",
            r.verdicts
        );
        // One node: no NUMA figures at all.
        let a = snap(0.0, vec![thread(1, 0, 0, 0)]);
        let mut b = snap(1.0, vec![thread(1, 0, 900, 0)]);
        b.pages = vec![(0, 20_000)];
        let r = analyze(&a, &b, &CpusSeen::default(), &ctx());
        assert!(r.figures.threads[0].numa_nodes.is_empty() && r.figures.pages_per_node.is_empty());
    }

    #[test]
    fn two_threads_on_one_cpu_are_contention_with_half_the_time_waiting() {
        let a = snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 0, 0, 0)]);
        let b = snap(1.0, vec![thread(1, 0, 500, 500), thread(2, 0, 500, 500)]);
        let r = analyze(&a, &b, &looked(&[&a, &b]), &ctx());
        assert_eq!(kinds(&r), vec!["contention"]);
        assert!((r.figures.threads[0].run_delay_fraction - 0.5).abs() < 1e-9);
        assert!(
            r.verdicts[0].suggestion.contains("CPU 1 is idle"),
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
        assert_eq!(r.figures.threads[1].cpus, vec![0]);
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
        assert_eq!(r.figures.threads[1].cpus, vec![0]);
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
    fn advice_never_stacks_threads_on_the_free_cpus() {
        // Two threads squeezed on CPU 0 beside a busy neighbour there, CPU 1 free: pinning
        // both to CPU 1 would squeeze them again. With two free CPUs, one each.
        let n = |ms: u64| Neighbour {
            pid: 77,
            name: "spin".into(),
            cpu_ns: ms * 1_000_000,
            cpus: vec![0],
        };
        let mut a = snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 0, 0, 0)]);
        a.neighbours.push(n(0));
        let mut b = snap(1.0, vec![thread(1, 0, 300, 700), thread(2, 0, 300, 700)]);
        b.neighbours.push(n(400));
        let r = analyze(&a, &b, &looked(&[&a, &b]), &ctx());
        assert_eq!(kinds(&r), vec!["contention", "busy_neighbour"]);
        for v in &r.verdicts {
            assert!(!v.suggestion.contains("pin -c 1 "), "{}", v.suggestion);
            assert!(v.suggestion.contains("CPU 1 is idle"), "{}", v.suggestion);
        }
        assert!(r.verdicts[1].suggestion.contains("OMP_NUM_THREADS=1"));
        let mut wide = ctx();
        wide.allowed = vec![0, 1, 2];
        let r = analyze(&a, &b, &looked(&[&a, &b]), &wide);
        let s = &r.verdicts[1].suggestion;
        assert!(s.contains("autopin pin -c 1,2 -- ./prog"), "{s}");
        assert!(s.contains("CPUs 1,2 are idle"), "{s}");
    }

    #[test]
    fn the_whole_run_says_what_its_intervals_found() {
        let a = snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 1, 0, 0)]);
        let b = snap(10.0, vec![thread(1, 0, 9900, 2), thread(2, 1, 9900, 3)]);
        let mut r = analyze(&a, &b, &looked(&[&a, &b]), &ctx());
        assert!(r.verdicts.is_empty());
        let mut tally = IntervalTally::default();
        let squeezed = {
            let a = snap(0.0, vec![thread(1, 0, 0, 0), thread(2, 0, 0, 0)]);
            let b = snap(1.0, vec![thread(1, 0, 500, 500), thread(2, 0, 500, 500)]);
            analyze(&a, &b, &looked(&[&a, &b]), &ctx())
        };
        for i in 0..10 {
            tally.add(if i < 7 { &squeezed } else { &r });
        }
        r.intervals = Some(tally);
        let text = crate::table::render(&r);
        assert!(
            text.contains(
                "verdict: nothing wrong found over the whole 10.0 s, but contention in 7 of 10 intervals"
            ),
            "{text}"
        );
        assert!(!text.contains("verdict: nothing wrong found\n"), "{text}");
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
