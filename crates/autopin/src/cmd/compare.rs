//! `autopin compare`: run a program many times under several strategies and compare them
//! statistically. The experiment, statistics and exports live in `autopin-compare`; this
//! module parses arguments, validates everything before the first run, shows progress and
//! writes the results (also after an interrupt, with the runs completed so far).

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_compare::experiment::compile_metric;
use autopin_compare::report::{self, Document};
use autopin_compare::runner::{Interrupt, ProcessLauncher};
use autopin_compare::stats::Better;
use autopin_compare::{
    parse_strategy, Config, Event, Experiment, Frontend, MachineCheck, Setup, SummaryConfig,
};
use std::ffi::OsString;
use std::io::IsTerminal;
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
failed (nothing to compare), 2 for bad input, 130 when interrupted."
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

/// Exit code after an interrupt, as shells report SIGINT.
const EXIT_INTERRUPTED: i32 = 130;
/// Exit code when no run succeeded, so nothing could be compared.
const EXIT_ALL_FAILED: i32 = 1;

pub fn run(args: Args) -> CmdResult {
    let adaptive_max_runs = validate(&args)?;
    // Exports are checked before the first run: a bad path must not cost the experiment.
    crate::output::check_all_writable([
        &args.export_json,
        &args.export_csv,
        &args.export_markdown,
        &args.svg,
    ])?;
    let metric = match &args.metric {
        Some(p) => Some(compile_metric(p).map_err(CliError::usage)?),
        None => {
            if args.higher_is_better {
                return Err(CliError::usage(
                    "--higher-is-better needs --metric (wall time is always lower-is-better)",
                ));
            }
            None
        }
    };
    let machine = args.machine.load()?;
    let check = MachineCheck { machine: &machine };
    let (strategies, baseline) = strategies(&args, &check)?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::internal(format!("cannot find the autopin executable: {e}")))?;
    let front = Frontend {
        exe,
        machine_args: machine_args_to_forward(&args.machine),
    };
    let allowed = autopin_compare::PlacementCheck::allowed_cpus(&check);
    let seed = args.seed.unwrap_or_else(clock_seed);
    let better = if args.higher_is_better {
        Better::Higher
    } else {
        Better::Lower
    };
    let summary_cfg = SummaryConfig {
        alpha: args.alpha,
        better,
        include_failures: args.ignore_failure,
        bootstrap_resamples: args.bootstrap,
        seed,
        equivalence: args.equivalence,
        uses_metric: metric.is_some(),
    };
    let cfg = Config {
        runs: args.runs,
        warmup: args.warmup,
        seed,
        metric,
        summary: summary_cfg.clone(),
        adaptive_max_runs,
    };

    let interrupt = Interrupt::default();
    interrupt.install().map_err(CliError::internal)?;
    let mut launcher = ProcessLauncher {
        show_output: args.show_output,
        interrupt: interrupt.clone(),
    };
    let mut exp = Experiment::new(strategies, baseline);
    if exp.strategies.len() > 1 {
        warn_if_too_few_runs(adaptive_max_runs.unwrap_or(args.runs), args.alpha);
    }
    let setup = Setup {
        front: &front,
        program: &args.program,
        allowed_cpus: &allowed,
    };
    let mut progress = Progress::new((args.warmup + args.runs) * exp.strategies.len(), args.quiet);
    let outcome = exp.run(&setup, &cfg, &mut launcher, &interrupt, &mut |e| {
        progress.event(e)
    });
    progress.finish();

    let summaries = autopin_compare::summarize(&exp, &summary_cfg);
    let doc = Document {
        program: args
            .program
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        baseline: exp.strategies[exp.baseline].name.clone(),
        runs_per_strategy: args.runs,
        warmup_runs: exp.warmup_runs,
        rounds: exp.rounds,
        seed,
        alpha: args.alpha,
        value: if summary_cfg.uses_metric {
            "metric"
        } else {
            "wall_s"
        },
        better,
        metric_regex: args.metric.clone(),
        interrupted: exp.interrupted,
        strategies: &summaries,
    };
    // Exports first, so an interrupt or a launch failure still leaves the completed runs.
    write_exports(&args, &doc)?;
    print!("{}", report::to_table(&doc));
    if let Err(e) = outcome {
        return Err(CliError::usage(format!(
            "{e} (results of completed runs were written)"
        )));
    }
    if exp.interrupted {
        eprintln!(
            "autopin: compare interrupted; kept {} completed run(s)",
            summaries.iter().map(|s| s.runs.len()).sum::<usize>()
        );
        return Ok(EXIT_INTERRUPTED);
    }
    // Some failed runs are part of the result (the table counts them, and a strategy whose
    // runs all failed says so); no usable run at all means nothing was compared.
    let measured: usize = summaries.iter().map(|s| s.runs.len()).sum();
    if measured > 0 && summaries.iter().all(|s| s.n_used == 0) {
        eprintln!(
            "{}",
            all_failed_message(&exp, &summary_cfg, progress.last_failure.as_ref())
        );
        return Ok(EXIT_ALL_FAILED);
    }
    Ok(0)
}

