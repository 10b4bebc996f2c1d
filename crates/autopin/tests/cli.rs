//! The command line as a whole: one meaning per flag across subcommands, old spellings kept
//! as hidden aliases, examples in every subcommand's help, the command's own options before the
//! machine-source options, generated completions and man page, and output a person can read.

use assert_cmd::Command;
use autopin_testkit::require;

fn autopin() -> Command {
    Command::cargo_bin("autopin").unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = autopin().args(args).assert().success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

const SUBCOMMANDS: [&[&str]; 19] = [
    &["topology"],
    &["cpus"],
    &["place"],
    &["candidates"],
    &["pin"],
    &["run"],
    &["attach"],
    &["report"],
    &["measure", "latency"],
    &["measure", "memory"],
    &["compare"],
    &["stat"],
    &["show"],
    &["top"],
    &["doctor"],
    &["memory"],
    &["completions"],
    &["man"],
    &[],
];

#[test]
fn every_help_has_examples_and_lists_own_options_before_the_machine_source() {
    for sub in SUBCOMMANDS {
        let mut args = sub.to_vec();
        args.push("--help");
        let help = stdout(&args);
        let examples = help
            .find("Examples:")
            .unwrap_or_else(|| panic!("{sub:?}: no examples"));
        let example_lines = help[examples..]
            .lines()
            .filter(|l| l.trim_start().starts_with("autopin "))
            .count();
        assert!(example_lines >= 2, "{sub:?}: {example_lines} example(s)");
        if let Some(machine) = help.find("Machine source") {
            let options = help.find("Options:").unwrap();
            assert!(options < machine, "{sub:?}: own options must come first");
            // No option of the command itself under the machine-source heading.
            let section = &help[machine..examples];
            for l in section.lines().filter(|l| l.trim_start().starts_with('-')) {
                assert!(
                    ["--sysfs-root", "--synthetic", "--load", "--from-latency"]
                        .iter()
                        .any(|f| l.contains(f)),
                    "{sub:?}: {l:?} listed as a machine source"
                );
            }
        }
        // -n is a thread count wherever it is shown.
        for l in help.lines().filter(|l| l.trim_start().starts_with("-n,")) {
            assert!(l.contains("--threads"), "{sub:?}: -n is {l:?}");
        }
    }
}

#[test]
fn compare_runs_and_strategy_keep_their_old_short_spellings() {
    // -n (old) and --runs/-r (new) are the same option: both are checked the same way.
    for runs in [["-n", "0"], ["--runs", "0"], ["-r", "0"]] {
        let out = autopin()
            .arg("compare")
            .args(runs)
            .args(["--strategy", "none", "--", "true"])
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("--runs must be at least 1"), "{err}");
    }
    // -s (old) still names a strategy in compare.
    let out = autopin()
        .args([
            "compare", "-q", "-r", "1", "-s", "none", "--seed", "3", "--", "true",
        ])
        .assert()
        .success();
    let table = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(table.contains("none (baseline)"), "{table}");
    // -q: no progress lines on a non-terminal stderr; without it, one per run.
    assert!(out.get_output().stderr.is_empty());
    let out = autopin()
        .args(["compare", "-r", "2", "--strategy", "none", "--", "true"])
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("run 1/2: `none`"), "{err}");
    assert!(err.contains("run 2/2: `none` (about"), "{err}");
}

#[test]
fn candidates_max_is_max_candidates() {
    let m = ["--synthetic", "package:2 core:4 pu:2"];
    let mut old = vec!["candidates", "-n", "4", "--max", "2"];
    old.extend(m);
    let mut new = vec!["candidates", "-n", "4", "--max-candidates", "2"];
    new.extend(m);
    assert_eq!(stdout(&old), stdout(&new));
    assert_eq!(stdout(&new).lines().count(), 2);
}

