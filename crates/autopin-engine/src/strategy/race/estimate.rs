//! How well each candidate is known: its mean rate over the time measured (`mean_rate`), the
//! noise of one probe from its own data (`own`), moderated by every candidate's
//! (`estimates`), and the gap between two candidates, paired over the rounds that probed both
//! or else Welch's (`gap`). docs/search.md, "The model of a candidate".

use super::swing::with_swing;
use super::Race;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A candidate's mean log rate and how well it is known.
#[derive(Debug, Clone, Copy)]
pub(super) struct Estimate {
    pub(super) mean: f64,
    /// Variance of `mean`.
    pub(super) var: f64,
    /// Degrees of freedom behind `var` (0: unknown, no test possible).
    pub(super) df: f64,
    pub(super) n: usize,
}

/// What a candidate's own probes say, before the prior (see `Race::own`).
struct Own {
    /// Mean log rate.
    mean: f64,
    /// Probes.
    n: usize,
    /// What the probes are worth for the mean's variance (`n` when all are whole).
    n_eff: f64,
    /// Variance of one probe and its degrees of freedom.
    var: Option<(f64, f64)>,
}

/// A leader and a challenger compared over the rounds that probed both.
struct Paired {
    /// ln(leader's mean rate / challenger's), over those rounds.
    log_gap: f64,
    /// Variance of one round's paired relative deviation, and its degrees of freedom.
    var: f64,
    df: f64,
    /// Rounds.
    n: usize,
}

