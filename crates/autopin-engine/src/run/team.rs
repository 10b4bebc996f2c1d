//! The program's thread count in a run (`--threads`, docs/threads.md): whether the search
//! may give an OpenMP program's parallel regions fewer threads, the candidates that do, and
//! what the report says of it.
//!
//! Team candidates join a search only when everything holds: `--threads auto`, a launched
//! OpenMP program the preload library sits in, fewer threads plausible here at launch (CPUs
//! busy with other work leave fewer free CPUs than threads, or SMT siblings would share
//! cores), and so the team-free objective (`openmp-team`, OpenMP work counted once per team)
//! measures the run. At each search the preload library's view decides: a program that may
//! notice a smaller team (it asked for its count outside a region, set it, keeps
//! threadprivate data) keeps its count in this run, and the team candidate is left to the
//! next run's start, from memory.

use super::{CandidateSource, RunPlan, ThreadsChoice};
use crate::report::{CandidateRecord, ThreadCount};
use crate::sensors::{Meter, OsError, Reading};
use autopin_objective::progress::TeamState;
use autopin_placement::Pinning;
use autopin_topology::Machine;
use std::cell::RefCell;
use std::rc::Rc;

/// Readings (0.1 s ticks) over which no outermost region began that mark a program running
/// one long region: a smaller team would reach it only at its next run. (A team candidate
/// probed then runs the full team on its fewer CPUs: ompwork's one-region loop of barriers
/// read at 1% of its pinned rate that way.)
const LONG_REGION_READINGS: usize = 5;

/// The unit of the team-free objective (`openmp-team`).
const TEAM_UNIT: &str = "OpenMP team constructs/s";
/// The heartbeat objective's unit: the program's own progress, team-free too.
const HEARTBEAT_UNIT: &str = "beats/s";
/// Why a program that names its own team sizes keeps them (the words go on: "mid-run
/// changes", "for changes").
const SETS_ITS_OWN: &str = "the program sets its own thread counts (num_threads clauses or omp_set_num_threads), which no team size asked";

/// The count's part in a run, shared by the meter (which reads the library's view), the
/// candidate factory (which offers team candidates) and the report.
#[derive(Clone, Default)]
pub(super) struct TeamSearch(Rc<RefCell<Shared>>);

#[derive(Default)]
struct Shared {
    /// Team candidates may join the searches.
    enabled: bool,
    /// The objective is the team-free one (team candidates, or a remembered rate measured
    /// so that this run's compares with it).
    units: bool,
    /// Why the count is not searched in this run at all (None while it may be).
    off: Option<String>,
    /// The executable has thread-local data of its own.
    thread_local_data: bool,
    /// The preload library's latest view of the program's teams.
    state: Option<TeamState>,
    /// The outermost regions begun, at each of the latest readings (oldest first).
    starts: Vec<u32>,
    /// Team candidates a search raced (`racing`): those `candidates` offered, and a
    /// remembered decision's of fewer threads.
    offered: Vec<Pinning>,
    /// The team candidate a search could not offer (the program may notice a smaller
    /// team), left to the next run's start; and why.
    trial: Option<(Pinning, String)>,
    /// The first team candidate at launch (fewer threads plausible then): the next run's
    /// trial when the program ends before any search could offer fewer threads.
    at_launch: Option<Pinning>,
    /// The threads the program was started to run (OMP_NUM_THREADS, else its CPUs).
    start_threads: usize,
    /// The counts its arguments name (`2` in `-ntomp 2`, `--threads=2`).
    arg_counts: Vec<usize>,
    /// The team size asked of the program's library before its start (fewer threads
    /// plausible at launch), taken from its second region where its rule allows.
    born: Option<usize>,
    /// Searches that asked for team candidates (0: the program ended before any).
    searches: usize,
    /// Where memory chose this run's count (a kept count, a trial of fewer threads): the
    /// program's own count as it starts without autopin, which the report names (the
    /// library sees memory's count as the program's).
    own_without_memory: Option<usize>,
}

