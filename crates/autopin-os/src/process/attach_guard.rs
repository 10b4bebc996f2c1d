//! Which processes `autopin attach` may take on without `--force`: not init (PID 1), not a
//! kernel thread, not a process that has already ended (a zombie), and not autopin itself or
//! one of its ancestors (the shell that runs it) — re-pinning those is a typo's damage, not
//! an optimization.

use std::path::Path;

/// PF_KTHREAD in the `flags` field of /proc/PID/stat.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The fields of /proc/PID/stat autopin reads of a process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcStat {
    pub state: char,
    pub ppid: i32,
    pub flags: u64,
    /// CPU time in user and kernel mode, clock ticks (0 where the line stops short).
    pub utime: u64,
    pub stime: u64,
    /// CPU time of its children that ended and were waited for (cutime + cstime), clock
    /// ticks.
    pub children: u64,
    /// Start time, clock ticks since boot (0 where the line stops short).
    pub start: u64,
}

/// The state, parent, flags, CPU times and start time of a /proc/PID/stat line.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let (_, f) = super::proc_scan::split_stat(text)?;
    // Field N of proc(5) is f[N - 3]: the list starts after the name, at the state.
    let number = |n: usize| f.get(n - 3).and_then(|x| x.parse().ok()).unwrap_or(0);
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        flags: f.get(6)?.parse().ok()?,
        utime: number(14),
        stime: number(15),
        children: number(16) + number(17),
        start: number(22),
    })
}

/// /proc/PID/stat of `pid` below `proc_root`.
pub fn read_stat(proc_root: &Path, pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?)
}

/// True when `pid` has ended but was not reaped yet: nothing of it runs any more.
pub fn is_zombie(proc_root: &Path, pid: i32) -> bool {
    read_stat(proc_root, pid).is_some_and(|s| matches!(s.state, 'Z' | 'X' | 'x'))
}

/// Why autopin should not attach to `pid` (None: go ahead). `me` is autopin's own PID.
pub fn refuse(proc_root: &Path, pid: i32, me: i32) -> Option<String> {
    // Another user's process is refused anyway, and that reason is the one to give.
    let uid = |p: i32| {
        std::fs::metadata(proc_root.join(p.to_string()))
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
    };
    let (mine, theirs) = (uid(me), uid(pid));
    if mine != Some(0) && mine != theirs {
        return None;
    }
    if pid == 1 {
        return Some(
            "PID 1 is init: re-pinning its threads would pin the whole system's parent".into(),
        );
    }
    let stat = read_stat(proc_root, pid)?;
    if stat.flags & PF_KTHREAD != 0 {
        return Some(format!("process {pid} is a kernel thread, not a program"));
    }
    if matches!(stat.state, 'Z' | 'X' | 'x') {
        return Some(format!(
            "process {pid} has already ended (a zombie waiting for its parent to reap it): nothing of it runs"
        ));
    }
    // autopin itself and its ancestors (the shell that started it, ...).
    let mut p = me;
    for _ in 0..64 {
        if p == pid {
            return Some(if p == me {
                format!("process {pid} is this autopin")
            } else {
                format!("process {pid} is an ancestor of this autopin (the shell or tool that started it)")
            });
        }
        match read_stat(proc_root, p) {
            Some(s) if s.ppid > 0 && s.ppid != p => p = s.ppid,
            _ => break,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(entries: &[(i32, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (pid, stat) in entries {
            let dir = d.path().join(pid.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("stat"), stat).unwrap();
        }
        d
    }

    #[test]
    fn stat_is_parsed_after_the_last_parenthesis() {
        let s = parse_stat("42 (a (b) c) S 7 42 42 0 -1 4194560 0 0").unwrap();
        assert_eq!(
            s,
            ProcStat {
                state: 'S',
                ppid: 7,
                flags: 4194560,
                utime: 0,
                stime: 0,
                children: 0,
                start: 0,
            }
        );
        let s = parse_stat("42 (w) R 7 42 42 0 -1 0 0 0 0 0 250 31 6 2 20 0 1 0 9876 0").unwrap();
        assert_eq!((s.utime, s.stime, s.children, s.start), (250, 31, 8, 9876));
    }

    #[test]
    fn init_kernel_threads_zombies_and_our_own_tree_are_refused() {
        let root = fake_proc(&[
            (1, "1 (init) S 0 1 1 0 -1 4194560 0"),
            (2, "2 (kthreadd) S 0 0 0 0 -1 2129984 0"),
            (50, "50 (shell) S 1 50 50 0 -1 4194560 0"),
            (60, "60 (autopin) R 50 60 50 0 -1 4194560 0"),
            (70, "70 (app) S 50 70 50 0 -1 4194560 0"),
            (80, "80 (done) Z 50 80 50 0 -1 4194572 0"),
        ]);
        let r = |pid| refuse(root.path(), pid, 60);
        assert!(r(1).unwrap().contains("init"));
        assert!(r(2).unwrap().contains("kernel thread"));
        assert!(r(80).unwrap().contains("zombie"));
        assert!(r(60).unwrap().contains("this autopin"));
        assert!(r(50).unwrap().contains("ancestor"));
        assert_eq!(r(70), None);
        assert!(is_zombie(root.path(), 80));
        assert!(!is_zombie(root.path(), 70));
    }
}
