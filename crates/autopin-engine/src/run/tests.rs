//! The whole run path through the simulated world: objective choice, decisions, exit codes,
//! incomplete searches, attach without a trace, reports. Milliseconds each.

use super::*;
use crate::phase::WatchParams;
use crate::pin_plan::SkipMask;
use crate::sensors::OsError;
use crate::sim::{HpcModel, Sim, SimPlatform, SimSink, SimTopo};
use autopin_objective::Objective;

fn small() -> Machine {
    autopin_topology::source::synthetic::parse("package:2 core:2 pu:1").unwrap()
}

/// A simulated OpenMP program (libgomp) on a machine without hardware counters.
fn openmp_without_pmu(sim: Sim) -> SimPlatform {
    let mut p = SimPlatform::new(sim);
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    p.openmp_runtime = Some("libgomp.so.1".into());
    p
}

pub(super) fn plan(m: &Machine, target: TargetSpec, candidates: CandidateSource) -> RunPlan {
    RunPlan {
        override_binding: false,
        start_off_busy: true,
        remembered: None,
        threads: ThreadsChoice::Auto,
        machine: m.clone(),
        target,
        skip: SkipMask::none(),
        objective: ObjectivePlan::default_with(Objective::parse("instructions:u").unwrap()),
        candidates,
        search: SearchParams {
            strategy: StrategyChoice::Race(RaceParams {
                budget: 20.0,
                ..RaceParams::default()
            }),
            init: 0.5,
            init_asked: false,
            tick: 0.1,
            born_wait: 0.0,
            report_every: 5.0,
            watch: None,
        },
        migrate_memory: false,
        migrate_files: false,
        mem_policy: None,
        estimate_perturbation: true,
        launch: None,
    }
}

/// The first probe the search took (the start-up's is not one).
fn first_search_probe(r: &Report) -> &crate::report::ProbeRecord {
    r.probes
        .iter()
        .find(|p| !p.startup)
        .expect("a probe of the search")
}

pub(super) fn launch() -> TargetSpec {
    TargetSpec::Launch(vec!["./prog".into()])
}

pub(super) fn topology() -> CandidateSource {
    CandidateSource::Topology {
        max: 12,
        include_unpinned: true,
        threads: None,
    }
}

pub(super) fn go(
    plan: &RunPlan,
    platform: &mut SimPlatform,
) -> (Result<Report, EngineError>, SimSink) {
    let mut clock = platform.sim.clone();
    let pinner = platform.sim.clone();
    let mut sink = SimSink::default();
    let r = run(
        plan,
        &mut RunEnv {
            clock: &mut clock,
            pinner: &pinner,
            platform,
            sink: &mut sink,
        },
    );
    (r, sink)
}

fn sim(m: &Machine, threads: usize, ends_at: f64) -> Sim {
    Sim::new(m, Box::new(HpcModel::default()), threads, 0.01, 7, ends_at)
}

#[test]
fn launched_program_is_decided_and_its_exit_status_reported() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 4, 60.0).with_exit_code(3));
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert!(r.complete, "{:?}", r.incomplete_reason);
    assert_eq!(r.exit_status, Some(3));
    let d = r.decision.clone().expect("a decision");
    // On two packages with memory-bound pairs, spreading beats the OS placement's penalty.
    assert_ne!(d.candidate, autopin_placement::UNPINNED_LABEL);
    assert_eq!(p.meter_opened, Some(ObjectiveSource::Requested));
    assert_eq!(
        r.objective.reason,
        "the default: work retired by the threads"
    );
    assert_eq!(r.counting_mode, "per-thread");
    assert_eq!(r.command, vec!["./prog"]);
    // The report was checkpointed before the search, so a reader sees it running.
    assert_eq!(sink.checkpoints.len(), 1);
    assert!(sink.checkpoints[0].decision.is_none());
    assert!(r
        .summary_lines()
        .iter()
        .any(|l| l.starts_with("final pinning: ")));
    // The race pins at its first probe, not at birth.
    assert_eq!(p.launched_with.unwrap().pin_at_birth, None);
}

#[test]
fn program_ending_before_a_decision_gives_an_incomplete_report() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 4, 1.0).with_exit_code(7));
    let (r, _) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert!(!r.complete);
    assert_eq!(r.exit_status, Some(7));
    let why = r.incomplete_reason.clone().unwrap();
    assert!(
        why.contains("the program ended") && why.contains("before a decision"),
        "{why}"
    );
    assert!(r
        .summary_lines()
        .last()
        .unwrap()
        .starts_with("search incomplete: "));
}

#[test]
fn launch_failure_carries_the_shell_exit_code() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 10.0));
    p.start_error = Some(EngineError::Launch {
        message: "./prog: command not found".into(),
        exit_code: 127,
    });
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 127);
    assert!(
        sink.checkpoints.is_empty(),
        "nothing started, nothing to report"
    );
}

#[test]
fn refused_counting_falls_back_to_task_clock_and_says_why() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    p.counting = Err(OsError::NotSupported(
        "cannot count instructions:u: perf_event_paranoid is 3; fallback: use task-clock".into(),
    ));
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::TaskClock));
    assert_eq!(r.objective.unit, "CPU-s/s");
    assert_eq!(r.counting_mode, "per-thread /proc schedstat (no perf)");
    assert_eq!(
        r.objective.reason,
        "fallback: instructions:u cannot be counted here — perf_event_paranoid is 3"
    );
    let warning = sink
        .messages
        .iter()
        .find(|m| m.contains("Using task-clock"))
        .unwrap();
    assert!(!warning.contains("fallback: use"), "{warning}");
}

#[test]
fn refused_counting_falls_back_to_the_heartbeat_of_a_program_that_beats() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    p.beats_from = Some(0.2);
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::Heartbeat));
    assert_eq!(r.objective.unit, "beats/s");
    assert_eq!(r.counting_mode, "none");
    assert!(sink.said("Using the program's heartbeat"));
    assert!(r.complete);
}

#[test]
fn an_objective_the_user_named_is_not_replaced() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    p.counting = Err(OsError::NotSupported("perf_event_paranoid is 3".into()));
    let mut pl = plan(&m, launch(), topology());
    pl.objective = ObjectivePlan::explicit(Objective::parse("cycles").unwrap());
    let e = go(&pl, &mut p).0.unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::Usage);
    assert!(e.to_string().contains("cannot measure cycles"), "{e}");
    assert!(p.launched_with.is_none(), "nothing started");
}

#[test]
fn the_chain_is_walked_in_order() {
    // Without the heartbeat link, a beating program still gets task-clock.
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    p.beats_from = Some(0.0);
    let mut pl = plan(&m, launch(), topology());
    pl.objective.chain = vec![ObjectiveSource::Requested, ObjectiveSource::TaskClock];
    go(&pl, &mut p).0.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::TaskClock));
}

#[test]
fn an_openmp_program_without_a_pmu_gets_openmp_progress_and_the_report_says_why() {
    let m = small();
    let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::OpenMpProgress));
    assert_eq!(r.objective.unit, "OpenMP constructs/s");
    assert!(
        r.objective.reason.contains("libgomp.so.1"),
        "{}",
        r.objective.reason
    );
    assert!(sink.said("Using OpenMP progress"));
    assert!(r.complete);
    // The constructs counted while a heartbeat was waited for (1000/s here, where the OS
    // placed the program) are the OS placement's first probe.
    let first = &r.probes[0];
    assert!(first.startup, "{first:?}");
    assert_eq!(first.label, "unpinned (OS decides)");
    assert!((first.rate - 1000.0).abs() < 50.0, "{first:?}");
    assert!(
        first.start > 0.0 && first.start + first.duration <= 0.6,
        "{first:?}"
    );
}

