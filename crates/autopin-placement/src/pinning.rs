//! The pinning: which CPU each thread goes to, with a name a person can read. One noun for
//! topology candidates, `--schedule` lists, pin expressions, the engine's probes and the
//! reports.

use serde::{Deserialize, Serialize};

/// Where the threads go: the OS decides (every thread may run on every allowed CPU), or
/// thread i (creation order, skipped threads not counted) goes to `cpus[i % cpus.len()]`,
/// so a list shorter than the thread count puts several threads on the same CPUs (the
/// "fewer CPUs" pinnings). A CPU list is never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    OsDecides,
    Cpus(Vec<u32>),
}

/// A pinning: where the threads go, with a name a person can read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "PinningDoc", from = "PinningDoc")]
pub struct Pinning {
    pub place: Place,
    /// How people see it: `0,1`, `S0:0-1 = 0,1`, `0,2 (Package 2×1)`, `unpinned (OS decides)`.
    pub label: String,
    /// How the threads share the machine (topology candidates), e.g. `Package 2+2, L2 4×1`.
    pub description: String,
    /// The team size the program's OpenMP regions run with under this pinning (None: the
    /// program's own count). A candidate with a team puts its first `team` threads on
    /// `cpus`; the others wait idle in the runtime's pool.
    pub team: Option<usize>,
    /// Where the threads beyond a team go (the other CPUs the program may use; empty: they
    /// wrap onto the team's CPUs). A team applies at the program's next outermost parallel
    /// region: a region in progress keeps its whole team until it ends, and its threads
    /// beyond the team must not stack on the team's CPUs meanwhile (syncbench's phase of
    /// back-to-back barriers in one region ran two spinning threads on CPU 1 that way, at a
    /// fifth of its rate, for a minute).
    pub spare: Vec<u32>,
}

/// A pinning as JSON documents (reports, exports) hold it: `cpus` empty and `unpinned` true
/// for the OS's placement.
#[derive(Serialize, Deserialize)]
struct PinningDoc {
    cpus: Vec<u32>,
    #[serde(default)]
    unpinned: bool,
    label: String,
    #[serde(default)]
    description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    team: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    spare: Vec<u32>,
}

impl From<Pinning> for PinningDoc {
    fn from(p: Pinning) -> Self {
        let unpinned = p.is_unpinned();
        PinningDoc {
            cpus: match p.place {
                Place::OsDecides => Vec::new(),
                Place::Cpus(c) => c,
            },
            unpinned,
            label: p.label,
            description: p.description,
            team: p.team,
            spare: p.spare,
        }
    }
}

impl From<PinningDoc> for Pinning {
    fn from(d: PinningDoc) -> Self {
        Pinning {
            place: if d.unpinned || d.cpus.is_empty() {
                Place::OsDecides
            } else {
                Place::Cpus(d.cpus)
            },
            label: d.label,
            description: d.description,
            team: d.team.filter(|n| *n > 0),
            spare: d.spare,
        }
    }
}

/// The label used for the OS-decides pinning.
pub const UNPINNED_LABEL: &str = "unpinned (OS decides)";

impl Pinning {
    /// A named CPU list (an empty list is the OS's placement).
    pub fn pinned(label: impl Into<String>, cpus: Vec<u32>) -> Self {
        Pinning {
            place: if cpus.is_empty() {
                Place::OsDecides
            } else {
                Place::Cpus(cpus)
            },
            label: label.into(),
            description: String::new(),
            team: None,
            spare: Vec::new(),
        }
    }

    /// A pinning named by its own CPU list, e.g. `0,1`.
    pub fn from_cpus(cpus: Vec<u32>) -> Self {
        Pinning::pinned(cpu_text(&cpus), cpus)
    }

    /// A topology candidate: named `cpus (description)`.
    pub fn described(cpus: Vec<u32>, description: impl Into<String>) -> Self {
        let description = description.into();
        let mut p = Pinning::pinned(format!("{} ({description})", cpu_text(&cpus)), cpus);
        p.description = description;
        p
    }

    pub fn unpinned() -> Self {
        Pinning {
            place: Place::OsDecides,
            label: UNPINNED_LABEL.to_string(),
            description: UNPINNED_LABEL.to_string(),
            team: None,
            spare: Vec::new(),
        }
    }

