//! The looks as a picture: one row per thread over time. In each interval between two looks
//! the row is coloured by the CPU the thread ran on (grey: it did not run), as solid as the
//! share of the interval it ran, with a red strip at the bottom as tall as the share it
//! waited for a CPU. The legend names every colour; the axis is in seconds.

use crate::sample::Snapshot;
use autopin_topology::view::svg::esc;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Looks kept for the picture: beyond this many, every other look is dropped (the picture
/// is drawn from fewer, longer intervals; the table's figures are not affected).
pub const MAX_LOOKS: usize = 2000;

/// Thins `looks` to at most [`MAX_LOOKS`], keeping the first and the last.
pub fn thin(looks: &mut Vec<Snapshot>) {
    while looks.len() > MAX_LOOKS {
        let last = looks.pop();
        let mut i = 0;
        looks.retain(|_| {
            i += 1;
            i % 2 == 1
        });
        looks.extend(last);
    }
}

const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
];

fn colour(cpu: u32) -> &'static str {
    PALETTE[cpu as usize % PALETTE.len()]
}

/// A thread that did not run in an interval.
const NOT_RUNNING: &str = "#d0d0d0";
/// The strip for time spent waiting for a CPU.
const WAITING: &str = "#d62728";

/// The picture of `looks` (in time order); `title` heads it.
pub fn render(looks: &[Snapshot], title: &str) -> String {
    let (left, right, top, row, gap) = (150.0, 20.0, 40.0, 18.0, 6.0);
    let width = 960.0;
    let plot = width - left - right;
    let mut threads: BTreeMap<i32, String> = BTreeMap::new();
    for l in looks {
        for t in &l.threads {
            threads.entry(t.tid).or_insert_with(|| t.name.clone());
        }
    }
    let rows: Vec<i32> = threads.keys().copied().collect();
    let t0 = looks.first().map_or(0.0, |l| l.t);
    let t1 = looks.last().map_or(1.0, |l| l.t).max(t0 + 1e-3);
    let x = |t: f64| left + plot * (t - t0) / (t1 - t0);
    let body = top + rows.len() as f64 * (row + gap);
    let mut cpus_seen = std::collections::BTreeSet::new();
    let mut s = String::new();
    for (a, b) in looks.iter().zip(looks.iter().skip(1)) {
        let dt = (b.t - a.t).max(1e-9);
        let before: BTreeMap<i32, (u64, u64)> = a
            .threads
            .iter()
            .map(|t| (t.tid, (t.cpu_ns, t.wait_ns)))
            .collect();
        for t in &b.threads {
            let Some(&(c0, w0)) = before.get(&t.tid) else {
                continue;
            };
            let Some(r) = rows.iter().position(|x| *x == t.tid) else {
                continue;
            };
            let ran = (t.cpu_ns.saturating_sub(c0) as f64 * 1e-9 / dt).min(1.0);
            let waited = (t.wait_ns.saturating_sub(w0) as f64 * 1e-9 / dt).min(1.0);
            let y = top + r as f64 * (row + gap);
            let (fill, opacity) = if ran > 0.0 {
                cpus_seen.insert(t.cpu);
                (colour(t.cpu), 0.25 + 0.75 * ran)
            } else {
                (NOT_RUNNING, 1.0)
            };
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.2}" height="{row}" fill="{fill}" fill-opacity="{opacity:.2}"><title>{:.2}–{:.2} s: CPU {}, ran {:.0}%, waited {:.0}%</title></rect>"#,
                x(a.t),
                (x(b.t) - x(a.t)).max(0.3),
                a.t,
                b.t,
                t.cpu,
                100.0 * ran,
                100.0 * waited
            );
            if waited > 0.0 {
                let h = row * waited;
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.2}" height="{h:.1}" fill="{WAITING}"/>"#,
                    x(a.t),
                    y + row - h,
                    (x(b.t) - x(a.t)).max(0.3)
                );
            }
        }
    }
    let legend_y = body + 30.0;
    let height = legend_y + 40.0;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">
