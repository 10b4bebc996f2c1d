//! Files the user asks autopin to write: a path that cannot be written is found before the
//! program starts (exit 2, naming the user's path and why), a failure at the very end does
//! not replace the program's exit status, and new files get the mode the umask allows.

use assert_cmd::Command;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn autopin() -> Command {
    Command::cargo_bin("autopin").unwrap()
}

const FAST: &[&str] = &[
    "--objective",
    "task-clock",
    "--no-perturbation-estimate",
    "-q",
];

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn run_with_an_unwritable_report_path_does_not_start_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    for option in ["--report", "--timeline"] {
        let bad = dir.path().join("no-such-dir/r.json");
        let out = autopin()
            .arg("run")
            .args(FAST)
            .arg(option)
            .arg(&bad)
            .args(["--", "sh", "-c", "echo ran; touch \"$0\"; exit 7"])
            .arg(&marker)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{option}: {err}");
        assert!(err.contains(&bad.display().to_string()), "{option}: {err}");
        assert!(err.contains("No such file or directory"), "{option}: {err}");
        assert!(!err.contains(".autopin-"), "no temp path: {err}");
        assert!(out.stdout.is_empty(), "the program ran: {:?}", out.stdout);
        assert!(!marker.exists(), "the program ran");
    }
}

#[test]
fn a_report_that_fails_at_the_end_keeps_the_programs_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let rep = out_dir.join("r.json");
    // The program removes the report's directory: the check before the start passes, the
    // final write fails.
    let out = autopin()
        .args(["run", "--schedule", "0"])
        .args(FAST)
        .arg("--report")
        .arg(&rep)
        .args(["--", "sh", "-c", "rm -rf \"$0\"; echo ran; exit 7"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert!(
        err.contains(&format!("{}: cannot write", rep.display())),
        "{err}"
    );
    assert!(!err.contains(".autopin-"), "no temp path: {err}");
}

#[test]
fn report_svg_to_an_unwritable_path_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("r.json");
    autopin()
        .args(["run", "--schedule", "0"])
        .args(FAST)
        .arg("--report")
        .arg(&rep)
        .args(["--", "true"])
        .assert()
        .success();
    let bad = dir.path().join("nope/x.svg");
    let out = autopin()
        .arg("report")
        .arg(&rep)
        .arg("--svg")
        .arg(&bad)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: cannot write: No such file or directory",
            bad.display()
        )),
        "{err}"
    );
    assert!(!err.contains(".autopin-"), "no temp path: {err}");
}

/// The mode of a file written by `autopin topology -o` under `umask`.
fn mode_under_umask(umask: &str, path: &Path) -> u32 {
    let bin = assert_cmd::cargo::cargo_bin("autopin");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask {umask}; exec \"$0\" topology --synthetic 'core:2 pu:1' -o \"$1\""
        ))
        .arg(&bin)
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn new_files_get_the_mode_the_umask_allows() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(mode_under_umask("022", &dir.path().join("a.txt")), 0o644);
    assert_eq!(mode_under_umask("077", &dir.path().join("b.txt")), 0o600);
    assert_eq!(mode_under_umask("002", &dir.path().join("c.txt")), 0o664);
    // Replacing a file keeps its mode, whatever the umask.
    let kept = dir.path().join("a.txt");
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(mode_under_umask("077", &kept), 0o640);
}

#[test]
fn run_report_is_readable_by_others_under_umask_022() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("r.json");
    let bin = assert_cmd::cargo::cargo_bin("autopin");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 022; exec \"$0\" run --schedule 0 --objective task-clock --no-perturbation-estimate -q --report \"$1\" -- true")
        .arg(&bin)
        .arg(&rep)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::metadata(&rep).unwrap().permissions().mode() & 0o7777,
        0o644
    );
}

/// Runs `autopin ARGS` under `sh`, its standard output redirected to `out` with `redirect`
/// (`>` or `>>`); returns the exit status and stderr.
fn run_redirected(args: &str, redirect: &str, out: &Path) -> (Option<i32>, String) {
    let bin = assert_cmd::cargo::cargo_bin("autopin");
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("\"$0\" {args} {redirect} \"$1\""))
        .arg(&bin)
        .arg(out)
        .output()
        .unwrap();
    (o.status.code(), stderr(&o))
}

