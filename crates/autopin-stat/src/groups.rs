//! The event groups `autopin stat -g GROUP` counts per thread: each a handful of perf
//! events (perf's own names) and the metrics derived from them. Pure: which events can be
//! opened, and their counts, come from the caller.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// What a metric divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    /// Another event of the group.
    Event(&'static str),
    /// The seconds the thread was counted (wall-clock time).
    Second,
}

/// One derived figure: `factor × numerator / per`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    /// Its name: a column of the table and a key in the JSON.
    pub name: &'static str,
    pub numerator: &'static str,
    pub per: Per,
    pub factor: f64,
    /// A share (0..1), shown as a percentage in the table; the JSON keeps the fraction.
    pub share: bool,
    /// The formula in words where the factor reads better spelled out.
    pub written: Option<&'static str>,
}

impl Metric {
    /// The formula as a person reads it: `instructions / cycles`.
    pub fn formula(&self) -> String {
        if let Some(w) = self.written {
            return w.to_string();
        }
        let per = match self.per {
            Per::Event(e) => e.to_string(),
            Per::Second => "seconds".into(),
        };
        let factor = if self.factor == 1.0 {
            String::new()
        } else {
            format!("{} × ", autopin_human::si(self.factor))
        };
        format!("{factor}{} / {per}", self.numerator)
    }

    /// Its value from a thread's counts over `seconds`; None when an operand was not
    /// counted, or the divisor is 0 (a ratio of nothing is undefined, not 0).
    pub fn value(&self, counts: &BTreeMap<String, f64>, seconds: f64) -> Option<f64> {
        let top = *counts.get(self.numerator)?;
        let below = match self.per {
            Per::Event(e) => *counts.get(e)?,
            Per::Second => seconds,
        };
        (below > 0.0).then(|| self.factor * top / below)
    }
}

/// One event group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    pub name: &'static str,
    pub description: &'static str,
    /// perf's event names, in the order the table shows them.
    pub events: &'static [&'static str],
    pub metrics: &'static [Metric],
}

impl Group {
    /// Does it count only kernel software events (no PMU needed)?
    pub fn software_only(&self) -> bool {
        self.events.iter().all(|e| is_software(e))
    }
}

/// perf's software events: the kernel counts them on any machine, PMU or not.
pub fn is_software(event: &str) -> bool {
    matches!(
        event,
        "task-clock"
            | "cpu-clock"
            | "context-switches"
            | "cpu-migrations"
            | "page-faults"
            | "minor-faults"
            | "major-faults"
    )
}

/// Clock events: counted in seconds (perf counts nanoseconds; autopin-perf scales them).
pub fn is_clock(event: &str) -> bool {
    matches!(event, "task-clock" | "cpu-clock")
}

const fn ratio(name: &'static str, numerator: &'static str, per: &'static str) -> Metric {
    Metric {
        name,
        numerator,
        per: Per::Event(per),
        factor: 1.0,
        share: false,
        written: None,
    }
}

const fn share(name: &'static str, numerator: &'static str, per: &'static str) -> Metric {
    Metric {
        share: true,
        ..ratio(name, numerator, per)
    }
}

/// Occurrences of `numerator` per thousand instructions.
const fn per_kilo_instructions(name: &'static str, numerator: &'static str) -> Metric {
    Metric {
        factor: 1000.0,
        ..ratio(name, numerator, "instructions")
    }
}

const fn per_second(name: &'static str, numerator: &'static str, factor: f64) -> Metric {
    Metric {
        name,
        numerator,
        per: Per::Second,
        factor,
        share: false,
        written: None,
    }
}

