//! `autopin stat`'s analysis: from two samples of what Linux keeps per thread (time on a
//! CPU, time waiting for one, the CPU it last ran on, migrations, context switches) and of
//! the machine around the program (other processes' CPU time, cgroup throttling), the
//! per-thread figures and the verdicts that say why the program is slow where it runs, each
//! with its evidence and a command to try. Pure: the samples come from autopin-os.

pub mod counting;
pub mod groups;
pub mod rules;
pub mod sample;
pub mod svg;
pub mod table;
pub mod verdict;

pub use sample::{CpusSeen, Neighbour, Progress, Snapshot, ThreadSample, Throttling};
pub use verdict::{analyze, Context, IntervalTally, StatReport, Subject, ThreadStat, Verdict};
