//! The thread count in a run, end to end on the simulated machine: a barrier-synchronised
//! OpenMP program of two threads beside a busy CPU runs twice as fast as one thread on the
//! free CPU. Where the program cannot notice a smaller team, the search finds it mid-run;
//! where it may (it asked for its count outside a region), its count stays and the next
//! run is told to try; on an idle machine, and with `--threads keep`, nothing changes.

use super::tests::{go, launch, plan, settled, topology};
use super::*;
use crate::sensors::OsError;
use crate::sim::{BarrierModel, Sim, SimPlatform};
use autopin_objective::progress::TeamFlags;

fn two_cpus() -> Machine {
    autopin_topology::source::synthetic::parse("package:1 core:2 pu:1").unwrap()
}

/// The program on two CPUs, CPU 0 busy when `busy`, its preload library reporting `flags`.
fn platform(busy: bool, flags: u32) -> SimPlatform {
    platform_seeded(busy, flags, 3)
}

/// `platform` with the simulation's noise drawn from `seed`.
fn platform_seeded(busy: bool, flags: u32, seed: u64) -> SimPlatform {
    platform_for(busy, flags, seed, 12.0)
}

/// `platform_seeded` for a program that runs `seconds`.
fn platform_for(busy: bool, flags: u32, seed: u64, seconds: f64) -> SimPlatform {
    let m = two_cpus();
    let busy_cpus = if busy { vec![0] } else { vec![] };
    let model = BarrierModel {
        base: 10_000.0,
        busy: busy_cpus.clone(),
        stacked: 0.05,
    };
    let sim = Sim::new(&m, Box::new(model), 2, 0.02, seed, seconds).with_team(flags);
    let mut p = SimPlatform::new(sim);
    p.counting = Err(OsError::NotSupported("no PMU".into()));
    p.openmp_runtime = Some("libgomp.so.1".into());
    p.busy = busy_cpus;
    p
}

#[test]
fn beside_a_busy_cpu_one_thread_on_the_free_cpu_is_found_mid_run() {
    let m = two_cpus();
    let mut p = platform(true, 0);
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(
        r.objective.unit, "OpenMP team constructs/s",
        "{:?}",
        r.objective
    );
    let d = r.decision.clone().expect("decided");
    assert_eq!(d.team, Some(1), "{d:?}\n{:?}", sink.messages);
    assert_eq!(d.cpus, Some(vec![1]), "{d:?}");
    assert!(d.candidate.starts_with("1 thread: 1"), "{d:?}");
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!((t.searched.as_str(), t.own), ("mid-run", Some(2)), "{t:?}");
    assert!(r.candidates.iter().any(|c| c.team == Some(1)));
    // The team is in force at the end: the program runs one thread.
    assert_eq!(p.sim.team().map(|t| t.applied), Some(1));
    // Asked for from birth (fewer free CPUs than threads), on the CPU its first thread was
    // born on: the start-up is the team candidate's first probe.
    let l = p.launched_with.clone().expect("launched");
    assert_eq!(
        (l.want_at_birth, l.pin_at_birth),
        (Some(1), Some(vec![1, 0]))
    );
    assert!(
        r.probes[0].startup && r.probes[0].label.starts_with("1 thread: 1"),
        "{:?}",
        r.probes[0]
    );
    assert!(
        sink.said("its parallel regions are asked for 1 thread(s) from the second on"),
        "{:?}",
        sink.messages
    );
    assert!(
        sink.said("thread count: 1 thread: 1"),
        "{:?}",
        sink.messages
    );
}

#[test]
fn a_program_that_asked_for_its_count_keeps_it_and_the_next_run_is_told_to_try() {
    let m = two_cpus();
    let mut p = platform(true, TeamFlags::ASKED);
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    let d = r.decision.clone().expect("decided");
    assert_eq!(d.team, None, "{d:?}");
    assert_ne!(p.sim.team().map(|t| t.applied), Some(1));
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "across runs", "{t:?}");
    assert!(t.why.contains("asked for its thread count"), "{t:?}");
    assert_eq!(t.trial.as_ref().and_then(|c| c.team), Some(1), "{t:?}");
    assert!(
        sink.said("the next run starts with them to try"),
        "{:?}",
        sink.messages
    );
}

