//! Samples of a changing set of targets and the deltas between them.
//!
//! Threads come and go while a program runs. A delta between two samples covers **only the
//! targets present in both**; targets that appear only in the later sample are listed in
//! `joined`, those only in the earlier one in `left`, and their counts are *not* part of the
//! totals. So a thread starting or exiting between two samples changes which threads the
//! delta covers, and the engine sees that explicitly — it is never mistaken for the rate of
//! the same threads going up or down. (A thread that exits mid-interval and is removed before
//! the next sample loses its last partial interval; that is the price of never comparing
//! different thread sets.)

use crate::counters::{CounterSource, CounterValue, Target};
use autopin_objective::Delta;
use autopin_objective::PerfError;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Cumulative values of every open target at one instant.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Instant,
    /// Canonical event keys, in value order.
    pub events: Vec<String>,
    /// Multipliers from sysfs (`.scale`), in value order.
    pub scales: Vec<f64>,
    pub values: BTreeMap<Target, Vec<CounterValue>>,
    /// Targets whose read failed, with the reason (they are not in `values`).
    pub unreadable: Vec<(Target, String)>,
}

/// Change between two samples over the targets both contain.
#[derive(Debug, Clone)]
pub struct SampleDelta {
    pub elapsed: Duration,
    pub events: Vec<String>,
    /// Per target, per event: scaled increase in event units; `None` if the counter was
    /// multiplexed out for the whole interval.
    pub per_target: BTreeMap<Target, Vec<Option<f64>>>,
    /// Present only in the later sample (born, or attached, in between).
    pub joined: Vec<Target>,
    /// Present only in the earlier sample (exited, or detached, in between).
    pub left: Vec<Target>,
}

impl Sample {
    /// The delta from `earlier` to `self`. See the module docs for joined/left threads.
    pub fn delta_since(&self, earlier: &Sample) -> SampleDelta {
        let mut per_target = BTreeMap::new();
        let mut joined = Vec::new();
        for (t, now) in &self.values {
            match earlier.values.get(t) {
                Some(before) => {
                    let v = now
                        .iter()
                        .zip(before)
                        .enumerate()
                        .map(|(i, (n, b))| {
                            n.delta_since(b)
                                .map(|d| d * self.scales.get(i).copied().unwrap_or(1.0))
                        })
                        .collect();
                    per_target.insert(*t, v);
                }
                None => joined.push(*t),
            }
        }
        let left = earlier
            .values
            .keys()
            .filter(|t| !self.values.contains_key(t))
            .copied()
            .collect();
        SampleDelta {
            elapsed: self.at.saturating_duration_since(earlier.at),
            events: self.events.clone(),
            per_target,
            joined,
            left,
        }
    }
}

impl SampleDelta {
    fn index(&self, event: &str) -> Option<usize> {
        self.events.iter().position(|e| e == event)
    }

    /// Sum of one event over the covered targets; `None` if any covered target's value is
    /// unknown (multiplexed out) — a partial sum would look like a rate drop.
    pub fn total(&self, event: &str) -> Option<f64> {
        let i = self.index(event)?;
        self.per_target
            .values()
            .map(|v| v.get(i).copied().flatten())
            .sum::<Option<f64>>()
    }

    /// Per-second rate of one event on one target.
    pub fn rate(&self, target: Target, event: &str) -> Option<f64> {
        let i = self.index(event)?;
        let secs = self.elapsed.as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        self.per_target
            .get(&target)?
            .get(i)
            .copied()
            .flatten()
            .map(|v| v / secs)
    }

    /// The objective's view: event totals and elapsed time (heartbeat and energy left for
    /// the caller to fill in from their own sources). Events whose total is unknown are absent.
    pub fn to_delta(&self) -> Delta {
        Delta {
            elapsed: self.elapsed,
            events: self
                .events
                .iter()
                .filter_map(|e| self.total(e).map(|v| (e.clone(), v)))
                .collect(),
            heartbeats: None,
            energy_joules: None,
            omp_progress: None,
            omp_team_progress: None,
        }
    }
}

/// Tracks a set of targets on a counter source and takes samples.
pub struct Sampler<S: CounterSource> {
    source: S,
}

impl<S: CounterSource> Sampler<S> {
    pub fn new(source: S) -> Self {
        Sampler { source }
    }

    /// Start counting `target` (idempotent). Its counts start at zero now.
    pub fn add(&mut self, target: Target) -> Result<(), PerfError> {
        self.source.open(target)
    }

    /// Stop counting `target`; it is absent from later samples.
    pub fn remove(&mut self, target: Target) {
        self.source.close(target)
    }

    pub fn targets(&self) -> Vec<Target> {
        self.source.targets()
    }

    /// Read every target now.
    pub fn sample(&mut self, now: Instant) -> Sample {
        let events = self
            .source
            .events()
            .iter()
            .map(|e| e.key().to_string())
            .collect();
        let scales = self.source.events().iter().map(|e| e.scale).collect();
        let (values, unreadable) = self.source.read_all();
        Sample {
            at: now,
            events,
            scales,
            values,
            unreadable,
        }
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    pub fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }
}

