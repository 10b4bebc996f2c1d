use super::*;
use crate::driver::{Driver, DriverConfig, DECIDED_TICK};
use crate::sensors::{Meter, OsError, Reading, ThreadSnapshot, ThreadSource};
use crate::session::{Session, SessionConfig};
use crate::strategy::{Autopin1, Autopin1Params, Race, RaceParams, Strategy};
use std::collections::BTreeMap;

fn machine() -> Machine {
    autopin_topology::source::synthetic::parse("package:4 l3:1 core:12 pu:2").unwrap()
}

/// The driver's set-up in these tests: 0.1 s ticks over `allowed`, until the program ends.
fn driver_config(allowed: CpuSet) -> DriverConfig {
    DriverConfig {
        tick: 0.1,
        allowed,
        max_time: None,
        keep_masks: false,
        started: 0.0,
        respect_own_binding: true,
    }
}

/// Runs `session` on the simulated program to its end (or until `keep_going` says stop).
fn drive(
    sim: &Sim,
    session: &mut Session,
    cfg: &DriverConfig,
    keep_going: &mut dyn FnMut(&Session) -> bool,
) -> Result<crate::driver::Outcome, crate::error::EngineError> {
    let (mut clock, mut threads, pinner, mut meter) =
        (sim.clone(), sim.clone(), sim.clone(), sim.clone());
    let mut quiet = |_: f64, _: &str| {};
    Driver {
        clock: &mut clock,
        threads: &mut threads,
        pinner: &pinner,
        meter: &mut meter,
        on_message: &mut quiet,
        keep_going,
    }
    .run(session, cfg)
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
        Box::new(move |_| cands2.clone().into()),
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
    let mut until_decided = |s: &Session| !s.is_decided();
    let cfg = driver_config(CpuSet::from_cpus(topo.pus.iter().copied()));
    drive(sim, &mut session, &cfg, &mut until_decided).unwrap();
    let report = session.report.clone();
    let dec = report.decision.clone().expect("decided");
    Run {
        chosen: cands[dec.candidate_index].clone(),
        search_time: report.search_time,
        report,
    }
}

#[test]
fn a_warm_up_shorter_than_a_tick_costs_its_own_length() {
    // The race warms up for 0.02 s after each move. The driver reads the counters when the
    // warm-up ends and starts its tick grid again from there, so the gap between two probes
    // is the warm-up, not the rest of a 0.1 s tick; every probe still measures whole ticks.
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 16, 0.02, 7, 1e9);
    let r = run(&sim, "race", 0.5).report;
    let warm = RaceParams::default().warmup;
    assert!(warm < 0.1, "the default warm-up is {warm} s");
    let mut moved = 0;
    for w in r.probes.windows(2) {
        let gap = w[1].start - (w[0].start + w[0].duration);
        if w[1].warmup > 0.0 {
            moved += 1;
            assert!((gap - warm).abs() < 1e-6, "gap {gap} s: {:?}", w[1]);
        } else {
            assert!(gap.abs() < 1e-6, "gap {gap} s: {:?}", w[1]);
        }
        // (A warm-up that read the candidate far behind is its whole probe.)
        let at_warmup = (w[1].duration - warm).abs() < 1e-6 && w[1].intervals == 1;
        let ticks = w[1].duration / 0.1;
        assert!(
            at_warmup || (ticks - ticks.round()).abs() < 1e-6,
            "{:?}",
            w[1]
        );
    }
    assert!(moved >= 3, "{:?}", r.probes);
}

/// The simulation's meter, recording when it was read and what it was told.
struct RecordingMeter {
    sim: Sim,
    reads: Vec<f64>,
    whole_program: Vec<(f64, bool)>,
}

impl Meter for RecordingMeter {
    fn read(&mut self, threads: &[u32]) -> Result<Reading, OsError> {
        self.reads.push(self.sim.now());
        self.sim.read(threads)
    }
    fn whole_program(&mut self, yes: bool) {
        self.whole_program.push((self.sim.now(), yes));
    }
}

/// A race over the structured candidates for 16 threads, 0.5 s of start-up, no phase watch.
fn race_session(sim: &Sim) -> Session {
    race_session_over(structured_candidates(&sim.topo(), 16))
}

/// A race over `cands`, 0.5 s of start-up, no phase watch.
fn race_session_over(cands: Vec<Pinning>) -> Session {
    Session::new(
        SessionConfig {
            init: 0.5,
            watch: None,
            ..SessionConfig::default()
        },
        Box::new(move |_| cands.clone().into()),
        Box::new(|n, _| -> Box<dyn Strategy> { Box::new(Race::new(RaceParams::default(), n)) }),
    )
}

/// Drives `session` on `sim` (its clock and pinner), with these threads and meter, for
/// `max_time` seconds over every CPU.
fn drive_for(
    sim: &Sim,
    session: &mut Session,
    threads: &mut dyn ThreadSource,
    meter: &mut dyn Meter,
    max_time: f64,
) -> crate::driver::Outcome {
    drive_with(sim, session, threads, meter, &sim.clone(), max_time)
}