#[test]
fn a_program_that_names_the_count_it_was_started_with_is_told_to_try_fewer_next_run() {
    // GROMACS and LAMMPS read OMP_NUM_THREADS and set it themselves: a smaller one at the
    // next start reaches them.
    let m = two_cpus();
    let mut p = platform(true, 0);
    p.sim = p.sim.clone().with_named_team(2);
    let r = go(&plan(&m, launch(), topology()), &mut p).0.unwrap();
    assert_ne!(p.sim.team().map(|t| t.applied), Some(1));
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(
        (t.searched.as_str(), t.named),
        ("across runs", Some(2)),
        "{t:?}"
    );
    assert!(
        t.why.contains("it named 2, the count it was started with"),
        "{t:?}"
    );
    assert_eq!(t.trial.as_ref().and_then(|c| c.team), Some(1), "{t:?}");
    // Its arguments name the count too (GROMACS's `-ntomp 2`): a different
    // OMP_NUM_THREADS could conflict with them (GROMACS ends at once), so no trial.
    let mut p = platform(true, 0);
    p.sim = p.sim.clone().with_named_team(2);
    let argv = ["gmx", "mdrun", "-ntomp", "2"].map(String::from).to_vec();
    let r = go(&plan(&m, TargetSpec::Launch(argv), topology()), &mut p)
        .0
        .unwrap();
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(
        (t.searched.as_str(), t.trial.is_none()),
        ("no", true),
        "{t:?}"
    );
    assert!(t.why.contains("its arguments name 2 too"), "{t:?}");
    // One that names a count of its own, not its start's: no trial either.
    let mut p = platform(true, 0);
    p.sim = p.sim.clone().with_named_team(3);
    let r = go(&plan(&m, launch(), topology()), &mut p).0.unwrap();
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "no", "{t:?}");
    assert!(t.why.contains("it named 3, not the 2"), "{t:?}");
}

#[test]
fn thread_local_data_keeps_the_count_too() {
    let m = two_cpus();
    let mut p = platform(true, 0);
    p.thread_local_data = true;
    let r = go(&plan(&m, launch(), topology()), &mut p).0.unwrap();
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "across runs", "{t:?}");
    assert!(t.why.contains("thread-local data"), "{t:?}");
}

#[test]
fn an_idle_machine_and_keep_change_nothing() {
    let m = two_cpus();
    let mut p = platform(false, 0);
    let r = go(&plan(&m, launch(), topology()), &mut p).0.unwrap();
    assert_eq!(r.objective.unit, "OpenMP constructs/s");
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "no", "{t:?}");
    assert!(r.candidates.iter().all(|c| c.team.is_none()));
    let mut p = platform(true, 0);
    let mut pl = plan(&m, launch(), topology());
    pl.threads = ThreadsChoice::Keep;
    let r = go(&pl, &mut p).0.unwrap();
    assert_eq!(p.launched_with.clone().and_then(|l| l.want_at_birth), None);
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(
        (t.searched.as_str(), t.why.as_str()),
        ("no", "--threads keep")
    );
    assert!(r.candidates.iter().all(|c| c.team.is_none()));
}

/// A settled decision of one thread on CPU 1, taken while CPU 0 was busy.
fn one_thread_kept_beside_busy_cpu0() -> Remembered {
    Remembered {
        busy: Some(vec![0]),
        ..settled(Pinning::from_cpus(vec![1]).with_team(1))
    }
}

