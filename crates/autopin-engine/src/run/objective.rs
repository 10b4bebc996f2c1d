//! Choosing what a run measures: the plan's fallback chain (the requested objective, the
//! program's heartbeat, OpenMP progress counted by the preload library, task-clock), taking
//! the first source that can be measured for this target, with the reason for the report.

use super::env::{Platform, RunEnv, RunSink};
use super::plan::{ObjectiveSource, RunPlan};
use crate::error::EngineError;
use crate::os::ThreadSource;
use crate::report::ObjectiveInfo;
use autopin_human::duration;
use autopin_perf::Objective;

/// The objective a run measures, where it comes from and why it was chosen.
#[derive(Debug, Clone)]
pub struct ObjectiveChoice {
    pub source: ObjectiveSource,
    /// The objective the meter evaluates (the requested one, or `heartbeat`).
    pub objective: Objective,
    pub info: ObjectiveInfo,
}

/// What the objective choice knows about a started target.
pub(super) struct TargetFacts<'a> {
    pub(super) pid: i32,
    /// The OpenMP runtime the executable itself links (its DT_NEEDED).
    pub(super) openmp_runtime: Option<&'a str>,
    pub(super) preload_active: bool,
}

/// Walks the plan's fallback chain and takes the first source that can be measured.
/// `init`: the init time left (the heartbeat wait uses it up); `waited`: how long it waited.
pub(super) fn choose_objective(
    plan: &RunPlan,
    refused: Option<&str>,
    target: &TargetFacts,
    env: &mut RunEnv,
    threads: &mut dyn ThreadSource,
    (init, waited_total): (&mut f64, &mut f64),
) -> Result<ObjectiveChoice, EngineError> {
    let requested = &plan.objective.requested;
    let launched = !plan.target.is_attach();
    let mut openmp_idle: Option<String> = None;
    // An OpenMP runtime found in the process at run time (one of its libraries brought it).
    let mut loaded_runtime: Option<String> = None;
    for source in &plan.objective.chain {
        let instead = match source {
            ObjectiveSource::Requested => {
                if refused.is_some() {
                    continue;
                }
                let reason = if plan.objective.explicit {
                    "chosen with --objective/-e"
                } else {
                    "the default: work retired by the threads"
                };
                return Ok(ObjectiveChoice {
                    source: *source,
                    objective: requested.clone(),
                    info: info_of(requested, reason.into()),
                });
            }
            ObjectiveSource::Heartbeat => {
                if !launched {
                    continue;
                }
                // A program that knows what useful work is says so in its first moments.
                let wait = init.clamp(0.3, 2.0);
                if env.platform.heartbeats() == 0 {
                    env.sink.message(
                        None,
                        &format!(
                            "waiting up to {} for the program's heartbeat",
                            duration(wait)
                        ),
                    );
                }
                let (beats, waited) = wait_for_progress(env, threads, wait, |p| p.heartbeats());
                *init = (*init - waited).max(0.0);
                *waited_total += waited;
                if beats == 0 {
                    continue;
                }
                format!("the program's heartbeat ({beats} beat(s) reported in the first {waited:.1} s; work units/s)")
            }
            ObjectiveSource::OpenMpProgress => {
                // A runtime that one of the program's libraries brings (GROMACS's libgomp
                // comes with libgromacs): the preload library counts its entry points all
                // the same, since it comes first in symbol resolution.
                if target.openmp_runtime.is_none() && launched && target.preload_active {
                    loaded_runtime = env.platform.openmp_runtime_loaded(target.pid);
                }
                match target.openmp_runtime.or(loaded_runtime.as_deref()) {
                    Some(rt) if launched && target.preload_active => {
                        // Completed constructs are the progress: a program whose first moments
                        // complete none (all its work in one long parallel region) would read
                        // zero for as long as that region runs, so it is measured otherwise.
                        let wait = init.clamp(0.3, 1.0);
                        let (done, waited) =
                            wait_for_progress(env, threads, wait, |p| p.openmp_constructs());
                        *init = (*init - waited).max(0.0);
                        *waited_total += waited;
                        if done == 0 {
                            openmp_idle = Some(format!(
                            "the program uses OpenMP ({rt}) but completed no OpenMP construct in its first {:.1} s, so OpenMP progress would read zero",
                            *waited_total
                        ));
                            continue;
                        }
                        format!(
                        "OpenMP progress: completed parallel regions, loop chunks, barriers and tasks per second, counted at the entry points of the program's OpenMP runtime ({rt})"
                    )
                    }
                    _ => continue,
                }
            }
            ObjectiveSource::TaskClock => {
                let why = match (target.openmp_runtime, &openmp_idle) {
                    (_, Some(idle)) => idle.clone(),
                    (Some(rt), None) if !launched => format!("the program uses OpenMP ({rt}), but its work is counted by the preload library, which is only in programs that `autopin run` or `autopin pin` start"),
                    (Some(rt), None) => format!("the program uses OpenMP ({rt}) but the preload library cannot count its work (a static binary)"),
                (None, None) if launched && target.preload_active => "the program reports no heartbeat and loads no OpenMP runtime".into(),
                    (None, None) => "the program reports no heartbeat and is not an OpenMP program".into(),
                };
                format!("task-clock: each thread's CPU time per second from /proc/TID/schedstat ({why}; CPU share shows time lost to sharing a CPU, but not memory stalls or spin-waiting)")
            }
        };
        let facts = TargetFacts {
            openmp_runtime: target.openmp_runtime.or(loaded_runtime.as_deref()),
            ..*target
        };
        return fallback(
            plan,
            *source,
            &instead,
            refused,
            &facts,
            openmp_idle.as_deref(),
            &mut *env.sink,
        );
    }
    Err(EngineError::usage(format!(
        "no way to measure {} for this target (objective chain {:?})",
        requested.text(),
        plan.objective.chain
    )))
}

