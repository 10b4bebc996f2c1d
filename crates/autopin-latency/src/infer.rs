//! From a latency matrix to structure: levels of groups, their roles, and a confidence.
//!
//! 1. Cluster CPUs by average linkage ([`crate::cluster`]); candidate levels are where merge
//!    heights jump by a relative factor, so no absolute threshold is needed and continuous
//!    mesh bands (no jump inside) stay one level.
//! 2. Keep a candidate only if it is regular: the groups that grew at that level all have the
//!    same size. Two repairs keep real data usable: at the first level single CPUs may stay
//!    alone (hybrid CPUs: SMT P-cores beside single-thread E-cores), and when exactly one
//!    group's worth of CPUs is left over it becomes the missing group (on multi-socket AMD
//!    the second socket's cache-to-cache transfers are as slow as crossing sockets, because
//!    the measured line lives in the first socket's memory, so only one socket "merges").
//! 3. Check that every group is seen alike from every outsider (the definition of a
//!    component), count how regular the tree is, and score the confidence.
//! 4. Name the levels: SMT, shared caches, packages, groups in between or above. A level
//!    is taken as sockets only when the step above it is beyond what dies on one package
//!    show ([`DIE_STEP_MAX`]) and it is no small cache cluster ([`CLUSTER_MAX_NS`]);
//!    otherwise it is a "group of N cores, X ns apart" (latency alone cannot tell a die
//!    from a socket). Where the OS topology is known, [`cross_check`] renames each level by
//!    the OS objects that group the CPUs the same way (package, die, NUMA node, L3...).

use crate::cluster;
use crate::error::{LatencyError, Result};
use crate::matrix::{LatencyMatrix, Unit};
use serde::Serialize;

/// Minimum relative jump between consecutive merge heights that opens a new level.
pub const JUMP_RATIO: f64 = 1.2;
/// SMT siblings share the L1: their transfers stay far below anything that crosses cores
/// (measured SMT latencies on x86 and Zen are 4–14 ns, the next level 17 ns or more; the
/// L2-sharing tiles of Knights Landing are at 43 ns).
pub const SMT_MAX_NS: f64 = 20.0;
/// Without a unit to anchor it (cycles), a first level counts as SMT when it is at most this
/// fraction of the next level.
pub const SMT_MAX_FRACTION: f64 = 0.5;
/// A step up whose latency is at least this many times the level below is taken as an
/// on-package fabric between caches (AMD Zen CCX to CCX: 3.6–4.8×), not as crossing sockets
/// (Intel and POWER sockets: 2.0–3.1× above the in-socket latency).
pub const FABRIC_RATIO: f64 = 3.4;
/// More top-level groups than this are not sockets (glueless systems stop at 8).
pub const MAX_PACKAGES: usize = 8;
/// The largest step up a level of dies on one package shows, with a margin: a level whose
/// step up is at most this is not taken as sockets. In the matrices in tests/data the step
/// from inside a die to the other die of the same package is ×1.71 (Threadripper 1950X),
/// ×2.25 (Kunpeng 920) and ×1.68 (Opteron 6172, MCTOP's lpd48core); crossing sockets is
/// ×1.83–2.02 on two-socket EPYCs and ×1.98 on the Xeon X5650 (those sockets are then
/// named groups, never sockets), ×2.56 on POWER7, ×2.75–2.95 on two-socket Xeons since
/// Sandy Bridge. ×2.4 lies between the largest die step and the smallest socket step above
/// it, 7% from each.
pub const DIE_STEP_MAX: f64 = 2.4;
/// A first level above cores whose members are this close (ns) and that holds at most
/// [`CLUSTER_MAX_CORES`] cores is a cluster sharing a cache (an AMD CCX), never a socket,
/// whatever the step above it: CCX latencies in tests/data are 18–25 ns (Zen 1 to 3), while
/// the cores of a socket of a multi-socket machine are 37 ns apart or more (Xeon X5650
/// 37 ns, E5-2680 v4 45 ns, Gold 6242 48 ns; POWER7 173 ns).
pub const CLUSTER_MAX_NS: f64 = 40.0;
/// The most cores a cache cluster holds (AMD CCX: 4 on Zen 1 and 2, 8 on Zen 3 and 4).
pub const CLUSTER_MAX_CORES: usize = 8;
/// A group is "seen alike" from an outsider when its latencies to the members differ by at
/// most this factor.
pub const ALIKE_RATIO: f64 = 1.5;
/// A level's groups are real components only if the latencies between two groups are one
/// value up to noise. Between pairs of sockets of a ring or ladder they mix hop counts (one
/// hop and three hops in one block): a block is mixed when its 10–90% spread exceeds this
/// fraction of its median (±10% measurement noise spreads a block by about 0.16).
pub const BLOCK_SPREAD: f64 = 0.4;
/// Two block medians belong to different hop counts when they differ by this factor.
pub const HOP_STEP: f64 = 1.15;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    /// Hardware threads of one core.
    Smt,
    /// CPUs sharing a cache of this level (2 = L2, 3 = L3).
    Cache(u8),
    /// A level between caches and packages (a die, a fabric quadrant).
    Group,
    /// Dies of a package (only where the OS says so: latency alone cannot tell a die
    /// from a socket).
    Die,
    /// Sockets.
    Package,
    /// Groups of packages (socket pairs on glued systems).
    PackageGroup,
}

