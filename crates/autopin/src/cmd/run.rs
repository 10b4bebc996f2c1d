//! `autopin run`: run a program, probe candidate pinnings with counters, keep the best.
//! The options shared with `autopin attach` live here too ([`EngineArgs`], [`execute`]).

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_engine::candidate::Candidate;
use autopin_engine::driver::{Driver, DriverConfig};
use autopin_engine::live::{self, Lifetime, PerfMeter, ProcCpuMeter, ProcThreads};
use autopin_engine::os::{Meter, SystemClock, ThreadSource};
use autopin_engine::phase::WatchParams;
use autopin_engine::schedule;
use autopin_engine::session::{Session, SessionConfig};
use autopin_engine::strategy::{Autopin1, Autopin1Params, Fixed, Race, RaceParams};
use autopin_engine::target::{self, LaunchSpec, LinuxPinner, PinPlan, SkipMask};
use autopin_perf::{Objective, Sysfs};
use autopin_topology::Machine;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyName {
    /// Interleaved short probes with confidence-interval elimination (default)
    Race,
    /// The original autopin: i, then w + t per candidate in order
    Autopin1,
    /// Pin the first candidate and keep it
    Fixed,
}

/// Options shared by `run` and `attach`.
#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// How to search
    #[arg(long, value_enum, default_value = "race")]
    pub strategy: StrategyName,
    /// Candidate CPU lists in thread order, separated by ';' (repeatable): "0,1;0,0" or
    /// "2-3,6-7". Without it the SCHEDULE variable (paper form: "2367,0145", one digit per
    /// thread) is used; without both, candidates come from the topology.
    #[arg(long, value_name = "LISTS")]
    pub schedule: Vec<String>,
    /// Candidates as likwid-style pin expressions separated by ';': "S0:0-1;E:N:2:1:2"
    #[arg(long, value_name = "EXPRS")]
    pub candidates: Option<String>,
    /// Also probe "unpinned (OS decides)" with explicit candidate lists (it is included
    /// automatically with topology candidates)
    #[arg(long)]
    pub unpinned: bool,
    /// Leave "unpinned (OS decides)" out of topology candidates
    #[arg(long)]
    pub no_unpinned: bool,
    /// At most this many topology candidates
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub max_candidates: usize,
    /// Number of threads to plan topology candidates for (default: threads seen after init)
    #[arg(short = 'n', long, value_name = "N")]
    pub threads: Option<usize>,
    /// Event whose rate is the objective (default instructions:u)
    #[arg(short = 'e', long, value_name = "EVENT")]
    pub event: Option<String>,
    /// Objective: an event rate, a ratio/expression of events, heartbeat, energy or power
    #[arg(long, value_name = "OBJ")]
    pub objective: Option<String>,
    /// Init time before the first probe, seconds (autopin1 default: w; race: 0.5)
    #[arg(short = 'i', long, value_name = "SEC")]
    pub init: Option<f64>,
    /// Warm-up after each re-pin, seconds (autopin1 default: t/2; race: 0.2)
    #[arg(short = 'w', long, value_name = "SEC")]
    pub warmup: Option<f64>,
    /// Sample time per probe (autopin1, default 30) and period of the rate output after the
    /// decision, seconds
    #[arg(short = 't', long, value_name = "SEC")]
    pub sample: Option<f64>,
    /// The paper's parameters: t=30, w=15, i=15 (implies --strategy autopin1)
    #[arg(long)]
    pub paper: bool,
    /// Search time budget for race, seconds
    #[arg(long, value_name = "SEC", default_value_t = 20.0)]
    pub budget: f64,
    /// Race: first probe length, seconds (adapted to the noise afterwards)
    #[arg(long, value_name = "SEC", default_value_t = 0.5)]
    pub probe: f64,
    /// Sampling interval, seconds
    #[arg(long, value_name = "SEC", default_value_t = 0.1)]
    pub tick: f64,
    /// Disable the phase watch (no re-search after the decision)
    #[arg(long)]
    pub no_watch: bool,
    /// Phase watch: relative drop of the rate that counts (0.2 = 20%)
    #[arg(long, value_name = "FRACTION", default_value_t = 0.2)]
    pub watch_threshold: f64,
    /// Phase watch: how long the drop must last, seconds
    #[arg(long, value_name = "SEC", default_value_t = 3.0)]
    pub watch_duration: f64,
    /// On NUMA machines, migrate the target's pages to the chosen threads' nodes
    #[arg(long)]
    pub migrate_memory: bool,
    /// Memory policy for a program autopin starts (numactl's options)
    #[command(flatten)]
    pub memory: crate::mem_args::MemPolicyArgs,
    /// likwid-pin skip mask (hex): bit i set = the i-th created thread is not pinned
    #[arg(short = 's', long, value_name = "MASK")]
    pub skip: Option<String>,
    /// No progress output on stderr
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Write a JSON report here (atomically)
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write the timeline as CSV here
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Skip measuring the cost of per-thread counting (saves ~0.2 s at start)
    #[arg(long)]
    pub no_perturbation_estimate: bool,
    // Last, so `--help` lists the command's own options first.
    #[command(flatten)]
    pub machine: MachineArgs,
}

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin run -- ./app --size 1000\n  autopin run --schedule '0,1;0,0' --report r.json -- ./omp_app\n  autopin run -n 4 --objective heartbeat --max-candidates 6 -- ./app"
)]
pub struct Args {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The program and its arguments
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    pub command: Vec<String>,
}