    /// This pinning with teams of `n` threads (n ≥ 1): its label says the count first,
    /// `1 thread: 1`, `2 threads: 0,2 (Package 2×1)`.
    pub fn with_team(mut self, n: usize) -> Self {
        let n = n.max(1);
        self.label = format!(
            "{n} thread{}: {}",
            if n == 1 { "" } else { "s" },
            self.label
        );
        self.team = Some(n);
        self
    }

    pub fn is_unpinned(&self) -> bool {
        self.place == Place::OsDecides
    }

    /// The CPU list in thread order; empty for the OS's placement.
    pub fn cpus(&self) -> &[u32] {
        match &self.place {
            Place::OsDecides => &[],
            Place::Cpus(c) => c,
        }
    }

    /// The CPU list in thread order, or None when unpinned.
    pub fn cpu_list(&self) -> Option<&[u32]> {
        match &self.place {
            Place::OsDecides => None,
            Place::Cpus(c) => Some(c),
        }
    }

    /// Threads beyond a team go to `cpus` (see `spare`).
    pub fn with_spare(mut self, cpus: Vec<u32>) -> Self {
        self.spare = cpus;
        self
    }

    /// The CPU for thread `index`, or None when unpinned: the team's threads on the list
    /// (wrapping), those beyond a team on the spare CPUs when there are any.
    pub fn cpu_for(&self, index: usize) -> Option<u32> {
        let c = self.cpu_list()?;
        match self.team {
            Some(k) if index >= k && !self.spare.is_empty() => {
                Some(self.spare[(index - k) % self.spare.len()])
            }
            _ => Some(c[index % c.len()]),
        }
    }

    /// The CPU of each of `n` threads (None when unpinned).
    pub fn cpus_for(&self, n: usize) -> Option<Vec<u32>> {
        self.cpu_list()
            .map(|_| (0..n).filter_map(|i| self.cpu_for(i)).collect())
    }

    /// The CPUs it uses, whatever their order and however many threads each holds (empty
    /// when unpinned).
    pub fn cpu_set(&self) -> autopin_topology::CpuSet {
        self.cpus().iter().copied().collect()
    }

    /// Whether it puts two of `n` threads or more on one CPU (never when unpinned). With a
    /// team size, only the team's threads work: the others wait idle in the pool.
    pub fn shares_cpus(&self, n: usize) -> bool {
        let n = self.team.map_or(n, |t| t.min(n));
        self.cpus_for(n).is_some_and(|cpus| {
            let distinct: std::collections::BTreeSet<u32> = cpus.iter().copied().collect();
            distinct.len() < cpus.len()
        })
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
    fn a_pinning_shares_cpus_when_two_of_its_threads_meet() {
        let two = Pinning::from_cpus(vec![1, 0]);
        assert!(!two.shares_cpus(2));
        assert!(two.shares_cpus(3), "the third thread wraps onto CPU 1");
        assert!(Pinning::from_cpus(vec![1, 1]).shares_cpus(2));
        assert!(!Pinning::from_cpus(vec![1, 1]).shares_cpus(1));
        assert!(!Pinning::unpinned().shares_cpus(8));
        // One thread working on CPU 1, the other idle: nothing shared.
        let one = Pinning::from_cpus(vec![1]).with_team(1);
        assert_eq!(one.label, "1 thread: 1");
        assert!(!one.shares_cpus(2));
        assert!(Pinning::from_cpus(vec![1]).with_team(2).shares_cpus(2));
    }

    #[test]
    fn topology_candidates_carry_their_sharing() {
        let c = Pinning::described(vec![0, 2], "Package 2×1");
        assert_eq!(c.label, "0,2 (Package 2×1)");
        assert_eq!(c.description, "Package 2×1");
    }

    #[test]
    fn documents_keep_the_old_shape_and_an_empty_list_is_the_os() {
        let u = serde_json::to_value(Pinning::unpinned()).unwrap();
        assert_eq!(u["unpinned"], true);
        assert_eq!(u["cpus"], serde_json::json!([]));
        let back: Pinning = serde_json::from_value(u).unwrap();
        assert!(back.is_unpinned());
        let p: Pinning = serde_json::from_str(r#"{"cpus":[3,1],"label":"3,1"}"#).unwrap();
        assert_eq!(p.place, Place::Cpus(vec![3, 1]));
        assert!(Pinning::from_cpus(vec![]).is_unpinned());
    }
}