/// [`drive_for`] with another pinner.
fn drive_with(
    sim: &Sim,
    session: &mut Session,
    threads: &mut dyn ThreadSource,
    meter: &mut dyn Meter,
    pinner: &dyn Pinner,
    max_time: f64,
) -> crate::driver::Outcome {
    let mut clock = sim.clone();
    let mut quiet = |_: f64, _: &str| {};
    let mut always = |_: &Session| true;
    Driver {
        clock: &mut clock,
        threads,
        pinner,
        meter,
        on_message: &mut quiet,
        keep_going: &mut always,
    }
    .run(
        session,
        &DriverConfig {
            max_time: Some(max_time),
            ..driver_config(CpuSet::from_cpus(sim.topo().pus.iter().copied()))
        },
    )
    .unwrap()
}

/// The simulation's meter read as a whole: the program's total, no per-thread amounts (as
/// autopin reads a program of thousands of threads).
struct WholeMeter(Sim);

impl Meter for WholeMeter {
    fn read(&mut self, threads: &[u32]) -> Result<Reading, OsError> {
        let mut r = self.0.read(threads)?;
        r.total = Some(r.per_thread.values().sum());
        r.per_thread.clear();
        Ok(r)
    }
}

/// The simulation's threads and one more, alive from `born` to `gone` seconds.
struct OneMoreThread {
    sim: Sim,
    born: f64,
    gone: f64,
}

impl ThreadSource for OneMoreThread {
    fn poll(&mut self) -> Result<ThreadSnapshot, OsError> {
        let mut snap = self.sim.poll()?;
        let now = self.sim.now();
        if now >= self.born && now < self.gone {
            snap.all.push(99_999);
        }
        Ok(snap)
    }
}

#[test]
fn a_thread_born_or_gone_disturbs_an_interval_also_when_the_program_is_read_as_a_whole() {
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 16, 0.02, 3, 1e9);
    let mut session = race_session(&sim);
    let (born, gone) = (1.05, 1.35);
    let mut threads = OneMoreThread {
        sim: sim.clone(),
        born,
        gone,
    };
    let mut meter = WholeMeter(sim.clone());
    drive_for(&sim, &mut session, &mut threads, &mut meter, 3.0);
    let probes = &session.report.probes;
    // The first probe that ends after the thread came (or went) saw it come (or go).
    let seen = |t: f64| {
        probes
            .iter()
            .find(|p| p.start + p.warmup + p.duration >= t)
            .expect("a probe then")
    };
    let (at_birth, at_end) = (seen(born), seen(gone));
    assert!(at_birth.disturbed_intervals > 0, "{at_birth:?}");
    assert!(at_end.disturbed_intervals > 0, "{at_end:?}");
    let undisturbed = probes
        .iter()
        .filter(|p| p.start > gone + 0.2 || p.start + p.warmup + p.duration + 0.2 < born)
        .filter(|p| p.disturbed_intervals == 0)
        .count();
    assert!(undisturbed >= 3, "{probes:?}");
}

/// The simulation's pinner, counting the masks read and set.
/// A race between `cands` driven for 4 s over `sim`: the masks it set, those it read, and
/// the session.
fn race_counting_masks(sim: &Sim, cands: Vec<Pinning>) -> (usize, usize, Session) {
    let mut session = race_session_over(cands);
    let pinner = CountingPinner {
        sim: sim.clone(),
        reads: Default::default(),
        sets: Default::default(),
    };
    drive_with(
        sim,
        &mut session,
        &mut sim.clone(),
        &mut sim.clone(),
        &pinner,
        4.0,
    );
    (pinner.sets.into_inner(), pinner.reads.into_inner(), session)
}

struct CountingPinner {
    sim: Sim,
    reads: std::sync::atomic::AtomicUsize,
    sets: std::sync::atomic::AtomicUsize,
}

impl Pinner for CountingPinner {
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> Result<(), crate::pinner::PinError> {
        self.sets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.sim.set_affinity(tid, cpus)
    }
    fn affinity(&self, tid: i32) -> Result<CpuSet, crate::pinner::PinError> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.sim.affinity(tid)
    }
}

#[test]
fn moving_a_thousand_threads_reads_a_share_of_their_masks_not_each_twice() {
    // Before each move a thread's mask was read (was it bound by someone else?) and read
    // again after (what the kernel kept): two system calls per thread per move. Inside the
    // allowed CPUs the kernel keeps what was asked, and beyond 256 threads a rotating share
    // is looked at before a move (the periodic looks cover the rest).
    let n = 1024;
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), n, 0.02, 3, 1e9);
    // Two spreads of the threads over the CPUs, one shifted by a CPU: every move moves all.
    let pus = sim.topo().pus.clone();
    let spread =
        |shift: usize| -> Vec<u32> { (0..n).map(|i| pus[(i + shift) % pus.len()]).collect() };
    let cands = vec![
        Pinning::pinned("spread", spread(0)),
        Pinning::pinned("shifted", spread(1)),
    ];
    let (sets, reads, _) = race_counting_masks(&sim, cands);
    assert!(
        sets >= 3 * n,
        "only {sets} masks set: too few moves to judge"
    );
    assert!(
        (reads as f64) < 0.3 * sets as f64,
        "{reads} masks read for {sets} set"
    );
}

