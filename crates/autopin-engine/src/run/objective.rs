//! Choosing what a run measures: the plan's fallback chain (the requested objective, the
//! program's heartbeat, OpenMP progress counted by the preload library, task-clock), taking
//! the first source that can be measured for this target, with the reason for the report.

use super::env::{Platform, RunEnv, RunSink};
use super::plan::{ObjectiveSource, RunPlan};
use crate::error::EngineError;
use crate::report::ObjectiveInfo;
use crate::sensors::ThreadSource;
use crate::session::Interval;
use autopin_human::duration;
use autopin_objective::Objective;

/// The objective a run measures, where it comes from and why it was chosen.
#[derive(Debug, Clone)]
pub struct ObjectiveChoice {
    pub source: ObjectiveSource,
    /// The objective the meter evaluates (the requested one, or `heartbeat`).
    pub objective: Objective,
    pub info: ObjectiveInfo,
    /// The objective's readings while autopin waited to choose it, in ~0.1 s intervals
    /// (times from the target's start): the program's start-up, where the OS placed it
    /// (OpenMP progress, counted while a heartbeat was waited for; else none).
    pub startup: Vec<Interval>,
}

/// What the objective choice knows about a started target.
pub(super) struct TargetFacts<'a> {
    pub(super) pid: i32,
    /// The OpenMP runtime the executable itself links (its DT_NEEDED).
    pub(super) openmp_runtime: Option<&'a str>,
    pub(super) preload_active: bool,
    /// The OpenMP threads the program will start (OMP_NUM_THREADS, else the CPUs it may
    /// use).
    pub(super) openmp_threads: usize,
    /// Teams of different sizes may be compared (`team`): OpenMP progress is then counted
    /// once per team (`openmp-team`).
    pub(super) team_units: bool,
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
    let mut walk = Walk {
        init,
        init_asked: plan.search.init_asked,
        waited: waited_total,
        openmp_idle: None,
        omp_seen: Vec::new(),
        loaded_runtime: None,
    };
    // The link a remembered decision was measured with: the links before it that wait (a
    // heartbeat, OpenMP progress) gave nothing when it was decided, in the same program
    // here, so they are not waited for again and the check starts on time. The requested
    // objective waits for nothing and is still tried first (counting may work now).
    let chain = &plan.objective.chain;
    let remembered = plan
        .remembered
        .as_ref()
        .and_then(|r| r.objective)
        .and_then(|s| chain.iter().position(|c| *c == s).map(|at| (s, at)));
    // The default objective counts every thread's work (instructions retired, spinning
    // included), which grows with the team: where fewer threads may run faster (`team`),
    // teams are compared on work counted once per team (heartbeats, OpenMP team
    // progress), and the default is measured only when the program gives neither. On a
    // machine with a PMU the count was otherwise never searched.
    let defer_requested = target.team_units
        && launched
        && !plan.objective.explicit
        && target.preload_active
        && target.openmp_runtime.is_some();
    let mut deferred = false;
    for (at, source) in chain.iter().enumerate() {
        if *source == ObjectiveSource::Requested && defer_requested && refused.is_none() {
            deferred = true;
            continue;
        }
        // Neither team-free source measured this program: the default after all.
        if deferred && *source == ObjectiveSource::TaskClock {
            return Ok(requested_choice(plan, ObjectiveSource::Requested));
        }
        if let Some((then, _)) = remembered.filter(|&(_, then_at)| {
            at < then_at
                && matches!(
                    source,
                    ObjectiveSource::Heartbeat | ObjectiveSource::OpenMpProgress
                )
        }) {
            walk.skip(*source, then, &mut *env.sink);
            continue;
        }
        let instead = match source {
            ObjectiveSource::Requested if refused.is_some() => continue,
            ObjectiveSource::Requested => return Ok(requested_choice(plan, *source)),
            ObjectiveSource::Heartbeat if !launched => continue,
            ObjectiveSource::Heartbeat => match walk.heartbeat(env, threads, target) {
                Some(instead) => instead,
                None => continue,
            },
            ObjectiveSource::OpenMpProgress => {
                match walk.openmp_progress(env, threads, target, launched) {
                    Some(instead) => instead,
                    None => continue,
                }
            }
            ObjectiveSource::TaskClock => {
                task_clock_reason(target, launched, walk.openmp_idle.as_deref())
            }
        };
        let facts = TargetFacts {
            openmp_runtime: target.openmp_runtime.or(walk.loaded_runtime.as_deref()),
            ..*target
        };
        if deferred {
            return Ok(
                team_free_instead(plan, *source, &instead, &mut *env.sink)?.with_startup(
                    *source,
                    &walk.omp_seen,
                    plan.search.tick,
                ),
            );
        }
        return fallback(
            plan,
            *source,
            &instead,
            refused,
            &facts,
            walk.openmp_idle.as_deref(),
            &mut *env.sink,
        )
        .map(|choice| choice.with_startup(*source, &walk.omp_seen, plan.search.tick));
    }
    Err(EngineError::usage(format!(
        "no way to measure {} for this target (objective chain {:?})",
        requested.text(),
        plan.objective.chain
    )))
}

