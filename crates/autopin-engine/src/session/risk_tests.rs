//! The rule for risky decisions as the session applies it, whatever the strategy decided:
//! a stacked pinning stays only on a significant win over every pinning with a CPU per
//! thread and the OS placement.

use super::margin::Evidence;
use super::search_cost_tests::run_threads;
use super::*;
use crate::rng::Rng;

/// Two threads on two CPUs: the spread pinning, both on CPU 0, and the OS placement.
fn three(_: usize) -> CandidateList {
    vec![
        Pinning::from_cpus(vec![0, 1]),
        Pinning::from_cpus(vec![0, 0]),
        Pinning::unpinned(),
    ]
    .into()
}

/// Runs the race over `three` with true rates `rates` (spread, stacked, OS placement;
/// before any pinning the OS placement's) and ticks that swing by `noise` (relative,
/// normal), from `seed`.
fn race(rates: [f64; 3], noise: f64, seed: u64) -> Session {
    let mut rng = Rng::new(seed);
    run_threads(
        three,
        2,
        move |applied, dt| {
            let r = rates[applied.unwrap_or(2)];
            (r * dt * (1.0 + noise * rng.normal())).max(0.0)
        },
        30.0,
    )
}

/// Each candidate's evidence in the report's last search, from its probes' ticks (the
/// start-up left out), by the report's candidate index.
fn evidence_of(r: &Report) -> Vec<Evidence> {
    let search = r.decision.as_ref().map_or(0, |d| d.search);
    let mut ev = vec![Evidence::default(); r.candidates.len()];
    for p in r
        .probes
        .iter()
        .filter(|p| p.search == search && !p.startup && p.duration > 0.0)
    {
        ev[p.candidate].add(p.rate, p.duration, p.ticks.iter().copied());
    }
    ev
}

#[test]
fn a_stacked_pinning_ahead_on_noise_is_never_kept() {
    // The stacked pinning is as fast as the others (a program whose threads mostly wait):
    // whichever the race leans to on noisy ticks, a tie never leaves it in force.
    let mut kept_instead = 0;
    for seed in 0..40 {
        let s = race([100.0, 100.5, 100.0], 0.15, seed);
        let d = s.report.decision.clone().expect("decided");
        assert_ne!(d.candidate, "0,0", "seed {seed}: {d:?}");
        if d.reason.contains("0,0 stacks the program's threads") {
            kept_instead += 1;
            assert_eq!(d.runner_up.as_deref(), Some("0,0"), "{d:?}");
        }
    }
    // The rule did the work at least once: the race itself leaned to the stacked pinning.
    assert!(kept_instead > 0, "the race never chose the stacked pinning");
}

#[test]
fn a_stacked_pinning_that_wins_clearly_stays() {
    // One thread of two does the work and the other spins on a lock: together on one CPU
    // they run three times as fast.
    let s = race([100.0, 300.0, 110.0], 0.03, 7);
    let d = s.report.decision.clone().expect("decided");
    assert_eq!(d.candidate, "0,0", "{d:?}");
    assert!(
        d.margin_ci.is_some() && d.margin.is_some_and(|m| m > 1.0),
        "{d:?}"
    );
    let text = d.margin_text().expect("a margin");
    assert!(
        text.contains("× as fast as") && text.contains("95% CI 2."),
        "{text}"
    );
}

#[test]
fn the_report_states_the_margin_the_rule_read() {
    let s = race([100.0, 100.5, 100.0], 0.15, 3);
    let r = &s.report;
    let d = r.decision.clone().expect("decided");
    let ev = evidence_of(r);
    let ru = r
        .candidates
        .iter()
        .position(|c| Some(&c.label) == d.runner_up.as_ref())
        .expect("the runner-up is a candidate");
    let m = margin::compare(&ev[d.candidate_index], &ev[ru]).expect("compared");
    assert_eq!(d.margin, Some(m.margin));
    assert_eq!(d.margin_ci, m.half);
    let rate = ev[d.candidate_index].score().expect("probed");
    assert!(
        (d.rate.expect("a rate") - rate).abs() <= 1e-9 * rate,
        "{d:?}"
    );
    assert!(d.search_cost.is_some_and(|c| c >= 0.0), "{d:?}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Whatever the rates and the noise, the session never ends on the stacked pinning
    /// unless the report's own probes show it better than every other candidate with a 95%
    /// interval above zero; and every index the report states is one of its candidates.
    #[test]
    fn never_a_stacked_pinning_without_a_significant_win(
        spread in 20.0f64..200.0,
        stacked in 20.0f64..200.0,
        os in 20.0f64..200.0,
        noise in 0.0f64..0.4,
        seed in 0u64..1_000_000,
    ) {
        let s = race([spread, stacked, os], noise, seed);
        let r = &s.report;
        let n = r.candidates.len();
        for d in &r.decisions {
            proptest::prop_assert!(d.candidate_index < n, "{d:?}");
            proptest::prop_assert_eq!(&r.candidates[d.candidate_index].label, &d.candidate);
            proptest::prop_assert!(d.search_cost.is_none_or(|c| c >= 0.0), "{d:?}");
        }
        for p in &r.probes {
            proptest::prop_assert!(p.candidate < n && r.candidates[p.candidate].label == p.label);
        }
        for t in &r.timeline {
            proptest::prop_assert!(t.candidate.is_none_or(|c| c < n));
        }
        proptest::prop_assert!(r.search_cost >= 0.0);
        let Some(d) = &r.decision else { return Ok(()) };
        if d.candidate == "0,0" {
            let ev = evidence_of(r);
            for (i, c) in r.candidates.iter().enumerate() {
                if c.label != "0,0" && ev[i].score().is_some() {
                    let m = margin::compare(&ev[d.candidate_index], &ev[i]);
                    proptest::prop_assert!(
                        m.is_some_and(|m| m.significant_win()),
                        "kept 0,0 against {}: {m:?}", c.label
                    );
                }
            }
        }
    }
}
