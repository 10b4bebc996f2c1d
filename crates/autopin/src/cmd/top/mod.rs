//! `autopin top`: a live view of the machine as its topology, where every thread runs, what
//! it waits for and where its process's memory is, with the problems flagged by `stat`'s
//! rules. The looks come from autopin-os `top_source`, the model and the screen's lines from
//! autopin-top; this module parses the options and runs the loop, `tui` draws on the
//! terminal (ratatui), batch mode (`-b`) prints each refresh as text or JSON.

mod tui;

use crate::error::{CliError, CmdResult};
use crate::machine_args::MachineArgs;
use autopin_os::top_source::{uid_of, TopSource, Want};
use autopin_top::screen::{self, Context};
use autopin_top::ui::Ui;
use autopin_top::{Filter, Frame, Look, Shape, SortKey, View};
use std::io::Write;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
autopin top\n  \
autopin top -p 4242 -d 2\n  \
autopin top -u alice --sort wait\n  \
autopin top --job $SLURM_JOB_ID\n  \
autopin top -b -n 3 --json > top.jsonl\n  \
autopin top -b -n 1 --sysfs-root tests/data/hwloc-linux/256ppc-8n8s4t.tar.bz2\n\n\
The screen: the machine drawn as packages, NUMA nodes, L3 groups, cores and CPUs, each \
CPU's load (the watched processes' part █, the others' ▓, steal ░) and a mark (! \
oversubscribed, p a pinned thread waits there, s a busy SMT sibling, 2-9 runnable threads); \
the flags in words; the table of processes (Enter: its threads). Keys: q quit, ? help, \
arrows select, Enter/→/← threads, H all threads, < > or c w p n u o m M sort, r reverse, / \
search, K kernel threads, s `autopin stat -p PID` on the selected process.\n\n\
The watched processes are those the filters (-p, -u, --job, /) let through: all but \
kernel threads when none is given. -b prints each refresh (text, or with --json one JSON \
document a line: docs/top.md), with no colour; the screen has none either under NO_COLOR.")]
pub struct Args {
    /// Seconds between refreshes (at least 0.1)
    #[arg(short = 'd', long = "delay", value_name = "SEC", default_value = "1", value_parser = delay)]
    pub delay: f64,
    /// Batch mode: print each refresh (text, or JSON with --json) instead of drawing the screen
    #[arg(short = 'b', long)]
    pub batch: bool,
    /// Stop after N refreshes (default: until q, or until killed in batch mode); also -n, as
    /// top spells it
    #[arg(long = "iterations", short_alias = 'n', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// With -b: one JSON document a refresh, one a line (its schema: docs/top.md)
    #[arg(long, requires = "batch")]
    pub json: bool,
    /// Only these processes (PIDs, comma-separated or repeated; a thread's id means its process)
    #[arg(short = 'p', long = "pid", value_name = "PID", value_delimiter = ',')]
    pub pids: Vec<i32>,
    /// Only these users' processes (a name or a uid; repeat for several)
    #[arg(short = 'u', long, value_name = "USER")]
    pub user: Vec<String>,
    /// Only the processes of this Slurm job (found again at each refresh)
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
    /// Sort by this column: cpu, wait, pid, name, user, on (the CPU), mig, numa
    #[arg(long, value_name = "COLUMN", default_value = "cpu", value_parser = sort_key)]
    pub sort: SortKey,
    /// Show every process's threads (H on the screen)
    #[arg(short = 'H', long)]
    pub threads: bool,
    /// Show kernel threads too (K on the screen)
    #[arg(long)]
    pub kernel: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

/// The shortest refresh: each reads every thread of the machine.
const MIN_DELAY: f64 = 0.1;

fn delay(text: &str) -> Result<f64, String> {
    let d = crate::number_args::positive_seconds(text).map_err(|e| {
        format!("{e}; the delay between refreshes is at least {MIN_DELAY} s (each reads every thread of the machine)")
    })?;
    if d < MIN_DELAY {
        return Err(format!(
            "{d} s is too short: the delay between refreshes is at least {MIN_DELAY} s (each reads every thread of the machine)"
        ));
    }
    Ok(d)
}

fn sort_key(text: &str) -> Result<SortKey, String> {
    SortKey::parse(text)
        .ok_or_else(|| "valid: cpu, wait, pid, name, user, on, mig, numa".to_string())
}

/// What the loop keeps: the machine, the reader, the last two looks and the frame between.
pub(crate) struct Top {
    pub shape: Shape,
    pub source: TopSource,
    pub ui: Ui,
    pub ctx: Context,
    job: Option<String>,
    before: Look,
    now: Look,
    pub frame: Frame,
}

impl Top {
    /// What the next look is to read beyond every thread: the pages of the watched
    /// processes (all of them in batch mode; on the screen those shown and those working).
    fn want(&self, visible: Option<&[i32]>) -> Want {
        let pages = self
            .frame
            .processes
            .iter()
            .filter(|p| p.watched && !p.kernel)
            .filter(|p| {
                visible.is_none_or(|v| {
                    v.contains(&p.pid) || p.cpu_share >= autopin_stat::rules::WORKING
                })
            })
            .map(|p| p.pid)
            .collect();
        Want { pages }
    }

