//! Small descriptive statistics, with one convention for the whole workspace: a statistic
//! the input cannot define (the mean of nothing, the spread of one value, the relative
//! spread around zero) is `None`, never 0, NaN or a panic. Callers say what an undefined
//! value means where they use it.

/// Arithmetic mean.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Unbiased sample variance (n − 1); needs two values.
pub fn variance(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    Some(xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64)
}

/// Relative standard deviation (coefficient of variation); undefined around a zero mean.
pub fn cv(xs: &[f64]) -> Option<f64> {
    let m = mean(xs)?;
    if m.abs() < f64::MIN_POSITIVE {
        return None;
    }
    variance(xs).map(|v| v.sqrt() / m.abs())
}

/// Median of an unsorted sample (the mean of the two middle values for an even count).
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, 0.5)
}

/// Quantile `q` of a sorted sample, interpolating linearly between order statistics
/// (numpy's default, "type 7"); the median is q = 0.5.
pub fn quantile_sorted(s: &[f64], q: f64) -> Option<f64> {
    if s.is_empty() {
        return None;
    }
    let h = (s.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(s[lo] + (h - lo as f64) * (s[hi] - s[lo]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_statistics_are_none() {
        assert_eq!(mean(&[]), None);
        assert_eq!(median(&[]), None);
        assert_eq!(variance(&[1.0]), None);
        assert_eq!(cv(&[0.0, 0.0]), None);
        assert_eq!(quantile_sorted(&[], 0.3), None);
    }

    #[test]
    fn values_match_numpy() {
        let a = [10.1, 9.9, 10.4, 10.0, 10.3];
        assert!((mean(&a).unwrap() - 10.14).abs() < 1e-12);
        assert_eq!(median(&a), Some(10.1));
        assert!((variance(&a).unwrap().sqrt() - 0.2073644135332772).abs() < 1e-12);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        // np.quantile([1, 2, 3, 4], 0.25) = 1.75
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0, 4.0], 0.25), Some(1.75));
    }
}
