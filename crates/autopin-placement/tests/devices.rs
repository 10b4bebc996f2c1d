//! Pin expressions near I/O devices, on a two-package machine written as sysfs: one GPU
//! near each package and an InfiniBand adapter near package 1. `G<i>` numbers GPUs in bus-id
//! order; `P:busid` and `IF:name` name any device the model lists.

#[path = "../../autopin-topology/tests/support/mod.rs"]
mod support;

use autopin_placement::pin_expression;
use autopin_topology::source::sysfs;
use support::sysfs_tree::{list, mask, SysfsTree};

/// 2 packages × 4 cores × 2 threads: package 0 has CPUs 0-3 and 8-11, package 1 4-7 and 12-15.
fn gpu_machine() -> (tempfile::TempDir, autopin_topology::Machine) {
    let mut t = SysfsTree::regular(2, 4, 2, true);
    let package = |p: u32| -> Vec<u32> { (0..16).filter(|c| (c % 8) / 4 == p).collect() };
    // Listed out of bus order on purpose: G0 is the lower bus id.
    for (busid, class, vendor, near, node) in [
        ("0000:b3:00.0", "0x030200", "0x10de", 1, 1),
        ("0000:17:00.0", "0x030200", "0x10de", 0, 0),
        ("0000:5e:00.0", "0x020700", "0x15b3", 1, 1),
        ("0000:00:1f.0", "0x060100", "0x8086", 0, 0), // an ISA bridge: not listed
    ] {
        let dir = format!("sys/bus/pci/devices/{busid}");
        t.set(&format!("{dir}/class"), class);
        t.set(&format!("{dir}/vendor"), vendor);
        t.set(&format!("{dir}/device"), "0x1db6");
        t.set(&format!("{dir}/local_cpus"), &mask(&package(near)));
        t.set(&format!("{dir}/local_cpulist"), &list(&package(near)));
        t.set(&format!("{dir}/numa_node"), &node.to_string());
    }
    let dir = t.tempdir();
    // The OS devices: class entries that lead into their PCI device's directory.
    for (class, name, busid) in [
        ("infiniband", "mlx5_0", "0000:5e:00.0"),
        ("net", "ib0", "0000:5e:00.0"),
        ("drm", "card1", "0000:b3:00.0"),
        ("drm", "card0", "0000:17:00.0"),
        ("drm", "card0-DP-1", "0000:17:00.0"),
    ] {
        let target = dir
            .path()
            .join(format!("sys/bus/pci/devices/{busid}/{class}/{name}"));
        std::fs::create_dir_all(&target).unwrap();
        let link = dir.path().join(format!("sys/class/{class}/{name}"));
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
    }
    let m = sysfs::read_with_affinity(dir.path(), None).unwrap();
    (dir, m)
}

#[test]
fn devices_hang_from_the_package_their_cpus_are() {
    let (_d, m) = gpu_machine();
    let busids: Vec<&str> = m.io.iter().map(|d| d.busid.as_str()).collect();
    assert_eq!(busids, ["0000:17:00.0", "0000:5e:00.0", "0000:b3:00.0"]);
    let gpus: Vec<&str> = m.gpus().iter().map(|d| d.busid.as_str()).collect();
    assert_eq!(gpus, ["0000:17:00.0", "0000:b3:00.0"]);
    let tree = autopin_topology::view::tree::render(&m);
    let at = |busid: &str| {
        let d = m.io.iter().find(|d| d.busid == busid).unwrap();
        let o = m.obj(d.attached_to);
        format!("{} L#{}", o.type_label(), o.logical_index)
    };
    assert_eq!(at("0000:17:00.0"), "Package L#0");
    assert_eq!(at("0000:b3:00.0"), "Package L#1");
    let ib = m.io_device("ib0").expect("found by its OS name");
    assert_eq!(ib.busid, "0000:5e:00.0");
    let names: Vec<&str> = ib.os_devices.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["ib0", "mlx5_0"]);
    assert!(tree.contains("PCI 0000:b3:00.0 (3D 10de:1db6)\n"), "{tree}");
    // As in lstopo 2.x, a GPU's DRM devices show only with --whole-io.
    assert!(!tree.contains("card1"), "{tree}");
    let whole = autopin_topology::view::tree::render_with(
        &m,
        autopin_topology::view::tree::TreeOptions {
            whole_io: true,
            verbose: false,
        },
    );
    assert!(whole.contains("GPU \"card1\""), "{whole}");
    assert!(
        !whole.contains("card0-DP-1"),
        "connectors are not devices: {whole}"
    );
}

