//! Text for people: numbers with a sensible number of digits and no exponent notation,
//! relative changes that stay readable when they are huge, plurals, wrapped messages and
//! round axis ticks. Every crate that prints or draws a number uses these, so autopin says
//! `2.00 CPU-s/s`, `×4200 slower` and `1 class` everywhere instead of `1.9959e0`,
//! `+424054.6%` and `1 classes`.

use std::fmt::Write;

/// Decimal prefixes, largest first, for [`number`] and [`si`].
const SI_PREFIX: [(f64, &str); 5] = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];

/// `x` with three significant digits, in plain decimal notation for everyday magnitudes and
/// with an SI prefix letter (k, M, G, T, P) beyond a million; tiny values keep an exponent
/// only below 1e-4, where no decimal form is readable.
///
/// `number(1.9959)` → `2.00`, `number(316.23)` → `316`, `number(2.4e9)` → `2.40G`,
/// `number(0.000123)` → `0.000123`.
pub fn number(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "n/a".into()
        } else if x > 0.0 {
            "∞".into()
        } else {
            "-∞".into()
        };
    }
    if x == 0.0 {
        return "0".into();
    }
    let a = x.abs();
    if a >= 1e6 {
        for (scale, p) in SI_PREFIX {
            if a >= scale {
                return format!("{}{p}", significant(x / scale, 3));
            }
        }
    }
    if a < 1e-4 {
        // Below this no fixed notation reads well; keep the exponent but round the mantissa.
        return format!("{x:.2e}");
    }
    significant(x, 3)
}

/// `x` rounded to `digits` significant digits, in fixed notation (no exponent), keeping
/// trailing zeros up to that precision (`2.00`), and never more decimals than needed for an
/// integer part of `digits` or more (`316`, `13000`).
pub fn significant(x: f64, digits: u32) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (digits as i32 - 1 - mag).max(0) as usize;
    // Rounding can carry into the next magnitude (9.996 → 10.0): recompute once.
    let s = format!("{x:.decimals$}");
    let rounded: f64 = s.parse().unwrap_or(x);
    let mag2 = rounded.abs().log10().floor() as i32;
    if mag2 > mag && decimals > 0 {
        let decimals = (digits as i32 - 1 - mag2).max(0) as usize;
        return format!("{rounded:.decimals$}");
    }
    if decimals == 0 && mag >= digits as i32 {
        // Large integers: zero the digits past the significant ones (13042 → 13000).
        let scale = 10f64.powi(mag + 1 - digits as i32);
        return format!("{:.0}", (x / scale).round() * scale);
    }
    s
}

/// A number and its unit: `quantity(1.9959, "CPU-s/s")` → `2.00 CPU-s/s`.
pub fn quantity(x: f64, unit: &str) -> String {
    if unit.is_empty() {
        number(x)
    } else {
        format!("{} {unit}", number(x))
    }
}

/// Largest relative change still shown as a percentage; beyond it, a factor reads better.
const PERCENT_LIMIT: f64 = 1.0;

/// How `value` compares with `reference`, as a signed percentage while the change is within
/// ±100% (`+12.3%`, `-4.1%`), and as a factor beyond (`×13000`, `÷2.5`), so a change of
/// 424054% reads `×4240`. Both must be positive; otherwise the plain difference is unknown
/// and `n/a` is returned.
pub fn change(value: f64, reference: f64) -> String {
    if !(value > 0.0 && reference > 0.0 && value.is_finite() && reference.is_finite()) {
        return "n/a".into();
    }
    let r = value / reference;
    let rel = r - 1.0;
    if rel.abs() <= PERCENT_LIMIT && r >= 0.5 {
        percent(rel)
    } else if r > 1.0 {
        format!("×{}", significant(r, 2))
    } else {
        format!("÷{}", significant(1.0 / r, 2))
    }
}

