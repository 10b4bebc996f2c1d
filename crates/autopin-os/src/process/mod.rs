//! Launching or attaching to the target program and tracking its threads.
//!
//! - [`launch`]: start a program with extra environment and LD_PRELOAD, forward signals,
//!   map its exit status like a shell (the `autopin-launch` crate, shared with compare).
//! - [`registry`]: the shared file where the preload library records every thread.
//! - [`proc_scan`]: threads of any process from /proc (attach, static binaries, overflow).
//! - [`affinity`]: the engine's `Pinner` on Linux.
//! - [`elf`]: program lookup in PATH and static/dynamic detection.
//! - [`poll_pin`]: pinning by polling /proc where LD_PRELOAD cannot work.
//! - [`signals`]: the signal forwarding used by `launch`.
//! - [`exit_watch`]: waking up when the target ends.
//! - [`attach_mark`]: one autopin per attached process, and the mark of a pinning it left.

pub mod affinity;
pub mod attach_guard;
pub mod attach_mark;
pub mod cpu_clock;
pub mod exit_watch;
pub mod offspring;
pub mod poll_pin;
pub mod proc_scan;
pub mod registry;

// The launcher is shared with autopin-compare, which must not depend on the engine.
pub use autopin_launch::{elf, launch, signals};

pub use affinity::LinuxPinner;
pub use autopin_engine::pin_plan::{PinPlan, PlanCursor, SkipMask};
pub use autopin_engine::pinner::{PinError, Pinner, RecordingPinner};
pub use autopin_launch::{exit_code, spawn, ExitStatus, LaunchError, LaunchSpec, Launched};
pub use elf::Linkage;
pub use poll_pin::{pin_by_polling, PinOutcome, PollPinner};
pub use proc_scan::{ProcFs, ProcThread, TaskScan, ThreadOrder};
pub use registry::{Registry, ThreadState, TrackedThread};

/// The path of the preload library to pass as [`LaunchSpec::preload`]: `$AUTOPIN_PRELOAD`
/// or the library embedded in this binary, written once to a private per-user cache.
pub fn preload_library() -> std::io::Result<std::path::PathBuf> {
    autopin_preload::install()
}

/// [`preload_library`], calling `before_write` with the path of the temporary copy before
/// it is made (see [`autopin_preload::install_telling`]).
pub fn preload_library_telling(
    before_write: &mut dyn FnMut(&std::path::Path),
) -> std::io::Result<std::path::PathBuf> {
    autopin_preload::install_telling(before_write)
}

/// Whether this process runs one thread only (false where /proc cannot tell): a fork then
/// copies no lock another thread holds.
pub fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
}
