//! What is remembered of a decision, and what became of it.

use crate::key::DecisionKey;
use serde::{Deserialize, Serialize};

/// A pinning as the store keeps it: its label and its CPU list in thread order (None: the
/// OS decides).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RememberedPinning {
    pub label: String,
    pub cpus: Option<Vec<u32>>,
    /// The team size the program's OpenMP regions run with (None: the program's own count):
    /// applied at a run's start (OMP_NUM_THREADS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<usize>,
}

/// Fewer threads to try at a run's start, for a program whose count could not change
/// mid-run (it may notice a smaller team): the pinning with its team size, and what became
/// of it. One run tries it; it is kept when it ran faster than the record's rate.
///
/// A trial without a team size is the other way round, a *recheck*: the record keeps a
/// smaller count, whose rate has fallen well below the rate it was kept at, and one run
/// starts with the program's own count again to see whether it now runs faster
/// (docs/threads.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamTrial {
    pub pinning: RememberedPinning,
    pub state: TrialState,
    /// The rate the trial ran at, in the record's unit (None before it was tried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// The whole run that offered the trial, at the program's own count: the trial's run
    /// is compared with it where rates cannot be (a program that names its own count may
    /// run other OpenMP constructs with fewer threads, so its constructs/s at two counts
    /// do not compare; a short program may end before any rate is decided).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<WholeRun>,
    /// A recheck's: the kept count's fallen rate that called it (the record's unit). Once
    /// the recheck is dropped, a run at the kept count must fall below this (by the same
    /// margin) to call another: each recheck lowers the bar, so noise calls few.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_to: Option<f64>,
}

impl TeamTrial {
    /// Whether this trial starts the program with its own count again (a recheck of a kept
    /// smaller count), rather than with fewer threads.
    pub fn rechecks_own_count(&self) -> bool {
        self.pinning.team.is_none()
    }
}

/// One whole run of a program: its wall time and which command it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WholeRun {
    /// Seconds from its start to its end.
    pub seconds: f64,
    /// 16 hex digits of a SHA-256 over its command line: two runs compare only when they
    /// ran the same command.
    pub command: String,
}

impl WholeRun {
    pub fn of(seconds: f64, command: &[String]) -> WholeRun {
        WholeRun {
            seconds,
            command: crate::fingerprint(command),
        }
    }
}

/// Where a [`TeamTrial`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrialState {
    /// The next run starts with it.
    Pending,
    /// It ran faster: the record's pinning is now it.
    Kept,
    /// It did not: the record keeps the program's own count, and it is not tried again.
    /// (A recheck dropped: the record keeps its smaller count; a later fall of its rate may
    /// recheck again.)
    Dropped,
}

/// The pinning decided for one phase of a program that names its phases (heartbeat
/// phases), and its rate then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseDecision {
    pub phase: String,
    pub pinning: RememberedPinning,
    /// The rate it was decided at, in the record's `unit` (the check's reference).
    pub rate: Option<f64>,
}

/// What a run did with the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The check kept the remembered pinning.
    Confirmed,
    /// The check found another pinning better today; the record now holds that one.
    Overturned,
    /// No record yet: the run searched and its decision is now remembered.
    New,
    /// The program ended before the search decided: the best pinning so far is kept, for
    /// the next run to start on and check (a short program then still gains from autopin).
    Unfinished,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Confirmed => "confirmed",
            Outcome::Overturned => "overturned",
            Outcome::New => "new",
            Outcome::Unfinished => "unfinished",
        }
    }
}

