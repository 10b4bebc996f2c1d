//! The report as a person reads it: one row per thread, then the neighbours and verdicts.

use crate::verdict::StatReport;

/// A thread's CPUs, and their NUMA node(s) on a machine of several.
fn cpus_cell(cpus: &[u32], nodes: &[u32]) -> String {
    let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    if nodes.is_empty() {
        join(cpus)
    } else {
        format!("{} (node {})", join(cpus), join(nodes))
    }
}

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
    for t in &r.figures.threads {
        rows.push([
            t.tid.to_string(),
            t.name.clone(),
            format!("{:.1}", 100.0 * t.cpu_share),
            format!("{:.1}", 100.0 * t.run_delay_fraction),
            cpus_cell(&t.cpus, &t.numa_nodes),
            t.migrations.map_or("-".into(), |m| m.to_string()),
            t.voluntary_switches.to_string(),
            t.involuntary_switches.to_string(),
        ]);
    }
    let mut out = format!(
        "{} thread(s) over {:.2} s (CPU%: of one CPU; WAIT%: runnable but waiting for a CPU)\n",
        r.figures.threads.len(),
        r.figures.seconds
    );
    // Names and CPU lists read left-aligned, numbers right-aligned.
    out.push_str(&autopin_human::columns(&rows, |i| i != 1 && i != 4));
    out.push_str(&crate::counting::render(r));
    for (pid, name, share, cpus) in &r.figures.neighbours {
        out.push_str(&format!(
            "neighbour: PID {pid} ({name}) ran {:.0}% of a CPU on CPU {}\n",
            100.0 * share,
            cpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    let mut progress = Vec::new();
    if let Some(h) = r.figures.heartbeats_per_second {
        progress.push(format!("{} heartbeats/s", autopin_human::si(h)));
    }
    if let Some(o) = r.figures.openmp_constructs_per_second {
        progress.push(format!("{} OpenMP constructs/s", autopin_human::si(o)));
    }
    if !progress.is_empty() {
        out.push_str(&format!("progress: {}\n", progress.join(", ")));
    }
    let pages: u64 = r.figures.pages_per_node.iter().map(|p| p.1).sum();
    if pages > 0 {
        let each: Vec<String> = r
            .figures
            .pages_per_node
            .iter()
            .map(|(n, p)| {
                format!(
                    "node {n} {:.0} MiB ({:.0}%)",
                    crate::sample::pages_mib(*p),
                    100.0 * *p as f64 / pages as f64
                )
            })
            .collect();
        out.push_str(&format!("memory by NUMA node: {}\n", each.join(", ")));
    }
    if let Some(s) = r.figures.throttled_seconds {
        out.push_str(&format!("cgroup throttling: {s:.2} s\n"));
    }
    // What the intervals found that the whole run's figures do not show (a contention in
    // 7 of 10 seconds may average out below the line over the whole run).
    let only_in_intervals: Vec<String> = r
        .intervals
        .iter()
        .flat_map(|t| {
            t.found
                .iter()
                .filter(|(k, _)| !r.verdicts.iter().any(|v| v.kind == k.as_str()))
                .map(move |(k, n)| format!("{k} in {n} of {} intervals", t.intervals))
        })
        .collect();
    if r.verdicts.is_empty() && only_in_intervals.is_empty() {
        out.push_str("verdict: nothing wrong found\n");
    } else if r.verdicts.is_empty() {
        out.push_str(&format!(
            "verdict: nothing wrong found over the whole {:.1} s, but {} (see them above)\n",
            r.figures.seconds,
            only_in_intervals.join(", ")
        ));
    } else if !only_in_intervals.is_empty() {
        out.push_str(&format!(
            "also in the intervals, not over the whole run: {}\n",
            only_in_intervals.join(", ")
        ));
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
