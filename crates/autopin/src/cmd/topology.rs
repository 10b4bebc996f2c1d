//! `autopin topology`: show the machine's topology (tree, boxes, json, dot, svg).

use crate::error::{CliError, CmdResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> CmdResult {
    Err(CliError::internal("`autopin topology` is not built yet"))
}
