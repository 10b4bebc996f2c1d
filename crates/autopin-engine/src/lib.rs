//! Running the optimization: targets, thread tracking, pinning, strategies, reports.
//!
//! The decision logic ([`session`], [`strategy`], [`phase`]) is pure; the OS sits behind the
//! traits in [`os`], with Linux implementations and a simulated machine ([`sim`]).

pub mod driver;
pub mod error;
pub mod linux;
pub mod live;
pub mod numa;
pub mod os;
pub mod phase;
pub mod report;
pub mod run;
pub mod session;
pub mod sim;
pub mod stats;
pub mod strategy;
pub mod target;

pub use error::{EngineError, ErrorKind};
pub use run::{run, RunEnv, RunPlan};
