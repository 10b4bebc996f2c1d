//! What a run does with its remembered decision, beside the store: [`recall`] turns a
//! record into the plan's check (or into the start of a team trial), and [`settle`] turns the
//! run's report into the record to keep and says in the report what became of it. The
//! `autopin` binary only opens the store, reads and writes the record, and prints.

use crate::{
    DecisionKey, Outcome, PhaseDecision, Record, RememberedPinning, TeamTrial, TrialState,
};
use autopin_engine::report::{DecisionRecord, MemoryUse, Report};
use autopin_engine::run::{
    busy_text, ObjectiveSource, Remembered, RememberedPhase, RunPlan, ThreadsChoice,
};
use autopin_placement::Pinning;
use autopin_topology::CpuSet;

/// Whether the record is one autopin could have written and every CPU it names is one this
/// run may use (`allowed`); why not, as a warning to say. (A record of this key was
/// decided on these CPUs, but an imported or edited one may name any: one with `1,1` under
/// `taskset -c 0` moved the threads to CPU 1.)
pub fn fits(r: &Record, allowed: &CpuSet) -> Result<(), String> {
    if let Err(why) = r.check() {
        return Err(format!("warning: the remembered decision is not one autopin writes ({why}): it is not applied, and this run searches afresh"));
    }
    let pinnings = std::iter::once(&r.pinning)
        .chain(r.runner_up.as_ref())
        .chain(r.phases.iter().map(|p| &p.pinning));
    for p in pinnings {
        if let Some(cpu) = p.cpus.iter().flatten().find(|c| !allowed.contains(**c)) {
            return Err(format!(
                "warning: the remembered pinning {} uses CPU {cpu}, which this run may not use (allowed: {allowed}): it is not applied, and this run searches afresh",
                p.label
            ));
        }
    }
    Ok(())
}

/// Whether this run tries the record's pending team trial (fewer threads from its start;
/// docs/threads.md): only where the count may change (`--threads auto`).
pub fn tries_trial(r: &Record, plan: &RunPlan) -> bool {
    plan.threads == ThreadsChoice::Auto
        && r.team_trial
            .as_ref()
            .is_some_and(|t| t.state == TrialState::Pending)
}

/// The plan's remembered decision for record `r` (`trying`: its team trial instead), and
/// the lines that tell the user.
pub fn recall(r: &Record, trying: bool) -> (Remembered, Vec<String>) {
    if let Some(t) = r.team_trial.as_ref().filter(|_| trying) {
        // Fewer threads, tried from the start: the program cannot be shown a smaller team
        // mid-run (docs/threads.md). It is judged as any start is, not checked against the
        // record's rate, which the program's own count ran at.
        let line = format!(
            "remembered: {} with the program's own count (decided {} time(s) before); this run tries {} from its start, as the last run could not change the count mid-run",
            r.pinning.label, r.uses, t.pinning.label
        );
        let rem = Remembered {
            pinning: to_pinning(&t.pinning),
            runner_up: None,
            settled: false,
            // Not a check's reference (an unsettled start is not checked): its unit keeps the
            // run on the team-free objective the record was measured with.
            rate: r.rate.map(|v| (v, r.unit.clone())),
            phases: Vec::new(),
            objective: r.source.as_deref().and_then(ObjectiveSource::from_name),
            busy: r.busy.clone(),
        };
        return (rem, vec![line]);
    }
    let mut lines = vec![format!(
        "remembered: {} (decided {} time(s) before, last {}{}); applied at birth and checked against the OS placement{}",
        r.pinning.label,
        r.uses,
        r.outcome.as_str(),
        r.busy
            .as_deref()
            .map(|b| format!(", {} busy with other work then", busy_text(b)))
            .unwrap_or_default(),
        // (a runner-up that is the OS placement is named once)
        r.runner_up
            .as_ref()
            .filter(|u| u.cpus.is_some())
            .map(|u| format!(" and {}", u.label))
            .unwrap_or_default()
    )];
    if !r.phases.is_empty() {
        let each: Vec<String> = r
            .phases
            .iter()
            .map(|p| format!("{} {}", p.phase, p.pinning.label))
            .collect();
        lines.push(format!(
            "remembered per phase: {}; each applies when its phase comes",
            each.join(", ")
        ));
    }
    let rem = Remembered {
        pinning: to_pinning(&r.pinning),
        runner_up: r.runner_up.as_ref().map(to_pinning),
        settled: r.outcome != Outcome::Unfinished,
        rate: r.rate.map(|v| (v, r.unit.clone())),
        phases: r
            .phases
            .iter()
            .map(|p| RememberedPhase {
                phase: p.phase.clone(),
                pinning: to_pinning(&p.pinning),
                rate: p.rate,
            })
            .collect(),
        objective: r.source.as_deref().and_then(ObjectiveSource::from_name),
        busy: r.busy.clone(),
    };
    (rem, lines)
}

