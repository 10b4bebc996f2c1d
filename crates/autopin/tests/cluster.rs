//! autopin under Slurm and the MPI launchers, on a real local Slurm (scripts/slurm-local.sh:
//! two emulated nodes on this host) and Debian's MPICH and Open MPI. Tests that need a
//! launcher that cannot start here are counted skips with the reason; the rendezvous fault
//! tests need none (they play the launcher's environment themselves).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// One test that runs the spinning program at a time, launcher or not: the local cluster
/// has two CPUs per node, and two ranks in lockstep beside another test's spinning program
/// fell out of step (one took a fifth probe where the other decided after four).
static SERIAL: Mutex<()> = Mutex::new(());

const OMP_APP: &str = r#"
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* omp_app SECONDS [DIE_AFTER]: every OpenMP thread spins for SECONDS, sampling its own
 * Cpus_allowed_list and CPU; at the end each thread prints the CPUs it was ever allowed on
 * and ran on as bit masks. With DIE_AFTER, the process kills itself (SIGKILL) then. */
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static unsigned long allowed_mask(void){
  char line[512]; unsigned long m=0; FILE*f=fopen("/proc/thread-self/status","r");
  if(!f) return 0;
  while(fgets(line,sizeof line,f)) if(!strncmp(line,"Cpus_allowed_list:",18)){
    char*p=line+18; while(*p){ while(*p==' '||*p=='\t'||*p==',') p++; if(*p<'0'||*p>'9') break;
      long a=strtol(p,&p,10), b=a; if(*p=='-') b=strtol(p+1,&p,10); for(long c=a;c<=b&&c<64;c++) m|=1UL<<c; } }
  fclose(f); return m; }
int main(int argc,char**argv){
  double secs=argc>1?atof(argv[1]):3.0, die=argc>2?atof(argv[2]):-1; double t0=now();
  #pragma omp parallel
  { unsigned long al=0, ran=0; volatile double x=0; int k=0;
    while(now()-t0<secs){ for(int i=0;i<20000;i++) x+=i*1e-9;
      if((k++&15)==0){ al|=allowed_mask(); int c=sched_getcpu(); if(c>=0&&c<64) ran|=1UL<<c; }
      if(die>0 && now()-t0>die && omp_get_thread_num()==0) raise(SIGKILL); }
    #pragma omp critical
    printf("thread %d allowed %lx ran %lx\n", omp_get_thread_num(), al, ran); }
  return 0; }
"#;

fn autopin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_autopin"))
}

fn omp_app() -> PathBuf {
    autopin_testkit::build_c("cluster_omp_app", OMP_APP, &["-fopenmp"]).expect("build omp_app")
}

/// Starts the local Slurm (idempotent); the SLURM_CONF to use, or why it cannot run.
fn slurm() -> Result<String, String> {
    slurm_with_spank(None)
}

/// Builds the SPANK plugin (contrib/slurm) and starts the local Slurm with it in
/// plugstack.conf, pointing at this build's autopin.
fn slurm_with_autopin_plugin() -> Result<String, String> {
    if !Path::new("/usr/include/slurm/spank.h").exists() {
        return Err("slurm/spank.h is missing (scripts/deps.sh installs libslurm-dev)".into());
    }
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("spank");
    let make = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(autopin_testkit::repo_root().join("contrib/slurm"))
        .arg(format!("O={}", out_dir.display()))
        .output()
        .map_err(|e| format!("make: {e}"))?;
    // A plugin that does not build is a failure, not a skip.
    assert!(
        make.status.success(),
        "building contrib/slurm failed: {}",
        String::from_utf8_lossy(&make.stderr)
    );
    let line = format!(
        "{} autopin={}",
        out_dir.join("autopin_spank.so").display(),
        autopin().display()
    );
    slurm_with_spank(Some(&line))
}

fn slurm_with_spank(spank: Option<&str>) -> Result<String, String> {
    for t in ["srun", "slurmctld", "slurmd", "munged"] {
        if !autopin_testkit::have(t) && !Path::new("/usr/sbin").join(t).exists() {
            return Err(format!(
                "{t} is not installed (scripts/deps.sh installs Slurm)"
            ));
        }
    }
    let script = autopin_testkit::repo_root().join("scripts/slurm-local.sh");
    let mut up = Command::new("bash");
    up.arg(&script).arg("up");
    if let Some(line) = spank {
        up.env("AUTOPIN_SPANK", line);
    }
    let out = up.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "scripts/slurm-local.sh up failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let env = Command::new("bash")
        .arg(&script)
        .arg("env")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&env.stdout);
    Ok(text
        .trim()
        .strip_prefix("export SLURM_CONF=")
        .expect("env prints SLURM_CONF")
        .to_string())
}