pub fn run(args: Args) -> CmdResult {
    execute(&args.engine, Target::Launch(args.command))
}

/// What to optimize.
pub enum Target {
    Launch(Vec<String>),
    Attach { pid: i32, duration: Option<f64> },
}

/// Where the perf availability probe reads the paranoid level; `AUTOPIN_PERF_SYSFS_ROOT`
/// lets tests simulate e.g. `perf_event_paranoid=3` without root.
fn perf_sysfs() -> Sysfs {
    match std::env::var_os("AUTOPIN_PERF_SYSFS_ROOT") {
        Some(p) if !p.is_empty() => Sysfs::at(PathBuf::from(p)),
        _ => Sysfs::system(),
    }
}

fn parse_objective(a: &EngineArgs) -> Result<Objective, CliError> {
    let text = match (&a.objective, &a.event) {
        (Some(_), Some(_)) => {
            return Err(CliError::usage(
                "give either -e EVENT or --objective, not both",
            ));
        }
        (Some(o), None) => o.clone(),
        (None, Some(e)) => e.clone(),
        (None, None) => "instructions:u".to_string(),
    };
    Objective::parse_with(&text, &perf_sysfs())
        .map_err(|e| CliError::usage(format!("objective {text:?}: {e}")))
}

/// Explicit candidates from --schedule, SCHEDULE or --candidates (None = use the topology).
fn explicit_candidates(a: &EngineArgs, m: &Machine) -> Result<Option<Vec<Candidate>>, CliError> {
    let mut out = Vec::new();
    for s in &a.schedule {
        for cpus in schedule::parse_schedule_lists(s)
            .map_err(|e| CliError::usage(format!("--schedule: {e}")))?
        {
            out.push(Candidate::from_cpus(cpus));
        }
    }
    if let Some(exprs) = &a.candidates {
        for e in exprs.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let cpus = autopin_placement::pin_expression(m, e)
                .map_err(|err| CliError::usage(format!("--candidates {e:?}: {err}")))?;
            let mut c = Candidate::from_cpus(cpus);
            c.label = format!("{e} = {}", c.label);
            out.push(c);
        }
    }
    if out.is_empty() {
        if let Ok(s) = std::env::var("SCHEDULE") {
            if !s.trim().is_empty() {
                for cpus in schedule::parse_schedule_env(&s)
                    .map_err(|e| CliError::usage(format!("SCHEDULE: {e}")))?
                {
                    out.push(Candidate::from_cpus(cpus));
                }
            }
        }
    }
    if out.is_empty() {
        return Ok(None);
    }
    let allowed = m.allowed_cpuset();
    for c in &out {
        for cpu in c.cpus.iter().flatten() {
            if !allowed.contains(*cpu) {
                return Err(CliError::usage(format!(
                    "candidate {} uses CPU {cpu}, which is not allowed here (allowed: {allowed})",
                    c.label
                )));
            }
        }
    }
    if a.unpinned {
        out.push(Candidate::unpinned());
    }
    Ok(Some(out))
}

