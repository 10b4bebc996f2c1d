//! Which CPUs are busy with other work: per-CPU time from /proc/stat, compared between two
//! readings. A pure parser and difference, and a small reader.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Cumulative times of one CPU (USER_HZ ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// Time doing work: user, nice, system, irq, softirq, steal.
    pub busy: u64,
    /// Time with nothing to do: idle and iowait.
    pub idle: u64,
}

/// Parses the `cpuN ...` lines of /proc/stat (the aggregate `cpu` line is skipped).
/// Lines that do not parse are ignored (a kernel may add fields; at least four are needed).
pub fn parse_proc_stat(text: &str) -> BTreeMap<u32, CpuTimes> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(Ok(cpu)) = name.strip_prefix("cpu").map(str::parse::<u32>) else {
            continue;
        };
        let v: Vec<u64> = f.map_while(|x| x.parse().ok()).collect();
        if v.len() < 4 {
            continue;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        out.insert(
            cpu,
            CpuTimes {
                busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7),
                idle: at(3) + at(4),
            },
        );
    }
    out
}

/// CPUs busy more than `threshold` (0..1) of the time between two readings.
pub fn busy_cpus(
    before: &BTreeMap<u32, CpuTimes>,
    after: &BTreeMap<u32, CpuTimes>,
    threshold: f64,
) -> Vec<u32> {
    after
        .iter()
        .filter_map(|(cpu, a)| {
            let b = before.get(cpu)?;
            let busy = a.busy.saturating_sub(b.busy) as f64;
            let idle = a.idle.saturating_sub(b.idle) as f64;
            (busy + idle > 0.0 && busy / (busy + idle) > threshold).then_some(*cpu)
        })
        .collect()
}

/// Samples `<proc>/stat` twice, `window` apart, and returns the CPUs more than half busy.
pub fn measure_busy_cpus(proc_root: &Path, window: Duration) -> std::io::Result<Vec<u32>> {
    let read = || std::fs::read_to_string(proc_root.join("stat")).map(|t| parse_proc_stat(&t));
    let a = read()?;
    std::thread::sleep(window);
    let b = read()?;
    Ok(busy_cpus(&a, &b, 0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  300 0 100 900 0 0 0 0 0 0\n\
cpu0 200 0 50 400 0 0 0 0 0 0\n\
cpu1 100 0 50 500 0 0 0 0 0 0\n\
intr 12345\nctxt 999\n";
    const AFTER: &str = "cpu  500 0 110 1090 0 0 0 0 0 0\n\
cpu0 390 0 55 405 0 0 0 0 0 0\n\
cpu1 110 0 55 685 0 0 0 0 0 0\n";

    #[test]
    fn parses_per_cpu_lines_only() {
        let m = parse_proc_stat(BEFORE);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[&0],
            CpuTimes {
                busy: 250,
                idle: 400
            }
        );
        assert_eq!(
            m[&1],
            CpuTimes {
                busy: 150,
                idle: 500
            }
        );
        assert!(parse_proc_stat("cpu0 1 2\ncpuX 1 2 3 4\n").is_empty());
    }

    #[test]
    fn the_cpu_that_worked_between_readings_is_busy() {
        // CPU 0: 195 busy of 200 ticks; CPU 1: 15 of 200.
        let busy = busy_cpus(&parse_proc_stat(BEFORE), &parse_proc_stat(AFTER), 0.5);
        assert_eq!(busy, vec![0]);
        assert!(busy_cpus(&parse_proc_stat(BEFORE), &parse_proc_stat(BEFORE), 0.5).is_empty());
    }

    #[test]
    fn steal_and_irq_count_as_busy() {
        let a = parse_proc_stat("cpu0 0 0 0 100 0 0 0 0\n");
        let b = parse_proc_stat("cpu0 0 0 0 110 0 30 30 30\n");
        assert_eq!(busy_cpus(&a, &b, 0.5), vec![0]);
    }

    #[test]
    fn reads_this_machine() {
        let busy = measure_busy_cpus(Path::new("/proc"), Duration::from_millis(20)).unwrap();
        let n = parse_proc_stat(&std::fs::read_to_string("/proc/stat").unwrap()).len();
        assert!(n >= 1 && busy.iter().all(|c| (*c as usize) < 8192));
    }
}