fn info_of(o: &Objective, reason: String) -> ObjectiveInfo {
    ObjectiveInfo {
        name: o.describe(),
        unit: o.unit().to_string(),
        higher_is_better: o.higher_is_better(),
        reason,
    }
}

/// A fallback source was chosen: says why the requested objective was not used and what is
/// measured `instead`, and builds the choice with that reason.
fn fallback(
    plan: &RunPlan,
    source: ObjectiveSource,
    instead: &str,
    refused: Option<&str>,
    target: &TargetFacts,
    openmp_idle: Option<&str>,
    sink: &mut dyn RunSink,
) -> Result<ObjectiveChoice, EngineError> {
    let requested = &plan.objective.requested;
    // A fallback: say why the requested objective was not used.
    let why = refused.unwrap_or("it cannot be measured for this target");
    // The perf helper's text ends with its own fallback advice; ours replaces it.
    let why = why.split("; fallback:").next().unwrap_or(why);
    let sysctl = if why.contains("perf_event_paranoid") {
        ""
    } else {
        " (counting also needs sysctl kernel.perf_event_paranoid ≤ 2 for your own processes, or CAP_PERFMON)"
    };
    let text = requested.text();
    sink.message(
        None,
        &format!("warning: the default objective {text} cannot be counted here: {why}{sysctl}."),
    );
    // A line of its own: what autopin does instead is what a reader looks for.
    sink.message(None, &format!("Using {instead} instead."));
    let cause = why
        .strip_prefix(&format!("cannot count {text}: "))
        .unwrap_or(why);
    let reason = format!(
        "fallback: {text} cannot be counted here — {}",
        cause.split([';', '(']).next().unwrap_or(cause).trim()
    );
    Ok(match source {
        ObjectiveSource::Heartbeat | ObjectiveSource::OpenMpProgress => {
            let text = if source == ObjectiveSource::Heartbeat {
                "heartbeat"
            } else {
                "openmp"
            };
            let o = Objective::parse(text)
                .map_err(|e| EngineError::internal(format!("{text} objective: {e}")))?;
            let reason = match (source, target.openmp_runtime) {
                (ObjectiveSource::OpenMpProgress, Some(rt)) => format!(
                    "{reason}; the program is an OpenMP program ({rt}) whose work the preload library counts"
                ),
                _ => reason,
            };
            ObjectiveChoice {
                source,
                info: info_of(&o, reason),
                objective: o,
            }
        }
        _ => ObjectiveChoice {
            source,
            objective: requested.clone(),
            info: ObjectiveInfo {
                name: "task-clock (CPU time per thread, /proc/TID/schedstat)".into(),
                unit: "CPU-s/s".into(),
                higher_is_better: true,
                // An OpenMP program gets CPU time rather than OpenMP progress: say why.
                reason: match (target.openmp_runtime, openmp_idle) {
                    (_, Some(idle)) => format!("{reason}; {idle}"),
                    (Some(rt), None) => format!(
                        "{reason}; the program uses OpenMP ({rt}) but the preload library cannot count its work"
                    ),
                    (None, None) => reason,
                },
            },
        },
    })
}

/// Polls `progress` every 20 ms for up to `wait` seconds (or until the program ends) while
/// it reads zero; returns the last reading and the seconds waited.
fn wait_for_progress(
    env: &mut RunEnv,
    threads: &mut dyn ThreadSource,
    wait: f64,
    mut progress: impl FnMut(&mut dyn Platform) -> u64,
) -> (u64, f64) {
    let start = env.clock.now();
    let mut seen = progress(&mut *env.platform);
    while seen == 0 && env.clock.now() - start < wait {
        if matches!(threads.poll(), Ok(s) if s.ended.is_some()) {
            break;
        }
        let t = env.clock.now() + 0.02;
        env.clock.sleep_until(t);
        seen = progress(&mut *env.platform);
    }
    (seen, env.clock.now() - start)
}
