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

/// The warnings that name `file`, which must be exactly one.
fn one_warning_naming(m: &autopin_topology::Machine, file: &Path) -> String {
    let named: Vec<&String> = m
        .warnings
        .iter()
        .filter(|w| w.starts_with(&file.display().to_string()))
        .collect();
    assert_eq!(
        named.len(),
        1,
        "one warning for {}: {:?}",
        file.display(),
        m.warnings
    );
    named[0].clone()
}

#[test]
fn non_numeric_id_is_a_warning_and_the_id_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let f = tmp
        .path()
        .join("sys/devices/system/cpu/cpu0/topology/physical_package_id");
    fs::write(&f, "zero\n").unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    let w = one_warning_naming(&m, &f);
    assert!(
        w.contains("'zero' is not a number") && w.contains("unknown"),
        "{w}"
    );
    let p = m.objects_of(autopin_topology::ObjType::Package);
    assert_eq!(p.len(), 1, "the package still exists");
    assert_eq!(m.obj(p[0]).os_index, None, "with its id unknown");
}

#[test]
fn truncated_files_fall_back_with_one_warning_each() {
    // An empty core_id: the core exists, its id is unknown.
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let f = tmp
        .path()
        .join("sys/devices/system/cpu/cpu0/topology/core_id");
    fs::write(&f, "").unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert!(one_warning_naming(&m, &f).contains("truncated"));
    assert_eq!(m.objects_of(autopin_topology::ObjType::Core).len(), 2);

    // A truncated global online list: the per-CPU files decide (cpu1 says offline).
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let f = tmp.path().join("sys/devices/system/cpu/online");
    fs::write(&f, "0-").unwrap();
    fs::write(tmp.path().join("sys/devices/system/cpu/cpu1/online"), "0\n").unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert!(one_warning_naming(&m, &f).contains("not a CPU list"));
    assert_eq!(m.online_cpuset().to_list(), "0");
    assert_eq!(m.offline.to_list(), "1");

    // The case: a CPU's own online file with no content is online, as in hwloc.
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    fs::remove_file(tmp.path().join("sys/devices/system/cpu/online")).unwrap();
    let f = tmp.path().join("sys/devices/system/cpu/cpu1/online");
    fs::write(&f, "").unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert!(one_warning_naming(&m, &f).contains("CPU 1 is taken as online"));
    assert_eq!(m.online_cpuset().to_list(), "0-1");

    // A cache size that is garbage: the cache stays, its size unknown.
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let c = tmp.path().join("sys/devices/system/cpu/cpu0/cache/index0");
    fs::create_dir_all(&c).unwrap();
    fs::write(c.join("level"), "1").unwrap();
    fs::write(c.join("type"), "Data").unwrap();
    fs::write(c.join("shared_cpu_list"), "0").unwrap();
    fs::write(c.join("size"), "32Q").unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert!(one_warning_naming(&m, &c.join("size")).contains("not a cache size"));
    assert_eq!(m.caches_of_level(1).len(), 1);
    assert_eq!(
        m.obj(m.caches_of_level(1)[0]).cache.as_ref().unwrap().size,
        0
    );

    // A cache level that is garbage: hwloc skips the cache.
    fs::write(c.join("level"), "one").unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert!(one_warning_naming(&m, &c.join("level")).contains("skipped"));
    assert!(m.caches_of_level(1).is_empty());

    // A level as high as a level can be (255): read without overflow (the fuzz test found
    // an addition on the level's byte that overflowed).
    fs::write(c.join("level"), "255").unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert!(m.caches_of_level(1).is_empty());
}

#[test]
fn permission_denied_is_a_warning_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    let denied = tmp
        .path()
        .join("sys/devices/system/cpu/cpu1/topology/thread_siblings_list");
    let fault = |p: &Path| {
        (p == denied).then(|| std::io::Error::from(std::io::ErrorKind::PermissionDenied))
    };
    let m = sysfs::read_with_faults(tmp.path(), None, &fault).unwrap();
    let w = one_warning_naming(&m, &denied);
    assert!(
        w.contains("unreadable") && w.contains("ermission denied"),
        "{w}"
    );
    // CPU 1's core is unknown, as in hwloc: its PU hangs from the package.
    assert_eq!(m.objects_of(autopin_topology::ObjType::Core).len(), 1);
    assert_eq!(m.pus().len(), 2);
    // Denying the CPU directory itself leaves nothing to describe: an error naming it.
    let cpu_dir = tmp.path().join("sys/devices/system/cpu");
    let fault = |p: &Path| {
        (p == cpu_dir).then(|| std::io::Error::from(std::io::ErrorKind::PermissionDenied))
    };
    let e = sysfs::read_with_faults(tmp.path(), None, &fault)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sys/devices/system/cpu") && e.contains("cannot list"),
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

/// No cgroup hierarchy mounted (a minimal initramfs, as in the QEMU guests, or a bare
/// container): an empty /proc/self/cgroup is no fault, nothing confines the process, and
/// nothing is said about it.
#[test]
fn no_cgroup_mounted_and_an_empty_proc_self_cgroup_say_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    fake_root(tmp.path());
    fs::create_dir_all(tmp.path().join("proc/self")).unwrap();
    fs::write(
        tmp.path().join("proc/mounts"),
        "proc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n",
    )
    .unwrap();
    fs::write(tmp.path().join("proc/self/cgroup"), "").unwrap();
    let m = sysfs::read_with_affinity(tmp.path(), None).unwrap();
    assert!(
        !m.warnings.iter().any(|w| w.contains("cgroup")),
        "{:?}",
        m.warnings
    );
    assert_eq!(m.allowed_cpuset(), m.online_cpuset());
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