#[test]
fn openmp_progress_needs_the_preload_library_and_completed_constructs() {
    let m = small();
    // A static binary (no preload library in it): its OpenMP work cannot be counted.
    let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
    p.preload_active = false;
    let (r, _) = go(&plan(&m, launch(), topology()), &mut p);
    assert_eq!(p.meter_opened, Some(ObjectiveSource::TaskClock));
    assert!(r
        .unwrap()
        .notes
        .iter()
        .any(|n| n.contains("cannot count its work")));
    // All work in one long parallel region: no construct completes at first, and OpenMP
    // progress would read zero, so CPU time it is, and the report says why.
    let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
    p.openmp_from = None;
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    assert_eq!(p.meter_opened, Some(ObjectiveSource::TaskClock));
    assert!(sink.said("completed no OpenMP construct"));
    assert!(r.unwrap().complete);
}

/// The search's pinnings of a run, as thread → CPU lists, in the order they were decided.
fn decided_cpus(r: &Report) -> Vec<Option<Vec<u32>>> {
    r.decisions.iter().map(|d| d.cpus.clone()).collect()
}

#[test]
fn threads_created_after_the_search_began_get_a_search_of_their_own() {
    // A program that runs one thread for 3 s (reading its input), then four: the first
    // search places one thread, and its pinning, wrapped, would stack the newcomers on that
    // thread's CPU. No OpenMP runtime, no PMU: task-clock, with no wait for anything.
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 4, 30.0).with_workers_from(3.0));
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::TaskClock));
    assert!(sink.said("search 0: "), "{:?}", sink.messages);
    assert!(sink.said("candidates for 1 thread,"), "{:?}", sink.messages);
    assert!(
        sink.said("the program now runs 4 threads (the candidates were made for 1 thread): searching again"),
        "{:?}",
        sink.messages
    );
    let grown = &r.searches[1];
    assert!(
        grown.trigger.starts_with("the program now runs 4 threads") && grown.start >= 3.3,
        "{:?}",
        r.searches
    );
    // The last decision places four threads, each on a CPU of its own, or leaves them to
    // the OS.
    let last = decided_cpus(&r).pop().flatten();
    if let Some(cpus) = last {
        let mut distinct = cpus.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!((cpus.len(), distinct.len()), (4, 4), "{cpus:?}");
    }
    assert_eq!(r.searches.len(), 2, "{:?}", r.searches);
    // A program whose threads all exist from the start is searched once.
    let mut p = SimPlatform::new(sim(&m, 4, 30.0));
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    let (r, _) = go(&plan(&m, launch(), topology()), &mut p);
    assert_eq!(r.unwrap().searches.len(), 1);
}

#[test]
fn an_openmp_program_in_its_serial_start_up_is_waited_for() {
    // Linked with libgomp, one thread and no construct for 2.5 s, then its parallel
    // regions: the objective waits for them and the search begins with all four threads.
    let m = small();
    let mut p = openmp_without_pmu(sim(&m, 4, 30.0).with_workers_from(2.5));
    p.openmp_from = Some(2.5);
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::OpenMpProgress));
    assert!(sink.said("a serial start-up; probing waits for its first parallel region"));
    assert!(
        sink.said("candidates for 4 threads,"),
        "{:?}",
        sink.messages
    );
    assert_eq!(r.searches.len(), 1, "{:?}", r.searches);
    assert!(r.searches[0].start >= 2.5, "{:?}", r.searches);
    assert!(r.complete);
    // A serial start-up that never ends is waited for a bounded time, then searched as the
    // one thread it is, with task-clock.
    let mut p = openmp_without_pmu(sim(&m, 1, 45.0));
    p.openmp_from = None;
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::TaskClock));
    assert!(sink.said("a serial start-up"));
    let start = r.searches[0].start;
    assert!((30.0..32.5).contains(&start), "{start}");
    // One OpenMP thread is all it will run (OMP_NUM_THREADS=1): its one long parallel
    // region is no start-up, and nothing is waited for.
    let mut p = openmp_without_pmu(sim(&m, 1, 45.0));
    p.openmp_from = None;
    p.env = vec![("OMP_NUM_THREADS".into(), "1".into())];
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    assert!(!sink.said("a serial start-up"));
    assert!(r.unwrap().searches[0].start < 2.0);
}

#[test]
fn an_openmp_runtime_a_library_brings_is_looked_for_once_the_loader_is_done() {
    // A cold start: the loader maps the program's libraries for 1.2 s, one of which brings
    // libgomp; the program's parallel regions start at 1.4 s, on two threads.
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0).loading_until(1.2).with_workers_from(1.4));
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    p.brought_runtime = Some("libgomp.so.1".into());
    p.openmp_from = Some(1.4);
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert!(sink.said("the program is still loading its libraries after"));
    assert_eq!(p.meter_opened, Some(ObjectiveSource::OpenMpProgress));
    assert!(
        sink.said("candidates for 2 threads,"),
        "{:?}",
        sink.messages
    );
    assert_eq!(r.searches.len(), 1, "{:?}", r.searches);
    // Loaded already: nothing is waited for, and the runtime is found at once.
    let mut p = SimPlatform::new(sim(&m, 2, 30.0).loading_until(0.0));
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    p.brought_runtime = Some("libgomp.so.1".into());
    let (_, sink) = go(&plan(&m, launch(), topology()), &mut p);
    assert!(!sink.said("still loading"));
    assert_eq!(p.meter_opened, Some(ObjectiveSource::OpenMpProgress));
}

/// A 2-thread program on `small()` whose first allowed CPU other work keeps busy.
fn beside_a_busy_cpu(m: &Machine) -> (SimPlatform, u32) {
    let mut p = SimPlatform::new(sim(m, 2, 30.0));
    let busy = m.allowed_cpuset().iter().next().unwrap();
    p.busy = vec![busy];
    (p, busy)
}

#[test]
fn busy_cpus_keep_the_candidates_off_them() {
    let m = small();
    let (mut p, busy) = beside_a_busy_cpu(&m);
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert!(sink.said(&format!("CPU(s) {busy} busy with other work")));
    assert!(r.notes.iter().any(|n| n.contains("busy with other work")));
    // Two threads on four CPUs: every class fits on the three free ones.
    let pinned: Vec<&Vec<u32>> = r
        .candidates
        .iter()
        .filter_map(|c| c.cpus.as_ref())
        .collect();
    assert!(pinned.len() >= 2, "{:?}", r.candidates);
    assert!(
        pinned.iter().all(|cs| !cs.contains(&busy)),
        "{:?}",
        r.candidates
    );
}

#[test]
fn explicit_candidates_beside_a_busy_cpu_are_kept_as_given_and_searched_as_beside_it() {
    let m = small();
    let (mut p, busy) = beside_a_busy_cpu(&m);
    let given = vec![
        Pinning::unpinned(),
        Pinning::from_cpus(vec![busy, busy + 1]),
        Pinning::from_cpus(vec![busy + 1, busy + 2]),
    ];
    let (r, sink) = go(
        &plan(&m, launch(), CandidateSource::Explicit(given.clone())),
        &mut p,
    );
    let r = r.unwrap();
    assert_eq!(r.busy_cpus, Some(vec![busy]));
    assert!(
        sink.said(&format!(
            "CPU(s) {busy} busy with other work: the candidates are as given"
        )),
        "{:?}",
        sink.messages
    );
    let listed: Vec<Option<Vec<u32>>> = r.candidates.iter().map(|c| c.cpus.clone()).collect();
    let expected: Vec<Option<Vec<u32>>> = given
        .iter()
        .map(|g| g.cpu_list().map(<[u32]>::to_vec))
        .collect();
    assert_eq!(listed, expected);
    // Nothing busy: no note, and the report says none was.
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    let (r, sink) = go(
        &plan(&m, launch(), CandidateSource::Explicit(given)),
        &mut p,
    );
    assert_eq!(r.unwrap().busy_cpus, Some(vec![]));
    assert!(!sink.said("busy with other work"), "{:?}", sink.messages);
}

#[test]
fn explicit_single_candidate_is_pinned_at_birth_and_kept() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    let only = Pinning::from_cpus(vec![2, 3]);
    let pl = plan(&m, launch(), CandidateSource::Explicit(vec![only]));
    let r = go(&pl, &mut p).0.unwrap();
    assert_eq!(p.launched_with.unwrap().pin_at_birth, Some(vec![2, 3]));
    assert_eq!(r.decision.unwrap().cpus, Some(vec![2, 3]));
}

