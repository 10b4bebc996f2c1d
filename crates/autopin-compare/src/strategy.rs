//! Strategies: what the user names on the command line, how each is validated before the
//! first run, and the command line that runs the program under it.
//!
//! Every strategy becomes a command prefix in front of the user's program, so a comparison
//! measures exactly what users get from `autopin pin` / `autopin run`, not a re-implementation.

use autopin_placement::PlacementError;
use rand::seq::SliceRandom;
use rand::Rng;
use serde::Serialize;
use std::ffi::OsString;
use std::path::PathBuf;

/// The sharing-aware strategies of the pinning study; they take a thread-sharing matrix file.
pub const SHARING_KINDS: [&str; 5] = ["LP_COMPACT", "LP_SCATTER", "GP", "LPGP", "GPLP"];

/// How the program is started under one strategy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StrategyKind {
    /// The OS scheduler decides (`autopin pin --os-decides`: started like the others).
    None,
    /// A pin expression or CPU list (`0,1`, `S0:0-3`, `E:N:4`) for `autopin pin -c`.
    Cpus { expr: String },
    /// A named placement policy for `autopin pin --policy`.
    Policy { name: String },
    /// A sharing-aware strategy with its matrix file, for `autopin pin --sharing`.
    Sharing { kind: String, matrix: PathBuf },
    /// A fresh random permutation of the allowed CPUs for every run.
    Random,
    /// The optimizer: `autopin run`.
    Autopin,
}

/// A strategy as the user wrote it, and what it means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Strategy {
    pub name: String,
    #[serde(flatten)]
    pub kind: StrategyKind,
}

/// What strategy validation needs to know about the machine; the real implementation asks
/// the placement crate, tests use a fixed table.
pub trait PlacementCheck {
    /// `None` when `name` is not a placement policy; otherwise whether the policy can place
    /// threads on this machine (e.g. POWER needs power measurements).
    fn policy(&self, name: &str) -> Option<Result<(), PlacementError>>;
    /// Whether a sharing strategy can use this matrix file.
    fn sharing(&self, kind: &str, matrix: &std::path::Path) -> Result<(), PlacementError>;
    /// The CPUs a pin expression selects, or why it is invalid.
    fn expression(&self, expr: &str) -> Result<Vec<u32>, PlacementError>;
    /// The CPUs a random pinning may use (allowed and online), in OS order.
    fn allowed_cpus(&self) -> Vec<u32>;
}

/// Why a `--strategy` value was refused; `name` is the strategy as written (trimmed), and
/// `reason` the placement crate's explanation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StrategyError {
    #[error("empty strategy; expected none, random, autopin, a policy name, a pin expression (e.g. 0,1 or S0:0-3) or SHARING:matrix.txt")]
    Empty,
    #[error("strategy `random`: the machine has no allowed CPUs")]
    NoAllowedCpus,
    /// A sharing strategy (`kind`) without its matrix file.
    #[error("strategy `{name}`: {kind} needs a sharing matrix file, e.g. {kind}:matrix.txt")]
    NoMatrixFile { name: String, kind: String },
    #[error("strategy `{name}`: sharing matrix file `{file}` does not exist")]
    MissingMatrixFile { name: String, file: String },
    /// A sharing strategy or a placement policy that cannot place threads here.
    #[error("strategy `{name}`: {reason}")]
    CannotPlace {
        name: String,
        #[source]
        reason: PlacementError,
    },
    #[error("strategy `{name}` selects no CPUs")]
    NoCpus { name: String },
    /// Nothing that a strategy can be; `reason` says why it is no pin expression.
    #[error(
        "unknown strategy `{name}`: not none/random/autopin, not a placement policy, not {}:FILE, and not a valid pin expression ({reason})",
        SHARING_KINDS.join("/")
    )]
    Unknown {
        name: String,
        #[source]
        reason: PlacementError,
    },
}

