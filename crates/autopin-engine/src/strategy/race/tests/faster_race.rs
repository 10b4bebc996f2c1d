//! One-probe eliminations, close calls, ties and the pinning in force.

use super::*;

/// Drives a race with a deterministic score per candidate: `score(candidate, probe#)`
/// gives (score, within-probe cv). Returns the decision, the probes in order and the
/// search time.
fn drive(
    n: usize,
    os: Option<usize>,
    p: RaceParams,
    score: impl Fn(usize, usize) -> (f64, f64),
) -> (Decision, Vec<usize>, f64) {
    let mut r = Race::new(p, n);
    if let Some(o) = os {
        r.set_os_placement(o);
    }
    drive_race(r, |candidate, k, measure| {
        let (score, cv) = score(candidate, k);
        ProbeOutcome {
            candidate,
            score,
            duration: measure,
            interval_cv: Some(cv),
            interval_range: None,
            intervals: 5,
            ended_collapsed: false,
        }
    })
}

#[test]
fn a_gap_that_dwarfs_the_tick_noise_ends_after_one_probe_each() {
    // 2× apart, ticks within ±3%: one probe each, under 1.5 s of search.
    let (d, order, t) = drive(2, None, RaceParams::default(), |c, _| {
        ([100.0, 200.0][c], 0.03)
    });
    assert_eq!(d.candidate, 1);
    assert_eq!(order, vec![0, 1]);
    assert!(t < 1.5, "decided after {t} s");
    assert!(
        d.reason.contains("beyond the noise inside the probes"),
        "{}",
        d.reason
    );
}

#[test]
fn a_close_call_is_never_decided_on_one_sample() {
    // 8% apart with very quiet ticks: below the decisive gap, so the between-probe test
    // decides, after at least `min_rounds` probes each.
    let p = RaceParams::default();
    let (d, order, _) = drive(2, None, p, |c, k| {
        let jitter = [0.0, 0.004, -0.003, 0.002, -0.001][k % 5];
        ([100.0, 108.0][c] * (1.0 + jitter), 0.001)
    });
    assert_eq!(d.candidate, 1);
    for c in 0..2 {
        assert!(
            order.iter().filter(|x| **x == c).count() >= p.min_rounds,
            "{order:?}"
        );
    }
}

#[test]
fn noisy_ticks_do_not_allow_a_one_probe_elimination() {
    // 2× apart but ticks swing ±60%: not beyond doubt after one probe.
    let mut r = Race::new(RaceParams::default(), 2);
    for c in 0..2 {
        let Step::Probe { candidate, .. } = r.next(0.0) else {
            panic!("decided before probing")
        };
        assert_eq!(candidate, c);
        r.record(ProbeOutcome {
            candidate,
            score: [100.0, 200.0][c],
            duration: 0.5,
            interval_cv: Some(0.6),
            interval_range: None,
            intervals: 5,
            ended_collapsed: false,
        });
    }
    assert!(
        matches!(r.next(1.4), Step::Probe { .. }),
        "needs more probes"
    );
}

#[test]
fn indistinguishable_candidates_keep_the_os_placement_before_the_budget_ends() {
    // Three equal candidates (OS placement is #2), 0.5% probe noise: the race stops as
    // soon as they are confidently within 2%, and keeps the OS placement.
    let p = RaceParams {
        budget: 60.0,
        ..RaceParams::default()
    };
    let (d, _, t) = drive(3, Some(2), p, |c, k| {
        let j = [0.005, -0.004, 0.002, -0.005, 0.003, 0.0][(k + c) % 6];
        (100.0 * (1.0 + j), 0.005)
    });
    assert_eq!(d.candidate, 2, "{}", d.reason);
    assert!(d.reason.contains("OS's own placement"), "{}", d.reason);
    assert!(t < 60.0 / 2.0, "stopped early: {t} s");
}

