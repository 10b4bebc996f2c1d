//! Discovering the threads of any process from /proc/PID/task. Used by `attach`, for static
//! binaries (where LD_PRELOAD cannot work), and when the registry overflows. Creation order
//! is approximated by start time (field 22 of /proc/PID/task/TID/stat, in clock ticks),
//! ties broken by tid, which Linux hands out increasingly until it wraps at pid_max.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// One thread as /proc shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcThread {
    pub tid: i32,
    /// Start time after boot in clock ticks (`starttime`, stat field 22).
    pub start_time: u64,
    /// The thread's name (`comm`), e.g. "python3" or a name set with pthread_setname_np.
    pub comm: String,
}

/// Splits a `/proc/PID[/task/TID]/stat` line into the name (`comm`) and the fields after
/// it, from field 3 (state) on. The name can contain spaces and parentheses, so the fields
/// start after the LAST ')'.
pub fn split_stat(stat: &str) -> Option<(&str, Vec<&str>)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    if close < open {
        return None;
    }
    Some((
        &stat[open + 1..close],
        stat[close + 1..].split_ascii_whitespace().collect(),
    ))
}

/// Parses the contents of a `/proc/PID/task/TID/stat` file into (comm, starttime).
pub fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let (comm, fields) = split_stat(stat)?;
    // starttime is field 22, the 20th after the name.
    let start = fields.get(19)?.parse().ok()?;
    Some((comm.to_string(), start))
}

/// Where /proc lives; tests point it at a fake tree.
#[derive(Clone, Debug)]
pub struct ProcFs {
    root: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs {
            root: PathBuf::from("/proc"),
        }
    }
}

impl ProcFs {
    pub fn at(root: impl Into<PathBuf>) -> Self {
        ProcFs { root: root.into() }
    }

    /// The live threads of `pid`, oldest first. A thread that exits during the scan is left
    /// out; the process itself being gone is an error (`NotFound`).
    pub fn threads(&self, pid: i32) -> io::Result<Vec<ProcThread>> {
        TaskScan::new(self.clone(), pid).scan()
    }

    /// The thread ids of `pid` listed in /proc/PID/task, each with its directory; the
    /// process being gone is an error (`NotFound`).
    pub fn task_dirs(&self, pid: i32) -> io::Result<Vec<(i32, PathBuf)>> {
        let task = self.root.join(pid.to_string()).join("task");
        Ok(fs::read_dir(&task)?
            .flatten()
            .filter_map(|e| {
                let tid = e.file_name().to_str()?.parse::<i32>().ok()?;
                Some((tid, e.path()))
            })
            .collect())
    }
}

/// The threads of one process, scanned again and again: each scan lists /proc/PID/task (one
/// directory read) and reads `stat` only for threads it has not seen, so a program with
/// thousands of threads costs a scan of names, not thousands of file reads. A thread id
/// reused by a new thread between two scans would need the whole PID space to wrap within
/// one interval; a thread missing from a listing is forgotten at once.
#[derive(Debug)]
pub struct TaskScan {
    proc: ProcFs,
    pid: i32,
    known: HashMap<i32, ProcThread>,
}

impl TaskScan {
    pub fn new(proc: ProcFs, pid: i32) -> Self {
        TaskScan {
            proc,
            pid,
            known: HashMap::new(),
        }
    }

    /// The live threads, oldest first, as [`ProcFs::threads`] gives them.
    pub fn scan(&mut self) -> io::Result<Vec<ProcThread>> {
        let mut listed: HashSet<i32> = HashSet::new();
        for (tid, dir) in self.proc.task_dirs(self.pid)? {
            if let std::collections::hash_map::Entry::Vacant(slot) = self.known.entry(tid) {
                match read_thread(&dir, tid) {
                    Some(t) => {
                        slot.insert(t);
                    }
                    None => continue,
                }
            }
            listed.insert(tid);
        }
        self.known.retain(|tid, _| listed.contains(tid));
        let mut out: Vec<ProcThread> = self.known.values().cloned().collect();
        out.sort_by_key(|t| (t.start_time, t.tid));
        Ok(out)
    }
}

fn read_thread(dir: &Path, tid: i32) -> Option<ProcThread> {
    let stat = fs::read_to_string(dir.join("stat")).ok()?;
    let (comm, start_time) = parse_stat(&stat)?;
    Some(ProcThread {
        tid,
        start_time,
        comm,
    })
}

