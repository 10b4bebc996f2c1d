//! Presenting results: the terminal table, JSON / CSV / Markdown exports and the SVG box
//! plot, as text; the CLI writes them to files.

use crate::stats::{Better, Interval};
use crate::summary::StrategySummary;
use autopin_human::{duration, number, probability};
use serde::Serialize;
use std::fmt::Write as _;

/// The whole result, as exported to JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Document<'a> {
    pub program: Vec<String>,
    pub baseline: String,
    pub runs_per_strategy: usize,
    pub warmup_runs: usize,
    pub rounds: usize,
    pub seed: u64,
    pub alpha: f64,
    /// "wall_s" or "metric".
    pub value: &'static str,
    pub better: Better,
    pub metric_regex: Option<String>,
    /// True when the comparison was interrupted; the runs are the ones that completed.
    pub interrupted: bool,
    pub strategies: &'a [StrategySummary],
}

pub fn to_json(doc: &Document) -> String {
    // Serializing plain structs of numbers and strings cannot fail; NaN becomes null.
    serde_json::to_string_pretty(doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")) + "\n"
}

/// Why the CSV export could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error(transparent)]
    Record(#[from] csv::Error),
    #[error(transparent)]
    Flush(#[from] std::io::Error),
    #[error(transparent)]
    Utf8(#[from] std::string::FromUtf8Error),
}

/// One row per run, for plotting and for other statistics tools.
pub fn to_csv(doc: &Document) -> Result<String, CsvError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "strategy",
        "baseline",
        "round",
        "seq",
        "wall_s",
        "user_s",
        "sys_s",
        "max_rss_kib",
        "voluntary_switches",
        "involuntary_switches",
        "minor_faults",
        "major_faults",
        "exit_code",
        "signal",
        "success",
        "metric",
        "cpus",
    ])?;
    let opt = |v: Option<String>| v.unwrap_or_default();
    for s in doc.strategies {
        for r in &s.runs {
            w.write_record([
                s.strategy.clone(),
                s.baseline.to_string(),
                r.round.to_string(),
                r.seq.to_string(),
                format!("{:.6}", r.wall_s),
                format!("{:.6}", r.user_s),
                format!("{:.6}", r.sys_s),
                r.max_rss_kib.to_string(),
                r.counters.voluntary_switches.to_string(),
                r.counters.involuntary_switches.to_string(),
                r.counters.minor_faults.to_string(),
                r.counters.major_faults.to_string(),
                opt(r.exit_code.map(|c| c.to_string())),
                opt(r.signal.map(|c| c.to_string())),
                r.success.to_string(),
                opt(r.metric.map(|m| m.to_string())),
                opt(r
                    .cpus
                    .as_ref()
                    .map(|c| c.iter().map(u32::to_string).collect::<Vec<_>>().join(","))),
            ])?;
        }
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes)?)
}

/// The summary rows shared by the terminal table and the Markdown export.
fn rows(doc: &Document) -> (Vec<&'static str>, Vec<Vec<String>>) {
    // Wall times read as durations (`3.22 ms`, `1.02 s`); a program metric has no known unit.
    let num = |v: Option<f64>| {
        v.map(|x| {
            if doc.value == "metric" {
                number(x)
            } else {
                duration(x)
            }
        })
        .unwrap_or_else(|| "-".into())
    };
    let ratio = |v: Option<f64>, ci: Option<Interval>| match (v, ci) {
        (Some(v), Some(ci)) => format!("{v:.3} [{:.3}, {:.3}]", ci.low, ci.high),
        (Some(v), None) => format!("{v:.3}"),
        _ => "-".into(),
    };
    let header = vec![
        "strategy",
        "runs",
        "failed",
        "mean",
        "median",
        "sd",
        "cv",
        "min",
        "max",
        "speedup(mean)",
        "speedup(median)",
        "p(t)",
        "p(MWU)",
        "verdict",
    ];
    let rows = doc
        .strategies
        .iter()
        .map(|s| {
            let v = s.value;
            vec![
                if s.baseline {
                    format!("{} (baseline)", s.strategy)
                } else {
                    s.strategy.clone()
                },
                s.n_used.to_string(),
                s.n_failed.to_string(),
                num(v.map(|d| d.mean)),
                num(v.map(|d| d.median)),
                num(v.map(|d| d.sd)),
                v.map(|d| format!("{:.1}%", d.cv * 100.0))
                    .unwrap_or_else(|| "-".into()),
                num(v.map(|d| d.min)),
                num(v.map(|d| d.max)),
                if s.baseline {
                    "1".into()
                } else {
                    ratio(s.speedup_mean, s.speedup_mean_ci)
                },
                if s.baseline {
                    "1".into()
                } else {
                    ratio(s.speedup_median, s.speedup_median_ci)
                },
                s.p_value_welch
                    .map(probability)
                    .unwrap_or_else(|| "-".into()),
                s.p_value_mwu.map(probability).unwrap_or_else(|| "-".into()),
                s.verdict.clone(),
            ]
        })
        .collect();
    (header, rows)
}

