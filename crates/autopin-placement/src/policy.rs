//! Named placement policies for n threads: the familiar ones (compact, scatter, balanced,
//! cores, sequential) and the MCTOP-PLACE set. "Socket" in MCTOP's terms is a package here.

use autopin_topology::{Machine, ObjId, ObjType};

use crate::error::PlacementError;
use crate::view::{interleave, View};

/// Every accepted name (case does not matter; `-` and `_` are the same).
pub const POLICY_NAMES: &str =
    "compact (close), scatter (spread), balanced, cores, sequential, CON_HWC, CON_CORE_HWC, \
CON_CORE, BALANCE_HWC, BALANCE_CORE, RR_HWC, RR_CORE, RR_SCALE, POWER";

pub fn policy_pinning(m: &Machine, policy: &str, n: usize) -> Result<Vec<u32>, PlacementError> {
    let v = View::new(m);
    let key = policy.trim().to_ascii_uppercase().replace('-', "_");
    // Check the name before the count, so a typo is reported as such.
    let known = [
        "COMPACT",
        "CLOSE",
        "SCATTER",
        "SPREAD",
        "BALANCED",
        "CORES",
        "SEQUENTIAL",
        "CON_HWC",
        "CON_CORE_HWC",
        "CON_CORE",
        "BALANCE_HWC",
        "BALANCE_CORE",
        "RR_HWC",
        "RR_CORE",
        "RR_SCALE",
        "POWER",
    ];
    if !known.contains(&key.as_str()) {
        let hint = if key == "NONE" {
            " (NONE means no pinning: run without a policy)"
        } else {
            ""
        };
        return Err(PlacementError::UnknownPolicy {
            name: policy.to_string(),
            valid: format!("{POLICY_NAMES}{hint}"),
        });
    }
    check_count(&v, n)?;
    let order: Vec<ObjId> = match key.as_str() {
        "COMPACT" | "CLOSE" => v.pus.clone(),
        "SCATTER" | "SPREAD" => v.scatter_order(0),
        "BALANCED" => {
            // The CPUs scatter would use, numbered compactly so neighbouring threads share.
            let chosen: Vec<ObjId> = v.scatter_order(0).into_iter().take(n).collect();
            v.pus
                .iter()
                .copied()
                .filter(|p| chosen.contains(p))
                .collect()
        }
        "CORES" => v.cores_first(&v.pus),
        "SEQUENTIAL" => {
            let mut p = v.pus.clone();
            p.sort_by_key(|&id| v.os(id));
            p
        }
        "CON_HWC" => sockets(&v, None)?
            .iter()
            .flat_map(|&s| v.pus_in(s))
            .collect(),
        "CON_CORE_HWC" => sockets(&v, None)?
            .iter()
            .flat_map(|&s| v.cores_first(&v.pus_in(s)))
            .collect(),
        "CON_CORE" => {
            // Only as many sockets as the threads need, but all their cores before any
            // second hardware thread.
            let order = sockets(&v, None)?;
            let mut used = Vec::new();
            let mut room = 0;
            for s in order {
                if room >= n {
                    break;
                }
                room += v.pus_in(s).len();
                used.push(s);
            }
            let pus: Vec<ObjId> = used.iter().flat_map(|&s| v.pus_in(s)).collect();
            v.cores_first(&pus)
        }
        "BALANCE_HWC" | "BALANCE_CORE" => {
            let order = sockets(&v, None)?;
            let lists: Vec<Vec<ObjId>> = order
                .iter()
                .map(|&s| {
                    if key == "BALANCE_HWC" {
                        v.pus_in(s)
                    } else {
                        v.cores_first(&v.pus_in(s))
                    }
                })
                .collect();
            let caps: Vec<usize> = lists.iter().map(|l| l.len()).collect();
            let quotas = crate::expr::even_quotas(n, &caps);
            lists
                .iter()
                .zip(quotas)
                .flat_map(|(l, q)| l.iter().copied().take(q).collect::<Vec<_>>())
                .collect()
        }
        "RR_HWC" | "RR_CORE" => {
            let order = sockets(&v, None)?;
            let lists: Vec<Vec<ObjId>> = order
                .iter()
                .map(|&s| {
                    if key == "RR_HWC" {
                        v.pus_in(s)
                    } else {
                        v.cores_first(&v.pus_in(s))
                    }
                })
                .collect();
            interleave(&lists)
        }
        "RR_SCALE" => rr_scale(&v, n)?,
        "POWER" => power(&v)?,
        _ => unreachable!("names were checked above"),
    };
    Ok(v.oses(&order[..n.min(order.len())]))
}

fn check_count(v: &View, n: usize) -> Result<(), PlacementError> {
    if n == 0 {
        return Err(PlacementError::threads(
            "the number of threads must be at least 1",
        ));
    }
    if n > v.pus.len() {
        return Err(PlacementError::threads(format!(
            "{n} threads requested but only {} CPUs are allowed ({}); a policy places at most one thread per CPU",
            v.pus.len(),
            v.allowed
        )));
    }
    Ok(())
}

/// Measured read bandwidth of a package to its local memory (all threads if measured, else
/// one thread), GB/s.
fn local_bandwidth(v: &View, pkg: ObjId, all: bool) -> Option<f64> {
    let m = v.m;
    let local = m.numa_of(v.pus_in(pkg).first().copied()?);
    let set = &m.obj(pkg).cpuset;
    m.measurements
        .memory
        .iter()
        .filter(|r| local.contains(&r.node) && set.contains(r.from_cpu))
        .filter_map(|r| {
            if all {
                r.read_gbs_all
            } else {
                r.read_gbs_single
            }
        })
        .reduce(f64::max)
}

