//! The run path's [`Platform`] on Linux: perf availability from the perf helper, programs
//! started with the preload library and its thread registry (or attached through /proc),
//! the heartbeat channel, meters on perf_event, /proc schedstat or energy counters, and page
//! migration.

use crate::process::{self, LaunchSpec, PinPlan};
use crate::sources::{self, Lifetime, PerfMeter, ProcCpuMeter, ProcThreads};
use autopin_engine::error::EngineError;
use autopin_engine::report::MigrationOutcome;
use autopin_engine::run::{
    BusyWatch, CountingCheck, LaunchOptions, ObjectiveSource, Platform, Started, TargetSpec,
};
use autopin_engine::sensors::{Meter, OsError};
use autopin_objective::{CountingCost, EventSpec, Objective, Sysfs};
use autopin_perf::HeartbeatChannel;
use autopin_topology::{CpuSet, Machine};
use std::time::Duration;

/// The variables the preload library reads (crates/autopin-preload/c/preload.c).
const PRELOAD_VARS: [&str; 5] = [
    "AUTOPIN_CPUS",
    "AUTOPIN_SKIP",
    "AUTOPIN_REGISTRY",
    "AUTOPIN_QUIET",
    "AUTOPIN_HEARTBEAT",
];

pub struct LinuxPlatform {
    perf_sysfs: Sysfs,
    /// The heartbeat channel every launched program gets (AUTOPIN_HEARTBEAT), made at the
    /// launch; handed to the meter once it is opened.
    heartbeat: Option<HeartbeatChannel>,
    /// The autopin executable that serves as the guardian (None: no guardian).
    guardian_exe: Option<std::path::PathBuf>,
    /// Restores the target if autopin dies (None when it could not be started: said once).
    guardian: Option<crate::guardian::Guardian>,
    /// While attached: INT, TERM, HUP and QUIT are caught, and the run detaches in order.
    stop_signals: Option<process::signals::Forwarding>,
    /// While attached: the per-process lock, and the mark of a pinning left in force.
    attach_mark: Option<process::attach_mark::AttachMark>,
    /// The program started or attached to (for meters that read the whole process).
    target: Option<i32>,
}

impl LinuxPlatform {
    /// `perf_sysfs`: where the perf availability probe reads the paranoid level.
    pub fn new(perf_sysfs: Sysfs) -> Result<Self, EngineError> {
        Ok(LinuxPlatform {
            perf_sysfs,
            heartbeat: None,
            guardian_exe: None,
            guardian: None,
            stop_signals: None,
            attach_mark: None,
            target: None,
        })
    }

    /// Guards every target with `exe guard PID` (the autopin executable): see
    /// [`crate::guardian`].
    pub fn with_guardian(mut self, exe: std::path::PathBuf) -> Self {
        self.guardian_exe = Some(exe);
        self
    }

    /// Starts the guardian of `pid` (None: a program launched later; see
    /// [`crate::guardian`]); a warning when it cannot.
    fn guard(&mut self, pid: Option<i32>, mask: Option<&CpuSet>, warnings: &mut Vec<String>) {
        let Some(exe) = self.guardian_exe.as_deref() else {
            return;
        };
        match crate::guardian::Guardian::start(
            exe,
            pid,
            mask,
            crate::guardian::Leftovers::default(),
        ) {
            Ok(g) => self.guardian = Some(g),
            Err(e) => warnings.push(no_guardian(&e)),
        }
    }

    /// Tells the guardian (if any) a file of autopin's before it is made.
    fn guard_file(&mut self, path: &std::path::Path) {
        if let Some(g) = self.guardian.as_mut() {
            g.file(path);
        }
    }

