//! Bad sysfs input gives one clear message naming the file, never a panic.

use autopin_topology::source::sysfs;
use std::fs;
use std::path::Path;

/// A minimal two-CPU sysfs tree.
fn fake_root(dir: &Path) {
    for cpu in 0..2 {
        let t = dir.join(format!("sys/devices/system/cpu/cpu{cpu}/topology"));
        fs::create_dir_all(&t).unwrap();
        fs::write(t.join("physical_package_id"), "0\n").unwrap();
        fs::write(t.join("core_id"), format!("{cpu}\n")).unwrap();
        fs::write(t.join("thread_siblings_list"), format!("{cpu}\n")).unwrap();
        fs::write(t.join("core_siblings_list"), "0-1\n").unwrap();
    }
    fs::write(dir.join("sys/devices/system/cpu/online"), "0-1\n").unwrap();
}

#[test]
fn minimal_tree_reads() {
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert_eq!(m.pus().len(), 2);
    assert_eq!(m.objects_of(autopin_topology::ObjType::Core).len(), 2);
    assert_eq!(
        m.numa_nodes.len(),
        1,
        "no node directory means one NUMA node"
    );
}

#[test]
fn missing_root_is_named() {
    let e = sysfs::read_with_affinity(Path::new("/nonexistent/autopin-root"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/nonexistent/autopin-root") && e.contains("no such directory"),
        "{e}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let e = sysfs::read_with_affinity(tmp.path(), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sys/devices/system/cpu") && e.contains("not a Linux sysfs root"),
        "{e}"
    );
}

#[test]
fn non_numeric_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let f = tmp
        .path()
        .join("sys/devices/system/cpu/cpu0/topology/physical_package_id");
    fs::write(&f, "zero\n").unwrap();
    let e = sysfs::read_with_affinity(tmp.path(), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&f.display().to_string()) && e.contains("'zero' is not a number"),
        "{e}"
    );
}

#[test]
fn truncated_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let f = tmp
        .path()
        .join("sys/devices/system/cpu/cpu0/topology/core_id");
    fs::write(&f, "").unwrap();
    let e = sysfs::read_with_affinity(tmp.path(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("core_id") && e.contains("truncated"), "{e}");

    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    fs::write(tmp.path().join("sys/devices/system/cpu/online"), "0-").unwrap();
    let e = sysfs::read_with_affinity(tmp.path(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("online") && e.contains("not a CPU list"), "{e}");

    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let c = tmp.path().join("sys/devices/system/cpu/cpu0/cache/index0");
    fs::create_dir_all(&c).unwrap();
    fs::write(c.join("level"), "1").unwrap();
    fs::write(c.join("type"), "Data").unwrap();
    fs::write(c.join("size"), "32Q").unwrap();
    let e = sysfs::read_with_affinity(tmp.path(), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("index0/size") && e.contains("not a cache size"),
        "{e}"
    );
}

#[test]
fn offline_and_cgroup_cpus() {
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    fs::write(tmp.path().join("sys/devices/system/cpu/online"), "0").unwrap();
    // cgroup v2: the process's cpuset allows CPU 0 only... and CPU 1 is offline anyway.
    fs::create_dir_all(tmp.path().join("proc/self")).unwrap();
    fs::write(
        tmp.path().join("proc/mounts"),
        "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
    )
    .unwrap();
    fs::write(tmp.path().join("proc/self/cgroup"), "0::/job\n").unwrap();
    fs::create_dir_all(tmp.path().join("sys/fs/cgroup/job")).unwrap();
    fs::write(
        tmp.path().join("sys/fs/cgroup/job/cpuset.cpus.effective"),
        "1\n",
    )
    .unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert_eq!(m.offline.to_list(), "1");
    assert_eq!(m.online_cpuset().to_list(), "0");
    assert!(m.allowed_cpuset().is_empty(), "CPU 0 is outside the cgroup");
    let flat = m.flat_pus();
    assert_eq!(flat.len(), 2);
    assert!(!flat[1].online && !flat[1].allowed);
}

#[test]
fn live_host_reads_and_validates() {
    let m = sysfs::read(Path::new("/")).unwrap();
    m.validate().unwrap();
    assert!(!m.pus().is_empty());
    assert!(
        !m.allowed_cpuset().is_empty(),
        "this test runs on some allowed CPU"
    );
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert_eq!(
        m.allowed_cpuset().len(),
        n,
        "allowed CPUs agree with the affinity mask"
    );
}

#[test]
fn hybrid_kinds_from_frequencies() {
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    for (cpu, base, max) in [(0, 1900000, 5000000), (1, 1400000, 3900000)] {
        let d = tmp
            .path()
            .join(format!("sys/devices/system/cpu/cpu{cpu}/cpufreq"));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("cpuinfo_max_freq"), format!("{max}\n")).unwrap();
        fs::write(d.join("base_frequency"), format!("{base}\n")).unwrap();
    }
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert_eq!(m.core_kinds.len(), 2);
    // Ordered from least to most performant: the E-core first.
    assert_eq!(m.core_kinds[0].cpuset.to_list(), "1");
    assert_eq!(m.core_kinds[1].cpuset.to_list(), "0");
    let flat = m.flat_pus();
    assert_eq!((flat[0].kind, flat[1].kind), (Some(1), Some(0)));
}
