//! What a pinning uses: cores, packages, NUMA nodes, LLC groups, threads per core, and the
//! measured figures when the model has them (as MCTOP-PLACE prints: max latency between the
//! chosen CPUs, min bandwidth of the memory nodes they use).

use std::collections::{BTreeMap, BTreeSet};

use autopin_topology::{Machine, ObjType};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacementSummary {
    pub threads: usize,
    pub cores: usize,
    pub packages: usize,
    /// OS indexes of the NUMA nodes local to the chosen CPUs.
    pub numa_nodes: Vec<u32>,
    pub llc_groups: usize,
    /// Most threads sharing one core.
    pub max_threads_per_core: usize,
    /// Most threads sharing one CPU (>1 only for oversubscribed pinnings).
    pub max_threads_per_cpu: usize,
    /// Largest measured latency between two chosen CPUs, ns (when the model has a table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_latency_ns: Option<f64>,
    /// Smallest measured read bandwidth among the used NUMA nodes, GB/s (when measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_bandwidth_gbs: Option<f64>,
}

pub fn summarize(m: &Machine, cpus: &[u32]) -> PlacementSummary {
    let mut cores = BTreeMap::new();
    let mut per_cpu: BTreeMap<u32, usize> = BTreeMap::new();
    let mut packages = BTreeSet::new();
    let mut nodes = BTreeSet::new();
    let mut llcs = BTreeSet::new();
    let llc = m.llc_level();
    for &c in cpus {
        *per_cpu.entry(c).or_default() += 1;
        let Some(pu) = m.pu_by_os(c) else { continue };
        *cores
            .entry(m.ancestor_of_type(pu, ObjType::Core).unwrap_or(pu))
            .or_insert(0usize) += 1;
        packages.insert(m.ancestor_of_type(pu, ObjType::Package).unwrap_or(0));
        nodes.extend(m.numa_of(pu));
        if let Some(l) = llc {
            if let Some(c) = m.ancestor(pu, |o| o.is_cache_level(l)) {
                llcs.insert(c);
            }
        }
    }
    let max_latency_ns = m.measurements.latency.as_ref().and_then(|t| {
        let mut best: Option<f64> = None;
        for &a in cpus {
            for &b in cpus {
                if a != b {
                    if let Some(x) = t.get(a, b) {
                        best = Some(best.map_or(x, |y: f64| y.max(x)));
                    }
                }
            }
        }
        best
    });
    let min_bandwidth_gbs = m
        .measurements
        .memory
        .iter()
        .filter(|r| nodes.contains(&r.node))
        .filter_map(|r| r.read_gbs_all.or(r.read_gbs_single))
        .reduce(f64::min);
    PlacementSummary {
        threads: cpus.len(),
        cores: cores.len(),
        packages: packages.len(),
        numa_nodes: nodes.into_iter().collect(),
        llc_groups: llcs.len(),
        max_threads_per_core: cores.values().copied().max().unwrap_or(0),
        max_threads_per_cpu: per_cpu.values().copied().max().unwrap_or(0),
        max_latency_ns,
        min_bandwidth_gbs,
    }
}

impl PlacementSummary {
    /// Human lines for `autopin place`.
    pub fn lines(&self) -> Vec<String> {
        let nodes: Vec<String> = self.numa_nodes.iter().map(|n| n.to_string()).collect();
        let mut v = vec![
            format!("threads: {}", self.threads),
            format!("cores used: {}", self.cores),
            format!("packages used: {}", self.packages),
            format!(
                "NUMA nodes used: {} ({})",
                self.numa_nodes.len(),
                nodes.join(",")
            ),
            format!("LLC groups used: {}", self.llc_groups),
            format!("threads per core: at most {}", self.max_threads_per_core),
        ];
        if self.max_threads_per_cpu > 1 {
            v.push(format!(
                "threads per CPU: at most {} (oversubscribed)",
                self.max_threads_per_cpu
            ));
        }
        if let Some(l) = self.max_latency_ns {
            v.push(format!("max latency between chosen CPUs: {l:.1} ns"));
        }
        if let Some(b) = self.min_bandwidth_gbs {
            v.push(format!("min memory bandwidth of used nodes: {b:.2} GB/s"));
        }
        v
    }
}
