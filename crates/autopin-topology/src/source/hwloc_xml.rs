//! hwloc XML import: the output of `lstopo --of xml` (hwloc 2.x, and the simple parts of 1.x).
//!
//! Only what says which objects exist and which CPUs each covers is read; nesting, NUMA
//! attachment and numbering are left to [`Builder`], exactly as for sysfs, so an imported
//! machine looks the same as one read live. PCI devices (`PCIDev`) and their OS devices
//! (`OSDev`) become the model's I/O list, local to the CPUs of the nearest object above
//! them that has a cpuset (the classes lstopo hides by default go to `pci_other`, as
//! hwloc's import filters them); `Bridge` objects become `pci_bridges`; `Misc` objects are
//! skipped; `MemCache` objects become memory-side caches holding the NUMA nodes inside them.
//!
//! Sets used (attributes of the `Machine` object):
//! - `cpuset`: PUs present in the topology; `complete_cpuset`: all PUs that exist. A PU in
//!   the second but not the first is recorded as offline. (lstopo also drops disallowed PUs
//!   from `cpuset` unless run with `--disallowed`; those then show up as offline too, since
//!   the XML does not tell the two apart.)
//! - `allowed_cpuset`: PUs present but outside it are disallowed.

use crate::builder::{Builder, NumaSpec};
use crate::cpuset::CpuSet;
use crate::error::{HwlocXmlError, XmlPosition};
use crate::model::*;
use roxmltree::{Document, Node, ParsingOptions};
use std::collections::BTreeMap;

type Res<T> = std::result::Result<T, HwlocXmlError>;

/// An [`HwlocXmlError::At`] a position: `xml_err!(at(doc, n), "a {ty} object ...")`.
macro_rules! xml_err {
    ($pos:expr, $($fmt:tt)+) => {
        HwlocXmlError::At {
            position: $pos,
            message: format!($($fmt)+),
        }
    };
}

