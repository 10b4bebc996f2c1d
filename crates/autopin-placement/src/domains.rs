//! likwid-pin's affinity domains: `N` (the node), `S<i>` (packages), `D<i>` (dies), `C<i>`
//! (last-level-cache groups), `M<i>` (NUMA nodes with CPUs). Each lists its allowed PUs in
//! logical order (threads of a core adjacent), as `likwid-pin -p` prints them.
//!
//! Beyond likwid, the CPUs local to an I/O device: `G<i>` (GPUs, numbered in PCI bus-id
//! order, CUDA's order under `CUDA_DEVICE_ORDER=PCI_BUS_ID`), `P:<busid>` (any PCI device
//! the model lists) and `IF:<name>` (a device by its OS name: `ib0`, `eth0`, `mlx5_0`).

use autopin_topology::{Machine, ObjId, ObjType};
use serde::Serialize;

use crate::view::View;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Domain {
    /// `N`, `S0`, `D1`, `C3`, `M0`, ...
    pub tag: String,
    /// The domain type letter: N, S, D, C, M, G (GPU), P (PCI device) or I (device by name).
    pub kind: char,
    /// Allowed OS CPU ids in logical order (threads of a core adjacent).
    pub cpus: Vec<u32>,
    /// The same CPUs with physical cores first (the numbering `S0:0-3` uses).
    pub cores_first: Vec<u32>,
    #[serde(skip)]
    pub(crate) pus: Vec<ObjId>,
}

/// All domains of the machine, in likwid's order: N, S*, D*, C*, M*.
pub fn domains(m: &Machine) -> Vec<Domain> {
    let v = View::new(m);
    domains_of(&v)
}

pub(crate) fn domains_of(v: &View) -> Vec<Domain> {
    let m = v.m;
    let mut out = Vec::new();
    let mut push = |tag: String, kind: char, pus: Vec<ObjId>| {
        out.push(Domain {
            tag,
            kind,
            cpus: v.oses(&pus),
            cores_first: v.oses(&v.cores_first(&pus)),
            pus,
        });
    };
    push("N".into(), 'N', v.pus.clone());
    let packages = m.objects_of(ObjType::Package);
    let per_object = |objs: &[ObjId]| -> Vec<Vec<ObjId>> {
        if objs.is_empty() {
            vec![v.pus.clone()]
        } else {
            objs.iter().map(|&o| v.pus_in(o)).collect()
        }
    };
    for (i, pus) in per_object(&packages).into_iter().enumerate() {
        push(format!("S{i}"), 'S', pus);
    }
    // Without die objects a package is one die, as likwid reports it.
    let dies = m.objects_of(ObjType::Die);
    let dies = if dies.is_empty() {
        packages.clone()
    } else {
        dies
    };
    for (i, pus) in per_object(&dies).into_iter().enumerate() {
        push(format!("D{i}"), 'D', pus);
    }
    let llcs = m
        .llc_level()
        .map(|l| m.caches_of_level(l))
        .unwrap_or_default();
    let llcs = if llcs.is_empty() {
        packages.clone()
    } else {
        llcs
    };
    for (i, pus) in per_object(&llcs).into_iter().enumerate() {
        push(format!("C{i}"), 'C', pus);
    }
    let nodes: Vec<Vec<ObjId>> = m
        .numa_nodes
        .iter()
        .filter(|n| !n.cpuset.is_empty())
        .map(|n| v.pus_in_set(&n.cpuset))
        .collect();
    let nodes = if nodes.is_empty() {
        vec![v.pus.clone()]
    } else {
        nodes
    };
    for (i, pus) in nodes.into_iter().enumerate() {
        push(format!("M{i}"), 'M', pus);
    }
    let near = |d: &autopin_topology::PciDevice| v.pus_in_set(&d.local_cpus);
    for (i, d) in m.gpus().into_iter().enumerate() {
        push(format!("G{i}"), 'G', near(d));
    }
    for d in &m.io {
        push(format!("P:{}", d.busid), 'P', near(d));
        for os in &d.os_devices {
            push(format!("IF:{}", os.name), 'I', near(d));
        }
    }
    out
}

/// What `likwid-pin -p` prints: every domain and its CPUs in logical order (likwid's
/// domains only; [`device_domains_listing`] has the ones near I/O devices).
pub fn domains_listing(m: &Machine) -> String {
    listing(domains(m).into_iter().filter(|d| "NSDCM".contains(d.kind)))
}

/// The domains near I/O devices (`G<i>`, `P:<busid>`, `IF:<name>`), as [`domains_listing`]
/// prints the others; empty when the machine lists no device.
pub fn device_domains_listing(m: &Machine) -> String {
    listing(domains(m).into_iter().filter(|d| "GPI".contains(d.kind)))
}

fn listing(ds: impl Iterator<Item = Domain>) -> String {
    let mut s = String::new();
    for d in ds {
        s.push_str(&format!("Domain {}:\n", d.tag));
        if d.cpus.is_empty() {
            s.push_str("\t(no allowed CPUs)\n\n");
        } else {
            let list: Vec<String> = d.cpus.iter().map(|c| c.to_string()).collect();
            s.push_str(&format!("\t{}\n\n", list.join(",")));
        }
    }
    s
}

/// "valid domains on this machine: N, S0-S3, D0-D3, C0-C3, M0" for error messages.
pub(crate) fn valid_domains(ds: &[Domain]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for kind in ['N', 'S', 'D', 'C', 'M', 'G'] {
        let of: Vec<&Domain> = ds.iter().filter(|d| d.kind == kind).collect();
        match of.len() {
            0 => {}
            1 => parts.push(of[0].tag.clone()),
            n => parts.push(format!("{kind}0-{kind}{}", n - 1)),
        }
    }
    let empty: Vec<&str> = ds
        .iter()
        .filter(|d| d.cpus.is_empty())
        .map(|d| d.tag.as_str())
        .collect();
    if ds.iter().any(|d| d.kind == 'P') {
        parts.push("P:<PCI bus id>, IF:<device name> (`autopin cpus --devices` lists them)".into());
    }
    let mut s = format!("valid domains on this machine: {}", parts.join(", "));
    if !empty.is_empty() {
        s.push_str(&format!(" ({} have no allowed CPUs)", empty.join(", ")));
    }
    s
}

pub(crate) fn find<'d>(ds: &'d [Domain], tag: &str) -> Option<&'d Domain> {
    ds.iter().find(|d| d.tag.eq_ignore_ascii_case(tag))
}
