//! Job reports: the merge of the ranks' reports into one job report with a per-node table
//! of decisions and an SVG of every rank's probed rates.

use crate::error::MergeError;
use crate::report::{JobLauncher, JobPlace, LaunchRecord, Report};
use autopin_topology::view::svg::esc as xml;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One rank in a job report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankSummary {
    pub file: String,
    pub launch: LaunchRecord,
    pub decision: Option<String>,
    pub decision_index: Option<usize>,
    pub cpus: Option<Vec<u32>>,
    pub rate: Option<f64>,
    pub complete: bool,
    pub exit_status: Option<i32>,
    /// Mean probed rate per candidate index.
    pub rates: BTreeMap<usize, f64>,
    /// Each candidate's label in this rank's report (its CPUs are the rank's own share).
    #[serde(default)]
    pub labels: BTreeMap<usize, String>,
}

/// One node: its ranks and whether they decided on the same candidate class.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeSummary {
    pub node: String,
    pub ranks: Vec<usize>,
    /// Candidate index each rank decided on (rank → index), None where it did not decide.
    pub decisions: BTreeMap<usize, Option<usize>>,
    pub agreed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobReport {
    pub tool: String,
    pub jobs: Vec<String>,
    pub objective: String,
    pub unit: String,
    pub ranks: Vec<RankSummary>,
    pub nodes: Vec<NodeSummary>,
}

/// Merges rank reports (file name, report). Reports without a launch record count as rank
/// order of appearance on node "localhost".
pub fn merge(inputs: &[(String, Report)]) -> Result<JobReport, MergeError> {
    if inputs.is_empty() {
        return Err(MergeError::NoReports);
    }
    let mut ranks = Vec::new();
    for (i, (file, r)) in inputs.iter().enumerate() {
        let launch = r.launch.clone().unwrap_or(LaunchRecord {
            place: JobPlace {
                launcher: JobLauncher::Plain,
                rank: i,
                size: inputs.len(),
                ..Default::default()
            },
            ..Default::default()
        });
        let mut sums: BTreeMap<usize, (f64, usize)> = BTreeMap::new();
        for p in &r.probes {
            let e = sums.entry(p.candidate).or_default();
            e.0 += p.rate;
            e.1 += 1;
        }
        ranks.push(RankSummary {
            file: file.clone(),
            decision: r.decision.as_ref().map(|d| d.candidate.clone()),
            decision_index: r.decision.as_ref().map(|d| d.candidate_index),
            cpus: r.decision.as_ref().and_then(|d| d.cpus.clone()),
            rate: r.decision.as_ref().and_then(|d| d.rate),
            complete: r.complete,
            exit_status: r.exit_status,
            rates: sums
                .into_iter()
                .map(|(k, (s, n))| (k, s / n as f64))
                .collect(),
            labels: r
                .candidates
                .iter()
                .map(|c| (c.index, c.label.clone()))
                .collect(),
            launch,
        });
    }
    ranks.sort_by(|a, b| {
        a.launch
            .place
            .rank
            .cmp(&b.launch.place.rank)
            .then(a.file.cmp(&b.file))
    });
    for w in ranks.windows(2) {
        if w[0].launch.place.rank == w[1].launch.place.rank
            && w[0].launch.place.job == w[1].launch.place.job
        {
            return Err(MergeError::SameRank {
                first: w[0].file.clone(),
                second: w[1].file.clone(),
                rank: w[0].launch.place.rank,
            });
        }
    }
    let mut by_node: BTreeMap<String, Vec<&RankSummary>> = BTreeMap::new();
    for r in &ranks {
        let node = r
            .launch
            .place
            .node
            .clone()
            .unwrap_or_else(|| "localhost".into());
        by_node.entry(node).or_default().push(r);
    }
    let nodes = by_node
        .into_iter()
        .map(|(node, rs)| {
            let decisions: BTreeMap<usize, Option<usize>> = rs
                .iter()
                .map(|r| (r.launch.place.rank, r.decision_index))
                .collect();
            let first = rs[0].decision_index;
            NodeSummary {
                node,
                ranks: rs.iter().map(|r| r.launch.place.rank).collect(),
                agreed: first.is_some() && rs.iter().all(|r| r.decision_index == first),
                decisions,
            }
        })
        .collect();
    let mut jobs: Vec<String> = ranks
        .iter()
        .filter_map(|r| r.launch.place.job.clone())
        .collect();
    jobs.sort();
    jobs.dedup();
    Ok(JobReport {
        tool: "autopin".into(),
        jobs,
        objective: inputs[0].1.objective.name.clone(),
        unit: inputs[0].1.objective.unit.clone(),
        ranks,
        nodes,
    })
}

