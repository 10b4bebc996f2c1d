//! `autopin place`: place N threads with a named policy and print the mapping.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin place` is not built yet"))
}
