//! What a run does with its remembered decision, beside the store: [`recall`] turns a
//! record into the plan's check (or into the start of a team trial), and [`settle`] turns the
//! run's report into the record to keep and says in the report what became of it. The
//! `autopin` binary only opens the store, reads and writes the record, and prints.

use crate::{
    DecisionKey, Outcome, PhaseDecision, Record, RememberedPinning, TeamTrial, TrialState, WholeRun,
};
use autopin_engine::report::{DecisionRecord, MemoryUse, Report};
use autopin_engine::run::{busy_text, ObjectiveSource, Remembered, RememberedPhase, ThreadsChoice};
use autopin_placement::Pinning;
use autopin_topology::CpuSet;

/// Why a remembered decision is not applied in this run ([`fits`]): its words are the
/// warning to say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("warning: the remembered decision is not one autopin writes ({0}): it is not applied, and this run searches afresh")]
    NotOurs(crate::InvalidRecord),
    #[error("warning: the remembered pinning {label} uses CPU {cpu}, which this run may not use (allowed: {allowed}): it is not applied, and this run searches afresh")]
    CpuNotAllowed {
        label: String,
        cpu: u32,
        allowed: String,
    },
}

/// Whether the record is one autopin could have written and every CPU it names is one this
/// run may use (`allowed`); why not. (A record of this key was decided on these CPUs, but
/// an imported or edited one may name any: one with `1,1` under `taskset -c 0` moved the
/// threads to CPU 1.)
pub fn fits(r: &Record, allowed: &CpuSet) -> Result<(), Unfit> {
    r.check().map_err(Unfit::NotOurs)?;
    let pinnings = std::iter::once(&r.pinning)
        .chain(r.runner_up.as_ref())
        .chain(r.phases.iter().map(|p| &p.pinning));
    for p in pinnings {
        if let Some(cpu) = p.cpus.iter().flatten().find(|c| !allowed.contains(**c)) {
            return Err(Unfit::CpuNotAllowed {
                label: p.label.clone(),
                cpu: *cpu,
                allowed: allowed.to_string(),
            });
        }
    }
    Ok(())
}

/// Whether the record holds no pinning of its own: the OS placement `first_trial` writes
/// to carry a team trial for a program that ended before any probe (unfinished, no rate, no
/// runner-up). Once its trial is settled (dropped), applying it would start every later run
/// where the OS places the program and "confirm" it with no probe, as the only candidate
/// (gettext's msgmerge beside a busy CPU 0: 2.66 s a run from then on, against 2.39 s for
/// a first run, born off the busy CPU and searched). Such a record is not applied: the run
/// searches as a first run, and the record keeps what it knows of the count.
pub fn holds_no_pinning(r: &Record) -> bool {
    r.outcome == Outcome::Unfinished
        && r.pinning.cpus.is_none()
        && r.pinning.team.is_none()
        && r.rate.is_none()
        && r.runner_up.is_none()
        && r.phases.is_empty()
}

/// Whether this run tries the record's pending team trial (fewer threads from its start;
/// docs/threads.md): only where the count may change (`--threads auto`).
pub fn tries_trial(r: &Record, threads: &ThreadsChoice) -> bool {
    *threads == ThreadsChoice::Auto
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
        // record's rate, which the program's own count ran at. (A recheck, the other way
        // round: the program's own count again, against the kept smaller count's rate.)
        let line = if t.rechecks_own_count() {
            format!(
                "remembered: {} ({} thread(s), decided {} time(s) before), whose rate has fallen well below the rate the count was kept at; this run rechecks the program's own count from its start",
                r.pinning.label,
                r.pinning.team.unwrap_or_default(),
                r.uses
            )
        } else {
            format!(
                "remembered: {} with the program's own count (decided {} time(s) before); this run tries {} from its start, as the last run could not change the count mid-run",
                r.pinning.label, r.uses, t.pinning.label
            )
        };
        let rem = Remembered {
            pinning: to_pinning(&t.pinning),
            runner_up: None,
            settled: false,
            trying_team: true,
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
        trying_team: false,
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
    // A smaller team the run let go (the busy CPUs it was chosen beside are free now) is
    // neither tried nor kept, and its trial goes with it: judged beside those CPUs, it says
    // nothing of this machine, and a later run beside busy CPUs may offer it again.
    let released = report
        .threads
        .as_ref()
        .is_some_and(|t| t.released.is_some());
    let trying = trying && !released;
    if let Some(t) = found.and_then(|r| r.team_trial.as_ref()) {
        say_a_dropped_trial(t, report, use_);
    }
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
        // Nothing measured to remember (no probe, autopin stood back, or a check the
        // program's end cut short): the record stays as it was, but a team trial is
        // judged by its whole run where it can be.
        use_.outcome = if use_.hit { "unchecked" } else { "none" }.into();
        if found.is_none() {
            return first_trial(key, report, use_, now);
        }
        let found = found.filter(|_| trying)?;
        let trial = found.team_trial.as_ref()?;
        let mut record = found.clone();
        record.pinning = trial.pinning.clone();
        use_.team_trial = Some(settle_trial(found, &mut record, report));
        let judged = record.team_trial.as_ref().map(|t| t.state) != Some(TrialState::Pending);
        if !judged {
            return None;
        }
        record.uses += 1;
        record.updated = now;
        return Some(record);
    };
    // A run that started with a remembered count (a kept team trial) ran every candidate
    // with it: what it decided keeps that count, unless it decided another.
    let run_team = found
        .filter(|_| !trying && !released)
        .and_then(|r| r.pinning.team)
        .filter(|_| use_.hit);
    let with_run_team = |mut p: RememberedPinning| {
        p.team = p.team.or(run_team);
        p
    };
    let pinning = with_run_team(remembered(report, label));
    let runner_up = runner_up_label.map(|label| with_run_team(remembered(report, label)));
    let mut phases = phase_decisions(report, found);
    if released {
        // A phase's smaller team kept from before goes with the record's: chosen beside
        // CPUs that are free now, it would shrink the team when its phase came.
        let decided = decided_phases(report);
        phases.retain(|p| p.pinning.team.is_none() || decided.contains(&p.phase.as_str()));
    }
    for p in &mut phases {
        p.pinning.team = p.pinning.team.or(run_team);
    }
    // (a record holding no pinning was not applied: nothing of it to confirm or overturn)
    let remembered = found.filter(|r| !holds_no_pinning(r));
    let outcome = outcome_of(remembered, &pinning, &phases, unfinished);
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
        team_trial: found
            .filter(|_| !released)
            .and_then(|r| r.team_trial.clone()),
    };
    let said = if trying {
        found.map(|found| settle_trial(found, &mut record, report))
    } else {
        offer_trial(&mut record, report)
            .or_else(|| offer_recheck(found, run_team, &mut record, report))
    };
    // (else what `say_a_dropped_trial` said, if it did)
    use_.team_trial = said.or(use_.team_trial.take());
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

