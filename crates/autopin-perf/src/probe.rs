//! Can we count here? Reads `kernel.perf_event_paranoid` and our privileges, tries the
//! events, and turns failures into messages that name the cause, the fix and a fallback
//! objective — never a silent zero.
//!
//! Paranoid levels (perf_event_open(2)): -1 no restrictions; 0 allows per-CPU (system-wide)
//! counting; 1 user+kernel of own processes; 2 user space of own processes only; 3 (Debian,
//! Ubuntu patches) forbids perf entirely for unprivileged users. Root, CAP_PERFMON (38) or
//! CAP_SYS_ADMIN (21) bypass all levels.

use crate::scope::Target;
use autopin_objective::EventSpec;
use autopin_objective::Sysfs;
use autopin_objective::{PerfError, Unavailable};
use std::io;

/// What decides whether an open is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenContext {
    /// `kernel.perf_event_paranoid`, if readable.
    pub paranoid: Option<i32>,
    /// Effective uid 0, CAP_PERFMON or CAP_SYS_ADMIN.
    pub privileged: bool,
    /// `/proc/cpuinfo` has the `hypervisor` flag.
    pub in_vm: bool,
}

impl OpenContext {
    pub fn current() -> OpenContext {
        OpenContext::read(&Sysfs::system())
    }

    /// Read paranoid level, privileges (`proc/self/status`) and VM flag under `sysfs`'s root.
    pub fn read(sysfs: &Sysfs) -> OpenContext {
        let paranoid = std::fs::read_to_string(sysfs.paranoid_path())
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let status = std::fs::read_to_string(sysfs.path("proc/self/status")).unwrap_or_default();
        let privileged = privileged_from_status(&status);
        let in_vm = std::fs::read_to_string(sysfs.path("proc/cpuinfo"))
            .map(|s| {
                s.lines()
                    .filter(|l| l.starts_with("flags"))
                    .any(|l| l.split_whitespace().any(|w| w == "hypervisor"))
            })
            .unwrap_or(false);
        OpenContext {
            paranoid,
            privileged,
            in_vm,
        }
    }

    /// Would the kernel refuse every perf event to us, whatever we try?
    pub fn forbids_all(&self) -> bool {
        !self.privileged && self.paranoid.is_some_and(|p| p >= 3)
    }

    /// Is per-CPU (system-wide) counting allowed?
    pub fn allows_per_cpu(&self) -> bool {
        self.privileged || self.paranoid.is_some_and(|p| p <= 0)
    }

    fn paranoid_text(&self) -> String {
        match self.paranoid {
            Some(p) => format!("kernel.perf_event_paranoid is {p}"),
            None => "kernel.perf_event_paranoid is unreadable".into(),
        }
    }
}

/// Parse `Uid:` and `CapEff:` lines of `/proc/<pid>/status`.
pub fn privileged_from_status(status: &str) -> bool {
    let mut root = false;
    let mut caps = 0u64;
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix("Uid:") {
            // real, effective, saved, fs
            root = rest.split_whitespace().nth(1) == Some("0");
        } else if let Some(rest) = line.strip_prefix("CapEff:") {
            caps = u64::from_str_radix(rest.trim(), 16).unwrap_or(0);
        }
    }
    const CAP_SYS_ADMIN: u64 = 21;
    const CAP_PERFMON: u64 = 38;
    root || caps & (1 << CAP_SYS_ADMIN) != 0 || caps & (1 << CAP_PERFMON) != 0
}

fn no_hw(reason: String) -> Unavailable {
    Unavailable {
        reason,
        hint: Some(
            "on a KVM guest expose the host PMU (e.g. qemu -cpu host,pmu=on; libvirt <pmu state='on'/>)".into(),
        ),
        fallback: Some("task-clock".into()),
    }
}

