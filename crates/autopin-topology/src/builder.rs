//! Builds the object tree from loose objects by CPU-set inclusion, the way hwloc inserts
//! objects: every source (sysfs, synthetic, hwloc XML) only says which objects exist and which
//! CPUs each covers; nesting, NUMA attachment and logical numbering are decided here once.

use crate::cpuset::CpuSet;
use crate::model::*;
use std::collections::BTreeMap;

/// A NUMA node as a source sees it, before it is attached to the tree.
#[derive(Debug, Clone)]
pub struct NumaSpec {
    pub os_index: u32,
    /// CPUs local to the node; empty for memory-only nodes.
    pub cpuset: CpuSet,
    /// For memory-only nodes: CPUs of the initiators that access it best (from `access*/`
    /// in sysfs), used to attach the node near them. Empty when unknown.
    pub initiators: CpuSet,
    pub memory: u64,
    pub kind: Option<String>,
    pub tier: Option<u32>,
}

#[derive(Default)]
pub struct Builder {
    objects: Vec<Object>,
    numa: Vec<NumaSpec>,
    /// PU OS index → attributes, for PUs added with [`Builder::add_pu`].
    pub offline: CpuSet,
    pub core_kinds: Vec<CoreKind>,
    pub numa_distances: Option<BTreeMap<(u32, u32), u32>>,
    pub info: BTreeMap<String, String>,
    pub warnings: Vec<String>,
    /// Memory-side caches in front of nodes.
    pub mem_caches: Vec<MemCacheSpec>,
}

/// A memory-side cache as a source sees it: its attributes, the NUMA nodes (OS indexes)
/// right behind it, and the cache holding it (an index into `Builder::mem_caches`).
#[derive(Debug, Clone)]
pub struct MemCacheSpec {
    pub cache: MemorySideCache,
    pub nodes: Vec<u32>,
    pub parent: Option<usize>,
}

impl Builder {
    /// Memory-side caches of one node, as Linux lists them (`memory_side_cache/indexN`,
    /// level N): the highest level holds the next one down, the level nearest the CPUs
    /// holds the node, as hwloc nests them.
    pub fn add_node_mem_caches(&mut self, node: u32, mut caches: Vec<MemorySideCache>) {
        caches.sort_by_key(|c| std::cmp::Reverse(c.level));
        let n = caches.len();
        let mut parent = None;
        for (i, c) in caches.into_iter().enumerate() {
            self.mem_caches.push(MemCacheSpec {
                cache: c,
                nodes: if i + 1 == n { vec![node] } else { Vec::new() },
                parent,
            });
            parent = Some(self.mem_caches.len() - 1);
        }
    }
}

/// Nesting rank for objects that cover the same CPUs: lower goes higher in the tree.
fn rank(o: &Object) -> (u8, i32, u8) {
    match (&o.cache, o.ty) {
        (Some(c), _) => (
            4,
            -(c.level as i32),
            if c.kind == CacheKind::Instruction {
                1
            } else {
                0
            },
        ),
        (None, ty) => (ty as u8, 0, 0),
    }
}

