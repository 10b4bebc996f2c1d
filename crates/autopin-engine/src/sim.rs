//! A simulated machine for testing strategies and the driver without the OS: a virtual
//! clock, a fixed (or churning) set of threads, a pinner that records placements, and a
//! meter that integrates a rate model with seeded noise. Runs a 96-CPU, 4-socket machine
//! through a whole search in milliseconds.

use crate::os::{Clock, Meter, Reading, ThreadSnapshot, ThreadSource};
use crate::pinner::{PinError, Pinner};
use crate::stats::Rng;
use autopin_placement::Pinning;
use autopin_topology::{CpuSet, Machine, ObjType};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Where each PU sits: (core, package) logical indexes by OS index.
#[derive(Debug, Clone)]
pub struct SimTopo {
    pub pus: Vec<u32>,
    pub core_of: HashMap<u32, usize>,
    pub package_of: HashMap<u32, usize>,
    pub packages: usize,
}

impl SimTopo {
    pub fn from_machine(m: &Machine) -> Self {
        let mut core_of = HashMap::new();
        let mut package_of = HashMap::new();
        let mut pus = Vec::new();
        for id in m.pus() {
            let o = m.obj(id);
            let Some(os) = o.os_index else { continue };
            pus.push(os);
            let core = m
                .ancestor_of_type(id, ObjType::Core)
                .map(|c| m.obj(c).logical_index as usize);
            let pkg = m
                .ancestor_of_type(id, ObjType::Package)
                .map(|c| m.obj(c).logical_index as usize);
            core_of.insert(os, core.unwrap_or(os as usize));
            package_of.insert(os, pkg.unwrap_or(0));
        }
        let packages = package_of.values().max().map_or(1, |m| m + 1);
        SimTopo {
            pus,
            core_of,
            package_of,
            packages,
        }
    }
}

/// How fast each thread runs for a placement (None = unpinned).
pub trait RateModel: Send {
    fn rates(&self, topo: &SimTopo, placement: &[Option<u32>]) -> Vec<f64>;
}

/// Memory-bound, communicating threads: each package has a memory bandwidth cap, threads
/// `2k` and `2k+1` exchange data (faster when they share a package's L3), and SMT siblings
/// share a core. The OS placement (unpinned) spreads threads like `scatter` but pays for
/// migrations.
#[derive(Debug, Clone)]
pub struct HpcModel {
    /// Rate of one thread alone on a core, units/s.
    pub base: f64,
    /// Share of one package's memory bandwidth one thread wants (0.25 → 4 saturate it).
    pub mem_demand: f64,
    /// Slowdown of a communicating pair split across packages.
    pub comm_penalty: f64,
    /// Throughput of a core running two threads, relative to one (1.2 → each gets 0.6).
    pub smt_gain: f64,
    /// Slowdown of unpinned threads (migrations, cold caches).
    pub os_penalty: f64,
}

impl Default for HpcModel {
    fn default() -> Self {
        HpcModel {
            base: 1e9,
            mem_demand: 0.22,
            comm_penalty: 0.25,
            smt_gain: 1.2,
            os_penalty: 0.08,
        }
    }
}

impl RateModel for HpcModel {
    fn rates(&self, topo: &SimTopo, placement: &[Option<u32>]) -> Vec<f64> {
        // Unpinned: the OS spreads threads over packages, one per core, and migrates them.
        let mut os_slow = vec![1.0; placement.len()];
        let placed: Vec<u32> = placement
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Some(c) => *c,
                None => {
                    os_slow[i] = 1.0 - self.os_penalty;
                    let per_pkg = (topo.pus.len() / topo.packages.max(1)).max(1);
                    let pkg = i % topo.packages.max(1);
                    let slot = (i / topo.packages.max(1)) * 2 % per_pkg;
                    topo.pus[(pkg * per_pkg + slot) % topo.pus.len()]
                }
            })
            .collect();
        let mut per_pu: HashMap<u32, usize> = HashMap::new();
        let mut per_core: HashMap<usize, usize> = HashMap::new();
        let mut per_pkg: HashMap<usize, usize> = HashMap::new();
        for c in &placed {
            *per_pu.entry(*c).or_default() += 1;
            *per_core.entry(topo.core_of[c]).or_default() += 1;
            *per_pkg.entry(topo.package_of[c]).or_default() += 1;
        }
        placed
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let on_pu = per_pu[c] as f64;
                let on_core = per_core[&topo.core_of[c]] as f64;
                // Threads on one PU time-share it; distinct PUs of a core share the core.
                let distinct_pus_on_core = on_core / on_pu;
                let core_share = if distinct_pus_on_core > 1.0 {
                    self.smt_gain / distinct_pus_on_core
                } else {
                    1.0
                };
                let cpu = core_share / on_pu;
                let demand = per_pkg[&topo.package_of[c]] as f64 * self.mem_demand * cpu;
                let bw = if demand > 1.0 { 1.0 / demand } else { 1.0 };
                let partner = i ^ 1;
                let comm = match placed.get(partner) {
                    Some(p) if topo.package_of[p] != topo.package_of[c] => 1.0 - self.comm_penalty,
                    _ => 1.0,
                };
                self.base * cpu * bw * comm * os_slow[i]
            })
            .collect()
    }
}

