//! `autopin cpus`: print the CPU list a likwid-style pin expression selects, in thread order.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin cpus` is not built yet"))
}