/// What the run decided, as the record to keep under `key` (None: nothing to write, and
/// `use_.outcome` says why). `found`: the record the run started from, `trying`: it tried
/// its team trial. Fills `use_`'s outcome and team trial, and notes in the report's
/// decision what became of a remembered one; `now`: the Unix time.
pub fn settle(
    found: Option<&Record>,
    key: DecisionKey,
    trying: bool,
    report: &mut Report,
    use_: &mut MemoryUse,
    now: f64,
) -> Option<Record> {
    // What to remember: the decision; or, when the program ended during a search of its
    // own (nothing remembered, or only an earlier search's best so far, which is searched
    // from and not checked), the best so far.
    let chosen = match (&report.decision, found) {
        (Some(d), _) => Some((d.candidate.clone(), d.runner_up.clone(), d.rate, false)),
        (None, found)
            if report.own_binding.is_none()
                && found
                    .as_ref()
                    .is_none_or(|r| r.outcome == Outcome::Unfinished) =>
        {
            best_so_far(report).map(|(best, next, rate)| (best, next, Some(rate), true))
        }
        (None, _) => None,
    };
    let Some((label, runner_up_label, rate, unfinished)) = chosen else {
        // Nothing to remember (no probe, autopin stood back, or a check the program's
        // end cut short): the record stays as it was.
        use_.outcome = if use_.hit { "unchecked" } else { "none" }.into();
        return None;
    };
    let pinning = remembered(report, label);
    let runner_up = runner_up_label.map(|label| remembered(report, label));
    let phases = phase_decisions(report, found);
    let outcome = outcome_of(found, &pinning, &phases, unfinished);
    // Confirmed by its first probe alone (it ran at its remembered rate), nothing else
    // was measured: the runner-up and the rate to hold it to next time stay as they were,
    // so a slow decline cannot creep in a band's width at a time.
    let (runner_up, rate) = match found {
        Some(r) if outcome == Outcome::Confirmed && runner_up.is_none() => {
            (r.runner_up.clone(), r.rate.or(rate))
        }
        _ => (runner_up, rate),
    };
    // The CPUs busy now; a run that did not watch them (candidates the user named) keeps
    // what a confirmed record knew.
    let busy = report.busy_cpus.clone().or_else(|| {
        found
            .filter(|_| outcome == Outcome::Confirmed)
            .and_then(|r| r.busy.clone())
    });
    let mut record = Record {
        id: key.id(),
        key,
        pinning,
        runner_up,
        rate,
        unit: report.objective.unit.clone(),
        outcome,
        uses: found.map_or(1, |r| r.uses + 1),
        created: found.map_or(now, |r| r.created),
        updated: now,
        phases,
        source: Some(report.objective.source.clone()).filter(|s| !s.is_empty()),
        busy,
        team_trial: found.and_then(|r| r.team_trial.clone()),
    };
    use_.team_trial = if trying {
        found.map(|found| settle_trial(found, &mut record, report))
    } else {
        offer_trial(&mut record, report)
    };
    if let Some(d) = report.decision.as_mut() {
        match outcome {
            // A phase's remembered pinning says so itself.
            _ if d.strategy == DecisionRecord::FROM_MEMORY => {}
            Outcome::Confirmed => {
                d.reason = format!("remembered from an earlier run and confirmed: {}", d.reason)
            }
            Outcome::Overturned => {
                d.reason = format!(
                    "the remembered {} was overturned: {}",
                    found.map_or("", |r| r.pinning.label.as_str()),
                    d.reason
                )
            }
            Outcome::New | Outcome::Unfinished => {}
        }
    }
    use_.outcome = outcome.as_str().into();
    Some(record)
}

