//! The autopin LD_PRELOAD library, embedded.
//!
//! `c/preload.c` is compiled by build.rs into a shared object whose bytes live inside this
//! crate (and so inside the `autopin` binary), which keeps `autopin` one self-contained
//! file: `cargo install` and `cargo test` need nothing else. [`install`] writes the object
//! once to a private per-user cache, named by a hash of its content, and returns its path
//! for `LD_PRELOAD`.
//!
//! The library's environment contract (`AUTOPIN_CPUS`, `AUTOPIN_SKIP`, `AUTOPIN_REGISTRY`,
//! `AUTOPIN_QUIET`) and the registry's binary layout are documented at the top of
//! `c/preload.c` and mirrored in `autopin_os::process::registry`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The compiled preload library.
pub const PRELOAD_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libautopin_preload.so"));

/// Environment variable that names a preload library to use instead of the embedded one.
pub const OVERRIDE_ENV: &str = "AUTOPIN_PRELOAD";

/// 64-bit FNV-1a: a stable content hash for the cache file name (not for security: the
/// cache directory is private to the user, and the content is compared before reuse).
fn content_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The file name the embedded library is cached under.
pub fn cache_file_name() -> String {
    format!("libautopin_preload-{:016x}.so", content_hash(PRELOAD_SO))
}

/// The per-user cache directory: `$XDG_RUNTIME_DIR/autopin` when that exists (it is
/// private and tmpfs), else `/tmp/autopin-<uid>`.
pub fn cache_dir() -> PathBuf {
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR") {
        let rt = PathBuf::from(rt);
        if rt.is_absolute() && rt.is_dir() {
            return rt.join("autopin");
        }
    }
    let uid = rustix::process::getuid().as_raw();
    std::env::temp_dir().join(format!("autopin-{uid}"))
}

/// Returns the path of the preload library to put in `LD_PRELOAD`: `$AUTOPIN_PRELOAD` if
/// set, else the embedded library written (once, atomically) into [`cache_dir`].
pub fn install() -> io::Result<PathBuf> {
    install_telling(&mut |_| {})
}

/// [`install`], calling `before_write` with the path of the temporary copy before it is made
/// (the copy is renamed into place once written): a guardian that is told it removes it
/// should autopin die while it is written.
pub fn install_telling(before_write: &mut dyn FnMut(&Path)) -> io::Result<PathBuf> {
    if let Some(p) = std::env::var_os(OVERRIDE_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{OVERRIDE_ENV}={} is not a file", p.display()),
            ));
        }
        // A file the dynamic loader cannot preload would put its error into the program's
        // stderr and leave autopin blind to thread creation; say so here instead.
        check_shared_library(&p).map_err(|why| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{OVERRIDE_ENV}={}: {why}", p.display()),
            )
        })?;
        return Ok(p);
    }
    install_into_telling(&cache_dir(), PRELOAD_SO, before_write)
}

/// The ELF machine number of the architecture autopin was built for.
const OWN_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(62)
} else if cfg!(target_arch = "aarch64") {
    Some(183)
} else if cfg!(target_arch = "riscv64") {
    Some(243)
} else if cfg!(target_arch = "powerpc64") {
    Some(21)
} else {
    None
};

/// Why a file is not a library the dynamic loader can preload into this machine's programs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotPreloadable {
    /// The file could not be read (the OS's reason).
    #[error("cannot read it: {reason}")]
    Unreadable { reason: String },
    #[error("not an ELF file, so not a shared library the dynamic loader can preload")]
    NotElf,
    /// An ELF file of the other word size.
    #[error("a {bits}-bit ELF file; this autopin is {own_bits}-bit")]
    WordSize { bits: u32, own_bits: u32 },
    /// An ELF file that is not a shared object (`e_type`).
    #[error("an ELF {} (type {elf_type}), not a shared library", elf_kind(*.elf_type))]
    NotShared { elf_type: u16 },
    /// A shared object for another architecture (`e_machine`).
    #[error(
        "a shared library for another architecture (ELF machine {machine}, this one is {own})"
    )]
    OtherArchitecture { machine: u16, own: u16 },
}

/// What an ELF file of type `elf_type` is, in words.
fn elf_kind(elf_type: u16) -> &'static str {
    if elf_type == 2 {
        "executable"
    } else {
        "file"
    }
}

