//! Writing files the user asked for: whole or not at all, and checked before any work
//! starts. The one atomic writer of the workspace; the libraries return bytes (reports,
//! exports, views) and the commands write them here.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The directory a file is written into: its parent, or the current directory.
fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Where a write to a path the user gave goes, the path's links resolved by
/// [`crate::resolve_for_write`] (which refuses what the kernel's protected_symlinks
/// and protected_regular rules refuse, whatever the sysctls say).
#[derive(Debug, PartialEq)]
enum Target {
    /// A regular file, or none yet: replaced whole by renaming a new file onto the resolved
    /// path, so that a link stays a link, also one that names no file yet. Also a
    /// directory, which is then refused as one.
    Replace(PathBuf),
    /// Anything else: a device (`/dev/null`), a FIFO, a terminal or a descriptor
    /// (`/dev/stdout`, `/proc/self/fd/3`, also when it is a file the shell opened), and the
    /// file that is this process's (and so the program's) standard output or error, by
    /// whatever name. Opened as a shell's `>>` would and written at its end, never
    /// truncated: renaming onto such a path would put a regular file in its place (root's
    /// `-o /dev/null` replaced the system's /dev/null), or write a file no one reads, and
    /// truncating it would destroy what the program wrote there (`--report /dev/stdout --
    /// prog > out.txt` left only the report in out.txt). `through_proc`: the path goes
    /// through a descriptor's link, which only the kernel can follow.
    Direct { path: PathBuf, through_proc: bool },
}

fn target(path: &Path) -> std::io::Result<Target> {
    let special = |p: &Path| p.starts_with("/dev") || p.starts_with("/proc");
    let r = crate::resolve_for_write(path)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string()))?;
    let direct = |r: crate::Resolved| Target::Direct {
        path: r.path,
        through_proc: r.through_proc,
    };
    if r.through_proc || special(&r.path) || is_own_output(&r.path) {
        return Ok(direct(r));
    }
    Ok(match std::fs::symlink_metadata(&r.path) {
        // (A directory is refused where it is replaced.)
        Ok(m) if !(m.is_file() || m.is_dir()) => direct(r),
        _ => Target::Replace(r.path),
    })
}

/// How long an output written in place may take to open: a FIFO opens only once something
/// reads it, and `--report fifo` with no reader used to block forever after the program
/// ended (`stat` even ignored SIGTERM meanwhile).
const OPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
/// How long a write in place may make no progress (a reader that stopped reading).
const STALL_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens `path` to write at its end without blocking, trying again for up to `wait` while it
/// is a FIFO nothing reads; an error that says so after that. The resolved path has no link
/// left (unless it goes through /proc): one there now was put there meanwhile, and is not
/// followed.
fn open_in_place(
    path: &Path,
    through_proc: bool,
    wait: std::time::Duration,
) -> std::io::Result<std::fs::File> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = OFlags::NONBLOCK;
    if !through_proc {
        flags |= OFlags::NOFOLLOW;
    }
    let until = std::time::Instant::now() + wait;
    loop {
        match std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .custom_flags(flags.bits() as i32)
            .open(path)
        {
            Ok(f) => return Ok(f),
            // ENXIO: a FIFO without a reader (or a device without its hardware).
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {
                use std::os::unix::fs::FileTypeExt;
                let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
                if !fifo {
                    return Err(e);
                }
                if std::time::Instant::now() >= until {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "it is a FIFO and nothing read from it for {} s; start its reader first, or write to a file",
                            wait.as_secs()
                        ),
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes all of `bytes` to `f` (opened non-blocking), waiting for room while the reader
/// takes what was written; gives up when no byte could be written for `stall`.
fn write_within(
    f: &std::fs::File,
    bytes: &[u8],
    stall: std::time::Duration,
) -> std::io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut rest = bytes;
    while !rest.is_empty() {
        match rustix::io::write(f, rest) {
            Ok(n) => rest = &rest[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                let mut fds = [PollFd::new(f, PollFlags::OUT)];
                let ts = rustix::time::Timespec {
                    tv_sec: stall.as_secs() as i64,
                    tv_nsec: 0,
                };
                match poll(&mut fds, Some(&ts)) {
                    Ok(0) => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "its reader took nothing for {} s ({} of {} bytes written)",
                                stall.as_secs(),
                                bytes.len() - rest.len(),
                                bytes.len()
                            ),
                        ))
                    }
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Whether `path` (its links followed) is the file this process's standard output or
/// standard error writes to, which the program autopin runs inherits.
fn is_own_output(path: &Path) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return false;
    };
    let same = |fd: std::os::fd::BorrowedFd<'_>| {
        rustix::fs::fstat(fd).is_ok_and(|st| st.st_dev == m.dev() && st.st_ino == m.ino())
    };
    same(std::io::stdout().as_fd()) || same(std::io::stderr().as_fd())
}

