//! Counting: the `CounterSource` trait (open for a target, read, close), the real
//! implementation on `perf_event_open(2)` and a scriptable fake for tests and simulations.
//!
//! A `Target` is what one set of counters is attached to: a thread (`pid=tid, cpu=-1`,
//! per-thread mode) or a CPU (`pid=-1, cpu=N`, per-CPU mode, optionally restricted to a
//! cgroup). Per-thread counters are not inherited by children (`inherit=false`): the engine
//! attaches every thread it tracks itself, so threads are never double counted.

use crate::probe::{classify_open_error, OpenContext};
pub use crate::scope::Target;
use autopin_objective::EventSpec;
use autopin_objective::PerfError;
use perf_event::events::Event;
use perf_event::{Builder, Counter, Group};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;

/// One cumulative reading: the raw count and how long the counter was enabled and actually
/// on the hardware (they differ when the kernel multiplexes more events than counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CounterValue {
    pub raw: u64,
    pub enabled_ns: u64,
    pub running_ns: u64,
}

impl CounterValue {
    /// Count extrapolated to the whole enabled time (perf's multiplexing scaling).
    /// `None` when the counter was enabled but never scheduled: the value is unknown, not 0.
    pub fn scaled(&self) -> Option<f64> {
        scale_counts(self.raw, self.enabled_ns, self.running_ns)
    }

    /// Scaled increase since `earlier`, using only the time that passed in between, so a
    /// counter that multiplexed differently in earlier intervals does not skew this one.
    pub fn delta_since(&self, earlier: &CounterValue) -> Option<f64> {
        scale_counts(
            self.raw.wrapping_sub(earlier.raw),
            self.enabled_ns.saturating_sub(earlier.enabled_ns),
            self.running_ns.saturating_sub(earlier.running_ns),
        )
    }
}

fn scale_counts(raw: u64, enabled: u64, running: u64) -> Option<f64> {
    if enabled == 0 {
        // Per-thread counters are enabled only while their thread runs; a thread that did
        // not run counted nothing, truly.
        return Some(raw as f64);
    }
    if running == 0 {
        return None;
    }
    if running >= enabled {
        return Some(raw as f64);
    }
    Some(raw as f64 * enabled as f64 / running as f64)
}

/// Open, read and close counters for targets. All values come back in the order of
/// `events()`.
pub trait CounterSource {
    fn events(&self) -> &[EventSpec];
    fn open(&mut self, target: Target) -> Result<(), PerfError>;
    fn read(&mut self, target: Target) -> Result<Vec<CounterValue>, PerfError>;
    fn close(&mut self, target: Target);
    /// Targets currently open.
    fn targets(&self) -> Vec<Target>;

    /// Read every open target; a target that cannot be read is reported, not dropped silently.
    #[allow(clippy::type_complexity)]
    fn read_all(&mut self) -> (BTreeMap<Target, Vec<CounterValue>>, Vec<(Target, String)>) {
        let mut ok = BTreeMap::new();
        let mut bad = Vec::new();
        for t in self.targets() {
            match self.read(t) {
                Ok(v) => {
                    ok.insert(t, v);
                }
                Err(e) => bad.push((t, e.to_string())),
            }
        }
        (ok, bad)
    }
}

/// How the events of one target are opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// One perf group: all events are on the hardware at the same time (ratios are exact),
    /// but a group larger than the hardware's counters never runs.
    Group,
    /// Each event on its own: the kernel multiplexes them and we scale each one.
    Independent,
    /// Group per-thread counters when there are 2 to 4 hardware events (ratios stay exact and
    /// the group fits the usual 4 general-purpose counters), else independent.
    Auto,
}

#[derive(Debug, Clone)]
pub struct CounterOptions {
    pub grouping: Grouping,
    /// Per-CPU mode only: count only tasks of this cgroup (v2 directory or v1 perf_event dir).
    pub cgroup: Option<PathBuf>,
}

impl Default for CounterOptions {
    fn default() -> Self {
        CounterOptions {
            grouping: Grouping::Auto,
            cgroup: None,
        }
    }
}

/// `perf_event_attr` fields straight from an `EventSpec`.
struct AttrEvent<'a>(&'a EventSpec);

impl Event for AttrEvent<'_> {
    fn update_attrs(self, attr: &mut perf_event_open_sys::bindings::perf_event_attr) {
        attr.type_ = self.0.type_;
        attr.config = self.0.config;
        attr.config1 = self.0.config1;
        attr.config2 = self.0.config2;
        attr.config3 = self.0.config3;
    }
}

enum Opened {
    Group { group: Group, members: Vec<Counter> },
    Single(Vec<Counter>),
}

/// The real thing: counters through `perf_event_open(2)`.
pub struct PerfCounterSource {
    events: Vec<EventSpec>,
    opts: CounterOptions,
    cgroup: Option<File>,
    open: BTreeMap<Target, Opened>,
    ctx: OpenContext,
}

