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

/// Most ways tried to seat a group's slots on its children holding busy PUs; beyond it the
/// busiest children simply get the lightest slots.
const SEATING_LIMIT: usize = 4096;

/// Chooses which child of a node holds which slot of a class. Alike children are
/// interchangeable, so any seating gives the same class; among them this one keeps off
/// CPUs busy with other work (`busy_in`: busy PUs per tree node) as far as the class
/// allows. With nothing busy, slots go to children in logical order.
struct Seating<'e, 't> {
    e: &'e mut Enumerator<'t>,
    busy_in: Vec<usize>,
    /// Fewest busy PUs a (node, threads, class index) can be instantiated with.
    memo: HashMap<(usize, u32, u32), usize>,
}

impl Seating<'_, '_> {
    /// The PUs a class uses at `node`.
    fn instantiate(&mut self, node: usize, class: &Class, out: &mut Vec<ObjId>) {
        let t = self.e.t;
        if t.nodes[node].children.is_empty() {
            out.push(t.nodes[node].obj);
            return;
        }
        for (child, k, ci) in self.seat(node, class).0 {
            let sub = self.e.classes(t.nodes[child].shape, k as usize)[ci as usize].clone();
            self.instantiate(child, &sub, out);
        }
    }

    /// Fewest busy PUs class `ci` of `k` threads uses at `node`.
    fn cost(&mut self, node: usize, k: u32, ci: u32) -> usize {
        if k == 0 || self.busy_in[node] == 0 {
            return 0;
        }
        if let Some(&c) = self.memo.get(&(node, k, ci)) {
            return c;
        }
        let t = self.e.t;
        let c = if t.nodes[node].children.is_empty() {
            self.busy_in[node]
        } else {
            let class = self.e.classes(t.nodes[node].shape, k as usize)[ci as usize].clone();
            self.seat(node, &class).1
        };
        self.memo.insert((node, k, ci), c);
        c
    }

    /// (child, threads, class index) for every used slot, and the busy PUs they use.
    fn seat(&mut self, node: usize, class: &Class) -> (Vec<(usize, u32, u32)>, usize) {
        let t = self.e.t;
        let n = &t.nodes[node];
        let mut out = Vec::new();
        let mut total = 0;
        let mut start = 0;
        for &(_, count) in &t.shapes[n.shape].groups {
            let kids = &n.children[start..start + count];
            let slots = &class[start..start + count];
            start += count;
            let busy: Vec<usize> = (0..count).filter(|&i| self.busy_in[kids[i]] > 0).collect();
            // The slot of each busy child (in `busy`'s order): the cheapest distinct choice,
            // searched exhaustively while small; else the busiest get the lightest slots.
            let mut chosen: Vec<usize> = Vec::new();
            if !busy.is_empty() {
                let ways = (0..busy.len()).try_fold(1usize, |w, i| w.checked_mul(count - i));
                if ways.is_some_and(|w| w <= SEATING_LIMIT) {
                    let mut best = (usize::MAX, Vec::new());
                    self.search(kids, slots, &busy, &mut Vec::new(), 0, &mut best);
                    total += best.0;
                    chosen = best.1;
                } else {
                    let mut order = busy.clone();
                    order.sort_by_key(|&i| std::cmp::Reverse(self.busy_in[kids[i]]));
                    let mut pairs = Vec::new();
                    for (j, &i) in order.iter().enumerate() {
                        let s = count - 1 - j;
                        total += self.cost(kids[i], slots[s].0, slots[s].1);
                        pairs.push((i, s));
                    }
                    pairs.sort_unstable();
                    chosen = pairs.into_iter().map(|p| p.1).collect();
                }
            }
            // The other slots go to the children without busy PUs, heaviest first.
            let mut rest = (0..count).filter(|s| !chosen.contains(s));
            for (i, &kid) in kids.iter().enumerate() {
                let s = match busy.iter().position(|&b| b == i) {
                    Some(j) => chosen[j],
                    None => rest.next().unwrap_or(0),
                };
                let (k, ci) = slots[s];
                if k > 0 {
                    out.push((kid, k, ci));
                }
            }
        }
        (out, total)
    }

