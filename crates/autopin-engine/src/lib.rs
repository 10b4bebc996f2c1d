//! Running the optimization: targets, thread tracking, pinning, strategies, reports.
//!
//! The decision logic ([`session`], [`strategy`], [`phase`]) is pure; the OS sits behind the
//! traits in [`sensors`], [`pinner`] and [`run::env`], with a simulated machine ([`sim`]); the
//! Linux implementations live in `autopin-os`, so this crate makes no system calls.

pub mod driver;
pub mod error;
pub mod job_report;
pub mod phase;
pub mod pin_plan;
pub mod pinner;
pub mod report;
pub mod rng;
pub mod run;
pub mod sensors;
pub mod session;
pub mod sim;
pub mod strategy;

pub use error::{EngineError, ErrorKind, MergeError, PinPlanError};
pub use run::{run, RunEnv, RunPlan};