/// What the run knows of the program when it plans the count.
pub(super) struct Facts<'a> {
    pub(super) launched: bool,
    pub(super) openmp_runtime: Option<&'a str>,
    pub(super) preload_active: bool,
    pub(super) thread_local_data: bool,
    /// The threads the program will start (OMP_NUM_THREADS, else the CPUs it may use).
    pub(super) threads: usize,
    /// The threads it would start without autopin (the user's OMP_NUM_THREADS, else the
    /// CPUs it may use): `threads` differs where memory set the count.
    pub(super) own_threads: usize,
    /// CPUs busy with other work at launch.
    pub(super) busy: &'a [u32],
    /// The program's arguments (none for an attached program).
    pub(super) args: &'a [String],
}

impl TeamSearch {
    /// Plans the count for `plan` on `machine` (the CPUs the program may use).
    pub(super) fn plan(plan: &RunPlan, machine: &Machine, f: &Facts) -> TeamSearch {
        // A remembered team (a trial kept, or one this run tries): the count is memory's.
        let remembered_team = plan
            .remembered
            .as_ref()
            .and_then(|r| r.pinning.team.map(|n| (n, r.trying_team)));
        // A run that tries the program's own count again, against a kept smaller one whose
        // rate has fallen (a recheck, docs/threads.md): the count is memory's in it too.
        let rechecking = plan
            .remembered
            .as_ref()
            .is_some_and(|r| r.trying_team && r.pinning.team.is_none());
        let off = match plan.threads {
            ThreadsChoice::Keep => Some("--threads keep".to_string()),
            // OMP_NUM_THREADS reaches only an OpenMP runtime: another program is told that
            // its count stays its own, not that it runs n.
            ThreadsChoice::Count(n) if f.launched && f.openmp_runtime.is_none() => Some(format!(
                "--threads {n} sets OMP_NUM_THREADS, but this is not an OpenMP program: its threads are its own (pthreads, MPI, TBB, Java keep their count); the candidates were planned for {n}"
            )),
            ThreadsChoice::Count(n) => Some(format!("--threads {n}: the program runs {n}")),
            ThreadsChoice::Auto if rechecking => Some(
                "this run rechecks the program's own count from its start: the smaller count kept before ran well below the rate it was kept at"
                    .into(),
            ),
            ThreadsChoice::Auto if remembered_team.is_some() => {
                let (n, trying) = remembered_team.unwrap_or_default();
                Some(if !trying {
                    format!("the count is remembered: {n} thread(s) from the start, kept when an earlier run that tried them ran faster")
                } else {
                    format!("this run tries {n} thread(s) from its start (an earlier run could not change the count mid-run)")
                })
            }
            ThreadsChoice::Auto if !f.launched => {
                Some("an attached program keeps its count (no preload library in it)".into())
            }
            ThreadsChoice::Auto if f.openmp_runtime.is_none() => Some(
                "not an OpenMP program: its threads are its own (pthreads, MPI, TBB, Java keep their count)"
                    .into(),
            ),
            ThreadsChoice::Auto if !f.preload_active => Some(
                "the preload library is not in the program (a static executable): its teams cannot be changed"
                    .into(),
            ),
            ThreadsChoice::Auto if !matches!(plan.candidates, CandidateSource::Topology { .. }) => {
                Some("the candidates were named: their thread count is the program's".into())
            }
            ThreadsChoice::Auto
                if autopin_placement::team_candidates(machine, f.threads, f.busy).is_empty() =>
            {
                Some(if f.threads == 1 {
                    "the program starts one thread".to_string()
                } else {
                    format!(
                        "each of the {} threads the program starts has a CPU of its own at launch: fewer would not run faster",
                        f.threads
                    )
                })
            }
            ThreadsChoice::Auto => None,
        };
        // A remembered rate measured per team: this run measures so too (a count tried from
        // its start is compared with the program's own count that way).
        // So does a run whose count is memory's (a kept count, a trial of fewer threads, a
        // recheck of the own count): its rate is held to another count's, or will be (a
        // trial's record may have no rate yet, and one measured per thread would make the
        // own count's two threads read twice one thread's work).
        let remembered_units = (plan
            .remembered
            .as_ref()
            .and_then(|r| r.rate.as_ref())
            .is_some_and(|(_, unit)| unit == TEAM_UNIT || unit == HEARTBEAT_UNIT)
            || (plan.threads == ThreadsChoice::Auto && (remembered_team.is_some() || rechecking)))
            && f.openmp_runtime.is_some()
            && f.preload_active;
        let at_launch = off
            .is_none()
            .then(|| autopin_placement::team_candidates(machine, f.threads, f.busy))
            .and_then(|t| t.into_iter().next());
        TeamSearch(Rc::new(RefCell::new(Shared {
            enabled: off.is_none(),
            units: off.is_none() || remembered_units,
            at_launch,
            off,
            thread_local_data: f.thread_local_data,
            start_threads: f.threads,
            own_without_memory: remembered_team.map(|_| f.own_threads),
            arg_counts: f.args.iter().skip(1).filter_map(|a| arg_count(a)).collect(),
            ..Shared::default()
        })))
    }

