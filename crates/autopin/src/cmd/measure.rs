//! `autopin measure`: measure the machine: core-to-core latency (and the structure it
//! reveals, compared with the OS's view), memory latency and bandwidth per NUMA node.

use crate::error::{CliError, CmdResult};
use autopin_files::write::write_atomically;
use autopin_latency::measure::{
    self, affinity::Affinity, affinity::Linux, memory_speed, pair::PairConfig, smt,
};
use autopin_latency::{build, compare, heatmap, infer, read::c2c, Hints, Inference, LatencyMatrix};
use autopin_topology::{source::json, CpuSet, Machine, ObjType};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// One-way cache-line transfer latency between every pair of CPUs, and the structure it shows
    Latency(LatencyArgs),
    /// Memory latency and read/write bandwidth of each NUMA node from each socket
    Memory(MemoryArgs),
}

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin measure latency\n  autopin measure latency --cpus 0-7 -o lat.csv --svg heatmap.svg\n  autopin topology --from-latency lat.csv"
)]
struct LatencyArgs {
    /// CPUs to measure, as a Linux list ("0-3,8"); default: every CPU this process may use
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Write the matrix: FILE.csv as a CSV in ns (core-to-core-latency's lower-triangle
    /// grid, with a `cpu,...` header and each row's CPU first; cycles beside it in
    /// FILE.cycles.csv), FILE.json as an autopin topology document with the latencies
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// Draw a CPU × CPU heatmap with the inferred groups outlined
    #[arg(long, value_name = "FILE.svg")]
    svg: Option<PathBuf>,
    /// Timed rounds per pair (the median is kept)
    #[arg(long, default_value_t = 400, value_name = "N", value_parser = crate::number_args::count_at_least::<10>)]
    rounds: usize,
    /// Print the matrix (ns, cycles, spread) and the inference as JSON instead of text
    #[arg(long)]
    json: bool,
    /// Do not run the spin-loop test that confirms SMT siblings
    #[arg(long)]
    no_smt_test: bool,
    /// Do not say on stderr what is being measured
    #[arg(short = 'q', long)]
    quiet: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin measure memory\n  autopin measure memory --budget 1GiB -o machine.json"
)]
struct MemoryArgs {
    /// Largest buffer allocated at any time (KiB, MiB, GiB)
    #[arg(long, default_value = "256MiB", value_name = "SIZE")]
    budget: String,
    /// Write the topology with the measurements attached (an autopin topology JSON document)
    #[arg(long, short = 'o', value_name = "FILE.json")]
    out: Option<PathBuf>,
    /// Do not say on stderr what is being measured
    #[arg(short = 'q', long)]
    quiet: bool,
}

/// One line on stderr per step of a measurement, unless -q.
fn step(quiet: bool, msg: &str) {
    if !quiet {
        say!("autopin: {msg}");
    }
}

pub fn run(args: Args) -> CmdResult {
    match args.what {
        What::Latency(a) => latency(a),
        What::Memory(a) => memory_cmd(a),
    }
}

enum OutKind {
    Csv,
    Json,
}

fn out_kind(path: &Path) -> Result<OutKind, CliError> {
    match path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).as_deref() {
        Some("csv") => Ok(OutKind::Csv),
        Some("json") => Ok(OutKind::Json),
        _ => Err(CliError::usage(format!(
            "--out {}: unknown format; use a .csv file (core-to-core-latency matrix) or a .json file (autopin topology document)",
            path.display()
        ))),
    }
}

fn chosen_cpus(list: Option<&str>, aff: &dyn Affinity) -> Result<Vec<u32>, CliError> {
    let allowed = aff
        .allowed()
        .map_err(|e| CliError::internal(e.to_string()))?;
    let cpus: Vec<u32> = match list {
        None => allowed,
        Some(l) => {
            let set =
                CpuSet::parse_list(l).map_err(|e| CliError::usage(format!("--cpus {l}: {e}")))?;
            let not: Vec<u32> = set.iter().filter(|c| !allowed.contains(c)).collect();
            if !not.is_empty() {
                return Err(CliError::usage(format!(
                    "--cpus {l}: CPU(s) {} are not available to this process (allowed: {})",
                    CpuSet::from_cpus(not).to_list(),
                    CpuSet::from_cpus(allowed).to_list()
                )));
            }
            set.iter().collect()
        }
    };
    if cpus.len() < 2 {
        return Err(CliError::usage(format!(
            "measuring latency needs at least 2 CPUs; got {}",
            CpuSet::from_cpus(cpus).to_list()
        )));
    }
    Ok(cpus)
}

