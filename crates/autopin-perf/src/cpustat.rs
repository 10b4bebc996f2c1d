//! Which CPUs are busy with other work: per-CPU time from /proc/stat, compared between two
//! readings, less the time a watched program's own threads spent on each CPU (from
//! /proc/PID/task/TID/stat). Pure parsers and differences, and small readers.

use std::collections::BTreeMap;
use std::path::Path;

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

/// A thread's CPU time so far (utime + stime, USER_HZ ticks) and the CPU it last ran on,
/// from the contents of `/proc/PID/task/TID/stat` (fields 14, 15 and 39, counted after the
/// last ')' because the name may contain any character).
pub fn parse_thread_cpu(stat: &str) -> Option<(u64, u32)> {
    let f = ThreadStatFields::of(stat)?;
    Some((f.ticks()?, f.cpu()?))
}

/// A thread's stat line split into fields, counted from the state (field 3) after the last
/// ')': the name before it may contain any character.
struct ThreadStatFields<'a>(Vec<&'a str>);

impl<'a> ThreadStatFields<'a> {
    fn of(stat: &'a str) -> Option<Self> {
        let close = stat.rfind(')')?;
        Some(Self(stat[close + 1..].split_ascii_whitespace().collect()))
    }

    fn num(&self, i: usize) -> Option<u64> {
        self.0.get(i)?.parse().ok()
    }

    /// utime + stime (fields 14 and 15), USER_HZ ticks.
    fn ticks(&self) -> Option<u64> {
        Some(self.num(11)? + self.num(12)?)
    }

    /// The CPU it last ran on (field 39).
    fn cpu(&self) -> Option<u32> {
        u32::try_from(self.num(36)?).ok()
    }
}

/// One thread as a single look at `/proc/PID/task/TID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadNow {
    /// Running or waiting for a CPU now (state `R`).
    pub runnable: bool,
    /// CPU time so far (utime + stime, USER_HZ ticks).
    pub ticks: u64,
    /// When it started, USER_HZ ticks after boot.
    pub started: u64,
    /// The CPU it last ran on.
    pub cpu: u32,
}

/// Parses a thread's stat line for [`ThreadNow`] (fields 3, 14, 15, 22 and 39, counted
/// after the last ')').
pub fn parse_thread_now(stat: &str) -> Option<ThreadNow> {
    let f = ThreadStatFields::of(stat)?;
    Some(ThreadNow {
        runnable: *f.0.first()? == "R",
        ticks: f.ticks()?,
        started: f.num(19)?,
        cpu: f.cpu()?,
    })
}

/// How many threads a thread's process has (field 20 of its stat line).
pub fn thread_count(stat: &str) -> Option<u64> {
    ThreadStatFields::of(stat)?.num(17)
}

