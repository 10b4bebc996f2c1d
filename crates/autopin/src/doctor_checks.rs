//! What `autopin doctor` concludes from the facts about this machine and process: one check
//! per thing autopin relies on, each with what was found and, where something is missing,
//! the fix. Pure: the facts come from `autopin_os::doctor_facts`, the live checks (the
//! preload library, the decision store) from the command.

use autopin_os::doctor_facts::{Facts, Rapl};
use autopin_os::machine_cache::KeptReadFault;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Works.
    Ok,
    /// Worth knowing; nothing to fix.
    Note,
    /// Works, but may distort what autopin measures or decides.
    Warn,
    /// Does not work here; autopin falls back or the feature is unavailable.
    Missing,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Note => "note",
            Status::Warn => "warn",
            Status::Missing => "missing",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub found: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(name: &'static str, status: Status, found: impl Into<String>, fix: Option<&str>) -> Check {
    Check {
        name,
        status,
        found: found.into(),
        fix: fix.map(str::to_string),
    }
}

/// What the command tried on this machine itself, besides reading facts (each None: not
/// tried, e.g. under `--root`).
#[derive(Debug, Default)]
pub struct TriedHere {
    /// The preload library loaded into a program: Ok, or what went wrong.
    pub preload: Option<Result<(), String>>,
    /// The decision store: Ok(what it holds) or the error; Some(Ok) with "off" when turned off.
    pub memory: Option<Result<String, String>>,
    /// The machine's kept read against a fresh one: Ok(where, and that it is the machine) or
    /// why not (it differed, and was replaced; it cannot be kept).
    pub machine: Option<Result<String, KeptReadFault>>,
}

pub fn checks(f: &Facts, env: &dyn Fn(&str) -> Option<String>, tried: &TriedHere) -> Vec<Check> {
    let mut out = vec![
        counters(f),
        paranoid(f),
        rapl(f),
        numa(f),
        quota(f),
        allowed(f),
        smt(f),
        busy(f),
        launcher(env),
    ];
    out.extend(preload(tried));
    out.extend(memory(tried));
    out.extend(kept_machine(tried));
    out
}

/// Hardware counters: a PMU the kernel exposes.
fn counters(f: &Facts) -> Check {
    if f.pmus.is_empty() {
        check(
            "hardware counters",
            Status::Missing,
            "no hardware PMU (a virtual machine without PMU passthrough, or a container that hides it)",
            Some("autopin falls back to task-clock, OpenMP progress or heartbeats (--objective); on KVM give the guest the host's PMU (-cpu host, libvirt <pmu state='on'/>)"),
        )
    } else {
        check(
            "hardware counters",
            Status::Ok,
            format!("PMU {}", f.pmus.join(", ")),
            None,
        )
    }
}

/// Whether the kernel lets this user count a program's threads.
fn paranoid(f: &Facts) -> Check {
    match (f.paranoid, f.root_user) {
        (None, _) => check(
            "perf_event_paranoid",
            Status::Missing,
            "no perf_event support in this kernel",
            Some("a kernel with CONFIG_PERF_EVENTS; until then autopin measures with /proc (task-clock)"),
        ),
        (Some(p), true) => check("perf_event_paranoid", Status::Ok, format!("{p}, but autopin runs as root"), None),
        (Some(p), false) if p <= 2 => check(
            "perf_event_paranoid",
            Status::Ok,
            format!("{p}: per-thread counting of a user's own programs is allowed"),
            None,
        ),
        (Some(p), false) => check(
            "perf_event_paranoid",
            Status::Missing,
            format!("{p}: the kernel refuses perf_event_open to users"),
            Some("sudo sysctl kernel.perf_event_paranoid=2 (per-thread user-space counting needs 2 or less)"),
        ),
    }
}

/// Energy counters (RAPL) and whether this user may read them.
fn rapl(f: &Facts) -> Check {
    match &f.rapl {
        Rapl::Readable(n) => check("energy (RAPL)", Status::Ok, format!("{n} RAPL domain(s) readable"), None),
        Rapl::Unreadable(p) => check(
            "energy (RAPL)",
            Status::Missing,
            format!("{} is not readable by this user", p.display()),
            Some("sudo chmod o+r /sys/class/powercap/*/energy_uj (root-only since Linux 5.10), or run as root"),
        ),
        Rapl::Absent => check(
            "energy (RAPL)",
            Status::Note,
            "no RAPL counters here (not an Intel/AMD machine, or a virtual machine): the energy objective is unavailable",
            None,
        ),
    }
}

/// NUMA nodes, and whether the kernel moves pages on its own.
fn numa(f: &Facts) -> Check {
    match (f.numa_nodes, f.numa_balancing) {
        (1, _) => check(
            "NUMA",
            Status::Note,
            "one NUMA node: --migrate-memory and memory policies change nothing here",
            None,
        ),
        (n, Some(b)) if b > 0 => check(
            "NUMA",
            Status::Warn,
            format!("{n} NUMA nodes, and the kernel moves pages on its own (numa_balancing={b}): probes and --migrate-memory compete with it"),
            Some("sudo sysctl kernel.numa_balancing=0 while measuring, or accept the extra noise"),
        ),
        (n, _) => check("NUMA", Status::Ok, format!("{n} NUMA nodes, automatic balancing off"), None),
    }
}

