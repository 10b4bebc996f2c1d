//! The program a subcommand starts (`run`, `stat`): what its first word may not be.
//!
//! clap already stops a misspelt option from becoming the program (the program positional
//! takes no leading hyphen value; everything after its first word, or after `--`, is the
//! program's own). What clap cannot tell is a PID written where a program goes:
//! `autopin stat 1234` would look for a program called `1234`. A first word made of digits
//! that names no executable in the PATH is refused here with what was probably meant.

use crate::error::CliError;
use std::ffi::OsStr;
use std::path::Path;

/// Refuses a program name that is a number and no executable: the PID of a running process
/// (`meant` gives the command line that watches it, e.g. `autopin stat -p 1234`) or neither
/// a process nor a program. Any other name, and a number that does name an executable in
/// the PATH, passes: a program that cannot start is the launcher's to say (127/126).
pub fn refuse_a_pid(
    proc_root: &Path,
    program: &OsStr,
    path_var: Option<&OsStr>,
    meant: impl Fn(&str) -> String,
) -> Result<(), CliError> {
    let Some(text) = program.to_str() else {
        return Ok(());
    };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(());
    }
    if autopin_os::process::elf::resolve_program(program, path_var).is_ok() {
        return Ok(());
    }
    let pid = text.parse::<i32>().ok().filter(|p| *p > 0);
    let running = pid.filter(|p| proc_root.join(p.to_string()).is_dir());
    Err(CliError::usage(match running {
        Some(pid) => {
            let name = std::fs::read_to_string(proc_root.join(format!("{pid}/comm")))
                .map(|c| format!(" ({})", c.trim()))
                .unwrap_or_default();
            format!(
                "{text} is not a program but the PID of a running process{name}: did you mean {}?",
                meant(text)
            )
        }
        None => format!(
            "{text} is neither a program (no executable of that name in the PATH) nor a running process; \
             a process is watched by its PID with {}",
            meant("PID")
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(pids: &[(i32, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (pid, comm) in pids {
            let p = d.path().join(pid.to_string());
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
        }
        d
    }

    fn stat_p(pid: &str) -> String {
        format!("autopin stat -p {pid}")
    }

    #[test]
    fn a_running_pid_is_refused_with_the_form_that_watches_it() {
        let proc = fake_proc(&[(4242, "solver")]);
        let empty = OsStr::new("/nonexistent");
        let e = refuse_a_pid(proc.path(), OsStr::new("4242"), Some(empty), stat_p).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "4242 is not a program but the PID of a running process (solver): did you mean autopin stat -p 4242?"
        );
    }

    #[test]
    fn a_number_that_is_neither_is_explained() {
        let proc = fake_proc(&[]);
        let empty = OsStr::new("/nonexistent");
        let e = refuse_a_pid(proc.path(), OsStr::new("77"), Some(empty), stat_p).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let m = e.to_string();
        assert!(m.contains("77 is neither a program"), "{m}");
        assert!(m.contains("autopin stat -p PID"), "{m}");
        let e = refuse_a_pid(proc.path(), OsStr::new("0"), Some(empty), stat_p).unwrap_err();
        assert!(e.to_string().contains("0 is neither"));
    }

    #[test]
    fn names_and_executables_that_are_numbers_pass() {
        let proc = fake_proc(&[(4242, "solver")]);
        let bin = tempfile::tempdir().unwrap();
        let exe = bin.path().join("4242");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = bin.path().as_os_str();
        assert!(refuse_a_pid(proc.path(), OsStr::new("4242"), Some(path), stat_p).is_ok());
        for name in ["./4242", "solver", "42x", "-1"] {
            assert!(
                refuse_a_pid(proc.path(), OsStr::new(name), Some(path), stat_p).is_ok(),
                "{name}"
            );
        }
    }
}