#[test]
fn sharing_is_strategy_colon_file_in_place_and_pin_and_the_old_form_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("comm.csv");
    std::fs::write(&file, "0 9 1 1\n9 0 1 1\n1 1 0 9\n1 1 9 0\n").unwrap();
    let f = file.to_str().unwrap();
    let spec = format!("LP_COMPACT:{f}");
    let m = ["--synthetic", "package:2 core:2 pu:1"];
    let place = |extra: &[&str]| {
        let mut a = vec!["place", "--format", "json"];
        a.extend(extra);
        a.extend(m);
        stdout(&a)
    };
    let new = place(&["--sharing", &spec]);
    assert_eq!(new, place(&["--sharing", f, "--policy", "LP_COMPACT"]));
    let cpus: serde_json::Value = serde_json::from_str(&new).unwrap();
    let list = cpus["cpus"].to_string();
    // pin -p prints the same CPUs for either spelling.
    let pin = |extra: &[&str]| {
        let mut a = vec!["pin", "-p"];
        a.extend(extra);
        a.extend(m);
        stdout(&a).trim().to_string()
    };
    let p = pin(&["--sharing", &spec]);
    assert_eq!(p, pin(&["--sharing", f, "--policy", "lp_compact"]));
    assert_eq!(format!("[{p}]"), list);
    // A bare file without a strategy says what is expected.
    let out = autopin()
        .args(["place", "--sharing", f])
        .args(m)
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("STRATEGY:FILE"));
}

#[test]
fn completions_are_valid_scripts() {
    for shell in ["bash", "zsh", "fish"] {
        let text = stdout(&["completions", shell]);
        assert!(
            text.contains("autopin") && text.contains("max-candidates"),
            "{shell}"
        );
    }
    // A policy (or a synthetic machine) is a word, not a file: no file names are offered.
    let bash = stdout(&["completions", "bash"]);
    let cases: Vec<&str> = bash.split("\n                --").skip(1).collect();
    for option in ["policy)", "synthetic)"] {
        let found: Vec<&&str> = cases.iter().filter(|c| c.starts_with(option)).collect();
        assert!(!found.is_empty(), "bash: no --{option}");
        for c in found {
            let body = c.split(";;").next().unwrap();
            assert!(
                !body.contains("compgen -f"),
                "bash offers files for --{option}: {body}"
            );
        }
    }
    let zsh = stdout(&["completions", "zsh"]);
    for line in zsh
        .lines()
        .filter(|l| l.starts_with("'--policy=") || l.starts_with("'--synthetic="))
    {
        assert!(
            line.trim_end().ends_with(":' \\"),
            "zsh offers files: {line}"
        );
    }
    let fish = stdout(&["completions", "fish"]);
    for line in fish
        .lines()
        .filter(|l| l.contains("-l policy ") || l.contains("-l synthetic "))
    {
        assert!(
            line.trim_end().ends_with("-r -f"),
            "fish offers files: {line}"
        );
    }
    require!(autopin_testkit::have("bash"), "bash not installed");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("autopin.bash");
    std::fs::write(&f, stdout(&["completions", "bash"])).unwrap();
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(&f)
        .status()
        .unwrap();
    assert!(st.success(), "bash -n rejects the completion script");
}

#[test]
fn man_page_renders() {
    let page = stdout(&["man"]);
    assert!(
        page.starts_with(".ie") || page.starts_with(".TH"),
        "{}",
        &page[..80]
    );
    for sub in ["AUTOPIN PIN", "AUTOPIN COMPARE", "--max-candidates"] {
        assert!(
            page.replace("\\-", "-").contains(sub),
            "man page lacks {sub}"
        );
    }
    // One page: it points to no autopin-topology(1) or other page that is not installed.
    assert!(
        !page.replace("\\-", "-").contains("autopin-topology(1)") && !page.contains("(1)"),
        "the page names pages that do not exist"
    );
    assert!(page.contains(".SH SUBCOMMANDS"), "no list of subcommands");
    require!(autopin_testkit::have("man"), "man not installed");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("autopin.1");
    std::fs::write(&f, &page).unwrap();
    let out = std::process::Command::new("man")
        .arg("-l")
        .arg(&f)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Find and apply the best thread-to-core pinning"));
    assert!(text.contains("AUTOPIN CANDIDATES"));
}

