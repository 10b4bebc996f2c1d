//! Ways to show a machine.

pub mod tree;
