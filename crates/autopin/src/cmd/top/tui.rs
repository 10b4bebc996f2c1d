//! The screen of `autopin top`, drawn with ratatui on crossterm: autopin-top's lines as they
//! are, their styles as colours (none under NO_COLOR), the keys turned into autopin-top's
//! [`Key`]s. The terminal is given back as it was on `q`, on a signal and on a panic.

use super::{Args, Top};
use crate::error::{CliError, CmdResult};
use autopin_top::map::{Line, Style};
use autopin_top::screen;
use autopin_top::ui::{Action, Key};
use autopin_top::Row;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::style::{Color, Modifier, Style as TStyle};
use ratatui::text::{Line as TLine, Span as TSpan, Text};
use ratatui::widgets::Paragraph;
use std::time::{Duration, Instant};

/// How a style looks: colours unless NO_COLOR says none; selection and headings by
/// reverse video and bold either way.
fn style(s: Style, colour: bool) -> TStyle {
    let t = TStyle::default();
    match (s, colour) {
        (Style::Plain, _) => t,
        (Style::Selected, _) => t.add_modifier(Modifier::REVERSED),
        (Style::Label, _) => t.add_modifier(Modifier::BOLD),
        (Style::Flag, true) => t.fg(Color::Red).add_modifier(Modifier::BOLD),
        (Style::Flag, false) => t.add_modifier(Modifier::BOLD),
        (Style::Dim, true) => t.fg(Color::DarkGray),
        (Style::Watched, true) => t.fg(Color::Green),
        (Style::Others, true) => t.fg(Color::Blue),
        (Style::Steal, true) => t.fg(Color::Magenta),
        (Style::Dim | Style::Watched | Style::Others | Style::Steal, false) => t,
    }
}

fn text(lines: Vec<Line>, colour: bool) -> Text<'static> {
    Text::from(
        lines
            .into_iter()
            .map(|l| {
                TLine::from(
                    l.into_iter()
                        .map(|s| TSpan::styled(s.text, style(s.style, colour)))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>(),
    )
}

fn key(e: event::KeyEvent) -> Option<Key> {
    if e.kind == KeyEventKind::Release {
        return None;
    }
    Some(match e.code {
        KeyCode::Char('c') if e.modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        _ => return None,
    })
}

fn io_error(e: std::io::Error) -> CliError {
    CliError::internal(format!("the terminal: {e}"))
}

/// The PIDs of the rows that may be on screen: their pages are read.
fn visible(top: &Top, height: usize) -> Vec<i32> {
    let rows = top.ui.view.rows(&top.frame);
    rows.iter()
        .skip(top.ui.top)
        .take(height)
        .filter_map(|r| match r {
            Row::Process(p) => Some(top.frame.processes[*p].pid),
            Row::Thread(..) => None,
        })
        .collect()
}

/// Leaves the screen, runs `autopin stat -p PID` on the terminal, waits for Enter, and
/// comes back.
fn stat(pid: i32) -> Result<String, CliError> {
    ratatui::restore();
    let exe = std::env::current_exe().map_err(|e| CliError::internal(e.to_string()))?;
    println!("autopin top: autopin stat -p {pid} --duration 5 (then Enter returns to top)");
    let status = std::process::Command::new(exe)
        .args(["stat", "-p", &pid.to_string(), "--duration", "5"])
        .status();
    let said = match status {
        Ok(s) if s.success() => format!("autopin stat -p {pid}: done"),
        Ok(s) => format!(
            "autopin stat -p {pid}: exit status {}",
            s.code().unwrap_or(-1)
        ),
        Err(e) => format!("autopin stat -p {pid} could not run: {e}"),
    };
    println!("{said}; press Enter to return to autopin top");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    Ok(said)
}

pub(super) fn run(top: &mut Top, args: &Args) -> CmdResult {
    let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // A signal (SIGTERM, SIGHUP, SIGINT sent by kill) ends the loop, so the terminal is
    // given back; it is recorded, not acted on, while nothing is launched.
    let _signals = autopin_os::process::signals::Forwarding::begin().map_err(io_error)?;
    let mut signal_seen = autopin_os::process::signals::received();
    let mut term = ratatui::try_init().map_err(io_error)?;
    // A terminal that hung up (its window closed, its tmux session killed) reads as endless
    // end-of-file, and crossterm's reader then spins inside its poll without returning (a
    // test's leftover top took a CPU for half an hour): a watcher ends top as a hangup would
    // (128 + SIGHUP), nothing being left to show or restore.
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_millis(250));
        if !rustix::termios::isatty(std::io::stdout()) {
            std::process::exit(128 + 1);
        }
    });
    let delay = Duration::from_secs_f64(args.delay);
    let mut next = Instant::now() + delay;
    let mut refreshes = 0u64;
    let mut height = 24usize;
    let mut message_until: Option<Instant> = None;
    let result = loop {
        let drawn = term.draw(|f| {
            let area = f.area();
            height = usize::from(area.height);
            let lines = screen::render(
                &top.frame,
                &top.shape,
                &mut top.ui,
                &top.ctx,
                usize::from(area.width),
                height,
            );
            f.render_widget(Paragraph::new(text(lines, colour)), area);
        });
        if let Err(e) = drawn {
            break Err(io_error(e));
        }
        let wait = next.saturating_duration_since(Instant::now());
        let page = height.saturating_sub(8).max(1);
        match event::poll(wait.min(Duration::from_millis(200))) {
            Err(e) => break Err(io_error(e)),
            Ok(true) => match event::read() {
                Err(e) => break Err(io_error(e)),
                // A key top has no use for is passed over, and the checks below still run
                // (a terminal gone away can read as an endless run of such keys).
                Ok(Event::Key(k)) => {
                    if let Some(k) = key(k) {
                        match top.ui.key(k, &top.frame, page) {
                            Action::Quit => break Ok(0),
                            Action::Refilter => top.remake(),
                            Action::Stat(pid) => {
                                let said = stat(pid);
                                term = match ratatui::try_init() {
                                    Ok(t) => t,
                                    Err(e) => break Err(io_error(e)),
                                };
                                signal_seen = autopin_os::process::signals::received();
                                match said {
                                    Ok(s) => top.ctx.message = Some(s),
                                    Err(e) => break Err(e),
                                }
                                message_until = Some(Instant::now() + Duration::from_secs(5));
                            }
                            Action::Redraw | Action::Nothing => {}
                        }
                    }
                }
                Ok(_) => {}
            },
            Ok(false) => {}
        }
        if autopin_os::process::signals::received() != signal_seen {
            break Ok(0);
        }
        if Instant::now() >= next {
            let shown = visible(top, height);
            let kept = message_until
                .filter(|u| Instant::now() < *u)
                .and(top.ctx.message.clone());
            top.refresh(Some(&shown));
            if top.ctx.message.is_none() {
                top.ctx.message = kept;
            }
            next += delay;
            if next < Instant::now() {
                next = Instant::now() + delay;
            }
            refreshes += 1;
            if args.iterations.is_some_and(|n| refreshes >= n) {
                break Ok(0);
            }
        }
    };
    ratatui::restore();
    result
}
