//! I/O devices in the machine model, as hwloc's I/O objects: PCI devices with their locality
//! and what the OS made of them (GPUs, network and InfiniBand adapters, disks, DMA engines,
//! accelerators). The list is flat; each device names the CPU-side object it hangs from:
//! the object nearest the root whose CPUs are exactly the device's local CPUs (else the
//! smallest one that holds them), which is where lstopo draws its host bridge. What a
//! machine answers about its devices (`Machine::gpus`, `io_device`, `attach_io`) is in
//! `machine.rs`.
//!
//! The PCI tree itself, what `lstopo --whole-io` shows, is kept beside the list: host
//! bridges and PCI-to-PCI bridges (`Machine::pci_bridges`, parents before children, in
//! lstopo's order), the devices lstopo leaves out by default (`Machine::pci_other`), and
//! for every device the bridge it sits behind (`PciDevice::bridge`).

use crate::cpuset::CpuSet;
use serde::{Deserialize, Serialize};

/// One PCI device (bridges are [`PciBridge`]s).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// `domain:bus:device.function`, e.g. `0000:3b:00.0` (domains of 16 or 32 bits).
    pub busid: String,
    pub vendor: u16,
    pub device: u16,
    /// Base class and subclass, e.g. `0x0302` (3D controller), `0x0200` (Ethernet).
    pub class: u16,
    /// The CPUs local to the device (the machine's CPUs when Linux does not say).
    pub local_cpus: CpuSet,
    /// The NUMA node Linux attaches it to, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// What the OS made of it: `eth0`, `mlx5_0`, `card0`, `sda`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os_devices: Vec<OsDevice>,
    /// The CPU-side object it hangs from, an index into `Machine::objects` (an `ObjId`,
    /// set by `Machine::attach_io`).
    #[serde(default)]
    pub attached_to: usize,
    /// The bridge it sits behind, an index into `Machine::pci_bridges`, where the source
    /// tells the PCI tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<usize>,
    /// Link speed in MB/s (10^6 bytes per second, all lanes, after encoding), as hwloc
    /// computes it, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_mbs: Option<u32>,
}

/// A host bridge (the root of a PCI domain's buses, no PCI function of its own) or a
/// PCI-to-PCI bridge (class `0x0604`), as lstopo shows them under `--whole-io`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciBridge {
    /// The bridge's own bus id; `None` for a host bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busid: Option<String>,
    #[serde(default)]
    pub vendor: u16,
    #[serde(default)]
    pub device: u16,
    /// The PCI domain of the buses below it.
    pub domain: u32,
    /// The first and last bus number below it.
    pub secondary_bus: u8,
    pub subordinate_bus: u8,
    /// The bridge above it (an index into `Machine::pci_bridges`); `None` for a host bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<usize>,
    /// CPUs local to it (a host bridge's are its first device's, as hwloc takes them).
    pub local_cpus: CpuSet,
    /// The CPU-side object its host bridge hangs from (set by `Machine::attach_io`).
    #[serde(default)]
    pub attached_to: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_mbs: Option<u32>,
}

impl PciBridge {
    pub fn is_host(&self) -> bool {
        self.busid.is_none()
    }

    /// `0000:[04-04]`, the buses below it as lstopo writes them.
    pub fn buses(&self) -> String {
        format!(
            "{:04x}:[{:02x}-{:02x}]",
            self.domain, self.secondary_bus, self.subordinate_bus
        )
    }

    /// `HostBridge` or `PCIBridge`.
    pub fn type_name(&self) -> &'static str {
        if self.is_host() {
            "HostBridge"
        } else {
            "PCIBridge"
        }
    }

    /// lstopo's line (`--whole-io`): `HostBridge (buses=0000:[00-0f])`,
    /// `PCIBridge 0000:00:01.0 (buses=0000:[04-04])`.
    pub fn label(&self) -> String {
        match &self.busid {
            Some(id) => format!("{} {id} (buses={})", self.type_name(), self.buses()),
            None => format!("{} (buses={})", self.type_name(), self.buses()),
        }
    }

    /// lstopo -v's line, `L#` being `index` (its position in `Machine::pci_bridges`):
    /// `PCIBridge L#1 (busid=0000:00:03.0 id=8086:340a class=0604(PCIBridge) buses=0000:[01-01])`.
    pub fn verbose_label(&self, index: usize) -> String {
        let mut attrs = Vec::new();
        if let Some(b) = &self.busid {
            attrs.push(format!("busid={b}"));
            attrs.push(format!("id={:04x}:{:04x}", self.vendor, self.device));
            attrs.push("class=0604(PCIBridge)".to_string());
        }
        if let Some(l) = self.link_mbs {
            attrs.push(link_text(l));
        }
        attrs.push(format!("buses={}", self.buses()));
        format!("{} L#{index} ({})", self.type_name(), attrs.join(" "))
    }
}