/// A relative change given as a fraction (0.123 → `+12.3%`); past ±100% it becomes a factor
/// (`×13000`), below -50% a divisor (`÷4`), as [`change`] does.
pub fn relative(fraction: f64) -> String {
    if !fraction.is_finite() {
        return "n/a".into();
    }
    change(1.0 + fraction, 1.0)
}

/// A fraction as a signed percentage with sensible precision: `+12.3%`, `-0.41%`, `+250%`.
pub fn percent(fraction: f64) -> String {
    let p = 100.0 * fraction;
    let a = p.abs();
    let body = if a == 0.0 {
        "0".to_string()
    } else if a < 1.0 {
        significant(a, 2)
    } else if a < 100.0 {
        format!("{a:.1}")
    } else {
        format!("{a:.0}")
    };
    let sign = if p < 0.0 && body != "0" { "-" } else { "+" };
    format!("{sign}{body}%")
}

/// How much better or worse `value` is than `reference` in words, for an objective where
/// more (or less) is better: `12% better`, `×4200 worse`.
pub fn comparison(value: f64, reference: f64, more_is_better: bool) -> String {
    if !(value > 0.0 && reference > 0.0) {
        return "not comparable".into();
    }
    let r = value / reference;
    let better = if more_is_better { r >= 1.0 } else { r <= 1.0 };
    let f = if r >= 1.0 { r } else { 1.0 / r };
    let word = if better { "better" } else { "worse" };
    if f - 1.0 <= PERCENT_LIMIT {
        let p = percent(f - 1.0);
        format!("{} {word}", p.trim_start_matches('+'))
    } else {
        format!("×{} {word}", significant(f, 2))
    }
}

/// `plural(1, "class", "classes")` → `1 class`; `plural(3, ...)` → `3 classes`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A duration in seconds for people: `850 ms`, `4.2 s`, `3 min 05 s`, `1 h 02 min`.
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "n/a".into();
    }
    if secs < 1.0 {
        return format!("{} ms", significant(secs * 1000.0, 3));
    }
    if secs < 60.0 {
        return format!("{} s", significant(secs, 3));
    }
    let s = secs.round() as u64;
    if s < 3600 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{} h {:02} min", s / 3600, (s % 3600) / 60)
    }
}

/// Smallest p-value worth printing exactly; below it, only the bound says anything.
const P_FLOOR: f64 = 1e-4;

/// A p-value for a table cell: two significant digits in plain decimals (`0.0012`, `0.43`),
/// `<0.0001` below that floor, `n/a` when undefined.
pub fn probability(p: f64) -> String {
    if !p.is_finite() {
        "n/a".into()
    } else if p < P_FLOOR {
        format!("<{P_FLOOR}")
    } else {
        significant(p.min(1.0), 2)
    }
}

/// A p-value in a sentence: `p=0.0012`, `p<0.0001`.
pub fn p_value(p: f64) -> String {
    let s = probability(p);
    if s.starts_with('<') {
        format!("p{s}")
    } else {
        format!("p={s}")
    }
}

/// Wraps `text` at word boundaries so no line is longer than `width` characters (a single
/// word longer than that stays whole); continuation lines start with `indent`.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line_len = 0;
    for (i, word) in text.split_whitespace().enumerate() {
        let w = word.chars().count();
        if i > 0 && line_len + 1 + w > width {
            out.push('\n');
            out.push_str(indent);
            line_len = indent.chars().count();
        } else if i > 0 {
            out.push(' ');
            line_len += 1;
        }
        out.push_str(word);
        line_len += w;
    }
    out
}

