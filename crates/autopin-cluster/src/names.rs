//! Per-rank file names: `--report 'autopin-%j.%s.%n.%r.json'` gives every rank its own
//! report. `%j` job, `%s` step, `%n` node, `%r` global rank, `%l` local rank, `%%` a percent
//! sign (Slurm's `%j`/`%s`/`%n` letters where Slurm has them).

use autopin_engine::report::JobPlace;

/// An unknown `%x` sequence (`sequence`, at 1-based `position`) in a file name pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pattern:?}: {sequence} at position {position} is not a pattern; use %j (job), %s (step), %n (node), %r (rank), %l (local rank) or %%")]
pub struct PatternError {
    pub pattern: String,
    pub sequence: String,
    pub position: usize,
}

/// Expands the pattern for this rank; unknown `%x` sequences are errors that say which ones
/// are valid. Parts the launcher does not name become `none` (job, step) or `localhost`.
pub fn expand(pattern: &str, l: &JobPlace) -> Result<String, PatternError> {
    let mut out = String::new();
    let mut chars = pattern.char_indices();
    while let Some((i, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some((_, 'j')) => out.push_str(&one_name(l.job.as_deref().unwrap_or("none"))),
            Some((_, 's')) => out.push_str(&one_name(l.step.as_deref().unwrap_or("none"))),
            Some((_, 'n')) => out.push_str(&one_name(l.node.as_deref().unwrap_or("localhost"))),
            Some((_, 'r')) => out.push_str(&l.rank.to_string()),
            Some((_, 'l')) => out.push_str(&l.local_rank.to_string()),
            Some((_, '%')) => out.push('%'),
            other => {
                let seq = other.map(|(_, c)| format!("%{c}")).unwrap_or("%".into());
                return Err(PatternError {
                    pattern: pattern.to_string(),
                    sequence: seq,
                    position: i + 1,
                });
            }
        }
    }
    Ok(out)
}

/// A value from the launcher's environment as one file name component: `/`, NUL and other
/// control characters become `_`, and `.` or `..` alone become `_` too, so a node name
/// such as `../..` cannot put a rank's report in another directory.
fn one_name(v: &str) -> String {
    let s: String = v
        .chars()
        .map(|c| if c == '/' || c.is_control() { '_' } else { c })
        .collect();
    match s.as_str() {
        "" | "." | ".." => "_".into(),
        _ => s,
    }
}

/// True when the pattern names the rank, so ranks do not overwrite each other's files.
pub fn names_rank(pattern: &str) -> bool {
    pattern.contains("%r") || (pattern.contains("%l") && pattern.contains("%n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_engine::report::JobLauncher;

    #[test]
    fn expands_every_letter() {
        let l = JobPlace {
            launcher: JobLauncher::Slurm,
            job: Some("7".into()),
            step: Some("0".into()),
            node: Some("node2".into()),
            rank: 3,
            size: 4,
            local_rank: 1,
            local_size: 2,
        };
        let plain = crate::job_launcher::Launch::plain().place;
        assert_eq!(
            expand("autopin-%j.%s.%n.%r-%l-100%%.json", &l).unwrap(),
            "autopin-7.0.node2.3-1-100%.json"
        );
        assert_eq!(expand("r%r.json", &plain).unwrap(), "r0.json");
        assert_eq!(expand("%j-%s-%n", &plain).unwrap(), "none-none-localhost");
        // The launcher's words stay inside one file name.
        let odd = JobPlace {
            node: Some("../..".into()),
            job: Some("a/b\0c".into()),
            ..l.clone()
        };
        assert_eq!(expand("r-%n-%j.json", &odd).unwrap(), "r-.._..-a_b_c.json");
        let dots = JobPlace {
            node: Some("..".into()),
            ..l.clone()
        };
        assert_eq!(expand("%n/r.json", &dots).unwrap(), "_/r.json");
        let e = expand("a-%x.json", &l).unwrap_err().to_string();
        assert!(e.contains("%x at position 3"), "{e}");
        assert!(expand("a%", &l)
            .unwrap_err()
            .to_string()
            .contains("% at position 2"));
        assert!(names_rank("x-%r.json"));
        assert!(!names_rank("x-%j.json"));
    }
}
