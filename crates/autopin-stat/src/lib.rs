//! `autopin stat`'s analysis: from two samples of what Linux keeps per thread (time on a
//! CPU, time waiting for one, the CPU it last ran on, migrations, context switches) and of
//! the machine around the program (other processes' CPU time, cgroup throttling), the
//! per-thread figures and the verdicts that say why the program is slow where it runs, each
//! with its evidence and a command to try. Pure: the samples come from autopin-os.
//!
//! The pipeline: autopin-os takes each look ([`Snapshot`]) and hands it to a [`Watch`],
//! which keeps what the looks add up to and says when a report is due; a report measures
//! the [`Figures`] between two looks ([`figures`]: what happened) and then judges them
//! ([`verdict`]: what it means); the figures borrow from [`rules`] only which threads
//! work and which neighbours are worth naming. [`table`], [`svg`] and `--json` print it.

pub mod context;
pub mod counting;
pub mod figures;
pub mod groups;
pub mod rules;
pub mod sample;
pub mod svg;
pub mod table;
pub mod thread_stat;
pub mod verdict;
pub mod watch;

pub use context::{Context, Subject};
pub use figures::{measure, Figures};
pub use sample::{CpusSeen, Neighbour, Progress, Snapshot, ThreadSample, Throttling};
pub use thread_stat::ThreadStat;
pub use verdict::{analyze, judge, IntervalTally, StatReport, Verdict};
pub use watch::{IntervalReport, Moment, Watch, WatchPlan};
