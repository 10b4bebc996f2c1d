//! Property tests that run the binary on hostile input: random argv for the subcommands
//! (their options as `--help` lists them, values that break parsers, a mutated report for
//! `report`), and random `AUTOPIN_*`, `OMP_*` and `SLURM_*` variables (bytes that are not
//! UTF-8 too) for `run`. Every case ends by itself (within 30 s) and never panics (exit
//! 101, "panicked"); a program autopin started gives its exit status unless autopin refused
//! the arguments (2) or failed (1). The parse alone, for every subcommand and many more
//! argv, is `tests::any_argv_of_any_subcommand_parses_or_is_refused` in src/main.rs.
//! Nothing is written outside the test's directory: values never hold a `/`.
//! `PROPTEST_CASES` runs more cases.

use proptest::prelude::*;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::time::Duration;

fn cases(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The longest a case may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(30);

/// The subcommands run here (measure and compare run long by design; attach needs a
/// process to move), and what follows their options.
const COMMANDS: &[&str] = &[
    "topology",
    "cpus",
    "place",
    "candidates",
    "report",
    "memory list",
    "memory show",
    "memory forget",
    "memory export",
    "memory import",
    "pin",
    "run",
    "stat",
    "show",
    "completions",
    "man",
];

/// The options `autopin PATH --help` lists, without those that make a command run long on
/// purpose (`stat -p` watches another process for its `--duration`).
fn options(path: &str) -> Vec<String> {
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(path.split_whitespace())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let mut opts = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') {
            continue;
        }
        for w in t.split([' ', ',']).take(3) {
            if w.starts_with('-') && w.len() > 1 && w != "-h" && w != "--help" {
                opts.push(w.to_string());
            }
        }
    }
    if path == "stat" {
        opts.retain(|o| o != "-p" && o != "--pid");
    }
    opts
}

fn all_options() -> &'static Vec<Vec<String>> {
    static ALL: std::sync::OnceLock<Vec<Vec<String>>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| COMMANDS.iter().map(|c| options(c)).collect())
}

/// Values that break parsers, never holding a `/` (so no file is made outside the test's
/// directory, whatever option takes them).
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(autopin_testkit::HOSTILE_WORDS).prop_map(String::from),
        "-?[0-9]{0,3}\\.?[0-9]{0,3}(e[+-]?[0-9]{1,3})?(ms|s|min)?",
        "[a-zA-Z0-9:,;@%._-]{0,10}",
        "\\PC{0,5}",
    ]
    // (A NUL cannot be in an argument or the environment at all.)
    .prop_map(|w| w.replace('/', "_").replace('\0', ""))
}

/// A report `autopin run` wrote, for `report` to read (mutated per case).
fn report_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("autopin"))
            .args(["run", "--schedule", "0;0", "-q"])
            .args(["--no-perturbation-estimate", "-i", "0.05", "--report"])
            .arg(&p)
            .args([
                "--",
                "sh",
                "-c",
                "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        std::fs::read_to_string(p).unwrap()
    })
}

/// Runs `args` in `dir` with `env`; checks the case ended by itself without a panic, and
/// returns its exit code.
fn ends_without_panic(dir: &Path, args: &[String], env: &[(String, OsString)]) -> i32 {
    let out = assert_cmd::Command::cargo_bin("autopin")
        .unwrap()
        .current_dir(dir)
        .env("AUTOPIN_MEMORY", dir.join("store.db"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(args)
        .timeout(HANG)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("{args:?} {env:?}: ended by a signal or hung: {err}"));
    assert_ne!(code, 101, "{args:?} {env:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?} {env:?}: {err}");
    code
}

proptest! {
    #![proptest_config(cases(40))]

    #[test]
    fn any_argv_ends_without_a_panic(
        which in 0usize..COMMANDS.len(),
        picks in proptest::collection::vec((any::<proptest::sample::Index>(), word(), any::<bool>()), 0..5),
        positional in proptest::collection::vec(word(), 0..2),
        edits in proptest::collection::vec((0u16..=1000, 0u16..12, word()), 0..3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = COMMANDS[which];
        let opts = &all_options()[which];
        let mut args: Vec<String> = path.split_whitespace().map(String::from).collect();
        for (i, value, with_value) in picks {
            if !opts.is_empty() {
                args.push(opts[i.index(opts.len())].clone());
            }
            if with_value {
                args.push(value);
            }
        }
        match path {
            "report" => {
                let r = dir.path().join("in.json");
                std::fs::write(&r, autopin_testkit::mutate(report_text(), &edits)).unwrap();
                args.push("in.json".into());
            }
            // (This test process: `show` only reads /proc.)
            "show" => args.push(std::process::id().to_string()),
            _ => args.extend(positional),
        }
        let program = matches!(path, "pin" | "run" | "stat");
        if program {
            args.extend(["--", "sh", "-c", "exit 3"].map(String::from));
        }
        let code = ends_without_panic(dir.path(), &args, &[]);
        if program {
            // (A value taken for the program: 127 or 126, as a shell says.)
            prop_assert!([1, 2, 3, 126, 127].contains(&code), "{:?}: exit {}", args, code);
        }
    }

    #[test]
    fn any_environment_leaves_the_programs_status_alone(
        vars in proptest::collection::vec(
            (
                proptest::sample::select(&[
                    "AUTOPIN_MEMORY", "AUTOPIN_CACHE", "AUTOPIN_KEEPER", "AUTOPIN_CPUS",
                    "AUTOPIN_SKIP", "AUTOPIN_QUIET", "AUTOPIN_PRELOAD", "AUTOPIN_T",
                    "AUTOPIN_HEARTBEAT", "AUTOPIN_REGISTRY", "AUTOPIN_PERF_SYSFS_ROOT",
                    "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OMP_WAIT_POLICY",
                    "GOMP_CPU_AFFINITY", "KMP_AFFINITY", "SLURM_JOB_ID", "SLURM_PROCID",
                    "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE",
                    "SLURM_CPUS_PER_TASK", "SLURM_STEP_ID", "SLURMD_NODENAME",
                    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
                ][..]),
                prop_oneof![
                    word().prop_map(|w| w.into_bytes()),
                    proptest::collection::vec(any::<u8>().prop_filter("no NUL or /", |b| *b != 0 && *b != b'/'), 0..6),
                ],
            ),
            1..5,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let env: Vec<(String, OsString)> = vars
            .into_iter()
            .map(|(k, v)| (k.to_string(), OsString::from_vec(v)))
            .collect();
        // (The default objective: it falls back to task-clock from /proc where perf's is
        // refused to a user.)
        let args: Vec<String> = ["run", "--schedule", "0", "--no-perturbation-estimate", "-q"]
            .into_iter()
            .chain(["--", "sh", "-c", "exit 3"])
            .map(String::from)
            .collect();
        let code = ends_without_panic(dir.path(), &args, &env);
        prop_assert!([1, 2, 3].contains(&code), "{:?}: exit {}", env, code);
    }
}