#[test]
fn counts_are_singular_or_plural_and_big_numbers_have_no_exponent() {
    let out = autopin()
        .args(["candidates", "-n", "1", "--synthetic", "pu:1"])
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("1 class for 1 thread;"), "{err}");
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("1 thread on its own CPU") && !text.contains("separate"),
        "{text}"
    );
    let root = autopin_testkit::hwloc_dump("256ppc-8n8s4t");
    let out = autopin()
        .args([
            "candidates",
            "-n",
            "64",
            "--max-candidates",
            "1",
            "--sysfs-root",
        ])
        .arg(&root)
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("classes exist for 64 threads"), "{err}");
    assert!(!err.contains("e1") && !err.contains("e+"), "{err}");
    assert!(err.ends_with('\n'));
}

#[test]
fn measure_says_what_it_does_unless_quiet() {
    require!(
        autopin_testkit::allowed_cpus() >= 2,
        "measuring latency needs 2 CPUs"
    );
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("h.svg");
    let out = autopin()
        .args([
            "measure",
            "latency",
            "--rounds",
            "10",
            "--no-smt-test",
            "--svg",
        ])
        .arg(&svg)
        .assert()
        .success();
    // The time a pair took is said in its own unit (ms or µs), as the whole is.
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let first = text.lines().next().unwrap_or_default();
    let exponent = first
        .as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b'e' && (w[2] == b'-' || w[2].is_ascii_digit()));
    assert!(
        first.starts_with("measured ")
            && first.contains(" a pair)")
            && !exponent
            && !first.contains("0.000"),
        "{first}"
    );
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    for step in [
        "measuring core-to-core latency",
        "inferring the structure",
        "wrote the heatmap",
    ] {
        assert!(err.contains(step), "{err}");
    }
    let out = autopin()
        .args([
            "measure",
            "latency",
            "-q",
            "--rounds",
            "10",
            "--no-smt-test",
        ])
        .assert()
        .success();
    assert!(out.get_output().stderr.is_empty());
}

