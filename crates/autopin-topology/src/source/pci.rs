//! PCI devices from Linux sysfs, relative to the same root as the CPU reader (a dump reads
//! like the live machine): `sys/bus/pci/devices/*` gives each device's ids, class and local
//! CPUs; the OS devices are the entries of `sys/class/{drm,net,infiniband,block,dma}` whose
//! device path runs through a PCI device. Devices are kept as lstopo keeps them by default
//! (its "important" I/O): storage, network, display, co-processors, accelerators, fibre
//! channel and InfiniBand; the rest, and the host and PCI bridges, make up the tree
//! `--whole-io` shows. Nothing here is required: an unreadable file drops that one fact,
//! and a machine without PCI in sysfs has no devices.
//!
//! Where a PCI tree hangs is read as hwloc reads it, in its order (docs/topology.md, *PCI
//! locality*): a locality forced by `HWLOC_PCI_LOCALITY` (or the deprecated
//! `HWLOC_PCI_<domain>_<bus>_LOCALCPUS`), else hwloc's quirks (`HWLOC_PCI_LOCALITY_QUIRK_FAKE`,
//! the HPE Cray EX235A board), else the `local_cpus` mask of the first function below the
//! host bridge, else the whole machine. `local_cpulist` is never read: where an old kernel
//! or a hand-made dump has the list disagree with the mask, the mask wins, as in hwloc.

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
/// (`Machine::attach_io_from`); returned is what decided each host bridge's CPUs (a file,
/// a variable), by its index in `m.pci_bridges`, and the sysfs directory of each device,
/// for warnings to name.
pub fn read_into(root: &Path, m: &mut Machine) -> Origins {
    let mut origins = Origins::default();
    let dir = root.join("sys/bus/pci/devices");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return origins;
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
        let Some(d) = device(&path, &name, live, &mut m.warnings) else {
            continue;
        };
        origins
            .devices
            .insert(d.busid.clone(), path.display().to_string());
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
    let how = Locality::read(root);
    for ((domain, bus), children) in &mut hosts {
        children.sort_by_key(|k| crate::io::busid_key(k));
        let host = bridges.len();
        // hwloc places a host bridge by its first function's locality.
        let first = &all[&children[0]].0;
        bridges.push(PciBridge {
            busid: None,
            vendor: 0,
            device: 0,
            domain: *domain,
            secondary_bus: *bus,
            subordinate_bus: *bus,
            parent: None,
            local_cpus: {
                let (cpus, from) = how.of(*domain, *bus, &first.local_cpus, m);
                origins.hosts.insert(
                    host,
                    from.unwrap_or_else(|| format!("{}/local_cpus", origins.devices[&first.busid])),
                );
                cpus
            },
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
    origins
}

/// What decided where each host bridge hangs and where each device was read, for warnings.
#[derive(Debug, Default)]
pub struct Origins {
    /// Host bridge index → the file or variable its CPUs came from.
    pub hosts: BTreeMap<usize, String>,
    /// Bus id → the device's sysfs directory.
    pub devices: BTreeMap<String, String>,
}

impl Origins {
    /// For [`Machine::attach_io_from`].
    pub fn name(&self, o: crate::machine::IoOrigin) -> Option<String> {
        match o {
            crate::machine::IoOrigin::Host(i) => self.hosts.get(&i).cloned(),
            crate::machine::IoOrigin::Device(b) => self.devices.get(b).cloned(),
        }
    }
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

/// A small sysfs file's text, trimmed; at most 64 KiB are read (a CPU mask of 500,000
/// CPUs), so a hostile dump cannot make autopin read without end.
fn text(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(p)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut buf)
        .ok()?;
    Some(String::from_utf8_lossy(&buf).trim().to_string())
}

/// What decides where a PCI tree hangs, besides its first function's `local_cpus`, in
/// hwloc's order (`hwloc__pci_find_busid_parent`).
struct Locality {
    /// `HWLOC_PCI_LOCALITY`, parsed, when set: (domain, first bus, last bus, CPUs).
    forced: Option<Vec<(u32, u8, u8, CpuSet)>>,
    /// `HWLOC_PCI_LOCALITY_QUIRK_FAKE` is set to a non-zero number.
    fake: bool,
    /// The DMI board name is `HPE CRAY EX235A`.
    cray_ex235a: bool,
}

impl Locality {
    fn read(root: &Path) -> Self {
        let forced = std::env::var("HWLOC_PCI_LOCALITY").ok().map(|v| {
            // A file's name, or the localities themselves.
            let text = std::fs::metadata(&v)
                .ok()
                .filter(|md| md.is_file() && md.len() <= 64 * 1024)
                .and_then(|_| std::fs::read_to_string(&v).ok())
                .unwrap_or(v);
            text.split([';', '\r', '\n'])
                .filter_map(forced_one)
                .collect()
        });
        let fake = std::env::var("HWLOC_PCI_LOCALITY_QUIRK_FAKE")
            .ok()
            .is_some_and(|v| leading_int(&v) != 0);
        let cray_ex235a =
            text(&root.join("sys/class/dmi/id/board_name")).is_some_and(|b| b == "HPE CRAY EX235A");
        Locality {
            forced,
            fake,
            cray_ex235a,
        }
    }

    /// The CPUs the host bridge of `domain:bus` is local to, `mask` being its first
    /// function's `local_cpus` (empty when unreadable or naming no CPU), and what said so
    /// when it was not that mask. Empty means the whole machine.
    fn of(&self, domain: u32, bus: u8, mask: &CpuSet, m: &Machine) -> (CpuSet, Option<String>) {
        let mut quirks = true;
        if let Some(forced) = &self.forced {
            // A forced locality, even empty, keeps the quirks off.
            quirks = false;
            if let Some((.., cpus)) = forced
                .iter()
                .find(|(d, first, last, _)| *d == domain && (*first..=*last).contains(&bus))
            {
                return (cpus.clone(), Some("HWLOC_PCI_LOCALITY".into()));
            }
        }
        let var = format!("HWLOC_PCI_{domain:04x}_{bus:02x}_LOCALCPUS");
        if let Ok(v) = std::env::var(&var) {
            quirks = false;
            if !v.is_empty() {
                return (hwloc_bitmap(&v, m), Some(var));
            }
        }
        if quirks {
            if self.fake {
                // hwloc's test quirk: everything on the last CPU.
                let last = m.root().cpuset.last().map(|c| CpuSet::from_cpus([c]));
                return (
                    last.unwrap_or_default(),
                    Some("HWLOC_PCI_LOCALITY_QUIRK_FAKE".into()),
                );
            }
            if self.cray_ex235a && domain == 0 {
                if let Some(cpus) = cray_ex235a(bus) {
                    return (cpus, Some("hwloc's HPE Cray EX235A quirk".into()));
                }
            }
        }
        (mask.clone(), None)
    }
}

/// One `HWLOC_PCI_LOCALITY` entry: `domain:bus-bus cpuset`, `domain:bus cpuset` or
/// `domain cpuset` (hex), as hwloc reads it; anything else is skipped, as hwloc skips it.
fn forced_one(entry: &str) -> Option<(u32, u8, u8, CpuSet)> {
    let (place, cpus) = entry.trim_start().split_once(' ')?;
    let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let (domain, first, last) = match place.split_once(':') {
        None => (hex(place)?, 0, 255),
        Some((d, buses)) => {
            let (a, b) = buses.split_once('-').unwrap_or((buses, buses));
            (hex(d)?, hex(a)?, hex(b)?)
        }
    };
    let byte = |v: u32| u8::try_from(v.min(255)).ok();
    let cpus = CpuSet::parse_mask(cpus.trim()).unwrap_or_default();
    Some((domain, byte(first)?, byte(last)?, cpus))
}

/// hwloc's textual bitmap (`0x00000003,0x00000000`; `0xf...f` is every CPU).
fn hwloc_bitmap(text: &str, m: &Machine) -> CpuSet {
    let t = text.trim();
    if t.starts_with("0xf...f") {
        return m.root().cpuset.clone();
    }
    CpuSet::parse_mask(t).unwrap_or_default()
}

/// C's `atoi`: the leading decimal number, 0 when there is none.
fn leading_int(s: &str) -> i64 {
    let t = s.trim_start();
    let (sign, digits) = match t.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, t.strip_prefix('+').unwrap_or(t)),
    };
    let n: String = digits
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .take(18)
        .collect();
    sign * n.parse::<i64>().unwrap_or(0)
}

/// hwloc's locality quirk for the HPE Cray EX235A (AMD Trento): its xGMI ports hang from
/// single CCDs (8 cores and their SMT siblings), which its ACPI tables do not say. Buses of
/// domain 0 → CPUs, as hwloc hard-wires them.
fn cray_ex235a(bus: u8) -> Option<CpuSet> {
    let first = match bus {
        0xd0..=0xd1 => 0,
        0xd4..=0xd6 => 8,
        0xc8..=0xc9 => 16,
        0xcc..=0xce => 24,
        0xd8..=0xd9 => 32,
        0xdc..=0xde => 40,
        0xc0..=0xc1 => 48,
        0xc4..=0xc6 => 56,
        _ => return None,
    };
    Some(CpuSet::from_cpus(
        (first..first + 8).chain(first + 64..first + 72),
    ))
}

fn hex(p: &Path) -> Option<u32> {
    let t = text(p)?;
    u32::from_str_radix(t.trim_start_matches("0x"), 16).ok()
}

fn device(dir: &Path, name: &str, live: bool, warnings: &mut Vec<String>) -> Option<PciDevice> {
    let Some(busid) = parse_busid(name) else {
        if name.matches(':').count() == 2 && name.contains('.') {
            warnings.push(format!(
                "{}: not a PCI bus id (a domain of up to 32 bits, bus, device and function in hex); the device is left out",
                dir.display()
            ));
        }
        return None;
    };
    let class = hex(&dir.join("class"))? >> 8;
    // The mask, as hwloc reads it; a mask naming no CPU, or none it can read, leaves the
    // device local to the whole machine (set by `Machine::attach_io`).
    let local_cpus = match text(&dir.join("local_cpus")) {
        None => CpuSet::new(),
        Some(t) => CpuSet::parse_mask(&t).unwrap_or_else(|e| {
            warnings.push(format!(
                "{}: not a CPU mask ({}); the device is taken as local to the whole machine, as hwloc takes it",
                dir.join("local_cpus").display(),
                e.message
            ));
            CpuSet::new()
        }),
    };
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
