//! The thread registry shared with the preload library: a file we create and size in a
//! private temporary directory, the library maps it (MAP_SHARED) and records every thread
//! of the target, and we read it to learn which threads exist and in which creation order.
//!
//! Layout (little-endian, naturally aligned; the C side is c/preload.c in autopin-preload):
//! ```text
//!   offset 0  u64 magic    = 0x31474552504f5441 ("ATOPREG1")
//!   offset 8  u32 capacity   number of slots after the header
//!   offset 12 u32 count      atomic; slots claimed (> capacity means some threads were
//!                            not recorded: scan /proc for them)
//!   offset 16 u64 owner      atomic; pid of the recording process (0 = none yet). The
//!                            first process of the launched tree that creates a thread
//!                            claims the registry and records its main thread in slot 0.
//!   offset 24 slot[capacity], 16 bytes each:
//!     +0  i32 tid    atomic; 0 until filled, stored last with release ordering
//!     +4  u32 state  atomic; 1 alive, 2 exited, 3 skipped (unpinned) and alive,
//!                    4 skipped and exited
//!     +8  u32 index  creation number within the owning process image (main = 0)
//!     +12 u32 reserved
//!   offset 24 + 16 * capacity: the program's other processes
//!     +0  u32 forks  atomic; processes that recorded themselves (> FORK_SLOTS: some
//!                    were not)
//!     +4  u32 managed atomic; 0 until autopin first sets a thread's mask, then 1
//!                    (release): the library then leaves the main thread's mask, which it
//!                    would narrow to AUTOPIN_CPUS's first entry when the program's threads
//!                    begin, to autopin
//!     +8  i32 pid[FORK_SLOTS]  a process of the launched tree other than the owner
//!                    (the launched process itself too, before it owns the registry),
//!                    stored by that process at fork and again at exec; 0 until stored
//! ```

use autopin_perf::shared_words::SharedWords;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

pub const REGISTRY_MAGIC: u64 = 0x3147_4552_504f_5441;
pub const REGISTRY_ENV: &str = "AUTOPIN_REGISTRY";
const HEADER: usize = 24;
const SLOT: usize = 16;
/// Processes of the program's tree the registry lists (`FORK_SLOTS` in preload.c).
const FORK_SLOTS: usize = 64;

/// A thread's life as the library reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    Alive,
    Exited,
    /// Alive, and left unpinned by the skip mask.
    Skipped,
    SkippedExited,
    /// A value this version does not know (a newer library?).
    Unknown(u32),
}

impl ThreadState {
    fn from_raw(v: u32) -> Self {
        match v {
            1 => ThreadState::Alive,
            2 => ThreadState::Exited,
            3 => ThreadState::Skipped,
            4 => ThreadState::SkippedExited,
            other => ThreadState::Unknown(other),
        }
    }
    pub fn is_alive(self) -> bool {
        matches!(self, ThreadState::Alive | ThreadState::Skipped)
    }
    pub fn is_skipped(self) -> bool {
        matches!(self, ThreadState::Skipped | ThreadState::SkippedExited)
    }
}

/// One recorded thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrackedThread {
    /// Slot in the registry (recording order).
    pub slot: usize,
    /// Creation number within its process image: main = 0, then 1, 2, ... (the numbering
    /// `AUTOPIN_CPUS` and `AUTOPIN_SKIP` use). After an exec, numbers restart.
    pub index: usize,
    pub tid: i32,
    pub state: ThreadState,
}

/// The shared mapping. Dropping it unmaps the file and removes the directory.
#[derive(Debug)]
pub struct Registry {
    _dir: tempfile::TempDir,
    path: PathBuf,
    words: SharedWords,
    capacity: u32,
}

impl Registry {
    /// Creates a registry for up to `capacity` threads in a new private (0700) directory
    /// under the temp dir.
    pub fn create(capacity: u32) -> io::Result<Registry> {
        Self::create_at(&Self::fresh_dir(), capacity)
    }

    /// A directory name under the temp dir no registry has (this process's PID and the
    /// clock), for [`Registry::create_at`]: known before anything exists, so a guardian
    /// can be told it (and [`Registry::file_in`]) first.
    pub fn fresh_dir() -> PathBuf {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        std::env::temp_dir().join(format!("autopin-reg-{}-{n}-{nanos:x}", std::process::id()))
    }

    /// The registry file [`Registry::create_at`] makes in `dir`.
    pub fn file_in(dir: &Path) -> PathBuf {
        dir.join("threads.reg")
    }

