//! What the session says in plain words: its start, a program that ends before or during the
//! search, the start-up's readings, an objective that never moves.

use super::*;
use crate::strategy::{Race, RaceParams};

fn session(init: f64, waited: f64) -> Session {
    let cfg = SessionConfig {
        init,
        init_waited: waited,
        watch: None,
        ..SessionConfig::default()
    };
    Session::new(
        cfg,
        Box::new(|_| vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])].into()),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    )
}

fn message(a: &[Action]) -> String {
    a.iter()
        .filter_map(|x| match x {
            Action::Message(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn start_says_how_long_the_program_ran_before_probing() {
    let m = message(&session(0.0, 0.5).start(0.0));
    assert!(!m.contains("0.0 s"), "{m}");
    assert!(
        m.contains("has run 0.5 s") && m.contains("probing starts now"),
        "{m}"
    );
    let m = message(&session(0.5, 0.0).start(0.0));
    assert_eq!(m, "letting the program start for 0.5 s before probing");
}

#[test]
fn a_program_that_ends_before_probing_is_explained_in_plain_words() {
    let mut s = session(0.0, 0.5);
    s.start(0.0);
    let r = s.finish(2.0, Some(0));
    let why = r.incomplete_reason.clone().unwrap();
    assert!(
        why.contains("ended after 2.0 s")
            && why.contains("before autopin tried any pinning")
            && why.contains("where the OS placed it"),
        "{why}"
    );
    assert!(!why.contains("init phase"), "{why}");
}

/// A session whose first search is left after one round: candidate 0 runs at 100/s,
/// candidate 1 at 105/s, too close to decide on one probe each. Returns it and the time.
fn search_left_after_a_round() -> (Session, f64) {
    let mut s = session(0.0, 0.0);
    s.start(0.0);
    let mut t = 0.0;
    while t < 1.9 {
        let rate = match s.applied {
            Some(1) => 105.0,
            _ => 100.0,
        };
        let iv = Interval {
            start: t,
            end: t + 0.1,
            amount: rate * 0.1,
            tracked: 1,
            ..Interval::default()
        };
        s.on_interval(&iv);
        t += 0.1;
        if s.report.probes.len() >= 2 && !s.is_decided() {
            break;
        }
    }
    assert!(!s.is_decided(), "a 5% gap is not decided on one probe each");
    (s, t)
}

/// The report's search cost is what the probes of candidate 0 lost against candidate
/// 1's 105/s.
fn assert_cost_is_what_candidate_0_lost(s: &Session) {
    let on_0: f64 = s
        .report
        .probes
        .iter()
        .filter(|p| p.candidate == 0 && !p.startup)
        .map(|p| p.warmup + p.duration)
        .sum();
    assert!(on_0 > 0.0, "{:?}", s.report.probes);
    let want = on_0 * (1.0 - 100.0 / 105.0);
    assert!(
        (s.report.search_cost - want).abs() < 1e-6,
        "{} vs {want}",
        s.report.search_cost
    );
}

#[test]
fn a_search_cut_short_names_the_best_so_far() {
    // The program ends after the first round.
    let (mut s, t) = search_left_after_a_round();
    // The search ran from the start to the end: its time is in the report.
    let searched = s.finish(t, Some(0)).search_time;
    assert!((searched - t).abs() < 0.15, "searched {searched} of {t} s");
    let why = s.report.incomplete_reason.clone().unwrap();
    assert!(why.contains("during the search"), "{why}");
    assert!(why.contains("best so far: 1"), "{why}");
    // The unfinished search still cost the program its probes of candidate 0, at 100/s
    // where the best so far did 105/s.
    assert_cost_is_what_candidate_0_lost(&s);
    assert!(why.contains("the search cost 0.0"), "{why}");
}

#[test]
fn a_search_autopin_detached_from_still_counts_what_it_cost() {
    // autopin stops watching (attach --duration) after the first round.
    let (mut s, t) = search_left_after_a_round();
    let r = s.detach(t, 1);
    let why = r.incomplete_reason.clone().unwrap();
    assert!(why.contains("before a decision"), "{why}");
    assert!(why.contains("the search cost 0.0"), "{why}");
    assert_cost_is_what_candidate_0_lost(&s);
}

#[test]
fn a_re_search_cut_short_still_counts_what_it_cost() {
    // CPU 1 does 100/s, CPU 0 50/s: the search keeps CPU 1. At 10 s CPU 1 drops to
    // 52/s (too close to CPU 0 to decide on a probe each), the watch starts a
    // re-search, and the program ends during it once both have been probed again (the
    // cost is against the kept pinning's rate in the re-search: without a probe of it
    // there, none is stated).
    let cfg = SessionConfig {
        init: 0.5,
        ..SessionConfig::default()
    };
    let mut s = Session::new(
        cfg,
        Box::new(|_| vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])].into()),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    );
    s.start(0.0);
    let mut t = 0.0;
    let mut researching = false;
    while t < 40.0 {
        let rate = match (s.applied, t >= 10.0) {
            (Some(1), false) => 100.0,
            (Some(1), true) => 52.0,
            _ => 50.0,
        };
        s.on_interval(&Interval {
            start: t,
            end: t + 0.1,
            amount: rate * 0.1,
            tracked: 1,
            ..Interval::default()
        });
        t += 0.1;
        researching = s.search > 0 && !s.is_decided();
        let probed = |c| {
            s.report
                .probes
                .iter()
                .any(|p| p.search > 0 && p.candidate == c)
        };
        if researching && probed(0) && probed(1) {
            break;
        }
    }
    assert!(researching, "a re-search: {:?}", s.report.decisions);
    let first = s.report.search_cost;
    let r = s.finish(t, Some(0));
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("during re-search"))
        .expect("a note");
    assert!(note.contains("the re-search cost"), "{note}");
    // CPU 0 (50/s) was probed against CPU 1 at 52/s: the re-search lost work.
    assert!(r.search_cost > first, "{} after {first}", r.search_cost);
}