/// "every run failed (6 runs of 2 strategies: exit status 3) ..." with the end of the
/// last failed run's stderr.
fn all_failed_message(
    exp: &Experiment,
    cfg: &SummaryConfig,
    last: Option<&(String, String)>,
) -> String {
    let runs: Vec<autopin_compare::RunRecord> = exp.records.iter().flatten().cloned().collect();
    let reasons = autopin_compare::summary::failure_reasons(&runs, cfg).join(", ");
    let strategies = match exp.strategies.len() {
        1 => "1 strategy".to_string(),
        n => format!("{n} strategies"),
    };
    let mut msg = format!(
        "autopin: every run failed ({} run(s) of {strategies}: {reasons}); nothing to compare",
        runs.len()
    );
    if !cfg.include_failures && reasons.contains("exit status") {
        msg.push_str(" (--ignore-failure measures runs that exit non-zero)");
    }
    if let Some((strategy, tail)) = last.filter(|(_, t)| !t.trim().is_empty()) {
        msg.push_str(&format!(
            "\nautopin: the last failed run (`{strategy}`) ended its stderr with:"
        ));
        for l in tail_lines(tail) {
            msg.push_str(&format!("\n    | {l}"));
        }
    }
    msg
}

/// The last three lines of a run's stderr, in order.
fn tail_lines(tail: &str) -> Vec<&str> {
    let mut v: Vec<&str> = tail.lines().rev().take(3).collect();
    v.reverse();
    v
}

/// Says before the first run when the planned runs cannot give any verdict: the rank
/// test's smallest p for k runs per side is 1/C(2k, k), which must be below alpha.
fn warn_if_too_few_runs(runs_per_strategy: usize, alpha: f64) {
    let needed = autopin_compare::stats::runs_needed_per_side(alpha);
    if runs_per_strategy < needed {
        let floor = autopin_compare::stats::rank_test_min_p(runs_per_strategy, runs_per_strategy);
        eprintln!(
            "autopin: note: with {runs_per_strategy} run(s) per strategy the rank test cannot reach p<{alpha} \
             (its smallest p is {}), so the verdicts will say \"too few runs to tell\"; \
             use --runs {needed} or more (or --adaptive)",
            autopin_human::probability(floor)
        );
    }
}

/// Everything is validated before the first run; returns the adaptive run limit.
fn validate(args: &Args) -> Result<Option<usize>, CliError> {
    if args.program.is_empty() {
        return Err(CliError::usage(
            "no program given; usage: autopin compare --runs RUNS --strategy S ... -- PROGRAM [ARGS]",
        ));
    }
    check_program(&args.program[0])?;
    if args.runs == 0 {
        return Err(CliError::usage(
            "--runs must be at least 1 (2 or more to test differences)",
        ));
    }
    if args.strategies.is_empty() {
        return Err(CliError::usage(
            "no strategies given; name at least one with --strategy (e.g. --strategy none --strategy 0,1)",
        ));
    }
    let inside_unit = |x: f64| x > 0.0 && x < 1.0;
    if !inside_unit(args.alpha) {
        return Err(CliError::usage(format!(
            "--alpha must be between 0 and 1, got {}",
            args.alpha
        )));
    }
    if !(0.0..1.0).contains(&args.equivalence) {
        return Err(CliError::usage(format!(
            "--equivalence must be in [0, 1), got {}",
            args.equivalence
        )));
    }
    let adaptive_max_runs = match (args.adaptive, args.max_runs) {
        (true, Some(m)) if m < args.runs => {
            return Err(CliError::usage(format!(
                "--max-runs {m} is below --runs {}",
                args.runs
            )))
        }
        (true, Some(m)) => Some(m),
        (true, None) => Some(args.runs.saturating_mul(5).max(30)),
        (false, Some(_)) => return Err(CliError::usage("--max-runs only applies with --adaptive")),
        (false, None) => None,
    };
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

    Ok(adaptive_max_runs)
}

/// The strategies to compare, each validated against the machine, and the baseline's index.
fn strategies(
    args: &Args,
    check: &MachineCheck,
) -> Result<(Vec<autopin_compare::Strategy>, usize), CliError> {
    let mut strategies = Vec::new();
    for s in &args.strategies {
        let st = parse_strategy(s, check).map_err(CliError::usage)?;
        if strategies
            .iter()
            .any(|x: &autopin_compare::Strategy| x.name == st.name)
        {
            return Err(CliError::usage(format!(
                "strategy `{}` is listed twice",
                st.name
            )));
        }
        strategies.push(st);
    }
    let baseline = match &args.baseline {
        None => 0,
        Some(b) => {
            let st = parse_strategy(b, check)
                .map_err(|e| CliError::usage(format!("--baseline: {e}")))?;
            match strategies.iter().position(|x| x.name == st.name) {
                Some(i) => i,
                None => {
                    strategies.insert(0, st);
                    0
                }
            }
        }
    };
    Ok((strategies, baseline))
}

