//! One module per subcommand, each with its own `Args` and `run`.

pub mod topology;
pub mod cpus;
pub mod place;
pub mod candidates;
pub mod pin;
pub mod run;
pub mod attach;
pub mod report;
pub mod measure;
pub mod compare;
