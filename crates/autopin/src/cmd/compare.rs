//! `autopin compare`: run a program many times under several strategies and compare them
//! statistically. The plan's validation, the experiment, its statistics, exports and exit
//! policy live in `autopin-compare`; this module maps arguments to a `Request`, shows
//! progress and writes the results (also after an interrupt, with the runs completed so far).

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_compare::report::{self, Document};
use autopin_compare::runner::{Interrupt, ProcessRunner};
use autopin_compare::{compare, CompareError, ComparePlan, Frontend, MachineCheck, Request, Setup};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    after_help = "Strategies: none (the OS decides), a pin expression or CPU list (0,1  S0:0-3  E:N:4), \
a policy (compact, scatter, balanced, cores, CON_CORE, ...), SHARING:matrix.txt (LP_COMPACT, LP_SCATTER, GP, LPGP, GPLP), \
random (a fresh random pinning per run) or autopin (the optimizer, `autopin run`).\n\
Runs are interleaved in a random order per round. Results go to stdout; progress, failures and \
--show-output to stderr. Every strategy, none included, starts through `autopin pin` (none as \
`pin --os-decides`), so the few ms of start-up are the same for all and cancel.\n\n\
Examples:\n  autopin compare --runs 10 --strategy none --strategy compact --strategy autopin -- ./app\n  \
autopin compare --strategy none --strategy S0:0-3 --metric 'Mop/s\\s*=\\s*([0-9.]+)' --higher-is-better -- ./bench\n  \
autopin compare --adaptive --strategy none --strategy 0,1 --export-json cmp.json --svg cmp.svg -- ./app\n\n\
Verdicts need both one-sided tests below --alpha. With too few runs the rank test cannot get \
there (3 per side: its smallest p is 1/20 = 0.05), and the verdict says \"too few runs to tell\" \
and how many are needed instead of claiming no difference.\n\
Exit status: 0 when the comparison ran (failed runs are counted and noted), 1 when every run \
failed (nothing to compare), 2 for bad input, 127/126 when the program is missing / not \
executable (as a shell says it), 130 when interrupted."
)]
pub struct Args {
    /// Measured runs per strategy (`-n` is the old spelling; elsewhere -n is a thread count)
    #[arg(
        short = 'r',
        long = "runs",
        short_alias = 'n',
        value_name = "RUNS",
        default_value_t = 10
    )]
    pub runs: usize,
    /// A strategy to compare (repeat the option; values may contain commas)
    #[arg(long = "strategy", short_alias = 's', value_name = "S")]
    pub strategies: Vec<String>,
    /// The strategy the others are compared with (default: the first); added if not listed
    #[arg(long, value_name = "S")]
    pub baseline: Option<String>,
    /// Warm-up rounds (each strategy once per round) run before measuring and not counted
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub warmup: usize,
    /// Seed for the run order, random pinnings and bootstrap (default: from the clock; recorded)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Compare a number the program prints instead of wall time: the first capture group of
    /// this regex on its stdout, e.g. 'Mop/s total\s*=\s*([0-9.]+)'
    #[arg(long, value_name = "REGEX")]
    pub metric: Option<String>,
    /// The metric is a rate: larger is better (default: smaller is better, like a time)
    #[arg(long)]
    pub higher_is_better: bool,
    /// Show the program's output (on stderr) instead of only capturing it
    #[arg(long)]
    pub show_output: bool,
    /// No progress on stderr (failed runs are still reported)
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Include runs that exited non-zero in the statistics
    #[arg(long)]
    pub ignore_failure: bool,
    /// Significance level of the one-sided tests
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Keep adding rounds until every comparison is decided (significant, or equivalent by
    /// the median-speedup interval) or --max-runs is reached
    #[arg(long)]
    pub adaptive: bool,
    /// Upper bound of runs per strategy in adaptive mode
    #[arg(long, value_name = "M")]
    pub max_runs: Option<usize>,
    /// Equivalence band of the median speedup for adaptive mode and verdicts (0.02 = ±2%)
    #[arg(long, default_value_t = 0.02, value_name = "FRACTION")]
    pub equivalence: f64,
    /// Bootstrap resamples for the speedup confidence intervals
    #[arg(long, default_value_t = 10_000)]
    pub bootstrap: usize,
    /// Write all runs and statistics as JSON
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Print all runs and statistics as JSON on stdout (the document --export-json writes);
    /// the table goes to stderr instead, unless -q
    #[arg(long)]
    pub json: bool,
    /// Write one CSV row per run
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Write the summary table as Markdown
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Draw box plots (one box per strategy, baseline highlighted) as SVG
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub machine: MachineArgs,
    /// The program and its arguments
    #[arg(last = true, value_name = "PROGRAM")]
    pub program: Vec<OsString>,
}

