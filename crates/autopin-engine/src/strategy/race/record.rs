//! A probe's outcome taken in (`take_outcome`): its score, length, round and ticks on the
//! candidate's arm, what the move before it cost (the warm-up's deficit, which may shorten
//! later warm-ups), a scout's reading, and a change of the whole machine's load taken out of
//! the probes before it (`take_out_level_change`).

use super::arm::warmup_only;
use super::Race;
use crate::strategy::level_change::{self, LevelChange};
use crate::strategy::ProbeOutcome;

/// A move is quiet when the warm-up after it read at most this share below the whole probe
/// that followed: its cost is over by the end of the warm-up (GROMACS's pinnings read
/// as fast at 20 ms as over their probes), and a shorter warm-up will not catch a stall or
/// caches still refilling (`RaceParams::quiet_warmup`).
const QUIET_DEFICIT: f64 = 0.2;

/// The least length of a settled start-up's reading, as a share of the race's shortest
/// probe, that makes it a probe of the first round: most of a tick (ticks wake a little late
/// or early).
const SETTLED_TAIL: f64 = 0.9;

impl Race {
    /// Takes in what a probe measured (`Strategy::record`).
    pub(super) fn take_outcome(&mut self, outcome: ProbeOutcome) {
        if outcome.candidate >= self.arms.len() {
            return;
        }
        let valid = outcome.score.is_finite() && outcome.score >= 0.0;
        self.weigh_move(&outcome, valid);
        let ended_collapsed = outcome.ended_collapsed;
        let mut round = self.rounds;
        if self.scouting.take() == Some(outcome.candidate) {
            if outcome.intervals <= 1 && warmup_only(outcome.duration, self.p.warmup) {
                if valid {
                    self.arms[outcome.candidate].scout = Some((outcome.score, self.clock));
                }
                return;
            }
            // Measured whole: the objective cannot read a rate in a warm-up (OpenMP regions
            // longer than it), a thread came or went, or the ranks of a coordinated search
            // probe whole. It is the candidate's first probe, and scouting the others would
            // cost as much as their first round.
            self.scout_queue.clear();
            round = 1;
        }
        if !valid {
            return;
        }
        if self.tail_of_settled_start(&outcome) {
            self.born_tail = Some(outcome.candidate);
            round = 1;
        }
        let a = &mut self.arms[outcome.candidate];
        a.scores.push(outcome.score);
        a.lengths.push(outcome.duration.max(1e-3));
        a.rounds.push(round);
        a.starts.push(self.clock);
        a.ended_collapsed.push(ended_collapsed);
        a.seen_ticks += outcome.intervals.max(1) as f64;
        if let Some((lo, hi)) = outcome.interval_range.filter(|r| r.0 > 0.0) {
            if outcome.intervals >= 2 {
                a.probe_swing = a.probe_swing.max(hi / lo);
            }
        }
        if let Some(cv) = outcome.interval_cv.filter(|cv| cv.is_finite()) {
            if outcome.intervals >= 2 {
                // The variance of ln(tick) for a tick spread with this relative deviation
                // (exact for log-normal ticks).
                let w = (1.0 + cv * cv).ln();
                let df = (outcome.intervals - 1) as f64;
                a.within_ss += df * w;
                a.within_df += df;
                a.ticks += outcome.intervals as f64;
                a.tick_probes += 1.0;
            }
        }
        // A reading as short as a warm-up (the probe `behind_at_warmup` ended there) may have
        // caught the thread waiting for its CPU for much of it: it ends the probe, but its
        // tick range, which the half-the-leader rule judges on, takes only a collapse (below
        // `COLLAPSE` of the leader's lowest tick). Otherwise the candidate goes by the
        // evidence of more probes.
        // (Not a probe that ended at a look: no move came just before it.)
        let short = !ended_collapsed
            && outcome.intervals == 1
            && warmup_only(outcome.duration, self.p.warmup);
        let collapsed = short && self.collapse(outcome.candidate, outcome.score);
        let keep_range = !short || collapsed;
        let a = &mut self.arms[outcome.candidate];
        a.warmup_collapses += usize::from(collapsed);
        a.warmup_cuts += usize::from(short && round > 0);
        a.ranged_whole |= !short && outcome.interval_range.is_some();
        a.ranges.push(outcome.interval_range.filter(|_| keep_range));
        self.take_out_level_change();
    }

