//! PCI devices from Linux sysfs, relative to the same root as the CPU reader (a dump reads
//! like the live machine): `sys/bus/pci/devices/*` gives each device's ids, class and local
//! CPUs; the OS devices are the entries of `sys/class/{drm,net,infiniband,block,dma}` whose
//! device path runs through a PCI device. Devices are kept as lstopo keeps them by default
//! (its "important" I/O): storage, network, display, co-processors, accelerators, fibre
//! channel and InfiniBand; the rest, and the host and PCI bridges, make up the tree
//! `--whole-io` shows. Nothing here is required: an unreadable file drops that one fact,
//! and a machine without PCI in sysfs has no devices.

use crate::cpuset::CpuSet;
use crate::io::{important_class, parse_busid, OsDevice, OsDeviceKind, PciBridge, PciDevice};
use crate::model::Machine;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One PCI function read from sysfs: the device, what it sits behind, and its bus range
/// when it is a PCI-to-PCI bridge.
type Read = (PciDevice, Upstream, Option<(u8, u8)>);

/// Reads the PCI tree below `root` (`/` for the live system) into `m`: the devices lstopo
/// shows by default into `m.io`, the others into `m.pci_other`, host and PCI-to-PCI
/// bridges into `m.pci_bridges`. Each device is found through `sys/bus/pci/devices`; its
/// directory's parent in `sys/devices/pci*` is the bridge it sits behind, or the
/// `pciDDDD:BB` directory of its host bridge. Nothing is attached yet
/// (`Machine::attach_io`).
pub fn read_into(root: &Path, m: &mut Machine) {
    let dir = root.join("sys/bus/pci/devices");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    // A dump's configuration spaces are plain files; the live system's are the devices',
    // read through the kernel: in a virtual machine every 4 bytes is a trap (10 ms for one
    // device's 4 KiB, on every `autopin run`), and a sleeping device would be woken. There
    // the kernel's own files say what autopin needs.
    let live = root == Path::new("/");
    let mut all: BTreeMap<String, Read> = BTreeMap::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let Some(d) = device(&path, &name, live) else {
            continue;
        };
        let up = upstream(&path, &d.busid);
        let buses = bridge_buses(&path, &d, live);
        all.insert(d.busid.clone(), (d, up, buses));
    }
    for (busid, os) in os_devices(root) {
        if let Some((d, _, _)) = all.get_mut(&busid) {
            d.os_devices.push(os);
        }
    }
    // A device below a function that is no bridge here hangs from its host bridge.
    let orphans: Vec<String> = all
        .iter()
        .filter(|(_, (_, up, _))| match up {
            Upstream::Bridge(p) => !all.get(p).is_some_and(|(_, _, b)| b.is_some()),
            Upstream::Host(..) => false,
        })
        .map(|(k, _)| k.clone())
        .collect();
    for k in orphans {
        let r = all.get_mut(&k).expect("listed above");
        r.1 = host_of(&r.0.busid);
    }
    // Host bridges by (domain, bus), each with the bridges and devices right below it.
    let mut hosts: BTreeMap<(u32, u8), Vec<String>> = BTreeMap::new();
    for (k, (_, up, _)) in &all {
        if let Upstream::Host(domain, bus) = up {
            hosts.entry((*domain, *bus)).or_default().push(k.clone());
        }
    }
    let mut bridges: Vec<PciBridge> = Vec::new();
    let mut bridge_of: BTreeMap<String, usize> = BTreeMap::new();
    for ((domain, bus), children) in &hosts {
        let host = bridges.len();
        bridges.push(PciBridge {
            busid: None,
            vendor: 0,
            device: 0,
            domain: *domain,
            secondary_bus: *bus,
            subordinate_bus: *bus,
            parent: None,
            // hwloc places a host bridge by its first device's locality.
            local_cpus: all[&children[0]].0.local_cpus.clone(),
            attached_to: 0,
            link_mbs: None,
        });
        let mut sub = *bus;
        for c in children {
            bridge_of.insert(c.clone(), host);
            if let (_, _, Some((_, s))) = &all[c] {
                sub = sub.max(*s);
                add_bridge(&all, c, host, &mut bridges, &mut bridge_of);
            }
        }
        bridges[host].subordinate_bus = sub;
    }
    for (k, (mut d, _, buses)) in all {
        if buses.is_some() {
            continue;
        }
        d.bridge = bridge_of.get(&k).copied();
        if important_class(d.class) {
            m.io.push(d);
        } else {
            m.pci_other.push(d);
        }
    }
    m.pci_bridges = bridges;
}

