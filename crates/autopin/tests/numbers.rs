//! Numeric options reject NaN, infinity, negatives and meaningless zeros before anything
//! starts: exit 2, a message naming the option and the valid range, and no program run.

use assert_cmd::Command;

fn autopin() -> Command {
    Command::cargo_bin("autopin").unwrap()
}

/// Runs `args` and checks it is rejected naming `option` and `valid`, without running the
/// program given after `--` (which would create a marker file).
fn rejected(args: &[&str], option: &str, valid: &str) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let out = autopin()
        .args(args)
        .args(["--", "sh", "-c", "touch \"$0\""])
        .arg(&marker)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(option), "{args:?} should name {option}: {err}");
    assert!(err.contains(valid), "{args:?} should say {valid:?}: {err}");
    assert!(!marker.exists(), "{args:?} started the program");
}

#[test]
fn run_rejects_bad_seconds() {
    for probe in ["-1", "0", "nan", "inf"] {
        rejected(&["run", "--probe", probe], "--probe", "seconds from 0.001");
    }
    rejected(&["run", "--budget", "0"], "--budget", "seconds from 0.001");
    rejected(&["run", "--tick", "-0.1"], "--tick", "seconds from 0.001");
    rejected(&["run", "-t", "0"], "--sample", "seconds from 0.001");
    rejected(&["run", "-w", "-3"], "--warmup", "seconds from 0 to");
    rejected(&["run", "-i", "NaN"], "--init", "seconds from 0 to");
    rejected(
        &["run", "--watch-duration", "-1"],
        "--watch-duration",
        "from 0 to",
    );
    rejected(
        &["run", "--watch-threshold", "1"],
        "--watch-threshold",
        "[0, 1)",
    );
    rejected(
        &["run", "--rendezvous-timeout", "inf"],
        "--rendezvous-timeout",
        "seconds from 0 to",
    );
}

#[test]
fn run_rejects_meaningless_counts() {
    rejected(&["run", "-n", "0"], "--threads", "≥ 1");
    rejected(&["run", "--max-candidates", "0"], "--max-candidates", "≥ 1");
    rejected(&["run", "-n", "-2"], "--threads", "≥ 1");
    rejected(
        &["pin", "--policy", "compact", "-n", "0"],
        "--threads",
        "≥ 1",
    );
}

#[test]
fn other_commands_reject_bad_numbers() {
    let cases: [(&[&str], &str, &str); 5] = [
        (
            &["attach", "--duration", "0", "1"],
            "--duration",
            "seconds from 0.001",
        ),
        (&["candidates", "-n", "0"], "--threads", "≥ 1"),
        (
            &["place", "-n", "0", "--policy", "compact"],
            "--threads",
            "≥ 1",
        ),
        (&["place", "--ranks", "0", "--rank", "0"], "--ranks", "≥ 1"),
        (&["measure", "latency", "--rounds", "5"], "--rounds", "≥ 10"),
    ];
    for (args, option, valid) in cases {
        let out = autopin().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(option) && err.contains(valid),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn good_numbers_still_parse() {
    autopin()
        .args(["candidates", "-n", "2", "--synthetic", "core:2 pu:1"])
        .assert()
        .success();
    // candidates keeps 0 = every class.
    autopin()
        .args(["candidates", "-n", "2", "--max-candidates", "0"])
        .args(["--synthetic", "core:2 pu:1"])
        .assert()
        .success();
}