#[test]
fn a_leader_kept_on_the_tolerance_says_what_bounds_it() {
    // The pinning (#0) 0.8% ahead of the OS placement (#1), 0.3% probe noise: too close
    // for a t-test to end either, but once nothing can be more than 0.5% better than
    // the leader, it is kept, and the reason gives that bound rather than a margin that
    // reads "within the noise". (The test had the pinning 0.1% ahead while the level
    // was 20% for two candidates; at 10% a comparison the 2% stop comes first there and
    // keeps the OS placement, the pinning's lead not being beyond doubt.)
    let (d, _, _) = drive(2, Some(1), RaceParams::default(), |c, k| {
        let j = [0.003, -0.003, 0.002, -0.002][(k + c) % 4];
        (if c == 0 { 100.8 } else { 100.0 } * (1.0 + j), 0.003)
    });
    assert_eq!(d.candidate, 0, "{}", d.reason);
    let (m, ci) = (d.margin.unwrap(), d.margin_ci.unwrap());
    assert!(
        (1.0 + m) / (1.0 + ci) < 1.0,
        "the margin reaches zero: {d:?}"
    );
    assert!(
        d.reason
            .starts_with("no other candidate can be more than 0.5% better than the leader"),
        "{}",
        d.reason
    );
}

#[test]
fn a_checked_pinning_in_force_stays_unless_shown_worse() {
    // A remembered pinning (#0) checked against the OS placement (#1) and a runner-up
    // (#2): all equal, it stays; the runner-up 40% ahead, it is overturned.
    let check = |runner_up: f64| {
        let mut r = Race::new(
            RaceParams {
                budget: 1.5,
                ..RaceParams::default()
            },
            3,
        );
        r.set_os_placement(1);
        r.set_incumbent(0);
        drive_race(r, |candidate, k, measure| {
            let j = [0.01, -0.01, 0.005, -0.005][(k + candidate) % 4];
            let base = if candidate == 2 { runner_up } else { 100.0 };
            ProbeOutcome {
                candidate,
                score: base * (1.0 + j),
                duration: measure,
                interval_cv: Some(0.01),
                interval_range: None,
                intervals: 5,
                ended_collapsed: false,
            }
        })
        .0
    };
    let kept = check(100.0);
    assert_eq!(kept.candidate, 0, "{}", kept.reason);
    assert_eq!(check(140.0).candidate, 2);
}

#[test]
fn a_pinning_in_force_is_not_overturned_by_its_first_probe_alone() {
    // The check's first probe of the remembered pinning (#0) catches the program's
    // start-up, a seventh of its rate; then it runs at 100/s, the OS placement (#1) at
    // 60-100/s. Its first probe is below half of the OS placement's, yet it stays.
    let mut r = Race::new(
        RaceParams {
            budget: 1.0,
            os_probes: 1,
            os_ticks: 2,
            ..RaceParams::default()
        },
        2,
    );
    r.set_os_placement(1);
    r.set_incumbent(0);
    let mut probes_of_0 = 0;
    let (d, order, _) = drive_race(r, |candidate, k, measure| {
        let score = if candidate == 0 {
            probes_of_0 += 1;
            if probes_of_0 == 1 {
                15.0
            } else {
                100.0
            }
        } else {
            [100.0, 60.0, 90.0][k % 3]
        };
        ProbeOutcome {
            candidate,
            score,
            duration: measure,
            interval_cv: Some(0.01),
            interval_range: Some((0.95 * score, 1.05 * score)),
            intervals: 2,
            ended_collapsed: false,
        }
    });
    assert_eq!(d.candidate, 0, "{} {order:?}", d.reason);
    assert!(order.iter().filter(|&&c| c == 0).count() >= 2, "{order:?}");
}

#[test]
fn a_pinning_in_force_read_during_the_start_up_is_probed_again_before_the_others() {
    // The remembered pinning (#0) decided at 100/s; its first probe catches the
    // program's start-up (30/s), its second its rate (`today`); the others run at 70/s.
    let check = |today: f64| {
        let mut r = Race::new(RaceParams::default(), 3);
        r.set_os_placement(1);
        r.set_incumbent(0);
        r.expect_incumbent(100.0);
        let mut probes_of_0 = 0;
        drive_race(r, move |candidate, _, measure| {
            let score = match candidate {
                0 => {
                    probes_of_0 += 1;
                    if probes_of_0 == 1 {
                        30.0
                    } else {
                        today
                    }
                }
                _ => 70.0,
            };
            ProbeOutcome {
                candidate,
                score,
                duration: measure,
                interval_cv: Some(0.01),
                interval_range: None,
                intervals: 2,
                ended_collapsed: false,
            }
        })
    };
    let (d, order, _) = check(98.0);
    assert_eq!((d.candidate, order), (0, vec![0, 0]), "{}", d.reason);
    assert!(d.reason.contains("98% of its rate"), "{}", d.reason);
    // Still slow on its second probe (a neighbour on its CPU): the others are probed.
    let (_, order, _) = check(60.0);
    assert_eq!(&order[..2], &[0, 0]);
    assert!(order.contains(&1) && order.contains(&2), "{order:?}");
}

