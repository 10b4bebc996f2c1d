//! The search simulator behind `bench/search.sh`: the race strategy against many simulated
//! programs, scored on what a user loses. It uses only the strategy interface
//! (`Race::new`, `Strategy::{next, record, set_os_placement}`, `ProbeOutcome`), so the same
//! file builds against an older checkout and the two searches meet the same cases.
//!
//! A case is a set of candidates with true rates and a noise kind, sampled in 0.1 s ticks as
//! the driver does; the program runs `HORIZON` seconds. Lost work is the time-integral of
//! (1 − rate of the pinning in force / best rate) over the whole run: every probe of a worse
//! candidate during the search, and the rest of the run on the decided pinning. A wrong
//! decision is one more than 2% slower than the best candidate.
//!
//! Built with `--cfg old_race` (bench/search.sh does so for the baseline), it leaves out
//! what older strategies lack (`Strategy::seen_enough`).
//!
//! Output: one tab-separated line per case with its averages over the seeds.
//! usage: search_sim [SEEDS]   (default 200)

#![allow(unexpected_cfgs)]

// The generator's module was `stats` before it was named for what it is.
#[cfg(not(old_race))]
use autopin_engine::rng::Rng;
#[cfg(old_race)]
use autopin_engine::stats::Rng;
// The strategy's next step was `Plan` before it was named `Step`.
#[cfg(old_race)]
use autopin_engine::strategy::Plan as Step;
#[cfg(not(old_race))]
use autopin_engine::strategy::Step;
use autopin_engine::strategy::{ProbeOutcome, Race, RaceParams, Strategy};

const TICK: f64 = 0.1;
/// How often the session looks at a probe the strategy watches, seconds (`LOOK` there).
#[cfg(not(old_race))]
const LOOK: f64 = 0.02;
const HORIZON: f64 = 60.0;

#[derive(Clone, Copy, PartialEq)]
enum Noise {
    /// ±2% ticks, 1% drift between probes.
    Quiet,
    /// ±10% ticks, 5% drift.
    Noisy,
    /// Heavy-tailed ticks (Student t, 2 degrees of freedom, 5% scale).
    Heavy,
    /// A rate that swings 3× between a high and a low state (a thread the kernel moves onto
    /// a busy CPU and off again), switching with probability 0.3 a tick.
    Swing,
}

struct SimCandidate {
    rate: f64,
    noise: Noise,
    /// Slow drift of this candidate (AR(1) on the log rate, per tick).
    drift: f64,
    high: bool,
}

struct Case {
    gaps: &'static str,
    noise: &'static str,
    k: usize,
    shift: bool,
}

/// Relative speeds of the candidates (best first) for a gap scenario.
fn rates(gaps: &str, k: usize, rng: &mut Rng) -> Vec<f64> {
    (0..k)
        .map(|i| {
            if i == 0 {
                return 1.0;
            }
            let u = rng.uniform();
            match gaps {
                "equal" => 1.0,
                "close" => 1.0 / (1.02 + 0.03 * u),
                "medium" => 1.0 / (1.1 + 0.2 * u),
                "far" => 1.0 / (1.5 + 3.5 * u),
                // one close runner-up, the rest far behind
                _ => {
                    if i == 1 {
                        1.0 / (1.03 + 0.04 * u)
                    } else {
                        1.0 / (1.5 + 3.5 * u)
                    }
                }
            }
        })
        .collect()
}

fn noise_of(kind: &str, i: usize, os: usize) -> Noise {
    match kind {
        "quiet" => Noise::Quiet,
        "noisy" => Noise::Noisy,
        "heavy" => Noise::Heavy,
        // the OS placement swings, the pinned candidates are quiet
        "swing" if i == os => Noise::Swing,
        "swing" => Noise::Quiet,
        // the OS placement swings, the pinned candidates are noisy
        _ if i == os => Noise::Swing,
        _ => Noise::Noisy,
    }
}

/// The spread of one tick's measurement noise.
fn tick_sd(noise: Noise) -> f64 {
    match noise {
        Noise::Quiet | Noise::Swing => 0.02,
        Noise::Noisy => 0.10,
        Noise::Heavy => 0.05,
    }
}

