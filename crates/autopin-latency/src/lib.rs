//! autopin-latency: measuring the machine (core-to-core latency, memory latency and
//! bandwidth) and inferring its structure from latencies, as MCTOP does, into the shared
//! [`Machine`] model.
//!
//! - [`read`]: core-to-core-latency CSV matrices and MCTOP `.mct` files.
//! - [`infer::infer`]: levels, roles (SMT, caches, sockets), confidence.
//! - [`build::to_machine`]: the inferred tree as a [`Machine`].
//! - [`measure`]: live measurements (Linux).

pub mod build;
pub mod cluster;
pub mod compare;
pub mod error;
pub mod heatmap;
pub mod infer;
pub mod matrix;
pub mod measure;
pub mod read;

pub use error::{LatencyError, Result, SizeError};
pub use infer::{cross_check, infer, Hints, Inference, Level, NamedBy, Role};
pub use matrix::{LatencyMatrix, Unit};

use autopin_topology::{Machine, MemoryMeasurement};
use std::path::Path;

/// Infers a machine from a latency file (core-to-core-latency CSV or MCTOP `.mct`).
pub fn load_machine(path: &Path) -> Result<Machine> {
    load(path).map(|(m, _)| m)
}

/// Like [`load_machine`], also returning the inference (levels, confidence, notes).
pub fn load(path: &Path) -> Result<(Machine, Inference)> {
    load_with_os(path, None)
}

/// Like [`load`], with the OS topology of the machine the matrix was measured on, when
/// known (a dump or XML given beside the matrix, or the machine autopin runs on): each
/// level the OS groups the same way is named by it ([`cross_check`]; what matches nothing
/// is said in the inference's notes), and NUMA nodes are the OS's, unless the file
/// measured memory locality itself.
pub fn load_with_os(path: &Path, os: Option<&Machine>) -> Result<(Machine, Inference)> {
    let (matrix, mut inf, mut extras) = match read::read_file(path)? {
        read::LatencyFile::C2c(matrix) => {
            let inf = infer(&matrix, &Hints::default())?;
            (matrix, inf, build::Extras::default())
        }
        read::LatencyFile::Mct(f) => {
            let hints = Hints {
                smt: Some((f.smt, format!("the {} header", path.display()))),
            };
            let inf = infer(&f.matrix, &hints)?;
            let extras = mct_extras(&f, &inf);
            (f.matrix, inf, extras)
        }
    };
    if let Some(os) = os {
        cross_check(&mut inf, os);
        if extras.numa_of_cpu.is_none() {
            let map: Vec<(u32, u32)> = inf
                .cpus
                .iter()
                .filter_map(|&c| {
                    let n = os.numa_nodes.iter().find(|n| n.cpuset.contains(c))?;
                    Some((c, n.os_index))
                })
                .collect();
            if map.len() == inf.cpus.len() {
                extras.numa_of_cpu = Some(map);
            }
        }
    }
    let m = build::to_machine(&inf, &matrix, &extras);
    Ok((m, inf))
}

/// NUMA locality, cache sizes and bandwidths from the optional sections of an `.mct` file.
fn mct_extras(f: &read::mct::MctFile, inf: &Inference) -> build::Extras {
    let mut extras = build::Extras {
        nodes: Some(f.nodes),
        ..Default::default()
    };
    extras.cache_sizes = f.caches.iter().map(|&(l, _, kb)| (l, kb * 1024)).collect();
    // Each context's local node is the one it reaches fastest; contexts the file did not
    // measure take the node of a measured context in the same package.
    let local: Vec<Option<u32>> = f
        .mem_latency
        .iter()
        .map(|row| {
            row.iter()
                .enumerate()
                .filter_map(|(n, v)| v.map(|v| (n, v)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(n, _)| n as u32)
        })
        .collect();
    if local.iter().any(|l| l.is_some()) {
        let packages = inf.packages();
        let map = (0..f.hwcs as u32)
            .map(|c| {
                let node = local[c as usize].or_else(|| {
                    let p = packages.iter().find(|p| p.contains(&c))?;
                    p.iter().find_map(|&o| local[o as usize])
                });
                (c, node.unwrap_or(0))
            })
            .collect();
        extras.numa_of_cpu = Some(map);
    }
    // Bandwidth rows are `socket node`; socket i is measured from its first context.
    let first_of_node = |s: usize| -> u32 {
        extras
            .numa_of_cpu
            .as_ref()
            .and_then(|m| m.iter().find(|(_, n)| *n as usize == s).map(|(c, _)| *c))
            .unwrap_or(0)
    };
    let mut memory: Vec<MemoryMeasurement> = Vec::new();
    for bw in &f.bandwidth {
        let from = first_of_node(bw.from_socket);
        let idx = match memory
            .iter()
            .position(|mm| mm.node == bw.node as u32 && mm.from_cpu == from)
        {
            Some(i) => i,
            None => {
                // MCTOP gives memory latency in cycles; the model wants ns, so it stays out.
                memory.push(MemoryMeasurement {
                    node: bw.node as u32,
                    from_cpu: from,
                    latency_ns: None,
                    read_gbs_single: None,
                    write_gbs_single: None,
                    read_gbs_all: None,
                    write_gbs_all: None,
                });
                memory.len() - 1
            }
        };
        let mm = &mut memory[idx];
        let slot = match (bw.single, bw.write) {
            (true, false) => &mut mm.read_gbs_single,
            (true, true) => &mut mm.write_gbs_single,
            (false, false) => &mut mm.read_gbs_all,
            (false, true) => &mut mm.write_gbs_all,
        };
        *slot = Some(bw.gbs);
    }
    extras.memory = memory;
    extras
}
