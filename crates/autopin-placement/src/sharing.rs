//! Sharing-aware strategies from the thread-pinning study: given an n×n matrix of how much
//! data each pair of threads shares, pair threads by maximum-weight matching (Edmonds, from
//! rustworkx-core) and/or split them into k groups by graph partitioning, then place partners
//! close together.
//!
//! - LP_COMPACT: pairs on consecutive pair slots (SMT siblings of one core, else two cores
//!   under one shared cache), filling the machine compactly.
//! - LP_SCATTER: the same pairs, spread round robin over packages.
//! - GP: k-way partition over packages (or LLC groups on a one-package machine), each part
//!   placed compactly in its domain.
//! - LPGP: pairs first, then the pairs partitioned over the domains.
//! - GPLP: partition first, then pairs inside each part.
//!
//! The partitioner is our own: greedy growth from the heaviest vertex, then Kernighan–Lin
//! style swaps between parts until no swap increases the weight kept inside parts. Part sizes
//! are fixed by the domains' capacity (threads split evenly), so swaps keep the balance.

use std::path::Path;

use autopin_topology::{Machine, ObjId};
use rustworkx_core::petgraph::graph::UnGraph;

use crate::error::PlacementError;
use crate::expr::even_quotas;
use crate::view::{interleave, View};

pub const SHARING_STRATEGIES: &str = "LP_COMPACT, LP_SCATTER, GP, LPGP, GPLP";

/// A symmetric, non-negative thread-sharing matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct SharingMatrix {
    pub weights: Vec<Vec<f64>>,
}

impl SharingMatrix {
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    fn w(&self, a: usize, b: usize) -> f64 {
        self.weights[a][b]
    }

    /// Rows of numbers separated by whitespace and/or commas; blank lines and lines starting
    /// with `#` are skipped. Errors name the file and line.
    pub fn parse(text: &str, path: &Path) -> Result<SharingMatrix, PlacementError> {
        let err = |line: usize, message: String| PlacementError::Matrix {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut rows: Vec<(usize, Vec<f64>)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let mut row = Vec::new();
            for (col, tok) in t
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .enumerate()
            {
                let v: f64 = tok.parse().map_err(|_| {
                    err(
                        i + 1,
                        format!("column {}: '{tok}' is not a number", col + 1),
                    )
                })?;
                if !v.is_finite() || v < 0.0 {
                    return Err(err(
                        i + 1,
                        format!("column {}: {tok} must be a finite number ≥ 0", col + 1),
                    ));
                }
                row.push(v);
            }
            rows.push((i + 1, row));
        }
        let n = rows.len();
        if n == 0 {
            return Err(err(
                0,
                "no rows: expected an n×n matrix of non-negative numbers".into(),
            ));
        }
        for (line, row) in &rows {
            if row.len() != n {
                return Err(err(
                    *line,
                    format!(
                        "row has {} values but the matrix has {n} rows (it must be square)",
                        row.len()
                    ),
                ));
            }
        }
        for i in 0..n {
            for j in 0..i {
                let (a, b) = (rows[i].1[j], rows[j].1[i]);
                if (a - b).abs() > 1e-9 * a.abs().max(b.abs()).max(1.0) {
                    return Err(err(
                        rows[i].0,
                        format!(
                            "not symmetric: entry ({}, {}) is {a} but ({}, {}) on line {} is {b}",
                            i + 1,
                            j + 1,
                            j + 1,
                            i + 1,
                            rows[j].0
                        ),
                    ));
                }
            }
        }
        Ok(SharingMatrix {
            weights: rows.into_iter().map(|(_, r)| r).collect(),
        })
    }

    #[cfg(feature = "files")]
    pub fn read(path: &Path) -> Result<SharingMatrix, PlacementError> {
        let text =
            autopin_files::read_to_string_bounded(path, autopin_files::MAX_INPUT).map_err(|e| {
                PlacementError::Matrix {
                    path: path.to_path_buf(),
                    line: 0,
                    message: e.to_string(),
                }
            })?;
        Self::parse(&text, path)
    }
}

