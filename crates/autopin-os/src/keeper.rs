//! The keeper: the process the user's shell waits for under `autopin run`, so that the
//! program's exit status reaches that shell even when autopin itself is killed.
//!
//! `autopin run` starts as the keeper. It makes itself a child subreaper and forks the
//! *engine* (or, in a process with other threads, starts the same executable with the same
//! arguments as it), which launches and optimizes the program as before; the program is the
//! engine's child and the keeper's grandchild. The engine tells the keeper, on a datagram
//! socket with an abstract name (no file, nothing inherited by the program), the program's
//! PID once launched and its exit code once reaped;
//! the program tells its PID itself too, between fork and exec, for an engine killed inside
//! `spawn` (the keeper waits up to 2 s for that word while a child of its own may be it).
//!
//! - The engine ends in order: the keeper exits with the engine's code (which is the
//!   program's status, passed through as ever).
//! - The engine dies (SIGKILL, a crash, the OOM killer): the guardian gives the threads their
//!   CPUs back (see [`crate::guardian`]); the program, orphaned, becomes the keeper's child
//!   (it is the nearest subreaper), and the keeper waits for it, forwards signals to it, and
//!   exits with its status (128+N for a signal N), or with the code the engine had already
//!   reaped. The engine also tells the keeper the guardian's PID, the mask the program
//!   started with, its temporary files and whether a decision is in force: a guardian that
//!   is gone too (killed first) leaves that work to the keeper, which does it and says so,
//!   or says that it could not.
//! - The keeper dies: the engine gets SIGKILL (its parent-death signal), and the guardian
//!   restores the program as above; the shell sees the signal that killed what it waited for.
//!
//! Signals sent to the keeper with kill(2) go to the engine while it lives (it forwards them
//! to the program), then to the program; signals from the terminal reach the whole process
//! group already and are not forwarded twice. `AUTOPIN_KEEPER=off` runs `autopin run` as one
//! process, without a keeper.

use autopin_launch::signals::Forwarding;
use rustix::process::{Pid, WaitOptions};
use std::io::{self, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::process::Command;

/// Set in the engine's environment: `PID:PARENT:NAME`, the keeper's PID, the keeper's own
/// parent and its socket's abstract name (or `off` by the user: no keeper). The engine
/// removes it from its own environment.
pub const ENV_VAR: &str = "AUTOPIN_KEEPER";

/// The keeper's parent (what started `autopin run`), in the engine.
static LAUNCH_PARENT: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// In the engine: the process that started `autopin run` (the keeper's parent), which an MPI
/// launcher's ranks on one node share. None outside an engine.
pub fn launch_parent() -> Option<u32> {
    LAUNCH_PARENT.get().copied()
}

/// What the engine has told the keeper.
#[derive(Debug, Default, PartialEq)]
struct Heard {
    program: Option<i32>,
    exit_code: Option<i32>,
    /// The guardian's PID.
    guardian: Option<i32>,
    /// The CPU list the program started with (what its threads get back).
    mask: Option<String>,
    /// A decided pinning is in force (it stays, as the guardian would leave it).
    decided: bool,
    /// autopin's temporary files and directories (what the guardian would remove).
    files: Vec<std::path::PathBuf>,
    dirs: Vec<std::path::PathBuf>,
}

impl Heard {
    fn take(&mut self, msg: &str) {
        let (word, rest) = msg.split_once(' ').unwrap_or((msg, ""));
        let value = || rest.trim().parse::<i32>().ok();
        match word {
            "program" => self.program = value().filter(|p| *p > 0),
            "exit" => self.exit_code = value(),
            "guardian" => self.guardian = value().filter(|p| *p > 0),
            "mask" if !rest.trim().is_empty() => self.mask = Some(rest.trim().to_string()),
            "decided" => self.decided = true,
            "searching" => self.decided = false,
            "file" if !rest.is_empty() => self.files.push(rest.into()),
            "dir" if !rest.is_empty() => self.dirs.push(rest.into()),
            _ => {}
        }
    }
}

/// Whether this process is the engine under a keeper, the keeper is turned off, or neither
/// (this process should become the keeper).
pub enum Role {
    Keeper,
    Engine,
    /// `AUTOPIN_KEEPER=off`: one process.
    Alone,
    /// A value no keeper of this process set (left in the user's environment): one process,
    /// and the caller says the value was ignored.
    Foreign(String),
}

/// Which role this `autopin run` process has, from [`ENV_VAR`]. The engine connects to its
/// keeper here, arms its parent-death signal and removes the variable from its environment,
/// so the program it launches does not inherit it.
pub fn role() -> Role {
    let Some(v) = std::env::var_os(ENV_VAR) else {
        return Role::Keeper;
    };
    std::env::remove_var(ENV_VAR);
    let v = v.to_string_lossy().into_owned();
    if v == "off" {
        return Role::Alone;
    }
    let mut parts = v.splitn(3, ':');
    let (Some(pid), Some(parent), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Role::Foreign(v);
    };
    let Some(keeper) = pid.parse::<i32>().ok().filter(|k| *k > 0) else {
        return Role::Foreign(v);
    };
    if parent_now() != Some(keeper) {
        // Not the parent: a value left in the user's environment. (A keeper that died in
        // the moment between starting the engine and this look is taken for one too: the
        // engine then runs on as one process, as autopin did before it had a keeper.)
        return Role::Foreign(v);
    }
    become_engine(keeper, parent.parse().ok(), name);
    Role::Engine
}

/// This process's parent now (None: its parent is outside its PID namespace).
fn parent_now() -> Option<i32> {
    rustix::process::getppid()
        .map(Pid::as_raw_nonzero)
        .map(|p| p.get())
}

/// The engine's side of the keeper: dies with `keeper` (its parent a moment ago), knows
/// `launch_parent`, and speaks to the keeper's socket `name`.
fn become_engine(keeper: i32, launch_parent: Option<u32>, name: &str) {
    // The keeper was the parent a moment ago; should it die before the signal is armed,
    // end as if the signal had come.
    if rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL)).is_ok()
        && parent_now() != Some(keeper)
    {
        std::process::exit(128 + libc::SIGKILL);
    }
    if let Some(p) = launch_parent {
        let _ = LAUNCH_PARENT.set(p);
    }
    crate::keeper_channel::connect(name);
}

