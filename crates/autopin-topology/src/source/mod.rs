//! Where a machine model comes from.

pub mod hwloc_xml;
pub mod json;
#[cfg(feature = "linux")]
pub mod pci;
pub mod synthetic;
#[cfg(feature = "linux")]
pub mod sysfs;

#[cfg(feature = "linux")]
use crate::error::{Result, TopologyError};
#[cfg(feature = "linux")]
use crate::model::Machine;
#[cfg(feature = "linux")]
use std::path::Path;

#[cfg(feature = "linux")]
/// Loads a machine from a file, JSON or hwloc XML, told apart by the first non-blank byte.
pub fn load_file(path: &Path) -> Result<Machine> {
    let text = autopin_files::read_to_string_bounded(path, autopin_files::MAX_INPUT)
        .map_err(|e| TopologyError::file(path, e.to_string()))?;
    match text.trim_start().as_bytes().first() {
        Some(b'{') => json::from_str(&text).map_err(|e| TopologyError::file(path, e.to_string())),
        Some(b'<') => hwloc_xml::from_str(&text).map_err(|source| TopologyError::HwlocXml {
            path: path.to_path_buf(),
            source,
        }),
        _ => Err(TopologyError::file(
            path,
            "neither an autopin topology JSON document nor hwloc XML",
        )),
    }
}
