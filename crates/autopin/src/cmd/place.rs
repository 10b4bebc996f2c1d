//! `autopin place`: place N threads with a named policy (or a sharing-aware strategy with
//! `--sharing FILE`) and print the mapping thread → CPU with a summary of what it uses.

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_placement::{policy_pinning, sharing_pinning, summarize, CpuList, PlacementSummary};
use serde::Serialize;

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  autopin place -n 8 --policy scatter\n  \
autopin place -n 4 --policy CON_CORE --synthetic \"package:2 core:4 pu:2\"\n  \
autopin place --sharing LP_COMPACT:comm.csv --json")]
pub struct Args {
    /// Number of threads (with --sharing: taken from the matrix size)
    #[arg(
        short = 'n',
        long,
        value_name = "N",
        required_unless_present_any = ["sharing", "ranks"],
        value_parser = crate::number_args::count_at_least::<1>
    )]
    pub threads: Option<usize>,
    /// compact, scatter, balanced, cores, sequential, CON_HWC, CON_CORE_HWC, CON_CORE,
    /// BALANCE_HWC, BALANCE_CORE, RR_HWC, RR_CORE, RR_SCALE, POWER
    #[arg(value_hint = clap::ValueHint::Other, long, value_name = "P", required_unless_present_any = ["sharing", "ranks"])]
    pub policy: Option<String>,
    /// Split the node among N local ranks (packages/NUMA nodes, then L3, then cores) and
    /// print rank R's share; with --policy or --sharing, place the threads inside that share
    #[arg(long, value_name = "N", requires = "rank", value_parser = crate::number_args::count_at_least::<1>)]
    pub ranks: Option<usize>,
    /// Which rank's share (0-based), with --ranks
    #[arg(long, value_name = "R", requires = "ranks")]
    pub rank: Option<usize>,
    /// Sharing-aware placement from an N×N thread-sharing matrix (rows of numbers, whitespace
    /// or comma separated): LP_COMPACT:FILE, LP_SCATTER:FILE, GP:FILE, LPGP:FILE, GPLP:FILE
    #[arg(long, value_name = "STRATEGY:FILE")]
    pub sharing: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// JSON on stdout (the same as --format json)
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

#[derive(Serialize)]
struct Output<'a> {
    policy: &'a str,
    /// Thread `i` → `cpus[i]`.
    cpus: Vec<u32>,
    list: String,
    summary: PlacementSummary,
}

#[derive(Serialize)]
struct ShareOutput {
    ranks: usize,
    rank: usize,
    cpus: Vec<u32>,
    list: String,
}

pub fn run(mut args: Args) -> CmdResult {
    if args.json {
        args.format = Format::Json;
    }
    let mut m = args.machine.load()?;
    if let (Some(ranks), Some(rank)) = (args.ranks, args.rank) {
        let env = |k: &str| std::env::var(k).ok();
        let (share, gpu_line) = autopin_placement::rank_share_near_gpus(&m, ranks, rank, &env)
            .map_err(|e| CliError::usage(e.to_string()))?;
        if let Some(line) = gpu_line {
            eprintln!("autopin: {line}");
        }
        if args.policy.is_none() && args.sharing.is_none() {
            match args.format {
                Format::Json => {
                    let out = ShareOutput {
                        ranks,
                        rank,
                        cpus: share.iter().collect(),
                        list: share.to_string(),
                    };
                    let text = serde_json::to_string_pretty(&out)
                        .map_err(|e| CliError::internal(e.to_string()))?;
                    println!("{text}");
                }
                Format::Text => println!("rank {rank} of {ranks}: CPUs {share}"),
            }
            return Ok(0);
        }
        m = autopin_placement::restrict_to(&m, &share);
    }
    let cpus = match &args.sharing {
        Some(spec) => {
            let (strategy, path) = crate::sharing_arg::parse(spec, args.policy.as_deref())?;
            let path = &path;
            let cpus =
                sharing_pinning(&m, &strategy, path).map_err(|e| CliError::usage(e.to_string()))?;
            if let Some(n) = args.threads {
                if n != cpus.len() {
                    return Err(CliError::usage(format!(
                        "-n {n} does not match the {}×{} sharing matrix in {}",
                        cpus.len(),
                        cpus.len(),
                        path.display()
                    )));
                }
            }
            cpus
        }
        None => {
            let n = args
                .threads
                .ok_or_else(|| CliError::usage("give the number of threads with -n N"))?;
            let policy = args.policy.as_deref().unwrap_or("compact");
            policy_pinning(&m, policy, n).map_err(|e| CliError::usage(e.to_string()))?
        }
    };
    let summary = summarize(&m, &cpus);
    let policy = match (&args.sharing, &args.policy) {
        (Some(spec), p) => crate::sharing_arg::parse(spec, p.as_deref())?.0,
        (None, Some(p)) => p.clone(),
        (None, None) => "compact".into(),
    };
    match args.format {
        Format::Json => {
            let out = Output {
                policy: &policy,
                list: CpuList(cpus.clone()).to_list(),
                cpus,
                summary,
            };
            let text = serde_json::to_string_pretty(&out)
                .map_err(|e| CliError::internal(e.to_string()))?;
            println!("{text}");
        }
        Format::Text => {
            println!("policy {policy}: {}", CpuList(cpus.clone()));
            for (i, c) in cpus.iter().enumerate() {
                println!("thread {i:>3} -> CPU {c}");
            }
            for l in summary.lines() {
                println!("{l}");
            }
        }
    }
    Ok(0)
}
