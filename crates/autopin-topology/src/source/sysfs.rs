//! Reading the machine from Linux sysfs and procfs, relative to a root directory so that
//! dumps of other machines (hwloc's `hwloc-gather-topology` tarballs) read like the live one.
//!
//! Every attribute has the fallback hwloc's Linux backend gives it (topology-linux.c): a CPU
//! whose `online` file is empty or unreadable is online, an unreadable id is unknown, a cache
//! without a readable level is skipped, a NUMA node without a readable cpumap is dropped, an
//! unreadable distance file drops the distance matrix. Absent files are normal (old kernels,
//! other architectures) and pass silently; a file that exists but is empty, garbage or
//! unreadable gives one warning naming it (kept in [`Machine::warnings`]). Reading fails
//! only when there is no machine to describe: no root, no `sys/devices/system/cpu`, no CPU.

use crate::builder::{Builder, NumaSpec};
use crate::cpuset::CpuSet;
use crate::error::{Result, TopologyError};
use crate::model::*;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Reads the machine below `root` (`/` for the live system). On the live system the process
/// affinity mask also limits the allowed CPUs.
pub fn read(root: &Path) -> Result<Machine> {
    let live = root == Path::new("/");
    let affinity = if live {
        crate::affinity::get(0).ok()
    } else {
        None
    };
    read_with_affinity(root, affinity)
}

/// Like [`read`], with the affinity mask given explicitly (tests, or another process).
pub fn read_with_affinity(root: &Path, affinity: Option<CpuSet>) -> Result<Machine> {
    read_with_faults(root, affinity, &|_| None)
}

/// Called before every file or directory access with its full path; an error returned is what
/// the access gets instead of touching the file (tests inject permission-denied this way,
/// which `chmod` cannot do for root).
pub type Fault<'a> = &'a dyn Fn(&Path) -> Option<std::io::Error>;