/// Errors that say what was probably meant: a misspelt policy after a domain type, a
/// taskset mask where a CPU list goes, a unit on seconds, a misspelt objective, a program
/// without `--` before it.
#[test]
fn likely_mistakes_get_the_form_that_was_meant() {
    let err = |args: &[&str]| {
        let out = autopin().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(err(&["cpus", "M:scater"]).contains("did you mean 'M:scatter'?"));
    let e = err(&["cpus", "0x3"]);
    assert!(
        e.contains("taskset-style CPU mask") && e.contains("write 0,1"),
        "{e}"
    );
    let e = err(&["run", "--objective", "heartbeatt", "--", "true"]);
    assert!(e.contains("did you mean 'heartbeat'?"), "{e}");
    assert!(e.contains("named objectives: heartbeat, openmp"), "{e}");
    let e = err(&["run", "--budget", "5x", "--", "true"]);
    assert!(e.contains("with ms, s or min"), "{e}");
    let e = err(&["pin", "-c", "0", "./prog", "-x"]);
    assert!(
        e.contains("tip: the program goes after '--': autopin pin -c 0 -- ./prog -x"),
        "{e}"
    );
    // Seconds with a unit are taken as such.
    autopin()
        .args([
            "run",
            "-q",
            "--objective",
            "task-clock",
            "--budget",
            "500ms",
        ])
        .args(["-w", "20ms", "--", "true"])
        .assert()
        .code(0);
}

/// The tarball hwloc-gather-topology writes is a machine source as its unpacked directory
/// is; a file that is not one says what to do.
#[test]
fn an_hwloc_dump_tarball_reads_like_its_directory() {
    let tarball = autopin_testkit::data("hwloc-linux/2arm-2c.tar.bz2");
    let dir = autopin_testkit::hwloc_dump("2arm-2c");
    let from_tar = stdout(&["topology", "--sysfs-root", tarball.to_str().unwrap()]);
    let from_dir = stdout(&["topology", "--sysfs-root", dir.to_str().unwrap()]);
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.contains("sysfs:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&from_tar), strip(&from_dir));
    let out = autopin()
        .args(["topology", "--sysfs-root", "Cargo.toml"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("not a readable tarball") && err.contains("tar xf"),
        "{err}"
    );
}

/// A pin expression of --candidates that names no domain here is a usage error, said first:
/// nothing about the decision store (whose use --candidates turns off) comes before it.
#[test]
fn a_wrong_candidate_expression_is_the_first_thing_said() {
    let out = autopin()
        .args(["run", "--candidates", "Q:9", "--", "true"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.starts_with("autopin: error: --candidates \"Q:9\": pin expression 'Q:9', position 0: unknown domain 'Q'"),
        "{err}"
    );
    assert!(err.contains("valid domains on this machine: N,"), "{err}");
}

/// One pinning written two ways among --candidates is probed once, and the user is told.
#[test]
fn a_candidate_written_twice_is_probed_once() {
    require!(autopin_testkit::allowed_cpus() >= 2, "needs two CPUs");
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("r.json");
    let out = autopin()
        .args([
            "run",
            "--candidates",
            "N:0-1;E:N:2:1:1;N:1",
            "-i",
            "0",
            "--probe",
            "0.1",
        ])
        .args(["--objective", "task-clock", "--no-perturbation-estimate"])
        .arg("--report")
        .arg(&rep)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
        ])
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains(
            "--candidates \"E:N:2:1:1\" is the same pinning as N:0-1 = 0,1 (CPUs 0,1): probed once"
        ),
        "{err}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    let labels: Vec<String> = r["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
}

/// `--json` puts JSON on stdout wherever a command lists something: `cpus` (an expression's
/// CPUs, or the domains with -p), `place`, `candidates`, and `compare` (the document
/// --export-json writes; the table goes to stderr).
#[test]
fn json_on_stdout_from_cpus_place_candidates_and_compare() {
    let json = |args: &[&str]| -> serde_json::Value {
        let text = stdout(args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
    };
    let syn = ["--synthetic", "package:2 core:2 pu:2"];
    let v = json(&[&["cpus", "S1:0-1", "--json"][..], &syn].concat());
    assert_eq!(v["expression"], "S1:0-1");
    assert_eq!(v["cpus"], serde_json::json!([4, 6]), "{v}");
    assert_eq!(v["list"], "4,6");
    let v = json(&[&["cpus", "-p", "--json"][..], &syn].concat());
    assert_eq!(v[0]["tag"], "N");
    assert!(
        v.as_array().unwrap().iter().any(|d| d["tag"] == "S1"),
        "{v}"
    );
    let v = json(
        &[
            &["place", "-n", "2", "--policy", "scatter", "--json"][..],
            &syn,
        ]
        .concat(),
    );
    assert_eq!(v["policy"], "scatter");
    assert_eq!(v["cpus"].as_array().unwrap().len(), 2, "{v}");
    let v = json(&[&["candidates", "-n", "2", "--unpinned", "--json"][..], &syn].concat());
    assert!(v.as_array().unwrap().len() >= 2, "{v}");
    // --json is --format json: the two together are a usage error.
    autopin()
        .args([
            "place", "-n", "2", "--policy", "scatter", "--json", "--format", "text",
        ])
        .assert()
        .code(2);
    let out = autopin()
        .args([
            "compare",
            "-r",
            "2",
            "--seed",
            "1",
            "--strategy",
            "none",
            "--strategy",
            "0",
        ])
        .args(["--json", "--", "true"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["strategies"].as_array().unwrap().len(), 2, "{v}");
    let err = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        err.contains("none (baseline)"),
        "the table goes to stderr: {err}"
    );
}

/// A run report reads back as text with the objective check, and draws a timeline whose
/// legend explains the grey and the pale bars (no rsvg needed for this); the ranks' reports
/// merge into a job report that `autopin report job.json` reads back, whose picture names
/// every candidate by its pinning and has its whole title (issue #23, item 1).
#[test]
fn a_run_report_and_a_job_report_read_back_and_draw() {
    let spin = autopin_testkit::spin_program();
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("r0.json");
    autopin()
        .args([
            "run",
            "-q",
            "--objective",
            "task-clock",
            "--budget",
            "2",
            // Where the OS places it, whatever other tests keep busy: the legend's grey is
            // that start-up's.
            "--start",
            "os",
            "--report",
        ])
        .arg(&rep)
        .arg("--")
        .arg(&spin)
        .args(["3", "2"])
        .assert()
        .success();
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rep).unwrap()).unwrap();
    let text = stdout(&["report", rep.to_str().unwrap()]);
    assert!(text.starts_with("command:"), "{text}");
    if !r["objective_check"].is_null() {
        assert!(
            text.contains("objective check: against the program's heartbeat"),
            "{text}"
        );
    }
    let svg = dir.path().join("t.svg");
    autopin()
        .arg("report")
        .arg(&rep)
        .arg("--svg")
        .arg(&svg)
        .assert()
        .success();
    let t = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(r["start"], "os", "{r}");
    assert!(
        t.contains("start-up: the program ran where the OS placed it"),
        "{t}"
    );
    assert!(t.contains("pale: a warm-up after a move"), "{t}");
    // Two ranks of a plain launch: the same report as ranks 0 and 1 of 2.
    r["launch"]["size"] = 2.into();
    std::fs::write(&rep, r.to_string()).unwrap();
    r["launch"]["rank"] = 1.into();
    let rep1 = dir.path().join("r1.json");
    std::fs::write(&rep1, r.to_string()).unwrap();
    let job = dir.path().join("job.json");
    let job_svg = dir.path().join("job.svg");
    let merged = autopin()
        .args(["report", "--merge"])
        .arg(&rep)
        .arg(&rep1)
        .arg("-o")
        .arg(&job)
        .arg("--svg")
        .arg(&job_svg)
        .assert()
        .success();
    let table = String::from_utf8_lossy(&merged.get_output().stdout).into_owned();
    assert_eq!(table.lines().count(), 3, "{table}");
    assert_eq!(stdout(&["report", job.to_str().unwrap()]), table);
    let s = std::fs::read_to_string(&job_svg).unwrap();
    assert!(
        s.contains(">CPU-s/s per rank and candidate (mean of probes)</text>"),
        "no job named, no dangling 'jobs:': {s}"
    );
    for c in r["candidates"].as_array().unwrap() {
        let key = format!(">#{}: {}<", c["index"], c["label"].as_str().unwrap());
        assert!(s.contains(&key), "{key} in {s}");
    }
    let again = dir.path().join("job2.svg");
    autopin()
        .arg("report")
        .arg(&job)
        .arg("--svg")
        .arg(&again)
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&again).unwrap(), s);
}

