//! Linux implementations of the driver's traits: threads from /proc/PID/task (launched or
//! attached targets alike, in creation order, with the likwid skip mask) and the objective
//! measured with autopin-perf's per-thread counters, heartbeat channel or energy source.

use crate::process::exit_watch::ExitWatch;
use crate::process::offspring::Offspring;
use crate::process::{Launched, ProcFs, Registry, SkipMask, TaskScan, ThreadOrder};
use autopin_engine::sensors::{Meter, OsError, Reading, ThreadSnapshot, ThreadSource};
use autopin_objective::{CountingMode, Objective};
use autopin_perf::{
    EnergySource, HeartbeatChannel, ModeChoice, PerfCounterSource, Sample, Sampler, Target,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

/// How autopin learns that the target ended.
pub enum Lifetime {
    /// Our child: its exit status is known.
    Child(Launched),
    /// Attached: only whether /proc/PID still exists.
    Attached(i32),
}

/// Threads of a process found by scanning /proc/PID/task.
pub struct ProcThreads {
    pid: i32,
    tasks: TaskScan,
    order: ThreadOrder,
    skip: SkipMask,
    /// creation index → tracked index (None = skipped)
    tracked_index: HashMap<i32, Option<usize>>,
    lifetime: Lifetime,
    /// The preload library's thread registry (launched dynamic programs): exact creation
    /// order, even for threads that live shorter than a /proc scan interval.
    registry: Option<Registry>,
    /// Whether the last poll used the registry (for the report).
    pub used_registry: bool,
    /// The target's context switches at their first read, and at their latest, with
    /// when they were read.
    switches_first: Option<(Instant, u64)>,
    switches_last: Option<(Instant, u64)>,
    /// Wakes the driver when the target ends (None: the kernel has no pidfd).
    exit_watch: Option<ExitWatch>,
    /// The program's other processes (listed in the registry), looked at every
    /// `OFFSPRING_EVERY` polls.
    offspring: Option<Offspring>,
    polls: u64,
    /// Threads /proc listed that the registry does not (None before the first listing).
    unrecorded: Option<Vec<i32>>,
    /// The poll of the last listing of /proc/PID/task while the registry lists the threads.
    listed_at: u64,
    /// /proc/PID/status, kept open: its `Threads:` line says how many threads the program
    /// has, in one read whatever their number.
    status: Option<std::fs::File>,
}

/// Polls between two listings of /proc/PID/task while the registry lists the threads and
/// the kernel counts threads it does not.
const RESCAN_EVERY: u64 = 10;
/// Polls between two listings while the kernel's thread count is the registry's: a
/// thread the library could not record that replaced a recorded one the library did not
/// see end (a raw clone and a raw exit) is found this late.
const RESCAN_ANYWAY: u64 = 100;

/// Polls between two looks at the program's other processes (about 1 s while searching).
const OFFSPRING_EVERY: u64 = 10;
/// Threads whose context switches are read for the perturbation estimate (more are sampled
/// and scaled, see `autopin_perf::context_switches_sampled`).
const SWITCH_SAMPLE: usize = 256;

impl ProcThreads {
    pub fn new(pid: i32, skip: SkipMask, lifetime: Lifetime) -> Self {
        ProcThreads {
            pid,
            tasks: TaskScan::new(ProcFs::at("/proc"), pid),
            order: ThreadOrder::new(pid),
            skip,
            tracked_index: HashMap::new(),
            lifetime,
            registry: None,
            used_registry: false,
            switches_first: None,
            switches_last: None,
            exit_watch: ExitWatch::open(pid),
            offspring: None,
            polls: 0,
            unrecorded: None,
            listed_at: 0,
            status: None,
        }
    }

    /// How many threads the kernel counts in the program (the `Threads:` line of
    /// /proc/PID/status, which the kernel keeps as a number: no walk over the threads).
    fn kernel_thread_count(&mut self) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        if self.status.is_none() {
            self.status = std::fs::File::open(format!("/proc/{}/status", self.pid)).ok();
        }
        // The file is made anew on every read from its start (as schedstat is).
        let mut buf = [0u8; 4096];
        let n = self.status.as_ref()?.read_at(&mut buf, 0).ok()?;
        threads_line(&buf[..n])
    }

    /// Reads the target's context switches when due. Only their rate over the whole run is
    /// used, so they are read at 0, 1, 2, 4, 8, ... s, from at most `SWITCH_SAMPLE` threads
    /// (scaled to all): each read opens a file per thread read, and a program with
    /// thousands of threads should not pay that.
    fn read_switches(&mut self) {
        let due = match (self.switches_first, self.switches_last) {
            (None, _) => true,
            (Some((t0, _)), None) => t0.elapsed().as_secs_f64() >= 1.0,
            (Some((t0, _)), Some((t1, _))) => {
                t0.elapsed().as_secs_f64() >= 2.0 * (t1 - t0).as_secs_f64()
            }
        };
        if !due {
            return;
        }
        let Ok(n) = autopin_perf::context_switches_sampled(
            std::path::Path::new("/proc"),
            self.pid,
            SWITCH_SAMPLE,
        ) else {
            return;
        };
        let read = Some((Instant::now(), n));
        if self.switches_first.is_none() {
            self.switches_first = read;
        } else {
            self.switches_last = read;
        }
    }

    /// Reads thread creation order from this registry whenever the preload library has
    /// recorded threads in it (falls back to /proc scanning before that, or if it overflows).
    pub fn with_registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self.offspring = Some(Offspring::new("/proc", self.pid));
        self
    }

    /// Threads and creation numbers from the registry, when it is usable.
    fn registry_threads(&self) -> Option<Vec<(i32, usize)>> {
        let reg = self.registry.as_ref()?;
        reg.owner_pid()?;
        if reg.overflowed() {
            return None;
        }
        Some(reg.alive().iter().map(|t| (t.tid, t.index)).collect())
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends a signal to a launched target (no-op when attached).
    pub fn signal(&self, sig: i32) {
        if let Lifetime::Child(c) = &self.lifetime {
            let _ = c.signal(sig);
        }
    }

    /// Index among pinned threads: the main thread is 0, created thread k (1-based) gets the
    /// next index unless skip bit k−1 is set (likwid-pin's `-s` semantics).
    fn index_for(&self, creation: usize) -> Option<usize> {
        if creation == 0 {
            return Some(0);
        }
        if self.skip.skips(creation - 1) {
            return None;
        }
        Some(creation - self.skip.skipped_before(creation - 1))
    }

    fn ended(&mut self) -> Option<Option<i32>> {
        match &mut self.lifetime {
            Lifetime::Child(c) => match c.try_wait() {
                Ok(Some(code)) => {
                    crate::keeper_channel::tell_exit(code);
                    Some(Some(code))
                }
                Ok(None) => None,
                Err(_) => Some(None),
            },
            // A process that ended is over for autopin even before its parent reaps it.
            Lifetime::Attached(pid) => {
                let proc = std::path::Path::new("/proc");
                if proc.join(pid.to_string()).exists()
                    && !crate::process::attach_guard::is_zombie(proc, *pid)
                {
                    None
                } else {
                    Some(None)
                }
            }
        }
    }
}

