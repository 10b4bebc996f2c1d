//! Running one command and measuring it: wall time, the child's user/sys time and max RSS
//! (from `wait4`, which reports the child and the descendants it waited for), exit status
//! and captured output. The experiment talks to this through the `Launcher` trait so its
//! scheduling and bookkeeping can be tested without processes.

use serde::Serialize;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitInfo {
    /// Exit code when the program exited normally.
    pub code: Option<i32>,
    /// Signal number when a signal killed it.
    pub signal: Option<i32>,
}

impl ExitInfo {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => "unknown status".into(),
        }
    }
}

/// Event counts the kernel keeps for every process anyway (from `wait4`'s rusage): free to
/// collect, and unlike perf counters they add no cost to the program's context switches —
/// which in a KVM guest would distort exactly the pinning effects being compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KernelCounters {
    /// Context switches where a thread gave up its CPU (blocking, yielding).
    pub voluntary_switches: u64,
    /// Context switches where a thread was preempted: CPU contention.
    pub involuntary_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
}

impl KernelCounters {
    pub fn from_rusage(u: &libc::rusage) -> Self {
        let n = |v: libc::c_long| v.max(0) as u64;
        KernelCounters {
            voluntary_switches: n(u.ru_nvcsw),
            involuntary_switches: n(u.ru_nivcsw),
            minor_faults: n(u.ru_minflt),
            major_faults: n(u.ru_majflt),
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub max_rss_kib: u64,
    pub counters: KernelCounters,
    pub exit: ExitInfo,
    /// The program's standard output (kept in memory for `--metric`, not exported).
    #[serde(skip)]
    pub stdout: String,
    /// The last lines of its standard error, to explain failures.
    #[serde(skip)]
    pub stderr_tail: String,
}

/// Starts a command and waits for it.
pub trait Launcher {
    fn launch(&mut self, argv: &[OsString]) -> Result<Measured, String>;
}

/// Shared interrupt state: the signal thread sets `stop` and forwards the signal to the
/// child whose pid is in `child` (0 when none runs).
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    pub stop: Arc<AtomicBool>,
    pub child: Arc<AtomicI32>,
    pub signal: Arc<AtomicI32>,
}

impl Interrupt {
    pub fn requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Installs SIGINT/SIGTERM handling: a background thread records the signal, stops
    /// scheduling and forwards the signal to the running child.
    pub fn install(&self) -> Result<(), String> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .map_err(|e| format!("cannot install signal handlers: {e}"))?;
        let me = self.clone();
        std::thread::spawn(move || {
            for sig in signals.forever() {
                me.signal.store(sig, Ordering::SeqCst);
                me.stop.store(true, Ordering::SeqCst);
                let pid = me.child.load(Ordering::SeqCst);
                if pid > 0 {
                    // SAFETY: kill has no memory-safety preconditions; a stale pid is
                    // harmless because the child is reaped only by our wait4.
                    unsafe { libc::kill(pid, sig) };
                }
            }
        });
        Ok(())
    }
}

/// The real launcher: spawns the command with piped output, waits with `wait4`.
pub struct ProcessLauncher {
    /// Echo the program's output (stdout and stderr) to our stderr as it arrives.
    pub show_output: bool,
    pub interrupt: Interrupt,
}

/// How much of the program's stderr is kept to explain a failure.
const STDERR_TAIL: usize = 2000;

