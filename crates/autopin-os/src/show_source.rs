//! What `autopin show` reads: where each thread of a running process is now (its state, the
//! CPU it last ran on, the CPUs it may run on), and which processes belong to a user or a
//! Slurm job. Read from /proc only; nothing is changed.

use crate::process::proc_scan::split_stat;
use autopin_topology::CpuSet;

/// One thread now.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadPlace {
    pub tid: i32,
    pub name: String,
    /// The kernel's state letter: R running, S sleeping, D waiting for I/O, T stopped, Z zombie.
    pub state: char,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// The CPUs it may run on (its affinity mask).
    pub mask: CpuSet,
}

/// Every thread of `pid`; an error when the process is gone or cannot be read.
pub fn thread_places(pid: i32) -> std::io::Result<Vec<ThreadPlace>> {
    let mut out: Vec<ThreadPlace> = crate::process::ProcFs::default()
        .task_dirs(pid)?
        .into_iter()
        .filter_map(|(tid, dir)| {
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            let (name, fields) = split_stat(&stat)?;
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let mask = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|l| CpuSet::parse_list(l.trim()).ok())?;
            Some(ThreadPlace {
                tid,
                name: name.to_string(),
                state: fields.first()?.chars().next()?,
                // `processor` is field 39, the 37th after the name.
                cpu: fields.get(36)?.parse().ok()?,
                mask,
            })
        })
        .collect();
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// The processes (pid, name) whose real user is `uid`, in pid order (kernel threads left out).
pub fn processes_of_user(uid: u32) -> Vec<(i32, String)> {
    processes(|pid| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let real = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))?
            .split_whitespace()
            .next()?
            .parse::<u32>()
            .ok()?;
        Some(real == uid)
    })
}

/// The processes (pid, name) of Slurm job `job`: those in its cgroup (`…/job_ID/…`) or, where
/// Slurm does not use cgroups, whose environment says `SLURM_JOB_ID=ID`.
pub fn processes_of_job(job: &str) -> Vec<(i32, String)> {
    let in_cgroup = format!("/job_{job}/");
    let in_env = format!("SLURM_JOB_ID={job}");
    processes(|pid| {
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        if cgroup.lines().any(|l| format!("{l}/").contains(&in_cgroup)) {
            return Some(true);
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        Some(env.split(|b| *b == 0).any(|v| v == in_env.as_bytes()))
    })
}

fn processes(keep: impl Fn(i32) -> Option<bool>) -> Vec<(i32, String)> {
    let mut out: Vec<(i32, String)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| keep(pid) == Some(true))
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (name, fields) = split_stat(&stat)?;
            // Kernel threads (flags, field 9, has PF_KTHREAD) are nobody's program.
            let flags: u64 = fields.get(6)?.parse().ok()?;
            (flags & 0x0020_0000 == 0).then(|| (pid, name.to_string()))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_shown_and_found_among_its_users() {
        let me = std::process::id() as i32;
        let places = thread_places(me).unwrap();
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        let this = places.iter().find(|t| t.tid == tid).expect("this thread");
        assert!(this.mask.contains(this.cpu), "{this:?}");
        assert!("RSD".contains(this.state), "{this:?}");
        assert!(places.iter().any(|t| t.tid == me), "the main thread too");
        assert!(thread_places(i32::MAX).is_err());
        let uid = rustix::process::getuid().as_raw();
        assert!(processes_of_user(uid).iter().any(|(p, _)| *p == me));
        assert!(processes_of_job("no-such-job-anywhere").is_empty());
    }
}
