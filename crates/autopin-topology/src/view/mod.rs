//! Ways to show a machine.

pub mod boxes;
pub mod dot;
pub mod svg;
pub mod tree;