#[test]
fn a_settled_memory_is_checked_briefly_an_unsettled_one_searched_in_full() {
    let m = small();
    let mut p = plan(&m, launch(), topology());
    let race = |s: StrategyChoice| match s {
        StrategyChoice::Race(r) => r,
        _ => panic!("not a race"),
    };
    assert_eq!(race(search_strategy(&p, false)).budget, 20.0);
    let mut memory = settled(Pinning::pinned("0,1", vec![0, 1]));
    p.remembered = Some(memory.clone());
    let check = race(search_strategy(&p, false));
    assert_eq!(check.budget, Remembered::CHECK_BUDGET);
    assert_eq!(check.os_probes, Remembered::CHECK_OS_PROBES);
    assert_eq!(check.os_ticks, Remembered::CHECK_OS_TICKS);
    // The best so far of a program that ended mid-search: a full search from there.
    memory.settled = false;
    p.remembered = Some(memory);
    let search = race(search_strategy(&p, false));
    assert_eq!(search.budget, 20.0);
    assert_eq!(search.os_probes, RaceParams::default().os_probes);
    assert_eq!(search.os_ticks, RaceParams::default().os_ticks);
}

#[test]
fn plan_validation_names_the_bad_value() {
    let m = small();
    let mut pl = plan(
        &m,
        launch(),
        CandidateSource::Explicit(vec![Pinning::from_cpus(vec![9])]),
    );
    let e = pl.validate().unwrap_err();
    assert!(e.to_string().contains("uses CPU 9"), "{e}");
    pl.candidates = topology();
    pl.search.tick = 0.0;
    assert!(pl.validate().unwrap_err().to_string().contains("--tick"));
    pl.search.tick = 0.1;
    pl.target = TargetSpec::Attach {
        pid: 5,
        duration: None,
    };
    pl.objective = ObjectivePlan::explicit(Objective::parse("heartbeat").unwrap());
    assert!(pl.validate().unwrap_err().to_string().contains("heartbeat"));
}

#[test]
fn attach_without_a_decision_restores_every_thread_and_says_it_detached() {
    // `taskset -c 1,2 prog &`: every thread on CPUs 1-2; autopin attaches for 1 s, long
    // enough to pin a probe, too short for a decision.
    let m = small();
    let mask = CpuSet::from_cpus([1, 2]);
    let s = sim(&m, 3, 1e9).with_initial_mask(&mask);
    let mut p = SimPlatform::new(s.clone());
    p.attach_mask = Some(mask.clone());
    let pl = plan(
        &m,
        TargetSpec::Attach {
            pid: 1000,
            duration: Some(1.0),
        },
        CandidateSource::Explicit(vec![
            Pinning::from_cpus(vec![1]),
            Pinning::from_cpus(vec![2]),
        ]),
    );
    let r = go(&pl, &mut p).0.unwrap();
    assert!(
        r.timeline.iter().any(|t| t.candidate.is_some()),
        "a probe was pinned"
    );
    assert!(!r.complete);
    assert_eq!(r.exit_status, None);
    let why = r.incomplete_reason.unwrap();
    assert!(
        why.contains("still running") && !why.contains("ended"),
        "{why}"
    );
    assert!(
        why.contains("3 thread(s) got their original CPU mask back"),
        "{why}"
    );
    for (tid, m) in s.masks() {
        assert_eq!(m, mask, "thread {tid} left on {m}");
    }
}

#[test]
fn attach_never_widens_the_mask_and_plans_inside_it() {
    let m = small();
    let mask = CpuSet::from_cpus([1, 2]);
    let s = sim(&m, 2, 1e9).with_initial_mask(&mask);
    let mut p = SimPlatform::new(s.clone());
    p.attach_mask = Some(mask.clone());
    let pl = plan(
        &m,
        TargetSpec::Attach {
            pid: 1000,
            duration: Some(30.0),
        },
        topology(),
    );
    let r = go(&pl, &mut p).0.unwrap();
    for c in &r.candidates {
        for cpu in c.cpus.iter().flatten() {
            assert!(mask.contains(*cpu), "candidate {} leaves the mask", c.label);
        }
    }
    assert!(r.candidates.iter().any(|c| c.cpus.is_some()));
    for (tid, m) in s.masks() {
        assert!(
            m.iter().all(|c| mask.contains(c)),
            "thread {tid} widened to {m}"
        );
    }
    // An explicit candidate outside the mask is refused before anything is pinned.
    let outside = plan(
        &m,
        TargetSpec::Attach {
            pid: 1000,
            duration: Some(1.0),
        },
        CandidateSource::Explicit(vec![Pinning::from_cpus(vec![0])]),
    );
    let e = go(&outside, &mut p).0.unwrap_err();
    assert!(e.to_string().contains("does not widen"), "{e}");
}

#[test]
fn migrate_memory_on_one_node_says_so_once() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    let mut pl = plan(&m, launch(), topology());
    pl.migrate_memory = true;
    let r = go(&pl, &mut p).0.unwrap();
    // A synthetic machine without NUMA nodes has nothing to migrate between.
    let notes: Vec<_> = r
        .notes
        .iter()
        .filter(|n| n.starts_with("--migrate-memory"))
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", r.notes);
    assert!(notes[0].contains("nothing to migrate"), "{}", notes[0]);
    assert!(p.migrated.is_empty());
    assert!(r.memory_migrations.is_empty());
}

fn two_nodes() -> Machine {
    autopin_topology::source::synthetic::parse("package:2 numa:1 core:2 pu:1").unwrap()
}

/// Node 1 only (CPUs 2, 3) against node 0 only: a fixed decision on node 1.
fn on_node_1() -> CandidateSource {
    CandidateSource::Explicit(vec![Pinning::from_cpus(vec![2, 3])])
}

#[test]
fn pages_follow_the_decision_while_the_program_runs() {
    let m = two_nodes();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    let mut pl = plan(&m, launch(), on_node_1());
    pl.search.strategy = StrategyChoice::Fixed;
    pl.migrate_memory = true;
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    // Once, at the decision, long before the program ended at 30 s — not after it.
    assert_eq!(p.migrated.len(), 1, "{:?}", p.migrated);
    let (at, pid, cpus, files) = p.migrated[0].clone();
    assert!(!files, "file-backed pages only with --migrate-files");
    assert!(at < 5.0, "migrated at {at} s");
    assert_eq!(cpus, vec![2, 3]);
    assert_eq!(r.memory_migrations.len(), 1);
    let rec = &r.memory_migrations[0];
    let o = rec.outcome.as_ref().expect("an outcome");
    assert_eq!(o.to_nodes, vec![1]);
    assert_eq!(o.moved.get(&1), Some(&2000));
    assert_eq!(o.numa_balancing, Some(false));
    assert_eq!(rec.search, 0);
    assert!(rec.error.is_none() && rec.skipped.is_none());
    assert!(pid > 0);
    assert!(sink.said("moved 2000 page(s)"), "{:?}", sink.messages);
    // The record survives the JSON round trip `autopin report` reads.
    let back: Report = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(back.memory_migrations, r.memory_migrations);
}

#[test]
fn probes_never_migrate_only_decisions_do() {
    let m = two_nodes();
    let mut p = SimPlatform::new(sim(&m, 2, 60.0));
    let mut pl = plan(
        &m,
        launch(),
        CandidateSource::Explicit(vec![
            Pinning::from_cpus(vec![0, 1]),
            Pinning::from_cpus(vec![2, 3]),
            Pinning::from_cpus(vec![0, 2]),
        ]),
    );
    pl.migrate_memory = true;
    let r = go(&pl, &mut p).0.unwrap();
    assert!(r.probes.len() >= 3, "{} probes", r.probes.len());
    assert_eq!(p.migrated.len(), r.decisions.len());
    assert_eq!(r.memory_migrations.len(), r.decisions.len());
}

