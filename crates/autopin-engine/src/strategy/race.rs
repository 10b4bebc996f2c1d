//! `race`: interleaved short probes over the surviving candidates. After every round the
//! candidates whose score is confidently below the leader's are eliminated; the search stops
//! when one is left, when the leader is confidently within `tolerance` of every survivor, or
//! when the time budget is spent. Probe length follows the noise: noisy probes get longer
//! (averaging out slow fluctuations), quiet ones shorter.
//!
//! Faster where it is safe: a candidate whose first probe is far below the leader's — a gap
//! of at least `decisive_gap` that also dwarfs the noise seen between the sampling ticks
//! inside both probes — is dropped after that one probe; a close call always waits for
//! `min_rounds` probes each and the between-probe test. After the first round the leader is
//! probed first. There is always an answer: survivors that stay within `indistinct` of each
//! other, or a budget that ends before they separate, keep the OS's own placement when it is
//! a candidate and not confidently worse, and the best so far otherwise — the reason says
//! which.

use super::{best_of, means, Decision, Plan, ProbeOutcome, Strategy};
use crate::stats;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RaceParams {
    /// Warm-up after each re-pin before measuring (cache refill, migration), seconds. One
    /// 0.1 s sampling tick by default: the interval holding the move is dropped whole, and
    /// caches refill within milliseconds.
    pub warmup: f64,
    /// First probe length, seconds.
    pub probe: f64,
    /// Bounds for the adapted probe length, seconds.
    pub min_probe: f64,
    pub max_probe: f64,
    /// Search time budget (warm-ups included), seconds.
    pub budget: f64,
    /// Relative difference below which two candidates count as equally good.
    pub tolerance: f64,
    /// How many standard errors separate "confidently different" (≈3 → 99.7%).
    pub z: f64,
    /// Relative probe-to-probe spread the probe length aims for.
    pub target_cv: f64,
    /// Rounds every survivor gets before anything is eliminated by the between-probe test.
    pub min_rounds: usize,
    /// Smallest relative gap that can end a candidate after one probe (with within-probe
    /// noise far smaller than the gap).
    pub decisive_gap: f64,
    /// Survivors confidently within this relative distance of the leader count as
    /// indistinguishable (checked from `min_rounds` rounds on).
    pub indistinct: f64,
}

impl Default for RaceParams {
    fn default() -> Self {
        RaceParams {
            warmup: 0.1,
            probe: 0.3,
            min_probe: 0.2,
            max_probe: 4.0,
            budget: 20.0,
            tolerance: 0.005,
            z: 3.0,
            target_cv: 0.02,
            min_rounds: 2,
            decisive_gap: 0.15,
            indistinct: 0.02,
        }
    }
}

pub struct Race {
    p: RaceParams,
    samples: Vec<Vec<f64>>,
    /// Lowest and highest interval score seen per candidate, over all its probes.
    ranges: Vec<Option<(f64, f64)>>,
    alive: Vec<bool>,
    queue: Vec<usize>,
    rounds: usize,
    probe_len: f64,
    first_round_order: usize,
    /// Relative standard error of each candidate's last probe, from its sampling ticks.
    within: Vec<Option<f64>>,
    /// The OS's own placement among the candidates.
    os_placement: Option<usize>,
}

impl Race {
    pub fn new(p: RaceParams, candidates: usize) -> Self {
        Race {
            probe_len: p.probe.clamp(p.min_probe, p.max_probe),
            p,
            samples: vec![Vec::new(); candidates],
            ranges: vec![None; candidates],
            alive: vec![true; candidates],
            queue: Vec::new(),
            rounds: 0,
            first_round_order: 0,
            within: vec![None; candidates],
            os_placement: None,
        }
    }

