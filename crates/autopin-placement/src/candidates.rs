//! Candidate pinnings for n threads: one representative per class of equivalent pinnings,
//! where two pinnings are equivalent when a symmetry of the machine's tree (permuting
//! children that look alike: same object type, cache level and size, core kind, NUMA
//! attachment, and same shape below) maps the set of used PUs of one onto the other. So the
//! classes differ in how many threads share each core, L2, L3, NUMA node and package.
//!
//! Classes are enumerated on the tree of allowed PUs, bottom-up by subtree shape: a node's
//! class is a multiset of its children's classes per group of alike children. Nothing ever
//! looks at subsets of PUs, so 256 PUs and 8 threads stay cheap. When there are more classes
//! than [`EXACT_LIMIT`], only the "even" ones are enumerated (at every node, the used children
//! carry loads that differ by at most one and alike loads share a sub-class), which keeps the
//! axes that matter (how many packages, caches, cores; threads per core) and drops lopsided
//! mixtures.

use std::collections::HashMap;

use autopin_topology::{Machine, ObjId, ObjType};

use crate::pinning::Pinning;
use crate::view::{is_allowed, View};

/// Most classes enumerated exactly; beyond it, only even classes are listed.
pub const EXACT_LIMIT: f64 = 5000.0;
/// Most classes kept in the even family.
const EVEN_LIMIT: usize = 5000;
/// How many picks use farthest-point ordering; the rest are sorted by distance to those.
const FARTHEST_PICKS: usize = 64;

#[derive(Debug, Clone, Default)]
pub struct CandidateOptions {
    /// At most this many pinned candidates (None: all classes).
    pub max: Option<usize>,
    /// Add "unpinned (OS decides)" as the first candidate.
    pub include_unpinned: bool,
}

/// A node's class: per canonical child slot, (threads, index of the child's class).
type Class = Vec<(u32, u32)>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Label {
    ty: ObjType,
    cache: Option<(u8, u8, u64)>,
    kind: Option<usize>,
    numa: usize,
}

struct Shape {
    /// (child shape, how many children have it), sorted by shape id.
    groups: Vec<(usize, usize)>,
    cap: usize,
}

struct Node {
    obj: ObjId,
    shape: usize,
    /// Children in canonical order: grouped by shape as in `Shape::groups`, logical order inside.
    children: Vec<usize>,
}

struct Tree {
    nodes: Vec<Node>,
    shapes: Vec<Shape>,
    root: Option<usize>,
}

impl Tree {
    fn new(m: &Machine) -> Self {
        let mut t = Tree {
            nodes: Vec::new(),
            shapes: Vec::new(),
            root: None,
        };
        let mut intern: HashMap<(Label, Vec<usize>), usize> = HashMap::new();
        t.root = t.build(m, 0, &mut intern);
        t
    }

    fn build(
        &mut self,
        m: &Machine,
        obj: ObjId,
        intern: &mut HashMap<(Label, Vec<usize>), usize>,
    ) -> Option<usize> {
        let o = m.obj(obj);
        if o.ty == ObjType::Pu && !is_allowed(m, obj) {
            return None;
        }
        let kids: Vec<usize> = o
            .children
            .iter()
            .filter_map(|&c| self.build(m, c, intern))
            .collect();
        if o.ty != ObjType::Pu && kids.is_empty() {
            return None;
        }
        let label = Label {
            ty: o.ty,
            cache: o.cache.as_ref().map(|c| (c.level, c.kind as u8, c.size)),
            kind: o.pu.as_ref().and_then(|p| p.kind),
            numa: o.numa.len(),
        };
        let mut child_shapes: Vec<usize> = kids.iter().map(|&k| self.nodes[k].shape).collect();
        child_shapes.sort_unstable();
        let key = (label, child_shapes.clone());
        let shape = match intern.get(&key) {
            Some(&s) => s,
            None => {
                let mut groups: Vec<(usize, usize)> = Vec::new();
                for s in &child_shapes {
                    match groups.last_mut() {
                        Some((g, c)) if g == s => *c += 1,
                        _ => groups.push((*s, 1)),
                    }
                }
                let cap = if o.ty == ObjType::Pu {
                    1
                } else {
                    groups.iter().map(|&(s, c)| self.shapes[s].cap * c).sum()
                };
                self.shapes.push(Shape { groups, cap });
                intern.insert(key, self.shapes.len() - 1);
                self.shapes.len() - 1
            }
        };
        let mut children = kids;
        // Stable sort keeps logical order inside a group.
        children.sort_by_key(|&k| self.nodes[k].shape);
        self.nodes.push(Node {
            obj,
            shape,
            children,
        });
        Some(self.nodes.len() - 1)
    }
}