impl ThreadSource for ProcThreads {
    fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
    }

    fn wait_for_end(&mut self, seconds: f64) -> bool {
        match &self.exit_watch {
            Some(w) => {
                w.wait(autopin_engine::sensors::duration_of(seconds));
                true
            }
            None => false,
        }
    }

    fn switch_rate(&self) -> Option<f64> {
        let ((t0, n0), (t1, n1)) = (self.switches_first?, self.switches_last?);
        let secs = (t1 - t0).as_secs_f64();
        (secs > 0.0).then(|| n1.saturating_sub(n0) as f64 / secs)
    }

    fn notes(&self) -> Vec<String> {
        if self.used_registry {
            vec!["threads: creation order from the preload registry".into()]
        } else {
            Vec::new()
        }
    }

    fn libraries_loaded(&self) -> Option<bool> {
        let r = self.registry.as_ref()?;
        Some(r.owner_pid() == Some(self.pid) || r.processes().0.contains(&self.pid))
    }

    fn moving_threads(&mut self) {
        if let Some(r) = &self.registry {
            r.set_managed();
        }
    }

    fn warnings(&self) -> Vec<String> {
        match (&self.offspring, &self.registry) {
            (Some(o), Some(r)) => o.notes(&r.processes().0, r.owner_pid()),
            _ => Vec::new(),
        }
    }

    fn poll(&mut self) -> Result<ThreadSnapshot, OsError> {
        if let Some(e) = self.ended() {
            return Ok(ThreadSnapshot {
                ended: Some(e),
                // The registry outlives the program: its last births count.
                existed: self.registry.as_ref().map(|r| r.count() as usize),
                ..Default::default()
            });
        }
        self.polls += 1;
        self.read_switches();
        if let (Some(o), Some(r)) = (&mut self.offspring, &self.registry) {
            if self.polls % OFFSPRING_EVERY == 1 {
                o.look(&r.processes().0, r.owner_pid());
            }
        }
        if let Some(recorded) = self.registry_threads() {
            self.used_registry = true;
            // The registry lists every thread the program created, and their exits. A
            // thread it cannot know (made by a raw clone, or before the library loaded) is
            // found by listing /proc/PID/task, which costs a directory read and a lookup per
            // thread: done every `RESCAN_EVERY` polls, not every poll (thousands of threads),
            // and only while the kernel counts more threads than the registry has alive (or
            // the registry's owner is another process than the one listed); else every
            // `RESCAN_ANYWAY` polls.
            let since = self.polls - self.listed_at;
            let due = match self.unrecorded {
                None => true,
                Some(_) if since >= RESCAN_ANYWAY => true,
                Some(_) if since < RESCAN_EVERY => false,
                Some(_) => {
                    self.registry.as_ref().and_then(|r| r.owner_pid()) != Some(self.pid)
                        || self.kernel_thread_count() != Some(recorded.len())
                }
            };
            if due {
                self.listed_at = self.polls;
                let known: HashSet<i32> = recorded.iter().map(|r| r.0).collect();
                let scan = self.tasks.scan().unwrap_or_default();
                self.unrecorded = Some(
                    scan.iter()
                        .map(|t| t.tid)
                        .filter(|t| !known.contains(t))
                        .collect(),
                );
            } else if since >= RESCAN_EVERY
                && self.unrecorded.as_ref().is_some_and(|u| !u.is_empty())
            {
                // The kernel's count is the registry's: the threads only /proc showed are gone.
                self.unrecorded = Some(Vec::new());
            }
            // The registry's threads (the owner may be another process of the launched
            // tree), and those only /proc shows.
            let all = every_thread(&recorded, &mut self.unrecorded);
            let mut tracked = Vec::new();
            for (tid, creation) in recorded {
                if let Some(i) = self.index_for(creation) {
                    tracked.push((tid as u32, i));
                }
            }
            tracked.sort_by_key(|t| t.1);
            return Ok(ThreadSnapshot {
                tracked,
                all,
                ended: None,
                existed: self.registry.as_ref().map(|r| r.count() as usize),
            });
        }
        // The process may vanish between the check and the scan: the next poll reaps it.
        let scan = self.tasks.scan().unwrap_or_default();
        for (creation, t) in self.order.observe(&scan) {
            let idx = self.index_for(creation);
            self.tracked_index.insert(t.tid, idx);
        }
        let all: Vec<u32> = scan.iter().map(|t| t.tid as u32).collect();
        let listed: HashSet<i32> = scan.iter().map(|t| t.tid).collect();
        self.tracked_index.retain(|tid, _| listed.contains(tid));
        let mut tracked: Vec<(u32, usize)> = scan
            .iter()
            .filter_map(|t| {
                self.tracked_index
                    .get(&t.tid)
                    .copied()
                    .flatten()
                    .map(|i| (t.tid as u32, i))
            })
            .collect();
        tracked.sort_by_key(|t| t.1);
        Ok(ThreadSnapshot {
            tracked,
            all,
            ended: None,
            // The registry counts births even when it is too full to list the threads.
            existed: self.registry.as_ref().map(|r| r.count() as usize),
        })
    }
}