#[test]
fn a_count_asked_for_or_remembered_is_the_programs_from_its_start() {
    let m = two_cpus();
    let mut p = platform(true, 0);
    let mut pl = plan(&m, launch(), topology());
    pl.threads = ThreadsChoice::Count(1);
    go(&pl, &mut p).0.unwrap();
    assert_eq!(
        p.launched_with.as_ref().and_then(|l| l.team_at_birth),
        Some(1)
    );
    let mut p = platform(true, 0);
    let mut pl = plan(&m, launch(), topology());
    pl.remembered = Some(one_thread_kept_beside_busy_cpu0());
    let r = go(&pl, &mut p).0.unwrap();
    let l = p.launched_with.clone().expect("launched");
    assert_eq!((l.team_at_birth, l.pin_at_birth), (Some(1), Some(vec![1])));
    // A count memory keeps is measured per team, whatever unit its record was kept in: its
    // rate is held to the rate it was kept at, and a recheck's to its.
    assert_eq!(
        r.objective.unit, "OpenMP team constructs/s",
        "{:?}",
        r.objective
    );
    // The program's own count is the one it starts with without autopin (two, its CPUs),
    // not memory's one thread, which its library sees as its own.
    let t = r.threads.expect("the count is reported");
    assert_eq!(t.own, Some(2), "{t:?}");
    assert!(
        t.summary().contains("(the program's own count: 2)"),
        "{}",
        t.summary()
    );
}

/// `--threads N` reaches only an OpenMP runtime (OMP_NUM_THREADS): with none loaded, the
/// report says the program's threads stay its own rather than that it runs N.
#[test]
fn a_count_asked_of_a_program_without_openmp_is_said_to_stay_its_own() {
    let m = two_cpus();
    let mut p = platform(false, 0);
    p.openmp_runtime = None;
    let mut pl = plan(&m, launch(), topology());
    pl.threads = ThreadsChoice::Count(1);
    let r = go(&pl, &mut p).0.unwrap();
    let t = r.threads.expect("the count is reported");
    assert_eq!(t.searched, "no");
    assert!(
        t.why
            .contains("--threads 1 sets OMP_NUM_THREADS, but this is not an OpenMP program"),
        "{}",
        t.why
    );
}

/// A count remembered beside a busy CPU 0 holds while CPU 0 is busy; with CPU 0 free at
/// launch the program starts with its own count (the remembered one-CPU pinning is not
/// used at birth either), the report says the count was let go, and the search is afresh.
#[test]
fn a_count_remembered_beside_a_busy_cpu_is_let_go_when_every_cpu_is_free() {
    let m = two_cpus();
    let mut pl = plan(&m, launch(), topology());
    pl.remembered = Some(one_thread_kept_beside_busy_cpu0());
    let mut busy = platform(true, 0);
    let r = go(&pl, &mut busy).0.unwrap();
    assert_eq!(busy.launched_with.and_then(|l| l.team_at_birth), Some(1));
    assert_eq!(r.threads.and_then(|t| t.released), None);

    let mut idle = platform(false, 0);
    let (r, sink) = go(&pl, &mut idle);
    let r = r.unwrap();
    let l = idle.launched_with.expect("launched");
    assert_eq!((l.team_at_birth, l.pin_at_birth), (None, None));
    assert_eq!(r.threads.as_ref().and_then(|t| t.released), Some(1));
    assert!(
        r.candidates.iter().all(|c| c.team.is_none()),
        "{:?}",
        r.candidates
    );
    assert!(
        sink.messages.iter().any(|m| m.contains(
            "chosen beside CPU(s) 0 busy with other work; now no CPU busy: each of the program's 2 threads has a CPU of its own"
        )),
        "{:?}",
        sink.messages
    );
}

#[test]
fn a_program_that_names_its_own_team_sizes_is_not_searched() {
    let m = two_cpus();
    let mut p = platform(true, TeamFlags::CLAUSE);
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "no", "{t:?}");
    assert!(t.why.contains("num_threads clauses"), "{t:?}");
    assert_eq!(t.trial, None);
    assert!(r.candidates.iter().all(|c| c.team.is_none()));
    assert!(
        sink.said("thread count: not searched"),
        "{:?}",
        sink.messages
    );
}

#[test]
fn a_program_in_one_long_region_is_left_to_its_next_run() {
    let m = two_cpus();
    let mut p = platform(true, 0);
    p.sim = p.sim.clone().with_one_region();
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "across runs", "{t:?}\n{:?}", sink.messages);
    assert!(t.why.contains("one long parallel region"), "{t:?}");
    assert_eq!(t.trial.as_ref().and_then(|c| c.team), Some(1));
    assert!(r.candidates.iter().all(|c| c.team.is_none()));
}

