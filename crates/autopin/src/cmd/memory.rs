//! `autopin memory`: look at, move and forget remembered decisions (the store `run` and
//! `attach` use; see crates/autopin-memory).

use crate::error::{CliError, CmdResult};
use autopin_memory::{MemoryError, Record, Selector, Store};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
autopin memory list\n  \
autopin memory show ./solver\n  \
autopin memory forget solver\n  \
autopin memory forget --pattern '/opt/old/*' --dry-run\n  \
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
    /// Every field of the decisions of one program (path or file name, exactly) or one key id
    Show {
        #[arg(value_name = "KEY|PROGRAM")]
        what: String,
        /// WHAT is a pattern (`*` any text, `?` one character) for the key id, the
        /// program's path or its file name
        #[arg(long)]
        pattern: bool,
    },
    /// Forget the decisions of one program (path or file name, exactly) or one key id;
    /// each is named as it goes
    Forget {
        #[arg(value_name = "PROGRAM|KEY", required_unless_present = "all")]
        what: Option<String>,
        /// Forget every decision
        #[arg(long, conflicts_with = "what")]
        all: bool,
        /// WHAT is a pattern (`*` any text, `?` one character) for the key id, the
        /// program's path or its file name; try it with --dry-run first
        #[arg(long, conflicts_with = "all")]
        pattern: bool,
        /// Name the decisions that would be forgotten, and forget none
        #[arg(long)]
        dry_run: bool,
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
        Action::Show { what, pattern } => {
            let found = selected(&store, &what, pattern)?;
            if found.is_empty() {
                return Err(none_found(&what, pattern, &path));
            }
            println!("{}", to_json(&found)?);
        }
        Action::Forget {
            what,
            all,
            pattern,
            dry_run,
        } => {
            let found = match &what {
                Some(w) if !all => selected(&store, w, pattern)?,
                _ => store.list().map_err(store_error)?,
            };
            if found.is_empty() && !all {
                return Err(none_found(what.as_deref().unwrap_or(""), pattern, &path));
            }
            let verb = if dry_run {
                "would forget"
            } else {
                "forgetting"
            };
            for r in &found {
                eprintln!(
                    "autopin: {verb} {} {} ({})",
                    r.id, r.key.program, r.pinning.label
                );
            }
            if dry_run {
                eprintln!(
                    "autopin: --dry-run: {} decision(s) named, none forgotten",
                    found.len()
                );
                return Ok(0);
            }
            let n = if all {
                // (Also the records this build cannot read, which `list` skips.)
                store.forget_all()
            } else {
                // (Its id, and its key's, should an older import have kept another.)
                let ids: Vec<String> = found
                    .iter()
                    .flat_map(|r| [r.id.clone(), r.key.id()])
                    .collect();
                store.forget_ids(&ids)
            }
            .map_err(store_error)?;
            eprintln!("autopin: forgot {n} decision(s)");
        }
        Action::Export { file } => {
            let all = store.list().map_err(store_error)?;
            autopin_files::write::write_atomically(&file, to_json(&all)?.as_bytes())?;
            eprintln!(
                "autopin: exported {} decision(s) to {}",
                all.len(),
                file.display()
            );
        }
        Action::Import { file } => {
            let text = autopin_files::read_to_string_bounded(&file, autopin_files::MAX_INPUT)
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

/// The records `what` names, the same way for `show` and `forget`: exactly (a key id, a
/// program's path or file name, or a path that resolves to the program), or with
/// `pattern` as a pattern ([`Selector::Pattern`]).
fn selected(store: &Store, what: &str, pattern: bool) -> Result<Vec<Record>, CliError> {
    let sel = if pattern {
        Selector::Pattern(what.to_string())
    } else {
        Selector::Exact(what.to_string())
    };
    // A path given as the user typed it (`./solver`) names the program it resolves to.
    let resolved = (!pattern)
        .then(|| std::fs::canonicalize(what).ok())
        .flatten()
        .map(|p| p.display().to_string());
    Ok(store
        .list()
        .map_err(store_error)?
        .into_iter()
        .filter(|r| r.selected_by(&sel) || resolved.as_deref() == Some(r.key.program.as_str()))
        .collect())
}

fn none_found(what: &str, pattern: bool, path: &std::path::Path) -> CliError {
    let hint = if pattern {
        "patterns: `*` any text, `?` one character, matched against the whole key id, program path or file name"
    } else {
        "names are exact: a key id, a program's path or file name; --pattern 'sol*' matches by pattern"
    };
    CliError::usage(format!(
        "no remembered decision for {what:?} in {} ({hint}; `autopin memory list` shows them)",
        path.display()
    ))
}

/// The PINNING column: the remembered pinning, or for a record that holds none (a program
/// that ended before any probe, whose record carries only a trial of fewer threads) what
/// it does hold, rather than the OS placement it is written with, which no run applies.
fn pinning_column(r: &Record) -> String {
    if !autopin_memory::policy::holds_no_pinning(r) {
        return r.pinning.label.clone();
    }
    match &r.team_trial {
        Some(t) => {
            let state = match t.state {
                autopin_memory::TrialState::Pending => "to try",
                autopin_memory::TrialState::Kept => "kept",
                autopin_memory::TrialState::Dropped => "tried and dropped",
            };
            format!("none yet; {} {state}", t.pinning.label)
        }
        None => "none yet".into(),
    }
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
            pinning_column(r),
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

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_memory::{
        DecisionKey, Outcome, RememberedPinning, TeamTrial, TrialState, WholeRun,
    };

    fn placeholder(state: TrialState) -> Record {
        Record {
            id: "k".into(),
            key: DecisionKey {
                program: "/usr/bin/msgmerge".into(),
                program_id: "x".into(),
                args: None,
                machine: "m".into(),
                cpus: "0-1".into(),
                threads: "2".into(),
                objective: "default".into(),
                share: None,
            },
            pinning: RememberedPinning {
                label: "unpinned (OS decides)".into(),
                cpus: None,
                team: None,
            },
            runner_up: None,
            rate: None,
            unit: "OpenMP team constructs/s".into(),
            outcome: Outcome::Unfinished,
            uses: 2,
            created: 0.0,
            updated: 0.0,
            phases: Vec::new(),
            source: None,
            busy: Some(vec![0]),
            team_trial: Some(TeamTrial {
                pinning: RememberedPinning {
                    label: "1 thread: 1".into(),
                    cpus: Some(vec![1]),
                    team: Some(1),
                },
                state,
                rate: None,
                baseline: None::<WholeRun>,
                held_to: None,
            }),
        }
    }

    /// A record that only carries a trial of fewer threads is listed as holding no pinning
    /// (no run applies its OS placement), with what became of the trial; a record of a
    /// measured decision is listed by its pinning.
    #[test]
    fn a_record_that_holds_no_pinning_is_listed_as_such() {
        let dropped = table(&[placeholder(TrialState::Dropped)]);
        assert!(
            dropped.contains("none yet; 1 thread: 1 tried and dropped"),
            "{dropped}"
        );
        assert!(!dropped.contains("unpinned (OS decides)"), "{dropped}");
        let pending = table(&[placeholder(TrialState::Pending)]);
        assert!(
            pending.contains("none yet; 1 thread: 1 to try"),
            "{pending}"
        );
        let mut decided = placeholder(TrialState::Dropped);
        decided.outcome = Outcome::New;
        decided.rate = Some(5.0);
        assert!(table(&[decided]).contains("unpinned (OS decides)"));
    }
}
