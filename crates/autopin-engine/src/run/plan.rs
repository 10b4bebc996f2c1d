//! The run plan: one plain value that says everything a run, an attach or a compare run of
//! the optimizer needs — the target, the objective with its fallback chain, where the
//! candidates come from, the search parameters and what to do afterwards. The command line
//! builds it from its arguments; [`RunPlan::validate`] checks it in one place; [`super::run`]
//! carries it out.

use crate::error::EngineError;
use crate::phase::WatchParams;
use crate::pin_plan::SkipMask;
use crate::report::LaunchRecord;
use crate::run::RunSink;
use crate::strategy::{Autopin1Params, RaceParams, Strategy};
use autopin_objective::Objective;
use autopin_placement::{MemPolicy, Pinning};
use autopin_topology::Machine;
use std::sync::Arc;

/// What to optimize.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetSpec {
    /// Start this program (`argv[0]` looked up in PATH) and optimize it until it ends.
    Launch(Vec<String>),
    /// Optimize a running process; detach after `duration` seconds (None: until it ends).
    Attach { pid: i32, duration: Option<f64> },
}

impl TargetSpec {
    pub fn is_attach(&self) -> bool {
        matches!(self, TargetSpec::Attach { .. })
    }
}

/// One link of the objective's fallback chain. The run takes the first link that can be
/// measured for this target and records why (its `info.reason`, [`crate::report::ObjectiveInfo::reason`]). A new way
/// of measuring progress is one more variant here plus its arm in `choose_objective`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectiveSource {
    /// The objective as asked for (default: user-space instructions retired/s), counted with
    /// perf_event (or the heartbeat / energy source that objective names).
    Requested,
    /// The program's own heartbeat (work units/s through `include/autopin.h`), when it
    /// beats during the first moments of a launched run.
    Heartbeat,
    /// Completed OpenMP work per second (parallel regions, loop chunks, barriers, tasks),
    /// counted by the preload library at the runtime's entry points: for launched OpenMP
    /// programs the preload library reaches.
    OpenMpProgress,
    /// Each thread's CPU time per second from /proc/TID/schedstat: always available, sees
    /// CPU share but not what the CPU time achieves.
    TaskClock,
}

impl ObjectiveSource {
    /// The chain for the default objective: hardware event → heartbeat → OpenMP progress →
    /// task-clock.
    pub fn default_chain() -> Vec<ObjectiveSource> {
        vec![
            ObjectiveSource::Requested,
            ObjectiveSource::Heartbeat,
            ObjectiveSource::OpenMpProgress,
            ObjectiveSource::TaskClock,
        ]
    }

    /// The name the report and the decision store give this source.
    pub fn name(self) -> &'static str {
        match self {
            ObjectiveSource::Requested => "requested",
            ObjectiveSource::Heartbeat => "heartbeat",
            ObjectiveSource::OpenMpProgress => "openmp",
            ObjectiveSource::TaskClock => "task-clock",
        }
    }

    /// The source [`ObjectiveSource::name`] names.
    pub fn from_name(name: &str) -> Option<ObjectiveSource> {
        [
            ObjectiveSource::Requested,
            ObjectiveSource::Heartbeat,
            ObjectiveSource::OpenMpProgress,
            ObjectiveSource::TaskClock,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// The objective: what was asked for, whether the user named it (then it is not replaced),
/// and the chain of sources to try.
#[derive(Debug, Clone)]
pub struct ObjectivePlan {
    pub requested: Objective,
    /// Named by the user (`-e`/`--objective`): failing to count it is an error, not a fallback.
    pub explicit: bool,
    pub chain: Vec<ObjectiveSource>,
}

impl ObjectivePlan {
    /// The default objective with the default fallback chain.
    pub fn default_with(requested: Objective) -> Self {
        ObjectivePlan {
            requested,
            explicit: false,
            chain: ObjectiveSource::default_chain(),
        }
    }

    /// An objective the user named: only it.
    pub fn explicit(requested: Objective) -> Self {
        ObjectivePlan {
            requested,
            explicit: true,
            chain: vec![ObjectiveSource::Requested],
        }
    }
}

/// Where the candidate pinnings come from.
#[derive(Debug, Clone, PartialEq)]
pub enum CandidateSource {
    /// Given by the user (`--schedule`, `SCHEDULE`, `--candidates`), in this order.
    Explicit(Vec<Pinning>),
    /// Given by the user with likwid-pin expressions among them: read on the plan's machine
    /// when the run starts ([`RunPlan::with_listed_resolved`]), which for a rank of a launch
    /// is its share of the node, and then [`CandidateSource::Explicit`].
    Listed(ListedCandidates),
    /// Planned from the machine's topology for the threads seen after init (or `threads`).
    Topology {
        max: usize,
        include_unpinned: bool,
        threads: Option<usize>,
    },
}

/// Candidates the user listed: CPU lists (`--schedule`, `SCHEDULE`), then pin expressions
/// (`--candidates`), then the OS placement when asked for (`--unpinned`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListedCandidates {
    pub lists: Vec<Pinning>,
    pub expressions: Vec<String>,
    pub unpinned: bool,
}

impl ListedCandidates {
    /// Neither a CPU list nor an expression (`--unpinned` alone lists nothing to probe).
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty() && self.expressions.is_empty()
    }

    /// The pinnings on `machine`, in the order given; an expression that names a pinning
    /// already listed (`S0:0-1` and `E:N:2:1:1`) is probed once, and the user told so.
    pub fn resolve(
        &self,
        machine: &Machine,
        sink: &mut dyn RunSink,
    ) -> Result<Vec<Pinning>, EngineError> {
        let mut out = self.lists.clone();
        for e in &self.expressions {
            let cpus = autopin_placement::pin_expression(machine, e)
                .map_err(|err| EngineError::usage(format!("--candidates {e:?}: {err}")))?;
            if let Some(same) = out.iter().find(|c| c.cpus() == cpus) {
                sink.message(
                    None,
                    &format!(
                        "--candidates {e:?} is the same pinning as {} (CPUs {}): probed once",
                        same.label,
                        autopin_placement::cpu_text(&cpus)
                    ),
                );
                continue;
            }
            let mut c = Pinning::from_cpus(cpus);
            c.label = format!("{e} = {}", c.label);
            out.push(c);
        }
        if self.unpinned {
            out.push(Pinning::unpinned());
        }
        Ok(out)
    }
}