/// Like [`read_with_affinity`], with injected access failures.
pub fn read_with_faults(root: &Path, affinity: Option<CpuSet>, fault: Fault) -> Result<Machine> {
    let fs = SysfsFiles::new(root, fault);
    let cpu_dir = fs.path("sys/devices/system/cpu");
    if !root.is_dir() {
        return Err(TopologyError::file(
            root,
            "no such directory (expected a Linux root with sys/ and proc/)",
        ));
    }
    if !cpu_dir.is_dir() {
        return Err(TopologyError::file(
            &cpu_dir,
            "missing: not a Linux sysfs root (no sys/devices/system/cpu)",
        ));
    }
    // Without the CPU directory's listing there is nothing to describe.
    let present = fs
        .numbered_dirs(&cpu_dir, "cpu")
        .map_err(|e| TopologyError::file(&cpu_dir, format!("cannot list: {e}")))?;
    if present.is_empty() {
        return Err(TopologyError::file(&cpu_dir, "no cpuN directories"));
    }
    let present_set: CpuSet = present.iter().copied().collect();
    let online = online_cpus(&fs, &present, &present_set);
    let offline = present_set.difference(&online);

    let (cg_cpus, cg_mems) = cgroup_cpuset(&fs);
    let mut allowed = online.clone();
    if let Some(c) = &cg_cpus {
        allowed = allowed.intersection(c);
    }
    if let Some(a) = &affinity {
        allowed = allowed.intersection(a);
    }

    let mut b = Builder::new();
    b.offline = offline;
    b.info
        .insert("source".into(), format!("sysfs:{}", root.display()));
    if let Some((h, _)) = fs.text("proc/sys/kernel/hostname", "no host name") {
        b.info.insert("hostname".into(), h.trim().to_string());
    }
    let cpuinfo = cpu_info(&fs);
    let kinds = core_kinds(&fs, &online);
    let kind_of = |cpu: u32| kinds.iter().position(|k| k.cpuset.contains(cpu));
    // hwloc's quirk for AMD families 15h/16h (Bulldozer and its successors): the kernel puts
    // both integer cores of a compute unit into `thread_siblings`, but gives them distinct
    // `core_id`s. Whether that is so is decided once, on the first CPU with a sibling.
    let mut thread_with_core_id: Option<bool> = if cpuinfo.amd_compute_units {
        None
    } else {
        Some(false)
    };

    // Linux gives every CPU the same topology attributes, so list them once and never try
    // to open the ones this kernel does not have (thousands of failed opens on big machines).
    let first = online.first().unwrap_or(0);
    let topo_names: Option<BTreeSet<String>> = fs
        .dir_names(&fs.path(&format!("sys/devices/system/cpu/cpu{first}/topology")))
        .ok()
        .map(|v| v.into_iter().collect());
    let has = |name: &&str| topo_names.as_ref().is_none_or(|n| n.contains(*name));
    // Keyed by kind (the topology levels by index, caches by 10 + their level: a u16, since a
    // cache's level may be anything up to 255) and CPU set.
    let mut seen: BTreeSet<(u16, String, u32, Option<u32>)> = BTreeSet::new();
    let mut packages: BTreeMap<String, (CpuSet, Option<u32>)> = BTreeMap::new();
    let mut has_core_info = false;
    for cpu in online.iter() {
        let topo = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        let sets = [
            (
                ObjType::Package,
                &["package_cpus_list", "core_siblings_list"][..],
                &["package_cpus", "core_siblings"][..],
                "physical_package_id",
            ),
            (
                ObjType::Die,
                &["die_cpus_list"][..],
                &["die_cpus"][..],
                "die_id",
            ),
            (
                ObjType::Group,
                &["cluster_cpus_list"][..],
                &["cluster_cpus"][..],
                "cluster_id",
            ),
            (
                ObjType::Group,
                &["book_siblings_list"][..],
                &["book_siblings"][..],
                "book_id",
            ),
            (
                ObjType::Group,
                &["drawer_siblings_list"][..],
                &["drawer_siblings"][..],
                "drawer_id",
            ),
            (
                ObjType::Core,
                &["core_cpus_list", "thread_siblings_list"][..],
                &["core_cpus", "thread_siblings"][..],
                "core_id",
            ),
        ];
        for (i, (ty, lists, masks, id_file)) in sets.iter().enumerate() {
            let lists: Vec<&str> = lists.iter().copied().filter(|n| has(n)).collect();
            let masks: Vec<&str> = masks.iter().copied().filter(|n| has(n)).collect();
            let Some(set) = fs.set(&topo, &lists, &masks) else {
                continue;
            };
            // Sibling lists may name offline CPUs; the tree holds online ones only. As in hwloc,
            // an object is made only from the files of its first CPU: when Linux contradicts
            // itself (a sibling mask that disagrees between CPUs), the first CPU's word wins
            // and the contradicting sets are dropped rather than nested wrongly.
            let mut set = set.intersection(&online);
            // hwloc ignores dies and clusters of a single PU (default values on architectures
            // that have neither).
            if matches!(*id_file, "die_id" | "cluster_id") && set.len() == 1 {
                continue;
            }
            let id = |fs: &SysfsFiles, c: u32| {
                fs.number(
                    &format!("sys/devices/system/cpu/cpu{c}/topology/{id_file}"),
                    "the id is taken as unknown",
                )
                .and_then(|v| u32::try_from(v).ok())
            };
            if *ty == ObjType::Core && set.len() > 1 {
                if thread_with_core_id.is_none() {
                    let sibling = set.iter().find(|&c| c != cpu).unwrap_or(cpu);
                    thread_with_core_id = Some(id(&fs, cpu) != id(&fs, sibling));
                }
                if thread_with_core_id == Some(true) {
                    // A compute unit's integer cores: one core each, as hwloc makes them.
                    set = CpuSet::from_cpus([cpu]);
                }
            }
            if set.first() != Some(cpu) {
                continue;
            }
            let id = id(&fs, cpu);
            if *ty == ObjType::Core {
                has_core_info = true;
            }
            if *ty == ObjType::Package {
                packages.entry(set.to_list()).or_insert((set.clone(), id));
                continue;
            }
            let key = (i as u16, set.to_list(), 0, None);
            if seen.insert(key) {
                let mut o = Object::new(*ty, id, set);
                match *id_file {
                    "cluster_id" => {
                        o.info.insert("kind".into(), "Cluster".into());
                    }
                    "book_id" => {
                        o.info.insert("kind".into(), "Book".into());
                    }
                    "drawer_id" => {
                        o.info.insert("kind".into(), "Drawer".into());
                    }
                    _ => {}
                }
                b.add(o);
            }
        }
        read_caches(&fs, cpu, &online, &mut seen, &mut b);
        b.add_pu(cpu, allowed.contains(cpu), kind_of(cpu));
    }
    for (_, (set, id)) in packages {
        let mut o = Object::new(ObjType::Package, id, set.clone());
        if let Some(model) = set.first().and_then(|c| cpuinfo.models.get(&c)) {
            o.info.insert("CPUModel".into(), model.clone());
        }
        b.add(o);
    }
    if !has_core_info {
        // hwloc leaves cores out when Linux gives no thread siblings; one core per PU says
        // the same thing and keeps every consumer's "core" question answerable.
        for cpu in online.iter() {
            b.add(Object::new(ObjType::Core, None, CpuSet::from_cpus([cpu])));
        }
    }
    b.core_kinds = kinds;
    read_numa(&fs, &online, cg_mems.as_ref(), cpuinfo.power, &mut b);
    b.warnings = fs.warnings.take();
    let mut m = b.build();
    m.warnings.dedup();
    let origins = super::pci::read_into(root, &mut m);
    m.attach_io_from(&|o| origins.name(o));
    Ok(m)
}

/// What a read of the machine below `root` depends on that may change while the machine
/// runs, as one text: the kernel's boot, the host name, the present and online CPUs, this
/// process's cgroup cpuset and affinity mask, and the names of the NUMA nodes, PCI devices
/// and OS devices (block, net, InfiniBand, DRM, DMA). Everything else the reader takes in
/// (cache sizes, core and package ids, distances, a device's locality) is fixed for a boot
/// while those stay the same, so two reads with equal keys describe the same machine: the
/// key lets a run reuse an earlier read (`autopin_os::machine_cache`) at the cost of some
/// twenty small reads instead of twenty per CPU. `HWLOC_PCI_*` variables change a read too;
/// a caller that honours them reads afresh.
pub fn read_key(root: &Path, affinity: Option<&CpuSet>) -> String {
    let fs = SysfsFiles::new(root, &|_| None);
    let text = |rel: &str| {
        fs.text_or_empty(rel, "")
            .map_or_else(|| "-".to_string(), |(t, _)| t.trim().to_string())
    };
    let names = |rel: &str| {
        fs.dir_names(&fs.path(rel)).map_or_else(
            |_| "-".to_string(),
            |mut v| {
                v.sort();
                v.join(",")
            },
        )
    };
    let list = |c: Option<&CpuSet>| c.map_or_else(|| "-".to_string(), CpuSet::to_list);
    let (cg_cpus, cg_mems) = cgroup_cpuset(&fs);
    let mut key = Vec::new();
    for rel in [
        "proc/sys/kernel/random/boot_id",
        "proc/sys/kernel/hostname",
        "sys/devices/system/cpu/present",
        "sys/devices/system/cpu/online",
    ] {
        key.push(format!("{rel}={}", text(rel)));
    }
    key.push(format!(
        "cgroup={}/{}",
        list(cg_cpus.as_ref()),
        list(cg_mems.as_ref())
    ));
    key.push(format!("affinity={}", list(affinity)));
    for rel in [
        "sys/devices/system/node",
        "sys/bus/pci/devices",
        "sys/class/block",
        "sys/class/net",
        "sys/class/infiniband",
        "sys/class/drm",
        "sys/class/dma",
    ] {
        key.push(format!("{rel}={}", names(rel)));
    }
    key.join("\n")
}