    /// Drops candidates whose one-probe result is far below the leader's, beyond doubt:
    /// the gap is at least `decisive_gap` and exceeds 2·z standard errors of the difference
    /// estimated from the ticks inside the two probes (the factor 2 leaves room for drift
    /// slower than a probe, which the ticks cannot see).
    #[allow(clippy::needless_range_loop)] // c indexes alive, m and within alike
    fn eliminate_decisive(&mut self, m: &[Option<f64>], best: usize) {
        let (Some(mb), Some(sb)) = (m[best], self.within[best]) else {
            return;
        };
        if mb <= 0.0 {
            return;
        }
        for c in 0..self.alive.len() {
            if c == best || !self.alive[c] {
                continue;
            }
            let (Some(mc), Some(sc)) = (m[c], self.within[c]) else {
                continue;
            };
            let gap = (mb - mc) / mb;
            let se = (sb * sb + (sc * mc / mb).powi(2)).sqrt();
            if gap >= self.p.decisive_gap && gap > 2.0 * self.p.z * se {
                self.alive[c] = false;
            }
        }
    }

    /// The answer when the survivors cannot be told apart: the OS placement when it is a
    /// survivor, else the leader.
    fn indistinguishable(&self, best: usize, margin_ci: Option<f64>, why: &str) -> Decision {
        match self
            .os_placement
            .filter(|&o| self.alive.get(o) == Some(&true) && o != best)
        {
            Some(os) if !self.samples[os].is_empty() => self.decision(
                os,
                margin_ci,
                &format!(
                    "{why}: keeping the OS's own placement, pinning would gain nothing measurable"
                ),
            ),
            _ => self.decision(best, margin_ci, &format!("{why}: keeping the best so far")),
        }
    }

    /// Candidates still in the running.
    pub fn survivors(&self) -> Vec<usize> {
        (0..self.alive.len()).filter(|&i| self.alive[i]).collect()
    }

    /// Pooled relative variance of probe scores across candidates with ≥ 2 probes, and its
    /// degrees of freedom. Pooling lets one noisy round inform every candidate.
    fn pooled_rel_var(&self) -> Option<(f64, usize)> {
        let mut ss = 0.0;
        let mut df = 0usize;
        for (i, s) in self.samples.iter().enumerate() {
            if !self.alive[i] || s.len() < 2 {
                continue;
            }
            let m = stats::mean(s);
            if m <= 0.0 {
                continue;
            }
            ss += s.iter().map(|x| ((x - m) / m).powi(2)).sum::<f64>();
            df += s.len() - 1;
        }
        if df == 0 {
            None
        } else {
            Some((ss / df as f64, df))
        }
    }

    /// Pooled variance of ln(score) across candidates with ≥ 2 probes (None when some score
    /// is not positive). On the log scale a 1000× gap is a distance of 6.9 whatever the
    /// noise's size relative to the mean, where a relative difference can never exceed 1.
    fn pooled_log_var(&self) -> Option<(f64, usize)> {
        let mut ss = 0.0;
        let mut df = 0usize;
        for (i, s) in self.samples.iter().enumerate() {
            if !self.alive[i] || s.is_empty() {
                continue;
            }
            if s.iter().any(|x| *x <= 0.0) {
                return None;
            }
            if s.len() < 2 {
                continue;
            }
            let m = log_mean(s);
            ss += s.iter().map(|x| (x.ln() - m).powi(2)).sum::<f64>();
            df += s.len() - 1;
        }
        (df > 0).then(|| (ss / df as f64, df))
    }

