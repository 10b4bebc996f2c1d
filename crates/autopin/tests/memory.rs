//! Remembered decisions end to end: a second run of a program starts on the pinning the
//! first decided and checks it; every fault of the store (corrupt, newer schema, locked,
//! read-only, a full file system) leaves the program's run and output as they would be
//! without memory; eight runs writing one store at once lose nothing.

use std::path::Path;
use std::process::{Command, Output};

/// The program: says which CPUs its main thread starts on, works ~0.4 s, exits 4.
const SCRIPT: &str = "grep Cpus_allowed_list: /proc/self/status; i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; echo done; exit 4";
/// The same, working long enough for a check to finish: about 3 s on an idle machine (at
/// half of it, 1.5 s, a check between two tied candidates could still be going when the
/// program ended, and the overturn test found the record unchecked).
const LONG_SCRIPT: &str = "grep Cpus_allowed_list: /proc/self/status; i=0; while [ $i -lt 4000000 ]; do i=$((i+1)); done; echo done; exit 4";

/// The tests of this file run one at a time: the overturn test measures a CPU held by busy
/// loops, and the load guard (`OutsideLoad`) counts the programs of sibling tests in this
/// process as the test's own, so they would steal that CPU unseen.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn autopin_run(store: &Path, report: &Path, extra: &[&str], script: &str) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["run", "--memory"])
        .arg(store)
        .arg("--report")
        .arg(report)
        .args(["--objective", "task-clock", "--no-perturbation-estimate"])
        .args(["-i", "0.05", "-w", "0.02", "--probe", "0.05"])
        // The search named here (objective, strategy, schedule) would win over memory.
        .arg("--recall")
        .args(extra)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap()
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every record of the store, through `autopin memory list --json`.
fn records(store: &Path) -> serde_json::Value {
    let list = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["memory", "--memory"])
        .arg(store)
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert_eq!(list.status.code(), Some(0));
    serde_json::from_slice(&list.stdout).unwrap()
}

/// The program's own output and status, as without autopin.
fn assert_untouched(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("Cpus_allowed_list:"), "{stdout}");
    assert!(stdout.ends_with("done\n"), "{stdout}");
}

#[test]
fn a_second_run_starts_on_the_remembered_pinning_and_checks_it() {
    let _serial = one_at_a_time();
    let (_, last) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("state/decisions.db");
    let report = dir.path().join("r.json");
    // First run: the decision (a fixed pinning here, so it is known) is remembered.
    let out = autopin_run(
        &store,
        &report,
        &["--strategy", "fixed", "--schedule", &last],
        SCRIPT,
    );
    assert_untouched(&out);
    let r = read_json(&report);
    assert_eq!(r["memory"]["hit"], false, "{}", r["memory"]);
    assert_eq!(r["memory"]["outcome"], "new", "{}", r["memory"]);
    let first = records(&store)[0].clone();
    let remembered = first["pinning"]["label"].clone();
    // How it was measured is kept, and the CPUs other work kept busy meanwhile (found for
    // candidates one named too).
    assert_eq!(first["source"], "requested", "{first}");
    let busy_first = first["busy"]
        .as_array()
        .expect("busy in the record")
        .clone();
    // Second run, a plain search: the remembered pinning is in force from the first
    // instruction, and the check probes it: at its remembered rate it is kept on that one
    // probe, otherwise it is probed against the OS placement.
    let out = autopin_run(&store, &report, &[], LONG_SCRIPT);
    assert_untouched(&out);
    let first_line = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        first_line.split_whitespace().nth(1),
        Some(last.as_str()),
        "the main thread starts on the remembered CPU"
    );
    let r = read_json(&report);
    let m = &r["memory"];
    assert_eq!(m["hit"], true, "{m}");
    let checked: Vec<&str> = m["checked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(Some(checked[0]), remembered.as_str(), "{m}");
    let reason = r["decision"]["reason"].as_str().unwrap_or_default();
    assert!(
        checked.contains(&"unpinned (OS decides)") || reason.contains("without probing another"),
        "{m} {reason}"
    );
    let outcome = m["outcome"].as_str().unwrap();
    assert!(["confirmed", "overturned"].contains(&outcome), "{m}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("remembered: "), "{err}");
    // The store says what happened, and the CLI shows it.
    let records = records(&store);
    let rec = &records.as_array().unwrap()[0];
    assert_eq!(rec["outcome"], outcome, "{rec}");
    assert_eq!(rec["uses"], 2, "{rec}");
    // The check watched which CPUs other work kept busy, and the record now says so.
    let busy = r["busy_cpus"].as_array().expect("busy_cpus in the report");
    assert_eq!(rec["busy"].as_array(), Some(busy), "{rec}");
    assert_eq!(
        m["busy_then"].as_array(),
        Some(&busy_first),
        "what the first record knew: {m}"
    );
    let table = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["memory", "--memory"])
        .arg(&store)
        .arg("list")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    // Columns are found where their heading starts (a pinning's label has spaces in it:
    // "unpinned (OS decides)").
    let header = table.lines().next().unwrap();
    let row = table.lines().nth(1).unwrap();
    let at = header.find("BUSY").expect("a BUSY column");
    let cell = row.get(at..).and_then(|r| r.split_whitespace().next());
    let shown = if busy.is_empty() {
        "-".to_string()
    } else {
        busy.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(cell, Some(shown.as_str()), "{table}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&store).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the store is private");
}

/// A store that cannot be used is said once, in stderr and the report; the program runs
/// as it would without memory.
fn assert_runs_without_memory(store: &Path, fault: &str) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    // A run that decides at once, so it has something to write back.
    let out = autopin_run(
        store,
        &report,
        &["--strategy", "fixed", "--schedule", "0"],
        SCRIPT,
    );
    assert_untouched(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("remembered decisions unavailable").count(),
        1,
        "{err}"
    );
    let r = read_json(&report);
    assert_eq!(r["memory"]["outcome"], "error", "{}", r["memory"]);
    assert!(
        r["memory"]["error"].as_str().unwrap().contains(fault),
        "{} should name {fault}",
        r["memory"]
    );
}

#[test]
fn a_corrupt_store_or_one_of_a_newer_schema_is_said_and_left_alone() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![0x42u8; 4096]).unwrap();
    assert_runs_without_memory(&junk, "corrupt");
    assert_eq!(
        std::fs::read(&junk).unwrap(),
        vec![0x42u8; 4096],
        "left as it was"
    );
    let newer = dir.path().join("newer.db");
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 7;")
        .unwrap();
    assert_runs_without_memory(&newer, "newer schema");
}

