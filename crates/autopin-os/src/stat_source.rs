//! What `autopin stat` samples, read from /proc and the cgroup file system: each thread's
//! time on and waiting for a CPU, its last CPU, migrations and context switches; the other
//! processes' CPU time and CPUs; the program's cgroup CPU throttling. Nothing here moves a
//! thread or changes the program.

use crate::process::proc_scan::split_stat;
use autopin_stat::{Context, Neighbour, Snapshot, Subject, ThreadSample, Throttling};
use std::collections::BTreeMap;
use std::path::Path;

/// Clock ticks per second of /proc's CPU times (USER_HZ, 100 on every Linux port).
const USER_HZ: u64 = 100;

/// Every thread of `pid` now; an error when the process is gone.
pub fn thread_samples(pid: i32) -> std::io::Result<Vec<ThreadSample>> {
    let mut out: Vec<ThreadSample> = crate::process::ProcFs::default()
        .task_dirs(pid)?
        .into_iter()
        .filter_map(|(tid, dir)| thread_sample(&dir, tid))
        .collect();
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// The most processes [`process_tree`] follows.
const MAX_TREE: usize = 4096;

/// `pid` and every process it started that still runs, their children too (up to 4096),
/// `pid` first: what `stat` watches of a program that forks its work
/// (`sh -c 'solver; exit 3'`).
pub fn process_tree(pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < MAX_TREE {
        let p = out[i];
        i += 1;
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children
                .split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
            {
                if !out.contains(&c) && out.len() < MAX_TREE {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// Every thread of `pid` and of the processes it started ([`process_tree`]) now; an error
/// when `pid` is gone.
pub fn tree_samples(pid: i32) -> std::io::Result<Vec<ThreadSample>> {
    let mut out = thread_samples(pid)?;
    for child in process_tree(pid).into_iter().skip(1) {
        out.extend(thread_samples(child).unwrap_or_default());
    }
    out.sort_by_key(|t| t.tid);
    out.dedup_by_key(|t| t.tid);
    Ok(out)
}

/// The process (thread group) `tid` belongs to: itself for a process, its process for a
/// thread (`stat -p TID`); None when it is gone.
pub fn process_of(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

fn thread_sample(dir: &Path, tid: i32) -> Option<ThreadSample> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let (name, fields) = split_stat(&stat)?;
    // `processor` is field 39, the 37th after the name.
    let cpu = fields.get(36)?.parse().ok()?;
    let schedstat = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
    let mut ss = schedstat
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0));
    let (cpu_ns, wait_ns) = (ss.next().unwrap_or(0), ss.next().unwrap_or(0));
    let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
    let field = |text: &str, key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.rsplit([':', ' ']).next())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    // /proc/TID/sched exists on kernels built with scheduler debugging (most distributions).
    let migrations = std::fs::read_to_string(dir.join("sched"))
        .ok()
        .and_then(|s| field(&s, "se.nr_migrations"));
    Some(ThreadSample {
        tid,
        name: name.to_string(),
        cpu_ns,
        wait_ns,
        cpu,
        migrations,
        voluntary_switches: field(&status, "voluntary_ctxt_switches").unwrap_or(0),
        involuntary_switches: field(&status, "nonvoluntary_ctxt_switches").unwrap_or(0),
    })
}

/// Every other process now (not those in `exclude`): its CPU time and the CPU its main
/// thread last ran on (one read per process, so a scan costs little).
pub fn neighbours(exclude: &[i32]) -> Vec<Neighbour> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if exclude.contains(&pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some((name, f)) = split_stat(&stat) else {
            continue;
        };
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        // utime and stime are fields 14 and 15 (11th and 12th after the name).
        let cpu_ns = (ticks(11) + ticks(12)) * (1_000_000_000 / USER_HZ);
        if let Some(cpu) = f.get(36).and_then(|v| v.parse().ok()) {
            out.push(Neighbour {
                pid,
                name: name.to_string(),
                cpu_ns,
                cpus: vec![cpu],
            });
        }
    }
    out
}

/// What a program `stat` starts reports of its own progress: the heartbeat channel (its
/// `autopin_beat` calls) and, when the program can load the preload library, the OpenMP
/// constructs that library counts into the same file. The file is removed on drop.
pub struct ProgressChannel {
    channel: autopin_perf::heartbeat::HeartbeatChannel,
}

impl ProgressChannel {
    /// Creates the channel and adds what the launch needs to `spec` (the channel's variable,
    /// and the preload library where it loads); None when no channel can be made.
    pub fn for_launch(spec: &mut crate::process::LaunchSpec) -> Option<ProgressChannel> {
        use autopin_perf::heartbeat::{HeartbeatChannel, ENV_VAR};
        let (channel, path) = HeartbeatChannel::create(&std::env::temp_dir()).ok()?;
        spec.env.push((ENV_VAR.into(), path.into_os_string()));
        let path_var = std::env::var_os("PATH");
        // A static program cannot load it, and a 32-bit one would print ld.so's complaint.
        let loads = crate::process::elf::resolve_program(&spec.program, path_var.as_deref())
            .is_ok_and(|p| crate::process::elf::linkage(&p).is_ok_and(|l| l.preload_works()));
        if loads {
            spec.preload = crate::process::preload_library().ok();
        }
        Some(ProgressChannel { channel })
    }

    pub fn read(&self) -> autopin_stat::Progress {
        let s = self.channel.read();
        autopin_stat::Progress {
            beats: s.beats,
            openmp: s.omp.map(|o| o.counts.total()),
        }
    }
}

/// The process's resident pages per NUMA node, in 4 KiB pages (huge pages count as the
/// 4 KiB pages they hold), from /proc/PID/numa_maps; empty when it cannot be read.
pub fn pages_by_node(pid: i32) -> Vec<(u32, u64)> {
    std::fs::read_to_string(format!("/proc/{pid}/numa_maps"))
        .map(|t| parse_numa_maps(&t))
        .unwrap_or_default()
}

pub(crate) fn parse_numa_maps(text: &str) -> Vec<(u32, u64)> {
    let mut per: std::collections::BTreeMap<u32, u64> = Default::default();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let size_kb = words
            .iter()
            .find_map(|w| w.strip_prefix("kernelpagesize_kB="))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(4);
        for w in &words {
            let Some((node, pages)) = w.strip_prefix('N').and_then(|r| r.split_once('=')) else {
                continue;
            };
            if let (Ok(n), Ok(p)) = (node.parse::<u32>(), pages.parse::<u64>()) {
                *per.entry(n).or_default() += p * (size_kb / 4).max(1);
            }
        }
    }
    per.into_iter().collect()
}