/// Parses hwloc XML text; the error says what was wrong and where (line and column).
pub fn from_str(text: &str) -> Res<Machine> {
    check_nesting(text)?;
    let opts = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(text, opts).map_err(|e| {
        let p = e.pos();
        xml_err!(
            XmlPosition::new(p.row as usize, Some(p.col as usize)),
            "not well-formed XML: {e}"
        )
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "topology" {
        return Err(xml_err!(
            at(&doc, root),
            "the root element is <{}>, expected <topology> (the output of `lstopo --of xml`)",
            root.tag_name().name()
        ));
    }
    let mut r = Reader {
        doc: &doc,
        b: Builder::new(),
        machine: None,
        pus: Vec::new(),
        numa_gp: BTreeMap::new(),
        numa_logical: Vec::new(),
        seen_pus: BTreeMap::new(),
        hidden_numa: Vec::new(),
        mem_cache_stack: Vec::new(),
        io: Vec::new(),
        other: Vec::new(),
        bridges: Vec::new(),
        bridge_stack: Vec::new(),
        near: Vec::new(),
        osdev_bits: root
            .attribute("version")
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.parse::<u32>().ok())
            .is_some_and(|major| major >= 3),
        depth: 0,
    };
    r.b.info.insert("source".into(), "hwloc XML".into());
    let mut distances_v1 = Vec::new();
    for child in root.children().filter(|c| c.has_tag_name("object")) {
        r.object(child, false, &mut distances_v1)?;
    }
    let Some(sets) = r.machine.take() else {
        return Err(xml_err!(
            at(&doc, root),
            "no <object type=\"Machine\"> under <topology>"
        ));
    };
    if r.pus.is_empty() {
        return Err(HwlocXmlError::NoPus);
    }

    // Core kinds come after the objects; only more than one kind is worth recording.
    let kinds = cpu_kinds(&doc, root)?;
    if kinds.len() > 1 {
        r.b.core_kinds = kinds;
    }
    let pus = std::mem::take(&mut r.pus);
    for os in pus {
        let allowed = match &sets.allowed {
            Some(a) => a.contains(os),
            None => true,
        };
        let kind = r.b.core_kinds.iter().position(|k| k.cpuset.contains(os));
        r.b.add_pu(os, allowed, kind);
    }
    r.b.offline = sets.complete.difference(&sets.present);

    let distances = numa_distances_v2(&doc, root, &r.numa_gp)?;
    let distances = match distances {
        Some(d) => Some(d),
        None => numa_distances_v1(&doc, &distances_v1, &r.numa_logical)?,
    };
    r.b.numa_distances = distances;
    if !r.hidden_numa.is_empty() {
        r.b.info
            .insert("numa_without_cpus".into(), r.hidden_numa.join(", "));
    }

    let mut m = r.b.build();
    m.validate().map_err(HwlocXmlError::Inconsistent)?;
    m.io = std::mem::take(&mut r.io);
    m.pci_other = std::mem::take(&mut r.other);
    m.pci_bridges = std::mem::take(&mut r.bridges);
    m.attach_io();
    Ok(m)
}

/// Rejects element nesting deeper than [`MAX_DEPTH`] before the XML parser sees it: the
/// parser recurses per level and a hostile file could otherwise overflow the stack. A light
/// scan: comments, CDATA, declarations and quoted attribute values are skipped; anything
/// malformed is left for the real parser to report.
fn check_nesting(text: &str) -> Res<()> {
    let b = text.as_bytes();
    let (mut i, mut depth, mut line) = (0usize, 0usize, 1usize);
    let skip_to = |from: usize, pat: &[u8]| {
        b[from..]
            .windows(pat.len())
            .position(|w| w == pat)
            .map_or(b.len(), |p| from + p + pat.len())
    };
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'<' if b[i..].starts_with(b"<!--") => i = skip_to(i, b"-->"),
            b'<' if b[i..].starts_with(b"<![CDATA[") => i = skip_to(i, b"]]>"),
            b'<' if matches!(b.get(i + 1), Some(b'?') | Some(b'!')) => i = skip_to(i, b">"),
            b'<' if b.get(i + 1) == Some(&b'/') => {
                depth = depth.saturating_sub(1);
                i = skip_to(i, b">");
            }
            b'<' => {
                // An opening tag: find its end outside quoted attribute values.
                let mut j = i + 1;
                let mut quote = None;
                while j < b.len() {
                    match (b[j], quote) {
                        (b'"' | b'\'', None) => quote = Some(b[j]),
                        (c, Some(q)) if c == q => quote = None,
                        (b'>', None) => break,
                        _ => {}
                    }
                    j += 1;
                }
                if j < b.len() && b[j - 1] != b'/' {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(xml_err!(
                            XmlPosition::new(line, None),
                            "elements nested more than {MAX_DEPTH} deep; real topologies are far shallower"
                        ));
                    }
                }
                line += b[i..j.min(b.len())].iter().filter(|&&c| c == b'\n').count();
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Where a node starts (`line L, column C`), for error messages.
fn at(doc: &Document, n: Node) -> XmlPosition {
    let p = doc.text_pos_at(n.range().start);
    XmlPosition::new(p.row as usize, Some(p.col as usize))
}

struct MachineSets {
    present: CpuSet,
    complete: CpuSet,
    allowed: Option<CpuSet>,
}

struct Reader<'a, 'input> {
    doc: &'a Document<'input>,
    b: Builder,
    machine: Option<MachineSets>,
    /// OS indexes of the PUs, added once core kinds are known.
    pus: Vec<u32>,
    /// NUMA node `gp_index` → OS index, for distances indexed by `gp`.
    numa_gp: BTreeMap<u64, u32>,
    /// NUMA OS indexes in document (logical) order, for hwloc 1.x distances.
    numa_logical: Vec<u32>,
    /// PU OS index → line where it was first seen, to report duplicates.
    seen_pus: BTreeMap<u32, XmlPosition>,
    /// NUMA nodes left out because none of their CPUs is in the XML.
    hidden_numa: Vec<String>,
    /// The memory-side caches (indexes into the builder's) enclosing the object being read.
    mem_cache_stack: Vec<usize>,
    /// PCI devices read so far.
    io: Vec<crate::io::PciDevice>,
    /// PCI devices lstopo shows only under `--whole-io`.
    other: Vec<crate::io::PciDevice>,
    /// Bridges read so far, in document order, and the ones enclosing the current object.
    bridges: Vec<crate::io::PciBridge>,
    bridge_stack: Vec<usize>,
    /// The cpusets of the objects above the one being read (I/O objects have none: they
    /// are local to the nearest one).
    near: Vec<CpuSet>,
    /// hwloc 3 writes OS device types as bit masks, hwloc 2 as numbers.
    osdev_bits: bool,
    /// Current nesting depth of `<object>`s, bounded so hostile input cannot blow the stack.
    depth: usize,
}

/// Deepest `<object>` nesting accepted (hwloc trees are about 10 deep).
const MAX_DEPTH: usize = 200;

impl Reader<'_, '_> {
    /// Reads one `<object>` and its subtree; `in_core` says whether a Core encloses it.
    fn object<'a, 'i>(
        &mut self,
        n: Node<'a, 'i>,
        in_core: bool,
        dist_v1: &mut Vec<Node<'a, 'i>>,
    ) -> Res<()> {
        let doc = self.doc;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(xml_err!(
                at(doc, n),
                "objects nested more than {MAX_DEPTH} deep; real topologies are far shallower"
            ));
        }
        let ty = n
            .attribute("type")
            .ok_or_else(|| xml_err!(at(doc, n), "<object> without a type attribute"))?;
        let cpuset = match n.attribute("cpuset") {
            Some(s) => mask(doc, n, "cpuset", s)?,
            None => CpuSet::new(),
        };
        let os_index = match n.attribute("os_index") {
            Some(s) => Some(s.trim().parse::<u32>().map_err(|_| {
                xml_err!(
                    at(doc, n),
                    "os_index '{s}' of a {ty} object is not a non-negative integer"
                )
            })?),
            None => None,
        };
        let infos = infos(n);
        // What the I/O objects below are local to.
        let local = n.attribute("cpuset").map(|_| cpuset.clone());
        match ty {
            "Machine" if self.machine.is_none() => {
                let complete = match n.attribute("complete_cpuset") {
                    Some(s) => mask(doc, n, "complete_cpuset", s)?.union(&cpuset),
                    None => cpuset.clone(),
                };
                let allowed = match n.attribute("allowed_cpuset") {
                    Some(s) => Some(mask(doc, n, "allowed_cpuset", s)?),
                    None => None,
                };
                self.machine = Some(MachineSets {
                    present: cpuset.clone(),
                    complete,
                    allowed,
                });
                self.b.info.extend(infos);
            }
            "Package" | "Socket" | "Die" | "Core" | "Group" => {
                let oty = match ty {
                    "Package" | "Socket" => ObjType::Package,
                    "Die" => ObjType::Die,
                    "Core" => ObjType::Core,
                    _ => ObjType::Group,
                };
                // hwloc gives groups made up by the OS (its `kind`) no meaningful os_index.
                let os = if oty == ObjType::Group {
                    None
                } else {
                    os_index
                };
                let mut o = Object::new(oty, os, cpuset);
                o.info = infos;
                if oty == ObjType::Group {
                    if let Some(sub) = n.attribute("subtype") {
                        o.info.insert("kind".into(), sub.to_string());
                    }
                }
                self.b.add(o);
            }
            "PU" => {
                let os =
                    os_index.ok_or_else(|| xml_err!(at(doc, n), "a PU object without os_index"))?;
                if cpuset.len() != 1 || !cpuset.contains(os) {
                    return Err(xml_err!(
                        at(doc, n),
                        "PU P#{os} has cpuset {} but a PU must cover exactly its own CPU",
                        cpuset
                    ));
                }
                if let Some(first) = self.seen_pus.insert(os, at(doc, n)) {
                    return Err(xml_err!(
                        at(doc, n),
                        "PU P#{os} appears twice (first at {first})"
                    ));
                }
                self.pus.push(os);
                if !in_core {
                    // hwloc leaves Core objects out when the OS gave no core ids; every PU
                    // still runs on a core of its own, and placement needs to see it.
                    self.b.add(Object::new(ObjType::Core, None, cpuset.clone()));
                }
            }
            "NUMANode" => {
                let os = os_index
                    .ok_or_else(|| xml_err!(at(doc, n), "a NUMANode object without os_index"))?;
                let memory = match n.attribute("local_memory") {
                    Some(s) => s.trim().parse::<u64>().map_err(|_| {
                        xml_err!(at(doc, n), "local_memory '{s}' is not a number of bytes")
                    })?,
                    None => 0,
                };
                if let Some(gp) = n.attribute("gp_index").and_then(|g| g.parse::<u64>().ok()) {
                    self.numa_gp.insert(gp, os);
                }
                self.numa_logical.push(os);
                let complete = match n.attribute("complete_cpuset") {
                    Some(s) => mask(doc, n, "complete_cpuset", s)?,
                    None => CpuSet::new(),
                };
                if cpuset.is_empty() && !complete.is_empty() {
                    // Local only to CPUs missing from the XML (offline, or disallowed and
                    // dropped by lstopo): hwloc hangs it under an object with no PUs, which
                    // this model cannot hold, and attaching it to the root would claim it is
                    // local to every CPU. Leave it out and say so.
                    self.hidden_numa
                        .push(format!("{os} (local to CPUs {complete})"));
                    return self.children(n, in_core, ty, dist_v1);
                }
                if let Some(&c) = self.mem_cache_stack.last() {
                    self.b.mem_caches[c].nodes.push(os);
                }
                let tier = infos.get("MemoryTier").and_then(|t| t.parse::<u32>().ok());
                self.b.add_numa(NumaSpec {
                    os_index: os,
                    cpuset,
                    initiators: CpuSet::new(),
                    memory,
                    kind: n.attribute("subtype").map(str::to_string),
                    tier,
                });
            }
            "PCIDev" => {
                let mut d = pci_device(doc, n, self.near.last(), self.osdev_bits)?;
                d.bridge = self.bridge_stack.last().copied();
                if crate::io::important_class(d.class) {
                    self.io.push(d);
                } else {
                    self.other.push(d);
                }
            }
            "MemCache" => {
                // A memory-side cache: its attributes, and the NUMA nodes (or caches) inside.
                let num = |name: &str| -> Res<Option<u64>> {
                    match n.attribute(name) {
                        Some(t) => t.trim().parse::<u64>().map(Some).map_err(|_| {
                            xml_err!(
                                at(doc, n),
                                "{name} '{t}' of a MemCache object is not a non-negative integer"
                            )
                        }),
                        None => Ok(None),
                    }
                };
                let cache = MemorySideCache {
                    level: u32::try_from(num("depth")?.unwrap_or(1)).unwrap_or(u32::MAX),
                    size: num("cache_size")?.unwrap_or(0),
                    line_size: u32::try_from(num("cache_linesize")?.unwrap_or(0))
                        .unwrap_or(u32::MAX),
                    ways: num("cache_associativity")?
                        .filter(|&w| w > 0)
                        .map(|w| u32::try_from(w).unwrap_or(u32::MAX)),
                };
                self.b.mem_caches.push(crate::builder::MemCacheSpec {
                    cache,
                    nodes: Vec::new(),
                    parent: self.mem_cache_stack.last().copied(),
                });
                self.mem_cache_stack.push(self.b.mem_caches.len() - 1);
                let read = self.children(n, in_core, ty, dist_v1);
                self.mem_cache_stack.pop();
                return read;
            }
            "Bridge" => {
                let mut b = bridge(doc, n, self.near.last())?;
                b.parent = self.bridge_stack.last().copied();
                self.bridge_stack.push(self.bridges.len());
                self.bridges.push(b);
                let read = self.children(n, in_core, ty, dist_v1);
                self.bridge_stack.pop();
                return read;
            }
            _ => {
                if let Some(attr) = cache_attr(doc, n, ty)? {
                    let mut o = Object::new(ObjType::Cache, None, cpuset);
                    o.cache = Some(attr);
                    o.info = infos;
                    self.b.add(o);
                }
                // Anything else (OSDev, Misc, later types) is not part of the CPU tree; its
                // children are still read.
            }
        }
        let pushed = local.is_some();
        if let Some(set) = local {
            self.near.push(set);
        }
        let read = self.children(n, in_core, ty, dist_v1);
        if pushed {
            self.near.pop();
        }
        read
    }

    fn children<'a, 'i>(
        &mut self,
        n: Node<'a, 'i>,
        in_core: bool,
        ty: &str,
        dist_v1: &mut Vec<Node<'a, 'i>>,
    ) -> Res<()> {
        for child in n.children().filter(Node::is_element) {
            match child.tag_name().name() {
                "object" => self.object(child, in_core || ty == "Core", dist_v1)?,
                "distances" => dist_v1.push(child),
                _ => {}
            }
        }
        self.depth -= 1;
        Ok(())
    }
}

/// `<info name=.. value=..>` children of an object.
fn infos(n: Node) -> BTreeMap<String, String> {
    n.children()
        .filter(|c| c.has_tag_name("info"))
        .filter_map(|c| {
            Some((
                c.attribute("name")?.to_string(),
                c.attribute("value").unwrap_or("").to_string(),
            ))
        })
        .collect()
}

/// Cache attributes for `L2Cache`, `L1iCache` (hwloc 2.x) or `Cache` (1.x); `None` for
/// objects that are not CPU caches (`MemCache` included).
fn cache_attr(doc: &Document, n: Node, ty: &str) -> Res<Option<CacheAttr>> {
    let (level_from_name, kind_from_name) = match ty {
        "Cache" => (None, None),
        _ => {
            let Some(rest) = ty.strip_prefix('L') else {
                return Ok(None);
            };
            let (digits, suffix) = rest.split_at(
                rest.find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len()),
            );
            let kind = match suffix {
                "Cache" => None,
                "iCache" => Some(CacheKind::Instruction),
                "dCache" => Some(CacheKind::Data),
                "uCache" => Some(CacheKind::Unified),
                _ => return Ok(None),
            };
            match digits.parse::<u8>() {
                Ok(l) => (Some(l), kind),
                Err(_) => return Ok(None),
            }
        }
    };
    let num = |name: &str| -> Res<Option<i64>> {
        match n.attribute(name) {
            Some(s) => s.trim().parse::<i64>().map(Some).map_err(|_| {
                xml_err!(
                    at(doc, n),
                    "{name} '{s}' of a {ty} object is not an integer"
                )
            }),
            None => Ok(None),
        }
    };
    let level = match level_from_name {
        Some(l) => l,
        None => match num("depth")? {
            Some(d) if (1..=255).contains(&d) => d as u8,
            _ => {
                return Err(xml_err!(
                    at(doc, n),
                    "a {ty} object needs a cache level (depth=\"1\"..)"
                ))
            }
        },
    };
    // hwloc's cache_type: 0 unified, 1 data, 2 instruction.
    let kind = match (kind_from_name, num("cache_type")?) {
        (Some(k), _) => k,
        (None, Some(1)) => CacheKind::Data,
        (None, Some(2)) => CacheKind::Instruction,
        (None, _) => CacheKind::Unified,
    };
    let size = num("cache_size")?.unwrap_or(0).max(0) as u64;
    let line_size = num("cache_linesize")?
        .unwrap_or(0)
        .clamp(0, u32::MAX as i64) as u32;
    // hwloc: -1 fully associative, 0 unknown.
    let ways = match num("cache_associativity")? {
        Some(-1) => Some(0),
        Some(w) if w > 0 => Some(w.min(u32::MAX as i64) as u32),
        _ => None,
    };
    Ok(Some(CacheAttr {
        level,
        kind,
        size,
        line_size,
        ways,
    }))
}