/// Checks that `path` is an ELF shared object of this machine's word size and architecture,
/// as the dynamic loader requires of a preload library; says what it is otherwise.
pub fn check_shared_library(path: &Path) -> Result<(), NotPreloadable> {
    use std::io::Read;
    let mut head = [0u8; 20];
    let n = fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| NotPreloadable::Unreadable {
            reason: e.to_string(),
        })?;
    if n < head.len() || head[..4] != *b"\x7fELF" {
        return Err(NotPreloadable::NotElf);
    }
    let class = if cfg!(target_pointer_width = "64") {
        2
    } else {
        1
    };
    if head[4] != class {
        return Err(NotPreloadable::WordSize {
            bits: if head[4] == 2 { 64 } else { 32 },
            own_bits: if class == 2 { 64 } else { 32 },
        });
    }
    let word = |i: usize| {
        if head[5] == 2 {
            u16::from_be_bytes([head[i], head[i + 1]])
        } else {
            u16::from_le_bytes([head[i], head[i + 1]])
        }
    };
    const ET_DYN: u16 = 3;
    if word(16) != ET_DYN {
        return Err(NotPreloadable::NotShared { elf_type: word(16) });
    }
    match OWN_MACHINE {
        Some(m) if word(18) != m => Err(NotPreloadable::OtherArchitecture {
            machine: word(18),
            own: m,
        }),
        _ => Ok(()),
    }
}

/// Writes `bytes` as `dir/<cache_file_name>` unless an identical file is already there.
/// `dir` is created 0700 and must be a real directory owned by us and closed to others,
/// since whatever lies there gets loaded into the user's programs.
pub fn install_into(dir: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    install_into_telling(dir, bytes, &mut |_| {})
}

/// [`install_into`], calling `before_write` with the temporary copy's path before it is made.
pub fn install_into_telling(
    dir: &Path,
    bytes: &[u8],
    before_write: &mut dyn FnMut(&Path),
) -> io::Result<PathBuf> {
    ensure_private_dir(dir)?;
    let name = format!("libautopin_preload-{:016x}.so", content_hash(bytes));
    let target = dir.join(name);
    if let Ok(existing) = fs::read(&target) {
        if existing == bytes {
            return Ok(target);
        }
    }
    // Write beside the target and rename, so a concurrent autopin never maps half a file.
    let tmp = dir.join(format!(".tmp-{}-{:x}", std::process::id(), nanos()));
    before_write(&tmp);
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o500))?;
        fs::rename(&tmp, &target)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| target)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Creates `dir` (0700) if needed and checks that it is a real directory owned by this user
/// and closed to others: what lies there is loaded into the user's programs or trusted.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot create {}: {e}", dir.display()),
            ))
        }
    }
    let meta = fs::symlink_metadata(dir)?;
    let uid = rustix::process::getuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory owned by uid {uid} and closed to others; remove it or set {OVERRIDE_ENV}",
                dir.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preload_override_must_be_a_shared_library_of_this_machine() {
        let dir = tempfile::tempdir().unwrap();
        let embedded = dir.path().join("ok.so");
        fs::write(&embedded, PRELOAD_SO).unwrap();
        assert_eq!(check_shared_library(&embedded), Ok(()));
        let text = dir.path().join("notes.txt");
        fs::write(&text, "LD_PRELOAD me\n".repeat(4)).unwrap();
        let why = check_shared_library(&text).unwrap_err().to_string();
        assert!(why.contains("not an ELF file"), "{why}");
        let mut foreign = PRELOAD_SO.to_vec();
        foreign[18] ^= 0x40;
        let other = dir.path().join("other.so");
        fs::write(&other, &foreign).unwrap();
        let why = check_shared_library(&other).unwrap_err().to_string();
        assert!(why.contains("another architecture"), "{why}");
    }

    #[test]
    fn embedded_library_is_an_elf_shared_object() {
        assert_eq!(&PRELOAD_SO[..4], b"\x7fELF");
        // e_type at offset 16: ET_DYN = 3.
        assert_eq!(u16::from_le_bytes([PRELOAD_SO[16], PRELOAD_SO[17]]), 3);
    }

    #[test]
    fn install_writes_once_and_reuses() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let a = install_into(&dir, PRELOAD_SO).unwrap();
        let first = fs::metadata(&a).unwrap();
        let b = install_into(&dir, PRELOAD_SO).unwrap();
        assert_eq!(a, b);
        assert_eq!(fs::read(&b).unwrap(), PRELOAD_SO);
        assert_eq!(
            fs::metadata(&b).unwrap().ino(),
            first.ino(),
            "identical file must be reused"
        );
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        // Different content gets a different name.
        let c = install_into(&dir, b"other").unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn install_refuses_a_shared_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("open");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let err = install_into(&dir, PRELOAD_SO).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(content_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(content_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
