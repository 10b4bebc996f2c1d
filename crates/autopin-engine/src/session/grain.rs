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
    /// The latest intervals' units and seconds, `RECENT` seconds of them at most.
    recent: std::collections::VecDeque<(f64, f64)>,
    /// Some amount was not a whole number: not a count of units.
    fractional: bool,
}

impl Granularity {
    /// Units a probe should see.
    pub(super) const MIN_UNITS: f64 = 10.0;
    /// Longest a probe is made (or extended) for granularity's sake, seconds.
    pub(super) const MAX_PROBE: f64 = 4.0;
    /// Seconds of the latest readings whose rate may say a short reading resolves less
    /// than the whole history does.
    const RECENT: f64 = 1.0;

    pub(super) fn observe(&mut self, amount: f64, dt: f64) {
        if !(amount.is_finite() && amount >= 0.0) {
            return;
        }
        self.fractional |= amount.fract() != 0.0;
        // Start-up before the first unit (loading, serial set-up) says nothing of the grain.
        if self.amount > 0.0 || amount > 0.0 {
            self.amount += amount;
            self.time += dt;
            self.recent.push_back((amount, dt));
            while self.recent.len() > 1
                && self.recent.iter().map(|r| r.1).sum::<f64>() > Self::RECENT + 1e-9
            {
                self.recent.pop_front();
            }
        }
    }

    /// Units a second: over the whole history, or over the latest second where that is
    /// lower. A program whose rate fell by orders of magnitude (a phase whose threads now
    /// share a CPU: 250 beats/s after 2 million) resolves a short reading no more.
    fn rate(&self) -> f64 {
        let all = if self.time > 0.0 {
            self.amount / self.time
        } else {
            0.0
        };
        let (a, t) = self
            .recent
            .iter()
            .fold((0.0, 0.0), |(a, t), r| (a + r.0, t + r.1));
        if t > 0.0 {
            all.min(a / t)
        } else {
            all
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

    /// Whether `share` of the rate seen so far (`rate`), over `dt` seconds, still counts `MIN_UNITS`
    /// units: a reading that short and that low is a rate, not rounding. Always for an
    /// objective that is not a count of units; never before anything was counted.
    pub(super) fn resolves(&self, dt: f64, share: f64) -> bool {
        !self.counts_units() || (self.time > 0.0 && self.rate() * share * dt >= Self::MIN_UNITS)
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

#[cfg(test)]
mod tests {
    use super::Granularity;

    #[test]
    fn a_rate_that_fell_resolves_short_readings_no_more() {
        // 2 million units/s for half a second, then 250/s: a 10 ms reading at 40% of the
        // rate would see 1 unit, not 10, whatever the history's average says.
        let mut g = Granularity::default();
        for _ in 0..5 {
            g.observe(200_000.0, 0.1);
        }
        assert!(g.resolves(0.01, 0.4));
        for _ in 0..10 {
            g.observe(25.0, 0.1);
        }
        assert!(g.amount / g.time * 0.4 * 0.01 >= Granularity::MIN_UNITS);
        assert!(!g.resolves(0.01, 0.4));
        // Back up again: short readings resolve again.
        for _ in 0..10 {
            g.observe(200_000.0, 0.1);
        }
        assert!(g.resolves(0.01, 0.4));
    }
}