/// One tick of candidate `c`: its measured rate.
fn tick(c: &mut SimCandidate, rng: &mut Rng) -> f64 {
    let drift_sd = match c.noise {
        Noise::Quiet | Noise::Swing | Noise::Heavy => 0.005,
        Noise::Noisy => 0.025,
    };
    // AR(1) with a 2 s memory whose stationary spread is drift_sd.
    let phi: f64 = 0.95;
    c.drift = phi * c.drift + drift_sd * (1.0 - phi * phi).sqrt() * rng.normal();
    if c.noise == Noise::Swing && rng.uniform() < 0.3 {
        c.high = !c.high;
    }
    now(c, rng)
}

/// A reading of candidate `c` in its present state (its drift and swing as they are).
fn now(c: &SimCandidate, rng: &mut Rng) -> f64 {
    let sd = tick_sd(c.noise);
    let e = match c.noise {
        Noise::Heavy => {
            let chi2 = rng.normal().powi(2) + rng.normal().powi(2);
            (sd * rng.normal() / (chi2 / 2.0).sqrt().max(1e-3)).clamp(-2.0, 2.0)
        }
        _ => sd * rng.normal(),
    };
    let swing = if c.noise == Noise::Swing {
        if c.high {
            1.5
        } else {
            swing_low()
        }
    } else {
        1.0
    };
    c.rate * swing * (c.drift + e).exp()
}

/// The swinging candidate's slow state, a share of its rate: 0.5 (3× below its fast
/// state), or `SIM_SWING_LOW` (0.02: the threads stacked beside a spinning barrier, as
/// GROMACS's OS placement read 1–2% of the leader at its collapses).
fn swing_low() -> f64 {
    static LOW: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *LOW.get_or_init(|| match std::env::var_os("SIM_SWING_LOW") {
        None => 0.5,
        Some(_) => env_number("SIM_SWING_LOW", 0.001, 1.0),
    })
}

struct Outcome {
    lost: f64,
    /// The part of `lost` spent searching.
    search_lost: f64,
    wrong: bool,
    decided_at: f64,
}

