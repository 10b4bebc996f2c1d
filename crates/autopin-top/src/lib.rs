//! `autopin top`'s model, without system calls or a terminal: two looks at every thread of
//! the machine (read by autopin-os `top_source`) become a [`Frame`] — each CPU's load, each
//! process and thread with its CPU share, wait share, CPU, mask, migrations and pages per
//! NUMA node, and the flags (by `stat`'s rules, `autopin_stat::rules`). The view filters and
//! sorts it ([`view`]), the keys move through it ([`ui`]), and it is drawn as lines of
//! styled text ([`screen`], [`map`], [`table`]) or written as JSON ([`json`]). The autopin
//! CLI reads the looks and draws the lines with ratatui.

pub mod flags;
pub mod frame;
pub mod json;
pub mod look;
pub mod map;
pub mod screen;
pub mod shape;
pub mod table;
pub mod ui;
pub mod view;

pub use frame::{frame, CpuLoad, Flag, Frame, ProcessRow, ThreadRow};
pub use look::{CpuTicks, Look, Pages, ProcessLook, ThreadLook};
pub use shape::Shape;
pub use view::{Filter, Row, Sort, SortKey, View};

#[cfg(test)]
mod tests;