/// How far apart two packages are: measured mean latency between their CPUs if the model has
/// a latency table, else the NUMA distance between their local nodes, else their distance in
/// logical numbering.
fn package_distance(v: &View, a: ObjId, b: ObjId) -> f64 {
    let m = v.m;
    if let Some(t) = &m.measurements.latency {
        let (pa, pb) = (v.oses(&v.pus_in(a)), v.oses(&v.pus_in(b)));
        let vals: Vec<f64> = pa
            .iter()
            .flat_map(|&x| pb.iter().filter_map(move |&y| t.get(x, y)))
            .collect();
        if !vals.is_empty() {
            return vals.iter().sum::<f64>() / vals.len() as f64;
        }
    }
    if let Some(d) = &m.numa_distances {
        let node = |p: ObjId| {
            let os = *m
                .numa_of(v.pus_in(p).first().copied().unwrap_or(p))
                .first()?;
            m.numa_nodes.iter().position(|n| n.os_index == os)
        };
        if let (Some(i), Some(j)) = (node(a), node(b)) {
            return d[i][j] as f64;
        }
    }
    (m.obj(a).logical_index as f64 - m.obj(b).logical_index as f64).abs()
}

/// MCTOP's socket order: start at the package with the highest local memory bandwidth (the
/// first one when nothing was measured), then always go to the closest remaining neighbour.
fn sockets(v: &View, start: Option<ObjId>) -> Result<Vec<ObjId>, PlacementError> {
    let mut left = v.packages();
    let first = start.unwrap_or_else(|| {
        let mut best = left[0];
        let mut best_bw = f64::NEG_INFINITY;
        for &p in &left {
            if let Some(bw) = local_bandwidth(v, p, true).or_else(|| local_bandwidth(v, p, false)) {
                if bw > best_bw {
                    best_bw = bw;
                    best = p;
                }
            }
        }
        best
    });
    left.retain(|&p| p != first);
    let mut out = vec![first];
    while !left.is_empty() {
        let last = out[out.len() - 1];
        let (i, _) = left
            .iter()
            .enumerate()
            .map(|(i, &p)| (i, package_distance(v, last, p)))
            .fold(
                (0, f64::INFINITY),
                |acc, x| if x.1 < acc.1 { x } else { acc },
            );
        out.push(left.remove(i));
    }
    Ok(out)
}

/// RR_CORE, but each package only gets as many threads as it takes to saturate its local
/// memory bandwidth (all-thread bandwidth / one-thread bandwidth, rounded up); threads beyond
/// the saturation points continue round robin.
fn rr_scale(v: &View, n: usize) -> Result<Vec<ObjId>, PlacementError> {
    let order = sockets(v, None)?;
    let mut caps = Vec::new();
    for &s in &order {
        let (Some(all), Some(one)) = (local_bandwidth(v, s, true), local_bandwidth(v, s, false))
        else {
            return Err(PlacementError::NeedsMeasurements {
                policy: "RR_SCALE".into(),
                message: format!(
                    "needs measured local memory bandwidth (one thread and all threads) for every package; package {} has none in this machine model (run `autopin measure memory` or load a model with measurements)",
                    v.m.obj(s).logical_index
                ),
            });
        };
        caps.push(if one > 0.0 {
            (all / one).ceil().max(1.0) as usize
        } else {
            1
        });
    }
    let lists: Vec<Vec<ObjId>> = order.iter().map(|&s| v.cores_first(&v.pus_in(s))).collect();
    let mut taken = vec![0usize; lists.len()];
    let mut out = Vec::with_capacity(n);
    // First up to each package's saturation point, then the rest round robin.
    for phase in 0..2 {
        loop {
            let mut progressed = false;
            for (i, l) in lists.iter().enumerate() {
                if out.len() == n {
                    return Ok(out);
                }
                if (phase == 0 && taken[i] >= caps[i]) || taken[i] >= l.len() {
                    continue;
                }
                out.push(l[taken[i]]);
                taken[i] += 1;
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
    }
    Ok(out)
}

/// Lowest estimated power: fill the package with the lowest measured power first, and inside
/// it use both hardware threads of a core before waking another core (a second hardware
/// thread costs less than a new core); only then the next cheapest package.
fn power(v: &View) -> Result<Vec<ObjId>, PlacementError> {
    let Some(watts) = &v.m.measurements.power_watts else {
        return Err(PlacementError::NeedsMeasurements {
            policy: "POWER".into(),
            message: "needs measured power per package (Machine.measurements.power_watts); this machine model has none (measure with RAPL or load a model with power data)".into(),
        });
    };
    let mut pkgs = v.packages();
    let w = |p: ObjId| {
        let os = if v.m.obj(p).ty == ObjType::Package {
            v.m.obj(p).os_index
        } else {
            Some(0)
        };
        os.and_then(|o| watts.get(&o).copied())
    };
    if let Some(&p) = pkgs.iter().find(|&&p| w(p).is_none()) {
        return Err(PlacementError::NeedsMeasurements {
            policy: "POWER".into(),
            message: format!(
                "no power measurement for package P#{}",
                v.m.obj(p).os_index.unwrap_or(0)
            ),
        });
    }
    pkgs.sort_by(|&a, &b| w(a).unwrap_or(0.0).total_cmp(&w(b).unwrap_or(0.0)));
    Ok(pkgs.iter().flat_map(|&p| v.pus_in(p)).collect())
}