fn forbidden(ctx: &OpenContext, per_cpu: bool) -> Unavailable {
    let (level, what) = if per_cpu {
        ("0", "per-CPU counting")
    } else if ctx.paranoid.is_some_and(|p| p >= 3) {
        ("2", "any perf event for unprivileged users")
    } else {
        ("1", "this event")
    };
    Unavailable {
        reason: format!(
            "perf counters are not permitted: {} which forbids {what}",
            ctx.paranoid_text()
        ),
        hint: Some(format!(
            "sysctl kernel.perf_event_paranoid={level} (or run as root / grant CAP_PERFMON)"
        )),
        fallback: Some(if per_cpu {
            "the per-thread counting mode".into()
        } else if ctx.forbids_all() {
            "heartbeat".into()
        } else {
            "task-clock".into()
        }),
    }
}

/// Turn a failed `perf_event_open` into an actionable error.
pub fn classify_open_error(
    e: &io::Error,
    spec: &EventSpec,
    target: Target,
    ctx: &OpenContext,
) -> PerfError {
    let code = e.raw_os_error().unwrap_or(0);
    match code {
        libc::ESRCH => PerfError::io(format!("counting {spec} on {target}: the thread no longer exists"), io::Error::from_raw_os_error(code)),
        libc::EACCES | libc::EPERM => PerfError::Unavailable(forbidden(ctx, matches!(target, Target::Cpu(_)))),
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV if spec.needs_hardware() => PerfError::Unavailable(no_hw(format!(
            "hardware counters are not available: the kernel cannot count {spec} ({e}){}",
            if ctx.in_vm { "; this is a virtual machine without a virtual PMU" } else { "" }
        ))),
        libc::EINVAL => PerfError::Unavailable(Unavailable {
            reason: format!("the kernel rejected {spec} on {target} (invalid argument): this PMU does not support that encoding or privilege filter (try another modifier, e.g. :uk)"),
            hint: None,
            fallback: Some("task-clock".into()),
        }),
        _ => PerfError::io(format!("opening counter {spec} on {target}"), io::Error::from_raw_os_error(code.max(1))),
    }
}

/// The operations a probe performs, behind a trait so tests can simulate any kernel.
pub trait ProbeOps {
    /// Count `spec` on this thread around a short busy loop; return the scaled count.
    fn count_self(&self, spec: &EventSpec) -> io::Result<u64>;
    /// Open (and close) `spec` on one CPU for all tasks.
    fn open_cpu(&self, spec: &EventSpec, cpu: usize) -> io::Result<()>;
}

/// What this machine lets us count.
#[derive(Debug, Clone)]
pub struct Availability {
    pub ctx: OpenContext,
    /// Hardware counters (`instructions:u` on ourselves): the count seen in the test loop.
    pub hardware: Result<u64, Unavailable>,
    /// Software counters (`task-clock`).
    pub software: Result<(), Unavailable>,
    /// Per-CPU counting (`pid=-1, cpu=0`).
    pub per_cpu: Result<(), Unavailable>,
}

/// Probe with an injected sysfs root (for the paranoid file, privileges) and operations.
pub fn probe_with(sysfs: &Sysfs, ops: &dyn ProbeOps) -> Availability {
    let ctx = OpenContext::read(sysfs);
    let hardware = probe_hardware(&ctx, sysfs, ops);
    let software = probe_software(&ctx, sysfs, ops);
    let per_cpu = if !ctx.allows_per_cpu() {
        Err(forbidden(&ctx, true))
    } else {
        let spec = if hardware.is_ok() {
            generic("instructions:u", sysfs)
        } else {
            generic("task-clock", sysfs)
        };
        ops.open_cpu(&spec, 0).map_err(|e| {
            match classify_open_error(&e, &spec, Target::Cpu(0), &ctx) {
                PerfError::Unavailable(u) => u,
                other => Unavailable {
                    reason: format!("per-CPU counting failed: {other}"),
                    hint: None,
                    fallback: Some("the per-thread counting mode".into()),
                },
            }
        })
    };
    Availability {
        ctx,
        hardware,
        software,
        per_cpu,
    }
}

