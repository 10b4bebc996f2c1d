//! The SQLite file. One table of records, each kept as JSON beside its key id and program
//! (inspectable with any SQLite client, exportable as is). The schema's version is SQLite's
//! `user_version`; each version's migration runs once, in a transaction. The file is
//! private (0600) in a private directory, in WAL mode with a busy timeout, so the ranks of a
//! node can read and write it at once.

use crate::key::DecisionKey;
use crate::record::Record;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema this build writes; a file of a newer one is left alone.
pub const SCHEMA_VERSION: i64 = 1;

/// The migration to each version, in order (index 0 takes an empty file to version 1).
const MIGRATIONS: [&str; 1] = ["CREATE TABLE decisions (
        id      TEXT PRIMARY KEY,
        program TEXT NOT NULL,
        record  TEXT NOT NULL,
        updated REAL NOT NULL
     );
     CREATE INDEX decisions_program ON decisions(program);"];

/// How long `autopin memory` waits for a database another process holds locked. A run
/// waits far less ([`Store::open_with_wait`], [`Store::set_busy_wait`]): its program must
/// not wait for the store.
pub const BUSY_WAIT: Duration = Duration::from_millis(1500);

/// Why the store cannot be used (the run goes on without it).
#[derive(Debug, Clone, thiserror::Error)]
pub enum MemoryError {
    #[error("{path}: locked by another process (a writer that holds it)")]
    Busy { path: String },
    #[error("{path}: read-only")]
    ReadOnly { path: String },
    #[error("{path}: the file system is full")]
    Full { path: String },
    #[error("{path}: not a decision store or damaged ({detail}); delete it to start afresh")]
    Corrupt { path: String, detail: String },
    #[error("{path}: written by a newer autopin (schema {found}, this one knows up to {SCHEMA_VERSION})")]
    NewerSchema { path: String, found: i64 },
    /// A path that cannot hold a store: a device (`/dev/null`, which SQLite would give a
    /// `/dev/null-journal`), a FIFO, a socket, a descriptor, a directory.
    #[error("{path}: {what}, not a file for the decision store: memory is off")]
    NotAFile { path: String, what: String },
    /// A record to keep that autopin could not have written ([`Record::check`]).
    #[error("{path}: not kept: {detail}")]
    Invalid { path: String, detail: String },
    /// A path the kernel's protected_symlinks or protected_regular rules would refuse
    /// (whatever the sysctls say): another user's link or file in a sticky directory.
    #[error("{path}: refused: {detail}")]
    Refused { path: String, detail: String },
    #[error("{path}: {detail}")]
    Other { path: String, detail: String },
}

impl MemoryError {
    /// The report's short name of the fault.
    pub fn kind(&self) -> &'static str {
        match self {
            MemoryError::Busy { .. } => "locked",
            MemoryError::ReadOnly { .. } => "read-only",
            MemoryError::Full { .. } => "full",
            MemoryError::Corrupt { .. } => "corrupt",
            MemoryError::NewerSchema { .. } => "newer schema",
            MemoryError::Refused { .. } => "refused",
            MemoryError::Invalid { .. } => "invalid",
            MemoryError::NotAFile { .. } => "off",
            MemoryError::Other { .. } => "error",
        }
    }
}

/// The default file: `$AUTOPIN_MEMORY`, else `$XDG_STATE_HOME/autopin/decisions.db`, else
/// `~/.local/state/autopin/decisions.db`. None without a home directory, or when
/// `AUTOPIN_MEMORY=off` (an admin's or a test suite's way to turn memory off).
pub fn default_path() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = var("AUTOPIN_MEMORY") {
        return (p.as_os_str() != "off").then_some(p);
    }
    let state = var("XDG_STATE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| h.join(".local/state")))?;
    Some(state.join("autopin").join("decisions.db"))
}

pub struct Store {
    conn: Connection,
    path: String,
    /// Why the store is only read (its file system is read-only or full): every write
    /// answers this instead of trying.
    read_only: Option<MemoryError>,
}

