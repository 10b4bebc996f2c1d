//! One reading, by the state it finds the session in (`on_interval`): the init waits for the
//! program's start-up (`on_init`), a warm-up's end starts the probe or is the probe
//! (`on_warmup`), a probe gathers its ticks until it is long enough or seen enough
//! (`on_measure`), and after a decision the phase watch looks for a reason to search again
//! (`on_decided`). A probe the strategy watches is looked at between ticks (`look_due`).

use super::grain::Granularity;
use super::probe::ProbeAccumulator;
use super::startup::STARTUP_ENOUGH;
use super::{oriented, Action, Interval, Session, State};
use crate::phase::Trigger;
use crate::report::TimelinePoint;
use crate::strategy::{COLLAPSE, WARMUP_CUT};
use autopin_human::quantity;

/// How often a watched probe is looked at between its ticks (`Session::look_due`), seconds:
/// a collapse then costs a look, not the rest of a tick. GROMACS's OS placement beside a
/// busy CPU read 13 000 OpenMP constructs/s at one tick and 190 at the next, a whole tick
/// at 1.5% of the leader's rate.
const LOOK: f64 = 0.02;

/// The looks at a watched probe gather into ticks at least this long, seconds (most of the
/// driver's 0.1 s tick): the race's tick statistics keep their length.
const LOOK_TICK: f64 = 0.09;

/// One reading as the state handlers take it: the interval, its end (`now`), its length, the
/// objective's rate over it, and the slack within which a deadline counts as reached.
#[derive(Clone, Copy)]
struct Reading<'a> {
    iv: &'a Interval,
    now: f64,
    dt: f64,
    rate: f64,
    slack: f64,
}

impl Session {
    /// Feeds one interval; returns what to do.
    pub fn on_interval(&mut self, iv: &Interval) -> Vec<Action> {
        // Phases set aside: the interval is the whole program's.
        let whole;
        let iv = if self.phases_aside && (iv.phase.is_some() || iv.phase_changed) {
            whole = Interval {
                phase: None,
                phase_changed: false,
                ..iv.clone()
            };
            &whole
        } else {
            iv
        };
        let dt = (iv.end - iv.start).max(1e-9);
        let rate = iv.amount / dt;
        self.tracked = iv.tracked;
        self.saw_threads(iv.tracked, iv.existed);
        let applied = self.applied.and_then(|i| self.report_id(i));
        self.report.timeline.push(TimelinePoint {
            t: iv.end,
            rate,
            candidate: applied,
            state: self.state_name().into(),
            phase: iv.phase.clone().or_else(|| self.phase.clone()),
        });
        let now = iv.end;
        self.last_reading = now;
        // A deadline counts as reached at the tick nearest to it: ticks wake a little late
        // or early (sleep jitter), and waiting for the next one would stretch every warm-up
        // and probe by a whole tick.
        let slack = 0.5 * dt;
        self.grain.observe(iv.amount, dt);
        let mut out = Vec::new();
        // A program that announces phases is searched phase by phase: probes of different
        // phases are never compared (their rates can differ by orders of magnitude).
        if iv.phase.is_some() && iv.phase != self.phase {
            // The start-up's tail starts again in the new phase. A program that names its
            // phase as its work begins (syncbench announces its barrier phase before the
            // first barrier) made progress in the interval that spans the change: that is the
            // first interval with progress, which the start-up drops anyway (the program was
            // loading before it), so the clean tail starts with the next interval instead of
            // a tick later.
            if matches!(self.state, State::Init { .. }) && self.searches_started == 0 {
                self.startup = None;
                self.startup_progressed |= iv.amount > 0.0;
            }
            if self.phases_too_brief(now, &mut out) {
                return out;
            }
            let to = iv.phase.clone();
            self.switch_phase(now, to, &mut out);
            return out;
        }
        if matches!(self.state, State::Init { .. }) {
            self.note_startup(iv);
        } else if self.candidates.len() > 1 && !self.stood_back {
            if let Some(was) = self.growth.outgrown(now, self.tracked) {
                self.search_for_more_threads(now, was, &mut out);
                return out;
            }
        }
        // A watched probe's readings (looks between its ticks) gather into ticks.
        let watched = match &self.state {
            State::Measure(acc) => self.looks_at(acc.cand),
            _ => false,
        };
        if let State::Measure(acc) = &mut self.state {
            acc.tick = if watched { LOOK_TICK } else { 0.0 };
        }
        let collapsed = watched && self.collapsed_at_look(iv, dt, rate);
        let reading = Reading {
            iv,
            now,
            dt,
            rate,
            slack,
        };
        match &self.state {
            State::Init { .. } => self.on_init(&reading, &mut out),
            State::Warmup { .. } => self.on_warmup(&reading, &mut out),
            State::Measure(_) if collapsed => self.on_collapse(&reading, &mut out),
            State::Measure(_) => self.on_measure(&reading, &mut out),
            State::Decided { .. } => self.on_decided(&reading, &mut out),
        }
        out
    }