/// Topology candidates for n threads, from autopin-placement.
fn topology_candidates(m: &Machine, n: usize, a: &EngineArgs) -> Vec<Candidate> {
    let opts = autopin_placement::CandidateOptions {
        max: Some(a.max_candidates),
        include_unpinned: !a.no_unpinned,
    };
    let mut out: Vec<Candidate> = autopin_placement::candidates(m, n, &opts)
        .into_iter()
        .map(|c| {
            if c.unpinned {
                Candidate::unpinned()
            } else {
                let label = format!(
                    "{} ({})",
                    autopin_engine::candidate::cpu_text(&c.cpus),
                    c.description
                );
                Candidate::pinned(label, c.cpus)
            }
        })
        .collect();
    if !a.no_unpinned && !out.iter().any(|c| c.is_unpinned()) {
        out.push(Candidate::unpinned());
    }
    if out.iter().all(|c| c.is_unpinned()) {
        // Nothing from the placement crate (e.g. one CPU allowed): at least pin compactly.
        let cpus: Vec<u32> = m.allowed_cpuset().iter().take(n.max(1)).collect();
        if !cpus.is_empty() {
            out.insert(
                0,
                Candidate::pinned(
                    format!("{} (compact)", autopin_engine::candidate::cpu_text(&cpus)),
                    cpus,
                ),
            );
        }
    }
    out
}

fn make_strategy(a: &EngineArgs) -> (autopin_engine::session::StrategyFactory, f64) {
    let strategy = if a.paper {
        StrategyName::Autopin1
    } else {
        a.strategy
    };
    match strategy {
        StrategyName::Autopin1 => {
            let p = if a.paper && a.sample.is_none() && a.warmup.is_none() && a.init.is_none() {
                Autopin1Params::paper()
            } else {
                Autopin1Params::from_parts(a.sample, a.warmup, a.init)
            };
            (Box::new(move |n, _| Box::new(Autopin1::new(p, n))), p.init)
        }
        StrategyName::Fixed => (
            Box::new(|_, _| Box::new(Fixed::new(0))),
            a.init.unwrap_or(0.0),
        ),
        StrategyName::Race => {
            let base = RaceParams {
                warmup: a.warmup.unwrap_or(0.2),
                probe: a.probe,
                budget: a.budget,
                ..RaceParams::default()
            };
            // Re-searches get half the budget each: a phase change should not cost a full search.
            (
                Box::new(move |n, search| {
                    let budget = if search == 0 {
                        base.budget
                    } else {
                        (base.budget / 2.0).max(2.0)
                    };
                    Box::new(Race::new(RaceParams { budget, ..base }, n))
                }),
                a.init.unwrap_or(0.5),
            )
        }
    }
}

fn check_args(a: &EngineArgs) -> Result<(), CliError> {
    let pos = |name: &str, v: Option<f64>| match v {
        Some(x) if !(x.is_finite() && x >= 0.0) => Err(CliError::usage(format!(
            "{name} must be a number of seconds ≥ 0, got {x}"
        ))),
        _ => Ok(()),
    };
    pos("-i", a.init)?;
    pos("-w", a.warmup)?;
    pos("-t", a.sample)?;
    if !(a.tick > 0.0 && a.tick.is_finite()) {
        return Err(CliError::usage(format!(
            "--tick must be > 0 seconds, got {}",
            a.tick
        )));
    }
    if a.budget.is_nan() || a.budget <= 0.0 {
        return Err(CliError::usage(format!(
            "--budget must be > 0 seconds, got {}",
            a.budget
        )));
    }
    if !(0.0..1.0).contains(&a.watch_threshold) {
        return Err(CliError::usage(format!(
            "--watch-threshold must be in [0, 1), got {}",
            a.watch_threshold
        )));
    }
    if !a.machine.is_live() {
        return Err(CliError::usage(
            "run/attach pin real threads: they need the live machine (drop --synthetic/--load/--sysfs-root/--from-latency)",
        ));
    }
    Ok(())
}

