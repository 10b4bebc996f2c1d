//! `autopin simulate`: the real search on a simulated machine of any shape autopin reads
//! (`--sysfs-root`, `--load`, `--synthetic`), running a program model whose optimum is known;
//! prints, per seed and as medians, the chosen pinning, its rate ÷ the optimum, when it was
//! decided, what the search cost, the probes, and autopin's own CPU time per simulated tick.

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_engine::sim::models::MODELS;
use autopin_engine::sim::simulate::{simulate_reported, Outcome, Spec};

#[derive(clap::Args)]
#[command(
    after_help = "Program models (docs/simulate.md): bandwidth (NUMA nodes serve a fixed \
bandwidth), pairs (threads 2k and 2k+1 exchange data), smt (hardware threads compete for a core), \
barrier (the slowest thread sets the pace, other work on one CPU in four), phases (bandwidth and \
pairs in turn).\n\nExamples:\n  autopin simulate --sysfs-root tests/data/hwloc-linux/256ppc-8n8s4t.tar.bz2 --model bandwidth -n 64\n  \
autopin simulate --synthetic 'numa:4 package:1 l3:2 core:8 pu:2' --model pairs -n 32 --seeds 10 --json out.json"
)]
pub struct Args {
    /// The program model: bandwidth, pairs, smt, barrier or phases
    #[arg(long, value_name = "MODEL")]
    pub model: String,
    /// Threads of the simulated program (default: one per core of the allowed CPUs)
    #[arg(short = 'n', long, value_name = "N", value_parser = crate::number_args::count_at_least::<1>)]
    pub threads: Option<usize>,
    /// The first seed (noise and the search's draws)
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Seeds to run, from --seed on; the summary gives medians over them
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = crate::number_args::count_at_least::<1>)]
    pub seeds: usize,
    /// How long the simulated program runs, seconds (default 20; 40 for phases, whose two
    /// phases of 4 s come back in turn until each is decided)
    #[arg(long, value_name = "SEC", value_parser = crate::number_args::positive_seconds)]
    pub seconds: Option<f64>,
    /// Relative noise of each simulated reading
    #[arg(long, value_name = "FRACTION", default_value_t = 0.03, value_parser = crate::number_args::fraction)]
    pub noise: f64,
    /// Beside busy CPUs (the barrier model's neighbours), let the OS placement swing as the
    /// kernel's does: on the busy CPUs 1 s on average, then off them, spread like a
    /// pinning, 0.5 s (off by default: the OS placement stays where it spreads its threads)
    #[arg(long)]
    pub os_swing: bool,
    /// The program is an OpenMP program whose teams may change mid-run: the thread count
    /// joins the search (fewer threads on the free CPUs, as `autopin run --threads auto`
    /// offers them beside busy CPUs), and rate ÷ optimum is taken against the best of the
    /// counts offered
    #[arg(long)]
    pub openmp_team: bool,
    /// Write every seed's outcome and the medians as JSON here
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Change the race's settings, for exploring the search: `name=value` pairs apart by
    /// spaces, e.g. "tolerance=0.02 indistinct=0.05" (docs/search.md says what each does)
    #[arg(long, value_name = "SETTINGS")]
    pub race: Option<String>,
    /// Write the first seed's whole run report here (every probe, decision and tick, as
    /// `autopin run --report` writes it; `autopin report FILE` reads it back)
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub machine: MachineArgs,
}

