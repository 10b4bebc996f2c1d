//! Which CPUs threads go to.
//!
//! - [`CpuList`]: ordered CPU lists with repetition (`0-3,8,10-11`).
//! - [`pin_expression`]: likwid-pin expressions (`S0:0-3@S1:0-3`, `E:N:8:1:2`, `M:scatter`, ...).
//! - [`policy_pinning`]: named policies (compact, scatter, balanced, cores, the MCTOP-PLACE set).
//! - [`Pinning`]: thread i → CPU, with its label; what every source of pinnings returns.
//! - [`candidates`]: one representative pinning per symmetry class of the machine.
//! - [`mem_policy`]: numactl-style memory policies (`--membind 0-1`, `--interleave all`, `M1`).
//! - [`schedule`]: `--schedule` lists and the paper's `SCHEDULE` variable.
//! - [`sharing_pinning`]: sharing-aware strategies (LP_COMPACT, LP_SCATTER, GP, LPGP, GPLP).
//! - [`split_node`]: disjoint per-rank shares of a node for the local ranks of a job step.
//!
//! Every function works on the PUs the machine model marks allowed; selections that reach
//! outside them are errors ([`PlacementError`]), all of which are usage errors for the CLI.

mod candidates;
mod cpulist;
mod domains;
mod error;
mod expr;
mod mempolicy;
mod pinning;
mod policy;
pub mod schedule;
#[cfg(feature = "sharing")]
mod sharing;
mod split;
mod summary;
mod view;

pub use candidates::{
    candidates, candidates_avoiding, count_classes, free_cpu_candidates, stacked_under_a_team,
    team_candidates, CandidateOptions, EXACT_LIMIT,
};
pub use cpulist::CpuList;
pub use domains::{device_domains_listing, domains, domains_listing, Domain};
pub use error::PlacementError;
pub use expr::{pin_expression, team_expression};
pub use mempolicy::{mem_policy, node_list, MemPolicy, MemPolicyMode};
pub use pinning::{cpu_text, Pinning, Place, UNPINNED_LABEL};
pub use policy::{policy_pinning, POLICY_NAMES};
#[cfg(all(feature = "files", feature = "sharing"))]
pub use sharing::sharing_pinning;
#[cfg(feature = "sharing")]
pub use sharing::{place_with_matrix, SharingMatrix, SHARING_STRATEGIES};
pub use split::{
    gpu_note, gpus_of_ranks, gpus_unused, rank_share, rank_share_near_gpus, restrict_to,
    split_node, split_node_near, SplitError,
};
pub use summary::{summarize, PlacementSummary};
