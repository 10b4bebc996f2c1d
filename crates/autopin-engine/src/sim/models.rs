//! Program models for `autopin simulate` whose best placement is known on any topology: the
//! model computes its optimum from the machine's shape, with no probe, so a search's answer
//! can be scored as its rate ÷ that optimum. docs/simulate.md gives the figures each is
//! calibrated on.
//!
//! - `bandwidth`: every NUMA node serves a fixed bandwidth, `per_node` threads' worth; a
//!   node's threads share it beyond that, and SMT siblings share a core. Best: the threads
//!   spread evenly over the nodes, one per core.
//! - `pairs`: threads 2k and 2k+1 exchange data; a pair runs slower the farther apart its two
//!   CPUs are (same L2 < same L3/die < same package < another package), and SMT siblings
//!   share a core. Best: each pair on two cores of the smallest cache domain that holds two.
//! - `smt`: compute-bound threads; two on one core's hardware threads each run at a fraction.
//!   Best: one per core while the cores last.
//! - `barrier`: every thread waits for the slowest at each barrier, beside other work on
//!   some CPUs (one in four, the first of every four in the machine's order). Best: every
//!   thread on a free CPU of its own, when there are enough.
//! - `phases`: `bandwidth` and `pairs` in turn, 4 s each.

use super::{BarrierModel, RateModel, SimTopo};
use std::collections::{BTreeMap, HashMap};

/// Where two CPUs meet, nearest first: the level of their first common ancestor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Core,
    L2,
    L3,
    Die,
    Package,
    Machine,
}