/// Another job keeps socket 0's cores busy (its threads get 30%), the program's pages
/// start on node 0, and it waits on memory in proportion to the distance to them.
struct BusySocket0;
impl crate::sim::RateModel for BusySocket0 {
    fn rates(&self, t: &SimTopo, p: &[Option<u32>]) -> Vec<f64> {
        p.iter()
            .enumerate()
            .map(|(i, c)| {
                let cpu = c.unwrap_or_else(|| t.os_cpu(i));
                if t.package_of[&cpu] == 0 {
                    0.3e9
                } else {
                    1e9
                }
            })
            .collect()
    }
}

/// Eight threads on node 0 (busy, data local) or node 1 (free, data one hop away): node 1
/// wins even with remote memory (10/16 > 0.3), and wins more once the pages follow.
fn numa_run(migrate: bool) -> (Report, SimPlatform) {
    let m = crate::sim::tests::four_sockets();
    let sim =
        Sim::new(&m, Box::new(BusySocket0), 8, 0.01, 5, 40.0).with_memory(crate::sim::SimMemory {
            first_touch: crate::sim::FirstTouch::Node(0),
            boundness: 1.0,
            ..Default::default()
        });
    let mut p = SimPlatform::new(sim);
    let mut pl = plan(
        &m,
        launch(),
        CandidateSource::Explicit(vec![
            Pinning::pinned("node 0", (0..8).map(|c| 2 * c).collect()),
            Pinning::pinned("node 1", (0..8).map(|c| 16 + 2 * c).collect()),
        ]),
    );
    pl.migrate_memory = migrate;
    let r = go(&pl, &mut p).0.unwrap();
    (r, p)
}

/// The mean rate of the timeline after the decision (cold caches past).
fn decided_rate(r: &Report) -> f64 {
    let at = r.decision.as_ref().unwrap().at;
    let after: Vec<f64> = r
        .timeline
        .iter()
        .filter(|p| p.t > at + 0.5 && p.state == "decided")
        .map(|p| p.rate)
        .collect();
    assert!(
        after.len() > 50,
        "{} points after the decision",
        after.len()
    );
    after.iter().sum::<f64>() / after.len() as f64
}

#[test]
fn on_four_sockets_migration_after_the_decision_makes_memory_local() {
    let (moved, p) = numa_run(true);
    assert_eq!(moved.decision.as_ref().unwrap().candidate, "node 1");
    // Probed both, migrated once: at the decision, never for a probe.
    assert!(moved.probes.len() >= 2, "{} probes", moved.probes.len());
    assert_eq!(moved.decisions.len(), 1);
    assert_eq!(p.migrated.len(), 1, "{:?}", p.migrated);
    assert!(p.migrated[0].0 >= moved.decisions[0].at);
    let o = moved.memory_migrations[0].outcome.as_ref().unwrap();
    assert_eq!(o.to_nodes, vec![1]);
    assert_eq!(o.moved, std::collections::BTreeMap::from([(1, 8000)]));
    assert!(p
        .sim
        .pages()
        .iter()
        .all(|pg| pg == &std::collections::BTreeMap::from([(1, 1000)])));
    // Local memory: eight threads at full speed.
    let local = decided_rate(&moved);
    assert!((local / 8e9 - 1.0).abs() < 0.03, "rate {local:e}");

    let (stayed, p) = numa_run(false);
    assert_eq!(stayed.decision.as_ref().unwrap().candidate, "node 1");
    assert!(p.migrated.is_empty() && stayed.memory_migrations.is_empty());
    assert!(p
        .sim
        .pages()
        .iter()
        .all(|pg| pg == &std::collections::BTreeMap::from([(0, 1000)])));
    // The pages stayed one hop away: 10/16 of full speed.
    let remote = decided_rate(&stayed);
    assert!(
        (remote / (8e9 * 10.0 / 16.0) - 1.0).abs() < 0.03,
        "rate {remote:e}"
    );
    assert!(local > 1.5 * remote);
}

#[test]
fn migrate_files_reaches_the_platform_and_needs_migrate_memory() {
    let m = two_nodes();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    let mut pl = plan(&m, launch(), on_node_1());
    pl.search.strategy = StrategyChoice::Fixed;
    pl.migrate_files = true;
    let e = pl.validate().unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("add --migrate-memory"), "{e}");
    pl.migrate_memory = true;
    go(&pl, &mut p).0.unwrap();
    assert_eq!(p.migrated.len(), 1);
    assert!(p.migrated[0].3, "files asked for");
}

#[test]
fn refused_migration_warns_and_moves_nothing() {
    let m = two_nodes();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    p.migration = Err(OsError::PermissionDenied(
        "move_pages(1000): Operation not permitted".into(),
    ));
    let mut pl = plan(&m, launch(), on_node_1());
    pl.search.strategy = StrategyChoice::Fixed;
    pl.migrate_memory = true;
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    assert!(p.migrated.is_empty());
    let rec = &r.memory_migrations[0];
    assert!(rec.outcome.is_none());
    assert!(rec.error.as_deref().unwrap().contains("not permitted"));
    assert!(
        sink.said("failed, pages left where they were"),
        "{:?}",
        sink.messages
    );
    // The run itself goes on: a decision, the exit status.
    assert!(r.decision.is_some());
}

#[test]
fn memory_policy_reaches_the_launch_and_is_refused_for_attach() {
    let m = two_nodes();
    let policy =
        autopin_placement::mem_policy(autopin_placement::MemPolicyMode::Bind, Some("1"), &m)
            .unwrap();
    let mut p = SimPlatform::new(sim(&m, 2, 10.0));
    let mut pl = plan(&m, launch(), topology());
    pl.mem_policy = Some(policy.clone());
    go(&pl, &mut p).0.unwrap();
    assert_eq!(p.launched_with.unwrap().mem_policy, Some(policy.clone()));

    pl.target = TargetSpec::Attach {
        pid: 1000,
        duration: Some(1.0),
    };
    let e = pl.validate().unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("--migrate-memory"), "{e}");

    // A node the machine does not have (a plan built for another machine).
    pl.target = launch();
    pl.mem_policy = Some(autopin_placement::MemPolicy {
        nodes: vec![5],
        ..policy
    });
    let e = pl.validate().unwrap_err();
    assert!(e.to_string().contains("no NUMA node 5"), "{e}");
}

#[test]
fn phase_watch_and_autopin1_run_through_the_same_path() {
    let m = autopin_topology::source::synthetic::parse("package:4 l3:1 core:12 pu:2").unwrap();
    let s = Sim::new(&m, Box::new(HpcModel::default()), 16, 0.0, 1, 200.0);
    let topo: SimTopo = s.topo();
    let cands = crate::sim::structured_candidates(&topo, 16);
    let mut p = SimPlatform::new(s);
    let mut pl = plan(&m, launch(), CandidateSource::Explicit(cands.clone()));
    pl.search.strategy = StrategyChoice::Autopin1(crate::strategy::Autopin1Params {
        init: 1.0,
        warmup: 0.5,
        sample: 1.0,
    });
    pl.search.watch = Some(WatchParams::default());
    let r = go(&pl, &mut p).0.unwrap();
    let d = r.decision.unwrap();
    assert_eq!(r.strategy, "autopin1");
    assert_eq!(r.probes.len(), cands.len());
    let first = cands[0].cpu_list().map(<[u32]>::to_vec);
    assert_eq!(p.launched_with.unwrap().pin_at_birth, first);
    assert!(
        d.candidate
            .starts_with("4 package(s), one per core, pairs together"),
        "{}",
        d.candidate
    );
}

#[test]
fn the_meters_counting_mode_and_its_reason_reach_the_report() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 10.0));
    p.counting_mode = Some((
        "per-CPU on 0,1".into(),
        "per CPU on the target's CPUs (nothing else runs there)".into(),
    ));
    let r = go(&plan(&m, launch(), topology()), &mut p).0.unwrap();
    assert_eq!(r.counting_mode, "per-CPU on 0,1");
    assert!(r
        .notes
        .contains(&"counting: per CPU on the target's CPUs (nothing else runs there)".to_string()));
}

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counts what the engine asks of a launch's coordination: how many searches it wrapped
/// and how many plans went through the wrappers.
#[derive(Debug, Default)]
struct CountingCoordination {
    wrapped: AtomicUsize,
    plans: Arc<AtomicUsize>,
}