impl PerfCounterSource {
    pub fn new(events: Vec<EventSpec>, opts: CounterOptions) -> Result<Self, PerfError> {
        if events.is_empty() {
            return Err(PerfError::Unsupported("counting with no events".into()));
        }
        let cgroup = match &opts.cgroup {
            Some(p) => Some(
                File::open(p)
                    .map_err(|e| PerfError::io(format!("opening cgroup {}", p.display()), e))?,
            ),
            None => None,
        };
        Ok(PerfCounterSource {
            events,
            opts,
            cgroup,
            open: BTreeMap::new(),
            ctx: OpenContext::current(),
        })
    }

    /// Per-CPU targets are never grouped: group reads of per-CPU software clocks return 0
    /// on current kernels (seen on 6.x: `cpu-clock` in a group read 0 while enabled), and
    /// per-CPU counts need no group to stay consistent with each other.
    fn grouped(&self, target: Target) -> bool {
        if matches!(target, Target::Cpu(_)) {
            return false;
        }
        match self.opts.grouping {
            Grouping::Group => true,
            Grouping::Independent => false,
            Grouping::Auto => {
                (2..=4).contains(&self.events.iter().filter(|e| e.needs_hardware()).count())
            }
        }
    }

    fn builder_for<'a>(&'a self, spec: &'a EventSpec, target: Target) -> Builder<'a> {
        let mut b = Builder::new(AttrEvent(spec));
        configure(&mut b, spec, target, self.cgroup.as_ref());
        b
    }

    fn open_err(&self, spec: &EventSpec, target: Target, e: std::io::Error) -> PerfError {
        classify_open_error(&e, spec, target, &self.ctx)
    }
}

/// Open one enabled counter (used by the probe, which wants the raw OS error).
pub(crate) fn open_single(spec: &EventSpec, target: Target) -> std::io::Result<Counter> {
    let mut b = Builder::new(AttrEvent(spec));
    configure(&mut b, spec, target, None);
    let mut c = b.build()?;
    c.enable()?;
    Ok(c)
}

fn configure<'a>(b: &mut Builder<'a>, spec: &EventSpec, target: Target, cgroup: Option<&'a File>) {
    b.exclude_user(!spec.user)
        .exclude_kernel(!spec.kernel)
        .exclude_hv(!spec.kernel)
        .inherit(false)
        .enabled(false);
    match target {
        Target::Thread(tid) => {
            b.observe_pid(tid).any_cpu();
        }
        Target::Cpu(cpu) => {
            match cgroup {
                Some(f) => b.observe_cgroup(f),
                None => b.any_pid(),
            };
            b.one_cpu(cpu);
        }
    }
}

impl CounterSource for PerfCounterSource {
    fn events(&self) -> &[EventSpec] {
        &self.events
    }

    fn open(&mut self, target: Target) -> Result<(), PerfError> {
        if self.open.contains_key(&target) {
            return Ok(());
        }
        let opened = if self.grouped(target) {
            // A software dummy leads the group so every real event is a member and shows up
            // in the group read (the crate's Group skips the leader's own value).
            let mut lb = Group::builder();
            match target {
                Target::Thread(tid) => {
                    lb.observe_pid(tid).any_cpu();
                }
                Target::Cpu(cpu) => {
                    match self.cgroup.as_ref() {
                        Some(f) => lb.observe_cgroup(f),
                        None => lb.any_pid(),
                    };
                    lb.one_cpu(cpu);
                }
            }
            lb.inherit(false);
            let mut group = lb
                .build_group()
                .map_err(|e| self.open_err(&self.events[0], target, e))?;
            let mut members = Vec::new();
            for spec in &self.events {
                let c = self
                    .builder_for(spec, target)
                    .build_with_group(&mut group)
                    .map_err(|e| self.open_err(spec, target, e))?;
                members.push(c);
            }
            group
                .enable()
                .map_err(|e| PerfError::io(format!("enabling counters on {target}"), e))?;
            Opened::Group { group, members }
        } else {
            let mut counters = Vec::new();
            for spec in &self.events {
                let c = self
                    .builder_for(spec, target)
                    .build()
                    .map_err(|e| self.open_err(spec, target, e))?;
                counters.push(c);
            }
            for c in &mut counters {
                c.enable()
                    .map_err(|e| PerfError::io(format!("enabling counters on {target}"), e))?;
            }
            Opened::Single(counters)
        };
        self.open.insert(target, opened);
        Ok(())
    }

    fn read(&mut self, target: Target) -> Result<Vec<CounterValue>, PerfError> {
        let Some(o) = self.open.get_mut(&target) else {
            return Err(PerfError::Unsupported(format!(
                "reading {target}, which has no open counters"
            )));
        };
        let ctx = |e| PerfError::io(format!("reading counters of {target}"), e);
        match o {
            Opened::Group { group, members } => {
                let data = group.read().map_err(ctx)?;
                let enabled = data.time_enabled().unwrap_or_default().as_nanos() as u64;
                let running = data.time_running().unwrap_or_default().as_nanos() as u64;
                members
                    .iter()
                    .map(|m| {
                        let raw = data.get(m).map(|e| e.value()).ok_or_else(|| {
                            PerfError::Unsupported(format!("group read of {target} lacks a member"))
                        })?;
                        Ok(CounterValue {
                            raw,
                            enabled_ns: enabled,
                            running_ns: running,
                        })
                    })
                    .collect()
            }
            Opened::Single(counters) => counters
                .iter_mut()
                .map(|c| {
                    let d = c.read_full().map_err(ctx)?;
                    Ok(CounterValue {
                        raw: d.count(),
                        enabled_ns: d.time_enabled().unwrap_or_default().as_nanos() as u64,
                        running_ns: d.time_running().unwrap_or_default().as_nanos() as u64,
                    })
                })
                .collect(),
        }
    }

