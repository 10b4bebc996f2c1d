//! Property tests: the expression parser never panics and its answers are always allowed
//! CPUs; lists round-trip; policies and candidates keep their invariants on random machines.
//! The case count follows PROPTEST_CASES (default below) for longer fuzzing runs.

mod common;

use autopin_placement::{
    candidates, count_classes, pin_expression, policy_pinning, CandidateOptions, CpuList,
    PlacementError,
};
use common::*;
use proptest::prelude::*;

fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Pieces that make near-valid expressions more often than random bytes would.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("N".to_string()),
        (0u32..6).prop_map(|i| format!("S{i}")),
        (0u32..6).prop_map(|i| format!("C{i}")),
        (0u32..3).prop_map(|i| format!("M{i}")),
        (0u32..6).prop_map(|i| format!("D{i}")),
        Just("E".to_string()),
        Just("L".to_string()),
        Just("scatter".to_string()),
        Just("balanced".to_string()),
        Just("cbalanced".to_string()),
        (0u32..40).prop_map(|i| i.to_string()),
        (0u32..20, 0u32..20).prop_map(|(a, b)| format!("{a}-{b}")),
        Just(":".to_string()),
        Just(",".to_string()),
        Just("@".to_string()),
        Just("-".to_string()),
        "[ -~]{0,2}",
        "\\PC{0,2}",
    ]
}

proptest! {
    #![proptest_config(cases(600))]

    #[test]
    fn expressions_never_panic(parts in proptest::collection::vec(token(), 0..10), restricted in any::<bool>()) {
        let m = em64t_4s2c2t();
        let m = if restricted { restrict(&m, "0-5,9,12-15") } else { m };
        let expr: String = parts.concat();
        match pin_expression(&m, &expr) {
            Ok(cpus) => {
                let allowed = m.allowed_cpuset();
                prop_assert!(cpus.iter().all(|&c| allowed.contains(c)), "{expr} → {cpus:?}");
                prop_assert!(!cpus.is_empty(), "{expr} selected nothing");
            }
            Err(PlacementError::Expr { position, .. }) => {
                prop_assert!(position <= expr.len(), "{expr}: position {position}");
                prop_assert!(expr.is_char_boundary(position), "{expr}: position {position}");
            }
            Err(other) => prop_assert!(false, "{expr}: unexpected error kind {other}"),
        }
    }

    #[test]
    fn random_bytes_never_panic(expr in "\\PC{0,40}") {
        let m = synthetic("package:2 l3:1 core:2 pu:2");
        let _ = pin_expression(&m, &expr).map_err(|e| e.to_string());
    }

    #[test]
    fn cpu_lists_round_trip(v in proptest::collection::vec(0u32..300, 1..40)) {
        let l = CpuList(v.clone());
        prop_assert_eq!(CpuList::parse(&l.to_list()).unwrap().0, v);
    }

    #[test]
    fn physical_lists_select_what_they_say(v in proptest::collection::vec(0u32..16, 1..20)) {
        let m = em64t_4s2c2t();
        let text = CpuList(v.clone()).to_list();
        prop_assert_eq!(pin_expression(&m, &text).unwrap(), v);
    }
}

proptest! {
    #![proptest_config(cases(100))]

    #[test]
    fn policies_and_candidates_keep_invariants(
        pk in 1u32..4, cores in 1u32..4, smt in 1u32..3, n in 1usize..7, mask in any::<u32>(),
        policy in prop::sample::select(vec!["compact", "scatter", "balanced", "cores", "sequential", "CON_HWC", "CON_CORE_HWC", "CON_CORE", "BALANCE_HWC", "BALANCE_CORE", "RR_HWC", "RR_CORE"]),
    ) {
        let m = synthetic(&format!("package:{pk} l2:1 core:{cores} pu:{smt}"));
        let total = pk * cores * smt;
        let allowed: Vec<String> = (0..total).filter(|i| mask & (1u32 << i) != 0 || *i == 0).map(|i| i.to_string()).collect();
        let m = restrict(&m, &allowed.join(","));
        let allowed = m.allowed_cpuset();
        match policy_pinning(&m, policy, n) {
            Ok(c) => {
                prop_assert_eq!(c.len(), n);
                let mut d = c.clone();
                d.sort();
                d.dedup();
                prop_assert_eq!(d.len(), n, "{} gave repeated CPUs {:?}", policy, c);
                prop_assert!(c.iter().all(|&x| allowed.contains(x)));
            }
            Err(e) => prop_assert!(n > allowed.len(), "{policy} n={n}: {e}"),
        }
        let cands = candidates(&m, n, &CandidateOptions { max: None, include_unpinned: false });
        if n <= allowed.len() {
            prop_assert_eq!(cands.len() as f64, count_classes(&m, n));
            let mut seen = std::collections::HashSet::new();
            for c in &cands {
                let mut d = c.cpus().to_vec();
                d.sort();
                d.dedup();
                prop_assert_eq!(d.len(), n);
                prop_assert!(c.cpus().iter().all(|&x| allowed.contains(x)));
                prop_assert!(seen.insert(d), "two classes share a representative");
            }
        }
    }
}