/// One remembered decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// [`DecisionKey::id`] of `key`.
    pub id: String,
    pub key: DecisionKey,
    pub pinning: RememberedPinning,
    /// The next best candidate when it was decided (checked against it next time).
    pub runner_up: Option<RememberedPinning>,
    /// The decided pinning's rate, in `unit`.
    pub rate: Option<f64>,
    pub unit: String,
    /// What the last run did with it.
    pub outcome: Outcome,
    /// How many runs have used (or made) it.
    pub uses: u64,
    /// Unix times, seconds.
    pub created: f64,
    pub updated: f64,
    /// Per phase, for a program that names its phases: each phase's own decision (`pinning`
    /// is then the decision in force when the run ended). Records written before phases were
    /// remembered have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseDecision>,
    /// Which link of the objective chain `rate` was measured with (`requested`,
    /// `heartbeat`, `openmp`, `task-clock`): the next run measures that way at once,
    /// without waiting for the links before it. None in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The CPUs other work kept busy when it was decided or last checked (empty: none).
    /// A run that finds other CPUs busy searches again instead of confirming the pinning by
    /// its rate alone. None: not watched (records written before it was kept, runs of
    /// candidates the user named, attached programs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<Vec<u32>>,
    /// Fewer threads to try at a run's start (see [`TeamTrial`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_trial: Option<TeamTrial>,
}

/// How `memory show` and `memory forget` name records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// A key id, a program's path, or a program's file name, exactly (`%` and `_` are
    /// themselves: `forget %` once forgot every program).
    Exact(String),
    /// A shell-style pattern (`*` any text, `?` one character, nothing else special) for
    /// the key id, the program's path or its file name, whole.
    Pattern(String),
}

impl Record {
    /// Whether `sel` names this record.
    pub fn selected_by(&self, sel: &Selector) -> bool {
        let file_name = self.key.program.rsplit('/').next().unwrap_or("");
        let names = [self.id.as_str(), self.key.program.as_str(), file_name];
        match sel {
            Selector::Exact(what) => names.contains(&what.as_str()),
            Selector::Pattern(p) => names.iter().any(|n| glob_matches(p, n)),
        }
    }
}

/// Whether `text` is matched whole by `pattern` (`*`: any characters, `?`: one).
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // The classic greedy match with one backtrack point (the last `*`): linear in practice,
    // never exponential.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        match p.get(i) {
            Some('*') => {
                star = Some((i, j));
                i += 1;
            }
            Some(c) if *c == '?' || *c == t[j] => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some((si, sj)) => {
                    i = si + 1;
                    j = sj + 1;
                    star = Some((si, sj + 1));
                }
                None => return false,
            },
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// The most CPUs a record may name (a CPU id is below this): Linux's largest configurable
/// `NR_CPUS` is 8192; this leaves room and keeps a CPU set's bitmap small (an imported CPU
/// 4294967295 once made a run take 1 GB for its bitmap).
pub const MAX_CPU_ID: u32 = 1 << 16;
/// The most entries a pinning may list (one per thread).
pub const MAX_THREADS: usize = 1 << 16;
/// The most phases a record may keep.
pub const MAX_PHASES: usize = 256;
/// The longest text field (a label lists every thread's CPU; a program path, an argument).
pub const MAX_TEXT: usize = 1 << 20;

/// A CPU list (`0-3,8,10-11`) as ranges, not expanded (so a huge one costs nothing);
/// every id below [`MAX_CPU_ID`].
pub(crate) fn parse_cpu_ranges(text: &str) -> Result<Vec<(u32, u32)>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n < MAX_CPU_ID)
                .ok_or_else(|| {
                    format!("{s:?} in the CPU list {text:?} is not a CPU id below {MAX_CPU_ID}")
                })
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(format!("{part:?} in the CPU list {text:?} runs backwards"));
        }
        out.push((lo, hi));
    }
    if out.is_empty() {
        return Err(format!("the CPU list {text:?} names no CPU"));
    }
    Ok(out)
}

/// Why a record is not one autopin could have written (`Record::check`), in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidRecord(pub String);