    fn close(&mut self, target: Target) {
        // Dropping the counters closes their file descriptors.
        self.open.remove(&target);
    }

    fn targets(&self) -> Vec<Target> {
        self.open.keys().copied().collect()
    }
}

/// A scripted counter source: tests (and simulations in other crates) set cumulative values
/// per target and choose which opens fail.
#[derive(Debug, Default)]
pub struct FakeCounterSource {
    events: Vec<EventSpec>,
    values: BTreeMap<Target, Vec<CounterValue>>,
    open: BTreeSet<Target>,
    fail: BTreeMap<Target, String>,
    /// Every open and close, in order, for assertions.
    pub log: Vec<String>,
}

impl FakeCounterSource {
    pub fn new(events: Vec<EventSpec>) -> Self {
        FakeCounterSource {
            events,
            ..Default::default()
        }
    }

    /// Add `deltas[i]` to event i of `target`, which ran `running_ns` of `enabled_ns`.
    pub fn advance(&mut self, target: Target, deltas: &[u64], enabled_ns: u64, running_ns: u64) {
        let n = self.events.len();
        let v = self
            .values
            .entry(target)
            .or_insert_with(|| vec![CounterValue::default(); n]);
        for (i, c) in v.iter_mut().enumerate() {
            c.raw += deltas.get(i).copied().unwrap_or(0);
            c.enabled_ns += enabled_ns;
            c.running_ns += running_ns;
        }
    }

    /// Make `open(target)` fail with this message (e.g. the thread already exited).
    pub fn fail_open(&mut self, target: Target, why: &str) {
        self.fail.insert(target, why.to_string());
    }

    pub fn is_open(&self, target: Target) -> bool {
        self.open.contains(&target)
    }
}

impl CounterSource for FakeCounterSource {
    fn events(&self) -> &[EventSpec] {
        &self.events
    }

    fn open(&mut self, target: Target) -> Result<(), PerfError> {
        if let Some(why) = self.fail.get(&target) {
            return Err(PerfError::Unsupported(format!(
                "opening counters on {target}: {why}"
            )));
        }
        self.log.push(format!("open {target}"));
        self.open.insert(target);
        Ok(())
    }

    fn read(&mut self, target: Target) -> Result<Vec<CounterValue>, PerfError> {
        if !self.open.contains(&target) {
            return Err(PerfError::Unsupported(format!(
                "reading {target}, which has no open counters"
            )));
        }
        Ok(self
            .values
            .get(&target)
            .cloned()
            .unwrap_or_else(|| vec![CounterValue::default(); self.events.len()]))
    }

    fn close(&mut self, target: Target) {
        self.log.push(format!("close {target}"));
        self.open.remove(&target);
    }

    fn targets(&self) -> Vec<Target> {
        self.open.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_rules() {
        let v = CounterValue {
            raw: 100,
            enabled_ns: 1000,
            running_ns: 250,
        };
        assert_eq!(v.scaled(), Some(400.0));
        // Enabled but never on the hardware: unknown, never a silent zero.
        let v = CounterValue {
            raw: 0,
            enabled_ns: 1000,
            running_ns: 0,
        };
        assert_eq!(v.scaled(), None);
        // Thread never ran: a true zero.
        assert_eq!(CounterValue::default().scaled(), Some(0.0));
        let a = CounterValue {
            raw: 100,
            enabled_ns: 1000,
            running_ns: 1000,
        };
        let b = CounterValue {
            raw: 300,
            enabled_ns: 3000,
            running_ns: 1500,
        };
        // 200 counted in 500 of 2000 ns → 800.
        assert_eq!(b.delta_since(&a), Some(800.0));
    }

    #[test]
    fn fake_source_scripts_values_and_failures() {
        let ev = vec![autopin_objective::EventSpec::parse_with(
            "task-clock",
            &autopin_objective::Sysfs::at("/nonexistent"),
        )
        .unwrap()];
        let mut f = FakeCounterSource::new(ev);
        f.fail_open(Target::Thread(9), "No such process");
        assert!(f
            .open(Target::Thread(9))
            .unwrap_err()
            .to_string()
            .contains("No such process"));
        f.open(Target::Thread(1)).unwrap();
        f.advance(Target::Thread(1), &[5], 10, 10);
        assert_eq!(f.read(Target::Thread(1)).unwrap()[0].raw, 5);
        assert!(f.read(Target::Thread(2)).is_err());
        f.close(Target::Thread(1));
        assert_eq!(f.log, vec!["open thread 1", "close thread 1"]);
    }
}
