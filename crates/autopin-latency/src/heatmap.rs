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
        Role::Die => "#9467bd",
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

/// Estimated advance of one character of the 10 px sans-serif text (digits are the widest
/// common glyphs at about 0.64 em), so labels are laid out where they fit.
const CHAR_W: f64 = 6.4;
/// The title is 13 px.
const TITLE_CHAR_W: f64 = 8.3;
const PAD: f64 = 10.0;

fn text_w(t: &str, per_char: f64) -> f64 {
    t.chars().count() as f64 * per_char
}

pub fn render(m: &LatencyMatrix, inf: &Inference) -> String {
    let n = m.len();
    let cell = (720.0 / n.max(1) as f64).clamp(2.0, 40.0);
    let side = cell * n as f64;
    let ord = order(inf);
    let vals: Vec<f64> = m.pairs().map(|p| p.2).filter(|v| *v > 0.0).collect();
    let lo = vals.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().cloned().fold(0.0, f64::max);
    // One value everywhere (two CPUs, or a uniform machine): one colour, one label.
    let uniform = vals.is_empty() || hi <= lo * 1.0001;
    // Log scale: latencies span one to two orders of magnitude and the small ones matter.
    let t = |v: f64| {
        if uniform {
            0.5
        } else {
            ((v.ln() - lo.ln()) / (hi.ln() - lo.ln())).clamp(0.0, 1.0)
        }
    };
    let unit = m.unit.short();
    let label = |v: f64| autopin_human::quantity(v, unit);

    // Layout, left to right: row labels, cells, colour bar with its labels; top to bottom:
    // title, column labels, cells (or the legend, whichever is taller).
    let cpu_w = m
        .cpus
        .iter()
        .map(|c| text_w(&c.to_string(), CHAR_W))
        .fold(0.0, f64::max);
    let left = PAD + cpu_w + 6.0;
    let title = format!("core-to-core latency ({unit}) — {}", m.source);
    let top = 32.0 + 14.0;
    let bar_h = side.clamp(120.0, 300.0);
    let legend_values: Vec<f64> = if uniform || vals.is_empty() {
        vals.first().copied().into_iter().collect()
    } else {
        vec![hi, (hi * lo).sqrt(), lo]
    };
    let level_labels: Vec<String> = inf
        .levels
        .iter()
        .map(|l| format!("{} ({})", l.name, label(l.latency)))
        .collect();
    let legend_text_w = legend_values
        .iter()
        .map(|v| text_w(&label(*v), CHAR_W))
        .chain(level_labels.iter().map(|l| text_w(l, CHAR_W)))
        .fold(0.0, f64::max);
    let lx = left + side + 20.0;
    let w = (lx + 16.0 + 4.0 + legend_text_w + PAD).max(2.0 * PAD + text_w(&title, TITLE_CHAR_W));
    let levels_top = top + bar_h + 24.0;
    let h = (top + side).max(levels_top + 16.0 * level_labels.len() as f64) + PAD;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" font-family="sans-serif" font-size="10">"#
    );
    let _ = writeln!(s, r#"<title>{}</title>"#, xml(&title));
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{PAD}" y="20" font-size="13">{}</text>"#,
        xml(&title)
    );
    // Per-cell tooltips only while the file stays small (n² cells).
    let tooltips = n <= 64;
    for (r, &i) in ord.iter().enumerate() {
        for (c, &j) in ord.iter().enumerate() {
            let v = m.get(i, j);
            let fill = if i == j {
                "#dddddd".to_string()
            } else {
                color(t(v))
            };
            let _ = write!(
                s,
                r#"<rect class="cell" shape-rendering="crispEdges" x="{:.2}" y="{:.2}" width="{cell:.2}" height="{cell:.2}" fill="{fill}""#,
                left + c as f64 * cell,
                top + r as f64 * cell,
            );
            if tooltips {
                let _ = writeln!(
                    s,
                    r#"><title>CPU {} ↔ CPU {}: {}</title></rect>"#,
                    m.cpus[i],
                    m.cpus[j],
                    label(v)
                );
            } else {
                s.push_str("/>\n");
            }
        }
    }
    // Axis labels: every CPU when they fit, else every k-th (columns need the label's width,
    // rows its height).
    let every_row = ((12.0 / cell).ceil() as usize).max(1);
    let every_col = (((cpu_w + 4.0) / cell).ceil() as usize).max(1);
    for (r, &i) in ord.iter().enumerate() {
        let mid = (r as f64 + 0.5) * cell;
        if r % every_row == 0 {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                left - 3.0,
                top + mid + 3.5,
                m.cpus[i]
            );
        }
        if r % every_col == 0 {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                left + mid,
                top - 4.0,
                m.cpus[i]
            );
        }
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
                r#"<rect x="{x:.2}" y="{y:.2}" width="{d:.2}" height="{d:.2}" fill="none" stroke="{}" stroke-width="{}"><title>{}</title></rect>"#,
                outline_color(l.role),
                if l.role == Role::Smt { 1 } else { 2 },
                l.role.name(),
                x = left + a as f64 * cell,
                y = top + a as f64 * cell,
                d = rows.len() as f64 * cell
            );
        }
    }
    // Colour bar: lo at the bottom, hi at the top, labelled at both ends and the geometric
    // middle (the middle of a log scale); a single swatch when there is one value.
    if uniform {
        if let Some(v) = legend_values.first() {
            let _ = writeln!(
                s,
                r#"<rect class="legend" x="{lx:.1}" y="{top:.1}" width="16" height="16" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                color(0.5),
                lx + 20.0,
                top + 11.5,
                xml(&label(*v))
            );
        }
    } else {
        let steps = 24;
        let sh = bar_h / steps as f64;
        for k in 0..steps {
            // Swatch k spans [k, k+1)/steps of the scale; its colour is the scale at its centre,
            // except the ends, which show exactly the colours of lo and hi.
            let f = if k == 0 {
                0.0
            } else if k + 1 == steps {
                1.0
            } else {
                (k as f64 + 0.5) / steps as f64
            };
            let _ = writeln!(
                s,
                r#"<rect class="legend" x="{lx:.1}" y="{:.2}" width="16" height="{:.2}" fill="{}"/>"#,
                top + bar_h - (k + 1) as f64 * sh,
                sh + 0.05,
                color(f)
            );
        }
        for v in &legend_values {
            let y = top + bar_h * (1.0 - t(*v));
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="black"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                lx + 16.0,
                lx + 19.0,
                lx + 20.0,
                (y + 3.5).clamp(top + 8.0, top + bar_h + 3.5),
                xml(&label(*v))
            );
        }
    }
    let mut y = levels_top;
    for (l, text) in inf.levels.iter().zip(&level_labels) {
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="16" height="10" fill="none" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{y:.1}">{}</text>"#,
            y - 9.0,
            outline_color(l.role),
            lx + 20.0,
            xml(text),
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

    fn matrix(n: usize, f: impl Fn(usize, usize) -> f64, source: &str) -> LatencyMatrix {
        LatencyMatrix {
            cpus: (0..n as u32).collect(),
            values: (0..n)
                .map(|i| (0..n).map(|j| if i == j { 0.0 } else { f(i, j) }).collect())
                .collect(),
            unit: Unit::Nanoseconds,
            ghz: None,
            source: source.into(),
        }
    }

    /// (value from the tooltip, fill) of every off-diagonal cell.
    fn cells(svg: &str) -> Vec<(f64, String)> {
        svg.lines()
            .filter(|l| l.starts_with(r#"<rect class="cell" "#) && !l.contains("#dddddd"))
            .map(|l| {
                let fill = l.split("fill=\"").nth(1).unwrap()[..7].to_string();
                let v = l.split(": ").nth(1).unwrap().split(' ').next().unwrap();
                (v.parse().unwrap(), fill)
            })
            .collect()
    }

    fn legend_fills(svg: &str) -> Vec<String> {
        svg.lines()
            .filter(|l| l.starts_with(r#"<rect class="legend""#))
            .map(|l| l.split("fill=\"").nth(1).unwrap()[..7].to_string())
            .collect()
    }

    /// The numeric attribute `name` of one SVG element's line.
    fn attr(line: &str, name: &str) -> f64 {
        line.split(&format!(" {name}=\""))
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    fn size(svg: &str) -> (f64, f64) {
        let first = svg.lines().next().unwrap();
        (attr(first, "width"), attr(first, "height"))
    }

    #[test]
    fn draws_cells_and_outlines() {
        let m = matrix(4, |i, j| if i / 2 == j / 2 { 5.0 } else { 30.0 }, "a<b");
        let inf = infer(&m, &Hints::default()).unwrap();
        let svg = render(&m, &inf);
        assert_eq!(svg.matches("<title>CPU ").count(), 16);
        assert_eq!(svg.matches("<title>SMT (core)</title>").count(), 2);
        assert!(svg.contains("a&lt;b"));
        assert!(svg.trim_end().ends_with("</svg>"));
        // The smallest latency has the bottom colour of the bar, the largest the top one.
        let legend = legend_fills(&svg);
        for (v, fill) in cells(&svg) {
            let want = if v == 5.0 {
                &legend[0]
            } else {
                &legend[legend.len() - 1]
            };
            assert_eq!(&fill, want, "cell of {v} ns");
        }
    }

    #[test]
    fn one_value_gets_one_colour_and_one_label_inside_the_canvas() {
        // Two CPUs: the matrix has one value. It used to be drawn in the bottom colour of a
        // 200 px bar that ran past a 170 px canvas while the bar was labelled with the value.
        let m = matrix(2, |_, _| 93.1, "measured on this machine");
        let inf = infer(&m, &Hints::default()).unwrap();
        let svg = render(&m, &inf);
        let legend = legend_fills(&svg);
        assert_eq!(legend.len(), 1);
        assert!(cells(&svg)
            .iter()
            .all(|(v, f)| *v == 93.1 && *f == legend[0]));
        assert!(svg.contains(">93.1 ns</text>"));
        let (w, h) = size(&svg);
        for l in svg.lines().filter(|l| l.starts_with("<rect class=")) {
            let num = |a: &str| attr(l, a);
            assert!(
                num("x") + num("width") <= w && num("y") + num("height") <= h,
                "{l}"
            );
        }
        // The title fits: its estimated width is inside the canvas.
        assert!(
            w >= 2.0 * PAD
                + text_w(
                    "core-to-core latency (ns) — measured on this machine",
                    TITLE_CHAR_W
                )
        );
    }

    #[test]
    fn labels_of_256_cpus_do_not_overlap() {
        let m = matrix(
            256,
            |i, j| if i / 32 == j / 32 { 40.0 } else { 120.0 },
            "synthetic",
        );
        let inf = infer(&m, &Hints::default()).unwrap();
        let svg = render(&m, &inf);
        let xs: Vec<f64> = svg
            .lines()
            .filter(|l| l.contains(r#"text-anchor="middle""#))
            .map(|l| attr(l, "x"))
            .collect();
        assert!(xs.len() > 8);
        // Column labels ("255": 3 digits) must be at least their width apart.
        assert!(xs.windows(2).all(|p| p[1] - p[0] >= 3.0 * CHAR_W), "{xs:?}");
    }
}
