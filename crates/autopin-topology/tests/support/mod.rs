//! Test-only helpers shared by this crate's integration tests.
//! (Move to `autopin-testkit` once that crate carries a sysfs builder.)
#![allow(dead_code)] // each test file uses a different part

pub mod sysfs_tree;
