//! autopin-perf: numbers about threads — event specifications, counters (per thread or per
//! CPU), samples and deltas, objectives, energy, the heartbeat back channel, and estimates of
//! how much counting itself perturbs the target.
//!
//! Typical use by the engine:
//!
//! ```no_run
//! use autopin_perf::*;
//! use std::time::Instant;
//! # fn main() -> Result<(), PerfError> {
//! let objective = Objective::parse("instructions:u")?;       // or Objective::default()
//! let avail = probe();                                        // what this machine allows
//! avail.check(&objective.events())?;                          // clear error + fallback
//! let choice = choose_counting_mode(&avail, &ModeRequest {
//!     target_cpus: Some(vec![0, 1]), cpus_exclusive: false, ..Default::default()
//! });
//! let mut sampler = sampler_for(&choice.mode, objective.events())?;
//! if choice.mode == CountingMode::PerThread {
//!     sampler.add(Target::Thread(1234))?;                     // each tracked thread
//! }
//! let a = sampler.sample(Instant::now());
//! // ... probe window ...
//! let b = sampler.sample(Instant::now());
//! let d = b.delta_since(&a);                                  // threads in both samples only
//! let mut delta = d.to_delta();                               // + heartbeats / energy if any
//! delta.heartbeats = None;
//! let value: Option<f64> = objective.evaluate(&delta);
//! # let _ = value; Ok(()) }
//! ```

pub mod counters;
pub mod cpustat;
pub mod energy;
pub mod error;
pub mod event;
pub mod heartbeat;
pub mod mode;
pub mod objective;
pub mod openmp;
pub mod perturb;
pub mod probe;
pub mod sampler;
pub mod scope;
pub mod shared_words;
pub mod sysfs;
pub mod system_probe;
pub mod tracking;

pub use counters::{
    CounterOptions, CounterSource, CounterValue, FakeCounterSource, Grouping, PerfCounterSource,
    Target,
};
pub use energy::{open_energy, EnergySource};
pub use error::{PerfError, Unavailable};
pub use event::EventSpec;
pub use heartbeat::{
    HeartbeatChannel, HeartbeatState, HeartbeatWriter, OmpCounts, OmpProgress, OmpRuntime,
};
pub use mode::{choose_counting_mode, CountingMode, ModeChoice, ModeRequest};
pub use objective::{Delta, Objective, ObjectiveKind, WarningContext};
pub use openmp::openmp_runtime;
pub use perturb::{
    context_switches, context_switches_sampled, measure_counting_cost, CountingCost,
};
pub use probe::Availability;
pub use sampler::{sampler_for, Sample, SampleDelta, Sampler};
pub use sysfs::Sysfs;
pub use system_probe::probe;
pub use tracking::{tracking, Tracking};
