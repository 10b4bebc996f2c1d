//! The one program launcher of autopin: `run`, `pin` (through autopin-os) and `compare`
//! start programs here, so a program's exit status and the signals autopin passes on mean
//! the same everywhere.
//!
//! - [`launch`]: start a program (extra environment, LD_PRELOAD, affinity and memory policy
//!   set before `exec`, inherited or captured output), wait for it, with its resource usage.
//! - [`exit`]: [`ExitStatus`], a program's end mapped like a shell (128 + N for signal N;
//!   [`LaunchError`] gives 127/126 for a program that is missing or cannot run).
//! - [`signals`]: forwarding the signals sent to autopin to the programs it started.
//! - [`elf`]: finding the program on PATH; whether LD_PRELOAD can reach it.
//! - [`mempolicy`]: numactl-style memory policies set in the child before `exec`.

pub mod elf;
pub mod exit;
pub mod launch;
pub mod mempolicy;
pub mod signals;

pub use exit::ExitStatus;
pub use launch::{check_program, exit_code, spawn, LaunchError, LaunchSpec, Launched, PidNote};