    /// Creates a registry for up to `capacity` threads in the new private (0700) directory
    /// `dir`, which must not exist; the directory is removed on drop.
    pub fn create_at(dir: &Path, capacity: u32) -> io::Result<Registry> {
        use std::os::unix::fs::PermissionsExt;
        let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a directory to create", dir.display()),
            ));
        };
        // Private: whoever can write the file can make the engine pin arbitrary tids.
        // No random part: the name is the one given (a directory there already is an error).
        let dir = tempfile::Builder::new()
            .prefix(name)
            .rand_bytes(0)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent)?;
        Self::create_in(dir, capacity)
    }

    fn create_in(dir: tempfile::TempDir, capacity: u32) -> io::Result<Registry> {
        if capacity == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "registry capacity must be at least 1",
            ));
        }
        let path = Self::file_in(dir.path());
        let len = HEADER + SLOT * capacity as usize + 8 + 4 * FORK_SLOTS;
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(&REGISTRY_MAGIC.to_le_bytes());
        header.extend_from_slice(&capacity.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        header.extend_from_slice(&0u64.to_le_bytes());
        f.write_all(&header)?;
        Ok(Registry {
            _dir: dir,
            path,
            words: SharedWords::map_allocated(&f, len)?,
            capacity,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The variable to put in the target's environment.
    pub fn env(&self) -> (OsString, OsString) {
        (
            OsString::from(REGISTRY_ENV),
            self.path.clone().into_os_string(),
        )
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        self.words.at(off)
    }

    /// Threads recorded so far, counting those that did not fit.
    pub fn count(&self) -> u32 {
        self.u32_at(12).load(Ordering::Acquire)
    }

    /// True when more threads were created than the registry holds.
    pub fn overflowed(&self) -> bool {
        self.count() > self.capacity
    }

    /// The pid of the process that records, once one has claimed the registry.
    pub fn owner_pid(&self) -> Option<i32> {
        let owner = self.words.at::<AtomicU64>(16).load(Ordering::Acquire);
        (owner != 0).then_some(owner as i32)
    }

    /// Every filled slot, in slot order. Slots claimed but not yet filled are left out.
    pub fn threads(&self) -> Vec<TrackedThread> {
        let used = self.count().min(self.capacity) as usize;
        let mut out = Vec::with_capacity(used);
        for slot in 0..used {
            let off = HEADER + slot * SLOT;
            let tid = self.words.at::<AtomicI32>(off).load(Ordering::Acquire);
            if tid == 0 {
                continue;
            }
            let state = ThreadState::from_raw(self.u32_at(off + 4).load(Ordering::Acquire));
            let index = self.u32_at(off + 8).load(Ordering::Acquire) as usize;
            out.push(TrackedThread {
                slot,
                index,
                tid,
                state,
            });
        }
        out
    }

    /// The processes of the launched tree other than the owner (forked, spawned, or
    /// exec'd from those), each once, in the order they recorded themselves; and whether
    /// more started than the list holds.
    pub fn processes(&self) -> (Vec<i32>, bool) {
        let area = HEADER + SLOT * self.capacity as usize;
        let n = self.u32_at(area).load(Ordering::Acquire) as usize;
        let mut out: Vec<i32> = Vec::new();
        for i in 0..n.min(FORK_SLOTS) {
            let pid = self
                .words
                .at::<AtomicI32>(area + 8 + 4 * i)
                .load(Ordering::Acquire);
            if pid > 0 && !out.contains(&pid) {
                out.push(pid);
            }
        }
        (out, n > FORK_SLOTS)
    }

    /// Says that autopin sets the threads' masks from now on (the `managed` word).
    pub fn set_managed(&self) {
        let area = HEADER + SLOT * self.capacity as usize;
        self.u32_at(area + 4).store(1, Ordering::Release);
    }

    /// Whether [`Registry::set_managed`] was called.
    pub fn managed(&self) -> bool {
        let area = HEADER + SLOT * self.capacity as usize;
        self.u32_at(area + 4).load(Ordering::Acquire) != 0
    }

    /// The threads still alive.
    pub fn alive(&self) -> Vec<TrackedThread> {
        self.threads()
            .into_iter()
            .filter(|t| t.state.is_alive())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_registry_has_header_and_no_threads() {
        let r = Registry::create(4).unwrap();
        let bytes = std::fs::read(r.path()).unwrap();
        assert_eq!(bytes.len(), 24 + 4 * 16 + 8 + 4 * 64);
        assert_eq!(&bytes[..8], b"ATOPREG1");
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 4);
        assert_eq!(r.count(), 0);
        assert!(!r.overflowed());
        assert_eq!(r.owner_pid(), None);
        assert!(r.threads().is_empty());
        let dir = r.path().parent().unwrap().to_path_buf();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        drop(r);
        assert!(!dir.exists(), "dropping removes the directory");
        assert!(Registry::create(0).is_err());
    }

    #[test]
    fn reads_slots_written_through_the_file() {
        // Write as the C library would, through a second, independent mapping (pwrite).
        use std::os::unix::fs::FileExt;
        let r = Registry::create(2).unwrap();
        let f = OpenOptions::new().write(true).open(r.path()).unwrap();
        f.write_at(&3u32.to_le_bytes(), 12).unwrap(); // count 3 > capacity 2
        f.write_at(&77u64.to_le_bytes(), 16).unwrap();
        let mut slot = Vec::new();
        for v in [
            77i32.to_le_bytes(),
            1u32.to_le_bytes(),
            0u32.to_le_bytes(),
            [0; 4],
        ] {
            slot.extend_from_slice(&v);
        }
        f.write_at(&slot, 24).unwrap();
        let mut slot1 = Vec::new();
        for v in [
            78i32.to_le_bytes(),
            4u32.to_le_bytes(),
            1u32.to_le_bytes(),
            [0; 4],
        ] {
            slot1.extend_from_slice(&v);
        }
        f.write_at(&slot1, 40).unwrap();
        assert_eq!(r.owner_pid(), Some(77));
        assert!(r.overflowed());
        let t = r.threads();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0],
            TrackedThread {
                slot: 0,
                index: 0,
                tid: 77,
                state: ThreadState::Alive
            }
        );
        assert_eq!(t[1].state, ThreadState::SkippedExited);
        assert_eq!(r.alive().len(), 1);
    }

    /// Creates 1000 short-lived threads, 4 at a time; every 3rd one ends by pthread_exit.
    const CHURN: &str = r#"
#include <pthread.h>
#include <stdio.h>
static void *body(void *arg) {
    long i = (long)arg;
    if (i % 3 == 0) pthread_exit(NULL);
    return NULL;
}
int main(void) {
    for (long i = 0; i < 1000; i += 4) {
        pthread_t t[4];
        for (int k = 0; k < 4; k++)
            if (pthread_create(&t[k], NULL, body, (void *)(i + k)) != 0) return 1;
        for (int k = 0; k < 4; k++) pthread_join(t[k], NULL);
    }
    printf("ok\n");
    return 0;
}
"#;

    /// Builds CHURN (cached by the testkit) and installs the preload library into `dir`.
    fn churn_setup(dir: &Path) -> Option<(PathBuf, PathBuf)> {
        let exe = autopin_testkit::build_c("churn", CHURN, &["-pthread"])
            .unwrap_or_else(|e| panic!("{e}"));
        let lib =
            autopin_preload::install_into(&dir.join("lib"), autopin_preload::PRELOAD_SO).unwrap();
        Some((exe, lib))
    }

    fn run_churn(exe: &Path, lib: &Path, reg: &Registry, extra: &[(&str, &str)]) -> u32 {
        let mut cmd = std::process::Command::new(exe);
        cmd.env("LD_PRELOAD", lib).env(REGISTRY_ENV, reg.path());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
        pid
    }

    #[test]
    fn preload_records_a_thousand_short_lived_threads() {
        let dir = tempfile::tempdir().unwrap();
        let Some((exe, lib)) = churn_setup(dir.path()) else {
            return;
        };
        let reg = Registry::create(1100).unwrap();
        let pid = run_churn(
            &exe,
            &lib,
            &reg,
            &[("AUTOPIN_CPUS", "0"), ("AUTOPIN_SKIP", "0x2")],
        );
        assert_eq!(reg.owner_pid(), Some(pid as i32));
        assert_eq!(reg.count(), 1001);
        assert!(!reg.overflowed());
        let threads = reg.threads();
        assert_eq!(threads.len(), 1001);
        assert_eq!(
            (threads[0].index, threads[0].tid, threads[0].state),
            (0, pid as i32, ThreadState::Alive)
        );
        let mut indexes: Vec<usize> = threads[1..].iter().map(|t| t.index).collect();
        indexes.sort_unstable();
        assert_eq!(indexes, (1..=1000).collect::<Vec<_>>());
        for t in &threads[1..] {
            // Bit 1 of the skip mask = the 2nd created thread = index 2.
            let want = if t.index == 2 {
                ThreadState::SkippedExited
            } else {
                ThreadState::Exited
            };
            assert_eq!(t.state, want, "thread index {}", t.index);
            assert_ne!(t.tid, 0);
        }
    }

    #[test]
    fn preload_flags_overflow_and_keeps_running() {
        let dir = tempfile::tempdir().unwrap();
        let Some((exe, lib)) = churn_setup(dir.path()) else {
            return;
        };
        let reg = Registry::create(10).unwrap();
        run_churn(&exe, &lib, &reg, &[]);
        assert_eq!(reg.count(), 1001);
        assert!(reg.overflowed());
        assert_eq!(reg.threads().len(), 10);
    }

    #[test]
    fn the_process_that_creates_threads_owns_the_registry() {
        // The shell forks churn and never creates a thread itself: churn must own it.
        let dir = tempfile::tempdir().unwrap();
        let Some((exe, lib)) = churn_setup(dir.path()) else {
            return;
        };
        let reg = Registry::create(2000).unwrap();
        let script = format!("{} && echo \"shell $$\"", exe.display());
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .env("LD_PRELOAD", &lib)
            .env(REGISTRY_ENV, reg.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        let shell: i32 = text
            .lines()
            .find_map(|l| l.strip_prefix("shell "))
            .unwrap()
            .parse()
            .unwrap();
        let owner = reg.owner_pid().unwrap();
        assert_ne!(owner, shell);
        assert_eq!(reg.count(), 1001);
        assert_eq!(reg.threads()[0].tid, owner);
    }

    /// Prints the main thread's CPUs before and after it creates a thread. `self CPU`: it
    /// sets its own CPUs to CPU first; `fork`: a child forked first does the same, before
    /// the parent.
    const MAIN_MASK: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void show(const char *when) {
    FILE *f = fopen("/proc/thread-self/status", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Cpus_allowed_list:", 18)) printf("%s%s", when, line + 18);
    if (f) fclose(f);
    fflush(stdout);
}
static void *body(void *arg) { return arg; }
static int one_thread(const char *before, const char *after) {
    pthread_t t;
    show(before);
    if (pthread_create(&t, NULL, body, NULL) != 0) return 1;
    pthread_join(t, NULL);
    show(after);
    return 0;
}
int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "self")) {
        cpu_set_t s;
        CPU_ZERO(&s);
        CPU_SET(atoi(argv[2]), &s);
        show("before:");
        if (sched_setaffinity(0, sizeof s, &s)) return 1;
        return one_thread("own:", "after:");
    }
    if (argc > 1 && !strcmp(argv[1], "fork")) {
        pid_t child = fork();
        if (child == 0)
            return one_thread("child-before:", "child-after:");
        if (child < 0 || waitpid(child, NULL, 0) != child) return 1;
    }
    return one_thread("before:", "after:");
}
"#;

    /// Until its first thread the main thread has every CPU of the list, then the first
    /// one; once autopin says it moves the threads (`managed`), the library leaves the main
    /// thread's mask alone, as it does a mask the program set itself. A child forked before
    /// any thread narrows its own main thread at its own first thread.
    #[test]
    fn the_main_thread_is_narrowed_at_its_first_thread_unless_autopin_moves_the_threads() {
        let allowed: Vec<u32> = autopin_topology::affinity::get(0).unwrap().iter().collect();
        autopin_testkit::require!(allowed.len() >= 2, "needs two CPUs");
        let (a, b) = (allowed[0], allowed[1]);
        let dir = tempfile::tempdir().unwrap();
        let exe = autopin_testkit::build_c("main_mask", MAIN_MASK, &["-pthread"])
            .unwrap_or_else(|e| panic!("{e}"));
        let lib =
            autopin_preload::install_into(&dir.path().join("lib"), autopin_preload::PRELOAD_SO)
                .unwrap();
        let run = |managed: bool, args: &[&str]| {
            let reg = Registry::create(8).unwrap();
            if managed {
                reg.set_managed();
            }
            assert_eq!(reg.managed(), managed);
            let out = std::process::Command::new(&exe)
                .args(args)
                .env("LD_PRELOAD", &lib)
                .env(REGISTRY_ENV, reg.path())
                .env("AUTOPIN_CPUS", format!("{b},{a}"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let both = if b == a + 1 {
            format!("{a}-{b}")
        } else {
            format!("{a},{b}")
        };
        assert_eq!(run(false, &[]), format!("before:\t{both}\nafter:\t{b}\n"));
        assert_eq!(run(true, &[]), format!("before:\t{both}\nafter:\t{both}\n"));
        assert_eq!(
            run(false, &["self", &a.to_string()]),
            format!("before:\t{both}\nown:\t{a}\nafter:\t{a}\n")
        );
        assert_eq!(
            run(false, &["fork"]),
            format!("child-before:\t{both}\nchild-after:\t{b}\nbefore:\t{both}\nafter:\t{b}\n")
        );
    }
}