#[test]
fn a_move_sets_only_the_masks_of_threads_that_change_cpu() {
    // Two candidates that put every even thread on the same CPU: a move between them sets
    // the odd threads' masks only (a system call each; thousands a move at thousands of
    // threads), and a tick without a move or a new thread sets none.
    let n = 1024;
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), n, 0.02, 3, 1e9);
    let pus = sim.topo().pus.clone();
    let spread = |odd_shift: usize| -> Vec<u32> {
        (0..n)
            .map(|i| pus[(i + (i % 2) * odd_shift) % pus.len()])
            .collect()
    };
    let cands = vec![
        Pinning::pinned("spread", spread(0)),
        Pinning::pinned("odd shifted", spread(1)),
    ];
    let (sets, _, session) = race_counting_masks(&sim, cands);
    let moves = session.report.probes.len();
    assert!(moves >= 3, "only {moves} probes: too few moves to judge");
    // The first placement sets every mask; each later move at most the odd half.
    assert!(
        sets <= n + moves * n / 2,
        "{sets} masks set for {moves} moves of {n} threads"
    );
}

#[test]
fn once_decided_the_driver_reads_at_a_slower_pace_and_detaches_on_time() {
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 16, 0.02, 3, 1e9);
    let mut session = race_session(&sim);
    let mut meter = RecordingMeter {
        sim: sim.clone(),
        reads: Vec::new(),
        whole_program: Vec::new(),
    };
    let max_time = 40.2;
    let out = drive_for(&sim, &mut session, &mut sim.clone(), &mut meter, max_time);
    let decided = session.report.search_time + 0.5;
    assert!(decided < 30.0, "no decision to test with: {decided} s");
    assert!(
        (out.elapsed - max_time).abs() < 1e-6,
        "detached at {} s, asked for {max_time} s",
        out.elapsed
    );
    // The meter is told once, when the decision comes into force.
    assert_eq!(meter.whole_program.len(), 1, "{:?}", meter.whole_program);
    assert!(meter.whole_program[0].1);
    let switched = meter.whole_program[0].0;
    assert!((switched - decided).abs() < 0.2, "{switched} vs {decided}");
    for w in meter.reads.windows(2) {
        let gap = w[1] - w[0];
        if w[0] < switched - 1e-9 {
            assert!(
                gap <= 0.1 + 1e-6,
                "a {gap} s gap while searching at {} s",
                w[0]
            );
        } else if w[1] < max_time - 1e-9 && w[0] > switched + 1e-9 {
            assert!(
                (gap - DECIDED_TICK).abs() < 1e-6,
                "a {gap} s gap at {} s",
                w[0]
            );
        }
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
        Box::new(move |_| cands2.clone().into()),
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
    let mut until_decided = |s: &Session| !s.is_decided();
    let cfg = driver_config(CpuSet::from_cpus(0..4));
    drive(&sim, &mut session, &cfg, &mut until_decided).unwrap();
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
    // 1.5 s: the race decides among these candidates in about 2 s.
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 16, 0.05, 1, 1.5);
    let topo = sim.topo();
    let cands = structured_candidates(&topo, 16);
    let mut session = Session::new(
        SessionConfig {
            watch: None,
            ..SessionConfig::default()
        },
        Box::new(move |_| cands.clone().into()),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    );
    let mut go = |_: &Session| true;
    let cfg = driver_config(CpuSet::from_cpus(topo.pus.iter().copied()));
    let out = drive(&sim, &mut session, &cfg, &mut go).unwrap();
    assert_eq!(out.exit_status, Some(0));
    assert!(!session.report.complete);
    assert!(session
        .report
        .incomplete_reason
        .as_deref()
        .unwrap()
        .contains("during the search"));
    assert!(session
        .report
        .incomplete_reason
        .as_deref()
        .unwrap()
        .contains("best so far: "));
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
        Box::new(move |_| cands.clone().into()),
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
    let cfg = driver_config(CpuSet::from_cpus(0..2));
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
    phased_run_with(seed, SessionConfig::default())
}

fn phased_run_with(seed: u64, cfg: SessionConfig) -> crate::report::Report {
    let phases = vec![
        prefers_phase("barrier", 4.0, [0, 1], 1e3, 0.6),
        prefers_phase("triad", 4.0, [2, 3], 1e6, 0.8),
    ];
    let cands = vec![
        Pinning::pinned("0,0", vec![0, 0]),
        Pinning::pinned("0,1", vec![0, 1]),
        Pinning::pinned("2,3", vec![2, 3]),
        Pinning::unpinned(),
    ];
    run_phases(phases, cands, cfg, None, (seed, 60.0))
}

/// A phase `name` of `duration` seconds whose rate `base` is best on CPUs `best`, `other`
/// times it elsewhere.
fn prefers_phase(name: &str, duration: f64, best: [u32; 2], base: f64, other: f64) -> SimPhase {
    SimPhase {
        name: name.into(),
        duration,
        model: Box::new(Prefers {
            best: best.iter().map(|c| Some(*c)).collect(),
            base,
            other,
        }),
    }
}