/// The lines of the first ```sh block after `heading` in README.md, continuations joined.
fn readme_block(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let at = readme
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading}"));
    let start = at + readme[at..].find("```sh\n").unwrap() + 6;
    let end = start + readme[start..].find("```\n").unwrap();
    let mut out = Vec::new();
    let mut cur = String::new();
    for l in readme[start..end].lines() {
        match l.strip_suffix('\\') {
            Some(head) => cur.push_str(head),
            None => {
                cur.push_str(l);
                if !cur.trim().is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                cur.clear();
            }
        }
    }
    out
}

/// The README's install step makes `man autopin` work (the page goes beside cargo's bin
/// directory) and creates every directory it writes into (issue #23, item 4).
#[test]
fn the_readmes_install_step_creates_its_directories_and_man_finds_the_page() {
    let lines = readme_block("**cargo**, into");
    let mut made: Vec<String> = Vec::new();
    for l in &lines {
        if let Some(dirs) = l.strip_prefix("mkdir -p ") {
            made.extend(dirs.split_whitespace().map(str::to_string));
        }
        if let Some((_, target)) = l.split_once(" > ") {
            let file = target.split_whitespace().next().unwrap();
            let dir = &file[..file.rfind('/').unwrap()];
            assert!(
                made.iter().any(|d| d == dir),
                "{l}: no mkdir -p {dir} before"
            );
        }
    }
    assert!(lines.iter().any(|l| l.trim() == "man autopin"), "{lines:?}");
    require!(autopin_testkit::have("man"), "man not installed");
    let home = tempfile::tempdir().unwrap();
    let h = home.path().to_str().unwrap();
    std::fs::create_dir_all(home.path().join(".cargo/bin")).unwrap();
    for l in lines
        .iter()
        .filter(|l| l.starts_with("mkdir") || l.starts_with("autopin man"))
    {
        let l = l.replace('~', h);
        let (cmd, file) = match l.split_once(" > ") {
            Some((cmd, file)) => (cmd.to_string(), Some(file.trim().to_string())),
            None => (l.clone(), None),
        };
        if cmd.starts_with("mkdir") {
            let st = std::process::Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .status()
                .unwrap();
            assert!(st.success(), "{cmd}");
        } else {
            std::fs::write(file.unwrap(), stdout(&["man"])).unwrap();
        }
    }
    let found = std::process::Command::new("man")
        .args(["-w", "autopin"])
        .env("HOME", h)
        .env("PATH", format!("{h}/.cargo/bin:/usr/bin:/bin"))
        .env_remove("MANPATH")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&found.stdout).trim(),
        format!("{h}/.cargo/share/man/man1/autopin.1"),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
}

