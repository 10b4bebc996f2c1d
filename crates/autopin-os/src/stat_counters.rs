//! `autopin stat -g`: counting event groups per thread with autopin-perf's counters. Which
//! events this machine can count is tried first, one event at a time, so that one event
//! the PMU lacks (or no PMU at all) costs only that event, never the whole table; the rest
//! are counted on every thread of the program, threads born later from the look that
//! first sees them.

use autopin_objective::{CountingCost, EventSpec, PerfError};
use autopin_perf::{CounterOptions, CounterSource, CounterValue, PerfCounterSource, Target};
use autopin_stat::counting::ThreadCounts;
use autopin_stat::groups::{self, Group, Missing};
use autopin_stat::{Snapshot, StatReport};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// What the machine allows for the events of the chosen groups.
pub struct CountingPlan {
    /// The events that can be counted: (perf's name as the catalogue writes it, the event).
    pub countable: Vec<(String, EventSpec)>,
    /// The others, and why.
    pub missing: Vec<Missing>,
    /// How the counters count, and why (as `run` chooses).
    pub mode: String,
    /// What per-thread counting of `countable` costs at each context switch (None: not
    /// measured, nothing to count).
    pub cost: Option<CountingCost>,
}

/// An Unavailable's cause and cure, without the `--objective` fallback that `run` offers.
fn why(e: &PerfError) -> String {
    match e {
        PerfError::Unavailable(u) => match &u.hint {
            Some(h) => format!("{}; to enable: {h}", u.reason),
            None => u.reason.clone(),
        },
        other => other.to_string(),
    }
}

/// Tries each of `events` on this thread and chooses the counting mode as `run` does for a
/// program allowed `cpus`; with `measure_cost`, also measures what counting costs a switch.
pub fn plan(events: &[&str], cpus: &[u32], measure_cost: bool) -> CountingPlan {
    let avail = autopin_perf::probe();
    let choice = autopin_perf::choose_counting_mode(
        &avail,
        &autopin_perf::ModeRequest {
            target_cpus: Some(cpus.iter().map(|c| *c as usize).collect()),
            cgroup: None,
            cpus_exclusive: false,
            forced: None,
        },
    );
    let me = Target::Thread(rustix::thread::gettid().as_raw_pid());
    let mut countable = Vec::new();
    let mut missing = Vec::new();
    for name in events {
        let tried = EventSpec::parse(name).and_then(|spec| {
            let machine = if spec.needs_hardware() {
                avail.hardware.as_ref().map(|_| ())
            } else {
                avail.software.as_ref().map(|_| ())
            };
            if let Err(u) = machine {
                return Err(PerfError::Unavailable(u.clone()));
            }
            let mut alone = PerfCounterSource::new(vec![spec.clone()], CounterOptions::default())?;
            alone.open(me)?;
            alone.close(me);
            Ok(spec)
        });
        match tried {
            Ok(spec) => countable.push((name.to_string(), spec)),
            Err(e) => missing.push(Missing {
                event: name.to_string(),
                reason: why(&e),
            }),
        }
    }
    let cost = if measure_cost && !countable.is_empty() {
        let specs: Vec<EventSpec> = countable.iter().map(|(_, s)| s.clone()).collect();
        autopin_perf::measure_counting_cost(&specs, std::time::Duration::from_millis(200)).ok()
    } else {
        None
    };
    let mode = match choice.mode {
        autopin_objective::CountingMode::PerThread => choice.reason,
        // stat's table is per thread, which per-CPU counts cannot split.
        autopin_objective::CountingMode::PerCpu { .. } => format!(
            "per thread, as stat's table needs (run would count per CPU: {})",
            choice.reason
        ),
    };
    CountingPlan {
        countable,
        missing,
        mode,
        cost,
    }
}

/// The counters' values of every counted thread at one moment.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Seconds since `stat` began (the looks' clock).
    pub t: f64,
    values: BTreeMap<i32, Vec<CounterValue>>,
}

impl Reading {
    /// A reading of no thread at `t`.
    pub fn empty(t: f64) -> Self {
        Reading {
            t,
            values: BTreeMap::new(),
        }
    }
}

/// Counters on every thread of a program.
pub struct GroupCounters<S: CounterSource> {
    source: S,
    /// The catalogue's name of each event of `source`, in its order.
    names: Vec<String>,
    /// When counting began on each thread counted.
    began: BTreeMap<i32, f64>,
    /// Threads whose counters could not be opened, by reason (a thread that ended before
    /// it could be counted is not among them).
    refused: BTreeMap<String, BTreeSet<i32>>,
    tried: BTreeSet<i32>,
}

