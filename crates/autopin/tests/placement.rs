//! `autopin cpus`, `autopin place` and `autopin candidates` as a user runs them.

use assert_cmd::Command;
use predicates::prelude::*;

const CLOVERTOWN: &str = "package:2 l2:2 core:2 pu:1";
const TWO_SOCKET_SMT: &str = "package:2 l3:1 core:4 pu:2";

fn autopin() -> Command {
    Command::cargo_bin("autopin").expect("binary")
}

#[test]
fn cpus_prints_the_selection_in_thread_order() {
    autopin()
        .args(["cpus", "--synthetic", TWO_SOCKET_SMT, "S1:0-4"])
        .assert()
        .success()
        .stdout("8,10,12,14,9\n");
    autopin()
        .args(["cpus", "--synthetic", TWO_SOCKET_SMT, "E:N:4:1:2"])
        .assert()
        .success()
        .stdout("0,2,4,6\n");
    autopin()
        .args([
            "cpus",
            "-d",
            " ",
            "--synthetic",
            TWO_SOCKET_SMT,
            "S0:0-1@S1:0-1",
        ])
        .assert()
        .success()
        .stdout("0 2 8 10\n");
    autopin()
        .args(["cpus", "-p", "--synthetic", CLOVERTOWN])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "Domain N:\n\t0,1,2,3,4,5,6,7\n\nDomain S0:\n\t0,1,2,3\n",
        ));
}

