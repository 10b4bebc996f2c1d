//! autopin-perf: counting on Linux — counters through `perf_event_open(2)` (per thread or
//! per CPU), samples and deltas, energy from RAPL, the heartbeat channel's shared file, what
//! this machine lets us count, which counting mode to use, and how much counting itself
//! perturbs the target. What is counted and what it means (objectives, event specs, the
//! counting mode and cost, progress) is `autopin-objective`'s, which the engine uses alone.
//!
//! Typical use by the Linux platform:
//!
//! ```no_run
//! use autopin_objective::{CountingMode, Objective, PerfError};
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
pub mod heartbeat;
pub mod mode;
pub mod openmp;
pub mod perturb;
pub mod probe;
pub mod sampler;
pub mod scope;
pub mod shared_words;
pub mod system_probe;

pub use counters::{
    CounterOptions, CounterSource, CounterValue, FakeCounterSource, Grouping, PerfCounterSource,
    Target,
};
pub use energy::{open_energy, EnergySource};
pub use heartbeat::{HeartbeatChannel, HeartbeatWriter};
pub use mode::{choose_counting_mode, ModeChoice, ModeRequest};
pub use openmp::openmp_runtime;
pub use perturb::{context_switches, context_switches_sampled, measure_counting_cost};
pub use probe::Availability;
pub use sampler::{sampler_for, Sample, SampleDelta, Sampler};
pub use system_probe::probe;