/// The program's threads: those the registry `recorded`, and those only /proc listed. A
/// thread /proc listed in the moment between its birth and its record is the registry's
/// once recorded, and leaves `unrecorded` then: listed twice until the next listing, its
/// stale entry's end looked like a thread gone, which marks the interval disturbed (and a
/// disturbed warm-up cannot end a probe: syncbench's threads stacked on one CPU were then
/// probed for a whole tick at a thousandth of their rate).
fn every_thread(recorded: &[(i32, usize)], unrecorded: &mut Option<Vec<i32>>) -> Vec<u32> {
    let mut all: Vec<u32> = recorded.iter().map(|r| r.0 as u32).collect();
    if let Some(only_proc) = unrecorded.as_mut().filter(|u| !u.is_empty()) {
        let known: HashSet<i32> = recorded.iter().map(|r| r.0).collect();
        only_proc.retain(|t| !known.contains(t));
        all.extend(only_proc.iter().map(|&t| t as u32));
    }
    all
}

/// The number on the `Threads:` line of a /proc/PID/status text.
fn threads_line(status: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(status).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()
}

/// The program's own cumulative progress besides the objective: its heartbeats when it
/// reports them (and the objective is not the heartbeat), else the OpenMP constructs the
/// preload library counted (unless the objective is exactly that).
fn own_progress(
    hb: &autopin_objective::HeartbeatState,
    objective_is_heartbeat: bool,
    objective_is_openmp: bool,
) -> Option<(f64, &'static str)> {
    if hb.beats > 0 && !objective_is_heartbeat {
        return Some((hb.beats as f64, "heartbeat"));
    }
    match &hb.omp {
        Some(o) if !(objective_is_openmp || objective_is_heartbeat && hb.beats > 0) => {
            Some((o.counts.total() as f64, "OpenMP progress"))
        }
        _ => None,
    }
}