impl GroupCounters<PerfCounterSource> {
    /// Real counters for a plan's countable events; None when there are none.
    pub fn for_plan(plan: &CountingPlan) -> Option<Self> {
        let specs: Vec<EventSpec> = plan.countable.iter().map(|(_, s)| s.clone()).collect();
        let names = plan.countable.iter().map(|(n, _)| n.clone()).collect();
        let source = PerfCounterSource::new(specs, CounterOptions::default()).ok()?;
        Some(GroupCounters::new(source, names))
    }
}

fn thread_gone(e: &PerfError) -> bool {
    matches!(e, PerfError::Io { source, .. } if source.raw_os_error() == Some(libc::ESRCH))
}

impl<S: CounterSource> GroupCounters<S> {
    /// `names[i]` is the catalogue's name of `source.events()[i]`.
    pub fn new(source: S, names: Vec<String>) -> Self {
        GroupCounters {
            source,
            names,
            began: BTreeMap::new(),
            refused: BTreeMap::new(),
            tried: BTreeSet::new(),
        }
    }

    /// Starts counting each of `tids` not yet counted, at `t`.
    pub fn follow(&mut self, tids: impl IntoIterator<Item = i32>, t: f64) {
        for tid in tids {
            if !self.tried.insert(tid) {
                continue;
            }
            match self.source.open(Target::Thread(tid)) {
                Ok(()) => {
                    self.began.insert(tid, t);
                }
                Err(e) if thread_gone(&e) => {}
                Err(e) => {
                    self.refused.entry(why(&e)).or_default().insert(tid);
                }
            }
        }
    }

    /// Reads every counted thread now (`t` on the looks' clock).
    pub fn read(&mut self, t: f64) -> Reading {
        let (values, _) = self.source.read_all();
        Reading {
            t,
            values: values
                .into_iter()
                .filter_map(|(target, v)| match target {
                    Target::Thread(tid) => Some((tid, v)),
                    Target::Cpu(_) => None,
                })
                .collect(),
        }
    }

    /// Each thread's counts from `from` to `to` (a thread first counted after `from`: since
    /// counting began on it).
    pub fn counts(&self, from: &Reading, to: &Reading) -> BTreeMap<i32, ThreadCounts> {
        let events = self.source.events();
        to.values
            .iter()
            .map(|(tid, now)| {
                let (before, start) = match from.values.get(tid) {
                    Some(b) => (b.clone(), from.t),
                    None => (
                        vec![CounterValue::default(); now.len()],
                        self.began.get(tid).copied().unwrap_or(from.t).max(from.t),
                    ),
                };
                let mut c = ThreadCounts {
                    seconds: (to.t - start).max(0.0),
                    ..Default::default()
                };
                for (i, (n, b)) in now.iter().zip(&before).enumerate() {
                    let name = self.names[i].clone();
                    match n.delta_since(b) {
                        Some(v) => {
                            let running = n.running_ns.saturating_sub(b.running_ns);
                            let enabled = n.enabled_ns.saturating_sub(b.enabled_ns);
                            if running < enabled {
                                c.multiplexed.push(name.clone());
                            }
                            c.counters
                                .insert(name, v * events.get(i).map_or(1.0, |e| e.scale));
                        }
                        None => c.unscheduled.push(name),
                    }
                }
                (*tid, c)
            })
            .collect()
    }

    /// The events not counted on some threads, once per reason: which threads and why.
    pub fn refused(&self) -> Vec<Missing> {
        self.refused
            .iter()
            .flat_map(|(reason, tids)| {
                let tids: Vec<String> = tids.iter().map(i32::to_string).collect();
                let reason = format!("on thread(s) {}: {reason}", tids.join(","));
                self.names.iter().map(move |e| Missing {
                    event: e.clone(),
                    reason: reason.clone(),
                })
            })
            .collect()
    }
}

/// The plan for the events of `groups` on a program: which can be counted on the CPUs
/// `pid` may use (0: this process's), how, and at what cost. Found before the program
/// starts, so that the probes do not run beside it.
pub fn plan_for(pid: i32, groups: &[&Group]) -> CountingPlan {
    let cpus: Vec<u32> = autopin_topology::affinity::get(pid)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    plan(&groups::events_of(groups), &cpus, true)
}

/// `stat -g`: the groups' counters on a program's threads, and the reading each report
/// counts from, on the looks' clock.
pub struct Counting {
    plan: CountingPlan,
    groups: Vec<&'static Group>,
    counters: Option<GroupCounters<PerfCounterSource>>,
    begun: Instant,
    /// The reading at the first look, and at the start of the current interval.
    first: Reading,
    interval: Reading,
}

