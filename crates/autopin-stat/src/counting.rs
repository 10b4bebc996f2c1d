//! The counts of `-g` groups in the report: each thread's counts and metrics, what was not
//! counted, and the tables (one per group, a row per thread).

use crate::groups::{events_of, is_clock, Group, Missing};
use crate::verdict::StatReport;
use std::collections::BTreeMap;

/// One thread's counts over the report's period (or since counting began on it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadCounts {
    /// Event → count, scaled where the kernel multiplexed it. An event absent here was not
    /// counted on this thread.
    pub counters: BTreeMap<String, f64>,
    /// Events the kernel multiplexed (counted part of the time, scaled up).
    pub multiplexed: Vec<String>,
    /// Events opened but never on the hardware while the thread ran: the count is unknown.
    pub unscheduled: Vec<String>,
    /// Seconds the thread was counted (its per-second metrics divide by this).
    pub seconds: f64,
}

/// Why an event opened on every thread still has no count.
pub const NEVER_SCHEDULED: &str =
    "opened, but never on the hardware while the threads ran (more events than the PMU has counters: name fewer groups at once)";

/// Puts the counts of `groups` into `report`: each thread's `counters`, `metrics` and
/// `multiplexed`, the groups' names, and `counters_missing` (`missing`, plus the events
/// that were opened but never counted on any thread).
pub fn apply(
    report: &mut StatReport,
    groups: &[&Group],
    counts: &BTreeMap<i32, ThreadCounts>,
    mut missing: Vec<Missing>,
) {
    report.groups = groups.iter().map(|g| g.name.to_string()).collect();
    for event in events_of(groups) {
        let known = missing.iter().any(|m| m.event == event);
        let counted = counts.values().any(|c| c.counters.contains_key(event));
        let lost = counts
            .values()
            .any(|c| c.unscheduled.iter().any(|e| e == event));
        if !known && !counted && lost {
            missing.push(Missing {
                event: event.into(),
                reason: NEVER_SCHEDULED.into(),
            });
        }
    }
    for t in &mut report.figures.threads {
        let Some(c) = counts.get(&t.tid) else {
            continue;
        };
        t.counters = c.counters.clone();
        t.multiplexed = c.multiplexed.clone();
        t.metrics = groups
            .iter()
            .flat_map(|g| g.metrics.iter())
            .filter_map(|m| Some((m.name.to_string(), m.value(&c.counters, c.seconds)?)))
            .collect();
    }
    report.counters_missing = Some(missing);
}

/// A count as the table shows it: clocks in seconds, others with an SI prefix, a `*`
/// where the kernel multiplexed it.
fn count_cell(event: &str, value: Option<f64>, multiplexed: bool) -> String {
    let Some(v) = value else {
        return "-".into();
    };
    let mark = if multiplexed { "*" } else { "" };
    if is_clock(event) {
        format!("{v:.3}{mark}")
    } else {
        format!("{}{mark}", autopin_human::si(v))
    }
}

