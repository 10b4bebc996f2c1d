//! The `autopin` command line: parses arguments and hands each subcommand to its module.
//! Every module under `cmd/` owns its own `Args` and `run`; this file only dispatches.

#[macro_use]
mod messages;
mod cluster;
mod cmd;
mod compare_progress;
mod doctor_checks;
mod error;
mod machine_args;
mod mem_policy_args;
mod number_args;
mod output;
mod program_arg;
mod sharing_arg;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "autopin",
    version,
    about = "Find and apply the best thread-to-core pinning",
    long_about = None,
    after_help = "Examples:\n  autopin topology\n  autopin pin -c S0:0-3 -- ./app\n  autopin run --report r.json -- ./app\n\n\
Options are the same letter everywhere: -n threads, -c CPUs, -s skip mask, -q quiet, -o output file\n\
(compare still accepts its old spellings -n for -r/--runs and -s for --strategy, unlisted)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the machine's topology (tree, boxes, json, dot, svg)
    Topology(cmd::topology::Args),
    /// Print the CPU list a likwid-style pin expression selects, in thread order
    Cpus(cmd::cpus::Args),
    /// Place N threads with a named policy and print the mapping
    Place(cmd::place::Args),
    /// List the distinct candidate pinnings for N threads
    Candidates(cmd::candidates::Args),
    /// Run a program with its threads pinned at birth
    Pin(cmd::pin::Args),
    /// Run a program, probe candidate pinnings with counters, keep the best
    Run(cmd::run::Args),
    /// Attach to a running process, probe candidate pinnings, keep the best
    Attach(cmd::attach::Args),
    /// Draw or summarize a report written by `autopin run --report`
    Report(cmd::report::Args),
    /// Measure the machine: core-to-core latency, memory latency and bandwidth
    Measure(cmd::measure::Args),
    /// Run a program many times under several strategies and compare them statistically
    Compare(cmd::compare::Args),
    /// Why a program is slow where it runs: per-thread CPU share, waiting, CPUs, verdicts
    Stat(cmd::stat::Args),
    /// Where each thread of a running program is now: CPU, mask, core, package, NUMA node
    Show(cmd::show::Args),
    /// Live: the machine as its topology, every thread's CPU, wait and mask, NUMA pages, flags
    Top(cmd::top::Args),
    /// What works here and what does not (counters, RAPL, NUMA, cgroups, Slurm...), with fixes
    Doctor(cmd::doctor::Args),
    /// Remembered decisions: list, show, forget, export, import
    Memory(cmd::memory::Args),
    /// The search on a simulated machine of any shape, with a program model whose best is known
    Simulate(cmd::simulate::Args),
    /// Print shell completions (bash, zsh, fish, elvish, powershell)
    Completions(cmd::install::CompletionsArgs),
    /// Print the man page (roff)
    Man(cmd::install::ManArgs),
    /// (internal) The guardian `run`/`attach` start: restores the target if autopin dies
    #[command(hide = true)]
    Guard(cmd::guard::Args),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(mut e) => {
            // A program named without `--` before it (`autopin pin -c 0,1 ./app`): say where
            // it goes, with the user's own words.
            if e.kind() == clap::error::ErrorKind::UnknownArgument {
                if let Some(tip) = program_without_separator(&e) {
                    let _ = e.print();
                    eprintln!("\n{tip}");
                    std::process::exit(2);
                }
                unknown_option_is_not_the_program(&mut e);
            }
            // clap prints help/version with exit 0 and usage errors with exit 2.
            e.exit();
        }
    };
    // Commands that only print stop quietly when their reader has gone (`| head`).
    if matches!(
        cli.command,
        Command::Topology(_)
            | Command::Cpus(_)
            | Command::Place(_)
            | Command::Candidates(_)
            | Command::Report(_)
            | Command::Memory(_)
            | Command::Simulate(_)
            | Command::Show(_)
            | Command::Doctor(_)
            | Command::Completions(_)
            | Command::Man(_)
    ) {
        autopin_os::process::signals::end_quietly_on_closed_output();
    }
    let result = match cli.command {
        Command::Topology(a) => cmd::topology::run(a),
        Command::Cpus(a) => cmd::cpus::run(a),
        Command::Place(a) => cmd::place::run(a),
        Command::Candidates(a) => cmd::candidates::run(a),
        Command::Pin(a) => cmd::pin::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Attach(a) => cmd::attach::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Measure(a) => cmd::measure::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Memory(a) => cmd::memory::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Stat(a) => cmd::stat::run(a),
        Command::Show(a) => cmd::show::run(a),
        Command::Top(a) => cmd::top::run(a),
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Completions(a) => cmd::install::completions(a, Cli::command()),
        Command::Man(a) => cmd::install::man(a, Cli::command()),
        Command::Guard(a) => cmd::guard::run(a),
    };
    // A guardian told `done` has ended by now (it ended beside autopin's last work).
    autopin_os::guardian::reap_ended();
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            say!("autopin: error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}

/// The tip for an unexpected argument that is a program given without `--` before it.
fn program_without_separator(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    if arg.starts_with('-') {
        return None;
    }
    // (`std::env::args()` panics on an argument that is not UTF-8.)
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let at = args.iter().position(|a| a == arg)?;
    let sub = args.first()?;
    if !["pin", "run", "compare", "stat"].contains(&sub.as_str()) {
        return None;
    }
    let mut fixed = args[..at].to_vec();
    fixed.push("--".into());
    fixed.extend(args[at..].iter().cloned());
    Some(format!(
        "tip: the program goes after '--': autopin {}",
        fixed.join(" ")
    ))
}

/// A misspelt option of a subcommand that starts a program (`autopin run --budgt 5 -- app`)
/// or attaches to one. clap's tip "to pass '--budgt' as a value, use '-- --budgt'" would
/// make it the program itself (or a PID); it is replaced by where the program's own options
/// go, unless clap names the option that was meant ("a similar argument exists"), which
/// says enough.
fn unknown_option_is_not_the_program(e: &mut clap::Error) {
    use clap::builder::StyledStr;
    use clap::error::{ContextKind, ContextValue};
    let Some(sub) = std::env::args().nth(1) else {
        return;
    };
    let place = match sub.as_str() {
        "run" | "stat" => {
            "; the program's own options go after its name: autopin SUB [OPTIONS] [--] PROGRAM [ARGS]..."
        }
        "pin" | "compare" => {
            "; the program's own options go after '--' and its name: autopin SUB [OPTIONS] -- PROGRAM [ARGS]..."
        }
        "attach" => "",
        _ => return,
    };
    let mut tips: Vec<StyledStr> = match e.get(ContextKind::Suggested) {
        Some(ContextValue::StyledStrs(v)) => v
            .iter()
            .filter(|t| !t.to_string().starts_with("to pass '"))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    if e.get(ContextKind::SuggestedArg).is_none() && tips.is_empty() {
        let arg = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(a)) => a.clone(),
            _ => String::new(),
        };
        tips.push(StyledStr::from(format!(
            "'{arg}' is not an option of autopin {sub} ('autopin {sub} --help' lists them){}",
            place.replace("SUB", &sub)
        )));
    }
    e.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
}

