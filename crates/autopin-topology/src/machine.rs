//! Questions asked of a [`Machine`]: walking the tree, finding PUs, the flat per-PU view.

use crate::cpuset::CpuSet;
use crate::error::InvalidTree;
use crate::model::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What an I/O warning is about, for [`Machine::attach_io_from`] to name its origin.
#[derive(Debug, Clone, Copy)]
pub enum IoOrigin<'a> {
    /// A host bridge, by its index in `Machine::pci_bridges`.
    Host(usize),
    /// A device, by its bus id.
    Device(&'a str),
}

/// One node of the PCI tree below a bridge or CPU-side object ([`Machine::pci_children`]).
#[derive(Debug, Clone, Copy)]
pub enum PciChild<'a> {
    /// A bridge and its index in `Machine::pci_bridges`.
    Bridge(usize, &'a crate::io::PciBridge),
    Device(&'a crate::io::PciDevice),
}

/// One PU as the flat JSON view (`pus`) shows it; ids are unique per object (its `ObjId`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlatPu {
    pub os: u32,
    pub allowed: bool,
    pub online: bool,
    pub core: Option<usize>,
    pub package: Option<usize>,
    pub die: Option<usize>,
    pub numa: Vec<u32>,
    pub caches: BTreeMap<String, usize>,
    pub kind: Option<usize>,
}

impl Machine {
    pub fn root(&self) -> &Object {
        &self.objects[0]
    }

    pub fn obj(&self, id: ObjId) -> &Object {
        &self.objects[id]
    }

    /// Ids of all objects in depth-first order.
    pub fn dfs_order(&self) -> Vec<ObjId> {
        let mut out = Vec::with_capacity(self.objects.len());
        let mut stack = vec![0];
        while let Some(id) = stack.pop() {
            out.push(id);
            stack.extend(self.objects[id].children.iter().rev());
        }
        out
    }

    /// Ids of objects of a type, in logical order.
    pub fn objects_of(&self, ty: ObjType) -> Vec<ObjId> {
        let mut v: Vec<ObjId> = (0..self.objects.len())
            .filter(|&i| self.objects[i].ty == ty)
            .collect();
        v.sort_by_key(|&i| self.objects[i].logical_index);
        v
    }

    /// Data or unified caches of a level, in logical order.
    pub fn caches_of_level(&self, level: u8) -> Vec<ObjId> {
        let mut v: Vec<ObjId> = (0..self.objects.len())
            .filter(|&i| self.objects[i].is_cache_level(level))
            .collect();
        v.sort_by_key(|&i| self.objects[i].logical_index);
        v
    }

    /// The highest cache level present (the last-level cache), if any.
    pub fn llc_level(&self) -> Option<u8> {
        self.objects
            .iter()
            .filter_map(|o| o.cache.as_ref())
            .filter(|c| c.kind != CacheKind::Instruction)
            .map(|c| c.level)
            .max()
    }

    /// PU ids in logical order (hwloc's `L#`): cores' threads are adjacent.
    pub fn pus(&self) -> Vec<ObjId> {
        self.objects_of(ObjType::Pu)
    }

    pub fn pu_by_os(&self, os: u32) -> Option<ObjId> {
        self.objects
            .iter()
            .position(|o| o.ty == ObjType::Pu && o.os_index == Some(os))
    }

    /// The closest ancestor (not the object itself) matching `pred`.
    pub fn ancestor(&self, id: ObjId, pred: impl Fn(&Object) -> bool) -> Option<ObjId> {
        let mut at = self.objects[id].parent;
        while let Some(p) = at {
            if pred(&self.objects[p]) {
                return Some(p);
            }
            at = self.objects[p].parent;
        }
        None
    }

    pub fn ancestor_of_type(&self, id: ObjId, ty: ObjType) -> Option<ObjId> {
        self.ancestor(id, |o| o.ty == ty)
    }

    /// All online PUs in the tree.
    pub fn online_cpuset(&self) -> CpuSet {
        self.objects[0].cpuset.clone()
    }

    /// PUs we may run on (online, in our affinity mask and cgroup cpuset).
    pub fn allowed_cpuset(&self) -> CpuSet {
        self.objects
            .iter()
            .filter(|o| o.pu.as_ref().is_some_and(|p| p.allowed))
            .filter_map(|o| o.os_index)
            .collect()
    }

