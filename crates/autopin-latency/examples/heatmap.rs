//! Draws the heatmap of a latency file: `cargo run --example heatmap -- FILE.csv|FILE.mct OUT.svg`.

use autopin_latency::{heatmap, read};
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: heatmap FILE.csv|FILE.mct OUT.svg");
        std::process::exit(2);
    }
    let matrix = match read::read_file(Path::new(&args[1])) {
        Ok(read::LatencyFile::C2c(m)) => m,
        Ok(read::LatencyFile::Mct(f)) => f.matrix,
        Err(e) => {
            eprintln!("heatmap: {e}");
            std::process::exit(2);
        }
    };
    let (_, inf) = match autopin_latency::load(Path::new(&args[1])) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("heatmap: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = std::fs::write(&args[2], heatmap::render(&matrix, &inf)) {
        eprintln!("heatmap: {}: {e}", args[2]);
        std::process::exit(1);
    }
}
