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
const PT_TLS: u32 = 7;

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
    Ok(match program_header_types(&mut f, head)? {
        None => Linkage::Unknown,
        Some(types) if types.contains(&PT_INTERP) => Linkage::Dynamic,
        Some(_) => Linkage::Static,
    })
}

/// The `p_type` of every program header of the ELF file `f` whose first bytes are `head`
/// (None: not an ELF file this reads, or a table cut short).
fn program_header_types(f: &mut File, head: &[u8]) -> io::Result<Option<Vec<u32>>> {
    let Some(id) = ElfIdent::of(head) else {
        return Ok(None);
    };
    // (every field below lies in the 64 bytes `of` requires)
    let field = |o: usize, n: usize| id.uint(head, o, n).unwrap_or_default();
    let (phoff, phentsize, phnum) = if id.is64 {
        (field(32, 8), field(54, 2), field(56, 2))
    } else {
        (field(28, 4), field(42, 2), field(44, 2))
    };
    let (phentsize, phnum) = (phentsize as usize, phnum as usize);
    if phentsize < 4 || phnum == 0 {
        return Ok(Some(Vec::new()));
    }
    let mut table = vec![0u8; phentsize * phnum];
    f.seek(SeekFrom::Start(phoff))?;
    if read_up_to(f, &mut table)? < table.len() {
        return Ok(None);
    }
    Ok(Some(
        table
            .chunks_exact(phentsize)
            .map(|ph| id.uint(ph, 0, 4).unwrap_or_default() as u32)
            .collect(),
    ))
}

/// An ELF file's word size and byte order, read from its first bytes.
#[derive(Debug, Clone, Copy)]
struct ElfIdent {
    is64: bool,
    le: bool,
}

impl ElfIdent {
    /// None: not ELF, shorter than an ELF header (64 bytes), or a class or byte order this
    /// does not read.
    fn of(head: &[u8]) -> Option<ElfIdent> {
        if !head.starts_with(b"\x7fELF") || head.len() < 64 {
            return None;
        }
        let is64 = match head[4] {
            1 => false,
            2 => true,
            _ => return None,
        };
        let le = match head[5] {
            1 => true,
            2 => false,
            _ => return None,
        };
        Some(ElfIdent { is64, le })
    }

