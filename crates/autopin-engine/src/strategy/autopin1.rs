//! `autopin1`: the original algorithm. Let the program initialize for `i` seconds, then for
//! each candidate in order: pin it, warm up `w` seconds (the first candidate was pinned at
//! thread birth, so it needs no warm-up beyond `i`), measure `t` seconds; keep the best.

use super::{decide_by_means, ProbeOutcome, Step, Strategy};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Autopin1Params {
    pub init: f64,
    pub warmup: f64,
    pub sample: f64,
}

impl Autopin1Params {
    /// The paper's defaults: t = 30 s, w = t/2, i = w.
    pub fn paper() -> Self {
        Autopin1Params {
            init: 15.0,
            warmup: 15.0,
            sample: 30.0,
        }
    }
    /// Defaults derived from a sample time the way the paper does (w = t/2, i = w), with
    /// explicit values taking precedence.
    pub fn from_parts(t: Option<f64>, w: Option<f64>, i: Option<f64>) -> Self {
        let t = t.unwrap_or(30.0);
        let w = w.unwrap_or(t / 2.0);
        let i = i.unwrap_or(w);
        Autopin1Params {
            init: i,
            warmup: w,
            sample: t,
        }
    }
}

pub struct Autopin1 {
    params: Autopin1Params,
    samples: Vec<Vec<f64>>,
    next_candidate: usize,
}

impl Autopin1 {
    pub fn new(params: Autopin1Params, candidates: usize) -> Self {
        Autopin1 {
            params,
            samples: vec![Vec::new(); candidates],
            next_candidate: 0,
        }
    }
}

impl Strategy for Autopin1 {
    fn name(&self) -> &'static str {
        "autopin1"
    }
    fn settings(&self) -> String {
        format!(
            "autopin1 over {} candidates, {:?}",
            self.samples.len(),
            self.params
        )
    }
    fn next(&mut self, _elapsed: f64) -> Step {
        let n = self.samples.len();
        if self.next_candidate < n {
            let c = self.next_candidate;
            // The first candidate is pinned at thread birth and the session already waited `i`
            // seconds (init), so it needs no extra warm-up.
            let warmup = if c == 0 { 0.0 } else { self.params.warmup };
            return Step::Probe {
                candidate: c,
                warmup,
                measure: self.params.sample,
            };
        }
        let alive = vec![true; n];
        match decide_by_means(&self.samples, &alive, "all candidates probed once") {
            Some(d) => Step::Decide(d),
            None => Step::Decide(super::Decision::unmeasured(
                0,
                "no probe produced a rate; keeping the first candidate",
            )),
        }
    }
    fn record(&mut self, outcome: ProbeOutcome) {
        if outcome.candidate < self.samples.len() {
            self.samples[outcome.candidate].push(outcome.score);
            self.next_candidate = self.next_candidate.max(outcome.candidate + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_in_order_and_keeps_best() {
        let mut s = Autopin1::new(Autopin1Params::from_parts(Some(2.0), None, None), 3);
        assert_eq!(s.params.warmup, 1.0);
        assert_eq!(s.params.init, 1.0);
        for (c, score) in [(0, 5.0), (1, 9.0), (2, 7.0)] {
            match s.next(0.0) {
                Step::Probe {
                    candidate, measure, ..
                } => {
                    assert_eq!(candidate, c);
                    assert_eq!(measure, 2.0);
                }
                p => panic!("unexpected {p:?}"),
            }
            s.record(ProbeOutcome {
                candidate: c,
                score,
                duration: 2.0,
                interval_cv: None,
                interval_range: None,
                intervals: 0,
                ended_collapsed: false,
            });
        }
        match s.next(0.0) {
            Step::Decide(d) => {
                assert_eq!(d.candidate, 1);
                assert_eq!(d.runner_up, Some(2));
                assert!((d.margin.unwrap() - 2.0 / 7.0).abs() < 1e-12);
            }
            p => panic!("unexpected {p:?}"),
        }
    }
}