struct Counted {
    inner: Box<dyn crate::strategy::Strategy>,
    plans: Arc<AtomicUsize>,
}

impl crate::strategy::Strategy for Counted {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn next(&mut self, elapsed: f64) -> crate::strategy::Step {
        self.plans.fetch_add(1, Ordering::Relaxed);
        self.inner.next(elapsed)
    }
    fn record(&mut self, outcome: crate::strategy::ProbeOutcome) {
        self.inner.record(outcome)
    }
}

impl Coordination for CountingCoordination {
    fn wrap(
        &self,
        strategy: Box<dyn crate::strategy::Strategy>,
        _search: usize,
    ) -> Box<dyn crate::strategy::Strategy> {
        self.wrapped.fetch_add(1, Ordering::Relaxed);
        Box::new(Counted {
            inner: strategy,
            plans: self.plans.clone(),
        })
    }
    fn take_notes(&self) -> Vec<String> {
        vec![format!(
            "coordinated {} search(es)",
            self.wrapped.load(Ordering::Relaxed)
        )]
    }
}

#[test]
fn a_cluster_launch_is_recorded_and_its_searches_go_through_the_coordination() {
    let m = small();
    let coord = Arc::new(CountingCoordination::default());
    let record = crate::report::LaunchRecord {
        place: crate::report::JobPlace {
            launcher: crate::report::JobLauncher::Slurm,
            job: Some("7".into()),
            rank: 1,
            size: 2,
            local_rank: 1,
            local_size: 2,
            ..Default::default()
        },
        share: "2-3".into(),
        coordinated_with: vec![0, 1],
        combine: Some("min".into()),
        ..Default::default()
    };
    let mut pl = plan(&m, launch(), topology());
    pl.launch = Some(LaunchPlan {
        record: record.clone(),
        notes: vec!["launcher: slurm job 7".into()],
        coordination: Some(coord.clone()),
    });
    let mut p = SimPlatform::new(sim(&m, 4, 60.0));
    p.epoch = Some(1.7e9);
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    assert!(r.complete, "{:?}", r.incomplete_reason);
    assert!(r.decision.is_some());
    // Every search's strategy was wrapped, and the search ran through the wrapper.
    assert_eq!(coord.wrapped.load(Ordering::Relaxed), 1);
    assert!(
        coord.plans.load(Ordering::Relaxed) > 1,
        "{} plans",
        coord.plans.load(Ordering::Relaxed)
    );
    // The record is copied with the Unix time of the driver's start (sim time 0 here is
    // 1.7e9; the driver starts within the init period).
    let got = r.launch.clone().expect("the launch record");
    let origin = got.clock_origin.expect("a clock origin");
    assert!((1.7e9..1.7e9 + 1.0).contains(&origin), "{origin}");
    assert_eq!(
        crate::report::LaunchRecord {
            clock_origin: None,
            ..got
        },
        record
    );
    // The launch lines come before the objective's, the coordination's after the run.
    let at = |s: &str| r.notes.iter().position(|n| n.starts_with(s));
    assert!(at("launcher: slurm").unwrap() < at("objective: ").unwrap());
    assert_eq!(r.notes.last().unwrap(), "coordinated 1 search(es)");
    // The checkpoint before the search already says where the rank stands.
    assert_eq!(
        sink.checkpoints[0].launch.as_ref().map(|l| l.place.rank),
        Some(1)
    );
}

#[test]
fn an_openmp_start_up_seen_long_enough_ends_the_wait_for_a_heartbeat() {
    let m = small();
    let openmp = |beats_from: Option<f64>| {
        let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
        p.openmp_from = Some(0.05);
        p.beats_from = beats_from;
        p
    };
    let pl = plan(&m, launch(), topology());
    // Constructs from 0.05 s on and no heartbeat: the search begins 0.2 s after the first
    // construct (a tick dropped, a tick of start-up), not when the 0.5 s init ends, and the
    // start-up is still the OS placement's first probe.
    let (r, sink) = go(&pl, &mut openmp(None));
    let r = r.unwrap();
    assert_eq!(r.objective.source, "openmp");
    assert!(r.probes[0].startup, "{:?}", r.probes[0]);
    let first_pinned = &r.probes[1];
    assert!(
        (0.24..0.35).contains(&first_pinned.start),
        "{first_pinned:?} {:#?}",
        sink.messages
    );
    assert!(
        sink.messages
            .iter()
            .any(|m| m
                .contains("the program has run 0.3 s where the OS placed it; probing starts now")),
        "{:#?}",
        sink.messages
    );
    // Pinned at its birth (one explicit candidate), it waited as long, but not where the OS
    // placed it.
    let only = Pinning::from_cpus(vec![2, 3]);
    let pinned = plan(&m, launch(), CandidateSource::Explicit(vec![only]));
    let (_, sink) = go(&pinned, &mut openmp(None));
    assert!(
        sink.said("the program has run 0.3 s on the CPUs it started on; probing starts now")
            && !sink.said("where the OS placed it"),
        "{:#?}",
        sink.messages
    );
    // A program that beats within that time is measured by its heartbeat, as before.
    let (r, _) = go(&pl, &mut openmp(Some(0.25)));
    assert_eq!(r.unwrap().objective.source, "heartbeat");
}

#[test]
fn a_heartbeat_start_up_seen_long_enough_ends_the_init() {
    let m = small();
    let beating = |from: f64| {
        let mut p = SimPlatform::new(sim(&m, 2, 30.0));
        p.counting = Err(OsError::NotSupported("no PMU".into()));
        p.beats_from = Some(from);
        p
    };
    let pl = plan(&m, launch(), topology());
    let first_pinned = |r: &Report| first_search_probe(r).start;
    // Beats from 0.02 s: the tick after the first that counted any is the OS placement's
    // first probe, and the search begins then (0.2 s in), not when the 0.5 s init ends; nor
    // a tick later, which beside a busy CPU would keep the threads where the OS placed them
    // for one more tick.
    let (r, sink) = go(&pl, &mut beating(0.02));
    let r = r.unwrap();
    assert_eq!(r.objective.source, "heartbeat");
    assert!(r.probes[0].startup, "{:?}", r.probes[0]);
    assert!(
        first_pinned(&r) < 0.3,
        "{:?} {:#?}",
        r.probes,
        sink.messages
    );
    assert!(
        sink.said("probing starts once 0.1 s of its progress has been seen"),
        "{:#?}",
        sink.messages
    );
    // task-clock counts a program reading its input as much as one working: its init is
    // waited out whole.
    let mut p = beating(0.02);
    let mut tc = plan(&m, launch(), topology());
    tc.objective.chain = vec![ObjectiveSource::Requested, ObjectiveSource::TaskClock];
    let r = go(&tc, &mut p).0.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::TaskClock));
    assert!(first_pinned(&r) >= 0.5 - 1e-9, "{:?}", r.probes);
}

#[test]
fn a_plain_plan_has_no_launch_record() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 4, 60.0));
    p.epoch = Some(1.7e9);
    let (r, _) = go(&plan(&m, launch(), topology()), &mut p);
    assert!(r.unwrap().launch.is_none());
}

