//! `autopin top`: the screen under tmux as a person sees it (keys sent, the pane read back),
//! the batch JSON against its documented schema (docs/top.schema.json), and bad input.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("autopin")
}

fn autopin() -> Command {
    Command::new(bin())
}

/// Two threads pinned to CPU `cpu` (the program pins itself), both spinning, named
/// `squeeze-a` and `squeeze-b`, for `secs` seconds.
const SQUEEZE: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
static double secs;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static void *spin(void *a) { (void)a; double end = now() + secs; volatile unsigned long x = 0; while (now() < end) for (int i = 0; i < 100000; i++) x++; return 0; }
int main(int argc, char **argv) {
    int cpu = atoi(argv[1]); secs = atof(argv[2]);
    cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s)) return 3;
    pthread_setname_np(pthread_self(), "squeeze-a");
    pthread_t t; pthread_create(&t, 0, spin, 0); pthread_setname_np(t, "squeeze-b");
    spin(0); pthread_join(t, 0); return 0;
}
"#;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn squeeze(cpu: &str, secs: u32) -> Killed {
    let prog = autopin_testkit::build_c("top_squeeze", SQUEEZE, &["-O1", "-pthread"])
        .unwrap_or_else(|e| panic!("{e}"));
    Killed(
        Command::new(prog)
            .args([cpu, &secs.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// The JSON Schema keywords docs/top.schema.json uses, checked here: type (one or a list),
/// const, enum, required, properties, additionalProperties: false, items, minItems,
/// minimum, maximum, exclusiveMinimum, minLength, maxLength, `$ref` into `$defs`.
fn check(schema: &Value, root: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local $ref");
        return check(&root["$defs"][name], root, v, at, errors);
    }
    let mut fail = |why: String| errors.push(format!("{at}: {why} (value {v})"));
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => panic!("type {t}"),
        };
        let is = |ty: &str| match ty {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            other => panic!("type {other}"),
        };
        if !types.iter().any(|t| is(t)) {
            fail(format!("not of type {t}"));
            return;
        }
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            fail(format!("not {c}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            fail("not one of the enum".into());
        }
    }
    if let Some(x) = v.as_f64() {
        let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
        if bound("minimum").is_some_and(|m| x < m) || bound("maximum").is_some_and(|m| x > m) {
            fail("out of range".into());
        }
        if bound("exclusiveMinimum").is_some_and(|m| x <= m) {
            fail("not above the minimum".into());
        }
    }
    if let Some(s) = v.as_str() {
        let n = s.chars().count() as u64;
        let len = |k: &str| schema.get(k).and_then(Value::as_u64);
        if len("minLength").is_some_and(|m| n < m) || len("maxLength").is_some_and(|m| n > m) {
            fail("length out of range".into());
        }
    }
    if let Some(o) = v.as_object() {
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !o.contains_key(r.as_str().unwrap()) {
                fail(format!("{r} missing"));
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(s, root, x, &format!("{at}.{k}"), errors),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errors.push(format!("{at}: {k} is not in the schema"))
                }
                None => {}
            }
        }
    }
    if let Some(a) = v.as_array() {
        if schema
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| (a.len() as u64) < m)
        {
            errors.push(format!("{at}: too few items"));
        }
        if let Some(items) = schema.get("items") {
            for (i, x) in a.iter().enumerate() {
                check(items, root, x, &format!("{at}[{i}]"), errors);
            }
        }
    }
}

/// This checkout's root (the tests of this crate, not another copy's).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema() -> Value {
    let path = repo().join("docs/top.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn valid(doc: &Value) -> Vec<String> {
    let s = schema();
    let mut errors = Vec::new();
    check(&s, &s, doc, "$", &mut errors);
    errors
}

#[test]
fn the_schema_checker_refuses_what_the_schema_refuses() {
    let s = schema();
    let good = serde_json::json!({"cpu": 0, "core": 0, "node": null, "known": true, "user": 0.5,
        "system": 0.0, "steal": 0.0, "idle": 0.5, "watched": 0.5, "others": 0.0, "runnable": 1,
        "working_threads": [7], "flags": ["oversubscribed"]});
    let mut e = Vec::new();
    check(&s["$defs"]["cpu"], &s, &good, "$", &mut e);
    assert!(e.is_empty(), "{e:?}");
    for bad in [
        serde_json::json!({"user": 1.5}),
        serde_json::json!({"flags": ["no_such_flag"]}),
        serde_json::json!({"extra": 1}),
        serde_json::json!({"node": "zero"}),
    ] {
        let mut doc = good.clone();
        for (k, v) in bad.as_object().unwrap() {
            doc[k] = v.clone();
        }
        let mut e = Vec::new();
        check(&s["$defs"]["cpu"], &s, &doc, "$", &mut e);
        assert!(!e.is_empty(), "{doc} passed");
    }
}

