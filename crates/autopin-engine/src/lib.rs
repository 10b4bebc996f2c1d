//! Running the optimization: targets, thread tracking, pinning, strategies, reports.

pub mod target;
