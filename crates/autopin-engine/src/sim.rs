//! A simulated machine for testing strategies and the driver without the OS: a virtual
//! clock, a fixed (or churning) set of threads, a pinner that records placements, and a
//! meter that integrates a rate model with seeded noise, and a memory model (where each
//! thread's pages live, what distance to them costs, pages that move when the platform
//! migrates them). Runs a 96-CPU, 4-socket machine through a whole search in milliseconds.

use crate::pinner::{PinError, Pinner};
use crate::rng::Rng;
use crate::sensors::{Clock, Meter, OsError, Reading, ThreadSnapshot, ThreadSource};
use autopin_placement::Pinning;
use autopin_topology::{CpuSet, Machine, ObjType};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Where each PU sits: (core, package) logical indexes and NUMA node OS index by OS index,
/// and the distances between nodes.
#[derive(Debug, Clone)]
pub struct SimTopo {
    pub pus: Vec<u32>,
    pub core_of: HashMap<u32, usize>,
    pub package_of: HashMap<u32, usize>,
    pub packages: usize,
    /// The node (with CPUs) local to each PU; absent on a machine without NUMA nodes.
    pub node_of: HashMap<u32, u32>,
    /// ACPI SLIT distances by node OS indexes, from the machine's matrix.
    pub distances: HashMap<(u32, u32), u32>,
    /// Each PU's ancestors, nearest first, with the level each stands for.
    pub ancestors: HashMap<u32, Vec<(autopin_topology::ObjId, models::Level)>>,
    /// On hybrid machines, each PU's speed relative to the fastest kind's (`kind_speeds`);
    /// absent: 1.
    pub speed: HashMap<u32, f64>,
    /// The CPUs other work leaves free, in the machine's order, where the OS placement's
    /// good state spreads its threads (`Sim::with_os_swing`; empty without a swing).
    pub os_free: Vec<u32>,
    /// The OS placement is in its good state: its threads spread over `os_free`, as a
    /// pinning would put them.
    pub os_off_busy: bool,
}

impl SimTopo {
    pub fn from_machine(m: &Machine) -> Self {
        let mut core_of = HashMap::new();
        let mut package_of = HashMap::new();
        let mut node_of = HashMap::new();
        let mut pus = Vec::new();
        let mut ancestors = HashMap::new();
        // The program runs only where it may (online, in its affinity mask and cgroup):
        // models count, and the OS placement spreads over, those CPUs alone.
        let allowed = m.allowed_cpuset();
        for id in m.pus() {
            let o = m.obj(id);
            let Some(os) = o.os_index.filter(|os| allowed.contains(*os)) else {
                continue;
            };
            pus.push(os);
            ancestors.insert(os, levels_above(m, id));
            let core = m
                .ancestor_of_type(id, ObjType::Core)
                .map(|c| m.obj(c).logical_index as usize);
            let pkg = m
                .ancestor_of_type(id, ObjType::Package)
                .map(|c| m.obj(c).logical_index as usize);
            core_of.insert(os, core.unwrap_or(os as usize));
            package_of.insert(os, pkg.unwrap_or(0));
            if let Some(n) = crate::run::page_migration::nodes_of(m, &[os]).first() {
                node_of.insert(os, *n);
            }
        }
        let packages = package_of.values().max().map_or(1, |m| m + 1);
        let mut distances = HashMap::new();
        if let Some(d) = &m.numa_distances {
            for (i, a) in m.numa_nodes.iter().enumerate() {
                for (j, b) in m.numa_nodes.iter().enumerate() {
                    if let Some(v) = d.get(i).and_then(|row| row.get(j)) {
                        distances.insert((a.os_index, b.os_index), *v);
                    }
                }
            }
        }
        SimTopo {
            pus,
            core_of,
            package_of,
            packages,
            node_of,
            distances,
            ancestors,
            speed: kind_speeds(m),
            os_free: Vec::new(),
            os_off_busy: false,
        }
    }

    /// How fast a thread runs on `pu` relative to one on the fastest kind of core (1 on a
    /// machine of one kind).
    pub fn speed(&self, pu: u32) -> f64 {
        self.speed.get(&pu).copied().unwrap_or(1.0)
    }

