//! Loading a model back from `autopin topology --format json`.

use crate::error::{Result, TopologyError};
use crate::model::Machine;
use std::path::Path;

/// The JSON document `--format json` writes: the full model plus the flat `pus` view (which
/// is derived, so loading ignores it).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Document {
    pub machine: Machine,
    #[serde(default, skip_deserializing)]
    pub pus: Vec<crate::machine::FlatPu>,
    #[serde(default, skip_deserializing)]
    pub summary: Vec<String>,
}

pub fn to_document(m: &Machine) -> Document {
    Document {
        machine: m.clone(),
        pus: m.flat_pus(),
        summary: m.summary_lines(),
    }
}

pub fn load(path: &Path) -> Result<Machine> {
    let text =
        std::fs::read_to_string(path).map_err(|e| TopologyError::file(path, e.to_string()))?;
    from_str(&text).map_err(|m| TopologyError::file(path, m))
}

pub fn from_str(text: &str) -> std::result::Result<Machine, String> {
    let doc: Document = serde_json::from_str(text).map_err(|e| {
        format!(
            "not an autopin topology JSON document (line {}, column {}): {e}",
            e.line(),
            e.column()
        )
    })?;
    doc.machine
        .validate()
        .map_err(|e| format!("inconsistent topology: {e}"))?;
    Ok(doc.machine)
}
