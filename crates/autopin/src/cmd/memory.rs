//! `autopin memory`: look at, move and forget remembered decisions (the store `run` and
//! `attach` use; see crates/autopin-memory).

use crate::error::{CliError, CmdResult};
use autopin_memory::{MemoryError, Record, Store};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
autopin memory list\n  \
autopin memory show ./solver\n  \
autopin memory forget solver\n  \
autopin memory export decisions.json && autopin memory --memory /shared/d.db import decisions.json")]
pub struct Args {
    /// The store (default: $AUTOPIN_MEMORY, else $XDG_STATE_HOME/autopin/decisions.db)
    #[arg(long = "memory", value_name = "PATH", global = true)]
    pub store: Option<PathBuf>,
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand)]
pub enum Action {
    /// A table of every remembered decision, most recent first
    List {
        /// JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Every field of the decisions of one program (path or file name) or one key id
    Show {
        #[arg(value_name = "KEY|PROGRAM")]
        what: String,
    },
    /// Forget the decisions of one program (path or file name) or one key id
    Forget {
        #[arg(value_name = "PROGRAM|KEY", required_unless_present = "all")]
        what: Option<String>,
        /// Forget every decision
        #[arg(long, conflicts_with = "what")]
        all: bool,
    },
    /// Write every decision to FILE as JSON (for identical nodes elsewhere)
    Export {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Keep every decision of FILE (an export)
    Import {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Print the store's path
    Path,
}

pub fn run(args: Args) -> CmdResult {
    let path = match args.store.clone() {
        Some(p) => p,
        None => autopin_memory::default_path()
            .ok_or_else(|| CliError::usage("no store: memory is off (AUTOPIN_MEMORY=off) or there is no HOME; give --memory PATH"))?,
    };
    if let Action::Path = args.action {
        println!("{}", path.display());
        return Ok(0);
    }
    let mut store = Store::open(&path).map_err(store_error)?;
    match args.action {
        Action::Path => unreachable!("answered above"),
        Action::List { json } => {
            let all = store.list().map_err(store_error)?;
            if json {
                println!("{}", to_json(&all)?);
            } else {
                print!("{}", table(&all));
            }
        }
        Action::Show { what } => {
            let found: Vec<Record> = store
                .list()
                .map_err(store_error)?
                .into_iter()
                .filter(|r| matches(r, &what))
                .collect();
            if found.is_empty() {
                return Err(CliError::usage(format!(
                    "no remembered decision for {what:?} in {} (`autopin memory list` shows them)",
                    path.display()
                )));
            }
            println!("{}", to_json(&found)?);
        }
        Action::Forget { what, all } => {
            let n = match (what, all) {
                (_, true) => store.forget_all(),
                (Some(w), false) => store.forget(&w),
                (None, false) => unreachable!("clap requires one"),
            }
            .map_err(store_error)?;
            eprintln!("autopin: forgot {n} decision(s)");
        }
        Action::Export { file } => {
            let all = store.list().map_err(store_error)?;
            crate::output::write_atomically(&file, to_json(&all)?.as_bytes())?;
            eprintln!(
                "autopin: exported {} decision(s) to {}",
                all.len(),
                file.display()
            );
        }
        Action::Import { file } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| CliError::usage(format!("{}: {e}", file.display())))?;
            let records: Vec<Record> = serde_json::from_str(&text).map_err(|e| {
                CliError::usage(format!(
                    "{}: not an export of `autopin memory export` ({e})",
                    file.display()
                ))
            })?;
            // Every record is one autopin could have written, or none is kept: a CPU outside
            // the record's own CPU set would pin a program where it may not run.
            for (i, r) in records.iter().enumerate() {
                r.check().map_err(|why| {
                    CliError::usage(format!(
                        "{}: record {} (program {}): {why}; nothing was imported",
                        file.display(),
                        i + 1,
                        r.key.program
                    ))
                })?;
            }
            let n = store.import(&records).map_err(store_error)?;
            eprintln!("autopin: imported {n} decision(s) into {}", path.display());
        }
    }
    Ok(0)
}

/// A store that is not one (damaged, of a newer schema, a path that cannot be one) is bad
/// input (exit 2); one that is locked, read-only or on a full file system is a failure of
/// the moment (exit 1).
fn store_error(e: MemoryError) -> CliError {
    let msg = format!("decision store: {e}");
    match e {
        MemoryError::Busy { .. } | MemoryError::ReadOnly { .. } | MemoryError::Full { .. } => {
            CliError::internal(msg)
        }
        _ => CliError::usage(msg),
    }
}

fn to_json(records: &[Record]) -> Result<String, CliError> {
    serde_json::to_string_pretty(records).map_err(|e| CliError::internal(e.to_string()))
}

/// A record named by its key id, its program's path or the program's file name.
fn matches(r: &Record, what: &str) -> bool {
    r.id == what
        || r.key.program == what
        || std::path::Path::new(&r.key.program)
            .file_name()
            .is_some_and(|n| n.to_string_lossy() == what)
        || std::fs::canonicalize(what).is_ok_and(|p| p.display().to_string() == r.key.program)
}

fn table(records: &[Record]) -> String {
    let mut rows = vec![[
        "KEY".to_string(),
        "PROGRAM".into(),
        "THREADS".into(),
        "CPUS".into(),
        "OBJECTIVE".into(),
        "PINNING".into(),
        "BUSY".into(),
        "LAST".into(),
        "USES".into(),
    ]];
    for r in records {
        rows.push([
            r.id.clone(),
            r.key.program.clone(),
            r.key.threads.clone(),
            r.key.cpus.clone(),
            r.key.objective.clone(),
            r.pinning.label.clone(),
            // The CPUs other work kept busy when it was decided: "-" none, "?" not watched.
            match r.busy.as_deref() {
                None => "?".into(),
                Some([]) => "-".into(),
                Some(cpus) => autopin_placement::cpu_text(cpus),
            },
            r.outcome.as_str().into(),
            r.uses.to_string(),
        ]);
    }
    autopin_human::columns(&rows, |_| false)
}