fn read_reports(dir: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect()
}

fn cpus(list: &str) -> Vec<u32> {
    autopin_topology::CpuSet::parse_list(list)
        .unwrap()
        .iter()
        .collect()
}

/// The two ranks' shares are disjoint, their probes of each candidate overlap in time, and
/// they decided on the same candidate.
fn assert_coordinated(reports: &[Value]) {
    assert_eq!(reports.len(), 2, "one report per rank");
    let share = |r: &Value| cpus(r["launch"]["share"].as_str().unwrap());
    let (a, b) = (share(&reports[0]), share(&reports[1]));
    assert!(!a.is_empty() && !b.is_empty());
    assert!(
        a.iter().all(|c| !b.contains(c)),
        "shares overlap: {a:?} {b:?}"
    );
    for r in reports {
        assert_eq!(
            r["launch"]["coordinated_with"],
            serde_json::json!([0, 1]),
            "{r}"
        );
        assert!(r["complete"].as_bool().unwrap(), "{r}");
    }
    assert_probed_together(reports, 0);
}

/// Search `search` of both ranks probed the same candidates in the same order, each probe
/// overlapping in time its partner's, and the ranks decided alike.
fn assert_probed_together(reports: &[Value], search: u64) {
    let probes = |r: &Value| -> Vec<(u64, f64, f64)> {
        let origin = r["launch"]["clock_origin"].as_f64().unwrap();
        r["probes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["search"] == search)
            .map(|p| {
                let start = origin + p["start"].as_f64().unwrap();
                (
                    p["candidate"].as_u64().unwrap(),
                    start,
                    start + p["duration"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    let (pa, pb) = (probes(&reports[0]), probes(&reports[1]));
    assert!(!pa.is_empty());
    assert_eq!(
        pa.iter().map(|p| p.0).collect::<Vec<_>>(),
        pb.iter().map(|p| p.0).collect::<Vec<_>>(),
        "same candidates in the same order"
    );
    for (x, y) in pa.iter().zip(&pb) {
        assert!(
            x.1 < y.2 && y.1 < x.2,
            "probes of candidate {} do not overlap: {x:?} {y:?}",
            x.0
        );
    }
    let decided = |r: &Value| r["decision"]["candidate_index"].as_u64().unwrap();
    assert_eq!(decided(&reports[0]), decided(&reports[1]));
}

const RUN_ARGS: &[&str] = &[
    "run",
    "--budget",
    "2",
    "--probe",
    "0.3",
    "-i",
    "0.2",
    "--no-perturbation-estimate",
];

/// `srun -N1 -n2 autopin run RUN_ARGS EXTRA --report REPORT -- omp_app 3`: two ranks of one
/// step on this node, one OpenMP thread each.
fn srun_two_ranks(conf: &str, extra: &[&std::ffi::OsStr], report: &Path) -> std::process::Output {
    srun_two_ranks_for(conf, extra, report, "3")
}

/// [`srun_two_ranks`] with the program running `seconds`.
fn srun_two_ranks_for(
    conf: &str,
    extra: &[&std::ffi::OsStr],
    report: &Path,
    seconds: &str,
) -> std::process::Output {
    Command::new("srun")
        .env("SLURM_CONF", conf)
        .env("OMP_NUM_THREADS", "1")
        .args(["-N1", "-n2", "--cpu-bind=none"])
        .arg(autopin())
        .args(RUN_ARGS)
        .args(extra)
        .arg("--report")
        .arg(report)
        .arg("--")
        .arg(omp_app())
        .arg(seconds)
        .output()
        .unwrap()
}

#[test]
fn srun_two_ranks_split_probe_in_lockstep_and_agree() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let conf = autopin_testkit::ok_or_skip!(slurm());
    let tmp = tempfile::tempdir().unwrap();
    let out = srun_two_ranks(&conf, &[], &tmp.path().join("r-%j.%s.%n.%r.json"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_coordinated(&read_reports(tmp.path()));
    // The program's stdout passed through: one line per rank.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
}

/// Two ranks of a step on one node, run twice with one decision store: each rank keeps
/// the record of its own share of the node, and the second step finds both.
#[test]
fn srun_ranks_remember_one_decision_per_rank_share() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let conf = autopin_testkit::ok_or_skip!(slurm());
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("decisions.db");
    let step = |name: &str, seconds: &str| {
        let out = srun_two_ranks_for(
            &conf,
            &["--memory".as_ref(), store.as_os_str()],
            &tmp.path().join(format!("{name}-%r.json")),
            seconds,
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        (0..2)
            .map(|r| {
                let p = tmp.path().join(format!("{name}-{r}.json"));
                let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{e}\n{err}"));
                serde_json::from_str::<Value>(&text).unwrap()
            })
            .collect::<Vec<_>>()
    };
    let first = step("first", "3");
    // Each rank kept a record of its share: what a rank that did not says why (its memory
    // object, its notes, whether it decided).
    for r in &first {
        assert_eq!(
            r["memory"]["outcome"],
            "new",
            "{}\nnotes: {}\nprobes: {}\ndecision: {}",
            r["memory"],
            r["notes"],
            r["probes"].as_array().map_or(0, Vec::len),
            r["decision"]
        );
    }
    assert!(
        first.iter().all(|r| r["memory"]["hit"] == false),
        "{first:?}"
    );
    // A check whose rank finds other CPUs busy than when it decided (stress beside the test)
    // becomes a search of its own (2 s at most): the second program runs long enough to
    // finish it, so each record is written back whatever the machine's load.
    let second = step("second", "6");
    // One record per rank share, each used twice.
    let list = Command::new(autopin())
        .args(["memory", "--memory"])
        .arg(&store)
        .args(["list", "--json"])
        .output()
        .unwrap();
    let records: Value = serde_json::from_slice(&list.stdout).unwrap();
    // What each rank of the second step did with its record, for any failure below.
    let seen: Vec<String> = second
        .iter()
        .map(|r| {
            format!(
                "memory: {}\nnotes: {}\ndecision: {}",
                r["memory"], r["notes"], r["decision"]
            )
        })
        .collect();
    for r in &second {
        assert_eq!(r["memory"]["hit"], true, "{}\n{records:#}", r["memory"]);
    }
    let records = records.as_array().unwrap();
    let shares: std::collections::BTreeSet<&str> = records
        .iter()
        .filter_map(|r| r["key"]["share"].as_str())
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(shares.len(), 2, "{records:?}");
    assert!(
        records.iter().all(|r| r["uses"] == 2),
        "{records:?}\n{}",
        seen.join("\n")
    );
}

/// `srun --autopin=OPTIONS ./app` through the SPANK plugin: the same split, lockstep probes
/// and single decision as `srun autopin run OPTIONS -- ./app`; the task's argv, stdout and
/// exit status pass through.
#[test]
fn srun_autopin_through_the_spank_plugin_behaves_like_autopin_run() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let conf = autopin_testkit::ok_or_skip!(slurm_with_autopin_plugin());
    let tmp = tempfile::tempdir().unwrap();
    let app = omp_app();
    let options = format!(
        "{} --report {}",
        RUN_ARGS[1..].join(" "),
        tmp.path().join("r-%j.%s.%n.%r.json").display()
    );
    let out = Command::new("srun")
        .env("SLURM_CONF", &conf)
        .env("OMP_NUM_THREADS", "1")
        .args(["-N1", "-n2", "--cpu-bind=none"])
        .arg(format!("--autopin={options}"))
        .arg(&app)
        .arg("3")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let reports = read_reports(tmp.path());
    assert_coordinated(&reports);
    for r in &reports {
        assert_eq!(r["launch"]["launcher"], "slurm", "{r}");
    }
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);

    // Without --autopin the plugin leaves the task alone; the exit status passes through
    // with it.
    let probe =
        "tr '\\0' ' ' </proc/$$/cmdline; echo; tr '\\0' ' ' </proc/$PPID/cmdline; echo; exit 7";
    let run = |autopin: bool| {
        let mut c = Command::new("srun");
        c.env("SLURM_CONF", &conf).args(["-N1", "-n1"]);
        if autopin {
            c.arg("--autopin=--budget 0.5");
        }
        c.args(["bash", "-c", probe]).output().unwrap()
    };
    let plain = run(false);
    let with = run(true);
    assert_eq!(plain.status.code(), Some(7));
    assert_eq!(with.status.code(), Some(7));
    let parent = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .nth(1)
            .unwrap_or_default()
            .to_string()
    };
    assert!(!parent(&plain).contains("autopin"), "{}", parent(&plain));
    assert!(
        parent(&with).starts_with(&format!(
            "{} run --budget 0.5 -- bash -c",
            autopin().display()
        )),
        "{}",
        parent(&with)
    );
}

/// `#SBATCH --autopin=OPTIONS` reaches the job's srun steps (not the batch script itself).
#[test]
fn sbatch_autopin_wraps_the_steps_of_the_job() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let conf = autopin_testkit::ok_or_skip!(slurm_with_autopin_plugin());
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("job.sh");
    let reports = tmp.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\n#SBATCH -N1 -n2 --autopin=\"{} --report {}\"\n\
             echo \"batch $(tr '\\0' ' ' </proc/$PPID/cmdline)\"\n\
             OMP_NUM_THREADS=1 srun --cpu-bind=none {} 3\n",
            RUN_ARGS[1..].join(" "),
            reports.join("r-%r.json").display(),
            omp_app().display()
        ),
    )
    .unwrap();
    let log = tmp.path().join("job.out");
    let out = Command::new("sbatch")
        .env("SLURM_CONF", &conf)
        .arg("--wait")
        .arg("-o")
        .arg(&log)
        .arg(&script)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let batch = text
        .lines()
        .find(|l| l.starts_with("batch "))
        .expect("batch line");
    assert!(!batch.contains("autopin"), "{batch}");
    assert_coordinated(&read_reports(&reports));
}

#[test]
fn srun_cpus_per_task_keeps_every_thread_inside_its_cpus() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let conf = autopin_testkit::ok_or_skip!(slurm());
    let app = omp_app();
    // Two OpenMP threads per task on one CPU each: autopin may pin, never widen.
    let script = format!(
        "m=$(grep Cpus_allowed_list /proc/self/status | cut -f2); echo \"task $SLURM_LOCALID $m\"; exec {} {} -- {} 2",
        autopin().display(),
        RUN_ARGS.join(" "),
        app.display()
    );
    let out = Command::new("srun")
        .env("SLURM_CONF", &conf)
        .env("OMP_NUM_THREADS", "2")
        .args(["-N1", "-n2", "--cpus-per-task=1", "--label", "bash", "-c"])
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for task in ["0", "1"] {
        let prefix = format!("{task}: ");
        let lines: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix(&prefix))
            .collect();
        let given = lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("task {task} ")))
            .expect("task line");
        let mask: u64 = cpus(given.trim()).iter().map(|c| 1u64 << c).sum();
        let threads: Vec<&&str> = lines.iter().filter(|l| l.starts_with("thread")).collect();
        assert_eq!(threads.len(), 2, "{stdout}");
        for t in threads {
            let f: Vec<&str> = t.split_whitespace().collect();
            let allowed = u64::from_str_radix(f[3], 16).unwrap();
            let ran = u64::from_str_radix(f[5], 16).unwrap();
            assert_eq!(allowed & !mask, 0, "task {task}: {t} outside {given}");
            assert_eq!(ran & !mask, 0, "task {task}: {t} ran outside {given}");
        }
    }
    // Each rank's lines say which rank speaks.
    let err = String::from_utf8_lossy(&out.stderr);
    for rank in ["0", "1"] {
        assert!(err.contains(&format!("autopin[rank {rank}]: ")), "{err}");
    }
}

