//! Per-strategy summaries and the comparison of each strategy with the baseline: speedups
//! with bootstrap intervals, both one-sided tests, and a plain verdict.

use crate::runs::{Experiment, RunRecord};
use crate::stats::{self, Better, Describe, Interval};
use crate::strategy::StrategyKind;
use autopin_human::p_value;
use serde::Serialize;

/// How the comparison is judged.
#[derive(Debug, Clone)]
pub struct SummaryConfig {
    pub alpha: f64,
    pub better: Better,
    /// Include runs that exited non-zero (their wall time) in the statistics.
    pub include_failures: bool,
    pub bootstrap_resamples: usize,
    pub seed: u64,
    /// Half-width of the equivalence band for the median speedup: a comparison whose 95%
    /// interval lies inside [1 - e, 1 + e] is "equivalent" (decided, for adaptive mode).
    pub equivalence: f64,
    /// True when the compared value is the program's metric rather than wall time.
    pub uses_metric: bool,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        SummaryConfig {
            alpha: 0.05,
            better: Better::Lower,
            include_failures: false,
            bootstrap_resamples: 10_000,
            seed: 0,
            equivalence: 0.02,
            uses_metric: false,
        }
    }
}

/// The outcome of one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Baseline,
    Faster,
    Slower,
    /// Not significant, and the interval of the median speedup is inside the equivalence band.
    Equivalent,
    NoDifference,
    /// Runs were measured, but too few for the rank test to reach p < alpha however
    /// different they are (or fewer than the two per side Welch's test needs): no verdict.
    TooFewRuns,
    /// A side has no usable run (all failed, or none was measured).
    NotEnoughData,
}

/// All four one-sided p-values: "better" is the alternative that the strategy beats the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PValues {
    pub welch_better: f64,
    pub welch_worse: f64,
    pub mwu_better: f64,
    pub mwu_worse: f64,
    pub mwu_exact: bool,
}

/// One strategy's numbers. Field names are a stable interface for scripts reading the JSON.
#[derive(Debug, Clone, Serialize)]
pub struct StrategySummary {
    pub strategy: String,
    #[serde(flatten)]
    pub kind: StrategyKind,
    pub baseline: bool,
    /// Every measured run, failed ones included.
    pub runs: Vec<RunRecord>,
    /// The compared values of the runs the statistics used (for plots).
    #[serde(skip)]
    pub values: Vec<f64>,
    /// Runs that went into the statistics.
    pub n_used: usize,
    /// Runs that exited non-zero, were killed, or (with a metric) printed no metric.
    pub n_failed: usize,
    /// Wall-time statistics of the used runs, in seconds.
    pub mean_s: Option<f64>,
    pub median_s: Option<f64>,
    pub sd_s: Option<f64>,
    pub min_s: Option<f64>,
    pub max_s: Option<f64>,
    /// Coefficient of variation of the wall time (`value.cv` has the compared value's).
    pub cv: Option<f64>,
    pub user_s_mean: Option<f64>,
    pub sys_s_mean: Option<f64>,
    pub max_rss_kib: Option<u64>,
    /// Statistics of the compared value (wall time, or the metric with --metric).
    pub value: Option<Describe>,
    /// Above 1: better than the baseline.
    pub speedup_mean: Option<f64>,
    pub speedup_median: Option<f64>,
    pub speedup_mean_ci: Option<Interval>,
    pub speedup_median_ci: Option<Interval>,
    /// One-sided p-values in the direction of the verdict (for "no difference": the
    /// direction the means point at).
    pub p_value_welch: Option<f64>,
    pub p_value_mwu: Option<f64>,
    pub p_values: Option<PValues>,
    /// With `too_few_runs`: the runs per strategy the rank test needs to reach p < alpha.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_needed: Option<usize>,
    pub decision: Decision,
    pub verdict: String,
}

