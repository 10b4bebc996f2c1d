//! Where a run stood in a Slurm/MPI launch: the place of one rank in a parallel job (which
//! `autopin-cluster` detects from the launcher's environment) and the record of it that a
//! report keeps (the job report merges the ranks' reports by it).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The job launcher that started this process, as reports name it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobLauncher {
    /// Slurm's `srun`.
    Slurm,
    /// Open MPI's `mpirun` or `prterun`.
    OpenMpi,
    /// MPICH's Hydra (`mpiexec`).
    Mpich,
    /// No launcher: a plain run.
    #[default]
    Plain,
}

impl JobLauncher {
    pub fn name(self) -> &'static str {
        match self {
            JobLauncher::Slurm => "slurm",
            JobLauncher::OpenMpi => "openmpi",
            JobLauncher::Mpich => "mpich",
            JobLauncher::Plain => "plain",
        }
    }
}

impl fmt::Display for JobLauncher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where one process stands in a parallel job: the launcher, its job, step and node, and
/// this rank among all ranks and among those on its node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPlace {
    pub launcher: JobLauncher,
    /// Job id (Slurm) or the MPI launch's id where the launcher names one.
    pub job: Option<String>,
    /// Slurm step id (`0`, `batch`, ...).
    pub step: Option<String>,
    /// Node name (Slurm's `SLURMD_NODENAME`) or host name.
    pub node: Option<String>,
    /// Global rank and number of ranks.
    pub rank: usize,
    pub size: usize,
    /// Rank among the ranks of this launch on this node, and how many there are.
    pub local_rank: usize,
    pub local_size: usize,
}

/// Where this run stood in a cluster launch (absent for plain runs in older reports).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchRecord {
    /// Written inline, so the report's fields are `launcher`, `job`, ... as they always were.
    #[serde(flatten)]
    pub place: JobPlace,
    /// The CPUs this rank planned its candidates in (its share of the node).
    pub share: String,
    /// Local ranks that searched together (empty when the search was not coordinated).
    pub coordinated_with: Vec<usize>,
    /// How the ranks' scores were combined (min or sum) when coordinated.
    pub combine: Option<String>,
    /// Unix time (seconds) of the report's time 0, so the ranks' probe times can be compared.
    #[serde(default)]
    pub clock_origin: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports written before the place had a type of its own read the same, and are
    /// written byte for byte as they were: the place's fields stand inline, in their order.
    #[test]
    fn the_record_is_written_as_one_flat_object() {
        let r = LaunchRecord {
            place: JobPlace {
                launcher: JobLauncher::OpenMpi,
                job: Some("7".into()),
                step: None,
                node: Some("n1".into()),
                rank: 3,
                size: 4,
                local_rank: 1,
                local_size: 2,
            },
            share: "2-3".into(),
            coordinated_with: vec![0, 1],
            combine: Some("min".into()),
            clock_origin: Some(1.5e9),
        };
        let text = r#"{"launcher":"openmpi","job":"7","step":null,"node":"n1","rank":3,"size":4,"local_rank":1,"local_size":2,"share":"2-3","coordinated_with":[0,1],"combine":"min","clock_origin":1500000000.0}"#;
        assert_eq!(serde_json::to_string(&r).unwrap(), text);
        assert_eq!(serde_json::from_str::<LaunchRecord>(text).unwrap(), r);
        let older = r#"{"launcher":"plain","job":null,"step":null,"node":null,"rank":0,"size":1,"local_rank":0,"local_size":1,"share":"0","coordinated_with":[],"combine":null}"#;
        let o: LaunchRecord = serde_json::from_str(older).unwrap();
        assert_eq!(
            (o.place.launcher, o.clock_origin),
            (JobLauncher::Plain, None)
        );
    }
}
