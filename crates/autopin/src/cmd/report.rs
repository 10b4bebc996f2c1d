//! `autopin report`: draw or summarize a report written by `autopin run --report`.

use crate::error::{CliError, CmdResult};
use autopin_engine::report::{view, Report};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin report r.json\n  autopin report r.json --svg timeline.svg"
)]
pub struct Args {
    /// The JSON report
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Draw the timeline (rate over time, coloured by pinning) as SVG here
    #[arg(long, value_name = "OUT")]
    pub svg: Option<PathBuf>,
}

pub fn run(args: Args) -> CmdResult {
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", args.file.display())))?;
    let r = Report::from_json(&text).map_err(|e| {
        CliError::usage(format!(
            "{}:{}:{}: not an autopin report: {e}",
            args.file.display(),
            e.line(),
            e.column()
        ))
    })?;
    match &args.svg {
        Some(out) => {
            crate::output::write_atomic(out, view::svg(&r).as_bytes())
                .map_err(|e| CliError::internal(format!("writing {}: {e}", out.display())))?;
        }
        None => print!("{}", view::summary(&r)),
    }
    Ok(0)
}
