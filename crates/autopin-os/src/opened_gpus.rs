//! Which GPUs a process has opened, from its file descriptors: `/dev/nvidiaN` (NVIDIA's
//! device minor N, matched to its bus id through `/proc/driver/nvidia/gpus/*/information`)
//! and `/dev/dri/cardN` / `/dev/dri/renderDN` (through `/sys/class/drm/NAME/device`, which
//! leads to the PCI device). AMD's `/dev/kfd` names no particular GPU and is left out.

use std::path::{Path, PathBuf};

/// The bus ids of the GPUs `pid` has open now, sorted, each once.
pub fn opened_gpus(pid: i32) -> Vec<String> {
    let links: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .collect();
    gpus_of_links(&links, Path::new("/"))
}

/// The bus ids behind device paths, with `/proc` and `/sys` read below `root`.
pub fn gpus_of_links(links: &[PathBuf], root: &Path) -> Vec<String> {
    let mut out: Vec<String> = links
        .iter()
        .filter_map(|l| {
            let name = l.file_name()?.to_str()?;
            if l.starts_with("/dev/dri") {
                drm_busid(root, name)
            } else if l.parent() == Some(Path::new("/dev")) {
                let minor: u32 = name.strip_prefix("nvidia")?.parse().ok()?;
                nvidia_busid(root, minor)
            } else {
                None
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn drm_busid(root: &Path, name: &str) -> Option<String> {
    let target =
        std::fs::canonicalize(root.join("sys/class/drm").join(name).join("device")).ok()?;
    let last = target.file_name()?.to_str()?;
    autopin_topology::io::parse_busid(last)
}

fn nvidia_busid(root: &Path, minor: u32) -> Option<String> {
    let dir = root.join("proc/driver/nvidia/gpus");
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let info = std::fs::read_to_string(e.path().join("information")).ok()?;
        let m: u32 = info
            .lines()
            .find_map(|l| l.strip_prefix("Device Minor:"))?
            .trim()
            .parse()
            .ok()?;
        (m == minor)
            .then(|| autopin_topology::io::parse_busid(e.file_name().to_str()?))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_and_drm_device_files_lead_to_bus_ids() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (bus, minor) in [("0000:3b:00.0", 0), ("0000:af:00.0", 1)] {
            let d = root.join("proc/driver/nvidia/gpus").join(bus);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("information"),
                format!("Model: \t Tesla\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"),
            )
            .unwrap();
        }
        let pci = root.join("sys/devices/pci0000:00/0000:00:02.0");
        std::fs::create_dir_all(&pci).unwrap();
        let drm = root.join("sys/class/drm/renderD128");
        std::fs::create_dir_all(&drm).unwrap();
        std::os::unix::fs::symlink(&pci, drm.join("device")).unwrap();
        let links: Vec<PathBuf> = [
            "/dev/nvidia1",
            "/dev/nvidiactl",
            "/dev/nvidia-uvm",
            "/dev/dri/renderD128",
            "/dev/nvidia1",
            "/dev/null",
            "/tmp/nvidia0",
            "socket:[1234]",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(
            gpus_of_links(&links, root),
            ["0000:00:02.0", "0000:af:00.0"]
        );
        // This test process has no GPU open.
        assert!(opened_gpus(std::process::id() as i32).is_empty());
    }
}
