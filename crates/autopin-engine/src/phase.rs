//! `PhaseWatch`: after a decision, notice when the program's rate drops for good (a new
//! phase) so that the session can search again. Short dips are ignored: the rate must stay
//! below `(1 − threshold) × reference` for `duration` seconds in a row. Each re-search
//! doubles the quiet time before the watch re-arms (backoff), and the number of re-searches is
//! bounded.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WatchParams {
    /// Relative drop that counts (0.2 = 20% below the reference).
    pub threshold: f64,
    /// How long the drop must last, seconds.
    pub duration: f64,
    /// Quiet time after a decision before the watch arms, seconds (doubles per re-search).
    pub cooldown: f64,
    /// At most this many re-searches per run.
    pub max_researches: usize,
}

impl Default for WatchParams {
    fn default() -> Self {
        WatchParams {
            threshold: 0.2,
            duration: 3.0,
            cooldown: 2.0,
            max_researches: 3,
        }
    }
}

/// Why a new search starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Trigger {
    RateDrop { reference: f64, observed: f64 },
    PhaseChange { from: Option<String>, to: String },
}

#[derive(Debug, Clone)]
pub struct PhaseWatch {
    p: WatchParams,
    reference: Option<f64>,
    armed_at: f64,
    below_since: Option<f64>,
    below_sum: f64,
    below_time: f64,
    phase: Option<String>,
    researches: usize,
}

impl PhaseWatch {
    pub fn new(p: WatchParams) -> Self {
        PhaseWatch {
            p,
            reference: None,
            armed_at: f64::INFINITY,
            below_since: None,
            below_sum: 0.0,
            below_time: 0.0,
            phase: None,
            researches: 0,
        }
    }

    /// A decision was taken at `now`; `reference` is the winner's probed rate.
    pub fn decided(&mut self, now: f64, reference: Option<f64>, phase: Option<String>) {
        let backoff = 2f64.powi(self.researches as i32);
        self.reference = reference;
        self.armed_at = now + self.p.cooldown * backoff;
        self.below_since = None;
        self.phase = phase;
    }

    /// How many re-searches were started.
    pub fn researches(&self) -> usize {
        self.researches
    }

    /// Feeds one sampling interval ending at `now`; returns a trigger when a new search
    /// should start.
    pub fn observe(
        &mut self,
        now: f64,
        dt: f64,
        rate: f64,
        phase: Option<&str>,
    ) -> Option<Trigger> {
        if self.researches >= self.p.max_researches {
            return None;
        }
        // A phase name from the heartbeat channel is the program telling us directly.
        if let Some(p) = phase {
            if self.phase.as_deref() != Some(p) {
                let from = self.phase.replace(p.to_string());
                if now >= self.armed_at && from.is_some() {
                    return self.fire(Trigger::PhaseChange {
                        from,
                        to: p.to_string(),
                    });
                }
            }
        }
        if now < self.armed_at {
            return None;
        }
        let reference = self.reference?;
        if rate < (1.0 - self.p.threshold) * reference {
            let since = *self.below_since.get_or_insert(now - dt);
            self.below_sum += rate * dt;
            self.below_time += dt;
            let observed = self.below_sum / self.below_time.max(1e-12);
            if now - since >= self.needed(1.0 - observed / reference) - 1e-9 {
                return self.fire(Trigger::RateDrop {
                    reference,
                    observed,
                });
            }
        } else {
            self.below_since = None;
            self.below_sum = 0.0;
            self.below_time = 0.0;
        }
        None
    }

    /// How long a drop of relative `depth` must last before it fires: `duration` for a drop
    /// just past the threshold, less for a deeper one (down to `DEEP_DROP_SHARE` of it). Each
    /// second on a pinning that lost half its rate costs half a second of work, and a deep
    /// drop is less likely to be noise.
    fn needed(&self, depth: f64) -> f64 {
        const DEEP_DROP_SHARE: f64 = 0.6;
        let share = if depth > 0.0 {
            (self.p.threshold / depth).clamp(DEEP_DROP_SHARE, 1.0)
        } else {
            1.0
        };
        self.p.duration * share
    }

