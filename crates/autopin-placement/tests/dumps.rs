//! Expressions, domains and candidates on real machines: the hwloc sysfs dumps in
//! tests/data/hwloc-linux (extracted once by the testkit). Missing data is a failure.

use autopin_placement::{candidates, domains, pin_expression, CandidateOptions, CpuList};
use autopin_topology::Machine;

/// Reads a dump the repository carries (extracted once by the testkit).
fn dump(name: &str) -> Option<(Machine, ())> {
    let root = autopin_testkit::hwloc_dump(name);
    let m = autopin_topology::source::sysfs::read(&root).unwrap_or_else(|e| panic!("{name}: {e}"));
    Some((m, ()))
}

/// OS indexes of the PUs in the order lstopo prints them.
fn console_pus(name: &str) -> Vec<u32> {
    let text = autopin_testkit::hwloc_console(name);
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("PU L#"))
        .filter_map(|l| l.split("(P#").nth(1))
        .filter_map(|l| l.split(|c: char| !c.is_ascii_digit()).next())
        .filter_map(|d| d.parse().ok())
        .collect()
}

fn sel(m: &Machine, e: &str) -> String {
    CpuList(pin_expression(m, e).unwrap_or_else(|err| panic!("{e}: {err}"))).to_list()
}

#[test]
fn em64t_4s2c2t_expressions() {
    let Some((m, _d)) = dump("16em64t-4s2c2t") else {
        return;
    };
    assert_eq!(sel(&m, "S1:0-1"), "1,5");
    assert_eq!(sel(&m, "S1:0-3"), "1,5,9,13");
    assert_eq!(sel(&m, "E:N:4:1:2"), "0,4,1,5");
    assert_eq!(sel(&m, "S:scatter:4"), "0-3");
    assert_eq!(sel(&m, "C3:0-1@M0:1"), "3,7,4");
    let e = pin_expression(&m, "S4:0").unwrap_err().to_string();
    assert!(e.contains("N, S0-S3, D0-D3, C0-C3, M0"), "{e}");
}

#[test]
fn em64t_4s2c2t_candidates() {
    let Some((m, _d)) = dump("16em64t-4s2c2t") else {
        return;
    };
    let all = CandidateOptions {
        max: None,
        include_unpinned: false,
    };
    // Per package (2 cores × 2 threads) there are 1,1,2,1,1 classes for 0..4 threads.
    // n=2: same package (SMT pair or two cores) or two packages → 3.
    assert_eq!(candidates(&m, 2, &all).len(), 3);
    // n=4: packages (4) 1 + (3,1) 1 + (2,2) 3 + (2,1,1) 2 + (1,1,1,1) 1 → 8.
    let c = candidates(&m, 4, &all);
    assert_eq!(c.len(), 8);
    assert_eq!(CpuList(c[0].cpus().to_vec()).to_list(), "0,8,4,12");
    assert_eq!(CpuList(c[1].cpus().to_vec()).to_list(), "0-3");
}

#[test]
fn node_domain_follows_lstopo_order_on_every_dump() {
    let names = autopin_testkit::hwloc_dump_names();
    assert!(!names.is_empty());
    for name in names {
        let Some((m, _d)) = dump(&name) else { continue };
        let ds = domains(&m);
        assert_eq!(
            ds[0].cpus,
            console_pus(&name),
            "{name}: domain N vs lstopo PU order"
        );
        // Every domain's cores-first order is a permutation of its CPUs.
        for d in &ds {
            let (mut a, mut b) = (d.cpus.clone(), d.cores_first.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b, "{name} {}", d.tag);
        }
        // Candidates stay fast and use allowed CPUs only.
        let allowed = m.allowed_cpuset();
        for n in [2, 8] {
            let t = std::time::Instant::now();
            let c = candidates(
                &m,
                n,
                &CandidateOptions {
                    max: Some(16),
                    include_unpinned: false,
                },
            );
            assert!(t.elapsed().as_secs() < 5, "{name} n={n}: {:?}", t.elapsed());
            assert!(!c.is_empty(), "{name} n={n}");
            for cand in &c {
                assert!(
                    cand.cpus().iter().all(|&x| allowed.contains(x)),
                    "{name}: {cand:?}"
                );
            }
        }
    }
}

#[test]
fn restricted_cpuset_dump() {
    let Some((m, _d)) = dump("16amd64-8n2c-cpusets") else {
        return;
    };
    let allowed = m.allowed_cpuset();
    assert!(
        allowed.len() < 16,
        "the dump restricts the allowed CPUs: {allowed}"
    );
    let outside = (0..16).find(|&c| !allowed.contains(c) && m.pu_by_os(c).is_some());
    if let Some(c) = outside {
        let e = pin_expression(&m, &c.to_string()).unwrap_err().to_string();
        assert!(e.contains("not in the allowed set"), "{e}");
    }
    let n = pin_expression(&m, "N").unwrap();
    assert_eq!(n.len(), allowed.len());
}

/// A dump whose third package has no L3 and whose fourth NUMA node no package (hwloc's
/// pci-conflicts test machine, 4 × 10 cores): 20 threads in the two packages that have an
/// L3 each, one pair of neighbouring threads never apart from its cache, are among the
/// first twelve candidates, and told apart from 10 + 10 in the odd package and node. With
/// the levels some PUs lack left out of the descriptions, all four ways to fill two nodes
/// read `NUMA 10+10` and the one with both L3s came 206th of 476.
#[test]
fn a_level_some_cpus_lack_still_tells_classes_apart() {
    let Some((m, _d)) = dump("40intel64-4n10c+pci-conflicts") else {
        return;
    };
    let first = candidates(
        &m,
        20,
        &CandidateOptions {
            max: Some(12),
            include_unpinned: false,
        },
    );
    let with_both_l3 = first
        .iter()
        .find(|p| p.description.contains("L3 10+10"))
        .unwrap_or_else(|| {
            let labels: Vec<&str> = first.iter().map(|p| p.description.as_str()).collect();
            panic!("no class with two whole L3s among {labels:#?}")
        });
    assert_eq!(
        CpuList(with_both_l3.cpus().to_vec()).to_list(),
        "0,4,8,12,16,20,24,28,32,36,1,5,9,13,17,21,25,29,33,37"
    );
}