    /// Init: the first search begins once the init time is over (or, when the start-up ends
    /// the init, once its clean tail has been seen) and the objective has counted something.
    fn on_init(&mut self, reading: &Reading, out: &mut Vec<Action>) {
        let Reading { iv, now, slack, .. } = *reading;
        let State::Init { until } = &mut self.state else {
            return;
        };
        // Nothing to compare while the program reports no progress at all (a
        // heartbeat before its work loop starts): wait, up to `init_extra` more.
        let idle = iv.amount <= 0.0 && now < *until + self.cfg.init_extra;
        // The rest of the init would only keep the program where the OS placed it,
        // which beside a busy CPU can be several times slower than the pinning the
        // search finds.
        let seen = self.cfg.startup_ends_init
            && self
                .startup
                .as_ref()
                .is_some_and(|a| a.good_time >= STARTUP_ENOUGH - slack);
        if (now >= *until - slack || seen) && !idle {
            self.first_search(now, out);
        } else if now >= *until - slack && !self.said_no_progress {
            self.said_no_progress = true;
            out.push(Action::Message(format!(
                "warning: the objective ({}) has measured no progress yet, {now:.1} s into the program; probing waits for it, up to {:.1} s more",
                self.cfg.unit,
                (*until + self.cfg.init_extra - now).max(0.0)
            )));
        }
    }

    /// A warm-up: at its end the probe begins, unless the warm-up's reading already shows
    /// the candidate far behind, when that reading is the probe.
    fn on_warmup(&mut self, reading: &Reading, out: &mut Vec<Action>) {
        let Reading {
            iv,
            now,
            dt,
            rate,
            slack,
        } = *reading;
        let State::Warmup {
            cand,
            until,
            measure,
            asked,
            warmup,
            phase,
        } = &mut self.state
        else {
            return;
        };
        if now >= *until - slack {
            let (cand, measure, asked, warmup) = (*cand, *measure, *asked, *warmup);
            let phase = phase.clone();
            let mut acc = ProbeAccumulator::new(cand, warmup, now, now + measure, phase);
            acc.asked_until = now + asked;
            // A warm-up that already shows the candidate far behind the leader (a
            // spinning barrier whose threads now share a CPU, a thread on a busy CPU)
            // is its probe: a tick more of it would be work lost. The reading must be
            // clean (no thread came or went, one phase) and fine enough to be a rate.
            let clean = iv.clean_in(&acc.phase);
            let readable = clean && self.grain.resolves(dt, WARMUP_CUT);
            let score = self.score(rate);
            if let Some(s) = self.strategy.as_mut().filter(|_| readable) {
                s.warmed_up(cand, score);
            }
            let behind = readable
                && self
                    .strategy
                    .as_ref()
                    .is_some_and(|s| s.behind_at_warmup(cand, score));
            if behind {
                // The warm-up was the measurement.
                acc.warmup = 0.0;
                acc.start = iv.start;
                acc.add(iv, dt);
                self.finish_probe(now, acc, out);
            } else {
                self.state = State::Measure(acc);
            }
        }
    }

    /// A probe whose look read a collapse (`collapsed_at_look`): it ends there.
    fn on_collapse(&mut self, reading: &Reading, out: &mut Vec<Action>) {
        let Reading { iv, now, dt, .. } = *reading;
        let State::Measure(acc) = &mut self.state else {
            return;
        };
        // The collapse is a tick of its own, after those of the probe so far.
        acc.add_alone(iv, dt);
        acc.ended_collapsed = true;
        let acc = acc.clone();
        self.finish_probe(now, acc, out);
    }

