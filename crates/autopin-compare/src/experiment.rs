//! The experiment: runs every strategy in interleaved, randomly ordered rounds (so drift of
//! the machine — temperature, other users — hits all strategies alike), with warm-up rounds,
//! an adaptive mode that adds rounds until each comparison is decided, and a clean stop
//! when interrupted.

use crate::runner::{Interrupt, Runner};
pub use crate::runs::{Experiment, RunRecord};
use crate::stats::Better;
use crate::strategy::{Frontend, Strategy};
use crate::summary::{summarize, Decision, SummaryConfig};
use autopin_launch::LaunchError;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use regex::Regex;
use std::ffi::OsString;

/// What to do, beyond the strategies and the program.
#[derive(Debug, Clone)]
pub struct Config {
    pub runs: usize,
    pub warmup: usize,
    pub seed: u64,
    pub metric: Option<Regex>,
    pub summary: SummaryConfig,
    /// Adaptive mode: keep adding rounds until every comparison is decided or each strategy
    /// has this many runs.
    pub adaptive_max_runs: Option<usize>,
}

impl Config {
    pub fn better(&self) -> Better {
        self.summary.better
    }
}

/// What happens, for progress display.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// A run is about to start (`warmup` is true for warm-up runs).
    Start {
        strategy: &'a str,
        warmup: bool,
        done: usize,
        planned: usize,
    },
    /// A run finished (`stderr_tail`: the end of the program's stderr, to explain failures).
    Finished {
        strategy: &'a str,
        record: &'a RunRecord,
        warmup: bool,
        stderr_tail: &'a str,
    },
    /// Adaptive mode grew the plan.
    Replanned { planned: usize },
}

/// Everything the experiment needs to start runs.
pub struct Setup<'a> {
    pub front: &'a Frontend,
    pub program: &'a [OsString],
    pub allowed_cpus: &'a [u32],
}

impl Experiment {
    pub fn new(strategies: Vec<Strategy>, baseline: usize) -> Self {
        let n = strategies.len();
        Experiment {
            strategies,
            baseline,
            records: vec![Vec::new(); n],
            warmup_runs: 0,
            rounds: 0,
            interrupted: false,
            last_failure: None,
        }
    }

    /// Runs the experiment. Launch errors (the program cannot be started at all) abort it;
    /// failed runs are recorded.
    pub fn run(
        &mut self,
        setup: &Setup,
        cfg: &Config,
        runner: &mut dyn Runner,
        interrupt: &Interrupt,
        progress: &mut dyn FnMut(Event),
    ) -> Result<(), LaunchError> {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let k = self.strategies.len();
        let mut planned = (cfg.warmup + cfg.runs) * k;
        let mut done = 0;
        let mut order: Vec<usize> = (0..k).collect();
        let mut seq = 0;
        let mut round = 0;
        loop {
            let warmup = round < cfg.warmup;
            if !warmup && self.rounds >= cfg.runs {
                let Some(max) = cfg.adaptive_max_runs else {
                    break;
                };
                if self.rounds >= max || self.all_decided(cfg) {
                    break;
                }
                planned += k;
                progress(Event::Replanned { planned });
            }
            order.shuffle(&mut rng);
            for &s in &order {
                if interrupt.requested() {
                    self.interrupted = true;
                    return Ok(());
                }
                let name = self.strategies[s].name.clone();
                progress(Event::Start {
                    strategy: &name,
                    warmup,
                    done,
                    planned,
                });
                let command = self.strategies[s].command(
                    setup.front,
                    setup.program,
                    setup.allowed_cpus,
                    &mut rng,
                );
                let measured = runner.run(&command.argv)?;
                done += 1;
                if interrupt.requested() {
                    // The run was cut short by the signal: it is not a measurement.
                    self.interrupted = true;
                    return Ok(());
                }
                let (metric, metric_error) = match &cfg.metric {
                    None => (None, None),
                    Some(re) => match extract_metric(re, &measured.stdout) {
                        Ok(v) => (Some(v), None),
                        Err(e) => (None, Some(e.to_string())),
                    },
                };
                let record = RunRecord {
                    round: self.rounds,
                    seq,
                    wall_s: measured.wall_s,
                    user_s: measured.user_s,
                    sys_s: measured.sys_s,
                    max_rss_kib: measured.max_rss_kib,
                    counters: measured.counters,
                    exit_code: measured.exit.exit_code(),
                    signal: measured.exit.signal(),
                    success: measured.exit.success(),
                    metric,
                    metric_error,
                    cpus: command.cpus,
                };
                progress(Event::Finished {
                    strategy: &name,
                    record: &record,
                    warmup,
                    stderr_tail: &measured.stderr_tail,
                });
                if !record.success {
                    self.last_failure = Some((name.clone(), measured.stderr_tail.clone()));
                }
                if warmup {
                    self.warmup_runs += 1;
                } else {
                    seq += 1;
                    self.records[s].push(record);
                }
            }
            if !warmup {
                self.rounds += 1;
            }
            round += 1;
        }
        Ok(())
    }

