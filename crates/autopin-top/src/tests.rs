//! Frames made from looks written by hand: what the flags, the map, the table, the keys and
//! the JSON make of them.

use crate::look::{CpuTicks, Look, Pages, ProcessLook, ThreadLook};
use crate::map::{self, Form};
use crate::screen::{self, Context};
use crate::ui::{Action, Key, Ui};
use crate::view::{Filter, Row, SortKey, View};
use crate::{frame, Frame, Shape};
use autopin_topology::CpuSet;

fn machine(spec: &str) -> Shape {
    Shape::of(&autopin_topology::source::synthetic::parse(spec).unwrap())
}

fn thread(tid: i32, cpu: u32, cpu_ms: u64, wait_ms: u64, allowed: &[u32]) -> ThreadLook {
    ThreadLook {
        tid,
        name: format!("worker{tid}"),
        state: if wait_ms > 0 { 'R' } else { 'S' },
        cpu,
        cpu_ns: cpu_ms * 1_000_000,
        wait_ns: wait_ms * 1_000_000,
        migrations: Some(0),
        allowed: CpuSet::from_cpus(allowed.iter().copied()),
    }
}

fn process(pid: i32, name: &str, at: f64, threads: Vec<ThreadLook>) -> ProcessLook {
    ProcessLook {
        pid,
        name: name.into(),
        uid: 1000,
        user: "ada".into(),
        kernel: false,
        threads: threads.into(),
        threads_at: at,
        pages: Pages::NotRead,
    }
}

/// CPU `busy` share of each CPU over one second (100 ticks), all user time.
fn cpus(t: u64, busy: &[f64]) -> std::collections::BTreeMap<u32, CpuTicks> {
    busy.iter()
        .enumerate()
        .map(|(i, b)| {
            let user = (t as f64 * 100.0 * b) as u64;
            (
                i as u32,
                CpuTicks {
                    user,
                    system: 0,
                    idle: t * 100 - user,
                    steal: 0,
                },
            )
        })
        .collect()
}

/// Two threads of PID 100 pinned to CPU 0, each running half of the second and waiting the
/// other half; CPU 1 idle. A sleeping shell beside them.
fn squeezed() -> (Look, Look) {
    let shell = |at| process(50, "bash", at, vec![thread(50, 1, 10, 0, &[0, 1])]);
    let before = Look {
        t: 1.0,
        cpus: cpus(1, &[1.0, 0.0]),
        processes: vec![
            shell(1.0),
            process(
                100,
                "squeeze",
                1.0,
                vec![thread(100, 0, 0, 0, &[0]), thread(101, 0, 0, 0, &[0])],
            ),
        ],
    };
    let after = Look {
        t: 2.0,
        cpus: cpus(2, &[1.0, 0.0]),
        processes: vec![
            shell(2.0),
            process(
                100,
                "squeeze",
                2.0,
                vec![
                    thread(100, 0, 500, 500, &[0]),
                    thread(101, 0, 500, 500, &[0]),
                ],
            ),
        ],
    };
    (before, after)
}

fn everything(_: &crate::ProcessRow) -> bool {
    true
}

fn squeezed_frame(shape: &Shape) -> Frame {
    let (a, b) = squeezed();
    frame(&a, &b, shape, &everything)
}

#[test]
fn two_threads_squeezed_on_one_cpu_beside_an_idle_one_are_flagged() {
    let shape = machine("core:2 pu:1");
    let f = squeezed_frame(&shape);
    let cpu0 = f.cpu(0).unwrap();
    assert_eq!(
        cpu0.flags,
        vec!["oversubscribed", "pinned_waits"],
        "{cpu0:?}"
    );
    assert_eq!(cpu0.runnable, 2);
    assert_eq!(cpu0.working, vec![100, 101]);
    assert!(
        (cpu0.watched - 1.0).abs() < 1e-9 && cpu0.others < 1e-9,
        "{cpu0:?}"
    );
    let cpu1 = f.cpu(1).unwrap();
    assert!(cpu1.flags.is_empty() && cpu1.idle > 0.99, "{cpu1:?}");
    let p = f.process(100).unwrap();
    assert!((p.cpu_share - 1.0).abs() < 1e-9 && (p.wait_share - 1.0).abs() < 1e-9);
    for k in ["oversubscribed", "pinned_waits", "contention"] {
        assert!(p.flags.contains(&k), "{k}: {:?}", p.flags);
    }
    let over = f.flags.iter().find(|x| x.kind == "oversubscribed").unwrap();
    assert!(
        over.text.starts_with("CPU 0: 2 working threads"),
        "{}",
        over.text
    );
    assert!(over.text.contains("CPU 1 idles"), "{}", over.text);
    assert!(over.text.contains("outside their masks"), "{}", over.text);
    // The same rules as stat: its contention verdict, for this process.
    assert_eq!(p.verdicts[0].kind, "contention");
}

