//! Choosing how to count: per thread or per CPU.
//!
//! Per-thread counters (`pid=tid, cpu=-1`) follow a thread wherever it runs, but the kernel
//! saves and restores them at every context switch of that thread; in KVM guests that switch
//! path is expensive (PMU MSR accesses trap to the hypervisor) and made passive-wait OpenMP
//! runs up to 2.8× slower on this project's VMs. Per-CPU counters (`pid=-1, cpu=N`) stay on
//! their CPU and add nothing to context switches, but they count whatever runs there — so
//! they are exact only when restricted to the target's cgroup, or when the target's CPUs run
//! nothing else. They need `perf_event_paranoid <= 0` or CAP_PERFMON.

use crate::probe::Availability;
use autopin_objective::CountingMode;
use std::path::PathBuf;

/// The chosen mode and why, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeChoice {
    pub mode: CountingMode,
    pub reason: String,
}

/// What the engine knows about the target when choosing.
#[derive(Debug, Clone, Default)]
pub struct ModeRequest {
    /// CPUs the target may run on (the union of every candidate pinning).
    pub target_cpus: Option<Vec<usize>>,
    /// The target's own cgroup directory, if it runs in one of its own.
    pub cgroup: Option<PathBuf>,
    /// No other busy process shares the target's CPUs (then per-CPU counts are the target's).
    pub cpus_exclusive: bool,
    /// The user asked for a mode explicitly.
    pub forced: Option<CountingMode>,
}

/// Pick the counting mode that perturbs least among those that measure the target correctly.
pub fn choose_counting_mode(avail: &Availability, req: &ModeRequest) -> ModeChoice {
    if let Some(m) = &req.forced {
        if matches!(m, CountingMode::PerCpu { .. }) {
            if let Err(u) = &avail.per_cpu {
                return ModeChoice {
                    mode: CountingMode::PerThread,
                    reason: format!("per-CPU counting was requested but is not possible ({u}); counting per thread"),
                };
            }
        }
        return ModeChoice {
            mode: m.clone(),
            reason: "chosen by the user".into(),
        };
    }
    let why_not_per_thread = if avail.ctx.in_vm {
        "this is a virtual machine, where per-thread counting adds a trap to every context switch of the target"
    } else {
        "per-CPU counters add nothing to the target's context switches"
    };
    match (&avail.per_cpu, &req.target_cpus) {
        (Err(u), _) => ModeChoice {
            mode: CountingMode::PerThread,
            reason: format!(
                "per thread: per-CPU counting is not allowed ({}){}",
                u.reason,
                if avail.ctx.in_vm {
                    "; in this VM per-thread counting may slow threads that switch often — see the perturbation estimate"
                } else {
                    ""
                }
            ),
        },
        (Ok(()), None) => ModeChoice {
            mode: CountingMode::PerThread,
            reason: "per thread: the target's CPUs are not known".into(),
        },
        (Ok(()), Some(cpus)) if req.cgroup.is_some() => ModeChoice {
            mode: CountingMode::PerCpu {
                cpus: cpus.clone(),
                cgroup: req.cgroup.clone(),
            },
            reason: format!("per CPU restricted to the target's cgroup: {why_not_per_thread}"),
        },
        (Ok(()), Some(cpus)) if req.cpus_exclusive => ModeChoice {
            mode: CountingMode::PerCpu {
                cpus: cpus.clone(),
                cgroup: None,
            },
            reason: format!("per CPU on the target's CPUs (nothing else runs there): {why_not_per_thread}"),
        },
        (Ok(()), Some(_)) => ModeChoice {
            mode: CountingMode::PerThread,
            reason: "per thread: per-CPU counting is allowed, but other work shares the target's CPUs and the target has no cgroup of its own, so per-CPU counts would include it".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::OpenContext;
    use autopin_objective::Unavailable;

    fn avail(per_cpu: bool, in_vm: bool) -> Availability {
        Availability {
            ctx: OpenContext {
                paranoid: Some(if per_cpu { 0 } else { 2 }),
                privileged: false,
                in_vm,
            },
            hardware: Ok(1),
            software: Ok(()),
            per_cpu: if per_cpu {
                Ok(())
            } else {
                Err(Unavailable {
                    reason: "kernel.perf_event_paranoid is 2".into(),
                    hint: None,
                    fallback: None,
                })
            },
        }
    }

    #[test]
    fn prefers_per_cpu_when_allowed_and_exact() {
        let req = ModeRequest {
            target_cpus: Some(vec![0, 1]),
            cpus_exclusive: true,
            ..Default::default()
        };
        let c = choose_counting_mode(&avail(true, true), &req);
        assert_eq!(
            c.mode,
            CountingMode::PerCpu {
                cpus: vec![0, 1],
                cgroup: None
            }
        );
        assert!(c.reason.contains("virtual machine"), "{}", c.reason);
        let req = ModeRequest {
            target_cpus: Some(vec![0]),
            cgroup: Some("/sys/fs/cgroup/x".into()),
            ..Default::default()
        };
        let c = choose_counting_mode(&avail(true, false), &req);
        assert!(matches!(
            c.mode,
            CountingMode::PerCpu {
                cgroup: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn falls_back_to_per_thread_with_reason() {
        let req = ModeRequest {
            target_cpus: Some(vec![0, 1]),
            cpus_exclusive: true,
            ..Default::default()
        };
        let c = choose_counting_mode(&avail(false, true), &req);
        assert_eq!(c.mode, CountingMode::PerThread);
        assert!(
            c.reason.contains("paranoid is 2") && c.reason.contains("perturbation"),
            "{}",
            c.reason
        );
        let req = ModeRequest {
            target_cpus: Some(vec![0, 1]),
            ..Default::default()
        };
        let c = choose_counting_mode(&avail(true, false), &req);
        assert_eq!(c.mode, CountingMode::PerThread);
        assert!(c.reason.contains("other work shares"));
        let req = ModeRequest {
            forced: Some(CountingMode::PerCpu {
                cpus: vec![0],
                cgroup: None,
            }),
            ..Default::default()
        };
        let c = choose_counting_mode(&avail(false, false), &req);
        assert_eq!(c.mode, CountingMode::PerThread);
        assert!(c.reason.contains("was requested but is not possible"));
    }
}
