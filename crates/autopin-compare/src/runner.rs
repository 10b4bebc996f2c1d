//! Running one command and measuring it: wall time, the child's user/sys time and max RSS
//! (from `wait4`, which reports the child and the descendants it waited for), exit status
//! and captured output. The program is started by autopin's one launcher (`autopin-launch`,
//! which `run` and `pin` use too), so exit statuses and signal forwarding mean the same.
//! The experiment talks to this through the `Runner` trait so its scheduling and
//! bookkeeping can be tested without processes.

pub use autopin_launch::ExitStatus;
use autopin_launch::{signals::Forwarding, LaunchError, LaunchSpec};
use serde::Serialize;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

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
    #[serde(skip)]
    pub exit: ExitStatus,
    /// The program's standard output (kept in memory for `--metric`, not exported).
    #[serde(skip)]
    pub stdout: String,
    /// The last lines of its standard error, to explain failures.
    #[serde(skip)]
    pub stderr_tail: String,
}

/// Runs a command to its end and measures it.
pub trait Runner {
    /// Runs `argv` to its end. An error means it could not be started (or waited for) at
    /// all; a program that ran and failed is a `Measured` with its exit status.
    fn run(&mut self, argv: &[OsString]) -> Result<Measured, LaunchError>;
}

/// Shared interrupt state: set when SIGINT/SIGTERM (or another forwarded signal) reached
/// autopin, or by a caller; no new run starts afterwards. The runner forwards the signal
/// to the running program.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    pub stop: Arc<AtomicBool>,
    /// Keeps the signal handlers installed between runs, so a signal then stops the
    /// experiment instead of killing autopin before it writes what it has.
    forwarding: Arc<Mutex<Option<Forwarding>>>,
}

impl Interrupt {
    pub fn requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
            || (self.installed() && autopin_launch::signals::received().is_some())
    }

    fn installed(&self) -> bool {
        self.forwarding.lock().map(|f| f.is_some()).unwrap_or(true)
    }

    /// Installs the runner's signal forwarding for the whole experiment.
    pub fn install(&self) -> Result<(), SignalHandlersError> {
        let f = Forwarding::begin().map_err(|cause| SignalHandlersError { cause })?;
        *self.forwarding.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
        Ok(())
    }
}

/// The signal forwarding for an experiment could not be installed (the OS's reason).
#[derive(Debug, thiserror::Error)]
#[error("cannot install signal handlers: {cause}")]
pub struct SignalHandlersError {
    pub cause: std::io::Error,
}

/// The real runner: spawns the command with piped output, waits with `wait4`.
pub struct ProcessRunner {
    /// Echo the program's output (stdout and stderr) to our stderr as it arrives.
    pub show_output: bool,
    pub interrupt: Interrupt,
}

/// How much of the program's stderr is kept to explain a failure.
const STDERR_TAIL: usize = 2000;

impl Runner for ProcessRunner {
    fn run(&mut self, argv: &[OsString]) -> Result<Measured, LaunchError> {
        let (prog, args) = argv.split_first().ok_or_else(|| LaunchError::NotFound {
            program: String::new(),
        })?;
        let mut spec = LaunchSpec::new(prog, args);
        spec.capture_output = true;
        spec.forward_signals = true;
        let start = Instant::now();
        let mut child = autopin_launch::spawn(&spec)?;
        if self.interrupt.requested() {
            // The signal came between the check before this run and the spawn.
            let _ = child.signal(libc::SIGTERM);
        }
        let show = self.show_output;
        let (out, err) = child.take_output();
        let out = out.map(|s| std::thread::spawn(move || drain(s, show, usize::MAX)));
        let err = err.map(|s| std::thread::spawn(move || drain(s, show, STDERR_TAIL)));
        let waited = child.wait_with_usage();
        let wall_s = start.elapsed().as_secs_f64();
        let (exit, usage) = waited.map_err(|source| LaunchError::Io {
            program: format!(
                "{} (waiting for pid {})",
                prog.to_string_lossy(),
                child.pid()
            ),
            source,
        })?;
        let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
        let stderr_tail = err.and_then(|h| h.join().ok()).unwrap_or_default();
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Ok(Measured {
            wall_s,
            user_s: tv(usage.ru_utime),
            sys_s: tv(usage.ru_stime),
            max_rss_kib: usage.ru_maxrss.max(0) as u64,
            counters: KernelCounters::from_rusage(&usage),
            exit,
            stdout,
            stderr_tail,
        })
    }
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

    fn runner() -> ProcessRunner {
        ProcessRunner {
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
        let m = runner()
            .run(&argv(&[
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
        let m = runner()
            .run(&argv(&["sh", "-c", "echo oops >&2; exit 3"]))
            .unwrap();
        assert_eq!(m.exit.exit_code(), Some(3));
        assert!(m.stderr_tail.contains("oops"));
        let m = runner().run(&argv(&["sh", "-c", "kill -9 $$"])).unwrap();
        assert_eq!(m.exit.signal(), Some(9));
        let e = runner().run(&argv(&["/nonexistent/prog"])).unwrap_err();
        assert_eq!(e.exit_code(), 127);
        assert!(
            e.to_string().contains("/nonexistent/prog: no such file"),
            "{e}"
        );
    }

    #[test]
    fn stderr_tail_is_bounded() {
        let m = runner()
            .run(&argv(&[
                "sh",
                "-c",
                "i=0; while [ $i -lt 2000 ]; do echo line$i >&2; i=$((i+1)); done",
            ]))
            .unwrap();
        assert!(m.stderr_tail.len() <= STDERR_TAIL);
        assert!(m.stderr_tail.ends_with("line1999\n"));
    }
}
