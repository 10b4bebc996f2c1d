//! `autopin measure`: measure the machine: core-to-core latency, memory latency and bandwidth.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin measure` is not built yet"))
}