fn latency(a: LatencyArgs) -> CmdResult {
    let kind = a.out.as_deref().map(out_kind).transpose()?;
    crate::output::check_all_writable([&a.out, &a.svg])?;
    let aff = Linux;
    let cpus = chosen_cpus(a.cpus.as_deref(), &aff)?;
    let total = cpus.len() * (cpus.len() - 1) / 2;
    step(
        a.quiet,
        &format!(
            "measuring core-to-core latency of CPUs {}: {}, {} rounds each",
            CpuSet::from_cpus(cpus.iter().copied()).to_list(),
            autopin_human::plural(total as u64, "pair", "pairs"),
            a.rounds
        ),
    );
    let bar = progress_bar(total as u64);
    let cfg = PairConfig {
        rounds: a.rounds,
        ..Default::default()
    };
    let measured = measure::measure_matrix(&cpus, &cfg, &aff, &mut |done, _| {
        bar.set_position(done as u64)
    })
    .map_err(|e| CliError::internal(format!("measurement failed: {e}")))?;
    bar.finish_and_clear();
    let matrix = &measured.matrix;

    step(
        a.quiet,
        if a.no_smt_test {
            "inferring the structure from the latencies"
        } else {
            "inferring the structure (with a spin-loop test of SMT siblings)"
        },
    );
    let (inf, verdicts) = infer_live(matrix, &aff, !a.no_smt_test)?;
    step(a.quiet, "comparing with the OS topology");
    let mut machine = build::to_machine(&inf, matrix, &build::Extras::default());
    machine.info.insert(
        "latency.clock".into(),
        format!("{} {:.3} GHz", measured.clock.kind, measured.clock.ghz),
    );
    let os = autopin_topology::source::sysfs::read(Path::new("/"));
    let disagree = match &os {
        Ok(os) => Ok(compare::disagreements(&inf, os, 20)),
        Err(e) => Err(e.to_string()),
    };
    // The levels as this machine's OS names them (package, die, NUMA node, L3 group), where
    // it groups the CPUs alike; the others keep the names the latencies give.
    let naming = match &os {
        Ok(os) => {
            let mut named = inf.clone();
            autopin_latency::cross_check(&mut named, os);
            named.naming_lines()
        }
        Err(_) => inf.naming_lines(),
    };
    write_latency_files(&a, kind, &measured, &inf, &machine)?;
    let found = Findings {
        measured: &measured,
        inf: &inf,
        verdicts: &verdicts,
        disagree: &disagree,
        naming: &naming,
    };
    if a.json {
        print_latency_json(&found)?;
    } else {
        print_latency_text(&found);
    }
    Ok(0)
}

/// What `measure latency` found, for printing.
struct Findings<'a> {
    measured: &'a measure::Measured,
    inf: &'a Inference,
    verdicts: &'a [smt::SmtVerdict],
    /// Where the inferred structure and the OS's disagree, or why they were not compared.
    disagree: &'a Result<Vec<String>, String>,
    /// Each level's name and whether it came from the OS topology or the latencies.
    naming: &'a [String],
}

/// The matrix (`--out`, CSV or topology JSON) and the heatmap (`--svg`), written atomically.
fn write_latency_files(
    a: &LatencyArgs,
    kind: Option<OutKind>,
    measured: &measure::Measured,
    inf: &Inference,
    machine: &Machine,
) -> Result<(), CliError> {
    let matrix = &measured.matrix;
    if let (Some(path), Some(kind)) = (&a.out, kind) {
        match kind {
            OutKind::Csv => {
                write_atomically(path, c2c::write(&matrix.cpus, &matrix.values).as_bytes())?;
                if let Some(mut cy) = matrix.cycles() {
                    // Cycles come from ns × GHz; round off the conversion's float noise.
                    cy.iter_mut()
                        .flatten()
                        .for_each(|v| *v = (*v * 100.0).round() / 100.0);
                    write_atomically(&cycles_path(path), c2c::write(&matrix.cpus, &cy).as_bytes())?;
                }
            }
            OutKind::Json => write_atomically(path, document(machine)?.as_bytes())?,
        }
    }
    if let Some(svg) = &a.svg {
        write_atomically(svg, heatmap::render(matrix, inf).as_bytes())?;
        step(a.quiet, &format!("wrote the heatmap to {}", svg.display()));
    }
    if let Some(out) = &a.out {
        step(a.quiet, &format!("wrote the matrix to {}", out.display()));
    }
    Ok(())
}

/// `--json`: everything measured and inferred, as one document on stdout.
fn print_latency_json(f: &Findings) -> Result<(), CliError> {
    let (measured, matrix) = (f.measured, &f.measured.matrix);
    let v = serde_json::json!({
        "cpus": matrix.cpus,
        "ns": matrix.values,
        "cycles": matrix.cycles(),
        "spread": measured.spread,
        "clock": {"kind": measured.clock.kind, "ghz": measured.clock.ghz, "overhead_ticks": measured.clock.overhead},
        "elapsed_s": measured.elapsed.as_secs_f64(),
        "per_pair_us": measured.per_pair.as_secs_f64() * 1e6,
        "remeasured_pairs": measured.remeasured,
        "inference": f.inf,
        "smt_tests": f.verdicts,
        "os_disagreements": f.disagree.as_ref().ok(),
        "level_names": f.naming,
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&v).map_err(|e| CliError::internal(e.to_string()))?
    );
    Ok(())
}

