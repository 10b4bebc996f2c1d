//! What the engine probes: a pinning of the tracked threads, or "unpinned (OS decides)".

use serde::Serialize;

/// One candidate pinning. `cpus` maps tracked thread i (creation order, skipped threads not
/// counted) to `cpus[i % cpus.len()]`, so a list shorter than the thread count puts several
/// threads on the same CPUs (the "fewer CPUs" candidates). `None` means unpinned: every
/// thread may run on every allowed CPU and the OS scheduler decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub label: String,
    pub cpus: Option<Vec<u32>>,
}

/// The label used for the OS-decides candidate.
pub const UNPINNED_LABEL: &str = "unpinned (OS decides)";

impl Candidate {
    pub fn pinned(label: impl Into<String>, cpus: Vec<u32>) -> Self {
        Candidate {
            label: label.into(),
            cpus: Some(cpus),
        }
    }

    /// A candidate named by its own CPU list, e.g. `0,1`.
    pub fn from_cpus(cpus: Vec<u32>) -> Self {
        Candidate {
            label: cpu_text(&cpus),
            cpus: Some(cpus),
        }
    }

    pub fn unpinned() -> Self {
        Candidate {
            label: UNPINNED_LABEL.to_string(),
            cpus: None,
        }
    }

    pub fn is_unpinned(&self) -> bool {
        self.cpus.is_none()
    }

    /// The CPU for tracked thread `index`, or None when unpinned (or the list is empty).
    pub fn cpu_for(&self, index: usize) -> Option<u32> {
        match &self.cpus {
            Some(c) if !c.is_empty() => Some(c[index % c.len()]),
            _ => None,
        }
    }

    /// The CPU of each of `n` tracked threads (None when unpinned).
    pub fn cpus_for(&self, n: usize) -> Option<Vec<u32>> {
        self.cpus
            .as_ref()
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
        let c = Candidate::from_cpus(vec![1]);
        assert_eq!(c.cpus_for(3), Some(vec![1, 1, 1]));
        assert_eq!(c.label, "1");
        let c = Candidate::from_cpus(vec![2, 3]);
        assert_eq!(c.cpu_for(3), Some(3));
        assert_eq!(Candidate::unpinned().cpus_for(2), None);
    }
}