    /// Eliminates confidently worse candidates; returns a decision when the race is over.
    fn judge(&mut self, reason_budget: bool) -> Option<Decision> {
        let m = means(&self.samples);
        let best = best_of(&m, &self.alive)?;
        let mb = m[best]?;
        let nb = self.samples[best].len() as f64;
        self.eliminate_decisive(&m, best);
        if self.survivors().len() == 1 {
            return Some(self.decision(
                best,
                None,
                "all other candidates eliminated (far below the leader, beyond the noise inside the probes)",
            ));
        }
        // Plainly dominated after any round: every interval of c is less than half of every
        // interval of the leader (a spinning barrier sharing a CPU, 1000× slower). No noise
        // estimate needed, so such a loser costs one probe instead of `min_rounds`.
        if let Some((best_lo, _)) = self.ranges[best] {
            for c in 0..self.alive.len() {
                if c != best && self.alive[c] {
                    if let Some((_, c_hi)) = self.ranges[c] {
                        if best_lo > 0.0 && 2.0 * c_hi < best_lo {
                            self.alive[c] = false;
                        }
                    }
                }
            }
            if self.survivors().len() == 1 {
                return Some(self.decision(
                    best,
                    None,
                    "all other candidates eliminated (every interval below half the leader's)",
                ));
            }
        }
        let pooled = self.pooled_rel_var();
        let pooled_log = self.pooled_log_var();
        let mut margin_ci = None;
        if let (Some((rv, df)), true) = (pooled, self.rounds >= self.p.min_rounds) {
            let k = self.p.z.max(stats::t95(df) * self.p.z / 1.96);
            let mut all_equivalent = true;
            let mut worst_ci: f64 = 0.0;
            #[allow(clippy::needless_range_loop)] // c indexes alive, m and samples alike
            for c in 0..self.alive.len() {
                if !self.alive[c] || c == best {
                    continue;
                }
                let Some(mc) = m[c] else { continue };
                let nc = self.samples[c].len() as f64;
                // Standard error of the relative difference (mb − mc)/mb.
                let se = (rv / nb + rv * (mc / mb).powi(2) / nc).sqrt();
                let diff = (mb - mc) / mb;
                worst_ci = worst_ci.max(k * se);
                // Far apart (orders of magnitude, noisy probes): the log-scale test sees it.
                let log_gap = pooled_log.is_some_and(|(lv, ldf)| {
                    let kl = self.p.z.max(stats::t95(ldf) * self.p.z / 1.96);
                    let gap = log_mean(&self.samples[best]) - log_mean(&self.samples[c]);
                    gap > kl * (lv / nb + lv / nc).sqrt()
                });
                if diff > k * se || log_gap {
                    self.alive[c] = false;
                } else if diff - k * se < -self.p.tolerance {
                    // c might still be better than the leader by more than the tolerance.
                    all_equivalent = false;
                }
            }
            margin_ci = Some(worst_ci);
            let left = self.survivors().len();
            if left == 1 {
                return Some(self.decision(best, margin_ci, "all other candidates eliminated"));
            }
            if all_equivalent {
                return Some(self.decision(
                    best,
                    margin_ci,
                    "survivors are within the tolerance of the leader",
                ));
            }
            // Every survivor confidently within `indistinct` of the leader: more probes
            // would only narrow a difference nobody would notice.
            let close = (0..self.alive.len()).all(|c| {
                !self.alive[c] || c == best || {
                    let mc = m[c].unwrap_or(0.0);
                    let nc = self.samples[c].len() as f64;
                    let se = (rv / nb + rv * (mc / mb).powi(2) / nc).sqrt();
                    (mb - mc) / mb + k * se <= self.p.indistinct
                }
            });
            if close && self.rounds >= self.p.min_rounds {
                return Some(self.indistinguishable(
                    best,
                    margin_ci,
                    &format!(
                        "survivors within {:.0}% of each other",
                        100.0 * self.p.indistinct
                    ),
                ));
            }
        }
        if reason_budget {
            // The budget ends the search. The OS placement is kept only when it is close
            // to the leader (within `decisive_gap`) and not confidently behind it.
            let os_behind = self.os_placement.is_some_and(|o| {
                o != best && self.alive.get(o) == Some(&true) && {
                    match (m[o], pooled) {
                        (Some(mo), _) if (mb - mo) / mb > self.p.decisive_gap => true,
                        (Some(mo), Some((rv, df))) => {
                            let k = self.p.z.max(stats::t95(df) * self.p.z / 1.96);
                            let no = self.samples[o].len() as f64;
                            let se = (rv / nb + rv * (mo / mb).powi(2) / no).sqrt();
                            (mb - mo) / mb > k * se
                        }
                        _ => true,
                    }
                }
            });
            let os_alive = self
                .os_placement
                .is_some_and(|o| o != best && self.alive.get(o) == Some(&true));
            if os_behind || !os_alive {
                return Some(self.decision(best, margin_ci, "search budget spent: best so far"));
            }
            return Some(self.indistinguishable(
                best,
                margin_ci,
                "search budget spent before the leader was confidently ahead of the OS placement",
            ));
        }
        None
    }

