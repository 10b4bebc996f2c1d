//! Property tests of the topology sources a user hands autopin (`--load` JSON or hwloc XML,
//! `--synthetic`): whatever the text, a parse ends in a machine that validates and renders,
//! or in an error; never a panic. Mutations of real documents (tests/data) reach deep into
//! the parsers; `PROPTEST_CASES` runs more cases than the default.
//! A sysfs tree (`--sysfs-root`) is fuzzed here file by file with the same edits; whole
//! files and directories removed, emptied or denied: `fuzz_sysfs.rs`.

use autopin_topology::source::{hwloc_xml, json, synthetic, sysfs};
use autopin_topology::Machine;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn cases(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Edits for `autopin_testkit::mutate`: where, how much, what.
fn edits() -> impl Strategy<Value = Vec<(u16, u16, String)>> {
    let with = prop_oneof![
        proptest::sample::select(autopin_testkit::HOSTILE_WORDS).prop_map(String::from),
        "[0-9]{1,12}",
        "\\PC{0,4}",
        Just(String::new()),
    ];
    proptest::collection::vec((0u16..=1000, 0u16..24, with), 1..5)
}

/// A machine that came out of a parse is one the rest of autopin can use.
fn usable(m: &Machine) {
    m.validate().expect("a parsed machine validates");
    let _ = m.summary_lines();
    let _ = autopin_topology::view::tree::render(m);
    let _ = autopin_topology::view::boxes::render(m);
    let _ = autopin_topology::view::svg::render(m);
    let _ = autopin_topology::view::dot::render(m);
    let _ = m.allowed_cpuset();
}

fn xml() -> &'static str {
    static XML: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    XML.get_or_init(|| {
        std::fs::read_to_string(autopin_testkit::data("hwloc-xml/24em64t-2n6c2t-pci.xml")).unwrap()
    })
}

fn json_doc() -> &'static str {
    static DOC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DOC.get_or_init(|| {
        let m = synthetic::parse("package:2 numa:1 core:2 pu:2").unwrap();
        serde_json::to_string_pretty(&json::to_document(&m)).unwrap()
    })
}

/// A copy of a real sysfs tree (a 16-PU, 4-package dump with SMT) in a directory of this
/// test, and its files: each case edits a few files and puts them back afterwards.
fn tree() -> &'static (PathBuf, Vec<PathBuf>) {
    static TREE: std::sync::OnceLock<(PathBuf, Vec<PathBuf>)> = std::sync::OnceLock::new();
    TREE.get_or_init(|| {
        let from = autopin_testkit::hwloc_dump("16em64t-4s2c2t");
        // Copies left by earlier runs (this test cannot remove its own at its end) go when
        // their process is gone.
        for e in std::fs::read_dir(std::env::temp_dir())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("autopin-fuzz-sysfs-") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let to = std::env::temp_dir().join(format!("autopin-fuzz-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&to);
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(&from)
            .arg(&to)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cp -a {}", from.display());
        let mut files = Vec::new();
        fn walk(d: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
                let t = e.file_type().unwrap();
                if t.is_dir() {
                    walk(&e.path(), out);
                } else if t.is_file() {
                    out.push(e.path());
                }
            }
        }
        walk(&to, &mut files);
        files.sort();
        (to, files)
    })
}

/// Cases of the sysfs test run one at a time: they share the tree.
static TREE_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

proptest! {
    #![proptest_config(cases(150))]

    #[test]
    fn a_sysfs_tree_with_edited_files_never_panics(
        picks in proptest::collection::vec((any::<proptest::sample::Index>(), edits()), 1..4)
    ) {
        let _turn = TREE_TURN.lock().unwrap_or_else(|e| e.into_inner());
        let (root, files) = tree();
        let mut saved = Vec::new();
        for (i, e) in &picks {
            let f = &files[i.index(files.len())];
            let old = std::fs::read(f).unwrap();
            let new = autopin_testkit::mutate(&String::from_utf8_lossy(&old), e);
            std::fs::write(f, new).unwrap();
            saved.push((f.clone(), old));
        }
        let read = sysfs::read(root);
        for (f, old) in saved.into_iter().rev() {
            std::fs::write(f, old).unwrap();
        }
        if let Ok(m) = read {
            usable(&m);
        }
    }

    #[test]
    fn hwloc_xml_never_panics(e in edits()) {
        if let Ok(m) = hwloc_xml::from_str(&autopin_testkit::mutate(xml(), &e)) {
            usable(&m);
        }
    }

    #[test]
    fn topology_json_never_panics(e in edits()) {
        if let Ok(m) = json::from_str(&autopin_testkit::mutate(json_doc(), &e)) {
            usable(&m);
        }
    }

    #[test]
    fn synthetic_specs_never_panic(
        parts in proptest::collection::vec(
            prop_oneof![
                proptest::sample::select(&["package", "numa", "node", "core", "pu", "l3", "l2", "l1", "group", "die"][..]).prop_map(String::from),
                proptest::sample::select(autopin_testkit::HOSTILE_WORDS).prop_map(String::from),
                (0u32..6).prop_map(|n| n.to_string()),
                Just(":".to_string()),
                Just(" ".to_string()),
            ],
            0..12,
        )
    ) {
        let spec = parts.concat();
        if let Ok(m) = synthetic::parse(&spec) {
            usable(&m);
        }
    }
}
