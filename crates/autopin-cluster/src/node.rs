//! Preparing this rank's part of the node before the target starts: which launcher started
//! us, the local ranks met in the rendezvous, the node split among them along the topology,
//! this process's affinity narrowed to its share (the target inherits it; never wider than
//! before), per-rank output names, and the engine's `LaunchPlan` (the launch record and the
//! coordination that makes the local ranks' searches move in lockstep).
//!
//! One call, plain values in: `prepare(&NodeOptions, machine)`. The CLI maps its options to
//! `NodeOptions` and hands the result to the run plan.

use crate::launcher::{self, Launch, LauncherKind};
use crate::{names, rendezvous, Combine, Coordinator, Rendezvous, RendezvousConfig};
use autopin_engine::report::LaunchRecord;
use autopin_engine::run::{Coordination, LaunchPlan};
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

impl From<&Launch> for LaunchRecord {
    /// The record of a launch before the node is split: the share is every CPU it has.
    fn from(l: &Launch) -> Self {
        LaunchRecord {
            launcher: l.kind.name().into(),
            job: l.job.clone(),
            step: l.step.clone(),
            node: l.node.clone(),
            rank: l.rank,
            size: l.size,
            local_rank: l.local_rank,
            local_size: l.local_size,
            share: String::new(),
            coordinated_with: Vec::new(),
            combine: None,
            clock_origin: None,
        }
    }
}

/// Detects the launcher from this process's environment and prepares the node.
pub fn prepare(opts: &NodeOptions, machine: Machine) -> Result<NodeShare, NodeError> {
    prepare_for(opts, machine, launcher::from_process())
}

/// Prepares the node for `launch`: with several local ranks, meets them, splits the node
/// and sets this process's affinity to its share.
pub fn prepare_for(
    opts: &NodeOptions,
    machine: Machine,
    launch: Launch,
) -> Result<NodeShare, NodeError> {
    let mut lines = vec![format!("launcher: {launch}")];
    lines.extend(
        launch
            .problems
            .iter()
            .map(|p| format!("launcher: warning: {p}")),
    );
    let allowed = machine.allowed_cpuset();
    let mut record = LaunchRecord::from(&launch);
    record.share = allowed.to_string();
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
    let dir = rendezvous::directory_for(&launch.step_key(&launcher::parent_key()));
    let (rv, joined) = Rendezvous::join(
        &dir,
        launch.local_rank,
        launch.local_size,
        cfg,
        serde_json::json!({ "allowed": allowed.to_string() }),
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
        let s = autopin_placement::rank_share(&machine, launch.local_size, launch.local_rank)
            .map_err(|e| NodeError::Usage(format!("splitting the node: {e}")))?;
        lines.push(format!(
            "node: {} local ranks share CPUs {allowed}; this rank's share: {s}",
            launch.local_size
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
            notes: if self.launch.kind == LauncherKind::Plain {
                Vec::new()
            } else {
                self.lines.clone()
            },
            coordination: self.coordinator.clone().map(|c| c as Arc<dyn Coordination>),
        }
    }

    /// This rank's name for an output file: `%j %s %n %r %l` expanded; with several ranks
    /// and no pattern, `.NODE.RANK` appended so the ranks do not overwrite each other.
    pub fn output_path(&self, p: &Path) -> Result<PathBuf, NodeError> {
        let text = p.to_string_lossy();
        if self.launch.size > 1 && !text.contains('%') {
            let suffix = names::expand("%n.%r", &self.launch).map_err(NodeError::Usage)?;
            return Ok(PathBuf::from(format!("{text}.{suffix}")));
        }
        names::expand(&text, &self.launch)
            .map(PathBuf::from)
            .map_err(NodeError::Usage)
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
        assert_eq!(lp.record.launcher, "plain");
        assert_eq!(lp.record.share, m.allowed_cpuset().to_string());
        assert!(lp.notes.is_empty() && lp.coordination.is_none());
    }

    #[test]
    fn the_record_of_a_launch_carries_who_we_are() {
        let mut l = Launch::plain();
        l.rank = 3;
        l.size = 8;
        l.local_rank = 1;
        l.local_size = 2;
        l.job = Some("42".into());
        let r = LaunchRecord::from(&l);
        assert_eq!((r.rank, r.size, r.local_rank, r.local_size), (3, 8, 1, 2));
        assert_eq!(r.job.as_deref(), Some("42"));
        assert!(r.coordinated_with.is_empty() && r.combine.is_none());
    }
}
