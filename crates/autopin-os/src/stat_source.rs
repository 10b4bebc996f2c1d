//! What `autopin stat` samples, read from /proc and the cgroup file system: each thread's
//! time on and waiting for a CPU, its last CPU, migrations and context switches; the other
//! processes' CPU time and CPUs; the program's cgroup CPU throttling. Nothing here moves a
//! thread or changes the program.

use crate::process::proc_scan::split_stat;
use autopin_stat::{Neighbour, ThreadSample, Throttling};
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

#[cfg(test)]
mod tests {
    use super::*;

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
