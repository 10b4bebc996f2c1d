//! The options shared by `autopin run` and `autopin attach`, and the engine `RunPlan` they
//! describe. Validation of the plan is the engine's (`RunPlan::validate`); parsing of CPU
//! lists and expressions is the placement crate's.

use crate::error::CliError;
use crate::machine_args::MachineArgs;
use crate::number_args::{count_at_least, fraction, positive_seconds, seconds};
use autopin_cluster::node::NodeOptions;
use autopin_engine::phase::WatchParams;
use autopin_engine::pin_plan::SkipMask;
use autopin_engine::run::{
    CandidateSource, ListedCandidates, ObjectivePlan, RunPlan, SearchParams, StrategyChoice,
    TargetSpec, ThreadsChoice, BORN_WAIT,
};
use autopin_engine::strategy::{Autopin1Params, RaceParams};
use autopin_memory::MemoryRequest;
use autopin_objective::{Objective, Sysfs};
use autopin_placement::{schedule, Pinning};
use autopin_topology::Machine;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyName {
    /// Interleaved short probes with confidence-interval elimination (default)
    Race,
    /// The original autopin: i, then w + t per candidate in order
    Autopin1,
    /// Pin the first candidate and keep it
    Fixed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StartName {
    /// Off CPUs busy with other work at launch, else where the OS places it
    Auto,
    /// Where the OS places it
    Os,
}

/// Options shared by `run` and `attach`.
#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// How to search (default: race). A strategy named here wins over a remembered
    /// decision (see --recall)
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyName>,
    /// Pinning CPU lists in thread order, separated by ';' (repeatable): "0,1;0,0" or
    /// "2-3,6-7". Without it the SCHEDULE variable (paper form: "2367,0145", one digit per
    /// thread) is used; without both, candidates come from the topology.
    #[arg(long, value_name = "LISTS", value_parser = schedule_lists)]
    pub schedule: Vec<ScheduleLists>,
    /// Candidates as likwid-style pin expressions separated by ';': "S0:0-1;E:N:2:1:2"
    #[arg(long, value_name = "EXPRS")]
    pub candidates: Option<String>,
    /// Also probe "unpinned (OS decides)" with explicit candidate lists (it is included
    /// automatically with topology candidates)
    #[arg(long)]
    pub unpinned: bool,
    /// Leave "unpinned (OS decides)" out of topology candidates
    #[arg(long)]
    pub no_unpinned: bool,
    /// A program whose environment binds its OpenMP threads (OMP_PROC_BIND, OMP_PLACES,
    /// GOMP_CPU_AFFINITY, KMP_AFFINITY): take over anyway. Without it autopin stands back and
    /// leaves that binding in force; with it the variables are unset for a launched program
    /// and autopin's pinnings decide
    #[arg(long)]
    pub override_binding: bool,
    /// Where a launched program starts, before the search: auto (the default) pins it off
    /// CPUs that other work keeps busy at launch, to the first candidate that avoids them,
    /// and otherwise leaves it where the OS places it; os always leaves it where the OS
    /// places it. A remembered decision or named candidates pin it at birth either way
    #[arg(long, value_enum, value_name = "auto|os", default_value = "auto")]
    pub start: StartName,
    /// The decision store: a remembered decision for this program, machine, CPUs, thread
    /// count and objective is applied at birth and checked instead of searched (default:
    /// $AUTOPIN_MEMORY, else $XDG_STATE_HOME/autopin/decisions.db; AUTOPIN_MEMORY=off turns
    /// it off). See `autopin memory`
    #[arg(long = "memory", value_name = "PATH")]
    pub memory_store: Option<PathBuf>,
    /// Neither use nor keep remembered decisions in this run
    #[arg(long, conflicts_with = "memory_store")]
    pub no_memory: bool,
    /// Apply a remembered decision even when the search is named on the command line
    /// (--strategy, --paper, --schedule, --candidates, SCHEDULE, -n/--threads, --objective,
    /// -e): without it what you name wins, and memory serves the default search only
    #[arg(long, conflicts_with = "no_memory")]
    pub recall: bool,
    /// What a remembered decision is kept for: the program (default), or the program with
    /// these exact arguments
    #[arg(long, value_name = "program|args", default_value = "program", value_parser = ["program", "args"])]
    pub memory_key: String,
    /// At most this many topology candidates
    #[arg(allow_negative_numbers = true, long, value_name = "N", default_value_t = 12, value_parser = count_at_least::<1>)]
    pub max_candidates: usize,
    /// The program's thread count: auto (the default) lets the search give an OpenMP
    /// program's parallel regions fewer threads where fewer run faster (beside CPUs busy
    /// with other work, one per core on SMT CPUs), mid-run where no conforming program can
    /// tell and otherwise in the next runs, from memory; keep never changes it; N runs the
    /// program with N threads (OMP_NUM_THREADS) and plans the candidates for N (without
    /// it, for the threads seen after the init). A count set in OMP_NUM_THREADS is an upper
    /// bound. See docs/threads.md
    #[arg(allow_negative_numbers = true, short = 'n', long, value_name = "auto|keep|N", value_parser = crate::number_args::threads_arg)]
    pub threads: Option<crate::number_args::ThreadsArg>,
    /// Event whose rate is the objective (default instructions:u)
    #[arg(short = 'e', long, value_name = "EVENT")]
    pub event: Option<String>,
    /// Objective: heartbeat, openmp (OpenMP constructs the preload library counts),
    /// task-clock, energy, power, an event rate, or a ratio/expression of events
    #[arg(long, value_name = "OBJ")]
    pub objective: Option<String>,
    /// Init time before the first probe, seconds (autopin1 default: w; race: 0.5, and 1.5 s
    /// from the start for a program started pinned off CPUs busy with other work)
    #[arg(allow_negative_numbers = true, short = 'i', long, value_name = "SEC", value_parser = seconds)]
    pub init: Option<f64>,
    /// Warm-up after each re-pin, seconds (autopin1 default: t/2; race: 0.02, then 0.01 once a move is seen not to stall the program; the counters are read when it ends)
    #[arg(allow_negative_numbers = true, short = 'w', long, value_name = "SEC", value_parser = seconds)]
    pub warmup: Option<f64>,
    /// Sample time per probe (autopin1, default 30) and period of the rate output after the
    /// decision, seconds
    #[arg(allow_negative_numbers = true, short = 't', long, value_name = "SEC", value_parser = positive_seconds)]
    pub sample: Option<f64>,
    /// The paper's parameters: t=30, w=15, i=15 (implies --strategy autopin1)
    #[arg(long)]
    pub paper: bool,
    /// Search time budget for race, seconds
    #[arg(allow_negative_numbers = true, long, value_name = "SEC", default_value_t = 20.0, value_parser = positive_seconds)]
    pub budget: f64,
    /// Race: base probe length, seconds (close calls with noisy probes get longer ones;
    /// candidates far behind the leader never do)
    #[arg(allow_negative_numbers = true, long, value_name = "SEC", default_value_t = RaceParams::default().probe, value_parser = positive_seconds)]
    pub probe: f64,
    /// Sampling interval, seconds
    #[arg(allow_negative_numbers = true, long, value_name = "SEC", default_value_t = 0.1, value_parser = positive_seconds)]
    pub tick: f64,
    /// Disable the phase watch (no re-search after the decision)
    #[arg(long)]
    pub no_watch: bool,
    /// Phase watch: relative drop of the rate that counts (0.2 = 20%)
    #[arg(allow_negative_numbers = true, long, value_name = "FRACTION", default_value_t = 0.2, value_parser = fraction)]
    pub watch_threshold: f64,
    /// Phase watch: how long the drop must last, seconds
    #[arg(allow_negative_numbers = true, long, value_name = "SEC", default_value_t = 3.0, value_parser = seconds)]
    pub watch_duration: f64,
    /// On NUMA machines, migrate the target's pages to the chosen threads' nodes
    #[arg(long)]
    pub migrate_memory: bool,
    /// With --migrate-memory, also move private file-backed pages (mapped files, data
    /// segments); shared mappings never move
    #[arg(long)]
    pub migrate_files: bool,
    /// Memory policy for a program autopin starts (numactl's options)
    #[command(flatten)]
    pub mem_policy: crate::mem_policy_args::MemPolicyArgs,
    /// likwid-pin skip mask (hex): bit i set = the i-th created thread is not pinned
    #[arg(short = 's', long, value_name = "MASK")]
    pub skip: Option<String>,
    /// No progress output on stderr
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Write a JSON report here (atomically)
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write the timeline as CSV here
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Skip measuring the cost of per-thread counting (saves ~0.2 s at start)
    #[arg(long)]
    pub no_perturbation_estimate: bool,
    /// Slurm/MPI launches: how the local ranks share the node and search together.
    #[command(flatten)]
    pub cluster: crate::cluster::ClusterArgs,
    /// Where the machine description comes from (listed last in --help).
    #[command(flatten)]
    pub machine: MachineArgs,
}

