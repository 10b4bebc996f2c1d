//! A watch over one program, look by look: what `autopin stat` keeps between the looks the
//! OS layer takes (the first, the last, the threads that ended between looks, the CPUs each
//! thread was seen running on, the samples for `--csv` and `--svg`), when an `-I` interval
//! or the watch ends, and the reports over an interval and over the whole watch. No system
//! call: the caller takes each look and hands it over, so that the same watch runs on
//! recorded looks in a test.

use crate::context::Context;
use crate::sample::{CpusSeen, Snapshot, ThreadSample};
use crate::verdict::{analyze, IntervalTally, StatReport};

/// How long to watch and what to keep besides the figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct WatchPlan {
    /// A report every this many seconds (`-I`).
    pub interval: Option<f64>,
    /// Stop after this many seconds (None: until the program ends).
    pub duration: Option<f64>,
    /// Keep the looks for the picture (`--svg`), thinned on long runs.
    pub picture: bool,
}

/// What a moment of the watch calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    /// An interval's report is due.
    pub interval_due: bool,
    /// The watch is over (its duration is reached).
    pub ending: bool,
}

impl Moment {
    /// The look at this moment needs the surroundings too (other processes, where the
    /// pages are): a report is made of it. Other looks read only the threads, which is
    /// cheap, so that looks can be frequent.
    pub fn full_look(&self) -> bool {
        self.interval_due || self.ending
    }
}

/// One `-I` interval's report, and its span on the watch's clock.
#[derive(Debug, Clone)]
pub struct IntervalReport {
    pub from: f64,
    pub to: f64,
    pub report: StatReport,
}

/// See the module's comment.
#[derive(Debug, Clone)]
pub struct Watch {
    ctx: Context,
    plan: WatchPlan,
    first: Snapshot,
    last: Snapshot,
    interval_from: Snapshot,
    /// Threads that ended between looks, at their last counters: over the whole watch,
    /// and since the interval's start.
    ended: Vec<ThreadSample>,
    ended_in_interval: Vec<ThreadSample>,
    seen: CpusSeen,
    csv: String,
    looks: Option<Vec<Snapshot>>,
    tally: Option<IntervalTally>,
}