/// Round tick values covering [lo, hi] for a linear axis: about `target` of them at a step
/// of 1, 2 or 5 × 10^k, first tick ≤ lo and last ≥ hi, so the axis ends on labelled values.
pub fn ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || target == 0 {
        return Vec::new();
    }
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        (lo - lo.abs() * 0.5, hi + hi.abs() * 0.5)
    };
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Tick labels that all use the same number of decimals, the fewest that tell the ticks apart
/// (`0`, `0.5`, `1.0` → `0.0 0.5 1.0`; 316, 1000 → `316`, `1000`); large ticks use
/// [`number`]'s SI letters.
pub fn tick_labels(ticks: &[f64]) -> Vec<String> {
    let max = ticks.iter().fold(0.0f64, |m, t| m.max(t.abs()));
    if max >= 1e6 {
        return ticks.iter().map(|t| si(*t)).collect();
    }
    for decimals in 0..=6usize {
        let labels: Vec<String> = ticks.iter().map(|t| format!("{t:.decimals$}")).collect();
        let distinct = labels.windows(2).all(|w| w[0] != w[1]);
        let exact = ticks.iter().zip(&labels).all(|(t, l)| {
            l.parse::<f64>()
                .is_ok_and(|v| (v - t).abs() <= 1e-9 * max.max(1e-12))
        });
        if distinct && exact {
            return labels
                .into_iter()
                .map(|l| if l == "-0" { "0".into() } else { l })
                .collect();
        }
    }
    ticks.iter().map(|t| number(*t)).collect()
}

/// An axis label with an SI prefix and no trailing zeros: `100k`, `2.5M`, `10M` (where
/// [`number`] writes `10.0M` and `100000`), so every label of an axis reads alike.
pub fn si(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() || a < 1e3 {
        return if x.is_finite() && a >= 1e-4 || x == 0.0 {
            trimmed(significant(x, 3))
        } else {
            number(x)
        };
    }
    let (scale, p) = SI_PREFIX
        .iter()
        .find(|(scale, _)| a >= *scale)
        .copied()
        .unwrap_or((1.0, ""));
    format!("{}{p}", trimmed(significant(x / scale, 3)))
}

