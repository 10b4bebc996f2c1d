//! An lstopo-like drawing written directly as SVG text: each object is a box holding its
//! children, NUMA nodes are bars across the top of the object they are local to, disallowed
//! PUs are greyed, and a caption lists offline PUs and other facts. I/O objects are boxes
//! below the CPU-side object they are local to, as lstopo draws them: each PCI device holds
//! its OS devices, and where the machine keeps the PCI tree (`--whole-io`) the host and PCI
//! bridges hold what is behind them.
//!
//! Layout is two passes: sizes bottom-up (`measure`), then positions top-down (`draw`).
//! Children go left to right and wrap onto a new row once a row would get wider than
//! `MAX_ROW_WIDTH`, so a 256-PU machine stays a readable rectangle instead of a ribbon.

use super::tree::human_size;
use crate::io::{OsDevice, PciBridge, PciDevice};
use crate::machine::PciChild;
use crate::model::*;
use std::fmt::Write;

/// Advance of one 12 px monospace character (DejaVu Sans Mono: 0.602 em), rounded up so
/// boxes and captions never end inside their text.
const CHAR_W: f64 = 7.3;
const FONT_PX: u32 = 12;
const LINE_H: f64 = 16.0;
const PAD: f64 = 5.0;
const GAP: f64 = 5.0;
const NUMA_H: f64 = 20.0;
/// Rows of children wrap beyond this width (pixels), unless a single child is wider.
const MAX_ROW_WIDTH: f64 = 1400.0;

/// Size of an object's box and where its children go inside it.
struct Boxed<'a> {
    w: f64,
    h: f64,
    /// (child index into the object's children, x, y) relative to the box's corner.
    place: Vec<(usize, f64, f64)>,
    children: Vec<Boxed<'a>>,
    /// The I/O objects local to it (its PCI tree), below its children: (box, x, y).
    io: Vec<(IoBoxed<'a>, f64, f64)>,
}

/// An I/O object's box: a bridge holding what is behind it, a PCI device holding its OS
/// devices, or an OS device.
struct IoBoxed<'a> {
    w: f64,
    h: f64,
    what: IoWhat<'a>,
    /// (box, x, y) relative to the box's corner.
    kids: Vec<(IoBoxed<'a>, f64, f64)>,
}

enum IoWhat<'a> {
    Bridge(&'a PciBridge),
    Device(&'a PciDevice),
    Os(&'a OsDevice),
}

/// Height of an OS device's box (one line).
const OS_H: f64 = LINE_H + 4.0;

pub fn render(m: &Machine) -> String {
    let root = measure(m, 0);
    let captions = caption_lines(m);
    let caption_w = captions.iter().map(|l| text_w(l)).fold(0.0, f64::max);
    let width = root.w.max(caption_w) + 2.0 * PAD;
    let height = root.h
        + 2.0 * PAD
        + captions.len() as f64 * LINE_H
        + if captions.is_empty() { 0.0 } else { PAD };
    let mut out = String::new();
    let _ = writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}">"#
    );
    let _ = writeln!(
        out,
        "<style>text{{font-family:monospace;font-size:{FONT_PX}px;fill:#000}} text.off{{fill:#777}} rect{{stroke:#000;stroke-width:1}}</style>"
    );
    let _ = writeln!(
        out,
        r##"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="#fff" stroke="none" class="background"/>"##
    );
    draw(m, 0, &root, PAD, PAD, &mut out);
    let mut y = PAD + root.h + PAD + LINE_H - 4.0;
    for line in &captions {
        let _ = writeln!(
            out,
            r#"<text x="{PAD}" y="{y:.1}" class="caption">{}</text>"#,
            esc(line)
        );
        y += LINE_H;
    }
    out.push_str("</svg>\n");
    out
}

fn text_w(s: &str) -> f64 {
    s.chars().count() as f64 * CHAR_W
}

/// The label drawn at the top of an object's box.
fn label(m: &Machine, id: ObjId) -> String {
    let o = m.obj(id);
    let mut s = o.type_label();
    match o.ty {
        ObjType::Machine => {
            let total: u64 = m.numa_nodes.iter().map(|n| n.memory).sum();
            if total > 0 {
                s.push_str(&format!(" ({} total)", human_size(total)));
            }
        }
        ObjType::Cache | ObjType::Group => {
            if let Some(c) = o.cache.as_ref().filter(|c| c.size > 0) {
                s.push_str(&format!(" ({})", human_size(c.size)));
            }
        }
        _ => {
            if let Some(os) = o.os_index {
                s.push_str(&format!(" P#{os}"));
            } else {
                s.push_str(&format!(" L#{}", o.logical_index));
            }
        }
    }
    s
}

