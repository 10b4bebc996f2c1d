//! The pinning: which CPU each thread goes to, with a name a person can read. One noun for
//! topology candidates, `--schedule` lists, pin expressions, the engine's probes and the
//! reports.

use serde::{Deserialize, Serialize};

/// Thread i (creation order, skipped threads not counted) goes to `cpus[i % cpus.len()]`, so
/// a list shorter than the thread count puts several threads on the same CPUs (the "fewer
/// CPUs" pinnings). `unpinned` means every thread may run on every allowed CPU and the OS
/// scheduler decides; `cpus` is then empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinning {
    pub cpus: Vec<u32>,
    pub unpinned: bool,
    /// How people see it: `0,1`, `S0:0-1 = 0,1`, `0,2 (Package 2×1)`, `unpinned (OS decides)`.
    pub label: String,
    /// How the threads share the machine (topology candidates), e.g. `Package 2+2, L2 4×1`.
    #[serde(default)]
    pub description: String,
}

/// The label used for the OS-decides pinning.
pub const UNPINNED_LABEL: &str = "unpinned (OS decides)";

impl Pinning {
    pub fn pinned(label: impl Into<String>, cpus: Vec<u32>) -> Self {
        Pinning {
            cpus,
            unpinned: false,
            label: label.into(),
            description: String::new(),
        }
    }

    /// A pinning named by its own CPU list, e.g. `0,1`.
    pub fn from_cpus(cpus: Vec<u32>) -> Self {
        Pinning::pinned(cpu_text(&cpus), cpus)
    }

    /// A topology candidate: named `cpus (description)`.
    pub fn described(cpus: Vec<u32>, description: impl Into<String>) -> Self {
        let description = description.into();
        Pinning {
            label: format!("{} ({description})", cpu_text(&cpus)),
            cpus,
            unpinned: false,
            description,
        }
    }

    pub fn unpinned() -> Self {
        Pinning {
            cpus: Vec::new(),
            unpinned: true,
            label: UNPINNED_LABEL.to_string(),
            description: UNPINNED_LABEL.to_string(),
        }
    }

    pub fn is_unpinned(&self) -> bool {
        self.unpinned || self.cpus.is_empty()
    }

    /// The CPU list in thread order, or None when unpinned.
    pub fn cpu_list(&self) -> Option<&[u32]> {
        (!self.is_unpinned()).then_some(self.cpus.as_slice())
    }

    /// The CPU for thread `index`, or None when unpinned.
    pub fn cpu_for(&self, index: usize) -> Option<u32> {
        self.cpu_list().map(|c| c[index % c.len()])
    }

    /// The CPU of each of `n` threads (None when unpinned).
    pub fn cpus_for(&self, n: usize) -> Option<Vec<u32>> {
        self.cpu_list()
            .map(|_| (0..n).filter_map(|i| self.cpu_for(i)).collect())
    }
}

/// Prints a thread-ordered CPU list with commas (`0,1`, order kept, no ranges).
pub fn cpu_text(cpus: &[u32]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lists_wrap() {
        let c = Pinning::from_cpus(vec![1]);
        assert_eq!(c.cpus_for(3), Some(vec![1, 1, 1]));
        assert_eq!(c.label, "1");
        let c = Pinning::from_cpus(vec![2, 3]);
        assert_eq!(c.cpu_for(3), Some(3));
        assert_eq!(Pinning::unpinned().cpus_for(2), None);
    }

    #[test]
    fn topology_candidates_carry_their_sharing() {
        let c = Pinning::described(vec![0, 2], "Package 2×1");
        assert_eq!(c.label, "0,2 (Package 2×1)");
        assert_eq!(c.description, "Package 2×1");
    }
}