#[test]
fn a_store_locked_by_another_process_is_waited_for_briefly_then_done_without() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    // Created by autopin, then held by a writer that does not let go (in WAL mode readers
    // still read: the lookup works, the write-back waits and gives up).
    let out = autopin_run(&store, &dir.path().join("r0.json"), &[], SCRIPT);
    assert_untouched(&out);
    let holder = rusqlite::Connection::open(&store).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE;").unwrap();
    let t = std::time::Instant::now();
    assert_runs_without_memory(&store, "locked");
    assert!(t.elapsed().as_secs_f64() < 10.0, "{:?}", t.elapsed());
    holder.execute_batch("ROLLBACK;").unwrap();
}

#[test]
fn a_read_only_store_is_used_but_not_written() {
    let _serial = one_at_a_time();
    autopin_testkit::require!(
        !rustix::process::geteuid().is_root(),
        "root writes read-only files"
    );
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    let out = autopin_run(&store, &dir.path().join("r0.json"), &[], SCRIPT);
    assert_untouched(&out);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o400)).unwrap();
    assert_runs_without_memory(&store, "read-only");
}

/// What [`in_own_mounts`] ran: the status, stdout and stderr of the run under test.
struct MountedRun {
    out: Output,
    /// The store's records afterwards, as `autopin memory list --json` printed them.
    records: serde_json::Value,
    /// What `autopin memory forget --all` said while the file system was spoilt, and its
    /// exit status on the last line.
    forget: String,
    report: serde_json::Value,
}

/// Runs, in a mount namespace of its own (nothing shows outside it), a first remembering
/// run on a store in `$M` (a fresh 512 KiB tmpfs), then `prepare` (a shell fragment that
/// spoils the file system under the store), then the run under test, then `repair`, then
/// lists the store's records. Both runs keep a fixed pinning (decided at once, so each has
/// a decision to write back).
fn in_own_mounts(prepare: &str, repair: &str) -> Result<MountedRun, String> {
    in_own_mounts_as("d.db", prepare, repair)
}

/// [`in_own_mounts`] with the store named `store` in `$M`.
fn in_own_mounts_as(store: &str, prepare: &str, repair: &str) -> Result<MountedRun, String> {
    let ns = autopin_testkit::unshare_mount_flags()?;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("m")).unwrap();
    let common =
        "--recall --objective task-clock --no-perturbation-estimate -i 0.05 -w 0.02 --probe 0.05";
    let script = format!(
        r#"set -u
mount -t tmpfs -o size=512k tmpfs "$M" || exit 97
"$AP" run --memory "$M/$STORE" --report "$D/r0.json" {common} --strategy fixed --schedule 0 -- sh -c "$PROG" >/dev/null 2>&1
{prepare}
"$AP" run --memory "$M/$STORE" --report "$D/r.json" {common} --strategy fixed --schedule 0 -- sh -c "$PROG" >"$D/out" 2>"$D/err"
echo $? >"$D/rc"
"$AP" memory --memory "$M/$STORE" forget --all 2>"$D/forget"
echo $? >>"$D/forget"
{repair}
"$AP" memory --memory "$M/$STORE" list --json >"$D/list"
"#
    );
    let ran = Command::new("unshare")
        .arg(ns)
        .args(["sh", "-c", &script])
        .env("AP", assert_cmd::cargo::cargo_bin("autopin"))
        .env("M", d.join("m"))
        .env("D", d)
        .env("PROG", SCRIPT)
        .env("STORE", store)
        .output()
        .unwrap();
    if !d.join("rc").exists() {
        return Err(format!(
            "no mount namespace with a tmpfs here (unshare {ns}: {}{})",
            String::from_utf8_lossy(&ran.stderr).trim(),
            ran.status
        ));
    }
    use std::os::unix::process::ExitStatusExt;
    let rc: i32 = std::fs::read_to_string(d.join("rc"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    Ok(MountedRun {
        out: Output {
            status: std::process::ExitStatus::from_raw(rc << 8),
            stdout: std::fs::read(d.join("out")).unwrap(),
            stderr: std::fs::read(d.join("err")).unwrap(),
        },
        records: serde_json::from_slice(&std::fs::read(d.join("list")).unwrap())
            .unwrap_or(serde_json::Value::Null),
        report: read_json(&d.join("r.json")),
        forget: std::fs::read_to_string(d.join("forget")).unwrap(),
    })
}

/// The run under test ran as without memory, said why once, and the record the first run
/// wrote is still there.
fn assert_ran_without_losing(run: &MountedRun, fault: &str) {
    assert_untouched(&run.out);
    let err = String::from_utf8_lossy(&run.out.stderr);
    assert_eq!(
        err.matches("remembered decisions unavailable").count(),
        1,
        "{err}"
    );
    let m = &run.report["memory"];
    assert_eq!(m["hit"], true, "the store is still read: {m}");
    assert_eq!(m["outcome"], "error", "{m}");
    assert!(
        m["error"].as_str().unwrap().contains(fault),
        "{m} should name {fault}"
    );
    // Forgetting is refused, with the reason, as a failure of the moment (not bad input).
    assert!(run.forget.contains(fault), "{}", run.forget);
    assert_eq!(run.forget.lines().last(), Some("1"), "{}", run.forget);
    let records = run.records.as_array().expect("the store still lists");
    assert_eq!(records.len(), 1, "{}", run.records);
    assert_eq!(records[0]["uses"], 1, "{}", run.records);
}

#[test]
fn a_full_file_system_under_the_store_loses_neither_the_run_nor_a_record() {
    let _serial = one_at_a_time();
    // Every byte left taken by a filler file; after the run it goes.
    let run = autopin_testkit::ok_or_skip!(in_own_mounts(
        r#"dd if=/dev/zero of="$M/fill" bs=4096 2>/dev/null; sync"#,
        r#"rm -f "$M/fill""#
    ));
    assert_ran_without_losing(&run, "full");
}

#[test]
fn a_store_on_a_read_only_file_system_is_used_but_not_written_even_by_root() {
    let _serial = one_at_a_time();
    let run = autopin_testkit::ok_or_skip!(in_own_mounts(
        r#"mount -o remount,ro "$M""#,
        r#"mount -o remount,rw "$M""#
    ));
    assert_ran_without_losing(&run, "read-only");
}

#[test]
fn eight_runs_writing_one_store_at_once_lose_nothing() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    // One record per word (kept per argument list): eight one after another, eight at once.
    let remembering_run = |store: &Path, word: &str| {
        Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .args(["run", "--memory"])
            .arg(store)
            .args([
                "--memory-key",
                "args",
                "--recall",
                "--objective",
                "task-clock",
            ])
            .args([
                "--no-perturbation-estimate",
                "--strategy",
                "fixed",
                "-i",
                "0",
            ])
            .args(["--schedule", "0", "--", "sh", "-c"])
            .arg("echo $0; i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done")
            .arg(word)
            .output()
            .unwrap()
    };
    for i in 0..8 {
        let out = remembering_run(&store, &i.to_string());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{i}\n"));
    }
    let outs: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let store = &store;
                s.spawn(move || remembering_run(store, &format!("p{i}")))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("p{i}\n"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("unavailable"), "{err}");
    }
    assert_eq!(records(&store).as_array().unwrap().len(), 16);
}

