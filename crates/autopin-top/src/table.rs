//! The process and thread table: which columns fit a width, and each row's cells. The
//! terminal view and the plain-text batch output both print these.

use crate::frame::{Frame, ProcessRow, ThreadRow};
use crate::look::Pages;
use crate::map::clip;
use crate::shape::Shape;
use crate::view::{Row, Sort, SortKey, View};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    Pid,
    User,
    Name,
    Cpu,
    Wait,
    On,
    Allowed,
    Migrations,
    Numa,
    Flags,
}

impl Col {
    fn heading(self) -> &'static str {
        match self {
            Col::Pid => "PID",
            Col::User => "USER",
            Col::Name => "NAME",
            Col::Cpu => "CPU%",
            Col::Wait => "WAIT%",
            Col::On => "CPU",
            Col::Allowed => "ALLOWED",
            Col::Migrations => "MIG/s",
            Col::Numa => "NUMA PAGES",
            Col::Flags => "FLAGS",
        }
    }

    fn sort_key(self) -> Option<SortKey> {
        Some(match self {
            Col::Pid => SortKey::Pid,
            Col::User => SortKey::User,
            Col::Name => SortKey::Name,
            Col::Cpu => SortKey::Cpu,
            Col::Wait => SortKey::Wait,
            Col::On => SortKey::On,
            Col::Migrations => SortKey::Migrations,
            Col::Numa => SortKey::Memory,
            Col::Allowed | Col::Flags => return None,
        })
    }

    fn right(self) -> bool {
        matches!(self, Col::Pid | Col::Cpu | Col::Wait | Col::Migrations)
    }

    /// (least, most) width.
    fn widths(self) -> (usize, usize) {
        match self {
            Col::Pid => (7, 7),
            Col::User => (8, 10),
            Col::Name => (9, 18),
            Col::Cpu | Col::Wait => (5, 6),
            Col::On => (4, 9),
            Col::Allowed => (7, 14),
            Col::Migrations => (5, 6),
            Col::Numa => (9, 28),
            Col::Flags => (5, 16),
        }
    }
}

/// The columns in the order drawn.
const ORDER: [Col; 10] = [
    Col::Pid,
    Col::User,
    Col::Name,
    Col::Cpu,
    Col::Wait,
    Col::On,
    Col::Allowed,
    Col::Migrations,
    Col::Numa,
    Col::Flags,
];

/// The ones given up first when the width is short, first to go first.
const DROP: [Col; 5] = [
    Col::User,
    Col::Migrations,
    Col::Numa,
    Col::Allowed,
    Col::Flags,
];

/// The columns and their widths for `width` terminal columns (one space between columns).
pub fn layout(width: usize) -> Vec<(Col, usize)> {
    let mut cols: Vec<Col> = ORDER.to_vec();
    let total = |cols: &[Col]| -> usize {
        cols.iter().map(|c| c.widths().0).sum::<usize>() + cols.len().saturating_sub(1)
    };
    for d in DROP {
        if total(&cols) <= width {
            break;
        }
        cols.retain(|c| *c != d);
    }
    let mut out: Vec<(Col, usize)> = cols.iter().map(|c| (*c, c.widths().0)).collect();
    let mut spare = width.saturating_sub(total(&cols));
    // The room left goes to the columns whose text is longest, in this order.
    for want in [
        Col::Name,
        Col::Numa,
        Col::Flags,
        Col::Allowed,
        Col::On,
        Col::User,
        Col::Cpu,
        Col::Wait,
        Col::Migrations,
    ] {
        if let Some(slot) = out.iter_mut().find(|(c, _)| *c == want) {
            let more = (want.widths().1 - slot.1).min(spare);
            slot.1 += more;
            spare -= more;
        }
    }
    out
}

fn pad(text: &str, w: usize, right: bool) -> String {
    let t = clip(text, w);
    let n = t.chars().count();
    if right {
        format!("{}{t}", " ".repeat(w - n))
    } else {
        format!("{t}{}", " ".repeat(w - n))
    }
}