    fn launch(&mut self, argv: &[String], opts: &LaunchOptions) -> Result<Started, EngineError> {
        let mut warnings = Vec::new();
        // The mask the program starts with (it inherits ours) is what it gets back should
        // autopin die mid-search.
        let start_mask = autopin_topology::affinity::get(0).ok();
        if let Some(m) = &start_mask {
            crate::keeper_channel::tell_mask(m);
        }
        // The guardian first, before autopin has a file to leave behind: every file is told
        // to it before it is made, and the program's PID once it exists.
        self.guard(None, start_mask.as_ref(), &mut warnings);
        // The channel a launched program beats into (an attached one cannot be given it, so
        // attach makes none: a file less to leave behind).
        let heartbeat = HeartbeatChannel::fresh_path(&std::env::temp_dir());
        self.guard_file(&heartbeat);
        let (channel, heartbeat) = HeartbeatChannel::create_at(&heartbeat)
            .map_err(|e| {
                EngineError::os(format!(
                    "heartbeat channel: {e} (autopin's working files go to TMPDIR, now {}; point it at a directory where you may write and that has room)",
                    std::env::temp_dir().display()
                ))
            })?;
        let mut spec = LaunchSpec::new(&argv[0], &argv[1..]);
        spec.forward_signals = true;
        // Which OpenMP runtime the program links (itself or through its own libraries), and
        // whether the preload library can sit in it (a dynamic executable): then it counts
        // the program's OpenMP work.
        let path_var = std::env::var_os("PATH");
        let (openmp_runtime, preload_reaches, thread_local_data) =
            match process::elf::resolve_program(argv[0].as_ref(), path_var.as_deref()) {
                Ok(p) => (
                    process::elf::linked_libraries(
                        &p,
                        &process::elf::library_dirs(std::env::var_os("LD_LIBRARY_PATH").as_deref()),
                        |n| autopin_perf::openmp_runtime(&[n.to_string()]).is_some(),
                        16,
                    )
                    .ok()
                    .and_then(|n| autopin_perf::openmp_runtime(&n)),
                    process::elf::linkage(&p).is_ok_and(|l| l.preload_works()),
                    process::elf::has_thread_local_data(&p).unwrap_or(true),
                ),
                Err(_) => (None, false, true),
            };
        spec.mem_policy = opts.mem_policy.clone();
        // A team size to start with: OMP_NUM_THREADS, never above a count the user set.
        if let Some(n) = opts.team_at_birth {
            let n = autopin_engine::run::team_start_count(&environment(), n);
            spec.env
                .push(("OMP_NUM_THREADS".into(), n.to_string().into()));
        }
        let pin_at_birth = opts.pin_at_birth.is_some();
        if let Some(cpus) = &opts.pin_at_birth {
            let plan = PinPlan::new(cpus.clone(), opts.skip.clone())
                .map_err(|e| EngineError::usage(e.to_string()))?;
            spec.env.extend(plan.env());
        }
        // The preload library records every thread in the registry, in creation order;
        // without it (static binaries) /proc scanning finds them.
        let registry_dir = process::Registry::fresh_dir();
        if let Some(g) = self.guardian.as_mut() {
            g.dir(&registry_dir);
            g.file(&process::Registry::file_in(&registry_dir));
        }
        let mut registry = match process::Registry::create_at(&registry_dir, 4096) {
            Ok(r) => Some(r),
            Err(e) => {
                warnings.push(format!("thread registry unavailable in {} ({e}); threads are found and pinned when /proc shows them", registry_dir.display()));
                None
            }
        };
        if let Some(r) = &registry {
            spec.env.push(r.env());
        }
        if pin_at_birth || registry.is_some() {
            match process::preload_library_telling(&mut |copy| self.guard_file(copy)) {
                Ok(p) => spec.preload = Some(p),
                Err(e) => {
                    registry = None;
                    warnings.push(format!("preload library unavailable ({e}); threads are found and pinned when /proc shows them"));
                }
            }
        }
        spec.env.push((
            autopin_perf::heartbeat::ENV_VAR.into(),
            heartbeat.clone().into_os_string(),
        ));
        // Fewer threads plausible at launch: the preload library is asked for them before
        // the program starts (it applies them from the second region on, where its rule
        // allows), where it sits in an OpenMP program without thread-local data of its own.
        let preload_active = preload_reaches && registry.is_some();
        let team_wanted_at_birth = opts
            .want_at_birth
            .filter(|_| openmp_runtime.is_some() && preload_active && !thread_local_data);
        if let Some(k) = team_wanted_at_birth {
            channel.want_team(autopin_engine::driver::want_word(Some(k)));
        }
        self.heartbeat = Some(channel);
        // --override-binding: the program's own OpenMP binding goes, so autopin's pinnings
        // are the only ones.
        let unset: Vec<String> = opts
            .unset
            .iter()
            .filter(|v| std::env::var_os(v).is_some())
            .cloned()
            .collect();
        if !unset.is_empty() {
            warnings.push(format!(
                "{} unset for the program (--override-binding): autopin's pinnings decide",
                unset.join(", ")
            ));
        }
        spec.unset = opts.unset.iter().map(Into::into).collect();
        // The preload library's variables are autopin's to set: one left in the user's
        // environment (an `AUTOPIN_CPUS=1` from an earlier experiment) would pin behind the
        // search's back. Those autopin does not set are emptied, and the user is told.
        for var in PRELOAD_VARS {
            let ours = spec.env.iter().any(|(k, _)| k == var);
            if let (false, Some(v)) = (ours, std::env::var_os(var).filter(|v| !v.is_empty())) {
                warnings.push(format!(
                    "{var}={} in your environment is ignored: autopin run sets the preload library's variables itself (autopin pin -c pins by hand)",
                    v.to_string_lossy()
                ));
                spec.env.push((var.into(), "".into()));
            }
        }
        // The program tells its guardian and its keeper its PID itself before exec: known
        // to both even if autopin dies before spawn returns. (Told again below.)
        spec.pid_notes = self
            .guardian
            .as_ref()
            .and_then(|g| g.pid_note())
            .into_iter()
            .chain(crate::keeper_channel::pid_note())
            .collect();
        let launched = process::spawn(&spec).map_err(|e| EngineError::Launch {
            message: e.to_string(),
            exit_code: e.exit_code(),
        })?;
        let pid = launched.pid();
        if let Some(g) = self.guardian.as_mut() {
            g.target(pid);
            // Its start ran beside the launch; its word is read now, before any pinning.
            if let Err(e) = g.confirm() {
                warnings.push(no_guardian(&e));
                self.guardian = None;
            }
        }
        crate::keeper_channel::tell_launched(pid);
        let mut threads = ProcThreads::new(pid, opts.skip.clone(), Lifetime::Child(launched));
        if let Some(r) = registry {
            threads = threads.with_registry(r);
        }
        Ok(Started {
            pid,
            threads: Box::new(threads),
            env: environment()
                .into_iter()
                .filter(|(k, _)| !opts.unset.contains(k))
                .collect(),
            mask: None,
            warnings,
            openmp_runtime,
            preload_active,
            thread_local_data,
            team_wanted_at_birth,
        })
    }

