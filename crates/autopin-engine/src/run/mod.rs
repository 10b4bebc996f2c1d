//! One run path for `run`, `attach`, `compare`'s optimizer runs and cluster launches: a
//! validated [`RunPlan`] goes in, a finished [`Report`] comes out. Everything that touches
//! the OS goes through [`RunEnv`], so the same code runs a real program or the simulator.
//!
//! Order of a run: validate → check counting → measure counting's cost → start or attach →
//! choose the objective along its fallback chain (waiting briefly for a heartbeat) → open
//! the meter → drive the session until the program ends or autopin detaches → finish the
//! report (monitor cost, perturbation, notes). With `migrate_memory`, the target's pages
//! follow its threads at every decision while it still runs ([`memory`]).

pub mod env;
pub mod memory;
pub mod plan;

pub use env::{BusyWatch, CountingCheck, LaunchOptions, Platform, RunEnv, RunSink, Started};
pub use memory::describe_single_node;
pub use plan::{
    CandidateSource, Coordination, LaunchPlan, ObjectivePlan, ObjectiveSource, RunPlan,
    SearchParams, StrategyChoice, TargetSpec,
};

use crate::driver::{Driver, DriverConfig};
use crate::error::EngineError;
use crate::os::ThreadSource;
use crate::report::{ObjectiveInfo, Report};
use crate::session::{CandidateFactory, CandidateList, Session, SessionConfig, StrategyFactory};
use crate::strategy::{Autopin1, Fixed, Race, RaceParams};
use autopin_human::duration;
use autopin_perf::{CountingMode, Objective, WarningContext};
use autopin_placement::{cpu_text, Pinning};
use autopin_topology::{CpuSet, Machine};

/// The objective a run measures, where it comes from and why it was chosen.
#[derive(Debug, Clone)]
pub struct ObjectiveChoice {
    pub source: ObjectiveSource,
    /// The objective the meter evaluates (the requested one, or `heartbeat`).
    pub objective: Objective,
    pub info: ObjectiveInfo,
}