/// Every group, in the order `-g list` shows them.
pub const GROUPS: &[Group] = &[
    Group {
        name: "SW",
        description: "kernel software events: CPU time, context switches, migrations, page faults (no PMU needed)",
        events: &["task-clock", "context-switches", "cpu-migrations", "page-faults"],
        metrics: &[
            per_second("CPUs", "task-clock", 1.0),
            per_second("cs/s", "context-switches", 1.0),
            per_second("migrations/s", "cpu-migrations", 1.0),
            per_second("faults/s", "page-faults", 1.0),
        ],
    },
    Group {
        name: "IPC",
        description: "instructions per cycle and the clock the thread ran at",
        events: &["cycles", "instructions", "task-clock"],
        metrics: &[
            ratio("IPC", "instructions", "cycles"),
            ratio("CPI", "cycles", "instructions"),
            Metric {
                factor: 1e-9,
                written: Some("cycles / task-clock seconds / 10^9"),
                ..ratio("GHz", "cycles", "task-clock")
            },
        ],
    },
    Group {
        name: "BRANCH",
        description: "branches and mispredicted branches",
        events: &["instructions", "branches", "branch-misses"],
        metrics: &[
            share("branch-rate", "branches", "instructions"),
            share("branch-miss-rate", "branch-misses", "branches"),
            per_kilo_instructions("branch-MPKI", "branch-misses"),
        ],
    },
    Group {
        name: "CACHE",
        description: "cache references and misses as the CPU's generic cache events count them (usually the last-level cache)",
        events: &["instructions", "cache-references", "cache-misses"],
        metrics: &[
            share("cache-miss-rate", "cache-misses", "cache-references"),
            per_kilo_instructions("cache-MPKI", "cache-misses"),
        ],
    },
    Group {
        name: "L1D",
        description: "level 1 data cache loads and load misses",
        events: &["instructions", "L1-dcache-loads", "L1-dcache-load-misses"],
        metrics: &[
            share("L1-miss-rate", "L1-dcache-load-misses", "L1-dcache-loads"),
            per_kilo_instructions("L1-MPKI", "L1-dcache-load-misses"),
        ],
    },
    Group {
        name: "TLB",
        description: "data TLB loads and load misses",
        events: &["instructions", "dTLB-loads", "dTLB-load-misses"],
        metrics: &[
            share("dTLB-miss-rate", "dTLB-load-misses", "dTLB-loads"),
            per_kilo_instructions("dTLB-MPKI", "dTLB-load-misses"),
        ],
    },
    Group {
        name: "STALLS",
        description: "cycles the front end (fetch, decode) or the back end (execution, memory) stalled; not every CPU counts these",
        events: &["cycles", "stalled-cycles-frontend", "stalled-cycles-backend"],
        metrics: &[
            share("frontend-stall-rate", "stalled-cycles-frontend", "cycles"),
            share("backend-stall-rate", "stalled-cycles-backend", "cycles"),
        ],
    },
    Group {
        name: "MEM",
        description: "last-level cache loads and load misses; read-MB/s is an estimate of the thread's memory reads (64 bytes a miss), not the uncore's memory-controller count, which is per socket and not per thread",
        events: &["LLC-loads", "LLC-load-misses"],
        metrics: &[
            share("LLC-miss-rate", "LLC-load-misses", "LLC-loads"),
            Metric {
                written: Some("64 bytes × LLC-load-misses / seconds / 10^6"),
                ..per_second("read-MB/s", "LLC-load-misses", 64e-6)
            },
        ],
    },
];

/// A group name that is not in the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownGroup(pub String);

impl fmt::Display for UnknownGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
        write!(
            f,
            "-g {}: no such event group; the groups are {} (autopin stat -g list shows their events and metrics)",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownGroup {}

/// The groups named by `-g` values (each a name or a comma list; case does not matter),
/// each once, in the order first named.
pub fn select<S: AsRef<str>>(values: &[S]) -> Result<Vec<&'static Group>, UnknownGroup> {
    let mut chosen: Vec<&'static Group> = Vec::new();
    for name in values
        .iter()
        .flat_map(|v| v.as_ref().split(','))
        .map(str::trim)
    {
        let g = GROUPS
            .iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownGroup(name.to_string()))?;
        if !chosen.iter().any(|c| c.name == g.name) {
            chosen.push(g);
        }
    }
    Ok(chosen)
}

/// The events of `groups`, each once, in the order first named.
pub fn events_of(groups: &[&Group]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for e in groups.iter().flat_map(|g| g.events.iter().copied()) {
        if !v.contains(&e) {
            v.push(e);
        }
    }
    v
}

/// `-g list`: every group with its events and the formula of each metric.
pub fn list_text() -> String {
    let mut out = String::from(
        "Event groups for autopin stat -g GROUP (several: -g IPC,BRANCH or -g IPC -g BRANCH).\n\
         Counted per thread; hardware events count user space only; without a hardware PMU only\n\
         software events (task-clock, context-switches, ...) count: SW is all software.\n",
    );
    for g in GROUPS {
        out.push_str(&format!("\n{}: {}\n", g.name, g.description));
        out.push_str(&format!("  events: {}\n", g.events.join(", ")));
        for m in g.metrics {
            out.push_str(&format!(
                "  {} = {}{}\n",
                m.name,
                m.formula(),
                if m.share { " (a share, in %)" } else { "" }
            ));
        }
    }
    out
}

/// An event that was not counted, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    pub event: String,
    pub reason: String,
}

