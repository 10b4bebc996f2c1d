//! A decision taken: the strategy's, through the rule for risky decisions (`risk`), with the
//! margin the report states (`margin`) and what the search cost (`decide`); every decision's
//! record (`decision_on`) and its keeping (`keep_decision`).

use super::margin::Evidence;
use super::{margin, on_scale, risk, Action, Session, State};
use crate::report::DecisionRecord;
use crate::strategy::Decision;
use autopin_placement::Pinning;

impl Session {
    /// The search decided for candidate `idx` (`d`, the strategy's decision): the rule for
    /// risky decisions (`risk`) may keep a safer candidate instead; the margin the record
    /// states is the one that rule reads (`margin`).
    pub(super) fn decide(&mut self, now: f64, idx: usize, d: Decision, out: &mut Vec<Action>) {
        let evidence = self.evidence();
        let (idx, runner, reason, score) = self.risk_checked(idx, &d, &evidence);
        let runner = runner.filter(|&r| r != idx && r < self.candidates.len());
        if self.applied != Some(idx) {
            self.applied = Some(idx);
            out.push(Action::Apply(idx));
        }
        let cand = self
            .candidates
            .get(idx)
            .cloned()
            .unwrap_or_else(Pinning::unpinned);
        let m = runner.and_then(|r| margin::compare(&evidence[idx], &evidence[r]));
        let hib = self.cfg.higher_is_better;
        let rec = DecisionRecord {
            runner_up: runner
                .and_then(|r| self.candidates.get(r))
                .map(|c| c.label.clone()),
            runner_up_rate: runner
                .and_then(|r| evidence[r].score())
                .map(|v| on_scale(hib, v)),
            margin: m.map(|m| m.margin),
            margin_ci: m.and_then(|m| m.half),
            search_cost: self.search_cost(idx),
            ..self.decision_on(
                now,
                idx,
                evidence[idx].score().or(score),
                &reason,
                &self.strategy_name,
            )
        };
        self.report.search_cost += rec.search_cost.unwrap_or(0.0);
        let margin = rec
            .margin_text()
            .map(|m| format!(", {m}"))
            .unwrap_or_default();
        let cost = rec
            .search_cost
            .map(|c| format!("; the search cost {c:.2} s of work at its rate"))
            .unwrap_or_default();
        out.push(Action::Message(format!(
            "decided after {:.1} s{}: {}{} ({}{cost})",
            self.search_before + now - self.search_start,
            self.phase
                .as_ref()
                .map(|p| format!(" for phase {p}"))
                .unwrap_or_default(),
            cand.label,
            margin,
            rec.reason
        )));
        self.strategy = None;
        self.phases.entry(self.phase.clone()).or_default().decided =
            Some((cand.label.clone(), score));
        self.count_search_time(now);
        self.keep_decision(rec);
        if let Some(w) = self.watch.as_mut() {
            w.decided(now, score, self.phase.clone());
        }
        self.state = State::Decided {
            since_report: 0.0,
            amount: 0.0,
        };
    }

    /// The strategy's decision `d` for candidate `idx` through the rule for risky decisions,
    /// on the `evidence` of the search: the candidate kept, its runner-up, the reason, and
    /// its score as the strategy had it.
    fn risk_checked(
        &self,
        idx: usize,
        d: &Decision,
        evidence: &[Evidence],
    ) -> (usize, Option<usize>, String, Option<f64>) {
        let threads = self.tracked.max(1);
        let entries: Vec<risk::Entry> = self
            .candidates
            .iter()
            .zip(evidence)
            .map(|(c, e)| risk::Entry {
                label: &c.label,
                stacks: c.shares_cpus(threads),
                os: c.is_unpinned(),
                evidence: e,
            })
            .collect();
        match risk::check(idx, &entries) {
            risk::Guard::Stands => (idx, d.runner_up, d.reason.clone(), d.score),
            risk::Guard::NothingSafer => (
                idx,
                d.runner_up,
                format!(
                    "{}; every candidate stacks the program's threads, so nothing safer was there to keep",
                    d.reason
                ),
                d.score,
            ),
            risk::Guard::Replace { by, why } => (
                by,
                Some(idx),
                format!("{why} (the search had ended: {})", d.reason),
                evidence[by].score(),
            ),
        }
    }

    /// A decision for the current phase on candidate `idx` at `now` (`score` on the
    /// higher-is-better scale), nothing known of a runner-up or of the search's cost: the
    /// caller adds what it knows.
    pub(super) fn decision_on(
        &self,
        now: f64,
        idx: usize,
        score: Option<f64>,
        reason: &str,
        strategy: &str,
    ) -> DecisionRecord {
        let cand = self
            .candidates
            .get(idx)
            .cloned()
            .unwrap_or_else(Pinning::unpinned);
        DecisionRecord {
            search: self.search,
            at: now,
            candidate: cand.label.clone(),
            candidate_index: self.report_id(idx).unwrap_or(idx),
            // The threads that work: with a team size, the team's (the others wait idle).
            cpus: cand.cpus_for(
                cand.team
                    .map_or(self.tracked.max(1), |t| t.min(self.tracked.max(1))),
            ),
            rate: score.map(|v| on_scale(self.cfg.higher_is_better, v)),
            runner_up: None,
            runner_up_rate: None,
            margin: None,
            margin_ci: None,
            reason: reason.to_string(),
            strategy: strategy.to_string(),
            phase: self.phase.clone(),
            team: cand.team,
            search_cost: None,
        }
    }

    /// A decision taken: the one in force, and one more in the report's list.
    pub(super) fn keep_decision(&mut self, rec: DecisionRecord) {
        self.report.decision = Some(rec.clone());
        self.report.decisions.push(rec);
        self.decided_once = true;
    }
}