    fn decision(&self, best: usize, margin_ci: Option<f64>, reason: &str) -> Decision {
        let m = means(&self.samples);
        // The runner-up is the best other candidate that was probed (eliminated or not), so
        // the margin says how much better the winner was than the next choice.
        let mut others = vec![true; self.alive.len()];
        others[best] = false;
        let runner = best_of(&m, &others);
        let score = m[best];
        let rs = runner.and_then(|r| m[r]);
        Decision {
            candidate: best,
            score,
            runner_up: runner,
            runner_up_score: rs,
            margin: match (score, rs) {
                (Some(b), Some(r)) if r > 0.0 => Some((b - r) / r),
                _ => None,
            },
            margin_ci,
            reason: format!("{reason} after {} round(s)", self.rounds),
        }
    }

    /// Adapts the probe length to the probe-to-probe noise seen so far.
    fn adapt_probe_len(&mut self) {
        if let Some((rv, _)) = self.pooled_rel_var() {
            let cv = rv.sqrt();
            if cv > 2.0 * self.p.target_cv {
                self.probe_len *= 2.0;
            } else if cv < 0.5 * self.p.target_cv {
                self.probe_len *= 0.5;
            }
        }
        // Keep warm-up a minor share of each probe.
        let floor = (self.p.warmup * 2.0).max(self.p.min_probe);
        self.probe_len = self
            .probe_len
            .clamp(floor.min(self.p.max_probe), self.p.max_probe);
    }
}

fn log_mean(s: &[f64]) -> f64 {
    s.iter().map(|x| x.ln()).sum::<f64>() / s.len().max(1) as f64
}

