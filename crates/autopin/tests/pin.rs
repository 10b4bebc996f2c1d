//! `autopin pin` end to end: real programs (shell, C pthreads, OpenMP, Rust threads, a
//! static binary) run under the binary, and what the kernel says about their affinity is
//! checked. The C compiler, libgomp and a static libc come with scripts/deps.sh (a build
//! failure fails the test); tests that need two CPUs or rustc skip, counted, without them.

use assert_cmd::cargo::CommandCargoExt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn autopin() -> Command {
    let mut c = Command::cargo_bin("autopin").unwrap();
    // The tests decide OpenMP settings themselves.
    c.env_remove("OMP_PROC_BIND")
        .env_remove("OMP_PLACES")
        .env_remove("GOMP_CPU_AFFINITY");
    c
}

/// CPUs this test process may use, from the kernel.
fn allowed_list() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap()
}

fn have_cpus_0_and_1() -> bool {
    let list = allowed_list();
    let ok = list.split(',').any(|part| {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        a.parse::<u32>().ok() == Some(0) && b.parse::<u32>().is_ok_and(|b| b >= 1)
    });
    ok
}

/// The flags every test program here is built with: threads and the back-channel header.
fn c_flags<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut f = vec![
        "-pthread",
        concat!("-I", env!("CARGO_MANIFEST_DIR"), "/../../include"),
    ];
    f.extend_from_slice(extra);
    f
}

/// Compiles C `src` with extra flags (cached by the testkit); `Err` says why it cannot here.
fn build_c(name: &str, src: &str, flags: &[&str]) -> Result<PathBuf, String> {
    autopin_testkit::build_c(name, src, &c_flags(flags))
}

fn build_c_file(file: &Path, flags: &[&str]) -> Result<PathBuf, String> {
    autopin_testkit::build_c_file(file, &c_flags(flags))
}

/// Creates THREADS threads one after another; each waits DELAY ms, then prints the CPUs
/// it may run on. The main thread prints first, and again once its threads are done.
const THREADS_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int delay_ms;
static void show(const char *who) {
    FILE *f = fopen("/proc/thread-self/status", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Cpus_allowed_list:", 18)) printf("%s%s", who, line + 18);
    if (f) fclose(f);
    fflush(stdout);
}
static void *body(void *arg) {
    char who[16];
    usleep(delay_ms * 1000);
    snprintf(who, sizeof who, "t%ld", (long)arg);
    show(who);
    return NULL;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    delay_ms = argc > 2 ? atoi(argv[2]) : 0;
    show("main");
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, body, (void *)i)) return 1;
        pthread_join(t, NULL);
    }
    show("main-end");
    return 0;
}
"#;

