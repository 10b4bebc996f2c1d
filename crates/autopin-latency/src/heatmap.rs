//! An SVG heatmap of a latency matrix (CPU × CPU), CPUs ordered by the inferred structure so
//! each group is a block on the diagonal, with the groups of every level outlined.

use crate::infer::{Inference, Role};
use crate::matrix::LatencyMatrix;
use std::fmt::Write;

/// Five stops of a perceptually ordered dark-blue → yellow ramp.
const RAMP: [(f64, f64, f64); 5] = [
    (68.0, 1.0, 84.0),
    (59.0, 82.0, 139.0),
    (33.0, 145.0, 140.0),
    (94.0, 201.0, 98.0),
    (253.0, 231.0, 37.0),
];

fn color(t: f64) -> String {
    let t = t.clamp(0.0, 1.0) * (RAMP.len() - 1) as f64;
    let i = (t.floor() as usize).min(RAMP.len() - 2);
    let f = t - i as f64;
    let (a, b) = (RAMP[i], RAMP[i + 1]);
    let c = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    format!("#{:02x}{:02x}{:02x}", c(a.0, b.0), c(a.1, b.1), c(a.2, b.2))
}

fn outline_color(role: Role) -> &'static str {
    match role {
        Role::Smt => "#c8c8c8",
        Role::Cache(_) => "#ff7f0e",
        Role::Group => "#d62728",
        Role::Package => "#e377c2",
        Role::PackageGroup => "#7f7f7f",
    }
}

/// CPU order: by package, then last-level group, then core, then OS number.
fn order(inf: &Inference) -> Vec<usize> {
    let pos = |groups: &[Vec<u32>], cpu: u32| {
        groups
            .iter()
            .position(|g| g.contains(&cpu))
            .unwrap_or(usize::MAX)
    };
    let (p, l, c) = (inf.packages(), inf.llc_groups(), inf.cores());
    let mut idx: Vec<usize> = (0..inf.cpus.len()).collect();
    idx.sort_by_key(|&i| {
        let cpu = inf.cpus[i];
        (pos(&p, cpu), pos(&l, cpu), pos(&c, cpu), cpu)
    });
    idx
}

pub fn render(m: &LatencyMatrix, inf: &Inference) -> String {
    let n = m.len();
    let cell = (720.0 / n.max(1) as f64).clamp(2.0, 40.0);
    let margin = 60.0;
    let side = cell * n as f64;
    let (w, h) = (margin + side + 140.0, margin + side + 30.0);
    let ord = order(inf);
    let vals: Vec<f64> = m.pairs().map(|p| p.2).filter(|v| *v > 0.0).collect();
    let lo = vals.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().cloned().fold(0.0, f64::max);
    // Log scale: latencies span one to two orders of magnitude and the small ones matter.
    let t = |v: f64| {
        if hi > lo && v > 0.0 {
            (v.ln() - lo.ln()) / (hi.ln() - lo.ln())
        } else {
            0.0
        }
    };
    let unit = m.unit.short();
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" font-family="sans-serif" font-size="10">"#
    );
    let _ = writeln!(
        s,
        r#"<title>core-to-core latency ({unit}), {}</title>"#,
        xml(&m.source)
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{margin}" y="16" font-size="13">core-to-core latency ({unit}) — {}</text>"#,
        xml(&m.source)
    );
    for (r, &i) in ord.iter().enumerate() {
        for (c, &j) in ord.iter().enumerate() {
            let v = m.get(i, j);
            let fill = if i == j {
                "#dddddd".to_string()
            } else {
                color(t(v))
            };
            let _ = writeln!(
                s,
                r#"<rect x="{:.2}" y="{:.2}" width="{cell:.2}" height="{cell:.2}" fill="{fill}"><title>CPU {} ↔ CPU {}: {v:.1} {unit}</title></rect>"#,
                margin + c as f64 * cell,
                margin + r as f64 * cell,
                m.cpus[i],
                m.cpus[j]
            );
        }
    }
    // Axis labels: every CPU when they fit, else every k-th.
    let every = ((10.0 / cell).ceil() as usize).max(1);
    for (r, &i) in ord.iter().enumerate().filter(|(r, _)| r % every == 0) {
        let y = margin + (r as f64 + 0.5) * cell + 3.0;
        let x = margin + (r as f64 + 0.5) * cell;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{y:.1}" text-anchor="end">{}</text>"#,
            margin - 3.0,
            m.cpus[i]
        );
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            margin - 4.0,
            m.cpus[i]
        );
    }
    // Group outlines, finest first so coarser ones draw on top.
    for l in &inf.levels {
        for g in l.groups.iter().filter(|g| g.len() > 1) {
            let rows: Vec<usize> = g
                .iter()
                .filter_map(|cpu| ord.iter().position(|&i| m.cpus[i] == *cpu))
                .collect();
            let (a, b) = (
                rows.iter().min().copied().unwrap_or(0),
                rows.iter().max().copied().unwrap_or(0),
            );
            if b + 1 - a != rows.len() {
                continue; // not contiguous in this order; an outline would lie
            }
            let _ = writeln!(
                s,
                r#"<rect x="{x:.2}" y="{x:.2}" width="{d:.2}" height="{d:.2}" fill="none" stroke="{}" stroke-width="{}"><title>{}</title></rect>"#,
                outline_color(l.role),
                if l.role == Role::Smt { 1 } else { 2 },
                l.role.name(),
                x = margin + a as f64 * cell,
                d = rows.len() as f64 * cell
            );
        }
    }
    // Legend.
    let lx = margin + side + 20.0;
    for k in 0..=20 {
        let f = k as f64 / 20.0;
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="16" height="{:.1}" fill="{}"/>"#,
            margin + (1.0 - f) * 200.0,
            10.0,
            color(f)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}">{hi:.1} {unit}</text>"#,
        lx + 20.0,
        margin + 8.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}">{lo:.1} {unit}</text>"#,
        lx + 20.0,
        margin + 208.0
    );
    let mut y = margin + 240.0;
    for l in &inf.levels {
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="16" height="10" fill="none" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{y:.1}">{} ({:.0} {unit})</text>"#,
            y - 9.0,
            outline_color(l.role),
            lx + 20.0,
            xml(&l.role.name()),
            l.latency
        );
        y += 16.0;
    }
    s.push_str("</svg>\n");
    s
}

use autopin_topology::view::svg::esc as xml;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{infer, Hints, Unit};

    #[test]
    fn draws_cells_and_outlines() {
        let v = (0..4)
            .map(|i| {
                (0..4)
                    .map(|j| {
                        if i == j {
                            0.0
                        } else if i / 2 == j / 2 {
                            5.0
                        } else {
                            30.0
                        }
                    })
                    .collect()
            })
            .collect();
        let m = LatencyMatrix {
            cpus: vec![0, 1, 2, 3],
            values: v,
            unit: Unit::Nanoseconds,
            ghz: None,
            source: "a<b".into(),
        };
        let inf = infer(&m, &Hints::default()).unwrap();
        let svg = render(&m, &inf);
        assert_eq!(svg.matches("<title>CPU ").count(), 16);
        assert_eq!(svg.matches("<title>SMT (core)</title>").count(), 2);
        assert!(svg.contains("a&lt;b"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