/// The default objective set aside for one counted once per team (`source`: the
/// program's heartbeat, or its OpenMP progress, `instead`): said once, with the reason for
/// the report. Not a warning: the default could be counted, and what is measured is
/// what a comparison of team sizes needs.
fn team_free_instead(
    plan: &RunPlan,
    source: ObjectiveSource,
    instead: &str,
    sink: &mut dyn RunSink,
) -> Result<ObjectiveChoice, EngineError> {
    let o = progress_objective(source, true)?;
    let default = plan.objective.requested.text();
    let reason = format!(
        "instead of the default {default}, which counts every thread's work and so grows with the team: fewer threads may run faster here, and teams of different sizes compare only on work counted once per team"
    );
    sink.message(
        None,
        &format!("Using {instead} rather than {default}: fewer threads may run faster here, and {default} counts every thread's work, so teams of different sizes would not compare."),
    );
    Ok(ObjectiveChoice {
        source,
        info: info_of(&o, reason),
        objective: o,
        startup: Vec::new(),
    })
}

/// The objective of a progress source: the program's heartbeats, or its OpenMP work,
/// counted once per team where teams of different sizes are compared (`team_units`).
fn progress_objective(source: ObjectiveSource, team_units: bool) -> Result<Objective, EngineError> {
    let text = if source == ObjectiveSource::Heartbeat {
        "heartbeat"
    } else if team_units {
        "openmp-team"
    } else {
        "openmp"
    };
    Objective::parse(text).map_err(|e| EngineError::internal(format!("{text} objective: {e}")))
}

impl ObjectiveChoice {
    /// With the start-up readings OpenMP progress gathered while the choice was made, and
    /// the source's name, as the fallback path gives them.
    fn with_startup(
        mut self,
        source: ObjectiveSource,
        omp_seen: &[(f64, u64, usize)],
        tick: f64,
    ) -> ObjectiveChoice {
        if source == ObjectiveSource::OpenMpProgress {
            self.startup = startup_intervals(omp_seen, tick);
        }
        self.info.source = source.name().into();
        self
    }
}

/// The requested objective, which can be counted here.
fn requested_choice(plan: &RunPlan, source: ObjectiveSource) -> ObjectiveChoice {
    let requested = &plan.objective.requested;
    let reason = if plan.objective.explicit {
        "chosen with --objective/-e"
    } else {
        "the default: work retired by the threads"
    };
    let mut info = info_of(requested, reason.into());
    info.source = source.name().into();
    ObjectiveChoice {
        source,
        objective: requested.clone(),
        info,
        startup: Vec::new(),
    }
}

