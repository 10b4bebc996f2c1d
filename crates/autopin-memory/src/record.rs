//! What is remembered of a decision, and what became of it.

use crate::key::DecisionKey;
use serde::{Deserialize, Serialize};

/// A pinning as the store keeps it: its label and its CPU list in thread order (None: the
/// OS decides).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RememberedPinning {
    pub label: String,
    pub cpus: Option<Vec<u32>>,
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
}