/// How to search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StrategyChoice {
    /// Interleaved short probes with confidence-interval elimination; re-searches get half
    /// the budget (at least 2 s).
    Race(RaceParams),
    /// The original autopin: i, then w + t per candidate in order.
    Autopin1(Autopin1Params),
    /// Pin the first candidate and keep it.
    Fixed,
}

impl StrategyChoice {
    /// Whether the first candidate is pinned at birth (paper semantics): autopin1 and fixed
    /// do; the race lets the OS place threads until its first probe, unless there is only
    /// one candidate (nothing to race).
    pub fn pins_at_birth(&self, candidates: usize) -> bool {
        !matches!(self, StrategyChoice::Race(_)) || candidates == 1
    }
}

/// `autopin run`'s default `SearchParams::born_wait`, seconds. The race's search beside a
/// busy CPU costs a program 0.1–0.2 s of its work (OS placement probes, a shared CPU's
/// warm-up), and what it can still gain over the pinning the program was born on is a
/// fraction of what is left of the run: a program that has run 1.5 s may, as likely as
/// not, run about as long again, and a 10% better pinning over that pays for the search.
/// (syncbench, 1.2 s with 2 threads beside busy CPU 0: searched from 0.2 s it ran 1.09×
/// the best fixed pinning, waiting 1.5 s it ran 1.01–1.02× on a quiet machine.)
pub const BORN_WAIT: f64 = 1.5;

/// The search and its timing.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchParams {
    pub strategy: StrategyChoice,
    /// Seconds before the first probe (paper's `i`).
    pub init: f64,
    /// The user asked for `init` (`--init`): it is waited in full. Otherwise a program whose
    /// progress autopin reads itself (heartbeats, OpenMP constructs) is probed as soon as
    /// its start-up has shown a tick of that progress.
    pub init_asked: bool,
    /// Sampling interval, seconds.
    pub tick: f64,
    /// A program started pinned off CPUs busy with other work, with nothing remembered, is
    /// searched once it has run this long, seconds (0: after the init, as any other). It
    /// already runs on the candidate the search would probe first, and the search costs a
    /// program about the same whatever its length: one that ends within this time has no
    /// time left to win it back.
    pub born_wait: f64,
    /// Period of the rate output after the decision, seconds.
    pub report_every: f64,
    /// Re-search on sustained rate drops; None disables it.
    pub watch: Option<WatchParams>,
}

