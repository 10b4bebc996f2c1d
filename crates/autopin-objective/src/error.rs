//! One error type for objectives and their counting (this crate's parsers and
//! `autopin-perf`'s counters alike). Every variant renders as a sentence a user can act on:
//! what was wrong, where, and what is valid (or what to do instead).

use std::fmt;
use std::path::PathBuf;

/// Why a measurement facility is not usable here, and what to use instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Unavailable {
    /// What failed, in words ("hardware counters are not available: ...").
    pub reason: String,
    /// How to make it work, if anything can ("sysctl kernel.perf_event_paranoid=1").
    pub hint: Option<String>,
    /// What to use instead: an `--objective` string such as `task-clock`, or a phrase starting
    /// with "the " naming a counting mode.
    pub fallback: Option<String>,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reason)?;
        if let Some(h) = &self.hint {
            write!(f, "; to enable: {h}")?;
        }
        match self.fallback.as_deref() {
            // A mode rather than an objective ("the per-thread counting mode").
            Some(fb) if fb.starts_with("the ") => write!(f, "; fallback: {fb}")?,
            Some("heartbeat") => write!(
                f,
                "; fallback: --objective heartbeat (the program reports progress through include/autopin.h)"
            )?,
            Some(fb) => write!(
                f,
                "; fallback: --objective {fb} (or --objective heartbeat if the program reports progress through include/autopin.h)"
            )?,
            None => {}
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// Bad text (event name, objective expression). `pos` is the 0-based character index,
    /// shown as in pin expressions: "position N" and a caret under the character.
    #[error("invalid {what} '{input}', position {pos}: {msg}\n  {input}\n  {caret}^", caret = " ".repeat(*.pos))]
    Parse {
        what: &'static str,
        input: String,
        pos: usize,
        msg: String,
    },
    /// A facility (hardware counters, energy, a counting mode) cannot be used here.
    #[error("{0}")]
    Unavailable(Unavailable),
    /// An OS call failed; `context` says which and on what.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A file had content we cannot use.
    #[error("{path}: {msg}")]
    BadFile { path: PathBuf, msg: String },
    /// A request this crate knowingly does not handle.
    #[error("not supported: {0}")]
    Unsupported(String),
}

impl PerfError {
    pub(crate) fn parse(
        what: &'static str,
        input: &str,
        pos: usize,
        msg: impl Into<String>,
    ) -> Self {
        PerfError::Parse {
            what,
            input: input.to_string(),
            pos,
            msg: msg.into(),
        }
    }

    /// An OS call that failed, with what it was doing and on what.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        PerfError::Io {
            context: context.into(),
            source,
        }
    }

    /// The suggested fallback objective when this error says something is unavailable.
    pub fn fallback(&self) -> Option<&str> {
        match self {
            PerfError::Unavailable(u) => u.fallback.as_deref(),
            _ => None,
        }
    }

    /// Character position (0-based) of a parse error.
    pub fn position(&self) -> Option<usize> {
        match self {
            PerfError::Parse { pos, .. } => Some(*pos),
            _ => None,
        }
    }
}
