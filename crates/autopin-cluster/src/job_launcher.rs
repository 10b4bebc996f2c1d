//! Who launched us and where we stand among the ranks: Slurm (`srun`), Open MPI (`mpirun`,
//! `prterun`), MPICH's Hydra (`mpiexec`) or nothing. Detection reads a map of environment
//! variables handed in, so it is pure; [`from_process`] is the one place that reads the real
//! environment.

use autopin_engine::report::{JobLauncher, JobPlace};
use std::collections::BTreeMap;
use std::fmt;

/// What the job launcher told this process about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Where this process stands in the job (the report's record of the launch shares it).
    pub place: JobPlace,
    /// CPUs Slurm reserved per task (`--cpus-per-task`).
    pub cpus_per_task: Option<usize>,
    /// Variables that could not be read, with what was wrong (reported, never fatal).
    pub problems: Vec<String>,
}

impl Launch {
    pub fn plain() -> Launch {
        Launch {
            place: JobPlace {
                launcher: JobLauncher::Plain,
                job: None,
                step: None,
                node: None,
                rank: 0,
                size: 1,
                local_rank: 0,
                local_size: 1,
            },
            cpus_per_task: None,
            problems: Vec::new(),
        }
    }

    /// True when other ranks of the same launch share this node (so the node is split and
    /// probing is coordinated).
    pub fn shares_node(&self) -> bool {
        self.place.local_size > 1
    }

    /// The key of this launch on this node: ranks with the same key meet in one rendezvous
    /// directory. Slurm's job and step ids name a step; MPI launchers without one are keyed
    /// by the caller's fallback (the launching daemon's pid and start time). The node name is
    /// part of the key.
    pub fn step_key(&self, fallback: &str) -> String {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let p = &self.place;
        let launch = match (&p.job, &p.step) {
            (Some(j), Some(s)) => format!("{}-{}.{}", p.launcher.name(), clean(j), clean(s)),
            (Some(j), None) => format!("{}-{}", p.launcher.name(), clean(j)),
            _ => format!("{}-{}", p.launcher.name(), clean(fallback)),
        };
        // The node name too: emulated nodes (several slurmd on one host) share /dev/shm.
        match &p.node {
            Some(n) => format!("{launch}-{}", clean(n)),
            None => launch,
        }
    }
}

impl fmt::Display for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.place;
        if p.launcher == JobLauncher::Plain {
            return write!(f, "plain run (no Slurm or MPI launcher detected)");
        }
        write!(f, "{}", p.launcher.name())?;
        if let Some(j) = &p.job {
            write!(f, " job {j}")?;
        }
        if let Some(s) = &p.step {
            write!(f, " step {s}")?;
        }
        if let Some(n) = &p.node {
            write!(f, " on {n}")?;
        }
        write!(
            f,
            ": rank {}/{}, local rank {}/{}",
            p.rank, p.size, p.local_rank, p.local_size
        )?;
        if let Some(c) = self.cpus_per_task {
            write!(f, ", {c} CPU(s) per task")?;
        }
        Ok(())
    }
}

type Env = BTreeMap<String, String>;

fn num(env: &Env, key: &str, problems: &mut Vec<String>) -> Option<usize> {
    let v = env.get(key)?;
    match v.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => {
            problems.push(format!("{key}={v:?} is not a number"));
            None
        }
    }
}

/// Why Slurm's per-node task counts (`spec`) gave no count for a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TasksPerNodeError {
    #[error("{spec:?}: missing ')' in {part:?}")]
    MissingParen { spec: String, part: String },
    #[error("{spec:?}: {count:?} is not a task count")]
    NotATaskCount { spec: String, count: String },
    #[error("{spec:?}: {times:?} is not a repeat count")]
    NotARepeatCount { spec: String, times: String },
    /// The counts cover `nodes` nodes, and `node` is not among them.
    #[error("{spec:?} lists {nodes} node(s), not node {node}")]
    NoSuchNode {
        spec: String,
        nodes: usize,
        node: usize,
    },
}

/// Slurm's compressed per-node task counts, `2(x3),1` = 2,2,2,1; the count for node `i`.
pub fn tasks_on_node(spec: &str, node: usize) -> Result<usize, TasksPerNodeError> {
    let mut at = 0usize;
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (count, times) = match part.split_once("(x") {
            Some((c, rest)) => {
                let t = rest
                    .strip_suffix(')')
                    .ok_or_else(|| TasksPerNodeError::MissingParen {
                        spec: spec.to_string(),
                        part: part.to_string(),
                    })?;
                (c, t)
            }
            None => (part, "1"),
        };
        let count: usize = count
            .parse()
            .map_err(|_| TasksPerNodeError::NotATaskCount {
                spec: spec.to_string(),
                count: count.to_string(),
            })?;
        let times: usize = times
            .parse()
            .map_err(|_| TasksPerNodeError::NotARepeatCount {
                spec: spec.to_string(),
                times: times.to_string(),
            })?;
        if node < at + times {
            return Ok(count);
        }
        at += times;
    }
    Err(TasksPerNodeError::NoSuchNode {
        spec: spec.to_string(),
        nodes: at,
        node,
    })
}