#[test]
fn the_run_says_what_it_is_doing_at_each_step() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 2, 30.0));
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    p.beats_from = Some(0.2);
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert!(r.complete);
    // The end of the start-up, where the OS placed the program, is the OS placement's
    // first probe: the first round probes the others only, and it costs the search nothing.
    let first = &r.probes[0];
    assert!(
        first.startup && first.label == "unpinned (OS decides)",
        "{first:?}"
    );
    let round_one: Vec<&str> = r.probes[1..3].iter().map(|p| p.label.as_str()).collect();
    assert!(!round_one.contains(&first.label.as_str()), "{round_one:?}");
    assert!(r.probes[1..].iter().all(|p| !p.startup));
    // Starting, waiting for a heartbeat, the search, each probe, the decision — in order.
    let at = |what: &str| {
        sink.messages
            .iter()
            .position(|m| m.starts_with(what))
            .unwrap_or_else(|| panic!("no {what:?} in {:#?}", sink.messages))
    };
    let steps = [
        at("starting ./prog"),
        at("waiting up to "),
        at("search 0: 3 candidates for 2 threads, strategy race"),
        at("probe "),
        at("decided after "),
    ];
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "{:#?}",
        sink.messages
    );
    // Rates read with three digits and their unit, durations with theirs.
    let probe = &sink.messages[steps[3]];
    assert!(
        probe.contains(" beats/s over ") && probe.ends_with(" ms (the end of the start-up)"),
        "{probe}"
    );
    let probe = &sink.messages[steps[3] + 1];
    assert!(
        probe.contains(" beats/s over ") && probe.ends_with(" ms"),
        "{probe}"
    );
}

fn binding_env() -> Vec<(String, String)> {
    vec![
        ("OMP_PROC_BIND".into(), "true".into()),
        ("OMP_PLACES".into(), "cores".into()),
    ]
}

#[test]
fn a_program_that_binds_its_own_threads_is_left_alone() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 4, 20.0).with_exit_code(5));
    p.env = binding_env();
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(
        r.own_binding.as_deref(),
        Some("OMP_PROC_BIND=true OMP_PLACES=cores")
    );
    assert!(
        r.probes.is_empty() && r.decision.is_none(),
        "{:?}",
        r.probes
    );
    assert_eq!(r.exit_status, Some(5));
    assert!(r.complete);
    assert!((r.wall_time - 20.0).abs() < 1.0, "waited {} s", r.wall_time);
    assert!(sink.said("stands back"), "{:?}", sink.messages);
    assert!(r.summary_lines().contains(
        &"final pinning: the program's own binding (OMP_PROC_BIND=true OMP_PLACES=cores)"
            .to_string()
    ));
    assert!(p.launched_with.unwrap().unset.is_empty());
}

#[test]
fn override_binding_unsets_the_variables_and_searches() {
    let m = small();
    let mut p = SimPlatform::new(sim(&m, 4, 60.0));
    p.env = binding_env();
    let mut pl = plan(&m, launch(), topology());
    pl.override_binding = true;
    let (r, _) = go(&pl, &mut p);
    let r = r.unwrap();
    assert_eq!(r.own_binding, None);
    assert!(r.decision.is_some(), "{:?}", r.incomplete_reason);
    let unset = p.launched_with.unwrap().unset;
    assert!(
        unset.contains(&"OMP_PROC_BIND".to_string()) && unset.contains(&"OMP_PLACES".to_string()),
        "{unset:?}"
    );
}

/// hwloc's 24em64t-2n6c2t-pci machine: GPUs G1 and G2 next to package 1 (odd CPUs).
fn gpu_machine() -> Machine {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/hwloc-xml/24em64t-2n6c2t-pci.xml"
    );
    autopin_topology::source::load_file(std::path::Path::new(path)).unwrap()
}

#[test]
fn a_program_with_a_gpu_open_gets_a_candidate_next_to_it() {
    let m = gpu_machine();
    let mut p = SimPlatform::new(sim(&m, 4, 60.0));
    p.opened_gpus = vec!["0000:14:00.0".into()];
    let (r, _) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    let near = r
        .candidates
        .iter()
        .find(|c| c.label.contains("GPU G2 0000:14:00.0"))
        .unwrap_or_else(|| panic!("{:?}", r.candidates));
    let cpus = near.cpus.clone().expect("a pinning");
    assert_eq!(cpus.len(), 4);
    assert!(
        cpus.iter().all(|c| c % 2 == 1),
        "next to package 1: {cpus:?}"
    );
    // Probed early: right after the OS placement.
    assert!(
        r.candidates.iter().position(|c| c.label == near.label) <= Some(1),
        "{:?}",
        r.candidates
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("the program has GPU G2 0000:14:00.0 open")),
        "{:?}",
        r.notes
    );
    // Without an open GPU, no such candidate.
    let mut p = SimPlatform::new(sim(&m, 4, 60.0));
    let (r, _) = go(&plan(&m, launch(), topology()), &mut p);
    assert!(!r
        .unwrap()
        .candidates
        .iter()
        .any(|c| c.label.contains("GPU")));
}

/// A settled remembered decision of `pinning`, with nothing else known (no runner-up, rate,
/// phases, objective or busy CPUs).
pub(super) fn settled(pinning: Pinning) -> Remembered {
    Remembered {
        pinning,
        runner_up: None,
        settled: true,
        trying_team: false,
        rate: None,
        phases: Vec::new(),
        objective: None,
        busy: None,
    }
}

/// The remembered decision of run `r`, as the decision store gives it back to the next run.
fn remembered_from(r: &Report) -> Remembered {
    let d = r.decision.as_ref().expect("a decision");
    Remembered {
        pinning: match &d.cpus {
            Some(cpus) => Pinning::pinned(d.candidate.clone(), cpus.clone()),
            None => Pinning::unpinned(),
        },
        runner_up: None,
        settled: true,
        trying_team: false,
        rate: d.rate.map(|v| (v, r.objective.unit.clone())),
        phases: Vec::new(),
        objective: ObjectiveSource::from_name(&r.objective.source),
        busy: r.busy_cpus.clone(),
    }
}

/// The distinct candidates the run probed.
fn probed(r: &Report) -> std::collections::BTreeSet<&str> {
    r.probes.iter().map(|p| p.label.as_str()).collect()
}

#[test]
fn a_hit_measured_with_openmp_progress_is_checked_without_waiting_for_a_heartbeat() {
    let m = small();
    // Constructs from 0.05 s on: waited for, a heartbeat that never comes ends its wait once
    // the OpenMP start-up has been seen (0.2 s after the first construct). Caches refill
    // within the warm-up after a move, so the rate the first run decided at (probes after
    // moves) is what threads born on the remembered pinning run at.
    let openmp = || {
        let mut p = openmp_without_pmu(sim(&m, 2, 30.0).with_cold(0.02));
        p.openmp_from = Some(0.05);
        p
    };
    let first = go(&plan(&m, launch(), topology()), &mut openmp())
        .0
        .unwrap();
    assert_eq!(first.objective.source, "openmp");
    let mut memory = remembered_from(&first);
    assert_eq!(memory.objective, Some(ObjectiveSource::OpenMpProgress));
    let mut pl = plan(&m, launch(), topology());
    let at = |r: &Report| r.decision.as_ref().expect("a decision").at;
    let heartbeat_wait = |sink: &SimSink| sink.said("for the program's heartbeat");
    // A record that does not say how it was measured: the heartbeat is waited for first.
    memory.objective = None;
    pl.remembered = Some(memory.clone());
    let (before, sink) = go(&pl, &mut openmp());
    let before = before.unwrap();
    assert!(heartbeat_wait(&sink), "{:?}", sink.messages);
    // One that does: OpenMP progress at once, and the check confirms on its first probe.
    memory.objective = Some(ObjectiveSource::OpenMpProgress);
    pl.remembered = Some(memory);
    let mut p = openmp();
    let (now, sink) = go(&pl, &mut p);
    let now = now.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::OpenMpProgress));
    assert!(!heartbeat_wait(&sink), "{:?}", sink.messages);
    assert!(sink.said("measured with OpenMP progress, so a heartbeat is not waited for"));
    assert_eq!(now.objective.source, "openmp");
    assert_eq!(now.objective.unit, first.objective.unit);
    assert_eq!(probed(&now).len(), 1, "{:?}", now.probes);
    assert!(at(&now) <= 0.5, "decided at {}", at(&now));
    assert!(at(&now) < at(&before), "{} vs {}", at(&now), at(&before));
    // The check began once the threads had their start-up time, not after the 0.25 s the
    // heartbeat was waited for.
    let began = |r: &Report| r.searches[0].start;
    assert!(began(&before) >= 0.25, "{:?}", before.searches);
    assert!(
        began(&now) <= Remembered::INIT + pl.search.tick + 1e-9,
        "{:?}",
        now.searches
    );
}