// Over 100 lines on purpose: a probe's steps draw from one random stream in a fixed order,
// and today's and an older race meet the same cases (bench/search.sh) only while that order
// holds; the `old_race` branches sit among those steps for the same reason.
fn simulate(case: &Case, seed: u64, params: RaceParams) -> Outcome {
    let mut rng = Rng::new(seed);
    let truth = rates(case.gaps, case.k, &mut rng);
    // The best candidate's place in the list is random; the OS placement is candidate 0.
    let mut order: Vec<usize> = (0..case.k).collect();
    for i in (1..order.len()).rev() {
        let j = (rng.uniform() * (i + 1) as f64) as usize % (i + 1);
        order.swap(i, j);
    }
    let os = 0;
    let mut cands: Vec<SimCandidate> = (0..case.k)
        .map(|i| SimCandidate {
            rate: truth[order[i]],
            noise: noise_of(case.noise, i, os),
            drift: 0.0,
            high: rng.uniform() < 0.5,
        })
        .collect();
    let best = cands.iter().map(|c| c.rate).fold(0.0, f64::max);
    let os_reset = std::env::var_os("SIM_OS_RESET").is_some();
    let mut race = Race::new(params, case.k);
    race.set_os_placement(os);
    // The swinging OS placement is the one beside a CPU busy with other work, which the
    // session tells the strategy (SIM_BUSY=all: every case, SIM_BUSY=none: no case).
    #[cfg(not(old_race))]
    race.set_busy_neighbours(match std::env::var("SIM_BUSY").as_deref() {
        Ok("all") => true,
        Ok("none") => false,
        _ => case.noise.starts_with("swing"),
    });
    let mut t = 0.0;
    let mut lost = 0.0;
    let mut current: Option<usize> = None;
    // Whether probing `c` after `current` moves the threads (none move onto the OS placement
    // before anything was pinned), and what a move stalls (`SIM_MOVE_COST`).
    let moves =
        |current: Option<usize>, c: usize| current != Some(c) && !(current.is_none() && c == os);
    let stall = env_number("SIM_MOVE_COST", 0.0, f64::INFINITY);
    #[cfg(not(old_race))]
    let looks = std::env::var_os("SIM_NO_LOOKS").is_none();
    let wait_chance = env_number("SIM_WAIT", 0.0, 1.0);
    // A neighbour arrives 3 s in and slows every candidate alike (ratios unchanged).
    let load = |t: f64| if case.shift && t >= 3.0 { 0.6 } else { 1.0 };
    // The machine's own load drifts slowly and slows whatever runs (AR(1), 2 s memory).
    let machine_sd = if case.noise == "quiet" { 0.01 } else { 0.05 };
    let machine = std::cell::Cell::new(0.0f64);
    let machine_tick = |rng: &mut Rng| {
        let phi: f64 = 0.95;
        machine.set(phi * machine.get() + machine_sd * (1.0 - phi * phi).sqrt() * rng.normal());
        machine.get().exp()
    };
    loop {
        match race.next(t) {
            Step::Probe {
                candidate,
                warmup,
                measure,
            } => {
                let c = candidate;
                // No warm-up when no thread moves (as the session does).
                let stays = !moves(current, c);
                let warmup = if stays { 0.0 } else { warmup };
                // SIM_OS_RESET=1: a probe of the OS placement after a pinned one starts in a
                // state of its own drawing (the kernel places the threads afresh) instead of
                // the one its last probe ended in (a sensitivity check of that model choice).
                if !stays && c == os && cands[c].noise == Noise::Swing && os_reset {
                    cands[c].high = rng.uniform() < 0.5;
                }
                current = Some(c);
                // SIM_MOVE_COST=s: every move stalls the program for s seconds, as a move of
                // 16 spinning threads did on a 16-CPU virtual machine (a sensitivity check of
                // the probes' count against their length; off by default).
                if !stays {
                    lost += stall;
                    t += stall;
                }
                let loss = 1.0 - cands[c].rate / best;
                // The warm-up costs its own length (the driver reads the counters when it
                // ends); the candidate's state moves on by the ticks it spans.
                let wticks = (warmup / TICK).round() as usize;
                for _ in 0..wticks {
                    tick(&mut cands[c], &mut rng);
                    machine_tick(&mut rng);
                }
                // The driver reads the counters when a warm-up ends. That short reading is
                // noisier than a tick (its count is warmup/tick of a tick's, so its spread
                // is sqrt(tick/warmup) times a tick's: 2.2× at 0.02 s) and the caches may
                // still be cold (up to 30% slow). A strategy may take it as the whole probe
                // of a candidate far behind (`Strategy::behind_at_warmup`).
                if warmup > 0.0 {
                    let cold = 0.7 + 0.3 * rng.uniform();
                    // SIM_WAIT=p: with chance p the moved thread waits behind another process
                    // for much of the warm-up, which then reads 0.1–0.4 of the rate (seen on
                    // real programs beside a busy CPU; a sensitivity check, off by default).
                    let cold = match wait_chance {
                        p if p > 0.0 && rng.uniform() < p => cold * (0.1 + 0.3 * rng.uniform()),
                        _ => cold,
                    };
                    let spread = (TICK / warmup).sqrt().max(1.0);
                    let extra = (spread * tick_sd(cands[c].noise) * rng.normal()).exp();
                    // (0.02 s: neither the candidate's state nor the machine's moves on)
                    let reading = load(t) * machine.get().exp() * now(&cands[c], &mut rng);
                    // A move's stall (`SIM_MOVE_COST`) comes before the warm-up's work:
                    // the reading, taken over both, shows it.
                    let reading = reading * cold * extra * warmup / (warmup + stall);
                    #[cfg(not(old_race))]
                    race.warmed_up(c, reading);
                    #[cfg(not(old_race))]
                    if race.behind_at_warmup(c, reading) {
                        lost += loss * warmup;
                        t += warmup;
                        if std::env::var_os("SIM_TRACE").is_some() {
                            eprintln!("  probe {c} warm {warmup:.2} ended there: {reading:.3}");
                        }
                        race.record(ProbeOutcome {
                            candidate: c,
                            score: reading,
                            duration: warmup,
                            interval_cv: None,
                            interval_range: Some((reading, reading)),
                            intervals: 1,
                            ended_collapsed: false,
                        });
                        continue;
                    }
                    #[cfg(old_race)]
                    let _ = reading;
                }
                let mticks = ((measure / TICK).round() as usize).max(1);
                let mut xs = Vec::with_capacity(mticks);
                // How long each reading in `xs` lasted: a tick, or a look that ended the probe.
                let mut lens = Vec::with_capacity(mticks);
                for _ in 0..mticks {
                    let x = load(t) * machine_tick(&mut rng) * tick(&mut cands[c], &mut rng);
                    // A probe the strategy watches is looked at every `LOOK` (the session's
                    // `look_due`): a tick in a collapsed state shows it at its first look
                    // (its reading taken as the tick's: a collapse is far below any noise),
                    // which ends the probe there. SIM_NO_LOOKS=1 leaves looks out.
                    #[cfg(not(old_race))]
                    if looks && race.watched(c) && race.collapsed(c, x) {
                        xs.push(x);
                        lens.push(LOOK);
                        break;
                    }
                    xs.push(x);
                    lens.push(TICK);
                    // A probe the strategy has seen enough of ends early (the session asks
                    // after every tick); searches older than that hook never end one.
                    #[cfg(not(old_race))]
                    if xs.len() < mticks && race.seen_enough(c, &xs) {
                        break;
                    }
                }
                let measured: f64 = lens.iter().sum();
                let spent = warmup + measured;
                lost += loss * spent;
                t += spent;
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!("  probe {c} warm {warmup:.2} ticks {xs:.3?}");
                }
                let n = xs.len() as f64;
                // The probe's rate: its work over its time. One that ended at a look that read
                // a collapse is taken as having run its planned length in that state, as the
                // session tells the strategy (its state carries on past the look).
                let planned = (mticks as f64 * TICK).max(measured);
                let cut_short = lens.last().is_some_and(|l| *l < TICK);
                let rest = if cut_short { planned - measured } else { 0.0 };
                let mean = if cut_short {
                    let work = xs.iter().zip(&lens).map(|(x, l)| x * l).sum::<f64>();
                    (work + xs.last().copied().unwrap_or(0.0) * rest) / (measured + rest)
                } else {
                    xs.iter().sum::<f64>() / n
                };
                let cv = (xs.len() >= 2).then(|| {
                    let v = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
                    v.sqrt() / mean
                });
                let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                race.record(ProbeOutcome {
                    candidate: c,
                    score: mean,
                    duration: measured + rest,
                    interval_cv: cv,
                    // (older sessions gave a range only for two ticks or more)
                    interval_range: (cfg!(not(old_race)) || xs.len() >= 2).then_some((lo, hi)),
                    intervals: xs.len(),
                    #[cfg(not(old_race))]
                    ended_collapsed: cut_short,
                });
            }
            Step::Decide(d) => {
                if std::env::var_os("SIM_TRACE").is_some() {
                    eprintln!("  decide {} at {t:.2}: {}", d.candidate, d.reason);
                }
                let r = cands[d.candidate.min(case.k - 1)].rate;
                // The decided pinning applied (or the OS placement given back) is a move too.
                if moves(current, d.candidate) {
                    lost += stall;
                    t += stall;
                }
                let search_lost = lost;
                if std::env::var_os("SIM_WRONG").is_some() && r < best / 1.02 {
                    eprint!("seed {seed} ");
                    let truth: Vec<String> =
                        cands.iter().map(|c| format!("{:.2}", c.rate)).collect();
                    eprintln!(
                        "wrong: {} {} k={} chose {} of [{}] at {t:.1} s: {}",
                        case.gaps,
                        case.noise,
                        case.k,
                        d.candidate,
                        truth.join(" "),
                        d.reason
                    );
                }
                lost += (1.0 - r / best) * (HORIZON - t).max(0.0);
                return Outcome {
                    lost,
                    search_lost,
                    wrong: r < best / 1.02,
                    decided_at: t,
                };
            }
        }
        if t > HORIZON {
            return Outcome {
                lost,
                search_lost: lost,
                wrong: false,
                decided_at: t,
            };
        }
    }
}

