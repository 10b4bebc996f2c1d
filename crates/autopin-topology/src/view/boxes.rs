//! ASCII boxes in the manner of `likwid-topology -g`: socket by socket, one box per core with
//! its PU OS indexes, then one row per cache level with boxes spanning the cores that share
//! each cache. Wide sockets wrap onto several rows of cores.

use crate::machine::PciChild;
use crate::model::*;
use std::fmt::Write;

/// Widest a socket box may get before its cores wrap onto another row.
const MAX_WIDTH: usize = 120;
/// Mark after a PU that is outside our affinity mask / cgroup cpuset.
const DISALLOWED_MARK: char = '*';

pub fn render(m: &Machine) -> String {
    let mut sockets = m.objects_of(ObjType::Package);
    if sockets.is_empty() {
        sockets.push(0); // no package information: the whole machine is one socket
    }
    let levels = cache_levels(m);
    // One cell width for the whole machine, as likwid does, so sockets line up.
    let all_cores = cores_under(m, 0);
    let cell = all_cores
        .iter()
        .map(|&c| core_text(m, c).len())
        .max()
        .unwrap_or(1)
        .max(5)
        + 2;

    let mut out = String::new();
    for &s in &sockets {
        let _ = writeln!(out, "{}", socket_title(m, s));
        let cores = cores_under(m, s);
        // Each core and cache line: one column of `cell` chars plus borders, one space apart.
        let per_row = cores_per_row(m, &cores, cell);
        let inner = per_row.min(cores.len()).max(1) * (cell + 3) - 1;
        let border = format!("+{}+", "-".repeat(inner + 2));
        let _ = writeln!(out, "{border}");
        for row in cores.chunks(per_row.max(1)) {
            let mut lines = core_row(m, row, cell);
            for &level in &levels {
                lines.extend(cache_row(m, row, &cores, level, cell));
            }
            for l in lines {
                let _ = writeln!(out, "| {l:<inner$} |");
            }
        }
        let _ = writeln!(out, "{border}");
    }
    // Nodes attached above the sockets (CPU-less memory local to several sockets or to
    // none in particular) belong to no socket box: list them so no memory goes unshown.
    if sockets != [0] {
        let outside: Vec<String> = m
            .numa_nodes
            .iter()
            .filter(|n| !sockets.iter().any(|&s| is_within(m, n.attached_to, s)))
            .map(|n| node_text(m, n))
            .collect();
        if !outside.is_empty() {
            let _ = writeln!(
                out,
                "NUMA node{} local to no single socket: {}",
                if outside.len() > 1 { "s" } else { "" },
                outside.join(", ")
            );
        }
    }
    // I/O devices under the socket (or the machine) their CPUs are local to; where the
    // machine keeps the PCI tree (`--whole-io`), the bridges too, with what is behind each
    // indented below it.
    for id in m.dfs_order() {
        let at = sockets
            .iter()
            .find(|&&s| s != 0 && is_within(m, id, s))
            .map_or("the machine".to_string(), |&s| {
                format!("socket {}", m.obj(s).logical_index)
            });
        io_lines(m, None, id, 0, &at, &mut out);
    }
    for l in legend(m, &levels) {
        let _ = writeln!(out, "{l}");
    }
    out
}

/// The bridges and devices below a bridge (or, with `None`, hanging from the CPU-side
/// object `id`), one line each: `PCI 0000:04:00.0 (Ethernet 8086:10c9) Net "eth0" near socket 0`.
fn io_lines(
    m: &Machine,
    bridge: Option<usize>,
    id: ObjId,
    depth: usize,
    at: &str,
    out: &mut String,
) {
    let indent = "  ".repeat(depth);
    for c in m.pci_children(bridge, id) {
        match c {
            PciChild::Bridge(i, b) => {
                let _ = writeln!(out, "{indent}{} near {at}", b.label());
                io_lines(m, Some(i), id, depth + 1, at, out);
            }
            PciChild::Device(d) => {
                let _ = writeln!(out, "{indent}{} near {at}", d.label_with_os_devices());
            }
        }
    }
}

/// `Socket 0:` plus the OS index when it differs, and the NUMA nodes local to it.
fn socket_title(m: &Machine, s: ObjId) -> String {
    let o = m.obj(s);
    let mut t = if o.ty == ObjType::Machine {
        "Machine (no package information):".to_string()
    } else {
        match o.os_index {
            Some(os) if os != o.logical_index => format!("Socket {} (P#{os}):", o.logical_index),
            _ => format!("Socket {}:", o.logical_index),
        }
    };
    let nodes: Vec<String> = m
        .numa_nodes
        .iter()
        .filter(|n| s == 0 || is_within(m, n.attached_to, s))
        .map(|n| node_text(m, n))
        .collect();
    if !nodes.is_empty() {
        let _ = write!(
            t,
            " NUMA node{} {}",
            if nodes.len() > 1 { "s" } else { "" },
            nodes.join(", ")
        );
    }
    t
}

