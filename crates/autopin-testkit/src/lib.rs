//! Test support shared by autopin's test suites (a dev-dependency only).
//!
//! - [`data`], [`tool`]: files the repository carries under `tests/`. A missing file is a
//!   failure (a panic naming it), never a skip: a fresh clone holds everything.
//! - [`hwloc_dump`]: a real machine's sysfs snapshot, extracted once per machine user into a
//!   cache directory and reused by every test binary.
//! - [`build_c`], [`build_c_file`]: C test programs compiled once into a content-addressed cache.
//! - [`skip!`] / [`require!`]: a test that cannot run because an optional tool or resource is
//!   absent says why and is recorded, so `scripts/test.sh` counts it as skipped, not passed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root (this crate lives in `crates/autopin-testkit`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// A file or directory under `tests/data/`; panics when the repository lacks it.
pub fn data(rel: &str) -> PathBuf {
    existing(repo_root().join("tests/data").join(rel))
}

/// A checking script under `tests/tools/`; panics when the repository lacks it.
pub fn tool(rel: &str) -> PathBuf {
    existing(repo_root().join("tests/tools").join(rel))
}

fn existing(p: PathBuf) -> PathBuf {
    assert!(
        p.exists(),
        "{} is missing: the repository must carry its test data (tests/data, tests/tools)",
        p.display()
    );
    p
}

/// Names of the hwloc Linux dumps the repository carries (`tests/data/hwloc-linux/NAME.tar.bz2`),
/// sorted.
pub fn hwloc_dump_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data("hwloc-linux"))
        .expect("tests/data/hwloc-linux is readable")
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".tar.bz2")
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

