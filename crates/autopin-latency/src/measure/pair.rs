//! One-way cache-line transfer latency between two CPUs.
//!
//! Two threads, pinned to `owner` and `timer`, work in lock step on two cache lines: `data`
//! (measured) and `sync` (turns). Each round the owner brings `data` to Modified state in its
//! cache with a compare-and-swap, then hands the turn over on `sync`; the timer then times its
//! own compare-and-swap on `data`, which must fetch the line from the owner's cache, and
//! hands the turn back. The owner never touches `data` while the timer's access is in flight.

use super::clock::{self, Clock};
use crate::error::{LatencyError, Result};
use crate::measure::affinity::Affinity;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct PairConfig {
    /// Timed rounds per attempt.
    pub rounds: usize,
    /// Warm-up: batches of this many rounds until two batch medians agree within
    /// `settle_tolerance` (frequency ramp-up, page faults, first-touch misses).
    pub settle_batch: usize,
    pub settle_tolerance: f64,
    pub settle_max_batches: usize,
    /// Interquartile range / median above which a pair is measured again on a fresh line.
    pub max_spread: f64,
    pub retries: usize,
    /// How long one side may wait for the other before the pair is abandoned (the partner
    /// CPU may be descheduled by a hypervisor or busy with something else).
    pub timeout: Duration,
}

