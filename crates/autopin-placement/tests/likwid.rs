//! Compares `pin_expression` on this host with `likwid-pin -p -c EXPR` (which prints the CPU
//! list an expression selects). Skipped, with a note, when likwid-pin is not installed or the
//! process runs inside a restricted cpuset (likwid then reads plain lists as logical ids).

use autopin_placement::{domains_listing, pin_expression};

fn likwid(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("likwid-pin")
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn same_cpus_as_likwid_pin() {
    if likwid(&["-v"]).is_none() {
        autopin_testkit::skip!("likwid-pin not installed");
    }
    let m = match autopin_topology::source::sysfs::read(std::path::Path::new("/")) {
        Ok(m) => m,
        Err(e) => {
            autopin_testkit::skip!("cannot read this host's topology: {e}");
        }
    };
    if m.allowed_cpuset() != m.online_cpuset() {
        autopin_testkit::skip!("running in a restricted cpuset");
    }
    let n = m.allowed_cpuset().len();
    let last = n - 1;
    let mut exprs: Vec<String> = vec![
        "N".into(),
        format!("N:0-{last}"),
        format!("N:{last}-0"),
        "S0:0".into(),
        format!("0-{last}"),
        "E:N:1".into(),
        format!("E:N:{n}"),
        format!("E:N:{}:1:2", n.div_ceil(2)),
        "S:scatter".into(),
        "M:scatter".into(),
        "N:scatter".into(),
        "S0:0@S0:0".into(),
        format!("L:N:0-{last}"),
        "C0:0".into(),
        "D0:0".into(),
        "M0:0".into(),
    ];
    if n >= 2 {
        exprs.push("1,0".into());
        exprs.push("S0:1@M0:0".into());
        exprs.push("S:scatter:2".into());
    }
    let mut compared = 0;
    for e in &exprs {
        let Some(theirs) = likwid(&["-p", "-c", e]) else {
            eprintln!("likwid-pin rejected {e}; not compared");
            continue;
        };
        let ours = pin_expression(&m, e)
            .unwrap_or_else(|err| panic!("{e}: likwid-pin gives {theirs}, we fail: {err}"));
        let ours: Vec<String> = ours.iter().map(|c| c.to_string()).collect();
        assert_eq!(ours.join(","), theirs, "expression {e}");
        compared += 1;
    }
    eprintln!("compared {compared} expressions with likwid-pin on {n} CPUs");
    assert!(
        compared > exprs.len() / 2,
        "likwid-pin rejected most expressions"
    );

    // `likwid-pin -p` alone lists the domains in the same format.
    if let Some(theirs) = likwid(&["-p"]) {
        let ours = domains_listing(&m);
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(norm(&ours), norm(&theirs));
    }
}
