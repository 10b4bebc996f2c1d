//! What searches cost and how probes end: warm-ups, ticks, coarse objectives; the session
//! driven by `run_threads`, which `risk_tests` shares.

use super::cost::lost_work;
use super::*;
use crate::report::ProbeRecord;
use crate::strategy::{Race, RaceParams};

fn two_cpus(_: usize) -> CandidateList {
    vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])].into()
}

/// Runs a session whose candidate k progresses at `rate(k)` units a second (rounded to
/// whole units per reading when `whole`), until it decides or `until` seconds pass. As
/// the driver does, readings come every 0.1 s and when a warm-up ends.
fn run(rate: impl Fn(Option<usize>) -> f64, whole: bool, until: f64) -> Session {
    let mut carry = 0.0;
    run_readings(
        |applied, dt| {
            let mut amount = rate(applied) * dt + carry;
            if whole {
                carry = amount.fract();
                amount = amount.trunc();
            }
            amount
        },
        until,
    )
}

/// [`run`] where `amount(applied, seconds)` is what each reading counts.
fn run_readings(amount: impl FnMut(Option<usize>, f64) -> f64, until: f64) -> Session {
    run_threads(two_cpus, 1, amount, until)
}

/// [`run_readings`] of a program of `threads` threads among the candidates `cands`.
pub(super) fn run_threads(
    cands: fn(usize) -> CandidateList,
    threads: usize,
    mut amount: impl FnMut(Option<usize>, f64) -> f64,
    until: f64,
) -> Session {
    let cfg = SessionConfig {
        init: 0.5,
        watch: None,
        ..SessionConfig::default()
    };
    let mut s = Session::new(
        cfg,
        Box::new(cands),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    );
    s.start(0.0);
    let mut t = 0.0;
    while t < until && !s.is_decided() {
        let end = s
            .warmup_ends()
            .filter(|&w| w > t + 1e-9 && w < t + 0.1)
            .unwrap_or(t + 0.1);
        let amount = amount(s.applied, end - t);
        s.on_interval(&Interval {
            start: t,
            end,
            amount,
            tracked: threads,
            ..Interval::default()
        });
        t = end;
    }
    s
}

#[test]
fn warm_ups_that_show_a_stalling_move_lengthen_close_calls_probes() {
    // CPU 0 does 100/s and CPU 1 97/s, each reading up to 12% up or down, out of step with
    // each other (a close call with noisy probes). When each warm-up reads 30% of the rate (a move stalls the program
    // for 14 ms of its 20), the session hands those readings to the race, which then
    // lengthens the close call's probes and says why; when the warm-ups read the rate,
    // every probe keeps the base length.
    let wobble = [1.12, 0.9, 1.06, 0.94, 0.98];
    let session = |warm: f64| {
        let mut k = 0;
        run_readings(
            |a, dt| {
                let rate = if a == Some(1) { 97.0 } else { 100.0 };
                k += 1;
                let share = if dt < 0.05 {
                    warm
                } else {
                    wobble[(k + if a == Some(1) { 3 } else { 0 }) % 5]
                };
                rate * share * dt
            },
            20.0,
        )
    };
    let base = RaceParams::default().probe;
    let s = session(0.3);
    let p = &s.report.probes;
    assert!(
        p.iter().any(|p| p.duration > base + 0.05),
        "{p:?} {:?}",
        s.report.decision
    );
    let reason = &s.report.decision.as_ref().expect("decided").reason;
    assert!(
        reason.contains("a move cost the program about 14 ms"),
        "{reason}"
    );
    let s = session(1.0);
    let p = &s.report.probes;
    assert!(p.iter().all(|p| p.duration < base + 0.05), "{p:?}");
}

#[test]
fn a_pinning_that_stacks_threads_is_ended_at_its_first_collapse() {
    // Two threads: `1,1` puts both on CPU 1, where spinning barrier threads wait for
    // each other (1000× slower). Its first collapsed warm-up is what it does, not the
    // stall of a move, so it is not looked at again.
    fn stacked(_: usize) -> CandidateList {
        vec![
            Pinning::from_cpus(vec![0, 1]),
            Pinning::from_cpus(vec![1, 1]),
        ]
        .into()
    }
    let s = run_threads(
        stacked,
        2,
        |a, dt| if a == Some(0) { 1e5 * dt } else { 100.0 * dt },
        20.0,
    );
    let p = &s.report.probes;
    assert_eq!(p.iter().filter(|p| p.candidate == 1).count(), 1, "{p:?}");
    assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
}

