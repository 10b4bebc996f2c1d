//! The SMT confirmation test: two hardware threads of one core share its execution units,
//! so a loop that saturates them runs clearly slower when the sibling runs the same loop,
//! while two separate cores do not slow each other down.

use super::affinity::Affinity;
use crate::error::Result;
use serde::Serialize;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Together/alone rate below this means the two CPUs share a core.
pub const SHARED_BELOW: f64 = 0.8;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct SmtVerdict {
    pub a: u32,
    pub b: u32,
    /// Rate of CPU a's loop while b runs it too, relative to a alone.
    pub ratio: f64,
    pub shared: bool,
}

/// CPU time of the calling thread, so time the OS gave to other processes on this CPU does
/// not count as a slowdown.
fn thread_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Iterations per CPU-second of eight independent multiply chains (enough to keep a core's
/// integer multipliers busy, so a sibling thread has to wait for them).
fn spin(dur: Duration) -> f64 {
    let mut x = [1u64, 2, 3, 4, 5, 6, 7, 8];
    let t = Instant::now();
    let c0 = thread_cpu_time();
    let mut iters = 0u64;
    while t.elapsed() < dur {
        for _ in 0..1024 {
            for v in x.iter_mut() {
                *v = v.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
            }
        }
        iters += 1024;
    }
    std::hint::black_box(x);
    let cpu = (thread_cpu_time() - c0).as_secs_f64();
    iters as f64
        / if cpu > 0.0 {
            cpu
        } else {
            t.elapsed().as_secs_f64()
        }
}

pub fn test_pair(a: u32, b: u32, aff: &dyn Affinity, dur: Duration) -> Result<SmtVerdict> {
    let alone = |_: ()| -> Result<f64> {
        std::thread::scope(|s| {
            s.spawn(|| -> Result<f64> {
                aff.pin_current(a)?;
                Ok(spin(dur))
            })
            .join()
            .unwrap_or(Ok(0.0))
        })
    };
    let first = alone(())?;
    let together_once = || -> Result<f64> {
        let barrier = Barrier::new(2);
        std::thread::scope(|s| -> Result<f64> {
            let ha = s.spawn(|| -> Result<f64> {
                aff.pin_current(a)?;
                barrier.wait();
                Ok(spin(dur))
            });
            let hb = s.spawn(|| -> Result<f64> {
                let pinned = aff.pin_current(b);
                barrier.wait();
                pinned?;
                Ok(spin(dur))
            });
            let ra = ha.join().unwrap_or(Ok(0.0))?;
            hb.join().unwrap_or(Ok(0.0))?;
            Ok(ra)
        })
    };
    let mut together = together_once()?;
    let second = alone(())?;
    // The better of the two solo runs, so a solo run disturbed by something else does not
    // make two separate cores look shared.
    let base = first.max(second);
    let ratio_of = |t: f64| if base > 0.0 { t / base } else { 1.0 };
    // Something else running beside the pair (another process, or on a VM another guest on
    // the host's sibling thread) slows it as a shared core would, for a while; it never
    // speeds it up. So a pair that looked shared runs together twice more, and the best run
    // counts: two separate cores show it in one of them, a shared core in none.
    for _ in 0..2 {
        if ratio_of(together) >= SHARED_BELOW {
            break;
        }
        together = together.max(together_once()?);
    }
    let ratio = ratio_of(together);
    Ok(SmtVerdict {
        a,
        b,
        ratio,
        shared: ratio < SHARED_BELOW,
    })
}
