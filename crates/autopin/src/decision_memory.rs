//! What a run's options ask of the decision store ([`autopin_memory::MemoryRequest`]): its
//! file, whether the search named on the command line wins over a remembered decision, and
//! the key's parts the options set. The store's use in the run is autopin-memory's
//! (`RunMemory`), and so is what a record means for it (`policy`).

use crate::cmd::engine_args::EngineArgs;
use autopin_memory::MemoryRequest;
use std::path::PathBuf;

/// The store's file for these options: `--memory`, else the default (an error saying why
/// not: `--no-memory`, `AUTOPIN_MEMORY=off`, or no home directory).
fn store_path(a: &EngineArgs) -> Result<PathBuf, String> {
    if a.no_memory {
        return Err("--no-memory".into());
    }
    if let Some(p) = &a.memory_store {
        return Ok(p.clone());
    }
    if std::env::var("AUTOPIN_MEMORY").is_ok_and(|v| v.eq_ignore_ascii_case("off")) {
        return Err("AUTOPIN_MEMORY=off".into());
    }
    autopin_memory::default_path().ok_or_else(|| "no home directory for the store".into())
}

/// What these options ask of the store.
pub fn request(a: &EngineArgs) -> MemoryRequest {
    let threads = a
        .threads
        .and_then(|t| t.count())
        .map(|n| n.to_string())
        .or_else(|| {
            std::env::var("OMP_NUM_THREADS")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| "auto".into());
    let objective = a
        .objective
        .clone()
        .or_else(|| a.event.clone())
        .unwrap_or_else(|| "default".into());
    MemoryRequest {
        store: store_path(a),
        // What the user names is what runs: memory serves the default search.
        named: a.named_search().filter(|_| !a.recall),
        key_args: a.memory_key == "args",
        threads,
        objective,
    }
}
