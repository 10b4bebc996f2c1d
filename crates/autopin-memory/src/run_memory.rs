//! A run's use of the store: opened and looked up before the program starts, the
//! remembered decision made the plan's check, and what the run decided written back
//! after it, each fault said once (the run goes on without the store). What a record means
//! for the run is [`crate::policy`]'s; what the options ask of memory, the caller's
//! [`MemoryRequest`].

use crate::store::StoreOpening;
use crate::{fingerprint, policy, program_identity_kept, DecisionKey, MemoryError, Record, Store};
use autopin_engine::report::{MemoryUse, Report};
use autopin_engine::run::{RunPlan, RunSink, TargetSpec};
use std::path::PathBuf;

/// How long a run waits for a store another process holds locked, before the program
/// starts and after it ended: long enough for the ranks of a node writing their decisions
/// at once (milliseconds each), too short for anyone to notice. A writer that holds the
/// lock longer (another process's open transaction) is said, and the run goes on without
/// the store; the program never waits for it.
const LOOKUP_WAIT: std::time::Duration = std::time::Duration::from_millis(100);
const WRITE_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// What a run's options ask of the store.
#[derive(Debug, Clone)]
pub struct MemoryRequest {
    /// The store's file, or why memory is off (`--no-memory`, `AUTOPIN_MEMORY=off`, no home).
    pub store: Result<PathBuf, String>,
    /// What names the search (`--strategy`, `--schedule`, …) when it wins over memory: the
    /// search runs as asked and its outcome is not remembered.
    pub named: Option<String>,
    /// Decisions are kept for the program with these exact arguments (`--memory-key args`).
    pub key_args: bool,
    /// The thread count the key holds: `--threads N`, else `OMP_NUM_THREADS`, else "auto".
    pub threads: String,
    /// The objective the key holds: as named, else "default".
    pub objective: String,
    /// Where large programs' identities are kept between runs (None: hashed every run).
    pub kept_ids: Option<PathBuf>,
}

pub struct RunMemory {
    store: Option<Store>,
    path: String,
    key: Option<DecisionKey>,
    found: Option<Record>,
    /// Why memory is not used: ("disabled", reason), ("skipped", why) or ("error", the fault).
    off: Option<(&'static str, String)>,
    /// This run tries the record's pending team trial (fewer threads from its start).
    trying: bool,
}

impl RunMemory {
    /// Opens the store and looks this run up.
    /// The store opened on a thread of its own, from before the machine is read (about
    /// 0.5 ms of a program's start): None when this request will not use it, or when there
    /// is no store yet (one is made only once the run's options have all been found right).
    pub fn open_early(request: &MemoryRequest) -> Option<StoreOpening> {
        match (&request.store, &request.named) {
            (Ok(path), None) if path.is_file() => Some(StoreOpening::begin(path, LOOKUP_WAIT)),
            _ => None,
        }
    }

    /// The store for this run, its record for the program and what to do with it; `early`
    /// is [`RunMemory::open_early`]'s opening, used when it opened the same file.
    pub fn open(
        request: MemoryRequest,
        plan: &RunPlan,
        sink: &mut dyn RunSink,
        early: Option<StoreOpening>,
    ) -> RunMemory {
        let mut m = RunMemory {
            store: None,
            path: String::new(),
            key: None,
            found: None,
            off: None,
            trying: false,
        };
        let path = match request.store {
            Ok(ref p) => p.clone(),
            Err(ref why) => {
                m.off = Some(("disabled", why.clone()));
                return m;
            }
        };
        m.path = path.display().to_string();
        // What the user names is what runs: memory serves the default search.
        if let Some(named) = &request.named {
            let why = format!(
                "{named} named on the command line: the search runs as asked, and its outcome is not remembered (--recall applies a remembered decision anyway)"
            );
            sink.message(None, &format!("remembered decisions not used: {why}"));
            m.off = Some(("skipped", why));
            return m;
        }
        let key = match key_for(&request, plan) {
            Ok(k) => k,
            Err(why) => {
                m.off = Some(("disabled", why));
                return m;
            }
        };
        let opened = match early {
            Some(e) if e.path() == path.as_path() => e.finish(),
            _ => Store::open_with_wait(&path, LOOKUP_WAIT),
        };
        match opened.and_then(|s| s.lookup(&key).map(|r| (s, r))) {
            Ok((store, found)) => {
                m.store = Some(store);
                let allowed = plan.machine.allowed_cpuset();
                m.found = found.filter(|r| match policy::fits(r, &allowed) {
                    Ok(()) => true,
                    Err(warning) => {
                        sink.message(None, &warning.to_string());
                        false
                    }
                });
                m.trying = m
                    .found
                    .as_ref()
                    .is_some_and(|r| policy::tries_trial(r, &plan.threads));
            }
            Err(e) => m.fail(e, sink),
        }
        m.key = Some(key);
        m
    }

