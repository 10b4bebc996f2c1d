//! `autopin simulate` (#57): the real search on simulated machines of real shapes (hwloc
//! dumps in tests/data), running program models whose optimum is known, keeps a pinning at
//! 95% of the optimum or better (median over seeds) for every model; bad input is a usage
//! error.

use std::process::Command;

fn autopin() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("autopin"));
    c.env("AUTOPIN_MEMORY", "off");
    c
}

fn dump(name: &str) -> String {
    autopin_testkit::data(&format!("hwloc-linux/{name}.tar.bz2"))
        .display()
        .to_string()
}

/// `autopin simulate ARGS --json FILE`, which must succeed: the JSON document and stdout.
fn simulated(args: &[&str]) -> (serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let out = autopin()
        .arg("simulate")
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    let doc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (doc, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `autopin simulate` of `model` with `threads` threads on the dump called `name`, over
/// `seeds` seeds: the median rate ÷ optimum, the median decision's time (infinite when
/// none came), how many seeds' outcomes the JSON holds, and what it printed.
fn medians(name: &str, model: &str, threads: &str, seeds: &str) -> (f64, f64, usize, String) {
    let (doc, stdout) = simulated(&[
        "--sysfs-root",
        &dump(name),
        "--model",
        model,
        "-n",
        threads,
        "--seeds",
        seeds,
    ]);
    let ratio = doc["median"]["ratio"].as_f64().unwrap_or(0.0);
    let at = doc["median"]["decided_at"]
        .as_f64()
        .unwrap_or(f64::INFINITY);
    let outcomes = doc["outcomes"].as_array().map_or(0, Vec::len);
    (ratio, at, outcomes, stdout)
}

#[test]
fn every_model_is_searched_to_within_five_percent_of_its_optimum() {
    for (name, threads) in [("16amd64-8n2c", "8"), ("64fake-4n2s2ca2c2t", "16")] {
        for model in ["bandwidth", "pairs", "smt", "barrier", "phases"] {
            let (ratio, _, outcomes, stdout) = medians(name, model, threads, "3");
            assert!(
                ratio >= 0.95,
                "{name} {model}: rate ÷ optimum {ratio}: {stdout}"
            );
            assert_eq!(outcomes, 3);
        }
    }
}

/// Seven threads on a machine whose CPUs are partly offline (packages of 2, 1, 2 and 2
/// usable cores): the candidates seat neighbouring threads in the packages that hold more
/// of them first, so every pair but the odd thread's meets inside a package (0.834 of the
/// optimum before).
#[test]
fn pairs_on_a_machine_with_offline_cpus_stay_together() {
    let (ratio, _, _, stdout) = medians("16em64t-4s2c2t-offlines", "pairs", "7", "3");
    assert!(ratio >= 0.95, "rate ÷ optimum {ratio}: {stdout}");
}

/// A clean first search (nothing busy beside the program, no swing) decides within 3 s of
/// the program's start: on the 256-PU POWER dump (8 nodes, SMT4), bandwidth-bound and
/// SMT-sensitive programs of 64 threads, where a dozen classes of candidates lie within a
/// few percent of each other, decided at 2.7–2.9 s (medians of 3 seeds), at about 4.8 s
/// with `--race deadline=20`; the answer stays within 5% of the optimum.
#[test]
fn a_clean_search_decides_within_three_seconds_of_the_start() {
    let at = |model: &str, race: &str| {
        let (doc, stdout) = simulated(&[
            "--sysfs-root",
            &dump("256ppc-8n8s4t"),
            "--model",
            model,
            "-n",
            "64",
            "--seeds",
            "3",
            "--race",
            race,
        ]);
        let ratio = doc["median"]["ratio"].as_f64().unwrap();
        assert!(ratio >= 0.95, "{model}: rate ÷ optimum {ratio}: {stdout}");
        doc["median"]["decided_at"]
            .as_f64()
            .unwrap_or(f64::INFINITY)
    };
    for model in ["bandwidth", "smt"] {
        let quick = at(model, "deadline=2.9");
        assert!(quick <= 3.0, "{model}: decided at {quick} s");
        let slow = at(model, "deadline=20");
        assert!(
            slow > quick,
            "{model}: {slow} s without the deadline, {quick} s with it"
        );
    }
}

/// The floor #57 asks for, over every hwloc dump in tests/data (2–256 PUs: hybrid,
/// offline CPUs, CPU-less nodes, odd cache trees) × every model × 4 threads, half the
/// cores and all the cores: the median over 10 seeds keeps at least 0.95 of the model's
/// optimum and decides within 3 s of the program's start (bench/simulate.sh prints the
/// same table with the work lost and autopin's CPU a tick).
#[test]
fn every_topology_and_model_keeps_the_floor() {
    assert_floor(
        &["bandwidth", "pairs", "smt", "barrier", "phases"],
        &[],
        200,
    );
}

/// The floor beside an OS placement that swings as the kernel's does (`--os-swing`: on the
/// barrier model's busy CPUs, then off them). Before, 15 of the 46 cases decided at
/// 3.1–5.5 s, one seed never: the OS placement's looks were had in the round's middle but
/// judged against a leader probed once (among pinnings within noise of each other the lead
/// passed from one to the next), so the search waited a round for a leader seen twice.
#[test]
fn every_topology_keeps_the_floor_beside_a_swinging_os_placement() {
    assert_floor(&["barrier"], &["--os-swing"], 40);
}

/// The floor with the thread count searched (`--openmp-team`: the barrier model as an
/// OpenMP program whose teams may change mid-run, its count set by OMP_NUM_THREADS). With
/// all the cores' threads beside other work on one CPU in four, a team of the free CPUs
/// runs twice the pace of any pinning of the whole team: the search finds it (rate ÷ the
/// best count's optimum ≥ 0.95) and decides within 3 s of the start, as without the count
/// (born on the team, whose start-up is its first probe; docs/threads.md). Where it keeps a
/// team, the count made the candidates more but not the search longer: decided within 2.5
/// s of the start (one team of the free CPUs is offered; with the spread and the packed
/// order of the same CPUs both offered, the two tied and those cases decided at 2.7–2.9 s).
#[test]
fn every_topology_keeps_the_floor_with_the_thread_count_searched() {
    let teams = std::sync::atomic::AtomicUsize::new(0);
    for_every_case(&["barrier"], &["--openmp-team"], 40, |case, doc| {
        below_the_floor(case, doc).or_else(|| {
            // Most seeds kept a team of fewer threads: decided within 2.5 s.
            let outcomes = doc["outcomes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            let kept_team = outcomes.iter().filter(|o| o["team"].is_u64()).count();
            if 2 * kept_team <= outcomes.len() {
                return None;
            }
            teams.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let at = median_decision(doc);
            (at > 2.5).then(|| format!("{case}: kept a team, decided at {at:.2} s"))
        })
    });
    let teams = teams.into_inner();
    assert!(teams >= 10, "{teams} cases kept a team");
}

/// Every dump in tests/data × `models` × three thread counts (4, half the cores, all of
/// them), 10 seeds each with `extra` options, at least `min_cases` cases: every case's
/// median rate ÷ optimum is 0.95 or more and its median decision within 3 s.
fn assert_floor(models: &[&str], extra: &[&str], min_cases: usize) {
    for_every_case(models, extra, min_cases, below_the_floor);
}

/// What keeps a case off the floor (median rate ÷ optimum 0.95 or more, median decision
/// within 3 s of the start), if anything.
fn below_the_floor(case: &str, doc: &serde_json::Value) -> Option<String> {
    let ratio = doc["median"]["ratio"].as_f64().unwrap_or(0.0);
    let at = median_decision(doc);
    (ratio < 0.95 || at > 3.0)
        .then(|| format!("{case}: rate ÷ optimum {ratio:.3}, decided at {at:.2} s"))
}

fn median_decision(doc: &serde_json::Value) -> f64 {
    doc["median"]["decided_at"]
        .as_f64()
        .unwrap_or(f64::INFINITY)
}

/// Every dump in tests/data × `models` × three thread counts (4, half the cores, all of
/// them), simulated over 10 seeds each with `extra` options (two at a time), at least
/// `min_cases` cases; `check` says what is wrong with a case's outcome, if anything, and
/// every case must pass it.
fn for_every_case(
    models: &[&str],
    extra: &[&str],
    min_cases: usize,
    check: impl Fn(&str, &serde_json::Value) -> Option<String> + Sync,
) {
    let names = autopin_testkit::hwloc_dump_names();
    assert!(names.len() >= 15, "{names:?}");
    let mut cases: Vec<(String, std::path::PathBuf, &str, usize)> = Vec::new();
    for name in &names {
        let dir = autopin_testkit::hwloc_dump(name);
        let out = autopin()
            .args(["topology", "--format", "json", "--sysfs-root"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let cores: std::collections::BTreeSet<String> = doc["pus"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| {
                p["allowed"].as_bool() != Some(false) && p["online"].as_bool() != Some(false)
            })
            .map(|p| p["core"].to_string())
            .collect();
        if cores.len() < 2 {
            continue;
        }
        let counts: std::collections::BTreeSet<usize> =
            [cores.len().min(4), (cores.len() / 2).max(1), cores.len()].into();
        for n in counts {
            for &model in models {
                cases.push((name.clone(), dir.clone(), model, n));
            }
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((name, dir, model, n)) = cases.get(i) else {
                    break;
                };
                let dir = dir.display().to_string();
                let n = n.to_string();
                let mut args = vec![
                    "--sysfs-root",
                    &dir,
                    "--model",
                    model,
                    "-n",
                    &n,
                    "--seeds",
                    "10",
                ];
                args.extend_from_slice(extra);
                let (doc, _) = simulated(&args);
                if let Some(failure) = check(&format!("{name} {model} -n {n}"), &doc) {
                    failures.lock().unwrap().push(failure);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(cases.len() >= min_cases, "{} cases", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// On the hybrid dump (6 P-cores with SMT at 1900 MHz base, 8 E-cores at 1400 MHz in L2
/// clusters of four), the models run an E-core thread at 1400/1900 of a P-core's: 4 threads
/// of communicating pairs are best on P-cores, where the OS placement puts them, and every
/// model reaches 95% of its optimum. With every kind as fast as any, the models' optimum
/// was pairs on the E-cores' shared L2s, and the search, which kept the OS placement,
/// scored 0.948 in every seed.
#[test]
fn on_a_hybrid_machine_the_fast_cores_are_the_optimum() {
    for model in ["pairs", "smt", "barrier"] {
        let (ratio, _, _, stdout) = medians("20em64t-hybrid-1p6c2t+2ca4co1t", model, "4", "3");
        assert!(ratio >= 0.95, "{model}: rate ÷ optimum {ratio}: {stdout}");
    }
}

/// A barrier code beside busy CPUs (the model's other work on one CPU in four) is born
/// pinned off them and searched from 1.5 s on; its search is clean only once the OS
/// placement is out, which takes three looks at it. Looked at once a round, after a round
/// of a dozen pinnings, those looks ended at 3.8 s (8 threads on 16 CPUs) and 4.5 s (4 on
/// 64); looked at between the round's probes, the decision comes within 3 s of the start.
#[test]
fn a_barrier_code_beside_busy_cpus_decides_within_three_seconds() {
    for (name, threads) in [("16amd64-8n2c", "8"), ("64fake-4n2s2ca2c2t", "4")] {
        let (ratio, at, _, stdout) = medians(name, "barrier", threads, "3");
        assert!(ratio >= 0.95, "{name}: rate ÷ optimum {ratio}: {stdout}");
        assert!(at <= 3.0, "{name}: decided at {at} s: {stdout}");
    }
}

/// `--race` changes the search (a longer probe (0.4 s, whole ticks of 0.1 s) shows in the report `--report` writes, which
/// `autopin report` reads back like any run's); a setting it does not know is a usage error.
#[test]
fn race_settings_reach_the_search_and_the_report_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = autopin()
        .args([
            "simulate",
            "--synthetic",
            "numa:2 core:4 pu:1",
            "--model",
            "bandwidth",
        ])
        .args(["-n", "4", "--race", "probe=0.4", "--report"])
        .arg(&report)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let probes = doc["probes"].as_array().expect("probes");
    assert!(!probes.is_empty(), "{doc}");
    let whole: Vec<f64> = probes
        .iter()
        .filter(|p| p["startup"] != serde_json::Value::Bool(true))
        .map(|p| p["duration"].as_f64().unwrap())
        .collect();
    assert!(
        whole.iter().any(|&d| (d - 0.4).abs() < 0.02),
        "no probe of 0.4 s: {whole:?}"
    );
    assert!(
        doc["decision"].is_object() || doc["decisions"].is_array(),
        "{doc}"
    );
    let shown = autopin().arg("report").arg(&report).output().unwrap();
    assert_eq!(
        shown.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    for (setting, want) in [
        ("bogus=1", "unknown setting \"bogus\""),
        ("probe=abc", "probe=\"abc\""),
        ("probe", "name=value"),
    ] {
        let out = autopin()
            .args(["simulate", "--synthetic", "core:4 pu:1", "--model", "pairs"])
            .args(["--race", setting])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{setting}: {err}");
        assert!(err.contains(want), "{setting}: {err}");
    }
}

#[test]
fn bad_input_is_a_usage_error_that_says_what_is_valid() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["simulate", "--synthetic", "core:4 pu:1", "--model", "fast"],
            "valid: bandwidth, pairs, smt, barrier, phases",
        ),
        (
            &[
                "simulate",
                "--synthetic",
                "core:4 pu:1",
                "--model",
                "smt",
                "-n",
                "5",
            ],
            "from 1 to the 4 CPUs",
        ),
        (
            &[
                "simulate",
                "--sysfs-root",
                "/nonexistent/dump",
                "--model",
                "smt",
            ],
            "/nonexistent/dump",
        ),
    ];
    for (args, want) in cases {
        let out = autopin().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The team of the free CPUs is asked from birth also where the topology's first pinning
/// lists those CPUs in another order: on `16amd64-8n2c-cpusets` (10 CPUs allowed), 10
/// threads beside the model's 3 busy CPUs are born on the pinning by package
/// (1,2,3,12,13,15,6, then the busy ones) and the team of the 7 free CPUs lists them in CPU
/// order. The program is born on the team's order, its start-up is the team's first probe,
/// and the search decides in its first round, within 2 s. Asking none there, the start-up
/// ran the whole team at half the pace and the decision came at 2.30 s.
#[test]
fn a_team_listed_in_another_order_than_the_birth_pinning_is_asked_from_birth() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let dump = dump("16amd64-8n2c-cpusets");
    let (doc, _) = simulated(&[
        "--sysfs-root",
        &dump,
        "--model",
        "barrier",
        "--openmp-team",
        "-n",
        "10",
        "--seeds",
        "3",
        "--report",
        report.to_str().unwrap(),
    ]);
    let at = median_decision(&doc);
    assert!(at <= 2.0, "decided at {at:.2} s: {doc}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let first = &r["probes"][0];
    assert_eq!(first["startup"], serde_json::Value::Bool(true), "{first}");
    let cand = &r["candidates"][first["candidate"].as_u64().unwrap() as usize];
    assert_eq!(cand["team"], 7, "{cand}");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("(its first 7 CPUs in the team candidate's order)")
            && notes.contains("asked for 7 thread(s) from the second on"),
        "{notes}"
    );
}
