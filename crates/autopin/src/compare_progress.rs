//! `autopin compare`'s progress on stderr: a bar on a terminal, one plain line per run
//! otherwise (logs, CI), nothing with -q; failed runs are always said, with the end of
//! their stderr.

use autopin_compare::plan::tail_lines;
use autopin_compare::Event;
use std::io::IsTerminal;

/// Progress on stderr: a bar when stderr is a terminal, one plain line per run otherwise
/// (logs, CI), nothing with -q.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    /// Plain lines instead of a bar.
    plain: bool,
    planned: usize,
    started: usize,
    t0: std::time::Instant,
}

impl Progress {
    pub fn new(planned: usize, quiet: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (terminal && !quiet).then(|| {
            let b = indicatif::ProgressBar::new(planned as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} runs  {elapsed} (eta {eta})  {msg}",
            ) {
                b.set_style(style);
            }
            b
        });
        Progress {
            bar,
            plain: !terminal && !quiet,
            planned,
            started: 0,
            t0: std::time::Instant::now(),
        }
    }

    /// "run 3/20: `0,1` (about 40 s left)": the estimate assumes the remaining runs take
    /// as long as the finished ones did on average.
    fn plain_line(&self, strategy: &str, warmup: bool) -> String {
        let done = self.started.saturating_sub(1);
        let eta = if done > 0 {
            let per_run = self.t0.elapsed().as_secs_f64() / done as f64;
            let left = per_run * (self.planned + 1 - self.started) as f64;
            format!(" (about {} left)", autopin_human::duration(left))
        } else {
            String::new()
        };
        format!(
            "autopin: run {}/{}: {}`{strategy}`{eta}",
            self.started,
            self.planned,
            if warmup { "warm-up of " } else { "" }
        )
    }

    fn say(&self, msg: String) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => say!("{msg}"),
        }
    }

    pub fn event(&mut self, e: Event) {
        match e {
            Event::Start {
                strategy, warmup, ..
            } => {
                self.started += 1;
                if let Some(b) = &self.bar {
                    b.set_message(format!(
                        "{}{strategy}",
                        if warmup { "warm-up " } else { "" }
                    ));
                } else if self.plain {
                    say!("{}", self.plain_line(strategy, warmup));
                }
            }
            Event::Finished {
                strategy,
                record,
                warmup,
                stderr_tail,
            } => {
                if let Some(b) = &self.bar {
                    b.inc(1);
                }
                if !record.success {
                    // Failures are always reported, bar or not; the end of stderr says why.
                    let status = match (record.exit_code, record.signal) {
                        (Some(c), _) => format!("exit status {c}"),
                        (_, Some(s)) => format!("signal {s}"),
                        _ => "unknown status".into(),
                    };
                    let mut msg = format!(
                        "autopin: {}run of `{strategy}` failed: {status}",
                        if warmup { "warm-up " } else { "" }
                    );
                    for l in tail_lines(stderr_tail) {
                        msg.push_str(&format!("\n    | {l}"));
                    }
                    self.say(msg);
                } else if let Some(e) = &record.metric_error {
                    self.say(format!(
                        "autopin: run of `{strategy}`: {e}; the run is left out of the statistics"
                    ));
                }
            }
            Event::Replanned { planned } => {
                self.planned = planned;
                if let Some(b) = &self.bar {
                    b.set_length(planned as u64);
                }
            }
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
