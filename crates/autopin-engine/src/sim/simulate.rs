//! `autopin simulate`: the real run path (objective, session, race, driver) on a simulated
//! machine of any shape autopin reads, running a program model whose optimum is known
//! (`models`), scored by what a user would see: the chosen pinning's rate ÷ the optimum,
//! when it was decided, and what the search cost.

use super::models::{model_named, ProgramModel, PHASE_SECONDS};
use super::{Sim, SimPhase, SimPlatform, SimSink, SimTopo};
use crate::error::EngineError;
use crate::report::{DecisionRecord, Report};
use crate::run::{
    run, CandidateSource, ObjectivePlan, RunEnv, RunPlan, SearchParams, StrategyChoice, TargetSpec,
    ThreadsChoice,
};
use crate::strategy::RaceParams;
use autopin_topology::Machine;
use serde::Serialize;

/// The OS placement's swing beside busy CPUs (`Sim::with_os_swing`): on them 1 s on
/// average, then off them 0.5 s.
const OS_ON_BUSY: f64 = 1.0;
const OS_OFF_BUSY: f64 = 0.5;

/// How long a moved thread's caches stay cold in `simulate` (half speed meanwhile), seconds.
const COLD: f64 = 0.01;

/// One simulation asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// A model of `models::MODELS`.
    pub model: String,
    pub threads: usize,
    pub seed: u64,
    /// How long the simulated program runs, seconds.
    pub seconds: f64,
    /// Relative noise of each reading (one factor for the whole program a tick).
    pub noise: f64,
    /// The race's settings (the defaults unless exploring them).
    pub race: RaceParams,
    /// Beside busy CPUs (the barrier model's), the OS placement swings between them and the
    /// free CPUs (`Sim::with_os_swing`); otherwise it stays where it spreads its threads.
    pub os_swing: bool,
    /// The program is an OpenMP program whose teams may change mid-run (the preload
    /// library's rule allows it): the thread count joins the search (`--threads auto`,
    /// docs/threads.md), and the optimum is the best over the counts it was offered.
    pub openmp_team: bool,
}

/// What one simulation found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub model: String,
    pub threads: usize,
    pub seed: u64,
    /// The team size of the (first) decision in force at the end, where the count was
    /// searched and it is fewer than `threads`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<usize>,
    /// The pinning in force at the end (per phase for `phases`), as the report names it.
    pub decided: Vec<String>,
    /// Its rate under the model (no noise) ÷ the model's optimum; for `phases` the mean of
    /// the two phases'. 0 without a decision.
    pub ratio: f64,
    /// When the (first) decision came, seconds from the program's start (None: never).
    pub decided_at: Option<f64>,
    /// Work the searches lost, seconds of the decided pinning's work (the report's).
    pub lost: f64,
    pub probes: usize,
    /// Driver ticks (readings) over the whole run.
    pub ticks: usize,
    pub candidates: usize,
    /// Why the (first) decision was taken, as the report says it.
    pub reason: String,
}

/// Runs `spec` on `machine`.
pub fn simulate(machine: &Machine, spec: &Spec) -> Result<Outcome, EngineError> {
    simulate_reported(machine, spec).map(|(o, _)| o)
}

/// Runs `spec` on `machine`: its outcome and the run's whole report (what `autopin run
/// --report` writes: every probe, decision and tick, for `autopin report` to read back).
pub fn simulate_reported(machine: &Machine, spec: &Spec) -> Result<(Outcome, Report), EngineError> {
    let topo = SimTopo::from_machine(machine);
    let allowed = machine.allowed_cpuset().len();
    if spec.threads == 0 || spec.threads > allowed {
        return Err(EngineError::usage(format!(
            "--threads {}: from 1 to the {allowed} CPUs the machine allows",
            spec.threads
        )));
    }
    let model = model_named(&spec.model, &topo).map_err(EngineError::usage)?;
    let sim = sim_for(machine, spec, &topo)?;
    let mut platform = SimPlatform::new(sim);
    platform.busy = model.busy();
    let mut plan = plan_for(machine, spec.race);
    if spec.openmp_team {
        platform.openmp_runtime = Some("libgomp.so.1".into());
        // Its count as a job script sets it: the simulated program runs `threads` threads,
        // and the count's search plans for as many.
        platform
            .env
            .push(("OMP_NUM_THREADS".into(), spec.threads.to_string()));
        plan.threads = ThreadsChoice::Auto;
    }
    let mut clock = platform.sim.clone();
    let pinner = platform.sim.clone();
    let mut sink = SimSink::default();
    let report = run(
        &plan,
        &mut RunEnv {
            clock: &mut clock,
            pinner: &pinner,
            platform: &mut platform,
            sink: &mut sink,
        },
    )?;
    let last = last_decisions(&report);
    let counts = offered_counts(&report, spec);
    let ratios = ratios(&last, spec, &counts, &topo, model.as_ref())?;
    let outcome = Outcome {
        model: spec.model.clone(),
        threads: spec.threads,
        seed: spec.seed,
        team: last.first().and_then(|d| d.team),
        decided: last.iter().map(|d| d.candidate.clone()).collect(),
        ratio: ratios.iter().sum::<f64>() / ratios.len() as f64,
        decided_at: report.decisions.first().map(|d| d.at),
        lost: report.search_cost,
        probes: report.probes.len(),
        ticks: report.timeline.len(),
        candidates: report.candidates.len(),
        reason: report
            .decisions
            .first()
            .map(|d| d.reason.clone())
            .or(report.incomplete_reason.clone())
            .unwrap_or_default(),
    };
    Ok((outcome, report))
}