    /// The level at which PUs `a` and `b` meet: the cheapest their common ancestors share.
    pub fn shared_level(&self, a: u32, b: u32) -> models::Level {
        let (Some(x), Some(y)) = (self.ancestors.get(&a), self.ancestors.get(&b)) else {
            return models::Level::Machine;
        };
        // The cheapest level they share, not the nearest object: a cluster group may sit
        // below the L3 it belongs to (ARM's clusters of four cores under one L3), and
        // two cores of one cluster share that L3 as two of different clusters do.
        x.iter()
            .filter(|(id, _)| y.iter().any(|(o, _)| o == id))
            .map(|(_, l)| *l)
            .min()
            .unwrap_or(models::Level::Machine)
    }

    /// `pus` paired closest first: the two that meet lowest, then the next two among the
    /// rest, and so on (an odd one out is left).
    pub fn pairs_closest_first(&self, pus: &[u32]) -> Vec<(u32, u32)> {
        let mut left: Vec<u32> = pus.to_vec();
        let mut out = Vec::new();
        while left.len() >= 2 {
            let mut best = (0, 1, models::Level::Machine);
            'search: for i in 0..left.len() {
                for j in i + 1..left.len() {
                    let l = self.shared_level(left[i], left[j]);
                    if l < best.2 {
                        best = (i, j, l);
                        if l == models::Level::Core {
                            break 'search;
                        }
                    }
                }
            }
            let b = left.remove(best.1);
            let a = left.remove(best.0);
            out.push((a, b));
        }
        out
    }

    /// Distance from node `a` to node `b`. Without a matrix, Linux's defaults when firmware
    /// gives none: 10 local, 20 remote.
    pub fn distance(&self, a: u32, b: u32) -> f64 {
        match self.distances.get(&(a, b)) {
            Some(d) => f64::from(*d),
            None if a == b => 10.0,
            None => 20.0,
        }
    }

    /// Where the OS runs unpinned thread `i`: spread over packages, one per core; in its
    /// good state beside busy CPUs, over the other CPUs in their order.
    pub fn os_cpu(&self, i: usize) -> u32 {
        if self.os_off_busy && !self.os_free.is_empty() {
            return self.os_free[i % self.os_free.len()];
        }
        let packages = self.packages.max(1);
        let per_pkg = (self.pus.len() / packages).max(1);
        let pkg = i % packages;
        let slot = (i / packages) * 2 % per_pkg;
        self.pus[(pkg * per_pkg + slot) % self.pus.len()]
    }
}

/// Each PU's speed on a hybrid machine whose core kinds carry a figure (`base_freq=1400MHz`,
/// `max_freq=N`, `capacity=N`, as the topology names them): the kind's figure ÷ the highest
/// kind's. Kinds named without one (`IntelAtom`, `IntelCore`) say no ratio, and every PU
/// is then taken as fast as any (empty). On the 13th-generation Core i7 dump the E-cores
/// run at 1400 ÷ 1900 = 0.74 of a P-core: a frequency ratio, a floor on the real gap (their
/// narrower cores also do less per cycle).
fn kind_speeds(m: &Machine) -> HashMap<u32, f64> {
    let figure = |name: &str| -> Option<f64> {
        let (_, value) = name.split_once('=')?;
        let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<f64>().ok().filter(|x| *x > 0.0)
    };
    let figures: Vec<Option<f64>> = m.core_kinds.iter().map(|k| figure(&k.name)).collect();
    if m.core_kinds.len() < 2 || figures.iter().any(Option::is_none) {
        return HashMap::new();
    }
    let top = figures.iter().flatten().copied().fold(0.0, f64::max);
    let mut speed = HashMap::new();
    for (k, f) in m.core_kinds.iter().zip(figures.iter().flatten()) {
        for cpu in k.cpuset.iter() {
            speed.insert(cpu, f / top);
        }
    }
    speed
}

/// The ancestors of PU `id`, nearest first, each with the level it stands for (the machine
/// root left out: two PUs that share no other meet there).
fn levels_above(
    m: &Machine,
    id: autopin_topology::ObjId,
) -> Vec<(autopin_topology::ObjId, models::Level)> {
    use models::Level;
    let mut out = Vec::new();
    let mut cur = m.obj(id).parent;
    while let Some(p) = cur {
        let o = m.obj(p);
        let level = match o.ty {
            ObjType::Core => Some(Level::Core),
            ObjType::Cache => match o.cache.as_ref().map(|c| c.level) {
                Some(1) => Some(Level::Core),
                Some(2) => Some(Level::L2),
                Some(_) => Some(Level::L3),
                None => None,
            },
            ObjType::Die | ObjType::Group => Some(Level::Die),
            ObjType::Package => Some(Level::Package),
            ObjType::Machine | ObjType::Pu => None,
        };
        if let Some(l) = level {
            out.push((p, l));
        }
        cur = o.parent;
    }
    out
}

