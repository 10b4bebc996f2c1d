//! Program phases: what the session remembers of each (its decision, its parked search), and
//! what it does when the program enters one (`switch_phase`, `enter_phase`): the phase's
//! decided pinning back, its parked search resumed, a pinning remembered from an earlier run
//! applied (`decide_from_memory`), or a new search.

use super::{Action, Session, State};
use crate::report::DecisionRecord;
use crate::strategy::Strategy;

/// What the session remembers about one program phase.
#[derive(Default)]
pub(super) struct PhaseMemo {
    /// A search for this phase interrupted by a phase change, resumed when it comes back.
    pub(super) parked: Option<Parked>,
    /// The pinning decided for this phase (label) and its probed score.
    pub(super) decided: Option<(String, Option<f64>)>,
    /// A search was started for this phase (counts against `max_phase_searches`).
    pub(super) searched: bool,
    /// `decided` comes from an earlier run and has not been applied in this one yet.
    pub(super) remembered: bool,
}

pub(super) struct Parked {
    pub(super) strategy: Box<dyn Strategy>,
    pub(super) search: usize,
    pub(super) elapsed: f64,
}

/// A phase left sooner than this after it was entered, while a search probed it, is brief:
/// no probe of it could end (a warm-up and a probe take 0.2–0.5 s).
const BRIEF_PHASE: f64 = 0.5;

/// Brief phases during searches after which the program is searched as one: its phases
/// change faster than a probe can measure one of them.
const BRIEF_PHASES: usize = 4;

impl Session {
    /// Counts a phase left during a search at `now`, and once `BRIEF_PHASES` of them were
    /// brief sets the phases aside (true; a search of the whole program has begun). A
    /// search by phase drops a probe at each change, and the faster a candidate runs a
    /// phase, the sooner that phase ends under it: syncbench's barrier phase lasts 10 ms on
    /// `1,0` beside a busy CPU 0 and 80 s with its threads stacked, so only the stacked
    /// candidates' probes ever ended, and the search kept a pinning 8000× slower.
    pub(super) fn phases_too_brief(&mut self, now: f64, out: &mut Vec<Action>) -> bool {
        let searching = matches!(self.state, State::Warmup { .. } | State::Measure(_));
        if searching && self.phase.is_some() && now - self.phase_since < BRIEF_PHASE {
            self.brief_phases += 1;
        }
        self.phase_since = now;
        if self.brief_phases < BRIEF_PHASES || !searching {
            return false;
        }
        self.set_phases_aside(now, out);
        true
    }

    /// From now on the program is searched as one, whatever phase it names: the searches
    /// parked by phase are dropped and a search of the whole program begins.
    fn set_phases_aside(&mut self, now: f64, out: &mut Vec<Action>) {
        self.phases_aside = true;
        self.count_search_time(now);
        self.strategy = None;
        for memo in self.phases.values_mut() {
            memo.parked = None;
        }
        self.phase = None;
        let msg = format!(
            "the program's phases change faster than a probe can measure one ({} of them lasted under {BRIEF_PHASE:.1} s during the search): it is searched as one program from now on, its phases' progress together",
            self.brief_phases
        );
        self.report.notes.push(msg.clone());
        out.push(Action::Message(msg));
        self.begin_search(now, "phases too brief to search one by one".into(), out);
    }

    /// The program entered phase `to` at `now` (the interval that spans the change is not
    /// used). An unfinished search is parked and resumed when its phase returns; the new
    /// phase gets its decided pinning back, its parked search resumed, or a new search.
    pub(super) fn switch_phase(&mut self, now: f64, to: Option<String>, out: &mut Vec<Action>) {
        let from = std::mem::replace(&mut self.phase, to.clone());
        let name = |p: &Option<String>| p.clone().unwrap_or_else(|| "(none)".into());
        match &self.state {
            State::Init { .. } => return,
            State::Warmup { .. } | State::Measure(_) => {
                if let Some(strategy) = self.strategy.take() {
                    // Searches begun before the program named any phase measured a mix;
                    // they are dropped rather than resumed.
                    if from.is_some() {
                        let elapsed = self.search_before + (now - self.search_start);
                        self.count_search_time(now);
                        self.phases.entry(from.clone()).or_default().parked = Some(Parked {
                            strategy,
                            search: self.search,
                            elapsed,
                        });
                    } else {
                        self.count_search_time(now);
                    }
                }
                out.push(Action::Message(format!(
                    "t={now:.1}s phase {} → {} during the search: current probe dropped",
                    name(&from),
                    name(&to)
                )));
            }
            State::Decided { .. } => {
                out.push(Action::Message(format!(
                    "t={now:.1}s phase {} → {}",
                    name(&from),
                    name(&to)
                )));
            }
        }
        self.enter_phase(now, out);
    }

