//! One run path for `run`, `attach`, `compare`'s optimizer runs and cluster launches: a
//! validated [`RunPlan`] goes in, a finished [`Report`] comes out. Everything that touches
//! the OS goes through [`RunEnv`], so the same code runs a real program or the simulator.
//!
//! Order of a run: validate → check counting and measure its cost (`check_counting`) →
//! start or attach (`start`) → choose the objective along its fallback chain, waiting
//! briefly for a heartbeat or OpenMP progress (`objective::choose_objective`) → open the
//! meter and the session, and describe the run in the report (`open_session`,
//! `describe_run`) → drive the session until the program ends or autopin detaches
//! (`drive`; with `migrate_memory` the target's pages follow its threads at every decision
//! while it still runs, [`memory`]) → finish the report (`finish`: monitor cost,
//! `estimate_perturbation`, notes).

pub mod binding;
mod birth;
pub use birth::team_start_count;
pub mod env;
mod objective;
pub mod page_migration;
pub mod plan;
mod team;

pub use env::{
    BusyWatch, CountingCheck, DeviceWatch, LaunchOptions, Platform, RunEnv, RunSink, Started,
};
pub use page_migration::describe_single_node;
pub use plan::{
    CandidateSource, Coordination, LaunchPlan, ListedCandidates, ObjectivePlan, ObjectiveSource,
    Remembered, RememberedPhase, RunPlan, SearchParams, StrategyChoice, TargetSpec, ThreadsChoice,
    BORN_WAIT,
};

use crate::driver::{Driver, DriverConfig, Outcome};
use crate::error::EngineError;
use crate::report::{Report, Start, ThreadCount};
use crate::sensors::{Meter, ThreadSource};
use crate::session::{CandidateFactory, CandidateList, Session, SessionConfig, StrategyFactory};
use crate::strategy::{Autopin1, Fixed, Race, RaceParams};
use autopin_objective::{CountingMode, WarningContext};
use autopin_placement::{cpu_text, Pinning};
use autopin_topology::{CpuSet, Machine};
use birth::{birth, Birth};
pub use objective::ObjectiveChoice;
use objective::{choose_objective, TargetFacts};