/// A 2-thread program going through `phases` on four cores, searched with the race over
/// `cands` (`os`: the OS placement among them); (seed, seconds it runs).
fn run_phases(
    phases: Vec<SimPhase>,
    cands: Vec<Pinning>,
    cfg: SessionConfig,
    os: Option<usize>,
    (seed, seconds): (u64, f64),
) -> crate::report::Report {
    let m = autopin_topology::source::synthetic::parse("package:1 core:4 pu:1").unwrap();
    let sim =
        Sim::new(&m, Box::new(HpcModel::default()), 2, 0.05, seed, seconds).with_phases(phases);
    let mut session = Session::new(
        cfg,
        Box::new(move |_| cands.clone().into()),
        Box::new(move |n, _| -> Box<dyn Strategy> {
            let mut r = Race::new(RaceParams::default(), n);
            if let Some(o) = os {
                r.set_os_placement(o);
            }
            Box::new(r)
        }),
    );
    let mut go = |_: &Session| true;
    let cfg = driver_config(CpuSet::from_cpus(0..4));
    drive(&sim, &mut session, &cfg, &mut go).unwrap();
    session.report.clone()
}

/// The phased program's session with both phases remembered: barrier on `barrier`, triad
/// on 2,3.
fn remembering(barrier: &str) -> SessionConfig {
    SessionConfig {
        remembered_phases: vec![
            ("barrier".into(), barrier.into(), Some(1e3)),
            ("triad".into(), "2,3".into(), Some(1e6)),
        ],
        ..SessionConfig::default()
    }
}

#[test]
fn phases_remembered_from_an_earlier_run_apply_without_a_search() {
    // Both phases were decided in an earlier run: each gets its pinning as it comes, and
    // nothing is probed.
    let cfg = remembering("0,1");
    let r = phased_run_with(3, cfg);
    assert!(r.probes.is_empty(), "probed: {:?}", r.probes.len());
    assert!(r.searches.is_empty(), "{:?}", r.searches);
    let phases: Vec<_> = r
        .decisions
        .iter()
        .map(|d| (d.phase.clone().unwrap_or_default(), d.candidate.clone()))
        .collect();
    assert!(
        phases.contains(&("barrier".into(), "0,1".into())),
        "{phases:?}"
    );
    assert!(
        phases.contains(&("triad".into(), "2,3".into())),
        "{phases:?}"
    );
    assert!(r.decisions.iter().all(|d| d.strategy == "memory"));
    // Each phase runs on its own pinning (the interval spanning a change aside).
    let after: Vec<_> = r
        .timeline
        .windows(2)
        .filter(|w| w[0].phase == w[1].phase && w[1].t > 1.0)
        .map(|w| &w[1])
        .collect();
    assert!(after.len() > 50);
    for p in after {
        let want = if p.phase.as_deref() == Some("barrier") {
            1
        } else {
            2
        };
        assert_eq!(p.candidate, Some(want), "t={}", p.t);
    }
}

#[test]
fn a_remembered_phase_that_became_wrong_is_searched_again() {
    // The earlier run's barrier pinning (0,0) is 40% slower than 0,1 today: the phase watch
    // sees the rate below the remembered one and the phase is searched again.
    let cfg = remembering("0,0");
    let r = phased_run_with(5, cfg);
    let barrier = r
        .decisions
        .iter()
        .rev()
        .find(|d| d.phase.as_deref() == Some("barrier"))
        .expect("a barrier decision");
    assert_eq!(barrier.candidate, "0,1", "{:?}", r.decisions);
    assert!(r
        .searches
        .iter()
        .all(|s| s.phase.as_deref() == Some("barrier")));
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
        // The report's decision is the pinning in force at the end: the last phase's.
        let end = r.timeline.last().unwrap();
        let d = r.decision.as_ref().unwrap();
        assert_eq!(d.phase, end.phase, "seed {seed}");
        assert_eq!(
            Some(d.candidate.as_str()),
            end.candidate
                .map(|c| ["0,0", "0,1", "2,3", "unpinned (OS decides)"][c]),
            "seed {seed}"
        );
    }
}

/// Four sockets, one NUMA node each, 8 cores × 2 PUs per socket (PUs 16p..16p+15 on node
/// p), with a ring's SLIT: 10 local, 16 to a neighbour, 22 across.
pub(crate) fn four_sockets() -> Machine {
    let mut m =
        autopin_topology::source::synthetic::parse("package:4 numa:1 l3:1 core:8 pu:2").unwrap();
    assert_eq!(m.numa_nodes.len(), 4);
    let hops = |i: usize, j: usize| match (i + 4 - j) % 4 {
        0 => 10,
        2 => 22,
        _ => 16,
    };
    m.numa_distances = Some(
        (0..4)
            .map(|i| (0..4).map(|j| hops(i, j)).collect())
            .collect(),
    );
    m
}

/// Every thread runs at `base` wherever it is (only memory distance can slow it).
pub(crate) struct Flat(pub f64);
impl RateModel for Flat {
    fn rates(&self, _t: &SimTopo, p: &[Option<u32>]) -> Vec<f64> {
        vec![self.0; p.len()]
    }
}

