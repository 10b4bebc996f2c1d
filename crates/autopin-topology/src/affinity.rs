//! The CPU affinity of a thread, as Linux keeps it: the one place autopin calls
//! `sched_getaffinity`/`sched_setaffinity`. Masks are sized dynamically, so machines with
//! more CPUs than glibc's fixed 1024-bit `cpu_set_t` work too.

use crate::cpuset::CpuSet;
use std::io;

/// The CPUs thread `tid` may run on (`0`: the calling thread).
pub fn get(tid: i32) -> io::Result<CpuSet> {
    // Grow the buffer until the kernel's cpumask fits (EINVAL means too small).
    let mut words = 16usize;
    loop {
        let mut buf = vec![0u64; words];
        // SAFETY: buf is writable for words*8 bytes for the duration of the call.
        let rc = unsafe {
            libc::sched_getaffinity(tid, words * 8, buf.as_mut_ptr() as *mut libc::cpu_set_t)
        };
        if rc == 0 {
            return Ok(CpuSet::from_words(&buf));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) && words < 1 << 16 {
            words *= 4;
            continue;
        }
        return Err(e);
    }
}

/// Restricts thread `tid` (`0`: the calling thread) to `cpus`. An empty set is refused by
/// the kernel with EINVAL, as it should be.
pub fn set(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    let words = cpus.to_words();
    if words.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: the pointer and length describe `words`, which outlives the call; the kernel
    // reads at most that many bytes.
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
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_on_this_thread() {
        let before = get(0).unwrap();
        assert!(!before.is_empty());
        let one = CpuSet::from_cpus([before.first().unwrap()]);
        std::thread::spawn(move || {
            set(0, &one).unwrap();
            assert_eq!(get(0).unwrap(), one);
        })
        .join()
        .unwrap();
        assert!(set(0, &CpuSet::new()).is_err());
    }
}
