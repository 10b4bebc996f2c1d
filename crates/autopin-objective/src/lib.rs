//! autopin-objective: what "better" means for a pinning and what its numbers are, without
//! counting anything — the `--objective` grammar and the events it names (resolved against
//! the kernel's PMU description files under an injectable root), the counting mode and what
//! per-thread counting costs, what a program reports of its own progress, and whether the
//! objective tracked that progress. The engine plans and judges with these; `autopin-perf`
//! counts them on Linux.
//!
//! ```
//! use autopin_objective::{Delta, Objective};
//! use std::time::Duration;
//! let objective = Objective::parse_with("instructions:u", &autopin_objective::Sysfs::at("/nonexistent"))?;
//! let mut delta = Delta { elapsed: Duration::from_secs(1), ..Delta::default() };
//! delta.events.insert(objective.events()[0].key().to_string(), 2e9);
//! assert_eq!(objective.evaluate(&delta), Some(2e9));
//! # Ok::<(), autopin_objective::PerfError>(())
//! ```

pub mod counting;
pub mod error;
pub mod event;
pub mod objective;
pub mod progress;
pub mod sysfs;
pub mod tracking;

pub use counting::{CountingCost, CountingMode};
pub use error::{PerfError, Unavailable};
pub use event::EventSpec;
pub use objective::{Delta, Objective, ObjectiveKind, WarningContext};
pub use progress::{HeartbeatState, OmpCounts, OmpProgress, OmpRuntime, TeamFlags, TeamState};
pub use sysfs::Sysfs;
pub use tracking::{tracking, Tracking};
