//! `autopin run`: run a program, probe candidate pinnings with counters, keep the best.
//! The options shared with `autopin attach` are [`EngineArgs`]; they become the engine's
//! `RunPlan`, which [`autopin_engine::run()`] carries out on the Linux platform; this module
//! prints and writes what comes back.

use crate::cmd::engine_args::{perf_sysfs, EngineArgs};
use crate::error::{CliError, CmdResult};
use crate::messages::Messages;
use autopin_engine::report::Report;
use autopin_engine::run::{RunEnv, RunSink, TargetSpec};
use autopin_engine::sensors::SystemClock;
use autopin_os::LinuxPinner;
use autopin_os::LinuxPlatform;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin run -- ./app --size 1000\n  autopin run --schedule '0,1;0,0' --report r.json -- ./omp_app\n  autopin run -n 4 --objective heartbeat --max-candidates 6 -- ./app\n\n\
Everything before the program's name (or before `--`) is autopin's: a misspelt option is an \
error, never a program; what follows the program's name is the program's own. A bare number \
where the program goes that names no executable is refused (exit 2): `autopin attach PID` \
optimizes a running process."
)]
pub struct Args {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The program and its arguments
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    pub command: Vec<String>,
}

pub fn run(args: Args) -> CmdResult {
    if let Some(program) = args.command.first() {
        crate::program_arg::refuse_a_pid(
            std::path::Path::new("/proc"),
            program.as_ref(),
            std::env::var_os("PATH").as_deref(),
            |pid| format!("autopin attach {pid}"),
        )?;
    }
    // This process becomes the keeper (see `autopin_os::keeper`) unless it is the engine a
    // keeper started, or the keeper is turned off. The arguments were checked above: a
    // usage error never starts an engine.
    match autopin_os::keeper::role() {
        autopin_os::keeper::Role::Keeper => {
            let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
            match std::env::current_exe().and_then(|exe| autopin_os::keeper::keep(&exe, &argv)) {
                Ok(autopin_os::keeper::Kept::Exit(code)) => return Ok(code),
                // This process is the engine now, forked by its keeper.
                Ok(autopin_os::keeper::Kept::Engine) => {}
                // No keeper could start (no socket, no executable): run as one process.
                Err(_) => {}
            }
        }
        autopin_os::keeper::Role::Foreign(v) => say!(
            "autopin: warning: {}={v} in your environment is ignored: autopin sets it for its own processes (AUTOPIN_KEEPER=off runs autopin run as one process)",
            autopin_os::keeper::ENV_VAR
        ),
        autopin_os::keeper::Role::Engine | autopin_os::keeper::Role::Alone => {}
    }
    execute(&args.engine, TargetSpec::Launch(args.command))
}

/// Runs the optimizer on `target` with these options: clap → plan → engine → outputs.
pub fn execute(a: &EngineArgs, target: TargetSpec) -> CmdResult {
    if !a.machine.is_live() {
        return Err(CliError::usage(
            "run/attach pin real threads: they need the live machine (drop --synthetic/--load/--sysfs-root/--from-latency)",
        ));
    }
    // What the options say, read and checked before anything starts.
    let request = a.request(target)?;
    let mut messages = Messages::stderr(request.quiet);
    // Cluster launches: this rank's share of the node, its output names, its partners. The
    // process's affinity is narrowed to the share here, before the target starts.
    let node = autopin_cluster::node::prepare(&request.node, request.plan.machine.clone())?;
    let mut plan = request.plan;
    node.share_plan(&mut plan);
    let files = node.output_paths(request.files)?;
    let place = &node.launch.place;
    messages.name_rank(place.rank, place.size);
    // A path that cannot be written is found now, before the program runs, not after.
    let kept = autopin_files::write::check_outputs(&files)?;
    let mut sink = Outputs {
        files,
        kept,
        messages,
    };
    if request.verbose {
        for l in &node.lines {
            sink.message(None, l);
        }
    }
    // Pin expressions of --candidates are read on the rank's share now, so a wrong one is
    // the first thing said (the engine would read them at its start, after the store).
    if let Some(resolved) = plan.with_listed_resolved(&mut sink)? {
        plan = resolved;
    }
    let memory =
        autopin_memory::RunMemory::open(request.memory, &plan, &mut sink, request.store_opening);
    memory.apply(&mut plan, &mut sink);
    let mut platform = LinuxPlatform::new(perf_sysfs())?;
    if let Ok(exe) = std::env::current_exe() {
        platform = platform.with_guardian(exe);
    }
    let mut report = autopin_engine::run(
        &plan,
        &mut RunEnv {
            clock: &mut SystemClock::default()
                .with_cpu_clock(autopin_os::sources::self_cpu_seconds),
            pinner: &LinuxPinner,
            platform: &mut platform,
            sink: &mut sink,
        },
    )?;
    // The program has ended: autopin's files go and the guardian is told it is done now, so
    // that it ends while the store and the report are written (reaped at autopin's end).
    drop(platform);
    memory.finish(&mut report, &mut sink);
    let mut failed = sink.write(&report, false);
    for line in report.summary_lines() {
        sink.message(None, &line);
    }
    // A program autopin started ran: its exit status is the result even when a report file
    // could not be written at the end (each failure is said, not made autopin's exit code).
    let last = match report.exit_status {
        Some(_) => None,
        None => failed.pop(),
    };
    for e in &failed {
        say!("autopin: error: {e}");
    }
    match (last, report.exit_status) {
        (Some(e), _) => Err(e),
        (None, status) => Ok(status.unwrap_or(0)),
    }
}

/// Progress on stderr (unless -q) and the report files (atomically).
struct Outputs {
    /// The report and the timeline file, as this rank names them.
    files: [Option<std::path::PathBuf>; 2],
    /// For each, whether it is kept until the report is final: a file that was there
    /// before the run (an earlier report) is never replaced by a checkpoint, nor is a path
    /// written in place (the program's stdout, a FIFO) given each checkpoint in turn.
    kept: [bool; 2],
    messages: Messages,
}

impl Outputs {
    /// Writes the report and the timeline; both are tried, and every failure comes back.
    /// `checkpoint`: a partial report, which is never written to a file `kept`.
    fn write(&self, r: &Report, checkpoint: bool) -> Vec<CliError> {
        let outputs = [
            (&self.files[0], self.kept[0], r.to_json()),
            (&self.files[1], self.kept[1], r.timeline_csv()),
        ];
        let mut failed = Vec::new();
        for (path, kept, text) in outputs {
            let Some(p) = path else { continue };
            if checkpoint && kept {
                continue;
            }
            if let Err(e) = autopin_files::write::write_atomically(p, text.as_bytes()) {
                failed.push(e.into());
            }
        }
        failed
    }
}

impl RunSink for Outputs {
    fn message(&mut self, at: Option<f64>, text: &str) {
        self.messages.say(at, text);
    }

    fn checkpoint(&mut self, report: &Report) {
        // A reader sees the search is running (or the partial report after a failure);
        // the final write reports errors.
        self.write(report, true);
    }
}
