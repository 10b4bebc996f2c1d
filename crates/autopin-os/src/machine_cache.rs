//! The live machine, read once per boot and kept. Reading it takes some twenty sysfs files
//! per CPU (topology, caches) and more per PCI device: 1.7 ms of the 6.5 ms `autopin run`
//! added to a program's start on a 2-CPU VM, and thousands of files on a 256-CPU node. The
//! files that can change while the machine runs (the CPUs online, the cgroup and affinity,
//! the devices present: [`autopin_topology::source::sysfs::read_key`]) are read each time as
//! the read's key; while they and the autopin executable stay the same, the kept read is the
//! machine.
//!
//! One JSON file per host and key, `machine-HOST-KEY.json` (the 16 newest kept), in
//! `$AUTOPIN_CACHE` (a directory; `off` reads afresh every time), else in the private
//! per-user directory the preload library is kept in (`$XDG_RUNTIME_DIR/autopin`, else
//! `$TMPDIR/autopin-UID`: local, and gone with the boot). `HWLOC_PCI_*` variables, which
//! move devices, read afresh too. A file that cannot be read or written is read around,
//! never an error: it is a cache.

use autopin_topology::{CpuSet, Machine};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The kept read and what it was read under.
#[derive(Serialize, Deserialize)]
struct Kept {
    key: String,
    machine: Machine,
}

/// The live machine (as `sysfs::read("/")`), from the cache when its key still holds.
pub fn live() -> autopin_topology::Result<Machine> {
    let root = Path::new("/");
    let affinity = autopin_topology::affinity::get(0).ok();
    match cache_dir() {
        Some(dir) if !hwloc_moves_devices() => read_kept(root, affinity, &dir),
        _ => autopin_topology::source::sysfs::read_with_affinity(root, affinity),
    }
}

/// `HWLOC_PCI_*` variables move devices (as they do in hwloc): a read under them is not kept.
fn hwloc_moves_devices() -> bool {
    std::env::vars_os().any(|(k, _)| k.to_string_lossy().starts_with("HWLOC_PCI"))
}

/// Where autopin keeps what it read or computed for later runs on this node (the machine,
/// large programs' identities; None: turned off).
pub fn cache_dir() -> Option<PathBuf> {
    cache_dir_in(
        std::env::var_os("AUTOPIN_CACHE"),
        autopin_preload::cache_dir,
    )
}

/// [`cache_dir`] for this value of `AUTOPIN_CACHE`, `private` being the preload library's
/// directory.
fn cache_dir_in(var: Option<std::ffi::OsString>, private: impl Fn() -> PathBuf) -> Option<PathBuf> {
    match var.filter(|v| !v.is_empty()) {
        Some(v) if v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => Some(private()),
    }
}

/// The machine below `root` with `affinity`, kept in `dir`: the kept read when its key is
/// this one, else a fresh read, then kept.
pub fn read_kept(
    root: &Path,
    affinity: Option<CpuSet>,
    dir: &Path,
) -> autopin_topology::Result<Machine> {
    let key = full_key(root, affinity.as_ref());
    let file = kept_file(root, dir, &key);
    if let Some(kept) = lookup(&file, &key) {
        return Ok(kept.machine);
    }
    let kept = Kept {
        key,
        machine: autopin_topology::source::sysfs::read_with_affinity(root, affinity)?,
    };
    let _ = remember(root, dir, &file, &kept);
    Ok(kept.machine)
}

/// The read kept in `file` when it is this user's own and was made under `key`.
fn lookup(file: &Path, key: &str) -> Option<Kept> {
    autopin_files::read_own_kept(file)
        .and_then(|b| serde_json::from_slice::<Kept>(&b).ok())
        .filter(|k| k.key == key)
}

/// Keeps `kept` in `file` ([`keep`]) and lets the oldest of this host's reads go beyond
/// [`KEPT_READS`].
fn remember(root: &Path, dir: &Path, file: &Path, kept: &Kept) -> std::io::Result<()> {
    keep(dir, file, kept)?;
    prune(dir, &host_prefix(root), KEPT_READS);
    Ok(())
}

/// The read's key: this executable and what can change while the machine runs.
fn full_key(root: &Path, affinity: Option<&CpuSet>) -> String {
    format!(
        "{}\n{}",
        executable_identity(),
        autopin_topology::source::sysfs::read_key(root, affinity)
    )
}

/// One file per key: the ranks of a job, each with a CPU share of its own, and jobs in
/// cgroups of their own would otherwise replace each other's read at every start.
fn kept_file(root: &Path, dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{}{:016x}.json", host_prefix(root), key_hash(key)))
}