/// Carries out `plan` in `env` and returns the finished report. A target that could not be
/// started is `EngineError::Launch`; when the run fails after the start, the partial report
/// goes to [`RunSink::checkpoint`] before the error is returned.
pub fn run(plan: &RunPlan, env: &mut RunEnv) -> Result<Report, EngineError> {
    plan.validate()?;
    let requested = &plan.objective.requested;
    let events = requested.events();
    let check = (!events.is_empty()).then(|| env.platform.check_counting(&events));
    let refused = check.as_ref().and_then(|c| c.result.clone().err());
    if let (Some(why), true) = (&refused, plan.objective.explicit) {
        return Err(EngineError::usage(format!(
            "cannot measure {}: {why}",
            requested.text()
        )));
    }
    let counted = refused.is_none() && !events.is_empty();
    let cost = (plan.estimate_perturbation && counted)
        .then(|| env.platform.counting_cost(&events))
        .flatten();

    let explicit = match &plan.candidates {
        CandidateSource::Explicit(list) => Some(list.clone()),
        CandidateSource::Topology { .. } => None,
    };
    let pin_at_birth = explicit
        .as_ref()
        .filter(|l| plan.search.strategy.pins_at_birth(l.len()))
        .and_then(|l| l.first())
        .and_then(|c| c.cpu_list().map(<[u32]>::to_vec));
    let launch = LaunchOptions {
        pin_at_birth,
        skip: plan.skip.clone(),
        mem_policy: plan.mem_policy.clone(),
    };
    // CPUs other work keeps busy, watched from just before the launch to the first search
    // (the program's own time is not counted): topology candidates then keep off them.
    let busy_watch = match (&plan.target, &explicit) {
        (TargetSpec::Launch(_), None) => env.platform.busy_watch(&plan.machine.allowed_cpuset()),
        _ => None,
    };
    env.sink.message(
        None,
        &match &plan.target {
            TargetSpec::Launch(argv) => format!("starting {}", argv.join(" ")),
            TargetSpec::Attach { pid, .. } => format!("attaching to process {pid}"),
        },
    );
    let started = env.platform.start(&plan.target, &launch)?;
    let Started {
        pid,
        mut threads,
        env: target_env,
        mask,
        warnings,
        openmp_runtime,
        preload_active,
    } = started;
    for w in warnings {
        env.sink.message(None, &format!("warning: {w}"));
    }
    // An attached program keeps its mask: candidates are planned inside it.
    let machine = match &mask {
        Some(m) => within(&plan.machine, m),
        None => plan.machine.clone(),
    };
    if let (Some(list), Some(m)) = (&explicit, &mask) {
        if let Some(c) = list.iter().find(|c| c.cpus.iter().any(|x| !m.contains(*x))) {
            return Err(EngineError::usage(format!(
                "candidate {} leaves the CPUs process {pid} may use ({m}); autopin does not widen a process's mask",
                c.label
            )));
        }
    }

    let mut init = plan.search.init;
    let mut init_waited = 0.0;
    let in_vm = check.as_ref().is_some_and(|c| c.in_vm);
    let target = TargetFacts {
        openmp_runtime: openmp_runtime.as_deref(),
        preload_active,
    };
    let choice = choose_objective(
        plan,
        refused.as_deref(),
        &target,
        env,
        threads.as_mut(),
        (&mut init, &mut init_waited),
    )?;
    if choice.source == ObjectiveSource::Requested {
        let ctx = WarningContext {
            env: target_env,
            linked_libraries: Vec::new(),
            counting_mode: Some(CountingMode::PerThread),
            in_vm,
        };
        for w in choice.objective.warnings(&ctx) {
            env.sink.message(None, &format!("warning: {w}"));
        }
    }
    let allowed = mask.clone().unwrap_or_else(|| machine.allowed_cpuset());
    let mut meter = match env
        .platform
        .open_meter(choice.source, &choice.objective, &allowed)
    {
        Ok(m) => m,
        Err(e) => {
            threads.terminate();
            return Err(e);
        }
    };

    let mut session = Session::new(
        SessionConfig {
            init,
            init_waited,
            report_every: plan.search.report_every,
            watch: plan.search.watch,
            higher_is_better: choice.info.higher_is_better,
            unit: choice.info.unit.clone(),
            ..SessionConfig::default()
        },
        candidate_factory(
            plan,
            explicit,
            machine.clone(),
            busy_watch.map(|w| (w, pid)),
        ),
        strategy_factory(plan.search.strategy, plan.launch.as_ref()),
    );
    let r = &mut session.report;
    r.command = match &plan.target {
        TargetSpec::Launch(argv) => argv.clone(),
        TargetSpec::Attach { pid, .. } => vec![format!("attach {pid}")],
    };
    r.machine = machine.summary_lines();
    if let Some(l) = &plan.launch {
        r.launch = Some(l.record.clone());
        r.notes.extend(l.notes.iter().cloned());
    }
    r.objective = choice.info.clone();
    r.counting_mode = match (choice.source, meter.counting()) {
        (ObjectiveSource::TaskClock, _) => "per-thread /proc schedstat (no perf)".into(),
        _ if choice.objective.events().is_empty() => "none".into(),
        (_, Some((mode, why))) => {
            r.notes.push(format!("counting: {why}"));
            mode
        }
        (_, None) => "per-thread".into(),
    };
    r.notes.push(format!(
        "objective: {} — {}",
        choice.info.name, choice.info.reason
    ));
    env.sink.checkpoint(&session.report);

    let cpu0 = env.platform.self_cpu_seconds();
    let cfg = DriverConfig {
        tick: plan.search.tick,
        allowed: allowed.clone(),
        max_time: match plan.target {
            TargetSpec::Attach { duration, .. } => duration,
            TargetSpec::Launch(_) => None,
        },
        keep_masks: plan.target.is_attach(),
        started: init_waited,
    };
    // One machine, no migration: say so once instead of at every decision.
    let migrate = plan.migrate_memory && {
        let single = memory::describe_single_node(&machine);
        if let Some(note) = &single {
            env.sink.message(None, note);
            session.report.notes.push(note.clone());
        }
        single.is_none()
    };
    // Report times count from the target's start, `init_waited` before the driver's.
    let t0 = env.clock.now() - init_waited;
    if let Some(l) = session.report.launch.as_mut() {
        l.clock_origin = env.platform.unix_time().map(|t| t - init_waited);
    }
    let mut migrations = Vec::new();
    let outcome = {
        // Both callbacks talk to the sink; they never run at the same time.
        let sink = std::cell::RefCell::new(&mut *env.sink);
        let platform = &mut *env.platform;
        let mut on_message = |t: f64, m: &str| sink.borrow_mut().message(Some(t), m);
        // The driver has pinned the decided candidate when this runs, and the target
        // still runs: its pages follow its threads now, not after it has ended.
        let mut keep_going = |s: &Session| {
            if migrate && s.report.decisions.len() > migrations.len() {
                for d in &s.report.decisions[migrations.len()..] {
                    let rec =
                        memory::after_decision(&machine, pid, d, plan.migrate_files, platform);
                    sink.borrow_mut().message(Some(d.at), &rec.line());
                    migrations.push(rec);
                }
            }
            true
        };
        Driver {
            clock: &mut *env.clock,
            threads: threads.as_mut(),
            pinner: env.pinner,
            meter: meter.as_mut(),
            on_message: &mut on_message,
            keep_going: &mut keep_going,
        }
        .run(&mut session, &cfg)
    };
    session.report.memory_migrations = migrations;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            threads.terminate();
            let now = env.clock.now() - t0;
            session.finish(now, None);
            env.sink.checkpoint(&session.report);
            return Err(e);
        }
    };

    let wall = outcome.elapsed.max(1e-9);
    let mut report = session.report.clone();
    report.monitor_cpu_share = Some((env.platform.self_cpu_seconds() - cpu0) / wall);
    if let (Some(c), Some(rate)) = (&cost, outcome.switch_rate) {
        let s = c.estimated_slowdown(rate, allowed.len());
        report.perturbation = Some(s);
        report.perturbation_note = Some(format!(
            "{:.0} context switches/s × {:.0} ns extra per counted switch over {} CPU(s)",
            rate,
            c.per_switch_ns.max(0.0),
            allowed.len()
        ));
        if s > 0.01 {
            env.sink.message(None, &format!(
                "warning: per-thread counting may have slowed the program by ~{:.1}% (frequent context switches); consider --objective heartbeat",
                100.0 * s
            ));
        }
    }
    for w in &outcome.pin_warnings {
        report.notes.push(format!("pinning: {w}"));
    }
    report.notes.extend(meter.notes());
    report.notes.extend(threads.notes());
    if let Some(c) = plan.launch.as_ref().and_then(|l| l.coordination.as_ref()) {
        report.notes.extend(c.take_notes());
    }
    if migrate && report.decisions.is_empty() {
        let note = "--migrate-memory: no decision was taken, so no page was moved";
        env.sink.message(None, note);
        report.notes.push(note.into());
    }
    Ok(report)
}

