//! Memory policies for a program autopin starts, as numactl(8) spells them: `--membind`,
//! `--interleave`, `--preferred` with a node list, or `--localalloc`. Node lists take
//! numactl's syntax (`0-1,3`, `all`, `!0` = every node but 0) and likwid's NUMA domain names
//! (`M1`, `M0,M1`; `M<i>` is the i-th node in logical order). Pure: the machine model says
//! which nodes exist; applying the policy is the launcher's job.

use crate::error::PlacementError;
use autopin_topology::Machine;
use std::collections::BTreeSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemPolicyMode {
    /// Allocate only on these nodes (MPOL_BIND).
    Bind,
    /// Spread pages round-robin over these nodes (MPOL_INTERLEAVE).
    Interleave,
    /// Prefer this node, fall back to others when it is full (MPOL_PREFERRED).
    Preferred,
    /// Allocate on the node of the CPU that touches the page first (MPOL_LOCAL).
    Local,
}

impl MemPolicyMode {
    pub fn option(self) -> &'static str {
        match self {
            MemPolicyMode::Bind => "--membind",
            MemPolicyMode::Interleave => "--interleave",
            MemPolicyMode::Preferred => "--preferred",
            MemPolicyMode::Local => "--localalloc",
        }
    }
}

/// A resolved policy: the mode and the OS indexes of its nodes (empty for `Local`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemPolicy {
    pub mode: MemPolicyMode,
    pub nodes: Vec<u32>,
}

impl std::fmt::Display for MemPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self.nodes.iter().map(|n| n.to_string()).collect();
        match self.mode {
            MemPolicyMode::Local => f.write_str("--localalloc"),
            m => write!(f, "{}={}", m.option(), list.join(",")),
        }
    }
}

fn err(option: &str, text: &str, position: usize, message: String, m: &Machine) -> PlacementError {
    PlacementError::expr(
        &format!("{option} {text}"),
        option.len() + 1 + position,
        message,
        valid_text(m),
    )
}

fn valid_text(m: &Machine) -> String {
    let nodes: Vec<String> = m
        .numa_nodes
        .iter()
        .map(|n| n.os_index.to_string())
        .collect();
    format!(
        "nodes {} (as numbers, ranges like 0-1, `all`, `!N` for all but N, or likwid's M0..M{})",
        nodes.join(","),
        m.numa_nodes.len().saturating_sub(1)
    )
}

/// Resolves `mode` with its node list (ignored for `Local`) against the machine.
/// Errors: a node that does not exist, an empty selection, `--preferred` with several
/// nodes, any policy on a machine with one NUMA node (it would change nothing).
pub fn mem_policy(
    mode: MemPolicyMode,
    nodes: Option<&str>,
    m: &Machine,
) -> Result<MemPolicy, PlacementError> {
    let option = mode.option();
    if m.numa_nodes.len() <= 1 {
        return Err(PlacementError::Threads {
            message: format!(
                "{option}: this machine has {} NUMA node(s), so a memory policy changes nothing; leave it out",
                m.numa_nodes.len()
            ),
        });
    }
    if mode == MemPolicyMode::Local {
        return Ok(MemPolicy {
            mode,
            nodes: vec![],
        });
    }
    let text = nodes.unwrap_or("");
    let set = node_list(option, text, m)?;
    if mode == MemPolicyMode::Preferred && set.len() != 1 {
        return Err(err(
            option,
            text,
            0,
            format!("--preferred takes one node, not {}", set.len()),
            m,
        ));
    }
    Ok(MemPolicy {
        mode,
        nodes: set.into_iter().collect(),
    })
}

