//! The cluster options of `run`/`attach`: clap's view of `autopin_cluster::NodeOptions`.
//! Node preparation (rendezvous, split, affinity, per-rank names, the launch record) lives
//! in `autopin_cluster::node`; `run` calls it once with the options mapped here.

use crate::error::CliError;
use autopin_cluster::node::{NodeError, NodeOptions};
use autopin_cluster::Combine;
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

impl ClusterArgs {
    pub fn options(&self) -> Result<NodeOptions, CliError> {
        Ok(NodeOptions {
            combine: Combine::parse(&self.combine)?,
            coordinate: !self.no_coordinate,
            rendezvous_timeout: Duration::try_from_secs_f64(self.rendezvous_timeout).map_err(
                |_| {
                    CliError::usage(format!(
                        "--rendezvous-timeout must be a number of seconds ≥ 0, got {}",
                        self.rendezvous_timeout
                    ))
                },
            )?,
            // Under `autopin run`'s keeper the launcher started the keeper.
            launch_parent: autopin_os::keeper::launch_parent(),
        })
    }
}

impl From<NodeError> for CliError {
    fn from(e: NodeError) -> Self {
        match e {
            NodeError::Usage(m) => CliError::usage(m),
            other => CliError::internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let mut a = ClusterArgs {
            combine: "sum".into(),
            no_coordinate: true,
            rendezvous_timeout: 1.5,
            verbose: false,
        };
        let o = a.options().unwrap();
        assert_eq!(o.combine, Combine::Sum);
        assert!(!o.coordinate);
        assert_eq!(o.rendezvous_timeout, Duration::from_millis(1500));
        a.rendezvous_timeout = -1.0;
        assert!(a.options().is_err());
    }
}
