//! What to probe next and for how long (`next_step`): the incumbent's second look, the
//! scouting pass before the first round (`next_scout`, `scouting_order`), rounds with the
//! most promising first, and probe lengths by what each costs (`plan_lengths`; longer for
//! close calls when moves stall the program, `moves_stall`).

use super::estimate::Estimate;
use super::Race;
use crate::strategy::{Decision, Step};

/// Fewest candidates, besides the OS placement, that a search scouts (`Race::next_scout`):
/// with three or fewer the first round reaches the leader after one other on average, which
/// does not pay for a move and 20 ms each (in the simulator scouting two lost more than it
/// saved).
const SCOUT_MIN: usize = 4;

/// A pinning behind the leader by more than this is probed for `far_probe` only. Not from a
/// close call on (5%): whatever slows the first moments after a move (caches, memory
/// refilled from afar) weighs more in a shorter probe, and a pinning 5–10% behind in one
/// probe may be the best; probed briefly it reads further behind and stays there (a
/// memory-bound program on four sockets, in the simulator, kept the spread pinning over its
/// data's node, 10% faster, after two 0.1 s probes of it read 4% and 28% below the spread
/// pinning's mean).
const FAR_BEHIND: f64 = 0.1;

/// Beside busy CPUs, the OS placement's looks in a round come after this many other
/// probes each (`Race::look_at_os_often`). Every second or third probe left the OS
/// placement's third look past the deadline when scouting a dozen candidates took the
/// first 0.25 s of a search that began 1.5 s into the program.
const OS_LOOK_EVERY: usize = 1;

/// The least time a clean search gets before its deadline, seconds, however late it began
/// (`Race::end`).
const MIN_CLEAN_SEARCH: f64 = 1.0;

impl Race {
    /// The strategy's next step (`Strategy::next`): a probe, or the decision.
    pub(super) fn next_step(&mut self, elapsed: f64) -> Step {
        self.clock = elapsed;
        if let Some(step) = self.before_the_rounds(elapsed) {
            return step;
        }
        if let Some(d) = self.prune_round() {
            return Step::Decide(d);
        }
        if self.queue.is_empty() {
            if let Some(d) = self.begin_round() {
                return Step::Decide(d);
            }
        }
        self.next_in_round(elapsed)
    }

    /// What comes before any round: a decision with fewer than two candidates, or on the
    /// incumbent's probe alone, the incumbent's second probe, a scout.
    fn before_the_rounds(&mut self, elapsed: f64) -> Option<Step> {
        if self.arms.is_empty() {
            return Some(Step::Decide(Decision::unmeasured(0, "no candidates")));
        }
        if self.arms.len() == 1 {
            let est = self.estimates();
            return Some(Step::Decide(self.decision(
                &est,
                0,
                None,
                "only one candidate",
            )));
        }
        if let Some(d) = self.confirmed() {
            return Some(Step::Decide(d));
        }
        if let Some(i) = self.incumbent_again() {
            let measure = self.arms[i].probe_len;
            if elapsed + self.p.warmup + measure <= self.p.budget {
                return Some(Step::Probe {
                    candidate: i,
                    warmup: self.p.warmup,
                    measure,
                });
            }
        }
        if let Some(c) = self.next_scout() {
            let measure = self.arms[c].probe_len;
            if elapsed + self.p.warmup + measure <= self.p.budget {
                self.scouting = Some(c);
                return Some(Step::Probe {
                    candidate: c,
                    warmup: self.p.warmup,
                    measure,
                });
            }
        }
        None
    }

    /// Takes out of the round in progress what its probes so far rule out; the decision
    /// when one survivor is left.
    fn prune_round(&mut self) -> Option<Decision> {
        if !self.queue.is_empty() {
            // A candidate the probes so far in this round already rule out is not probed
            // again: its probe would be lost work.
            let est = self.estimates();
            if let Some(l) = self.leader(&est) {
                self.eliminate(&est, l);
            }
            let arms = &self.arms;
            self.queue.retain(|&c| arms[c].alive);
            if self.survivors().len() == 1 {
                if let Some(d) = self.judge(false) {
                    return Some(d);
                }
            }
        }
        None
    }

