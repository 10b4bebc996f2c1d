//! A program that binds its own threads: OpenMP's binding variables in its environment
//! (`OMP_PROC_BIND=true`, `OMP_PLACES=cores`, `GOMP_CPU_AFFINITY`, `KMP_AFFINITY`). Someone
//! chose that binding on purpose; by default autopin stands back and leaves it in force,
//! and with `--override-binding` it takes over (the variables are unset for a program it
//! launches, so the OpenMP runtime no longer binds and autopin's pinnings decide alone).

/// The variables through which OpenMP runtimes bind threads.
pub const BINDING_VARS: [&str; 4] = [
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "GOMP_CPU_AFFINITY",
    "KMP_AFFINITY",
];

/// The binding `env` asks for, as `VAR=value` text; None when it asks for none (unset,
/// empty, or switched off).
pub fn own_binding(env: &[(String, String)]) -> Option<String> {
    let mut said = Vec::new();
    for var in BINDING_VARS {
        let Some(v) = env
            .iter()
            .rev()
            .find(|(k, _)| k == var)
            .map(|(_, v)| v)
            .filter(|v| !v.trim().is_empty())
        else {
            continue;
        };
        let off = match var {
            "OMP_PROC_BIND" => v.trim().eq_ignore_ascii_case("false"),
            "KMP_AFFINITY" => {
                let l = v.to_ascii_lowercase();
                l.contains("disabled") || l.contains("none")
            }
            _ => false,
        };
        if !off {
            said.push(format!("{var}={v}"));
        }
    }
    (!said.is_empty()).then(|| said.join(" "))
}

#[cfg(test)]
mod tests {
    use super::own_binding;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_programs_own_openmp_binding_is_recognized() {
        assert_eq!(own_binding(&env(&[])), None);
        assert_eq!(own_binding(&env(&[("OMP_PROC_BIND", "false")])), None);
        assert_eq!(own_binding(&env(&[("KMP_AFFINITY", "disabled")])), None);
        assert_eq!(own_binding(&env(&[("OMP_PLACES", " ")])), None);
        assert_eq!(
            own_binding(&env(&[("OMP_PROC_BIND", "true"), ("OMP_PLACES", "cores")])),
            Some("OMP_PROC_BIND=true OMP_PLACES=cores".into())
        );
        assert_eq!(
            own_binding(&env(&[("GOMP_CPU_AFFINITY", "0-3"), ("PATH", "/bin")])),
            Some("GOMP_CPU_AFFINITY=0-3".into())
        );
    }
}