/// How much slower than the run that offered it a trial's whole run may be and still be
/// kept, where whole runs are compared (a program that names its own count). A trial is
/// offered where the program's own count crowds its CPUs (a thread on a CPU busy with other
/// work, or on an SMT sibling); beside a busy CPU the own count's runs swing far more than
/// runs at the fewer count do
/// (GROMACS beside a busy CPU 0, 8 rounds of 6000 steps: 7.7–11.6 s pinned `1,0`, 7.1–8.1 s
/// on one thread): one run of each then tells the counts apart only where the fewer count
/// is clearly slower. A trial dropped at 0.92× (8.48 s against a 7.83 s run of two threads
/// whose median was 9.2 s) left every later run 1.26× slower than one thread.
const WHOLE_RUN_TOLERANCE: f64 = 0.10;

/// How far below the rate it is held to a kept smaller count's run may decide before the
/// next run rechecks the program's own count: the count was chosen beside the CPUs busy
/// then, and a rate this far down says the machine is not what it was. (A change of the
/// busy CPUs themselves lets the count go at the launch, without a recheck.)
const RECHECK_BELOW: f64 = 0.75;

/// A run that started with a kept smaller count `run_team` (the check of a kept count,
/// docs/threads.md): its rate is held to the rate the count was kept at (the kept trial's;
/// after a dropped recheck, the rate that called it; with no trial, the record's). Fallen
/// below `RECHECK_BELOW` of it, the next run starts with the program's own count again
/// (a recheck: a pending trial without a team size), judged against this run.
fn offer_recheck(
    found: Option<&Record>,
    run_team: Option<usize>,
    record: &mut Record,
    report: &Report,
) -> Option<String> {
    let (found, k) = (found?, run_team?);
    let trial = found.team_trial.as_ref();
    if trial.is_some_and(|t| t.state == TrialState::Pending)
        || report.exit_status != Some(0)
        || !report.objective.higher_is_better
        || found.unit != report.objective.unit
    {
        return None;
    }
    let ran = report.decision.as_ref()?.rate?;
    let held_to = match trial {
        Some(t) if t.rechecks_own_count() => t.held_to,
        Some(t) if t.state == TrialState::Kept => t.rate.or(found.rate),
        _ => found.rate,
    }
    .filter(|r| *r > 0.0)?;
    let ratio = ran / held_to;
    if ratio >= RECHECK_BELOW {
        return None;
    }
    record.rate = Some(ran);
    record.team_trial = Some(TeamTrial {
        pinning: os_placement(),
        state: TrialState::Pending,
        rate: None,
        baseline: whole_run_of(report),
        held_to: Some(ran),
    });
    Some(format!(
        "{k} thread(s) ran at {ratio:.2}× the rate they are held to ({ran:.4} against {held_to:.4} {}): the next run rechecks the program's own count from its start",
        report.objective.unit
    ))
}