/// The tour shows `show` and `doctor`, names no placeholder program, marks what needs more
/// CPUs, and its quick commands run as written on this machine (the ones that start a
/// workload or measure are run by hand: see the README).
#[test]
fn the_readmes_tour_runs_as_written() {
    let lines = readme_block("## A tour");
    let text = lines.join("\n");
    for want in ["autopin show ", "autopin doctor", "make -C workloads"] {
        assert!(text.contains(want), "the tour lacks {want}");
    }
    for placeholder in ["./program", "./prog ", "./omp_program", " PID", "/path/to"] {
        assert!(
            !text.contains(placeholder),
            "placeholder {placeholder:?} in the tour"
        );
    }
    require!(autopin_testkit::allowed_cpus() >= 2, "needs two CPUs");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo.join("tests"), dir.path().join("tests")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("autopin");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let slow = [
        "make ",
        "workloads/",
        "measure ",
        "mem.json",
        "c2c.csv",
        "r.json",
        "compare",
    ];
    // A full-screen view needs a terminal: tests/top.rs runs it under tmux.
    let on_screen = |l: &str| l.starts_with("autopin top ") && !l.contains(" -b");
    let mut ran = 0;
    for l in lines
        .iter()
        .filter(|l| !slow.iter().any(|s| l.contains(s)) && !on_screen(l))
    {
        if l.contains("lstopo") && !autopin_testkit::have("lstopo") {
            continue;
        }
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(l)
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("XDG_STATE_HOME", dir.path())
            .env_remove("AUTOPIN_MEMORY")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if l.contains("needs ") && l.contains(" CPUs") {
            assert!(
                out.status.code() == Some(0)
                    || (out.status.code() == Some(2) && err.contains("allowed")),
                "{l}: {err}"
            );
        } else {
            assert_eq!(out.status.code(), Some(0), "{l}: {err}");
        }
        ran += 1;
    }
    assert!(ran >= 15, "only {ran} commands ran");
}

