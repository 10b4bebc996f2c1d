//! Energy from RAPL, for the `energy`/`power` objectives: the powercap sysfs files
//! (`/sys/class/powercap/intel-rapl:N/energy_uj`, also used by AMD) or perf's `power` PMU
//! (`power/energy-pkg/`). Readings are cumulative joules since the source was opened, with the
//! hardware counters' wrap-around undone.

use crate::counters::{CounterOptions, CounterSource, Grouping, PerfCounterSource, Target};
use autopin_objective::EventSpec;
use autopin_objective::Sysfs;
use autopin_objective::{PerfError, Unavailable};
use std::path::PathBuf;

pub trait EnergySource {
    /// Joules consumed since the source was opened.
    fn read_joules(&mut self) -> Result<f64, PerfError>;
    /// Where the numbers come from, for reports.
    fn describe(&self) -> String;
}

#[derive(Debug)]
struct Domain {
    name: String,
    energy: PathBuf,
    max_range_uj: u64,
    last_uj: u64,
    total_uj: u128,
}

/// Package-level powercap RAPL domains, summed. Sub-domains (core, uncore, dram under a
/// package) are inside their package's number and `psys` covers the whole platform, so
/// neither is added — that would count the same joules twice.
#[derive(Debug)]
pub struct RaplPowercap {
    domains: Vec<Domain>,
}

fn read_u64(p: &PathBuf) -> Result<u64, PerfError> {
    let text = std::fs::read_to_string(p).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
            " (energy_uj is readable by root only since Linux 5.10)"
        } else {
            ""
        };
        PerfError::io(format!("reading {}{hint}", p.display()), e)
    })?;
    text.trim().parse().map_err(|_| PerfError::BadFile {
        path: p.clone(),
        msg: format!("expected a number of microjoules, found '{}'", text.trim()),
    })
}