/// One table per group: a row per thread, the group's counts then its metrics. A group of
/// which nothing was counted is one line saying so.
pub fn render(r: &StatReport) -> String {
    let mut out = String::new();
    let missing = r.counters_missing.as_deref().unwrap_or_default();
    let mut any_multiplexed = false;
    for name in &r.groups {
        let Some(g) = crate::groups::GROUPS.iter().find(|g| g.name == name) else {
            continue;
        };
        let counted: Vec<&str> = g
            .events
            .iter()
            .copied()
            .filter(|e| !missing.iter().any(|m| m.event == *e))
            .collect();
        if counted.is_empty() {
            out.push_str(&format!(
                "group {}: nothing counted ({} not countable here)\n",
                g.name,
                g.events.join(", ")
            ));
            continue;
        }
        let mut head = vec!["TID".to_string()];
        head.extend(counted.iter().map(|e| {
            if is_clock(e) {
                format!("{e}(s)")
            } else {
                e.to_string()
            }
        }));
        head.extend(g.metrics.iter().map(|m| {
            if m.share {
                format!("{}%", m.name)
            } else {
                m.name.to_string()
            }
        }));
        let mut rows = vec![head];
        for t in &r.figures.threads {
            let mut row = vec![t.tid.to_string()];
            for e in &counted {
                let mux = t.multiplexed.iter().any(|m| m == e);
                any_multiplexed |= mux;
                row.push(count_cell(e, t.counters.get(*e).copied(), mux));
            }
            for m in g.metrics {
                row.push(match t.metrics.get(m.name) {
                    None => "-".into(),
                    Some(v) if m.share => format!("{:.2}", 100.0 * v),
                    Some(v) => autopin_human::si(*v),
                });
            }
            rows.push(row);
        }
        out.push_str(&format!("group {}: {}\n", g.name, g.description));
        out.push_str(&autopin_human::columns(&rows, |_| true));
    }
    if any_multiplexed {
        out.push_str(
            "*: multiplexed (the kernel counted it part of the time; scaled to the whole)\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groups::select;
    use crate::thread_stat::ThreadStat;

    fn thread(tid: i32) -> ThreadStat {
        ThreadStat {
            tid,
            name: format!("t{tid}"),
            cpu_share: 1.0,
            run_delay_fraction: 0.0,
            cpus: vec![0],
            migrations: Some(0),
            voluntary_switches: 0,
            involuntary_switches: 0,
            numa_nodes: vec![],
            counters: BTreeMap::new(),
            metrics: BTreeMap::new(),
            multiplexed: vec![],
        }
    }

    fn report(tids: &[i32]) -> StatReport {
        StatReport {
            figures: crate::figures::Figures {
                seconds: 2.0,
                threads: tids.iter().map(|t| thread(*t)).collect(),
                neighbours: vec![],
                throttled_seconds: None,
                heartbeats_per_second: None,
                openmp_constructs_per_second: None,
                pages_per_node: vec![],
            },
            verdicts: vec![],
            groups: vec![],
            counters_missing: None,
            counting_mode: None,
            counting_overhead: None,
            intervals: None,
        }
    }

    fn counts(pairs: &[(&str, f64)], seconds: f64) -> ThreadCounts {
        ThreadCounts {
            counters: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            seconds,
            ..Default::default()
        }
    }

    #[test]
    fn metrics_per_thread_and_multiplexed_counts_marked() {
        let groups = select(&["IPC", "SW"]).unwrap();
        let mut r = report(&[10, 11]);
        let mut a = counts(
            &[
                ("cycles", 4e9),
                ("instructions", 8e9),
                ("task-clock", 2.0),
                ("context-switches", 10.0),
            ],
            2.0,
        );
        a.multiplexed = vec!["cycles".into()];
        // Thread 11 began 1 s later: its per-second figures divide by its own second.
        let b = counts(&[("task-clock", 0.5), ("context-switches", 4.0)], 1.0);
        let missing = vec![
            Missing {
                event: "cpu-migrations".into(),
                reason: "gone".into(),
            },
            Missing {
                event: "page-faults".into(),
                reason: "gone".into(),
            },
        ];
        apply(
            &mut r,
            &groups,
            &BTreeMap::from([(10, a), (11, b)]),
            missing,
        );
        let t = &r.figures.threads[0];
        assert_eq!(t.metrics["IPC"], 2.0);
        assert_eq!(t.metrics["GHz"], 2.0);
        assert_eq!(t.metrics["CPUs"], 1.0);
        assert_eq!(t.metrics["cs/s"], 5.0);
        let u = &r.figures.threads[1];
        assert_eq!(u.metrics["CPUs"], 0.5);
        assert_eq!(u.metrics["cs/s"], 4.0);
        assert!(!u.metrics.contains_key("IPC"));
        let text = render(&r);
        assert!(text.contains("group IPC: "), "{text}");
        assert!(text.contains("4G*"), "{text}");
        assert!(text.contains("*: multiplexed"), "{text}");
        // The missing events have no column; the others do.
        assert!(text.contains("context-switches"), "{text}");
        assert!(!text.contains("page-faults"), "{text}");
        assert!(text.contains("2.000"), "task-clock in seconds: {text}");
    }

    #[test]
    fn an_event_never_scheduled_is_missing_and_a_group_with_nothing_says_so() {
        let groups = select(&["STALLS"]).unwrap();
        let mut r = report(&[1]);
        let mut c = counts(&[("cycles", 1e9)], 1.0);
        c.unscheduled = vec!["stalled-cycles-backend".into()];
        let missing = vec![Missing {
            event: "stalled-cycles-frontend".into(),
            reason: "not on this CPU".into(),
        }];
        apply(&mut r, &groups, &BTreeMap::from([(1, c)]), missing);
        let m = r.counters_missing.as_ref().unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].event, "stalled-cycles-backend");
        assert_eq!(m[1].reason, NEVER_SCHEDULED);
        assert!(render(&r).contains("group STALLS"));

        let mut r = report(&[1]);
        let groups = select(&["IPC"]).unwrap();
        let missing: Vec<Missing> = ["cycles", "instructions", "task-clock"]
            .iter()
            .map(|e| Missing {
                event: e.to_string(),
                reason: "no PMU".into(),
            })
            .collect();
        apply(&mut r, &groups, &BTreeMap::new(), missing);
        assert_eq!(
            render(&r),
            "group IPC: nothing counted (cycles, instructions, task-clock not countable here)\n"
        );
    }
}
