//! Remembered decisions: a per-user SQLite file of the pinnings autopin decided, keyed by
//! what makes a decision valid elsewhere — the program (its file's content), the machine
//! (a fingerprint of its topology), the CPUs the run may use, the thread count, the
//! objective and, under Slurm/MPI, the rank's share of the node. A run that finds its key
//! starts on the remembered pinning and checks it; what the check finds is written back.
//!
//! The store must never stop or slow a program: every fault (locked, read-only, full,
//! corrupt, a newer schema) is a [`MemoryError`] the caller reports once before running
//! without memory.

pub mod key;
pub mod policy;
pub mod record;
pub mod run_memory;
pub mod store;

pub use key::{fingerprint, program_identity, program_identity_kept, DecisionKey};
pub use record::{
    InvalidRecord, Outcome, PhaseDecision, Record, RememberedPinning, Selector, TeamTrial,
    TrialState, WholeRun,
};
pub use run_memory::{MemoryRequest, RunMemory};
pub use store::{default_path, MemoryError, Store, StoreOpening, SCHEMA_VERSION};
