//! Where a launched program's threads start: pinned as a remembered decision or the
//! strategy says, else off CPUs busy with other work at launch, else where the OS places
//! them. Decided before the launch, from the plan and one look at the machine.

use super::binding::own_binding;
use super::{
    busy_text, topology_candidates, CandidateSource, RunEnv, RunPlan, RunSink, TargetSpec,
};
use autopin_placement::{cpu_text, Pinning};

/// The OpenMP threads OMP_NUM_THREADS asks for at the outer level (`8` or `8,2`); None when
/// unset or not a positive count.
pub(super) fn openmp_threads(env: &[(String, String)]) -> Option<usize> {
    let (_, v) = env.iter().rev().find(|(k, _)| k == "OMP_NUM_THREADS")?;
    v.split(',')
        .next()?
        .trim()
        .parse()
        .ok()
        .filter(|n: &usize| *n > 0)
}

/// The OMP_NUM_THREADS a program is started with to run a team of `want` threads (a
/// remembered smaller team, or `--threads N`), `env` the user's environment: never above a
/// count the user set.
pub fn team_start_count(env: &[(String, String)], want: usize) -> usize {
    openmp_threads(env).map_or(want, |o| o.min(want)).max(1)
}

/// The CPUs a launched program's threads are pinned to at birth, in creation order: a
/// remembered decision's, or the first candidate's for a strategy that starts on it.
fn pinned_at_birth(plan: &RunPlan, explicit: Option<&[Pinning]>) -> Option<Vec<u32>> {
    match &plan.remembered {
        Some(r) => r.pinning.cpu_list().map(<[u32]>::to_vec),
        None => explicit
            .filter(|l| plan.search.strategy.pins_at_birth(l.len()))
            .and_then(|l| l.first())
            .and_then(|c| c.cpu_list().map(<[u32]>::to_vec)),
    }
}

/// Where a launched program's threads start.
#[derive(Debug, Default)]
pub(super) struct Birth {
    /// The CPUs they are pinned to at birth, in creation order (None: where the OS places
    /// them).
    pub(super) cpus: Option<Vec<u32>>,
    /// The CPUs busy with other work at launch that `cpus` keeps off: the first topology
    /// candidate around them, a guess the search then checks like any probe.
    pub(super) away_from: Option<Vec<u32>>,
    /// Fewer threads plausible at launch (fewer free CPUs than threads, docs/threads.md):
    /// the team size an OpenMP program is asked for from its second region on, whose
    /// threads run on the first of `cpus` (the first team candidate's CPUs). None once the
    /// launch shows the program's library cannot apply it.
    pub(super) team: Option<usize>,
    /// The first candidate's first CPUs were put in the team candidate's order (its same
    /// CPUs listed otherwise), so that the team's threads are born where it puts them.
    pub(super) team_order: bool,
}

/// Where the program starts: a remembered decision or a strategy's first candidate as
/// before; else, when other work keeps some of the CPUs busy at launch, on the first
/// topology candidate that keeps off them. Where the OS places threads beside a busy CPU
/// until the first probe can cost more than the whole search: 16 OpenMP threads with
/// spinning barriers beside one busy CPU ran at 1% of their pinned speed there, 0.26 s of
/// a 1.2 s program.
/// `busy`: the CPUs busy with other work at launch when the run already looked (else it
/// looks when it needs to).
pub(super) fn birth(
    plan: &RunPlan,
    env: &mut RunEnv,
    explicit: Option<&[Pinning]>,
    busy: Option<&[u32]>,
) -> Birth {
    if let Some(cpus) = pinned_at_birth(plan, explicit) {
        return Birth {
            cpus: Some(cpus),
            ..Birth::default()
        };
    }
    if !plan.start_off_busy {
        return Birth::default();
    }
    let (
        TargetSpec::Launch(_),
        None,
        None,
        CandidateSource::Topology {
            max,
            include_unpinned,
            threads,
        },
    ) = (&plan.target, explicit, &plan.remembered, &plan.candidates)
    else {
        return Birth::default();
    };
    // A skip mask leaves chosen threads where the OS puts them: the guess would not be the
    // candidate the start-up measured.
    if !plan.skip.is_empty() {
        return Birth::default();
    }
    // A program that binds its own threads keeps that binding (autopin stands back once it
    // runs), from its first instruction.
    let launch_env = env.platform.launch_env();
    if !plan.override_binding && own_binding(&launch_env).is_some() {
        return Birth::default();
    }
    let allowed = plan.machine.allowed_cpuset();
    let busy = match busy {
        Some(b) => b.to_vec(),
        None => env.platform.busy_at_launch(&allowed),
    };
    if busy.is_empty() || allowed.iter().all(|c| busy.contains(&c)) {
        return Birth::default();
    }
    // The program's thread count is not known before it runs: the one asked for (`-n`),
    // else OMP_NUM_THREADS, else as many as the CPUs it may use (OpenMP's default). The
    // first candidate for another count can differ from that list's first CPUs: with 2
    // threads on 4 two-way cores beside busy CPU 0, those are 1 and 2 (the first on the
    // busy core's sibling), the candidate for 2 threads is 2 and 3.
    let n = threads
        .or_else(|| openmp_threads(&launch_env))
        .unwrap_or(allowed.len());
    let mut first = topology_candidates(&plan.machine, n, *max, *include_unpinned, &busy)
        .into_iter()
        .find_map(|c| c.cpu_list().map(<[u32]>::to_vec));
    let (mut team, mut team_order) = (None, false);
    if let Some(cpus) = first.as_mut() {
        if let Some(on) = team_at_birth(plan, n, &busy, cpus) {
            // The team's threads are born where the team candidate puts them, so that the
            // start-up is its probe: the same CPUs as the pinning's first, maybe in
            // another order.
            team_order = cpus[..on.len()] != on[..];
            cpus[..on.len()].copy_from_slice(&on);
            team = Some(on.len());
        }
    }
    Birth {
        away_from: first.is_some().then_some(busy),
        cpus: first,
        team,
        team_order,
    }
}

