//! Where the latency-inferred structure and the OS's topology disagree.

use crate::infer::Inference;
use autopin_topology::{Machine, ObjType};

/// Relations checked for every pair of measured CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    Core,
    Llc,
    Package,
}

impl Relation {
    fn words(self) -> &'static str {
        match self {
            Relation::Core => "share a core",
            Relation::Llc => "share the last-level cache",
            Relation::Package => "sit in one socket",
        }
    }
}

/// One sentence per disagreement, e.g. "OS says CPUs 0 and 24 share a core; latency says
/// they do not". At most `limit` sentences, then a count of the rest.
pub fn disagreements(inf: &Inference, os: &Machine, limit: usize) -> Vec<String> {
    let os_group = |cpu: u32, rel: Relation| -> Option<usize> {
        let pu = os.pu_by_os(cpu)?;
        match rel {
            Relation::Core => os.ancestor_of_type(pu, ObjType::Core),
            Relation::Package => os.ancestor_of_type(pu, ObjType::Package),
            Relation::Llc => {
                let l = os.llc_level()?;
                os.ancestor(pu, |o| o.cache.as_ref().is_some_and(|c| c.level == l))
            }
        }
    };
    let cores = inf.cores();
    let llc = inf.llc_groups();
    let packages = inf.packages();
    let lat_group = |groups: &Vec<Vec<u32>>, cpu: u32| groups.iter().position(|g| g.contains(&cpu));
    let mut out = Vec::new();
    let mut more = 0;
    for (rel, groups) in [
        (Relation::Core, &cores),
        (Relation::Llc, &llc),
        (Relation::Package, &packages),
    ] {
        for (a_i, &a) in inf.cpus.iter().enumerate() {
            for &b in &inf.cpus[a_i + 1..] {
                let (Some(oa), Some(ob)) = (os_group(a, rel), os_group(b, rel)) else {
                    continue;
                };
                let os_same = oa == ob;
                let lat_same =
                    lat_group(groups, a).is_some() && lat_group(groups, a) == lat_group(groups, b);
                if os_same != lat_same {
                    if out.len() < limit {
                        out.push(format!(
                            "OS says CPUs {a} and {b} {}{}; latency says they {}",
                            if os_same { "" } else { "do not " },
                            rel.words(),
                            if lat_same { "do" } else { "do not" }
                        ));
                    } else {
                        more += 1;
                    }
                }
            }
        }
    }
    if more > 0 {
        out.push(format!("... and {more} more disagreements"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{infer, Hints, LatencyMatrix, Unit};

    #[test]
    fn reports_a_wrong_smt_claim() {
        // Latency: 4 separate cores. OS (synthetic): 2 cores × 2 threads.
        let v = (0..4)
            .map(|i| (0..4).map(|j| if i == j { 0.0 } else { 40.0 }).collect())
            .collect();
        let m = LatencyMatrix {
            cpus: vec![0, 1, 2, 3],
            values: v,
            unit: Unit::Nanoseconds,
            ghz: None,
            source: "t".into(),
        };
        let inf = infer(&m, &Hints::default()).unwrap();
        let os = autopin_topology::source::synthetic::parse("package:1 core:2 pu:2").unwrap();
        let d = disagreements(&inf, &os, 10);
        assert_eq!(
            d,
            vec![
                "OS says CPUs 0 and 1 share a core; latency says they do not",
                "OS says CPUs 2 and 3 share a core; latency says they do not"
            ]
        );
        let same = autopin_topology::source::synthetic::parse("package:1 core:4 pu:1").unwrap();
        assert!(disagreements(&inf, &same, 10).is_empty());
    }
}
