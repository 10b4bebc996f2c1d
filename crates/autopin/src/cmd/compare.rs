//! `autopin compare`: run a program many times under several strategies and compare them statistically.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin compare` is not built yet"))
}