impl Launcher for ProcessLauncher {
    fn launch(&mut self, argv: &[OsString]) -> Result<Measured, String> {
        let (prog, args) = argv.split_first().ok_or("empty command line")?;
        let start = Instant::now();
        let mut child = Command::new(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", prog.to_string_lossy()))?;
        let pid = child.id() as i32;
        self.interrupt.child.store(pid, Ordering::SeqCst);
        if self.interrupt.requested() {
            // The signal came between the check before this run and the spawn.
            // SAFETY: see Interrupt::install.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let show = self.show_output;
        let out = child
            .stdout
            .take()
            .map(|s| std::thread::spawn(move || drain(s, show, usize::MAX)));
        let err = child
            .stderr
            .take()
            .map(|s| std::thread::spawn(move || drain(s, show, STDERR_TAIL)));
        let (status, usage) = wait4(pid);
        let wall_s = start.elapsed().as_secs_f64();
        self.interrupt.child.store(0, Ordering::SeqCst);
        let status = status?;
        // `child` is reaped by wait4 already; dropping it does not wait again.
        drop(child);
        let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
        let stderr_tail = err.and_then(|h| h.join().ok()).unwrap_or_default();
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Ok(Measured {
            wall_s,
            user_s: tv(usage.ru_utime),
            sys_s: tv(usage.ru_stime),
            max_rss_kib: usage.ru_maxrss.max(0) as u64,
            counters: KernelCounters::from_rusage(&usage),
            exit: status,
            stdout,
            stderr_tail,
        })
    }
}

/// Waits for `pid` and returns its status and resource usage, retrying on EINTR.
fn wait4(pid: i32) -> (Result<ExitInfo, String>, libc::rusage) {
    let mut status = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to local status and usage.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return (Err(format!("wait4 on pid {pid} failed: {err}")), usage);
        }
    }
    let info = if libc::WIFEXITED(status) {
        ExitInfo {
            code: Some(libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else if libc::WIFSIGNALED(status) {
        ExitInfo {
            code: None,
            signal: Some(libc::WTERMSIG(status)),
        }
    } else {
        ExitInfo {
            code: None,
            signal: None,
        }
    };
    (Ok(info), usage)
}

/// Reads a pipe to its end, echoing to stderr when asked; keeps at most the last `keep` bytes.
fn drain(mut r: impl Read, echo: bool, keep: usize) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(k) => {
                if echo {
                    let _ = std::io::stderr().write_all(&chunk[..k]);
                }
                buf.extend_from_slice(&chunk[..k]);
                if buf.len() > keep.saturating_mul(2) {
                    let cut = buf.len() - keep;
                    buf.drain(..cut);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    if buf.len() > keep {
        let cut = buf.len() - keep;
        buf.drain(..cut);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher() -> ProcessLauncher {
        ProcessLauncher {
            show_output: false,
            interrupt: Interrupt::default(),
        }
    }
    fn argv(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn measures_a_real_child() {
        // A child that burns ~0.2 s of CPU and prints a metric.
        let m = launcher()
            .launch(&argv(&[
                "sh",
                "-c",
                "i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done; echo 'rate = 42.5'",
            ]))
            .unwrap();
        assert!(m.exit.success());
        assert!(m.stdout.contains("rate = 42.5"));
        assert!(m.user_s + m.sys_s > 0.0, "{m:?}");
        assert!(m.wall_s >= m.user_s * 0.5, "{m:?}");
        assert!(m.max_rss_kib > 0);
        // Every process faults in at least its first pages.
        assert!(m.counters.minor_faults > 0, "{:?}", m.counters);
    }

    #[test]
    fn reports_exit_codes_signals_and_spawn_errors() {
        let m = launcher()
            .launch(&argv(&["sh", "-c", "echo oops >&2; exit 3"]))
            .unwrap();
        assert_eq!(m.exit.code, Some(3));
        assert!(m.stderr_tail.contains("oops"));
        let m = launcher()
            .launch(&argv(&["sh", "-c", "kill -9 $$"]))
            .unwrap();
        assert_eq!(m.exit.signal, Some(9));
        assert!(launcher()
            .launch(&argv(&["/nonexistent/prog"]))
            .unwrap_err()
            .contains("cannot start"));
    }

    #[test]
    fn stderr_tail_is_bounded() {
        let m = launcher()
            .launch(&argv(&[
                "sh",
                "-c",
                "i=0; while [ $i -lt 2000 ]; do echo line$i >&2; i=$((i+1)); done",
            ]))
            .unwrap();
        assert!(m.stderr_tail.len() <= STDERR_TAIL);
        assert!(m.stderr_tail.ends_with("line1999\n"));
    }
}
