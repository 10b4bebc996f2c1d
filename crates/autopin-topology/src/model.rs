//! The machine model: one tree of objects, as in hwloc — Machine → Package → Die → Group →
//! caches → Core → PU — with NUMA nodes attached where their memory is local, plus the
//! measurements that hang off the same model.

use crate::cpuset::CpuSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Index of an object in [`Machine::objects`].
pub type ObjId = usize;

/// The kinds of objects in the tree, from the root down. The order is the nesting order used
/// when two objects cover the same CPUs (a package is drawn above an L3 that spans it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ObjType {
    Machine,
    Package,
    Die,
    Group,
    Cache,
    Core,
    Pu,
}

impl ObjType {
    pub fn name(self) -> &'static str {
        match self {
            ObjType::Machine => "Machine",
            ObjType::Package => "Package",
            ObjType::Die => "Die",
            ObjType::Group => "Group",
            ObjType::Cache => "Cache",
            ObjType::Core => "Core",
            ObjType::Pu => "PU",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CacheKind {
    Data,
    Instruction,
    Unified,
}

/// Attributes of a cache object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheAttr {
    pub level: u8,
    pub kind: CacheKind,
    /// Size in bytes; 0 when unknown.
    pub size: u64,
    /// Line size in bytes; 0 when unknown.
    pub line_size: u32,
    /// Associativity; `None` when unknown, `Some(0)` for fully associative.
    pub ways: Option<u32>,
}

impl CacheAttr {
    /// The short name used in views and the flat JSON: `L1d`, `L1i`, `L2`, `L3`, ... (a split
    /// level-2 cache, as on ia64, gives `L2d`/`L2i`, as hwloc names them).
    pub fn label(&self) -> String {
        match (self.level, self.kind) {
            (l, CacheKind::Data) => format!("L{l}d"),
            (l, CacheKind::Instruction) => format!("L{l}i"),
            (l, CacheKind::Unified) => format!("L{l}"),
        }
    }
}

/// Attributes only a PU (hardware thread) has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PuAttr {
    /// Inside the process affinity mask and the cgroup cpuset.
    pub allowed: bool,
    /// Online PUs are the only ones in the tree; offline ones are listed in `Machine::offline`.
    pub online: bool,
    /// Index into `Machine::core_kinds` on hybrid CPUs.
    pub kind: Option<usize>,
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Object {
    pub ty: ObjType,
    /// The OS index (physical id) where Linux has one.
    pub os_index: Option<u32>,
    /// Position among the objects of the same type (and, for caches, same level and kind),
    /// in depth-first order.
    pub logical_index: u32,
    pub cpuset: CpuSet,
    pub parent: Option<ObjId>,
    pub children: Vec<ObjId>,
    /// NUMA nodes (indexes into `Machine::numa_nodes`) whose memory is local to this object.
    #[serde(default)]
    pub numa: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheAttr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pu: Option<PuAttr>,
    /// Free-form attributes (`CPUModel`, group kind `Cluster`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub info: BTreeMap<String, String>,
}

impl Object {
    pub fn new(ty: ObjType, os_index: Option<u32>, cpuset: CpuSet) -> Self {
        Object {
            ty,
            os_index,
            logical_index: 0,
            cpuset,
            parent: None,
            children: Vec::new(),
            numa: Vec::new(),
            cache: None,
            pu: None,
            info: BTreeMap::new(),
        }
    }

    /// `Package`, `L3`, `L1d`, `Core`, `PU`, `Group(Cluster)`...
    pub fn type_label(&self) -> String {
        match (&self.cache, self.ty) {
            (Some(c), _) => c.label(),
            (None, ObjType::Group) => match self.info.get("kind") {
                Some(k) => format!("Group({k})"),
                None => "Group".to_string(),
            },
            (None, ty) => ty.name().to_string(),
        }
    }

