//! Every hwloc Linux dump in tests/data must read into the same topology lstopo showed for
//! it: packages, cores, L1d/L2/L3 groups, NUMA locality, allowed and offline PUs.
//! The comparison is done by tests/tools/hwloc_console_check.py, the project's referee.

use autopin_topology::source::sysfs;
use std::process::Command;

#[test]
fn every_dump_matches_lstopo() {
    let checker = autopin_testkit::tool("hwloc_console_check.py");
    let dumps = autopin_testkit::hwloc_dump_names();
    assert!(
        dumps.len() >= 16,
        "expected the repository's dumps, found {}",
        dumps.len()
    );
    let mut failures = Vec::new();
    for name in &dumps {
        let tmp = tempfile::tempdir().unwrap();
        let root = autopin_testkit::hwloc_dump(name);
        let console_path = autopin_testkit::data(&format!("hwloc-linux/{name}.console"));
        let machine = match sysfs::read_with_affinity(&root, None) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: read failed: {e}"));
                continue;
            }
        };
        machine.validate().unwrap();
        if name == "40intel64-4n10c+pci-conflicts" {
            // The RAID controller's host bridge says it is local to CPUs 0-3 (its
            // `local_cpus` mask; the list says 0-39), one CPU of each package: hwloc reports
            // invalid information from the operating system and hangs it from the machine.
            assert_eq!(machine.warnings.len(), 1, "{name}: {:?}", machine.warnings);
            let w = &machine.warnings[0];
            assert!(
                w.ends_with("sys/bus/pci/devices/0000:00:00.0/local_cpus: PCI host bridge 0000:[00-01]: its CPUs 0-3 cut across Package L#0 (CPUs 0,4,8,12,16,20,24,28,32,36) without holding it all (hwloc reports this as invalid information from the operating system); it hangs from the machine, the smallest object holding them, as in hwloc")
                    && w.contains("hangs from the machine"),
                "{name}: {w}"
            );
        } else {
            assert!(
                machine.warnings.is_empty(),
                "{name}: a sound dump reads without warnings: {:?}",
                machine.warnings
            );
        }
        // The JSON document loads back into the identical model.
        let doc =
            serde_json::to_string(&autopin_topology::source::json::to_document(&machine)).unwrap();
        let back = autopin_topology::source::json::from_str(&doc)
            .unwrap_or_else(|e| panic!("{name}: reload failed: {e}"));
        assert!(back == machine, "{name}: JSON round trip changed the model");
        let json = tmp.path().join("ours.json");
        std::fs::write(
            &json,
            serde_json::to_string(&serde_json::json!({ "pus": machine.flat_pus() })).unwrap(),
        )
        .unwrap();
        let out = Command::new("python3")
            .arg(&checker)
            .arg(&console_path)
            .arg(&json)
            .output()
            .expect("python3 runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let console = autopin_testkit::hwloc_console(name);
        let expected_kinds = kinds_from_console(&console);
        let ours_kinds: Vec<Vec<u32>> = {
            let mut by: std::collections::BTreeMap<usize, Vec<u32>> = Default::default();
            for p in machine.flat_pus().iter().filter(|p| p.online) {
                if let Some(k) = p.kind {
                    by.entry(k).or_default().push(p.os);
                }
            }
            by.into_values().collect()
        };
        if expected_kinds != ours_kinds {
            failures.push(format!(
                "{name}: core kinds differ: lstopo {expected_kinds:?}, ours {ours_kinds:?}"
            ));
        }
        // Each NUMA node hangs from the same kind of object as in lstopo's tree.
        let theirs = numa_parents_from_console(&console);
        // Where the dump's sysfs has no core ids, lstopo lists no cores and autopin models
        // one per PU: a node local to one PU then hangs from that core in autopin and from
        // the object lstopo has there instead.
        let no_cores = !console.contains("Core L#");
        let ours: std::collections::BTreeMap<u32, String> = machine
            .numa_nodes
            .iter()
            .map(|n| {
                let k = kind_word(&machine.obj(n.attached_to).type_label());
                let k = match (no_cores, theirs.get(&n.os_index)) {
                    (true, Some(t)) if k == "Core" => t.clone(),
                    _ => k,
                };
                (n.os_index, k)
            })
            .collect();
        if !theirs.is_empty() && theirs != ours {
            failures.push(format!(
                "{name}: NUMA nodes hang from other objects: lstopo {theirs:?}, ours {ours:?}"
            ));
        }
        // Every memory-side cache lstopo lists, with its logical index and size, under
        // the same CPU-side object, in the same cache, holding the same NUMA nodes.
        let theirs = mem_caches_from_console(&console);
        let lines = |word: &str| {
            console
                .lines()
                .take_while(|l| !l.trim_start().starts_with("depth"))
                .filter(|l| l.contains(word))
                .count()
        };
        assert_eq!(
            theirs.len(),
            lines("MemCache L#"),
            "{name}: MemCache lines read"
        );
        let ours: Vec<MemCacheLine> = machine
            .mem_caches
            .iter()
            .map(|c| {
                let o = machine.obj(c.attached_to);
                MemCacheLine {
                    index: c.logical_index,
                    size: c.cache.size,
                    under: if c.attached_to == 0 {
                        "Machine".to_string()
                    } else {
                        format!("{} L#{}", kind_word(&o.type_label()), o.logical_index)
                    },
                    inside: c.parent.map(|p| machine.mem_caches[p].logical_index),
                    nodes: machine
                        .numa_nodes
                        .iter()
                        .filter(|n| {
                            n.mem_cache.is_some_and(|m| {
                                machine.mem_caches[m].logical_index == c.logical_index
                            })
                        })
                        .map(|n| n.os_index)
                        .collect(),
                }
            })
            .collect();
        if theirs != ours {
            failures.push(format!(
                "{name}: memory-side caches differ: lstopo {theirs:?}, ours {ours:?}"
            ));
        }
        // Every host bridge and PCI bridge lstopo lists, under the same CPU-side object
        // and behind the same bridge.
        let theirs = io_parents_from_console(&console);
        assert_eq!(
            theirs.len(),
            lines("HostBridge L#") + lines("PCIBridge L#"),
            "{name}: bridge lines read"
        );
        let ours = io_parents_of(&machine);
        if theirs != ours {
            failures.push(format!(
                "{name}: I/O parents differ: lstopo {theirs:?}, ours {ours:?}"
            ));
        }
        // Every PCI device lstopo lists, with the same bus id, under the same CPU-side
        // object, with the same OS device names.
        let theirs = pci_from_console(&console);
        let ours: std::collections::BTreeMap<String, (String, Vec<String>)> = machine
            .io
            .iter()
            .map(|d| {
                let o = machine.obj(d.attached_to);
                let at = if d.attached_to == 0 {
                    "Machine".to_string()
                } else {
                    format!("{} L#{}", kind_word(&o.type_label()), o.logical_index)
                };
                let mut names: Vec<String> = d.os_devices.iter().map(|x| x.name.clone()).collect();
                names.sort();
                (d.busid.clone(), (at, names))
            })
            .collect();
        if theirs != ours {
            failures.push(format!(
                "{name}: PCI devices differ: lstopo {theirs:?}, ours {ours:?}"
            ));
        }
        if !out.status.success() || !text.trim_end().ends_with("OK") {
            failures.push(format!("{name}:\n{text}"));
        } else {
            eprintln!("{name}: OK");
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} dumps differ from lstopo:\n{}",
        failures.len(),
        dumps.len(),
        failures.join("\n")
    );
}

