use super::*;
use crate::driver::{Driver, DriverConfig};
use crate::session::{Session, SessionConfig};
use crate::strategy::{Autopin1, Autopin1Params, Race, RaceParams, Strategy};

fn machine() -> Machine {
    autopin_topology::source::synthetic::parse("package:4 l3:1 core:12 pu:2").unwrap()
}

struct Run {
    chosen: Pinning,
    search_time: f64,
    report: crate::report::Report,
}

fn run(sim: &Sim, strategy: &str, init: f64) -> Run {
    let topo = sim.topo();
    let cands = structured_candidates(&topo, 16);
    let cands2 = cands.clone();
    let strategy = strategy.to_string();
    let cfg = SessionConfig {
        init,
        watch: None,
        ..SessionConfig::default()
    };
    let mut session = Session::new(
        cfg,
        Box::new(move |_| cands2.clone()),
        Box::new(move |n, _| -> Box<dyn Strategy> {
            match strategy.as_str() {
                "race" => Box::new(Race::new(
                    RaceParams {
                        budget: 120.0,
                        ..RaceParams::default()
                    },
                    n,
                )),
                _ => Box::new(Autopin1::new(Autopin1Params::paper(), n)),
            }
        }),
    );
    let (mut clock, mut threads, pinner, mut meter) =
        (sim.clone(), sim.clone(), sim.clone(), sim.clone());
    let mut quiet = |_: f64, _: &str| {};
    let mut until_decided = |s: &Session| !s.is_decided();
    let mut d = Driver {
        clock: &mut clock,
        threads: &mut threads,
        pinner: &pinner,
        meter: &mut meter,
        on_message: &mut quiet,
        keep_going: &mut until_decided,
    };
    let cfg = DriverConfig {
        tick: 0.1,
        allowed: CpuSet::from_cpus(topo.pus.iter().copied()),
        max_time: None,
        keep_masks: false,
    };
    d.run(&mut session, &cfg).unwrap();
    let report = session.report.clone();
    let dec = report.decision.clone().expect("decided");
    Run {
        chosen: cands[dec.candidate_index].clone(),
        search_time: report.search_time,
        report,
    }
}

#[test]
fn model_prefers_spreading_pairs_together() {
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 16, 0.0, 1, 1e9);
    let cands = structured_candidates(&sim.topo(), 16);
    assert!(cands.len() >= 8, "{} candidates", cands.len());
    let rates: Vec<f64> = cands.iter().map(|c| sim.true_rate(c)).collect();
    let best = rates.iter().cloned().fold(0.0, f64::max);
    let i = rates.iter().position(|r| *r == best).unwrap();
    assert!(
        cands[i]
            .label
            .starts_with("4 package(s), one per core, pairs together"),
        "{}",
        cands[i].label
    );
}