    fn fire(&mut self, t: Trigger) -> Option<Trigger> {
        self.researches += 1;
        self.armed_at = f64::INFINITY;
        self.below_since = None;
        self.below_sum = 0.0;
        self.below_time = 0.0;
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_dips_ignored_sustained_drop_fires() {
        let mut w = PhaseWatch::new(WatchParams {
            duration: 1.0,
            cooldown: 0.5,
            ..Default::default()
        });
        w.decided(0.0, Some(100.0), None);
        let mut t = 0.0;
        let mut step = |w: &mut PhaseWatch, rate| {
            t += 0.1;
            w.observe(t, 0.1, rate, None)
        };
        for _ in 0..10 {
            assert!(step(&mut w, 100.0).is_none());
        }
        for _ in 0..5 {
            assert!(step(&mut w, 50.0).is_none());
        }
        assert!(step(&mut w, 100.0).is_none());
        let mut fired = None;
        for _ in 0..12 {
            if let Some(f) = step(&mut w, 50.0) {
                fired = Some(f);
                break;
            }
        }
        assert!(matches!(fired, Some(Trigger::RateDrop { .. })));
        assert_eq!(w.researches(), 1);
    }

    #[test]
    fn a_deep_drop_fires_sooner_than_a_shallow_one() {
        // Default watch: 20% threshold, 3 s. A drop just past the threshold must last the
        // 3 s, a drop to 75% 0.2/0.25 of it (2.4 s), a drop to 50% (a newcomer on the
        // program's CPU) or deeper 60% of it (1.8 s).
        let fires_after = |rate: f64| {
            let mut w = PhaseWatch::new(WatchParams {
                cooldown: 0.0,
                ..Default::default()
            });
            w.decided(0.0, Some(100.0), None);
            let mut t = 0.0;
            while t < 10.0 {
                t += 0.1;
                if w.observe(t, 0.1, rate, None).is_some() {
                    return t;
                }
            }
            f64::INFINITY
        };
        for (rate, after) in [(79.9, 3.0), (75.0, 2.4), (50.0, 1.8), (10.0, 1.8)] {
            let t = fires_after(rate);
            assert!(
                (t - after).abs() < 0.05,
                "a drop to {rate}% fired after {t} s"
            );
        }
    }

    #[test]
    fn backoff_and_bound() {
        let p = WatchParams {
            duration: 0.2,
            cooldown: 1.0,
            max_researches: 2,
            threshold: 0.2,
        };
        let mut w = PhaseWatch::new(p);
        w.decided(0.0, Some(10.0), None);
        assert!(w.observe(0.5, 0.1, 1.0, None).is_none(), "cooldown");
        w.decided(0.0, Some(10.0), None);
        let _ = w.observe(1.1, 0.1, 1.0, None);
        assert!(w.observe(1.3, 0.1, 1.0, None).is_some());
        w.decided(2.0, Some(10.0), None);
        // second cooldown is doubled: 2 s
        assert!(w.observe(3.5, 0.1, 1.0, None).is_none());
        let _ = w.observe(4.1, 0.1, 1.0, None);
        assert!(w.observe(4.3, 0.1, 1.0, None).is_some());
        w.decided(5.0, Some(10.0), None);
        assert!(w.observe(100.0, 0.1, 1.0, None).is_none(), "bounded");
        assert!(w.observe(100.5, 0.1, 1.0, None).is_none(), "bounded");
    }

    #[test]
    fn heartbeat_phase_change_fires() {
        let mut w = PhaseWatch::new(WatchParams {
            cooldown: 0.0,
            ..Default::default()
        });
        w.decided(0.0, Some(10.0), Some("barrier".into()));
        assert!(w.observe(0.1, 0.1, 10.0, Some("barrier")).is_none());
        assert!(matches!(
            w.observe(0.2, 0.1, 10.0, Some("triad")),
            Some(Trigger::PhaseChange { .. })
        ));
    }
}