/// hwloc bitmap text: comma-separated 32-bit hex words, most significant first, each with
/// `0x`; a zero word may be written empty (`0x00000001,,0x0`); `0xf...f` as the first word
/// means "all higher bits set", kept up to Linux's NR_CPUS limit.
fn mask(doc: &Document, n: Node, attr: &str, text: &str) -> Res<CpuSet> {
    let cleaned: Vec<String> = text
        .trim()
        .split(',')
        .map(|w| {
            let w = w.trim();
            // The infinite marker is filled in below; an empty word is a zero word.
            if w == "0xf...f" || w.is_empty() {
                "0".to_string()
            } else {
                w.strip_prefix("0x")
                    .or_else(|| w.strip_prefix("0X"))
                    .unwrap_or(w)
                    .to_string()
            }
        })
        .collect();
    if text.trim().is_empty()
        || cleaned
            .iter()
            .any(|w| w.is_empty() || w.len() > 8 || !w.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(xml_err!(at(doc, n), "{attr}=\"{text}\" is not an hwloc CPU mask (comma-separated 32-bit hex words like 0x000000ff,0xffffffff)"));
    }
    let mut set = CpuSet::parse_mask(&cleaned.join(","))
        .map_err(|e| xml_err!(at(doc, n), "{attr}: {}", e.message))?;
    if text.trim().starts_with("0xf...f") {
        // Infinite set: every CPU from the first written word on, up to Linux's NR_CPUS limit.
        let from = 32 * (cleaned.len() as u32 - 1);
        for cpu in from..LINUX_MAX_CPUS {
            set.insert(cpu);
        }
    }
    Ok(set)
}

