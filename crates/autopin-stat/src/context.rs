//! What the analysis needs to know of the machine and of what is watched, beyond the
//! samples: the CPUs the program may use, each CPU's core and NUMA node, and how the
//! verdicts' suggested commands name the program.

use std::collections::{BTreeMap, BTreeSet};

/// What the analysis needs to know beyond the samples.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The CPUs the program may use.
    pub allowed: Vec<u32>,
    /// CPU → its core (SMT siblings share one); empty when unknown.
    pub core_of: BTreeMap<u32, usize>,
    /// What the suggestions name: the command `stat` started, or the process it watched.
    pub subject: Subject,
    /// CPU → its NUMA node; empty when unknown.
    pub node_of: BTreeMap<u32, u32>,
}

/// What a verdict's suggested command acts on.
#[derive(Debug, Clone)]
pub enum Subject {
    /// A program `stat` started: the suggestion starts it again under autopin.
    Command(Vec<String>),
    /// A running process: the suggestion attaches to it.
    Process(i32),
}

impl Subject {
    /// How it is named in a title: the command line, or `PID n`.
    pub fn name(&self) -> String {
        match self {
            Subject::Command(argv) => argv.join(" "),
            Subject::Process(pid) => format!("PID {pid}"),
        }
    }
}

impl Default for Subject {
    fn default() -> Self {
        Subject::Command(Vec::new())
    }
}

/// A word as a POSIX shell reads it back: quoted unless it is plain.
fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./,:=+@%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

impl Context {
    /// The command that lets autopin search for this program: `autopin run OPTS-- CMD`, or
    /// `autopin attach OPTSPID` for a running process (`opts` ends with a space when given).
    pub fn optimize(&self, opts: &str) -> String {
        match &self.subject {
            Subject::Command(argv) => format!(
                "autopin run {opts}-- {}",
                argv.iter()
                    .map(|a| shell_word(a))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Subject::Process(pid) => format!("autopin attach {opts}{pid}"),
        }
    }

    /// The command that pins this program's threads to `cpus` (a CPU list or a pin
    /// expression): `autopin pin -c CPUS -- CMD`, or a fixed attach for a running process.
    pub fn pin(&self, cpus: &str) -> String {
        match &self.subject {
            Subject::Command(_) => self.optimize("").replacen(
                "autopin run -- ",
                &format!("autopin pin -c {} -- ", shell_word(cpus)),
                1,
            ),
            Subject::Process(_) => self.optimize(&format!(
                "--strategy fixed --candidates {} ",
                shell_word(cpus)
            )),
        }
    }
    /// The machine has CPUs on more than one NUMA node: where threads and pages are matters.
    pub fn multi_node(&self) -> bool {
        self.node_of.values().collect::<BTreeSet<_>>().len() > 1
    }
}
