//! Who goes: the leader drops every challenger it beats beyond doubt (`eliminate`), by a
//! t-test on the log ratio, order dominance, half the leader (`below_half`), two warm-ups far
//! behind (`behind_at_two_warmups`), never above the leader (`under_ceiling`) or, beside busy
//! CPUs, the OS placement not ahead (`not_ahead_beside_busy`); the OS placement waits for its
//! probes and ticks (`unsettled`). docs/search.md, "Elimination".

use super::estimate::Estimate;
use super::params::HALF_THE_LEADER;
use super::Race;
use crate::strategy::WARMUP_CUT;

/// How a challenger was eliminated, for the decision's reason.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Why {
    Ticks,
    HalfTheLeader,
    Probes,
    Ceiling,
    /// The OS placement beside CPUs busy with other work, not leading (`not_ahead_beside_busy`).
    NotAhead,
    /// Far behind the leader at two warm-ups (`behind_at_two_warmups`).
    WarmUps,
    /// The OS placement beside CPUs busy with other work, far below the leader at look
    /// after look (`never_near`).
    NeverNear,
    /// The OS placement beside CPUs busy with other work, with more threads than CPUs free
    /// of it, far below a team of the free CPUs (`outnumbered`).
    Outnumbered,
}

/// The error level of an elimination on one probe's ticks.
const ONE_PROBE_ERROR: f64 = 0.05;

/// 1 / C(a + b, b): the chance that b values all fall below a others when all a + b are
/// exchangeable.
fn order_p(a: usize, b: usize) -> f64 {
    let mut p = 1.0;
    for i in 1..=b {
        p *= i as f64 / (a + i) as f64;
    }
    p
}