    /// A reading before the search's first step, of the pinning the program was born on,
    /// after it ran there for the whole of the wait (`settled_start`), and as long as a
    /// probe of the search may be: the first round's probe of that pinning. A reading of
    /// the program's first second would not be (GROMACS beside a busy CPU ran 10 000 OpenMP
    /// constructs/s over its first 1.3 s and 13 000 after); one at 1.2–1.5 s is of the
    /// program the search would probe, on the CPUs it would probe it on. Probed again
    /// instead, the program read as fast as its start-up had (270 000 team constructs/s
    /// both), and the decision came 0.2 s later.
    fn tail_of_settled_start(&self, outcome: &ProbeOutcome) -> bool {
        self.settled_start
            && self.rounds == 0
            && self.born_tail.is_none()
            && self.os_placement != Some(outcome.candidate)
            && outcome.duration >= SETTLED_TAIL * self.p.min_probe
    }

    /// A whole probe of a pinning after a warm-up reading: what the move cost it (the
    /// share of its rate the warm-up missed), and whether later warm-ups may be the shorter
    /// `quiet_warmup`. The warm-up reading is used up whatever the probe.
    fn weigh_move(&mut self, outcome: &ProbeOutcome, valid: bool) {
        let warm = self
            .warm_reading
            .take()
            .filter(|w| w.0 == outcome.candidate);
        if let Some((_, w)) = warm.filter(|w| w.1.is_finite() && w.1 >= 0.0) {
            if valid
                && outcome.score > 0.0
                && self.os_placement != Some(outcome.candidate)
                && !warmup_only(outcome.duration, self.p.warmup)
            {
                self.warmup_deficits
                    .push((1.0 - w / outcome.score).clamp(0.0, 1.0));
                // The first whole probe after a move shows whether moves slow the program
                // beyond their warm-up; when they do not, later looks cost the shorter one.
                if !self.quiet_moves
                    && self.warmup_deficits.len() == 1
                    && self.warmup_deficits[0] <= QUIET_DEFICIT
                {
                    self.quiet_moves = true;
                    self.p.warmup = self.p.quiet_warmup.min(self.p.warmup);
                }
            }
        }
    }

    /// A change of the whole machine's load during the search (a neighbour arriving on
    /// other CPUs, a frequency cap) moves every candidate's rate alike. Probes taken before
    /// it then read higher, or lower, than the same candidates' probes after it, and a
    /// candidate's mean depends on when it was probed: a 40% drop 3 s into the simulator's
    /// searches made 10–30% gaps among 12 heavy-tailed candidates end wrong in 15% of
    /// searches, against 4% without it. The change is found in the pinnings' whole probes
    /// ([`level_change::find`]; the OS placement's rate swings of itself); every probe
    /// before it, the OS placement's and the scouts' too, is then scaled by its step, as if
    /// taken at today's load. Once a search.
    fn take_out_level_change(&mut self) {
        if self.level_changed {
            return;
        }
        let w = self.p.warmup;
        let series: Vec<Vec<(f64, f64)>> = (0..self.arms.len())
            .filter(|&c| self.os_placement != Some(c))
            .map(|c| {
                let a = &self.arms[c];
                (0..a.scores.len())
                    .filter(|&i| a.whole(i, w) && a.scores[i] > 0.0)
                    .map(|i| (a.starts[i], a.scores[i].ln()))
                    .collect()
            })
            .collect();
        let Some(LevelChange { at, step }) = level_change::find(&series) else {
            return;
        };
        let f = step.exp();
        for a in &mut self.arms {
            for i in 0..a.scores.len() {
                if a.starts[i] < at {
                    a.scores[i] *= f;
                    a.ranges[i] = a.ranges[i].map(|(lo, hi)| (lo * f, hi * f));
                }
            }
            if let Some((s, when)) = a.scout.filter(|sc| sc.1 < at) {
                a.scout = Some((s * f, when));
            }
        }
        self.level_changed = true;
    }
}