#[test]
fn srun_rank_killed_mid_search_leaves_the_other_to_finish_with_slurms_exit_status() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let conf = autopin_testkit::ok_or_skip!(slurm());
    let tmp = tempfile::tempdir().unwrap();
    let app = omp_app();
    // Rank 1's program kills itself after 1 s; rank 0's runs 3 s.
    let step = |with_autopin: bool| {
        let run = if with_autopin {
            format!(
                "{} {} --report {}/r-%r.json -- ",
                autopin().display(),
                RUN_ARGS.join(" "),
                tmp.path().display()
            )
        } else {
            String::new()
        };
        let script = format!(
            "if [ $SLURM_LOCALID = 1 ]; then exec {run}{app} 3 1; else exec {run}{app} 3; fi",
            app = app.display()
        );
        Command::new("srun")
            .env("SLURM_CONF", &conf)
            .env("OMP_NUM_THREADS", "1")
            .args(["-N1", "-n2", "--cpu-bind=none", "bash", "-c"])
            .arg(&script)
            .output()
            .unwrap()
    };
    let plain = step(false);
    let with = step(true);
    assert!(!plain.status.success());
    assert_eq!(
        with.status.code(),
        plain.status.code(),
        "exit status differs"
    );
    let reports = read_reports(tmp.path());
    let survivor = reports
        .iter()
        .find(|r| r["launch"]["rank"] == 0)
        .expect("rank 0 report");
    assert!(survivor["decision"].is_object(), "{survivor}");
    let notes = survivor["notes"].to_string();
    assert!(
        notes.contains("local rank 1 dropped from the coordinated search: its process ended"),
        "{notes}"
    );
}