impl Race {
    /// Drops every challenger the leader beats beyond doubt; says why each went.
    ///
    /// A leader's lead must stand on its probes of the search: the start-up is not evidence
    /// against anyone. A program still starting runs at any rate (a NAS-style solver beside
    /// a busy CPU: the OS placement's start-up read 259 constructs/s, its probes in the
    /// search 4–175), and a candidate eliminated on one probe against that reading (the
    /// right pinning, 110) was found again only by a re-search 7 s later.
    pub(super) fn eliminate(&mut self, est: &[Option<Estimate>], l: usize) {
        let Some(le) = est[l] else { return };
        for c in 0..est.len() {
            if c == l || !self.arms[c].alive {
                continue;
            }
            self.knock_out(est, l, c);
        }
        // Beside busy CPUs, the OS placement is also judged against the best pinning probed
        // twice when the leader has been probed once: among pinnings within noise of each
        // other the lead passes from one to the next, each seen once, and the rules that
        // end an OS placement (and a t-test, `leader_known`) want a leader seen twice. A
        // swinging OS placement far below every pinning then waited for a leader to keep
        // its lead over two probes, past the clean deadline (the simulator's barrier model
        // with `--os-swing`, 32 threads on 64 CPUs: 4.5 s).
        let os = self
            .os_placement
            .filter(|&o| o != l && self.busy_neighbours && self.arms[o].alive && le.n < 2);
        let known = (0..est.len())
            .filter(|&k| Some(k) != os && k != l && self.arms[k].alive)
            .filter(|&k| est[k].is_some_and(|e| e.n >= 2))
            .filter_map(|k| self.mean_rate(k, 0.0).map(|m| (k, m)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(k, _)| k);
        if let (Some(o), Some(k)) = (os, known) {
            self.knock_out(est, k, o);
        }
    }

    /// Takes `c` out of the race, with why, where `l` has beaten it beyond doubt.
    fn knock_out(&mut self, est: &[Option<Estimate>], l: usize, c: usize) {
        if let Some(w) = self.why_out(est, l, c) {
            self.arms[c].alive = false;
            self.eliminated[c] = Some(w);
        }
    }

    /// Why the challenger `c` goes, beaten by `l` beyond doubt; None while it may still win.
    fn why_out(&self, est: &[Option<Estimate>], l: usize, c: usize) -> Option<Why> {
        let le = est[l]?;
        let ce = est[c]?;
        let l_searched = self.searched_rate(l)?;
        let alpha = self.alpha();
        // Not ahead of it on its own probes of the search.
        if self.mean_rate(c, 0.0).is_some_and(|cm| l_searched <= cm) {
            return None;
        }
        // The pinning in force won an earlier run: one probe does not overturn it. Its
        // first is the check's first, taken while the program may still be starting
        // (reading its input, one thread working alone), where any pinning reads far
        // below its rate; a second probe costs the check a fifth of a second.
        if self.incumbent == Some(c) && ce.n < 2 {
            return None;
        }
        // The OS placement is the one candidate whose threads the kernel moves: a few
        // probes of it may all have caught one state (a thread on the busy CPU, or off
        // it), so only the half-the-leader, ceiling and not-ahead rules judge it before it
        // has been probed `os_probes` times.
        let unsettled = self.unsettled(l) || self.unsettled(c);
        if self.below_half(l, c) {
            Some(Why::HalfTheLeader)
        } else if self.behind_at_two_warmups(l, c) {
            Some(Why::WarmUps)
        } else if self.under_ceiling(l, c) {
            Some(Why::Ceiling)
        } else if self.not_ahead_beside_busy(l, c) {
            Some(Why::NotAhead)
        } else if self.never_near(l, c) {
            Some(Why::NeverNear)
        } else if self.outnumbered(l, c) {
            Some(Why::Outnumbered)
        } else if unsettled {
            None
        } else if order_p(le.n, ce.n) <= alpha
            && self.os_placement != Some(l)
            && self.os_placement != Some(c)
            && (1.0 + self.p.indistinct) * self.arms[c].score_range().1
                < self.arms[l].score_range().0
        {
            // Order alone, with a gap that matters: every probe of c is more than
            // `indistinct` below every probe of the leader.
            Some(Why::Probes)
        } else {
            let one_probe = le.n == 1 || ce.n == 1;
            // One probe's ticks say less than they seem (their noise is estimated from
            // a handful of them): an elimination on them is held to the strict level.
            let level = if one_probe {
                alpha.min(ONE_PROBE_ERROR)
            } else {
                alpha
            };
            let (d, se, q) = self.gap(l, c, &le, &ce, level);
            let gap_ok = !one_probe || 1.0 - (-d).exp() >= self.p.decisive_gap;
            // A leader seen once does not outvote a candidate seen more often: its one
            // probe may have been lucky (a swinging candidate in its high state). It is
            // probed again first in the next round.
            let leader_known = le.n > 1 || ce.n == 1;
            (gap_ok && leader_known && d > q * se).then_some(if one_probe {
                Why::Ticks
            } else {
                Why::Probes
            })
        }
    }

    /// Beside CPUs busy with other work a tie keeps the best pinning (`fallback`), so the OS
    /// placement `c` stays in the race only to be shown better than the pinnings: probed
    /// twice, as the leading pinning `l` was, and behind it by no more than a close call,
    /// it has nothing left to win. Its probes after a pinning flatter it besides: the
    /// kernel leaves the threads where the pinning put them until it moves one onto the
    /// busy CPU or stacks two (16 OpenMP threads beside one busy CPU read the pinning's
    /// rate in five probes of the OS placement, then a tenth of it 3 s in). Not one far
    /// behind, or seen swinging: its probes may all have caught its slow state, which its
    /// own probe count and the ceiling rule judge.
    fn not_ahead_beside_busy(&self, l: usize, c: usize) -> bool {
        if !self.busy_neighbours
            || self.os_placement != Some(c)
            || self.arms[c].scores.len() < 2
            || self.arms[l].scores.len() < 2
            || self.ticks_swing(c)
            || self.swings_against(l, c)
        {
            return false;
        }
        let Some((lm, cm)) = self.means(l, c) else {
            return false;
        };
        cm <= lm && cm >= (1.0 - self.p.close) * lm
    }

    /// The OS placement, while it has been probed fewer than `os_probes` times or, beside
    /// busy CPUs, seen for fewer than `os_ticks` sampling ticks.
    pub(super) fn unsettled(&self, c: usize) -> bool {
        if self.os_placement != Some(c) {
            return false;
        }
        let a = &self.arms[c];
        // Seen between its probes, or between the ticks of its probes: the OS placement's
        // variance takes in both (its probe counts as one tick, see `own`).
        let (lo, hi) = a.score_range();
        let swing_seen =
            self.p.os_swing > 0.0 && (hi >= self.p.os_swing * lo || self.ticks_swing(c));
        // Its ticks are waited for only beside busy CPUs, where the kernel moves its threads
        // onto them and off again for stretches that three probes cut short can miss. On an
        // idle machine an OS placement quiet in its probes is judged on them: waiting for
        // its eighth tick kept two equal candidates alternating (a move each probe) for the
        // whole of a 2 s program, undecided.
        a.scores.len() < self.p.os_probes
            || (self.busy_neighbours && a.seen_ticks < self.p.os_ticks as f64 && !swing_seen)
    }

    /// Every tick of `c` is below half of every tick of the leader `l` (a spinning barrier
    /// sharing a CPU, 1000× slower): no noise estimate needed. Not while `c` has been read
    /// only before the search: the start-up is not a verdict, a program reading its input
    /// runs at a fraction of its rate wherever it runs (GROMACS's start-up read 0–70
    /// constructs/s where its pinned probes read 32 000, on an idle machine).
    ///
    /// Nor on one warm-up's collapse alone: on a 16-CPU virtual machine a move of 16 threads
    /// stalled the program now and then for 20 ms or more, whichever candidate they went to
    /// (a pinning's first warm-up read 51 000 OpenMP constructs/s beside the OS placement's
    /// 753 000, as fast once it ran). A collapse at two looks, or in a measured tick, is the
    /// candidate's own, as is one of a candidate that shares CPUs between threads: two
    /// spinning threads on one CPU collapse at every look.
    pub(super) fn below_half(&self, l: usize, c: usize) -> bool {
        let a = &self.arms[c];
        let searched = !a.unsearched();
        let needed = if a.shares_cpus { 1 } else { 2 };
        let its_own = a.ranged_whole || a.warmup_collapses >= needed;
        match (self.arms[l].range(), a.range()) {
            (Some((l_lo, _)), Some((_, c_hi))) => {
                searched && its_own && l_lo > 0.0 && c_hi < HALF_THE_LEADER * l_lo
            }
            _ => false,
        }
    }

    /// The challenger `c` swings against the leader (`swings_against`) but could not reach
    /// more than `ceiling` above the leader's mean rate (`swing_reach`: its highest tick,
    /// less the share of its time its probes show it far below), and its mean is below the
    /// leader's by more than a close call (`close`): it spends part of its time far below
    /// the leader and none clearly above, so it cannot be better by more than `ceiling`,
    /// however its swing averages out. Both seen in two probes or more, the leader not
    /// swinging itself. (The OS placement beside a busy CPU: its fast state is a pinning's,
    /// one thread on each CPU; its slow one has the kernel stack them.)
    fn under_ceiling(&self, l: usize, c: usize) -> bool {
        let (al, ac) = (&self.arms[l], &self.arms[c]);
        if self.p.ceiling <= 0.0
            || self.p.os_swing <= 0.0
            || al.scores.len() < 2
            || ac.scores.len() < 2
        {
            return false;
        }
        // Both with ticks: a leader without them is not known to be steady.
        let (Some((_, l_hi)), Some((_, c_hi))) = (al.range(), ac.range()) else {
            return false;
        };
        let Some((lm, cm)) = self.means(l, c) else {
            return false;
        };
        // The OS placement beside busy CPUs is in its fast state a pinning like the
        // leader, one thread on each CPU: its ticks then read as high as the leader's do,
        // and the leader's own highest tick is the line too. (GROMACS's OS placement read
        // 11 260 at its highest tick and 5 600 at its next, beside a leader whose ticks read
        // 9 500–11 261, mean 10 200: above the mean's 3%, it waited for a t-test.)
        let mut top = (1.0 + self.p.ceiling) * lm;
        if self.busy_neighbours && self.os_placement == Some(c) {
            top = top.max(l_hi);
        }
        !self.ticks_swing(l)
            && self.swings_against(l, c)
            && self.swing_reach(c, c_hi, lm) <= top
            && cm <= (1.0 - self.p.close) * lm
    }

    /// The OS placement `c` beside busy CPUs, still waiting for its ticks (`unsettled`), has
    /// read far below the leader `l` at so many of its looks in the search (`os_probes` or
    /// more) that, were its unseen fast state as fast as the leader at its best (its highest
    /// tick, or `ceiling` above its mean), the share of its time it could spend there
    /// (`swing_reach`, at the race's error level) would not lift it within a close call of
    /// the leader. Its warm-up looks count: no move precedes them (its threads start where the
    /// pinning before left them), so a slow look is its own state. Without this an OS
    /// placement that read 0.37 of the leader at every look, its one whole probe 0.51, was a
    /// look a round for ten rounds before its twelfth tick let a t-test end it (the simulator's
    /// barrier code beside busy CPUs on 256 CPUs, a decision at 10.7 s).
    fn never_near(&self, l: usize, c: usize) -> bool {
        if !self.busy_neighbours
            || self.os_placement != Some(c)
            || !self.unsettled(c)
            || self.ticks_swing(l)
        {
            return false;
        }
        let a = &self.arms[c];
        let looks = a.searched_probes();
        let (Some((_, l_hi)), Some(lm)) = (self.arms[l].range(), self.mean_rate(l, 0.0)) else {
            return false;
        };
        if looks < self.p.os_probes || lm <= 0.0 {
            return false;
        }
        let fast = a.searched_high().max(l_hi).max((1.0 + self.p.ceiling) * lm);
        self.swing_reach(c, fast, lm) < (1.0 - self.p.close) * lm
    }

    /// The OS placement `c` beside busy CPUs, still waiting for its looks (`unsettled`),
    /// behind a leader `l` that runs fewer threads on the CPUs free of other work (a team
    /// is offered only where fewer CPUs are free than the program has threads), probed twice
    /// and steady: every state the kernel can put the OS placement's threads in has one
    /// beside other work or two on one CPU, as the whole-team pinnings have, which the race
    /// weighs on their own probes. Its looks wait to catch a fast state (one thread on
    /// each CPU while the neighbour's work pauses), and that state is no faster than those
    /// pinnings, so once its every look in the search read below `cut_below` of the
    /// leader's lowest tick, the OS placement has nothing the pinnings do not show.
    /// Without this, `ompwork -m loops` (2.5 s) beside a busy CPU 0, born as one thread on
    /// CPU 1, had the OS placement looked at three times (0.1 s each at half the team's
    /// rate, 270 000 team constructs/s against 130 000–150 000): half its search's cost.
    fn outnumbered(&self, l: usize, c: usize) -> bool {
        let ac = &self.arms[c];
        if ac.unsearched() {
            return false;
        }
        self.outnumbering_team(l, c)
            .is_some_and(|l_lo| ac.searched_high() < self.p.cut_below * l_lo)
    }

    /// The lowest tick of the leader `l`, where it is a team of the free CPUs, probed twice
    /// and steady, and `c` the OS placement beside busy CPUs still waiting for its looks:
    /// what [`Race::outnumbered`] holds `c`'s looks to (and `Strategy::collapsed` a look in
    /// progress). None otherwise.
    pub(super) fn outnumbering_team(&self, l: usize, c: usize) -> Option<f64> {
        let al = &self.arms[l];
        if !self.busy_neighbours
            || self.os_placement != Some(c)
            || !al.fewer_threads
            || !self.unsettled(c)
            || al.scores.len() < 2
            || al.unsearched()
            || self.ticks_swing(l)
        {
            return None;
        }
        al.range().map(|(l_lo, _)| l_lo).filter(|&l_lo| l_lo > 0.0)
    }

    /// Two of the challenger `c`'s warm-ups read below [`WARMUP_CUT`] of the leader `l`'s
    /// lowest tick: probes of the search that ended there (`behind_at_warmup`), or its
    /// scouting reading, when it reads so against the leader now. Each came after a move of
    /// its own, so a stall of one move (the reason one collapse ends nothing, `below_half`)
    /// does not make both; a pinning within reach of the leader loses at most the cold
    /// caches of its first 20 ms. Not the OS placement: its warm-up starts from where the
    /// pinning before it left the threads. Without this a pinning 1.5–2.5× behind was read
    /// at its warm-up round after round, never eliminated by the half-the-leader rule (its
    /// readings are not collapses) until three of them made a t-test.
    fn behind_at_two_warmups(&self, l: usize, c: usize) -> bool {
        let a = &self.arms[c];
        let scout_behind = a
            .scout
            .is_some_and(|(s, _)| self.warmup_below(l, s, WARMUP_CUT));
        self.os_placement != Some(c) && a.warmup_cuts + usize::from(scout_behind) >= 2
    }
}