/// Writes `bytes` to a temporary file beside `path` and renames it into place (tempfile's
/// persist), so a reader never sees half a file and an interrupted write never destroys the
/// previous one. A new file gets mode 0666 minus the umask (as `>` in a shell would give
/// it, not tempfile's private 0600); a replaced file keeps its mode. A path that is not a
/// regular file (a device, a FIFO, `/dev/stdout`), and the program's own output by any
/// name, is written in place at its end, never truncated (see [`Target`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let path = match target(path)? {
        Target::Replace(p) => p,
        Target::Direct { path, through_proc } => {
            let f = open_in_place(&path, through_proc, OPEN_WAIT)?;
            return write_within(&f, bytes, STALL_WAIT);
        }
    };
    let mode = match std::fs::metadata(&path) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(_) => 0o666 & !umask(),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".autopin-")
        .suffix(".tmp")
        .tempfile_in(dir_of(&path))?;
    tmp.write_all(bytes)?;
    // fchmod is not filtered by the umask: the mode is exactly the one computed above.
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(&path).map(|_| ()).map_err(|e| e.error)
}

/// The process's umask, read from /proc/self/status (umask(2) cannot read it without
/// setting it, which races with other threads creating files). 022 when it is not there.
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_umask(&s))
        .unwrap_or(0o022)
}

fn parse_umask(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(line.trim(), 8).ok()
}

/// Why an OS call failed, without the path tempfile attaches to its errors (which would
/// name the temporary file, not the one the user asked for). tempfile's error keeps the
/// OS error only as text ("… (os error 2) at path \"/d/.autopin-x.tmp\""), so the text is cut.
fn reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    let end = text
        .find(" (os error")
        .or_else(|| text.find(" at path "))
        .unwrap_or(text.len());
    text[..end].to_string()
}

/// A file the user asked for that cannot be written: their path and the OS's reason (never
/// the temporary file's name).
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot write: {why}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    pub why: String,
}

impl WriteError {
    /// `path` could not be written, for the OS's reason `e`.
    pub fn of(path: &Path, e: &std::io::Error) -> WriteError {
        WriteError {
            path: path.to_path_buf(),
            why: reason(e),
        }
    }
}

/// [`write_atomic`] with the error a user sees.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_atomic(path, bytes).map_err(|e| WriteError::of(path, &e))
}

/// Checks, before any work starts, that `path` can be written: its directory exists, is a
/// directory and accepts a new file (tried for real, so read-only file systems and
/// permissions count), and `path` itself is not a directory. Long runs call this first so a
/// typo in an output path does not throw the run away at the end.
pub fn check_writable(path: &Path) -> Result<(), WriteError> {
    checked_in_place(path).map(|_| ())
}

/// [`check_writable`], saying whether a write to `path` goes in place, at the end of what is
/// there ([`Target::Direct`]: a device, a FIFO, a descriptor, the program's own output).
fn checked_in_place(path: &Path) -> Result<bool, WriteError> {
    let fail = |why: String| {
        Err(WriteError {
            path: path.to_path_buf(),
            why,
        })
    };
    let path = match target(path) {
        Ok(Target::Replace(p)) => p,
        Err(e) => return fail(reason(&e)),
        // Written in place: it must take writes itself (its directory need not).
        Ok(Target::Direct { path, .. }) => {
            return match rustix::fs::access(path, rustix::fs::Access::WRITE_OK) {
                Ok(()) => Ok(true),
                Err(e) => fail(reason(&e.into())),
            };
        }
    };
    let path = path.as_path();
    let dir = dir_of(path);
    match std::fs::metadata(dir) {
        Err(e) => return fail(format!("directory {}: {}", dir.display(), reason(&e))),
        Ok(m) if !m.is_dir() => return fail(format!("{} is not a directory", dir.display())),
        Ok(_) => {}
    }
    if path.is_dir() {
        return fail("it is a directory".into());
    }
    if let Err(e) = tempfile::Builder::new()
        .prefix(".autopin-")
        .suffix(".tmp")
        .tempfile_in(dir)
    {
        return fail(format!("directory {}: {}", dir.display(), reason(&e)));
    }
    // A full file system accepts the empty trial file above and fails the report at the end.
    if let Ok(st) = rustix::fs::statvfs(dir) {
        if let Some(why) = too_little_room(st.f_bavail.saturating_mul(st.f_frsize)) {
            return fail(why);
        }
    }
    Ok(false)
}