    pub fn is_cache_level(&self, level: u8) -> bool {
        self.cache
            .as_ref()
            .is_some_and(|c| c.level == level && c.kind != CacheKind::Instruction)
    }
}

/// A NUMA node: memory local to a set of CPUs (empty for memory-only nodes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumaNode {
    pub os_index: u32,
    pub logical_index: u32,
    /// CPUs this memory is local to.
    pub cpuset: CpuSet,
    /// Local memory in bytes (0 when unknown).
    pub memory: u64,
    /// Object the node is attached to in the tree.
    pub attached_to: ObjId,
    /// Memory kind where Linux tells it (`DRAM`, `HBM`, `NVM`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Memory tier (lower is faster) where Linux tells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u32>,
    /// A CPU-less node whose locality nothing tells (no initiators, no telling distances):
    /// hwloc hangs it from a CPU-less group below the machine, so it is local to no PU.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local_to_none: bool,
    /// The memory-side cache right in front of this node's memory (an index into
    /// `Machine::mem_caches`), the innermost one when there are several levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_cache: Option<usize>,
}

/// A memory-side cache as a source describes it, before it is an object: a cache in front
/// of NUMA nodes' memory rather than near CPUs (HMAT `memory_side_cache/indexN`, KNL MCDRAM
/// in cache mode, DRAM caching NVDIMMs in Intel's memory mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySideCache {
    /// 1 is nearest the CPUs.
    pub level: u32,
    /// Size in bytes.
    pub size: u64,
    pub line_size: u32,
    /// Associativity: `Some(1)` for a direct-mapped cache, `None` when unknown (Linux says
    /// only "indexed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways: Option<u32>,
}

/// A memory-side cache as an object of the model, hwloc's `MemCache`: it sits between the
/// object its NUMA nodes hang from and those nodes (`Package → MemCache → NUMANode`); a
/// cache of a higher level holds the one of the level below (`MemCache L2 → MemCache L1 →
/// NUMANode`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemCache {
    /// Its attributes (level, size, line size, associativity).
    pub cache: MemorySideCache,
    /// Position among the memory-side caches, in depth-first order (outer before inner).
    pub logical_index: u32,
    /// The CPUs its memory is local to (its nodes' CPUs).
    pub cpuset: CpuSet,
    /// The memory-side cache holding it (an index into `Machine::mem_caches`); `None` when
    /// it hangs from a CPU-side object directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<usize>,
    /// The CPU-side object it (or the outermost cache holding it) hangs from.
    pub attached_to: ObjId,
    /// The NUMA nodes behind it, directly or through the caches it holds (indexes into
    /// `Machine::numa_nodes`).
    pub nodes: Vec<usize>,
}

impl MemCache {
    /// lstopo's line: `MemCache L#0 (16GiB)`.
    pub fn label(&self) -> String {
        if self.cache.size > 0 {
            format!(
                "MemCache L#{} ({})",
                self.logical_index,
                autopin_human::lstopo_size(self.cache.size)
            )
        } else {
            format!("MemCache L#{}", self.logical_index)
        }
    }

    /// Level, size, line size and associativity as lstopo -v writes them:
    /// `depth=1 size=4GiB linesize=64 ways=1`.
    pub fn attributes(&self) -> String {
        let mut s = format!(
            "depth={} size={} linesize={}",
            self.cache.level,
            autopin_human::lstopo_size(self.cache.size),
            self.cache.line_size
        );
        if let Some(w) = self.cache.ways {
            s.push_str(&format!(" ways={w}"));
        }
        s
    }
}

/// What hangs on the memory side of a CPU-side object, in lstopo's order, with how deep it
/// is nested below the object (0: directly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryChild {
    /// A memory-side cache (index into `Machine::mem_caches`).
    Cache(usize, usize),
    /// A NUMA node (index into `Machine::numa_nodes`).
    Node(usize, usize),
}