#[test]
fn a_report_to_the_programs_own_stdout_is_added_after_what_the_program_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    let program = "-- sh -c 'echo LINE; exit 5'";
    // (The default objective: it falls back to task-clock from /proc where perf's is
    // refused to a user.)
    let fast = "--no-perturbation-estimate -q";
    // `>`, `>>` and the file's own name: the program's line stays, the report follows it.
    for (report, redirect, before) in [
        ("/dev/stdout".to_string(), ">", ""),
        ("/dev/stdout".to_string(), ">>", "BEFORE\n"),
        ("/proc/self/fd/1".to_string(), ">", ""),
        (format!("'{}'", out.display()), ">", ""),
    ] {
        std::fs::write(&out, before).unwrap();
        let (code, err) = run_redirected(
            &format!("run --schedule 0 {fast} --report {report} {program}"),
            redirect,
            &out,
        );
        assert_eq!(code, Some(5), "{report} {redirect}: {err}");
        let text = std::fs::read_to_string(&out).unwrap();
        let expected = format!("{before}LINE\n");
        assert!(
            text.starts_with(&expected),
            "{report} {redirect}: the program's output was lost: {text:.200}"
        );
        let report: serde_json::Value = serde_json::from_str(&text[expected.len()..])
            .unwrap_or_else(|e| panic!("{report} {redirect}: not one report after it: {e}"));
        assert_eq!(report["exit_status"], 5, "{report}");
    }
    // `stat --json` as well.
    std::fs::write(&out, "").unwrap();
    let (code, err) = run_redirected(
        "stat --json /dev/stdout -- sh -c 'echo LINE; exit 3'",
        ">",
        &out,
    );
    assert_eq!(code, Some(3), "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("LINE\n"), "stat: {text:.200}");
    serde_json::from_str::<serde_json::Value>(&text[5..]).expect("stat's JSON after the line");
}

/// A sticky directory anyone may write to, of root's (as /tmp is), holding `root.txt`
/// (root's, mode 0600) and, of uid 65534: a link `link.json` to root's file, and a file
/// `theirs.json`.
fn shared_dir_with_a_strangers_link_and_file() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let root = d.path().join("root.txt");
    std::fs::write(&root, "root's own\n").unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o600)).unwrap();
    for name in ["link.json", "link2.json", "link.db"] {
        std::os::unix::fs::symlink(&root, d.path().join(name)).unwrap();
        std::os::unix::fs::lchown(d.path().join(name), Some(65534), Some(65534)).unwrap();
    }
    std::fs::write(d.path().join("theirs.json"), "theirs\n").unwrap();
    std::os::unix::fs::lchown(d.path().join("theirs.json"), Some(65534), Some(65534)).unwrap();
    d
}

#[test]
fn root_refuses_another_users_link_or_file_in_a_sticky_directory() {
    if !rustix::process::geteuid().is_root() {
        autopin_testkit::skip!("needs root: the stranger's link and file are made with lchown");
    }
    let d = shared_dir_with_a_strangers_link_and_file();
    let p = |n: &str| d.path().join(n).display().to_string();
    let marker = d.path().join("started");
    let store = d.path().join("own.db").display().to_string();
    let import = d.path().join("import.json");
    std::fs::write(&import, "[]").unwrap();
    /// Arguments, environment, the name the error must give.
    type Case<'a> = (Vec<String>, Vec<(&'a str, String)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![
                "run",
                "--schedule",
                "0",
                "--objective",
                "task-clock",
                "-q",
                "--report",
                &p("link.json"),
                "--timeline",
                &p("link2.json"),
                "--",
                "touch",
                &marker.display().to_string(),
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            vec![],
            "link.json",
        ),
        (
            vec![
                "run",
                "--schedule",
                "0",
                "--objective",
                "task-clock",
                "-q",
                "--report",
                &p("theirs.json"),
                "--",
                "touch",
                &marker.display().to_string(),
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            vec![],
            "theirs.json",
        ),
        (
            vec!["memory".to_string(), "export".into(), p("link.json")],
            vec![("AUTOPIN_MEMORY", store.clone())],
            "link.json",
        ),
        (
            vec![
                "memory".to_string(),
                "import".into(),
                import.display().to_string(),
            ],
            vec![("AUTOPIN_MEMORY", p("link.db"))],
            "link.db",
        ),
        (
            vec![
                "topology".to_string(),
                "--synthetic".into(),
                "core:2 pu:1".into(),
                "-o".into(),
                p("theirs.json"),
            ],
            vec![],
            "theirs.json",
        ),
    ];
    for (args, env, named) in cases {
        let out = autopin().args(&args).envs(env).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&p(named)), "{args:?}: {err}");
        assert!(
            err.contains("protected_symlinks") || err.contains("protected_regular"),
            "{args:?}: {err}"
        );
        assert!(!marker.exists(), "{args:?}: the program started");
        assert_eq!(
            std::fs::read_to_string(d.path().join("root.txt")).unwrap(),
            "root's own\n",
            "{args:?}: root's file was written through the link"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("theirs.json")).unwrap(),
            "theirs\n",
            "{args:?}"
        );
    }
    // The rules are about strangers: root's own link in the same place is followed.
    let own = d.path().join("own.json");
    std::os::unix::fs::symlink(d.path().join("root.txt"), &own).unwrap();
    autopin()
        .args(["topology", "--synthetic", "core:2 pu:1", "-o"])
        .arg(&own)
        .assert()
        .success();
    assert!(std::fs::symlink_metadata(&own)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(d.path().join("root.txt"))
        .unwrap()
        .contains("Machine"));
}
