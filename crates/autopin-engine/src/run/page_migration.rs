//! `--migrate-memory` on the run path: after each decision — the first search's and every
//! re-search's, never a probe — the target's pages follow its threads to their NUMA nodes.
//! Whether there is anything to move is decided here, from the machine model alone; the
//! moving itself is the platform's ([`Platform::migrate_memory`]).

use super::env::Platform;
use crate::report::{DecisionRecord, MigrationRecord};
use autopin_topology::Machine;
use std::collections::BTreeSet;

/// Some(explanation) when there is nothing to migrate between (one NUMA node or none).
pub fn describe_single_node(m: &Machine) -> Option<String> {
    let nodes = m.numa_nodes.len();
    (nodes <= 1).then(|| {
        format!(
            "--migrate-memory: this machine has {nodes} NUMA node(s); all memory is equally near every CPU, so there is nothing to migrate"
        )
    })
}

/// The NUMA nodes local to these CPUs. Only nodes with CPUs count: a memory-only node near
/// a package is not where that package's threads' pages belong by default.
pub fn nodes_of(m: &Machine, cpus: &[u32]) -> BTreeSet<u32> {
    let with_cpus = nodes_with_cpus(m);
    cpus.iter()
        .filter_map(|c| m.pu_by_os(*c))
        .flat_map(|id| m.numa_of(id))
        .filter(|n| with_cpus.contains(n))
        .collect()
}

fn nodes_with_cpus(m: &Machine) -> BTreeSet<u32> {
    m.numa_nodes
        .iter()
        .filter(|n| !n.cpuset.is_empty())
        .map(|n| n.os_index)
        .collect()
}

/// Why the pages of a decision on `cpus` (None: unpinned) stay where they are; None when
/// they should move.
pub fn nothing_to_move(m: &Machine, cpus: Option<&[u32]>) -> Option<String> {
    if let Some(why) = describe_single_node(m) {
        return Some(why);
    }
    let Some(cpus) = cpus else {
        return Some("the decision is unpinned (the OS places threads and pages)".into());
    };
    let to = nodes_of(m, cpus);
    if to.is_empty() {
        return Some(format!(
            "the chosen CPUs {cpus:?} belong to no NUMA node with CPUs"
        ));
    }
    if to == nodes_with_cpus(m) {
        return Some(
            "the chosen CPUs span every node, so every page is already near some of them".into(),
        );
    }
    None
}

/// Moves `pid`'s pages after decision `d` (when there is anything to move) and says what
/// happened.
pub fn after_decision(
    m: &Machine,
    pid: i32,
    d: &DecisionRecord,
    files: bool,
    platform: &mut dyn Platform,
) -> MigrationRecord {
    let mut rec = MigrationRecord {
        at: d.at,
        search: d.search,
        candidate: d.candidate.clone(),
        ..MigrationRecord::default()
    };
    if let Some(why) = nothing_to_move(m, d.cpus.as_deref()) {
        rec.skipped = Some(why);
        return rec;
    }
    let cpus = d.cpus.as_deref().unwrap_or_default();
    match platform.migrate_memory(m, pid, cpus, files) {
        Ok(o) => rec.outcome = Some(o),
        Err(e) => rec.error = Some(e.to_string()),
    }
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_nodes() -> Machine {
        autopin_topology::source::synthetic::parse("package:2 numa:1 core:2 pu:1").unwrap()
    }

    #[test]
    fn pages_move_only_when_the_decision_leaves_some_node() {
        let m = two_nodes();
        assert_eq!(m.numa_nodes.len(), 2);
        let one = autopin_topology::source::synthetic::parse("package:2 core:2 pu:1").unwrap();
        assert!(nothing_to_move(&one, Some(&[0]))
            .unwrap()
            .contains("1 NUMA node"));
        assert!(nothing_to_move(&m, None).unwrap().contains("unpinned"));
        assert!(nothing_to_move(&m, Some(&[0, 2]))
            .unwrap()
            .contains("every node"));
        assert_eq!(nothing_to_move(&m, Some(&[2, 3])), None);
        assert_eq!(nodes_of(&m, &[2, 3]), BTreeSet::from([1]));
    }
}
