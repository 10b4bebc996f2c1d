//! The program's start-up: its clean tail, where the OS placed it or where it was pinned at
//! birth, kept (`note_startup`) as that candidate's first probe when the first search begins
//! (`startup_probe`).

use super::probe::ProbeAccumulator;
use super::{Interval, Session};
use autopin_placement::Pinning;

/// Least clean start-up time that makes the OS placement's first probe, seconds: most of
/// a tick (ticks wake a little late or early).
const MIN_STARTUP_PROBE: f64 = 0.07;

/// The most of the start-up's clean tail kept as a first probe, seconds: once it holds this
/// much it starts again. A start-up waited out in full (a program born pinned off busy
/// CPUs, searched after 1.5 s) is long, and a program's first second is not its rate: GROMACS
/// beside a busy CPU ran 10 000 OpenMP constructs/s over its first 1.3 s and 13 000 after,
/// and that 1.3 s, weighed by its length, held its pinning level with an OS placement of
/// 4 000–12 000 for 13 probes. The tail kept is 0.1–0.3 s, as long as a probe.
const STARTUP_TAIL: f64 = 0.3;

/// A clean start-up tail this long ends the init (`SessionConfig::startup_ends_init`):
/// one tick. Beside a busy CPU every further tick of the start-up, where the OS placed the
/// threads, may run at a fraction of the pinning's rate, and a second tick adds little to
/// the OS placement's judgement: the race waits for its third probe and eighth tick (or its
/// swing) anyway, and one tick is enough for the half-the-leader rule. (Two ticks before:
/// GROMACS beside a busy CPU ran 1.031× the best fixed pinning with them, 1.021× with one,
/// 7 interleaved rounds; docs/search.md.)
pub(crate) const STARTUP_ENOUGH: f64 = 0.1;

impl Session {
    /// Readings of the program's start-up taken before the session began (while the
    /// objective was being chosen), in order: they count as the session's own start-up.
    pub fn seed_startup(&mut self, intervals: &[Interval]) {
        for iv in intervals {
            self.grain.observe(iv.amount, (iv.end - iv.start).max(1e-9));
            self.note_startup(iv);
        }
    }

    /// Keeps the start-up's clean tail for the OS placement's first probe: what follows the
    /// first interval that counted anything (before it the program was loading), since the
    /// last change of its threads (a program still creating threads is not yet the program
    /// the search will see).
    pub(super) fn note_startup(&mut self, iv: &Interval) {
        if !self.startup_probed() || self.searches_started > 0 {
            return;
        }
        if !self.startup_progressed {
            self.startup_progressed = iv.amount > 0.0;
            return;
        }
        if iv.disturbed || iv.phase_changed {
            self.startup = None;
            return;
        }
        let dt = (iv.end - iv.start).max(1e-9);
        if self
            .startup
            .as_ref()
            .is_some_and(|a| a.good_time >= STARTUP_TAIL - 0.5 * dt)
        {
            self.startup = None;
        }
        self.startup
            .get_or_insert_with(|| {
                ProbeAccumulator::new(usize::MAX, 0.0, iv.start, f64::INFINITY, iv.phase.clone())
            })
            .add(iv, dt);
    }

    /// Whether the start-up's tail is a candidate's probe: the program started where the
    /// OS places it, or pinned to a candidate's CPUs.
    pub(super) fn startup_probed(&self) -> bool {
        self.cfg.startup_is_os || self.cfg.startup_pinned.is_some()
    }

    /// The candidate the program ran on during its start-up: the OS placement, or the
    /// candidate whose CPUs its threads were pinned to at birth (None when the list for
    /// the threads found has no such candidate). A team candidate only where a team was
    /// asked at birth and the search offers it (the program may change its team then, so
    /// it took the team at its second region); otherwise the program ran its own count,
    /// whatever CPUs a smaller team's spare threads would share.
    fn startup_candidate(&self, os: Option<usize>) -> Option<usize> {
        let Some(cpus) = &self.cfg.startup_pinned else {
            return os.filter(|_| self.cfg.startup_is_os);
        };
        let n = self.tracked.max(1);
        let born_on = Pinning::from_cpus(cpus.clone());
        let born = born_on.cpus_for(n);
        let team = self.cfg.startup_team.and_then(|k| {
            let on = born_on.cpus_for(k);
            self.candidates
                .iter()
                .position(|c| c.team == Some(k) && c.cpus_for(k) == on)
        });
        team.or_else(|| {
            self.candidates
                .iter()
                .position(|c| !c.is_unpinned() && c.team.is_none() && c.cpus_for(n) == born)
        })
    }

    /// The start-up's tail as its candidate's first probe (the OS placement's, or the
    /// pinning it was born on), when the first search begins with the program still
    /// there, in the phase it started in.
    pub(super) fn startup_probe(&mut self, os: Option<usize>) -> Option<ProbeAccumulator> {
        let mut acc = self.startup.take()?;
        let usable = self.searches_started == 1
            && self.applied.is_none()
            && acc.phase == self.phase
            && acc.off_phase == 0
            && acc.good_time >= MIN_STARTUP_PROBE
            && self
                .strategy
                .as_ref()
                .is_some_and(|s| s.takes_earlier_probes());
        acc.cand = self.startup_candidate(os).filter(|_| usable)?;
        Some(acc)
    }
}
