//! autopin's promises to the program it runs, checked while a search moves its threads:
//! its input and output pass byte for byte, and no thread's CPUs ever go beyond what the
//! program was started with. (Exit statuses, signals and restores on every exit have their
//! own tests: README.md, "What autopin promises".)

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Deterministic bytes (every value 0..=255 appears, newlines included, no text structure).
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn input_and_output_pass_byte_for_byte_while_the_threads_move() {
    let (first, last) = autopin_testkit::first_and_last_cpu(&autopin_testkit::own_cpu_list());
    let dir = tempfile::tempdir().unwrap();
    let out_bytes = pattern(24 << 20, 1);
    let err_bytes = pattern(8 << 20, 2);
    let in_bytes = pattern(6 << 20, 3);
    let out_file = dir.path().join("out.bin");
    let err_file = dir.path().join("err.bin");
    std::fs::write(&out_file, &out_bytes).unwrap();
    std::fs::write(&err_file, &err_bytes).unwrap();
    // The program writes its output in small pieces beside a search of short probes, then
    // copies its input after it; `dd` writes what it reads as it reads it.
    let script = format!(
        "dd if='{o}' bs=4096 status=none; dd if='{e}' bs=1000 status=none >&2; cat",
        o = out_file.display(),
        e = err_file.display()
    );
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["run", "-q", "--objective", "task-clock"])
        .args(["--no-perturbation-estimate", "-i", "0", "-w", "0.01"])
        .args(["--strategy", "autopin1", "-t", "0.02", "--schedule"])
        .arg(format!("{first};{last};{first},{last}"))
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for chunk in in_bytes.chunks(65536) {
            stdin.write_all(chunk).unwrap();
        }
        in_bytes
    });
    let out = child.wait_with_output().unwrap();
    let in_bytes = feeder.join().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let mut want_out = out_bytes;
    want_out.extend_from_slice(&in_bytes);
    assert!(
        out.stdout == want_out,
        "stdout: {} bytes, {} expected; first difference at {:?}",
        out.stdout.len(),
        want_out.len(),
        out.stdout.iter().zip(&want_out).position(|(a, b)| a != b)
    );
    assert!(
        out.stderr == err_bytes,
        "stderr: {} bytes, {} expected (autopin -q writes nothing there); first difference at {:?}",
        out.stderr.len(),
        err_bytes.len(),
        out.stderr.iter().zip(&err_bytes).position(|(a, b)| a != b)
    );
}

/// Started on one CPU (taskset), the program's threads never get another, whatever
/// autopin's candidates, while it searches and after it decides; sampled every 10 ms.
#[test]
fn a_thread_never_gets_a_cpu_the_program_was_not_given() {
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let (_, last) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let spin = autopin_testkit::spin_program();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let pidfile = dir.path().join("pid");
    let mut child = Command::new("taskset")
        .args(["-c", &last])
        .arg(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["run", "-q", "--objective", "task-clock", "--unpinned"])
        .args(["--no-perturbation-estimate", "-w", "0.05", "--probe", "0.1"])
        .arg("--report")
        .arg(&report)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo $$ > '{}'; exec '{}' 2 3",
            pidfile.display(),
            spin.display()
        ))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut samples = 0;
    let mut wider = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            for (tid, m) in autopin_testkit::thread_cpu_lists(pid) {
                samples += 1;
                if m != last {
                    wider.push((tid, m));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(samples > 20, "too few samples ({samples}) to say anything");
    assert!(wider.is_empty(), "threads beyond CPU {last}: {wider:?}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for c in r["candidates"].as_array().unwrap() {
        for cpu in c["cpus"].as_array().into_iter().flatten() {
            assert_eq!(cpu.to_string(), last, "candidate {c}");
        }
    }
}

/// SIGTERM to `autopin run` mid-search reaches the program, which decides what it means;
/// its exit status is autopin's.
#[test]
fn a_signal_to_run_reaches_the_program_and_its_status_comes_back() {
    use std::io::BufRead;
    let (first, last) = autopin_testkit::first_and_last_cpu(&autopin_testkit::own_cpu_list());
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["run", "-q", "--objective", "task-clock"])
        .args(["--no-perturbation-estimate", "--probe", "5", "--schedule"])
        .arg(format!("{first};{last}"))
        .args([
            "--",
            "sh",
            "-c",
            "trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    std::thread::sleep(Duration::from_millis(300));
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "got TERM");
    assert_eq!(status.code(), Some(7));
}

/// A program forking while a probe holds its thread on one CPU: before, the child kept
/// that CPU for life and passed it on through exec. autopin manages the program it runs,
/// not its children: a child gets the mask the program started with, and so does what it
/// execs.
const FORKS_MID_PROBE: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static void *idle(void *a) { (void)a; sleep(2); return NULL; }
static void spin(double s)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (volatile int i = 0; i < 100000; i++)
            ;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec) < s);
}
int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, idle, NULL);
    spin(0.8);
    cpu_set_t m;
    sched_getaffinity(0, sizeof m, &m);
    printf("parent %d\n", CPU_COUNT(&m));
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        sched_getaffinity(0, sizeof m, &m);
        printf("child %d\n", CPU_COUNT(&m));
        fflush(stdout);
        execlp("sh", "sh", "-c", "taskset -pc $$ | sed 's/.*: /exec /'", (char *)NULL);
        _exit(1);
    }
    int st;
    waitpid(c, &st, 0);
    pthread_join(t, NULL);
    return 0;
}
"#;