fn fake_slurm_run(job: &str, timeout: &str, dir: &Path) -> std::process::Output {
    Command::new(autopin())
        .env("SLURM_JOB_ID", job)
        .env("SLURM_STEP_ID", "0")
        .env("SLURM_LOCALID", "0")
        .env("SLURM_PROCID", "0")
        .env("SLURM_NODEID", "0")
        .env("SLURM_STEP_NUM_TASKS", "2")
        .env("SLURM_STEP_TASKS_PER_NODE", "2")
        .env("OMP_NUM_THREADS", "1")
        .args(RUN_ARGS)
        .args(["--rendezvous-timeout", timeout, "--report"])
        .arg(dir.join("r-%r.json"))
        .arg("--")
        .arg(omp_app())
        .arg("3.5")
        .output()
        .unwrap()
}

#[test]
fn a_rank_that_never_starts_is_dropped_after_the_timeout() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let job = format!("never-{}", std::process::id());
    let t = std::time::Instant::now();
    let out = fake_slurm_run(&job, "1", tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed().as_secs_f64() >= 1.0);
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("r-0.json")).unwrap())
            .unwrap();
    assert_eq!(r["launch"]["coordinated_with"], serde_json::json!([0]));
    assert!(r["decision"].is_object());
    assert!(
        r["notes"]
            .to_string()
            .contains("local rank 1 is not coordinated: it did not answer in time"),
        "{}",
        r["notes"]
    );
}

