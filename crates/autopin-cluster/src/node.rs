//! Preparing this rank's part of the node before the target starts: which launcher started
//! us, the local ranks met in the rendezvous, the node split among them along the topology,
//! this process's affinity narrowed to its share (the target inherits it; never wider than
//! before), per-rank output names, and the engine's `LaunchPlan` (the launch record and the
//! coordination that makes the local ranks' searches move in lockstep).
//!
//! One call, plain values in: `prepare(&NodeOptions, machine)`. The CLI maps its options to
//! `NodeOptions` and hands the result to the run plan.

use crate::job_launcher::{self, Launch};
use crate::{names, rendezvous, Combine, Coordinator, Rendezvous, RendezvousConfig};
use autopin_engine::report::{JobLauncher, LaunchRecord};
use autopin_engine::run::{Coordination, LaunchPlan, RunPlan};
use autopin_topology::{CpuSet, Machine};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How the local ranks of a launch work together.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// How the ranks' rates combine to rank candidates.
    pub combine: Combine,
    /// Split the node among the local ranks and search together (false: each rank plans
    /// alone in the CPUs it was given).
    pub coordinate: bool,
    /// How long to wait for the other local ranks before going on without them.
    pub rendezvous_timeout: Duration,
    /// The process the launcher started for this rank, when it is not this process's
    /// parent (`autopin run`'s keeper stands in between): the ranks of a launch are told
    /// apart from another launch's by the parent they share (see
    /// [`job_launcher::parent_key`]). None: this process's parent.
    pub launch_parent: Option<u32>,
}

/// What went wrong preparing the node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The options or the launch cannot work (exit status 2).
    #[error("{0}")]
    Usage(String),
    #[error("rendezvous in {dir}: {why}")]
    Rendezvous { dir: PathBuf, why: String },
    #[error("setting affinity to {share}: {source}")]
    Affinity {
        share: String,
        source: std::io::Error,
    },
}

/// This rank's part of the node, decided before the target starts.
pub struct NodeShare {
    pub launch: Launch,
    /// The machine narrowed to this rank's share.
    pub machine: Machine,
    pub record: LaunchRecord,
    coordinator: Option<Arc<Coordinator>>,
    /// Lines for the report and `--verbose`.
    pub lines: Vec<String>,
}

/// The GPU (`G<i>`) this local rank works with, as the GPU variables of its environment
/// say (`autopin_placement::gpus_of_ranks`); None without them. Why they could not be
/// used goes into `lines`.
fn gpu_of_this_rank(
    machine: &Machine,
    launch: &Launch,
    env: Env,
    lines: &mut Vec<String>,
) -> Option<usize> {
    match autopin_placement::gpus_of_ranks(machine, launch.place.local_size, env) {
        Ok(None) => None,
        Ok(Some(g)) => {
            let mine = g.get(launch.place.local_rank).copied();
            if let Some(i) = mine {
                lines.push(format!(
                    "node: this rank {}",
                    autopin_placement::gpu_note(machine, i)
                ));
            }
            mine
        }
        Err(why) => {
            lines.push(format!("node: {}", autopin_placement::gpus_unused(&why)));
            None
        }
    }
}

/// Detects the launcher from this process's environment and prepares the node.
pub fn prepare(opts: &NodeOptions, machine: Machine) -> Result<NodeShare, NodeError> {
    prepare_for(opts, machine, job_launcher::from_process())
}

/// Reads one environment variable (the process's, or a test's).
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Prepares the node for `launch`: with several local ranks, meets them, splits the node
/// and sets this process's affinity to its share.
pub fn prepare_for(
    opts: &NodeOptions,
    machine: Machine,
    launch: Launch,
) -> Result<NodeShare, NodeError> {
    prepare_with_env(opts, machine, launch, &|k: &str| std::env::var(k).ok())
}