/// The previous sample, heartbeats, joules and OpenMP constructs (all, and once a team).
type LastReading = (Sample, Option<u64>, Option<f64>, Option<(u64, u64)>);

/// The objective measured for real.
pub struct PerfMeter {
    objective: Objective,
    sampler: Option<Sampler<PerfCounterSource>>,
    heartbeat: Option<HeartbeatChannel>,
    energy: Option<Box<dyn EnergySource>>,
    /// The previous sample, heartbeats, joules and OpenMP constructs.
    last: Option<LastReading>,
    total: f64,
    per_thread: BTreeMap<u32, f64>,
    first_event: Option<String>,
    paused: bool,
    /// Threads whose counters could not be opened (vanished, or other reasons), with why.
    pub open_failures: Vec<String>,
    /// How the counters count, and why (autopin-perf's `choose_counting_mode`).
    mode: ModeChoice,
}

impl PerfMeter {
    pub fn new(
        objective: Objective,
        counters: Option<Sampler<PerfCounterSource>>,
        heartbeat: Option<HeartbeatChannel>,
        energy: Option<Box<dyn EnergySource>>,
    ) -> Self {
        let first_event = objective.events().first().map(|e| e.key().to_string());
        PerfMeter {
            objective,
            sampler: counters,
            heartbeat,
            energy,
            last: None,
            total: 0.0,
            per_thread: BTreeMap::new(),
            first_event,
            paused: false,
            open_failures: Vec::new(),
            mode: ModeChoice {
                mode: CountingMode::PerThread,
                reason: "per thread".into(),
            },
        }
    }

    /// Counts as `choice` says: per CPU, the counters stay on the CPUs given to
    /// [`counters_for`] and threads are not added one by one.
    pub fn with_mode(mut self, choice: ModeChoice) -> Self {
        self.mode = choice;
        self
    }

    fn per_cpu(&self) -> bool {
        matches!(self.mode.mode, CountingMode::PerCpu { .. })
    }
}

impl Meter for PerfMeter {
    fn want_team(&mut self, threads: u32) {
        if let Some(h) = &self.heartbeat {
            h.want_team(threads);
        }
    }

    fn team(&self) -> Option<autopin_objective::TeamState> {
        self.heartbeat.as_ref()?.read().omp.map(|o| o.team)
    }

