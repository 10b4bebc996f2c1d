//! `autopin report --merge FILES -o job.json [--svg job.svg]`: the ranks' reports of a job
//! combined (engine's `job_report::merge`), with the per-node table of decisions on stdout.

use crate::error::{CliError, CmdResult};
use autopin_engine::job_report;
use autopin_engine::report::Report;
use std::path::{Path, PathBuf};

pub fn run(files: &[PathBuf], out: Option<&Path>, svg: Option<&Path>) -> CmdResult {
    let mut inputs = Vec::new();
    for f in files {
        let text = autopin_files::read_to_string_bounded(f, autopin_files::MAX_INPUT)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", f.display())))?;
        let r = Report::from_json(&text).map_err(|e| {
            CliError::usage(format!(
                "{}:{}:{}: not an autopin report: {e}",
                f.display(),
                e.line(),
                e.column()
            ))
        })?;
        inputs.push((f.display().to_string(), r));
    }
    let job = job_report::merge(&inputs)?;
    if let Some(o) = out {
        let text =
            serde_json::to_string_pretty(&job).map_err(|e| CliError::internal(e.to_string()))?;
        autopin_files::write::write_atomically(o, text.as_bytes())?;
    }
    if let Some(s) = svg {
        autopin_files::write::write_atomically(s, job.svg().as_bytes())?;
    }
    for l in job.table() {
        println!("{l}");
    }
    Ok(0)
}
