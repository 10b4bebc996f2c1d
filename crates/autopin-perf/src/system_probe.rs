//! Probing the running system for real: the [`ProbeOps`] that open perf counters, and
//! [`probe`]. Kept apart from `probe` (the pure classification) so that `counters` and
//! `probe` do not import each other.

use crate::counters::open_single;
use crate::probe::{probe_with, Availability, ProbeOps};
use crate::scope::Target;
use autopin_objective::EventSpec;
use autopin_objective::Sysfs;
use std::io;

/// Real probes through perf_event_open.
pub struct RealProbeOps;

impl ProbeOps for RealProbeOps {
    fn count_self(&self, spec: &EventSpec) -> io::Result<u64> {
        let tid = rustix::thread::gettid().as_raw_pid();
        let mut c = open_single(spec, Target::Thread(tid))?;
        // A little user-space work so instructions:u has something to count.
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let d = c.read_full()?;
        let v = crate::counters::CounterValue {
            raw: d.count(),
            enabled_ns: d.time_enabled().unwrap_or_default().as_nanos() as u64,
            running_ns: d.time_running().unwrap_or_default().as_nanos() as u64,
        };
        Ok(v.scaled().unwrap_or(0.0) as u64)
    }

    fn open_cpu(&self, spec: &EventSpec, cpu: usize) -> io::Result<()> {
        open_single(spec, Target::Cpu(cpu)).map(drop)
    }
}

/// Probe the running system, reading the paranoid level below `sysfs`.
pub fn probe_with_sysfs(sysfs: &Sysfs) -> Availability {
    probe_with(sysfs, &RealProbeOps)
}

/// Probe the running system.
pub fn probe() -> Availability {
    probe_with(&Sysfs::system(), &RealProbeOps)
}