/// `3 (16 GB)`, with the kind and memory-side caches when known: `8 (GPUMemory, no CPUs, 16 GB)`,
/// `0 (15GiB, behind MemCache L#1 (4096MiB) in MemCache L#0 (16GiB))`.
fn node_text(m: &Machine, n: &NumaNode) -> String {
    let mut tags: Vec<String> = n.kind.iter().cloned().collect();
    if n.cpuset.is_empty() {
        tags.push("no CPUs".into());
    }
    if n.memory > 0 {
        tags.push(human(n.memory));
    }
    let mut caches = Vec::new();
    let mut at = n.mem_cache;
    while let Some(c) = at.and_then(|c| m.mem_caches.get(c)) {
        caches.push(c.label());
        at = c.parent;
    }
    if !caches.is_empty() {
        tags.push(format!("behind {}", caches.join(" in ")));
    }
    if tags.is_empty() {
        n.os_index.to_string()
    } else {
        format!("{} ({})", n.os_index, tags.join(", "))
    }
}

/// Whether `id` is `top` or inside it.
fn is_within(m: &Machine, id: ObjId, top: ObjId) -> bool {
    let mut at = Some(id);
    while let Some(a) = at {
        if a == top {
            return true;
        }
        at = m.obj(a).parent;
    }
    false
}

/// Cores (or PUs where the model has no cores) inside an object, in logical order: a walk
/// of its subtree, since children are kept in CPU order (linear, which matters at 8k PUs).
fn cores_under(m: &Machine, id: ObjId) -> Vec<ObjId> {
    let mut out = Vec::new();
    let mut stack = vec![id];
    while let Some(at) = stack.pop() {
        let o = m.obj(at);
        // A PU that has no core above it stands for a core of its own.
        if o.ty == ObjType::Core
            || (o.ty == ObjType::Pu && m.ancestor_of_type(at, ObjType::Core).is_none())
        {
            out.push(at);
            continue;
        }
        stack.extend(o.children.iter().rev());
    }
    out
}

