//! `autopin stat`: why a program is slow where it runs. Runs a program (or watches a running
//! one) without moving any thread, samples what Linux keeps per thread (autopin-os
//! `stat_source`), and prints the per-thread table and verdicts (autopin-stat) on stderr,
//! as `perf stat` does, so the program's own output stays alone on stdout.

use crate::error::{CliError, CmdResult};
use crate::number_args::positive_seconds;
use autopin_os::stat_counters::{self, CountingPlan, GroupCounters, Reading};
use autopin_os::stat_source::{
    neighbours, pages_by_node, process_of, process_tree, throttling, tree_samples, ProgressChannel,
};
use autopin_perf::PerfCounterSource;
use autopin_stat::groups::{self, Group};
use autopin_stat::{analyze, Context, CpusSeen, Snapshot, StatReport, Subject};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

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
    for p in [&args.json, &args.csv, &args.svg].into_iter().flatten() {
        crate::output::check_writable(p)?;
    }
    // Which events can be counted, and what counting costs, is found before the program
    // starts, so that the probes do not run beside it.
    let plan = (!groups.is_empty()).then(|| {
        let cpus: Vec<u32> = autopin_topology::affinity::get(args.pid.unwrap_or(0))
            .map(|m| m.iter().collect())
            .unwrap_or_default();
        stat_counters::plan(&groups::events_of(&groups), &cpus, true)
    });
    let mut target = match start(&args)? {
        Start::Watching(t) => t,
        Start::Failed(code) => return Ok(code),
    };
    let pid = target.pid;
    let ctx = context(pid, target.subject.clone());
    // Where the pages live is read only where there is more than one node to be on.
    let multi_node = ctx.multi_node();
    let me = std::process::id() as i32;
    // Not neighbours: autopin, the process watched (also when -p names one of its threads)
    // and every process it started, whose threads are watched with its own.
    let ours = || {
        let mut v = process_tree(pid);
        v.push(me);
        v.extend(process_of(pid));
        v
    };
    let begun = Instant::now();
    let look = |with_neighbours: bool| -> Option<Snapshot> {
        let threads = tree_samples(pid).ok().filter(|t| !t.is_empty())?;
        Some(Snapshot {
            t: begun.elapsed().as_secs_f64(),
            threads,
            neighbours: if with_neighbours {
                neighbours(&ours())
            } else {
                Vec::new()
            },
            throttling: throttling(pid),
            pages: if with_neighbours && multi_node {
                pages_by_node(pid)
            } else {
                Vec::new()
            },
            progress: target.progress.as_ref().map(ProgressChannel::read),
        })
    };
    let Some(first) = look(true) else {
        return finish_without_samples(target.child.as_mut(), pid);
    };
    let mut samples = Samples::new(args.svg.is_some());
    samples.record(&first);
    let mut counting = plan.map(|plan| Counting::begin(plan, groups, &first, begun));
    let duration = args.duration.or(target.child.is_none().then_some(5.0));
    let mut last = first.clone();
    let mut interval_from = first.clone();
    // Threads that ended between looks, at their last counters: over the whole watch, and
    // since the interval's start.
    let mut ended: Vec<autopin_stat::ThreadSample> = Vec::new();
    let mut ended_in_interval: Vec<autopin_stat::ThreadSample> = Vec::new();
    let mut status = None;
    let mut tally = args
        .interval
        .map(|_| autopin_stat::IntervalTally::default());
    loop {
        std::thread::sleep(std::time::Duration::from_secs_f64(LOOK));
        if let Some(Ok(Some(code))) = target.child.as_mut().map(|c| c.try_wait()) {
            status = Some(code);
            break;
        }
        let elapsed = begun.elapsed().as_secs_f64();
        let due = args
            .interval
            .is_some_and(|i| elapsed - interval_from.t >= i - 1e-9);
        let ending = duration.is_some_and(|d| elapsed >= d);
        let Some(mut s) = look(false) else { break };
        if due || ending {
            s.neighbours = neighbours(&ours());
            if multi_node {
                s.pages = pages_by_node(pid);
            }
        }
        samples.record(&s);
        if let Some(c) = counting.as_mut() {
            c.follow(&s);
        }
        let gone = s.ended_since(&last);
        ended.extend(gone.iter().cloned());
        ended_in_interval.extend(gone);
        last = s;
        if due {
            let upto = last.with_ended(&ended_in_interval);
            let mut report = analyze(&interval_from, &upto, &samples.seen, &ctx);
            if let Some(c) = counting.as_mut() {
                c.fill(&mut report, true);
            }
            if let Some(t) = tally.as_mut() {
                t.add(&report);
            }
            eprint!(
                "autopin stat: {:.1}–{:.1} s\n{}",
                interval_from.t,
                last.t,
                autopin_stat::table::render(&report)
            );
            interval_from = last.clone();
            ended_in_interval.clear();
        }
        if ending {
            break;
        }
    }
    if last.neighbours.is_empty() && last.t > first.t {
        // The program ended between looks: the neighbours are taken now (up to one look
        // later than the threads, so their share is overstated by at most that much).
        last.neighbours = neighbours(&ours());
        if multi_node {
            last.pages = pages_by_node(pid);
        }
    }
    let mut report = analyze(&first, &last.with_ended(&ended), &samples.seen, &ctx);
    if let Some(c) = counting.as_mut() {
        c.fill(&mut report, false);
    }
    report.intervals = tally.filter(|t| t.intervals > 0);
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
    let written = write_outputs(&args, &report, &samples, &ctx);
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