/// Parses and validates one `--strategy` value.
pub fn parse_strategy(text: &str, check: &dyn PlacementCheck) -> Result<Strategy, StrategyError> {
    let name = text.trim();
    let strategy = |kind| {
        Ok(Strategy {
            name: name.to_string(),
            kind,
        })
    };
    if name.is_empty() {
        return Err(StrategyError::Empty);
    }
    match name.to_ascii_lowercase().as_str() {
        "none" => return strategy(StrategyKind::None),
        "random" => {
            if check.allowed_cpus().is_empty() {
                return Err(StrategyError::NoAllowedCpus);
            }
            return strategy(StrategyKind::Random);
        }
        "autopin" => return strategy(StrategyKind::Autopin),
        _ => {}
    }
    if let Some((kind, file)) = name.split_once(':') {
        if let Some(k) = SHARING_KINDS.iter().find(|k| k.eq_ignore_ascii_case(kind)) {
            if file.is_empty() {
                return Err(StrategyError::NoMatrixFile {
                    name: name.to_string(),
                    kind: k.to_string(),
                });
            }
            let matrix = PathBuf::from(file);
            if !matrix.is_file() {
                return Err(StrategyError::MissingMatrixFile {
                    name: name.to_string(),
                    file: file.to_string(),
                });
            }
            check
                .sharing(k, &matrix)
                .map_err(|reason| StrategyError::CannotPlace {
                    name: name.to_string(),
                    reason,
                })?;
            return strategy(StrategyKind::Sharing {
                kind: k.to_string(),
                matrix,
            });
        }
    }
    match check.policy(name) {
        Some(Ok(())) => {
            return strategy(StrategyKind::Policy {
                name: name.to_string(),
            })
        }
        Some(Err(reason)) => {
            return Err(StrategyError::CannotPlace {
                name: name.to_string(),
                reason,
            })
        }
        None => {}
    }
    match check.expression(name) {
        Ok(cpus) if cpus.is_empty() => Err(StrategyError::NoCpus {
            name: name.to_string(),
        }),
        Ok(_) => strategy(StrategyKind::Cpus {
            expr: name.to_string(),
        }),
        Err(reason) => Err(StrategyError::Unknown {
            name: name.to_string(),
            reason,
        }),
    }
}

/// One run's concrete command: the command line and, for random, the CPUs it drew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCommand {
    pub argv: Vec<OsString>,
    pub cpus: Option<Vec<u32>>,
}

/// Where the pinning front-end lives and which extra options it gets (the machine source).
#[derive(Debug, Clone)]
pub struct Frontend {
    pub exe: PathBuf,
    /// Options placed after the subcommand name, e.g. `--sysfs-root DIR`.
    pub machine_args: Vec<OsString>,
}

impl Strategy {
    /// The command line for one run; `random` draws a fresh permutation of `allowed` from `rng`.
    pub fn command<R: Rng>(
        &self,
        front: &Frontend,
        program: &[OsString],
        allowed: &[u32],
        rng: &mut R,
    ) -> RunCommand {
        let cpus = match self.kind {
            StrategyKind::Random => {
                let mut p = allowed.to_vec();
                p.shuffle(rng);
                Some(p)
            }
            _ => None,
        };
        RunCommand {
            argv: command_for(&self.kind, front, cpus.as_deref(), program),
            cpus,
        }
    }
}

/// The pure strategy → command mapping. `random_cpus` is the permutation drawn for a random
/// run (ignored for the others).
pub fn command_for(
    kind: &StrategyKind,
    front: &Frontend,
    random_cpus: Option<&[u32]>,
    program: &[OsString],
) -> Vec<OsString> {
    let pin = |opts: Vec<OsString>| -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![front.exe.clone().into(), "pin".into()];
        v.extend(front.machine_args.iter().cloned());
        v.extend(opts);
        v.push("--".into());
        v.extend(program.iter().cloned());
        v
    };
    match kind {
        // Through the same front-end as every pinned strategy, so start-up costs cancel.
        StrategyKind::None => pin(vec!["--os-decides".into()]),
        StrategyKind::Cpus { expr } => pin(vec!["-c".into(), expr.into()]),
        StrategyKind::Policy { name } => pin(vec!["--policy".into(), name.into()]),
        StrategyKind::Sharing { kind, matrix } => {
            let mut arg = OsString::from(format!("{kind}:"));
            arg.push(matrix.as_os_str());
            pin(vec!["--sharing".into(), arg])
        }
        StrategyKind::Random => {
            let list = random_cpus
                .unwrap_or(&[])
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            pin(vec!["-c".into(), list.into()])
        }
        StrategyKind::Autopin => {
            let mut v: Vec<OsString> = vec![front.exe.clone().into(), "run".into()];
            v.extend(front.machine_args.iter().cloned());
            v.push("--".into());
            v.extend(program.iter().cloned());
            v
        }
    }
}

/// Checks strategies against a machine with the placement crate, the same rules
/// `autopin pin` applies.
pub struct MachineCheck<'a> {
    pub machine: &'a autopin_topology::Machine,
}