/// The online CPUs: `cpu/online`, else each CPU's own `online` file (absent: cpu0, which
/// cannot go offline). Like hwloc, an unusable global file falls back to the per-CPU files
/// and an unusable per-CPU file means online.
fn online_cpus(fs: &SysfsFiles, present: &[u32], present_set: &CpuSet) -> CpuSet {
    let global = fs
        .list(
            "sys/devices/system/cpu/online",
            "each CPU's own online file is used instead",
        )
        .map(|s| s.intersection(present_set));
    match global {
        Some(s) if !s.is_empty() => return s,
        Some(_) => fs.warn(
            &fs.path("sys/devices/system/cpu/online"),
            "names none of the present CPUs; each CPU's own online file is used instead",
        ),
        None => {}
    }
    let mut s = CpuSet::new();
    for &c in present {
        let rel = format!("sys/devices/system/cpu/cpu{c}/online");
        if fs.number(&rel, &format!("CPU {c} is taken as online")) != Some(0) {
            s.insert(c);
        }
    }
    if s.is_empty() {
        fs.warn(
            &fs.path("sys/devices/system/cpu"),
            "every CPU says it is offline; all present CPUs are taken as online",
        );
        return present_set.clone();
    }
    s
}

fn read_caches(
    fs: &SysfsFiles,
    cpu: u32,
    online: &CpuSet,
    seen: &mut BTreeSet<(u16, String, u32, Option<u32>)>,
    b: &mut Builder,
) {
    let dir = fs.path(&format!("sys/devices/system/cpu/cpu{cpu}/cache"));
    if !dir.is_dir() {
        return;
    }
    let indexes = match fs.numbered_dirs(&dir, "index") {
        Ok(v) => v,
        Err(e) => {
            fs.warn(&dir, format!("cannot list ({e}); no caches for CPU {cpu}"));
            return;
        }
    };
    for idx in indexes {
        let base = format!("sys/devices/system/cpu/cpu{cpu}/cache/index{idx}");
        // hwloc skips a cache whose sharing mask or level cannot be read.
        let Some(set) = fs.set(&base, &["shared_cpu_list"], &["shared_cpu_map"]) else {
            continue;
        };
        let mut set = set.intersection(online);
        if set.is_empty() {
            // Some kernels (ia64) report an empty sharing mask: the cache is private to the core.
            let topo = format!("sys/devices/system/cpu/cpu{cpu}/topology");
            set = fs
                .set(
                    &topo,
                    &["core_cpus_list", "thread_siblings_list"],
                    &["core_cpus", "thread_siblings"],
                )
                .unwrap_or_else(|| CpuSet::from_cpus([cpu]))
                .intersection(online);
        }
        if set.first() != Some(cpu) {
            continue;
        }
        let Some(level) = fs
            .number(&format!("{base}/level"), "this cache is skipped")
            .filter(|&l| (1..=255).contains(&l))
        else {
            continue;
        };
        let level = level as u8;
        let kind = match fs.text(&format!("{base}/type"), "taken as Unified") {
            Some((t, _)) if t.trim() == "Data" => CacheKind::Data,
            Some((t, _)) if t.trim() == "Instruction" => CacheKind::Instruction,
            Some((t, _)) if t.trim() == "Unified" => CacheKind::Unified,
            Some((t, p)) => {
                fs.warn(
                    &p,
                    format!(
                        "unknown cache type '{}' (valid: Data, Instruction, Unified); taken as Unified, as hwloc does",
                        t.trim()
                    ),
                );
                CacheKind::Unified
            }
            None => CacheKind::Unified,
        };
        let key = (
            10 + u16::from(level),
            format!("{kind:?}:{}", set.to_list()),
            0,
            None,
        );
        if !seen.insert(key) {
            continue;
        }
        let size = match fs.text(&format!("{base}/size"), "the size is taken as unknown") {
            // hwloc ignores caches Linux reports with a zero size: they are placeholders.
            Some((t, p)) => match parse_size(&t) {
                Ok(0) => continue,
                Ok(n) => n,
                Err(why) => {
                    fs.warn(&p, format!("{why}; the size is taken as unknown"));
                    0
                }
            },
            None => 0,
        };
        let line_size = fs
            .number(
                &format!("{base}/coherency_line_size"),
                "the line size is taken as unknown",
            )
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0);
        let ways = fs
            .number(
                &format!("{base}/ways_of_associativity"),
                "the associativity is taken as unknown",
            )
            .and_then(|v| u32::try_from(v).ok());
        let mut o = Object::new(ObjType::Cache, None, set);
        o.cache = Some(CacheAttr {
            level,
            kind,
            size,
            line_size,
            ways,
        });
        b.add(o);
    }
}