pub fn execute(a: &EngineArgs, target: Target) -> CmdResult {
    check_args(a)?;
    let machine = a.machine.load()?;
    let explicit_objective = a.objective.is_some() || a.event.is_some();
    let mut objective = parse_objective(a)?;
    let skip = match &a.skip {
        Some(s) => SkipMask::parse(s).map_err(|e| CliError::usage(format!("-s: {e}")))?,
        None => SkipMask::none(),
    };
    let explicit = explicit_candidates(a, &machine)?;
    let say = |msg: &str| {
        if !a.quiet {
            eprintln!("autopin: {msg}");
        }
    };

    // Counters: check availability before starting anything, with the perf helper's
    // explanation of paranoid levels and how to fix them.
    let mut events = objective.events();
    let avail = autopin_perf::probe::probe_with(&perf_sysfs(), &autopin_perf::probe::RealProbeOps);
    // The default objective falls back (after saying why) when it cannot be counted; an
    // objective the user asked for by name is an error instead.
    let mut fallback: Option<String> = None;
    if !events.is_empty() {
        if let Err(e) = avail.check(&events) {
            if explicit_objective {
                return Err(CliError::usage(format!(
                    "cannot measure {}: {e}",
                    objective.text()
                )));
            }
            fallback = Some(e.to_string());
            events.clear();
        }
    }
    let counters = if fallback.is_some() {
        None
    } else {
        live::counters_for(&objective).map_err(|e| CliError::usage(e.to_string()))?
    };
    let energy = if objective.needs_energy() {
        Some(
            autopin_perf::open_energy(&perf_sysfs())
                .map_err(|e| CliError::usage(format!("objective {}: {e}", objective.text())))?,
        )
    } else {
        None
    };
    let (hb_channel, hb_path) = autopin_perf::HeartbeatChannel::create(&std::env::temp_dir())
        .map_err(|e| CliError::internal(format!("heartbeat channel: {e}")))?;
    if objective.needs_heartbeat() && matches!(target, Target::Attach { .. }) {
        return Err(CliError::usage(
            "--objective heartbeat needs a program started by `autopin run` (it finds the channel through AUTOPIN_HEARTBEAT)",
        ));
    }

    // Perturbation: measure what counting one context switch costs here (≈0.2 s), so the
    // report can say how much counting slowed the target.
    let cost = if a.no_perturbation_estimate || events.is_empty() {
        None
    } else {
        autopin_perf::measure_counting_cost(&events, Duration::from_millis(200)).ok()
    };

    let allowed = machine.allowed_cpuset();
    let mut registry = None;
    let (lifetime, pid, env_for_warning) = match &target {
        Target::Launch(cmd) => {
            let mut spec = LaunchSpec::new(&cmd[0], &cmd[1..]);
            spec.forward_signals = true;
            spec.mem_policy = a.memory.resolve(&machine)?;
            // Paper semantics (autopin1, fixed): threads are pinned at birth to the first
            // explicit candidate. The race pins at its first probe instead: until then the
            // OS places threads, so the init period does not run on a possibly bad pinning.
            // With a single candidate there is nothing to race: pin at birth, so the program
            // never runs a moment on the OS's placement.
            let single = explicit.as_ref().is_some_and(|c| c.len() == 1);
            let racing = !a.paper && a.strategy == StrategyName::Race && !single;
            let first = explicit
                .as_ref()
                .filter(|_| !racing)
                .and_then(|c| c.first())
                .and_then(|c| c.cpus.clone());
            let pin_at_birth = first.is_some();
            if let Some(cpus) = first {
                let plan = PinPlan::new(cpus, skip.clone()).map_err(CliError::usage)?;
                spec.env.extend(plan.env());
            }
            // The preload library records every thread in the registry, in creation
            // order; without it (static binaries) /proc scanning finds them.
            registry = target::Registry::create(4096).ok();
            if let Some(r) = &registry {
                spec.env.push(r.env());
            }
            if pin_at_birth || registry.is_some() {
                match target::preload_library() {
                    Ok(p) => spec.preload = Some(p),
                    Err(e) => {
                        registry = None;
                        say(&format!("warning: preload library unavailable ({e}); threads are found and pinned when /proc shows them"))
                    }
                }
            }
            spec.env.push((
                autopin_perf::heartbeat::ENV_VAR.into(),
                hb_path.clone().into_os_string(),
            ));
            let launched = target::spawn(&spec).map_err(|e| {
                let code = e.exit_code();
                eprintln!("autopin: error: {e}");
                CliError::Internal(format!("exit:{code}"))
            });
            let launched = match launched {
                Ok(l) => l,
                Err(CliError::Internal(m)) if m.starts_with("exit:") => {
                    return Ok(m[5..].parse().unwrap_or(1));
                }
                Err(e) => return Err(e),
            };
            let pid = launched.pid();
            let env: Vec<(String, String)> = std::env::vars().collect();
            (Lifetime::Child(launched), pid, env)
        }
        Target::Attach { pid, .. } => {
            let pid = *pid;
            if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(CliError::usage(format!(
                    "attach: no process with PID {pid}"
                )));
            }
            let ours = std::fs::metadata(format!("/proc/{pid}"))
                .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == unsafe { libc::geteuid() })
                .unwrap_or(false);
            if !ours && unsafe { libc::geteuid() } != 0 {
                return Err(CliError::usage(format!(
                    "attach: process {pid} belongs to another user; autopin can only pin and count your own processes (or run as root)"
                )));
            }
            let env = std::fs::read(format!("/proc/{pid}/environ"))
                .map(|b| {
                    b.split(|c| *c == 0)
                        .filter_map(|kv| {
                            let s = String::from_utf8_lossy(kv);
                            s.split_once('=')
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            (Lifetime::Attached(pid), pid, env)
        }
    };

    let warn_ctx = autopin_perf::WarningContext {
        env: env_for_warning,
        linked_libraries: Vec::new(),
        counting_mode: Some(autopin_perf::CountingMode::PerThread),
        in_vm: avail.ctx.in_vm,
    };
    let (strategy_factory, mut init) = make_strategy(a);
    let mut threads = ProcThreads::new(pid, skip, lifetime);
    if let Some(r) = registry {
        threads = threads.with_registry(r);
    }

    // The fallback objective: the program's heartbeat if it reports progress during the
    // first moments (it knows what useful work is), else CPU time per thread.
    let mut use_proc_cpu = false;
    let objective_why;
    if let Some(reason) = &fallback {
        let started = std::time::Instant::now();
        let wait = init.clamp(0.3, 2.0);
        let launched = matches!(target, Target::Launch(_));
        while launched && started.elapsed().as_secs_f64() < wait && hb_channel.read().beats == 0 {
            if matches!(threads.poll(), Ok(s) if s.ended.is_some()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let waited = started.elapsed().as_secs_f64();
        init = (init - waited).max(0.0);
        let beats = hb_channel.read().beats;
        // The perf helper's text ends with its own fallback advice; ours replaces it.
        let reason = reason.split("; fallback:").next().unwrap_or(reason);
        let sysctl = if reason.contains("perf_event_paranoid") {
            String::new()
        } else {
            " (counting also needs sysctl kernel.perf_event_paranoid ≤ 2 for your own processes, or CAP_PERFMON)".into()
        };
        let instead = if beats > 0 {
            objective = Objective::parse("heartbeat")
                .map_err(|e| CliError::internal(format!("heartbeat objective: {e}")))?;
            format!("the program's heartbeat ({beats} beat(s) reported in the first {:.1} s; work units/s)", waited)
        } else {
            use_proc_cpu = true;
            "task-clock: each thread's CPU time per second from /proc/TID/schedstat (the program reports no heartbeat; CPU share shows time lost to sharing a CPU, but not memory stalls)".into()
        };
        say(&format!(
            "warning: the default objective {} cannot be counted here: {reason}{sysctl}. Using {instead} instead.",
            objective_default_text()
        ));
        let cause = reason
            .strip_prefix(&format!("cannot count {}: ", objective_default_text()))
            .unwrap_or(reason);
        objective_why = format!(
            "fallback: {} cannot be counted here — {}",
            objective_default_text(),
            cause.split([';', '(']).next().unwrap_or(cause).trim()
        );
    } else {
        objective_why = if explicit_objective {
            "chosen with --objective/-e".into()
        } else {
            "the default: work retired by the threads".into()
        };
        for w in objective.warnings(&warn_ctx) {
            say(&format!("warning: {w}"));
        }
    }
    let (obj_name, obj_unit, obj_higher) = if use_proc_cpu {
        (
            "task-clock (CPU time per thread, /proc/TID/schedstat)".to_string(),
            "CPU-s/s".to_string(),
            true,
        )
    } else {
        (
            objective.describe(),
            objective.unit().to_string(),
            objective.higher_is_better(),
        )
    };
    let n_override = a.threads;
    let explicit2 = explicit.clone();
    let m2 = machine.clone();
    let a2 = a.clone();
    let cand_factory = Box::new(move |n: usize| match &explicit2 {
        Some(c) => c.clone(),
        None => topology_candidates(&m2, n_override.unwrap_or(n), &a2),
    });
    let report_every = a.sample.unwrap_or(if a.paper { 30.0 } else { 5.0 });
    let cfg = SessionConfig {
        init,
        report_every,
        watch: if a.no_watch {
            None
        } else {
            Some(WatchParams {
                threshold: a.watch_threshold,
                duration: a.watch_duration,
                ..WatchParams::default()
            })
        },
        higher_is_better: obj_higher,
        unit: obj_unit.clone(),
        ..SessionConfig::default()
    };
    let mut session = Session::new(cfg, cand_factory, strategy_factory);
    session.report.command = match &target {
        Target::Launch(c) => c.clone(),
        Target::Attach { pid, .. } => vec![format!("attach {pid}")],
    };
    session.report.machine = machine.summary_lines();
    session.report.objective = autopin_engine::report::ObjectiveInfo {
        name: obj_name.clone(),
        unit: obj_unit.clone(),
        higher_is_better: obj_higher,
    };
    session.report.counting_mode = if use_proc_cpu {
        "per-thread /proc schedstat (no perf)".into()
    } else if events.is_empty() {
        "none".into()
    } else {
        "per-thread".into()
    };
    session
        .report
        .notes
        .push(format!("objective: {obj_name} — {objective_why}"));
    if let Some(m) = &a.report {
        // Write an initial report so that a reader sees the search is running / incomplete.
        let _ = session.report.write_json(m);
    }

    let mut meter: Box<dyn Meter> = if use_proc_cpu {
        Box::new(ProcCpuMeter::new(Some(hb_channel)))
    } else {
        Box::new(PerfMeter::new(
            objective.clone(),
            counters,
            Some(hb_channel),
            energy,
        ))
    };
    let mut clock = SystemClock::default();
    let pinner = LinuxPinner;
    let quiet = a.quiet;
    let mut on_message = |t: f64, m: &str| {
        if !quiet {
            eprintln!("autopin: [{t:6.1}s] {m}");
        }
    };
    let mut switches: Option<(f64, u64)> = None;
    let mut switch_rate: Option<f64> = None;
    let started = std::time::Instant::now();
    let mut last_check = 0.0;
    let mut keep_going = |_: &Session| {
        let t = started.elapsed().as_secs_f64();
        if t - last_check >= 1.0 {
            last_check = t;
            if let Ok(n) = autopin_perf::context_switches(std::path::Path::new("/proc"), pid) {
                if let Some((t0, n0)) = switches {
                    if t > t0 {
                        switch_rate = Some((n.saturating_sub(n0)) as f64 / (t - t0));
                    }
                } else {
                    switches = Some((t, n));
                }
            }
        }
        true
    };
    let max_time = match target {
        Target::Attach { duration, .. } => duration,
        _ => None,
    };
    let cpu0 = live::self_cpu_seconds();
    let outcome = {
        let mut driver = Driver {
            clock: &mut clock,
            threads: &mut threads,
            pinner: &pinner,
            meter: meter.as_mut(),
            on_message: &mut on_message,
            keep_going: &mut keep_going,
        };
        driver.run(
            &mut session,
            &DriverConfig {
                tick: a.tick,
                allowed: allowed.clone(),
                max_time,
            },
        )
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            threads.signal(libc::SIGTERM);
            session.finish(started.elapsed().as_secs_f64(), None);
            write_outputs(a, &mut session)?;
            return Err(CliError::usage(e.to_string()));
        }
    };
    let wall = outcome.elapsed.max(1e-9);
    session.report.monitor_cpu_share = Some((live::self_cpu_seconds() - cpu0) / wall);
    if let (Some(c), Some(r)) = (&cost, switch_rate) {
        let s = c.estimated_slowdown(r, allowed.len());
        session.report.perturbation = Some(s);
        session.report.perturbation_note = Some(format!(
            "{:.0} context switches/s × {:.0} ns extra per counted switch over {} CPU(s)",
            r,
            c.per_switch_ns.max(0.0),
            allowed.len()
        ));
        if s > 0.01 {
            say(&format!(
                "warning: per-thread counting may have slowed the program by ~{:.1}% (frequent context switches); consider --objective heartbeat",
                100.0 * s
            ));
        }
    }
    for w in &outcome.pin_warnings {
        session.report.notes.push(format!("pinning: {w}"));
    }
    session.report.notes.extend(meter.notes());
    if threads.used_registry {
        session
            .report
            .notes
            .push("threads: creation order from the preload registry".into());
    }
    if a.migrate_memory {
        let note = migrate_note(&machine, pid, &session);
        say(&note);
        session.report.notes.push(note);
    }
    write_outputs(a, &mut session)?;
    for line in summary_lines(&session.report, &objective_why) {
        say(&line);
    }
    Ok(outcome.exit_status.unwrap_or(0))
}

fn objective_default_text() -> &'static str {
    "instructions:u"
}

/// The outcome for a person: the objective and why, then per program phase the winner, its
/// rate and its margin over the next best candidate.
pub fn summary_lines(r: &autopin_engine::report::Report, why: &str) -> Vec<String> {
    let mut out = vec![format!("objective: {} ({why})", r.objective.name)];
    // The last decision of each phase, in the order phases were first decided.
    let mut last: Vec<&autopin_engine::report::DecisionRecord> = Vec::new();
    for d in &r.decisions {
        match last.iter_mut().find(|x| x.phase == d.phase) {
            Some(x) => *x = d,
            None => last.push(d),
        }
    }
    for d in &last {
        let phase = d
            .phase
            .as_ref()
            .map(|p| format!(" for phase {p}"))
            .unwrap_or_default();
        let rate = d
            .rate
            .map(|v| format!(", {}", autopin_human::quantity(v, &r.objective.unit)))
            .unwrap_or_default();
        let vs = match (&d.runner_up, d.margin) {
            (Some(ru), Some(m)) => format!(
                "; {}{} vs {ru}",
                autopin_human::relative(m),
                d.margin_ci
                    .map(|c| format!(" ± {}", autopin_human::percent(c).trim_start_matches('+')))
                    .unwrap_or_default()
            ),
            _ => String::new(),
        };
        out.push(format!(
            "winner{phase}: {}{rate}{vs} ({})",
            d.candidate, d.reason
        ));
    }
    if let Some(d) = &r.decision {
        out.push(format!(
            "final pinning: {}{}",
            d.candidate,
            d.cpus
                .as_ref()
                .map(|c| format!(
                    " (threads → CPUs {})",
                    autopin_engine::candidate::cpu_text(c)
                ))
                .unwrap_or_default()
        ));
    } else if let Some(reason) = &r.incomplete_reason {
        out.push(format!("search incomplete: {reason}"));
    }
    out
}

/// `--migrate-memory`: what page migration did (or why it did nothing). Runs once the
/// search is over (for a launched program that has ended, only the single-node case says
/// anything useful; migration matters for attached and still-running targets).
pub fn migrate_note(m: &Machine, pid: i32, s: &Session) -> String {
    if let Some(note) = autopin_engine::numa::describe_single_node(m) {
        return note;
    }
    match s.report.decision.as_ref().and_then(|d| d.cpus.clone()) {
        Some(cpus) => autopin_engine::numa::migrate(m, pid, &cpus)
            .unwrap_or_else(|e| format!("--migrate-memory failed: {e}")),
        None => "--migrate-memory: the decision is unpinned; pages stay where they are".into(),
    }
}

fn write_outputs(a: &EngineArgs, s: &mut Session) -> Result<(), CliError> {
    if let Some(p) = &a.report {
        s.report
            .write_json(p)
            .map_err(|e| CliError::internal(format!("writing report {}: {e}", p.display())))?;
    }
    if let Some(p) = &a.timeline {
        s.report
            .write_csv(p)
            .map_err(|e| CliError::internal(format!("writing timeline {}: {e}", p.display())))?;
    }
    Ok(())
}