/// What lstopo printed for a dump (`NAME.console`).
pub fn hwloc_console(name: &str) -> String {
    let p = data(&format!("hwloc-linux/{name}.console"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The sysfs root of a dump: the tarball's single top directory, extracted once into a cache
/// shared by all test processes (extraction goes to a fresh directory that is renamed into
/// place, so concurrent tests never see half a tree).
pub fn hwloc_dump(name: &str) -> PathBuf {
    let tar = data(&format!("hwloc-linux/{name}.tar.bz2"));
    let dir = cache_dir("dumps").join(format!("{name}-{:016x}", file_hash(&tar)));
    if !dir.exists() {
        let tmp = fresh_sibling(&dir);
        let out = Command::new("tar")
            .arg("xjf")
            .arg(&tar)
            .arg("-C")
            .arg(&tmp)
            .output()
            .unwrap_or_else(|e| panic!("cannot run tar (needed to extract {name}): {e}"));
        assert!(
            out.status.success(),
            "tar xjf {} failed: {}",
            tar.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        publish(&tmp, &dir);
    }
    let tops: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("extracted dump is readable")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(
        tops.len(),
        1,
        "{name}: expected one top directory in the tarball"
    );
    tops.into_iter().next().unwrap()
}

/// Compiles C source text into an executable (cached by content and flags). `Err` carries the
/// compiler's message, for tests that skip when an optional compiler or library is absent.
pub fn build_c(name: &str, source: &str, flags: &[&str]) -> Result<PathBuf, String> {
    build(name, source.as_bytes(), flags, "cc")
}

/// Compiles a C file of the repository (e.g. `workloads/syncbench.c`) into an executable.
pub fn build_c_file(file: &Path, flags: &[&str]) -> Result<PathBuf, String> {
    build_c_file_with("cc", file, flags)
}

/// workloads/syncbench built with OpenMP and the back-channel header (include/autopin.h):
/// the OpenMP program with heartbeats and phases that many tests run.
pub fn syncbench() -> PathBuf {
    let include = format!("-I{}", repo_root().join("include").display());
    build_c_file(Path::new("workloads/syncbench.c"), &["-fopenmp", &include])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`build_c_file`] with another compiler (`clang`, `mpicc`, ...).
pub fn build_c_file_with(compiler: &str, file: &Path, flags: &[&str]) -> Result<PathBuf, String> {
    let path = if file.is_absolute() {
        file.to_path_buf()
    } else {
        repo_root().join(file)
    };
    let src = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("prog");
    build(name, &src, flags, compiler)
}

fn build(name: &str, source: &[u8], flags: &[&str], compiler: &str) -> Result<PathBuf, String> {
    let mut h = DefaultHasher::new();
    (source, flags, compiler).hash(&mut h);
    let dir = cache_dir("bin").join(format!("{name}-{:016x}", h.finish()));
    let exe = dir.join(name);
    if exe.exists() {
        return Ok(exe);
    }
    let tmp = fresh_sibling(&dir);
    let src = tmp.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write C source");
    let out = Command::new(compiler)
        .args(["-O2", "-o"])
        .arg(tmp.join(name))
        .arg(&src)
        .args(flags)
        .output()
        .map_err(|e| format!("cannot run {compiler}: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!(
            "{compiler} {} failed: {}",
            flags.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    publish(&tmp, &dir);
    Ok(exe)
}

/// A fake root with `/proc/sys/kernel/perf_event_paranoid` = 3 and a `/proc/self/status`
/// without capabilities: pointed to by `AUTOPIN_PERF_SYSFS_ROOT`, autopin finds it may count
/// nothing, as on a locked-down machine (so objective fallbacks are the same on machines that
/// have a PMU). Removed when the returned guard drops.
pub fn no_perf_root() -> TempRoot {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("autopin-no-perf-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let k = dir.join("proc/sys/kernel");
    std::fs::create_dir_all(&k).expect("create the fake /proc");
    std::fs::write(k.join("perf_event_paranoid"), "3\n").expect("write perf_event_paranoid");
    std::fs::create_dir_all(dir.join("proc/self")).expect("create /proc/self");
    std::fs::write(
        dir.join("proc/self/status"),
        "Name:\tx\nCapEff:\t0000000000000000\n",
    )
    .expect("write /proc/self/status");
    TempRoot(dir)
}

/// A directory removed on drop.
pub struct TempRoot(PathBuf);

impl TempRoot {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// True when `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            let p = d.join(tool);
            p.is_file()
                && std::fs::metadata(&p)
                    .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
                    .unwrap_or(false)
        })
    })
}

/// Number of CPUs this process may run on.
pub fn allowed_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The `unshare` flags that give a test a mount namespace of its own (a tmpfs it may fill
/// or remount, seen by nothing outside): root makes one (`-m`), anyone else a user namespace
/// with one (`-rm`). Err when unshare is not installed.
pub fn unshare_mount_flags() -> Result<&'static str, String> {
    use std::os::unix::fs::MetadataExt;
    if !have("unshare") {
        return Err("unshare is not installed".into());
    }
    // (/proc/self belongs to the process's effective user)
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    Ok(if root { "-m" } else { "-rm" })
}

/// Records that the calling test is skipped and why: printed, and appended to the file named
/// by `AUTOPIN_SKIP_LOG` (set by `scripts/test.sh`, which counts the lines). Use [`skip!`].
pub fn record_skip(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_owned();
    eprintln!("SKIPPED {test}: {reason}");
    if let Some(log) = std::env::var_os("AUTOPIN_SKIP_LOG") {
        // One short line per skip, appended: concurrent writers do not interleave lines.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let line = format!("{test}: {}\n", reason.replace('\n', " "));
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Skips the calling test (records the reason and returns from the test function).
#[macro_export]
macro_rules! skip {
    ($($reason:tt)+) => {{
        $crate::record_skip(&format!($($reason)+));
        return;
    }};
}

/// Skips the calling test unless `cond` holds.
#[macro_export]
macro_rules! require {
    ($cond:expr, $($reason:tt)+) => {
        if !$cond {
            $crate::skip!($($reason)+);
        }
    };
}

/// Unwraps `Ok`, or skips the calling test with the error as the reason.
#[macro_export]
macro_rules! ok_or_skip {
    ($res:expr) => {
        match $res {
            Ok(v) => v,
            Err(e) => $crate::skip!("{}", e),
        }
    };
}

/// Words that break parsers, for the fuzz tests: numbers out of every range, signs,
/// separators, markup, text that is not ASCII, control characters.
pub const HOSTILE_WORDS: &[&str] = &[
    "1e308",
    "-1e308",
    "1e-308",
    "-1",
    "-0",
    "0",
    "4294967295",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999",
    "nan",
    "inf",
    "0x10",
    "1.5",
    "",
    " ",
    "\n",
    "\t",
    ",",
    ";",
    ":",
    "-",
    "--",
    "0-4294967295",
    "7-3",
    "%",
    "*",
    "?",
    "<",
    ">",
    "</",
    "\"",
    "{",
    "}",
    "[",
    "]",
    "é",
    "\u{fffd}",
    "\u{0}",
    "S0:0-3",
    "N:0-1",
];

/// Applies `edits` to `text`, for the fuzz tests: each `(at, len, with)` replaces `len`
/// bytes at `at` thousandths of the text's length (moved to a character boundary) by
/// `with`. Deletions, insertions and replacements in one form.
pub fn mutate(text: &str, edits: &[(u16, u16, String)]) -> String {
    let mut s = text.to_string();
    for (at, len, with) in edits {
        let n = s.len();
        let mut i = (usize::from(*at).min(1000) * n) / 1000;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        let mut j = (i + usize::from(*len)).min(n);
        while !s.is_char_boundary(j) {
            j += 1;
        }
        s.replace_range(i..j, with);
    }
    s
}

/// A per-user cache directory for extracted and built test inputs, kept across runs.
fn cache_dir(kind: &str) -> PathBuf {
    let base = std::env::var_os("AUTOPIN_TESTKIT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("autopin-testkit-{}", current_uid())));
    let d = base.join(kind);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

fn current_uid() -> u32 {
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").expect("/proc/self"))
}

fn file_hash(p: &Path) -> u64 {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// A new empty directory next to `dir`, unique to this process and call.
fn fresh_sibling(dir: &Path) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.with_extension(format!("tmp{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("{}: {e}", tmp.display()));
    tmp
}

/// Moves a finished directory into place; when another process won the race, keeps theirs.
fn publish(tmp: &Path, dir: &Path) {
    if std::fs::rename(tmp, dir).is_err() {
        let _ = std::fs::remove_dir_all(tmp);
        assert!(dir.exists(), "cannot publish {}", dir.display());
    }
}

/// This process's allowed CPUs as /proc writes them (`Cpus_allowed_list`, e.g. `0-1`): what
/// a child starts with.
pub fn own_cpu_list() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .unwrap_or_default()
}

/// The first and the last CPU of a CPU list as /proc writes it (`0-3` → `0` and `3`).
pub fn first_and_last_cpu(list: &str) -> (String, String) {
    let first = list.split([',', '-']).next().unwrap_or("").to_string();
    let last = list.rsplit([',', '-']).next().unwrap_or("").to_string();
    (first, last)
}

/// This process's first and last allowed CPU, when it may use more than one.
pub fn two_allowed_cpus() -> Option<(String, String)> {
    let mine = own_cpu_list();
    (mine.contains('-') || mine.contains(',')).then(|| first_and_last_cpu(&mine))
}

/// A process's CPU time so far, in clock ticks (utime + stime of /proc/PID/stat); 0 when it
/// cannot be read.
pub fn process_cpu_ticks(pid: u32) -> u64 {
    stat_ticks(&format!("/proc/{pid}/stat"), 2)
}

/// The sum of the first `fields` time fields of a /proc stat file, in clock ticks: utime,
/// stime, then (with 4) the waited-for children's cutime and cstime — fields 14 on, the 12th
/// after the name. 0 when it cannot be read.
fn stat_ticks(path: &str, fields: usize) -> u64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    after
        .split_whitespace()
        .skip(11)
        .take(fields)
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}

/// Every thread's allowed CPUs as /proc shows them, as (thread id, list); empty when the
/// process is gone.
pub fn thread_cpu_lists(pid: u32) -> Vec<(String, String)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in tasks.flatten() {
        let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        if let Some(l) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
            out.push((
                e.file_name().to_string_lossy().into_owned(),
                l.split_whitespace().nth(1).unwrap_or("").to_string(),
            ));
        }
    }
    out
}

/// A program that computes alone for `serial` seconds (a serial start-up reading its input),
/// then runs its workers: with `openmp`, an OpenMP parallel loop on OMP_NUM_THREADS threads;
/// else two pthreads. Each way it works `seconds` after the start-up and exits 0.
pub fn late_workers(openmp: bool) -> PathBuf {
    const SRC: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static double until;
static void *work(void *arg) {
    while (now() < until)
        for (volatile int k = 0; k < 10000; k++) ;
    return arg;
}
int main(int argc, char **argv) {
    double serial = atof(argv[1]), seconds = atof(argv[2]);
    work((until = now() + serial, NULL));
    until = now() + seconds;
#ifdef _OPENMP
    while (now() < until) {
        #pragma omp parallel for
        for (int i = 0; i < 64; i++)
            for (volatile int k = 0; k < 2000; k++) ;
    }
#else
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
#endif
    return 0;
}
"#;
    let (name, flags): (&str, &[&str]) = if openmp {
        ("late_workers_omp", &["-fopenmp"])
    } else {
        ("late_workers_pthread", &["-pthread"])
    };
    build_c(name, SRC, flags).unwrap_or_else(|e| panic!("{e}"))
}

/// workloads/spin built for the tests: `spin SECONDS THREADS` keeps THREADS threads busy.
pub fn spin_program() -> PathBuf {
    let include = format!("-I{}", repo_root().join("include").display());
    build_c_file(Path::new("workloads/spin.c"), &["-pthread", &include])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// CPU time other work took while a test ran: the machine's busy time (/proc/stat) minus
/// this test process's own and its waited-for children's (/proc/self/stat), in CPUs. A
/// timing claim that cannot hold beside heavy outside load is skipped (and counted) when
/// this says the machine was shared.
pub struct OutsideLoad {
    busy: u64,
    ours: u64,
    at: std::time::Instant,
}

impl OutsideLoad {
    fn busy_ticks() -> u64 {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let cpu = stat.lines().next().unwrap_or("");
        // user nice system idle iowait irq softirq steal: all but idle and iowait.
        cpu.split_whitespace()
            .skip(1)
            .take(8)
            .enumerate()
            .filter(|(i, _)| *i != 3 && *i != 4)
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum()
    }

    fn own_ticks() -> u64 {
        // utime stime cutime cstime.
        stat_ticks("/proc/self/stat", 4)
    }

    pub fn start() -> Self {
        OutsideLoad {
            busy: Self::busy_ticks(),
            ours: Self::own_ticks(),
            at: std::time::Instant::now(),
        }
    }

    /// CPUs' worth of time others used since [`OutsideLoad::start`] (100 ticks a second).
    pub fn cpus(&self) -> f64 {
        let busy = Self::busy_ticks().saturating_sub(self.busy);
        let ours = Self::own_ticks().saturating_sub(self.ours);
        busy.saturating_sub(ours) as f64 / 100.0 / self.at.elapsed().as_secs_f64().max(1e-3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_data_is_found_and_dumps_extract() {
        let names = hwloc_dump_names();
        assert!(names.len() >= 16, "found {names:?}");
        let root = hwloc_dump("2arm-2c");
        assert!(
            root.join("sys/devices/system/cpu").is_dir(),
            "{}",
            root.display()
        );
        assert!(hwloc_console("2arm-2c").contains("PU"));
    }

    #[test]
    #[should_panic(expected = "is missing")]
    fn missing_data_is_a_failure() {
        data("no-such-file");
    }

    #[test]
    fn c_programs_build_once_and_errors_carry_the_message() {
        let a = build_c("hello", "int main(void){return 3;}", &[]).unwrap();
        let b = build_c("hello", "int main(void){return 3;}", &[]).unwrap();
        assert_eq!(a, b);
        assert_eq!(Command::new(&a).status().unwrap().code(), Some(3));
        let e = build_c("bad", "int main(void){ syntax error }", &[]).unwrap_err();
        assert!(e.contains("error"), "{e}");
    }
}