/// The same program over in 1.2 s, before any search: why its count stayed is the one long
/// region it ran (a longer run would have kept it too), not that it ended first.
#[test]
fn a_short_program_in_one_long_region_is_told_that_as_the_reason() {
    let m = two_cpus();
    let mut p = platform_for(true, 0, 3, 1.2);
    p.sim = p.sim.clone().with_one_region();
    // (searched from 1.5 s on, as `run` does: over before that)
    let mut pl = plan(&m, launch(), topology());
    pl.search.init = 1.5;
    pl.search.init_asked = true;
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    assert!(r.decision.is_none(), "{:?}", r.decision);
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "across runs", "{t:?}\n{:?}", sink.messages);
    assert!(t.why.contains("one long parallel region"), "{t:?}");
    assert!(!t.why.contains("ended before a search"), "{t:?}");
    assert_eq!(t.trial.as_ref().and_then(|c| c.team), Some(1));
}

#[test]
fn a_program_that_ends_before_the_search_leaves_fewer_threads_to_its_next_run() {
    let m = two_cpus();
    // Over in 0.15 s, before any probe. It never asked for its count: the team asked at
    // birth reached it, and it ran one thread to its end.
    let short = |flags: u32| {
        let mut p = platform_for(true, flags, 3, 0.15);
        let r = go(&plan(&m, launch(), topology()), &mut p).0.unwrap();
        assert!(r.decision.is_none(), "{:?}", r.decision);
        let l = p.launched_with.clone().expect("launched");
        assert_eq!((l.want_at_birth, l.team_at_birth), (Some(1), None));
        (
            r.threads.expect("the count is reported"),
            p.sim.team().map(|t| t.applied),
        )
    };
    let (t, applied) = short(0);
    assert_eq!(
        (t.searched.as_str(), applied),
        ("across runs", Some(1)),
        "{t:?}"
    );
    assert!(
        t.why
            .contains("ran 1 thread(s) from its second parallel region"),
        "{t:?}"
    );
    assert!(t.why.contains("ended before a search"), "{t:?}");
    // Its next run starts with them (memory then starts it there from its first region).
    assert_eq!(t.trial.as_ref().and_then(|c| c.team), Some(1));
    // It asked for its count first: the team asked at birth was refused, it ran its own,
    // and its next run tries fewer from its start.
    let (t, applied) = short(TeamFlags::ASKED);
    assert_eq!(
        (t.searched.as_str(), applied),
        ("across runs", Some(0)),
        "{t:?}"
    );
    // Why its count stayed is what it did, not its length: a longer run would have kept
    // it too.
    assert!(t.why.contains("asked for its thread count"), "{t:?}");
    assert!(!t.why.contains("ended before a search"), "{t:?}");
    assert_eq!(t.trial.as_ref().and_then(|c| c.team), Some(1));
}

#[test]
fn a_probe_measures_only_while_its_team_is_the_programs() {
    // Regions of 0.15 s each: a team size asked of the program reaches it when the next
    // region begins. A stacked full-team candidate (1,1: 250 units/s) probed while a
    // one-thread region ran on read up to 7300 units/s, near the one-thread leader's
    // 10 000, before probes counted only readings with the candidate's team in force: the
    // slip that once kept `1,1` as a "significant win" (docs/threads.md). `1,1` is left
    // to the team now (`stacked_under_a_team`): `1,0`, two threads at about 5000 units/s,
    // is the whole team that follows the team's probes here (the rule itself:
    // `session::probe::tests`).
    let m = two_cpus();
    for seed in 0..5 {
        let mut p = platform_seeded(true, 0, seed);
        p.sim = p.sim.clone().with_regions_of(0.15);
        let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
        let r = r.unwrap();
        assert!(
            !r.candidates.iter().any(|c| c.label.starts_with("1,1 ")),
            "seed {seed}: {:?}",
            r.candidates
        );
        let whole_team: Vec<f64> = r
            .probes
            .iter()
            .filter(|p| p.label.starts_with("1,0 "))
            .map(|p| p.rate)
            .collect();
        assert!(!whole_team.is_empty(), "seed {seed}: {:?}", sink.messages);
        assert!(
            whole_team.iter().all(|r| *r < 6000.0),
            "seed {seed}: 1,0 runs at about 5000/s, read {whole_team:?}\n{:?}",
            sink.messages
        );
        assert!(
            r.probes.iter().any(|p| p.team_lag_intervals > 0),
            "seed {seed}: {:?}",
            r.probes
        );
        let d = r.decision.expect("decided");
        assert_eq!(d.team, Some(1), "seed {seed}: {d:?}");
        // The start-up ran the team asked at birth (one thread, from the second region
        // on): it is the team candidate's first probe.
        let first = &r.probes[0];
        assert!(
            first.startup && first.label.starts_with("1 thread: 1"),
            "{first:?}"
        );
    }
}

