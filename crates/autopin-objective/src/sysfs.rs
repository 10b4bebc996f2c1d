//! Read-only view of the kernel's perf description files, rooted at an injectable directory
//! so tests can hand in a fake tree. Paths mirror the real ones under `root`:
//! `sys/bus/event_source/devices/<pmu>/{type,format/<field>,events/<name>[.scale|.unit],cpumask}`,
//! `proc/sys/kernel/perf_event_paranoid`, `sys/class/powercap/intel-rapl:*`.

use crate::error::PerfError;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sysfs {
    root: PathBuf,
}

/// Which `perf_event_attr` word a format field writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigWord {
    Config,
    Config1,
    Config2,
    Config3,
}

/// A PMU format field such as `config:0-7` or `config1:0-7,32-35`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldFormat {
    pub word: ConfigWord,
    /// Inclusive bit ranges, filled from the value's low bits first.
    pub ranges: Vec<(u32, u32)>,
}

impl FieldFormat {
    /// Parse the content of a `format/<field>` file.
    pub fn parse(text: &str) -> Option<FieldFormat> {
        let text = text.trim();
        let (word, bits) = text.split_once(':')?;
        let word = match word {
            "config" => ConfigWord::Config,
            "config1" => ConfigWord::Config1,
            "config2" => ConfigWord::Config2,
            "config3" => ConfigWord::Config3,
            _ => return None,
        };
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
                None => {
                    let b: u32 = part.trim().parse().ok()?;
                    (b, b)
                }
            };
            if lo > hi || hi > 63 {
                return None;
            }
            ranges.push((lo, hi));
        }
        Some(FieldFormat { word, ranges })
    }

    pub fn width(&self) -> u32 {
        self.ranges.iter().map(|(lo, hi)| hi - lo + 1).sum()
    }

    /// Scatter `value` into the field's bits. `None` if the value does not fit.
    pub fn encode(&self, value: u64) -> Option<u64> {
        let width = self.width();
        if width < 64 && value >> width != 0 {
            return None;
        }
        let mut out = 0u64;
        let mut v = value;
        for &(lo, hi) in &self.ranges {
            let n = hi - lo + 1;
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            out |= (v & mask) << lo;
            v = if n == 64 { 0 } else { v >> n };
        }
        Some(out)
    }
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs::system()
    }
}

impl Sysfs {
    /// The running system (`/`).
    pub fn system() -> Sysfs {
        Sysfs {
            root: PathBuf::from("/"),
        }
    }

