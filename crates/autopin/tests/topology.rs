//! `autopin topology` as a user runs it: sources, formats, and bad input.

use assert_cmd::Command;
use predicates::prelude::*;

fn autopin() -> Command {
    Command::cargo_bin("autopin").unwrap()
}

fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn synthetic_tree_and_summary() {
    autopin()
        .args(["topology", "--synthetic", "package:2 l3:1 core:4 pu:2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Package L#1 (P#1)"))
        .stdout(predicate::str::contains("Packages: 2"))
        .stdout(predicate::str::contains("Cores: 8"))
        .stdout(predicate::str::contains(
            "PUs: 16 online (0-15), 16 allowed (0-15)",
        ));
}

#[test]
fn json_round_trip_through_files() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.json");
    let b = tmp.path().join("b.json");
    autopin()
        .args([
            "topology",
            "--synthetic",
            "package:2 numa:2 l3:1 l2:2 core:2 pu:2",
            "--format",
            "json",
            "-o",
        ])
        .arg(&a)
        .assert()
        .success();
    autopin()
        .args(["topology", "--format", "json", "-o"])
        .arg(&b)
        .arg("--load")
        .arg(&a)
        .assert()
        .success();
    let (ta, tb) = (
        std::fs::read_to_string(&a).unwrap(),
        std::fs::read_to_string(&b).unwrap(),
    );
    let (va, vb): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&ta).unwrap(),
        serde_json::from_str(&tb).unwrap(),
    );
    assert_eq!(va["machine"]["objects"], vb["machine"]["objects"]);
    assert_eq!(va["pus"], vb["pus"]);
    assert_eq!(va["pus"].as_array().unwrap().len(), 32);
    assert_eq!(va["pus"][31]["numa"], serde_json::json!([3]));
    assert_eq!(va["pus"][8]["numa"], serde_json::json!([1]));
}

#[test]
fn host_agrees_with_lstopo() {
    autopin_testkit::require!(
        have("lstopo-no-graphics"),
        "lstopo-no-graphics is not installed"
    );
    let tmp = tempfile::tempdir().unwrap();
    let console = tmp.path().join("host.console");
    let out = std::process::Command::new("lstopo-no-graphics")
        .arg("-v")
        .output()
        .unwrap();
    std::fs::write(&console, &out.stdout).unwrap();
    let json = tmp.path().join("ours.json");
    autopin()
        .args(["topology", "--format", "json", "-o"])
        .arg(&json)
        .assert()
        .success();
    let check = std::process::Command::new("python3")
        .arg(autopin_testkit::tool("hwloc_console_check.py"))
        .arg(&console)
        .arg(&json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && text.trim_end().ends_with("OK"),
        "{text}"
    );
}

#[test]
fn dump_through_the_cli_matches_lstopo() {
    let tmp = tempfile::tempdir().unwrap();
    let root = autopin_testkit::hwloc_dump("16em64t-4s2c2t");
    let json = tmp.path().join("ours.json");
    autopin()
        .args(["topology", "--format", "json", "-o"])
        .arg(&json)
        .arg("--sysfs-root")
        .arg(&root)
        .assert()
        .success();
    let check = std::process::Command::new("python3")
        .arg(autopin_testkit::tool("hwloc_console_check.py"))
        .arg(autopin_testkit::data("hwloc-linux/16em64t-4s2c2t.console"))
        .arg(&json)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&check.stdout)
        .trim_end()
        .ends_with("OK"));
    autopin()
        .args(["topology", "--sysfs-root"])
        .arg(&root)
        .assert()
        .success()
        .stdout(predicate::str::contains("Packages: 4"))
        .stdout(predicate::str::contains("Xeon"));
}