/// A name no other keeper has: this PID and the clock's nanoseconds.
fn socket_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("autopin-keeper-{}-{nanos:x}", std::process::id())
}

/// What [`keep`] made of this process.
#[derive(Debug, PartialEq)]
pub enum Kept {
    /// The keeper, done: end with this exit code.
    Exit(i32),
    /// The engine, forked by the keeper: go on and run the program.
    Engine,
}

/// Keeper: starts the engine and waits; returns the exit code to end with. Errors only
/// when the engine could not be started (it never ran); the caller then runs as one
/// process.
///
/// The engine is this process forked, which returns [`Kept::Engine`] and goes on with the
/// arguments already parsed: a second start of this executable (loading it, parsing the
/// command line again) cost 1.3 ms of every run. A process with other threads cannot be
/// forked safely (a lock one of them holds stays held in the child): it starts the
/// executable `exe` again with these `args`, the engine then finding its keeper in
/// [`ENV_VAR`].
pub fn keep(exe: &std::path::Path, args: &[std::ffi::OsString]) -> io::Result<Kept> {
    let name = socket_name();
    let sock = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)?;
    sock.set_nonblocking(true)?;
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    let keeper = std::process::id();
    let launch_parent = std::os::unix::process::parent_id();
    let (engine, forwarding) = if crate::process::single_threaded() {
        // The forwarded signals wait until each side has its handlers: the engine starts
        // with the ones it had, the keeper forwards what came meanwhile to the engine.
        let held = HeldSignals::hold();
        let forwarding = Forwarding::begin()?;
        // SAFETY: this process has one thread, so nothing is locked by another one in the
        // child; glibc's fork runs its own handlers (malloc's locks).
        match unsafe { libc::fork() } {
            -1 => return Err(io::Error::last_os_error()),
            0 => {
                drop(forwarding);
                drop(sock);
                drop(held);
                become_engine(keeper as i32, Some(launch_parent), &name);
                return Ok(Kept::Engine);
            }
            pid => {
                forwarding.set_child(pid);
                drop(held);
                (pid, forwarding)
            }
        }
    } else {
        let forwarding = Forwarding::begin()?;
        let child = Command::new(exe)
            .args(args)
            .env(ENV_VAR, format!("{keeper}:{launch_parent}:{name}"))
            .spawn()?;
        let pid = child.id() as i32;
        forwarding.set_child(pid);
        // Waited for by its PID below, as a forked engine is (dropping a child neither
        // waits for it nor ends it).
        drop(child);
        (pid, forwarding)
    };
    let mut heard = Heard::default();
    let mut buf = vec![0u8; 64 << 10];
    let mut drain = |heard: &mut Heard| {
        while let Ok(n) = sock.recv(&mut buf) {
            heard.take(&String::from_utf8_lossy(&buf[..n]));
        }
    };
    // What the engine says is read while it runs (so its messages never fill the socket,
    // which would block the engine), until it ends.
    let engine_fd = Pid::from_raw(engine)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    if let Some(fd) = &engine_fd {
        use rustix::event::{poll, PollFd, PollFlags};
        loop {
            let mut fds = [
                PollFd::new(fd, PollFlags::IN),
                PollFd::new(&sock, PollFlags::IN),
            ];
            let ended = match poll(&mut fds, None) {
                Ok(_) => fds[0].revents().contains(PollFlags::IN),
                Err(rustix::io::Errno::INTR) => false,
                Err(_) => true,
            };
            drain(&mut heard);
            if ended {
                break;
            }
        }
    }
    let status = loop {
        match rustix::process::waitpid(Pid::from_raw(engine), WaitOptions::empty()) {
            Ok(Some((_, st))) => break st,
            Ok(None) | Err(rustix::io::Errno::INTR) => continue,
            // The engine runs and cannot be waited for: never start a second one.
            Err(e) => {
                let _ = writeln!(
                    io::stderr().lock(),
                    "autopin: error: waiting for the engine: {e}"
                );
                return Ok(Kept::Exit(1));
            }
        }
    };
    forwarding.clear_child();
    drain(&mut heard);
    let Some(sig) = status.terminating_signal() else {
        return Ok(Kept::Exit(status.exit_status().unwrap_or(1)));
    };
    // An engine killed inside `spawn` leaves a child that tells its PID between fork and
    // exec, maybe after the engine's end was seen: while such a child is ours, wait for its
    // word (its note takes microseconds; 2 s for a loaded machine).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while heard.program.is_none()
        && heard.exit_code.is_none()
        && std::time::Instant::now() < deadline
        && !unannounced_children().is_empty()
    {
        std::thread::sleep(std::time::Duration::from_millis(2));
        drain(&mut heard);
    }
    // The engine died. Whatever it had learnt of the program stands; else the program, now
    // ours, is waited for.
    let said = |text: String| {
        let _ = writeln!(io::stderr().lock(), "{text}");
    };
    if let Some(code) = heard.exit_code {
        said(format!(
            "autopin: killed by signal {sig} after the program ended (exit status {code})"
        ));
        return Ok(Kept::Exit(code));
    }
    let Some(program) = heard.program else {
        return Ok(Kept::Exit(128 + sig));
    };
    let cpus = restore_unguarded(&heard, program);
    said(format!(
        "autopin: killed by signal {sig}; the program (PID {program}) runs on, {cpus}, and its exit status will be autopin's"
    ));
    forwarding.set_child(program);
    let code = wait_for(program).unwrap_or(128 + sig);
    forwarding.clear_child();
    Ok(Kept::Exit(code))
}

