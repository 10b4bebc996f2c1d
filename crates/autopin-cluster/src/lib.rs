//! autopin as a citizen of the launchers clusters already have (Slurm, Open MPI, MPICH's
//! Hydra): no network layer of its own.
//!
//! - [`job_launcher`]: which job launcher started us (`srun`, `mpirun`, `mpiexec` or none)
//!   and who we are — job, step, node, local rank and size — read from the environment it
//!   set (a plain map, so detection is pure and testable).
//! - [`rendezvous`]: the local ranks of one step meet in a node-local directory (files only,
//!   no sockets), exchange one small message per round, and drop ranks that die or never come.
//! - [`coordinated`]: a [`autopin_engine::strategy::Strategy`] wrapper that makes the local
//!   ranks probe the same candidate at the same time and decide on the same one.
//! - [`names`]: per-rank report file names (`autopin-%j.%s.%n.%r.json`).
//! - [`node`]: this rank's part of the node, prepared in one call before the target starts
//!   (rendezvous, split, affinity, output names, the engine's launch plan).

pub mod coordinated;
pub mod job_launcher;
pub mod names;
pub mod node;
pub mod rendezvous;

pub use coordinated::{Combine, Coordinated, Coordinator, UnknownCombine};
pub use job_launcher::{detect, Launch, TasksPerNodeError};
pub use names::PatternError;
pub use rendezvous::{Rendezvous, RendezvousConfig};
