//! Every hwloc Linux dump in tests/data/hwloc-linux must read into the same topology lstopo
//! showed for it: packages, cores, L1d/L2/L3 groups, NUMA locality, allowed and offline PUs.
//! The comparison is done by tests/tools/hwloc_console_check.py, the project's referee.

use autopin_topology::source::sysfs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's `tests/` directory (data and tools).
fn repo_tests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

/// Extracts a dump into a fresh directory and returns the root (the tarball's single top
/// directory, whose name sometimes differs from the tarball's).
fn extract(tarball: &Path, into: &Path) -> PathBuf {
    let status = Command::new("tar")
        .arg("xjf")
        .arg(tarball)
        .arg("-C")
        .arg(into)
        .status()
        .expect("tar runs");
    assert!(status.success(), "cannot extract {}", tarball.display());
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(into)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "{} should hold one directory",
        tarball.display()
    );
    dirs.pop().unwrap()
}

#[test]
fn every_dump_matches_lstopo() {
    let dir = repo_tests().join("data/hwloc-linux");
    let checker = repo_tests().join("tools/hwloc_console_check.py");
    let mut dumps: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/data/hwloc-linux exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".tar.bz2"))
        .collect();
    dumps.sort();
    assert!(
        dumps.len() >= 10,
        "expected the shared dumps, found {}",
        dumps.len()
    );
    let mut failures = Vec::new();
    for tarball in &dumps {
        let name = tarball
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".tar.bz2")
            .to_string();
        let tmp = tempfile::tempdir().unwrap();
        let root = extract(tarball, tmp.path());
        let machine = match sysfs::read_with_affinity(&root, None) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: read failed: {e}"));
                continue;
            }
        };
        machine.validate().unwrap();
        assert!(
            machine.warnings.is_empty(),
            "{name}: a sound dump reads without warnings: {:?}",
            machine.warnings
        );
        // The JSON document loads back into the identical model.
        let doc =
            serde_json::to_string(&autopin_topology::source::json::to_document(&machine)).unwrap();
        let back = autopin_topology::source::json::from_str(&doc)
            .unwrap_or_else(|e| panic!("{name}: reload failed: {e}"));
        assert!(back == machine, "{name}: JSON round trip changed the model");
        let json = tmp.path().join("ours.json");
        std::fs::write(
            &json,
            serde_json::to_string(&serde_json::json!({ "pus": machine.flat_pus() })).unwrap(),
        )
        .unwrap();
        let out = Command::new("python3")
            .arg(&checker)
            .arg(dir.join(format!("{name}.console")))
            .arg(&json)
            .output()
            .expect("python3 runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let console = std::fs::read_to_string(dir.join(format!("{name}.console"))).unwrap();
        let expected_kinds = kinds_from_console(&console);
        let ours_kinds: Vec<Vec<u32>> = {
            let mut by: std::collections::BTreeMap<usize, Vec<u32>> = Default::default();
            for p in machine.flat_pus().iter().filter(|p| p.online) {
                if let Some(k) = p.kind {
                    by.entry(k).or_default().push(p.os);
                }
            }
            by.into_values().collect()
        };
        if expected_kinds != ours_kinds {
            failures.push(format!(
                "{name}: core kinds differ: lstopo {expected_kinds:?}, ours {ours_kinds:?}"
            ));
        }
        if !out.status.success() || !text.trim_end().ends_with("OK") {
            failures.push(format!("{name}:\n{text}"));
        } else {
            eprintln!("{name}: OK");
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} dumps differ from lstopo:\n{}",
        failures.len(),
        dumps.len(),
        failures.join("\n")
    );
}

/// PUs grouped by the `cpukind=K` lstopo prints on their core (or PU), ordered by K.
fn kinds_from_console(console: &str) -> Vec<Vec<u32>> {
    let mut by: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    let mut current: Option<u32> = None;
    for line in console.lines() {
        let t = line.trim_start();
        let kind = t
            .split("cpukind=")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|k| k.parse().ok());
        if t.starts_with("Core ") {
            current = kind;
        } else if t.starts_with("PU ") {
            let os = t
                .split("P#")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse::<u32>().ok());
            if let (Some(k), Some(os)) = (kind.or(current), os) {
                by.entry(k).or_default().push(os);
            }
        }
    }
    by.into_values()
        .map(|mut v| {
            v.sort_unstable();
            v
        })
        .collect()
}
