//! Sharing-aware strategies and matrix validation.

mod common;

use autopin_placement::{sharing_pinning, PlacementError, SharingMatrix};
use autopin_topology::Machine;
use common::*;
use std::path::Path;

/// Threads (0,3) and (1,2) share a lot; everything else a little.
const TWO_PAIRS: &str = "0 1 1 9\n1 0 9 1\n1 9 0 1\n9 1 1 0\n";

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn run(m: &Machine, s: &str, text: &str) -> Vec<u32> {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "m.txt", text);
    sharing_pinning(m, s, &p).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn core_of(m: &Machine, cpu: u32) -> usize {
    m.ancestor_of_type(m.pu_by_os(cpu).unwrap(), autopin_topology::ObjType::Core)
        .unwrap()
}

fn pkg_of(m: &Machine, cpu: u32) -> usize {
    m.ancestor_of_type(m.pu_by_os(cpu).unwrap(), autopin_topology::ObjType::Package)
        .unwrap()
}

#[test]
fn lp_compact_puts_pairs_on_smt_siblings() {
    let m = synthetic("package:2 l3:1 core:4 pu:2");
    let c = run(&m, "LP_COMPACT", TWO_PAIRS);
    assert_eq!(core_of(&m, c[0]), core_of(&m, c[3]), "{c:?}");
    assert_eq!(core_of(&m, c[1]), core_of(&m, c[2]), "{c:?}");
    assert_ne!(core_of(&m, c[0]), core_of(&m, c[1]));
    assert_eq!(
        pkg_of(&m, c[0]),
        pkg_of(&m, c[1]),
        "compact keeps both pairs in one package"
    );
}

#[test]
fn lp_compact_uses_a_shared_l2_without_smt() {
    let m = synthetic("package:2 l2:2 core:2 pu:1");
    let c = run(&m, "LP_COMPACT", TWO_PAIRS);
    let l2 = |cpu: u32| {
        m.ancestor(m.pu_by_os(cpu).unwrap(), |o| o.is_cache_level(2))
            .unwrap()
    };
    assert_eq!(l2(c[0]), l2(c[3]));
    assert_eq!(l2(c[1]), l2(c[2]));
}

#[test]
fn lp_scatter_spreads_pairs_over_packages() {
    let m = synthetic("package:2 l3:1 core:4 pu:2");
    let c = run(&m, "LP_SCATTER", TWO_PAIRS);
    assert_eq!(core_of(&m, c[0]), core_of(&m, c[3]), "{c:?}");
    assert_eq!(core_of(&m, c[1]), core_of(&m, c[2]), "{c:?}");
    assert_ne!(pkg_of(&m, c[0]), pkg_of(&m, c[1]), "{c:?}");
}

#[test]
fn partitioning_keeps_sharing_groups_together() {
    // Two groups of 4 threads ({0,2,4,6} and {1,3,5,7}) that share heavily inside.
    let mut rows = Vec::new();
    for i in 0..8 {
        let r: Vec<String> = (0..8)
            .map(|j| {
                if i == j {
                    "0"
                } else if i % 2 == j % 2 {
                    "10"
                } else {
                    "1"
                }
                .to_string()
            })
            .collect();
        rows.push(r.join(","));
    }
    let text = rows.join("\n");
    let m = synthetic("package:2 l3:1 core:4 pu:2");
    for s in ["GP", "LPGP", "GPLP"] {
        let c = run(&m, s, &text);
        let p0 = pkg_of(&m, c[0]);
        for t in 0..8 {
            assert_eq!(pkg_of(&m, c[t]) == p0, t % 2 == 0, "{s}: {c:?}");
        }
        let mut d = c.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 8, "{s}: distinct CPUs");
    }
}

#[test]
fn odd_thread_counts_and_zero_matrices() {
    let m = synthetic("package:2 core:2 pu:2");
    let c = run(&m, "LP_COMPACT", "0 5 0\n5 0 0\n0 0 0");
    assert_eq!(core_of(&m, c[0]), core_of(&m, c[1]));
    assert_eq!(c.len(), 3);
    let c = run(&m, "GPLP", "0 0\n0 0");
    assert_eq!(c.len(), 2);
}

#[test]
fn bad_matrices_name_file_and_line() {
    let m = synthetic("package:2 core:2 pu:2");
    let d = tempfile::tempdir().unwrap();
    let cases = [
        ("0 1\n1 0 3\n", 2, "square"),
        ("# comment\n0 x\n1 0\n", 2, "not a number"),
        ("0 -1\n-1 0\n", 1, "≥ 0"),
        ("0 1\n2 0\n", 2, "not symmetric"),
        ("\n\n", 0, "no rows"),
        ("0 inf\ninf 0\n", 1, "finite"),
    ];
    for (text, line, what) in cases {
        let p = write(d.path(), "bad.txt", text);
        let e = sharing_pinning(&m, "LP_COMPACT", &p).unwrap_err();
        match &e {
            PlacementError::Matrix { line: l, .. } => assert_eq!(*l, line, "{text:?}: {e}"),
            other => panic!("{text:?}: {other}"),
        }
        let msg = e.to_string();
        assert!(msg.contains(what) && msg.contains("bad.txt"), "{msg}");
    }
    let e = sharing_pinning(&m, "LP_COMPACT", &d.path().join("missing.txt")).unwrap_err();
    assert!(e.to_string().contains("missing.txt"));
    let big: String = (0..9).map(|_| ["0"; 9].join(" ") + "\n").collect();
    let p = write(d.path(), "big.txt", &big);
    assert!(sharing_pinning(&m, "LP_COMPACT", &p)
        .unwrap_err()
        .to_string()
        .contains("9 threads"));
    assert!(sharing_pinning(&m, "METIS", &p)
        .unwrap_err()
        .to_string()
        .contains("LP_COMPACT"));
    assert_eq!(
        SharingMatrix::parse("1,2\n2,1", Path::new("x"))
            .unwrap()
            .len(),
        2
    );
}

mod properties {
    use super::*;
    use autopin_placement::place_with_matrix;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 150, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever the matrix, every strategy gives each thread its own allowed CPU.
        #[test]
        fn every_thread_gets_its_own_allowed_cpu(
            n in 1usize..9,
            w in proptest::collection::vec(0u32..20, 64),
            mask in 1u32..256,
            s in prop::sample::select(vec!["LP_COMPACT", "LP_SCATTER", "GP", "LPGP", "GPLP"]),
        ) {
            let m = synthetic("package:2 l3:1 core:2 pu:2");
            let allowed: Vec<String> = (0..8).filter(|i| mask & (1 << i) != 0).map(|i: u32| i.to_string()).collect();
            let m = restrict(&m, &allowed.join(","));
            let weights: Vec<Vec<f64>> = (0..n).map(|i| (0..n).map(|j| {
                let (a, b) = (i.min(j), i.max(j));
                if a == b { 0.0 } else { w[a * 8 + b] as f64 }
            }).collect()).collect();
            let r = place_with_matrix(&m, s, &SharingMatrix { weights });
            if n > allowed.len() {
                prop_assert!(r.is_err());
            } else {
                let c = r.unwrap();
                prop_assert_eq!(c.len(), n);
                let mut d = c.clone();
                d.sort();
                d.dedup();
                prop_assert_eq!(d.len(), n, "{} {:?}", s, c);
                let set = m.allowed_cpuset();
                prop_assert!(c.iter().all(|&x| set.contains(x)), "{} {:?}", s, c);
            }
        }
    }
}
