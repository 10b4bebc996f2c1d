//! What the session remembers per program phase: its decision, its parked search.

use crate::strategy::Strategy;

/// What the session remembers about one program phase.
#[derive(Default)]
pub(super) struct PhaseMemo {
    /// A search for this phase interrupted by a phase change, resumed when it comes back.
    pub(super) parked: Option<Parked>,
    /// The pinning decided for this phase (label) and its probed score.
    pub(super) decided: Option<(String, Option<f64>)>,
    /// A search was started for this phase (counts against `max_phase_searches`).
    pub(super) searched: bool,
    /// `decided` comes from an earlier run and has not been applied in this one yet.
    pub(super) remembered: bool,
}

pub(super) struct Parked {
    pub(super) strategy: Box<dyn Strategy>,
    pub(super) search: usize,
    pub(super) elapsed: f64,
}
