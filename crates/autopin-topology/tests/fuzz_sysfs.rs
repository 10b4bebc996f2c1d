//! No sysfs tree makes autopin panic or hang: the 17 hwloc dumps in tests/data, mutated one
//! to three files at a time — truncated, emptied, filled with garbage, removed (files and
//! whole directories), or denied (injected through `sysfs::read_with_faults`, since root
//! ignores `chmod`). Every read either gives a model that validates and renders, or an error
//! that names a file below the root.
//!
//! The default run is a deterministic sample of 400 cases. The full run of 10^5 cases:
//!   AUTOPIN_FUZZ_CASES=100000 cargo test --release -p autopin-topology --test fuzz_sysfs -- --nocapture

use autopin_topology::source::sysfs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Longest a single read may take before it counts as a hang (debug builds on a busy
/// 2-core machine read the 256-PU dump in well under a second).
const HANG: Duration = Duration::from_secs(20);

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

struct Dump {
    root: PathBuf,
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

fn extract_all(into: &Path) -> Vec<Dump> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/hwloc-linux");
    let mut tarballs: Vec<PathBuf> = std::fs::read_dir(&data)
        .expect("tests/data/hwloc-linux exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".tar.bz2"))
        .collect();
    tarballs.sort();
    assert_eq!(
        tarballs.len(),
        17,
        "the 17 hwloc dumps (16 of hwloc's, one made from one of them)"
    );
    let mut dumps = Vec::new();
    for (i, t) in tarballs.iter().enumerate() {
        let dir = into.join(i.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("tar")
            .arg("xjf")
            .arg(t)
            .arg("-C")
            .arg(&dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cannot extract {}", t.display());
        let root = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path();
        let (mut files, mut dirs) = (Vec::new(), Vec::new());
        walk(&root, &mut files, &mut dirs);
        dumps.push(Dump { root, files, dirs });
    }
    dumps
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, dirs: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            dirs.push(p.clone());
            walk(&p, files, dirs);
        } else if meta.is_file() {
            files.push(p);
        }
    }
}

const GARBAGE: &[&str] = &[
    "",
    "\n",
    "\0\0\0\0",
    "-1",
    "-",
    "0-",
    "3-1",
    "99999999999999999999",
    "4294967296",
    "ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff",
    "zz",
    "0,,1",
    "1-65536",
    "65535",
    "Node 0 MemTotal: lots kB",
    "10 20 x",
    "10",
    "K",
    "12Q",
    "\u{fffd}\u{fffd}",
    "0x10",
    " 1 ",
    "1\n2\n3",
    "online",
    "Data",
    "",
];

/// One mutation to undo after the read.
enum Undo {
    Write(PathBuf, Vec<u8>),
    Rename(PathBuf, PathBuf),
    Nothing,
}

#[test]
fn mutated_dumps_never_panic_or_hang() {
    let cases: usize = std::env::var("AUTOPIN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let tmp = tempfile::tempdir().unwrap();
    let dumps = extract_all(tmp.path());
    let mut rng = Rng(0x5eed_0010);
    let (mut ok, mut errors, mut warned) = (0usize, 0usize, 0usize);
    let started = Instant::now();
    for case in 0..cases {
        let d = &dumps[rng.below(dumps.len())];
        let mut undo = Vec::new();
        let mut denied: Vec<PathBuf> = Vec::new();
        let mut what = Vec::new();
        for k in 0..1 + rng.below(3) {
            let f = d.files[rng.below(d.files.len())].clone();
            let op = rng.below(6);
            if !f.exists() {
                continue; // inside a directory an earlier mutation hid
            }
            what.push(format!(
                "{op}:{}",
                f.strip_prefix(&d.root).unwrap().display()
            ));
            match op {
                0 => {
                    // truncate
                    let orig = std::fs::read(&f).unwrap();
                    let keep = rng.below(orig.len() + 1);
                    std::fs::write(&f, &orig[..keep]).unwrap();
                    undo.push(Undo::Write(f, orig));
                }
                1 => {
                    let orig = std::fs::read(&f).unwrap();
                    std::fs::write(&f, b"").unwrap();
                    undo.push(Undo::Write(f, orig));
                }
                2 => {
                    let orig = std::fs::read(&f).unwrap();
                    let g: Vec<u8> = if rng.below(3) == 0 {
                        (0..rng.below(64)).map(|_| rng.next() as u8).collect()
                    } else {
                        GARBAGE[rng.below(GARBAGE.len())].as_bytes().to_vec()
                    };
                    std::fs::write(&f, g).unwrap();
                    undo.push(Undo::Write(f, orig));
                }
                3 => {
                    let hidden = f.with_file_name(format!(".fuzz-hidden-{case}-{k}"));
                    std::fs::rename(&f, &hidden).unwrap();
                    undo.push(Undo::Rename(hidden, f));
                }
                4 => {
                    // a whole directory goes missing
                    let dir = d.dirs[rng.below(d.dirs.len())].clone();
                    if dir.exists() && !undo.iter().any(|u| matches!(u, Undo::Rename(..))) {
                        let hidden = dir.with_file_name(format!(".fuzz-hidden-dir-{case}-{k}"));
                        std::fs::rename(&dir, &hidden).unwrap();
                        what.push(format!("dir:{}", dir.display()));
                        undo.push(Undo::Rename(hidden, dir));
                    } else {
                        undo.push(Undo::Nothing);
                    }
                }
                _ => {
                    denied.push(if rng.below(4) == 0 {
                        d.dirs[rng.below(d.dirs.len())].clone()
                    } else {
                        f
                    });
                }
            }
        }
        let fault = |p: &Path| {
            denied
                .iter()
                .any(|x| x == p)
                .then(|| std::io::Error::from(std::io::ErrorKind::PermissionDenied))
        };
        let t0 = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let r = sysfs::read_with_faults(&d.root, None, &fault);
            if let Ok(m) = &r {
                m.validate()
                    .map_err(|e| format!("invalid model: {e}"))
                    .unwrap();
                let _ = autopin_topology::view::tree::render(m);
                let _ = autopin_topology::view::boxes::render(m);
                let _ = m.flat_pus();
                let _ =
                    serde_json::to_string(&autopin_topology::source::json::to_document(m)).unwrap();
            }
            r
        }));
        let took = t0.elapsed();
        if case % 10000 == 9999 {
            eprintln!("{} cases done", case + 1);
        }
        for u in undo.into_iter().rev() {
            match u {
                Undo::Write(p, b) => std::fs::write(p, b).unwrap(),
                Undo::Rename(from, to) => std::fs::rename(from, to).unwrap(),
                Undo::Nothing => {}
            }
        }
        let result = result.unwrap_or_else(|_| panic!("case {case} panicked: {what:?}"));
        assert!(took < HANG, "case {case} took {took:?}: {what:?}");
        match result {
            Ok(m) => {
                ok += 1;
                if !m.warnings.is_empty() {
                    warned += 1;
                }
                for w in &m.warnings {
                    assert!(
                        w.starts_with(&d.root.display().to_string()) || w.starts_with("NUMA node"),
                        "case {case}: warning names no file: {w}"
                    );
                }
            }
            Err(e) => {
                errors += 1;
                let text = e.to_string();
                assert!(
                    text.starts_with(&d.root.display().to_string()),
                    "case {case}: error names no file below the root: {text} ({what:?})"
                );
            }
        }
    }
    eprintln!(
        "{cases} cases in {:.1} s: {ok} read ({warned} with warnings), {errors} errors naming a file, no panic, no hang",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(ok + errors, cases);
    assert!(warned > 0, "mutations must show up as warnings");
}