#[test]
fn threads_free_to_move_are_told_apart_from_pinned_ones() {
    // The same squeeze with masks allowing both CPUs: oversubscribed (the kernel has not
    // moved them yet), but no pinned thread.
    let shape = machine("core:2 pu:1");
    let (mut a, mut b) = squeezed();
    for l in [&mut a, &mut b] {
        for t in std::sync::Arc::make_mut(&mut l.processes[1].threads) {
            t.allowed = CpuSet::from_cpus([0, 1]);
        }
    }
    let f = frame(&a, &b, &shape, &everything);
    assert_eq!(f.cpu(0).unwrap().flags, vec!["oversubscribed"]);
    assert!(
        f.flags[0].text.contains("their masks allow CPU 1"),
        "{}",
        f.flags[0].text
    );
    assert!(!f.process(100).unwrap().flags.contains(&"pinned_waits"));
}

#[test]
fn nothing_is_flagged_when_each_thread_has_its_cpu() {
    let shape = machine("core:2 pu:1");
    let mk = |t: u64, ms: u64| Look {
        t: t as f64,
        cpus: cpus(t, &[1.0, 1.0]),
        processes: vec![process(
            100,
            "spread",
            t as f64,
            vec![
                thread(100, 0, ms, 0, &[0, 1]),
                thread(101, 1, ms, 0, &[0, 1]),
            ],
        )],
    };
    let f = frame(&mk(1, 0), &mk(2, 990), &shape, &everything);
    assert!(f.flags.is_empty(), "{:?}", f.flags);
    assert!(f.cpus.iter().all(|c| c.flags.is_empty()));
}

#[test]
fn a_busy_smt_sibling_of_a_watched_thread_is_flagged_while_a_core_idles() {
    // 2 cores × 2 PUs: CPUs 0,1 one core, 2,3 the other. Threads busy on 0 and 1.
    let shape = machine("core:2 pu:2");
    let mk = |t: u64, ms: u64| Look {
        t: t as f64,
        cpus: cpus(t, &[1.0, 1.0, 0.0, 0.0]),
        processes: vec![process(
            7,
            "smt",
            t as f64,
            vec![
                thread(7, 0, ms, 0, &[0, 1, 2, 3]),
                thread(8, 1, ms, 0, &[0, 1, 2, 3]),
            ],
        )],
    };
    let f = frame(&mk(1, 0), &mk(2, 990), &shape, &everything);
    let kinds: Vec<&str> = f.flags.iter().map(|x| x.kind).collect();
    assert!(kinds.contains(&"smt_sibling"), "{kinds:?}");
    assert!(f
        .process(7)
        .unwrap()
        .threads
        .iter()
        .all(|t| t.flags == vec!["smt_sibling"]));
    // stat's own verdict says the same of the process.
    assert!(f.process(7).unwrap().flags.contains(&"smt_shared"));
    // Not a watched program's: no flag on it.
    let f = frame(&mk(1, 0), &mk(2, 990), &shape, &|_| false);
    assert!(
        f.flags.iter().all(|x| x.kind != "smt_sibling"),
        "{:?}",
        f.flags
    );
}

#[test]
fn pages_mostly_on_another_node_than_the_threads_are_flagged_numa_remote() {
    let shape = machine("numa:2 core:2 pu:1");
    assert_eq!(shape.node_of[&2], 1);
    let mk = |t: u64, ms: u64, pages: Pages| Look {
        t: t as f64,
        cpus: cpus(t, &[1.0, 0.0, 0.0, 0.0]),
        processes: vec![ProcessLook {
            pages,
            ..process(9, "far", t as f64, vec![thread(9, 0, ms, 0, &[0, 1, 2, 3])])
        }],
    };
    let far = Pages::Read {
        at: 2.0,
        nodes: vec![(0, 100), (1, 50_000)],
    };
    let f = frame(
        &mk(1, 0, Pages::NotRead),
        &mk(2, 990, far),
        &shape,
        &everything,
    );
    let p = f.process(9).unwrap();
    assert!(p.flags.contains(&"numa_remote"), "{:?}", p.flags);
    let text = crate::table::pages_cell(&p.pages);
    assert_eq!(text, "0:400K 1:195M");
}