/// Candidates with different sharing structure for `n` threads on a multi-package machine:
/// k packages used (1, 2, 4, ...), pairs kept together or split, with or without SMT
/// siblings, plus unpinned. Stands in for `autopin_placement::candidates` in simulations.
pub fn structured_candidates(topo: &SimTopo, n: usize) -> Vec<Pinning> {
    let per_pkg = topo.pus.len() / topo.packages.max(1);
    let mut out = vec![Pinning::unpinned()];
    let mut k = 1;
    while k <= topo.packages {
        for smt in [false, true] {
            let step = if smt { 1 } else { 2 };
            let cap = per_pkg / step;
            if n > cap * k {
                continue;
            }
            for pairs_together in [true, false] {
                let mut slots = vec![0usize; k];
                let mut cpus = Vec::with_capacity(n);
                for i in 0..n {
                    let pkg = if pairs_together { (i / 2) % k } else { i % k };
                    let slot = slots[pkg];
                    slots[pkg] += 1;
                    cpus.push(topo.pus[pkg * per_pkg + slot * step]);
                }
                let label = format!(
                    "{k} package(s), {}, pairs {}",
                    if smt { "SMT siblings" } else { "one per core" },
                    if pairs_together { "together" } else { "split" }
                );
                if !out.iter().any(|c: &Pinning| c.cpus == cpus) {
                    out.push(Pinning::pinned(label, cpus));
                }
            }
        }
        k *= 2;
    }
    out
}

/// One phase of a phased program: its name (announced like the heartbeat channel does),
/// how long it lasts each time, and its rate model.
pub struct SimPhase {
    pub name: String,
    pub duration: f64,
    pub model: Box<dyn RateModel>,
}

struct SimState {
    now: f64,
    topo: SimTopo,
    model: Box<dyn RateModel>,
    /// When non-empty, the program cycles through these phases (and `model` is unused).
    phases: Vec<SimPhase>,
    noise: f64,
    rng: Rng,
    /// tid → (index, cpu or None)
    placement: BTreeMap<u32, (usize, Option<u32>)>,
    /// tid → time its last re-pin happened (cold caches for `cold` seconds).
    moved_at: HashMap<u32, f64>,
    cold: f64,
    counted: BTreeMap<u32, f64>,
    last_read: f64,
    allowed_all: usize,
    /// tid → CPU mask last set (or given at the start); absent = all PUs.
    masks: HashMap<u32, CpuSet>,
}

impl SimState {
    fn cycle(&self) -> f64 {
        self.phases.iter().map(|p| p.duration.max(1e-6)).sum()
    }

    /// (phase index, number of phase changes so far) at time t; None without phases.
    fn phase_at(&self, t: f64) -> Option<(usize, u64)> {
        if self.phases.is_empty() {
            return None;
        }
        let cycle = self.cycle();
        let k = (t / cycle).floor().max(0.0);
        let mut pos = t - k * cycle;
        for (i, p) in self.phases.iter().enumerate() {
            let d = p.duration.max(1e-6);
            if pos < d {
                return Some((i, k as u64 * self.phases.len() as u64 + i as u64));
            }
            pos -= d;
        }
        let last = self.phases.len() - 1;
        Some((last, k as u64 * self.phases.len() as u64 + last as u64))
    }

    /// [t0, t1) cut at phase boundaries: (length, phase index).
    fn segments(&self, t0: f64, t1: f64) -> Vec<(f64, Option<usize>)> {
        if self.phases.is_empty() {
            return vec![(t1 - t0, None)];
        }
        let cycle = self.cycle();
        let mut out = Vec::new();
        let mut t = t0;
        while t < t1 - 1e-12 {
            let (i, _) = self.phase_at(t).unwrap_or((0, 0));
            let k = (t / cycle).floor();
            let start: f64 = self.phases[..i].iter().map(|p| p.duration.max(1e-6)).sum();
            let end = (k * cycle + start + self.phases[i].duration.max(1e-6)).min(t1);
            let end = if end <= t { t1.min(t + 1e-6) } else { end };
            out.push((end - t, Some(i)));
            t = end;
        }
        out
    }
}

