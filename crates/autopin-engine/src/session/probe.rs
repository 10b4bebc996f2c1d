//! One probe's measurement as it accumulates, interval by interval: what counts (whole
//! intervals in the probe's phase, with no thread born or gone), what is kept aside (churn,
//! other phases), the tick rates for the noise estimate, per-thread amounts and the
//! program's own progress.

use super::Interval;
use std::collections::BTreeMap;

/// A probe being measured.
#[derive(Debug, Clone)]
pub(super) struct ProbeAccumulator {
    pub(super) cand: usize,
    pub(super) warmup: f64,
    pub(super) start: f64,
    pub(super) until: f64,
    /// The end the strategy asked for; `until` is later when the probe was lengthened to
    /// see enough units of a coarse objective.
    pub(super) asked_until: f64,
    pub(super) good_amount: f64,
    pub(super) good_time: f64,
    pub(super) all_amount: f64,
    pub(super) all_time: f64,
    pub(super) intervals: usize,
    pub(super) disturbed: usize,
    pub(super) off_phase: u32,
    /// Intervals whose team was not yet the candidate's (`Interval::team_lag`).
    pub(super) lagged: u32,
    pub(super) phase: Option<String>,
    pub(super) rates: Vec<f64>,
    /// Readings shorter than `tick` (looks between ticks, `Session::look_due`) gather here
    /// until they make a tick's worth: a tick's rate keeps one length for the statistics.
    pub(super) tick: f64,
    pending: Option<(f64, f64)>,
    /// The probe ended at a look that read a collapse (its last tick).
    pub(super) ended_collapsed: bool,
    /// The program's own progress over the accepted intervals that had it, and their time.
    pub(super) progress: Option<(f64, f64, &'static str)>,
    pub(super) per_thread: BTreeMap<u32, (usize, f64, f64)>,
    pub(super) per_thread_all: BTreeMap<u32, (usize, f64, f64)>,
}

impl ProbeAccumulator {
    pub(super) fn new(
        cand: usize,
        warmup: f64,
        start: f64,
        until: f64,
        phase: Option<String>,
    ) -> Self {
        ProbeAccumulator {
            cand,
            warmup,
            start,
            until,
            asked_until: until,
            good_amount: 0.0,
            good_time: 0.0,
            all_amount: 0.0,
            all_time: 0.0,
            intervals: 0,
            disturbed: 0,
            off_phase: 0,
            lagged: 0,
            phase,
            rates: Vec::new(),
            tick: 0.0,
            pending: None,
            ended_collapsed: false,
            progress: None,
            per_thread: BTreeMap::new(),
            per_thread_all: BTreeMap::new(),
        }
    }

    pub(super) fn add(&mut self, iv: &Interval, dt: f64) {
        self.intervals += 1;
        // Only time spent wholly in the probe's phase counts.
        if iv.phase_changed || (iv.phase.is_some() && iv.phase != self.phase) {
            self.off_phase += 1;
            return;
        }
        self.all_amount += iv.amount;
        self.all_time += dt;
        for (tid, idx, a) in &iv.per_thread {
            let e = self.per_thread_all.entry(*tid).or_insert((*idx, 0.0, 0.0));
            e.1 += a;
            e.2 += dt;
        }
        if iv.disturbed {
            self.disturbed += 1;
            return;
        }
        if iv.team_lag {
            self.lagged += 1;
            return;
        }
        self.good_amount += iv.amount;
        self.good_time += dt;
        let (a, t) = self.pending.take().unwrap_or((0.0, 0.0));
        let (a, t) = (a + iv.amount, t + dt);
        if t >= self.tick {
            self.rates.push(a / t);
        } else {
            self.pending = Some((a, t));
        }
        if let Some((p, name)) = iv.progress {
            let e = self.progress.get_or_insert((0.0, 0.0, name));
            e.0 += p;
            e.1 += dt;
        }
        for (tid, idx, a) in &iv.per_thread {
            let e = self.per_thread.entry(*tid).or_insert((*idx, 0.0, 0.0));
            e.1 += a;
            e.2 += dt;
        }
    }

    /// The readings gathered towards a tick become one, however short.
    pub(super) fn flush(&mut self) {
        if let Some((a, t)) = self.pending.take().filter(|p| p.1 > 0.0) {
            self.rates.push(a / t);
        }
    }

    /// Adds `iv` as a tick of its own (a look that ends the probe), after those gathered.
    pub(super) fn add_alone(&mut self, iv: &Interval, dt: f64) {
        self.flush();
        self.add(iv, dt);
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(start: f64, amount: f64, team_lag: bool) -> Interval {
        Interval {
            start,
            end: start + 0.1,
            amount,
            team_lag,
            ..Interval::default()
        }
    }

    #[test]
    fn intervals_whose_team_was_not_yet_the_candidates_are_left_out() {
        // A whole-team candidate after a one-thread team: the region begun under one
        // thread ran on at its rate (1000 an interval) before the two-thread team came
        // (500 an interval). Only the candidate's own intervals count.
        let mut acc = ProbeAccumulator::new(2, 0.0, 0.0, 0.4, None);
        acc.tick = 0.1;
        for (i, (amount, lag)) in [
            (1000.0, true),
            (1000.0, true),
            (500.0, false),
            (500.0, false),
        ]
        .into_iter()
        .enumerate()
        {
            acc.add(&interval(0.1 * i as f64, amount, lag), 0.1);
        }
        assert_eq!(acc.lagged, 2);
        assert_eq!((acc.good_amount, acc.good_time), (1000.0, 0.2));
        assert_eq!(acc.rates, vec![5000.0, 5000.0]);
    }
}
