//! The CLI side of cluster launches: options, and the [`NodePlan`] that `run` builds before
//! starting the target — who launched us, this rank's share of the node (the machine is
//! narrowed to it), and the link to the other local ranks that makes their searches move in
//! lockstep. The logic lives in `autopin-cluster`, `autopin-placement::split_node` and the
//! engine's `job_report`; this module only wires them.

use crate::error::CliError;
use autopin_cluster::coordinated::{Link, SharedLink};
use autopin_cluster::launcher::{self, Launch};
use autopin_cluster::{names, rendezvous, Combine, Coordinated, Rendezvous, RendezvousConfig};
use autopin_engine::job_report::LaunchRecord;
use autopin_engine::session::StrategyFactory;
use autopin_topology::{CpuSet, Machine};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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
    #[arg(long, value_name = "SEC", default_value_t = 10.0)]
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
    link: Option<SharedLink>,
    combine: Combine,
    notes: Arc<Mutex<Vec<String>>>,
    /// Lines for the report and `--verbose`.
    pub lines: Vec<String>,
}

fn fallback_key() -> String {
    // MPI launchers without a job id: the ranks on a node share their parent (Hydra's
    // proxy, Open MPI's daemon); its pid and start time name this launch.
    let ppid = unsafe { libc::getppid() };
    let start = std::fs::read_to_string(format!("/proc/{ppid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(19).map(str::to_string))
        })
        .unwrap_or_default();
    format!("{ppid}-{start}")
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
    let notes = Arc::new(Mutex::new(Vec::new()));
    if !launch.shares_node() || args.no_coordinate {
        if launch.shares_node() {
            lines.push("node: --no-coordinate: this rank plans alone in its allowed CPUs".into());
        }
        return Ok(NodePlan {
            launch,
            machine,
            record,
            link: None,
            combine,
            notes,
            lines,
        });
    }
    let timeout = Duration::from_secs_f64(args.rendezvous_timeout);
    let cfg = RendezvousConfig {
        join_timeout: timeout,
        round_timeout: timeout,
        ..RendezvousConfig::default()
    };
    let dir = rendezvous::directory_for(&launch.step_key(&fallback_key()));
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
    let link: Box<dyn Link> = Box::new(rv);
    Ok(NodePlan {
        launch,
        machine,
        record,
        link: Some(Arc::new(Mutex::new(link))),
        combine,
        notes,
        lines,
    })
}

impl NodePlan {
    pub fn coordinated(&self) -> bool {
        self.link.is_some()
    }

    /// Wraps the session's strategy factory so every search is coordinated.
    pub fn wrap(&self, mut inner: StrategyFactory) -> StrategyFactory {
        match &self.link {
            None => inner,
            Some(link) => {
                let link = link.clone();
                let notes = self.notes.clone();
                let combine = self.combine;
                Box::new(move |n, search| {
                    Box::new(Coordinated::new(
                        inner(n, search),
                        link.clone(),
                        combine,
                        notes.clone(),
                    ))
                })
            }
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

    /// Report lines gathered during the run (ranks dropped, disagreements).
    pub fn take_notes(&self) -> Vec<String> {
        self.notes
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default()
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
        let mut bad = args();
        bad.rendezvous_timeout = -1.0;
        assert!(prepare_for(&bad, m, Launch::plain()).is_err());
    }
}