fn memory(first_touch: FirstTouch, boundness: f64) -> SimMemory {
    SimMemory {
        first_touch,
        boundness,
        ..SimMemory::default()
    }
}

fn on(cpus: &[u32]) -> Pinning {
    Pinning::from_cpus(cpus.to_vec())
}

#[test]
fn a_thread_far_from_its_pages_runs_slower_until_they_follow_it() {
    let m = four_sockets();
    let sim = Sim::new(&m, Box::new(Flat(1e9)), 1, 0.0, 1, 1e9)
        .with_memory(memory(FirstTouch::Node(0), 1.0));
    assert_eq!(sim.pages(), vec![BTreeMap::from([(0, 1000)])]);
    let topo = sim.topo();
    assert_eq!(
        (topo.node_of[&0], topo.node_of[&17], topo.node_of[&63]),
        (0, 1, 3)
    );
    // Local, one hop, two hops: the SLIT ratio to the power of the boundness.
    assert_eq!(sim.true_rate(&on(&[0])), 1e9);
    assert!((sim.true_rate(&on(&[16])) - 1e9 * 10.0 / 16.0).abs() < 1.0);
    assert!((sim.true_rate(&on(&[32])) - 1e9 * 10.0 / 22.0).abs() < 1.0);
    // Pages that move to node 2 make node 2 local and node 0 remote.
    let o = sim.migrate_pages(&[2]);
    assert_eq!(o.moved, BTreeMap::from([(2, 1000)]));
    assert_eq!((o.resident, o.already_there), (1000, 0));
    assert_eq!(sim.true_rate(&on(&[33])), 1e9);
    assert!((sim.true_rate(&on(&[0])) - 1e9 * 10.0 / 22.0).abs() < 1.0);
    // Moving to nodes 1 and 2: the pages on node 2 stay, nothing else to move.
    let o = sim.migrate_pages(&[1, 2]);
    assert_eq!((o.total_moved(), o.already_there), (0, 1000));
    // Pages split over two nodes cost the mean distance: from node 0, half at 10 and half
    // at 16 (node 3 neighbours node 0 in the ring).
    let o = sim.migrate_pages(&[0, 3]);
    assert_eq!(o.moved, BTreeMap::from([(0, 500), (3, 500)]));
    assert!((sim.true_rate(&on(&[0])) - 1e9 * 10.0 / 13.0).abs() < 1.0);
}

#[test]
fn first_touch_on_the_start_cpu_puts_each_threads_pages_on_its_node() {
    let m = four_sockets();
    // Started inside node 1 (as after `taskset -c 16-31`).
    let sim = Sim::new(&m, Box::new(Flat(1e9)), 2, 0.0, 1, 1e9)
        .with_memory(memory(FirstTouch::StartCpu, 1.0))
        .with_initial_mask(&CpuSet::from_cpus(16..32));
    assert!(sim
        .pages()
        .iter()
        .all(|p| p == &BTreeMap::from([(1, 1000)])));
    // Started unpinned: where the OS puts each thread (spread over the packages).
    let sim = Sim::new(&m, Box::new(Flat(1e9)), 4, 0.0, 1, 1e9)
        .with_memory(memory(FirstTouch::StartCpu, 1.0));
    let nodes: Vec<u32> = sim
        .pages()
        .iter()
        .map(|p| *p.keys().next().unwrap())
        .collect();
    assert_eq!(nodes, vec![0, 1, 2, 3]);
    // Unpinned threads run where they touched their pages: nothing remote.
    assert_eq!(sim.true_rate(&Pinning::unpinned()), 4e9);
}

#[test]
fn compute_bound_programs_do_not_care_where_their_pages_are() {
    let m = four_sockets();
    let cands = structured_candidates(&SimTopo::from_machine(&m), 16);
    let rates = |boundness: f64, node: u32| -> Vec<f64> {
        let sim = Sim::new(&m, Box::new(HpcModel::default()), 16, 0.0, 1, 1e9)
            .with_memory(memory(FirstTouch::Node(node), boundness));
        cands.iter().map(|c| sim.true_rate(c)).collect()
    };
    let plain = Sim::new(&m, Box::new(HpcModel::default()), 16, 0.0, 1, 1e9);
    let no_memory: Vec<f64> = cands.iter().map(|c| plain.true_rate(c)).collect();
    for node in 0..4 {
        assert_eq!(rates(0.0, node), no_memory, "pages on node {node}");
    }
    // A memory-bound program does care: pages on node 0 against pages on node 3.
    assert_ne!(rates(1.0, 0), rates(1.0, 3));
    // Nor does migration change a compute-bound program's rate.
    let sim = Sim::new(&m, Box::new(HpcModel::default()), 16, 0.0, 1, 1e9)
        .with_memory(memory(FirstTouch::Node(0), 0.0));
    sim.migrate_pages(&[2]);
    assert_eq!(sim.pages()[0], BTreeMap::from([(2, 1000)]));
    let after: Vec<f64> = cands.iter().map(|c| sim.true_rate(c)).collect();
    assert_eq!(after, no_memory);
}