/// What `stat` watches: a process, the program when autopin started it, and its name.
struct Target {
    pid: i32,
    child: Option<autopin_os::process::Launched>,
    subject: Subject,
    /// The program's own progress (a program `stat` started).
    progress: Option<ProgressChannel>,
}

enum Start {
    Watching(Target),
    /// The program could not be started: the exit code a shell would give.
    Failed(i32),
}

/// Starts the program, or checks the process to watch.
fn start(args: &Args) -> Result<Start, CliError> {
    match (&args.pid, args.command.is_empty()) {
        (Some(_), false) => Err(CliError::usage(
            "give a program to start or -p PID to watch, not both",
        )),
        (None, true) => Err(CliError::usage(
            "nothing to watch: give a program (autopin stat -- PROGRAM) or -p PID",
        )),
        (Some(pid), true) => {
            if *pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(CliError::usage(format!("-p {pid}: no such process")));
            }
            Ok(Start::Watching(Target {
                pid: *pid,
                child: None,
                subject: Subject::Process(*pid),
                progress: None,
            }))
        }
        (None, false) => {
            let mut spec =
                autopin_os::process::LaunchSpec::new(&args.command[0], &args.command[1..]);
            spec.forward_signals = true;
            let progress = ProgressChannel::for_launch(&mut spec);
            match autopin_os::process::spawn(&spec) {
                Ok(l) => Ok(Start::Watching(Target {
                    pid: l.pid(),
                    child: Some(l),
                    subject: Subject::Command(args.command.clone()),
                    progress,
                })),
                Err(e) => {
                    // As a shell would: 127 not found, 126 not runnable.
                    say!("autopin: error: {e}");
                    Ok(Start::Failed(e.exit_code()))
                }
            }
        }
    }
}

/// What the verdicts need to know of the machine: the CPUs the process may use and the
/// core of each CPU.
fn context(pid: i32, subject: Subject) -> Context {
    let machine = autopin_topology::source::sysfs::read(std::path::Path::new("/")).ok();
    let allowed: Vec<u32> = autopin_topology::affinity::get(pid)
        .map(|m| m.iter().collect())
        .or_else(|_| {
            machine
                .as_ref()
                .map(|m| m.allowed_cpuset().iter().collect())
                .ok_or(())
        })
        .unwrap_or_default();
    let core_of: BTreeMap<u32, usize> = machine
        .as_ref()
        .map(|m| {
            m.flat_pus()
                .into_iter()
                .filter_map(|p| Some((p.os, p.core?)))
                .collect()
        })
        .unwrap_or_default();
    let node_of: BTreeMap<u32, u32> = machine
        .as_ref()
        .map(|m| {
            m.numa_nodes
                .iter()
                .flat_map(|n| n.cpuset.iter().map(move |c| (c, n.os_index)))
                .collect()
        })
        .unwrap_or_default();
    Context {
        allowed,
        core_of,
        subject,
        node_of,
    }
}

/// Everything seen at the looks: the CPUs each thread was on, the CSV rows, and (for the
/// picture, thinned on long runs) the looks themselves.
struct Samples {
    seen: CpusSeen,
    csv: String,
    looks: Option<Vec<Snapshot>>,
}

impl Samples {
    fn new(picture: bool) -> Self {
        Samples {
            seen: CpusSeen::default(),
            csv: String::from("t,tid,name,cpu,cpu_seconds,wait_seconds\n"),
            looks: picture.then(Vec::new),
        }
    }

