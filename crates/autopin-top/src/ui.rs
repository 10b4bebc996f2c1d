//! The interactive view's state and what each key does to it, without a terminal: the
//! selected row, the first row shown, the search being typed, the help page. The terminal
//! side (the autopin CLI) turns its key events into [`Key`]s and carries out the
//! [`Action`]s.

use crate::frame::Frame;
use crate::view::{Row, Sort, SortKey, View};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Left,
    Right,
    Enter,
    Esc,
    Backspace,
    CtrlC,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// Draw again: the view changed.
    Redraw,
    /// The filter changed: which processes are the watched programs' changed too, so the
    /// frame is to be made again from its looks.
    Refilter,
    Quit,
    /// Run `autopin stat` on this process.
    Stat(i32),
}

/// The keys, as the help page lists them.
pub const HELP: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit (the terminal is left as it was)"),
    (
        "↑ ↓ PgUp PgDn Home End",
        "select a process or thread (also k j g G)",
    ),
    (
        "Enter, →, e",
        "expand the selected process into its threads (again: fold)",
    ),
    ("←", "fold the selected process's threads"),
    ("H", "every process expanded, or none"),
    ("< >", "sort by the column left or right of the sort column"),
    (
        "c w p n u o m M",
        "sort by CPU%, WAIT%, PID, NAME, USER, CPU, MIG/s, NUMA pages",
    ),
    ("r", "reverse the order"),
    (
        "/",
        "search: a PID, or part of a name or a user (Enter keeps it, Esc clears it)",
    ),
    ("K", "kernel threads shown or hidden"),
    (
        "s",
        "run `autopin stat -p PID` on the selected process (5 s), then come back",
    ),
    ("?, h", "this help (any key closes it)"),
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ui {
    pub view: View,
    /// The selected row: a process, or one of its threads.
    pub selected: Option<(i32, Option<i32>)>,
    /// The first row shown.
    pub top: usize,
    /// The search being typed after `/`.
    pub search: Option<String>,
    pub help: bool,
}

fn key_of(f: &Frame, row: Row) -> (i32, Option<i32>) {
    match row {
        Row::Process(p) => (f.processes[p].pid, None),
        Row::Thread(p, t) => (f.processes[p].pid, Some(f.processes[p].threads[t].tid)),
    }
}

impl Ui {
    /// The index of the selected row in `rows` (the first row when the selection is gone:
    /// its thread ended, its process left the filter).
    pub fn cursor(&self, f: &Frame, rows: &[Row]) -> usize {
        let Some(sel) = self.selected else {
            return 0;
        };
        rows.iter()
            .position(|r| key_of(f, *r) == sel)
            .or_else(|| {
                // A thread that ended: its process.
                rows.iter().position(|r| key_of(f, *r) == (sel.0, None))
            })
            .unwrap_or(0)
    }

    /// Keeps the cursor within the `page` rows shown.
    pub fn scroll(&mut self, cursor: usize, page: usize) {
        let page = page.max(1);
        if cursor < self.top {
            self.top = cursor;
        } else if cursor >= self.top + page {
            self.top = cursor + 1 - page;
        }
    }

    fn select(&mut self, f: &Frame, rows: &[Row], i: usize, page: usize) {
        if rows.is_empty() {
            self.selected = None;
            return;
        }
        let i = i.min(rows.len() - 1);
        self.selected = Some(key_of(f, rows[i]));
        self.scroll(i, page);
    }

    /// The selected process's PID.
    pub fn selected_pid(&self) -> Option<i32> {
        self.selected.map(|s| s.0)
    }

    fn sort_by(&mut self, key: SortKey) {
        self.view.sort = if self.view.sort.key == key {
            Sort {
                key,
                descending: !self.view.sort.descending,
            }
        } else {
            Sort::by(key)
        };
    }

