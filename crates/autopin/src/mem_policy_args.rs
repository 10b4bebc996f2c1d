//! numactl-style memory policy options shared by `pin` and `run` (the program autopin
//! starts gets the policy before its first instruction).

use crate::error::CliError;
use autopin_placement::{mem_policy, MemPolicy, MemPolicyMode};
use autopin_topology::Machine;

#[derive(clap::Args, Debug, Clone, Default)]
#[group(multiple = false)]
pub struct MemPolicyArgs {
    /// Allocate the program's memory only on these NUMA nodes (numactl --membind): 0-1, all, !0, M1
    #[arg(long, value_name = "NODES")]
    pub membind: Option<String>,
    /// Interleave the program's memory over these nodes (numactl --interleave)
    #[arg(long, value_name = "NODES")]
    pub interleave: Option<String>,
    /// Prefer this node for the program's memory (numactl --preferred)
    #[arg(long, value_name = "NODE")]
    pub preferred: Option<String>,
    /// Allocate on the node of the CPU that first touches a page (numactl --localalloc)
    #[arg(long)]
    pub localalloc: bool,
}

impl MemPolicyArgs {
    pub fn given(&self) -> bool {
        self.membind.is_some()
            || self.interleave.is_some()
            || self.preferred.is_some()
            || self.localalloc
    }

    /// The policy against this machine; a usage error before anything is started. None
    /// also on a machine with one NUMA node, where any valid policy changes nothing.
    pub fn resolve(&self, m: &Machine) -> Result<Option<MemPolicy>, CliError> {
        let (mode, nodes) = if let Some(n) = &self.membind {
            (MemPolicyMode::Bind, Some(n.as_str()))
        } else if let Some(n) = &self.interleave {
            (MemPolicyMode::Interleave, Some(n.as_str()))
        } else if let Some(n) = &self.preferred {
            (MemPolicyMode::Preferred, Some(n.as_str()))
        } else if self.localalloc {
            (MemPolicyMode::Local, None)
        } else {
            return Ok(None);
        };
        let policy = mem_policy(mode, nodes, m).map_err(|e| CliError::usage(e.to_string()))?;
        if m.numa_nodes.len() <= 1 {
            // As numactl: accepted, and nothing to do. Said once, not an error, so scripts
            // written for NUMA machines run unchanged here.
            say!(
                "autopin: warning: {}: this machine has one NUMA node, so the memory policy changes nothing; not applied",
                mode.option()
            );
            return Ok(None);
        }
        Ok(Some(policy))
    }
}