impl JobReport {
    /// The per-node table for a person.
    pub fn table(&self) -> Vec<String> {
        let mut out = vec![format!(
            "{:<12} {:>5} {:>6} {:<28} {:>12} {:<8}",
            "node", "rank", "local", "decision", "rate", "agreed"
        )];
        for n in &self.nodes {
            for r in self
                .ranks
                .iter()
                .filter(|r| n.ranks.contains(&r.launch.place.rank))
            {
                out.push(format!(
                    "{:<12} {:>5} {:>6} {:<28} {:>12} {:<8}",
                    n.node,
                    r.launch.place.rank,
                    format!(
                        "{}/{}",
                        r.launch.place.local_rank, r.launch.place.local_size
                    ),
                    r.decision.as_deref().unwrap_or("(none)"),
                    r.rate.map(autopin_human::number).unwrap_or("-".into()),
                    if n.agreed { "yes" } else { "no" }
                ));
            }
        }
        out
    }

    /// What candidate `c` is: its label when every rank that has it gives the same one,
    /// else each rank's (`rank 0 0,1; rank 1 2,3`), or "?" when no report names it.
    fn candidate_label(&self, c: usize) -> String {
        let named: Vec<(usize, &String)> = self
            .ranks
            .iter()
            .filter_map(|r| r.labels.get(&c).map(|l| (r.launch.place.rank, l)))
            .collect();
        match named.first() {
            None => "?".into(),
            Some((_, l)) if named.iter().all(|(_, m)| m == l) => (*l).clone(),
            _ => named
                .iter()
                .map(|(r, l)| format!("rank {r} {l}"))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    // Over 100 lines on purpose: one drawing, top to bottom; the scales and positions set at
    // the top are used by every part after them (axes, bars, legend).
    /// Grouped bars: for every candidate index, one bar per rank (its mean probed rate).
    pub fn svg(&self) -> String {
        let cands: Vec<usize> = {
            let mut v: Vec<usize> = self
                .ranks
                .iter()
                .flat_map(|r| r.rates.keys().copied())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let max = self
            .ranks
            .iter()
            .flat_map(|r| r.rates.values().copied())
            .fold(0.0f64, f64::max)
            .max(1e-300);
        let nr = self.ranks.len().max(1);
        let bar = 14.0;
        let group = bar * nr as f64 + 16.0;
        let (left, top, h) = (70.0, 40.0, 220.0);
        // Ranks of a plain launch belong to no job: then the title names none.
        let title = match self.jobs.len() {
            0 => format!("{} per rank and candidate (mean of probes)", self.unit),
            _ => format!(
                "{} per rank and candidate (mean of probes); jobs: {}",
                self.unit,
                self.jobs.join(", ")
            ),
        };
        // The key under the axis names each candidate: its label where every rank has the
        // same one, else each rank's (ranks pin their own share of the node's CPUs).
        let key: Vec<String> = cands
            .iter()
            .map(|c| format!("#{c}: {}", self.candidate_label(*c)))
            .collect();
        // Wide enough for the title and the key (about 6.5 px a character at 11–13 px).
        let text_w = |t: &str| 6.5 * t.chars().count() as f64;
        let longest = key.iter().map(|k| text_w(k)).fold(text_w(&title), f64::max);
        let width = (left + group * cands.len().max(1) as f64 + 160.0).max(left + longest + 20.0);
        let key_top = top + h + 40.0;
        let height = key_top + 14.0 * key.len() as f64 + 30.0;
        let colors = [
            "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
        ];
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="20" font-size="13">{}</text>"#,
            xml(&title)
        );
        let _ = writeln!(
            s,
            r#"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
            top + h,
            left + group * cands.len().max(1) as f64,
            top + h
        );
        let _ = writeln!(
            s,
            r#"<text x="5" y="{}">{}</text><text x="5" y="{}">0</text>"#,
            top + 10.0,
            autopin_human::number(max),
            top + h
        );
        for (gi, c) in cands.iter().enumerate() {
            let gx = left + gi as f64 * group + 8.0;
            for (ri, r) in self.ranks.iter().enumerate() {
                if let Some(v) = r.rates.get(c) {
                    let bh = h * v / max;
                    let chosen = r.decision_index == Some(*c);
                    let _ = writeln!(
                        s,
                        r#"<rect x="{:.1}" y="{:.1}" width="{bar}" height="{bh:.1}" fill="{}" stroke="{}" stroke-width="{}"><title>rank {} candidate {c}: {}</title></rect>"#,
                        gx + ri as f64 * bar,
                        top + h - bh,
                        colors[ri % colors.len()],
                        if chosen { "black" } else { "none" },
                        if chosen { 2 } else { 0 },
                        r.launch.place.rank,
                        autopin_human::number(*v)
                    );
                }
            }
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{}">#{c}</text>"#,
                gx,
                top + h + 15.0
            );
        }
        for (ri, r) in self.ranks.iter().enumerate() {
            let y = top + 14.0 * ri as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{:.0}" y="{y}" width="10" height="10" fill="{}"/><text x="{:.0}" y="{}">rank {} ({})</text>"#,
                width - 140.0,
                colors[ri % colors.len()],
                width - 125.0,
                y + 9.0,
                r.launch.place.rank,
                xml(r.launch.place.node.as_deref().unwrap_or("localhost"))
            );
        }
        for (i, k) in key.iter().enumerate() {
            let _ = writeln!(
                s,
                r#"<text x="{left}" y="{}">{}</text>"#,
                key_top + 14.0 * i as f64,
                xml(k)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="{}">outlined: the candidate the rank decided on</text>"#,
            height - 15.0
        );
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{DecisionRecord, ProbeRecord};

    fn rank_report(rank: usize, node: &str, decided: usize, rates: &[f64]) -> Report {
        let mut r = Report {
            complete: true,
            launch: Some(LaunchRecord {
                place: JobPlace {
                    launcher: JobLauncher::Slurm,
                    job: Some("5".into()),
                    step: Some("0".into()),
                    node: Some(node.into()),
                    rank,
                    size: 4,
                    local_rank: rank % 2,
                    local_size: 2,
                },
                share: format!("{}", rank % 2),
                coordinated_with: vec![0, 1],
                combine: Some("min".into()),
                clock_origin: None,
            }),
            ..Default::default()
        };
        for (i, v) in rates.iter().enumerate() {
            // Candidate 0 is the same everywhere; candidate 1 is the rank's own CPU.
            r.candidates.push(crate::report::CandidateRecord {
                index: i,
                label: if i == 0 {
                    "unpinned (OS decides)".into()
                } else {
                    format!("{} (1 thread)", rank % 2)
                },
                cpus: None,
                team: None,
            });
            r.probes.push(ProbeRecord {
                search: 0,
                candidate: i,
                label: format!("c{i}"),
                start: i as f64,
                warmup: 0.0,
                duration: 1.0,
                rate: *v,
                ticks: vec![],
                per_thread: vec![],
                intervals: 10,
                disturbed_intervals: 0,
                churn: false,
                phase: None,
                off_phase_intervals: 0,
                team_lag_intervals: 0,
                progress_rate: None,
                startup: false,
            });
        }
        r.decision = Some(DecisionRecord {
            search: 0,
            at: 3.0,
            candidate: format!("c{decided}"),
            candidate_index: decided,
            cpus: Some(vec![rank as u32 % 2]),
            rate: Some(rates[decided]),
            runner_up: None,
            runner_up_rate: None,
            margin: None,
            margin_ci: None,
            reason: "test".into(),
            strategy: "race".into(),
            phase: None,
            team: None,
            search_cost: None,
        });
        r
    }

    #[test]
    fn merges_two_nodes_with_a_table_and_an_svg() {
        let inputs = vec![
            (
                "r3.json".to_string(),
                rank_report(3, "node2", 1, &[1.0, 4.0]),
            ),
            (
                "r0.json".to_string(),
                rank_report(0, "node1", 0, &[2.0, 1.0]),
            ),
            (
                "r1.json".to_string(),
                rank_report(1, "node1", 0, &[3.0, 1.0]),
            ),
            (
                "r2.json".to_string(),
                rank_report(2, "node2", 0, &[1.0, 4.0]),
            ),
        ];
        let j = merge(&inputs).unwrap();
        assert_eq!(j.jobs, ["5"]);
        assert_eq!(
            j.ranks
                .iter()
                .map(|r| r.launch.place.rank)
                .collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(j.nodes.len(), 2);
        assert_eq!(j.nodes[0].node, "node1");
        assert!(j.nodes[0].agreed);
        assert_eq!(j.nodes[1].ranks, [2, 3]);
        assert!(!j.nodes[1].agreed, "ranks 2 and 3 decided differently");
        let t = j.table();
        assert_eq!(t.len(), 5);
        assert!(t[4].starts_with("node2") && t[4].contains(" no"), "{t:?}");
        let svg = j.svg();
        assert_eq!(
            svg.matches("<rect x=").count() - 4,
            8,
            "8 bars + 4 legend boxes"
        );
        assert!(svg.contains("rank 3 candidate 1: 4.00<"), "{svg}");
        // The key names every candidate: one label where all ranks agree, each rank's where
        // they pin their own CPUs.
        assert!(svg.contains(">#0: unpinned (OS decides)<"), "{svg}");
        assert!(
            svg.contains(">#1: rank 0 0 (1 thread); rank 1 1 (1 thread); rank 2 0 (1 thread); rank 3 1 (1 thread)<"),
            "{svg}"
        );
        // The picture is wide enough for its title and its key.
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        let title = "per rank and candidate (mean of probes); jobs: 5";
        assert!(width >= 70.0 + 6.5 * title.len() as f64, "{width}");
    }

    #[test]
    fn duplicate_ranks_and_empty_input_are_errors() {
        assert!(merge(&[]).unwrap_err().to_string().contains("no reports"));
        let a = rank_report(0, "n", 0, &[1.0]);
        let e = merge(&[("a".into(), a.clone()), ("b".into(), a)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("both rank 0"), "{e}");
    }
}