    /// Whether team candidates may join this run's searches.
    pub(super) fn enabled(&self) -> bool {
        self.0.borrow().enabled
    }

    /// The program was asked for teams of `k` before its start.
    pub(super) fn born(&self, k: usize) {
        self.0.borrow_mut().born = Some(k);
    }

    /// Notes the team candidates among a search's `pinnings`, the ones `candidates` offered
    /// and any other (a remembered decision's pinning or runner-up of fewer threads, raced
    /// in a check): where the count may be searched in this run, it is then searched mid-run,
    /// and the report says so rather than leaving the count to the next run. The one place
    /// `offered` is filled. (A check that overturned a remembered pinning for its runner-up of one thread
    /// was reported as "the program ended before a search could try fewer threads", and its
    /// next run "tried" the count it had just chosen.)
    pub(super) fn racing(&self, pinnings: &[Pinning]) {
        let mut s = self.0.borrow_mut();
        if !s.enabled {
            return;
        }
        for p in pinnings.iter().filter(|p| p.team.is_some()) {
            if !s.offered.iter().any(|o| o.label == p.label) {
                s.offered.push(p.clone());
            }
        }
    }

    /// Team candidates do not join this run's searches, for `why` (kept when the count was
    /// already not searched).
    pub(super) fn disable(&self, why: String) {
        let mut s = self.0.borrow_mut();
        if s.enabled {
            s.enabled = false;
            s.off = Some(why);
        }
        s.units = false;
    }

    /// Whether the team-free objective measures the run.
    pub(super) fn units(&self) -> bool {
        self.0.borrow().units
    }

    /// `inner`, reading the preload library's view of the teams at every reading.
    pub(super) fn meter(&self, inner: Box<dyn Meter>) -> Box<dyn Meter> {
        if !self.units() {
            return inner;
        }
        Box::new(TeamMeter {
            inner,
            shared: self.0.clone(),
        })
    }

    /// The team candidates for a search of `n` threads beside the `busy` CPUs, and a line
    /// for the report; none when the count is not searched, or the program may notice a
    /// smaller team mid-run (its candidate is then kept for the next run's start).
    pub(super) fn candidates(
        &self,
        machine: &Machine,
        n: usize,
        busy: &[u32],
    ) -> (Vec<Pinning>, Option<String>) {
        let mut s = self.0.borrow_mut();
        if !s.enabled {
            return (Vec::new(), None);
        }
        s.searches += 1;
        let Some(state) = s.state else {
            return (Vec::new(), None);
        };
        // A program that names its teams' sizes itself (num_threads clauses, or
        // omp_set_num_threads) keeps them whatever is asked mid-run: a team candidate would
        // only put its threads on fewer CPUs. One that names the count its environment gave
        // it (GROMACS and LAMMPS read OMP_NUM_THREADS) takes a smaller one at its start:
        // that is left to the next run.
        use autopin_objective::progress::TeamFlags;
        if state.flags.has(TeamFlags::CLAUSE | TeamFlags::SET) {
            let follows = follows_environment(&state, s.start_threads, &s.arg_counts);
            let first = follows
                .then(|| autopin_placement::team_candidates(machine, state.named as usize, busy))
                .and_then(|t| t.into_iter().next());
            if let Some(first) = first {
                let why = format!(
                    "{SETS_ITS_OWN} mid-run changes; it named {}, the count it was started with, so it may take fewer from OMP_NUM_THREADS",
                    state.named
                );
                let note = format!(
                    "thread count: {} may run faster, but {why}: its count stays in this run, and the next run starts with them to try (from memory)",
                    first.label
                );
                s.trial = Some((first, why));
                return (Vec::new(), Some(note));
            }
            let why = names_why(&state, s.start_threads, &s.arg_counts);
            let note = format!("thread count: not searched: {why}");
            s.enabled = false;
            s.off = Some(why);
            return (Vec::new(), Some(note));
        }
        let n = if state.own > 0 { state.own as usize } else { n };
        let teams = autopin_placement::team_candidates(machine, n, busy);
        let Some(first) = teams.first().cloned() else {
            return (Vec::new(), None);
        };
        let why_not = state
            .flags
            .why_not()
            .or_else(|| {
                s.thread_local_data.then(|| {
                    "the program keeps thread-local data of its own (maybe OpenMP threadprivate data, which persists only while the team keeps its size)".to_string()
                })
            })
            .or_else(|| s.one_long_region(&state));
        if let Some(why) = why_not {
            let note = format!(
                "thread count: {} may run faster, but {why}: its count stays in this run, and the next run starts with them to try (from memory)",
                first.label
            );
            s.trial = Some((first, why));
            return (Vec::new(), Some(note));
        }
        let note = format!(
            "thread count: {} join the search (the program's parallel regions get fewer threads from the next region on; it never asked for its count)",
            teams
                .iter()
                .map(|t| t.label.clone())
                .collect::<Vec<_>>()
                .join(", ")
        );
        // (noted as offered once they are in the search's list: `racing`)
        (teams, Some(note))
    }

