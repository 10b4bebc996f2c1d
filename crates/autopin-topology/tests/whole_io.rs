//! The whole PCI tree (`--whole-io`): host bridges, PCI bridges and every PCI device, checked
//! against `lstopo-no-graphics --whole-io -v` on the real dump and the real XML in tests/data
//! that have PCI bridges. Both trees are written as `lstopo -v` writes its I/O lines and
//! read back the same way: each bridge and device must be there in both, with the same
//! logical index, bus id, ids, class and buses, behind the same bridge, under the same
//! CPU-side object.

mod support;

use autopin_topology::source::{hwloc_xml, sysfs};
use autopin_topology::view::tree::{render_with, TreeOptions};
use autopin_topology::Machine;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use support::sysfs_tree::{mask, SysfsTree};

fn have_lstopo() -> bool {
    Command::new("lstopo-no-graphics")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `lstopo-no-graphics --whole-io -v --input INPUT`; the error when this hwloc cannot
/// read it.
fn lstopo_whole_io(input: &Path) -> Result<String, String> {
    lstopo_verbose(input, true)
}

/// `lstopo-no-graphics -v --input INPUT`, with `--whole-io` or without.
fn lstopo_verbose(input: &Path, whole_io: bool) -> Result<String, String> {
    let mut c = Command::new("lstopo-no-graphics");
    if whole_io {
        c.arg("--whole-io");
    }
    let out = c
        .args(["-v", "--input"])
        .arg(input)
        // The x86 backend would add this host's CPUID caches to another machine's dump.
        .env("HWLOC_COMPONENTS", "-x86")
        .output()
        .expect("run lstopo-no-graphics");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn ours(m: &Machine) -> String {
    render_with(
        m,
        TreeOptions {
            whole_io: true,
            verbose: true,
        },
    )
}

/// Our tree as `lstopo -v` without `--whole-io` writes it.
fn ours_default(m: &Machine) -> String {
    render_with(
        m,
        TreeOptions {
            whole_io: false,
            verbose: true,
        },
    )
}

/// The OS devices' lines of a console (`OSDev "eth0"` -> `Network L#1` under `PCI 0000:04:00.0`).
fn os_lines(console: &str) -> BTreeMap<String, IoLine> {
    io_lines(console)
        .into_iter()
        .filter(|(k, _)| k.starts_with("OSDev "))
        .collect()
}

/// One I/O line: what it is (`PCIBridge L#1 busid=… id=… class=… buses=…`), the I/O object
/// it is nested in, the CPU-side object above it.
#[derive(Debug, PartialEq, Eq)]
struct IoLine {
    what: String,
    behind: String,
    under: String,
}

/// The I/O lines of a console (`lstopo -v` or ours), keyed by type and bus id (host
/// bridges by their buses).
fn io_lines(console: &str) -> BTreeMap<String, IoLine> {
    let mut out = BTreeMap::new();
    // (indent, key of an I/O line or the CPU-side label)
    let mut stack: Vec<(usize, Option<String>, String)> = Vec::new();
    for line in console.lines() {
        if line.trim().is_empty() || !line.starts_with([' ', 'M']) {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        while stack.last().is_some_and(|(i, _, _)| *i >= indent) {
            stack.pop();
        }
        for (n, part) in line.trim_start().split(" + ").enumerate() {
            let word = part.split_whitespace().next().unwrap_or("");
            // The attributes between the first `(` and the last `)`, one word each.
            let attrs = match (part.find('('), part.rfind(')')) {
                (Some(a), Some(b)) if a < b => &part[a + 1..b],
                _ => "",
            };
            let attr = |name: &str| {
                attrs
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                    .map(str::to_string)
            };
            let index = part
                .split_whitespace()
                .nth(1)
                .filter(|w| w.starts_with("L#"))
                .unwrap_or("")
                .to_string();
            // An OS device (`Network L#1 (Address=…) "eth0"`): its kind, index and name,
            // under the PCI device it belongs to; it encloses nothing.
            if OS_KINDS.contains(&word) && part.ends_with('"') {
                let name = part[..part.len() - 1]
                    .rsplit_once('"')
                    .map_or("", |(_, n)| n);
                let behind = stack
                    .iter()
                    .rev()
                    .find_map(|(_, k, _)| k.clone())
                    .unwrap_or_default();
                let under = stack
                    .iter()
                    .rev()
                    .find(|(_, k, _)| k.is_none())
                    .map(|(_, _, l)| l.clone())
                    .unwrap_or_default();
                out.insert(
                    format!("OSDev \"{name}\""),
                    IoLine {
                        what: format!("{word} {index}"),
                        behind,
                        under,
                    },
                );
                continue;
            }
            let io = matches!(word, "HostBridge" | "PCIBridge" | "PCI");
            let key = io.then(|| {
                let id = match word {
                    "HostBridge" => attr("buses").unwrap_or_default(),
                    _ => attr("busid").unwrap_or_default(),
                };
                format!("{word} {id}")
            });
            if let Some(k) = &key {
                let what = ["busid", "id", "class", "buses"]
                    .iter()
                    .filter_map(|a| attr(a).map(|v| format!("{a}={v}")))
                    .fold(format!("{word} {index}"), |s, a| s + " " + &a);
                let behind = stack
                    .iter()
                    .rev()
                    .find_map(|(_, k, _)| k.clone())
                    .unwrap_or_default();
                let under = stack
                    .iter()
                    .rev()
                    .find(|(_, k, _)| k.is_none())
                    .map(|(_, _, l)| l.clone())
                    .unwrap_or_default();
                out.insert(
                    k.clone(),
                    IoLine {
                        what,
                        behind,
                        under,
                    },
                );
            }
            // OS devices enclose nothing worth tracking; everything else may.
            let cpu_side = cpu_label(word, &index);
            if key.is_some() || cpu_side.is_some() {
                stack.push((indent + n, key, cpu_side.unwrap_or_default()));
            }
        }
    }
    out
}

/// The kinds of OS device as `lstopo -v` (2.x) names them.
const OS_KINDS: [&str; 6] = [
    "Block",
    "Network",
    "OpenFabrics",
    "GPU",
    "Co-Processor",
    "DMA",
];

/// A CPU-side object as both consoles can name it: `Machine`, `Package L#1`, `L3 L#0`,
/// `Group L#0` (lstopo -v writes `L3Cache`, `Group0`; autopin `L3`, `Group(kind)`).
fn cpu_label(word: &str, index: &str) -> Option<String> {
    let kind: String = word
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    let kind = kind.strip_suffix("Cache").unwrap_or(&kind).to_string();
    let kind = if kind.starts_with("Group") {
        "Group".to_string()
    } else {
        kind
    };
    match kind.as_str() {
        "Machine" => Some("Machine".into()),
        "HostBridge" | "PCIBridge" | "PCI" | "" => None,
        k if index.starts_with("L#") && !k.is_empty() => Some(format!("{k} {index}")),
        _ => None,
    }
}

fn compare(name: &str, theirs: &str, m: &Machine) {
    let theirs = io_lines(theirs);
    let ours_text = ours(m);
    let ours = io_lines(&ours_text);
    assert!(
        theirs.keys().any(|k| k.starts_with("PCIBridge")),
        "{name}: lstopo shows no PCI bridge here"
    );
    assert_eq!(
        theirs.keys().collect::<Vec<_>>(),
        ours.keys().collect::<Vec<_>>(),
        "{name}: other bridges and devices than lstopo --whole-io; ours:\n{ours_text}"
    );
    let os_devices: usize =
        m.io.iter()
            .chain(&m.pci_other)
            .map(|d| d.os_devices.len())
            .sum();
    assert_eq!(
        theirs.len(),
        m.pci_bridges.len() + m.io.len() + m.pci_other.len() + os_devices,
        "{name}: lstopo's I/O lines are not all the model's bridges and devices"
    );
    for (k, t) in &theirs {
        assert!(!t.under.is_empty(), "{name}: {k} under no CPU-side object");
        assert!(
            t.behind.is_empty() == k.starts_with("HostBridge"),
            "{name}: {k} behind {:?}",
            t.behind
        );
        if k.starts_with("OSDev") {
            assert!(t.behind.starts_with("PCI "), "{name}: {k} behind {t:?}");
        }
        assert_eq!(Some(t), ours.get(k), "{name}: {k} differs from lstopo");
    }
}

/// The OS devices of `lstopo -v` without `--whole-io` (`theirs`) against our default
/// verbose tree: the same names, kinds and indexes, under the same PCI devices; and the
/// same PCI devices with the same indexes.
fn compare_default(name: &str, theirs: &str, m: &Machine) {
    let ours_text = ours_default(m);
    assert!(
        !os_lines(theirs).is_empty(),
        "{name}: lstopo shows no OS device"
    );
    assert_eq!(
        os_lines(theirs),
        os_lines(&ours_text),
        "{name}: OS devices differ; ours:\n{ours_text}"
    );
    // The PCI devices too, with lstopo's indexes, under the same CPU-side objects (lstopo
    // nests them in bridges even here, which our default tree leaves out).
    let devices = |text: &str| -> BTreeMap<String, (String, String)> {
        io_lines(text)
            .into_iter()
            .filter(|(k, _)| k.starts_with("PCI "))
            .map(|(k, l)| (k, (l.what, l.under)))
            .collect()
    };
    assert_eq!(
        devices(theirs),
        devices(&ours_text),
        "{name}: PCI devices differ; ours:\n{ours_text}"
    );
}

/// The sysfs dump with a PCI bridge (a RAID controller behind a root port, a host bridge
/// function beside it).
#[test]
fn dump_whole_io_matches_lstopo() {
    autopin_testkit::require!(have_lstopo(), "lstopo-no-graphics is not installed");
    let name = "40intel64-4n10c+pci-conflicts";
    let root = autopin_testkit::hwloc_dump(name);
    let theirs = lstopo_whole_io(&root).unwrap_or_else(|e| panic!("{name}: lstopo: {e}"));
    let m = sysfs::read_with_affinity(&root, None).unwrap();
    compare(name, &theirs, &m);
    let plain_theirs = lstopo_verbose(&root, false).unwrap_or_else(|e| panic!("lstopo: {e}"));
    compare_default(name, &plain_theirs, &m);
    // What lstopo shows without --whole-io is unchanged: only the RAID controller.
    let busids: Vec<&str> = m.io.iter().map(|d| d.busid.as_str()).collect();
    assert_eq!(busids, ["0000:01:00.0"]);
    assert_eq!(m.pci_other.len(), 1, "the host bridge's own function");
    let mut plain = m.clone();
    plain.drop_whole_io();
    let t = render_with(&plain, TreeOptions::default());
    assert!(!t.contains("Bridge") && !t.contains("0000:00:00.0"), "{t}");
    assert!(
        t.contains("\n  PCI 0000:01:00.0 (RAID 1000:0079)\n    Block \"sda\"\n"),
        "{t}"
    );
}

/// hwloc 3's XML as hwloc 2 reads it: version 2.0, and the OS device types of 3.0 (a mask:
/// storage 1, GPU 4, co-processor 8, network 16, OpenFabrics 32, DMA 64) as 2.x numbers them
/// (block 0, GPU 1, network 2, OpenFabrics 3, DMA 4, co-processor 5).
fn as_hwloc2_xml(text: &str) -> String {
    let text = text.replacen(
        "<topology version=\"3.0\">",
        "<topology version=\"2.0\">",
        1,
    );
    let mut out = String::new();
    let mut rest = text.as_str();
    let key = "osdev_type=\"";
    while let Some(at) = rest.find(key) {
        let (head, tail) = rest.split_at(at + key.len());
        let end = tail.find('"').unwrap();
        let v2 = match tail[..end].parse::<u32>().unwrap() {
            t if t & 4 != 0 => 1,
            t if t & 8 != 0 => 5,
            t if t & 32 != 0 => 3,
            t if t & 16 != 0 => 2,
            t if t & 64 != 0 => 4,
            _ => 0,
        };
        out.push_str(head);
        out.push_str(&v2.to_string());
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The hwloc XML with eight bridges over two packages. hwloc 2 refuses the file's version
/// 3.0 header; the objects compared here read the same under either, so lstopo gets a copy
/// in the 2.0 format (header and OS device types).
#[test]
fn xml_whole_io_matches_lstopo() {
    autopin_testkit::require!(have_lstopo(), "lstopo-no-graphics is not installed");
    let path = autopin_testkit::data("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let text = std::fs::read_to_string(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("v2.xml");
    let input = match lstopo_whole_io(&path) {
        Ok(_) => path.clone(),
        Err(e) if e.contains("cannot import XML version") => {
            std::fs::write(&copy, as_hwloc2_xml(&text)).unwrap();
            copy.clone()
        }
        Err(e) => panic!("lstopo: {e}"),
    };
    let theirs = lstopo_whole_io(&input).unwrap_or_else(|e| panic!("lstopo: {e}"));
    let m = hwloc_xml::from_str(&text).unwrap();
    compare("24em64t-2n6c2t-pci.xml", &theirs, &m);
    let plain_theirs = lstopo_verbose(&input, false).unwrap_or_else(|e| panic!("lstopo: {e}"));
    compare_default("24em64t-2n6c2t-pci.xml", &plain_theirs, &m);
    assert_eq!(m.pci_bridges.iter().filter(|b| b.is_host()).count(), 2);
    assert_eq!(m.pci_bridges.len(), 8);
    assert_eq!(m.io.len(), 9);
    let t = ours_default(&m);
    for line in [
        "Network L#3 \"ib0\"",
        "OpenFabrics L#4 \"mlx4_0\"",
        "Block L#5 \"sda\"",
    ] {
        assert!(t.contains(line), "{line}: {t}");
    }
    // A JSON document keeps the tree.
    let doc = serde_json::to_string(&autopin_topology::source::json::to_document(&m)).unwrap();
    assert!(autopin_topology::source::json::from_str(&doc).unwrap() == m);
}

/// The dump through lstopo's own XML export with --whole-io (hwloc 2 format): the import
/// keeps every bridge and device, and the hidden classes stay out of the default list.
#[test]
fn lstopo_whole_io_xml_imports_like_the_dump_reads() {
    autopin_testkit::require!(have_lstopo(), "lstopo-no-graphics is not installed");
    let name = "40intel64-4n10c+pci-conflicts";
    let root = autopin_testkit::hwloc_dump(name);
    let out = Command::new("lstopo-no-graphics")
        .args(["--whole-io", "--of", "xml", "-"])
        .env("HWLOC_FSROOT", &root)
        .env("HWLOC_COMPONENTS", "-x86")
        .output()
        .expect("run lstopo-no-graphics");
    assert!(out.status.success());
    let from_xml = hwloc_xml::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let from_sysfs = sysfs::read_with_affinity(&root, None).unwrap();
    assert_eq!(ours(&from_xml), ours(&from_sysfs));
    assert_eq!(from_xml.io.len(), 1);
    assert_eq!(from_xml.pci_other.len(), 1);
}

/// One PCI function in a hand-built sysfs tree: `path` below `sys/devices` (the host
/// bridge's `pciDDDD:BB` directory, the bridges, the function), its class, local CPUs and,
/// for a bridge, its secondary and subordinate bus in a type-1 configuration header.
fn function(root: &Path, path: &str, class: u32, cpus: &[u32], buses: Option<(u8, u8)>) {
    let busid = path.rsplit('/').next().unwrap();
    let dir = root.join("sys/devices").join(path);
    std::fs::create_dir_all(&dir).unwrap();
    let write = |f: &str, t: String| std::fs::write(dir.join(f), t).unwrap();
    write("class", format!("0x{class:06x}\n"));
    write("vendor", "0x8086\n".into());
    write("device", format!("0x{:04x}\n", class >> 8));
    write("local_cpus", format!("{}\n", mask(cpus)));
    write("numa_node", "-1\n".into());
    let mut config = vec![0u8; 64];
    config[0..2].copy_from_slice(&0x8086u16.to_le_bytes());
    config[2..4].copy_from_slice(&((class >> 8) as u16).to_le_bytes());
    config[0x09..0x0c].copy_from_slice(&class.to_le_bytes()[..3]);
    if let Some((secondary, subordinate)) = buses {
        config[0x0e] = 1;
        config[0x19] = secondary;
        config[0x1a] = subordinate;
    }
    std::fs::write(dir.join("config"), config).unwrap();
    let bus = root.join("sys/bus/pci/devices");
    std::fs::create_dir_all(&bus).unwrap();
    std::os::unix::fs::symlink(format!("../../../devices/{path}"), bus.join(busid)).unwrap();
}

/// Two packages, each with a host bridge: a switch two bridges deep in front of a GPU, a
/// SATA controller and a USB controller (shown only with --whole-io) on the first; a NIC
/// behind a root port on the second.
#[test]
fn nested_bridges_match_lstopo() {
    autopin_testkit::require!(have_lstopo(), "lstopo-no-graphics is not installed");
    let dir = SysfsTree::regular(2, 2, 1, true).tempdir();
    let root = dir.path();
    let (p0, p1) = (&[0, 1][..], &[2, 3][..]);
    function(root, "pci0000:00/0000:00:00.0", 0x060000, p0, None);
    function(root, "pci0000:00/0000:00:01.0", 0x060400, p0, Some((1, 2)));
    function(
        root,
        "pci0000:00/0000:00:01.0/0000:01:00.0",
        0x060400,
        p0,
        Some((2, 2)),
    );
    let gpu = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0";
    function(root, gpu, 0x030200, p0, None);
    function(root, "pci0000:00/0000:00:14.0", 0x0c0330, p0, None);
    function(root, "pci0000:00/0000:00:1f.2", 0x010601, p0, None);
    function(
        root,
        "pci0000:80/0000:80:02.0",
        0x060400,
        p1,
        Some((0x81, 0x81)),
    );
    let nic = "pci0000:80/0000:80:02.0/0000:81:00.0";
    function(root, nic, 0x020000, p1, None);
    std::fs::create_dir_all(root.join("sys/devices").join(nic).join("net/eth0")).unwrap();
    std::fs::create_dir_all(root.join("sys/class/net")).unwrap();
    std::os::unix::fs::symlink(
        format!("../../devices/{nic}/net/eth0"),
        root.join("sys/class/net/eth0"),
    )
    .unwrap();
    os_device(root, gpu, "drm", "card0");
    os_device(root, gpu, "drm", "renderD128");
    os_device(root, gpu, "drm", "card0-DP-1");
    let sata = "pci0000:00/0000:00:1f.2";
    os_device(root, sata, "block", "sda");
    os_device(root, sata, "block", "sda1");
    std::fs::write(
        root.join("sys/devices")
            .join(sata)
            .join("block/sda1/partition"),
        "1\n",
    )
    .unwrap();
    os_device(root, "pci0000:00/0000:00:14.0", "dma", "dma0chan0");
    os_device(root, nic, "infiniband", "mlx5_0");
    let theirs = lstopo_whole_io(root).unwrap_or_else(|e| panic!("lstopo: {e}"));
    let m = sysfs::read_with_affinity(root, None).unwrap();
    compare("nested bridges", &theirs, &m);
    let plain_theirs = lstopo_verbose(root, false).unwrap_or_else(|e| panic!("lstopo: {e}"));
    compare_default("nested bridges", &plain_theirs, &m);
    assert_eq!(m.pci_bridges.len(), 5, "{:?}", m.pci_bridges);
    let busids: Vec<&str> = m.io.iter().map(|d| d.busid.as_str()).collect();
    assert_eq!(busids, ["0000:00:1f.2", "0000:02:00.0", "0000:81:00.0"]);
    assert_eq!(m.gpus().len(), 1);
    assert_eq!(m.io_device("eth0").unwrap().busid, "0000:81:00.0");
    let t = ours(&m);
    assert!(t.contains("Network L#"), "{t}");
    let t = render_with(&m, TreeOptions::default());
    assert!(t.contains("\n      Net \"eth0\"\n"), "{t}");
}

/// An OS device of a sysfs class (`drm`, `net`, `block`, ...) below a PCI function.
/// Its `dev` file is there unless it is a connector (`card0-DP-1`), as in Linux.
fn os_device(root: &Path, function: &str, class: &str, name: &str) {
    let dir = root
        .join("sys/devices")
        .join(function)
        .join(class)
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    if !name.contains('-') {
        std::fs::write(dir.join("dev"), "1:0\n").unwrap();
    }
    let links = root.join("sys/class").join(class);
    std::fs::create_dir_all(&links).unwrap();
    std::os::unix::fs::symlink(
        format!("../../devices/{function}/{class}/{name}"),
        links.join(name),
    )
    .unwrap();
}

/// Every view of the 24em64t XML shows its I/O objects: with the PCI tree kept (what
/// `--whole-io` keeps) the bridges too, without it (the default) the devices and their OS
/// devices but no bridge, with `--no-io` nothing of either.
#[test]
fn every_view_shows_the_io_objects() {
    use autopin_topology::source::json;
    use autopin_topology::view::{boxes, dot, svg};
    let path = autopin_testkit::data("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let whole = hwloc_xml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut plain = whole.clone();
    plain.drop_whole_io();
    let mut none = whole.clone();
    none.drop_io();
    let views = |m: &Machine| -> Vec<(&'static str, String)> {
        let tree = TreeOptions {
            whole_io: !m.pci_bridges.is_empty(),
            verbose: false,
        };
        vec![
            ("tree", render_with(m, tree)),
            ("boxes", boxes::render(m)),
            ("dot", dot::render(m)),
            ("svg", svg::render(m)),
            (
                "json",
                serde_json::to_string_pretty(&json::to_document(m)).unwrap(),
            ),
        ]
    };
    let devices = [
        "0000:04:00.0",
        "0000:05:00.0",
        "0000:06:00.0",
        "0000:01:03.0",
        "0000:00:1f.2",
        "0000:14:00.0",
        "0000:11:00.0",
    ];
    let os_devices = ["eth0", "eth1", "ib0", "mlx4_0", "sda"];
    let bridges = ["0000:00:01.0", "0000:00:05.0", "0000:10:07.0"];
    for (name, text) in views(&whole) {
        for want in devices.iter().chain(&os_devices).chain(&bridges) {
            assert!(
                text.contains(want),
                "{name} --whole-io lacks {want}:\n{text}"
            );
        }
        if name != "json" {
            assert!(text.contains("HostBridge"), "{name}:\n{text}");
            assert!(text.contains("PCIBridge"), "{name}:\n{text}");
        }
    }
    for (name, text) in views(&plain) {
        for want in devices.iter().chain(&os_devices) {
            assert!(text.contains(want), "{name} lacks {want}:\n{text}");
        }
        for gone in bridges {
            assert!(!text.contains(gone), "{name} shows bridge {gone}:\n{text}");
        }
        assert!(!text.contains("PCIBridge"), "{name}:\n{text}");
    }
    for (name, text) in views(&none) {
        for gone in devices.iter().chain(&os_devices).chain(&bridges) {
            assert!(!text.contains(gone), "{name} --no-io shows {gone}:\n{text}");
        }
    }
    // The OS devices as lstopo names them, in their device's box / line / node.
    let b = boxes::render(&whole);
    assert!(
        b.contains("    PCI 0000:04:00.0 (Ethernet 8086:10c9) Net \"eth0\" near socket 0\n"),
        "{b}"
    );
    assert!(
        b.contains("  PCIBridge 0000:00:01.0 (buses=0000:[04-04]) near socket 0\n"),
        "{b}"
    );
    let d = dot::render(&whole);
    assert_eq!(d.matches("shape=cds").count(), 8, "{d}");
    assert_eq!(d.matches("shape=note").count(), 6, "{d}");
    assert!(d.contains("label=\"OpenFabrics \\\"mlx4_0\\\"\""), "{d}");
    // The SVG: a box per bridge, device and OS device, each inside the box of the object
    // above it and the package it is local to.
    let text = svg::render(&whole);
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let rect = |n: roxmltree::Node| {
        let r = n.children().find(|c| c.has_tag_name("rect")).unwrap();
        let f = |a: &str| r.attribute(a).unwrap().parse::<f64>().unwrap();
        (f("x"), f("y"), f("x") + f("width"), f("y") + f("height"))
    };
    let groups = |class: &str| {
        doc.descendants()
            .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some(class))
            .collect::<Vec<_>>()
    };
    assert_eq!(groups("Bridge").len(), 8);
    assert_eq!(groups("PCIDev").len(), 9);
    assert_eq!(groups("OSDev").len(), 6);
    for g in groups("Bridge")
        .into_iter()
        .chain(groups("PCIDev"))
        .chain(groups("OSDev"))
    {
        let parent = g.parent_element().unwrap();
        let (a, b) = (rect(g), rect(parent));
        assert!(
            a.0 >= b.0 && a.1 >= b.1 && a.2 <= b.2 && a.3 <= b.3,
            "{:?} outside {:?}",
            g.attribute("class"),
            parent.attribute("class")
        );
        let package = g
            .ancestors()
            .find(|n| n.attribute("class") == Some("Package"))
            .expect("inside a package");
        let label = |n: roxmltree::Node| -> String {
            n.children()
                .find(|c| c.has_tag_name("text"))
                .and_then(|t| t.text())
                .unwrap_or("")
                .to_string()
        };
        if label(g).contains("0000:14:00.0") {
            assert_eq!(label(package), "Package P#1");
        }
        if label(g).contains("\"sda\"") {
            assert_eq!(label(package), "Package P#0");
            assert!(label(parent).contains("0000:00:1f.2"));
        }
    }
    for want in [
        "&quot;mlx4_0&quot;",
        "PCIBridge 0000:10:07.0 (buses=0000:[11-13])",
    ] {
        assert!(text.contains(want), "{want}");
    }
}

/// Overwrites one sysfs file of a PCI function written by [`function`].
fn pci_file(root: &Path, path: &str, file: &str, text: &str) {
    std::fs::write(root.join("sys/devices").join(path).join(file), text).unwrap();
}

/// The CPU-side object each host bridge and PCI device hangs from, in lstopo's words
/// (`Package L#1`, `Group L#0`, `Machine`), keyed as [`io_lines`] keys them.
fn parents(console: &str) -> BTreeMap<String, String> {
    io_lines(console)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("OSDev"))
        .map(|(k, l)| (k, l.under))
        .collect()
}

/// Where each PCI tree hangs comes from its first function's `local_cpus` mask, as in
/// hwloc, never from `local_cpulist`: two packages of four cores, one host bridge per case.
/// The mask names package 1 while the list names every CPU (an old kernel's or a hand-made
/// dump's disagreement); a mask longer than the machine names package 1 and CPUs that do
/// not exist; a mask and a list that name no CPU; a mask of two cores of package 0 (hwloc
/// makes a Group for them); a mask cutting across both packages (hwloc reports invalid
/// information and hangs the tree from the machine). Checked against lstopo.
#[test]
fn pci_locality_comes_from_the_mask_as_in_lstopo() {
    autopin_testkit::require!(have_lstopo(), "lstopo-no-graphics is not installed");
    let dir = SysfsTree::regular(2, 4, 1, true).tempdir();
    let root = dir.path();
    let cases: [(&str, &str, &str); 5] = [
        // (host bridge directory, mask, list)
        ("pci0000:00", "000000f0", "0-7"),
        ("pci0000:20", "00000001,00000000,000000f0", "4-7"),
        ("pci0000:40", "00000000", ""),
        ("pci0000:60", "00000003", "0-7"),
        ("pci0000:80", "00000018", "0-7"),
    ];
    for (host, m, l) in cases {
        let bus = &host[8..];
        let nic = format!("{host}/0000:{bus}:00.0");
        function(root, &nic, 0x020000, &[], None);
        pci_file(root, &nic, "local_cpus", &format!("{m}\n"));
        pci_file(root, &nic, "local_cpulist", &format!("{l}\n"));
    }
    let theirs = lstopo_whole_io(root).unwrap_or_else(|e| panic!("lstopo: {e}"));
    let m = sysfs::read_with_affinity(root, None).unwrap();
    let ours = ours(&m);
    assert_eq!(parents(&theirs).len(), 10, "{theirs}");
    assert_eq!(
        parents(&theirs),
        parents(&ours),
        "lstopo:\n{theirs}\nours:\n{ours}"
    );
    let at = |busid: &str| {
        let d = m.io.iter().find(|d| d.busid == busid).unwrap();
        let o = m.obj(d.attached_to);
        format!("{} L#{}", o.type_label(), o.logical_index)
    };
    assert_eq!(at("0000:00:00.0"), "Package L#1");
    assert_eq!(at("0000:20:00.0"), "Package L#1");
    assert_eq!(at("0000:40:00.0"), "Machine L#0");
    assert_eq!(at("0000:60:00.0"), "Group L#0");
    assert_eq!(at("0000:80:00.0"), "Machine L#0");
    let group = m.objects_of(autopin_topology::ObjType::Group);
    assert_eq!(group.len(), 1);
    assert_eq!(m.obj(group[0]).cpuset.to_list(), "0-1");
    // The pin domain of a device is the CPUs its mask names, cut to the machine's.
    let d = |busid: &str| {
        m.io.iter()
            .find(|d| d.busid == busid)
            .unwrap()
            .local_cpus
            .to_list()
    };
    assert_eq!(d("0000:20:00.0"), "4-7");
    assert_eq!(d("0000:40:00.0"), "0-7");
    // hwloc warns about the mask that cuts across the packages, and only about it.
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    assert!(
        m.warnings[0].contains(
            "/sys/bus/pci/devices/0000:80:00.0/local_cpus: PCI host bridge 0000:[80-80]: its CPUs 3-4 cut across Package L#0"
        ),
        "{:?}",
        m.warnings
    );
    m.validate().unwrap();
}

/// PCI domains of 32 bits (Intel VMD puts its NVMe drives in domain 10000 and up; Hyper-V
/// guests get domains like c1d5): read, sorted by number and written as hwloc 3 writes
/// them (`10000:01:00.0`, `buses=10000:[00-01]`). hwloc 2 as most systems build it leaves
/// such devices out with a warning; autopin keeps them and warns once. Everything of the
/// 16-bit domains is checked against lstopo; a directory whose domain does not fit 32 bits
/// is left out with a warning naming it.
#[test]
fn wide_pci_domains_as_hwloc_3_names_them() {
    autopin_testkit::require!(have_lstopo(), "lstopo-no-graphics is not installed");
    let dir = SysfsTree::regular(2, 2, 1, true).tempdir();
    let root = dir.path();
    let (p0, p1) = (&[0, 1][..], &[2, 3][..]);
    function(root, "pci0000:00/0000:00:1f.2", 0x010601, p0, None);
    function(
        root,
        "pci10000:00/10000:00:02.0",
        0x060400,
        p1,
        Some((1, 1)),
    );
    let nvme = "pci10000:00/10000:00:02.0/10000:01:00.0";
    function(root, nvme, 0x010802, p1, None);
    os_device(root, nvme, "block", "nvme0n1");
    function(root, "pcic1d5:00/c1d5:00:00.0", 0x020000, p0, None);
    let theirs = lstopo_whole_io(root).unwrap_or_else(|e| panic!("lstopo: {e}"));
    let m = sysfs::read_with_affinity(root, None).unwrap();
    let ours = ours(&m);
    let narrow = |lines: BTreeMap<String, IoLine>| -> BTreeMap<String, IoLine> {
        lines
            .into_iter()
            .filter(|(k, l)| !k.contains("10000:") && !l.behind.contains("10000:"))
            .collect()
    };
    assert_eq!(
        narrow(io_lines(&theirs)),
        narrow(io_lines(&ours)),
        "ours:\n{ours}"
    );
    let busids: Vec<&str> = m.io.iter().map(|d| d.busid.as_str()).collect();
    assert_eq!(busids, ["0000:00:1f.2", "c1d5:00:00.0", "10000:01:00.0"]);
    for line in [
        "HostBridge L#2 (buses=10000:[00-01])",
        "PCIBridge L#3 (busid=10000:00:02.0 id=8086:0604 class=0604(PCIBridge) buses=10000:[01-01])",
        "PCI L#2 (busid=10000:01:00.0 id=8086:0108 class=0108(NVMExp))",
    ] {
        assert!(ours.contains(line), "{line}:\n{ours}");
    }
    let nvme = m.io_device("nvme0n1").expect("the VMD drive is kept");
    assert_eq!(nvme.busid, "10000:01:00.0");
    assert_eq!(m.obj(nvme.attached_to).type_label(), "Package");
    assert_eq!(
        m.io_device("10000:1:0.0").map(|d| d.busid.as_str()),
        Some("10000:01:00.0")
    );
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    assert!(
        m.warnings[0].contains(
            "/sys/bus/pci/devices/10000:00:02.0: PCI devices with a 32-bit domain (10000:00:02.0 and 1 more"
        ),
        "{:?}",
        m.warnings
    );
    // A JSON document keeps them.
    let doc = serde_json::to_string(&autopin_topology::source::json::to_document(&m)).unwrap();
    assert!(autopin_topology::source::json::from_str(&doc).unwrap() == m);
    // A domain wider than 32 bits is no bus id (hwloc's sscanf would wrap it into another
    // domain): left out, named in a warning, the rest unchanged.
    function(
        root,
        "pci100000000:00/100000000:00:03.0",
        0x020000,
        p0,
        None,
    );
    let m2 = sysfs::read_with_affinity(root, None).unwrap();
    assert_eq!(m2.io, m.io);
    assert_eq!(m2.warnings.len(), 2, "{:?}", m2.warnings);
    assert!(
        m2.warnings[0].contains("100000000:00:03.0") && m2.warnings[0].contains("not a PCI bus id"),
        "{:?}",
        m2.warnings
    );
}