/// `machine` with only the PUs in `mask` allowed.
fn within(machine: &Machine, mask: &CpuSet) -> Machine {
    let mut m = machine.clone();
    for o in &mut m.objects {
        if let (Some(pu), Some(os)) = (o.pu.as_mut(), o.os_index) {
            pu.allowed &= mask.contains(os);
        }
    }
    m
}

/// What the objective choice knows about a started target.
struct TargetFacts<'a> {
    openmp_runtime: Option<&'a str>,
    preload_active: bool,
}

/// Walks the plan's fallback chain and takes the first source that can be measured.
/// `init`: the init time left (the heartbeat wait uses it up); `waited`: how long it waited.
fn choose_objective(
    plan: &RunPlan,
    refused: Option<&str>,
    target: &TargetFacts,
    env: &mut RunEnv,
    threads: &mut dyn ThreadSource,
    (init, waited_total): (&mut f64, &mut f64),
) -> Result<ObjectiveChoice, EngineError> {
    let requested = &plan.objective.requested;
    let launched = !plan.target.is_attach();
    let mut openmp_idle: Option<String> = None;
    for source in &plan.objective.chain {
        let instead = match source {
            ObjectiveSource::Requested => {
                if refused.is_some() {
                    continue;
                }
                let reason = if plan.objective.explicit {
                    "chosen with --objective/-e"
                } else {
                    "the default: work retired by the threads"
                };
                return Ok(ObjectiveChoice {
                    source: *source,
                    objective: requested.clone(),
                    info: info_of(requested, reason.into()),
                });
            }
            ObjectiveSource::Heartbeat => {
                if !launched {
                    continue;
                }
                // A program that knows what useful work is says so in its first moments.
                let wait = init.clamp(0.3, 2.0);
                let start = env.clock.now();
                let mut beats = env.platform.heartbeats();
                if beats == 0 {
                    env.sink.message(
                        None,
                        &format!(
                            "waiting up to {} for the program's heartbeat",
                            duration(wait)
                        ),
                    );
                }
                while beats == 0 && env.clock.now() - start < wait {
                    if matches!(threads.poll(), Ok(s) if s.ended.is_some()) {
                        break;
                    }
                    let t = env.clock.now() + 0.02;
                    env.clock.sleep_until(t);
                    beats = env.platform.heartbeats();
                }
                let waited = env.clock.now() - start;
                *init = (*init - waited).max(0.0);
                *waited_total += waited;
                if beats == 0 {
                    continue;
                }
                format!("the program's heartbeat ({beats} beat(s) reported in the first {waited:.1} s; work units/s)")
            }
            ObjectiveSource::OpenMpProgress => match target.openmp_runtime {
                Some(rt) if launched && target.preload_active => {
                    // Completed constructs are the progress: a program whose first moments
                    // complete none (all its work in one long parallel region) would read
                    // zero for as long as that region runs, so it is measured otherwise.
                    let wait = init.clamp(0.3, 1.0);
                    let start = env.clock.now();
                    let mut done = env.platform.openmp_constructs();
                    while done == 0 && env.clock.now() - start < wait {
                        if matches!(threads.poll(), Ok(s) if s.ended.is_some()) {
                            break;
                        }
                        let t = env.clock.now() + 0.02;
                        env.clock.sleep_until(t);
                        done = env.platform.openmp_constructs();
                    }
                    let waited = env.clock.now() - start;
                    *init = (*init - waited).max(0.0);
                    *waited_total += waited;
                    if done == 0 {
                        openmp_idle = Some(format!(
                            "the program uses OpenMP ({rt}) but completed no OpenMP construct in its first {:.1} s, so OpenMP progress would read zero",
                            *waited_total
                        ));
                        continue;
                    }
                    format!(
                        "OpenMP progress: completed parallel regions, loop chunks, barriers and tasks per second, counted at the entry points of the program's OpenMP runtime ({rt})"
                    )
                }
                _ => continue,
            },
            ObjectiveSource::TaskClock => {
                let why = match (target.openmp_runtime, &openmp_idle) {
                    (_, Some(idle)) => idle.clone(),
                    (Some(rt), None) => format!("the program uses OpenMP ({rt}) but the preload library cannot count its work (static binary or attached process)"),
                    (None, None) => "the program reports no heartbeat and is not an OpenMP program".into(),
                };
                format!("task-clock: each thread's CPU time per second from /proc/TID/schedstat ({why}; CPU share shows time lost to sharing a CPU, but not memory stalls or spin-waiting)")
            }
        };
        // A fallback: say why the requested objective was not used.
        let why = refused.unwrap_or("it cannot be measured for this target");
        // The perf helper's text ends with its own fallback advice; ours replaces it.
        let why = why.split("; fallback:").next().unwrap_or(why);
        let sysctl = if why.contains("perf_event_paranoid") {
            ""
        } else {
            " (counting also needs sysctl kernel.perf_event_paranoid ≤ 2 for your own processes, or CAP_PERFMON)"
        };
        let text = requested.text();
        env.sink.message(
            None,
            &format!(
                "warning: the default objective {text} cannot be counted here: {why}{sysctl}."
            ),
        );
        // A line of its own: what autopin does instead is what a reader looks for.
        env.sink.message(None, &format!("Using {instead} instead."));
        let cause = why
            .strip_prefix(&format!("cannot count {text}: "))
            .unwrap_or(why);
        let reason = format!(
            "fallback: {text} cannot be counted here — {}",
            cause.split([';', '(']).next().unwrap_or(cause).trim()
        );
        return Ok(match source {
            ObjectiveSource::Heartbeat | ObjectiveSource::OpenMpProgress => {
                let text = if *source == ObjectiveSource::Heartbeat {
                    "heartbeat"
                } else {
                    "openmp"
                };
                let o = Objective::parse(text)
                    .map_err(|e| EngineError::internal(format!("{text} objective: {e}")))?;
                let reason = match (source, target.openmp_runtime) {
                    (ObjectiveSource::OpenMpProgress, Some(rt)) => format!(
                        "{reason}; the program is an OpenMP program ({rt}) whose work the preload library counts"
                    ),
                    _ => reason,
                };
                ObjectiveChoice {
                    source: *source,
                    info: info_of(&o, reason),
                    objective: o,
                }
            }
            _ => ObjectiveChoice {
                source: *source,
                objective: requested.clone(),
                info: ObjectiveInfo {
                    name: "task-clock (CPU time per thread, /proc/TID/schedstat)".into(),
                    unit: "CPU-s/s".into(),
                    higher_is_better: true,
                    // An OpenMP program gets CPU time rather than OpenMP progress: say why.
                    reason: match (target.openmp_runtime, &openmp_idle) {
                        (_, Some(idle)) => format!("{reason}; {idle}"),
                        (Some(rt), None) => format!(
                            "{reason}; the program uses OpenMP ({rt}) but the preload library cannot count its work"
                        ),
                        (None, None) => reason,
                    },
                },
            },
        });
    }
    Err(EngineError::usage(format!(
        "no way to measure {} for this target (objective chain {:?})",
        requested.text(),
        plan.objective.chain
    )))
}

