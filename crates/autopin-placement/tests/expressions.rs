//! The likwid-pin expression language on hand-built and synthetic machines.

mod common;

use autopin_placement::{domains_listing, pin_expression, CpuList, PlacementError};
use common::*;

fn sel(m: &autopin_topology::Machine, e: &str) -> String {
    match pin_expression(m, e) {
        Ok(v) => CpuList(v).to_list(),
        Err(err) => panic!("{e}: {err}"),
    }
}

fn err(m: &autopin_topology::Machine, e: &str) -> (usize, String) {
    match pin_expression(m, e) {
        Ok(v) => panic!("{e} should fail but gave {v:?}"),
        Err(PlacementError::Expr { position, .. }) => {
            (position, pin_expression(m, e).unwrap_err().to_string())
        }
        Err(other) => panic!("{e}: wrong error kind {other:?}"),
    }
}

#[test]
fn logical_numbering_puts_physical_cores_first() {
    let m = em64t_4s2c2t();
    assert_eq!(sel(&m, "S1:0-1"), "1,5");
    assert_eq!(sel(&m, "S1:0-3"), "1,5,9,13");
    assert_eq!(sel(&m, "L:S1:0-3"), "1,5,9,13");
    assert_eq!(sel(&m, "S1:3-0"), "13,9,5,1");
    assert_eq!(sel(&m, "N:0-7"), "0,4,1,5,2,6,3,7");
    assert_eq!(sel(&m, "L:0-1"), "0,4");
    assert_eq!(sel(&m, "C2:0,2"), "2,10");
    assert_eq!(sel(&m, "D3:1"), "7");
    assert_eq!(sel(&m, "M0:0-3"), "0,4,1,5");
}

#[test]
fn e_expressions_walk_the_threads_of_cores_together() {
    let m = em64t_4s2c2t();
    assert_eq!(sel(&m, "E:N:4:1:2"), "0,4,1,5");
    assert_eq!(sel(&m, "E:N:4"), "0,8,4,12");
    assert_eq!(sel(&m, "E:S2:2:2:4"), "2,10");
    assert_eq!(sel(&m, "E:S2:4:1:1"), "2,10,6,14");
    assert_eq!(sel(&m, "E:N:4:2:4"), "0,8,1,9");
    assert_eq!(sel(&m, "E:S0"), "0,8,4,12");
    assert_eq!(sel(&m, "S0"), "0,8,4,12");
}

#[test]
fn scatter_and_balanced() {
    let m = em64t_4s2c2t();
    assert_eq!(sel(&m, "S:scatter"), "0-15");
    assert_eq!(sel(&m, "S:scatter:6"), "0-5");
    assert_eq!(sel(&m, "scatter:4"), "0-3");
    assert_eq!(sel(&m, "M:scatter:3"), "0,4,1");
    assert_eq!(sel(&m, "S:balanced:4"), "0-3");
    assert_eq!(sel(&m, "S:balanced:8"), "0,8,1,9,2,10,3,11");
    assert_eq!(sel(&m, "S:cbalanced:8"), "0,4,1,5,2,6,3,7");
    assert_eq!(sel(&m, "S:balanced:6"), "0,8,1,9,2-3");
}

#[test]
fn concatenation_and_physical_lists() {
    let m = em64t_4s2c2t();
    assert_eq!(sel(&m, "S0:0-1@S1:0-1"), "0,4,1,5");
    assert_eq!(sel(&m, "15,0-2"), "15,0-2");
    assert_eq!(sel(&m, "3-1@S0:0"), "3,2,1,0");
}

#[test]
fn only_allowed_cpus_count() {
    let m = restrict(&em64t_4s2c2t(), "0-3,8-11");
    // Every core keeps only some threads: S1 now has 1 and 9.
    assert_eq!(sel(&m, "S1:0-1"), "1,9");
    assert_eq!(sel(&m, "N:0-3"), "0-3");
    let (pos, msg) = err(&m, "S1:0-2");
    assert_eq!(pos, 5, "{msg}");
    assert!(msg.contains("valid indexes 0-1"), "{msg}");
    let (pos, msg) = err(&m, "0,4");
    assert_eq!(pos, 2);
    assert!(msg.contains("not in the allowed set (0-3,8-11)"), "{msg}");
    let m = restrict(&em64t_4s2c2t(), "0,4,8,12");
    let (_, msg) = err(&m, "S1:0");
    assert!(
        msg.contains("S1 has no allowed CPUs") || msg.contains("domain S1 has no allowed CPUs"),
        "{msg}"
    );
    assert!(domains_listing(&m).contains("Domain S1:\n\t(no allowed CPUs)"));
}

#[test]
fn errors_point_at_the_offending_character_and_list_domains() {
    let m = em64t_4s2c2t();
    let (pos, msg) = err(&m, "S4:0");
    assert_eq!(pos, 0);
    assert!(msg.contains("unknown domain 'S4'"), "{msg}");
    assert!(msg.contains("N, S0-S3, D0-D3, C0-C3, M0"), "{msg}");
    assert!(msg.contains("\n  S4:0\n  ^"), "{msg}");
    assert_eq!(err(&m, "S0:0-3@S1:9").0, 10);
    assert_eq!(err(&m, "S0:0-x").0, 5);
    assert_eq!(err(&m, "E:N:0").0, 4);
    assert_eq!(err(&m, "E:N:4:1").0, 7);
    assert_eq!(err(&m, "E:N:17").0, 4);
    assert_eq!(err(&m, "E:N:9:1:2").0, 4);
    assert_eq!(err(&m, "").0, 0);
    assert_eq!(err(&m, "S0:1@").0, 5);
    assert_eq!(err(&m, "@").0, 0);
    assert_eq!(err(&m, "16").0, 0);
    assert_eq!(err(&m, "0-16").0, 2);
    assert_eq!(err(&m, "S0::1").0, 3);
    assert_eq!(err(&m, "S0:1:2").0, 4);
    assert_eq!(err(&m, "X:scatter").0, 0);
    assert_eq!(err(&m, "S:scatter:99").0, 10);
    assert_eq!(err(&m, "L").0, 1);
    assert_eq!(err(&m, "0:1").0, 1);
    assert!(err(&m, "E:N:4:1").1.contains("stride"));
}

#[test]
fn listing_matches_likwid_format() {
    let m = em64t_4s2c2t();
    let l = domains_listing(&m);
    assert!(
        l.starts_with(
            "Domain N:\n\t0,8,4,12,1,9,5,13,2,10,6,14,3,11,7,15\n\nDomain S0:\n\t0,8,4,12\n"
        ),
        "{l}"
    );
    assert!(l.contains("Domain M0:\n\t0,8,4,12,1,9"), "{l}");
    assert!(l.contains("Domain C3:\n\t3,11,7,15"), "{l}");
}

#[test]
fn hybrid_cores_first_handles_uneven_cores() {
    // One SMT package and one without SMT: the second round only visits cores with 2 threads.
    let m = synthetic("package:2 core:2 pu:2");
    let m = restrict(&m, "0-3,4,6");
    assert_eq!(sel(&m, "N:0-5"), "0,2,4,6,1,3");
}
