//! The `--sharing` option of `place`, `pin` and `compare`: one spelling everywhere,
//! `--sharing STRATEGY:FILE` (e.g. `LP_COMPACT:comm.csv`); the older
//! `--sharing FILE --policy STRATEGY` of `place` still works.

use crate::error::CliError;
use autopin_placement::SHARING_STRATEGIES;
use std::path::PathBuf;

const NAMES: [&str; 5] = ["LP_COMPACT", "LP_SCATTER", "GP", "LPGP", "GPLP"];

fn strategy_name(s: &str) -> Option<String> {
    let key = s.trim().to_ascii_uppercase().replace('-', "_");
    NAMES.contains(&key.as_str()).then_some(key)
}

/// The strategy and matrix file of `--sharing SPEC`, with `--policy` as the strategy when the
/// spec is a bare file name.
pub fn parse(spec: &str, policy: Option<&str>) -> Result<(String, PathBuf), CliError> {
    if let Some((head, file)) = spec.split_once(':') {
        if let Some(strategy) = strategy_name(head) {
            if let Some(p) = policy {
                if strategy_name(p).as_deref() != Some(strategy.as_str()) {
                    return Err(CliError::usage(format!(
                        "--sharing {spec} names the strategy {strategy}, but --policy says {p}; give it once"
                    )));
                }
            }
            return Ok((strategy, PathBuf::from(file)));
        }
    }
    match policy {
        Some(p) => match strategy_name(p) {
            Some(strategy) => Ok((strategy, PathBuf::from(spec))),
            None => Err(CliError::usage(format!(
                "--policy {p} is not a sharing strategy; with --sharing use one of {SHARING_STRATEGIES}"
            ))),
        },
        None => Err(CliError::usage(format!(
            "--sharing {spec}: expected STRATEGY:FILE, e.g. LP_COMPACT:matrix.csv (strategies: {SHARING_STRATEGIES})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_name_the_same_placement() {
        let new = parse("LP_COMPACT:m.csv", None).unwrap();
        let old = parse("m.csv", Some("lp-compact")).unwrap();
        assert_eq!(new, old);
        assert_eq!(new, ("LP_COMPACT".to_string(), PathBuf::from("m.csv")));
        // A path with a colon that is not a strategy is a file name.
        assert_eq!(
            parse("a:b.csv", Some("GP")).unwrap().1,
            PathBuf::from("a:b.csv")
        );
        assert!(parse("m.csv", None).is_err());
        assert!(parse("GP:m.csv", Some("LPGP")).is_err());
        assert!(parse("m.csv", Some("compact")).is_err());
    }
}