fn join(cols: &[(Col, usize)], cell: impl Fn(Col) -> String) -> String {
    cols.iter()
        .map(|(c, w)| pad(&cell(*c), *w, c.right()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The heading line; the sort column is marked `▼` (descending) or `▲`.
pub fn heading(cols: &[(Col, usize)], sort: &Sort) -> String {
    join(cols, |c| {
        let h = c.heading();
        if c.sort_key() == Some(sort.key) {
            format!("{h}{}", if sort.descending { "▼" } else { "▲" })
        } else {
            h.to_string()
        }
    })
}

/// A size in 4 KiB pages, short: `512K`, `12M`, `1.5G`.
pub fn pages_size(pages: u64) -> String {
    let kib = pages * 4;
    if kib < 1024 {
        format!("{kib}K")
    } else if kib < 1024 * 1024 {
        format!("{}M", (kib as f64 / 1024.0).round())
    } else {
        let g = kib as f64 / (1024.0 * 1024.0);
        if g < 10.0 {
            format!("{g:.1}G")
        } else {
            format!("{g:.0}G")
        }
    }
}

/// A process's pages per node, short: `0:12M 1:400M`; `no access` where unreadable; empty
/// where not read.
pub fn pages_cell(p: &Pages) -> String {
    match p {
        Pages::NotRead => String::new(),
        Pages::Unreadable(_) => "no access".into(),
        Pages::Read { nodes, .. } if nodes.is_empty() => "-".into(),
        Pages::Read { nodes, .. } => nodes
            .iter()
            .map(|(n, k)| format!("{n}:{}", pages_size(*k)))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// The flags' letters, as the FLAGS column shows them.
pub fn flag_letter(kind: &str) -> char {
    match kind {
        "oversubscribed" => 'O',
        "pinned_waits" => 'P',
        "smt_sibling" => 'S',
        "numa_remote" => 'R',
        "contention" => 'C',
        "busy_neighbour" => 'N',
        "migrations" => 'M',
        "imbalance" => 'I',
        "idle_cpus" => 'D',
        "throttled" => 'T',
        _ => '?',
    }
}

/// The letters' legend.
pub const FLAG_LEGEND: &str = "O oversubscribed CPU  P pinned, waits  S SMT sibling busy  R pages on another node  C contention  N busy neighbour  M migrations  I imbalance  D idle CPUs  T throttled";

fn flags_cell(flags: &[&str]) -> String {
    flags.iter().map(|k| flag_letter(k)).collect()
}

fn share(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

fn migrations(m: Option<f64>) -> String {
    m.map_or("-".into(), |m| format!("{m:.0}"))
}

pub fn process_line(
    p: &ProcessRow,
    shape: &Shape,
    cols: &[(Col, usize)],
    expanded: bool,
) -> String {
    join(cols, |c| match c {
        Col::Pid => p.pid.to_string(),
        Col::User => p.user.clone(),
        Col::Name => {
            let sign = match (p.threads.len() > 1, expanded) {
                (false, _) => ' ',
                (true, true) => '▾',
                (true, false) => '▸',
            };
            if p.threads.len() > 1 {
                format!("{sign}{} ({})", p.name, p.threads.len())
            } else {
                format!("{sign}{}", p.name)
            }
        }
        Col::Cpu => share(p.cpu_share),
        Col::Wait => share(p.wait_share),
        Col::On => shape.compact(&p.on),
        Col::Allowed => shape.compact(&p.allowed),
        Col::Migrations => migrations(p.migrations_per_s),
        Col::Numa => pages_cell(&p.pages),
        Col::Flags => flags_cell(&p.flags),
    })
}

pub fn thread_line(t: &ThreadRow, shape: &Shape, cols: &[(Col, usize)], last: bool) -> String {
    join(cols, |c| match c {
        Col::Pid => t.tid.to_string(),
        Col::User => String::new(),
        Col::Name => format!(" {}{}", if last { '└' } else { '├' }, t.name),
        Col::Cpu => share(t.cpu_share),
        Col::Wait => share(t.wait_share),
        Col::On => t.cpu.to_string(),
        Col::Allowed => shape.compact(&t.allowed),
        Col::Migrations => migrations(t.migrations_per_s),
        Col::Numa => String::new(),
        Col::Flags => flags_cell(&t.flags),
    })
}

/// The line of one row of the table.
pub fn row_line(
    f: &Frame,
    view: &View,
    rows: &[Row],
    i: usize,
    shape: &Shape,
    cols: &[(Col, usize)],
) -> String {
    match rows[i] {
        Row::Process(p) => {
            let p = &f.processes[p];
            process_line(
                p,
                shape,
                cols,
                view.all_threads || view.expanded.contains(&p.pid),
            )
        }
        Row::Thread(p, t) => {
            let last = !matches!(rows.get(i + 1), Some(Row::Thread(q, _)) if *q == p);
            thread_line(&f.processes[p].threads[t], shape, cols, last)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_80_and_200_and_drop_in_order_when_narrow() {
        for w in [40, 60, 72, 80, 120, 200] {
            let cols = layout(w);
            let total: usize = cols.iter().map(|c| c.1).sum::<usize>() + cols.len() - 1;
            assert!(total <= w, "{w}: {cols:?}");
        }
        let all: Vec<Col> = layout(80).iter().map(|c| c.0).collect();
        assert_eq!(all, ORDER.to_vec(), "every column at 80");
        let narrow: Vec<Col> = layout(60).iter().map(|c| c.0).collect();
        assert!(
            !narrow.contains(&Col::User) && narrow.contains(&Col::Cpu),
            "{narrow:?}"
        );
    }

    #[test]
    fn pages_are_short() {
        assert_eq!(pages_size(3), "12K");
        assert_eq!(pages_size(3 * 256), "3M");
        assert_eq!(pages_size(393_216), "1.5G");
        let read = Pages::Read {
            at: 0.0,
            nodes: vec![(0, 256), (1, 102_400)],
        };
        assert_eq!(pages_cell(&read), "0:1M 1:400M");
        assert_eq!(pages_cell(&Pages::Unreadable("EACCES".into())), "no access");
    }
}
