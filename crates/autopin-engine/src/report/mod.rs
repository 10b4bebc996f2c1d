//! The run report: machine, candidates, every probe, decisions, re-searches and the
//! timeline, as JSON (`--report`) and CSV (`--timeline`) text; the CLI writes them atomically
//! so a reader never sees half a report, even when the target dies mid-search.

pub mod launch;
pub mod migration;
pub mod view;

pub use launch::{JobLauncher, JobPlace, LaunchRecord};
pub use migration::{MigrationOutcome, MigrationRecord};

use autopin_placement::Pinning;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ObjectiveInfo {
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
    /// Why this objective was measured (the default, asked for, or which fallback and why).
    #[serde(default)]
    pub reason: String,
    /// The link of the objective chain it came from: requested, heartbeat, openmp or
    /// task-clock (empty in reports written before it was recorded). A remembered decision
    /// keeps it, so the next run measures the same way without waiting for the links before.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadRate {
    pub tid: u32,
    /// Position among tracked threads in creation order.
    pub index: usize,
    pub rate: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// Which search (0 = first, 1.. = re-searches) the probe belongs to.
    pub search: usize,
    pub candidate: usize,
    pub label: String,
    /// Start of the measurement (seconds since autopin started), after the warm-up.
    pub start: f64,
    pub warmup: f64,
    pub duration: f64,
    /// Objective rate over the accepted intervals.
    pub rate: f64,
    /// The objective's rate in each sampling tick of the probe (about 0.1 s each; a probe
    /// cut at its warm-up has that one reading): the spread behind every interval the report
    /// states of a decision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ticks: Vec<f64>,
    pub per_thread: Vec<ThreadRate>,
    pub intervals: usize,
    /// Intervals during which threads were born or exited; left out of `rate` unless every
    /// interval was disturbed (continuous thread churn), which `churn` then says.
    pub disturbed_intervals: usize,
    pub churn: bool,
    /// Program phase the probe measured (heartbeat channel); None when the program announces
    /// no phases. Intervals of another phase, or spanning a phase change, are left out.
    #[serde(default)]
    pub phase: Option<String>,
    /// Intervals left out because they belonged to another phase or spanned a change.
    #[serde(default)]
    pub off_phase_intervals: usize,
    /// Intervals left out because the candidate's thread count was not yet in force: a
    /// parallel region begun under the team before still ran (a team changes only at a
    /// region's start). Counted in `rate` only where nothing else was left.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub team_lag_intervals: usize,
    /// The program's own progress rate during the probe (heartbeats or OpenMP constructs
    /// per second), when known besides the objective.
    #[serde(default)]
    pub progress_rate: Option<f64>,
    /// Measured while the program started, before the search, where the OS had placed it:
    /// the OS placement's first probe, at no cost to the search.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub startup: bool,
}

/// How well the objective tracked the program's own progress over the probes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ObjectiveCheck {
    /// What the program's progress was measured by ("heartbeat", "OpenMP progress").
    pub progress: String,
    #[serde(flatten)]
    pub tracking: autopin_objective::Tracking,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub search: usize,
    /// Seconds since autopin started.
    pub at: f64,
    /// The chosen candidate's text (a CPU list in thread order, or "unpinned (OS decides)").
    pub candidate: String,
    pub candidate_index: usize,
    /// The chosen CPU of each tracked thread in creation order (null when unpinned); with a
    /// team size, of the team's threads (the others wait idle in the runtime's pool).
    pub cpus: Option<Vec<u32>>,
    pub rate: Option<f64>,
    pub runner_up: Option<String>,
    pub runner_up_rate: Option<f64>,
    /// (winner − runner-up) / runner-up, on the objective's better-is-higher scale: each
    /// one's rate over its probes of the search (their work ÷ their time), start-up left
    /// out.
    pub margin: Option<f64>,
    /// How far the margin's 95% confidence interval reaches either side, on the log scale,
    /// as a ratio minus one: the interval is (1 + margin) / (1 + margin_ci) − 1 to
    /// (1 + margin)(1 + margin_ci) − 1 (Welch's test on the log of the probes' tick rates;
    /// None with one tick each).
    pub margin_ci: Option<f64>,
    pub reason: String,
    pub strategy: String,
    /// The program phase this decision is for (None: no phases announced).
    #[serde(default)]
    pub phase: Option<String>,
    /// The team size the decided candidate runs the program's OpenMP regions with (None:
    /// the program's own count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<usize>,
    /// What the search cost: seconds of the decided pinning's work lost while other
    /// candidates were probed (warm-ups included), probe by probe, against the decided
    /// pinning's rate over its own probes. None when the decided pinning was never probed.
    #[serde(default)]
    pub search_cost: Option<f64>,
}

