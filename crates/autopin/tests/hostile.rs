//! Hostile input (issue #55): what a user, a shell or a batch system can hand autopin that
//! it must survive without a panic, without losing the program's exit status, and with an
//! error that says what was wrong and what is valid.

use assert_cmd::Command;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

fn autopin() -> Command {
    Command::cargo_bin("autopin").unwrap()
}

/// Quick runs. (The default objective, not `--objective task-clock`: where no hardware
/// counter is, it falls back to task-clock read from /proc, which a user may read under
/// `perf_event_paranoid` 2, where perf's task-clock is refused.)
const FAST: &[&str] = &["--no-perturbation-estimate", "-q"];

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A value that is not UTF-8.
fn not_utf8() -> &'static OsStr {
    OsStr::from_bytes(b"x\xffy")
}

#[test]
fn a_variable_that_is_not_utf8_neither_panics_nor_loses_the_exit_status() {
    for var in ["FOO", "OMP_PROC_BIND", "OMP_NUM_THREADS", "SLURM_PROCID"] {
        let out = autopin()
            .args(["run", "--schedule", "0"])
            .args(FAST)
            .args(["--", "sh", "-c", "exit 4"])
            .env(var, not_utf8())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(4), "{var}: {err}");
        assert!(!err.contains("panicked"), "{var}: {err}");
    }
    // attach, to a process of its own.
    let mut child = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    let out = autopin()
        .args(["attach", "--duration", "0.3"])
        .args(FAST)
        .arg(child.id().to_string())
        .env("FOO", not_utf8())
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "attach: {err}");
    assert_ne!(out.status.code(), Some(101), "attach: {err}");
}

#[test]
fn every_duration_is_bounded_and_a_long_tick_keeps_the_exit_status() {
    for (sub, option, value) in [
        ("run", "--tick", "1e300"),
        ("run", "--budget", "1e308min"),
        ("run", "--init", "1e20"),
        ("run", "--tick", "1e-300"),
        ("stat", "--duration", "1e308min"),
        ("stat", "--interval", "1e300"),
        ("attach", "--duration", "1e308min"),
    ] {
        let mut cmd = autopin();
        cmd.args([sub, option, value]);
        if sub == "attach" {
            cmd.arg(std::process::id().to_string());
        } else {
            cmd.args(["--", "sh", "-c", "exit 4"]);
        }
        let out = cmd.output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{sub} {option} {value}: {err}");
        assert!(err.contains(option), "{err}");
        assert!(err.contains("365 days"), "{err}");
    }
    // The longest tick there is: the program's status comes back when it ends.
    let begun = std::time::Instant::now();
    let out = autopin()
        .args(["run", "--tick", "31536000"])
        .args(FAST)
        .args(["--", "sh", "-c", "exit 6"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(begun.elapsed().as_secs() < 30, "{:?}", begun.elapsed());
}

fn mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

#[test]
fn an_output_fifo_nobody_reads_is_given_up_on_and_the_exit_status_kept() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap().to_string();
    let store = dir.path().join("d.db").to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, i32)> = vec![
        (
            [
                &["run", "--schedule", "0"],
                FAST,
                &["--report", &f, "--", "sh", "-c", "exit 5"],
            ]
            .concat()
            .iter()
            .map(|s| s.to_string())
            .collect(),
            5,
        ),
        (
            ["stat", "--json", &f, "--", "sh", "-c", "exit 3"]
                .map(String::from)
                .to_vec(),
            3,
        ),
        (
            ["topology", "--synthetic", "core:2 pu:1", "-o", &f]
                .map(String::from)
                .to_vec(),
            2,
        ),
        (
            ["memory", "--memory", &store, "export", &f]
                .map(String::from)
                .to_vec(),
            2,
        ),
    ];
    // Side by side: each waits its few seconds for a reader.
    let begun = std::time::Instant::now();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(args, _)| s.spawn(move || autopin().args(args).output().unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        begun.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        begun.elapsed()
    );
    for ((args, code), out) in cases.iter().zip(results) {
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "{f}: cannot write: it is a FIFO and nothing read from it"
            )),
            "{args:?}: {err}"
        );
    }
    // With a reader, the FIFO gets the whole text.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = autopin()
        .args(["topology", "--synthetic", "core:2 pu:1", "-o", &f])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(reader.join().unwrap().contains("Machine"));
}

#[test]
fn inputs_are_bounded_and_a_fifo_without_a_writer_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let store = dir.path().join("d.db");
    for input in [std::path::Path::new("/dev/zero"), &fifo] {
        for args in [
            vec!["topology", "--load"],
            vec!["topology", "--from-latency"],
            vec!["report"],
            vec!["memory", "--memory", store.to_str().unwrap(), "import"],
        ] {
            let begun = std::time::Instant::now();
            let out = autopin().args(&args).arg(input).output().unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?} {input:?}: {err}");
            assert!(err.contains(input.to_str().unwrap()), "{args:?}: {err}");
            if input.ends_with("zero") {
                assert!(err.contains("larger than 64 MiB"), "{args:?}: {err}");
            }
            assert!(begun.elapsed().as_secs() < 10, "{args:?} {input:?}");
        }
    }
}