impl Counting {
    /// Counts `plan`'s events on the threads of the first look; `begun` starts the looks'
    /// clock.
    pub fn begin(
        plan: CountingPlan,
        groups: Vec<&'static Group>,
        first: &Snapshot,
        begun: Instant,
    ) -> Self {
        let mut c = Counting {
            counters: GroupCounters::for_plan(&plan),
            plan,
            groups,
            begun,
            first: Reading::default(),
            interval: Reading::default(),
        };
        c.follow(first);
        c.first = c.read();
        c.interval = c.first.clone();
        c
    }

    /// Counts the threads a look sees for the first time.
    pub fn follow(&mut self, look: &Snapshot) {
        if let Some(c) = self.counters.as_mut() {
            c.follow(look.threads.iter().map(|t| t.tid), look.t);
        }
    }

    fn read(&mut self) -> Reading {
        let t = self.begun.elapsed().as_secs_f64();
        match self.counters.as_mut() {
            Some(c) => c.read(t),
            None => Reading::empty(t),
        }
    }

    /// Puts the counts since the first look (or, for an interval, since the last interval)
    /// into `report`, with how they were counted and what counting cost.
    pub fn fill(&mut self, report: &mut StatReport, interval: bool) {
        let now = self.read();
        let from = if interval {
            &self.interval
        } else {
            &self.first
        };
        let (counts, mut missing) = match &self.counters {
            Some(c) => (c.counts(from, &now), c.refused()),
            None => Default::default(),
        };
        missing.splice(0..0, self.plan.missing.iter().cloned());
        autopin_stat::counting::apply(report, &self.groups, &counts, missing);
        report.counting_mode = Some(self.plan.mode.clone());
        let threads = &report.figures.threads;
        report.counting_overhead = self.plan.cost.as_ref().map(|cost| {
            let switches: u64 = threads
                .iter()
                .map(|t| t.voluntary_switches + t.involuntary_switches)
                .sum();
            let cpus: BTreeSet<u32> = threads.iter().flat_map(|t| t.cpus.clone()).collect();
            cost.estimated_slowdown(
                switches as f64 / report.figures.seconds.max(1e-9),
                cpus.len(),
            )
        });
        if interval {
            self.interval = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_objective::Sysfs;
    use autopin_perf::FakeCounterSource;

    fn source(names: &[&str]) -> FakeCounterSource {
        let sysfs = Sysfs::at("/nonexistent");
        FakeCounterSource::new(
            names
                .iter()
                .map(|n| EventSpec::parse_with(n, &sysfs).unwrap())
                .collect(),
        )
    }

    #[test]
    fn threads_born_later_count_from_their_first_look_and_multiplexing_is_marked() {
        let names = ["task-clock", "context-switches"];
        let mut src = source(&names);
        src.fail_open(Target::Thread(3), "Permission denied");
        let mut g = GroupCounters::new(src, names.iter().map(|n| n.to_string()).collect());
        g.follow([1, 3], 0.0);
        let first = g.read(0.0);
        g.source
            .advance(Target::Thread(1), &[500_000_000, 7], 1000, 1000);
        g.follow([1, 2], 1.0);
        g.source
            .advance(Target::Thread(2), &[200_000_000, 3], 1000, 500);
        g.source
            .advance(Target::Thread(1), &[500_000_000, 3], 1000, 1000);
        let last = g.read(2.0);
        let c = g.counts(&first, &last);
        assert!((c[&1].counters["task-clock"] - 1.0).abs() < 1e-12);
        assert_eq!(c[&1].counters["context-switches"], 10.0);
        assert_eq!(c[&1].seconds, 2.0);
        assert!(c[&1].multiplexed.is_empty());
        // Born at 1.0 s: counted over its one second, counted half the time → doubled
        // (task-clock counts nanoseconds; the event's scale makes them seconds).
        assert_eq!(c[&2].seconds, 1.0);
        assert!((c[&2].counters["task-clock"] - 0.4).abs() < 1e-12);
        assert_eq!(c[&2].multiplexed, ["task-clock", "context-switches"]);
        assert!(!c.contains_key(&3));
        let r = g.refused();
        assert_eq!(r.len(), 2);
        assert!(
            r[0].reason.starts_with("on thread(s) 3: ") && r[0].reason.contains("Permission"),
            "{r:?}"
        );
        // A thread tried once is not tried again at every look.
        g.follow([3], 2.0);
        assert_eq!(g.source.log.iter().filter(|l| l.contains("3")).count(), 0);
    }

    #[test]
    fn a_counter_never_on_the_hardware_is_unknown_not_zero() {
        let names = ["cycles"];
        let mut g = GroupCounters::new(source(&names), vec!["cycles".into()]);
        g.follow([1], 0.0);
        let first = g.read(0.0);
        g.source.advance(Target::Thread(1), &[0], 1000, 0);
        let last = g.read(1.0);
        let c = g.counts(&first, &last);
        assert!(c[&1].counters.is_empty());
        assert_eq!(c[&1].unscheduled, ["cycles"]);
    }
}