impl DecisionRecord {
    /// The `strategy` of a decision an earlier run took and this one applied (a phase's
    /// remembered pinning), with no search.
    pub const FROM_MEMORY: &'static str = "memory";

    /// The margin over the runner-up as a person reads it, the runner-up named: "12.0%
    /// faster than 0,1 (95% CI +5.1% to +19.4%)", "cannot be told apart from 0,1 (…)"
    /// (see [`margin_text`]).
    pub fn margin_text(&self) -> Option<String> {
        let m = self.margin?;
        let other = self.runner_up.as_deref().unwrap_or("the next best");
        Some(margin_text(m, self.margin_ci, other))
    }
}

/// A margin as a person reads it, `other` being the candidate compared with and `half`
/// how far the 95% interval reaches either side on the log scale (as a ratio minus one):
/// "12.0% faster than 0,1 (95% CI +6.7% to +17.6%)", "35.7% slower than 0,1 (…)", or
/// "cannot be told apart from 0,1 (-1.4%, 95% CI -8.0% to +5.6%)" when the interval holds
/// zero; twice as fast or more, or half or less, as ratios: "2.73× as fast as 0,1 (95% CI
/// 2.65× to 2.81×)", "0.30× the rate of 0,1 (…)". Without an interval: "12.0% faster than
/// 0,1 (one sampling tick each: no interval)".
pub fn margin_text(margin: f64, half: Option<f64>, other: &str) -> String {
    let r = 1.0 + margin;
    let far = !(0.5..2.0).contains(&r);
    let signed = |x: f64| {
        if far {
            format!("{:.2}×", 1.0 + x)
        } else {
            format!("{:+.1}%", 100.0 * x)
        }
    };
    let what = |faster: bool| match (far, faster) {
        (true, true) => format!("{r:.2}× as fast as {other}"),
        (true, false) => format!("{r:.2}× the rate of {other}"),
        (false, true) => format!("{:.1}% faster than {other}", 100.0 * margin),
        (false, false) => format!("{:.1}% slower than {other}", -100.0 * margin),
    };
    let Some(h) = half.filter(|h| h.is_finite() && *h >= 0.0) else {
        return format!(
            "{} (one sampling tick each: no interval)",
            what(margin >= 0.0)
        );
    };
    let (low, high) = (r / (1.0 + h) - 1.0, r * (1.0 + h) - 1.0);
    let ci = format!("95% CI {} to {}", signed(low), signed(high));
    if low > 0.0 {
        format!("{} ({ci})", what(true))
    } else if high < 0.0 {
        format!("{} ({ci})", what(false))
    } else {
        format!(
            "cannot be told apart from {other} ({}, {ci})",
            signed(margin)
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchRecord {
    pub index: usize,
    pub start: f64,
    /// Why it started ("start", or the PhaseWatch trigger).
    pub trigger: String,
    pub candidates: usize,
    /// The program phase searched for.
    #[serde(default)]
    pub phase: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimelinePoint {
    pub t: f64,
    pub rate: f64,
    /// Pinning applied during the interval (None before the first pinning).
    pub candidate: Option<usize>,
    /// init, warmup, probe or decided.
    pub state: String,
    /// Program phase at the end of the interval.
    #[serde(default)]
    pub phase: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub command: Vec<String>,
    pub machine: Vec<String>,
    pub objective: ObjectiveInfo,
    pub strategy: String,
    pub counting_mode: String,
    pub notes: Vec<String>,
    pub candidates: Vec<CandidateRecord>,
    pub searches: Vec<SearchRecord>,
    pub probes: Vec<ProbeRecord>,
    /// The last decision (what the program ran with at the end).
    pub decision: Option<DecisionRecord>,
    /// Every decision, first search and re-searches.
    pub decisions: Vec<DecisionRecord>,
    pub timeline: Vec<TimelinePoint>,
    /// False when the program ended before the (first) search finished.
    pub complete: bool,
    pub incomplete_reason: Option<String>,
    pub exit_status: Option<i32>,
    pub threads_seen: usize,
    pub wall_time: f64,
    /// Seconds spent searching (warm-ups included) over all searches.
    pub search_time: f64,
    /// What the searches cost, added up over the decisions: seconds of the decided
    /// pinning's work lost to probing worse candidates (see `DecisionRecord::search_cost`).
    #[serde(default)]
    pub search_cost: f64,
    /// autopin's own CPU time (user+sys) ÷ wall time, when measured.
    pub monitor_cpu_share: Option<f64>,
    /// Estimated slowdown of the target caused by counting, when estimated (relative).
    pub perturbation: Option<f64>,
    pub perturbation_note: Option<String>,
    /// Objective sanity check: agreement with the program's own progress.
    #[serde(default)]
    pub objective_check: Option<ObjectiveCheck>,
    /// Where the program ran before autopin first moved its threads (the timeline's grey
    /// start).
    #[serde(default)]
    pub start: Start,
    /// Where this run stood in a Slurm/MPI launch (None for plain runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchRecord>,
    /// `--migrate-memory`: what page migration did after each decision.
    #[serde(default)]
    pub memory_migrations: Vec<MigrationRecord>,
    /// The program's own binding (e.g. `OMP_PROC_BIND=true OMP_PLACES=cores`), left in
    /// force: autopin stood back and this is the pinning the program ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_binding: Option<String>,
    /// Why the decided pinning is not what the program's threads ran on: the kernel refused
    /// their masks (CPUs a cpuset no longer holds). None: it was applied to every thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<String>,
    /// What the run did with remembered decisions (None: memory was not asked about).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryUse>,
    /// What the run did with the program's thread count (None: not planned, e.g. a report
    /// written before it was recorded, or a run that stood back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<ThreadCount>,
    /// The CPUs other work kept busy (more than 30% of their time) when the last search
    /// began, or when a remembered decision's check began (None: not watched: an attached
    /// program, or candidates the user named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_cpus: Option<Vec<u32>>,
}

/// The candidates probed in search `search`, by their mean probe rate, best first (`higher`:
/// more is better); equal means keep the later label first.
pub fn ranked_by_mean(probes: &[ProbeRecord], search: usize, higher: bool) -> Vec<(String, f64)> {
    let mut sums: std::collections::BTreeMap<&str, (f64, f64)> = Default::default();
    for p in probes.iter().filter(|p| p.search == search) {
        let e = sums.entry(p.label.as_str()).or_default();
        e.0 += p.rate;
        e.1 += 1.0;
    }
    let mut ranked: Vec<(String, f64)> = sums
        .into_iter()
        .rev()
        .map(|(l, (s, n))| (l.to_string(), s / n))
        .collect();
    ranked.sort_by(|a, b| {
        if higher {
            b.1.total_cmp(&a.1)
        } else {
            a.1.total_cmp(&b.1)
        }
    });
    ranked
}

/// Where a program ran before autopin first moved its threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// Launched with nothing applied: where the OS placed it (also what a report written
    /// before this field says).
    #[default]
    Os,
    /// Launched with its threads pinned at birth: a remembered decision, or a strategy
    /// that starts on its first candidate.
    PinnedAtBirth,
    /// An attached process: where it already ran.
    Attached,
}

/// The report's account of the decision store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryUse {
    /// The store's file.
    pub path: String,
    /// The decision's key id (`autopin memory show KEY`).
    pub key: String,
    /// Whether a remembered decision was found and applied at birth.
    pub hit: bool,
    /// The pinnings the check probed (on a hit).
    pub checked: Vec<String>,
    /// confirmed / overturned / new / unfinished / unchecked / none; disabled (turned off),
    /// skipped (the search was named on the command line, which wins over memory) or
    /// error.
    pub outcome: String,
    /// Why the store was not used (disabled, skipped) or could not be (error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What became of fewer threads tried across runs (docs/threads.md): offered to the
    /// next run, or tried in this one and kept or dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_trial: Option<String>,
    /// On a hit: the CPUs other work kept busy when the remembered decision was taken
    /// (None: the record does not say). Other CPUs in the report's `busy_cpus` made the
    /// check a search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_then: Option<Vec<u32>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRecord {
    pub index: usize,
    pub label: String,
    pub cpus: Option<Vec<u32>>,
    /// The team size the program's OpenMP regions run with under it (None: its own count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<usize>,
}

impl CandidateRecord {
    pub fn from(index: usize, c: &Pinning) -> Self {
        CandidateRecord {
            index,
            label: c.label.clone(),
            cpus: c.cpu_list().map(<[u32]>::to_vec),
            team: c.team,
        }
    }
}

impl ThreadCount {
    /// One line for the run's summary.
    pub fn summary(&self) -> String {
        let own = self
            .own
            .map(|n| format!(" (the program's own count: {n})"))
            .unwrap_or_default();
        let line = match (self.searched.as_str(), &self.trial) {
            ("mid-run", _) => format!("thread count: searched mid-run{own}; {}", self.why),
            ("across runs", Some(t)) => format!(
                "thread count: kept in this run{own}: {}; the next run starts with {} to try",
                self.why, t.label
            ),
            // (fewer were tried from an earlier run's start, and dropped)
            ("across runs", None) => format!("thread count: kept{own}: {}", self.why),
            _ => format!("thread count: not searched{own}: {}", self.why),
        };
        match self.released {
            Some(k) => format!(
                "{line} (the remembered {k} thread(s), chosen beside CPUs busy with other work, were let go: those CPUs are free now)"
            ),
            None => line,
        }
    }
}

/// What the run did with the program's thread count (`--threads`, docs/threads.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCount {
    /// The team size the program's OpenMP regions get on their own, when seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<usize>,
    /// The largest team size the program named itself (omp_set_num_threads, num_threads
    /// clauses), when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named: Option<usize>,
    /// How fewer threads were searched: `mid-run` (team candidates in the search),
    /// `across runs` (the program may notice a smaller team: the next run starts with
    /// `trial`), or `no`.
    pub searched: String,
    /// Why, in words.
    pub why: String,
    /// The team candidate the next run starts with to try, from memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<CandidateRecord>,
    /// A smaller team remembered from runs beside CPUs busy with other work that this run
    /// let go (those CPUs are free now): the program started with its own count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<usize>,
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Timeline as CSV: t,rate,candidate,label,state.
    pub fn timeline_csv(&self) -> String {
        let mut s = String::from("t,rate,candidate,label,state\n");
        for p in &self.timeline {
            let (idx, label) = match p.candidate {
                Some(i) => (
                    i.to_string(),
                    self.candidates
                        .get(i)
                        .map(|c| c.label.clone())
                        .unwrap_or_default(),
                ),
                None => (String::new(), String::new()),
            };
            s.push_str(&format!(
                "{:.3},{:.6e},{},\"{}\",{}\n",
                p.t, p.rate, idx, label, p.state
            ));
        }
        s
    }

    pub fn from_json(text: &str) -> Result<Report, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The outcome for a person: the objective and why, then per program phase the winner,
    /// its rate and its margin over the next best candidate, then the final pinning (or why
    /// the search is incomplete).
    pub fn summary_lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "objective: {} ({})",
            self.objective.name, self.objective.reason
        )];
        // The last decision of each phase, in the order phases were first decided.
        let mut last: Vec<&DecisionRecord> = Vec::new();
        for d in &self.decisions {
            match last.iter_mut().find(|x| x.phase == d.phase) {
                Some(x) => *x = d,
                None => last.push(d),
            }
        }
        for d in &last {
            let phase = d
                .phase
                .as_ref()
                .map(|p| format!(" for phase {p}"))
                .unwrap_or_default();
            let rate = d
                .rate
                .map(|v| format!(", {}", autopin_human::quantity(v, &self.objective.unit)))
                .unwrap_or_default();
            let vs = d
                .margin_text()
                .map(|m| format!("; {m}"))
                .unwrap_or_default();
            out.push(format!(
                "winner{phase}: {}{rate}{vs} ({})",
                d.candidate, d.reason
            ));
        }
        if let Some(c) = &self.objective_check {
            out.push(format!(
                "objective check against the program's {} over {} probes: {}",
                c.progress, c.tracking.probes, c.tracking.verdict
            ));
        }
        if let Some(t) = &self.threads {
            out.push(t.summary());
        }
        if let Some(m) = &self.memory {
            match (m.outcome.as_str(), &m.error) {
                ("skipped", Some(why)) => out.push(format!("remembered decisions not used: {why}")),
                ("confirmed", _) if m.hit => out.push(
                    "remembered decision applied at birth and confirmed by its check".into(),
                ),
                ("overturned", _) if m.hit => out.push(
                    "remembered decision applied at birth and overturned: its check found it no longer the best, and the search's decision replaces it".into(),
                ),
                ("unchecked", _) if m.hit => out.push(
                    "remembered decision applied at birth; not checked: the program ended before its check could measure it".into(),
                ),
                _ => {}
            }
        }
        let cpus = |d: &DecisionRecord| {
            d.cpus
                .as_ref()
                .map(|c| format!(" (threads → CPUs {})", autopin_placement::cpu_text(c)))
                .unwrap_or_default()
        };
        let phased: Vec<&&DecisionRecord> = last.iter().filter(|d| d.phase.is_some()).collect();
        if let Some(b) = &self.own_binding {
            out.push(format!("final pinning: the program's own binding ({b})"));
        } else if phased.len() > 1 {
            // Each phase runs with its own pinning: the one in force at the end is one of
            // them.
            let each: Vec<String> = phased
                .iter()
                .map(|d| {
                    format!(
                        "{} {}{}",
                        d.phase.as_deref().unwrap_or_default(),
                        d.candidate,
                        cpus(d)
                    )
                })
                .collect();
            out.push(format!("final pinning per phase: {}", each.join("; ")));
        } else if let Some(d) = &self.decision {
            out.push(format!(
                "final pinning: {}{}{}",
                d.candidate,
                cpus(d),
                self.not_applied
                    .as_ref()
                    .map(|why| format!(", not in force: {why}"))
                    .unwrap_or_default()
            ));
        } else if let Some(reason) = &self.incomplete_reason {
            out.push(format!("search incomplete: {reason}"));
        }
        out
    }
}