/// Runs `autopin top ARGS` to its end; (status, stdout, stderr).
fn top(args: &[&str]) -> (i32, String, String) {
    let out = autopin().arg("top").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn batch_json_is_one_document_a_refresh_valid_against_the_documented_schema() {
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let prog = squeeze(&first, 20);
    let pid = prog.0.id().to_string();
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = top(&["-b", "-n", "2", "-d", "0.5", "--json"]);
    assert_eq!(code, 0, "{err}");
    let docs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(docs.len(), 2, "{out}");
    for d in &docs {
        let errors = valid(d);
        assert!(errors.is_empty(), "{errors:#?}");
    }
    // The squeezed program, as every refresh shows it: both threads on its CPU, its mask.
    let p = docs[1]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_u64() == Some(u64::from(prog.0.id())))
        .unwrap_or_else(|| panic!("PID {pid} in {}", docs[1]));
    let threads = p["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "{p}");
    for t in threads {
        assert_eq!(t["cpu"].to_string(), first, "{t}");
        assert_eq!(t["allowed_list"], first.as_str(), "{t}");
        assert!(t["name"].as_str().unwrap().starts_with("squeeze-"), "{t}");
    }
    assert!(p["cpu_share"].as_f64().unwrap() > 0.05, "{p}");
    // Its pages are read (every watched process's, in batch mode).
    assert_eq!(p["pages"]["state"], "read", "{p}");
    // An independent validator agrees, where Python's jsonschema is installed.
    let py = Command::new("python3")
        .args(["-c", "import json,sys,jsonschema\ns=json.load(open(sys.argv[1]))\nfor l in sys.stdin: jsonschema.validate(json.loads(l), s)"])
        .arg(repo().join("docs/top.schema.json"))
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    if let Ok(mut py) = py {
        use std::io::Write;
        py.stdin.take().unwrap().write_all(out.as_bytes()).unwrap();
        let o = py.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if !err.contains("No module named") {
            assert!(o.status.success(), "jsonschema: {err}");
        }
    }
}

#[test]
fn a_watched_process_that_ends_is_said_to_have_ended_and_top_goes_on() {
    let mut short = Command::new("sleep").arg("0.6").spawn().unwrap();
    let pid = short.id() as i32;
    let (code, out, err) = top(&[
        "-b",
        "-n",
        "3",
        "-d",
        "0.5",
        "--json",
        "-p",
        &pid.to_string(),
    ]);
    let _ = short.wait();
    assert_eq!(code, 0, "{err}");
    let docs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), 3);
    let last = &docs[2];
    assert_eq!(last["ended"], serde_json::json!([pid]), "{last}");
    assert_eq!(last["processes"], serde_json::json!([]), "{last}");
    assert!(valid(last).is_empty());
    let mut short = Command::new("sleep").arg("0.3").spawn().unwrap();
    let pid = short.id();
    let (code, out, err) = top(&["-b", "-n", "2", "-d", "0.4", "-p", &pid.to_string()]);
    let _ = short.wait();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("PID {pid} has ended")), "{out}");
}