/// Everything one optimization run needs.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// The machine the candidates are planned on (the live one: run/attach pin real threads).
    pub machine: Machine,
    pub target: TargetSpec,
    /// likwid-pin skip mask: created threads that are not pinned.
    pub skip: SkipMask,
    pub objective: ObjectivePlan,
    pub candidates: CandidateSource,
    pub search: SearchParams,
    /// After each decision, move the target's pages to the chosen CPUs' NUMA nodes.
    pub migrate_memory: bool,
    /// With `migrate_memory`: also move the pages of private file-backed mappings (mapped
    /// files, the program's data segments); shared mappings never move.
    pub migrate_files: bool,
    /// Memory policy for a launched program, set before its first instruction (numactl's
    /// `--membind`, `--interleave`, `--preferred`, `--localalloc`).
    pub mem_policy: Option<MemPolicy>,
    /// Measure what counting one context switch costs here (~0.2 s) to estimate how much
    /// counting slowed the target.
    pub estimate_perturbation: bool,
    /// Where this run stands in a Slurm/MPI launch (None: not recorded).
    pub launch: Option<LaunchPlan>,
    /// A program whose environment binds its OpenMP threads: false (the default) leaves
    /// that binding in force and autopin stands back; true unsets it for a launched program
    /// (an attached one keeps its variables) and autopin's pinnings decide.
    pub override_binding: bool,
    /// A launched program whose CPUs are partly busy with other work at launch starts
    /// pinned to the first topology candidate that keeps off them (true, the default), or
    /// where the OS places it (false). A remembered decision or named candidates pin it at
    /// birth either way.
    pub start_off_busy: bool,
    /// A decision remembered from an earlier run of this program here: applied at birth
    /// and checked, instead of a search from scratch.
    pub remembered: Option<Remembered>,
    /// What the run may do with the program's thread count (`--threads`).
    pub threads: ThreadsChoice,
}

/// What a run may do with the program's thread count (`run --threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadsChoice {
    /// An OpenMP program's parallel regions may get fewer threads where fewer run faster:
    /// mid-run where no conforming program can tell (docs/threads.md), else in the next runs
    /// from memory.
    #[default]
    Auto,
    /// Never change the count.
    Keep,
    /// Start the program with this many threads (OMP_NUM_THREADS, never above a count it
    /// was given) and plan the candidates for them.
    Count(usize),
}

/// A remembered decision to check: its pinning is in force from the program's first
/// instruction, and the check races it against the OS placement and the runner-up of the
/// run that decided it. Should one of them win, that is the new decision.
///
/// A settled decision (a search decided it, or a check confirmed it) is the incumbent: the
/// check keeps it unless another candidate is shown better. An unsettled one (the best so
/// far of a program that ended mid-search) is only where the threads start: the check
/// judges it like any candidate, so a wrong guess is not confirmed run after run.
#[derive(Debug, Clone, PartialEq)]
pub struct Remembered {
    pub pinning: Pinning,
    pub runner_up: Option<Pinning>,
    pub settled: bool,
    /// This run tries the record's team trial: `pinning` is fewer threads, from the start
    /// (or, with no team in `pinning`, the program's own count again: a recheck of a kept
    /// smaller count).
    pub trying_team: bool,
    /// The decided pinning's rate then, with its unit: a settled pinning that runs at that
    /// rate again (within `RaceParams::confirm_band`) is confirmed by its first probe, with
    /// no probe of another candidate.
    pub rate: Option<(f64, String)>,
    /// Per phase of a program that names its phases: the pinning decided for it. When the
    /// program enters such a phase, its pinning is applied without a search, and the phase
    /// watch holds it to the remembered rate (a drop below it searches the phase again).
    pub phases: Vec<RememberedPhase>,
    /// The link of the objective chain the decision was measured with (None: a record from
    /// before sources were remembered). The objective's choice goes straight to it: the
    /// waits for the links before it (a heartbeat that never came) are not waited again.
    pub objective: Option<ObjectiveSource>,
    /// The CPUs other work kept busy when it was decided (None: not recorded). Other CPUs
    /// busy now mean the check is a search of its own: the remembered pinning was chosen
    /// around neighbours that have moved, so matching its old rate proves nothing.
    pub busy: Option<Vec<u32>>,
}

impl ThreadsChoice {
    /// The count asked for, if one was.
    pub fn count(&self) -> Option<usize> {
        match self {
            ThreadsChoice::Count(n) => Some(*n),
            _ => None,
        }
    }
}

/// One phase's remembered decision.
#[derive(Debug, Clone, PartialEq)]
pub struct RememberedPhase {
    pub phase: String,
    pub pinning: Pinning,
    /// The rate it was decided at, in the objective's unit.
    pub rate: Option<f64>,
}