/// A sampler on real counters for a counting mode. In per-CPU mode the CPUs are already
/// added (threads then need no `add`); in per-thread mode the caller adds each thread.
pub fn sampler_for(
    mode: &autopin_objective::CountingMode,
    events: Vec<autopin_objective::EventSpec>,
) -> Result<Sampler<crate::counters::PerfCounterSource>, PerfError> {
    use crate::counters::{CounterOptions, PerfCounterSource};
    use autopin_objective::CountingMode;
    let cgroup = match mode {
        CountingMode::PerCpu { cgroup, .. } => cgroup.clone(),
        CountingMode::PerThread => None,
    };
    let mut s = Sampler::new(PerfCounterSource::new(
        events,
        CounterOptions {
            cgroup,
            ..Default::default()
        },
    )?);
    if let CountingMode::PerCpu { cpus, .. } = mode {
        for &c in cpus {
            s.add(Target::Cpu(c))?;
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::FakeCounterSource;
    use autopin_objective::EventSpec;
    use autopin_objective::Sysfs;

    fn events() -> Vec<EventSpec> {
        let s = Sysfs::at("/nonexistent");
        vec![
            EventSpec::parse_with("instructions", &s).unwrap(),
            EventSpec::parse_with("cycles", &s).unwrap(),
        ]
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn thread_joining_and_leaving_is_not_a_rate_change() {
        let mut s = Sampler::new(FakeCounterSource::new(events()));
        let t0 = Instant::now();
        let (a, b, c) = (Target::Thread(10), Target::Thread(11), Target::Thread(12));
        s.add(a).unwrap();
        s.add(b).unwrap();
        s.source_mut().advance(a, &[1000, 2000], 100 * MS, 100 * MS);
        s.source_mut().advance(b, &[1000, 2000], 100 * MS, 100 * MS);
        let s0 = s.sample(t0);

        // Thread c is born and runs a lot; thread b exits. a keeps its pace.
        s.add(c).unwrap();
        s.source_mut()
            .advance(c, &[50_000, 60_000], 100 * MS, 100 * MS);
        s.source_mut().advance(a, &[1000, 2000], 100 * MS, 100 * MS);
        s.remove(b);
        let s1 = s.sample(t0 + Duration::from_millis(100));

        let d = s1.delta_since(&s0);
        assert_eq!(d.joined, vec![c]);
        assert_eq!(d.left, vec![b]);
        assert_eq!(d.per_target.keys().copied().collect::<Vec<_>>(), vec![a]);
        assert_eq!(d.total("instructions:u"), Some(1000.0));
        assert_eq!(d.rate(a, "instructions:u"), Some(10_000.0));
        assert_eq!(d.rate(c, "instructions:u"), None);

        // Next interval: a and c both present in both samples.
        s.source_mut().advance(c, &[500, 600], 100 * MS, 100 * MS);
        s.source_mut().advance(a, &[1000, 2000], 100 * MS, 100 * MS);
        let s2 = s.sample(t0 + Duration::from_millis(200));
        let d = s2.delta_since(&s1);
        assert!(d.joined.is_empty() && d.left.is_empty());
        assert_eq!(d.total("instructions:u"), Some(1500.0));
        assert_eq!(d.total("cycles:u"), Some(2600.0));
        let od = d.to_delta();
        assert_eq!(od.events.get("cycles:u"), Some(&2600.0));
        assert_eq!(od.elapsed, Duration::from_millis(100));
    }

    #[test]
    fn multiplexed_counts_are_scaled_and_unknown_is_none() {
        let mut s = Sampler::new(FakeCounterSource::new(events()));
        let t0 = Instant::now();
        let a = Target::Thread(1);
        s.add(a).unwrap();
        let s0 = s.sample(t0);
        // On the PMU only a quarter of the time.
        s.source_mut().advance(a, &[250, 500], 100 * MS, 25 * MS);
        let s1 = s.sample(t0 + Duration::from_millis(100));
        assert_eq!(s1.delta_since(&s0).total("instructions:u"), Some(1000.0));
        // Enabled but never scheduled: unknown, not zero, and the total is unknown too.
        s.source_mut().advance(a, &[0, 0], 100 * MS, 0);
        let s2 = s.sample(t0 + Duration::from_millis(200));
        let d = s2.delta_since(&s1);
        assert_eq!(d.total("instructions:u"), None);
        assert!(d.to_delta().events.is_empty());
        // A sleeping thread (not enabled at all) is a true zero.
        let s3 = s.sample(t0 + Duration::from_millis(300));
        assert_eq!(s3.delta_since(&s2).total("instructions:u"), Some(0.0));
    }

    #[test]
    fn failed_open_and_unreadable_targets_are_reported() {
        let mut s = Sampler::new(FakeCounterSource::new(events()));
        s.source_mut().fail_open(Target::Thread(7), "thread exited");
        assert!(s.add(Target::Thread(7)).is_err());
        assert!(s.targets().is_empty());
    }
}
