//! A search begun (`begin_search`: the first, again after the phase watch or for more
//! threads), its candidates and their places among the report's (`load_candidates`), and the
//! strategy's steps taken (`next_step`).

use super::probe::ProbeAccumulator;
use super::{Action, CandidateList, Session, State};
use crate::report::{CandidateRecord, SearchRecord};
use crate::strategy::Step;
use autopin_human::plural;

impl Session {
    /// The start-up is over: the first search begins, unless the program is in a phase
    /// decided in an earlier run, whose pinning then applies at once.
    pub(super) fn first_search(&mut self, now: f64, out: &mut Vec<Action>) {
        let remembered = self
            .phases
            .get(&self.phase)
            .is_some_and(|m| m.remembered && m.decided.is_some());
        if remembered {
            self.enter_phase(now, out);
        } else {
            self.begin_search(now, "start".into(), out);
        }
    }

    /// A new search of the current phase at `now`, for `why`: a search still running ends
    /// there (its time counted), and the phase's decision is forgotten.
    pub(super) fn search_again(&mut self, now: f64, why: String, out: &mut Vec<Action>) {
        self.close_open_search(now);
        out.push(Action::Message(format!(
            "t={now:.1}s {why}: searching again"
        )));
        let key = self.phase.clone();
        self.phases.entry(key).or_default().decided = None;
        self.begin_search(now, why, out);
    }

    /// The program has run more threads than the candidates were made for (`was`) long
    /// enough to be its shape: whatever was probed or decided placed fewer threads, so a new
    /// search begins with a list made for the threads it runs now (see `growth`).
    pub(super) fn search_for_more_threads(&mut self, now: f64, was: usize, out: &mut Vec<Action>) {
        let why = format!(
            "the program now runs {} (the candidates were made for {})",
            plural(self.tracked as u64, "thread", "threads"),
            plural(was as u64, "thread", "threads")
        );
        self.search_again(now, why, out);
    }

    /// The candidates for the threads tracked now (the applied one keeps its index when
    /// the list is the same).
    pub(super) fn load_candidates(&mut self, out: &mut Vec<Action>) {
        let CandidateList {
            pinnings: cands,
            note,
            busy,
        } = (self.make_candidates)(self.tracked.max(1));
        if busy.is_some() {
            self.report.busy_cpus = busy;
        }
        if let Some(n) = note {
            out.push(Action::Message(n.clone()));
            self.report
                .notes
                .push(format!("search {}: {n}", self.search));
        }
        // Keep the applied candidate's index meaningful across re-searches.
        let applied_label = self.applied().map(|c| c.label.clone());
        let same = cands.len() == self.candidates.len()
            && cands
                .iter()
                .zip(&self.candidates)
                .all(|(a, b)| a.label == b.label);
        if !same {
            // Parked searches refer to candidate indexes of the old list.
            for m in self.phases.values_mut() {
                m.parked = None;
            }
        }
        self.candidates = cands;
        self.growth.made_for(self.tracked);
        self.applied =
            applied_label.and_then(|l| self.candidates.iter().position(|c| c.label == l));
        self.report_ids = (0..self.candidates.len())
            .map(|i| self.report_candidate(i))
            .collect();
    }

    /// Candidate `i`'s index among the report's candidates, where it is added when it is
    /// not there yet (a pinning is the same candidate by its label and CPUs).
    fn report_candidate(&mut self, i: usize) -> usize {
        let rec = CandidateRecord::from(self.report.candidates.len(), &self.candidates[i]);
        match self
            .report
            .candidates
            .iter()
            .position(|c| c.label == rec.label && c.cpus == rec.cpus)
        {
            Some(r) => r,
            None => {
                self.report.candidates.push(rec);
                self.report.candidates.len() - 1
            }
        }
    }

    /// Candidate `i` of the current list among the report's candidates.
    pub(super) fn report_id(&self, i: usize) -> Option<usize> {
        self.report_ids.get(i).copied()
    }