// Over 100 lines on purpose: the run path in the order it happens (check, start, objective,
// meter, session, drive, finish), each step one call; what a step finds (the pid, the
// threads, the allowed CPUs, the team) is a local the later steps read, and cut in two the
// half-made run would have to travel between the halves as a struct of its own.
/// Carries out `plan` in `env` and returns the finished report. A target that could not be
/// started is `EngineError::Launch`; when the run fails after the start, the partial report
/// goes to [`RunSink::checkpoint`] before the error is returned.
pub fn run(plan: &RunPlan, env: &mut RunEnv) -> Result<Report, EngineError> {
    let resolved = plan.with_listed_resolved(env.sink)?;
    let plan = resolved.as_ref().unwrap_or(plan);
    plan.validate()?;
    let counting = check_counting(plan, env)?;
    // CPUs busy with other work at launch, looked at once for where the program starts and
    // whether fewer threads could run faster (`team`).
    let busy_at_launch = (!plan.target.is_attach() && plan.threads == ThreadsChoice::Auto)
        .then(|| env.platform.busy_at_launch(&plan.machine.allowed_cpuset()));
    // The threads the program starts without autopin: the user's OMP_NUM_THREADS, else
    // (OpenMP's default) the CPUs it may use.
    let own_threads = birth::openmp_threads(&env.platform.launch_env())
        .unwrap_or(plan.machine.allowed_cpuset().len());
    // A smaller team remembered beside busy CPUs that are free now is let go: the program
    // starts with its own count and is searched afresh.
    let released = released_team(plan, busy_at_launch.as_deref(), own_threads, env);
    let released_plan = released.as_ref().map(|_| RunPlan {
        remembered: None,
        ..plan.clone()
    });
    let plan = released_plan.as_ref().unwrap_or(plan);
    let explicit = explicit_candidates(plan);
    let birth = birth(plan, env, explicit.as_deref(), busy_at_launch.as_deref());
    let (started, machine, mut busy_watch) = start(plan, env, explicit.as_deref(), &birth)?;
    let Started {
        pid,
        mut threads,
        env: target_env,
        mask,
        openmp_runtime,
        preload_active,
        thread_local_data,
        team_wanted_at_birth,
        ..
    } = started;
    let mut birth = birth.launched(preload_active, team_wanted_at_birth, env.sink);
    if let Some(binding) = binding::own_binding(&target_env) {
        if !plan.override_binding {
            return stand_back(plan, env, &machine, threads, &binding);
        }
        warn_binding_overridden(env.sink, &binding);
    }
    let allowed = mask.clone().unwrap_or_else(|| machine.allowed_cpuset());
    // libgomp and libomp start as many threads as the program may use CPUs, unless
    // OMP_NUM_THREADS says otherwise.
    let openmp_threads = birth::openmp_threads(&target_env).unwrap_or(allowed.len());
    let team = team::TeamSearch::plan(
        plan,
        &machine,
        &team::Facts {
            launched: !plan.target.is_attach(),
            openmp_runtime: openmp_runtime.as_deref(),
            preload_active,
            thread_local_data,
            threads: openmp_threads,
            own_threads,
            busy: busy_at_launch.as_deref().unwrap_or_default(),
            args: match &plan.target {
                TargetSpec::Launch(argv) => argv,
                TargetSpec::Attach { .. } => &[],
            },
        },
    );
    let target = TargetFacts {
        pid,
        openmp_runtime: openmp_runtime.as_deref(),
        preload_active,
        openmp_threads,
        team_units: team.units(),
    };
    let (choice, mut init) = objective_step(plan, &counting, &target, env, threads.as_mut())?;
    let check = busy_check(plan, busy_watch.as_mut(), pid, env, &mut init);
    if choice.source == ObjectiveSource::Requested {
        warn_about_objective(&choice, target_env, counting.in_vm, env.sink);
    }
    let mut meter = env
        .platform
        .open_meter(choice.source, &choice.objective, &allowed)
        .inspect_err(|_| threads.terminate())?;
    // Team candidates compare only on a team-free objective: OpenMP work counted once per
    // team, or the program's own heartbeats (its progress as it reports it, whatever the
    // team: a program that beat once per thread would read slower with fewer threads, so
    // a smaller team would lose its probes, never win them wrongly).
    use autopin_objective::ObjectiveKind;
    if matches!(
        choice.objective.kind(),
        ObjectiveKind::OpenMpTeam | ObjectiveKind::Heartbeat
    ) {
        meter = team.meter(meter);
    } else {
        team.disable(format!(
            "the objective ({}) is not counted per team, so teams of different sizes cannot be compared",
            choice.info.unit
        ));
    }
    // A team asked at birth stands only where the count is searched; otherwise the program
    // gets its own count back at once (before its second region, as a rule).
    if let Some(k) = birth.team {
        if team.enabled() {
            team.born(k);
        } else {
            meter.want_team(0);
            birth.team = None;
        }
    }
    let around = Surroundings {
        busy: busy_watch,
        // Only a machine that lists GPUs has a GPU to be near.
        devices: (!machine.gpus().is_empty())
            .then(|| env.platform.device_watch())
            .flatten(),
        pid,
    };
    let counted = meter.counting();
    let mut session = open_session(
        plan,
        &choice,
        (explicit, &check, &birth),
        &machine,
        (around, team.clone()),
        init,
        counted,
    );
    env.sink.checkpoint(&session.report);

    let cpu0 = env.platform.self_cpu_seconds();
    let place = Place {
        machine: &machine,
        allowed: &allowed,
        pid,
        init_waited: init.1,
    };
    let (outcome, migrate) = drive(
        plan,
        env,
        &mut session,
        threads.as_mut(),
        meter.as_mut(),
        place,
    )?;
    session.report.threads = Some(ThreadCount {
        released,
        ..team.record()
    });
    let ran = Ran {
        report: session.report.clone(),
        outcome,
        migrate,
        cpu0,
        cpus: allowed.len(),
    };
    Ok(finish(
        plan,
        env,
        &counting,
        ran,
        meter.as_ref(),
        threads.as_ref(),
    ))
}

/// The candidates named before the start: a remembered decision's, or the plan's explicit
/// list; `None` for topology candidates (planned when a search starts).
fn explicit_candidates(plan: &RunPlan) -> Option<Vec<Pinning>> {
    match (&plan.remembered, &plan.candidates) {
        (Some(r), _) => Some(r.candidates()),
        (None, CandidateSource::Explicit(list)) => Some(list.clone()),
        // (Not reached: `run` reads listed candidates on the machine before anything else.)
        (None, CandidateSource::Listed(l)) => Some(l.lists.clone()),
        (None, CandidateSource::Topology { .. }) => None,
    }
}

/// A program that binds its own threads, with `--override-binding`: autopin's pinnings win.
fn warn_binding_overridden(sink: &mut dyn RunSink, binding: &str) {
    // A launched program had the variables unset (so none are left); an attached one
    // keeps them, and its runtime may bind again what autopin pins.
    sink.message(
        None,
        &format!(
            "warning: the program binds its own OpenMP threads ({binding}); with --override-binding autopin's pinnings override that binding"
        ),
    );
}

/// Chooses the objective along the plan's fallback chain; returns it with the init time
/// left and the seconds waited for a heartbeat or OpenMP progress.
fn objective_step(
    plan: &RunPlan,
    counting: &Counting,
    target: &TargetFacts,
    env: &mut RunEnv,
    threads: &mut dyn ThreadSource,
) -> Result<(ObjectiveChoice, (f64, f64)), EngineError> {
    let mut init = match plan.remembered {
        Some(_) => plan.search.init.min(Remembered::INIT),
        None => plan.search.init,
    };
    let mut init_waited = 0.0;
    let choice = choose_objective(
        plan,
        counting.refused.as_deref(),
        target,
        env,
        threads,
        (&mut init, &mut init_waited),
    )?;
    Ok((choice, (init, init_waited)))
}

