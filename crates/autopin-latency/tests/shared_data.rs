//! Inference from the real machines' files in tests/data, checked against what
//! is known about them (the `.mct` headers, `c2c/truth.json`).

use autopin_latency::{infer, read, Hints, Role};
use autopin_topology::ObjType;
use std::path::{Path, PathBuf};

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no .{ext} files in {}", dir.display());
    v
}

#[test]
fn mct_files_give_their_header() {
    for path in files(&autopin_testkit::data("mctop"), "mct") {
        let name = path.display().to_string();
        let read::LatencyFile::Mct(f) = read::read_file(&path).unwrap() else {
            panic!("{name}: not read as .mct")
        };
        let (m, inf) = autopin_latency::load(&path).unwrap();
        assert_eq!(m.pus().len(), f.hwcs, "{name}: hardware contexts");
        assert_eq!(m.numa_nodes.len(), f.nodes, "{name}: NUMA nodes");
        assert_eq!(inf.has_smt(), f.smt, "{name}: SMT");
        // The latencies alone (without the header's SMT hint) must agree with the header.
        let blind = infer(&f.matrix, &Hints::default()).unwrap();
        assert_eq!(
            blind.has_smt(),
            f.smt,
            "{name}: SMT inferred without the header"
        );
        let packages = m.objects_of(ObjType::Package);
        let sizes: Vec<usize> = packages.iter().map(|&p| m.obj(p).cpuset.len()).collect();
        assert!(
            sizes.iter().all(|&s| s == sizes[0]),
            "{name}: sockets of unequal sizes {sizes:?}"
        );
        assert!(m.validate().is_ok(), "{name}: {:?}", m.validate());
        assert!(
            m.measurements.latency.is_some(),
            "{name}: latency kept in the model"
        );
    }
}

#[test]
fn c2c_matrices_match_truth() {
    let dir = autopin_testkit::data("c2c");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    let mut checked = 0;
    for path in files(&dir, "csv") {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let t = &truth[&file];
        assert!(t.is_object(), "{file}: not in truth.json");
        let (m, inf) = autopin_latency::load(&path).unwrap();
        assert!(m.validate().is_ok(), "{file}: {:?}", m.validate());
        assert_eq!(
            m.pus().len() as u64,
            t["pus"].as_u64().unwrap(),
            "{file}: PUs"
        );
        let sockets = m.objects_of(ObjType::Package).len() as u64;
        let truth_sockets = t["sockets"].as_u64().unwrap();
        // Never more sockets than the machine has: a level is taken as sockets only when
        // the step above it is beyond what dies on one package show.
        assert!(
            sockets <= truth_sockets,
            "{file}: {sockets} sockets, the machine has {truth_sockets}: {:#?}",
            inf.summary_lines()
        );
        if let Some(l) = inf.level_of(Role::Package) {
            assert_eq!(l.groups.len() as u64, truth_sockets, "{file}: sockets");
        }
        // The coarsest level's groups are the machine's sockets, or its dies (two dies of
        // one package, as on the Threadripper 1950X and the Kunpeng 920), whatever they are
        // called.
        let dies = t["dies"].as_u64().or(t["numa_dies"].as_u64()).unwrap_or(1);
        if truth_sockets * dies > 1 {
            let top = inf.levels.last().expect("a level");
            assert_eq!(
                top.groups.len() as u64,
                truth_sockets * dies,
                "{file}: top groups {:#?}",
                inf.summary_lines()
            );
            assert!(
                top.groups.iter().all(|g| g.len() == top.groups[0].len()),
                "{file}: top groups of unequal sizes"
            );
        }
        // Dies are never called sockets.
        if dies > 1 {
            assert_eq!(sockets, 1, "{file}: dies taken as sockets");
            assert_ne!(inf.levels.last().unwrap().role, Role::Package);
        }
        if let Some(smt) = t["smt"].as_u64() {
            assert_eq!(inf.has_smt(), smt > 1, "{file}: SMT");
        }
        if let Some(sib) = t["smt_sibling_of_0"].as_u64() {
            assert_eq!(
                inf.smt_siblings(0),
                vec![sib as u32],
                "{file}: SMT sibling of CPU 0"
            );
        }
        if let Some(l3) = t["l3_pus"].as_u64() {
            let g = inf
                .llc_groups()
                .into_iter()
                .find(|g| g.contains(&0))
                .unwrap();
            assert_eq!(
                g.len() as u64,
                l3,
                "{file}: CPUs sharing CPU 0's last-level cache"
            );
            let pu0 = m.pu_by_os(0).unwrap();
            let llc = m
                .ancestor(pu0, |o| o.cache.as_ref().is_some_and(|c| c.level == 3))
                .expect("an L3 above CPU 0");
            assert_eq!(
                m.obj(llc).cpuset.len() as u64,
                l3,
                "{file}: L3 object in the model"
            );
        }
        if let Some(l2) = t["l2_pus"].as_u64() {
            let level = inf
                .level_of(Role::Cache(2))
                .unwrap_or_else(|| panic!("{file}: no L2 level"));
            assert!(
                level.groups.iter().all(|g| g.len() as u64 == l2),
                "{file}: L2 groups"
            );
        }
        if t["hybrid"].is_string() {
            let cores = inf.cores();
            let two = cores.iter().filter(|c| c.len() == 2).count();
            let one = cores.iter().filter(|c| c.len() == 1).count();
            assert_eq!(
                (two, one),
                (8, 8),
                "{file}: 8 two-thread P-cores and 8 one-thread E-cores"
            );
            assert!(
                cores
                    .iter()
                    .filter(|c| c.len() == 2)
                    .flatten()
                    .all(|&c| c < 16),
                "{file}: P-cores are CPUs 0-15"
            );
            assert_eq!(m.core_kinds.len(), 2, "{file}: two core kinds");
        }
        checked += 1;
    }
    assert_eq!(checked, 14);
}