impl Role {
    pub fn name(self) -> String {
        match self {
            Role::Smt => "SMT (core)".into(),
            Role::Cache(l) => format!("L{l} group"),
            Role::Group => "group".into(),
            Role::Die => "die".into(),
            Role::Package => "socket".into(),
            Role::PackageGroup => "socket group".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Level {
    /// Groups as OS CPU numbers, each sorted; singletons included.
    pub groups: Vec<Vec<u32>>,
    /// Typical (median) latency between members joined at this level.
    pub latency: f64,
    /// Relative jump of merge heights that opened this level.
    pub gap: f64,
    /// True when one group was completed from left-over CPUs (see the module comment).
    pub completed: bool,
    /// Fraction of (group, outsider) pairs where the outsider sees every member alike.
    pub consistency: f64,
    /// Every grown group holds the same number of groups of the level below.
    pub symmetric: bool,
    pub role: Role,
    /// What the level is called: `SMT (core)`, `L3 group`, `socket`, `die`, `group of 8
    /// cores, 154.6 ns apart`; with the OS topology known, the OS's names (`die, NUMA
    /// node`).
    pub name: String,
    /// Where the name comes from.
    pub named_by: NamedBy,
}

/// Where a level's name comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NamedBy {
    /// The latencies (and what autopin knows of machines: the thresholds above).
    Latency,
    /// The OS topology: objects that group the CPUs the same way.
    Os,
}

#[derive(Debug, Clone, Serialize)]
pub struct Inference {
    pub cpus: Vec<u32>,
    pub unit: Unit,
    /// Accepted levels, finest first.
    pub levels: Vec<Level>,
    /// Median latency between the top level's groups (or of all pairs without levels).
    pub top_latency: f64,
    /// 0..1; see [`infer`].
    pub confidence: f64,
    pub notes: Vec<String>,
    /// The packages the OS topology has, once [`cross_check`]ed against one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os_packages: Option<usize>,
}

/// What is known besides the matrix.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// Whether the first level is SMT, when something else says so (an `.mct` header, a live
    /// spin-loop test), with where that came from.
    pub smt: Option<(bool, String)>,
}

impl Inference {
    pub fn level_of(&self, role: Role) -> Option<&Level> {
        self.levels.iter().find(|l| l.role == role)
    }

    /// Packages as CPU lists (the whole machine when no level is a package).
    pub fn packages(&self) -> Vec<Vec<u32>> {
        match self.level_of(Role::Package) {
            Some(l) => l.groups.clone(),
            None => vec![self.cpus.clone()],
        }
    }

    /// Cores: SMT groups, or one CPU each.
    pub fn cores(&self) -> Vec<Vec<u32>> {
        match self.level_of(Role::Smt) {
            Some(l) => l.groups.clone(),
            None => self.cpus.iter().map(|&c| vec![c]).collect(),
        }
    }

    pub fn has_smt(&self) -> bool {
        self.level_of(Role::Smt).is_some()
    }

    /// The CPUs sharing a core with `cpu` (without it).
    pub fn smt_siblings(&self, cpu: u32) -> Vec<u32> {
        self.cores()
            .into_iter()
            .find(|c| c.contains(&cpu))
            .map(|c| c.into_iter().filter(|&x| x != cpu).collect())
            .unwrap_or_default()
    }

    /// Groups sharing the last-level cache: the coarsest cache level found, else packages
    /// (assumed, see [`crate::build`]).
    pub fn llc_groups(&self) -> Vec<Vec<u32>> {
        self.levels
            .iter()
            .rev()
            .find(|l| matches!(l.role, Role::Cache(_)))
            .map(|l| l.groups.clone())
            .unwrap_or_else(|| self.packages())
    }

    /// Human-readable lines: one per level, then the confidence and the notes.
    pub fn summary_lines(&self) -> Vec<String> {
        let u = self.unit.short();
        let sockets = match self.level_of(Role::Package) {
            Some(l) => format!("{} socket(s)", l.groups.len()),
            None => "1 socket assumed (no level is sockets)".to_string(),
        };
        let mut out = vec![format!(
            "{} CPUs, {} cores, {sockets}, SMT {}",
            self.cpus.len(),
            self.cores().len(),
            if self.has_smt() { "yes" } else { "no" }
        )];
        for l in &self.levels {
            let sizes = size_summary(&l.groups);
            let name = match l.named_by {
                NamedBy::Os => format!("{} [OS]", l.name),
                NamedBy::Latency => l.name.clone(),
            };
            out.push(format!(
                "level {:>8.1} {u}: {:<12} {} groups ({sizes}){}; jump ×{:.2}, seen alike {:.0}%{}",
                l.latency,
                name,
                l.groups.len(),
                if l.completed { ", one completed" } else { "" },
                l.gap,
                l.consistency * 100.0,
                if l.symmetric { "" } else { ", asymmetric" }
            ));
        }
        out.push(format!("across the top: {:.1} {u}", self.top_latency));
        out.push(format!("confidence {:.2}", self.confidence));
        out.extend(self.notes.iter().map(|n| format!("note: {n}")));
        out
    }

