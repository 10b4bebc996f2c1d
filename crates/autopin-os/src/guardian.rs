//! The guardian: a small process (a fork of autopin, or this same executable started as
//! `autopin guard PID` where autopin runs more than one thread) that outlives autopin, so
//! that whatever ends autopin — SIGKILL, a crash, the OOM killer, a closed terminal — the
//! program keeps running as it was.
//!
//! autopin starts it before it makes any file of its own: `attach` right before it takes its
//! lock, and waits until it has read every thread's CPU mask, before autopin pins anything;
//! `run` before the launch (the program's PID is told once it exists), and, since the mask
//! the program starts with is given to it, looks for its word only after the launch: the
//! program does not wait for the guardian's start. The guardian is in a session of its own
//! from its first instruction (from before its `exec` where it is started again), so signals
//! for autopin's process group or the terminal's do not reach it even while it starts, and
//! it ignores INT, TERM, HUP, QUIT and PIPE. autopin then tells it, one line at a time on a
//! pipe that only the two of them hold (close-on-exec: the target never inherits it):
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
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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
    /// None once handed to [`reap_ended`].
    child: Option<GuardianProcess>,
    pipe: Option<File>,
    /// Where its "ready" is still to be read ([`Guardian::confirm`]).
    unconfirmed: Option<File>,
    decided: bool,
}

/// The guardian's process: a fork of autopin that serves at once (autopin has one thread),
/// or this executable started again as `autopin guard` (where a fork is not safe).
enum GuardianProcess {
    Forked(i32),
    Started(Child),
}

impl GuardianProcess {
    fn id(&self) -> u32 {
        match self {
            GuardianProcess::Forked(pid) => *pid as u32,
            GuardianProcess::Started(c) => c.id(),
        }
    }

