//! What `autopin top` reads at each refresh, from /proc only: every CPU's time counters
//! (/proc/stat), every process (its `stat` and owner) and every thread of it (`stat` for its
//! state and CPU, `schedstat` for its time on and waiting for a CPU, its mask by
//! `sched_getaffinity`, migrations from `sched` where the kernel has it), and the pages per
//! NUMA node of the processes asked for (`numa_maps`). Nothing is changed.
//!
//! What keeps a refresh cheap on a node of many threads (docs/top.md has the costs):
//! - a process none of whose threads ran since the last read (its CPU time, from its own
//!   `stat`, the same; no thread was runnable; as many threads) keeps the threads of that
//!   read: one file read instead of two a thread;
//! - in a process read again, a thread whose `schedstat` did not move (and that was not
//!   runnable) keeps what was read of it, but for its mask;
//! - migrations are read only for threads that ran at least `rules::WORKING` of a CPU since
//!   their last read, and when a thread is first seen;
//! - `numa_maps`, which walks a process's page tables, only for the processes asked for,
//!   and at most every [`PAGES_EVERY`] seconds each.
//!
//! Every [`REREAD`] seconds a process is read in full all the same: a thread that became
//! runnable and never ran since moved no counter.

use crate::process::proc_scan::split_stat;
use autopin_top::{CpuTicks, Look, Pages, ProcessLook, ThreadLook};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A process (and each of its threads) is read in full at least this often (seconds).
pub const REREAD: f64 = 15.0;
/// A process's pages are read again after this long (seconds).
pub const PAGES_EVERY: f64 = 5.0;

/// What a process looked like at its last full read.
struct Kept {
    cpu_ticks: u64,
    threads: u64,
    /// When its threads were last all read in full.
    full_at: f64,
    runnable: bool,
    look: ProcessLook,
}

/// The reader, with what it keeps between looks.
pub struct TopSource {
    proc: PathBuf,
    start: Instant,
    users: HashMap<u32, String>,
    kept: HashMap<i32, Kept>,
    pages: HashMap<i32, Pages>,
    buf: String,
}

/// What the caller wants read beyond every process and thread.
#[derive(Debug, Clone, Default)]
pub struct Want {
    /// Processes whose pages per NUMA node to read.
    pub pages: Vec<i32>,
}

impl Default for TopSource {
    fn default() -> Self {
        TopSource::new(Path::new("/proc"))
    }
}

/// /etc/passwd's names by uid.
fn users() -> HashMap<u32, String> {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let uid = f.nth(1)?.parse().ok()?;
            Some((uid, name.to_string()))
        })
        .collect()
}

/// The uid of a user's name (or a number); None when there is no such user.
pub fn uid_of(user: &str) -> Option<u32> {
    if let Ok(n) = user.parse() {
        return Some(n);
    }
    users()
        .into_iter()
        .find(|(_, name)| name == user)
        .map(|(uid, _)| uid)
}

/// Reads `path` into `buf` (emptied first).
fn read(path: &Path, buf: &mut String) -> std::io::Result<()> {
    buf.clear();
    std::fs::File::open(path)?.read_to_string(buf)?;
    Ok(())
}

/// /proc/stat's `cpuN` lines.
fn cpu_ticks(text: &str) -> BTreeMap<u32, CpuTicks> {
    text.lines()
        .filter_map(|l| {
            // `cpu ` is the machine's sum; `cpuN` a CPU.
            let rest = l
                .strip_prefix("cpu")
                .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))?;
            let mut w = rest.split_ascii_whitespace();
            let cpu: u32 = w.next()?.parse().ok()?;
            let v: Vec<u64> = w.map(|x| x.parse().unwrap_or(0)).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            Some((
                cpu,
                CpuTicks {
                    user: at(0) + at(1),
                    system: at(2) + at(5) + at(6),
                    idle: at(3) + at(4),
                    steal: at(7),
                },
            ))
        })
        .collect()
}

/// Why numa_maps could not be read, in words.
fn unreadable(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            "permission denied (another user's process: run as that user or root)".into()
        }
        std::io::ErrorKind::NotFound => {
            "no /proc/PID/numa_maps (a kernel without NUMA support, or the process ended)".into()
        }
        _ => e.to_string(),
    }
}

impl TopSource {
    /// A reader of the /proc below `proc` (`/proc` on a live machine).
    pub fn new(proc: &Path) -> Self {
        TopSource {
            proc: proc.to_path_buf(),
            start: Instant::now(),
            users: users(),
            kept: HashMap::new(),
            pages: HashMap::new(),
            buf: String::new(),
        }
    }

    fn user(&self, uid: u32) -> String {
        self.users
            .get(&uid)
            .cloned()
            .unwrap_or_else(|| uid.to_string())
    }

