//! Property tests of the latency files a user hands autopin (`--from-latency`: a
//! core-to-core-latency CSV or an MCTOP `.mct`): whatever the text, `load` (read, infer,
//! build) gives a machine that validates or an error; never a panic. Mutations of real files
//! (tests/data) reach the inference; `PROPTEST_CASES` runs more cases than the default.

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
        "[0-9.e+-]{1,8}",
        "\\PC{0,3}",
        Just(String::new()),
    ];
    proptest::collection::vec((0u16..=1000, 0u16..16, with), 1..4)
}

fn loads_or_fails(name: &str, text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    if let Ok((m, _)) = autopin_latency::load(&p) {
        m.validate().expect("an inferred machine validates");
        let _ = m.summary_lines();
    }
}

fn data(rel: &str) -> String {
    std::fs::read_to_string(autopin_testkit::data(rel)).unwrap()
}

proptest! {
    #![proptest_config(cases(120))]

    #[test]
    fn c2c_csv_never_panics(e in edits(), which in 0usize..2) {
        let seed = ["c2c/intel-i7-6700k.csv", "c2c/dual-xeon-x5650.csv"][which];
        loads_or_fails("m.csv", &autopin_testkit::mutate(&data(seed), &e));
    }

    #[test]
    fn mct_never_panics(e in edits()) {
        loads_or_fails("m.mct", &autopin_testkit::mutate(&data("mctop/lpdxeon2680.mct"), &e));
    }

    #[test]
    fn small_matrices_of_any_numbers_never_panic(
        n in 1usize..5,
        cells in proptest::collection::vec(
            prop_oneof![
                proptest::sample::select(autopin_testkit::HOSTILE_WORDS).prop_map(String::from),
                (0.0f64..1e4).prop_map(|v| format!("{v}")),
            ],
            25,
        )
    ) {
        let mut text = String::new();
        for i in 0..n {
            let row: Vec<&str> = (0..n).map(|j| cells[i * 5 + j].as_str()).collect();
            text.push_str(&row.join(","));
            text.push('\n');
        }
        loads_or_fails("m.csv", &text);
    }
}
