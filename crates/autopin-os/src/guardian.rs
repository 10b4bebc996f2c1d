//! The guardian: a small process (`autopin guard PID`, this same executable) that outlives
//! autopin, so that whatever ends autopin — SIGKILL, a crash, the OOM killer, a closed
//! terminal — the program keeps running as it was.
//!
//! autopin starts it before it makes any file of its own: `attach` right before it takes its
//! lock, and waits until it has read every thread's CPU mask, before autopin pins anything;
//! `run` before the launch (the program's PID is told once it exists), and, since the mask
//! the program starts with is given to it, looks for its word only after the launch: the
//! program does not wait for the guardian's start. The guardian is in a session of its own
//! from before its `exec` (signals for autopin's process group or the terminal's do not reach
//! it, even while it starts) and ignores INT, TERM, HUP, QUIT and PIPE. autopin then tells it, one line at a time on a pipe that
//! only the two of them hold (close-on-exec: the target never inherits it):
//!
//! - `pid PID`: the target, launched after the guardian started (`autopin guard 0 MASK`);
//!   its threads' masks are read then;
//! - `decided` / `searching`: whether a decided pinning is in force;
//! - `file PATH`: a file of autopin's to remove should autopin die (thread registry,
//!   heartbeat channel, the preload library's copy while it is written), told before the
//!   file is made; `dir PATH`: a directory of autopin's, removed once empty;
//!   `lock PATH`: a lock file of autopin's (attach's one-per-process lock), removed only
//!   while the guardian holds the lock itself, so a new autopin's lock is never taken away;
//! - `masks`: read the threads' masks again (what they get back) — after autopin undid a
//!   pinning an earlier autopin left in force;
//! - `done`: autopin ends in order (it restores or keeps what it should itself).
//!
//! The pipe closing without `done` means autopin died. While a search was running, every
//! thread of the target gets back the mask it had when the guardian started (a thread born
//! since then, the process's mask); with a decision in force, the decided pinning stays;
//! with no target told yet, there is nothing to restore.
//! Then autopin's files are removed. The pipe's end is seen at once, so this happens within
//! milliseconds of autopin's death.

use autopin_topology::CpuSet;
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The hidden subcommand that runs [`serve`].
pub const SUBCOMMAND: &str = "guard";

/// What the guardian removes should autopin die: see the module's documentation.
#[derive(Debug, Default, Clone, Copy)]
pub struct Leftovers<'a> {
    pub files: &'a [&'a Path],
    pub dirs: &'a [&'a Path],
    pub locks: &'a [&'a Path],
}

/// autopin's side: the running guardian and the pipe to it.
pub struct Guardian {
    child: Child,
    pipe: Option<ChildStdin>,
    /// Where its "ready" is still to be read ([`Guardian::confirm`]).
    unconfirmed: Option<ChildStdout>,
    decided: bool,
}

