//! What the driver senses of the target, through narrow traits (its one hand is
//! [`crate::pinner::Pinner`]): time, the target's threads, and the objective's counters,
//! with [`OsError`], why the OS side could not answer. The engine implements only the clock
//! (std's monotonic one); the Linux side (autopin-os) and the simulator ([`crate::sim`])
//! implement the rest.

use std::collections::BTreeMap;

/// Why the OS side could not do what one of these traits (or [`crate::run::Platform`]) asked,
/// by kind, so that the engine can tell a vanished target from a refusal without reading
/// messages. Each variant carries the whole message the user reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OsError {
    /// The process or thread is gone (ESRCH, or its /proc entry is missing).
    #[error("{0}")]
    Gone(String),
    /// The OS refused (EPERM, EACCES): another user's process, a capability missing.
    #[error("{0}")]
    PermissionDenied(String),
    /// This machine or kernel cannot do it (no PMU, perf counting forbidden, no NUMA node).
    #[error("{0}")]
    NotSupported(String),
    /// Any other failure of an OS call, with its message.
    #[error("{0}")]
    Io(String),
}

impl OsError {
    /// The error of an OS call that failed with `e`, classified by its kind, as
    /// "`context`: `e`".
    pub fn from_io(context: impl std::fmt::Display, e: &std::io::Error) -> Self {
        Self::classify(e, format!("{context}: {e}"))
    }

    /// `message` (which the caller words) as the kind of error `e` is.
    pub fn classify(e: &std::io::Error, message: String) -> Self {
        use std::io::ErrorKind as K;
        // ESRCH has no io::ErrorKind of its own.
        const ESRCH: i32 = 3;
        match e.kind() {
            _ if e.raw_os_error() == Some(ESRCH) => OsError::Gone(message),
            K::NotFound => OsError::Gone(message),
            K::PermissionDenied => OsError::PermissionDenied(message),
            K::Unsupported => OsError::NotSupported(message),
            _ => OsError::Io(message),
        }
    }

    /// The message, whatever the kind.
    pub fn message(&self) -> &str {
        match self {
            OsError::Gone(m)
            | OsError::PermissionDenied(m)
            | OsError::NotSupported(m)
            | OsError::Io(m) => m,
        }
    }
}

/// Seconds on a monotonic clock, and waiting.
pub trait Clock {
    fn now(&self) -> f64;
    fn sleep_until(&mut self, t: f64);
    /// autopin's own CPU time so far, seconds, when this clock can tell it (what moving the
    /// threads costs autopin; the simulation's moves cost nothing).
    fn cpu_seconds(&self) -> Option<f64> {
        None
    }
}

/// The real clock.
pub struct SystemClock {
    origin: std::time::Instant,
    /// The process's CPU clock (the OS side reads it; std has none).
    cpu: Option<fn() -> f64>,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            origin: std::time::Instant::now(),
            cpu: None,
        }
    }
}

impl SystemClock {
    /// With the process's CPU time from `cpu` (seconds), for [`Clock::cpu_seconds`].
    pub fn with_cpu_clock(mut self, cpu: fn() -> f64) -> Self {
        self.cpu = Some(cpu);
        self
    }
}

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
    fn cpu_seconds(&self) -> Option<f64> {
        self.cpu.map(|f| f())
    }
    fn sleep_until(&mut self, t: f64) {
        let d = t - self.now();
        if d > 0.0 {
            std::thread::sleep(duration_of(d));
        }
    }
}

/// `seconds` as a `Duration`, which cannot panic: NaN and negative times are none, and one
/// too long for a `Duration` is the longest there is.
pub fn duration_of(seconds: f64) -> std::time::Duration {
    if seconds.is_nan() || seconds <= 0.0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::try_from_secs_f64(seconds).unwrap_or(std::time::Duration::MAX)
}

/// The target's threads at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadSnapshot {
    /// Live threads autopin pins, in creation order, skipped helper threads left out. The
    /// position in this list is not the thread's index: see `tracked_index`.
    pub tracked: Vec<(u32, usize)>,
    /// Every live thread of the target (what the objective counts).
    pub all: Vec<u32>,
    /// Some(status) once the target has ended (exit code, or 128+signal).
    pub ended: Option<Option<i32>>,
    /// Threads the target has had so far, where the source counts each at its birth (the
    /// preload library's registry): threads that lived between two polls count too.
    pub existed: Option<usize>,
}