/// Where a simulated program first touches its pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstTouch {
    /// Every page on this node (OS index): one thread initialises all the data before the
    /// others start, as a serial initialisation loop does.
    Node(u32),
    /// Each thread's pages on the node of the CPU it runs on at the start (the OS's
    /// placement when it starts unpinned), as a parallel initialisation does.
    StartCpu,
}

/// The simulated program's memory: where its pages start and how much it suffers from
/// distance to them. A thread on node `n` whose pages lie on nodes `k` with shares `p_k`
/// runs at `(d(n,n) / Σ p_k·d(n,k))^boundness` of its rate: the SLIT distance ratio stands
/// for the latency ratio, and `boundness` says how much of the run time waits on memory
/// (0: compute-bound, unaffected; 1: slows in proportion to distance; more: bandwidth-bound
/// codes that lose more than latency alone says).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimMemory {
    pub first_touch: FirstTouch,
    pub boundness: f64,
    pub pages_per_thread: u64,
}

impl Default for SimMemory {
    /// Compute-bound, 1000 pages per thread, all touched on node 0.
    fn default() -> Self {
        SimMemory {
            first_touch: FirstTouch::Node(0),
            boundness: 0.0,
            pages_per_thread: 1000,
        }
    }
}

impl SimMemory {
    /// The rate factor of a thread on `cpu` with `pages` (node → count).
    fn factor(&self, topo: &SimTopo, cpu: u32, pages: &BTreeMap<u32, u64>) -> f64 {
        let Some(&node) = topo.node_of.get(&cpu) else {
            return 1.0;
        };
        let total: u64 = pages.values().sum();
        if self.boundness == 0.0 || total == 0 {
            return 1.0;
        }
        let mean: f64 = pages
            .iter()
            .map(|(k, n)| topo.distance(node, *k) * *n as f64)
            .sum::<f64>()
            / total as f64;
        (topo.distance(node, node) / mean).powf(self.boundness)
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
                    topo.os_cpu(i)
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

/// A barrier-synchronised OpenMP program beside CPUs busy with other work: every thread
/// waits for the slowest at each barrier, so the program goes at the pace of its thread
/// with the least CPU share (1 ÷ the threads on its CPU, the other work counted), and two of
/// its threads spinning on one CPU wait for each other there (`stacked`, e.g. 0.05). The
/// rates are the team's progress shared out over its threads: their sum does not grow with
/// the team's size, as the team-free objective (`openmp-team`) counts.
#[derive(Debug, Clone)]
pub struct BarrierModel {
    /// Progress of a team whose every thread has a CPU of its own, units/s.
    pub base: f64,
    /// CPUs other work keeps busy.
    pub busy: Vec<u32>,
    /// The pace left when two of its threads share a CPU.
    pub stacked: f64,
}

impl RateModel for BarrierModel {
    fn rates(&self, topo: &SimTopo, placement: &[Option<u32>]) -> Vec<f64> {
        let n = placement.len();
        if n == 0 {
            return Vec::new();
        }
        let placed: Vec<u32> = placement
            .iter()
            .enumerate()
            .map(|(i, p)| p.unwrap_or_else(|| topo.os_cpu(i)))
            .collect();
        let mut per_pu: HashMap<u32, usize> = HashMap::new();
        for c in &placed {
            *per_pu.entry(*c).or_default() += 1;
        }
        let share =
            |c: &u32| topo.speed(*c) / (per_pu[c] + usize::from(self.busy.contains(c))) as f64;
        let mut pace = placed.iter().map(share).fold(1.0, f64::min);
        if per_pu.values().any(|k| *k > 1) {
            pace *= self.stacked;
        }
        vec![self.base * pace / n as f64; n]
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
                if !out.iter().any(|c: &Pinning| c.cpus() == cpus) {
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
    memory: SimMemory,
    /// Thread index → its pages by node OS index.
    pages: Vec<BTreeMap<u32, u64>>,
    /// The program binds its first thread itself at this time, to this mask.
    binds_itself: Option<(f64, CpuSet)>,
    /// From this time on the kernel refuses masks of these CPUs only (a cpuset that shrank).
    refusing: Option<(f64, CpuSet)>,
    /// Threads not created yet (a serial start-up) and when they are: tid → (index, cpu).
    unborn: BTreeMap<u32, (usize, Option<u32>)>,
    workers_at: f64,
    /// The dynamic loader maps the program's libraries until this time (None: not known).
    loaded_at: Option<f64>,
    /// An OpenMP program whose team size the preload library controls (None: not one).
    team: Option<autopin_objective::progress::TeamState>,
    /// The program runs one long parallel region: no region begins after the first.
    one_region: bool,
    /// The program's parallel regions last this long each (None: short, 100 a second,
    /// and a want is in force at once): a want waits for the next region's start.
    region_every: Option<f64>,
    /// A team size the library applies at the next region's start.
    pending_team: Option<u32>,
    /// The OS placement swings (`Sim::with_os_swing`): the mean seconds it stays on the
    /// busy CPUs, and off them.
    os_swing: Option<(f64, f64)>,
}

impl SimState {
    /// Places every thread's pages as the program's first touch does.
    fn first_touch(&mut self) {
        let mem = self.memory;
        let placed: Vec<(usize, Option<u32>)> = self.placement.values().copied().collect();
        self.pages = vec![BTreeMap::new(); placed.len()];
        for (i, cpu) in placed {
            let node = match mem.first_touch {
                FirstTouch::Node(n) => Some(n),
                FirstTouch::StartCpu => {
                    let cpu = cpu.unwrap_or_else(|| self.topo.os_cpu(i));
                    self.topo.node_of.get(&cpu).copied()
                }
            };
            if let (Some(n), Some(p)) = (node, self.pages.get_mut(i)) {
                p.insert(n, mem.pages_per_thread);
            }
        }
    }

    /// Each thread's rate under `model` for `placement` (by thread index), slowed by the
    /// distance to its pages.
    fn rates(&self, model: &dyn RateModel, placement: &[Option<u32>]) -> Vec<f64> {
        let mut r = model.rates(&self.topo, placement);
        if self.memory.boundness != 0.0 {
            let none = BTreeMap::new();
            for (i, (rate, cpu)) in r.iter_mut().zip(placement).enumerate() {
                let cpu = cpu.unwrap_or_else(|| self.topo.os_cpu(i));
                let pages = self.pages.get(i).unwrap_or(&none);
                *rate *= self.memory.factor(&self.topo, cpu, pages);
            }
        }
        r
    }

    /// Counts the work done from the last reading up to now, at the rates of the
    /// placement, team and pages in force over that interval.
    fn advance(&mut self) {
        // A team size waiting for a region's start comes into force there; the work
        // before it ran the team before.
        if let (Some(every), Some(want)) = (self.region_every, self.pending_team) {
            let boundary = ((self.last_read / every).floor() + 1.0) * every;
            if boundary <= self.now {
                let end = self.now;
                self.now = boundary;
                self.advance_span();
                self.now = end;
                if let Some(t) = self.team.as_mut() {
                    t.applied = want;
                }
                self.pending_team = None;
            }
        }
        self.advance_span();
    }

    /// `advance` over a span in which the placement, team and pages do not change.
    fn advance_span(&mut self) {
        let dt = self.now - self.last_read;
        if dt > 0.0 {
            // The OS placement may change state for this span: a stay of mean `on` (or
            // `off`) seconds ends in it with the chance an exponential gives.
            if let Some((on, off)) = self.os_swing {
                let mean = if self.topo.os_off_busy { off } else { on };
                if self.rng.uniform() < 1.0 - (-dt / mean).exp() {
                    self.topo.os_off_busy = !self.topo.os_off_busy;
                }
            }
            let order: Vec<u32> = self.placement.keys().copied().collect();
            // A smaller team in force: the threads past it wait idle in the pool.
            let working = self.working();
            let placement: Vec<Option<u32>> =
                self.placement.values().take(working).map(|v| v.1).collect();
            // The interval split where the program changes phase, each part at its rates.
            let mut per_thread = vec![0.0; order.len()];
            for (seg, phase) in self.segments(self.last_read, self.now) {
                let model = match phase {
                    Some(i) => self.phases[i].model.as_ref(),
                    None => self.model.as_ref(),
                };
                for (acc, r) in per_thread.iter_mut().zip(self.rates(model, &placement)) {
                    *acc += r * seg;
                }
            }
            // One noise factor per interval for the whole program (a noisy neighbour or
            // frequency change hits every thread), as harsh as noise gets.
            let factor = (1.0 + self.noise * self.rng.normal()).max(0.0);
            for (tid, amount) in order.iter().zip(per_thread) {
                let cold_left = self
                    .moved_at
                    .get(tid)
                    .map_or(0.0, |m| (m + self.cold - self.last_read).clamp(0.0, dt));
                let eff = (dt - 0.5 * cold_left) / dt;
                *self.counted.entry(*tid).or_default() += amount * eff * factor;
            }
        }
        self.last_read = self.now;
    }

    /// A program of short regions begins 100 a second; one that runs a single long region
    /// begins one.
    fn regions_begin(&mut self) {
        let (once, now, every) = (self.one_region, self.now, self.region_every);
        if let Some(t) = self.team.as_mut() {
            t.starts = match every {
                _ if once => 1,
                Some(e) => 1 + (now / e) as u32,
                None => 1 + (now * 100.0) as u32,
            };
        }
    }

    /// The threads that work: the team in force, else all (the first in creation order).
    fn working(&self) -> usize {
        let all = self.placement.len();
        match self.team {
            Some(t) if t.applied > 0 => (t.applied as usize).min(all),
            // Started with fewer (OMP_NUM_THREADS): its own count is its team.
            Some(t) if t.own > 0 => (t.own as usize).min(all),
            _ => all,
        }
    }

    /// The program is started with `n` threads (OMP_NUM_THREADS), as the platform starts
    /// a remembered smaller team: its library sees `n` as its own count.
    fn start_team(&mut self, n: u32) {
        if let Some(t) = self.team.as_mut() {
            t.own = n;
        }
    }

    /// A want of the engine for the program's teams, applied as the preload library does:
    /// only where its rule allows.
    fn want_team(&mut self, want: u32) {
        self.advance();
        let (once, long_regions) = (self.one_region, self.region_every.is_some());
        if let Some(t) = self.team.as_mut() {
            t.want = want;
            // One long region: the team it began with stays until it ends.
            if once {
                return;
            }
            if t.flags.mid_run_allowed() {
                let n = want.min(t.own);
                // Long regions: the next one to begin takes it.
                if long_regions {
                    self.pending_team = (n != t.applied).then_some(n);
                } else {
                    t.applied = n;
                }
            } else if want != t.applied {
                t.flags.0 |= autopin_objective::progress::TeamFlags::REFUSED;
            }
        }
    }

    /// Moves every page that is on none of `to` there, round-robin over `to`, the way
    /// the Linux platform does; pages already on one of them stay.
    fn migrate_pages(&mut self, to: &[u32]) -> crate::report::MigrationOutcome {
        let mut out = crate::report::MigrationOutcome {
            to_nodes: to.to_vec(),
            mappings: self.pages.len(),
            ..Default::default()
        };
        if to.is_empty() {
            return out;
        }
        let mut next = 0usize;
        for pages in &mut self.pages {
            let mut after = BTreeMap::new();
            for (node, n) in std::mem::take(pages) {
                out.resident += n;
                if to.contains(&node) {
                    out.already_there += n;
                    *after.entry(node).or_default() += n;
                    continue;
                }
                for _ in 0..n {
                    let dest = to[next % to.len()];
                    next += 1;
                    *after.entry(dest).or_default() += 1;
                    *out.moved.entry(dest).or_default() += 1;
                }
            }
            *pages = after;
        }
        out
    }

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
        let sim = Sim {
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
                memory: SimMemory::default(),
                pages: Vec::new(),
                binds_itself: None,
                refusing: None,
                unborn: BTreeMap::new(),
                workers_at: 0.0,
                loaded_at: None,
                team: None,
                one_region: false,
                region_every: None,
                pending_team: None,
                os_swing: None,
            })),
            threads,
            ends_at,
            exit_code: 0,
        };
        sim.lock().first_touch();
        sim
    }