/// The values of the runs that enter the statistics.
pub fn used_values(runs: &[RunRecord], cfg: &SummaryConfig) -> Vec<f64> {
    runs.iter()
        .filter(|r| r.success || cfg.include_failures)
        .filter_map(|r| {
            if cfg.uses_metric {
                r.metric
            } else {
                Some(r.wall_s)
            }
        })
        .collect()
}

fn used<'a>(runs: &'a [RunRecord], cfg: &SummaryConfig) -> Vec<&'a RunRecord> {
    runs.iter()
        .filter(|r| r.success || cfg.include_failures)
        .filter(|r| !cfg.uses_metric || r.metric.is_some())
        .collect()
}

/// Summarizes every strategy of an experiment against its baseline.
pub fn summarize(exp: &Experiment, cfg: &SummaryConfig) -> Vec<StrategySummary> {
    let base_values = used_values(&exp.records[exp.baseline], cfg);
    exp.strategies
        .iter()
        .zip(&exp.records)
        .enumerate()
        .map(|(i, (strategy, runs))| {
            let runs_used = used(runs, cfg);
            let values = used_values(runs, cfg);
            let walls: Vec<f64> = runs_used.iter().map(|r| r.wall_s).collect();
            let wall = stats::describe(&walls);
            let value = stats::describe(&values);
            let mean_of = |f: &dyn Fn(&RunRecord) -> f64| {
                (!runs_used.is_empty())
                    .then(|| runs_used.iter().map(|r| f(r)).sum::<f64>() / runs_used.len() as f64)
            };
            let mut s = StrategySummary {
                strategy: strategy.name.clone(),
                kind: strategy.kind.clone(),
                baseline: i == exp.baseline,
                runs: runs.clone(),
                values: values.clone(),
                n_used: values.len(),
                // A run whose metric is missing failed as a measurement even if it exited 0.
                n_failed: runs
                    .iter()
                    .filter(|r| !r.success || (cfg.uses_metric && r.metric.is_none()))
                    .count(),
                mean_s: wall.map(|d| d.mean),
                median_s: wall.map(|d| d.median),
                sd_s: wall.map(|d| d.sd),
                min_s: wall.map(|d| d.min),
                max_s: wall.map(|d| d.max),
                cv: wall.map(|d| d.cv),
                user_s_mean: mean_of(&|r| r.user_s),
                sys_s_mean: mean_of(&|r| r.sys_s),
                max_rss_kib: runs_used.iter().map(|r| r.max_rss_kib).max(),
                value,
                speedup_mean: None,
                speedup_median: None,
                speedup_mean_ci: None,
                speedup_median_ci: None,
                p_value_welch: None,
                p_value_mwu: None,
                p_values: None,
                runs_needed: None,
                decision: Decision::Baseline,
                verdict: "baseline".into(),
            };
            if i == exp.baseline {
                if s.n_used == 0 && !runs.is_empty() {
                    s.verdict = format!("baseline; {}", all_failed(runs, cfg));
                }
            } else if s.n_used == 0 {
                s.decision = Decision::NotEnoughData;
                s.verdict = if runs.is_empty() {
                    "no runs".into()
                } else {
                    all_failed(runs, cfg)
                };
            } else if base_values.is_empty() {
                s.decision = Decision::NotEnoughData;
                s.verdict = "the baseline has no successful run to compare with".into();
            } else {
                compare(&mut s, &base_values, &values, cfg, i as u64);
            }
            s
        })
        .collect()
}

/// Why none of a strategy's runs is usable: "all 3 runs failed (exit status 3)".
fn all_failed(runs: &[RunRecord], cfg: &SummaryConfig) -> String {
    let what = match runs.len() {
        1 => "the only run".to_string(),
        n => format!("all {n} runs"),
    };
    format!("{what} failed ({})", failure_reasons(runs, cfg).join(", "))
}