    /// What `k` does, with `f` the frame shown and `page` the table's rows on screen.
    pub fn key(&mut self, k: Key, f: &Frame, page: usize) -> Action {
        if let Some(s) = self.search.as_mut() {
            match k {
                Key::Char(c) if !c.is_control() => {
                    s.push(c);
                    return Action::Redraw;
                }
                Key::Backspace => {
                    s.pop();
                    return Action::Redraw;
                }
                Key::Enter => {
                    self.view.filter.search = self.search.take().unwrap_or_default();
                    self.top = 0;
                    return Action::Refilter;
                }
                Key::Esc => {
                    self.search = None;
                    self.view.filter.search.clear();
                    return Action::Refilter;
                }
                Key::CtrlC => return Action::Quit,
                _ => return Action::Nothing,
            }
        }
        if self.help {
            self.help = false;
            return match k {
                Key::Char('q') | Key::CtrlC => Action::Quit,
                _ => Action::Redraw,
            };
        }
        let rows = self.view.rows(f);
        let at = self.cursor(f, &rows);
        match k {
            Key::Char('q') | Key::CtrlC => return Action::Quit,
            Key::Up | Key::Char('k') => self.select(f, &rows, at.saturating_sub(1), page),
            Key::Down | Key::Char('j') => self.select(f, &rows, at + 1, page),
            Key::PageUp => self.select(f, &rows, at.saturating_sub(page.max(1)), page),
            Key::PageDown => self.select(f, &rows, at + page.max(1), page),
            Key::Home | Key::Char('g') => self.select(f, &rows, 0, page),
            Key::End | Key::Char('G') => self.select(f, &rows, rows.len().saturating_sub(1), page),
            Key::Enter | Key::Right | Key::Char('e') | Key::Left => {
                let Some((pid, tid)) = self
                    .selected
                    .or_else(|| rows.first().map(|r| key_of(f, *r)))
                else {
                    return Action::Nothing;
                };
                let open = self.view.expanded.contains(&pid);
                let fold = match k {
                    Key::Right => false,
                    Key::Left => true,
                    _ => open || tid.is_some(),
                };
                if fold {
                    self.view.expanded.remove(&pid);
                } else {
                    self.view.expanded.insert(pid);
                }
                self.selected = Some((pid, None));
            }
            Key::Char('H') => self.view.all_threads = !self.view.all_threads,
            Key::Char('<') | Key::Char('>') => {
                let all = SortKey::ALL;
                let i = all
                    .iter()
                    .position(|s| *s == self.view.sort.key)
                    .unwrap_or(0);
                let j = if k == Key::Char('>') {
                    (i + 1) % all.len()
                } else {
                    (i + all.len() - 1) % all.len()
                };
                self.view.sort = Sort::by(all[j]);
            }
            Key::Char('c') => self.sort_by(SortKey::Cpu),
            Key::Char('w') => self.sort_by(SortKey::Wait),
            Key::Char('p') => self.sort_by(SortKey::Pid),
            Key::Char('n') => self.sort_by(SortKey::Name),
            Key::Char('u') => self.sort_by(SortKey::User),
            Key::Char('o') => self.sort_by(SortKey::On),
            Key::Char('m') => self.sort_by(SortKey::Migrations),
            Key::Char('M') => self.sort_by(SortKey::Memory),
            Key::Char('r') => self.view.sort.descending = !self.view.sort.descending,
            Key::Char('/') => self.search = Some(self.view.filter.search.clone()),
            Key::Esc if !self.view.filter.search.is_empty() => {
                self.view.filter.search.clear();
                return Action::Refilter;
            }
            Key::Char('K') => {
                self.view.filter.kernel = !self.view.filter.kernel;
                return Action::Refilter;
            }
            Key::Char('s') => {
                return match self
                    .selected_pid()
                    .or_else(|| rows.first().map(|r| key_of(f, *r).0))
                {
                    Some(pid) => Action::Stat(pid),
                    None => Action::Nothing,
                };
            }
            Key::Char('?') | Key::Char('h') => self.help = true,
            _ => return Action::Nothing,
        }
        Action::Redraw
    }
}