    /// One look at the whole machine.
    pub fn look(&mut self, want: &Want) -> Look {
        let t = self.start.elapsed().as_secs_f64();
        let mut buf = std::mem::take(&mut self.buf);
        let cpus = match read(&self.proc.join("stat"), &mut buf) {
            Ok(()) => cpu_ticks(&buf),
            Err(_) => BTreeMap::new(),
        };
        let mut pids: Vec<i32> = std::fs::read_dir(&self.proc)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        pids.sort_unstable();
        let mut processes = Vec::with_capacity(pids.len());
        let mut kept = HashMap::with_capacity(pids.len());
        for pid in pids {
            if let Some((p, k)) = self.process(pid, t, &mut buf) {
                processes.push(p);
                kept.insert(pid, k);
            }
        }
        self.kept = kept;
        self.pages.retain(|pid, _| self.kept.contains_key(pid));
        for p in &mut processes {
            if want.pages.contains(&p.pid) {
                p.pages = self.pages_of(p.pid, p.kernel, t, &mut buf);
            } else if let Some(old) = self.pages.get(&p.pid) {
                p.pages = old.clone();
            }
        }
        self.buf = buf;
        Look { t, cpus, processes }
    }

    fn pages_of(&mut self, pid: i32, kernel: bool, t: f64, buf: &mut String) -> Pages {
        if let Some(Pages::Read { at, .. }) = self.pages.get(&pid) {
            if t - at < PAGES_EVERY {
                return self.pages[&pid].clone();
            }
        }
        let pages = if kernel {
            Pages::Read {
                at: t,
                nodes: Vec::new(),
            }
        } else {
            match read(&self.proc.join(format!("{pid}/numa_maps")), buf) {
                Ok(()) => Pages::Read {
                    at: t,
                    nodes: crate::stat_source::parse_numa_maps(buf),
                },
                Err(e) => Pages::Unreadable(unreadable(&e)),
            }
        };
        self.pages.insert(pid, pages.clone());
        pages
    }

    /// One process: its own `stat`, then its threads unless nothing of it changed.
    fn process(&mut self, pid: i32, t: f64, buf: &mut String) -> Option<(ProcessLook, Kept)> {
        let dir = self.proc.join(pid.to_string());
        read(&dir.join("stat"), buf).ok()?;
        let (name, f) = split_stat(buf)?;
        let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        // Fields after the name: flags 6 (field 9), utime 11, stime 12, num_threads 17.
        let kernel = field(6) & 0x0020_0000 != 0;
        let cpu_ticks = field(11) + field(12);
        let threads = field(17);
        // A process that has ended and waits for its parent to reap it (a zombie) is gone.
        if f.first().is_some_and(|s| matches!(*s, "Z" | "X")) && threads <= 1 {
            return None;
        }
        let name = name.to_string();
        let uid = std::fs::metadata(&dir).ok()?.uid();
        if let Some(k) = self.kept.remove(&pid) {
            let unchanged = k.cpu_ticks == cpu_ticks && k.threads == threads && !k.runnable;
            if unchanged && t - k.look.threads_at < REREAD {
                let mut look = k.look.clone();
                look.name = name;
                return Some((look, k));
            }
            // Read again, with what it was for migrations' sake.
            self.kept.insert(pid, k);
        }
        let (old, since, full_at) = match self.kept.get(&pid) {
            Some(k) => (
                k.look.threads.iter().map(|t| (t.tid, t)).collect(),
                t - k.look.threads_at,
                k.full_at,
            ),
            None => (HashMap::new(), 0.0, t),
        };
        // Every thread read in full now and then, whatever its counters say.
        let full = t - full_at >= REREAD;
        let full_at = if full { t } else { full_at };
        let mut tids: Vec<i32> = std::fs::read_dir(dir.join("task"))
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        let mut list = Vec::with_capacity(tids.len());
        for tid in tids {
            // A thread that has ended (a zombie, or one being reaped) runs nowhere.
            let before = old.get(&tid).map(|thread| Before {
                thread,
                seconds: since,
            });
            if let Some(th) = thread(
                &dir.join("task").join(tid.to_string()),
                tid,
                before,
                full,
                buf,
            ) {
                if !matches!(th.state, 'Z' | 'X' | 'x') {
                    list.push(th);
                }
            }
        }
        drop(old);
        self.kept.remove(&pid);
        if list.is_empty() {
            return None;
        }
        let look = ProcessLook {
            pid,
            name,
            uid,
            user: self.user(uid),
            kernel,
            threads: list.into(),
            threads_at: t,
            pages: Pages::NotRead,
        };
        let k = Kept {
            cpu_ticks,
            threads,
            full_at,
            runnable: look.threads.iter().any(|t| matches!(t.state, 'R' | 'D')),
            look: look.clone(),
        };
        Some((look, k))
    }
}