    /// The program's memory: where it first touches its pages and how much distance to
    /// them costs (the default: compute-bound, every page on node 0).
    pub fn with_memory(self, memory: SimMemory) -> Self {
        {
            let mut s = self.lock();
            s.memory = memory;
            s.first_touch();
        }
        self
    }

    /// Each thread's pages now, by node OS index (thread index order).
    pub fn pages(&self) -> Vec<BTreeMap<u32, u64>> {
        self.lock().pages.clone()
    }

    /// Moves the program's pages to the nodes `to`, as `move_pages` would, after counting
    /// the work done at the old placement of the pages.
    pub fn migrate_pages(&self, to: &[u32]) -> crate::report::MigrationOutcome {
        let mut s = self.lock();
        s.advance();
        s.migrate_pages(to)
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

    /// The program runs its first thread alone until `at` (a serial start-up), then
    /// creates the others, placed as they would have been from the start.
    pub fn with_workers_from(self, at: f64) -> Self {
        {
            let mut s = self.lock();
            let later: Vec<u32> = s
                .placement
                .iter()
                .filter(|(_, (i, _))| *i > 0)
                .map(|(t, _)| *t)
                .collect();
            for t in later {
                if let Some(p) = s.placement.remove(&t) {
                    s.unborn.insert(t, p);
                }
            }
            s.workers_at = at;
        }
        self
    }

    /// An OpenMP program whose preload library reports `flags` (`TeamFlags`): its teams
    /// shrink to what the engine wants from then on where the library's rule allows.
    pub fn with_team(self, flags: u32) -> Self {
        {
            let mut s = self.lock();
            s.team = Some(autopin_objective::progress::TeamState {
                own: self.threads as u32,
                flags: autopin_objective::progress::TeamFlags(flags),
                ..Default::default()
            });
        }
        self
    }

    /// The program names its own team size `n` (omp_set_num_threads, num_threads clauses):
    /// the preload library reports it beside the SET flag.
    pub fn with_named_team(self, n: u32) -> Self {
        {
            let mut s = self.lock();
            let mut t = s.team.unwrap_or_default();
            t.flags.0 |= autopin_objective::progress::TeamFlags::SET;
            t.named = n;
            t.own = n;
            s.team = Some(t);
        }
        self
    }

    /// The program runs one long parallel region (a time-step loop inside it): no want
    /// reaches its team.
    pub fn with_one_region(self) -> Self {
        self.lock().one_region = true;
        self
    }

    /// The program's parallel regions last `seconds` each, back to back: a team size the
    /// engine wants reaches the program at the next region's start (syncbench's barrier
    /// regions), and the readings in between show the team before.
    pub fn with_regions_of(self, seconds: f64) -> Self {
        self.lock().region_every = Some(seconds);
        self
    }

    /// The program's team state now (None: not an OpenMP program with a team control).
    pub fn team(&self) -> Option<autopin_objective::progress::TeamState> {
        self.lock().team
    }

    /// The dynamic loader maps the program's libraries until `at` (a cold start reading
    /// them from disk); the thread source says so (`ThreadSource::libraries_loaded`).
    pub fn loading_until(self, at: f64) -> Self {
        self.lock().loaded_at = Some(at);
        self
    }

    /// Whether the program's libraries are mapped yet (None: not known).
    pub fn libraries_loaded(&self) -> Option<bool> {
        let s = self.lock();
        s.loaded_at.map(|at| s.now >= at)
    }

    /// The OS placement swings beside CPUs other work keeps busy, as the kernel's does: it
    /// stays on them (its own spread, `SimTopo::os_cpu`) for `on` seconds on average, then
    /// off them, spread over the others like a pinning, for `off` (GROMACS's OS placement
    /// beside a busy CPU read 13 000 OpenMP constructs/s at one tick and 190 at the next,
    /// and stayed in a state for a probe or more).
    pub fn with_os_swing(self, busy: &[u32], on: f64, off: f64) -> Self {
        {
            let mut s = self.lock();
            // Found once here: the OS placement is asked for every thread at every reading.
            s.topo.os_free = s
                .topo
                .pus
                .iter()
                .copied()
                .filter(|p| !busy.contains(p))
                .collect();
            s.os_swing = Some((on.max(1e-3), off.max(1e-3)));
        }
        self
    }

    /// How long a moved thread's caches stay cold (half speed meanwhile; default 0.1 s).
    pub fn with_cold(self, seconds: f64) -> Self {
        self.lock().cold = seconds;
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
            // The threads start where the mask puts them, and touch their pages there.
            s.first_touch();
        }
        self
    }

