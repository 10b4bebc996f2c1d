//! `autopin doctor` on this machine and on a made-up one (a directory with proc/ and sys/):
//! no PMU, perf closed to users, a CPU quota of half a CPU, one NUMA node, numbers and fixes
//! as a user reads them.

use std::path::Path;
use std::process::Command;

fn autopin() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("autopin"))
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `autopin doctor --json` on the made-up machine below `root`: it succeeds, and says this.
fn doctor_json(root: &Path) -> serde_json::Value {
    let out = autopin()
        .args(["doctor", "--json", "--root"])
        .arg(root)
        .env_remove("SLURM_JOB_ID")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn by_name(v: &serde_json::Value, name: &str) -> serde_json::Value {
    v.as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {v}"))
        .clone()
}

#[test]
fn a_machine_without_pmu_with_a_quota_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "proc/sys/kernel/perf_event_paranoid", "3\n");
    write(root, "proc/sys/kernel/numa_balancing", "0\n");
    write(
        root,
        "proc/stat",
        "cpu  10 0 10 100 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0\n",
    );
    write(root, "proc/self/cgroup", "0::/job\n");
    write(root, "sys/fs/cgroup/job/cpu.max", "50000 100000\n");
    write(root, "sys/devices/system/cpu/online", "0-1\n");
    write(root, "sys/devices/system/node/node0/cpulist", "0-1\n");
    std::fs::create_dir_all(root.join("sys/bus/event_source/devices/software")).unwrap();
    let v = doctor_json(root);
    let pmu = by_name(&v, "hardware counters");
    assert_eq!(pmu["status"], "missing");
    assert!(pmu["fix"].as_str().unwrap().contains("task-clock"), "{pmu}");
    let paranoid = by_name(&v, "perf_event_paranoid");
    if rustix::process::geteuid().is_root() {
        assert_eq!(
            paranoid["status"], "ok",
            "root may count anyway: {paranoid}"
        );
    } else {
        assert_eq!(paranoid["status"], "missing");
        assert!(paranoid["fix"]
            .as_str()
            .unwrap()
            .contains("perf_event_paranoid=2"));
    }
    let quota = by_name(&v, "CPU quota (cgroup)");
    assert_eq!(quota["status"], "warn");
    assert!(
        quota["found"].as_str().unwrap().contains("0.50 CPUs"),
        "{quota}"
    );
    assert!(
        quota["fix"].as_str().unwrap().contains("OMP_NUM_THREADS=1"),
        "{quota}"
    );
    assert_eq!(by_name(&v, "NUMA")["status"], "note");
    assert_eq!(by_name(&v, "energy (RAPL)")["status"], "note");
    assert_eq!(by_name(&v, "busy CPUs now")["status"], "ok");
    // The live checks are not made on a made-up machine.
    assert!(!v.to_string().contains("preload library"), "{v}");
    let bad = autopin()
        .args(["doctor", "--root", "/no/such/dir"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn this_machine_is_checked_live() {
    let out = autopin().args(["doctor"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "hardware counters",
        "perf_event_paranoid",
        "CPUs allowed",
        "preload library",
    ] {
        assert!(text.contains(name), "{text}");
    }
    // The suite's own library loads: a failure here is a broken build, not a finding.
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok") && l.contains("preload library")),
        "{text}"
    );
}

/// cgroup v1's cpu controller says the same through cpu.cfs_quota_us.
#[test]
fn a_cgroup_v1_quota_is_found_too() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "proc/self/cgroup",
        "4:cpu,cpuacct:/batch/job7\n1:name=systemd:/\n",
    );
    write(
        root,
        "sys/fs/cgroup/cpu,cpuacct/batch/job7/cpu.cfs_quota_us",
        "150000\n",
    );
    write(
        root,
        "sys/fs/cgroup/cpu,cpuacct/batch/job7/cpu.cfs_period_us",
        "100000\n",
    );
    write(root, "sys/devices/system/cpu/online", "0-3\n");
    let v = doctor_json(root);
    let quota = by_name(&v, "CPU quota (cgroup)");
    assert_eq!(quota["status"], "warn", "{quota}");
    assert!(
        quota["found"].as_str().unwrap().contains("1.50 CPUs"),
        "{quota}"
    );
    write(
        root,
        "sys/fs/cgroup/cpu,cpuacct/batch/job7/cpu.cfs_quota_us",
        "-1\n",
    );
    let v = doctor_json(root);
    assert_eq!(by_name(&v, "CPU quota (cgroup)")["status"], "ok");
}
