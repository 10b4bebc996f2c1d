//! Every hwloc Linux dump in tests/data must read into the same topology lstopo showed for
//! it: packages, cores, L1d/L2/L3 groups, NUMA locality, allowed and offline PUs.
//! The comparison is done by tests/tools/hwloc_console_check.py, the project's referee.

use autopin_topology::source::sysfs;
use std::process::Command;

#[test]
fn every_dump_matches_lstopo() {
    let checker = autopin_testkit::tool("hwloc_console_check.py");
    let dumps = autopin_testkit::hwloc_dump_names();
    assert!(
        dumps.len() >= 16,
        "expected the repository's dumps, found {}",
        dumps.len()
    );
    let mut failures = Vec::new();
    for name in &dumps {
        let tmp = tempfile::tempdir().unwrap();
        let root = autopin_testkit::hwloc_dump(name);
        let console_path = autopin_testkit::data(&format!("hwloc-linux/{name}.console"));
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
            .arg(&console_path)
            .arg(&json)
            .output()
            .expect("python3 runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let console = autopin_testkit::hwloc_console(name);
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