    /// Queues the next round: the first in scouting order, a later one after judging the
    /// last (the decision, when that ends the race) with the most promising first.
    fn begin_round(&mut self) -> Option<Decision> {
        let order = if self.rounds == 0 {
            self.first_round()
        } else {
            match self.later_round() {
                Ok(order) => order,
                Err(d) => return Some(d),
            }
        };
        self.queue = order;
        self.queue.reverse();
        self.rounds += 1;
        None
    }

    /// The first round: the candidates not yet measured in scouting order, after the
    /// pinning the program was born on (`born_pinning`), with the OS placement's looks
    /// among them beside busy CPUs (`look_at_os_often`). A pinning the program ran its whole
    /// start-up on, settled (`born_tail`), has that reading for its probe of this round:
    /// the round begins with the next probe (the OS placement's first look, and it again
    /// after that); a team of the free CPUs settled so is probed again first instead (no
    /// move) and the OS placement looked at once, at the round's end (why: the note at the
    /// end of `look_at_os_often`'s).
    fn first_round(&self) -> Vec<usize> {
        let survivors = self.survivors();
        // A candidate measured before the search (the OS placement while the program
        // started) has had its first round.
        let unprobed: Vec<usize> = survivors
            .iter()
            .copied()
            .filter(|&c| self.arms[c].scores.is_empty())
            .collect();
        let born = self.born_pinning(&survivors);
        let mut order = self.scouting_order(if unprobed.is_empty() {
            survivors
        } else {
            unprobed
        });
        if let Some(b) = born.filter(|b| !order.contains(b)) {
            order.insert(0, b);
        }
        let os = self.os_to_look_at(&order);
        if let Some(o) = os {
            order.retain(|&c| c != o);
        }
        let settled = self.born_tail.filter(|&b| order.first() == Some(&b));
        match (settled, os) {
            (Some(b), Some(o)) if self.arms[b].fewer_threads => order.push(o),
            (Some(_), Some(o)) => {
                self.look_at_os_often(&mut order, o, true);
                order.remove(0);
            }
            (Some(_), None) => {
                order.remove(0);
            }
            (None, Some(o)) => {
                let again = self.arms[order[0]].unsearched();
                self.look_at_os_often(&mut order, o, again);
            }
            (None, None) => {}
        }
        order
    }

    /// A later round, once the last is judged (the decision, when that ends the race): the
    /// most promising first, so a search cut short by the program's end or the budget has
    /// measured the leaders most.
    fn later_round(&mut self) -> Result<Vec<usize>, Decision> {
        if let Some(d) = self.judge(false) {
            return Err(d);
        }
        let est = self.estimates();
        let l = self.leader(&est);
        self.plan_lengths(&est, l);
        let mut order = self.survivors();
        order.sort_by(|a, b| {
            est[*b]
                .map_or(f64::NEG_INFINITY, |e| e.mean)
                .total_cmp(&est[*a].map_or(f64::NEG_INFINITY, |e| e.mean))
        });
        // A round that cannot end before the budget: what its end compares (the leader
        // against what a tie keeps, `at_budget_end`) is measured first.
        let round: f64 = order
            .iter()
            .map(|&c| self.p.warmup + self.arms[c].probe_len)
            .sum();
        if let Some(l) = l.filter(|_| self.clock + round > self.end()) {
            if let Some(f) = self.fallback(&est, l) {
                order.retain(|&c| c != f && c != l);
                order.insert(0, l);
                order.insert(0, f);
            }
        }
        // Past the deadline beside busy CPUs, only the OS placement still racing keeps the
        // search from being clean: its looks (one a round) and the leader's probes alone,
        // so that it is known, or gone, rounds sooner.
        if let Some(l) = l.filter(|_| self.started_at + self.clock >= self.p.deadline) {
            let os = self
                .os_placement
                .filter(|&o| o != l && self.busy_neighbours && self.arms[o].alive);
            if let Some(o) = os {
                order = vec![o, l];
            }
        }
        if let Some(o) = self.os_to_look_at(&order) {
            order.retain(|&c| c != o);
            let again = self.arms[order[0]].unsearched();
            self.look_at_os_often(&mut order, o, again);
        }
        Ok(order)
    }