#[cfg(test)]
mod tests {
    //! Property test of the command line: any argv, for every subcommand (nested ones too),
    //! built from the options clap knows and values that break parsers, parses or is
    //! refused; never a panic. (Running them: tests/fuzz.rs.)
    use super::*;
    use proptest::prelude::*;

    /// Each subcommand's path (`["memory", "forget"]`) and the spellings of its options.
    fn commands() -> &'static [(Vec<String>, Vec<String>)] {
        static ALL: std::sync::OnceLock<Vec<(Vec<String>, Vec<String>)>> =
            std::sync::OnceLock::new();
        ALL.get_or_init(|| {
            fn walk(
                c: &clap::Command,
                path: Vec<String>,
                out: &mut Vec<(Vec<String>, Vec<String>)>,
            ) {
                let mut opts = Vec::new();
                for a in c.get_arguments() {
                    if let Some(l) = a.get_long() {
                        opts.push(format!("--{l}"));
                    }
                    if let Some(s) = a.get_short() {
                        opts.push(format!("-{s}"));
                    }
                }
                out.push((path.clone(), opts));
                for s in c.get_subcommands() {
                    let mut p = path.clone();
                    p.push(s.get_name().to_string());
                    walk(s, p, out);
                }
            }
            let mut out = Vec::new();
            walk(&Cli::command(), Vec::new(), &mut out);
            out
        })
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(autopin_testkit::HOSTILE_WORDS).prop_map(String::from),
            "[0-9]{1,25}",
            "-?[0-9]{0,4}\\.?[0-9]{0,4}(e[+-]?[0-9]{1,4})?(ms|s|min)?",
            "[a-zA-Z0-9:,;@%./_-]{0,12}",
            "\\PC{0,6}",
        ]
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn any_argv_of_any_subcommand_parses_or_is_refused(
            which in any::<proptest::sample::Index>(),
            picks in proptest::collection::vec((any::<proptest::sample::Index>(), word(), any::<bool>()), 0..6),
            positional in proptest::collection::vec(word(), 0..3),
            program in any::<bool>(),
        ) {
            let all = commands();
            let (path, opts) = &all[which.index(all.len())];
            let mut argv = vec!["autopin".to_string()];
            argv.extend(path.iter().cloned());
            for (i, value, with_value) in picks {
                if !opts.is_empty() {
                    argv.push(opts[i.index(opts.len())].clone());
                }
                if with_value {
                    argv.push(value);
                }
            }
            argv.extend(positional);
            if program {
                argv.extend(["--".to_string(), "true".to_string()]);
            }
            let _ = Cli::try_parse_from(&argv);
        }
    }
}