#[test]
fn gpu_pci_and_interface_domains_select_the_devices_cpus() {
    let (_d, m) = gpu_machine();
    // Cores first inside the domain, as S1:0-1 does.
    assert_eq!(pin_expression(&m, "G0:0-1").unwrap(), vec![0, 1]);
    assert_eq!(pin_expression(&m, "G1:0-1").unwrap(), vec![4, 5]);
    assert_eq!(
        pin_expression(&m, "G1").unwrap(),
        pin_expression(&m, "S1").unwrap()
    );
    assert_eq!(
        pin_expression(&m, "P:0000:b3:00.0:0-1").unwrap(),
        vec![4, 5]
    );
    assert_eq!(pin_expression(&m, "P:17:00.0:3").unwrap(), vec![3]);
    assert_eq!(pin_expression(&m, "IF:ib0:0-2").unwrap(), vec![4, 5, 6]);
    assert_eq!(pin_expression(&m, "IF:mlx5_0:0@G0:0").unwrap(), vec![4, 0]);
}

#[test]
fn devices_that_are_not_there_say_which_are() {
    let (_d, m) = gpu_machine();
    let err = |e: &str| pin_expression(&m, e).unwrap_err().to_string();
    let e = err("IF:eth9");
    assert!(
        e.contains("no device IF:eth9") && e.contains("0000:5e:00.0 (ib0, mlx5_0)"),
        "{e}"
    );
    let e = err("P:0000:3b:00.0");
    assert!(e.contains("no device P:0000:3b:00.0"), "{e}");
    let e = err("P:3b:0x.0");
    assert!(e.contains("expected a PCI bus id"), "{e}");
    let e = err("G2:0");
    assert!(
        e.contains("unknown domain 'G2'") && e.contains("G0-G1"),
        "{e}"
    );
    let e = err("IF:ib0:0-1:2");
    assert!(e.contains("too many fields"), "{e}");
    let synthetic = autopin_topology::source::synthetic::parse("package:2 core:2 pu:1").unwrap();
    let e = pin_expression(&synthetic, "IF:ib0")
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no I/O devices"), "{e}");
}

/// Devices of 32-bit PCI domains (Intel VMD's 10000 and up) are pin domains like any
/// other: `P:` takes the bus id as lstopo 3 writes it (or with fewer leading zeros), the
/// devices are listed in hwloc's order (domains compared as numbers: ffff before 10000),
/// and a domain wider than 32 bits is no bus id.
#[test]
fn wide_pci_domains_are_pin_domains() {
    let mut t = SysfsTree::regular(2, 4, 2, true);
    let package = |p: u32| -> Vec<u32> { (0..16).filter(|c| (c % 8) / 4 == p).collect() };
    for (busid, near) in [("10000:01:00.0", 1), ("ffff:00:02.0", 0)] {
        let dir = format!("sys/bus/pci/devices/{busid}");
        t.set(&format!("{dir}/class"), "0x010802");
        t.set(&format!("{dir}/vendor"), "0x144d");
        t.set(&format!("{dir}/device"), "0xa808");
        t.set(&format!("{dir}/local_cpus"), &mask(&package(near)));
    }
    let dir = t.tempdir();
    let m = sysfs::read_with_affinity(dir.path(), None).unwrap();
    assert_eq!(
        pin_expression(&m, "P:10000:01:00.0").unwrap(),
        pin_expression(&m, "S1").unwrap()
    );
    assert_eq!(pin_expression(&m, "P:10000:1:0.0:0-1").unwrap(), vec![4, 5]);
    assert_eq!(pin_expression(&m, "P:0ffff:00:02.0:1").unwrap(), vec![1]);
    let listing = autopin_placement::device_domains_listing(&m);
    let (a, b) = (
        listing.find("Domain P:ffff:00:02.0:").unwrap(),
        listing.find("Domain P:10000:01:00.0:").unwrap(),
    );
    assert!(a < b, "{listing}");
    let e = pin_expression(&m, "P:123456789:01:00.0")
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected a PCI bus id"), "{e}");
    let e = pin_expression(&m, "P:10001:01:00.0")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no device P:10001:01:00.0") && e.contains("10000:01:00.0"),
        "{e}"
    );
}

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k: &str| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn the_gpu_variables_say_which_gpu_each_rank_works_with() {
    use autopin_placement::gpus_of_ranks;
    let (_d, m) = gpu_machine();
    assert_eq!(gpus_of_ranks(&m, 2, &env_of(&[])).unwrap(), None);
    assert_eq!(
        gpus_of_ranks(&m, 2, &env_of(&[("SLURM_STEP_GPUS", "1,0")])).unwrap(),
        Some(vec![1, 0])
    );
    // Slurm's step list wins over the runtime's renumbered view.
    assert_eq!(
        gpus_of_ranks(
            &m,
            2,
            &env_of(&[("CUDA_VISIBLE_DEVICES", "0"), ("SLURM_STEP_GPUS", "1,0")])
        )
        .unwrap(),
        Some(vec![1, 0])
    );
    // Four ranks on two GPUs: two consecutive ranks a GPU.
    assert_eq!(
        gpus_of_ranks(&m, 4, &env_of(&[("CUDA_VISIBLE_DEVICES", "0,1")])).unwrap(),
        Some(vec![0, 0, 1, 1])
    );
    let e = gpus_of_ranks(&m, 2, &env_of(&[("CUDA_VISIBLE_DEVICES", "GPU-3f2a")])).unwrap_err();
    assert!(e.contains("UUIDs"), "{e}");
    let e = gpus_of_ranks(&m, 2, &env_of(&[("ROCR_VISIBLE_DEVICES", "0,7")])).unwrap_err();
    assert!(
        e.contains("GPU 7 is not on this machine") && e.contains("G0-G1"),
        "{e}"
    );
    let synthetic = autopin_topology::source::synthetic::parse("package:2 core:2 pu:1").unwrap();
    let e = gpus_of_ranks(&synthetic, 2, &env_of(&[("CUDA_VISIBLE_DEVICES", "0")])).unwrap_err();
    assert!(e.contains("lists none"), "{e}");
}