    /// The pinning the program was born on (or a remembered one it was checked on), among
    /// `order`: measured before the search only, and not the OS placement; none where the
    /// search scouted. The first round probes it first: the program is there already, so
    /// its probe costs no move, and a start-up reading is no evidence against anyone
    /// (`eliminate`), so until a probe of the search measured it the others could not be
    /// cut short against it. Left for the second round, a team of one thread on the free
    /// CPU beside a busy one (2× the two-thread pinnings in its start-up) saw the
    /// two-thread pinnings and the OS placement probed whole twice before its own probe
    /// decided: 0.21 s of a 2.6 s program lost. Where the program ran there for the whole
    /// wait before the search (`born_tail`), its start-up's reading is that first probe,
    /// and the round begins with the next.
    fn born_pinning(&self, order: &[usize]) -> Option<usize> {
        // Where candidates were scouted, the round begins with the best scouted instead:
        // put before it, the pinning born on held the best back by two probes (the
        // simulator's barrier model beside busy CPUs, 13 candidates: the search lost
        // 0.45–0.60 s where it lost 0.11–0.24, and decided up to 1.4 s later).
        if self.arms.iter().any(|a| a.scout.is_some()) {
            return None;
        }
        if let Some(b) = self.born_tail.filter(|b| order.contains(b)) {
            return Some(b);
        }
        order.iter().copied().find(|&c| {
            self.os_placement != Some(c)
                && !self.arms[c].scores.is_empty()
                && self.arms[c].unsearched()
        })
    }

    /// Beside busy CPUs, the OS placement still racing and not yet settled, among the
    /// round's `order` of three or more: the one `look_at_os_often` spreads over the round.
    fn os_to_look_at(&self, order: &[usize]) -> Option<usize> {
        self.os_placement.filter(|&o| {
            self.busy_neighbours
                && self.arms[o].alive
                && self.unsettled(o)
                && order.contains(&o)
                && order.len() >= 3
        })
    }

    /// Beside busy CPUs, the OS placement still racing (`o`, taken out of the round's
    /// `order` by the caller) is what keeps the search from its clean deadline until it has been looked at `os_probes` times: in a round it is
    /// looked at after the round's first probe and then after every `OS_LOOK_EVERY` others,
    /// as many times as it still needs looks, not once at the round's end. A look at an OS
    /// placement far behind is cut short (0.1 s at most); a round of others waiting for each
    /// of its looks cost barrier codes beside busy CPUs their deadline: in the simulator's
    /// table (bench/simulate.sh) 27 of 230 cases decided at 3.1–4.7 s, none now after 2.9 s,
    /// and the work the searches lost fell (a mean of 0.214 s to 0.203 s).
    ///
    /// With `again`, the round's first candidate (the pinning born on, the best scouted, or
    /// the leader) is probed once more after the OS placement's first look: when this round
    /// would leave it with one probe of the search (or, settled at birth, with its start-up's
    /// reading and one), as every rule that ends an OS placement beside busy CPUs compares
    /// it with a leader probed twice. A swinging OS placement (on the busy CPUs, then off
    /// them) had its looks by the round's middle and still waited for the leader's second
    /// probe, the next round's, past the deadline.
    ///
    /// (A team of the free CPUs the program ran its start-up on is not looked around so, see
    /// `first_round`: the program is on the team already, so its probe again costs no move;
    /// the pinnings after it start from threads the team left idle, not from where the OS
    /// placement left them (stacked, or beside the other work: the next probe's warm-up then
    /// read a quarter of the rate and had to be probed again); and the look at the round's
    /// end has a team probed twice to be held to (`Race::outnumbering_team`), so a look far
    /// below it ends the OS placement's probe there (`Strategy::collapsed`) and the search
    /// with it. Looked at before the team's second probe, the OS placement ran its whole
    /// first tick at 0.75 of the team and was moved back to the team: 0.1 s of `ompwork -m
    /// loops`'s 2.3 s beside a busy CPU.)
    fn look_at_os_often(&self, order: &mut Vec<usize>, o: usize, again: bool) {
        if again {
            order.insert(1, order[0]);
        }
        let looks = self
            .p
            .os_probes
            .saturating_sub(self.arms[o].searched_probes())
            .max(1);
        let mut at = 1;
        // Each look has another probe after it in the round: a look that ended one round
        // and began the next would be one stretch of the OS placement, not two looks.
        for _ in 0..looks {
            if at >= order.len() {
                break;
            }
            order.insert(at, o);
            at += 1 + OS_LOOK_EVERY;
        }
    }

