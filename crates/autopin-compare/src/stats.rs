//! Statistics on samples of run results: descriptive numbers, bootstrap confidence intervals
//! of speedups, the one-sided Welch t-test and the one-sided Wilcoxon–Mann–Whitney test.
//!
//! Everything here is pure: it takes slices of numbers and a seed, so the tests can compare
//! it with reference values computed independently (scipy).

pub use autopin_stats::{mean, median, quantile_sorted};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Descriptive statistics of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Describe {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    /// Sample standard deviation (n - 1 in the denominator); 0 for a single value.
    pub sd: f64,
    /// Coefficient of variation sd / mean (0 when the mean is 0).
    pub cv: f64,
    pub min: f64,
    pub max: f64,
    pub q1: f64,
    pub q3: f64,
}

/// Describes a sample, or `None` when it is empty.
pub fn describe(xs: &[f64]) -> Option<Describe> {
    if xs.is_empty() {
        return None;
    }
    let mut s = xs.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    let mean = autopin_stats::mean(&s)?;
    let sd = variance(&s).sqrt();
    let q = |p: f64| quantile_sorted(&s, p).unwrap_or(f64::NAN);
    Some(Describe {
        n,
        mean,
        median: q(0.5),
        sd,
        cv: if mean != 0.0 { sd / mean.abs() } else { 0.0 },
        min: s[0],
        max: s[n - 1],
        q1: q(0.25),
        q3: q(0.75),
    })
}

/// Sample variance (n - 1); 0 for fewer than two values (a single run has no spread).
fn variance(xs: &[f64]) -> f64 {
    autopin_stats::variance(xs).unwrap_or(0.0)
}

/// Which direction of a measured value is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Times: smaller is better.
    Lower,
    /// Throughputs (e.g. Mop/s): larger is better.
    Higher,
}

/// Speedup of a candidate over the baseline from two summary numbers: above 1 means the
/// candidate is better, whichever direction is better.
pub fn speedup(baseline: f64, candidate: f64, better: Better) -> f64 {
    match better {
        Better::Lower => baseline / candidate,
        Better::Higher => candidate / baseline,
    }
}

/// A two-sided percentile confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// Bootstrap percentile confidence intervals of the speedup of the mean and of the median:
/// both samples are resampled independently with replacement `resamples` times.
pub struct BootstrapCi {
    pub mean: Interval,
    pub median: Interval,
}

pub fn bootstrap_speedup_ci(
    baseline: &[f64],
    candidate: &[f64],
    better: Better,
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> Option<BootstrapCi> {
    if baseline.is_empty() || candidate.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means = Vec::with_capacity(resamples);
    let mut medians = Vec::with_capacity(resamples);
    let mut rb = vec![0.0; baseline.len()];
    let mut rc = vec![0.0; candidate.len()];
    for _ in 0..resamples {
        for v in rb.iter_mut() {
            *v = baseline[rng.gen_range(0..baseline.len())];
        }
        for v in rc.iter_mut() {
            *v = candidate[rng.gen_range(0..candidate.len())];
        }
        // The samples are not empty (checked above): every statistic is defined.
        let stat = |x: Option<f64>| x.unwrap_or(f64::NAN);
        means.push(speedup(stat(mean(&rb)), stat(mean(&rc)), better));
        rb.sort_by(|a, b| a.total_cmp(b));
        rc.sort_by(|a, b| a.total_cmp(b));
        medians.push(speedup(
            stat(quantile_sorted(&rb, 0.5)),
            stat(quantile_sorted(&rc, 0.5)),
            better,
        ));
    }
    let tail = (1.0 - confidence) / 2.0;
    let ci = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        Interval {
            low: quantile_sorted(v, tail).unwrap_or(f64::NAN),
            high: quantile_sorted(v, 1.0 - tail).unwrap_or(f64::NAN),
        }
    };
    Some(BootstrapCi {
        mean: ci(&mut means),
        median: ci(&mut medians),
    })
}

/// One-sided p-values of a two-sample test: `less` for the alternative "x tends to be
/// smaller than y", `greater` for "x tends to be larger".
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OneSided {
    pub less: f64,
    pub greater: f64,
}