    fn read(&mut self, threads: &[u32]) -> Result<Reading, OsError> {
        if self.paused {
            return Ok(Reading::default());
        }
        let now = Instant::now();
        let per_cpu = self.per_cpu();
        let sample = match self.sampler.as_mut() {
            Some(s) if per_cpu => s.sample(now),
            Some(s) => {
                let want: std::collections::BTreeSet<Target> =
                    threads.iter().map(|t| Target::Thread(*t as i32)).collect();
                for t in s.targets() {
                    if !want.contains(&t) {
                        s.remove(t);
                    }
                }
                let have: std::collections::BTreeSet<Target> = s.targets().into_iter().collect();
                for t in want.difference(&have) {
                    if let Err(e) = s.add(*t) {
                        // A thread that exited before we could attach is normal churn; other
                        // failures are kept for the report.
                        let alive = std::path::Path::new(&format!("/proc/{}", t_id(t))).exists();
                        if alive && self.open_failures.len() < 10 {
                            self.open_failures.push(format!("{t}: {e}"));
                        }
                    }
                }
                s.sample(now)
            }
            None => Sample {
                at: now,
                events: vec![],
                scales: vec![],
                values: BTreeMap::new(),
                unreadable: vec![],
            },
        };
        let beats = self.heartbeat.as_ref().map(|h| h.read());
        let joules = match self.energy.as_mut() {
            Some(e) => Some(e.read_joules().map_err(crate::os_error::from_perf)?),
            None => None,
        };
        let mut present = BTreeMap::new();
        if let Some((prev, prev_beats, prev_j, prev_omp)) = &self.last {
            let d = sample.delta_since(prev);
            let mut delta = d.to_delta();
            delta.heartbeats = match (beats.as_ref().map(|b| b.beats), prev_beats) {
                (Some(a), Some(b)) => Some(a.saturating_sub(*b)),
                _ => None,
            };
            let omp = match (beats.as_ref().and_then(|b| b.omp), prev_omp) {
                (Some(a), Some((all, team))) => Some((
                    a.counts.total().saturating_sub(*all),
                    a.counts.team_total().saturating_sub(*team),
                )),
                // The program made its first OpenMP call during this interval.
                (Some(a), None) if prev_beats.is_some() => {
                    Some((a.counts.total(), a.counts.team_total()))
                }
                _ => None,
            };
            delta.omp_progress = omp.map(|o| o.0);
            delta.omp_team_progress = omp.map(|o| o.1);
            delta.energy_joules = match (joules, prev_j) {
                (Some(a), Some(b)) => Some((a - b).max(0.0)),
                _ => None,
            };
            let secs = delta.elapsed.as_secs_f64();
            if let Some(v) = self.objective.evaluate(&delta) {
                // Integrate the objective so the session's amount/time is the objective.
                self.total += v * secs;
            }
            if let Some(ev) = &self.first_event {
                for (t, _) in d.per_target.iter() {
                    if let (Target::Thread(tid), Some(r)) = (t, d.rate(*t, ev)) {
                        *self.per_thread.entry(*tid as u32).or_default() += r * secs;
                    }
                }
            }
        }
        // Per-thread keys: the threads counted in this sample (or the ones asked for when the
        // objective is not per thread), so the driver sees who came and went.
        for t in threads {
            let v = self.per_thread.get(t).copied().unwrap_or(0.0);
            present.insert(*t, v);
        }
        self.per_thread.retain(|t, _| present.contains_key(t));
        let phase = beats.as_ref().and_then(|b| b.phase.clone());
        let phase_seq = beats.as_ref().map(|b| b.phase_seq);
        let progress = beats.as_ref().and_then(|b| {
            own_progress(
                b,
                self.objective.needs_heartbeat(),
                self.objective.needs_openmp(),
            )
        });
        let omp_total = beats
            .as_ref()
            .and_then(|b| b.omp)
            .map(|o| (o.counts.total(), o.counts.team_total()));
        self.last = Some((sample, beats.map(|b| b.beats), joules, omp_total));
        Ok(Reading {
            total: Some(self.total),
            per_thread: present,
            phase,
            phase_seq,
            progress,
        })
    }

    fn notes(&self) -> Vec<String> {
        self.open_failures
            .iter()
            .map(|f| format!("counters: {f}"))
            .collect()
    }

    fn counting(&self) -> Option<(String, String)> {
        // Nothing is counted by the kernel: the program reports its own progress.
        if self.sampler.is_none() && self.energy.is_none() {
            return None;
        }
        let mode = match &self.mode.mode {
            CountingMode::PerThread => "per-thread".to_string(),
            CountingMode::PerCpu { cpus, cgroup } => format!(
                "per-CPU on {}{}",
                cpus.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                cgroup
                    .as_ref()
                    .map(|g| format!(" (cgroup {})", g.display()))
                    .unwrap_or_default()
            ),
        };
        Some((mode, self.mode.reason.clone()))
    }