/// A remembered decision that became wrong — the program was pinned to CPU 0, and now a
/// busy loop holds CPU 0 — is overturned by the check within 3 s of the check's start (its
/// budget is 1 s), and the record follows. (Counted from the check, not from autopin's start:
/// beside `stress-ng` and parallel builds autopin itself took seconds to start the program.)
#[test]
fn a_remembered_pinning_that_became_wrong_is_overturned() {
    let _serial = one_at_a_time();
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    let report = dir.path().join("r.json");
    let out = autopin_run(
        &store,
        &report,
        &["--strategy", "fixed", "--schedule", &first],
        SCRIPT,
    );
    assert_untouched(&out);
    // Two busy loops on that CPU: the remembered pinning gets a third of it.
    let mut busy: Vec<_> = (0..2)
        .map(|_| {
            Command::new("taskset")
                .args(["-c", &first, "sh", "-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect();
    let load = autopin_testkit::OutsideLoad::start();
    let out = autopin_run(&store, &report, &[], LONG_SCRIPT);
    // The busy loops are this test's children, not waited for yet: counted as other work.
    let outside = load.cpus() - 1.0;
    for b in &mut busy {
        let _ = b.kill();
        let _ = b.wait();
    }
    assert_untouched(&out);
    let r = read_json(&report);
    autopin_testkit::require!(
        r["memory"]["outcome"] == "overturned" || outside < 0.5,
        "other work used {outside:.1} CPUs during the check: {}",
        r["memory"]
    );
    assert_eq!(r["memory"]["outcome"], "overturned", "{}", r["memory"]);
    let d = &r["decision"];
    let check = r["searches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["index"] == d["search"])
        .unwrap_or_else(|| panic!("no search {} in {}", d["search"], r["searches"]));
    let took = d["at"].as_f64().unwrap() - check["start"].as_f64().unwrap();
    assert!(took < 3.0, "decided {took:.2} s into the check: {d}");
    assert_ne!(d["candidate"].as_str(), Some(first.as_str()), "{d}");
    assert!(
        d["reason"].as_str().unwrap().contains("was overturned"),
        "{d}"
    );
}

/// A program that names its phases (workloads/syncbench: barrier, triad) has a decision
/// remembered per phase; the next run applies each as its phase comes, without a search.
#[test]
fn each_phase_gets_its_remembered_pinning_without_a_search() {
    let _serial = one_at_a_time();
    let (first, last) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let exe = autopin_testkit::syncbench();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("decisions.db");
    let report = dir.path().join("r.json");
    let pair = format!("{first},{last}");
    let run = |how: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .env("OMP_NUM_THREADS", "2")
            .args(["run", "--memory"])
            .arg(&store)
            .arg("--report")
            .arg(&report)
            .args(["--no-perturbation-estimate", "--probe", "0.2", "-w", "0.05"])
            .arg("--recall")
            .args(how)
            .arg("--")
            .arg(&exe)
            .args(["-b", "2000000", "-s", "100", "-r", "2"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{err}");
        err
    };
    // First run: a fixed pinning decided for each phase as it comes, and remembered so.
    let err = run(&["--strategy", "fixed", "--schedule", &pair]);
    let rec = &records(&store)[0];
    let phases: Vec<&str> = rec["phases"]
        .as_array()
        .unwrap_or_else(|| panic!("no phases remembered: {rec}\n{err}"))
        .iter()
        .filter_map(|p| p["phase"].as_str())
        .collect();
    assert!(phases.contains(&"barrier"), "{rec}\n{err}");
    // Second run, a search among three candidates: each phase gets the pinning remembered
    // for it as it comes, and nothing is probed for it.
    let schedule = format!("{first},{first};{pair}");
    let err = run(&["--schedule", &schedule, "--unpinned"]);
    assert!(
        err.contains("phase barrier: applying the pinning remembered for it"),
        "{err}"
    );
    let r = read_json(&report);
    let from_memory: Vec<&serde_json::Value> = r["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["strategy"] == "memory")
        .collect();
    assert!(
        from_memory
            .iter()
            .any(|d| d["phase"] == "barrier" && d["candidate"] == pair.as_str()),
        "{}",
        r["decisions"]
    );
    let barrier_probes = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["phase"] == "barrier")
        .count();
    assert_eq!(barrier_probes, 0, "{err}");
    assert_eq!(records(&store)[0]["uses"], 2);
}

/// What the user names wins over a remembered decision (issue #62): with a record for the
/// program, `--strategy autopin1 --schedule …` still probes every pinning of the schedule,
/// the report says memory was skipped and why, and the record is left as it was;
/// `--recall` asks for the record instead.
#[test]
fn a_search_named_on_the_command_line_wins_over_a_remembered_decision() {
    let _serial = one_at_a_time();
    let (first, last) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("decisions.db");
    let report = dir.path().join("r.json");
    let run = |how: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .args(["run", "--memory"])
            .arg(&store)
            .arg("--report")
            .arg(&report)
            .args(["--no-perturbation-estimate"])
            .args(how)
            .args(["--", "sh", "-c", LONG_SCRIPT])
            .output()
            .unwrap();
        assert_untouched(&out);
        (
            read_json(&report),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A record for the default search: `last` alone.
    let (r, err) = run(&["--recall", "--strategy", "fixed", "--schedule", &last]);
    assert_eq!(r["memory"]["outcome"], "new", "{}\n{err}", r["memory"]);
    let before = records(&store);
    // The paper's algorithm over two pinnings, named: both probed as given.
    let schedule = format!("{first},{last};{first},{first}");
    let named = [
        "--strategy",
        "autopin1",
        "--schedule",
        &schedule,
        "-i",
        "0.05",
        "-w",
        "0.02",
        "-t",
        "0.1",
    ];
    let (r, err) = run(&named);
    assert_eq!(r["memory"]["outcome"], "skipped", "{}\n{err}", r["memory"]);
    assert_eq!(r["memory"]["hit"], false, "{}", r["memory"]);
    let why = r["memory"]["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("--strategy autopin1, --schedule named on the command line"),
        "{why}"
    );
    assert!(!err.contains("remembered:"), "{err}");
    assert!(err.contains("remembered decisions not used"), "{err}");
    let probed: Vec<&str> = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["label"].as_str())
        .collect();
    for want in [format!("{first},{last}"), format!("{first},{first}")] {
        assert!(
            probed.contains(&want.as_str()),
            "{want} not probed: {probed:?}\n{err}"
        );
    }
    assert_eq!(records(&store), before, "the record was left as it was");
    // Asked for, the record applies as it would to the default search.
    let (r, err) = run(&[&named[..], &["--recall"]].concat());
    assert_eq!(r["memory"]["hit"], true, "{}\n{err}", r["memory"]);
    assert!(err.contains("remembered:"), "{err}");
}

/// `autopin ARGS` confined to `cpus` by taskset.
fn autopin_under_taskset(cpus: &str, args: &[&str]) -> Output {
    Command::new("taskset")
        .args(["-c", cpus])
        .arg(assert_cmd::cargo::cargo_bin("autopin"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_remembered_pinning_outside_the_programs_cpus_is_never_applied_nor_imported() {
    let _serial = one_at_a_time();
    let (first, last) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    autopin_testkit::require!(autopin_testkit::have("taskset"), "needs taskset");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    let s = store.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--memory",
            s,
            "--recall",
            "--objective",
            "task-clock",
        ];
        args.extend(["--no-perturbation-estimate", "-i", "0.05", "-w", "0.02"]);
        args.extend(extra);
        args.extend(["--", "sh", "-c", SCRIPT]);
        autopin_under_taskset(&first, &args)
    };
    // A decision made under `taskset -c FIRST`: its key's CPU set is FIRST.
    let out = run(&["--strategy", "fixed", "--schedule", &first]);
    assert_untouched(&out);
    let export = dir.path().join("e.json");
    let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["memory", "--memory", s, "export"])
        .arg(&export)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let mut records: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(records[0]["key"]["cpus"], first.as_str());
    // An export edited to pin outside the record's CPU set is refused whole.
    for bad in [last.parse::<u64>().unwrap(), 4294967295] {
        records[0]["pinning"]["cpus"] = serde_json::json!([bad]);
        let edited = dir.path().join("edited.json");
        std::fs::write(&edited, records.to_string()).unwrap();
        let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .args(["memory", "--memory", s, "import"])
            .arg(&edited)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(edited.to_str().unwrap()), "{err}");
        assert!(
            err.contains(&format!("CPU {bad}, outside the record's CPU set {first}")),
            "{err}"
        );
    }
    // The same record written into the store behind autopin's back: not applied.
    records[0]["pinning"]["cpus"] = serde_json::json!([last.parse::<u64>().unwrap()]);
    records[0]["outcome"] = "confirmed".into();
    let db = rusqlite::Connection::open(&store).unwrap();
    db.execute("UPDATE decisions SET record = ?1", [records[0].to_string()])
        .unwrap();
    drop(db);
    let out = run(&[]);
    assert_untouched(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().next().unwrap().split_whitespace().nth(1),
        Some(first.as_str()),
        "the program was moved off the CPUs it was given: {stdout}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("it is not applied"), "{err}");
}

/// `autopin memory --memory STORE ARGS`: (exit code, stdout, stderr).
fn memory_cmd(store: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["memory", "--memory"])
        .arg(store)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The programs of the store's records, sorted.
fn programs(store: &Path) -> Vec<String> {
    let mut p: Vec<String> = records(store)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"]["program"].as_str().unwrap().to_string())
        .collect();
    p.sort();
    p
}

#[test]
fn forget_and_show_name_records_exactly_and_patterns_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    let all = [
        "/opt/a/solver",
        "/opt/b/Solver",
        "/opt/c/sol_er",
        "/opt/d/solxer",
        "/opt/e/other",
    ];
    let records: Vec<serde_json::Value> = all
        .iter()
        .map(|program| {
            serde_json::json!({
                "id": "x",
                "key": {"program": program, "program_id": "p", "machine": "m", "cpus": "0-1",
                        "threads": "2", "objective": "default"},
                "pinning": {"label": "0,1", "cpus": [0, 1]},
                "runner_up": null, "rate": 1.0, "unit": "u/s", "outcome": "new", "uses": 1,
                "created": 1.0, "updated": 1.0
            })
        })
        .collect();
    let export = dir.path().join("five.json");
    std::fs::write(&export, serde_json::to_string(&records).unwrap()).unwrap();
    let (code, _, err) = memory_cmd(&store, &["import", export.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(programs(&store).len(), 5);
    // SQL's LIKE characters are themselves, and case counts.
    for (what, left) in [("%", 5), ("sol_er", 4), ("solver", 3)] {
        let (code, _, err) = memory_cmd(&store, &["forget", what]);
        assert_eq!(programs(&store).len(), left, "forget {what}: {err}");
        if left == 5 {
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains("names are exact"), "{err}");
        } else {
            assert_eq!(code, Some(0), "{err}");
            assert!(err.contains("forgot 1 decision(s)"), "{err}");
        }
    }
    assert_eq!(
        programs(&store),
        ["/opt/b/Solver", "/opt/d/solxer", "/opt/e/other"]
    );
    // show matches as forget does.
    let (code, _, _) = memory_cmd(&store, &["show", "sol%"]);
    assert_eq!(code, Some(2));
    let (code, out, _) = memory_cmd(&store, &["show", "Solver"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("/opt/b/Solver") && !out.contains("solxer"),
        "{out}"
    );
    let (code, out, _) = memory_cmd(&store, &["show", "--pattern", "sol*"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("/opt/d/solxer") && !out.contains("Solver"),
        "{out}"
    );
    // A pattern, tried first: named, nothing forgotten; then forgotten, each named.
    let (code, _, err) = memory_cmd(&store, &["forget", "--pattern", "/opt/*r", "--dry-run"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("would forget") && err.contains("/opt/b/Solver"),
        "{err}"
    );
    assert!(
        err.contains("/opt/d/solxer") && err.contains("/opt/e/other"),
        "{err}"
    );
    assert_eq!(programs(&store).len(), 3);
    let (code, _, err) = memory_cmd(&store, &["forget", "--pattern", "/opt/[bd]/*"]);
    assert_eq!(
        code,
        Some(2),
        "no such pattern syntax, nothing matches: {err}"
    );
    let (code, _, err) = memory_cmd(&store, &["forget", "--pattern", "s*r"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("forgetting") && err.contains("/opt/d/solxer"),
        "{err}"
    );
    assert_eq!(programs(&store), ["/opt/b/Solver", "/opt/e/other"]);
}

#[test]
fn a_store_with_a_name_that_is_not_ascii_is_read_on_a_read_only_file_system() {
    let _serial = one_at_a_time();
    let run = autopin_testkit::ok_or_skip!(in_own_mounts_as(
        "décisions #1?.db",
        r#"mount -o remount,ro "$M""#,
        r#"mount -o remount,rw "$M""#
    ));
    assert_ran_without_losing(&run, "read-only");
}

/// Runs `program` (a shell command printing its start and end times) under autopin with
/// `store`, another process holding the store's write lock if `held`; returns the seconds
/// from autopin's start to the program's, from the program's end to autopin's, and stderr.
fn delays(store: &Path, program: &str, held: bool) -> (f64, f64, String) {
    let holder = held.then(|| {
        let c = rusqlite::Connection::open(store).unwrap();
        c.execute_batch(
            "BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS held (x); INSERT INTO held VALUES (1);",
        )
        .unwrap();
        c
    });
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let t0 = now();
    let fixed = ["--strategy", "fixed", "--schedule", "0"];
    let out = autopin_run(store, &store.with_extension("json"), &fixed, program);
    let t1 = now();
    if let Some(h) = holder {
        h.execute_batch("ROLLBACK;").unwrap();
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let times: Vec<f64> = stdout
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(times.len(), 2, "{stdout}");
    (
        times[0] - t0,
        t1 - times[1],
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_store_another_process_holds_locked_delays_neither_the_start_nor_the_exit() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = "date +%s.%N; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; date +%s.%N";
    // A store autopin made (WAL: the lookup reads, the write-back would wait), and a new
    // file another program holds (the store's creation would wait). Each against the same
    // run without the lock, so autopin's own start-up on a busy machine does not count.
    let made = dir.path().join("made.db");
    assert_untouched(&autopin_run(
        &made,
        &dir.path().join("r0.json"),
        &[],
        SCRIPT,
    ));
    let fresh = dir.path().join("fresh.db");
    let fresh0 = dir.path().join("fresh0.db");
    for (store, unlocked) in [(made.clone(), made), (fresh, fresh0)] {
        let (start0, exit0, _) = delays(&unlocked, program, false);
        let (start, exit, err) = delays(&store, program, true);
        assert!(err.contains("locked by another process"), "{err}");
        let shown = store.display();
        assert!(
            start - start0 < 0.75,
            "{shown}: the program started {start:.2} s after autopin, {start0:.2} s unlocked"
        );
        assert!(
            exit - exit0 < 0.75,
            "{shown}: autopin exited {exit:.2} s after the program, {exit0:.2} s unlocked"
        );
    }
}

#[test]
fn a_device_as_the_store_turns_memory_off_and_leaves_nothing_beside_it() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    for dev in ["/dev/null", "/dev/full"] {
        let journal = format!("{dev}-journal");
        let before = Path::new(&journal).exists();
        let out = autopin_run(
            Path::new(dev),
            &dir.path().join("r.json"),
            &["--strategy", "fixed", "--schedule", "0"],
            SCRIPT,
        );
        assert_untouched(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "{dev}: a character device, not a file for the decision store: memory is off"
            )),
            "{err}"
        );
        if !before {
            assert!(!Path::new(&journal).exists(), "{journal} was made");
        }
        let (code, _, err) = memory_cmd(Path::new(dev), &["list"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("a character device"), "{err}");
    }
    // A directory is named as one (SQLite said "unable to open database file").
    let (code, _, err) = memory_cmd(dir.path(), &["list"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("a directory, not a file"), "{err}");
}

#[test]
fn a_new_store_on_a_full_file_system_says_so() {
    let _serial = one_at_a_time();
    autopin_testkit::require!(autopin_testkit::have("unshare"), "needs unshare");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("m")).unwrap();
    std::fs::write(d.join("empty.json"), "[]").unwrap();
    let ns = if rustix::process::geteuid().is_root() {
        "-m"
    } else {
        "-rm"
    };
    let out = Command::new("unshare")
        .arg(ns)
        .args([
            "sh",
            "-c",
            r#"mount -t tmpfs -o size=512k tmpfs "$M" || exit 97
dd if=/dev/zero of="$M/fill" bs=4096 2>/dev/null
"$AP" memory --memory "$M/new.db" import "$D/empty.json""#,
        ])
        .env("AP", assert_cmd::cargo::cargo_bin("autopin"))
        .env("M", d.join("m"))
        .env("D", d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(97) {
        autopin_testkit::skip!("no mount namespace with a tmpfs here: {err}");
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the file system is full"), "{err}");
    assert!(!err.contains("disk I/O error"), "{err}");
}

/// An OpenMP program that sizes a per-thread array by `omp_get_max_threads()` before its
/// first region (so its count may not change mid-run), prints that count, checks its own
/// result, and runs `regions` short regions, splitting each one's work by that count by
/// hand and summing the threads' parts after it. Built with `-DASK_IN_REGION` it asks its
/// team's size inside its first region instead (`omp_get_num_threads()` in a `single`) and
/// keeps that answer: a conforming program too (with dynamic adjustment off every region
/// gets the same team), which a smaller team mid-run would leave with parts undone. Exit 1
/// when its result is wrong.
const SIZES_ITSELF_C: &str = r#"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    long regions = argc > 1 ? atol(argv[1]) : 2000;
#ifdef ASK_IN_REGION
    int n = 0;
#pragma omp parallel
    {
#pragma omp single
        n = omp_get_num_threads();
    }
#else
    int n = omp_get_max_threads();
#endif
    long *part = calloc(n, sizeof *part);
    long total = 0;
    for (long r = 0; r < regions; r++) {
#pragma omp parallel
        {
            int t = omp_get_thread_num();
            long s = 0;
            for (int i = t; i < 20000; i += n) s += i % 7;
            part[t] = s;
        }
        for (int t = 0; t < n; t++) { total += part[t]; part[t] = 0; }
    }
    long want = 0;
    for (int i = 0; i < 20000; i++) want += i % 7;
    printf("threads %d %s\n", n, total == want * regions ? "ok" : "WRONG");
    return total == want * regions ? 0 : 1;
}
"#;

/// `autopin run` of a test program with two threads (`OMP_NUM_THREADS=2`), its decisions
/// in `store` and its report in `report`, beside whatever the test set up: its stdout,
/// report and stderr, its exit 0 asserted.
fn run_two_threads(
    exe: &Path,
    store: &Path,
    report: &Path,
    iterations: &str,
) -> (String, serde_json::Value, String) {
    let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .env("OMP_NUM_THREADS", "2")
        .args(["run", "--memory"])
        .arg(store)
        .arg("--report")
        .arg(report)
        .args(["--no-perturbation-estimate", "--"])
        .arg(exe)
        .arg(iterations)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
    (stdout, read_json(report), err)
}

/// Fewer threads tried across runs (#61): a record whose pending team trial says "1 thread"
/// starts the next run with one thread (OMP_NUM_THREADS), judged on the team-free objective
/// against the record's rate; kept when faster, the run after starts with one thread too.
/// The runs are beside a busy loop on the first CPU, as a trial is only offered where some
/// CPU is busy (so the trial runs see the CPUs busy that the record saw, and check rather
/// than search afresh); on the idle machine the count is let go (the last run). The program
/// checks its own result in every run.
#[test]
fn fewer_threads_tried_from_the_start_are_kept_when_faster() {
    let _serial = one_at_a_time();
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let (first, last) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let exe = autopin_testkit::build_c("sizes_itself", SIZES_ITSELF_C, &["-fopenmp", "-O1"])
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    let report = dir.path().join("r.json");
    let mut busy = autopin_testkit::ok_or_skip!(BusyLoop::on(&first));
    // 150000: about 1.5 s with two threads here, 2.4 s with one beside a busy CPU, whose
    // trial search (one thread on the free CPU against the OS placement, as fast as each
    // other) decided at 1.3 s: the trial runs get twice as long.
    let run = |iterations: &str| run_two_threads(&exe, &store, &report, iterations);
    // A first run makes the record (decided, or its best so far).
    let (stdout, r, err) = run("150000");
    assert_eq!(stdout, "threads 2 ok\n", "{err}");
    assert_eq!(r["memory"]["hit"], false, "{}\n{err}", r["memory"]);
    // As if that run could not change the count mid-run beside a busy CPU: a pending
    // trial of one thread on the last CPU, and a rate in the team-free unit far below
    // anything the program runs at.
    let export = dir.path().join("e.json");
    let ok = |args: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .arg("memory")
            .arg("--memory")
            .arg(&store)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    };
    ok(&["export", export.to_str().unwrap()]);
    let mut records: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let cpu: u64 = last.parse().unwrap();
    records[0]["unit"] = "OpenMP team constructs/s".into();
    records[0]["rate"] = serde_json::json!(0.001);
    records[0]["team_trial"] = serde_json::json!({
        "pinning": {"label": format!("1 thread: {cpu}"), "cpus": [cpu], "team": 1},
        "state": "pending"
    });
    std::fs::write(&export, records.to_string()).unwrap();
    ok(&["forget", "--all"]);
    ok(&["import", export.to_str().unwrap()]);
    // The trial: one thread from the start, its result right, kept. (A run that measured no
    // decided rate, the machine being busy, leaves the trial to the next: a few tries.)
    let mut kept = false;
    let mut last_err = String::new();
    for _ in 0..3 {
        let (stdout, r, err) = run("300000");
        assert_eq!(stdout, "threads 1 ok\n", "{err}");
        assert_eq!(
            r["objective"]["unit"], "OpenMP team constructs/s",
            "{}",
            r["objective"]
        );
        assert!(err.contains("this run tries 1 thread"), "{err}");
        let said = r["memory"]["team_trial"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if said.contains("tries again") {
            last_err = err;
            continue;
        }
        assert!(said.contains("kept"), "{}\n{err}", r["memory"]);
        kept = true;
        break;
    }
    assert!(
        kept,
        "three trial runs measured no decided rate; the last:\n{last_err}"
    );
    // Kept: the next run starts with one thread again.
    let (stdout, _, err) = run("150000");
    assert_eq!(stdout, "threads 1 ok\n", "{err}");
    // Its check covers the count: as if the count had been kept at a rate far above
    // anything the program runs at, the next run at one thread falls below it, and the run
    // after rechecks the program's own count from its start (two threads, right result).
    ok(&["export", export.to_str().unwrap()]);
    let mut records: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(records[0]["team_trial"]["state"], "kept", "{records}");
    records[0]["rate"] = serde_json::json!(1e12);
    records[0]["team_trial"]["rate"] = serde_json::json!(1e12);
    std::fs::write(&export, records.to_string()).unwrap();
    ok(&["forget", "--all"]);
    ok(&["import", export.to_str().unwrap()]);
    let (stdout, r, err) = run("150000");
    assert_eq!(stdout, "threads 1 ok\n", "{err}");
    let said = r["memory"]["team_trial"].as_str().unwrap_or_default();
    assert!(
        said.contains("the next run rechecks the program's own count"),
        "{}\n{err}",
        r["memory"]
    );
    let (stdout, r, err) = run("150000");
    assert_eq!(stdout, "threads 2 ok\n", "{err}");
    assert!(err.contains("rechecks the program's own count"), "{err}");
    assert_eq!(r["threads"]["searched"], "no", "{}", r["threads"]);
    let said = r["memory"]["team_trial"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Judged against the fallen rate of one thread beside the busy CPU: the own count
    // comes back only when clearly faster, and the next run starts as the words say.
    let back = said.contains("own count is back");
    assert!(back || said.contains("kept count stays"), "{said}\n{err}");
    let (stdout, _, err) = run("150000");
    let want = if back {
        "threads 2 ok\n"
    } else {
        "threads 1 ok\n"
    };
    assert_eq!(stdout, want, "after: {said}\n{err}");
    // The busy loop gone, a kept count is let go: two threads, the result still right.
    busy.stop();
    let (stdout, r, err) = run("150000");
    assert_eq!(stdout, "threads 2 ok\n", "{err}");
    if !back {
        assert_eq!(r["threads"]["released"], 1, "{}\n{err}", r["threads"]);
    }
}

/// A program that kept the team size it asked inside its first region (#61: "others ask
/// once at start and keep the number"), beside a busy loop on the first CPU where one
/// thread would run faster: its count is not changed mid-run (its result stays right; with
/// the change it printed "threads 2 WRONG" and exited 1), the report says why, and its next
/// run starts with one thread, which it asks and keeps in turn, right again.
#[test]
fn a_program_that_keeps_the_size_it_asked_in_a_region_keeps_its_team_mid_run() {
    let _serial = one_at_a_time();
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let exe = autopin_testkit::build_c(
        "asks_in_region",
        SIZES_ITSELF_C,
        &["-fopenmp", "-O1", "-DASK_IN_REGION"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    let report = dir.path().join("r.json");
    let _busy = autopin_testkit::ok_or_skip!(BusyLoop::on(&first));
    // About 2 s with two threads beside the busy CPU: long enough for a search.
    let run = || run_two_threads(&exe, &store, &report, "120000");
    let (stdout, r, err) = run();
    assert_eq!(stdout, "threads 2 ok\n", "{err}");
    let t = &r["threads"];
    assert_ne!(t["searched"], "mid-run", "{t}\n{err}");
    // The search began after the program had shown it kept its answer: it says so, and
    // leaves one thread to the next run.
    if t["searched"] == "across runs" {
        assert!(
            t["why"]
                .as_str()
                .unwrap_or_default()
                .contains("without asking again"),
            "{t}\n{err}"
        );
    }
    let (stdout, _, err) = run();
    assert_eq!(stdout, "threads 1 ok\n", "{err}");
}

/// A program that reports its own progress (heartbeats, include/autopin.h) is judged on it
/// across team sizes too (#61): syncbench beside a busy loop on the first CPU, its barriers
/// in one long parallel region, leaves a trial of one thread to its next run, which starts
/// with one thread (its own output says so) and keeps its result right (the checksum).
/// Before, the heartbeat objective kept the count out of the search and the program ran
/// its two threads beside the busy loop run after run (4.7× slower than one thread in
/// bench/thread_count.sh).
#[test]
fn a_program_with_heartbeats_gets_fewer_threads_in_its_next_run_beside_a_busy_cpu() {
    let _serial = one_at_a_time();
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let exe = autopin_testkit::syncbench();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("d.db");
    let report = dir.path().join("r.json");
    let mut busy = autopin_testkit::ok_or_skip!(BusyLoop::on(&first));
    let load = autopin_testkit::OutsideLoad::start();
    let run = || {
        let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .env("OMP_NUM_THREADS", "2")
            .args(["run", "--memory"])
            .arg(&store)
            .arg("--report")
            .arg(&report)
            .args([
                "--",
                exe.to_str().unwrap(),
                "-s",
                "0",
                "-b",
                "4000000",
                "-r",
                "1",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
        (stdout, read_json(&report))
    };
    let (first_out, r1) = run();
    let (second_out, r2) = run();
    let outside = load.cpus() - 1.0;
    busy.stop();
    assert_eq!(r1["objective"]["unit"], "beats/s", "{}", r1["objective"]);
    autopin_testkit::require!(
        r1["threads"]["searched"] != "no" || outside < 0.5,
        "other work used {outside:.1} CPUs: {}",
        r1["threads"]
    );
    assert_eq!(r1["threads"]["trial"]["team"], 1, "{}", r1["threads"]);
    assert!(first_out.contains("threads=2"), "{first_out}");
    assert!(
        second_out.contains("threads=1"),
        "{second_out}\n{}",
        r2["memory"]
    );
    let checksum = |s: &str| {
        s.split("checksum=")
            .nth(1)
            .map(str::trim)
            .map(str::to_string)
    };
    assert_eq!(checksum(&first_out), checksum(&second_out));
    // The busy loop gone, every thread of the program's own count has a CPU: whatever the
    // trial's judgement, the next run starts two threads, and a kept count is let go.
    let (third_out, r3) = run();
    assert!(
        third_out.contains("threads=2"),
        "{third_out}\n{}\n{}",
        r2["memory"],
        r3["threads"]
    );
    assert_eq!(checksum(&first_out), checksum(&third_out));
    if r2["memory"]["team_trial"]
        .as_str()
        .is_some_and(|t| t.contains("; kept"))
    {
        assert_eq!(r3["threads"]["released"], 1, "{}", r3["threads"]);
    }
}

/// A shell spinning on one CPU, killed and reaped when stopped or dropped, whatever path a
/// test takes.
struct BusyLoop(std::process::Child);

impl BusyLoop {
    /// A loop on `cpu`, once it is busy: a neighbour counts as busy once it has computed
    /// for a while (0.5 s of its life) for more than half of its life, and other work on
    /// that CPU can keep it below that: then nothing here is a busy CPU to avoid (Err).
    fn on(cpu: &str) -> Result<BusyLoop, String> {
        let child = Command::new("taskset")
            .args(["-c", cpu, "sh", "-c", "while :; do :; done"])
            .spawn()
            .map_err(|e| format!("taskset: {e}"))?;
        let mut busy = BusyLoop(child);
        std::thread::sleep(std::time::Duration::from_millis(1200));
        let share = life_share(busy.0.id());
        if share <= 0.6 {
            busy.stop();
            return Err(format!(
                "the busy loop got {:.0}% of its CPU (other work shares it)",
                100.0 * share
            ));
        }
        Ok(busy)
    }

    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// GROMACS and LAMMPS name their own team size, read from OMP_NUM_THREADS: no team size
/// asked mid-run reaches them, but a smaller OMP_NUM_THREADS at their next start does.
/// A program built here the same way (omp_set_num_threads and num_threads clauses with the
/// count from OMP_NUM_THREADS, and one more region per step only with more than one thread,
/// as GROMACS skips a reduction, so its constructs/s at two counts do not compare), short
/// enough to end before any probe, beside a busy CPU: the first run leaves a team trial, the
/// second starts with one thread and is judged by its whole run against the first, and the
/// program's result is the same in every run. One that names the count in its arguments too
/// (GROMACS's `-ntomp 2`, which ends at once beside a different OMP_NUM_THREADS) gets no
/// trial and keeps its two threads.
#[test]
fn a_program_that_names_its_count_from_the_environment_tries_fewer_threads_at_its_next_start() {
    let _serial = one_at_a_time();
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let exe = autopin_testkit::ok_or_skip!(autopin_testkit::build_c(
        "names_count",
        NAMES_COUNT_C,
        &["-O2", "-fopenmp"]
    ));
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let mut busy = autopin_testkit::ok_or_skip!(BusyLoop::on(&first));
    let run = |store: &Path, args: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .env("OMP_NUM_THREADS", "2")
            .args(["run", "--memory"])
            .arg(store)
            .arg("--report")
            .arg(&report)
            .arg("--")
            .arg(&exe)
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{err}");
        (stdout, read_json(&report))
    };
    let store = dir.path().join("d.db");
    let (out1, r1) = run(&store, &["150000"]);
    let (out2, r2) = run(&store, &["150000"]);
    let (out3, r3) = run(&store, &["150000"]);
    let other = dir.path().join("other.db");
    let (out_named, r_named) = run(&other, &["150000", "2"]);
    let (out_named2, _) = run(&other, &["150000", "2"]);
    busy.stop();
    let t1 = &r1["threads"];
    assert_eq!(
        (t1["named"].as_u64(), t1["trial"]["team"].as_u64()),
        (Some(2), Some(1)),
        "{t1}\n{}\n{}",
        r1["notes"],
        r1["busy_cpus"]
    );
    assert!(out1.contains("threads=2"), "{out1}");
    // The second run tried one thread from its start, judged by its whole run.
    assert!(out2.contains("threads=1"), "{out2}\n{}", r2["memory"]);
    let judged = r2["memory"]["team_trial"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(judged.contains("the run took"), "{judged}");
    // Kept: later runs start with it; dropped: they keep their two threads.
    let kept = judged.contains("kept");
    assert!(kept || judged.contains("dropped"), "{judged}");
    let third = if kept { "threads=1" } else { "threads=2" };
    assert!(out3.contains(third), "{judged}\n{out3}\n{}", r3["memory"]);
    // Its arguments name its count: no trial, two threads in every run.
    assert_eq!(
        r_named["threads"]["searched"], "no",
        "{}",
        r_named["threads"]
    );
    assert!(
        r_named["threads"]["why"]
            .as_str()
            .is_some_and(|w| w.contains("its arguments name 2 too")),
        "{}",
        r_named["threads"]
    );
    assert!(out_named.contains("threads=2") && out_named2.contains("threads=2"));
    let checksum = |s: &str| s.split("checksum=").nth(1).map(|c| c.trim().to_string());
    for out in [&out2, &out3, &out_named, &out_named2] {
        assert_eq!(checksum(out), checksum(&out1), "{out}");
    }
}

/// GROMACS (Debian's `gmx`, when installed) with its count from OMP_NUM_THREADS=2, beside a
/// busy CPU: the first run under `autopin run` keeps two threads and leaves a team trial,
/// the second starts with one (GROMACS's log says so), and every run's energies at its first
/// step equal a run without autopin within `gmx check`'s default relative tolerance (1e-3;
/// one and two threads sum in other orders: the potential energy differs by about 1e-4).
/// The energies later in a run are not compared: molecular dynamics is chaotic, and two
/// runs without autopin at one and two threads part within a few hundred steps.
#[test]
fn gromacs_keeps_its_energies_when_its_next_run_tries_fewer_threads() {
    let _serial = one_at_a_time();
    autopin_testkit::require!(
        autopin_testkit::have("gmx"),
        "gmx (GROMACS) is not installed"
    );
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gmx = |args: &[&str], stdin: &str| {
        let mut child = Command::new("gmx")
            .args(args)
            .current_dir(d)
            .env("GMX_MAXBACKUP", "-1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "gmx {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // A box of water with PME, as bench/programs_common.sh makes it.
    gmx(
        &[
            "solvate",
            "-cs",
            "spc216.gro",
            "-box",
            "2.5",
            "2.5",
            "2.5",
            "-o",
            "water.gro",
        ],
        "",
    );
    let waters = std::fs::read_to_string(d.join("water.gro"))
        .unwrap()
        .matches("OW")
        .count();
    std::fs::write(
        d.join("topol.top"),
        format!("#include \"oplsaa.ff/forcefield.itp\"\n#include \"oplsaa.ff/spce.itp\"\n[ system ]\nwater\n[ molecules ]\nSOL {waters}\n"),
    )
    .unwrap();
    std::fs::write(
        d.join("md.mdp"),
        "integrator = md\nnsteps = 1000\ndt = 0.002\ncutoff-scheme = Verlet\ncoulombtype = PME\nrcoulomb = 1.0\nrvdw = 1.0\ntcoupl = v-rescale\ntc-grps = System\ntau-t = 0.1\nref-t = 300\nconstraints = h-bonds\nnstxout = 0\nnstvout = 0\nnstenergy = 100\nnstlog = 0\nnstcalcenergy = 100\n",
    )
    .unwrap();
    gmx(
        &[
            "grompp",
            "-f",
            "md.mdp",
            "-c",
            "water.gro",
            "-p",
            "topol.top",
            "-o",
            "md.tpr",
            "-maxwarn",
            "2",
        ],
        "",
    );
    let mdrun = |name: &str| -> Vec<String> {
        [
            "gmx", "mdrun", "-s", "md.tpr", "-ntmpi", "1", "-pin", "off", "-nb", "cpu", "-deffnm",
            name,
        ]
        .map(String::from)
        .to_vec()
    };
    // The first step's energies of run `name`: every term `gmx energy` lists.
    let energies = |name: &str| -> Vec<f64> {
        let terms = (1..=40)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        gmx(
            &[
                "energy",
                "-f",
                &format!("{name}.edr"),
                "-o",
                &format!("{name}.xvg"),
            ],
            &format!("{terms}\n\n"),
        );
        let xvg = std::fs::read_to_string(d.join(format!("{name}.xvg"))).unwrap();
        let first = xvg
            .lines()
            .find(|l| !l.starts_with('#') && !l.starts_with('@') && !l.trim().is_empty())
            .unwrap_or_default()
            .to_string();
        first
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect()
    };
    let plain_command = mdrun("plain");
    let plain = Command::new(&plain_command[0])
        .args(&plain_command[1..])
        .current_dir(d)
        .env("OMP_NUM_THREADS", "2")
        .env("GMX_MAXBACKUP", "-1")
        .output()
        .unwrap();
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let reference = energies("plain");
    assert!(reference.len() > 5, "{reference:?}");
    let mut busy = autopin_testkit::ok_or_skip!(BusyLoop::on(&first));
    let store = d.join("d.db");
    let runs: Vec<(String, serde_json::Value)> = (1..=3)
        .map(|k| {
            let name = format!("run{k}");
            let report = d.join(format!("{name}.json"));
            let out = Command::new(assert_cmd::cargo::cargo_bin("autopin"))
                .current_dir(d)
                .env("OMP_NUM_THREADS", "2")
                .env("GMX_MAXBACKUP", "-1")
                .args(["run", "--memory"])
                .arg(&store)
                .arg("--report")
                .arg(&report)
                .arg("--")
                .args(mdrun(&name))
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let log = std::fs::read_to_string(d.join(format!("{name}.log"))).unwrap_or_default();
            (log, read_json(&report))
        })
        .collect();
    busy.stop();
    let r1 = &runs[0].1;
    assert_eq!(r1["threads"]["named"], 2, "{}", r1["threads"]);
    assert_eq!(
        r1["threads"]["searched"], "across runs",
        "{}",
        r1["threads"]
    );
    assert!(
        runs[0].0.contains("Using 2 OpenMP threads"),
        "{}",
        runs[0].0
    );
    assert!(
        runs[1].0.contains("Using 1 OpenMP thread"),
        "{}\n{}",
        runs[1].1["memory"],
        runs[1].0
    );
    for (k, _) in runs.iter().enumerate() {
        let got = energies(&format!("run{}", k + 1));
        assert_eq!(got.len(), reference.len(), "run {}", k + 1);
        for (a, b) in got.iter().zip(&reference) {
            assert!(
                (a - b).abs() <= 1e-3 * b.abs().max(1.0),
                "run {}: {got:?} against {reference:?}",
                k + 1
            );
        }
    }
}

/// The program of the test above. An argument after the step count is ignored, but names a
/// count, as GROMACS's `-ntomp 2` does.
const NAMES_COUNT_C: &str = r#"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 20000;
    const char *e = getenv("OMP_NUM_THREADS");
    int n = e ? atoi(e) : omp_get_num_procs();
    if (n < 1)
        n = 1;
    omp_set_num_threads(n);
    double sum = 0;
    int team = 0;
    for (long step = 0; step < steps; step++) {
#pragma omp parallel num_threads(n) reduction(+ : sum)
        {
#pragma omp master
            team = omp_get_num_threads();
            int me = omp_get_thread_num();
            for (long i = me; i < 2000; i += n)
                sum += (double)((i * 7 + step) % 13);
        }
        if (n > 1) {
#pragma omp parallel num_threads(n)
            {
            }
        }
    }
    printf("threads=%d checksum=%.0f\n", team, sum);
    return 0;
}
"#;

/// The share of its life a process spent on a CPU (/proc/PID/stat's utime + stime against
/// its start, in clock ticks of 1/100 s).
fn life_share(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    // After the ')': state is field 0, utime 11, stime 12, starttime 19.
    let life = uptime * 100.0 - num(19);
    if life <= 0.0 {
        return 0.0;
    }
    (num(11) + num(12)) / life
}