impl Record {
    /// Checks that the record could have been written by autopin: every CPU it names lies
    /// in the record's own CPU set (`key.cpus`), lists and texts are of sizes a run makes,
    /// and numbers are finite. A store's import refuses a record that is not; a lookup
    /// passes over one (a store edited by hand).
    pub fn check(&self) -> Result<(), InvalidRecord> {
        self.problem().map_err(InvalidRecord)
    }

    /// The first thing wrong with the record (`check`).
    fn problem(&self) -> Result<(), String> {
        let cpus = parse_cpu_ranges(&self.key.cpus).map_err(|e| format!("key.cpus: {e}"))?;
        let inside = |cpu: u32| cpus.iter().any(|&(lo, hi)| (lo..=hi).contains(&cpu));
        let check_cpus = |what: &str, list: &[u32]| -> Result<(), String> {
            if list.len() > MAX_THREADS {
                return Err(format!(
                    "{what} lists {} CPUs; at most {MAX_THREADS} (one per thread)",
                    list.len()
                ));
            }
            match list.iter().find(|c| !inside(**c)) {
                Some(c) => Err(format!(
                    "{what} uses CPU {c}, outside the record's CPU set {}",
                    self.key.cpus
                )),
                None => Ok(()),
            }
        };
        let check_pinning = |what: &str, p: &RememberedPinning| -> Result<(), String> {
            check_text(&format!("{what}.label"), &p.label)?;
            if p.team.is_some_and(|t| t == 0 || t > MAX_THREADS) {
                return Err(format!(
                    "{what} has a team of {} threads; from 1 to {MAX_THREADS}",
                    p.team.unwrap_or(0)
                ));
            }
            match &p.cpus {
                Some(list) if list.is_empty() => Err(format!("{what} lists no CPU")),
                Some(list) => check_cpus(what, list),
                None => Ok(()),
            }
        };
        check_pinning("pinning", &self.pinning)?;
        if let Some(r) = &self.runner_up {
            check_pinning("runner_up", r)?;
        }
        if let Some(t) = &self.team_trial {
            check_pinning("team_trial", &t.pinning)?;
            check_number("team_trial.rate", t.rate)?;
            check_number(
                "team_trial.baseline.seconds",
                t.baseline.as_ref().map(|b| b.seconds),
            )?;
            check_number("team_trial.held_to", t.held_to)?;
        }
        if self.phases.len() > MAX_PHASES {
            return Err(format!(
                "{} phases; at most {MAX_PHASES}",
                self.phases.len()
            ));
        }
        for p in &self.phases {
            check_text("phases.phase", &p.phase)?;
            check_pinning(&format!("phase {:?}", p.phase), &p.pinning)?;
            check_number("phases.rate", p.rate)?;
        }
        if let Some(busy) = &self.busy {
            check_cpus("busy", busy)?;
        }
        check_number("rate", self.rate)?;
        check_number("created", Some(self.created))?;
        check_number("updated", Some(self.updated))?;
        let k = &self.key;
        for (what, text) in [
            ("key.program", &k.program),
            ("key.program_id", &k.program_id),
            ("key.machine", &k.machine),
            ("key.threads", &k.threads),
            ("key.objective", &k.objective),
            ("unit", &self.unit),
        ] {
            check_text(what, text)?;
        }
        if let Some(args) = &k.args {
            let total: usize = args.iter().map(String::len).sum();
            if args.len() > MAX_THREADS || total > MAX_TEXT {
                return Err(format!(
                    "key.args: {} arguments of {total} bytes; at most {MAX_THREADS} and {MAX_TEXT}",
                    args.len()
                ));
            }
        }
        Ok(())
    }
}

fn check_text(what: &str, text: &str) -> Result<(), String> {
    if text.len() > MAX_TEXT {
        return Err(format!(
            "{what} is {} bytes long; at most {MAX_TEXT}",
            text.len()
        ));
    }
    Ok(())
}