fn numa_label(n: &NumaNode) -> String {
    let mut attrs: Vec<String> = Vec::new();
    if n.memory > 0 {
        attrs.push(human_size(n.memory));
    }
    let attrs = if attrs.is_empty() {
        String::new()
    } else {
        format!(" ({})", attrs.join(", "))
    };
    format!("{} P#{}{attrs}", n.type_label(), n.os_index)
}

/// A memory-side bar's text and how deep it is nested.
fn memory_text(m: &Machine, child: MemoryChild) -> (String, usize) {
    match child {
        MemoryChild::Cache(c, d) => (m.mem_caches[c].label(), d),
        MemoryChild::Node(n, d) => (numa_label(&m.numa_nodes[n]), d),
    }
}

fn fill(m: &Machine, o: &Object) -> &'static str {
    match o.ty {
        ObjType::Machine => "#ffffff",
        ObjType::Package => "#dedede",
        ObjType::Die => "#d0d0e8",
        ObjType::Group => "#f2f2f2",
        ObjType::Cache => "#ffffff",
        ObjType::Core => "#bebebe",
        ObjType::Pu => {
            let p = o.pu.as_ref();
            if p.is_some_and(|p| !p.allowed) {
                "#eeeeee"
            } else if p
                .and_then(|p| p.kind)
                .is_some_and(|k| k + 1 < m.core_kinds.len())
            {
                // Less performant kinds of a hybrid CPU stand out.
                "#fff2cc"
            } else {
                "#ffffff"
            }
        }
    }
}

/// Places boxes of the given sizes left to right from `(PAD, top)`, wrapping onto a new
/// row past `MAX_ROW_WIDTH`: their corners, the widest row's right edge plus `PAD`, and the
/// bottom of the last row (`top` when there are none).
fn rows(sizes: impl Iterator<Item = (f64, f64)>, top: f64) -> (Vec<(f64, f64)>, f64, f64) {
    let mut place = Vec::new();
    let (mut x, mut y, mut row_h, mut widest) = (PAD, top, 0.0f64, 0.0f64);
    for (w, h) in sizes {
        if x > PAD && x + w > MAX_ROW_WIDTH {
            x = PAD;
            y += row_h + GAP;
            row_h = 0.0;
        }
        place.push((x, y));
        x += w + GAP;
        widest = widest.max(x - GAP + PAD);
        row_h = row_h.max(h);
    }
    (place, widest, y + row_h)
}

/// Bottom-up sizes. Children are placed in rows, wrapping past `MAX_ROW_WIDTH`; the I/O
/// objects local to the object go in rows of their own below them, as lstopo draws them.
fn measure(m: &Machine, id: ObjId) -> Boxed<'_> {
    let o = m.obj(id);
    let children: Vec<Boxed> = o.children.iter().map(|&c| measure(m, c)).collect();
    let mut w = text_w(&label(m, id)) + 2.0 * PAD;
    let memory = m.memory_children(id);
    for child in &memory {
        let (text, d) = memory_text(m, *child);
        w = w.max(text_w(&text) + (4.0 + 2.0 * d as f64) * PAD);
    }
    let top = LINE_H + PAD + memory.len() as f64 * (NUMA_H + GAP);
    let (corners, widest, bottom) = rows(children.iter().map(|c| (c.w, c.h)), top);
    let place = corners
        .into_iter()
        .enumerate()
        .map(|(i, (x, y))| (i, x, y))
        .collect();
    let io: Vec<IoBoxed> = m
        .pci_children(None, id)
        .into_iter()
        .map(|c| measure_io(m, c))
        .collect();
    let io_top = if children.is_empty() {
        top
    } else {
        bottom + GAP
    };
    let (io_corners, io_widest, io_bottom) = rows(io.iter().map(|b| (b.w, b.h)), io_top);
    w = w.max(widest).max(io_widest);
    let h = if !io.is_empty() {
        io_bottom + PAD
    } else if !children.is_empty() {
        bottom + PAD
    } else {
        top.max(LINE_H + PAD)
    };
    Boxed {
        w,
        h,
        place,
        children,
        io: io
            .into_iter()
            .zip(io_corners)
            .map(|(b, (x, y))| (b, x, y))
            .collect(),
    }
}