#[test]
fn a_search_its_phase_never_came_back_to_still_counts_what_it_cost() {
    // Phase "a": CPU 1 does 102/s and CPU 0 100/s, too close to decide in a round. At
    // 1.2 s, a round into its search, the program enters phase "b" for good, where the
    // two are 10× apart; it ends at 6 s with phase a's search parked.
    let mut s = session(0.5, 0.0);
    s.start(0.0);
    let mut t = 0.0;
    while t < 6.0 - 1e-9 {
        let b = t >= 1.2 - 1e-9;
        let rate = match (s.applied, b) {
            (Some(1), false) => 102.0,
            (_, false) => 100.0,
            (Some(1), true) => 1000.0,
            (_, true) => 100.0,
        };
        s.on_interval(&Interval {
            start: t,
            end: t + 0.1,
            amount: rate * 0.1,
            tracked: 1,
            phase: Some(if b { "b" } else { "a" }.into()),
            ..Interval::default()
        });
        t += 0.1;
    }
    let a_probes: Vec<_> = s
        .report
        .probes
        .iter()
        .filter(|p| p.phase.as_deref() == Some("a") && !p.startup)
        .map(|p| (p.candidate, p.warmup + p.duration))
        .collect();
    assert!(
        a_probes.iter().any(|(c, _)| *c == 0),
        "{:?}",
        s.report.probes
    );
    let before = s.report.search_cost;
    let r = s.finish(t, Some(0));
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("phase a") && n.contains("unfinished"))
        .unwrap_or_else(|| panic!("a note: {:?}", r.notes));
    assert!(note.contains("cost"), "{note}");
    // Its probes of CPU 0 (100/s) lost against CPU 1's 102/s.
    let on_0: f64 = a_probes
        .iter()
        .filter(|(c, _)| *c == 0)
        .map(|(_, d)| d)
        .sum();
    let want = on_0 * (1.0 - 100.0 / 102.0);
    assert!(
        (r.search_cost - before - want).abs() < 1e-6,
        "{} - {before} vs {want}",
        r.search_cost
    );
}

