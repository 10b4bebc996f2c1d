//! Starting a program: extra environment (LD_PRELOAD prepended to any value it already
//! has), stdin/stdout/stderr inherited (or captured for measured runs), our signals
//! forwarded, and its exit status mapped the way a shell maps it.

use crate::elf::{self, Linkage};
use crate::exit::ExitStatus;
use crate::signals::Forwarding;
use autopin_topology::CpuSet;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};

/// What to run and how.
#[derive(Clone, Debug, Default)]
pub struct LaunchSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Set (or override) these variables in the child's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Remove these variables from the child's environment.
    pub unset: Vec<OsString>,
    /// Prepended to `LD_PRELOAD` (from `env` if set there, else from our environment).
    pub preload: Option<PathBuf>,
    /// Forward SIGINT/TERM/HUP/QUIT/USR1/USR2 sent to autopin to the child while it runs.
    pub forward_signals: bool,
    /// Affinity the child gets before exec (inherited by every thread it creates). Used for
    /// static binaries, where the preload library cannot pin the main thread.
    pub initial_affinity: Option<CpuSet>,
    /// Memory policy the child sets before exec (numactl's --membind and friends).
    pub mem_policy: Option<autopin_placement::MemPolicy>,
    /// A measured run: stdin from /dev/null, stdout and stderr piped to us
    /// ([`Launched::take_output`]) instead of inherited.
    pub capture_output: bool,
    /// Descriptors the child writes its own PID to before exec, one message each (see
    /// [`PidNote`]): whoever reads them knows the program before it runs a line of its own
    /// code, even if the launching process dies before `spawn` returns.
    pub pid_notes: Vec<PidNote>,
}

/// One message `prefix PID suffix` the child writes (one `write(2)`) to `fd` before exec.
/// The descriptor must stay open in this process until [`spawn`] returns (close-on-exec is
/// fine: the program never holds it). A reader that is gone costs nothing: SIGPIPE is
/// ignored while writing, and a failed write is not an error.
#[derive(Clone, Debug)]
pub struct PidNote {
    pub fd: std::os::fd::RawFd,
    pub prefix: Vec<u8>,
    pub suffix: Vec<u8>,
}

/// The longest note written (the rest is cut): far more than any prefix used.
const PID_NOTE_MAX: usize = 256;

/// Writes every note with this process's PID; in the child between fork and exec, so only
/// async-signal-safe calls (getpid, sigaction, write) on memory prepared before fork.
fn write_pid_notes(notes: &[([u8; PID_NOTE_MAX], usize, usize, std::os::fd::RawFd)]) {
    // rustix makes the system call itself (no libc cache, no lock): async-signal-safe.
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    let mut digits = [0u8; 12];
    let mut n = 0;
    let mut v = pid.max(0) as u32;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // SAFETY: sigaction with a zeroed struct and SIG_IGN installs no handler; the old
    // disposition is put back before exec.
    unsafe {
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        let mut old: libc::sigaction = std::mem::zeroed();
        let ignored = libc::sigaction(libc::SIGPIPE, &ignore, &mut old) == 0;
        for (buf, prefix, suffix, fd) in notes {
            let mut msg = *buf;
            // prefix, then the digits (stored backwards), then the suffix.
            let mut len = *prefix;
            for i in (0..n).rev() {
                msg[len] = digits[i];
                len += 1;
            }
            msg.copy_within(PID_NOTE_MAX - suffix..PID_NOTE_MAX, len);
            len += suffix;
            let _ = libc::write(*fd, msg.as_ptr().cast(), len);
        }
        if ignored {
            libc::sigaction(libc::SIGPIPE, &old, std::ptr::null_mut());
        }
    }
}

impl LaunchSpec {
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        LaunchSpec {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }
}

/// Why the program did not start. The exit codes follow the shell: 127 not found, 126
/// found but not runnable.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A name looked up on PATH is "not found"; a path (with a slash) is "no such file".
    #[error("{program}: {}", if .program.contains('/') { "no such file" } else { "command not found" })]
    NotFound { program: String },
    #[error("{program}: cannot execute: {source}")]
    NotExecutable { program: String, source: io::Error },
    #[error("{program}: cannot start: {source}")]
    Io { program: String, source: io::Error },
}

