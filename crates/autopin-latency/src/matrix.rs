//! A square matrix of one-way core-to-core latencies, symmetric, diagonal 0.

use autopin_topology::LatencyTable;
use serde::{Deserialize, Serialize};

/// What the numbers of a [`LatencyMatrix`] count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// Nanoseconds (core-to-core-latency CSVs, live measurements).
    Nanoseconds,
    /// CPU (or TSC) cycles, frequency unknown (MCTOP `.mct` files).
    Cycles,
}

impl Unit {
    pub fn short(self) -> &'static str {
        match self {
            Unit::Nanoseconds => "ns",
            Unit::Cycles => "cycles",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyMatrix {
    /// OS indexes of rows and columns.
    pub cpus: Vec<u32>,
    /// `values[i][j]`: latency between `cpus[i]` and `cpus[j]` in `unit`.
    pub values: Vec<Vec<f64>>,
    pub unit: Unit,
    /// Cycles per nanosecond of the clock used (TSC GHz) when it is known, so both units can
    /// be written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ghz: Option<f64>,
    /// Where the numbers came from: `measured` or a file name.
    pub source: String,
}

impl LatencyMatrix {
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.values[i][j]
    }

    /// Off-diagonal values of the upper triangle.
    pub fn pairs(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        let n = self.len();
        (0..n).flat_map(move |i| ((i + 1)..n).map(move |j| (i, j, self.values[i][j])))
    }

    /// The matrix in nanoseconds, when the unit allows it.
    pub fn ns(&self) -> Option<Vec<Vec<f64>>> {
        match (self.unit, self.ghz) {
            (Unit::Nanoseconds, _) => Some(self.values.clone()),
            (Unit::Cycles, Some(g)) if g > 0.0 => Some(scale(&self.values, 1.0 / g)),
            _ => None,
        }
    }

    /// The matrix in cycles, when the unit allows it.
    pub fn cycles(&self) -> Option<Vec<Vec<f64>>> {
        match (self.unit, self.ghz) {
            (Unit::Cycles, _) => Some(self.values.clone()),
            (Unit::Nanoseconds, Some(g)) if g > 0.0 => Some(scale(&self.values, g)),
            _ => None,
        }
    }

    /// The model's table (nanoseconds). Cycle-only matrices are stored as they are and say so
    /// in `source`, since the model has no other place for them.
    pub fn to_table(&self) -> LatencyTable {
        match self.ns() {
            Some(ns) => LatencyTable {
                cpus: self.cpus.clone(),
                ns,
                source: self.source.clone(),
            },
            None => LatencyTable {
                cpus: self.cpus.clone(),
                ns: self.values.clone(),
                source: format!("{} (CPU cycles, clock frequency unknown)", self.source),
            },
        }
    }
}

fn scale(v: &[Vec<f64>], k: f64) -> Vec<Vec<f64>> {
    v.iter()
        .map(|r| r.iter().map(|x| x * k).collect())
        .collect()
}