/// What became of the record: `unfinished` when this run's search ended without a decision
/// (`pinning` is then its best so far).
fn outcome_of(
    found: Option<&Record>,
    pinning: &RememberedPinning,
    phases: &[PhaseDecision],
    unfinished: bool,
) -> Outcome {
    match found {
        // A program too short for a whole search: when a second search, started on the
        // first one's best so far, ends leaning to the same pinning, two runs agree and the
        // decision is settled (the next run checks it instead of searching again, which such
        // a program never finishes).
        Some(r)
            if unfinished && r.outcome == Outcome::Unfinished && r.pinning.cpus == pinning.cpus =>
        {
            Outcome::Confirmed
        }
        _ if unfinished => Outcome::Unfinished,
        Some(r) if r.pinning.cpus == pinning.cpus && same_phases(&r.phases, phases) => {
            Outcome::Confirmed
        }
        Some(_) => Outcome::Overturned,
        None => Outcome::New,
    }
}

/// The best and the next best candidate of the search the program's end cut short, by mean
/// probe rate, with the best's mean: what it would have leaned to. None before two
/// candidates were probed.
fn best_so_far(report: &Report) -> Option<(String, Option<String>, f64)> {
    let search = report.probes.last()?.search;
    let ranked = autopin_engine::report::ranked_by_mean(
        &report.probes,
        search,
        report.objective.higher_is_better,
    );
    if ranked.len() < 2 {
        return None;
    }
    let mut it = ranked.into_iter();
    let (best, rate) = it.next()?;
    Some((best, it.next().map(|(l, _)| l), rate))
}

/// The report's candidate `label` as the store keeps it, with its CPUs and team size.
fn remembered(report: &Report, label: String) -> RememberedPinning {
    let c = report.candidates.iter().find(|c| c.label == label);
    RememberedPinning {
        cpus: c.and_then(|c| c.cpus.clone()),
        team: c.and_then(|c| c.team),
        label,
    }
}

/// The least margin a team trial must run above the record's rate (the program's own count)
/// to be kept: a count change stays for every later run, and two runs' rates differ by
/// more than one run's probes do.
const TRIAL_MARGIN: f64 = 0.05;

/// A run that tried fewer threads from its start: kept when its decided rate beat the
/// record's (the program's own count, the same team-free unit) by `TRIAL_MARGIN`, else
/// dropped and the record's pinning and rate stay. Returns the report's words for it.
fn settle_trial(found: &Record, record: &mut Record, report: &Report) -> String {
    let Some(mut trial) = found.team_trial.clone() else {
        return String::new();
    };
    let team = trial.pinning.team;
    // A program that failed with fewer threads keeps its count, whatever its rate.
    let failed = report.exit_status.filter(|c| *c != 0);
    let ran = report
        .decision
        .as_ref()
        .and_then(|d| d.rate)
        .filter(|_| failed.is_none());
    let comparable = found.unit == report.objective.unit;
    let ratio = match (ran, found.rate) {
        (Some(a), Some(b)) if comparable && b > 0.0 => Some(a / b),
        _ => None,
    };
    trial.rate = ran;
    let keep_record = |record: &mut Record| {
        record.pinning = found.pinning.clone();
        record.runner_up = found.runner_up.clone();
        record.rate = found.rate;
        record.outcome = Outcome::Confirmed;
    };
    let words = match ratio {
        Some(r) if r >= 1.0 + TRIAL_MARGIN => {
            trial.state = TrialState::Kept;
            // The whole run ran the trial's count: whatever it decided runs with it.
            record.pinning.team = team;
            format!(
                "tried {} from the start: {r:.2}× the rate of the program's own count; kept (later runs start with it)",
                trial.pinning.label
            )
        }
        Some(r) => {
            trial.state = TrialState::Dropped;
            keep_record(record);
            format!(
                "tried {} from the start: {r:.2}× the rate of the program's own count; dropped (later runs keep their count)",
                trial.pinning.label
            )
        }
        None if failed.is_some() => {
            trial.state = TrialState::Dropped;
            keep_record(record);
            format!(
                "tried {} from the start, and the program exited with status {}; dropped (later runs keep their count)",
                trial.pinning.label,
                failed.unwrap_or_default()
            )
        }
        None if !comparable => {
            trial.state = TrialState::Dropped;
            keep_record(record);
            format!(
                "tried {} from the start, but its rate cannot be compared with the record's ({} against {}); dropped",
                trial.pinning.label, report.objective.unit, found.unit
            )
        }
        // No measured rate (the program ended before a decision): the trial stays for the
        // next run, and the record as it was.
        None => {
            keep_record(record);
            record.outcome = found.outcome;
            format!(
                "tried {} from the start, but the run measured no decided rate to compare; the next run tries again",
                trial.pinning.label
            )
        }
    };
    record.team_trial = Some(trial);
    words
}