/// How many classes there are for n threads (an estimate in floating point for huge counts).
pub fn count_classes(m: &Machine, n: usize) -> f64 {
    let t = Tree::new(m);
    match t.root {
        Some(r) => Counter {
            t: &t,
            n,
            memo: HashMap::new(),
        }
        .count(t.nodes[r].shape)[n],
        None => 0.0,
    }
}

struct Counter<'t> {
    t: &'t Tree,
    n: usize,
    memo: HashMap<usize, Vec<f64>>,
}

impl Counter<'_> {
    /// count[k] = number of classes of this shape with k threads, k = 0..=n.
    fn count(&mut self, shape: usize) -> Vec<f64> {
        if let Some(v) = self.memo.get(&shape) {
            return v.clone();
        }
        let n = self.n;
        let s = &self.t.shapes[shape];
        let mut total = vec![0.0; n + 1];
        if s.groups.is_empty() {
            total[0] = 1.0;
            if n >= 1 {
                total[1] = 1.0;
            }
        } else {
            total[0] = 1.0;
            for &(cs, c) in &s.groups.clone() {
                let per = self.count(cs);
                // g[j][t]: multisets of j children of this shape holding t threads.
                let mut g = vec![vec![0.0f64; n + 1]; c + 1];
                g[0][0] = 1.0;
                for (k, &mk) in per.iter().enumerate() {
                    if mk == 0.0 {
                        continue;
                    }
                    let mut ng = g.clone();
                    for j in 1..=c {
                        for t in 0..=n {
                            let mut acc = 0.0;
                            let mut choose = 1.0;
                            for r in 1..=j {
                                choose *= (mk + r as f64 - 1.0) / r as f64;
                                if r * k > t {
                                    break;
                                }
                                acc += g[j - r][t - r * k] * choose;
                            }
                            ng[j][t] += acc;
                        }
                    }
                    g = ng;
                }
                let group = &g[c];
                let mut next = vec![0.0; n + 1];
                for a in 0..=n {
                    for b in 0..=n - a {
                        next[a + b] += total[a] * group[b];
                    }
                }
                total = next;
            }
        }
        self.memo.insert(shape, total.clone());
        total
    }
}

struct Enumerator<'t> {
    t: &'t Tree,
    even: bool,
    memo: HashMap<(usize, usize), std::rc::Rc<Vec<Class>>>,
}