impl RaplPowercap {
    pub fn open(sysfs: &Sysfs) -> Result<RaplPowercap, PerfError> {
        let base = sysfs.path("sys/class/powercap");
        let mut names: Vec<String> = std::fs::read_dir(&base)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| {
                        n.strip_prefix("intel-rapl:").is_some_and(|rest| {
                            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        let mut domains = Vec::new();
        for n in names {
            let dir = base.join(&n);
            let name = std::fs::read_to_string(dir.join("name"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| n.clone());
            if name == "psys" {
                continue;
            }
            let energy = dir.join("energy_uj");
            let max_range_uj = read_u64(&dir.join("max_energy_range_uj"))?;
            let last_uj = read_u64(&energy)?;
            domains.push(Domain {
                name,
                energy,
                max_range_uj,
                last_uj,
                total_uj: 0,
            });
        }
        if domains.is_empty() {
            return Err(PerfError::Unavailable(Unavailable {
                reason: format!("no RAPL package domains under {}", base.display()),
                hint: None,
                fallback: None,
            }));
        }
        Ok(RaplPowercap { domains })
    }
}

impl EnergySource for RaplPowercap {
    fn read_joules(&mut self) -> Result<f64, PerfError> {
        let mut total = 0u128;
        for d in &mut self.domains {
            let now = read_u64(&d.energy)?;
            let delta = if now >= d.last_uj {
                now - d.last_uj
            } else {
                // The counter wrapped at max_energy_range_uj.
                d.max_range_uj.saturating_sub(d.last_uj) + now
            };
            d.total_uj += delta as u128;
            d.last_uj = now;
            total += d.total_uj;
        }
        Ok(total as f64 / 1e6)
    }

    fn describe(&self) -> String {
        let names: Vec<&str> = self.domains.iter().map(|d| d.name.as_str()).collect();
        format!("RAPL via powercap sysfs ({})", names.join(", "))
    }
}

/// RAPL through perf's `power` PMU: `power/energy-pkg/` on one CPU per package (the PMU's
/// cpumask). Needs per-CPU counting rights (root, CAP_PERFMON or paranoid <= 0).
pub struct PerfEnergy {
    src: PerfCounterSource,
    scale: f64,
    cpus: Vec<usize>,
}

impl PerfEnergy {
    pub fn open(sysfs: &Sysfs) -> Result<PerfEnergy, PerfError> {
        let spec = EventSpec::parse_with("power/energy-pkg/", sysfs)?;
        let cpus = sysfs.pmu_cpumask("power").unwrap_or_else(|| vec![0]);
        let mut src = PerfCounterSource::new(
            vec![spec.clone()],
            CounterOptions {
                grouping: Grouping::Independent,
                cgroup: None,
            },
        )?;
        for &c in &cpus {
            src.open(Target::Cpu(c))?;
        }
        Ok(PerfEnergy {
            src,
            scale: spec.scale,
            cpus,
        })
    }
}

impl EnergySource for PerfEnergy {
    fn read_joules(&mut self) -> Result<f64, PerfError> {
        let mut j = 0.0;
        for &c in &self.cpus {
            j += self.src.read(Target::Cpu(c))?[0].raw as f64 * self.scale;
        }
        Ok(j)
    }

    fn describe(&self) -> String {
        let cpus: Vec<String> = self.cpus.iter().map(usize::to_string).collect();
        format!("RAPL via perf power/energy-pkg/ on CPUs {}", cpus.join(","))
    }
}

/// The first energy source that works here, or why none does.
pub fn open_energy(sysfs: &Sysfs) -> Result<Box<dyn EnergySource>, PerfError> {
    let powercap = match RaplPowercap::open(sysfs) {
        Ok(r) => return Ok(Box::new(r)),
        Err(e) => e,
    };
    let pmu = match PerfEnergy::open(sysfs) {
        Ok(p) => return Ok(Box::new(p)),
        Err(e) => e,
    };
    let pmu_why = if !sysfs.has_pmu("power") {
        "no power PMU".to_string()
    } else if sysfs.event_alias("power", "energy-pkg").is_none() {
        format!(
            "the power PMU has no energy-pkg event ({} is empty or lacks it — typical in a VM)",
            sysfs.pmu_dir("power").join("events").display()
        )
    } else {
        format!("the power PMU failed: {pmu}")
    };
    let cap_why = match &powercap {
        PerfError::Unavailable(_) => format!(
            "no {}",
            sysfs.path("sys/class/powercap/intel-rapl").display()
        ),
        other => other.to_string(),
    };
    Err(PerfError::Unavailable(Unavailable {
        reason: format!("energy is not available on this machine: {cap_why} and {pmu_why}"),
        hint: Some(
            "RAPL needs an Intel or AMD host (not a VM) with the intel_rapl_common / rapl modules"
                .into(),
        ),
        fallback: Some("instructions:u".into()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_objective::sysfs::fake;

    fn domain(root: &std::path::Path, dir: &str, name: &str, uj: u64, max: u64) {
        fake::write(root, &format!("sys/class/powercap/{dir}/name"), name);
        fake::write(
            root,
            &format!("sys/class/powercap/{dir}/energy_uj"),
            &uj.to_string(),
        );
        fake::write(
            root,
            &format!("sys/class/powercap/{dir}/max_energy_range_uj"),
            &max.to_string(),
        );
    }

    #[test]
    fn powercap_sums_packages_and_handles_wrap() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        domain(r, "intel-rapl:0", "package-0", 1_000_000, 10_000_000);
        domain(r, "intel-rapl:1", "package-1", 9_000_000, 10_000_000);
        domain(r, "intel-rapl:0:0", "core", 500, 10_000_000);
        domain(r, "intel-rapl:2", "psys", 42, 10_000_000);
        let mut e = RaplPowercap::open(&Sysfs::at(r)).unwrap();
        assert_eq!(
            e.describe(),
            "RAPL via powercap sysfs (package-0, package-1)"
        );
        assert_eq!(e.read_joules().unwrap(), 0.0);
        domain(r, "intel-rapl:0", "package-0", 3_000_000, 10_000_000);
        // package-1 wraps: 9 J → 10 J (max) → 0.5 J = 1.5 J consumed.
        domain(r, "intel-rapl:1", "package-1", 500_000, 10_000_000);
        domain(r, "intel-rapl:0:0", "core", 9_999_999, 10_000_000);
        let j = e.read_joules().unwrap();
        assert!((j - 3.5).abs() < 1e-9, "{j}");
        domain(r, "intel-rapl:1", "package-1", 1_500_000, 10_000_000);
        assert!((e.read_joules().unwrap() - 4.5).abs() < 1e-9);
    }

    #[test]
    fn nothing_available_says_so() {
        let d = tempfile::tempdir().unwrap();
        let sys = Sysfs::at(d.path());
        let err = open_energy(&sys).err().unwrap().to_string();
        assert!(
            err.contains("energy is not available on this machine"),
            "{err}"
        );
        assert!(
            err.contains("sys/class/powercap/intel-rapl") && err.contains("no power PMU"),
            "{err}"
        );
        // A power PMU without energy events (this project's VMs).
        fake::write(d.path(), "sys/bus/event_source/devices/power/type", "9");
        fake::write(
            d.path(),
            "sys/bus/event_source/devices/power/format/event",
            "config:0-7",
        );
        let err = open_energy(&sys).err().unwrap().to_string();
        assert!(err.contains("no energy-pkg event"), "{err}");
    }

    #[test]
    fn bad_powercap_file_is_named() {
        let d = tempfile::tempdir().unwrap();
        domain(d.path(), "intel-rapl:0", "package-0", 1, 10);
        fake::write(
            d.path(),
            "sys/class/powercap/intel-rapl:0/energy_uj",
            "lots",
        );
        let err = RaplPowercap::open(&Sysfs::at(d.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("energy_uj") && err.contains("'lots'"), "{err}");
    }
}
