//! The heartbeat back channel: a small shared file the engine creates and the program maps
//! (through `include/autopin.h`) to report progress and phases.
//!
//! Layout, little-endian, offsets in bytes. The heartbeat part is the first 128 bytes (the
//! struct uses 120 and the rest is zero padding so the C side may round its mapping up);
//! `include/autopin.h` maps only those. The file is [`FILE_SIZE`] bytes: after the heartbeat
//! part the preload library counts completed OpenMP work (see [`OmpProgress`]):
//!
//! | offset | field | meaning |
//! |---|---|---|
//! | 0 | `u64 magic` | `0x3142485450504f41` ("AOPPTHB1" read as little-endian bytes) |
//! | 8 | `u32 version` | 1 |
//! | 12 | `u32 reserved` | 0 |
//! | 16 | `u64 beats` | work units done; the program adds atomically |
//! | 24 | `u64 phase_seq` | seqlock: odd while the writer changes `phase` |
//! | 32 | `char phase[64]` | current phase name, NUL-terminated |
//! | 96 | `u64 reserved2[3]` | 0 |
//! | 128 | `u64 omp_magic` | `0x3130504d4f504f41` ("AOPOMP01") once an OpenMP runtime call was counted |
//! | 136 | `u32 omp_slots` | number of per-thread slots |
//! | 140 | `u32 omp_used` | threads that took a slot (every other slot from 1 on; slot 0 is shared by threads that found none left) |
//! | 144 | `u32 omp_runtime` | 1 libgomp (`GOMP_*` entry points), 2 libomp/libiomp5 (`__kmpc_*` entry points) |
//! | 152 | `u32 team_want` | written by the engine: the team size wanted from the next outermost region on (0: the program's own) |
//! | 156 | `u32 team_applied` | written by the library: the want in force |
//! | 160 | `u32 team_flags` | written by the library: what it saw of the program ([`TeamFlags`]) |
//! | 164 | `u32 team_own` | written by the library: the team size the program's regions get on their own |
//! | 168 | `u32 team_starts` | written by the library: outermost parallel regions begun so far |
//! | 172 | `u32 team_named` | written by the library: the largest team size the program named itself (omp_set_num_threads, num_threads clauses) |
//! | 192 | `slot[omp_slots]` | 64 bytes each: `u64 regions, chunks, barriers, tasks, other, team` |
//!
//! A file of only 128 bytes (an older engine) still works for heartbeats; the preload
//! library then counts nothing.

use crate::shared_words::SharedWords;
use autopin_objective::progress::{
    HeartbeatState, OmpCounts, OmpProgress, OmpRuntime, TeamFlags, TeamState,
};
use autopin_objective::PerfError;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};

pub const MAGIC: u64 = 0x3142_4854_5050_4f41;
pub const VERSION: u32 = 1;
/// Size of the file the engine creates: the heartbeat part and the OpenMP progress part.
pub const FILE_SIZE: usize = 16384;
/// Size of the heartbeat part (what include/autopin.h maps).
pub const HEARTBEAT_SIZE: usize = 128;
pub const OMP_MAGIC: u64 = 0x3130_504d_4f50_4f41;
pub const OFF_OMP: usize = 128;
pub const OFF_OMP_SLOTS: usize = 192;
pub const OMP_SLOT_SIZE: usize = 64;
pub const OFF_TEAM_WANT: usize = 152;
pub const OFF_TEAM_APPLIED: usize = 156;
pub const OFF_TEAM_FLAGS: usize = 160;
pub const OFF_TEAM_OWN: usize = 164;
pub const OFF_TEAM_STARTS: usize = 168;
pub const OFF_TEAM_NAMED: usize = 172;
/// Per-thread slots that fit in the file.
pub const OMP_SLOTS: usize = (FILE_SIZE - OFF_OMP_SLOTS) / OMP_SLOT_SIZE;
/// Size of the C struct (`sizeof(struct autopin_heartbeat)`).
pub const STRUCT_SIZE: usize = 120;
pub const OFF_MAGIC: usize = 0;
pub const OFF_VERSION: usize = 8;
pub const OFF_BEATS: usize = 16;
pub const OFF_PHASE_SEQ: usize = 24;
pub const OFF_PHASE: usize = 32;
pub const PHASE_LEN: usize = 64;
/// Environment variable through which the engine tells the program the file's path.
pub const ENV_VAR: &str = "AUTOPIN_HEARTBEAT";

/// A mapping of the shared file, with atomic access to its fields.
#[derive(Debug)]
struct Mapping {
    map: SharedWords,
}

