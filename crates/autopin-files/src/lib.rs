//! The paths autopin writes to (reports, timelines, exports, pictures, the decision store and
//! its journal), resolved as the kernel's `fs.protected_symlinks` and `fs.protected_regular`
//! would resolve them, whatever those sysctls are set to on this machine.
//!
//! In a sticky directory that anyone may write to (`/tmp`, `/var/tmp`, a shared scratch
//! directory) another user can put a symbolic link or a file under the name autopin is
//! about to write. Root following such a link writes wherever that user pointed it; root
//! replacing that user's file is no better. The kernel refuses both when the sysctls are on;
//! autopin refuses them always:
//!
//! - a symbolic link in a sticky, world-writable directory is followed only when the one
//!   who follows it (the effective uid) owns the link, or the link's owner owns the
//!   directory;
//! - an existing regular file or FIFO in such a directory is opened for writing or
//!   replaced only when the writer owns it, or its owner owns the directory.

pub mod write;

use std::ffi::OsString;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// The most symbolic links one path may pass through (the kernel's limit).
pub const MAX_LINKS: usize = 40;

/// Why a path is not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "{} is a symbolic link of uid {link_uid} in {}, a sticky directory anyone may write to \
         (owned by uid {dir_uid}); a link there is followed only when it is your own or the \
         directory owner's (the kernel's fs.protected_symlinks rule): name the file it points \
         to instead",
        link.display(),
        dir.display()
    )]
    ForeignLink {
        link: PathBuf,
        link_uid: u32,
        dir: PathBuf,
        dir_uid: u32,
    },
    #[error(
        "{} is a file of uid {file_uid} in {}, a sticky directory anyone may write to (owned \
         by uid {dir_uid}); a file there is written only when it is your own or the directory \
         owner's (the kernel's fs.protected_regular rule): write to another name, or have its \
         owner remove it",
        file.display(),
        dir.display()
    )]
    ForeignFile {
        file: PathBuf,
        file_uid: u32,
        dir: PathBuf,
        dir_uid: u32,
    },
    #[error("more than {MAX_LINKS} symbolic links on the way to {}", path.display())]
    TooManyLinks { path: PathBuf },
}

/// A path to write, its links resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute and free of symbolic links; past a link on procfs (`/proc/self/fd/1`, which
    /// names an open file, not a path to walk again), that link and the rest of the path
    /// as they were given.
    pub path: PathBuf,
    /// Whether `path` goes through a link on procfs, which only the kernel can follow.
    pub through_proc: bool,
}

/// Resolves `path` for writing as the effective user: every symbolic link on the way is
/// checked and followed here, and the file it ends at, if there is one, is checked too.
/// A component that cannot be looked at (missing, no permission) ends the walk: the rest is
/// the OS's to answer when the file is opened.
pub fn resolve_for_write(path: &Path) -> Result<Resolved, Refused> {
    resolve_as(path, rustix::process::geteuid().as_raw())
}

/// Checks the file `path` names (its last component not followed): what
/// [`resolve_for_write`] checks at the end of a path. For names made beside a resolved
/// path (a database's journal).
pub fn check_may_write(path: &Path) -> Result<(), Refused> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let me = rustix::process::geteuid().as_raw();
    if meta.file_type().is_symlink() {
        let dir = parent(path);
        return match std::fs::metadata(&dir) {
            Ok(d) if !allowed(me, meta.uid(), d.mode(), d.uid()) => Err(Refused::ForeignLink {
                link: path.to_path_buf(),
                link_uid: meta.uid(),
                dir,
                dir_uid: d.uid(),
            }),
            _ => Ok(()),
        };
    }
    check_file(me, path, &meta)
}

