//! `autopin show`: where each thread of a running program is now, like `hwloc-ps -t`: its
//! state, the CPU it last ran on, the CPUs it may use, and where that CPU sits (core,
//! package, NUMA node). `--all` lists the user's processes, `--job` a Slurm job's.

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_os::show_source::{processes_of_job, processes_of_user, thread_places, ThreadPlace};
use autopin_topology::{Machine, ObjType};
use serde::Serialize;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin show 4242\n  autopin show 4242 --json\n  \
autopin show --all\n  autopin show --job $SLURM_JOB_ID"
)]
pub struct Args {
    /// The process to show, thread by thread
    #[arg(value_name = "PID", required_unless_present_any = ["all", "job"])]
    pub pid: Option<i32>,
    /// Every process of this user, one line each
    #[arg(long, conflicts_with_all = ["pid", "job"])]
    pub all: bool,
    /// Every process of this Slurm job, one line each
    #[arg(long, value_name = "ID", conflicts_with = "pid")]
    pub job: Option<String>,
    /// Print JSON (every thread of every process shown) instead of the table
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

/// One thread and where it is.
#[derive(Serialize)]
struct Thread {
    tid: i32,
    name: String,
    state: String,
    cpu: u32,
    mask: String,
    /// Logical indexes (`L#`) of the CPU's core and package; OS indexes of its NUMA nodes.
    core: Option<u32>,
    package: Option<u32>,
    numa: Vec<u32>,
}

#[derive(Serialize)]
struct Process {
    pid: i32,
    name: String,
    threads: Vec<Thread>,
}

fn state_word(c: char) -> &'static str {
    match c {
        'R' => "running",
        'S' => "sleeping",
        'D' => "disk-wait",
        'T' | 't' => "stopped",
        'Z' => "zombie",
        'I' => "idle",
        _ => "other",
    }
}

fn thread(m: &Machine, t: ThreadPlace) -> Thread {
    let pu = m.pu_by_os(t.cpu);
    let index = |ty| {
        pu.and_then(|p| m.ancestor_of_type(p, ty))
            .map(|o| m.obj(o).logical_index)
    };
    Thread {
        tid: t.tid,
        state: state_word(t.state).into(),
        cpu: t.cpu,
        mask: t.mask.to_list(),
        core: index(ObjType::Core),
        package: index(ObjType::Package),
        numa: pu.map(|p| m.numa_of(p)).unwrap_or_default(),
        name: t.name,
    }
}

fn process(m: &Machine, pid: i32, name: String) -> Option<Process> {
    let threads = thread_places(pid).ok()?;
    Some(Process {
        pid,
        name,
        threads: threads.into_iter().map(|t| thread(m, t)).collect(),
    })
}

fn or_dash(v: Option<u32>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

/// The thread-by-thread table of one process.
fn thread_table(p: &Process) -> String {
    let masks: std::collections::BTreeSet<&str> =
        p.threads.iter().map(|t| t.mask.as_str()).collect();
    let mut rows = vec![[
        "TID".to_string(),
        "NAME".into(),
        "STATE".into(),
        "CPU".into(),
        "MAY USE".into(),
        "CORE".into(),
        "PACKAGE".into(),
        "NUMA".into(),
    ]];
    for t in &p.threads {
        rows.push([
            t.tid.to_string(),
            t.name.clone(),
            t.state.clone(),
            t.cpu.to_string(),
            t.mask.clone(),
            or_dash(t.core),
            or_dash(t.package),
            t.numa
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ]);
    }
    let head = format!(
        "PID {} ({}): {} thread(s) that may use CPUs {}\n",
        p.pid,
        p.name,
        p.threads.len(),
        masks.into_iter().collect::<Vec<_>>().join(" | ")
    );
    head + &columns(&rows)
}

/// One line a process: its threads, the CPUs they are on now, the masks they have.
fn process_table(ps: &[Process]) -> String {
    let mut rows = vec![[
        "PID".to_string(),
        "NAME".into(),
        "THREADS".into(),
        "ON CPUS".into(),
        "MAY USE".into(),
    ]];
    for p in ps {
        let on: autopin_topology::CpuSet = p.threads.iter().map(|t| t.cpu).collect();
        let masks: std::collections::BTreeSet<&str> =
            p.threads.iter().map(|t| t.mask.as_str()).collect();
        rows.push([
            p.pid.to_string(),
            p.name.clone(),
            p.threads.len().to_string(),
            on.to_list(),
            masks.into_iter().collect::<Vec<_>>().join(" | "),
        ]);
    }
    columns(&rows)
}

/// The ids (first column) right-aligned, the rest left-aligned.
fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    autopin_human::columns(rows, |c| c == 0)
}

pub fn run(args: Args) -> CmdResult {
    let m = args.machine.load()?;
    let shown: Vec<Process> = if let Some(pid) = args.pid {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|n| n.trim().to_string())
            .map_err(|_| {
                CliError::usage(format!(
                    "PID {pid}: no such process (or it is not visible here); `autopin show --all` lists yours"
                ))
            })?;
        vec![process(&m, pid, name).ok_or_else(|| {
            CliError::usage(format!(
                "PID {pid}: its threads cannot be read (it ended, or belongs to another user)"
            ))
        })?]
    } else {
        let found = match &args.job {
            Some(job) => processes_of_job(job),
            None => processes_of_user(rustix::process::getuid().as_raw()),
        };
        if found.is_empty() {
            if let Some(job) = &args.job {
                return Err(CliError::usage(format!(
                    "no process of Slurm job {job} is visible here (run it on the job's node, as the job's user)"
                )));
            }
        }
        found
            .into_iter()
            .filter_map(|(pid, name)| process(&m, pid, name))
            .collect()
    };
    if args.json {
        let doc =
            serde_json::to_string_pretty(&shown).map_err(|e| CliError::internal(e.to_string()))?;
        println!("{doc}");
    } else if args.pid.is_some() {
        print!("{}", thread_table(&shown[0]));
    } else {
        print!("{}", process_table(&shown));
    }
    Ok(0)
}
