//! What a run needs from the world, as narrow traits: the clock and the pinner the driver
//! already uses, a [`Platform`] that starts or attaches to the target and opens the
//! objective's meter, and a [`RunSink`] for progress lines and partial reports. Linux
//! implements them in `autopin-os`; the `sim` module simulates them, so the whole run path —
//! objective choice, decisions, exit codes, incomplete searches, reports — is tested in
//! milliseconds.

use super::plan::{ObjectiveSource, TargetSpec};
use crate::error::EngineError;
use crate::pin_plan::SkipMask;
use crate::pinner::Pinner;
use crate::report::{MigrationOutcome, Report};
use crate::sensors::{Clock, Meter, OsError, ThreadSource};
use autopin_objective::{CountingCost, EventSpec, Objective};
use autopin_placement::MemPolicy;
use autopin_topology::{CpuSet, Machine};

/// Whether perf can count the objective's events here.
#[derive(Debug, Clone, PartialEq)]
pub struct CountingCheck {
    /// Err(why not) — the perf helper's explanation, fallback advice included.
    pub result: Result<(), OsError>,
    /// We run in a VM (per-thread counting taxes context switches there).
    pub in_vm: bool,
}

/// How to start a launched target.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchOptions {
    /// Pin threads at birth to these CPUs in creation order (the preload library does it).
    pub pin_at_birth: Option<Vec<u32>>,
    pub skip: SkipMask,
    /// Memory policy the program gets before its first instruction (numactl's options).
    pub mem_policy: Option<MemPolicy>,
    /// Remove these variables from a launched program's environment (OpenMP's binding,
    /// with `--override-binding`).
    pub unset: Vec<String>,
    /// Start an OpenMP program with this many threads (OMP_NUM_THREADS; a smaller count the
    /// user set stays): a remembered team size, or `--threads N`.
    pub team_at_birth: Option<usize>,
    /// Ask an OpenMP program's preload library for teams of this size from its second
    /// outermost region on, under the library's rule for changing a team mid-run (a
    /// program that asked its count first keeps it): fewer threads plausible at launch.
    pub want_at_birth: Option<usize>,
}

/// A started (or attached) target.
pub struct Started {
    pub pid: i32,
    /// Its threads, in creation order, and whether it ended.
    pub threads: Box<dyn ThreadSource>,
    /// Its environment (for objective warnings such as OMP_WAIT_POLICY=active).
    pub env: Vec<(String, String)>,
    /// CPUs the target may use as found: for an attached process its own affinity mask,
    /// which autopin never widens (None: the machine's allowed CPUs).
    pub mask: Option<CpuSet>,
    /// Things worth a warning on stderr (e.g. the preload library is unavailable).
    pub warnings: Vec<String>,
    /// The OpenMP runtime the program links (e.g. `libgomp.so.1`), if it is an OpenMP
    /// program.
    pub openmp_runtime: Option<String>,
    /// The preload library sits in the program (launched dynamic executable), so it counts
    /// the program's OpenMP work.
    pub preload_active: bool,
    /// The executable has thread-local data of its own (a PT_TLS segment), which may be
    /// OpenMP threadprivate data that persists between regions only while the team keeps
    /// its size: its teams are not changed mid-run.
    pub thread_local_data: bool,
    /// The team size asked of the program's preload library before its start
    /// (`LaunchOptions::want_at_birth`, where the library can apply it: an OpenMP program
    /// it sits in, without thread-local data of its own).
    pub team_wanted_at_birth: Option<usize>,
}

/// Which CPUs other work keeps busy, measured while the target runs.
pub trait BusyWatch {
    /// CPUs busy more than half the time with work other than process `pid`'s threads,
    /// since the watch began or since the last call.
    fn busy_cpus(&mut self, pid: i32) -> Vec<u32>;
}

/// Which GPUs the target has open, looked at when a search starts.
pub trait DeviceWatch {
    /// The PCI bus ids of the GPUs process `pid` has open now.
    fn opened_gpus(&mut self, pid: i32) -> Vec<String>;
}