/// What became of the program's CPUs after the engine died, in words: the guardian gave
/// them back; or, the guardian being gone (or never started), the keeper does its work
/// (autopin's files removed, then every thread given the mask the program started with)
/// and says what it did, or why it could not. A decided pinning stays, as the guardian
/// leaves it.
fn restore_unguarded(heard: &Heard, program: i32) -> String {
    if heard.decided {
        return "with the decided pinning in force".into();
    }
    if heard.guardian.is_some_and(guardian_alive) {
        return "its CPUs given back by the guardian".into();
    }
    let who = if heard.guardian.is_some() {
        "the guardian was gone, so the keeper"
    } else {
        "no guardian ran, so the keeper"
    };
    let Some(mask) = heard
        .mask
        .as_deref()
        .and_then(|m| autopin_topology::CpuSet::parse_list(m).ok())
    else {
        return format!(
            "{} but could not give its threads their CPUs back (the CPUs it started with were never told): they keep the ones autopin last set",
            who.replace(", so the keeper", ",")
        );
    };
    // The thread registry's unlinking tells the preload library to pin no thread born from
    // now on: files first, as the guardian does.
    for f in &heard.files {
        let _ = std::fs::remove_file(f);
    }
    let (threads, failed) = crate::guardian::give_back(program, &mask);
    for d in &heard.dirs {
        let _ = std::fs::remove_dir(d);
    }
    match failed.first() {
        None => format!("{who} gave its {threads} thread(s) their CPUs back ({mask})"),
        Some(e) => format!(
            "{who} could not give {} of its {threads} thread(s) their CPUs back ({mask}; {e})",
            failed.len()
        ),
    }
}

