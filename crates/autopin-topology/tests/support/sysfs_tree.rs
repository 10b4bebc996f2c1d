//! A test-only Linux sysfs/procfs tree written from a compact description: a regular machine
//! (packages × cores × threads, caches, one NUMA node per package) from [`SysfsTree::regular`],
//! then edits — CPU-less nodes, distances, HMAT initiators, memory-side caches, any file set,
//! emptied or removed — and [`SysfsTree::write`] puts it on disk for `sysfs::read` and for
//! `HWLOC_FSROOT=DIR lstopo-no-graphics`, so both read the same machine.

use std::collections::BTreeMap;
use std::path::Path;

/// Files by path relative to the root; directories are implied by the paths.
#[derive(Debug, Clone, Default)]
pub struct SysfsTree {
    pub files: BTreeMap<String, String>,
    /// Directories that exist even when empty (`access0/initiators/nodeN` are directories).
    pub dirs: Vec<String>,
}

pub const CPU: &str = "sys/devices/system/cpu";
pub const NODE: &str = "sys/devices/system/node";

/// Linux cpumask text: 32-bit hex words, most significant first, comma-separated.
pub fn mask(cpus: &[u32]) -> String {
    let words = cpus.iter().map(|&c| c as usize / 32 + 1).max().unwrap_or(1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c as usize / 32] |= 1 << (c % 32);
    }
    w.iter()
        .rev()
        .map(|x| format!("{x:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Linux cpulist text (`0-3,8`).
pub fn list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}

impl SysfsTree {
    /// `packages` × `cores` × `threads` CPUs numbered Linux-style (all first threads, then all
    /// second threads), with private L1d/L1i/L2 per core, one L3 per package, and one NUMA
    /// node per package when `numa` (else no node directory: one implicit node).
    pub fn regular(packages: u32, cores: u32, threads: u32, numa: bool) -> Self {
        let mut t = SysfsTree::default();
        let per_thread = packages * cores;
        let n = per_thread * threads;
        let pos = |cpu: u32| {
            let core = cpu % per_thread;
            (core / cores, core % cores, core)
        };
        for cpu in 0..n {
            let (pkg, core_in_pkg, core) = pos(cpu);
            let siblings: Vec<u32> = (0..threads).map(|k| core + k * per_thread).collect();
            let package: Vec<u32> = (0..n).filter(|&c| pos(c).0 == pkg).collect();
            t.cpu_topology(cpu, pkg, core_in_pkg, &siblings, &package);
            t.cache(cpu, 0, 1, "Data", "32K", &siblings);
            t.cache(cpu, 1, 1, "Instruction", "32K", &siblings);
            t.cache(cpu, 2, 2, "Unified", "1024K", &siblings);
            t.cache(cpu, 3, 3, "Unified", "16384K", &package);
        }
        t.set(&format!("{CPU}/online"), &format!("0-{}", n - 1));
        t.set(&format!("{CPU}/possible"), &format!("0-{}", n - 1));
        t.set(&format!("{CPU}/present"), &format!("0-{}", n - 1));
        if numa {
            for p in 0..packages {
                let cpus: Vec<u32> = (0..n).filter(|&c| pos(c).0 == p).collect();
                t.node(p, &cpus, 4 << 20);
            }
            let d: Vec<Vec<u32>> = (0..packages)
                .map(|i| {
                    (0..packages)
                        .map(|j| if i == j { 10 } else { 20 })
                        .collect()
                })
                .collect();
            t.distances(&(0..packages).collect::<Vec<_>>(), &d);
        }
        t.set("proc/meminfo", &format!("MemTotal: {} kB\n", 4u64 << 20));
        t
    }

    /// Topology files of one CPU (ids, sibling masks and lists, old and new names).
    pub fn cpu_topology(
        &mut self,
        cpu: u32,
        pkg: u32,
        core_id: u32,
        core: &[u32],
        package: &[u32],
    ) {
        let d = format!("{CPU}/cpu{cpu}/topology");
        self.set(&format!("{d}/physical_package_id"), &pkg.to_string());
        self.set(&format!("{d}/core_id"), &core_id.to_string());
        for (name, set) in [
            ("thread_siblings", core),
            ("core_cpus", core),
            ("core_siblings", package),
            ("package_cpus", package),
        ] {
            self.set(&format!("{d}/{name}"), &mask(set));
            self.set(&format!("{d}/{name}_list"), &list(set));
        }
    }

    pub fn cache(
        &mut self,
        cpu: u32,
        index: u32,
        level: u32,
        ty: &str,
        size: &str,
        shared: &[u32],
    ) {
        let d = format!("{CPU}/cpu{cpu}/cache/index{index}");
        self.set(&format!("{d}/level"), &level.to_string());
        self.set(&format!("{d}/type"), ty);
        self.set(&format!("{d}/size"), size);
        self.set(&format!("{d}/coherency_line_size"), "64");
        self.set(&format!("{d}/number_of_sets"), "64");
        self.set(&format!("{d}/physical_line_partition"), "1");
        self.set(&format!("{d}/ways_of_associativity"), "8");
        self.set(&format!("{d}/shared_cpu_map"), &mask(shared));
        self.set(&format!("{d}/shared_cpu_list"), &list(shared));
    }

    /// A NUMA node with these CPUs (empty for a CPU-less node) and memory in KiB.
    pub fn node(&mut self, os: u32, cpus: &[u32], mem_kib: u64) -> &mut Self {
        let d = format!("{NODE}/node{os}");
        self.set(&format!("{d}/cpumap"), &mask(cpus));
        self.set(&format!("{d}/cpulist"), &list(cpus));
        self.set(
            &format!("{d}/meminfo"),
            &format!("Node {os} MemTotal:       {mem_kib} kB\nNode {os} MemFree: 1 kB\n"),
        );
        let mut nodes: Vec<u32> = self.node_ids();
        if !nodes.contains(&os) {
            nodes.push(os);
        }
        nodes.sort_unstable();
        let online: Vec<u32> = nodes.clone();
        self.set(&format!("{NODE}/online"), &list(&online));
        self.set(&format!("{NODE}/possible"), &list(&online));
        self
    }

    pub fn node_ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .files
            .keys()
            .filter_map(|k| k.strip_prefix(&format!("{NODE}/node")))
            .filter_map(|r| r.split('/').next()?.parse().ok())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The `distance` file of each node: row `i` of `d` for `nodes[i]`.
    pub fn distances(&mut self, nodes: &[u32], d: &[Vec<u32>]) -> &mut Self {
        for (i, &n) in nodes.iter().enumerate() {
            let row: Vec<String> = d[i].iter().map(|x| x.to_string()).collect();
            self.set(&format!("{NODE}/node{n}/distance"), &row.join(" "));
        }
        self
    }

    /// HMAT: `node`'s best initiators (`access0`, or `access1` when `class` is 1).
    pub fn initiators(&mut self, node: u32, class: u32, initiators: &[u32]) -> &mut Self {
        let d = format!("{NODE}/node{node}/access{class}/initiators");
        self.dirs.push(d.clone());
        for i in initiators {
            self.dirs.push(format!("{d}/node{i}"));
        }
        self
    }

    /// A memory-side cache in front of `node` (`memory_side_cache/indexN`).
    pub fn memside_cache(&mut self, node: u32, index: u32, size_bytes: u64) -> &mut Self {
        let d = format!("{NODE}/node{node}/memory_side_cache/index{index}");
        self.set(&format!("{d}/size"), &size_bytes.to_string());
        self.set(&format!("{d}/line_size"), "64");
        self.set(&format!("{d}/indexing"), "0");
        self
    }

    pub fn set(&mut self, rel: &str, text: &str) -> &mut Self {
        self.files.insert(rel.to_string(), format!("{text}\n"));
        self
    }

    /// A file with exactly these bytes (no newline added): empty files, truncations.
    pub fn raw(&mut self, rel: &str, text: &str) -> &mut Self {
        self.files.insert(rel.to_string(), text.to_string());
        self
    }

    /// Removes a file, or every file below a directory.
    pub fn remove(&mut self, rel: &str) -> &mut Self {
        let prefix = format!("{rel}/");
        self.files
            .retain(|k, _| k != rel && !k.starts_with(&prefix));
        self.dirs.retain(|k| k != rel && !k.starts_with(&prefix));
        self
    }

    /// Writes the tree below `root` (which should be empty).
    pub fn write(&self, root: &Path) {
        for d in &self.dirs {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for (rel, text) in &self.files {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
    }

    /// Writes the tree into a fresh temporary directory.
    pub fn tempdir(&self) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        self.write(t.path());
        t
    }
}