/// The rule of both sysctls: in a sticky directory anyone may write to (`dir_mode`), what
/// `owner` owns is for `me` only when one of them is the directory's owner (`dir_owner`) or
/// `me` is `owner`.
pub fn allowed(me: u32, owner: u32, dir_mode: u32, dir_owner: u32) -> bool {
    let sticky_and_open = dir_mode & 0o1002 == 0o1002;
    !sticky_and_open || owner == me || owner == dir_owner
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `dir` lies on procfs, whose links name open files and processes.
fn on_proc(dir: &Path) -> bool {
    rustix::fs::statfs(dir).is_ok_and(|s| s.f_type == rustix::fs::PROC_SUPER_MAGIC)
}

fn check_file(me: u32, path: &Path, meta: &std::fs::Metadata) -> Result<(), Refused> {
    let kind = meta.file_type();
    if !(kind.is_file() || kind.is_fifo()) {
        return Ok(());
    }
    let dir = parent(path);
    match std::fs::metadata(&dir) {
        Ok(d) if !allowed(me, meta.uid(), d.mode(), d.uid()) => Err(Refused::ForeignFile {
            file: path.to_path_buf(),
            file_uid: meta.uid(),
            dir,
            dir_uid: d.uid(),
        }),
        _ => Ok(()),
    }
}

fn resolve_as(path: &Path, me: u32) -> Result<Resolved, Refused> {
    // The components still to walk, the next one last.
    let mut todo: Vec<OsString> = Vec::new();
    let push = |todo: &mut Vec<OsString>, p: &Path| {
        for c in p.components().rev() {
            todo.push(c.as_os_str().to_os_string());
        }
    };
    push(&mut todo, path);
    let mut at = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
    };
    let rest = |at: &Path, next: OsString, todo: &mut Vec<OsString>| {
        let mut p = at.join(next);
        while let Some(c) = todo.pop() {
            p.push(c);
        }
        p
    };
    let mut links = 0;
    while let Some(name) = todo.pop() {
        match Path::new(&name).components().next() {
            Some(Component::RootDir) => {
                at = PathBuf::from("/");
                continue;
            }
            Some(Component::CurDir) | None => continue,
            Some(Component::ParentDir) => {
                at.pop();
                continue;
            }
            _ => {}
        }
        let next = at.join(&name);
        let Ok(meta) = std::fs::symlink_metadata(&next) else {
            return Ok(Resolved {
                path: rest(&at, name, &mut todo),
                through_proc: false,
            });
        };
        if !meta.file_type().is_symlink() {
            at = next;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(Refused::TooManyLinks {
                path: path.to_path_buf(),
            });
        }
        if let Ok(d) = std::fs::metadata(&at) {
            if !allowed(me, meta.uid(), d.mode(), d.uid()) {
                return Err(Refused::ForeignLink {
                    link: next,
                    link_uid: meta.uid(),
                    dir: at,
                    dir_uid: d.uid(),
                });
            }
        }
        if on_proc(&at) {
            return Ok(Resolved {
                path: rest(&at, name, &mut todo),
                through_proc: true,
            });
        }
        match std::fs::read_link(&next) {
            Ok(to) => push(&mut todo, &to),
            Err(_) => {
                return Ok(Resolved {
                    path: rest(&at, name, &mut todo),
                    through_proc: false,
                })
            }
        }
    }
    if let Ok(meta) = std::fs::symlink_metadata(&at) {
        check_file(me, &at, &meta)?;
    }
    Ok(Resolved {
        path: at,
        through_proc: false,
    })
}

/// The most bytes autopin reads from a file a user names (a topology, a latency matrix, a
/// report, an export, a sharing matrix): 64 MiB, far above any real one. `topology --load
/// /dev/zero` grew to 3.6 GB in 5 s before there was a bound.
pub const MAX_INPUT: u64 = 64 << 20;

/// Reads at most `max` bytes of `path`; a longer file is an error that says so (kind
/// `InvalidData`), read no further. Opened without blocking, so that a FIFO nobody writes
/// to is an empty file rather than a hang; then read as usual.
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    rustix::fs::fcntl_setfl(&f, rustix::fs::OFlags::empty())?;
    let mut out = Vec::new();
    f.take(max.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} MiB, the most autopin reads from such a file",
                max >> 20
            ),
        ));
    }
    Ok(out)
}

/// The bytes of a file autopin kept for itself (a cache), when it is still only its own: a
/// regular file of this user's that nobody else may write, not reached through a link, read
/// up to [`MAX_INPUT`]. None otherwise: a file another user planted, or made writable to
/// others, would steer what autopin does.
pub fn read_own_kept(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file()
        || meta.uid() != rustix::process::geteuid().as_raw()
        || meta.mode() & 0o022 != 0
    {
        return None;
    }
    let mut out = Vec::new();
    f.take(MAX_INPUT).read_to_end(&mut out).ok()?;
    Some(out)
}