/// An I/O object's size: its label on top, then what it holds (a bridge's children in
/// rows, a device's OS devices one per line).
fn measure_io<'a>(m: &'a Machine, c: PciChild<'a>) -> IoBoxed<'a> {
    let top = LINE_H + PAD;
    match c {
        PciChild::Bridge(i, b) => {
            let kids: Vec<IoBoxed> = m
                .pci_children(Some(i), b.attached_to)
                .into_iter()
                .map(|c| measure_io(m, c))
                .collect();
            let (corners, widest, bottom) = rows(kids.iter().map(|k| (k.w, k.h)), top);
            IoBoxed {
                w: (text_w(&b.label()) + 2.0 * PAD).max(widest),
                h: if kids.is_empty() { top } else { bottom + PAD },
                what: IoWhat::Bridge(b),
                kids: kids
                    .into_iter()
                    .zip(corners)
                    .map(|(k, (x, y))| (k, x, y))
                    .collect(),
            }
        }
        PciChild::Device(d) => {
            let mut w = text_w(&d.label()) + 2.0 * PAD;
            let mut kids = Vec::new();
            let mut y = top;
            for os in &d.os_devices {
                let kw = text_w(&os.label()) + 2.0 * PAD;
                w = w.max(kw + 2.0 * PAD);
                let leaf = IoBoxed {
                    w: kw,
                    h: OS_H,
                    what: IoWhat::Os(os),
                    kids: Vec::new(),
                };
                kids.push((leaf, PAD, y));
                y += OS_H + GAP;
            }
            // OS devices stretch to the device's width, as lstopo draws them.
            for (k, _, _) in &mut kids {
                k.w = w - 2.0 * PAD;
            }
            IoBoxed {
                w,
                h: if kids.is_empty() { top } else { y - GAP + PAD },
                what: IoWhat::Device(d),
                kids,
            }
        }
    }
}

/// Draws an I/O object's box at absolute coordinates, then what it holds.
fn draw_io(b: &IoBoxed, x: f64, y: f64, out: &mut String) {
    let (class, fill, text, title) = match b.what {
        IoWhat::Bridge(br) => (
            "Bridge",
            "#ffffff",
            br.label(),
            format!("{}, local to PUs {}", br.label(), br.local_cpus),
        ),
        IoWhat::Device(d) => (
            "PCIDev",
            "#dfe8f5",
            d.label(),
            format!(
                "PCI {} id={:04x}:{:04x} class={:04x}({}), local to PUs {}",
                d.busid,
                d.vendor,
                d.device,
                d.class,
                d.class_name(),
                d.local_cpus
            ),
        ),
        IoWhat::Os(os) => (
            "OSDev",
            "#fff6d5",
            os.label(),
            format!("{} \"{}\"", os.kind.verbose_name(), os.name),
        ),
    };
    let _ = writeln!(out, r#"<g class="{class}">"#);
    let _ = writeln!(
        out,
        r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}" class="{class}"><title>{}</title></rect>"#,
        b.w,
        b.h,
        esc(&title)
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
        x + PAD,
        y + LINE_H - 3.0,
        esc(&text)
    );
    for (k, kx, ky) in &b.kids {
        draw_io(k, x + kx, y + ky, out);
    }
    out.push_str("</g>\n");
}

