//! `autopin topology`: show the machine's topology as a tree, boxes, JSON, graphviz or SVG.

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_topology::{source::json, view};
use std::io::Write;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    /// Indented tree, like lstopo-no-graphics
    Tree,
    /// ASCII boxes socket by socket, like likwid-topology -g
    Boxes,
    /// Full model plus the flat per-PU view
    Json,
    /// Graphviz digraph
    Dot,
    /// Nested boxes drawn as SVG
    Svg,
}

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin topology\n  autopin topology --whole-io -v\n  autopin topology --format boxes --synthetic \"package:2 l3:1 core:4 pu:2\"\n  autopin topology --format svg -o machine.svg --sysfs-root dump/"
)]
pub struct Args {
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "tree")]
    pub format: Format,
    /// Write to this file (atomically) instead of standard output
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Leave out the I/O devices (PCI devices, GPUs, network adapters, disks), like lstopo --no-io
    #[arg(long)]
    pub no_io: bool,
    /// Show the whole PCI tree, like lstopo --whole-io: host bridges, PCI bridges and every
    /// PCI device, nested as lstopo nests them, in every format; DMA engines and GPUs' DRM
    /// devices too
    #[arg(long, conflicts_with_all = ["no_io", "synthetic"])]
    pub whole_io: bool,
    /// Write I/O objects as lstopo -v does (bus ids, vendor:device ids, classes, link
    /// speeds, the buses below each bridge)
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

pub fn run(args: Args) -> CmdResult {
    let (mut m, names) = args.machine.load_with_names()?;
    if args.no_io {
        m.drop_io();
    } else if !args.whole_io && !matches!(args.format, Format::Tree) {
        // The tree leaves the bridges out itself, keeping lstopo's order of the devices.
        m.drop_whole_io();
    }
    if !names.is_empty() {
        // Which level names of a latency-inferred machine came from the OS topology and
        // which from the latencies: after the tree, on stderr for the other formats, and in
        // the JSON's info.
        m.info.insert("latency.names".into(), names.join("\n"));
        if !matches!(args.format, Format::Tree) {
            for n in &names {
                say!("autopin: {n}");
            }
        }
    }
    let text = match args.format {
        Format::Tree => {
            let mut t = view::tree::render_with(
                &m,
                view::tree::TreeOptions {
                    whole_io: args.whole_io,
                    verbose: args.verbose,
                },
            );
            if !names.is_empty() {
                t.push_str("Levels from the latencies:\n");
                for n in &names {
                    t.push_str(&format!("  {n}\n"));
                }
            }
            t
        }
        Format::Boxes => view::boxes::render(&m),
        Format::Dot => view::dot::render(&m),
        Format::Svg => view::svg::render(&m),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&json::to_document(&m))
                .map_err(|e| CliError::internal(format!("cannot serialize the topology: {e}")))?;
            s.push('\n');
            s
        }
    };
    match args.output {
        Some(path) => autopin_files::write::write_atomically(&path, text.as_bytes())?,
        None => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
        }
    }
    Ok(0)
}
