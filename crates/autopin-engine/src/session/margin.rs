//! How much faster one candidate ran than another in one search, with a 95% interval: the
//! one comparison the report states and the rule for risky decisions (`risk`) applies, so
//! that what the report says of a decision is what decided it.
//!
//! The evidence of a candidate is its probes of the search, start-up probes left out (the
//! program was still starting: reading its input, one thread working alone). Its rate is
//! their work over their time; the margin of `a` over `b` is the ratio of the two rates,
//! less one. Its interval is Welch's on the log scale, from the spread of the probes'
//! sampling ticks: ln(rate a / rate b) ± t(0.975, df) · √(var a / n a + var b / n b), with
//! Welch–Satterthwaite's df. A candidate with one tick borrows the other's spread (its own
//! cannot be known); with one tick each there is no interval.

#[cfg(test)]
use crate::report::margin_text;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence of every interval the report states.
pub(crate) const LEVEL: f64 = 0.95;

/// One candidate's evidence in a search.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Evidence {
    /// Σ score × seconds and Σ seconds over its probes.
    work: f64,
    time: f64,
    /// ln(score) of every sampling tick of its probes.
    log_ticks: Vec<f64>,
}

impl Evidence {
    /// Adds a probe of `seconds` at `score` (more is better), with the scores of its ticks.
    pub(crate) fn add(&mut self, score: f64, seconds: f64, ticks: impl IntoIterator<Item = f64>) {
        if !(seconds > 0.0 && score.is_finite()) {
            return;
        }
        self.work += score * seconds;
        self.time += seconds;
        self.log_ticks
            .extend(ticks.into_iter().filter(|t| *t > 0.0).map(f64::ln));
    }

    /// Its score over its probes (work ÷ time); None before a probe.
    pub(crate) fn score(&self) -> Option<f64> {
        (self.time > 0.0).then(|| self.work / self.time)
    }

    /// The spread of its log ticks and how many (None below two ticks).
    fn spread(&self) -> Option<(f64, f64)> {
        let v = autopin_stats::variance(&self.log_ticks)?;
        Some((v, self.log_ticks.len() as f64))
    }
}

/// `a` against `b`: a's margin, and its interval when one can be had.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Margin {
    /// score a ÷ score b − 1.
    pub(crate) margin: f64,
    /// The interval reaches this far either side on the log scale, as a ratio minus one:
    /// low = (1 + margin) / (1 + half) − 1, high = (1 + margin)(1 + half) − 1 (the report's
    /// `margin_ci`). None: one tick each, no spread to tell.
    pub(crate) half: Option<f64>,
}

impl Margin {
    /// The interval's lower end, as a ratio minus one (None without an interval).
    pub(crate) fn low(&self) -> Option<f64> {
        self.half.map(|h| (1.0 + self.margin) / (1.0 + h) - 1.0)
    }

    /// Whether `a` is better than `b` with the interval above zero.
    pub(crate) fn significant_win(&self) -> bool {
        self.low().is_some_and(|l| l > 0.0)
    }
}

/// `a`'s margin over `b` (None when either has no probe, or a score of zero).
pub(crate) fn compare(a: &Evidence, b: &Evidence) -> Option<Margin> {
    let (sa, sb) = (a.score()?, b.score()?);
    if !(sa > 0.0 && sb > 0.0) {
        return None;
    }
    let margin = sa / sb - 1.0;
    let (na, nb) = (a.log_ticks.len() as f64, b.log_ticks.len() as f64);
    let spreads = match (a.spread(), b.spread()) {
        (Some(x), Some(y)) => Some((x, y)),
        (Some((v, d)), None) if nb >= 1.0 => Some(((v, d), (v, d))),
        (None, Some((v, d))) if na >= 1.0 => Some(((v, d), (v, d))),
        _ => None,
    };
    let half = spreads.and_then(|((va, da), (vb, db))| {
        let (ea, eb) = (va / na, vb / nb);
        let se2 = ea + eb;
        // Welch–Satterthwaite, each spread with its own ticks less one.
        let denom = ea * ea / (da - 1.0).max(1.0) + eb * eb / (db - 1.0).max(1.0);
        let df = if denom > 0.0 { se2 * se2 / denom } else { 1e6 };
        let q = t_quantile(df)?;
        Some((q * se2.sqrt()).exp() - 1.0)
    });
    Some(Margin { margin, half })
}

/// The two-sided `LEVEL` quantile of Student's t with `df` degrees of freedom.
fn t_quantile(df: f64) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, df.clamp(1.0, 1e6)).ok()?;
    Some(t.inverse_cdf(0.5 + LEVEL / 2.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ticks: &[f64]) -> Evidence {
        let mut e = Evidence::default();
        e.add(
            ticks.iter().sum::<f64>() / ticks.len() as f64,
            0.1 * ticks.len() as f64,
            ticks.iter().copied(),
        );
        e
    }

    #[test]
    fn a_clear_gap_is_a_significant_win_and_a_near_tie_is_not() {
        let fast = ev(&[200.0, 205.0, 198.0, 202.0]);
        let slow = ev(&[100.0, 103.0, 99.0, 101.0]);
        let m = compare(&fast, &slow).expect("compared");
        assert!((m.margin - 1.0).abs() < 0.02, "{m:?}");
        assert!(m.significant_win(), "{m:?}");
        assert!(!compare(&slow, &fast).expect("compared").significant_win());
        // 0.6% apart with ticks swinging by 10%: a tie.
        let a = ev(&[100.0, 110.0, 91.0, 104.0]);
        let b = ev(&[99.0, 108.0, 92.0, 103.0]);
        let m = compare(&a, &b).expect("compared");
        assert!(m.margin > 0.0 && !m.significant_win(), "{m:?}");
        let text = margin_text(m.margin, m.half, "0,1");
        assert!(
            text.starts_with("cannot be told apart from 0,1 (+"),
            "{text}"
        );
        assert!(
            text.contains("95% CI -") || text.contains("95% CI −"),
            "{text}"
        );
    }

    #[test]
    fn one_tick_borrows_the_others_spread_and_one_each_has_no_interval() {
        let steady = ev(&[200.0, 201.0, 199.0]);
        let collapsed = ev(&[20.0]);
        let m = compare(&steady, &collapsed).expect("compared");
        assert!(m.significant_win(), "{m:?}");
        let m = compare(&ev(&[200.0]), &ev(&[20.0])).expect("compared");
        assert_eq!(m.half, None);
        assert!(!m.significant_win());
        assert_eq!(
            margin_text(m.margin, m.half, "0,0"),
            "10.00× as fast as 0,0 (one sampling tick each: no interval)"
        );
    }

    #[test]
    fn the_text_reads_as_a_person_reads_it() {
        assert_eq!(
            margin_text(0.12, Some(0.05), "0,1"),
            "12.0% faster than 0,1 (95% CI +6.7% to +17.6%)"
        );
        assert_eq!(
            margin_text(-0.357, Some(0.1), "unpinned (OS decides)"),
            "35.7% slower than unpinned (OS decides) (95% CI -41.5% to -29.3%)"
        );
        assert_eq!(
            margin_text(1.73, Some(0.02), "0,1"),
            "2.73× as fast as 0,1 (95% CI 2.68× to 2.78×)"
        );
    }

    #[test]
    fn nothing_to_compare_without_probes() {
        assert_eq!(compare(&Evidence::default(), &ev(&[1.0])), None);
    }
}