/// PUs grouped by the `cpukind=K` lstopo prints on their core (or PU), ordered by K.
fn kinds_from_console(console: &str) -> Vec<Vec<u32>> {
    let mut by: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    let mut current: Option<u32> = None;
    for line in console.lines() {
        let t = line.trim_start();
        let kind = t
            .split("cpukind=")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|k| k.parse().ok());
        if t.starts_with("Core ") {
            current = kind;
        } else if t.starts_with("PU ") {
            let os = t
                .split("P#")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse::<u32>().ok());
            if let (Some(k), Some(os)) = (kind.or(current), os) {
                by.entry(k).or_default().push(os);
            }
        }
    }
    by.into_values()
        .map(|mut v| {
            v.sort_unstable();
            v
        })
        .collect()
}

/// An object's kind without lstopo's numbering or our annotations: "Group0" and
/// "Group(kind)" are both "Group", "L3d" is "L3".
fn kind_word(label: &str) -> String {
    let word: String = label
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    match word.as_str() {
        w if w.starts_with("Group") => "Group".into(),
        w if w.starts_with('L') && w.len() >= 3 && w[1..2].chars().all(|c| c.is_ascii_digit()) => {
            w[..2].to_string()
        }
        w => w.to_string(),
    }
}

/// NUMA node OS index → the kind of object lstopo lists it under: the last object of the
/// nearest less indented line ("Machine (…) + Package L#0" → Package). A node behind a
/// memory-side cache ("MemCache … + NUMANode") belongs to the object above the cache.
fn numa_parents_from_console(console: &str) -> std::collections::BTreeMap<u32, String> {
    let mut out = std::collections::BTreeMap::new();
    walk_console(console, |_, text, stack| {
        let parts: Vec<&str> = text.split(" + ").collect();
        if let Some(at) = parts.iter().position(|p| p.starts_with("NUMANode")) {
            let os = parts[at]
                .split("P#")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse::<u32>().ok());
            // The object before it on the same line, unless that is a memory-side cache.
            let before = parts[..at]
                .iter()
                .rev()
                .find(|p| !p.starts_with("MemCache"))
                .map(|p| p.split_whitespace().next().unwrap_or("").to_string());
            let parent = before.or_else(|| {
                stack
                    .iter()
                    .rev()
                    .map(|(_, l)| l.split(" + ").last().unwrap_or(""))
                    .find(|l| !l.starts_with("MemCache"))
                    .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            });
            if let (Some(os), Some(p)) = (os, parent) {
                out.insert(os, kind_word(&p));
            }
            // A node encloses nothing.
            return false;
        }
        true
    });
    out
}

