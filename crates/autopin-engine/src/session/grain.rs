//! The objective's grain: how many whole units it counts a second, so that probes can be
//! long enough to see some.

/// How coarse the objective's progress is, learned from every interval: an objective that
/// counts whole units (heartbeats, OpenMP constructs) at a few per second needs probes long
/// enough to see `MIN_UNITS` of them, or a probe's rate is mostly rounding.
#[derive(Debug, Clone, Default)]
pub(super) struct Granularity {
    /// Units and seconds since the first unit was seen.
    amount: f64,
    time: f64,
    /// Some amount was not a whole number: not a count of units.
    fractional: bool,
}

impl Granularity {
    /// Units a probe should see.
    pub(super) const MIN_UNITS: f64 = 10.0;
    /// Longest a probe is made (or extended) for granularity's sake, seconds.
    pub(super) const MAX_PROBE: f64 = 4.0;

    pub(super) fn observe(&mut self, amount: f64, dt: f64) {
        if !(amount.is_finite() && amount >= 0.0) {
            return;
        }
        self.fractional |= amount.fract() != 0.0;
        // Start-up before the first unit (loading, serial set-up) says nothing of the grain.
        if self.amount > 0.0 || amount > 0.0 {
            self.amount += amount;
            self.time += dt;
        }
    }

    /// The objective counts whole units, so a probe can see none of them.
    pub(super) fn counts_units(&self) -> bool {
        !self.fractional
    }

    /// Fewer than `MIN_UNITS` units a second.
    pub(super) fn coarse(&self) -> bool {
        self.counts_units() && self.amount > 0.0 && self.amount < Self::MIN_UNITS * self.time
    }

    /// Whether `share` of the rate seen so far, over `dt` seconds, still counts `MIN_UNITS`
    /// units: a reading that short and that low is a rate, not rounding. Always for an
    /// objective that is not a count of units; never before anything was counted.
    pub(super) fn resolves(&self, dt: f64, share: f64) -> bool {
        !self.counts_units()
            || (self.time > 0.0 && self.amount / self.time * share * dt >= Self::MIN_UNITS)
    }

    /// The shortest probe that sees `MIN_UNITS` units at the rate seen so far (0 when the
    /// objective is not a count of whole units or nothing was counted yet).
    pub(super) fn min_probe(&self) -> f64 {
        if !self.coarse() {
            return 0.0;
        }
        (Self::MIN_UNITS * self.time / self.amount).min(Self::MAX_PROBE)
    }
}
