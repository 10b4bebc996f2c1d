//! The machine-source options every machine-aware subcommand shares, so any command can be
//! tried on any real or imagined machine.

use crate::error::CliError;
use autopin_topology::Machine;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "Machine source (default: this machine)")]
pub struct MachineArgs {
    /// Read Linux sysfs/procfs below this directory instead of / (e.g. an hwloc dump, or the
    /// .tar.bz2 hwloc-gather-topology writes)
    #[arg(long, value_name = "DIR", global = true)]
    pub sysfs_root: Option<PathBuf>,
    /// Use a synthetic machine, e.g. "package:2 l3:1 core:4 pu:2"
    #[arg(long, value_name = "SPEC", global = true, value_hint = clap::ValueHint::Other)]
    pub synthetic: Option<String>,
    /// Load a machine from `autopin topology --format json` output or hwloc XML (`lstopo --of xml`)
    #[arg(long, value_name = "FILE", global = true)]
    pub load: Option<PathBuf>,
    /// Infer the machine from a core-to-core latency matrix (CSV) or an MCTOP .mct file
    #[arg(long, value_name = "FILE", global = true)]
    pub from_latency: Option<PathBuf>,
}

impl MachineArgs {
    /// These options as arguments for another autopin command (`compare` passes them to
    /// `autopin pin` / `autopin run`, so they see the machine the strategies were checked on).
    pub fn to_forward(&self) -> Vec<std::ffi::OsString> {
        let mut v = Vec::new();
        let mut add = |flag: &str, val: Option<std::ffi::OsString>| {
            if let Some(val) = val {
                v.push(flag.into());
                v.push(val);
            }
        };
        add("--sysfs-root", self.sysfs_root.clone().map(Into::into));
        add("--synthetic", self.synthetic.clone().map(Into::into));
        add("--load", self.load.clone().map(Into::into));
        add("--from-latency", self.from_latency.clone().map(Into::into));
        v
    }

    /// True when the machine is the one we run on (so pinning and measuring make sense).
    pub fn is_live(&self) -> bool {
        self.sysfs_root.is_none()
            && self.synthetic.is_none()
            && self.load.is_none()
            && self.from_latency.is_none()
    }

    pub fn load(&self) -> Result<Machine, CliError> {
        let given = [
            self.sysfs_root.is_some(),
            self.synthetic.is_some(),
            self.load.is_some(),
            self.from_latency.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if given > 1 {
            return Err(CliError::usage(
                "choose one machine source: --sysfs-root, --synthetic, --load or --from-latency",
            ));
        }
        let result = if let Some(spec) = &self.synthetic {
            autopin_topology::source::synthetic::parse(spec)
        } else if let Some(path) = &self.load {
            autopin_topology::source::load_file(path)
        } else if let Some(path) = &self.from_latency {
            return autopin_latency::load_machine(path).map_err(|e| CliError::usage(e.to_string()));
        } else {
            let root = self
                .sysfs_root
                .clone()
                .unwrap_or_else(|| PathBuf::from("/"));
            if root.is_file() {
                let (_unpacked, dir) = unpack(&root)?;
                // Read while the unpacked copy exists; it goes when `_unpacked` is dropped.
                autopin_topology::source::sysfs::read(&dir)
            } else {
                autopin_topology::source::sysfs::read(&root)
            }
        };
        let machine = result.map_err(|e| CliError::usage(e.to_string()))?;
        // Odd files the reader worked around (as hwloc does): said once each, on stderr.
        for w in &machine.warnings {
            say!("autopin: warning: {w}");
        }
        Ok(machine)
    }
}

/// Unpacks an hwloc-gather-topology archive (`NAME.tar.bz2`, or any tarball `tar` reads) into
/// a temporary directory; returns it and the dump's root inside (its one top directory).
fn unpack(archive: &std::path::Path) -> Result<(tempfile::TempDir, PathBuf), CliError> {
    let how = format!(
        "unpack it (`tar xf {}`) and give the directory to --sysfs-root",
        archive.display()
    );
    let dir = tempfile::tempdir().map_err(|e| CliError::internal(e.to_string()))?;
    let out = std::process::Command::new("tar")
        .arg("xf")
        .arg(archive)
        .arg("-C")
        .arg(dir.path())
        .output()
        .map_err(|e| {
            CliError::usage(format!(
                "--sysfs-root {}: a file, and `tar` cannot run ({e}): {how}",
                archive.display()
            ))
        })?;
    if !out.status.success() {
        return Err(CliError::usage(format!(
            "--sysfs-root {}: a file that is not a readable tarball ({}): give a directory, or {how}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let tops: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .map_err(|e| CliError::internal(e.to_string()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    let root = match tops.as_slice() {
        [one] if one.join("sys").is_dir() => one.clone(),
        _ => dir.path().to_path_buf(),
    };
    Ok((dir, root))
}