pub fn run(args: Args) -> CmdResult {
    check_export_dirs(&args)?;
    // Exports are checked before the first run: a bad path must not cost the experiment.
    crate::output::check_all_writable([
        &args.export_json,
        &args.export_csv,
        &args.export_markdown,
        &args.svg,
    ])?;
    let machine = args.machine.load_kept()?;
    let check = MachineCheck { machine: &machine };
    let plan = ComparePlan::new(request(&args), &check)?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::internal(format!("cannot find the autopin executable: {e}")))?;
    let front = Frontend {
        exe,
        machine_args: args.machine.to_forward(),
    };
    let allowed = autopin_compare::PlacementCheck::allowed_cpus(&check);
    let interrupt = Interrupt::default();
    interrupt.install()?;
    let mut runner = ProcessRunner {
        show_output: args.show_output,
        interrupt: interrupt.clone(),
    };
    if plan.strategies.len() > 1 {
        warn_if_too_few_runs(plan.max_runs(), args.alpha);
    }
    let setup = Setup {
        front: &front,
        program: &plan.program,
        allowed_cpus: &allowed,
    };
    let mut progress = crate::compare_progress::Progress::new(plan.planned_runs(), args.quiet);
    let comparison = compare(&plan, &setup, &mut runner, &interrupt, &mut |e| {
        progress.event(e)
    });
    progress.finish();
    // Exports first, so an interrupt or a launch failure still leaves the completed runs.
    let doc = comparison.document(&plan);
    write_exports(&args, &doc)?;
    if args.json {
        println!("{}", report::to_json(&doc).trim_end());
        if !args.quiet {
            let table = report::to_table(&doc);
            say!("{}", table.trim_end());
        }
    } else {
        print!("{}", report::to_table(&doc));
    }
    match comparison.verdict(&plan) {
        Ok(()) => Ok(0),
        Err(e) => {
            let kept = if matches!(e, CompareError::CannotStart(_)) {
                " (results of completed runs were written)"
            } else {
                ""
            };
            say!("autopin: {e}{kept}");
            Ok(e.exit_status())
        }
    }
}

/// The command line as the comparison's plain request.
fn request(a: &Args) -> Request {
    Request {
        program: a.program.clone(),
        strategies: a.strategies.clone(),
        baseline: a.baseline.clone(),
        runs: a.runs,
        warmup: a.warmup,
        seed: a.seed.unwrap_or_else(clock_seed),
        metric: a.metric.clone(),
        higher_is_better: a.higher_is_better,
        ignore_failure: a.ignore_failure,
        alpha: a.alpha,
        adaptive: a.adaptive,
        max_runs: a.max_runs,
        equivalence: a.equivalence,
        bootstrap: a.bootstrap,
    }
}

/// Says before the first run when the planned runs cannot give any verdict: the rank
/// test's smallest p for k runs per side is 1/C(2k, k), which must be below alpha.
fn warn_if_too_few_runs(runs_per_strategy: usize, alpha: f64) {
    let needed = autopin_compare::stats::runs_needed_per_side(alpha);
    if runs_per_strategy < needed {
        let floor = autopin_compare::stats::rank_test_min_p(runs_per_strategy, runs_per_strategy);
        say!(
            "autopin: note: with {runs_per_strategy} run(s) per strategy the rank test cannot reach p<{alpha} \
             (its smallest p is {}), so the verdicts will say \"too few runs to tell\"; \
             use --runs {needed} or more (or --adaptive)",
            autopin_human::probability(floor)
        );
    }
}

/// Every export's directory exists (said with the option's name).
fn check_export_dirs(args: &Args) -> Result<(), CliError> {
    for (flag, path) in [
        ("--export-json", &args.export_json),
        ("--export-csv", &args.export_csv),
        ("--export-markdown", &args.export_markdown),
        ("--svg", &args.svg),
    ] {
        if let Some(p) = path {
            let dir = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            if !dir.is_dir() {
                return Err(CliError::usage(format!(
                    "{flag} {}: directory {} does not exist",
                    p.display(),
                    dir.display()
                )));
            }
        }
    }
    Ok(())
}

fn write_exports(args: &Args, doc: &Document) -> Result<(), CliError> {
    let write = |path: &Option<PathBuf>, text: String| -> Result<(), CliError> {
        if let Some(p) = path {
            autopin_files::write::write_atomically(p, text.as_bytes())?;
        }
        Ok(())
    };
    write(&args.export_json, report::to_json(doc))?;
    if args.export_csv.is_some() {
        write(&args.export_csv, report::to_csv(doc)?)?;
    }
    write(&args.export_markdown, report::to_markdown(doc))?;
    write(&args.svg, report::to_svg(doc))?;
    Ok(())
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}