/// numactl/likwid node list → OS node indexes.
pub fn node_list(option: &str, text: &str, m: &Machine) -> Result<BTreeSet<u32>, PlacementError> {
    let all: BTreeSet<u32> = m.numa_nodes.iter().map(|n| n.os_index).collect();
    let t = text.trim();
    if t.is_empty() {
        return Err(err(option, text, 0, "no nodes given".into(), m));
    }
    let (invert, body, offset) = match t.strip_prefix('!') {
        Some(rest) => (true, rest, 1),
        None => (false, t, 0),
    };
    let mut set = BTreeSet::new();
    if body == "all" {
        set = all.clone();
    } else {
        let mut pos = offset;
        for part in body.split(',') {
            let here = pos;
            pos += part.len() + 1;
            let bad = |msg: String| err(option, text, here, msg, m);
            let one = |s: &str, at: usize| -> Result<u32, PlacementError> {
                if let Some(i) = s.strip_prefix('M') {
                    let i: usize = i.parse().map_err(|_| {
                        err(option, text, at, format!("`{s}` is not a NUMA domain"), m)
                    })?;
                    let mut nodes: Vec<u32> = all.iter().copied().collect();
                    nodes.sort_unstable();
                    return nodes.get(i).copied().ok_or_else(|| {
                        err(option, text, at, format!("there is no NUMA domain {s}"), m)
                    });
                }
                let n: u32 = s
                    .parse()
                    .map_err(|_| err(option, text, at, format!("`{s}` is not a node number"), m))?;
                if !all.contains(&n) {
                    return Err(err(
                        option,
                        text,
                        at,
                        format!("there is no NUMA node {n}"),
                        m,
                    ));
                }
                Ok(n)
            };
            if part.is_empty() {
                return Err(bad("empty entry".into()));
            }
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (one(a, here)?, one(b, here + a.len() + 1)?);
                    if a > b {
                        return Err(bad(format!("range {a}-{b} runs backwards")));
                    }
                    set.extend(all.range(a..=b));
                }
                None => {
                    set.insert(one(part, here)?);
                }
            }
        }
    }
    if invert {
        set = all.difference(&set).copied().collect();
    }
    if set.is_empty() {
        return Err(err(option, text, 0, "this selects no node".into(), m));
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Machine {
        autopin_topology::source::synthetic::parse("package:2 numa:1 core:2 pu:1").unwrap()
    }
    fn four() -> Machine {
        autopin_topology::source::synthetic::parse("package:4 numa:1 core:1 pu:1").unwrap()
    }

    #[test]
    fn numactl_lists_and_likwid_domains() {
        let m = four();
        let l = |s| {
            node_list("--membind", s, &m)
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(l("0-1"), vec![0, 1]);
        assert_eq!(l("all"), vec![0, 1, 2, 3]);
        assert_eq!(l("!0"), vec![1, 2, 3]);
        assert_eq!(l("!1-2"), vec![0, 3]);
        assert_eq!(l("M1"), vec![1]);
        assert_eq!(l("M0,M3"), vec![0, 3]);
        assert_eq!(l("3,0"), vec![0, 3]);
    }

    #[test]
    fn policies() {
        let m = two();
        let p = mem_policy(MemPolicyMode::Interleave, Some("all"), &m).unwrap();
        assert_eq!(p.nodes, vec![0, 1]);
        assert_eq!(p.to_string(), "--interleave=0,1");
        let p = mem_policy(MemPolicyMode::Local, None, &m).unwrap();
        assert!(p.nodes.is_empty());
        assert_eq!(
            mem_policy(MemPolicyMode::Preferred, Some("M1"), &m)
                .unwrap()
                .nodes,
            vec![1]
        );
    }

    #[test]
    fn bad_input_says_where_and_what_is_valid() {
        let m = two();
        let e = mem_policy(MemPolicyMode::Bind, Some("0,5"), &m).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("no NUMA node 5"), "{s}");
        assert!(s.contains("nodes 0,1"), "{s}");
        match e {
            PlacementError::Expr { position, .. } => assert_eq!(position, "--membind ".len() + 2),
            other => panic!("{other:?}"),
        }
        for bad in ["", "M2", "x", "1-0", "!all", "0,,1"] {
            assert!(
                mem_policy(MemPolicyMode::Bind, Some(bad), &m).is_err(),
                "{bad}"
            );
        }
        assert!(mem_policy(MemPolicyMode::Preferred, Some("0-1"), &m).is_err());
        let one = autopin_topology::source::synthetic::parse("package:1 core:2 pu:1").unwrap();
        let s = mem_policy(MemPolicyMode::Bind, Some("0"), &one)
            .unwrap_err()
            .to_string();
        assert!(s.contains("1 NUMA node(s)"), "{s}");
    }
}