/// The CPU quota counters of the cgroup `pid` is in (v2 `cpu.stat`, or v1's cpu
/// controller); None when there are none.
pub fn throttling(pid: i32) -> Option<Throttling> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mut candidates = crate::cgroup::cpu_dirs(Path::new("/"), &cgroups)
        .into_iter()
        .map(|(_, dir)| dir.join("cpu.stat"));
    candidates.find_map(|p| {
        let text = std::fs::read_to_string(p).ok()?;
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.trim().parse::<u64>().ok())
        };
        let throttled_ns = get("throttled_usec ")
            .map(|us| us * 1000)
            .or_else(|| get("throttled_time "))?;
        Some(Throttling {
            periods: get("nr_periods ").unwrap_or(0),
            throttled_periods: get("nr_throttled ").unwrap_or(0),
            throttled_ns,
        })
    })
}

/// The looks `stat` takes at one program: its threads and those of the processes it
/// started, their cgroup's throttling and the program's own progress at every look; the
/// other processes and (on a machine of several NUMA nodes) where its pages are only at
/// the looks a report is made of, as those reads are long. The clock starts at `new`.
pub struct StatSource {
    pid: i32,
    multi_node: bool,
    progress: Option<ProgressChannel>,
    begun: std::time::Instant,
}

impl StatSource {
    /// Looks at `pid`; `multi_node` as [`Context::multi_node`] says of the machine.
    pub fn new(pid: i32, multi_node: bool, progress: Option<ProgressChannel>) -> Self {
        StatSource {
            pid,
            multi_node,
            progress,
            begun: std::time::Instant::now(),
        }
    }

