//! Eliminations on ranges alone: dominated candidates, the start-up's reading, overlaps.

use super::*;

#[test]
fn a_dominated_candidate_is_dropped_after_one_round() {
    let (d, order, _) = drive_race(Race::new(RaceParams::default(), 2), |candidate, _, _| {
        let (score, range) = if candidate == 0 {
            (150.0, (110.0, 190.0))
        } else {
            (3e5, (1.7e5, 4e5))
        };
        ProbeOutcome {
            candidate,
            score,
            duration: 0.2,
            interval_cv: None,
            interval_range: Some(range),
            intervals: 0,
            ended_collapsed: false,
        }
    });
    assert_eq!(d.candidate, 1);
    assert_eq!(order.len(), 2, "one probe each");
}

#[test]
fn a_start_up_far_below_the_leader_is_not_a_verdict_on_its_own() {
    // The OS placement read 67 units/s at the end of the program's start-up (a program
    // reading its input runs that slowly wherever it runs), the pinning 30 000 in the
    // search. Half the leader's ticks would end it; read only before the search, it is
    // probed first. Its search probe, far below as well, then ends it by the same rule.
    let run = |os_in_search: f64| {
        let mut r = Race::new(RaceParams::default(), 2);
        r.set_os_placement(0);
        r.record(ProbeOutcome {
            candidate: 0,
            score: 67.0,
            duration: 0.1,
            interval_cv: None,
            interval_range: Some((67.0, 67.0)),
            intervals: 1,
            ended_collapsed: false,
        });
        let (decision, probed, _) = drive_race(r, |candidate, _, _| {
            let score = if candidate == 0 {
                os_in_search
            } else {
                30_000.0
            };
            ProbeOutcome {
                candidate,
                score,
                duration: 0.2,
                interval_cv: Some(0.01),
                interval_range: Some((0.99 * score, 1.01 * score)),
                intervals: 2,
                ended_collapsed: false,
            }
        });
        (decision, probed)
    };
    // Far below in the search too: gone after that one probe.
    let (d, probed) = run(5_000.0);
    assert_eq!(d.candidate, 1);
    assert_eq!(
        probed,
        vec![1, 1, 0],
        "the leader first in round 2, then the OS once"
    );
    assert!(d.reason.contains("below half the leader"), "{}", d.reason);
    // 20% faster than the pinning once the program runs: not ended on the start-up, and
    // the decision.
    let (d, probed) = run(36_000.0);
    assert_eq!(d.candidate, 0, "{probed:?} {}", d.reason);
}

#[test]
fn overlapping_intervals_are_not_dominated() {
    let mut r = Race::new(RaceParams::default(), 2);
    for (c, range) in [(0, (80.0, 120.0)), (1, (90.0, 130.0))] {
        let Step::Probe { candidate, .. } = r.next(0.0) else {
            panic!("decided too early")
        };
        let range = if candidate == c { range } else { (85.0, 125.0) };
        r.record(ProbeOutcome {
            candidate,
            score: 100.0,
            duration: 0.5,
            interval_cv: None,
            interval_range: Some(range),
            intervals: 0,
            ended_collapsed: false,
        });
    }
    assert!(
        matches!(r.next(1.0), Step::Probe { .. }),
        "needs more rounds"
    );
}