/// The text summary: timing, the matrix (up to 16 CPUs), the structure, the SMT tests and
/// the comparison with the OS topology.
fn print_latency_text(f: &Findings) {
    let (measured, matrix) = (f.measured, &f.measured.matrix);
    let cpus = &matrix.cpus;
    let total = cpus.len() * (cpus.len() - 1) / 2;
    let max_spread = measured
        .spread
        .iter()
        .flatten()
        .cloned()
        .fold(0.0, f64::max);
    // The whole time first, then what the pairs took: the rest is warming the CPUs up.
    let pairs = measured.per_pair.as_secs_f64() * total as f64;
    println!(
        "measured {} ({}) in {} ({} warming the CPUs up, {} a pair); clock {} at {:.3} GHz; {} re-measured; largest spread (IQR/median) {:.0}%",
        autopin_human::plural(cpus.len() as u64, "CPU", "CPUs"),
        autopin_human::plural(total as u64, "pair", "pairs"),
        autopin_human::duration(measured.elapsed.as_secs_f64()),
        autopin_human::duration((measured.elapsed.as_secs_f64() - pairs).max(0.0)),
        autopin_human::duration(measured.per_pair.as_secs_f64()),
        measured.clock.kind,
        measured.clock.ghz,
        autopin_human::plural(measured.remeasured as u64, "pair", "pairs"),
        max_spread * 100.0
    );
    if cpus.len() <= 16 {
        print_matrix(matrix);
    }
    println!("inferred structure:");
    for l in f.inf.summary_lines() {
        println!("  {l}");
    }
    for v in f.verdicts {
        println!(
            "  SMT test CPUs {} and {}: loop rate together/alone {:.2} → {}",
            v.a,
            v.b,
            v.ratio,
            if v.shared {
                "share a core"
            } else {
                "separate cores"
            }
        );
    }
    println!("levels by name:");
    for l in f.naming {
        println!("  {l}");
    }
    match f.disagree {
        Ok(d) if d.is_empty() => {
            println!("agrees with the OS topology (cores, last-level caches, sockets)")
        }
        Ok(d) => {
            println!("disagreements with the OS topology:");
            for l in d {
                println!("  {l}");
            }
        }
        Err(e) => println!("OS topology not compared: {e}"),
    }
}

/// Infers, then confirms or refutes SMT with the spin-loop test. SMT needs both: a first
/// level close enough for threads sharing an L1, and a slowdown when both run. When the
/// latencies show no such level, the closest pair is tested anyway and a slowdown is only
/// reported (other load on a shared or virtual machine also slows a loop down; a transfer
/// far above sibling latency cannot come from one core).
fn infer_live(
    m: &LatencyMatrix,
    aff: &dyn Affinity,
    test: bool,
) -> Result<(Inference, Vec<smt::SmtVerdict>), CliError> {
    let blind = infer(m, &Hints::default()).map_err(|e| CliError::internal(e.to_string()))?;
    if !test {
        return Ok((blind, Vec::new()));
    }
    let close = |l: f64| l <= autopin_latency::infer::SMT_MAX_NS;
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let candidate = match blind.levels.first() {
        Some(l) if close(l.latency) => {
            // At most 16 groups: enough to confirm, and bounded time on big machines.
            pairs.extend(
                l.groups
                    .iter()
                    .filter(|g| g.len() > 1)
                    .take(16)
                    .map(|g| (g[0], g[1])),
            );
            true
        }
        None if close(blind.top_latency) && m.len() <= 8 => {
            pairs.push((m.cpus[0], m.cpus[1]));
            true
        }
        _ => {
            if let Some((i, j, _)) = m.pairs().min_by(|x, y| x.2.total_cmp(&y.2)) {
                pairs.push((m.cpus[i], m.cpus[j]));
            }
            false
        }
    };
    let mut verdicts = Vec::new();
    for (x, y) in pairs {
        verdicts.push(
            smt::test_pair(x, y, aff, Duration::from_millis(40))
                .map_err(|e| CliError::internal(e.to_string()))?,
        );
    }
    let shared = verdicts.iter().filter(|v| v.shared).count();
    let says = !verdicts.is_empty() && shared * 2 > verdicts.len();
    let hints = Hints {
        smt: Some((says && candidate, "the spin-loop test".into())),
    };
    let mut inf = infer(m, &hints).map_err(|e| CliError::internal(e.to_string()))?;
    if says && !candidate {
        inf.notes.push(format!(
            "the spin-loop test slowed down on CPUs {} and {}, but their transfer latency ({:.0} ns) is far above what threads of one core show (≤ {} ns): taken as other load, not SMT",
            verdicts[0].a,
            verdicts[0].b,
            m.pairs().map(|p| p.2).fold(f64::INFINITY, f64::min),
            autopin_latency::infer::SMT_MAX_NS
        ));
    }
    Ok((inf, verdicts))
}

