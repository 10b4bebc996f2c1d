//! Property tests of what a batch system hands autopin: the launcher's environment (Slurm,
//! Open MPI, MPICH/Hydra, PMIx variables with any values) and the report name patterns
//! (`--report r-%r.json`). Detection always gives a launch whose ranks are consistent, or
//! says what it could not read; expansion gives a name or an error; never a panic.
//! `PROPTEST_CASES` runs more cases.

use autopin_cluster::job_launcher::{detect, tasks_on_node};
use autopin_cluster::names::expand;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn cases(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const VARS: &[&str] = &[
    "MPI_LOCALNRANKS",
    "MPI_LOCALRANKID",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_NAMESPACE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURMD_NODENAME",
    "SLURM_CPUS_PER_TASK",
    "SLURM_JOBID",
    "SLURM_JOB_ID",
    "SLURM_LOCALID",
    "SLURM_LOCAL_NODEID",
    "SLURM_NODEID",
    "SLURM_NTASKS",
    "SLURM_PROCID",
    "SLURM_STEPID",
    "SLURM_STEP_ID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_TOPOLOGY_ADDR",
];

/// Values near what launchers write, and the hostile words.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..70).prop_map(|n| n.to_string()),
        (1u32..9, 1u32..5).prop_map(|(n, k)| format!("{n}(x{k})")),
        (1u32..9, 1u32..9).prop_map(|(a, b)| format!("{a},{b}(x2)")),
        proptest::sample::select(autopin_testkit::HOSTILE_WORDS).prop_map(String::from),
        "\\PC{0,8}",
    ]
}

fn env() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(
        proptest::sample::select(VARS).prop_map(String::from),
        value(),
        0..12,
    )
}

proptest! {
    #![proptest_config(cases(800))]

    #[test]
    fn any_launcher_environment_is_read_without_panicking(env in env(), pattern in "[a-z%./-]{0,6}(%[a-zA-Z%])?[a-z.]{0,4}") {
        let l = detect(&env);
        prop_assert!(l.place.local_rank < l.place.local_size.max(1), "{:?}", l);
        let _ = l.shares_node();
        let _ = l.step_key("fallback");
        // What the launcher says stays inside one file name component.
        if let Ok(name) = expand(&pattern, &l.place) {
            let own_slashes = pattern.matches('/').count();
            prop_assert!(!name.contains('\0'), "{:?}", name);
            prop_assert_eq!(name.matches('/').count(), own_slashes, "{:?}", name);
        }
    }

    #[test]
    fn any_tasks_per_node_spec_is_read_without_panicking(spec in value(), node in 0usize..100) {
        let _ = tasks_on_node(&spec, node);
    }
}
