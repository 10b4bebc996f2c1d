//! Property tests of what the decision store reads from outside: an export to import
//! (JSON a user may have edited), the store file itself (any bytes), and the names `show`
//! and `forget` take. Whatever they hold: no panic; a record that passes `Record::check` is
//! kept and read back; one that does not is refused. `PROPTEST_CASES` runs more cases.

use autopin_memory::{Record, Selector, Store};
use proptest::prelude::*;

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

fn edits() -> impl Strategy<Value = Vec<(u16, u16, String)>> {
    let with = prop_oneof![
        proptest::sample::select(autopin_testkit::HOSTILE_WORDS).prop_map(String::from),
        "[0-9]{1,12}",
        "\\PC{0,3}",
        Just(String::new()),
    ];
    proptest::collection::vec((0u16..=1000, 0u16..12, with), 1..4)
}

/// An export as `autopin memory export` writes it: two records, with phases.
const EXPORT: &str = r#"[
  {"id": "a", "key": {"program": "/opt/a/solver", "program_id": "p1", "machine": "m",
   "cpus": "0-3", "threads": "2", "objective": "default", "args": ["-n", "4"]},
   "pinning": {"label": "0,1", "cpus": [0, 1]},
   "runner_up": {"label": "unpinned (OS decides)", "cpus": null},
   "rate": 2.5e9, "unit": "instructions/s", "outcome": "confirmed", "uses": 3,
   "created": 1700000000.0, "updated": 1700000100.5,
   "phases": [{"phase": "solve", "pinning": {"label": "2,3", "cpus": [2, 3]}, "rate": 1.0}],
   "source": "requested", "busy": [1]},
  {"id": "b", "key": {"program": "/opt/b/Solver", "program_id": "p2", "machine": "m",
   "cpus": "0,2", "threads": "auto", "objective": "task-clock", "share": "rank 0 of 2 on the node"},
   "pinning": {"label": "2", "cpus": [2]}, "runner_up": null, "rate": null,
   "unit": "CPU-s/s", "outcome": "unfinished", "uses": 1, "created": 1.0, "updated": 2.0}
]"#;

proptest! {
    #![proptest_config(cases(100))]

    #[test]
    fn an_edited_export_is_kept_only_when_valid(e in edits()) {
        let text = autopin_testkit::mutate(EXPORT, &e);
        let Ok(records) = serde_json::from_str::<Vec<Record>>(&text) else { return Ok(()) };
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("d.db")).unwrap();
        let valid = records.iter().all(|r| r.check().is_ok());
        match store.import(&records) {
            Ok(n) => {
                prop_assert!(valid);
                prop_assert_eq!(n, records.len());
                for r in store.list().unwrap() {
                    prop_assert!(r.check().is_ok());
                    let _ = store.lookup(&r.key).unwrap();
                }
            }
            Err(_) => prop_assert!(!valid),
        }
    }

    #[test]
    fn any_bytes_as_the_store_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        header in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.db");
        let mut b = if header { b"SQLite format 3\0".to_vec() } else { Vec::new() };
        b.extend(bytes);
        std::fs::write(&p, b).unwrap();
        if let Ok(s) = Store::open(&p) {
            let _ = s.list();
        }
    }

    #[test]
    fn any_name_or_pattern_selects_without_panicking(
        what in prop_oneof![
            "\\PC{0,12}",
            "[*?/a-zA-Z_%]{0,12}",
            proptest::sample::select(autopin_testkit::HOSTILE_WORDS).prop_map(String::from),
        ],
    ) {
        let records: Vec<Record> = serde_json::from_str(EXPORT).unwrap();
        for r in &records {
            let exact = r.selected_by(&Selector::Exact(what.clone()));
            let pattern = r.selected_by(&Selector::Pattern(what.clone()));
            // A name without * or ? means itself as a pattern too.
            if !what.contains(['*', '?']) {
                prop_assert_eq!(exact, pattern);
            }
        }
    }
}
