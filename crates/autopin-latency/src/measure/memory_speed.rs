//! Memory latency (random pointer chase) and bandwidth (one thread, all threads of a socket)
//! of each NUMA node, seen from a CPU of each socket, inside a bounded memory budget: one
//! buffer of at most `budget` bytes exists at a time (MCTOP allocates 2 GiB per thread and
//! node; that does not fit beside a running job).

use crate::error::{LatencyError, Result, SizeError};
use crate::measure::affinity::Affinity;
use autopin_topology::MemoryMeasurement;
use std::sync::Barrier;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// Largest buffer, in bytes.
    pub budget: usize,
    /// Pointer-chase steps timed per measurement.
    pub chase_steps: usize,
    /// Passes over the buffer per bandwidth measurement (the best is kept).
    pub passes: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            budget: 256 << 20,
            chase_steps: 2_000_000,
            passes: 3,
        }
    }
}

/// Where to measure from: the CPUs of one socket (the first one runs the single-thread
/// measurements).
#[derive(Debug, Clone)]
pub struct Source {
    pub cpus: Vec<u32>,
}

/// Anonymous memory, optionally bound to one NUMA node with `mbind` before first touch.
pub struct Buffer {
    map: memmap2::MmapMut,
}

impl Buffer {
    pub fn new(len: usize, node: Option<u32>) -> Result<Buffer> {
        let mut map = memmap2::MmapMut::map_anon(len)
            .map_err(|e| LatencyError::Measure(format!("cannot map {} MiB: {e}", len >> 20)))?;
        // Huge pages where the kernel allows them, so the chase measures memory and not
        // mostly page walks. Advice only: failure is fine.
        let _ = map.advise(memmap2::Advice::HugePage);
        if let Some(n) = node {
            bind(map.as_mut_ptr().cast(), len, n)?;
        }
        Ok(Buffer { map })
    }

    fn words(&mut self) -> &mut [u64] {
        // A mapping is page-aligned; whole words only.
        let whole = self.map.len() / 8 * 8;
        bytemuck::cast_slice_mut(&mut self.map[..whole])
    }
}