    /// At `at` seconds the program sets its first thread's CPU mask itself (as
    /// `pthread_setaffinity_np` would), whatever autopin set before.
    pub fn binding_itself_at(self, at: f64, mask: &CpuSet) -> Self {
        self.lock().binds_itself = Some((at, mask.clone()));
        self
    }

    /// From `at` seconds on, a mask of none but `cpus` is refused (EINVAL), as when a cpuset
    /// no longer holds them.
    pub fn refusing_from(self, at: f64, cpus: &CpuSet) -> Self {
        self.lock().refusing = Some((at, cpus.clone()));
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
        s.rates(s.model.as_ref(), &placement).iter().sum()
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
        if !s.unborn.is_empty() && s.now >= s.workers_at {
            // Counted from the next reading on, as a thread born in an interval is.
            s.advance();
            let born = std::mem::take(&mut s.unborn);
            s.placement.extend(born);
        }
        if let Some((at, mask)) = s.binds_itself.clone() {
            if s.now >= at {
                s.binds_itself = None;
                let first = s
                    .placement
                    .iter()
                    .min_by_key(|(_, (i, _))| *i)
                    .map(|(t, _)| *t);
                if let Some(tid) = first {
                    let cpu = mask.first().filter(|_| mask.len() == 1);
                    if let Some(e) = s.placement.get_mut(&tid) {
                        e.1 = cpu;
                    }
                    s.masks.insert(tid, mask);
                }
            }
        }
    }
}

