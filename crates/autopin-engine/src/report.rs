//! The run report: machine, candidates, every probe, decisions, re-searches and the
//! timeline. Written as JSON (`--report`) and CSV (`--timeline`), atomically (temp file +
//! rename) so a reader never sees half a report, even when the target dies mid-search.

use crate::candidate::Candidate;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ObjectiveInfo {
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadRate {
    pub tid: u32,
    /// Position among tracked threads in creation order.
    pub index: usize,
    pub rate: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// Which search (0 = first, 1.. = re-searches) the probe belongs to.
    pub search: usize,
    pub candidate: usize,
    pub label: String,
    /// Start of the measurement (seconds since autopin started), after the warm-up.
    pub start: f64,
    pub warmup: f64,
    pub duration: f64,
    /// Objective rate over the accepted intervals.
    pub rate: f64,
    pub per_thread: Vec<ThreadRate>,
    pub intervals: usize,
    /// Intervals during which threads were born or exited; left out of `rate` unless every
    /// interval was disturbed (continuous thread churn), which `churn` then says.
    pub disturbed_intervals: usize,
    pub churn: bool,
    /// Program phase the probe measured (heartbeat channel); None when the program announces
    /// no phases. Intervals of another phase, or spanning a phase change, are left out.
    #[serde(default)]
    pub phase: Option<String>,
    /// Intervals left out because they belonged to another phase or spanned a change.
    #[serde(default)]
    pub off_phase_intervals: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub search: usize,
    /// Seconds since autopin started.
    pub at: f64,
    /// The chosen candidate's text (a CPU list in thread order, or "unpinned (OS decides)").
    pub candidate: String,
    pub candidate_index: usize,
    /// The chosen CPU of each tracked thread in creation order (null when unpinned).
    pub cpus: Option<Vec<u32>>,
    pub rate: Option<f64>,
    pub runner_up: Option<String>,
    pub runner_up_rate: Option<f64>,
    /// (winner − runner-up) / runner-up, on the objective's better-is-higher scale.
    pub margin: Option<f64>,
    /// Half-width of the confidence interval on that relative difference, when computed.
    pub margin_ci: Option<f64>,
    pub reason: String,
    pub strategy: String,
    /// The program phase this decision is for (None: no phases announced).
    #[serde(default)]
    pub phase: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchRecord {
    pub index: usize,
    pub start: f64,
    /// Why it started ("start", or the PhaseWatch trigger).
    pub trigger: String,
    pub candidates: usize,
    /// The program phase searched for.
    #[serde(default)]
    pub phase: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimelinePoint {
    pub t: f64,
    pub rate: f64,
    /// Candidate applied during the interval (None before the first pinning).
    pub candidate: Option<usize>,
    /// init, warmup, probe or decided.
    pub state: String,
    /// Program phase at the end of the interval.
    #[serde(default)]
    pub phase: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub command: Vec<String>,
    pub machine: Vec<String>,
    pub objective: ObjectiveInfo,
    pub strategy: String,
    pub counting_mode: String,
    pub notes: Vec<String>,
    pub candidates: Vec<CandidateRecord>,
    pub searches: Vec<SearchRecord>,
    pub probes: Vec<ProbeRecord>,
    /// The last decision (what the program ran with at the end).
    pub decision: Option<DecisionRecord>,
    /// Every decision, first search and re-searches.
    pub decisions: Vec<DecisionRecord>,
    pub timeline: Vec<TimelinePoint>,
    /// False when the program ended before the (first) search finished.
    pub complete: bool,
    pub incomplete_reason: Option<String>,
    pub exit_status: Option<i32>,
    pub threads_seen: usize,
    pub wall_time: f64,
    /// Seconds spent searching (warm-ups included) over all searches.
    pub search_time: f64,
    /// autopin's own CPU time (user+sys) ÷ wall time, when measured.
    pub monitor_cpu_share: Option<f64>,
    /// Estimated slowdown of the target caused by counting, when estimated (relative).
    pub perturbation: Option<f64>,
    pub perturbation_note: Option<String>,
    /// Where this run stood in a Slurm/MPI launch (None for plain runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<crate::job_report::LaunchRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateRecord {
    pub index: usize,
    pub label: String,
    pub cpus: Option<Vec<u32>>,
}

impl CandidateRecord {
    pub fn from(index: usize, c: &Candidate) -> Self {
        CandidateRecord {
            index,
            label: c.label.clone(),
            cpus: c.cpus.clone(),
        }
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, then rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    pub fn write_json(&self, path: &Path) -> std::io::Result<()> {
        write_atomic(path, self.to_json().as_bytes())
    }

    /// Timeline as CSV: t,rate,candidate,label,state.
    pub fn timeline_csv(&self) -> String {
        let mut s = String::from("t,rate,candidate,label,state\n");
        for p in &self.timeline {
            let (idx, label) = match p.candidate {
                Some(i) => (
                    i.to_string(),
                    self.candidates
                        .get(i)
                        .map(|c| c.label.clone())
                        .unwrap_or_default(),
                ),
                None => (String::new(), String::new()),
            };
            s.push_str(&format!(
                "{:.3},{:.6e},{},\"{}\",{}\n",
                p.t, p.rate, idx, label, p.state
            ));
        }
        s
    }

    pub fn write_csv(&self, path: &Path) -> std::io::Result<()> {
        write_atomic(path, self.timeline_csv().as_bytes())
    }

    pub fn from_json(text: &str) -> Result<Report, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_and_roundtrip() {
        let dir = std::env::temp_dir().join(format!("autopin-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        let r = Report {
            timeline: vec![TimelinePoint {
                t: 0.1,
                rate: 5.0,
                candidate: Some(0),
                state: "probe".into(),
                phase: None,
            }],
            candidates: vec![CandidateRecord {
                index: 0,
                label: "0,1".into(),
                cpus: Some(vec![0, 1]),
            }],
            ..Default::default()
        };
        r.write_json(&path).unwrap();
        let back = Report::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back.candidates[0].label, "0,1");
        assert!(r
            .timeline_csv()
            .contains("0.100,5.000000e0,0,\"0,1\",probe"));
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