    fn record(&mut self, s: &Snapshot) {
        self.seen.record(s);
        for t in &s.threads {
            self.csv.push_str(&format!(
                "{:.3},{},{},{},{:.6},{:.6}\n",
                s.t,
                t.tid,
                t.name.replace(',', " "),
                t.cpu,
                t.cpu_ns as f64 * 1e-9,
                t.wait_ns as f64 * 1e-9
            ));
        }
        if let Some(looks) = self.looks.as_mut() {
            looks.push(s.clone());
            autopin_stat::svg::thin(looks);
        }
    }
}

/// The files asked for: JSON figures and verdicts, CSV samples, the SVG picture.
fn write_outputs(
    args: &Args,
    report: &autopin_stat::StatReport,
    samples: &Samples,
    ctx: &Context,
) -> Result<(), CliError> {
    if let Some(p) = &args.json {
        let text =
            serde_json::to_string_pretty(report).map_err(|e| CliError::internal(e.to_string()))?;
        crate::output::write_atomically(p, text.as_bytes())?;
    }
    if let Some(p) = &args.csv {
        crate::output::write_atomically(p, samples.csv.as_bytes())?;
    }
    if let (Some(p), Some(looks)) = (&args.svg, &samples.looks) {
        let title = format!(
            "autopin stat: {}, {} thread(s) over {:.1} s",
            ctx.subject.name(),
            report.threads.len(),
            report.seconds
        );
        crate::output::write_atomically(p, autopin_stat::svg::render(looks, &title).as_bytes())?;
    }
    Ok(())
}

/// The program ended (or the process vanished) before the first look.
fn finish_without_samples(
    child: Option<&mut autopin_os::process::Launched>,
    pid: i32,
) -> CmdResult {
    match child {
        Some(c) => {
            let code = c.wait().map_err(|e| CliError::internal(e.to_string()))?;
            eprintln!("autopin stat: the program ended before its threads could be looked at");
            Ok(code)
        }
        None => Err(CliError::usage(format!(
            "-p {pid}: the process ended before it could be looked at"
        ))),
    }
}

/// `-g`: the groups' counters on the program's threads, and the reading each report
/// counts from.
struct Counting {
    plan: CountingPlan,
    groups: Vec<&'static Group>,
    counters: Option<GroupCounters<PerfCounterSource>>,
    begun: Instant,
    /// The reading at the first look, and at the start of the current interval.
    first: Reading,
    interval: Reading,
}

impl Counting {
    fn begin(
        plan: CountingPlan,
        groups: Vec<&'static Group>,
        first: &Snapshot,
        begun: Instant,
    ) -> Self {
        let mut c = Counting {
            counters: GroupCounters::for_plan(&plan),
            plan,
            groups,
            begun,
            first: Reading::default(),
            interval: Reading::default(),
        };
        c.follow(first);
        c.first = c.read();
        c.interval = c.first.clone();
        c
    }

    /// Counts the threads a look sees for the first time.
    fn follow(&mut self, look: &Snapshot) {
        if let Some(c) = self.counters.as_mut() {
            c.follow(look.threads.iter().map(|t| t.tid), look.t);
        }
    }

    fn read(&mut self) -> Reading {
        let t = self.begun.elapsed().as_secs_f64();
        match self.counters.as_mut() {
            Some(c) => c.read(t),
            None => Reading::empty(t),
        }
    }

    /// Puts the counts since the first look (or, for an interval, since the last interval)
    /// into `report`.
    fn fill(&mut self, report: &mut StatReport, interval: bool) {
        let now = self.read();
        let from = if interval {
            &self.interval
        } else {
            &self.first
        };
        let (counts, mut missing) = match &self.counters {
            Some(c) => (c.counts(from, &now), c.refused()),
            None => Default::default(),
        };
        missing.splice(0..0, self.plan.missing.iter().cloned());
        autopin_stat::counting::apply(report, &self.groups, &counts, missing);
        report.counting_mode = Some(self.plan.mode.clone());
        report.counting_overhead = self.plan.cost.as_ref().map(|cost| {
            let switches: u64 = report
                .threads
                .iter()
                .map(|t| t.voluntary_switches + t.involuntary_switches)
                .sum();
            let cpus: std::collections::BTreeSet<u32> =
                report.threads.iter().flat_map(|t| t.cpus.clone()).collect();
            cost.estimated_slowdown(switches as f64 / report.seconds.max(1e-9), cpus.len())
        });
        if interval {
            self.interval = now;
        }
    }
}
