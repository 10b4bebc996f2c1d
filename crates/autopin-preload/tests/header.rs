//! Tests of include/autopin.h, the header-only heartbeat channel: compiled into small C
//! programs with the system C compiler (installed by scripts/deps.sh).

use std::path::{Path, PathBuf};
use std::process::Command;

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

/// Compiles `src` (C, or C++ when `cxx`) against autopin.h; None when no compiler exists.
fn compile(dir: &Path, name: &str, src: &str, cxx: bool) -> Option<PathBuf> {
    let (compiler, ext) = if cxx { ("g++", "cc") } else { ("cc", "c") };
    let file = dir.join(format!("{name}.{ext}"));
    std::fs::write(&file, src).unwrap();
    let exe = dir.join(name);
    let out = match Command::new(compiler)
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-I"])
        .arg(include_dir())
        .arg("-o")
        .arg(&exe)
        .arg(&file)
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!("cannot run {compiler} (scripts/deps.sh installs it): {e}"),
    };
    assert!(
        out.status.success(),
        "{compiler} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

const COUNTER: &str = r#"
#include "autopin.h"
#include <pthread.h>
#include <stdio.h>
static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < 100000; i++) autopin_heartbeat(1);
    return NULL;
}
int main(void) {
    autopin_phase("setup");
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    autopin_heartbeat(5);
    autopin_phase("a-very-long-phase-name-that-is-longer-than-sixty-three-bytes-and-gets-cut");
    autopin_phase("solve");
    printf("done\n");
    return 0;
}
"#;

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

#[test]
fn heartbeats_are_counted_and_phase_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = compile(dir.path(), "counter", COUNTER, false) else {
        return;
    };
    let hb = dir.path().join("hb");
    // A zero-filled file: the first writer puts in magic and version.
    std::fs::write(&hb, [0u8; 128]).unwrap();
    let out = Command::new(&exe)
        .env("AUTOPIN_HEARTBEAT", &hb)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let b = std::fs::read(&hb).unwrap();
    assert_eq!(&b[0..8], b"AOPPTHB1");
    assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 1);
    assert_eq!(u64_at(&b, 16), 400_005, "beats");
    assert_eq!(
        u64_at(&b, 24),
        6,
        "three phase updates, +2 each, even at rest"
    );
    let phase = &b[32..96];
    let end = phase.iter().position(|c| *c == 0).unwrap();
    assert_eq!(&phase[..end], b"solve");
    assert!(
        phase[end..].iter().all(|c| *c == 0),
        "old longer name fully cleared"
    );
}

#[test]
fn without_the_variable_the_calls_do_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = compile(dir.path(), "counter", COUNTER, false) else {
        return;
    };
    let out = Command::new(&exe)
        .env_remove("AUTOPIN_HEARTBEAT")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    assert!(out.stderr.is_empty());
}

#[test]
fn a_foreign_file_disables_heartbeats_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = compile(dir.path(), "counter", COUNTER, false) else {
        return;
    };
    let hb = dir.path().join("hb");
    let junk = [0xabu8; 128];
    std::fs::write(&hb, junk).unwrap();
    let out = Command::new(&exe)
        .env("AUTOPIN_HEARTBEAT", &hb)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("heartbeats off"));
    assert_eq!(std::fs::read(&hb).unwrap(), junk, "file left untouched");
    // Too small or missing: same, never a crash.
    std::fs::write(&hb, [0u8; 16]).unwrap();
    assert!(Command::new(&exe)
        .env("AUTOPIN_HEARTBEAT", &hb)
        .status()
        .unwrap()
        .success());
    let missing = dir.path().join("missing");
    assert!(Command::new(&exe)
        .env("AUTOPIN_HEARTBEAT", &missing)
        .status()
        .unwrap()
        .success());
}

#[test]
fn header_compiles_as_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let src = "#include \"autopin.h\"\nint main() { autopin_heartbeat(1); autopin_phase(\"x\"); return 0; }\n";
    let Some(exe) = compile(dir.path(), "cpp", src, true) else {
        return;
    };
    assert!(Command::new(&exe).status().unwrap().success());
}
