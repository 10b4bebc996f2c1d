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

pub use frame::{CpuLoad, Flag, Frame, ProcessRow, ThreadRow};

/// The frame between two looks: what was measured ([`frame::measured`]), then flagged by
/// stat's rules ([`flags`]). Composed here so that the flags read frames and frames know
/// nothing of the flags. `watched` says which processes are the watched programs' (those
/// the view shows); `shape` is the machine the map draws.
pub fn frame(
    before: &look::Look,
    now: &look::Look,
    shape: &shape::Shape,
    watched: &dyn Fn(&ProcessRow) -> bool,
) -> Frame {
    let mut f = frame::measured(before, now, shape, watched);
    flags::apply(&mut f, before, now, shape);
    f
}
pub use look::{CpuTicks, Look, Pages, ProcessLook, ThreadLook};
pub use shape::Shape;
pub use view::{Filter, Row, Sort, SortKey, View};

#[cfg(test)]
mod tests;
