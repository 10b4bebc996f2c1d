//! `autopin simulate` (#57): the real search on simulated machines of real shapes (hwloc
//! dumps in tests/data), running program models whose optimum is known, keeps a pinning at
//! 95% of the optimum or better (median over seeds) for every model; bad input is a usage
//! error.

use std::process::Command;

fn autopin() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("autopin"));
    c.env("AUTOPIN_MEMORY", "off");
    c
}

fn dump(name: &str) -> String {
    autopin_testkit::data(&format!("hwloc-linux/{name}.tar.bz2"))
        .display()
        .to_string()
}

#[test]
fn every_model_is_searched_to_within_five_percent_of_its_optimum() {
    for (name, threads) in [("16amd64-8n2c", "8"), ("64fake-4n2s2ca2c2t", "16")] {
        for model in ["bandwidth", "pairs", "smt", "barrier", "phases"] {
            let dir = tempfile::tempdir().unwrap();
            let json = dir.path().join("o.json");
            let out = autopin()
                .args(["simulate", "--sysfs-root", &dump(name), "--model", model])
                .args(["-n", threads, "--seeds", "3", "--json"])
                .arg(&json)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{name} {model}: {err}");
            let doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let ratio = doc["median"]["ratio"].as_f64().unwrap();
            assert!(
                ratio >= 0.95,
                "{name} {model}: rate ÷ optimum {ratio}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert_eq!(doc["outcomes"].as_array().unwrap().len(), 3);
        }
    }
}

#[test]
fn bad_input_is_a_usage_error_that_says_what_is_valid() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["simulate", "--synthetic", "core:4 pu:1", "--model", "fast"],
            "valid: bandwidth, pairs, smt, barrier, phases",
        ),
        (
            &[
                "simulate",
                "--synthetic",
                "core:4 pu:1",
                "--model",
                "smt",
                "-n",
                "5",
            ],
            "from 1 to the 4 CPUs",
        ),
        (
            &[
                "simulate",
                "--sysfs-root",
                "/nonexistent/dump",
                "--model",
                "smt",
            ],
            "/nonexistent/dump",
        ),
    ];
    for (args, want) in cases {
        let out = autopin().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