/// Real measurements vary from run to run; the inference must not hinge on the exact
/// numbers. Every matrix, perturbed by up to ±5% per pair (a fixed pseudo-random sequence,
/// so the test is deterministic), must give the same cores, LLC groups and sockets.
#[test]
fn c2c_inference_survives_noise() {
    for path in files(&autopin_testkit::data("c2c"), "csv") {
        let file = path.display().to_string();
        let read::LatencyFile::C2c(m) = read::read_file(&path).unwrap() else {
            panic!()
        };
        let clean = infer(&m, &Hints::default()).unwrap();
        let mut noisy = m.clone();
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let n = m.len();
        for i in 0..n {
            for j in (i + 1)..n {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let f = 1.0 + ((s % 10_001) as f64 / 10_000.0 - 0.5) * 0.1;
                noisy.values[i][j] *= f;
                noisy.values[j][i] = noisy.values[i][j];
            }
        }
        let inf = infer(&noisy, &Hints::default()).unwrap();
        assert_eq!(inf.cores(), clean.cores(), "{file}: cores under noise");
        assert_eq!(
            inf.llc_groups(),
            clean.llc_groups(),
            "{file}: LLC groups under noise"
        );
        assert_eq!(
            inf.packages(),
            clean.packages(),
            "{file}: sockets under noise"
        );
    }
}

/// The OS topology of a machine, as Linux numbers it: cores counted through the sockets,
/// dies and last-level caches in order; a core's threads `cores` apart (or adjacent).
struct Os {
    sockets: u32,
    /// Dies per socket, as hwloc reports them (Die objects) and each a NUMA node.
    dies: u32,
    cores: u32,
    threads: u32,
    adjacent: bool,
    /// Cores sharing one L3 (0: no L3 object).
    l3_cores: u32,
    /// Cores sharing one L2 besides their own (0: private L2s).
    l2_cores: u32,
    /// Cores in one cluster group (0: none).
    cluster_cores: u32,
    /// Whether the dies are Die objects (else only NUMA nodes say so).
    die_objects: bool,
}

impl Os {
    fn machine(&self) -> autopin_topology::Machine {
        use autopin_topology::builder::{Builder, NumaSpec};
        use autopin_topology::{CacheAttr, CacheKind, CpuSet, Object};
        let cpu = |core: u32, t: u32| {
            if self.adjacent {
                core * self.threads + t
            } else {
                core + t * self.cores
            }
        };
        let set_of = |first: u32, n: u32| -> CpuSet {
            (first..first + n)
                .flat_map(|c| (0..self.threads).map(move |t| cpu(c, t)))
                .collect()
        };
        let mut b = Builder::new();
        for c in 0..self.cores {
            for t in 0..self.threads {
                b.add_pu(cpu(c, t), true, None);
            }
            b.add(Object::new(ObjType::Core, Some(c), set_of(c, 1)));
        }
        let cache = |level: u8, set: CpuSet| {
            let mut o = Object::new(ObjType::Cache, None, set);
            o.cache = Some(CacheAttr {
                level,
                kind: CacheKind::Unified,
                size: 1 << 20,
                line_size: 64,
                ways: None,
            });
            o
        };
        let per_socket = self.cores / self.sockets;
        let per_die = per_socket / self.dies;
        for s in 0..self.sockets {
            b.add(Object::new(
                ObjType::Package,
                Some(s),
                set_of(s * per_socket, per_socket),
            ));
        }
        for d in 0..self.sockets * self.dies {
            let set = set_of(d * per_die, per_die);
            if self.die_objects && self.dies > 1 {
                b.add(Object::new(ObjType::Die, Some(d), set.clone()));
            }
            b.add_numa(NumaSpec {
                os_index: d,
                cpuset: set,
                initiators: CpuSet::new(),
                memory: 1 << 30,
                kind: None,
                tier: None,
            });
        }
        for (n, level) in [(self.l3_cores, 3u8), (self.l2_cores, 2u8)] {
            if let Some(groups) = self.cores.checked_div(n) {
                for g in 0..groups {
                    b.add(cache(level, set_of(g * n, n)));
                }
            }
        }
        if let Some(groups) = self.cores.checked_div(self.cluster_cores) {
            for g in 0..groups {
                let mut o = Object::new(
                    ObjType::Group,
                    None,
                    set_of(g * self.cluster_cores, self.cluster_cores),
                );
                o.info.insert("kind".into(), "Cluster".into());
                b.add(o);
            }
        }
        b.build()
    }
}

