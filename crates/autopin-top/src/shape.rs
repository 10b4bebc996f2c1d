//! What top needs of the machine's shape: its PUs in topology order, grouped as the map draws
//! them (packages → NUMA nodes → L3 or dies → cores → PUs), each CPU's core and node, and
//! likwid's domain names for writing a CPU mask short.

use autopin_topology::{CpuSet, Machine, ObjType};
use std::collections::BTreeMap;

/// The PUs that share one package, NUMA node and L3 (or die): one box of the map.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// `P0 N1 L3#2`: only the levels that tell groups apart (empty on a machine of one).
    pub label: String,
    /// Its cores, each the OS numbers of its PUs.
    pub cores: Vec<Vec<u32>>,
}

impl Group {
    pub fn pus(&self) -> usize {
        self.cores.iter().map(Vec::len).sum()
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shape {
    pub groups: Vec<Group>,
    /// CPU → its core's logical index.
    pub core_of: BTreeMap<u32, usize>,
    /// CPU → its NUMA node (OS number).
    pub node_of: BTreeMap<u32, u32>,
    /// The CPUs the machine lets programs use, in OS order.
    pub cpus: Vec<u32>,
    /// likwid's domains (N, S#, D#, C#, M#) and their CPUs, in likwid's order.
    pub domains: Vec<(String, CpuSet)>,
    pub packages: usize,
    pub nodes: usize,
}

impl Shape {
    pub fn of(m: &Machine) -> Shape {
        let llc = m.llc_level();
        let logical = |pu, ty| m.ancestor_of_type(pu, ty).map(|o| m.obj(o).logical_index);
        let l3 = |pu| {
            llc.and_then(|lv| m.ancestor(pu, |o| o.is_cache_level(lv)))
                .map(|o| m.obj(o).logical_index)
                .or_else(|| logical(pu, ObjType::Die))
        };
        let pus = m.pus();
        let key = |pu| {
            (
                logical(pu, ObjType::Package),
                m.numa_of(pu).first().copied(),
                l3(pu),
            )
        };
        let distinct = |f: &dyn Fn(usize) -> Option<u32>| {
            let mut v: Vec<Option<u32>> = pus.iter().map(|p| f(*p)).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        let packages = distinct(&|p| logical(p, ObjType::Package));
        let nodes = m.numa_nodes.len().max(1);
        let many_l3 = distinct(&|p| l3(p)) > packages.max(nodes);
        let llc_name = match llc {
            Some(lv) => format!("L{lv}#"),
            None => "D".into(),
        };
        let mut groups: Vec<Group> = Vec::new();
        let mut last_key = None;
        let mut last_core = None;
        let mut core_of = BTreeMap::new();
        let mut node_of = BTreeMap::new();
        for &pu in &pus {
            let os = m.obj(pu).os_index.unwrap_or(0);
            let k = key(pu);
            let core = m.ancestor_of_type(pu, ObjType::Core).unwrap_or(pu);
            // The core's logical index (a PU without a core is a core of its own).
            let core_index = m
                .ancestor_of_type(pu, ObjType::Core)
                .map_or(1_000_000 + os as usize, |c| m.obj(c).logical_index as usize);
            core_of.insert(os, core_index);
            if let Some(n) = k.1 {
                node_of.insert(os, n);
            }
            if last_key != Some(k) {
                let mut label = Vec::new();
                if packages > 1 {
                    label.push(format!("P{}", k.0.unwrap_or(0)));
                }
                if nodes > 1 {
                    label.push(k.1.map_or("N?".into(), |n| format!("N{n}")));
                }
                if many_l3 {
                    label.push(format!("{llc_name}{}", k.2.unwrap_or(0)));
                }
                groups.push(Group {
                    label: label.join(" "),
                    cores: Vec::new(),
                });
                last_key = Some(k);
                last_core = None;
            }
            let g = groups.last_mut().expect("a group was pushed");
            if last_core != Some(core) {
                g.cores.push(Vec::new());
                last_core = Some(core);
            }
            g.cores.last_mut().expect("a core was pushed").push(os);
        }
        let domains = autopin_placement::domains(m)
            .into_iter()
            .filter(|d| "NSDCM".contains(d.kind))
            .map(|d| (d.tag, d.cpus.into_iter().collect::<CpuSet>()))
            .collect();
        Shape {
            groups,
            core_of,
            node_of,
            cpus: m.allowed_cpuset().iter().collect(),
            domains,
            packages,
            nodes,
        }
    }

    /// A CPU mask written short, as likwid names it: a whole domain by its name (`N` the
    /// whole machine, `S0` a package, `D0` a die, `C0` an L3 group, `M0` a NUMA node),
    /// else the CPU list (`0-3,8`).
    pub fn compact(&self, set: &CpuSet) -> String {
        if set.is_empty() {
            return "-".into();
        }
        let mine = set.intersection(&self.cpus.iter().copied().collect());
        if let Some((tag, _)) = self
            .domains
            .iter()
            .find(|(_, d)| !d.is_empty() && *d == mine && mine.len() == set.len())
        {
            return tag.clone();
        }
        set.to_list()
    }

    /// How the machine is described in a title: `2 CPUs`, `256 CPUs, 8 packages, 8 NUMA nodes`.
    pub fn summary(&self) -> String {
        let mut s = autopin_human::plural(self.core_of.len() as u64, "CPU", "CPUs");
        let cores: std::collections::BTreeSet<usize> = self.core_of.values().copied().collect();
        if cores.len() != self.core_of.len() {
            s += &format!(
                " ({})",
                autopin_human::plural(cores.len() as u64, "core", "cores")
            );
        }
        if self.packages > 1 {
            s += &format!(", {} packages", self.packages);
        }
        if self.nodes > 1 {
            s += &format!(", {} NUMA nodes", self.nodes);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_packages_nodes_and_l3_with_smt_siblings_together() {
        let m = autopin_topology::source::synthetic::parse("package:2 l3:2 core:2 pu:2").unwrap();
        let s = Shape::of(&m);
        assert_eq!(s.groups.len(), 4, "{:?}", s.groups);
        assert_eq!(s.groups[0].label, "P0 L3#0");
        assert_eq!(s.groups[0].cores.len(), 2);
        assert_eq!(s.groups[0].pus(), 4);
        // Two PUs of a core are one core.
        let first = &s.groups[0].cores[0];
        assert_eq!(s.core_of[&first[0]], s.core_of[&first[1]]);
        assert_eq!(s.compact(&s.cpus.iter().copied().collect()), "N");
        let p1: CpuSet = s.groups[2]
            .cores
            .iter()
            .chain(&s.groups[3].cores)
            .flatten()
            .copied()
            .collect();
        assert_eq!(s.compact(&p1), "S1");
        assert_eq!(s.compact(&CpuSet::from_cpus([1, 2, 3])), "1-3");
        assert_eq!(s.summary(), "16 CPUs (8 cores), 2 packages");
    }

    #[test]
    fn one_package_one_node_has_one_unlabelled_group() {
        let m = autopin_topology::source::synthetic::parse("core:2 pu:1").unwrap();
        let s = Shape::of(&m);
        assert_eq!(s.groups.len(), 1);
        assert_eq!(s.groups[0].label, "");
        assert_eq!(s.compact(&CpuSet::from_cpus([0])), "0");
    }
}
