//! `autopin cpus`: print the CPU list a likwid-style pin expression selects, in thread order;
//! `--domains` prints the affinity domains as `likwid-pin -p` does.

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_placement::{device_domains_listing, domains_listing, pin_expression, CpuList};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin cpus S0:0-3\n  autopin cpus E:N:8:1:2 -d \" \"\n  autopin cpus -p --synthetic \"package:2 core:4 pu:2\""
)]
pub struct Args {
    /// Pin expression: 0-3,8 | S1:0-3 | E:N:8:1:2 | M:scatter | S0:0-1@S1:0-1 | ...
    #[arg(value_name = "EXPR", required_unless_present = "domains")]
    pub expr: Option<String>,
    /// Print the affinity domains (N, S<i>, D<i>, C<i>, M<i>) and their CPUs, like `likwid-pin -p`, then those near I/O devices (G<i>, P:<busid>, IF:<name>)
    #[arg(short = 'p', long)]
    pub domains: bool,
    /// Separator between CPUs (default: the compressed list form 0-3,8)
    #[arg(short = 'd', long, value_name = "SEP")]
    pub delimiter: Option<String>,
    #[command(flatten)]
    pub machine: MachineArgs,
}

pub fn run(args: Args) -> CmdResult {
    let m = args.machine.load()?;
    let Some(expr) = args.expr else {
        print!("{}{}", domains_listing(&m), device_domains_listing(&m));
        return Ok(0);
    };
    let cpus = pin_expression(&m, &expr).map_err(|e| CliError::usage(e.to_string()))?;
    match args.delimiter {
        Some(d) => println!(
            "{}",
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(&d)
        ),
        None => println!("{}", CpuList(cpus)),
    }
    Ok(0)
}