pub fn run(args: Args) -> CmdResult {
    if !MODELS.contains(&args.model.as_str()) {
        return Err(CliError::usage(format!(
            "--model {:?}: no such program model; valid: {}",
            args.model,
            MODELS.join(", ")
        )));
    }
    let race = autopin_engine::strategy::RaceParams::with_settings(
        args.race.as_deref().unwrap_or_default(),
    )
    .map_err(|e| CliError::usage(format!("--race: {e}")))?;
    let machine = args.machine.load()?;
    for p in [&args.json, &args.report].into_iter().flatten() {
        autopin_files::write::check_writable(p)?;
    }
    let cores = {
        let v = autopin_engine::sim::SimTopo::from_machine(&machine);
        v.pus
            .iter()
            .map(|p| v.core_of[p])
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    let threads = args.threads.unwrap_or(cores.max(1));
    let seconds = args
        .seconds
        .unwrap_or(if args.model == "phases" { 40.0 } else { 20.0 });
    let mut outcomes = Vec::new();
    let mut cpu = Vec::new();
    for k in 0..args.seeds {
        let spec = Spec {
            model: args.model.clone(),
            threads,
            seed: args.seed + k as u64,
            seconds,
            noise: args.noise,
            race,
            os_swing: args.os_swing,
            openmp_team: args.openmp_team,
        };
        let before = autopin_os::sources::self_cpu_seconds();
        let (o, report) = simulate_reported(&machine, &spec).map_err(CliError::from)?;
        let spent = autopin_os::sources::self_cpu_seconds() - before;
        cpu.push(spent / o.ticks.max(1) as f64);
        println!("{}", line(&o, spent));
        if let (0, Some(p)) = (k, &args.report) {
            autopin_files::write::write_atomically(p, report.to_json().as_bytes())?;
        }
        outcomes.push(o);
    }
    let summary = Summary::of(&outcomes, &cpu);
    println!(
        "median over {} seed(s): rate ÷ optimum {:.3} (lowest {:.3}), decided at {}, lost {:.2} s, {:.0} probes, {:.3} ms of autopin's CPU a tick",
        outcomes.len(),
        summary.ratio,
        summary.lowest_ratio,
        summary
            .decided_at
            .map_or("never".into(), |t| format!("{t:.2} s")),
        summary.lost,
        summary.probes,
        1e3 * summary.cpu_per_tick
    );
    if let Some(p) = &args.json {
        let doc = serde_json::json!({
            "machine": machine.summary_lines(),
            "model": args.model,
            "threads": threads,
            "seconds": seconds,
            "noise": args.noise,
            "os_swing": args.os_swing,
            "openmp_team": args.openmp_team,
            "outcomes": outcomes,
            "median": summary,
        });
        let text =
            serde_json::to_string_pretty(&doc).map_err(|e| CliError::internal(e.to_string()))?;
        autopin_files::write::write_atomically(p, text.as_bytes())?;
    }
    Ok(0)
}

/// One seed's line.
fn line(o: &Outcome, cpu: f64) -> String {
    format!(
        "seed {}: {} — rate ÷ optimum {:.3}, decided at {}, lost {:.2} s, {} probes of {} candidates, {} ticks, autopin's CPU {:.3} s ({})",
        o.seed,
        o.decided.join(" / "),
        o.ratio,
        o.decided_at
            .map_or("never".into(), |t| format!("{t:.2} s")),
        o.lost,
        o.probes,
        o.candidates,
        o.ticks,
        cpu,
        o.reason
    )
}

/// Medians over the seeds.
#[derive(serde::Serialize)]
struct Summary {
    ratio: f64,
    lowest_ratio: f64,
    /// None when no seed decided.
    decided_at: Option<f64>,
    lost: f64,
    probes: f64,
    cpu_per_tick: f64,
}

impl Summary {
    fn of(o: &[Outcome], cpu: &[f64]) -> Summary {
        let med = |v: Vec<f64>| autopin_stats::median(&v).unwrap_or(0.0);
        let at: Vec<f64> = o.iter().filter_map(|x| x.decided_at).collect();
        Summary {
            ratio: med(o.iter().map(|x| x.ratio).collect()),
            lowest_ratio: o.iter().map(|x| x.ratio).fold(f64::INFINITY, f64::min),
            // A seed that never decided counts as deciding at the end.
            decided_at: (!at.is_empty()).then(|| {
                med(o
                    .iter()
                    .map(|x| x.decided_at.unwrap_or(f64::INFINITY))
                    .collect())
            }),
            lost: med(o.iter().map(|x| x.lost).collect()),
            probes: med(o.iter().map(|x| x.probes as f64).collect()),
            cpu_per_tick: med(cpu.to_vec()),
        }
    }
}
