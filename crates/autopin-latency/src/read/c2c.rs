//! The CSV format of core-to-core-latency: an n×n grid, row i column j holds the latency
//! between CPU i and CPU j in nanoseconds; only the lower triangle is filled, the rest empty.
//! Full matrices (both triangles) are accepted too; the two directions are averaged.

use crate::error::{LatencyError, Result};
use crate::matrix::{LatencyMatrix, Unit};

pub fn parse(text: &str, file: &str) -> Result<LatencyMatrix> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let n = lines.len();
    if n < 2 {
        return Err(LatencyError::parse(
            file,
            lines.first().map_or(1, |l| l.0),
            "a latency matrix needs at least 2 rows (one per CPU)",
        ));
    }
    let mut cells: Vec<Vec<Option<f64>>> = Vec::with_capacity(n);
    for (row, (lineno, line)) in lines.iter().enumerate() {
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != n {
            return Err(LatencyError::parse(
                file,
                *lineno,
                format!(
                    "row {row} has {} fields, expected {n} (the matrix has {n} rows, so it must be {n}×{n}; empty fields are allowed)",
                    fields.len()
                ),
            ));
        }
        let mut r = Vec::with_capacity(n);
        for (col, f) in fields.iter().enumerate() {
            let f = f.trim();
            if f.is_empty() {
                r.push(None);
                continue;
            }
            let v: f64 = f.parse().map_err(|_| {
                LatencyError::parse(
                    file,
                    *lineno,
                    format!(
                        "column {}: `{f}` is not a number (expected nanoseconds or an empty field)",
                        col + 1
                    ),
                )
            })?;
            if !v.is_finite() || v < 0.0 {
                return Err(LatencyError::parse(
                    file,
                    *lineno,
                    format!(
                        "column {}: latency {f} must be a finite number ≥ 0",
                        col + 1
                    ),
                ));
            }
            r.push(Some(v));
        }
        cells.push(r);
    }
    let mut values = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..i {
            let v = match (cells[i][j], cells[j][i]) {
                (Some(a), Some(b)) => (a + b) / 2.0,
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => {
                    return Err(LatencyError::parse(
                        file,
                        lines[i].0,
                        format!("no latency between CPU {i} and CPU {j}: column {} is empty in this row and in row {j}", j + 1),
                    ))
                }
            };
            values[i][j] = v;
            values[j][i] = v;
        }
    }
    Ok(LatencyMatrix {
        cpus: (0..n as u32).collect(),
        values,
        unit: Unit::Nanoseconds,
        ghz: None,
        source: file.to_string(),
    })
}

/// Writes a matrix (in nanoseconds) in the same format: lower triangle, empty elsewhere.
/// Rows are positions in `m.cpus`, which is what core-to-core-latency writes too when it
/// measured every CPU; a note on stderr is the caller's job when CPUs were skipped.
pub fn write(values: &[Vec<f64>]) -> String {
    let n = values.len();
    let mut s = String::new();
    for (i, row) in values.iter().enumerate() {
        let fields: Vec<String> = (0..n)
            .map(|j| {
                if j < i {
                    format!("{}", row[j])
                } else {
                    String::new()
                }
            })
            .collect();
        s.push_str(&fields.join(","));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lower_triangle_and_round_trips() {
        let m = parse(",,\n5.5,,\n20,21,\n", "t.csv").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(0, 1), 5.5);
        assert_eq!(m.get(2, 1), 21.0);
        assert_eq!(m.get(1, 2), 21.0);
        let again = parse(&write(&m.values), "u.csv").unwrap();
        assert_eq!(again.values, m.values);
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse(",,\n5.5,,\nx,21,\n", "t.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("t.csv:3: column 1: `x` is not a number"),
            "{e}"
        );
        let e = parse(",,\n5.5,\n20,21,\n", "t.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("t.csv:2: row 1 has 2 fields, expected 3"),
            "{e}"
        );
        let e = parse(",,\n,,\n20,21,\n", "t.csv").unwrap_err().to_string();
        assert!(
            e.contains("t.csv:2: no latency between CPU 1 and CPU 0"),
            "{e}"
        );
        let e = parse(",,\n-1,,\n20,21,\n", "t.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be a finite number"), "{e}");
    }
}