    /// Takes the attach lock of `pid` (refusing when another autopin holds it) and returns
    /// the pinning an earlier autopin left on it. Without the private directory, or the
    /// process's start time, attaching goes on unmarked.
    fn take_attach_mark(
        &mut self,
        pid: i32,
        warnings: &mut Vec<String>,
    ) -> Result<Option<process::attach_mark::LeftPinning>, EngineError> {
        use process::attach_mark::{start_time, AttachMark, MarkError};
        let dir = autopin_preload::cache_dir();
        let Some(start) = start_time(std::path::Path::new("/proc"), pid) else {
            return Ok(None);
        };
        if let Err(e) = autopin_preload::ensure_private_dir(&dir) {
            warnings.push(format!(
                "cannot keep autopin's attach marks ({e}): a second autopin could attach to process {pid} too"
            ));
            return Ok(None);
        }
        match AttachMark::take(&dir, std::path::Path::new("/proc"), pid, start) {
            Ok((mark, left)) => {
                self.attach_mark = Some(mark);
                Ok(left)
            }
            Err(e @ MarkError::Held { .. }) => Err(EngineError::usage(format!("attach: {e}"))),
            Err(MarkError::Io(e)) => {
                warnings.push(format!(
                    "cannot keep autopin's attach marks in {} ({e}): a second autopin could attach to process {pid} too",
                    dir.display()
                ));
                Ok(None)
            }
        }
    }

    fn attach(&mut self, pid: i32, opts: &LaunchOptions) -> Result<Started, EngineError> {
        let proc_dir = format!("/proc/{pid}");
        if pid <= 0 || !std::path::Path::new(&proc_dir).exists() {
            return Err(EngineError::usage(format!(
                "attach: no process with PID {pid}"
            )));
        }
        let me = rustix::process::geteuid().as_raw();
        let ours = std::fs::metadata(&proc_dir)
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == me)
            .unwrap_or(false);
        if !ours && me != 0 {
            return Err(EngineError::Permission(format!(
                "attach: process {pid} belongs to another user; autopin can only pin and count your own processes (or run as root)"
            )));
        }
        let env = std::fs::read(format!("{proc_dir}/environ"))
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter_map(|kv| {
                        let s = String::from_utf8_lossy(kv);
                        s.split_once('=')
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut warnings = Vec::new();
        // The guardian first, before autopin has a file to leave behind: every file after
        // this is handed to it as it is made.
        self.guard(Some(pid), None, &mut warnings);
        // One autopin per process; a pinning an earlier autopin left in force is undone
        // first, so the CPUs the process had are what it may use again.
        let mark = self.take_attach_mark(pid, &mut warnings)?;
        if let (Some(g), Some(m)) = (self.guardian.as_mut(), self.attach_mark.as_ref()) {
            g.lock(m.lock_path());
        }
        let left = mark.filter(|l| {
            process::attach_mark::pinned_elsewhere(std::path::Path::new("/proc"), pid, &l.original)
        });
        if let Some(l) = &left {
            let restored = restore_threads(pid, &l.original);
            warnings.push(format!(
                "process {pid} still had the pinning {} left in force; its {restored} thread(s) are back on the CPUs it had before ({}), and autopin searches again",
                l.by.map_or("an earlier autopin".to_string(), |b| format!("autopin (PID {b})")),
                l.original
            ));
            // What the threads have now is what they get back should autopin die.
            if let Some(g) = self.guardian.as_mut() {
                g.masks_again();
            }
        }
        // The process's own mask (taskset, cgroup): candidates stay inside it.
        let mask = autopin_topology::affinity::get(pid).ok();
        if let (Some(mark), Some(m)) = (self.attach_mark.as_mut(), &mask) {
            mark.set_original(m.clone());
        }
        // Ctrl-C, kill, a closed terminal: detach in order (no process of ours to forward to).
        self.stop_signals = process::signals::Forwarding::begin().ok();
        Ok(Started {
            pid,
            threads: Box::new(ProcThreads::new(
                pid,
                opts.skip.clone(),
                Lifetime::Attached(pid),
            )),
            env,
            mask,
            warnings,
            // An attached process has no preload library: its OpenMP work is not counted.
            // The runtime the process has loaded (its own or a library's).
            openmp_runtime: std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .ok()
                .and_then(|m| openmp_runtime_in_maps(&m)),
            preload_active: false,
            // Not read: an attached program's teams are never changed.
            thread_local_data: true,
            team_wanted_at_birth: None,
        })
    }
}

impl Platform for LinuxPlatform {
    fn check_counting(&mut self, events: &[EventSpec]) -> CountingCheck {
        let (result, ctx) = autopin_perf::probe::check_events_with(
            &self.perf_sysfs,
            &autopin_perf::system_probe::RealProbeOps,
            events,
        );
        CountingCheck {
            result: result.map_err(crate::os_error::from_perf),
            in_vm: ctx.in_vm,
        }
    }