/// More local ranks than any node holds (Slurm's own default is at most 512 tasks a node).
/// A local rank or count above it is a broken environment, not a launch: the rendezvous
/// would wait for, and make room for, every one of them (`SLURM_LOCALID=4294967295` asked
/// for 64 GiB before the program started, and autopin aborted).
pub const MAX_LOCAL_RANKS: usize = 4096;

/// Detects the launcher from environment variables. Slurm wins over MPI variables when both
/// are present (an `srun`-started Open MPI program has both, and Slurm's are the step's). A
/// local rank or count past [`MAX_LOCAL_RANKS`] is a problem said, and the rank plans alone.
pub fn detect(env: &Env) -> Launch {
    let mut launch = detect_as_given(env);
    let p = &mut launch.place;
    if p.local_size > MAX_LOCAL_RANKS {
        launch.problems.push(format!(
            "local rank {} of {}: more local ranks than a node holds (at most {MAX_LOCAL_RANKS}); this rank plans alone",
            p.local_rank, p.local_size
        ));
        p.local_rank = 0;
        p.local_size = 1;
    }
    launch
}

fn detect_as_given(env: &Env) -> Launch {
    let mut problems = Vec::new();
    if env.contains_key("SLURM_STEP_ID") || env.contains_key("SLURM_LOCALID") {
        let local_rank = num(env, "SLURM_LOCALID", &mut problems).unwrap_or(0);
        let node_index = num(env, "SLURM_NODEID", &mut problems)
            .or_else(|| num(env, "SLURM_LOCAL_NODEID", &mut problems))
            .unwrap_or(0);
        let local_size = match env
            .get("SLURM_STEP_TASKS_PER_NODE")
            .or_else(|| env.get("SLURM_TASKS_PER_NODE"))
        {
            Some(s) => match tasks_on_node(s, node_index) {
                Ok(n) => n,
                Err(e) => {
                    problems.push(format!("SLURM_STEP_TASKS_PER_NODE: {e}"));
                    1
                }
            },
            None => 1,
        };
        return Launch {
            place: JobPlace {
                launcher: JobLauncher::Slurm,
                job: env.get("SLURM_JOB_ID").or(env.get("SLURM_JOBID")).cloned(),
                step: env
                    .get("SLURM_STEP_ID")
                    .or(env.get("SLURM_STEPID"))
                    .cloned(),
                node: env
                    .get("SLURMD_NODENAME")
                    .or(env.get("SLURM_TOPOLOGY_ADDR"))
                    .cloned(),
                rank: num(env, "SLURM_PROCID", &mut problems).unwrap_or(0),
                size: num(env, "SLURM_STEP_NUM_TASKS", &mut problems)
                    .or_else(|| num(env, "SLURM_NTASKS", &mut problems))
                    .unwrap_or(1),
                local_rank,
                local_size: local_size.max(local_rank + 1),
            },
            cpus_per_task: num(env, "SLURM_CPUS_PER_TASK", &mut problems),
            problems,
        };
    }
    if env.contains_key("OMPI_COMM_WORLD_LOCAL_RANK") {
        let local_rank = num(env, "OMPI_COMM_WORLD_LOCAL_RANK", &mut problems).unwrap_or(0);
        return Launch {
            place: JobPlace {
                launcher: JobLauncher::OpenMpi,
                job: env
                    .get("OMPI_MCA_ess_base_jobid")
                    .or(env.get("PMIX_NAMESPACE"))
                    .cloned(),
                step: None,
                node: None,
                rank: num(env, "OMPI_COMM_WORLD_RANK", &mut problems).unwrap_or(0),
                size: num(env, "OMPI_COMM_WORLD_SIZE", &mut problems).unwrap_or(1),
                local_rank,
                local_size: num(env, "OMPI_COMM_WORLD_LOCAL_SIZE", &mut problems)
                    .unwrap_or(1)
                    .max(local_rank + 1),
            },
            cpus_per_task: None,
            problems,
        };
    }
    if env.contains_key("MPI_LOCALRANKID") || env.contains_key("PMI_RANK") {
        let local_rank = num(env, "MPI_LOCALRANKID", &mut problems).unwrap_or(0);
        return Launch {
            place: JobPlace {
                launcher: JobLauncher::Mpich,
                job: None,
                step: None,
                node: None,
                rank: num(env, "PMI_RANK", &mut problems).unwrap_or(0),
                size: num(env, "PMI_SIZE", &mut problems).unwrap_or(1),
                local_rank,
                local_size: num(env, "MPI_LOCALNRANKS", &mut problems)
                    .unwrap_or(1)
                    .max(local_rank + 1),
            },
            cpus_per_task: None,
            problems,
        };
    }
    Launch::plain()
}