    /// Online PUs we may not run on (outside our affinity mask or cgroup cpuset).
    pub fn disallowed_cpuset(&self) -> CpuSet {
        self.objects
            .iter()
            .filter(|o| o.pu.as_ref().is_some_and(|p| !p.allowed))
            .filter_map(|o| o.os_index)
            .collect()
    }

    /// OS indexes of the NUMA nodes whose memory is local to this object (attached to it or
    /// to one of its ancestors).
    pub fn numa_of(&self, id: ObjId) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = Some(id);
        while let Some(a) = at {
            out.extend(
                self.objects[a]
                    .numa
                    .iter()
                    .map(|&n| &self.numa_nodes[n])
                    .filter(|n| !n.local_to_none)
                    .map(|n| n.os_index),
            );
            at = self.objects[a].parent;
        }
        out.sort_unstable();
        out
    }

    /// The flat per-PU view used by tools and tests. Offline PUs come last with
    /// `online: false, allowed: false`.
    pub fn flat_pus(&self) -> Vec<FlatPu> {
        let mut out = Vec::new();
        for id in self.pus() {
            let o = &self.objects[id];
            let mut caches = BTreeMap::new();
            let mut at = o.parent;
            while let Some(a) = at {
                if let Some(c) = &self.objects[a].cache {
                    caches.entry(c.label()).or_insert(a);
                }
                at = self.objects[a].parent;
            }
            let pu = o.pu.clone().unwrap_or(PuAttr {
                allowed: true,
                online: true,
                kind: None,
            });
            out.push(FlatPu {
                os: o.os_index.unwrap_or(0),
                allowed: pu.allowed,
                online: pu.online,
                core: self.ancestor_of_type(id, ObjType::Core),
                package: self.ancestor_of_type(id, ObjType::Package),
                die: self.ancestor_of_type(id, ObjType::Die),
                numa: self.numa_of(id),
                caches,
                kind: pu.kind,
            });
        }
        for os in self.offline.iter() {
            out.push(FlatPu {
                os,
                allowed: false,
                online: false,
                core: None,
                package: None,
                die: None,
                numa: Vec::new(),
                caches: BTreeMap::new(),
                kind: None,
            });
        }
        out
    }

    /// One line per level: how many of each object there are, and how many PUs are allowed.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let count = |ty| self.objects.iter().filter(|o| o.ty == ty).count();
        lines.push(format!("Packages: {}", count(ObjType::Package)));
        if count(ObjType::Die) > 0 {
            lines.push(format!("Dies: {}", count(ObjType::Die)));
        }
        if count(ObjType::Group) > 0 {
            lines.push(format!("Groups: {}", count(ObjType::Group)));
        }
        lines.push(format!("NUMA nodes: {}", self.numa_nodes.len()));
        let mut levels: Vec<(u8, CacheKind, String)> = self
            .objects
            .iter()
            .filter_map(|o| o.cache.as_ref().map(|c| (c.level, c.kind, c.label())))
            .collect();
        levels.sort();
        levels.dedup();
        for (level, kind, label) in levels {
            let n = self
                .objects
                .iter()
                .filter(|o| {
                    o.cache
                        .as_ref()
                        .is_some_and(|c| c.level == level && c.kind == kind)
                })
                .count();
            lines.push(format!("{label} caches: {n}"));
        }
        lines.push(format!("Cores: {}", count(ObjType::Core)));
        let pus = count(ObjType::Pu);
        let allowed = self.allowed_cpuset();
        lines.push(format!(
            "PUs: {} online ({}), {} allowed ({}), {} offline{}",
            pus,
            self.online_cpuset(),
            allowed.len(),
            allowed,
            self.offline.len(),
            if self.offline.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.offline)
            }
        ));
        if !self.core_kinds.is_empty() {
            let kinds: Vec<String> = self
                .core_kinds
                .iter()
                .map(|k| format!("{} ({})", k.name, k.cpuset))
                .collect();
            lines.push(format!("Core kinds: {}", kinds.join(", ")));
        }
        lines
    }

    /// Checks the tree's invariants; sources call this before handing a model out, so a
    /// hand-edited JSON file cannot produce a model that later code would trip over.
    pub fn validate(&self) -> Result<(), InvalidTree> {
        if self.objects.is_empty() || self.objects[0].ty != ObjType::Machine {
            return Err(InvalidTree::NoMachineFirst);
        }
        for (i, o) in self.objects.iter().enumerate() {
            for &c in &o.children {
                let child = self.objects.get(c).ok_or(InvalidTree::MissingChild {
                    parent: i,
                    child: c,
                })?;
                if child.parent != Some(i) {
                    return Err(InvalidTree::OtherParent {
                        parent: i,
                        child: c,
                    });
                }
                if !child.cpuset.is_subset(&o.cpuset) {
                    return Err(InvalidTree::OutsideParent {
                        parent: i,
                        child: c,
                    });
                }
            }
            if i > 0 && o.parent.is_none() {
                return Err(InvalidTree::NoParent(i));
            }
            if o.ty == ObjType::Pu && (o.cpuset.len() != 1 || o.os_index.is_none()) {
                return Err(InvalidTree::PuNotOneCpu(i));
            }
            for &n in &o.numa {
                if n >= self.numa_nodes.len() {
                    return Err(InvalidTree::MissingNumaNode { object: i, node: n });
                }
            }
        }
        if let Some(d) = &self.numa_distances {
            if d.len() != self.numa_nodes.len()
                || d.iter().any(|r| r.len() != self.numa_nodes.len())
            {
                return Err(InvalidTree::DistanceShape);
            }
        }
        for (i, b) in self.pci_bridges.iter().enumerate() {
            if b.parent.is_some_and(|p| p >= i) {
                return Err(InvalidTree::BridgeParentAfter(i));
            }
            if b.attached_to >= self.objects.len() {
                return Err(InvalidTree::BridgeAttachedToNothing(i));
            }
        }
        for d in self.io.iter().chain(&self.pci_other) {
            if d.attached_to >= self.objects.len() {
                return Err(InvalidTree::PciAttachedToNothing(d.busid.to_string()));
            }
            if d.bridge.is_some_and(|b| b >= self.pci_bridges.len()) {
                return Err(InvalidTree::PciBehindMissingBridge(d.busid.to_string()));
            }
        }
        for n in &self.numa_nodes {
            if n.attached_to >= self.objects.len() {
                return Err(InvalidTree::NumaAttachedToNothing(n.os_index));
            }
            if n.mem_cache.is_some_and(|c| c >= self.mem_caches.len()) {
                return Err(InvalidTree::NumaBehindMissingCache(n.os_index));
            }
        }
        for (i, c) in self.mem_caches.iter().enumerate() {
            if c.attached_to >= self.objects.len()
                || c.parent.is_some_and(|p| p >= i)
                || c.nodes.iter().any(|&n| n >= self.numa_nodes.len())
            {
                return Err(InvalidTree::MemCacheDangling(i));
            }
        }
        Ok(())
    }
}