/// The simulated machine running `spec`'s model (for `phases`, bandwidth then pairs).
fn sim_for(machine: &Machine, spec: &Spec, topo: &SimTopo) -> Result<Sim, EngineError> {
    let phased = spec.model == "phases";
    let model = model_named(if phased { "bandwidth" } else { &spec.model }, topo)
        .map_err(EngineError::usage)?;
    // Beside busy CPUs (the barrier model's neighbours) the OS placement may swing.
    let busy = model.busy();
    let mut sim = Sim::new(
        machine,
        model,
        spec.threads,
        spec.noise,
        spec.seed,
        spec.seconds,
    );
    if phased {
        let phase = |name: &str| -> Result<SimPhase, EngineError> {
            Ok(SimPhase {
                name: name.into(),
                duration: PHASE_SECONDS,
                model: model_named(name, topo).map_err(EngineError::usage)?,
            })
        };
        sim = sim.with_phases(vec![phase("bandwidth")?, phase("pairs")?]);
    }
    // A moved thread's caches refill within milliseconds on real machines (GROMACS's
    // pinnings read as fast at 20 ms as over their probes, docs/search.md).
    sim = sim.with_cold(COLD);
    if spec.os_swing && !busy.is_empty() {
        sim = sim.with_os_swing(&busy, OS_ON_BUSY, OS_OFF_BUSY);
    }
    if spec.openmp_team {
        // Short regions, never a size asked or kept: a team may change at any region.
        sim = sim.with_team(0);
    }
    Ok(sim)
}