/// What a remembered decision's check found of the CPUs other work keeps busy.
#[derive(Debug, Clone, Default)]
struct BusyCheck {
    /// The CPUs busy now (None: not watched, or no remembered decision).
    now: Option<Vec<u32>>,
    /// Other CPUs are busy now than when the remembered decision was taken: the check is
    /// a search of its own (see [`Remembered::busy`]).
    changed: bool,
}

/// On a hit, reads which CPUs other work has kept busy since just before the launch (the
/// watch reads at least 0.1 s, which the check's start-up time covers: the time it waits
/// is taken from `init`), and compares them with the remembered decision's.
fn busy_check(
    plan: &RunPlan,
    watch: Option<&mut Watch>,
    pid: i32,
    env: &mut RunEnv,
    (init, waited): &mut (f64, f64),
) -> BusyCheck {
    let (Some(r), Some(watch)) = (&plan.remembered, watch) else {
        return BusyCheck::default();
    };
    let t0 = env.clock.now();
    let now = watch.busy_cpus(pid);
    let spent = (env.clock.now() - t0).max(0.0);
    *init = (*init - spent).max(0.0);
    *waited += spent;
    // Settled or not: the best so far of a search the program's end cut short was found
    // beside the CPUs busy then too, and its remembered list (it, the OS placement, the
    // runner-up) holds none of the candidates around the ones busy now (an unfinished
    // record made on an idle machine was checked beside a busy CPU 0 on its two 2-thread
    // pinnings only: one thread on the free CPU waited for the run after).
    let changed = r.busy.as_ref().is_some_and(|then| *then != now);
    if changed {
        let then = r.busy.as_deref().unwrap_or_default();
        env.sink.message(
            None,
            &format!(
                "busy with other work now: {}; when the remembered pinning was decided: {}: it is searched against the topology's candidates, not only checked",
                busy_text(&now),
                busy_text(then)
            ),
        );
    }
    BusyCheck {
        now: Some(now),
        changed,
    }
}

/// A list of busy CPUs as a person reads it.
pub fn busy_text(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        "no CPU".into()
    } else {
        format!("CPU(s) {}", cpu_text(cpus))
    }
}

/// The warnings a requested objective carries for this target (its environment, a VM).
fn warn_about_objective(
    choice: &ObjectiveChoice,
    target_env: Vec<(String, String)>,
    in_vm: bool,
    sink: &mut dyn RunSink,
) {
    let ctx = WarningContext {
        env: target_env,
        linked_libraries: Vec::new(),
        counting_mode: Some(CountingMode::PerThread),
        in_vm,
    };
    for w in choice.objective.warnings(&ctx) {
        sink.message(None, &format!("warning: {w}"));
    }
}

/// The session that searches: configured from the plan and the objective, with the
/// candidates and strategies of its searches, seeded with the start-up readings, its
/// report describing the run (`counting`: how the meter counts, and why).
/// `init`: the init time left and the seconds already waited.
fn open_session(
    plan: &RunPlan,
    choice: &ObjectiveChoice,
    (explicit, busy, birth): (Option<Vec<Pinning>>, &BusyCheck, &Birth),
    machine: &Machine,
    (around, team): (Surroundings, team::TeamSearch),
    (init, init_waited): (f64, f64),
    counting: Option<(String, String)>,
) -> Session {
    let start = if plan.target.is_attach() {
        Start::Attached
    } else if birth.cpus.is_some() {
        Start::PinnedAtBirth
    } else {
        Start::Os
    };
    // Born on a pinning off the busy CPUs: the search waits until the program has run
    // `born_wait`, and the start-up does not end the init early (that was to take the
    // program off the OS placement sooner).
    let deferred =
        plan.search.born_wait > 0.0 && birth.off_busy().is_some() && plan.remembered.is_none();
    let init = if deferred {
        init.max(plan.search.born_wait - init_waited)
    } else {
        init
    };
    let mut session = Session::new(
        SessionConfig {
            init,
            init_waited,
            report_every: plan.search.report_every,
            watch: plan.search.watch,
            higher_is_better: choice.info.higher_is_better,
            unit: choice.info.unit.clone(),
            check_first: plan.remembered.as_ref().is_some_and(|r| r.settled),
            // Its old rate proves nothing beside neighbours that have moved.
            check_rate: plan
                .remembered
                .as_ref()
                .filter(|r| r.settled && !busy.changed)
                .and_then(|r| r.rate.as_ref())
                .filter(|(_, unit)| *unit == choice.info.unit)
                .map(|(rate, _)| *rate),
            startup_is_os: start == Start::Os,
            startup_pinned: birth.off_busy().map(|(cpus, _)| cpus.to_vec()),
            startup_team: birth.team,
            startup_ends_init: !deferred
                && !plan.search.init_asked
                && matches!(
                    choice.source,
                    ObjectiveSource::Heartbeat | ObjectiveSource::OpenMpProgress
                ),
            startup_settled: deferred,
            remembered_phases: remembered_phases(plan, explicit.as_deref()),
            ..SessionConfig::default()
        },
        candidate_factory(
            plan,
            explicit,
            busy.changed.then(|| busy.now.clone()).flatten(),
            machine.clone(),
            around,
            team,
        ),
        strategy_factory(search_strategy(plan, busy.changed), plan.launch.as_ref()),
    );
    session.report.start = start;
    session.report.notes.extend(birth.note());
    if busy.now.is_some() {
        session.report.busy_cpus = busy.now.clone();
    }
    session.seed_startup(&choice.startup);
    describe_run(plan, machine, choice, counting, &mut session.report);
    session
}

