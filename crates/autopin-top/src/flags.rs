//! The problems a frame points at, by the rules `stat`'s verdicts are made of
//! (`autopin_stat::rules`), applied to every thread of the machine:
//!
//! - `oversubscribed` (a CPU): working threads crowd it, one of them waits for it, while a
//!   CPU of the machine idles;
//! - `pinned_waits` (a thread, and its CPU): a thread whose mask leaves out idle CPUs waits
//!   for its busy one;
//! - `smt_sibling` (a thread of a watched program): it is busy on a core whose other
//!   hardware thread is busy too, while a core idles;
//! - for each watched program with a working thread, `stat`'s own verdicts over the
//!   interval (`autopin_stat::analyze`): `numa_remote` (its pages mostly on a node other
//!   than where its threads run), `contention`, `busy_neighbour`, `migrations`, ...
//!
//! "Idle" CPUs are those of the machine (what programs may use) that no working thread ran
//! on and that other work kept busy less than `rules::NEIGHBOUR`.

use crate::frame::{busy_and_used, Flag, Frame};
use crate::look::{Look, Pages, ProcessLook};
use crate::shape::Shape;
use autopin_stat::{rules, ThreadStat};
use std::collections::{BTreeMap, BTreeSet};

/// The most programs whose verdicts one frame works out (the busiest first).
const MAX_ANALYZED: usize = 64;

fn list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn idle_words(free: &[u32]) -> String {
    match free {
        [one] => format!("CPU {one} idles"),
        _ if free.len() > 8 => format!("{} CPUs idle ({},...)", free.len(), list(&free[..8])),
        _ => format!("CPUs {} idle", list(free)),
    }
}

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

/// (process index, thread index, the thread as the rules see it) of every working thread.
fn working_threads(f: &Frame, shape: &Shape) -> Vec<(usize, usize, ThreadStat)> {
    let multi_node = shape.nodes > 1;
    let mut out = Vec::new();
    for (pi, p) in f.processes.iter().enumerate() {
        for (ti, t) in p.threads.iter().enumerate() {
            if t.cpu_share < rules::WORKING {
                continue;
            }
            out.push((
                pi,
                ti,
                ThreadStat {
                    tid: t.tid,
                    name: t.name.clone(),
                    cpu_share: t.cpu_share,
                    run_delay_fraction: t.wait_share,
                    cpus: vec![t.cpu],
                    migrations: None,
                    voluntary_switches: 0,
                    involuntary_switches: 0,
                    numa_nodes: if multi_node {
                        shape.node_of.get(&t.cpu).copied().into_iter().collect()
                    } else {
                        Vec::new()
                    },
                    counters: BTreeMap::new(),
                    metrics: BTreeMap::new(),
                    multiplexed: Vec::new(),
                },
            ));
        }
    }
    out
}