    fn start(
        &mut self,
        target: &TargetSpec,
        launch: &LaunchOptions,
    ) -> Result<Started, EngineError> {
        let started = match target {
            TargetSpec::Launch(argv) => self.launch(argv, launch),
            TargetSpec::Attach { pid, .. } => self.attach(*pid, launch),
        }?;
        self.target = Some(started.pid);
        Ok(started)
    }

    fn heartbeats(&mut self) -> u64 {
        self.heartbeat.as_ref().map_or(0, |h| h.read().beats)
    }

    fn openmp_runtime_loaded(&mut self, pid: i32) -> Option<String> {
        openmp_runtime_in_maps(&std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?)
    }

    fn openmp_constructs(&mut self) -> u64 {
        self.heartbeat
            .as_ref()
            .and_then(|h| h.read().omp)
            .map_or(0, |o| o.counts.total())
    }

    fn open_meter(
        &mut self,
        source: ObjectiveSource,
        objective: &Objective,
        cpus: &CpuSet,
    ) -> Result<Box<dyn Meter>, EngineError> {
        if source == ObjectiveSource::TaskClock {
            let mut meter = ProcCpuMeter::new(self.heartbeat.take());
            if let Some(pid) = self.target {
                meter = meter.of_process(pid);
            }
            return Ok(Box::new(meter));
        }
        // Progress the program reports itself (heartbeats, OpenMP constructs) needs no
        // counter: probing what the kernel can count would only cost the program its first
        // perf_event_open (5-20 ms while the kernel switches perf's hooks on).
        if objective.events().is_empty() && !objective.needs_energy() {
            return Ok(Box::new(PerfMeter::new(
                objective.clone(),
                None,
                self.heartbeat.take(),
                None,
            )));
        }
        // DESIGN's measuring rule: per-CPU counting (no cost on context switches) where it is
        // allowed and counts only the target; per thread otherwise. autopin does not yet know
        // whether other work shares the target's CPUs, nor give the target a cgroup, so today
        // the choice lands on per thread, with its reason in the report.
        let avail = autopin_perf::system_probe::probe_with_sysfs(&self.perf_sysfs);
        let choice = autopin_perf::choose_counting_mode(
            &avail,
            &autopin_perf::ModeRequest {
                target_cpus: Some(cpus.iter().map(|c| c as usize).collect()),
                cgroup: None,
                cpus_exclusive: false,
                forced: None,
            },
        );
        let counters = sources::counters_for(objective, &choice.mode)
            .map_err(|e| EngineError::usage(e.to_string()))?;
        let energy =
            if objective.needs_energy() {
                Some(autopin_perf::open_energy(&self.perf_sysfs).map_err(|e| {
                    EngineError::usage(format!("objective {}: {e}", objective.text()))
                })?)
            } else {
                None
            };
        Ok(Box::new(
            PerfMeter::new(objective.clone(), counters, self.heartbeat.take(), energy)
                .with_mode(choice),
        ))
    }

    fn device_watch(&mut self) -> Option<Box<dyn autopin_engine::run::DeviceWatch>> {
        Some(Box::new(FdDeviceWatch))
    }

    fn busy_at_launch(&mut self, allowed: &CpuSet) -> Vec<u32> {
        busy_now(std::path::Path::new("/proc"), allowed)
    }

    fn launch_env(&self) -> Vec<(String, String)> {
        environment()
    }

    fn busy_watch(&mut self, allowed: &CpuSet) -> Option<Box<dyn BusyWatch>> {
        ProcBusyWatch::begin(std::path::Path::new("/proc"), allowed.clone())
            .map(|w| Box::new(w) as Box<dyn BusyWatch>)
    }

