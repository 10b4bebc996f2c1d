//! How much counting itself slows the target.
//!
//! Per-thread counters are switched in and out with their thread, so their cost is paid per
//! context switch (in KVM guests each switch of the PMU state traps to the hypervisor). The
//! estimate is: context switches per second of the target × the extra time one switch costs
//! when counted, spread over the CPUs the target uses. `measure_counting_cost` measures the
//! per-switch cost on this machine with two threads ping-ponging one byte through pipes on one
//! CPU, with and without counters attached; `context_switches` reads the target's switch count.

use crate::counters::{CounterOptions, CounterSource, Grouping, PerfCounterSource, Target};
use autopin_objective::PerfError;
use autopin_objective::{CountingCost, EventSpec};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Total context switches of all threads of `pid` (proc_root is normally `/proc`): how
/// often each was put on a CPU, from `task/*/schedstat` (three numbers, cheap to make for
/// thousands of threads), else voluntary + involuntary switches from `task/*/status`
/// (kernels without schedstat; a status file costs the kernel ten times more).
pub fn context_switches(proc_root: &Path, pid: i32) -> Result<u64, PerfError> {
    context_switches_sampled(proc_root, pid, usize::MAX)
}

/// [`context_switches`] estimated from at most `at_most` of the threads: every k-th in tid
/// order (the same ones from one read to the next while the threads stay), the sum scaled
/// by all threads ÷ threads read. A program of thousands of threads then costs a directory
/// listing and a few hundred small reads, not a file per thread.
pub fn context_switches_sampled(
    proc_root: &Path,
    pid: i32,
    at_most: usize,
) -> Result<u64, PerfError> {
    let dir = proc_root.join(pid.to_string()).join("task");
    let rd = std::fs::read_dir(&dir)
        .map_err(|e| PerfError::io(format!("listing {}", dir.display()), e))?;
    let mut tids: Vec<u64> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let stride = tids.len().div_ceil(at_most.max(1)).max(1);
    let (mut total, mut read) = (0u64, 0u64);
    for tid in tids.iter().step_by(stride) {
        let task = dir.join(tid.to_string());
        // Threads may exit while we look; skip those that vanished.
        let from_schedstat = std::fs::read_to_string(task.join("schedstat"))
            .ok()
            .and_then(|s| switches_in_schedstat(&s));
        let n = match from_schedstat {
            Some(n) => Some(n),
            None => std::fs::read_to_string(task.join("status"))
                .ok()
                .map(|s| switches_in_status(&s)),
        };
        if let Some(n) = n {
            total += n;
            read += 1;
        }
    }
    Ok(match read {
        0 => 0,
        // Every thread was read (those that vanished meanwhile count nothing, as before).
        _ if stride == 1 => total,
        r => (total as f64 * tids.len() as f64 / r as f64).round() as u64,
    })
}

/// Times a task was put on a CPU: the third number of its schedstat ("run time, wait time,
/// timeslices").
pub fn switches_in_schedstat(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(2)?.parse().ok()
}

/// Context switches of one task from its status text.
pub fn switches_in_status(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches:")
                || l.starts_with("nonvoluntary_ctxt_switches:")
        })
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
        .sum()
}

fn tid() -> i32 {
    rustix::thread::gettid().as_raw_pid()
}

fn pin_to(cpu: usize) {
    // Failure only makes the measurement noisier, so it is ignored.
    if cpu < rustix::thread::CpuSet::MAX_CPU {
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        let _ = rustix::thread::sched_setaffinity(None, &set);
    }
}

fn thread_switches(t: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{t}/status"))
        .map(|s| switches_in_status(&s))
        .unwrap_or(0)
}

/// A pipe's read and write ends (close-on-exec).
fn pipe() -> Result<(OwnedFd, OwnedFd), PerfError> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| PerfError::io("creating a pipe", e.into()))
}

fn send(fd: &OwnedFd) -> bool {
    rustix::io::write(fd, &[1u8]).is_ok_and(|n| n == 1)
}

fn recv(fd: &OwnedFd) -> bool {
    let mut b = [0u8];
    rustix::io::read(fd, &mut b).is_ok_and(|n| n == 1)
}