/// The simulated machine: one shared state behind the clock, thread source, pinner and meter.
#[derive(Clone)]
pub struct Sim {
    state: Arc<Mutex<SimState>>,
    threads: usize,
    ends_at: f64,
    exit_code: i32,
}

impl Sim {
    pub fn new(
        m: &Machine,
        model: Box<dyn RateModel>,
        threads: usize,
        noise: f64,
        seed: u64,
        ends_at: f64,
    ) -> Self {
        let topo = SimTopo::from_machine(m);
        let allowed_all = topo.pus.len();
        let placement = (0..threads).map(|i| (1000 + i as u32, (i, None))).collect();
        Sim {
            state: Arc::new(Mutex::new(SimState {
                now: 0.0,
                topo,
                model,
                phases: Vec::new(),
                noise,
                rng: Rng::new(seed),
                placement,
                moved_at: HashMap::new(),
                cold: 0.1,
                counted: BTreeMap::new(),
                last_read: 0.0,
                allowed_all,
                masks: HashMap::new(),
            })),
            threads,
            ends_at,
            exit_code: 0,
        }
    }

    /// A program that cycles through `phases` (each announced by name, as through the
    /// heartbeat channel), starting with the first at t = 0.
    pub fn with_phases(self, phases: Vec<SimPhase>) -> Self {
        self.lock().phases = phases;
        self
    }

    /// The program exits with this status when it ends.
    pub fn with_exit_code(mut self, code: i32) -> Self {
        self.exit_code = code;
        self
    }

    /// Every thread starts with this CPU mask (as after `taskset`).
    pub fn with_initial_mask(self, mask: &CpuSet) -> Self {
        {
            let mut s = self.lock();
            let all = s.allowed_all;
            let tids: Vec<u32> = s.placement.keys().copied().collect();
            for t in tids {
                s.masks.insert(t, mask.clone());
                if let Some(e) = s.placement.get_mut(&t) {
                    e.1 = if mask.len() == 1 || mask.len() < all {
                        mask.first()
                    } else {
                        None
                    };
                }
            }
        }
        self
    }

