//! Named policies on hand-built machines.

mod common;

use autopin_placement::{policy_pinning, summarize, CpuList, PlacementError};
use autopin_topology::{LatencyTable, Machine, MemoryMeasurement};
use common::*;

fn pol(m: &Machine, p: &str, n: usize) -> String {
    CpuList(policy_pinning(m, p, n).unwrap_or_else(|e| panic!("{p}: {e}"))).to_list()
}

#[test]
fn familiar_policies_on_4_sockets() {
    let m = em64t_4s2c2t();
    assert_eq!(pol(&m, "compact", 4), "0,8,4,12");
    assert_eq!(pol(&m, "close", 2), "0,8");
    assert_eq!(pol(&m, "scatter", 6), "0-5");
    assert_eq!(pol(&m, "scatter", 10), "0-9");
    assert_eq!(pol(&m, "SPREAD", 4), "0-3");
    // scatter's CPUs, numbered compactly.
    assert_eq!(pol(&m, "balanced", 8), "0,4,1,5,2,6,3,7");
    assert_eq!(pol(&m, "balanced", 5), "0,4,1-3");
    assert_eq!(pol(&m, "cores", 9), "0,4,1,5,2,6,3,7-8");
    assert_eq!(pol(&m, "sequential", 5), "0-4");
}

#[test]
fn mctop_policies() {
    let m = em64t_4s2c2t();
    assert_eq!(pol(&m, "CON_HWC", 6), "0,8,4,12,1,9");
    assert_eq!(pol(&m, "CON_CORE_HWC", 6), "0,4,8,12,1,5");
    // Two sockets needed: all their cores first, then their second threads.
    assert_eq!(pol(&m, "CON_CORE", 6), "0,4,1,5,8,12");
    assert_eq!(pol(&m, "BALANCE_HWC", 4), "0-3");
    assert_eq!(pol(&m, "BALANCE_HWC", 8), "0,8,1,9,2,10,3,11");
    assert_eq!(pol(&m, "BALANCE_CORE", 8), "0,4,1,5,2,6,3,7");
    assert_eq!(pol(&m, "RR_HWC", 8), "0-3,8-11");
    assert_eq!(pol(&m, "RR_CORE", 8), "0-7");
    assert_eq!(pol(&m, "con-hwc", 1), "0");
}

#[test]
fn measurements_steer_mctop_socket_order() {
    let mut m = em64t_4s2c2t();
    // Only one NUMA node in this machine: give package 2 the best measured bandwidth.
    m.measurements.memory = (0..4)
        .map(|p| MemoryMeasurement {
            node: 0,
            from_cpu: p,
            latency_ns: None,
            read_gbs_single: Some(5.0),
            write_gbs_single: None,
            read_gbs_all: Some(if p == 2 { 20.0 } else { 10.0 }),
            write_gbs_all: None,
        })
        .collect();
    assert_eq!(pol(&m, "CON_HWC", 4), "2,10,6,14");
    // Without latencies or NUMA distances the next socket is the nearest in numbering.
    assert_eq!(pol(&m, "RR_CORE", 4), "2,1,0,3");
    // RR_SCALE: package 2 saturates with 20/5 = 4 threads, the others with 10/5 = 2, so after
    // two rounds package 2 alone takes threads until it saturates.
    assert_eq!(pol(&m, "RR_SCALE", 10), "2,1,0,3,6,5,4,7,10,14");
    assert_eq!(pol(&m, "RR_CORE", 10), "2,1,0,3,6,5,4,7,10,9");
    // Latency table: package 0 is closest to 2 → after 2 comes 0.
    let cpus: Vec<u32> = (0..16).collect();
    let ns = cpus
        .iter()
        .map(|&a| {
            cpus.iter()
                .map(|&b| {
                    if a % 4 == b % 4 {
                        0.0
                    } else if (a % 4 + b % 4) == 2 {
                        50.0
                    } else {
                        200.0
                    }
                })
                .collect()
        })
        .collect();
    m.measurements.latency = Some(LatencyTable {
        cpus,
        ns,
        source: "test".into(),
    });
    assert_eq!(pol(&m, "CON_HWC", 8), "2,10,6,14,0,8,4,12");
    let s = summarize(&m, &policy_pinning(&m, "RR_CORE", 2).unwrap());
    assert_eq!(s.max_latency_ns, Some(50.0));
    assert_eq!(s.min_bandwidth_gbs, Some(10.0));
    let mut watts = std::collections::BTreeMap::new();
    for (p, w) in [(0u32, 90.0), (1, 60.0), (2, 80.0), (3, 70.0)] {
        watts.insert(p, w);
    }
    m.measurements.power_watts = Some(watts);
    assert_eq!(pol(&m, "POWER", 6), "1,9,5,13,3,11");
}

#[test]
fn policies_that_need_measurements_say_so() {
    let m = em64t_4s2c2t();
    for p in ["RR_SCALE", "POWER"] {
        let e = policy_pinning(&m, p, 2).unwrap_err();
        assert!(matches!(e, PlacementError::NeedsMeasurements { .. }), "{e}");
        assert!(e.to_string().contains("measur"), "{e}");
    }
}

#[test]
fn bad_names_and_counts() {
    let m = em64t_4s2c2t();
    let e = policy_pinning(&m, "compakt", 2).unwrap_err().to_string();
    assert!(
        e.contains("unknown policy 'compakt'") && e.contains("CON_HWC"),
        "{e}"
    );
    assert!(policy_pinning(&m, "none", 2)
        .unwrap_err()
        .to_string()
        .contains("NONE means no pinning"));
    assert!(policy_pinning(&m, "compact", 0)
        .unwrap_err()
        .to_string()
        .contains("at least 1"));
    let e = policy_pinning(&m, "scatter", 17).unwrap_err().to_string();
    assert!(e.contains("17 threads") && e.contains("16 CPUs"), "{e}");
    let r = restrict(&m, "0-3");
    assert_eq!(pol(&r, "compact", 4), "0-3");
    assert!(policy_pinning(&r, "compact", 5).is_err());
}

#[test]
fn summary_counts_what_is_used() {
    let m = em64t_4s2c2t();
    let s = summarize(&m, &policy_pinning(&m, "compact", 4).unwrap());
    assert_eq!(
        (s.cores, s.packages, s.llc_groups, s.max_threads_per_core),
        (2, 1, 1, 2)
    );
    assert_eq!(s.numa_nodes, vec![0]);
    assert_eq!(s.max_latency_ns, None);
    let s = summarize(&m, &policy_pinning(&m, "scatter", 4).unwrap());
    assert_eq!(
        (s.cores, s.packages, s.llc_groups, s.max_threads_per_core),
        (4, 4, 4, 1)
    );
}
