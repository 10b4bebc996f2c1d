//! Live measurements on this machine: the core-to-core latency matrix, the SMT test, and
//! each NUMA node's memory latency and bandwidth ([`memory_speed`]).

pub mod affinity;
pub mod clock;
pub mod memory_speed;
pub mod pair;
pub mod smt;

use crate::error::Result;
use crate::matrix::{LatencyMatrix, Unit};
use affinity::Affinity;
use clock::Clock;
use pair::{measure_pair, PairConfig};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Measured {
    /// Nanoseconds, with `ghz` set so cycles (clock ticks) can be written too.
    pub matrix: LatencyMatrix,
    /// Interquartile range / median of each pair's kept attempt.
    pub spread: Vec<Vec<f64>>,
    /// Pairs measured more than once because their spread was too high.
    pub remeasured: usize,
    pub clock: Clock,
    /// Wall time of the whole matrix, warm-up included.
    pub elapsed: Duration,
    /// Wall time of the pair loop divided by the number of pairs.
    pub per_pair: Duration,
}

/// Spins on every CPU in parallel until the time of a fixed block of work settles (three in a
/// row within 3%, at most 150 ms): CPUs coming out of idle run slow until their frequency
/// ramps up, and the first pairs would be measured on a cold clock.
pub fn settle(cpus: &[u32], aff: &dyn Affinity) {
    std::thread::scope(|s| {
        for &c in cpus {
            s.spawn(move || {
                if aff.pin_current(c).is_err() {
                    return;
                }
                let t = Instant::now();
                let mut prev: Vec<f64> = Vec::new();
                let mut x = 1u64;
                while t.elapsed() < Duration::from_millis(150) {
                    let b = Instant::now();
                    for _ in 0..20_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    prev.push(b.elapsed().as_secs_f64());
                    if prev.len() >= 3 {
                        let w = &prev[prev.len() - 3..];
                        let (lo, hi) = w
                            .iter()
                            .fold((f64::MAX, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
                        if hi <= lo * 1.03 && t.elapsed() > Duration::from_millis(10) {
                            break;
                        }
                    }
                }
            });
        }
    });
}

/// Measures every pair of `cpus` (in the order given). `progress(done, total)` is called
/// after each pair.
pub fn measure_matrix(
    cpus: &[u32],
    cfg: &PairConfig,
    aff: &dyn Affinity,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Measured> {
    let t0 = Instant::now();
    let clock = Clock::calibrate();
    settle(cpus, aff);
    let n = cpus.len();
    let total = n * n.saturating_sub(1) / 2;
    let mut ticks = vec![vec![0.0; n]; n];
    let mut spread = vec![vec![0.0; n]; n];
    let mut remeasured = 0;
    let mut done = 0;
    let tp = Instant::now();
    for i in 0..n {
        for j in (i + 1)..n {
            let r = measure_pair(cpus[i], cpus[j], cfg, &clock, aff)?;
            ticks[i][j] = r.ticks;
            ticks[j][i] = r.ticks;
            spread[i][j] = r.spread;
            spread[j][i] = r.spread;
            if r.attempts > 1 {
                remeasured += 1;
            }
            done += 1;
            progress(done, total);
        }
    }
    let per_pair = if total > 0 {
        tp.elapsed() / total as u32
    } else {
        Duration::ZERO
    };
    let ns = ticks
        .iter()
        .map(|r| r.iter().map(|t| t / clock.ghz).collect())
        .collect();
    let matrix = LatencyMatrix {
        cpus: cpus.to_vec(),
        values: ns,
        unit: Unit::Nanoseconds,
        ghz: Some(clock.ghz),
        source: "measured".into(),
    };
    Ok(Measured {
        matrix,
        spread,
        remeasured,
        clock,
        elapsed: t0.elapsed(),
        per_pair,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs on whatever this machine is: checks that the protocol completes and gives
    /// positive, finite numbers, never what they are (timings are not deterministic).
    #[test]
    fn live_pair_completes() {
        let aff = affinity::Linux;
        let cpus = aff.allowed().unwrap();
        autopin_testkit::require!(cpus.len() >= 2, "only one CPU allowed");
        let cfg = PairConfig {
            rounds: 50,
            settle_max_batches: 3,
            ..Default::default()
        };
        let mut calls = 0;
        match measure_matrix(&cpus[..2], &cfg, &aff, &mut |_, _| calls += 1) {
            Ok(m) => {
                assert_eq!(calls, 1);
                let v = m.matrix.get(0, 1);
                assert!(v.is_finite() && v >= 0.0, "{v}");
                assert_eq!(m.matrix.get(1, 0), v);
            }
            // A loaded CI machine may deschedule one side for longer than the timeout;
            // that is reported as an error, which is the behaviour under test then.
            Err(e) => assert!(e.to_string().contains("lock step"), "{e}"),
        }
    }
}
