//! The rule for risky decisions, applied to every decision a search takes (the first
//! search, the phase watch's re-searches, the check of a remembered decision), whatever
//! the strategy.
//!
//! A pinning that puts more of the program's threads on a CPU than one (stacked), or that
//! leaves it fewer CPUs than threads, is the one decision that can cost a program 10×: two
//! threads spinning at a barrier on one CPU, a thread behind another on a CPU it cannot
//! leave. Such a pinning is decided only when it beats every candidate that gives each
//! thread a CPU of its own, and the OS placement, with a margin whose 95% interval
//! (`margin`) lies above zero. A tie or a loss keeps the best of those instead; with none
//! of them measured it keeps the OS placement (or the first of them). Where every
//! candidate stacks (the user named only such), the decision stands: nothing safer was
//! given.

use super::margin::{compare, Evidence};
use crate::report::margin_text;

/// What the rule makes of a decision.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Guard {
    /// It stands: it stacks nothing, or it won by the rule.
    Stands,
    /// It stacks threads but every candidate does: nothing safer to keep.
    NothingSafer,
    /// Keep `by` instead, for `why`.
    Replace { by: usize, why: String },
}

/// One candidate as the rule sees it.
#[derive(Debug, Clone)]
pub(crate) struct Entry<'a> {
    pub(crate) label: &'a str,
    /// It stacks the program's threads (`Pinning::shares_cpus` for the threads it runs).
    pub(crate) stacks: bool,
    pub(crate) os: bool,
    pub(crate) evidence: &'a Evidence,
}

/// The rule applied to the decision for candidate `decided` among `entries`.
pub(crate) fn check(decided: usize, entries: &[Entry]) -> Guard {
    let Some(d) = entries.get(decided) else {
        return Guard::Stands;
    };
    if !d.stacks {
        return Guard::Stands;
    }
    let safe: Vec<usize> = (0..entries.len()).filter(|&i| !entries[i].stacks).collect();
    if safe.is_empty() {
        return Guard::NothingSafer;
    }
    let measured: Vec<usize> = safe
        .iter()
        .copied()
        .filter(|&i| entries[i].evidence.score().is_some())
        .collect();
    // The first safe candidate it does not beat by the rule, and how it compares.
    let unbeaten = measured.iter().find_map(|&i| {
        let m = compare(d.evidence, entries[i].evidence);
        (!m.is_some_and(|m| m.significant_win())).then_some((i, m))
    });
    if unbeaten.is_none() && !measured.is_empty() {
        return Guard::Stands;
    }
    let by = measured
        .iter()
        .copied()
        .max_by(|&a, &b| {
            let s = |i: usize| entries[i].evidence.score().unwrap_or(0.0);
            s(a).total_cmp(&s(b))
        })
        .or_else(|| safe.iter().copied().find(|&i| entries[i].os))
        .unwrap_or(safe[0]);
    let against = match unbeaten {
        Some((i, Some(m))) => format!("it is {}", margin_text(m.margin, m.half, entries[i].label)),
        Some((i, None)) => format!(
            "it cannot be compared with {} (no rate of one or the other)",
            entries[i].label
        ),
        None => "no candidate with a CPU per thread was measured against it".into(),
    };
    Guard::Replace {
        by,
        why: format!(
            "{} stacks the program's threads, which is kept only on a significant win over every pinning with a CPU per thread and the OS placement, and {against}: keeping {}",
            d.label, entries[by].label
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ticks: &[f64]) -> Evidence {
        let mut e = Evidence::default();
        if !ticks.is_empty() {
            e.add(
                ticks.iter().sum::<f64>() / ticks.len() as f64,
                0.1 * ticks.len() as f64,
                ticks.iter().copied(),
            );
        }
        e
    }

    fn entries<'a>(list: &'a [(&'a str, bool, bool, Evidence)]) -> Vec<Entry<'a>> {
        list.iter()
            .map(|(label, stacks, os, evidence)| Entry {
                label,
                stacks: *stacks,
                os: *os,
                evidence,
            })
            .collect()
    }

    #[test]
    fn a_stacked_pinning_measured_below_the_os_placement_is_not_kept() {
        // The demo's triad phase: 0,0 at -1.4% against the OS placement.
        let list = [
            ("0,0", true, false, ev(&[61.0, 62.5, 60.9, 61.9])),
            ("0,1", false, false, ev(&[58.0, 59.0, 60.0])),
            (
                "unpinned (OS decides)",
                false,
                true,
                ev(&[61.8, 63.5, 61.2, 63.3]),
            ),
        ];
        match check(0, &entries(&list)) {
            Guard::Replace { by, why } => {
                assert_eq!(by, 2, "the best safe candidate by its rate: {why}");
                assert!(why.contains("0,0 stacks"), "{why}");
                assert!(why.contains("keeping unpinned (OS decides)"), "{why}");
            }
            g => panic!("{g:?}"),
        }
    }

    #[test]
    fn a_near_tie_never_keeps_a_stacked_pinning() {
        // The tour's barrier phase: 0,0 ahead of 0,1 by 0.56% on noisy ticks.
        let list = [
            ("0,0", true, false, ev(&[100.0, 112.0, 93.0, 101.2])),
            ("0,1", false, false, ev(&[99.0, 111.0, 92.0, 100.6])),
        ];
        assert!(matches!(
            check(0, &entries(&list)),
            Guard::Replace { by: 1, .. }
        ));
    }

    #[test]
    fn a_significant_win_over_every_safe_candidate_stands() {
        let list = [
            ("0,0", true, false, ev(&[300.0, 305.0, 298.0])),
            ("0,1", false, false, ev(&[100.0, 102.0, 99.0])),
            (
                "unpinned (OS decides)",
                false,
                true,
                ev(&[150.0, 90.0, 160.0, 120.0]),
            ),
        ];
        assert_eq!(check(0, &entries(&list)), Guard::Stands);
    }

    #[test]
    fn a_win_over_one_safe_candidate_but_not_another_is_not_enough() {
        let list = [
            ("0,0", true, false, ev(&[300.0, 305.0, 298.0])),
            ("0,1", false, false, ev(&[100.0, 102.0, 99.0])),
            (
                "unpinned (OS decides)",
                false,
                true,
                ev(&[310.0, 200.0, 390.0]),
            ),
        ];
        assert!(matches!(
            check(0, &entries(&list)),
            Guard::Replace { by: 2, .. }
        ));
    }

    #[test]
    fn unmeasured_safe_candidates_keep_the_os_placement_and_only_stacked_ones_stand() {
        let list = [
            ("0,0", true, false, ev(&[300.0, 305.0])),
            ("0,1", false, false, ev(&[])),
            ("unpinned (OS decides)", false, true, ev(&[])),
        ];
        match check(0, &entries(&list)) {
            Guard::Replace { by, why } => {
                assert_eq!(by, 2);
                assert!(why.contains("no candidate with a CPU per thread"), "{why}");
            }
            g => panic!("{g:?}"),
        }
        let only = [
            ("0,0", true, false, ev(&[300.0])),
            ("1,1", true, false, ev(&[200.0])),
        ];
        assert_eq!(check(1, &entries(&only)), Guard::NothingSafer);
        let safe = [("0,1", false, false, ev(&[1.0]))];
        assert_eq!(check(0, &entries(&safe)), Guard::Stands);
    }
}