/// Whether all of `events` can be counted here, probing only the kind of counter they
/// need (hardware or software), and whether this is a virtual machine. Cheaper than
/// [`probe_with`] on a machine without a PMU: the failed hardware open is all a hardware
/// event costs, whereas the first counter a quiet kernel opens makes the system call wait
/// 5–20 ms while perf's scheduler hooks are switched on, a wait `autopin run` would add
/// to every program's start.
pub fn check_events_with(
    sysfs: &Sysfs,
    ops: &dyn ProbeOps,
    events: &[EventSpec],
) -> (Result<(), PerfError>, OpenContext) {
    let ctx = OpenContext::read(sysfs);
    let (mut hardware, mut software) = (None, None);
    let result = first_refused(events, |needs_hardware| {
        if needs_hardware {
            hardware
                .get_or_insert_with(|| probe_hardware(&ctx, sysfs, ops).map(|_| ()))
                .clone()
        } else {
            software
                .get_or_insert_with(|| probe_software(&ctx, sysfs, ops))
                .clone()
        }
    });
    (result, ctx)
}

/// The first of `events` that cannot be counted, as the error, given whether hardware
/// (`true`) and software (`false`) counters can be.
fn first_refused(
    events: &[EventSpec],
    mut can_count: impl FnMut(bool) -> Result<(), Unavailable>,
) -> Result<(), PerfError> {
    for e in events {
        if let Err(mut u) = can_count(e.needs_hardware()) {
            u.reason = format!("cannot count {e}: {}", u.reason);
            return Err(PerfError::Unavailable(u));
        }
    }
    Ok(())
}

/// A generic event (these resolve without sysfs, so they cannot fail to parse).
fn generic(name: &str, sysfs: &Sysfs) -> EventSpec {
    EventSpec::parse_with(name, sysfs).expect("generic event")
}

/// Hardware counters: `instructions:u` counted on this thread around a busy loop.
fn probe_hardware(
    ctx: &OpenContext,
    sysfs: &Sysfs,
    ops: &dyn ProbeOps,
) -> Result<u64, Unavailable> {
    if ctx.forbids_all() {
        return Err(forbidden(ctx, false));
    }
    let instr = generic("instructions:u", sysfs);
    let me = Target::Thread(rustix::thread::gettid().as_raw_pid());
    match ops.count_self(&instr) {
        Ok(0) => Err(no_hw(format!(
            "hardware counters opened but counted 0 instructions in a busy loop{}",
            if ctx.in_vm {
                " (a virtual PMU that does not run)"
            } else {
                ""
            }
        ))),
        Ok(n) => Ok(n),
        Err(e) => Err(match classify_open_error(&e, &instr, me, ctx) {
            PerfError::Unavailable(u) => u,
            other => no_hw(format!("hardware counters are not available: {other}")),
        }),
    }
}

/// Software counters: `task-clock` counted on this thread.
fn probe_software(ctx: &OpenContext, sysfs: &Sysfs, ops: &dyn ProbeOps) -> Result<(), Unavailable> {
    if ctx.forbids_all() {
        return Err(forbidden(ctx, false));
    }
    let clock = generic("task-clock", sysfs);
    let me = Target::Thread(rustix::thread::gettid().as_raw_pid());
    match ops.count_self(&clock) {
        Ok(_) => Ok(()),
        Err(e) => Err(match classify_open_error(&e, &clock, me, ctx) {
            PerfError::Unavailable(u) => u,
            other => Unavailable {
                reason: format!("software counters are not available: {other}"),
                hint: None,
                fallback: Some("heartbeat".into()),
            },
        }),
    }
}

impl Availability {
    /// Can all of `events` be counted? The error names the cause, fix and fallback.
    pub fn check(&self, events: &[EventSpec]) -> Result<(), PerfError> {
        first_refused(events, |needs_hardware| {
            if needs_hardware {
                self.hardware.clone().map(|_| ())
            } else {
                self.software.clone()
            }
        })
    }

