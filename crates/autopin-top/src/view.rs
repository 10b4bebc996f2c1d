//! Which processes the table shows and in what order: the filter (`-p`, `-u`, `--job`, the
//! `/` search), the sort column, the processes expanded into their threads.

use crate::frame::{Frame, ProcessRow, ThreadRow};
use crate::look::Pages;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// The processes to show (and to count as the watched programs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// `-p`: only these PIDs (empty: any).
    pub pids: Vec<i32>,
    /// `-u`: only these users' (empty: any).
    pub uids: Vec<u32>,
    /// `--job`: only the job's processes, as last found.
    pub job: Option<BTreeSet<i32>>,
    /// `/`: a PID, or a piece of a process's, a thread's or a user's name (any case).
    pub search: String,
    /// Kernel threads too (hidden unless asked for, or named by PID).
    pub kernel: bool,
}

impl Filter {
    pub fn matches(&self, p: &ProcessRow) -> bool {
        let named = self.pids.contains(&p.pid);
        (self.pids.is_empty() || named)
            && (self.uids.is_empty() || self.uids.contains(&p.uid))
            && self.job.as_ref().is_none_or(|j| j.contains(&p.pid))
            && (self.kernel || named || !p.kernel)
            && self.searched(p)
    }

    fn searched(&self, p: &ProcessRow) -> bool {
        let s = self.search.trim();
        if s.is_empty() {
            return true;
        }
        if let Ok(n) = s.parse::<i32>() {
            return p.pid == n || p.threads.iter().any(|t| t.tid == n);
        }
        let s = s.to_lowercase();
        p.name.to_lowercase().contains(&s)
            || p.user.to_lowercase() == s
            || p.threads.iter().any(|t| t.name.to_lowercase().contains(&s))
    }

    /// The filter in words, for the title; empty when it lets everything through.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if !self.pids.is_empty() {
            v.push(format!(
                "PID {}",
                self.pids
                    .iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if !self.uids.is_empty() {
            v.push(format!(
                "uid {}",
                self.uids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if let Some(j) = &self.job {
            v.push(format!("job ({} processes)", j.len()));
        }
        if !self.search.trim().is_empty() {
            v.push(format!("/{}", self.search.trim()));
        }
        v.join(" ")
    }
}

/// The table's sortable columns, in the table's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Pid,
    User,
    Name,
    Cpu,
    Wait,
    On,
    Migrations,
    Memory,
}

impl SortKey {
    pub const ALL: [SortKey; 8] = [
        SortKey::Pid,
        SortKey::User,
        SortKey::Name,
        SortKey::Cpu,
        SortKey::Wait,
        SortKey::On,
        SortKey::Migrations,
        SortKey::Memory,
    ];

    /// The column's heading.
    pub fn heading(self) -> &'static str {
        match self {
            SortKey::Pid => "PID",
            SortKey::User => "USER",
            SortKey::Name => "NAME",
            SortKey::Cpu => "CPU%",
            SortKey::Wait => "WAIT%",
            SortKey::On => "CPU",
            SortKey::Migrations => "MIG/s",
            SortKey::Memory => "NUMA",
        }
    }

    /// Numbers read best largest first; names and ids in their own order.
    pub fn descending_by_default(self) -> bool {
        matches!(
            self,
            SortKey::Cpu | SortKey::Wait | SortKey::Migrations | SortKey::Memory
        )
    }

    /// `--sort`'s words: the heading in any case, or `mem`/`migr`/`wait`/...
    pub fn parse(s: &str) -> Option<SortKey> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.trim_end_matches('%');
        Some(match s {
            "pid" | "tid" => SortKey::Pid,
            "user" => SortKey::User,
            "name" | "command" => SortKey::Name,
            "cpu" => SortKey::Cpu,
            "wait" => SortKey::Wait,
            "on" | "where" | "runs-on" => SortKey::On,
            "mig/s" | "mig" | "migr" | "migrations" => SortKey::Migrations,
            "numa" | "mem" | "memory" | "pages" => SortKey::Memory,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

impl Default for Sort {
    fn default() -> Self {
        Sort {
            key: SortKey::Cpu,
            descending: true,
        }
    }
}

impl Sort {
    pub fn by(key: SortKey) -> Sort {
        Sort {
            key,
            descending: key.descending_by_default(),
        }
    }

    fn order<T: PartialOrd>(&self, a: T, b: T) -> Ordering {
        let o = a.partial_cmp(&b).unwrap_or(Ordering::Equal);
        if self.descending {
            o.reverse()
        } else {
            o
        }
    }

    pub fn processes(&self, a: &ProcessRow, b: &ProcessRow) -> Ordering {
        let pages = |p: &ProcessRow| match &p.pages {
            Pages::Read { nodes, .. } => nodes.iter().map(|n| n.1).sum::<u64>(),
            _ => 0,
        };
        match self.key {
            SortKey::Pid => self.order(a.pid, b.pid),
            SortKey::User => self.order(&a.user, &b.user),
            SortKey::Name => self.order(a.name.to_lowercase(), b.name.to_lowercase()),
            SortKey::Cpu => self.order(a.cpu_share, b.cpu_share),
            SortKey::Wait => self.order(a.wait_share, b.wait_share),
            SortKey::On => self.order(a.on.first(), b.on.first()),
            SortKey::Migrations => self.order(
                a.migrations_per_s.unwrap_or(-1.0),
                b.migrations_per_s.unwrap_or(-1.0),
            ),
            SortKey::Memory => self.order(pages(a), pages(b)),
        }
        .then(a.pid.cmp(&b.pid))
    }

    pub fn threads(&self, a: &ThreadRow, b: &ThreadRow) -> Ordering {
        match self.key {
            SortKey::Pid | SortKey::User | SortKey::Memory => self.order(a.tid, b.tid),
            SortKey::Name => self.order(a.name.to_lowercase(), b.name.to_lowercase()),
            SortKey::Cpu => self.order(a.cpu_share, b.cpu_share),
            SortKey::Wait => self.order(a.wait_share, b.wait_share),
            SortKey::On => self.order(a.cpu, b.cpu),
            SortKey::Migrations => self.order(
                a.migrations_per_s.unwrap_or(-1.0),
                b.migrations_per_s.unwrap_or(-1.0),
            ),
        }
        .then(a.tid.cmp(&b.tid))
    }
}

/// One line of the table: a process, or one of its threads (indexes into the frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Process(usize),
    Thread(usize, usize),
}

/// What the table shows: filter, order, which processes show their threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct View {
    pub filter: Filter,
    pub sort: Sort,
    /// Processes shown with their threads.
    pub expanded: BTreeSet<i32>,
    /// Every process with its threads (`-H`, `H`).
    pub all_threads: bool,
}

impl View {
    /// The table's rows, in order.
    pub fn rows(&self, f: &Frame) -> Vec<Row> {
        let mut ps: Vec<usize> = (0..f.processes.len())
            .filter(|&i| f.processes[i].watched)
            .collect();
        ps.sort_by(|&a, &b| self.sort.processes(&f.processes[a], &f.processes[b]));
        let mut out = Vec::with_capacity(ps.len());
        for i in ps {
            out.push(Row::Process(i));
            let p = &f.processes[i];
            if self.all_threads || self.expanded.contains(&p.pid) {
                let mut ts: Vec<usize> = (0..p.threads.len()).collect();
                ts.sort_by(|&a, &b| self.sort.threads(&p.threads[a], &p.threads[b]));
                out.extend(ts.into_iter().map(|t| Row::Thread(i, t)));
            }
        }
        out
    }
}