/// The OS side of a run, apart from the clock and the pinner.
pub trait Platform {
    /// Can perf count these events here?
    fn check_counting(&mut self, events: &[EventSpec]) -> CountingCheck;
    /// Starts the program (`TargetSpec::Launch`) or attaches to the process. A program that
    /// cannot start is `EngineError::Launch` with the shell's exit code.
    fn start(
        &mut self,
        target: &TargetSpec,
        launch: &LaunchOptions,
    ) -> Result<Started, EngineError>;
    /// Heartbeats the launched program has reported so far (0 without a channel).
    fn heartbeats(&mut self) -> u64;
    /// OpenMP constructs the launched program has completed so far, as the preload library
    /// counted them (0 when it counted none).
    fn openmp_constructs(&mut self) -> u64 {
        0
    }
    /// The OpenMP runtime the running process `pid` has loaded (its file name), found at
    /// run time: a runtime that comes with one of the program's libraries rather than with
    /// the executable itself is in the process all the same. None when there is none.
    fn openmp_runtime_loaded(&mut self, _pid: i32) -> Option<String> {
        None
    }
    /// Opens the meter for the chosen source (`objective` for Requested and Heartbeat);
    /// `cpus` are the CPUs the target may run on (where per-CPU counting would count).
    fn open_meter(
        &mut self,
        source: ObjectiveSource,
        objective: &Objective,
        cpus: &CpuSet,
    ) -> Result<Box<dyn Meter>, EngineError>;
    /// What counting costs per context switch here (None: not measured).
    fn counting_cost(&mut self, events: &[EventSpec]) -> Option<CountingCost>;
    /// autopin's own CPU time so far, seconds.
    fn self_cpu_seconds(&mut self) -> f64;
    /// CPUs among `allowed` that other work keeps busy right now, from a look just before a
    /// launch that costs an idle machine nothing: a program can then start pinned away
    /// from them instead of where the OS places it until the first probe (beside a busy
    /// CPU, 16 threads with spinning barriers ran 100× slower there). Default: none.
    fn busy_at_launch(&mut self, _allowed: &CpuSet) -> Vec<u32> {
        Vec::new()
    }
    /// The environment a launched program inherits, before the launch sets or unsets
    /// anything: read before the launch, for what the program will do (its OpenMP thread
    /// count, a binding of its own). Default: empty.
    fn launch_env(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Starts watching which CPUs among `allowed` other work keeps busy; begun just before a
    /// launch and read when the first search starts, so measuring never delays the
    /// program. Default: nothing watched.
    fn busy_watch(&mut self, _allowed: &CpuSet) -> Option<Box<dyn BusyWatch>> {
        None
    }
    /// Looks at which GPUs the target opened, so that a candidate can keep its threads next
    /// to one. Default: nothing looked at.
    fn device_watch(&mut self) -> Option<Box<dyn DeviceWatch>> {
        None
    }
    /// A signal asked autopin to stop watching an attached process: the run detaches as at
    /// the end of `--duration` (masks restored unless a decision is in force, report
    /// written).
    fn stop_requested(&mut self) -> bool {
        false
    }
    /// Whether a decided pinning is in force now (false while searching). A platform that
    /// guards the target against autopin's death keeps a decided pinning and undoes a probe.
    fn decision_in_force(&mut self, _yes: bool) {}
    /// The Unix time now, seconds (None: no wall clock, e.g. a simulation without one).
    /// Lines up the timelines of the ranks of one cluster launch.
    fn unix_time(&mut self) -> Option<f64> {
        None
    }
    /// Moves the resident private pages of `pid` (heap, anonymous mappings, stacks; with
    /// `files` also private file-backed mappings) that are not on the NUMA nodes of `cpus` to
    /// those nodes. Err(why) when the target's pages could not be touched at all (e.g. no
    /// permission); they are then left where they were.
    fn migrate_memory(
        &mut self,
        machine: &Machine,
        pid: i32,
        cpus: &[u32],
        files: bool,
    ) -> Result<MigrationOutcome, OsError>;
}

/// Where a run reports while it runs.
pub trait RunSink {
    /// A progress line (`at`: seconds since the driver started, when it has).
    fn message(&mut self, at: Option<f64>, text: &str);
    /// The report so far: written at the start (so a reader sees the search is running)
    /// and when the run fails, so the partial report survives.
    fn checkpoint(&mut self, report: &Report);
}

/// The world one run talks to.
pub struct RunEnv<'a> {
    pub clock: &'a mut dyn Clock,
    pub pinner: &'a dyn Pinner,
    pub platform: &'a mut dyn Platform,
    pub sink: &'a mut dyn RunSink,
}
