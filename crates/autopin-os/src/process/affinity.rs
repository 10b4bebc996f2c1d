//! Setting and reading a thread's CPU affinity on Linux: the engine's [`Pinner`] trait
//! implemented with sched_setaffinity / sched_getaffinity.

use autopin_engine::pinner::{PinError, Pinner};
use autopin_topology::CpuSet;
use std::io;

/// The real thing: sched_setaffinity / sched_getaffinity.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxPinner;

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
        autopin_topology::affinity::set(tid, cpus).map_err(|e| classify(tid, Some(cpus), e))
    }

    fn affinity(&self, tid: i32) -> Result<CpuSet, PinError> {
        autopin_topology::affinity::get(tid).map_err(|e| classify(tid, None, e))
    }

    /// Field 39 of /proc/TID/stat (a thread's directory is there under its own id too).
    fn cpu_of(&self, tid: i32) -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
        autopin_perf::cpustat::parse_thread_cpu(&stat).map(|(_, cpu)| cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_pinner_round_trips_on_this_thread() {
        let p = LinuxPinner;
        let tid = rustix::thread::gettid().as_raw_pid();
        let before = p.affinity(tid).unwrap();
        let one = CpuSet::from_cpus([before.first().unwrap()]);
        p.set_affinity(tid, &one).unwrap();
        assert_eq!(p.affinity(tid).unwrap(), one);
        p.set_affinity(tid, &before).unwrap();
        assert_eq!(p.affinity(tid).unwrap(), before);
    }

    #[test]
    fn linux_pinner_says_where_a_thread_runs() {
        let p = LinuxPinner;
        let tid = rustix::thread::gettid().as_raw_pid();
        let before = p.affinity(tid).unwrap();
        for cpu in before.iter().take(2) {
            p.set_affinity(tid, &CpuSet::from_cpus([cpu])).unwrap();
            assert_eq!(p.cpu_of(tid), Some(cpu));
        }
        p.set_affinity(tid, &before).unwrap();
        assert_eq!(p.cpu_of(1 << 23), None);
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
}