    /// Which level names came from the OS and which were inferred, one line each
    /// (`autopin topology --from-latency` prints them).
    pub fn naming_lines(&self) -> Vec<String> {
        let u = self.unit.short();
        let mut out = Vec::new();
        for l in &self.levels {
            let sizes = size_summary(&l.groups);
            out.push(match l.named_by {
                NamedBy::Os => format!(
                    "{} ({} groups: {sizes}, {:.1} {u} inside): named by the OS",
                    l.name,
                    l.groups.len(),
                    l.latency
                ),
                NamedBy::Latency => format!(
                    "{} ({} groups: {sizes}, {:.1} {u} inside): inferred from the latencies",
                    l.name,
                    l.groups.len(),
                    l.latency
                ),
            });
        }
        if self.level_of(Role::Package).is_none() {
            out.push(match self.os_packages {
                Some(n) => format!(
                    "socket: none of the levels; the OS has {n} package{}",
                    if n == 1 { "" } else { "s" }
                ),
                None => "socket: none of the levels; one package assumed".into(),
            });
        }
        out
    }
}

fn size_summary(groups: &[Vec<u32>]) -> String {
    let mut counts: std::collections::BTreeMap<usize, usize> = Default::default();
    for g in groups {
        *counts.entry(g.len()).or_default() += 1;
    }
    counts
        .iter()
        .rev()
        .map(|(s, c)| format!("{c}×{s}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The median of `v`; NaN for none (a level with no pairs, which the callers rule out).
fn median(v: Vec<f64>) -> f64 {
    autopin_stats::median(&v).unwrap_or(f64::NAN)
}

/// A level in index space while it is being decided.
struct LevelDraft {
    groups: Vec<Vec<usize>>,
    latency: f64,
    gap: f64,
    completed: bool,
    symmetric: bool,
}

pub fn infer(m: &LatencyMatrix, hints: &Hints) -> Result<Inference> {
    let n = m.len();
    if n < 2 {
        return Err(LatencyError::Infer(
            "at least 2 CPUs are needed to infer anything from latencies".into(),
        ));
    }
    if let Some((i, j, v)) = m.pairs().find(|(_, _, v)| !v.is_finite() || *v < 0.0) {
        return Err(LatencyError::Infer(format!(
            "latency between CPUs {} and {} is {v}",
            m.cpus[i], m.cpus[j]
        )));
    }
    let merges = cluster::average_linkage(&m.values);
    let mut notes = Vec::new();
    let mut accepted: Vec<LevelDraft> = Vec::new();
    let mut prev: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    for k in cluster::jumps(&merges, JUMP_RATIO) {
        let gap = if merges[k - 1].height > 0.0 {
            merges[k].height / merges[k - 1].height
        } else {
            f64::INFINITY
        };
        let hac = cluster::partition_after(n, &merges, k);
        match accept(m, &prev, &hac, merges[k - 1].height, gap) {
            Ok(c) => {
                prev = c.groups.clone();
                accepted.push(c);
            }
            Err(why) => {
                // A noisy SMT band can open a first level that leaves a few pairs out (they
                // look like single-thread cores); when the next cut completes exactly that
                // level, it replaces it.
                let singles: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
                let lonely = |c: &LevelDraft| c.groups.iter().filter(|g| g.len() == 1).count();
                if accepted.len() == 1 && lonely(&accepted[0]) > 0 {
                    if let Ok(c) = accept(m, &singles, &hac, merges[k - 1].height, gap) {
                        let grown =
                            |c: &LevelDraft| c.groups.iter().map(|g| g.len()).max().unwrap_or(1);
                        if lonely(&c) < lonely(&accepted[0]) && grown(&c) == grown(&accepted[0]) {
                            prev = c.groups.clone();
                            accepted[0] = c;
                            continue;
                        }
                    }
                }
                notes.push(format!(
                    "merge level near {:.1} {} skipped: {why}",
                    merges[k - 1].height,
                    m.unit.short()
                ))
            }
        }
    }
    let top_latency = if prev.len() > 1 {
        let mut v = Vec::new();
        for (a, ga) in prev.iter().enumerate() {
            for gb in &prev[a + 1..] {
                v.extend(
                    ga.iter()
                        .flat_map(|&i| gb.iter().map(move |&j| (i, j)))
                        .map(|(i, j)| m.get(i, j)),
                );
            }
        }
        median(v)
    } else {
        median(m.pairs().map(|p| p.2).collect())
    };
    if accepted.is_empty() && n <= 8 && matches!(hints.smt, Some((true, _))) {
        // Too few CPUs for contrast (a 2-CPU machine), but a live test found them sharing
        // a core: then they are one core's threads.
        accepted.push(LevelDraft {
            groups: vec![(0..n).collect()],
            latency: top_latency,
            gap: f64::INFINITY,
            completed: false,
            symmetric: true,
        });
    }
    let roles = assign_roles(m, &accepted, top_latency, hints, &mut notes);
    let mut levels = Vec::new();
    let mut confidence: f64 = 1.0;
    for (c, role) in accepted.into_iter().zip(roles) {
        let consistency = seen_alike(m, &c.groups);
        confidence = confidence.min(consistency * ((c.gap - 1.0) / 0.5).min(1.0));
        if !c.symmetric {
            confidence *= 0.9;
        }
        levels.push(Level {
            groups: c
                .groups
                .iter()
                .map(|g| g.iter().map(|&i| m.cpus[i]).collect())
                .collect(),
            latency: c.latency,
            gap: c.gap,
            completed: c.completed,
            consistency,
            symmetric: c.symmetric,
            role,
            name: String::new(),
            named_by: NamedBy::Latency,
        });
    }
    if notes
        .iter()
        .any(|n| n.starts_with("socket count uncertain"))
    {
        confidence *= 0.7;
    }
    let mut inf = Inference {
        cpus: m.cpus.clone(),
        unit: m.unit,
        levels,
        top_latency,
        confidence,
        notes,
        os_packages: None,
    };
    for (l, name) in latency_names(&inf).into_iter().enumerate() {
        inf.levels[l].name = name;
    }
    Ok(inf)
}

/// Decides whether the clustering `hac` is a level above `prev` (see the module comment).
fn accept(
    m: &LatencyMatrix,
    prev: &[Vec<usize>],
    hac: &[Vec<usize>],
    below: f64,
    gap: f64,
) -> std::result::Result<LevelDraft, String> {
    let n = m.len();
    // Coarsen `prev` along `hac` so levels nest even after a completion: each previous group
    // goes where most of its members went.
    let mut where_: Vec<usize> = vec![0; n];
    for (h, g) in hac.iter().enumerate() {
        for &i in g {
            where_[i] = h;
        }
    }
    let mut by_hac: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (p, g) in prev.iter().enumerate() {
        let mut votes: std::collections::BTreeMap<usize, usize> = Default::default();
        for &i in g {
            *votes.entry(where_[i]).or_default() += 1;
        }
        let h = votes
            .iter()
            .max_by_key(|(h, c)| (**c, std::cmp::Reverse(**h)))
            .map(|(h, _)| *h)
            .unwrap_or(0);
        by_hac.entry(h).or_default().push(p);
    }
    let parts: Vec<Vec<usize>> = by_hac.into_values().collect();
    let mixed = mixed_blocks(
        m,
        &parts
            .iter()
            .map(|p| p.iter().flat_map(|&q| prev[q].iter().copied()).collect())
            .collect::<Vec<Vec<usize>>>(),
    );
    if mixed > 0.5 {
        return Err(format!(
            "{:.0}% of the blocks between its groups mix distances (hops of a socket network, not a level)",
            mixed * 100.0
        ));
    }
    let grown: Vec<&Vec<usize>> = parts.iter().filter(|p| p.len() >= 2).collect();
    if grown.is_empty() {
        return Err("no group grew".into());
    }
    let size = |p: &Vec<usize>| p.iter().map(|&q| prev[q].len()).sum::<usize>();
    let s = size(grown[0]);
    if grown.iter().any(|p| size(p) != s) {
        let mut sizes: Vec<usize> = grown.iter().map(|p| size(p)).collect();
        sizes.sort_unstable();
        sizes.dedup();
        return Err(format!("groups of unequal sizes {sizes:?}"));
    }
    let subgroups = grown[0].len();
    let mut symmetric = grown.iter().all(|p| p.len() == subgroups);
    let first_level = prev.iter().all(|g| g.len() == 1);
    let rest: Vec<usize> = parts
        .iter()
        .filter(|p| p.len() < 2)
        .flat_map(|p| p.iter().flat_map(|&q| prev[q].iter().copied()))
        .collect();
    let mut groups: Vec<Vec<usize>> = parts
        .iter()
        .map(|p| p.iter().flat_map(|&q| prev[q].iter().copied()).collect())
        .collect();
    let mut completed = false;
    if !rest.is_empty() {
        let covered = n - rest.len();
        if first_level && covered * 2 >= n {
            // Hybrid CPUs: single-thread cores beside SMT cores.
        } else if rest.len() == s {
            let mut inside = Vec::new();
            for (a, &i) in rest.iter().enumerate() {
                for &j in &rest[a + 1..] {
                    inside.push(m.get(i, j));
                }
            }
            let prev_in_rest = prev
                .iter()
                .filter(|g| g.iter().all(|i| rest.contains(i)))
                .count();
            if median(inside) < below * JUMP_RATIO {
                return Err("left-over CPUs are close to each other but not grouped".into());
            }
            symmetric &= prev_in_rest == subgroups;
            groups.retain(|g| g.iter().all(|i| !rest.contains(i)));
            groups.push(rest.clone());
            completed = true;
        } else {
            return Err(format!(
                "{} CPUs left ungrouped beside groups of {s}",
                rest.len()
            ));
        }
    }
    for g in &mut groups {
        g.sort_unstable();
    }
    groups.sort_by_key(|g| g[0]);
    // Latency of the level: pairs joined here, inside groups that grew on their own.
    let mut joined = Vec::new();
    let prev_of = |i: usize| prev.iter().position(|g| g.contains(&i));
    for p in &grown {
        let members: Vec<usize> = p.iter().flat_map(|&q| prev[q].iter().copied()).collect();
        for (a, &i) in members.iter().enumerate() {
            for &j in &members[a + 1..] {
                if prev_of(i) != prev_of(j) {
                    joined.push(m.get(i, j));
                }
            }
        }
    }
    Ok(LevelDraft {
        groups,
        latency: median(joined),
        gap,
        completed,
        symmetric,
    })
}

/// The latencies between members of group `a` and group `b`.
fn block(m: &LatencyMatrix, a: &[usize], b: &[usize]) -> Vec<f64> {
    a.iter()
        .flat_map(|&i| b.iter().map(move |&j| (i, j)))
        .map(|(i, j)| m.get(i, j))
        .collect()
}

/// Fraction of group pairs (among groups of 2 or more) whose block of latencies mixes
/// several values beyond noise (see [`BLOCK_SPREAD`]).
fn mixed_blocks(m: &LatencyMatrix, groups: &[Vec<usize>]) -> f64 {
    let big: Vec<&Vec<usize>> = groups.iter().filter(|g| g.len() > 1).collect();
    let (mut mixed, mut all) = (0usize, 0usize);
    for (x, a) in big.iter().enumerate() {
        for b in &big[x + 1..] {
            let mut v = block(m, a, b);
            v.sort_by(|p, q| p.total_cmp(q));
            let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
            let med = q(0.5);
            all += 1;
            if med > 0.0 && (q(0.9) - q(0.1)) / med > BLOCK_SPREAD {
                mixed += 1;
            }
        }
    }
    if all == 0 {
        0.0
    } else {
        mixed as f64 / all as f64
    }
}

/// How many distinct distances (hop counts) separate the groups: block medians clustered
/// by relative steps of [`HOP_STEP`]. Sockets of a ring or ladder show 3 or more; dies on
/// a package's uniform fabric show one (two with a socket level above).
fn hop_classes(m: &LatencyMatrix, groups: &[Vec<usize>]) -> usize {
    let mut meds = Vec::new();
    for (x, a) in groups.iter().enumerate() {
        for b in &groups[x + 1..] {
            meds.push(median(block(m, a, b)));
        }
    }
    meds.sort_by(|p, q| p.total_cmp(q));
    if meds.is_empty() {
        return 0;
    }
    1 + meds.windows(2).filter(|w| w[1] > w[0] * HOP_STEP).count()
}

/// Fraction of (group, outsider) pairs where the outsider's latencies to the group's members
/// stay within [`ALIKE_RATIO`]; groups of one are trivially alike and not counted.
fn seen_alike(m: &LatencyMatrix, groups: &[Vec<usize>]) -> f64 {
    let (mut ok, mut all) = (0usize, 0usize);
    for g in groups.iter().filter(|g| g.len() > 1) {
        for x in 0..m.len() {
            if g.contains(&x) {
                continue;
            }
            let (lo, hi) = g
                .iter()
                .map(|&i| m.get(x, i))
                .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                });
            all += 1;
            if hi <= lo * ALIKE_RATIO {
                ok += 1;
            }
        }
    }
    if all == 0 {
        1.0
    } else {
        ok as f64 / all as f64
    }
}

fn assign_roles(
    m: &LatencyMatrix,
    levels: &[LevelDraft],
    top: f64,
    hints: &Hints,
    notes: &mut Vec<String>,
) -> Vec<Role> {
    let mut roles = vec![Role::Group; levels.len()];
    if levels.is_empty() {
        if let Some((true, from)) = &hints.smt {
            notes.push(format!(
                "{from} says SMT, but no level of close CPU pairs shows in the latencies"
            ));
        }
        return roles;
    }
    let next_latency = |i: usize| levels.get(i + 1).map_or(top, |l| l.latency);
    // SMT: the first level, if its groups are core-sized and something says so.
    let small = levels[0].groups.iter().all(|g| g.len() <= 8);
    let guess = small
        && match m.unit {
            Unit::Nanoseconds => levels[0].latency <= SMT_MAX_NS,
            Unit::Cycles => levels[0].latency <= SMT_MAX_FRACTION * next_latency(0),
        };
    let smt = match &hints.smt {
        Some((h, from)) => {
            if *h != guess {
                notes.push(format!(
                    "{from} says SMT {}; the latencies alone would say {} (first level {:.1} {}, next {:.1})",
                    if *h { "yes" } else { "no" },
                    if guess { "yes" } else { "no" },
                    levels[0].latency,
                    m.unit.short(),
                    next_latency(0)
                ));
            }
            *h && small
        }
        None => guess,
    };
    let first = if smt {
        roles[0] = Role::Smt;
        1
    } else {
        0
    };
    let cores_per_group = |k: usize| -> usize {
        if smt {
            let cores = &levels[0].groups;
            levels[k].groups[0]
                .iter()
                .filter(|i| cores.iter().any(|c| c[0] == **i))
                .count()
        } else {
            levels[k].groups[0].len()
        }
    };
    // A small cluster of cores sharing a cache (an AMD CCX) right above the cores: never
    // sockets, whatever the step above it.
    let cluster = |k: usize| {
        k == first
            && m.unit == Unit::Nanoseconds
            && levels[k].latency <= CLUSTER_MAX_NS
            && cores_per_group(k) <= CLUSTER_MAX_CORES
    };
    // Packages: the highest level whose step up is beyond what dies on one package show and
    // is not an on-package fabric between caches, that has few enough groups and is no
    // cache cluster; none means one package.
    let mut package = None;
    // Groups linked by a network of several hop counts (rings, ladders, twisted cubes of 4
    // or 8 sockets) are sockets whatever the step up: on-package fabrics are uniform.
    if let Some(k) = (first..levels.len()).last() {
        let groups = &levels[k].groups;
        if (3..=MAX_PACKAGES).contains(&groups.len()) && hop_classes(m, groups) >= 3 && !cluster(k)
        {
            package = Some(k);
        }
    }
    for k in (first..levels.len()).rev() {
        if package.is_some() {
            break;
        }
        let ratio = next_latency(k) / levels[k].latency;
        if levels[k].groups.len() > MAX_PACKAGES || ratio >= FABRIC_RATIO {
            continue;
        }
        let size = levels[k].groups[0].len();
        if cluster(k) {
            notes.push(format!(
                "the {size}-CPU groups ({:.1} {} inside) are taken as clusters sharing a cache, not sockets: cores that close hold at most {CLUSTER_MAX_CORES} to a cluster (CCX), and the cores of a socket are farther apart",
                levels[k].latency,
                m.unit.short()
            ));
            continue;
        }
        if ratio <= DIE_STEP_MAX {
            notes.push(format!(
                "the {size}-CPU groups are not taken as sockets: the step above them (×{ratio:.2}) is within what dies on one package show (up to ×{DIE_STEP_MAX}); they may be dies or sockets"
            ));
            continue;
        }
        if !(DIE_STEP_MAX * 1.1..=FABRIC_RATIO * 0.9).contains(&ratio) {
            notes.push(format!(
                "socket count uncertain: the step above the {size}-CPU groups is ×{ratio:.2}, close to ×{} (dies on one package up to ×{DIE_STEP_MAX}, on-package fabrics from ×{FABRIC_RATIO})",
                if ratio < DIE_STEP_MAX * 1.1 { DIE_STEP_MAX } else { FABRIC_RATIO }
            ));
        }
        package = Some(k);
    }
    let below_package = package.unwrap_or(levels.len());
    if let Some(p) = package {
        roles[p] = Role::Package;
        for r in roles.iter_mut().skip(p + 1) {
            *r = Role::PackageGroup;
        }
    }
    // Caches below the package: the first shared level is an L2 when it pairs two cores
    // (Knights Landing tiles, Bulldozer modules) and no fabric step follows it; before a
    // fabric step it is the last-level cache, an L3 (a Zen 2 CCX of two cores, EPYC 7302).
    // The next level up is then the L3.
    let mut next_cache = 2u8;
    for k in first..below_package {
        let fabric_above = next_latency(k) / levels[k].latency >= FABRIC_RATIO;
        if next_cache == 2 && (cores_per_group(k) != 2 || fabric_above) {
            next_cache = 3;
        }
        if next_cache <= 3 {
            roles[k] = Role::Cache(next_cache);
            next_cache += 1;
        }
    }
    roles
}

/// The latency-based name of each level: `SMT (core)`, `L3 group`, `socket`, `socket
/// group`, and for groups `group of 8 cores, 154.6 ns apart`.
fn latency_names(inf: &Inference) -> Vec<String> {
    let u = inf.unit.short();
    let cores = inf.cores();
    inf.levels
        .iter()
        .enumerate()
        .map(|(k, l)| match l.role {
            Role::Group => {
                let n = l.groups[0]
                    .iter()
                    .filter(|c| cores.iter().any(|core| core[0] == **c))
                    .count();
                let apart = inf.levels.get(k + 1).map_or(inf.top_latency, |x| x.latency);
                format!(
                    "group of {n} core{}, {apart:.1} {u} apart",
                    if n == 1 { "" } else { "s" }
                )
            }
            r => r.name(),
        })
        .collect()
}

/// Renames the levels by the OS topology of the machine the matrix was measured on: a
/// level whose groups are exactly the CPU sets of some kind of OS object (packages, dies,
/// NUMA nodes, a cache level, cores, clusters...) takes their names and the role that
/// goes with them (package, die, cache, SMT); the others keep the names the latencies give.
/// Returns one line per finding: a level no OS object matches, an OS level the latencies
/// do not show.
pub fn cross_check(inf: &mut Inference, os: &autopin_topology::Machine) -> Vec<String> {
    use autopin_topology::ObjType;
    let cpus = inf.cpus.clone();
    let inside = |set: &autopin_topology::CpuSet| -> Vec<u32> {
        cpus.iter().copied().filter(|&c| set.contains(c)).collect()
    };
    // The OS's partitions of the measured CPUs, by kind, with a name and the role.
    let mut kinds: Vec<(String, Role, Vec<Vec<u32>>)> = Vec::new();
    let mut add = |name: String, role: Role, sets: Vec<autopin_topology::CpuSet>| {
        let mut groups: Vec<Vec<u32>> =
            sets.iter().map(&inside).filter(|g| !g.is_empty()).collect();
        groups.sort();
        // Only a partition of the measured CPUs can be compared.
        if groups.iter().map(Vec::len).sum::<usize>() == cpus.len() && !groups.is_empty() {
            kinds.push((name, role, groups));
        }
    };
    let sets_of = |ids: Vec<usize>| -> Vec<autopin_topology::CpuSet> {
        ids.iter().map(|&i| os.obj(i).cpuset.clone()).collect()
    };
    add(
        "package".into(),
        Role::Package,
        sets_of(os.objects_of(ObjType::Package)),
    );
    add(
        "die".into(),
        Role::Die,
        sets_of(os.objects_of(ObjType::Die)),
    );
    add(
        "NUMA node".into(),
        Role::Group,
        os.numa_nodes
            .iter()
            .filter(|n| !n.cpuset.is_empty())
            .map(|n| n.cpuset.clone())
            .collect(),
    );
    let mut levels: Vec<u8> = os
        .objects
        .iter()
        .filter_map(|o| o.cache.as_ref())
        .filter(|c| c.kind != autopin_topology::CacheKind::Instruction)
        .map(|c| c.level)
        .collect();
    levels.sort_unstable();
    levels.dedup();
    for l in levels.into_iter().rev() {
        add(
            format!("L{l} group"),
            Role::Cache(l),
            sets_of(os.caches_of_level(l)),
        );
    }
    let mut group_kinds: Vec<String> = os
        .objects
        .iter()
        .filter(|o| o.ty == ObjType::Group)
        .map(|o| o.type_label())
        .collect();
    group_kinds.sort();
    group_kinds.dedup();
    for g in group_kinds {
        let ids: Vec<usize> = os
            .objects_of(ObjType::Group)
            .into_iter()
            .filter(|&i| os.obj(i).type_label() == g)
            .collect();
        let name = match g.strip_prefix("Group(").and_then(|r| r.strip_suffix(')')) {
            Some(k) => k.to_lowercase(),
            None => "group".into(),
        };
        add(name, Role::Group, sets_of(ids));
    }
    add(
        "core".into(),
        Role::Smt,
        sets_of(os.objects_of(ObjType::Core)),
    );
    inf.os_packages = Some(os.objects_of(ObjType::Package).len().max(1));
    let mut notes = Vec::new();
    let mut matched = vec![false; kinds.len()];
    let u = inf.unit.short();
    for l in &mut inf.levels {
        let mut groups = l.groups.clone();
        groups.sort();
        let same: Vec<usize> = (0..kinds.len()).filter(|&i| kinds[i].2 == groups).collect();
        if same.is_empty() {
            notes.push(format!(
                "the latencies' level at {:.1} {u} ({}, {} groups of {} CPUs) matches no OS object; named by the latencies",
                l.latency,
                l.name,
                l.groups.len(),
                l.groups[0].len()
            ));
            continue;
        }
        for &i in &same {
            matched[i] = true;
        }
        // The role of the most telling kind: package, die, cache, core, then the rest.
        let role_rank = |r: Role| match r {
            Role::Package => 0,
            Role::Die => 1,
            Role::Cache(_) => 2,
            Role::Smt => 3,
            _ => 4,
        };
        let best = same
            .iter()
            .copied()
            .min_by_key(|&i| role_rank(kinds[i].1))
            .expect("not empty");
        l.role = kinds[best].1;
        let mut names: Vec<&str> = vec![kinds[best].0.as_str()];
        names.extend(
            same.iter()
                .filter(|&&i| i != best)
                .map(|&i| kinds[i].0.as_str()),
        );
        l.name = if l.role == Role::Smt {
            "SMT (core)".into()
        } else {
            names.join(", ")
        };
        l.named_by = NamedBy::Os;
    }
    // A role below or above the package keeps its meaning.
    if let Some(p) = inf.levels.iter().position(|l| l.role == Role::Package) {
        for l in inf.levels.iter_mut().skip(p + 1) {
            if l.named_by == NamedBy::Latency && l.role == Role::Package {
                l.role = Role::PackageGroup;
            }
        }
        for l in inf.levels.iter_mut().take(p) {
            if l.named_by == NamedBy::Latency && l.role == Role::Package {
                l.role = Role::Group;
            }
        }
    } else {
        // Latency took a level as sockets that the OS does not: it is a group.
        for l in &mut inf.levels {
            if l.named_by == NamedBy::Latency
                && matches!(l.role, Role::Package | Role::PackageGroup)
            {
                l.role = Role::Group;
            }
        }
    }
    for (i, (name, _, groups)) in kinds.iter().enumerate() {
        let trivial = groups.len() == 1 || groups.len() == cpus.len();
        if !matched[i] && !trivial {
            notes.push(format!(
                "the OS has {} {name}s of {} CPUs here; the latencies show no level there",
                groups.len(),
                groups[0].len()
            ));
        }
    }
    inf.notes.extend(notes.iter().cloned());
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine of `sockets` × `llcs` × `cores` × `smt` with the given latencies and a
    /// deterministic ±`noise` relative perturbation; `mesh` spreads in-socket latencies over a
    /// continuous band (distance on a ring) as mesh interconnects do.
    #[allow(clippy::needless_range_loop)] // i, j index two rows at once
    fn machine(
        sockets: usize,
        llcs: usize,
        cores: usize,
        smt: usize,
        lat: [f64; 4],
        noise: f64,
        mesh: bool,
    ) -> LatencyMatrix {
        let n = sockets * llcs * cores * smt;
        // Linux-like numbering: all first threads, then all second threads.
        let pos = |cpu: usize| {
            let t = cpu / (n / smt);
            let core = cpu % (n / smt);
            (core / (llcs * cores), (core / cores) % llcs, core, t)
        };
        let mut s = 12345u64;
        let mut v = vec![vec![0.0; n]; n];
        for i in 0..n {
            for j in (i + 1)..n {
                let (a, b) = (pos(i), pos(j));
                let mut x = if a.0 != b.0 {
                    lat[3]
                } else if a.1 != b.1 {
                    lat[2]
                } else if a.2 != b.2 {
                    if mesh {
                        lat[1] * (1.0 + 0.02 * ((a.2 as f64 - b.2 as f64).abs()))
                    } else {
                        lat[1]
                    }
                } else {
                    lat[0]
                };
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                x *= 1.0 + ((s >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 2.0 * noise;
                v[i][j] = x;
                v[j][i] = x;
            }
        }
        LatencyMatrix {
            cpus: (0..n as u32).collect(),
            values: v,
            unit: Unit::Nanoseconds,
            ghz: None,
            source: "synthetic".into(),
        }
    }

    #[test]
    fn chiplet_machine_with_noise() {
        // 2 sockets × 4 CCX × 4 cores × 2 threads; CCX-to-CCX ×4 (fabric), sockets ×3.
        let m = machine(2, 4, 4, 2, [9.0, 25.0, 100.0, 300.0], 0.06, false);
        let inf = infer(&m, &Hints::default()).unwrap();
        assert_eq!(inf.cores().len(), 32);
        assert_eq!(inf.smt_siblings(0), vec![32]);
        assert_eq!(inf.llc_groups().len(), 8);
        assert_eq!(inf.packages().len(), 2);
        assert!(inf.confidence > 0.5, "{:?}", inf.summary_lines());
    }

    /// A step up of ×2 is what dies on one package show as well as sockets: the level is a
    /// group, named by its cores and distance, and no socket is claimed.
    #[test]
    fn a_die_sized_step_is_a_group_not_sockets() {
        let m = machine(2, 4, 4, 2, [9.0, 25.0, 100.0, 200.0], 0.06, false);
        let inf = infer(&m, &Hints::default()).unwrap();
        assert_eq!(inf.packages().len(), 1, "{:#?}", inf.summary_lines());
        let top = inf.levels.last().unwrap();
        assert_eq!(top.role, Role::Group);
        assert_eq!(top.groups.len(), 2);
        assert!(
            top.name.starts_with("group of 16 cores, ") && top.name.ends_with(" ns apart"),
            "{}",
            top.name
        );
        assert!(
            inf.notes
                .iter()
                .any(|n| n.contains("within what dies on one package show")),
            "{:?}",
            inf.notes
        );
    }

    /// Four CCXs of three cores whose step to each other is ×3.2, below the fabric ratio,
    /// as on a Ryzen 9 3900X: clusters sharing a cache, never four sockets. And CCXs of
    /// two cores before a fabric step (EPYC 7302) share the L3, not an L2.
    #[test]
    fn small_ccxs_are_l3_groups_not_sockets() {
        let m = machine(1, 4, 3, 2, [8.0, 24.0, 77.0, 77.0], 0.05, false);
        let inf = infer(&m, &Hints::default()).unwrap();
        assert_eq!(inf.packages().len(), 1, "{:#?}", inf.summary_lines());
        assert_eq!(inf.llc_groups().len(), 4, "{:#?}", inf.summary_lines());
        assert!(inf.level_of(Role::Cache(3)).is_some());
        let m = machine(1, 8, 2, 2, [8.0, 22.0, 105.0, 105.0], 0.05, false);
        let inf = infer(&m, &Hints::default()).unwrap();
        assert_eq!(inf.packages().len(), 1);
        let l3 = inf.level_of(Role::Cache(3)).expect("an L3 level");
        assert_eq!(l3.groups.len(), 8, "{:#?}", inf.summary_lines());
        assert!(inf.level_of(Role::Cache(2)).is_none());
    }

    #[test]
    fn mesh_band_stays_one_level() {
        // 2 sockets × 20 cores × 2 threads, in-socket latencies a continuous 45..63 ns band.
        let m = machine(2, 1, 20, 2, [10.0, 45.0, 45.0, 130.0], 0.04, true);
        let inf = infer(&m, &Hints::default()).unwrap();
        assert_eq!(inf.cores().len(), 40);
        assert_eq!(inf.packages().len(), 2);
        assert_eq!(inf.llc_groups().len(), 2, "{:?}", inf.summary_lines());
    }

    #[test]
    fn flat_machine_has_no_levels() {
        let m = machine(1, 1, 16, 1, [0.0, 40.0, 0.0, 0.0], 0.1, false);
        let inf = infer(&m, &Hints::default()).unwrap();
        assert!(inf.levels.is_empty(), "{:?}", inf.summary_lines());
        assert_eq!(inf.packages().len(), 1);
        assert!(!inf.has_smt());
    }

    #[test]
    fn hint_overrides_and_is_noted() {
        let m = machine(1, 1, 4, 2, [9.0, 30.0, 0.0, 0.0], 0.0, false);
        let inf = infer(
            &m,
            &Hints {
                smt: Some((false, "test".into())),
            },
        )
        .unwrap();
        assert!(!inf.has_smt());
        assert!(
            inf.notes.iter().any(|n| n.contains("test says SMT no")),
            "{:?}",
            inf.notes
        );
        let two = machine(1, 1, 2, 1, [0.0, 5.0, 0.0, 0.0], 0.0, false);
        let inf = infer(
            &two,
            &Hints {
                smt: Some((true, "spin test".into())),
            },
        )
        .unwrap();
        assert_eq!(inf.cores().len(), 1);
    }

    #[test]
    fn rejects_too_small_input() {
        let m = LatencyMatrix {
            cpus: vec![0],
            values: vec![vec![0.0]],
            unit: Unit::Nanoseconds,
            ghz: None,
            source: "x".into(),
        };
        assert!(infer(&m, &Hints::default()).is_err());
    }
}
