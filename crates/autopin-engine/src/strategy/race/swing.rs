//! Candidates whose rate swings between two states (the OS placement beside busy CPUs, whose
//! threads the kernel stacks now and then): whether a swing was seen (`ticks_swing`,
//! `swings_against`), the variance it stands for (`swing_variance`, `with_swing`), and the
//! highest mean rate it could reach (`swing_reach`).

use super::params::HALF_THE_LEADER;
use super::Race;
use crate::strategy::COLLAPSE;
use statrs::distribution::{Beta, ContinuousCDF};

/// A variance `v` with `df` degrees of freedom, widened towards the variance `swing` of a
/// swing seen in the ticks as a prior worth `SWING_DF` degrees of freedom: a few probes
/// that caught mostly one state understate the swing, many probes speak for themselves.
pub(super) fn with_swing(v: f64, df: f64, swing: f64) -> f64 {
    const SWING_DF: f64 = 8.0;
    if swing <= v {
        return v;
    }
    (SWING_DF * swing + df * v) / (SWING_DF + df)
}

/// The lowest share of its time a candidate can spend in a state it was seen in at `k` of
/// `n` looks, at the one-sided error level `alpha` (the Clopper–Pearson bound: the share p
/// at which `k` or more of `n` looks land in that state with chance `alpha`). 0 when
/// `k` is 0.
pub(super) fn share_at_least(k: usize, n: usize, alpha: f64) -> f64 {
    if k == 0 || n == 0 {
        return 0.0;
    }
    let k = k.min(n);
    match Beta::new(k as f64, (n - k + 1) as f64) {
        Ok(b) => b.inverse_cdf(alpha).clamp(0.0, 1.0),
        Err(_) => 0.0,
    }
}

impl Race {
    /// The least variance of one probe of the OS placement beside busy CPUs once its ticks
    /// have swung (`os_swing`): that of a rate switching between its lowest and highest
    /// tick, relative to their middle, ((hi − lo) / (hi + lo))². The kernel keeps it in one
    /// state for stretches as long as a probe, so a few probes may all have caught the
    /// same one and agree closely; their spread then says nothing of the swing. 0 otherwise.
    pub(super) fn swing_variance(&self, c: usize) -> f64 {
        if !self.os_swing_seen(c) {
            return 0.0;
        }
        match self.arms[c].range() {
            Some((lo, hi)) if hi + lo > 0.0 => ((hi - lo) / (hi + lo)).powi(2),
            _ => 0.0,
        }
    }

    /// `c` is the OS placement beside busy CPUs, and its ticks have swung (`ticks_swing`;
    /// ticks that all read zero have not).
    pub(super) fn os_swing_seen(&self, c: usize) -> bool {
        self.os_placement == Some(c)
            && self.busy_neighbours
            && self.ticks_swing(c)
            && self.arms[c].range().is_some_and(|(_, hi)| hi > 0.0)
    }

    /// The highest mean rate the swinging challenger `c` could have, at the race's error
    /// level: its highest tick `c_hi` for the share of its time in its fast state, its
    /// highest slow reading for the rest, the slow share taken at the lowest its probes
    /// allow (`share_at_least`; a probe below half of the leader's mean rate `lm` was in its
    /// slow state, as was one that ended at a look reading a collapse, `Strategy::collapsed`,
    /// whose slow reading is that look's). With no slow probe, `c_hi`. Each slow look it has
    /// had lowers the line its fast ticks must stay under: a fast tick a few percent above
    /// the leader's mean (noise of two-tick probes) cannot lift a candidate that stacked its
    /// threads at one look of two above the leader. GROMACS's OS placement, one tick 4.7% above the leader's
    /// mean and then 1% of it at four looks, went by a t-test after five rounds.
    pub(super) fn swing_reach(&self, c: usize, c_hi: f64, lm: f64) -> f64 {
        let a = &self.arms[c];
        let searched: Vec<usize> = (0..a.scores.len()).filter(|&i| a.rounds[i] > 0).collect();
        // A probe that ended at a look reading a collapse was left in its slow state: that
        // look's reading stands for it.
        let slow: Vec<f64> = searched
            .iter()
            .filter_map(|&i| match (a.ended_collapsed[i], a.ranges[i]) {
                (true, Some((lo, _))) => Some(lo),
                _ => Some(a.scores[i]).filter(|s| *s < HALF_THE_LEADER * lm),
            })
            .collect();
        let Some(s_hi) = slow.iter().copied().reduce(f64::max) else {
            return c_hi;
        };
        let p = share_at_least(slow.len(), searched.len(), self.alpha());
        (1.0 - p) * c_hi + p * s_hi
    }

    /// Candidate `c` swings against the leader `l`: the ticks of one of its probes span
    /// `os_swing` (highest ÷ lowest), or its scores relative to the leader's over the rounds
    /// that probed both do. Not its ticks over all its probes: a change of the whole machine
    /// (a neighbour arriving between two probes) slows every candidate alike, and it made
    /// steady candidates look swinging and go by the never-above-the-leader rule.
    ///
    /// The OS placement beside busy CPUs swings too when a reading of it collapsed (below
    /// `COLLAPSE` of the leader's lowest tick; a warm-up's counts only as a collapse) and its
    /// ticks span `os_swing` while the leader's held steady. No move precedes its warm-up
    /// (its threads stay where the pinning before left them until the kernel stacks two or
    /// moves one onto a busy CPU), so the collapse is its own slow state; and a change of
    /// the whole machine would have moved the leader's ticks too. The rounds' pairs miss it when its one whole
    /// probe came in the round the leader sat out, its start-up standing for it: GROMACS's
    /// OS placement read the leader's rate once and 1% of it at four warm-ups, and went by
    /// a t-test after five rounds.
    pub(super) fn swings_against(&self, l: usize, c: usize) -> bool {
        let s = self.p.os_swing;
        if self.arms[c].probe_swing >= s {
            return true;
        }
        let collapsed = match (self.arms[c].range(), self.arms[l].range()) {
            (Some((c_lo, _)), Some((l_lo, _))) => c_lo < COLLAPSE * l_lo,
            _ => false,
        };
        if collapsed && self.os_swing_seen(c) && !self.ticks_swing(l) {
            return true;
        }
        let ratios: Vec<f64> = self
            .pairs(l, c)
            .into_iter()
            .filter(|p| p.0 > 0.0 && p.1 > 0.0)
            .map(|p| p.1 / p.0)
            .collect();
        let (lo, hi) = ratios.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
            (lo.min(*r), hi.max(*r))
        });
        ratios.len() >= 2 && hi >= s * lo
    }

    /// The ticks of candidate `c` span `os_swing` (highest ÷ lowest) or more; false with no
    /// tick range.
    pub(super) fn ticks_swing(&self, c: usize) -> bool {
        self.arms[c]
            .range()
            .is_some_and(|(lo, hi)| hi >= self.p.os_swing * lo)
    }
}
