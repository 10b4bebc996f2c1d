//! Why a machine could not be read.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A file could not be read or made no sense; always names the file.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    /// A synthetic spec was wrong at a character position.
    #[error("synthetic spec '{spec}', position {position}: {message}")]
    Spec {
        spec: String,
        position: usize,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
}

impl TopologyError {
    pub fn file(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        TopologyError::File {
            path: path.into(),
            message: message.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, TopologyError>;
