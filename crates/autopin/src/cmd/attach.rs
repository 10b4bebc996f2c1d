//! `autopin attach`: attach to a running process, probe candidate pinnings, keep the best.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin attach` is not built yet"))
}