    fn pause(&mut self) {
        if let Some(s) = self.sampler.as_mut() {
            for t in s.targets() {
                s.remove(t);
            }
        }
        self.paused = true;
    }
}

/// The `task-clock` objective without perf: each thread's time on a CPU from
/// /proc/TID/schedstat (nanoseconds, kept by the scheduler anyway), so it works where
/// perf_event is unavailable and adds nothing to the target's context switches. A thread
/// that shares its CPU with a busy neighbour gets about half the CPU time.
pub struct ProcCpuMeter {
    proc_root: std::path::PathBuf,
    heartbeat: Option<HeartbeatChannel>,
    unreadable: Vec<String>,
    /// The program, for its whole CPU time in one call (see [`Meter::whole_program`]).
    process: Option<i32>,
    whole_program: bool,
    /// Each thread's schedstat, kept open and read again from its start (the kernel makes
    /// the text anew on every read at offset 0): a program of thousands of threads costs
    /// one read per thread a tick instead of an open, a size query, a read and a close.
    open: HashMap<u32, std::fs::File>,
    /// Files it may keep open: half of what the process may open, the rest left for all
    /// else autopin opens (counters, /proc, reports).
    open_budget: usize,
    /// The most threads the program had when it was read as a whole during a search.
    read_as_whole: Option<usize>,
}

/// Most threads whose CPU time is read one by one every tick while searching.
const PER_THREAD_LIMIT: usize = 256;

impl ProcCpuMeter {
    pub fn new(heartbeat: Option<HeartbeatChannel>) -> Self {
        ProcCpuMeter {
            proc_root: "/proc".into(),
            heartbeat,
            unreadable: Vec::new(),
            process: None,
            whole_program: false,
            open: HashMap::new(),
            open_budget: open_files_allowed() / 2,
            read_as_whole: None,
        }
    }

    /// The program whose threads are measured: once a decision is in force, its whole CPU
    /// time is read in one call instead of each thread's.
    pub fn of_process(mut self, pid: i32) -> Self {
        self.process = Some(pid);
        self
    }

    /// Reads /proc from another root (tests).
    pub fn with_proc_root(mut self, root: impl Into<std::path::PathBuf>) -> Self {
        self.proc_root = root.into();
        self
    }

    /// Seconds thread `tid` has spent on a CPU, or None when it is gone.
    pub fn cpu_seconds(&mut self, tid: u32) -> Option<f64> {
        if let Some(f) = self.open.get(&tid) {
            let v = schedstat_seconds(f);
            if v.is_none() {
                // The thread is gone (the kernel answers ESRCH): its file goes too.
                self.open.remove(&tid);
            }
            return v;
        }
        let f = std::fs::File::open(self.proc_root.join(format!("{tid}/schedstat"))).ok()?;
        let v = schedstat_seconds(&f)?;
        if self.open.len() < self.open_budget {
            self.open.insert(tid, f);
        }
        Some(v)
    }
}

/// The first number of a schedstat file (nanoseconds on a CPU), read from its start.
fn schedstat_seconds(f: &std::fs::File) -> Option<f64> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 96];
    let n = f.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns * 1e-9)
}

