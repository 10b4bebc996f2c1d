//! The whole screen as styled lines for a width and a height: title, the machine's map,
//! the flags, the table, the key line (or the search being typed, or the help page). The
//! terminal draws these lines as they are; the batch text output is the same without a
//! height limit.

use crate::frame::Frame;
use crate::map::{self, clip, Form, Line, Span, Style};
use crate::shape::Shape;
use crate::table;
use crate::ui::{Ui, HELP};
use crate::view::Row;

/// What the screen says beyond the frame.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Seconds between refreshes.
    pub delay: f64,
    /// Where the machine came from when not this host (a dump's path, a synthetic spec).
    pub machine_note: Option<String>,
    /// A passing message (the last `stat` run, an error).
    pub message: Option<String>,
}

fn line(text: impl Into<String>, style: Style) -> Line {
    vec![Span {
        text: text.into(),
        style,
    }]
}

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

/// The title: time, refresh, machine, the whole machine's shares, the filter.
pub fn title(f: &Frame, shape: &Shape, ui: &Ui, ctx: &Context, width: usize) -> Line {
    let (u, s, st, i) = f.totals();
    let mut t = format!(
        "autopin top {:.0}s every {}s  {}  us {} sy {} st {} id {}",
        f.t,
        autopin_human::number(ctx.delay),
        shape.summary(),
        pct(u),
        pct(s),
        pct(st),
        pct(i)
    );
    let filter = ui.view.filter.describe();
    if !filter.is_empty() {
        t += &format!("  [{filter}]");
    }
    if let Some(n) = &ctx.machine_note {
        t += &format!("  ({n})");
    }
    line(clip(&t, width), Style::Label)
}

/// The flags as lines, `!` before each.
fn flag_lines(f: &Frame, width: usize, max: usize) -> Vec<Line> {
    let mut out: Vec<Line> = f
        .flags
        .iter()
        .take(max)
        .map(|x| line(clip(&format!("! {}", x.text), width), Style::Flag))
        .collect();
    if f.flags.len() > max && max > 0 {
        let more = f.flags.len() - max + 1;
        out.pop();
        out.push(line(
            clip(
                &format!("! ... and {more} more flag(s) (autopin top -b shows all)"),
                width,
            ),
            Style::Flag,
        ));
    }
    out
}

/// The CPUs to highlight on the map: the selected thread's, or the selected process's.
fn selected_cpus(f: &Frame, ui: &Ui) -> Vec<u32> {
    let Some((pid, tid)) = ui.selected else {
        return Vec::new();
    };
    let Some(p) = f.process(pid) else {
        return Vec::new();
    };
    match tid {
        Some(tid) => p
            .threads
            .iter()
            .filter(|t| t.tid == tid)
            .map(|t| t.cpu)
            .collect(),
        None => p.on.iter().collect(),
    }
}

/// The key line, or what the selection is about (its flags' and verdicts' text, its pages).
fn footer(f: &Frame, ui: &Ui, ctx: &Context, width: usize) -> Line {
    if let Some(s) = &ui.search {
        return line(
            clip(
                &format!("search (PID, name or user; Enter keeps, Esc clears): {s}_"),
                width,
            ),
            Style::Label,
        );
    }
    if let Some(m) = &ctx.message {
        return line(clip(m, width), Style::Label);
    }
    let keys = "q quit  ? help  ↑↓ select  Enter threads  <> sort  / search  s stat";
    let Some(p) = ui.selected_pid().and_then(|pid| f.process(pid)) else {
        return line(clip(keys, width), Style::Dim);
    };
    let about = match &p.pages {
        crate::look::Pages::Unreadable(why) => {
            format!("PID {}: pages per node unreadable: {why}", p.pid)
        }
        _ => match p.verdicts.first() {
            Some(v) => format!("PID {}: {} — {}", p.pid, v.text, v.suggestion),
            None => return line(clip(keys, width), Style::Dim),
        },
    };
    line(clip(&about, width), Style::Label)
}

fn help(width: usize, height: usize) -> Vec<Line> {
    let mut out = vec![line("autopin top: keys (any key returns)", Style::Label)];
    let w = HELP.iter().map(|h| h.0.chars().count()).max().unwrap_or(0);
    for (k, what) in HELP {
        out.push(line(
            clip(&format!("  {k:<w$}  {what}"), width),
            Style::Plain,
        ));
    }
    out.push(line("", Style::Plain));
    out.push(line("map:", Style::Label));
    out.push(line(
        clip(&format!("  {}", map::LEGEND), width),
        Style::Plain,
    ));
    out.push(line("FLAGS column:", Style::Label));
    for chunk in table::FLAG_LEGEND.split("  ") {
        out.push(line(clip(&format!("  {chunk}"), width), Style::Plain));
    }
    out.truncate(height);
    out
}