fn check_number(what: &str, x: Option<f64>) -> Result<(), String> {
    match x {
        Some(v) if !v.is_finite() => Err(format!("{what} is {v}; a finite number is valid")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(cpus: &str, pinning: &[u32]) -> Record {
        let key = DecisionKey {
            program: "/bin/p".into(),
            program_id: "x".into(),
            args: None,
            machine: "m".into(),
            cpus: cpus.into(),
            threads: "2".into(),
            objective: "default".into(),
            share: None,
        };
        Record {
            id: key.id(),
            key,
            pinning: RememberedPinning {
                label: "p".into(),
                cpus: Some(pinning.to_vec()),
                team: None,
            },
            runner_up: None,
            rate: Some(1.0),
            unit: "u/s".into(),
            outcome: Outcome::New,
            uses: 1,
            created: 0.0,
            updated: 0.0,
            phases: Vec::new(),
            source: None,
            busy: None,
            team_trial: None,
        }
    }

    #[test]
    fn records_are_named_exactly_unless_a_pattern_is_asked_for() {
        let mut r = record("0", &[0]);
        r.key.program = "/opt/a/solver".into();
        let exact = |w: &str| r.selected_by(&Selector::Exact(w.into()));
        let pattern = |w: &str| r.selected_by(&Selector::Pattern(w.into()));
        assert!(exact("solver") && exact("/opt/a/solver") && exact(&r.id.clone()));
        for not in ["%", "sol_er", "Solver", "solve", "/opt/a", "*", ""] {
            assert!(!exact(not), "{not}");
        }
        assert!(pattern("*") && pattern("sol*") && pattern("s?lver") && pattern("/opt/*"));
        for not in ["Sol*", "sol_er", "%", "solver?", "/opt/b/*"] {
            assert!(!pattern(not), "{not}");
        }
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(!glob_matches("a*b*c", "axxbyy"));
        assert!(glob_matches("**", ""));
        // No blow-up on many stars.
        assert!(!glob_matches(&"*a".repeat(50), &"a".repeat(40)));
    }

    #[test]
    fn cpu_lists_are_ranges_with_bounded_ids() {
        assert_eq!(parse_cpu_ranges("0-3,8"), Ok(vec![(0, 3), (8, 8)]));
        for bad in ["", "x", "3-1", "4294967295", "0-65536", "-1"] {
            assert!(parse_cpu_ranges(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_record_names_only_cpus_of_its_own_cpu_set() {
        record("0-1", &[1, 0]).check().unwrap();
        let e = record("0", &[1, 1]).check().unwrap_err().to_string();
        assert!(e.contains("CPU 1, outside the record's CPU set 0"), "{e}");
        let e = record("0-1", &[4294967295])
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("CPU 4294967295"), "{e}");
        assert!(record("0-1", &[]).check().is_err());
        assert!(record("0-1", &vec![0; MAX_THREADS + 1]).check().is_err());
        let mut r = record("0-1", &[0]);
        r.busy = Some(vec![7]);
        assert!(r.check().unwrap_err().0.contains("busy uses CPU 7"));
        let mut r = record("0-1", &[0]);
        r.runner_up = Some(RememberedPinning {
            label: "x".into(),
            cpus: Some(vec![2]),
            team: None,
        });
        assert!(r.check().unwrap_err().0.contains("runner_up"));
        let mut r = record("0-1", &[0]);
        r.phases = vec![
            PhaseDecision {
                phase: "a".into(),
                pinning: RememberedPinning {
                    label: "x".into(),
                    cpus: Some(vec![0]),
                    team: None,
                },
                rate: None,
            };
            MAX_PHASES + 1
        ];
        assert!(r.check().unwrap_err().0.contains("phases"));
        let mut r = record("0-1", &[0]);
        r.pinning.label = "x".repeat(MAX_TEXT + 1);
        assert!(r.check().unwrap_err().0.contains("pinning.label"));
        let mut r = record("0-1", &[0]);
        r.created = f64::NAN;
        assert!(r.check().unwrap_err().0.contains("created"));
    }
}