impl NumaNode {
    /// `NUMANode`, with the memory kind in parentheses when known and a CPU-less node marked
    /// as such: `NUMANode(GPUMemory, no CPUs)`.
    pub fn type_label(&self) -> String {
        let mut tags: Vec<String> = self.kind.iter().cloned().collect();
        if self.cpuset.is_empty() {
            tags.push("no CPUs".into());
        }
        if tags.is_empty() {
            "NUMANode".into()
        } else {
            format!("NUMANode({})", tags.join(", "))
        }
    }
}

/// A kind of core on hybrid CPUs, ordered from least to most performant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreKind {
    /// `IntelAtom`, `IntelCore`, or `capacity=N` / `max_freq=N` when inferred.
    pub name: String,
    pub cpuset: CpuSet,
    /// Higher is more performant (hwloc's efficiency rank).
    pub efficiency: u32,
}

/// One-way core-to-core latencies measured or read from a file, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyTable {
    /// OS indexes of the rows/columns.
    pub cpus: Vec<u32>,
    /// `ns[i][j]`: latency from `cpus[i]` to `cpus[j]`; NaN-free, diagonal 0.
    pub ns: Vec<Vec<f64>>,
    /// Where the numbers came from (`measured`, a file name).
    pub source: String,
}

impl LatencyTable {
    pub fn get(&self, a: u32, b: u32) -> Option<f64> {
        let i = self.cpus.iter().position(|&c| c == a)?;
        let j = self.cpus.iter().position(|&c| c == b)?;
        Some(self.ns[i][j])
    }
}

/// Memory latency and bandwidth of one NUMA node seen from one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryMeasurement {
    /// OS index of the NUMA node whose memory was used.
    pub node: u32,
    /// CPU the (first) measuring thread ran on.
    pub from_cpu: u32,
    pub latency_ns: Option<f64>,
    /// Read bandwidth of one thread, GB/s.
    pub read_gbs_single: Option<f64>,
    /// Write bandwidth of one thread, GB/s.
    pub write_gbs_single: Option<f64>,
    /// Read bandwidth of all threads of the measuring package/node, GB/s.
    pub read_gbs_all: Option<f64>,
    /// Write bandwidth of all threads of the measuring package/node, GB/s.
    pub write_gbs_all: Option<f64>,
}

/// Data measured on the machine rather than read from the OS.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyTable>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryMeasurement>,
    /// Power per package in watts where measured (for the POWER policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_watts: Option<BTreeMap<u32, f64>>,
}

/// The whole machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// `objects[0]` is the Machine root.
    pub objects: Vec<Object>,
    pub numa_nodes: Vec<NumaNode>,
    /// Memory-side caches, in depth-first order (outer before inner); each NUMA node
    /// names the one right in front of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mem_caches: Vec<MemCache>,
    /// `distances[i][j]` between `numa_nodes[i]` and `numa_nodes[j]` (ACPI SLIT values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_distances: Option<Vec<Vec<u32>>>,
    /// PUs that exist but are offline (not in the tree).
    #[serde(default)]
    pub offline: CpuSet,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_kinds: Vec<CoreKind>,
    #[serde(default)]
    pub measurements: Measurements,
    /// Where the model came from (`sysfs:/`, `synthetic:...`, a file) and machine-wide facts.
    #[serde(default)]
    pub info: BTreeMap<String, String>,
    /// What the source had to work around (an unreadable file and the fallback taken, a
    /// contradictory NUMA table that was repaired), one line each, naming the file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// PCI devices (GPUs, network adapters, disks...) and where they hang; empty when the
    /// source knows none (synthetic machines).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io: Vec<crate::io::PciDevice>,
    /// Host and PCI bridges, parents before children in lstopo's order (`--whole-io`);
    /// empty when the source tells no PCI tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_bridges: Vec<crate::io::PciBridge>,
    /// PCI devices lstopo shows only under `--whole-io` (host bridge functions, USB,
    /// SMBus, ...), attached like `io`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_other: Vec<crate::io::PciDevice>,
}
