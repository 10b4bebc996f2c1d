//! `autopin guard PID [MASK]` (hidden): the guardian `run` and `attach` start beside the
//! target; see `autopin_os::guardian`. Not for people: autopin starts it and talks to it
//! on its standard input.

use crate::error::{CliError, CmdResult};
use autopin_topology::CpuSet;

#[derive(clap::Args)]
pub struct Args {
    /// The process to guard (0: a program launched later, told on standard input)
    pid: i32,
    /// What its threads had before autopin touched them (default: their masks now)
    mask: Option<String>,
}

pub fn run(args: Args) -> CmdResult {
    let mask = match &args.mask {
        Some(m) => {
            Some(CpuSet::parse_list(m).map_err(|e| CliError::usage(format!("mask {m}: {e}")))?)
        }
        None => None,
    };
    Ok(autopin_os::guardian::serve(
        (args.pid > 0).then_some(args.pid),
        mask,
        std::io::stdin(),
        std::io::stdout(),
    ))
}