impl Enumerator<'_> {
    fn classes(&mut self, shape: usize, k: usize) -> std::rc::Rc<Vec<Class>> {
        if let Some(v) = self.memo.get(&(shape, k)) {
            return v.clone();
        }
        let s = &self.t.shapes[shape];
        let out: Vec<Class> = if k > s.cap {
            Vec::new()
        } else if s.groups.is_empty() {
            vec![Vec::new()]
        } else {
            let groups = s.groups.clone();
            let mut out = Vec::new();
            let mut partial = Vec::new();
            self.groups(&groups, 0, k, &mut partial, &mut out);
            out
        };
        let rc = std::rc::Rc::new(out);
        self.memo.insert((shape, k), rc.clone());
        rc
    }

    /// Distributes k threads over the remaining groups, appending each complete class.
    fn groups(
        &mut self,
        groups: &[(usize, usize)],
        gi: usize,
        k: usize,
        partial: &mut Class,
        out: &mut Vec<Class>,
    ) {
        if out.len() >= EVEN_LIMIT && self.even {
            return;
        }
        if gi == groups.len() {
            if k == 0 {
                out.push(partial.clone());
            }
            return;
        }
        let (cs, c) = groups[gi];
        let room_after: usize = groups[gi + 1..]
            .iter()
            .map(|&(s, c)| self.t.shapes[s].cap * c)
            .sum();
        let cap = self.t.shapes[cs].cap * c;
        let lo = k.saturating_sub(room_after);
        for t in lo..=k.min(cap) {
            for ms in self.group_fills(cs, c, t) {
                let len = partial.len();
                partial.extend(ms);
                self.groups(groups, gi + 1, k - t, partial, out);
                partial.truncate(len);
            }
        }
    }

    /// The ways c alike children of shape `cs` can hold t threads, as slot lists.
    fn group_fills(&mut self, cs: usize, c: usize, t: usize) -> Vec<Class> {
        let cap = self.t.shapes[cs].cap;
        if self.even {
            return self.even_fills(cs, c, t);
        }
        // Options sorted by threads descending; a fill is a non-increasing choice of options.
        let mut options: Vec<(u32, u32)> = Vec::new();
        for kk in (0..=t.min(cap)).rev() {
            let n = self.classes(cs, kk).len();
            options.extend((0..n as u32).map(|ci| (kk as u32, ci)));
        }
        let mut out = Vec::new();
        let mut cur = Vec::with_capacity(c);
        multisets(&options, 0, c, t, &mut cur, &mut out);
        out
    }

    fn even_fills(&mut self, cs: usize, c: usize, t: usize) -> Vec<Class> {
        let cap = self.t.shapes[cs].cap;
        if t == 0 {
            return vec![vec![(0, 0); c]];
        }
        let mut out = Vec::new();
        for used in 1..=c.min(t) {
            let (q, rem) = (t / used, t % used);
            if q + usize::from(rem > 0) > cap {
                continue;
            }
            let hi = self.classes(cs, q + 1).len();
            let lo = self.classes(cs, q).len();
            let his = if rem > 0 { hi } else { 1 };
            for a in 0..his {
                for b in 0..lo {
                    let mut slots = Vec::with_capacity(c);
                    slots.extend(std::iter::repeat_n(((q + 1) as u32, a as u32), rem));
                    slots.extend(std::iter::repeat_n((q as u32, b as u32), used - rem));
                    slots.extend(std::iter::repeat_n((0, 0), c - used));
                    out.push(slots);
                }
            }
        }
        out
    }
}

fn multisets(
    options: &[(u32, u32)],
    from: usize,
    slots: usize,
    target: usize,
    cur: &mut Class,
    out: &mut Vec<Class>,
) {
    if slots == 0 {
        if target == 0 {
            out.push(cur.clone());
        }
        return;
    }
    for i in from..options.len() {
        let k = options[i].0 as usize;
        // Options only get smaller from here, so the rest cannot reach the target.
        if k * slots < target {
            break;
        }
        if k > target {
            continue;
        }
        cur.push(options[i]);
        multisets(options, i, slots - 1, target - k, cur, out);
        cur.pop();
    }
}

/// The PUs a class uses, in logical order.
fn instantiate(e: &mut Enumerator, node: usize, class: &Class, out: &mut Vec<ObjId>) {
    let t = e.t;
    if t.nodes[node].children.is_empty() {
        out.push(t.nodes[node].obj);
        return;
    }
    for (slot, &(k, ci)) in class.iter().enumerate() {
        if k == 0 {
            continue;
        }
        let child = t.nodes[node].children[slot];
        let sub = e.classes(t.nodes[child].shape, k as usize)[ci as usize].clone();
        instantiate(e, child, &sub, out);
    }
}

/// The levels that tell classes apart: each maps a PU to the object (or NUMA node) it sits in.
struct Levels {
    names: Vec<String>,
    /// For each level, OS CPU id → group number.
    of: Vec<HashMap<u32, usize>>,
    /// On hybrid machines: OS CPU id → core kind, and the kinds' names. Kinds are not
    /// interchangeable, so their counts are kept in kind order rather than sorted.
    kind_of: HashMap<u32, usize>,
    kind_names: Vec<String>,
}

