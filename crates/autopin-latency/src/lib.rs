//! autopin-latency

use autopin_topology::Machine;
use std::path::Path;

/// Infers a machine from a latency file (core-to-core-latency CSV or MCTOP `.mct`).
pub fn load_machine(path: &Path) -> Result<Machine, String> {
    Err(format!("{}: inference from latency files is not built yet", path.display()))
}
