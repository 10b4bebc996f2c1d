//! Splitting one node among the local ranks of a job step, as mpibind and likwid-mpirun do:
//! every rank gets a disjoint share of the allowed CPUs, cut along the topology — packages
//! and NUMA nodes first (the coarser of the two outermost), then last-level caches, then cores, and PUs only when there are more
//! ranks than cores. Shares never reach outside the CPUs the machine model marks allowed (the
//! cgroup cpuset and affinity mask Slurm or the MPI launcher gave us).

use autopin_topology::{CpuSet, Machine, ObjId, ObjType};
use std::fmt;

/// Why a node cannot be split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// `--ranks 0`.
    NoRanks,
    /// The rank index is not below the number of ranks.
    RankOutOfRange { rank: usize, ranks: usize },
    /// More ranks than allowed CPUs: shares would have to overlap.
    TooManyRanks { ranks: usize, cpus: usize },
}

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SplitError::NoRanks => write!(f, "the number of ranks must be at least 1"),
            SplitError::RankOutOfRange { rank, ranks } => write!(
                f,
                "rank {rank} is out of range: with {ranks} rank(s) the ranks are 0..{}",
                ranks - 1
            ),
            SplitError::TooManyRanks { ranks, cpus } => write!(
                f,
                "{ranks} ranks cannot get disjoint CPUs: only {cpus} CPU(s) are allowed here"
            ),
        }
    }
}

impl std::error::Error for SplitError {}

/// The levels a node is cut along, outermost first.
#[derive(Clone, Copy, Debug)]
enum Level {
    Package,
    Numa,
    Llc,
    Core,
    Pu,
}

/// The cut order for these PUs: the coarser of packages and NUMA nodes first. Packages
/// usually hold NUMA nodes (sub-NUMA clustering), but on many machines a NUMA node holds
/// several packages (the 64fake and POWER7 dumps); cutting packages first there would give
/// some NUMA nodes more ranks than others.
fn levels(m: &Machine, pus: &[ObjId]) -> [Level; 5] {
    let count = |level| groups(m, pus, level).len();
    if count(Level::Numa) < count(Level::Package) {
        [
            Level::Numa,
            Level::Package,
            Level::Llc,
            Level::Core,
            Level::Pu,
        ]
    } else {
        [
            Level::Package,
            Level::Numa,
            Level::Llc,
            Level::Core,
            Level::Pu,
        ]
    }
}

/// The object (or NUMA node) a PU belongs to at a level; PUs with the same key stay together.
fn key(m: &Machine, pu: ObjId, level: Level) -> Option<usize> {
    match level {
        Level::Package => m.ancestor_of_type(pu, ObjType::Package),
        Level::Numa => m.numa_of(pu).first().map(|n| *n as usize),
        Level::Llc => {
            let llc = m.llc_level()?;
            m.ancestor(pu, |o| o.is_cache_level(llc))
        }
        Level::Core => m.ancestor_of_type(pu, ObjType::Core),
        Level::Pu => Some(pu),
    }
}