/// Adds the PCI bridge `id` (behind bridge `parent`) and, depth first in bus-id order, the
/// bridges below it; records which bridge each function sits behind.
fn add_bridge(
    all: &BTreeMap<String, Read>,
    id: &str,
    parent: usize,
    bridges: &mut Vec<PciBridge>,
    bridge_of: &mut BTreeMap<String, usize>,
) {
    let (d, _, buses) = &all[id];
    let (secondary, subordinate) = buses.unwrap_or((0, 0));
    let me = bridges.len();
    bridges.push(PciBridge {
        busid: Some(d.busid.clone()),
        vendor: d.vendor,
        device: d.device,
        domain: domain_of(&d.busid),
        secondary_bus: secondary,
        subordinate_bus: subordinate,
        parent: Some(parent),
        local_cpus: d.local_cpus.clone(),
        attached_to: 0,
        link_mbs: d.link_mbs,
    });
    for (k, (_, up, b)) in all {
        if matches!(up, Upstream::Bridge(p) if p == id) {
            bridge_of.insert(k.clone(), me);
            if b.is_some() {
                add_bridge(all, k, me, bridges, bridge_of);
            }
        }
    }
}

/// What a function sits behind in sysfs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Upstream {
    /// A host bridge: domain and root bus.
    Host(u32, u8),
    /// Another PCI function (a bridge), by bus id.
    Bridge(String),
}

fn domain_of(busid: &str) -> u32 {
    busid
        .split(':')
        .next()
        .and_then(|d| u32::from_str_radix(d, 16).ok())
        .unwrap_or(0)
}

/// The host bridge of a function's own domain and bus, when sysfs tells no better.
fn host_of(busid: &str) -> Upstream {
    let bus = busid
        .split(':')
        .nth(1)
        .and_then(|b| u8::from_str_radix(b, 16).ok())
        .unwrap_or(0);
    Upstream::Host(domain_of(busid), bus)
}

/// The parent directory of the function's sysfs directory: another function or
/// `pciDDDD:BB`.
fn upstream(link: &Path, busid: &str) -> Upstream {
    let parent = std::fs::canonicalize(link)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let Some(p) = parent else {
        return host_of(busid);
    };
    if let Some((d, b)) = p.strip_prefix("pci").and_then(|r| r.split_once(':')) {
        if let (Ok(d), Ok(b)) = (u32::from_str_radix(d, 16), u8::from_str_radix(b, 16)) {
            return Upstream::Host(d, b);
        }
    }
    match parse_busid(&p) {
        Some(id) if p.contains('.') => Upstream::Bridge(id),
        _ => host_of(busid),
    }
}

/// A PCI-to-PCI bridge's secondary and subordinate bus: what the kernel says
/// (`secondary_bus_number`, `subordinate_bus_number`), else its configuration space (bytes
/// 0x19 and 0x1a of a type-1 header, what older dumps have), else its `pci_bus/DDDD:SS`
/// entry.
fn bridge_buses(dir: &Path, d: &PciDevice, live: bool) -> Option<(u8, u8)> {
    if d.class != 0x0604 {
        return None;
    }
    let number = |f: &str| text(&dir.join(f)).and_then(|t| t.parse::<u8>().ok());
    if let (Some(a), Some(b)) = (
        number("secondary_bus_number"),
        number("subordinate_bus_number"),
    ) {
        return Some((a, b));
    }
    let config = config(dir, live);
    if config.len() > 0x1a {
        if config[0x0e] & 0x7f != 1 {
            return None;
        }
        return Some((config[0x19], config[0x1a]));
    }
    let bus = std::fs::read_dir(dir.join("pci_bus"))
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            u8::from_str_radix(n.rsplit(':').next()?, 16).ok()
        })
        .min()
        .unwrap_or(0);
    Some((bus, bus))
}