    /// A tree rooted elsewhere (tests, dumps).
    pub fn at(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    pub fn pmu_dir(&self, pmu: &str) -> PathBuf {
        self.path("sys/bus/event_source/devices").join(pmu)
    }

    pub fn paranoid_path(&self) -> PathBuf {
        self.path("proc/sys/kernel/perf_event_paranoid")
    }

    /// Names of all PMUs, sorted.
    pub fn pmus(&self) -> Vec<String> {
        list_dir(&self.path("sys/bus/event_source/devices"))
    }

    pub fn has_pmu(&self, pmu: &str) -> bool {
        self.pmu_dir(pmu).join("type").is_file()
    }

    /// The `perf_event_attr.type` of a PMU.
    pub fn pmu_type(&self, pmu: &str) -> Result<u32, PerfError> {
        let p = self.pmu_dir(pmu).join("type");
        let text = std::fs::read_to_string(&p)
            .map_err(|e| PerfError::io(format!("reading PMU type {}", p.display()), e))?;
        text.trim().parse().map_err(|_| PerfError::BadFile {
            path: p,
            msg: format!("expected a number, found '{}'", text.trim()),
        })
    }

    pub fn format_field(&self, pmu: &str, field: &str) -> Result<Option<FieldFormat>, PerfError> {
        let p = self.pmu_dir(pmu).join("format").join(field);
        match std::fs::read_to_string(&p) {
            Ok(text) => FieldFormat::parse(&text)
                .map(Some)
                .ok_or_else(|| PerfError::BadFile {
                    path: p,
                    msg: format!(
                        "expected a format like 'config:0-7', found '{}'",
                        text.trim()
                    ),
                }),
            Err(_) => Ok(None),
        }
    }

    pub fn format_fields(&self, pmu: &str) -> Vec<String> {
        list_dir(&self.pmu_dir(pmu).join("format"))
    }

    /// Content of `events/<name>` (e.g. `event=0xc0`), if that alias exists.
    pub fn event_alias(&self, pmu: &str, name: &str) -> Option<String> {
        if name.contains('/') || name.contains('.') || name.is_empty() {
            return None;
        }
        std::fs::read_to_string(self.pmu_dir(pmu).join("events").join(name))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Event alias names of a PMU (without the `.scale`/`.unit`/... side files).
    pub fn event_names(&self, pmu: &str) -> Vec<String> {
        list_dir(&self.pmu_dir(pmu).join("events"))
            .into_iter()
            .filter(|n| !n.contains('.'))
            .collect()
    }

    pub fn event_scale(&self, pmu: &str, name: &str) -> Option<f64> {
        std::fs::read_to_string(
            self.pmu_dir(pmu)
                .join("events")
                .join(format!("{name}.scale")),
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
    }

    pub fn event_unit(&self, pmu: &str, name: &str) -> Option<String> {
        std::fs::read_to_string(
            self.pmu_dir(pmu)
                .join("events")
                .join(format!("{name}.unit")),
        )
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
    }

    /// CPUs a (system-wide) PMU wants events opened on, from its `cpumask` file.
    pub fn pmu_cpumask(&self, pmu: &str) -> Option<Vec<usize>> {
        let text = std::fs::read_to_string(self.pmu_dir(pmu).join("cpumask")).ok()?;
        parse_cpu_list(text.trim())
    }
}

/// Parse a Linux CPU list ("0-3,8").
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    if text.is_empty() {
        return Some(out);
    }
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

fn list_dir(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Build a fake sysfs tree for tests: an x86-like `cpu` PMU, a `power` PMU with
/// `energy-pkg`, and `software`. Public so other crates' tests can use it too.
pub mod fake {
    use std::path::Path;

    pub fn write(root: &Path, rel: &str, content: &str) {
        let p = root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create fake sysfs dir");
        }
        std::fs::write(&p, content).expect("write fake sysfs file");
    }

    /// Populate `root` with PMUs and a paranoid file holding `paranoid`.
    pub fn populate(root: &Path, paranoid: i32) {
        let d = "sys/bus/event_source/devices";
        write(root, &format!("{d}/cpu/type"), "4\n");
        write(root, &format!("{d}/cpu/format/event"), "config:0-7\n");
        write(root, &format!("{d}/cpu/format/umask"), "config:8-15\n");
        write(root, &format!("{d}/cpu/format/cmask"), "config:24-31\n");
        write(root, &format!("{d}/cpu/format/inv"), "config:23\n");
        write(root, &format!("{d}/cpu/format/edge"), "config:18\n");
        write(root, &format!("{d}/cpu/format/ldlat"), "config1:0-15\n");
        write(root, &format!("{d}/cpu/format/split"), "config2:0-3,8-11\n");
        write(
            root,
            &format!("{d}/cpu/events/instructions"),
            "event=0xc0\n",
        );
        write(
            root,
            &format!("{d}/cpu/events/cycles-t"),
            "event=0x3c,in_tx=1\n",
        );
        write(
            root,
            &format!("{d}/cpu/events/mem-loads"),
            "event=0xcd,umask=0x1,ldlat=3\n",
        );
        write(root, &format!("{d}/power/type"), "23\n");
        write(root, &format!("{d}/power/cpumask"), "0\n");
        write(root, &format!("{d}/power/format/event"), "config:0-7\n");
        write(
            root,
            &format!("{d}/power/events/energy-pkg"),
            "event=0x02\n",
        );
        write(
            root,
            &format!("{d}/power/events/energy-pkg.scale"),
            "2.3283064365386962890625e-10\n",
        );
        write(
            root,
            &format!("{d}/power/events/energy-pkg.unit"),
            "Joules\n",
        );
        write(root, &format!("{d}/software/type"), "1\n");
        write(
            root,
            "proc/sys/kernel/perf_event_paranoid",
            &format!("{paranoid}\n"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_format_parse_and_encode() {
        let f = FieldFormat::parse("config:0-7").unwrap();
        assert_eq!(f.encode(0xc0), Some(0xc0));
        assert_eq!(f.encode(0x100), None);
        let f = FieldFormat::parse("config:8-15").unwrap();
        assert_eq!(f.encode(0x01), Some(0x100));
        let f = FieldFormat::parse("config:23").unwrap();
        assert_eq!(f.encode(1), Some(1 << 23));
        assert_eq!(f.encode(2), None);
        // Split fields take low bits first.
        let f = FieldFormat::parse("config2:0-3,8-11").unwrap();
        assert_eq!(f.word, ConfigWord::Config2);
        assert_eq!(f.encode(0xab), Some(0xa0b));
        let f = FieldFormat::parse("config1:0-63").unwrap();
        assert_eq!(f.encode(u64::MAX), Some(u64::MAX));
        assert!(FieldFormat::parse("bogus:0-7").is_none());
        assert!(FieldFormat::parse("config:7-0").is_none());
        assert!(FieldFormat::parse("config:0-64").is_none());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
    }

    #[test]
    fn fake_tree_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        fake::populate(dir.path(), 2);
        let s = Sysfs::at(dir.path());
        assert_eq!(s.pmu_type("cpu").unwrap(), 4);
        assert_eq!(s.pmu_type("power").unwrap(), 23);
        assert!(s.pmu_type("nope").is_err());
        assert_eq!(
            s.event_alias("power", "energy-pkg").as_deref(),
            Some("event=0x02")
        );
        assert_eq!(
            s.event_unit("power", "energy-pkg").as_deref(),
            Some("Joules")
        );
        assert!(s.event_scale("power", "energy-pkg").unwrap() > 0.0);
        assert_eq!(s.event_names("power"), vec!["energy-pkg".to_string()]);
        assert_eq!(s.pmu_cpumask("power"), Some(vec![0]));
        assert_eq!(s.pmus(), vec!["cpu", "power", "software"]);
    }
}