#[test]
fn a_pinning_in_force_at_its_remembered_rate_is_kept_on_its_first_probe() {
    // The remembered pinning (#0) decided at 100/s; the OS placement (#1) and the
    // runner-up (#2) would run at 70/s.
    let check = |today: f64| {
        let mut r = Race::new(RaceParams::default(), 3);
        r.set_os_placement(1);
        r.set_incumbent(0);
        r.expect_incumbent(100.0);
        drive_race(r, |candidate, _, measure| ProbeOutcome {
            candidate,
            score: if candidate == 0 { today } else { 70.0 },
            duration: measure,
            interval_cv: Some(0.01),
            interval_range: None,
            intervals: 2,
            ended_collapsed: false,
        })
    };
    // At 97/s today: kept after its one probe, nothing else probed.
    let (d, order, _) = check(97.0);
    assert_eq!((d.candidate, order), (0, vec![0]), "{}", d.reason);
    assert!(d.reason.contains("without probing another"), "{}", d.reason);
    // At 80/s (a neighbour on its CPU) or at 130/s (something changed): the others are
    // probed as in any check.
    for today in [80.0, 130.0] {
        let (_, order, _) = check(today);
        assert!(
            order.contains(&1) && order.contains(&2),
            "{today}: {order:?}"
        );
    }
}

#[test]
fn the_budget_end_is_a_decision_with_its_reason() {
    // 1% apart with 6% noise between probes: cannot separate within 4 s.
    let p = RaceParams {
        budget: 4.0,
        deadline: f64::INFINITY,
        ..RaceParams::default()
    };
    let noisy = |c: usize, k: usize| {
        let j = [0.06, -0.06, 0.04, -0.04][k % 4];
        ([101.0, 100.0][c] * (1.0 + j), 0.03)
    };
    let (d, _, t) = drive(2, Some(1), p, noisy);
    assert!(t <= 4.0 + 1e-9);
    assert_eq!(d.candidate, 1, "OS placement kept: {}", d.reason);
    assert!(d.reason.contains("budget spent"), "{}", d.reason);
    // A clean search (nothing busy beside, nothing swinging) ends at its deadline, the
    // same way, and says so.
    let (d, _, t) = drive(2, Some(1), RaceParams::default(), noisy);
    assert!(t <= RaceParams::default().deadline + 1e-9, "{t}");
    assert_eq!(d.candidate, 1, "OS placement kept: {}", d.reason);
    assert!(d.reason.contains("clean search's deadline"), "{}", d.reason);
    // Two pinned candidates are compared over the rounds that probed both: here the
    // noise (6%) differs between the two probes of a round (what the machine does to
    // both would cancel in their pairs).
    let noisy = |c: usize, k: usize| {
        let j = [0.06, -0.06, 0.04, -0.04][(k + c) % 4];
        ([101.0, 100.0][c] * (1.0 + j), 0.03)
    };
    let (d, _, _) = drive(2, None, p, noisy);
    assert_eq!(d.candidate, 0, "no OS placement: the best so far");
    assert!(d.reason.contains("best so far"), "{}", d.reason);
}

#[test]
fn after_the_first_round_the_leader_is_probed_first() {
    let p = RaceParams {
        budget: 10.0,
        ..RaceParams::default()
    };
    let (_, order, _) = drive(3, None, p, |c, k| {
        let j = [0.02, -0.02][k % 2];
        ([100.0, 103.0, 101.0][c] * (1.0 + j), 0.05)
    });
    assert_eq!(&order[..3], &[0, 1, 2]);
    assert_eq!(order[3], 1, "round 2 starts with the leader: {order:?}");
}