/// A run that tried fewer threads from its start: kept when it beat the program's own
/// count by `TRIAL_MARGIN` (judged by whole runs: unless it ran more than
/// `WHOLE_RUN_TOLERANCE` slower), else dropped and the record's pinning and rate stay. Its decided
/// rate is compared with the record's (the same team-free unit); the whole run with the
/// run that offered the trial (the same command) where rates cannot be: a program that
/// names its own count (GROMACS runs fewer parallel regions per step with one thread), or
/// a run that decided no rate. A recheck (the program's own count again, against a kept
/// smaller count) is judged the same way round, but the own count must win outright: by
/// `TRIAL_MARGIN`, or by `WHOLE_RUN_TOLERANCE` where whole runs are compared (its runs
/// beside busy CPUs swing the most). Returns the report's words for it.
fn settle_trial(found: &Record, record: &mut Record, report: &Report) -> String {
    let Some(mut trial) = found.team_trial.clone() else {
        return String::new();
    };
    let team = trial.pinning.team;
    let recheck = trial.rechecks_own_count();
    // A program that failed with fewer threads keeps its count, whatever its rate.
    let failed = report.exit_status.filter(|c| *c != 0);
    let ran = report
        .decision
        .as_ref()
        .and_then(|d| d.rate)
        .filter(|_| failed.is_none());
    let comparable = found.unit == report.objective.unit;
    let names_its_count = report.threads.as_ref().is_some_and(|t| t.named.is_some());
    let by_rate = match (ran, found.rate) {
        (Some(a), Some(b)) if comparable && b > 0.0 && !names_its_count => Some(a / b),
        _ => None,
    };
    let this_run = WholeRun::of(report.wall_time, &report.command);
    let whole_runs = trial
        .baseline
        .as_ref()
        .filter(|_| by_rate.is_none() && failed.is_none())
        .filter(|b| b.command == this_run.command && this_run.seconds > 0.0);
    let ratio = by_rate.or_else(|| whole_runs.map(|b| b.seconds / this_run.seconds));
    let by_whole_runs = by_rate.is_none() && whole_runs.is_some();
    // The words for each way round.
    let (tried, against, kept, dropped, again) = if recheck {
        let k = found.pinning.team.unwrap_or_default();
        (
            "rechecked the program's own count".to_string(),
            format!("the kept {k} thread(s)"),
            "the program's own count is back (later runs start with it)",
            "the kept count stays",
            "the next run rechecks again",
        )
    } else {
        (
            format!("tried {}", trial.pinning.label),
            "the program's own count".to_string(),
            "kept (later runs start with it)",
            "dropped (later runs keep their count)",
            "the next run tries again",
        )
    };
    let measure = match whole_runs.filter(|_| by_rate.is_none()) {
        Some(b) => format!(
            "the run took {:.2} s against {:.2} s at {against}",
            this_run.seconds, b.seconds
        ),
        None => format!("its rate against {against}"),
    };
    trial.rate = ran;
    let keep_record = |record: &mut Record| {
        record.pinning = found.pinning.clone();
        record.runner_up = found.runner_up.clone();
        record.rate = found.rate;
        // (phases this run decided ran at the trial's count)
        record.phases = found.phases.clone();
        // (a record that measured nothing yet confirms nothing)
        record.outcome = if found.outcome == Outcome::Unfinished {
            Outcome::Unfinished
        } else {
            Outcome::Confirmed
        };
    };
    // A program that names its own count and did not take the trial's from OMP_NUM_THREADS
    // ran more threads than the trial's CPUs: its rate says nothing of fewer threads.
    let ran_more = report
        .threads
        .as_ref()
        .and_then(|t| t.named)
        .zip(team)
        .filter(|(ran, team)| ran > team)
        .map(|(ran, _)| ran);
    let wins = |r: f64| match (recheck, by_whole_runs) {
        (false, true) => r >= 1.0 - WHOLE_RUN_TOLERANCE,
        (true, true) => r >= 1.0 + WHOLE_RUN_TOLERANCE,
        (_, false) => r >= 1.0 + TRIAL_MARGIN,
    };
    let (state, words) = match ratio {
        _ if ran_more.is_some() => (
            TrialState::Dropped,
            format!(
                "{tried} from the start, but the program ran {} threads (it names its count itself, not from OMP_NUM_THREADS); {dropped}",
                ran_more.unwrap_or_default()
            ),
        ),
        Some(r) if wins(r) => (
            TrialState::Kept,
            format!("{tried} from the start: {r:.2}× the speed of {against} ({measure}); {kept}"),
        ),
        Some(r) => (
            TrialState::Dropped,
            format!("{tried} from the start: {r:.2}× the speed of {against} ({measure}); {dropped}"),
        ),
        None if failed.is_some() => (
            TrialState::Dropped,
            format!(
                "{tried} from the start, and the program exited with status {}; {dropped}",
                failed.unwrap_or_default()
            ),
        ),
        None if names_its_count => (
            TrialState::Dropped,
            format!(
                "{tried} from the start, but the program names its own count and this run cannot be compared with the one that called it (another command, or no such run kept); {dropped}"
            ),
        ),
        None if !comparable => (
            TrialState::Dropped,
            format!(
                "{tried} from the start, but its rate cannot be compared with the record's ({} against {}); {dropped}",
                report.objective.unit, found.unit
            ),
        ),
        // No measured rate (the program ended before a decision): the trial stays for the
        // next run, and the record as it was.
        None => (
            TrialState::Pending,
            format!("{tried} from the start, but the run measured no decided rate to compare; {again}"),
        ),
    };
    match state {
        // The whole run ran the trial's count: whatever it decided runs with it. A phase's
        // pinning decided at the other count is let go: applied when its phase came, it
        // put the program's threads back on two-thread CPUs under a one-thread record, and
        // the record read "overturned" by a decision no search had made (syncbench: its
        // barrier phase's `1,0` from the run that offered the trial).
        TrialState::Kept => {
            record.pinning.team = team;
            let decided = decided_phases(report);
            record
                .phases
                .retain(|p| decided.contains(&p.phase.as_str()));
            for p in &mut record.phases {
                p.pinning.team = team;
            }
        }
        TrialState::Dropped => keep_record(record),
        TrialState::Pending => {
            keep_record(record);
            record.outcome = found.outcome;
        }
    }
    trial.state = state;
    // The own count back after a recheck: nothing is pending or kept of fewer threads, and a
    // later run beside busy CPUs may offer them again.
    record.team_trial = Some(trial).filter(|t| !(recheck && t.state == TrialState::Kept));
    words
}