/// Whether the guardian `pid` still runs: not a zombie, and still `autopin guard` (its PID
/// cannot be taken by another process while it is ours, a zombie or alive, but it could
/// have been reaped by the engine).
fn guardian_alive(pid: i32) -> bool {
    let proc = std::path::Path::new("/proc");
    let args = std::fs::read(proc.join(pid.to_string()).join("cmdline")).unwrap_or_default();
    let second = args.split(|b| *b == 0).nth(1);
    second == Some(crate::guardian::SUBCOMMAND.as_bytes())
        && !crate::process::attach_guard::is_zombie(proc, pid)
}

/// The forwarded signals held back (blocked) from now until this is dropped, when the ones
/// that came meanwhile are delivered.
struct HeldSignals(nix::sys::signal::SigSet);

impl HeldSignals {
    fn hold() -> HeldSignals {
        use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
        let mut set = SigSet::empty();
        for sig in autopin_launch::signals::FORWARDED {
            if let Ok(s) = Signal::try_from(sig) {
                set.add(s);
            }
        }
        let mut old = SigSet::empty();
        let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old));
        HeldSignals(old)
    }
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        use nix::sys::signal::{sigprocmask, SigmaskHow};
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&self.0), None);
    }
}

/// The keeper's children that may be a program the engine was launching when it died: not
/// a guardian (it leaves autopin's session first thing: a session leader) and not ended.
/// Empty where the kernel does not list children.
fn unannounced_children() -> Vec<i32> {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten();
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .filter(|&pid| {
            // nix, not rustix: a session led from outside this PID namespace (a container's
            // CI runner) has the id 0, which rustix's `Pid` asserts away with a panic.
            let me = nix::unistd::Pid::from_raw(pid);
            let leader = nix::unistd::getsid(Some(me)).is_ok_and(|s| s == me);
            !leader && !crate::process::attach_guard::is_zombie(std::path::Path::new("/proc"), pid)
        })
        .collect()
}

/// Waits for a process that is now the keeper's child; its exit code as a shell gives it.
fn wait_for(pid: i32) -> Option<i32> {
    let pid = Pid::from_raw(pid)?;
    loop {
        match rustix::process::waitpid(Some(pid), WaitOptions::empty()) {
            Ok(Some((_, st))) => {
                if let Some(code) = st.exit_status() {
                    return Some(code);
                }
                if let Some(sig) = st.terminating_signal() {
                    return Some(128 + sig);
                }
            }
            Ok(None) => return None,
            Err(rustix::io::Errno::INTR) => continue,
            // Not our child (it had been reaped, or was never launched).
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_messages_are_read_and_garbage_is_not() {
        let mut h = Heard::default();
        h.take("program 1234");
        h.take("exit 7");
        h.take("guardian 99");
        h.take("mask 0-3,8");
        h.take("file /tmp/a b");
        h.take("dir /tmp/d");
        h.take("decided");
        assert_eq!(
            h,
            Heard {
                program: Some(1234),
                exit_code: Some(7),
                guardian: Some(99),
                mask: Some("0-3,8".into()),
                decided: true,
                files: vec!["/tmp/a b".into()],
                dirs: vec!["/tmp/d".into()],
            }
        );
        h.take("searching");
        assert!(!h.decided);
        let mut h = Heard::default();
        h.take("program -3");
        h.take("exit x");
        h.take("nonsense 5");
        assert_eq!(h, Heard::default());
    }
}