/// Messages a crashed step left from processes that are gone are not taken for a rank: rank 0
/// waits the join timeout for rank 1 as if the directory were empty, drops it, and searches
/// alone. (Not a bound on the run's time: beside other work a run of a 3.5 s program took over
/// 15 s; a rank that counted the dead one as present would be told apart by the report, which
/// would say it coordinated with rank 1 or dropped it later, "its process ended".)
#[test]
fn stale_rendezvous_files_of_a_crashed_step_do_not_block() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let job = format!("stale-{}", std::process::id());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let dir = autopin_cluster::rendezvous::directory_for(&format!("slurm-{job}.0-{}", host.trim()));
    // The directory lies in /dev/shm: removed however the test ends (autopin removes it too,
    // when its last rank leaves).
    let _gone = RemoveOnDrop(dir.clone());
    std::fs::create_dir_all(&dir).unwrap();
    // A crashed step left messages of both ranks from processes that are gone.
    let dead = {
        let mut c = Command::new("true").spawn().unwrap();
        let p = c.id();
        c.wait().unwrap();
        p
    };
    for (name, rank) in [("0.0", 0), ("0.1", 1), ("1.0", 0), ("1.1", 1), ("2.1", 1)] {
        let body = serde_json::json!({"rank": rank, "pid": dead, "body": {"allowed": "0-1"}});
        std::fs::write(dir.join(name), body.to_string()).unwrap();
    }
    let out = fake_slurm_run(&job, "1", tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("r-0.json")).unwrap())
            .unwrap();
    // The dead rank 1 of the old step did not count as present: it is dropped once the join
    // timeout is over, as an absent rank; one taken for present would have been dropped in a
    // later round as dead ("its process ended").
    assert_eq!(r["launch"]["coordinated_with"], serde_json::json!([0]));
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("local rank 1 is not coordinated: it did not answer in time"),
        "{notes}"
    );
    assert!(!notes.contains("its process ended"), "{notes}");
    assert!(r["complete"].as_bool().unwrap());
}

/// A directory removed when this goes out of scope, a failed assertion's unwinding included.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mpirun_case(mpirun: &str, extra: &[&str]) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    autopin_testkit::require!(
        autopin_testkit::have(mpirun),
        "{mpirun} is not installed (scripts/deps.sh installs MPICH and Open MPI)"
    );
    let reports = mpirun_two_ranks(mpirun, extra, &omp_app(), &["3"]);
    assert_coordinated(&reports);
}

