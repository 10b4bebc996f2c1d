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
}

/// The CPUs each thread ran on, as the looks saw them. A look's CPU counts only when the
/// thread ran since the previous look (its CPU time grew): a thread not yet run, or asleep,
/// shows a CPU it merely sits on — a new thread can show its parent's CPU before the kernel
/// moves it inside its affinity, and that CPU is not one it uses.
#[derive(Debug, Clone, Default)]
pub struct CpusSeen {
    ran_on: std::collections::BTreeMap<i32, std::collections::BTreeSet<u32>>,
    cpu_ns: std::collections::BTreeMap<i32, u64>,
}

impl CpusSeen {
    pub fn record(&mut self, look: &Snapshot) {
        for t in &look.threads {
            let before = self.cpu_ns.insert(t.tid, t.cpu_ns).unwrap_or(0);
            if t.cpu_ns > before {
                self.ran_on.entry(t.tid).or_default().insert(t.cpu);
            }
        }
    }

    /// The CPUs `tid` ran on; empty when it never ran between looks.
    pub fn of(&self, tid: i32) -> std::collections::BTreeSet<u32> {
        self.ran_on.get(&tid).cloned().unwrap_or_default()
    }
}
