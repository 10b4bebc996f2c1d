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
    /// Infer the machine from a core-to-core latency matrix (CSV) or an MCTOP .mct file.
    /// With --sysfs-root or --load beside it (or a dump NAME.tar.bz2, NAME.xml or NAME/ next
    /// to the file), that is the OS topology of the machine measured: levels it groups alike
    /// take its names (package, die, NUMA node, L3 group)
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
        self.load_with_names().map(|(m, _)| m)
    }

    /// Like [`MachineArgs::load`], the live machine from the per-boot cache when what can
    /// change has not (`autopin_os::machine_cache`): for the commands that start programs,
    /// whose read comes before the program's start. `topology`, `cpus` and `show` read
    /// afresh.
    pub fn load_kept(&self) -> Result<Machine, CliError> {
        if !self.is_live() {
            return self.load();
        }
        let machine =
            autopin_os::machine_cache::live().map_err(|e| CliError::usage(e.to_string()))?;
        say_warnings(&machine);
        Ok(machine)
    }

    /// Like [`MachineArgs::load`]; for `--from-latency` also the lines saying which level
    /// names came from the OS topology and which were inferred from the latencies.
    pub fn load_with_names(&self) -> Result<(Machine, Vec<String>), CliError> {
        let given = [
            self.sysfs_root.is_some(),
            self.synthetic.is_some(),
            self.load.is_some(),
            self.from_latency.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        // --from-latency takes --sysfs-root or --load as the OS topology of the machine it
        // was measured on.
        let os_beside = self.from_latency.is_some()
            && given == 2
            && (self.sysfs_root.is_some() || self.load.is_some());
        if given > 1 && !os_beside {
            return Err(CliError::usage(
                "choose one machine source: --sysfs-root, --synthetic, --load or --from-latency (--from-latency takes --sysfs-root or --load beside it as the OS topology of the machine measured)",
            ));
        }
        if let Some(path) = &self.from_latency {
            let os = if os_beside {
                let only_os = MachineArgs {
                    from_latency: None,
                    ..self.clone()
                };
                Some((only_os.load()?, "given".to_string()))
            } else {
                beside(path)?
            };
            let (m, inf) = autopin_latency::load_with_os(path, os.as_ref().map(|(m, _)| m))
                .map_err(|e| CliError::usage(e.to_string()))?;
            let mut names = Vec::new();
            match &os {
                Some((_, from)) => names.push(format!("OS topology: {from}")),
                None => names.push(
                    "OS topology: not given (--sysfs-root or --load beside --from-latency); every name is inferred"
                        .into(),
                ),
            }
            names.extend(inf.naming_lines());
            names.extend(inf.notes.iter().map(|n| format!("note: {n}")));
            return Ok((m, names));
        }
        let result = if let Some(spec) = &self.synthetic {
            autopin_topology::source::synthetic::parse(spec)
        } else if let Some(path) = &self.load {
            autopin_topology::source::load_file(path)
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
        say_warnings(&machine);
        Ok((machine, Vec::new()))
    }
}

/// Odd files the reader worked around (as hwloc does): said once each, on stderr.
fn say_warnings(machine: &Machine) {
    for w in &machine.warnings {
        say!("autopin: warning: {w}");
    }
}

/// The OS topology lying beside a latency file `NAME.csv` / `NAME.mct`: `NAME.xml` (hwloc
/// XML or autopin's JSON), `NAME.tar.bz2` (an hwloc-gather-topology archive) or `NAME/` (a
/// dump directory with `sys/`), with where it came from.
fn beside(path: &std::path::Path) -> Result<Option<(Machine, String)>, CliError> {
    let stem = path.with_extension("");
    for ext in ["xml", "json"] {
        let f = stem.with_extension(ext);
        if f.is_file() {
            let m = MachineArgs {
                load: Some(f.clone()),
                ..Default::default()
            }
            .load()?;
            return Ok(Some((m, format!("{} (beside the matrix)", f.display()))));
        }
    }
    let archive = PathBuf::from(format!("{}.tar.bz2", stem.display()));
    let dir_dump = stem.join("sys/devices/system/cpu").is_dir();
    let root = if archive.is_file() {
        archive
    } else if dir_dump {
        stem.clone()
    } else {
        return Ok(None);
    };
    let m = MachineArgs {
        sysfs_root: Some(root.clone()),
        ..Default::default()
    }
    .load()?;
    Ok(Some((m, format!("{} (beside the matrix)", root.display()))))
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
