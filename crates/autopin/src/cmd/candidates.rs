//! `autopin candidates`: list the distinct candidate pinnings for N threads.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin candidates` is not built yet"))
}
