//! Pinning the calling thread, behind a trait so the measurement logic can be driven by a
//! fake in tests and by `sched_setaffinity` on Linux.

use crate::error::{LatencyError, Result};

pub trait Affinity: Sync {
    /// Pins the calling thread to one CPU.
    fn pin_current(&self, cpu: u32) -> Result<()>;
    /// CPUs this process may run on.
    fn allowed(&self) -> Result<Vec<u32>>;
}

/// The real thing: `sched_setaffinity(0, ...)` pins the calling thread only.
pub struct Linux;

impl Affinity for Linux {
    fn pin_current(&self, cpu: u32) -> Result<()> {
        autopin_topology::affinity::set(0, &autopin_topology::CpuSet::from_cpus([cpu]))
            .map_err(|e| LatencyError::Measure(format!("cannot pin a thread to CPU {cpu}: {e}")))
    }

    fn allowed(&self) -> Result<Vec<u32>> {
        autopin_topology::affinity::get(0)
            .map(|s| s.iter().collect())
            .map_err(|e| LatencyError::Measure(format!("sched_getaffinity: {e}")))
    }
}
