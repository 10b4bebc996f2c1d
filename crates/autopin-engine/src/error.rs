//! How the engine fails, by kind, so that the command line can pick the exit code without
//! reading messages: bad input and refused permissions are the user's to fix (exit 2), OS
//! and internal failures are not (exit 1), and a program that could not be started exits
//! the way a shell reports it (127 not found, 126 not executable).

/// Which kind of failure an [`EngineError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad arguments or input (a plan that does not validate, an unknown PID, an objective
    /// that cannot be measured as asked).
    Usage,
    /// The OS refused: another user's process, pinning not permitted.
    Permission,
    /// An OS call failed for reasons outside the user's input.
    Os,
    /// A defect or an unexpected state of autopin itself.
    Internal,
}

/// A failure of one engine run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Permission(String),
    #[error("{0}")]
    Os(String),
    #[error("{0}")]
    Internal(String),
    /// The target program did not start; `exit_code` is what a shell would report.
    #[error("{message}")]
    Launch { message: String, exit_code: i32 },
}

impl EngineError {
    pub fn usage(msg: impl Into<String>) -> Self {
        EngineError::Usage(msg.into())
    }
    pub fn os(msg: impl Into<String>) -> Self {
        EngineError::Os(msg.into())
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        EngineError::Internal(msg.into())
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Usage(_) => ErrorKind::Usage,
            EngineError::Permission(_) => ErrorKind::Permission,
            EngineError::Os(_) | EngineError::Launch { .. } => ErrorKind::Os,
            EngineError::Internal(_) => ErrorKind::Internal,
        }
    }

    /// The process exit code this failure maps to.
    pub fn exit_code(&self) -> i32 {
        match self {
            EngineError::Launch { exit_code, .. } => *exit_code,
            _ => match self.kind() {
                ErrorKind::Usage | ErrorKind::Permission => 2,
                ErrorKind::Os | ErrorKind::Internal => 1,
            },
        }
    }
}

/// A failure of the OS side: a refusal is the user's to fix (another user's process), every
/// other kind is the OS's.
impl From<crate::sensors::OsError> for EngineError {
    fn from(e: crate::sensors::OsError) -> Self {
        match e {
            crate::sensors::OsError::PermissionDenied(m) => EngineError::Permission(m),
            other => EngineError::Os(other.to_string()),
        }
    }
}

/// Why a skip mask or a pin plan was refused ([`crate::pin_plan`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinPlanError {
    #[error("skip mask {text:?} has no hex digits (expected e.g. 0x1)")]
    NoHexDigits { text: String },
    /// The first character that is not a hex digit, at its position (counted from 0, as in
    /// pin expressions); the message puts a caret under it.
    #[error(
        "skip mask {text:?}, position {position}: {found:?} is not a hex digit (expected e.g. 0x5)\n  {text}\n  {}^",
        " ".repeat(.text[..*.position].chars().count())
    )]
    NotHexDigit {
        text: String,
        position: usize,
        found: char,
    },
    #[error("skip mask {text:?} is longer than {max_bits} bits")]
    TooLong { text: String, max_bits: usize },
    #[error("the CPU list is empty")]
    NoCpus,
}

/// Why rank reports could not be merged into a job report ([`crate::job_report::merge`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("no reports to merge")]
    NoReports,
    /// Two files hold the same rank of the same job.
    #[error(
        "{first} and {second} are both rank {rank} of the same job: give each rank's report once"
    )]
    SameRank {
        first: String,
        second: String,
        rank: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_exit_codes() {
        assert_eq!(EngineError::usage("x").exit_code(), 2);
        assert_eq!(EngineError::Permission("x".into()).exit_code(), 2);
        assert_eq!(EngineError::os("x").exit_code(), 1);
        assert_eq!(EngineError::internal("x").exit_code(), 1);
        let e = EngineError::Launch {
            message: "nope: command not found".into(),
            exit_code: 127,
        };
        assert_eq!((e.exit_code(), e.kind()), (127, ErrorKind::Os));
        assert_eq!(e.to_string(), "nope: command not found");
    }

    #[test]
    fn an_os_refusal_is_the_users_to_fix_and_keeps_its_message() {
        use crate::sensors::OsError;
        let refused = EngineError::from(OsError::PermissionDenied("move_pages(7): EPERM".into()));
        assert_eq!(
            (refused.exit_code(), refused.kind()),
            (2, ErrorKind::Permission)
        );
        assert_eq!(refused.to_string(), "move_pages(7): EPERM");
        let gone = EngineError::from(OsError::Gone("/proc/7/maps: not found".into()));
        assert_eq!(gone, EngineError::Os("/proc/7/maps: not found".into()));
    }
}