impl Builder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, obj: Object) {
        if obj.cpuset.is_empty() || obj.ty == ObjType::Machine {
            return;
        }
        self.objects.push(obj);
    }

    pub fn add_pu(&mut self, os_index: u32, allowed: bool, kind: Option<usize>) {
        let mut o = Object::new(ObjType::Pu, Some(os_index), CpuSet::from_cpus([os_index]));
        o.pu = Some(PuAttr {
            allowed,
            online: true,
            kind,
        });
        self.objects.push(o);
    }

    pub fn add_numa(&mut self, spec: NumaSpec) {
        self.numa.push(spec);
    }

    /// Nests the objects, attaches NUMA nodes and numbers everything.
    pub fn build(mut self) -> Machine {
        let all: CpuSet = self
            .objects
            .iter()
            .filter(|o| o.ty == ObjType::Pu)
            .fold(CpuSet::new(), |acc, o| acc.union(&o.cpuset));
        self.drop_redundant(&all);
        let mut objs = std::mem::take(&mut self.objects);
        objs.sort_by(|a, b| {
            b.cpuset
                .len()
                .cmp(&a.cpuset.len())
                .then(rank(a).cmp(&rank(b)))
                .then(a.cpuset.first().cmp(&b.cpuset.first()))
                .then(a.os_index.cmp(&b.os_index))
        });
        let mut tree = vec![Object::new(ObjType::Machine, Some(0), all)];
        for mut o in objs {
            let parent = deepest_container(&tree, 0, &o.cpuset);
            o.parent = Some(parent);
            o.children.clear();
            let id = tree.len();
            tree.push(o);
            tree[parent].children.push(id);
        }
        // Children in CPU order, as hwloc lists them.
        for i in 0..tree.len() {
            let mut ch = std::mem::take(&mut tree[i].children);
            ch.sort_by_key(|&c| (tree[c].cpuset.first(), rank(&tree[c])));
            tree[i].children = ch;
        }

        let mut specs = std::mem::take(&mut self.numa);
        specs.sort_by_key(|s| s.os_index);
        let mut attach: Vec<(NumaSpec, ObjId)> = Vec::new();
        let mut local_to_none = std::collections::BTreeSet::new();
        for spec in specs {
            // Where the memory is local: its own CPUs plus those of its best initiators
            // (hwloc widens a node's cpuset by its HMAT initiators, and gives a CPU-less node
            // theirs). A node local to no CPU hangs from the machine.
            let target = spec.cpuset.union(&spec.initiators);
            if target.is_empty() {
                local_to_none.insert(spec.os_index);
            }
            let at = if target.is_empty() || !target.is_subset(&tree[0].cpuset) {
                0
            } else {
                match attach_point(&mut tree, &target) {
                    Ok(at) => at,
                    Err(at) => {
                        self.warnings.push(format!(
                            "NUMA node {}: its CPUs {} cut across {} without containing it; attached to the smallest object containing them, as hwloc does",
                            spec.os_index,
                            target,
                            tree[at]
                                .children
                                .iter()
                                .find(|&&c| tree[c].cpuset.intersects(&target) && !tree[c].cpuset.is_subset(&target))
                                .map(|&c| format!("{} {}", tree[c].type_label(), tree[c].cpuset))
                                .unwrap_or_default()
                        ));
                        at
                    }
                }
            };
            attach.push((spec, at));
        }

        let order = number(&mut tree);
        // NUMA nodes numbered in the order of the objects they attach to.
        let pos: BTreeMap<ObjId, usize> =
            order.iter().enumerate().map(|(i, &id)| (id, i)).collect();
        attach.sort_by_key(|(s, at)| (pos[at], s.os_index));
        let mut numa_nodes = Vec::new();
        for (i, (spec, at)) in attach.into_iter().enumerate() {
            tree[at].numa.push(i);
            numa_nodes.push(NumaNode {
                os_index: spec.os_index,
                logical_index: i as u32,
                cpuset: spec.cpuset,
                memory: spec.memory,
                attached_to: at,
                kind: spec.kind,
                tier: spec.tier,
                local_to_none: local_to_none.contains(&spec.os_index),
                mem_cache: None,
            });
        }
        let mem_caches = mem_cache_objects(std::mem::take(&mut self.mem_caches), &mut numa_nodes);
        let numa_distances = self.numa_distances.as_ref().map(|d| {
            numa_nodes
                .iter()
                .map(|a| {
                    numa_nodes
                        .iter()
                        .map(|b| d.get(&(a.os_index, b.os_index)).copied().unwrap_or(0))
                        .collect()
                })
                .collect()
        });
        let mut m = Machine {
            io: Vec::new(),
            pci_bridges: Vec::new(),
            pci_other: Vec::new(),
            objects: tree,
            numa_nodes,
            mem_caches,
            numa_distances,
            offline: self.offline,
            core_kinds: self.core_kinds,
            measurements: Measurements::default(),
            info: self.info,
            warnings: self.warnings,
        };
        m.objects[0].info.extend(
            m.info
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .filter(|(k, _)| k != "source"),
        );
        m
    }

    /// Removes objects that would only repeat another: duplicates of the same type and CPUs,
    /// dies that equal their package, and groups equal to any other object.
    fn drop_redundant(&mut self, all: &CpuSet) {
        let mut keep = vec![true; self.objects.len()];
        // Only objects with equal CPU sets can repeat each other: compare within those groups.
        let mut same_set: std::collections::HashMap<&CpuSet, Vec<usize>> =
            std::collections::HashMap::new();
        for (i, o) in self.objects.iter().enumerate() {
            same_set.entry(&o.cpuset).or_default().push(i);
        }
        for i in 0..self.objects.len() {
            let a = &self.objects[i];
            if a.ty == ObjType::Group && a.cpuset == *all {
                keep[i] = false;
                continue;
            }
            for &j in &same_set[&a.cpuset] {
                if i == j || !keep[j] {
                    continue;
                }
                let b = &self.objects[j];
                if a.cpuset != b.cpuset {
                    continue;
                }
                let same_kind = a.ty == b.ty
                    && a.cache.as_ref().map(|c| (c.level, c.kind))
                        == b.cache.as_ref().map(|c| (c.level, c.kind));
                let redundant = (same_kind && j < i)
                    || (a.ty == ObjType::Die && b.ty == ObjType::Package)
                    || (a.ty == ObjType::Group && b.ty != ObjType::Group);
                if redundant {
                    keep[i] = false;
                    break;
                }
            }
        }
        let mut k = keep.into_iter();
        self.objects.retain(|_| k.next().unwrap_or(true));
    }
}

