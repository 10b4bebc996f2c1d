//! clap value parsers for the numbers options take, one per kind of value, so every option
//! of a kind rejects the same inputs with the same words: NaN, infinity, negatives, and zero
//! where zero means nothing. clap names the option and exits with 2.

/// A number parsed as f64, or a message saying what is valid.
fn float(text: &str, valid: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("not a finite number; {valid}")),
    }
}

/// The longest time any option takes: a year. Longer ones are typos or tests of autopin
/// (`--tick 1e300` panicked when it became a `Duration`; `--duration 1e308min` was
/// infinite).
pub const MAX_SECONDS: f64 = 365.0 * 86400.0;

/// The shortest time an option where zero means nothing takes: a millisecond. Autopin's
/// clock and /proc's counters are no finer, and a shorter tick or probe only spins.
pub const MIN_SECONDS: f64 = 1e-3;

/// Seconds, also written with a unit as people do (`5s`, `500ms`, `2min`).
fn duration(text: &str, valid: &str) -> Result<f64, String> {
    let t = text.trim();
    for (unit, scale) in [("ms", 1e-3), ("min", 60.0), ("s", 1.0)] {
        if let Some(n) = t.strip_suffix(unit) {
            if let Ok(x) = n.trim().parse::<f64>() {
                return if x.is_finite() {
                    Ok(x * scale)
                } else {
                    Err(format!("not a finite number; {valid}"))
                };
            }
        }
    }
    float(
        t,
        &format!("{valid} (a plain number, or with ms, s or min)"),
    )
}

/// Seconds where zero is meaningful (an init or warm-up time, a timeout): from 0 to a year.
pub fn seconds(text: &str) -> Result<f64, String> {
    const VALID: &str = "valid: a number of seconds from 0 to 31536000 (365 days)";
    match duration(text, VALID)? {
        x if (0.0..=MAX_SECONDS).contains(&x) => Ok(x),
        _ => Err(VALID.into()),
    }
}

/// Seconds where zero means nothing (a probe, a budget, a sampling period): from a
/// millisecond to a year.
pub fn positive_seconds(text: &str) -> Result<f64, String> {
    const VALID: &str = "valid: a number of seconds from 0.001 to 31536000 (365 days)";
    match duration(text, VALID)? {
        x if (MIN_SECONDS..=MAX_SECONDS).contains(&x) => Ok(x),
        _ => Err(VALID.into()),
    }
}

/// A fraction of a rate: finite, in [0, 1).
pub fn fraction(text: &str) -> Result<f64, String> {
    const VALID: &str = "valid: a fraction in [0, 1), e.g. 0.2 for 20%";
    match float(text, VALID)? {
        x if (0.0..1.0).contains(&x) => Ok(x),
        _ => Err(VALID.into()),
    }
}

/// A count of at least `MIN` (threads, candidates, ranks: 1; rounds for a median: 10).
pub fn count_at_least<const MIN: usize>(text: &str) -> Result<usize, String> {
    let valid = || format!("valid: a whole number ≥ {MIN}");
    match text.trim().parse::<usize>() {
        Ok(n) if n >= MIN => Ok(n),
        _ => Err(valid()),
    }
}

/// What `run --threads` asks of the program's thread count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadsArg {
    /// The search may give an OpenMP program's regions fewer threads (the default).
    Auto,
    /// Never change the count.
    Keep,
    /// Run the program with this many threads (and plan candidates for them).
    Count(usize),
}

impl ThreadsArg {
    /// The count asked for, if one was.
    pub fn count(&self) -> Option<usize> {
        match self {
            ThreadsArg::Count(n) => Some(*n),
            _ => None,
        }
    }
}

/// The most threads `--threads N` may ask for: far beyond any node's CPUs, short of a count
/// that is surely a typo (`--threads 100000`).
pub const MAX_THREADS: usize = 16384;

/// `--threads`: auto, keep, or a count from 1 to [`MAX_THREADS`].
pub fn threads_arg(text: &str) -> Result<ThreadsArg, String> {
    let valid = || format!("valid: auto, keep, or a whole number ≥ 1 and at most {MAX_THREADS}");
    match text.trim() {
        "auto" => Ok(ThreadsArg::Auto),
        "keep" => Ok(ThreadsArg::Keep),
        t => match t.parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(ThreadsArg::Count(n)),
            _ => Err(valid()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_take_auto_keep_or_a_sane_count() {
        assert_eq!(threads_arg("auto"), Ok(ThreadsArg::Auto));
        assert_eq!(threads_arg("keep"), Ok(ThreadsArg::Keep));
        assert_eq!(threads_arg("4"), Ok(ThreadsArg::Count(4)));
        for bad in ["0", "-1", "100000", "x", "", "2.5"] {
            let e = threads_arg(bad).unwrap_err();
            assert!(e.contains("≥ 1") && e.contains("auto, keep"), "{bad}: {e}");
        }
    }

    #[test]
    fn seconds_reject_nan_infinity_and_negatives() {
        for bad in ["nan", "NaN", "inf", "-inf", "-1", "-0.5", "x", ""] {
            assert!(seconds(bad).is_err(), "{bad}");
            assert!(positive_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds("0"), Ok(0.0));
        assert_eq!(seconds("0.25"), Ok(0.25));
        assert!(positive_seconds("0").unwrap_err().contains("from 0.001"));
        assert_eq!(positive_seconds("1e-3"), Ok(0.001));
    }

    #[test]
    fn seconds_are_at_most_a_year_and_positive_ones_at_least_a_millisecond() {
        for bad in [
            "1e300",
            "1e308min",
            "1e308",
            "31536001",
            "525601min",
            "1e20ms",
        ] {
            let e = seconds(bad).unwrap_err();
            assert!(e.contains("31536000 (365 days)"), "{bad}: {e}");
            assert!(positive_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds("525600min"), Ok(MAX_SECONDS));
        assert_eq!(positive_seconds("31536000"), Ok(MAX_SECONDS));
        for bad in ["1e-300", "0.0009", "0.5ms", "1e-4s"] {
            assert!(
                positive_seconds(bad).unwrap_err().contains("from 0.001"),
                "{bad}"
            );
        }
        assert_eq!(seconds("1e-300"), Ok(1e-300));
    }

    #[test]
    fn fractions_are_below_one() {
        assert_eq!(fraction("0"), Ok(0.0));
        assert_eq!(fraction("0.2"), Ok(0.2));
        for bad in ["1", "1.5", "-0.1", "nan"] {
            assert!(fraction(bad).unwrap_err().contains("[0, 1)"), "{bad}");
        }
    }

    #[test]
    fn counts_have_a_minimum() {
        assert_eq!(count_at_least::<1>("3"), Ok(3));
        assert!(count_at_least::<1>("0").unwrap_err().contains("≥ 1"));
        assert!(count_at_least::<1>("-1").is_err());
        assert!(count_at_least::<10>("9").unwrap_err().contains("≥ 10"));
        assert_eq!(count_at_least::<10>("10"), Ok(10));
    }
}
