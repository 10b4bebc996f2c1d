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
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(LatencyError::Measure(format!(
                "CPU {cpu} is beyond what sched_setaffinity accepts"
            )));
        }
        // SAFETY: cpu_set_t is plain data; CPU_SET stays in bounds (checked above).
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if rc != 0 {
            return Err(LatencyError::Measure(format!(
                "cannot pin a thread to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }

    fn allowed(&self) -> Result<Vec<u32>> {
        // SAFETY: as above; the kernel fills the set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Err(LatencyError::Measure(format!(
                    "sched_getaffinity: {}",
                    std::io::Error::last_os_error()
                )));
            }
            Ok((0..libc::CPU_SETSIZE as u32)
                .filter(|&c| libc::CPU_ISSET(c as usize, &set))
                .collect())
        }
    }
}