impl Sim {
    /// Threads born pinned (the preload library at a launch): thread i on
    /// `cpus[i % cpus.len()]` from the start, with no move to warm up from.
    pub fn born_on(&self, cpus: &[u32]) {
        if cpus.is_empty() {
            return;
        }
        let mut s = self.lock();
        let all = s.allowed_all;
        let tids: Vec<(u32, usize)> = s
            .placement
            .iter()
            .chain(s.unborn.iter())
            .map(|(t, (i, _))| (*t, *i))
            .collect();
        for (tid, i) in tids {
            let cpu = cpus[i % cpus.len()];
            let st = &mut *s;
            if let Some(e) = st.placement.get_mut(&tid).or(st.unborn.get_mut(&tid)) {
                e.1 = (all > 1).then_some(cpu);
            }
            s.masks.insert(tid, CpuSet::from_cpus([cpu]));
        }
    }
}

impl ThreadSource for Sim {
    fn poll(&mut self) -> Result<ThreadSnapshot, OsError> {
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
            existed: None,
        })
    }

    fn libraries_loaded(&self) -> Option<bool> {
        Sim::libraries_loaded(self)
    }
}

impl Pinner for Sim {
    fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> Result<(), PinError> {
        let mut s = self.lock();
        let now = s.now;
        let all = s.allowed_all;
        if let Some((at, refused)) = &s.refusing {
            if now >= *at && cpus.is_subset(refused) {
                return Err(PinError::Refused {
                    tid,
                    cpus: cpus.clone(),
                    source: std::io::Error::from_raw_os_error(22),
                });
            }
        }
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
    fn read(&mut self, threads: &[u32]) -> Result<Reading, OsError> {
        let mut s = self.lock();
        s.advance();
        s.regions_begin();
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
    pub counting: Result<(), OsError>,
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
    /// An OpenMP runtime one of the program's libraries brings: in its memory map once the
    /// loader has mapped them (`Sim::loading_until`).
    pub brought_runtime: Option<String>,
    /// It completes OpenMP constructs from this time on (None: never).
    pub openmp_from: Option<f64>,
    /// The preload library sits in the launched program.
    pub preload_active: bool,
    /// CPUs other work keeps busy before the start.
    pub busy: Vec<u32>,
    /// Unix time at simulated time 0 (None: the platform has no wall clock).
    pub epoch: Option<f64>,
    /// Err(reason): moving pages is refused (e.g. another user's process).
    pub migration: Result<(), OsError>,
    /// Page migrations asked for: (simulated time, pid, CPUs, file-backed pages too).
    pub migrated: Vec<(f64, i32, Vec<u32>, bool)>,
    /// The program's environment (a launch removes what `LaunchOptions::unset` names).
    pub env: Vec<(String, String)>,
    /// Bus ids of the GPUs the program has open.
    pub opened_gpus: Vec<String>,
    /// The executable has thread-local data of its own (`Started::thread_local_data`).
    pub thread_local_data: bool,
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
            brought_runtime: None,
            openmp_from: Some(0.0),
            preload_active: true,
            busy: Vec::new(),
            epoch: None,
            migration: Ok(()),
            migrated: Vec::new(),
            env: Vec::new(),
            opened_gpus: Vec::new(),
            thread_local_data: false,
        }
    }
}