impl Levels {
    fn new(v: &View) -> Self {
        let m = v.m;
        let mut cands: Vec<(String, HashMap<u32, usize>)> = Vec::new();
        let mut add = |name: String, key: &dyn Fn(ObjId) -> Option<usize>| {
            let map: HashMap<u32, usize> = v
                .pus
                .iter()
                .filter_map(|&p| key(p).map(|g| (v.os(p), g)))
                .collect();
            cands.push((name, map));
        };
        // Priority order: when two levels split the PUs the same way, the first name wins
        // (an L1d or L2 per core is reported as "Core").
        add("Package".into(), &|p| {
            m.ancestor_of_type(p, ObjType::Package)
        });
        add("Die".into(), &|p| m.ancestor_of_type(p, ObjType::Die));
        add("NUMA".into(), &|p| {
            m.numa_of(p).first().map(|&n| n as usize)
        });
        add("Core".into(), &|p| Some(v.core_of(p)));
        add("Group".into(), &|p| m.ancestor_of_type(p, ObjType::Group));
        let mut levels: Vec<u8> = m
            .objects
            .iter()
            .filter_map(|o| o.cache.as_ref())
            .filter(|c| c.kind != autopin_topology::CacheKind::Instruction)
            .map(|c| c.level)
            .collect();
        levels.sort_unstable();
        levels.dedup();
        for l in levels.into_iter().rev() {
            let name = if l == 1 {
                "L1d".into()
            } else {
                format!("L{l}")
            };
            add(name, &|p| m.ancestor(p, |o| o.is_cache_level(l)));
        }
        let total = v.pus.len();
        let mut kept: Vec<(usize, String, HashMap<u32, usize>)> = Vec::new();
        let mut seen: Vec<Vec<Vec<u32>>> = Vec::new();
        for (name, map) in cands {
            if map.len() != total {
                continue;
            }
            // Keep a level only if it splits the PUs in a new way, into more than one group
            // and not into single PUs.
            let mut groups: HashMap<usize, Vec<u32>> = HashMap::new();
            for (&cpu, &g) in &map {
                groups.entry(g).or_default().push(cpu);
            }
            let mut parts: Vec<Vec<u32>> = groups
                .into_values()
                .map(|mut g| {
                    g.sort_unstable();
                    g
                })
                .collect();
            parts.sort();
            if parts.len() <= 1 || parts.len() == total || seen.contains(&parts) {
                continue;
            }
            kept.push((parts.len(), name, map));
            seen.push(parts);
        }
        // Coarse to fine for reading.
        kept.sort_by_key(|(groups, _, _)| *groups);
        let (names, of) = kept.into_iter().map(|(_, n, m)| (n, m)).unzip();
        let kind_of: HashMap<u32, usize> = v
            .pus
            .iter()
            .filter_map(|&p| m.obj(p).pu.as_ref()?.kind.map(|k| (v.os(p), k)))
            .collect();
        let distinct: std::collections::BTreeSet<usize> = kind_of.values().copied().collect();
        let (kind_of, kind_names) = if distinct.len() > 1 {
            let n = distinct.iter().max().map_or(0, |k| k + 1);
            let names = (0..n)
                .map(|k| {
                    m.core_kinds
                        .get(k)
                        .map_or(format!("kind{k}"), |c| c.name.clone())
                })
                .collect();
            (kind_of, names)
        } else {
            (HashMap::new(), Vec::new())
        };
        Levels {
            names,
            of,
            kind_of,
            kind_names,
        }
    }

    /// Threads per used object at every level, largest first.
    fn signature(&self, cpus: &[u32]) -> Vec<Vec<usize>> {
        self.of
            .iter()
            .map(|map| {
                let mut counts: HashMap<usize, usize> = HashMap::new();
                for c in cpus {
                    if let Some(&g) = map.get(c) {
                        *counts.entry(g).or_default() += 1;
                    }
                }
                let mut v: Vec<usize> = counts.into_values().collect();
                v.sort_unstable_by(|a, b| b.cmp(a));
                v
            })
            .chain((!self.kind_names.is_empty()).then(|| {
                let mut per = vec![0; self.kind_names.len()];
                for c in cpus {
                    if let Some(&k) = self.kind_of.get(c) {
                        per[k] += 1;
                    }
                }
                per
            }))
            .collect()
    }

    fn describe(&self, sig: &[Vec<usize>], n: usize) -> String {
        let mut parts: Vec<String> = self
            .names
            .iter()
            .zip(sig)
            .map(|(name, counts)| format!("{name} {}", fmt_counts(counts)))
            .collect();
        if let Some(per) = sig.get(self.names.len()) {
            let kinds: Vec<String> = self
                .kind_names
                .iter()
                .zip(per)
                .filter(|(_, &c)| c > 0)
                .map(|(k, c)| format!("{k} {c}"))
                .collect();
            parts.push(format!("kinds {}", kinds.join("+")));
        }
        if parts.is_empty() {
            parts.push(format!(
                "{n} thread{} on separate CPUs",
                if n == 1 { "" } else { "s" }
            ));
        }
        parts.join(", ")
    }
}