impl Mapping {
    fn new(file: &File, path: &Path) -> Result<Mapping, PerfError> {
        let len = file
            .metadata()
            .map_err(|e| PerfError::io(format!("reading {}", path.display()), e))?
            .len();
        if (len as usize) < STRUCT_SIZE {
            return Err(PerfError::BadFile {
                path: path.to_path_buf(),
                msg: format!("heartbeat file is {len} bytes, expected at least {STRUCT_SIZE}"),
            });
        }
        let map = SharedWords::map(file)
            .map_err(|e| PerfError::io(format!("mapping {}", path.display()), e))?;
        Ok(Mapping { map })
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        self.map.at(off)
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        self.map.at(off)
    }

    fn byte_at(&self, off: usize) -> &AtomicU8 {
        self.map.at(off)
    }
}

/// The engine's end: creates the file and reads it.
#[derive(Debug)]
pub struct HeartbeatChannel {
    map: Mapping,
    path: PathBuf,
}

impl HeartbeatChannel {
    /// Create a fresh, initialised channel file in `dir` (mode 0600, removed on drop).
    pub fn create(dir: &Path) -> Result<(HeartbeatChannel, PathBuf), PerfError> {
        Self::create_at(&Self::fresh_path(dir))
    }

    /// A name in `dir` no channel has (this process's PID, a counter and the clock), for
    /// [`HeartbeatChannel::create_at`]: known before the file exists, so a guardian can be
    /// told it first.
    pub fn fresh_path(dir: &Path) -> PathBuf {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        dir.join(format!(
            "autopin-heartbeat-{}-{n}-{nanos:x}",
            std::process::id()
        ))
    }

