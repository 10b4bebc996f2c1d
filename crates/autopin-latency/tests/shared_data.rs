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
        match file.as_str() {
            // Known failures: both are one package holding two dies, each die its own NUMA
            // node with its own memory. Cross-die transfers then cost what crossing sockets
            // costs elsewhere (1950x: ×1.7 above the in-die level; Kunpeng 920: ×2.1), and
            // nothing in a latency matrix tells a die from a socket. MCTOP, which also goes by
            // latency, reports them as sockets as well.
            "amd-threadripper-1950x.csv" | "hisilicon-kunpeng920.csv" => {
                assert_eq!(
                    sockets, 2,
                    "{file}: the two dies are expected to come out as sockets"
                );
                assert_eq!(t["sockets"], 1);
            }
            _ => assert_eq!(sockets, t["sockets"].as_u64().unwrap(), "{file}: sockets"),
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