#[test]
fn a_warm_up_far_below_the_leader_is_the_whole_probe() {
    // Candidate 1 runs 1000× slower (a spinning barrier whose threads share a CPU): its
    // 20 ms warm-up already says so, and no tick of it follows. It is ended at its
    // second look, a warm-up again (one collapse may be a stall of the move itself).
    let s = run(|a| if a == Some(0) { 1e5 } else { 100.0 }, false, 20.0);
    let p = &s.report.probes;
    let on_1: Vec<_> = p.iter().filter(|p| p.candidate == 1).collect();
    assert_eq!(on_1.len(), 2, "{p:?}");
    for w in on_1 {
        assert_eq!(w.intervals, 1, "{p:?}");
        assert!(w.duration < 0.05 && w.warmup == 0.0, "{p:?}");
    }
    assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
    // So does a fifth of the leader (a thread moved onto a busy CPU): below
    // `WARMUP_CUT`, more than a cold cache explains.
    let s = run(|a| if a == Some(0) { 1e5 } else { 2e4 }, false, 20.0);
    let p = &s.report.probes;
    assert_eq!((p[1].candidate, p[1].intervals), (1, 1), "{p:?}");
    assert!(p[1].duration < 0.05 && p[1].warmup == 0.0, "{p:?}");
    // Half of the leader is behind, but a warm-up that low could still be a cold start:
    // it gets its one tick.
    let s = run(|a| if a == Some(0) { 1e5 } else { 5e4 }, false, 20.0);
    let p = &s.report.probes;
    assert!((p[1].duration - 0.1).abs() < 1e-9, "{p:?}");
    // Whole units too few to tell a collapse in 20 ms (1000/s: 2 units in a warm-up at
    // the leader's rate) are not read as one: the probe is measured after its warm-up
    // (and, seeing no unit, goes on until it sees one).
    let s = run(|a| if a == Some(0) { 1000.0 } else { 1.0 }, true, 20.0);
    let p = &s.report.probes;
    assert!(p[1].warmup > 0.0 && p[1].duration >= 0.1 - 1e-9, "{p:?}");
    assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
}

#[test]
fn lost_work_counts_each_probe_for_its_own_length() {
    // The decided candidate 0: 100/s over 0.2 s and 120/s over 0.2 s, 110/s as a whole.
    // Candidate 1: one whole probe at 99/s (0.2 s) and two cuts of 20 ms at 1/s, the
    // way a candidate that swings into a collapse is probed. Lost: 0.2 × (1 − 99/110) +
    // 2 × 0.02 × (1 − 1/110) = 0.02 + 0.039636… A mean over its three probes (33.7/s)
    // would say 0.24 × 0.694 = 0.167 s: four times what the probes lost.
    let probes = [
        (0, 100.0, 0.2),
        (1, 99.0, 0.2),
        (0, 120.0, 0.2),
        (1, 1.0, 0.02),
        (1, 1.0, 0.02),
    ];
    let lost = lost_work(probes.iter().copied(), 0).expect("a cost");
    let want = 0.2 * (1.0 - 99.0 / 110.0) + 0.04 * (1.0 - 1.0 / 110.0);
    assert!((lost - want).abs() < 1e-12, "{lost} vs {want}");
    // A probe better than the decided rate lost nothing (the cost is never negative);
    // a candidate never probed has no rate to count in.
    let lost = lost_work([(0, 100.0, 1.0), (1, 110.0, 0.5)].into_iter(), 0).expect("cost");
    assert_eq!(lost, 0.0);
    assert_eq!(lost_work([(1, 50.0, 1.0)].into_iter(), 0), None);
    assert_eq!(lost_work([(1, 50.0, 1.0)].into_iter(), 0), None);
}

#[test]
fn the_report_states_what_the_search_cost() {
    // CPU 1 does 100/s, CPU 0 50/s: every second probing CPU 0 loses half a second of
    // CPU 1's work.
    let s = run(|a| if a == Some(1) { 100.0 } else { 50.0 }, false, 20.0);
    let d = s.report.decision.clone().expect("decided");
    assert_eq!(d.candidate_index, 1);
    let on_0: f64 = s
        .report
        .probes
        .iter()
        .filter(|p| p.candidate == 0)
        .map(|p| p.warmup + p.duration)
        .sum();
    let cost = d.search_cost.expect("a cost");
    assert!(on_0 > 0.0);
    assert!(
        (cost - 0.5 * on_0).abs() < 1e-6,
        "cost {cost}, {on_0} s on CPU 0"
    );
    assert!((s.report.search_cost - cost).abs() < 1e-12);
}