fn write_exports(args: &Args, doc: &Document) -> Result<(), CliError> {
    let write = |path: &Option<PathBuf>, text: String| -> Result<(), CliError> {
        if let Some(p) = path {
            crate::output::write_atomically(p, text.as_bytes())?;
        }
        Ok(())
    };
    write(&args.export_json, report::to_json(doc))?;
    if args.export_csv.is_some() {
        write(
            &args.export_csv,
            report::to_csv(doc).map_err(CliError::internal)?,
        )?;
    }
    write(&args.export_markdown, report::to_markdown(doc))?;
    write(&args.svg, report::to_svg(doc))?;
    Ok(())
}

/// The machine-source options, passed on to `autopin pin` / `autopin run` so they see the
/// machine the strategies were validated against.
fn machine_args_to_forward(m: &MachineArgs) -> Vec<OsString> {
    let mut v = Vec::new();
    let mut add = |flag: &str, val: Option<OsString>| {
        if let Some(val) = val {
            v.push(OsString::from(flag));
            v.push(val);
        }
    };
    add("--sysfs-root", m.sysfs_root.clone().map(Into::into));
    add("--synthetic", m.synthetic.clone().map(Into::into));
    add("--load", m.load.clone().map(Into::into));
    add("--from-latency", m.from_latency.clone().map(Into::into));
    v
}

/// Checks that the program exists and is executable before any run, because under a pinning
/// strategy the failure would otherwise show up only as failed runs of `autopin pin`.
fn check_program(prog: &std::ffi::OsStr) -> Result<(), CliError> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let path = std::path::Path::new(prog);
    let found = if prog.as_encoded_bytes().contains(&b'/') {
        runnable(path)
    } else {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| runnable(&d.join(prog))))
    };
    if found {
        Ok(())
    } else {
        Err(CliError::usage(format!(
            "cannot start `{}`: no such executable{}",
            prog.to_string_lossy(),
            if path.components().count() > 1 {
                ""
            } else {
                " in PATH"
            }
        )))
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// Progress on stderr: a bar when stderr is a terminal, one plain line per run otherwise
/// (logs, CI), nothing with -q.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    /// Plain lines instead of a bar.
    plain: bool,
    planned: usize,
    started: usize,
    t0: std::time::Instant,
    /// The strategy and stderr tail of the last failed run, for the message when all failed.
    last_failure: Option<(String, String)>,
}

impl Progress {
    fn new(planned: usize, quiet: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (terminal && !quiet).then(|| {
            let b = indicatif::ProgressBar::new(planned as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} runs  {elapsed} (eta {eta})  {msg}",
            ) {
                b.set_style(style);
            }
            b
        });
        Progress {
            bar,
            plain: !terminal && !quiet,
            planned,
            started: 0,
            t0: std::time::Instant::now(),
            last_failure: None,
        }
    }

    /// "run 3/20: `0,1` (about 40 s left)": the estimate assumes the remaining runs take
    /// as long as the finished ones did on average.
    fn plain_line(&self, strategy: &str, warmup: bool) -> String {
        let done = self.started.saturating_sub(1);
        let eta = if done > 0 {
            let per_run = self.t0.elapsed().as_secs_f64() / done as f64;
            let left = per_run * (self.planned + 1 - self.started) as f64;
            format!(" (about {} left)", autopin_human::duration(left))
        } else {
            String::new()
        };
        format!(
            "autopin: run {}/{}: {}`{strategy}`{eta}",
            self.started,
            self.planned,
            if warmup { "warm-up of " } else { "" }
        )
    }

    fn say(&self, msg: String) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Start {
                strategy, warmup, ..
            } => {
                self.started += 1;
                if let Some(b) = &self.bar {
                    b.set_message(format!(
                        "{}{strategy}",
                        if warmup { "warm-up " } else { "" }
                    ));
                } else if self.plain {
                    eprintln!("{}", self.plain_line(strategy, warmup));
                }
            }
            Event::Finished {
                strategy,
                record,
                warmup,
                stderr_tail,
            } => {
                if let Some(b) = &self.bar {
                    b.inc(1);
                }
                if !record.success {
                    // Failures are always reported, bar or not; the end of stderr says why.
                    let status = match (record.exit_code, record.signal) {
                        (Some(c), _) => format!("exit status {c}"),
                        (_, Some(s)) => format!("signal {s}"),
                        _ => "unknown status".into(),
                    };
                    let mut msg = format!(
                        "autopin: {}run of `{strategy}` failed: {status}",
                        if warmup { "warm-up " } else { "" }
                    );
                    for l in tail_lines(stderr_tail) {
                        msg.push_str(&format!("\n    | {l}"));
                    }
                    self.say(msg);
                    self.last_failure = Some((strategy.to_string(), stderr_tail.to_string()));
                } else if let Some(e) = &record.metric_error {
                    self.say(format!(
                        "autopin: run of `{strategy}`: {e}; the run is left out of the statistics"
                    ));
                }
            }
            Event::Replanned { planned } => {
                self.planned = planned;
                if let Some(b) = &self.bar {
                    b.set_length(planned as u64);
                }
            }
        }
    }

    fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