/// Walks the tree lines of an lstopo console, each with its indent, its text and the lines
/// it is nested in (innermost last); `visit` says whether later lines may nest in it.
fn walk_console(console: &str, mut visit: impl FnMut(usize, &str, &[(usize, String)]) -> bool) {
    let mut stack: Vec<(usize, String)> = Vec::new();
    for line in console.lines() {
        if line.trim().is_empty() || !line.starts_with([' ', 'M']) {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let text = line.trim_start();
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        if visit(indent, text, &stack) {
            stack.push((indent, text.to_string()));
        }
    }
}

/// Bus id → (the CPU-side object lstopo lists the device under, as `Machine` or
/// `Package L#1`; the names of its OS devices) for every `PCI` line of the console.
fn pci_from_console(console: &str) -> std::collections::BTreeMap<String, (String, Vec<String>)> {
    let mut out: std::collections::BTreeMap<String, (String, Vec<String>)> = Default::default();
    let mut last_pci: Option<(usize, String)> = None;
    walk_console(console, |indent, text, stack| {
        let last = text.split(" + ").last().unwrap_or(text);
        if last.starts_with("PCI L#") {
            let busid = last
                .split("busid=")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or("")
                .to_string();
            let parent = stack
                .iter()
                .rev()
                .map(|(_, l)| l.split(" + ").last().unwrap_or(l))
                .find(|l| !l.starts_with("HostBridge") && !l.starts_with("PCI"))
                .map(|l| {
                    let mut w = l.split_whitespace();
                    let ty = w.next().unwrap_or("");
                    match w.next().filter(|x| x.starts_with("L#")) {
                        Some(li) if ty != "Machine" => format!("{} {li}", kind_word(ty)),
                        _ => "Machine".to_string(),
                    }
                })
                .unwrap_or_default();
            out.insert(busid.clone(), (parent, Vec::new()));
            last_pci = Some((indent, busid));
        } else if last.starts_with("OSDev") {
            if let Some((pi, busid)) = &last_pci {
                if indent > *pi {
                    if let Some(name) = last.rsplit('"').nth(1) {
                        out.get_mut(busid).unwrap().1.push(name.to_string());
                    }
                }
            }
        }
        true
    });
    for v in out.values_mut() {
        v.1.sort();
    }
    out
}

/// One memory-side cache as lstopo lists it: `MemCache L#1 (… size=4194304KB …)` (hwloc 2)
/// or `MemCache L#1 (… size=4GiB …)` (hwloc 3), the CPU-side object above it, the cache it
/// is in, the NUMA nodes right inside it.
#[derive(Debug, PartialEq, Eq)]
struct MemCacheLine {
    index: u32,
    size: u64,
    under: String,
    inside: Option<u32>,
    nodes: Vec<u32>,
}

/// `4194304KB`, `16GiB`, `512MB` → bytes (hwloc's units are powers of 1024 in both spellings).
fn lstopo_bytes(text: &str) -> Option<u64> {
    let digits: String = text.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n: u64 = digits.parse().ok()?;
    let unit = &text[digits.len()..];
    let shift = match unit.trim_end_matches("iB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    Some(n << shift)
}

/// The line's kind and `L#`, as the model names it: `Package L#1`, or `Machine`.
fn cpu_side_label(line: &str) -> String {
    let part = line.split(" + ").last().unwrap_or(line);
    let mut w = part.split_whitespace();
    let ty = w.next().unwrap_or("");
    match w.next().filter(|x| x.starts_with("L#")) {
        Some(li) if ty != "Machine" => format!("{} {li}", kind_word(ty)),
        _ => "Machine".to_string(),
    }
}

fn mem_caches_from_console(console: &str) -> Vec<MemCacheLine> {
    let mut out: Vec<MemCacheLine> = Vec::new();
    walk_console(console, |_, text, stack| {
        let index_of = |l: &str| -> Option<u32> {
            l.strip_prefix("MemCache L#")?
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        };
        let enclosing = stack
            .iter()
            .rev()
            .map(|(_, l)| l.split(" + ").last().unwrap_or(""))
            .find(|l| !l.is_empty());
        if let Some(i) = index_of(text) {
            let attrs = text.split_once('(').map_or("", |(_, a)| a);
            let size = attrs
                .split(|c: char| c.is_whitespace() || c == ')')
                .find_map(|w| w.strip_prefix("size="))
                .and_then(lstopo_bytes)
                // Without -v: `MemCache L#0 (16GB)`.
                .or_else(|| lstopo_bytes(attrs.trim_end_matches(')')))
                .unwrap_or(0);
            let under = stack
                .iter()
                .rev()
                .map(|(_, l)| l.as_str())
                .find(|l| !l.split(" + ").last().unwrap_or("").starts_with("MemCache"))
                .map(cpu_side_label)
                .unwrap_or_else(|| "Machine".into());
            out.push(MemCacheLine {
                index: i,
                size,
                under,
                inside: enclosing.and_then(index_of),
                nodes: Vec::new(),
            });
            return true;
        }
        if text.starts_with("NUMANode") {
            if let Some(c) = enclosing.and_then(index_of) {
                let os = text
                    .split("P#")
                    .nth(1)
                    .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|n| n.parse::<u32>().ok());
                if let (Some(os), Some(line)) = (os, out.iter_mut().find(|m| m.index == c)) {
                    line.nodes.push(os);
                }
            }
            return false;
        }
        true
    });
    out.sort_by_key(|m| m.index);
    out
}

/// For every bridge lstopo lists (`HostBridge` by its buses, `PCIBridge` by its bus id):
/// the CPU-side object above it and the bridge it is behind (empty for a host bridge).
fn io_parents_from_console(console: &str) -> std::collections::BTreeMap<String, (String, String)> {
    let mut out = std::collections::BTreeMap::new();
    walk_console(console, |_, text, stack| {
        let last = text.split(" + ").last().unwrap_or(text);
        let attr = |name: &str| {
            last.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_string)
        };
        let key = if last.starts_with("HostBridge") {
            attr("buses").map(|b| format!("HostBridge {b}"))
        } else if last.starts_with("PCIBridge") {
            attr("busid").map(|b| format!("PCIBridge {b}"))
        } else {
            None
        };
        if let Some(k) = key {
            let parents: Vec<&str> = stack
                .iter()
                .rev()
                .map(|(_, l)| l.split(" + ").last().unwrap_or(""))
                .collect();
            let behind = parents
                .iter()
                .find(|l| l.starts_with("HostBridge") || l.starts_with("PCIBridge"))
                .map(|l| {
                    let ty = l.split_whitespace().next().unwrap_or("");
                    let id = l
                        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
                        .find_map(|w| {
                            w.strip_prefix(if ty == "HostBridge" {
                                "buses="
                            } else {
                                "busid="
                            })
                        })
                        .unwrap_or("");
                    format!("{ty} {id}")
                })
                .unwrap_or_default();
            let under = parents
                .iter()
                .find(|l| !l.starts_with("HostBridge") && !l.starts_with("PCI"))
                .map(|l| cpu_side_label(l))
                .unwrap_or_else(|| "Machine".into());
            out.insert(k, (under, behind));
        }
        true
    });
    out
}

/// The same for the model, for the bridges lstopo shows by default: those with a device it
/// lists (storage, network, display...) behind them.
fn io_parents_of(
    m: &autopin_topology::Machine,
) -> std::collections::BTreeMap<String, (String, String)> {
    let key = |b: &autopin_topology::PciBridge| match &b.busid {
        Some(id) => format!("PCIBridge {id}"),
        None => format!("HostBridge {}", b.buses()),
    };
    let mut shown = vec![false; m.pci_bridges.len()];
    for d in &m.io {
        let mut at = d.bridge;
        while let Some(b) = at {
            shown[b] = true;
            at = m.pci_bridges[b].parent;
        }
    }
    m.pci_bridges
        .iter()
        .enumerate()
        .filter(|(i, _)| shown[*i])
        .map(|(_, b)| {
            let o = m.obj(b.attached_to);
            let under = if b.attached_to == 0 {
                "Machine".to_string()
            } else {
                format!("{} L#{}", kind_word(&o.type_label()), o.logical_index)
            };
            let behind = b.parent.map(|p| key(&m.pci_bridges[p])).unwrap_or_default();
            (key(b), (under, behind))
        })
        .collect()
}