/// Eight communicating, bandwidth-hungry threads (HpcModel): compact on node 0 (one per
/// core), spread two per socket, or compact on node 1.
fn compact_or_spread() -> Vec<Pinning> {
    vec![
        Pinning::pinned("node 0", (0..8).map(|c| 2 * c).collect()),
        Pinning::pinned(
            "spread",
            (0..4).flat_map(|p| [16 * p, 16 * p + 2]).collect(),
        ),
        Pinning::pinned("node 1", (0..8).map(|c| 16 + 2 * c).collect()),
    ]
}

fn race_over(sim: &Sim, cands: Vec<Pinning>) -> crate::report::Report {
    let mut session = Session::new(
        SessionConfig {
            watch: None,
            ..SessionConfig::default()
        },
        Box::new(move |_| cands.clone().into()),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    );
    let mut until_decided = |s: &Session| !s.is_decided();
    let cfg = driver_config(CpuSet::from_cpus(sim.topo().pus.iter().copied()));
    drive(sim, &mut session, &cfg, &mut until_decided).unwrap();
    session.report.clone()
}

#[test]
fn without_migration_the_race_keeps_a_memory_bound_program_near_its_data() {
    let m = four_sockets();
    let sim = |boundness: f64, seed: u64| {
        Sim::new(&m, Box::new(HpcModel::default()), 8, 0.05, seed, 1e9)
            .with_memory(memory(FirstTouch::Node(0), boundness))
    };
    let cands = compact_or_spread();
    let truth = |s: &Sim| -> Vec<f64> { cands.iter().map(|c| s.true_rate(c)).collect() };
    // Compute-bound, spreading wins (each socket's bandwidth for two threads); when every
    // remote access costs the distance squared, compact on the data's node wins by > 10%.
    let free = truth(&sim(0.0, 0));
    assert!(free[1] > 1.5 * free[0], "{free:?}");
    let bound = truth(&sim(2.0, 0));
    assert!(
        bound[0] > 1.1 * bound[1] && bound[1] > bound[2],
        "{bound:?}"
    );
    for seed in 0..10 {
        let decided = |b: f64| race_over(&sim(b, seed), cands.clone()).decision.unwrap();
        assert_eq!(decided(2.0).candidate, "node 0", "seed {seed}");
        assert_eq!(decided(0.0).candidate, "spread", "seed {seed}");
    }
}

/// Runs a program that binds its first thread to CPU 5 one second in, in the middle of a
/// search, with autopin respecting its own binding or not.
fn run_binding_itself(respect: bool) -> (crate::report::Report, Sim) {
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 4, 0.02, 3, 6.0)
        .binding_itself_at(1.0, &CpuSet::from_cpus([5]));
    let topo = sim.topo();
    let cands = structured_candidates(&topo, 4);
    let cfg = SessionConfig {
        init: 0.5,
        watch: None,
        ..SessionConfig::default()
    };
    let mut session = Session::new(
        cfg,
        Box::new(move |_| cands.clone().into()),
        Box::new(|n, _| -> Box<dyn Strategy> { Box::new(Race::new(RaceParams::default(), n)) }),
    );
    let mut on = |_: &Session| true;
    let cfg = DriverConfig {
        respect_own_binding: respect,
        ..driver_config(CpuSet::from_cpus(topo.pus.iter().copied()))
    };
    let out = drive(&sim, &mut session, &cfg, &mut on).unwrap();
    assert_eq!(out.exit_status, Some(0));
    (session.report.clone(), sim)
}

#[test]
fn a_program_that_binds_its_own_thread_mid_search_is_left_to_its_binding() {
    let (r, sim) = run_binding_itself(true);
    let own = r
        .own_binding
        .clone()
        .expect("the program's own binding is reported");
    assert!(
        own.contains("thread 1000") && own.contains("became 5"),
        "{own}"
    );
    assert!(r.decision.is_none() && r.complete, "{r:?}");
    // Seen within a second and a tick of the change, and nothing probed after that.
    let last = r.probes.last().expect("probes before the change");
    assert!(last.start < 2.1, "{:?}", r.probes);
    assert!(
        r.notes.iter().any(|n| n.contains("stands back")),
        "{:?}",
        r.notes
    );
    assert_eq!(
        sim.masks()[&1000],
        CpuSet::from_cpus([5]),
        "its binding stays"
    );
    assert!(r
        .summary_lines()
        .iter()
        .any(|l| l.contains("the program's own binding")));
}

#[test]
fn override_binding_keeps_searching_over_a_program_that_binds_itself() {
    let (r, sim) = run_binding_itself(false);
    assert!(r.own_binding.is_none(), "{:?}", r.own_binding);
    assert!(r.probes.iter().any(|p| p.start > 2.1), "{:?}", r.probes);
    assert_ne!(
        sim.masks()[&1000],
        CpuSet::from_cpus([5]),
        "autopin pinned it again"
    );
}

