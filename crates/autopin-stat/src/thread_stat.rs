//! One thread's figures over a period: apart from the rest of [`crate::figures`] so that
//! [`crate::rules`], which judges a thread by them, and the figures, which use the rules to
//! tell the working threads, do not import each other.

use serde::Serialize;
use std::collections::BTreeMap;

/// One thread over the period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadStat {
    pub tid: i32,
    pub name: String,
    /// Share of one CPU it ran.
    pub cpu_share: f64,
    /// Share of the time it was runnable but waited for a CPU.
    pub run_delay_fraction: f64,
    /// The CPUs it was seen on.
    pub cpus: Vec<u32>,
    /// Migrations between CPUs in the period (None: the kernel does not say).
    pub migrations: Option<u64>,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// The NUMA nodes of the CPUs it ran on (empty on a machine of one node).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub numa_nodes: Vec<u32>,
    /// `-g` groups' event counts (perf's event names; clocks in seconds), scaled where
    /// multiplexed; an event not counted is absent.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, f64>,
    /// The groups' derived metrics (shares as fractions).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
    /// Events of `counters` the kernel multiplexed (counted part of the time, scaled up).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub multiplexed: Vec<String>,
}