#[test]
fn cpus_errors_exit_2_with_a_caret() {
    autopin()
        .args(["cpus", "--synthetic", TWO_SOCKET_SMT, "S0:0-3@S7:1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("position 7: unknown domain 'S7'"))
        .stderr(predicate::str::contains("\n         ^"))
        .stderr(predicate::str::contains(
            "valid domains on this machine: N, S0-S1, D0-D1, C0-C1, M0",
        ));
    for bad in [
        "",
        "S0:",
        "E:N:99",
        "N:0-16",
        "16",
        "S0:1-x",
        "@",
        "X:scatter",
        "E:N:2:1",
    ] {
        autopin()
            .args(["cpus", "--synthetic", TWO_SOCKET_SMT, "--", bad])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("autopin: error: pin expression"));
    }
}

#[test]
fn place_prints_mapping_and_summary() {
    autopin()
        .args([
            "place",
            "-n",
            "4",
            "--policy",
            "scatter",
            "--synthetic",
            TWO_SOCKET_SMT,
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("thread   1 -> CPU 8"))
        .stdout(predicate::str::contains("packages used: 2"))
        .stdout(predicate::str::contains("threads per core: at most 1"));
    let out = autopin()
        .args([
            "place",
            "-n",
            "4",
            "--policy",
            "compact",
            "--format",
            "json",
            "--synthetic",
            TWO_SOCKET_SMT,
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(v["cpus"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(v["summary"]["cores"], 2);
    assert_eq!(v["summary"]["max_threads_per_core"], 2);
}

#[test]
fn place_errors() {
    autopin()
        .args([
            "place",
            "-n",
            "4",
            "--policy",
            "fastest",
            "--synthetic",
            CLOVERTOWN,
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown policy 'fastest'"));
    autopin()
        .args([
            "place",
            "-n",
            "9",
            "--policy",
            "compact",
            "--synthetic",
            CLOVERTOWN,
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("only 8 CPUs are allowed"));
    autopin()
        .args([
            "place",
            "-n",
            "2",
            "--policy",
            "POWER",
            "--synthetic",
            CLOVERTOWN,
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("power"));
}

#[test]
fn place_with_a_sharing_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("share.csv");
    std::fs::write(&f, "0,1,1,9\n1,0,9,1\n1,9,0,1\n9,1,1,0\n").unwrap();
    let f = f.to_str().unwrap();
    // Pairs (0,3) and (1,2) on the SMT siblings of two cores of package 0.
    autopin()
        .args([
            "place",
            "--sharing",
            f,
            "--policy",
            "LP_COMPACT",
            "--synthetic",
            TWO_SOCKET_SMT,
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("policy LP_COMPACT: 0,2-3,1\n"));
    // Spread over the packages: each pair on one core, the pairs in different packages.
    autopin()
        .args([
            "place",
            "--sharing",
            f,
            "--policy",
            "LP_SCATTER",
            "--synthetic",
            TWO_SOCKET_SMT,
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("policy LP_SCATTER: 0,8-9,1\n"));
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "0 1\n2 0\n").unwrap();
    autopin()
        .args([
            "place",
            "--sharing",
            bad.to_str().unwrap(),
            "--policy",
            "GP",
            "--synthetic",
            TWO_SOCKET_SMT,
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.txt:2: not symmetric"));
}

#[test]
fn candidates_counts_and_json() {
    // Clovertown-like, 2 threads: same L2 / two L2s of a package / two packages.
    autopin()
        .args(["candidates", "-n", "2", "--synthetic", CLOVERTOWN])
        .assert()
        .success()
        .stdout(predicate::function(|s: &str| s.lines().count() == 3));
    // 4 threads: package splits 4+0 (1), 3+1 (1), 2+2 (3) → 5.
    autopin()
        .args(["candidates", "-n", "4", "--synthetic", CLOVERTOWN])
        .assert()
        .success()
        .stdout(predicate::function(|s: &str| s.lines().count() == 5));
    // 2-socket SMT: 3 classes for 2 threads, 8 for 4 (see the crate's tests for the count).
    autopin()
        .args(["candidates", "-n", "4", "--synthetic", TWO_SOCKET_SMT])
        .assert()
        .success()
        .stdout(predicate::function(|s: &str| s.lines().count() == 8));
    let out = autopin()
        .args([
            "candidates",
            "-n",
            "2",
            "--unpinned",
            "--max",
            "2",
            "--format",
            "json",
            "--synthetic",
            TWO_SOCKET_SMT,
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).expect("json");
    let a = v.as_array().expect("array");
    assert_eq!(a.len(), 3);
    assert_eq!(a[0]["unpinned"], true);
    assert_eq!(a[1]["cpus"], serde_json::json!([0, 1]));
    assert!(a[2]["description"]
        .as_str()
        .unwrap()
        .contains("Package 1+1"));
    autopin()
        .args(["candidates", "-n", "0", "--synthetic", CLOVERTOWN])
        .assert()
        .code(2);
}

/// hwloc's 24em64t-2n6c2t-pci machine: GPU G0 next to package 0 (even CPUs), G1 and G2
/// next to package 1 (odd CPUs). A rank whose GPU the environment names gets that GPU's
/// package; device expressions select the CPUs next to a device.
#[test]
fn ranks_and_expressions_follow_the_gpus() {
    let xml = autopin_testkit::data("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let xml = xml.to_str().unwrap();
    let share = |vars: &[(&str, &str)], rank: &str| {
        let mut c = autopin();
        c.env_remove("SLURM_STEP_GPUS")
            .env_remove("SLURM_JOB_GPUS")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env_remove("ROCR_VISIBLE_DEVICES")
            .env_remove("HIP_VISIBLE_DEVICES");
        for (k, v) in vars {
            c.env(k, v);
        }
        let out = c
            .args(["place", "--ranks", "2", "--rank", rank, "--load", xml])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let even = "rank 0 of 2: CPUs 0,2,4,6,8,10,12,14,16,18,20,22";
    let odd = "rank 0 of 2: CPUs 1,3,5,7,9,11,13,15,17,19,21,23";
    let even1 = "rank 1 of 2: CPUs 0,2,4,6,8,10,12,14,16,18,20,22";
    assert_eq!(share(&[], "0").0, even, "no GPU variable: the plain split");
    let (s, err) = share(&[("CUDA_VISIBLE_DEVICES", "2,0")], "0");
    assert_eq!(s, odd);
    assert!(
        err.contains("rank 0 works with GPU G2 (0000:14:00.0)"),
        "{err}"
    );
    assert_eq!(share(&[("CUDA_VISIBLE_DEVICES", "2,0")], "1").0, even1);
    assert_eq!(share(&[("SLURM_STEP_GPUS", "1,0")], "0").0, odd);
    assert_eq!(share(&[("SLURM_STEP_GPUS", "1,0")], "1").0, even1);
    let (s, err) = share(&[("CUDA_VISIBLE_DEVICES", "GPU-9a1b")], "0");
    assert_eq!(s, even);
    assert!(err.contains("GPUs not used for the split"), "{err}");
    autopin()
        .args(["cpus", "--load", xml, "IF:ib0:0-1@G2:0"])
        .assert()
        .success()
        .stdout("0,2,1\n");
    autopin()
        .args(["cpus", "--load", xml, "IF:ib9"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the devices here: 0000:00:1f.2 (sda)",
        ));
    autopin()
        .args(["cpus", "--synthetic", CLOVERTOWN, "--devices"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("lists no I/O devices"));
}