#[test]
fn a_phase_named_as_the_work_begins_does_not_delay_the_end_of_the_start_up() {
    // A program that names its work phase as that work begins, 0.15 s in (syncbench
    // announces "barrier" before its first barrier), measured by progress it reports: the
    // interval that spans the announcement is its first with progress, which the start-up
    // drops anyway, so the start-up's clean tick follows it directly and the first pinned
    // probe begins at 0.3 s (it began a tick later when that interval was set aside for the
    // phase change and the next one dropped as the first with progress).
    let phases = vec![
        prefers_phase("load", 0.15, [0, 1], 1e3, 0.6),
        prefers_phase("barrier", 1000.0, [0, 1], 1e3, 0.6),
    ];
    let cands = vec![Pinning::unpinned(), Pinning::pinned("0,1", vec![0, 1])];
    let cfg = SessionConfig {
        init: 1.0,
        startup_is_os: true,
        startup_ends_init: true,
        ..SessionConfig::default()
    };
    let r = &run_phases(phases, cands, cfg, Some(0), (5, 20.0));
    assert!(r.probes[0].startup, "{:?}", r.probes[0]);
    assert_eq!(r.probes[0].phase.as_deref(), Some("barrier"));
    let pinned = r
        .probes
        .iter()
        .find(|p| !p.startup)
        .expect("a pinned probe");
    assert!(pinned.start < 0.35, "{:?}", r.probes);
}

/// The simulation's pinner, recording every mask set, with the CPU the kernel runs each
/// thread on while its mask allows more than one (`os`).
struct OsPlaces {
    sim: Sim,
    os: BTreeMap<i32, u32>,
    calls: std::sync::Mutex<Vec<(i32, CpuSet)>>,
}

impl Pinner for OsPlaces {
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> Result<(), crate::pinner::PinError> {
        self.calls.lock().unwrap().push((tid, cpus.clone()));
        self.sim.set_affinity(tid, cpus)
    }
    fn affinity(&self, tid: i32) -> Result<CpuSet, crate::pinner::PinError> {
        self.sim.affinity(tid)
    }
    fn cpu_of(&self, tid: i32) -> Option<u32> {
        let mask = self.sim.affinity(tid).ok()?;
        if mask.len() == 1 {
            mask.first()
        } else {
            self.os.get(&tid).copied()
        }
    }
}

/// The masks set, in order, while the race runs 3 s between `cands` for the two threads
/// (1000 and 1001) of a program on four CPUs, the kernel running them on `os` while their
/// masks allow more than one CPU; `born_on`: the CPUs they were pinned to at their birth.
fn masks_set_racing(
    cands: Vec<Pinning>,
    os: &BTreeMap<i32, u32>,
    born_on: Option<[u32; 2]>,
) -> Vec<(i32, CpuSet)> {
    let m = autopin_topology::source::synthetic::parse("package:1 core:4 pu:1").unwrap();
    let sim = Sim::new(&m, Box::new(HpcModel::default()), 2, 0.05, 5, 1e9);
    for (tid, cpu) in [1000, 1001].into_iter().zip(born_on.into_iter().flatten()) {
        sim.set_affinity(tid, &CpuSet::from_cpus([cpu])).unwrap();
    }
    let mut session = race_session_over(cands);
    let pinner = OsPlaces {
        sim: sim.clone(),
        os: os.clone(),
        calls: Default::default(),
    };
    drive_with(
        &sim,
        &mut session,
        &mut sim.clone(),
        &mut sim.clone(),
        &pinner,
        3.0,
    );
    pinner.calls.into_inner().unwrap()
}

#[test]
fn a_probe_of_the_os_placement_starts_where_the_os_had_placed_the_threads() {
    // The OS runs the two threads on CPUs 0 and 1; the pinning puts them on 2 and 3. Each
    // return to the OS placement first puts a thread back on the CPU the kernel ran it on
    // when it left, then widens its mask (the kernel keeps a running thread where it is).
    // Without that, the OS placement's probe starts on the pinning's CPUs.
    let os = BTreeMap::from([(1000, 0), (1001, 1)]);
    let cands = vec![Pinning::unpinned(), Pinning::pinned("2,3", vec![2, 3])];
    let calls = masks_set_racing(cands, &os, None);
    let mut returns = 0;
    for (i, (tid, mask)) in calls.iter().enumerate() {
        let before = calls[..i].iter().rev().find(|(t, _)| t == tid);
        let Some((_, from)) = before else { continue };
        if mask.len() == 4 {
            returns += 1;
            assert_eq!(
                from.first(),
                os.get(tid).copied(),
                "thread {tid} returned to the OS placement from {} ({calls:?})",
                from.to_list()
            );
        }
    }
    assert!(
        returns >= 4,
        "only {returns} returns to the OS placement: {calls:?}"
    );
}

#[test]
fn threads_pinned_at_birth_are_not_taken_for_the_os_placements() {
    // The threads start pinned on CPUs 2 and 3 (a pinning applied at birth). Their first
    // move, to the pinning on 0 and 1, is not a departure from the OS placement: the OS
    // placement's first probe widens their masks where that pinning left them, and only
    // its later probes start where the OS had run them (CPUs 3 and 2 here).
    let os = BTreeMap::from([(1000, 3), (1001, 2)]);
    let cands = vec![Pinning::pinned("0,1", vec![0, 1]), Pinning::unpinned()];
    let calls = masks_set_racing(cands, &os, Some([2, 3]));
    for tid in [1000, 1001] {
        let mine: Vec<&CpuSet> = calls
            .iter()
            .filter(|(t, _)| *t == tid)
            .map(|(_, m)| m)
            .collect();
        let returns: Vec<usize> = (1..mine.len()).filter(|&i| mine[i].len() == 4).collect();
        assert!(returns.len() >= 2, "thread {tid}: {mine:?}");
        // The first: straight from the pinning (CPU 0 or 1), not via a birth CPU.
        assert!(
            mine[returns[0] - 1].first() < Some(2),
            "thread {tid}: {mine:?}"
        );
        for &i in &returns[1..] {
            assert_eq!(
                mine[i - 1].first(),
                os.get(&tid).copied(),
                "thread {tid}: {mine:?}"
            );
        }
    }
}