/// Room an output needs on its file system: a report with a long run's timeline and every
/// probe takes a few MiB.
const MIN_FREE: u64 = 4 << 20;

/// Why `free` bytes (what an unprivileged writer may use) are too few, if they are.
fn too_little_room(free: u64) -> Option<String> {
    (free < MIN_FREE).then(|| {
        format!(
            "only {} free on its file system, and autopin's outputs need up to {}",
            autopin_human::lstopo_size(free),
            autopin_human::lstopo_size(MIN_FREE)
        )
    })
}

/// The output files of a run, checked before it starts ([`check_writable`]); for each, whether
/// it is kept until the run has its final text: a file that was there before (an earlier
/// report) is replaced only by a finished one, and a path written in place (the program's
/// stdout, a FIFO) only once, where each write would be added to the last.
pub fn check_outputs<const N: usize>(
    paths: &[Option<PathBuf>; N],
) -> Result<[bool; N], WriteError> {
    let mut kept = [false; N];
    for (k, p) in kept.iter_mut().zip(paths) {
        if let Some(p) = p {
            *k = checked_in_place(p)? || p.exists();
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nearly_full_file_system_is_refused_before_the_run() {
        let why = too_little_room(100 << 10).expect("100 KiB is too little");
        assert!(why.contains("free on its file system"), "{why}");
        assert_eq!(too_little_room(1 << 30), None);
        // This machine's temp dir has room: the real check passes there.
        let dir = tempfile::tempdir().unwrap();
        check_writable(&dir.path().join("r.json")).unwrap();
    }

    #[test]
    fn atomic_write_replaces_the_file() {
        let dir =
            std::env::temp_dir().join(format!("autopin-compare-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(write_atomic(&dir.join("missing/x.json"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_a_device_or_a_descriptor_is_written_in_place_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        crate::make_fifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        check_writable(&fifo).unwrap();
        write_atomic(&fifo, b"report").unwrap();
        assert_eq!(reader.join().unwrap(), "report");
        let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(kind.is_fifo(), "the FIFO was replaced: {kind:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // Devices and descriptors are never renamed onto (root's `-o /dev/null` once put a
        // regular file in the place of the system's /dev/null).
        for p in ["/dev/null", "/dev/stdout", "/proc/self/fd/2"] {
            assert!(
                matches!(target(Path::new(p)), Ok(Target::Direct { .. })),
                "{p}"
            );
        }
        check_writable(Path::new("/dev/null")).unwrap();
        assert_eq!(
            target(&dir.path().join("new.json")).unwrap(),
            Target::Replace(dir.path().join("new.json"))
        );
    }

    #[test]
    fn a_link_to_a_file_stays_a_link_and_its_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("real.json");
        let link = dir.path().join("latest.json");
        std::fs::write(&file, "old").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        // A link to nothing yet: accepted before the run, its file made, the link kept.
        let dangling = dir.path().join("next.json");
        std::os::unix::fs::symlink("made.json", &dangling).unwrap();
        check_writable(&dangling).unwrap();
        write_atomic(&dangling, b"made").unwrap();
        assert!(std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("made.json")).unwrap(),
            "made"
        );
    }

    #[test]
    fn umask_is_read_from_the_status_line() {
        let status = "Name:\tautopin\nUmask:\t0027\nState:\tR (running)\n";
        assert_eq!(parse_umask(status), Some(0o027));
        assert_eq!(parse_umask("Name:\tx\n"), None);
    }

    #[test]
    fn replacing_a_file_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("keep.json");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, b"new").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
    }

    #[test]
    fn errors_name_the_users_path_not_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("missing/r.json");
        let e = write_atomically(&p, b"x").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("{}: cannot write: ", p.display())),
            "{text}"
        );
        assert!(text.contains("No such file or directory"), "{text}");
        assert!(!text.contains(".autopin-"), "{text}");
        let e = check_writable(&p).unwrap_err().to_string();
        assert!(e.contains("missing") && e.contains("No such file"), "{e}");
        assert!(!e.contains(".autopin-"), "{e}");
        assert!(check_writable(dir.path())
            .unwrap_err()
            .to_string()
            .contains("is a directory"));
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        assert!(check_writable(&file.join("x.json"))
            .unwrap_err()
            .to_string()
            .contains("not a directory"));
        assert!(check_writable(&dir.path().join("ok.json")).is_ok());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "check leaves nothing"
        );
    }
}
