//! Which objective a run optimizes when the user did not name one, and why — a pure
//! function of what is known before probing, so the choice is testable and explainable.
//!
//! The chain: the user's objective; else user-space instructions when hardware counters
//! work; else the program's own heartbeat when it reports one; else completed OpenMP work
//! when the program is an OpenMP program the preload library can reach; else task-clock
//! (CPU time per second), which sees CPU share but not how much work that time does.

/// What is known when the objective is chosen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChoiceInputs {
    /// The objective the user asked for (`--objective` / `-e`), if any.
    pub requested: Option<String>,
    /// Why hardware counting of the default event is impossible (None: it works).
    pub pmu_unavailable: Option<String>,
    /// Heartbeats the program reported during the first moments (0: none).
    pub heartbeats: u64,
    /// The OpenMP runtime the program links (e.g. "libgomp.so.1"), from its ELF DT_NEEDED.
    pub openmp_runtime: Option<String>,
    /// The preload library is loaded into the program (dynamic executable, launched by us).
    pub preload: bool,
}

/// The objective chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chosen {
    /// What the user asked for (objective text).
    Requested(String),
    /// The default hardware event, `instructions:u`.
    Instructions,
    /// The program's own heartbeat (work units/s).
    Heartbeat,
    /// Completed OpenMP constructs/s, counted by the preload library.
    OpenMp,
    /// Each thread's CPU time per second (/proc/TID/schedstat).
    TaskClock,
}

impl Chosen {
    /// The objective text for `Objective::parse` (None for task-clock, which is measured
    /// from /proc without perf).
    pub fn objective_text(&self) -> Option<String> {
        match self {
            Chosen::Requested(t) => Some(t.clone()),
            Chosen::Instructions => Some("instructions:u".into()),
            Chosen::Heartbeat => Some("heartbeat".into()),
            Chosen::OpenMp => Some("openmp".into()),
            Chosen::TaskClock => None,
        }
    }
}

/// The choice and its reason in words, for the terminal and the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub chosen: Chosen,
    pub reason: String,
}

/// Chooses the objective (see the module documentation for the order).
pub fn choose(i: &ChoiceInputs) -> Choice {
    if let Some(t) = &i.requested {
        return Choice {
            chosen: Chosen::Requested(t.clone()),
            reason: "chosen with --objective/-e".into(),
        };
    }
    let Some(no_pmu) = &i.pmu_unavailable else {
        return Choice {
            chosen: Chosen::Instructions,
            reason: "the default: work retired by the threads".into(),
        };
    };
    let why_not = format!("hardware counters unavailable ({no_pmu})");
    if i.heartbeats > 0 {
        return Choice {
            chosen: Chosen::Heartbeat,
            reason: format!(
                "{why_not}; the program reports its own progress ({} heartbeat(s) at start)",
                i.heartbeats
            ),
        };
    }
    match (&i.openmp_runtime, i.preload) {
        (Some(rt), true) => Choice {
            chosen: Chosen::OpenMp,
            reason: format!(
                "{why_not}; the program is an OpenMP program ({rt}): completed parallel regions, loop chunks, barriers and tasks are counted at the runtime's entry points"
            ),
        },
        (Some(rt), false) => Choice {
            chosen: Chosen::TaskClock,
            reason: format!(
                "{why_not}; the program uses OpenMP ({rt}) but the preload library cannot reach it (static binary or attached process), so its progress cannot be counted; CPU time per second shows CPU share only"
            ),
        },
        (None, _) => Choice {
            chosen: Chosen::TaskClock,
            reason: format!(
                "{why_not}; the program reports no heartbeat and is not an OpenMP program; CPU time per second shows CPU share, not memory stalls or spin-waiting"
            ),
        },
    }
}

/// The OpenMP runtime among a program's needed libraries (GNU libgomp, LLVM libomp, Intel
/// libiomp5), if any.
pub fn openmp_runtime(needed: &[String]) -> Option<String> {
    needed
        .iter()
        .find(|n| {
            let base = n.rsplit('/').next().unwrap_or(n);
            [
                "libgomp.so",
                "libomp.so",
                "libiomp5.so",
                "libgomp-",
                "libomp-",
            ]
            .iter()
            .any(|p| base.starts_with(p))
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> ChoiceInputs {
        ChoiceInputs {
            pmu_unavailable: Some("no hardware PMU".into()),
            preload: true,
            ..Default::default()
        }
    }

    #[test]
    fn the_user_choice_wins_over_everything() {
        let c = choose(&ChoiceInputs {
            requested: Some("cycles".into()),
            heartbeats: 5,
            openmp_runtime: Some("libgomp.so.1".into()),
            ..inputs()
        });
        assert_eq!(c.chosen, Chosen::Requested("cycles".into()));
        assert_eq!(c.chosen.objective_text().as_deref(), Some("cycles"));
    }

    #[test]
    fn with_a_pmu_the_default_event_is_used() {
        let c = choose(&ChoiceInputs {
            pmu_unavailable: None,
            openmp_runtime: Some("libgomp.so.1".into()),
            ..inputs()
        });
        assert_eq!(c.chosen, Chosen::Instructions);
    }

    #[test]
    fn without_a_pmu_heartbeat_then_openmp_then_task_clock() {
        let hb = choose(&ChoiceInputs {
            heartbeats: 3,
            openmp_runtime: Some("libgomp.so.1".into()),
            ..inputs()
        });
        assert_eq!(hb.chosen, Chosen::Heartbeat);
        assert!(hb.reason.contains("3 heartbeat(s)") && hb.reason.contains("no hardware PMU"));

        let omp = choose(&ChoiceInputs {
            openmp_runtime: Some("libomp.so.5".into()),
            ..inputs()
        });
        assert_eq!(omp.chosen, Chosen::OpenMp);
        assert_eq!(omp.chosen.objective_text().as_deref(), Some("openmp"));
        assert!(omp.reason.contains("libomp.so.5"));

        let plain = choose(&inputs());
        assert_eq!(plain.chosen, Chosen::TaskClock);
        assert_eq!(plain.chosen.objective_text(), None);
        assert!(plain.reason.contains("not an OpenMP program"));
    }

    #[test]
    fn openmp_without_the_preload_library_falls_back_and_says_why() {
        let c = choose(&ChoiceInputs {
            openmp_runtime: Some("libgomp.so.1".into()),
            preload: false,
            ..inputs()
        });
        assert_eq!(c.chosen, Chosen::TaskClock);
        assert!(c.reason.contains("preload library cannot reach it"));
    }

    #[test]
    fn runtimes_are_recognised_by_their_library_names() {
        let libs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            openmp_runtime(&libs(&["libm.so.6", "libgomp.so.1", "libc.so.6"])).as_deref(),
            Some("libgomp.so.1")
        );
        assert_eq!(
            openmp_runtime(&libs(&["libomp.so.5"])).as_deref(),
            Some("libomp.so.5")
        );
        assert_eq!(
            openmp_runtime(&libs(&["/opt/intel/lib/libiomp5.so"])).as_deref(),
            Some("/opt/intel/lib/libiomp5.so")
        );
        assert_eq!(openmp_runtime(&libs(&["libc.so.6", "libompx.so"])), None);
    }
}
