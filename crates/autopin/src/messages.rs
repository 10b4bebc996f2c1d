//! autopin's own lines on stderr: prefixed, wrapped to the terminal's width (not wrapped
//! at all when stderr is a pipe or a file, so tools that read it get one line per message),
//! each warning said once per run. Every message goes out in one `write`, so it cannot land
//! inside a line of the program's own stderr; a closed stderr (`| head`, a dead `tee`)
//! silences autopin without stopping the run.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};

/// Writes `text` and its newline to stderr in one `write`; a failed write (stderr closed)
/// is ignored: autopin's messages stop, the run goes on.
pub fn line(text: &str) {
    let mut s = String::with_capacity(text.len() + 1);
    s.push_str(text);
    s.push('\n');
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

/// `eprintln!` that cannot panic and writes each message in one piece (see [`line()`]).
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::messages::line(&format!($($arg)*))
    };
}
/// Continuation lines are indented under the message text.
const INDENT: &str = "    ";

/// Where a command's progress lines and warnings go.
pub struct Messages {
    quiet: bool,
    width: usize,
    said: HashSet<String>,
    /// `autopin` alone, or `autopin[rank 3]` when several ranks write to one terminal.
    name: String,
    /// Warnings cut to their first sentence: every rank but rank 0 of a launch, so a long
    /// explanation is printed once per launch, not once per rank.
    brief: bool,
}

impl Messages {
    /// Lines for stderr at the terminal's width; nothing but errors when `quiet`.
    pub fn stderr(quiet: bool) -> Self {
        let width = if std::io::stderr().is_terminal() {
            console::Term::stderr()
                .size_checked()
                .map(|(_, cols)| cols as usize)
                .filter(|w| *w >= 40)
                .unwrap_or(100)
        } else {
            usize::MAX
        };
        Messages {
            quiet,
            width,
            said: HashSet::new(),
            name: "autopin".into(),
            brief: false,
        }
    }

    /// Lines of rank `rank` of `size`: named by the rank when there are several, and brief
    /// warnings on every rank but rank 0.
    pub fn name_rank(&mut self, rank: usize, size: usize) {
        if size > 1 {
            self.name = format!("autopin[rank {rank}]");
            self.brief = rank != 0;
        }
    }

    /// Prints `text` (at run time `at` seconds, if given) unless quiet or a warning said before.
    pub fn say(&mut self, at: Option<f64>, text: &str) {
        if self.quiet {
            return;
        }
        let brief;
        let text = if self.brief && text.starts_with("warning:") {
            brief = first_sentence(text);
            brief.as_str()
        } else {
            text
        };
        if let Some(s) = render(&self.name, at, text, self.width, &mut self.said) {
            line(&s);
        }
    }
}

/// A warning's first sentence, with a pointer to rank 0's whole text.
fn first_sentence(text: &str) -> String {
    match text.find(". ").or_else(|| text.find("; ")) {
        Some(end) if end + 2 < text.len() => {
            format!("{} (rank 0 says more)", &text[..end + 1])
        }
        _ => text.to_string(),
    }
}

/// The line(s) for one message, or None for a warning already said.
fn render(
    name: &str,
    at: Option<f64>,
    text: &str,
    width: usize,
    said: &mut HashSet<String>,
) -> Option<String> {
    if text.starts_with("warning:") && !said.insert(text.to_string()) {
        return None;
    }
    let prefix = match at {
        Some(t) => format!("{name}: [{t:6.1}s] "),
        None => format!("{name}: "),
    };
    // Short lines keep their spacing (aligned probe columns); long ones are wrapped after
    // the prefix, whose width the continuation indent never exceeds.
    let room = width.saturating_sub(prefix.chars().count()).max(20);
    if width == usize::MAX {
        return Some(format!("{prefix}{text}"));
    }
    Some(if text.chars().count() <= room {
        format!("{prefix}{text}")
    } else {
        let body = autopin_human::wrap(text, room, "");
        format!("{prefix}{}", body.replace('\n', &format!("\n{INDENT}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_warnings_are_wrapped_and_said_once() {
        let mut said = HashSet::new();
        let w = format!(
            "warning: {}",
            "the default objective cannot be counted here; ".repeat(6)
        );
        let s = render("autopin", None, &w, 100, &mut said).unwrap();
        assert!(s.lines().count() > 2, "{s}");
        assert!(s.lines().all(|l| l.chars().count() <= 100), "{s}");
        assert!(s.lines().skip(1).all(|l| l.starts_with(INDENT)), "{s}");
        assert_eq!(render("autopin", None, &w, 100, &mut said), None);
        // Progress lines repeat legitimately and keep their alignment.
        let p = "probe 0,1                      2.00 CPU-s/s over 500 ms";
        assert!(render("autopin", Some(1.0), p, 100, &mut said)
            .unwrap()
            .ends_with(p));
        assert!(render("autopin", Some(2.0), p, 100, &mut said).is_some());
        // The time stamp keeps its padding when the text is wrapped.
        let long = "the program has run 0.0 s where the OS placed it; ".repeat(3);
        let s = render("autopin", Some(0.0), &long, 100, &mut said).unwrap();
        assert!(s.starts_with("autopin: [   0.0s] the program"), "{s}");
        assert!(s.lines().all(|l| l.chars().count() <= 100), "{s}");
    }

    #[test]
    fn ranks_are_named_and_only_rank_0_explains_at_length() {
        let mut said = HashSet::new();
        let s = render(
            "autopin[rank 3]",
            Some(1.0),
            "probe 0,1",
            usize::MAX,
            &mut said,
        )
        .unwrap();
        assert_eq!(s, "autopin[rank 3]: [   1.0s] probe 0,1");
        let w =
            "warning: no hardware counters here. autopin counts task-clock instead; see the README";
        assert_eq!(
            first_sentence(w),
            "warning: no hardware counters here. (rank 0 says more)"
        );
        assert_eq!(first_sentence("warning: short"), "warning: short");
    }
}
