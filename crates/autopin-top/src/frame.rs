//! One refresh: from two looks to what the screen, the table and the JSON show — each CPU's
//! load (user, system, steal; the watched programs' share and the others'), each process and
//! thread with its CPU share, wait share, CPU, mask and migrations, and the flags.

use crate::look::{CpuTicks, Look, Pages, ProcessLook, ThreadLook};
use crate::shape::Shape;
use autopin_topology::CpuSet;
use std::collections::{BTreeMap, BTreeSet};

/// A CPU over the refresh's interval: shares of its time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuLoad {
    pub cpu: u32,
    /// False where this host has no such CPU (a machine read from a dump).
    pub known: bool,
    pub user: f64,
    pub system: f64,
    pub steal: f64,
    pub idle: f64,
    /// What the watched programs' threads ran on it (by the CPU each was last on).
    pub watched: f64,
    /// What everything else ran on it: user + system − watched.
    pub others: f64,
    /// Threads runnable on it at the look (state R), watched or not.
    pub runnable: usize,
    /// Working threads last seen on it (tid).
    pub working: Vec<i32>,
    pub flags: Vec<&'static str>,
}

impl CpuLoad {
    /// user + system.
    pub fn busy(&self) -> f64 {
        self.user + self.system
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRow {
    pub tid: i32,
    pub name: String,
    pub state: char,
    pub cpu: u32,
    pub allowed: CpuSet,
    /// Share of one CPU it ran.
    pub cpu_share: f64,
    /// Share of the interval it was runnable and waited for a CPU.
    pub wait_share: f64,
    /// None where the source did not read migrations.
    pub migrations_per_s: Option<f64>,
    pub flags: Vec<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProcessRow {
    pub pid: i32,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub kernel: bool,
    /// It matches the filter: its threads count as the watched programs'.
    pub watched: bool,
    pub cpu_share: f64,
    pub wait_share: f64,
    pub migrations_per_s: Option<f64>,
    pub threads: Vec<ThreadRow>,
    /// The union of its threads' masks.
    pub allowed: CpuSet,
    /// The CPUs its working threads were on (all its threads' where none works).
    pub on: CpuSet,
    pub pages: Pages,
    /// Flag kinds of the process and of its threads.
    pub flags: Vec<&'static str>,
    /// stat's verdicts over this interval (processes with a working thread, when watched).
    pub verdicts: Vec<autopin_stat::Verdict>,
}

/// A problem the view points at.
#[derive(Debug, Clone, PartialEq)]
pub struct Flag {
    /// `oversubscribed`, `pinned_waits`, `smt_sibling`, or a kind of stat's verdicts.
    pub kind: &'static str,
    pub cpu: Option<u32>,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frame {
    /// The look's time (seconds since top started) and the interval it covers.
    pub t: f64,
    pub seconds: f64,
    /// In OS order, every CPU of the shape.
    pub cpus: Vec<CpuLoad>,
    /// Every process of the look, in PID order (filtering and sorting are the view's).
    pub processes: Vec<ProcessRow>,
    pub flags: Vec<Flag>,
    /// Processes watched by PID (`-p`) that no longer run.
    pub ended: Vec<i32>,
}

impl Frame {
    pub fn cpu(&self, cpu: u32) -> Option<&CpuLoad> {
        self.cpus
            .binary_search_by_key(&cpu, |c| c.cpu)
            .ok()
            .map(|i| &self.cpus[i])
    }

    pub fn process(&self, pid: i32) -> Option<&ProcessRow> {
        self.processes
            .binary_search_by_key(&pid, |p| p.pid)
            .ok()
            .map(|i| &self.processes[i])
    }

    /// The whole machine's shares: (user, system, steal, idle), averaged over known CPUs.
    pub fn totals(&self) -> (f64, f64, f64, f64) {
        let known: Vec<&CpuLoad> = self.cpus.iter().filter(|c| c.known).collect();
        let n = known.len().max(1) as f64;
        let sum = |f: fn(&CpuLoad) -> f64| known.iter().map(|c| f(c)).sum::<f64>() / n;
        (
            sum(|c| c.user),
            sum(|c| c.system),
            sum(|c| c.steal),
            sum(|c| c.idle),
        )
    }
}

fn shares(a: &CpuTicks, b: &CpuTicks) -> (f64, f64, f64, f64) {
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let total = d(a.total(), b.total()).max(1.0);
    (
        d(a.user, b.user) / total,
        d(a.system, b.system) / total,
        d(a.steal, b.steal) / total,
        d(a.idle, b.idle) / total,
    )
}

/// A thread over the interval between `before` (None: born since) and `now`, `seconds` long.
fn thread_row(before: Option<&ThreadLook>, now: &ThreadLook, seconds: f64) -> ThreadRow {
    let d = |x: u64, y: Option<u64>| x.saturating_sub(y.unwrap_or(0)) as f64;
    let (cpu_share, wait_share, migrations_per_s) = if seconds > 0.0 {
        (
            d(now.cpu_ns, before.map(|b| b.cpu_ns)) * 1e-9 / seconds,
            d(now.wait_ns, before.map(|b| b.wait_ns)) * 1e-9 / seconds,
            // Known when read at both looks (or the thread is new: its whole life).
            match (before, now.migrations) {
                (None, Some(m)) => Some(m as f64 / seconds),
                (Some(b), Some(m)) => b.migrations.map(|was| d(m, Some(was)) / seconds),
                (_, None) => None,
            },
        )
    } else {
        // Not read again since the last look: nothing of it changed.
        (0.0, 0.0, None)
    };
    ThreadRow {
        tid: now.tid,
        name: now.name.clone(),
        state: now.state,
        cpu: now.cpu,
        allowed: now.allowed.clone(),
        cpu_share,
        wait_share,
        migrations_per_s,
        flags: Vec::new(),
    }
}

fn process_row(before: Option<&ProcessLook>, now: &ProcessLook, wall: f64) -> ProcessRow {
    // A process whose threads were not read again covers no time; one born since the last
    // look counts its threads' whole lives over the look's interval.
    let seconds = before.map_or(wall, |b| now.threads_at - b.threads_at);
    let old: BTreeMap<i32, &ThreadLook> = before
        .map(|b| b.threads.iter().map(|t| (t.tid, t)).collect())
        .unwrap_or_default();
    let threads: Vec<ThreadRow> = now
        .threads
        .iter()
        .map(|t| thread_row(old.get(&t.tid).copied(), t, seconds))
        .collect();
    let allowed = threads
        .iter()
        .fold(CpuSet::new(), |a, t| a.union(&t.allowed));
    let working: CpuSet = threads
        .iter()
        .filter(|t| t.cpu_share >= autopin_stat::rules::WORKING)
        .map(|t| t.cpu)
        .collect();
    let on = if working.is_empty() {
        threads.iter().map(|t| t.cpu).collect()
    } else {
        working
    };
    // The threads whose migrations are known (those that worked); None when none is.
    let migrations_per_s = threads
        .iter()
        .filter_map(|t| t.migrations_per_s)
        .fold(None, |a: Option<f64>, m| Some(a.unwrap_or(0.0) + m));
    ProcessRow {
        pid: now.pid,
        name: now.name.clone(),
        user: now.user.clone(),
        uid: now.uid,
        kernel: now.kernel,
        watched: false,
        cpu_share: threads.iter().map(|t| t.cpu_share).sum(),
        wait_share: threads.iter().map(|t| t.wait_share).sum(),
        migrations_per_s,
        threads,
        allowed,
        on,
        pages: now.pages.clone(),
        flags: Vec::new(),
        verdicts: Vec::new(),
    }
}

/// The frame between two looks, measured and not yet flagged (`crate::frame` adds the
/// flags). `watched` says which processes are the watched programs' (those the view shows);
/// `shape` is the machine the map draws.
pub(crate) fn measured(
    before: &Look,
    now: &Look,
    shape: &Shape,
    watched: &dyn Fn(&ProcessRow) -> bool,
) -> Frame {
    let wall = (now.t - before.t).max(1e-9);
    let old: BTreeMap<i32, &ProcessLook> = before.processes.iter().map(|p| (p.pid, p)).collect();
    let mut processes: Vec<ProcessRow> = now
        .processes
        .iter()
        .map(|p| process_row(old.get(&p.pid).copied(), p, wall))
        .collect();
    processes.sort_by_key(|p| p.pid);
    for p in &mut processes {
        p.watched = watched(p);
    }
    let mut cpus: BTreeMap<u32, CpuLoad> = shape
        .core_of
        .keys()
        .map(|&cpu| {
            (
                cpu,
                CpuLoad {
                    cpu,
                    ..CpuLoad::default()
                },
            )
        })
        .collect();
    for (cpu, b) in &now.cpus {
        let Some(a) = before.cpus.get(cpu) else {
            continue;
        };
        let (user, system, steal, idle) = shares(a, b);
        let c = cpus.entry(*cpu).or_insert_with(|| CpuLoad {
            cpu: *cpu,
            ..CpuLoad::default()
        });
        c.known = true;
        (c.user, c.system, c.steal, c.idle) = (user, system, steal, idle);
    }
    for p in &processes {
        for t in &p.threads {
            let Some(c) = cpus.get_mut(&t.cpu) else {
                continue;
            };
            if t.state == 'R' {
                c.runnable += 1;
            }
            if t.cpu_share >= autopin_stat::rules::WORKING {
                c.working.push(t.tid);
            }
            if p.watched {
                c.watched += t.cpu_share;
            }
        }
    }
    for c in cpus.values_mut() {
        // Tick-grained /proc/stat and nanosecond schedstat disagree a little: the watched
        // share is what the CPU was busy at most.
        c.watched = c.watched.min(c.busy().max(if c.known { 0.0 } else { 1.0 }));
        c.others = (c.busy() - c.watched).max(0.0);
    }
    Frame {
        t: now.t,
        seconds: wall,
        cpus: cpus.into_values().collect(),
        processes,
        flags: Vec::new(),
        ended: Vec::new(),
    }
}

/// The CPUs where other work (not a working thread's) keeps a CPU busy, and the CPUs used
/// by working threads: what [`autopin_stat::rules::free_cpus`] leaves out.
pub(crate) fn busy_and_used(f: &Frame) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let used: BTreeSet<u32> = f
        .cpus
        .iter()
        .filter(|c| !c.working.is_empty())
        .map(|c| c.cpu)
        .collect();
    let busy: BTreeSet<u32> = f
        .cpus
        .iter()
        .filter(|c| !c.known || c.busy() >= autopin_stat::rules::NEIGHBOUR)
        .map(|c| c.cpu)
        .collect();
    (busy, used)
}
