//! Writing files the user asked for: whole or not at all. The one atomic writer of the
//! workspace; the libraries return bytes (reports, exports, views) and the CLI writes them.

use crate::error::CliError;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to a temporary file beside `path` and renames it into place (tempfile's
/// persist), so a reader never sees half a file and an interrupted write never destroys the
/// previous one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".autopin-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}

/// [`write_atomic`] with the error a user sees.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    write_atomic(path, bytes)
        .map_err(|e| CliError::usage(format!("{}: cannot write: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_engine::report::{CandidateRecord, Report, TimelinePoint};

    #[test]
    fn atomic_write_replaces_the_file() {
        let dir =
            std::env::temp_dir().join(format!("autopin-compare-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(write_atomic(&dir.join("missing/x.json"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn atomic_write_and_roundtrip() {
        let dir = std::env::temp_dir().join(format!("autopin-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        let r = Report {
            timeline: vec![TimelinePoint {
                t: 0.1,
                rate: 5.0,
                candidate: Some(0),
                state: "probe".into(),
                phase: None,
            }],
            candidates: vec![CandidateRecord {
                index: 0,
                label: "0,1".into(),
                cpus: Some(vec![0, 1]),
            }],
            ..Default::default()
        };
        write_atomic(&path, r.to_json().as_bytes()).unwrap();
        let back = Report::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back.candidates[0].label, "0,1");
        assert!(r
            .timeline_csv()
            .contains("0.100,5.000000e0,0,\"0,1\",probe"));
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