/// The distinct reasons runs failed, in order of first appearance: "exit status 3",
/// "signal 9", "no metric in the output".
pub fn failure_reasons(runs: &[RunRecord], cfg: &SummaryConfig) -> Vec<String> {
    let mut why: Vec<String> = Vec::new();
    for r in runs {
        let reason = match (r.success, r.exit_code, r.signal) {
            (true, _, _) if cfg.uses_metric && r.metric.is_none() => {
                "no metric in the output".into()
            }
            (true, _, _) => continue,
            (false, Some(c), _) => format!("exit status {c}"),
            (false, None, Some(s)) => format!("signal {s}"),
            (false, None, None) => "unknown status".into(),
        };
        if !why.contains(&reason) {
            why.push(reason);
        }
    }
    why
}

/// Fills in the comparison of one strategy's values with the baseline's.
fn compare(s: &mut StrategySummary, base: &[f64], cand: &[f64], cfg: &SummaryConfig, index: u64) {
    let (Some(b), Some(c)) = (stats::describe(base), stats::describe(cand)) else {
        s.decision = Decision::NotEnoughData;
        s.verdict = "not enough successful runs".into();
        return;
    };
    s.speedup_mean = Some(stats::speedup(b.mean, c.mean, cfg.better));
    s.speedup_median = Some(stats::speedup(b.median, c.median, cfg.better));
    // Each comparison gets its own stream so adding a strategy does not change the others.
    let seed = cfg.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    if let Some(ci) =
        stats::bootstrap_speedup_ci(base, cand, cfg.better, cfg.bootstrap_resamples, 0.95, seed)
    {
        s.speedup_mean_ci = Some(ci.mean);
        s.speedup_median_ci = Some(ci.median);
    }
    let (better_word, worse_word) = if cfg.uses_metric && cfg.better == Better::Higher {
        ("better", "worse")
    } else {
        ("faster", "slower")
    };
    let welch = stats::welch_t_test(cand, base);
    let mwu = stats::mann_whitney(cand, base);
    // However far apart the samples are, the rank test cannot go below this p; when that is
    // not below alpha, "no significant difference" would be a statement about the sample
    // size rather than about the strategies.
    let rank_floor = stats::rank_test_min_p(cand.len(), base.len());
    let (Some(w), Some(m)) = (welch, mwu) else {
        // Fewer than two runs on a side: Welch's test has no variance to work with.
        too_few(s, cand.len(), base.len(), cfg, None);
        return;
    };
    // Lower-is-better: "better" means the candidate's values are smaller.
    let (wb, ww, mb, mw) = match cfg.better {
        Better::Lower => (w.less, w.greater, m.p.less, m.p.greater),
        Better::Higher => (w.greater, w.less, m.p.greater, m.p.less),
    };
    s.p_values = Some(PValues {
        welch_better: wb,
        welch_worse: ww,
        mwu_better: mb,
        mwu_worse: mw,
        mwu_exact: m.exact,
    });
    if rank_floor >= cfg.alpha {
        // Report the p-values in the direction the means point at, and what Welch's test
        // alone would say, but decide nothing.
        let (pw, pm) = if s.speedup_mean.unwrap_or(1.0) >= 1.0 {
            (wb, mb)
        } else {
            (ww, mw)
        };
        s.p_value_welch = Some(pw);
        s.p_value_mwu = Some(pm);
        let welch_says = if wb < cfg.alpha {
            format!("{better_word}, {}", p_value(wb))
        } else if ww < cfg.alpha {
            format!("{worse_word}, {}", p_value(ww))
        } else {
            format!("no significant difference, {}", p_value(pw))
        };
        too_few(s, cand.len(), base.len(), cfg, Some(welch_says));
        return;
    }
    // Both tests must agree: the t-test speaks for the mean, the rank test for the median.
    let p_better = wb.max(mb);
    let p_worse = ww.max(mw);
    let equivalent = s
        .speedup_median_ci
        .is_some_and(|ci| ci.low >= 1.0 - cfg.equivalence && ci.high <= 1.0 + cfg.equivalence);
    let (decision, pw, pm) = if p_better < cfg.alpha {
        (Decision::Faster, wb, mb)
    } else if p_worse < cfg.alpha {
        (Decision::Slower, ww, mw)
    } else if s.speedup_mean.unwrap_or(1.0) >= 1.0 {
        (
            if equivalent {
                Decision::Equivalent
            } else {
                Decision::NoDifference
            },
            wb,
            mb,
        )
    } else {
        (
            if equivalent {
                Decision::Equivalent
            } else {
                Decision::NoDifference
            },
            ww,
            mw,
        )
    };
    let p = pw.max(pm);
    s.p_value_welch = Some(pw);
    s.p_value_mwu = Some(pm);
    s.decision = decision;
    s.verdict = match decision {
        Decision::Faster => format!("{better_word}, {}", p_value(p)),
        Decision::Slower => format!("{worse_word}, {}", p_value(p)),
        Decision::Equivalent => format!(
            "no significant difference ({}), equivalent within ±{}%",
            p_value(p),
            (cfg.equivalence * 100.0).round()
        ),
        _ => format!("no significant difference ({})", p_value(p)),
    };
}

