//! The program's other processes: the children (and their children) it starts, which the
//! preload library lists in the thread registry. autopin pins and measures the program's
//! own threads; when the work moves into processes it does not manage, or the program
//! leaves some running when it ends (a daemon), the user is told.

use super::attach_guard::{read_stat, ProcStat};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Seconds of CPU a child must have used before the work counts as moved into children.
const MOVED_MIN_SECONDS: f64 = 1.0;

/// What autopin saw of the program's other processes while it ran.
#[derive(Debug)]
pub struct Offspring {
    proc_root: PathBuf,
    /// The launched process: it and the registry's owner are the program itself.
    program: i32,
    /// The launched process's start time (clock ticks since boot): a listed PID that
    /// started earlier is another process that reused the number.
    program_start: Option<u64>,
    /// CPU ticks of the program's own threads (the owner's, else the launched process's),
    /// at the last look.
    own: u64,
    /// CPU ticks of each other process at its last look (kept after it is gone).
    others: BTreeMap<i32, u64>,
    ticks_per_second: f64,
}

impl Offspring {
    pub fn new(proc_root: impl Into<PathBuf>, program: i32) -> Self {
        let proc_root = proc_root.into();
        let program_start = read_stat(&proc_root, program).map(|s| s.start);
        Offspring {
            proc_root,
            program,
            program_start,
            own: 0,
            others: BTreeMap::new(),
            ticks_per_second: rustix::param::clock_ticks_per_second().max(1) as f64,
        }
    }

    /// The processes in `listed` that are not the program itself (the launched process
    /// and `owner`, the process whose threads are searched) and started with or after it.
    fn others_of(&self, listed: &[i32], owner: Option<i32>) -> Vec<(i32, ProcStat)> {
        listed
            .iter()
            .filter(|&&p| p != self.program && Some(p) != owner)
            .filter_map(|&p| read_stat(&self.proc_root, p).map(|s| (p, s)))
            .filter(|(_, s)| self.program_start.is_none_or(|t| s.start >= t))
            .collect()
    }

    /// Looks at the CPU time of the program (`owner`'s threads, else the launched
    /// process's) and of the other `listed` processes, while the program runs.
    pub fn look(&mut self, listed: &[i32], owner: Option<i32>) {
        if let Some(s) = read_stat(&self.proc_root, owner.unwrap_or(self.program)) {
            self.own = s.utime + s.stime;
        }
        for (p, s) in self.others_of(listed, owner) {
            let e = self.others.entry(p).or_default();
            *e = (*e).max(s.utime + s.stime);
        }
    }

    /// What the user should know once the program ended: work done in processes autopin
    /// does not manage, and processes left running (`listed` as the registry has them now).
    pub fn notes(&self, listed: &[i32], owner: Option<i32>) -> Vec<String> {
        let hz = self.ticks_per_second;
        let children: u64 = self.others.values().sum();
        let left: Vec<i32> = self
            .others_of(listed, owner)
            .into_iter()
            .filter(|(_, s)| !matches!(s.state, 'Z' | 'X' | 'x'))
            .map(|(p, _)| p)
            .collect();
        work_moved(
            self.own as f64 / hz,
            children as f64 / hz,
            self.others.len(),
        )
        .into_iter()
        .chain(left_running(&left))
        .collect()
    }
}

/// The note for work done mostly in `n` child processes (`children` CPU seconds against
/// `own` in the program's threads); None while the program's own threads did most of it.
pub fn work_moved(own: f64, children: f64, n: usize) -> Option<String> {
    (n > 0 && children >= MOVED_MIN_SECONDS && children > own).then(|| {
        format!(
            "the work ran mostly in {n} child process{} of the program ({children:.1} s of CPU, against {own:.1} s in the program's own threads): autopin pins and measures the program's own threads, so its probes saw little of that work; the children kept the CPUs the program started with. Run the process that does the work under autopin, or attach to it",
            if n == 1 { "" } else { "es" }
        )
    })
}

/// The note for processes the program started that still run after it ended.
pub fn left_running(pids: &[i32]) -> Option<String> {
    (!pids.is_empty()).then(|| {
        let list: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
        format!(
            "the program left {} process{} running when it ended (PID {}; a daemon it started?): autopin does not manage {}; {} the CPUs the program started with",
            pids.len(),
            if pids.len() == 1 { "" } else { "es" },
            list.join(", "),
            if pids.len() == 1 { "it" } else { "them" },
            if pids.len() == 1 { "it keeps" } else { "they keep" },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_in_children_is_named_only_when_it_outweighs_the_program() {
        let n = work_moved(0.2, 7.5, 3).expect("a note");
        assert!(
            n.contains("3 child processes") && n.contains("7.5 s"),
            "{n}"
        );
        assert!(work_moved(5.0, 4.0, 2).is_none(), "the program did most");
        assert!(work_moved(0.0, 0.5, 1).is_none(), "too little to matter");
        assert!(work_moved(0.0, 3.0, 0).is_none());
    }

    #[test]
    fn processes_left_running_are_listed() {
        let n = left_running(&[41, 42]).expect("a note");
        assert!(n.contains("2 processes") && n.contains("PID 41, 42"), "{n}");
        assert!(left_running(&[7]).unwrap().contains("1 process running"));
        assert!(left_running(&[]).is_none());
    }

    #[test]
    fn a_fake_proc_tree_gives_the_children_their_cpu_and_finds_who_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let stat = |pid: i32, state: char, utime: u64, start: u64| {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("stat"),
                format!(
                    "{pid} (w) {state} 1 1 1 0 -1 0 0 0 0 0 {utime} 0 0 0 20 0 1 0 {start} 0 0"
                ),
            )
            .unwrap();
        };
        stat(10, 'S', 5, 1000); // the launched program
        stat(11, 'R', 800, 1001); // a worker it forked
        stat(12, 'Z', 100, 1002); // one that ended, not reaped yet
        stat(13, 'S', 3, 900); // a reused PID: started before the program
        let mut o = Offspring::new(dir.path(), 10);
        o.ticks_per_second = 100.0;
        o.look(&[10, 11, 12, 13], None);
        let notes = o.notes(&[10, 11, 12, 13], None);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("2 child processes") && notes[0].contains("9.0 s"));
        assert!(notes[1].contains("PID 11;"), "{}", notes[1]);
    }
}