#[test]
fn a_hit_remembered_as_task_clock_waits_for_neither_heartbeat_nor_openmp_progress() {
    let m = small();
    let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
    let mut pl = plan(&m, launch(), topology());
    pl.remembered = Some(Remembered {
        objective: Some(ObjectiveSource::TaskClock),
        ..settled(Pinning::pinned("0,1", vec![0, 1]))
    });
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    assert_eq!(p.meter_opened, Some(ObjectiveSource::TaskClock));
    assert_eq!(r.objective.source, "task-clock");
    assert!(!sink.said("waiting up to"));
    // Its reason says why OpenMP progress is not measured (not that it cannot be).
    assert!(
        r.objective
            .reason
            .contains("the remembered decision was measured with task-clock"),
        "{}",
        r.objective.reason
    );
}

#[test]
fn a_program_launched_beside_a_busy_cpu_starts_pinned_off_it_and_its_start_up_is_that_probe() {
    let m = small();
    let beside = |busy: Vec<u32>| {
        let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
        p.busy = busy;
        p
    };
    let pl = plan(&m, launch(), topology());
    let mut p = beside(vec![0]);
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    // Born on the first topology candidate around CPU 0, for as many threads as CPUs.
    let expected = topology_candidates(&m, 4, 12, true, &[0])
        .into_iter()
        .find_map(|c| c.cpu_list().map(<[u32]>::to_vec))
        .unwrap();
    assert!(!expected[..2].contains(&0), "{expected:?}");
    let born = p.launched_with.as_ref().unwrap().pin_at_birth.clone();
    assert_eq!(born, Some(expected.clone()));
    assert_eq!(r.start, Start::PinnedAtBirth);
    assert!(
        sink.said("CPU(s) 0 busy with other work: the program started pinned to"),
        "{:?}",
        sink.messages
    );
    assert!(
        r.notes.iter().any(|n| n.contains("at launch")),
        "{:?}",
        r.notes
    );
    // The start-up is the first probe, of the candidate the program was born on (its two
    // threads on the list's first two CPUs); the OS placement is probed after it.
    let first = &r.probes[0];
    assert!(first.startup, "{:?}", r.probes);
    let cand = &r.candidates[first.candidate];
    assert_eq!(
        cand.cpus,
        Some(expected[..2].to_vec()),
        "{:?}",
        r.candidates
    );
    let os = r
        .candidates
        .iter()
        .position(|c| c.cpus.is_none())
        .expect("the OS placement is a candidate");
    assert!(
        r.probes[1..].iter().any(|p| p.candidate == os),
        "{:?}",
        r.probes
    );
    // Nothing busy, or every CPU busy: the program starts where the OS places it.
    for busy in [vec![], vec![0, 1, 2, 3]] {
        let mut p = beside(busy.clone());
        let r = go(&pl, &mut p).0.unwrap();
        assert_eq!(p.launched_with.unwrap().pin_at_birth, None, "{busy:?}");
        assert_eq!(r.start, Start::Os, "{busy:?}");
    }
    // A program that ends before the first probe ran where it was born, and says so.
    let mut short = openmp_without_pmu(sim(&m, 2, 0.05));
    short.busy = vec![0];
    let r = go(&pl, &mut short).0.unwrap();
    let why = r.incomplete_reason.unwrap_or_default();
    assert!(
        why.contains(&format!("it ran pinned to {}", cpu_text(&expected))),
        "{why}"
    );
    // Asked to start where the OS places it (`--start os`), it does, beside the busy CPU too.
    let mut os_pl = pl.clone();
    os_pl.start_off_busy = false;
    let mut p = beside(vec![0]);
    let r = go(&os_pl, &mut p).0.unwrap();
    assert_eq!(p.launched_with.unwrap().pin_at_birth, None);
    assert_eq!(r.start, Start::Os);
    // A program the preload library cannot sit in (a static executable) is not pinned at
    // birth whatever was asked: its start-up is the OS placement's.
    let mut p = beside(vec![0]);
    p.preload_active = false;
    let r = go(&pl, &mut p).0.unwrap();
    assert_eq!(r.start, Start::Os);
    assert!(r
        .probes
        .iter()
        .filter(|p| p.startup)
        .all(|p| r.candidates[p.candidate].cpus.is_none()));
}

#[test]
fn a_program_born_off_the_busy_cpus_is_searched_once_it_has_run_born_wait() {
    let m = small();
    let run = |busy: Vec<u32>, born_wait: f64| {
        let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
        p.busy = busy;
        let mut pl = plan(&m, launch(), topology());
        pl.search.born_wait = born_wait;
        go(&pl, &mut p).0.unwrap()
    };
    // Born off busy CPU 0: the program runs there until it has run 1.5 s, and the last
    // 0.1–0.3 s of that stretch is the pinning's first probe (not its first second).
    let r = run(vec![0], 1.5);
    assert_eq!(r.start, Start::PinnedAtBirth);
    assert!(first_search_probe(&r).start >= 1.45, "{:?}", r.probes);
    let tail = &r.probes[0];
    assert!(
        tail.startup && tail.duration <= 0.3 + 1e-6,
        "{:?}",
        r.probes
    );
    assert!(tail.start + tail.duration >= 1.45, "{:?}", r.probes);
    assert!(r.decision.is_some());
    // That tail, of a program well past its first second, is the pinning's probe of the
    // first round: the search begins with another candidate, not with the same pinning
    // measured again.
    let first = first_search_probe(&r);
    assert_ne!(first.candidate, tail.candidate, "{:?}", r.probes);
    // Without the wait (an init asked for), the search starts once the start-up shows
    // progress; nothing busy, the program starts where the OS places it and the wait does
    // not apply.
    for (busy, wait) in [(vec![0], 0.0), (vec![], 1.5)] {
        let r = run(busy.clone(), wait);
        assert!(
            first_search_probe(&r).start < 1.0,
            "{busy:?} {wait}: {:?}",
            r.probes
        );
    }
}

#[test]
fn an_init_asked_for_is_waited_in_full_where_the_progress_could_end_it_sooner() {
    // OpenMP progress, nothing busy: unasked, the init ends once the start-up has shown a
    // tick of progress; `--init 2` is two seconds before the first probe, as the help says.
    let m = small();
    let first_probe = |asked: bool| {
        let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
        let mut pl = plan(&m, launch(), topology());
        pl.search.init = 2.0;
        pl.search.init_asked = asked;
        first_search_probe(&go(&pl, &mut p).0.unwrap()).start
    };
    assert!(first_probe(false) < 1.0);
    assert!(first_probe(true) >= 1.95, "{}", first_probe(true));
}