pub(crate) fn apply(f: &mut Frame, before: &Look, now: &Look, shape: &Shape) {
    let (busy, used) = busy_and_used(f);
    let free = rules::free_cpus(&shape.cpus, &used, &busy);
    let working = working_threads(f, shape);
    let mut flags = Vec::new();
    let mut thread_flags: Vec<(usize, usize, &'static str)> = Vec::new();
    let mut cpu_flags: Vec<(u32, &'static str)> = Vec::new();

    // A CPU its working threads crowd, while others idle.
    let mut on_cpu: BTreeMap<u32, Vec<&(usize, usize, ThreadStat)>> = BTreeMap::new();
    for w in &working {
        on_cpu.entry(w.2.cpus[0]).or_default().push(w);
    }
    for (cpu, ws) in &on_cpu {
        let stats: Vec<&ThreadStat> = ws.iter().map(|w| &w.2).collect();
        if free.is_empty() || !rules::crowded(&stats) {
            continue;
        }
        let masks = ws.iter().fold(autopin_topology::CpuSet::new(), |a, w| {
            a.union(&f.processes[w.0].threads[w.1].allowed)
        });
        let reachable: Vec<u32> = free
            .iter()
            .copied()
            .filter(|c| masks.contains(*c))
            .collect();
        let why = if reachable.is_empty() {
            "outside their masks: the pinning keeps them here".to_string()
        } else {
            format!("their masks allow CPU {}", list(&reachable))
        };
        let who: Vec<String> = ws
            .iter()
            .map(|w| {
                let p = &f.processes[w.0];
                format!("{} ({} of PID {})", w.2.tid, w.2.name, p.pid)
            })
            .collect();
        flags.push(Flag {
            kind: "oversubscribed",
            cpu: Some(*cpu),
            pid: None,
            tid: None,
            text: format!(
                "CPU {cpu}: {} working threads wait for it (up to {}) while {} ({why}): {}",
                ws.len(),
                pct(stats
                    .iter()
                    .map(|t| t.run_delay_fraction)
                    .fold(0.0, f64::max)),
                idle_words(&free),
                who.join(", ")
            ),
        });
        cpu_flags.push((*cpu, "oversubscribed"));
        for w in ws {
            thread_flags.push((w.0, w.1, "oversubscribed"));
        }
    }

    // A pinned thread that waits while CPUs outside its mask idle.
    for (pi, ti, t) in &working {
        let row = &f.processes[*pi].threads[*ti];
        if !rules::is_waiting(t) {
            continue;
        }
        let outside: Vec<u32> = shape
            .cpus
            .iter()
            .copied()
            .filter(|c| !row.allowed.contains(*c))
            .collect();
        let idle = rules::free_cpus(&outside, &used, &busy);
        if outside.is_empty() || idle.is_empty() {
            continue;
        }
        flags.push(Flag {
            kind: "pinned_waits",
            cpu: Some(row.cpu),
            pid: Some(f.processes[*pi].pid),
            tid: Some(row.tid),
            text: format!(
                "thread {} ({}) of PID {}, pinned to {}, waits {} of the time for CPU {} while {}",
                row.tid,
                row.name,
                f.processes[*pi].pid,
                shape.compact(&row.allowed),
                pct(t.run_delay_fraction),
                row.cpu,
                idle_words(&idle)
            ),
        });
        thread_flags.push((*pi, *ti, "pinned_waits"));
        cpu_flags.push((row.cpu, "pinned_waits"));
    }

    // A busy thread of a watched program on a core whose sibling is busy, while cores idle.
    if shape.core_of.values().collect::<BTreeSet<_>>().len() < shape.core_of.len() {
        let stats: Vec<&ThreadStat> = working.iter().map(|w| &w.2).collect();
        let share = rules::smt_share(&stats, &shape.core_of);
        let idle_cores = rules::idle_cores(&shape.cpus, &shape.core_of, &share.busy_cores);
        let by_tid: BTreeMap<i32, (usize, usize)> =
            working.iter().map(|w| (w.2.tid, (w.0, w.1))).collect();
        for ts in share.shared.values() {
            for t in ts {
                let (pi, ti) = by_tid[&t.tid];
                let p = &f.processes[pi];
                if !p.watched || idle_cores.is_empty() {
                    continue;
                }
                let others: Vec<String> = ts
                    .iter()
                    .filter(|o| o.tid != t.tid && o.cpus[0] != t.cpus[0])
                    .map(|o| format!("{} ({}) on CPU {}", o.tid, o.name, o.cpus[0]))
                    .collect();
                flags.push(Flag {
                    kind: "smt_sibling",
                    cpu: Some(t.cpus[0]),
                    pid: Some(p.pid),
                    tid: Some(t.tid),
                    text: format!(
                        "thread {} ({}) of PID {} on CPU {} shares its core with busy thread {} while {} core(s) idle",
                        t.tid,
                        t.name,
                        p.pid,
                        t.cpus[0],
                        others.join(", "),
                        idle_cores.len()
                    ),
                });
                thread_flags.push((pi, ti, "smt_sibling"));
                cpu_flags.push((t.cpus[0], "smt_sibling"));
            }
        }
    }

    for (pi, ti, kind) in thread_flags {
        let t = &mut f.processes[pi].threads[ti];
        if !t.flags.contains(&kind) {
            t.flags.push(kind);
        }
        let p = &mut f.processes[pi];
        if !p.flags.contains(&kind) {
            p.flags.push(kind);
        }
    }
    for (cpu, kind) in cpu_flags {
        if let Ok(i) = f.cpus.binary_search_by_key(&cpu, |c| c.cpu) {
            if !f.cpus[i].flags.contains(&kind) {
                f.cpus[i].flags.push(kind);
            }
        }
    }
    flags.extend(verdicts(f, before, now, shape));
    f.flags = flags;
}

fn snapshot(p: &ProcessLook) -> autopin_stat::Snapshot {
    autopin_stat::Snapshot {
        t: p.threads_at,
        threads: p
            .threads
            .iter()
            .map(|t| autopin_stat::ThreadSample {
                tid: t.tid,
                name: t.name.clone(),
                cpu_ns: t.cpu_ns,
                wait_ns: t.wait_ns,
                cpu: t.cpu,
                migrations: t.migrations,
                voluntary_switches: 0,
                involuntary_switches: 0,
            })
            .collect(),
        ..autopin_stat::Snapshot::default()
    }
}

/// `stat`'s verdicts for each watched program with a working thread (the busiest
/// [`MAX_ANALYZED`]), over the interval; they become the program's flags.
fn verdicts(f: &mut Frame, before: &Look, now: &Look, shape: &Shape) -> Vec<Flag> {
    let old: BTreeMap<i32, &ProcessLook> = before.processes.iter().map(|p| (p.pid, p)).collect();
    let new: BTreeMap<i32, &ProcessLook> = now.processes.iter().map(|p| (p.pid, p)).collect();
    // Other processes that ran: the neighbours, at both looks.
    let active: Vec<usize> = (0..f.processes.len())
        .filter(|&i| f.processes[i].cpu_share >= rules::WORKING)
        .collect();
    let mut chosen: Vec<usize> = active
        .iter()
        .copied()
        .filter(|&i| f.processes[i].watched && !f.processes[i].kernel)
        .filter(|&i| old.contains_key(&f.processes[i].pid))
        .collect();
    chosen.sort_by(|a, b| {
        f.processes[*b]
            .cpu_share
            .total_cmp(&f.processes[*a].cpu_share)
    });
    chosen.truncate(MAX_ANALYZED);
    let neighbour = |p: &ProcessLook| autopin_stat::Neighbour {
        pid: p.pid,
        name: p.name.clone(),
        cpu_ns: p.threads.iter().map(|t| t.cpu_ns).sum(),
        cpus: Vec::new(),
    };
    let node_of = if shape.nodes > 1 {
        shape.node_of.clone()
    } else {
        BTreeMap::new()
    };
    let mut out = Vec::new();
    for i in chosen {
        let pid = f.processes[i].pid;
        let (a, b) = (old[&pid], new[&pid]);
        if b.threads_at <= a.threads_at {
            continue;
        }
        let (mut first, mut last) = (snapshot(a), snapshot(b));
        // Migrations count where both looks read them.
        for t in &mut last.threads {
            if first
                .threads
                .iter()
                .any(|f| f.tid == t.tid && f.migrations.is_none())
            {
                t.migrations = None;
            }
        }
        for &j in &active {
            let q = &f.processes[j];
            if j == i {
                continue;
            }
            if let Some(qa) = old.get(&q.pid) {
                // Its share over its own interval, laid over the program's: what analyze
                // divides by the program's seconds.
                let n = neighbour(qa);
                let grew = q.cpu_share * (b.threads_at - a.threads_at) * 1e9;
                last.neighbours.push(autopin_stat::Neighbour {
                    cpu_ns: n.cpu_ns + grew as u64,
                    cpus: q.on.iter().collect(),
                    ..n.clone()
                });
                first.neighbours.push(n);
            }
        }
        if let Pages::Read { nodes, .. } = &b.pages {
            last.pages = nodes.clone();
        }
        let mut seen = autopin_stat::CpusSeen::default();
        seen.record(&first);
        seen.record(&last);
        let ctx = autopin_stat::Context {
            allowed: f.processes[i].allowed.iter().collect(),
            core_of: shape.core_of.clone(),
            subject: autopin_stat::Subject::Process(pid),
            node_of: node_of.clone(),
        };
        let report = autopin_stat::analyze(&first, &last, &seen, &ctx);
        let p = &mut f.processes[i];
        for v in &report.verdicts {
            if !p.flags.contains(&v.kind) {
                p.flags.push(v.kind);
            }
            out.push(Flag {
                kind: v.kind,
                cpu: None,
                pid: Some(pid),
                tid: None,
                text: format!("PID {pid} ({}): {}", p.name, v.text),
            });
        }
        p.verdicts = report.verdicts;
    }
    out
}
