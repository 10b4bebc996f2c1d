//! `autopin pin`: run a program with its threads pinned at birth, like likwid-pin.
//!
//! The CPU list comes from a likwid-style expression (`-c`), a named policy (`--policy`)
//! or a sharing-aware strategy (`--sharing`). The preload library pins each thread from
//! inside the thread before the program's code runs; statically linked programs, which
//! LD_PRELOAD cannot reach, are pinned by polling /proc instead (with a warning).
//! Our own output goes to stderr only: the program's stdout is left untouched.

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_os::process::{
    self, elf, pin_by_polling, LaunchSpec, LinuxPinner, PinPlan, Pinner, ProcFs, SkipMask,
};
use autopin_topology::{CpuSet, Machine};
use std::ffi::OsString;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin pin -c 0,1,0,1 -- ./app\n  autopin pin -c S0:0-3 -s 0x1 -- ./omp_app\n  \
autopin pin --policy scatter -n 8 -- ./app\n  autopin pin -p\n\n\
The main thread gets the first CPU, the i-th thread the program creates gets entry i; the list \
wraps around when more threads are created. Until the program creates its first thread or \
enters its first OpenMP region, its main thread may use every CPU of the list, so that what it \
sizes itself by (nproc, omp_get_num_procs(), OpenMP's default team) is the whole list, as \
under taskset -c or likwid-pin -c. OMP_NUM_THREADS is set to the length of the list \
unless it is already set (as likwid-pin does)."
)]
pub struct Args {
    /// CPUs in thread order: a list (0,1,0,1 or 0-3) or a likwid-pin expression (S0:0-3, E:N:8, M:scatter); COUNT:EXPR also sets the OpenMP thread count (1:1 is one thread on CPU 1)
    #[arg(short = 'c', long = "cpus", value_name = "EXPR", conflicts_with_all = ["policy", "sharing"])]
    pub cpus: Option<String>,
    /// Place threads with a named policy (compact, scatter, balanced, ...)
    #[arg(value_hint = clap::ValueHint::Other, long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// Number of threads for --policy (default: as many as allowed CPUs)
    #[arg(short = 'n', long = "threads", value_name = "N", requires = "policy", value_parser = crate::number_args::count_at_least::<1>)]
    pub threads: Option<usize>,
    /// Sharing-aware placement from an n×n thread-sharing matrix, e.g. LP_COMPACT:comm.csv
    #[arg(long, value_name = "STRATEGY:FILE")]
    pub sharing: Option<String>,
    /// Skip mask in hex (likwid-pin -s): bit i set = the i-th created thread stays unpinned
    #[arg(short = 's', long = "skip", value_name = "HEX")]
    pub skip: Option<String>,
    /// Print the affinity domains and exit; with -c, print the selected CPU list instead
    #[arg(short = 'p', long = "print")]
    pub print: bool,
    /// Say on stderr what is being pinned where
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Start the program exactly as pin does (preload library, signal forwarding, exit
    /// status) but leave every thread where the OS puts it: the baseline `compare --strategy
    /// none` runs, so that start-up costs cancel between strategies
    #[arg(long, conflicts_with_all = ["cpus", "policy", "sharing", "skip", "print"])]
    pub os_decides: bool,
    /// Memory policy for the program (numactl's options)
    #[command(flatten)]
    pub mem_policy: crate::mem_policy_args::MemPolicyArgs,
    #[command(flatten)]
    pub machine: MachineArgs,
    /// The program and its arguments, after `--`
    #[arg(last = true, value_name = "PROGRAM")]
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> CmdResult {
    let machine = args.machine.load_kept()?;
    if args.print {
        return print(&args, &machine);
    }
    if args.os_decides {
        let mem = args.mem_policy.resolve(&machine)?;
        return launch_unpinned(&args, mem);
    }
    let (team, cpus) = select_cpus(&args, &machine)?.ok_or_else(|| {
        CliError::usage("say where to pin: -c EXPR, --policy P [-n N] or --sharing STRATEGY:FILE")
    })?;
    let skip = match &args.skip {
        Some(s) => SkipMask::parse(s).map_err(|e| CliError::usage(format!("-s: {e}")))?,
        None => SkipMask::none(),
    };
    let Some((program, prog_args)) = args.command.split_first() else {
        return Err(CliError::usage(
            "no program given: put it after `--`, e.g. autopin pin -c 0 -- ./app",
        ));
    };
    let pinner = LinuxPinner;
    let allowed = pinner
        .affinity(0)
        .map_err(|e| CliError::internal(format!("cannot read our own affinity: {e}")))?;
    check_allowed(&cpus, &allowed)?;
    let plan = PinPlan::new(cpus, skip)?;
    let mem = args.mem_policy.resolve(&machine)?;
    launch(
        &args,
        program,
        prog_args,
        (&plan, team),
        allowed,
        &pinner,
        mem,
    )
}

/// The thread count a `-c COUNT:EXPR` names (None without one) and the CPUs in thread order.
type Selection = (Option<usize>, Vec<u32>);

/// The selection of -c / --policy / --sharing, or None when none of them was given.
fn select_cpus(args: &Args, m: &Machine) -> Result<Option<Selection>, CliError> {
    let usage = |e: autopin_placement::PlacementError| CliError::usage(e.to_string());
    if let Some(expr) = &args.cpus {
        return autopin_placement::team_expression(m, expr)
            .map(Some)
            .map_err(usage);
    }
    if let Some(spec) = &args.sharing {
        let (strategy, file) = crate::sharing_arg::parse(spec, args.policy.as_deref())?;
        return autopin_placement::sharing_pinning(m, &strategy, &file)
            .map(|c| Some((None, c)))
            .map_err(usage);
    }
    if let Some(policy) = &args.policy {
        let n = args.threads.unwrap_or_else(|| m.allowed_cpuset().len());
        return autopin_placement::policy_pinning(m, policy, n)
            .map(|c| Some((None, c)))
            .map_err(usage);
    }
    Ok(None)
}

/// `-p`: like `likwid-pin -p`, the domains; with a selection, the physical CPU list.
fn print(args: &Args, m: &Machine) -> CmdResult {
    if !args.command.is_empty() {
        return Err(CliError::usage(
            "-p prints and exits; it does not run a program (drop -p or the program)",
        ));
    }
    match select_cpus(args, m)? {
        Some((_, cpus)) => {
            let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
            println!("{}", list.join(","));
        }
        None => print!("{}", autopin_placement::domains_listing(m)),
    }
    Ok(0)
}

fn check_allowed(cpus: &[u32], allowed: &CpuSet) -> Result<(), CliError> {
    if let Some(bad) = cpus.iter().find(|c| !allowed.contains(**c)) {
        return Err(CliError::usage(format!(
            "CPU {bad} is not available here (this process may use CPUs {}); \
             if the machine was given with --synthetic/--load, its CPU numbers must exist on this machine",
            allowed.to_list()
        )));
    }
    Ok(())
}

/// `--os-decides`: the same launch as a pinned run, with no pinning.
fn launch_unpinned(args: &Args, mem: Option<autopin_placement::MemPolicy>) -> CmdResult {
    let Some((program, prog_args)) = args.command.split_first() else {
        return Err(CliError::usage(
            "no program given: put it after `--`, e.g. autopin pin --os-decides -- ./app",
        ));
    };
    let mut spec = LaunchSpec::new(program.clone(), prog_args.iter().cloned());
    spec.forward_signals = true;
    spec.mem_policy = mem;
    // The library is loaded as in a pinned run (same start-up work); without a plan in the
    // environment it pins nothing.
    spec.preload = process::preload_library().ok();
    let mut launched = match process::spawn(&spec) {
        Ok(l) => l,
        Err(e) => {
            say!("autopin: error: {e}");
            return Ok(e.exit_code());
        }
    };
    launched
        .wait()
        .map_err(|e| CliError::internal(format!("waiting for {}: {e}", program.to_string_lossy())))
}

fn launch(
    args: &Args,
    program: &OsString,
    prog_args: &[OsString],
    (plan, team): (&PinPlan, Option<usize>),
    allowed: CpuSet,
    pinner: &dyn Pinner,
    mem: Option<autopin_placement::MemPolicy>,
) -> CmdResult {
    let name = program.to_string_lossy();
    let mut spec = LaunchSpec::new(program.clone(), prog_args.iter().cloned());
    spec.mem_policy = mem;
    spec.forward_signals = true;
    spec.env = plan.env();
    // The OpenMP thread count: COUNT of `-c COUNT:EXPR`, never above a count the user set;
    // without a count, the list's length unless the user set one (as likwid-pin does).
    let set = std::env::var("OMP_NUM_THREADS")
        .ok()
        .and_then(|v| v.split(',').next()?.trim().parse::<usize>().ok())
        .filter(|n| *n > 0);
    let count = match (team, set) {
        (Some(n), Some(s)) => Some(n.min(s)),
        (Some(n), None) => Some(n),
        (None, None) => Some(plan.cpus.len()),
        (None, Some(_)) => None,
    };
    if let Some(n) = count {
        spec.env
            .push(("OMP_NUM_THREADS".into(), n.to_string().into()));
    }
    // Decide how to reach the threads before starting: LD_PRELOAD, or /proc polling.
    let path_var = std::env::var_os("PATH");
    // When the program cannot be found or read, spawn reports that properly below.
    let preload_works =
        match elf::resolve_program(program, path_var.as_deref()).and_then(|p| elf::linkage(&p)) {
            Ok(linkage) => linkage.preload_works(),
            Err(_) => true,
        };
    let mut poll = !preload_works;
    if preload_works {
        match process::preload_library() {
            Ok(lib) => spec.preload = Some(lib),
            Err(e) => {
                say!("autopin: warning: cannot install the preload library ({e}); pinning {name}'s threads by polling /proc instead");
                poll = true;
            }
        }
    } else {
        say!(
            "autopin: warning: {name} is statically linked, so LD_PRELOAD cannot reach it; \
             pinning its threads by polling /proc (a new thread runs on its creator's CPU for up to 50 ms)"
        );
    }
    if poll {
        // Every thread then starts on the main thread's CPU until the poller moves it.
        spec.initial_affinity = Some(CpuSet::from_cpus([plan.main_cpu()]));
    }
    // GNU OpenMP creates no helper thread before its workers: a skip mask there leaves a
    // worker unpinned, free to run on the main thread's CPU (or any other).
    let gnu_openmp = !plan.skip.is_empty()
        && elf::resolve_program(program, path_var.as_deref())
            .and_then(|p| elf::needed_libraries(&p))
            .is_ok_and(|libs| libs.iter().any(|l| l.starts_with("libgomp.so")));
    if gnu_openmp {
        say!(
            "autopin: warning: skip mask {}: {}; {name} uses GNU OpenMP (libgomp), which creates no helper thread, so a skipped thread is a worker left unpinned: it may share CPU {} with the main thread. Drop -s {} (-s is for runtimes that create a helper thread first, such as older Intel OpenMP)",
            plan.skip,
            plan.first_threads(),
            plan.main_cpu(),
            plan.skip
        );
    } else if !plan.skip.is_empty() {
        // likwid-pin applies a skip mask without a word; which thread it leaves unpinned
        // depends on the runtime, so it is spelt out.
        say!(
            "autopin: note: skip mask {}: {}; a skipped thread keeps every CPU the program was given. Skipping suits a runtime's helper thread created before the workers (older Intel OpenMP); GNU OpenMP creates none, so there -s 0x1 leaves a worker unpinned",
            plan.skip,
            plan.first_threads()
        );
    }
    if args.verbose {
        say!(
            "autopin: launcher: {}",
            autopin_cluster::job_launcher::from_process()
        );
        let list: Vec<String> = plan.cpus.iter().map(u32::to_string).collect();
        let skip = if plan.skip.is_empty() {
            String::new()
        } else {
            format!(", skip mask {}", plan.skip)
        };
        let how = if poll { "by polling /proc" } else { "at birth" };
        say!(
            "autopin: pinning threads of {name} {how} to {}{skip}",
            list.join(",")
        );
    }
    let mut launched = match process::spawn(&spec) {
        Ok(l) => l,
        Err(e) => {
            say!("autopin: error: {e}");
            return Ok(e.exit_code());
        }
    };
    let waited = if poll {
        pin_by_polling(
            &mut launched,
            plan,
            allowed,
            pinner,
            &ProcFs::default(),
            |w| say!("autopin: warning: {w}"),
        )
    } else {
        launched.wait()
    };
    waited.map_err(|e| CliError::internal(format!("waiting for {name}: {e}")))
}