    /// The record found holds no pinning and this run tries no trial of it: it is not
    /// applied (`policy::holds_no_pinning`).
    fn placeholder(&self) -> bool {
        !self.trying && self.found.as_ref().is_some_and(policy::holds_no_pinning)
    }

    fn fail(&mut self, e: MemoryError, sink: &mut dyn RunSink) {
        sink.message(
            None,
            &format!(
                "warning: remembered decisions unavailable ({e}); this run goes on without them"
            ),
        );
        self.off = Some(("error", format!("{} ({})", e, e.kind())));
        self.store = None;
    }

    /// A remembered decision becomes the plan's check (or the start of its team trial).
    pub fn apply(&self, plan: &mut RunPlan, sink: &mut dyn RunSink) {
        let Some(r) = &self.found else { return };
        if self.placeholder() {
            sink.message(
                None,
                "remembered: no pinning yet (an earlier run ended before any probe, and the record holds only what its count did): this run searches as a first run",
            );
            return;
        }
        let (remembered, lines) = policy::recall(r, self.trying);
        for l in lines {
            sink.message(None, &l);
        }
        plan.remembered = Some(remembered);
    }

    /// Writes what the run decided back, and says in the report what memory did.
    pub fn finish(mut self, report: &mut Report, sink: &mut dyn RunSink) {
        let mut use_ = MemoryUse {
            path: self.path.clone(),
            key: self.key.as_ref().map(DecisionKey::id).unwrap_or_default(),
            hit: self.found.is_some() && !self.placeholder(),
            busy_then: self.found.as_ref().and_then(|r| r.busy.clone()),
            ..MemoryUse::default()
        };
        if let Some((outcome, why)) = &self.off {
            use_.outcome = outcome.to_string();
            use_.error = Some(why.clone());
            report.memory = Some(use_);
            return;
        }
        if use_.hit {
            let mut seen = Vec::new();
            for p in &report.probes {
                if !seen.contains(&p.label) {
                    seen.push(p.label.clone());
                }
            }
            use_.checked = seen;
        }
        let Some(key) = self.key.clone() else {
            return;
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let record = policy::settle(
            self.found.as_ref(),
            key,
            self.trying,
            report,
            &mut use_,
            now,
        );
        if let (Some(store), Some(record)) = (&self.store, &record) {
            if let Err(e) = store
                .set_busy_wait(WRITE_WAIT)
                .and_then(|()| store.put(record))
            {
                self.fail(e, sink);
                use_.outcome = "error".into();
                use_.error = self.off.as_ref().map(|(_, w)| w.clone());
            }
        }
        report.memory = Some(use_);
    }
}

/// The key of this run: what makes a decision valid for it.
fn key_for(request: &MemoryRequest, plan: &RunPlan) -> Result<DecisionKey, String> {
    let (program, args) = match &plan.target {
        TargetSpec::Launch(argv) => {
            let path = std::env::var_os("PATH");
            let p = autopin_launch::elf::resolve_program(argv[0].as_ref(), path.as_deref())
                .map_err(|e| format!("{}: {e}", argv[0]))?;
            (p, argv[1..].to_vec())
        }
        TargetSpec::Attach { pid, .. } => {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
                .map_err(|e| format!("/proc/{pid}/exe: {e}"))?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args = cmdline
                .split(|b| *b == 0)
                .skip(1)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            (exe, args)
        }
    };
    let program = program.canonicalize().unwrap_or(program);
    let program_id = program_identity_kept(&program, request.kept_ids.as_deref())
        .map_err(|e| format!("{}: {e}", program.display()))?;
    let share = plan
        .launch
        .as_ref()
        .map(|l| &l.record)
        .filter(|r| r.place.local_size > 1)
        .map(|r| {
            format!(
                "rank {} of {} on the node",
                r.place.local_rank, r.place.local_size
            )
        });
    Ok(DecisionKey {
        program: program.display().to_string(),
        program_id,
        args: request.key_args.then_some(args),
        machine: fingerprint(&plan.machine.summary_lines()),
        cpus: plan.machine.allowed_cpuset().to_string(),
        threads: request.threads.clone(),
        objective: request.objective.clone(),
        share,
    })
}