/// The simulated machine's busy CPUs: other work that stays put for the whole run.
struct FixedDevices(Vec<String>);

impl crate::run::DeviceWatch for FixedDevices {
    fn opened_gpus(&mut self, _pid: i32) -> Vec<String> {
        self.0.clone()
    }
}

struct FixedBusy(Vec<u32>);

impl crate::run::BusyWatch for FixedBusy {
    fn busy_cpus(&mut self, _pid: i32) -> Vec<u32> {
        self.0.clone()
    }
}

impl crate::run::Platform for SimPlatform {
    fn check_counting(
        &mut self,
        _events: &[autopin_objective::EventSpec],
    ) -> crate::run::CountingCheck {
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
        if let (false, true, Some(cpus)) = (attached, self.preload_active, &launch.pin_at_birth) {
            self.sim.born_on(cpus);
        }
        // A team asked at birth, as the platform asks it: of an OpenMP program the preload
        // library sits in, without thread-local data of its own.
        let team_wanted_at_birth = launch.want_at_birth.filter(|_| {
            !attached
                && self.preload_active
                && self.openmp_runtime.is_some()
                && !self.thread_local_data
        });
        if let Some(k) = team_wanted_at_birth {
            self.sim.lock().want_team(crate::driver::want_word(Some(k)));
        }
        let mut env: Vec<(String, String)> = self
            .env
            .iter()
            .filter(|(k, _)| attached || !launch.unset.contains(k))
            .cloned()
            .collect();
        // A team size to start with, as the platform sets it: OMP_NUM_THREADS, never above
        // a count the user set.
        if let Some(n) = launch.team_at_birth.filter(|_| !attached) {
            let n = crate::run::team_start_count(&self.env, n);
            env.push(("OMP_NUM_THREADS".into(), n.to_string()));
            if self.openmp_runtime.is_some() {
                self.sim
                    .lock()
                    .start_team(u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        Ok(crate::run::Started {
            pid: 1000,
            threads: Box::new(self.sim.clone()),
            env,
            mask: if attached {
                self.attach_mask.clone()
            } else {
                None
            },
            warnings: Vec::new(),
            openmp_runtime: self.openmp_runtime.clone(),
            preload_active: self.preload_active && !attached,
            thread_local_data: self.thread_local_data,
            team_wanted_at_birth,
        })
    }

    fn openmp_runtime_loaded(&mut self, _pid: i32) -> Option<String> {
        self.brought_runtime
            .clone()
            .filter(|_| self.sim.libraries_loaded() != Some(false))
    }

    fn openmp_constructs(&mut self) -> u64 {
        let runtime = self.openmp_runtime.is_some() || self.brought_runtime.is_some();
        match self.openmp_from {
            Some(t) if runtime && self.sim.now() >= t => 1 + ((self.sim.now() - t) * 1000.0) as u64,
            _ => 0,
        }
    }

    fn launch_env(&self) -> Vec<(String, String)> {
        self.env.clone()
    }

    fn busy_at_launch(&mut self, allowed: &CpuSet) -> Vec<u32> {
        self.busy
            .iter()
            .copied()
            .filter(|c| allowed.contains(*c))
            .collect()
    }

    fn busy_watch(&mut self, allowed: &CpuSet) -> Option<Box<dyn crate::run::BusyWatch>> {
        Some(Box::new(FixedBusy(self.busy_at_launch(allowed))))
    }

    fn device_watch(&mut self) -> Option<Box<dyn crate::run::DeviceWatch>> {
        Some(Box::new(FixedDevices(self.opened_gpus.clone())))
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
        _objective: &autopin_objective::Objective,
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
        _events: &[autopin_objective::EventSpec],
    ) -> Option<autopin_objective::CountingCost> {
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
    ) -> Result<crate::report::MigrationOutcome, OsError> {
        self.migration.clone()?;
        self.migrated
            .push((self.sim.now(), pid, cpus.to_vec(), files));
        // The simulated pages move, so the threads' rates change from here on.
        let to: Vec<u32> = crate::run::page_migration::nodes_of(m, cpus)
            .into_iter()
            .collect();
        if to.is_empty() {
            return Err(OsError::NotSupported(format!(
                "CPUs {cpus:?} are on no NUMA node"
            )));
        }
        Ok(crate::report::MigrationOutcome {
            numa_balancing: Some(false),
            ..self.sim.migrate_pages(&to)
        })
    }
}

/// The simulation's meter, saying how it counts like a perf meter does.
struct SimMeter {
    sim: Sim,
    counting: Option<(String, String)>,
}

impl Meter for SimMeter {
    fn read(&mut self, threads: &[u32]) -> Result<Reading, OsError> {
        self.sim.read(threads)
    }
    fn want_team(&mut self, threads: u32) {
        self.sim.lock().want_team(threads);
    }
    fn team(&self) -> Option<autopin_objective::progress::TeamState> {
        self.sim.team()
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

impl SimSink {
    /// Whether a progress line said `text`.
    pub fn said(&self, text: &str) -> bool {
        self.messages.iter().any(|m| m.contains(text))
    }
}

impl crate::run::RunSink for SimSink {
    fn message(&mut self, _at: Option<f64>, text: &str) {
        self.messages.push(text.to_string());
    }
    fn checkpoint(&mut self, report: &crate::report::Report) {
        self.checkpoints.push(report.clone());
    }
}

pub mod models;
pub mod simulate;

#[cfg(test)]
pub(crate) mod tests;
