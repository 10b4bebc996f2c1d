//! The OpenMP progress objective end to end: the preload library counts completed OpenMP
//! work in programs built with GCC (libgomp) and clang (libomp), `autopin run` chooses it
//! when hardware counters are missing, and it ranks pinnings as the programs' runtimes do
//! where CPU time cannot tell them apart. Assertions compare rankings with large margins,
//! never timings against constants, so a loaded machine does not flip them.

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn autopin() -> Command {
    Command::cargo_bin("autopin").unwrap()
}

/// These tests measure CPU-bound programs; run in parallel they would disturb each other.
static CPU_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn ompwork_gcc() -> PathBuf {
    autopin_testkit::build_c_file(Path::new("workloads/ompwork.c"), &["-fopenmp"])
        .unwrap_or_else(|e| panic!("{e}"))
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn mean_rates(r: &serde_json::Value) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for p in r["probes"].as_array().expect("probes") {
        let e = sums
            .entry(p["label"].as_str().unwrap().to_owned())
            .or_default();
        e.0 += p["rate"].as_f64().unwrap();
        e.1 += 1.0;
    }
    sums.into_iter().map(|(k, (s, n))| (k, s / n)).collect()
}

/// Runs `ompwork` under `autopin run` without hardware counters; returns the report and the
/// program's stdout.
fn run_without_pmu(exe: &Path, args: &[&str], extra: &[&str]) -> (serde_json::Value, String) {
    let root = autopin_testkit::no_perf_root();
    run_with(exe, args, extra, Some(root.path()))
}

fn run_with(
    exe: &Path,
    args: &[&str],
    extra: &[&str],
    perf_root: Option<&Path>,
) -> (serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("r.json");
    let mut cmd = autopin();
    if let Some(root) = perf_root {
        cmd.env("AUTOPIN_PERF_SYSFS_ROOT", root);
    }
    // Waiting threads spin, as in `runtime`: with libgomp's default policy a waiting thread
    // spins for a while and then sleeps, and its CPU time would depend on how long the
    // master's section took on that probe's CPUs.
    let out = cmd
        .env("OMP_NUM_THREADS", "2")
        .env("OMP_WAIT_POLICY", "active")
        .args(["run", "--no-watch", "--report"])
        .arg(&rep)
        .args(extra)
        .arg("--")
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (read_json(&rep), String::from_utf8_lossy(&out.stdout).into())
}

/// The program's own output without autopin (what the preload library must not change).
fn plain_output(exe: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(exe)
        .env("OMP_NUM_THREADS", "2")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into()
}

fn checksum(stdout: &str) -> &str {
    stdout.rsplit("checksum").next().unwrap().trim()
}

fn assert_progress_objective(exe: &Path, runtime: &str) {
    // A fixed amount of work: the same checksum with the counting library in the program.
    let args = ["-m", "shared", "-r", "400", "-w", "100000"];
    let (_, stdout) = run_without_pmu(exe, &args, &["--schedule", "0,1;1,0", "-q"]);
    assert_eq!(
        checksum(&stdout),
        checksum(&plain_output(exe, &args)),
        "the program computes the same with the counting library in it"
    );
    // A fixed run time (3 s), long enough for probes however fast the build is.
    let timed = ["-m", "shared", "-t", "3", "-w", "100000"];
    let (r, _) = run_without_pmu(exe, &timed, &["--schedule", "0,1;1,0", "-q"]);
    assert_eq!(r["objective"]["unit"], "OpenMP constructs/s", "{r:#}");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("OpenMP program") && notes.contains(runtime),
        "the report says why: {notes}"
    );
    let probes = r["probes"].as_array().unwrap();
    assert!(!probes.is_empty(), "{r:#}");
    // Every candidate's probes saw OpenMP work (one probe of 0.2 s may see none when outside
    // load starves the program for its length; a candidate's every probe does not).
    for label in ["0,1", "1,0"] {
        let of: Vec<f64> = probes
            .iter()
            .filter(|p| p["label"] == label)
            .map(|p| p["rate"].as_f64().unwrap())
            .collect();
        assert!(
            of.iter().any(|&v| v > 0.0),
            "{label}'s probes saw OpenMP work: {probes:#?}"
        );
    }
}

#[test]
fn gcc_openmp_programs_get_the_progress_objective() {
    let _g = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    assert_progress_objective(&ompwork_gcc(), "libgomp");
}

#[test]
fn clang_libomp_programs_get_the_progress_objective() {
    autopin_testkit::require!(autopin_testkit::have("clang"), "clang is not installed");
    // Compiling is CPU work too: it waits for the measuring tests like they wait for it.
    let _g = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let exe = autopin_testkit::ok_or_skip!(autopin_testkit::build_c_file_with(
        "clang",
        Path::new("workloads/ompwork.c"),
        &["-fopenmp"]
    ));
    assert_progress_objective(&exe, "libomp");
}

/// One spinning process on CPU 0 (normal priority: a thread there gets about half the CPU).
struct BusyNeighbour(std::process::Child);