/// A recheck of a kept count (docs/threads.md): memory's pinning is the OS placement with
/// no team, tried from the start. The program starts with its own count, no team candidate
/// joins the search (the count is memory's in this run too, and the report says why), and
/// the run is measured on the team-free objective the kept count's rate was measured with.
#[test]
fn a_recheck_starts_the_programs_own_count_and_searches_only_its_pinnings() {
    let m = two_cpus();
    let mut p = platform(true, 0);
    let mut pl = plan(&m, launch(), topology());
    pl.remembered = Some(Remembered {
        settled: false,
        trying_team: true,
        // (kept in the per-thread unit, as a trial's run before the fix measured: the
        // recheck is measured per team all the same)
        rate: Some((5_000.0, "OpenMP constructs/s".into())),
        busy: Some(vec![0]),
        ..settled(Pinning::unpinned())
    });
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    let l = p.launched_with.clone().expect("launched");
    assert_eq!((l.team_at_birth, l.pin_at_birth), (None, None));
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "no", "{t:?}");
    assert!(t.why.contains("rechecks the program's own count"), "{t:?}");
    assert_eq!(t.released, None);
    assert!(
        r.candidates.iter().all(|c| c.team.is_none()),
        "{:?}\n{:?}",
        r.candidates,
        sink.messages
    );
    assert_eq!(r.objective.unit, "OpenMP team constructs/s");
    assert!(
        r.decision.and_then(|d| d.rate).is_some(),
        "{:?}",
        sink.messages
    );
}

/// On a machine with a PMU the default objective (instructions retired) counts every
/// thread's work, more with more threads: beside a busy CPU, where fewer threads may run
/// faster, the run measures the team-free OpenMP progress instead and searches the count
/// (before, the count was never searched where a PMU counts). Idle, the default stays; an
/// objective the user named stays too, and the count is then not searched.
#[test]
fn with_a_pmu_the_count_is_searched_on_team_free_progress_where_fewer_threads_may_win() {
    let m = two_cpus();
    let mut p = platform(true, 0);
    p.counting = Ok(());
    let (r, sink) = go(&plan(&m, launch(), topology()), &mut p);
    let r = r.unwrap();
    assert_eq!(
        r.objective.unit, "OpenMP team constructs/s",
        "{:?}",
        r.objective
    );
    assert!(
        r.objective.reason.contains("instead of the default"),
        "{:?}",
        r.objective
    );
    assert!(sink.said("rather than"), "{:?}", sink.messages);
    assert!(!sink.said("warning"), "{:?}", sink.messages);
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "mid-run", "{t:?}");
    assert_eq!(r.decision.and_then(|d| d.team), Some(1));

    let mut idle = platform(false, 0);
    idle.counting = Ok(());
    let r = go(&plan(&m, launch(), topology()), &mut idle).0.unwrap();
    assert_eq!(r.objective.source, "requested", "{:?}", r.objective);
    assert_eq!(r.threads.map(|t| t.searched), Some("no".to_string()));

    let mut named = platform(true, 0);
    named.counting = Ok(());
    let mut pl = plan(&m, launch(), topology());
    pl.objective = ObjectivePlan::explicit(pl.objective.requested.clone());
    let r = go(&pl, &mut named).0.unwrap();
    assert_eq!(r.objective.source, "requested", "{:?}", r.objective);
    let t = r.threads.expect("the count is reported");
    assert_eq!(t.searched, "no", "{t:?}");
    assert!(t.why.contains("not counted per team"), "{t:?}");
}