#[test]
fn stat_watches_the_processes_the_program_starts() {
    let spin = autopin_testkit::spin_program();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stat.json");
    let out = autopin()
        .args(["stat", "--json"])
        .arg(&json)
        .args(["--", "sh", "-c"])
        .arg(format!("'{}' 1 1 >/dev/null; exit 3", spin.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let spin_share: f64 = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "spin")
        .map(|t| t["cpu_share"].as_f64().unwrap())
        .sum();
    // One spinning thread for a second: most of a CPU, wherever the machine is busy.
    assert!(spin_share > 0.2, "the child's threads: {}", r["threads"]);
}

#[test]
fn stat_of_a_thread_does_not_list_its_own_process_as_a_neighbour() {
    autopin_testkit::require!(autopin_testkit::have("taskset"), "needs taskset");
    let spin = autopin_testkit::spin_program();
    // Its threads on one CPU: the process's own main thread is on the CPU its watched
    // thread uses, where a neighbour is looked for.
    let cpu = autopin_testkit::own_cpu_list()
        .split([',', '-'])
        .next()
        .unwrap()
        .to_string();
    let mut child = std::process::Command::new("taskset")
        .args(["-c", &cpu])
        .arg(&spin)
        .args(["3", "2"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let tid = loop {
        let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort();
        if tids.len() >= 2 {
            break tids[1];
        }
        assert!(std::time::Instant::now() < deadline, "no second thread");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stat.json");
    let out = autopin()
        .args(["stat", "--duration", "1", "-p", &tid.to_string(), "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let own = r["neighbours"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n[0] == pid);
    assert!(
        !own,
        "its own process {pid} is a neighbour: {}",
        r["neighbours"]
    );
}

#[test]
fn a_latency_too_large_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("lat.csv");
    std::fs::write(&csv, ",0,1\n0,0,1e308\n1,1e308,0\n").unwrap();
    let out = autopin()
        .args(["topology", "--from-latency"])
        .arg(&csv)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:2:", csv.display())), "{err}");
    assert!(
        err.contains("1e308") && err.contains("from 0 to 1e9"),
        "{err}"
    );
}

/// What `autopin run -- sh -c 'echo out; exit 3'` did with TMPDIR on a tmpfs of its own, `free`
/// KiB of it left: exit status, stdout, stderr, and the names left in TMPDIR besides the
/// filler. Err when no mount namespace can be made here.
fn run_with_tmpdir_left(free_kib: u32) -> Result<(i32, String, String, Vec<String>), String> {
    let ns = autopin_testkit::unshare_mount_flags()?;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("t")).unwrap();
    // 256 KiB, filled but for `free` KiB (tmpfs counts whole 4 KiB pages).
    let script = format!(
        r#"mount -t tmpfs -o size=256k tmpfs "$T" || exit 97
dd if=/dev/zero of="$T/fill" bs=4096 count=$(( (256 - {free_kib}) / 4 )) 2>/dev/null
TMPDIR="$T" AUTOPIN_MEMORY=off "$AP" run --no-perturbation-estimate -- sh -c 'echo out; exit 3' >"$D/out" 2>"$D/err"
echo $? >"$D/rc"
ls -A "$T" >"$D/left"
"#
    );
    let ran = std::process::Command::new("unshare")
        .arg(ns)
        .args(["sh", "-c", &script])
        .env("AP", assert_cmd::cargo::cargo_bin("autopin"))
        .env("T", d.join("t"))
        .env("D", d)
        .output()
        .unwrap();
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
    let Ok(rc) = read("rc").trim().parse::<i32>() else {
        return Err(format!(
            "no mount namespace with a tmpfs here (unshare {ns}: {}{})",
            String::from_utf8_lossy(&ran.stderr).trim(),
            ran.status
        ));
    };
    // (`autopin-UID` is the preload library's cache, kept between runs by design; a run
    // that pins at birth, beside a busy CPU, makes it even where the copy then fails)
    let left = read("left")
        .lines()
        .filter(|l| *l != "fill" && !is_preload_cache(l))
        .map(str::to_owned)
        .collect();
    Ok((rc, read("out"), read("err"), left))
}

/// Whether `name` is the name of the preload library's cache directory (`autopin-UID`).
fn is_preload_cache(name: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid());
    name == format!("autopin-{uid}")
}

/// A full TMPDIR once killed autopin with SIGBUS (exit 135) before the program started: its
/// shared files were sparse, and the first write through their mapping found no room.
/// Now the room is taken when a file is made, so a full TMPDIR is an error that says so
/// (nothing started, nothing left), and a nearly full one costs only the thread registry.
#[test]
fn a_full_tmpdir_is_said_and_never_a_signal() {
    let (rc, out, err, left) = autopin_testkit::ok_or_skip!(run_with_tmpdir_left(0));
    assert_eq!(rc, 1, "{err}");
    assert_eq!(out, "", "the program must not have started: {err}");
    assert!(
        err.contains("No space left on device") && err.contains("TMPDIR"),
        "{err}"
    );
    assert!(left.is_empty(), "left behind: {left:?}");

    // Room for the 16 KiB heartbeat channel, not for the 64 KiB registry: the program runs
    // and keeps its exit status; autopin says what it did without.
    let (rc, out, err, left) = autopin_testkit::ok_or_skip!(run_with_tmpdir_left(24));
    assert_eq!((rc, out.as_str()), (3, "out\n"), "{err}");
    assert!(
        err.contains("thread registry unavailable") && err.contains("No space left on device"),
        "{err}"
    );
    assert!(left.is_empty(), "left behind: {left:?}");
}