/// How many files this process may open (the soft RLIMIT_NOFILE; unlimited counts as a
/// million).
fn open_files_allowed() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    limit
        .current
        .map_or(1 << 20, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

impl Meter for ProcCpuMeter {
    fn want_team(&mut self, threads: u32) {
        if let Some(h) = &self.heartbeat {
            h.want_team(threads);
        }
    }

    fn team(&self) -> Option<autopin_objective::TeamState> {
        self.heartbeat.as_ref()?.read().omp.map(|o| o.team)
    }

    fn whole_program(&mut self, yes: bool) {
        self.whole_program = yes;
    }

    fn read(&mut self, threads: &[u32]) -> Result<Reading, OsError> {
        // A program of very many threads is read as a whole while it is searched too: one
        // system call instead of one per thread a tick (2000 threads cost ~5% of a CPU).
        // Its probes then carry no per-thread rates, and the report says so.
        let many = threads.len() > PER_THREAD_LIMIT;
        let total = self
            .process
            .filter(|_| self.whole_program || many)
            .and_then(crate::process::cpu_clock::process_cpu_seconds);
        if total.is_some() && many && !self.whole_program {
            self.read_as_whole = self.read_as_whole.max(Some(threads.len()));
        }
        let mut per_thread = BTreeMap::new();
        if total.is_some() {
            // Per-thread files are not read while the whole program's time is.
            self.open.clear();
        }
        for t in threads.iter().filter(|_| total.is_none()) {
            match self.cpu_seconds(*t) {
                Some(v) => {
                    per_thread.insert(*t, v);
                }
                None => {
                    let alive = self.proc_root.join(t.to_string()).exists();
                    if alive && self.unreadable.len() < 10 {
                        self.unreadable.push(format!(
                            "cannot read {}/{t}/schedstat",
                            self.proc_root.display()
                        ));
                    }
                }
            }
        }
        // Threads no longer asked for (gone, or not tracked any more) let their files go.
        if self.open.len() > per_thread.len() {
            self.open.retain(|t, _| per_thread.contains_key(t));
        }
        let hb = self.heartbeat.as_ref().map(|h| h.read());
        Ok(Reading {
            total,
            per_thread,
            phase: hb.as_ref().and_then(|b| b.phase.clone()),
            phase_seq: hb.as_ref().map(|b| b.phase_seq),
            progress: hb.as_ref().and_then(|b| own_progress(b, false, false)),
        })
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = self.unreadable.clone();
        if let Some(n) = self.read_as_whole {
            notes.push(format!(
                "per-thread CPU time not read while searching: up to {n} threads (more than {PER_THREAD_LIMIT}), so the program's total CPU time was read each tick and the probes carry no per-thread rates"
            ));
        }
        notes
    }
}

/// Counters for the events of `objective` in `mode`: per thread on no thread yet (threads
/// are added as they appear), or per CPU on the mode's CPUs (and cgroup).
pub fn counters_for(
    objective: &Objective,
    mode: &CountingMode,
) -> Result<Option<Sampler<PerfCounterSource>>, autopin_objective::PerfError> {
    let events = objective.events();
    if events.is_empty() {
        return Ok(None);
    }
    autopin_perf::sampler_for(mode, events).map(Some)
}

/// Our own CPU time (user + sys), seconds.
pub fn self_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn t_id(t: &Target) -> i32 {
    match t {
        Target::Thread(t) => *t,
        Target::Cpu(c) => *c as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_listed_before_its_record_is_listed_once_after_it() {
        // /proc listed thread 12 (and 13, a raw clone the library never records) before
        // the registry had 12: once it has, 12 is the registry's and listed once.
        let mut unrecorded = Some(vec![12, 13]);
        let before = every_thread(&[(10, 0), (11, 1)], &mut unrecorded);
        assert_eq!(before, vec![10, 11, 12, 13]);
        let after = every_thread(&[(10, 0), (11, 1), (12, 2)], &mut unrecorded);
        assert_eq!(after, vec![10, 11, 12, 13]);
        assert_eq!(unrecorded, Some(vec![13]));
        assert_eq!(every_thread(&[(10, 0)], &mut None), vec![10]);
    }

    #[test]
    fn the_kernels_thread_count_is_read_from_status() {
        let status = b"Name:\tmany\nTgid:\t7\nThreads:\t2001\nSigQ:\t0/63\n";
        assert_eq!(threads_line(status), Some(2001));
        assert_eq!(threads_line(b"Name:\tx\n"), None);
        // This process, read again through the file kept open (other tests' threads come and
        // go meanwhile: only a count that holds this test's two is certain).
        let me = std::process::id() as i32;
        let mut t = ProcThreads::new(me, crate::process::SkipMask::none(), Lifetime::Attached(me));
        assert!(t.kernel_thread_count().expect("our thread count") >= 1);
        assert!(t.status.is_some(), "the file is kept open");
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || wait.recv());
        assert!(t.kernel_thread_count().expect("read again") >= 2);
        go.send(()).unwrap();
        h.join().unwrap().unwrap();
    }

    #[test]
    fn proc_cpu_meter_reads_schedstat_and_skips_vanished_threads() {
        let dir = std::env::temp_dir().join(format!("autopin-schedstat-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("42")).unwrap();
        std::fs::write(dir.join("42/schedstat"), "1500000000 2000 7\n").unwrap();
        let mut m = ProcCpuMeter::new(None).with_proc_root(&dir);
        let r = m.read(&[42, 43]).unwrap();
        assert_eq!(r.per_thread.len(), 1);
        assert!((r.per_thread[&42] - 1.5).abs() < 1e-9);
        assert!(m.notes().is_empty(), "a vanished thread is normal churn");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_program_of_many_threads_is_read_as_a_whole_while_searching() {
        // This test process is the program; its thread list is as long as a big program's
        // (ids that name no thread here: none may be read one by one).
        let pid = std::process::id() as i32;
        let many: Vec<u32> = (0..=PER_THREAD_LIMIT as u32)
            .map(|i| 4_000_000 + i)
            .collect();
        let mut m = ProcCpuMeter::new(None).of_process(pid);
        let r = m.read(&many).unwrap();
        assert!(
            r.per_thread.is_empty(),
            "{} threads read one by one",
            r.per_thread.len()
        );
        let total = r.total.expect("the program's total CPU time");
        assert!(total > 0.0, "{total}");
        let notes = m.notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains(&format!("up to {} threads", many.len())),
            "{notes:?}"
        );
        // A few threads are still read one by one, and the note stays about the many.
        let tid = rustix::thread::gettid().as_raw_pid() as u32;
        let r = m.read(&[tid]).unwrap();
        assert!(r.total.is_none());
        assert_eq!(r.per_thread.len(), 1);
        assert_eq!(m.notes().len(), 1);
    }

    #[test]
    fn a_meter_of_reported_progress_says_the_kernel_counts_nothing() {
        // OpenMP progress and heartbeats come from the heartbeat file, not from counters:
        // no counting mode to report. A counted event has one.
        let openmp = Objective::parse("openmp").unwrap();
        assert!(counters_for(&openmp, &CountingMode::PerThread)
            .unwrap()
            .is_none());
        let m = PerfMeter::new(openmp, None, None, None);
        assert_eq!(m.counting(), None);
        let clock = Objective::parse("task-clock").unwrap();
        if let Ok(Some(counters)) = counters_for(&clock, &CountingMode::PerThread) {
            let m = PerfMeter::new(clock, Some(counters), None, None);
            assert_eq!(m.counting().map(|c| c.0), Some("per-thread".to_string()));
        }
    }

    #[test]
    fn proc_cpu_meter_sees_our_own_busy_thread() {
        let mut m = ProcCpuMeter::new(None);
        let tid = rustix::thread::gettid().as_raw_pid() as u32;
        let a = m.cpu_seconds(tid).expect("schedstat of our thread");
        // Spins until the meter sees 10 ms of CPU (a loaded machine gives a 50 ms spin less
        // than that); within 5 s, or it sees nothing.
        let t = Instant::now();
        let mut x = 0u64;
        let mut b = a;
        while b - a <= 0.01 && t.elapsed().as_secs() < 5 {
            for _ in 0..100_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            b = m.cpu_seconds(tid).unwrap();
        }
        assert!(b - a > 0.01, "{a} → {b} ({x})");
    }

    #[test]
    fn perf_meter_counts_per_cpu_when_the_mode_says_so() {
        if let Err(u) = autopin_perf::probe().per_cpu {
            autopin_testkit::skip!("per-CPU counting is not allowed here ({u})");
        }
        let obj = Objective::parse("task-clock").unwrap();
        let mode = CountingMode::PerCpu {
            cpus: vec![0],
            cgroup: None,
        };
        let counters = counters_for(&obj, &mode).unwrap();
        let mut m = PerfMeter::new(obj, counters, None, None).with_mode(ModeChoice {
            mode,
            reason: "test".into(),
        });
        // Our own thread on CPU 0 gives the CPU's counter something to count.
        let me = rustix::thread::gettid().as_raw_pid();
        let before = autopin_topology::affinity::get(me).unwrap();
        autopin_topology::affinity::set(me, &autopin_topology::CpuSet::from_cpus([0])).unwrap();
        let r0 = m.read(&[me as u32]).unwrap();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 50 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let r1 = m.read(&[me as u32]).unwrap();
        autopin_topology::affinity::set(me, &before).unwrap();
        assert!(
            r1.total.unwrap() > r0.total.unwrap(),
            "{r0:?} → {r1:?} ({x})"
        );
        assert_eq!(m.counting().unwrap().0, "per-CPU on 0");
    }
}