/// `MPIRUN EXTRA -n 2 autopin run RUN_ARGS --report … -- PROGRAM ARGS` with one OpenMP
/// thread a rank, which must succeed; the ranks' reports.
fn mpirun_two_ranks(mpirun: &str, extra: &[&str], program: &Path, args: &[&str]) -> Vec<Value> {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(mpirun)
        .args(extra)
        .args(["-n", "2"])
        .arg(autopin())
        .args(RUN_ARGS)
        .arg("--report")
        .arg(tmp.path().join("r-%r.json"))
        .arg("--")
        .arg(program)
        .args(args)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    read_reports(tmp.path())
}

/// The ranks of an SPMD program whose workers come after a serial start-up: each rank's
/// threads outgrow its candidates at about the same moment, and each searches again for
/// them. Searches that begin in the same tick exchange their probes as the first search did
/// (10 of 10 runs by hand); a rank that began a tick before its partner's probe ended would
/// find different settings at the exchange and each would decide alone, which the report
/// says. Either way both ranks end decided, without waiting out a timeout.
#[test]
fn mpirun_ranks_whose_workers_come_late_search_again_together() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    autopin_testkit::require!(
        autopin_testkit::have("mpirun.mpich"),
        "mpirun.mpich is not installed (scripts/deps.sh installs MPICH)"
    );
    let late = autopin_testkit::late_workers(false);
    let started = std::time::Instant::now();
    let reports = mpirun_two_ranks("mpirun.mpich", &[], &late, &["1.5", "4"]);
    // 5.5 s of program; a rank stuck at an exchange would add its timeouts.
    assert!(
        started.elapsed().as_secs_f64() < 12.0,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(reports.len(), 2, "one report per rank");
    let mut alone = false;
    for r in &reports {
        let searches = r["searches"].as_array().unwrap();
        assert_eq!(searches.len(), 2, "{r}");
        assert_eq!(
            searches[1]["trigger"],
            "the program now runs 3 threads (the candidates were made for 1 thread)",
            "{r}"
        );
        assert_eq!(r["decision"]["search"], 1, "{r}");
        assert!(r["complete"].as_bool().unwrap(), "{r}");
        alone |= r["notes"].as_array().unwrap().iter().any(|n| {
            n.as_str()
                .is_some_and(|n| n.contains("decides alone") || n.contains("searching alone"))
        });
    }
    if !alone {
        assert_probed_together(&reports, 1);
    }
}

#[test]
fn mpich_mpirun_two_ranks_coordinate() {
    mpirun_case("mpirun.mpich", &[]);
}

#[test]
fn openmpi_mpirun_two_ranks_coordinate() {
    mpirun_case(
        "mpirun.openmpi",
        &[
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
        ],
    );
}

#[test]
fn report_merge_of_a_two_node_job() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let conf = autopin_testkit::ok_or_skip!(slurm());
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new("srun")
        .env("SLURM_CONF", &conf)
        .env("OMP_NUM_THREADS", "1")
        .args(["-N2", "-n4", "--ntasks-per-node=2", "--cpu-bind=none"])
        .arg(autopin())
        .args(RUN_ARGS)
        .arg("--report")
        .arg(tmp.path().join("autopin-%j.%s.%n.%r.json"))
        .arg("--")
        .arg(omp_app())
        .arg("3")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 4, "{files:?}");
    let job = tmp.path().join("job.json");
    let svg = tmp.path().join("job.svg");
    let merged = Command::new(autopin())
        .arg("report")
        .arg("--merge")
        .args(&files)
        .arg("-o")
        .arg(&job)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&merged.stdout);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&job).unwrap()).unwrap();
    let nodes = j["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{j}");
    assert_eq!(nodes[0]["node"], "node1");
    assert_eq!(nodes[1]["node"], "node2");
    for n in nodes {
        assert_eq!(n["ranks"].as_array().unwrap().len(), 2);
        assert_eq!(n["agreed"], true, "{n}");
    }
    assert_eq!(table.lines().count(), 5, "{table}");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("rank 3 (node2)"), "{s}");
    // The job report reads back: `autopin report job.json` shows the same table.
    let shown = Command::new(autopin())
        .arg("report")
        .arg(&job)
        .output()
        .unwrap();
    assert_eq!(
        shown.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&shown.stdout), table);
}