/// The table's lines: the heading, then `page` rows from the ui's first row, the selected
/// one marked.
fn table_lines(
    f: &Frame,
    shape: &Shape,
    ui: &Ui,
    rows: &[Row],
    width: usize,
    page: usize,
) -> Vec<Line> {
    let cols = table::layout(width);
    let mut out = vec![line(
        clip(&table::heading(&cols, &ui.view.sort), width),
        Style::Label,
    )];
    let cursor = ui.selected.map(|_| ui.cursor(f, rows));
    for i in ui.top..(ui.top + page).min(rows.len()) {
        let text = table::row_line(f, &ui.view, rows, i, shape, &cols);
        let flagged = match rows[i] {
            Row::Process(p) => !f.processes[p].flags.is_empty(),
            Row::Thread(p, t) => !f.processes[p].threads[t].flags.is_empty(),
        };
        let style = if cursor == Some(i) {
            Style::Selected
        } else if flagged {
            Style::Flag
        } else {
            Style::Plain
        };
        out.push(line(clip(&text, width), style));
    }
    if rows.is_empty() {
        out.push(line(
            if ui.view.filter.describe().is_empty() {
                "no process to show".to_string()
            } else {
                format!("no process matches {}", ui.view.filter.describe())
            },
            Style::Dim,
        ));
    }
    out
}

/// The screen for `width` × `height`; `ui.top` is moved so that the selection shows.
pub fn render(
    f: &Frame,
    shape: &Shape,
    ui: &mut Ui,
    ctx: &Context,
    width: usize,
    height: usize,
) -> Vec<Line> {
    if ui.help {
        return help(width, height);
    }
    let rows = ui.view.rows(f);
    // Title, table heading, key line; the table keeps at least a few rows.
    let fixed = 3;
    let avail = height.saturating_sub(fixed);
    let table_min = rows.len().clamp(1, 5).min(avail);
    let flags_n = f
        .flags
        .len()
        .min(3)
        .min(avail.saturating_sub(table_min + 1) / 2);
    let map_room = avail
        .saturating_sub(table_min + flags_n)
        .min((height / 2).max(2));
    let selected = selected_cpus(f, ui);
    let m = map::draw(f, shape, width, map_room, &selected);
    let mut out = vec![title(f, shape, ui, ctx, width)];
    out.extend(m.lines.iter().cloned());
    let spare = avail.saturating_sub(m.lines.len() + flags_n + rows.len());
    if m.form != Form::Compact && spare >= 1 {
        out.push(line(clip(map::LEGEND, width), Style::Dim));
    }
    out.extend(flag_lines(f, width, flags_n));
    let page = height.saturating_sub(out.len() + 2);
    let cursor = ui.cursor(f, &rows);
    if ui.selected.is_some() {
        ui.scroll(cursor, page);
    }
    ui.top = ui.top.min(rows.len().saturating_sub(page.max(1)));
    out.extend(table_lines(f, shape, ui, &rows, width, page));
    out.truncate(height.saturating_sub(1));
    while out.len() < height.saturating_sub(1) {
        out.push(Vec::new());
    }
    out.push(footer(f, ui, ctx, width));
    out.truncate(height);
    out
}

/// The most lines the batch output's map takes: the richest form that fits them.
pub const BATCH_MAP_LINES: usize = 16;

/// The batch output's text of one refresh: the whole screen at `width`, every row and every
/// flag (wrapped), no height limit.
pub fn text(f: &Frame, shape: &Shape, ui: &Ui, ctx: &Context, width: usize) -> String {
    let mut lines: Vec<String> = vec![map::plain(&title(f, shape, ui, ctx, width))];
    let m = map::draw(f, shape, width, BATCH_MAP_LINES, &[]);
    lines.extend(m.lines.iter().map(map::plain));
    lines.push(clip(map::LEGEND, width));
    for x in &f.flags {
        lines.push(autopin_human::wrap(&format!("! {}", x.text), width, "  "));
    }
    let rows = ui.view.rows(f);
    let all = Ui {
        top: 0,
        selected: None,
        ..ui.clone()
    };
    lines.extend(
        table_lines(f, shape, &all, &rows, width, rows.len())
            .iter()
            .map(map::plain),
    );
    let mut out = String::new();
    for l in lines {
        for part in l.lines() {
            out.push_str(part.trim_end());
            out.push('\n');
        }
    }
    out
}