/// `--objective`'s help names every named objective, `openmp` among them, in `run` and
/// `attach` alike (issue #23, item 4).
#[test]
fn objective_help_names_every_named_objective() {
    for cmd in ["run", "attach"] {
        let help = stdout(&[cmd, "--help"]);
        let line = help
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("--objective"))
            .nth(1)
            .unwrap_or_else(|| panic!("{cmd}: no --objective"));
        for name in ["heartbeat", "openmp", "task-clock", "energy", "power"] {
            assert!(
                line.contains(name),
                "{cmd} --objective help lacks {name}: {line}"
            );
        }
    }
}

/// A listing read only in part (`autopin place ... | head -1`) ends quietly when its reader
/// goes, as `ls` does: no panic about a broken pipe.
#[test]
fn a_listing_piped_into_head_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("autopin"))
        .args(["place", "-n", "8192", "--policy", "compact"])
        .args(["--synthetic", "package:16 core:256 pu:2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("policy compact"), "{first}");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {err}",
        out.status
    );
}

/// A directory for the PATH with programs that leave a trace when they run: `mark` writes
/// its arguments (one a line) to `ran-mark`, and programs named as the typos below
/// (`--budgt`, `-x`, ...) would write `ran-<name>`: a typo must never run as the program.
struct Marks {
    dir: tempfile::TempDir,
}