fn info_of(o: &Objective, reason: String) -> ObjectiveInfo {
    ObjectiveInfo {
        name: o.describe(),
        unit: o.unit().to_string(),
        higher_is_better: o.higher_is_better(),
        reason,
    }
}

/// The candidates of each search: the explicit list, or topology candidates for the
/// threads seen (or the planned thread count).
/// The candidates of each search. Topology candidates keep off the CPUs `busy` finds busy
/// with other work when the search starts (it looks at process `pid`'s surroundings).
fn candidate_factory(
    plan: &RunPlan,
    explicit: Option<Vec<Pinning>>,
    machine: Machine,
    mut busy: Option<(Box<dyn BusyWatch>, i32)>,
) -> CandidateFactory {
    let source = plan.candidates.clone();
    Box::new(move |n| match (&explicit, &source) {
        (Some(list), _) => list.clone().into(),
        (
            None,
            CandidateSource::Topology {
                max,
                include_unpinned,
                threads,
            },
        ) => {
            let busy = busy
                .as_mut()
                .map(|(w, pid)| w.busy_cpus(*pid))
                .unwrap_or_default();
            let allowed = machine.allowed_cpuset();
            let note =
                (!busy.is_empty() && allowed.iter().any(|c| !busy.contains(&c))).then(|| {
                    format!(
                        "CPU(s) {} busy with other work: candidates keep off them where they can",
                        cpu_text(&busy)
                    )
                });
            CandidateList {
                pinnings: topology_candidates(
                    &machine,
                    threads.unwrap_or(n),
                    *max,
                    *include_unpinned,
                    &busy,
                ),
                note,
            }
        }
        (None, CandidateSource::Explicit(list)) => list.clone().into(),
    })
}

