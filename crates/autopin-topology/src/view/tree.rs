//! The text tree, in the manner of `lstopo-no-graphics`.

use crate::machine::PciChild;
use crate::model::*;
use std::fmt::Write;

pub use autopin_human::lstopo_size as human_size;

/// One object's line: `L3 L#0 (8MiB)`, `Core L#1 (P#1)`, `PU L#3 (P#3)`.
pub fn object_label(m: &Machine, o: &Object) -> String {
    let mut s = format!("{} L#{}", o.type_label(), o.logical_index);
    let mut attrs = Vec::new();
    if let (Some(os), false) = (o.os_index, o.ty == ObjType::Cache || o.ty == ObjType::Group) {
        attrs.push(format!("P#{os}"));
    }
    if let Some(c) = &o.cache {
        if c.size > 0 {
            attrs.push(human_size(c.size));
        }
    }
    if let Some(model) = o.info.get("CPUModel") {
        attrs.push(format!("\"{model}\""));
    }
    if let Some(p) = &o.pu {
        if !p.allowed {
            attrs.push("disallowed".into());
        }
        if let Some(k) = p.kind.and_then(|k| m.core_kinds.get(k)) {
            attrs.push(format!("kind={}", k.name));
        }
    }
    if !attrs.is_empty() {
        let _ = write!(s, " ({})", attrs.join(" "));
    }
    s
}

fn numa_label(n: &NumaNode) -> String {
    let mut attrs = vec![format!("P#{}", n.os_index)];
    if n.memory > 0 {
        attrs.push(human_size(n.memory));
    }
    if let Some(t) = n.tier {
        attrs.push(format!("tier={t}"));
    }
    format!(
        "{} L#{} ({})",
        n.type_label(),
        n.logical_index,
        attrs.join(" ")
    )
}

/// What the tree shows beyond the CPU side.
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeOptions {
    /// The whole PCI tree, as `lstopo --whole-io`: host bridges, PCI bridges and every PCI
    /// device the machine holds, nested as lstopo nests them.
    pub whole_io: bool,
    /// I/O lines as `lstopo -v` writes them: `PCI L#0 (busid=... id=... class=...)`,
    /// bridges with the buses below them.
    pub verbose: bool,
}

pub fn render(m: &Machine) -> String {
    render_with(m, TreeOptions::default())
}

pub fn render_with(m: &Machine, opts: TreeOptions) -> String {
    let mut out = String::new();
    let total: u64 = m.numa_nodes.iter().map(|n| n.memory).sum();
    let root_attrs = if total > 0 {
        format!(" (total={})", human_size(total))
    } else {
        String::new()
    };
    let _ = writeln!(out, "Machine{root_attrs}");
    let mut w = Walk {
        m,
        opts,
        out: &mut out,
        bridges: 0,
        pci: 0,
        osdev: 0,
    };
    w.cpu_side(0, 0);
    for line in m.summary_lines() {
        let _ = writeln!(out, "{line}");
    }
    if let Some(d) = &m.numa_distances {
        if m.numa_nodes.len() > 1 {
            let _ = writeln!(out, "NUMA distances (by OS index):");
            let head: Vec<String> = m
                .numa_nodes
                .iter()
                .map(|n| format!("{:>4}", n.os_index))
                .collect();
            let _ = writeln!(out, "     {}", head.join(""));
            for (i, row) in d.iter().enumerate() {
                let cells: Vec<String> = row.iter().map(|v| format!("{v:>4}")).collect();
                let _ = writeln!(out, "{:>4} {}", m.numa_nodes[i].os_index, cells.join(""));
            }
        }
    }
    out
}

struct Walk<'a> {
    m: &'a Machine,
    opts: TreeOptions,
    out: &'a mut String,
    /// Bridges, PCI devices and OS devices written so far, lstopo's logical indexes.
    bridges: usize,
    pci: usize,
    osdev: usize,
}

impl Walk<'_> {
    fn cpu_side(&mut self, id: ObjId, depth: usize) {
        let m = self.m;
        let o = &m.objects[id];
        let indent = "  ".repeat(depth + 1);
        // The memory side first, as lstopo writes it: memory-side caches holding their
        // NUMA nodes.
        for child in m.memory_children(id) {
            let (line, inner) = match child {
                MemoryChild::Cache(c, d) => (m.mem_caches[c].label(), d),
                MemoryChild::Node(n, d) => (numa_label(&m.numa_nodes[n]), d),
            };
            let _ = writeln!(self.out, "{indent}{}{line}", "  ".repeat(inner));
        }
        for &c in &o.children {
            let _ = writeln!(self.out, "{indent}{}", object_label(m, &m.objects[c]));
            self.cpu_side(c, depth + 1);
        }
        // I/O after the CPU side, as lstopo draws it.
        self.pci_tree(None, id, depth);
    }

    /// The bridges and devices below a bridge (or, with `None`, the CPU-side object `at`).
    /// Without `--whole-io` the bridges are not written and only the devices lstopo shows
    /// by default are, in the order lstopo writes them (the PCI tree's, where the machine
    /// still knows it; else by bus id).
    fn pci_tree(&mut self, bridge: Option<usize>, at: ObjId, depth: usize) {
        for child in self.m.pci_children(bridge, at) {
            match child {
                PciChild::Bridge(i, _) if !self.opts.whole_io => self.pci_tree(Some(i), at, depth),
                PciChild::Device(d)
                    if !self.opts.whole_io && !self.m.io.iter().any(|x| std::ptr::eq(x, d)) => {}
                PciChild::Bridge(i, b) => {
                    let indent = "  ".repeat(depth + 1);
                    let line = if self.opts.verbose {
                        b.verbose_label(self.bridges)
                    } else {
                        b.label()
                    };
                    self.bridges += 1;
                    let _ = writeln!(self.out, "{indent}{line}");
                    self.pci_tree(Some(i), at, depth + 1);
                }
                PciChild::Device(d) => self.device(d, depth),
            }
        }
    }

    fn device(&mut self, d: &crate::io::PciDevice, depth: usize) {
        let indent = "  ".repeat(depth + 1);
        let line = if self.opts.verbose {
            d.verbose_label(self.pci)
        } else {
            d.label()
        };
        self.pci += 1;
        let _ = writeln!(self.out, "{indent}{line}");
        // lstopo shows DMA engines and DRM devices only with --whole-io, and numbers only
        // what it shows.
        for os in d
            .os_devices
            .iter()
            .filter(|o| self.opts.whole_io || o.important())
        {
            let line = if self.opts.verbose {
                os.verbose_label(self.osdev)
            } else {
                os.label()
            };
            self.osdev += 1;
            let _ = writeln!(self.out, "{indent}  {line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_size(32 * 1024), "32KiB");
        assert_eq!(human_size(8 << 20), "8192KiB");
        assert_eq!(human_size(16 << 20), "16MiB");
        assert_eq!(human_size(1280 * 1024), "1280KiB");
        assert_eq!(human_size(512), "512B");
    }

    /// The memory of a lone package hangs from the package, as lstopo shows it.
    #[test]
    fn tree_nests_synthetic() {
        let m = crate::source::synthetic::parse("package:1 l2:2 core:1 pu:2").unwrap();
        let t = render(&m);
        assert!(
            t.contains(
                "  Package L#0 (P#0)\n    NUMANode L#0 (P#0)\n    L2 L#0\n      Core L#0 (P#0)\n        PU L#0 (P#0)\n"
            ),
            "{t}"
        );
    }
}