    /// The budget this search keeps to now: the deadline while it is clean
    /// (`Race::clean`), else the whole budget.
    pub(super) fn end(&self) -> f64 {
        if self.clean() {
            (self.p.deadline - self.started_at)
                .max(MIN_CLEAN_SEARCH)
                .min(self.p.budget)
        } else {
            self.p.budget
        }
    }

    /// Whether nothing the search has seen needs its whole budget: no neighbour's busy CPU
    /// beside it (the OS placement's rate may swing or stack there), no change of the whole
    /// machine taken out of its probes, no probe lengthened (a coarse objective, noisy close
    /// calls), no surviving candidate whose ticks swing. (A candidate out of the race no
    /// longer weighs in the comparisons left: an OS placement beside busy CPUs that swung
    /// between a pinning's rate and half of it, gone once its swing never rose above the
    /// leader, kept the search from its deadline until ties among the pinnings were
    /// certified, 8–9 rounds and up to 6.5 s in the simulator.)
    pub(super) fn clean(&self) -> bool {
        let base = self.p.base_probe();
        let os_alive = self
            .os_placement
            .is_some_and(|o| self.arms.get(o).is_some_and(|a| a.alive));
        (!self.busy_neighbours || !os_alive)
            && !self.level_changed
            && self.arms.iter().all(|a| a.probe_len <= base)
            && (0..self.arms.len()).all(|c| !self.arms[c].alive || !self.ticks_swing(c))
    }

    /// The next probe of the round, or the decision when it would not fit in the budget.
    fn next_in_round(&mut self, elapsed: f64) -> Step {
        let c = *self.queue.last().expect("queue filled above");
        let measure = self.arms[c].probe_len;
        let past_end = elapsed + self.p.warmup + measure > self.end();
        // (a deadline reached before any usable measurement leaves the budget to it)
        let within_budget = elapsed + self.p.warmup + measure <= self.p.budget;
        if past_end {
            if let Some(d) = self.judge(true) {
                return Step::Decide(d);
            }
        }
        if past_end && !within_budget {
            // Not one usable probe (e.g. the program changes phase faster than a probe):
            // stop anyway rather than search forever, and say so.
            return Step::Decide(Decision::unmeasured(
                0,
                "no usable measurement within the budget; keeping the first candidate",
            ));
        }
        self.queue.pop();
        Step::Probe {
            candidate: c,
            warmup: self.p.warmup,
            measure,
        }
    }

    /// The next candidate to scout. Once, before the first round, every candidate not yet
    /// probed is read for its warm-up alone (20 ms) when there are `SCOUT_MIN` or more of
    /// them and no pinning in force is being checked. The first round then probes the best
    /// scouted first: the leader is found early, and the probes after it are cut short
    /// against it (`seen_enough`, `behind_at_warmup`). In a random order, half the
    /// candidates before the best were probed whole, each 0.2 s of its gap lost; that was
    /// half of what the search lost in the simulator. Not the OS placement, whose threads
    /// need no move and whose warm-up reads where the last pinning left them.
    fn next_scout(&mut self) -> Option<usize> {
        if !self.scouted && self.rounds == 0 {
            self.scouted = true;
            let fresh: Vec<usize> = self
                .survivors()
                .into_iter()
                .filter(|&c| self.arms[c].scores.is_empty() && self.os_placement != Some(c))
                .collect();
            if fresh.len() >= SCOUT_MIN && self.incumbent.is_none() {
                self.scout_queue = fresh.into_iter().rev().collect();
            }
        }
        self.scout_queue.pop()
    }