    fn counting_cost(&mut self, events: &[EventSpec]) -> Option<CountingCost> {
        let measure =
            || autopin_perf::measure_counting_cost(events, Duration::from_millis(200)).ok();
        // Kept from an earlier run on this machine (see cost_cache): measuring delays the
        // program's start by a quarter of a second.
        let (Some(file), Some(now)) = (crate::cost_cache::cache_file(), self.unix_time()) else {
            return measure();
        };
        let names: Vec<String> = events.iter().map(|e| e.key().to_string()).collect();
        let key = crate::cost_cache::key(&names, std::path::Path::new("/proc"));
        if let Some(kept) = crate::cost_cache::get(&file, &key, now) {
            return Some(kept);
        }
        let cost = measure()?;
        // A cache that cannot be written is measured again next time.
        let _ = crate::cost_cache::put(&file, &key, &cost, now);
        Some(cost)
    }

    fn self_cpu_seconds(&mut self) -> f64 {
        sources::self_cpu_seconds()
    }

    fn stop_requested(&mut self) -> bool {
        self.stop_signals.is_some() && process::signals::received().is_some()
    }

    fn decision_in_force(&mut self, yes: bool) {
        crate::keeper_channel::tell_decided(yes);
        if let Some(g) = self.guardian.as_mut() {
            g.decided(yes);
        }
        if let Some(m) = self.attach_mark.as_mut() {
            m.decision_in_force(yes);
        }
    }

    fn unix_time(&mut self) -> Option<f64> {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs_f64())
    }

    fn migrate_memory(
        &mut self,
        machine: &Machine,
        pid: i32,
        cpus: &[u32],
        files: bool,
    ) -> Result<MigrationOutcome, OsError> {
        let opts = crate::numa::MigrateOptions {
            include_files: files,
            ..Default::default()
        };
        crate::numa::migrate_to(machine, pid, cpus, &opts)
    }
}

/// Busy CPUs from /proc: the CPU time every other process's threads took since the last
/// reading, each thread's counted on the CPU it last ran on. Work that stays where it is (a
/// job pinned to its CPUs, a busy loop the scheduler leaves in place) is counted exactly.
/// (Subtracting the watched program's time from each CPU's total instead was misled by the
/// program's own threads moving during the window: a busy loop on CPU 0 was reported on
/// CPU 1.)
///
/// Every thread is read only when other work may have been busy: /proc/stat and the
/// program's own stat first bound what other work took of the allowed CPUs altogether
/// ([`autopin_perf::cpustat::other_work_bound`]); at or below the busy share, no CPU can be
/// busy and nothing more is read. An idle machine is then watched with two small reads a
/// window instead of a look at every thread of the system (2.5 ms of CPU each on an idle
/// 2-CPU VM with 90 threads, beside the program's start; far more on a large node). A
/// window whose start was not read thread by thread (the first, and one after a window
/// the bound settled) judges a thread older than the window by its share of its whole
/// life; a thread born in the window counts whole, so work that arrives is counted
/// exactly, and the look becomes the next window's start.
pub struct ProcBusyWatch {
    proc_root: std::path::PathBuf,
    allowed: CpuSet,
    last: std::collections::BTreeMap<u32, autopin_perf::cpustat::CpuTimes>,
    since: std::time::Instant,
    /// Boot time at the last reading, USER_HZ ticks.
    since_boot: u64,
    /// CPU ticks of every thread in the system at the last reading, where it read them.
    ticks: Option<std::collections::HashMap<u32, u64>>,
    /// The watched program's CPU ticks (its own and its waited-for children's) at the last
    /// reading, by PID: none before the first, as it was launched as the watch began.
    program: Option<(i32, u64)>,
}

impl ProcBusyWatch {
    /// Shortest window read: 10 ticks at USER_HZ 100. The program runs meanwhile, so
    /// waiting out the rest costs it nothing.
    const MIN_WINDOW: Duration = Duration::from_millis(100);

    pub fn begin(proc_root: &std::path::Path, allowed: CpuSet) -> Option<Self> {
        Some(ProcBusyWatch {
            last: autopin_perf::cpustat::read_proc_stat(proc_root).ok()?,
            since_boot: boot_ticks(proc_root)?,
            proc_root: proc_root.to_path_buf(),
            allowed,
            since: std::time::Instant::now(),
            ticks: None,
            program: None,
        })
    }

