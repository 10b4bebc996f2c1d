//! How reading, measuring and inferring fail.

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// A file's content is wrong at a known line (1-based).
    #[error("{file}:{line}: {msg}")]
    Parse {
        file: String,
        line: usize,
        msg: String,
    },
    /// A file cannot be used as a whole (unreadable, empty, unknown format).
    #[error("{file}: {msg}")]
    File { file: String, msg: String },
    /// A live measurement could not be done (pinning refused, partner CPU unresponsive).
    #[error("{0}")]
    Measure(String),
    /// The data does not support an inference (too few CPUs, non-finite values).
    #[error("{0}")]
    Infer(String),
}

impl LatencyError {
    pub fn parse(file: &str, line: usize, msg: impl Into<String>) -> Self {
        LatencyError::Parse {
            file: file.to_string(),
            line,
            msg: msg.into(),
        }
    }
    pub fn file(path: &Path, msg: impl Into<String>) -> Self {
        LatencyError::File {
            file: path.display().to_string(),
            msg: msg.into(),
        }
    }
}

/// Why a memory budget such as `256MiB` was refused ([`crate::measure::memory_speed::parse_size`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("`{text}` is not a size (examples: 256MiB, 1GiB, 64M)")]
    NotASize { text: String },
    #[error("`{text}`: unknown unit `{unit}` (use KiB, MiB or GiB)")]
    UnknownUnit { text: String, unit: String },
    #[error("`{text}`: the budget must be at least 4MiB")]
    TooSmall { text: String },
}

pub type Result<T> = std::result::Result<T, LatencyError>;
