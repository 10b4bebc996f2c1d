//! `fixed`: pin one candidate and keep it (what `autopin pin` does), no probing.

use super::{Decision, ProbeOutcome, Step, Strategy};

pub struct Fixed {
    candidate: usize,
}

impl Fixed {
    pub fn new(candidate: usize) -> Self {
        Fixed { candidate }
    }
}

impl Strategy for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn next(&mut self, _elapsed: f64) -> Step {
        Step::Decide(Decision::unmeasured(
            self.candidate,
            "fixed strategy: one pinning, nothing probed",
        ))
    }
    fn record(&mut self, _outcome: ProbeOutcome) {}
}
