//! autopin's Linux adapters: everything the engine's run path needs from the OS, behind the
//! engine's traits (`Platform`, `ThreadSource`, `Meter`, `Pinner`, `Clock`).
//!
//! - [`process`]: starting programs (preload library, registry, signal forwarding, shell
//!   exit codes), attaching through /proc, thread creation order, pinning by polling.
//! - [`sources`]: the target's threads and the objective measured for real (perf_event,
//!   /proc schedstat, heartbeat, energy).
//! - [`stat_source`]: what `autopin stat` samples (per-thread scheduling figures, the
//!   other processes, cgroup throttling).
//! - [`platform`]: [`LinuxPlatform`], the engine's `Platform` on Linux.
//! - [`keeper`]: the process `autopin run`'s shell waits for, which passes the program's
//!   exit status on even when autopin is killed.
//! - [`numa`]: moving a process's pages after its threads.
//! - [`mempolicy`]: numactl-style memory policies set in a started program before `exec`.

pub mod cgroup;
pub mod cost_cache;
pub mod doctor_facts;
pub mod guardian;
pub mod keeper;
pub mod keeper_channel;
pub mod machine_cache;
pub mod opened_gpus;
pub mod show_source;
pub mod sources;
pub mod stat_counters;
pub mod stat_source;
pub mod stat_target;
pub mod top_source;
pub use autopin_launch::mempolicy;
pub mod numa;
pub mod os_error;
pub mod platform;
pub mod process;

pub use platform::LinuxPlatform;
pub use process::LinuxPinner;