/// A run whose count could not change mid-run, where fewer threads might run faster:
/// the next run tries them from its start (once; a trial already tried stays as it was).
fn offer_trial(record: &mut Record, report: &Report) -> Option<String> {
    let t = report.threads.as_ref()?;
    let trial = t.trial.as_ref().filter(|_| t.searched == "across runs")?;
    if record.team_trial.is_some() {
        return None;
    }
    record.team_trial = Some(TeamTrial {
        pinning: RememberedPinning {
            label: trial.label.clone(),
            cpus: trial.cpus.clone(),
            team: trial.team,
        },
        state: TrialState::Pending,
        rate: None,
    });
    Some(format!("the next run tries {} from its start", trial.label))
}

/// Each named phase's last decision in this run; a phase this run did not reach keeps what
/// the earlier record had for it.
fn phase_decisions(report: &Report, found: Option<&Record>) -> Vec<PhaseDecision> {
    let mut out: Vec<PhaseDecision> = Vec::new();
    for d in &report.decisions {
        let Some(phase) = &d.phase else { continue };
        let decided = PhaseDecision {
            phase: phase.clone(),
            pinning: remembered(report, d.candidate.clone()),
            rate: d.rate,
        };
        match out.iter_mut().find(|p| p.phase == *phase) {
            Some(p) => *p = decided,
            None => out.push(decided),
        }
    }
    if out.is_empty() {
        return out;
    }
    for old in found.map(|r| r.phases.as_slice()).unwrap_or_default() {
        if !out.iter().any(|p| p.phase == old.phase) {
            out.push(old.clone());
        }
    }
    out
}

/// The same pinning for every phase (rates aside).
fn same_phases(a: &[PhaseDecision], b: &[PhaseDecision]) -> bool {
    a.len() == b.len()
        && a.iter().all(|x| {
            b.iter()
                .any(|y| y.phase == x.phase && y.pinning.cpus == x.pinning.cpus)
        })
}