    /// Every process: its PID, its parent's (0 where unknown) and its threads.
    fn processes(&self) -> Vec<Proc> {
        pids(&self.proc_root)
            .into_iter()
            .map(|pid| {
                let stats = thread_stats(&self.proc_root, pid);
                Proc {
                    pid,
                    // Every thread's stat names the process's parent.
                    parent: stats
                        .first()
                        .and_then(|(_, text)| crate::process::attach_guard::parse_stat(text))
                        .map_or(0, |s| s.ppid),
                    threads: stats
                        .iter()
                        .filter_map(|(tid, text)| {
                            Some((*tid, autopin_perf::cpustat::parse_thread_now(text)?))
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The CPU ticks other processes' threads took on each CPU in the window that ends
    /// `now` (boot ticks), read from every thread; `pid`'s family and autopin's are not
    /// other work. The threads' ticks now become the next window's start.
    fn other_work(&mut self, pid: i32, now: u64) -> std::collections::BTreeMap<u32, u64> {
        let procs = self.processes();
        // Not other work: the watched program and what it started (a shell's child may be
        // the process that does the work), and autopin with its own helpers.
        let ours = families(&procs, &[pid, std::process::id() as i32]);
        let window = now.saturating_sub(self.since_boot);
        let mut other = std::collections::BTreeMap::new();
        for p in procs.iter().filter(|p| !ours.contains(&p.pid)) {
            for (tid, t) in &p.threads {
                let taken = match &self.ticks {
                    // A thread born in the window: all its time is in the window.
                    Some(start) => t.ticks.saturating_sub(start.get(tid).copied().unwrap_or(0)),
                    None => autopin_perf::cpustat::ticks_in_window(t, now, window),
                };
                *other.entry(t.cpu).or_insert(0) += taken;
            }
        }
        self.ticks = Some(
            procs
                .into_iter()
                .flat_map(|p| p.threads)
                .map(|(tid, t)| (tid, t.ticks))
                .collect(),
        );
        other
    }
}

impl BusyWatch for ProcBusyWatch {
    fn busy_cpus(&mut self, pid: i32) -> Vec<u32> {
        use autopin_perf::cpustat;
        if let Some(rest) = Self::MIN_WINDOW.checked_sub(self.since.elapsed()) {
            std::thread::sleep(rest);
        }
        let program = crate::process::attach_guard::read_stat(&self.proc_root, pid)
            .map(|s| s.utime + s.stime + s.children);
        let (Ok(now), Some(now_boot)) = (
            cpustat::read_proc_stat(&self.proc_root),
            boot_ticks(&self.proc_root),
        ) else {
            return Vec::new();
        };
        let before = match self.program {
            Some((p, ticks)) if p == pid => ticks,
            _ => 0,
        };
        let bound = program.and_then(|t| {
            cpustat::other_work_bound(
                &self.last,
                &now,
                self.allowed.iter(),
                t.saturating_sub(before),
            )
        });
        let busy = if bound.is_some_and(|b| b <= BUSY_SHARE) {
            // Not read thread by thread: the next window judges older threads by their lives.
            self.ticks = None;
            Vec::new()
        } else {
            let other = self.other_work(pid, now_boot);
            cpustat::cpus_with_other_work(&self.last, &now, &other, BUSY_SHARE)
        };
        self.last = now;
        self.since = std::time::Instant::now();
        self.since_boot = now_boot;
        self.program = program.map(|t| (pid, t));
        busy.into_iter()
            .filter(|c| self.allowed.contains(*c))
            .collect()
    }
}

/// The time since boot, USER_HZ ticks, from `<proc>/uptime`.
fn boot_ticks(proc_root: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(proc_root.join("uptime"))
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .map(|s| (s * USER_HZ) as u64)
}

/// The PIDs below `proc_root` (empty when it cannot be read).
fn pids(proc_root: &std::path::Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Each live thread of `pid` and the text of its stat file, as read now. The main thread's
/// file comes first and says how many threads the process has: a process with one (most
/// of a machine's, kernel threads included) is read with that one file, not also a listing
/// of its task directory.
fn thread_stats(proc_root: &std::path::Path, pid: i32) -> Vec<(u32, String)> {
    let task = proc_root.join(format!("{pid}/task"));
    let main = std::fs::read_to_string(task.join(format!("{pid}/stat"))).ok();
    if let Some(text) = &main {
        if autopin_perf::cpustat::thread_count(text) == Some(1) {
            return vec![(pid as u32, text.clone())];
        }
    }
    let Ok(entries) = std::fs::read_dir(task) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let text = match &main {
                Some(text) if tid == pid as u32 => text.clone(),
                _ => std::fs::read_to_string(e.path().join("stat")).ok()?,
            };
            Some((tid, text))
        })
        .collect()
}

/// One process as the busy watch reads it.
struct Proc {
    pid: i32,
    parent: i32,
    threads: Vec<(u32, autopin_perf::cpustat::ThreadNow)>,
}

/// `roots` and every process descending from them.
fn families(procs: &[Proc], roots: &[i32]) -> std::collections::HashSet<i32> {
    let mut ours: std::collections::HashSet<i32> = roots.iter().copied().collect();
    // Parents may be listed after their children: repeat until nothing joins.
    loop {
        let before = ours.len();
        for p in procs {
            if ours.contains(&p.parent) {
                ours.insert(p.pid);
            }
        }
        if ours.len() == before {
            return ours;
        }
    }
}

/// CPUs among `allowed` that other work keeps busy now, from one look at every thread
/// (`autopin_perf::cpustat::busy_now`). /proc/loadavg says first how many are runnable: on
/// a machine where nothing but this process runs, nothing else is read, so the look costs
/// an idle launch a single small read.
pub fn busy_now(proc_root: &std::path::Path, allowed: &CpuSet) -> Vec<u32> {
    use autopin_perf::cpustat;
    // Nothing but this process runnable: no CPU is busy, and the threads need not be read
    // (about 13 µs a process, over a millisecond on a quiet desktop). One look often finds
    // a second runnable task that is gone 100 µs later (a kernel worker, the shell that
    // started autopin), where a job that computes is runnable at every look: three looks,
    // and one that finds this process alone is enough.
    for look in 0..3 {
        if look > 0 {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        let running = std::fs::read_to_string(proc_root.join("loadavg"))
            .ok()
            .and_then(|t| cpustat::running_now(&t));
        if running.is_none_or(|r| r <= 1) {
            return Vec::new();
        }
    }
    // Boot time in USER_HZ ticks, the unit of a thread's start and CPU time.
    let Some(now) = boot_ticks(proc_root) else {
        return Vec::new();
    };
    let own = std::process::id() as i32;
    let threads = pids(proc_root)
        .into_iter()
        .filter(|pid| *pid != own)
        .flat_map(|pid| thread_stats(proc_root, pid))
        .filter_map(|(_, stat)| cpustat::parse_thread_now(&stat));
    cpustat::busy_now(threads, now, LAUNCH_BUSY_SHARE)
        .into_iter()
        .filter(|c| allowed.contains(*c))
        .collect()
}

/// Ticks a second of /proc's CPU times (USER_HZ, 100 on every Linux port).
const USER_HZ: f64 = 100.0;

/// Share of its life a thread running at launch must have spent on a CPU for its CPU to
/// count as busy then: a job that computes, not a daemon that woke.
const LAUNCH_BUSY_SHARE: f64 = 0.5;

/// What a run without a guardian risks.
fn no_guardian(e: &std::io::Error) -> String {
    format!("no guardian ({e}): should autopin be killed mid-search, the program keeps the probe's CPUs")
}

/// Share of a CPU's time other work must take for the CPU to count as busy. A busy loop
/// that shares its CPU with one of the program's spinning threads gets about half of it,
/// or less where the program's threads also migrate there: half was missed that way (a
/// 1.6× slower pinning was then the only one probed), while a third is still far above
/// what a quiet machine's daemons take.
const BUSY_SHARE: f64 = 0.3;

/// The file name of an OpenMP runtime mapped into a process, from its /proc/PID/maps text.
fn openmp_runtime_in_maps(maps: &str) -> Option<String> {
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter_map(|path| path.rsplit('/').next())
        .find(|name| {
            ["libgomp.so", "libomp.so", "libiomp5.so"]
                .iter()
                .any(|rt| name.starts_with(rt))
        })
        .map(str::to_string)
}

/// Puts every thread of `pid` on `mask`; returns how many took it.
fn restore_threads(pid: i32, mask: &CpuSet) -> usize {
    process::ProcFs::default()
        .threads(pid)
        .map(|ts| {
            ts.iter()
                .filter(|t| autopin_topology::affinity::set(t.tid, mask).is_ok())
                .count()
        })
        .unwrap_or(0)
}

/// The GPUs a process has open, from its file descriptors.
struct FdDeviceWatch;

impl autopin_engine::run::DeviceWatch for FdDeviceWatch {
    fn opened_gpus(&mut self, pid: i32) -> Vec<String> {
        crate::opened_gpus::opened_gpus(pid)
    }
}

/// This process's environment (which the program inherits), as text: a name or value that
/// is not UTF-8 is read with U+FFFD in place of its stray bytes. (`std::env::vars()` panics
/// on one: `env FOO=$'\xff' autopin run …` exited 101 before the program started.)
fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's stat line with `ticks` of user time, last run on `cpu`, started `started`
    /// ticks after boot.
    fn thread_stat_started(tid: u32, ticks: u64, cpu: u32, started: u64) -> String {
        format!(
            "{tid} (t) R 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 {started} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 {cpu} 0 0 0 0 0"
        )
    }

    fn write(root: &std::path::Path, pid: u32, tid: u32, ticks: u64, cpu: u32) {
        write_started(root, pid, tid, ticks, cpu, 100);
    }

    fn write_started(
        root: &std::path::Path,
        pid: u32,
        tid: u32,
        ticks: u64,
        cpu: u32,
        started: u64,
    ) {
        let d = root.join(format!("{pid}/task/{tid}"));
        std::fs::create_dir_all(&d).unwrap();
        let line = thread_stat_started(tid, ticks, cpu, started);
        std::fs::write(d.join("stat"), line).unwrap();
    }

    /// /proc/PID/stat of a process with `ticks` of user time (all its threads') and
    /// `children` of its waited-for children's.
    fn write_process(root: &std::path::Path, pid: u32, ticks: u64, children: u64) {
        std::fs::create_dir_all(root.join(pid.to_string())).unwrap();
        let line = format!("{pid} (p) R 1 {pid} {pid} 0 -1 0 0 0 0 0 {ticks} 0 {children} 0 20");
        std::fs::write(root.join(format!("{pid}/stat")), line).unwrap();
    }

    /// A fake /proc's per-CPU times and uptime (seconds) at the end of a window.
    fn window_ends(root: &std::path::Path, stat: &str, uptime: &str) {
        std::fs::write(root.join("stat"), stat).unwrap();
        std::fs::write(root.join("uptime"), format!("{uptime} 150.00\n")).unwrap();
    }

    /// A busy watch of CPUs 0 and 1 begun on a fake /proc at 100 s after boot.
    fn watch_from_100s(root: &std::path::Path) -> ProcBusyWatch {
        window_ends(root, "cpu0 0 0 0 0\ncpu1 0 0 0 0\n", "100.00");
        ProcBusyWatch::begin(root, CpuSet::from_cpus([0, 1])).unwrap()
    }

    #[test]
    fn a_look_at_launch_finds_a_busy_loop_and_reads_nothing_more_on_an_idle_machine() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Uptime 100 s; a busy loop on CPU 1 since 1 s after boot (9000 of 9900 ticks), and
        // this process's own thread, running on CPU 0 (it is not other work).
        std::fs::write(root.join("uptime"), "100.00 150.00\n").unwrap();
        for (pid, cpu) in [(20, 1), (std::process::id(), 0)] {
            write(root, pid, pid, 9000, cpu);
        }
        let all = CpuSet::from_cpus([0, 1, 2]);
        std::fs::write(root.join("loadavg"), "1.00 1.00 1.00 2/100 4242\n").unwrap();
        assert_eq!(busy_now(root, &all), vec![1]);
        assert!(busy_now(root, &CpuSet::from_cpus([0, 2])).is_empty());
        // Only the reader runs: the threads are not looked at (the busy loop's file stays
        // unread, so it cannot make CPU 1 busy).
        std::fs::write(root.join("loadavg"), "0.00 0.00 0.00 1/100 4242\n").unwrap();
        assert!(busy_now(root, &all).is_empty());
        // This machine: whatever is busy, it is among the allowed CPUs.
        let here = CpuSet::from_cpus([0]);
        assert!(busy_now(std::path::Path::new("/proc"), &here)
            .iter()
            .all(|c| *c == 0));
    }

    #[test]
    fn other_work_is_found_on_its_cpu_whatever_the_programs_threads_did() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut w = watch_from_100s(root);
        // 200 ticks later: CPU 0 and CPU 1 both busy. A busy loop on CPU 0, spinning since
        // 1 s after boot (9950 ticks of its 10 100); the program's thread (pid 10) ran 180
        // ticks, on CPU 1, and has just moved to CPU 0 (subtracting its time from CPU 0
        // made CPU 1 look busy with other work).
        window_ends(root, "cpu0 200 0 0 0\ncpu1 190 0 10 0\n", "102.00");
        write(root, 20, 20, 9950, 0);
        write(root, 10, 10, 180, 0);
        assert_eq!(w.busy_cpus(10), vec![0]);
        // The next window: only a child of the program worked (a shell's child doing the
        // program's work), on CPU 0: that is the program, not other work. The busy loop
        // stopped (its ticks are read against the last window's now).
        window_ends(root, "cpu0 400 0 0 0\ncpu1 390 0 10 0\n", "104.00");
        write(root, 10, 10, 570, 1);
        write(root, 30, 30, 190, 0);
        let child = thread_stat_started(30, 190, 0, 100).replace(" R 1 ", " R 10 ");
        std::fs::write(root.join("30/task/30/stat"), child).unwrap();
        assert!(w.busy_cpus(10).is_empty());
    }

    #[test]
    fn an_idle_machine_is_watched_without_a_look_at_every_thread_and_arriving_work_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut w = watch_from_100s(root);
        // 200 ticks later, both CPUs busy: the program took 380 of the 400 ticks (its
        // threads' 360, a child it waited for 20). The 20 left are a tenth of a CPU: the
        // threads are not read, so a thread file that would make CPU 0 busy stays unread.
        window_ends(root, "cpu0 200 0 0 0\ncpu1 190 0 10 0\n", "102.00");
        write_process(root, 10, 360, 20);
        write(root, 10, 10, 360, 0);
        write_started(root, 20, 20, 190, 0, 10_050);
        assert!(w.busy_cpus(10).is_empty());
        // The next window: the program took 200 more ticks, the machine 400. Other work took
        // half of it: the threads are read. The busy loop was born in this window (boot
        // tick 10 250; the window started at 10 200): all its 190 ticks are this window's.
        window_ends(root, "cpu0 400 0 0 0\ncpu1 390 0 10 0\n", "104.00");
        write_process(root, 10, 560, 20);
        write(root, 10, 10, 560, 1);
        write_started(root, 20, 20, 190, 0, 10_250);
        assert_eq!(w.busy_cpus(10), vec![0]);
        // A third window with every thread read at its start: the loop's ticks are exact
        // (it stopped), whatever its life.
        window_ends(root, "cpu0 600 0 0 0\ncpu1 590 0 10 0\n", "106.00");
        write_process(root, 10, 700, 20);
        assert!(w.busy_cpus(10).is_empty());
    }
}