    /// What the report says of the count.
    pub(super) fn record(&self) -> ThreadCount {
        let mut s = self.0.borrow_mut();
        // Fewer threads were plausible at launch, but the program ended before a search
        // offered them (a short program): starting with them is safe at any next run.
        // Only where the library saw the program name no team size of its own: one that
        // takes its count from its arguments (GROMACS's -ntomp) may refuse an
        // OMP_NUM_THREADS that differs.
        // (a program that names its own team sizes, not from its environment)
        let names_its_own = s.state.filter(|t| {
            use autopin_objective::progress::TeamFlags;
            t.flags.has(TeamFlags::CLAUSE | TeamFlags::SET)
                && !follows_environment(t, s.start_threads, &s.arg_counts)
        });
        let seen_plain = s.state.is_some() && names_its_own.is_none();
        if s.enabled && seen_plain && s.offered.is_empty() && s.trial.is_none() && s.off.is_none() {
            if let Some(first) = s.at_launch.clone() {
                // Where the program had already shown it may notice a smaller team, or ran
                // one long region, that is why its count stayed, search or none: a longer
                // run would have kept it too.
                let long_seen = s.starts.len() >= LONG_REGION_READINGS;
                let why = s
                    .state
                    .and_then(|t| {
                        t.flags
                            .why_not()
                            .or_else(|| s.one_long_region(&t).filter(|_| long_seen))
                    })
                    .unwrap_or_else(|| {
                        "the program ended before a search could try fewer threads".into()
                    });
                s.trial = Some((first, why));
            }
        }
        let own = s
            .own_without_memory
            .or_else(|| s.state.map(|t| t.own as usize))
            .filter(|n| *n > 0);
        let named = s.state.map(|t| t.named as usize).filter(|n| *n > 0);
        // The team asked at birth took and ran to the program's end with no search weighing
        // it. A short program (no search began): its next run starts with that count, the
        // trial judged by whole runs against this one, so that from then on memory starts it
        // there (from its first region). One whose search found it may notice a change (or
        // that ran on in one long region) ran the team under the own count's candidates,
        // whose rate is that team's: a trial judged against it would prove nothing, so none
        // is left; the report says what the program ran.
        let born_kept = s
            .born
            .filter(|k| s.offered.is_empty() && s.state.is_some_and(|t| t.applied as usize == *k));
        if let Some(k) = born_kept {
            let short = s.searches == 0;
            let taken = s.trial.take();
            let why = taken.as_ref().map_or_else(
                || "no search could weigh another count".to_string(),
                |(_, why)| why.clone(),
            );
            let trial = taken.filter(|_| short);
            return ThreadCount {
                own,
                named,
                searched: if short { "across runs" } else { "at launch" }.into(),
                why: format!(
                    "the program ran {k} thread(s) from its second parallel region on, asked at launch as fewer CPUs were free than its threads, to its end: {why}"
                ),
                trial: trial.as_ref().map(|(p, _)| CandidateRecord::from(0, p)),
                released: None,
            };
        }
        let (searched, why) = if let Some(off) = &s.off {
            ("no", off.clone())
        } else if !s.offered.is_empty() {
            (
                "mid-run",
                "the program's parallel regions can run fewer threads without it noticing"
                    .to_string(),
            )
        } else if let Some((_, why)) = &s.trial {
            ("across runs", why.clone())
        } else if let Some(t) = names_its_own {
            ("no", names_why(&t, s.start_threads, &s.arg_counts))
        } else {
            (
                "no",
                "no search offered fewer threads (no OpenMP region seen, or every thread had a CPU of its own)"
                    .to_string(),
            )
        };
        ThreadCount {
            own,
            named,
            searched: searched.into(),
            why,
            trial: s.trial.as_ref().map(|(p, _)| CandidateRecord::from(0, p)),
            released: None,
        }
    }
}

