//! `autopin report`: draw or summarize a report written by `autopin run --report`.

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin report` is not built yet"))
}