/// Parses "who\tlist" lines into (who, list).
fn affinities(stdout: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            l.split_once('\t')
                .map(|(a, b)| (a.to_string(), b.trim().to_string()))
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn shell_sees_its_cpu_and_stdout_is_untouched() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    let out = autopin()
        .args([
            "pin",
            "-c",
            "1",
            "--",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Cpus_allowed_list:\t1\n"
    );
    assert!(
        out.stderr.is_empty(),
        "nothing of ours without -v: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn openmp_threads_follow_the_list() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/syncbench.c");
    let exe = build_c_file(&src, &["-fopenmp"]).unwrap_or_else(|e| panic!("{e}"));
    let out = autopin()
        .env("OMP_NUM_THREADS", "4")
        .args(["pin", "-c", "0,1,0,1", "--"])
        .arg(&exe)
        .args(["-b", "100", "-s", "2", "-n", "10000", "-p"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("placement: 0:0 1:1 2:0 3:1\n"), "{stdout}");
    assert!(stdout.contains("syncbench: threads=4 "), "{stdout}");
    // A different list gives a different placement (the test can fail).
    let out = autopin()
        .env("OMP_NUM_THREADS", "4")
        .args(["pin", "-c", "1,1,0,0", "--"])
        .arg(&exe)
        .args(["-b", "10", "-s", "1", "-n", "1000", "-p"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("placement: 0:1 1:1 2:0 3:0\n"));
}

#[test]
fn omp_num_threads_defaults_to_the_list_length() {
    let out = autopin()
        .env_remove("OMP_NUM_THREADS")
        .args([
            "pin",
            "-c",
            "0,0,0",
            "--",
            "sh",
            "-c",
            "echo $OMP_NUM_THREADS",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n");
    let out = autopin()
        .env("OMP_NUM_THREADS", "7")
        .args([
            "pin",
            "-c",
            "0,0,0",
            "--",
            "sh",
            "-c",
            "echo $OMP_NUM_THREADS",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "7\n");
}

/// `-c COUNT:EXPR` sets the OpenMP thread count too (issue #61): `1:0` runs one thread on
/// CPU 0, and a count the user set is an upper bound; a count of 0 is a usage error that
/// names the position.
#[test]
fn a_count_in_front_of_the_expression_is_the_thread_count() {
    let echo = |count: Option<&str>, expr: &str| {
        let mut c = autopin();
        match count {
            Some(v) => c.env("OMP_NUM_THREADS", v),
            None => c.env_remove("OMP_NUM_THREADS"),
        };
        let out = c
            .args(["pin", "-c", expr, "--", "sh", "-c", "echo $OMP_NUM_THREADS"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(echo(None, "1:0").1, "1\n");
    assert_eq!(echo(None, "3:0").1, "3\n");
    assert_eq!(
        echo(Some("2"), "3:0").1,
        "2\n",
        "the user's count bounds it"
    );
    let (code, _, err) = echo(None, "0:0");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("thread count of 0"), "{err}");
    let p = autopin().args(["pin", "-c", "1:0", "-p"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&p.stdout), "0\n");
}

#[test]
fn pthreads_are_pinned_and_the_skip_mask_skips() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    let exe = build_c("threads", THREADS_C, &[]).unwrap_or_else(|e| panic!("{e}"));
    let out = autopin()
        .args(["pin", "-c", "0,1"])
        .arg("--")
        .arg(&exe)
        .arg("3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        affinities(&out.stdout),
        pairs(&[
            ("main", "0-1"),
            ("t0", "1"),
            ("t1", "0"),
            ("t2", "1"),
            ("main-end", "0")
        ])
    );

    // Bit 0: the first created thread runs wherever the process could; the others take
    // the list in order, as if t0 did not exist (likwid-pin -s semantics).
    let all = allowed_list();
    let out = autopin()
        .args(["pin", "-c", "1,0", "-s", "0x1", "--"])
        .arg(&exe)
        .arg("3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        affinities(&out.stdout),
        pairs(&[
            ("main", "0-1"),
            ("t0", &all),
            ("t1", "0"),
            ("t2", "1"),
            ("main-end", "1")
        ])
    );
    // The mask is never silent: stderr spells out which thread it leaves unpinned.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("main thread → CPU 1, 1st created → not pinned, 2nd → CPU 0"),
        "{err}"
    );
}

#[test]
fn rust_std_threads_are_pinned() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("threads.rs");
    std::fs::write(
        &src,
        r#"
fn show(who: &str) {
    let s = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let l = s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap();
    println!("{who}\t{}", l.trim());
}
fn main() {
    show("main");
    for i in 0..3 {
        std::thread::spawn(move || show(&format!("t{i}"))).join().unwrap();
    }
    show("main-end");
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("threads");
    match Command::new("rustc")
        .args(["--edition", "2021", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
    {
        Ok(o) if o.status.success() => {}
        other => autopin_testkit::skip!("rustc could not build the test program: {other:?}"),
    }
    let out = autopin()
        .args(["pin", "-c", "1,0,0,1", "--"])
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        affinities(&out.stdout),
        pairs(&[
            ("main", "0-1"),
            ("t0", "0"),
            ("t1", "0"),
            ("t2", "1"),
            ("main-end", "1")
        ])
    );
}

#[test]
fn static_binary_is_pinned_by_polling_with_a_warning() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    let exe = build_c("threads_static", THREADS_C, &["-static"]).unwrap_or_else(|e| panic!("{e}"));
    // Each thread waits 300 ms before looking, longer than the slowest polling interval.
    let out = autopin()
        .args(["pin", "-c", "1,0"])
        .arg("--")
        .arg(&exe)
        .args(["2", "300"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("statically linked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        affinities(&out.stdout),
        pairs(&[("main", "1"), ("t0", "0"), ("t1", "1"), ("main-end", "1")])
    );
}

#[test]
fn exit_status_passes_through() {
    let status = |script: &str| {
        autopin()
            .args(["pin", "-c", "0", "--", "sh", "-c", script])
            .status()
            .unwrap()
            .code()
    };
    assert_eq!(status("exit 3"), Some(3));
    assert_eq!(status("exit 0"), Some(0));
    assert_eq!(status("kill -TERM $$"), Some(143));
    assert_eq!(status("kill -KILL $$"), Some(137));
}

#[test]
fn sigterm_to_autopin_reaches_the_program() {
    let mut child = autopin()
        .args([
            "pin",
            "-c",
            "0",
            "--",
            "sh",
            "-c",
            "trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = wait_timeout(&mut child, Duration::from_secs(10));
    assert_eq!(lines.next().unwrap().unwrap(), "got TERM");
    assert_eq!(status, Some(7));
}

fn wait_timeout(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("autopin did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bad_input_is_reported() {
    let out = autopin()
        .args(["pin", "-c", "0", "--", "autopin-test-no-such-program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("autopin-test-no-such-program: command not found"));

    let dir = tempfile::tempdir().unwrap();
    let noexec = dir.path().join("noexec");
    std::fs::write(&noexec, "#!/bin/sh\necho hi\n").unwrap();
    let out = autopin()
        .args(["pin", "-c", "0", "--"])
        .arg(&noexec)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));

    // Program without `--`.
    let out = autopin().args(["pin", "-c", "0", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // No program at all.
    let out = autopin().args(["pin", "-c", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("after `--`"));
    // No placement.
    let out = autopin().args(["pin", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A bad expression names the position.
    let out = autopin()
        .args(["pin", "-c", "0,Q", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("position"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A bad skip mask names the character.
    let out = autopin()
        .args(["pin", "-c", "0", "-s", "0xZ", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("position 2: 'Z'"));
    // A CPU this process may not use.
    let out = autopin()
        .args([
            "pin",
            "--synthetic",
            "package:1 core:64 pu:1",
            "-c",
            "63",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CPU 63 is not available"));
}

#[test]
fn print_lists_domains_or_the_selection() {
    let out = autopin()
        .args(["pin", "--synthetic", "package:2 core:2 pu:2", "-p"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Domain N:") && text.contains("Domain S1:"),
        "{text}"
    );
    let out = autopin()
        .args([
            "pin",
            "--synthetic",
            "package:2 core:2 pu:2",
            "-c",
            "S1:0-1",
            "-p",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "4,6\n");
}

#[test]
fn policy_places_on_the_live_machine() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    let out = autopin()
        .args([
            "pin",
            "--policy",
            "compact",
            "-n",
            "1",
            "--",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.starts_with("Cpus_allowed_list:\t"), "{line}");
    assert!(
        !line.contains(',') && !line.contains('-'),
        "one CPU: {line}"
    );
}

#[test]
fn sharing_matrix_places_heavy_pairs_together() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.txt");
    // Threads 0-1 and 2-3 share a lot; compact pairing keeps each pair on one package.
    std::fs::write(&m, "0 9 1 1\n9 0 1 1\n1 1 0 9\n1 1 9 0\n").unwrap();
    let out = autopin()
        .args(["pin", "--synthetic", "package:2 core:2 pu:1", "--sharing"])
        .arg(format!("LP_COMPACT:{}", m.display()))
        .arg("-p")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cpus: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(',')
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(cpus.len(), 4);
    let package = |cpu: u32| cpu / 2;
    assert_eq!(package(cpus[0]), package(cpus[1]));
    assert_eq!(package(cpus[2]), package(cpus[3]));
    assert_ne!(package(cpus[0]), package(cpus[2]));
    let out = autopin()
        .args(["pin", "--sharing", "LP_COMPACT", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("STRATEGY:FILE"));
}

#[test]
fn memory_policy_bad_input_leaves_the_target_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("ran");
    let two = ["--synthetic", "package:2 numa:1 core:2 pu:1"];
    let one = ["--synthetic", "package:1 core:2 pu:1"];
    let cases: [(&[&str], &[&str], &str); 5] = [
        (&["--interleave", "0-x"], &one, "`x` is not a node number"),
        (&["--membind", "0,5"], &two, "there is no NUMA node 5"),
        (&["--preferred", "0-1"], &two, "--preferred takes one node"),
        (&["--interleave", "M7"], &two, "there is no NUMA domain M7"),
        (&["--membind", "1"], &one, "there is no NUMA node 1"),
    ];
    // `autopin pin -c 0 POLICY MACHINE -- touch marker`: (exit status, stderr).
    let pin_touch = |policy: &[&str], machine: &[&str]| {
        let out = Command::cargo_bin("autopin")
            .unwrap()
            .args(["pin", "-c", "0"])
            .args(policy)
            .args(machine)
            .arg("--")
            .arg("touch")
            .arg(&marker)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (policy, machine, msg) in cases {
        let (code, err) = pin_touch(policy, machine);
        assert_eq!(code, Some(2), "{policy:?}: {err}");
        assert!(err.contains(msg), "{policy:?}: {err}");
        assert!(!marker.exists(), "{policy:?} started the target");
    }
    // The only node of a one-node machine: accepted as numactl does, with a warning.
    let (code, err) = pin_touch(&["--membind", "0"], &one);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("changes nothing; not applied"), "{err}");
    assert!(marker.exists());
}

/// `--policy scatter -s 0x1` on a GNU OpenMP program (no helper thread) leaves a worker
/// unpinned, free to share the main thread's CPU: a warning says so and what to do; a
/// program without OpenMP gets the note that spells the mask out.
#[test]
fn a_skip_mask_on_gnu_openmp_warns_that_a_worker_is_left_unpinned() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/syncbench.c");
    let exe = build_c_file(&src, &["-fopenmp"]).unwrap_or_else(|e| panic!("{e}"));
    let out = autopin()
        .env("OMP_NUM_THREADS", "2")
        .args(["pin", "--policy", "scatter", "-s", "0x1", "--"])
        .arg(&exe)
        .args(["-b", "10", "-s", "1", "-n", "1000"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("autopin: warning: skip mask 0x1: main thread → CPU ")
            && err.contains("uses GNU OpenMP (libgomp), which creates no helper thread")
            && err.contains("it may share CPU ")
            && err.contains("Drop -s 0x1"),
        "{err}"
    );
    let out = autopin()
        .args(["pin", "--policy", "scatter", "-s", "0x1", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("autopin: note: skip mask 0x1: main thread → CPU ")
            && !err.contains("warning"),
        "{err}"
    );
}

/// Sizes its OpenMP team as real codes do, with omp_get_num_procs() (argument `procs`, the
/// default), or with a given count, or leaves it to the runtime (`default`: no CPU count is
/// asked before the region, and the runtime's is printed after it, `procs-after`), and
/// prints what it saw: the CPU count, its main thread's CPUs before the region, the team's
/// size, and each thread's CPUs inside the region. A second argument: seconds each thread
/// then works in the region.
const OMP_PROCS_C: &str = r#"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void cpus_of_this_thread(char *out, size_t n) {
    FILE *f = fopen("/proc/thread-self/status", "r");
    char line[512];
    snprintf(out, n, "?");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Cpus_allowed_list:", 18)) {
            char *v = line + 18;
            v += strspn(v, " \t");
            v[strcspn(v, "\n")] = 0;
            snprintf(out, n, "%s", v);
        }
    if (f) fclose(f);
}
int main(int argc, char **argv) {
    int runtime = argc > 1 && !strcmp(argv[1], "default");
    /* Called through a volatile pointer: clang -O2 takes it for a call without side
     * effects and would call it once, at the start, for both uses. */
    int (*volatile ask)(void) = omp_get_num_procs;
    int procs = runtime ? 0 : ask();
    int want = argc > 1 && strcmp(argv[1], "procs") ? atoi(argv[1]) : procs;
    double work = argc > 2 ? atof(argv[2]) : 0;
    char before[256], seen[64][256];
    int team = 0;
    cpus_of_this_thread(before, sizeof before);
    if (!runtime)
        omp_set_num_threads(want);
    #pragma omp parallel
    {
        int me = omp_get_thread_num();
        #pragma omp single
        team = omp_get_num_threads();
        if (me < 64) cpus_of_this_thread(seen[me], sizeof seen[me]);
        #pragma omp barrier
        volatile double x = 0;
        for (double t0 = omp_get_wtime(); omp_get_wtime() - t0 < work;)
            x += 1;
    }
    if (!runtime)
        printf("procs\t%d\n", procs);
    printf("main-before\t%s\nteam\t%d\n", before, team);
    for (int i = 0; i < team && i < 64; i++) printf("thread %d\t%s\n", i, seen[i]);
    if (runtime)
        printf("procs-after\t%d\n", ask());
    return 0;
}
"#;

fn omp_procs() -> PathBuf {
    build_c("omp_procs", OMP_PROCS_C, &["-fopenmp"]).unwrap_or_else(|e| panic!("{e}"))
}

/// What OMP_PROCS_C printed, as (name, value) pairs.
fn omp_view(out: &std::process::Output) -> Vec<(String, String)> {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    affinities(&out.stdout)
}

/// What a program sizes itself by before its threads exist is every CPU of the pinning,
/// as under taskset -c or likwid-pin -c; each thread, the main one included, then ends on
/// its own CPU of the list. (The main thread was pinned to the first CPU at load: a code
/// that asked omp_get_num_procs() for its team size ran with one thread.)
#[test]
fn a_program_sized_by_its_cpus_sees_the_whole_pinning_and_each_thread_gets_its_cpu() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    let exe = omp_procs();
    for (list, main, worker) in [("0,1", "0", "1"), ("1,0", "1", "0")] {
        let out = autopin()
            .env_remove("OMP_NUM_THREADS")
            .args(["pin", "-c", list, "--"])
            .arg(&exe)
            .output()
            .unwrap();
        assert_eq!(
            omp_view(&out),
            pairs(&[
                ("procs", "2"),
                ("main-before", "0-1"),
                ("team", "2"),
                ("thread 0", main),
                ("thread 1", worker),
            ]),
            "pin -c {list}"
        );
    }
    // A team of one creates no thread: the main thread is narrowed when the region begins.
    let out = autopin()
        .env_remove("OMP_NUM_THREADS")
        .args(["pin", "-c", "1,0", "--"])
        .arg(&exe)
        .arg("1")
        .output()
        .unwrap();
    assert_eq!(
        omp_view(&out),
        pairs(&[
            ("procs", "2"),
            ("main-before", "0-1"),
            ("team", "1"),
            ("thread 0", "1"),
        ])
    );
}

/// The same at birth on a remembered decision: a first run decides 1,0 (a fixed pinning),
/// the second starts on it from the store, and the program still sees both CPUs and runs
/// a team of two, each thread on its own CPU.
#[test]
fn a_remembered_pinning_applied_at_birth_shows_the_program_all_its_cpus() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    let exe = omp_procs();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("decisions.db");
    let report = dir.path().join("r.json");
    let run = |extra: &[&str]| {
        let out = autopin()
            .env_remove("OMP_NUM_THREADS")
            .args(["run", "-q", "--memory"])
            .arg(&store)
            .arg("--report")
            .arg(&report)
            .args(["--objective", "task-clock", "--no-perturbation-estimate"])
            .args(["-i", "0.05", "-w", "0.02", "--probe", "0.05"])
            // The objective and the first run's pinning are named: memory only on request.
            .arg("--recall")
            .args(extra)
            .arg("--")
            .arg(&exe)
            .args(["procs", "0.5"])
            .output()
            .unwrap();
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        (omp_view(&out), report)
    };
    let want = pairs(&[
        ("procs", "2"),
        ("main-before", "0-1"),
        ("team", "2"),
        ("thread 0", "1"),
        ("thread 1", "0"),
    ]);
    let (first, r) = run(&["--strategy", "fixed", "--schedule", "1,0"]);
    assert_eq!(r["memory"]["hit"], false, "{}", r["memory"]);
    assert_eq!(first, want, "the fixed pinning, at birth");
    let (second, r) = run(&[]);
    assert_eq!(r["memory"]["hit"], true, "{}", r["memory"]);
    assert_eq!(r["start"], "pinned_at_birth", "{}", r["start"]);
    assert_eq!(second, want, "the remembered pinning, at birth");
}

/// LLVM's libomp counts the CPUs once, when it first needs them (here: at the first
/// region, the program asks nothing before): the count is the pinning's, and the main
/// thread runs on its CPU in the region. (The team is OMP_NUM_THREADS's, which pin sets to
/// the list's length. libomp gives its workers its own CPU mask as they start, over the
/// one they were born with, so theirs is not checked.)
#[test]
fn libomp_counts_the_whole_pinning_at_its_first_region() {
    autopin_testkit::require!(
        have_cpus_0_and_1(),
        "needs CPUs 0 and 1 (allowed: {})",
        allowed_list()
    );
    autopin_testkit::require!(autopin_testkit::have("clang"), "clang is not installed");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("omp_procs.c");
    std::fs::write(&src, OMP_PROCS_C).unwrap();
    let exe = autopin_testkit::ok_or_skip!(autopin_testkit::build_c_file_with(
        "clang",
        &src,
        &["-fopenmp"]
    ));
    let out = autopin()
        .env_remove("OMP_NUM_THREADS")
        .args(["pin", "-c", "1,0", "--"])
        .arg(&exe)
        .arg("default")
        .output()
        .unwrap();
    let view = omp_view(&out);
    let get = |k: &str| {
        view.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {k} in {view:?}"))
    };
    assert_eq!(get("main-before"), "0-1", "{view:?}");
    assert_eq!(get("procs-after"), "2", "{view:?}");
    assert_eq!(get("team"), "2", "{view:?}");
    assert_eq!(get("thread 0"), "1", "{view:?}");
}