/// For `skip_serializing_if`: a count of none is left out of the JSON.
fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_objective_check_is_in_the_summary() {
        let r = Report {
            objective_check: Some(ObjectiveCheck {
                progress: "heartbeat".into(),
                tracking: autopin_objective::tracking(
                    &[(1.0, 10.0), (2.0, 21.0), (3.0, 29.0)],
                    true,
                )
                .unwrap(),
            }),
            ..Report::default()
        };
        let lines = r.summary_lines();
        let line = lines
            .iter()
            .find(|l| {
                l.starts_with("objective check against the program's heartbeat over 3 probes: ")
            })
            .unwrap_or_else(|| panic!("{lines:?}"));
        assert!(line.len() > 70, "{line}");
        // `autopin report FILE` shows it too.
        let text = view::summary(&r);
        assert!(
            text.contains("objective check: against the program's heartbeat over 3 probes: "),
            "{text}"
        );
    }

    /// What became of a remembered decision reads as a sentence ("applied at birth and
    /// checked: unchecked" said nothing of why).
    #[test]
    fn the_summary_says_what_became_of_a_remembered_decision() {
        let line = |outcome: &str| {
            let r = Report {
                memory: Some(MemoryUse {
                    hit: true,
                    outcome: outcome.into(),
                    ..MemoryUse::default()
                }),
                ..Report::default()
            };
            r.summary_lines()
                .into_iter()
                .find(|l| l.starts_with("remembered decision applied at birth"))
                .unwrap_or_else(|| panic!("{outcome}: {:?}", r.summary_lines()))
        };
        assert!(line("confirmed").ends_with("confirmed by its check"));
        assert!(line("overturned").contains("overturned: its check found it no longer the best"));
        assert!(line("unchecked").contains("not checked: the program ended before its check"));
    }

    /// How the objective was measured is said in words: "counting none" read as "nothing
    /// was measured".
    #[test]
    fn the_summary_says_how_the_objective_was_measured_in_words() {
        let r = Report {
            counting_mode: "none".into(),
            ..Report::default()
        };
        let text = view::summary(&r);
        assert!(
            text.contains("measured with no perf counters (the program's own progress is read)")
                && !text.contains("counting none"),
            "{text}"
        );
    }
}
