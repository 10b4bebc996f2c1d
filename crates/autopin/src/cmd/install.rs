//! `autopin completions SHELL` and `autopin man`: shell completions and a man page, both
//! generated from the same clap definitions as the parser, so they never drift from it.

use crate::error::{CliError, CmdResult};
use std::io::Write;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
autopin completions bash > ~/.local/share/bash-completion/completions/autopin\n  \
autopin completions zsh > ~/.zfunc/_autopin\n  \
autopin completions fish > ~/.config/fish/completions/autopin.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
autopin man > autopin.1 && man -l autopin.1\n  \
autopin man | gzip > /usr/local/share/man/man1/autopin.1.gz")]
pub struct ManArgs {}

pub fn completions(args: CompletionsArgs, mut cli: clap::Command) -> CmdResult {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "autopin", &mut out);
    emit(&out)
}

/// One page for the whole command: the top-level synopsis, then each subcommand's options.
pub fn man(_args: ManArgs, cli: clap::Command) -> CmdResult {
    let mut out = Vec::new();
    let write = |e: std::io::Error| CliError::internal(format!("cannot render the man page: {e}"));
    let cli = cli.version(env!("CARGO_PKG_VERSION"));
    let top = clap_mangen::Man::new(cli.clone());
    top.render_title(&mut out).map_err(write)?;
    top.render_name_section(&mut out).map_err(write)?;
    top.render_synopsis_section(&mut out).map_err(write)?;
    top.render_description_section(&mut out).map_err(write)?;
    top.render_options_section(&mut out).map_err(write)?;
    // The subcommands are sections of this page, not pages of their own (clap_mangen's
    // list would point to autopin-topology(1) and others that do not exist).
    writeln!(out, ".SH SUBCOMMANDS").map_err(write)?;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        writeln!(
            out,
            ".TP\n\\fBautopin {}\\fR\n{} (section AUTOPIN {} below)",
            sub.get_name(),
            roff_text(&about),
            sub.get_name().to_uppercase()
        )
        .map_err(write)?;
    }
    top.render_version_section(&mut out).map_err(write)?;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("autopin {}", sub.get_name());
        let man = clap_mangen::Man::new(sub.clone().bin_name(name.clone()));
        // Each subcommand as its own section, in man's own markup.
        writeln!(out, ".SH \"{}\"", name.to_uppercase()).map_err(write)?;
        man.render_synopsis_section(&mut out).map_err(write)?;
        man.render_description_section(&mut out).map_err(write)?;
        man.render_options_section(&mut out).map_err(write)?;
        man.render_extra_section(&mut out).map_err(write)?;
    }
    emit(&out)
}

/// Plain text for a roff line: backslashes doubled, and a leading '.' or '\'' kept from
/// being read as a request.
fn roff_text(t: &str) -> String {
    let t = t.replace('\\', "\\\\");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

fn emit(bytes: &[u8]) -> CmdResult {
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = stdout.write_all(bytes).and_then(|_| stdout.flush());
    Ok(0)
}
