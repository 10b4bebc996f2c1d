//! Setting and reading a thread's CPU affinity, as the engine sees it: the [`Pinner`]
//! trait (Linux implements it in `autopin-os`), why pinning fails, and [`RecordingPinner`]
//! for tests.

use autopin_topology::CpuSet;
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Mutex;

/// Why a thread could not be pinned.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The thread no longer exists (it exited between discovery and pinning).
    #[error("thread {0} no longer exists")]
    Gone(i32),
    /// The kernel refused the CPU set (offline CPU, outside the cgroup cpuset, empty set).
    #[error("CPUs {cpus} are not usable for thread {tid}: {source}")]
    Refused {
        tid: i32,
        cpus: CpuSet,
        source: io::Error,
    },
    /// Not allowed to change another user's thread.
    #[error("not permitted to change the affinity of thread {tid}: {source}")]
    Permission { tid: i32, source: io::Error },
    #[error("affinity of thread {tid}: {source}")]
    Other { tid: i32, source: io::Error },
}

/// Sets and reads the CPU affinity of a thread (`tid` as in /proc/PID/task; 0 = caller).
pub trait Pinner: Send + Sync {
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> Result<(), PinError>;
    fn affinity(&self, tid: i32) -> Result<CpuSet, PinError>;
    /// The CPU `tid` last ran on (None: not known here).
    fn cpu_of(&self, _tid: i32) -> Option<u32> {
        None
    }
}

/// A fake [`Pinner`] for tests: remembers every call and the resulting affinities.
#[derive(Debug, Default)]
pub struct RecordingPinner {
    inner: Mutex<Recorded>,
}

#[derive(Debug, Default)]
struct Recorded {
    calls: Vec<(i32, CpuSet)>,
    current: HashMap<i32, CpuSet>,
    gone: HashSet<i32>,
}

impl RecordingPinner {
    pub fn new() -> Self {
        Self::default()
    }
    /// Makes later calls for `tid` fail with [`PinError::Gone`].
    pub fn mark_gone(&self, tid: i32) {
        self.lock().gone.insert(tid);
    }
    /// Every successful `set_affinity` call, in order.
    pub fn calls(&self) -> Vec<(i32, CpuSet)> {
        self.lock().calls.clone()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Recorded> {
        // A panic in another test thread must not hide this one's record.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Pinner for RecordingPinner {
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> Result<(), PinError> {
        let mut r = self.lock();
        if r.gone.contains(&tid) {
            return Err(PinError::Gone(tid));
        }
        r.calls.push((tid, cpus.clone()));
        r.current.insert(tid, cpus.clone());
        Ok(())
    }
    fn affinity(&self, tid: i32) -> Result<CpuSet, PinError> {
        let r = self.lock();
        if r.gone.contains(&tid) {
            return Err(PinError::Gone(tid));
        }
        r.current.get(&tid).cloned().ok_or(PinError::Gone(tid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recording_pinner_records() {
        let p = RecordingPinner::new();
        p.set_affinity(5, &CpuSet::from_cpus([1])).unwrap();
        p.mark_gone(6);
        assert!(matches!(
            p.set_affinity(6, &CpuSet::from_cpus([1])),
            Err(PinError::Gone(6))
        ));
        assert_eq!(p.calls(), vec![(5, CpuSet::from_cpus([1]))]);
        assert_eq!(p.affinity(5).unwrap(), CpuSet::from_cpus([1]));
    }
}