<text x="{left}" y="20" font-size="14">{}</text>
"#,
        esc(title)
    );
    for (r, tid) in rows.iter().enumerate() {
        let y = top + r as f64 * (row + gap) + row * 0.75;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{y:.1}" text-anchor="end">{tid} {}</text>"#,
            left - 6.0,
            esc(&threads[tid])
        );
    }
    out.push_str(&s);
    let span = t1 - t0;
    // Seconds along the bottom, on round values inside the time shown.
    let ticks: Vec<f64> = autopin_human::ticks(0.0, span, 8)
        .into_iter()
        .filter(|t| *t >= 0.0 && *t <= span + 1e-9)
        .collect();
    for (t, label) in ticks.iter().zip(autopin_human::tick_labels(&ticks)) {
        let xx = x(t0 + t);
        let _ = writeln!(
            out,
            r##"<line x1="{xx:.1}" y1="{:.1}" x2="{xx:.1}" y2="{:.1}" stroke="#888"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            body,
            body + 5.0,
            body + 18.0,
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">s</text>"#,
        width - right,
        body + 18.0
    );
    // The legend: a swatch and what it means, left to right.
    let mut lx = left;
    let mut swatch = |out: &mut String, fill: &str, height: f64, text: &str, room: f64| {
        let _ = writeln!(
            out,
            r#"<rect x="{lx:.1}" y="{:.1}" width="14" height="{height}" fill="{fill}"/><text x="{:.1}" y="{legend_y:.1}">{text}</text>"#,
            legend_y - height + 3.0,
            lx + 18.0,
        );
        lx += room;
    };
    for cpu in &cpus_seen {
        swatch(&mut out, colour(*cpu), 14.0, &format!("CPU {cpu}"), 70.0);
    }
    swatch(&mut out, NOT_RUNNING, 14.0, "not running", 100.0);
    swatch(
        &mut out,
        WAITING,
        7.0,
        "waiting for a CPU (strip height = share of the time); colour strength = share running",
        0.0,
    );
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::ThreadSample;

    fn look(t: f64, threads: &[(i32, u32, u64, u64)]) -> Snapshot {
        Snapshot {
            t,
            threads: threads
                .iter()
                .map(|&(tid, cpu, ran_ms, wait_ms)| ThreadSample {
                    tid,
                    name: format!("w{tid}"),
                    cpu_ns: ran_ms * 1_000_000,
                    wait_ns: wait_ms * 1_000_000,
                    cpu,
                    migrations: Some(0),
                    voluntary_switches: 0,
                    involuntary_switches: 0,
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn rows_colours_waiting_and_legend() {
        let looks = vec![
            look(0.0, &[(1, 0, 0, 0), (2, 1, 0, 0)]),
            look(1.0, &[(1, 0, 500, 500), (2, 1, 0, 0)]),
            look(2.0, &[(1, 0, 1000, 1000), (2, 1, 1000, 0)]),
        ];
        let svg = render(&looks, "two threads");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains(">1 w1</text>") && svg.contains(">2 w2</text>"));
        // Thread 1 ran half of each second on CPU 0 and waited the other half.
        assert_eq!(
            svg.matches("CPU 0, ran 50%, waited 50%").count(),
            2,
            "{svg}"
        );
        assert_eq!(
            svg.matches(r##"fill="#d62728""##).count(),
            3,
            "two strips and the legend"
        );
        // Thread 2 did not run in the first second, then ran all of the second.
        assert!(svg.contains("CPU 1, ran 0%") && svg.contains("CPU 1, ran 100%"));
        assert!(svg.contains(">CPU 0</text>") && svg.contains(">CPU 1</text>"));
        assert!(svg.contains(">not running</text>"));
    }

    #[test]
    fn thinning_keeps_the_ends() {
        let mut looks: Vec<Snapshot> = (0..5000).map(|i| look(i as f64, &[])).collect();
        thin(&mut looks);
        assert!(
            looks.len() <= MAX_LOOKS && looks.len() > MAX_LOOKS / 2,
            "{}",
            looks.len()
        );
        assert_eq!(looks.first().unwrap().t, 0.0);
        assert_eq!(looks.last().unwrap().t, 4999.0);
    }
}