#[test]
fn a_process_not_read_again_shows_no_use_instead_of_a_spike() {
    // The source kept PID 5's threads from the look before (nothing of it changed): the
    // interval is empty, its shares 0; the look after, read again, covers both seconds.
    let shape = machine("core:2 pu:1");
    let p = |at: f64, ms: u64| process(5, "idle", at, vec![thread(5, 0, ms, 0, &[0, 1])]);
    let l = |t: f64, at: f64, ms: u64| Look {
        t,
        cpus: cpus(t as u64, &[0.1, 0.0]),
        processes: vec![p(at, ms)],
    };
    let (a, b, c) = (l(1.0, 1.0, 100), l(2.0, 1.0, 100), l(3.0, 3.0, 300));
    let f = frame(&a, &b, &shape, &everything);
    assert_eq!(f.process(5).unwrap().cpu_share, 0.0);
    let f = frame(&b, &c, &shape, &everything);
    assert!((f.process(5).unwrap().cpu_share - 0.1).abs() < 1e-9);
}

#[test]
fn the_map_shows_both_threads_on_the_flagged_cpu_and_the_idle_one() {
    let shape = machine("core:2 pu:1");
    let f = squeezed_frame(&shape);
    let m = map::draw(&f, &shape, 80, 10, &[]);
    assert_eq!(m.form, Form::Wide);
    let text = map::plain(&m.lines[0]);
    assert_eq!(text, "0▕██████▏! 1▕      ▏ ", "{text}");
}

#[test]
fn a_256_cpu_machine_fits_80_by_24_one_character_a_cpu() {
    let shape = machine("package:8 numa:1 core:8 pu:4");
    assert_eq!(shape.core_of.len(), 256);
    let f = Frame {
        cpus: (0..256)
            .map(|cpu| crate::CpuLoad {
                cpu,
                known: true,
                user: if cpu % 3 == 0 { 0.9 } else { 0.0 },
                idle: 0.1,
                ..Default::default()
            })
            .collect(),
        ..Frame::default()
    };
    let mut ui = Ui::default();
    let lines = screen::render(&f, &shape, &mut ui, &Context::default(), 80, 24);
    assert_eq!(lines.len(), 24);
    assert!(lines.iter().all(|l| map::line_width(l) <= 80));
    let m = map::draw(&f, &shape, 80, 10, &[]);
    assert_eq!(
        m.form,
        Form::Tiny,
        "{:?}",
        m.lines.iter().map(map::plain).collect::<Vec<_>>()
    );
    let glyphs: usize = m
        .lines
        .iter()
        .map(|l| {
            map::plain(l)
                .chars()
                .filter(|c| "·█▁▂▃▄▅▆▇?!ps".contains(*c))
                .count()
        })
        .sum();
    assert_eq!(glyphs, 256);
    // At 200 columns there is room for a number a CPU.
    assert_ne!(map::draw(&f, &shape, 200, 20, &[]).form, Form::Tiny);
    // Two lines of room: a compact view that says it is one.
    let m = map::draw(&f, &shape, 80, 2, &[]);
    assert_eq!(m.form, Form::Compact);
    let first = map::plain(&m.lines[0]);
    assert!(
        first.starts_with("too small to draw the machine (256 CPUs"),
        "{first}"
    );
    assert!(
        map::plain(&m.lines[1]).starts_with("busiest: 0:90%"),
        "{:?}",
        m.lines[1]
    );
}

fn screen_text(f: &Frame, shape: &Shape, ui: &mut Ui, w: usize, h: usize) -> Vec<String> {
    screen::render(f, shape, ui, &Context::default(), w, h)
        .iter()
        .map(map::plain)
        .collect()
}

#[test]
fn sort_and_expand_keys_change_the_table() {
    let shape = machine("core:2 pu:1");
    let f = squeezed_frame(&shape);
    let mut ui = Ui::default();
    let rows = |ui: &Ui| ui.view.rows(&f);
    // By CPU%: the squeezed program first.
    assert_eq!(rows(&ui), vec![Row::Process(1), Row::Process(0)]);
    assert_eq!(ui.key(Key::Char('p'), &f, 10), Action::Redraw);
    assert_eq!(ui.view.sort.key, SortKey::Pid);
    assert_eq!(rows(&ui), vec![Row::Process(0), Row::Process(1)]);
    assert_eq!(ui.key(Key::Char('p'), &f, 10), Action::Redraw);
    assert!(ui.view.sort.descending, "p twice reverses");
    ui.key(Key::Char('c'), &f, 10);
    // Expand the selected (first) process: its two threads under it.
    ui.key(Key::Home, &f, 10);
    assert_eq!(ui.key(Key::Enter, &f, 10), Action::Redraw);
    assert_eq!(
        rows(&ui),
        vec![
            Row::Process(1),
            Row::Thread(1, 0),
            Row::Thread(1, 1),
            Row::Process(0)
        ]
    );
    let text = screen_text(&f, &shape, &mut ui, 80, 24).join("\n");
    assert!(text.contains("▾squeeze (2)"), "{text}");
    assert!(text.contains(" ├worker100"), "{text}");
    assert!(text.contains(" └worker101"), "{text}");
    ui.key(Key::Down, &f, 10);
    assert_eq!(ui.selected, Some((100, Some(100))));
    // Enter on a thread folds its process.
    ui.key(Key::Enter, &f, 10);
    assert_eq!(rows(&ui).len(), 2);
    assert_eq!(ui.key(Key::Char('s'), &f, 10), Action::Stat(100));
    assert_eq!(ui.key(Key::Char('q'), &f, 10), Action::Quit);
    // > walks the columns.
    ui.key(Key::Char('>'), &f, 10);
    assert_eq!(ui.view.sort.key, SortKey::Wait);
}