    fn kill(&mut self) {
        match self {
            GuardianProcess::Forked(pid) => {
                // SAFETY: kill takes no pointers; the PID is this process's own child.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
                self.wait();
            }
            GuardianProcess::Started(c) => {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// Waits for it to end.
    fn wait(&mut self) {
        match self {
            GuardianProcess::Forked(pid) => {
                if let Some(p) = rustix::process::Pid::from_raw(*pid) {
                    while let Err(rustix::io::Errno::INTR) =
                        rustix::process::waitpid(Some(p), rustix::process::WaitOptions::empty())
                    {
                    }
                }
            }
            GuardianProcess::Started(c) => {
                let _ = c.wait();
            }
        }
    }

    /// Reaps it when it has ended.
    fn try_wait(&mut self) -> Option<()> {
        match self {
            GuardianProcess::Forked(pid) => {
                let p = rustix::process::Pid::from_raw(*pid)?;
                rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG)
                    .ok()
                    .flatten()
                    .map(|_| ())
            }
            GuardianProcess::Started(c) => c.try_wait().ok().flatten().map(|_| ()),
        }
    }
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
        let (child, pipe, unconfirmed) = if crate::process::single_threaded() {
            fork_serving(pid, mask)?
        } else {
            start_again(exe, pid, mask)?
        };
        // The keeper (under `run`) learns who guards the program: should the guardian be
        // gone when the engine dies, the keeper does its work itself.
        crate::keeper_channel::tell_guardian(child.id());
        let mut g = Guardian {
            pipe: Some(pipe),
            unconfirmed: Some(unconfirmed),
            child: Some(child),
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
            if let Some(c) = self.child.as_mut() {
                c.kill();
            }
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
    /// autopin ends in order: the guardian has nothing to do. It ends on the word; it is
    /// reaped by [`reap_ended`] at autopin's end, not waited for here (its exit then runs
    /// beside autopin's last work: the report, the store).
    fn drop(&mut self) {
        self.send("done");
        self.pipe = None;
        if let Some(mut child) = self.child.take() {
            if child.try_wait().is_none() {
                ENDING.lock().unwrap_or_else(|p| p.into_inner()).push(child);
            }
        }
    }
}

/// Guardians told `done` that had not ended yet.
static ENDING: std::sync::Mutex<Vec<GuardianProcess>> = std::sync::Mutex::new(Vec::new());

/// Waits for every guardian told `done` (each ends on the word): called as autopin ends,
/// so that none is left for others to reap (a container whose first process reaps nothing
/// would keep it as a zombie).
pub fn reap_ended() {
    let ending = std::mem::take(&mut *ENDING.lock().unwrap_or_else(|p| p.into_inner()));
    for mut g in ending {
        g.wait();
    }
}

/// Starts this executable again as `autopin guard PID [MASK]`, in a session of its own:
/// the guardian where autopin runs more than one thread (a fork would copy locks another
/// thread holds). Its standard input and output are the two pipes.
fn start_again(
    exe: &Path,
    pid: Option<i32>,
    mask: Option<&CpuSet>,
) -> io::Result<(GuardianProcess, File, File)> {
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
    let pipe = child
        .stdin
        .take()
        .map(|p| File::from(std::os::fd::OwnedFd::from(p)));
    let ready = child
        .stdout
        .take()
        .map(|p| File::from(std::os::fd::OwnedFd::from(p)));
    match (pipe, ready) {
        (Some(p), Some(r)) => Ok((GuardianProcess::Started(child), p, r)),
        _ => Err(io::Error::other("the guardian's pipes were not made")),
    }
}

/// Forks this process (which has one thread) into the guardian: its own session at once,
/// the pipe from autopin as its standard input and its "ready" pipe as its standard output,
/// no other descriptor of autopin's (the store, the keeper's socket) kept, and it serves
/// until autopin is done or gone, then exits without running anything of autopin's
/// (`_exit`: a buffer autopin had not written yet is not written twice). Unlike starting
/// the executable again, it does not load 80 MB of it and parse a command line beside the
/// program's own start, which shares the CPUs with that work on a small machine.
fn fork_serving(
    pid: Option<i32>,
    mask: Option<&CpuSet>,
) -> io::Result<(GuardianProcess, File, File)> {
    use rustix::pipe::{pipe_with, PipeFlags};
    let (from_autopin, to_guardian) = pipe_with(PipeFlags::CLOEXEC)?;
    let (from_guardian, to_autopin) = pipe_with(PipeFlags::CLOEXEC)?;
    // Its word that it has left autopin's session: until then a kill of autopin's process
    // group (`kill -9 -PGID`, a terminal's ^C) would take it along, so autopin makes no file
    // before it (as `spawn` returns only once an exec'd guardian's setsid has run).
    let (in_session, says_in_session) = pipe_with(PipeFlags::CLOEXEC)?;
    let mask = mask.cloned();
    // SAFETY: this process has one thread (checked by the caller), so no lock is held by
    // another thread in the child; glibc's fork runs its own handlers (malloc's locks).
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let _ = rustix::process::setsid();
            let _ = rustix::io::write(&says_in_session, b"s");
            crate::keeper_channel::forget_in_child();
            let code = (|| -> io::Result<i32> {
                use std::os::fd::AsRawFd;
                // SAFETY: dup2 and close take descriptor numbers only; the descriptors
                // replaced are standard input and output, which this child alone uses now.
                unsafe {
                    if libc::dup2(from_autopin.as_raw_fd(), 0) < 0
                        || libc::dup2(to_autopin.as_raw_fd(), 1) < 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                    close_from(3);
                }
                // Descriptors 0 and 1 are the pipes now (dup2 clears close-on-exec).
                // SAFETY: they are open and owned by nothing else in this process.
                let (input, ready) = unsafe {
                    use std::os::fd::FromRawFd;
                    (File::from_raw_fd(0), File::from_raw_fd(1))
                };
                default_signal_handlers();
                Ok(serve(pid, mask, input, ready))
            })()
            .unwrap_or(1);
            // SAFETY: ends this process at once, as a child of fork must.
            unsafe { libc::_exit(code) }
        }
        child => {
            drop(from_autopin);
            drop(to_autopin);
            drop(says_in_session);
            let mut word = [0u8; 1];
            let said = loop {
                match rustix::io::read(&in_session, &mut word) {
                    Err(rustix::io::Errno::INTR) => continue,
                    other => break other,
                }
            };
            if said != Ok(1) {
                let mut gone = GuardianProcess::Forked(child);
                gone.kill();
                return Err(io::Error::other("the guardian did not start"));
            }
            Ok((
                GuardianProcess::Forked(child),
                File::from(to_guardian),
                File::from(from_guardian),
            ))
        }
    }
}

/// Closes every descriptor from `first` on (close_range, else one by one up to the limit).
///
/// # Safety
/// Descriptors other code of this process still owns are closed under it: only for a
/// child of fork about to run code that owns none of them.
unsafe fn close_from(first: i32) {
    // SAFETY: the caller's promise; these calls take numbers only.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first as u32, u32::MAX, 0u32) == 0 {
            return;
        }
        let limit = libc::sysconf(libc::_SC_OPEN_MAX).clamp(1024, 1 << 16) as i32;
        for fd in first..limit {
            libc::close(fd);
        }
    }
}

/// The forked guardian takes the default action for every signal autopin handles (autopin's
/// handlers would act on autopin's state); `serve` then ignores those that end a terminal job.
fn default_signal_handlers() {
    for sig in 1..32 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: signal takes no pointers, and SIG_DFL is a valid disposition.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
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
    // Named for `ps`, `top` and tests: a forked guardian's command line is autopin's own.
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes, which this is.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"autopin-guard".as_ptr(), 0, 0, 0) };
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
