//! The preload library's OpenMP counting, exactly: a program with known constructs, built
//! with GCC (libgomp, `GOMP_*` entry points) and with clang (libomp, `__kmpc_*` entry
//! points, parallel regions through the variadic `__kmpc_fork_call`), run with the library
//! loaded. Every region and barrier is counted once, never twice, and the program computes
//! the same result as without the library (the wrappers forward every argument, including
//! the shared variables a region passes on the stack).

use autopin_objective::OmpRuntime;
use autopin_perf::heartbeat::HeartbeatChannel;
use std::path::Path;
use std::process::Command;

/// Ten parallel regions of two threads; each passes one explicit barrier per thread and
/// shares out a dynamic loop of four iterations. The region uses nine shared variables, so
/// clang passes it more arguments than x86-64 has argument registers.
const PROGRAM: &str = r#"
#include <omp.h>
#include <stdio.h>
int main(void)
{
    long v[4] = {0};
    long a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8;
    for (int r = 0; r < 10; r++) {
#pragma omp parallel num_threads(2)
        {
            int t = omp_get_thread_num();
            __atomic_fetch_add(&v[t & 1], a + b + c + d + e + f + g + h + r, __ATOMIC_RELAXED);
#pragma omp barrier
#pragma omp for schedule(dynamic, 1) nowait
            for (int i = 0; i < 4; i++)
                __atomic_fetch_add(&v[2], i * a, __ATOMIC_RELAXED);
        }
    }
    printf("%ld %ld %ld\n", v[0] + v[1], v[2], h);
    return 0;
}
"#;

/// Runs `exe` without and with the library and checks what it counted.
fn check(exe: &Path, runtime: OmpRuntime, compiler: &str) {
    let plain = Command::new(exe).output().unwrap();
    assert!(plain.status.success(), "{plain:?}");
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "810 60 8\n");
    let dir = tempfile::tempdir().unwrap();
    let (channel, path) = HeartbeatChannel::create(dir.path()).unwrap();
    let lib = autopin_os::process::preload_library().unwrap();
    let counted = Command::new(exe)
        .env("LD_PRELOAD", &lib)
        .env("AUTOPIN_HEARTBEAT", &path)
        .output()
        .unwrap();
    assert!(counted.status.success(), "{counted:?}");
    assert_eq!(
        String::from_utf8_lossy(&counted.stdout),
        String::from_utf8_lossy(&plain.stdout),
        "{compiler}: the program's result changed under the library"
    );
    let omp = channel.read().omp.expect("OpenMP counts published");
    assert_eq!(omp.runtime, runtime, "{compiler}: {omp:?}");
    assert_eq!(omp.counts.regions, 10, "{compiler}: {omp:?}");
    assert_eq!(omp.counts.barriers, 20, "{compiler}: {omp:?}");
    // Four chunks a region, plus each thread's last request (that ends its last chunk) with
    // libomp, or less the chunks handed out with the loop's start with libgomp.
    assert!(
        (30..=60).contains(&omp.counts.chunks),
        "{compiler}: {omp:?}"
    );
    assert_eq!(omp.threads, 2, "{compiler}: {omp:?}");
}

/// The program built with `compiler`.
fn build(compiler: &str) -> Result<std::path::PathBuf, String> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(format!("omp-counts-{compiler}.c"));
    std::fs::write(&src, PROGRAM).unwrap();
    autopin_testkit::build_c_file_with(compiler, &src, &["-fopenmp", "-O1"])
}

#[test]
fn gcc_libgomp_constructs_are_counted_once() {
    let exe = build("gcc").unwrap_or_else(|e| panic!("{e}"));
    check(&exe, OmpRuntime::Gnu, "gcc");
}

#[test]
fn clang_libomp_constructs_are_counted_once() {
    autopin_testkit::require!(autopin_testkit::have("clang"), "clang is not installed");
    let exe = autopin_testkit::ok_or_skip!(build("clang"));
    check(&exe, OmpRuntime::Llvm, "clang");
}
