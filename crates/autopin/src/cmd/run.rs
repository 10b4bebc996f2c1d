//! `autopin run`: run a program, probe candidate pinnings with counters, keep the best.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin run` is not built yet"))
}