/// The thread counts the search could choose: the program's own, and each team
/// candidate's (none where the count was not searched).
fn offered_counts(report: &Report, spec: &Spec) -> Vec<usize> {
    let mut counts = vec![spec.threads];
    counts.extend(report.candidates.iter().filter_map(|c| c.team));
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// The decision in force at the end of each phase (one, without phases).
fn last_decisions(report: &Report) -> Vec<&DecisionRecord> {
    let mut last: Vec<&DecisionRecord> = Vec::new();
    for d in &report.decisions {
        match last.iter_mut().find(|x| x.phase == d.phase) {
            Some(x) => *x = d,
            None => last.push(d),
        }
    }
    last
}

/// How close each of the `last` decisions came to its model's optimum, as rate ÷ optimum:
/// the best any of `counts` threads reach (a decision of a team runs that many threads).
fn ratios(
    last: &[&DecisionRecord],
    spec: &Spec,
    counts: &[usize],
    topo: &SimTopo,
    model: &dyn ProgramModel,
) -> Result<Vec<f64>, EngineError> {
    let score = |m: &dyn ProgramModel, d: &DecisionRecord| -> f64 {
        let n = d.team.unwrap_or(spec.threads);
        let placement: Vec<Option<u32>> = (0..n)
            .map(|i| d.cpus.as_ref().map(|c| c[i % c.len()]))
            .collect();
        let rate: f64 = m.rates(topo, &placement).iter().sum();
        let best = counts
            .iter()
            .map(|k| m.optimum(topo, *k))
            .fold(0.0, f64::max);
        rate / best.max(f64::MIN_POSITIVE)
    };
    Ok(if spec.model == "phases" {
        ["bandwidth", "pairs"]
            .iter()
            .map(|name| {
                let m = model_named(name, topo).map_err(EngineError::usage)?;
                Ok(last
                    .iter()
                    .find(|d| d.phase.as_deref() == Some(*name))
                    .map_or(0.0, |d| score(m.as_ref(), d)))
            })
            .collect::<Result<_, EngineError>>()?
    } else {
        vec![last.first().map_or(0.0, |d| score(model, d))]
    })
}

/// `autopin run`'s default plan on `machine`: topology candidates, the race.
fn plan_for(machine: &Machine, race: RaceParams) -> RunPlan {
    RunPlan {
        machine: machine.clone(),
        target: TargetSpec::Launch(vec!["model".into()]),
        skip: crate::pin_plan::SkipMask::none(),
        objective: ObjectivePlan::default_with(
            autopin_objective::Objective::parse("instructions:u").unwrap_or_else(|_| {
                autopin_objective::Objective::parse("heartbeat").expect("named")
            }),
        ),
        candidates: CandidateSource::Topology {
            max: 12,
            include_unpinned: true,
            threads: None,
        },
        search: SearchParams {
            strategy: StrategyChoice::Race(race),
            init: 0.5,
            init_asked: false,
            tick: 0.1,
            born_wait: crate::run::BORN_WAIT,
            report_every: 5.0,
            watch: Some(crate::phase::WatchParams::default()),
        },
        migrate_memory: false,
        migrate_files: false,
        mem_policy: None,
        estimate_perturbation: false,
        launch: None,
        override_binding: false,
        start_off_busy: true,
        remembered: None,
        threads: ThreadsChoice::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_each_models_best_on_a_two_socket_machine() {
        let m = autopin_topology::source::synthetic::parse("numa:2 package:1 l3:2 core:4 pu:2")
            .unwrap();
        for model in super::super::models::MODELS {
            let o = simulate(
                &m,
                &Spec {
                    model: model.into(),
                    threads: 8,
                    seed: 1,
                    seconds: if model == "phases" { 40.0 } else { 20.0 },
                    noise: 0.02,
                    race: RaceParams::default(),
                    os_swing: false,
                    openmp_team: false,
                },
            )
            .unwrap();
            assert!(o.ratio >= 0.95, "{model}: {o:?}");
            // Decided, though not yet within 3 s (docs/simulate.md).
            assert!(o.decided_at.is_some_and(|t| t <= 20.0), "{model}: {o:?}");
        }
    }

    #[test]
    fn with_the_count_searched_a_team_of_the_free_cpus_runs_from_the_start_and_is_decided() {
        // 16 threads on 16 CPUs beside other work on 4 (one in four): a team of the 12
        // free CPUs runs at twice the pace of the program's own count. The team's CPUs
        // are the first of the pinning the program is born on, so it is asked from birth,
        // and the start-up is its probe.
        let m = autopin_topology::source::synthetic::parse("package:4 core:4 pu:1").unwrap();
        let (o, report) = simulate_reported(
            &m,
            &Spec {
                model: "barrier".into(),
                threads: 16,
                seed: 1,
                seconds: 20.0,
                noise: 0.03,
                race: RaceParams::default(),
                os_swing: false,
                openmp_team: true,
            },
        )
        .unwrap();
        assert_eq!(o.team, Some(12), "{o:?}");
        assert!(o.ratio >= 0.95, "{o:?}");
        assert!(o.decided_at.is_some_and(|t| t <= 3.0), "{o:?}");
        let first = report.probes.first().expect("probes");
        assert!(first.startup, "{first:?}");
        assert_eq!(
            report.candidates[first.candidate].team,
            Some(12),
            "{first:?}"
        );
    }

    #[test]
    fn bad_specs_are_usage_errors() {
        let m = autopin_topology::source::synthetic::parse("core:4 pu:1").unwrap();
        let spec = |model: &str, threads| Spec {
            model: model.into(),
            threads,
            seed: 1,
            seconds: 5.0,
            noise: 0.0,
            race: RaceParams::default(),
            os_swing: false,
            openmp_team: false,
        };
        let e = simulate(&m, &spec("nope", 2)).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Usage);
        assert!(e.to_string().contains("valid: bandwidth"), "{e}");
        let e = simulate(&m, &spec("smt", 5)).unwrap_err();
        assert!(e.to_string().contains("from 1 to the 4 CPUs"), "{e}");
    }
}