/// The one block that says what was not counted: events sharing a reason on one line.
/// Empty when everything was counted.
pub fn missing_text(missing: &[Missing]) -> String {
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for m in missing {
        match by_reason.iter_mut().find(|(r, _)| *r == m.reason) {
            Some((_, events)) => events.push(&m.event),
            None => by_reason.push((&m.reason, vec![&m.event])),
        }
    }
    by_reason
        .iter()
        .map(|(reason, events)| format!("not counted: {} — {reason}\n", events.join(", ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn every_group_is_well_formed() {
        let names: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
        for g in GROUPS {
            assert_eq!(
                names.iter().filter(|n| **n == g.name).count(),
                1,
                "{}",
                g.name
            );
            assert!(!g.events.is_empty() && !g.metrics.is_empty(), "{}", g.name);
            for m in g.metrics {
                // A metric reads only its own group's events.
                assert!(g.events.contains(&m.numerator), "{} {}", g.name, m.name);
                if let Per::Event(e) = m.per {
                    assert!(g.events.contains(&e), "{} {}", g.name, m.name);
                }
            }
        }
        // Exactly one group works without a PMU, and it is all software.
        let sw: Vec<&Group> = GROUPS.iter().filter(|g| g.software_only()).collect();
        assert_eq!(sw.len(), 1);
        assert_eq!(sw[0].name, "SW");
    }

    #[test]
    fn formulas() {
        let c = counts(&[
            ("cycles", 2e9),
            ("instructions", 3e9),
            ("task-clock", 1.0),
            ("branches", 5e8),
            ("branch-misses", 1e7),
            ("cache-references", 1e6),
            ("cache-misses", 2.5e5),
            ("L1-dcache-loads", 1e9),
            ("L1-dcache-load-misses", 5e7),
            ("context-switches", 40.0),
            ("LLC-load-misses", 1e6),
        ]);
        let value = |group: &str, metric: &str, secs: f64| {
            let g = select(&[group]).unwrap()[0];
            let m = g.metrics.iter().find(|m| m.name == metric).unwrap();
            m.value(&c, secs).unwrap()
        };
        assert_eq!(value("IPC", "IPC", 2.0), 1.5);
        assert!((value("IPC", "CPI", 2.0) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(value("IPC", "GHz", 2.0), 2.0);
        assert_eq!(value("BRANCH", "branch-miss-rate", 2.0), 0.02);
        assert!((value("BRANCH", "branch-rate", 2.0) - 1.0 / 6.0).abs() < 1e-12);
        assert!((value("BRANCH", "branch-MPKI", 2.0) - 10.0 / 3.0).abs() < 1e-9);
        assert_eq!(value("CACHE", "cache-miss-rate", 2.0), 0.25);
        assert_eq!(value("L1D", "L1-miss-rate", 2.0), 0.05);
        assert_eq!(value("SW", "CPUs", 2.0), 0.5);
        assert_eq!(value("SW", "cs/s", 2.0), 20.0);
        assert_eq!(value("MEM", "read-MB/s", 2.0), 32.0);
        // An operand not counted, or nothing to divide by: no value, never 0.
        let ipc = &select(&["IPC"]).unwrap()[0].metrics[0];
        assert_eq!(ipc.value(&counts(&[("instructions", 5.0)]), 1.0), None);
        assert_eq!(
            ipc.value(&counts(&[("instructions", 5.0), ("cycles", 0.0)]), 1.0),
            None
        );
        assert_eq!(ipc.formula(), "instructions / cycles");
        let mpki = select(&["BRANCH"]).unwrap()[0].metrics[2];
        assert_eq!(mpki.formula(), "1k × branch-misses / instructions");
    }

    #[test]
    fn selection_takes_lists_any_case_and_names_the_valid_groups() {
        let g = select(&["ipc,BRANCH", "IPC", "sw"]).unwrap();
        let names: Vec<&str> = g.iter().map(|g| g.name).collect();
        assert_eq!(names, ["IPC", "BRANCH", "SW"]);
        assert_eq!(
            events_of(&g),
            [
                "cycles",
                "instructions",
                "task-clock",
                "branches",
                "branch-misses",
                "context-switches",
                "cpu-migrations",
                "page-faults"
            ]
        );
        let e = select(&["IPC,nosuch"]).unwrap_err().to_string();
        assert!(e.starts_with("-g nosuch: no such event group"), "{e}");
        for g in GROUPS {
            assert!(e.contains(g.name), "{e}");
        }
    }

    #[test]
    fn list_shows_every_group_event_and_metric() {
        let t = list_text();
        for g in GROUPS {
            assert!(t.contains(&format!("\n{}: ", g.name)), "{t}");
            for e in g.events {
                assert!(t.contains(e), "{e}");
            }
            for m in g.metrics {
                assert!(t.contains(&format!("  {} = ", m.name)), "{}", m.name);
            }
        }
    }

    #[test]
    fn missing_events_share_a_line_per_reason() {
        let m = |e: &str, r: &str| Missing {
            event: e.into(),
            reason: r.into(),
        };
        let t = missing_text(&[
            m("cycles", "no PMU"),
            m("instructions", "no PMU"),
            m("stalled-cycles-frontend", "not on this CPU"),
        ]);
        assert_eq!(
            t,
            "not counted: cycles, instructions — no PMU\nnot counted: stalled-cycles-frontend — not on this CPU\n"
        );
        assert_eq!(missing_text(&[]), "");
    }
}