/// Topology candidates for n threads from autopin-placement, "unpinned" kept (or left
/// out), pinnings that keep the threads off `busy` CPUs, and at least one compact pinning
/// when the placement crate finds none.
pub fn topology_candidates(
    m: &Machine,
    n: usize,
    max: usize,
    include_unpinned: bool,
    busy: &[u32],
) -> Vec<Pinning> {
    let opts = autopin_placement::CandidateOptions {
        max: Some(max),
        include_unpinned,
    };
    let mut out = autopin_placement::candidates_avoiding(m, n, &opts, busy);
    if include_unpinned && !out.iter().any(|c| c.is_unpinned()) {
        out.push(Pinning::unpinned());
    }
    if out.iter().all(|c| c.is_unpinned()) {
        // Nothing from the placement crate (e.g. one CPU allowed): at least pin compactly.
        let cpus: Vec<u32> = m.allowed_cpuset().iter().take(n.max(1)).collect();
        if !cpus.is_empty() {
            out.insert(
                0,
                Pinning::pinned(format!("{} (compact)", cpu_text(&cpus)), cpus),
            );
        }
    }
    out
}

/// The strategy of each search, tied to the other ranks' when the launch coordinates them.
fn strategy_factory(choice: StrategyChoice, launch: Option<&LaunchPlan>) -> StrategyFactory {
    let mut plain = plain_strategy_factory(choice);
    match launch.and_then(|l| l.coordination.clone()) {
        None => plain,
        Some(c) => Box::new(move |n, search| c.wrap(plain(n, search))),
    }
}

/// The strategy of each search; re-searches of the race get half the budget each (a
/// phase change should not cost a full search).
fn plain_strategy_factory(choice: StrategyChoice) -> StrategyFactory {
    match choice {
        StrategyChoice::Autopin1(p) => Box::new(move |n, _| Box::new(Autopin1::new(p, n))),
        StrategyChoice::Fixed => Box::new(|_, _| Box::new(Fixed::new(0))),
        StrategyChoice::Race(base) => Box::new(move |n, search| {
            let budget = if search == 0 {
                base.budget
            } else {
                (base.budget / 2.0).max(2.0)
            };
            Box::new(Race::new(RaceParams { budget, ..base }, n))
        }),
    }
}

#[cfg(test)]
mod tests;