/// `2.50` → `2.5`, `10.0` → `10`: a decimal number without zeros that say nothing.
fn trimmed(t: String) -> String {
    if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

/// Rows as aligned columns, two spaces apart, each line's trailing blanks cut: a column is
/// right-aligned where `right(column)` says so (numbers), else left-aligned.
pub fn columns<R: AsRef<[String]>>(rows: &[R], right: impl Fn(usize) -> bool) -> String {
    let n = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.as_ref().get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .as_ref()
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if right(i) {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Joins items as a person lists them: `a`, `a and b`, `a, b and c`.
pub fn list(items: &[String]) -> String {
    let mut s = String::new();
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            s.push_str(if i + 1 == items.len() { " and " } else { ", " });
        }
        let _ = write!(s, "{it}");
    }
    s
}

/// A byte size the way lstopo prints it: whole KiB/MiB/GiB/TiB, moving to the next unit
/// once there are at least ten of it (`8MiB`, `1536KiB`, `16GiB`).
pub fn lstopo_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut u = 0;
    while v >= 10 * 1024 && u < UNITS.len() - 1 {
        v /= 1024;
        u += 1;
    }
    format!("{v}{}", UNITS[u])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_three_significant_digits_and_no_exponent() {
        assert_eq!(number(1.9959), "2.00");
        assert_eq!(number(0.41002), "0.410");
        assert_eq!(number(316.23), "316");
        assert_eq!(number(13042.0), "13000");
        assert_eq!(number(9.996), "10.0");
        assert_eq!(number(999_999.0), "1000000");
        assert_eq!(number(2.4e9), "2.40G");
        assert_eq!(number(-0.5), "-0.500");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(0.000123), "0.000123");
        assert_eq!(number(1.5e-7), "1.50e-7");
        assert_eq!(quantity(1.9959, "CPU-s/s"), "2.00 CPU-s/s");
        for x in [1.0, 3.162e2, 0.1, 42.0, 123456.0] {
            assert!(!number(x).contains('e'), "{x} → {}", number(x));
        }
    }

    #[test]
    fn huge_changes_become_factors() {
        assert_eq!(change(1.123, 1.0), "+12.3%");
        assert_eq!(change(0.959, 1.0), "-4.1%");
        assert_eq!(change(2.0, 1.0), "+100%");
        assert_eq!(change(4241.546, 1.0), "×4200");
        assert_eq!(change(1.0, 4.0), "÷4.0");
        assert_eq!(relative(4240.546), "×4200");
        assert_eq!(relative(-0.003), "-0.30%");
        assert_eq!(change(0.0, 1.0), "n/a");
        assert_eq!(comparison(2.0, 1.0, true), "100% better");
        assert_eq!(comparison(1.0, 13000.0, true), "×13000 worse");
        assert_eq!(comparison(1.0, 1.1, false), "10.0% better");
    }

    #[test]
    fn plurals_durations_and_lists() {
        assert_eq!(plural(1, "class", "classes"), "1 class");
        assert_eq!(plural(0, "class", "classes"), "0 classes");
        assert_eq!(duration(0.25), "250 ms");
        assert_eq!(duration(4.24), "4.24 s");
        assert_eq!(duration(185.0), "3 min 05 s");
        assert_eq!(duration(3725.0), "1 h 02 min");
        assert_eq!(list(&["a".into(), "b".into(), "c".into()]), "a, b and c");
    }

    #[test]
    fn p_values_read_without_exponents() {
        assert_eq!(p_value(0.0012345), "p=0.0012");
        assert_eq!(p_value(0.000013630), "p<0.0001");
        assert_eq!(p_value(0.4312), "p=0.43");
        assert_eq!(p_value(1.0), "p=1.0");
        assert_eq!(probability(0.00025963), "0.00026");
        assert_eq!(probability(f64::NAN), "n/a");
    }

    #[test]
    fn wrap_keeps_lines_short_and_words_whole() {
        let text = "per-thread counting may have slowed the program by about 12 percent because of frequent context switches";
        let w = wrap(text, 40, "  ");
        assert!(w.lines().all(|l| l.chars().count() <= 40), "{w}");
        assert_eq!(
            w.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert!(w.lines().skip(1).all(|l| l.starts_with("  ")));
    }

    #[test]
    fn si_labels_read_alike_across_decades() {
        let labels: Vec<String> = [100.0, 1e3, 1e4, 1e5, 1e6, 1e7, 2.5e6, 0.5, 0.0]
            .iter()
            .map(|v| si(*v))
            .collect();
        assert_eq!(
            labels,
            ["100", "1k", "10k", "100k", "1M", "10M", "2.5M", "0.5", "0"]
        );
        assert_eq!(tick_labels(&[0.0, 5e6, 1e7]), ["0", "5M", "10M"]);
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t = ticks(0.0, 1.365, 4);
        assert_eq!(t.first(), Some(&0.0));
        assert!(*t.last().unwrap() >= 1.365);
        assert_eq!(tick_labels(&t), vec!["0.0", "0.5", "1.0", "1.5"]);
        let t = ticks(3.0, 316.2, 5);
        assert_eq!(tick_labels(&t), vec!["0", "100", "200", "300", "400"]);
        let t = ticks(93.1, 93.1, 4);
        assert!(t.len() >= 2 && t[0] <= 93.1 && *t.last().unwrap() >= 93.1);
        assert!(tick_labels(&[1e9, 2e9]).iter().all(|l| !l.contains('e')));
    }

    #[test]
    fn columns_align_and_trim() {
        let rows = vec![
            vec!["ID".to_string(), "NAME".into(), "N".into()],
            vec!["12".to_string(), "a".into(), "".into()],
        ];
        assert_eq!(columns(&rows, |i| i == 0), "ID  NAME  N\n12  a\n");
        assert_eq!(columns(&rows, |_| false), "ID  NAME  N\n12  a\n");
        let right_all = columns(
            &[["x".to_string(), "yy".into()], ["xxx".into(), "y".into()]],
            |_| true,
        );
        assert_eq!(right_all, "  x  yy\nxxx   y\n");
    }
}
