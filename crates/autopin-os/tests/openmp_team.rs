//! The preload library's team size control, end to end: a program of many short parallel
//! regions, run with the library loaded and a heartbeat file, is asked for teams of one
//! thread while it runs. A program that never asks for its count gets the smaller teams
//! from a following region on, and `omp_get_max_threads()` says the same; one that sized
//! its work by `omp_get_max_threads()` outside a region keeps its count (its result would
//! otherwise be wrong) and the library says why, as does one that asked its team's size
//! (`omp_get_num_threads()`) in its first region only and split every later region's work
//! by that answer. All compute the right result, and the team-size-free count grows once
//! per barrier whatever the team's size.

use autopin_objective::TeamFlags;
use autopin_perf::heartbeat::HeartbeatChannel;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `MODE` 0: regions of the runtime's own size; each prints its team size (asked in every
/// region: a fresh answer each time, not a count kept) and the count
/// `omp_get_max_threads()` gives inside it, then waits for a line on stdin before the next
/// region (so the test can change the want between regions). `MODE` 1: the same, but the
/// program asks `omp_get_max_threads()` once before its first region and splits an array
/// by that count by hand in every region (a manual partition): with fewer threads than it
/// asked for, parts of the array would be left out and its sum wrong. `MODE` 2: the manual
/// partition by `omp_get_num_threads()` asked in the first region only (its later regions
/// count their threads without asking, and print no `omp_get_max_threads()`: asked inside
/// a region, it may stand for the team's size too). `MODE` 3: never asks at all (counts
/// its threads, shares its loop out dynamically).
const PROGRAM: &str = r#"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#define N 1200
int main(int argc, char **argv)
{
    int mode = atoi(argv[1]);
    int regions = atoi(argv[2]);
    static long v[N];
    int parts = mode == 1 ? omp_get_max_threads() : 0;
    char line[16];
    for (int r = 0; r < regions; r++) {
        long sum = 0;
        int team = 0, inside = 0;
        for (int i = 0; i < N; i++) v[i] = 0;
#pragma omp parallel
        {
            if (mode >= 2) {
                if (mode == 2 && r == 0) {
#pragma omp single
                    parts = omp_get_num_threads();
                }
#pragma omp atomic
                team++;
            } else {
#pragma omp single
                { team = omp_get_num_threads(); inside = omp_get_max_threads(); }
            }
#pragma omp barrier
            if (mode == 3) {
#pragma omp for schedule(dynamic, 100)
                for (int i = 0; i < N; i++) v[i] = 1;
            } else if (mode) {
                int t = omp_get_thread_num(), chunk = N / parts;
                for (int i = t * chunk; i < (t + 1) * chunk; i++) v[i] = 1;
            } else {
#pragma omp for
                for (int i = 0; i < N; i++) v[i] = 1;
            }
        }
        for (int i = 0; i < N; i++) sum += v[i];
        printf("team %d max %d sum %ld\n", team, inside, sum);
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) break;
    }
    return 0;
}
"#;

fn build(compiler: &str) -> Result<PathBuf, String> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join(format!("omp-team-{compiler}.c"));
    std::fs::write(&src, PROGRAM).unwrap();
    autopin_testkit::build_c_file_with(compiler, &src, &["-fopenmp", "-O1"])
}

/// Runs `exe` with two threads, asking for teams of one after its second region; returns
/// each region's line and the library's team state at the end.
fn run(exe: &Path, mode: &str) -> (Vec<String>, autopin_objective::TeamState, u64) {
    run_asking(exe, mode, false)
}