    /// True when every strategy's comparison with the baseline is decided.
    fn all_decided(&self, cfg: &Config) -> bool {
        summarize(self, &cfg.summary)
            .iter()
            .enumerate()
            .all(|(i, s)| {
                i == self.baseline
                    || matches!(
                        s.decision,
                        Decision::Faster | Decision::Slower | Decision::Equivalent
                    )
            })
    }
}

/// Why a `--metric` pattern was refused, or gave no number for a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    #[error("invalid --metric regex: {cause}")]
    InvalidRegex { cause: regex::Error },
    #[error("--metric regex `{pattern}` has no capture group; put the number in parentheses, e.g. `Mop/s total\\s*=\\s*([0-9.]+)`")]
    NoCaptureGroup { pattern: String },
    #[error("metric pattern `{pattern}` did not match the output")]
    NoMatch { pattern: String },
    /// The pattern matched `text`, which does not parse as a number.
    #[error("metric pattern `{pattern}` matched `{text}`, which is not a number")]
    NotANumber { pattern: String, text: String },
}

/// The first capture group of `re` in the program's output, as a number.
pub fn extract_metric(re: &Regex, stdout: &str) -> Result<f64, MetricError> {
    let caps = re.captures(stdout).ok_or_else(|| MetricError::NoMatch {
        pattern: re.as_str().to_string(),
    })?;
    let text = caps
        .get(1)
        .or_else(|| caps.get(0))
        .map(|m| m.as_str())
        .unwrap_or_default();
    text.trim()
        .parse::<f64>()
        .map_err(|_| MetricError::NotANumber {
            pattern: re.as_str().to_string(),
            text: text.to_string(),
        })
}

