//! autopin-compare: repeated-run experiments that compare pinning strategies on one program,
//! with the statistics that tell a real speedup from the OS scheduler's run-to-run noise.
//!
//! `strategy` turns names into command lines, `runner` runs and measures one command,
//! `experiment` schedules interleaved randomized rounds, `stats` and `summary` judge them,
//! `report` writes tables, exports and box plots; `plan` is the front door: a validated
//! [`ComparePlan`], one [`compare`] call, a typed [`CompareError`] with its exit status.

pub mod experiment;
pub mod plan;
pub mod report;
pub mod runner;
pub mod runs;
pub mod stats;
pub mod strategy;
pub mod summary;

pub use experiment::{Config, Event, Experiment, MetricError, RunRecord, Setup};
pub use plan::{compare, CompareError, ComparePlan, Comparison, Request};
pub use report::CsvError;
pub use runner::SignalHandlersError;
pub use strategy::{
    parse_strategy, Frontend, MachineCheck, PlacementCheck, Strategy, StrategyError, StrategyKind,
};
pub use summary::{summarize, Decision, StrategySummary, SummaryConfig};