fn bind(ptr: *mut libc::c_void, len: usize, node: u32) -> Result<()> {
    const MPOL_BIND: libc::c_long = 2;
    const MPOL_MF_STRICT: libc::c_ulong = 1;
    let words = node as usize / 64 + 1;
    let mut mask = vec![0u64; words];
    mask[node as usize / 64] |= 1 << (node % 64);
    // SAFETY: mbind reads `words` u64 of mask; maxnode counts bits (+1 as the kernel expects).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr,
            len,
            MPOL_BIND,
            mask.as_ptr(),
            (words * 64 + 1) as libc::c_ulong,
            MPOL_MF_STRICT,
        )
    };
    if rc != 0 {
        return Err(LatencyError::Measure(format!(
            "mbind to NUMA node {node}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Links the buffer's 64-byte lines into one random cycle (Sattolo's algorithm, a simple
/// xorshift generator: the order only has to defeat prefetchers) and times `steps` hops.
fn chase(buf: &mut Buffer, steps: usize) -> f64 {
    let w = buf.words();
    let lines = w.len() / 8;
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..lines).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let j = (s % i as u64) as usize;
        order.swap(i, j);
    }
    for k in 0..lines {
        let (from, to) = (order[k] as usize, order[(k + 1) % lines] as usize);
        w[from * 8] = (to * 8) as u64;
    }
    let mut p = 0usize;
    for _ in 0..steps.min(lines) {
        p = w[p] as usize; // warm the TLB / page tables a little
    }
    let t = Instant::now();
    for _ in 0..steps {
        p = w[p] as usize;
    }
    let el = t.elapsed();
    std::hint::black_box(p);
    el.as_nanos() as f64 / steps as f64
}

fn read_pass(w: &[u64]) -> u64 {
    // Four accumulators so the loop is bound by memory, not by one add chain.
    let mut acc = [0u64; 4];
    for c in w.chunks_exact(4) {
        for k in 0..4 {
            acc[k] = acc[k].wrapping_add(c[k]);
        }
    }
    acc.iter().fold(0, |a, b| a.wrapping_add(*b))
}

/// GB/s of `threads` threads (pinned to `cpus`) each reading or writing its share, best of
/// `passes`.
fn bandwidth(
    buf: &mut Buffer,
    cpus: &[u32],
    write: bool,
    passes: usize,
    aff: &dyn Affinity,
) -> Result<f64> {
    let w = buf.words();
    let per = w.len() / cpus.len();
    let parts: Vec<&mut [u64]> = w.chunks_mut(per.max(1)).take(cpus.len()).collect();
    let barrier = Barrier::new(cpus.len());
    let mut best = 0.0f64;
    let results: Vec<Result<Vec<Duration>>> = std::thread::scope(|s| {
        let hs: Vec<_> = parts
            .into_iter()
            .zip(cpus)
            .map(|(part, &cpu)| {
                let barrier = &barrier;
                s.spawn(move || -> Result<Vec<Duration>> {
                    let pinned = aff.pin_current(cpu);
                    let mut times = Vec::new();
                    for pass in 0..passes {
                        barrier.wait();
                        pinned
                            .as_ref()
                            .map_err(|e| LatencyError::Measure(e.to_string()))?;
                        let t = Instant::now();
                        if write {
                            part.fill(pass as u64);
                        } else {
                            std::hint::black_box(read_pass(part));
                        }
                        times.push(t.elapsed());
                    }
                    Ok(times)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(LatencyError::Measure("bandwidth thread panicked".into()))
                })
            })
            .collect()
    });
    let times: Vec<Vec<Duration>> = results.into_iter().collect::<Result<_>>()?;
    let bytes = (per * cpus.len() * 8) as f64;
    for pass in 0..passes {
        let slowest = times.iter().map(|t| t[pass]).max().unwrap_or_default();
        if slowest > Duration::ZERO {
            best = best.max(bytes / slowest.as_nanos() as f64);
        }
    }
    Ok(best)
}

/// Measures node `node` from `src`. `bind` is false on single-node machines (nothing to
/// bind to, and mbind may be unavailable in containers).
pub fn measure_node(
    node: u32,
    bind: bool,
    src: &Source,
    cfg: &MemoryConfig,
    aff: &dyn Affinity,
) -> Result<MemoryMeasurement> {
    let first = *src
        .cpus
        .first()
        .ok_or_else(|| LatencyError::Measure("a source socket without allowed CPUs".into()))?;
    let len = (cfg.budget / (2 << 20)).max(1) * (2 << 20); // whole huge pages
    let mut buf = Buffer::new(len, bind.then_some(node))?;
    // First touch from the measuring CPU (with mbind the policy decides; without, locality).
    let latency = std::thread::scope(|s| {
        let buf = &mut buf;
        s.spawn(move || -> Result<f64> {
            aff.pin_current(first)?;
            buf.words().fill(0);
            Ok(chase(buf, cfg.chase_steps))
        })
        .join()
        .unwrap_or_else(|_| Err(LatencyError::Measure("memory thread panicked".into())))
    })?;
    let read_single = bandwidth(&mut buf, &[first], false, cfg.passes, aff)?;
    let write_single = bandwidth(&mut buf, &[first], true, cfg.passes, aff)?;
    let read_all = bandwidth(&mut buf, &src.cpus, false, cfg.passes, aff)?;
    let write_all = bandwidth(&mut buf, &src.cpus, true, cfg.passes, aff)?;
    Ok(MemoryMeasurement {
        node,
        from_cpu: first,
        latency_ns: Some(latency),
        read_gbs_single: Some(read_single),
        write_gbs_single: Some(write_single),
        read_gbs_all: Some(read_all),
        write_gbs_all: Some(write_all),
    })
}

/// Parses sizes like `256MiB`, `1G`, `512k`, `1048576` (binary units; `B` optional).
pub fn parse_size(s: &str) -> std::result::Result<usize, SizeError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| SizeError::NotASize {
        text: s.to_string(),
    })?;
    let mult: f64 = match unit
        .trim()
        .to_ascii_lowercase()
        .trim_end_matches('b')
        .trim_end_matches('i')
    {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(SizeError::UnknownUnit {
                text: s.to_string(),
                unit: unit.to_string(),
            })
        }
    };
    let bytes = v * mult;
    if bytes.is_nan() || bytes < (4 << 20) as f64 {
        return Err(SizeError::TooSmall {
            text: s.to_string(),
        });
    }
    Ok(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("8m"), Ok(8 << 20));
        assert!(parse_size("1k")
            .unwrap_err()
            .to_string()
            .contains("at least 4MiB"));
        assert!(parse_size("12 parsecs")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(parse_size("lots")
            .unwrap_err()
            .to_string()
            .contains("not a size"));
    }

    #[test]
    fn small_measurement_runs() {
        let aff = crate::measure::affinity::Linux;
        let cpus = aff.allowed().unwrap();
        let cfg = MemoryConfig {
            budget: 8 << 20,
            chase_steps: 10_000,
            passes: 1,
        };
        let m = measure_node(
            0,
            false,
            &Source {
                cpus: cpus.into_iter().take(2).collect(),
            },
            &cfg,
            &aff,
        )
        .unwrap();
        for v in [
            m.latency_ns,
            m.read_gbs_single,
            m.write_gbs_single,
            m.read_gbs_all,
            m.write_gbs_all,
        ] {
            let v = v.unwrap();
            assert!(v.is_finite() && v > 0.0, "{m:?}");
        }
    }
}