/// One NUMA node as read, before its locality is decided.
struct NodeRead {
    os: u32,
    /// Its own CPUs (online ones).
    cpus: CpuSet,
    /// CPUs it is local to besides its own: HMAT initiators, a GPU's PCI locality, or the
    /// nearest nodes by distance for a CPU-less node.
    near: CpuSet,
    memory: u64,
    kind: Option<String>,
}

fn read_numa(
    fs: &SysfsFiles,
    online: &CpuSet,
    allowed_mems: Option<&CpuSet>,
    power: bool,
    b: &mut Builder,
) {
    let node_dir = fs.path("sys/devices/system/node");
    let listed = if node_dir.is_dir() {
        match fs.numbered_dirs(&node_dir, "node") {
            Ok(v) => v,
            Err(e) => {
                fs.warn(
                    &node_dir,
                    format!("cannot list ({e}); one NUMA node assumed"),
                );
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let one_node = |b: &mut Builder| {
        let memory = match fs.text("proc/meminfo", "the memory size is taken as unknown") {
            Some((t, p)) => meminfo_total(&t).unwrap_or_else(|| {
                fs.warn(&p, "no MemTotal line; the memory size is taken as unknown");
                0
            }),
            None => 0,
        };
        b.add_numa(NumaSpec {
            os_index: 0,
            cpuset: online.clone(),
            initiators: CpuSet::new(),
            memory,
            kind: None,
            tier: None,
        });
    };
    if listed.is_empty() {
        one_node(b);
        return;
    }
    // The distance matrix, row i for listed[i]; any unusable file drops it, as in hwloc.
    let distances = node_distances(fs, &listed);
    let mut nodes: Vec<NodeRead> = Vec::new();
    let mut claimed = CpuSet::new();
    for &n in &listed {
        let base = format!("sys/devices/system/node/node{n}");
        // hwloc drops a node whose cpumap cannot be read.
        let Some(raw) = fs.set(&base, &["cpulist"], &["cpumap"]) else {
            fs.warn(
                &fs.path(&format!("{base}/cpumap")),
                format!("missing or unreadable; NUMA node {n} is left out, as hwloc does"),
            );
            continue;
        };
        // Firmware bugs give nodes that overlap (one node covering every CPU beside nodes
        // that split them): Linux cannot run like that, so hwloc keeps the first node that
        // claims a CPU and drops the later ones.
        if raw.intersects(&claimed) {
            fs.warn(
                &fs.path(&format!("{base}/cpumap")),
                format!(
                    "NUMA node {n} claims CPUs {} that an earlier node already has; node {n} is left out, as hwloc does",
                    raw.intersection(&claimed)
                ),
            );
            continue;
        }
        claimed = claimed.union(&raw);
        let memory = match fs.text(&format!("{base}/meminfo"), "its size is taken as unknown") {
            Some((t, p)) => meminfo_total(&t).unwrap_or_else(|| {
                fs.warn(&p, "no MemTotal line; the node's size is taken as unknown");
                0
            }),
            None => 0,
        };
        nodes.push(NodeRead {
            os: n,
            cpus: raw.intersection(online),
            near: CpuSet::new(),
            memory,
            kind: None,
        });
    }
    gpu_memory_nodes(fs, power, &mut nodes);
    for (n, kind) in dax_kinds(fs) {
        if let Some(node) = nodes.iter_mut().find(|x| x.os == n) {
            node.kind.get_or_insert(kind);
        }
    }
    // HMAT initiators (access1: the best CPU initiators; else access0, which may name generic
    // initiators) widen every node's locality, with CPUs or not.
    let cpus_of: BTreeMap<u32, CpuSet> = nodes.iter().map(|x| (x.os, x.cpus.clone())).collect();
    for node in nodes.iter_mut() {
        let base = format!("sys/devices/system/node/node{}", node.os);
        let access1 = fs.path(&format!("{base}/access1/initiators"));
        let dir = if access1.is_dir() {
            access1
        } else {
            fs.path(&format!("{base}/access0/initiators"))
        };
        if !dir.is_dir() {
            continue;
        }
        match fs.numbered_dirs(&dir, "node") {
            Ok(inits) => {
                for i in inits.into_iter().filter(|&i| i != node.os) {
                    if let Some(set) = cpus_of.get(&i) {
                        node.near = node.near.union(set);
                    }
                }
            }
            Err(e) => fs.warn(&dir, format!("cannot list ({e}); initiators ignored")),
        }
    }
    // CPU-less nodes that HMAT did not place: near the nodes at the smallest distance, when
    // that distance is larger than the node's own and not shared by every other node
    // (hwloc's rule); otherwise the machine.
    if let Some(d) = &distances {
        let index: BTreeMap<u32, usize> = listed.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let locality: Vec<(usize, CpuSet)> = nodes
            .iter()
            .map(|x| (index[&x.os], x.cpus.union(&x.near)))
            .collect();
        for node in nodes.iter_mut() {
            if !node.cpus.is_empty() || !node.near.is_empty() {
                continue;
            }
            let i = index[&node.os];
            let others: Vec<&(usize, CpuSet)> = locality.iter().filter(|(j, _)| *j != i).collect();
            let Some(min) = others.iter().map(|(j, _)| d[i][*j]).min() else {
                continue;
            };
            let at_min: Vec<&&(usize, CpuSet)> =
                others.iter().filter(|(j, _)| d[i][*j] == min).collect();
            if min <= d[i][i] || at_min.len() == listed.len() - 1 {
                continue;
            }
            for (_, set) in at_min {
                node.near = node.near.union(set);
            }
        }
    }
    // Memory tiers tell DRAM from slower or faster memory where nothing more specific did.
    let tiers = memory_tiers(fs);
    if !tiers.is_empty() {
        let dram_tier = nodes
            .iter()
            .filter(|x| !x.cpus.is_empty())
            .filter_map(|x| tiers.get(&x.os).copied())
            .min();
        for x in nodes.iter_mut() {
            if x.kind.is_some() {
                continue;
            }
            x.kind = match (tiers.get(&x.os).copied(), dram_tier) {
                (Some(t), Some(d)) if t == d => Some("DRAM".into()),
                (Some(t), Some(d)) if t < d => Some("HBM".into()),
                (Some(_), Some(_)) => Some("NVM".into()),
                _ => None,
            };
        }
    }
    let kept: BTreeSet<u32> = nodes.iter().map(|x| x.os).collect();
    for x in nodes {
        if allowed_mems.is_some_and(|m| !m.contains(x.os)) {
            continue;
        }
        let caches = memory_side_caches(fs, x.os);
        if !caches.is_empty() {
            b.add_node_mem_caches(x.os, caches);
        }
        b.add_numa(NumaSpec {
            os_index: x.os,
            cpuset: x.cpus,
            initiators: x.near,
            memory: x.memory,
            kind: x.kind,
            tier: tiers.get(&x.os).copied(),
        });
    }
    if let Some(d) = distances {
        let mut map = BTreeMap::new();
        for (i, &a) in listed.iter().enumerate() {
            for (j, &c) in listed.iter().enumerate() {
                if kept.contains(&a) && kept.contains(&c) {
                    map.insert((a, c), d[i][j]);
                }
            }
        }
        b.numa_distances = Some(map);
    }
}

/// The `distance` rows of the listed nodes as a square matrix; `None` (with a warning) when a
/// row is missing, short or not numbers, as hwloc then ignores distances altogether.
fn node_distances(fs: &SysfsFiles, listed: &[u32]) -> Option<Vec<Vec<u32>>> {
    let mut rows = Vec::new();
    for &n in listed {
        let rel = format!("sys/devices/system/node/node{n}/distance");
        let (t, p) = fs.text(&rel, "NUMA distances are ignored")?;
        let row: std::result::Result<Vec<u32>, _> =
            t.split_whitespace().map(|v| v.parse::<u32>()).collect();
        match row {
            Ok(r) if r.len() >= listed.len() => rows.push(r[..listed.len()].to_vec()),
            Ok(r) => {
                fs.warn(
                    &p,
                    format!(
                        "{} distances for {} nodes; NUMA distances are ignored, as hwloc does",
                        r.len(),
                        listed.len()
                    ),
                );
                return None;
            }
            Err(_) => {
                fs.warn(
                    &p,
                    format!("'{}' is not a list of distances; NUMA distances are ignored, as hwloc does", t.trim()),
                );
                return None;
            }
        }
    }
    Some(rows)
}

/// NVIDIA GPU memory exposed as NUMA nodes (`/proc/driver/nvidia/gpus/BDF/numa_status`
/// names the node): local to the GPU's PCI locality, or to the machine when that is
/// unknown. hwloc hides them on POWER, where they would be mistaken for normal memory.
fn gpu_memory_nodes(fs: &SysfsFiles, power: bool, nodes: &mut Vec<NodeRead>) {
    let dir = fs.path("proc/driver/nvidia/gpus");
    if !dir.is_dir() {
        return;
    }
    let Ok(gpus) = fs.dir_names(&dir) else {
        fs.warn(&dir, "cannot list; GPU memory nodes are not marked");
        return;
    };
    for gpu in gpus {
        let Some((status, _)) = fs.text(
            &format!("proc/driver/nvidia/gpus/{gpu}/numa_status"),
            "this GPU's memory node is not marked",
        ) else {
            continue;
        };
        let Some(node) = status
            .split("Node:")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse::<u32>().ok())
        else {
            continue;
        };
        if power {
            nodes.retain(|x| x.os != node);
            continue;
        }
        if let Some(x) = nodes.iter_mut().find(|x| x.os == node) {
            x.kind = Some("GPUMemory".into());
            x.near = fs
                .set(
                    &format!("sys/bus/pci/devices/{gpu}"),
                    &["local_cpulist"],
                    &["local_cpus"],
                )
                .unwrap_or_default();
        }
    }
}

/// Node → kind for memory the kernel onlined from a DAX device (`kmem`): NVDIMMs are `NVM`,
/// CXL-attached RAM `CXL-DRAM`, other specific-purpose memory (often HBM) `SPM`.
fn dax_kinds(fs: &SysfsFiles) -> Vec<(u32, String)> {
    let dir = fs.path("sys/bus/dax/devices");
    let mut out = Vec::new();
    let Ok(devices) = fs.dir_names(&dir) else {
        return out;
    };
    for dev in devices {
        if !fs.path(&format!("sys/bus/dax/drivers/kmem/{dev}")).exists() {
            continue;
        }
        let Some(node) = fs
            .number(
                &format!("sys/bus/dax/devices/{dev}/target_node"),
                "this DAX device's node is not marked",
            )
            .and_then(|v| u32::try_from(v).ok())
        else {
            continue;
        };
        let link = std::fs::read_link(fs.path(&format!("sys/bus/dax/devices/{dev}")))
            .map(|l| l.to_string_lossy().into_owned())
            .unwrap_or_default();
        let kind = if link.contains("ndbus") {
            "NVM"
        } else if link.contains("ACPI0017") || link.contains("/cxl") {
            "CXL-DRAM"
        } else {
            "SPM"
        };
        out.push((node, kind.to_string()));
    }
    out
}

/// `nodeN/memory_side_cache/indexL/{size,line_size,indexing}`; hwloc skips an index whose
/// files cannot all be read.
fn memory_side_caches(fs: &SysfsFiles, node: u32) -> Vec<MemorySideCache> {
    let dir = fs.path(&format!(
        "sys/devices/system/node/node{node}/memory_side_cache"
    ));
    if !dir.is_dir() {
        return Vec::new();
    }
    let levels = match fs.numbered_dirs(&dir, "index") {
        Ok(v) => v,
        Err(e) => {
            fs.warn(
                &dir,
                format!("cannot list ({e}); memory-side caches ignored"),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for level in levels {
        let base = format!("sys/devices/system/node/node{node}/memory_side_cache/index{level}");
        let skip = "this memory-side cache is skipped";
        let (Some(size), Some(line), Some(indexing)) = (
            fs.number(&format!("{base}/size"), skip),
            fs.number(&format!("{base}/line_size"), skip),
            fs.number(&format!("{base}/indexing"), skip),
        ) else {
            continue;
        };
        out.push(MemorySideCache {
            level,
            size: u64::try_from(size).unwrap_or(0),
            line_size: u32::try_from(line).unwrap_or(0),
            // 0 is direct-mapped; anything else only says "indexed", as hwloc reads it.
            ways: (indexing == 0).then_some(1),
        });
    }
    out
}

/// `/sys/devices/virtual/memory_tiering/memory_tierN/nodelist` → node → tier index.
fn memory_tiers(fs: &SysfsFiles) -> BTreeMap<u32, u32> {
    let dir = fs.path("sys/devices/virtual/memory_tiering");
    let mut out = BTreeMap::new();
    if !dir.is_dir() {
        return out;
    }
    let Ok(tiers) = fs.numbered_dirs(&dir, "memory_tier") else {
        fs.warn(&dir, "cannot list; memory tiers ignored");
        return out;
    };
    for (rank, t) in tiers.iter().enumerate() {
        if let Some(set) = fs.list(
            &format!("sys/devices/virtual/memory_tiering/memory_tier{t}/nodelist"),
            "this tier is ignored",
        ) {
            for n in set.iter() {
                out.insert(n, rank as u32);
            }
        }
    }
    out
}

/// Core kinds of hybrid CPUs: Intel's `cpu_atom`/`cpu_core` PMUs, else distinct
/// `cpu_capacity` values (ARM big.LITTLE). Ordered from least to most performant.
fn core_kinds(fs: &SysfsFiles, online: &CpuSet) -> Vec<CoreKind> {
    let mut kinds = Vec::new();
    for (name, dir, eff) in [
        ("IntelAtom", "sys/devices/cpu_atom/cpus", 0),
        ("IntelCore", "sys/devices/cpu_core/cpus", 1),
    ] {
        if let Some(set) = fs.list(dir, "this core kind is ignored") {
            let set = set.intersection(online);
            if !set.is_empty() {
                kinds.push(CoreKind {
                    name: name.into(),
                    cpuset: set,
                    efficiency: eff,
                });
            }
        }
    }
    if kinds.len() > 1 {
        return kinds;
    }
    let mut by_capacity: BTreeMap<i64, CpuSet> = BTreeMap::new();
    for cpu in online.iter() {
        if let Some(c) = fs.number(
            &format!("sys/devices/system/cpu/cpu{cpu}/cpu_capacity"),
            "this CPU's capacity is taken as unknown",
        ) {
            by_capacity.entry(c).or_default().insert(cpu);
        }
    }
    if by_capacity.len() > 1 {
        return by_capacity
            .into_iter()
            .enumerate()
            .map(|(i, (cap, set))| CoreKind {
                name: format!("capacity={cap}"),
                cpuset: set,
                efficiency: i as u32,
            })
            .collect();
    }
    // Last resort, as hwloc does: cores that differ in base and maximum frequency are of
    // different kinds (Intel hybrid parts without the cpu_core/cpu_atom PMUs exposed).
    let mut by_freq: BTreeMap<(i64, i64), CpuSet> = BTreeMap::new();
    for cpu in online.iter() {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        let Some(max) = fs.number(
            &format!("{dir}/cpuinfo_max_freq"),
            "core kinds are not told apart by frequency",
        ) else {
            return Vec::new();
        };
        let base = fs
            .number(
                &format!("{dir}/base_frequency"),
                "the base frequency is taken as unknown",
            )
            .unwrap_or(0);
        // The base frequency tells kinds apart; maximum frequencies also differ between
        // "favoured" cores of one kind (Turbo Boost Max), so they only count without a base.
        let key = if base > 0 { (base, 0) } else { (0, max) };
        by_freq.entry(key).or_default().insert(cpu);
    }
    if by_freq.len() > 1 {
        return by_freq
            .into_iter()
            .enumerate()
            .map(|(i, ((base, max), set))| CoreKind {
                name: if base > 0 {
                    format!("base_freq={}MHz", base / 1000)
                } else {
                    format!("max_freq={}MHz", max / 1000)
                },
                cpuset: set,
                efficiency: i as u32,
            })
            .collect();
    }
    Vec::new()
}

/// What `/proc/cpuinfo` says that the topology needs.
#[derive(Default)]
struct CpuInfo {
    /// CPU model names by processor number.
    models: BTreeMap<u32, String>,
    /// AMD family 15h/16h (21, 22): compute units (hwloc's `is_amd_with_CU`).
    amd_compute_units: bool,
    /// POWER processors (GPU memory nodes are hidden there, as hwloc does).
    power: bool,
}

fn cpu_info(fs: &SysfsFiles) -> CpuInfo {
    let mut out = CpuInfo::default();
    let Some((text, _)) = fs.text("proc/cpuinfo", "CPU model names are unknown") else {
        return out;
    };
    let mut current: Option<u32> = None;
    let (mut vendor, mut family) = (None::<String>, None::<String>);
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "processor" => current = v.parse().ok(),
            "model name" | "cpu" | "cpu model" => {
                if k == "cpu" && v.starts_with("POWER") {
                    out.power = true;
                }
                if let Some(c) = current {
                    out.models.entry(c).or_insert_with(|| v.to_string());
                }
            }
            // The first processor's vendor and family decide, as in hwloc.
            "vendor_id" => {
                vendor.get_or_insert_with(|| v.to_string());
            }
            "cpu family" => {
                family.get_or_insert_with(|| v.to_string());
            }
            _ => {}
        }
    }
    out.amd_compute_units = vendor.as_deref() == Some("AuthenticAMD")
        && matches!(family.as_deref(), Some("21") | Some("22"));
    out
}

/// The cgroup cpuset (CPUs, memory nodes) this process is confined to, from /proc/self/cgroup
/// (or the legacy /proc/self/cpuset) and the cpuset mount found in /proc/mounts.
fn cgroup_cpuset(fs: &SysfsFiles) -> (Option<CpuSet>, Option<CpuSet>) {
    let no_cgroup = "no cgroup restriction is assumed";
    let Some((mounts, _)) = fs.text("proc/mounts", no_cgroup) else {
        return (None, None);
    };
    let mut v2_mount = None;
    let mut v1_mount = None;
    let mut v1_noprefix = false;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let opts: Vec<&str> = f[3].split(',').collect();
        match f[2] {
            "cgroup2" => v2_mount = Some(f[1].to_string()),
            "cgroup" if opts.contains(&"cpuset") => {
                v1_mount = Some(f[1].to_string());
                v1_noprefix = opts.contains(&"noprefix");
            }
            "cpuset" => {
                v1_mount = Some(f[1].to_string());
                v1_noprefix = true;
            }
            _ => {}
        }
    }
    // No cpuset hierarchy mounted (a minimal initramfs, some containers): nothing confines
    // the process, and /proc/self/cgroup may well be empty then, which is no fault.
    if v1_mount.is_none() && v2_mount.is_none() {
        return (None, None);
    }
    // Which cgroup are we in? (An empty file: a kernel without active hierarchies.)
    let mut v1_path = None;
    let mut v2_path = None;
    if let Some((t, _)) = fs.text_or_empty("proc/self/cgroup", no_cgroup) {
        for line in t.lines() {
            let parts: Vec<&str> = line.splitn(3, ':').collect();
            if parts.len() == 3 {
                if parts[0] == "0" && parts[1].is_empty() {
                    v2_path = Some(parts[2].to_string());
                } else if parts[1].split(',').any(|c| c == "cpuset") {
                    v1_path = Some(parts[2].to_string());
                }
            }
        }
    }
    if v1_path.is_none() {
        if let Some((t, _)) = fs.text_or_empty("proc/self/cpuset", no_cgroup) {
            if !t.trim().is_empty() {
                v1_path = Some(t.trim().to_string());
            }
        }
    }
    // An empty cpuset file means "not restricted here"; a garbage one restricts nothing.
    let read = |rel: String| -> Option<CpuSet> {
        let (t, p) = fs.text_or_empty(&rel, no_cgroup)?;
        if t.trim().is_empty() {
            return None;
        }
        match CpuSet::parse_list(&t) {
            Ok(s) => Some(s),
            Err(e) => {
                fs.warn(&p, format!("not a CPU list ({e}); {no_cgroup}"));
                None
            }
        }
    };
    let read_pair = |dir: String, cpus: &str, mems: &str| {
        (read(format!("{dir}/{cpus}")), read(format!("{dir}/{mems}")))
    };
    if let (Some(mount), Some(path)) = (&v1_mount, &v1_path) {
        let dir = format!(
            "{}/{}",
            mount.trim_start_matches('/'),
            path.trim_start_matches('/')
        );
        let (c, m) = if v1_noprefix {
            read_pair(dir, "cpus", "mems")
        } else {
            read_pair(dir, "cpuset.cpus", "cpuset.mems")
        };
        if c.is_some() || m.is_some() {
            return (c, m);
        }
    }
    if let (Some(mount), Some(path)) = (&v2_mount, &v2_path) {
        let dir = format!(
            "{}/{}",
            mount.trim_start_matches('/'),
            path.trim_start_matches('/')
        );
        return read_pair(dir, "cpuset.cpus.effective", "cpuset.mems.effective");
    }
    (None, None)
}

/// Files below the root. Absent files are `None` silently; files that exist but cannot be
/// used are `None` with one warning naming the file and the fallback taken.
struct SysfsFiles<'a> {
    root: PathBuf,
    fault: Fault<'a>,
    warnings: RefCell<Vec<String>>,
    warned: RefCell<BTreeSet<PathBuf>>,
}

impl<'a> SysfsFiles<'a> {
    fn new(root: &Path, fault: Fault<'a>) -> Self {
        SysfsFiles {
            root: root.to_path_buf(),
            fault,
            warnings: RefCell::new(Vec::new()),
            warned: RefCell::new(BTreeSet::new()),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// One warning per file, naming it.
    fn warn(&self, path: &Path, what: impl std::fmt::Display) {
        if self.warned.borrow_mut().insert(path.to_path_buf()) {
            self.warnings
                .borrow_mut()
                .push(format!("{}: {what}", path.display()));
        }
    }

    fn read_bytes(&self, p: &Path) -> std::io::Result<Vec<u8>> {
        if let Some(e) = (self.fault)(p) {
            return Err(e);
        }
        read_small(p)
    }

    fn dir_names(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        if let Some(e) = (self.fault)(dir) {
            return Err(e);
        }
        Ok(std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect())
    }

    /// Numbers N of the entries `prefixN` of a directory, sorted.
    fn numbered_dirs(&self, dir: &Path, prefix: &str) -> std::io::Result<Vec<u32>> {
        let mut out: Vec<u32> = self
            .dir_names(dir)?
            .iter()
            .filter_map(|n| n.strip_prefix(prefix)?.parse::<u32>().ok())
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    /// A file's text (trailing NULs and newlines trimmed: some kernels pad sysfs files),
    /// empty text included; `None` when absent or unreadable (with a warning).
    fn text_or_empty(&self, rel: &str, fallback: &str) -> Option<(String, PathBuf)> {
        let p = self.path(rel);
        match self.read_bytes(&p) {
            Ok(bytes) => Some((
                String::from_utf8_lossy(&bytes)
                    .trim_end_matches(['\0', '\n', ' '])
                    .to_string(),
                p,
            )),
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.kind() == std::io::ErrorKind::NotADirectory =>
            {
                None
            }
            Err(e) => {
                self.warn(&p, format!("unreadable ({e}); {fallback}"));
                None
            }
        }
    }

    /// Like [`SysfsFiles::text_or_empty`], an empty file being unusable too.
    fn text(&self, rel: &str, fallback: &str) -> Option<(String, PathBuf)> {
        let (t, p) = self.text_or_empty(rel, fallback)?;
        if t.trim().is_empty() {
            self.warn(&p, format!("empty file (truncated?); {fallback}"));
            return None;
        }
        Some((t, p))
    }

    /// An integer file (`atoi`-like files hwloc reads: ids, levels, flags).
    fn number(&self, rel: &str, fallback: &str) -> Option<i64> {
        let (t, p) = self.text(rel, fallback)?;
        match t.trim().parse::<i64>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.warn(
                    &p,
                    format!("'{}' is not a number; {fallback}", clip(t.trim())),
                );
                None
            }
        }
    }

    /// A CPU-list file; an empty list is a valid empty set.
    fn list(&self, rel: &str, fallback: &str) -> Option<CpuSet> {
        let (t, p) = self.text_or_empty(rel, fallback)?;
        match CpuSet::parse_list(&t) {
            Ok(s) => Some(s),
            Err(e) => {
                self.warn(&p, format!("not a CPU list ({e}); {fallback}"));
                None
            }
        }
    }

    /// A CPU set from the first usable mask file, else the first usable list file. Masks come
    /// first because hwloc reads them: where a dump's two forms disagree, we agree with it.
    fn set(&self, dir: &str, lists: &[&str], masks: &[&str]) -> Option<CpuSet> {
        for m in masks {
            let rel = format!("{dir}/{m}");
            let Some((t, p)) = self.text(&rel, "the list form or the next fallback is used") else {
                continue;
            };
            match CpuSet::parse_mask(&t) {
                Ok(s) => return Some(s),
                Err(e) => self.warn(
                    &p,
                    format!(
                        "not a CPU mask ({}); the list form or the next fallback is used",
                        e.message
                    ),
                ),
            }
        }
        for l in lists {
            if let Some(s) = self.list(&format!("{dir}/{l}"), "the attribute is left out") {
                return Some(s);
            }
        }
        None
    }
}

/// At most 40 characters of a bad value, for messages.
fn clip(t: &str) -> String {
    let mut s: String = t.chars().take(40).collect();
    if t.chars().count() > 40 {
        s.push('…');
    }
    s.escape_debug().to_string()
}

/// Reads a whole file without asking its size first: sysfs files are small and report a
/// size of 4096 anyway, and skipping the stat saves a system call per file (thousands on a
/// big machine). Reads stop at 1 MiB: no sysfs attribute is that long, and a huge file
/// (or an endless one in a broken dump) must not stall the reader.
/// Opened without blocking (no system call more): a tree given with --sysfs-root may hold a
/// FIFO where a one-line file belongs, which then reads as empty (or fails) instead of
/// waiting for a writer.
fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let mut out = Vec::new();
    f.take(1 << 20).read_to_end(&mut out)?;
    Ok(out)
}

/// Cache sizes in sysfs: `32K`, `1024K`, `16M`, or plain bytes.
fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1024),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{}' is not a cache size (e.g. 32K)", clip(t)))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{}' is too large a cache size", clip(t)))
}

fn meminfo_total(text: &str) -> Option<u64> {
    for line in text.lines() {
        if line.contains("MemTotal:") {
            let mut it = line.split_whitespace().rev();
            let unit = it.next()?;
            let value: u64 = it.next()?.parse().ok()?;
            return Some(if unit.eq_ignore_ascii_case("kb") {
                value * 1024
            } else {
                value
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_meminfo() {
        assert_eq!(parse_size("32K\n").unwrap(), 32 * 1024);
        assert_eq!(parse_size("16M").unwrap(), 16 << 20);
        assert!(parse_size("").unwrap_err().contains("not a cache size"));
        assert!(parse_size("99999999999999999999G").is_err());
        assert_eq!(
            meminfo_total("Node 0 MemTotal:       16423952 kB\nNode 0 MemFree: 1 kB"),
            Some(16423952 * 1024)
        );
        assert_eq!(meminfo_total("MemTotal: 2048 kB"), Some(2048 * 1024));
    }
}