/// Feeds intervals of 0.1 s at a constant rate from `t` until `until`.
fn feed(s: &mut Session, mut t: f64, until: f64) -> f64 {
    while t < until - 1e-9 {
        s.on_interval(&Interval {
            start: t,
            end: t + 0.1,
            amount: 10.0,
            tracked: 1,
            ..Interval::default()
        });
        t += 0.1;
    }
    t
}

#[test]
fn a_watched_probe_that_collapses_ends_a_look_after() {
    // The OS placement beside a busy CPU 0 runs at 10 000 units/s until its threads are
    // stacked at 1.25 s and at 100/s from then on; CPU 1 runs at 12 000/s. Readings come
    // as the driver takes them: every 0.1 s, at a warm-up's end and, in a watched
    // probe, at every look.
    let rate = |applied: Option<usize>, t: f64| match applied {
        Some(1) => 12_000.0,
        _ if t < 1.25 => 10_000.0,
        _ => 100.0,
    };
    let collapse_probe = |looks: bool| {
        let mut s = os_or_cpu1(Some(vec![0]));
        s.start(0.5);
        s.begin_if_due(0.5, 1);
        let mut t = 0.5;
        let mut grid = t;
        while t < 10.0 && !s.is_decided() {
            let early = s
                .warmup_ends()
                .or_else(|| s.look_due().filter(|_| looks))
                .filter(|&w| w > t + 1e-9 && w < grid + 0.1 - 1e-9);
            let end = early.unwrap_or(grid + 0.1);
            grid = if early.is_some() { end } else { grid + 0.1 };
            // The amount over [t, end], the rate changing at 1.25 s.
            let fast = (end.min(1.25) - t).max(0.0);
            let amount = rate(s.applied, 0.0) * fast + rate(s.applied, 2.0) * (end - t - fast);
            s.on_interval(&Interval {
                start: t,
                end,
                amount: amount.round(),
                tracked: 1,
                ..Interval::default()
            });
            t = end;
        }
        let d = s.report.decision.clone().expect("decided");
        assert_eq!(d.cpus, Some(vec![1]), "{}", d.reason);
        let p = s
            .report
            .probes
            .iter()
            .find(|p| p.candidate == 0 && p.start < 1.25 && p.start + p.duration > 1.25)
            .cloned()
            .expect("a probe of the OS placement across its collapse");
        (p.start + p.duration, s.report.search_cost)
    };
    let (ended, cost) = collapse_probe(true);
    // It ended at the first look past the collapse, not at the next tick.
    assert!(ended <= 1.25 + 0.02 + 1e-6, "ended at {ended}");
    let (ended_ticks, cost_ticks) = collapse_probe(false);
    assert!(ended_ticks > ended + 0.05, "{ended_ticks} vs {ended}");
    assert!(cost < cost_ticks, "{cost} vs {cost_ticks}");
}

#[test]
fn the_cpus_busy_with_other_work_reach_the_search() {
    // The OS placement and a pinning that run alike: on an idle machine the search keeps
    // the OS placement; when the candidate list says CPU 0 is busy with other work, it
    // keeps the pinning (`Strategy::set_busy_neighbours`).
    let decided = |busy: Option<Vec<u32>>| {
        let mut s = os_or_cpu1(busy);
        s.start(0.5);
        s.begin_if_due(0.5, 1);
        feed(&mut s, 0.5, 25.0);
        let d = s.report.decision.clone().expect("decided");
        (d.cpus, d.reason)
    };
    let (idle, why) = decided(None);
    assert_eq!(idle, None, "the OS placement: {why}");
    let (busy, why) = decided(Some(vec![0]));
    assert_eq!(busy, Some(vec![1]), "{why}");
    assert!(why.contains("busy with other work"), "{why}");
}

