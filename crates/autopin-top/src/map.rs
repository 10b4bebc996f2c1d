//! The machine drawn as its topology: one block per group of PUs sharing a package, a NUMA
//! node and an L3 (or die), cores side by side, the PUs of a core adjacent. Each PU shows
//! its load (the watched programs' part, the others', steal) and a mark: `!` oversubscribed,
//! `p` a pinned thread waits there, `s` a busy SMT sibling, or the number of runnable
//! threads when two or more. The richest of three forms that fits the space is drawn; where
//! none does, a compact summary says so.

use crate::frame::{CpuLoad, Frame};
use crate::shape::{Group, Shape};

/// How a piece of text is to look; the terminal (or plain text) decides what that means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Dim,
    Label,
    /// The watched programs' load.
    Watched,
    /// Everybody else's load.
    Others,
    Steal,
    /// A problem.
    Flag,
    /// A CPU the selected process or thread is on.
    Selected,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub text: String,
    pub style: Style,
}

pub type Line = Vec<Span>;

/// The width of a line in terminal columns (every glyph here is one column wide).
pub fn line_width(line: &Line) -> usize {
    line.iter().map(|s| s.text.chars().count()).sum()
}

/// A line as plain text.
pub fn plain(line: &Line) -> String {
    line.iter().map(|s| s.text.as_str()).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `12▕██▓▓  ▏!`: number, a bar of 6, a mark.
    Wide,
    /// `12▆!`: number, one level glyph, a mark.
    Narrow,
    /// `▆`: one character a PU (the mark where there is one).
    Tiny,
    /// No drawing: the busiest and the flagged CPUs in a line.
    Compact,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Map {
    pub form: Form,
    pub lines: Vec<Line>,
}

const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

fn span(text: impl Into<String>, style: Style) -> Span {
    Span {
        text: text.into(),
        style,
    }
}

/// The mark of a CPU: a flag's letter, else its runnable threads when two or more.
fn mark(c: Option<&CpuLoad>) -> Option<(char, Style)> {
    let c = c?;
    if c.flags.contains(&"oversubscribed") {
        Some(('!', Style::Flag))
    } else if c.flags.contains(&"pinned_waits") {
        Some(('p', Style::Flag))
    } else if c.flags.contains(&"smt_sibling") {
        Some(('s', Style::Flag))
    } else if c.runnable >= 10 {
        Some(('+', Style::Plain))
    } else if c.runnable >= 2 {
        Some((
            char::from_digit(c.runnable as u32, 10).unwrap_or('+'),
            Style::Plain,
        ))
    } else {
        None
    }
}

/// Whose load dominates a CPU, for its colour.
fn load_style(c: &CpuLoad) -> Style {
    if c.watched >= c.others && c.watched > 0.0 {
        Style::Watched
    } else {
        Style::Others
    }
}

/// One glyph for a CPU's load: `·` idle, `▁`..`█` by eighths, `?` not on this host.
fn level(c: Option<&CpuLoad>) -> (char, Style) {
    match c {
        Some(c) if c.known => {
            let busy = c.busy() + c.steal;
            if busy < 0.05 {
                ('·', Style::Dim)
            } else {
                let i = ((busy * 8.0).ceil() as usize).clamp(1, 8) - 1;
                (LEVELS[i], load_style(c))
            }
        }
        _ => ('?', Style::Dim),
    }
}

/// A bar of `n` cells: watched `█`, others `▓`, steal `░`, the rest blank.
fn bar(c: Option<&CpuLoad>, n: usize) -> Vec<Span> {
    let Some(c) = c.filter(|c| c.known) else {
        return vec![span("?".repeat(n), Style::Dim)];
    };
    let parts = [c.watched, c.others, c.steal];
    // Largest remainder, so the cells add up to the rounded total.
    let total = (parts.iter().sum::<f64>().min(1.0) * n as f64).round() as usize;
    let exact: Vec<f64> = parts.iter().map(|p| p * n as f64).collect();
    let mut cells: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut order: Vec<usize> = (0..3).collect();
    order.sort_by(|a, b| {
        (exact[*b] - exact[*b].floor()).total_cmp(&(exact[*a] - exact[*a].floor()))
    });
    let mut i = 0;
    while cells.iter().sum::<usize>() < total && i < 3 {
        cells[order[i]] += 1;
        i += 1;
    }
    while cells.iter().sum::<usize>() > n {
        let j = (0..3).rev().find(|j| cells[*j] > 0).unwrap_or(0);
        cells[j] -= 1;
    }
    let mut out = Vec::new();
    for ((k, glyph), style) in
        cells
            .iter()
            .zip(['█', '▓', '░'])
            .zip([Style::Watched, Style::Others, Style::Steal])
    {
        if *k > 0 {
            out.push(span(glyph.to_string().repeat(*k), style));
        }
    }
    let used: usize = cells.iter().sum();
    if used < n {
        out.push(span(" ".repeat(n - used), Style::Plain));
    }
    out
}

/// One PU in a form.
fn cell(f: &Frame, cpu: u32, form: Form, digits: usize, selected: &[u32]) -> Vec<Span> {
    let c = f.cpu(cpu);
    let num_style = if selected.contains(&cpu) {
        Style::Selected
    } else {
        Style::Label
    };
    let m = mark(c);
    let mark_span = || match m {
        Some((ch, st)) => span(ch.to_string(), st),
        None => span(" ", Style::Plain),
    };
    match form {
        Form::Wide => {
            let mut v = vec![
                span(format!("{cpu:>digits$}"), num_style),
                span("▕", Style::Dim),
            ];
            v.extend(bar(c, 6));
            v.push(span("▏", Style::Dim));
            v.push(mark_span());
            v
        }
        Form::Narrow => {
            let (g, st) = level(c);
            vec![
                span(format!("{cpu:>digits$}"), num_style),
                span(g.to_string(), st),
                mark_span(),
            ]
        }
        Form::Tiny | Form::Compact => {
            match m.filter(|(ch, _)| !ch.is_ascii_digit() && *ch != '+') {
                Some((ch, st)) => vec![span(ch.to_string(), st)],
                None => {
                    let (g, st) = level(c);
                    let st = if selected.contains(&cpu) {
                        Style::Selected
                    } else {
                        st
                    };
                    vec![span(g.to_string(), st)]
                }
            }
        }
    }
}

fn cell_width(form: Form, digits: usize) -> usize {
    match form {
        Form::Wide => digits + 9,
        Form::Narrow => digits + 2,
        Form::Tiny | Form::Compact => 1,
    }
}

/// A group's lines in `form`, at most `width` wide: its label, then its cores, wrapped onto
/// lines indented past the label.
fn group_lines(
    f: &Frame,
    g: &Group,
    form: Form,
    digits: usize,
    label_w: usize,
    width: usize,
    selected: &[u32],
) -> Option<Vec<Line>> {
    let cw = cell_width(form, digits);
    let gap = usize::from(form != Form::Tiny);
    let widest_core = g.cores.iter().map(Vec::len).max().unwrap_or(1);
    if label_w + widest_core * cw > width {
        return None;
    }
    let mut lines: Vec<Line> = Vec::new();
    let mut line: Line = vec![span(format!("{:<label_w$}", g.label), Style::Label)];
    let mut used = label_w;
    for (i, core) in g.cores.iter().enumerate() {
        let need = core.len().max(usize::from(core.is_empty())) * cw + if i > 0 { gap } else { 0 };
        if i > 0 && used + need > width {
            lines.push(std::mem::take(&mut line));
            line.push(span(" ".repeat(label_w), Style::Plain));
            used = label_w;
        } else if i > 0 && gap > 0 {
            line.push(span(" ", Style::Plain));
            used += 1;
        }
        if core.is_empty() {
            // Between two packages on one line.
            line.push(span(" ", Style::Plain));
            used += 1;
        }
        for &cpu in core {
            line.extend(cell(f, cpu, form, digits, selected));
        }
        used += core.len() * cw;
    }
    lines.push(line);
    Some(lines)
}

/// The groups as `form` draws them. One character a PU leaves the package out of the
/// labels: the packages of one NUMA node (and L3) go on one line, a space between them.
fn groups_for(shape: &Shape, form: Form) -> Vec<Group> {
    if form != Form::Tiny || shape.packages <= 1 {
        return shape.groups.clone();
    }
    let mut out: Vec<Group> = Vec::new();
    for g in &shape.groups {
        let label: Vec<&str> = g
            .label
            .split(' ')
            .filter(|w| !w.is_empty() && !w.starts_with('P'))
            .collect();
        let label = label.join(" ");
        match out.last_mut() {
            Some(last) if last.label == label => {
                // An empty core: a space between packages.
                last.cores.push(Vec::new());
                last.cores.extend(g.cores.iter().cloned());
            }
            _ => out.push(Group {
                label,
                cores: g.cores.clone(),
            }),
        }
    }
    out
}

/// Every group in `form`, blocks of one line side by side where they fit; None when a core
/// does not fit the width at all.
fn draw_form(
    f: &Frame,
    shape: &Shape,
    form: Form,
    width: usize,
    selected: &[u32],
) -> Option<Vec<Line>> {
    let digits = shape
        .core_of
        .keys()
        .last()
        .map_or(1, |c| c.to_string().len());
    let groups = groups_for(shape, form);
    let label_w = groups
        .iter()
        .map(|g| g.label.chars().count())
        .max()
        .unwrap_or(0);
    let label_w = if label_w > 0 { label_w + 1 } else { 0 };
    let mut out: Vec<Line> = Vec::new();
    let mut row: Option<Line> = None;
    for g in &groups {
        let lines = group_lines(f, g, form, digits, label_w, width, selected)?;
        if lines.len() == 1 {
            let block = lines.into_iter().next().expect("one line");
            match row.as_mut() {
                Some(r) if line_width(r) + 2 + line_width(&block) <= width => {
                    r.push(span("  ", Style::Plain));
                    r.extend(block);
                }
                _ => {
                    out.extend(row.take());
                    row = Some(block);
                }
            }
        } else {
            out.extend(row.take());
            out.extend(lines);
        }
    }
    out.extend(row);
    Some(out)
}

/// The map in at most `width` columns and `height` lines; `selected` CPUs are highlighted.
pub fn draw(f: &Frame, shape: &Shape, width: usize, height: usize, selected: &[u32]) -> Map {
    for form in [Form::Wide, Form::Narrow, Form::Tiny] {
        if let Some(lines) = draw_form(f, shape, form, width, selected) {
            if lines.len() <= height && !lines.is_empty() {
                return Map { form, lines };
            }
        }
    }
    Map {
        form: Form::Compact,
        lines: compact(f, shape, width, height),
    }
}

/// The machine too big for the space: what it would need, then the flagged and the busiest
/// CPUs, as many as fit.
fn compact(f: &Frame, shape: &Shape, width: usize, height: usize) -> Vec<Line> {
    let need = draw_form(f, shape, Form::Tiny, width.max(1), &[]).map_or(0, |l| l.len());
    let mut lines = vec![vec![span(
        clip(
            &format!(
                "too small to draw the machine ({}{}): compact view",
                shape.summary(),
                if need > 0 {
                    format!(", needs {need} lines")
                } else {
                    String::new()
                }
            ),
            width,
        ),
        Style::Dim,
    )]];
    if height < 2 {
        lines.truncate(height);
        return lines;
    }
    let mut cpus: Vec<&CpuLoad> = f.cpus.iter().filter(|c| c.known).collect();
    cpus.sort_by(|a, b| {
        (!b.flags.is_empty())
            .cmp(&!a.flags.is_empty())
            .then((b.busy() + b.steal).total_cmp(&(a.busy() + a.steal)))
    });
    let mut line: Line = vec![span("busiest: ", Style::Label)];
    let mut used = 9;
    for c in cpus
        .into_iter()
        .take_while(|c| c.busy() + c.steal >= 0.05 || !c.flags.is_empty())
    {
        let text = format!("{}:{:.0}%", c.cpu, 100.0 * (c.busy() + c.steal));
        let m = mark(Some(c)).filter(|(ch, _)| !ch.is_ascii_digit() && *ch != '+');
        let need = text.len() + usize::from(m.is_some()) + 1;
        if used + need > width {
            break;
        }
        line.push(span(text, load_style(c)));
        if let Some((ch, st)) = m {
            line.push(span(ch.to_string(), st));
        }
        line.push(span(" ", Style::Plain));
        used += need;
    }
    if line.len() == 1 {
        line.push(span("none", Style::Dim));
    }
    lines.push(line);
    lines
}

/// `s` cut to `width` characters (with `…` where cut).
pub fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    if width > 0 {
        out.push('…');
    }
    out
}

/// The legend of the map's glyphs.
pub const LEGEND: &str =
    "█ watched ▓ others ░ steal · idle | ! oversubscribed p pinned waits s SMT busy 2-9 runnable";
