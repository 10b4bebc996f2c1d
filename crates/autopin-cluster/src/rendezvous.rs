//! The local ranks of one step meet in a node-local directory and exchange one message per
//! round: each rank writes `ROUND.RANK` (atomically: write, then rename) and waits until every
//! rank still in the roster has written its own, has died (its pid is gone) or the round's
//! time is up. Files only — no sockets, nothing that can leak past the node.
//!
//! Ranks that die or never come are dropped for the rest of the step. Files left by a crashed
//! earlier run with the same key never block: a rank first removes every file under its own
//! rank number, and a join message from a process that no longer exists counts as not there.
//! Directories of other steps whose ranks all crashed are swept at join ([`sweep_stale`]).
//!
//! [`settle`] is the protocol's pure core (what to do with what was seen); [`Rendezvous`]
//! adds the file system and the clock.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One rank's message in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    pub rank: usize,
    pub pid: u32,
    pub body: serde_json::Value,
}

/// What a waiting rank knows about another rank's message in the current round.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Message(Msg),
    /// Not written yet (or written by a process that no longer exists, before it joined).
    Absent,
    /// The rank's process is gone and left no message for this round.
    Dead,
}

/// A finished round: the messages of the ranks that took part, in rank order, and the ranks
/// dropped in this round with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    pub messages: Vec<Msg>,
    pub dropped: Vec<(usize, &'static str)>,
}

/// The protocol's core: None while some rank of the roster may still write (absent and the
/// round's time not up); otherwise who took part and who is dropped.
pub fn settle(
    roster: &BTreeSet<usize>,
    seen: &BTreeMap<usize, Seen>,
    timed_out: bool,
) -> Option<Settled> {
    let mut messages = Vec::new();
    let mut dropped = Vec::new();
    for r in roster {
        match seen.get(r).unwrap_or(&Seen::Absent) {
            Seen::Message(m) => messages.push(m.clone()),
            Seen::Dead => dropped.push((*r, "its process ended")),
            Seen::Absent if timed_out => dropped.push((*r, "it did not answer in time")),
            Seen::Absent => return None,
        }
    }
    Some(Settled { messages, dropped })
}

#[derive(Debug, Clone)]
pub struct RendezvousConfig {
    /// How long the first meeting waits for ranks that have not started yet.
    pub join_timeout: Duration,
    /// How long a later round waits for a rank that is alive but silent.
    pub round_timeout: Duration,
    /// How often the directory is looked at while waiting.
    pub poll: Duration,
    /// A rendezvous directory of another step whose processes are all gone is removed at
    /// join once nothing in it has changed for this long.
    pub stale_after: Duration,
}

impl Default for RendezvousConfig {
    fn default() -> Self {
        RendezvousConfig {
            join_timeout: Duration::from_secs(10),
            round_timeout: Duration::from_secs(10),
            poll: Duration::from_millis(5),
            stale_after: Duration::from_secs(60),
        }
    }
}

/// The start of every rendezvous directory's name of this user.
fn directory_prefix() -> String {
    format!("autopin-rdv-{}-", rustix::process::geteuid().as_raw())
}

/// The node-local directory for a step key: under /dev/shm when usable (memory, node-local by
/// construction), else under `$TMPDIR`.
pub fn directory_for(key: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly())
    {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    base.join(format!("{}{key}", directory_prefix()))
}

/// What one file of a rendezvous directory says about its writer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Entry {
    /// A round message (`ROUND.RANK`, or `.tmp-ROUND.RANK` not yet renamed) with its pid.
    Message { pid: u32 },
    /// `left.RANK`: that rank is done.
    Left,
    /// A round file that cannot be read as a message (cut short by a crash).
    Unreadable,
    /// Anything else: not ours.
    Foreign,
}

/// Classifies a file of a rendezvous directory by its name and contents.
pub fn classify(name: &str, contents: Option<&[u8]>) -> Entry {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let round_file = |s: &str| {
        s.split_once('.')
            .is_some_and(|(a, b)| digits(a) && digits(b))
    };
    if name.strip_prefix("left.").is_some_and(digits) {
        return Entry::Left;
    }
    if !round_file(name.strip_prefix(".tmp-").unwrap_or(name)) {
        return Entry::Foreign;
    }
    match contents.and_then(|b| serde_json::from_slice::<Msg>(b).ok()) {
        Some(m) => Entry::Message { pid: m.pid },
        None => Entry::Unreadable,
    }
}