/// Keeps `bytes` in `path` for autopin's own later reading ([`read_own_kept`]): written
/// beside it, private (0600), and renamed over it, so a reader sees one version or the
/// other, whole; a link at `path` is replaced, never followed.
pub fn keep_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new().prefix(".kept-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_to_string_bounded(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, max)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// A FIFO at `path`, for the tests of reading and writing one.
#[cfg(test)]
pub(crate) fn make_fifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn reads_are_bounded_and_a_fifo_without_a_writer_does_not_block() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("small");
        std::fs::write(&f, "12345").unwrap();
        assert_eq!(read_to_string_bounded(&f, 5).unwrap(), "12345");
        let e = read_bounded(&f, 4).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
        std::fs::write(&f, b"\xff").unwrap();
        assert!(read_to_string_bounded(&f, 5).is_err());
        let fifo = d.path().join("fifo");
        crate::make_fifo(&fifo);
        let t = std::time::Instant::now();
        assert_eq!(read_bounded(&fifo, 10).unwrap(), b"");
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn the_rule_of_both_sysctls() {
        let open_sticky = 0o41777;
        // Not sticky, or not world-writable: anything goes.
        assert!(allowed(0, 1000, 0o40777, 0));
        assert!(allowed(0, 1000, 0o41775, 0));
        // Sticky and world-writable: one's own, or the directory owner's.
        assert!(allowed(1000, 1000, open_sticky, 0));
        assert!(allowed(0, 0, open_sticky, 0));
        assert!(allowed(0, 1000, open_sticky, 1000));
        assert!(!allowed(0, 1000, open_sticky, 0));
        assert!(!allowed(1000, 1001, open_sticky, 0));
    }

    #[test]
    fn links_are_followed_to_the_file_and_kept_out_of_the_result() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("f.json"), "x").unwrap();
        symlink("real", d.path().join("dirlink")).unwrap();
        symlink("dirlink/f.json", d.path().join("flink")).unwrap();
        symlink("dirlink/new.json", d.path().join("dangling")).unwrap();
        let r = resolve_for_write(&d.path().join("flink")).unwrap();
        assert_eq!(r.path, real.join("f.json").canonicalize().unwrap());
        assert!(!r.through_proc);
        let r = resolve_for_write(&d.path().join("dangling")).unwrap();
        assert_eq!(r.path, real.canonicalize().unwrap().join("new.json"));
        let r = resolve_for_write(&d.path().join("dirlink/../real/./f.json")).unwrap();
        assert_eq!(r.path, real.join("f.json").canonicalize().unwrap());
        // A missing directory ends the walk; the rest is kept for the OS to refuse.
        let r = resolve_for_write(&d.path().join("none/x/y")).unwrap();
        assert!(r.path.ends_with("none/x/y"), "{r:?}");
        // A loop.
        symlink("loop2", d.path().join("loop1")).unwrap();
        symlink("loop1", d.path().join("loop2")).unwrap();
        assert!(matches!(
            resolve_for_write(&d.path().join("loop1")),
            Err(Refused::TooManyLinks { .. })
        ));
    }

    #[test]
    fn a_descriptor_link_is_left_to_the_kernel() {
        let r = resolve_for_write(Path::new("/dev/stdout")).unwrap();
        assert!(r.through_proc, "{r:?}");
        assert!(r.path.starts_with("/proc"), "{r:?}");
        let r = resolve_for_write(Path::new("/proc/self/fd/2")).unwrap();
        assert!(r.through_proc, "{r:?}");
    }

    #[test]
    fn ones_own_links_and_files_in_a_shared_directory_are_allowed() {
        let d = tempfile::tempdir().unwrap();
        let shared = d.path().join("pub");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        std::fs::write(shared.join("mine.json"), "x").unwrap();
        symlink("mine.json", shared.join("link")).unwrap();
        let r = resolve_for_write(&shared.join("link")).unwrap();
        assert!(r.path.ends_with("pub/mine.json"), "{r:?}");
        check_may_write(&shared.join("link")).unwrap();
        check_may_write(&shared.join("mine.json")).unwrap();
        check_may_write(&shared.join("absent")).unwrap();
    }

    /// A sticky, world-writable directory of root's holding a link and a file of uid 65534.
    fn shared_dir_with_a_strangers_link_and_file() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        std::fs::write(d.path().join("roots.json"), "root's").unwrap();
        symlink("roots.json", d.path().join("r.json")).unwrap();
        std::os::unix::fs::lchown(d.path().join("r.json"), Some(65534), Some(65534)).unwrap();
        std::fs::write(d.path().join("theirs.json"), "theirs").unwrap();
        std::os::unix::fs::lchown(d.path().join("theirs.json"), Some(65534), Some(65534)).unwrap();
        d
    }

    #[test]
    fn root_does_not_follow_a_strangers_link_or_replace_a_strangers_file() {
        if !rustix::process::geteuid().is_root() {
            autopin_testkit::skip!("needs root: files of another user are made with lchown");
        }
        let d = shared_dir_with_a_strangers_link_and_file();
        let e = resolve_for_write(&d.path().join("r.json")).unwrap_err();
        assert!(
            matches!(
                e,
                Refused::ForeignLink {
                    link_uid: 65534,
                    dir_uid: 0,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("protected_symlinks"), "{e}");
        // Also as a directory on the way.
        assert!(resolve_for_write(&d.path().join("r.json/x")).is_err());
        assert!(check_may_write(&d.path().join("r.json")).is_err());
        let e = resolve_for_write(&d.path().join("theirs.json")).unwrap_err();
        assert!(
            matches!(
                e,
                Refused::ForeignFile {
                    file_uid: 65534,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("protected_regular"), "{e}");
        assert!(check_may_write(&d.path().join("theirs.json")).is_err());
        // Root's own file, and a new name, are fine.
        resolve_for_write(&d.path().join("roots.json")).unwrap();
        resolve_for_write(&d.path().join("new.json")).unwrap();
        // When the stranger owns the directory, what they put there is theirs to point.
        std::os::unix::fs::lchown(d.path(), Some(65534), None).unwrap();
        resolve_for_write(&d.path().join("r.json")).unwrap();
        resolve_for_write(&d.path().join("theirs.json")).unwrap();
        // Not sticky: the kernel's rules do not apply.
        std::os::unix::fs::lchown(d.path(), Some(0), None).unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        resolve_for_write(&d.path().join("r.json")).unwrap();
    }
}
