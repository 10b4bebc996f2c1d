//! A cheap cycle clock: the TSC on x86_64 (serialized with lfence / rdtscp so the timed
//! access cannot move across the reads), a monotonic nanosecond clock elsewhere. Its rate
//! and the cost of reading it twice are calibrated once.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Ticks per nanosecond.
    pub ghz: f64,
    /// Median ticks between two back-to-back reads, subtracted from every sample.
    pub overhead: u64,
    /// `tsc` or `monotonic`.
    pub kind: &'static str,
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn start() -> u64 {
    // SAFETY: lfence and rdtsc exist on every x86_64.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        let t = core::arch::x86_64::_rdtsc();
        core::arch::x86_64::_mm_lfence();
        t
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn stop() -> u64 {
    let mut aux = 0u32;
    // SAFETY: rdtscp is used only where CPUID says it exists.
    unsafe {
        if has_rdtscp() {
            let t = core::arch::x86_64::__rdtscp(&mut aux);
            core::arch::x86_64::_mm_lfence();
            t
        } else {
            start()
        }
    }
}

/// CPUID leaf 0x8000_0001, EDX bit 27 (std's feature macro does not know rdtscp).
#[cfg(target_arch = "x86_64")]
fn has_rdtscp() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        // cpuid exists on every x86_64; the extended leaf is checked before use. `__cpuid`
        // is a safe function only from Rust 1.89 on; the block keeps rust-version honest.
        #[allow(unused_unsafe)]
        // SAFETY: cpuid has no preconditions on x86_64.
        let (max, edx) = unsafe {
            (
                core::arch::x86_64::__cpuid(0x8000_0000).eax,
                core::arch::x86_64::__cpuid(0x8000_0001).edx,
            )
        };
        max >= 0x8000_0001 && edx & (1 << 27) != 0
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn start() -> u64 {
    base().elapsed().as_nanos() as u64
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn stop() -> u64 {
    start()
}

impl Clock {
    pub fn calibrate() -> Clock {
        let kind = if cfg!(target_arch = "x86_64") {
            "tsc"
        } else {
            "monotonic"
        };
        // Rate: ticks against the OS clock over 20 ms, best of three windows.
        let mut ghz = 0.0f64;
        for _ in 0..3 {
            let (t0, c0) = (Instant::now(), start());
            while t0.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            let (c1, t1) = (stop(), t0.elapsed());
            let g = (c1.wrapping_sub(c0)) as f64 / t1.as_nanos() as f64;
            if g > ghz {
                ghz = g;
            }
        }
        let mut v: Vec<u64> = (0..2001)
            .map(|_| {
                let a = start();
                let b = stop();
                b.wrapping_sub(a)
            })
            .collect();
        v.sort_unstable();
        Clock {
            ghz: if ghz > 0.0 { ghz } else { 1.0 },
            overhead: v[v.len() / 2],
            kind,
        }
    }
}
