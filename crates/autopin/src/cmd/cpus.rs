//! `autopin cpus`: print the CPU list a likwid-style pin expression selects, in thread order;
//! `--domains` prints the affinity domains as `likwid-pin -p` does, `--devices` the domains
//! near I/O devices (`G<i>`, `P:<busid>`, `IF:<name>`).

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_placement::{
    device_domains_listing, domains, domains_listing, pin_expression, CpuList,
};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  autopin cpus S0:0-3\n  autopin cpus E:N:8:1:2 -d \" \"\n  autopin cpus -p --synthetic \"package:2 core:4 pu:2\""
)]
pub struct Args {
    /// Pin expression: 0-3,8 | S1:0-3 | E:N:8:1:2 | M:scatter | S0:0-1@S1:0-1 | ...
    #[arg(value_name = "EXPR", required_unless_present_any = ["domains", "devices"])]
    pub expr: Option<String>,
    /// Print the affinity domains (N, S<i>, D<i>, C<i>, M<i>) and their CPUs, like `likwid-pin -p`
    #[arg(short = 'p', long)]
    pub domains: bool,
    /// Print the domains near I/O devices (G<i> GPUs in bus-id order, P:<busid>, IF:<name>) and their CPUs
    #[arg(long, conflicts_with = "domains")]
    pub devices: bool,
    /// Separator between CPUs (default: the compressed list form 0-3,8)
    #[arg(short = 'd', long, value_name = "SEP")]
    pub delimiter: Option<String>,
    /// JSON on stdout: the expression, its CPUs in thread order and their list (with -p or
    /// --devices: the domains)
    #[arg(long, conflicts_with = "delimiter")]
    pub json: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

pub fn run(args: Args) -> CmdResult {
    let m = args.machine.load()?;
    let Some(expr) = args.expr else {
        if args.json {
            let kinds = if args.devices { "GPI" } else { "NSDCM" };
            let ds: Vec<_> = domains(&m)
                .into_iter()
                .filter(|d| kinds.contains(d.kind))
                .collect();
            if ds.is_empty() && args.devices {
                return Err(no_devices());
            }
            return print_json(&ds);
        }
        if args.devices {
            let listing = device_domains_listing(&m);
            if listing.is_empty() {
                return Err(no_devices());
            }
            print!("{listing}");
        } else {
            print!("{}", domains_listing(&m));
        }
        return Ok(0);
    };
    let cpus = pin_expression(&m, &expr).map_err(|e| CliError::usage(e.to_string()))?;
    if args.json {
        return print_json(&serde_json::json!({
            "expression": expr,
            "cpus": cpus,
            "list": CpuList(cpus.clone()).to_string(),
        }));
    }
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

fn no_devices() -> CliError {
    CliError::usage(
        "this machine description lists no I/O devices (synthetic machines have none; sysfs, hwloc dumps and hwloc XML do)",
    )
}

fn print_json(v: &impl serde::Serialize) -> CmdResult {
    let text = serde_json::to_string_pretty(v).map_err(|e| CliError::internal(e.to_string()))?;
    println!("{text}");
    Ok(0)
}
