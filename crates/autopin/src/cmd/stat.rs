//! `autopin stat`: why a program is slow where it runs. Runs a program (or watches a running
//! one) without moving any thread and prints the per-thread table and verdicts on stderr,
//! as `perf stat` does, so the program's own output stays alone on stdout. What happens
//! where: autopin-os takes the looks (`stat_source`) and counts the `-g` events
//! (`stat_counters`); autopin-stat's `Watch` keeps the looks and makes each report, its
//! figures first and then their verdicts. This file maps the arguments, starts or checks
//! the program, drives the loop and prints.

use crate::error::{CliError, CmdResult};
use crate::number_args::positive_seconds;
use autopin_os::stat_counters::{self, Counting};
use autopin_os::stat_source::{self, StatSource};
use autopin_os::stat_target::{StartError, StatTarget, Watched};
use autopin_stat::groups;
use autopin_stat::{Watch, WatchPlan};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
autopin stat -- ./solver input\n  \
autopin stat -p 4242 --duration 10\n  \
autopin stat --interval 1 --csv samples.csv --json stat.json -- ./omp_app\n  \
autopin stat -g list\n  \
autopin stat -g IPC,BRANCH -- ./solver input\n  \
autopin stat -g SW -p 4242 --duration 10\n\n\
-g counts an event group on every thread with perf_event_open (perf's event names) and \
adds a table per group: the counts and the metrics derived from them. Events this machine \
cannot count (no hardware PMU, perf_event_paranoid) are named once, with the reason; the \
rest is printed in full. The SW group needs no PMU.\n\n\
Everything before the program's name (or before `--`) is autopin's: a misspelt option is \
an error, never a program. A running process is watched with -p PID; a bare number where the \
program goes that names no executable is refused (exit 2) with the -p form it probably meant.")]
pub struct Args {
    /// Watch this running process instead of starting one
    #[arg(short = 'p', long, value_name = "PID")]
    pub pid: Option<i32>,
    /// How long to watch (default: until the program ends; 5 s for -p)
    #[arg(allow_negative_numbers = true, long, value_name = "SEC", value_parser = positive_seconds)]
    pub duration: Option<f64>,
    /// Also print a table every SEC seconds (like perf stat -I)
    #[arg(allow_negative_numbers = true, short = 'I', long, value_name = "SEC", value_parser = positive_seconds)]
    pub interval: Option<f64>,
    /// Write the final figures and verdicts as JSON
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write every sample (time, thread, CPU, CPU time, wait time) as CSV
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw the threads over time as SVG: the CPU each ran on, how much it ran and waited
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Count an event group on every thread (IPC, BRANCH, CACHE, SW, ...; repeat or
    /// comma-separate for several); `-g list` shows the groups, their events and metrics
    #[arg(short = 'g', long = "group", value_name = "GROUP")]
    pub groups: Vec<String>,
    /// The program and its arguments
    #[arg(trailing_var_arg = true, value_name = "PROGRAM")]
    pub command: Vec<String>,
}

/// How often threads are looked at: which CPUs they run on is only seen at a look.
const LOOK: f64 = 0.1;

/// Maps the arguments, drives the watch (autopin-stat's [`Watch`]) with the looks of the
/// OS layer's [`StatSource`] (and, with `-g`, its counters) until the program ends or the
/// duration is over, and prints each report.
pub fn run(args: Args) -> CmdResult {
    if args
        .groups
        .iter()
        .any(|g| g.trim().eq_ignore_ascii_case("list"))
    {
        print!("{}", groups::list_text());
        return Ok(0);
    }
    let groups = groups::select(&args.groups).map_err(|e| CliError::usage(e.to_string()))?;
    if let (None, Some(program)) = (args.pid, args.command.first()) {
        crate::program_arg::refuse_a_pid(
            std::path::Path::new("/proc"),
            program.as_ref(),
            std::env::var_os("PATH").as_deref(),
            |pid| format!("autopin stat -p {pid}"),
        )?;
    }
    let watched = match (args.pid, args.command.is_empty()) {
        (Some(_), false) => {
            return Err(CliError::usage(
                "give a program to start or -p PID to watch, not both",
            ))
        }
        (None, true) => {
            return Err(CliError::usage(
                "nothing to watch: give a program (autopin stat -- PROGRAM) or -p PID",
            ))
        }
        (Some(pid), true) => Watched::Process(pid),
        (None, false) => Watched::Command(&args.command),
    };
    for p in [&args.json, &args.csv, &args.svg].into_iter().flatten() {
        autopin_files::write::check_writable(p)?;
    }
    // Which events can be counted, and what counting costs, is found before the program
    // starts, so that the probes do not run beside it.
    let plan =
        (!groups.is_empty()).then(|| stat_counters::plan_for(args.pid.unwrap_or(0), &groups));
    let mut target = match StatTarget::start(watched) {
        Ok(t) => t,
        Err(e @ StartError::NoProcess(_)) => return Err(CliError::usage(e.to_string())),
        Err(StartError::Launch(e)) => {
            // As a shell would: 127 not found, 126 not runnable.
            say!("autopin: error: {e}");
            return Ok(e.exit_code());
        }
    };
    let pid = target.pid;
    let ctx = stat_source::context(pid, target.subject.clone());
    // Where the pages live is read only where there is more than one node to be on.
    let source = StatSource::new(pid, ctx.multi_node(), target.progress.take());
    let Some(first) = source.look(true) else {
        // The program ended (or the process vanished) before the first look.
        return match target.child.as_mut() {
            Some(c) => {
                let code = c.wait().map_err(|e| CliError::internal(e.to_string()))?;
                eprintln!("autopin stat: the program ended before its threads could be looked at");
                Ok(code)
            }
            None => Err(CliError::usage(format!(
                "-p {pid}: the process ended before it could be looked at"
            ))),
        };
    };
    let mut counting = plan.map(|plan| Counting::begin(plan, groups, &first, source.begun()));
    let mut watch = Watch::new(
        first,
        ctx,
        WatchPlan {
            interval: args.interval,
            duration: args.duration.or(target.child.is_none().then_some(5.0)),
            picture: args.svg.is_some(),
        },
    );
    let mut status = None;
    loop {
        std::thread::sleep(std::time::Duration::from_secs_f64(LOOK));
        if let Some(Ok(Some(code))) = target.child.as_mut().map(|c| c.try_wait()) {
            status = Some(code);
            break;
        }
        let moment = watch.at(source.elapsed());
        let Some(look) = source.look(moment.full_look()) else {
            break;
        };
        if let Some(c) = counting.as_mut() {
            c.follow(&look);
        }
        watch.record(look);
        if moment.interval_due {
            let mut i = watch.end_interval();
            if let Some(c) = counting.as_mut() {
                c.fill(&mut i.report, true);
            }
            eprint!(
                "autopin stat: {:.1}–{:.1} s\n{}",
                i.from,
                i.to,
                autopin_stat::table::render(&i.report)
            );
        }
        if moment.ending {
            break;
        }
    }
    if let Some(last) = watch.last_without_surroundings() {
        source.surround(last);
    }
    let mut report = watch.report();
    if let Some(c) = counting.as_mut() {
        c.fill(&mut report, false);
    }
    eprint!("{}", autopin_stat::table::render(&report));
    if let Some(missing) = &report.counters_missing {
        // Once, after the last table: what was not counted, and why.
        eprint!("{}", groups::missing_text(missing));
    }
    if let Some(o) = report.counting_overhead.filter(|o| *o > 0.01) {
        eprintln!(
            "warning: counting per thread may have slowed the program by ~{:.1}% (frequent context switches); count fewer groups, or none",
            100.0 * o
        );
    }
    // The files asked for: JSON figures and verdicts, CSV samples, the SVG picture.
    use std::borrow::Cow;
    let json = match &args.json {
        Some(_) => Some(Cow::Owned(
            serde_json::to_string_pretty(&report).map_err(|e| CliError::internal(e.to_string()))?,
        )),
        None => None,
    };
    let outputs = [
        (&args.json, json),
        (
            &args.csv,
            args.csv.as_ref().map(|_| Cow::Borrowed(watch.csv())),
        ),
        (
            &args.svg,
            args.svg
                .as_ref()
                .and_then(|_| watch.picture(&report))
                .map(Cow::Owned),
        ),
    ];
    let written = outputs
        .iter()
        .filter_map(|(path, text)| Some((path.as_ref()?, text.as_ref()?)))
        .try_for_each(|(path, text)| autopin_files::write::write_atomically(path, text.as_bytes()))
        .map_err(CliError::from);
    let code = match (status, target.child.as_mut()) {
        (Some(code), _) => code,
        // Watched for --duration (or its threads are gone): the program goes on to its
        // end, and its status is the result.
        (None, Some(c)) => c.wait().map_err(|e| CliError::internal(e.to_string()))?,
        // A watched process is not ours: a file that could not be written is the result.
        (None, None) => return written.map(|()| 0),
    };
    // A program stat started ran: its exit status is the result even when a file could
    // not be written (which is said).
    if let Err(e) = written {
        say!("autopin: error: {e}");
    }
    Ok(code)
}
