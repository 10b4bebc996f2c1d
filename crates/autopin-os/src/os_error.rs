//! The OS side's failures as the engine's [`OsError`], by kind: perf's errors (counting
//! refused, an energy counter unreadable) and failed system calls.

use autopin_engine::sensors::OsError;
use autopin_objective::PerfError;

/// `e` as the engine sees it; the message is perf's, unchanged.
pub fn from_perf(e: PerfError) -> OsError {
    let message = e.to_string();
    match &e {
        PerfError::Io { source, .. } => OsError::classify(source, message),
        PerfError::Unavailable(_) | PerfError::Unsupported(_) => OsError::NotSupported(message),
        _ => OsError::Io(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_errors_keep_their_message_and_get_a_kind() {
        let denied = PerfError::Io {
            context: "perf_event_open".into(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        let text = denied.to_string();
        assert_eq!(from_perf(denied), OsError::PermissionDenied(text));
        let gone = PerfError::Io {
            context: "perf_event_open(tid 7)".into(),
            source: std::io::Error::from_raw_os_error(libc::ESRCH),
        };
        assert!(matches!(from_perf(gone), OsError::Gone(_)));
        let no = PerfError::Unsupported("per-CPU counting".into());
        assert_eq!(
            from_perf(no),
            OsError::NotSupported("not supported: per-CPU counting".into())
        );
    }
}