/// A store being opened on a thread of its own, so that SQLite's open (the file, its WAL
/// and lock files, the schema's version) runs beside other work of a program's start
/// instead of before it.
pub struct StoreOpening {
    path: PathBuf,
    /// How long the open waits for a lock another process holds.
    wait: Duration,
    thread: Option<std::thread::JoinHandle<Result<Store, MemoryError>>>,
}

impl StoreOpening {
    /// Starts opening the store at `path` ([`Store::open_with_wait`]); where no thread can
    /// be started, [`StoreOpening::finish`] opens it then.
    pub fn begin(path: &Path, wait: Duration) -> StoreOpening {
        let p = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("autopin-store".into())
            .spawn(move || Store::open_with_wait(&p, wait))
            .ok();
        StoreOpening {
            path: path.to_path_buf(),
            wait,
            thread,
        }
    }

    /// The file being opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The opened store, or why it could not be opened.
    pub fn finish(mut self) -> Result<Store, MemoryError> {
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(opened)) => opened,
            // The thread panicked (never expected) or none was started: open it here.
            _ => Store::open_with_wait(&self.path, self.wait),
        }
    }
}

impl Drop for StoreOpening {
    /// An opening not finished (memory turned out unused) still ends before its caller goes
    /// on: nothing of autopin's holds the file after it has said it is done.
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Store {
    /// Opens (creating when missing) the store at `path`, migrating an older schema; a
    /// lock another process holds is waited for up to [`BUSY_WAIT`].
    pub fn open(path: &Path) -> Result<Store, MemoryError> {
        Store::open_with_wait(path, BUSY_WAIT)
    }

    /// [`Store::open`], waiting up to `wait` for a lock another process holds, here and in
    /// every later call until [`Store::set_busy_wait`].
    pub fn open_with_wait(path: &Path, wait: Duration) -> Result<Store, MemoryError> {
        let shown = path.display().to_string();
        let other = |detail: String| MemoryError::Other {
            path: shown.clone(),
            detail,
        };
        // The store and its journal, WAL and lock files are written: another user's link or
        // file in a sticky directory is refused (root's import once turned a root-owned
        // file, reached through such a link, into a database). SQLite is given the resolved
        // path, so the journal lies beside the file that was checked.
        let resolved = resolve_store_path(path, &shown)?;
        let path = resolved.as_path();
        if let Some(what) = not_a_file(path) {
            return Err(MemoryError::NotAFile { path: shown, what });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| other(format!("cannot create {}: {e}", dir.display())))?;
            }
        }
        let existed = path.exists();
        // A new store, or an empty file made for it (`touch`), is made private.
        let new = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
        let writable = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(|e| classify(&shown, e))
        .and_then(|conn| {
            if new {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            }
            conn.busy_timeout(wait).map_err(|e| classify(&shown, e))?;
            let store = Store {
                conn,
                path: shown.clone(),
                read_only: None,
            };
            store.migrate()?;
            Ok(store)
        });
        match writable {
            Err(e) if existed => match file_system_fault(path, &shown) {
                // A WAL store cannot even be read where its lock file (-shm) cannot be
                // made: a read-only or full file system. Nobody can change it there
                // either, so it is read as an immutable file; writes say why not.
                Some(fault) => Store::immutable(path, &shown, fault).map_err(|_| e),
                None => Err(e),
            },
            other => other,
        }
    }

    /// The store read as a file that cannot change (no locks, no -shm), for a file system
    /// that `fault` says cannot be written; of this build's schema only.
    fn immutable(path: &Path, shown: &str, fault: MemoryError) -> Result<Store, MemoryError> {
        let mut uri = String::from("file:");
        uri.push_str(&uri_path(path));
        uri.push_str("?immutable=1");
        let conn = Connection::open_with_flags(
            &uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(shown, e))?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| classify(shown, e))?;
        if version != SCHEMA_VERSION {
            return Err(fault);
        }
        Ok(Store {
            conn,
            path: shown.to_string(),
            read_only: Some(fault),
        })
    }

    /// How long later calls wait for a lock another process holds.
    pub fn set_busy_wait(&self, wait: Duration) -> Result<(), MemoryError> {
        self.conn.busy_timeout(wait).map_err(|e| self.err(e))
    }

    /// Why nothing can be written where the store lies, when that is the case.
    fn writes_refused(&self) -> Result<(), MemoryError> {
        self.read_only.clone().map_or(Ok(()), Err)
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    fn err(&self, e: rusqlite::Error) -> MemoryError {
        classify(&self.path, e)
    }

    fn migrate(&self) -> Result<(), MemoryError> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if version > SCHEMA_VERSION {
            return Err(MemoryError::NewerSchema {
                path: self.path.clone(),
                found: version,
            });
        }
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        // WAL: readers never wait for a writer, and many ranks can share the file.
        let _ = self
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0));
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let to = i as i64 + 1;
            self.migrate_to(to, sql).map_err(|e| {
                let _ = self.conn.execute_batch("ROLLBACK");
                self.err(e)
            })?;
        }
        Ok(())
    }

    /// Runs one migration, unless another process (a rank beside this one, opening the new
    /// file at the same moment) ran it since the version was read: the version is read again
    /// under the write lock.
    fn migrate_to(&self, to: i64, sql: &str) -> rusqlite::Result<()> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let now: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if now < to {
            self.conn
                .execute_batch(&format!("{sql}; PRAGMA user_version = {to};"))?;
        }
        self.conn.execute_batch("COMMIT")
    }

    /// The record for `key`, if one is kept. (Not checked: see [`Record::check`], which a
    /// user of the record calls to say why one written by hand is not used.)
    pub fn lookup(&self, key: &DecisionKey) -> Result<Option<Record>, MemoryError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT record FROM decisions WHERE id = ?1",
                params![key.id()],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(text
            .and_then(|t| serde_json::from_str::<Record>(&t).ok())
            .filter(|r| r.key == *key))
    }

    /// Keeps `record` (replacing the one of the same key).
    pub fn put(&self, record: &Record) -> Result<(), MemoryError> {
        self.writes_refused()?;
        let text = serde_json::to_string(record).map_err(|e| MemoryError::Other {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        self.conn
            .execute(
                "INSERT INTO decisions (id, program, record, updated) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(id) DO UPDATE SET program = ?2, record = ?3, updated = ?4",
                params![record.id, record.key.program, text, record.updated],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Every record, most recently updated first (records this build cannot read are
    /// skipped).
    pub fn list(&self) -> Result<Vec<Record>, MemoryError> {
        let mut st = self
            .conn
            .prepare("SELECT record FROM decisions ORDER BY updated DESC, id")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let text = row.map_err(|e| self.err(e))?;
            if let Ok(r) = serde_json::from_str(&text) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Forgets the records of these key ids (which [`Record::selected_by`] chose from
    /// [`Store::list`]), in one transaction; returns how many.
    pub fn forget_ids(&mut self, ids: &[String]) -> Result<usize, MemoryError> {
        self.writes_refused()?;
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| classify(&path, e))?;
        let mut n = 0;
        for id in ids {
            n += tx
                .execute("DELETE FROM decisions WHERE id = ?1", params![id])
                .map_err(|e| classify(&path, e))?;
        }
        tx.commit().map_err(|e| classify(&path, e))?;
        Ok(n)
    }

    /// Forgets every record; returns how many.
    pub fn forget_all(&self) -> Result<usize, MemoryError> {
        self.writes_refused()?;
        self.conn
            .execute("DELETE FROM decisions", [])
            .map_err(|e| self.err(e))
    }

    /// Keeps each of `records` (an export from another store), in one transaction; none
    /// when one of them fails [`Record::check`].
    pub fn import(&mut self, records: &[Record]) -> Result<usize, MemoryError> {
        self.writes_refused()?;
        for (i, r) in records.iter().enumerate() {
            r.check().map_err(|why| MemoryError::Invalid {
                path: self.path.clone(),
                detail: format!("record {} (key {}): {why}", i + 1, r.key.id()),
            })?;
        }
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| classify(&path, e))?;
        for r in records {
            // The record's id is its key's (an export edited by hand may say otherwise).
            let r = &Record {
                id: r.key.id(),
                ..r.clone()
            };
            let text = serde_json::to_string(r).unwrap_or_default();
            tx.execute(
                "INSERT INTO decisions (id, program, record, updated) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(id) DO UPDATE SET program = ?2, record = ?3, updated = ?4",
                params![r.key.id(), r.key.program, text, r.updated],
            )
            .map_err(|e| classify(&path, e))?;
        }
        tx.commit().map_err(|e| classify(&path, e))?;
        Ok(records.len())
    }
}

/// `path` resolved by [`autopin_files::resolve_for_write`], and the names SQLite makes beside
/// it checked by the same rules.
fn resolve_store_path(path: &Path, shown: &str) -> Result<PathBuf, MemoryError> {
    let refused = |e: autopin_files::Refused| MemoryError::Refused {
        path: shown.to_string(),
        detail: e.to_string(),
    };
    let resolved = autopin_files::resolve_for_write(path)
        .map_err(refused)?
        .path;
    for suffix in ["-journal", "-wal", "-shm"] {
        let mut beside = resolved.clone().into_os_string();
        beside.push(suffix);
        autopin_files::check_may_write(Path::new(&beside)).map_err(refused)?;
    }
    Ok(resolved)
}

/// `path` as the path of a `file:` URI: every byte but unreserved ASCII and `/`
/// percent-encoded. (Bytes used to be pushed as Latin-1 characters, so a path with `é`
/// named another file, and a store on a read-only file system could not be read.)
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for b in path.as_os_str().as_encoded_bytes() {
        match *b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(*b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// What `path` (resolved) is, when it is there and not a regular file.
fn not_a_file(path: &Path) -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    // (`/dev/stdout` resolves to /proc/self/fd/1: whatever file that is, it is not one to
    // keep a database in.)
    if path.starts_with("/proc") {
        return Some("a process's descriptor or a file of /proc".into());
    }
    let kind = std::fs::metadata(path).ok()?.file_type();
    let what = if kind.is_file() {
        return None;
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Some(what.into())
}

/// The real cause of an error SQLite words vaguely ("unable to open database file",
/// "disk I/O error"), when one can be found at `path`.
fn cause(path: &Path) -> Option<MemoryError> {
    let shown = path.display().to_string();
    if let Some(what) = not_a_file(path) {
        return Some(MemoryError::NotAFile { path: shown, what });
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Some(MemoryError::Other {
            path: shown,
            detail: format!("its directory {} does not exist", dir.display()),
        });
    }
    if let Some(fault) = file_system_fault(path, &shown) {
        return Some(fault);
    }
    let access = |p: &Path, a| rustix::fs::access(p, a).err();
    let denied = if path.exists() {
        access(
            path,
            rustix::fs::Access::READ_OK | rustix::fs::Access::WRITE_OK,
        )
        .map(|e| format!("no permission to read and write it ({e})"))
    } else {
        access(
            dir,
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        )
        .map(|e| format!("no permission to make a file in {} ({e})", dir.display()))
    };
    denied.map(|detail| MemoryError::Other {
        path: shown,
        detail,
    })
}

/// A file system under `path` that cannot take a write: mounted read-only, or without a
/// free block.
fn file_system_fault(path: &Path, shown: &str) -> Option<MemoryError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    let fs = rustix::fs::statvfs(dir).ok()?;
    let path = shown.to_string();
    if fs.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY) {
        Some(MemoryError::ReadOnly { path })
    } else if fs.f_bavail == 0 {
        Some(MemoryError::Full { path })
    } else {
        None
    }
}

fn classify(path: &str, e: rusqlite::Error) -> MemoryError {
    if matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::CannotOpen | ErrorCode::SystemIoFailure | ErrorCode::DiskFull)
    ) {
        if let Some(real) = cause(Path::new(path)) {
            return real;
        }
    }
    let path = path.to_string();
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => MemoryError::Busy { path },
        Some(ErrorCode::ReadOnly) => MemoryError::ReadOnly { path },
        Some(ErrorCode::DiskFull) => MemoryError::Full { path },
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => MemoryError::Corrupt {
            path,
            detail: e.to_string(),
        },
        _ => MemoryError::Other {
            path,
            detail: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_opened_on_its_own_thread_is_the_store() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("d.db");
        drop(Store::open(&path).unwrap());
        let opening = StoreOpening::begin(&path, Duration::from_millis(100));
        assert_eq!(opening.path(), path.as_path());
        let store = opening.finish().unwrap();
        assert_eq!(store.path(), path.display().to_string());
        assert!(store.lookup(&key("0-1")).unwrap().is_none());
        // Not finished: its thread is joined when it goes, and the file is free again.
        drop(StoreOpening::begin(&path, Duration::from_millis(100)));
        drop(store);
        assert!(
            !d.path().join("d.db-wal").exists(),
            "every connection closed"
        );
        // A file that is not a store: the opening's error is the open's.
        std::fs::write(d.path().join("x.db"), "not sqlite, not empty").unwrap();
        let e = StoreOpening::begin(&d.path().join("x.db"), Duration::from_millis(100))
            .finish()
            .err()
            .expect("not a store");
        assert!(e.to_string().contains("x.db"), "{e}");
    }
    use crate::record::{Outcome, RememberedPinning};

    fn key(cpus: &str) -> DecisionKey {
        DecisionKey {
            program: "/opt/app/bin/solver".into(),
            program_id: "0123".into(),
            args: None,
            machine: "m1".into(),
            cpus: cpus.into(),
            threads: "2".into(),
            objective: "default".into(),
            share: None,
        }
    }

    fn record(cpus: &str, at: f64) -> Record {
        let key = key(cpus);
        Record {
            id: key.id(),
            key,
            pinning: RememberedPinning {
                label: "0,1".into(),
                cpus: Some(vec![0, 1]),
                team: None,
            },
            runner_up: Some(RememberedPinning {
                label: "unpinned (OS decides)".into(),
                cpus: None,
                team: None,
            }),
            rate: Some(2.0e9),
            unit: "instructions/s".into(),
            outcome: Outcome::New,
            uses: 1,
            created: at,
            updated: at,
            phases: Vec::new(),
            source: Some("openmp".into()),
            busy: Some(vec![0]),
            team_trial: None,
        }
    }

    #[test]
    fn ranks_creating_the_store_at_the_same_moment_all_open_it() {
        // Each opens a file that does not exist yet: they all find schema version 0, and
        // only one may create the table.
        for round in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(format!("d{round}.db"));
            let start = std::sync::Barrier::new(8);
            let results: Vec<Result<(), String>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            Store::open(&path).map(|_| ()).map_err(|e| e.to_string())
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(
                results.iter().all(Result::is_ok),
                "round {round}: {results:?}"
            );
        }
    }

    #[test]
    fn records_are_kept_found_listed_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/autopin/decisions.db");
        let s = Store::open(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(s.lookup(&key("0-1")).unwrap(), None);
        s.put(&record("0-1", 1.0)).unwrap();
        s.put(&record("0-3", 2.0)).unwrap();
        assert_eq!(s.lookup(&key("0-1")).unwrap(), Some(record("0-1", 1.0)));
        let mut again = record("0-1", 3.0);
        again.outcome = Outcome::Confirmed;
        again.uses = 2;
        s.put(&again).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        let all = s.list().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], again, "most recent first");
        let mut s = s;
        let ids: Vec<String> = all.iter().map(|r| r.id.clone()).collect();
        assert_eq!(s.forget_ids(&ids[..1]).unwrap(), 1);
        assert_eq!(s.list().unwrap().len(), 1);
        assert_eq!(s.forget_ids(&ids).unwrap(), 1);
        assert!(s.list().unwrap().is_empty());
    }

    #[test]
    fn an_empty_file_made_for_the_store_becomes_private_and_a_device_is_no_store() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("touched.db");
        std::fs::write(&p, "").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        Store::open(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A store someone shared on purpose keeps its mode.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        Store::open(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        for (path, what) in [
            ("/dev/null", "a character device"),
            ("/dev/stdout", "descriptor"),
        ] {
            let e = Store::open(Path::new(path)).err().unwrap();
            assert!(matches!(e, MemoryError::NotAFile { .. }), "{e}");
            assert!(e.to_string().contains(what), "{e}");
        }
        let e = Store::open(dir.path()).err().unwrap();
        assert!(e.to_string().contains("a directory, not a file"), "{e}");
    }

    #[test]
    fn a_path_becomes_a_uri_byte_for_byte() {
        assert_eq!(uri_path(Path::new("/a/b-c_d.db")), "/a/b-c_d.db");
        assert_eq!(
            uri_path(Path::new("/t/dé #1?%.db")),
            "/t/d%C3%A9%20%231%3F%25.db"
        );
        use std::os::unix::ffi::OsStrExt;
        let raw = std::ffi::OsStr::from_bytes(b"/t/\xff.db");
        assert_eq!(uri_path(Path::new(raw)), "/t/%FF.db");
    }

    #[test]
    fn faults_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, vec![0x5a; 8192]).unwrap();
        assert!(matches!(
            Store::open(&junk),
            Err(MemoryError::Corrupt { .. })
        ));
        let newer = dir.path().join("newer.db");
        {
            let c = Connection::open(&newer).unwrap();
            c.execute_batch("PRAGMA user_version = 99;").unwrap();
        }
        let e = Store::open(&newer).err().unwrap();
        assert!(
            matches!(e, MemoryError::NewerSchema { found: 99, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("newer autopin"), "{e}");
    }

    #[test]
    fn a_store_written_before_sources_and_busy_cpus_were_kept_still_opens_and_is_used() {
        // A version-1 file as an earlier build left it: its record knows neither the
        // objective's source nor the busy CPUs.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let mut old = serde_json::to_value(record("0-1", 1.0)).unwrap();
        let fields = old.as_object_mut().unwrap();
        fields.remove("source");
        fields.remove("busy");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(&format!("{}; PRAGMA user_version = 1;", MIGRATIONS[0]))
                .unwrap();
            c.execute(
                "INSERT INTO decisions (id, program, record, updated) VALUES (?1, ?2, ?3, 1.0)",
                params![key("0-1").id(), "/opt/app/bin/solver", old.to_string()],
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let found = s.lookup(&key("0-1")).unwrap().expect("the old record");
        assert_eq!(found.source, None);
        assert_eq!(found.busy, None, "not watched is not the same as idle");
        assert_eq!(found.pinning.cpus, Some(vec![0, 1]));
        // Written back by this build, with what it now knows.
        s.put(&record("0-1", 2.0)).unwrap();
        let again = s.lookup(&key("0-1")).unwrap().unwrap();
        assert_eq!(again.busy, Some(vec![0]));
        assert_eq!(again.source.as_deref(), Some("openmp"));
    }

    #[test]
    fn an_export_imports_into_another_store() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::open(&dir.path().join("a.db")).unwrap();
        a.put(&record("0-1", 1.0)).unwrap();
        let exported = serde_json::to_string(&a.list().unwrap()).unwrap();
        let mut b = Store::open(&dir.path().join("b.db")).unwrap();
        let records: Vec<Record> = serde_json::from_str(&exported).unwrap();
        assert_eq!(b.import(&records).unwrap(), 1);
        assert_eq!(b.lookup(&key("0-1")).unwrap(), Some(record("0-1", 1.0)));
    }
}
