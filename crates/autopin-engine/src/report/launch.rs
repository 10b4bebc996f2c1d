//! Where a run stood in a Slurm/MPI launch, as its report records it (the job report
//! merges the ranks' reports by it).

use serde::{Deserialize, Serialize};

/// Where this run stood in a cluster launch (absent for plain runs in older reports).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchRecord {
    /// slurm, openmpi, mpich or plain.
    pub launcher: String,
    pub job: Option<String>,
    pub step: Option<String>,
    pub node: Option<String>,
    pub rank: usize,
    pub size: usize,
    pub local_rank: usize,
    pub local_size: usize,
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
