//! The race's basics: probe lengths against what moves cost, clear losers, ties and the budget.

use super::super::swing::share_at_least;
use super::super::MOVE_SHARE;
use super::*;
use crate::rng::Rng;

#[test]
fn the_least_share_of_a_state_is_the_clopper_pearson_bound() {
    // Seen at every look of n, the share p with p^n = alpha; at one look of two, the
    // share with 1 − (1 − p)² = alpha; never seen, no share at all.
    let close = |a: f64, b: f64| (a - b).abs() < 1e-4;
    assert!(close(share_at_least(3, 3, 0.1), 0.1f64.powf(1.0 / 3.0)));
    assert!(close(share_at_least(1, 2, 0.1), 1.0 - 0.9f64.sqrt()));
    assert_eq!(share_at_least(0, 5, 0.1), 0.0);
    // More looks in the state, a higher bound; more looks in all, a lower one.
    assert!(share_at_least(2, 3, 0.1) > share_at_least(1, 3, 0.1));
    assert!(share_at_least(1, 4, 0.1) < share_at_least(1, 2, 0.1));
}

fn run(truth: &[f64], noise: f64, seed: u64, p: RaceParams) -> (usize, f64) {
    let mut rng = Rng::new(seed);
    let (d, _, t) = drive_race(Race::new(p, truth.len()), |candidate, _, measure| {
        let score = truth[candidate] * (1.0 + noise * rng.normal() / measure.sqrt());
        ProbeOutcome {
            candidate,
            score,
            duration: measure,
            interval_cv: None,
            interval_range: None,
            intervals: 0,
            ended_collapsed: false,
        }
    });
    (d.candidate, t)
}

#[test]
fn probes_last_long_enough_that_moves_take_a_small_share_of_a_cpu() {
    let probe = |r: &mut Race| match r.next(0.0) {
        Step::Probe { measure, .. } => measure,
        Step::Decide(d) => panic!("decided: {d:?}"),
    };
    // A move of a few threads costs microseconds: the probes stay as they are.
    let mut r = Race::new(RaceParams::default(), 3);
    assert_eq!(r.move_cost(20e-6), None);
    assert!((probe(&mut r) - RaceParams::default().probe).abs() < 1e-12);
    // A move of thousands of threads costs milliseconds: every later probe, the
    // candidates' first ones included, lasts 1/MOVE_SHARE times that.
    let mut r = Race::new(RaceParams::default(), 3);
    let floor = r.move_cost(0.005).expect("longer probes");
    assert!((floor - 0.005 / MOVE_SHARE).abs() < 1e-12, "{floor}");
    assert!((probe(&mut r) - floor).abs() < 1e-12);
    // A cheaper move later does not shorten them; a move dearer than any probe gives the
    // longest probe.
    assert_eq!(r.move_cost(0.001), None);
    assert_eq!(r.move_cost(1.0), Some(RaceParams::default().max_probe));
    assert!((probe(&mut r) - RaceParams::default().max_probe).abs() < 1e-12);
}

#[test]
fn eliminates_clear_losers_quickly() {
    let (c, t) = run(&[1.0, 2.0, 1.5, 0.5], 0.02, 1, RaceParams::default());
    assert_eq!(c, 1);
    assert!(t < 8.0, "took {t}");
}

#[test]
fn equal_candidates_stop_by_tolerance_or_budget() {
    let p = RaceParams {
        budget: 10.0,
        ..RaceParams::default()
    };
    let (_, t) = run(&[1.0, 1.0], 0.01, 3, p);
    assert!(t <= 10.0 + 1e-9);
}

#[test]
fn a_thousandfold_gap_is_seen_despite_very_noisy_probes() {
    // Probe-to-probe noise of ±40% makes the relative test useless (the relative gap
    // can never exceed 1); the gap of 2000× must still end the race after two rounds
    // (of half-second probes: shorter ones are lengthened against such noise).
    let p = RaceParams {
        budget: 30.0,
        probe: 0.5,
        ..RaceParams::default()
    };
    let (c, t) = run(&[140.0, 300e3], 0.4, 11, p);
    assert_eq!(c, 1);
    let two_rounds = 2.0 * 2.0 * (p.warmup + p.probe);
    assert!(t <= two_rounds + 1e-9, "took {t} s");
}

#[test]
fn no_measurement_at_all_still_ends_at_the_budget() {
    let mut r = Race::new(
        RaceParams {
            budget: 3.0,
            ..RaceParams::default()
        },
        2,
    );
    let mut t = 0.0;
    for _ in 0..100 {
        match r.next(t) {
            Step::Probe {
                warmup, measure, ..
            } => t += warmup + measure, // nothing recorded
            Step::Decide(d) => {
                assert!(d.reason.contains("no usable measurement"));
                assert!(t <= 3.0 + 1e-9);
                return;
            }
        }
    }
    panic!("never decided");
}

#[test]
fn budget_is_respected_even_with_heavy_noise() {
    let p = RaceParams {
        budget: 6.0,
        ..RaceParams::default()
    };
    let (_, t) = run(&[1.0, 1.02, 0.99], 0.5, 5, p);
    assert!(t <= 6.0 + 1e-9, "spent {t}");
}
