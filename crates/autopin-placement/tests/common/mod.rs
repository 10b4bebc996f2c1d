//! Machines for the tests: synthetic specs, and hand-built copies of real machines whose OS
//! numbering is not depth-first (so tests see the difference between OS and logical order).
#![allow(dead_code)]

use autopin_topology::builder::{Builder, NumaSpec};
use autopin_topology::{CacheAttr, CacheKind, CpuSet, Machine, ObjType, Object};

pub fn synthetic(spec: &str) -> Machine {
    autopin_topology::source::synthetic::parse(spec).expect("valid synthetic spec")
}

fn cache(level: u8, cpus: &[u32]) -> Object {
    let mut o = Object::new(ObjType::Cache, None, cpus.iter().copied().collect());
    o.cache = Some(CacheAttr {
        level,
        kind: CacheKind::Unified,
        size: 1 << 20,
        line_size: 64,
        ways: Some(8),
    });
    o
}

/// The hwloc test machine `16em64t-4s2c2t`: 4 packages × (L3 × 2 × (L2, core × 2 PUs));
/// package i has cores with PUs (i, i+8) and (i+4, i+12), as in its `.console` file.
pub fn em64t_4s2c2t() -> Machine {
    let mut b = Builder::new();
    for p in 0..4u32 {
        let cpus: Vec<u32> = vec![p, p + 4, p + 8, p + 12];
        b.add(Object::new(
            ObjType::Package,
            Some(p),
            cpus.iter().copied().collect(),
        ));
        b.add(cache(3, &cpus));
        for (ci, pair) in [[p, p + 8], [p + 4, p + 12]].iter().enumerate() {
            b.add(cache(2, pair));
            b.add(Object::new(
                ObjType::Core,
                Some(ci as u32),
                pair.iter().copied().collect(),
            ));
            for &pu in pair {
                b.add_pu(pu, true, None);
            }
        }
    }
    b.add_numa(NumaSpec {
        os_index: 0,
        cpuset: (0..16).collect(),
        initiators: CpuSet::new(),
        memory: 0,
        kind: None,
        tier: None,
    });
    b.build()
}

/// A copy of `m` where only `allowed` PUs are allowed.
pub fn restrict(m: &Machine, allowed: &str) -> Machine {
    let set = CpuSet::parse_list(allowed).expect("valid list");
    let mut m = m.clone();
    for o in &mut m.objects {
        if let (Some(pu), Some(os)) = (o.pu.as_mut(), o.os_index) {
            pu.allowed = set.contains(os);
        }
    }
    m
}