#[test]
fn a_search_of_many_candidates_scouts_them_and_probes_the_best_scouted_first() {
    // Sixteen threads on four packages: every pinning is read for its warm-up alone
    // (20 ms) before the first round, which then probes the best of them first.
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 16, 0.05, 3, 1e9);
    let cands = structured_candidates(&sim.topo(), 16);
    let r = run(&sim, "race", 0.5);
    let probes = &r.report.probes;
    let fresh: Vec<usize> = (0..cands.len())
        .filter(|&i| !cands[i].is_unpinned())
        .collect();
    assert!(fresh.len() >= 4, "{} pinnings", fresh.len());
    let scouts = &probes[..fresh.len()];
    let mut scouted: Vec<usize> = scouts.iter().map(|p| p.candidate).collect();
    scouted.sort_unstable();
    assert_eq!(scouted, fresh, "each pinning scouted once, first");
    assert!(scouts.iter().all(|p| p.duration < 0.05), "{scouts:?}");
    let best_scout = scouts
        .iter()
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
        .unwrap()
        .candidate;
    let first = &probes[fresh.len()];
    assert_eq!(first.candidate, best_scout);
    assert!(first.duration >= 0.1, "a whole probe: {first:?}");
    let best = cands.iter().map(|c| sim.true_rate(c)).fold(0.0, f64::max);
    assert!(sim.true_rate(&r.chosen) >= 0.99 * best);
}

/// The simulation's threads, noting how many masks the pinner had set each time the driver
/// said that it sets them from now on.
struct ToldOfMoves<'a> {
    sim: Sim,
    sets: &'a std::sync::atomic::AtomicUsize,
    told_after: Vec<usize>,
}

impl ThreadSource for ToldOfMoves<'_> {
    fn poll(&mut self) -> Result<ThreadSnapshot, OsError> {
        self.sim.poll()
    }
    fn moving_threads(&mut self) {
        self.told_after
            .push(self.sets.load(std::sync::atomic::Ordering::Relaxed));
    }
}

/// The thread source hears once, before autopin's first move, that the masks are autopin's
/// to set (on Linux the preload library then leaves the main thread's mask alone).
#[test]
fn the_thread_source_hears_of_the_first_move_before_it_is_made() {
    let sim = Sim::new(&machine(), Box::new(HpcModel::default()), 4, 0.02, 3, 1e9);
    let mut session = race_session(&sim);
    let pinner = CountingPinner {
        sim: sim.clone(),
        reads: Default::default(),
        sets: Default::default(),
    };
    let mut threads = ToldOfMoves {
        sim: sim.clone(),
        sets: &pinner.sets,
        told_after: Vec::new(),
    };
    drive_with(
        &sim,
        &mut session,
        &mut threads,
        &mut sim.clone(),
        &pinner,
        3.0,
    );
    assert_eq!(threads.told_after, vec![0]);
    assert!(pinner.sets.into_inner() > 0);
}

#[test]
fn phases_briefer_than_a_probe_are_searched_as_one_program() {
    // Two phases of 0.15 s each, both best on 2,3: no probe of one phase can end before
    // the other begins. After four brief phases the program is searched as one, and it
    // decides 2,3 for the whole program.
    let brief = |seed| {
        let phases = vec![
            prefers_phase("barrier", 0.15, [2, 3], 1e4, 0.3),
            prefers_phase("triad", 0.15, [2, 3], 2e4, 0.3),
        ];
        let cands = vec![
            Pinning::pinned("0,1", vec![0, 1]),
            Pinning::pinned("2,3", vec![2, 3]),
            Pinning::pinned("1,2", vec![1, 2]),
        ];
        run_phases(phases, cands, SessionConfig::default(), None, (seed, 20.0))
    };
    for seed in 0..4 {
        let r = brief(seed);
        assert!(
            r.notes
                .iter()
                .any(|n| n.starts_with("the program's phases change faster than a probe")),
            "seed {seed}: {:?}",
            r.notes
        );
        let d = r.decision.clone().expect("decided");
        assert_eq!(
            (d.candidate.as_str(), d.phase),
            ("2,3", None),
            "seed {seed}"
        );
        assert!(d.at < 3.0, "seed {seed}: decided at {:.1} s", d.at);
    }
    // Phases of 4 s are searched one by one, as before.
    let r = phased_run(1);
    assert!(
        !r.notes.iter().any(|n| n.contains("phases change faster")),
        "{:?}",
        r.notes
    );
    assert!(r.decisions.iter().all(|d| d.phase.is_some()));
}