/// Top-down drawing at absolute coordinates.
fn draw(m: &Machine, id: ObjId, b: &Boxed, x: f64, y: f64, out: &mut String) {
    let o = m.obj(id);
    let disallowed = o.pu.as_ref().is_some_and(|p| !p.allowed);
    let class = match (o.ty, disallowed) {
        (ObjType::Pu, true) => "PU disallowed".to_string(),
        (ObjType::Cache, _) => format!("Cache {}", o.type_label()),
        (ty, _) => ty.name().to_string(),
    };
    let _ = writeln!(out, r#"<g class="{}">"#, esc(&class));
    let _ = writeln!(
        out,
        r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}" class="{}"><title>{}</title></rect>"#,
        b.w,
        b.h,
        fill(m, o),
        esc(&class),
        esc(&tooltip(m, id))
    );
    let text_class = if disallowed { r#" class="off""# } else { "" };
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}"{text_class}>{}</text>"#,
        x + PAD,
        y + LINE_H - 3.0,
        esc(&label(m, id))
    );
    // The memory side: memory-side caches as bars above the NUMA nodes they hold (each
    // level indented), then the nodes, as lstopo stacks them.
    let mut ny = y + LINE_H + PAD;
    for child in m.memory_children(id) {
        let (text, d) = memory_text(m, child);
        let (fill, class, title) = match child {
            MemoryChild::Cache(c, _) => {
                let c = &m.mem_caches[c];
                (
                    "#ffffff",
                    "MemCache",
                    format!(
                        "memory-side cache L#{} ({}) in front of the memory of PUs {}",
                        c.logical_index,
                        c.attributes(),
                        c.cpuset
                    ),
                )
            }
            MemoryChild::Node(n, _) => {
                let node = &m.numa_nodes[n];
                (
                    "#efdfde",
                    "NUMANode",
                    format!("NUMA node P#{} local to PUs {}", node.os_index, node.cpuset),
                )
            }
        };
        let indent = d as f64 * PAD;
        let _ = writeln!(
            out,
            r#"<rect x="{:.1}" y="{ny:.1}" width="{:.1}" height="{NUMA_H}" fill="{fill}" class="{class}"><title>{}</title></rect>"#,
            x + PAD + indent,
            b.w - 2.0 * PAD - indent,
            esc(&title)
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            x + 2.0 * PAD + indent,
            ny + NUMA_H - 6.0,
            esc(&text)
        );
        ny += NUMA_H + GAP;
    }
    for &(i, cx, cy) in &b.place {
        draw(m, o.children[i], &b.children[i], x + cx, y + cy, out);
    }
    for (io, ix, iy) in &b.io {
        draw_io(io, x + ix, y + iy, out);
    }
    out.push_str("</g>\n");
}

/// Hover text: the object's CPUs and attributes.
fn tooltip(m: &Machine, id: ObjId) -> String {
    let o = m.obj(id);
    let mut t = format!(
        "{} L#{} cpuset {}",
        o.type_label(),
        o.logical_index,
        o.cpuset
    );
    if let Some(c) = &o.cache {
        if c.line_size > 0 {
            t.push_str(&format!(", line {} B", c.line_size));
        }
        if let Some(w) = c.ways {
            t.push_str(&if w == 0 {
                ", fully associative".to_string()
            } else {
                format!(", {w}-way")
            });
        }
    }
    if let Some(p) = &o.pu {
        if !p.allowed {
            t.push_str(", not allowed");
        }
        if let Some(k) = p.kind.and_then(|k| m.core_kinds.get(k)) {
            t.push_str(&format!(", kind {}", k.name));
        }
    }
    for (k, v) in &o.info {
        t.push_str(&format!(", {k}={v}"));
    }
    t
}

fn caption_lines(m: &Machine) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(src) = m.info.get("source") {
        out.push(format!("Source: {src}"));
    }
    let disallowed = m.disallowed_cpuset();
    if !disallowed.is_empty() {
        out.push(format!("Disallowed PUs (greyed): {disallowed}"));
    }
    if !m.offline.is_empty() {
        out.push(format!("Offline PUs (not drawn): {}", m.offline));
    }
    if m.core_kinds.len() > 1 {
        let kinds: Vec<String> = m
            .core_kinds
            .iter()
            .map(|k| format!("{} ({})", k.name, k.cpuset))
            .collect();
        out.push(format!(
            "Core kinds, least to most performant (less performant PUs shaded): {}",
            kinds.join(", ")
        ));
    }
    out
}

/// XML-escapes text for element content and attribute values: the one escaper every SVG
/// autopin draws uses.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0 at all.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(esc(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(esc("x\u{1}y"), "x?y");
    }

    #[test]
    fn wide_machines_wrap_into_rows() {
        let m = crate::source::synthetic::parse("package:4 core:32 pu:2").unwrap();
        let b = measure(&m, 0);
        assert!(b.w <= MAX_ROW_WIDTH + 10.0 * PAD, "width {}", b.w);
        assert!(b.h < 4.0 * b.w, "height {} width {}", b.h, b.w);
    }
}