/// A program model: its rates, and the best total rate any placement of `n` threads reaches.
pub trait ProgramModel: RateModel {
    /// The best total rate of `n` threads on `topo` (the model's own computation).
    fn optimum(&self, topo: &SimTopo, n: usize) -> f64;
    /// CPUs other work keeps busy (what the simulated busy watch reports).
    fn busy(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// The models `autopin simulate --model` knows, for its help and errors.
pub const MODELS: [&str; 5] = ["bandwidth", "pairs", "smt", "barrier", "phases"];

/// The model called `name` for `topo`, or why not.
pub(crate) fn model_named(name: &str, topo: &SimTopo) -> Result<Box<dyn ProgramModel>, String> {
    Ok(match name {
        "bandwidth" => Box::new(Bandwidth::default()),
        "pairs" => Box::new(Pairs::default()),
        "smt" => Box::new(Smt::default()),
        "barrier" => Box::new(Barrier::beside(topo)),
        "phases" => Box::new(Phases::default()),
        other => {
            return Err(format!(
                "no program model called {other:?}; valid: {}",
                MODELS.join(", ")
            ))
        }
    })
}

/// The share of a CPU each thread of `placed` gets: threads on one PU time-share it, and
/// distinct PUs of one core share the core (`smt_gain` for two busy hardware threads).
fn cpu_shares(topo: &SimTopo, placed: &[u32], smt_gain: f64) -> Vec<f64> {
    let mut per_pu: HashMap<u32, usize> = HashMap::new();
    let mut pus_per_core: HashMap<usize, std::collections::BTreeSet<u32>> = HashMap::new();
    for c in placed {
        *per_pu.entry(*c).or_default() += 1;
        pus_per_core.entry(topo.core_of[c]).or_default().insert(*c);
    }
    placed
        .iter()
        .map(|c| {
            let distinct = pus_per_core[&topo.core_of[c]].len() as f64;
            let core = if distinct > 1.0 {
                smt_gain / distinct
            } else {
                1.0
            };
            topo.speed(*c) * core / per_pu[c] as f64
        })
        .collect()
}

/// Each thread's CPU: its pinning, or where the OS runs it unpinned.
fn placed(topo: &SimTopo, placement: &[Option<u32>]) -> Vec<u32> {
    placement
        .iter()
        .enumerate()
        .map(|(i, p)| p.unwrap_or_else(|| topo.os_cpu(i)))
        .collect()
}

/// The PUs in order: the first hardware thread of every core (cores in the machine's
/// order, the fastest kind's first on a hybrid machine), then the second of every core, and
/// so on.
fn cores_first(topo: &SimTopo) -> Vec<u32> {
    let mut by_core: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for &p in &topo.pus {
        by_core.entry(topo.core_of[&p]).or_default().push(p);
    }
    // The fastest cores first on a hybrid machine (stable: the machine's order otherwise).
    let mut cores: Vec<&Vec<u32>> = by_core.values().collect();
    cores.sort_by(|a, b| topo.speed(b[0]).total_cmp(&topo.speed(a[0])));
    let mut out = Vec::new();
    let mut k = 0;
    loop {
        let round: Vec<u32> = cores.iter().filter_map(|v| v.get(k).copied()).collect();
        if round.is_empty() {
            return out;
        }
        out.extend(round);
        k += 1;
    }
}

/// The NUMA node of a PU, or its package on a machine without nodes.
fn node(topo: &SimTopo, pu: u32) -> usize {
    match topo.node_of.get(&pu) {
        Some(n) => *n as usize,
        None => topo.package_of[&pu],
    }
}

/// Memory-bandwidth-bound threads.
#[derive(Debug, Clone)]
pub struct Bandwidth {
    /// Rate of one thread with a core and bandwidth to spare, units/s.
    pub base: f64,
    /// Threads' worth of bandwidth one NUMA node serves.
    pub per_node: f64,
    pub smt_gain: f64,
}

impl Default for Bandwidth {
    fn default() -> Self {
        Bandwidth {
            base: 1e9,
            per_node: 4.0,
            smt_gain: 1.2,
        }
    }
}

impl RateModel for Bandwidth {
    fn rates(&self, topo: &SimTopo, placement: &[Option<u32>]) -> Vec<f64> {
        let placed = placed(topo, placement);
        let cpu = cpu_shares(topo, &placed, self.smt_gain);
        let mut demand: HashMap<usize, f64> = HashMap::new();
        for (c, s) in placed.iter().zip(&cpu) {
            *demand.entry(node(topo, *c)).or_default() += s;
        }
        placed
            .iter()
            .zip(&cpu)
            .map(|(c, s)| {
                let d = demand[&node(topo, *c)];
                self.base
                    * s
                    * if d > self.per_node {
                        self.per_node / d
                    } else {
                        1.0
                    }
            })
            .collect()
    }
}

impl ProgramModel for Bandwidth {
    /// The threads dealt over the nodes round-robin, each node's cores first: no node holds
    /// more than its even share, and within a node no core a second thread while another is
    /// free. Every node then gives min(its threads' CPU, `per_node`), the most it can.
    fn optimum(&self, topo: &SimTopo, n: usize) -> f64 {
        let order = cores_first(topo);
        let mut by_node: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for p in order {
            by_node.entry(node(topo, p)).or_default().push(p);
        }
        let mut lists: Vec<std::collections::VecDeque<u32>> =
            by_node.into_values().map(Into::into).collect();
        let mut cpus = Vec::with_capacity(n);
        while cpus.len() < n && lists.iter().any(|l| !l.is_empty()) {
            for l in lists.iter_mut() {
                if cpus.len() < n {
                    if let Some(p) = l.pop_front() {
                        cpus.push(p);
                    }
                }
            }
        }
        let placement: Vec<Option<u32>> = cpus.into_iter().map(Some).collect();
        self.rates(topo, &placement).iter().sum()
    }
}

/// Communicating pairs of threads.
#[derive(Debug, Clone)]
pub struct Pairs {
    pub base: f64,
    /// The slowdown of a pair whose CPUs meet at each level (`Level` order: same core, L2,
    /// L3, die, package, machine), and across NUMA nodes inside a package.
    pub cost: [f64; 6],
    pub smt_gain: f64,
}

impl Default for Pairs {
    fn default() -> Self {
        Pairs {
            base: 1e9,
            cost: [0.0, 0.03, 0.08, 0.15, 0.22, 0.35],
            smt_gain: 1.2,
        }
    }
}

impl Pairs {
    fn comm(&self, topo: &SimTopo, a: u32, b: u32) -> f64 {
        1.0 - self.cost[topo.shared_level(a, b) as usize]
    }
}

impl RateModel for Pairs {
    fn rates(&self, topo: &SimTopo, placement: &[Option<u32>]) -> Vec<f64> {
        let placed = placed(topo, placement);
        let cpu = cpu_shares(topo, &placed, self.smt_gain);
        (0..placed.len())
            .map(|i| {
                let comm = match placed.get(i ^ 1) {
                    Some(p) => self.comm(topo, placed[i], *p),
                    None => 1.0,
                };
                self.base * cpu[i] * comm
            })
            .collect()
    }
}

impl Pairs {
    /// `n` threads (at most one per core of `cores`) paired on `cores`: closest first, then
    /// by what each pair runs (on a hybrid machine a close pair of slow cores may be worth
    /// less than a farther pair of fast ones; closest first among equals, kept by the stable
    /// sort), the best pairs taken, an odd thread on the first core left.
    fn paired_on(&self, topo: &SimTopo, cores: &[u32], n: usize) -> Vec<u32> {
        let mut pairs = topo.pairs_closest_first(cores);
        let worth = |&(a, b): &(u32, u32)| self.comm(topo, a, b) * (topo.speed(a) + topo.speed(b));
        pairs.sort_by(|x, y| worth(y).total_cmp(&worth(x)));
        let mut cpus: Vec<u32> = pairs
            .iter()
            .take(n / 2)
            .flat_map(|(a, b)| [*a, *b])
            .collect();
        if n % 2 == 1 {
            let used: std::collections::BTreeSet<u32> = cpus.iter().copied().collect();
            if let Some(p) = cores.iter().find(|p| !used.contains(p)) {
                cpus.push(*p);
            }
        }
        cpus
    }
}

impl ProgramModel for Pairs {
    /// With no more threads than cores: one thread per core, the cores paired closest
    /// first (two cores of one L2 before two of one L3, and so on: on a tree of nested
    /// domains this pairs as many as can be at every level, and a pair's cost only grows
    /// with its level), the best pairs taken. On a hybrid machine also the fastest `n`
    /// cores so paired, and the better of the two (a pair of fast cores far apart may beat
    /// a close pair of slow ones, or not). A pair of one core's hardware threads costs its
    /// CPU share (`smt_gain` ÷ 2), more than any level's cost here. Beyond the cores, the
    /// cores-first order so paired (the model's best guess, not proven).
    fn optimum(&self, topo: &SimTopo, n: usize) -> f64 {
        let order = cores_first(topo);
        let ncores = topo
            .pus
            .iter()
            .map(|p| topo.core_of[p])
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let total = |cpus: Vec<u32>| -> f64 {
            let placement: Vec<Option<u32>> = cpus.into_iter().map(Some).collect();
            self.rates(topo, &placement).iter().sum()
        };
        if n <= ncores {
            let all = total(self.paired_on(topo, &order[..ncores], n));
            let fastest = total(self.paired_on(topo, &order[..n], n));
            all.max(fastest)
        } else {
            let mut all = topo.pairs_closest_first(&order[..ncores]);
            all.extend(topo.pairs_closest_first(&order[ncores..]));
            total(all.into_iter().flat_map(|(a, b)| [a, b]).take(n).collect())
        }
    }
}

/// Compute-bound threads that compete on a core's hardware threads.
#[derive(Debug, Clone)]
pub struct Smt {
    pub base: f64,
    pub smt_gain: f64,
}

impl Default for Smt {
    fn default() -> Self {
        Smt {
            base: 1e9,
            smt_gain: 1.15,
        }
    }
}

impl RateModel for Smt {
    fn rates(&self, topo: &SimTopo, placement: &[Option<u32>]) -> Vec<f64> {
        let placed = placed(topo, placement);
        cpu_shares(topo, &placed, self.smt_gain)
            .into_iter()
            .map(|s| self.base * s)
            .collect()
    }
}

impl ProgramModel for Smt {
    /// One thread per core while the cores last, then the second hardware threads: each
    /// core gives 1 with one thread and `smt_gain` with two.
    fn optimum(&self, topo: &SimTopo, n: usize) -> f64 {
        let placement: Vec<Option<u32>> = cores_first(topo).into_iter().take(n).map(Some).collect();
        self.rates(topo, &placement).iter().sum()
    }
}

/// A barrier-synchronised program beside other work on one CPU in four.
#[derive(Debug, Clone)]
pub struct Barrier(BarrierModel);

impl Barrier {
    /// Other work on the first CPU of every four in the machine's order.
    pub fn beside(topo: &SimTopo) -> Self {
        Barrier(BarrierModel {
            base: 1e9,
            busy: topo.pus.iter().step_by(4).copied().collect(),
            stacked: 0.05,
        })
    }
}

impl RateModel for Barrier {
    fn rates(&self, topo: &SimTopo, placement: &[Option<u32>]) -> Vec<f64> {
        self.0.rates(topo, placement)
    }
}

impl ProgramModel for Barrier {
    /// Every thread on a free CPU of its own (the fastest kind's first on a hybrid machine):
    /// the pace of a CPU each. With fewer free CPUs than threads, one thread per CPU, the
    /// rest beside the other work: half the pace.
    fn optimum(&self, topo: &SimTopo, n: usize) -> f64 {
        if n > topo.pus.len() {
            let slowest = topo.pus.iter().map(|p| topo.speed(*p)).fold(1.0, f64::min);
            return self.0.base * 0.5 * slowest * self.0.stacked;
        }
        // The pace is the slowest thread's: the n CPUs where a thread runs fastest (free
        // ones at their speed, busy ones at half of it).
        let mut pus = topo.pus.clone();
        let pace = |p: &u32| topo.speed(*p) * if self.0.busy.contains(p) { 0.5 } else { 1.0 };
        pus.sort_by(|a, b| pace(b).total_cmp(&pace(a)));
        let placement: Vec<Option<u32>> = pus.into_iter().take(n).map(Some).collect();
        self.rates(topo, &placement).iter().sum()
    }
    fn busy(&self) -> Vec<u32> {
        self.0.busy.clone()
    }
}

/// `bandwidth` and `pairs` in turn.
#[derive(Debug, Clone, Default)]
pub struct Phases {
    pub bandwidth: Bandwidth,
    pub pairs: Pairs,
}

impl RateModel for Phases {
    /// As a whole run: the mean of the two phases (each phase's own are in `phase_models`).
    fn rates(&self, topo: &SimTopo, placement: &[Option<u32>]) -> Vec<f64> {
        let a = self.bandwidth.rates(topo, placement);
        let b = self.pairs.rates(topo, placement);
        a.iter().zip(&b).map(|(x, y)| 0.5 * (x + y)).collect()
    }
}

impl ProgramModel for Phases {
    /// The mean of the two phases' optima: each phase decided on its own.
    fn optimum(&self, topo: &SimTopo, n: usize) -> f64 {
        0.5 * (self.bandwidth.optimum(topo, n) + self.pairs.optimum(topo, n))
    }
}

/// The phase length of the `phases` model, seconds.
pub const PHASE_SECONDS: f64 = 4.0;

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_topology::source::synthetic;

    fn topo(spec: &str) -> SimTopo {
        SimTopo::from_machine(&synthetic::parse(spec).unwrap())
    }

    fn total(m: &dyn ProgramModel, t: &SimTopo, cpus: &[u32]) -> f64 {
        let p: Vec<Option<u32>> = cpus.iter().map(|c| Some(*c)).collect();
        m.rates(t, &p).iter().sum()
    }

    #[test]
    fn each_optimum_is_reached_by_its_placement_and_beaten_by_none_tried() {
        let t = topo("numa:2 package:1 l3:2 core:4 pu:2");
        let n = 8;
        for name in MODELS {
            let m = model_named(name, &t).unwrap();
            let opt = m.optimum(&t, n);
            assert!(opt > 0.0, "{name}");
            // Compact, scatter and a few shuffles never beat the optimum.
            let mut tries: Vec<Vec<u32>> = vec![
                t.pus.iter().take(n).copied().collect(),
                cores_first(&t).into_iter().take(n).collect(),
                t.pus.iter().step_by(2).take(n).copied().collect(),
            ];
            let mut rng = crate::rng::Rng::new(5);
            for _ in 0..200 {
                let mut p = t.pus.clone();
                for i in (1..p.len()).rev() {
                    let j = (rng.uniform() * (i + 1) as f64) as usize;
                    p.swap(i, j.min(i));
                }
                tries.push(p.into_iter().take(n).collect());
            }
            let best = tries
                .iter()
                .map(|c| total(m.as_ref(), &t, c))
                .fold(0.0, f64::max);
            assert!(best <= opt * (1.0 + 1e-9), "{name}: {best} > {opt}");
            assert!(
                best >= 0.7 * opt,
                "{name}: the tries are far from it: {best} vs {opt}"
            );
        }
    }

    #[test]
    fn a_model_that_does_not_exist_is_named_with_the_valid_ones() {
        let t = topo("core:2 pu:1");
        let e = model_named("fast", &t).err().unwrap();
        assert!(
            e.contains("\"fast\"") && e.contains("bandwidth, pairs"),
            "{e}"
        );
    }

    /// A hybrid machine of two L2s, each with a fast core and a slow one (half its speed).
    /// Every model's optimum is reached by some placement and beaten by none: for pairs,
    /// the two fast cores, which meet only at the package (0.78 each), beat a fast and a
    /// slow core of one L2 (0.97 × 1.5 for the pair), the pair closest-first pairing finds.
    #[test]
    fn on_a_hybrid_machine_the_optima_take_the_fast_cores() {
        let mut t = topo("package:1 l2:2 core:2 pu:1");
        for cpu in [1, 3] {
            t.speed.insert(cpu, 0.5);
        }
        let pairs = Pairs::default();
        let fast = total(&pairs, &t, &[0, 2]);
        assert!(fast > total(&pairs, &t, &[0, 1]));
        assert!((pairs.optimum(&t, 2) - fast).abs() < 1e-6 * fast);
        let smt = Smt::default();
        assert!((smt.optimum(&t, 2) - 2e9).abs() < 1.0);
        for name in MODELS {
            let m = model_named(name, &t).unwrap();
            for n in 1..=4 {
                let opt = m.optimum(&t, n);
                let mut best: f64 = 0.0;
                // Every ordered choice of n CPUs of the four.
                for code in 0..4usize.pow(n as u32) {
                    let cpus: Vec<u32> = (0..n)
                        .map(|i| (code / 4usize.pow(i as u32) % 4) as u32)
                        .collect();
                    let mut seen = cpus.clone();
                    seen.sort_unstable();
                    seen.dedup();
                    if seen.len() == n {
                        best = best.max(total(m.as_ref(), &t, &cpus));
                    }
                }
                assert!(best <= opt * (1.0 + 1e-9), "{name} n={n}: {best} > {opt}");
                assert!(
                    best >= opt * (1.0 - 1e-9),
                    "{name} n={n}: optimum {opt} not reached, best {best}"
                );
            }
        }
    }
}