#[test]
fn a_hit_beside_other_busy_cpus_is_searched_and_not_confirmed_by_its_rate() {
    let m = small();
    let beside = |busy: Vec<u32>| {
        let mut p = SimPlatform::new(sim(&m, 2, 30.0));
        p.busy = busy;
        p
    };
    let first = go(&plan(&m, launch(), topology()), &mut beside(vec![0]))
        .0
        .unwrap();
    assert_eq!(first.busy_cpus, Some(vec![0]));
    let memory = remembered_from(&first);
    let mut pl = plan(&m, launch(), topology());
    pl.remembered = Some(memory.clone());
    // The same neighbour: the remembered pinning at its rate is kept on its first probe.
    let (same, sink) = go(&pl, &mut beside(vec![0]));
    let same = same.unwrap();
    assert_eq!(same.busy_cpus, Some(vec![0]));
    assert_eq!(probed(&same).len(), 1, "{:?}", same.probes);
    assert_eq!(same.candidates.len(), memory.candidates().len());
    assert!(!sink.said("busy with other work now"));
    // The neighbour moved: the check searches the topology's candidates around it too,
    // the remembered pinning first.
    let (moved, sink) = go(&pl, &mut beside(vec![3]));
    let moved = moved.unwrap();
    assert_eq!(moved.busy_cpus, Some(vec![3]));
    assert!(
        sink.said(
            "busy with other work now: CPU(s) 3; when the remembered pinning was decided: CPU(s) 0"
        ),
        "{:?}",
        sink.messages
    );
    assert!(
        moved.candidates.len() > memory.candidates().len(),
        "{:?}",
        moved.candidates
    );
    assert_eq!(
        moved.candidates[0].cpus,
        memory.pinning.cpu_list().map(<[u32]>::to_vec)
    );
    assert!(probed(&moved).len() > 1, "{:?}", moved.probes);
    assert!(moved.decision.is_some());
    // Short enough for a program run again to finish it (and the record to follow).
    let StrategyChoice::Race(search) = search_strategy(&pl, true) else {
        panic!("not a race")
    };
    assert_eq!(search.budget, Remembered::MOVED_BUDGET);
    assert!(moved.decision.unwrap().at <= Remembered::INIT + 0.2 + Remembered::MOVED_BUDGET);
    // A record that does not say what was busy is checked as before.
    let mut unknown = memory;
    unknown.busy = None;
    pl.remembered = Some(unknown);
    let (r, _) = go(&pl, &mut beside(vec![3]));
    assert_eq!(probed(&r.unwrap()).len(), 1);
}

#[test]
fn the_birth_guess_counts_openmp_threads_and_leaves_a_binding_of_the_programs_own() {
    // Four two-way cores beside busy CPU 0, a program of 2 OpenMP threads: the first CPUs of
    // the list for as many threads as CPUs are 1 and 2, the first on the busy core's
    // sibling; OMP_NUM_THREADS says 2, and the program starts on the list for 2.
    let m = autopin_topology::source::synthetic::parse("package:1 core:4 pu:2").unwrap();
    let pl = plan(&m, launch(), topology());
    let first = |n: usize| {
        topology_candidates(&m, n, 12, true, &[0])
            .into_iter()
            .find_map(|c| c.cpu_list().map(<[u32]>::to_vec))
            .unwrap()
    };
    assert_ne!(first(8)[..2], first(2)[..], "the case this test is for");
    let with_env = |env: &[(&str, &str)]| {
        let mut p = openmp_without_pmu(sim(&m, 2, 30.0));
        p.busy = vec![0];
        p.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p
    };
    let mut p = with_env(&[("OMP_NUM_THREADS", "2")]);
    let r = go(&pl, &mut p).0.unwrap();
    assert_eq!(
        p.launched_with.unwrap().pin_at_birth,
        Some(first(2)),
        "{:?}",
        r.notes
    );
    // Its start-up is that candidate's first probe.
    let startup = r
        .probes
        .iter()
        .find(|p| p.startup)
        .expect("a start-up probe");
    assert_eq!(r.candidates[startup.candidate].cpus, Some(first(2)));
    // Nested counts name the outer level; without the variable, as many as CPUs.
    let mut p = with_env(&[("OMP_NUM_THREADS", "2,4")]);
    go(&pl, &mut p).0.unwrap();
    assert_eq!(p.launched_with.unwrap().pin_at_birth, Some(first(2)));
    for junk in [
        &[][..],
        &[("OMP_NUM_THREADS", "0")][..],
        &[("OMP_NUM_THREADS", "lots")][..],
    ] {
        let mut p = with_env(junk);
        go(&pl, &mut p).0.unwrap();
        assert_eq!(
            p.launched_with.unwrap().pin_at_birth,
            Some(first(8)),
            "{junk:?}"
        );
    }
    // A program that binds its own threads is left to that binding from its birth, unless
    // autopin is told to override it.
    let bound = [("OMP_NUM_THREADS", "2"), ("OMP_PROC_BIND", "true")];
    let mut p = with_env(&bound);
    let r = go(&pl, &mut p).0.unwrap();
    assert_eq!(p.launched_with.unwrap().pin_at_birth, None);
    assert_eq!(r.start, Start::Os);
    let mut over = pl.clone();
    over.override_binding = true;
    let mut p = with_env(&bound);
    go(&over, &mut p).0.unwrap();
    assert_eq!(p.launched_with.unwrap().pin_at_birth, Some(first(2)));
}

#[test]
fn a_decision_the_kernel_refuses_is_not_reported_as_in_force() {
    let m = small();
    // The cpuset no longer holds CPU 1: thread 1's mask of CPU 1 alone is refused.
    let mut p = SimPlatform::new(sim(&m, 2, 5.0).refusing_from(0.0, &CpuSet::from_cpus([1])));
    let mut pl = plan(
        &m,
        launch(),
        CandidateSource::Explicit(vec![Pinning::from_cpus(vec![0, 1])]),
    );
    pl.search.strategy = StrategyChoice::Fixed;
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    assert!(r.decision.is_some());
    let why = r.not_applied.clone().expect("the refusal is reported");
    assert!(why.contains("refused it for 1 thread"), "{why}");
    let line = r
        .summary_lines()
        .into_iter()
        .find(|l| l.starts_with("final pinning: "))
        .unwrap();
    assert!(line.contains("not in force"), "{line}");
    assert!(
        sink.said("decided pinning is the kernel refused"),
        "{:?}",
        sink.messages
    );
    // Applied in full, nothing of the kind is said.
    let mut p = SimPlatform::new(sim(&m, 2, 5.0));
    let (r, _) = go(&pl, &mut p);
    let r = r.unwrap();
    assert_eq!(r.not_applied, None);
}

#[test]
fn a_remembered_pinning_outside_the_allowed_cpus_is_refused() {
    let m = small();
    let mut pl = plan(&m, launch(), topology());
    pl.remembered = Some(settled(Pinning::from_cpus(vec![1, 4294967295])));
    let e = pl.validate().unwrap_err().to_string();
    assert!(e.contains("uses CPU 4294967295"), "{e}");
}

/// Pin expressions the user lists are read on the plan's machine when the run starts: a
/// rank of a launch whose share is the second package reads `N:0-1` there, and a pinning
/// listed twice (a CPU list and an expression) is probed once, with a line that says so.
#[test]
fn listed_expressions_are_read_on_the_plans_machine_when_the_run_starts() {
    let whole = small();
    let share = autopin_topology::CpuSet::parse_list("2-3").unwrap();
    let machine = autopin_placement::restrict_to(&whole, &share);
    let listed = ListedCandidates {
        lists: vec![Pinning::from_cpus(vec![2, 3])],
        expressions: vec!["N:0-1".into(), "N:1".into()],
        unpinned: true,
    };
    let mut p = plan(&machine, launch(), CandidateSource::Listed(listed.clone()));
    let mut sink = SimSink::default();
    let resolved = p
        .with_listed_resolved(&mut sink)
        .unwrap()
        .expect("listed candidates are read");
    let CandidateSource::Explicit(list) = &resolved.candidates else {
        panic!("not read: {:?}", resolved.candidates);
    };
    let cpus: Vec<Vec<u32>> = list.iter().map(|c| c.cpus().to_vec()).collect();
    assert_eq!(cpus, vec![vec![2, 3], vec![3], vec![]], "{list:?}");
    assert!(list[2].is_unpinned());
    assert!(
        sink.said("--candidates \"N:0-1\" is the same pinning as"),
        "{:?}",
        sink.messages
    );
    // On the whole machine the same expressions name the first package's CPUs.
    p.machine = whole;
    let resolved = p.with_listed_resolved(&mut sink).unwrap().unwrap();
    let CandidateSource::Explicit(list) = &resolved.candidates else {
        panic!("not read");
    };
    assert_eq!(list[1].cpus(), &[0, 1]);
    // An expression that cannot be read there is a usage error naming it.
    p.candidates = CandidateSource::Listed(ListedCandidates {
        expressions: vec!["S7:0".into()],
        ..listed
    });
    let e = p.with_listed_resolved(&mut sink).unwrap_err();
    assert!(e.to_string().contains("--candidates \"S7:0\""), "{e}");
}
