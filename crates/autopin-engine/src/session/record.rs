//! Probe accounting: a finished probe into the report (its rate, ticks, threads) and before
//! the strategy (`record_probe`), and what the current search measured of each candidate, the
//! evidence behind every margin a decision states (`evidence`).

use super::grain::Granularity;
use super::margin::Evidence;
use super::probe::ProbeAccumulator;
use super::{Action, Session};
use crate::report::{ProbeRecord, ThreadRate};
use crate::strategy::ProbeOutcome;
use autopin_human::{duration, quantity};

impl Session {
    pub(super) fn finish_probe(&mut self, now: f64, acc: ProbeAccumulator, out: &mut Vec<Action>) {
        self.record_probe(acc, false, out);
        self.next_step(now, out);
    }

    /// Puts a probe in the report and before the strategy; `startup`: measured while the
    /// program started, before the search.
    pub(super) fn record_probe(
        &mut self,
        mut acc: ProbeAccumulator,
        startup: bool,
        out: &mut Vec<Action>,
    ) {
        acc.flush();
        // Intervals where threads came or went are left out so that a half-counted thread
        // does not look like a rate change; with continuous churn nothing would be left, so
        // then every interval counts and the probe says so.
        let churn = acc.good_time <= 0.0;
        let (amount, time, threads) = if churn {
            (acc.all_amount, acc.all_time, &acc.per_thread_all)
        } else {
            (acc.good_amount, acc.good_time, &acc.per_thread)
        };
        // Not one unit in the whole (extended) probe: the rate is below one unit per probe,
        // not zero; that upper bound is what the strategy sees.
        let unseen = self.grain.counts_units() && amount <= 0.0 && time > 0.0;
        // The start-up's tail is not lengthened until it has seen enough units to be a rate,
        // as a probe is (`Granularity::MIN_UNITS`): with fewer, it is the OS placement's
        // first probe no more, and the search probes it first instead. Seeing none says the
        // program paused (GROMACS reads its input after its first constructs), not how fast
        // it runs where the OS placed it: taken as a rate, it made the OS placement look as
        // if it collapsed ("×2.8" where its probes in the search were 1.5× behind).
        if startup && self.grain.counts_units() && amount < Granularity::MIN_UNITS {
            out.push(Action::Message(
                self.too_few_said(acc.cand, amount, time, unseen),
            ));
            return;
        }
        let rate = if unseen {
            1.0 / time
        } else if time > 0.0 {
            amount / time
        } else {
            0.0
        };
        let label = self
            .candidates
            .get(acc.cand)
            .map(|c| c.label.clone())
            .unwrap_or_default();
        let per_thread = threads
            .iter()
            .map(|(tid, (index, a, t))| ThreadRate {
                tid: *tid,
                index: *index,
                rate: if *t > 0.0 { a / t } else { 0.0 },
            })
            .collect();
        let ticks = if churn { Vec::new() } else { acc.rates.clone() };
        self.report.probes.push(ProbeRecord {
            search: self.search,
            candidate: self.report_id(acc.cand).unwrap_or(acc.cand),
            label: label.clone(),
            start: acc.start,
            warmup: acc.warmup,
            duration: time,
            rate,
            ticks,
            per_thread,
            intervals: acc.intervals,
            disturbed_intervals: acc.disturbed,
            churn,
            phase: acc.phase.clone(),
            off_phase_intervals: acc.off_phase as usize,
            team_lag_intervals: acc.lagged as usize,
            progress_rate: acc
                .progress
                .filter(|p| !churn && p.1 > 0.0)
                .map(|p| p.0 / p.1),
            startup,
        });
        if let Some((_, _, name)) = acc.progress {
            self.progress_source = Some(name);
        }
        out.push(Action::Message(format!(
            "probe {label:<24} {}{} over {}{}",
            if unseen { "below " } else { "" },
            quantity(rate, &self.cfg.unit),
            duration(time),
            if churn {
                " (threads changing throughout)"
            } else if startup {
                " (the end of the start-up)"
            } else {
                ""
            }
        )));
        self.tell_strategy(&acc, rate, time);
    }

    /// Why a start-up's tail that counted fewer than `Granularity::MIN_UNITS` units of a
    /// coarse objective (`amount` over `time` seconds, none at all when `unseen`) is not
    /// candidate `cand`'s first probe.
    fn too_few_said(&self, cand: usize, amount: f64, time: f64, unseen: bool) -> String {
        let place = if self.candidates.get(cand).is_some_and(|c| !c.is_unpinned()) {
            "the pinning it started on"
        } else {
            "the OS placement"
        };
        if unseen {
            format!(
                "the start-up's last {} counted nothing ({}): a pause, not a rate; {place} is probed in the search",
                duration(time),
                self.cfg.unit
            )
        } else {
            format!(
                "the start-up's last {} counted only {amount} ({}; a probe sees {} or more): too few for a rate; {place} is probed in the search",
                duration(time),
                self.cfg.unit,
                Granularity::MIN_UNITS
            )
        }
    }

    /// The probe `acc` before the strategy, at `rate` over `time` seconds as the report has
    /// it, with the spread and range of its ticks.
    fn tell_strategy(&mut self, acc: &ProbeAccumulator, rate: f64, time: f64) {
        let cv = autopin_stats::cv(&acc.rates);
        let range = (!acc.rates.is_empty()).then(|| {
            acc.rates
                .iter()
                .map(|r| self.score(*r))
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                    (lo.min(x), hi.max(x))
                })
        });
        // A probe that ended at a look reading a collapse is taken, by the strategy, as
        // having run its planned length in that state: the state carries on past the look
        // (GROMACS's stacked threads stayed so for seconds), and a mean over the fast part
        // and a few ms of the slow one would read the candidate faster than it runs.
        let (rest, slow) = match acc.rates.last() {
            Some(&slow) if acc.ended_collapsed => ((acc.until - acc.start - time).max(0.0), slow),
            _ => (0.0, 0.0),
        };
        let rate = (rate * time + slow * rest) / (time + rest).max(1e-12);
        let score = self.score(rate);
        if let Some(s) = self.strategy.as_mut() {
            if time > 0.0 {
                s.record(ProbeOutcome {
                    candidate: acc.cand,
                    score,
                    duration: time + rest,
                    interval_cv: cv,
                    interval_range: range,
                    intervals: acc.rates.len(),
                    ended_collapsed: acc.ended_collapsed,
                });
            }
        }
    }

    /// What the current search measured of each candidate of its list, the start-up left
    /// out: the evidence behind every margin a decision states (`margin`) and the rule for
    /// risky decisions (`risk`).
    pub(super) fn evidence(&self) -> Vec<Evidence> {
        let mut ev = vec![Evidence::default(); self.candidates.len()];
        let probes = self
            .report
            .probes
            .iter()
            .filter(|p| p.search == self.search && !p.startup && p.duration > 0.0);
        for p in probes {
            if let Some(i) = self.report_ids.iter().position(|&r| r == p.candidate) {
                ev[i].add(
                    self.score(p.rate),
                    p.duration,
                    p.ticks.iter().map(|t| self.score(*t)),
                );
            }
        }
        ev
    }
}