#[test]
fn race_finds_the_best_in_99_percent_of_seeds_and_beats_autopin1_on_time() {
    let seeds = 200u64;
    // Seeds are independent: spread them over the CPUs (each result depends on its seed only).
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let (good, race_time) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                scope.spawn(move || {
                    let mut good = 0u64;
                    let mut time = 0.0;
                    for seed in (0..seeds).filter(|s| s % workers == w) {
                        let sim = Sim::new(
                            &machine(),
                            Box::new(HpcModel::default()),
                            16,
                            0.05,
                            seed,
                            1e9,
                        );
                        let cands = structured_candidates(&sim.topo(), 16);
                        let best = cands.iter().map(|c| sim.true_rate(c)).fold(0.0, f64::max);
                        let r = run(&sim, "race", 0.5);
                        if sim.true_rate(&r.chosen) >= 0.99 * best {
                            good += 1;
                        }
                        time += r.search_time;
                    }
                    (good, time)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0u64, 0.0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 16, 0.05, 7, 1e9);
    let a1 = run(&sim, "autopin1", Autopin1Params::paper().init);
    let mean_race = race_time / seeds as f64;
    eprintln!(
        "race: {good}/{seeds} within 1%, mean search {mean_race:.1} s; autopin1 (paper) {:.1} s",
        a1.search_time
    );
    assert!(
        good * 100 >= seeds * 99,
        "race right in only {good}/{seeds} runs"
    );
    assert!(
        mean_race < a1.search_time,
        "race {mean_race} s vs autopin1 {} s",
        a1.search_time
    );
    // autopin1 probes every candidate once, t = 30 s each.
    assert_eq!(
        a1.report.probes.len(),
        structured_candidates(&sim.topo(), 16).len()
    );
}

/// A model where two candidates are within 0.3% of each other: either answer is right,
/// and the race must stop by the tolerance rule or the budget, not run forever.
struct NearTie;
impl RateModel for NearTie {
    fn rates(&self, _t: &SimTopo, p: &[Option<u32>]) -> Vec<f64> {
        let f = match p.first().copied().flatten() {
            Some(0) => 1.0,
            Some(2) => 0.997,
            _ => 0.5,
        };
        vec![f * 1e9; p.len()]
    }
}

#[test]
fn near_ties_end_within_budget() {
    let m = autopin_topology::source::synthetic::parse("package:1 core:4 pu:1").unwrap();
    let sim = Sim::new(&m, Box::new(NearTie), 1, 0.05, 3, 1e9);
    let cands = vec![
        Pinning::from_cpus(vec![0]),
        Pinning::from_cpus(vec![2]),
        Pinning::from_cpus(vec![1]),
    ];
    let cands2 = cands.clone();
    let mut session = Session::new(
        SessionConfig {
            watch: None,
            ..SessionConfig::default()
        },
        Box::new(move |_| cands2.clone()),
        Box::new(|n, _| {
            Box::new(Race::new(
                RaceParams {
                    budget: 15.0,
                    ..RaceParams::default()
                },
                n,
            ))
        }),
    );
    let (mut clock, mut threads, pinner, mut meter) =
        (sim.clone(), sim.clone(), sim.clone(), sim.clone());
    let mut quiet = |_: f64, _: &str| {};
    let mut until_decided = |s: &Session| !s.is_decided();
    let mut d = Driver {
        clock: &mut clock,
        threads: &mut threads,
        pinner: &pinner,
        meter: &mut meter,
        on_message: &mut quiet,
        keep_going: &mut until_decided,
    };
    let cfg = DriverConfig {
        tick: 0.1,
        allowed: CpuSet::from_cpus(0..4),
        max_time: None,
        keep_masks: false,
    };
    d.run(&mut session, &cfg).unwrap();
    let dec = session.report.decision.clone().unwrap();
    assert_ne!(dec.candidate, "1", "the clearly slower candidate must lose");
    assert!(
        session.report.search_time <= 15.0 + 0.2,
        "{}",
        session.report.search_time
    );
}

#[test]
fn program_ending_mid_search_gives_incomplete_report() {
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 16, 0.05, 1, 3.0);
    let topo = sim.topo();
    let cands = structured_candidates(&topo, 16);
    let mut session = Session::new(
        SessionConfig {
            watch: None,
            ..SessionConfig::default()
        },
        Box::new(move |_| cands.clone()),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    );
    let (mut clock, mut threads, pinner, mut meter) =
        (sim.clone(), sim.clone(), sim.clone(), sim.clone());
    let mut quiet = |_: f64, _: &str| {};
    let mut go = |_: &Session| true;
    let mut d = Driver {
        clock: &mut clock,
        threads: &mut threads,
        pinner: &pinner,
        meter: &mut meter,
        on_message: &mut quiet,
        keep_going: &mut go,
    };
    let cfg = DriverConfig {
        tick: 0.1,
        allowed: CpuSet::from_cpus(topo.pus.iter().copied()),
        max_time: None,
        keep_masks: false,
    };
    let out = d.run(&mut session, &cfg).unwrap();
    assert_eq!(out.exit_status, Some(0));
    assert!(!session.report.complete);
    assert!(session
        .report
        .incomplete_reason
        .as_deref()
        .unwrap()
        .contains("before a decision"));
    assert!(!session.report.probes.is_empty());
}

/// After the decision the workload changes (a new phase where splitting is better);
/// PhaseWatch must notice the drop and a re-search must move to the new best.
#[test]
fn phase_change_triggers_a_new_search() {
    struct Shift(Arc<Mutex<f64>>);
    impl RateModel for Shift {
        fn rates(&self, _t: &SimTopo, p: &[Option<u32>]) -> Vec<f64> {
            let late = *self.0.lock().unwrap() >= 10.0;
            let f = match (p.first().copied().flatten(), late) {
                (Some(0), false) | (Some(1), true) => 1.0,
                (Some(0), true) => 0.4,
                _ => 0.6,
            };
            vec![f * 1e9; p.len()]
        }
    }
    let m = autopin_topology::source::synthetic::parse("package:1 core:2 pu:1").unwrap();
    let clock_cell = Arc::new(Mutex::new(0.0));
    let sim = Sim::new(&m, Box::new(Shift(clock_cell.clone())), 1, 0.01, 2, 30.0);
    let cands = vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])];
    let mut session = Session::new(
        SessionConfig::default(),
        Box::new(move |_| cands.clone()),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    );
    let (mut clock, mut threads, pinner, mut meter) =
        (sim.clone(), sim.clone(), sim.clone(), sim.clone());
    let mut quiet = |_: f64, _: &str| {};
    let mut go = |_: &Session| {
        *clock_cell.lock().unwrap() = sim.now();
        true
    };
    let mut d = Driver {
        clock: &mut clock,
        threads: &mut threads,
        pinner: &pinner,
        meter: &mut meter,
        on_message: &mut quiet,
        keep_going: &mut go,
    };
    let cfg = DriverConfig {
        tick: 0.1,
        allowed: CpuSet::from_cpus(0..2),
        max_time: None,
        keep_masks: false,
    };
    d.run(&mut session, &cfg).unwrap();
    let r = &session.report;
    assert!(
        r.decisions.len() >= 2,
        "decisions: {:?}",
        r.decisions.iter().map(|d| &d.candidate).collect::<Vec<_>>()
    );
    assert_eq!(r.decisions[0].candidate, "0");
    assert_eq!(r.decision.as_ref().unwrap().candidate, "1");
    assert!(r.searches[1].trigger.contains("rate dropped"));
}