impl Remembered {
    /// How long a program whose threads start on the remembered CPUs runs before the check
    /// (its threads must exist; nothing else needs to settle).
    pub const INIT: f64 = 0.1;
    /// The check's budget: a remembered pinning not shown worse within it stays.
    pub const CHECK_BUDGET: f64 = 1.0;
    /// The budget of the search a hit becomes when other CPUs are busy than when it was
    /// decided: about two rounds of the remembered candidates and the topology's around the
    /// busy CPUs. Short, like the check: a program run again is often short, a search it
    /// never finishes updates no record (and the next run would search again), and the
    /// remembered pinning, the incumbent, stays unless another is shown better.
    pub const MOVED_BUDGET: f64 = 2.0;
    /// Probes of the OS placement before the check may judge it by more than the
    /// half-the-leader rule.
    pub const CHECK_OS_PROBES: usize = 1;
    /// Sampling ticks of the OS placement before the check may judge it so: one probe's.
    pub const CHECK_OS_TICKS: usize = 2;

    /// What the check probes: the remembered pinning first, then the OS placement and the
    /// runner-up (each once); then the phases' pinnings not among them, so that each phase
    /// finds its own among the candidates.
    pub fn candidates(&self) -> Vec<Pinning> {
        let mut out = vec![self.pinning.clone()];
        let phases = self.phases.iter().map(|p| Some(p.pinning.clone()));
        for c in [Some(Pinning::unpinned()), self.runner_up.clone()]
            .into_iter()
            .chain(phases)
            .flatten()
        {
            if !out
                .iter()
                .any(|o| o.cpus() == c.cpus() && o.is_unpinned() == c.is_unpinned())
            {
                out.push(c);
            }
        }
        out
    }
}

/// A run inside a cluster launch: the record the report carries (the engine adds the Unix
/// time of the report's time 0, so the ranks' timelines can be lined up), lines for the
/// report, and — when several local ranks search together — how their searches are tied.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    pub record: LaunchRecord,
    /// Lines for the report's notes (launcher, the node's split), added before the run.
    pub notes: Vec<String>,
    pub coordination: Option<Arc<dyn Coordination>>,
}

/// Several processes searching as one (the local ranks of a Slurm step or MPI launch): every
/// search's strategy is wrapped so that the ranks probe the same candidate at the same time
/// and decide alike. Implemented outside the engine (`autopin-cluster`), which depends on it.
pub trait Coordination: std::fmt::Debug {
    /// The strategy of the session's search number `search` (0: the first), tied to the
    /// other ranks' searches of that number.
    fn wrap(&self, strategy: Box<dyn Strategy>, search: usize) -> Box<dyn Strategy>;
    /// Lines for the report gathered while searching (ranks dropped, disagreements).
    fn take_notes(&self) -> Vec<String>;
}

/// `x` seconds given for the option `name`: a usage error unless a finite number ≥ 0.
fn non_negative_seconds(name: &str, x: f64) -> Result<(), EngineError> {
    if x.is_finite() && x >= 0.0 {
        Ok(())
    } else {
        Err(EngineError::usage(format!(
            "{name} must be a number of seconds ≥ 0, got {x}"
        )))
    }
}

impl RunPlan {
    /// The plan with its listed candidates read on its machine (the plan itself when it has
    /// none to read); a usage error names the expression that cannot be read there.
    pub fn with_listed_resolved(
        &self,
        sink: &mut dyn RunSink,
    ) -> Result<Option<RunPlan>, EngineError> {
        let CandidateSource::Listed(listed) = &self.candidates else {
            return Ok(None);
        };
        let mut plan = self.clone();
        plan.candidates = CandidateSource::Explicit(listed.resolve(&self.machine, sink)?);
        Ok(Some(plan))
    }

    /// Checks the plan before anything starts; every failure is a usage error naming the
    /// value that is wrong and what is valid. The checks run in this order, so the first
    /// wrong value is the one reported.
    pub fn validate(&self) -> Result<(), EngineError> {
        self.check_search_times()?;
        self.check_tick_and_watch()?;
        self.check_target()?;
        self.check_migration()?;
        self.check_mem_policy_nodes()?;
        self.check_candidates()
    }

    /// The search's durations: `-i`, `-t` and the strategy's own (warm-up, budget, sample).
    fn check_search_times(&self) -> Result<(), EngineError> {
        non_negative_seconds("-i", self.search.init)?;
        non_negative_seconds("-t", self.search.report_every)?;
        match &self.search.strategy {
            StrategyChoice::Race(p) => {
                non_negative_seconds("-w", p.warmup)?;
                if p.budget.is_nan() || p.budget <= 0.0 {
                    return Err(EngineError::usage(format!(
                        "--budget must be > 0 seconds, got {}",
                        p.budget
                    )));
                }
            }
            StrategyChoice::Autopin1(p) => {
                non_negative_seconds("-w", p.warmup)?;
                non_negative_seconds("-t", p.sample)?;
            }
            StrategyChoice::Fixed => {}
        }
        Ok(())
    }