/// What the last read of a thread saw, and how long ago (seconds), for [`thread`].
struct Before<'a> {
    thread: &'a ThreadLook,
    seconds: f64,
}

/// One thread from its directory. Its `schedstat` first: a thread that neither ran nor
/// waited since `before` (and was not runnable then) is as it was, but for its mask; else
/// its `stat` (state, CPU, name). Its migrations (`sched`, the longest file) are read when
/// it is first seen and when it ran at least `rules::WORKING` of a CPU since; otherwise
/// they are not known (None). `full`: read everything all the same.
fn thread(
    dir: &Path,
    tid: i32,
    before: Option<Before<'_>>,
    full: bool,
    buf: &mut String,
) -> Option<ThreadLook> {
    read(&dir.join("schedstat"), buf).ok()?;
    let mut w = buf
        .split_ascii_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0));
    let (cpu_ns, wait_ns) = (w.next().unwrap_or(0), w.next().unwrap_or(0));
    let allowed = autopin_topology::affinity::get(tid).unwrap_or_default();
    if let Some(b) = &before {
        let o = b.thread;
        let still = o.cpu_ns == cpu_ns && o.wait_ns == wait_ns && !matches!(o.state, 'R' | 'D');
        if still && !full {
            return Some(ThreadLook {
                allowed,
                migrations: None,
                ..o.clone()
            });
        }
    }
    read(&dir.join("stat"), buf).ok()?;
    let (name, f) = split_stat(buf)?;
    let name = name.to_string();
    let state = f.first()?.chars().next()?;
    // `processor` is field 39, the 37th after the name.
    let cpu = f.get(36)?.parse().ok()?;
    let working = before.as_ref().is_none_or(|b| {
        cpu_ns.saturating_sub(b.thread.cpu_ns) as f64 * 1e-9
            >= autopin_stat::rules::WORKING * b.seconds
    });
    let migrations = if working {
        read(&dir.join("sched"), buf).ok().and_then(|()| {
            buf.lines()
                .find(|l| l.starts_with("se.nr_migrations"))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.trim().parse().ok())
        })
    } else {
        None
    };
    Some(ThreadLook {
        tid,
        name,
        state,
        cpu,
        cpu_ns,
        wait_ns,
        migrations,
        allowed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_become_ticks_per_cpu() {
        let text = "cpu  10 0 5 100 1 0 0 0 0 0\ncpu0 4 1 2 50 1 1 1 3 0 0\ncpu1 6 0 3 50 0 0 0 0 0 0\nintr 1 2\n";
        let t = cpu_ticks(text);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[&0],
            CpuTicks {
                user: 5,
                system: 4,
                idle: 51,
                steal: 3
            }
        );
    }

    #[test]
    fn recorded_numa_maps_of_a_program_whose_memory_is_on_node_1() {
        // From the 2-node QEMU guest (tests/data/numa_maps/README.md): 64 MiB first touched
        // on node 1, the program's text and stack there too.
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/data/numa_maps/firsttouch-node1.txt"),
        )
        .unwrap();
        let nodes = crate::stat_source::parse_numa_maps(&text);
        assert_eq!(nodes, vec![(1, 1 + 159 + 30 + 4 + 3 + 3 + 3 + 16_523 + 4)]);
        let pages = Pages::Read { at: 0.0, nodes };
        assert_eq!(autopin_top::table::pages_cell(&pages), "1:65M");
    }

    #[test]
    fn this_process_and_its_threads_are_seen_and_an_idle_one_is_not_read_again() {
        let mut src = TopSource::default();
        let me = std::process::id() as i32;
        let look = src.look(&Want { pages: vec![me] });
        let p = look
            .processes
            .iter()
            .find(|p| p.pid == me)
            .expect("this process");
        assert!(p.threads.iter().any(|t| t.tid == me && t.cpu_ns > 0));
        assert!(p.threads.iter().all(|t| !t.allowed.is_empty()));
        assert!(
            matches!(&p.pages, Pages::Read { nodes, .. } if !nodes.is_empty()),
            "{:?}",
            p.pages
        );
        assert!(!look.cpus.is_empty());
        assert!(look.processes.iter().any(|p| p.pid == 1), "init");
        // A sleeping process with nothing changed keeps its threads of the last read.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        std::thread::sleep(std::time::Duration::from_millis(200));
        let first = src.look(&Want::default());
        std::thread::sleep(std::time::Duration::from_millis(100));
        let second = src.look(&Want::default());
        let at = |l: &Look| {
            l.processes
                .iter()
                .find(|p| p.pid == pid)
                .map(|p| p.threads_at)
        };
        assert!(at(&first).is_some());
        assert_eq!(at(&first), at(&second), "kept, not read again");
        child.kill().unwrap();
        child.wait().unwrap();
        let third = src.look(&Want::default());
        assert_eq!(at(&third), None, "gone");
    }
}