// ---- memory side

impl Machine {
    /// What hangs on the memory side of `at`, in lstopo's order: memory-side caches and
    /// NUMA nodes, each cache followed by what it holds (one level deeper), ordered by the
    /// first NUMA node behind each.
    pub fn memory_children(&self, at: ObjId) -> Vec<MemoryChild> {
        let mut out = Vec::new();
        self.memory_below(at, None, 0, &mut out);
        out
    }

    fn memory_below(
        &self,
        at: ObjId,
        cache: Option<usize>,
        depth: usize,
        out: &mut Vec<MemoryChild>,
    ) {
        // (first node behind it, is a node, index)
        let mut here: Vec<(usize, bool, usize)> = Vec::new();
        for (i, c) in self.mem_caches.iter().enumerate() {
            let mine = match cache {
                Some(p) => c.parent == Some(p),
                None => c.parent.is_none() && c.attached_to == at,
            };
            if mine {
                here.push((c.nodes.first().copied().unwrap_or(usize::MAX), false, i));
            }
        }
        let nodes: Vec<usize> = match cache {
            Some(_) => (0..self.numa_nodes.len())
                .filter(|&n| self.numa_nodes[n].mem_cache == cache)
                .collect(),
            None => self.objects[at]
                .numa
                .iter()
                .copied()
                .filter(|&n| self.numa_nodes[n].mem_cache.is_none())
                .collect(),
        };
        here.extend(nodes.into_iter().map(|n| (n, true, n)));
        here.sort_unstable();
        for (_, node, i) in here {
            if node {
                out.push(MemoryChild::Node(i, depth));
            } else {
                out.push(MemoryChild::Cache(i, depth));
                self.memory_below(at, Some(i), depth + 1, out);
            }
        }
    }
}

// ---- I/O devices

