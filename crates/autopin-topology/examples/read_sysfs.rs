//! Reads a sysfs root N times and prints the time per read (used by bench/topology.sh).
//! Usage: read_sysfs ROOT [N]

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(root) = args.next() else {
        eprintln!("usage: read_sysfs ROOT [N]");
        std::process::exit(2);
    };
    let n: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let start = std::time::Instant::now();
    let mut pus = 0;
    for _ in 0..n {
        match autopin_topology::source::sysfs::read_with_affinity(std::path::Path::new(&root), None)
        {
            Ok(m) => pus = m.pus().len(),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
    }
    let per = start.elapsed().as_secs_f64() / n as f64;
    println!("{pus} PUs, {:.3} ms per read", per * 1e3);
}
