//! `autopin show`: where each thread of a running program is, read from /proc, as a user
//! checks a pinning (`hwloc-ps -t`, `taskset -p`).

use std::process::{Command, Stdio};

fn autopin() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("autopin"))
}

#[test]
fn a_pinned_programs_threads_are_shown_with_their_masks() {
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let (_, last) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let spin = autopin_testkit::spin_program();
    // Two spinning threads (the main thread is one of them), both on the last allowed CPU.
    let mut prog = Command::new("taskset")
        .args(["-c", &last])
        .arg(&spin)
        .args(["3", "2"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = prog.id().to_string();
    let mut threads = Vec::new();
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(40));
        let out = autopin().args(["show", &pid, "--json"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        threads = v[0]["threads"].as_array().unwrap().clone();
        if threads.len() == 2 && threads.iter().all(|t| t["name"] == "spin") {
            break;
        }
    }
    assert_eq!(threads.len(), 2, "{threads:?}");
    for t in &threads {
        assert_eq!(t["mask"], last.as_str(), "{t}");
        assert_eq!(t["cpu"].to_string(), last, "{t}");
        assert_eq!(t["name"], "spin");
        assert!(t["core"].is_number() && t["package"].is_number(), "{t}");
    }
    assert!(
        threads.iter().any(|t| t["state"] == "running"),
        "{threads:?}"
    );
    let table = autopin().args(["show", &pid]).output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.starts_with(&format!(
            "PID {pid} (spin): 2 thread(s) that may use CPUs {last}\n"
        )),
        "{text}"
    );
    assert_eq!(text.lines().count(), 4, "{text}");
    let all = autopin().args(["show", "--all"]).output().unwrap();
    let text = String::from_utf8_lossy(&all.stdout);
    assert!(
        text.lines().any(
            |l| l.split_whitespace().take(3).collect::<Vec<_>>() == [pid.as_str(), "spin", "2"]
        ),
        "{text}"
    );
    let _ = prog.kill();
    let _ = prog.wait();
}

#[test]
fn a_process_that_is_not_there_is_a_usage_error() {
    let out = autopin().args(["show", "2147483647"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such process"));
    let out = autopin()
        .args(["show", "--job", "no-such-job"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no process of Slurm job no-such-job"));
    let out = autopin().args(["show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `--job ID` finds a Slurm job's processes by the job id in their environment (or their
/// cgroup), without Slurm installed; `--json` says the same as the table.
#[test]
fn a_slurm_jobs_processes_are_found_by_the_job_id() {
    let job = format!("autopin-test-{}", std::process::id());
    let mut prog = Command::new("sleep")
        .arg("20")
        .env("SLURM_JOB_ID", &job)
        .spawn()
        .unwrap();
    let pid = prog.id() as u64;
    // Until the child has exec'd, its environment is still this test's: wait for the
    // job's variable to be there (under load that took more than 0.1 s).
    let want = format!("SLURM_JOB_ID={job}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read(format!("/proc/{pid}/environ"))
        .map(|e| e.split(|b| *b == 0).any(|v| v == want.as_bytes()))
        .unwrap_or(false)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = autopin()
        .args(["show", "--job", &job, "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let table = autopin().args(["show", "--job", &job]).output().unwrap();
    let _ = prog.kill();
    let _ = prog.wait();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let procs = v.as_array().unwrap();
    assert_eq!(procs.len(), 1, "{v}");
    assert_eq!(procs[0]["pid"], pid, "{v}");
    assert_eq!(procs[0]["threads"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(table.status.code(), Some(0));
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains(&pid.to_string()) && table.contains("sleep"),
        "{table}"
    );
}