/// A session racing the OS placement against CPU 1, its search due at once (the program
/// ran 0.5 s already), the candidate list made beside the CPUs `busy` with other work.
fn os_or_cpu1(busy: Option<Vec<u32>>) -> Session {
    Session::new(
        SessionConfig {
            init: 0.0,
            init_waited: 0.5,
            watch: None,
            ..SessionConfig::default()
        },
        Box::new(move |_| CandidateList {
            pinnings: vec![Pinning::unpinned(), Pinning::from_cpus(vec![1])],
            note: None,
            busy: busy.clone(),
        }),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    )
}

#[test]
fn a_search_due_at_the_start_begins_at_once_and_skips_needless_warm_ups() {
    let mut s = os_or_cpu1(None);
    s.start(0.5);
    // No threads known yet: nothing to plan for.
    assert!(s.begin_if_due(0.5, 0).is_empty());
    let m = message(&s.begin_if_due(0.5, 1));
    assert!(m.contains("search 0: 2 candidates for 1 thread"), "{m}");
    feed(&mut s, 0.5, 3.0);
    let p = &s.report.probes;
    assert!(p.len() >= 3, "{p:?}");
    // The OS placement first: nothing was pinned yet, so no warm-up, and it starts when
    // the search does.
    assert_eq!((p[0].candidate, p[0].warmup), (0, 0.0), "{p:?}");
    assert!((p[0].start - 0.5).abs() < 1e-6, "{p:?}");
    // Moving to CPU 1 warms up; probing it again right after does not.
    assert_eq!(p[1].candidate, 1);
    assert!(p[1].warmup > 0.0, "{p:?}");
    if p[2].candidate == 1 {
        assert_eq!(p[2].warmup, 0.0, "{p:?}");
    } else {
        assert!(p[2].warmup > 0.0, "{p:?}");
    }
    // Before the start-up is over, nothing begins early.
    let mut late = session(0.5, 0.0);
    late.start(0.0);
    assert!(late.begin_if_due(0.0, 1).is_empty());
}

#[test]
fn a_start_up_that_counted_nothing_at_its_end_is_a_pause_not_a_rate() {
    // GROMACS completes a few OpenMP constructs, then reads its input: the start-up's
    // tail, where the OS placed it, counts nothing.
    let (m, s) = after_start_up(&[3.0, 0.0, 0.0]);
    assert!(
        m.contains("the start-up's last 200 ms counted nothing (OpenMP constructs/s): a pause, not a rate; the OS placement is probed in the search"),
        "{m}"
    );
    // Born on CPU 1 (beside CPUs busy at launch), the pause is that pinning's.
    let (born, _) = after_start_up_on(&[3.0, 0.0, 0.0], Some(vec![1]));
    assert!(
        born.contains("a pause, not a rate; the pinning it started on is probed in the search"),
        "{born}"
    );
    let p = &s.report.probes;
    assert!(p.iter().all(|p| !p.startup), "{p:?}");
    // The OS placement is probed in the search first, where the program already is.
    assert_eq!((p[0].candidate, p[0].warmup), (0, 0.0), "{p:?}");
    assert!(p.iter().all(|p| p.rate > 500.0), "{p:?}");
    // The margin is the probes' 1000 against 600, not against a pause read as a rate.
    let d = s.report.decision.clone().expect("decided");
    assert_eq!(d.candidate_index, 1);
    let margin = d.margin.expect("a margin");
    assert!((0.5..0.8).contains(&margin), "{d:?}");
    // On an idle machine a quiet OS placement 1.67× behind is judged on its three probes
    // (it waited for eight ticks, and the decision came at 2.9 s after five rounds).
    assert!(d.at < 2.0, "{d:?}");
    let os = p.iter().filter(|p| p.candidate == 0).count();
    assert_eq!(os, 3, "{p:?}");
}

