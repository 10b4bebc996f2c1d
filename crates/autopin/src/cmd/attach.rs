//! `autopin attach`: attach to a running process, probe candidate pinnings, keep the best.
//! Threads are found by scanning /proc/PID/task; the options are those of `autopin run`.

use crate::cmd::engine_args::EngineArgs;
use crate::cmd::run::execute;
use crate::error::CmdResult;
use autopin_engine::run::TargetSpec;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin attach 12345\n  autopin attach --duration 60 --report r.json $(pidof app)\n  autopin attach --schedule '0,1;1,0' 12345"
)]
pub struct Args {
    /// The process to optimize
    #[arg(value_name = "PID")]
    pub pid: i32,
    /// Detach after this many seconds (default: stay until the process ends)
    #[arg(long, value_name = "SEC", value_parser = crate::number_args::positive_seconds)]
    pub duration: Option<f64>,
    /// Attach even to PID 1, a kernel thread, a zombie or autopin's own ancestors
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

pub fn run(args: Args) -> CmdResult {
    if args.engine.mem_policy.given() {
        return Err(crate::error::CliError::usage(
            "--membind/--interleave/--preferred/--localalloc set the policy of a program autopin starts (pin, run); for a running process use --migrate-memory",
        ));
    }
    if !args.force {
        let me = std::process::id() as i32;
        if let Some(why) =
            autopin_os::process::attach_guard::refuse(std::path::Path::new("/proc"), args.pid, me)
        {
            return Err(crate::error::CliError::usage(format!(
                "attach: {why}; not attaching (--force attaches anyway)"
            )));
        }
    }
    let status = execute(
        &args.engine,
        TargetSpec::Attach {
            pid: args.pid,
            duration: args.duration,
        },
    )?;
    // Stopped by a signal: autopin detached in order, and says which signal as a shell would.
    Ok(match autopin_os::process::signals::received() {
        Some(sig) => 128 + sig,
        None => status,
    })
}