#[test]
fn bad_input_is_a_usage_error() {
    autopin()
        .args(["topology", "--sysfs-root", "/nonexistent/root"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent/root"));
    autopin()
        .args(["topology", "--synthetic", "package:2 cores:4 pu:2"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("position 10")
                .and(predicate::str::contains("unknown level 'cores'")),
        );
    let tmp = tempfile::tempdir().unwrap();
    let bad_json = tmp.path().join("bad.json");
    std::fs::write(&bad_json, "{\n  \"machine\": [1, 2\n").unwrap();
    autopin()
        .args(["topology", "--load"])
        .arg(&bad_json)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.json").and(predicate::str::contains("line")));
    let bad_xml = tmp.path().join("bad.xml");
    std::fs::write(
        &bad_xml,
        "<?xml version=\"1.0\"?>\n<topology>\n<object type=\"Machine\">\n</topology>\n",
    )
    .unwrap();
    autopin()
        .args(["topology", "--load"])
        .arg(&bad_xml)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.xml"));
    autopin()
        .args(["topology", "--synthetic", "pu:2", "--load"])
        .arg(&bad_xml)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("choose one"));
    autopin()
        .args(["topology", "--format", "pdf"])
        .assert()
        .code(2);
}

#[test]
fn formats_render() {
    for f in ["boxes", "dot", "svg", "tree"] {
        let out = autopin()
            .args([
                "topology",
                "--synthetic",
                "package:2 l3:1 core:4 pu:2",
                "--format",
                f,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{f}");
        assert!(!out.stdout.is_empty(), "{f} printed nothing");
    }
}

/// The flat view with object ids renumbered by first appearance, so two sources that number
/// their objects differently compare equal when they group PUs the same way.
fn normalized_pus(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    use std::collections::HashMap;
    let mut maps: HashMap<String, HashMap<String, usize>> = HashMap::new();
    let mut renumber = |level: &str, v: &serde_json::Value| -> serde_json::Value {
        if v.is_null() {
            return v.clone();
        }
        let m = maps.entry(level.to_string()).or_default();
        let n = m.len();
        serde_json::json!(*m.entry(v.to_string()).or_insert(n))
    };
    let mut out = Vec::new();
    for pu in doc["pus"].as_array().unwrap() {
        let mut caches = serde_json::Map::new();
        for (k, v) in pu["caches"].as_object().unwrap() {
            caches.insert(k.clone(), renumber(k, v));
        }
        out.push(serde_json::json!({
            "os": pu["os"], "allowed": pu["allowed"], "online": pu["online"], "numa": pu["numa"],
            "core": renumber("core", &pu["core"]), "package": renumber("package", &pu["package"]),
            "caches": caches,
        }));
    }
    out
}

#[test]
fn hwloc_xml_of_this_host_matches_sysfs() {
    autopin_testkit::require!(have("lstopo"), "lstopo is not installed");
    let tmp = tempfile::tempdir().unwrap();
    let xml = tmp.path().join("host.xml");
    let st = std::process::Command::new("lstopo")
        .arg("--of")
        .arg("xml")
        .arg(&xml)
        .status()
        .unwrap();
    assert!(st.success());
    let from_xml = autopin()
        .args(["topology", "--format", "json", "--load"])
        .arg(&xml)
        .output()
        .unwrap();
    assert!(
        from_xml.status.success(),
        "{}",
        String::from_utf8_lossy(&from_xml.stderr)
    );
    let from_sysfs = autopin()
        .args(["topology", "--format", "json"])
        .output()
        .unwrap();
    let a: serde_json::Value = serde_json::from_slice(&from_xml.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&from_sysfs.stdout).unwrap();
    assert_eq!(normalized_pus(&a), normalized_pus(&b));
}

/// Every format shows the I/O objects of the 24em64t XML (devices by bus id, OS devices by
/// name), the bridges only with `--whole-io`, none of them with `--no-io`.
#[test]
fn every_format_shows_io_unless_no_io() {
    let xml = autopin_testkit::data("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let run = |format: &str, extra: &[&str]| {
        let out = autopin()
            .args(["topology", "--format", format, "--load"])
            .arg(&xml)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{format} {extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let devices = ["0000:05:00.0", "0000:00:1f.2", "0000:11:00.0"];
    let names = ["eth0", "ib0", "mlx4_0", "sda"];
    for format in ["tree", "boxes", "json", "dot", "svg"] {
        let plain = run(format, &[]);
        for want in devices.iter().chain(&names) {
            assert!(plain.contains(want), "{format} lacks {want}:\n{plain}");
        }
        assert!(!plain.contains("0000:00:01.0"), "{format}:\n{plain}");
        let whole = run(format, &["--whole-io"]);
        for want in devices.iter().chain(&names).chain(&["0000:00:01.0"]) {
            assert!(
                whole.contains(want),
                "{format} --whole-io lacks {want}:\n{whole}"
            );
        }
        let none = run(format, &["--no-io"]);
        for gone in devices.iter().chain(&names).chain(&["0000:00:01.0"]) {
            assert!(
                !none.contains(gone),
                "{format} --no-io shows {gone}:\n{none}"
            );
        }
    }
    let tree = run("tree", &["-v"]);
    assert!(
        tree.contains("\n      OpenFabrics L#4 \"mlx4_0\"\n"),
        "{tree}"
    );
    assert!(tree.contains("\n      Block L#5 \"sda\"\n"), "{tree}");
}

/// `--whole-io` shows the PCI tree lstopo --whole-io shows (a host bridge, the root port in
/// front of the RAID controller, the host bridge's own function); the default leaves the
/// bridges and that function out, in the tree and in the JSON.
#[test]
fn whole_io_shows_bridges_and_every_device() {
    let root = autopin_testkit::hwloc_dump("40intel64-4n10c+pci-conflicts");
    let run = |extra: &[&str]| {
        let out = autopin()
            .arg("topology")
            .arg("--sysfs-root")
            .arg(&root)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let plain = run(&[]);
    assert!(
        plain.contains("\n  PCI 0000:01:00.0 (RAID 1000:0079)\n    Block \"sda\"\n"),
        "{plain}"
    );
    assert!(
        !plain.contains("Bridge") && !plain.contains("0000:00:00.0"),
        "{plain}"
    );
    let whole = run(&["--whole-io"]);
    assert!(
        whole.contains(
            "\n  HostBridge (buses=0000:[00-01])\n    PCI 0000:00:00.0 (HostBridge 8086:3407)\n    \
             PCIBridge 0000:00:03.0 (buses=0000:[01-01])\n      PCI 0000:01:00.0 (RAID 1000:0079)\n        \
             Block \"sda\"\n"
        ),
        "{whole}"
    );
    let verbose = run(&["--whole-io", "-v"]);
    assert!(
        verbose.contains(
            "\n  HostBridge L#0 (buses=0000:[00-01])\n    \
             PCI L#0 (busid=0000:00:00.0 id=8086:3407 class=0600(HostBridge))\n    \
             PCIBridge L#1 (busid=0000:00:03.0 id=8086:340a class=0604(PCIBridge) buses=0000:[01-01])\n      \
             PCI L#1 (busid=0000:01:00.0 id=1000:0079 class=0104(RAID))\n"
        ),
        "{verbose}"
    );
    let json = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["--format", "json"];
        args.extend(extra);
        serde_json::from_str(&run(&args)).unwrap()
    };
    let plain = json(&[]);
    assert!(plain["machine"].get("pci_bridges").is_none(), "{plain}");
    assert!(plain["machine"].get("pci_other").is_none());
    assert!(plain["machine"]["io"][0].get("bridge").is_none());
    let whole = json(&["--whole-io"]);
    let bridges = whole["machine"]["pci_bridges"].as_array().unwrap();
    assert_eq!(bridges.len(), 2);
    assert_eq!(bridges[1]["busid"], "0000:00:03.0");
    assert_eq!(whole["machine"]["pci_other"][0]["busid"], "0000:00:00.0");
    assert_eq!(whole["machine"]["io"][0]["bridge"], 1);
    // The JSON loads back with its tree.
    let tmp = tempfile::tempdir().unwrap();
    let saved = tmp.path().join("whole.json");
    std::fs::write(&saved, serde_json::to_string(&whole).unwrap()).unwrap();
    let again = autopin()
        .args(["topology", "--whole-io", "--load"])
        .arg(&saved)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("PCIBridge 0000:00:03.0"));
}

/// `--whole-io` with `--no-io` contradicts itself; a synthetic machine has no I/O to show.
#[test]
fn whole_io_contradictions_are_usage_errors() {
    autopin()
        .args(["topology", "--whole-io", "--no-io"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--whole-io").and(predicate::str::contains("--no-io")));
    autopin()
        .args([
            "topology",
            "--whole-io",
            "--synthetic",
            "package:2 core:2 pu:1",
        ])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("--whole-io").and(predicate::str::contains("--synthetic")),
        );
}
