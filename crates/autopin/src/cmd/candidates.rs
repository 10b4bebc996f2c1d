//! `autopin candidates`: list the distinct candidate pinnings for N threads, one per symmetry
//! class of the machine, most different first.

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_placement::{candidates, count_classes, CandidateOptions, CpuList};

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  autopin candidates -n 4\n  \
autopin candidates -n 8 --max-candidates 0 --sysfs-root dump/\n  \
autopin candidates -n 2 --unpinned --json")]
pub struct Args {
    /// Number of threads
    #[arg(short = 'n', long, value_name = "N", value_parser = crate::number_args::count_at_least::<1>)]
    pub threads: usize,
    /// At most this many pinned candidates (0: all classes); `--max` is the old spelling
    #[arg(
        long = "max-candidates",
        alias = "max",
        value_name = "K",
        default_value_t = 16
    )]
    pub max: usize,
    /// Also list "unpinned (OS decides)", first
    #[arg(long)]
    pub unpinned: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// JSON on stdout (the same as --format json)
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Say on stderr which launcher (Slurm, Open MPI, MPICH) was detected
    #[arg(short = 'v', long)]
    pub verbose: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

pub fn run(mut args: Args) -> CmdResult {
    if args.json {
        args.format = Format::Json;
    }
    let m = args.machine.load()?;
    if args.verbose {
        say!(
            "autopin: launcher: {}",
            autopin_cluster::job_launcher::from_process()
        );
    }
    let opts = CandidateOptions {
        max: if args.max == 0 { None } else { Some(args.max) },
        include_unpinned: args.unpinned,
    };
    let list = candidates(&m, args.threads, &opts);
    match args.format {
        Format::Json => {
            let text = serde_json::to_string_pretty(&list)
                .map_err(|e| CliError::internal(e.to_string()))?;
            println!("{text}");
        }
        Format::Text => {
            let total = count_classes(&m, args.threads);
            let pinned = list.iter().filter(|c| !c.is_unpinned()).count();
            if total > autopin_placement::EXACT_LIMIT {
                say!(
                    "{}",
                    autopin_human::wrap(
                        &format!(
                            "note: about {} classes exist for {}; listing the even ones (threads split evenly at every level)",
                            autopin_human::number(total),
                            autopin_human::plural(args.threads as u64, "thread", "threads")
                        ),
                        100,
                        "  "
                    )
                );
            } else if total > 0.0 {
                say!(
                    "{} for {}; showing {pinned}",
                    autopin_human::plural(total as u64, "class", "classes"),
                    autopin_human::plural(args.threads as u64, "thread", "threads")
                );
            }
            for (i, c) in list.iter().enumerate() {
                if c.is_unpinned() {
                    println!("{i:>3}  {:<24} {}", "-", c.description);
                } else {
                    println!(
                        "{i:>3}  {:<24} {}",
                        CpuList(c.cpus().to_vec()).to_list(),
                        c.description
                    );
                }
            }
        }
    }
    Ok(0)
}
