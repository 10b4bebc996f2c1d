//! PCI devices from Linux sysfs, relative to the same root as the CPU reader (a dump reads
//! like the live machine): `sys/bus/pci/devices/*` gives each device's ids, class and local
//! CPUs; the OS devices are the entries of `sys/class/{drm,net,infiniband,block,dma}` whose
//! device path runs through a PCI device. Devices are kept as lstopo keeps them by default
//! (its "important" I/O): storage, network, display, co-processors, accelerators, fibre
//! channel and InfiniBand; bridges and the rest are left out. Nothing here is required: an
//! unreadable file drops that one fact, and a machine without PCI in sysfs has no devices.

use crate::cpuset::CpuSet;
use crate::io::{parse_busid, OsDevice, OsDeviceKind, PciDevice};
use std::path::{Path, PathBuf};

/// The devices below `root` (`/` for the live system).
pub fn read(root: &Path) -> Vec<PciDevice> {
    let dir = root.join("sys/bus/pci/devices");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<PciDevice> = entries
        .flatten()
        .filter_map(|e| device(&e.path(), &e.file_name().to_string_lossy()))
        .filter(|d| important(d.class))
        .collect();
    for (busid, os) in os_devices(root) {
        if let Some(d) = out.iter_mut().find(|d| d.busid == busid) {
            d.os_devices.push(os);
        }
    }
    out
}

/// What lstopo shows by default.
fn important(class: u16) -> bool {
    matches!(class >> 8, 0x00 | 0x01 | 0x02 | 0x03 | 0x0b | 0x12)
        || matches!(class, 0x0c04 | 0x0c06)
}

fn text(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn hex(p: &Path) -> Option<u32> {
    let t = text(p)?;
    u32::from_str_radix(t.trim_start_matches("0x"), 16).ok()
}

fn device(dir: &Path, name: &str) -> Option<PciDevice> {
    let busid = parse_busid(name)?;
    let class = hex(&dir.join("class"))? >> 8;
    let local_cpus = text(&dir.join("local_cpulist"))
        .and_then(|l| CpuSet::parse_list(&l).ok())
        .or_else(|| text(&dir.join("local_cpus")).and_then(|m| CpuSet::parse_mask(&m).ok()))
        .unwrap_or_default();
    Some(PciDevice {
        busid,
        vendor: hex(&dir.join("vendor")).unwrap_or(0) as u16,
        device: hex(&dir.join("device")).unwrap_or(0) as u16,
        class: class as u16,
        local_cpus,
        numa_node: text(&dir.join("numa_node"))
            .and_then(|n| n.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok()),
        os_devices: Vec::new(),
        attached_to: 0,
    })
}

/// (bus id of the PCI device it belongs to, the OS device) for every OS device under PCI.
fn os_devices(root: &Path) -> Vec<(String, OsDevice)> {
    let mut out = Vec::new();
    for (class, kind) in [
        ("drm", OsDeviceKind::Gpu),
        ("net", OsDeviceKind::Network),
        ("infiniband", OsDeviceKind::OpenFabrics),
        ("block", OsDeviceKind::Storage),
        ("dma", OsDeviceKind::Dma),
    ] {
        let dir = root.join("sys/class").join(class);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let keep = match kind {
                // The card and render nodes, not the connectors (card0-DP-1).
                OsDeviceKind::Gpu => {
                    (name.starts_with("card") && !name.contains('-')) || name.starts_with("renderD")
                }
                // Whole disks, not their partitions.
                OsDeviceKind::Storage => !e.path().join("partition").exists(),
                _ => true,
            };
            if !keep {
                continue;
            }
            if let Some(busid) = pci_of(&e.path()) {
                out.push((busid, OsDevice { name, kind }));
            }
        }
    }
    out
}

/// The PCI device a sysfs class entry's device path runs through (the last bus id in it).
fn pci_of(entry: &Path) -> Option<String> {
    let target: PathBuf = std::fs::canonicalize(entry).ok()?;
    target.components().rev().find_map(|c| {
        let s = c.as_os_str().to_string_lossy();
        // Only the device form (dddd:bb:dd.f), not the host bridge's `pci0000:00`.
        (s.matches(':').count() == 2 && s.contains('.'))
            .then(|| parse_busid(&s))
            .flatten()
    })
}