fn to_pinning(p: &RememberedPinning) -> Pinning {
    let mut pinning = match &p.cpus {
        Some(cpus) => Pinning::pinned(p.label.clone(), cpus.clone()),
        None => Pinning::unpinned(),
    };
    pinning.team = p.team;
    pinning
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinning(cpus: &[u32]) -> RememberedPinning {
        RememberedPinning {
            label: format!("{cpus:?}"),
            cpus: Some(cpus.to_vec()),
            team: None,
        }
    }

    fn record(cpus: &[u32], outcome: Outcome) -> Record {
        Record {
            id: "k".into(),
            key: DecisionKey {
                program: "/bin/p".into(),
                program_id: "x".into(),
                args: None,
                machine: "m".into(),
                cpus: "0-1".into(),
                threads: "2".into(),
                objective: "default".into(),
                share: None,
            },
            pinning: pinning(cpus),
            runner_up: None,
            rate: Some(1.0),
            unit: "u/s".into(),
            outcome,
            uses: 1,
            created: 0.0,
            updated: 0.0,
            phases: Vec::new(),
            source: None,
            busy: None,
            team_trial: None,
        }
    }

    /// A report of a run that decided `label` (team `team`) at `rate`, in `unit`, whose
    /// count could not change mid-run when `trial` is given.
    fn report(
        label: &str,
        team: Option<usize>,
        rate: f64,
        unit: &str,
        trial: Option<autopin_engine::report::CandidateRecord>,
    ) -> Report {
        use autopin_engine::report::{CandidateRecord, ThreadCount};
        let mut r = Report::default();
        r.objective.unit = unit.into();
        r.candidates.push(CandidateRecord {
            index: 0,
            label: label.into(),
            cpus: Some(vec![1]),
            team,
        });
        r.decision = Some(DecisionRecord {
            search: 0,
            at: 1.0,
            candidate: label.into(),
            candidate_index: 0,
            cpus: Some(vec![1]),
            rate: Some(rate),
            runner_up: None,
            runner_up_rate: None,
            margin: None,
            margin_ci: None,
            reason: String::new(),
            strategy: "race".into(),
            phase: None,
            team,
            search_cost: None,
        });
        r.threads = Some(ThreadCount {
            own: Some(2),
            searched: if trial.is_some() { "across runs" } else { "no" }.into(),
            why: String::new(),
            trial,
        });
        r
    }

    fn trial_candidate() -> autopin_engine::report::CandidateRecord {
        autopin_engine::report::CandidateRecord {
            index: 0,
            label: "1 thread: 1".into(),
            cpus: Some(vec![1]),
            team: Some(1),
        }
    }

    #[test]
    fn fewer_threads_are_offered_once_tried_once_and_kept_only_when_faster() {
        const UNIT: &str = "OpenMP team constructs/s";
        // A run that could not change the count mid-run offers the trial to the next.
        let mut rec = record(&[1, 0], Outcome::New);
        let r = report("1,0", None, 100.0, UNIT, Some(trial_candidate()));
        let said = offer_trial(&mut rec, &r).expect("offered");
        assert!(said.contains("the next run tries 1 thread: 1"), "{said}");
        let t = rec.team_trial.clone().expect("a trial");
        assert_eq!((t.state, t.pinning.team), (TrialState::Pending, Some(1)));
        // Offered once: a record that has one keeps it.
        assert_eq!(offer_trial(&mut rec, &r), None);
        // The trial run ran 4× the record's rate: kept, with its count.
        let mut found = rec.clone();
        found.rate = Some(100.0);
        found.unit = UNIT.into();
        let mut next = found.clone();
        let r = report("1 thread: 1", Some(1), 400.0, UNIT, None);
        next.pinning = remembered(&r, "1 thread: 1".into());
        let said = settle_trial(&found, &mut next, &r);
        assert!(said.contains("4.00×") && said.contains("kept"), "{said}");
        assert_eq!(next.pinning.team, Some(1));
        assert_eq!(
            next.team_trial.as_ref().map(|t| t.state),
            Some(TrialState::Kept)
        );
        // At 1.02×: dropped, and the record keeps its pinning, its rate and its count.
        let mut next = found.clone();
        let r = report("1 thread: 1", Some(1), 102.0, UNIT, None);
        next.pinning = remembered(&r, "1 thread: 1".into());
        next.rate = Some(102.0);
        let said = settle_trial(&found, &mut next, &r);
        assert!(said.contains("dropped"), "{said}");
        assert_eq!(
            (next.pinning.clone(), next.rate),
            (found.pinning.clone(), Some(100.0))
        );
        assert_eq!(
            next.team_trial.as_ref().map(|t| t.state),
            Some(TrialState::Dropped)
        );
        // A program that failed with fewer threads keeps its count, whatever its rate.
        let mut next = found.clone();
        let mut r = report("1 thread: 1", Some(1), 400.0, UNIT, None);
        r.exit_status = Some(1);
        let said = settle_trial(&found, &mut next, &r);
        assert!(said.contains("exited with status 1"), "{said}");
        assert_eq!(
            next.team_trial.as_ref().map(|t| t.state),
            Some(TrialState::Dropped)
        );
        // Rates in other units cannot be compared: dropped, and said so.
        let mut next = found.clone();
        let r = report("1 thread: 1", Some(1), 400.0, "OpenMP constructs/s", None);
        assert!(settle_trial(&found, &mut next, &r).contains("cannot be compared"));
    }

    #[test]
    fn two_unfinished_searches_that_lean_the_same_way_settle_the_decision() {
        let earlier = record(&[1, 0], Outcome::Unfinished);
        // The second short run's search ended leaning to the same pinning: settled.
        assert_eq!(
            outcome_of(Some(&earlier), &pinning(&[1, 0]), &[], true),
            Outcome::Confirmed
        );
        // Leaning elsewhere: still unfinished (the next run searches from the new best).
        assert_eq!(
            outcome_of(Some(&earlier), &pinning(&[0, 1]), &[], true),
            Outcome::Unfinished
        );
        // A first search cut short, and a settled record a search cut short did not check.
        assert_eq!(
            outcome_of(None, &pinning(&[1, 0]), &[], true),
            Outcome::Unfinished
        );
        let settled = record(&[1, 0], Outcome::Confirmed);
        assert_eq!(
            outcome_of(Some(&settled), &pinning(&[1, 0]), &[], false),
            Outcome::Confirmed
        );
        assert_eq!(
            outcome_of(Some(&settled), &pinning(&[0, 1]), &[], false),
            Outcome::Overturned
        );
        assert_eq!(
            outcome_of(None, &pinning(&[0, 1]), &[], false),
            Outcome::New
        );
    }
}