/// Total rate `base` split over the threads, `base × other` unless the placement is `best`.
struct Prefers {
    best: Vec<Option<u32>>,
    base: f64,
    other: f64,
}

impl RateModel for Prefers {
    fn rates(&self, _t: &SimTopo, p: &[Option<u32>]) -> Vec<f64> {
        let f = if p == self.best.as_slice() {
            1.0
        } else {
            self.other
        };
        vec![self.base * f / p.len().max(1) as f64; p.len()]
    }
}

/// A program alternating between a slow "barrier" phase (best on CPUs 0,1) and a 1000×
/// faster "triad" phase (best on CPUs 2,3), run for 60 s.
fn phased_run(seed: u64) -> crate::report::Report {
    let m = autopin_topology::source::synthetic::parse("package:1 core:4 pu:1").unwrap();
    let phases = vec![
        SimPhase {
            name: "barrier".into(),
            duration: 4.0,
            model: Box::new(Prefers {
                best: vec![Some(0), Some(1)],
                base: 1e3,
                other: 0.6,
            }),
        },
        SimPhase {
            name: "triad".into(),
            duration: 4.0,
            model: Box::new(Prefers {
                best: vec![Some(2), Some(3)],
                base: 1e6,
                other: 0.8,
            }),
        },
    ];
    let sim = Sim::new(&m, Box::new(HpcModel::default()), 2, 0.05, seed, 60.0).with_phases(phases);
    let cands = vec![
        Pinning::pinned("0,0", vec![0, 0]),
        Pinning::pinned("0,1", vec![0, 1]),
        Pinning::pinned("2,3", vec![2, 3]),
        Pinning::unpinned(),
    ];
    let mut session = Session::new(
        SessionConfig::default(),
        Box::new(move |_| cands.clone()),
        Box::new(|n, _| -> Box<dyn Strategy> { Box::new(Race::new(RaceParams::default(), n)) }),
    );
    let (mut clock, mut threads, pinner, mut meter) =
        (sim.clone(), sim.clone(), sim.clone(), sim.clone());
    let mut quiet = |_: f64, _: &str| {};
    let mut go = |_: &Session| true;
    let mut d = Driver {
        clock: &mut clock,
        threads: &mut threads,
        pinner: &pinner,
        meter: &mut meter,
        on_message: &mut quiet,
        keep_going: &mut go,
    };
    let cfg = DriverConfig {
        tick: 0.1,
        allowed: CpuSet::from_cpus(0..4),
        max_time: None,
        keep_masks: false,
    };
    d.run(&mut session, &cfg).unwrap();
    session.report.clone()
}

#[test]
fn phases_are_searched_separately_and_winners_reapplied() {
    for seed in 0..20 {
        let r = phased_run(seed);
        let winner = |phase: &str| {
            r.decisions
                .iter()
                .rev()
                .find(|d| d.phase.as_deref() == Some(phase))
                .and_then(|d| d.cpus.clone())
        };
        assert_eq!(winner("barrier"), Some(vec![0, 1]), "seed {seed}");
        assert_eq!(winner("triad"), Some(vec![2, 3]), "seed {seed}");
        // Every probe measured one phase only.
        assert!(r.probes.iter().all(|p| p.phase.is_some()), "seed {seed}");
        // Once both phases are decided, each phase runs with its own winner.
        let last_decision = r.decisions.iter().map(|d| d.at).fold(0.0, f64::max);
        // (The point of the interval in which the phase changes still shows the old pinning.)
        let after: Vec<_> = r
            .timeline
            .windows(2)
            .filter(|w| w[0].phase == w[1].phase)
            .map(|w| &w[1])
            .filter(|p| p.t > last_decision + 0.5 && p.state == "decided")
            .collect();
        assert!(after.len() > 50, "seed {seed}: {} points", after.len());
        for p in after {
            let want = if p.phase.as_deref() == Some("barrier") {
                1
            } else {
                2
            };
            assert_eq!(p.candidate, Some(want), "seed {seed} at t={}", p.t);
        }
    }
}
