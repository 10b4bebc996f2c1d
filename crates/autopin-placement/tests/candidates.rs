//! Candidate classes: counts that can be checked by hand, determinism, allowed sets, big machines.

mod common;

use autopin_placement::{candidates, count_classes, CandidateOptions};
use autopin_topology::Machine;
use common::*;

fn all(m: &Machine, n: usize) -> Vec<autopin_placement::Pinning> {
    candidates(
        m,
        n,
        &CandidateOptions {
            max: None,
            include_unpinned: false,
        },
    )
}

#[test]
fn clovertown_like_machine() {
    let m = synthetic("package:2 l2:2 core:2 pu:1");
    // n=2: both on one L2, two L2s of one package, two packages.
    let c = all(&m, 2);
    assert_eq!(c.len(), 3, "{c:#?}");
    let descr: Vec<&str> = c.iter().map(|c| c.description.as_str()).collect();
    assert_eq!(
        descr,
        [
            "Package 2, L2 2",
            "Package 1+1, L2 1+1",
            "Package 2, L2 1+1"
        ]
    );
    assert_eq!(c[0].cpus(), vec![0, 1]);
    // n=4: packages (4,0) → 1 way; (3,1) → the 3 fill one L2 and half the other → 1;
    // (2,2) → each package has its 2 on one L2 or split: {same,same}, {same,split},
    // {split,split} → 3. Total 5.
    assert_eq!(all(&m, 4).len(), 5);
    assert_eq!(count_classes(&m, 4), 5.0);
}

#[test]
fn two_socket_smt_machine() {
    let m = synthetic("package:2 l3:1 core:4 pu:2");
    // n=2: SMT siblings, two cores of one package, two packages.
    assert_eq!(all(&m, 2).len(), 3);
    // n=4: a package holding k threads on its 4 two-thread cores has 1, 1, 2, 2, 3 classes
    // for k = 0..4 (k=2: {2},{1,1}; k=3: {2,1},{1,1,1}; k=4: {2,2},{2,1,1},{1,1,1,1}).
    // Splits (4,0) → 3, (3,1) → 2, (2,2) → multisets of two of the 2 classes → 3. Total 8.
    assert_eq!(all(&m, 4).len(), 8);
}

#[test]
fn four_socket_em64t() {
    let m = em64t_4s2c2t();
    // A package has 2 cores × 2 threads: 1, 1, 2, 1, 1 classes for k = 0..4.
    // n=2: (2) → 2 (SMT pair, two cores), (1,1) → 1. Total 3.
    assert_eq!(all(&m, 2).len(), 3);
    // n=4: (4) → 1, (3,1) → 1, (2,2) → 3, (2,1,1) → 2, (1,1,1,1) → 1. Total 8.
    let c = all(&m, 4);
    assert_eq!(c.len(), 8);
    // Most compact first (one package), then the most spread (one thread per package).
    assert_eq!(c[0].cpus(), vec![0, 8, 4, 12]);
    assert_eq!(c[1].cpus(), vec![0, 1, 2, 3], "{:?}", c[1]);
    // Every candidate uses distinct allowed CPUs and 4 threads.
    for cand in &c {
        let mut v = cand.cpus().to_vec();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), 4);
    }
}

#[test]
fn deterministic_and_capped_with_unpinned() {
    let m = em64t_4s2c2t();
    let opts = CandidateOptions {
        max: Some(3),
        include_unpinned: true,
    };
    let a = candidates(&m, 4, &opts);
    let b = candidates(&m, 4, &opts);
    assert_eq!(a, b);
    assert_eq!(a.len(), 4);
    assert!(a[0].is_unpinned() && a[0].cpus().is_empty());
    assert_eq!(a[1..], all(&m, 4)[..3]);
}

#[test]
fn allowed_subset_breaks_symmetry() {
    // Only one thread of core 0 in package 0 is allowed: the packages no longer look alike.
    let m = restrict(&synthetic("package:2 core:2 pu:2"), "0,2-7");
    // n=2 on full machine: 3 classes. Now package 0 = {core(1 PU), core(2 PUs)}, package 1 =
    // {2 cores × 2}: both in pkg0 on two cores (1 way), both on pkg0's SMT core (1), both in
    // pkg1 on one core (1) or two cores (1), split across packages with pkg0's thread on the
    // lone PU or on the full core (2). Total 6.
    let c = all(&m, 2);
    assert_eq!(c.len(), 6, "{c:#?}");
    assert!(c.iter().all(|c| !c.cpus().contains(&1)));
}

#[test]
fn hybrid_kinds_are_not_interchangeable() {
    let mut m = synthetic("package:1 core:4 pu:1");
    // Mark two cores as a different core kind.
    for o in &mut m.objects {
        if let (Some(pu), Some(os)) = (o.pu.as_mut(), o.os_index) {
            pu.kind = Some(usize::from(os >= 2));
        }
    }
    // 2 threads: both on kind 0, both on kind 1, one of each.
    let c = all(&m, 2);
    assert_eq!(c.len(), 3, "{c:#?}");
    let mut d: Vec<&str> = c.iter().map(|c| c.description.as_str()).collect();
    d.sort();
    assert_eq!(
        d,
        ["kinds kind0 1+kind1 1", "kinds kind0 2", "kinds kind1 2"]
    );
}

#[test]
fn big_machine_is_fast_and_capped() {
    let m = synthetic("package:8 numa:1 l3:1 core:8 pu:4");
    assert_eq!(m.pus().len(), 256);
    let t = std::time::Instant::now();
    let c = candidates(
        &m,
        8,
        &CandidateOptions {
            max: Some(16),
            include_unpinned: false,
        },
    );
    assert_eq!(c.len(), 16);
    assert!(t.elapsed().as_secs_f64() < 10.0, "took {:?}", t.elapsed());
    // The first is fully compact (2 cores × 4 threads), the second one thread per package.
    assert_eq!(c[0].cpus(), (0..8).collect::<Vec<u32>>());
    assert_eq!(c[1].description, "Package 8×1, Core 8×1");
}

#[test]
fn more_threads_than_cpus_and_zero() {
    let m = synthetic("package:2 core:2 pu:1");
    let c = all(&m, 6);
    assert_eq!(c.len(), 1);
    // Every CPU once in the list (a short label), threads round robin over it: six threads
    // use all four CPUs, two of them twice.
    assert_eq!(c[0].cpus().len(), 4);
    let per_thread = c[0].cpus_for(6).unwrap();
    let mut uses = std::collections::BTreeMap::new();
    for cpu in &per_thread {
        *uses.entry(*cpu).or_insert(0) += 1;
    }
    assert_eq!(uses.len(), 4, "{per_thread:?}");
    assert_eq!(
        uses.values().filter(|n| **n == 2).count(),
        2,
        "{per_thread:?}"
    );
    assert!(all(&m, 0).is_empty());
}
