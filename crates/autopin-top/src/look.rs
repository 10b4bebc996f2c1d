//! What one look at the machine records: every CPU's time counters and every process with
//! its threads (read by autopin-os `top_source`). Counters are cumulative; a frame is the
//! difference of two looks.

use autopin_topology::CpuSet;
use std::collections::BTreeMap;

/// A CPU's time counters from /proc/stat, in USER_HZ ticks since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice.
    pub user: u64,
    /// system + irq + softirq.
    pub system: u64,
    /// idle + iowait.
    pub idle: u64,
    pub steal: u64,
}

impl CpuTicks {
    pub fn total(&self) -> u64 {
        self.user + self.system + self.idle + self.steal
    }
}

/// One thread at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadLook {
    pub tid: i32,
    pub name: String,
    /// The kernel's state letter: R runnable, S sleeping, D uninterruptible, ...
    pub state: char,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// Nanoseconds on a CPU (schedstat).
    pub cpu_ns: u64,
    /// Nanoseconds runnable but waiting for a CPU (schedstat run delay).
    pub wait_ns: u64,
    /// Migrations between CPUs (None: not read, or the kernel does not say).
    pub migrations: Option<u64>,
    /// The CPUs it may run on.
    pub allowed: CpuSet,
}

/// Where a process's resident pages are.
#[derive(Debug, Clone, PartialEq)]
pub enum Pages {
    /// Not looked at in this look (see the source's rules for which processes it reads).
    NotRead,
    /// (NUMA node, 4 KiB pages), read at the look's time `at`.
    Read { at: f64, nodes: Vec<(u32, u64)> },
    /// /proc/PID/numa_maps could not be read: why.
    Unreadable(String),
}

/// One process at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessLook {
    pub pid: i32,
    pub name: String,
    pub uid: u32,
    /// The user's name (the uid as a number where the name is unknown).
    pub user: String,
    /// A kernel thread (no program, no memory of its own).
    pub kernel: bool,
    /// Shared: a look that keeps a process's threads of the last read shares them with it.
    pub threads: std::sync::Arc<Vec<ThreadLook>>,
    /// When its threads were read, on the look's clock. Older than the look's own time when
    /// the source kept the threads of an earlier look (nothing of the process had changed).
    pub threads_at: f64,
    pub pages: Pages,
}

/// Everything one look saw, `t` seconds after the source's start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Look {
    pub t: f64,
    pub cpus: BTreeMap<u32, CpuTicks>,
    pub processes: Vec<ProcessLook>,
}

/// Clock ticks per second of /proc/stat's CPU times (USER_HZ, 100 on every Linux port).
pub const USER_HZ: f64 = 100.0;