/// Marks a comparison as undecidable for its sample sizes: the verdict says how many runs
/// each side had, how many the rank test needs at this alpha, and what Welch's test alone
/// says when it could run.
fn too_few(
    s: &mut StrategySummary,
    n_cand: usize,
    n_base: usize,
    cfg: &SummaryConfig,
    welch_says: Option<String>,
) {
    let needed = stats::runs_needed_per_side(cfg.alpha);
    let sizes = if n_cand == n_base {
        format!("{n_cand} per side")
    } else {
        format!("{n_cand} runs vs {n_base} of the baseline")
    };
    let welch = match welch_says {
        Some(w) => format!(" — Welch t alone: {w}"),
        None => " — Welch t needs 2 per side".into(),
    };
    s.decision = Decision::TooFewRuns;
    s.runs_needed = Some(needed);
    s.verdict = format!(
        "too few runs to tell ({sizes}; the rank test needs ≥{needed} per side for p<{}){welch}",
        cfg.alpha
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy;

    fn rec(wall: f64, success: bool) -> RunRecord {
        RunRecord {
            counters: Default::default(),
            round: 0,
            seq: 0,
            wall_s: wall,
            user_s: wall,
            sys_s: 0.1,
            max_rss_kib: 5,
            exit_code: Some(if success { 0 } else { 1 }),
            signal: None,
            success,
            metric: Some(10.0 / wall),
            metric_error: None,
            cpus: None,
        }
    }

    fn exp(samples: &[&[f64]]) -> Experiment {
        let strategies = (0..samples.len())
            .map(|i| Strategy {
                name: format!("s{i}"),
                kind: StrategyKind::None,
            })
            .collect();
        let mut e = Experiment::new(strategies, 0);
        for (i, s) in samples.iter().enumerate() {
            e.records[i] = s.iter().map(|&w| rec(w, true)).collect();
        }
        e
    }

    /// Fewer bootstrap resamples than the CLI default keep the debug-build tests fast.
    fn quick() -> SummaryConfig {
        SummaryConfig {
            bootstrap_resamples: 2000,
            ..SummaryConfig::default()
        }
    }

    const A: [f64; 10] = [10.1, 10.3, 9.8, 10.0, 10.4, 10.2, 9.9, 10.6, 10.1, 10.0];
    const B: [f64; 8] = [10.9, 11.2, 10.7, 11.5, 10.8, 11.0, 11.9, 10.6];

    #[test]
    fn verdicts_and_p_values_follow_the_tests() {
        let e = exp(&[&B, &A, &B]);
        let s = summarize(&e, &quick());
        assert_eq!(s[0].decision, Decision::Baseline);
        // A vs baseline B: the values checked against scipy in stats.rs.
        assert_eq!(s[1].decision, Decision::Faster);
        assert!((s[1].p_value_welch.unwrap() - 0.0001363049760207974).abs() < 1e-9);
        assert!((s[1].p_value_mwu.unwrap() - 0.00025963148057464363).abs() < 1e-9);
        assert!(
            s[1].verdict.starts_with("faster, p=0.00026"),
            "{}",
            s[1].verdict
        );
        assert!((s[1].speedup_median.unwrap() - 10.95 / 10.1).abs() < 1e-9);
        assert!(
            s[2].verdict.starts_with("no significant difference"),
            "{}",
            s[2].verdict
        );
        let e = exp(&[&A, &B]);
        let s = summarize(&e, &quick());
        assert_eq!(s[1].decision, Decision::Slower);
        assert!(s[1].speedup_mean.unwrap() < 1.0);
        assert!(s[1].verdict.starts_with("slower, p="));
    }

    #[test]
    fn no_difference_when_samples_overlap() {
        let x = [1.0, 1.2, 0.9, 1.1, 1.3, 0.8];
        let y = [1.05, 1.15, 0.95, 1.25, 0.85, 1.1];
        let s = summarize(&exp(&[&x, &y]), &quick());
        assert_eq!(s[1].decision, Decision::NoDifference, "{}", s[1].verdict);
        assert!(s[1].verdict.starts_with("no significant difference (p="));
        assert!(s[1].p_value_welch.unwrap() > 0.05);
    }

    #[test]
    fn equivalence_needs_a_narrow_interval() {
        let x = [1.000, 1.002, 0.999, 1.001, 1.003, 0.998, 1.000, 1.001];
        let y = [1.001, 0.999, 1.002, 1.000, 0.998, 1.003, 1.001, 1.000];
        let s = summarize(&exp(&[&x, &y]), &quick());
        assert_eq!(s[1].decision, Decision::Equivalent, "{}", s[1].verdict);
        let cfg = SummaryConfig {
            equivalence: 0.0001,
            ..quick()
        };
        assert_eq!(
            summarize(&exp(&[&x, &y]), &cfg)[1].decision,
            Decision::NoDifference
        );
    }

    #[test]
    fn failed_runs_are_counted_and_excluded_unless_asked() {
        let mut e = exp(&[&A, &A]);
        e.records[1].push(rec(100.0, false));
        let s = summarize(&e, &quick());
        assert_eq!((s[1].n_used, s[1].n_failed, s[1].runs.len()), (10, 1, 11));
        assert_eq!(s[1].max_s, Some(10.6));
        let cfg = SummaryConfig {
            include_failures: true,
            ..quick()
        };
        let s = summarize(&e, &cfg);
        assert_eq!((s[1].n_used, s[1].max_s), (11, Some(100.0)));
    }

    #[test]
    fn metric_higher_is_better_flips_direction() {
        let cfg = SummaryConfig {
            uses_metric: true,
            better: Better::Higher,
            ..quick()
        };
        // Metric = 10 / wall, so the faster A has the larger metric.
        let s = summarize(&exp(&[&B, &A]), &cfg);
        assert_eq!(s[1].decision, Decision::Faster);
        assert!(s[1].verdict.starts_with("better"));
        assert!(s[1].speedup_mean.unwrap() > 1.0);
    }

    #[test]
    fn not_enough_data() {
        let s = summarize(&exp(&[&A, &[]]), &quick());
        assert_eq!(s[1].decision, Decision::NotEnoughData);
        assert_eq!(s[1].verdict, "no runs");
        // One run has a speedup but no variance for Welch's test.
        let s = summarize(&exp(&[&A, &[1.0]]), &quick());
        assert_eq!(s[1].decision, Decision::TooFewRuns);
        assert!(s[1].speedup_median.is_some());
        assert!(
            s[1].verdict.ends_with("— Welch t needs 2 per side"),
            "{}",
            s[1].verdict
        );
    }

    /// The user's case: 3 runs each, the pinned one 120 times slower. The exact rank test's
    /// smallest p for 3 against 3 is 1/20 = 0.05, never below alpha 0.05, so the verdict must
    /// not say "no significant difference".
    #[test]
    fn three_runs_per_side_are_too_few_at_alpha_005() {
        let base = [0.0198, 0.0201, 0.0195];
        let slow = [2.43, 2.41, 2.46];
        let s = summarize(&exp(&[&base, &slow]), &quick());
        assert_eq!(s[1].decision, Decision::TooFewRuns);
        assert_eq!(s[1].runs_needed, Some(4));
        assert_eq!(
            s[1].verdict,
            "too few runs to tell (3 per side; the rank test needs ≥4 per side for p<0.05) \
             — Welch t alone: slower, p<0.0001"
        );
        // The reported p-values point the way the means do: the rank test's is its floor.
        assert!((s[1].p_value_mwu.unwrap() - 0.05).abs() < 1e-12);
        assert!(s[1].p_value_welch.unwrap() < 1e-4);
        assert!(s[1].speedup_mean.unwrap() < 0.01);
        // The faster direction and a rate metric use their own words.
        let s = summarize(&exp(&[&slow, &base]), &quick());
        assert!(s[1].verdict.ends_with("Welch t alone: faster, p<0.0001"));
        let cfg = SummaryConfig {
            uses_metric: true,
            better: Better::Higher,
            ..quick()
        };
        let s = summarize(&exp(&[&slow, &base]), &cfg);
        assert_eq!(s[1].decision, Decision::TooFewRuns);
        assert!(s[1].verdict.ends_with("Welch t alone: better, p<0.0001"));
    }

    #[test]
    fn two_runs_are_too_few_and_four_or_five_decide() {
        let base = [1.0, 1.01, 1.02, 1.03, 1.04];
        let slow = [2.0, 2.01, 2.02, 2.03, 2.04];
        let s = summarize(&exp(&[&base[..2], &slow[..2]]), &quick());
        assert_eq!(s[1].decision, Decision::TooFewRuns);
        assert!(
            s[1].verdict
                .starts_with("too few runs to tell (2 per side;"),
            "{}",
            s[1].verdict
        );
        // 4 per side: complete separation has p = 1/70, the max of both tests.
        let s = summarize(&exp(&[&base[..4], &slow[..4]]), &quick());
        assert_eq!(s[1].decision, Decision::Slower, "{}", s[1].verdict);
        assert!((s[1].p_value_mwu.unwrap() - 1.0 / 70.0).abs() < 1e-12);
        assert_eq!(s[1].verdict, "slower, p=0.014");
        assert_eq!(s[1].runs_needed, None);
        let s = summarize(&exp(&[&base, &slow]), &quick());
        assert_eq!(s[1].decision, Decision::Slower);
        assert!((s[1].p_value_mwu.unwrap() - 1.0 / 252.0).abs() < 1e-12);
        // Overlapping samples of 4 are a real "no significant difference".
        let s = summarize(
            &exp(&[&[1.0, 1.2, 0.9, 1.1], &[1.05, 1.15, 0.95, 1.25]]),
            &quick(),
        );
        assert_eq!(s[1].decision, Decision::NoDifference, "{}", s[1].verdict);
    }

    #[test]
    fn the_rule_follows_alpha_and_unequal_sizes() {
        let base = [1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08, 1.09];
        let slow = [2.0, 2.01, 2.02, 2.03];
        // At alpha 0.01, 4 per side (floor 1/70) is too few; 5 is enough.
        let strict = SummaryConfig {
            alpha: 0.01,
            ..quick()
        };
        let s = summarize(&exp(&[&base[..4], &slow]), &strict);
        assert_eq!(s[1].decision, Decision::TooFewRuns);
        assert_eq!(s[1].runs_needed, Some(5));
        assert!(s[1].verdict.contains("needs ≥5 per side for p<0.01"));
        // 2 runs against 10: the floor is 1/C(12, 2) = 1/66, so the rank test can decide.
        let s = summarize(&exp(&[&base, &slow[..2]]), &quick());
        assert_eq!(s[1].decision, Decision::Slower, "{}", s[1].verdict);
        // 2 against 3 (a failed run on one side): 1/10 is too large; the sizes are named.
        let s = summarize(&exp(&[&base[..3], &slow[..2]]), &quick());
        assert_eq!(s[1].decision, Decision::TooFewRuns);
        assert!(
            s[1].verdict
                .starts_with("too few runs to tell (2 runs vs 3 of the baseline;"),
            "{}",
            s[1].verdict
        );
    }

    /// With ties the p-value comes from the normal approximation, which for 3 tied values
    /// against 3 prints p = 0.023; the exact floor of 0.05 still holds, so no verdict.
    #[test]
    fn ties_do_not_get_around_the_floor() {
        let ones = [1.0, 1.0, 1.0, 1.0];
        let twos = [2.0, 2.0, 2.0, 2.0];
        let s = summarize(&exp(&[&ones[..3], &twos[..3]]), &quick());
        assert!(!s[1].p_values.unwrap().mwu_exact);
        assert!(s[1].p_values.unwrap().mwu_worse < 0.05);
        assert_eq!(s[1].decision, Decision::TooFewRuns, "{}", s[1].verdict);
        let s = summarize(&exp(&[&ones, &twos]), &quick());
        assert_eq!(s[1].decision, Decision::Slower, "{}", s[1].verdict);
        // Identical samples: with 3 runs neither a difference nor equivalence is shown ...
        let s = summarize(&exp(&[&ones[..3], &ones[..3]]), &quick());
        assert_eq!(s[1].decision, Decision::TooFewRuns, "{}", s[1].verdict);
        assert!(
            s[1].verdict
                .ends_with("Welch t alone: no significant difference, p=1.0"),
            "{}",
            s[1].verdict
        );
        // ... with 4 they are equivalent.
        let s = summarize(&exp(&[&ones, &ones]), &quick());
        assert_eq!(s[1].decision, Decision::Equivalent, "{}", s[1].verdict);
    }

    #[test]
    fn strategies_whose_runs_all_failed_say_so() {
        let mut e = exp(&[&A, &[]]);
        e.records[1] = vec![rec(1.0, false), rec(1.0, false), rec(1.0, false)];
        e.records[1][2].exit_code = None;
        e.records[1][2].signal = Some(9);
        let s = summarize(&e, &quick());
        assert_eq!(s[1].decision, Decision::NotEnoughData);
        assert_eq!(s[1].verdict, "all 3 runs failed (exit status 1, signal 9)");
        assert_eq!((s[1].n_used, s[1].n_failed), (0, 3));
        // A failed baseline leaves every comparison without a reference.
        let mut e = exp(&[&[], &A]);
        e.records[0] = vec![rec(1.0, false)];
        let s = summarize(&e, &quick());
        assert_eq!(
            s[0].verdict,
            "baseline; the only run failed (exit status 1)"
        );
        assert_eq!(s[1].decision, Decision::NotEnoughData);
        assert_eq!(
            s[1].verdict,
            "the baseline has no successful run to compare with"
        );
        // With a metric, runs that printed none are the failures.
        let mut e = exp(&[&A, &[1.0, 2.0]]);
        for r in &mut e.records[1] {
            r.metric = None;
        }
        let cfg = SummaryConfig {
            uses_metric: true,
            ..quick()
        };
        assert_eq!(
            summarize(&e, &cfg)[1].verdict,
            "all 2 runs failed (no metric in the output)"
        );
    }
}
