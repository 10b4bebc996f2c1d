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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