/// A first run that measured nothing (a short program ends before any probe) but found
/// that fewer threads might run faster: a record of the OS placement, unfinished and
/// without a rate, that holds the team trial for the next run (judged by whole runs).
fn first_trial(
    key: DecisionKey,
    report: &Report,
    use_: &mut MemoryUse,
    now: f64,
) -> Option<Record> {
    let mut record = Record {
        id: key.id(),
        key,
        pinning: os_placement(),
        runner_up: None,
        rate: None,
        unit: report.objective.unit.clone(),
        outcome: Outcome::Unfinished,
        uses: 1,
        created: now,
        updated: now,
        phases: Vec::new(),
        source: Some(report.objective.source.clone()).filter(|s| !s.is_empty()),
        busy: report.busy_cpus.clone(),
        team_trial: None,
    };
    let words = offer_trial(&mut record, report)?;
    // (nothing to judge the trial by without a whole run of the program's own count)
    record.team_trial.as_ref()?.baseline.as_ref()?;
    use_.team_trial = Some(words);
    use_.outcome = "unfinished".into();
    Some(record)
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
        held_to: None,
        baseline: whole_run_of(report),
    });
    Some(format!("the next run tries {} from its start", trial.label))
}

/// A run that would leave fewer threads to the next run (`threads.trial`, the count could
/// not change mid-run) where an earlier run already tried that count from its start and
/// dropped it: no run tries it again (`offer_trial` offers a trial once), so the report says
/// that rather than "the next run starts with … to try". (gettext's msgmerge beside a busy
/// CPU 0, one long region: its second run tried one thread, 0.78× the speed of two, and
/// every later run still said the next one would try it.)
fn say_a_dropped_trial(trial: &TeamTrial, report: &mut Report, use_: &mut MemoryUse) {
    let Some(t) = report.threads.as_mut() else {
        return;
    };
    let same = t
        .trial
        .as_ref()
        .is_some_and(|c| c.team.is_some() && c.team == trial.pinning.team);
    if trial.state != TrialState::Dropped || t.searched != "across runs" || !same {
        return;
    }
    let words = format!(
        "{} ran slower from the start of an earlier run and was dropped: its count stays the program's own, and no run tries it again",
        trial.pinning.label
    );
    t.trial = None;
    t.why = format!("{}; {words}", t.why);
    use_.team_trial = Some(words);
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

/// The phases this run decided a pinning for.
fn decided_phases(report: &Report) -> Vec<&str> {
    report
        .decisions
        .iter()
        .filter_map(|d| d.phase.as_deref())
        .collect()
}

/// The same pinning for every phase (rates aside).
fn same_phases(a: &[PhaseDecision], b: &[PhaseDecision]) -> bool {
    a.len() == b.len()
        && a.iter().all(|x| {
            b.iter()
                .any(|y| y.phase == x.phase && y.pinning.cpus == x.pinning.cpus)
        })
}

/// The OS placement with the program's own count, as the store keeps it.
fn os_placement() -> RememberedPinning {
    RememberedPinning {
        label: Pinning::unpinned().label,
        cpus: None,
        team: None,
    }
}

/// The run as a whole, for a trial's baseline (None for a run that failed, which is no
/// measure of the count it ran, or one without a wall time).
fn whole_run_of(report: &Report) -> Option<WholeRun> {
    (report.exit_status == Some(0) && report.wall_time > 0.0)
        .then(|| WholeRun::of(report.wall_time, &report.command))
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
            named: None,
            searched: if trial.is_some() { "across runs" } else { "no" }.into(),
            why: String::new(),
            trial,
            released: None,
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
    fn a_program_that_names_its_count_is_judged_by_whole_runs_of_the_same_command() {
        // GROMACS runs fewer parallel regions per step with one thread: its constructs/s
        // read 0.70× while the run took 2.52 s against 2.90 s. Whole runs decide.
        const UNIT: &str = "OpenMP team constructs/s";
        let command = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let mut rec = record(&[1, 0], Outcome::New);
        let mut offering = report("1,0", None, 100.0, UNIT, Some(trial_candidate()));
        offering.exit_status = Some(0);
        offering.wall_time = 2.90;
        offering.command = command(&["gmx", "mdrun", "-s", "md.tpr"]);
        offer_trial(&mut rec, &offering).expect("offered");
        let baseline = rec.team_trial.as_ref().and_then(|t| t.baseline.clone());
        assert_eq!(baseline.as_ref().map(|b| b.seconds), Some(2.90));
        let mut found = rec.clone();
        found.unit = UNIT.into();
        let trial_run = |rate: f64, seconds: f64, args: &[&str], named: usize| {
            let mut r = report("1 thread: 1", Some(1), rate, UNIT, None);
            r.exit_status = Some(0);
            r.wall_time = seconds;
            r.command = command(args);
            if let Some(t) = r.threads.as_mut() {
                t.named = Some(named);
            }
            r
        };
        // Its rate fell, its run was 1.15× faster: kept.
        let mut next = found.clone();
        let r = trial_run(70.0, 2.52, &["gmx", "mdrun", "-s", "md.tpr"], 1);
        let said = settle_trial(&found, &mut next, &r);
        assert!(said.contains("1.15×") && said.contains("kept"), "{said}");
        assert!(said.contains("2.52 s against 2.90 s"), "{said}");
        assert_eq!(next.pinning.team, Some(1));
        // At 0.92× (within what whole runs of the own count swing beside a busy CPU):
        // kept, as one run of each cannot show the fewer threads slower.
        let mut next = found.clone();
        let r = trial_run(70.0, 3.15, &["gmx", "mdrun", "-s", "md.tpr"], 1);
        let said = settle_trial(&found, &mut next, &r);
        assert!(said.contains("0.92×") && said.contains("kept"), "{said}");
        assert_eq!(next.pinning.team, Some(1));
        // Clearly slower, at 0.88×: dropped, and the record keeps its pinning and count.
        let mut next = found.clone();
        let r = trial_run(70.0, 3.30, &["gmx", "mdrun", "-s", "md.tpr"], 1);
        assert!(settle_trial(&found, &mut next, &r).contains("dropped"));
        assert_eq!(next.pinning, found.pinning);
        // Another command is not the same work: dropped, and said so.
        let mut next = found.clone();
        let r = trial_run(70.0, 1.0, &["gmx", "mdrun", "-s", "other.tpr"], 1);
        let said = settle_trial(&found, &mut next, &r);
        assert!(
            said.contains("cannot be compared") && said.contains("dropped"),
            "{said}"
        );
        // It named more threads than the trial's (it did not take OMP_NUM_THREADS):
        // dropped whatever its time.
        let mut next = found.clone();
        let r = trial_run(70.0, 1.0, &["gmx", "mdrun", "-s", "md.tpr"], 2);
        let said = settle_trial(&found, &mut next, &r);
        assert!(
            said.contains("ran 2 threads") && said.contains("dropped"),
            "{said}"
        );
    }

    #[test]
    fn a_short_program_without_a_decided_rate_is_judged_by_its_whole_run() {
        const UNIT: &str = "OpenMP team constructs/s";
        let mut rec = record(&[1, 0], Outcome::New);
        let mut offering = report("1,0", None, 100.0, UNIT, Some(trial_candidate()));
        offering.exit_status = Some(0);
        offering.wall_time = 2.0;
        offer_trial(&mut rec, &offering).expect("offered");
        let mut found = rec.clone();
        found.unit = UNIT.into();
        // The run that offered the trial decided a phase's pinning for two threads.
        found.phases = vec![PhaseDecision {
            phase: "barrier".into(),
            pinning: pinning(&[1, 0]),
            rate: Some(100.0),
        }];
        // The trial's run ended before any probe: nothing decided, nothing measured.
        let mut r = Report::default();
        r.objective.unit = UNIT.into();
        r.exit_status = Some(0);
        r.wall_time = 1.0;
        // (the trial's run settled against the record: the new record and the words)
        let judge = |r: &mut Report| {
            let mut use_ = MemoryUse::default();
            let next = settle(Some(&found), found.key.clone(), true, r, &mut use_, 5.0)
                .expect("the trial is judged");
            (next, use_.team_trial.unwrap_or_default())
        };
        let (next, said) = judge(&mut r);
        assert!(said.contains("2.00×") && said.contains("kept"), "{said}");
        assert_eq!(next.pinning.team, Some(1));
        assert_eq!(next.pinning.cpus, Some(vec![1]));
        assert!(next.phases.is_empty(), "{:?}", next.phases);
        assert_eq!(
            next.team_trial.as_ref().map(|t| t.state),
            Some(TrialState::Kept)
        );
        // Slower: dropped, the record keeps its pinning and its count, and its phases.
        r.wall_time = 3.0;
        let (next, _) = judge(&mut r);
        assert_eq!(
            (next.pinning.clone(), next.pinning.team),
            (found.pinning.clone(), None)
        );
        assert_eq!(next.phases, found.phases);
    }

    #[test]
    fn a_run_that_started_with_a_kept_count_keeps_it_whatever_it_decides() {
        // ompwork beside a busy CPU kept one thread; its next run (one thread from its
        // start) searched and ended on the OS placement, and the record lost the count:
        // the run after it started two threads again, 3× slower.
        let (found, mut r) = one_thread_kept_then_the_os_placement_decided();
        let (next, _) = settle_hit(&found, &mut r);
        assert_eq!(
            (next.pinning.cpus.clone(), next.pinning.team),
            (None, Some(1))
        );
    }

    /// A record of one thread on CPU 1 (kept, in OpenMP team constructs/s), and a report of
    /// the next run deciding the OS placement.
    fn one_thread_kept_then_the_os_placement_decided() -> (Record, Report) {
        const UNIT: &str = "OpenMP team constructs/s";
        let mut found = record(&[1], Outcome::Confirmed);
        found.pinning.team = Some(1);
        found.unit = UNIT.into();
        let mut r = report("unpinned (OS decides)", None, 100.0, UNIT, None);
        r.candidates[0].cpus = None;
        (found, r)
    }

    /// `settle` of a run that found `found` (not trying a trial): the record and the use.
    fn settle_hit(found: &Record, r: &mut Report) -> (Record, MemoryUse) {
        let (next, use_) = settle_hit_or_none(found, r);
        (next.expect("a record"), use_)
    }

    /// `settle_hit` where nothing may be written (None: the record stays as it was).
    fn settle_hit_or_none(found: &Record, r: &mut Report) -> (Option<Record>, MemoryUse) {
        let mut use_ = MemoryUse {
            hit: true,
            ..MemoryUse::default()
        };
        let next = settle(Some(found), found.key.clone(), false, r, &mut use_, 5.0);
        (next, use_)
    }

    /// A first run over before any probe leaves a record of the OS placement that only
    /// carries the team trial; once the trial is dropped, that record holds no pinning: it
    /// is not applied (the next run searches as a first run), and a run that then decides
    /// the OS placement is a new decision, not a confirmation of a placeholder (which had
    /// been "confirmed" with no probe, as the only candidate, run after run).
    #[test]
    fn a_record_that_only_carried_a_trial_holds_no_pinning() {
        const UNIT: &str = "OpenMP team constructs/s";
        let key = record(&[1], Outcome::New).key;
        let mut first = Report::default();
        first.objective.unit = UNIT.into();
        first.exit_status = Some(0);
        first.wall_time = 2.4;
        first.threads = report("x", None, 1.0, UNIT, Some(trial_candidate())).threads;
        let mut use_ = MemoryUse::default();
        let rec = settle(None, key.clone(), false, &mut first, &mut use_, 1.0)
            .expect("a record carrying the trial");
        assert_eq!(
            (rec.outcome, rec.pinning.cpus.clone()),
            (Outcome::Unfinished, None)
        );
        // Pending, it is tried (the record's placeholder pinning is not what runs).
        assert!(holds_no_pinning(&rec));
        assert!(tries_trial(&rec, &ThreadsChoice::Auto));
        // The trial ran slower: dropped, the record still holds no pinning, and is not
        // tried again.
        let mut trial_run = Report::default();
        trial_run.objective.unit = UNIT.into();
        trial_run.exit_status = Some(0);
        trial_run.wall_time = 3.6;
        let mut use_ = MemoryUse::default();
        let dropped = settle(
            Some(&rec),
            key.clone(),
            true,
            &mut trial_run,
            &mut use_,
            2.0,
        )
        .expect("the trial is judged");
        assert_eq!(
            dropped.team_trial.as_ref().map(|t| t.state),
            Some(TrialState::Dropped)
        );
        assert!(holds_no_pinning(&dropped));
        assert!(!tries_trial(&dropped, &ThreadsChoice::Auto));
        // A later run (searched as a first run) that decides the OS placement: new, with
        // the dropped trial kept.
        let mut later = report("unpinned (OS decides)", None, 50.0, UNIT, None);
        later.candidates[0].cpus = None;
        let mut use_ = MemoryUse::default();
        let next =
            settle(Some(&dropped), key, false, &mut later, &mut use_, 3.0).expect("a record");
        assert_eq!(next.outcome, Outcome::New, "{:?}", use_);
        assert_eq!(
            next.team_trial.as_ref().map(|t| t.state),
            Some(TrialState::Dropped)
        );
        assert!(!holds_no_pinning(&next), "a measured decision: {next:?}");
        // A record a search's best so far wrote (with a rate and a runner-up) holds one.
        let mut unfinished = record(&[1, 0], Outcome::Unfinished);
        unfinished.runner_up = Some(pinning(&[0, 1]));
        assert!(!holds_no_pinning(&unfinished));
    }

    /// A record whose trial of one thread was tried and dropped; each later run of the
    /// program (one long region: the count cannot change mid-run) would offer it again.
    /// Whether the run decided or ended before its check could, the report says it was
    /// dropped and no run tries it again, not that the next run starts with it.
    #[test]
    fn a_trial_dropped_before_is_said_so_not_offered_again() {
        const UNIT: &str = "OpenMP team constructs/s";
        let mut found = record(&[1, 0], Outcome::Confirmed);
        found.unit = UNIT.into();
        found.team_trial = Some(TeamTrial {
            pinning: RememberedPinning {
                label: "1 thread: 1".into(),
                cpus: Some(vec![1]),
                team: Some(1),
            },
            state: TrialState::Dropped,
            rate: Some(78.0),
            baseline: None,
            held_to: None,
        });
        for decided in [true, false] {
            let mut r = report("[1, 0]", None, 100.0, UNIT, Some(trial_candidate()));
            if !decided {
                r.decision = None;
            }
            let (next, use_) = settle_hit_or_none(&found, &mut r);
            let t = r.threads.clone().expect("the count is reported");
            assert_eq!(t.trial, None, "decided {decided}: {t:?}");
            assert!(t.why.contains("was dropped"), "{t:?}");
            assert!(
                t.summary().contains("thread count: kept") && !t.summary().contains("to try"),
                "{}",
                t.summary()
            );
            let said = use_.team_trial.clone().unwrap_or_default();
            assert!(said.contains("no run tries it again"), "{use_:?}");
            // The record keeps its dropped trial (a decided run rewrites the rest).
            if let Some(next) = next {
                assert_eq!(
                    next.team_trial.as_ref().map(|t| t.state),
                    Some(TrialState::Dropped)
                );
            }
        }
    }

    #[test]
    fn a_count_the_run_let_go_is_not_kept_and_its_trial_goes_with_it() {
        // The same record, but the CPU busy then is free now: the run started two threads
        // (`released`), and what it decided is kept without the old count, whose judged
        // trial is forgotten so that a later run beside a busy CPU may offer it again.
        let (mut found, mut r) = one_thread_kept_then_the_os_placement_decided();
        found.busy = Some(vec![0]);
        found.team_trial = Some(TeamTrial {
            pinning: found.pinning.clone(),
            state: TrialState::Kept,
            rate: Some(2.0),
            baseline: None,
            held_to: None,
        });
        r.busy_cpus = Some(Vec::new());
        r.threads.as_mut().unwrap().released = Some(1);
        // The run decided its `setup` phase; its `solve` phase, not reached, had kept the
        // smaller team too.
        found.phases = vec![PhaseDecision {
            phase: "solve".into(),
            pinning: found.pinning.clone(),
            rate: Some(2.0),
        }];
        let mut setup = r.decision.clone().expect("decided");
        setup.phase = Some("setup".into());
        r.decisions = vec![setup];
        let (next, use_) = settle_hit(&found, &mut r);
        assert_eq!((next.pinning.cpus.clone(), next.pinning.team), (None, None));
        assert_eq!(next.team_trial, None);
        assert_eq!(next.busy, Some(Vec::new()));
        assert_eq!(use_.outcome, "overturned");
        let phases: Vec<&str> = next.phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(phases, ["setup"], "{:?}", next.phases);
    }

    /// A record of one thread on CPU 1 kept by a trial that ran at 400 team constructs/s.
    fn one_thread_kept_at_400() -> Record {
        let mut found = record(&[1], Outcome::Confirmed);
        found.pinning = RememberedPinning {
            label: "1 thread: 1".into(),
            cpus: Some(vec![1]),
            team: Some(1),
        };
        found.unit = "OpenMP team constructs/s".into();
        found.rate = Some(400.0);
        found.team_trial = Some(TeamTrial {
            pinning: found.pinning.clone(),
            state: TrialState::Kept,
            rate: Some(400.0),
            baseline: None,
            held_to: None,
        });
        found
    }

    /// A run at the kept count (one thread on CPU 1) deciding `rate`, exit 0, `seconds`.
    fn kept_count_run(rate: f64, seconds: f64) -> Report {
        let mut r = report(
            "1 thread: 1",
            Some(1),
            rate,
            "OpenMP team constructs/s",
            None,
        );
        r.objective.higher_is_better = true;
        r.exit_status = Some(0);
        r.wall_time = seconds;
        r.command = vec!["prog".into()];
        r
    }

    /// A recheck's run: the program's own count (two threads on `1,0`) deciding `rate`.
    fn own_count_run(rate: f64, seconds: f64) -> Report {
        let mut r = report("1,0", None, rate, "OpenMP team constructs/s", None);
        r.candidates[0].cpus = Some(vec![1, 0]);
        r.objective.higher_is_better = true;
        r.exit_status = Some(0);
        r.wall_time = seconds;
        r.command = vec!["prog".into()];
        r
    }

    /// The check of a kept count covers the count (#61): a run at the kept count whose
    /// rate falls well below the rate it was kept at calls one run at the program's own
    /// count, which gets the count back only by running clearly faster; a dropped recheck
    /// lowers the bar, so a noisy machine calls few.
    #[test]
    fn a_kept_count_whose_rate_falls_rechecks_the_programs_own_count() {
        let found = one_thread_kept_at_400();
        // Within the margin (0.95×): nothing to recheck.
        let (next, use_) = settle_hit(&found, &mut kept_count_run(380.0, 1.0));
        assert_eq!(use_.team_trial, None);
        assert_eq!(next.team_trial, found.team_trial);
        // Fallen to half: the count stays for now, the next run rechecks the own count.
        let (called, use_) = settle_hit(&found, &mut kept_count_run(200.0, 2.0));
        let said = use_.team_trial.unwrap_or_default();
        assert!(
            said.contains("0.50×") && said.contains("rechecks"),
            "{said}"
        );
        assert_eq!(called.pinning.team, Some(1));
        assert_eq!(called.rate, Some(200.0));
        let t = called.team_trial.clone().expect("a recheck");
        assert!(t.rechecks_own_count(), "{t:?}");
        assert_eq!((t.state, t.held_to), (TrialState::Pending, Some(200.0)));
        called.check().expect("a record autopin writes");
        // The next run starts with the program's own count, as a trial of it.
        assert!(tries_trial(&called, &ThreadsChoice::Auto));
        let (rem, lines) = recall(&called, true);
        assert!(rem.trying_team && rem.pinning.team.is_none() && rem.pinning.is_unpinned());
        assert!(
            lines[0].contains("rechecks the program's own count"),
            "{lines:?}"
        );
        // Under --threads keep the kept count runs on: nothing is rechecked.
        assert!(!tries_trial(&called, &ThreadsChoice::Keep));
        let judge = |r: &mut Report| {
            let mut use_ = MemoryUse {
                hit: true,
                ..MemoryUse::default()
            };
            let next =
                settle(Some(&called), called.key.clone(), true, r, &mut use_, 9.0).expect("judged");
            (next, use_.team_trial.unwrap_or_default())
        };
        // The own count at 1.30× the fallen rate: back, and nothing of fewer threads is
        // kept (a later run beside busy CPUs may offer them again).
        let (next, said) = judge(&mut own_count_run(260.0, 1.5));
        assert!(
            said.contains("1.30×") && said.contains("own count is back"),
            "{said}"
        );
        assert_eq!(
            (next.pinning.cpus.clone(), next.pinning.team),
            (Some(vec![1, 0]), None)
        );
        assert_eq!(next.team_trial, None);
        // At 1.025×: not clearly faster, the kept count stays, at the rate that called the
        // recheck, which is the new bar.
        let (next, said) = judge(&mut own_count_run(205.0, 1.9));
        assert!(
            said.contains("1.02×") && said.contains("kept count stays"),
            "{said}"
        );
        assert_eq!(
            (next.pinning.clone(), next.rate),
            (called.pinning.clone(), Some(200.0))
        );
        let t = next.team_trial.clone().expect("the dropped recheck");
        assert_eq!(
            (t.state, t.held_to, t.rate),
            (TrialState::Dropped, Some(200.0), Some(205.0))
        );
        // Held to 200 now: 160 (0.80×) calls nothing, 140 (0.70×) calls the next recheck.
        let (_, use_) = settle_hit(&next, &mut kept_count_run(160.0, 2.4));
        assert_eq!(use_.team_trial, None);
        let (again, use_) = settle_hit(&next, &mut kept_count_run(140.0, 2.8));
        assert!(use_.team_trial.unwrap_or_default().contains("0.70×"));
        assert_eq!(again.team_trial.and_then(|t| t.held_to), Some(140.0));
        // A failed run calls no recheck, whatever its rate.
        let mut failed = kept_count_run(10.0, 2.0);
        failed.exit_status = Some(3);
        assert_eq!(settle_hit(&found, &mut failed).1.team_trial, None);
    }

    /// A program that names its own count (GROMACS) is rechecked by whole runs against the
    /// run that called the recheck: the own count must be 10% faster to come back.
    #[test]
    fn a_recheck_of_a_program_that_names_its_count_needs_a_clearly_faster_run() {
        let found = one_thread_kept_at_400();
        let (called, _) = settle_hit(&found, &mut kept_count_run(200.0, 2.0));
        let judge = |seconds: f64| {
            let mut r = own_count_run(90.0, seconds);
            r.threads.as_mut().unwrap().named = Some(2);
            let mut use_ = MemoryUse::default();
            let next = settle(
                Some(&called),
                called.key.clone(),
                true,
                &mut r,
                &mut use_,
                9.0,
            )
            .expect("judged");
            (next, use_.team_trial.unwrap_or_default())
        };
        let (next, said) = judge(1.87);
        assert!(
            said.contains("1.07×") && said.contains("1.87 s against 2.00 s"),
            "{said}"
        );
        assert_eq!(next.pinning.team, Some(1));
        let (next, said) = judge(1.6);
        assert!(
            said.contains("1.25×") && said.contains("own count is back"),
            "{said}"
        );
        assert_eq!(next.pinning.team, None);
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