/// A team is asked at birth only where the count is searched and the library can apply
/// it: an executable with thread-local data of its own (maybe threadprivate data) is not
/// asked (the platform says so), and starts its own count on the pinning it was born on;
/// an objective the user named keeps the count, so nothing is asked either.
#[test]
fn no_team_is_asked_at_birth_where_it_could_not_be_searched() {
    let m = two_cpus();
    let mut p = platform(true, 0);
    p.thread_local_data = true;
    let r = go(&plan(&m, launch(), topology()), &mut p).0.unwrap();
    assert_eq!(p.sim.team().map(|t| (t.want, t.applied)), Some((0, 0)));
    assert!(
        r.probes[0].startup && r.probes[0].label.starts_with("1,0 "),
        "{:?}",
        r.probes[0]
    );

    let mut p = platform(true, 0);
    let mut pl = plan(&m, launch(), topology());
    pl.objective = ObjectivePlan::explicit(pl.objective.requested.clone());
    p.counting = Ok(());
    go(&pl, &mut p).0.unwrap();
    assert_eq!(p.launched_with.and_then(|l| l.want_at_birth), None);
    assert_eq!(p.sim.team().map(|t| t.want), Some(0));
}

/// A remembered decision whose runner-up is one thread on the free CPU (the best so far of a
/// search the program's end cut short, beside the same busy CPU): the check races it, and
/// finding it mid-run is the count searched mid-run, not left to the next run's start.
#[test]
fn a_remembered_runner_up_of_fewer_threads_found_in_a_check_is_the_count_searched_mid_run() {
    let m = two_cpus();
    let mut p = platform(true, 0);
    let mut pl = plan(&m, launch(), topology());
    pl.remembered = Some(Remembered {
        settled: false,
        runner_up: Some(Pinning::from_cpus(vec![1]).with_team(1)),
        busy: Some(vec![0]),
        ..settled(Pinning::from_cpus(vec![1, 0]))
    });
    let (r, sink) = go(&pl, &mut p);
    let r = r.unwrap();
    let d = r.decision.clone().expect("decided");
    assert_eq!(d.team, Some(1), "{d:?}\n{:?}", sink.messages);
    let t = r.threads.clone().expect("the count is reported");
    assert_eq!(t.searched, "mid-run", "{t:?}");
    assert!(t.trial.is_none(), "{t:?}");
    assert_eq!(p.sim.team().map(|t| t.applied), Some(1));
}

/// A decision remembered while every CPU was free, checked beside a busy CPU 0 (settled or
/// the best so far of an unfinished search alike): fewer threads join the check as they
/// would a search of its own, and one thread on the free CPU is found mid-run, in this run
/// rather than from the next one's start.
#[test]
fn a_decision_from_an_idle_machine_checked_beside_a_busy_cpu_searches_fewer_threads_too() {
    let m = two_cpus();
    for settled_then in [true, false] {
        let mut p = platform(true, 0);
        let mut pl = plan(&m, launch(), topology());
        pl.remembered = Some(Remembered {
            settled: settled_then,
            runner_up: Some(Pinning::from_cpus(vec![0, 1])),
            busy: Some(vec![]),
            ..settled(Pinning::unpinned())
        });
        let (r, sink) = go(&pl, &mut p);
        let r = r.unwrap();
        assert!(
            sink.said("the topology's candidates around them join the check"),
            "{:?}",
            sink.messages
        );
        assert!(
            r.candidates.iter().any(|c| c.team == Some(1)),
            "{:?}",
            r.candidates
        );
        let d = r.decision.clone().expect("decided");
        assert_eq!(
            d.team,
            Some(1),
            "settled {settled_then}: {d:?}\n{:?}",
            sink.messages
        );
        let t = r.threads.clone().expect("the count is reported");
        assert_eq!(t.searched, "mid-run", "{t:?}");
    }
}
