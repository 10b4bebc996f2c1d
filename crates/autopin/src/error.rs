//! How a subcommand fails, and which exit code that becomes.

use std::fmt;

/// A failure of an autopin subcommand. `Usage` covers every bad input (arguments, files,
/// expressions) and exits with 2; `Internal` is autopin's own failure and exits with 1.
#[derive(Debug)]
pub enum CliError {
    Usage(String),
    Internal(String),
    /// A failure of the engine's run path, which knows its own kind and exit code.
    Engine(autopin_engine::EngineError),
    /// A comparison that could not be made, with its own exit status.
    Compare(autopin_compare::CompareError),
}

impl From<autopin_compare::CompareError> for CliError {
    fn from(e: autopin_compare::CompareError) -> Self {
        CliError::Compare(e)
    }
}

impl From<autopin_engine::EngineError> for CliError {
    fn from(e: autopin_engine::EngineError) -> Self {
        CliError::Engine(e)
    }
}

/// The library crates' typed errors, by the exit code they become: bad input is a usage
/// error (exit 2), a failure of autopin's own an internal one (exit 1). The message is the
/// error's own.
macro_rules! cli_errors {
    ($variant:ident: $($t:ty),* $(,)?) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self {
                CliError::$variant(e.to_string())
            }
        }
    )*};
}

cli_errors!(Usage:
    autopin_engine::PinPlanError,
    autopin_engine::MergeError,
    autopin_cluster::UnknownCombine,
);
cli_errors!(Internal: autopin_compare::CsvError, autopin_compare::SignalHandlersError);

impl CliError {
    pub fn usage(msg: impl Into<String>) -> Self {
        CliError::Usage(msg.into())
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        CliError::Internal(msg.into())
    }
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Internal(_) => 1,
            CliError::Engine(e) => e.exit_code(),
            CliError::Compare(e) => e.exit_status(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Internal(m) => f.write_str(m),
            CliError::Engine(e) => e.fmt(f),
            CliError::Compare(e) => e.fmt(f),
        }
    }
}

/// What a subcommand returns: the process exit code on success (the target's own status for
/// `run` and `pin`), or an error to print.
pub type CmdResult = Result<i32, CliError>;