/// The count an argument names: a whole number (`2` in `-ntomp 2`), or one after `=`
/// (`--threads=2`).
fn arg_count(arg: &str) -> Option<usize> {
    let value = arg.rsplit_once('=').map_or(arg, |(_, v)| v);
    value.parse().ok()
}

/// Whether a program that names its own team sizes takes them from its environment, so
/// that a smaller OMP_NUM_THREADS at its start reaches it: the largest size it named is
/// the count it was started with (OMP_NUM_THREADS, else its CPUs), and none of its
/// arguments names that count. (A program told its count twice may refuse an
/// OMP_NUM_THREADS that differs: GROMACS ends at once when `-ntomp 2` meets
/// OMP_NUM_THREADS=1.)
fn follows_environment(t: &TeamState, start_threads: usize, arg_counts: &[usize]) -> bool {
    let named = t.named as usize;
    named > 1 && named == start_threads && !arg_counts.contains(&named)
}

/// Why a program that names its own team sizes is not searched, in words.
fn names_why(t: &TeamState, start_threads: usize, arg_counts: &[usize]) -> String {
    let named = t.named as usize;
    let base = format!("{SETS_ITS_OWN} for changes");
    if named > 1 && named == start_threads && arg_counts.contains(&named) {
        format!("{base}; its arguments name {named} too, so a smaller OMP_NUM_THREADS could conflict with them")
    } else if named > 0 && named != start_threads {
        format!("{base}; it named {named}, not the {start_threads} it was started with")
    } else {
        base
    }
}

impl Shared {
    /// Why a smaller team cannot reach the program in this run when it runs one long
    /// region: none began over the last readings, or it has begun one in all (a search
    /// starts once it has run a while).
    fn one_long_region(&self, state: &TeamState) -> Option<String> {
        let quiet = self.starts.len() >= LONG_REGION_READINGS
            && self.starts.windows(2).all(|w| w[0] == w[1]);
        (state.starts <= 1 || quiet).then(|| {
            format!(
                "the program runs one long parallel region ({} begun in all, none in its last {:.1} s), whose team no change reaches until it ends",
                state.starts,
                0.1 * LONG_REGION_READINGS as f64
            )
        })
    }
}

/// A meter that keeps the preload library's view of the program's teams for the search.
struct TeamMeter {
    inner: Box<dyn Meter>,
    shared: Rc<RefCell<Shared>>,
}

impl Meter for TeamMeter {
    fn read(&mut self, threads: &[u32]) -> Result<Reading, OsError> {
        let r = self.inner.read(threads);
        if let Some(t) = self.inner.team() {
            let mut s = self.shared.borrow_mut();
            s.state = Some(t);
            s.starts.push(t.starts);
            if s.starts.len() > LONG_REGION_READINGS {
                s.starts.remove(0);
            }
        }
        r
    }
    fn pause(&mut self) {
        self.inner.pause();
    }
    fn whole_program(&mut self, yes: bool) {
        self.inner.whole_program(yes);
    }
    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }
    fn counting(&self) -> Option<(String, String)> {
        self.inner.counting()
    }
    fn want_team(&mut self, threads: u32) {
        self.inner.want_team(threads);
    }
    fn team(&self) -> Option<TeamState> {
        self.inner.team()
    }
}
