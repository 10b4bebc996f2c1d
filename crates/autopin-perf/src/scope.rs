//! What counters are attached to: one thread, or one CPU.

/// What a set of counters is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    Thread(i32),
    Cpu(usize),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Thread(t) => write!(f, "thread {t}"),
            Target::Cpu(c) => write!(f, "CPU {c}"),
        }
    }
}