/// A number the environment sets, 0 when unset: `SIM_MOVE_COST` (seconds of the program's
/// work a move of its threads stalls), `SIM_WAIT` (the chance that a warm-up catches the
/// moved thread waiting for its CPU). A value that is not a finite number in `lo..=hi`
/// ends the run (exit 2): read as 0 it would print the default simulator's numbers under the
/// name asked for, and a negative stall or a chance above 1 simulates nothing real.
fn env_number(name: &str, lo: f64, hi: f64) -> f64 {
    let Ok(v) = std::env::var(name) else {
        return 0.0;
    };
    let valid = if hi.is_finite() {
        format!("a number from {lo} to {hi}")
    } else {
        format!("a finite number of {lo} or more")
    };
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && (lo..=hi).contains(&x) => x,
        _ => usage(&format!("{name}={v:?}: it must be {valid}")),
    }
}

/// One line of the table on stdout. A reader that closed the pipe (`| head`) has all it
/// wanted: the run ends quietly instead of panicking on the failed write.
fn emit(line: std::fmt::Arguments) {
    use std::io::Write;
    if writeln!(std::io::stdout().lock(), "{line}").is_err() {
        std::process::exit(0);
    }
}

/// Ends the run on bad input: what was wrong, on stderr, and exit status 2.
fn usage(what: &str) -> ! {
    eprintln!("search_sim: {what}");
    std::process::exit(2)
}