/// The candidate among `cands` with the highest mean (the last of equals); candidates not
/// measured yet are passed over.
pub(super) fn best_by_mean(
    est: &[Option<Estimate>],
    cands: impl Iterator<Item = usize>,
) -> Option<usize> {
    cands
        .filter_map(|c| est[c].map(|e| (c, e.mean)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

/// One-sided Student-t quantile: the t with P(T > t) = alpha.
fn t_quantile(alpha: f64, df: f64) -> f64 {
    if !(df.is_finite() && df > 0.0) {
        return f64::INFINITY;
    }
    match StudentsT::new(0.0, 1.0, df.min(1e6)) {
        Ok(t) => t.inverse_cdf(1.0 - alpha),
        Err(_) => f64::INFINITY,
    }
}

impl Race {
    /// Scores at or below zero (a probe that measured nothing) become a tiny positive value
    /// so that logarithms exist; it stays far below any real rate.
    fn log_floor(&self) -> f64 {
        let top = self
            .arms
            .iter()
            .flat_map(|a| a.scores.iter())
            .fold(0.0f64, |m, s| m.max(*s));
        if top > 0.0 {
            top * 1e-6
        } else {
            1e-300
        }
    }

    /// Candidate `c`'s mean rate, each probe weighted by `weight` (scores raised to
    /// `floor`); None before a probe. A pinning's mean is over the time it was measured:
    /// work is rate × time, and its probes' lengths differ. A reading cut at its warm-up
    /// (20 ms) is a tenth of a probe: right after a move it may have caught a thread waiting
    /// for its CPU behind another process (beside a busy CPU a pinning that ran 56 000
    /// OpenMP constructs/s read 12 000 in its first 20 ms; at a whole probe's weight it
    /// pulled the pinning's mean 11% down and the decision took 2.4 s instead of about 1).
    pub(super) fn mean_rate(&self, c: usize, floor: f64) -> Option<f64> {
        let a = &self.arms[c];
        let total: f64 = (0..a.scores.len()).map(|i| self.weight(c, i)).sum();
        (total > 0.0).then(|| {
            a.scores
                .iter()
                .enumerate()
                .map(|(i, s)| s.max(floor) * self.weight(c, i))
                .sum::<f64>()
                / total
        })
    }

    /// Probe `i` of candidate `c`: its weight in the mean, its length, or 1 for the OS
    /// placement. The kernel keeps the OS placement's threads where they are, or stacks
    /// them, for stretches longer than a probe, and its probe ended at the warm-up on a
    /// collapse stands for the stretch it caught the start of: ompwork beside a busy CPU
    /// read 58 000–60 000 OpenMP constructs/s in 0.6 s of its probes and 400–600 in two
    /// 20 ms ones, where whole runs of it go at 0.65 of the pinning; weighed by their
    /// length, the collapses counted for nothing and decisions came at a median 1.85 s
    /// instead of 1.1 s. Only beside busy CPUs: on an idle machine nothing stacks the
    /// threads for long, and a collapse right after a move is the move's (16 threads of
    /// ompwork on 16 idle CPUs read 1% of their rate in the first 20 ms after a pinning was
    /// lifted, then ran as fast as pinned; weighed as a probe, that made a pinning "63%"
    /// ahead of an OS placement as fast as it).
    fn weight(&self, c: usize, i: usize) -> f64 {
        if self.os_placement == Some(c) && self.busy_neighbours {
            1.0
        } else {
            self.arms[c].lengths[i]
        }
    }

    /// A candidate's mean log rate, its probe count, and the variance of one probe from its
    /// own data with that variance's degrees of freedom: the spread between its probes, or
    /// its ticks' spread divided by their number, whichever is larger (one probe: the ticks'
    /// spread times `one_probe_allowance`). None for the variance when neither exists.
    fn own(&self, c: usize, floor: f64) -> Option<Own> {
        let a = &self.arms[c];
        let n = a.scores.len();
        // A candidate is worth its mean rate (work is rate × time), not its geometric mean:
        // one whose rate swings between 0.5× and 1.5× does the work of 1×. On the log
        // scale that is the log of the mean, with the delta method's variance.
        let m = self.mean_rate(c, floor)?;
        let mean = m.ln();
        // The spread of the probes about that mean, with reliability weights, and the mean
        // worth Kish's effective number of probes, (Σw)² / Σw² (n when all are whole).
        let (w1, w2) = (0..n)
            .map(|i| self.weight(c, i))
            .fold((0.0, 0.0), |(s1, s2), w| (s1 + w, s2 + w * w));
        let n_eff = w1 * w1 / w2;
        let between = (n >= 2).then(|| {
            a.scores
                .iter()
                .enumerate()
                .map(|(i, x)| self.weight(c, i) * (x.max(floor) - m).powi(2))
                .sum::<f64>()
                / (w1 - w2 / w1)
                / (m * m)
        });
        // The ticks of one probe average out to 1/ticks of their variance only when they
        // are independent. The OS placement's are not: the kernel keeps a thread on a busy
        // CPU, or off it, for stretches as long as a probe, so its probe is worth one tick.
        let per_probe = if self.os_placement == Some(c) {
            1.0
        } else {
            a.ticks / a.tick_probes
        };
        let within = (a.within_df > 0.0).then(|| a.within_ss / a.within_df / per_probe);
        let var = match (between, within) {
            (Some(b), Some(w)) if b >= w => Some((b, (n - 1) as f64)),
            (Some(_), Some(w)) => Some((w, a.within_df)),
            (Some(b), None) => Some((b, (n - 1) as f64)),
            (None, Some(w)) => Some((w * self.p.one_probe_allowance, a.within_df)),
            (None, None) => None,
        };
        let var = var.map(|(v, df)| (with_swing(v, df, self.swing_variance(c)), df));
        Some(Own {
            mean,
            n,
            n_eff,
            var,
        })
    }

    /// Every candidate's estimate. A candidate's own variance, from a handful of probes, is
    /// moderated (empirical Bayes, as in moderated t-statistics): it is averaged with a prior
    /// worth `PRIOR_DF` degrees of freedom, the lower median of all candidates' own
    /// variances. The median keeps one swinging candidate from widening everyone's interval;
    /// the candidate's own data outweigh the prior as its probes accumulate.
    pub(super) fn estimates(&self) -> Vec<Option<Estimate>> {
        const PRIOR_DF: f64 = 2.0;
        let floor = self.log_floor();
        let own: Vec<_> = (0..self.arms.len()).map(|c| self.own(c, floor)).collect();
        let mut vars: Vec<f64> = own
            .iter()
            .filter_map(|o| o.as_ref().and_then(|o| o.var.map(|v| v.0)))
            .filter(|v| v.is_finite())
            .collect();
        vars.sort_by(f64::total_cmp);
        let prior = (!vars.is_empty()).then(|| vars[(vars.len() - 1) / 2]);
        let floor_var = self.p.noise_floor.powi(2);
        own.into_iter()
            .map(|o| {
                let Own {
                    mean,
                    n,
                    n_eff,
                    var,
                } = o?;
                let (v, df) = match (var, prior) {
                    // One probe: only its own ticks speak for it, and only when there are
                    // enough of them to say anything.
                    (Some((v, df)), _) if n == 1 && df >= 1.0 => (v, df),
                    _ if n == 1 => (f64::INFINITY, 0.0),
                    // The prior only ever widens: a noisy candidate is never made to look
                    // quieter than its own probes show.
                    (Some((v, df)), Some(p)) => (
                        v.max((PRIOR_DF * p + df * v) / (PRIOR_DF + df)),
                        PRIOR_DF + df,
                    ),
                    (Some((v, df)), None) => (v, df),
                    (None, Some(p)) => (p, PRIOR_DF),
                    (None, None) => (f64::INFINITY, 0.0),
                };
                Some(Estimate {
                    mean,
                    var: v.max(floor_var) / n_eff,
                    df,
                    n,
                })
            })
            .collect()
    }

    pub(super) fn leader(&self, est: &[Option<Estimate>]) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (c, e) in est.iter().enumerate() {
            if let (Some(e), true) = (e, self.arms[c].alive) {
                if best.is_none_or(|b| e.mean > est[b].map_or(f64::NEG_INFINITY, |x| x.mean)) {
                    best = Some(c);
                }
            }
        }
        best
    }

    /// Error level of one comparison with the leader (see `RaceParams::error`). Shared out
    /// over the survivors (Bonferroni, `error` 0.2), the level was strict while many
    /// candidates were left, and far ones took more probes to go, and most lenient at the
    /// last elimination, between the two that remained, which decides: in the simulator
    /// (400 seeds a case) the search lost 0.545 s a case that way, 0.534 s with 0.1 a
    /// comparison, and 12.05% of decisions were wrong instead of 12.23%.
    pub(super) fn alpha(&self) -> f64 {
        self.p.error
    }

    /// (log gap leader − c, its standard error, the one-sided quantile) for the Welch test.
    fn welch(&self, l: &Estimate, c: &Estimate, alpha: f64) -> (f64, f64, f64) {
        let s2 = l.var + c.var;
        let dfs = [(l.var, l.df), (c.var, c.df)];
        let df = if dfs.iter().any(|(v, d)| *d <= 0.0 && *v > 0.0) {
            0.0
        } else {
            s2 * s2
                / dfs
                    .iter()
                    .filter(|(_, d)| *d > 0.0)
                    .map(|(v, d)| v * v / d)
                    .sum::<f64>()
                    .max(f64::MIN_POSITIVE)
        };
        (l.mean - c.mean, s2.sqrt(), t_quantile(alpha, df))
    }

    /// The two candidates' whole probes taken in the same rounds, as (leader's,
    /// challenger's). Not a reading cut at its warm-up: it may have caught a thread waiting
    /// for its CPU, and paired with the other's whole probe it made the pair's deviation
    /// (and every steady challenger's ratio to that leader) swing by 4×.
    pub(super) fn pairs(&self, l: usize, c: usize) -> Vec<(f64, f64)> {
        let (a, b) = (&self.arms[l], &self.arms[c]);
        let w = self.p.warmup;
        let mut out = Vec::new();
        for (i, r) in a.rounds.iter().enumerate() {
            if *r == 0 || !a.whole(i, w) {
                continue;
            }
            if let Some(j) = b
                .rounds
                .iter()
                .position(|x| x == r)
                .filter(|&j| b.whole(j, w))
            {
                out.push((a.scores[i], b.scores[j]));
            }
        }
        out
    }

    /// The log ratio of the leader's mean rate to the challenger's over the rounds that
    /// probed both, with the variance of one pair's contribution (the delta method on the
    /// paired relative deviations, so a swinging candidate is still valued by its mean).
    /// None before two such rounds.
    fn paired_own(&self, l: usize, c: usize) -> Option<Paired> {
        // Not the OS placement: a probe of it right after a pinned one starts where that
        // pinning left the threads (the kernel moves them only later), so within a round it
        // mimics its neighbour, and its pairs would call it as good as the leader.
        if self.os_placement.is_some_and(|o| o == l || o == c) {
            return None;
        }
        let pairs = self.pairs(l, c);
        let n = pairs.len();
        if n < 2 {
            return None;
        }
        let floor = self.log_floor();
        let ml = pairs.iter().map(|p| p.0.max(floor)).sum::<f64>() / n as f64;
        let mc = pairs.iter().map(|p| p.1.max(floor)).sum::<f64>() / n as f64;
        let dev: Vec<f64> = pairs
            .iter()
            .map(|p| p.0.max(floor) / ml - p.1.max(floor) / mc)
            .collect();
        Some(Paired {
            log_gap: ml.ln() - mc.ln(),
            var: autopin_stats::variance(&dev)?,
            df: (n - 1) as f64,
            n,
        })
    }

    /// (log gap leader − c, its standard error, the one-sided quantile): from the rounds
    /// that probed both when there are two or more (a slow change of the machine's load hits
    /// both probes of a round alike and cancels), else Welch's test on the two estimates.
    pub(super) fn gap(
        &self,
        l: usize,
        c: usize,
        le: &Estimate,
        ce: &Estimate,
        alpha: f64,
    ) -> (f64, f64, f64) {
        let Some(p) = self.paired_own(l, c) else {
            return self.welch(le, ce, alpha);
        };
        // Moderated as the per-candidate variances are: a prior worth `PRIOR_DF` degrees of
        // freedom, the lower median of the paired variances of every survivor against the
        // leader, which only ever widens.
        const PRIOR_DF: f64 = 2.0;
        let mut others: Vec<f64> = self
            .survivors()
            .into_iter()
            .filter(|&x| x != l)
            .filter_map(|x| self.paired_own(l, x).map(|q| q.var))
            .filter(|v| v.is_finite())
            .collect();
        others.sort_by(f64::total_cmp);
        let (var, df) = match others.get(others.len().saturating_sub(1) / 2) {
            Some(&prior) => (
                p.var
                    .max((PRIOR_DF * prior + p.df * p.var) / (PRIOR_DF + p.df)),
                p.df + PRIOR_DF,
            ),
            None => (p.var, p.df),
        };
        // Two probes' worth of the noise floor: quiet pairs do not prove a quiet machine.
        // Nor do pairs whose OS placement caught one state of its swing each time.
        let swing = self.swing_variance(l) + self.swing_variance(c);
        let var = with_swing(var, df, swing).max(2.0 * self.p.noise_floor.powi(2)) / p.n as f64;
        (p.log_gap, var.sqrt(), t_quantile(alpha, df))
    }

    /// Candidate `c`'s mean rate over its probes of the search, the start-up left out (as
    /// `mean_rate` weighs them); None before such a probe.
    pub(super) fn searched_rate(&self, c: usize) -> Option<f64> {
        let a = &self.arms[c];
        let (work, weight) = (0..a.scores.len())
            .filter(|&i| a.rounds[i] > 0)
            .map(|i| (a.scores[i] * self.weight(c, i), self.weight(c, i)))
            .fold((0.0, 0.0), |(s, t), (x, w)| (s + x, t + w));
        (weight > 0.0).then(|| work / weight)
    }

    /// The mean rates of the leader `l` and the challenger `c` (`mean_rate`, no floor), as
    /// the ceiling and not-ahead rules compare them.
    pub(super) fn means(&self, l: usize, c: usize) -> Option<(f64, f64)> {
        Some((self.mean_rate(l, 0.0)?, self.mean_rate(c, 0.0)?))
    }
}