/// PU OS indexes of a core, `*` after the disallowed ones.
fn core_text(m: &Machine, core: ObjId) -> String {
    pus_of(m, core)
        .iter()
        .map(|&p| {
            let o = m.obj(p);
            let mark = if o.pu.as_ref().is_some_and(|a| !a.allowed) {
                DISALLOWED_MARK.to_string()
            } else {
                String::new()
            };
            format!("{}{mark}", o.os_index.unwrap_or(0))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// PUs inside an object, in logical order.
fn pus_of(m: &Machine, id: ObjId) -> Vec<ObjId> {
    let mut out = Vec::new();
    let mut stack = vec![id];
    while let Some(at) = stack.pop() {
        if m.obj(at).ty == ObjType::Pu {
            out.push(at);
        }
        stack.extend(m.obj(at).children.iter().rev());
    }
    out
}

/// Data and unified cache levels present, lowest first (instruction caches are left out, as
/// likwid does).
fn cache_levels(m: &Machine) -> Vec<u8> {
    let mut v: Vec<u8> = m
        .objects
        .iter()
        .filter_map(|o| o.cache.as_ref())
        .filter(|c| c.kind != CacheKind::Instruction)
        .map(|c| c.level)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The data/unified cache of a level that holds a core's first PU.
fn cache_of(m: &Machine, core: ObjId, level: u8) -> Option<ObjId> {
    let pu = *pus_of(m, core).first()?;
    m.ancestor(pu, |o| o.is_cache_level(level))
}

/// How many cores fit on one row: as many as the width allows, rounded down to a whole number
/// of the largest cache, cluster or die that fits (so an L3 or a cluster shared by 8 cores is
/// not cut), then balanced so the rows are about equally long.
fn cores_per_row(m: &Machine, cores: &[ObjId], cell: usize) -> usize {
    let n = cores.len().max(1);
    let fit = ((MAX_WIDTH - 4 + 1) / (cell + 3)).max(1);
    if n <= fit {
        return n;
    }
    let inside: crate::cpuset::CpuSet =
        cores.iter().fold(crate::cpuset::CpuSet::new(), |acc, &c| {
            acc.union(&m.obj(c).cpuset)
        });
    let group = m
        .objects
        .iter()
        .filter(|o| match o.ty {
            ObjType::Group | ObjType::Die => true,
            ObjType::Cache => o
                .cache
                .as_ref()
                .is_some_and(|c| c.kind != CacheKind::Instruction),
            _ => false,
        })
        .filter(|o| o.cpuset.is_subset(&inside))
        .map(|o| {
            cores
                .iter()
                .filter(|&&c| m.obj(c).cpuset.is_subset(&o.cpuset))
                .count()
        })
        .filter(|&g| g > 1 && g <= fit)
        .max();
    let per_row = match group {
        Some(g) => fit / g * g,
        None => fit,
    };
    let rows = n.div_ceil(per_row);
    let balanced = n.div_ceil(rows);
    match group {
        Some(g) => balanced.div_ceil(g) * g,
        None => balanced,
    }
    .min(per_row)
}

fn boxed(text: &str, width: usize) -> [String; 3] {
    let edge = format!("+{}+", "-".repeat(width));
    [edge.clone(), format!("|{text:^width$}|"), edge]
}

fn core_row(m: &Machine, row: &[ObjId], cell: usize) -> Vec<String> {
    let mut lines = vec![String::new(), String::new(), String::new()];
    for (i, &c) in row.iter().enumerate() {
        for (l, part) in boxed(&core_text(m, c), cell).iter().enumerate() {
            if i > 0 {
                lines[l].push(' ');
            }
            lines[l].push_str(part);
        }
    }
    lines
}

/// One cache level under a row of cores: a box per run of cores sharing a cache. A cache
/// that also covers cores on another row says `(cont.)` on its later rows.
fn cache_row(
    m: &Machine,
    row: &[ObjId],
    socket_cores: &[ObjId],
    level: u8,
    cell: usize,
) -> Vec<String> {
    let mut lines = vec![String::new(), String::new(), String::new()];
    let mut i = 0;
    let mut any = false;
    while i < row.len() {
        let c = cache_of(m, row[i], level);
        let mut j = i + 1;
        while j < row.len() && c.is_some() && cache_of(m, row[j], level) == c {
            j += 1;
        }
        let span = j - i;
        let width = span * (cell + 3) - 3;
        let parts = match c {
            Some(cache) => {
                any = true;
                let size = m.obj(cache).cache.as_ref().map_or(0, |a| a.size);
                let mut label = if size > 0 {
                    human(size)
                } else {
                    format!("L{level}")
                };
                let first_here = socket_cores
                    .iter()
                    .position(|&k| cache_of(m, k, level) == Some(cache));
                let starts_earlier =
                    first_here.is_some_and(|p| socket_cores.get(p) != Some(&row[i]));
                if starts_earlier && label.len() + 8 <= width {
                    label.push_str(" (cont.)");
                }
                boxed(&label, width)
            }
            None => [
                " ".repeat(width + 2),
                " ".repeat(width + 2),
                " ".repeat(width + 2),
            ],
        };
        for (l, part) in parts.iter().enumerate() {
            if i > 0 {
                lines[l].push(' ');
            }
            lines[l].push_str(part);
        }
        i = j;
    }
    if any {
        lines
    } else {
        Vec::new()
    }
}

/// Sizes the way likwid prints them: `32 kB`, `1 MB`, `1.25 MB` (powers of 1024).
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {}", UNITS[u])
}

fn legend(m: &Machine, levels: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    if !levels.is_empty() {
        let names: Vec<String> = levels
            .iter()
            .map(|l| {
                if *l == 1 {
                    "L1d".into()
                } else {
                    format!("L{l}")
                }
            })
            .collect();
        out.push(format!(
            "Cache rows, top to bottom: {} (instruction caches not shown).",
            names.join(", ")
        ));
    } else {
        out.push("No cache information for this machine.".to_string());
    }
    let disallowed = m.disallowed_cpuset();
    if !disallowed.is_empty() {
        out.push(format!(
            "{DISALLOWED_MARK} = PU not allowed (outside this process's affinity mask or cgroup cpuset): {disallowed}"
        ));
    }
    if !m.offline.is_empty() {
        out.push(format!("Offline PUs (not shown): {}", m.offline));
    }
    if !m.core_kinds.is_empty() {
        let kinds: Vec<String> = m
            .core_kinds
            .iter()
            .map(|k| format!("{} on PUs {}", k.name, k.cpuset))
            .collect();
        out.push(format!(
            "Core kinds, least to most performant: {}",
            kinds.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human(32 * 1024), "32 kB");
        assert_eq!(human(1 << 20), "1 MB");
        assert_eq!(human(1310720), "1.25 MB");
        assert_eq!(human(48 << 20), "48 MB");
    }

    #[test]
    fn wraps_wide_sockets_at_cache_boundaries() {
        let m = crate::source::synthetic::parse("package:1 l3:8 core:8 pu:2").unwrap();
        let t = render(&m);
        assert!(t.lines().all(|l| l.len() <= MAX_WIDTH), "{t}");
        // 64 cores of 2 PUs: every core box appears exactly once.
        for c in [0, 17, 63] {
            let cell = format!("{} {}", 2 * c, 2 * c + 1);
            assert_eq!(t.matches(&format!(" {cell} ")).count(), 1, "{cell} in {t}");
        }
        assert!(
            t.lines().filter(|l| l.contains("+-------")).count() > 4,
            "{t}"
        );
        // No L3 box is cut across rows: no continuation marks.
        assert!(!t.contains("(cont.)"), "{t}");
    }

    #[test]
    fn no_caches_and_no_cores() {
        let m = crate::source::synthetic::parse("package:2 pu:3").unwrap();
        let t = render(&m);
        assert!(t.contains("No cache information"), "{t}");
        assert_eq!(t.matches("Socket ").count(), 2, "{t}");
    }
}