    /// Human summary, one fact per line.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut v = vec![format!(
            "{}, privileged: {}, virtual machine: {}",
            self.ctx.paranoid_text(),
            if self.ctx.privileged { "yes" } else { "no" },
            if self.ctx.in_vm { "yes" } else { "no" }
        )];
        v.push(match &self.hardware {
            Ok(n) => format!("hardware counters: available ({n} instructions:u in the probe loop)"),
            Err(u) => format!("hardware counters: {u}"),
        });
        v.push(match &self.software {
            Ok(()) => "software counters: available".into(),
            Err(u) => format!("software counters: {u}"),
        });
        v.push(match &self.per_cpu {
            Ok(()) => "per-CPU counting: allowed".into(),
            Err(u) => format!("per-CPU counting: {u}"),
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_objective::sysfs::fake;
    use std::cell::Cell;

    struct Ops {
        hw: io::Result<u64>,
        cpu_ok: bool,
        calls: Cell<usize>,
    }
    impl ProbeOps for Ops {
        fn count_self(&self, spec: &EventSpec) -> io::Result<u64> {
            self.calls.set(self.calls.get() + 1);
            if spec.needs_hardware() {
                match &self.hw {
                    Ok(n) => Ok(*n),
                    Err(e) => Err(io::Error::from_raw_os_error(e.raw_os_error().unwrap())),
                }
            } else {
                Ok(1000)
            }
        }
        fn open_cpu(&self, _: &EventSpec, _: usize) -> io::Result<()> {
            if self.cpu_ok {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(libc::EACCES))
            }
        }
    }

    fn ops(hw: io::Result<u64>) -> Ops {
        Ops {
            hw,
            cpu_ok: true,
            calls: Cell::new(0),
        }
    }

    #[test]
    fn paranoid_3_forbids_everything_with_clear_message() {
        let d = tempfile::tempdir().unwrap();
        fake::populate(d.path(), 3);
        let o = ops(Ok(5000));
        let a = probe_with(&Sysfs::at(d.path()), &o);
        assert_eq!(
            o.calls.get(),
            0,
            "no open is attempted when paranoid=3 and unprivileged"
        );
        let u = a.hardware.clone().unwrap_err();
        let msg = u.to_string();
        assert!(msg.contains("kernel.perf_event_paranoid is 3"), "{msg}");
        assert!(msg.contains("sysctl kernel.perf_event_paranoid="), "{msg}");
        assert!(msg.contains("CAP_PERFMON"), "{msg}");
        assert_eq!(u.fallback.as_deref(), Some("heartbeat"));
        assert!(a.software.is_err());
        assert!(a.per_cpu.is_err());
        let instr = EventSpec::parse_with("instructions", &Sysfs::at(d.path())).unwrap();
        let err = a.check(&[instr]).unwrap_err();
        assert_eq!(err.fallback(), Some("heartbeat"));
        assert!(err.to_string().contains("cannot count instructions:u"));
    }

    #[test]
    fn root_bypasses_paranoid_3() {
        let d = tempfile::tempdir().unwrap();
        fake::populate(d.path(), 3);
        fake::write(
            d.path(),
            "proc/self/status",
            "Name:\tx\nUid:\t0\t0\t0\t0\nCapEff:\t0000000000000000\n",
        );
        let a = probe_with(&Sysfs::at(d.path()), &ops(Ok(5000)));
        assert_eq!(a.hardware.clone().unwrap(), 5000);
        assert!(a.per_cpu.is_ok());
    }

    #[test]
    fn cap_perfmon_counts_as_privileged() {
        assert!(privileged_from_status(
            "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000004000000000\n"
        ));
        assert!(!privileged_from_status(
            "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n"
        ));
        assert!(privileged_from_status("Uid:\t1000\t0\t1000\t1000\n"));
    }

    #[test]
    fn no_pmu_in_vm_suggests_task_clock() {
        let d = tempfile::tempdir().unwrap();
        fake::populate(d.path(), 2);
        fake::write(d.path(), "proc/cpuinfo", "flags\t: fpu sse hypervisor\n");
        let a = probe_with(
            &Sysfs::at(d.path()),
            &ops(Err(io::Error::from_raw_os_error(libc::ENOENT))),
        );
        let u = a.hardware.clone().unwrap_err();
        assert!(
            u.reason.contains("hardware counters are not available"),
            "{u}"
        );
        assert!(u.reason.contains("virtual machine"), "{u}");
        assert_eq!(u.fallback.as_deref(), Some("task-clock"));
        assert!(a.software.is_ok());
        // paranoid 2, unprivileged: per-CPU refused without trying, with the right sysctl.
        let pc = a.per_cpu.clone().unwrap_err().to_string();
        assert!(pc.contains("kernel.perf_event_paranoid=0"), "{pc}");
        let tc = EventSpec::parse_with("task-clock", &Sysfs::at(d.path())).unwrap();
        assert!(a.check(&[tc]).is_ok());
    }

    /// The run's check opens only the kind of counter its events need: on a machine
    /// without a PMU, a hardware event costs its one failed open (no software counter is
    /// opened, which would make the kernel switch perf's hooks on), and the answer is the
    /// same as the full probe's.
    #[test]
    fn the_events_check_opens_only_what_the_events_need() {
        let d = tempfile::tempdir().unwrap();
        fake::populate(d.path(), 2);
        let sysfs = Sysfs::at(d.path());
        let instr = EventSpec::parse_with("instructions:u", &sysfs).unwrap();
        let clock = EventSpec::parse_with("task-clock", &sysfs).unwrap();
        let no_pmu = || ops(Err(io::Error::from_raw_os_error(libc::ENOENT)));
        let o = no_pmu();
        let (r, _) = check_events_with(&sysfs, &o, std::slice::from_ref(&instr));
        assert_eq!(o.calls.get(), 1);
        let full = probe_with(&sysfs, &no_pmu()).check(std::slice::from_ref(&instr));
        assert_eq!(r.unwrap_err().to_string(), full.unwrap_err().to_string());
        let o = no_pmu();
        let (r, _) = check_events_with(&sysfs, &o, &[clock.clone(), clock.clone()]);
        assert!(r.is_ok());
        assert_eq!(o.calls.get(), 1, "one software probe for both events");
        let o = ops(Ok(1000));
        let (r, _) = check_events_with(&sysfs, &o, &[instr, clock]);
        assert!(r.is_ok());
        assert_eq!(o.calls.get(), 2);
    }

    #[test]
    fn zero_count_is_not_silent() {
        let d = tempfile::tempdir().unwrap();
        fake::populate(d.path(), 1);
        let a = probe_with(&Sysfs::at(d.path()), &ops(Ok(0)));
        assert!(a
            .hardware
            .unwrap_err()
            .reason
            .contains("counted 0 instructions"));
    }

    #[test]
    fn eacces_maps_to_sysctl_hint() {
        let ctx = OpenContext {
            paranoid: Some(2),
            privileged: false,
            in_vm: false,
        };
        let spec = EventSpec::parse_with("cycles:k", &Sysfs::at("/nonexistent")).unwrap();
        let e = classify_open_error(
            &io::Error::from_raw_os_error(libc::EACCES),
            &spec,
            Target::Thread(5),
            &ctx,
        );
        let m = e.to_string();
        assert!(m.contains("sysctl kernel.perf_event_paranoid=1"), "{m}");
        let e = classify_open_error(
            &io::Error::from_raw_os_error(libc::ESRCH),
            &spec,
            Target::Thread(5),
            &ctx,
        );
        assert!(e.to_string().contains("no longer exists"));
    }
}