/// One ping-pong run of `trips` round trips; returns (ns per trip, switches per trip).
fn ping_pong(
    trips: u32,
    cpu: usize,
    events: Option<&[EventSpec]>,
) -> Result<(f64, f64), PerfError> {
    // a→b carries the pings, b→a the echoes; the echo thread owns the ends it uses.
    let ((ab_r, ab_w), (ba_r, ba_w)) = (pipe()?, pipe()?);
    let (tx, rx) = mpsc::channel();
    let echo = std::thread::spawn(move || {
        pin_to(cpu);
        let _ = tx.send(tid());
        while recv(&ab_r) {
            if !send(&ba_w) {
                break;
            }
        }
    });
    pin_to(cpu);
    let other = rx.recv().map_err(|_| {
        PerfError::Unsupported("the echo thread of the counting-cost probe did not start".into())
    })?;
    let me = tid();
    let mut counters = match events {
        Some(ev) => {
            let mut src = PerfCounterSource::new(
                ev.to_vec(),
                CounterOptions {
                    grouping: Grouping::Auto,
                    cgroup: None,
                },
            )?;
            src.open(Target::Thread(me))?;
            src.open(Target::Thread(other))?;
            Some(src)
        }
        None => None,
    };
    // Warm up so both threads sit on the CPU's run queue.
    for _ in 0..50 {
        send(&ab_w);
        recv(&ba_r);
    }
    let sw0 = thread_switches(me) + thread_switches(other);
    let t0 = Instant::now();
    for _ in 0..trips {
        if !send(&ab_w) || !recv(&ba_r) {
            return Err(PerfError::io(
                "ping-pong through a pipe",
                std::io::Error::last_os_error(),
            ));
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / trips as f64;
    let sw =
        (thread_switches(me) + thread_switches(other)).saturating_sub(sw0) as f64 / trips as f64;
    if let Some(c) = counters.as_mut() {
        // Prove the counters were live (and keep them alive through the loop).
        c.read(Target::Thread(me))?;
    }
    drop(counters);
    drop(ab_w); // the echo thread's read returns 0 and it exits
    let _ = echo.join();
    Ok((ns, sw))
}

/// Measure the per-switch cost of counting `events` per thread; about `budget` of wall time
/// in alternating plain/counted runs. The fastest run of each kind is used: interference from
/// other load only ever adds time, so minima estimate the undisturbed costs best. Leaves the calling
/// thread's CPU affinity unchanged.
pub fn measure_counting_cost(
    events: &[EventSpec],
    budget: Duration,
) -> Result<CountingCost, PerfError> {
    if events.is_empty() {
        return Err(PerfError::Unsupported(
            "measuring counting cost with no events".into(),
        ));
    }
    // Run on a helper thread so pinning does not touch the caller's affinity.
    let events = events.to_vec();
    std::thread::spawn(move || measure_on_this_thread(&events, budget))
        .join()
        .map_err(|_| PerfError::Unsupported("the counting-cost probe thread panicked".into()))?
}

fn measure_on_this_thread(
    events: &[EventSpec],
    budget: Duration,
) -> Result<CountingCost, PerfError> {
    let cpu = rustix::thread::sched_getcpu();
    const PAIRS: usize = 5;
    // Calibrate the trip count so that the runs fill the budget.
    let (probe_ns, _) = ping_pong(200, cpu, None)?;
    let per_run = budget.as_nanos() as f64 / (2 * PAIRS) as f64;
    let trips = ((per_run / probe_ns.max(100.0)) as u32).clamp(100, 200_000);
    let (mut plain, mut counted, mut sw) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        let (p, s) = ping_pong(trips, cpu, None)?;
        plain.push(p);
        sw.push(s);
        let (c, s) = ping_pong(trips, cpu, Some(events))?;
        counted.push(c);
        sw.push(s);
    }
    let median = |v: &[f64]| autopin_stats::median(v).unwrap_or(f64::NAN);
    let (p, c, s) = (min(&plain), min(&counted), median(&sw));
    let spread = median(&plain) - p;
    let s = if s > 0.0 { s } else { 2.0 };
    Ok(CountingCost {
        events: events.iter().map(|e| e.key().to_string()).collect(),
        round_trip_ns_plain: p,
        round_trip_ns_counted: c,
        switches_per_round_trip: s,
        per_switch_ns: (c - p) / s,
        noise_ns: spread / s,
        kept: None,
    })
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_parsing() {
        let s = "Name:\tx\nvoluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(switches_in_status(s), 13);
        assert_eq!(switches_in_status("Name: y\n"), 0);
    }

    #[test]
    fn fake_proc_tree_is_summed() {
        let d = tempfile::tempdir().unwrap();
        for (t, v) in [(100, 5), (101, 7)] {
            let p = d.path().join(format!("100/task/{t}"));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(
                p.join("status"),
                format!("voluntary_ctxt_switches:\t{v}\nnonvoluntary_ctxt_switches:\t1\n"),
            )
            .unwrap();
        }
        assert_eq!(context_switches(d.path(), 100).unwrap(), 14);
        // Where the kernel keeps schedstat, its count of times on a CPU is read instead.
        std::fs::write(d.path().join("100/task/101/schedstat"), "5000 200 40\n").unwrap();
        assert_eq!(context_switches(d.path(), 100).unwrap(), 6 + 40);
        assert_eq!(switches_in_schedstat("1 2"), None);
        assert!(context_switches(d.path(), 999)
            .unwrap_err()
            .to_string()
            .contains("999/task"));
    }

    #[test]
    fn many_threads_are_sampled_and_scaled() {
        // 1000 threads with 10 switches each: every 4th of them read, the sum scaled back.
        let d = tempfile::tempdir().unwrap();
        for t in 0..1000 {
            let p = d.path().join(format!("7/task/{}", 1000 + t));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("schedstat"), "1 2 10\n").unwrap();
        }
        assert_eq!(context_switches_sampled(d.path(), 7, 250).unwrap(), 10_000);
        assert_eq!(context_switches(d.path(), 7).unwrap(), 10_000);
        // One thread busier than the rest is seen when its tid is among the sampled.
        std::fs::write(d.path().join("7/task/1000/schedstat"), "1 2 4010\n").unwrap();
        assert_eq!(
            context_switches_sampled(d.path(), 7, 250).unwrap(),
            10_000 + 4 * 4000
        );
        assert_eq!(context_switches(d.path(), 7).unwrap(), 14_000);
    }

    #[test]
    fn own_process_switches_are_readable() {
        // Other test threads of this process come and go (their switches leave the sum with
        // them), so the rise is checked on this thread, and the process sum must include it.
        let own =
            || switches_in_status(&std::fs::read_to_string("/proc/thread-self/status").unwrap());
        let n = own();
        std::thread::sleep(Duration::from_millis(2));
        let after = own();
        assert!(after > n, "{n} → {after}");
        assert!(context_switches(Path::new("/proc"), std::process::id() as i32).unwrap() >= after);
    }
}