#[cfg(feature = "files")]
pub fn sharing_pinning(
    m: &Machine,
    strategy: &str,
    matrix: &Path,
) -> Result<Vec<u32>, PlacementError> {
    let key = strategy.trim().to_ascii_uppercase().replace('-', "_");
    if !["LP_COMPACT", "LP_SCATTER", "GP", "LPGP", "GPLP"].contains(&key.as_str()) {
        return Err(PlacementError::UnknownPolicy {
            name: strategy.to_string(),
            valid: SHARING_STRATEGIES.into(),
        });
    }
    let s = SharingMatrix::read(matrix)?;
    place_with_matrix(m, &key, &s)
}

/// The strategies on an already parsed matrix (thread i → returned CPU i).
pub fn place_with_matrix(
    m: &Machine,
    key: &str,
    s: &SharingMatrix,
) -> Result<Vec<u32>, PlacementError> {
    let v = View::new(m);
    let n = s.len();
    if n > v.pus.len() {
        return Err(PlacementError::threads(format!(
            "the sharing matrix has {n} threads but only {} CPUs are allowed ({})",
            v.pus.len(),
            v.allowed
        )));
    }
    let all: Vec<usize> = (0..n).collect();
    // u32::MAX: not placed yet.
    let mut cpu_of = vec![u32::MAX; n];
    match key {
        "LP_COMPACT" => {
            let groups = pairs(s, &all);
            assign(&v, &groups, &v.pus, &mut cpu_of);
        }
        "LP_SCATTER" => {
            let groups = pairs(s, &all);
            let doms = domains(&v);
            // Pair slots of each package (two adjacent PUs), taken round robin.
            let slots: Vec<Vec<Vec<ObjId>>> = doms
                .iter()
                .map(|d| d.chunks(2).map(|c| c.to_vec()).collect())
                .collect();
            let flat: Vec<Vec<ObjId>> = interleave(
                &slots
                    .iter()
                    .map(|d| (0..d.len()).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
            )
            .into_iter()
            .zip(round_robin_domains(&slots))
            .map(|(i, d)| slots[d][i].clone())
            .collect();
            place_pairs(&v, &groups, &flat, &mut cpu_of);
        }
        "GP" | "LPGP" | "GPLP" => {
            let doms = domains(&v);
            let caps: Vec<usize> = doms.iter().map(|d| d.len()).collect();
            let sizes = even_quotas(n, &caps);
            let parts: Vec<Vec<usize>> = if key == "LPGP" {
                // Partition the pairs (as super-vertices), with part sizes in threads.
                let units = pairs(s, &all);
                let unit_w = |a: &Vec<usize>, b: &Vec<usize>| {
                    a.iter()
                        .flat_map(|&x| b.iter().map(move |&y| (x, y)))
                        .map(|(x, y)| s.w(x, y))
                        .sum::<f64>()
                };
                let weights: Vec<Vec<f64>> = units
                    .iter()
                    .map(|a| units.iter().map(|b| unit_w(a, b)).collect())
                    .collect();
                let sizes_units: Vec<usize> = units.iter().map(|u| u.len()).collect();
                let p = partition(&weights, &sizes_units, &sizes);
                p.into_iter()
                    .map(|part| part.into_iter().flat_map(|u| units[u].clone()).collect())
                    .collect()
            } else {
                partition(&s.weights, &vec![1; n], &sizes)
            };
            for (part, dom) in parts.iter().zip(&doms) {
                let groups = if key == "GP" {
                    part.iter().map(|&t| vec![t]).collect()
                } else {
                    pairs(s, part)
                };
                assign(&v, &groups, dom, &mut cpu_of);
            }
        }
        _ => {
            return Err(PlacementError::UnknownPolicy {
                name: key.to_string(),
                valid: SHARING_STRATEGIES.into(),
            })
        }
    }
    fill_unplaced(&v, &mut cpu_of);
    Ok(cpu_of)
}

/// Threads a strategy could not fit where it wanted (a pair that did not fit a part's room)
/// take the free allowed PUs in logical order, so every thread gets its own allowed CPU.
fn fill_unplaced(v: &View, cpu_of: &mut [u32]) {
    let used: std::collections::HashSet<u32> =
        cpu_of.iter().copied().filter(|&c| c != u32::MAX).collect();
    let mut free = v.pus.iter().map(|&p| v.os(p)).filter(|c| !used.contains(c));
    for c in cpu_of.iter_mut().filter(|c| **c == u32::MAX) {
        if let Some(f) = free.next() {
            *c = f;
        }
    }
}

/// The domains threads are partitioned over: packages, or LLC groups on a one-package
/// machine; each as its allowed PUs in logical order (partners land on adjacent PUs).
fn domains(v: &View) -> Vec<Vec<ObjId>> {
    let pk = v.packages();
    let objs = if pk.len() > 1 {
        pk
    } else {
        let llc =
            v.m.llc_level()
                .map(|l| v.m.caches_of_level(l))
                .unwrap_or_default();
        if llc.len() > 1 {
            llc
        } else {
            vec![0]
        }
    };
    objs.iter()
        .map(|&o| v.pus_in(o))
        .filter(|p| !p.is_empty())
        .collect()
}

/// Pairs by maximum-weight matching (all threads paired when their count is even); unpaired
/// threads come last as singletons. Each group is sorted, groups by their first thread.
fn pairs(s: &SharingMatrix, threads: &[usize]) -> Vec<Vec<usize>> {
    let k = threads.len();
    let max = threads
        .iter()
        .flat_map(|&a| threads.iter().map(move |&b| (a, b)))
        .map(|(a, b)| s.w(a, b))
        .fold(0.0, f64::max);
    // The matcher wants integer weights: scale so the largest weight is 2^40.
    let scale = if max > 0.0 {
        (1u64 << 40) as f64 / max
    } else {
        0.0
    };
    let mut g: UnGraph<(), i128> = UnGraph::with_capacity(k, k * k / 2);
    let nodes: Vec<_> = (0..k).map(|_| g.add_node(())).collect();
    for i in 0..k {
        for j in i + 1..k {
            // +1 so zero-sharing pairs still exist and max cardinality pairs everyone.
            let w = (s.w(threads[i], threads[j]) * scale).round() as i128 + 1;
            g.add_edge(nodes[i], nodes[j], w);
        }
    }
    let matched = rustworkx_core::max_weight_matching::max_weight_matching(
        &g,
        true,
        |e: rustworkx_core::petgraph::graph::EdgeReference<i128>| {
            Ok::<i128, std::convert::Infallible>(*e.weight())
        },
        false,
    )
    .unwrap_or_default();
    let mut in_pair = vec![false; k];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (a, b) in matched {
        in_pair[a] = true;
        in_pair[b] = true;
        let mut p = vec![threads[a], threads[b]];
        p.sort_unstable();
        groups.push(p);
    }
    groups.sort();
    let singles: Vec<Vec<usize>> = (0..k)
        .filter(|&i| !in_pair[i])
        .map(|i| vec![threads[i]])
        .collect();
    groups.extend(singles);
    groups
}

/// Groups onto consecutive PUs of `pus` (so a pair shares a core or the closest cache).
fn assign(v: &View, groups: &[Vec<usize>], pus: &[ObjId], cpu_of: &mut [u32]) {
    let mut at = 0;
    for g in groups {
        for &t in g {
            if let Some(&p) = pus.get(at) {
                cpu_of[t] = v.os(p);
            }
            at += 1;
        }
    }
}

/// Pairs onto pair slots in the given order; singletons take the remaining PUs.
fn place_pairs(v: &View, groups: &[Vec<usize>], slots: &[Vec<ObjId>], cpu_of: &mut [u32]) {
    let mut free: Vec<ObjId> = Vec::new();
    let mut si = 0;
    for g in groups.iter().filter(|g| g.len() == 2) {
        while si < slots.len() && slots[si].len() < 2 {
            free.extend(&slots[si]);
            si += 1;
        }
        if si < slots.len() {
            cpu_of[g[0]] = v.os(slots[si][0]);
            cpu_of[g[1]] = v.os(slots[si][1]);
            si += 1;
        }
    }
    free.extend(slots[si.min(slots.len())..].iter().flatten());
    for (g, &p) in groups.iter().filter(|g| g.len() == 1).zip(&free) {
        cpu_of[g[0]] = v.os(p);
    }
}

/// Splits vertices (with sizes) into parts of the given total sizes, maximizing the weight
/// kept inside parts. Greedy growth, then pairwise swaps of equal-size vertices.
pub(crate) fn partition(w: &[Vec<f64>], size: &[usize], part_sizes: &[usize]) -> Vec<Vec<usize>> {
    let n = w.len();
    let k = part_sizes.len();
    let mut part = vec![usize::MAX; n];
    let mut fill = vec![0usize; k];
    for p in 0..k {
        // Seed: the unassigned vertex with the largest total weight to other unassigned ones.
        loop {
            let cands: Vec<usize> = (0..n)
                .filter(|&x| part[x] == usize::MAX && fill[p] + size[x] <= part_sizes[p])
                .collect();
            if cands.is_empty() {
                break;
            }
            let score = |x: usize| -> f64 {
                if fill[p] == 0 {
                    (0..n)
                        .filter(|&y| part[y] == usize::MAX && y != x)
                        .map(|y| w[x][y])
                        .sum()
                } else {
                    (0..n).filter(|&y| part[y] == p).map(|y| w[x][y]).sum()
                }
            };
            let best = cands
                .iter()
                .copied()
                .fold(None, |acc: Option<(usize, f64)>, x| {
                    let s = score(x);
                    match acc {
                        Some((_, bs)) if bs >= s => acc,
                        _ => Some((x, s)),
                    }
                });
            let Some((x, _)) = best else { break };
            part[x] = p;
            fill[p] += size[x];
        }
    }
    // Anything left (sizes did not fit exactly) goes to the part with most room.
    for x in 0..n {
        if part[x] == usize::MAX {
            let p = (0..k)
                .max_by_key(|&p| (part_sizes[p].saturating_sub(fill[p]), usize::MAX - p))
                .unwrap_or(0);
            part[x] = p;
            fill[p] += size[x];
        }
    }
    // Kernighan–Lin style improvement: swap two equal-size vertices of different parts while
    // that raises the weight inside parts.
    let conn = |part: &[usize], x: usize, p: usize| -> f64 {
        (0..n)
            .filter(|&y| y != x && part[y] == p)
            .map(|y| w[x][y])
            .sum()
    };
    for _round in 0..(4 * n).max(8) {
        let mut best: Option<(f64, usize, usize)> = None;
        for a in 0..n {
            for b in a + 1..n {
                let (pa, pb) = (part[a], part[b]);
                if pa == pb || size[a] != size[b] {
                    continue;
                }
                let gain = conn(&part, a, pb) - conn(&part, a, pa) + conn(&part, b, pa)
                    - conn(&part, b, pb)
                    - 2.0 * w[a][b];
                if gain > 1e-12 && best.is_none_or_lower(gain) {
                    best = Some((gain, a, b));
                }
            }
        }
        let Some((_, a, b)) = best else { break };
        part.swap(a, b);
    }
    let mut parts = vec![Vec::new(); k];
    for x in 0..n {
        parts[part[x]].push(x);
    }
    parts
}

trait BestGain {
    fn is_none_or_lower(&self, gain: f64) -> bool;
}

impl BestGain for Option<(f64, usize, usize)> {
    fn is_none_or_lower(&self, gain: f64) -> bool {
        match self {
            None => true,
            Some((g, _, _)) => gain > *g,
        }
    }
}

/// For the round-robin order of `interleave` over the slot lists: which list each entry
/// came from.
fn round_robin_domains(slots: &[Vec<Vec<ObjId>>]) -> Vec<usize> {
    let lists: Vec<Vec<usize>> = slots
        .iter()
        .enumerate()
        .map(|(d, l)| vec![d; l.len()])
        .collect();
    interleave(&lists)
}
