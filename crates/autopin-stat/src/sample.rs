//! What one look at the program and its surroundings records.

use serde::{Deserialize, Serialize};

/// One thread at one moment (cumulative counters since it started).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSample {
    pub tid: i32,
    pub name: String,
    /// Nanoseconds on a CPU (schedstat).
    pub cpu_ns: u64,
    /// Nanoseconds runnable but waiting for a CPU (schedstat run delay).
    pub wait_ns: u64,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// Migrations between CPUs (None where the kernel does not say).
    pub migrations: Option<u64>,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

/// Another process at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Neighbour {
    pub pid: i32,
    pub name: String,
    /// Its CPU time so far, nanoseconds (all threads).
    pub cpu_ns: u64,
    /// The CPUs its threads last ran on.
    pub cpus: Vec<u32>,
}

/// The program's cgroup CPU quota counters.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Throttling {
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_ns: u64,
}

/// Everything one look saw, `t` seconds after the first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub t: f64,
    pub threads: Vec<ThreadSample>,
    pub neighbours: Vec<Neighbour>,
    pub throttling: Option<Throttling>,
    /// The process's pages per NUMA node (node, pages), from /proc/PID/numa_maps; empty
    /// when not looked at (only some looks read it: it is long for a big process).
    #[serde(default)]
    pub pages: Vec<(u32, u64)>,
    /// What the program reported of its own progress so far (a program `stat` started).
    #[serde(default)]
    pub progress: Option<Progress>,
}

impl Snapshot {
    /// The threads of `earlier` that this look no longer sees: they ended in between, at the
    /// counters `earlier` read.
    pub fn ended_since(&self, earlier: &Snapshot) -> Vec<ThreadSample> {
        earlier
            .threads
            .iter()
            .filter(|t| !self.threads.iter().any(|x| x.tid == t.tid))
            .cloned()
            .collect()
    }

    /// This look with `ended` threads added at their last counters, where it does not
    /// list them: a thread that ended before the last look worked all the same, and the
    /// report over the whole watch counts it.
    pub fn with_ended<'a>(&self, ended: impl IntoIterator<Item = &'a ThreadSample>) -> Snapshot {
        let mut out = self.clone();
        for t in ended {
            if !out.threads.iter().any(|x| x.tid == t.tid) {
                out.threads.push(t.clone());
            }
        }
        out
    }
}

/// MiB in `pages` of the 4 KiB that [`Snapshot::pages`] counts.
pub(crate) fn pages_mib(pages: u64) -> f64 {
    pages as f64 * 4096.0 / f64::from(1 << 20)
}

/// A program's own progress counters at one look.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Heartbeats it reported (`autopin_beat`).
    pub beats: u64,
    /// OpenMP constructs its threads completed, as the preload library counts them (None:
    /// no OpenMP call seen, or the library not loaded).
    pub openmp: Option<u64>,
}

/// The CPUs each thread ran on, as the looks saw them. A look's CPU counts only when the
/// thread ran since the previous look (its CPU time grew): a thread not yet run, or asleep,
/// shows a CPU it merely sits on. And a CPU counts only when the thread was seen running
/// there in at least a fifth of its looks: a thread caught once on another CPU (placed
/// there at its birth, moved at once) does not use that CPU, and counting it would hide
/// two threads crowding one CPU.
#[derive(Debug, Clone, Default)]
pub struct CpusSeen {
    /// tid → CPU → looks that saw it running there.
    ran_on: std::collections::BTreeMap<i32, std::collections::BTreeMap<u32, u32>>,
    cpu_ns: std::collections::BTreeMap<i32, u64>,
}

/// The share of a thread's running looks a CPU needs to count as one it uses.
const USED: f64 = 0.2;

impl CpusSeen {
    pub fn record(&mut self, look: &Snapshot) {
        for t in &look.threads {
            let before = self.cpu_ns.insert(t.tid, t.cpu_ns).unwrap_or(0);
            if t.cpu_ns > before {
                *self
                    .ran_on
                    .entry(t.tid)
                    .or_default()
                    .entry(t.cpu)
                    .or_default() += 1;
            }
        }
    }

    /// The CPUs `tid` ran on; empty when it never ran between looks.
    pub fn of(&self, tid: i32) -> std::collections::BTreeSet<u32> {
        let Some(counts) = self.ran_on.get(&tid) else {
            return Default::default();
        };
        let looks: u32 = counts.values().sum();
        counts
            .iter()
            .filter(|(_, n)| f64::from(**n) >= USED * f64::from(looks))
            .map(|(c, _)| *c)
            .collect()
    }
}