    /// The `n`-byte unsigned field at offset `o` of `b`, in the file's byte order (None
    /// where `b` ends before it).
    fn uint(self, b: &[u8], o: usize, n: usize) -> Option<u64> {
        let s = b.get(o..o.checked_add(n)?)?;
        let mut v = 0u64;
        for i in 0..n {
            let byte = if self.le { s[n - 1 - i] } else { s[i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    }
}

/// Whether the ELF file at `path` has thread-local data of its own (a PT_TLS segment):
/// `__thread` variables, C++ `thread_local`, or OpenMP threadprivate data as GCC compiles
/// it, whose values persist between parallel regions only while the team keeps its size.
/// False for files that are not ELF.
pub fn has_thread_local_data(path: &Path) -> io::Result<bool> {
    let mut f = File::open(path)?;
    let mut head = [0u8; 256];
    let n = read_up_to(&mut f, &mut head)?;
    Ok(program_header_types(&mut f, &head[..n])?.is_some_and(|t| t.contains(&PT_TLS)))
}

/// The libraries an ELF program names in DT_NEEDED (its direct dependencies, e.g.
/// "libgomp.so.1"), read through the section headers (SHT_DYNAMIC and its string table).
/// Empty for non-ELF files, static programs and stripped section tables; scripts are not
/// followed (their interpreter's needs say nothing about the script).
pub fn needed_libraries(path: &Path) -> io::Result<Vec<String>> {
    // Only the header, the section headers, the dynamic section and its string table are
    // read, at their offsets: reading the whole file (libgromacs.so is 18 MB) cost every
    // `autopin run` of GROMACS some 40 ms of CPU, 2% of a 2 s run beside it.
    let file = File::open(path)?;
    let read_at = |offset: usize, len: usize| -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        // (A length no ELF file has is refused, not allocated.)
        if len > MAX_ELF_PART {
            return None;
        }
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, offset as u64).ok()?;
        Some(buf)
    };
    Ok(needed_in(read_at).unwrap_or_default())
}

/// The most bytes one part of an ELF file (its section headers, a dynamic section, a string
/// table) is read as.
const MAX_ELF_PART: usize = 64 << 20;

/// The libraries an ELF program loads, its own DT_NEEDED first and then, breadth first,
/// those of each library as found in `dirs` (the dynamic loader's search order without
/// ld.so.cache and RUNPATH: `LD_LIBRARY_PATH` and the system directories, see
/// [`library_dirs`]), until `enough` says a name is the one looked for or `limit` libraries
/// were read. What a program links through a library of its own counts: GROMACS's `gmx` and
/// LAMMPS's `lmp` name only libgromacs and liblammps, which name libgomp. The C runtime's
/// libraries are not read (they load no OpenMP runtime, and libc alone is 2 MB).
pub fn linked_libraries(
    path: &Path,
    dirs: &[PathBuf],
    mut enough: impl FnMut(&str) -> bool,
    limit: usize,
) -> io::Result<Vec<String>> {
    const RUNTIME: [&str; 8] = [
        "libc.so",
        "libm.so",
        "libpthread.so",
        "libdl.so",
        "librt.so",
        "libgcc_s.so",
        "libstdc++.so",
        "ld-linux",
    ];
    let mut names = needed_libraries(path)?;
    let mut read = 0;
    let mut next = 0;
    while next < names.len() {
        let name = names[next].clone();
        next += 1;
        if enough(&name) {
            break;
        }
        if read >= limit || RUNTIME.iter().any(|r| name.starts_with(r)) || name.contains('/') {
            continue;
        }
        let Some(file) = dirs.iter().map(|d| d.join(&name)).find(|f| f.is_file()) else {
            continue;
        };
        read += 1;
        for n in needed_libraries(&file).unwrap_or_default() {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    Ok(names)
}

/// Where [`linked_libraries`] looks: the directories of `LD_LIBRARY_PATH` (as given), then
/// the multiarch and plain system library directories.
pub fn library_dirs(ld_library_path: Option<&OsStr>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ld_library_path
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| p.is_absolute())
                .collect()
        })
        .unwrap_or_default();
    let multiarch = format!("{}-linux-gnu", std::env::consts::ARCH);
    for d in ["/lib", "/usr/lib"] {
        dirs.push(Path::new(d).join(&multiarch));
    }
    for d in ["/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

/// DT_NEEDED names of an ELF image in memory; None when it is not a well-formed ELF.
#[cfg(test)]
fn parse_needed(b: &[u8]) -> Option<Vec<String>> {
    needed_in(|o, n| b.get(o..o.checked_add(n)?).map(<[u8]>::to_vec))
}

/// DT_NEEDED of an ELF file whose bytes `read(offset, len)` gives (None when they are not
/// there): through the section headers, SHT_DYNAMIC and its string table.
fn needed_in(read: impl Fn(usize, usize) -> Option<Vec<u8>>) -> Option<Vec<String>> {
    const SHT_DYNAMIC: u32 = 6;
    const DT_NEEDED: u64 = 1;
    let header = read(0, 64)?;
    let id = ElfIdent::of(&header)?;
    let get = |b: &[u8], o: usize, n: usize| id.uint(b, o, n);
    let is64 = id.is64;
    let word = if is64 { 8 } else { 4 };
    let (shoff, shentsize, shnum) = if is64 {
        (
            get(&header, 40, 8)?,
            get(&header, 58, 2)?,
            get(&header, 60, 2)?,
        )
    } else {
        (
            get(&header, 32, 4)?,
            get(&header, 46, 2)?,
            get(&header, 48, 2)?,
        )
    };
    let (shoff, shentsize, shnum) = (
        usize::try_from(shoff).ok()?,
        shentsize as usize,
        shnum as usize,
    );
    let table = read(shoff, shnum.checked_mul(shentsize)?)?;
    let section = |i: usize| -> Option<(u32, usize, usize, usize)> {
        let h = i.checked_mul(shentsize)?;
        let typ = get(&table, h + 4, 4)? as u32;
        let (off, size, link) = if is64 {
            (
                get(&table, h + 24, 8)?,
                get(&table, h + 32, 8)?,
                get(&table, h + 40, 4)?,
            )
        } else {
            (
                get(&table, h + 16, 4)?,
                get(&table, h + 20, 4)?,
                get(&table, h + 24, 4)?,
            )
        };
        Some((
            typ,
            usize::try_from(off).ok()?,
            usize::try_from(size).ok()?,
            link as usize,
        ))
    };
    let mut out = Vec::new();
    for i in 0..shnum {
        let (typ, off, size, link) = section(i)?;
        if typ != SHT_DYNAMIC {
            continue;
        }
        let (_, str_off, str_size, _) = section(link)?;
        let strtab = read(str_off, str_size)?;
        let dynamic = read(off, size)?;
        let mut e = 0;
        while e + 2 * word <= dynamic.len() {
            let tag = get(&dynamic, e, word)?;
            let val = usize::try_from(get(&dynamic, e + word, word)?).ok()?;
            if tag == 0 {
                break;
            }
            if tag == DT_NEEDED {
                let name = strtab.get(val..)?;
                let end = name.iter().position(|c| *c == 0)?;
                out.push(String::from_utf8_lossy(&name[..end]).into_owned());
            }
            e += 2 * word;
        }
    }
    Some(out)
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
    fn threadprivate_data_is_thread_local_data_of_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let build = |name: &str, src: &str| {
            let c = dir.path().join(format!("{name}.c"));
            fs::write(&c, src).unwrap();
            let exe = dir.path().join(name);
            let ok = std::process::Command::new("cc")
                .arg("-fopenmp")
                .arg("-o")
                .arg(&exe)
                .arg(&c)
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(ok, "cc -fopenmp (gcc with libgomp is a build dependency)");
            exe
        };
        let plain = build(
            "plain",
            "int main(void){\n#pragma omp parallel\n{}\nreturn 0;}\n",
        );
        let kept = build(
            "kept",
            "static int x;\n#pragma omp threadprivate(x)\nint main(void){\n#pragma omp parallel\n{ x++; }\nreturn x;}\n",
        );
        assert!(!has_thread_local_data(&plain).unwrap());
        assert!(has_thread_local_data(&kept).unwrap());
        let text = dir.path().join("t");
        fs::write(&text, "not an ELF file").unwrap();
        assert!(!has_thread_local_data(&text).unwrap());
    }

    #[test]
    fn needed_libraries_of_real_programs() {
        let sh = resolve_program(OsStr::new("sh"), Some(OsStr::new("/usr/bin:/bin"))).unwrap();
        let needed = needed_libraries(&sh).unwrap();
        assert!(
            needed.iter().any(|n| n.starts_with("libc.so")),
            "{needed:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("o.c");
        fs::write(
            &src,
            "int main(void){\n#pragma omp parallel\n{}\nreturn 0;}\n",
        )
        .unwrap();
        let exe = dir.path().join("o");
        let ok = std::process::Command::new("cc")
            .arg("-fopenmp")
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "cc -fopenmp (gcc with libgomp is a build dependency)");
        let needed = needed_libraries(&exe).unwrap();
        assert!(
            needed.iter().any(|n| n.starts_with("libgomp.so")),
            "{needed:?}"
        );
        // Read at the parts' offsets, the file gives what the whole file in memory does.
        for p in [&sh, &exe] {
            assert_eq!(
                Some(needed_libraries(p).unwrap()),
                parse_needed(&fs::read(p).unwrap()),
                "{p:?}"
            );
        }
        // Garbage and truncated files have none, without panicking.
        assert_eq!(parse_needed(b"plain text"), None);
        let bytes = fs::read(&exe).unwrap();
        for cut in [64, 200, bytes.len() / 2] {
            let _ = parse_needed(&bytes[..cut]);
        }
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

    /// A program that names only a library of its own, which names libgomp (as GROMACS's
    /// gmx names libgromacs): the OpenMP runtime is found through the library, in the
    /// directories given, and not without them.
    #[test]
    fn a_runtime_named_by_the_programs_own_library_is_found_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(
            d.join("mid.c"),
            "#include <omp.h>\nint mid(void) { return omp_get_max_threads(); }\n",
        )
        .unwrap();
        fs::write(
            d.join("main.c"),
            "int mid(void);\nint main(void) { return mid() < 0; }\n",
        )
        .unwrap();
        let cc = |args: &[&str]| {
            let ok = std::process::Command::new("cc")
                .current_dir(d)
                .args(args)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "cc {args:?} (gcc with libgomp is a build dependency)");
        };
        cc(&["-fopenmp", "-shared", "-fPIC", "-o", "libmid.so", "mid.c"]);
        cc(&["-o", "main", "main.c", "-L.", "-lmid", "-Wl,--as-needed"]);
        let direct = needed_libraries(&d.join("main")).unwrap();
        assert!(direct.iter().any(|n| n == "libmid.so"), "{direct:?}");
        assert!(
            !direct.iter().any(|n| n.starts_with("libgomp")),
            "{direct:?}"
        );
        let is_gomp = |n: &str| n.starts_with("libgomp");
        let deep = linked_libraries(&d.join("main"), &[d.to_path_buf()], is_gomp, 16).unwrap();
        assert!(deep.iter().any(|n| is_gomp(n)), "{deep:?}");
        // Without the library's directory nothing says OpenMP; a limit of 0 reads none.
        let blind = linked_libraries(&d.join("main"), &[], is_gomp, 16).unwrap();
        assert!(!blind.iter().any(|n| is_gomp(n)), "{blind:?}");
        let none = linked_libraries(&d.join("main"), &[d.to_path_buf()], is_gomp, 0).unwrap();
        assert!(!none.iter().any(|n| is_gomp(n)), "{none:?}");
        // The search order: LD_LIBRARY_PATH's absolute directories first.
        let dirs = library_dirs(Some(OsStr::new("/opt/x:relative:/opt/y")));
        assert_eq!(
            dirs[..2],
            [PathBuf::from("/opt/x"), PathBuf::from("/opt/y")]
        );
        assert!(dirs.contains(&PathBuf::from("/usr/lib")), "{dirs:?}");
    }
}