/// `[2,2]` → `2+2`, `[1,1,1,1]` → `4×1`, `[3,1,1,1]` → `3+3×1`.
fn fmt_counts(v: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[i] {
            j += 1;
        }
        let run = j - i + 1;
        if run >= 3 {
            out.push(format!("{run}×{}", v[i]));
        } else {
            out.extend(std::iter::repeat_n(v[i].to_string(), run));
        }
        i = j + 1;
    }
    out.join("+")
}

fn distance(a: &[Vec<usize>], b: &[Vec<usize>]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let len = x.len().max(y.len());
            (0..len)
                .map(|i| {
                    x.get(i)
                        .copied()
                        .unwrap_or(0)
                        .abs_diff(y.get(i).copied().unwrap_or(0))
                })
                .sum::<usize>()
        })
        .sum::<usize>() as f64
}

/// Most different first: start with the most compact class (fewest objects used), then always
/// take the class farthest from all already taken.
fn order(sigs: &[Vec<Vec<usize>>]) -> Vec<usize> {
    let k = sigs.len();
    if k == 0 {
        return Vec::new();
    }
    let spread = |s: &Vec<Vec<usize>>| s.iter().map(|l| l.len()).sum::<usize>();
    let first = (0..k).min_by_key(|&i| (spread(&sigs[i]), i)).unwrap_or(0);
    let mut taken = vec![false; k];
    let mut min_d = vec![f64::INFINITY; k];
    let mut out = vec![first];
    taken[first] = true;
    let mut last = first;
    while out.len() < k {
        for i in 0..k {
            if !taken[i] {
                min_d[i] = min_d[i].min(distance(&sigs[i], &sigs[last]));
            }
        }
        if out.len() >= FARTHEST_PICKS {
            let mut rest: Vec<usize> = (0..k).filter(|&i| !taken[i]).collect();
            rest.sort_by(|&a, &b| min_d[b].total_cmp(&min_d[a]).then(a.cmp(&b)));
            out.extend(rest);
            break;
        }
        let mut best = None;
        for i in 0..k {
            if !taken[i] && best.is_none_or(|b: usize| min_d[i] > min_d[b]) {
                best = Some(i);
            }
        }
        let Some(b) = best else { break };
        taken[b] = true;
        out.push(b);
        last = b;
    }
    out
}

/// The distinct ways to place n threads on the allowed PUs, most different first.
pub fn candidates(m: &Machine, n: usize, opts: &CandidateOptions) -> Vec<Pinning> {
    let mut out = Vec::new();
    if opts.include_unpinned {
        out.push(Pinning::unpinned());
    }
    let v = View::new(m);
    let max = opts.max.unwrap_or(usize::MAX);
    if n == 0 || v.pus.is_empty() || max == 0 {
        return out;
    }
    if n > v.pus.len() {
        // More threads than CPUs: only one sensible pinning, every CPU used, round robin in
        // scatter order so the extra threads double up evenly.
        let order = v.oses(&v.scatter_order(0));
        let cpus: Vec<u32> = (0..n).map(|i| order[i % order.len()]).collect();
        out.push(Pinning::described(
            cpus,
            format!(
                "oversubscribed: {n} threads on {} CPUs, round robin",
                order.len()
            ),
        ));
        return out;
    }
    let t = Tree::new(m);
    let Some(root) = t.root else { return out };
    let total = count_classes(m, n);
    let mut e = Enumerator {
        t: &t,
        even: total > EXACT_LIMIT,
        memo: HashMap::new(),
    };
    let classes = e.classes(t.nodes[root].shape, n);
    let levels = Levels::new(&v);
    let mut pinnings = Vec::with_capacity(classes.len());
    let mut sigs = Vec::with_capacity(classes.len());
    // Logical order, so neighbouring threads sit close together.
    let rank: HashMap<ObjId, usize> = v.pus.iter().enumerate().map(|(i, &p)| (p, i)).collect();
    for c in classes.iter() {
        let mut pus = Vec::with_capacity(n);
        instantiate(&mut e, root, c, &mut pus);
        pus.sort_by_key(|p| rank.get(p).copied().unwrap_or(usize::MAX));
        let cpus = v.oses(&pus);
        sigs.push(levels.signature(&cpus));
        pinnings.push(cpus);
    }
    for i in order(&sigs).into_iter().take(max) {
        out.push(Pinning::described(
            pinnings[i].clone(),
            levels.describe(&sigs[i], n),
        ));
    }
    out
}