impl EngineArgs {
    /// What the options say, read and checked before anything starts: the plan on the
    /// whole machine (a rank of a launch narrows it to its share, `NodeShare::share_plan`),
    /// the output files, what they ask of the decision store, the progress output.
    pub fn request(&self, target: TargetSpec) -> Result<RunRequest, CliError> {
        let node = self.cluster.options()?;
        let memory = memory_request(self);
        // The store opens beside the machine's read.
        let store_opening = autopin_memory::RunMemory::open_early(&memory);
        let plan = self.plan(self.machine.load_kept()?, target)?;
        Ok(RunRequest {
            plan,
            node,
            files: [self.report.clone(), self.timeline.clone()],
            memory,
            store_opening,
            quiet: self.quiet,
            verbose: self.cluster.verbose,
        })
    }

    /// What names the search on the command line (or in SCHEDULE), which then wins over a
    /// remembered decision unless `--recall` asks for it; None for the default search.
    pub fn named_search(&self) -> Option<String> {
        let mut named: Vec<String> = Vec::new();
        if let Some(s) = self.strategy {
            named.push(format!(
                "--strategy {}",
                clap::ValueEnum::to_possible_value(&s)
                    .map(|v| v.get_name().to_string())
                    .unwrap_or_default()
            ));
        }
        if self.paper {
            named.push("--paper".into());
        }
        if !self.schedule.is_empty() {
            named.push("--schedule".into());
        } else if self.candidates.is_none()
            && std::env::var("SCHEDULE").is_ok_and(|s| !s.trim().is_empty())
        {
            named.push("SCHEDULE".into());
        }
        if self.candidates.is_some() {
            named.push("--candidates".into());
        }
        if let Some(n) = self.threads.and_then(|t| t.count()) {
            named.push(format!("--threads {n}"));
        }
        if let Some(o) = &self.objective {
            named.push(format!("--objective {o}"));
        }
        if let Some(e) = &self.event {
            named.push(format!("-e {e}"));
        }
        (!named.is_empty()).then(|| named.join(", "))
    }

