//! From an [`Inference`] to the shared [`Machine`] model.

use crate::infer::{Inference, Role};
use crate::matrix::LatencyMatrix;
use autopin_topology::builder::{Builder, NumaSpec};
use autopin_topology::{
    CacheAttr, CacheKind, CoreKind, CpuSet, Machine, MemoryMeasurement, ObjType, Object,
};

/// Facts from elsewhere in a file that the matrix cannot give.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Local NUMA node of each CPU (OS number → node), when memory latencies were measured.
    pub numa_of_cpu: Option<Vec<(u32, u32)>>,
    /// Number of NUMA nodes when known (nodes without CPUs become memory-only nodes).
    pub nodes: Option<usize>,
    /// Cache sizes in bytes by level.
    pub cache_sizes: Vec<(u8, u64)>,
    pub memory: Vec<MemoryMeasurement>,
}

pub fn to_machine(inf: &Inference, matrix: &LatencyMatrix, extras: &Extras) -> Machine {
    let mut b = Builder::new();
    let cores = inf.cores();
    // Hybrid: cores with different thread counts become core kinds, more threads ranked higher.
    let mut threads: Vec<usize> = cores.iter().map(|c| c.len()).collect();
    threads.sort_unstable();
    threads.dedup();
    let hybrid = threads.len() > 1;
    if hybrid {
        for (rank, &t) in threads.iter().enumerate() {
            let set = CpuSet::from_cpus(cores.iter().filter(|c| c.len() == t).flatten().copied());
            b.core_kinds.push(CoreKind {
                name: format!("threads_per_core={t}"),
                cpuset: set,
                efficiency: rank as u32,
            });
        }
    }
    for (ci, core) in cores.iter().enumerate() {
        let kind = hybrid.then(|| threads.iter().position(|&t| t == core.len()).unwrap_or(0));
        for &cpu in core {
            b.add_pu(cpu, true, kind);
        }
        b.add(Object::new(
            ObjType::Core,
            Some(ci as u32),
            CpuSet::from_cpus(core.iter().copied()),
        ));
    }
    let size_of = |level: u8| {
        extras
            .cache_sizes
            .iter()
            .find(|(l, _)| *l == level)
            .map_or(0, |(_, s)| *s)
    };
    let cache = |level: u8, set: CpuSet| {
        let mut o = Object::new(ObjType::Cache, None, set);
        o.cache = Some(CacheAttr {
            level,
            kind: CacheKind::Unified,
            size: size_of(level),
            line_size: 0,
            ways: None,
        });
        o
    };
    let mut has_l3 = false;
    for l in &inf.levels {
        for (gi, g) in l.groups.iter().enumerate() {
            let set = CpuSet::from_cpus(g.iter().copied());
            match l.role {
                Role::Smt => {}
                Role::Cache(level) => {
                    has_l3 |= level == 3;
                    b.add(cache(level, set));
                }
                Role::Group | Role::PackageGroup => b.add(Object::new(ObjType::Group, None, set)),
                Role::Die => b.add(Object::new(ObjType::Die, Some(gi as u32), set)),
                Role::Package => b.add(Object::new(ObjType::Package, Some(gi as u32), set)),
            }
        }
    }
    let packages = inf.packages();
    if inf.level_of(Role::Package).is_none() {
        b.add(Object::new(
            ObjType::Package,
            Some(0),
            CpuSet::from_cpus(inf.cpus.iter().copied()),
        ));
    }
    // No sharing level inside a package: assume it shares one last-level cache, as nearly
    // every multicore does (and as MCTOP assumes).
    let inner = inf
        .levels
        .iter()
        .any(|l| matches!(l.role, Role::Cache(_) | Role::Group | Role::Die));
    if !has_l3 && !inner {
        for p in &packages {
            b.add(cache(3, CpuSet::from_cpus(p.iter().copied())));
        }
        b.info.insert(
            "latency.assumed".into(),
            "one L3 per package (no sharing level seen inside packages)".into(),
        );
    }
    // NUMA: measured locality when given, else one node per package.
    match &extras.numa_of_cpu {
        Some(map) => {
            let nodes = extras
                .nodes
                .unwrap_or(0)
                .max(map.iter().map(|(_, n)| *n as usize + 1).max().unwrap_or(1));
            for node in 0..nodes as u32 {
                let set =
                    CpuSet::from_cpus(map.iter().filter(|(_, n)| *n == node).map(|(c, _)| *c));
                b.add_numa(NumaSpec {
                    os_index: node,
                    cpuset: set,
                    initiators: CpuSet::new(),
                    memory: 0,
                    kind: None,
                    tier: None,
                });
            }
        }
        None => {
            // One node per package; without a level of packages, one per group of the top
            // level that is no cache (dies and sockets alike have their own memory).
            let packages = if inf.level_of(Role::Package).is_some() {
                packages.clone()
            } else {
                inf.levels
                    .iter()
                    .rev()
                    .find(|l| matches!(l.role, Role::Group | Role::Die))
                    .map(|l| l.groups.clone())
                    .unwrap_or_else(|| packages.clone())
            };
            for (i, p) in packages.iter().enumerate() {
                let set = CpuSet::from_cpus(p.iter().copied());
                b.add_numa(NumaSpec {
                    os_index: i as u32,
                    cpuset: set,
                    initiators: CpuSet::new(),
                    memory: 0,
                    kind: None,
                    tier: None,
                });
            }
        }
    }
    b.info
        .insert("source".into(), format!("latency:{}", matrix.source));
    b.info.insert(
        "latency.confidence".into(),
        format!("{:.2}", inf.confidence),
    );
    let mut m = b.build();
    m.measurements.latency = Some(matrix.to_table());
    m.measurements.memory = extras.memory.clone();
    m
}
