//! Setting and reading a thread's CPU affinity. The engine talks to the [`Pinner`] trait so
//! its decisions can be tested with [`RecordingPinner`] instead of the kernel.

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
}

/// The real thing: sched_setaffinity / sched_getaffinity.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxPinner;

/// Bytes of mask for CPUs `0..=max_cpu`, rounded up to whole `unsigned long`s as the kernel
/// wants.
fn mask_words(max_cpu: u32) -> usize {
    (max_cpu as usize / 64) + 1
}

fn classify(tid: i32, cpus: Option<&CpuSet>, e: io::Error) -> PinError {
    match e.raw_os_error() {
        Some(libc::ESRCH) => PinError::Gone(tid),
        Some(libc::EPERM) => PinError::Permission { tid, source: e },
        Some(libc::EINVAL) if cpus.is_some() => PinError::Refused {
            tid,
            cpus: cpus.cloned().unwrap_or_default(),
            source: e,
        },
        _ => PinError::Other { tid, source: e },
    }
}

impl Pinner for LinuxPinner {
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> Result<(), PinError> {
        let Some(max) = cpus.last() else {
            return Err(PinError::Refused {
                tid,
                cpus: cpus.clone(),
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        };
        let mut words = vec![0u64; mask_words(max)];
        for c in cpus.iter() {
            words[c as usize / 64] |= 1u64 << (c % 64);
        }
        // SAFETY: the pointer and length describe `words`, which outlives the call; the
        // kernel reads at most that many bytes.
        let rc = unsafe {
            libc::sched_setaffinity(
                tid,
                words.len() * 8,
                words.as_ptr() as *const libc::cpu_set_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(classify(tid, Some(cpus), io::Error::last_os_error()))
        }
    }

    fn affinity(&self, tid: i32) -> Result<CpuSet, PinError> {
        // Grow the buffer until the kernel's cpumask fits (EINVAL means too small).
        let mut words = 16usize;
        loop {
            let mut buf = vec![0u64; words];
            // SAFETY: buf is writable for words*8 bytes for the duration of the call.
            let rc = unsafe {
                libc::sched_getaffinity(tid, words * 8, buf.as_mut_ptr() as *mut libc::cpu_set_t)
            };
            if rc == 0 {
                let mut set = CpuSet::new();
                for (w, bits) in buf.iter().enumerate() {
                    for b in 0..64 {
                        if bits >> b & 1 == 1 {
                            set.insert((w * 64 + b) as u32);
                        }
                    }
                }
                return Ok(set);
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) && words < 1 << 16 {
                words *= 4;
                continue;
            }
            return Err(classify(tid, None, e));
        }
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
    fn linux_pinner_round_trips_on_this_thread() {
        let p = LinuxPinner;
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        let before = p.affinity(tid).unwrap();
        let one = CpuSet::from_cpus([before.first().unwrap()]);
        p.set_affinity(tid, &one).unwrap();
        assert_eq!(p.affinity(tid).unwrap(), one);
        p.set_affinity(tid, &before).unwrap();
        assert_eq!(p.affinity(tid).unwrap(), before);
    }

    #[test]
    fn linux_pinner_reports_errors() {
        let p = LinuxPinner;
        assert!(matches!(
            p.set_affinity(0, &CpuSet::new()),
            Err(PinError::Refused { .. })
        ));
        // CPU 4095 does not exist on the test machines.
        assert!(matches!(
            p.set_affinity(0, &CpuSet::from_cpus([4095])),
            Err(PinError::Refused { .. })
        ));
        // pid_max is at most 2^22, so this tid cannot exist.
        assert!(matches!(p.affinity(1 << 23), Err(PinError::Gone(_))));
    }

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
