//! A change of the whole machine's load found in a search's probes: a moment around which
//! every pinning's rate moved the same way by much more than its probes vary. Pure: series
//! of (when, log rate) in, the moment and the step out; the race decides what to do with it.

/// The least move, on the log scale, of every pinning's rate around one moment that counts as
/// a change of the whole machine: 0.25 is a 22% drop or a 28% rise. A probe of a noisy
/// candidate (10% ticks, 5% drift) moves about 0.14 from one to the next, so three doing it
/// alike by chance are rare. In the search simulator 0.2 and 0.3 did as well.
pub(crate) const LEAST_MOVE: f64 = 0.25;

/// Fewest pinnings, probed on both sides of the moment, that must have moved alike.
pub(crate) const PINNINGS: usize = 3;

/// A change found: from `at` on (the search's clock) the rates are `step.exp()` times what
/// they were before.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LevelChange {
    pub at: f64,
    pub step: f64,
}

/// The change in `series` (one per pinning: its probes as (start, ln rate)), if any. Each
/// probe's start is a candidate moment; at a moment, each pinning probed on both sides of it
/// moved by the median of its probes after less the median of those before. A moment
/// qualifies when `PINNINGS` or more moved, all the same way, each by more than
/// `LEAST_MOVE`; of those, the one where the pinning that moved least moved most is taken (a
/// moment set too early leaves probes from before the change after it, and their pinning's
/// move shrinks), the latest of equals, and its step is the median move. Between two probes
/// of the pinnings that moved, every moment splits them alike, and the change is found soon
/// after it happens: the latest leaves fewest probes of other pinnings, taken before it, on
/// its far side (in the simulator, 0.543 → 0.539 s lost a case with a neighbour arriving,
/// against the earliest).
pub(crate) fn find(series: &[Vec<(f64, f64)>]) -> Option<LevelChange> {
    let mut moments: Vec<f64> = series.iter().flatten().map(|p| p.0).collect();
    moments.sort_by(f64::total_cmp);
    moments.dedup();
    // (the change, the least move around it)
    let mut best: Option<(LevelChange, f64)> = None;
    for &at in moments.iter().skip(1) {
        let moves: Vec<f64> = series
            .iter()
            .filter_map(|s| {
                let side = |after: bool| -> Vec<f64> {
                    s.iter()
                        .filter(|p| (p.0 >= at) == after)
                        .map(|p| p.1)
                        .collect()
                };
                Some(autopin_stats::median(&side(true))? - autopin_stats::median(&side(false))?)
            })
            .collect();
        if moves.len() < PINNINGS {
            continue;
        }
        let least = moves.iter().map(|m| m.abs()).fold(f64::INFINITY, f64::min);
        let alike = moves.iter().all(|m| m.signum() == moves[0].signum());
        if alike && least > LEAST_MOVE && best.is_none_or(|b| least >= b.1) {
            let step = autopin_stats::median(&moves)?;
            best = Some((LevelChange { at, step }, least));
        }
    }
    best.map(|b| b.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probes of a pinning at `rate` (ln), one every `every` seconds from `from`, `n` of
    /// them, each rate times `drop` from `at` on, with a fixed ±2% pattern.
    fn pinning(rate: f64, from: f64, every: f64, n: usize, at: f64, drop: f64) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                let t = from + every * i as f64;
                let wiggle = [0.02, -0.02, 0.01, -0.01][i % 4];
                let level = if t >= at { drop.ln() } else { 0.0 };
                (t, rate.ln() + level + wiggle)
            })
            .collect()
    }

    #[test]
    fn a_drop_that_moves_every_pinning_alike_is_found_at_its_moment() {
        // Three pinnings probed in turn every 0.6 s, a 40% drop at 3 s.
        let series: Vec<_> = (0..3)
            .map(|c| pinning(1.0 - 0.05 * c as f64, 0.2 * c as f64, 0.6, 10, 3.0, 0.6))
            .collect();
        let found = find(&series).expect("a change");
        // The first probe at or after 3 s: pinning 0's at 3.0.
        assert!((found.at - 3.0).abs() < 1e-9, "{found:?}");
        assert!((found.step - 0.6f64.ln()).abs() < 0.03, "{found:?}");
    }

    #[test]
    fn no_change_is_found_in_steady_probes_or_in_a_drop_of_one_pinning() {
        let steady: Vec<_> = (0..4)
            .map(|c| pinning(1.0, 0.1 * c as f64, 0.5, 12, f64::INFINITY, 1.0))
            .collect();
        assert_eq!(find(&steady), None);
        // A neighbour on one pinning's CPU slows it alone: not the whole machine.
        let mut one = steady.clone();
        one[1] = pinning(1.0, 0.1, 0.5, 12, 3.0, 0.5);
        assert_eq!(find(&one), None);
        // Nor with two pinnings only, however alike.
        let two: Vec<_> = (0..2)
            .map(|c| pinning(1.0, 0.1 * c as f64, 0.5, 12, 3.0, 0.5))
            .collect();
        assert_eq!(find(&two), None);
    }

    /// Pinning A's one outlying probe before its second makes it look moved by 0.3 though
    /// both came before the drop; B and C did drop (by 0.5) between 2.2 s and 3.1 s. Every
    /// moment in (2.2, 2.8] splits them alike; the latest, 2.8, leaves D's probe at 2.5 s
    /// (before the drop) on the side it belongs to.
    #[test]
    fn of_moments_that_split_the_pinnings_alike_the_latest_is_taken() {
        let series = vec![
            vec![(0.2, 0.3), (2.8, 0.0)],
            vec![(2.2, 0.0), (3.1, -0.5)],
            vec![(0.9, 0.0), (3.2, -0.5)],
            vec![(2.5, 0.0)],
        ];
        let found = find(&series).expect("a change");
        assert_eq!(found.at, 2.8, "{found:?}");
    }

    #[test]
    fn moves_that_disagree_in_direction_are_no_change() {
        let series = vec![
            pinning(1.0, 0.0, 0.5, 12, 3.0, 0.5),
            pinning(1.0, 0.1, 0.5, 12, 3.0, 0.5),
            pinning(1.0, 0.2, 0.5, 12, 3.0, 1.8),
        ];
        assert_eq!(find(&series), None);
    }
}
