//! The CLI side of cluster launches: options, and the [`NodePlan`] that `run` builds before
//! it builds the engine's `RunPlan` — who launched us, this rank's share of the node (the
//! machine is narrowed to it), and the link to the other local ranks that makes their
//! searches move in lockstep (the plan's `LaunchPlan`, whose `Coordination` the engine
//! honours). The logic lives in `autopin-cluster`, `autopin-placement::split_node` and the
//! engine's `job_report`; this module only wires them.

use crate::cmd::engine_args::EngineArgs;
use crate::error::CliError;
use autopin_cluster::launcher::{self, Launch, LauncherKind};
use autopin_cluster::{names, rendezvous, Combine, Coordinator, Rendezvous, RendezvousConfig};
use autopin_engine::job_report::LaunchRecord;
use autopin_engine::run::{Coordination, LaunchPlan};
use autopin_topology::{CpuSet, Machine};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Under Slurm/MPI with several ranks on a node: how the ranks' rates are combined to
    /// rank candidates — min (the slowest rank sets the pace) or sum (node throughput)
    #[arg(long, value_name = "min|sum", default_value = "min", value_parser = ["min", "sum"])]
    pub combine: String,
    /// Under Slurm/MPI: neither split the node among the local ranks nor search together
    #[arg(long)]
    pub no_coordinate: bool,
    /// Seconds to wait for the other local ranks before going on without them
    #[arg(long, value_name = "SEC", default_value_t = 10.0, value_parser = crate::number_args::seconds)]
    pub rendezvous_timeout: f64,
    /// Say which launcher was detected and which CPUs this rank plans in
    #[arg(short = 'v', long)]
    pub verbose: bool,
}

/// What `run` needs to know about the launch, decided before the target starts.
pub struct NodePlan {
    pub launch: Launch,
    /// The machine narrowed to this rank's share.
    pub machine: Machine,
    pub record: LaunchRecord,
    coordinator: Option<Arc<Coordinator>>,
    /// Lines for the report and `--verbose`.
    pub lines: Vec<String>,
}

/// Detects the launcher and, with several local ranks, meets them, splits the node and sets
/// this process's affinity to its share (the target inherits it; never wider than before).
pub fn prepare(args: &ClusterArgs, machine: Machine) -> Result<NodePlan, CliError> {
    let launch = launcher::from_process();
    prepare_for(args, machine, launch)
}

fn prepare_for(args: &ClusterArgs, machine: Machine, launch: Launch) -> Result<NodePlan, CliError> {
    let combine = Combine::parse(&args.combine).map_err(CliError::usage)?;
    if !(args.rendezvous_timeout.is_finite() && args.rendezvous_timeout >= 0.0) {
        return Err(CliError::usage(format!(
            "--rendezvous-timeout must be a number of seconds ≥ 0, got {}",
            args.rendezvous_timeout
        )));
    }
    let mut lines = vec![format!("launcher: {launch}")];
    for p in &launch.problems {
        lines.push(format!("launcher: warning: {p}"));
    }
    let allowed = machine.allowed_cpuset();
    let mut record = LaunchRecord {
        launcher: launch.kind.name().into(),
        job: launch.job.clone(),
        step: launch.step.clone(),
        node: launch.node.clone(),
        rank: launch.rank,
        size: launch.size,
        local_rank: launch.local_rank,
        local_size: launch.local_size,
        share: allowed.to_string(),
        coordinated_with: Vec::new(),
        combine: None,
        clock_origin: None,
    };
    if !launch.shares_node() || args.no_coordinate {
        if launch.shares_node() {
            lines.push("node: --no-coordinate: this rank plans alone in its allowed CPUs".into());
        }
        return Ok(NodePlan {
            launch,
            machine,
            record,
            coordinator: None,
            lines,
        });
    }
    let timeout = Duration::from_secs_f64(args.rendezvous_timeout);
    let cfg = RendezvousConfig {
        join_timeout: timeout,
        round_timeout: timeout,
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
    .map_err(|e| CliError::internal(format!("rendezvous in {}: {e}", dir.display())))?;
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
            .map_err(|e| CliError::usage(format!("splitting the node: {e}")))?;
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
        autopin_topology::affinity::set(0, &share)
            .map_err(|e| CliError::internal(format!("setting affinity to {share}: {e}")))?;
    }
    let machine = autopin_placement::restrict_to(&machine, &share);
    record.share = share.to_string();
    record.coordinated_with = rv.roster();
    record.combine = Some(combine.name().into());
    lines.push(format!(
        "node: searching together with local ranks {:?} (combine: {}), rendezvous {}",
        rv.roster(),
        combine.name(),
        dir.display()
    ));
    Ok(NodePlan {
        launch,
        machine,
        record,
        coordinator: Some(Arc::new(Coordinator::new(Box::new(rv), combine))),
        lines,
    })
}

impl NodePlan {
    pub fn coordinated(&self) -> bool {
        self.coordinator.is_some()
    }

    /// The options as this rank uses them: report and timeline names expanded for the rank,
    /// and no phase watch when the ranks search together (a re-search starts on one rank's
    /// own rate drop; the others could not follow in step).
    pub fn resolve(&self, a: &EngineArgs) -> Result<EngineArgs, CliError> {
        let mut r = a.clone();
        r.report = self.expand(&a.report)?;
        r.timeline = self.expand(&a.timeline)?;
        r.no_watch |= self.coordinated();
        Ok(r)
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

    /// Expands `%j %s %n %r %l` in an output path for this rank.
    pub fn expand(&self, p: &Option<PathBuf>) -> Result<Option<PathBuf>, CliError> {
        match p {
            None => Ok(None),
            Some(p) => {
                let text = p.to_string_lossy();
                if self.launch.size > 1 && !text.contains('%') {
                    // Several ranks writing one file would overwrite each other.
                    return Ok(Some(PathBuf::from(format!(
                        "{text}.{}",
                        names::expand("%n.%r", &self.launch).map_err(CliError::usage)?
                    ))));
                }
                names::expand(&text, &self.launch)
                    .map(|s| Some(PathBuf::from(s)))
                    .map_err(CliError::usage)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ClusterArgs {
        ClusterArgs {
            combine: "min".into(),
            no_coordinate: false,
            rendezvous_timeout: 1.0,
            verbose: false,
        }
    }

    #[test]
    fn plain_runs_keep_the_machine_and_paths() {
        let m = autopin_topology::source::synthetic::parse("core:2 pu:1").unwrap();
        let plan = prepare_for(&args(), m.clone(), Launch::plain()).unwrap();
        assert!(!plan.coordinated());
        assert_eq!(plan.machine.allowed_cpuset(), m.allowed_cpuset());
        assert_eq!(
            plan.expand(&Some("r.json".into())).unwrap(),
            Some(PathBuf::from("r.json"))
        );
        assert_eq!(
            plan.expand(&Some("r-%r.json".into())).unwrap(),
            Some(PathBuf::from("r-0.json"))
        );
        // The run plan gets the record, but no report lines or coordination for a plain run.
        let lp = plan.launch_plan();
        assert_eq!(lp.record.launcher, "plain");
        assert_eq!(lp.record.share, m.allowed_cpuset().to_string());
        assert!(lp.notes.is_empty() && lp.coordination.is_none());
        let mut bad = args();
        bad.rendezvous_timeout = -1.0;
        assert!(prepare_for(&bad, m, Launch::plain()).is_err());
    }
}