#[test]
fn the_search_filters_and_esc_clears_it() {
    let shape = machine("core:2 pu:1");
    let f = squeezed_frame(&shape);
    let mut ui = Ui::default();
    ui.key(Key::Char('/'), &f, 10);
    for c in "bas".chars() {
        assert_eq!(ui.key(Key::Char(c), &f, 10), Action::Redraw);
    }
    assert_eq!(ui.key(Key::Enter, &f, 10), Action::Refilter);
    assert_eq!(ui.view.filter.search, "bas");
    let p = f.process(50).unwrap();
    assert!(ui.view.filter.matches(p) && !ui.view.filter.matches(f.process(100).unwrap()));
    assert_eq!(ui.key(Key::Esc, &f, 10), Action::Refilter);
    assert!(ui.view.filter.search.is_empty());
    let by_pid = Filter {
        search: "101".into(),
        ..Filter::default()
    };
    assert!(
        by_pid.matches(f.process(100).unwrap()),
        "a thread's id finds its process"
    );
}

#[test]
fn the_screen_fits_80_by_24_and_200_columns() {
    let shape = machine("core:2 pu:1");
    let f = squeezed_frame(&shape);
    for (w, h) in [(80, 24), (200, 50), (40, 10), (20, 5)] {
        let mut ui = Ui::default();
        let lines = screen::render(&f, &shape, &mut ui, &Context::default(), w, h);
        assert_eq!(lines.len(), h, "{w}x{h}");
        for l in &lines {
            assert!(map::line_width(l) <= w, "{w}x{h}: {}", map::plain(l));
        }
    }
    let text = screen_text(&f, &shape, &mut Ui::default(), 80, 24).join("\n");
    assert!(text.contains("! CPU 0: 2 working threads"), "{text}");
    assert!(text.contains("PID USER"), "{text}");
}

#[test]
fn the_json_document_lists_the_shown_processes_with_their_threads() {
    let shape = machine("core:2 pu:1");
    let f = squeezed_frame(&shape);
    let view = View::default();
    let doc = serde_json::to_value(crate::json::document(&f, &shape, &view)).unwrap();
    assert_eq!(doc["schema"], "autopin-top/1");
    assert_eq!(doc["processes"][0]["pid"], 100);
    assert_eq!(doc["processes"][0]["threads"].as_array().unwrap().len(), 2);
    assert_eq!(doc["processes"][0]["allowed"], "0");
    assert_eq!(doc["cpus"][0]["flags"][0], "oversubscribed");
    assert_eq!(doc["processes"][0]["pages"]["state"], "not_read");
}

#[test]
fn migrations_count_only_where_both_looks_read_them() {
    let shape = machine("core:2 pu:1");
    let mk = |t: u64, ms: u64, a: Option<u64>, b: Option<u64>| {
        let mut one = thread(1, 0, ms, 0, &[0, 1]);
        one.migrations = a;
        let mut two = thread(2, 1, ms, 0, &[0, 1]);
        two.migrations = b;
        Look {
            t: t as f64,
            cpus: cpus(t, &[1.0, 1.0]),
            processes: vec![process(1, "m", t as f64, vec![one, two])],
        }
    };
    // Thread 1 read both times (30 moves in the second), thread 2 not read the first time.
    let f = frame(
        &mk(1, 0, Some(10), None),
        &mk(2, 900, Some(40), Some(7)),
        &shape,
        &everything,
    );
    let p = f.process(1).unwrap();
    assert_eq!(p.threads[0].migrations_per_s, Some(30.0));
    assert_eq!(
        p.threads[1].migrations_per_s, None,
        "no spike of its whole count"
    );
    assert_eq!(p.migrations_per_s, Some(30.0));
    // stat's migrations verdict (20/s and more) sees the same.
    assert!(p.flags.contains(&"migrations"), "{:?}", p.flags);
}
