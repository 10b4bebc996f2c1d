//! What `autopin attach` leaves on a process, so that the next autopin knows it.
//!
//! - **One autopin per process.** An attach holds an exclusive `flock` on
//!   `attach-PID-START.lock` in autopin's private per-user directory for as long as it is
//!   attached; a second attach to the same process refuses and names the first. The kernel
//!   drops the lock with its holder, so an autopin that was killed blocks nobody.
//! - **A pinning left in force is marked.** While a decision is in force, the process's mask
//!   from before autopin touched it is kept in `attach-PID-START.mask`. A pinning outlives
//!   autopin on purpose (`attach --duration`, or the guardian keeping a decision), and the
//!   next attach would otherwise read the one-CPU masks it left as all the process may use;
//!   with the mark it plans over the CPUs the process had, and says so.
//!
//! `START` is the process's start time (field 22 of /proc/PID/stat), so a reused PID is
//! another process. Marks of processes that are gone are removed by the next attach.

use autopin_topology::CpuSet;
use rustix::fs::{flock, FlockOperation};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Why a process cannot be attached to now.
#[derive(Debug)]
pub enum MarkError {
    /// Another autopin is attached (its PID when it wrote it).
    Held {
        pid: i32,
        by: Option<i32>,
    },
    Io(io::Error),
}

impl std::fmt::Display for MarkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MarkError::Held { pid, by: Some(by) } => write!(
                f,
                "autopin (PID {by}) is already attached to process {pid}; one autopin per process"
            ),
            MarkError::Held { pid, by: None } => write!(
                f,
                "another autopin is already attached to process {pid}; one autopin per process"
            ),
            MarkError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// The mask a process had before an earlier autopin left its pinning in force.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftPinning {
    pub original: CpuSet,
    /// The autopin that left it.
    pub by: Option<i32>,
}

/// Held while attached: the lock, and the mark of a pinning in force.
#[derive(Debug)]
pub struct AttachMark {
    pid: i32,
    proc_root: PathBuf,
    lock: File,
    lock_path: PathBuf,
    mask_path: PathBuf,
    /// The process's mask before autopin (kept in the mark while a decision is in force).
    original: Option<CpuSet>,
    marked: bool,
}

/// The process's start time, in clock ticks since boot.
pub fn start_time(proc_root: &Path, pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    super::proc_scan::parse_stat(&stat).map(|(_, start)| start)
}

/// Opens and locks `path`. A lock taken on a file that was removed meanwhile (by a guardian
/// cleaning up after a killed autopin, which removes only unheld locks) locks nothing anyone
/// else will see: then the path is opened again.
fn lock_file(path: &Path, pid: i32) -> Result<File, MarkError> {
    use std::os::unix::fs::MetadataExt;
    loop {
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(MarkError::Io)?;
        if flock(&lock, FlockOperation::NonBlockingLockExclusive).is_err() {
            let mut text = String::new();
            let _ = lock.read_to_string(&mut text);
            return Err(MarkError::Held {
                pid,
                by: text.trim().parse().ok(),
            });
        }
        let same = match (lock.metadata(), fs::metadata(path)) {
            (Ok(held), Ok(named)) => held.ino() == named.ino() && held.dev() == named.dev(),
            _ => false,
        };
        if same {
            return Ok(lock);
        }
    }
}

fn file_stem(pid: i32, start: u64) -> String {
    format!("attach-{pid}-{start}")
}

impl AttachMark {
    /// Takes the lock for process `pid` (started at `start`) in `dir`, or says who holds it.
    /// Also returns the pinning an earlier autopin left on the process, if one did.
    pub fn take(
        dir: &Path,
        proc_root: &Path,
        pid: i32,
        start: u64,
    ) -> Result<(AttachMark, Option<LeftPinning>), MarkError> {
        remove_marks_of_gone_processes(dir, proc_root);
        let stem = file_stem(pid, start);
        let lock_path = dir.join(format!("{stem}.lock"));
        let mut lock = lock_file(&lock_path, pid)?;
        let me = std::process::id();
        let _ = lock.set_len(0).and_then(|_| lock.rewind());
        let _ = writeln!(lock, "{me}");
        let mask_path = dir.join(format!("{stem}.mask"));
        let left = fs::read_to_string(&mask_path)
            .ok()
            .and_then(|t| parse_mask_file(&t));
        Ok((
            AttachMark {
                pid,
                proc_root: proc_root.to_path_buf(),
                lock,
                lock_path,
                mask_path,
                original: None,
                marked: left.is_some(),
            },
            left,
        ))
    }

    /// The lock file (a guardian removes it should this autopin die).
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// The mask the process had before autopin; kept in the mark once a decision is in force.
    pub fn set_original(&mut self, mask: CpuSet) {
        self.original = Some(mask);
    }