impl Machine {
    /// Hangs every I/O device from its CPU-side object, as hwloc hangs its PCI trees: a host
    /// bridge where its CPUs (`PciBridge::local_cpus`, which the source decided; see
    /// docs/topology.md) say, bridges and devices behind it with it, a device the source
    /// puts behind no bridge by its own CPUs. Orders the devices by bus id (domains
    /// compared as numbers, as hwloc does, so `ffff:` comes before `10000:`) and each
    /// one's OS devices by kind and name.
    pub fn attach_io(&mut self) {
        self.attach_io_from(&|_| None)
    }

    /// [`Machine::attach_io`], with `origin` naming what a warning is about (a file, a
    /// variable): it is asked for a host bridge (`IoOrigin::Host`, its index) or a device.
    pub fn attach_io_from(&mut self, origin: &dyn Fn(IoOrigin) -> Option<String>) {
        let prefix = |o: IoOrigin, what: String| match origin(o) {
            Some(p) => format!("{p}: {what}"),
            None => what,
        };
        let all = self.root().cpuset.clone();
        let own = |cpus: &CpuSet| {
            let c = cpus.intersection(&all);
            if c.is_empty() {
                all.clone()
            } else {
                c
            }
        };
        // A bridge hangs where its host bridge does (parents come before children).
        for i in 0..self.pci_bridges.len() {
            let cpus = own(&self.pci_bridges[i].local_cpus);
            self.pci_bridges[i].local_cpus = cpus;
            let at = match self.pci_bridges[i].parent {
                Some(p) if p < i => self.pci_bridges[p].attached_to,
                _ => {
                    let what = prefix(
                        IoOrigin::Host(i),
                        format!("PCI host bridge {}", self.pci_bridges[i].buses()),
                    );
                    let cpus = self.pci_bridges[i].local_cpus.clone();
                    self.io_attach(&cpus, &what)
                }
            };
            self.pci_bridges[i].attached_to = at;
        }
        for other in [false, true] {
            let mut list = if other {
                std::mem::take(&mut self.pci_other)
            } else {
                std::mem::take(&mut self.io)
            };
            list.sort_by_key(|d| crate::io::busid_key(&d.busid));
            for d in &mut list {
                d.local_cpus = own(&d.local_cpus);
                d.attached_to = match d.bridge.and_then(|b| self.pci_bridges.get(b)) {
                    Some(b) => b.attached_to,
                    None => {
                        let what = prefix(
                            IoOrigin::Device(&d.busid),
                            format!("PCI device {}", d.busid),
                        );
                        self.io_attach(&d.local_cpus, &what)
                    }
                };
                d.os_devices
                    .sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
            }
            if other {
                self.pci_other = list;
            } else {
                self.io = list;
            }
        }
        // hwloc 2, as most systems build it (without --enable-32bits-pci-domain), leaves out
        // and warns about devices of a domain above ffff (Intel VMD's 10000 and up); hwloc 3
        // keeps them, writing the domain in as many hex digits as it takes. Kept here, said
        // once.
        let mut wide: Vec<&str> = self
            .io
            .iter()
            .chain(&self.pci_other)
            .map(|d| d.busid.as_str())
            .chain(self.pci_bridges.iter().filter_map(|b| b.busid.as_deref()))
            .filter(|b| crate::io::busid_key(b).0 > 0xffff)
            .collect();
        wide.sort_by_key(|b| crate::io::busid_key(b));
        if let Some(first) = wide.first() {
            let w = prefix(IoOrigin::Device(first), format!(
                "PCI {} with a 32-bit domain ({first}{}, a VMD domain or the like): kept and named as hwloc 3 names {}; hwloc 2 built without --enable-32bits-pci-domain leaves {} out",
                if wide.len() == 1 { "device" } else { "devices" },
                if wide.len() > 1 {
                    format!(" and {} more", wide.len() - 1)
                } else {
                    String::new()
                },
                if wide.len() == 1 { "it" } else { "them" },
                if wide.len() == 1 { "it" } else { "them" },
            ));
            self.warnings.push(w);
        }
    }

