//! How an objective's events are counted and what counting costs the target: the counting
//! mode (per thread or per CPU; `autopin-perf` chooses it from what the machine allows) and
//! the measured cost of per-thread counting (`autopin-perf` measures it), with the estimate
//! of the slowdown it adds that the report states.

use std::path::PathBuf;

/// How counters are attached to the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CountingMode {
    /// One counter set per tracked thread.
    PerThread,
    /// One counter set per CPU in `cpus`; with `cgroup`, only tasks of that cgroup count.
    PerCpu {
        cpus: Vec<usize>,
        cgroup: Option<PathBuf>,
    },
}

/// The measured cost of per-thread counting on this machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CountingCost {
    /// Events that were attached.
    pub events: Vec<String>,
    /// Mean round trip (two switches on the shared CPU) without and with counters.
    pub round_trip_ns_plain: f64,
    pub round_trip_ns_counted: f64,
    /// Context switches of the two threads per round trip (measured, about 2).
    pub switches_per_round_trip: f64,
    /// Extra time per context switch of a counted thread (may be ~0 or slightly negative
    /// within noise on machines where counting is free).
    pub per_switch_ns: f64,
    /// Run-to-run spread of the uncounted runs, per switch (median − fastest): a
    /// `per_switch_ns` smaller than this is indistinguishable from zero.
    pub noise_ns: f64,
    /// Where a cost measured by an earlier run was kept, and when it was measured (None:
    /// measured by this run).
    #[serde(skip)]
    pub kept: Option<String>,
}

impl CountingCost {
    /// Is the measured cost larger than the measurement noise?
    pub fn is_significant(&self) -> bool {
        self.per_switch_ns > self.noise_ns.max(0.0)
    }

    /// First-order slowdown (fraction; 0.05 = 5 %) of a target doing `switches_per_sec`
    /// context switches per second over all its threads, running on `cpus` CPUs.
    pub fn estimated_slowdown(&self, switches_per_sec: f64, cpus: usize) -> f64 {
        (switches_per_sec * self.per_switch_ns.max(0.0) * 1e-9 / cpus.max(1) as f64).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowdown_estimate() {
        let c = CountingCost {
            events: vec![],
            round_trip_ns_plain: 10_000.0,
            round_trip_ns_counted: 14_000.0,
            switches_per_round_trip: 2.0,
            per_switch_ns: 2_000.0,
            noise_ns: 100.0,
            kept: None,
        };
        // 50k switches/s × 2 µs = 0.1 s/s over 2 CPUs = 5 %.
        assert!((c.estimated_slowdown(50_000.0, 2) - 0.05).abs() < 1e-12);
        assert_eq!(c.estimated_slowdown(0.0, 2), 0.0);
    }
}