impl Marks {
    const TYPOS: [&'static str; 5] = ["--budgt", "-x", "--duratoin", "--runz", "--cpuss"];

    fn new() -> Marks {
        let marks = Marks {
            dir: tempfile::tempdir().unwrap(),
        };
        for name in Self::TYPOS.iter().chain(&["mark"]) {
            marks.add(name);
        }
        marks
    }

    /// A program `name` in the directory that leaves its trace.
    fn add(&self, name: &str) {
        use std::os::unix::fs::PermissionsExt;
        let exe = self.dir.path().join(name);
        let trace = self.dir.path().join(format!("ran-{name}"));
        std::fs::write(
            &exe,
            format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n", trace.display()),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// autopin with this directory first in the PATH.
    fn autopin(&self) -> Command {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.dir.path().to_path_buf()];
        paths.extend(std::env::split_paths(&path));
        let mut c = autopin();
        c.env("PATH", std::env::join_paths(paths).unwrap());
        c
    }

    /// What the program `name` was given, if it ran (and removes the trace).
    fn ran(&self, name: &str) -> Option<String> {
        let trace = self.dir.path().join(format!("ran-{name}"));
        let args = std::fs::read_to_string(&trace).ok()?;
        std::fs::remove_file(trace).unwrap();
        Some(args)
    }

    fn nothing_ran(&self) -> bool {
        Self::TYPOS
            .iter()
            .chain(&["mark"])
            .all(|n| !self.dir.path().join(format!("ran-{n}")).exists())
    }
}

/// Everything before the program (or `--`) is autopin's: a misspelt or unknown option of
/// run, stat, attach, compare or pin is a usage error with clap's suggestion where it has
/// one, and neither it nor the program is started.
#[test]
fn a_typo_before_the_program_is_a_usage_error_and_runs_nothing() {
    let marks = Marks::new();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    let cases: [(&[&str], Option<&str>); 10] = [
        (&["run", "--budgt", "5", "--", "mark"], Some("--budget")),
        (&["run", "-q", "--budgt", "5", "mark"], Some("--budget")),
        (&["run", "-x", "--", "mark"], None),
        (&["run", "-x"], None),
        (
            &["stat", "--duratoin", "1", "--", "mark"],
            Some("--duration"),
        ),
        (&["stat", "-x", "mark"], None),
        (&["attach", "--duratoin", "1", &pid], Some("--duration")),
        (&["attach", "-x", &pid], None),
        (&["compare", "--runz", "2", "--", "mark"], Some("--runs")),
        (&["pin", "--cpuss", "0", "--", "mark"], Some("--cpus")),
    ];
    for (args, similar) in cases {
        let out = marks.autopin().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("unexpected argument"), "{args:?}: {err}");
        if let Some(s) = similar {
            assert!(
                err.contains(&format!("a similar argument exists: '{s}'")),
                "{args:?}: {err}"
            );
        }
        // clap's "use '-- --budgt'" would make the typo the program.
        assert!(!err.contains("as a value, use '--"), "{args:?}: {err}");
        assert!(marks.nothing_ran(), "{args:?} started a program: {err}");
    }
    // Without a suggestion, where the program's own options go is said.
    let out = marks.autopin().args(["run", "-x"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'-x' is not an option of autopin run")
            && err.contains("autopin run [OPTIONS] [--] PROGRAM [ARGS]..."),
        "{err}"
    );
    let out = marks
        .autopin()
        .args(["pin", "-c", "0", "-x", "--", "mark"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("go after '--' and its name"), "{err}");
    assert!(marks.nothing_ran());
    // The sleeper was never attached to: it still sleeps, unpinned.
    assert!(sleeper.try_wait().unwrap().is_none());
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// The program's own options follow its name or `--`, and reach it untouched.
#[test]
fn the_programs_own_options_follow_its_name_or_the_separator() {
    let marks = Marks::new();
    let cases: [&[&str]; 6] = [
        &["run", "-q", "--budget", "1", "mark", "-x", "--budgt"],
        &["run", "-q", "--budget", "1", "--", "mark", "-x", "--budgt"],
        &["stat", "mark", "-x", "--budgt"],
        &["stat", "--", "mark", "-x", "--budgt"],
        &["pin", "-c", "0", "--", "mark", "-x", "--budgt"],
        &[
            "compare",
            "-r",
            "1",
            "--strategy",
            "0",
            "--",
            "mark",
            "-x",
            "--budgt",
        ],
    ];
    for args in cases {
        let out = marks.autopin().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(
            marks.ran("mark").as_deref(),
            Some("-x\n--budgt\n"),
            "{args:?}"
        );
        assert!(marks.nothing_ran(), "{args:?}");
    }
}

/// A number where the program goes: the PID of a running process gets the form that
/// watches (stat -p) or optimizes (attach) it; a number that is neither a process nor a
/// program is explained; a program whose name is a number still runs. All before anything
/// starts.
#[test]
fn a_pid_where_the_program_goes_gets_the_form_that_was_meant() {
    let marks = Marks::new();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    let err = |args: &[&str]| {
        let out = marks.autopin().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        err
    };
    let e = err(&["stat", &pid]);
    assert!(
        e.contains(&format!(
            "{pid} is not a program but the PID of a running process (sleep): did you mean autopin stat -p {pid}?"
        )),
        "{e}"
    );
    let e = err(&["stat", "--duration", "1", "--", &pid]);
    assert!(e.contains(&format!("autopin stat -p {pid}?")), "{e}");
    let e = err(&["run", "-q", &pid]);
    assert!(
        e.contains(&format!("did you mean autopin attach {pid}?")),
        "{e}"
    );
    // A PID no process has (above the kernel's largest).
    let e = err(&["stat", "2147483647"]);
    assert!(
        e.contains("2147483647 is neither a program (no executable of that name in the PATH) nor a running process")
            && e.contains("autopin stat -p PID"),
        "{e}"
    );
    assert!(sleeper.try_wait().unwrap().is_none());
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    // An executable whose name is that number is a program like any other.
    marks.add(&pid);
    let out = marks.autopin().args(["stat", &pid, "-x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(marks.ran(&pid).as_deref(), Some("-x\n"));
}