/// Detects from this process's environment, filling in the host name when the launcher
/// names no node.
pub fn from_process() -> Launch {
    // Not `std::env::vars()`, which panics on a variable that is not UTF-8 (`env
    // FOO=$'\xff' autopin run …` exited 101 before the program started): such a value is
    // read with U+FFFD in place of its stray bytes, and then refused where it matters.
    let env: Env = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let mut l = detect(&env);
    if l.place.node.is_none() && l.place.launcher != JobLauncher::Plain {
        l.place.node = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string());
    }
    l
}

/// A name for this launch when the launcher gives no job id (MPI launchers): the ranks on a
/// node share their parent (Hydra's proxy, Open MPI's daemon); its pid and start time
/// (field 22 of /proc/PID/stat, so a recycled pid gives another name) name the launch.
pub fn parent_key() -> String {
    key_of(std::os::unix::process::parent_id())
}

/// [`parent_key`] for the parent `ppid` (its pid and start time).
pub fn key_of(ppid: u32) -> String {
    let start = std::fs::read_to_string(format!("/proc/{ppid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(19).map(str::to_string))
        })
        .unwrap_or_default();
    format!("{ppid}-{start}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn slurm_step_with_two_local_tasks() {
        let l = detect(&env(&[
            ("SLURM_JOB_ID", "41"),
            ("SLURM_STEP_ID", "2"),
            ("SLURM_PROCID", "3"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_NUM_TASKS", "4"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_CPUS_PER_TASK", "1"),
            ("SLURMD_NODENAME", "node2"),
            // Open MPI variables under srun: Slurm's win.
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ]));
        assert_eq!(l.place.launcher, JobLauncher::Slurm);
        assert_eq!(
            (
                l.place.rank,
                l.place.size,
                l.place.local_rank,
                l.place.local_size
            ),
            (3, 4, 1, 2)
        );
        assert_eq!(l.place.job.as_deref(), Some("41"));
        assert_eq!(l.place.step.as_deref(), Some("2"));
        assert_eq!(l.place.node.as_deref(), Some("node2"));
        assert_eq!(l.cpus_per_task, Some(1));
        assert!(l.shares_node());
        assert_eq!(l.step_key("x"), "slurm-41.2-node2");
        assert!(l.problems.is_empty());
        assert_eq!(
            l.to_string(),
            "slurm job 41 step 2 on node2: rank 3/4, local rank 1/2, 1 CPU(s) per task"
        );
    }

    #[test]
    fn slurm_uneven_tasks_per_node() {
        assert_eq!(tasks_on_node("2(x3),1", 0), Ok(2));
        assert_eq!(tasks_on_node("2(x3),1", 2), Ok(2));
        assert_eq!(tasks_on_node("2(x3),1", 3), Ok(1));
        assert!(tasks_on_node("2(x3),1", 4)
            .unwrap_err()
            .to_string()
            .contains("4 node(s)"));
        assert!(tasks_on_node("2(x3", 0)
            .unwrap_err()
            .to_string()
            .contains("missing ')'"));
        assert!(tasks_on_node("a", 0)
            .unwrap_err()
            .to_string()
            .contains("not a task count"));
    }

    #[test]
    fn open_mpi_and_mpich() {
        let o = detect(&env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ]));
        assert_eq!(o.place.launcher, JobLauncher::OpenMpi);
        assert_eq!(
            (
                o.place.rank,
                o.place.size,
                o.place.local_rank,
                o.place.local_size
            ),
            (1, 2, 1, 2)
        );
        assert_eq!(o.step_key("123-456"), "openmpi-123-456");
        let m = detect(&env(&[
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "2"),
            ("MPI_LOCALRANKID", "0"),
            ("MPI_LOCALNRANKS", "2"),
        ]));
        assert_eq!(m.place.launcher, JobLauncher::Mpich);
        assert_eq!(
            (
                m.place.rank,
                m.place.size,
                m.place.local_rank,
                m.place.local_size
            ),
            (0, 2, 0, 2)
        );
    }

    #[test]
    fn plain_and_bad_values() {
        let p = detect(&env(&[("HOME", "/root")]));
        assert_eq!(p, Launch::plain());
        assert!(!p.shares_node());
        let huge = detect(&env(&[("SLURM_LOCALID", "4294967295")]));
        assert_eq!((huge.place.local_rank, huge.place.local_size), (0, 1));
        assert!(!huge.shares_node());
        assert!(
            huge.problems[0].contains("more local ranks than a node holds"),
            "{:?}",
            huge.problems
        );
        let b = detect(&env(&[("SLURM_LOCALID", "x"), ("SLURM_STEP_ID", "0")]));
        assert_eq!(b.place.launcher, JobLauncher::Slurm);
        assert_eq!(b.place.local_rank, 0);
        assert_eq!(b.problems, ["SLURM_LOCALID=\"x\" is not a number"]);
    }
}