/// The OS topology of each machine in c2c/ (from truth.json, and for the dies what hwloc
/// reports: Die objects on the Threadripper 1950X, NUMA nodes only on the Kunpeng 920).
fn os_of(file: &str) -> Option<Os> {
    let os = |sockets, dies, cores, threads, adjacent, l3_cores| Os {
        sockets,
        dies,
        cores,
        threads,
        adjacent,
        l3_cores,
        l2_cores: 0,
        cluster_cores: 0,
        die_objects: true,
    };
    Some(match file {
        "amd-epyc-7r13.csv" => os(2, 1, 96, 2, false, 8),
        "amd-ryzen7-2700x.csv" => os(1, 1, 8, 2, true, 4),
        "amd-ryzen9-5950x.csv" => os(1, 1, 16, 2, false, 8),
        "amd-threadripper-1950x.csv" => os(1, 2, 16, 2, false, 4),
        "aws-graviton2.csv" => os(1, 1, 64, 1, false, 64),
        "dual-amd-epyc-7742.csv" => os(2, 1, 128, 2, false, 4),
        "dual-ibm-power7.csv" => os(2, 1, 16, 1, false, 0),
        "dual-xeon-e5-2680v4.csv" => os(2, 1, 28, 2, false, 14),
        "dual-xeon-gold-6242.csv" => os(2, 1, 32, 2, false, 16),
        "dual-xeon-x5650.csv" => os(2, 1, 12, 2, false, 6),
        "hisilicon-kunpeng920.csv" => Os {
            cluster_cores: 4,
            die_objects: false,
            ..os(1, 2, 64, 1, false, 32)
        },
        "intel-i7-6700k.csv" => os(1, 1, 4, 2, true, 4),
        "intel-xeon-phi-7210.csv" => Os {
            l2_cores: 2,
            ..os(1, 1, 64, 1, false, 0)
        },
        _ => return None,
    })
}

/// With the OS topology beside the matrix, every level the latencies find is named by what
/// the OS says, the dies of the Threadripper 1950X and the Kunpeng 920 are dies or NUMA
/// nodes (never sockets), and the sockets are exactly the machine's: also on the machines
/// whose socket step alone is within what dies show (two-socket EPYCs, the Xeon X5650).
#[test]
fn c2c_levels_named_by_the_os_topology() {
    let dir = autopin_testkit::data("c2c");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
    let mut checked = 0;
    for path in files(&dir, "csv") {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let Some(os) = os_of(&file) else { continue };
        let os = os.machine();
        let (m, inf) = autopin_latency::load_with_os(&path, Some(&os)).unwrap();
        assert!(m.validate().is_ok(), "{file}: {:?}", m.validate());
        for l in &inf.levels {
            assert_eq!(
                l.named_by,
                autopin_latency::NamedBy::Os,
                "{file}: level {} not matched: {:#?}",
                l.name,
                inf.summary_lines()
            );
        }
        let sockets = m.objects_of(ObjType::Package).len() as u64;
        assert_eq!(sockets, truth[&file]["sockets"].as_u64().unwrap(), "{file}");
        assert_eq!(
            m.numa_nodes.len(),
            os.numa_nodes.len(),
            "{file}: NUMA nodes"
        );
        let names: Vec<&str> = inf.levels.iter().map(|l| l.name.as_str()).collect();
        match file.as_str() {
            "amd-threadripper-1950x.csv" => {
                assert_eq!(names, ["SMT (core)", "L3 group", "die, NUMA node"]);
                assert_eq!(m.objects_of(ObjType::Die).len(), 2);
            }
            "hisilicon-kunpeng920.csv" => {
                assert_eq!(names, ["L3 group, NUMA node"]);
                assert_eq!(m.objects_of(ObjType::Die).len(), 0);
            }
            "dual-amd-epyc-7742.csv" | "amd-epyc-7r13.csv" => {
                assert_eq!(
                    names,
                    ["SMT (core)", "L3 group", "package, NUMA node"],
                    "{file}"
                );
            }
            "dual-xeon-x5650.csv" => {
                assert_eq!(names, ["SMT (core)", "package, NUMA node, L3 group"]);
            }
            "intel-xeon-phi-7210.csv" => assert_eq!(names, ["L2 group"]),
            _ => {}
        }
        // The latency-only names never claim sockets the OS does not have.
        let (_, alone) = autopin_latency::load(&path).unwrap();
        assert!(alone.packages().len() as u64 <= sockets, "{file}");
        checked += 1;
    }
    assert_eq!(checked, 13);
}