    /// Looks again and makes the new frame.
    pub fn refresh(&mut self, visible: Option<&[i32]>) {
        if let Some(job) = &self.job {
            self.ui.view.filter.job = Some(
                autopin_os::show_source::processes_of_job(job)
                    .into_iter()
                    .map(|p| p.0)
                    .collect(),
            );
        }
        let want = self.want(visible);
        let look = self.source.look(&want);
        self.before = std::mem::replace(&mut self.now, look);
        self.remake();
    }

    /// The frame again from the same looks (the filter changed).
    pub fn remake(&mut self) {
        let filter = self.ui.view.filter.clone();
        self.frame =
            autopin_top::frame(&self.before, &self.now, &self.shape, &|p| filter.matches(p));
        self.frame.ended = filter
            .pids
            .iter()
            .copied()
            .filter(|pid| !self.now.processes.iter().any(|p| p.pid == *pid))
            .collect();
        self.ctx.message = match self.frame.ended.as_slice() {
            [] => None,
            [one] => Some(format!("PID {one} has ended")),
            many => Some(format!(
                "PIDs {} have ended",
                many.iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )),
        };
    }
}

/// `-p`'s PIDs as processes: a thread's id stands for its process; one that does not run is
/// a usage error.
fn processes(pids: &[i32]) -> Result<Vec<i32>, CliError> {
    let mut out = Vec::new();
    for &pid in pids {
        let tgid = (pid > 0)
            .then(|| autopin_os::stat_source::process_of(pid))
            .flatten()
            .ok_or_else(|| {
                CliError::usage(format!(
                    "-p {pid}: no such process (or not visible here); `autopin show --all` lists yours"
                ))
            })?;
        if !out.contains(&tgid) {
            out.push(tgid);
        }
    }
    Ok(out)
}

fn filter(args: &Args) -> Result<Filter, CliError> {
    let mut uids = Vec::new();
    for u in &args.user {
        uids.push(uid_of(u).ok_or_else(|| CliError::usage(format!("-u {u}: no such user")))?);
    }
    let job = match &args.job {
        Some(job) => {
            let found: std::collections::BTreeSet<i32> =
                autopin_os::show_source::processes_of_job(job)
                    .into_iter()
                    .map(|p| p.0)
                    .collect();
            if found.is_empty() {
                return Err(CliError::usage(format!(
                    "--job {job}: no process of this Slurm job is visible here (run it on the job's node, as the job's user)"
                )));
            }
            Some(found)
        }
        None => None,
    };
    Ok(Filter {
        pids: processes(&args.pids)?,
        uids,
        job,
        search: String::new(),
        kernel: args.kernel,
    })
}

/// The batch output's width: the terminal's, else $COLUMNS, else 200.
fn batch_width() -> usize {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        if let Ok((w, _)) = ratatui::crossterm::terminal::size() {
            return usize::from(w).max(20);
        }
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|w| *w >= 20)
        .unwrap_or(200)
}

pub fn run(args: Args) -> CmdResult {
    use std::io::IsTerminal;
    let filter = filter(&args)?;
    let on_terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if !args.batch && !on_terminal {
        return Err(CliError::usage(
            "autopin top draws on a terminal, and this is not one: -b prints each refresh (with --json, one JSON document a line)",
        ));
    }
    let machine = args.machine.load()?;
    let shape = Shape::of(&machine);
    let machine_note = (!args.machine.is_live()).then(|| {
        "machine from the given source; the loads are this host's, ? where it has no such CPU"
            .to_string()
    });
    let mut source = TopSource::default();
    let first = source.look(&Want {
        pages: filter.pids.clone(),
    });
    let view = View {
        filter,
        sort: autopin_top::Sort::by(args.sort),
        expanded: Default::default(),
        all_threads: args.threads,
    };
    let mut top = Top {
        shape,
        source,
        ui: Ui {
            view,
            ..Ui::default()
        },
        ctx: Context {
            delay: args.delay,
            machine_note,
            message: None,
        },
        job: args.job.clone(),
        before: first.clone(),
        now: first,
        frame: Frame::default(),
    };
    top.remake();
    if args.batch {
        batch(&mut top, &args)
    } else {
        tui::run(&mut top, &args)
    }
}

/// `-b`: a refresh every delay, printed, `-n` times or until killed.
fn batch(top: &mut Top, args: &Args) -> CmdResult {
    autopin_os::process::signals::end_quietly_on_closed_output();
    let width = batch_width();
    let mut out = std::io::stdout().lock();
    let mut done = 0u64;
    loop {
        std::thread::sleep(std::time::Duration::from_secs_f64(args.delay));
        top.refresh(None);
        let text = if args.json {
            let doc = autopin_top::json::document(&top.frame, &top.shape, &top.ui.view);
            serde_json::to_string(&doc).map_err(|e| CliError::internal(e.to_string()))? + "\n"
        } else {
            let mut t = screen::text(&top.frame, &top.shape, &top.ui, &top.ctx, width);
            if let Some(m) = &top.ctx.message {
                t += &format!("{m}\n");
            }
            t + "\n"
        };
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return Ok(0);
        }
        done += 1;
        if args.iterations.is_some_and(|n| done >= n) {
            return Ok(0);
        }
    }
}