impl Guardian {
    /// Starts the guardian of `pid` (None: a program not launched yet, told with
    /// [`Guardian::target`] once it is); `mask`: what its threads had before autopin touched
    /// them, when autopin knows it better than the threads' masks now (a launched program
    /// whose preload library pins at birth). Returns once the guardian holds the masks; with
    /// no target yet and its mask given, at once ([`Guardian::confirm`] then checks that it
    /// started: nothing of the target's is read before the target exists, and what autopin
    /// tells it meanwhile waits in the pipe).
    /// `exe`: the autopin executable (its hidden `guard` subcommand runs [`serve`]).
    pub fn start(
        exe: &Path,
        pid: Option<i32>,
        mask: Option<&CpuSet>,
        leftovers: Leftovers,
    ) -> io::Result<Guardian> {
        let mut cmd = Command::new(exe);
        cmd.arg(SUBCOMMAND).arg(pid.unwrap_or(0).to_string());
        if let Some(m) = mask {
            cmd.arg(m.to_string());
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // Its own session before exec: a kill of autopin's process group while the guardian
        // is still starting (`kill -9 -PGID`, a terminal's ^C) cannot take it along.
        // SAFETY: the closure makes one system call (setsid), async-signal-safe, and touches
        // no memory.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                let _ = rustix::process::setsid();
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        // The keeper (under `run`) learns who guards the program: should the guardian be
        // gone when the engine dies, the keeper does its work itself.
        crate::keeper_channel::tell_guardian(child.id());
        let mut g = Guardian {
            pipe: child.stdin.take(),
            unconfirmed: child.stdout.take(),
            child,
            decided: false,
        };
        if pid.is_some() || mask.is_none() {
            g.confirm()?;
        }
        for (kind, paths) in [
            ("file", leftovers.files),
            ("dir", leftovers.dirs),
            ("lock", leftovers.locks),
        ] {
            for p in paths {
                g.send(&format!("{kind} {}", p.display()));
            }
        }
        Ok(g)
    }

    /// Waits for the guardian's word that it holds the masks (once; at once if it was
    /// already read). An error, with the guardian ended, when it did not start.
    pub fn confirm(&mut self) -> io::Result<()> {
        let Some(out) = self.unconfirmed.take() else {
            return Ok(());
        };
        let mut ready = String::new();
        let _ = BufReader::new(out).read_line(&mut ready);
        if ready.trim() != "ready" {
            self.pipe = None;
            let _ = self.child.kill();
            return Err(io::Error::other("the guardian did not start"));
        }
        Ok(())
    }

    /// Says whether a decided pinning is in force (sent only when it changes).
    pub fn decided(&mut self, yes: bool) {
        if yes != self.decided {
            self.decided = yes;
            self.send(if yes { "decided" } else { "searching" });
        }
    }

    /// The program launched after the guardian started (see [`Guardian::start`]).
    pub fn target(&mut self, pid: i32) {
        self.send(&format!("pid {pid}"));
    }

    /// What the launched program writes before exec to tell the guardian its PID itself
    /// (`pid PID`), so that it is known even if autopin dies before `spawn` returns.
    pub fn pid_note(&self) -> Option<autopin_launch::PidNote> {
        use std::os::fd::AsRawFd;
        self.pipe.as_ref().map(|p| autopin_launch::PidNote {
            fd: p.as_raw_fd(),
            prefix: b"pid ".to_vec(),
            suffix: b"\n".to_vec(),
        })
    }

    /// A file of autopin's, told before it is made (removing one that was never made, or
    /// is gone, costs nothing).
    pub fn file(&mut self, path: &Path) {
        self.send(&format!("file {}", path.display()));
        crate::keeper_channel::tell_file(path);
    }

    /// A directory of autopin's, told before it is made; removed once empty.
    pub fn dir(&mut self, path: &Path) {
        self.send(&format!("dir {}", path.display()));
        crate::keeper_channel::tell_dir(path);
    }

    /// A lock file of autopin's, taken after the guardian started.
    pub fn lock(&mut self, path: &Path) {
        self.send(&format!("lock {}", path.display()));
    }

    /// The threads' masks changed before any pinning (a leftover pinning undone): they are
    /// what the threads get back.
    pub fn masks_again(&mut self) {
        self.send("masks");
    }

    fn send(&mut self, line: &str) {
        if let Some(p) = self.pipe.as_mut() {
            if p.write_all(format!("{line}\n").as_bytes()).is_err() {
                self.pipe = None;
            }
        }
    }
}

impl Drop for Guardian {
    /// autopin ends in order: the guardian has nothing to do. Its exit is not waited for
    /// (it ends on the word, and a millisecond of autopin's end went on waiting): a guardian
    /// not yet ended is reaped by whoever adopts it once autopin is gone.
    fn drop(&mut self) {
        self.send("done");
        self.pipe = None;
        let _ = self.child.try_wait();
    }
}

/// The guardian's side (`autopin guard PID [MASK]`): see the module's documentation.
/// `pid`: None until autopin says `pid PID` (a program launched after the guardian started).
/// `input`: the pipe from autopin; `ready`: where to say that the masks are held.
pub fn serve(
    mut pid: Option<i32>,
    mask: Option<CpuSet>,
    input: impl io::Read,
    mut ready: impl Write,
) -> i32 {
    detach_from_autopin();
    let proc = crate::process::ProcFs::default();
    let threads = |pid: Option<i32>| -> Vec<i32> {
        pid.and_then(|p| proc.threads(p).ok())
            .map(|ts| ts.iter().map(|t| t.tid).collect())
            .unwrap_or_default()
    };
    let read_masks = |pid: Option<i32>| {
        let mut original: HashMap<i32, CpuSet> = HashMap::new();
        for tid in threads(pid) {
            if let Ok(m) = autopin_topology::affinity::get(tid) {
                original.insert(tid, mask.clone().unwrap_or(m));
            }
        }
        let process_mask = mask
            .clone()
            .or_else(|| pid.and_then(|p| autopin_topology::affinity::get(p).ok()));
        (original, process_mask)
    };
    let (mut original, mut process_mask) = read_masks(pid);
    // No one may be left to read it (autopin died while this process started, before it
    // looked for the word): what autopin told meanwhile is still in the pipe, and is done.
    let _ = writeln!(ready, "ready").and_then(|_| ready.flush());
    drop(ready);
    let mut decided = false;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut locks: Vec<PathBuf> = Vec::new();
    for line in BufReader::new(input).lines() {
        let Ok(line) = line else { break };
        match line.as_str() {
            "done" => return 0,
            "decided" => decided = true,
            "searching" => decided = false,
            "masks" => (original, process_mask) = read_masks(pid),
            l => {
                if let Some(p) = l.strip_prefix("file ") {
                    files.push(PathBuf::from(p));
                } else if let Some(p) = l.strip_prefix("dir ") {
                    dirs.push(PathBuf::from(p));
                } else if let Some(p) = l.strip_prefix("lock ") {
                    locks.push(PathBuf::from(p));
                } else if let Some(p) = l.strip_prefix("pid ") {
                    // Never 0 or less: to the system calls that means this process, or many.
                    if let Some(p) = p.trim().parse::<i32>().ok().filter(|p| *p > 0) {
                        pid = Some(p);
                        (original, process_mask) = read_masks(pid);
                    }
                }
            }
        }
    }
    // autopin is gone without a word. Its files go first: the thread registry's unlinking
    // tells the preload library to pin no thread born from now on (see its
    // `autopin_gone`).
    for f in files {
        let _ = std::fs::remove_file(f);
    }
    if !decided {
        // Twice: a thread that was being born while its masks were given back may take its
        // probe CPU a moment after the first pass.
        for pass in 0..2 {
            if pass > 0 {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            for tid in threads(pid) {
                if let Some(m) = original.get(&tid).or(process_mask.as_ref()) {
                    let _ = autopin_topology::affinity::set(tid, m);
                }
            }
        }
    }
    for l in locks {
        remove_unheld_lock(&l);
    }
    for d in dirs {
        let _ = std::fs::remove_dir(d);
    }
    0
}

/// Gives every thread of `pid` the CPUs `mask` (twice: a thread being born during the first
/// pass may take its probe CPU a moment later); how many threads there were, and the
/// errors of those that could not be given them.
pub(crate) fn give_back(pid: i32, mask: &CpuSet) -> (usize, Vec<String>) {
    let proc = crate::process::ProcFs::default();
    let mut failed = HashMap::new();
    let mut seen = 0;
    for pass in 0..2 {
        if pass > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let tids: Vec<i32> = proc
            .threads(pid)
            .map(|ts| ts.iter().map(|t| t.tid).collect())
            .unwrap_or_default();
        seen = seen.max(tids.len());
        for tid in tids {
            match autopin_topology::affinity::set(tid, mask) {
                Ok(()) => {
                    failed.remove(&tid);
                }
                Err(e) => {
                    failed.insert(tid, format!("thread {tid}: {e}"));
                }
            }
        }
    }
    (seen, failed.into_values().collect())
}

/// Removes lock file `path` if nobody holds its lock: taken here first, so an autopin that
/// locked it in the meantime keeps it (and one that opened it but locks it later sees it was
/// removed: [`crate::process::attach_mark`] checks that the path still names its file).
/// A dying process closes its files one by one, so the pipe's end may be seen before the
/// dead autopin's lock is released: a few tries over 200 ms.
fn remove_unheld_lock(path: &Path) {
    use rustix::fs::{flock, FlockOperation};
    let Ok(file) = std::fs::OpenOptions::new().read(true).open(path) else {
        return;
    };
    for _ in 0..20 {
        if flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = std::fs::remove_file(path);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Leaves autopin's session and process group, and ignores the signals that end a terminal
/// job: only the pipe's end may end the guardian's watch.
fn detach_from_autopin() {
    let _ = rustix::process::setsid();
    // SAFETY: signal takes no pointers, and SIG_IGN is a valid disposition for each of
    // these signals (no handler runs).
    unsafe {
        for s in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::signal(s, libc::SIG_IGN);
        }
    }
}