/// The team an OpenMP program starts asking for beside `busy` CPUs, born on `cpus`: the
/// CPUs, in its order, of the first team candidate whose CPUs are the first of `cpus`, in
/// any order (its threads then stay on the CPUs they were born on, and a program that keeps
/// its own count runs the pinning it was born on, as before). Only where the count is
/// searched by default (`--threads auto`, the default objective, which then counts once
/// per team). Any team candidate, not only the first, and in any order: on the 10 CPUs of
/// `16amd64-8n2c-cpusets` beside 3 busy ones the team of the 7 free CPUs lists them in CPU
/// order and the birth pinning by package (1,2,3,12,13,15,6); asking none there, the
/// start-up ran 10 threads on 7 free CPUs and the busy ones at half the pace, and the
/// search decided at 2.30 s instead of 1.90 s (`simulate --openmp-team`).
fn team_at_birth(plan: &RunPlan, n: usize, busy: &[u32], cpus: &[u32]) -> Option<Vec<u32>> {
    if plan.threads != super::ThreadsChoice::Auto || plan.objective.explicit {
        return None;
    }
    autopin_placement::team_candidates(&plan.machine, n, busy)
        .into_iter()
        .find_map(|c| {
            let k = c.team?;
            let on = c.cpu_list()?;
            let first_k = || {
                cpus[..k]
                    .iter()
                    .copied()
                    .collect::<autopin_topology::CpuSet>()
            };
            (k < n && on.len() == k && cpus.len() >= k && c.cpu_set() == first_k())
                .then(|| on.to_vec())
        })
}

impl Birth {
    /// The birth as it happened: a guess around busy CPUs holds only where the preload
    /// library sits in the program (a static executable starts where the OS places it).
    /// `team_asked`: the team size the platform asked of the program's library before its
    /// start (None: it could not, and the program keeps its count from birth).
    pub(super) fn launched(
        mut self,
        preload_active: bool,
        team_asked: Option<usize>,
        sink: &mut dyn RunSink,
    ) -> Birth {
        self.team = self.team.filter(|k| team_asked == Some(*k));
        let Some((cpus, busy)) = self.off_busy() else {
            return self;
        };
        if !preload_active {
            return Birth::default();
        }
        let team = match self.team {
            Some(k) => format!(
                "; its parallel regions are asked for {k} thread(s) from the second on (fewer free CPUs than threads; a program that asks for its count first keeps it)"
            ),
            None => String::new(),
        };
        sink.message(
            None,
            &format!(
                "{} busy with other work: the program started pinned to {}, off them, rather than where the OS would place it{team}",
                busy_text(busy),
                cpu_text(cpus)
            ),
        );
        self
    }

    /// A start off busy CPUs: the CPUs the threads were born on, and the busy ones.
    pub(super) fn off_busy(&self) -> Option<(&[u32], &[u32])> {
        Some((self.cpus.as_deref()?, self.away_from.as_deref()?))
    }

    /// The report's note on a start off busy CPUs (None for any other start).
    pub(super) fn note(&self) -> Option<String> {
        let (cpus, busy) = self.off_busy()?;
        Some(format!(
            "{} busy with other work at launch: the program started pinned to {}, the first candidate that keeps off them{}{}",
            busy_text(busy),
            cpu_text(cpus),
            self.team
                .filter(|_| self.team_order)
                .map(|k| format!(" (its first {k} CPUs in the team candidate's order)"))
                .unwrap_or_default(),
            self.team
                .map(|k| format!(", its parallel regions asked for {k} thread(s) from the second on"))
                .unwrap_or_default()
        ))
    }
}
