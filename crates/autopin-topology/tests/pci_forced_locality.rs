//! What decides where a PCI tree hangs before its `local_cpus` mask, in hwloc's order: a
//! locality forced by `HWLOC_PCI_LOCALITY`, then hwloc's quirk for the HPE Cray EX235A
//! board. The environment is the process's, so this file holds one test that sets it in
//! turn; each step is checked against lstopo run with the same environment.

mod support;

use autopin_topology::source::sysfs;
use autopin_topology::Machine;
use std::path::Path;
use std::process::Command;
use support::sysfs_tree::{list, mask, SysfsTree};

fn have_lstopo() -> bool {
    Command::new("lstopo-no-graphics")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A network adapter `0000:BB:00.0` right below host bridge `pci0000:BB`, local to `cpus`
/// by both its mask and its list.
fn nic(t: &mut SysfsTree, bus: u8, cpus: &[u32]) {
    let dir = format!("sys/devices/pci0000:{bus:02x}/0000:{bus:02x}:00.0");
    t.set(&format!("{dir}/class"), "0x020000");
    t.set(&format!("{dir}/vendor"), "0x8086");
    t.set(&format!("{dir}/device"), "0x1572");
    t.set(&format!("{dir}/local_cpus"), &mask(cpus));
    t.set(&format!("{dir}/local_cpulist"), &list(cpus));
    t.set(&format!("{dir}/numa_node"), "-1");
}

fn link_devices(root: &Path) {
    let bus = root.join("sys/bus/pci/devices");
    std::fs::create_dir_all(&bus).unwrap();
    for host in std::fs::read_dir(root.join("sys/devices"))
        .unwrap()
        .flatten()
    {
        let h = host.file_name().to_string_lossy().into_owned();
        if !h.starts_with("pci") {
            continue;
        }
        for f in std::fs::read_dir(host.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            std::os::unix::fs::symlink(format!("../../../devices/{h}/{name}"), bus.join(&name))
                .unwrap();
        }
    }
}

/// The CPU-side object each PCI device hangs from in lstopo's console (`Package L#1`,
/// `Group0 L#0` as `Group L#0`, `Machine`), by bus id.
fn lstopo_parents(root: &Path) -> Vec<(String, String)> {
    let out = Command::new("lstopo-no-graphics")
        .args(["-v", "--input"])
        .arg(root)
        .env("HWLOC_COMPONENTS", "-x86")
        .output()
        .expect("run lstopo-no-graphics");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut found = Vec::new();
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim_start();
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let mut w = t.split_whitespace();
        let word = w.next().unwrap_or("");
        let index = w.next().unwrap_or("");
        if word == "PCI" {
            let busid = t
                .split("busid=")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            let under = stack.last().map(|(_, l)| l.clone()).unwrap_or_default();
            found.push((busid.to_string(), under));
        } else if word == "Machine" || (index.starts_with("L#") && word != "HostBridge") {
            let kind = if word.starts_with("Group") {
                "Group"
            } else {
                word
            };
            let label = if word == "Machine" {
                "Machine".to_string()
            } else {
                format!("{} {index}", kind.trim_end_matches("Cache"))
            };
            stack.push((indent, label));
        }
    }
    found.sort();
    found
}

fn our_parents(m: &Machine) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> =
        m.io.iter()
            .map(|d| {
                let o = m.obj(d.attached_to);
                let at = if d.attached_to == 0 {
                    "Machine".to_string()
                } else {
                    format!("{} L#{}", o.type_label(), o.logical_index)
                };
                (d.busid.clone(), at)
            })
            .collect();
    v.sort();
    v
}

#[test]
fn forced_locality_then_quirks_then_the_mask() {
    autopin_testkit::require!(have_lstopo(), "lstopo-no-graphics is not installed");
    for var in [
        "HWLOC_PCI_LOCALITY",
        "HWLOC_PCI_LOCALITY_QUIRK_FAKE",
        "HWLOC_PCI_0000_00_LOCALCPUS",
    ] {
        std::env::remove_var(var);
    }
    // Two packages of two cores; both adapters say they are package 0's.
    let mut t = SysfsTree::regular(2, 2, 1, true);
    nic(&mut t, 0x00, &[0, 1]);
    nic(&mut t, 0x10, &[0, 1]);
    let dir = t.tempdir();
    link_devices(dir.path());
    let read = || sysfs::read_with_affinity(dir.path(), None).unwrap();
    let want = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(lstopo_parents(dir.path()), our_parents(&read()));
    assert_eq!(
        our_parents(&read()),
        want(&[
            ("0000:00:00.0", "Package L#0"),
            ("0000:10:00.0", "Package L#0")
        ])
    );
    // Forced: bus 00 of domain 0 to package 1 (CPUs 2-3); bus 10 is not named, its mask
    // decides.
    std::env::set_var("HWLOC_PCI_LOCALITY", "0000:00 0x0000000c");
    assert_eq!(lstopo_parents(dir.path()), our_parents(&read()));
    assert_eq!(
        our_parents(&read()),
        want(&[
            ("0000:00:00.0", "Package L#1"),
            ("0000:10:00.0", "Package L#0")
        ])
    );
    // A range of buses, from a file, several entries.
    let file = dir.path().join("localities");
    std::fs::write(&file, "0000:00-0f 0x00000004\n0 0x00000008\n").unwrap();
    std::env::set_var("HWLOC_PCI_LOCALITY", &file);
    assert_eq!(lstopo_parents(dir.path()), our_parents(&read()));
    assert_eq!(
        our_parents(&read()),
        want(&[("0000:00:00.0", "L2 L#2"), ("0000:10:00.0", "L2 L#3")])
    );
    std::env::remove_var("HWLOC_PCI_LOCALITY");
    // hwloc's test quirk: every tree on the last CPU.
    std::env::set_var("HWLOC_PCI_LOCALITY_QUIRK_FAKE", "1");
    assert_eq!(lstopo_parents(dir.path()), our_parents(&read()));
    assert_eq!(
        our_parents(&read()),
        want(&[("0000:00:00.0", "L2 L#3"), ("0000:10:00.0", "L2 L#3")])
    );
    std::env::remove_var("HWLOC_PCI_LOCALITY_QUIRK_FAKE");

    // The HPE Cray EX235A: one package of 64 cores × 2 threads; its xGMI port on bus d0
    // hangs from the first CCD (cores 0-7 and their siblings 64-71) whatever the OS says.
    let mut t = SysfsTree::regular(1, 64, 2, true);
    nic(&mut t, 0xd0, &(0..128).collect::<Vec<_>>());
    nic(&mut t, 0x10, &(0..128).collect::<Vec<_>>());
    t.set("sys/class/dmi/id/board_name", "HPE CRAY EX235A");
    let dir = t.tempdir();
    link_devices(dir.path());
    let m = sysfs::read_with_affinity(dir.path(), None).unwrap();
    assert_eq!(lstopo_parents(dir.path()), our_parents(&m));
    assert_eq!(
        our_parents(&m),
        want(&[("0000:10:00.0", "Machine"), ("0000:d0:00.0", "Group L#0")])
    );
    let g = m.obj(
        m.io.iter()
            .find(|d| d.busid == "0000:d0:00.0")
            .unwrap()
            .attached_to,
    );
    assert_eq!(g.cpuset.to_list(), "0-7,64-71");
}