#[test]
fn a_start_up_tail_that_counted_too_few_units_is_no_rate() {
    // Three units in the start-up's last 0.2 s (a rate of 15 ± 5 a second, mostly
    // rounding) are not the OS placement's first probe either; ten or more are.
    let (m, s) = after_start_up(&[3.0, 2.0, 1.0]);
    assert!(
        m.contains("the start-up's last 200 ms counted only 3 (OpenMP constructs/s; a probe sees 10 or more): too few for a rate"),
        "{m}"
    );
    assert!(s.report.probes.iter().all(|p| !p.startup));
    let (m, s) = after_start_up(&[3.0, 6.0, 6.0]);
    assert!(!m.contains("the start-up's last"), "{m}");
    let first = &s.report.probes[0];
    assert!(first.startup && first.candidate == 0, "{first:?}");
    assert!((first.rate - 60.0).abs() < 1e-6, "{first:?}");
}

/// A session whose OpenMP start-up (seeded, as the run does, from the 0.3 s it waited)
/// counted `startup` units in each 0.1 s, run until it decides. Once it computes, the
/// program runs at 600 units/s where the OS places it and at 1000 on the pinning.
/// Returns what it said and the session.
fn after_start_up(startup: &[f64]) -> (String, Session) {
    after_start_up_on(startup, None)
}

/// `after_start_up`, with the program born pinned to `born` (None: where the OS places
/// it).
fn after_start_up_on(startup: &[f64], born: Option<Vec<u32>>) -> (String, Session) {
    let mut s = Session::new(
        SessionConfig {
            init: 0.0,
            init_waited: 0.3,
            startup_is_os: born.is_none(),
            startup_pinned: born,
            unit: "OpenMP constructs/s".into(),
            watch: None,
            ..SessionConfig::default()
        },
        Box::new(|_| vec![Pinning::unpinned(), Pinning::from_cpus(vec![1])].into()),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    );
    let startup: Vec<Interval> = startup
        .iter()
        .enumerate()
        .map(|(i, &amount)| Interval {
            start: 0.1 * i as f64,
            end: 0.1 * (i + 1) as f64,
            amount,
            tracked: 2,
            ..Interval::default()
        })
        .collect();
    s.seed_startup(&startup);
    let mut said = s.start(0.3);
    said.extend(s.begin_if_due(0.3, 2));
    let mut t: f64 = 0.3;
    while t < 20.0 && !s.is_decided() {
        let amount = if s.applied == Some(1) { 100.0 } else { 60.0 };
        said.extend(s.on_interval(&Interval {
            start: t,
            end: t + 0.1,
            amount,
            tracked: 2,
            ..Interval::default()
        }));
        t += 0.1;
    }
    (message(&said), s)
}

#[test]
fn an_objective_that_never_moves_is_named_and_explained() {
    let mut s = Session::new(
        SessionConfig {
            init: 0.5,
            unit: "beats/s".into(),
            watch: None,
            ..SessionConfig::default()
        },
        Box::new(|_| vec![Pinning::from_cpus(vec![0]), Pinning::from_cpus(vec![1])].into()),
        Box::new(|n, _| Box::new(Race::new(RaceParams::default(), n))),
    );
    s.start(0.0);
    let mut said = Vec::new();
    let mut t = 0.0;
    while t < 4.0 {
        said.extend(s.on_interval(&Interval {
            start: t,
            end: t + 0.1,
            amount: 0.0,
            tracked: 1,
            ..Interval::default()
        }));
        t += 0.1;
    }
    let m = message(&said);
    assert_eq!(m.matches("has measured no progress yet").count(), 1, "{m}");
    assert!(m.contains("(beats/s)"), "{m}");
    let why = s.finish(t, Some(0)).incomplete_reason.clone().unwrap();
    assert!(
        why.contains("without any progress the objective (beats/s)"),
        "{why}"
    );
    assert!(!why.contains("before autopin tried"), "{why}");
}
