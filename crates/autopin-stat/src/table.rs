//! The report as a person reads it: one row per thread, then the neighbours and verdicts.

use crate::verdict::StatReport;

/// The per-thread table, the busy neighbours and the verdicts (or that nothing is wrong).
pub fn render(r: &StatReport) -> String {
    let mut rows = vec![[
        "TID".to_string(),
        "NAME".into(),
        "CPU%".into(),
        "WAIT%".into(),
        "CPUS".into(),
        "MIGR".into(),
        "VCSW".into(),
        "ICSW".into(),
    ]];
    for t in &r.threads {
        rows.push([
            t.tid.to_string(),
            t.name.clone(),
            format!("{:.1}", 100.0 * t.cpu_share),
            format!("{:.1}", 100.0 * t.run_delay_fraction),
            t.cpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            t.migrations.map_or("-".into(), |m| m.to_string()),
            t.voluntary_switches.to_string(),
            t.involuntary_switches.to_string(),
        ]);
    }
    let mut out = format!(
        "{} thread(s) over {:.2} s (CPU%: of one CPU; WAIT%: runnable but waiting for a CPU)\n",
        r.threads.len(),
        r.seconds
    );
    // Names and CPU lists read left-aligned, numbers right-aligned.
    out.push_str(&autopin_human::columns(&rows, |i| i != 1 && i != 4));
    for (pid, name, share, cpus) in &r.neighbours {
        out.push_str(&format!(
            "neighbour: PID {pid} ({name}) ran {:.0}% of a CPU on CPU {}\n",
            100.0 * share,
            cpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    if let Some(s) = r.throttled_seconds {
        out.push_str(&format!("cgroup throttling: {s:.2} s\n"));
    }
    if r.verdicts.is_empty() {
        out.push_str("verdict: nothing wrong found\n");
    }
    for v in &r.verdicts {
        out.push_str(&format!("verdict {}: {}\n", v.kind, v.text));
        for e in &v.evidence {
            out.push_str(&format!("  - {e}\n"));
        }
        out.push_str(&format!("  try: {}\n", v.suggestion));
    }
    out
}
