//! `autopin stat` on real programs: two busy threads on one CPU wait half the time
//! (contention), spread over two CPUs they do not, a busy neighbour on the program's CPU is
//! named by its PID, and bad input is a usage error. The program's exit status and stdout
//! pass through; the table goes to stderr.

use std::process::{Command, Stdio};

/// These tests measure CPU time: one at a time.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn autopin() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("autopin"))
}

fn stat_json(args: &[&str]) -> (serde_json::Value, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let out = autopin()
        .arg("stat")
        .arg("--json")
        .arg(&json)
        .args(args)
        .output()
        .unwrap();
    let v = serde_json::from_str(
        &std::fs::read_to_string(&json)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr))),
    )
    .unwrap();
    (v, out)
}

fn kinds(v: &serde_json::Value) -> Vec<String> {
    v["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn two_busy_threads_on_one_cpu_are_contention_spread_they_are_not() {
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let spin = autopin_testkit::spin_program();
    let spin = spin.to_str().unwrap();
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let (v, out) = stat_json(&["--", "taskset", "-c", &first, spin, "1.5", "2"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        kinds(&v).contains(&"contention".to_string()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // How much of the CPU each thread gets depends on what else runs there (beside
    // `stress-ng` and parallel builds each got a tenth); what holds under any load: both
    // threads work (autopin's threshold: 5% of a CPU), a spinning thread is always either
    // running or waiting for a CPU, each waits at least while the other runs, and together
    // they run on one CPU's worth.
    let working: Vec<&serde_json::Value> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["cpu_share"].as_f64().unwrap() >= 0.05)
        .collect();
    assert_eq!(working.len(), 2, "{v}");
    let mut together = 0.0;
    for t in working {
        let (run, wait) = (
            t["cpu_share"].as_f64().unwrap(),
            t["run_delay_fraction"].as_f64().unwrap(),
        );
        assert!((0.85..1.1).contains(&(run + wait)), "runs or waits: {t}");
        assert!(wait >= 0.3, "waits at least while the other runs: {t}");
        together += run;
    }
    assert!(together < 1.1, "one CPU's worth: {v}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("verdict contention"), "{err}");
    // Spread over the two CPUs: nobody waits — unless other work shares the CPUs.
    let load = autopin_testkit::OutsideLoad::start();
    let (v, out) = stat_json(&["--", spin, "1.5", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let outside = load.cpus();
    autopin_testkit::require!(
        !kinds(&v).contains(&"contention".to_string()) || outside < 0.5,
        "other work used {outside:.1} CPUs while the spread threads were watched"
    );
    assert!(
        !kinds(&v).contains(&"contention".to_string()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A process that keeps one CPU of the program's busy takes a share of it that the verdict
/// names by PID. What share it gets depends on who else wants that CPU: beside `stress-ng`
/// and parallel builds it got too little to be a busy neighbour by autopin's definition (a
/// fifth of a CPU). So the claim is checked against the share the neighbour really took,
/// measured here from its own CPU time: above the threshold with a margin, the verdict must
/// name it; a neighbour that other work starved is a counted skip, with the figure.
#[test]
fn a_busy_neighbour_on_the_programs_cpu_is_named() {
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let spin = autopin_testkit::spin_program();
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let busy = Reaped(
        Command::new("taskset")
            .args(["-c", &first])
            .arg(&spin)
            .args(["0", "1"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let busy_pid = busy.0.id();
    let (ticks, since) = (
        autopin_testkit::process_cpu_ticks(busy_pid),
        std::time::Instant::now(),
    );
    let (v, out) = stat_json(&[
        "--",
        "taskset",
        "-c",
        &first,
        spin.to_str().unwrap(),
        "1.5",
        "1",
    ]);
    // Over autopin's whole run, a little longer than its watch: a share at least this.
    let share = autopin_testkit::process_cpu_ticks(busy_pid).saturating_sub(ticks) as f64
        / 100.0
        / since.elapsed().as_secs_f64().max(1e-3);
    drop(busy);
    assert_eq!(out.status.code(), Some(0));
    let named = v["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["kind"] == "busy_neighbour")
        .any(|x| {
            x["text"]
                .as_str()
                .unwrap()
                .contains(&format!("PID {busy_pid} "))
        });
    autopin_testkit::require!(
        named || share >= 0.3,
        "the neighbour took {share:.2} of CPU {first} while the program ran: other work had the rest"
    );
    assert!(
        named,
        "the neighbour (PID {busy_pid}) took {share:.2} of CPU {first}, unnamed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A child process killed and reaped however the test ends (a failed assertion included):
/// a spinning neighbour left behind would load every test after it.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_programs_status_and_stdout_pass_through_and_a_watched_process_may_end() {
    let out = autopin()
        .args(["stat", "--", "sh", "-c", "echo out; sleep 0.3; exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("TID"));
    // A watched process that ends during the watch still gets its table.
    let mut sleeper = Command::new("sleep").arg("0.5").spawn().unwrap();
    let out = autopin()
        .args(["stat", "--duration", "3", "-p", &sleeper.id().to_string()])
        .output()
        .unwrap();
    let _ = sleeper.wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("TID"));
}

#[test]
fn bad_input_is_a_usage_error_with_the_reason() {
    for (args, says) in [
        (vec!["stat", "-p", "999999999"], "no such process"),
        (vec!["stat", "--interval", "0", "--", "true"], "interval"),
        (vec!["stat"], "nothing to watch"),
        (vec!["stat", "-p", "1", "--", "true"], "not both"),
    ] {
        let out = autopin().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = autopin()
        .args(["stat", "--", "/no/such/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
}

/// A cgroup with a CPU quota (made here, removed at the end, whatever happens).
struct QuotaGroup {
    dir: std::path::PathBuf,
    child: std::process::Child,
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The killed process leaves the group once reaped; rmdir may need a moment.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A program in a cgroup of its own with 20% of one CPU: cgroup v1's cpu controller or v2's
/// cpu.max, where this user may create groups (root on most machines); None otherwise.
fn spin_under_quota(spin: &std::path::Path) -> Option<QuotaGroup> {
    let name = format!("autopin-stat-test-{}", std::process::id());
    let (dir, limits): (std::path::PathBuf, Vec<(&str, &str)>) =
        if std::path::Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists() {
            (
                std::path::Path::new("/sys/fs/cgroup/cpu").join(&name),
                vec![
                    ("cpu.cfs_period_us", "100000"),
                    ("cpu.cfs_quota_us", "20000"),
                ],
            )
        } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
        {
            (
                std::path::Path::new("/sys/fs/cgroup").join(&name),
                vec![("cpu.max", "20000 100000")],
            )
        } else {
            return None;
        };
    std::fs::create_dir(&dir).ok()?;
    let child = Command::new(spin)
        .args(["4", "1"])
        .stdout(Stdio::null())
        .spawn()
        .ok()?;
    let group = QuotaGroup { dir, child };
    for (file, value) in limits {
        std::fs::write(group.dir.join(file), value).ok()?;
    }
    std::fs::write(group.dir.join("cgroup.procs"), group.child.id().to_string()).ok()?;
    Some(group)
}

#[test]
fn a_cpu_quota_is_named_throttled() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let spin = autopin_testkit::spin_program();
    let group =
        autopin_testkit::ok_or_skip!(spin_under_quota(&spin)
            .ok_or("no writable cgroup with a cpu controller here (needs root)"));
    let pid = group.child.id().to_string();
    let (v, out) = stat_json(&["-p", &pid, "--duration", "1.5"]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(kinds(&v).contains(&"throttled".to_string()), "{err}");
    let held = v["throttled_seconds"].as_f64().unwrap_or(0.0);
    // 20% of a CPU for 1.5 s: held back most of the time.
    assert!(held > 0.5, "throttled {held} s: {err}");
    let working: Vec<f64> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu_share"].as_f64().unwrap())
        .collect();
    assert!(working.iter().sum::<f64>() < 0.35, "{working:?}");
    drop(group);
}

#[test]
fn the_threads_over_time_are_drawn() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let spin = autopin_testkit::spin_program();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("t.svg");
    let out = autopin()
        .arg("stat")
        .arg("--svg")
        .arg(&svg)
        .arg("--")
        .arg(&spin)
        .args(["0.6", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.ends_with("</svg>\n"));
    // Both threads have a row, the intervals say where they ran, the legend names the CPUs.
    assert_eq!(text.matches(" spin</text>").count(), 2, "{text}");
    assert!(text.contains(", ran ") && text.contains(">CPU "), "{text}");
    // An unwritable picture is refused before the program starts.
    let out = autopin()
        .args(["stat", "--svg", "/no/such/dir/t.svg", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A program `stat` starts reports its own progress through the channel autopin gives it:
/// its heartbeats, and the OpenMP constructs the preload library counts (workloads/
/// syncbench does both). The channel's file is gone afterwards; stdout is the program's.
#[test]
fn the_programs_heartbeats_and_openmp_progress_are_shown() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let exe = autopin_testkit::syncbench();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let out = autopin()
        .env("OMP_NUM_THREADS", "2")
        .env("TMPDIR", tmp.path())
        .arg("stat")
        .arg("--json")
        .arg(&json)
        .arg("--")
        .arg(&exe)
        // Eight rounds (most of a second): one round (0.2 s on a quiet machine) could end
        // before stat's first look at its threads.
        .args(["-b", "100000", "-s", "20", "-r", "8"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("syncbench: threads=2"),
        "the program's own output on stdout"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let beats = v["heartbeats_per_second"].as_f64().unwrap_or(0.0);
    let omp = v["openmp_constructs_per_second"].as_f64().unwrap_or(0.0);
    assert!(beats > 100.0 && omp > 100.0, "{v}\n{err}");
    assert!(
        err.contains("heartbeats/s") && err.contains("OpenMP constructs/s"),
        "{err}"
    );
    // The preload library's private cache (autopin-UID/libautopin_preload-*.so) stays on
    // purpose; nothing else may.
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .flat_map(|e| match std::fs::read_dir(e.path()) {
            Ok(inner) => inner
                .flatten()
                .map(|i| i.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with("libautopin_preload-"))
                .collect(),
            Err(_) => vec![e.file_name().to_string_lossy().into_owned()],
        })
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

/// `-g list` shows every group of the catalogue with its events and metrics, and exits 0
/// without a program to watch.
#[test]
fn group_list_shows_every_group() {
    let out = autopin().args(["stat", "-g", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for g in autopin_stat::groups::GROUPS {
        assert!(text.contains(&format!("\n{}: ", g.name)), "{text}");
        for e in g.events {
            assert!(text.contains(e), "{e}: {text}");
        }
        for m in g.metrics {
            assert!(text.contains(&format!("  {} = ", m.name)), "{text}");
        }
    }
}

/// A group that does not exist is a usage error naming the valid ones; the program is not
/// started.
#[test]
fn an_unknown_group_is_a_usage_error_listing_the_groups() {
    for g in ["nosuch", "IPC,nosuch"] {
        let out = autopin()
            .args(["stat", "-g", g, "--", "sh", "-c", "echo started"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "-g {g}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("-g nosuch: no such event group"), "{err}");
        for g in autopin_stat::groups::GROUPS {
            assert!(err.contains(g.name), "{err}");
        }
        assert!(String::from_utf8_lossy(&out.stdout).is_empty());
    }
}

/// The thread of `v` that ran most.
fn busiest(v: &serde_json::Value) -> &serde_json::Value {
    v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .max_by(|a, b| {
            a["cpu_share"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["cpu_share"].as_f64().unwrap())
        })
        .unwrap()
}

/// A thread's task-clock (perf, seconds) agrees with the CPU time Linux's schedstat gave it
/// over the report's period (the counters are read once more after the program ends: up to
/// a look, 0.1 s, later).
fn task_clock_matches_schedstat(v: &serde_json::Value, t: &serde_json::Value) -> f64 {
    let clock = t["counters"]["task-clock"].as_f64().unwrap();
    let ran = t["cpu_share"].as_f64().unwrap() * v["seconds"].as_f64().unwrap();
    assert!((clock - ran).abs() < 0.15 + 0.2 * ran, "{t}");
    clock
}

/// The software group needs no PMU: a busy thread's task-clock over a second is most of
/// that second (where nothing else takes its CPU), and its context switches and page
/// faults are counted.
#[test]
fn the_software_group_counts_each_busy_thread() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let spin = autopin_testkit::spin_program();
    let load = autopin_testkit::OutsideLoad::start();
    let (v, out) = stat_json(&["-g", "SW", "--", spin.to_str().unwrap(), "1", "1"]);
    let outside = load.cpus();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(v["groups"], serde_json::json!(["SW"]));
    assert!(v["counters_missing"].as_array().unwrap().is_empty(), "{v}");
    assert!(
        err.contains("group SW: ") && err.contains("task-clock(s)"),
        "{err}"
    );
    assert!(!err.contains("not counted"), "{err}");
    let t = busiest(&v);
    let c = &t["counters"];
    assert!(c["context-switches"].as_f64().is_some(), "{c}");
    assert!(c["cpu-migrations"].as_f64().is_some(), "{c}");
    assert!(c["page-faults"].as_f64().is_some(), "{c}");
    assert!(t["metrics"]["CPUs"].as_f64().unwrap() > 0.0, "{t}");
    let clock = task_clock_matches_schedstat(&v, t);
    autopin_testkit::require!(
        outside < 0.5,
        "other work used {outside:.1} CPUs while the busy thread was counted"
    );
    assert!(clock > 0.3 && clock < 1.5, "{t}");
}

/// Can this machine count `cycles` on a thread of its own?
fn cycles_countable() -> bool {
    let Ok(spec) = autopin_objective::EventSpec::parse("cycles") else {
        return false;
    };
    let Ok(mut src) = autopin_perf::PerfCounterSource::new(vec![spec], Default::default()) else {
        return false;
    };
    let me = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    autopin_perf::CounterSource::open(&mut src, autopin_perf::Target::Thread(me)).is_ok()
}

/// `-g IPC` with a PMU counts cycles and instructions per thread; without one (or without
/// permission) the whole per-thread table still comes, the exit status is 0, and one block
/// says once which counters are missing and why.
#[test]
fn the_ipc_group_counts_or_says_once_what_is_missing() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let spin = autopin_testkit::spin_program();
    let (v, out) = stat_json(&["-g", "IPC", "--", spin.to_str().unwrap(), "1", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // The per-thread table in full: its header and a row per thread of the report.
    // (Columns are padded to their widest cell: a CPU% of 100.1 widens its header's gap.)
    assert!(
        err.lines().any(|l| l
            .split_whitespace()
            .take(4)
            .eq(["TID", "NAME", "CPU%", "WAIT%"])),
        "{err}"
    );
    let threads = v["threads"].as_array().unwrap();
    for t in threads {
        assert!(err.contains(&t["tid"].to_string()), "{err}");
    }
    let busy = busiest(&v);
    let missing = v["counters_missing"].as_array().unwrap();
    let missing_names: Vec<&str> = missing
        .iter()
        .map(|m| m["event"].as_str().unwrap())
        .collect();
    task_clock_matches_schedstat(&v, busy);
    let not_counted: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("not counted:"))
        .collect();
    if cycles_countable() {
        assert!(!missing_names.contains(&"cycles"), "{v}");
        let c = &busy["counters"];
        assert!(c["cycles"].as_f64().unwrap() > 1e6, "{c}");
        assert!(c["instructions"].as_f64().unwrap() > 1e6, "{c}");
        let ipc = busy["metrics"]["IPC"].as_f64().unwrap();
        assert!(ipc > 0.01 && ipc < 10.0, "{busy}");
        assert!(!not_counted.iter().any(|l| l.contains("cycles")), "{err}");
    } else {
        // Named once, with the reason, in one block after the tables.
        assert!(
            missing_names.contains(&"cycles") && missing_names.contains(&"instructions"),
            "{v}"
        );
        for m in missing {
            assert!(!m["reason"].as_str().unwrap().is_empty(), "{m}");
        }
        let naming_cycles: Vec<&&str> = not_counted
            .iter()
            .filter(|l| l.contains("cycles"))
            .collect();
        assert_eq!(naming_cycles.len(), 1, "{err}");
        assert!(
            naming_cycles[0].contains("cycles, instructions — "),
            "{err}"
        );
        assert_eq!(err.matches("not counted: cycles").count(), 1, "{err}");
        // No IPC, but the task-clock (a software event) is counted.
        assert!(busy["metrics"].get("IPC").is_none(), "{busy}");
        assert!(err.contains("group IPC: "), "{err}");
    }
}
