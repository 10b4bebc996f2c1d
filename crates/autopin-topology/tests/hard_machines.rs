//! Machines whose sysfs trips naive readers (issue 10): broken files, CPU-less memory nodes,
//! contradictory NUMA tables, AMD compute units. Each tree is built by the test-only sysfs
//! builder and read twice — by autopin and by the installed hwloc
//! (`HWLOC_FSROOT=DIR lstopo-no-graphics -v`) — and the two must agree on every level the
//! project's referee (`tests/tools/hwloc_console_check.py`) compares: packages, cores,
//! L1d/L2/L3 and each PU's local NUMA nodes.

mod support;

use autopin_topology::source::sysfs;
use autopin_topology::{Machine, ObjType};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::sysfs_tree::{mask, SysfsTree, CPU, NODE};

fn repo_tests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

fn have_lstopo() -> bool {
    Command::new("lstopo-no-graphics")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Reads `tree` with autopin and compares with lstopo on the same files. Returns our model.
/// lstopo comes with scripts/deps.sh (package hwloc): without it the test fails.
fn read_and_compare(name: &str, tree: &SysfsTree) -> Machine {
    let dir = tree.tempdir();
    let m = sysfs::read_with_affinity(dir.path(), None)
        .unwrap_or_else(|e| panic!("{name}: autopin cannot read the tree: {e}"));
    m.validate().unwrap();
    assert!(
        have_lstopo(),
        "{name}: lstopo-no-graphics is not installed (scripts/deps.sh installs hwloc)"
    );
    let out = Command::new("lstopo-no-graphics")
        .arg("-v")
        .env("HWLOC_FSROOT", dir.path())
        .env("HWLOC_COMPONENTS", "-x86")
        // hwloc 2.9 hides NVIDIA GPU memory nodes everywhere; newer hwloc (and autopin)
        // keep them except on POWER.
        .env("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name}: lstopo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let work = tempfile::tempdir().unwrap();
    let console = work.path().join("lstopo.console");
    std::fs::write(&console, &out.stdout).unwrap();
    let json = work.path().join("ours.json");
    std::fs::write(
        &json,
        serde_json::to_string(&serde_json::json!({ "pus": m.flat_pus() })).unwrap(),
    )
    .unwrap();
    let check = Command::new("python3")
        .arg(repo_tests().join("tools/hwloc_console_check.py"))
        .arg(&console)
        .arg(&json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && text.trim_end().ends_with("OK"),
        "{name}: autopin and lstopo differ:\n{text}\nlstopo:\n{}\nours:\n{}",
        String::from_utf8_lossy(&out.stdout),
        autopin_topology::view::tree::render(&m)
    );
    m
}

fn node(m: &Machine, os: u32) -> &autopin_topology::NumaNode {
    m.numa_nodes.iter().find(|n| n.os_index == os).unwrap()
}

fn pu_numa(m: &Machine, os: u32) -> Vec<u32> {
    m.flat_pus().into_iter().find(|p| p.os == os).unwrap().numa
}

// ---- class 1: files that exist but cannot be used -------------------------------------

#[test]
fn empty_and_garbage_files_read_like_hwloc() {
    let mut t = SysfsTree::regular(2, 2, 2, true);
    // The case: a CPU's `online` file with no content, no global list.
    t.remove(&format!("{CPU}/online"));
    t.raw(&format!("{CPU}/cpu3/online"), "");
    t.set(&format!("{CPU}/cpu5/online"), "1");
    // An empty core_id, a garbage package id, a cache type nobody knows, a meminfo without
    // MemTotal: attributes skipped, objects kept.
    t.raw(&format!("{CPU}/cpu2/topology/core_id"), "");
    t.set(&format!("{CPU}/cpu2/topology/physical_package_id"), "x");
    t.set(&format!("{CPU}/cpu1/cache/index2/type"), "Weird");
    t.set(&format!("{NODE}/node1/meminfo"), "garbage");
    let m = read_and_compare("class1", &t);
    assert_eq!(m.pus().len(), 8);
    assert_eq!(m.objects_of(ObjType::Core).len(), 4);
    assert_eq!(m.objects_of(ObjType::Package).len(), 2);
    for f in [
        "cpu3/online",
        "cpu2/topology/core_id",
        "cpu2/topology/physical_package_id",
        "cpu1/cache/index2/type",
        "node1/meminfo",
    ] {
        assert_eq!(
            m.warnings.iter().filter(|w| w.contains(f)).count(),
            1,
            "one warning for {f}: {:?}",
            m.warnings
        );
    }
}

// ---- class 2: NUMA nodes without CPUs --------------------------------------------------

/// Two packages of 4 cores × 2 threads with their DRAM nodes 0 and 1, plus:
/// node 2, HBM whose HMAT best initiator is node 0 (access1) and which has a memory-side cache;
/// node 3, CXL memory equally far from both packages (distances tie: the machine's);
/// node 4, NVIDIA GPU memory whose GPU sits near package 1;
/// node 5, memory nearest to package 1 by distance.
fn cpuless_tree() -> SysfsTree {
    let mut t = SysfsTree::regular(2, 4, 2, true);
    for n in 2..=5 {
        t.node(n, &[], 16 << 20);
    }
    t.initiators(2, 1, &[0]);
    t.initiators(2, 0, &[0, 1]); // access1 wins over access0, as in hwloc
    t.memside_cache(0, 1, 4 << 30);
    let d = vec![
        vec![10, 21, 17, 28, 40, 30],
        vec![21, 10, 28, 17, 40, 30],
        vec![17, 28, 10, 28, 40, 40],
        vec![28, 28, 28, 10, 40, 40],
        vec![40, 40, 40, 40, 10, 40],
        vec![30, 20, 40, 40, 40, 10],
    ];
    t.distances(&[0, 1, 2, 3, 4, 5], &d);
    let package1: Vec<u32> = (0..16).filter(|c| (c % 8) >= 4).collect();
    t.set(
        "proc/driver/nvidia/gpus/0000:41:00.0/numa_status",
        "Node: 4\nStatus: online",
    );
    t.set(
        "sys/bus/pci/devices/0000:41:00.0/local_cpus",
        &mask(&package1),
    );
    t.set(
        "sys/bus/pci/devices/0000:41:00.0/local_cpulist",
        &support::sysfs_tree::list(&package1),
    );
    t
}

#[test]
fn cpuless_nodes_attach_where_hwloc_attaches_them() {
    let m = read_and_compare("class2", &cpuless_tree());
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    // Node 2 (HMAT initiator node 0) is local to package 0 only; node 3 to every PU.
    assert_eq!(pu_numa(&m, 0), vec![0, 2, 3]);
    // Node 3 ties between the packages: the machine's, local to every PU.
    assert_eq!(m.obj(node(&m, 3).attached_to).ty, ObjType::Machine);
    // Node 4 (GPU near package 1) and node 5 (nearest node 1) are package 1's.
    assert_eq!(pu_numa(&m, 4), vec![1, 3, 4, 5]);
    assert_eq!(pu_numa(&m, 12), vec![1, 3, 4, 5]);
    // No CPU-less node claims CPUs, and each shows its kind.
    for os in 2..=5 {
        assert!(node(&m, os).cpuset.is_empty());
    }
    assert_eq!(node(&m, 4).kind.as_deref(), Some("GPUMemory"));
    // The memory-side cache is an object between package 0 and node 0, as in lstopo.
    assert_eq!(m.mem_caches.len(), 1);
    assert_eq!(node(&m, 0).mem_cache, Some(0));
    assert_eq!(m.mem_caches[0].cache.size, 4 << 30);
    assert_eq!(m.obj(m.mem_caches[0].attached_to).ty, ObjType::Package);
    let tree = autopin_topology::view::tree::render(&m);
    assert!(tree.contains("NUMANode(GPUMemory, no CPUs)"), "{tree}");
    assert!(
        tree.contains("\n    MemCache L#0 (4096MiB)\n      NUMANode L#1 (P#0"),
        "{tree}"
    );
    let boxes = autopin_topology::view::boxes::render(&m);
    assert!(boxes.contains("4 (GPUMemory, no CPUs, 16"), "{boxes}");
    assert!(
        boxes.contains("local to no single socket: 3 (no CPUs"),
        "{boxes}"
    );
    let svg = autopin_topology::view::svg::render(&m);
    assert!(
        svg.contains("NUMANode(GPUMemory, no CPUs) P#4"),
        "svg shows the kind"
    );
    let dot = autopin_topology::view::dot::render(&m);
    assert!(dot.contains("NUMANode(GPUMemory, no CPUs) P#4"), "{dot}");
    let json = serde_json::to_value(autopin_topology::source::json::to_document(&m)).unwrap();
    let nodes = json["machine"]["numa_nodes"].as_array().unwrap();
    assert!(nodes
        .iter()
        .any(|n| n["kind"] == "GPUMemory" && n["os_index"] == 4));
}

#[test]
fn cpuless_node_without_locality_is_the_machines() {
    // No distances, no initiators: hwloc attaches a CPU-less node to the machine.
    let mut t = SysfsTree::regular(2, 2, 1, true);
    t.node(7, &[], 1 << 20);
    for n in [0, 1] {
        t.remove(&format!("{NODE}/node{n}/distance"));
    }
    let m = read_and_compare("class2-bare", &t);
    assert_eq!(m.obj(node(&m, 7).attached_to).ty, ObjType::Machine);
    assert!(node(&m, 7).local_to_none);
    assert_eq!(pu_numa(&m, 0), vec![0], "no PU gets node 7 as local memory");
}

// ---- class 3: contradictory NUMA information -------------------------------------------

#[test]
fn node_covering_every_cpu_beside_others_is_repaired_like_hwloc() {
    let mut t = SysfsTree::regular(2, 2, 2, true);
    // Node 0 claims every CPU while node 1 claims package 1's: hwloc keeps the first claim.
    let all: Vec<u32> = (0..8).collect();
    t.node(0, &all, 8 << 20);
    let m = read_and_compare("class3-cover", &t);
    assert_eq!(m.numa_nodes.len(), 1, "{:?}", m.numa_nodes);
    assert!(
        m.warnings
            .iter()
            .any(|w| w.contains("node1/cpumap") && w.contains("left out")),
        "{:?}",
        m.warnings
    );
}

#[test]
fn overlapping_and_straddling_nodes_are_repaired_like_hwloc() {
    let mut t = SysfsTree::regular(2, 2, 2, true);
    // CPUs numbered 0-3 first threads; package 0 = {0,1,4,5}, package 1 = {2,3,6,7}.
    // Node 0 straddles the packages, node 1 overlaps it, node 2 takes the rest.
    t.node(0, &[0, 1, 4, 5, 2], 1 << 20);
    t.node(1, &[2, 3, 6, 7], 1 << 20);
    t.node(2, &[3, 6, 7], 1 << 20);
    t.distances(
        &[0, 1, 2],
        &[vec![10, 20, 20], vec![20, 10, 20], vec![20, 20, 10]],
    );
    let m = read_and_compare("class3-overlap", &t);
    assert!(
        m.warnings.iter().any(|w| w.contains("node1/cpumap")),
        "{:?}",
        m.warnings
    );
    assert!(
        m.warnings
            .iter()
            .any(|w| w.contains("NUMA node 0") && w.contains("cut across")),
        "{:?}",
        m.warnings
    );
}

// ---- class 4: AMD compute units --------------------------------------------------------

/// One Opteron 6200-like package: 4 compute units × 2 integer cores; each core its own L1d,
/// each unit one L1i and one L2 over both cores, one L3. The kernel puts a unit's two cores
/// into `thread_siblings` but gives them distinct `core_id`s.
fn bulldozer(family: u32) -> SysfsTree {
    let mut t = SysfsTree::default();
    for cpu in 0..8u32 {
        let unit = [cpu & !1, cpu | 1];
        let all: Vec<u32> = (0..8).collect();
        t.cpu_topology(cpu, 0, cpu, &unit, &all);
        t.cache(cpu, 0, 1, "Data", "16K", &[cpu]);
        t.cache(cpu, 1, 1, "Instruction", "64K", &unit);
        t.cache(cpu, 2, 2, "Unified", "2048K", &unit);
        t.cache(cpu, 3, 3, "Unified", "6144K", &all);
    }
    t.set(&format!("{CPU}/online"), "0-7");
    let mut cpuinfo = String::new();
    for cpu in 0..8 {
        cpuinfo.push_str(&format!(
            "processor\t: {cpu}\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: 1\nmodel name\t: AMD Opteron(TM) Processor 6272\n\n"
        ));
    }
    t.set("proc/cpuinfo", &cpuinfo);
    // hwloc-gather-topology records the architecture here; without it hwloc reading a dump
    // does not know it is x86 and skips its AMD quirks.
    t.set("proc/hwloc-nofile-info", "Architecture: x86_64");
    t
}

#[test]
fn compute_unit_cores_are_two_cores() {
    let m = read_and_compare("class4-bulldozer", &bulldozer(21));
    assert_eq!(
        m.objects_of(ObjType::Core).len(),
        8,
        "{}",
        autopin_topology::view::tree::render(&m)
    );
    assert_eq!(m.caches_of_level(2).len(), 4);
}

#[test]
fn other_families_keep_siblings_as_threads() {
    // The same files on a non-CU family are hardware threads of one core (hwloc's rule is
    // tied to families 21 and 22).
    let m = read_and_compare("class4-zen", &bulldozer(23));
    assert_eq!(m.objects_of(ObjType::Core).len(), 4);
}
