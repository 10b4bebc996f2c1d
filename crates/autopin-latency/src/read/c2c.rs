//! The CSV format of core-to-core-latency: an n×n grid, row i column j holds the latency
//! between CPU i and CPU j in nanoseconds; only the lower triangle is filled, the rest empty.
//! Full matrices (both triangles) are accepted too; the two directions are averaged.
//!
//! autopin writes it with CPU numbers: a first row `cpu,4,5,6,7` and each row starting with
//! its CPU (the plain grid says nothing of which CPUs were measured, and `--cpus 4-7`
//! read back as CPUs 0–3). Both forms are read.

use crate::error::{LatencyError, Result};
use crate::matrix::{LatencyMatrix, Unit};

/// The label of the first header field.
const LABEL: &str = "cpu";

/// The grid's lines as (line number, fields), the label column taken off.
type Rows<'a> = Vec<(usize, Vec<&'a str>)>;

pub fn parse(text: &str, file: &str) -> Result<LatencyMatrix> {
    let all: Rows = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i, l.split(',').map(str::trim).collect()))
        .collect();
    let labelled = all
        .first()
        .is_some_and(|(_, f)| f.first().is_some_and(|x| x.eq_ignore_ascii_case(LABEL)));
    // The labelled form: the header names the CPUs, each row repeats its own first.
    // With the header's line number, for the error that counts rows against it.
    let (header, lines): (Option<(usize, Vec<u32>)>, Rows) = if labelled {
        let (hline, header) = &all[0];
        let cpus = header[1..]
            .iter()
            .enumerate()
            .map(|(k, c)| {
                c.parse::<u32>().map_err(|_| {
                    LatencyError::parse(
                        file,
                        *hline,
                        format!("column {}: `{c}` is not a CPU number", k + 2),
                    )
                })
            })
            .collect::<Result<Vec<u32>>>()?;
        let mut rows = Vec::new();
        for (row, (lineno, f)) in all[1..].iter().enumerate() {
            let want = cpus.get(row).map(|c| c.to_string());
            if f.first().copied() != want.as_deref() {
                return Err(LatencyError::parse(
                    file,
                    *lineno,
                    format!(
                        "row {} starts with `{}`, expected CPU {} (rows follow the header's order)",
                        row + 1,
                        f.first().copied().unwrap_or(""),
                        want.unwrap_or_else(|| "none: more rows than CPUs in the header".into())
                    ),
                ));
            }
            rows.push((*lineno, f[1..].to_vec()));
        }
        (Some((*hline, cpus)), rows)
    } else {
        (None, all)
    };
    // Columns as the user sees them in the file (the label column counts).
    let shift = usize::from(labelled);
    let n = lines.len();
    if n < 2 {
        return Err(LatencyError::parse(
            file,
            lines.first().map_or(1, |l| l.0),
            "a latency matrix needs at least 2 rows (one per CPU)",
        ));
    }
    if let Some((hline, cpus)) = header.as_ref().filter(|(_, c)| c.len() != n) {
        return Err(LatencyError::parse(
            file,
            *hline,
            format!("the header names {} CPUs but {n} rows follow", cpus.len()),
        ));
    }
    let mut cells: Vec<Vec<Option<f64>>> = Vec::with_capacity(n);
    for (row, (lineno, fields)) in lines.iter().enumerate() {
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
                        col + 1 + shift
                    ),
                )
            })?;
            if !(0.0..=super::MAX_VALUE).contains(&v) {
                return Err(LatencyError::parse(
                    file,
                    *lineno,
                    format!(
                        "column {}: latency {f} must be a number of nanoseconds from 0 to 1e9",
                        col + 1 + shift
                    ),
                ));
            }
            r.push(Some(v));
        }
        cells.push(r);
    }
    let cpus = header.map_or_else(|| (0..n as u32).collect(), |(_, c)| c);
    let cpu = |i: usize| cpus[i];
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
                        format!("no latency between CPU {} and CPU {}: column {} is empty in this row and in row {j}", cpu(i), cpu(j), j + 1 + shift),
                    ))
                }
            };
            values[i][j] = v;
            values[j][i] = v;
        }
    }
    Ok(LatencyMatrix {
        cpus,
        values,
        unit: Unit::Nanoseconds,
        ghz: None,
        source: file.to_string(),
    })
}

/// Writes a matrix of `cpus` (in nanoseconds, or cycles) in the labelled form: a header
/// `cpu,<cpus>`, then each CPU's row, its number first, the lower triangle filled and the
/// rest empty.
pub fn write(cpus: &[u32], values: &[Vec<f64>]) -> String {
    let n = values.len();
    let mut s = String::from(LABEL);
    for c in cpus {
        s.push_str(&format!(",{c}"));
    }
    s.push('\n');
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
        s.push_str(&format!("{},", cpus.get(i).copied().unwrap_or(i as u32)));
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
        let again = parse(&write(&m.cpus, &m.values), "u.csv").unwrap();
        assert_eq!(again.values, m.values);
    }

    #[test]
    fn cpu_numbers_are_written_and_read_back() {
        let values = vec![vec![0.0, 40.0], vec![40.0, 0.0]];
        let text = write(&[4, 6], &values);
        assert_eq!(text, "cpu,4,6\n4,,\n6,40,\n");
        let m = parse(&text, "l.csv").unwrap();
        assert_eq!(m.cpus, [4, 6]);
        assert_eq!(m.get(0, 1), 40.0);
        let e = parse("cpu,4,6\n4,,\n5,40,\n", "l.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("l.csv:3: row 2 starts with `5`, expected CPU 6"),
            "{e}"
        );
        let e = parse("cpu,4,x\n4,,\n6,40,\n", "l.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("l.csv:1: column 3: `x` is not a CPU number"),
            "{e}"
        );
        let e = parse("\ncpu,4,6,7\n4,,,\n6,40,,\n", "l.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("l.csv:2: the header names 3 CPUs but 2 rows follow"),
            "{e}"
        );
        let e = parse("cpu,4,6\n4,,\n6,y,\n", "l.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("l.csv:3: column 2: `y` is not a number"), "{e}");
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
        assert!(
            e.contains(
                "t.csv:2: column 1: latency -1 must be a number of nanoseconds from 0 to 1e9"
            ),
            "{e}"
        );
        // A finite number whose sum overflows (1e308) is refused where it is written.
        let e = parse("0,1e308\n1e308,0\n", "t.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.csv:1: column 2: latency 1e308"), "{e}");
    }
}