fn print_matrix(m: &LatencyMatrix) {
    print!("   ns");
    for c in &m.cpus {
        print!(" {c:>6}");
    }
    println!();
    for (i, c) in m.cpus.iter().enumerate() {
        print!("{c:>5}");
        for j in 0..m.len() {
            if i == j {
                print!(" {:>6}", "-");
            } else {
                print!(" {:>6.1}", m.get(i, j));
            }
        }
        println!();
    }
}

fn cycles_path(p: &Path) -> PathBuf {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "latency".into());
    p.with_file_name(format!("{stem}.cycles.csv"))
}

fn document(m: &Machine) -> Result<String, CliError> {
    let mut s = serde_json::to_string_pretty(&json::to_document(m))
        .map_err(|e| CliError::internal(format!("cannot serialize the topology: {e}")))?;
    s.push('\n');
    Ok(s)
}

fn progress_bar(total: u64) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} pairs, {eta} left")
    {
        bar.set_style(style);
    }
    bar
}

fn memory_cmd(a: MemoryArgs) -> CmdResult {
    let budget = memory_speed::parse_size(&a.budget)
        .map_err(|e| CliError::usage(format!("--budget {e}")))?;
    if let Some(p) = &a.out {
        if !matches!(out_kind(p)?, OutKind::Json) {
            return Err(CliError::usage(format!("--out {}: memory measurements are written as a topology document; use a .json file", p.display())));
        }
    }
    crate::output::check_all_writable([&a.out])?;
    let mut os = autopin_topology::source::sysfs::read(Path::new("/"))
        .map_err(|e| CliError::internal(format!("cannot read the OS topology: {e}")))?;
    let aff = Linux;
    let allowed = CpuSet::from_cpus(
        aff.allowed()
            .map_err(|e| CliError::internal(e.to_string()))?,
    );
    // One source per socket: its allowed CPUs.
    let mut sources: Vec<memory_speed::Source> = os
        .objects_of(ObjType::Package)
        .into_iter()
        .map(|p| memory_speed::Source {
            cpus: os.obj(p).cpuset.intersection(&allowed).iter().collect(),
        })
        .filter(|s| !s.cpus.is_empty())
        .collect();
    if sources.is_empty() {
        sources.push(memory_speed::Source {
            cpus: allowed.iter().collect(),
        });
    }
    let nodes: Vec<u32> = if os.numa_nodes.is_empty() {
        vec![0]
    } else {
        os.numa_nodes.iter().map(|n| n.os_index).collect()
    };
    let bind = nodes.len() > 1;
    let cfg = memory_speed::MemoryConfig {
        budget,
        ..Default::default()
    };
    step(
        a.quiet,
        &format!(
            "measuring memory latency and bandwidth: {} × {}, buffers up to {} MiB",
            autopin_human::plural(nodes.len() as u64, "NUMA node", "NUMA nodes"),
            autopin_human::plural(sources.len() as u64, "socket", "sockets"),
            budget >> 20
        ),
    );
    let bar = progress_bar((sources.len() * nodes.len()) as u64);
    let mut results = Vec::new();
    for src in &sources {
        for &node in &nodes {
            let r = memory_speed::measure_node(node, bind, src, &cfg, &aff)
                .map_err(|e| CliError::internal(format!("node {node}: {e}")))?;
            results.push(r);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    println!(
        "buffer {} MiB per measurement{}",
        budget >> 20,
        if bind {
            ", bound to each node with mbind"
        } else {
            " (one NUMA node: no binding needed)"
        }
    );
    println!(
        "{:>5} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "node", "from CPU", "latency ns", "read 1T", "write 1T", "read all", "write all"
    );
    for r in &results {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        println!(
            "{:>5} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10}",
            r.node,
            r.from_cpu,
            f(r.latency_ns),
            f(r.read_gbs_single),
            f(r.write_gbs_single),
            f(r.read_gbs_all),
            f(r.write_gbs_all)
        );
    }
    println!("(bandwidths in GB/s; \"all\" = every allowed CPU of the measuring socket)");
    os.measurements.memory = results;
    if let Some(p) = &a.out {
        write_atomically(p, document(&os)?.as_bytes())?;
    }
    Ok(0)
}