    /// Each thread's current CPU mask, by tid.
    pub fn masks(&self) -> BTreeMap<u32, CpuSet> {
        let s = self.lock();
        s.placement
            .keys()
            .map(|t| {
                let m = s
                    .masks
                    .get(t)
                    .cloned()
                    .unwrap_or_else(|| CpuSet::from_cpus(s.topo.pus.iter().copied()));
                (*t, m)
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn topo(&self) -> SimTopo {
        self.lock().topo.clone()
    }

    /// True rate of the whole program (all threads) under a candidate.
    pub fn true_rate(&self, c: &Pinning) -> f64 {
        let s = self.lock();
        let placement: Vec<Option<u32>> = (0..self.threads).map(|i| c.cpu_for(i)).collect();
        s.model.rates(&s.topo, &placement).iter().sum()
    }

    pub fn now(&self) -> f64 {
        self.lock().now
    }
}

impl Clock for Sim {
    fn now(&self) -> f64 {
        self.lock().now
    }
    fn sleep_until(&mut self, t: f64) {
        let mut s = self.lock();
        if t > s.now {
            s.now = t;
        }
    }
}

impl ThreadSource for Sim {
    fn poll(&mut self) -> Result<ThreadSnapshot, String> {
        let s = self.lock();
        let tracked: Vec<(u32, usize)> = s.placement.iter().map(|(t, (i, _))| (*t, *i)).collect();
        Ok(ThreadSnapshot {
            all: tracked.iter().map(|t| t.0).collect(),
            tracked,
            ended: if s.now >= self.ends_at {
                Some(Some(self.exit_code))
            } else {
                None
            },
            context_switches: None,
        })
    }
}

impl Pinner for Sim {
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> Result<(), PinError> {
        let mut s = self.lock();
        let now = s.now;
        let all = s.allowed_all;
        let Some(e) = s.placement.get_mut(&(tid as u32)) else {
            return Err(PinError::Gone(tid));
        };
        let new = if cpus.len() == 1 || cpus.len() < all {
            cpus.first()
        } else {
            None
        };
        if e.1 != new {
            e.1 = new;
            s.moved_at.insert(tid as u32, now);
        }
        s.masks.insert(tid as u32, cpus.clone());
        Ok(())
    }
    fn affinity(&self, tid: i32) -> Result<CpuSet, PinError> {
        let s = self.lock();
        if let Some(m) = s.masks.get(&(tid as u32)) {
            return Ok(m.clone());
        }
        match s.placement.get(&(tid as u32)) {
            Some((_, Some(c))) => Ok(CpuSet::from_cpus([*c])),
            Some((_, None)) => Ok(CpuSet::from_cpus(s.topo.pus.iter().copied())),
            None => Err(PinError::Gone(tid)),
        }
    }
}

impl Meter for Sim {
    fn read(&mut self, threads: &[u32]) -> Result<Reading, String> {
        let mut s = self.lock();
        let dt = s.now - s.last_read;
        if dt > 0.0 {
            let order: Vec<u32> = s.placement.keys().copied().collect();
            let placement: Vec<Option<u32>> = s.placement.values().map(|v| v.1).collect();
            // The interval split where the program changes phase, each part at its rates.
            let mut per_thread = vec![0.0; order.len()];
            for (seg, phase) in s.segments(s.last_read, s.now) {
                let model = match phase {
                    Some(i) => &s.phases[i].model,
                    None => &s.model,
                };
                for (acc, r) in per_thread.iter_mut().zip(model.rates(&s.topo, &placement)) {
                    *acc += r * seg;
                }
            }
            // One noise factor per interval for the whole program (a noisy neighbour or
            // frequency change hits every thread), as harsh as noise gets.
            let factor = (1.0 + s.noise * s.rng.normal()).max(0.0);
            for (tid, amount) in order.iter().zip(per_thread) {
                let cold_left = s
                    .moved_at
                    .get(tid)
                    .map_or(0.0, |m| (m + s.cold - s.last_read).clamp(0.0, dt));
                let eff = (dt - 0.5 * cold_left) / dt;
                *s.counted.entry(*tid).or_default() += amount * eff * factor;
            }
        }
        s.last_read = s.now;
        let per_thread = threads
            .iter()
            .filter_map(|t| s.counted.get(t).map(|v| (*t, *v)))
            .collect();
        let (phase, phase_seq) = match s.phase_at(s.now) {
            Some((i, seq)) => (Some(s.phases[i].name.clone()), Some(seq)),
            None => (None, None),
        };
        Ok(Reading {
            total: None,
            per_thread,
            phase,
            phase_seq,
            progress: None,
        })
    }
}

/// The simulated world of a whole run (`crate::run`): the program starts (or is attached
/// to) in the simulation, perf counting is allowed or refused with a reason, the program
/// beats or not, and a start can fail like a missing program does.
pub struct SimPlatform {
    pub sim: Sim,
    /// Err(reason) simulates a machine where perf may not count (paranoid level, no PMU).
    pub counting: Result<(), String>,
    /// The program reports heartbeats from this time on (None: never).
    pub beats_from: Option<f64>,
    /// Starting fails with this error (e.g. command not found).
    pub start_error: Option<crate::error::EngineError>,
    /// The attached process's affinity mask (None: all PUs).
    pub attach_mask: Option<CpuSet>,
    /// What the run asked for, for assertions.
    pub launched_with: Option<crate::run::LaunchOptions>,
    pub meter_opened: Option<crate::run::ObjectiveSource>,
    /// How the simulated meter says it counts (mode, reason); None: it does not say.
    pub counting_mode: Option<(String, String)>,
    /// The simulated program is an OpenMP program linking this runtime.
    pub openmp_runtime: Option<String>,
    /// It completes OpenMP constructs from this time on (None: never).
    pub openmp_from: Option<f64>,
    /// The preload library sits in the launched program.
    pub preload_active: bool,
    /// CPUs other work keeps busy before the start.
    pub busy: Vec<u32>,
    /// Unix time at simulated time 0 (None: the platform has no wall clock).
    pub epoch: Option<f64>,
    /// Err(reason): moving pages is refused (e.g. another user's process).
    pub migration: Result<(), String>,
    /// Page migrations asked for: (simulated time, pid, CPUs, file-backed pages too).
    pub migrated: Vec<(f64, i32, Vec<u32>, bool)>,
}

impl SimPlatform {
    pub fn new(sim: Sim) -> Self {
        SimPlatform {
            sim,
            counting: Ok(()),
            beats_from: None,
            start_error: None,
            attach_mask: None,
            launched_with: None,
            meter_opened: None,
            counting_mode: None,
            openmp_runtime: None,
            openmp_from: Some(0.0),
            preload_active: true,
            busy: Vec::new(),
            epoch: None,
            migration: Ok(()),
            migrated: Vec::new(),
        }
    }
}

impl crate::run::Platform for SimPlatform {
    fn check_counting(&mut self, _events: &[autopin_perf::EventSpec]) -> crate::run::CountingCheck {
        crate::run::CountingCheck {
            result: self.counting.clone(),
            in_vm: false,
        }
    }

    fn start(
        &mut self,
        target: &crate::run::TargetSpec,
        launch: &crate::run::LaunchOptions,
    ) -> Result<crate::run::Started, crate::error::EngineError> {
        self.launched_with = Some(launch.clone());
        if let Some(e) = self.start_error.clone() {
            return Err(e);
        }
        let attached = target.is_attach();
        Ok(crate::run::Started {
            pid: 1000,
            threads: Box::new(self.sim.clone()),
            env: Vec::new(),
            mask: if attached {
                self.attach_mask.clone()
            } else {
                None
            },
            warnings: Vec::new(),
            openmp_runtime: self.openmp_runtime.clone(),
            preload_active: self.preload_active && !attached,
        })
    }

    fn openmp_constructs(&mut self) -> u64 {
        match self.openmp_from {
            Some(t) if self.openmp_runtime.is_some() && self.sim.now() >= t => {
                1 + ((self.sim.now() - t) * 1000.0) as u64
            }
            _ => 0,
        }
    }

    fn busy_cpus(&mut self, allowed: &CpuSet) -> Vec<u32> {
        self.busy
            .iter()
            .copied()
            .filter(|c| allowed.contains(*c))
            .collect()
    }

    fn heartbeats(&mut self) -> u64 {
        match self.beats_from {
            Some(t) if self.sim.now() >= t => 1 + ((self.sim.now() - t) * 100.0) as u64,
            _ => 0,
        }
    }

    fn open_meter(
        &mut self,
        source: crate::run::ObjectiveSource,
        _objective: &autopin_perf::Objective,
        _cpus: &CpuSet,
    ) -> Result<Box<dyn Meter>, crate::error::EngineError> {
        self.meter_opened = Some(source);
        Ok(Box::new(SimMeter {
            sim: self.sim.clone(),
            counting: self.counting_mode.clone(),
        }))
    }

    fn counting_cost(
        &mut self,
        _events: &[autopin_perf::EventSpec],
    ) -> Option<autopin_perf::CountingCost> {
        None
    }

    fn self_cpu_seconds(&mut self) -> f64 {
        0.0
    }

    fn unix_time(&mut self) -> Option<f64> {
        self.epoch.map(|e| e + self.sim.now())
    }

    fn migrate_memory(
        &mut self,
        m: &Machine,
        pid: i32,
        cpus: &[u32],
        files: bool,
    ) -> Result<crate::report::MigrationOutcome, String> {
        self.migration.clone()?;
        self.migrated
            .push((self.sim.now(), pid, cpus.to_vec(), files));
        // 1000 pages per thread, all first-touched elsewhere: every one moves, spread
        // round-robin over the chosen nodes as the Linux platform spreads them.
        let to: Vec<u32> = crate::run::memory::nodes_of(m, cpus).into_iter().collect();
        if to.is_empty() {
            return Err(format!("CPUs {cpus:?} are on no NUMA node"));
        }
        let mut moved = std::collections::BTreeMap::new();
        for i in 0..1000 * cpus.len() {
            *moved.entry(to[i % to.len()]).or_insert(0) += 1;
        }
        Ok(crate::report::MigrationOutcome {
            to_nodes: to,
            moved,
            resident: 1000 * cpus.len() as u64,
            mappings: cpus.len(),
            numa_balancing: Some(false),
            ..Default::default()
        })
    }
}

/// The simulation's meter, saying how it counts like a perf meter does.
struct SimMeter {
    sim: Sim,
    counting: Option<(String, String)>,
}

impl Meter for SimMeter {
    fn read(&mut self, threads: &[u32]) -> Result<Reading, String> {
        self.sim.read(threads)
    }
    fn counting(&self) -> Option<(String, String)> {
        self.counting.clone()
    }
}

/// Collects a run's progress lines and checkpoints.
#[derive(Default)]
pub struct SimSink {
    pub messages: Vec<String>,
    pub checkpoints: Vec<crate::report::Report>,
}

impl crate::run::RunSink for SimSink {
    fn message(&mut self, _at: Option<f64>, text: &str) {
        self.messages.push(text.to_string());
    }
    fn checkpoint(&mut self, report: &crate::report::Report) {
        self.checkpoints.push(report.clone());
    }
}

#[cfg(test)]
mod tests;
