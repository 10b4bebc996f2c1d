//! The end of the session (`finish`: the program ended; `detach`: autopin stops watching a
//! program that runs on): the decision in force, what an unfinished search cost, why a run
//! without a decision has none, and how well the objective tracked the program's progress.

use super::{Session, State};
use crate::report::{ObjectiveCheck, Report, Start};
use autopin_human::{plural, quantity};

impl Session {
    /// The program ended (or autopin stops) at `now`: finalize the report.
    pub fn finish(&mut self, now: f64, exit_status: Option<i32>) -> &Report {
        self.close_open_search(now);
        self.settle_decision_in_force();
        self.count_parked_searches();
        self.report.wall_time = now;
        self.report.exit_status = exit_status;
        self.report.complete = self.decided_once || self.stood_back;
        self.report.objective_check = self.objective_check();
        if self.stood_back {
            // The program's own binding is the answer; the report says so.
        } else if !self.decided_once {
            let ended = ended_by(exit_status);
            let total_init = self.cfg.init + self.cfg.init_waited;
            self.report.incomplete_reason = Some(match self.state {
                State::Init { until } if self.said_no_progress && now > until => format!(
                    "{ended} after {now:.1} s without any progress the objective ({}) could measure, so there was nothing to compare: it ran {}",
                    self.cfg.unit,
                    self.where_it_ran()
                ),
                State::Init { .. } => format!(
                    "{ended} after {now:.1} s, before autopin tried any pinning (it lets a program start for {total_init:.1} s first): it ran {}",
                    self.where_it_ran()
                ),
                _ => {
                    let best = self.best_so_far();
                    let cost = self.count_open_search();
                    format!(
                        "{ended} after {now:.1} s, during the search and before a decision ({} taken){}{}",
                        plural(self.report.probes.len() as u64, "probe", "probes"),
                        best.map(|b| format!("; best so far: {b}"))
                            .unwrap_or_default(),
                        cost.map(|c| format!("; the search cost {:.2} s of its work at that rate", c.max(0.0)))
                            .unwrap_or_default()
                    )
                }
            });
        } else if !self.is_decided() {
            let cost = self.count_open_search();
            self.report.notes.push(format!(
                "{} during re-search {}; the last decision stands{}",
                ended_by(exit_status),
                self.search,
                research_cost(cost)
            ));
        }
        &self.report
    }

    /// autopin stops watching a program that still runs (attach `--duration`) at `now`;
    /// `restored` threads got their original CPU mask back.
    pub fn detach(&mut self, now: f64, restored: usize) -> &Report {
        self.close_open_search(now);
        self.settle_decision_in_force();
        self.count_parked_searches();
        self.report.wall_time = now;
        self.report.exit_status = None;
        self.report.complete = self.decided_once || self.stood_back;
        if self.stood_back {
            // The program's own binding stays; the report says so.
        } else if !self.decided_once {
            let cost = self.count_open_search();
            self.report.incomplete_reason = Some(format!(
                "autopin detached after {now:.1} s while the program was still running, during the {} phase and before a decision ({} probe(s) taken); {restored} thread(s) got their original CPU mask back{}",
                self.state_name(),
                self.report.probes.len(),
                cost.map(|c| format!("; the search cost {:.2} s of work against its best so far", c.max(0.0)))
                    .unwrap_or_default()
            ));
        } else if !self.is_decided() {
            let cost = self.count_open_search();
            self.report.notes.push(format!(
                "autopin detached during re-search {}; the last decision stands{}",
                self.search,
                research_cost(cost)
            ));
        }
        &self.report
    }

    /// The report's `decision` is the pinning in force at the end: with phases, the last
    /// decision for the phase the program was in, not the last decision taken (which may
    /// be another phase's).
    fn settle_decision_in_force(&mut self) {
        if self.phase.is_none() || self.stood_back {
            return;
        }
        if let Some(d) = self
            .report
            .decisions
            .iter()
            .rev()
            .find(|d| d.phase == self.phase)
        {
            self.report.decision = Some(d.clone());
        }
    }

    /// Where a program that ended before any probe ran: the place it started in.
    fn where_it_ran(&self) -> String {
        match (self.report.start, &self.cfg.startup_pinned) {
            (Start::Os, _) => "where the OS placed it".into(),
            (Start::PinnedAtBirth, Some(cpus)) => format!(
                "pinned to {}, off the CPUs busy with other work at launch",
                autopin_placement::cpu_text(cpus)
            ),
            (Start::PinnedAtBirth, None) => "on the CPUs it was pinned to at birth".into(),
            (Start::Attached, _) => "where it ran before autopin attached".into(),
        }
    }

    /// The candidate with the best mean probe rate in the current search, for a search the
    /// program's end cut short.
    fn best_so_far(&self) -> Option<String> {
        crate::report::ranked_by_mean(&self.report.probes, self.search, self.cfg.higher_is_better)
            .into_iter()
            .next()
            .map(|(l, r)| format!("{l} ({})", quantity(r, &self.cfg.unit)))
    }

    /// How well the objective tracked the program's own progress over the probes (sanity
    /// check; None when the program's progress was not known besides the objective).
    fn objective_check(&self) -> Option<ObjectiveCheck> {
        let source = self.progress_source?;
        let pairs: Vec<(f64, f64)> = self
            .report
            .probes
            .iter()
            .filter_map(|p| p.progress_rate.map(|g| (p.rate, g)))
            .collect();
        let t = autopin_objective::tracking(&pairs, self.cfg.higher_is_better)?;
        Some(ObjectiveCheck {
            progress: source.to_string(),
            tracking: t,
        })
    }
}

/// How the program ended, for the report: "the program ended", or, for an exit status a
/// signal gives (128 + N), "the program was interrupted (SIGINT)" and the like: Ctrl-C is
/// not the program's own end.
fn ended_by(exit_status: Option<i32>) -> String {
    let signal = exit_status
        .filter(|s| (129..=128 + 64).contains(s))
        .map(|s| s - 128);
    match signal {
        Some(2) => "the program was interrupted (SIGINT, Ctrl-C)".into(),
        Some(15) => "the program was terminated (SIGTERM)".into(),
        Some(9) => "the program was killed (SIGKILL)".into(),
        Some(1) => "the program was ended by SIGHUP (its terminal closed)".into(),
        Some(n) => format!("the program was ended by signal {n}"),
        None => "the program ended".into(),
    }
}

/// " (the re-search cost X s of its work)", or nothing when no cost is known.
fn research_cost(cost: Option<f64>) -> String {
    cost.map(|c| format!(" (the re-search cost {:.2} s of its work)", c.max(0.0)))
        .unwrap_or_default()
}