    /// A probe: the reading is one more tick of it; it ends at its length, once it has seen
    /// enough units of a coarse objective, or when the strategy has seen enough of it.
    fn on_measure(&mut self, reading: &Reading, out: &mut Vec<Action>) {
        let Reading {
            iv, now, dt, slack, ..
        } = *reading;
        let State::Measure(acc) = &mut self.state else {
            return;
        };
        acc.add(iv, dt);
        // A probe that has seen no completed unit of a coarse objective (an OpenMP
        // region longer than the probe) knows nothing yet: it goes on, up to
        // `Granularity::MAX_PROBE`. Not when a tenth of the program's rate so far
        // would have shown enough units in that time: then seeing none is the
        // candidate's collapse, and every further tick of it is lost (16 threads of
        // syncbench, 300 000 beats/s, beside a busy CPU counted no beat where the OS
        // placed them, and the probe went on waiting for one for 3.5 s).
        let elapsed = now - acc.start;
        let blind = self.grain.counts_units()
            && acc.good_amount <= 0.0
            && elapsed < Granularity::MAX_PROBE
            && !self.grain.resolves(elapsed, COLLAPSE);
        // A probe whose every reading so far ran a region begun under another team size
        // (`Interval::team_lag`) has measured another candidate: it waits for the
        // candidate's team, up to `Granularity::MAX_PROBE` too.
        let waiting_team =
            acc.lagged > 0 && acc.good_time <= 0.0 && elapsed < Granularity::MAX_PROBE;
        let blind = blind || waiting_team;
        // The strategy may end a probe early once its ticks put the candidate out of
        // the running (each further tick of it is lost work). Not on a coarse
        // objective, whose ticks are mostly rounding.
        let hib = self.cfg.higher_is_better;
        let seen_enough = !blind
            && !self.grain.coarse()
            && now < acc.until - slack
            && self.strategy.as_ref().is_some_and(|s| {
                let ticks: Vec<f64> = acc.rates.iter().map(|r| oriented(hib, *r)).collect();
                !ticks.is_empty() && s.seen_enough(acc.cand, &ticks)
            });
        // A probe lengthened to see `MIN_UNITS` units at the rate seen so far (a
        // start-up that paused, GROMACS reading its input after its first
        // construct) ends once it has seen them and lasted as long as asked.
        let grain_seen = acc.until > acc.asked_until + slack
            && now >= acc.asked_until - slack
            && acc.good_amount >= Granularity::MIN_UNITS;
        if seen_enough {
            let acc = acc.clone();
            self.finish_probe(now, acc, out);
        } else if blind && now >= acc.until - slack {
            acc.until = now + dt;
        } else if now >= acc.until - slack || grain_seen {
            let acc = acc.clone();
            self.finish_probe(now, acc, out);
        }
    }

    /// Decided: the running rate every `report_every`, and the phase watch, which may start
    /// a new search.
    fn on_decided(&mut self, reading: &Reading, out: &mut Vec<Action>) {
        let Reading {
            iv, now, dt, rate, ..
        } = *reading;
        let State::Decided {
            since_report,
            amount,
        } = &mut self.state
        else {
            return;
        };
        *since_report += dt;
        *amount += iv.amount;
        if *since_report >= self.cfg.report_every - 1e-9 {
            let r = *amount / *since_report;
            *since_report = 0.0;
            *amount = 0.0;
            let label = self.applied().map(|c| c.label.clone()).unwrap_or_default();
            out.push(Action::Message(format!(
                "t={now:.1}s rate {} with {label}",
                quantity(r, &self.cfg.unit)
            )));
        }
        let score = self.score(rate);
        // Phase changes are handled above; the watch looks for rate drops within a
        // phase (programs that announce no phases), skipping mixed intervals.
        let watch = if iv.phase_changed {
            None
        } else {
            self.watch.as_mut()
        };
        if let Some(w) = watch {
            if let Some(trig) = w.observe(now, dt, score, None) {
                let why = match &trig {
                    Trigger::RateDrop {
                        reference,
                        observed,
                    } => format!(
                        "rate dropped to {:.0}% of the decided rate",
                        100.0 * observed / reference.max(1e-300)
                    ),
                    Trigger::PhaseChange { from, to } => {
                        format!(
                            "program phase changed from {} to {to}",
                            from.clone().unwrap_or_else(|| "(none)".into())
                        )
                    }
                };
                self.search_again(now, why, out);
            }
        }
    }

    /// When a look at the probe in progress is due before the next tick (session time):
    /// `LOOK` after the last reading, for a probe of a candidate the strategy watches
    /// (`Strategy::watched`) on an objective fine enough that a look that short reads a
    /// collapse. None otherwise. A driver that reads its counters then and hands the reading
    /// to `on_interval` lets a collapse end the probe a look after it began.
    pub fn look_due(&self) -> Option<f64> {
        match &self.state {
            State::Measure(acc) if self.looks_at(acc.cand) => Some(self.last_reading + LOOK),
            _ => None,
        }
    }

    /// A reading of a probe being watched (`looks_at`; a look, or a tick) that shows a
    /// collapse: clean, fine enough to be a rate, and far below the leader by the strategy's
    /// judgement (`Strategy::collapsed`). The probe ends there.
    fn collapsed_at_look(&self, iv: &Interval, dt: f64, rate: f64) -> bool {
        let State::Measure(acc) = &self.state else {
            return false;
        };
        let clean = iv.clean_in(&acc.phase);
        let cand = acc.cand;
        let score = self.score(rate);
        clean
            && self.grain.resolves(dt, COLLAPSE)
            && self
                .strategy
                .as_ref()
                .is_some_and(|s| s.collapsed(cand, score))
    }

    /// Whether probes of `cand` are looked at between ticks now.
    fn looks_at(&self, cand: usize) -> bool {
        self.grain.resolves(LOOK, COLLAPSE)
            && self.strategy.as_ref().is_some_and(|s| s.watched(cand))
    }
}