/// How the driving loop ended, for the report's last lines.
struct Ran {
    /// The session's report as the loop left it.
    report: Report,
    outcome: Outcome,
    /// Whether memory followed the threads.
    migrate: bool,
    /// autopin's CPU time when the loop began.
    cpu0: f64,
    /// The CPUs the program may use.
    cpus: usize,
}

/// Finishes the report: monitor cost, the perturbation estimate, and the notes of the
/// pinner, the meter, the thread source and the coordination.
fn finish(
    plan: &RunPlan,
    env: &mut RunEnv,
    counting: &Counting,
    ran: Ran,
    meter: &dyn Meter,
    threads: &dyn ThreadSource,
) -> Report {
    let Ran {
        mut report,
        outcome,
        migrate,
        cpu0,
        cpus,
    } = ran;
    let wall = outcome.elapsed.max(1e-9);
    report.monitor_cpu_share = Some((env.platform.self_cpu_seconds() - cpu0) / wall);
    if let (Some(c), Some(rate)) = (&counting.cost, outcome.switch_rate) {
        estimate_perturbation(c, rate, cpus, &mut report, env.sink);
    }
    for w in &outcome.pin_warnings {
        report.notes.push(format!("pinning: {w}"));
    }
    // The report says what was applied: a decision the kernel refused for some threads is
    // not the pinning they ran on.
    if outcome.refused_last > 0 && report.decision.is_some() {
        let why = format!(
            "the kernel refused it for {} thread(s), which run on the CPUs they had (see the notes)",
            outcome.refused_last
        );
        env.sink
            .message(None, &format!("warning: the decided pinning is {why}"));
        report.not_applied = Some(why);
    }
    report.notes.extend(meter.notes());
    report.notes.extend(threads.notes());
    for w in threads.warnings() {
        env.sink.message(None, &format!("warning: {w}"));
        report.notes.push(w);
    }
    if let Some(c) = plan.launch.as_ref().and_then(|l| l.coordination.as_ref()) {
        report.notes.extend(c.take_notes());
    }
    if migrate && report.decisions.is_empty() {
        let note = "--migrate-memory: no decision was taken, so no page was moved";
        env.sink.message(None, note);
        report.notes.push(note.into());
    }
    report
}

/// The program binds its own threads and the plan leaves that binding in force: autopin
/// pins nothing and searches nothing. A launched program is waited for (its exit status is
/// autopin's); from an attached one autopin detaches at once. The report says why.
fn stand_back(
    plan: &RunPlan,
    env: &mut RunEnv,
    machine: &Machine,
    mut threads: Box<dyn ThreadSource>,
    binding: &str,
) -> Result<Report, EngineError> {
    let why = format!(
        "the program binds its own OpenMP threads ({binding}): autopin stands back (no search, no pinning) and leaves that binding in force; --override-binding lets autopin choose"
    );
    env.sink.message(None, &why);
    let mut report = Report {
        tool: "autopin".into(),
        command: match &plan.target {
            TargetSpec::Launch(argv) => argv.clone(),
            TargetSpec::Attach { pid, .. } => vec![format!("attach {pid}")],
        },
        machine: machine.summary_lines(),
        strategy: "none (the program's own binding)".into(),
        complete: true,
        own_binding: Some(binding.to_string()),
        ..Report::default()
    };
    report.notes.push(why);
    let t0 = env.clock.now();
    let attached = matches!(plan.target, TargetSpec::Attach { .. });
    let mut seen = 0;
    if !attached {
        loop {
            let snap = threads.poll().map_err(EngineError::from)?;
            seen = seen.max(snap.all.len());
            if let Some(status) = snap.ended {
                report.exit_status = status;
                break;
            }
            if !threads.wait_for_end(0.5) {
                let t = env.clock.now() + 0.5;
                env.clock.sleep_until(t);
            }
        }
    }
    report.threads_seen = seen;
    report.wall_time = env.clock.now() - t0;
    Ok(report)
}

/// Where the program runs, for the driving loop.
struct Place<'a> {
    machine: &'a Machine,
    allowed: &'a CpuSet,
    pid: i32,
    /// Seconds the program ran before the session started.
    init_waited: f64,
}

