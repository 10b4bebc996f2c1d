//! Latency files: core-to-core-latency CSV matrices and MCTOP `.mct` descriptions.

pub mod c2c;
pub mod mct;

use crate::error::{LatencyError, Result};
use std::path::Path;

/// What a latency file held, ready for inference.
#[derive(Debug, Clone)]
pub enum LatencyFile {
    C2c(crate::matrix::LatencyMatrix),
    Mct(mct::MctFile),
}

/// The largest value a latency file may hold: 1e9 (a second in nanoseconds; core-to-core
/// latencies are tens to thousands). Beyond it the arithmetic on the matrix overflows
/// (1e308 became "latency … is inf", named neither file nor line).
pub const MAX_VALUE: f64 = 1e9;

/// Reads a file, telling the format apart by its content: MCTOP files start with `#`.
pub fn read_file(path: &Path) -> Result<LatencyFile> {
    let text = autopin_files::read_to_string_bounded(path, autopin_files::MAX_INPUT)
        .map_err(|e| LatencyError::file(path, e.to_string()))?;
    let name = path.display().to_string();
    let first = text.lines().map(str::trim).find(|l| !l.is_empty());
    match first {
        None => Err(LatencyError::file(
            path,
            "empty file; expected a core-to-core-latency CSV matrix or an MCTOP .mct file",
        )),
        Some(l) if l.starts_with('#') => Ok(LatencyFile::Mct(mct::parse(&text, &name)?)),
        Some(l) if l.starts_with('{') || l.starts_with('<') => Err(LatencyError::file(
            path,
            "this is JSON or XML, not a latency matrix; load topology documents and hwloc XML with --load",
        )),
        Some(_) => Ok(LatencyFile::C2c(c2c::parse(&text, &name)?)),
    }
}
