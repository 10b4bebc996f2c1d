//! What `autopin doctor` reads about this machine and this process, relative to a root
//! directory (`/` live; a directory holding `proc/` and `sys/` in tests): the PMU, perf's
//! paranoia, RAPL, NUMA nodes and balancing, the cgroup's CPU quota and cpuset, SMT, how busy
//! each CPU is now. Facts only; what they mean for autopin is decided by the caller.

use crate::cgroup::{cpu_dirs, Hierarchy};
use autopin_topology::CpuSet;
use std::path::{Path, PathBuf};

/// What a RAPL energy counter file allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rapl {
    Absent,
    /// Present but not readable by this user (root-only since Linux 5.10).
    Unreadable(PathBuf),
    /// Readable: how many packages/domains.
    Readable(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// Hardware PMUs perf can use (`cpu`, `cpu_core`, `cpu_atom`, `armv8_*`...).
    pub pmus: Vec<String>,
    /// `kernel.perf_event_paranoid`; None when perf_event is not in this kernel.
    pub paranoid: Option<i64>,
    pub root_user: bool,
    pub rapl: Rapl,
    pub numa_nodes: usize,
    /// `kernel.numa_balancing` (0 off, 1 on, 2 memory tiering).
    pub numa_balancing: Option<u64>,
    /// The cgroup's CPU quota: (quota, period) in µs; None: no quota.
    pub cpu_quota: Option<(u64, u64)>,
    pub online: CpuSet,
    /// The CPUs this process may use (affinity, and the cgroup's cpuset).
    pub allowed: CpuSet,
    /// `smt/active`; None when the kernel does not say.
    pub smt_active: Option<bool>,
    /// Each CPU's busy share over the sampling interval.
    pub busy: Vec<(u32, f64)>,
}

fn text(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Busy and total ticks of each CPU, from `proc/stat`.
fn cpu_ticks(root: &Path) -> Vec<(u32, u64, u64)> {
    text(root, "proc/stat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
            let total: u64 = v.iter().take(8).sum();
            // idle and iowait are the 4th and 5th.
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            Some((cpu, total - idle.min(total), total))
        })
        .collect()
}

/// This process's CPU quota (quota, period) in µs: the unified hierarchy's `cpu.max`, else
/// cgroup v1's `cpu.cfs_quota_us` (-1: none); and the unified directory, for its cpuset.
fn cgroup_quota(root: &Path) -> (Option<(u64, u64)>, Option<PathBuf>) {
    let dirs = cpu_dirs(root, &text(root, "proc/self/cgroup").unwrap_or_default());
    let unified = dirs
        .iter()
        .find(|(h, _)| *h == Hierarchy::Unified)
        .map(|(_, d)| d.clone());
    let read = |p: PathBuf| std::fs::read_to_string(p).ok();
    let v2 = unified
        .as_ref()
        .and_then(|d| read(d.join("cpu.max")))
        .and_then(|t| {
            let mut f = t.split_whitespace();
            let q: u64 = f.next()?.parse().ok()?;
            let p: u64 = f.next()?.parse().ok()?;
            Some((q, p))
        });
    let v1 = || {
        let (_, dir) = dirs.iter().find(|(h, _)| *h == Hierarchy::V1)?;
        let q: i64 = read(dir.join("cpu.cfs_quota_us"))?.trim().parse().ok()?;
        let p: u64 = read(dir.join("cpu.cfs_period_us"))?.trim().parse().ok()?;
        u64::try_from(q).ok().map(|q| (q, p))
    };
    (v2.or_else(v1), unified)
}

/// Reads the facts; `sample` is how long to watch the CPUs for the busy shares.
pub fn read(root: &Path, affinity: Option<CpuSet>, sample: std::time::Duration) -> Facts {
    let events = root.join("sys/bus/event_source/devices");
    let mut pmus: Vec<String> = std::fs::read_dir(&events)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n == "cpu" || n.starts_with("cpu_") || n.starts_with("armv") || n.contains("pmu")
        })
        .collect();
    pmus.sort();
    let rapl_files: Vec<PathBuf> = std::fs::read_dir(root.join("sys/class/powercap"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("energy_uj"))
        .filter(|p| p.exists())
        .collect();
    let rapl = match rapl_files.first() {
        None => Rapl::Absent,
        Some(p) if std::fs::read_to_string(p).is_err() => Rapl::Unreadable(p.clone()),
        Some(_) => Rapl::Readable(rapl_files.len()),
    };
    let numa_nodes = std::fs::read_dir(root.join("sys/devices/system/node"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count()
        .max(1);
    let (cpu_quota, cg) = cgroup_quota(root);
    let online = text(root, "sys/devices/system/cpu/online")
        .and_then(|t| CpuSet::parse_list(&t).ok())
        .unwrap_or_default();
    let mut allowed = affinity.unwrap_or_else(|| online.clone());
    if let Some(set) = cg
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d.join("cpuset.cpus.effective")).ok())
        .and_then(|t| CpuSet::parse_list(t.trim()).ok())
        .filter(|s| !s.is_empty())
    {
        allowed = allowed.intersection(&set);
    }
    let before = cpu_ticks(root);
    std::thread::sleep(sample);
    let after = cpu_ticks(root);
    let busy = after
        .iter()
        .filter_map(|(cpu, b1, t1)| {
            let (_, b0, t0) = before.iter().find(|x| x.0 == *cpu)?;
            let dt = t1.saturating_sub(*t0);
            Some((
                *cpu,
                if dt == 0 {
                    0.0
                } else {
                    b1.saturating_sub(*b0) as f64 / dt as f64
                },
            ))
        })
        .collect();
    Facts {
        pmus,
        paranoid: text(root, "proc/sys/kernel/perf_event_paranoid").and_then(|t| t.parse().ok()),
        root_user: rustix::process::geteuid().is_root(),
        rapl,
        numa_nodes,
        numa_balancing: text(root, "proc/sys/kernel/numa_balancing").and_then(|t| t.parse().ok()),
        cpu_quota,
        online,
        allowed,
        smt_active: text(root, "sys/devices/system/cpu/smt/active").map(|t| t == "1"),
        busy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_is_read() {
        let f = read(Path::new("/"), None, std::time::Duration::from_millis(50));
        assert!(!f.online.is_empty());
        assert!(f.allowed.is_subset(&f.online) || f.allowed.is_empty());
        assert_eq!(f.busy.len(), f.online.len(), "{f:?}");
        assert!(f.numa_nodes >= 1);
    }
}
