//! How a program ended, with one meaning everywhere: the code a shell would report.

use std::os::unix::process::ExitStatusExt;

/// A program's end: its exit code, or the signal that killed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// It called exit(code).
    Exited(i32),
    /// Signal N killed it.
    Signaled(i32),
}

impl ExitStatus {
    /// The status as a shell reports it: the exit code, or 128 + N for death by signal N.
    pub fn code(&self) -> i32 {
        match *self {
            ExitStatus::Exited(c) => c,
            ExitStatus::Signaled(n) => 128 + n,
        }
    }

    pub fn success(&self) -> bool {
        *self == ExitStatus::Exited(0)
    }

    /// The exit code when it exited normally.
    pub fn exit_code(&self) -> Option<i32> {
        match *self {
            ExitStatus::Exited(c) => Some(c),
            ExitStatus::Signaled(_) => None,
        }
    }

    /// The signal number when a signal killed it.
    pub fn signal(&self) -> Option<i32> {
        match *self {
            ExitStatus::Signaled(n) => Some(n),
            ExitStatus::Exited(_) => None,
        }
    }

    /// `exit status 3`, `killed by signal 9`.
    pub fn describe(&self) -> String {
        match *self {
            ExitStatus::Exited(c) => format!("exit status {c}"),
            ExitStatus::Signaled(n) => format!("killed by signal {n}"),
        }
    }

    /// From a raw `wait(2)` status word.
    pub fn from_wait(status: i32) -> Self {
        std::process::ExitStatus::from_raw(status).into()
    }
}

impl From<std::process::ExitStatus> for ExitStatus {
    fn from(st: std::process::ExitStatus) -> Self {
        match (st.code(), st.signal()) {
            (Some(c), _) => ExitStatus::Exited(c),
            (None, Some(n)) => ExitStatus::Signaled(n),
            // Stopped/continued are not ends; a reaped child has one of the two above.
            (None, None) => ExitStatus::Exited(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_shell() {
        assert_eq!(ExitStatus::Exited(3).code(), 3);
        assert_eq!(ExitStatus::Signaled(15).code(), 143);
        assert_eq!(ExitStatus::from_wait(3 << 8), ExitStatus::Exited(3));
        assert_eq!(ExitStatus::from_wait(9), ExitStatus::Signaled(9));
        assert!(ExitStatus::Exited(0).success() && !ExitStatus::Signaled(9).success());
        assert_eq!(ExitStatus::Signaled(9).describe(), "killed by signal 9");
    }
}
