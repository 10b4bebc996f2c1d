//! A fixed pinning in the preload library's terms: CPUs in thread-creation order plus a
//! likwid-pin skip mask. The same rules are implemented in C (c/preload.c in
//! autopin-preload) for threads pinned at birth, and here for the /proc polling fallback
//! and for turning a plan into the library's environment variables.

use crate::error::PinPlanError;
use std::ffi::OsString;
use std::fmt;

/// likwid-pin's `-s` mask: bit i set = the i-th thread created by `pthread_create`
/// (0-based, the main thread not counted) is not pinned and does not use up a CPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkipMask {
    /// Little-endian 64-bit words; bit i of the mask is `words[i / 64] >> (i % 64)`.
    words: Vec<u64>,
}

/// The preload library honours skip bits for the first 4096 created threads.
pub const MAX_SKIP_BITS: usize = 4096;

impl SkipMask {
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses a hex mask such as `0x5` or `5` (any length up to 4096 bits).
    pub fn parse(text: &str) -> Result<Self, PinPlanError> {
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(text);
        if digits.is_empty() {
            return Err(PinPlanError::NoHexDigits {
                text: text.to_string(),
            });
        }
        // The first character that is not a hex digit, at its position (counted from 0, as
        // in pin expressions) with a caret under it.
        if let Some((i, c)) = digits.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
            let pos = text.len() - digits.len() + i;
            return Err(PinPlanError::NotHexDigit {
                text: text.to_string(),
                position: pos,
                found: c,
            });
        }
        let mut words = vec![0u64; digits.len().div_ceil(16)];
        for (i, c) in digits.chars().rev().enumerate() {
            let v = c.to_digit(16).unwrap_or(0);
            words[i / 16] |= u64::from(v) << (4 * (i % 16));
        }
        let mask = SkipMask { words }.trimmed();
        if mask.highest_bit().is_some_and(|b| b >= MAX_SKIP_BITS) {
            return Err(PinPlanError::TooLong {
                text: text.to_string(),
                max_bits: MAX_SKIP_BITS,
            });
        }
        Ok(mask)
    }

    fn trimmed(mut self) -> Self {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
        self
    }

    fn highest_bit(&self) -> Option<usize> {
        let last = self.words.last()?;
        Some((self.words.len() - 1) * 64 + 63 - last.leading_zeros() as usize)
    }

    /// True when the `n`-th created thread (0-based) is skipped.
    pub fn skips(&self, n: usize) -> bool {
        self.words
            .get(n / 64)
            .is_some_and(|w| w >> (n % 64) & 1 == 1)
    }

    /// How many of the created threads 0..n are skipped (a popcount over the mask's words,
    /// so numbering thousands of threads stays cheap).
    pub fn skipped_before(&self, n: usize) -> usize {
        let mut count = 0;
        for (i, w) in self.words.iter().enumerate() {
            let from = i * 64;
            if from >= n {
                break;
            }
            let bits = n - from;
            let w = if bits >= 64 {
                *w
            } else {
                w & ((1u64 << bits) - 1)
            };
            count += w.count_ones() as usize;
        }
        count
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

impl fmt::Display for SkipMask {
    /// Canonical hex form, as `AUTOPIN_SKIP` takes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        match self.words.split_last() {
            None => f.write_str("0"),
            Some((top, rest)) => {
                write!(f, "{top:x}")?;
                for w in rest.iter().rev() {
                    write!(f, "{w:016x}")?;
                }
                Ok(())
            }
        }
    }
}

/// CPUs for threads in creation order (main = entry 0; wraps around) plus a skip mask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinPlan {
    pub cpus: Vec<u32>,
    pub skip: SkipMask,
}

impl PinPlan {
    /// `cpus` must not be empty.
    pub fn new(cpus: Vec<u32>, skip: SkipMask) -> Result<Self, PinPlanError> {
        if cpus.is_empty() {
            return Err(PinPlanError::NoCpus);
        }
        Ok(PinPlan { cpus, skip })
    }

    /// The environment the preload library reads for this plan.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let list: Vec<String> = self.cpus.iter().map(u32::to_string).collect();
        let mut env = vec![(
            OsString::from("AUTOPIN_CPUS"),
            OsString::from(list.join(",")),
        )];
        if !self.skip.is_empty() {
            env.push((
                OsString::from("AUTOPIN_SKIP"),
                OsString::from(self.skip.to_string()),
            ));
        }
        env
    }

    pub fn main_cpu(&self) -> u32 {
        self.cpus[0]
    }

    /// Where the first threads go, in words, so that a skip mask is never silent:
    /// `main thread → CPU 0, 1st created → not pinned, 2nd → CPU 1, …`. Up to the last
    /// skipped thread among the first 64, and one more.
    pub fn first_threads(&self) -> String {
        let last_skipped = (0..64).rev().find(|&k| self.skip.skips(k));
        let created = last_skipped.map_or(1, |k| k + 2).min(8);
        let mut cursor = self.cursor();
        let mut parts = vec![format!("main thread → CPU {}", self.main_cpu())];
        for k in 1..=created {
            let to = match cursor.next_created() {
                Some(c) => format!("CPU {c}"),
                None => "not pinned".to_string(),
            };
            parts.push(if k == 1 {
                format!("1st created → {to}")
            } else {
                format!("{} → {to}", ordinal(k))
            });
        }
        parts.join(", ") + ", …"
    }

    pub fn cursor(&self) -> PlanCursor {
        PlanCursor {
            plan: self.clone(),
            created: 0,
            pinned: 0,
        }
    }
}