fn prepare_with_env(
    opts: &NodeOptions,
    machine: Machine,
    launch: Launch,
    env: Env,
) -> Result<NodeShare, NodeError> {
    let mut lines = vec![format!("launcher: {launch}")];
    lines.extend(
        launch
            .problems
            .iter()
            .map(|p| format!("launcher: warning: {p}")),
    );
    let allowed = machine.allowed_cpuset();
    // The record of a launch before the node is split: the share is every CPU it has.
    let mut record = LaunchRecord {
        place: launch.place.clone(),
        share: allowed.to_string(),
        ..LaunchRecord::default()
    };
    if !launch.shares_node() || !opts.coordinate {
        if launch.shares_node() {
            lines.push("node: --no-coordinate: this rank plans alone in its allowed CPUs".into());
        }
        return Ok(NodeShare {
            launch,
            machine,
            record,
            coordinator: None,
            lines,
        });
    }
    let cfg = RendezvousConfig {
        join_timeout: opts.rendezvous_timeout,
        round_timeout: opts.rendezvous_timeout,
        ..RendezvousConfig::default()
    };
    let parent = opts
        .launch_parent
        .map_or_else(job_launcher::parent_key, job_launcher::key_of);
    let dir = rendezvous::directory_for(&launch.step_key(&parent));
    let my_gpu = gpu_of_this_rank(&machine, &launch, env, &mut lines);
    let (rv, joined) = Rendezvous::join(
        &dir,
        launch.place.local_rank,
        launch.place.local_size,
        cfg,
        serde_json::json!({ "allowed": allowed.to_string(), "gpu": my_gpu }),
    )
    .map_err(|e| NodeError::Rendezvous {
        dir: dir.clone(),
        why: e.to_string(),
    })?;
    let masks: Vec<String> = joined
        .iter()
        .filter_map(|m| m.body["allowed"].as_str().map(str::to_string))
        .collect();
    for (r, why) in &rv.dropped {
        lines.push(format!("node: local rank {r} is not coordinated: {why}"));
    }
    // The launcher may already have bound each rank (srun's task/affinity, Open MPI's
    // --bind-to core): then the ranks' sets differ and each keeps its own. Ranks that all
    // see the same CPUs split them along the topology, by local rank, so the shares do not
    // depend on who arrived in time.
    let share: CpuSet = if masks.iter().all(|m| *m == allowed.to_string()) {
        // Each rank said which GPU it works with (its own environment may name only its
        // own GPU): every rank sees the same list and computes the same shares.
        let mut near: Vec<Option<CpuSet>> = vec![None; launch.place.local_size];
        let gpus = machine.gpus();
        for j in &joined {
            let g = j.body["gpu"].as_u64().map(|g| g as usize);
            if let (Some(slot), Some(d)) = (near.get_mut(j.rank), g.and_then(|g| gpus.get(g))) {
                *slot = Some(d.local_cpus.clone());
            }
        }
        let s = autopin_placement::split_node_near(&machine, launch.place.local_size, &near)
            .map_err(|e| NodeError::Usage(format!("splitting the node: {e}")))?
            .swap_remove(launch.place.local_rank);
        lines.push(format!(
            "node: {} local ranks share CPUs {allowed}; this rank's share: {s}",
            launch.place.local_size
        ));
        s
    } else {
        lines.push(format!(
            "node: the launcher bound the ranks to different CPUs; this rank keeps {allowed}"
        ));
        allowed.clone()
    };
    if share != allowed {
        autopin_topology::affinity::set(0, &share).map_err(|source| NodeError::Affinity {
            share: share.to_string(),
            source,
        })?;
    }
    let machine = autopin_placement::restrict_to(&machine, &share);
    record.share = share.to_string();
    record.coordinated_with = rv.roster();
    record.combine = Some(opts.combine.name().into());
    lines.push(format!(
        "node: searching together with local ranks {:?} (combine: {}), rendezvous {}",
        rv.roster(),
        opts.combine.name(),
        dir.display()
    ));
    Ok(NodeShare {
        launch,
        machine,
        record,
        coordinator: Some(Arc::new(Coordinator::new(Box::new(rv), opts.combine))),
        lines,
    })
}

impl NodeShare {
    /// The local ranks search together (so no rank may re-search on its own).
    pub fn coordinated(&self) -> bool {
        self.coordinator.is_some()
    }

    /// The run plan's launch part: the record, the launch lines for the report (not for
    /// plain runs) and the coordination of the local ranks' searches.
    pub fn launch_plan(&self) -> LaunchPlan {
        LaunchPlan {
            record: self.record.clone(),
            notes: if self.launch.place.launcher == JobLauncher::Plain {
                Vec::new()
            } else {
                self.lines.clone()
            },
            coordination: self.coordinator.clone().map(|c| c as Arc<dyn Coordination>),
        }
    }

    /// The plan as this rank runs it: on its share of the node, with the launch's part, and
    /// without the phase watch when the ranks search together (a re-search starts on one
    /// rank's own rate drop; the others could not follow in step).
    pub fn share_plan(&self, plan: &mut RunPlan) {
        plan.machine = self.machine.clone();
        plan.launch = Some(self.launch_plan());
        if self.coordinated() {
            plan.search.watch = None;
        }
    }

    /// This rank's names for the output files asked for ([`Self::output_path`] of each).
    pub fn output_paths<const N: usize>(
        &self,
        paths: [Option<PathBuf>; N],
    ) -> Result<[Option<PathBuf>; N], NodeError> {
        let mut out: [Option<PathBuf>; N] = std::array::from_fn(|_| None);
        for (slot, p) in out.iter_mut().zip(paths) {
            *slot = p.map(|p| self.output_path(&p)).transpose()?;
        }
        Ok(out)
    }