    /// The tick is a positive number of seconds; the phase watch's threshold is in [0, 1).
    fn check_tick_and_watch(&self) -> Result<(), EngineError> {
        if !(self.search.tick > 0.0 && self.search.tick.is_finite()) {
            return Err(EngineError::usage(format!(
                "--tick must be > 0 seconds, got {}",
                self.search.tick
            )));
        }
        if let Some(w) = &self.search.watch {
            if !(0.0..1.0).contains(&w.threshold) {
                return Err(EngineError::usage(format!(
                    "--watch-threshold must be in [0, 1), got {}",
                    w.threshold
                )));
            }
        }
        Ok(())
    }

    /// A launch names a program; an attach names a plausible PID and asks nothing only a
    /// launch can give (a memory policy, the heartbeat channel).
    fn check_target(&self) -> Result<(), EngineError> {
        match &self.target {
            TargetSpec::Launch(argv) if argv.is_empty() => {
                Err(EngineError::usage("no program given"))
            }
            TargetSpec::Launch(_) => Ok(()),
            TargetSpec::Attach { pid, duration } => self.check_attach(*pid, *duration),
        }
    }

    fn check_attach(&self, pid: i32, duration: Option<f64>) -> Result<(), EngineError> {
        if pid <= 0 {
            return Err(EngineError::usage(format!(
                "attach: no process with PID {pid}"
            )));
        }
        if let Some(d) = duration {
            non_negative_seconds("--duration", d)?;
        }
        if let Some(p) = &self.mem_policy {
            return Err(EngineError::usage(format!(
                "{p}: a memory policy is set in a program autopin starts (pin, run); a running process keeps its own (use --migrate-memory to move its pages)"
            )));
        }
        if self.objective.requested.needs_heartbeat() {
            return Err(EngineError::usage(
                "--objective heartbeat needs a program started by `autopin run` (it finds the channel through AUTOPIN_HEARTBEAT)",
            ));
        }
        Ok(())
    }

    /// `--migrate-files` only refines `--migrate-memory`.
    fn check_migration(&self) -> Result<(), EngineError> {
        if self.migrate_files && !self.migrate_memory {
            return Err(EngineError::usage(
                "--migrate-files says which pages --migrate-memory moves; add --migrate-memory",
            ));
        }
        Ok(())
    }

    /// The memory policy names only NUMA nodes this machine has.
    fn check_mem_policy_nodes(&self) -> Result<(), EngineError> {
        let Some(p) = &self.mem_policy else {
            return Ok(());
        };
        let has_node = |n: &u32| self.machine.numa_nodes.iter().any(|x| x.os_index == *n);
        match p.nodes.iter().find(|n| !has_node(n)) {
            Some(n) => Err(EngineError::usage(format!(
                "{p}: there is no NUMA node {n} on this machine ({} node(s))",
                self.machine.numa_nodes.len()
            ))),
            None => Ok(()),
        }
    }

    /// Explicit candidates: at least one, each on CPUs this process may use; so is every
    /// pinning of a remembered decision (the caller drops one that is not, with a word).
    fn check_candidates(&self) -> Result<(), EngineError> {
        let allowed = self.machine.allowed_cpuset();
        if let Some(r) = &self.remembered {
            let all = std::iter::once(&r.pinning)
                .chain(r.runner_up.as_ref())
                .chain(r.phases.iter().map(|p| &p.pinning));
            for c in all {
                if let Some(cpu) = c.cpus().iter().find(|cpu| !allowed.contains(**cpu)) {
                    return Err(EngineError::usage(format!(
                        "the remembered pinning {} uses CPU {cpu}, which is not allowed here (allowed: {allowed})",
                        c.label
                    )));
                }
            }
        }
        let list = match &self.candidates {
            CandidateSource::Explicit(list) => list,
            // Checked once read on the machine (`with_listed_resolved`).
            CandidateSource::Listed(_) | CandidateSource::Topology { .. } => return Ok(()),
        };
        if list.is_empty() {
            return Err(EngineError::usage("no candidate pinnings given"));
        }
        for c in list {
            if let Some(cpu) = c.cpus().iter().find(|cpu| !allowed.contains(**cpu)) {
                return Err(EngineError::usage(format!(
                    "candidate {} uses CPU {cpu}, which is not allowed here (allowed: {allowed})",
                    c.label
                )));
            }
        }
        Ok(())
    }
}