impl Strategy for Race {
    fn name(&self) -> &'static str {
        "race"
    }

    fn next(&mut self, elapsed: f64) -> Plan {
        if self.alive.is_empty() {
            return Plan::Decide(Decision {
                candidate: 0,
                score: None,
                runner_up: None,
                runner_up_score: None,
                margin: None,
                margin_ci: None,
                reason: "no candidates".into(),
            });
        }
        if self.alive.len() == 1 {
            return Plan::Decide(self.decision(0, None, "only one candidate"));
        }
        if self.queue.is_empty() {
            if self.rounds > 0 {
                if let Some(d) = self.judge(false) {
                    return Plan::Decide(d);
                }
                self.adapt_probe_len();
            }
            // First round in the given order (most different first); later rounds probe the
            // most promising first, so a search cut short by the program's end or the
            // budget has measured the leaders most.
            let mut order = self.survivors();
            if self.rounds > 0 {
                let m = means(&self.samples);
                order.sort_by(|a, b| {
                    m[*b]
                        .unwrap_or(f64::NEG_INFINITY)
                        .total_cmp(&m[*a].unwrap_or(f64::NEG_INFINITY))
                });
            }
            self.first_round_order += 1;
            self.queue = order;
            self.queue.reverse();
            self.rounds += 1;
        }
        let cost = self.p.warmup + self.probe_len;
        if elapsed + cost > self.p.budget {
            if let Some(d) = self.judge(true) {
                return Plan::Decide(d);
            }
            // Not one usable probe (e.g. the program changes phase faster than a probe):
            // stop anyway rather than search forever, and say so.
            return Plan::Decide(Decision {
                candidate: 0,
                score: None,
                runner_up: None,
                runner_up_score: None,
                margin: None,
                margin_ci: None,
                reason: "no usable measurement within the budget; keeping the first candidate"
                    .into(),
            });
        }
        let c = self.queue.pop().expect("queue filled above");
        Plan::Probe {
            candidate: c,
            warmup: self.p.warmup,
            measure: self.probe_len,
        }
    }

    fn set_os_placement(&mut self, candidate: usize) {
        self.os_placement = Some(candidate);
    }

    fn record(&mut self, outcome: ProbeOutcome) {
        if let Some(s) = self.samples.get_mut(outcome.candidate) {
            if outcome.score.is_finite() && outcome.score >= 0.0 {
                s.push(outcome.score);
                if let Some(w) = self.within.get_mut(outcome.candidate) {
                    *w = match outcome.interval_cv {
                        Some(cv) if outcome.intervals >= 3 && cv.is_finite() => {
                            Some(cv / (outcome.intervals as f64).sqrt())
                        }
                        _ => None,
                    };
                }
                if let (Some((lo, hi)), Some(r)) = (
                    outcome.interval_range,
                    self.ranges.get_mut(outcome.candidate),
                ) {
                    *r = Some(match *r {
                        Some((a, b)) => (a.min(lo), b.max(hi)),
                        None => (lo, hi),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives `r` to its decision; `outcome(candidate, probe#, measure)` says what each
    /// probe measured. Returns the decision, the probes in order and the search time.
    pub(super) fn drive_race(
        mut r: Race,
        mut outcome: impl FnMut(usize, usize, f64) -> ProbeOutcome,
    ) -> (Decision, Vec<usize>, f64) {
        let mut t = 0.0;
        let mut order = Vec::new();
        loop {
            match r.next(t) {
                Plan::Probe {
                    candidate,
                    warmup,
                    measure,
                } => {
                    t += warmup + measure;
                    let k = order.iter().filter(|c| **c == candidate).count();
                    order.push(candidate);
                    r.record(outcome(candidate, k, measure));
                }
                Plan::Decide(d) => return (d, order, t),
            }
        }
    }

    fn run(truth: &[f64], noise: f64, seed: u64, p: RaceParams) -> (usize, f64) {
        let mut rng = stats::Rng::new(seed);
        let (d, _, t) = drive_race(Race::new(p, truth.len()), |candidate, _, measure| {
            ProbeOutcome {
                candidate,
                score: truth[candidate] * (1.0 + noise * rng.normal() / measure.sqrt()),
                duration: measure,
                interval_cv: None,
                interval_range: None,
                intervals: 0,
            }
        });
        (d.candidate, t)
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
                Plan::Probe {
                    warmup, measure, ..
                } => t += warmup + measure, // nothing recorded
                Plan::Decide(d) => {
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
}

#[cfg(test)]
mod dominance_tests {
    use super::*;

    #[test]
    fn a_dominated_candidate_is_dropped_after_one_round() {
        let (d, order, _) =
            super::tests::drive_race(Race::new(RaceParams::default(), 2), |candidate, _, _| {
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
                }
            });
        assert_eq!(d.candidate, 1);
        assert_eq!(order.len(), 2, "one probe each");
    }

    #[test]
    fn overlapping_intervals_are_not_dominated() {
        let mut r = Race::new(RaceParams::default(), 2);
        for (c, range) in [(0, (80.0, 120.0)), (1, (90.0, 130.0))] {
            let Plan::Probe { candidate, .. } = r.next(0.0) else {
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
            });
        }
        assert!(
            matches!(r.next(1.0), Plan::Probe { .. }),
            "needs more rounds"
        );
    }
}

#[cfg(test)]
mod faster_race_tests {
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
        super::tests::drive_race(r, |candidate, k, measure| {
            let (score, cv) = score(candidate, k);
            ProbeOutcome {
                candidate,
                score,
                duration: measure,
                interval_cv: Some(cv),
                interval_range: None,
                intervals: 5,
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
            let Plan::Probe { candidate, .. } = r.next(0.0) else {
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
            });
        }
        assert!(
            matches!(r.next(1.4), Plan::Probe { .. }),
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
    fn the_budget_end_is_a_decision_with_its_reason() {
        // 1% apart with 3% noise between probes: cannot separate within 4 s.
        let p = RaceParams {
            budget: 4.0,
            ..RaceParams::default()
        };
        let noisy = |c: usize, k: usize| {
            let j = [0.03, -0.03, 0.02, -0.02][k % 4];
            ([101.0, 100.0][c] * (1.0 + j), 0.03)
        };
        let (d, _, t) = drive(2, Some(1), p, noisy);
        assert!(t <= 4.0 + 1e-9);
        assert_eq!(d.candidate, 1, "OS placement kept: {}", d.reason);
        assert!(d.reason.contains("budget spent"), "{}", d.reason);
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
}