/// Drives the session until the program ends or autopin detaches; with `migrate_memory`,
/// the target's pages follow its threads at every decision. Returns how the loop ended and
/// whether memory was migrated. On failure the program is stopped and the partial report
/// checkpointed.
fn drive(
    plan: &RunPlan,
    env: &mut RunEnv,
    session: &mut Session,
    threads: &mut dyn ThreadSource,
    meter: &mut dyn Meter,
    p: Place,
) -> Result<(Outcome, bool), EngineError> {
    let cfg = DriverConfig {
        tick: plan.search.tick,
        allowed: p.allowed.clone(),
        max_time: match plan.target {
            TargetSpec::Attach { duration, .. } => duration,
            TargetSpec::Launch(_) => None,
        },
        keep_masks: plan.target.is_attach(),
        started: p.init_waited,
        respect_own_binding: !plan.override_binding,
    };
    // One machine, no migration: say so once instead of at every decision.
    let migrate = plan.migrate_memory && {
        let single = page_migration::describe_single_node(p.machine);
        if let Some(note) = &single {
            env.sink.message(None, note);
            session.report.notes.push(note.clone());
        }
        single.is_none()
    };
    // Report times count from the target's start, `init_waited` before the driver's.
    let t0 = env.clock.now() - p.init_waited;
    if let Some(l) = session.report.launch.as_mut() {
        l.clock_origin = env.platform.unix_time().map(|t| t - p.init_waited);
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
            platform.decision_in_force(s.is_decided() || s.stood_back());
            if platform.stop_requested() {
                return false;
            }
            if migrate && s.report.decisions.len() > migrations.len() {
                for d in &s.report.decisions[migrations.len()..] {
                    let rec = page_migration::after_decision(
                        p.machine,
                        p.pid,
                        d,
                        plan.migrate_files,
                        platform,
                    );
                    sink.borrow_mut().message(Some(d.at), &rec.line());
                    migrations.push(rec);
                }
            }
            true
        };
        Driver {
            clock: &mut *env.clock,
            threads: &mut *threads,
            pinner: env.pinner,
            meter,
            on_message: &mut on_message,
            keep_going: &mut keep_going,
        }
        .run(session, &cfg)
    };
    session.report.memory_migrations = migrations;
    match outcome {
        Ok(o) => Ok((o, migrate)),
        Err(e) => {
            threads.terminate();
            let now = env.clock.now() - t0;
            session.finish(now, None);
            env.sink.checkpoint(&session.report);
            Err(e)
        }
    }
}

/// Whether the requested events can be counted here, before anything starts.
struct Counting {
    /// Why not (the perf helper's explanation), when they cannot.
    refused: Option<String>,
    in_vm: bool,
    /// What counting costs a context switch, when measured.
    cost: Option<autopin_objective::CountingCost>,
}

/// Checks the requested events (an explicitly requested objective that cannot be counted
/// is a usage error) and measures counting's cost when the plan asks for it.
fn check_counting(plan: &RunPlan, env: &mut RunEnv) -> Result<Counting, EngineError> {
    let requested = &plan.objective.requested;
    let events = requested.events();
    let check = (!events.is_empty()).then(|| env.platform.check_counting(&events));
    let refused = check
        .as_ref()
        .and_then(|c| c.result.as_ref().err().map(|e| e.to_string()));
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
    Ok(Counting {
        refused,
        in_vm: check.as_ref().is_some_and(|c| c.in_vm),
        cost,
    })
}

/// The watch on CPUs other work keeps busy.
type Watch = Box<dyn BusyWatch>;

/// The strategy of the run's searches: the plan's, shortened into a check when a settled
/// decision is remembered and the CPUs busy with other work are those it was decided
/// beside (`busy_changed` false).
fn search_strategy(plan: &RunPlan, busy_changed: bool) -> StrategyChoice {
    match (plan.search.strategy, &plan.remembered) {
        // Neighbours moved: a search of the topology's candidates too, which the remembered
        // pinning leads as the incumbent; short, and the OS placement judged at once, as in
        // the check.
        (StrategyChoice::Race(p), Some(_)) if busy_changed => StrategyChoice::Race(RaceParams {
            budget: p.budget.min(Remembered::MOVED_BUDGET),
            os_probes: p.os_probes.min(Remembered::CHECK_OS_PROBES),
            os_ticks: p.os_ticks.min(Remembered::CHECK_OS_TICKS),
            ..p
        }),
        // An unsettled memory (the best so far of a program that ended mid-search) is only
        // where the threads start: its search keeps the normal budget, or the OS placement
        // would win every short check by default, run after run.
        (StrategyChoice::Race(p), Some(r)) if r.settled => StrategyChoice::Race(RaceParams {
            budget: p.budget.min(Remembered::CHECK_BUDGET),
            // The check defends a pinning that won before: the OS placement is judged on its
            // first probe, not held back until three show it (a wrong "worse" keeps that
            // earlier winner, which is cheap).
            os_probes: p.os_probes.min(Remembered::CHECK_OS_PROBES),
            os_ticks: p.os_ticks.min(Remembered::CHECK_OS_TICKS),
            ..p
        }),
        (s, _) => s,
    }
}

