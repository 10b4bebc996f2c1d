//! Expressions, domains and candidates on real machines: the hwloc sysfs dumps in
//! ../shared/data/hwloc-linux (extracted here into a temporary directory, so a fresh checkout
//! works). When the data directory is missing the tests say so and pass.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use autopin_placement::{candidates, domains, pin_expression, CandidateOptions, CpuList};
use autopin_topology::Machine;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/hwloc-linux")
}

/// One temporary directory per test process; each dump is extracted into it once.
static EXTRACTED: Mutex<Option<tempfile::TempDir>> = Mutex::new(None);

/// Extracts (once) and reads a dump; None (with a note) when the data is not there.
fn dump(name: &str) -> Option<(Machine, ())> {
    let tar = data_dir().join(format!("{name}.tar.bz2"));
    if !tar.exists() {
        eprintln!("skipped: {} not found", tar.display());
        return None;
    }
    // The project's convention: dumps may already be extracted under /tmp/dumps/<name>/.
    let shared = Path::new("/tmp/dumps").join(name);
    let mut guard = EXTRACTED.lock().unwrap_or_else(|e| e.into_inner());
    let base = guard
        .get_or_insert_with(|| tempfile::tempdir().expect("tempdir"))
        .path()
        .to_path_buf();
    let dir = if shared.is_dir() {
        shared
    } else {
        base.join(name)
    };
    if !dir.exists() {
        std::fs::create_dir_all(&dir).expect("mkdir");
        let st = std::process::Command::new("tar")
            .arg("xjf")
            .arg(&tar)
            .arg("-C")
            .arg(&dir)
            .status()
            .expect("run tar");
        assert!(st.success(), "tar xjf {} failed", tar.display());
    }
    drop(guard);
    // Most tarballs hold <name>/, a few another single top directory.
    let only: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read dir")
        .filter_map(|e| Some(e.ok()?.path()))
        .collect();
    assert_eq!(
        only.len(),
        1,
        "{name}: expected one top directory in the tarball"
    );
    let m =
        autopin_topology::source::sysfs::read(&only[0]).unwrap_or_else(|e| panic!("{name}: {e}"));
    Some((m, ()))
}

/// OS indexes of the PUs in the order lstopo prints them.
fn console_pus(name: &str) -> Vec<u32> {
    let text =
        std::fs::read_to_string(data_dir().join(format!("{name}.console"))).expect("console file");
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("PU L#"))
        .filter_map(|l| l.split("(P#").nth(1))
        .filter_map(|l| l.split(|c: char| !c.is_ascii_digit()).next())
        .filter_map(|d| d.parse().ok())
        .collect()
}

fn sel(m: &Machine, e: &str) -> String {
    CpuList(pin_expression(m, e).unwrap_or_else(|err| panic!("{e}: {err}"))).to_list()
}

#[test]
fn em64t_4s2c2t_expressions() {
    let Some((m, _d)) = dump("16em64t-4s2c2t") else {
        return;
    };
    assert_eq!(sel(&m, "S1:0-1"), "1,5");
    assert_eq!(sel(&m, "S1:0-3"), "1,5,9,13");
    assert_eq!(sel(&m, "E:N:4:1:2"), "0,4,1,5");
    assert_eq!(sel(&m, "S:scatter:4"), "0-3");
    assert_eq!(sel(&m, "C3:0-1@M0:1"), "3,7,4");
    let e = pin_expression(&m, "S4:0").unwrap_err().to_string();
    assert!(e.contains("N, S0-S3, D0-D3, C0-C3, M0"), "{e}");
}

#[test]
fn em64t_4s2c2t_candidates() {
    let Some((m, _d)) = dump("16em64t-4s2c2t") else {
        return;
    };
    let all = CandidateOptions {
        max: None,
        include_unpinned: false,
    };
    // Per package (2 cores × 2 threads) there are 1,1,2,1,1 classes for 0..4 threads.
    // n=2: same package (SMT pair or two cores) or two packages → 3.
    assert_eq!(candidates(&m, 2, &all).len(), 3);
    // n=4: packages (4) 1 + (3,1) 1 + (2,2) 3 + (2,1,1) 2 + (1,1,1,1) 1 → 8.
    let c = candidates(&m, 4, &all);
    assert_eq!(c.len(), 8);
    assert_eq!(CpuList(c[0].cpus.clone()).to_list(), "0,8,4,12");
    assert_eq!(CpuList(c[1].cpus.clone()).to_list(), "0-3");
}

#[test]
fn node_domain_follows_lstopo_order_on_every_dump() {
    let dir = data_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} not found", dir.display());
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .into_string()
                .ok()?
                .strip_suffix(".tar.bz2")
                .map(String::from)
        })
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for name in names {
        let Some((m, _d)) = dump(&name) else { continue };
        let ds = domains(&m);
        assert_eq!(
            ds[0].cpus,
            console_pus(&name),
            "{name}: domain N vs lstopo PU order"
        );
        // Every domain's cores-first order is a permutation of its CPUs.
        for d in &ds {
            let (mut a, mut b) = (d.cpus.clone(), d.cores_first.clone());
            a.sort();
            b.sort();
            assert_eq!(a, b, "{name} {}", d.tag);
        }
        // Candidates stay fast and use allowed CPUs only.
        let allowed = m.allowed_cpuset();
        for n in [2, 8] {
            let t = std::time::Instant::now();
            let c = candidates(
                &m,
                n,
                &CandidateOptions {
                    max: Some(16),
                    include_unpinned: false,
                },
            );
            assert!(t.elapsed().as_secs() < 5, "{name} n={n}: {:?}", t.elapsed());
            assert!(!c.is_empty(), "{name} n={n}");
            for cand in &c {
                assert!(
                    cand.cpus.iter().all(|&x| allowed.contains(x)),
                    "{name}: {cand:?}"
                );
            }
        }
    }
}

#[test]
fn restricted_cpuset_dump() {
    let Some((m, _d)) = dump("16amd64-8n2c-cpusets") else {
        return;
    };
    let allowed = m.allowed_cpuset();
    assert!(
        allowed.len() < 16,
        "the dump restricts the allowed CPUs: {allowed}"
    );
    let outside = (0..16).find(|&c| !allowed.contains(c) && m.pu_by_os(c).is_some());
    if let Some(c) = outside {
        let e = pin_expression(&m, &c.to_string()).unwrap_err().to_string();
        assert!(e.contains("not in the allowed set"), "{e}");
    }
    let n = pin_expression(&m, "N").unwrap();
    assert_eq!(n.len(), allowed.len());
}