/// The sweep's pure core: a directory is stale when it holds only our own kinds of files, at
/// least one message, and every process that wrote a message is gone. Anything foreign, any
/// live writer, or nothing to go by keeps it.
pub fn is_stale(entries: &[Entry], alive: impl Fn(u32) -> bool) -> bool {
    let mut pids = entries.iter().filter_map(|e| match e {
        Entry::Message { pid } => Some(*pid),
        _ => None,
    });
    !entries.contains(&Entry::Foreign) && pids.clone().next().is_some() && pids.all(|p| !alive(p))
}

/// Removes the rendezvous directories of this user in `base`, other than `keep`, that crashed
/// steps left behind: only directories named like ours, holding only our files, untouched for
/// `min_age`, whose writers are all dead (see [`is_stale`]). Returns what it removed.
pub fn sweep_stale(base: &Path, keep: &Path, min_age: Duration) -> Vec<PathBuf> {
    let prefix = directory_prefix();
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(base) else {
        return removed;
    };
    for e in rd.flatten() {
        let path = e.path();
        let ours = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix));
        // symlink_metadata: a link named like ours is never followed.
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        if !ours || !is_dir || path == keep {
            continue;
        }
        let mut entries = Vec::new();
        let mut newest = std::time::SystemTime::UNIX_EPOCH;
        let Ok(files) = std::fs::read_dir(&path) else {
            continue;
        };
        for f in files.flatten() {
            let meta = f.metadata().ok();
            let name = f.file_name().to_string_lossy().to_string();
            if let Some(t) = meta.as_ref().and_then(|m| m.modified().ok()) {
                newest = newest.max(t);
            }
            let entry = if meta.is_some_and(|m| m.is_file()) {
                classify(&name, std::fs::read(f.path()).ok().as_deref())
            } else {
                Entry::Foreign
            };
            entries.push(entry);
        }
        let quiet = newest.elapsed().is_ok_and(|age| age >= min_age);
        if quiet && is_stale(&entries, process_exists) && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// True while the process runs (a zombie, dead but not yet reaped by its launcher, is gone).
fn process_exists(pid: u32) -> bool {
    let exists = rustix::process::Pid::from_raw(pid as i32).is_some_and(|p| {
        match rustix::process::test_kill_process(p) {
            Ok(()) => true,
            Err(e) => e == rustix::io::Errno::PERM,
        }
    });
    exists
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        })
}

/// One rank's membership in a step's rendezvous.
pub struct Rendezvous {
    dir: PathBuf,
    rank: usize,
    pid: u32,
    cfg: RendezvousConfig,
    /// Ranks still taking part (this one included) and their pids.
    members: BTreeMap<usize, u32>,
    round: u64,
    /// Every rank dropped so far, with the reason.
    pub dropped: Vec<(usize, String)>,
}