    /// Continues in the (new) current phase: its decision, its parked search, or a new one.
    pub(super) fn enter_phase(&mut self, now: f64, out: &mut Vec<Action>) {
        let key = self.phase.clone();
        let phase_name = key.clone().unwrap_or_else(|| "(none)".into());
        let memo = self.phases.entry(key.clone()).or_default();
        if let Some((label, score)) = memo.decided.clone() {
            let remembered = memo.remembered;
            if self.candidates.is_empty() {
                self.load_candidates(out);
            }
            let found = self.candidates.iter().position(|c| c.label == label);
            // A phase's pinning remembered from an earlier run is applied without a search,
            // which the rule for risky decisions never allows a stacked pinning: such a
            // phase is searched.
            let threads = self.tracked.max(1);
            if let Some(idx) =
                found.filter(|&i| remembered && self.candidates[i].shares_cpus(threads))
            {
                out.push(Action::Message(format!(
                    "phase {phase_name}: the pinning remembered for it, {}, stacks the program's threads: the phase is searched rather than applied unchecked",
                    self.candidates[idx].label
                )));
                let memo = self.phases.entry(key.clone()).or_default();
                memo.decided = None;
                memo.remembered = false;
                memo.searched = false;
            } else if let Some(idx) = found {
                if self.applied != Some(idx) {
                    self.applied = Some(idx);
                    out.push(Action::Apply(idx));
                }
                if remembered {
                    self.decide_from_memory(now, idx, score);
                    out.push(Action::Message(format!(
                        "phase {phase_name}: applying the pinning remembered for it, {label} (no search; the phase watch holds it to its rate then)"
                    )));
                } else {
                    out.push(Action::Message(format!(
                        "phase {phase_name}: applying its decided pinning {label}"
                    )));
                }
                if let Some(w) = self.watch.as_mut() {
                    w.decided(now, score, key);
                }
                self.state = State::Decided {
                    since_report: 0.0,
                    amount: 0.0,
                };
                return;
            }
        }
        let memo = self.phases.entry(key.clone()).or_default();
        if let Some(p) = memo.parked.take() {
            self.strategy = Some(p.strategy);
            self.search = p.search;
            self.search_before = p.elapsed;
            self.search_start = now;
            out.push(Action::Message(format!(
                "phase {phase_name}: resuming search {} ({:.1} s spent so far)",
                p.search, p.elapsed
            )));
            self.next_step(now, out);
            return;
        }
        let counted = key.is_some() && !memo.searched;
        if counted && self.phase_searches >= self.cfg.max_phase_searches {
            out.push(Action::Message(format!(
                "phase {phase_name}: new phase not searched ({} phases searched already); keeping the current pinning",
                self.phase_searches
            )));
            if let Some(w) = self.watch.as_mut() {
                w.decided(now, None, key);
            }
            self.state = State::Decided {
                since_report: 0.0,
                amount: 0.0,
            };
            return;
        }
        self.begin_search(now, format!("new phase {phase_name}"), out);
    }

    /// Records the decision of a phase remembered from an earlier run, applied now on
    /// candidate `idx` (its `score` then on the higher-is-better scale).
    fn decide_from_memory(&mut self, now: f64, idx: usize, score: Option<f64>) {
        let phase = self.phase.clone().unwrap_or_default();
        let reason = format!("remembered for phase {phase} from an earlier run");
        let rec = self.decision_on(now, idx, score, &reason, DecisionRecord::FROM_MEMORY);
        if let Some(m) = self.phases.get_mut(&self.phase) {
            m.remembered = false;
        }
        self.keep_decision(rec);
    }
}
