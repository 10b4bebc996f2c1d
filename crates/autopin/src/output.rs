//! Writing files the user asked for: whole or not at all.

use crate::error::CliError;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to a temporary file beside `path` and renames it into place, so a reader
/// never sees half a file and an interrupted write never destroys the previous one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, path));
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::usage(format!("{}: cannot write: {e}", path.display()))
    })
}