    /// Where an I/O tree local to `cpus` hangs, as hwloc decides it
    /// (`hwloc_find_insert_io_parent_by_complete_cpuset`): the CPUs are cut to the machine's;
    /// none left, or all of them, is the machine; else the highest object with exactly these
    /// CPUs, or a Group made for them (hwloc's I/O group) under the deepest object holding
    /// them. When such a group would cut across an object (it holds part of it only), hwloc
    /// reports invalid information from the operating system and takes the deepest object
    /// holding the CPUs; so does this, with a warning naming `what`.
    fn io_attach(&mut self, cpus: &CpuSet, what: &str) -> ObjId {
        let set = cpus.intersection(&self.objects[0].cpuset);
        if set.is_empty() || set == self.objects[0].cpuset {
            return 0;
        }
        let before = self.objects.len();
        match crate::builder::attach_point(&mut self.objects, &set) {
            Ok(id) => {
                if self.objects.len() > before {
                    crate::builder::number(&mut self.objects);
                }
                id
            }
            Err(at) => {
                let cut = self.objects[at]
                    .children
                    .iter()
                    .map(|&c| &self.objects[c])
                    .find(|c| c.cpuset.intersects(&set) && !c.cpuset.is_subset(&set))
                    .map(|c| {
                        format!(
                            "{} L#{} (CPUs {})",
                            c.type_label(),
                            c.logical_index,
                            c.cpuset
                        )
                    })
                    .unwrap_or_default();
                let parent = &self.objects[at];
                let parent = if at == 0 {
                    "the machine".to_string()
                } else {
                    format!("{} L#{}", parent.type_label(), parent.logical_index)
                };
                self.warnings.push(format!(
                    "{what}: its CPUs {set} cut across {cut} without holding it all (hwloc reports this as invalid information from the operating system); it hangs from {parent}, the smallest object holding them, as in hwloc"
                ));
                at
            }
        }
    }

    /// Forgets the PCI tree (bridges, the devices lstopo hides by default, which bridge
    /// each device sits behind), the DMA engines and DRM devices, leaving the devices and OS devices
    /// lstopo shows without `--whole-io`.
    pub fn drop_whole_io(&mut self) {
        self.pci_bridges.clear();
        self.pci_other.clear();
        for d in &mut self.io {
            d.bridge = None;
            d.os_devices.retain(|o| o.important());
        }
    }

    /// Leaves out every I/O object (`--no-io`).
    pub fn drop_io(&mut self) {
        self.drop_whole_io();
        self.io.clear();
    }

    /// What hangs directly below a bridge (`Some(index)`) or, with `None`, directly below
    /// the CPU-side object `at` in the whole PCI tree: bridges and devices (shown or not by
    /// default) in bus-id order, host bridges first in their own order.
    pub fn pci_children(&self, bridge: Option<usize>, at: ObjId) -> Vec<PciChild<'_>> {
        let mut hosts: Vec<PciChild> = Vec::new();
        let mut out: Vec<((u32, u8, u8, u8), PciChild)> = Vec::new();
        for (i, b) in self.pci_bridges.iter().enumerate() {
            let here = match bridge {
                Some(p) => b.parent == Some(p),
                None => b.parent.is_none() && b.attached_to == at,
            };
            if !here {
                continue;
            }
            match &b.busid {
                Some(id) => out.push((crate::io::busid_key(id), PciChild::Bridge(i, b))),
                None => hosts.push(PciChild::Bridge(i, b)),
            }
        }
        for d in self.io.iter().chain(&self.pci_other) {
            let here = match bridge {
                Some(p) => d.bridge == Some(p),
                None => d.bridge.is_none() && d.attached_to == at,
            };
            if here {
                out.push((crate::io::busid_key(&d.busid), PciChild::Device(d)));
            }
        }
        out.sort_by_key(|a| a.0);
        hosts.extend(out.into_iter().map(|(_, c)| c));
        hosts
    }

    /// The GPUs in bus-id order: `G0` is the first. This is CUDA's order under
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID` (what nvidia-smi shows) and ROCm's enumeration order.
    pub fn gpus(&self) -> Vec<&crate::io::PciDevice> {
        self.io.iter().filter(|d| d.is_gpu()).collect()
    }

    /// The device a user names: a bus id (`0000:3b:00.0`, `3b:00.0`) or an OS device name
    /// (`ib0`, `mlx5_0`, `card0`, `sda`).
    pub fn io_device(&self, name: &str) -> Option<&crate::io::PciDevice> {
        let busid = crate::io::parse_busid(name);
        self.io.iter().find(|d| {
            busid.as_deref() == Some(d.busid.as_str())
                || d.os_devices.iter().any(|o| o.name == name)
        })
    }

    /// Every name a device can be called by here, for error messages.
    pub fn io_names(&self) -> Vec<String> {
        self.io
            .iter()
            .map(|d| {
                let os: Vec<&str> = d.os_devices.iter().map(|o| o.name.as_str()).collect();
                if os.is_empty() {
                    d.busid.clone()
                } else {
                    format!("{} ({})", d.busid, os.join(", "))
                }
            })
            .collect()
    }
}