/// The start of this host's kept reads' names.
fn host_prefix(root: &Path) -> String {
    format!("machine-{}-", host_name(root))
}

/// [`verify`] for the live machine and this process's affinity; Ok with why not where
/// nothing is kept (`AUTOPIN_CACHE=off`, `HWLOC_PCI_*` set).
pub fn verify_live() -> Result<String, KeptReadFault> {
    if hwloc_moves_devices() {
        return Ok("none: HWLOC_PCI_* is set, so the machine is read afresh at every run".into());
    }
    match cache_dir() {
        None => Ok("off (AUTOPIN_CACHE=off): the machine is read afresh at every run".into()),
        Some(dir) => verify(
            Path::new("/"),
            autopin_topology::affinity::get(0).ok(),
            &dir,
        ),
    }
}

/// Why `autopin doctor` warns about the kept read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptReadFault {
    /// It was not the machine although its key held (something the key does not cover
    /// changed): where it was, the first difference, and whether the fresh read replaced it.
    Differed(String),
    /// The machine could not be read, or its read could not be kept (where, and why).
    NotKept(String),
}

impl std::fmt::Display for KeptReadFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeptReadFault::Differed(s) | KeptReadFault::NotKept(s) => f.write_str(s),
        }
    }
}

/// What `autopin doctor` says of the kept read: checked against a fresh read of the machine
/// below `root` with `affinity`, kept in `dir`. Ok: where it is and that it is the machine
/// (or that there was none, and now is). Otherwise why not: a kept read that was not the
/// machine (the fresh read replaces it), or one that cannot be made.
pub fn verify(root: &Path, affinity: Option<CpuSet>, dir: &Path) -> Result<String, KeptReadFault> {
    let key = full_key(root, affinity.as_ref());
    let file = kept_file(root, dir, &key);
    let kept = lookup(&file, &key);
    let fresh = autopin_topology::source::sysfs::read_with_affinity(root, affinity)
        .map_err(|e| KeptReadFault::NotKept(e.to_string()))?;
    let differed = match &kept {
        Some(k) if k.machine == fresh => {
            return Ok(format!("{}: the same as a fresh read", file.display()))
        }
        Some(k) => Some(first_difference(&k.machine, &fresh)),
        None => None,
    };
    let kept = Kept {
        key,
        machine: fresh,
    };
    let written = remember(root, dir, &file, &kept);
    match (differed, written) {
        (None, Ok(())) => Ok(format!(
            "none for this boot, CPU set and devices yet: kept now in {}",
            file.display()
        )),
        (None, Err(e)) => Err(KeptReadFault::NotKept(format!(
            "{}: cannot keep the read: {e}",
            file.display()
        ))),
        (Some(d), written) => Err(KeptReadFault::Differed(format!(
            "{} differed from a fresh read although its key held ({d}); {}",
            file.display(),
            match written {
                Ok(()) => "replaced by the fresh read".to_string(),
                Err(e) => format!("the fresh read could not replace it: {e}"),
            }
        ))),
    }
}

/// The first difference between the kept read and a fresh one, as a person reads it: a line
/// of the machine's summary, else the first object that differs (its type, CPUs and what
/// differs in it), else which part of the model.
fn first_difference(kept: &Machine, fresh: &Machine) -> String {
    let (a, b) = (kept.summary_lines(), fresh.summary_lines());
    if let Some((x, y)) = a.iter().zip(&b).find(|(x, y)| x != y) {
        return format!("kept \"{x}\", now \"{y}\"");
    }
    if let Some((x, y)) = kept
        .objects
        .iter()
        .zip(&fresh.objects)
        .find(|(x, y)| x != y)
    {
        let what = match (&x.cache, &y.cache) {
            (Some(c), Some(d)) if c != d => format!(
                "L{} cache of {} bytes kept, {} now",
                c.level, c.size, d.size
            ),
            _ => format!("kept {x:?}, now {y:?}"),
        };
        let what = format!("{:?} of CPUs {}: {what}", x.ty, x.cpuset);
        return what.chars().take(300).collect();
    }
    let part = if kept.objects.len() != fresh.objects.len() {
        "the number of objects"
    } else if kept.numa_nodes != fresh.numa_nodes {
        "the NUMA nodes"
    } else if kept.io != fresh.io || kept.pci_bridges != fresh.pci_bridges {
        "the PCI devices"
    } else {
        "another part of the model"
    };
    format!("{part} differ")
}

/// The most reads kept for one host (the most recently made stay).
const KEPT_READS: usize = 16;