/// Checks a `--metric` pattern: it must compile and have a capture group.
pub fn compile_metric(pattern: &str) -> Result<Regex, MetricError> {
    let re = Regex::new(pattern).map_err(|cause| MetricError::InvalidRegex { cause })?;
    if re.captures_len() < 2 {
        return Err(MetricError::NoCaptureGroup {
            pattern: pattern.to_string(),
        });
    }
    Ok(re)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{ExitStatus, Measured};
    use crate::strategy::StrategyKind;

    /// A runner that answers from a table keyed by the command's first word(s).
    struct Fake {
        calls: Vec<Vec<String>>,
        fail_every: Option<usize>,
        interrupt_after: Option<(usize, Interrupt)>,
    }

    impl Runner for Fake {
        fn run(&mut self, argv: &[OsString]) -> Result<Measured, LaunchError> {
            let words: Vec<String> = argv
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            self.calls.push(words.clone());
            let n = self.calls.len();
            if let Some((after, i)) = &self.interrupt_after {
                if n == *after {
                    i.stop.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
            // Pinned to one CPU ("0,0") is slow; everything else fast, with a little spread.
            let slow = words.iter().any(|w| w == "0,0");
            let wall = if slow { 2.0 } else { 1.0 } + (n % 3) as f64 * 0.01;
            let code = if self.fail_every.is_some_and(|k| n.checked_rem(k) == Some(0)) {
                1
            } else {
                0
            };
            Ok(Measured {
                wall_s: wall,
                user_s: wall,
                sys_s: 0.0,
                max_rss_kib: 1000,
                counters: Default::default(),
                exit: ExitStatus::Exited(code),
                stdout: format!("rate = {}\n", 100.0 / wall),
                stderr_tail: String::new(),
            })
        }
    }

    fn strategies() -> Vec<Strategy> {
        vec![
            Strategy {
                name: "none".into(),
                kind: StrategyKind::None,
            },
            Strategy {
                name: "0,1".into(),
                kind: StrategyKind::Cpus { expr: "0,1".into() },
            },
            Strategy {
                name: "0,0".into(),
                kind: StrategyKind::Cpus { expr: "0,0".into() },
            },
        ]
    }

    fn cfg(runs: usize, warmup: usize) -> Config {
        let summary = SummaryConfig {
            bootstrap_resamples: 1000,
            ..SummaryConfig::default()
        };
        Config {
            runs,
            warmup,
            seed: 3,
            metric: None,
            summary,
            adaptive_max_runs: None,
        }
    }

    fn run(exp: &mut Experiment, cfg: &Config, fake: &mut Fake, intr: &Interrupt) {
        let front = Frontend {
            exe: "/bin/autopin".into(),
            machine_args: vec![],
        };
        let program = vec![OsString::from("prog")];
        let setup = Setup {
            front: &front,
            program: &program,
            allowed_cpus: &[0, 1],
        };
        exp.run(&setup, cfg, fake, intr, &mut |_| {}).unwrap();
    }

    fn fake() -> Fake {
        Fake {
            calls: vec![],
            fail_every: None,
            interrupt_after: None,
        }
    }

    #[test]
    fn rounds_are_interleaved_in_random_orders_after_warmup() {
        let mut exp = Experiment::new(strategies(), 0);
        let mut f = fake();
        run(&mut exp, &cfg(6, 1), &mut f, &Interrupt::default());
        assert_eq!(f.calls.len(), 21);
        assert_eq!(exp.warmup_runs, 3);
        assert!(exp.records.iter().all(|r| r.len() == 6));
        // Every round holds each strategy once, and not every round has the same order.
        let key = |c: &Vec<String>| {
            c.iter()
                .find(|w| w.contains(','))
                .cloned()
                .unwrap_or_default()
        };
        let rounds: Vec<Vec<String>> = f
            .calls
            .chunks(3)
            .map(|r| r.iter().map(key).collect())
            .collect();
        for r in &rounds {
            let mut s = r.clone();
            s.sort();
            assert_eq!(s, vec!["".to_string(), "0,0".into(), "0,1".into()]);
        }
        assert!(rounds.iter().any(|r| r != &rounds[0]), "{rounds:?}");
        let seqs: Vec<usize> = exp.records.iter().flatten().map(|r| r.seq).collect();
        assert_eq!(seqs.iter().max(), Some(&17));
    }

    #[test]
    fn failures_are_recorded_not_dropped() {
        let mut exp = Experiment::new(strategies(), 0);
        let mut f = fake();
        f.fail_every = Some(4);
        run(&mut exp, &cfg(4, 0), &mut f, &Interrupt::default());
        let failed = exp.records.iter().flatten().filter(|r| !r.success).count();
        assert_eq!(failed, 3);
        assert_eq!(exp.records.iter().map(Vec::len).sum::<usize>(), 12);
    }

    #[test]
    fn interrupt_keeps_completed_runs_and_drops_the_cut_one() {
        let intr = Interrupt::default();
        let mut exp = Experiment::new(strategies(), 0);
        let mut f = fake();
        f.interrupt_after = Some((5, intr.clone()));
        run(&mut exp, &cfg(10, 0), &mut f, &intr);
        assert!(exp.interrupted);
        assert_eq!(f.calls.len(), 5);
        assert_eq!(exp.records.iter().map(Vec::len).sum::<usize>(), 4);
    }

    #[test]
    fn adaptive_stops_once_decided_and_respects_max() {
        let mut exp = Experiment::new(strategies(), 0);
        // Two rounds cannot decide anything (the smallest exact MWU p for 2 vs 2 is 1/6).
        let mut c = cfg(2, 0);
        c.adaptive_max_runs = Some(30);
        let mut f = fake();
        run(&mut exp, &c, &mut f, &Interrupt::default());
        // "0,0" is 2x slower (decided fast); "0,1" equals the baseline and is decided as
        // equivalent once the CI of the median speedup is narrow enough — before 30 runs.
        let n = exp.records[0].len();
        assert!(n > 2 && n < 30, "{n}");
        let mut exp2 = Experiment::new(strategies(), 0);
        c.adaptive_max_runs = Some(5);
        c.summary.equivalence = 0.0;
        run(&mut exp2, &c, &mut fake(), &Interrupt::default());
        assert_eq!(exp2.records[0].len(), 5);
    }

    /// Three runs cannot decide at alpha 0.05 (the rank test's floor is 1/20): a fixed
    /// experiment says so, adaptive mode keeps going until the slow strategy is decided.
    #[test]
    fn too_few_runs_are_undecided_and_adaptive_mode_adds_rounds() {
        let mut exp = Experiment::new(strategies(), 0);
        run(&mut exp, &cfg(3, 0), &mut fake(), &Interrupt::default());
        let s = summarize(&exp, &cfg(3, 0).summary);
        assert_eq!(s[2].decision, Decision::TooFewRuns, "{}", s[2].verdict);
        assert_eq!(s[2].runs_needed, Some(4));
        let mut exp = Experiment::new(strategies(), 0);
        let mut c = cfg(3, 0);
        c.adaptive_max_runs = Some(30);
        run(&mut exp, &c, &mut fake(), &Interrupt::default());
        assert!(exp.records[2].len() >= 4);
        let s = summarize(&exp, &c.summary);
        assert_eq!(s[2].decision, Decision::Slower, "{}", s[2].verdict);
    }

    #[test]
    fn metric_extraction() {
        let re = compile_metric(r"Mop/s total\s*=\s*([0-9.]+)").unwrap();
        assert_eq!(
            extract_metric(&re, "x\n Mop/s total     =    1234.5\n").unwrap(),
            1234.5
        );
        assert!(extract_metric(&re, "nothing")
            .unwrap_err()
            .to_string()
            .contains("did not match"));
        assert!(compile_metric("(")
            .unwrap_err()
            .to_string()
            .contains("invalid --metric regex"));
        assert!(compile_metric("rate")
            .unwrap_err()
            .to_string()
            .contains("no capture group"));
        let re = compile_metric(r"rate = (\w+)").unwrap();
        assert!(extract_metric(&re, "rate = fast")
            .unwrap_err()
            .to_string()
            .contains("not a number"));
    }
}