/// A cgroup CPU-time quota below the CPUs allowed.
fn quota(f: &Facts) -> Check {
    let allowed = f.allowed.len();
    match f.cpu_quota {
        Some((q, p)) if p > 0 && (q as f64 / p as f64) < allowed as f64 => {
            let cpus = q as f64 / p as f64;
            check(
                "CPU quota (cgroup)",
                Status::Warn,
                format!("limited to {cpus:.2} CPUs of time (cpu.max {q} {p}) although {allowed} CPUs are allowed: threads beyond that wait whatever the pinning"),
                Some(&format!("run at most {} threads (e.g. OMP_NUM_THREADS={}), or ask for a bigger quota", cpus.floor().max(1.0), cpus.floor().max(1.0))),
            )
        }
        _ => check("CPU quota (cgroup)", Status::Ok, "no CPU time quota", None),
    }
}

/// The CPUs this process may use, of those online.
fn allowed(f: &Facts) -> Check {
    let allowed = f.allowed.len();
    if allowed < f.online.len() {
        check(
            "CPUs allowed",
            Status::Note,
            format!(
                "{} of {} online CPUs ({}): autopin plans inside them (affinity and cgroup cpuset)",
                allowed,
                f.online.len(),
                f.allowed
            ),
            None,
        )
    } else {
        check(
            "CPUs allowed",
            Status::Ok,
            format!("all {} online CPUs ({})", f.online.len(), f.online),
            None,
        )
    }
}

/// Whether cores run several hardware threads.
fn smt(f: &Facts) -> Check {
    match f.smt_active {
        Some(true) => check(
            "SMT",
            Status::Note,
            "on: candidates include threads sharing a core",
            None,
        ),
        Some(false) => check(
            "SMT",
            Status::Note,
            "off or absent: one hardware thread a core",
            None,
        ),
        None => check("SMT", Status::Note, "the kernel does not say", None),
    }
}

/// Allowed CPUs that other work keeps busy now.
fn busy(f: &Facts) -> Check {
    let busy: Vec<String> = f
        .busy
        .iter()
        .filter(|(c, b)| *b >= 0.5 && f.allowed.contains(*c))
        .map(|(c, b)| format!("{c} ({:.0}%)", 100.0 * b))
        .collect();
    if busy.is_empty() {
        check(
            "busy CPUs now",
            Status::Ok,
            "none of the allowed CPUs is busy",
            None,
        )
    } else {
        check(
            "busy CPUs now",
            Status::Warn,
            format!("CPU {} busy with other work", busy.join(", ")),
            Some("autopin run keeps candidates off busy CPUs; `autopin stat -p PID` names who runs there"),
        )
    }
}

/// Inside Slurm or an MPI launch, and the binding it gives.
fn launcher(env: &dyn Fn(&str) -> Option<String>) -> Check {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(job) = var("SLURM_JOB_ID") {
        let bind = var("SLURM_CPU_BIND").or_else(|| var("SLURM_CPU_BIND_TYPE"));
        let bound = bind.as_deref().is_some_and(|b| !b.contains("none"));
        check(
            "launcher",
            if bound { Status::Note } else { Status::Ok },
            format!(
                "Slurm job {job}{}{}",
                var("SLURM_STEP_ID")
                    .map(|s| format!(" step {s}"))
                    .unwrap_or_default(),
                bind.map(|b| format!(", task binding {b}: autopin stays inside each task's CPUs"))
                    .unwrap_or_default()
            ),
            None,
        )
    } else if let Some(size) = var("OMPI_COMM_WORLD_SIZE").or_else(|| var("PMI_SIZE")) {
        check(
            "launcher",
            Status::Ok,
            format!("an MPI launch of {size} rank(s): local ranks split the node"),
            None,
        )
    } else {
        check("launcher", Status::Ok, "not inside Slurm or MPI", None)
    }
}

/// Whether the preload library loads (when it was tried).
fn preload(tried: &TriedHere) -> Option<Check> {
    match &tried.preload {
        Some(Ok(())) => Some(check("preload library", Status::Ok, "loads into programs (threads can be pinned at birth)", None)),
        Some(Err(e)) => Some(check(
            "preload library",
            Status::Missing,
            format!("does not load: {e}"),
            Some("unset AUTOPIN_PRELOAD if it names another file; a static program cannot load it (autopin then pins by polling)"),
        )),
        None => None,
    }
}

/// Whether the decision store opens (when it was tried).
fn memory(tried: &TriedHere) -> Option<Check> {
    match &tried.memory {
        Some(Ok(what)) => Some(check(
            "remembered decisions",
            Status::Ok,
            what.clone(),
            None,
        )),
        Some(Err(e)) => Some(check(
            "remembered decisions",
            Status::Warn,
            e.clone(),
            Some("AUTOPIN_MEMORY=PATH names another file; AUTOPIN_MEMORY=off turns memory off"),
        )),
        None => None,
    }
}

