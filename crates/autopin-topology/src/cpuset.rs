//! Sets of OS CPU indexes, printed and parsed in the Linux list format (`0-3,8,10-11`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A set of OS CPU (PU) indexes. Kept as a bitmap: sets are small, compared and combined often.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    words: Vec<u64>,
}

/// Why a CPU list did not parse; `position` is the byte offset of the offending character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at position {position} in CPU list '{input}'")]
pub struct CpuListError {
    pub input: String,
    pub position: usize,
    pub message: String,
}

/// Largest CPU index accepted from text: Linux's NR_CPUS tops out at 8192.
pub const MAX_CPU_INDEX: u32 = 65535;

impl CpuSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_cpus<I: IntoIterator<Item = u32>>(cpus: I) -> Self {
        let mut s = Self::new();
        for c in cpus {
            s.insert(c);
        }
        s
    }

    pub fn insert(&mut self, cpu: u32) {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << b;
    }

    pub fn remove(&mut self, cpu: u32) {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1 << b);
        }
        self.trim();
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    pub fn contains(&self, cpu: u32) -> bool {
        let (w, b) = ((cpu / 64) as usize, cpu % 64);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    pub fn last(&self) -> Option<u32> {
        self.iter().last()
    }

    /// CPUs in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            (0..64u32)
                .filter(move |b| w & (1u64 << b) != 0)
                .map(move |b| i as u32 * 64 + b)
        })
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().max(other.words.len());
        let words = (0..n)
            .map(|i| {
                self.words.get(i).copied().unwrap_or(0) | other.words.get(i).copied().unwrap_or(0)
            })
            .collect();
        let mut s = CpuSet { words };
        s.trim();
        s
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let words = self
            .words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| a & b)
            .collect();
        let mut s = CpuSet { words };
        s.trim();
        s
    }

    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let words = self
            .words
            .iter()
            .enumerate()
            .map(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0))
            .collect();
        let mut s = CpuSet { words };
        s.trim();
        s
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// The set as 64-bit mask words, lowest CPUs first (the kernel's cpumask layout on
    /// little-endian machines).
    pub fn to_words(&self) -> Vec<u64> {
        self.words.clone()
    }

    pub fn from_words(words: &[u64]) -> CpuSet {
        let mut s = CpuSet {
            words: words.to_vec(),
        };
        s.trim();
        s
    }

    /// Parses the Linux list format: `0-3,8,10-11`, with optional `a-b:stride` (as in
    /// `cpuset.cpus` and kernel parameters). Empty input (after trimming) is the empty set.
    pub fn parse_list(input: &str) -> Result<CpuSet, CpuListError> {
        let mut set = CpuSet::new();
        let err = |position: usize, message: &str| CpuListError {
            input: input.to_string(),
            position,
            message: message.to_string(),
        };
        let trimmed_start = input.len() - input.trim_start().len();
        let body = input.trim();
        if body.is_empty() {
            return Ok(set);
        }
        let mut offset = trimmed_start;
        for part in body.split(',') {
            let start_pos = offset;
            offset += part.len() + 1;
            if part.is_empty() {
                return Err(err(start_pos, "empty element"));
            }
            let (range, stride) = match part.split_once(':') {
                Some((r, s)) => {
                    let pos = start_pos + r.len() + 1;
                    let stride = parse_index(s, pos, input)?;
                    if stride == 0 {
                        return Err(err(pos, "stride must be at least 1"));
                    }
                    (r, stride)
                }
                None => (part, 1),
            };
            match range.split_once('-') {
                Some((a, b)) => {
                    let lo = parse_index(a, start_pos, input)?;
                    let hi = parse_index(b, start_pos + a.len() + 1, input)?;
                    if hi < lo {
                        return Err(err(start_pos, "range end is below its start"));
                    }
                    let mut c = lo;
                    while c <= hi {
                        set.insert(c);
                        c += stride;
                    }
                }
                None => {
                    set.insert(parse_index(range, start_pos, input)?);
                }
            }
        }
        Ok(set)
    }

    /// Parses a Linux hex mask as in `cpumap` files: `00000000,0000000f` (comma-separated 32-bit
    /// words, most significant first).
    pub fn parse_mask(input: &str) -> Result<CpuSet, CpuListError> {
        let body = input.trim();
        let mut set = CpuSet::new();
        let words: Vec<&str> = body.split(',').collect();
        let n = words.len();
        for (i, w) in words.iter().enumerate() {
            let w = w.trim_start_matches("0x");
            let value = u32::from_str_radix(w, 16).map_err(|_| CpuListError {
                input: input.to_string(),
                position: 0,
                message: format!("'{w}' is not a hexadecimal mask word"),
            })?;
            let base = ((n - 1 - i) * 32) as u32;
            for b in 0..32 {
                if value & (1 << b) != 0 {
                    set.insert(base + b);
                }
            }
        }
        Ok(set)
    }

    /// The Linux list format, e.g. `0-3,8`. The empty set prints as an empty string.
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut iter = self.iter().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end = iter.next().unwrap_or(end);
            }
            if !out.is_empty() {
                out.push(',');
            }
            if end == start {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }
}

fn parse_index(s: &str, position: usize, input: &str) -> Result<u32, CpuListError> {
    let err = |message: String| CpuListError {
        input: input.to_string(),
        position,
        message,
    };
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(format!("'{s}' is not a CPU number")));
    }
    match s.parse::<u32>() {
        Ok(v) if v <= MAX_CPU_INDEX => Ok(v),
        _ => Err(err(format!(
            "CPU number '{s}' is too large (at most {MAX_CPU_INDEX})"
        ))),
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list())
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet::from_cpus(iter)
    }
}

impl Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CpuSet::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip() {
        let s = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse_list(" 5 ").unwrap().to_list(), "5");
        assert!(CpuSet::parse_list("").unwrap().is_empty());
        assert_eq!(CpuSet::parse_list("0-8:4").unwrap().to_list(), "0,4,8");
    }

    #[test]
    fn list_errors_point_at_position() {
        let e = CpuSet::parse_list("0-3,x").unwrap_err();
        assert_eq!(e.position, 4);
        let e = CpuSet::parse_list("3-1").unwrap_err();
        assert!(e.message.contains("below"));
        assert!(CpuSet::parse_list("1,,2").is_err());
        assert!(CpuSet::parse_list("99999999999").is_err());
    }

    #[test]
    fn mask_parsing() {
        let s = CpuSet::parse_mask("00000000,0000000f\n").unwrap();
        assert_eq!(s.to_list(), "0-3");
        let s = CpuSet::parse_mask("00000001,00000000").unwrap();
        assert_eq!(s.to_list(), "32");
        assert!(CpuSet::parse_mask("zz").is_err());
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::parse_list("0-5").unwrap();
        let b = CpuSet::parse_list("4-100").unwrap();
        assert_eq!(a.intersection(&b).to_list(), "4-5");
        assert_eq!(a.difference(&b).to_list(), "0-3");
        assert_eq!(a.union(&b).to_list(), "0-100");
        assert!(CpuSet::parse_list("1-2").unwrap().is_subset(&a));
        let mut c = CpuSet::parse_list("64").unwrap();
        c.remove(64);
        assert!(c.is_empty());
        assert_eq!(c, CpuSet::new());
    }
}