/// The largest CPU count Linux can be built for (NR_CPUS); bounds hwloc's infinite sets.
const LINUX_MAX_CPUS: u32 = 8192;

/// `<cpukind cpuset=.. forced_efficiency=..>` elements, in file order (hwloc writes them from
/// least to most efficient).
fn cpu_kinds(doc: &Document, root: Node) -> Res<Vec<CoreKind>> {
    let mut kinds = Vec::new();
    for (i, k) in root
        .children()
        .filter(|c| c.has_tag_name("cpukind"))
        .enumerate()
    {
        let cpuset = match k.attribute("cpuset") {
            Some(s) => mask(doc, k, "cpuset", s)?,
            None => return Err(xml_err!(at(doc, k), "<cpukind> without a cpuset")),
        };
        let info = infos(k);
        let name = if let Some(t) = info.get("CoreType") {
            t.clone()
        } else if let Some(c) = info.get("LinuxCapacity") {
            format!("capacity={c}")
        } else if let Some(f) = info.get("FrequencyMaxMHz") {
            format!("max_freq={f}MHz")
        } else {
            format!("kind{i}")
        };
        let efficiency = k
            .attribute("forced_efficiency")
            .and_then(|e| e.parse::<u32>().ok())
            .unwrap_or(i as u32);
        kinds.push(CoreKind {
            name,
            cpuset,
            efficiency,
        });
    }
    Ok(kinds)
}