    /// Create the channel file `path`, which must not exist (mode 0600, removed on drop).
    pub fn create_at(path: &Path) -> Result<(HeartbeatChannel, PathBuf), PerfError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| PerfError::io(format!("creating heartbeat file {}", path.display()), e))?;
        let map = match SharedWords::map_allocated(&file, FILE_SIZE) {
            Ok(map) => Mapping { map },
            Err(e) => {
                // Half made (a full filesystem): not left behind.
                let _ = std::fs::remove_file(&path);
                return Err(PerfError::io(format!("filling {}", path.display()), e));
            }
        };
        map.u32_at(OFF_VERSION).store(VERSION, Ordering::Relaxed);
        // Magic last: a reader that sees it sees an initialised file.
        map.u64_at(OFF_MAGIC).store(MAGIC, Ordering::Release);
        Ok((
            HeartbeatChannel {
                map,
                path: path.clone(),
            },
            path,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read beats and phase; retries while the writer is mid-change.
    pub fn read(&self) -> HeartbeatState {
        read_state(&self.map)
    }

    /// Asks the preload library for teams of `threads` threads from the program's next
    /// outermost parallel region on (0: the program's own count). The library applies it
    /// when its rule allows ([`TeamFlags::mid_run_allowed`]); `read().omp.team.applied`
    /// says when it is in force.
    pub fn want_team(&self, threads: u32) {
        self.map
            .u32_at(OFF_TEAM_WANT)
            .store(threads, Ordering::Release);
    }
}

impl Drop for HeartbeatChannel {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Sums the per-thread OpenMP slots. Each slot has one writer that stores whole aligned
/// words, so every load sees a value that writer stored; the sum is a consistent lower bound.
fn read_omp(m: &Mapping) -> Option<OmpProgress> {
    if m.len() < FILE_SIZE || m.u64_at(OFF_OMP).load(Ordering::Acquire) != OMP_MAGIC {
        return None;
    }
    let slots = (m.u32_at(OFF_OMP + 8).load(Ordering::Relaxed) as usize).min(OMP_SLOTS);
    let used = m.u32_at(OFF_OMP + 12).load(Ordering::Relaxed);
    let runtime = OmpRuntime::from_code(m.u32_at(OFF_OMP + 16).load(Ordering::Relaxed));
    let mut c = OmpCounts::default();
    for i in 0..slots {
        let base = OFF_OMP_SLOTS + i * OMP_SLOT_SIZE;
        let f = |k: usize| m.u64_at(base + 8 * k).load(Ordering::Relaxed);
        c.regions = c.regions.wrapping_add(f(0));
        c.chunks = c.chunks.wrapping_add(f(1));
        c.barriers = c.barriers.wrapping_add(f(2));
        c.tasks = c.tasks.wrapping_add(f(3));
        c.other = c.other.wrapping_add(f(4));
        c.team = c.team.wrapping_add(f(5));
    }
    let word = |off: usize| m.u32_at(off).load(Ordering::Acquire);
    Some(OmpProgress {
        runtime,
        threads: used,
        counts: c,
        team: TeamState {
            want: word(OFF_TEAM_WANT),
            applied: word(OFF_TEAM_APPLIED),
            flags: TeamFlags(word(OFF_TEAM_FLAGS)),
            own: word(OFF_TEAM_OWN),
            starts: word(OFF_TEAM_STARTS),
            named: word(OFF_TEAM_NAMED),
        },
    })
}

fn read_state(m: &Mapping) -> HeartbeatState {
    let omp = read_omp(m);
    let seq = m.u64_at(OFF_PHASE_SEQ);
    let beats = m.u64_at(OFF_BEATS).load(Ordering::Acquire);
    let mut buf = [0u8; PHASE_LEN];
    let mut last_even = 0;
    for attempt in 0..10_000 {
        let s1 = seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            if attempt > 100 {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
            continue;
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = m.byte_at(OFF_PHASE + i).load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        let s2 = seq.load(Ordering::Relaxed);
        if s1 == s2 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(PHASE_LEN);
            let phase = (end > 0).then(|| String::from_utf8_lossy(&buf[..end]).into_owned());
            return HeartbeatState {
                beats,
                phase,
                phase_seq: s1,
                omp,
            };
        }
        last_even = s2 & !1;
    }
    // The writer never left its critical section long enough (or died inside it).
    HeartbeatState {
        beats,
        phase: None,
        phase_seq: last_even,
        omp,
    }
}

/// The program's end, for Rust programs and tests (C programs use include/autopin.h).
#[derive(Debug)]
pub struct HeartbeatWriter {
    map: Mapping,
}

impl HeartbeatWriter {
    /// Map an existing channel file; checks magic and version.
    pub fn open(path: &Path) -> Result<HeartbeatWriter, PerfError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| PerfError::io(format!("opening heartbeat file {}", path.display()), e))?;
        let map = Mapping::new(&file, path)?;
        let magic = map.u64_at(OFF_MAGIC).load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(PerfError::BadFile {
                path: path.to_path_buf(),
                msg: format!(
                    "not an autopin heartbeat file (magic {magic:#x}, expected {MAGIC:#x})"
                ),
            });
        }
        let v = map.u32_at(OFF_VERSION).load(Ordering::Relaxed);
        if v != VERSION {
            return Err(PerfError::BadFile {
                path: path.to_path_buf(),
                msg: format!("heartbeat version {v}, this autopin understands {VERSION}"),
            });
        }
        Ok(HeartbeatWriter { map })
    }

    pub fn beat(&self, n: u64) {
        self.map.u64_at(OFF_BEATS).fetch_add(n, Ordering::Release);
    }

    /// Set the phase name (truncated to 63 bytes at a character boundary).
    pub fn set_phase(&self, name: &str) {
        let mut end = name.len().min(PHASE_LEN - 1);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let seq = self.map.u64_at(OFF_PHASE_SEQ);
        seq.fetch_add(1, Ordering::Acquire); // odd: writing
        fence(Ordering::Release);
        for (i, b) in name.as_bytes()[..end]
            .iter()
            .chain(std::iter::once(&0))
            .enumerate()
        {
            self.map.byte_at(OFF_PHASE + i).store(*b, Ordering::Relaxed);
        }
        seq.fetch_add(1, Ordering::Release); // even: stable
    }

    pub fn read(&self) -> HeartbeatState {
        read_state(&self.map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn layout_round_trip_through_a_second_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let (ch, path) = HeartbeatChannel::create(dir.path()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), FILE_SIZE);
        assert_eq!(&bytes[0..8], &MAGIC.to_le_bytes());
        assert_eq!(&bytes[0..8], b"AOPPTHB1");
        assert_eq!(&bytes[8..12], &1u32.to_le_bytes());
        assert!(bytes[12..].iter().all(|&b| b == 0));
        assert_eq!(
            ch.read(),
            HeartbeatState {
                beats: 0,
                phase: None,
                phase_seq: 0,
                omp: None,
            }
        );

        let w = HeartbeatWriter::open(&path).unwrap();
        w.beat(5);
        w.beat(2);
        w.set_phase("solve");
        let s = ch.read();
        assert_eq!(
            (s.beats, s.phase.as_deref(), s.phase_seq),
            (7, Some("solve"), 2)
        );
        // Bytes at the documented offsets, as a C writer would see them.
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[16..24], &7u64.to_le_bytes());
        assert_eq!(&bytes[24..32], &2u64.to_le_bytes());
        assert_eq!(&bytes[32..38], b"solve\0");
        w.set_phase(&"x".repeat(100));
        assert_eq!(ch.read().phase.unwrap().len(), 63);
        w.set_phase("");
        assert_eq!(ch.read().phase, None);
        assert_eq!(ch.read().phase_seq, 6);
        drop(ch);
        assert!(!path.exists(), "the engine removes its channel file");
    }

    #[test]
    fn raw_bytes_written_like_c_are_read() {
        // A writer that only knows the layout (as include/autopin.h does) pokes bytes with pwrite.
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let (ch, path) = HeartbeatChannel::create(dir.path()).unwrap();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_at(&41u64.to_le_bytes(), 16).unwrap();
        f.write_at(b"init\0", 32).unwrap();
        f.write_at(&4u64.to_le_bytes(), 24).unwrap();
        assert_eq!(
            ch.read(),
            HeartbeatState {
                beats: 41,
                phase: Some("init".into()),
                phase_seq: 4,
                omp: None,
            }
        );
    }

    #[test]
    fn openmp_slots_written_like_the_preload_library_are_summed() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let (ch, path) = HeartbeatChannel::create(dir.path()).unwrap();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        // Counts without the magic are not yet valid.
        f.write_at(&5u64.to_le_bytes(), OFF_OMP_SLOTS as u64)
            .unwrap();
        assert_eq!(ch.read().omp, None);
        f.write_at(&(OMP_SLOTS as u32).to_le_bytes(), 136).unwrap();
        f.write_at(&2u32.to_le_bytes(), 140).unwrap();
        f.write_at(&1u32.to_le_bytes(), 144).unwrap();
        // slot 1: 3 chunks, 7 barriers; slot 2: 2 tasks; the last slot: 1 other.
        let slot = |i: usize, k: usize| (OFF_OMP_SLOTS + i * OMP_SLOT_SIZE + 8 * k) as u64;
        f.write_at(&3u64.to_le_bytes(), slot(1, 1)).unwrap();
        f.write_at(&7u64.to_le_bytes(), slot(1, 2)).unwrap();
        f.write_at(&2u64.to_le_bytes(), slot(2, 3)).unwrap();
        f.write_at(&1u64.to_le_bytes(), slot(OMP_SLOTS - 1, 4))
            .unwrap();
        f.write_at(&OMP_MAGIC.to_le_bytes(), 128).unwrap();
        let omp = ch.read().omp.expect("magic set");
        assert_eq!(omp.runtime, OmpRuntime::Gnu);
        assert_eq!(omp.threads, 2);
        assert_eq!(
            omp.counts,
            OmpCounts {
                regions: 5,
                chunks: 3,
                barriers: 7,
                tasks: 2,
                other: 1,
                team: 0
            }
        );
        assert_eq!(omp.counts.total(), 18);
        assert_eq!(&std::fs::read(&path).unwrap()[128..136], b"AOPOMP01");
    }

    #[test]
    fn torn_phase_is_never_returned() {
        let dir = tempfile::tempdir().unwrap();
        let (ch, path) = HeartbeatChannel::create(dir.path()).unwrap();
        let w = Arc::new(HeartbeatWriter::open(&path).unwrap());
        let w2 = w.clone();
        let h = std::thread::spawn(move || {
            for i in 0..20_000 {
                w2.set_phase(if i % 2 == 0 {
                    "aaaaaaaaaaaaaaaaaaaaaaaa"
                } else {
                    "bbbbbbbb"
                });
                w2.beat(1);
            }
        });
        let mut seen = 0;
        while !h.is_finished() {
            let s = ch.read();
            if let Some(p) = s.phase {
                assert!(
                    p == "aaaaaaaaaaaaaaaaaaaaaaaa" || p == "bbbbbbbb",
                    "torn read: {p}"
                );
                assert_eq!(s.phase_seq & 1, 0);
                seen += 1;
            }
        }
        h.join().unwrap();
        assert_eq!(ch.read().beats, 20_000);
        assert!(seen > 0);
    }

    #[test]
    fn wrong_files_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("short");
        std::fs::write(&p, [0u8; 16]).unwrap();
        assert!(HeartbeatWriter::open(&p)
            .unwrap_err()
            .to_string()
            .contains("expected at least 120"));
        std::fs::write(&p, [0u8; 128]).unwrap();
        assert!(HeartbeatWriter::open(&p)
            .unwrap_err()
            .to_string()
            .contains("not an autopin heartbeat file"));
        assert!(HeartbeatChannel::create(&dir.path().join("missing")).is_err());
    }
}
