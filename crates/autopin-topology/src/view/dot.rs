//! A graphviz digraph of the tree: one node per object, edges from parent to child; NUMA
//! nodes are separate boxes linked (dashed) to the object their memory is local to; PCI
//! devices (and, with `--whole-io`, the bridges) hang from the object they are local to,
//! each OS device from its PCI device.
//! Render with `dot -Tsvg`.

use super::tree::human_size;
use crate::model::*;
use std::fmt::Write;

pub fn render(m: &Machine) -> String {
    let mut out = String::new();
    out.push_str("digraph topology {\n");
    out.push_str("  graph [rankdir=TB, nodesep=0.15, ranksep=0.4];\n");
    out.push_str("  node [shape=box, fontname=\"monospace\", fontsize=10, style=filled, fillcolor=\"#ffffff\"];\n");
    for id in m.dfs_order() {
        let o = m.obj(id);
        let disallowed = o.pu.as_ref().is_some_and(|p| !p.allowed);
        let mut attrs = format!("label=\"{}\"", quote(&label(m, id)));
        let color = match o.ty {
            ObjType::Package => Some("#dedede"),
            ObjType::Core => Some("#bebebe"),
            ObjType::Pu if disallowed => Some("#eeeeee"),
            _ => None,
        };
        if let Some(c) = color {
            let _ = write!(attrs, ", fillcolor=\"{c}\"");
        }
        if disallowed {
            attrs.push_str(", fontcolor=\"#777777\", style=\"filled,dashed\"");
        }
        let _ = writeln!(out, "  o{id} [{attrs}];");
        for &c in &o.children {
            let _ = writeln!(out, "  o{id} -> o{c};");
        }
    }
    for (i, n) in m.numa_nodes.iter().enumerate() {
        let mut attrs: Vec<String> = Vec::new();
        if n.memory > 0 {
            attrs.push(human_size(n.memory));
        }
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!(" ({})", attrs.join(", "))
        };
        let l = format!("{} P#{}{attrs}", n.type_label(), n.os_index);
        let _ = writeln!(
            out,
            "  n{i} [label=\"{}\", shape=box3d, fillcolor=\"#efdfde\"];",
            quote(&l)
        );
        // A node behind a memory-side cache hangs from the cache.
        let from = match n.mem_cache {
            Some(c) => format!("mc{c}"),
            None => format!("o{}", n.attached_to),
        };
        let _ = writeln!(out, "  {from} -> n{i} [style=dashed, arrowhead=none];");
    }
    for (i, c) in m.mem_caches.iter().enumerate() {
        let _ = writeln!(
            out,
            "  mc{i} [label=\"{}\", shape=box, fillcolor=\"#ffffff\"];",
            quote(&c.label())
        );
        let from = match c.parent {
            Some(p) => format!("mc{p}"),
            None => format!("o{}", c.attached_to),
        };
        let _ = writeln!(out, "  {from} -> mc{i} [style=dashed, arrowhead=none];");
    }
    // I/O devices hang (dashed) from the object whose CPUs are local to them, or, where the
    // machine keeps the PCI tree (`--whole-io`), from the bridge they sit behind; host
    // bridges hang from that object. Each OS device hangs from its PCI device.
    for (i, b) in m.pci_bridges.iter().enumerate() {
        let _ = writeln!(
            out,
            "  b{i} [label=\"{}\", shape=cds, fillcolor=\"#f4f4f4\"];",
            quote(&b.label())
        );
        match b.parent {
            Some(p) => {
                let _ = writeln!(out, "  b{p} -> b{i};");
            }
            None => {
                let _ = writeln!(out, "  o{} -> b{i} [style=dashed];", b.attached_to);
            }
        }
    }
    let devices =
        m.io.iter()
            .enumerate()
            .map(|(i, d)| (format!("d{i}"), d))
            .chain(
                m.pci_other
                    .iter()
                    .enumerate()
                    .map(|(i, d)| (format!("x{i}"), d)),
            );
    for (node, d) in devices {
        let _ = writeln!(
            out,
            "  {node} [label=\"{}\", shape=component, fillcolor=\"#dfe8f5\"];",
            quote(&d.label())
        );
        match d.bridge {
            Some(b) => {
                let _ = writeln!(out, "  b{b} -> {node};");
            }
            None => {
                let _ = writeln!(out, "  o{} -> {node} [style=dashed];", d.attached_to);
            }
        }
        for (j, os) in d.os_devices.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {node}_{j} [label=\"{}\", shape=note, fillcolor=\"#fff6d5\"];",
                quote(&os.label())
            );
            let _ = writeln!(out, "  {node} -> {node}_{j};");
        }
    }
    if !m.offline.is_empty() {
        let _ = writeln!(
            out,
            "  offline [label=\"{}\", shape=note, fillcolor=\"#f8f8f8\"];",
            quote(&format!("offline PUs: {}", m.offline))
        );
    }
    out.push_str("}\n");
    out
}

/// `Package P#0`, `L3 (16MiB)`, `Core P#1`, `PU P#3 (disallowed)`.
fn label(m: &Machine, id: ObjId) -> String {
    let o = m.obj(id);
    let mut s = o.type_label();
    if let Some(c) = o.cache.as_ref().filter(|c| c.size > 0) {
        let _ = write!(s, " ({})", human_size(c.size));
    } else if o.ty != ObjType::Machine && o.ty != ObjType::Cache {
        match o.os_index {
            Some(os) if o.ty != ObjType::Group => {
                let _ = write!(s, " P#{os}");
            }
            _ => {
                let _ = write!(s, " L#{}", o.logical_index);
            }
        }
    }
    if let Some(p) = &o.pu {
        if !p.allowed {
            s.push_str(" (disallowed)");
        }
        if let Some(k) = p.kind.and_then(|k| m.core_kinds.get(k)) {
            let _ = write!(s, "\n{}", k.name);
        }
    }
    if let Some(model) = o.info.get("CPUModel") {
        let _ = write!(s, "\n{model}");
    }
    s
}

/// Escapes text for a double-quoted dot string; newlines become dot's `\n` line breaks.
fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if c.is_control() => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn every_object_and_numa_node_is_a_node() {
        let m = crate::source::synthetic::parse("package:2 numa:1 l3:1 core:2 pu:2").unwrap();
        let d = render(&m);
        assert_eq!(
            d.matches(" [label=").count(),
            m.objects.len() + m.numa_nodes.len(),
            "{d}"
        );
        assert_eq!(d.matches(" -> o").count(), m.objects.len() - 1, "{d}");
        assert!(d.contains("label=\"PU P#3\""), "{d}");
        assert!(d.contains("label=\"Package P#1"), "{d}");
    }
}
