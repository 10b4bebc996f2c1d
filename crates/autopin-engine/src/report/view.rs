//! Views of a run report: the summary a person reads (`autopin report FILE`) and the SVG
//! timeline (`autopin report FILE --svg`). Text out; the CLI writes it.

use super::{DecisionRecord, Report, Start};
use autopin_topology::view::svg::esc;
use std::fmt::Write;

// Over 100 lines on purpose: the summary is written in the order a person reads it, one
// short section after another on the same text; cut into functions, the order would be
// spread over them.
/// The report for a person: command, objective, every candidate's probes (a mean per
/// program phase), the decisions, re-searches, costs and notes.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "command:   {}", r.command.join(" "));
    // The name often carries its unit already ("heartbeat [beats/s] (more is better)").
    if r.objective.name.contains(&r.objective.unit) {
        let _ = writeln!(s, "objective: {}", r.objective.name);
    } else {
        let _ = writeln!(s, "objective: {} ({})", r.objective.name, r.objective.unit);
    }
    // How the objective is measured, in words: "none" would read as "nothing measured".
    let measured = match r.counting_mode.as_str() {
        "none" => "no perf counters (the program's own progress is read)".to_string(),
        "per-thread" => "perf counters on each thread".to_string(),
        "" => "what the objective reads".to_string(),
        m => m.to_string(),
    };
    let _ = writeln!(s, "strategy:  {}; measured with {measured}", r.strategy);
    let _ = writeln!(
        s,
        "wall time: {:.1} s, searching {:.1} s (cost: {:.2} s of the decided pinning's work), {}",
        r.wall_time,
        r.search_time,
        r.search_cost,
        match r.exit_status {
            Some(c) => format!("exit status {c}"),
            None => "no exit status (still running, or killed by a signal)".to_string(),
        }
    );
    let _ = writeln!(s, "candidates ({}):", r.candidates.len());
    // Rates of different program phases are never mixed: one mean per phase.
    let mut phases: Vec<Option<String>> = Vec::new();
    for p in &r.probes {
        if !phases.contains(&p.phase) {
            phases.push(p.phase.clone());
        }
    }
    if phases.is_empty() {
        phases.push(None);
    }
    for c in &r.candidates {
        let mut parts = Vec::new();
        let mut total = 0;
        for ph in &phases {
            let probes: Vec<f64> = r
                .probes
                .iter()
                .filter(|p| p.candidate == c.index && &p.phase == ph)
                .filter(|p| ph.is_some() || p.search == 0)
                .map(|p| p.rate)
                .collect();
            total += probes.len();
            let mean = if probes.is_empty() {
                String::from("-")
            } else {
                autopin_human::number(probes.iter().sum::<f64>() / probes.len() as f64)
            };
            parts.push(match ph {
                Some(name) => format!("{name}: {mean} ({})", probes.len()),
                None => mean,
            });
        }
        let _ = writeln!(
            s,
            "  [{}] {:<40} probes {:>2}  mean rate {}",
            c.index,
            c.label,
            total,
            parts.join(", ")
        );
    }
    // The last decision for each program phase, when the program announced phases.
    let mut per_phase: Vec<&DecisionRecord> = Vec::new();
    for d in r.decisions.iter().filter(|d| d.phase.is_some()) {
        match per_phase.iter_mut().find(|x| x.phase == d.phase) {
            Some(x) => *x = d,
            None => per_phase.push(d),
        }
    }
    for d in &per_phase {
        let _ = writeln!(
            s,
            "phase {:<10} → {}{}",
            d.phase.clone().unwrap_or_default(),
            d.candidate,
            d.margin_text()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        );
    }
    match &r.decision {
        Some(d) => {
            let _ = writeln!(
                s,
                "decision:  {} at {:.1} s ({}){}",
                d.candidate,
                d.at,
                d.reason,
                d.margin_text()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            );
        }
        None => {
            let _ = writeln!(
                s,
                "decision:  none ({})",
                r.incomplete_reason.clone().unwrap_or_default()
            );
        }
    }
    // Whether the objective ranked the probes as the program's own progress did.
    if let Some(c) = &r.objective_check {
        let _ = writeln!(
            s,
            "objective check: against the program's {} over {} probes: {}",
            c.progress, c.tracking.probes, c.tracking.verdict
        );
    }
    if r.searches.len() > 1 {
        for x in &r.searches[1..] {
            let _ = writeln!(
                s,
                "re-search {} at {:.1} s: {}",
                x.index, x.start, x.trigger
            );
        }
    }
    if let Some(p) = r.perturbation {
        let _ = writeln!(
            s,
            "perturbation: ~{:.2}% ({})",
            100.0 * p,
            r.perturbation_note.clone().unwrap_or_default()
        );
    }
    if let Some(c) = r.monitor_cpu_share {
        let _ = writeln!(s, "autopin CPU: {:.2}% of wall time", 100.0 * c);
    }
    for m in &r.memory_migrations {
        let _ = writeln!(s, "memory: {}", m.line());
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

const COLOURS: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

// Over 100 lines on purpose: one drawing, top to bottom; the scales and positions set at
// the top are used by every part after them (axes, bars, phases, legend).
/// Rate over time as bars coloured by the applied candidate, with a legend.
pub fn svg(r: &Report) -> String {
    let (w, h, left, top, bottom) = (900.0, 430.0, 70.0, 40.0, 60.0);
    // The legend: every candidate's colour, then the start-up's grey and the warm-ups' pale.
    let legend_h = 16.0 * (r.candidates.len() + 2) as f64;
    let total_h = h + legend_h + 20.0;
    // Axes end on round, labelled values (autopin_human::ticks).
    let time_ticks = autopin_human::ticks(
        0.0,
        r.timeline.iter().map(|p| p.t).fold(0.0, f64::max).max(1e-9),
        5,
    );
    let tmax = time_ticks.last().copied().unwrap_or(1.0).max(1e-9);
    let rate_ticks = autopin_human::ticks(
        0.0,
        r.timeline.iter().map(|p| p.rate).fold(0.0, f64::max),
        4,
    );
    let rmax = rate_ticks.last().copied().unwrap_or(1.0).max(1e-300);
    let pw = w - left - 20.0;
    let ph = h - top - bottom;
    // Programs with phases can differ by orders of magnitude between them (a barrier phase
    // at millions of beats/s, a memory sweep at hundreds): then a linear axis hides every
    // phase but the fastest, so the axis turns logarithmic.
    let rmin = r
        .timeline
        .iter()
        .map(|p| p.rate)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let log = rmin.is_finite() && rmax / rmin > 100.0;
    let (lo, hi) = (rmin.max(1e-300).log10().floor(), rmax.log10().ceil());
    let height = |rate: f64| -> f64 {
        if !log {
            ph * rate / rmax
        } else if rate <= 0.0 {
            0.0
        } else {
            ph * ((rate.log10() - lo) / (hi - lo).max(1.0)).clamp(0.0, 1.0)
        }
    };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{total_h}\" viewBox=\"0 0 {w} {total_h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    // 12 px sans-serif averages under 7 px a character: shorten what would not fit.
    let fit = |t: String, px: f64| -> String {
        let max = (px / 7.0) as usize;
        if t.chars().count() <= max {
            t
        } else {
            t.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
        }
    };
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"20\">{}</text>",
        esc(&fit(
            format!("{} — {}", r.command.join(" "), r.objective.name),
            w - 20.0
        ))
    );
    let mut prev_t = 0.0;
    for p in &r.timeline {
        let x = left + pw * prev_t / tmax;
        let bw = (pw * (p.t - prev_t) / tmax).max(0.5);
        let bh = height(p.rate);
        let colour = p
            .candidate
            .map_or("#cccccc", |c| COLOURS[c % COLOURS.len()]);
        let opacity = if p.state == "warmup" { 0.35 } else { 1.0 };
        let _ = writeln!(
            s,
            "<rect x=\"{x:.2}\" y=\"{:.2}\" width=\"{bw:.2}\" height=\"{bh:.2}\" fill=\"{colour}\" fill-opacity=\"{opacity}\"/>",
            top + ph - bh
        );
        prev_t = p.t;
    }
    for (i, d) in r.decisions.iter().enumerate() {
        let x = left + pw * d.at / tmax;
        // Decisions can come close together (one per phase): stagger their labels.
        let label_y = top + 12.0 + 14.0 * (i % 4) as f64;
        let _ = writeln!(s, "<line x1=\"{x:.2}\" y1=\"{top}\" x2=\"{x:.2}\" y2=\"{}\" stroke=\"black\" stroke-dasharray=\"4 3\"/>", top + ph);
        let text = format!(
            "decided {}{}",
            d.candidate,
            d.phase
                .as_ref()
                .map(|p| format!(" for {p}"))
                .unwrap_or_default()
        );
        // Past the middle, the label goes left of its line so it stays on the canvas.
        let (lx, anchor) = if x > left + pw / 2.0 {
            (x - 3.0, "end")
        } else {
            (x + 3.0, "start")
        };
        let _ = writeln!(
            s,
            "<text x=\"{lx:.2}\" y=\"{label_y}\" text-anchor=\"{anchor}\">{}</text>",
            esc(&fit(text, pw / 2.0))
        );
    }
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        top + ph,
        left + pw,
        top + ph
    );
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"black\"/>",
        top + ph
    );
    let rate_labels: Vec<(f64, String)> = if log {
        let decades: Vec<f64> = (lo as i32..=hi as i32).map(|k| 10f64.powi(k)).collect();
        let step = decades.len().div_ceil(6).max(1);
        decades
            .iter()
            .step_by(step)
            .map(|v| (*v, autopin_human::si(*v)))
            .collect()
    } else {
        rate_ticks
            .iter()
            .copied()
            .zip(autopin_human::tick_labels(&rate_ticks))
            .collect()
    };
    for (v, label) in rate_labels {
        let y = top + ph - height(v);
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            left - 4.0,
            y + 4.0
        );
    }
    for (t, label) in time_ticks
        .iter()
        .zip(autopin_human::tick_labels(&time_ticks))
    {
        let x = left + pw * t / tmax;
        let _ = writeln!(
            s,
            "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label} s</text>",
            top + ph + 16.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">time (s); bar height = {}{}</text>",
        left + pw / 2.0,
        top + ph + 34.0,
        esc(&r.objective.unit),
        if log { " (log scale)" } else { "" }
    );
    for (i, c) in r.candidates.iter().enumerate() {
        let y = h + 4.0 + 16.0 * i as f64;
        let _ = writeln!(
            s,
            "<rect x=\"{left}\" y=\"{y}\" width=\"12\" height=\"12\" fill=\"{}\"/>",
            COLOURS[i % COLOURS.len()]
        );
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            left + 18.0,
            y + 10.0,
            esc(&c.label)
        );
    }
    // The grey bars are the time before autopin first moved the threads, when there is
    // any: where the program ran then depends on how it started.
    let grey_text = match r.start {
        Start::Os => "start-up: the program ran where the OS placed it, before the first probe",
        Start::PinnedAtBirth => {
            "start-up: the program ran on the CPUs it was pinned to at birth, before the first probe"
        }
        Start::Attached => "before the first probe: the process ran where it was when autopin attached",
    };
    let grey = r
        .timeline
        .iter()
        .any(|p| p.candidate.is_none())
        .then_some(("#cccccc", 1.0, grey_text));
    let pale = (
        COLOURS[0],
        0.35,
        "pale: a warm-up after a move (the candidate's colour; not part of its rate)",
    );
    let extra: Vec<_> = grey.into_iter().chain([pale]).collect();
    for (k, (colour, opacity, text)) in extra.iter().enumerate() {
        let y = h + 4.0 + 16.0 * (r.candidates.len() + k) as f64;
        let _ = writeln!(
            s,
            "<rect x=\"{left}\" y=\"{y}\" width=\"12\" height=\"12\" fill=\"{colour}\" fill-opacity=\"{opacity}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            left + 18.0,
            y + 10.0,
            esc(text)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{CandidateRecord, TimelinePoint};

    fn report(start: Start, grey: bool) -> Report {
        let point = |t: f64, candidate: Option<usize>| TimelinePoint {
            t,
            rate: 100.0,
            candidate,
            state: "probe".into(),
            phase: None,
        };
        Report {
            start,
            candidates: vec![CandidateRecord {
                index: 0,
                label: "0,1".into(),
                cpus: Some(vec![0, 1]),
                team: None,
            }],
            timeline: [grey.then(|| point(0.1, None)), Some(point(0.2, Some(0)))]
                .into_iter()
                .flatten()
                .collect(),
            ..Report::default()
        }
    }

    #[test]
    fn the_legend_says_where_the_program_ran_before_the_first_probe() {
        let os = svg(&report(Start::Os, true));
        assert!(os.contains("start-up: the program ran where the OS placed it"));
        let born = svg(&report(Start::PinnedAtBirth, true));
        assert!(born.contains("the program ran on the CPUs it was pinned to at birth"));
        assert!(!born.contains("where the OS placed it"));
        let attached = svg(&report(Start::Attached, true));
        assert!(attached.contains("the process ran where it was when autopin attached"));
        assert!(!attached.contains("where the OS placed it"));
        // No grey bar, no grey entry; the warm-ups' pale one stays.
        let none = svg(&report(Start::Os, false));
        assert!(!none.contains("#cccccc"), "{none}");
        assert!(none.contains("pale: a warm-up after a move"));
    }
}