/// Allowed PUs grouped by their key at `level`, in logical order (groups keep first-seen order).
fn groups(m: &Machine, pus: &[ObjId], level: Level) -> Vec<Vec<ObjId>> {
    let mut out: Vec<(Option<usize>, Vec<ObjId>)> = Vec::new();
    for &pu in pus {
        let k = key(m, pu, level);
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(pu),
            None => out.push((k, vec![pu])),
        }
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// Cuts a run of groups into `n` contiguous chunks with about equal numbers of PUs, each
/// chunk made of whole groups (needs `groups.len() >= n`).
fn contiguous(groups: &[Vec<ObjId>], n: usize) -> Vec<Vec<ObjId>> {
    let total: usize = groups.iter().map(Vec::len).sum();
    let mut out = vec![Vec::new(); n];
    let mut taken = 0;
    let mut chunk = 0;
    for (i, g) in groups.iter().enumerate() {
        // Move to the next chunk once this one reached its fair share, while leaving at
        // least one group for every chunk still to fill.
        let left_groups = groups.len() - i;
        let left_chunks = n - chunk - 1;
        if !out[chunk].is_empty()
            && chunk + 1 < n
            && (taken * n >= total * (chunk + 1) || left_groups <= left_chunks)
        {
            chunk += 1;
        }
        taken += g.len();
        out[chunk].extend_from_slice(g);
    }
    out
}

/// How many of `n` ranks each group gets: at least one each, the rest in proportion to the
/// group's PUs (largest remainder), never more ranks than PUs (needs `n >= groups.len()`).
fn apportion(groups: &[Vec<ObjId>], n: usize) -> Vec<usize> {
    let total: usize = groups.iter().map(Vec::len).sum();
    let mut counts = vec![1usize; groups.len()];
    let spare = n - groups.len();
    let mut remainders: Vec<(usize, usize)> = Vec::new();
    let mut given = 0;
    for (i, g) in groups.iter().enumerate() {
        let exact = spare * g.len();
        let whole = (exact / total).min(g.len() - 1);
        counts[i] += whole;
        given += whole;
        remainders.push((exact % total, i));
    }
    // Largest remainder first; ties go to the earlier group (stable, deterministic).
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut left = spare - given;
    while left > 0 {
        let mut progressed = false;
        for &(_, i) in &remainders {
            if left == 0 {
                break;
            }
            if counts[i] < groups[i].len() {
                counts[i] += 1;
                left -= 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    counts
}

fn split_at(
    m: &Machine,
    pus: &[ObjId],
    n: usize,
    levels: &[Level; 5],
    level: usize,
) -> Vec<Vec<ObjId>> {
    if n == 1 {
        return vec![pus.to_vec()];
    }
    let gs = groups(m, pus, levels[level]);
    if gs.len() == 1 && level + 1 < levels.len() {
        return split_at(m, pus, n, levels, level + 1);
    }
    if gs.len() >= n {
        return contiguous(&gs, n);
    }
    let counts = apportion(&gs, n);
    gs.iter()
        .zip(counts)
        .flat_map(|(g, k)| split_at(m, g, k, levels, (level + 1).min(levels.len() - 1)))
        .collect()
}

/// The shares of all `ranks` local ranks, rank i → its CPUs. Deterministic: every rank that
/// computes it on the same machine gets the same answer, so no rank needs to ask another.
pub fn split_node(m: &Machine, ranks: usize) -> Result<Vec<CpuSet>, SplitError> {
    if ranks == 0 {
        return Err(SplitError::NoRanks);
    }
    let allowed = m.allowed_cpuset();
    let pus: Vec<ObjId> = m
        .pus()
        .into_iter()
        .filter(|&p| m.obj(p).os_index.is_some_and(|os| allowed.contains(os)))
        .collect();
    if ranks > pus.len() {
        return Err(SplitError::TooManyRanks {
            ranks,
            cpus: pus.len(),
        });
    }
    Ok(split_at(m, &pus, ranks, &levels(m, &pus), 0)
        .into_iter()
        .map(|share| share.iter().filter_map(|&p| m.obj(p).os_index).collect())
        .collect())
}

/// One rank's share (see [`split_node`]).
pub fn rank_share(m: &Machine, ranks: usize, rank: usize) -> Result<CpuSet, SplitError> {
    if ranks > 0 && rank >= ranks {
        return Err(SplitError::RankOutOfRange { rank, ranks });
    }
    Ok(split_node(m, ranks)?.swap_remove(rank))
}

/// The shares when local rank i works with a device local to `near[i]` (its GPU; None: no
/// device): the node is cut as [`split_node`] cuts it, and the shares go to the ranks that
/// overlap them most — pairs of (rank, share) taken by the CPUs they share near the
/// device, most first, ties to the lower rank and share — so a rank's share lies next to
/// its GPU whenever the cut allows it. Deterministic, as `split_node`.
pub fn split_node_near(
    m: &Machine,
    ranks: usize,
    near: &[Option<CpuSet>],
) -> Result<Vec<CpuSet>, SplitError> {
    let shares = split_node(m, ranks)?;
    let overlap = |r: usize, s: usize| {
        near.get(r)
            .and_then(Option::as_ref)
            .map_or(0, |n| shares[s].intersection(n).len())
    };
    let mut pairs: Vec<(usize, usize, usize)> = (0..ranks)
        .flat_map(|r| (0..ranks).map(move |s| (r, s)))
        .map(|(r, s)| (overlap(r, s), r, s))
        .collect();
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut share_of: Vec<Option<usize>> = vec![None; ranks];
    let mut taken = vec![false; ranks];
    for (_, r, s) in pairs {
        if share_of[r].is_none() && !taken[s] {
            share_of[r] = Some(s);
            taken[s] = true;
        }
    }
    Ok(share_of
        .into_iter()
        .map(|s| shares[s.expect("every rank gets a share")].clone())
        .collect())
}

/// Which GPU (an index into [`Machine::gpus`], `G<i>`) each of `ranks` local ranks works
/// with, from the variables that say which GPUs a job step or process may use:
/// `SLURM_STEP_GPUS`, `SLURM_JOB_GPUS`, `CUDA_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`,
/// `HIP_VISIBLE_DEVICES` (the first one set; numbers only, as Slurm and the runtimes number
/// GPUs in bus-id order). Rank r of `ranks` gets entry `r * len / ranks` of that list (one
/// GPU each with as many GPUs as ranks, consecutive ranks sharing one otherwise). None
/// when no such variable is set; an error (the reason) when the machine lists no GPU or
/// the variable names GPUs otherwise (UUIDs) or ones this machine does not list.
pub fn gpus_of_ranks(
    m: &Machine,
    ranks: usize,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Vec<usize>>, String> {
    let vars = [
        "SLURM_STEP_GPUS",
        "SLURM_JOB_GPUS",
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
    ];
    let Some((var, text)) = vars
        .iter()
        .find_map(|v| env(v).filter(|x| !x.trim().is_empty()).map(|x| (*v, x)))
    else {
        return Ok(None);
    };
    let count = m.gpus().len();
    if count == 0 {
        return Err(format!(
            "{var}={text} names GPUs, but this machine description lists none"
        ));
    }
    let mut list = Vec::new();
    for item in text.split(',').map(str::trim) {
        let i: usize = item.parse().map_err(|_| {
            format!("{var}={text}: '{item}' is not a GPU number (UUIDs cannot be matched to PCI devices here)")
        })?;
        if i >= count {
            return Err(format!(
                "{var}={text}: GPU {i} is not on this machine, which lists {count} GPU(s) (G0-G{})",
                count - 1
            ));
        }
        list.push(i);
    }
    Ok(Some(
        (0..ranks)
            .map(|r| list[r * list.len() / ranks.max(1)])
            .collect(),
    ))
}

/// What a rank working with GPU `G<gpu>` gets, in words (its subject is the caller's).
pub fn gpu_note(m: &Machine, gpu: usize) -> String {
    format!(
        "works with GPU G{gpu} ({}); its share lies next to it where the split allows",
        m.gpus().get(gpu).map_or("?", |d| d.busid.as_str())
    )
}

/// Why the GPUs named in the environment are not used for the split, in words.
pub fn gpus_unused(why: &str) -> String {
    format!("GPUs not used for the split: {why}")
}

/// One rank's share, next to its GPU when the environment names the GPUs (see
/// [`gpus_of_ranks`]), with a line that says which GPU and why, or why the GPUs were not
/// used (the plain split then applies).
pub fn rank_share_near_gpus(
    m: &Machine,
    ranks: usize,
    rank: usize,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(CpuSet, Option<String>), SplitError> {
    if ranks > 0 && rank >= ranks {
        return Err(SplitError::RankOutOfRange { rank, ranks });
    }
    match gpus_of_ranks(m, ranks, env) {
        Ok(None) => Ok((rank_share(m, ranks, rank)?, None)),
        Err(why) => Ok((rank_share(m, ranks, rank)?, Some(gpus_unused(&why)))),
        Ok(Some(gpus)) => {
            let all = m.gpus();
            let near: Vec<Option<CpuSet>> = gpus
                .iter()
                .map(|&g| Some(all[g].local_cpus.clone()))
                .collect();
            let share = split_node_near(m, ranks, &near)?.swap_remove(rank);
            Ok((
                share,
                Some(format!("rank {rank} {}", gpu_note(m, gpus[rank]))),
            ))
        }
    }
}

/// The same machine with only `share` allowed, so that candidates and policies planned on it
/// stay inside the share. Only narrows: CPUs outside the current allowed set stay out.
pub fn restrict_to(m: &Machine, share: &CpuSet) -> Machine {
    let mut out = m.clone();
    for o in &mut out.objects {
        if let (Some(pu), Some(os)) = (o.pu.as_mut(), o.os_index) {
            pu.allowed = pu.allowed && share.contains(os);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_topology::source::synthetic;

    fn machine(spec: &str) -> Machine {
        synthetic::parse(spec).unwrap()
    }

    fn lists(shares: &[CpuSet]) -> Vec<String> {
        shares.iter().map(|s| s.to_string()).collect()
    }

    fn assert_disjoint_cover(m: &Machine, shares: &[CpuSet]) {
        let mut seen = CpuSet::new();
        for s in shares {
            assert!(!s.is_empty(), "empty share in {shares:?}");
            for c in s.iter() {
                assert!(!seen.contains(c), "CPU {c} in two shares: {shares:?}");
                assert!(m.allowed_cpuset().contains(c));
                seen.insert(c);
            }
        }
        assert_eq!(seen, m.allowed_cpuset());
    }

    #[test]
    fn two_ranks_on_two_packages_get_one_package_each() {
        let m = machine("package:2 l3:1 core:4 pu:2");
        let s = split_node(&m, 2).unwrap();
        assert_eq!(lists(&s), ["0-7", "8-15"]);
        assert_disjoint_cover(&m, &s);
    }

    #[test]
    fn four_ranks_split_each_package_by_cores() {
        let m = machine("package:2 l3:1 core:4 pu:2");
        let s = split_node(&m, 4).unwrap();
        assert_eq!(lists(&s), ["0-3", "4-7", "8-11", "12-15"]);
    }

    #[test]
    fn l3_groups_come_before_cores() {
        let m = machine("package:1 l3:2 core:2 pu:2");
        assert_eq!(lists(&split_node(&m, 2).unwrap()), ["0-3", "4-7"]);
    }

    #[test]
    fn more_ranks_than_cores_split_smt_siblings() {
        let m = machine("package:1 core:2 pu:2");
        assert_eq!(lists(&split_node(&m, 4).unwrap()), ["0", "1", "2", "3"]);
        // Three ranks on two cores: one core stays whole, the other is cut in two.
        let s = split_node(&m, 3).unwrap();
        assert_disjoint_cover(&m, &s);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn fewer_ranks_than_packages_take_whole_packages() {
        let m = machine("package:4 core:2 pu:1");
        assert_eq!(lists(&split_node(&m, 2).unwrap()), ["0-3", "4-7"]);
        let s = split_node(&m, 3).unwrap();
        assert_disjoint_cover(&m, &s);
        for share in &s {
            // Whole packages only: each share is a multiple of a package's 2 CPUs.
            assert_eq!(share.len() % 2, 0, "{s:?}");
        }
    }

    #[test]
    fn odd_ranks_over_packages_are_proportional_and_disjoint() {
        let m = machine("package:2 numa:2 l3:1 core:6 pu:2");
        for n in 1..=m.allowed_cpuset().len() {
            let s = split_node(&m, n).unwrap();
            assert_eq!(s.len(), n);
            assert_disjoint_cover(&m, &s);
        }
        // One rank per NUMA node (6 cores = 12 PUs each), then three whole cores each.
        let s = split_node(&m, 4).unwrap();
        assert_eq!(lists(&s), ["0-11", "12-23", "24-35", "36-47"]);
        let s = split_node(&m, 8).unwrap();
        assert!(s.iter().all(|x| x.len() == 6), "{s:?}");
        // Three ranks on one package's two NUMA nodes never straddle a node: one gets a
        // node, the other two halve the other (ties go to the first node).
        let s = split_node(&m, 6).unwrap();
        assert_eq!(
            lists(&s),
            ["0-5", "6-11", "12-23", "24-29", "30-35", "36-47"]
        );
    }

    #[test]
    fn shares_stay_inside_the_allowed_cpus() {
        let m = machine("package:2 core:4 pu:1");
        let allowed = CpuSet::from_cpus([1, 2, 5, 6]);
        let r = restrict_to(&m, &allowed);
        let s = split_node(&r, 2).unwrap();
        assert_eq!(lists(&s), ["1-2", "5-6"]);
        assert_disjoint_cover(&r, &s);
        // Restricting never widens.
        let rr = restrict_to(&r, &CpuSet::from_cpus([0, 1]));
        assert_eq!(rr.allowed_cpuset(), CpuSet::from_cpus([1]));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let m = machine("package:1 core:2 pu:1");
        assert_eq!(split_node(&m, 0), Err(SplitError::NoRanks));
        assert_eq!(
            split_node(&m, 3),
            Err(SplitError::TooManyRanks { ranks: 3, cpus: 2 })
        );
        let e = rank_share(&m, 2, 2).unwrap_err();
        assert!(e.to_string().contains("ranks are 0..1"), "{e}");
        assert_eq!(rank_share(&m, 2, 1).unwrap(), CpuSet::from_cpus([1]));
    }
}
