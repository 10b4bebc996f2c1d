//! What `--migrate-memory` did after a decision: the report's structured record of page
//! migration (pages moved per node, pages that stayed and why, time, the kernel's own NUMA
//! balancing), filled by the platform and kept per decision.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One migration of a target's pages, as the platform carried it out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MigrationOutcome {
    /// The nodes the pages were sent to (round-robin when several).
    pub to_nodes: Vec<u32>,
    /// Pages moved, by the node they went to.
    pub moved: BTreeMap<u32, u64>,
    /// Resident pages that were already on one of `to_nodes`.
    pub already_there: u64,
    /// Pages that could not move, by reason.
    pub failed: BTreeMap<String, u64>,
    /// Mappings looked at, and the resident pages in them.
    pub mappings: usize,
    pub resident: u64,
    /// Wall time the migration took, seconds.
    pub seconds: f64,
    /// `kernel.numa_balancing`: None where the kernel has no such setting.
    pub numa_balancing: Option<bool>,
}

impl MigrationOutcome {
    pub fn total_moved(&self) -> u64 {
        self.moved.values().sum()
    }

    pub fn total_failed(&self) -> u64 {
        self.failed.values().sum()
    }

    /// What moved, in one line.
    pub fn summary(&self) -> String {
        let per: Vec<String> = self
            .moved
            .iter()
            .map(|(n, c)| format!("node {n}: {c}"))
            .collect();
        let failed: Vec<String> = self
            .failed
            .iter()
            .map(|(w, c)| format!("{c} {w}"))
            .collect();
        format!(
            "moved {} page(s) to node(s) {:?} ({}); {} already there; {} could not move{}; {} resident page(s) in {} mapping(s); {:.3} s; kernel.numa_balancing {}",
            self.total_moved(),
            self.to_nodes,
            if per.is_empty() { "none".into() } else { per.join(", ") },
            self.already_there,
            self.total_failed(),
            if failed.is_empty() { String::new() } else { format!(" ({})", failed.join(", ")) },
            self.resident,
            self.mappings,
            self.seconds,
            match self.numa_balancing {
                Some(true) => "on (the kernel also moves pages on its own)",
                Some(false) => "off",
                None => "not available",
            }
        )
    }
}

/// `--migrate-memory` after one decision (the first search's or a re-search's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MigrationRecord {
    /// When the decision was taken, seconds since autopin started.
    pub at: f64,
    /// The search the decision ended (0 = first, 1.. = re-searches).
    pub search: usize,
    /// The decided candidate's label.
    pub candidate: String,
    /// What moved; None when nothing was attempted (`skipped`) or the migration failed
    /// (`error`).
    pub outcome: Option<MigrationOutcome>,
    /// Why no page was asked to move (e.g. the decision spans every node).
    pub skipped: Option<String>,
    /// Why the migration failed (e.g. no permission to move the target's pages); the
    /// target's pages were left where they were.
    pub error: Option<String>,
}

impl MigrationRecord {
    /// One line for stderr and the report's text view.
    pub fn line(&self) -> String {
        let what = match (&self.outcome, &self.skipped, &self.error) {
            (Some(o), _, _) => o.summary(),
            (None, Some(why), _) => format!("nothing moved: {why}"),
            (None, None, Some(e)) => format!("failed, pages left where they were: {e}"),
            (None, None, None) => "nothing moved".into(),
        };
        format!(
            "--migrate-memory after the decision at {:.1} s ({}): {what}",
            self.at, self.candidate
        )
    }
}
