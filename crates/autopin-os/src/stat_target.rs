//! What `autopin stat` watches: the program it starts (its signals forwarded, its progress
//! channel open), or a process already running.

use crate::process::{LaunchError, LaunchSpec, Launched};
use crate::stat_source::ProgressChannel;
use autopin_stat::Subject;

/// Where the watch starts.
pub enum Watched<'a> {
    /// A running process (`-p PID`).
    Process(i32),
    /// A program to start, with its arguments.
    Command(&'a [String]),
}

/// The process watched.
pub struct StatTarget {
    pub pid: i32,
    /// The program, when `stat` started it.
    pub child: Option<Launched>,
    pub subject: Subject,
    /// The program's own progress (a program `stat` started).
    pub progress: Option<ProgressChannel>,
}

/// Why there is nothing to watch.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The process to watch is not there (a usage error).
    #[error("-p {0}: no such process")]
    NoProcess(i32),
    /// The program could not be started: a shell's exit code for it (127 not found, 126
    /// not runnable) comes with the error.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

impl StatTarget {
    /// Starts the program, or checks that the process is there.
    pub fn start(what: Watched) -> Result<StatTarget, StartError> {
        match what {
            Watched::Process(pid) => {
                if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(StartError::NoProcess(pid));
                }
                Ok(StatTarget {
                    pid,
                    child: None,
                    subject: Subject::Process(pid),
                    progress: None,
                })
            }
            Watched::Command(command) => {
                let mut spec = LaunchSpec::new(&command[0], &command[1..]);
                spec.forward_signals = true;
                let progress = ProgressChannel::for_launch(&mut spec);
                let child = crate::process::spawn(&spec)?;
                Ok(StatTarget {
                    pid: child.pid(),
                    child: Some(child),
                    subject: Subject::Command(command.to_vec()),
                    progress,
                })
            }
        }
    }
}