/// `2nd`, `3rd`, `11th`, `21st`.
fn ordinal(k: usize) -> String {
    let suffix = match (k % 10, k % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{k}{suffix}")
}

/// Walks a plan thread by thread in creation order, as the preload library does.
#[derive(Clone, Debug)]
pub struct PlanCursor {
    plan: PinPlan,
    created: usize,
    pinned: usize,
}

impl PlanCursor {
    /// The CPU for the next created thread, or `None` when the skip mask skips it.
    pub fn next_created(&mut self) -> Option<u32> {
        let n = self.created;
        self.created += 1;
        if self.plan.skip.skips(n) {
            return None;
        }
        self.pinned += 1;
        Some(self.plan.cpus[self.pinned % self.plan.cpus.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_mask_parses_like_likwid() {
        let m = SkipMask::parse("0x5").unwrap();
        assert!(m.skips(0) && !m.skips(1) && m.skips(2) && !m.skips(3) && !m.skips(1000));
        assert_eq!(SkipMask::parse("5").unwrap(), m);
        assert_eq!(m.to_string(), "0x5");
        let long = SkipMask::parse("0x10000000000000001").unwrap();
        assert!(long.skips(0) && long.skips(64) && !long.skips(63));
        assert_eq!(long.to_string(), "0x10000000000000001");
        assert_eq!(SkipMask::parse("0x0").unwrap().to_string(), "0x0");
        assert!(SkipMask::parse("0x0").unwrap().is_empty());
    }

    #[test]
    fn a_skip_mask_is_spelt_out_thread_by_thread() {
        let p = PinPlan::new(vec![0, 1], SkipMask::parse("0x1").unwrap()).unwrap();
        assert_eq!(
            p.first_threads(),
            "main thread → CPU 0, 1st created → not pinned, 2nd → CPU 1, …"
        );
        let p = PinPlan::new(vec![4, 5, 6], SkipMask::parse("0x4").unwrap()).unwrap();
        assert_eq!(
            p.first_threads(),
            "main thread → CPU 4, 1st created → CPU 5, 2nd → CPU 6, 3rd → not pinned, 4th → CPU 4, …"
        );
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(22), "22nd");
    }

    #[test]
    fn skipped_before_counts_like_testing_each_bit() {
        for mask in ["0x5", "0x10000000000000001", "0xffffffffffffffffff", "0x0"] {
            let m = SkipMask::parse(mask).unwrap();
            for n in [0, 1, 2, 3, 63, 64, 65, 70, 128, 5000] {
                let slow = (0..n).filter(|&k| m.skips(k)).count();
                assert_eq!(m.skipped_before(n), slow, "{mask} before {n}");
            }
        }
    }

    #[test]
    fn skip_mask_errors_name_the_character() {
        let e = SkipMask::parse("0x1g").unwrap_err().to_string();
        assert!(e.contains("position 3: 'g' is not a hex digit"), "{e}");
        assert!(e.ends_with("\n  0x1g\n     ^"), "{e}");
        // The first bad character, not the last.
        let e = SkipMask::parse("zz").unwrap_err().to_string();
        assert!(e.contains("position 0: 'z'"), "{e}");
        assert!(SkipMask::parse("0x")
            .unwrap_err()
            .to_string()
            .contains("no hex digits"));
        let too_long = format!("0x1{}", "0".repeat(1024));
        assert!(SkipMask::parse(&too_long)
            .unwrap_err()
            .to_string()
            .contains("4096"));
    }

    #[test]
    fn cursor_matches_likwid_round_robin() {
        // Observed with likwid-pin -c 1,0 -s 0x5 on a 2-CPU machine: main 1, t0 skip, t1 0,
        // t2 skip, t3 1 (wraps over the whole list, main's entry included).
        let plan = PinPlan::new(vec![1, 0], SkipMask::parse("0x5").unwrap()).unwrap();
        assert_eq!(plan.main_cpu(), 1);
        let mut c = plan.cursor();
        let got: Vec<Option<u32>> = (0..4).map(|_| c.next_created()).collect();
        assert_eq!(got, vec![None, Some(0), None, Some(1)]);
    }

    #[test]
    fn plan_env() {
        let plan = PinPlan::new(vec![0, 1, 0, 1], SkipMask::none()).unwrap();
        assert_eq!(plan.env(), vec![("AUTOPIN_CPUS".into(), "0,1,0,1".into())]);
        assert!(PinPlan::new(vec![], SkipMask::none()).is_err());
    }
}