/// Welch's unequal-variance t-test of x against y.
/// Returns `None` when either sample has fewer than two values.
pub fn welch_t_test(x: &[f64], y: &[f64]) -> Option<OneSided> {
    if x.len() < 2 || y.len() < 2 {
        return None;
    }
    let (Some(mx), Some(my)) = (mean(x), mean(y)) else {
        return None;
    };
    let (vx, vy) = (variance(x) / x.len() as f64, variance(y) / y.len() as f64);
    let se2 = vx + vy;
    if se2 == 0.0 {
        // Both samples are constant: the difference is certain (or there is none).
        return Some(if mx < my {
            OneSided {
                less: 0.0,
                greater: 1.0,
            }
        } else if mx > my {
            OneSided {
                less: 1.0,
                greater: 0.0,
            }
        } else {
            OneSided {
                less: 1.0,
                greater: 1.0,
            }
        });
    }
    let t = (mx - my) / se2.sqrt();
    let df = se2 * se2 / (vx * vx / (x.len() - 1) as f64 + vy * vy / (y.len() - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let less = dist.cdf(t);
    Some(OneSided {
        less,
        greater: dist.sf(t),
    })
}

/// Mann–Whitney U statistic of x (pairs with x > y count 1, ties 1/2), with the method used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MannWhitney {
    pub u: f64,
    pub p: OneSided,
    /// True when the p-values come from the exact null distribution (no ties, small samples),
    /// false for the normal approximation with tie and continuity correction.
    pub exact: bool,
}

/// Largest sample size for which the exact distribution is used (when there are no ties).
const EXACT_MAX: usize = 50;

/// The Wilcoxon–Mann–Whitney rank-sum test of x against y.
pub fn mann_whitney(x: &[f64], y: &[f64]) -> Option<MannWhitney> {
    let (m, n) = (x.len(), y.len());
    if m == 0 || n == 0 {
        return None;
    }
    // Midranks of the pooled sample.
    let mut pooled: Vec<(f64, bool)> = x
        .iter()
        .map(|&v| (v, true))
        .chain(y.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    let big_n = m + n;
    let mut rank_sum_x = 0.0;
    let mut tie_term = 0.0; // sum of t^3 - t over tie groups
    let mut i = 0;
    while i < big_n {
        let mut j = i;
        while j + 1 < big_n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let midrank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_x += midrank * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let u = rank_sum_x - (m * (m + 1)) as f64 / 2.0;
    let ties = tie_term > 0.0;
    if !ties && m <= EXACT_MAX && n <= EXACT_MAX {
        let pmf = u_distribution(m, n);
        let k = u.round() as usize;
        let less: f64 = pmf[..=k].iter().sum();
        let greater: f64 = pmf[k..].iter().sum();
        return Some(MannWhitney {
            u,
            p: OneSided {
                less: less.min(1.0),
                greater: greater.min(1.0),
            },
            exact: true,
        });
    }
    let (mf, nf, nn) = (m as f64, n as f64, big_n as f64);
    let mu = mf * nf / 2.0;
    let var = mf * nf / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
    if var <= 0.0 {
        // Every value is the same: no evidence either way.
        return Some(MannWhitney {
            u,
            p: OneSided {
                less: 1.0,
                greater: 1.0,
            },
            exact: false,
        });
    }
    let sd = var.sqrt();
    let normal = Normal::new(0.0, 1.0).ok()?;
    // Continuity correction of 1/2 towards the mean, as scipy does.
    let less = normal.cdf((u - mu + 0.5) / sd);
    let greater = normal.sf((u - mu - 0.5) / sd);
    Some(MannWhitney {
        u,
        p: OneSided {
            less: less.min(1.0),
            greater: greater.min(1.0),
        },
        exact: false,
    })
}

/// The smallest one-sided p-value the rank test can give for sample sizes m and n: the
/// probability of complete separation under the null, 1 / C(m+n, m) (= P(U = 0) of the
/// exact distribution). Ties cannot lower it: every one of the C(m+n, m) assignments of
/// the pooled values to the samples is equally likely, and the most extreme U is reached by
/// at least one. (The normal approximation used with ties can print a smaller p for tiny
/// samples, e.g. 0.023 for 3 tied values against 3 others; the exact floor shows that
/// number is an artefact.) 1 when a sample is empty.
pub fn rank_test_min_p(m: usize, n: usize) -> f64 {
    let (k, total) = (m.min(n), m + n);
    // C(total, k) as a product of k ratios; it overflows to infinity, and the floor to 0,
    // only for sizes where that is the right answer anyway.
    let combinations = (1..=k).fold(1.0_f64, |c, i| c * (total - k + i) as f64 / i as f64);
    1.0 / combinations
}

/// The smallest number of runs per strategy (the same on both sides) with which the rank
/// test can reach p < alpha; at least 2, which Welch's test needs.
pub fn runs_needed_per_side(alpha: f64) -> usize {
    (2..)
        .find(|&k| rank_test_min_p(k, k) < alpha)
        .expect("C(2k, k) grows without bound, so some k reaches any alpha > 0")
}

/// Null distribution of U for sample sizes m and n (index = U), by the recurrence
/// P(U=u; m, n) = m/(m+n) P(U=u-n; m-1, n) + n/(m+n) P(U=u; m, n-1), in probabilities so
/// that it does not overflow for sizes where the counts exceed 64 bits.
fn u_distribution(m: usize, n: usize) -> Vec<f64> {
    // table[j] holds the distribution for sizes (i, j) while i grows.
    let mut prev: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect(); // i = 0: U = 0
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        cur.push(vec![1.0]); // j = 0: U = 0
        for j in 1..=n {
            let len = i * j + 1;
            let mut d = vec![0.0; len];
            let a = i as f64 / (i + j) as f64;
            let b = j as f64 / (i + j) as f64;
            // x's largest value is the largest of all (probability i/(i+j)): it adds j to U.
            for (u, p) in prev[j].iter().enumerate() {
                d[u + j] += a * p;
            }
            for (u, p) in cur[j - 1].iter().enumerate() {
                d[u] += b * p;
            }
            cur.push(d);
        }
        prev = cur;
    }
    prev.swap_remove(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol * b.abs().max(1e-300), "{a} vs {b}");
    }

    const A: [f64; 10] = [10.1, 10.3, 9.8, 10.0, 10.4, 10.2, 9.9, 10.6, 10.1, 10.0];
    const B: [f64; 8] = [10.9, 11.2, 10.7, 11.5, 10.8, 11.0, 11.9, 10.6];

    #[test]
    fn describe_matches_numpy() {
        // numpy: np.mean(A)=10.14, np.median(A)=10.1, np.std(A, ddof=1)=0.2412928142780513,
        // np.percentile(A, [25, 75]) = [10.0, 10.275]
        let d = describe(&A).unwrap();
        close(d.mean, 10.14, 1e-12);
        close(d.median, 10.1, 1e-12);
        close(d.sd, 0.2412928142780513, 1e-12);
        close(d.cv, 0.2412928142780513 / 10.14, 1e-12);
        close(d.q1, 10.0, 1e-12);
        close(d.q3, 10.275, 1e-12);
        assert_eq!((d.min, d.max, d.n), (9.8, 10.6, 10));
        assert!(describe(&[]).is_none());
        let one = describe(&[3.0]).unwrap();
        assert_eq!((one.sd, one.median), (0.0, 3.0));
    }

    #[test]
    fn welch_matches_scipy() {
        // scipy.stats.ttest_ind(A, B, equal_var=False, alternative='less')
        //   -> statistic=-5.3965477792466485, pvalue=0.0001363049760207974 (df=10.309743263727864)
        let r = welch_t_test(&A, &B).unwrap();
        close(r.less, WELCH_LESS, 1e-9);
        close(r.greater, 1.0 - WELCH_LESS, 1e-9);
        let r2 = welch_t_test(&B, &A).unwrap();
        close(r2.greater, WELCH_LESS, 1e-9);
        assert!(welch_t_test(&[1.0], &B).is_none());
    }
    const WELCH_LESS: f64 = 0.0001363049760207974;

    #[test]
    fn mwu_exact_matches_scipy() {
        // scipy.stats.mannwhitneyu(X, Y, alternative='less', method='exact') with
        // X=[1.1,2.3,0.7,4.5,3.3], Y=[2.9,5.1,6.0,3.8,4.9,7.2] -> U=3.0, p=0.015151515151515152
        // and alternative='greater' -> p=0.9913419913419913
        let x = [1.1, 2.3, 0.7, 4.5, 3.3];
        let y = [2.9, 5.1, 6.0, 3.8, 4.9, 7.2];
        let r = mann_whitney(&x, &y).unwrap();
        assert!(r.exact);
        assert_eq!(r.u, 3.0);
        close(r.p.less, 0.015151515151515152, 1e-9);
        close(r.p.greater, 0.9913419913419913, 1e-9);
    }

    #[test]
    fn mwu_exact_complete_separation_10_vs_10() {
        // Complete separation: P(U=0) = 1 / C(20,10) = 1/184756 = 5.41254e-06
        let x: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let y: Vec<f64> = (10..20).map(|i| i as f64).collect();
        let r = mann_whitney(&x, &y).unwrap();
        close(r.p.less, 1.0 / 184756.0, 1e-9);
        close(r.p.greater, 1.0, 1e-12);
    }

    #[test]
    fn mwu_normal_with_ties_matches_scipy() {
        // A and B have ties (10.1, 10.0 twice in A; 10.6 in both):
        // scipy.stats.mannwhitneyu(A, B, alternative='less', method='asymptotic')
        //   -> U=0.5, pvalue=0.00025963148057464363
        // alternative='greater' -> pvalue=0.9998142954495529
        let r = mann_whitney(&A, &B).unwrap();
        assert!(!r.exact);
        assert_eq!(r.u, 0.5);
        close(r.p.less, MWU_LESS, 1e-9);
        close(r.p.greater, MWU_GREATER, 1e-9);
    }
    const MWU_LESS: f64 = 0.00025963148057464363;
    const MWU_GREATER: f64 = 0.9998142954495529;

    #[test]
    fn u_distribution_sums_to_one_and_is_symmetric() {
        let d = u_distribution(7, 4);
        assert_eq!(d.len(), 29);
        close(d.iter().sum::<f64>(), 1.0, 1e-12);
        for u in 0..d.len() {
            close(d[u], d[d.len() - 1 - u], 1e-9);
        }
        // P(U=0) for m=7, n=4 = 1/C(11,4) = 1/330
        close(d[0], 1.0 / 330.0, 1e-12);
    }

    #[test]
    fn rank_test_floor_is_the_exact_p_of_complete_separation() {
        // The floor is P(U = 0) of the exact distribution, for balanced and unbalanced sizes.
        for (m, n) in [
            (1, 1),
            (2, 2),
            (3, 3),
            (4, 4),
            (5, 5),
            (2, 7),
            (7, 2),
            (3, 10),
        ] {
            close(rank_test_min_p(m, n), u_distribution(m, n)[0], 1e-12);
        }
        // 2 per side: 1/6; 3: 1/20 = 0.05, which is not below alpha 0.05; 4: 1/70; 5: 1/252.
        close(rank_test_min_p(2, 2), 1.0 / 6.0, 1e-12);
        close(rank_test_min_p(3, 3), 0.05, 1e-12);
        close(rank_test_min_p(4, 4), 1.0 / 70.0, 1e-12);
        close(rank_test_min_p(5, 5), 1.0 / 252.0, 1e-12);
        assert_eq!(rank_test_min_p(0, 5), 1.0);
        // Complete separation of 3 against 3 reaches exactly that floor.
        let r = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!(r.exact);
        close(r.p.less, 0.05, 1e-12);
        // Large samples do not overflow into a NaN.
        assert!(rank_test_min_p(2000, 2000) >= 0.0);
    }

    #[test]
    fn runs_needed_follows_alpha() {
        assert_eq!(runs_needed_per_side(0.05), 4);
        assert_eq!(runs_needed_per_side(0.0501), 3);
        assert_eq!(runs_needed_per_side(0.2), 2);
        // 1/70 = 0.0143 is not below 0.01, 1/252 is.
        assert_eq!(runs_needed_per_side(0.01), 5);
        assert_eq!(runs_needed_per_side(0.001), 7);
        assert!(rank_test_min_p(6, 6) >= 0.001 && rank_test_min_p(7, 7) < 0.001);
    }

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_point_estimate() {
        let a = bootstrap_speedup_ci(&B, &A, Better::Lower, 2000, 0.95, 7).unwrap();
        let b = bootstrap_speedup_ci(&B, &A, Better::Lower, 2000, 0.95, 7).unwrap();
        assert_eq!(a.mean, b.mean);
        let point = mean(&B).unwrap() / mean(&A).unwrap();
        assert!(
            a.mean.low < point && point < a.mean.high,
            "{:?} {point}",
            a.mean
        );
        assert!(
            a.median.low > 1.0,
            "A is clearly faster than B: {:?}",
            a.median
        );
        let c = bootstrap_speedup_ci(&B, &A, Better::Lower, 2000, 0.95, 8).unwrap();
        assert_ne!(a.mean, c.mean);
    }

    #[test]
    fn speedup_direction() {
        assert_eq!(speedup(2.0, 1.0, Better::Lower), 2.0);
        assert_eq!(speedup(2.0, 1.0, Better::Higher), 0.5);
    }
}