#[test]
fn bad_input_is_a_usage_error_that_says_what_is_valid() {
    let (code, _, err) = top(&["-d", "0", "-b"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at least 0.1 s"), "{err}");
    let (code, _, err) = top(&["-d", "0.05", "-b"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("too short"), "{err}");
    let (code, _, err) = top(&["-d", "nan", "-b"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = top(&["-b", "-p", "2147483647"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no such process"), "{err}");
    let (code, _, err) = top(&["-b", "-u", "no-such-user-here"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no such user"), "{err}");
    let (code, _, err) = top(&["-b", "--job", "no-such-job-anywhere"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no process of this Slurm job"), "{err}");
    let (code, _, err) = top(&["-b", "--sort", "colour"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cpu, wait, pid"), "{err}");
    let (code, _, err) = top(&["-b", "-n", "0"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = top(&["--json"]);
    assert_eq!(code, 2, "--json needs -b: {err}");
    // No terminal and no -b: nothing to draw on.
    let (code, _, err) = top(&[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("-b prints each refresh"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_machine_of_256_cpus_from_a_dump_fits_80_columns() {
    let dump = autopin_testkit::hwloc_dump("256ppc-8n8s4t");
    let out = autopin()
        .args(["top", "-b", "-n", "1", "-d", "0.2", "--sysfs-root"])
        .arg(&dump)
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for l in text.lines() {
        assert!(
            l.chars().count() <= 80,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    assert!(
        text.contains("256 CPUs (64 cores), 64 packages, 8 NUMA nodes"),
        "{text}"
    );
    // One glyph a CPU: this host's CPUs by their load, the dump's others as `?`.
    let map: Vec<&str> = text
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with('█'))
        .collect();
    let glyphs: usize = map
        .iter()
        .map(|l| l.chars().filter(|c| "?·▁▂▃▄▅▆▇█!ps".contains(*c)).count())
        .sum();
    assert_eq!(glyphs, 256, "{map:#?}");
    assert!(map.len() <= 16, "{map:#?}");
}

// --- the screen, under tmux -------------------------------------------------------------

struct Tmux {
    socket: String,
    /// Where its socket lives (TMUX_TMPDIR): the test's own directory, gone after it.
    dir: PathBuf,
}

impl Tmux {
    fn new(width: u16, height: u16, dir: &Path) -> Tmux {
        // One server a session: the tests run side by side.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("autopin-top-test-{}-{n}", std::process::id());
        let t = Tmux {
            socket,
            dir: dir.to_path_buf(),
        };
        let ok = t
            .cmd(&[
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
                "sh",
            ])
            .current_dir(dir)
            .env("PS1", "$ ")
            .env("TERM", "xterm-256color")
            .status()
            .unwrap();
        assert!(ok.success());
        t
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.env("TMUX_TMPDIR", &self.dir)
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args);
        c
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend(keys);
        assert!(self.cmd(&args).status().unwrap().success());
    }

    fn type_line(&self, line: &str) {
        self.keys(&["-l", line]);
        self.keys(&["Enter"]);
    }

    fn screen(&self) -> String {
        let out = self
            .cmd(&["capture-pane", "-p", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn alternate_screen(&self) -> bool {
        let out = self
            .cmd(&["display-message", "-p", "-t", "t", "#{alternate_on}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Waits up to `secs` for a screen that `ok` accepts; the last screen either way.
    /// The screen once `ok` holds for it and it is drawn whole: the same 50 ms later (a
    /// capture can catch a redraw halfway, its last lines not yet written).
    fn wait_for(&self, secs: f64, ok: impl Fn(&str) -> bool) -> (bool, String) {
        let end = Instant::now() + Duration::from_secs_f64(secs);
        loop {
            let s = self.screen();
            if ok(&s) {
                std::thread::sleep(Duration::from_millis(50));
                if self.screen() == s {
                    return (true, s);
                }
            }
            if Instant::now() > end {
                return (false, s);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).status();
    }
}

/// The CPU's busy share over `secs`, from /proc/stat.
fn busy_share(cpu: &str, secs: f64) -> f64 {
    let read = || -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/stat").unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("cpu{cpu} ")))
            .unwrap();
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect();
        (v[3] + v[4], v.iter().sum())
    };
    let (i0, t0) = read();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (i1, t1) = read();
    1.0 - (i1 - i0) as f64 / (t1 - t0).max(1) as f64
}

/// The screen's title line (not the line `s` prints before running stat).
fn is_title(l: &str) -> bool {
    l.starts_with("autopin top ") && l.contains(" every ")
}

/// The table row of a PID (or TID): its line starts with the right-aligned number.
fn row_index(screen: &str, pid: u32) -> Option<usize> {
    let start = format!("{pid:>7} ");
    screen.lines().position(|l| l.starts_with(&start))
}

fn row(screen: &str, pid: u32) -> &str {
    screen
        .lines()
        .nth(row_index(screen, pid).unwrap_or_else(|| panic!("no row of {pid}:\n{screen}")))
        .unwrap()
}

#[test]
fn the_screen_shows_two_squeezed_threads_on_a_flagged_cpu_beside_an_idle_one() {
    autopin_testkit::require!(autopin_testkit::have("tmux"), "tmux is not installed");
    let (first, _) = autopin_testkit::ok_or_skip!(
        autopin_testkit::two_allowed_cpus().ok_or("needs two allowed CPUs")
    );
    let dir = tempfile::tempdir().unwrap();
    // A sleeping program first (the lower PID), then the two threads squeezed on one CPU.
    let mut sleeper = Killed(Command::new("sleep").arg("60").spawn().unwrap());
    let prog = squeeze(&first, 60);
    let (low, high) = (sleeper.0.id(), prog.0.id());
    let tmux = Tmux::new(80, 24, dir.path());
    tmux.type_line("stty -a > before.txt; echo before-top");
    let _ = tmux.wait_for(20.0, |s| s.lines().any(|l| l == "before-top"));
    tmux.type_line(&format!("{} top -d 0.5 -p {low},{high}", bin().display()));
    // The flag needs the other CPU idle: another program on this machine may keep it busy
    // for a while, so the screen is watched until it shows the squeeze alone.
    let map_line = |s: &str| s.lines().nth(1).unwrap_or("").to_string();
    let (flagged, screen) = tmux.wait_for(20.0, |s| {
        s.contains("! CPU ")
            && s.contains("working threads wait for it")
            && map_line(s).contains('!')
    });
    let other = if first == "0" { "1" } else { "0" };
    if flagged {
        // The map: the squeezed CPU full of the watched program and marked, the other idle.
        let map = map_line(&screen);
        assert!(map.contains(&format!("{first}▕██████▏!")), "{map}");
        // The other CPU is free by the flag's measure (under half busy), not necessarily
        // empty: the machine's other work may show there as a block or two.
        let other_bar = map
            .split(&format!("{other}▕"))
            .nth(1)
            .and_then(|b| b.split('▏').next())
            .unwrap_or_else(|| panic!("no bar for CPU {other}: {map}"));
        assert!(
            other_bar.chars().filter(|&c| c != ' ').count() <= 3
                && !map.contains(&format!("{other}▕{other_bar}▏!")),
            "an idle CPU: {map}"
        );
        // The flag line names the CPU and the two threads.
        let flag = screen.lines().find(|l| l.starts_with("! CPU")).unwrap();
        assert!(
            flag.starts_with(&format!("! CPU {first}: 2 working threads")),
            "{flag}"
        );
        let squeeze_row = row(&screen, high);
        assert!(squeeze_row.contains('O'), "the O flag: {squeeze_row}");
    } else {
        let busy = busy_share(other, 1.0);
        assert!(
            busy > 0.2,
            "no oversubscribed CPU shown though CPU {other} is {:.0}% busy:\n{screen}",
            100.0 * busy
        );
        // The rest of the screen is checked all the same.
        autopin_testkit::record_skip(&format!(
            "the oversubscribed flag: CPU {other} never idle ({:.0}% busy with other work), so no free CPU to flag the squeeze against",
            100.0 * busy
        ));
        let (shown, s) = tmux.wait_for(20.0, |s| row_index(s, high).is_some());
        assert!(shown, "{s}");
    }
    let screen = tmux.screen();
    assert!(screen.starts_with("autopin top"), "{screen}");
    assert!(screen.contains(&format!("[PID {low},")), "{screen}");
    let squeeze_row = row(&screen, high);
    assert!(
        squeeze_row.contains("▸top_squeeze (2)") || squeeze_row.contains("▸squeeze-a (2)"),
        "{squeeze_row}"
    );
    // By CPU%, the squeeze above the sleeper.
    let (a, b) = (row_index(&screen, high), row_index(&screen, low));
    assert!(a.unwrap() < b.unwrap(), "{screen}");
    assert!(screen.contains("CPU%▼"), "{screen}");

    // Enter expands the first (selected) process into its threads, both on the one CPU.
    tmux.keys(&["Enter"]);
    let thread_rows = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.contains("├squeeze-") || l.contains("└squeeze-"))
            .map(str::to_string)
            .collect()
    };
    let waits_pinned = |l: &String| l.trim_end().ends_with('P') || l.trim_end().ends_with("OP");
    let (expanded, screen) = tmux.wait_for(20.0, |s| {
        let rows = thread_rows(s);
        rows.len() == 2 && (!flagged || rows.iter().all(waits_pinned))
    });
    let screen = if expanded {
        screen
    } else {
        // The P flag needs an idle CPU outside the threads' mask at that refresh too: when
        // other work took the other CPU meanwhile, the rows are checked without it.
        let (shown, screen) = tmux.wait_for(20.0, |s| thread_rows(s).len() == 2);
        assert!(shown, "{screen}");
        let busy = busy_share(other, 1.0);
        assert!(
            busy > 0.2,
            "the squeezed threads are not flagged P though CPU {other} is {:.0}% busy:\n{screen}",
            100.0 * busy
        );
        autopin_testkit::record_skip(&format!(
            "the P flag: CPU {other} became busy ({:.0}%) with other work",
            100.0 * busy
        ));
        screen
    };
    for l in thread_rows(&screen) {
        let cols: Vec<&str> = l.split_whitespace().collect();
        // TID, name, CPU%, WAIT%, CPU, ...: the CPU column is the squeezed CPU.
        assert_eq!(cols[4], first, "{l}");
    }
    assert!(screen.contains("▾"), "{screen}");

    // p sorts by PID: the sleeper (lower PID) comes first, the heading says so.
    tmux.keys(&["p"]);
    let (sorted, screen) = tmux.wait_for(20.0, |s| s.contains("PID▲"));
    assert!(sorted, "{screen}");
    let (a, b) = (row_index(&screen, high), row_index(&screen, low));
    assert!(b.unwrap() < a.unwrap(), "{screen}");

    // / searches: only the sleeper's row is left, the title says so; Esc clears it.
    tmux.keys(&["/"]);
    tmux.keys(&["-l", "sleep"]);
    tmux.keys(&["Enter"]);
    let (searched, screen) = tmux.wait_for(20.0, |s| {
        row_index(s, high).is_none() && row_index(s, low).is_some()
    });
    assert!(searched, "{screen}");
    assert!(row_index(&screen, low).is_some(), "{screen}");
    tmux.keys(&["Escape"]);
    let (cleared, screen) = tmux.wait_for(20.0, |s| row_index(s, high).is_some());
    assert!(cleared, "{screen}");

    // s: stat on the selected process (the sleeper, first by PID), on the terminal, then
    // Enter comes back to the screen.
    tmux.keys(&["Home", "s"]);
    let (stat_ran, screen) =
        tmux.wait_for(60.0, |s| s.contains("press Enter to return to autopin top"));
    assert!(stat_ran, "{screen}");
    assert!(
        screen.contains(&format!("autopin stat -p {low} --duration 5")),
        "{screen}"
    );
    assert!(screen.contains("thread(s) over"), "stat's table: {screen}");
    tmux.keys(&["Enter"]);
    // The screen is watched until it is drawn whole: a capture can catch a redraw halfway,
    // its key line (the last) not yet written.
    let done = format!("autopin stat -p {low}: done");
    let (back, screen) = tmux.wait_for(20.0, |s| {
        s.starts_with("autopin top") && s.contains("PID▲") && s.contains(&done)
    });
    assert!(back, "the key line says so: {screen}");

    // q: the screen as it was, the terminal's settings too.
    tmux.keys(&["q"]);
    let (left, screen) = tmux.wait_for(20.0, |s| {
        s.contains("before-top") && !s.lines().any(is_title)
    });
    assert!(left, "{screen}");
    assert!(!tmux.alternate_screen());
    tmux.type_line("stty -a > after.txt; echo after-top");
    let (done, screen) = tmux.wait_for(20.0, |s| s.lines().any(|l| l == "after-top"));
    assert!(done, "{screen}");
    assert!(
        screen.contains("before-top"),
        "the shell's lines are back: {screen}"
    );
    let before = std::fs::read_to_string(dir.path().join("before.txt")).unwrap();
    let after = std::fs::read_to_string(dir.path().join("after.txt")).unwrap();
    assert_eq!(before, after, "stty -a");

    // A SIGTERM gives the terminal back too.
    tmux.type_line(&format!(
        "sh -c 'echo $$ > top.pid; exec {} top -d 0.5'",
        bin().display()
    ));
    let (up, screen) = tmux.wait_for(20.0, |s| s.lines().any(is_title));
    assert!(up, "{screen}");
    let pid = std::fs::read_to_string(dir.path().join("top.pid")).unwrap();
    assert!(Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap()
        .success());
    let (left, screen) = tmux.wait_for(20.0, |s| !s.lines().any(is_title));
    assert!(left, "{screen}");
    assert!(!tmux.alternate_screen());
    tmux.type_line("stty -a > after-term.txt; echo after-term");
    let (done, screen) = tmux.wait_for(20.0, |s| s.lines().any(|l| l == "after-term"));
    assert!(done, "{screen}");
    let after = std::fs::read_to_string(dir.path().join("after-term.txt")).unwrap();
    assert_eq!(before, after, "stty -a after SIGTERM");
    drop(prog);
    let _ = sleeper.0.kill();
}

#[test]
fn colours_only_without_no_color() {
    autopin_testkit::require!(autopin_testkit::have("tmux"), "tmux is not installed");
    let dir = tempfile::tempdir().unwrap();
    for no_color in [false, true] {
        let tmux = Tmux::new(80, 24, dir.path());
        let env = if no_color { "NO_COLOR=1 " } else { "" };
        tmux.type_line(&format!("{env}{} top -d 0.5", bin().display()));
        let (up, screen) = tmux.wait_for(20.0, |s| s.lines().any(is_title) && s.contains("PID "));
        assert!(up, "{screen}");
        let out = tmux
            .cmd(&["capture-pane", "-p", "-e", "-t", "t"])
            .output()
            .unwrap();
        let styled = String::from_utf8_lossy(&out.stdout);
        // Foreground colours: SGR 30-37, 90-97 or 38;... (bold and reverse are no colour).
        let coloured = styled.split("\x1b[").skip(1).any(|seq| {
            let params = seq.split('m').next().unwrap_or("");
            params
                .split(';')
                .any(|p| matches!(p.parse::<u32>(), Ok(30..=38 | 90..=97)))
        });
        assert_eq!(coloured, !no_color, "NO_COLOR {no_color}:\n{styled}");
        tmux.keys(&["q"]);
        let (left, screen) = tmux.wait_for(20.0, |s| !s.lines().any(is_title));
        assert!(left, "{screen}");
    }
}

#[test]
fn a_small_terminal_gets_a_compact_view_that_says_so_and_a_wide_one_the_whole_machine() {
    autopin_testkit::require!(autopin_testkit::have("tmux"), "tmux is not installed");
    let dir = tempfile::tempdir().unwrap();
    let dump = autopin_testkit::hwloc_dump("256ppc-8n8s4t");
    for (w, h) in [(80u16, 24u16), (200, 50), (60, 10)] {
        let tmux = Tmux::new(w, h, dir.path());
        tmux.type_line(&format!(
            "{} top -d 0.5 --sysfs-root {}",
            bin().display(),
            dump.display()
        ));
        // A loaded machine reads a dump slowly.
        let (shown, screen) = tmux.wait_for(60.0, |s| s.contains("PID ") && s.contains("256 CPUs"));
        assert!(shown, "{w}x{h}:\n{screen}");
        let lines: Vec<&str> = screen.lines().collect();
        assert_eq!(lines.len(), h as usize, "{w}x{h}:\n{screen}");
        let glyphs: usize = lines[1..]
            .iter()
            .take_while(|l| !l.starts_with("█ ") && !l.starts_with("! ") && !l.contains("PID "))
            .map(|l| l.chars().filter(|c| "?·▁▂▃▄▅▆▇█!ps".contains(*c)).count())
            .sum();
        if h >= 24 {
            assert!(glyphs >= 256, "{w}x{h}: the whole machine:\n{screen}");
            assert!(!screen.contains("too small"), "{screen}");
        } else {
            assert!(
                screen.contains("too small to draw the machine (256 CPUs"),
                "{w}x{h}:\n{screen}"
            );
        }
        tmux.keys(&["q"]);
        let (left, screen) = tmux.wait_for(20.0, |s| !s.lines().any(is_title));
        assert!(left, "{screen}");
    }
}

/// The terminal goes away under top (its window closed, its tmux session killed): top ends
/// within a second or so instead of spinning on the hung-up terminal's endless end-of-file
/// (a leftover top of a failed test run once took a whole CPU for half an hour).
#[test]
fn top_ends_when_its_terminal_goes_away() {
    autopin_testkit::require!(autopin_testkit::have("tmux"), "tmux is not installed");
    let dir = tempfile::tempdir().unwrap();
    let tmux = Tmux::new(80, 24, dir.path());
    let marker = format!("{}/top-pid", dir.path().display());
    tmux.type_line(&format!(
        "echo $$ > {marker}; exec {} top -d 0.5",
        bin().display()
    ));
    let (shown, screen) = tmux.wait_for(20.0, |s| s.starts_with("autopin top"));
    assert!(shown, "{screen}");
    let pid: i32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    drop(tmux);
    let gone = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
    });
    if !gone {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(
        gone,
        "top (PID {pid}) still runs 5 s after its terminal went away"
    );
}
