//! Did the objective track the program's own progress? Given, per probe, the objective's
//! rate and the progress rate the program reported (heartbeat or OpenMP work), measure how
//! well the two agree, so a report can say when a counter misleads (e.g. CPU time that a
//! spin-wait burns without progress).

use serde::{Deserialize, Serialize};

/// Agreement between the objective and the program's progress over the probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tracking {
    /// Probes with both rates.
    pub probes: usize,
    /// Pearson correlation of the two rates (None when either is constant).
    pub pearson: Option<f64>,
    /// Spearman rank correlation (None when either is constant).
    pub spearman: Option<f64>,
    /// Of the probe pairs that progress tells apart, the share the objective orders the same
    /// way (1 = always, 0.5 = no better than a coin, 0 = always the other way).
    pub concordance: Option<f64>,
    /// One line for people.
    pub verdict: String,
}

/// Computes the agreement; `pairs` are (objective rate, progress rate) per probe.
/// `higher_is_better` orients the objective (lower-is-better objectives are inverted so that
/// agreement means "the objective prefers the probes where the program progressed more").
/// None with fewer than two usable probes.
pub fn tracking(pairs: &[(f64, f64)], higher_is_better: bool) -> Option<Tracking> {
    let pts: Vec<(f64, f64)> = pairs
        .iter()
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .map(|&(a, b)| (if higher_is_better { a } else { -a }, b))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let linear = pearson(&xs, &ys);
    let spearman = pearson(&ranks(&xs), &ranks(&ys));
    let (mut same, mut total) = (0.0, 0.0);
    for i in 0..pts.len() {
        for j in i + 1..pts.len() {
            let dy = pts[i].1 - pts[j].1;
            // Only pairs the program itself tells apart (more than 2% apart) count.
            if dy.abs() <= 0.02 * pts[i].1.abs().max(pts[j].1.abs()) {
                continue;
            }
            total += 1.0;
            let dx = pts[i].0 - pts[j].0;
            if dx * dy > 0.0 {
                same += 1.0;
            } else if dx == 0.0 {
                same += 0.5;
            }
        }
    }
    let concordance = (total > 0.0).then(|| same / total);
    let verdict = match (concordance, spearman) {
        (None, _) => "the program's progress was the same in every probe: nothing to compare".into(),
        (Some(c), _) if c >= 0.8 => format!(
            "the objective ordered {:.0}% of the distinguishable probe pairs as the program's progress did: it tracked progress",
            100.0 * c
        ),
        (Some(c), _) if c > 0.6 => format!(
            "the objective ordered only {:.0}% of the distinguishable probe pairs as the program's progress did: it tracked progress loosely",
            100.0 * c
        ),
        (Some(c), _) => format!(
            "the objective ordered {:.0}% of the distinguishable probe pairs as the program's progress did: it did NOT track progress and may have misled the choice",
            100.0 * c
        ),
    };
    Some(Tracking {
        probes: pts.len(),
        pearson: linear,
        spearman,
        concordance,
        verdict,
    })
}

fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx).powi(2);
        syy += (b - my).powi(2);
    }
    (sxx > 0.0 && syy > 0.0).then(|| (sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// Ranks with ties sharing their average rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        for k in i..=j {
            r[idx[k]] = (i + j) as f64 / 2.0;
        }
        i = j + 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_objective_proportional_to_progress_tracks_it() {
        let p = [(2.0, 100.0), (4.0, 210.0), (1.0, 40.0), (3.0, 160.0)];
        let t = tracking(&p, true).unwrap();
        assert_eq!(t.probes, 4);
        assert_eq!(t.concordance, Some(1.0));
        assert!((t.spearman.unwrap() - 1.0).abs() < 1e-12);
        assert!(t.pearson.unwrap() > 0.98);
        assert!(t.verdict.contains("tracked progress"));
    }

    #[test]
    fn cpu_time_that_stays_flat_while_progress_varies_does_not_track() {
        // task-clock of spinning threads: ~2 CPU-s/s whatever the pinning, while the work
        // done differs 10×; tiny noise orders the flat values at random.
        let p = [(2.00, 10.0), (2.01, 100.0), (1.99, 95.0), (2.02, 12.0)];
        let t = tracking(&p, true).unwrap();
        assert!(t.concordance.unwrap() <= 0.5, "{t:?}");
        assert!(t.verdict.contains("did NOT track"), "{}", t.verdict);
    }

    #[test]
    fn lower_is_better_objectives_are_oriented() {
        // Power falls as progress rises here: a lower-is-better objective that agrees.
        let p = [(30.0, 100.0), (20.0, 200.0), (10.0, 300.0)];
        assert_eq!(tracking(&p, false).unwrap().concordance, Some(1.0));
        assert_eq!(tracking(&p, true).unwrap().concordance, Some(0.0));
    }

    #[test]
    fn too_few_or_indistinguishable_probes() {
        assert_eq!(tracking(&[(1.0, 2.0)], true), None);
        assert_eq!(tracking(&[(1.0, f64::NAN), (2.0, 3.0)], true), None);
        let t = tracking(&[(1.0, 100.0), (2.0, 100.5)], true).unwrap();
        assert_eq!(t.concordance, None);
        assert!(t.verdict.contains("nothing to compare"));
    }

    #[test]
    fn ties_share_ranks() {
        assert_eq!(ranks(&[3.0, 1.0, 3.0, 2.0]), vec![2.5, 0.0, 2.5, 1.0]);
    }
}