/// hwloc 2.x `<distances2 type="NUMANode">`: the latency matrix between NUMA nodes.
fn numa_distances_v2(
    doc: &Document,
    root: Node,
    gp: &BTreeMap<u64, u32>,
) -> Res<Option<BTreeMap<(u32, u32), u32>>> {
    let candidates: Vec<Node> = root
        .children()
        .filter(|c| c.has_tag_name("distances2") && c.attribute("type") == Some("NUMANode"))
        .collect();
    // Prefer the OS-provided latency matrix over other distance kinds.
    let Some(d) = candidates
        .iter()
        .find(|c| c.attribute("name") == Some("NUMALatency"))
        .or_else(|| candidates.first())
    else {
        return Ok(None);
    };
    let n: usize = d
        .attribute("nbobjs")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| xml_err!(at(doc, *d), "<distances2> without a valid nbobjs"))?;
    let numbers =
        |tag: &str| -> Res<Vec<u64>> {
            let mut out = Vec::new();
            for c in d.children().filter(|c| c.has_tag_name(tag)) {
                for tok in c.text().unwrap_or("").split_whitespace() {
                    out.push(tok.parse::<u64>().map_err(|_| {
                        xml_err!(at(doc, c), "'{tok}' in <{tag}> is not an integer")
                    })?);
                }
            }
            Ok(out)
        };
    let idx = numbers("indexes")?;
    let vals = numbers("u64values")?;
    if idx.len() != n || vals.len() != n * n {
        return Err(xml_err!(
            at(doc, *d),
            "<distances2> of {n} objects has {} indexes and {} values (expected {n} and {})",
            idx.len(),
            vals.len(),
            n * n
        ));
    }
    let by_gp = d.attribute("indexing") == Some("gp");
    let mut os = Vec::with_capacity(n);
    for &i in &idx {
        let o = if by_gp {
            *gp.get(&i).ok_or_else(|| {
                xml_err!(
                    at(doc, *d),
                    "<distances2> names gp_index {i}, which is no NUMA node"
                )
            })?
        } else {
            u32::try_from(i).map_err(|_| xml_err!(at(doc, *d), "NUMA index {i} is too large"))?
        };
        os.push(o);
    }
    let mut map = BTreeMap::new();
    for (a, &oa) in os.iter().enumerate() {
        for (b, &ob) in os.iter().enumerate() {
            map.insert((oa, ob), vals[a * n + b].min(u32::MAX as u64) as u32);
        }
    }
    Ok(Some(map))
}