/// Whether the machine's kept read (what `run` starts from) is the machine.
fn kept_machine(tried: &TriedHere) -> Option<Check> {
    match &tried.machine {
        Some(Ok(what)) => Some(check("kept machine read", Status::Ok, what.clone(), None)),
        Some(Err(KeptReadFault::Differed(e))) => Some(check(
            "kept machine read",
            Status::Warn,
            e.clone(),
            Some("runs before this one started from a read that was not the machine: AUTOPIN_CACHE=off reads it afresh at every run; please report what changed (docs/topology.md, Read once per boot)"),
        )),
        Some(Err(KeptReadFault::NotKept(e))) => Some(check(
            "kept machine read",
            Status::Warn,
            e.clone(),
            Some("every run reads the machine afresh: point AUTOPIN_CACHE at a directory of yours closed to others (or leave it unset), or set AUTOPIN_CACHE=off to say so"),
        )),
        None => None,
    }
}

/// The checks as lines: status, name, what was found, and the fix under it.
pub fn render(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut s = String::new();
    for c in checks {
        s.push_str(&format!(
            "{:<7}  {:<width$}  {}\n",
            c.status.word(),
            c.name,
            c.found
        ));
        if let Some(f) = &c.fix {
            s.push_str(&format!("{:<7}  {:<width$}  fix: {f}\n", "", ""));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_topology::CpuSet;

    fn facts() -> Facts {
        Facts {
            pmus: vec!["cpu".into()],
            paranoid: Some(2),
            root_user: false,
            rapl: Rapl::Readable(1),
            numa_nodes: 2,
            numa_balancing: Some(0),
            cpu_quota: None,
            online: CpuSet::from_cpus(0..4),
            allowed: CpuSet::from_cpus(0..4),
            smt_active: Some(true),
            busy: vec![(0, 0.1), (1, 0.0), (2, 0.0), (3, 0.0)],
        }
    }

    fn status(cs: &[Check], name: &str) -> Status {
        cs.iter().find(|c| c.name == name).unwrap().status
    }

    #[test]
    fn a_healthy_machine_has_nothing_to_fix() {
        let cs = checks(&facts(), &|_| None, &TriedHere::default());
        assert!(cs.iter().all(|c| c.fix.is_none()), "{cs:?}");
        assert_eq!(status(&cs, "hardware counters"), Status::Ok);
    }

    #[test]
    fn each_problem_has_its_fix() {
        let mut f = facts();
        f.pmus.clear();
        f.paranoid = Some(3);
        f.numa_balancing = Some(1);
        f.cpu_quota = Some((150_000, 100_000));
        f.busy[2].1 = 0.97;
        let env = |k: &str| (k == "SLURM_JOB_ID").then(|| "77".to_string());
        let cs = checks(
            &f,
            &env,
            &TriedHere {
                preload: Some(Err("ld.so: bad ELF".into())),
                memory: None,
                machine: Some(Err(KeptReadFault::Differed(
                    "machine-x.json differed from a fresh read".into(),
                ))),
            },
        );
        for (name, st, fix) in [
            ("hardware counters", Status::Missing, "-cpu host"),
            (
                "perf_event_paranoid",
                Status::Missing,
                "perf_event_paranoid=2",
            ),
            ("NUMA", Status::Warn, "numa_balancing=0"),
            ("CPU quota (cgroup)", Status::Warn, "OMP_NUM_THREADS=1"),
            ("busy CPUs now", Status::Warn, "autopin stat"),
            ("preload library", Status::Missing, "AUTOPIN_PRELOAD"),
            ("kept machine read", Status::Warn, "AUTOPIN_CACHE=off"),
        ] {
            let c = cs.iter().find(|c| c.name == name).unwrap();
            assert_eq!(c.status, st, "{c:?}");
            assert!(c.fix.as_deref().unwrap_or("").contains(fix), "{c:?}");
        }
        let launcher = cs.iter().find(|c| c.name == "launcher").unwrap();
        assert!(launcher.found.contains("Slurm job 77"), "{launcher:?}");
        let text = render(&cs);
        assert!(text.contains("missing  hardware counters"), "{text}");
    }

    #[test]
    fn a_kept_read_that_cannot_be_made_is_not_called_a_wrong_one() {
        let tried = TriedHere {
            machine: Some(Err(KeptReadFault::NotKept(
                "/x/machine-h-1.json: cannot keep the read: Permission denied".into(),
            ))),
            ..TriedHere::default()
        };
        let c = kept_machine(&tried).unwrap();
        assert_eq!(c.status, Status::Warn);
        let fix = c.fix.unwrap();
        assert!(
            fix.contains("AUTOPIN_CACHE") && !fix.contains("not the machine"),
            "{fix}"
        );
    }
}