impl BusyNeighbour {
    fn on_cpu0() -> Self {
        BusyNeighbour(
            std::process::Command::new("taskset")
                .args(["-c", "0", "sh", "-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        )
    }
}

impl BusyNeighbour {
    /// Its CPU time so far, in clock ticks (utime + stime of its process).
    fn ticks(&self) -> u64 {
        autopin_testkit::process_cpu_ticks(self.0.id())
    }
}

impl Drop for BusyNeighbour {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Seconds the program reports for itself, pinned with `autopin pin -c cpus`.
fn runtime(exe: &Path, cpus: &str, args: &[&str]) -> f64 {
    let out = autopin()
        .env("OMP_NUM_THREADS", "2")
        .env("OMP_WAIT_POLICY", "active")
        .args(["pin", "-c", cpus, "--"])
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    s.split(": ")
        .nth(1)
        .and_then(|x| x.split(' ').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no time in {s:?}"))
}

/// Threads that spin in barriers beside a busy neighbour on CPU 0: the master computes
/// alone each round while the other thread spins. CPU time per second is the same whichever
/// thread shares CPU 0 (one thread gets half a CPU, the spinning one a whole one), but the
/// program runs much faster with the master on the free CPU. OpenMP progress sees it.
#[test]
fn barrier_spinners_task_clock_sees_no_difference_openmp_progress_ranks_as_runtime() {
    autopin_testkit::require!(autopin_testkit::have("taskset"), "taskset is not installed");
    autopin_testkit::require!(
        autopin_testkit::allowed_cpus() >= 2,
        "needs two allowed CPUs"
    );
    let _g = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let exe = ompwork_gcc();
    let busy = BusyNeighbour::on_cpu0();
    // Other work than this test and its own neighbour, over the whole measurement.
    let load = autopin_testkit::OutsideLoad::start();
    let (neighbour_ticks, since) = (busy.ticks(), std::time::Instant::now());
    let short = ["-m", "imbalance", "-r", "100", "-w", "2000000"];
    // Master on the busy CPU (0,1) against master on the free CPU (1,0).
    let t01 = runtime(&exe, "0,1", &short);
    let t10 = runtime(&exe, "1,0", &short);
    let long = ["-m", "imbalance", "-t", "5", "-w", "2000000"];
    let probe = ["--schedule", "0,1;1,0", "--budget", "4", "-q", "-w", "0.1"];
    let (omp, _) = run_without_pmu(
        &exe,
        &long,
        &[&probe[..], &["--objective", "openmp"]].concat(),
    );
    // task-clock through perf's software event (no PMU needed).
    let (tc, _) = run_with(
        &exe,
        &long,
        &[
            &probe[..],
            &["--objective", "task-clock", "--no-perturbation-estimate"],
        ]
        .concat(),
        None,
    );
    let neighbour = busy.ticks().saturating_sub(neighbour_ticks) as f64
        / 100.0
        / since.elapsed().as_secs_f64().max(1e-3);
    let outside = (load.cpus() - neighbour).max(0.0);
    drop(busy);
    let o = mean_rates(&omp);
    let c = mean_rates(&tc);
    // Under heavy outside load every candidate crawls and the runtimes stop differing;
    // then there is no ranking to check (counted as a skip, not a pass).
    autopin_testkit::require!(
        (t01 / t10).max(t10 / t01) >= 1.2,
        "the machine is too loaded for the runtimes to differ (0,1: {t01:.2} s, 1,0: {t10:.2} s)"
    );
    let (fast, slow) = if t10 < t01 {
        ("1,0", "0,1")
    } else {
        ("0,1", "1,0")
    };
    // The ranking is the claim; probes and whole runs see different moments of a noisy
    // machine, so only a small margin is asked for. Beside heavy other work the probes and
    // the timed runs see different machines: then it is a counted skip, with the figure.
    autopin_testkit::require!(
        o[fast] > 1.05 * o[slow] || outside < 0.5,
        "other work used {outside:.1} CPUs while the candidates were probed"
    );
    assert!(
        o[fast] > 1.05 * o[slow],
        "OpenMP progress ranks {fast} first as the runtimes do: {o:?} (runtimes 0,1 {t01:.2} s, 1,0 {t10:.2} s)"
    );
    // Beside the neighbour the two threads can get 1.5 CPUs; clearly less under both
    // candidates means other work took CPU time unevenly, and CPU time cannot be compared.
    // (task-clock reads in CPU-seconds a second.)
    autopin_testkit::require!(
        c["1,0"].max(c["0,1"]) >= 1.35,
        "other load took the program's CPU time (task-clock {c:?} CPU-s/s, 1.5 expected)"
    );
    let ratio = c["1,0"] / c["0,1"];
    assert!(
        (0.85..1.18).contains(&ratio),
        "task-clock sees about the same CPU time for both: {c:?}"
    );
}

/// A memory-bound kernel (atomic adds on cache lines) whose two threads share one line or
/// each own one, on one CPU (0,0) or two (0,1): OpenMP progress orders the candidates as
/// the runtimes do, for both kernels.
#[test]
fn shared_and_private_data_kernels_progress_ranks_as_runtime() {
    let _g = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let exe = ompwork_gcc();
    for mode in ["shared", "private"] {
        // Other work than this test, over the runtimes and the probes.
        let load = autopin_testkit::OutsideLoad::start();
        let short = ["-m", mode, "-r", "100", "-w", "100000"];
        let t00 = runtime(&exe, "0,0", &short);
        let t01 = runtime(&exe, "0,1", &short);
        let long = ["-m", mode, "-t", "5", "-w", "100000"];
        let (omp, _) = run_without_pmu(
            &exe,
            &long,
            &[
                "--schedule",
                "0,0;0,1",
                "--budget",
                "4",
                "-q",
                "--objective",
                "openmp",
            ],
        );
        let o = mean_rates(&omp);
        let faster_runtime = if t00 < t01 { "0,0" } else { "0,1" };
        let slower_runtime = if t00 < t01 { "0,1" } else { "0,0" };
        autopin_testkit::require!(
            (t00 / t01).max(t01 / t00) >= 1.3,
            "{mode}: the runtimes are too close to rank on this machine (0,0 {t00:.2} s, 0,1 {t01:.2} s)"
        );
        // The runtimes and the probes are measured one after the other: beside other work
        // each sees a different machine (beside `stress-ng` and parallel builds the ranking
        // turned over), and there is no claim to check; that is a counted skip, with the
        // figure.
        let outside = load.cpus();
        autopin_testkit::require!(
            o[faster_runtime] > o[slower_runtime] || outside < 0.5,
            "{mode}: other work used {outside:.1} CPUs while the runtimes and the progress were measured"
        );
        assert!(
            o[faster_runtime] > o[slower_runtime],
            "{mode}: progress {o:?} vs runtimes 0,0 {t00:.2} s, 0,1 {t01:.2} s"
        );
    }
}

/// An OpenMP runtime that comes with one of the program's libraries, not with the executable
/// (GROMACS's libgomp comes with libgromacs): the executable's own dependencies name no
/// runtime, yet the process loads one, and the preload library counts its work, so the
/// progress objective is chosen all the same.
#[test]
fn an_openmp_runtime_loaded_by_a_library_gets_the_progress_objective() {
    let _g = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libompwork.so");
    let exe = dir.path().join("main");
    let cc = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new("cc")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let src = autopin_testkit::repo_root().join("workloads/ompwork.c");
    cc(&[
        "-O2".as_ref(),
        "-fopenmp".as_ref(),
        "-fPIC".as_ref(),
        "-shared".as_ref(),
        "-Dmain=ompwork_main".as_ref(),
        src.as_os_str(),
        "-o".as_ref(),
        lib.as_os_str(),
    ]);
    let main_c = dir.path().join("main.c");
    std::fs::write(
        &main_c,
        "int ompwork_main(int, char **);\nint main(int c, char **v) { return ompwork_main(c, v); }\n",
    )
    .unwrap();
    cc(&[
        main_c.as_os_str(),
        "-o".as_ref(),
        exe.as_os_str(),
        "-L".as_ref(),
        dir.path().as_os_str(),
        "-lompwork".as_ref(),
        "-Wl,-rpath,$ORIGIN".as_ref(),
    ]);
    let needed = autopin_os::process::elf::needed_libraries(&exe).unwrap();
    assert!(
        autopin_perf::openmp_runtime(&needed).is_none(),
        "the executable itself links no OpenMP runtime: {needed:?}"
    );
    let timed = ["-m", "shared", "-t", "2", "-w", "100000"];
    let (r, _) = run_without_pmu(&exe, &timed, &["--schedule", "0,1;1,0", "-q"]);
    assert_eq!(r["objective"]["unit"], "OpenMP constructs/s", "{r:#}");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("libgomp"),
        "the report names the runtime: {notes}"
    );
}

/// Attached to an OpenMP program, autopin cannot count its constructs (the preload library
/// is not in it) and says that, not that the program is no OpenMP program.
#[test]
fn attaching_to_an_openmp_program_says_why_its_progress_is_not_counted() {
    let _g = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let exe = ompwork_gcc();
    let mut target = std::process::Command::new(&exe)
        .env("OMP_NUM_THREADS", "2")
        .args(["-m", "imbalance", "-t", "3", "-w", "2000000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let root = autopin_testkit::no_perf_root();
    let out = autopin()
        .env("AUTOPIN_PERF_SYSFS_ROOT", root.path())
        .args(["attach", "--no-memory", "--duration", "1"])
        .arg(target.id().to_string())
        .output()
        .unwrap();
    let _ = target.kill();
    let _ = target.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the program uses OpenMP (libgomp")
            && err.contains("only in programs that `autopin run` or `autopin pin` start"),
        "{err}"
    );
}
