//! The JSON document of one refresh (`autopin top -b --json`, one document a line). Its
//! schema is docs/top.schema.json and docs/top.md says what each field means; `SCHEMA`
//! changes when a field changes meaning or goes.

use crate::frame::{Frame, ProcessRow, ThreadRow};
use crate::look::Pages;
use crate::shape::Shape;
use crate::view::{Row, View};
use serde::Serialize;

pub const SCHEMA: &str = "autopin-top/1";

#[derive(Serialize)]
pub struct Document {
    pub schema: &'static str,
    /// Seconds since top started, and the seconds this refresh covers.
    pub t: f64,
    pub interval: f64,
    pub machine: Machine,
    pub totals: Totals,
    /// The filter in words (empty: every process but kernel threads).
    pub filter: String,
    pub cpus: Vec<Cpu>,
    pub processes: Vec<Process>,
    pub flags: Vec<Flag>,
    /// Processes named with `-p` that have ended.
    pub ended: Vec<i32>,
}

#[derive(Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub numa_nodes: usize,
    pub summary: String,
}

#[derive(Serialize)]
pub struct Totals {
    pub user: f64,
    pub system: f64,
    pub steal: f64,
    pub idle: f64,
}

#[derive(Serialize)]
pub struct Cpu {
    pub cpu: u32,
    pub core: Option<usize>,
    pub node: Option<u32>,
    pub known: bool,
    pub user: f64,
    pub system: f64,
    pub steal: f64,
    pub idle: f64,
    pub watched: f64,
    pub others: f64,
    pub runnable: usize,
    pub working_threads: Vec<i32>,
    pub flags: Vec<&'static str>,
}

#[derive(Serialize)]
pub struct NodePages {
    pub node: u32,
    pub pages: u64,
    pub bytes: u64,
}

#[derive(Serialize)]
pub struct PagesDoc {
    /// `read`, `not_read` or `unreadable`.
    pub state: &'static str,
    pub nodes: Vec<NodePages>,
    pub reason: Option<String>,
}

#[derive(Serialize)]
pub struct Thread {
    pub tid: i32,
    pub name: String,
    pub state: String,
    pub cpu: u32,
    pub allowed: String,
    pub allowed_list: String,
    pub cpu_share: f64,
    pub wait_share: f64,
    pub migrations_per_s: Option<f64>,
    pub flags: Vec<&'static str>,
}

#[derive(Serialize)]
pub struct Verdict {
    pub kind: &'static str,
    pub text: String,
    pub evidence: Vec<String>,
    pub suggestion: String,
}

#[derive(Serialize)]
pub struct Process {
    pub pid: i32,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub cpu_share: f64,
    pub wait_share: f64,
    pub migrations_per_s: Option<f64>,
    pub on: String,
    pub allowed: String,
    pub allowed_list: String,
    pub pages: PagesDoc,
    pub flags: Vec<&'static str>,
    pub verdicts: Vec<Verdict>,
    pub threads: Vec<Thread>,
}

#[derive(Serialize)]
pub struct Flag {
    pub kind: &'static str,
    pub cpu: Option<u32>,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub text: String,
}

/// Rounded to 4 decimals: shares read as 0.4973, not 0.49730000000000002.
fn r(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn pages(p: &Pages) -> PagesDoc {
    match p {
        Pages::NotRead => PagesDoc {
            state: "not_read",
            nodes: Vec::new(),
            reason: None,
        },
        Pages::Unreadable(why) => PagesDoc {
            state: "unreadable",
            nodes: Vec::new(),
            reason: Some(why.clone()),
        },
        Pages::Read { nodes, .. } => PagesDoc {
            state: "read",
            nodes: nodes
                .iter()
                .map(|(n, k)| NodePages {
                    node: *n,
                    pages: *k,
                    bytes: k * 4096,
                })
                .collect(),
            reason: None,
        },
    }
}

fn thread(t: &ThreadRow, shape: &Shape) -> Thread {
    Thread {
        tid: t.tid,
        name: t.name.clone(),
        state: t.state.to_string(),
        cpu: t.cpu,
        allowed: shape.compact(&t.allowed),
        allowed_list: t.allowed.to_list(),
        cpu_share: r(t.cpu_share),
        wait_share: r(t.wait_share),
        migrations_per_s: t.migrations_per_s.map(r),
        flags: t.flags.clone(),
    }
}

fn process(p: &ProcessRow, threads: Vec<Thread>, shape: &Shape) -> Process {
    Process {
        pid: p.pid,
        name: p.name.clone(),
        user: p.user.clone(),
        uid: p.uid,
        cpu_share: r(p.cpu_share),
        wait_share: r(p.wait_share),
        migrations_per_s: p.migrations_per_s.map(r),
        on: shape.compact(&p.on),
        allowed: shape.compact(&p.allowed),
        allowed_list: p.allowed.to_list(),
        pages: pages(&p.pages),
        flags: p.flags.clone(),
        verdicts: p
            .verdicts
            .iter()
            .map(|v| Verdict {
                kind: v.kind,
                text: v.text.clone(),
                evidence: v.evidence.clone(),
                suggestion: v.suggestion.clone(),
            })
            .collect(),
        threads,
    }
}

/// The document of `f` as the view shows it: its processes in the view's order, each with
/// every thread (sorted as the view sorts threads).
pub fn document(f: &Frame, shape: &Shape, view: &View) -> Document {
    let all = View {
        all_threads: true,
        ..view.clone()
    };
    let mut processes: Vec<Process> = Vec::new();
    let mut threads: Vec<Thread> = Vec::new();
    let mut current: Option<usize> = None;
    for row in all.rows(f) {
        match row {
            Row::Process(i) => {
                if let Some(c) = current.take() {
                    processes.push(process(
                        &f.processes[c],
                        std::mem::take(&mut threads),
                        shape,
                    ));
                }
                current = Some(i);
            }
            Row::Thread(i, t) => threads.push(thread(&f.processes[i].threads[t], shape)),
        }
    }
    if let Some(c) = current {
        processes.push(process(&f.processes[c], threads, shape));
    }
    let (user, system, steal, idle) = f.totals();
    Document {
        schema: SCHEMA,
        t: r(f.t),
        interval: r(f.seconds),
        machine: Machine {
            cpus: shape.core_of.len(),
            numa_nodes: shape.nodes,
            summary: shape.summary(),
        },
        totals: Totals {
            user: r(user),
            system: r(system),
            steal: r(steal),
            idle: r(idle),
        },
        filter: view.filter.describe(),
        cpus: f
            .cpus
            .iter()
            .map(|c| Cpu {
                cpu: c.cpu,
                core: shape.core_of.get(&c.cpu).copied(),
                node: shape.node_of.get(&c.cpu).copied(),
                known: c.known,
                user: r(c.user),
                system: r(c.system),
                steal: r(c.steal),
                idle: r(c.idle),
                watched: r(c.watched),
                others: r(c.others),
                runnable: c.runnable,
                working_threads: c.working.clone(),
                flags: c.flags.clone(),
            })
            .collect(),
        processes,
        flags: f
            .flags
            .iter()
            .map(|x| Flag {
                kind: x.kind,
                cpu: x.cpu,
                pid: x.pid,
                tid: x.tid,
                text: x.text.clone(),
            })
            .collect(),
        ended: f.ended.clone(),
    }
}