/// `link=0.25GB/s`, hwloc's way.
fn link_text(mbs: u32) -> String {
    format!("link={:.2}GB/s", f64::from(mbs) / 1000.0)
}

/// What lstopo shows without `--whole-io` (hwloc's "important" PCI classes): storage,
/// network, display, unclassified, co-processors, accelerators, fibre channel, InfiniBand.
pub fn important_class(class: u16) -> bool {
    matches!(class >> 8, 0x00 | 0x01 | 0x02 | 0x03 | 0x0b | 0x12)
        || matches!(class, 0x0c04 | 0x0c06)
}

/// A device as the OS names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsDevice {
    pub name: String,
    pub kind: OsDeviceKind,
}

/// hwloc's kinds of OS device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OsDeviceKind {
    /// A display or compute GPU (`card0`, `renderD128`, `cuda0`, `nvml0`).
    Gpu,
    /// A network interface (`eth0`, `ib0`).
    Network,
    /// An InfiniBand / OpenFabrics adapter (`mlx5_0`, `hfi1_0`).
    OpenFabrics,
    /// A block device (`sda`, `nvme0n1`).
    Storage,
    /// A DMA engine channel (`dma0chan0`).
    Dma,
    /// A co-processor or accelerator (`ve0`, `opencl0d0`).
    CoProcessor,
}

impl OsDeviceKind {
    /// The name lstopo 2.9 gives the kind in its default console output: `Block "sda"`,
    /// `Net "eth0"`, `OpenFabrics "mlx5_0"`, `GPU "card0"`, `CoProc "opencl0d0"`,
    /// `DMA "dma0chan0"`.
    pub fn name(self) -> &'static str {
        match self {
            OsDeviceKind::Gpu => "GPU",
            OsDeviceKind::Network => "Net",
            OsDeviceKind::OpenFabrics => "OpenFabrics",
            OsDeviceKind::Storage => "Block",
            OsDeviceKind::Dma => "DMA",
            OsDeviceKind::CoProcessor => "CoProc",
        }
    }

    /// The name lstopo 2.9 gives the kind under `-v` (`Network L#1 "eth0"`,
    /// `Co-Processor L#2 "opencl0d0"`; the others as [`OsDeviceKind::name`]).
    pub fn verbose_name(self) -> &'static str {
        match self {
            OsDeviceKind::Network => "Network",
            OsDeviceKind::CoProcessor => "Co-Processor",
            k => k.name(),
        }
    }
}

impl OsDevice {
    /// Whether lstopo 2.x shows it without `--whole-io`: hwloc's Linux backend looks for
    /// DMA engines and DRM devices (`card0`, `renderD128`) only when asked for every I/O
    /// object.
    pub fn important(&self) -> bool {
        match self.kind {
            OsDeviceKind::Dma => false,
            OsDeviceKind::Gpu => !["card", "renderD", "controlD"]
                .iter()
                .any(|p| self.name.starts_with(p)),
            _ => true,
        }
    }

    /// lstopo's line: `Block "sda"`.
    pub fn label(&self) -> String {
        format!("{} \"{}\"", self.kind.name(), self.name)
    }

    /// lstopo -v's line, `L#` being `index` (its place among the OS devices shown, in
    /// the tree's order): `Network L#1 "eth0"`.
    pub fn verbose_label(&self, index: usize) -> String {
        format!("{} L#{index} \"{}\"", self.kind.verbose_name(), self.name)
    }
}

