//! One module per subcommand, each with its own `Args` and `run`.

pub mod attach;
pub mod candidates;
pub mod compare;
pub mod cpus;
pub mod doctor;
pub mod engine_args;
pub mod guard;
pub mod install;
pub mod measure;
pub mod memory;
pub mod pin;
pub mod place;
pub mod report;
pub mod report_merge;
pub mod run;
pub mod show;
pub mod simulate;
pub mod stat;
pub mod top;
pub mod topology;