/// A hash of the key for the file's name (the key itself is in the file and compared whole).
fn key_hash(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// Removes the oldest of the files named `prefix*` in `dir` beyond the `keep` newest.
fn prune(dir: &Path, prefix: &str, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut kept: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if kept.len() <= keep {
        return;
    }
    kept.sort();
    for (_, p) in &kept[..kept.len() - keep] {
        let _ = std::fs::remove_file(p);
    }
}

/// Writes the kept read beside the file and renames it over it: a reader sees one read or
/// the other, whole. The directory is made private if it is not there; one that is not
/// this user's alone is not written into.
fn keep(dir: &Path, file: &Path, kept: &Kept) -> std::io::Result<()> {
    autopin_preload::ensure_private_dir(dir)?;
    let text = serde_json::to_vec(kept).map_err(std::io::Error::other)?;
    autopin_files::keep_private(file, &text)
}

/// This executable as built: another build of autopin may read the machine otherwise.
fn executable_identity() -> String {
    use std::os::unix::fs::MetadataExt;
    let exe = std::env::current_exe().ok();
    let meta = exe.as_ref().and_then(|e| std::fs::metadata(e).ok());
    match meta {
        Some(m) => format!(
            "autopin {} {} dev {} ino {} size {} mtime {}.{}",
            env!("CARGO_PKG_VERSION"),
            exe.as_deref().unwrap_or(Path::new("?")).display(),
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec()
        ),
        None => format!("autopin {} (executable unknown)", env!("CARGO_PKG_VERSION")),
    }
}

/// The host name, as a file name (a cache directory may be shared by the nodes of a
/// cluster, whose homes are).
fn host_name(root: &Path) -> String {
    let name = std::fs::read_to_string(root.join("proc/sys/kernel/hostname")).unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() || name.starts_with('.') {
        format!("_{name}")
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_topology::source::sysfs;

    /// A dump with NUMA nodes and PCI devices, copied so that the test may change it.
    fn dump_copy() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let src = autopin_testkit::hwloc_dump("16amd64-8n2c+memcache+pcimask");
        let out = std::process::Command::new("cp")
            .arg("-a")
            .arg(&src)
            .arg(d.path().join("root"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root = d.path().join("root");
        (d, root)
    }

    fn cpu0_l1_size(root: &Path) -> PathBuf {
        root.join("sys/devices/system/cpu/cpu0/cache/index0/size")
    }

    #[test]
    fn a_kept_read_is_the_machine_until_what_can_change_does() {
        let (_d, root) = dump_copy();
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().join("c");
        let fresh = sysfs::read_with_affinity(&root, None).unwrap();
        assert!(
            !fresh.io.is_empty() || !fresh.pci_other.is_empty(),
            "the dump has PCI devices"
        );
        let first = read_kept(&root, None, &dir).unwrap();
        assert!(first == fresh, "a miss is a fresh read");
        let kept_files = || {
            std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("machine-")
                })
                .collect::<Vec<_>>()
        };
        let file = kept_files().into_iter().next();
        let file = file.expect("the read is kept");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // A file outside the key changes: the kept read is what comes back, so the files
        // per CPU were not read again.
        let l1 = std::fs::read_to_string(cpu0_l1_size(&root)).unwrap();
        std::fs::write(cpu0_l1_size(&root), "1024K\n").unwrap();
        assert!(read_kept(&root, None, &dir).unwrap() == fresh, "kept");
        // Another affinity is another key, kept beside the first (the ranks of a job, each
        // with its share, do not replace each other's read): both are hits from then on.
        let some: CpuSet = CpuSet::from_cpus([0, 1]);
        let narrowed = read_kept(&root, Some(some.clone()), &dir).unwrap();
        assert!(narrowed == sysfs::read_with_affinity(&root, Some(some.clone())).unwrap());
        assert!(narrowed != fresh);
        assert_eq!(kept_files().len(), 2);
        assert!(read_kept(&root, None, &dir).unwrap() == fresh, "still kept");
        assert!(
            read_kept(&root, Some(some), &dir).unwrap() == narrowed,
            "kept too"
        );
        // A CPU taken offline is another key: read afresh, with the changed cache too.
        std::fs::write(root.join("sys/devices/system/cpu/online"), "0-14\n").unwrap();
        let after = read_kept(&root, None, &dir).unwrap();
        assert!(after == sysfs::read_with_affinity(&root, None).unwrap());
        assert_eq!(after.pus().len(), fresh.pus().len() - 1);
        // A device that comes (a GPU driver loaded after boot) is another key.
        std::fs::write(cpu0_l1_size(&root), l1).unwrap();
        std::fs::create_dir_all(root.join("sys/class/drm/card9")).unwrap();
        let now = read_kept(&root, None, &dir).unwrap();
        assert!(
            now == sysfs::read_with_affinity(&root, None).unwrap(),
            "read afresh"
        );
        assert!(now != after, "the first CPU's cache is read again");
        assert_eq!(kept_files().len(), 4);
        assert!(kept_files().contains(&file));
        // At most KEPT_READS are kept, the oldest going first.
        for cpus in 0..KEPT_READS as u32 {
            let mask = CpuSet::from_cpus([cpus]);
            read_kept(&root, Some(mask), &dir).unwrap();
        }
        assert_eq!(kept_files().len(), KEPT_READS);
        assert!(!kept_files().contains(&file), "the oldest went");
    }

    #[test]
    fn a_kept_read_others_may_write_or_a_damaged_one_is_read_around() {
        let (_d, root) = dump_copy();
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().to_path_buf();
        let fresh = read_kept(&root, None, &dir).unwrap();
        let prefix = format!("machine-{}-", host_name(&root));
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .expect("kept");
        // A planted machine that others could have written is not believed.
        let text = std::fs::read_to_string(&file).unwrap();
        let planted = text.replacen("\"Package\"", "\"Group\"", 1);
        assert_ne!(planted, text);
        std::fs::write(&file, &planted).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(read_kept(&root, None, &dir).unwrap() == fresh);
        // Nor one through a link.
        std::fs::remove_file(&file).unwrap();
        let elsewhere = dir.join("elsewhere.json");
        std::fs::write(&elsewhere, &planted).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert!(read_kept(&root, None, &dir).unwrap() == fresh);
        assert!(!file.is_symlink(), "replaced by a kept read of its own");
        // A damaged file is read around and replaced.
        std::fs::write(&file, "{ not json").unwrap();
        assert!(read_kept(&root, None, &dir).unwrap() == fresh);
        assert!(serde_json::from_slice::<Kept>(&std::fs::read(&file).unwrap()).is_ok());
    }

    #[test]
    fn the_doctor_finds_a_kept_read_that_is_not_the_machine_and_replaces_it() {
        let (_d, root) = dump_copy();
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().join("c");
        let none = verify(&root, None, &dir).unwrap();
        assert!(none.starts_with("none for this boot"), "{none}");
        let same = verify(&root, None, &dir).unwrap();
        assert!(same.ends_with("the same as a fresh read"), "{same}");
        // Something the key does not cover changes (a cache's size): the kept read is
        // still used by runs, and the doctor says it is not the machine, and replaces it.
        std::fs::write(
            root.join("sys/devices/system/cpu/cpu0/cache/index2/size"),
            "2048K\n",
        )
        .unwrap();
        let old = read_kept(&root, None, &dir).unwrap();
        let fresh = sysfs::read_with_affinity(&root, None).unwrap();
        assert!(old != fresh, "runs use the kept read");
        let differs = verify(&root, None, &dir).unwrap_err();
        assert!(matches!(differs, KeptReadFault::Differed(_)), "{differs:?}");
        let differs = differs.to_string();
        assert!(
            differs.contains("L2 cache of 1048576 bytes kept, 2097152 now"),
            "{differs}"
        );
        assert!(
            differs.contains("differed from a fresh read") && differs.contains("replaced"),
            "{differs}"
        );
        assert!(read_kept(&root, None, &dir).unwrap() == fresh, "replaced");
        assert!(verify(&root, None, &dir)
            .unwrap()
            .ends_with("the same as a fresh read"));
        // A directory where nothing can be kept is said as such, not as a read that differed.
        let nowhere = cache.path().join("file-not-dir");
        std::fs::write(&nowhere, "").unwrap();
        let not_kept = verify(&root, None, &nowhere).unwrap_err();
        assert!(
            matches!(&not_kept, KeptReadFault::NotKept(m) if m.contains("cannot keep the read")),
            "{not_kept:?}"
        );
    }

    #[test]
    fn the_cache_goes_where_autopin_cache_says_or_beside_the_preload_library() {
        let private = || PathBuf::from("/run/user/7/autopin");
        assert_eq!(cache_dir_in(None, private), Some(private()));
        assert_eq!(cache_dir_in(Some("".into()), private), Some(private()));
        assert_eq!(cache_dir_in(Some("off".into()), private), None);
        assert_eq!(
            cache_dir_in(Some("/scratch/c".into()), private),
            Some(PathBuf::from("/scratch/c"))
        );
    }

    #[test]
    fn a_host_name_is_a_file_name() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("proc/sys/kernel");
        std::fs::create_dir_all(&f).unwrap();
        for (name, file) in [
            ("node-1.cluster\n", "node-1.cluster"),
            ("../x/y", "_.._x_y"),
            ("", "_"),
        ] {
            std::fs::write(f.join("hostname"), name).unwrap();
            assert_eq!(host_name(d.path()), file, "{name:?}");
        }
    }
}