    pub(super) fn begin_search(&mut self, now: f64, trigger: String, out: &mut Vec<Action>) {
        self.search = self.searches_started;
        self.searches_started += 1;
        let memo = self.phases.entry(self.phase.clone()).or_default();
        if self.phase.is_some() && !memo.searched {
            memo.searched = true;
            self.phase_searches += 1;
        }
        self.load_candidates(out);
        let mut strat = (self.make_strategy)(self.candidates.len(), self.search);
        let os = self.candidates.iter().position(|c| c.is_unpinned());
        if let Some(os) = os {
            strat.set_os_placement(os);
        }
        strat.set_busy_neighbours(
            self.report
                .busy_cpus
                .as_ref()
                .is_some_and(|b| !b.is_empty()),
        );
        strat.set_started_at(now);
        if self.cfg.startup_settled && self.searches_started == 1 {
            strat.set_settled_start();
        }
        let threads = self.tracked.max(1);
        for (i, c) in self.candidates.iter().enumerate() {
            if c.shares_cpus(threads) {
                strat.set_shares_cpus(i);
            }
            if c.team.is_some() {
                strat.set_fewer_threads(i);
            }
        }
        if self.cfg.check_first && self.search == 0 {
            strat.set_incumbent(0);
            // A remembered pinning that stacks the threads is never confirmed by its own
            // rate alone: the rule for risky decisions wants it measured against the
            // others.
            let stacks = self
                .candidates
                .first()
                .is_some_and(|c| c.shares_cpus(threads));
            if let Some(r) = self.cfg.check_rate.filter(|_| !stacks) {
                strat.expect_incumbent(self.score(r));
            }
        }
        self.strategy_name = strat.name().to_string();
        self.report.strategy = self.strategy_name.clone();
        self.strategy = Some(strat);
        self.search_start = now;
        self.search_before = 0.0;
        self.report.searches.push(SearchRecord {
            index: self.search,
            start: now,
            trigger,
            candidates: self.candidates.len(),
            phase: self.phase.clone(),
        });
        out.push(Action::Message(format!(
            "search {}: {} for {}, strategy {}{}",
            self.search,
            plural(self.candidates.len() as u64, "candidate", "candidates"),
            plural(self.tracked as u64, "thread", "threads"),
            self.strategy_name,
            self.phase
                .as_ref()
                .map(|p| format!(", program phase {p}"))
                .unwrap_or_default()
        )));
        if let Some(acc) = self.startup_probe(os) {
            self.record_probe(acc, true, out);
        }
        self.next_step(now, out);
    }

    /// Asks the strategy for its next step and takes it: a probe to set up, or a decision.
    pub(super) fn next_step(&mut self, now: f64, out: &mut Vec<Action>) {
        let Some(strategy) = self.strategy.as_mut() else {
            return;
        };
        match strategy.next(self.search_before + now - self.search_start) {
            Step::Probe {
                candidate,
                warmup,
                measure,
            } => {
                // A probe must be long enough to see the program progress.
                let asked = measure;
                let measure = measure.max(self.grain.min_probe());
                let candidate = candidate.min(self.candidates.len().saturating_sub(1));
                // No thread moves when the candidate is the one applied, or the OS placement
                // before anything was pinned: nothing to warm up again.
                let stays = self.applied == Some(candidate)
                    || (self.applied.is_none() && self.candidates[candidate].is_unpinned());
                let warmup = if stays { 0.0 } else { warmup };
                if self.applied != Some(candidate) {
                    self.applied = Some(candidate);
                    out.push(Action::Apply(candidate));
                }
                let phase = self.phase.clone();
                self.state = if warmup > 0.0 {
                    State::Warmup {
                        cand: candidate,
                        until: now + warmup,
                        measure,
                        asked,
                        warmup,
                        phase,
                    }
                } else {
                    let mut acc = ProbeAccumulator::new(candidate, 0.0, now, now + measure, phase);
                    acc.asked_until = now + asked;
                    State::Measure(acc)
                };
            }
            Step::Decide(d) => {
                let idx = d.candidate.min(self.candidates.len().saturating_sub(1));
                self.decide(now, idx, d, out);
            }
        }
    }
}