    /// The run plan these options describe, on `machine`, without a launch's part.
    fn plan(&self, machine: Machine, target: TargetSpec) -> Result<RunPlan, CliError> {
        let a = self;
        let objective = objective(a)?;
        let skip = match &a.skip {
            Some(s) => SkipMask::parse(s).map_err(|e| CliError::usage(format!("-s: {e}")))?,
            None => SkipMask::none(),
        };
        let candidates = match explicit_candidates(a)? {
            Some(listed) => CandidateSource::Listed(listed),
            None => CandidateSource::Topology {
                max: a.max_candidates,
                include_unpinned: !a.no_unpinned,
                threads: a.threads.and_then(|t| t.count()),
            },
        };
        let (strategy, init) = strategy(a);
        let mem_policy = a.mem_policy.resolve(&machine)?;
        Ok(RunPlan {
            machine,
            target,
            skip,
            objective,
            candidates,
            search: SearchParams {
                strategy,
                init,
                init_asked: a.init.is_some(),
                tick: a.tick,
                born_wait: born_wait(&strategy, a.init),
                report_every: a.sample.unwrap_or(if a.paper { 30.0 } else { 5.0 }),
                watch: (!a.no_watch).then(|| WatchParams {
                    threshold: a.watch_threshold,
                    duration: a.watch_duration,
                    ..WatchParams::default()
                }),
            },
            migrate_memory: a.migrate_memory,
            migrate_files: a.migrate_files,
            mem_policy,
            estimate_perturbation: !a.no_perturbation_estimate,
            launch: None,
            override_binding: a.override_binding,
            start_off_busy: a.start == StartName::Auto,
            remembered: None,
            threads: match a.threads {
                Some(crate::number_args::ThreadsArg::Keep) => ThreadsChoice::Keep,
                Some(crate::number_args::ThreadsArg::Count(n)) => ThreadsChoice::Count(n),
                Some(crate::number_args::ThreadsArg::Auto) | None => ThreadsChoice::Auto,
            },
        })
    }
}

