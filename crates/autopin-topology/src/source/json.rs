//! Loading a model back from `autopin topology --format json`.

use crate::error::JsonTopologyError;
use crate::model::Machine;

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

/// Loads a model from a file `--format json` wrote (bounded and symlink-safe: the
/// `linux` feature).
#[cfg(feature = "linux")]
pub fn load(path: &std::path::Path) -> crate::Result<Machine> {
    let text = autopin_files::read_to_string_bounded(path, autopin_files::MAX_INPUT)
        .map_err(|e| crate::TopologyError::file(path, e.to_string()))?;
    from_str(&text).map_err(|e| crate::TopologyError::file(path, e.to_string()))
}

pub fn from_str(text: &str) -> std::result::Result<Machine, JsonTopologyError> {
    let doc: Document =
        serde_json::from_str(text).map_err(|e| JsonTopologyError::NotADocument {
            line: e.line(),
            column: e.column(),
            cause: e,
        })?;
    doc.machine
        .validate()
        .map_err(JsonTopologyError::Inconsistent)?;
    Ok(doc.machine)
}