/// How many scheduling entities are running or runnable now, from /proc/loadavg's fourth
/// field (`running/total`); the reader itself is one of them.
pub fn running_now(loadavg: &str) -> Option<u32> {
    loadavg
        .split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// A thread that has lived this long (USER_HZ ticks) has a CPU share worth reading.
const SETTLED_TICKS: u64 = 50;

/// CPUs that other work keeps busy, from a single look at its threads (`now`: boot time in
/// USER_HZ ticks): a CPU whose threads that are runnable now have together taken more than
/// `share` of a CPU, each over its own life of at least half a second. A daemon that happens
/// to run at the moment of the look has taken far less over its life; a job that computes
/// has not. Summed per CPU, as two jobs that share one CPU take half of it each: one at a
/// time, neither counted, and the CPU read as free though it is full.
pub fn busy_now(threads: impl IntoIterator<Item = ThreadNow>, now: u64, share: f64) -> Vec<u32> {
    let mut taken: BTreeMap<u32, f64> = BTreeMap::new();
    for t in threads {
        let life = now.saturating_sub(t.started);
        if t.runnable && life >= SETTLED_TICKS {
            *taken.entry(t.cpu).or_default() += t.ticks as f64 / life as f64;
        }
    }
    taken
        .into_iter()
        .filter(|&(_, s)| s > share)
        .map(|(cpu, _)| cpu)
        .collect()
}

/// CPUs where other work took more than `threshold` of the time between two readings:
/// `other` holds the ticks other processes' threads ran on each CPU meanwhile.
pub fn cpus_with_other_work(
    before: &BTreeMap<u32, CpuTimes>,
    after: &BTreeMap<u32, CpuTimes>,
    other: &BTreeMap<u32, u64>,
    threshold: f64,
) -> Vec<u32> {
    after
        .iter()
        .filter_map(|(cpu, a)| {
            let b = before.get(cpu)?;
            let total = (a.busy.saturating_sub(b.busy) + a.idle.saturating_sub(b.idle)) as f64;
            let theirs = other.get(cpu).copied().unwrap_or(0) as f64;
            (total > 0.0 && theirs / total > threshold).then_some(*cpu)
        })
        .collect()
}

/// The largest share of one CPU's time that other work can have taken between two
/// readings: all the busy time of `cpus`, less `ours` (the ticks the watched program took
/// meanwhile, all of them on those CPUs), as if it had all been on the CPU that had the
/// least time. At or below a busy share, no CPU can be busy with other work, and the
/// threads need not be read. None where a CPU is missing from a reading or had no time.
pub fn other_work_bound(
    before: &BTreeMap<u32, CpuTimes>,
    after: &BTreeMap<u32, CpuTimes>,
    cpus: impl IntoIterator<Item = u32>,
    ours: u64,
) -> Option<f64> {
    let mut busy = 0u64;
    let mut least = u64::MAX;
    for cpu in cpus {
        let (b, a) = (before.get(&cpu)?, after.get(&cpu)?);
        let worked = a.busy.saturating_sub(b.busy);
        busy += worked;
        least = least.min(worked + a.idle.saturating_sub(b.idle));
    }
    (least > 0 && least < u64::MAX).then(|| busy.saturating_sub(ours) as f64 / least as f64)
}

/// The ticks a thread took in the last `window` ticks before `now` (boot time, USER_HZ
/// ticks), judged from its whole life when its time at the window's start was not read:
/// all of them for a thread born in the window, else its average share of its life.
pub fn ticks_in_window(t: &ThreadNow, now: u64, window: u64) -> u64 {
    let life = now.saturating_sub(t.started);
    if life <= window {
        return t.ticks;
    }
    (u128::from(t.ticks) * u128::from(window) / u128::from(life)) as u64
}

/// Reads `<proc>/stat`: per-CPU times.
pub fn read_proc_stat(proc_root: &Path) -> std::io::Result<BTreeMap<u32, CpuTimes>> {
    std::fs::read_to_string(proc_root.join("stat")).map(|t| parse_proc_stat(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Busy CPUs when the watched program ran nowhere (other work is all the work).
    /// CPUs busy more than half the time between two readings, whoever worked.
    fn idle_besides(a: &BTreeMap<u32, CpuTimes>, b: &BTreeMap<u32, CpuTimes>) -> Vec<u32> {
        b.iter()
            .filter(|(cpu, t)| {
                let before = a[cpu];
                let busy = (t.busy - before.busy) as f64;
                busy / (busy + (t.idle - before.idle) as f64) > 0.5
            })
            .map(|(cpu, _)| *cpu)
            .collect()
    }

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
        let busy = idle_besides(&parse_proc_stat(BEFORE), &parse_proc_stat(AFTER));
        assert_eq!(busy, vec![0]);
        assert!(idle_besides(&parse_proc_stat(BEFORE), &parse_proc_stat(BEFORE)).is_empty());
    }

    #[test]
    fn steal_and_irq_count_as_busy() {
        let a = parse_proc_stat("cpu0 0 0 0 100 0 0 0 0\n");
        let b = parse_proc_stat("cpu0 0 0 0 110 0 30 30 30\n");
        assert_eq!(idle_besides(&a, &b), vec![0]);
    }

    #[test]
    fn other_work_counts_where_it_ran() {
        // Both CPUs fully busy over 200 ticks; other processes ran 150 ticks on CPU 0 and
        // 20 on CPU 1 (the rest was the watched program's): only CPU 0 has other work.
        let a = parse_proc_stat("cpu0 0 0 0 0\ncpu1 0 0 0 0\n");
        let b = parse_proc_stat("cpu0 200 0 0 0\ncpu1 195 0 5 0\n");
        let other = BTreeMap::from([(0, 150), (1, 20)]);
        assert_eq!(cpus_with_other_work(&a, &b, &other, 0.3), vec![0]);
        assert!(cpus_with_other_work(&a, &b, &BTreeMap::new(), 0.3).is_empty());
        assert!(
            cpus_with_other_work(&a, &a, &other, 0.3).is_empty(),
            "no time passed"
        );
    }

    #[test]
    fn thread_cpu_time_and_last_cpu_from_its_stat_line() {
        // A name with spaces and a parenthesis; utime 250, stime 30, processor 3.
        let line = "4242 (a b) c) R 1 4242 4242 0 -1 4194304 100 0 0 0 250 30 0 0 20 0 2 0 \
            1000 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";
        assert_eq!(parse_thread_cpu(line), Some((280, 3)));
        assert_eq!(parse_thread_cpu("4242 (x) R 1 2"), None);
        let own = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let (_, cpu) = parse_thread_cpu(&own).expect("this thread's stat parses");
        assert!((cpu as usize) < 8192);
    }

    #[test]
    fn a_look_at_the_threads_finds_the_cpus_that_work_keeps_busy() {
        let line = "77 (spin) R 1 77 77 0 -1 0 0 0 0 0 940 10 0 0 20 0 1 0 \
            1000 1000000 100 1 1 1 0 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0";
        let t = parse_thread_now(line).unwrap();
        assert_eq!(
            t,
            ThreadNow {
                runnable: true,
                ticks: 950,
                started: 1000,
                cpu: 5
            }
        );
        assert_eq!(parse_thread_now("77 (spin) R 1 2"), None);
        let at = |runnable, ticks, started, cpu| ThreadNow {
            runnable,
            ticks,
            started,
            cpu,
        };
        let now = 2000;
        let threads = [
            at(true, 950, 1000, 5),  // a busy loop for 10 s: busy
            at(true, 950, 1000, 5),  // its twin on the same CPU: one CPU
            at(false, 990, 1000, 2), // computing, but asleep right now
            at(true, 30, 1000, 3),   // a daemon awake at the moment of the look
            at(true, 20, 1980, 4),   // 0.2 s old: too young to tell
            at(true, 600, 1000, 1),  // more than half its life on a CPU
            at(true, 450, 1000, 7),  // two jobs sharing CPU 7, 45% each: busy together
            at(true, 450, 1000, 7),
            at(true, 300, 1000, 6), // 30% and 15% on CPU 6: busy less than half the time
            at(true, 150, 1000, 6),
        ];
        assert_eq!(busy_now(threads, now, 0.5), vec![1, 5, 7]);
        assert_eq!(running_now("0.50 0.40 0.30 3/187 4242\n"), Some(3));
        assert_eq!(running_now("0.50 0.40"), None);
    }

    #[test]
    fn other_work_is_bounded_by_what_the_program_left_of_the_cpus_busy_time() {
        let (a, b) = (parse_proc_stat(BEFORE), parse_proc_stat(AFTER));
        // CPU 0: 195 busy of 200; CPU 1: 15 busy of 200. The program took 150 of the 210.
        assert_eq!(other_work_bound(&a, &b, [0, 1], 150), Some(60.0 / 200.0));
        // More than the CPUs worked (a reading's rounding): nothing is left for others.
        assert_eq!(other_work_bound(&a, &b, [0, 1], 500), Some(0.0));
        // Only CPU 1 is allowed: its 15 ticks, over its 200.
        assert_eq!(other_work_bound(&a, &b, [1], 0), Some(15.0 / 200.0));
        // A CPU neither reading has, or no time between them: no bound.
        assert_eq!(other_work_bound(&a, &b, [0, 7], 0), None);
        assert_eq!(other_work_bound(&a, &a, [0], 0), None);
    }

    #[test]
    fn a_thread_not_read_at_the_windows_start_is_judged_by_its_life() {
        let t = |ticks, started| ThreadNow {
            runnable: true,
            ticks,
            started,
            cpu: 0,
        };
        // Born 50 ticks ago in a window of 200: all its time is the window's.
        assert_eq!(ticks_in_window(&t(40, 950), 1000, 200), 40);
        // Spinning for 800 of its 1000 ticks: 80% of the window.
        assert_eq!(ticks_in_window(&t(800, 0), 1000, 200), 160);
        // A daemon that took 10 ticks in 1000: one tick of the window at most.
        assert!(ticks_in_window(&t(10, 0), 1000, 200) <= 2);
    }

    #[test]
    fn a_threads_stat_says_how_many_threads_its_process_has() {
        let line = "7 (a b) S 1 7 7 0 -1 0 0 0 0 0 5 1 0 0 20 0 3 0 100 0";
        assert_eq!(thread_count(line), Some(3));
        assert_eq!(thread_count("7 (short) S 1"), None);
    }

    #[test]
    fn reads_this_machine() {
        let a = read_proc_stat(Path::new("/proc")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = read_proc_stat(Path::new("/proc")).unwrap();
        assert!(!a.is_empty() && a.keys().eq(b.keys()));
        assert!(idle_besides(&a, &b).iter().all(|c| a.contains_key(c)));
    }
}