/// The race's parameters: the defaults, or as `SIM_PARAMS="probe=0.3 error=0.1"` says
/// (for exploring today's race; the benchmark uses the defaults).
#[cfg(old_race)]
fn params() -> RaceParams {
    RaceParams::default()
}

#[cfg(not(old_race))]
fn params() -> RaceParams {
    RaceParams::with_settings(&std::env::var("SIM_PARAMS").unwrap_or_default())
        .unwrap_or_else(|e| usage(&format!("SIM_PARAMS: {e}")))
}

fn main() {
    let seeds: u64 = match std::env::args().nth(1) {
        None => 200,
        Some(s) => s.parse().unwrap_or_else(|_| {
            usage(&format!(
                "{s:?} is not a number of seeds (usage: search_sim [SEEDS])"
            ))
        }),
    };
    let params = params();
    emit(format_args!(
        "gaps\tnoise\tk\tshift\tlost_s\tsearch_lost_s\twrong\tdecided_s"
    ));
    let only = |what: &str, v: &str| std::env::var(what).map_or(true, |o| o == v);
    for gaps in ["equal", "close", "medium", "far", "mixed"]
        .into_iter()
        .filter(|g| only("SIM_GAPS", g))
    {
        for noise in ["quiet", "noisy", "heavy", "swing", "swing+noisy"]
            .into_iter()
            .filter(|n| only("SIM_NOISE", n))
        {
            for k in [2, 3, 5, 8, 12]
                .into_iter()
                .filter(|k| only("SIM_K", &k.to_string()))
            {
                for shift in [false, true] {
                    let case = Case {
                        gaps,
                        noise,
                        k,
                        shift,
                    };
                    let (mut lost, mut search_lost, mut wrong, mut at) = (0.0, 0.0, 0.0, 0.0);
                    for s in 0..seeds {
                        if std::env::var("SIM_SEED").is_ok_and(|x| x != s.to_string()) {
                            continue;
                        }
                        let o = simulate(&case, 1 + s * 7919, params);
                        lost += o.lost;
                        search_lost += o.search_lost;
                        wrong += f64::from(u8::from(o.wrong));
                        at += o.decided_at;
                    }
                    let n = seeds as f64;
                    emit(format_args!(
                        "{gaps}\t{noise}\t{k}\t{}\t{:.4}\t{:.4}\t{:.4}\t{:.3}",
                        u8::from(shift),
                        lost / n,
                        search_lost / n,
                        wrong / n,
                        at / n
                    ));
                }
            }
        }
    }
}