/// The configuration space of a dump's device (its first 256 bytes: the header and the
/// standard capabilities); nothing on the live system (see `read_into`), nor for a device
/// that sleeps.
fn config(dir: &Path, live: bool) -> Vec<u8> {
    use std::io::Read;
    if live
        || text(&dir.join("power/runtime_status"))
            .is_some_and(|s| s == "suspended" || s == "suspending")
    {
        return Vec::new();
    }
    let mut head = Vec::new();
    if let Ok(f) = std::fs::File::open(dir.join("config")) {
        let _ = f.take(256).read_to_end(&mut head);
    }
    head
}

/// The link speed in MB/s, as hwloc computes it: GT/s per lane after encoding (8b/10b up
/// to 5 GT/s, 128b/130b above) times the width, from `current_link_speed` and
/// `current_link_width` (`8.0 GT/s PCIe`, `16`), else from the configuration space.
fn link_speed(dir: &Path, live: bool) -> Option<u32> {
    let speed = text(&dir.join("current_link_speed"))
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok());
    let width = text(&dir.join("current_link_width")).and_then(|t| t.parse::<u32>().ok());
    match (speed, width) {
        (Some(gts), Some(w)) => mbs(gts, w),
        _ => link_mbs(&config(dir, live)),
    }
}

fn mbs(gts: f64, width: u32) -> Option<u32> {
    let encoding = if gts <= 5.0 { 0.8 } else { 128.0 / 130.0 };
    let gbs = gts * encoding * f64::from(width) / 8.0;
    (gbs > 0.0 && gbs < 1e6).then(|| (gbs * 1000.0).round() as u32)
}

/// The link speed from the PCI Express capability's link status register.
fn link_mbs(config: &[u8]) -> Option<u32> {
    if config.len() < 0x40 || config[0x06] & 0x10 == 0 {
        return None;
    }
    let mut ptr = usize::from(config[0x34]);
    for _ in 0..48 {
        ptr &= !3;
        if ptr == 0 || ptr + 0x14 > config.len() {
            return None;
        }
        match config[ptr] {
            0xff => return None,
            0x10 => {
                let sta = u16::from_le_bytes([config[ptr + 0x12], config[ptr + 0x13]]);
                let speed = u32::from(sta & 0xf);
                let width = u32::from((sta & 0x3f0) >> 4);
                let gts = if speed <= 2 {
                    2.5 * f64::from(speed)
                } else {
                    8.0 * f64::from(1u32 << (speed - 3).min(8))
                };
                return mbs(gts, width);
            }
            _ => ptr = usize::from(config[ptr + 1]),
        }
    }
    None
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

fn device(dir: &Path, name: &str, live: bool) -> Option<PciDevice> {
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
        bridge: None,
        link_mbs: link_speed(dir, live),
    })
}

/// (bus id of the PCI device it belongs to, the OS device) for every OS device under PCI,
/// in the order hwloc's Linux backend finds them (class by class, then by name), which is
/// the order lstopo lists and numbers them in.
fn os_devices(root: &Path) -> Vec<(String, OsDevice)> {
    let mut out = Vec::new();
    for (class, kind) in [
        ("block", OsDeviceKind::Storage),
        ("net", OsDeviceKind::Network),
        ("infiniband", OsDeviceKind::OpenFabrics),
        ("drm", OsDeviceKind::Gpu),
        ("dma", OsDeviceKind::Dma),
    ] {
        let dir = root.join("sys/class").join(class);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// hwloc's numbers: PCIe 1 x1 is 0.25 GB/s, PCIe 2 x8 4 GB/s, PCIe 3 x16 15.75 GB/s.
    #[test]
    fn link_speeds_as_hwloc_computes_them() {
        assert_eq!(mbs(2.5, 1), Some(250));
        assert_eq!(mbs(5.0, 8), Some(4000));
        assert_eq!(mbs(8.0, 16), Some(15754));
        assert_eq!(mbs(8.0, 0), None);
        // The same from a configuration space: status register 0x0103 (x16, 8 GT/s) in a
        // PCI Express capability at 0x40.
        let mut config = vec![0u8; 0x100];
        config[0x06] = 0x10;
        config[0x34] = 0x40;
        config[0x40] = 0x10;
        config[0x52] = 0x03;
        config[0x53] = 0x01;
        assert_eq!(link_mbs(&config), Some(15754));
        config[0x06] = 0;
        assert_eq!(link_mbs(&config), None);
        assert_eq!(link_mbs(&[]), None);
    }
}
