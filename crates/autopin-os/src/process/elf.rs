//! Finding the program to run and telling whether LD_PRELOAD can reach it: a program is
//! dynamically linked when its ELF program headers contain PT_INTERP (the dynamic loader,
//! which is what honours LD_PRELOAD). Static and static-pie binaries have none.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const PT_INTERP: u32 = 3;

/// How a program gets loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Linkage {
    /// ELF with a dynamic loader: LD_PRELOAD works.
    Dynamic,
    /// ELF without PT_INTERP: LD_PRELOAD is ignored.
    Static,
    /// `#!` script; the linkage is the interpreter's.
    Script {
        interpreter: PathBuf,
        linkage: Box<Linkage>,
    },
    /// Not ELF and not a script (the kernel may still run it via binfmt_misc).
    Unknown,
}

impl Linkage {
    /// True when the preload library will be loaded into the program.
    pub fn preload_works(&self) -> bool {
        match self {
            Linkage::Dynamic | Linkage::Unknown => true,
            Linkage::Static => false,
            Linkage::Script { linkage, .. } => linkage.preload_works(),
        }
    }
}

/// Resolves `program` like execvp: names with a '/' are used as they are, others are
/// searched in `path` (colon-separated; empty entries mean the current directory).
/// Returns the first match that is a regular file with an execute bit, else the first
/// non-executable match (so the caller can report "permission denied"), else NotFound.
pub fn resolve_program(program: &OsStr, path: Option<&OsStr>) -> io::Result<PathBuf> {
    if program.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "empty program name",
        ));
    }
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return if p.exists() {
            Ok(p)
        } else {
            Err(io::Error::from(io::ErrorKind::NotFound))
        };
    }
    let default = OsString::from("/usr/local/bin:/usr/bin:/bin");
    let path = path.unwrap_or(&default);
    let mut non_exec = None;
    for dir in path.as_bytes().split(|b| *b == b':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let cand = dir.join(program);
        match cand.metadata() {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => return Ok(cand),
            Ok(m) if m.is_file() => {
                non_exec.get_or_insert(cand);
            }
            _ => {}
        }
    }
    non_exec.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

/// Reads enough of `path` to classify it.
pub fn linkage(path: &Path) -> io::Result<Linkage> {
    linkage_depth(path, 0)
}

fn linkage_depth(path: &Path, depth: u32) -> io::Result<Linkage> {
    let mut f = File::open(path)?;
    let mut head = [0u8; 256];
    let n = read_up_to(&mut f, &mut head)?;
    let head = &head[..n];
    if head.starts_with(b"#!") {
        let line = head[2..].split(|b| *b == b'\n').next().unwrap_or(&[]);
        let interp = line
            .split(|b| *b == b' ' || *b == b'\t')
            .find(|w| !w.is_empty())
            .map(|w| PathBuf::from(OsStr::from_bytes(w)));
        let Some(interpreter) = interp else {
            return Ok(Linkage::Unknown);
        };
        // The kernel allows nested interpreters only a few levels deep; so do we.
        let inner = if depth < 4 {
            linkage_depth(&interpreter, depth + 1).unwrap_or(Linkage::Unknown)
        } else {
            Linkage::Unknown
        };
        return Ok(Linkage::Script {
            interpreter,
            linkage: Box::new(inner),
        });
    }
    if !head.starts_with(b"\x7fELF") || head.len() < 64 {
        return Ok(Linkage::Unknown);
    }
    let is64 = match head[4] {
        1 => false,
        2 => true,
        _ => return Ok(Linkage::Unknown),
    };
    let le = match head[5] {
        1 => true,
        2 => false,
        _ => return Ok(Linkage::Unknown),
    };
    let u16_at = |o: usize| {
        let b = [head[o], head[o + 1]];
        if le {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    let u32_at = |b: &[u8], o: usize| {
        let b = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let (phoff, phentsize, phnum) = if is64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[32..40]);
        let off = if le {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        };
        (off, u16_at(54), u16_at(56))
    } else {
        (u64::from(u32_at(head, 28)), u16_at(42), u16_at(44))
    };
    if phentsize < 4 || phnum == 0 {
        return Ok(Linkage::Static);
    }
    let mut table = vec![0u8; usize::from(phentsize) * usize::from(phnum)];
    f.seek(SeekFrom::Start(phoff))?;
    if read_up_to(&mut f, &mut table)? < table.len() {
        return Ok(Linkage::Unknown);
    }
    let dynamic = table
        .chunks_exact(usize::from(phentsize))
        .any(|ph| u32_at(ph, 0) == PT_INTERP);
    Ok(if dynamic {
        Linkage::Dynamic
    } else {
        Linkage::Static
    })
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn sh_is_dynamic_and_scripts_follow_their_interpreter() {
        let sh = resolve_program(OsStr::new("sh"), Some(OsStr::new("/usr/bin:/bin"))).unwrap();
        assert_eq!(linkage(&sh).unwrap(), Linkage::Dynamic);
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        fs::write(&script, "#!/bin/sh -e\necho hi\n").unwrap();
        let l = linkage(&script).unwrap();
        assert!(
            matches!(&l, Linkage::Script { interpreter, .. } if interpreter == Path::new("/bin/sh"))
        );
        assert!(l.preload_works());
    }

    #[test]
    fn hand_made_static_elf_is_static() {
        // A minimal ELF64 header with one PT_LOAD program header and no PT_INTERP.
        let mut elf = vec![0u8; 64 + 56];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[32..40].copy_from_slice(&64u64.to_le_bytes());
        elf[54..56].copy_from_slice(&56u16.to_le_bytes());
        elf[56..58].copy_from_slice(&1u16.to_le_bytes());
        elf[64..68].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("static");
        fs::write(&p, &elf).unwrap();
        assert_eq!(linkage(&p).unwrap(), Linkage::Static);
        assert!(!Linkage::Static.preload_works());
        // The same with PT_INTERP is dynamic.
        elf[64..68].copy_from_slice(&3u32.to_le_bytes());
        fs::write(&p, &elf).unwrap();
        assert_eq!(linkage(&p).unwrap(), Linkage::Dynamic);
        fs::write(&p, b"plain text").unwrap();
        assert_eq!(linkage(&p).unwrap(), Linkage::Unknown);
    }

    #[test]
    fn resolve_reports_missing_and_non_executable() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("noexec");
        fs::write(&f, "x").unwrap();
        let path = dir.path().as_os_str();
        assert_eq!(
            resolve_program(OsStr::new("noexec"), Some(path)).unwrap(),
            f
        );
        assert_eq!(
            resolve_program(OsStr::new("definitely-not-here"), Some(path))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            resolve_program(OsStr::new("./nope/x"), None)
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }
}
