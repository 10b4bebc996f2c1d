//! What a search cost: the work its probes lost against the decided candidate
//! (`lost_work`), counted when it decides, when the program ends or autopin detaches during it,
//! and for searches a phase change left unfinished; and the time spent searching.

use super::{Session, State};

/// Work lost to probes, in seconds of the decided candidate's rate: every probe of another
/// candidate (its warm-up included, taken to run at the probe's rate) of `seconds` at
/// `score` did `seconds × score` of work where the decided candidate would have done
/// `seconds × best`, `best` being the decided candidate's rate over all its probes (their
/// work ÷ their time). Probe by probe, not from each candidate's mean score: a candidate far
/// behind is cut after one tick or its warm-up, so its short probes read its slow states
/// and its long ones its fast states, and a mean over probes would weigh 20 ms like 200 ms
/// (GROMACS beside a busy CPU: 0.32 s from the means where its probes lost 0.11 s).
/// A probe that did better than the decided candidate lost nothing (it counts zero, never
/// as a gain: the cost is what the search took, and a tie kept over a faster-looking probe
/// is the decision's doing, not the search's). The decided candidate's own probes are its
/// rate, so they lose nothing either. Never negative. Items: (candidate, score, seconds).
pub(super) fn lost_work(
    probes: impl Iterator<Item = (usize, f64, f64)> + Clone,
    decided: usize,
) -> Option<f64> {
    let (work, time) = probes
        .clone()
        .filter(|&(c, _, _)| c == decided)
        .fold((0.0, 0.0), |(w, t), (_, s, secs)| (w + s * secs, t + secs));
    let best = Some(work / time).filter(|b| time > 0.0 && *b > 0.0)?;
    Some(
        probes
            .filter(|&(c, _, _)| c != decided)
            .map(|(_, s, secs)| secs * (1.0 - s / best).max(0.0))
            .sum(),
    )
}

impl Session {
    /// Work the current search lost, in seconds of the decided candidate's rate (see
    /// [`lost_work`]). None when the decided candidate was never probed.
    pub(super) fn search_cost(&self, decided: usize) -> Option<f64> {
        self.cost_of_search(self.search, self.report_id(decided)?)
    }

    /// [`Self::search_cost`] of search `search`, against the report's candidate `decided`.
    fn cost_of_search(&self, search: usize, decided: usize) -> Option<f64> {
        // The start-up's probe was not the search's doing: the program ran there anyway.
        let probes = self
            .report
            .probes
            .iter()
            .filter(|p| p.search == search && p.duration > 0.0 && !p.startup)
            .map(|p| (p.candidate, self.score(p.rate), p.warmup + p.duration));
        lost_work(probes, decided)
    }

    /// Adds the current search segment, from `search_start` to `now`, to the report's
    /// search time.
    pub(super) fn count_search_time(&mut self, now: f64) {
        self.report.search_time += (now - self.search_start).max(0.0);
    }

    /// A search still running at the end counts in the search time up to `now`.
    pub(super) fn close_open_search(&mut self, now: f64) {
        if matches!(self.state, State::Warmup { .. } | State::Measure(_)) {
            self.count_search_time(now);
            self.search_start = now;
        }
    }

    /// Counts what the search still open when autopin stops watching cost (the program's
    /// work was lost all the same), and returns it: a first search against its best
    /// candidate so far, a re-search against the pinning that stays (once probed in it).
    pub(super) fn count_open_search(&mut self) -> Option<f64> {
        let cost = if self.decided_once {
            self.report
                .decision
                .as_ref()
                .and_then(|d| self.cost_of_search(self.search, d.candidate_index))
        } else {
            self.unfinished_cost(self.search)
        };
        self.report.search_cost += cost.unwrap_or(0.0);
        cost
    }

    /// What search `search`, left without a decision, cost against its best candidate so
    /// far (the best mean probe rate, as [`Self::best_so_far`] names it).
    fn unfinished_cost(&self, search: usize) -> Option<f64> {
        let (label, _) =
            crate::report::ranked_by_mean(&self.report.probes, search, self.cfg.higher_is_better)
                .into_iter()
                .next()?;
        let best = self
            .report
            .probes
            .iter()
            .find(|p| p.search == search && p.label == label)?
            .candidate;
        self.cost_of_search(search, best)
    }

    /// Searches parked by a phase change that never came back to them: what their probes
    /// cost against the best of each so far is counted, and said in a note.
    pub(super) fn count_parked_searches(&mut self) {
        let parked: Vec<(Option<String>, usize)> = self
            .phases
            .iter()
            .filter_map(|(phase, memo)| memo.parked.as_ref().map(|p| (phase.clone(), p.search)))
            .collect();
        for (phase, search) in parked {
            let Some(cost) = self.unfinished_cost(search) else {
                continue;
            };
            self.report.search_cost += cost;
            self.report.notes.push(format!(
                "search {search} (phase {}) was left unfinished when its phase ended and did not come back; it cost {:.2} s of work against its best so far",
                phase.unwrap_or_else(|| "(none)".into()),
                cost.max(0.0)
            ));
        }
    }
}
