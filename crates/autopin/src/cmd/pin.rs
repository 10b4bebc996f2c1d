//! `autopin pin`: run a program with its threads pinned at birth.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin pin` is not built yet"))
}