impl LaunchError {
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::NotFound { .. } => 127,
            LaunchError::NotExecutable { .. } => 126,
            LaunchError::Io { .. } => 1,
        }
    }
}

/// A running program.
#[derive(Debug)]
pub struct Launched {
    child: Child,
    forwarding: Option<Forwarding>,
    status: Option<ExitStatus>,
    /// The resolved program path.
    pub path: PathBuf,
    /// Whether LD_PRELOAD can reach the program (see [`Linkage::preload_works`]).
    pub linkage: Linkage,
}

/// Maps an exit status like a shell: the exit code, or 128 + N for death by signal N.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    ExitStatus::from(status).code()
}

/// `existing` with `lib` in front, as ld.so reads it (colon- or space-separated).
fn prepend_preload(lib: &OsStr, existing: Option<&OsStr>) -> OsString {
    let mut v = OsString::from(lib);
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        v.push(":");
        v.push(e);
    }
    v
}

fn env_lookup(spec: &LaunchSpec, key: &str) -> Option<OsString> {
    spec.env
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os(key))
}

/// Resolves `program` on `path_var` (a name without a slash) and reads how it is linked,
/// as starting it would: the errors a launch would meet, without starting anything.
pub fn check_program(
    program: &OsStr,
    path_var: Option<&OsStr>,
) -> Result<(PathBuf, Linkage), LaunchError> {
    let name = program.to_string_lossy().into_owned();
    let path = elf::resolve_program(program, path_var).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => LaunchError::NotFound {
            program: name.clone(),
        },
        _ => LaunchError::Io {
            program: name.clone(),
            source: e,
        },
    })?;
    // What execve demands: a regular file with an execute bit (root too).
    let not_runnable = match path.metadata() {
        Ok(m) if m.is_dir() => Some(libc::EISDIR),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Some(libc::EACCES),
        _ => None,
    };
    if let Some(errno) = not_runnable {
        return Err(LaunchError::NotExecutable {
            program: name,
            source: io::Error::from_raw_os_error(errno),
        });
    }
    let linkage = elf::linkage(&path).map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied => LaunchError::NotExecutable {
            program: name.clone(),
            source: e,
        },
        _ => LaunchError::Io {
            program: name.clone(),
            source: e,
        },
    })?;
    Ok((path, linkage))
}

/// A file a shell would run as a script when execve refuses it: text (no NUL byte) in its
/// first line, and not ELF. A binary the kernel cannot run stays an error, as in a shell.
fn is_shell_text(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let first_line = head[..n].split(|b| *b == b'\n').next().unwrap_or(&[]);
    n > 0 && !head.starts_with(b"\x7fELF") && !first_line.contains(&0)
}

