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
/// Errors: a list that cannot be read, a node that does not exist, an empty selection,
/// `--preferred` with several nodes. (On a machine with one NUMA node a valid policy
/// changes nothing; whether to say so is the caller's business, as numactl accepts it.)
pub fn mem_policy(
    mode: MemPolicyMode,
    nodes: Option<&str>,
    m: &Machine,
) -> Result<MemPolicy, PlacementError> {
    let option = mode.option();
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

/// One entry of a node list, as written.
#[derive(Debug, Clone, Copy, PartialEq)]
enum NodeRef {
    /// An OS node number.
    Node(u32),
    /// likwid's `M<i>`: the i-th NUMA domain.
    Domain(usize),
}

/// A node list's syntax: `all`, or entries and ranges with their positions in `text`, and
/// whether it is inverted (`!`). Nothing here looks at the machine.
struct NodeListSyntax {
    invert: bool,
    all: bool,
    /// (position, first, last): a single entry has first == last.
    items: Vec<(usize, Placed, Placed)>,
}

/// A node reference and its position in the list's text.
type Placed = (usize, NodeRef);

type SyntaxError = (usize, String);

fn parse_node_list(text: &str) -> Result<NodeListSyntax, SyntaxError> {
    let t = text.trim();
    if t.is_empty() {
        return Err((0, "no nodes given".into()));
    }
    let (invert, body, offset) = match t.strip_prefix('!') {
        Some(rest) => (true, rest, 1),
        None => (false, t, 0),
    };
    if body == "all" {
        return Ok(NodeListSyntax {
            invert,
            all: true,
            items: vec![],
        });
    }
    let one = |s: &str, at: usize| -> Result<Placed, SyntaxError> {
        match s.strip_prefix('M') {
            Some(i) => i
                .parse()
                .map(|i| (at, NodeRef::Domain(i)))
                .map_err(|_| (at, format!("`{s}` is not a NUMA domain"))),
            None => s
                .parse()
                .map(|n| (at, NodeRef::Node(n)))
                .map_err(|_| (at, format!("`{s}` is not a node number"))),
        }
    };
    let mut items = Vec::new();
    let mut pos = offset;
    for part in body.split(',') {
        let here = pos;
        pos += part.len() + 1;
        if part.is_empty() {
            return Err((here, "empty entry".into()));
        }
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (one(a, here)?, one(b, here + a.len() + 1)?),
            None => {
                let x = one(part, here)?;
                (x, x)
            }
        };
        items.push((here, a, b));
    }
    Ok(NodeListSyntax {
        invert,
        all: false,
        items,
    })
}

/// numactl/likwid node list → OS node indexes.
pub fn node_list(option: &str, text: &str, m: &Machine) -> Result<BTreeSet<u32>, PlacementError> {
    let syntax = parse_node_list(text).map_err(|(at, msg)| err(option, text, at, msg, m))?;
    let all: BTreeSet<u32> = m.numa_nodes.iter().map(|n| n.os_index).collect();
    let resolve =
        |(at, r): (usize, NodeRef)| -> Result<u32, PlacementError> {
            match r {
                NodeRef::Domain(i) => all.iter().nth(i).copied().ok_or_else(|| {
                    err(option, text, at, format!("there is no NUMA domain M{i}"), m)
                }),
                NodeRef::Node(n) if all.contains(&n) => Ok(n),
                NodeRef::Node(n) => Err(err(
                    option,
                    text,
                    at,
                    format!("there is no NUMA node {n}"),
                    m,
                )),
            }
        };
    // `all` and `!list` mean the machine's memory, not a GPU's: a GPU's memory exposed as
    // a NUMA node (NVLink-C2C, coherent HBM) has no CPUs, and spreading a program's pages
    // over it takes the GPU's memory and bandwidth. Named explicitly, it is still allowed.
    let everyday: BTreeSet<u32> = m
        .numa_nodes
        .iter()
        .filter(|n| n.kind.as_deref() != Some("GPUMemory"))
        .map(|n| n.os_index)
        .collect();
    let mut set = BTreeSet::new();
    if syntax.all {
        set = everyday.clone();
    }
    for (here, first, last) in syntax.items {
        let (a, b) = (resolve(first)?, resolve(last)?);
        if a > b {
            return Err(err(
                option,
                text,
                here,
                format!("range {a}-{b} runs backwards"),
                m,
            ));
        }
        set.extend(all.range(a..=b));
    }
    if syntax.invert {
        set = everyday.difference(&set).copied().collect();
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
    fn all_and_inverted_lists_leave_gpu_memory_out_unless_named() {
        let mut m = four();
        m.numa_nodes[3].kind = Some("GPUMemory".into());
        let l = |s| {
            node_list("--interleave", s, &m)
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(l("all"), [0, 1, 2]);
        assert_eq!(l("!0"), [1, 2]);
        assert_eq!(l("2-3"), [2, 3], "named, the GPU's node is taken");
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
        // numactl accepts a policy naming the only node; one naming another node is wrong.
        assert_eq!(
            mem_policy(MemPolicyMode::Bind, Some("0"), &one)
                .unwrap()
                .nodes,
            vec![0]
        );
        let s = mem_policy(MemPolicyMode::Bind, Some("1"), &one)
            .unwrap_err()
            .to_string();
        assert!(s.contains("no NUMA node 1"), "{s}");
        // An unreadable list is a syntax error.
        let e = mem_policy(MemPolicyMode::Interleave, Some("0-x"), &one).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("`x` is not a node number"), "{s}");
        match e {
            PlacementError::Expr { position, .. } => {
                assert_eq!(position, "--interleave 0-".len())
            }
            other => panic!("{other:?}"),
        }
        let s = mem_policy(MemPolicyMode::Bind, Some("0,,1"), &one)
            .unwrap_err()
            .to_string();
        assert!(s.contains("empty entry"), "{s}");
    }
}