    /// The first round's order after scouting: the best scouted candidate, then those not
    /// scouted (the OS placement: probed once a leader can cut its probe short, and before
    /// the other pinnings, as it is what a tie keeps), then the rest by their scouting
    /// readings, best first. Unchanged when nothing was scouted.
    fn scouting_order(&self, order: Vec<usize>) -> Vec<usize> {
        let (mut scouted, unscouted): (Vec<usize>, Vec<usize>) = order
            .into_iter()
            .partition(|&c| self.arms[c].scout.is_some());
        let reading = |c: usize| self.arms[c].scout.map_or(0.0, |s| s.0);
        scouted.sort_by(|a, b| reading(*b).total_cmp(&reading(*a)));
        let rest = scouted.split_off(scouted.len().min(1));
        scouted.into_iter().chain(unscouted).chain(rest).collect()
    }

    /// Whether a move onto a pinning costs the program `stall_share` of a base probe or
    /// more: the median deficit of the warm-ups before whole probes of pinnings, times the
    /// warm-up's length, from two such probes on. The OS placement's warm-ups say nothing of
    /// it: its rate changes as the kernel moves its threads, before and after its warm-up.
    /// The warm-up is where a move's cost shows (threads that wait for their new CPU, caches
    /// and memory refilled from afar; 16 spinning threads on a 16-CPU virtual machine
    /// stalled for milliseconds), and a cost beyond the warm-up shows there as a deficit
    /// near 1.
    fn moves_stall(&self) -> bool {
        self.stall_deficit(2).is_some()
    }

    /// The median share of a pinning's rate its warm-up misses, from `least` whole probes
    /// after a move on, when it makes a move cost `stall_share` of a base probe or more.
    pub(super) fn stall_deficit(&self, least: usize) -> Option<f64> {
        if self.warmup_deficits.len() < least {
            return None;
        }
        autopin_stats::median(&self.warmup_deficits)
            .filter(|d| d * self.p.warmup >= self.p.stall_share * self.p.base_probe())
    }

    /// Probe lengths for the next round: close calls with noisy probes get longer ones when
    /// moves stall the program (`moves_stall`), a pinning far behind the leader the short
    /// `far_probe`, every other survivor the base length.
    fn plan_lengths(&mut self, est: &[Option<Estimate>], l: Option<usize>) {
        let base = self.p.base_probe();
        let floor = (self.p.warmup * 2.0)
            .max(self.p.min_probe)
            .min(self.p.max_probe);
        let Some(le) = l.and_then(|l| est[l]) else {
            return;
        };
        // How far behind the leader a candidate is, on the log scale (None: not measured).
        let behind = |c: usize| est[c].map(|e| le.mean - e.mean);
        let close = |c: usize| behind(c).is_some_and(|g| g <= (1.0 + self.p.close).ln());
        let any_close_challenger = self
            .survivors()
            .into_iter()
            .any(|c| Some(c) != l && close(c));
        let stall = self.moves_stall();
        for c in self.survivors() {
            let noisy = est[c].is_some_and(|e| (e.var * e.n as f64).sqrt() > self.p.target_cv);
            let grow = stall
                && self.rounds >= self.p.min_rounds
                && any_close_challenger
                && close(c)
                && noisy;
            let far = self.os_placement != Some(c)
                && behind(c).is_some_and(|g| g > (1.0 + FAR_BEHIND).ln());
            let a = &mut self.arms[c];
            a.probe_len = if grow {
                (a.probe_len * 1.5).clamp(floor, self.p.max_probe)
            } else if far {
                self.p.far_probe()
            } else {
                base
            };
        }
    }
}