/// Memory-side caches as objects: each hangs where its nodes hang, holds the nodes (and
/// inner caches) behind it, and is numbered in depth-first order (by the first node behind
/// it, outer before inner), as hwloc numbers its `MemCache`s. A cache with no node behind it
/// (its node was left out) is dropped, and the caches inside it move up.
fn mem_cache_objects(specs: Vec<MemCacheSpec>, nodes: &mut [NumaNode]) -> Vec<MemCache> {
    let by_os: BTreeMap<u32, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.os_index, i))
        .collect();
    // Nodes behind each spec, directly or through inner ones (parents come first).
    let mut behind: Vec<Vec<usize>> = specs
        .iter()
        .map(|s| {
            s.nodes
                .iter()
                .filter_map(|o| by_os.get(o).copied())
                .collect()
        })
        .collect();
    for i in (0..specs.len()).rev() {
        if let Some(p) = specs[i].parent.filter(|&p| p < i) {
            let inner = behind[i].clone();
            behind[p].extend(inner);
        }
    }
    for b in &mut behind {
        b.sort_unstable();
        b.dedup();
    }
    let keep: Vec<bool> = behind.iter().map(|b| !b.is_empty()).collect();
    // The nearest kept cache holding each spec.
    let kept_parent = |mut i: usize| -> Option<usize> {
        loop {
            let p = specs[i].parent.filter(|&p| p < i)?;
            if keep[p] {
                return Some(p);
            }
            i = p;
        }
    };
    let depth = |i: usize| {
        let mut d = 0;
        let mut at = i;
        while let Some(p) = kept_parent(at) {
            d += 1;
            at = p;
        }
        d
    };
    let mut order: Vec<usize> = (0..specs.len()).filter(|&i| keep[i]).collect();
    order.sort_by_key(|&i| (behind[i][0], depth(i), i));
    let new_index: BTreeMap<usize, usize> =
        order.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    let mut out = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        let first = behind[i][0];
        let cpuset = behind[i]
            .iter()
            .fold(CpuSet::new(), |acc, &n| acc.union(&nodes[n].cpuset));
        out.push(MemCache {
            cache: specs[i].cache.clone(),
            logical_index: k as u32,
            cpuset,
            parent: kept_parent(i).map(|p| new_index[&p]),
            attached_to: nodes[first].attached_to,
            nodes: behind[i].clone(),
        });
        for o in &specs[i].nodes {
            if let Some(&n) = by_os.get(o) {
                nodes[n].mem_cache = Some(k);
            }
        }
    }
    out
}

fn deepest_container(tree: &[Object], start: ObjId, set: &CpuSet) -> ObjId {
    let mut at = start;
    let Some(first) = set.first() else {
        return start;
    };
    'descend: loop {
        for &c in &tree[at].children {
            // The membership test is a cheap filter before the full subset test.
            if tree[c].cpuset.contains(first) && set.is_subset(&tree[c].cpuset) {
                at = c;
                continue 'descend;
            }
        }
        return at;
    }
}

/// Numbers the objects (logical indexes in depth-first order, per type, and per cache level
/// and kind); returns the depth-first order.
pub(crate) fn number(tree: &mut [Object]) -> Vec<ObjId> {
    let mut counters: BTreeMap<(ObjType, u8, u8), u32> = BTreeMap::new();
    let mut order = Vec::new();
    dfs(tree, 0, &mut order);
    for &id in &order {
        let key = match &tree[id].cache {
            Some(c) => (ObjType::Cache, c.level, c.kind as u8),
            None => (tree[id].ty, 0, 0),
        };
        let n = counters.entry(key).or_insert(0);
        tree[id].logical_index = *n;
        *n += 1;
    }
    order
}

/// The highest object covering exactly `set`; when none does, a Group is inserted for it
/// under the deepest object containing it. When such a group would cut across a child (the
/// set contains part of it only), no group is made and `Err` names the deepest container.
/// hwloc places NUMA nodes and I/O trees this way (`hwloc_find_insert_io_parent_by_complete_cpuset`
/// for I/O); the caller renumbers when a group was inserted.
pub(crate) fn attach_point(tree: &mut Vec<Object>, set: &CpuSet) -> Result<ObjId, ObjId> {
    // As hwloc: look below the machine first, and take the highest object with exactly
    // these CPUs (a lone package rather than the machine, a package rather than its L3).
    let mut at = 0;
    loop {
        match tree[at]
            .children
            .iter()
            .copied()
            .find(|&c| set.is_subset(&tree[c].cpuset))
        {
            Some(c) if tree[c].cpuset == *set => return Ok(c),
            Some(c) => at = c,
            None => break,
        }
    }
    if tree[at].cpuset == *set {
        return Ok(at);
    }
    if tree[at]
        .children
        .iter()
        .any(|&c| tree[c].cpuset.intersects(set) && !tree[c].cpuset.is_subset(set))
    {
        return Err(at);
    }
    let id = tree.len();
    let mut g = Object::new(ObjType::Group, None, set.clone());
    g.parent = Some(at);
    let (inside, outside): (Vec<ObjId>, Vec<ObjId>) = tree[at]
        .children
        .iter()
        .copied()
        .partition(|&c| tree[c].cpuset.is_subset(set));
    g.children = inside.clone();
    tree.push(g);
    for c in inside {
        tree[c].parent = Some(id);
    }
    let mut ch = outside;
    ch.push(id);
    ch.sort_by_key(|&c| tree[c].cpuset.first());
    tree[at].children = ch;
    Ok(id)
}

fn dfs(tree: &[Object], id: ObjId, out: &mut Vec<ObjId>) {
    out.push(id);
    for &c in &tree[id].children {
        dfs(tree, c, out);
    }
}
