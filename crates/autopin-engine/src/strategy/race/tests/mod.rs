//! The race's tests, a file a concern, and the drivers they share: a race run to its
//! decision on probe outcomes a test makes up (`drive_race`), with warm-ups read at a share
//! of each probe (`drive_race_warm`).

mod basics;
mod dominance;
mod faster_race;
mod level_change;
mod lost_work;

use super::{Race, RaceParams};
use crate::strategy::{Decision, ProbeOutcome, Step, Strategy};

/// Drives `r` to its decision; `outcome(candidate, probe#, measure)` says what each
/// probe measured. Returns the decision, the probes in order and the search time.
fn drive_race(
    r: Race,
    outcome: impl FnMut(usize, usize, f64) -> ProbeOutcome,
) -> (Decision, Vec<usize>, f64) {
    drive_race_warm(r, None, outcome)
}

/// [`drive_race`] where every warm-up reads `warm` of its probe's score, when given
/// (`Strategy::warmed_up`).
fn drive_race_warm(
    mut r: Race,
    warm: Option<f64>,
    mut outcome: impl FnMut(usize, usize, f64) -> ProbeOutcome,
) -> (Decision, Vec<usize>, f64) {
    let mut t = 0.0;
    let mut order = Vec::new();
    loop {
        match r.next(t) {
            Step::Probe {
                candidate,
                warmup,
                measure,
            } => {
                t += warmup + measure;
                let k = order.iter().filter(|c| **c == candidate).count();
                order.push(candidate);
                let o = outcome(candidate, k, measure);
                if let Some(w) = warm.filter(|_| warmup > 0.0) {
                    r.warmed_up(candidate, w * o.score);
                }
                r.record(o);
            }
            Step::Decide(d) => return (d, order, t),
        }
    }
}