impl Default for PairConfig {
    fn default() -> Self {
        PairConfig {
            rounds: 400,
            settle_batch: 32,
            settle_tolerance: 0.1,
            settle_max_batches: 16,
            max_spread: 0.25,
            retries: 2,
            timeout: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairResult {
    /// Median one-way latency in clock ticks, read overhead subtracted.
    pub ticks: f64,
    /// Interquartile range relative to the median.
    pub spread: f64,
    /// Attempts made (1 = no re-measurement).
    pub attempts: usize,
}

#[repr(C, align(128))]
struct Line(AtomicU64);

/// The measured line and the turn line on separate 128-byte blocks, so the adjacent-line
/// prefetcher does not couple them.
#[repr(C)]
struct Shared {
    data: Line,
    sync: Line,
}

pub fn measure_pair(
    owner: u32,
    timer: u32,
    cfg: &PairConfig,
    clock: &Clock,
    aff: &dyn Affinity,
) -> Result<PairResult> {
    let mut best: Option<PairResult> = None;
    for attempt in 1..=cfg.retries + 1 {
        // A fresh allocation each attempt: a line that sits in a congested cache slice or
        // conflicts with something else does not get measured twice.
        let r = attempt_once(owner, timer, cfg, clock, aff)?;
        let r = PairResult {
            attempts: attempt,
            ..r
        };
        if best.is_none_or(|b| r.spread < b.spread) {
            best = Some(r);
        }
        if r.spread <= cfg.max_spread {
            break;
        }
    }
    Ok(PairResult {
        attempts: best.map_or(1, |b| b.attempts).max(1),
        ..best.expect("at least one attempt")
    })
}

fn attempt_once(
    owner: u32,
    timer: u32,
    cfg: &PairConfig,
    clock: &Clock,
    aff: &dyn Affinity,
) -> Result<PairResult> {
    let shared = Box::new(Shared {
        data: Line(AtomicU64::new(0)),
        sync: Line(AtomicU64::new(0)),
    });
    let abort = AtomicBool::new(false);
    let total_max = cfg.settle_batch * cfg.settle_max_batches + cfg.rounds;
    // The timer decides how many rounds happen (warm-up length is adaptive) and publishes
    // the end by writing u64::MAX to `sync`.
    std::thread::scope(|s| {
        let own = s.spawn(|| -> Result<()> {
            aff.pin_current(owner)?;
            let mut round: u64 = 0;
            loop {
                let want = 2 * round;
                let seen = wait_for(
                    &shared.sync.0,
                    |v| v == want || v == u64::MAX,
                    &abort,
                    cfg.timeout,
                )
                .ok_or_else(|| timeout_error(owner, timer))?;
                if seen == u64::MAX {
                    return Ok(());
                }
                if shared
                    .data
                    .0
                    .compare_exchange(want, want + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    abort.store(true, Ordering::Relaxed);
                    return Err(LatencyError::Measure(
                        "lock-step protocol broken (owner)".into(),
                    ));
                }
                // The timer may have ended the run meanwhile (u64::MAX); then stop quietly.
                if shared
                    .sync
                    .0
                    .compare_exchange(want, want + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    return Ok(());
                }
                round += 1;
            }
        });
        let tim = s.spawn(|| -> Result<Vec<u64>> {
            let out = (|| {
                aff.pin_current(timer)?;
                let mut samples = Vec::with_capacity(total_max);
                let mut round: u64 = 0;
                let one = |round: u64| -> Result<u64> {
                    let want = 2 * round + 1;
                    wait_for(&shared.sync.0, |v| v == want, &abort, cfg.timeout)
                        .ok_or_else(|| timeout_error(owner, timer))?;
                    let t0 = clock::start();
                    let ok = shared
                        .data
                        .0
                        .compare_exchange(want, want + 1, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok();
                    let t1 = clock::stop();
                    if !ok {
                        return Err(LatencyError::Measure(
                            "lock-step protocol broken (timer)".into(),
                        ));
                    }
                    shared.sync.0.store(want + 1, Ordering::Release);
                    Ok(t1.wrapping_sub(t0).saturating_sub(clock.overhead))
                };
                // Warm-up until the batch medians settle.
                let mut last: Option<f64> = None;
                for _ in 0..cfg.settle_max_batches {
                    let mut batch = Vec::with_capacity(cfg.settle_batch);
                    for _ in 0..cfg.settle_batch {
                        batch.push(one(round)?);
                        round += 1;
                    }
                    let med = quantile(&mut batch, 0.5);
                    if let Some(l) = last {
                        if (med - l).abs() <= cfg.settle_tolerance * l.max(1.0) {
                            break;
                        }
                    }
                    last = Some(med);
                }
                for _ in 0..cfg.rounds {
                    samples.push(one(round)?);
                    round += 1;
                }
                Ok(samples)
            })();
            if out.is_err() {
                abort.store(true, Ordering::Relaxed);
            }
            shared.sync.0.swap(u64::MAX, Ordering::AcqRel);
            out
        });
        let o = own
            .join()
            .map_err(|_| LatencyError::Measure("measuring thread panicked".into()))?;
        let t = tim
            .join()
            .map_err(|_| LatencyError::Measure("measuring thread panicked".into()))?;
        let mut samples = t?;
        o?;
        let med = quantile(&mut samples, 0.5);
        let iqr = quantile(&mut samples, 0.75) - quantile(&mut samples, 0.25);
        Ok(PairResult {
            ticks: med,
            spread: if med > 0.0 { iqr / med } else { 0.0 },
            attempts: 1,
        })
    })
}

fn timeout_error(a: u32, b: u32) -> LatencyError {
    LatencyError::Measure(format!(
        "CPUs {a} and {b} did not keep lock step (one of them may be busy or descheduled)"
    ))
}

/// Spins until `ok(value)`, giving up after `timeout` or when the partner aborted.
fn wait_for(
    a: &AtomicU64,
    ok: impl Fn(u64) -> bool,
    abort: &AtomicBool,
    timeout: Duration,
) -> Option<u64> {
    let mut spins = 0u32;
    let mut since: Option<Instant> = None;
    loop {
        let v = a.load(Ordering::Acquire);
        if ok(v) {
            return Some(v);
        }
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(4096) {
            if abort.load(Ordering::Relaxed) {
                return None;
            }
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > timeout {
                abort.store(true, Ordering::Relaxed);
                return None;
            }
        }
    }
}

/// Quantile by sorting (the vectors are a few hundred samples).
pub fn quantile(v: &mut [u64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] as f64 + (v[hi] as f64 - v[lo] as f64) * (pos - lo as f64)
}