    /// Tries every distinct slot for each busy child (identical slots tried once).
    fn search(
        &mut self,
        kids: &[usize],
        slots: &[(u32, u32)],
        busy: &[usize],
        cur: &mut Vec<usize>,
        so_far: usize,
        best: &mut (usize, Vec<usize>),
    ) {
        if so_far >= best.0 {
            return;
        }
        let Some(&i) = busy.get(cur.len()) else {
            *best = (so_far, cur.clone());
            return;
        };
        // Lightest slots first, so among equal costs the busy children stay emptiest.
        let mut tried: Vec<(u32, u32)> = Vec::new();
        for s in (0..slots.len()).rev() {
            if cur.contains(&s) || tried.contains(&slots[s]) {
                continue;
            }
            tried.push(slots[s]);
            let c = self.cost(kids[i], slots[s].0, slots[s].1);
            cur.push(s);
            self.search(kids, slots, busy, cur, so_far + c, best);
            cur.pop();
        }
    }
}

/// Busy PUs under every tree node (nodes are stored children first).
fn busy_per_node(t: &Tree, m: &Machine, busy: &[u32]) -> Vec<usize> {
    let mut out = vec![0; t.nodes.len()];
    for (i, n) in t.nodes.iter().enumerate() {
        out[i] = if n.children.is_empty() {
            usize::from(m.obj(n.obj).os_index.is_some_and(|c| busy.contains(&c)))
        } else {
            n.children.iter().map(|&c| out[c]).sum()
        };
    }
    out
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
        for (name, mut map) in cands {
            // A level some PUs lack (a dump whose third package has no L3 and whose fourth
            // NUMA node no package) still tells classes apart where it is: each PU without
            // it is a group of its own, as it shares that level with no other PU. Dropped
            // instead, 10 threads in a package with an L3 and 10 in the one without were
            // described alike, and the farthest-first order left the better class 206th.
            if map.is_empty() {
                continue;
            }
            let groups_seen = map.values().copied().max().map_or(0, |g| g + 1);
            for (i, &p) in v.pus.iter().enumerate() {
                map.entry(v.os(p)).or_insert(groups_seen + i);
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
            parts.push(if n == 1 {
                "1 thread on its own CPU".to_string()
            } else {
                format!("{n} threads on separate CPUs")
            });
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
    representatives(m, n, opts, &[])
}

/// [`candidates`] with each class represented by PUs off the `busy` CPUs where the class
/// allows it (the classes, their order and descriptions do not change).
fn representatives(m: &Machine, n: usize, opts: &CandidateOptions, busy: &[u32]) -> Vec<Pinning> {
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
        // scatter order so the extra threads double up evenly. The list is the order once:
        // thread i goes to cpus[i % len], and a label stays readable for 2000 threads.
        let order = v.oses(&v.scatter_order(0));
        out.push(Pinning::described(
            order.clone(),
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
    let busy_in = busy_per_node(&t, m, busy);
    let mut seating = Seating {
        e: &mut e,
        busy_in,
        memo: HashMap::new(),
    };
    let levels = Levels::new(&v);
    let mut pinnings = Vec::with_capacity(classes.len());
    let mut sigs = Vec::with_capacity(classes.len());
    // Logical order, so neighbouring threads sit close together.
    let rank: HashMap<ObjId, usize> = v.pus.iter().enumerate().map(|(i, &p)| (p, i)).collect();
    for c in classes.iter() {
        let mut pus = Vec::with_capacity(n);
        seating.instantiate(root, c, &mut pus);
        neighbour_order(m, &mut pus, &rank);
        let mut cpus = v.oses(&pus);
        // Where the class must use a busy CPU, the last threads get it: thread 0 is the
        // one that runs alone between parallel parts (an OpenMP master, a main thread).
        cpus.sort_by_key(|c| busy.contains(c));
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

/// Orders the chosen `pus` so that neighbouring threads sit close together: in logical
/// order (`rank`), except that at every level of the tree the domains holding more of them
/// come first. Threads 2k and 2k + 1 (a pair that exchanges data, an OpenMP loop's
/// neighbouring chunks) then share a domain wherever they can: on a machine whose packages
/// hold 2, 1, 2 and 2 of seven threads, logical order splits the pairs after the package of
/// one (threads 2 and 3 on different packages, and 4 and 5), where this order seats that
/// package last. On a machine whose domains hold as many each, it is logical order.
fn neighbour_order(m: &Machine, pus: &mut [ObjId], rank: &HashMap<ObjId, usize>) {
    let chain = |p: ObjId| -> Vec<ObjId> {
        let mut up = Vec::new();
        let mut cur = m.obj(p).parent;
        while let Some(a) = cur {
            up.push(a);
            cur = m.obj(a).parent;
        }
        up.reverse();
        up
    };
    let chains: HashMap<ObjId, Vec<ObjId>> = pus.iter().map(|&p| (p, chain(p))).collect();
    let mut held: HashMap<ObjId, usize> = HashMap::new();
    for c in chains.values() {
        for a in c {
            *held.entry(*a).or_default() += 1;
        }
    }
    // The lowest rank of a chosen PU below each domain: its place in logical order.
    let mut first: HashMap<ObjId, usize> = HashMap::new();
    for (p, c) in &chains {
        let r = rank.get(p).copied().unwrap_or(usize::MAX);
        for a in c {
            let e = first.entry(*a).or_insert(r);
            *e = (*e).min(r);
        }
    }
    pus.sort_by_cached_key(|p| {
        let key: Vec<(std::cmp::Reverse<usize>, usize)> = chains[p]
            .iter()
            .map(|a| (std::cmp::Reverse(held[a]), first[a]))
            .collect();
        (key, rank.get(p).copied().unwrap_or(usize::MAX))
    });
}

/// Candidates that keep n threads off CPUs busy with other work: the threads spread over the
/// free allowed CPUs, round robin when there are fewer free CPUs than threads. Empty when no
/// allowed CPU is busy or none is free. (Symmetry makes "both threads on CPU 0" and "both on
/// CPU 1" one class for [`candidates`]; a busy neighbour on CPU 0 breaks that symmetry.)
pub fn free_cpu_candidates(m: &Machine, n: usize, busy: &[u32]) -> Vec<Pinning> {
    let v = View::new(m);
    let allowed = v.oses(&v.scatter_order(0));
    let free: Vec<u32> = allowed
        .iter()
        .copied()
        .filter(|c| !busy.contains(c))
        .collect();
    if n == 0 || free.is_empty() || free.len() == allowed.len() {
        return Vec::new();
    }
    let busy_here: Vec<u32> = allowed
        .iter()
        .copied()
        .filter(|c| busy.contains(c))
        .collect();
    let busy_word = if busy_here.len() == 1 { "CPU" } else { "CPUs" };
    let busy_text = crate::cpulist::CpuList::new(busy_here).to_list();
    let k = free.len().min(n);
    let cpus: Vec<u32> = (0..n).map(|i| free[i % k]).collect();
    // "2 threads on 1 free CPU, away from busy CPU 0": counts in words, no "(s)".
    let count = |c: usize, word: &str| match c {
        1 => format!("1 {word}"),
        _ => format!("{c} {word}s"),
    };
    vec![Pinning::described(
        cpus,
        format!(
            "{} on {}, away from busy {busy_word} {busy_text}",
            count(n, "thread"),
            count(k, "free CPU")
        ),
    )]
}

/// [`candidates`] represented off the `busy` CPUs where each class allows (a thread beside
/// other work gets a share of its CPU, whatever the class: probing that costs time and
/// tells nothing about the class), plus the [`free_cpu_candidates`] that are not already
/// among them.
pub fn candidates_avoiding(
    m: &Machine,
    n: usize,
    opts: &CandidateOptions,
    busy: &[u32],
) -> Vec<Pinning> {
    let mut out = representatives(m, n, opts, busy);
    let levels = Levels::new(&View::new(m));
    let off_busy = |p: &Pinning| !p.is_unpinned() && !p.cpus().iter().any(|c| busy.contains(c));
    for c in free_cpu_candidates(m, n, busy) {
        // Already there: the same CPUs, or a class representative off the busy CPUs with
        // the same shape (one thread per CPU, so the same class).
        let one_per_cpu = !c.shares_cpus(c.cpus().len());
        let sig = levels.signature(c.cpus());
        let same_class =
            |o: &Pinning| one_per_cpu && off_busy(o) && levels.signature(o.cpus()) == sig;
        if !out.iter().any(|o| o.cpus() == c.cpus() || same_class(o)) {
            out.push(c);
        }
    }
    out
}

/// Candidates that run the program's parallel regions with fewer than its `n` threads, one
/// thread per CPU it keeps: where fewer threads run faster than `n` (an OpenMP program's
/// team size is a dimension of the search).
///
/// - Beside CPUs `busy` with other work, one thread per free CPU when the free CPUs are
///   fewer than `n`: a team whose every thread has a CPU of its own, where `n` threads would
///   share the free CPUs or sit beside the other work (a barrier code then waits for its
///   slowest thread). One order of them, the most compact (neighbouring threads on
///   neighbouring CPUs): a team that fills its CPUs holds the same CPUs in any order, as
///   OpenMP's `spread` and `close` give the same places when the team fills them. The
///   spread order was offered too; in the simulator the two tied, and certifying the tie
///   took a second round (decisions at 2.7–2.9 s instead of 1.9 s).
/// - One thread per core when `n` exceeds the cores of the free CPUs and some core has
///   several hardware threads: SMT siblings compete for one core.
///
/// Never more threads than `n`, never a count of 0, and nothing when every allowed CPU is
/// free and `n` fits in the cores (no count change on an idle machine).
pub fn team_candidates(m: &Machine, n: usize, busy: &[u32]) -> Vec<Pinning> {
    let allowed = m.allowed_cpuset();
    let free: Vec<u32> = allowed.iter().filter(|c| !busy.contains(c)).collect();
    if free.is_empty() || n < 2 {
        return Vec::new();
    }
    let free_set: autopin_topology::CpuSet = free.iter().copied().collect();
    let on_free = crate::restrict_to(m, &free_set);
    let mut out: Vec<Pinning> = Vec::new();
    let mut add = |cpus: Vec<u32>, what: &str| {
        let k = cpus.len();
        if k == 0 || k >= n || out.iter().any(|o| o.cpus() == cpus.as_slice()) {
            return;
        }
        // (threads beyond the team, while a region in progress keeps them, on the CPUs
        // the team leaves: never stacked on the team's)
        let spare: Vec<u32> = allowed.iter().filter(|c| !cpus.contains(c)).collect();
        out.push(
            Pinning::described(cpus, what)
                .with_team(k)
                .with_spare(spare),
        );
    };
    if free.len() < n {
        let k = free.len();
        if let Ok(cpus) = crate::policy_pinning(&on_free, "compact", k) {
            add(cpus, "one thread per free CPU");
        }
    }
    let view = View::new(&on_free);
    let cores = view
        .pus
        .iter()
        .map(|&p| view.core_of(p))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if cores > 0 && cores < n.min(free.len()) {
        if let Ok(cpus) = crate::policy_pinning(&on_free, "cores", cores) {
            add(cpus, "one thread per free core");
        }
    }
    out
}

/// Whether `p`, a pinning of the program's whole count, stacks its threads on exactly the
/// CPUs of one of the `teams`: it then runs that team's work on the same CPUs, time-shared
/// by more threads than CPUs (a barrier waits for a thread that is not running), so while
/// the team may be asked it is never the faster one and need not be probed. Beside a busy
/// CPU 0, two threads of a loop of barriers stacked on CPU 1 read about 0 team constructs/s
/// where one thread there read 270 000: each such probe, cut at its first tick, and its two
/// moves were 0.02–0.03 s of a 2.3 s program's first run.
pub fn stacked_under_a_team(p: &Pinning, teams: &[Pinning]) -> bool {
    if p.is_unpinned() || p.team.is_some() {
        return false;
    }
    let on = p.cpu_set();
    on.len() < p.cpus().len() && teams.iter().any(|t| t.team.is_some() && t.cpu_set() == on)
}

#[cfg(test)]
mod free_cpu_tests {
    use super::*;

    fn two_cpus() -> Machine {
        autopin_topology::source::synthetic::parse("package:1 core:2 pu:1").unwrap()
    }

    #[test]
    fn fewer_threads_only_where_the_free_cpus_or_cores_are_fewer_than_the_threads() {
        let m = two_cpus();
        // CPU 0 busy: one thread on CPU 1.
        let t = team_candidates(&m, 2, &[0]);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!((t[0].cpus(), t[0].team), (&[1][..], Some(1)));
        assert_eq!(t[0].label, "1 thread: 1 (one thread per free CPU)");
        // The thread beyond the team (in a region in progress, until it ends) goes to the
        // CPU the team leaves, never onto the team's: two spinning threads on CPU 1 ran a
        // region of barriers at a fifth of its rate for a minute.
        assert_eq!(t[0].cpus_for(2), Some(vec![1, 0]));
        assert!(!t[0].shares_cpus(2));
        // Idle, or one thread only: no count change.
        assert!(team_candidates(&m, 2, &[]).is_empty());
        assert!(team_candidates(&m, 1, &[0]).is_empty());
        assert!(team_candidates(&m, 2, &[0, 1]).is_empty());
        // 2 cores of 2 SMT threads, 4 threads, idle: one per core; one core's CPUs busy:
        // one per free CPU is 2 threads on one core's siblings, one per free core 1.
        let smt = autopin_topology::source::synthetic::parse("package:1 core:2 pu:2").unwrap();
        let t = team_candidates(&smt, 4, &[]);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!((t[0].team, t[0].cpus().len()), (Some(2), 2));
        let busy: Vec<u32> = smt
            .pus()
            .into_iter()
            .filter_map(|p| smt.obj(p).os_index)
            .take(2)
            .collect();
        let t = team_candidates(&smt, 4, &busy);
        let teams: Vec<Option<usize>> = t.iter().map(|p| p.team).collect();
        assert!(
            teams.contains(&Some(2)) && teams.contains(&Some(1)),
            "{t:?}"
        );
        assert!(t.iter().all(|p| p.cpus().iter().all(|c| !busy.contains(c))));
    }

    #[test]
    fn a_pinning_that_stacks_the_threads_on_a_teams_cpus_is_left_to_the_team() {
        let m = two_cpus();
        let teams = team_candidates(&m, 2, &[0]);
        let stacked = free_cpu_candidates(&m, 2, &[0]);
        assert_eq!(stacked[0].cpus(), &[1, 1][..]);
        assert!(stacked_under_a_team(&stacked[0], &teams));
        // Not the pinnings with a thread beside the other work, nor the OS placement, nor
        // the team itself; nor anything where no team is offered.
        for other in [
            Pinning::from_cpus(vec![1, 0]),
            Pinning::from_cpus(vec![0, 1]),
        ] {
            assert!(!stacked_under_a_team(&other, &teams));
        }
        assert!(!stacked_under_a_team(&Pinning::unpinned(), &teams));
        assert!(!stacked_under_a_team(&teams[0], &teams));
        assert!(!stacked_under_a_team(&stacked[0], &[]));
        // 4 packages of 4 cores beside the first of each: 16 threads on the 12 free CPUs
        // (some stacked) are the team of 12's work time-shared; 16 on 14 CPUs are not.
        let m = autopin_topology::source::synthetic::parse("package:4 core:4 pu:1").unwrap();
        let busy = [0, 4, 8, 12];
        let teams = team_candidates(&m, 16, &busy);
        let on_free: Vec<u32> = (0..16u32)
            .filter(|c| !busy.contains(c))
            .cycle()
            .take(16)
            .collect();
        assert!(stacked_under_a_team(&Pinning::from_cpus(on_free), &teams));
        let wider: Vec<u32> = (2..16u32).chain([2, 3]).collect();
        assert!(!stacked_under_a_team(&Pinning::from_cpus(wider), &teams));
    }

    #[test]
    fn a_team_of_every_free_cpu_is_offered_in_one_order_the_compact_one() {
        // 4 packages of 4 cores, the first core of each busy, 16 threads: one team of the
        // 12 free CPUs, in CPU order (neighbouring threads on one package), not also in
        // the spread order of the same CPUs.
        let m = autopin_topology::source::synthetic::parse("package:4 core:4 pu:1").unwrap();
        let t = team_candidates(&m, 16, &[0, 4, 8, 12]);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!(t[0].team, Some(12));
        assert_eq!(t[0].cpus(), &[1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15][..]);
        // The threads beyond it go to the busy CPUs the team leaves.
        assert_eq!(t[0].cpus_for(16).unwrap()[12..], [0, 4, 8, 12]);
    }

    #[test]
    fn a_busy_cpu_adds_the_pinning_that_keeps_every_thread_on_the_free_one() {
        let m = two_cpus();
        let opts = CandidateOptions {
            max: None,
            include_unpinned: true,
        };
        let plain = candidates(&m, 2, &opts);
        assert!(!plain.iter().any(|c| c.cpus() == vec![1, 1]), "{plain:?}");
        let with = candidates_avoiding(&m, 2, &opts, &[0]);
        let free = with
            .iter()
            .find(|c| c.cpus() == vec![1, 1])
            .expect("1,1 added");
        assert!(
            free.description == "2 threads on 1 free CPU, away from busy CPU 0",
            "{}",
            free.description
        );
        assert_eq!(with.len(), plain.len() + 1);
        // One thread: CPU 1 alone.
        assert_eq!(free_cpu_candidates(&m, 1, &[0])[0].cpus(), vec![1]);
    }

    #[test]
    fn nothing_is_added_when_no_cpu_or_every_cpu_is_busy() {
        let m = two_cpus();
        assert!(free_cpu_candidates(&m, 2, &[]).is_empty());
        assert!(free_cpu_candidates(&m, 2, &[0, 1]).is_empty());
        assert!(
            free_cpu_candidates(&m, 2, &[7]).is_empty(),
            "not an allowed CPU"
        );
    }

    #[test]
    fn classes_are_represented_off_busy_cpus_where_they_can_be() {
        let opts = CandidateOptions {
            max: None,
            include_unpinned: true,
        };
        // One thread beside a busy CPU 0: the one class sits on CPU 1, and CPU 0 is not
        // offered at all (the free-CPU candidate is the same pinning).
        let m = two_cpus();
        let with = candidates_avoiding(&m, 1, &opts, &[0]);
        let pinned: Vec<&[u32]> = with
            .iter()
            .filter(|c| !c.is_unpinned())
            .map(|c| c.cpus())
            .collect();
        assert_eq!(pinned, vec![&[1][..]], "{with:?}");

        // 2 packages × 2 cores × 2 hardware threads with several busy sets: same classes,
        // same descriptions, and every class that some set of free CPUs can form avoids
        // the busy ones (checked against all subsets of the free CPUs).
        let m = autopin_topology::source::synthetic::parse("package:2 core:2 pu:2").unwrap();
        let levels = Levels::new(&View::new(&m));
        let sig = |cpus: &[u32]| levels.signature(cpus);
        for busy in [vec![0, 1], vec![3], vec![1, 4], vec![0, 2, 5], vec![6, 7]] {
            let free: Vec<u32> = (0..8).filter(|c| !busy.contains(c)).collect();
            for n in 1..=5 {
                let plain = candidates(&m, n, &opts);
                let avoid = representatives(&m, n, &opts, &busy);
                let d = |v: &[Pinning]| v.iter().map(|c| c.description.clone()).collect::<Vec<_>>();
                assert_eq!(d(&plain), d(&avoid), "{n} threads, busy {busy:?}");
                let free_sigs: Vec<_> = (0u32..1 << free.len())
                    .filter(|bits| bits.count_ones() as usize == n)
                    .map(|bits| {
                        sig(&(0..free.len())
                            .filter(|i| bits & (1 << i) != 0)
                            .map(|i| free[i])
                            .collect::<Vec<u32>>())
                    })
                    .collect();
                for c in avoid.iter().filter(|c| !c.is_unpinned()) {
                    let could = free_sigs.contains(&sig(c.cpus()));
                    assert_eq!(
                        !c.cpus().iter().any(|x| busy.contains(x)),
                        could,
                        "{n} threads, busy {busy:?}: {} on {:?}, class fits the free CPUs: {could}",
                        c.description,
                        c.cpus()
                    );
                    let same = plain
                        .iter()
                        .find(|p| p.description == c.description)
                        .unwrap();
                    assert_eq!(sig(same.cpus()), sig(c.cpus()));
                }
            }
        }
        // A free-CPU pinning of one thread per CPU is a class already offered off the busy
        // CPUs: not offered twice. Crowding onto fewer free CPUs than threads is new.
        for n in 1..=4 {
            let plain = candidates(&m, n, &opts).len();
            assert_eq!(
                candidates_avoiding(&m, n, &opts, &[0, 1]).len(),
                plain,
                "{n}"
            );
        }
        let two = two_cpus();
        let both = candidates_avoiding(&two, 2, &opts, &[0]);
        assert!(both.iter().any(|c| c.cpus() == vec![1, 1]));
        // Two threads that must share the busy CPU 0: thread 0 (the master) gets CPU 1.
        assert!(both.iter().any(|c| c.cpus() == vec![1, 0]), "{both:?}");
        assert!(!both.iter().any(|c| c.cpus() == vec![0, 1]), "{both:?}");
        // Six threads cannot all avoid two busy CPUs of eight: the classes are still there.
        assert_eq!(
            candidates(&m, 6, &opts).len(),
            representatives(&m, 6, &opts, &[0, 1]).len()
        );
    }
}
