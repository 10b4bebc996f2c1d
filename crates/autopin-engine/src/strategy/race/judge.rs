//! When the race is over and what it keeps (`judge`): the last survivor, a leader no
//! survivor can beat by more than the tolerance, survivors too close to tell apart (what a
//! tie keeps: `fallback`, `indistinguishable`), the budget's end; a pinning in force confirmed
//! by its own probe (`confirmed`); and the decision with its margin and reason (`decision`).

use super::eliminate::Why;
use super::estimate::{best_by_mean, Estimate};
use super::Race;
use crate::strategy::Decision;

/// Why doubt keeps a pinning over the OS placement beside busy CPUs, for decision reasons.
const BUSY_NEIGHBOURS: &str = "beside CPUs busy with other work the kernel may yet move the threads onto them, or stack them, as the OS placement's probes may not have seen";

impl Race {
    /// Eliminates what the data allow; returns a decision when the race is over.
    pub(super) fn judge(&mut self, budget_end: bool) -> Option<Decision> {
        let est = self.estimates();
        let l = self.leader(&est)?;
        self.eliminate(&est, l);
        if self.survivors().len() == 1 {
            let reason = self.last_survivor_reason();
            let ci = self.margin_ci(&est, l);
            return Some(self.decision(&est, l, ci, reason));
        }
        // Before `min_rounds`, only eliminations (above) and the budget's end can end it.
        if self.rounds < self.p.min_rounds && !budget_end {
            return None;
        }
        let le = est[l]?;
        let (upper_adv, lower_adv) = self.advantages(&est, l, &le);
        let ci = self.margin_ci(&est, l);
        // No survivor can be better than the leader by more than the tolerance (said of an
        // OS placement only once it has been probed enough to be known).
        let os_unsettled = self.survivors().into_iter().any(|c| self.unsettled(c));
        if !os_unsettled
            && lower_adv
                .iter()
                .all(|x| *x >= -(1.0 + self.p.tolerance).ln())
        {
            return Some(self.within_tolerance(&est, l, ci));
        }
        // Nor is the OS placement kept as indistinguishable before it is known: two probes of
        // it that both caught its fast state read as the pinning's rate.
        if self.rounds >= self.p.min_rounds
            && !os_unsettled
            && upper_adv
                .iter()
                .all(|x| *x <= (1.0 + self.p.indistinct).ln())
        {
            return Some(self.indistinguishable(
                &est,
                l,
                ci,
                &format!(
                    "survivors within {:.0}% of each other",
                    100.0 * self.p.indistinct
                ),
            ));
        }
        if budget_end {
            return Some(self.at_budget_end(&est, l, &le, ci));
        }
        None
    }