impl PciDevice {
    /// What the class code says, as lstopo prints it (`RAID`, `Ethernet`, `3D`, ...).
    pub fn class_name(&self) -> &'static str {
        match self.class {
            0x0100 => "SCSI",
            0x0101 => "IDE",
            0x0104 => "RAID",
            0x0106 => "SATA",
            0x0107 => "SAS",
            0x0108 => "NVMExp",
            0x0200 => "Ethernet",
            0x0207 => "InfiniBand",
            0x0280 => "Network",
            0x0300 => "VGA",
            0x0302 => "3D",
            0x0380 => "Display",
            0x0600 => "HostBridge",
            0x0604 => "PCIBridge",
            0x0880 => "SystemPeripheral",
            0x0b40 => "CoProcessor",
            0x0c03 => "USB",
            0x0c04 => "FibreChannel",
            0x0c06 => "InfiniBand",
            0x1200 => "ProcessingAccelerator",
            c if c >> 8 == 0x01 => "Storage",
            c if c >> 8 == 0x02 => "Network",
            c if c >> 8 == 0x03 => "Display",
            c if c >> 8 == 0x12 => "ProcessingAccelerator",
            _ => "Other",
        }
    }

    /// A GPU that computes, what `G0`, `G1`, ... number: a 3D controller (`0x0302`, data
    /// centre GPUs), another display controller (`0x0380`, AMD Instinct), a processing
    /// accelerator (`0x12xx`), an NVIDIA VGA controller, or a device with a compute OS device
    /// (`cuda*`, `nvml*`, `opencl*`, `rsmi*`). Other VGA controllers are left out: they are
    /// mostly a server's management console (ASPEED, Matrox, ATI ES1000), which no job runs on.
    pub fn is_gpu(&self) -> bool {
        matches!(self.class, 0x0302 | 0x0380)
            || self.class >> 8 == 0x12
            || (self.class == 0x0300 && self.vendor == 0x10de)
            || self.os_devices.iter().any(|o| {
                ["cuda", "nvml", "opencl", "rsmi"]
                    .iter()
                    .any(|p| o.name.starts_with(p))
            })
    }

    /// The device's line: `PCI 0000:01:00.0 (RAID 1000:0079)`.
    pub fn label(&self) -> String {
        format!(
            "PCI {} ({} {:04x}:{:04x})",
            self.busid,
            self.class_name(),
            self.vendor,
            self.device
        )
    }

    /// lstopo -v's line, `L#` being `index`:
    /// `PCI L#0 (busid=0000:01:00.0 id=1000:0079 class=0104(RAID) link=0.50GB/s)`.
    pub fn verbose_label(&self, index: usize) -> String {
        let mut s = format!(
            "PCI L#{index} (busid={} id={:04x}:{:04x} class={:04x}({})",
            self.busid,
            self.vendor,
            self.device,
            self.class,
            self.class_name()
        );
        if let Some(l) = self.link_mbs {
            s.push(' ');
            s.push_str(&link_text(l));
        }
        s.push(')');
        s
    }

    /// The device with its OS devices: `PCI 0000:01:00.0 (RAID 1000:0079) Block "sda"`.
    pub fn label_with_os_devices(&self) -> String {
        let mut s = self.label();
        for o in &self.os_devices {
            s.push(' ');
            s.push_str(&o.label());
        }
        s
    }
}

/// Reads a PCI bus id `[domain:]bus:device.function` (hex; a missing domain is 0000) into
/// its canonical form `dddd:bb:dd.f`; None when it does not parse.
pub fn parse_busid(text: &str) -> Option<String> {
    let parts: Vec<&str> = text.trim().split(':').collect();
    let (domain, bus, rest) = match parts.as_slice() {
        [d, b, r] => (*d, *b, *r),
        [b, r] => ("0", *b, *r),
        _ => return None,
    };
    let (dev, func) = rest.split_once('.')?;
    let hex = |s: &str, max: u64| {
        (!s.is_empty() && s.len() <= 8)
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
            .filter(|v| *v <= max)
    };
    let domain = hex(domain, 0xffff_ffff)?;
    let bus = hex(bus, 0xff)?;
    let dev = hex(dev, 0x1f)?;
    let func = hex(func, 0x7)?;
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// A bus id as numbers (domain, bus, device, function), the order hwloc sorts PCI objects
/// in: domains compare as numbers, so `ffff:00:00.0` comes before `10000:00:00.0` (a VMD
/// domain). A bus id that does not parse sorts last.
pub fn busid_key(busid: &str) -> (u32, u8, u8, u8) {
    let parsed = parse_busid(busid).and_then(|b| {
        let (domain, rest) = b.split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (dev, func) = rest.split_once('.')?;
        Some((
            u32::from_str_radix(domain, 16).ok()?,
            u8::from_str_radix(bus, 16).ok()?,
            u8::from_str_radix(dev, 16).ok()?,
            u8::from_str_radix(func, 16).ok()?,
        ))
    });
    parsed.unwrap_or((u32::MAX, u8::MAX, u8::MAX, u8::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_parse_with_and_without_domain() {
        assert_eq!(parse_busid("0000:3b:00.0").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(parse_busid("3B:00.1").as_deref(), Some("0000:3b:00.1"));
        assert_eq!(
            parse_busid("10000:01:00.0").as_deref(),
            Some("10000:01:00.0")
        );
        assert_eq!(
            parse_busid("ffffffff:ff:1f.7").as_deref(),
            Some("ffffffff:ff:1f.7")
        );
        assert_eq!(parse_busid("100000000:00:00.0"), None);
        // Domains compare as numbers, as hwloc sorts them.
        let mut v = vec![
            "10000:00:00.0",
            "ffff:00:00.0",
            "0000:3b:00.0",
            "c1d5:00:00.0",
        ];
        v.sort_by_key(|b| busid_key(b));
        assert_eq!(
            v,
            [
                "0000:3b:00.0",
                "c1d5:00:00.0",
                "ffff:00:00.0",
                "10000:00:00.0"
            ]
        );
        for bad in [
            "",
            "3b",
            "3b:00",
            "zz:00.0",
            "0000:100:00.0",
            "00:20.0",
            "00:00.8",
        ] {
            assert_eq!(parse_busid(bad), None, "{bad}");
        }
    }
}