fn preamble(doc: &Document) -> String {
    let what = match (doc.value, doc.better) {
        ("metric", Better::Higher) => "program metric (higher is better)".to_string(),
        ("metric", Better::Lower) => "program metric (lower is better)".to_string(),
        _ => "wall time (lower is better)".to_string(),
    };
    let mut s = format!(
        "{} rounds ({} warm-up runs), compared: {what}, baseline: {}, alpha {}; speedups with bootstrap 95% CI, one-sided p-values",
        doc.rounds, doc.warmup_runs, doc.baseline, doc.alpha
    );
    if doc.interrupted {
        s.push_str("\nINTERRUPTED: statistics cover the runs completed before the signal");
    }
    s
}

/// The plain-text table for the terminal.
pub fn to_table(doc: &Document) -> String {
    let (header, rows) = rows(doc);
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = preamble(doc) + "\n";
    let line = |cells: Vec<String>, out: &mut String| {
        let last = cells.len() - 1;
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = w - c.chars().count();
            if i == 0 || i == last {
                out.push_str(c);
                if i != last {
                    out.push_str(&" ".repeat(pad));
                }
            } else {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            }
            if i != last {
                out.push_str("  ");
            }
        }
        out.push('\n');
    };
    line(header.iter().map(|h| h.to_string()).collect(), &mut out);
    for r in rows {
        line(r, &mut out);
    }
    for s in doc.strategies.iter().filter(|s| s.n_failed > 0) {
        let _ = writeln!(
            out,
            "note: {} had {} failed run(s){}",
            s.strategy,
            s.n_failed,
            if s.n_used < s.runs.len() {
                ", excluded from the statistics (use --ignore-failure to include)"
            } else {
                ""
            }
        );
    }
    out
}

pub fn to_markdown(doc: &Document) -> String {
    let (header, rows) = rows(doc);
    let esc = |s: &str| s.replace('|', "\\|");
    let mut out = format!(
        "# autopin compare: `{}`\n\n{}\n\n",
        esc(&doc.program.join(" ")),
        preamble(doc)
    );
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for r in rows {
        let _ = writeln!(
            out,
            "| {} |",
            r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
        );
    }
    out
}

