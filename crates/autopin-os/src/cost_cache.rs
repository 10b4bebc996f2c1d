//! The measured cost of counting, kept between runs. Measuring it (two threads
//! ping-ponging on one CPU, with and without counters) takes a quarter of a second before
//! the program may start; on a machine with a PMU every `autopin run` paid that, 13% of a
//! 2 s program. The cost belongs to the machine, its kernel and the events, so one
//! measurement serves every run there for a week.
//!
//! One small JSON file, `counting-cost.json`, in `$AUTOPIN_CACHE` (a directory; `off`
//! turns the cache off), else `$XDG_CACHE_HOME/autopin`, else `~/.cache/autopin`. A
//! file that cannot be read or written is measured around, never an error: it is a cache.

use autopin_objective::CountingCost;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How long a measurement is trusted: firmware, microcode and hypervisor settings can
/// change the cost without changing the kernel or the CPU model.
pub const MAX_AGE_S: f64 = 7.0 * 24.0 * 3600.0;

/// The cache file's name inside its directory.
const FILE: &str = "counting-cost.json";

/// One kept measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    cost: CountingCost,
    /// Unix time of the measurement.
    measured: f64,
}

/// The cache file of this user (None: turned off, or no home directory).
pub fn cache_file() -> Option<PathBuf> {
    cache_file_in(|k| std::env::var_os(k))
}

/// [`cache_file`] with the environment read through `env`.
fn cache_file_in(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var("AUTOPIN_CACHE") {
        return (dir.as_os_str() != "off").then(|| dir.join(FILE));
    }
    let base = var("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("autopin").join(FILE))
}

/// What a measurement is valid for: the events, the kernel, the CPU model and how many
/// CPUs the machine has (`proc_root` is normally `/proc`).
pub fn key(events: &[String], proc_root: &Path) -> String {
    let read = |p: &str| std::fs::read_to_string(proc_root.join(p)).unwrap_or_default();
    let cpuinfo = read("cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|x| x.1))
        .unwrap_or("")
        .trim()
        .to_string();
    let cpus = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    format!(
        "{} | kernel {} | {model} | {cpus} CPUs",
        events.join(","),
        read("sys/kernel/osrelease").trim()
    )
}

/// The kept measurement for `key` when there is one younger than [`MAX_AGE_S`] at `now`
/// (unix seconds), with `kept` saying where it came from.
pub fn get(file: &Path, key: &str, now: f64) -> Option<CountingCost> {
    let entries = read(file);
    let e = entries.get(key)?;
    let age = now - e.measured;
    if !(0.0..MAX_AGE_S).contains(&age) {
        return None;
    }
    let mut cost = e.cost.clone();
    cost.kept = Some(format!(
        "measured {} ago, kept in {}",
        age_text(age),
        file.display()
    ));
    Some(cost)
}

/// Keeps `cost` for `key`, measured at `now`, beside the other keys' (written to a
/// temporary file and renamed over the old one: a reader sees one or the other, whole).
pub fn put(file: &Path, key: &str, cost: &CountingCost, now: f64) -> std::io::Result<()> {
    let mut entries = read(file);
    entries.retain(|_, e| now - e.measured < MAX_AGE_S);
    entries.insert(
        key.to_string(),
        Entry {
            cost: cost.clone(),
            measured: now,
        },
    );
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let text = serde_json::to_vec_pretty(&entries).map_err(std::io::Error::other)?;
    autopin_files::keep_private(file, &text)
}

/// The file's entries; none when it is missing or not ours.
fn read(file: &Path) -> BTreeMap<String, Entry> {
    std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// An age as a person reads it.
fn age_text(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 2.0 * 86400.0 {
        format!("{:.0} h", s / 3600.0)
    } else {
        format!("{:.0} days", s / 86400.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(per_switch_ns: f64) -> CountingCost {
        CountingCost {
            events: vec!["instructions:u".into()],
            round_trip_ns_plain: 4000.0,
            round_trip_ns_counted: 4000.0 + 2.0 * per_switch_ns,
            switches_per_round_trip: 2.0,
            per_switch_ns,
            noise_ns: 10.0,
            kept: None,
        }
    }

    #[test]
    fn a_kept_cost_is_found_by_its_key_until_it_is_a_week_old() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("sub/counting-cost.json");
        assert!(get(&f, "k", 1000.0).is_none(), "nothing kept yet");
        put(&f, "k", &cost(300.0), 1000.0).unwrap();
        put(&f, "other", &cost(50.0), 1000.0).unwrap();
        let c = get(&f, "k", 1000.0 + 3600.0).unwrap();
        assert_eq!(c.per_switch_ns, 300.0);
        let kept = c.kept.unwrap();
        assert!(
            kept.contains("60 min ago") && kept.contains("sub/counting-cost.json"),
            "{kept}"
        );
        assert_eq!(get(&f, "other", 1000.0).unwrap().per_switch_ns, 50.0);
        assert!(get(&f, "k", 1000.0 + MAX_AGE_S + 1.0).is_none(), "too old");
        assert!(
            get(&f, "k", 900.0).is_none(),
            "measured in the future: clock moved"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(f.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_damaged_file_is_measured_around_and_replaced() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("counting-cost.json");
        std::fs::write(&f, "{ not json").unwrap();
        assert!(get(&f, "k", 0.0).is_none());
        put(&f, "k", &cost(1.0), 0.0).unwrap();
        assert!(get(&f, "k", 1.0).is_some());
    }

    #[test]
    fn the_key_names_events_kernel_model_and_cpus() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/kernel")).unwrap();
        std::fs::write(d.path().join("sys/kernel/osrelease"), "6.1.0-test\n").unwrap();
        std::fs::write(
            d.path().join("cpuinfo"),
            "processor\t: 0\nmodel name\t: Some CPU\n\nprocessor\t: 1\nmodel name\t: Some CPU\n",
        )
        .unwrap();
        let k = key(&["instructions:u".into()], d.path());
        assert_eq!(k, "instructions:u | kernel 6.1.0-test | Some CPU | 2 CPUs");
    }

    #[test]
    fn the_cache_is_where_the_environment_says() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let at = |p: &str| Some(PathBuf::from(p));
        assert_eq!(
            cache_file_in(env(&[("AUTOPIN_CACHE", "off"), ("HOME", "/h")])),
            None
        );
        assert_eq!(
            cache_file_in(env(&[("AUTOPIN_CACHE", "/x"), ("HOME", "/h")])),
            at("/x/counting-cost.json")
        );
        assert_eq!(
            cache_file_in(env(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")])),
            at("/c/autopin/counting-cost.json")
        );
        assert_eq!(
            cache_file_in(env(&[("XDG_CACHE_HOME", "relative"), ("HOME", "/h")])),
            at("/h/.cache/autopin/counting-cost.json")
        );
        assert_eq!(cache_file_in(env(&[])), None);
    }
}