/// Where threads come from: the preload registry, a /proc scan, or a simulation.
pub trait ThreadSource {
    fn poll(&mut self) -> Result<ThreadSnapshot, OsError>;
    /// Stops a launched target (after a failure); attached targets are left alone.
    fn terminate(&mut self) {}
    /// Waits up to `seconds` or until the target ends, whichever is first. False when this
    /// source cannot wait so (the caller then sleeps on its clock).
    fn wait_for_end(&mut self, _seconds: f64) -> bool {
        false
    }
    /// Lines for the report about how threads were found.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// The target's context switches per second while it was watched, over all its
    /// threads (None: not known, or not watched long enough), for the perturbation
    /// estimate. The source times its own reads: the polls of the start-up, before the
    /// driver runs, count too.
    fn switch_rate(&self) -> Option<f64> {
        None
    }
    /// What the user must hear once the target ended, on stderr as well as in the report
    /// (work done in processes autopin did not manage, processes left running).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// Whether the launched program's dynamic loader has mapped every library it starts
    /// with: it runs the preload library's constructor, which records the process, only
    /// after mapping them all. None: not known (no preload library, attached targets).
    fn libraries_loaded(&self) -> Option<bool> {
        None
    }
    /// autopin is about to set the target's thread masks for the first time: from now on
    /// they are its to set. Called once, before that first move. (A launched program's
    /// preload library gives its main thread every CPU of a birth pinning until the
    /// program's threads begin, then narrows it to the first; told this, it leaves the main
    /// thread's mask to autopin.)
    fn moving_threads(&mut self) {}
}

/// Cumulative objective amounts at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Whole-target cumulative amount for objectives that are not per thread (heartbeat,
    /// energy); None for per-thread counters.
    pub total: Option<f64>,
    /// Cumulative amount per thread since autopin first counted it.
    pub per_thread: BTreeMap<u32, f64>,
    /// Phase most recently announced by the program (heartbeat channel).
    pub phase: Option<String>,
    /// How many phase changes the program has announced so far (heartbeat channel): a
    /// different value in two readings means the interval between them spans a change.
    pub phase_seq: Option<u64>,
    /// The program's own cumulative progress when it is known besides the objective
    /// (heartbeats, or OpenMP constructs counted by the preload library), with its name:
    /// the report compares the objective with it.
    pub progress: Option<(f64, &'static str)>,
}

/// The objective's counters.
pub trait Meter {
    /// Reads the cumulative amounts of these threads (opening counters for new ones and
    /// closing those of threads that are gone).
    fn read(&mut self, threads: &[u32]) -> Result<Reading, OsError>;
    /// Stops counting (after a final decision with nothing left to watch), so counting no
    /// longer taxes the target.
    fn pause(&mut self) {}
    /// Whether readings may carry only the whole program's amount (`total`), not each
    /// thread's: once a decision is in force the phase watch needs the rate alone, and a
    /// meter that can read the total at once saves a read per thread. The driver takes a
    /// fresh reading after each change, so no interval spans two kinds of reading.
    fn whole_program(&mut self, _yes: bool) {}
    /// Problems worth a line in the report (e.g. counters that could not be opened).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// How it counts ("per-thread", "per-CPU on 0-3", ...) and why, when it uses perf.
    fn counting(&self) -> Option<(String, String)> {
        None
    }
    /// Asks the program's OpenMP runtime (through the preload library) for teams of
    /// `threads` threads from its next outermost parallel region on; 0 for its own count.
    /// Ignored by a meter without the program's OpenMP channel.
    fn want_team(&mut self, _threads: u32) {}
    /// What the preload library says of the program's teams: the want in force, its own
    /// count, and why a smaller team may not be applied mid-run (None: no OpenMP channel,
    /// or no OpenMP call seen yet).
    fn team(&self) -> Option<autopin_objective::progress::TeamState> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::OsError;
    use std::io::{Error, ErrorKind};
    use std::time::Duration;

    #[test]
    fn any_number_of_seconds_is_a_duration_without_a_panic() {
        assert_eq!(super::duration_of(1.5), Duration::from_millis(1500));
        for none in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY, -1e300] {
            assert_eq!(super::duration_of(none), Duration::ZERO, "{none}");
        }
        for long in [1e300, f64::INFINITY, f64::MAX] {
            assert_eq!(super::duration_of(long), Duration::MAX, "{long}");
        }
    }

    #[test]
    fn io_errors_are_classified_by_kind_and_keep_their_message() {
        let gone = OsError::from_io("/proc/42/maps", &Error::from(ErrorKind::NotFound));
        assert!(matches!(gone, OsError::Gone(_)));
        assert!(gone.message().starts_with("/proc/42/maps: "));
        // ESRCH: the process is gone.
        let esrch = OsError::from_io("move_pages(42)", &Error::from_raw_os_error(3));
        assert!(matches!(esrch, OsError::Gone(_)));
        let denied = OsError::from_io("x", &Error::from(ErrorKind::PermissionDenied));
        assert!(matches!(denied, OsError::PermissionDenied(_)));
        let other = OsError::from_io("x", &Error::other("boom"));
        assert_eq!(other, OsError::Io("x: boom".into()));
        assert_eq!(other.to_string(), "x: boom");
    }
}