#[test]
fn each_rank_gets_the_package_of_its_gpu() {
    use autopin_placement::{rank_share_near_gpus, split_node, split_node_near};
    let (_d, m) = gpu_machine();
    let pkg =
        |p: u32| -> autopin_topology::CpuSet { (0..16).filter(|c| (c % 8) / 4 == p).collect() };
    // The plain split gives rank 0 package 0.
    assert_eq!(split_node(&m, 2).unwrap(), vec![pkg(0), pkg(1)]);
    // Rank 0 drives the GPU near package 1, rank 1 the one near package 0.
    let near = vec![Some(pkg(1)), Some(pkg(0))];
    assert_eq!(split_node_near(&m, 2, &near).unwrap(), vec![pkg(1), pkg(0)]);
    // A rank without a GPU takes what is left.
    assert_eq!(
        split_node_near(&m, 2, &[None, Some(pkg(0))]).unwrap(),
        vec![pkg(1), pkg(0)]
    );
    for (vars, rank0) in [
        (&[("SLURM_STEP_GPUS", "1,0")][..], 1),
        (&[("CUDA_VISIBLE_DEVICES", "1,0")][..], 1),
        (&[("SLURM_JOB_GPUS", "0,1")][..], 0),
    ] {
        let vars: &'static [(&str, &str)] = Box::leak(vars.to_vec().into_boxed_slice());
        let (s0, line) = rank_share_near_gpus(&m, 2, 0, &env_of(vars)).unwrap();
        let (s1, _) = rank_share_near_gpus(&m, 2, 1, &env_of(vars)).unwrap();
        assert_eq!(s0, pkg(rank0), "{vars:?}");
        assert_eq!(s1, pkg(1 - rank0), "{vars:?}");
        assert!(line.unwrap().contains("works with GPU"));
    }
    // Four ranks, two GPUs: both ranks of a GPU share its package.
    let vars: &'static [(&str, &str)] = &[("CUDA_VISIBLE_DEVICES", "1,0")];
    let shares: Vec<_> = (0..4)
        .map(|r| rank_share_near_gpus(&m, 4, r, &env_of(vars)).unwrap().0)
        .collect();
    assert!(shares[0].union(&shares[1]) == pkg(1), "{shares:?}");
    assert!(shares[2].union(&shares[3]) == pkg(0), "{shares:?}");
}