/// The remembered phases as the session takes them: (phase, the label of its pinning among
/// the candidates, its rate then).
fn remembered_phases(
    plan: &RunPlan,
    explicit: Option<&[Pinning]>,
) -> Vec<(String, String, Option<f64>)> {
    let (Some(r), Some(list)) = (&plan.remembered, explicit) else {
        return Vec::new();
    };
    r.phases
        .iter()
        .filter_map(|p| {
            let same = |c: &&Pinning| {
                c.is_unpinned() == p.pinning.is_unpinned() && c.cpus() == p.pinning.cpus()
            };
            let c = list.iter().find(same)?;
            Some((p.phase.clone(), c.label.clone(), p.rate))
        })
        .collect()
}

/// A remembered decision's smaller team that no longer holds: it was decided (or is to be
/// tried) because other work kept CPUs busy, and with the CPUs busy now each thread of the
/// program's own count has a CPU of its own (no team candidate would be made). Kept at
/// birth it would stay for good: a run that starts with fewer threads cannot add any, and
/// the record would keep its count whatever the machine does (ompwork, its count settled at
/// 1 beside a busy CPU 0, kept 1 thread on the idle machine run after run). Said to the
/// user; None where the team holds or there is none.
fn released_team(
    plan: &RunPlan,
    busy: Option<&[u32]>,
    own: usize,
    env: &mut RunEnv,
) -> Option<usize> {
    let r = plan.remembered.as_ref()?;
    let k = r.pinning.team?;
    let busy = busy?;
    if k >= own || !autopin_placement::team_candidates(&plan.machine, own, busy).is_empty() {
        return None;
    }
    let then = match r.busy.as_deref() {
        Some(b) if !b.is_empty() => format!("beside {} busy with other work", busy_text(b)),
        _ => "beside CPUs busy with other work".to_string(),
    };
    env.sink.message(
        None,
        &format!(
            "remembered: {} ({k} thread(s)), chosen {then}; now {} busy: each of the program's {own} threads has a CPU of its own, so it starts with them and is searched afresh",
            r.pinning.label,
            busy_text(busy)
        ),
    );
    Some(k)
}

/// Starts or attaches to the target; returns it, the machine its candidates are planned
/// on (an attached process keeps its mask) and the watch on busy CPUs.
fn start(
    plan: &RunPlan,
    env: &mut RunEnv,
    explicit: Option<&[Pinning]>,
    birth: &Birth,
) -> Result<(Started, Machine, Option<Watch>), EngineError> {
    let launch = LaunchOptions {
        team_at_birth: plan
            .threads
            .count()
            .or(plan.remembered.as_ref().and_then(|r| r.pinning.team)),
        pin_at_birth: birth.cpus.clone(),
        want_at_birth: birth.team,
        skip: plan.skip.clone(),
        mem_policy: plan.mem_policy.clone(),
        unset: if plan.override_binding {
            binding::BINDING_VARS
                .iter()
                .map(|v| v.to_string())
                .collect()
        } else {
            Vec::new()
        },
    };
    env.sink.message(
        None,
        &match &plan.target {
            TargetSpec::Launch(argv) => format!("starting {}", argv.join(" ")),
            TargetSpec::Attach { pid, .. } => format!("attaching to process {pid}"),
        },
    );
    let started = env.platform.start(&plan.target, &launch)?;
    // CPUs other work keeps busy, watched from just after the launch to the first search:
    // topology candidates then keep off them, and a remembered decision is checked against
    // the CPUs busy when it was taken. (The program's own time is not counted, so the window
    // may as well start after the launch: the scan of every process's threads then runs
    // beside the program's start, not before it.)
    // Also for the user's own candidates: they stay as given, but the race judges the OS
    // placement beside busy CPUs by rules of its own (`Strategy::set_busy_neighbours`).
    let busy_watch = match &plan.target {
        TargetSpec::Launch(_) => env.platform.busy_watch(&plan.machine.allowed_cpuset()),
        TargetSpec::Attach { .. } => None,
    };
    for w in &started.warnings {
        env.sink.message(None, &format!("warning: {w}"));
    }
    let machine = match &started.mask {
        Some(m) => within(&plan.machine, m),
        None => plan.machine.clone(),
    };
    if let (Some(list), Some(m)) = (explicit, &started.mask) {
        if let Some(c) = list
            .iter()
            .find(|c| c.cpus().iter().any(|x| !m.contains(*x)))
        {
            return Err(EngineError::usage(format!(
                "candidate {} leaves the CPUs process {} may use ({m}); autopin does not widen a process's mask",
                c.label, started.pid
            )));
        }
    }
    Ok((started, machine, busy_watch))
}