impl PlacementCheck for MachineCheck<'_> {
    fn policy(&self, name: &str) -> Option<Result<(), PlacementError>> {
        match autopin_placement::policy_pinning(self.machine, name, 1) {
            Ok(_) => Some(Ok(())),
            Err(PlacementError::UnknownPolicy { .. }) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn sharing(&self, kind: &str, matrix: &std::path::Path) -> Result<(), PlacementError> {
        autopin_placement::sharing_pinning(self.machine, kind, matrix).map(|_| ())
    }

    fn expression(&self, expr: &str) -> Result<Vec<u32>, PlacementError> {
        // `COUNT:EXPR` (a thread count in front, `1:1`) is what `autopin pin -c` takes too.
        autopin_placement::team_expression(self.machine, expr).map(|(_, cpus)| cpus)
    }

    fn allowed_cpus(&self) -> Vec<u32> {
        self.machine.allowed_cpuset().iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A physical CPU sequence like `0,0` or `0-3,8`: unlike a CPU set it keeps order and
    /// repeats, because thread i goes to the i-th entry. The placement crate's schedule parser
    /// reads it (one grammar for CPU lists in the workspace).
    fn parse_cpu_sequence(expr: &str) -> Result<Vec<u32>, String> {
        let mut lists =
            autopin_placement::schedule::parse_schedule_lists(expr).map_err(|e| e.to_string())?;
        match lists.len() {
            1 => Ok(lists.remove(0)),
            n => Err(format!("`{expr}` is {n} CPU lists; give one")),
        }
    }
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    struct Fixed;
    impl PlacementCheck for Fixed {
        fn policy(&self, name: &str) -> Option<Result<(), PlacementError>> {
            match name {
                "compact" | "scatter" | "CON_CORE" => Some(Ok(())),
                "POWER" => Some(Err(PlacementError::NeedsMeasurements {
                    policy: "POWER".into(),
                    message: "POWER needs power measurements".into(),
                })),
                _ => None,
            }
        }
        fn sharing(&self, _kind: &str, _matrix: &std::path::Path) -> Result<(), PlacementError> {
            Ok(())
        }
        fn expression(&self, expr: &str) -> Result<Vec<u32>, PlacementError> {
            if expr.starts_with("S0:") {
                return Ok(vec![0, 1]);
            }
            parse_cpu_sequence(expr).map_err(|message| PlacementError::Expr {
                expr: expr.into(),
                position: 0,
                message,
                valid: String::new(),
            })
        }
        fn allowed_cpus(&self) -> Vec<u32> {
            vec![0, 1, 2, 3]
        }
    }

    fn front() -> Frontend {
        Frontend {
            exe: "/bin/autopin".into(),
            machine_args: vec![],
        }
    }
    fn prog() -> Vec<OsString> {
        vec!["./a.out".into(), "-x".into()]
    }
    fn strs(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn classifies_every_form() {
        let k = |s| parse_strategy(s, &Fixed).unwrap().kind;
        assert_eq!(k("none"), StrategyKind::None);
        assert_eq!(k("RANDOM"), StrategyKind::Random);
        assert_eq!(k("autopin"), StrategyKind::Autopin);
        assert_eq!(
            k("compact"),
            StrategyKind::Policy {
                name: "compact".into()
            }
        );
        assert_eq!(k("0,0"), StrategyKind::Cpus { expr: "0,0".into() });
        assert_eq!(
            k("S0:0-1"),
            StrategyKind::Cpus {
                expr: "S0:0-1".into()
            }
        );
        let dir =
            std::env::temp_dir().join(format!("autopin-compare-strat-{}", std::process::id()));
        std::fs::write(&dir, "0 1\n1 0\n").unwrap();
        let spec = format!("lp_compact:{}", dir.display());
        assert_eq!(
            k(&spec),
            StrategyKind::Sharing {
                kind: "LP_COMPACT".into(),
                matrix: dir.clone()
            }
        );
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn rejects_bad_strategies_with_reasons() {
        let e = parse_strategy("fastest", &Fixed).unwrap_err().to_string();
        assert!(e.contains("unknown strategy `fastest`"), "{e}");
        let e = parse_strategy("GP:/nonexistent/m.txt", &Fixed)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        let e = parse_strategy("LPGP:", &Fixed).unwrap_err().to_string();
        assert!(e.contains("needs a sharing matrix"), "{e}");
        assert!(parse_strategy("", &Fixed).is_err());
        assert!(parse_strategy("3-1", &Fixed)
            .unwrap_err()
            .to_string()
            .contains("backwards"));
        assert!(parse_strategy("POWER", &Fixed)
            .unwrap_err()
            .to_string()
            .contains("needs power"));
    }

    #[test]
    fn machine_check_rejects_cpus_outside_the_machine() {
        let m = autopin_topology::source::synthetic::parse("core:2 pu:1").unwrap();
        let c = MachineCheck { machine: &m };
        assert_eq!(c.expression("1,0,1").unwrap(), vec![1, 0, 1]);
        assert!(c.expression("0,7").is_err());
        assert_eq!(c.allowed_cpus(), vec![0, 1]);
        assert_eq!(c.policy("con_core"), Some(Ok(())));
        assert_eq!(c.policy("fastest"), None);
        assert_eq!(
            parse_strategy("0,0", &c).unwrap().kind,
            StrategyKind::Cpus { expr: "0,0".into() }
        );
        assert!(parse_strategy("0,9", &c)
            .unwrap_err()
            .to_string()
            .contains("unknown strategy `0,9`"));
    }

    #[test]
    fn cpu_sequence_keeps_order_and_repeats() {
        assert_eq!(parse_cpu_sequence("3,0-2,0").unwrap(), vec![3, 0, 1, 2, 0]);
        let e = parse_cpu_sequence("0,x").unwrap_err();
        assert!(e.contains("position 2"), "{e}");
    }

    #[test]
    fn command_mapping() {
        let f = Frontend {
            exe: "/bin/autopin".into(),
            machine_args: vec!["--sysfs-root".into(), "/d".into()],
        };
        // `none` goes through the same front-end as the pinned strategies (fair start-up).
        assert_eq!(
            strs(&command_for(&StrategyKind::None, &f, None, &prog())),
            [
                "/bin/autopin",
                "pin",
                "--sysfs-root",
                "/d",
                "--os-decides",
                "--",
                "./a.out",
                "-x"
            ]
        );
        assert_eq!(
            strs(&command_for(
                &StrategyKind::Cpus { expr: "0,0".into() },
                &f,
                None,
                &prog()
            )),
            [
                "/bin/autopin",
                "pin",
                "--sysfs-root",
                "/d",
                "-c",
                "0,0",
                "--",
                "./a.out",
                "-x"
            ]
        );
        assert_eq!(
            strs(&command_for(
                &StrategyKind::Policy {
                    name: "scatter".into()
                },
                &front(),
                None,
                &prog()
            )),
            [
                "/bin/autopin",
                "pin",
                "--policy",
                "scatter",
                "--",
                "./a.out",
                "-x"
            ]
        );
        let sharing = StrategyKind::Sharing {
            kind: "GP".into(),
            matrix: "m.txt".into(),
        };
        assert_eq!(
            strs(&command_for(&sharing, &front(), None, &prog())),
            [
                "/bin/autopin",
                "pin",
                "--sharing",
                "GP:m.txt",
                "--",
                "./a.out",
                "-x"
            ]
        );
        assert_eq!(
            strs(&command_for(
                &StrategyKind::Random,
                &front(),
                Some(&[2, 0, 1]),
                &prog()
            )),
            ["/bin/autopin", "pin", "-c", "2,0,1", "--", "./a.out", "-x"]
        );
        assert_eq!(
            strs(&command_for(
                &StrategyKind::Autopin,
                &front(),
                None,
                &prog()
            )),
            ["/bin/autopin", "run", "--", "./a.out", "-x"]
        );
    }

    #[test]
    fn random_draws_a_seeded_permutation_each_run() {
        let s = parse_strategy("random", &Fixed).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let draws: Vec<Vec<u32>> = (0..6)
            .map(|_| {
                s.command(&front(), &prog(), &[0, 1, 2, 3], &mut rng)
                    .cpus
                    .unwrap()
            })
            .collect();
        for d in &draws {
            let mut sorted = d.clone();
            sorted.sort();
            assert_eq!(sorted, vec![0, 1, 2, 3]);
        }
        assert!(
            draws.iter().any(|d| d != &draws[0]),
            "six draws all equal: {draws:?}"
        );
        let mut rng2 = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(
            s.command(&front(), &prog(), &[0, 1, 2, 3], &mut rng2)
                .cpus
                .unwrap(),
            draws[0]
        );
    }
}
