//! The node split (`split_node`) on real machines: the hwloc sysfs dumps in tests/data. For
//! every number of ranks the shares are disjoint and cover the allowed CPUs; when the ranks
//! divide the packages or NUMA nodes evenly, the shares follow their boundaries (whole
//! domains per rank, or several ranks inside one domain — never a rank across two).

use autopin_placement::split_node;
use autopin_topology::{CpuSet, Machine, ObjType};

fn dump(name: &str) -> Machine {
    let root = autopin_testkit::hwloc_dump(name);
    autopin_topology::source::sysfs::read(&root).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The CPU sets of one kind of domain, restricted to the allowed CPUs, empty ones left out.
fn domains(m: &Machine, kind: &str) -> Vec<CpuSet> {
    let allowed = m.allowed_cpuset();
    let sets: Vec<CpuSet> = match kind {
        "package" => m
            .objects_of(ObjType::Package)
            .into_iter()
            .map(|p| m.obj(p).cpuset.clone())
            .collect(),
        "numa" => m.numa_nodes.iter().map(|n| n.cpuset.clone()).collect(),
        _ => unreachable!(),
    };
    sets.into_iter()
        .map(|s| {
            s.iter()
                .filter(|c| allowed.contains(*c))
                .collect::<CpuSet>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

fn assert_disjoint_cover(name: &str, m: &Machine, ranks: usize, shares: &[CpuSet]) {
    assert_eq!(shares.len(), ranks, "{name}: {ranks} ranks");
    let mut seen = CpuSet::new();
    for s in shares {
        assert!(!s.is_empty(), "{name}, {ranks} ranks: an empty share");
        for c in s.iter() {
            assert!(
                m.allowed_cpuset().contains(c),
                "{name}: CPU {c} not allowed"
            );
            assert!(
                !seen.contains(c),
                "{name}, {ranks} ranks: CPU {c} in two shares"
            );
            seen.insert(c);
        }
    }
    assert_eq!(
        seen,
        m.allowed_cpuset(),
        "{name}, {ranks} ranks: not covered"
    );
}

/// When `ranks` divides the domains (or the domains divide the ranks), every share is made of
/// whole domains, the same number each (or lies inside one domain, the same number of ranks in
/// each). Returns whether the rule applied.
fn assert_follows(
    name: &str,
    kind: &str,
    doms: &[CpuSet],
    ranks: usize,
    shares: &[CpuSet],
) -> bool {
    let c = doms.len();
    let equal = doms.iter().all(|d| d.len() == doms[0].len());
    if c < 2 || !equal {
        return false;
    }
    let ctx = |s: &CpuSet| format!("{name}, {ranks} ranks, {kind}s {doms:?}: share {s}");
    if ranks <= c && c.is_multiple_of(ranks) {
        for s in shares {
            let inside: Vec<&CpuSet> = doms
                .iter()
                .filter(|d| d.iter().any(|x| s.contains(x)))
                .collect();
            assert_eq!(inside.len(), c / ranks, "{}", ctx(s));
            for d in inside {
                assert!(
                    d.iter().all(|x| s.contains(x)),
                    "{} cuts {kind} {d}",
                    ctx(s)
                );
            }
        }
        true
    } else if ranks > c && ranks.is_multiple_of(c) {
        for d in doms {
            let within = shares
                .iter()
                .filter(|s| s.iter().all(|x| d.contains(x)))
                .count();
            assert_eq!(
                within,
                ranks / c,
                "{name}, {ranks} ranks: {kind} {d} holds {within} shares"
            );
        }
        for s in shares {
            assert!(
                doms.iter().any(|d| s.iter().all(|x| d.contains(x))),
                "{} spans {kind}s",
                ctx(s)
            );
        }
        true
    } else {
        false
    }
}

/// Splits `name` for every rank count up to its PU count and returns, per domain kind, the
/// rank counts where the boundary rule was checked.
fn check(name: &str) -> (usize, Vec<usize>, Vec<usize>) {
    let m = dump(name);
    let pus = m.allowed_cpuset().len();
    let packages = domains(&m, "package");
    let numa = domains(&m, "numa");
    let (mut by_pkg, mut by_numa) = (Vec::new(), Vec::new());
    for ranks in 1..=pus {
        let shares = split_node(&m, ranks).unwrap_or_else(|e| panic!("{name}, {ranks}: {e}"));
        assert_disjoint_cover(name, &m, ranks, &shares);
        if assert_follows(name, "package", &packages, ranks, &shares) {
            by_pkg.push(ranks);
        }
        if assert_follows(name, "NUMA node", &numa, ranks, &shares) {
            by_numa.push(ranks);
        }
    }
    assert!(
        split_node(&m, pus + 1).is_err(),
        "{name}: more ranks than CPUs"
    );
    (pus, by_pkg, by_numa)
}

#[test]
fn em64t_4_packages_split_along_packages() {
    let (pus, by_pkg, by_numa) = check("16em64t-4s2c2t");
    assert_eq!(pus, 16);
    // 4 packages of 4 PUs: 1, 2, 4 ranks take whole packages; 8, 12, 16 stay inside one.
    assert_eq!(by_pkg, [1, 2, 4, 8, 12, 16]);
    assert!(by_numa.is_empty(), "one NUMA node: {by_numa:?}");
}

#[test]
fn fake_64_4_numa_nodes_8_packages_split_along_both() {
    let (pus, by_pkg, by_numa) = check("64fake-4n2s2ca2c2t");
    assert_eq!(pus, 64);
    assert_eq!(by_pkg, [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]);
    assert_eq!(
        by_numa,
        [1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64]
    );
}

#[test]
fn ppc_256_8_numa_nodes_split_along_nodes() {
    let (pus, by_pkg, by_numa) = check("256ppc-8n8s4t");
    assert_eq!(pus, 256);
    // 8 NUMA nodes of 32 PUs, each holding 8 packages of 4 PUs.
    let numa: Vec<usize> = [1, 2, 4].into_iter().chain((8..=256).step_by(8)).collect();
    assert_eq!(by_numa, numa);
    assert_eq!(by_pkg, [1, 2, 4, 8, 16, 32, 64, 128, 192, 256]);
}