    /// Seconds since the source began: the looks' clock.
    pub fn elapsed(&self) -> f64 {
        self.begun.elapsed().as_secs_f64()
    }

    /// When the source began, for counters read on the same clock.
    pub fn begun(&self) -> std::time::Instant {
        self.begun
    }

    /// A look now, with the surroundings when `full`; None when the program's threads are
    /// gone.
    pub fn look(&self, full: bool) -> Option<Snapshot> {
        let threads = tree_samples(self.pid).ok().filter(|t| !t.is_empty())?;
        let mut s = Snapshot {
            t: self.elapsed(),
            threads,
            throttling: throttling(self.pid),
            progress: self.progress.as_ref().map(ProgressChannel::read),
            ..Snapshot::default()
        };
        if full {
            self.surround(&mut s);
        }
        Some(s)
    }

    /// Adds to `look` the other processes now and, on a machine of several nodes, where
    /// the program's pages are.
    pub fn surround(&self, look: &mut Snapshot) {
        look.neighbours = neighbours(&self.ours());
        if self.multi_node {
            look.pages = pages_by_node(self.pid);
        }
    }

    /// What is not a neighbour: autopin, the process watched (also when the pid names one
    /// of its threads) and every process it started, whose threads are watched with its
    /// own.
    fn ours(&self) -> Vec<i32> {
        let mut v = process_tree(self.pid);
        v.push(std::process::id() as i32);
        v.extend(process_of(self.pid));
        v
    }
}

/// What the verdicts need to know of the machine: the CPUs `pid` may use, the core and the
/// NUMA node of each CPU (empty where sysfs cannot be read).
pub fn context(pid: i32, subject: Subject) -> Context {
    let machine = autopin_topology::source::sysfs::read(Path::new("/")).ok();
    let allowed: Vec<u32> = autopin_topology::affinity::get(pid)
        .map(|m| m.iter().collect())
        .or_else(|_| {
            machine
                .as_ref()
                .map(|m| m.allowed_cpuset().iter().collect())
                .ok_or(())
        })
        .unwrap_or_default();
    let core_of: BTreeMap<u32, usize> = machine
        .as_ref()
        .map(|m| {
            m.flat_pus()
                .into_iter()
                .filter_map(|p| Some((p.os, p.core?)))
                .collect()
        })
        .unwrap_or_default();
    let node_of: BTreeMap<u32, u32> = machine
        .as_ref()
        .map(|m| {
            m.numa_nodes
                .iter()
                .flat_map(|n| n.cpuset.iter().map(move |c| (c, n.os_index)))
                .collect()
        })
        .unwrap_or_default();
    Context {
        allowed,
        core_of,
        subject,
        node_of,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_maps_pages_are_summed_per_node_in_4k_pages() {
        let text = "\
7f0000000000 default anon=300 dirty=300 N0=100 N1=200 kernelpagesize_kB=4
7f0100000000 bind:1 anon=2 dirty=2 N1=2 kernelpagesize_kB=2048
55c5d6efb000 default file=/usr/bin/x mapped=5 N0=5 kernelpagesize_kB=4
7ffd00000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
";
        assert_eq!(parse_numa_maps(text), vec![(0, 108), (1, 200 + 2 * 512)]);
        assert!(parse_numa_maps("").is_empty());
        let me = std::process::id() as i32;
        let here = pages_by_node(me);
        assert!(here.iter().map(|p| p.1).sum::<u64>() > 0, "{here:?}");
    }

    #[test]
    fn this_process_is_sampled() {
        let me = std::process::id() as i32;
        let threads = thread_samples(me).unwrap();
        let main = threads
            .iter()
            .find(|t| t.tid == me)
            .expect("the main thread");
        assert!(main.cpu_ns > 0, "{main:?}");
        assert!(thread_samples(i32::MAX).is_err());
        let others = neighbours(&[me]);
        assert!(others.iter().any(|n| n.pid == 1), "init is a neighbour");
        assert!(!others.iter().any(|n| n.pid == me));
    }
}