impl Rendezvous {
    /// Joins the step's rendezvous in `dir` as `rank` of `size` and waits (up to the join
    /// timeout) for the others. Returns the join messages of everyone who came.
    pub fn join(
        dir: &Path,
        rank: usize,
        size: usize,
        cfg: RendezvousConfig,
        body: serde_json::Value,
    ) -> std::io::Result<(Rendezvous, Vec<Msg>)> {
        // Directories of earlier steps whose ranks all crashed would pile up otherwise.
        if let Some(base) = dir.parent() {
            sweep_stale(base, dir, cfg.stale_after);
        }
        std::fs::create_dir_all(dir)?;
        // Files under our rank number are from an earlier process (one rank, one process).
        let suffix = format!(".{rank}");
        for e in std::fs::read_dir(dir)?.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(&suffix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let mut rv = Rendezvous {
            dir: dir.to_path_buf(),
            rank,
            pid: std::process::id(),
            cfg,
            members: (0..size).map(|r| (r, 0)).collect(),
            round: 0,
            dropped: Vec::new(),
        };
        let settled = rv.round_with(body, rv.cfg.join_timeout)?;
        for m in &settled.messages {
            rv.members.insert(m.rank, m.pid);
        }
        Ok((rv, settled.messages))
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks still taking part, this one included.
    pub fn roster(&self) -> Vec<usize> {
        self.members.keys().copied().collect()
    }

    /// One round: publish `body`, wait for the others, return everyone's messages.
    pub fn exchange(&mut self, body: serde_json::Value) -> std::io::Result<Settled> {
        let t = self.cfg.round_timeout;
        self.round_with(body, t)
    }

    fn round_with(
        &mut self,
        body: serde_json::Value,
        timeout: Duration,
    ) -> std::io::Result<Settled> {
        let round = self.round;
        self.round += 1;
        let me = Msg {
            rank: self.rank,
            pid: self.pid,
            body,
        };
        let path = self.dir.join(format!("{round}.{}", self.rank));
        let tmp = self.dir.join(format!(".tmp-{round}.{}", self.rank));
        std::fs::write(
            &tmp,
            serde_json::to_vec(&me).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, &path)?;
        let roster: BTreeSet<usize> = self.members.keys().copied().collect();
        let deadline = Instant::now() + timeout;
        let settled = loop {
            let seen: BTreeMap<usize, Seen> =
                roster.iter().map(|&r| (r, self.look(round, r))).collect();
            if let Some(s) = settle(&roster, &seen, Instant::now() >= deadline) {
                break s;
            }
            std::thread::sleep(self.cfg.poll);
        };
        for (r, why) in &settled.dropped {
            self.members.remove(r);
            self.dropped.push((*r, why.to_string()));
        }
        Ok(settled)
    }

    fn look(&self, round: u64, rank: usize) -> Seen {
        let expected = self.members.get(&rank).copied().unwrap_or(0);
        let path = self.dir.join(format!("{round}.{rank}"));
        let msg: Option<Msg> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match msg {
            // The join round does not know pids yet: a message from a process that is gone
            // is a leftover of an earlier run (or a rank that died at once): not there.
            Some(m) if expected == 0 => {
                if m.pid == self.pid || process_exists(m.pid) {
                    Seen::Message(m)
                } else {
                    Seen::Absent
                }
            }
            Some(m) if m.pid == expected => Seen::Message(m),
            _ if expected != 0 && !process_exists(expected) => Seen::Dead,
            _ => Seen::Absent,
        }
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        // Our older rounds go now; the last round stays (a slower rank may still be reading
        // it). We mark that we left; the last rank to leave (all others left or died)
        // removes the directory with everything in it.
        let suffix = format!(".{}", self.rank);
        let last = format!("{}.{}", self.round.saturating_sub(1), self.rank);
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if name.ends_with(&suffix) && name != last && !name.starts_with("left") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let _ = std::fs::write(self.dir.join(format!("left.{}", self.rank)), b"");
        let everyone_gone = self.members.iter().all(|(&r, &pid)| {
            r == self.rank
                || self.dir.join(format!("left.{r}")).exists()
                || (pid != 0 && !process_exists(pid))
        });
        if everyone_gone {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(rank: usize) -> Msg {
        Msg {
            rank,
            pid: 1,
            body: json!(rank),
        }
    }

    #[test]
    fn settle_waits_for_absent_ranks_until_the_deadline() {
        let roster: BTreeSet<usize> = [0, 1, 2].into();
        let mut seen = BTreeMap::new();
        seen.insert(0, Seen::Message(msg(0)));
        seen.insert(1, Seen::Absent);
        seen.insert(2, Seen::Dead);
        assert_eq!(settle(&roster, &seen, false), None);
        let s = settle(&roster, &seen, true).unwrap();
        assert_eq!(s.messages, vec![msg(0)]);
        assert_eq!(
            s.dropped,
            vec![(1, "it did not answer in time"), (2, "its process ended")]
        );
        seen.insert(1, Seen::Message(msg(1)));
        let s = settle(&roster, &seen, false).unwrap();
        assert_eq!(s.messages.len(), 2);
        assert_eq!(s.dropped, vec![(2, "its process ended")]);
    }

    fn cfg(ms: u64) -> RendezvousConfig {
        RendezvousConfig {
            join_timeout: Duration::from_millis(ms),
            round_timeout: Duration::from_millis(ms),
            poll: Duration::from_millis(1),
            stale_after: Duration::ZERO,
        }
    }

    fn dead_pid() -> u32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    }

    #[test]
    fn classify_and_is_stale_only_condemn_our_files_from_dead_writers() {
        let m = |pid: u32| {
            serde_json::to_vec(&Msg {
                rank: 0,
                pid,
                body: json!(1),
            })
            .unwrap()
        };
        assert_eq!(classify("3.1", Some(&m(7))), Entry::Message { pid: 7 });
        assert_eq!(classify(".tmp-3.1", Some(&m(7))), Entry::Message { pid: 7 });
        assert_eq!(classify("left.2", None), Entry::Left);
        assert_eq!(classify("3.1", Some(b"{\"ra")), Entry::Unreadable);
        for foreign in ["notes.txt", "3.x", "left.", ".tmp-3", "3.1.bak"] {
            assert_eq!(classify(foreign, Some(&m(7))), Entry::Foreign, "{foreign}");
        }
        let dead = |_| false;
        let msg = |pid| Entry::Message { pid };
        assert!(is_stale(&[msg(5), Entry::Left, Entry::Unreadable], dead));
        assert!(!is_stale(&[msg(5), msg(6)], |p| p == 6), "one writer alive");
        assert!(!is_stale(&[msg(5), Entry::Foreign], dead), "not only ours");
        assert!(
            !is_stale(&[Entry::Left, Entry::Unreadable], dead),
            "no pid to go by"
        );
        assert!(!is_stale(&[], dead), "empty: a step may be starting");
    }

    #[test]
    fn joining_sweeps_stale_directories_of_crashed_steps_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let prefix = directory_prefix();
        let dead = dead_pid();
        let alive = std::process::id();
        let write = |dir: &str, name: &str, pid: u32| {
            let d = tmp.path().join(dir);
            std::fs::create_dir_all(&d).unwrap();
            let m = Msg {
                rank: 0,
                pid,
                body: json!("old"),
            };
            std::fs::write(d.join(name), serde_json::to_vec(&m).unwrap()).unwrap();
        };
        let crashed = format!("{prefix}slurm-1.0-n1");
        write(&crashed, "0.0", dead);
        write(&crashed, "4.1", dead);
        std::fs::write(tmp.path().join(&crashed).join("left.1"), b"").unwrap();
        let running = format!("{prefix}slurm-2.0-n1");
        write(&running, "0.0", dead);
        write(&running, "0.1", alive);
        let foreign = format!("{prefix}slurm-3.0-n1");
        write(&foreign, "0.0", dead);
        std::fs::write(tmp.path().join(&foreign).join("data.csv"), b"1,2").unwrap();
        let empty = format!("{prefix}slurm-4.0-n1");
        std::fs::create_dir(tmp.path().join(&empty)).unwrap();
        let other_name = "someone-elses-dir";
        write(other_name, "0.0", dead);
        // A link named like ours is not followed, let alone removed.
        let target = tmp.path().join("target");
        write("target", "0.0", dead);
        std::os::unix::fs::symlink(&target, tmp.path().join(format!("{prefix}link"))).unwrap();

        let me = tmp.path().join(format!("{prefix}slurm-5.0-n1"));
        let (rv, _) = Rendezvous::join(&me, 0, 1, cfg(100), json!("me")).unwrap();
        assert!(
            !tmp.path().join(&crashed).exists(),
            "the crashed step's directory stays"
        );
        for kept in [&running, &foreign, &empty, other_name, "target"] {
            assert!(tmp.path().join(kept).exists(), "{kept} was removed");
        }
        assert!(target.join("0.0").exists());
        drop(rv);

        // Untouched for less than stale_after: kept (a step's ranks may be between rounds).
        write(&crashed, "0.0", dead);
        let mut c = cfg(100);
        c.stale_after = Duration::from_secs(3600);
        let (rv, _) = Rendezvous::join(&me, 0, 1, c, json!("me")).unwrap();
        assert!(tmp.path().join(&crashed).exists());
        drop(rv);
    }

    #[test]
    fn threads_meet_and_exchange_in_rounds() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("step");
        let handles: Vec<_> = (0..3)
            .map(|r| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let (mut rv, joined) =
                        Rendezvous::join(&dir, r, 3, cfg(5000), json!(r)).unwrap();
                    let mut seen = vec![joined.len()];
                    for round in 0..5 {
                        let s = rv.exchange(json!(round * 10 + r)).unwrap();
                        let bodies: Vec<u64> = s
                            .messages
                            .iter()
                            .map(|m| m.body.as_u64().unwrap())
                            .collect();
                        assert_eq!(
                            bodies,
                            vec![
                                round as u64 * 10,
                                round as u64 * 10 + 1,
                                round as u64 * 10 + 2
                            ]
                        );
                        seen.push(s.messages.len());
                    }
                    seen
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), vec![3; 6]);
        }
        // The last rank to leave removed the directory.
        assert!(!dir.exists());
    }

    #[test]
    fn a_rank_that_never_comes_is_dropped_after_the_join_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let (mut rv, joined) =
            Rendezvous::join(tmp.path(), 0, 2, cfg(200), json!("hello")).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert_eq!(joined.len(), 1);
        assert_eq!(rv.roster(), vec![0]);
        assert_eq!(
            rv.dropped,
            vec![(1, "it did not answer in time".to_string())]
        );
        // Later rounds no longer wait for it.
        let t = Instant::now();
        assert_eq!(rv.exchange(json!(1)).unwrap().messages.len(), 1);
        assert!(t.elapsed() < Duration::from_millis(150));
    }

    #[test]
    fn stale_files_of_a_crashed_step_do_not_block() {
        let tmp = tempfile::tempdir().unwrap();
        // A crashed earlier run left join and round files for both ranks, from a pid that
        // no longer exists.
        let dead = dead_pid();
        for name in ["0.0", "0.1", "1.0", "1.1", "2.1"] {
            let m = Msg {
                rank: name.ends_with('1') as usize,
                pid: dead,
                body: json!("old"),
            };
            std::fs::write(tmp.path().join(name), serde_json::to_vec(&m).unwrap()).unwrap();
        }
        let dir = tmp.path().to_path_buf();
        let other = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let (mut rv, joined) = Rendezvous::join(&dir, 1, 2, cfg(5000), json!("new1")).unwrap();
            let s = rv.exchange(json!("r1")).unwrap();
            (joined, s)
        });
        let (mut rv, joined) =
            Rendezvous::join(tmp.path(), 0, 2, cfg(5000), json!("new0")).unwrap();
        // The new rank 1 was waited for (the stale 0.1 did not count as its join)...
        let bodies: Vec<_> = joined.iter().map(|m| m.body.clone()).collect();
        assert_eq!(bodies, vec![json!("new0"), json!("new1")]);
        // ...and its round messages are the new ones.
        let s = rv.exchange(json!("r0")).unwrap();
        assert_eq!(s.messages[1].body, json!("r1"));
        let (j1, s1) = other.join().unwrap();
        assert_eq!(j1.len(), 2);
        assert_eq!(s1.messages[0].body, json!("r0"));
    }

    #[test]
    fn a_rank_that_dies_is_dropped_without_waiting_for_the_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        // A child process plays rank 1: it joins (we write its join file under its pid),
        // then exits before round 1.
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        let m = Msg {
            rank: 1,
            pid: child.id(),
            body: json!("child"),
        };
        std::fs::write(tmp.path().join("0.1"), serde_json::to_vec(&m).unwrap()).unwrap();
        let (mut rv, joined) =
            Rendezvous::join(tmp.path(), 0, 2, cfg(60_000), json!("me")).unwrap();
        assert_eq!(joined.len(), 2);
        child.wait().unwrap();
        let t = Instant::now();
        let s = rv.exchange(json!(1)).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(s.messages.len(), 1);
        assert_eq!(s.dropped, vec![(1, "its process ended")]);
        assert_eq!(rv.roster(), vec![0]);
    }
}