/// Where the perf availability probe reads the paranoid level; `AUTOPIN_PERF_SYSFS_ROOT`
/// lets tests simulate e.g. `perf_event_paranoid=3` without root.
pub fn perf_sysfs() -> Sysfs {
    match std::env::var_os("AUTOPIN_PERF_SYSFS_ROOT") {
        Some(p) if !p.is_empty() => Sysfs::at(PathBuf::from(p)),
        _ => Sysfs::system(),
    }
}

/// `-e`/`--objective` (named: no fallback), or the default with its fallback chain.
fn objective(a: &EngineArgs) -> Result<ObjectivePlan, CliError> {
    let text = match (&a.objective, &a.event) {
        (Some(_), Some(_)) => {
            return Err(CliError::usage(
                "give either -e EVENT or --objective, not both",
            ));
        }
        (Some(o), None) => o.clone(),
        (None, Some(e)) => e.clone(),
        (None, None) => "instructions:u".to_string(),
    };
    let o = Objective::parse_with(&text, &perf_sysfs()).map_err(|e| {
        // The named objectives first: the parser's list is the perf events.
        const NAMED: [&str; 5] = ["heartbeat", "openmp", "task-clock", "energy", "power"];
        let word = text.trim().to_ascii_lowercase();
        let hint = NAMED
            .iter()
            .find(|n| !word.is_empty() && strsim::levenshtein(&word, n) <= 2)
            .map(|n| format!("did you mean '{n}'? "))
            .unwrap_or_default();
        CliError::usage(format!(
            "objective {text:?}: {hint}named objectives: {}; or an event rate or expression: {e}",
            NAMED.join(", ")
        ))
    })?;
    Ok(if a.objective.is_some() || a.event.is_some() {
        ObjectivePlan::explicit(o)
    } else {
        ObjectivePlan::default_with(o)
    })
}

/// Candidates the user lists with --schedule, SCHEDULE or --candidates (None: the topology's).
/// The pin expressions are read on the machine when the run starts, where a rank of a
/// launch has its share of the node.
fn explicit_candidates(a: &EngineArgs) -> Result<Option<ListedCandidates>, CliError> {
    let mut listed = ListedCandidates {
        lists: a
            .schedule
            .iter()
            .flat_map(|lists| lists.0.iter().cloned().map(Pinning::from_cpus))
            .collect(),
        expressions: a
            .candidates
            .iter()
            .flat_map(|exprs| exprs.split(';'))
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_string)
            .collect(),
        unpinned: a.unpinned,
    };
    if listed.is_empty() {
        if let Ok(variable) = std::env::var("SCHEDULE") {
            if !variable.trim().is_empty() {
                listed.lists = schedule::parse_schedule_env(&variable)
                    .map_err(|e| CliError::usage(format!("SCHEDULE: {e}")))?
                    .into_iter()
                    .map(Pinning::from_cpus)
                    .collect();
            }
        }
    }
    if listed.is_empty() {
        return Ok(None);
    }
    Ok(Some(listed))
}

/// A `--schedule` value, read when the command line is: CPU lists in thread order.
#[derive(Debug, Clone)]
pub struct ScheduleLists(pub Vec<Vec<u32>>);

fn schedule_lists(s: &str) -> Result<ScheduleLists, String> {
    schedule::parse_schedule_lists(s)
        .map(ScheduleLists)
        .map_err(|e| e.to_string())
}

