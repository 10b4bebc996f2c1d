//! Running the optimization: targets, thread tracking, pinning, strategies, reports.
//!
//! The decision logic ([`session`], [`strategy`], [`phase`]) is pure; the OS sits behind the
//! traits in [`os`], with Linux implementations and a simulated machine ([`sim`]).

pub mod candidate;
pub mod driver;
pub mod live;
pub mod mempolicy;
pub mod numa;
pub mod os;
pub mod phase;
pub mod report;
pub mod schedule;
pub mod session;
pub mod sim;
pub mod stats;
pub mod strategy;
pub mod target;