/// The report's header: the command, the machine, the launch, the objective and how it is
/// counted.
fn describe_run(
    plan: &RunPlan,
    machine: &Machine,
    choice: &ObjectiveChoice,
    counting: Option<(String, String)>,
    r: &mut Report,
) {
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
    r.counting_mode = match (choice.source, counting) {
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
}

/// How much per-thread counting slowed the target: `rate` context switches a second, each
/// taxed by the measured cost, over `cpus` CPUs; a warning past 1%.
fn estimate_perturbation(
    cost: &autopin_objective::CountingCost,
    rate: f64,
    cpus: usize,
    report: &mut Report,
    sink: &mut dyn RunSink,
) {
    let s = cost.estimated_slowdown(rate, cpus);
    report.perturbation = Some(s);
    report.perturbation_note = Some(format!(
        "{:.0} context switches/s × {:.0} ns extra per counted switch over {} CPU(s){}",
        rate,
        cost.per_switch_ns.max(0.0),
        cpus,
        cost.kept
            .as_deref()
            .map(|k| format!(" (that cost {k})"))
            .unwrap_or_default()
    ));
    if s > 0.01 {
        sink.message(None, &format!(
            "warning: per-thread counting may have slowed the program by ~{:.1}% (frequent context switches); consider --objective heartbeat",
            100.0 * s
        ));
    }
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

/// What the candidate factory looks at around the target when a search starts: the CPUs
/// busy with other work, and the GPUs it has open.
struct Surroundings {
    busy: Option<Box<dyn BusyWatch>>,
    devices: Option<Box<dyn DeviceWatch>>,
    pid: i32,
}

impl Surroundings {
    /// The CPUs other work keeps busy now (None: nothing watches them).
    fn busy_now(&mut self) -> Option<Vec<u32>> {
        let pid = self.pid;
        self.busy.as_mut().map(|w| w.busy_cpus(pid))
    }
}

// Over 100 lines on purpose: one match over where a search's candidates come from (a
// remembered list, the user's, the topology's), inside the closure the session calls; each
// arm is short and reads beside the others.
/// The candidates of each search: the explicit list, or topology candidates for the
/// threads seen (or the planned thread count), kept off the CPUs busy with other work when
/// the search starts and near the GPUs the program has open. A remembered decision's list
/// (`explicit`) is followed by the topology's candidates around the CPUs busy now when
/// `moved` gives them (other CPUs are busy than when it was decided).
fn candidate_factory(
    plan: &RunPlan,
    explicit: Option<Vec<Pinning>>,
    moved: Option<Vec<u32>>,
    machine: Machine,
    mut around: Surroundings,
    team: team::TeamSearch,
) -> CandidateFactory {
    let source = plan.candidates.clone();
    let given = plan.remembered.is_none();
    Box::new(move |n| {
        let list = match (&explicit, &source) {
            (
                Some(list),
                CandidateSource::Topology {
                    max,
                    include_unpinned,
                    threads,
                },
            ) if moved.is_some() => {
                let busy = moved.as_deref().unwrap_or_default();
                let mut pinnings = list.clone();
                let n = threads.unwrap_or(n);
                // Fewer threads join as in a search of its own (after the remembered ones,
                // before the topology's): with CPUs busy that were free when the pinning
                // was decided, they are where the gain is (left out, a program that could
                // take a smaller team mid-run had it only from its next run's start).
                let (teams, team_note) = team.candidates(&machine, n, busy);
                let topology = topology_candidates(&machine, n, *max, *include_unpinned, busy)
                    .into_iter()
                    .filter(|p| !autopin_placement::stacked_under_a_team(p, &teams))
                    .collect::<Vec<_>>();
                for c in teams.into_iter().chain(topology) {
                    if !pinnings.iter().any(|p| {
                        p.is_unpinned() == c.is_unpinned()
                            && p.cpus() == c.cpus()
                            && p.team == c.team
                    }) {
                        pinnings.push(c);
                    }
                }
                let mut note = format!(
                    "{} busy with other work, not as when the remembered pinning was decided: the topology's candidates around them join the check",
                    busy_text(busy)
                );
                if let Some(t) = team_note {
                    note = format!("{note}; {t}");
                }
                CandidateList {
                    pinnings,
                    note: Some(note),
                    busy: None,
                }
            }
            // The user's pinnings stay as given; the CPUs busy with other work are still found,
            // for the race's rules beside them: without them an OS placement whose every probe
            // after a move collapsed onto the busy CPU was weighed as on an idle machine, by
            // length, and never ended (ompwork beside a busy CPU 0 with `--unpinned --schedule
            // "0,1;1,0;0,0;1,1"` searched to its end in 4 of 7 runs).
            (Some(list), CandidateSource::Explicit(_)) if given => {
                let busy = around.busy_now();
                let note = busy.as_ref().filter(|b| !b.is_empty()).map(|b| {
                    format!(
                        "CPU(s) {} busy with other work: the candidates are as given",
                        cpu_text(b)
                    )
                });
                CandidateList {
                    pinnings: list.clone(),
                    note,
                    busy,
                }
            }
            (Some(list), _) => list.clone().into(),
            (
                None,
                CandidateSource::Topology {
                    max,
                    include_unpinned,
                    threads,
                },
            ) => {
                let seen = around.busy_now();
                let busy: &[u32] = seen.as_deref().unwrap_or_default();
                let allowed = machine.allowed_cpuset();
                let mut notes = Vec::new();
                if !busy.is_empty() && allowed.iter().any(|c| !busy.contains(&c)) {
                    notes.push(format!(
                        "CPU(s) {} busy with other work: candidates keep off them where they can",
                        cpu_text(busy)
                    ));
                }
                let n = threads.unwrap_or(n);
                let mut pinnings = topology_candidates(&machine, n, *max, *include_unpinned, busy);
                // Fewer threads (docs/threads.md): probed after the OS placement, before the
                // topology's own, as they are where the gain is largest when they are offered.
                let (teams, team_note) = team.candidates(&machine, n, busy);
                notes.extend(team_note);
                // (the whole count stacked on a team's CPUs: that team's work, time-shared)
                pinnings.retain(|p| !autopin_placement::stacked_under_a_team(p, &teams));
                for (at, t) in teams.into_iter().enumerate() {
                    let first = usize::from(pinnings.first().is_some_and(|p| p.is_unpinned()));
                    pinnings.insert((first + at).min(pinnings.len()), t);
                }
                let opened = around
                    .devices
                    .as_mut()
                    .map(|w| w.opened_gpus(around.pid))
                    .unwrap_or_default();
                for (at, near) in near_gpu_candidates(&machine, n, &opened)
                    .into_iter()
                    .enumerate()
                {
                    notes.push(format!(
                        "the program has {} open: candidate {} keeps its threads next to it",
                        near.description, near.label
                    ));
                    pinnings.retain(|p| p.cpus() != near.cpus());
                    // Probed early: after the OS placement, before the topology's own.
                    let first = usize::from(pinnings.first().is_some_and(|p| p.is_unpinned()));
                    pinnings.insert((first + at).min(pinnings.len()), near);
                }
                CandidateList {
                    pinnings,
                    note: (!notes.is_empty()).then(|| notes.join("; ")),
                    busy: seen,
                }
            }
            (None, CandidateSource::Explicit(list)) => list.clone().into(),
            // (Not reached: `run` reads listed candidates on the machine before anything else.)
            (None, CandidateSource::Listed(l)) => l.lists.clone().into(),
        };
        // (a remembered decision's pinning or runner-up of fewer threads races too)
        team.racing(&list.pinnings);
        list
    })
}

/// For each opened GPU whose local CPUs are fewer than those allowed: the n threads placed
/// compactly on the allowed CPUs next to it (a data loader, a rank driving the GPU).
fn near_gpu_candidates(m: &Machine, n: usize, opened: &[String]) -> Vec<Pinning> {
    let allowed = m.allowed_cpuset();
    let gpus = m.gpus();
    opened
        .iter()
        .filter_map(|busid| {
            let (i, d) = gpus.iter().enumerate().find(|(_, d)| d.busid == *busid)?;
            let local = d.local_cpus.intersection(&allowed);
            if local.is_empty() || local.len() >= allowed.len() {
                return None;
            }
            let near = autopin_placement::restrict_to(m, &local);
            let cpus =
                autopin_placement::policy_pinning(&near, "compact", n.min(local.len())).ok()?;
            Some(Pinning::described(cpus, format!("GPU G{i} {busid}")))
        })
        .collect()
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
    match launch.and_then(|l| l.coordination.clone()) {
        None => plain_strategy_factory(choice),
        // Ranks that search together keep to the budget: a clean search's deadline rests
        // on what each rank sees, and they must end alike.
        Some(c) => {
            let choice = match choice {
                StrategyChoice::Race(p) => StrategyChoice::Race(RaceParams {
                    deadline: f64::INFINITY,
                    ..p
                }),
                other => other,
            };
            let mut plain = plain_strategy_factory(choice);
            Box::new(move |n, search| c.wrap(plain(n, search), search))
        }
    }
}

/// The strategy of each search; re-searches of the race get half the budget each (a
/// phase change should not cost a full search).
fn plain_strategy_factory(choice: StrategyChoice) -> StrategyFactory {
    match choice {
        StrategyChoice::Autopin1(p) => Box::new(move |n, _| Box::new(Autopin1::new(p, n))),
        StrategyChoice::Fixed => Box::new(|_, _| Box::new(Fixed::new(0))),
        StrategyChoice::Race(base) => Box::new(move |n, search| {
            // (a re-search keeps to its budget: the deadline is the first decision's)
            let (budget, deadline) = if search == 0 {
                (base.budget, base.deadline)
            } else {
                ((base.budget / 2.0).max(2.0), f64::INFINITY)
            };
            Box::new(Race::new(
                RaceParams {
                    budget,
                    deadline,
                    ..base
                },
                n,
            ))
        }),
    }
}

#[cfg(test)]
mod team_tests;
#[cfg(test)]
mod tests;
