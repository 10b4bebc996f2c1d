//! A probe that ends before its length: its ticks so far put the candidate far behind
//! (`cut_on_ticks`), its warm-up already did (`cut_at_warmup`), or a look between ticks read
//! a collapse (`look_reference`, `warmup_below`); each further tick of it would be lost
//! work.

use super::estimate::{best_by_mean, Estimate};
use super::params::HALF_THE_LEADER;
use super::Race;
use crate::strategy::{COLLAPSE, WARMUP_CUT};

impl Race {
    /// A probe ends early when every tick of it so far is below `cut_below` of the leader's
    /// lowest tick: the candidate is well behind, and each further tick of it is lost work.
    /// It is judged on the ticks it had (ending a probe eliminates nothing). The race's
    /// `Strategy::seen_enough`.
    pub(super) fn cut_on_ticks(&self, c: usize, ticks: &[f64]) -> bool {
        let est = self.estimates();
        let Some(l) = self.leader(&est) else {
            return false;
        };
        let hi = ticks.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if l == c {
            return self.leader_collapsed(&est, c, hi);
        }
        // An OS placement that has had its probes but still waits for its ticks before the
        // t-test may judge it: a probe of it cut after one tick only adds rounds (a quiet one
        // 1.67× behind was decided after 7 rounds, 3.7 s, instead of 5). Below half the
        // leader it is cut still: the half-the-leader rule ends it on that one probe. Not
        // before its probes: one that swings shows it in them, and more ticks of its fast
        // state keep the never-above-the-leader rule from ending it.
        let waits_for_ticks = self.unsettled(c) && self.arms[c].scores.len() >= self.p.os_probes;
        // Nor is an OS placement seen swinging cut at `cut_below`: that would end its probes
        // that start in its slow state and let those in its fast state run on, and as its
        // state carries over to its next probe, its slow stretches would be sampled a tick
        // at a time and its fast ones whole. Its mean came out below its rate (a swinging
        // OS placement as fast as the best pinning read about 7% slower in the simulator).
        let cut = if waits_for_ticks || self.os_swing_seen(c) {
            HALF_THE_LEADER
        } else {
            self.p.cut_below
        };
        self.arms[l]
            .range()
            .is_some_and(|(l_lo, _)| l_lo > 0.0 && hi < cut * l_lo)
    }

    /// A warm-up read below [`WARMUP_CUT`] of the leader's lowest tick: a cold cache slows a
    /// good pinning far less in its first 20 ms, so the candidate is far behind and its
    /// warm-up is its probe (the half-the-leader rule then ends it). The race's
    /// `Strategy::behind_at_warmup`.
    pub(super) fn cut_at_warmup(&self, c: usize, score: f64) -> bool {
        // A scout is its warm-up.
        if self.scouting == Some(c) {
            return true;
        }
        let est = self.estimates();
        self.leader(&est)
            .filter(|&l| l != c)
            .is_some_and(|l| self.warmup_below(l, score, WARMUP_CUT))
    }

    /// The candidate a look at `c` is judged against (`Strategy::collapsed`): the leader,
    /// or the best other survivor when `c` leads; one with ticks.
    pub(super) fn look_reference(&self, c: usize) -> Option<usize> {
        let est = self.estimates();
        let r = match self.leader(&est) {
            Some(l) if l != c => Some(l),
            Some(_) => best_by_mean(&est, self.survivors().into_iter().filter(|&o| o != c)),
            None => None,
        };
        r.filter(|&r| self.arms[r].range().is_some())
    }

    /// The leader `l`'s probe in progress, its highest tick so far `hi`, has fallen below
    /// half of every tick of the best other survivor: it is then the worse of the two by
    /// far, and each further tick of it is lost work. Its probe still counts (a swinging
    /// OS placement's as one whole probe beside busy CPUs). GROMACS beside a busy CPU: an
    /// OS placement one probe ahead of the pinning ran its next probe at a tenth of it, 0.2 s
    /// of which 0.18 s was lost.
    fn leader_collapsed(&self, est: &[Option<Estimate>], l: usize, hi: f64) -> bool {
        let next = best_by_mean(est, self.survivors().into_iter().filter(|&c| c != l));
        next.and_then(|n| self.arms[n].range())
            .is_some_and(|(n_lo, _)| n_lo > 0.0 && hi < HALF_THE_LEADER * n_lo)
    }

    /// `score` of candidate `c` is below [`COLLAPSE`] of the leader's lowest tick.
    pub(super) fn collapse(&self, c: usize, score: f64) -> bool {
        let est = self.estimates();
        self.leader(&est)
            .filter(|&l| l != c)
            .is_some_and(|l| self.warmup_below(l, score, COLLAPSE))
    }

    /// A warm-up reading is below `share` of the leader's lowest tick, once the share of
    /// the rate a warm-up misses after a move is allowed for when moves stall the program:
    /// a stall that fills most of a warm-up must not make every candidate look far behind
    /// there. From the first such probe on: the first round's warm-ups, each a candidate's
    /// first look, are the ones a stall would otherwise end.
    pub(super) fn warmup_below(&self, l: usize, score: f64, share: f64) -> bool {
        let seen = 1.0 - self.stall_deficit(1).unwrap_or(0.0);
        self.arms[l]
            .range()
            .is_some_and(|(l_lo, _)| l_lo > 0.0 && score < share * seen * l_lo)
    }
}