/// Numbers threads in the order they were first seen, like the preload library numbers
/// them at creation: the main thread (tid == pid) is 0, later ones 1, 2, ... A tid that is
/// reused by a new thread (different start time) counts as a new thread.
#[derive(Debug)]
pub struct ThreadOrder {
    pid: i32,
    known: HashMap<i32, (u64, usize)>,
    next: usize,
}

impl ThreadOrder {
    pub fn new(pid: i32) -> Self {
        ThreadOrder {
            pid,
            known: HashMap::new(),
            next: 1,
        }
    }

    /// Takes a scan (oldest first) and returns the threads not seen before as
    /// (index, thread), in index order. Threads missing from the scan are forgotten.
    pub fn observe(&mut self, scan: &[ProcThread]) -> Vec<(usize, ProcThread)> {
        let live: HashSet<i32> = scan.iter().map(|t| t.tid).collect();
        self.known.retain(|tid, _| live.contains(tid));
        let mut fresh = Vec::new();
        for t in scan {
            match self.known.get(&t.tid) {
                Some((start, _)) if *start == t.start_time => continue,
                _ => {}
            }
            let index = if t.tid == self.pid {
                0
            } else {
                self.next += 1;
                self.next - 1
            };
            self.known.insert(t.tid, (t.start_time, index));
            fresh.push((index, t.clone()));
        }
        fresh
    }

    /// The index given to `tid`, if it is alive at the last scan.
    pub fn index_of(&self, tid: i32) -> Option<usize> {
        self.known.get(&tid).map(|(_, i)| *i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(tid: i32, comm: &str, start: u64) -> String {
        // Fields 1..=22 with plausible values; only comm and starttime matter.
        format!("{tid} ({comm}) S 1 {tid} {tid} 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 4 0 {start} 1000 200\n")
    }

    #[test]
    fn parse_stat_handles_odd_names() {
        assert_eq!(
            parse_stat(&stat_line(7, "a) b (c", 1234)),
            Some(("a) b (c".into(), 1234))
        );
        assert_eq!(parse_stat(&stat_line(7, "", 5)), Some((String::new(), 5)));
        assert_eq!(parse_stat("7 (x) S 1"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn scans_a_fake_proc_tree_in_start_order() {
        let dir = tempfile::tempdir().unwrap();
        for (tid, start) in [(100, 50u64), (103, 60), (101, 60), (102, 55)] {
            let d = dir.path().join("100/task").join(tid.to_string());
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("stat"), stat_line(tid, "w", start)).unwrap();
        }
        fs::create_dir_all(dir.path().join("100/task/notanumber")).unwrap();
        let scan = ProcFs::at(dir.path()).threads(100).unwrap();
        let tids: Vec<i32> = scan.iter().map(|t| t.tid).collect();
        assert_eq!(tids, vec![100, 102, 101, 103]);
        assert_eq!(
            ProcFs::at(dir.path()).threads(999).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn thread_order_numbers_new_threads_once() {
        let t = |tid, start| ProcThread {
            tid,
            start_time: start,
            comm: String::new(),
        };
        let mut o = ThreadOrder::new(10);
        let first = o.observe(&[t(10, 1), t(11, 2)]);
        assert_eq!(
            first.iter().map(|(i, t)| (*i, t.tid)).collect::<Vec<_>>(),
            vec![(0, 10), (1, 11)]
        );
        assert!(o.observe(&[t(10, 1), t(11, 2)]).is_empty());
        // 11 exits, 12 appears, and tid 11 is reused later by a new thread.
        let next = o.observe(&[t(10, 1), t(12, 3)]);
        assert_eq!(
            next.iter().map(|(i, t)| (*i, t.tid)).collect::<Vec<_>>(),
            vec![(2, 12)]
        );
        let reused = o.observe(&[t(10, 1), t(12, 3), t(11, 9)]);
        assert_eq!(
            reused.iter().map(|(i, t)| (*i, t.tid)).collect::<Vec<_>>(),
            vec![(3, 11)]
        );
        assert_eq!(o.index_of(12), Some(2));
        assert_eq!(o.index_of(99), None);
    }

    #[test]
    fn scans_this_process() {
        let me = std::process::id() as i32;
        let h = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(200)));
        let scan = ProcFs::default().threads(me).unwrap();
        assert!(scan.iter().any(|t| t.tid == me));
        assert!(scan.len() >= 2);
        h.join().unwrap();
    }
}