#[test]
fn a_child_forked_mid_probe_gets_the_programs_cpus_back() {
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let mine = autopin_testkit::own_cpu_list();
    let (first, last) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let exe = autopin_testkit::build_c("forks_mid_probe", FORKS_MID_PROBE, &["-pthread"])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args([
            "run",
            "--objective",
            "task-clock",
            "--no-perturbation-estimate",
        ])
        .args(["-i", "0", "-w", "0.02", "--probe", "3"])
        .args(["--schedule", &format!("{first};{last}")])
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let expanded = |list: &str| autopin_topology::CpuSet::parse_list(list).unwrap();
    let allowed = expanded(&mine).len();
    assert!(
        text.contains("parent 1\n"),
        "the probe held the parent on one CPU: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let child: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert_eq!(child, allowed, "{text}");
    let exec = text
        .lines()
        .find_map(|l| l.strip_prefix("exec "))
        .unwrap_or("");
    assert_eq!(expanded(exec), expanded(&mine), "{text}");
}

/// Work done in child processes (a shell that starts two busy workers and waits) is
/// named at the end: autopin's probes measured the program's own threads, which did almost
/// nothing. A process the program leaves running when it ends is named with its PID.
#[test]
fn work_in_child_processes_and_a_process_left_running_are_named() {
    // `autopin run` on a shell script: its stderr and exit status.
    let run_sh = |script: &str| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .args([
                "run",
                "--objective",
                "task-clock",
                "--no-perturbation-estimate",
            ])
            .args([
                "-i",
                "0.2",
                "--no-memory",
                "--budget",
                "2",
                "--",
                "sh",
                "-c",
            ])
            .arg(script)
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code(),
        )
    };
    // Each worker must outlive autopin's second look at the program's children (they are
    // looked at once a second): 1.5 million steps once ended in 1.0 s on a fast host, were
    // seen only at their start, and the note had no work to name.
    let busy = "i=0; while [ $i -lt 4000000 ]; do i=$((i+1)); done";
    let (err, code) = run_sh(&format!("sh -c '{busy}' & sh -c '{busy}' & wait"));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("the work ran mostly in 2 child processes"),
        "no word of the work in children: {err}"
    );

    let (err, code) = run_sh(
        "sleep 30 </dev/null >/dev/null 2>&1 & i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
    );
    let left: Option<i32> = err
        .split("running when it ended (PID ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok());
    if let Some(pid) = left {
        // The PID is the sleep the test started.
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    assert_eq!(code, Some(0), "{err}");
    assert!(left.is_some(), "no word of the sleep left running: {err}");
}