/// Resolves the program (PATH from the child's environment), classifies its linkage and
/// starts it.
pub fn spawn(spec: &LaunchSpec) -> Result<Launched, LaunchError> {
    let name = spec.program.to_string_lossy().into_owned();
    let path_var = env_lookup(spec, "PATH");
    let (path, linkage) = check_program(&spec.program, path_var.as_deref())?;
    let mut cmd = if matches!(linkage, Linkage::Unknown) && is_shell_text(&path) {
        // A text file without `#!` is a shell script to a shell (execve refuses it with
        // ENOEXEC, and the shell runs it with /bin/sh): run it the same way.
        let mut c = Command::new("/bin/sh");
        c.arg(&path);
        c
    } else {
        let mut c = Command::new(&path);
        // argv[0] stays what the user typed, as a shell would pass it.
        c.arg0(&spec.program);
        c
    };
    cmd.args(&spec.args);
    if spec.capture_output {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }
    for k in &spec.unset {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(lib) = &spec.preload {
        let existing = env_lookup(spec, "LD_PRELOAD");
        cmd.env(
            "LD_PRELOAD",
            prepend_preload(lib.as_os_str(), existing.as_deref()),
        );
    }
    // What the child does between fork and exec, prepared before fork (the child may only
    // make async-signal-safe calls): its CPUs, the PID notes, its memory policy, in that
    // order, in one closure.
    let affinity_words = spec.initial_affinity.as_ref().map(|set| set.to_words());
    // Each note's prefix at the start of its buffer, its suffix at the end (the PID goes
    // between them in the child).
    let notes: Vec<_> = spec
        .pid_notes
        .iter()
        .map(|n| {
            let prefix = n.prefix.len().min(PID_NOTE_MAX / 2);
            let suffix = n.suffix.len().min(PID_NOTE_MAX / 2 - 16);
            let mut buf = [0u8; PID_NOTE_MAX];
            buf[..prefix].copy_from_slice(&n.prefix[..prefix]);
            buf[PID_NOTE_MAX - suffix..].copy_from_slice(&n.suffix[..suffix]);
            (buf, prefix, suffix, n.fd)
        })
        .collect();
    let policy = spec
        .mem_policy
        .as_ref()
        .map(crate::mempolicy::PreparedMemPolicy::new);
    if affinity_words.is_some() || !notes.is_empty() || policy.is_some() {
        // SAFETY: the closure makes only async-signal-safe calls (sched_setaffinity, getpid,
        // sigaction, write, set_mempolicy) on memory prepared before fork.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(words) = &affinity_words {
                    if libc::sched_setaffinity(
                        0,
                        words.len() * 8,
                        words.as_ptr() as *const libc::cpu_set_t,
                    ) != 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                }
                if !notes.is_empty() {
                    write_pid_notes(&notes);
                }
                match &policy {
                    Some(p) => p.apply(),
                    None => Ok(()),
                }
            });
        }
    }
    let forwarding = if spec.forward_signals {
        Some(Forwarding::begin().map_err(|e| LaunchError::Io {
            program: name.clone(),
            source: e,
        })?)
    } else {
        None
    };
    let child = cmd.spawn().map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => LaunchError::NotFound {
            program: name.clone(),
        },
        Some(libc::EACCES) | Some(libc::ENOEXEC) | Some(libc::EISDIR) | Some(libc::EPERM) => {
            LaunchError::NotExecutable {
                program: name.clone(),
                source: e,
            }
        }
        _ => LaunchError::Io {
            program: name.clone(),
            source: e,
        },
    })?;
    if let Some(f) = &forwarding {
        f.set_child(child.id() as i32);
    }
    Ok(Launched {
        child,
        forwarding,
        status: None,
        path,
        linkage,
    })
}

impl Launched {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn finish(&mut self, st: ExitStatus) -> ExitStatus {
        if let Some(f) = &self.forwarding {
            f.clear_child();
        }
        self.status = Some(st);
        st
    }

    /// The mapped exit code if the program has ended (reaps it), else None.
    pub fn try_wait(&mut self) -> io::Result<Option<i32>> {
        if let Some(st) = self.status {
            return Ok(Some(st.code()));
        }
        match self.child.try_wait()? {
            Some(st) => Ok(Some(self.finish(st.into()).code())),
            None => Ok(None),
        }
    }

    /// Waits for the program to end and returns its mapped exit code.
    pub fn wait(&mut self) -> io::Result<i32> {
        Ok(self.wait_status()?.code())
    }

    /// Waits for the program to end and returns how it ended.
    pub fn wait_status(&mut self) -> io::Result<ExitStatus> {
        if let Some(st) = self.status {
            return Ok(st);
        }
        let st = self.child.wait()?;
        Ok(self.finish(st.into()))
    }

    /// The program's stdout and stderr pipes (with [`LaunchSpec::capture_output`]), once.
    pub fn take_output(&mut self) -> (Option<ChildStdout>, Option<ChildStderr>) {
        (self.child.stdout.take(), self.child.stderr.take())
    }

