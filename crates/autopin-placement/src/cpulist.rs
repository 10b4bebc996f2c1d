//! Ordered CPU lists with repetition: thread i goes to the i-th entry. Printed and parsed in
//! the Linux list format (`0-3,8,10-11`); ranges may also run downwards (`3-0`), as likwid-pin
//! accepts, because order matters here.

use autopin_topology::cpuset::MAX_CPU_INDEX;
use autopin_topology::CpuSet;
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::error::PlacementError;

#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList(pub Vec<u32>);

/// One element of a list as written, with its byte offset (for error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Item {
    pub first: u32,
    pub last: u32,
    pub position: usize,
}

impl Item {
    pub fn values(&self) -> Box<dyn Iterator<Item = u32>> {
        if self.first <= self.last {
            Box::new(self.first..=self.last)
        } else {
            Box::new((self.last..=self.first).rev())
        }
    }
}

/// Parses `a,b-c,d-e` into items; `base` is the offset of `text` inside `whole` (the full
/// expression), so error positions point into what the user typed.
pub(crate) fn parse_items(
    whole: &str,
    text: &str,
    base: usize,
    what: &str,
) -> Result<Vec<Item>, PlacementError> {
    let mut items = Vec::new();
    if text.is_empty() {
        return Err(PlacementError::expr(
            whole,
            base,
            format!("expected a {what} list (e.g. 0-3,8)"),
            "",
        ));
    }
    let mut offset = base;
    for part in text.split(',') {
        let pos = offset;
        offset += part.len() + 1;
        if part.is_empty() {
            return Err(PlacementError::expr(
                whole,
                pos,
                format!("empty element in {what} list"),
                "",
            ));
        }
        let (a, b, bpos) = match part.split_once('-') {
            Some((a, b)) => (a, b, pos + a.len() + 1),
            None => (part, part, pos),
        };
        let first = parse_number(whole, a, pos, what)?;
        let last = parse_number(whole, b, bpos, what)?;
        items.push(Item {
            first,
            last,
            position: pos,
        });
    }
    Ok(items)
}

fn parse_number(whole: &str, s: &str, pos: usize, what: &str) -> Result<u32, PlacementError> {
    if s.is_empty() {
        return Err(PlacementError::expr(
            whole,
            pos,
            format!("expected a {what} number"),
            "",
        ));
    }
    if let Some(mask) = whole
        .strip_prefix("0x")
        .or_else(|| whole.strip_prefix("0X"))
        .and_then(|h| u128::from_str_radix(h, 16).ok())
    {
        // taskset's hexadecimal mask: say which CPUs it names, in the form wanted here.
        let cpus: Vec<String> = (0..128)
            .filter(|b| mask >> b & 1 == 1)
            .map(|b| b.to_string())
            .collect();
        return Err(PlacementError::expr(
            whole,
            1,
            format!(
                "'{whole}' is a taskset-style CPU mask; here CPUs are listed: write {}",
                if cpus.is_empty() {
                    "a CPU list such as 0,1".to_string()
                } else {
                    cpus.join(",")
                }
            ),
            "",
        ));
    }
    if let Some(bad) = s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        return Err(PlacementError::expr(
            whole,
            pos + bad.0,
            format!(
                "unexpected character '{}' in {what} list; expected digits, ',' or '-'",
                bad.1
            ),
            "",
        ));
    }
    match s.parse::<u32>() {
        Ok(v) if v <= MAX_CPU_INDEX => Ok(v),
        _ => Err(PlacementError::expr(
            whole,
            pos,
            format!("{what} number '{s}' is too large (at most {MAX_CPU_INDEX})"),
            "",
        )),
    }
}

impl CpuList {
    pub fn new(cpus: Vec<u32>) -> Self {
        CpuList(cpus)
    }

    /// Parses `0-3,8,10-11` (also `3-0`, repeated CPUs). Errors carry the byte position.
    pub fn parse(text: &str) -> Result<CpuList, PlacementError> {
        let trimmed = text.trim();
        let base = text.len() - text.trim_start().len();
        let items = parse_items(text, trimmed, base, "CPU")?;
        Ok(CpuList(items.iter().flat_map(|i| i.values()).collect()))
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The distinct CPUs.
    pub fn to_set(&self) -> CpuSet {
        self.0.iter().copied().collect()
    }

    /// Runs of consecutive increasing CPUs become `a-b`; everything else stays in order.
    pub fn to_list(&self) -> String {
        let v = &self.0;
        let mut out = String::new();
        let mut i = 0;
        while i < v.len() {
            let mut j = i;
            while j + 1 < v.len() && v[j + 1] == v[j].wrapping_add(1) {
                j += 1;
            }
            if !out.is_empty() {
                out.push(',');
            }
            if j > i {
                out.push_str(&format!("{}-{}", v[i], v[j]));
            } else {
                out.push_str(&v[i].to_string());
            }
            i = j + 1;
        }
        out
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl fmt::Debug for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuList({})", self.to_list())
    }
}

impl From<Vec<u32>> for CpuList {
    fn from(v: Vec<u32>) -> Self {
        CpuList(v)
    }
}

impl Serialize for CpuList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list())
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CpuList::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_order_and_repetition() {
        for s in ["0-3,8,10-11", "3,2,1,0", "1,1,1", "0,4,1,5", "7"] {
            assert_eq!(CpuList::parse(s).unwrap().to_list(), s);
        }
        assert_eq!(CpuList::parse("3-0").unwrap().0, vec![3, 2, 1, 0]);
        assert_eq!(CpuList::parse(" 0-1 ").unwrap().0, vec![0, 1]);
    }

    #[test]
    fn errors_point_at_the_character() {
        let e = CpuList::parse("0-3,x").unwrap_err();
        assert!(matches!(e, PlacementError::Expr { position: 4, .. }), "{e}");
        let e = CpuList::parse("1,,2").unwrap_err();
        assert!(matches!(e, PlacementError::Expr { position: 2, .. }), "{e}");
        let e = CpuList::parse("1-").unwrap_err();
        assert!(matches!(e, PlacementError::Expr { position: 2, .. }), "{e}");
        assert!(CpuList::parse("").is_err());
        assert!(CpuList::parse("99999999999")
            .unwrap_err()
            .to_string()
            .contains("too large"));
        assert!(CpuList::parse("2a")
            .unwrap_err()
            .to_string()
            .contains("'a'"));
    }
}