/// `run`, the team of one asked before the program starts when `at_birth`.
fn run_asking(
    exe: &Path,
    mode: &str,
    at_birth: bool,
) -> (Vec<String>, autopin_objective::TeamState, u64) {
    let dir = tempfile::tempdir().unwrap();
    let (channel, path) = HeartbeatChannel::create(dir.path()).unwrap();
    if at_birth {
        channel.want_team(1);
    }
    let lib = autopin_os::process::preload_library().unwrap();
    let mut child = Command::new(exe)
        .args([mode, "5"])
        .env("LD_PRELOAD", &lib)
        .env("AUTOPIN_HEARTBEAT", &path)
        .env("OMP_NUM_THREADS", "2")
        .env_remove("OMP_DYNAMIC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut lines = Vec::new();
    for r in 0..5 {
        lines.push(out.next().unwrap().unwrap());
        if r == 1 && !at_birth {
            channel.want_team(1);
        }
        use std::io::Write;
        writeln!(stdin, "next").unwrap();
    }
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(child.wait().unwrap().success());
    let omp = channel.read().omp.expect("OpenMP counted");
    (lines, omp.team, omp.counts.team)
}

fn check(exe: &Path, compiler: &str) {
    // Never asked: teams of two, then of one from the region after the want; the count
    // the program reads says the same; every sum is whole.
    let (lines, team, team_count) = run(exe, "0");
    assert_eq!(
        lines,
        [
            "team 2 max 2 sum 1200",
            "team 2 max 2 sum 1200",
            "team 1 max 1 sum 1200",
            "team 1 max 1 sum 1200",
            "team 1 max 1 sum 1200",
        ],
        "{compiler}"
    );
    assert_eq!(
        (team.want, team.applied, team.own),
        (1, 1, 2),
        "{compiler}: {team:?}"
    );
    assert_eq!(
        team.starts, 5,
        "{compiler}: one count per region begun: {team:?}"
    );
    assert!(team.flags.mid_run_allowed(), "{compiler}: {team:?}");
    // Two barriers a region (the single's and the explicit one) and the loop's end, once per
    // team whatever its size.
    assert!((10..=20).contains(&team_count), "{compiler}: {team_count}");
    // Asked before its first region and kept: its teams stay at two, its sums whole, and
    // the library says why it refused.
    let (lines, team, _) = run(exe, "1");
    assert!(
        lines.iter().all(|l| l == "team 2 max 2 sum 1200"),
        "{compiler}: {lines:?}"
    );
    assert_eq!((team.want, team.applied), (1, 0), "{compiler}: {team:?}");
    assert!(
        team.flags.has(TeamFlags::ASKED) && team.flags.has(TeamFlags::REFUSED),
        "{team:?}"
    );
    assert!(
        team.flags.why_not().is_some_and(|w| w.contains("asked")),
        "{team:?}"
    );
    // Its team's size asked in its first region and kept: the second region, which did
    // not ask, shows it kept the answer; its teams stay at two and its sums whole.
    let (lines, team, _) = run(exe, "2");
    assert!(
        lines.iter().all(|l| l == "team 2 max 0 sum 1200"),
        "{compiler}: {lines:?}"
    );
    assert_eq!((team.want, team.applied), (1, 0), "{compiler}: {team:?}");
    assert!(
        team.flags.has(TeamFlags::KEPT) && team.flags.has(TeamFlags::REFUSED),
        "{team:?}"
    );
    assert!(
        !team.flags.has(TeamFlags::ASKED),
        "asked only inside a region: {team:?}"
    );
    assert!(
        team.flags
            .why_not()
            .is_some_and(|w| w.contains("without asking again")),
        "{team:?}"
    );
    // Asked before it started (fewer threads plausible at launch): its first region runs
    // its own count, the second and later the team asked, its sums whole.
    let (lines, team, _) = run_asking(exe, "3", true);
    assert_eq!(
        lines,
        [
            "team 2 max 0 sum 1200",
            "team 1 max 0 sum 1200",
            "team 1 max 0 sum 1200",
            "team 1 max 0 sum 1200",
            "team 1 max 0 sum 1200",
        ],
        "{compiler}"
    );
    assert_eq!((team.want, team.applied, team.own), (1, 1, 2), "{team:?}");
    // The same asked of the program that kept the size it asked in its first region: the
    // second region shows it kept it before any team could change, and it keeps two.
    let (lines, team, _) = run_asking(exe, "2", true);
    assert!(
        lines.iter().all(|l| l == "team 2 max 0 sum 1200"),
        "{compiler}: {lines:?}"
    );
    assert!(team.flags.has(TeamFlags::KEPT), "{team:?}");
}

#[test]
fn gcc_libgomp_teams_shrink_only_where_no_program_can_tell() {
    let exe = build("gcc").unwrap_or_else(|e| panic!("{e}"));
    check(&exe, "gcc");
}

#[test]
fn clang_libomp_teams_shrink_only_where_no_program_can_tell() {
    autopin_testkit::require!(autopin_testkit::have("clang"), "clang is not installed");
    let exe = autopin_testkit::ok_or_skip!(build("clang"));
    check(&exe, "clang");
}
