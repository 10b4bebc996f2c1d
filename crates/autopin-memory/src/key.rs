//! What a decision is valid for. Two runs share a decision only when every field agrees;
//! anything different is a miss (a rebuilt program, another node type, a narrower cgroup,
//! another thread count or objective, another rank layout).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionKey {
    /// The program's resolved path.
    pub program: String,
    /// The program file's content hash ([`program_identity`]).
    pub program_id: String,
    /// The arguments, when decisions are kept per argument list (`--memory-key args`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// A fingerprint of the machine as autopin reads it (model, packages, caches, NUMA).
    pub machine: String,
    /// The CPUs the run may use (cgroup and affinity), as a CPU list.
    pub cpus: String,
    /// The planned thread count, or "auto" (threads counted at run time).
    pub threads: String,
    /// The objective as asked for ("default" when autopin chooses).
    pub objective: String,
    /// Under Slurm/MPI: this rank's share of the node (e.g. "rank 1 of 2 on the node").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<String>,
}

impl DecisionKey {
    /// A short stable id of the whole key (16 hex digits of its SHA-256).
    pub fn id(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        hex(&Sha256::digest(text.as_bytes()))[..16].to_string()
    }
}

/// A fingerprint of text lines (the machine's summary): 16 hex digits of their SHA-256.
pub fn fingerprint(lines: &[String]) -> String {
    let mut h = Sha256::new();
    for l in lines {
        h.update(l.as_bytes());
        h.update(b"\n");
    }
    hex(&h.finalize())[..16].to_string()
}

/// Files up to this size are hashed whole; larger ones by their size, their first and
/// last 4 MiB (a rebuilt binary differs there too), so a 1 GB executable costs no second.
const WHOLE_FILE_LIMIT: u64 = 64 << 20;
const EDGE: u64 = 4 << 20;

/// The content identity of the program file: 16 hex digits of a SHA-256 over its bytes.
pub fn program_identity(path: &Path) -> std::io::Result<String> {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut take = |f: &mut std::fs::File, n: u64, h: &mut Sha256| -> std::io::Result<()> {
        let mut left = n;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let got = f.read(&mut buf[..want])?;
            if got == 0 {
                break;
            }
            h.update(&buf[..got]);
            left -= got as u64;
        }
        Ok(())
    };
    if len <= WHOLE_FILE_LIMIT {
        take(&mut f, len, &mut h)?;
    } else {
        h.update(len.to_le_bytes());
        take(&mut f, EDGE, &mut h)?;
        f.seek(SeekFrom::Start(len - EDGE))?;
        take(&mut f, EDGE, &mut h)?;
    }
    Ok(hex(&h.finalize())[..16].to_string())
}

/// Files below this size are hashed at each run: reading a kept identity costs about as
/// much.
const KEPT_FROM: u64 = 4 << 20;

/// At most this many programs' identities are kept (a file that grew past it starts again).
const KEPT_MAX: usize = 256;

/// [`program_identity`], kept in `kept` (a file of autopin's own, None: not kept) for a
/// program of 4 MiB or more, by its path, device, inode, size and change time: hashing 64 MiB
/// takes 40–160 ms (with and without the CPU's SHA instructions) before every start. A file
/// written, replaced, renamed over or made anew changes its change time or its inode, which
/// no user can set back, so an identity found under the same stamp is the same content.
pub fn program_identity_kept(path: &Path, kept: Option<&Path>) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    let Some(kept) = kept.filter(|_| meta.is_file() && meta.size() >= KEPT_FROM) else {
        return program_identity(path);
    };
    let name = path.display().to_string();
    let stamp = format!(
        "dev {} ino {} size {} ctime {}.{:09}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.ctime(),
        meta.ctime_nsec()
    );
    let mut ids: std::collections::BTreeMap<String, (String, String)> =
        autopin_files::read_own_kept(kept)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
    if let Some((s, id)) = ids.get(&name) {
        if *s == stamp {
            return Ok(id.clone());
        }
    }
    let id = program_identity(path)?;
    if ids.len() >= KEPT_MAX {
        ids.clear();
    }
    ids.insert(name, (stamp, id.clone()));
    // A cache: one that cannot be written is hashed around next time.
    if let Ok(text) = serde_json::to_vec(&ids) {
        let _ = autopin_files::keep_private(kept, &text);
    }
    Ok(id)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_programs_identity_is_kept_until_its_file_changes() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let prog = d.path().join("big");
        let kept = d.path().join("ids.json");
        let mut f = std::fs::File::create(&prog).unwrap();
        f.write_all(&vec![7u8; (KEPT_FROM as usize) + 10]).unwrap();
        drop(f);
        let id = program_identity_kept(&prog, Some(&kept)).unwrap();
        assert_eq!(id, program_identity(&prog).unwrap());
        assert!(kept.is_file(), "kept");
        // Kept: an identity planted under the same stamp is what comes back (the file was
        // not hashed again).
        let text = std::fs::read_to_string(&kept).unwrap();
        std::fs::write(&kept, text.replace(&id, "feedfeedfeedfeed")).unwrap();
        assert_eq!(
            program_identity_kept(&prog, Some(&kept)).unwrap(),
            "feedfeedfeedfeed"
        );
        // Written again (same size): another change time, hashed again.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut f = std::fs::OpenOptions::new().write(true).open(&prog).unwrap();
        f.write_all(b"rebuilt").unwrap();
        drop(f);
        let again = program_identity_kept(&prog, Some(&kept)).unwrap();
        assert_eq!(again, program_identity(&prog).unwrap());
        assert_ne!(again, id);
        // A kept file others may write is not believed.
        let text = std::fs::read_to_string(&kept).unwrap();
        std::fs::write(&kept, text.replace(&again, "feedfeedfeedfeed")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(program_identity_kept(&prog, Some(&kept)).unwrap(), again);
        // A small program is hashed every time, nothing kept for it.
        let small = d.path().join("small");
        std::fs::write(&small, b"tiny").unwrap();
        let other = d.path().join("other.json");
        assert_eq!(
            program_identity_kept(&small, Some(&other)).unwrap(),
            program_identity(&small).unwrap()
        );
        assert!(!other.exists());
    }

    fn key() -> DecisionKey {
        DecisionKey {
            program: "/bin/prog".into(),
            program_id: "abc".into(),
            args: None,
            machine: "m".into(),
            cpus: "0-3".into(),
            threads: "4".into(),
            objective: "default".into(),
            share: None,
        }
    }

    #[test]
    fn every_field_changes_the_id() {
        let base = key().id();
        assert_eq!(base.len(), 16);
        assert_eq!(key().id(), base, "stable");
        let mut k = key();
        k.cpus = "0-1".into();
        assert_ne!(k.id(), base);
        let mut k = key();
        k.threads = "auto".into();
        assert_ne!(k.id(), base);
        let mut k = key();
        k.args = Some(vec!["-x".into()]);
        assert_ne!(k.id(), base);
        let mut k = key();
        k.share = Some("rank 0 of 2".into());
        assert_ne!(k.id(), base);
    }

    #[test]
    fn a_changed_file_has_another_identity() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prog");
        std::fs::write(&p, b"one build").unwrap();
        let a = program_identity(&p).unwrap();
        assert_eq!(program_identity(&p).unwrap(), a);
        std::fs::write(&p, b"another build").unwrap();
        assert_ne!(program_identity(&p).unwrap(), a);
        assert!(program_identity(&dir.path().join("missing")).is_err());
    }
}