    /// A decision came into force (mark it: it outlives autopin), or none is (unmark).
    pub fn decision_in_force(&mut self, yes: bool) {
        match (yes, &self.original) {
            (true, Some(mask)) => {
                let text = format!("original {mask}\nby {}\n", std::process::id());
                let tmp = self.mask_path.with_extension("mask.tmp");
                if fs::write(&tmp, text)
                    .and_then(|_| fs::rename(&tmp, &self.mask_path))
                    .is_ok()
                {
                    self.marked = true;
                }
            }
            (false, _) if self.marked && fs::remove_file(&self.mask_path).is_ok() => {
                self.marked = false;
            }
            _ => {}
        }
    }
}

impl Drop for AttachMark {
    fn drop(&mut self) {
        // The lock file goes; the mark stays only while a pinning of autopin's is in force
        // (a decision to keep the OS's placement leaves every thread as it was).
        if self.marked
            && self
                .original
                .as_ref()
                .is_some_and(|o| !pinned_elsewhere(&self.proc_root, self.pid, o))
        {
            let _ = fs::remove_file(&self.mask_path);
        }
        let _ = fs::remove_file(&self.lock_path);
        let _ = flock(&self.lock, FlockOperation::Unlock);
    }
}

/// Some thread of `pid` has a mask other than `original` (a pinning is in force).
pub fn pinned_elsewhere(proc_root: &Path, pid: i32, original: &CpuSet) -> bool {
    super::ProcFs::at(proc_root)
        .threads(pid)
        .map(|ts| {
            ts.iter()
                .any(|t| autopin_topology::affinity::get(t.tid).is_ok_and(|m| &m != original))
        })
        .unwrap_or(false)
}

fn parse_mask_file(text: &str) -> Option<LeftPinning> {
    let mut original = None;
    let mut by = None;
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("original", list)) => original = CpuSet::parse_list(list.trim()).ok(),
            Some(("by", pid)) => by = pid.trim().parse().ok(),
            _ => {}
        }
    }
    Some(LeftPinning {
        original: original.filter(|m| !m.is_empty())?,
        by,
    })
}

/// Removes the marks and locks of processes that no longer exist (or whose PID now names
/// another process), unless another autopin holds them.
fn remove_marks_of_gone_processes(dir: &Path, proc_root: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("attach-") else {
            continue;
        };
        let stem = rest.split('.').next().unwrap_or("");
        let Some((pid, start)) = stem.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>()) else {
            continue;
        };
        if start_time(proc_root, pid) != Some(start) {
            let _ = fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> (i32, u64) {
        let pid = std::process::id() as i32;
        (
            pid,
            start_time(Path::new("/proc"), pid).expect("own start time"),
        )
    }

    #[test]
    fn a_second_attach_to_one_process_is_refused_and_names_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let (pid, start) = me();
        let (first, left) = AttachMark::take(dir.path(), Path::new("/proc"), pid, start).unwrap();
        assert_eq!(left, None);
        let err = AttachMark::take(dir.path(), Path::new("/proc"), pid, start).unwrap_err();
        let own = std::process::id() as i32;
        assert!(
            matches!(err, MarkError::Held { by: Some(b), .. } if b == own),
            "{err:?}"
        );
        assert!(err.to_string().contains("already attached"), "{err}");
        drop(first);
        // Released: the next attach goes ahead, and the lock file is gone with the first.
        let (again, _) = AttachMark::take(dir.path(), Path::new("/proc"), pid, start).unwrap();
        drop(again);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_pinning_left_in_force_is_known_to_the_next_attach() {
        let dir = tempfile::tempdir().unwrap();
        let (pid, start) = me();
        let (mut first, _) = AttachMark::take(dir.path(), Path::new("/proc"), pid, start).unwrap();
        // An original mask that differs from this process's threads' masks: as if a pinning
        // were in force, so the mark outlives the first autopin.
        first.set_original(CpuSet::parse_list("0-4095").unwrap());
        first.decision_in_force(true);
        drop(first);
        let (mut second, left) =
            AttachMark::take(dir.path(), Path::new("/proc"), pid, start).unwrap();
        let left = left.expect("the mark of the pinning left in force");
        assert_eq!(left.original, CpuSet::parse_list("0-4095").unwrap());
        assert_eq!(left.by, Some(std::process::id() as i32));
        // This one detaches without a decision in force: the mark goes.
        second.decision_in_force(false);
        drop(second);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_decision_that_pins_nothing_leaves_no_mark() {
        let dir = tempfile::tempdir().unwrap();
        let (pid, start) = me();
        let (mut first, _) = AttachMark::take(dir.path(), Path::new("/proc"), pid, start).unwrap();
        let own = autopin_topology::affinity::get(0).unwrap();
        first.set_original(own);
        first.decision_in_force(true);
        drop(first);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn marks_of_processes_that_are_gone_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (pid, start) = me();
        // A process with our PID but another start time: not this one, so gone.
        let stale = dir
            .path()
            .join(format!("{}.mask", file_stem(pid, start + 1)));
        fs::write(&stale, "original 0-1\nby 1\n").unwrap();
        let (_m, left) = AttachMark::take(dir.path(), Path::new("/proc"), pid, start).unwrap();
        assert_eq!(left, None);
        assert!(!stale.exists());
    }
}
