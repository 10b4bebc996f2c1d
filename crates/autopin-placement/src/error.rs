//! Why a placement could not be made. Every variant is a usage error: the input (expression,
//! policy name, thread count, matrix file) was wrong for this machine, and the message says
//! what, where and what would be valid.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq)]
pub enum PlacementError {
    /// A pin expression or CPU list was wrong at a character position (byte offset).
    Expr {
        expr: String,
        position: usize,
        message: String,
        /// What would be valid here (e.g. the domains of this machine).
        valid: String,
    },
    /// An unknown policy or strategy name.
    UnknownPolicy { name: String, valid: String },
    /// More threads than allowed CPUs, zero threads, and the like.
    Threads { message: String },
    /// A policy needs measurements the machine model does not have.
    NeedsMeasurements { policy: String, message: String },
    /// A sharing matrix file was wrong (line is 1-based; 0 when the whole file is meant).
    Matrix {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

impl PlacementError {
    pub(crate) fn expr(
        expr: &str,
        position: usize,
        message: impl Into<String>,
        valid: impl Into<String>,
    ) -> Self {
        PlacementError::Expr {
            expr: expr.to_string(),
            position,
            message: message.into(),
            valid: valid.into(),
        }
    }

    pub(crate) fn threads(message: impl Into<String>) -> Self {
        PlacementError::Threads {
            message: message.into(),
        }
    }
}

impl fmt::Display for PlacementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlacementError::Expr {
                expr,
                position,
                message,
                valid,
            } => {
                // The caret line lets a user see the spot even in long @-joined expressions.
                let col = expr
                    .get(..*position)
                    .map(|s| s.chars().count())
                    .unwrap_or(*position);
                write!(
                    f,
                    "pin expression '{expr}', position {position}: {message}\n  {expr}\n  {}^",
                    " ".repeat(col)
                )?;
                if !valid.is_empty() {
                    write!(f, "\n{valid}")?;
                }
                Ok(())
            }
            PlacementError::UnknownPolicy { name, valid } => {
                write!(f, "unknown policy '{name}'; valid: {valid}")
            }
            PlacementError::Threads { message } => f.write_str(message),
            PlacementError::NeedsMeasurements { policy, message } => {
                write!(f, "policy {policy}: {message}")
            }
            PlacementError::Matrix {
                path,
                line,
                message,
            } => {
                if *line > 0 {
                    write!(f, "{}:{line}: {message}", path.display())
                } else {
                    write!(f, "{}: {message}", path.display())
                }
            }
        }
    }
}

impl std::error::Error for PlacementError {}
