//! Writing files the user asked for: whole or not at all.

use crate::error::CliError;
use std::path::Path;

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so a reader
/// never sees half a file and an interrupted write never destroys the previous one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    autopin_engine::report::write_atomic(path, bytes)
        .map_err(|e| CliError::usage(format!("{}: cannot write: {e}", path.display())))
}
