//! `autopin doctor`: what works here and what does not, with the fix for each — hardware
//! counters and perf's paranoia, RAPL, NUMA and its balancing, the cgroup's CPU quota and
//! cpuset, SMT, Slurm/MPI, busy CPUs, the preload library, the decision store, the machine's
//! kept read.

use crate::doctor_checks::{checks, render, TriedHere};
use crate::error::{CliError, CmdResult};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  autopin doctor\n  autopin doctor --json")]
pub struct Args {
    /// Print JSON instead of the table
    #[arg(long)]
    pub json: bool,
    /// (tests) Read proc/ and sys/ below this directory; the live checks are skipped
    #[arg(long, value_name = "DIR", hide = true)]
    pub root: Option<PathBuf>,
}

/// Starts `true` with the preload library and AUTOPIN_CPUS: it loads, or ld.so says why not.
fn preload_loads() -> Result<(), String> {
    let lib = autopin_os::process::preload_library().map_err(|e| e.to_string())?;
    let cpu = autopin_topology::affinity::get(0)
        .ok()
        .and_then(|s| s.first())
        .unwrap_or(0);
    let out = std::process::Command::new("true")
        .env("LD_PRELOAD", &lib)
        .env("AUTOPIN_CPUS", cpu.to_string())
        .env("AUTOPIN_QUIET", "1")
        .output()
        .map_err(|e| format!("cannot start `true`: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() && err.is_empty() {
        Ok(())
    } else {
        Err(if err.is_empty() {
            format!("`true` exited with {}", out.status)
        } else {
            err
        })
    }
}

/// The decision store: where it is and how many decisions it holds.
fn memory_state() -> Result<String, String> {
    let Some(path) = autopin_memory::default_path() else {
        return Ok("off (AUTOPIN_MEMORY=off, or no home directory)".into());
    };
    if !path.exists() {
        return Ok(format!(
            "none yet; the first `autopin run` writes {}",
            path.display()
        ));
    }
    let store = autopin_memory::Store::open(&path).map_err(|e| e.to_string())?;
    let n = store.list().map_err(|e| e.to_string())?.len();
    Ok(format!("{n} decision(s) in {}", path.display()))
}

pub fn run(args: Args) -> CmdResult {
    let live = args.root.is_none();
    let root = args.root.unwrap_or_else(|| PathBuf::from("/"));
    if !root.join("proc").is_dir() && !live {
        return Err(CliError::usage(format!(
            "--root {}: no proc/ directory there",
            root.display()
        )));
    }
    let affinity = live
        .then(|| autopin_topology::affinity::get(0).ok())
        .flatten();
    let facts =
        autopin_os::doctor_facts::read(&root, affinity, std::time::Duration::from_millis(300));
    let tried = if live {
        TriedHere {
            preload: Some(preload_loads()),
            memory: Some(memory_state()),
            machine: Some(autopin_os::machine_cache::verify_live()),
        }
    } else {
        TriedHere::default()
    };
    let env = |k: &str| std::env::var(k).ok();
    let found = checks(&facts, &env, &tried);
    if args.json {
        let doc =
            serde_json::to_string_pretty(&found).map_err(|e| CliError::internal(e.to_string()))?;
        println!("{doc}");
    } else {
        print!("{}", render(&found));
    }
    Ok(0)
}
