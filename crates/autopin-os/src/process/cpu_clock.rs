//! Another process's CPU time in one call: the kernel's CPU-time clock of a process sums
//! every thread's time on a CPU (including threads that have exited), in nanoseconds, as
//! the scheduler keeps it. Reading it needs no permission beyond seeing the process.

/// Seconds process `pid` (all its threads) has spent on a CPU; None when it is gone or the
/// kernel has no such clock.
pub fn process_cpu_seconds(pid: i32) -> Option<f64> {
    // The clock's id holds the PID shifted left by 3 bits: 0 (this process) and PIDs beyond
    // any pid_max (2^22) would name another clock.
    if !(1..1 << 22).contains(&pid) {
        return None;
    }
    let clock = nix::time::clock_getcpuclockid(nix::unistd::Pid::from_raw(pid)).ok()?;
    let ts = nix::time::clock_gettime(clock).ok()?;
    Some(ts.tv_sec() as f64 + ts.tv_nsec() as f64 * 1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_time_grows_with_work_and_a_missing_process_has_none() {
        let me = std::process::id() as i32;
        let before = process_cpu_seconds(me).expect("own CPU clock");
        // Work until the clock shows 20 ms more (on a loaded machine that takes longer than
        // 20 ms of wall time, so the wall clock only bounds the wait).
        let t = std::time::Instant::now();
        let mut x = 0u64;
        let mut after = before;
        while after - before <= 0.02 && t.elapsed().as_secs() < 30 {
            for _ in 0..100_000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            after = process_cpu_seconds(me).unwrap();
        }
        std::hint::black_box(x);
        assert!(after - before > 0.02, "{before} -> {after} in 30 s of work");
        // Above pid_max's largest value: no such process.
        assert_eq!(process_cpu_seconds((1 << 22) - 1), None);
        assert_eq!(process_cpu_seconds(0), None);
    }
}