/// hwloc 1.x `<distances nbobjs= latency_base=><latency value=/>..`: relative latencies between
/// the NUMA nodes in logical order, scaled by `latency_base`.
fn numa_distances_v1(
    doc: &Document,
    found: &[Node],
    numa: &[u32],
) -> Res<Option<BTreeMap<(u32, u32), u32>>> {
    for d in found {
        let n: usize = d
            .attribute("nbobjs")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if n == 0 || n != numa.len() {
            continue; // distances between other objects than NUMA nodes
        }
        let base: f64 = d
            .attribute("latency_base")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1.0);
        let mut vals = Vec::new();
        for l in d.children().filter(|c| c.has_tag_name("latency")) {
            let v: f64 = l
                .attribute("value")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| xml_err!(at(doc, l), "<latency> without a numeric value"))?;
            vals.push(v);
        }
        if vals.len() != n * n {
            return Err(xml_err!(
                at(doc, *d),
                "<distances> of {n} nodes has {} latencies, expected {}",
                vals.len(),
                n * n
            ));
        }
        let mut map = BTreeMap::new();
        for (a, &oa) in numa.iter().enumerate() {
            for (b, &ob) in numa.iter().enumerate() {
                map.insert((oa, ob), (vals[a * n + b] * base).round().max(0.0) as u32);
            }
        }
        return Ok(Some(map));
    }
    Ok(None)
}

