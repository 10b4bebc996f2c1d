//! `NumaMigrator`: after a decision that moves threads to other NUMA nodes, move the
//! target's pages after them with `migrate_pages(2)` (first-touch placement would otherwise
//! leave the memory behind on the old node).

use autopin_topology::Machine;
use std::collections::BTreeSet;

pub use autopin_engine::run::describe_single_node;

/// The NUMA nodes local to these CPUs.
pub fn nodes_of(m: &Machine, cpus: &[u32]) -> BTreeSet<u32> {
    cpus.iter()
        .filter_map(|c| m.pu_by_os(*c))
        .flat_map(|id| m.numa_of(id))
        .collect()
}

/// Moves pages of `pid` from every other node to the nodes of `cpus`. Returns a line for
/// the report.
pub fn migrate(m: &Machine, pid: i32, cpus: &[u32]) -> Result<String, String> {
    if let Some(s) = describe_single_node(m) {
        return Ok(s);
    }
    let to = nodes_of(m, cpus);
    let all: BTreeSet<u32> = m.numa_nodes.iter().map(|n| n.os_index).collect();
    let from: BTreeSet<u32> = all.difference(&to).copied().collect();
    if to.is_empty() || from.is_empty() {
        return Ok(
            "--migrate-memory: the chosen CPUs span every node; pages stay where they are".into(),
        );
    }
    let maxnode = all.iter().max().map_or(1, |m| m + 1) as usize;
    let words = maxnode.div_ceil(64);
    let mask = |set: &BTreeSet<u32>| {
        let mut w = vec![0u64; words];
        for n in set {
            w[*n as usize / 64] |= 1 << (n % 64);
        }
        w
    };
    let (fm, tm) = (mask(&from), mask(&to));
    // SAFETY: the masks live across the call and are `words` u64s long, covering maxnode bits.
    let r = unsafe {
        libc::syscall(
            libc::SYS_migrate_pages,
            pid as libc::c_long,
            (maxnode + 1) as libc::c_ulong,
            fm.as_ptr(),
            tm.as_ptr(),
        )
    };
    if r < 0 {
        return Err(format!(
            "migrate_pages({pid}): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(format!(
        "--migrate-memory: moved pages of {pid} from node(s) {} to {} ({r} page(s) could not be moved)",
        join(&from),
        join(&to)
    ))
}

/// Node numbers as a person lists them: `0, 2`.
fn join(set: &BTreeSet<u32>) -> String {
    set.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