impl Watch {
    /// A watch that begins at `first` (a full look).
    pub fn new(first: Snapshot, ctx: Context, plan: WatchPlan) -> Self {
        let mut w = Watch {
            ctx,
            plan,
            last: first.clone(),
            interval_from: first.clone(),
            first: first.clone(),
            ended: Vec::new(),
            ended_in_interval: Vec::new(),
            seen: CpusSeen::default(),
            csv: String::from("t,tid,name,cpu,cpu_seconds,wait_seconds\n"),
            looks: plan.picture.then(Vec::new),
            tally: plan.interval.map(|_| IntervalTally::default()),
        };
        w.keep(&first);
        w
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// What `elapsed` seconds (on the looks' clock) call for.
    pub fn at(&self, elapsed: f64) -> Moment {
        Moment {
            interval_due: self
                .plan
                .interval
                .is_some_and(|i| elapsed - self.interval_from.t >= i - 1e-9),
            ending: self.plan.duration.is_some_and(|d| elapsed >= d),
        }
    }

    /// Takes in a look after the first.
    pub fn record(&mut self, look: Snapshot) {
        self.keep(&look);
        let gone = look.ended_since(&self.last);
        self.ended.extend(gone.iter().cloned());
        self.ended_in_interval.extend(gone);
        self.last = look;
    }

    /// The report since the interval began, up to the last look, which begins the next.
    pub fn end_interval(&mut self) -> IntervalReport {
        let upto = self.last.with_ended(&self.ended_in_interval);
        let report = analyze(&self.interval_from, &upto, &self.seen, &self.ctx);
        if let Some(t) = self.tally.as_mut() {
            t.add(&report);
        }
        let from = self.interval_from.t;
        self.interval_from = self.last.clone();
        self.ended_in_interval.clear();
        IntervalReport {
            from,
            to: self.last.t,
            report,
        }
    }

    /// The last look, when it lacks the surroundings a report needs: the program ended
    /// between looks, and the caller reads them now (up to one look later than the
    /// threads, so that a neighbour's share is overstated by at most that much).
    pub fn last_without_surroundings(&mut self) -> Option<&mut Snapshot> {
        (self.last.neighbours.is_empty() && self.last.t > self.first.t).then_some(&mut self.last)
    }

    /// The report over the whole watch, threads that ended before the last look included,
    /// with what the intervals found.
    pub fn report(&self) -> StatReport {
        let mut r = analyze(
            &self.first,
            &self.last.with_ended(&self.ended),
            &self.seen,
            &self.ctx,
        );
        r.intervals = self.tally.clone().filter(|t| t.intervals > 0);
        r
    }

    /// Every sample as CSV (`--csv`): time, thread, CPU, CPU time, wait time.
    pub fn csv(&self) -> &str {
        &self.csv
    }

    /// The threads over time as SVG (`--svg`), titled with what `report` covered; None
    /// when the plan kept no picture.
    pub fn picture(&self, report: &StatReport) -> Option<String> {
        let title = format!(
            "autopin stat: {}, {} thread(s) over {:.1} s",
            self.ctx.subject.name(),
            report.figures.threads.len(),
            report.figures.seconds
        );
        self.looks
            .as_ref()
            .map(|looks| crate::svg::render(looks, &title))
    }

    /// Keeps what every look adds: the CPUs seen, the CSV rows, the picture's look.
    fn keep(&mut self, s: &Snapshot) {
        self.seen.record(s);
        for t in &s.threads {
            self.csv.push_str(&format!(
                "{:.3},{},{},{},{:.6},{:.6}\n",
                s.t,
                t.tid,
                t.name.replace(',', " "),
                t.cpu,
                t.cpu_ns as f64 * 1e-9,
                t.wait_ns as f64 * 1e-9
            ));
        }
        if let Some(looks) = self.looks.as_mut() {
            looks.push(s.clone());
            crate::svg::thin(looks);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: i32, cpu_ms: u64, wait_ms: u64) -> ThreadSample {
        ThreadSample {
            tid,
            name: format!("t{tid}"),
            cpu_ns: cpu_ms * 1_000_000,
            wait_ns: wait_ms * 1_000_000,
            cpu: 0,
            migrations: Some(0),
            voluntary_switches: 0,
            involuntary_switches: 0,
        }
    }

    fn look(t: f64, threads: Vec<ThreadSample>) -> Snapshot {
        Snapshot {
            t,
            threads,
            ..Snapshot::default()
        }
    }

    fn ctx() -> Context {
        Context {
            allowed: vec![0, 1],
            ..Context::default()
        }
    }

    #[test]
    fn intervals_are_due_every_interval_and_the_watch_ends_at_its_duration() {
        let plan = WatchPlan {
            interval: Some(1.0),
            duration: Some(2.5),
            picture: false,
        };
        let mut w = Watch::new(look(0.0, vec![thread(1, 0, 0)]), ctx(), plan);
        assert!(!w.at(0.5).full_look());
        assert!(w.at(1.0).interval_due && !w.at(1.0).ending);
        w.record(look(1.0, vec![thread(1, 900, 0)]));
        let i = w.end_interval();
        assert_eq!((i.from, i.to), (0.0, 1.0));
        // The next interval counts from the look that ended this one.
        assert!(!w.at(1.5).interval_due);
        assert!(w.at(2.0).interval_due);
        assert!(w.at(2.5).ending);
    }

    #[test]
    fn a_thread_that_ended_between_looks_counts_in_its_interval_and_the_whole_watch() {
        let plan = WatchPlan {
            interval: Some(1.0),
            ..WatchPlan::default()
        };
        let mut w = Watch::new(
            look(0.0, vec![thread(1, 0, 0), thread(2, 0, 0)]),
            ctx(),
            plan,
        );
        w.record(look(0.5, vec![thread(1, 500, 0), thread(2, 400, 0)]));
        w.record(look(1.0, vec![thread(1, 1000, 0)]));
        let i = w.end_interval();
        assert_eq!(i.report.figures.threads.len(), 2, "{:?}", i.report);
        w.record(look(2.0, vec![thread(1, 2000, 0)]));
        // The second interval began after thread 2 ended: it is not in it.
        assert_eq!(w.end_interval().report.figures.threads.len(), 1);
        let whole = w.report();
        assert_eq!(whole.figures.threads.len(), 2);
        assert_eq!(whole.intervals.as_ref().map(|t| t.intervals), Some(2));
    }

    #[test]
    fn the_last_look_asks_for_its_surroundings_only_when_it_lacks_them() {
        let first = look(0.0, vec![thread(1, 0, 0)]);
        let mut w = Watch::new(first.clone(), ctx(), WatchPlan::default());
        // Only the first look: the report spans nothing more, nothing to read.
        assert!(w.last_without_surroundings().is_none());
        w.record(look(1.0, vec![thread(1, 1000, 0)]));
        let last = w
            .last_without_surroundings()
            .expect("a look without neighbours");
        last.neighbours.push(crate::sample::Neighbour {
            pid: 7,
            name: "other".into(),
            cpu_ns: 0,
            cpus: vec![0],
        });
        assert!(w.last_without_surroundings().is_none());
    }

    #[test]
    fn every_look_is_a_csv_row_per_thread_and_the_picture_only_when_planned() {
        let mut w = Watch::new(
            look(0.0, vec![thread(1, 0, 0)]),
            ctx(),
            WatchPlan::default(),
        );
        w.record(look(0.1, vec![thread(1, 100, 5)]));
        assert_eq!(
            w.csv(),
            "t,tid,name,cpu,cpu_seconds,wait_seconds\n\
             0.000,1,t1,0,0.000000,0.000000\n\
             0.100,1,t1,0,0.100000,0.005000\n"
        );
        assert!(w.picture(&w.report()).is_none());
        let pictured = WatchPlan {
            picture: true,
            ..WatchPlan::default()
        };
        let w = Watch::new(look(0.0, vec![thread(1, 0, 0)]), ctx(), pictured);
        assert!(w.picture(&w.report()).is_some_and(|s| s.contains("<svg")));
    }
}