/// What `run` and `attach` options say ([`EngineArgs::request`]).
pub struct RunRequest {
    /// The plan on the whole machine, without a launch's part.
    pub plan: RunPlan,
    pub node: NodeOptions,
    /// The report and the timeline file, as named (a rank of a launch expands them).
    pub files: [Option<PathBuf>; 2],
    pub memory: MemoryRequest,
    /// The store, opening on a thread since before the machine was read.
    pub store_opening: Option<autopin_memory::StoreOpening>,
    pub quiet: bool,
    /// Say how the launch shares the node (`--cluster-verbose`).
    pub verbose: bool,
}

/// The store's file for these options: `--memory`, else the default (an error saying why
/// not: `--no-memory`, `AUTOPIN_MEMORY=off`, or no home directory).
fn store_path(a: &EngineArgs) -> Result<PathBuf, String> {
    if a.no_memory {
        return Err("--no-memory".into());
    }
    if let Some(p) = &a.memory_store {
        return Ok(p.clone());
    }
    if std::env::var("AUTOPIN_MEMORY").is_ok_and(|v| v.eq_ignore_ascii_case("off")) {
        return Err("AUTOPIN_MEMORY=off".into());
    }
    autopin_memory::default_path().ok_or_else(|| "no home directory for the store".into())
}

/// What these options ask of the decision store: its file, whether the search named on the
/// command line wins over a remembered decision, and the key's parts the options set (the
/// store's use in the run is autopin-memory's `RunMemory`).
fn memory_request(a: &EngineArgs) -> MemoryRequest {
    let threads = a
        .threads
        .and_then(|t| t.count())
        .map(|n| n.to_string())
        .or_else(|| {
            std::env::var("OMP_NUM_THREADS")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| "auto".into());
    let objective = a
        .objective
        .clone()
        .or_else(|| a.event.clone())
        .unwrap_or_else(|| "default".into());
    MemoryRequest {
        store: store_path(a),
        // What the user names is what runs: memory serves the default search.
        named: a.named_search().filter(|_| !a.recall),
        key_args: a.memory_key == "args",
        threads,
        objective,
        kept_ids: autopin_os::machine_cache::cache_dir().map(|d| d.join("program-ids.json")),
    }
}

/// How long a program born pinned off busy CPUs runs before the search
/// (`SearchParams::born_wait`): the race's default, unless an init was asked for, which is
/// kept as asked (and autopin1, the paper's method, waits its own init).
fn born_wait(strategy: &StrategyChoice, init: Option<f64>) -> f64 {
    match (strategy, init) {
        (StrategyChoice::Race(_), None) => BORN_WAIT,
        _ => 0.0,
    }
}

/// The strategy and the init time: `--paper` means autopin1 with the paper's t/w/i.
fn strategy(a: &EngineArgs) -> (StrategyChoice, f64) {
    match if a.paper {
        StrategyName::Autopin1
    } else {
        a.strategy.unwrap_or(StrategyName::Race)
    } {
        StrategyName::Autopin1 => {
            let p = if a.paper && a.sample.is_none() && a.warmup.is_none() && a.init.is_none() {
                Autopin1Params::paper()
            } else {
                Autopin1Params::from_parts(a.sample, a.warmup, a.init)
            };
            (StrategyChoice::Autopin1(p), p.init)
        }
        StrategyName::Fixed => (StrategyChoice::Fixed, a.init.unwrap_or(0.0)),
        StrategyName::Race => (
            StrategyChoice::Race(RaceParams {
                warmup: a.warmup.unwrap_or(RaceParams::default().warmup),
                // A warm-up asked for is kept throughout.
                quiet_warmup: a.warmup.unwrap_or(RaceParams::default().quiet_warmup),
                probe: a.probe,
                budget: a.budget,
                ..RaceParams::default()
            }),
            a.init.unwrap_or(0.5),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_race_without_an_init_asked_for_waits_before_searching_a_program_born_pinned() {
        let race = StrategyChoice::Race(RaceParams::default());
        assert_eq!(born_wait(&race, None), BORN_WAIT);
        assert_eq!(born_wait(&race, Some(0.2)), 0.0);
        assert_eq!(born_wait(&StrategyChoice::Fixed, None), 0.0);
        let paper = StrategyChoice::Autopin1(Autopin1Params::paper());
        assert_eq!(born_wait(&paper, None), 0.0);
    }
}