    /// Waits for the program to end; how it ended and the resources it and the descendants
    /// it waited for used (`wait4`'s rusage: CPU times, max RSS, context switches, faults).
    pub fn wait_with_usage(&mut self) -> io::Result<(ExitStatus, libc::rusage)> {
        // SAFETY: rusage is plain old data; zeroed is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        if let Some(st) = self.status {
            return Ok((st, usage));
        }
        let pid = self.pid();
        let mut status = 0;
        loop {
            // SAFETY: valid pointers to local status and usage.
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            if r == pid {
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
        // Reaped here: `child` must not be waited for again (its pid may be reused).
        Ok((self.finish(ExitStatus::from_wait(status)), usage))
    }

    /// Sends a signal to the program (if it has not been reaped yet); EINVAL for a number
    /// that names no signal.
    pub fn signal(&self, sig: i32) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        let pid = rustix::process::Pid::from_raw(self.pid()).ok_or_else(einval)?;
        let sig = rustix::process::Signal::from_named_raw(sig).ok_or_else(einval)?;
        Ok(rustix::process::kill_process(pid, sig)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_writes_its_pid_notes_before_exec_and_a_closed_reader_costs_nothing() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let (mut read, write) = std::io::pipe().unwrap();
        let (gone, closed) = std::io::pipe().unwrap();
        drop(gone);
        let mut spec = LaunchSpec::new("true", Vec::<OsString>::new());
        spec.pid_notes = vec![
            PidNote {
                fd: closed.as_raw_fd(),
                prefix: b"x ".to_vec(),
                suffix: Vec::new(),
            },
            PidNote {
                fd: write.as_raw_fd(),
                prefix: b"pid ".to_vec(),
                suffix: b"\n".to_vec(),
            },
        ];
        let mut child = spawn(&spec).unwrap();
        let pid = child.pid();
        assert_eq!(child.wait().unwrap(), 0, "SIGPIPE from the closed reader");
        drop((write, closed, spec));
        let mut text = String::new();
        read.read_to_string(&mut text).unwrap();
        assert_eq!(text, format!("pid {pid}\n"));
    }

    #[test]
    fn preload_is_prepended() {
        assert_eq!(prepend_preload(OsStr::new("/a.so"), None), "/a.so");
        assert_eq!(
            prepend_preload(OsStr::new("/a.so"), Some(OsStr::new(""))),
            "/a.so"
        );
        assert_eq!(
            prepend_preload(OsStr::new("/a.so"), Some(OsStr::new("/b.so"))),
            "/a.so:/b.so"
        );
    }

    #[test]
    fn exit_codes_map_like_a_shell() {
        let run = |script: &str| {
            let mut l = spawn(&LaunchSpec::new("sh", ["-c", script])).unwrap();
            l.wait().unwrap()
        };
        assert_eq!(run("exit 3"), 3);
        assert_eq!(run("kill -TERM $$"), 143);
        assert_eq!(run("true"), 0);
    }

    #[test]
    fn errors_map_to_127_and_126() {
        let e = spawn(&LaunchSpec::new(
            "autopin-no-such-program",
            Vec::<OsString>::new(),
        ))
        .unwrap_err();
        assert_eq!(e.exit_code(), 127);
        assert!(e.to_string().contains("command not found"));
        // A path that is not there is not a command to look up: say so.
        let e = spawn(&LaunchSpec::new(
            "workloads/no-such-program",
            Vec::<OsString>::new(),
        ))
        .unwrap_err();
        assert_eq!(e.exit_code(), 127);
        assert_eq!(e.to_string(), "workloads/no-such-program: no such file");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("noexec");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        let e = spawn(&LaunchSpec::new(p.as_os_str(), Vec::<OsString>::new())).unwrap_err();
        assert_eq!(e.exit_code(), 126, "{e}");
    }

    #[test]
    fn env_and_initial_affinity_reach_the_child() {
        let mut spec = LaunchSpec::new(
            "sh",
            [
                "-c",
                "test \"$AUTOPIN_T\" = yes && grep -q 'Cpus_allowed_list:.0$' /proc/self/status",
            ],
        );
        spec.env.push(("AUTOPIN_T".into(), "yes".into()));
        spec.initial_affinity = Some(CpuSet::from_cpus([0]));
        assert_eq!(spawn(&spec).unwrap().wait().unwrap(), 0);
    }
}