    /// The reason a decision for the last survivor gives: how the others went.
    fn last_survivor_reason(&self) -> &'static str {
        if self.eliminated.contains(&Some(Why::Ticks)) {
            "all other candidates eliminated (far below the leader, beyond the noise inside the probes)"
        } else if self
            .eliminated
            .iter()
            .all(|w| w.is_none() || *w == Some(Why::HalfTheLeader))
        {
            "all other candidates eliminated (every interval below half the leader's)"
        } else if self
            .eliminated
            .iter()
            .all(|w| matches!(w, None | Some(Why::HalfTheLeader | Why::WarmUps)))
        {
            "all other candidates eliminated (far below the leader: below half its every tick, or at two warm-ups)"
        } else if self.eliminated.contains(&Some(Why::Ceiling)) {
            "all other candidates eliminated (a swinging one never rose above the leader)"
        } else if self.eliminated.contains(&Some(Why::NotAhead)) {
            "all other candidates eliminated (the OS placement, not ahead of the best pinning beside CPUs busy with other work)"
        } else if self.eliminated.contains(&Some(Why::NeverNear)) {
            "all other candidates eliminated (the OS placement, far below the leader at look after look beside CPUs busy with other work)"
        } else if self.eliminated.contains(&Some(Why::Outnumbered)) {
            "all other candidates eliminated (the OS placement, with more threads than free CPUs, far below a team of the free CPUs at every look)"
        } else {
            "all other candidates eliminated"
        }
    }

    /// Per survivor other than the leader `l` (estimate `le`): the upper and the lower end
    /// of the leader's advantage over it, on the log scale (infinite for one not measured).
    fn advantages(
        &self,
        est: &[Option<Estimate>],
        l: usize,
        le: &Estimate,
    ) -> (Vec<f64>, Vec<f64>) {
        let alpha = self.alpha();
        let mut upper_adv: Vec<f64> = Vec::new();
        let mut lower_adv: Vec<f64> = Vec::new();
        for c in self.survivors() {
            if c == l {
                continue;
            }
            match est[c] {
                Some(ce) => {
                    let (d, se, q) = self.gap(l, c, le, &ce, alpha);
                    upper_adv.push(d + q * se);
                    lower_adv.push(d - q * se);
                }
                None => {
                    upper_adv.push(f64::INFINITY);
                    lower_adv.push(f64::NEG_INFINITY);
                }
            }
        }
        (upper_adv, lower_adv)
    }

    /// The decision when no survivor can be better than the leader `l` by more than the
    /// tolerance: the leader, or beside busy CPUs the best pinning over an OS placement that
    /// leads without being confidently ahead of it.
    fn within_tolerance(&self, est: &[Option<Estimate>], l: usize, ci: Option<f64>) -> Decision {
        // The reason states the bound: the margin over the runner-up may read "within
        // the noise" (a 16-CPU machine beside four busy ones: "+1.2% (within the
        // noise)"), and what makes the leader safe to keep is that no survivor can be
        // better than it by more than the tolerance.
        if let Some(p) = self.pinning_over_os(est, l) {
            return self.decision(
                est,
                p,
                self.margin_ci(est, p),
                &format!(
                    "no other candidate can be more than {:.1}% better than the OS placement, which is not confidently ahead of the best pinning: keeping the pinning, {BUSY_NEIGHBOURS}",
                    100.0 * self.p.tolerance
                ),
            );
        }
        self.decision(
            est,
            l,
            ci,
            &format!(
                "no other candidate can be more than {:.1}% better than the leader",
                100.0 * self.p.tolerance
            ),
        )
    }

    /// The decision when the budget ends first: the leader `l` (estimate `le`) when it is
    /// ahead of what a tie would keep, else what a tie keeps.
    fn at_budget_end(
        &self,
        est: &[Option<Estimate>],
        l: usize,
        le: &Estimate,
        ci: Option<f64>,
    ) -> Decision {
        // The search has to answer now: the leader stands when it is ahead of the
        // candidate kept otherwise (the OS placement, or the first survivor) at the
        // one-sided `end_error` level, the expected loss being smallest on the likely
        // best.
        let fallback = self.fallback(est, l);
        let ahead = fallback.is_none_or(|f| {
            est[f].is_some_and(|fe| {
                let (d, se, q) = self.gap(l, f, le, &fe, self.p.end_error);
                d > q * se
            })
        });
        // A clean search ends at its deadline, and says so.
        // (`end` is below the budget only while the search is clean)
        let spent = if self.end() < self.p.budget {
            format!(
                "the clean search's deadline ({:.1} s from the program's start; nothing seen that needs longer: no OS placement beside busy CPUs, no swing, no change of the whole machine)",
                self.started_at + self.end()
            )
        } else {
            "search budget spent".to_string()
        };
        if ahead {
            return self.decision(est, l, ci, &format!("{spent}: best so far"));
        }
        let why = if self.os_alive_besides(l) {
            format!("{spent} before the leader was confidently ahead of the OS placement")
        } else {
            format!("{spent} before the best so far was confidently ahead")
        };
        self.indistinguishable(est, l, ci, &why)
    }

    fn os_alive_besides(&self, l: usize) -> bool {
        self.os_placement.is_some_and(|o| {
            o != l
                && self
                    .arms
                    .get(o)
                    .is_some_and(|a| a.alive && !a.scores.is_empty())
        })
    }

    /// What stays when the leader cannot be shown better: the pinning in force (a check),
    /// the OS placement when it survives, else the first surviving candidate; beside CPUs
    /// busy with other work, the best pinning when the OS placement leads (None when what
    /// stays is the leader).
    pub(super) fn fallback(&self, est: &[Option<Estimate>], l: usize) -> Option<usize> {
        if let Some(i) = self.incumbent.filter(|&i| i != l && self.arms[i].alive) {
            return Some(i);
        }
        if self.incumbent == Some(l) {
            return None;
        }
        // Beside CPUs busy with other work a pinning is what doubt keeps: the OS placement's
        // rate depends on where the kernel puts the threads next to that work, later too.
        if self.busy_neighbours && self.os_placement.is_some() {
            return (self.os_placement == Some(l))
                .then(|| self.best_pinning(est, l))
                .flatten();
        }
        if self.os_alive_besides(l) {
            return self.os_placement;
        }
        if self.os_placement == Some(l) {
            return None;
        }
        self.survivors()
            .into_iter()
            .find(|&c| !self.arms[c].scores.is_empty())
            .filter(|&c| c != l)
    }

    /// The surviving pinning (not the OS placement, not `l`) with the highest mean.
    fn best_pinning(&self, est: &[Option<Estimate>], l: usize) -> Option<usize> {
        best_by_mean(
            est,
            self.survivors()
                .into_iter()
                .filter(|&c| c != l && self.os_placement != Some(c)),
        )
    }

    /// Beside CPUs busy with other work, the pinning kept over an OS placement that leads
    /// without being confidently ahead of it, unless its swing was seen: the doubt is that
    /// its probes may not have seen what the kernel does beside the busy CPUs, and once
    /// they have seen it swing, its variance holds the swing and its lead has stood up to it.
    fn pinning_over_os(&self, est: &[Option<Estimate>], l: usize) -> Option<usize> {
        if !self.busy_neighbours || self.os_placement != Some(l) || self.os_swing_seen(l) {
            return None;
        }
        let p = self.best_pinning(est, l)?;
        let (d, se, q) = self.gap(l, p, &est[l]?, &est[p]?, self.alpha());
        (d - q * se <= 0.0).then_some(p)
    }

    /// The answer when the survivors cannot be told apart.
    fn indistinguishable(
        &self,
        est: &[Option<Estimate>],
        l: usize,
        ci: Option<f64>,
        why: &str,
    ) -> Decision {
        let keep = self
            .fallback(est, l)
            .or(self.os_placement.filter(|&o| o == l));
        match keep {
            Some(i) if self.incumbent == Some(i) => self.decision(
                est,
                i,
                ci,
                &format!(
                    "{why}: keeping the pinning in force, the leader gains nothing measurable"
                ),
            ),
            Some(o) if self.os_placement == Some(o) => self.decision(
                est,
                o,
                ci,
                &format!(
                    "{why}: keeping the OS's own placement, pinning would gain nothing measurable"
                ),
            ),
            Some(f) if self.busy_neighbours => self.decision(
                est,
                f,
                self.margin_ci(est, f),
                &format!("{why}: keeping the best pinning, {BUSY_NEIGHBOURS}"),
            ),
            Some(f) => self.decision(
                est,
                f,
                ci,
                &format!("{why}: keeping the first candidate, the leader gains nothing measurable"),
            ),
            None if self.busy_neighbours && self.os_alive_besides(l) => self.decision(
                est,
                l,
                ci,
                &format!("{why}: keeping the best pinning, {BUSY_NEIGHBOURS}"),
            ),
            None if self.eliminated.contains(&Some(Why::NotAhead)) => self.decision(
                est,
                l,
                ci,
                &format!(
                    "{why}: keeping the best so far, the OS placement not ahead of it beside CPUs busy with other work"
                ),
            ),
            None => self.decision(est, l, ci, &format!("{why}: keeping the best so far")),
        }
    }

    /// Relative half-width of the leader's margin over the best other probed candidate.
    pub(super) fn margin_ci(&self, est: &[Option<Estimate>], l: usize) -> Option<f64> {
        let le = est[l]?;
        let r = self.runner_up(est, l)?;
        // A runner-up dropped for never rising above the leader has no interval behind its
        // elimination: its swing is the reason, and a t-test on it would say "within the
        // noise" of a candidate the race has ruled out.
        if matches!(
            self.eliminated[r],
            Some(Why::Ceiling | Why::NotAhead | Why::NeverNear | Why::Outnumbered)
        ) {
            return None;
        }
        let (_, se, q) = self.gap(l, r, &le, &est[r]?, self.alpha());
        let h = q * se;
        let from_test = h.is_finite().then(|| h.exp() - 1.0);
        // Every tick of the runner-up below half of every tick of the leader: the ticks
        // themselves bound the ratio from below (the leader's lowest over the runner-up's
        // highest), where one probe each leaves the t-test no variance to speak of.
        let from_ticks = match (
            self.below_half(l, r),
            self.arms[l].range(),
            self.arms[r].range(),
        ) {
            (true, Some((l_lo, _)), Some((_, r_hi))) => {
                let mean = |c: usize| self.mean_rate(c, 0.0);
                let ratio = mean(l)? / mean(r)?;
                Some((ratio * r_hi / l_lo - 1.0).max(0.0))
            }
            _ => None,
        };
        match (from_test, from_ticks) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The best other candidate that was probed (eliminated or not).
    fn runner_up(&self, est: &[Option<Estimate>], l: usize) -> Option<usize> {
        best_by_mean(est, (0..est.len()).filter(|&c| c != l))
    }

    pub(super) fn decision(
        &self,
        est: &[Option<Estimate>],
        c: usize,
        ci: Option<f64>,
        reason: &str,
    ) -> Decision {
        let mean_score = |i: usize| self.mean_rate(i, 0.0);
        let runner = self.runner_up(est, c);
        let score = mean_score(c);
        let rs = runner.and_then(mean_score);
        Decision {
            candidate: c,
            score,
            runner_up: runner,
            runner_up_score: rs,
            margin: match (score, rs) {
                (Some(b), Some(r)) if r > 0.0 => Some((b - r) / r),
                _ => None,
            },
            margin_ci: ci,
            reason: format!(
                "{reason} after {} round(s){}",
                self.rounds,
                self.stall_said()
            ),
        }
    }

    /// What a move cost the program, for a decision's reason, when it is enough to lengthen
    /// close calls' probes (`moves_stall`); nothing otherwise.
    fn stall_said(&self) -> String {
        match self.stall_deficit(2) {
            Some(d) => format!(
                "; a move cost the program about {:.0} ms of work (its warm-up read {:.0}% of the rate after it), so close calls get longer probes",
                d * self.p.warmup * 1e3,
                (1.0 - d) * 100.0
            ),
            _ => String::new(),
        }
    }

    /// The incumbent's latest probe as a share of the score it was decided at, while
    /// nothing else has been probed (None otherwise, or without a remembered score).
    fn incumbent_share(&self) -> Option<(usize, f64)> {
        let (i, expected) = (self.incumbent?, self.expected?);
        let others_probed = (0..self.arms.len()).any(|c| c != i && !self.arms[c].scores.is_empty());
        if others_probed {
            return None;
        }
        Some((i, self.arms[i].scores.last()? / expected))
    }

    /// The incumbent to probe once more before any other: its first probe read below its
    /// remembered rate, which the program's start-up alone explains (a program reading its
    /// input runs at a fraction of its rate on any pinning). Probing the pinning in force
    /// costs nothing when it is still the best; probing the others costs their gap.
    pub(super) fn incumbent_again(&self) -> Option<usize> {
        let (i, share) = self.incumbent_share()?;
        (self.arms[i].scores.len() == 1 && share < self.p.confirm_band.0).then_some(i)
    }

    /// The incumbent confirmed by its own probes alone: nothing else probed yet, and its
    /// latest probe within `confirm_band` of the score it was decided at.
    pub(super) fn confirmed(&self) -> Option<Decision> {
        let (i, share) = self.incumbent_share()?;
        let (lo, hi) = self.p.confirm_band;
        if !(lo..=hi).contains(&share) {
            return None;
        }
        let est = self.estimates();
        Some(self.decision(
            &est,
            i,
            None,
            &format!(
                "the pinning in force runs at {:.0}% of its rate when it was decided: kept without probing another",
                100.0 * share
            ),
        ))
    }
}
