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
    #[arg(
        value_name = "FILE",
        required_unless_present = "merge",
        conflicts_with = "merge"
    )]
    pub file: Option<PathBuf>,
    /// Merge the ranks' reports of a job (e.g. autopin-7.*.json) into one job report
    #[arg(long, value_name = "FILES", num_args = 1..)]
    pub merge: Vec<PathBuf>,
    /// With --merge: write the job report (JSON) here
    #[arg(short = 'o', long, value_name = "OUT", requires = "merge")]
    pub out: Option<PathBuf>,
    /// Draw the timeline (rate over time, coloured by pinning) as SVG here
    #[arg(long, value_name = "OUT")]
    pub svg: Option<PathBuf>,
}

pub fn run(args: Args) -> CmdResult {
    let Some(file) = args.file.clone() else {
        return super::report_merge::run(&args.merge, args.out.as_deref(), args.svg.as_deref());
    };
    let args = Args {
        file: Some(file.clone()),
        ..args
    };
    let file = &file;
    let text = autopin_files::read_to_string_bounded(file, autopin_files::MAX_INPUT)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", file.display())))?;
    // A job report (`--merge -o job.json`) is shown as the merge showed it.
    if let Ok(job) = serde_json::from_str::<autopin_engine::job_report::JobReport>(&text) {
        match &args.svg {
            Some(out) => autopin_files::write::write_atomically(out, job.svg().as_bytes())?,
            None => {
                for l in job.table() {
                    println!("{l}");
                }
            }
        }
        return Ok(0);
    }
    let r = Report::from_json(&text).map_err(|e| {
        CliError::usage(format!(
            "{}:{}:{}: not an autopin report (nor a job report of `autopin report --merge`): {e}",
            file.display(),
            e.line(),
            e.column()
        ))
    })?;
    match &args.svg {
        Some(out) => {
            autopin_files::write::write_atomically(out, view::svg(&r).as_bytes())?;
        }
        None => print!("{}", view::summary(&r)),
    }
    Ok(0)
}