/// What the walk along the fallback chain has learnt and spent so far.
struct Walk<'a> {
    /// The init time left (the waits use it up).
    init: &'a mut f64,
    /// The user asked for the init (`SearchParams::init_asked`): progress seen does not end it.
    init_asked: bool,
    /// The seconds waited so far.
    waited: &'a mut f64,
    /// Why OpenMP progress would read zero, when the program completed no construct.
    openmp_idle: Option<String>,
    /// OpenMP constructs completed while a heartbeat was waited for: (seconds from the
    /// target's start, constructs so far, threads), each poll.
    omp_seen: Vec<(f64, u64, usize)>,
    /// An OpenMP runtime found in the process at run time (one of its libraries brought it).
    loaded_runtime: Option<String>,
}

impl Walk<'_> {
    /// Waits for a launched program's heartbeat; what is measured instead when it beats.
    fn heartbeat(
        &mut self,
        env: &mut RunEnv,
        threads: &mut dyn ThreadSource,
        target: &TargetFacts,
    ) -> Option<String> {
        // A program that knows what useful work is says so in its first moments.
        let wait = self.init.clamp(0.3, 2.0);
        if env.platform.heartbeats() == 0 {
            env.sink.message(
                None,
                &format!(
                    "waiting up to {} for the program's heartbeat",
                    duration(wait)
                ),
            );
        }
        let from = *self.waited;
        let omp_seen = &mut self.omp_seen;
        let (beats, waited) = wait_for_progress(env, threads, wait, |p, t, n, _| {
            if target.preload_active {
                omp_seen.push((from + t, p.openmp_constructs(), n));
            }
            (p.heartbeats(), startup_seen(omp_seen))
        });
        self.spend(waited);
        if beats == 0 {
            // The start-up was seen making OpenMP progress long enough to be the OS
            // placement's first probe: the rest of the init time would only keep the program
            // where the OS placed it, which beside a busy CPU can be several times slower
            // than the pinning the search will find.
            if startup_seen(&self.omp_seen) && !self.init_asked {
                *self.init = 0.0;
            }
            return None;
        }
        Some(format!("the program's heartbeat ({beats} beat(s) reported in the first {waited:.1} s; work units/s)"))
    }

    /// Waits for a completed OpenMP construct of a launched OpenMP program that the
    /// preload library counts; what is measured instead when one completes.
    fn openmp_progress(
        &mut self,
        env: &mut RunEnv,
        threads: &mut dyn ThreadSource,
        target: &TargetFacts,
        launched: bool,
    ) -> Option<String> {
        // A runtime that one of the program's libraries brings (GROMACS's libgomp
        // comes with libgromacs): the preload library counts its entry points all
        // the same, since it comes first in symbol resolution.
        if target.openmp_runtime.is_none() && launched && target.preload_active {
            self.loaded_runtime = env.platform.openmp_runtime_loaded(target.pid);
            if self.loaded_runtime.is_none() && self.wait_for_loader(env, threads) {
                self.loaded_runtime = env.platform.openmp_runtime_loaded(target.pid);
            }
        }
        let rt = target
            .openmp_runtime
            .or(self.loaded_runtime.as_deref())
            .filter(|_| launched && target.preload_active)?
            .to_string();
        // Completed constructs are the progress: a program whose first moments
        // complete none (all its work in one long parallel region) would read
        // zero for as long as that region runs, so it is measured otherwise.
        let wait = self.init.clamp(0.3, 1.0);
        let (mut done, waited) = wait_for_progress(env, threads, wait, |p, _, _, _| {
            (p.openmp_constructs(), false)
        });
        self.spend(waited);
        // One thread where more will come: a serial start-up. (One long parallel region of
        // a program that runs one OpenMP thread is measured otherwise, as before.)
        let more_to_come = target.openmp_threads > 1;
        if done == 0 && more_to_come && threads.poll().is_ok_and(|s| s.tracked.len() <= 1) {
            done = self.serial_start_up(env, threads, &rt);
        }
        if done == 0 {
            self.openmp_idle = Some(format!(
                "the program uses OpenMP ({rt}) but completed no OpenMP construct in its first {:.1} s, so OpenMP progress would read zero",
                *self.waited
            ));
            return None;
        }
        Some(format!(
            "OpenMP progress: completed parallel regions, loop chunks, barriers and tasks per second, counted at the entry points of the program's OpenMP runtime ({rt})"
        ))
    }

    /// A program whose dynamic loader is still mapping its libraries (a cold start reading
    /// them from disk) has not yet shown the OpenMP runtime one of them may bring (GROMACS's
    /// libgomp comes with libgromacs): judged then, it was measured with task-clock, one
    /// thread, and kept where the OS placed it, 1.8× slower than the pinning found once it
    /// loaded. Waits up to `LOADER_WAIT` for the loader; true when it waited.
    fn wait_for_loader(&mut self, env: &mut RunEnv, threads: &mut dyn ThreadSource) -> bool {
        if threads.libraries_loaded() != Some(false) {
            return false;
        }
        env.sink.message(
            None,
            &format!(
                "the program is still loading its libraries after {:.1} s; waiting for it, up to {}",
                *self.waited,
                duration(LOADER_WAIT)
            ),
        );
        let (_, waited) = wait_for_progress(env, threads, LOADER_WAIT, |_, _, _, t| {
            (0, t.libraries_loaded() != Some(false))
        });
        self.spend(waited);
        true
    }

    /// An OpenMP program that runs one thread and has completed no construct is in a serial
    /// start-up (reading its input): its OpenMP threads do not exist yet, so neither does
    /// what the search would place, and a search now would measure one thread with
    /// task-clock. Waits, up to `SERIAL_WAIT`, for its first construct or its second
    /// thread (then a little more for a construct: the first parallel region creates the
    /// threads); returns the constructs completed.
    fn serial_start_up(
        &mut self,
        env: &mut RunEnv,
        threads: &mut dyn ThreadSource,
        runtime: &str,
    ) -> u64 {
        env.sink.message(
            None,
            &format!(
                "the program uses OpenMP ({runtime}) but runs one thread and has completed no OpenMP construct after {:.1} s: a serial start-up; probing waits for its first parallel region, up to {}",
                *self.waited,
                duration(SERIAL_WAIT)
            ),
        );
        let (done, waited) = wait_for_progress(env, threads, SERIAL_WAIT, |p, _, n, _| {
            (p.openmp_constructs(), n > 1)
        });
        self.spend(waited);
        if done > 0 {
            return done;
        }
        let (done, waited) = wait_for_progress(env, threads, 1.0, |p, _, _, _| {
            (p.openmp_constructs(), false)
        });
        self.spend(waited);
        done
    }

    /// `source` is passed over without its wait: the remembered decision was measured
    /// with `then`, a later link.
    fn skip(&mut self, source: ObjectiveSource, then: ObjectiveSource, sink: &mut dyn RunSink) {
        let then_text = match then {
            ObjectiveSource::OpenMpProgress => "OpenMP progress",
            ObjectiveSource::TaskClock => "task-clock",
            _ => then.name(),
        };
        let what = match source {
            ObjectiveSource::Heartbeat => "a heartbeat",
            _ => "OpenMP progress",
        };
        let why = format!(
            "the remembered decision was measured with {then_text}, so {what} is not waited for"
        );
        if source == ObjectiveSource::OpenMpProgress {
            // Task-clock's reason says why OpenMP progress is not what is measured.
            self.openmp_idle = Some(why.clone());
        }
        sink.message(None, &why);
    }

    /// `waited` seconds of the init time are spent.
    fn spend(&mut self, waited: f64) {
        *self.init = (*self.init - waited).max(0.0);
        *self.waited += waited;
    }
}