#[test]
fn a_probe_far_below_the_leader_ends_after_one_tick() {
    // Candidate 0 does 100/s and is probed first; candidate 1 does 45/s, below half of
    // every tick of the leader after its first tick (but not so far below it that its
    // warm-up alone would say so): the rest of its probe would be lost work, so it ends
    // there and the search decides.
    let s = run(|a| if a == Some(0) { 100.0 } else { 45.0 }, false, 20.0);
    let p = &s.report.probes;
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!((p[0].candidate, p[0].intervals), (0, 2), "{p:?}");
    assert_eq!((p[1].candidate, p[1].intervals), (1, 1), "{p:?}");
    assert!((p[1].duration - 0.1).abs() < 1e-9, "{p:?}");
    assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
}

#[test]
fn a_probe_close_to_the_leader_runs_its_length_one_well_behind_ends_early() {
    // At 85/s candidate 1 is within the cut (0.8 of the leader's lowest tick): its probe
    // runs its planned length. At 60/s its first tick already says it is well behind,
    // so the rest of the probe is not spent on it (it is still judged on that tick).
    let s = run(|a| if a == Some(0) { 100.0 } else { 85.0 }, false, 20.0);
    let p = &s.report.probes;
    assert_eq!((p[1].candidate, p[1].intervals), (1, 2), "{p:?}");
    let s = run(|a| if a == Some(0) { 100.0 } else { 60.0 }, false, 20.0);
    let p = &s.report.probes;
    assert_eq!((p[1].candidate, p[1].intervals), (1, 1), "{p:?}");
    assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
}

#[test]
fn a_probe_lengthened_for_a_paused_start_up_ends_once_it_has_seen_enough() {
    // The start-up completes a unit or two (GROMACS after its first constructs, reading
    // its input): the grain then looks coarse and the first probe is planned seconds
    // long. The program runs at 800–1000 units/s once probed: the probe ends when it has
    // lasted the length the strategy asked for and seen its 10 units, not seconds later.
    let ticks = std::cell::Cell::new(0);
    let s = run(
        |a| {
            ticks.set(ticks.get() + 1);
            match a {
                // 3 units in the first tick, then a pause: 6 a second over the start-up.
                None if ticks.get() == 1 => 30.0,
                None => 0.0,
                Some(0) => 1000.0,
                Some(_) => 800.0,
            }
        },
        true,
        20.0,
    );
    let p = &s.report.probes;
    assert!(!p.is_empty());
    for probe in p {
        assert!(probe.duration < 0.35, "{p:?}");
    }
    assert_eq!(s.report.decision.expect("decided").candidate_index, 0);
}

#[test]
fn a_fine_objective_that_counts_nothing_is_a_collapse_not_a_coarse_grain() {
    // 16 threads of a barrier loop, 300 000 beats a second: on CPU 1 the program counts
    // its warm-up's beats, then stalls (a spinning thread shares a CPU with another
    // job) and counts none. At a tenth of its rate a tick would have seen thousands, so
    // the probe ends at its length instead of waiting seconds for a beat.
    let s = run_readings(
        |applied, dt| {
            let stalled = applied == Some(1) && dt > 0.05;
            if stalled {
                0.0
            } else {
                (3e5 * dt).round()
            }
        },
        20.0,
    );
    let p = &s.report.probes;
    let on_1: Vec<&ProbeRecord> = p.iter().filter(|p| p.candidate == 1).collect();
    assert!(!on_1.is_empty(), "{p:?}");
    for probe in &on_1 {
        assert!(probe.duration < 0.25, "{p:?}");
    }
    let d = s.report.decision.clone().expect("decided");
    assert_eq!(d.candidate_index, 0);
    assert!(d.at < 1.5, "{d:?}");
}

#[test]
fn a_coarse_objective_gets_probes_long_enough_to_see_it() {
    // 2–4 whole units a second (an OpenMP region of 250–500 ms): a 0.2 s probe would
    // see 0 or 1 of them. Probes are made long enough to see about 10, so none reads zero
    // and the 2× better CPU is found.
    let s = run(|a| if a == Some(1) { 4.0 } else { 2.0 }, true, 60.0);
    assert!(s.report.probes.len() >= 2);
    for (i, p) in s.report.probes.iter().enumerate() {
        assert!(p.rate > 0.0, "a probe read zero: {p:?}");
        // The first probe starts before the grain is known: it goes on until it saw a
        // unit. Later ones are planned long enough from the start.
        if i > 0 {
            assert!(p.duration >= 2.0 - 1e-9, "probe {i} of {} s", p.duration);
        }
    }
    assert_eq!(s.report.decision.expect("decided").candidate_index, 1);
}