/// The `pci_busid` attribute of `n` (`what`, e.g. "a PCIDev object", names it in errors).
fn pci_busid(doc: &Document, n: Node, what: &str) -> Res<String> {
    let text = n
        .attribute("pci_busid")
        .ok_or_else(|| xml_err!(at(doc, n), "{what} without pci_busid"))?;
    crate::io::parse_busid(text).ok_or_else(|| {
        xml_err!(
            at(doc, n),
            "pci_busid '{text}' is not a PCI bus id (domain:bus:device.function)"
        )
    })
}

/// `[VVVV:DDDD]`, the vendor and device ids of a `pci_type` attribute, in hex.
fn vendor_device(word: &str) -> Option<(u16, u16)> {
    let (v, d) = word.trim_matches(['[', ']']).split_once(':')?;
    Some((
        u16::from_str_radix(v, 16).ok()?,
        u16::from_str_radix(d, 16).ok()?,
    ))
}

/// A `PCIDev` object and the `OSDev` objects below it. `pci_type` reads
/// `CCCC [VVVV:DDDD] [subvendor:subdevice] revision` (class and subclass first).
fn pci_device(
    doc: &Document,
    n: Node,
    near: Option<&CpuSet>,
    osdev_bits: bool,
) -> Res<crate::io::PciDevice> {
    use crate::io::{OsDevice, OsDeviceKind};
    let busid = pci_busid(doc, n, "a PCIDev object")?;
    let ty = n.attribute("pci_type").unwrap_or("");
    let mut words = ty.split_whitespace();
    let class = words.next().and_then(|c| u16::from_str_radix(c, 16).ok());
    let ids = words.next().and_then(vendor_device);
    let (Some(class), Some((vendor, device))) = (class, ids) else {
        return Err(xml_err!(
            at(doc, n),
            "pci_type '{ty}' of PCI device {busid} is not 'CLASS [VENDOR:DEVICE] ...' in hex"
        ));
    };
    let os_devices = n
        .children()
        .filter(|c| c.has_tag_name("object") && c.attribute("type") == Some("OSDev"))
        .filter_map(|c| {
            let name = c.attribute("name")?.to_string();
            let t: u32 = c.attribute("osdev_type")?.trim().parse().ok()?;
            let kind = if osdev_bits {
                // hwloc 3: storage 1, memory 2, GPU 4, co-processor 8, network 16,
                // OpenFabrics 32, DMA 64 (a GPU that computes is GPU|co-processor).
                match t {
                    t if t & 4 != 0 => OsDeviceKind::Gpu,
                    t if t & 8 != 0 => OsDeviceKind::CoProcessor,
                    t if t & 32 != 0 => OsDeviceKind::OpenFabrics,
                    t if t & 16 != 0 => OsDeviceKind::Network,
                    t if t & 64 != 0 => OsDeviceKind::Dma,
                    _ => OsDeviceKind::Storage,
                }
            } else {
                // hwloc 2: block 0, GPU 1, network 2, OpenFabrics 3, DMA 4, co-processor 5.
                match t {
                    0 => OsDeviceKind::Storage,
                    1 => OsDeviceKind::Gpu,
                    2 => OsDeviceKind::Network,
                    3 => OsDeviceKind::OpenFabrics,
                    4 => OsDeviceKind::Dma,
                    _ => OsDeviceKind::CoProcessor,
                }
            };
            Some(OsDevice { name, kind })
        })
        .collect();
    Ok(crate::io::PciDevice {
        busid,
        vendor,
        device,
        class,
        local_cpus: near.cloned().unwrap_or_default(),
        numa_node: None,
        os_devices,
        attached_to: 0,
        bridge: None,
        link_mbs: link_mbs(n),
    })
}

