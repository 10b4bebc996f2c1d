//! Reading the machine from Linux sysfs and procfs, relative to a root directory so that
//! dumps of other machines (hwloc's `hwloc-gather-topology` tarballs) read like the live one.
//!
//! Missing optional files degrade gracefully, as in hwloc: no topology directory means one
//! core per PU, no cache directory means no caches, no node directory means one NUMA node.
//! A file that exists but holds garbage is an error naming that file.

use crate::builder::{Builder, NumaSpec};
use crate::cpuset::CpuSet;
use crate::error::{Result, TopologyError};
use crate::model::*;
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
    let fs = Fs {
        root: root.to_path_buf(),
    };
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

    let present = list_numbered_dirs(&cpu_dir, "cpu")?;
    if present.is_empty() {
        return Err(TopologyError::file(&cpu_dir, "no cpuN directories"));
    }
    let present_set: CpuSet = present.iter().copied().collect();
    let online = match fs.read_opt("sys/devices/system/cpu/online")? {
        Some((text, path)) => parse_list(&text, &path)?.intersection(&present_set),
        None => {
            let mut s = CpuSet::new();
            for &c in &present {
                // cpu0 often has no `online` file: it cannot be taken offline.
                match fs.read_opt(&format!("sys/devices/system/cpu/cpu{c}/online"))? {
                    Some((t, p)) if parse_u64(&t, &p)? == 0 => {}
                    _ => s.insert(c),
                }
            }
            s
        }
    };
    if online.is_empty() {
        return Err(TopologyError::file(&cpu_dir, "no CPU is online"));
    }
    let offline = present_set.difference(&online);

    let (cg_cpus, cg_mems) = cgroup_cpuset(&fs)?;
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
    if let Some(h) = fs
        .read_opt("proc/sys/kernel/hostname")?
        .map(|(t, _)| t.trim().to_string())
    {
        b.info.insert("hostname".into(), h);
    }
    let models = cpu_models(&fs)?;
    let kinds = core_kinds(&fs, &online)?;
    let kind_of = |cpu: u32| kinds.iter().position(|k| k.cpuset.contains(cpu));

    // Linux gives every CPU the same topology attributes, so list them once and never try
    // to open the ones this kernel does not have (thousands of failed opens on big machines).
    let first = online.first().unwrap_or(0);
    let topo_names: Option<BTreeSet<String>> =
        std::fs::read_dir(fs.path(&format!("sys/devices/system/cpu/cpu{first}/topology")))
            .ok()
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            });
    let has = |name: &&str| topo_names.as_ref().is_none_or(|n| n.contains(*name));
    let mut seen: BTreeSet<(u8, String, u32, Option<u32>)> = BTreeSet::new();
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
            let Some(set) = fs.read_set(&topo, &lists, &masks)? else {
                continue;
            };
            // Sibling lists may name offline CPUs; the tree holds online ones only. As in hwloc,
            // an object is made only from the files of its first CPU: when Linux contradicts
            // itself (a sibling mask that disagrees between CPUs), the first CPU's word wins
            // and the contradicting sets are dropped rather than nested wrongly.
            let set = set.intersection(&online);
            if set.first() != Some(cpu) {
                continue;
            }
            let id = match fs.read_opt(&format!("{topo}/{id_file}"))? {
                Some((t, p)) => {
                    let v = parse_i64(&t, &p)?;
                    u32::try_from(v).ok()
                }
                None => None,
            };
            if *ty == ObjType::Core {
                has_core_info = true;
            }
            if *ty == ObjType::Package {
                packages.entry(set.to_list()).or_insert((set.clone(), id));
                continue;
            }
            let key = (i as u8, set.to_list(), 0, None);
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
        read_caches(&fs, cpu, &online, &mut seen, &mut b)?;
        b.add_pu(cpu, allowed.contains(cpu), kind_of(cpu));
    }
    for (_, (set, id)) in packages {
        let mut o = Object::new(ObjType::Package, id, set.clone());
        if let Some(model) = set.first().and_then(|c| models.get(&c)) {
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
    read_numa(&fs, &online, cg_mems.as_ref(), &mut b)?;
    Ok(b.build())
}

fn read_caches(
    fs: &Fs,
    cpu: u32,
    online: &CpuSet,
    seen: &mut BTreeSet<(u8, String, u32, Option<u32>)>,
    b: &mut Builder,
) -> Result<()> {
    let dir = fs.path(&format!("sys/devices/system/cpu/cpu{cpu}/cache"));
    if !dir.is_dir() {
        return Ok(());
    }
    for idx in list_numbered_dirs(&dir, "index")? {
        let base = format!("sys/devices/system/cpu/cpu{cpu}/cache/index{idx}");
        let Some((level_text, level_path)) = fs.read_opt(&format!("{base}/level"))? else {
            continue;
        };
        let level = parse_u64(&level_text, &level_path)?;
        let level = u8::try_from(level).map_err(|_| {
            TopologyError::file(&level_path, format!("cache level {level} is out of range"))
        })?;
        let kind = match fs.read_opt(&format!("{base}/type"))? {
            Some((t, _)) if t.trim() == "Data" => CacheKind::Data,
            Some((t, _)) if t.trim() == "Instruction" => CacheKind::Instruction,
            Some((t, _)) if t.trim() == "Unified" => CacheKind::Unified,
            Some((t, p)) => {
                return Err(TopologyError::file(
                    p,
                    format!(
                        "unknown cache type '{}' (valid: Data, Instruction, Unified)",
                        t.trim()
                    ),
                ))
            }
            None => CacheKind::Unified,
        };
        let mut set = fs
            .read_set(&base, &["shared_cpu_list"], &["shared_cpu_map"])?
            .unwrap_or_default()
            .intersection(online);
        if set.is_empty() {
            // Some kernels (ia64) report an empty sharing mask: the cache is private to the core.
            let topo = format!("sys/devices/system/cpu/cpu{cpu}/topology");
            set = fs
                .read_set(
                    &topo,
                    &["core_cpus_list", "thread_siblings_list"],
                    &["core_cpus", "thread_siblings"],
                )?
                .unwrap_or_else(|| CpuSet::from_cpus([cpu]))
                .intersection(online);
        }
        if set.first() != Some(cpu) {
            continue;
        }
        let key = (10 + level, format!("{kind:?}:{}", set.to_list()), 0, None);
        if !seen.insert(key) {
            continue;
        }
        let size = match fs.read_opt(&format!("{base}/size"))? {
            // hwloc ignores caches Linux reports with a zero size: they are placeholders.
            Some((t, p)) => match parse_size_kib(&t, &p)? {
                0 => continue,
                n => n,
            },
            None => 0,
        };
        let line_size = match fs.read_opt(&format!("{base}/coherency_line_size"))? {
            Some((t, p)) => parse_u64(&t, &p)? as u32,
            None => 0,
        };
        let ways = match fs.read_opt(&format!("{base}/ways_of_associativity"))? {
            Some((t, p)) => Some(parse_u64(&t, &p)? as u32),
            None => None,
        };
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
    Ok(())
}

fn read_numa(
    fs: &Fs,
    online: &CpuSet,
    allowed_mems: Option<&CpuSet>,
    b: &mut Builder,
) -> Result<()> {
    let node_dir = fs.path("sys/devices/system/node");
    let nodes = if node_dir.is_dir() {
        list_numbered_dirs(&node_dir, "node")?
    } else {
        Vec::new()
    };
    if nodes.is_empty() {
        let memory = match fs.read_opt("proc/meminfo")? {
            Some((t, _)) => meminfo_total(&t).unwrap_or(0),
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
        return Ok(());
    }
    let tiers = memory_tiers(fs)?;
    let mut specs = Vec::new();
    let mut distances = BTreeMap::new();
    for &n in &nodes {
        if allowed_mems.is_some_and(|m| !m.contains(n)) {
            continue;
        }
        let base = format!("sys/devices/system/node/node{n}");
        let cpuset = fs
            .read_set(&base, &["cpulist"], &["cpumap"])?
            .unwrap_or_default()
            .intersection(online);
        let memory = match fs.read_opt(&format!("{base}/meminfo"))? {
            Some((t, _)) => meminfo_total(&t).unwrap_or(0),
            None => 0,
        };
        if let Some((t, p)) = fs.read_opt(&format!("{base}/distance"))? {
            for (j, v) in t.split_whitespace().enumerate() {
                let d: u32 = v
                    .parse()
                    .map_err(|_| TopologyError::file(&p, format!("'{v}' is not a distance")))?;
                if let Some(&to) = nodes.get(j) {
                    distances.insert((n, to), d);
                }
            }
        }
        let mut initiators = CpuSet::new();
        for access in ["access1", "access0"] {
            let dir = fs.path(&format!("{base}/{access}/initiators"));
            if dir.is_dir() {
                for ini in list_numbered_dirs(&dir, "node")? {
                    let set = fs
                        .read_set(
                            &format!("sys/devices/system/node/node{ini}"),
                            &["cpulist"],
                            &["cpumap"],
                        )?
                        .unwrap_or_default();
                    initiators = initiators.union(&set.intersection(online));
                }
                if !initiators.is_empty() {
                    break;
                }
            }
        }
        let has_dax = fs.path(&format!("{base}/../../../bus/dax")).exists();
        let _ = has_dax;
        specs.push(NumaSpec {
            os_index: n,
            cpuset,
            initiators,
            memory,
            kind: None,
            tier: tiers.get(&n).copied(),
        });
    }
    // Memory-only nodes with no initiators: hwloc places them near the closest node with CPUs.
    let with_cpus: Vec<(u32, CpuSet)> = specs
        .iter()
        .filter(|s| !s.cpuset.is_empty())
        .map(|s| (s.os_index, s.cpuset.clone()))
        .collect();
    for s in specs.iter_mut() {
        if s.cpuset.is_empty() && s.initiators.is_empty() {
            let best = with_cpus
                .iter()
                .filter_map(|(o, set)| distances.get(&(s.os_index, *o)).map(|d| (*d, set)))
                .min_by_key(|(d, _)| *d);
            if let Some((_, set)) = best {
                s.initiators = set.clone();
            }
        }
    }
    // Memory tiers: name the kind when the tiers tell DRAM from slower memory.
    if !tiers.is_empty() {
        let dram_tier = specs
            .iter()
            .filter(|s| !s.cpuset.is_empty())
            .filter_map(|s| s.tier)
            .min();
        for s in specs.iter_mut() {
            s.kind = match (s.tier, dram_tier) {
                (Some(t), Some(d)) if t == d => Some("DRAM".into()),
                (Some(t), Some(d)) if t < d => Some("HBM".into()),
                (Some(_), Some(_)) => Some("NVM".into()),
                _ => None,
            };
        }
    }
    for s in specs {
        b.add_numa(s);
    }
    if !distances.is_empty() {
        b.numa_distances = Some(distances);
    }
    Ok(())
}

/// `/sys/devices/virtual/memory_tiering/memory_tierN/nodelist` → node → tier index.
fn memory_tiers(fs: &Fs) -> Result<BTreeMap<u32, u32>> {
    let dir = fs.path("sys/devices/virtual/memory_tiering");
    let mut out = BTreeMap::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    let tiers = list_numbered_dirs(&dir, "memory_tier")?;
    for (rank, t) in tiers.iter().enumerate() {
        if let Some((text, path)) = fs.read_opt(&format!(
            "sys/devices/virtual/memory_tiering/memory_tier{t}/nodelist"
        ))? {
            for n in parse_list(&text, &path)?.iter() {
                out.insert(n, rank as u32);
            }
        }
    }
    Ok(out)
}

/// Core kinds of hybrid CPUs: Intel's `cpu_atom`/`cpu_core` PMUs, else distinct
/// `cpu_capacity` values (ARM big.LITTLE). Ordered from least to most performant.
fn core_kinds(fs: &Fs, online: &CpuSet) -> Result<Vec<CoreKind>> {
    let mut kinds = Vec::new();
    for (name, dir, eff) in [
        ("IntelAtom", "sys/devices/cpu_atom/cpus", 0),
        ("IntelCore", "sys/devices/cpu_core/cpus", 1),
    ] {
        if let Some((t, p)) = fs.read_opt(dir)? {
            let set = parse_list(&t, &p)?.intersection(online);
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
        return Ok(kinds);
    }
    let mut by_capacity: BTreeMap<u64, CpuSet> = BTreeMap::new();
    for cpu in online.iter() {
        if let Some((t, p)) =
            fs.read_opt(&format!("sys/devices/system/cpu/cpu{cpu}/cpu_capacity"))?
        {
            by_capacity
                .entry(parse_u64(&t, &p)?)
                .or_default()
                .insert(cpu);
        }
    }
    if by_capacity.len() > 1 {
        return Ok(by_capacity
            .into_iter()
            .enumerate()
            .map(|(i, (cap, set))| CoreKind {
                name: format!("capacity={cap}"),
                cpuset: set,
                efficiency: i as u32,
            })
            .collect());
    }
    // Last resort, as hwloc does: cores that differ in base and maximum frequency are of
    // different kinds (Intel hybrid parts without the cpu_core/cpu_atom PMUs exposed).
    let mut by_freq: BTreeMap<(u64, u64), CpuSet> = BTreeMap::new();
    for cpu in online.iter() {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        let max = match fs.read_opt(&format!("{dir}/cpuinfo_max_freq"))? {
            Some((t, p)) => parse_u64(&t, &p)?,
            None => return Ok(Vec::new()),
        };
        let base = match fs.read_opt(&format!("{dir}/base_frequency"))? {
            Some((t, p)) => parse_u64(&t, &p)?,
            None => 0,
        };
        // The base frequency tells kinds apart; maximum frequencies also differ between
        // "favoured" cores of one kind (Turbo Boost Max), so they only count without a base.
        let key = if base > 0 { (base, 0) } else { (0, max) };
        by_freq.entry(key).or_default().insert(cpu);
    }
    if by_freq.len() > 1 {
        return Ok(by_freq
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
            .collect());
    }
    Ok(Vec::new())
}

/// CPU model names from `/proc/cpuinfo`, by processor number.
fn cpu_models(fs: &Fs) -> Result<BTreeMap<u32, String>> {
    let mut out = BTreeMap::new();
    let Some((text, _)) = fs.read_opt("proc/cpuinfo")? else {
        return Ok(out);
    };
    let mut current: Option<u32> = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "processor" => current = v.parse().ok(),
            "model name" | "cpu" | "cpu model" => {
                if let Some(c) = current {
                    out.entry(c).or_insert_with(|| v.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The cgroup cpuset (CPUs, memory nodes) this process is confined to, from /proc/self/cgroup
/// (or the legacy /proc/self/cpuset) and the cpuset mount found in /proc/mounts.
fn cgroup_cpuset(fs: &Fs) -> Result<(Option<CpuSet>, Option<CpuSet>)> {
    let Some((mounts, _)) = fs.read_opt("proc/mounts")? else {
        return Ok((None, None));
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
    // Which cgroup are we in?
    let mut v1_path = None;
    let mut v2_path = None;
    if let Some((t, _)) = fs.read_opt("proc/self/cgroup")? {
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
        if let Some((t, _)) = fs.read_opt("proc/self/cpuset")? {
            v1_path = Some(t.trim().to_string());
        }
    }
    let read_pair =
        |dir: String, cpus: &str, mems: &str| -> Result<(Option<CpuSet>, Option<CpuSet>)> {
            let c = match fs.read_opt(&format!("{dir}/{cpus}"))? {
                Some((t, p)) if !t.trim().is_empty() => Some(parse_list(&t, &p)?),
                _ => None,
            };
            let m = match fs.read_opt(&format!("{dir}/{mems}"))? {
                Some((t, p)) if !t.trim().is_empty() => Some(parse_list(&t, &p)?),
                _ => None,
            };
            Ok((c, m))
        };
    if let (Some(mount), Some(path)) = (&v1_mount, &v1_path) {
        let dir = format!(
            "{}/{}",
            mount.trim_start_matches('/'),
            path.trim_start_matches('/')
        );
        let (c, m) = if v1_noprefix {
            read_pair(dir, "cpus", "mems")?
        } else {
            read_pair(dir, "cpuset.cpus", "cpuset.mems")?
        };
        if c.is_some() || m.is_some() {
            return Ok((c, m));
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
    Ok((None, None))
}

/// Files below the root; every error names the file.
struct Fs {
    root: PathBuf,
}

impl Fs {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Reads a file that may be absent. Present but unreadable is an error.
    fn read_opt(&self, rel: &str) -> Result<Option<(String, PathBuf)>> {
        let p = self.path(rel);
        match read_small(&p) {
            // Some kernels pad sysfs files with NUL bytes.
            Ok(bytes) => Ok(Some((
                String::from_utf8_lossy(&bytes)
                    .trim_end_matches(['\0', '\n', ' '])
                    .to_string(),
                p,
            ))),
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.kind() == std::io::ErrorKind::NotADirectory =>
            {
                Ok(None)
            }
            Err(e) => Err(TopologyError::file(p, e.to_string())),
        }
    }

    /// A CPU set from the first mask file that exists, else the first list file. Masks come
    /// first because hwloc reads them: where a dump's two forms disagree, we agree with it.
    fn read_set(&self, dir: &str, lists: &[&str], masks: &[&str]) -> Result<Option<CpuSet>> {
        for m in masks {
            if let Some((t, p)) = self.read_opt(&format!("{dir}/{m}"))? {
                return parse_mask(&t, &p).map(Some);
            }
        }
        for l in lists {
            if let Some((t, p)) = self.read_opt(&format!("{dir}/{l}"))? {
                return parse_list(&t, &p).map(Some);
            }
        }
        Ok(None)
    }
}

/// Reads a whole file without asking its size first: sysfs files are small and report a
/// size of 4096 anyway, and skipping the stat saves a system call per file (thousands on a
/// big machine).
fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

fn list_numbered_dirs(dir: &Path, prefix: &str) -> Result<Vec<u32>> {
    let rd = std::fs::read_dir(dir).map_err(|e| TopologyError::file(dir, e.to_string()))?;
    let mut out = Vec::new();
    for entry in rd.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name
            .strip_prefix(prefix)
            .and_then(|r| r.parse::<u32>().ok())
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn parse_list(text: &str, path: &Path) -> Result<CpuSet> {
    CpuSet::parse_list(text).map_err(|e| TopologyError::file(path, format!("not a CPU list: {e}")))
}

fn parse_mask(text: &str, path: &Path) -> Result<CpuSet> {
    if text.trim().is_empty() {
        return Err(TopologyError::file(
            path,
            "empty file where a CPU mask was expected",
        ));
    }
    CpuSet::parse_mask(text)
        .map_err(|e| TopologyError::file(path, format!("not a CPU mask: {}", e.message)))
}

fn parse_i64(text: &str, path: &Path) -> Result<i64> {
    let t = text.trim();
    t.parse::<i64>().map_err(|_| {
        if t.is_empty() {
            TopologyError::file(path, "empty file where a number was expected (truncated?)")
        } else {
            TopologyError::file(path, format!("'{t}' is not a number"))
        }
    })
}

fn parse_u64(text: &str, path: &Path) -> Result<u64> {
    let v = parse_i64(text, path)?;
    u64::try_from(v).map_err(|_| {
        TopologyError::file(
            path,
            format!("'{v}' is negative where a count was expected"),
        )
    })
}

/// Cache sizes in sysfs: `32K`, `1024K`, `16M`, or plain bytes.
fn parse_size_kib(text: &str, path: &Path) -> Result<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1024),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| {
        if t.is_empty() {
            TopologyError::file(
                path,
                "empty file where a cache size was expected (truncated?)",
            )
        } else {
            TopologyError::file(path, format!("'{t}' is not a cache size (e.g. 32K)"))
        }
    })?;
    Ok(n * mult)
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
        let p = Path::new("x");
        assert_eq!(parse_size_kib("32K\n", p).unwrap(), 32 * 1024);
        assert_eq!(parse_size_kib("16M", p).unwrap(), 16 << 20);
        assert!(parse_size_kib("", p)
            .unwrap_err()
            .to_string()
            .contains("truncated"));
        assert_eq!(
            meminfo_total("Node 0 MemTotal:       16423952 kB\nNode 0 MemFree: 1 kB"),
            Some(16423952 * 1024)
        );
        assert_eq!(meminfo_total("MemTotal: 2048 kB"), Some(2048 * 1024));
    }
}