    /// This rank's name for an output file: `%j %s %n %r %l` expanded; with several ranks
    /// and no pattern, `.NODE.RANK` appended so the ranks do not overwrite each other.
    pub fn output_path(&self, p: &Path) -> Result<PathBuf, NodeError> {
        let text = p.to_string_lossy();
        if self.launch.place.size > 1 && !text.contains('%') {
            let suffix = names::expand("%n.%r", &self.launch.place)
                .map_err(|e| NodeError::Usage(e.to_string()))?;
            return Ok(PathBuf::from(format!("{text}.{suffix}")));
        }
        names::expand(&text, &self.launch.place)
            .map(PathBuf::from)
            .map_err(|e| NodeError::Usage(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> NodeOptions {
        NodeOptions {
            combine: Combine::Min,
            coordinate: true,
            rendezvous_timeout: Duration::from_secs(1),
            launch_parent: None,
        }
    }

    /// hwloc's 24em64t-2n6c2t-pci machine (tests/data/hwloc-xml): GPU G0 next to package 0
    /// (even CPUs), G1 next to package 1 (odd CPUs).
    fn gpu_machine() -> Machine {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/hwloc-xml/24em64t-2n6c2t-pci.xml"
        );
        autopin_topology::source::load_file(Path::new(path)).unwrap()
    }

    /// Two local ranks whose environments each name only their own GPU (Slurm's per-task
    /// binding): they tell each other when they meet, and each gets its GPU's package.
    #[test]
    fn ranks_that_each_see_one_gpu_get_the_package_of_their_gpu() {
        let own = crate::job_launcher::parent_key();
        let shares: Vec<(usize, String, Vec<String>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2usize)
                .map(|r| {
                    let own = own.clone();
                    s.spawn(move || {
                        let mut l = Launch::plain();
                        l.place.launcher = JobLauncher::Slurm;
                        l.place.job = Some(format!("gpu-test-{}-{own}", std::process::id()));
                        l.place.step = Some("0".into());
                        l.place.local_rank = r;
                        l.place.local_size = 2;
                        l.place.rank = r;
                        l.place.size = 2;
                        // Rank 0 drives G1 (package 1), rank 1 drives G0 (package 0).
                        let gpu = if r == 0 { "1" } else { "0" };
                        let env =
                            move |k: &str| (k == "CUDA_VISIBLE_DEVICES").then(|| gpu.to_string());
                        let plan = prepare_with_env(&opts(), gpu_machine(), l, &env).unwrap();
                        (r, plan.record.share.clone(), plan.lines.clone())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let even = "0,2,4,6,8,10,12,14,16,18,20,22";
        let odd = "1,3,5,7,9,11,13,15,17,19,21,23";
        for (r, share, lines) in shares {
            assert_eq!(
                share,
                if r == 0 { odd } else { even },
                "rank {r}: {lines:?}"
            );
            let g = if r == 0 {
                "G1 (0000:11:00.0)"
            } else {
                "G0 (0000:06:00.0)"
            };
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains(&format!("this rank works with GPU {g}"))),
                "{lines:?}"
            );
        }
    }

    #[test]
    fn plain_runs_keep_the_machine_and_paths() {
        let m = autopin_topology::source::synthetic::parse("core:2 pu:1").unwrap();
        let plan = prepare_for(&opts(), m.clone(), Launch::plain()).unwrap();
        assert!(!plan.coordinated());
        assert_eq!(plan.machine.allowed_cpuset(), m.allowed_cpuset());
        assert_eq!(
            plan.output_path(Path::new("r.json")).unwrap(),
            PathBuf::from("r.json")
        );
        assert_eq!(
            plan.output_path(Path::new("r-%r.json")).unwrap(),
            PathBuf::from("r-0.json")
        );
        // The run plan gets the record, but no report lines or coordination for a plain run.
        let lp = plan.launch_plan();
        assert_eq!(lp.record.place.launcher, JobLauncher::Plain);
        assert_eq!(lp.record.share, m.allowed_cpuset().to_string());
        assert!(lp.notes.is_empty() && lp.coordination.is_none());
    }

    #[test]
    fn the_record_of_a_launch_carries_who_we_are() {
        let m = autopin_topology::source::synthetic::parse("core:2 pu:1").unwrap();
        let mut l = Launch::plain();
        l.place.rank = 3;
        l.place.size = 8;
        l.place.local_rank = 1;
        l.place.local_size = 2;
        l.place.job = Some("42".into());
        let alone = NodeOptions {
            coordinate: false,
            ..opts()
        };
        let r = prepare_for(&alone, m, l.clone()).unwrap().record;
        assert_eq!(r.place, l.place);
        assert!(r.coordinated_with.is_empty() && r.combine.is_none());
    }
}