/// `pci_link_speed` (GB/s) in MB/s.
fn link_mbs(n: Node) -> Option<u32> {
    n.attribute("pci_link_speed")
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0 && *v < 1e6)
        .map(|v| (v * 1000.0).round() as u32)
}

/// A `Bridge` object: `bridge_type` is `UPSTREAM-DOWNSTREAM` (0 host, 1 PCI),
/// `bridge_pci` the buses below it (`0000:[04-04]`); a PCI bridge has a bus id and ids.
fn bridge(doc: &Document, n: Node, near: Option<&CpuSet>) -> Res<crate::io::PciBridge> {
    let host = n
        .attribute("bridge_type")
        .and_then(|t| t.split('-').next())
        .is_some_and(|u| u.trim() == "0");
    let (busid, vendor, device) = if host {
        (None, 0, 0)
    } else {
        let busid = pci_busid(doc, n, "a PCI Bridge object")?;
        let ids = n
            .attribute("pci_type")
            .and_then(|t| t.split_whitespace().nth(1))
            .and_then(vendor_device)
            .unwrap_or((0, 0));
        (Some(busid), ids.0, ids.1)
    };
    // `0000:[04-04]`.
    let buses = n.attribute("bridge_pci").and_then(|t| {
        let (d, r) = t.trim().split_once(':')?;
        let (a, b) = r.trim_matches(['[', ']']).split_once('-')?;
        Some((
            u32::from_str_radix(d, 16).ok()?,
            u8::from_str_radix(a, 16).ok()?,
            u8::from_str_radix(b, 16).ok()?,
        ))
    });
    let (domain, secondary_bus, subordinate_bus) = buses.unwrap_or((0, 0, 0));
    Ok(crate::io::PciBridge {
        busid,
        vendor,
        device,
        domain,
        secondary_bus,
        subordinate_bus,
        parent: None,
        local_cpus: near.cloned().unwrap_or_default(),
        attached_to: 0,
        link_mbs: link_mbs(n),
    })
}
