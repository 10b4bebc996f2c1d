//! Pinnings given by the user as CPU lists: `--schedule` and the paper's `SCHEDULE` variable.
//!
//! Two spellings exist and a CPU list itself contains commas, so they are told apart by
//! where they come from:
//! - `--schedule` (repeatable) takes `;`-separated entries, each a CPU list in thread order:
//!   `0,1;0,0` or `2-3,6-7;0-3`. Thread i goes to the i-th CPU of the entry; `1,0` keeps its
//!   order (it is a mapping, not a set).
//! - `SCHEDULE` follows the paper: comma-separated digit strings, one digit per thread
//!   (`2367,0145`). If the variable contains a `;` it is read like `--schedule` instead, so
//!   machines with more than ten CPUs can use it too.

use std::fmt;

/// A bad schedule entry: what was wrong and at which character (0-based) of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError {
    pub input: String,
    pub position: usize,
    pub message: String,
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As pin expressions: the position counts from 0, a caret points at it.
        write!(
            f,
            "bad schedule {:?}, position {}: {}\n  {}\n  {}^",
            self.input,
            self.position,
            self.message,
            self.input,
            " ".repeat(self.position)
        )
    }
}

impl std::error::Error for ScheduleError {}

fn err(input: &str, position: usize, message: impl Into<String>) -> ScheduleError {
    ScheduleError {
        input: input.to_string(),
        position,
        message: message.into(),
    }
}

/// Parses one CPU list in thread order: `2-3,6-7` → [2,3,6,7], `1,0` → [1,0], with the
/// CPU-list grammar of [`crate::CpuList`] (one parser for both); a schedule range must run
/// upwards. `offset` is where `s` starts inside `full` (for error positions).
fn parse_ordered_list(full: &str, s: &str, offset: usize) -> Result<Vec<u32>, ScheduleError> {
    let mut out = Vec::new();
    let mut pos = offset;
    for item in s.split(',') {
        let trimmed = item.trim();
        let lead = item.len() - item.trim_start().len();
        if trimmed.is_empty() {
            return Err(err(
                full,
                pos,
                "empty CPU entry (valid: `3`, `2-5`, `0,2,4`)",
            ));
        }
        let parsed =
            crate::cpulist::parse_items(full, trimmed, pos + lead, "CPU").map_err(|e| match e {
                crate::PlacementError::Expr {
                    position, message, ..
                } => err(
                    full,
                    position,
                    format!("{message} (valid: `3`, `2-5`, `0,2,4`)"),
                ),
                other => err(full, pos + lead, other.to_string()),
            })?;
        for it in parsed {
            if it.last < it.first {
                return Err(err(
                    full,
                    it.position,
                    format!("range {}-{} runs backwards", it.first, it.last),
                ));
            }
            out.extend(it.values());
        }
        pos += item.len() + 1;
    }
    Ok(out)
}

/// Parses a `--schedule` value: `;`-separated CPU lists.
pub fn parse_schedule_lists(s: &str) -> Result<Vec<Vec<u32>>, ScheduleError> {
    let mut out = Vec::new();
    let mut pos = 0;
    for entry in s.split(';') {
        if entry.trim().is_empty() {
            return Err(err(
                s,
                pos,
                "empty schedule entry (entries are CPU lists separated by `;`, e.g. `0,1;0,0`)",
            ));
        }
        out.push(parse_ordered_list(s, entry, pos)?);
        pos += entry.len() + 1;
    }
    Ok(out)
}

/// Parses the paper's `SCHEDULE` form: comma-separated strings, one digit (CPU 0-9) per
/// thread. A value containing `;` is read as `--schedule` lists instead.
pub fn parse_schedule_env(s: &str) -> Result<Vec<Vec<u32>>, ScheduleError> {
    if s.contains(';') {
        return parse_schedule_lists(s);
    }
    let mut out = Vec::new();
    let mut pos = 0;
    for entry in s.split(',') {
        let t = entry.trim();
        if t.is_empty() {
            return Err(err(
                s,
                pos,
                "empty mapping (SCHEDULE is digit strings like `2367,0145`)",
            ));
        }
        let lead = entry.len() - entry.trim_start().len();
        let mut cpus = Vec::new();
        for (i, c) in t.char_indices() {
            match c.to_digit(10) {
                Some(d) => cpus.push(d),
                None => {
                    return Err(err(
                        s,
                        pos + lead + i,
                        format!(
                        "{c:?} is not a digit; SCHEDULE maps one digit per thread (`2367,0145`); \
                             for CPU lists use `;` between entries (`2-3,6-7;0-3`)"
                    ),
                    ))
                }
            }
        }
        out.push(cpus);
        pos += entry.len() + 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_digit_strings() {
        assert_eq!(
            parse_schedule_env("2367,0145").unwrap(),
            vec![vec![2, 3, 6, 7], vec![0, 1, 4, 5]]
        );
        assert_eq!(parse_schedule_env("12,17,18").unwrap()[1], vec![1, 7]);
    }

    #[test]
    fn env_with_semicolon_is_lists() {
        assert_eq!(
            parse_schedule_env("2-3,6-7;10,11").unwrap(),
            vec![vec![2, 3, 6, 7], vec![10, 11]]
        );
    }

    #[test]
    fn lists_keep_order() {
        assert_eq!(
            parse_schedule_lists("1,0;0,0").unwrap(),
            vec![vec![1, 0], vec![0, 0]]
        );
        assert_eq!(
            parse_schedule_lists("2-3,6-7").unwrap(),
            vec![vec![2, 3, 6, 7]]
        );
    }

    #[test]
    fn errors_point_at_character() {
        let e = parse_schedule_env("23,0x").unwrap_err();
        assert_eq!(e.position, 4);
        assert!(e.to_string().contains("not a digit"));
        let e = parse_schedule_lists("0,1;;2").unwrap_err();
        assert_eq!(e.position, 4);
        let e = parse_schedule_lists("0,a").unwrap_err();
        assert_eq!(e.position, 2);
        let e = parse_schedule_lists("3-1").unwrap_err();
        assert!(e.message.contains("backwards"));
    }
}
