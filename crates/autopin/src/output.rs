//! Writing files the user asked for, as the commands do: they call autopin-files' atomic
//! writer ([`autopin_files::write`]) themselves, and its errors become usage errors (exit 2)
//! that name the user's path.

use crate::error::CliError;

impl From<autopin_files::write::WriteError> for CliError {
    fn from(e: autopin_files::write::WriteError) -> Self {
        CliError::usage(e.to_string())
    }
}

/// [`autopin_files::write::check_writable`] for every output path given.
pub fn check_all_writable<'a>(
    paths: impl IntoIterator<Item = &'a Option<std::path::PathBuf>>,
) -> Result<(), CliError> {
    paths
        .into_iter()
        .flatten()
        .try_for_each(|p| Ok(autopin_files::write::check_writable(p)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_engine::report::{CandidateRecord, Report, TimelinePoint};
    use autopin_files::write::{check_writable, write_atomic, write_atomically};

    #[test]
    fn a_users_path_that_cannot_be_written_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("missing/r.json");
        let e = CliError::from(write_atomically(&p, b"x").unwrap_err());
        assert_eq!(e.exit_code(), 2);
        assert!(e
            .to_string()
            .starts_with(&format!("{}: cannot write: ", p.display())));
        assert_eq!(
            CliError::from(check_writable(&p).unwrap_err()).exit_code(),
            2
        );
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
                team: None,
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