/// Why task-clock is what is measured: the program gives no other source of progress.
fn task_clock_reason(target: &TargetFacts, launched: bool, openmp_idle: Option<&str>) -> String {
    let why = match (target.openmp_runtime, openmp_idle) {
        (_, Some(idle)) => idle.to_string(),
        (Some(rt), None) if !launched => format!("the program uses OpenMP ({rt}), but its work is counted by the preload library, which is only in programs that `autopin run` or `autopin pin` start"),
        (Some(rt), None) => format!("the program uses OpenMP ({rt}) but the preload library cannot count its work (a static binary)"),
        (None, None) if launched && target.preload_active => "the program reports no heartbeat and loads no OpenMP runtime".into(),
        (None, None) => "the program reports no heartbeat and is not an OpenMP program".into(),
    };
    format!("task-clock: each thread's CPU time per second from /proc/TID/schedstat ({why}; CPU share shows time lost to sharing a CPU, but not memory stalls or spin-waiting)")
}

fn info_of(o: &Objective, reason: String) -> ObjectiveInfo {
    ObjectiveInfo {
        name: o.describe(),
        unit: o.unit().to_string(),
        higher_is_better: o.higher_is_better(),
        reason,
        source: String::new(),
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
            let o = progress_objective(source, target.team_units)?;
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
                startup: Vec::new(),
            }
        }
        _ => ObjectiveChoice {
            source,
            objective: requested.clone(),
            startup: Vec::new(),
            info: ObjectiveInfo {
                name: "task-clock (CPU time per thread, /proc/TID/schedstat)".into(),
                unit: "CPU-s/s".into(),
                higher_is_better: true,
                source: String::new(),
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

/// Polls `progress(platform, seconds waited, threads tracked, thread source)` every 20 ms
/// until its count is above zero, it says enough was seen, the program ends, or `wait`
/// seconds pass; returns the last count and the time waited.
fn wait_for_progress(
    env: &mut RunEnv,
    threads: &mut dyn ThreadSource,
    wait: f64,
    mut progress: impl FnMut(&mut dyn Platform, f64, usize, &dyn ThreadSource) -> (u64, bool),
) -> (u64, f64) {
    let start = env.clock.now();
    let mut tracked = threads.poll().map_or(0, |s| s.tracked.len());
    let (mut seen, mut enough) = progress(&mut *env.platform, 0.0, tracked, &*threads);
    while seen == 0 && !enough && env.clock.now() - start < wait {
        match threads.poll() {
            Ok(s) if s.ended.is_some() => break,
            Ok(s) => tracked = s.tracked.len(),
            Err(_) => {}
        }
        // Woken by the program's end where the source can watch for it: a program that
        // ends while its progress is awaited is followed at once, not up to 20 ms later.
        if !threads.wait_for_end(0.02) {
            let t = env.clock.now() + 0.02;
            env.clock.sleep_until(t);
        }
        let waited = env.clock.now() - start;
        (seen, enough) = progress(&mut *env.platform, waited, tracked, &*threads);
    }
    (seen, env.clock.now() - start)
}

/// The longest an OpenMP program's serial start-up is waited for (`Walk::serial_start_up`):
/// a program that links an OpenMP runtime and never starts a parallel region is searched
/// as the one thread it is after that.
const SERIAL_WAIT: f64 = 30.0;

/// The longest a program's dynamic loader is waited for (`Walk::wait_for_loader`).
const LOADER_WAIT: f64 = 10.0;

/// Seconds of OpenMP progress with the same threads that make a start-up worth a probe of
/// the OS placement: the session drops the first 0.1 s tick that counted anything (the
/// program was loading before it) and ends its init once `STARTUP_ENOUGH` of clean tail
/// follows it.
const STARTUP_SEEN: f64 = 0.1 + crate::session::STARTUP_ENOUGH;

/// Whether polls of the OpenMP count, (seconds, count, threads), show the program making
/// progress for `STARTUP_SEEN` seconds since its first construct and its last change of
/// threads.
fn startup_seen(polls: &[(f64, u64, usize)]) -> bool {
    let Some(&(now, count_now, threads)) = polls.last() else {
        return false;
    };
    let Some(first) = polls.iter().position(|p| p.1 > 0) else {
        return false;
    };
    // The newest stretch with the present thread count, from the first construct on.
    let since = polls[first..]
        .iter()
        .rev()
        .take_while(|p| p.2 == threads)
        .last()
        .map_or(now, |p| p.0);
    // Still making progress: a construct completed within the last tick. A program that
    // paused after its first constructs (GROMACS reads its input then) is not yet running
    // as it will be searched.
    let recent = polls
        .iter()
        .rev()
        .find(|p| p.0 <= now - 0.1 + 0.01)
        .is_some_and(|p| p.1 < count_now);
    // Half a poll of slack: polls wake a little early or late.
    recent && now - since >= STARTUP_SEEN - 0.01
}

/// Polls of a cumulative count, (seconds, count, threads), as intervals of at least the
/// driver's `tick`; one whose thread count changed is disturbed.
fn startup_intervals(polls: &[(f64, u64, usize)], tick: f64) -> Vec<Interval> {
    let mut out = Vec::new();
    let Some(mut from) = polls.first().copied() else {
        return out;
    };
    let mut disturbed = false;
    for &(t, count, n) in &polls[1..] {
        disturbed |= n != from.2;
        if t - from.0 >= tick - 1e-9 {
            out.push(Interval {
                start: from.0,
                end: t,
                amount: count.saturating_sub(from.1) as f64,
                disturbed,
                tracked: n,
                ..Interval::default()
            });
            from = (t, count, n);
            disturbed = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{startup_intervals, startup_seen};

    #[test]
    fn a_start_up_is_seen_after_progress_with_the_same_threads_for_long_enough() {
        // Polls every 20 ms; the first construct at 0.1 s.
        let polls = |until: f64, second_thread_at: f64| -> Vec<(f64, u64, usize)> {
            (0..)
                .map(|i| 0.02 * f64::from(i))
                .take_while(|t| *t <= until + 1e-9)
                .map(|t| {
                    let count = if t < 0.1 { 0 } else { (1000.0 * t) as u64 };
                    (t, count, if t < second_thread_at { 1 } else { 2 })
                })
                .collect()
        };
        assert!(!startup_seen(&[]));
        assert!(!startup_seen(&polls(0.28, 9.0)), "0.18 s of progress");
        assert!(startup_seen(&polls(0.30, 9.0)), "0.2 s of progress");
        // A program that paused after its first constructs (no construct in the last
        // tick) is not seen until it makes progress again.
        let paused: Vec<_> = polls(0.50, 9.0)
            .into_iter()
            .map(|(t, c, n)| (t, if t > 0.35 { 350 } else { c }, n))
            .collect();
        assert!(!startup_seen(&paused), "paused since 0.35 s");
        // No construct at all: nothing seen, however long.
        let idle: Vec<_> = polls(1.0, 9.0)
            .into_iter()
            .map(|(t, _, n)| (t, 0, n))
            .collect();
        assert!(!startup_seen(&idle));
        // A thread born at 0.3 s starts the count again.
        assert!(!startup_seen(&polls(0.48, 0.3)));
        assert!(startup_seen(&polls(0.5, 0.3)));
    }

    #[test]
    fn polls_become_tick_long_intervals_and_a_changed_thread_count_disturbs_one() {
        // Polls every 20 ms at 1000 constructs/s; a second thread from 0.16 s on.
        let polls: Vec<(f64, u64, usize)> = (0..=15)
            .map(|i| {
                let t = 0.3 + 0.02 * f64::from(i);
                (t, (1000.0 * t) as u64, if t < 0.455 { 1 } else { 2 })
            })
            .collect();
        let ivs = startup_intervals(&polls, 0.1);
        assert_eq!(ivs.len(), 3, "{ivs:?}");
        for iv in &ivs {
            assert!(iv.end - iv.start >= 0.1 - 1e-9, "{iv:?}");
            assert!(
                (iv.amount / (iv.end - iv.start) - 1000.0).abs() < 60.0,
                "{iv:?}"
            );
        }
        let disturbed: Vec<bool> = ivs.iter().map(|iv| iv.disturbed).collect();
        assert_eq!(disturbed, [false, true, false]);
        assert_eq!(ivs[2].tracked, 2);
        assert!(startup_intervals(&polls[..1], 0.1).is_empty());
        assert_eq!(startup_intervals(&polls, 0.2).len(), 1);
    }
}