/// Box plots of the compared value, one box per strategy (Tukey whiskers at 1.5 IQR, points
/// beyond drawn as outliers, the mean as a diamond); the baseline box is drawn in another colour.
pub fn to_svg(doc: &Document) -> String {
    let boxes: Vec<(&StrategySummary, Vec<f64>)> = doc
        .strategies
        .iter()
        .map(|s| {
            let mut v = s.values.clone();
            v.sort_by(|a, b| a.total_cmp(b));
            (s, v)
        })
        .collect();
    let all: Vec<f64> = boxes.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    let (mut lo, mut hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        (lo, hi) = (lo - 0.5 * lo.abs().max(1e-3), hi + 0.5 * hi.abs().max(1e-3));
    }
    // Round the axis to a "nice" step (1, 2 or 5 times a power of ten) so ticks read well.
    let step = nice_step((hi - lo) / 5.0);
    let (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
    let ticks = ((hi - lo) / step).round() as usize;
    let (left, top, plot_h, slot) = (80.0, 40.0, 320.0, 120.0);
    let width = left + slot * boxes.len().max(1) as f64 + 20.0;
    let height = top + plot_h + 70.0;
    let y = |v: f64| top + plot_h - (v - lo) / (hi - lo) * plot_h;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    // The program's own number: say so, which way is better, and how it was read.
    let label = if doc.value == "metric" {
        format!(
            "program metric, {} is better{}",
            if matches!(doc.better, Better::Higher) {
                "higher"
            } else {
                "lower"
            },
            doc.metric_regex
                .as_deref()
                .map(|r| format!(" (from its output, {r})"))
                .unwrap_or_default()
        )
    } else {
        "wall time (s)".to_string()
    };
    let _ = writeln!(
        s,
        r#"<text x="{}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
        width / 2.0,
        xml(&format!(
            "{label} per strategy ({} rounds{})",
            doc.rounds,
            if doc.interrupted { ", interrupted" } else { "" }
        ))
    );
    // Axis with 5 ticks.
    let _ = writeln!(
        s,
        r#"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="black"/>"#,
        top + plot_h
    );
    for i in 0..=ticks {
        let v = lo + step * i as f64;
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            left,
            width - 20.0,
            left - 6.0,
            yy + 4.0,
            tick_label(v, step)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">{}</text>"#,
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        xml(&label)
    );
    for (i, (st, v)) in boxes.iter().enumerate() {
        let cx = left + slot * (i as f64 + 0.5);
        let (fill, stroke) = if st.baseline {
            ("#f6c85f", "#8a6d00")
        } else {
            ("#9dc3e6", "#1f4e79")
        };
        let name = if st.baseline {
            format!("{} (baseline)", st.strategy)
        } else {
            st.strategy.clone()
        };
        let _ = writeln!(
            s,
            r##"<text x="{cx}" y="{}" text-anchor="middle">{}</text><text x="{cx}" y="{}" text-anchor="middle" fill="#555">{}</text>"##,
            top + plot_h + 20.0,
            xml(&name),
            top + plot_h + 36.0,
            xml(&format!("n={}  {}", v.len(), short_verdict(st)))
        );
        if v.is_empty() {
            continue;
        }
        // v is not empty (above): every quantile is defined.
        let q = |p: f64| crate::stats::quantile_sorted(v, p).unwrap_or(f64::NAN);
        let (q1, q2, q3) = (q(0.25), q(0.5), q(0.75));
        let iqr = q3 - q1;
        let wlo = v
            .iter()
            .copied()
            .find(|&x| x >= q1 - 1.5 * iqr)
            .unwrap_or(q1);
        let whi = v
            .iter()
            .rev()
            .copied()
            .find(|&x| x <= q3 + 1.5 * iqr)
            .unwrap_or(q3);
        let half = 30.0;
        let _ = writeln!(
            s,
            r#"<line x1="{cx}" y1="{:.1}" x2="{cx}" y2="{:.1}" stroke="{stroke}"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{stroke}"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{stroke}"/>"#,
            y(wlo),
            y(whi),
            cx - half / 2.0,
            y(wlo),
            cx + half / 2.0,
            y(wlo),
            cx - half / 2.0,
            y(whi),
            cx + half / 2.0,
            y(whi)
        );
        let _ = writeln!(
            s,
            r#"<rect class="box" x="{:.1}" y="{:.1}" width="{}" height="{:.1}" fill="{fill}" stroke="{stroke}" stroke-width="{}"/>"#,
            cx - half,
            y(q3),
            2.0 * half,
            (y(q1) - y(q3)).max(1.0),
            if st.baseline { 2.5 } else { 1.0 }
        );
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{stroke}" stroke-width="2"/>"#,
            cx - half,
            y(q2),
            cx + half,
            y(q2)
        );
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let my = y(mean);
        let _ = writeln!(
            s,
            r#"<path d="M {cx} {:.1} l 4 4 l -4 4 l -4 -4 z" fill="{stroke}"/>"#,
            my - 4.0
        );
        for &x in v.iter().filter(|&&x| x < wlo || x > whi) {
            let _ = writeln!(
                s,
                r#"<circle cx="{cx}" cy="{:.1}" r="3" fill="none" stroke="{stroke}"/>"#,
                y(x)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// The smallest of 1, 2, 5 × 10^k that is at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&s| s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * p)
}

/// A tick value with as many decimals as the step needs.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

fn short_verdict(s: &StrategySummary) -> String {
    match s.speedup_median {
        Some(sp) if !s.baseline => format!("×{sp:.2}"),
        _ => String::new(),
    }
}

use autopin_topology::view::svg::esc as xml;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{Experiment, RunRecord};
    use crate::strategy::{Strategy, StrategyKind};
    use crate::summary::{summarize, SummaryConfig};

    fn summaries() -> Vec<StrategySummary> {
        let strategies = vec![
            Strategy {
                name: "none".into(),
                kind: StrategyKind::None,
            },
            Strategy {
                name: "0,0".into(),
                kind: StrategyKind::Cpus { expr: "0,0".into() },
            },
        ];
        let mut e = Experiment::new(strategies, 0);
        for i in 0..6 {
            for (s, base) in [(0, 1.0), (1, 2.0)] {
                e.records[s].push(RunRecord {
                    round: i,
                    seq: 2 * i + s,
                    wall_s: base + i as f64 * 0.01,
                    user_s: 1.0,
                    sys_s: 0.0,
                    max_rss_kib: 100,
                    counters: Default::default(),
                    exit_code: Some(if i == 5 && s == 1 { 1 } else { 0 }),
                    signal: None,
                    success: !(i == 5 && s == 1),
                    metric: None,
                    metric_error: None,
                    cpus: None,
                });
            }
        }
        summarize(
            &e,
            &SummaryConfig {
                bootstrap_resamples: 500,
                ..Default::default()
            },
        )
    }

    fn doc(s: &[StrategySummary]) -> Document<'_> {
        Document {
            program: vec!["./prog".into(), "a|b".into()],
            baseline: "none".into(),
            runs_per_strategy: 6,
            warmup_runs: 0,
            rounds: 6,
            seed: 1,
            alpha: 0.05,
            value: "wall_s",
            better: Better::Lower,
            metric_regex: None,
            interrupted: false,
            strategies: s,
        }
    }

    #[test]
    fn json_has_the_documented_keys() {
        let s = summaries();
        let v: serde_json::Value = serde_json::from_str(&to_json(&doc(&s))).unwrap();
        let st = &v["strategies"][1];
        for key in [
            "strategy",
            "runs",
            "median_s",
            "mean_s",
            "cv",
            "speedup_median",
            "p_value_welch",
            "p_value_mwu",
            "verdict",
        ] {
            assert!(!st[key].is_null(), "missing {key}: {st}");
        }
        assert_eq!(st["runs"].as_array().unwrap().len(), 6);
        assert_eq!(st["n_failed"], 1);
        assert!(st["verdict"].as_str().unwrap().starts_with("slower"));
        assert_eq!(v["strategies"][0]["baseline"], true);
    }

    #[test]
    fn csv_has_one_row_per_run_and_quotes_commas() {
        let s = summaries();
        let csv = to_csv(&doc(&s)).unwrap();
        assert_eq!(csv.lines().count(), 13);
        assert!(csv.contains("\n\"0,0\",false,"), "{csv}");
    }

    #[test]
    fn table_and_markdown() {
        let s = summaries();
        let t = to_table(&doc(&s));
        assert!(t.contains("none (baseline)"));
        assert!(t.contains("note: 0,0 had 1 failed run(s), excluded"), "{t}");
        // Readable numbers: durations with units and three digits, p-values without exponents.
        assert!(t.contains("  1.02 s  "), "{t}");
        assert!(t.contains("  18.7 ms  "), "{t}");
        assert!(t.contains("  <0.0001  0.0022  slower, p=0.0022"), "{t}");
        assert!(!t.contains("e-0"), "{t}");
        let md = to_markdown(&doc(&s));
        assert!(md.contains("a\\|b"));
        assert_eq!(md.lines().filter(|l| l.starts_with('|')).count(), 4);
    }

    #[test]
    fn svg_has_one_box_per_strategy_and_marks_the_baseline() {
        let s = summaries();
        let svg = to_svg(&doc(&s));
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("class=\"box\"").count(), 2);
        assert!(svg.contains("none (baseline)"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(">wall time (s)<"), "{svg}");
        // A program's own number says what it is on its axis, not just "metric".
        let mut d = doc(&s);
        d.value = "metric";
        d.better = Better::Higher;
        d.metric_regex = Some("GFLOPS: ([0-9.]+)".into());
        let svg = to_svg(&d);
        assert!(
            svg.contains(">program metric, higher is better (from its output, GFLOPS: ([0-9.]+))<"),
            "{svg}"
        );
    }

    #[test]
    fn nice_axis_steps() {
        assert_eq!(nice_step(0.11), 0.2);
        assert_eq!(nice_step(0.09), 0.1);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
        assert_eq!(tick_label(20.0, 5.0), "20");
    }
}
