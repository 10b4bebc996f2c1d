//! What "better" means for a pinning: the `--objective` grammar.
//!
//! ```text
//! objective := [ "max:" | "min:" ] expr
//! expr      := term { ("+" | " - ") term }      subtraction needs spaces: "a - b"
//! term      := unary { ("*" | "/") unary }
//! unary     := "-" unary | atom
//! atom      := number | event | "heartbeat" | "energy" | "(" expr ")"
//! ```
//! Whole-objective keywords: `heartbeat` (beats/s), `openmp` (completed OpenMP constructs/s,
//! counted by the preload library; see docs/objectives.md), `power` (W, lower is better), `energy`
//! (joules per 10⁹ user instructions, lower is better). An event is any `EventSpec` form;
//! `-` inside a name belongs to it (`cache-misses`), and `pmu/terms/` is read as a PMU event
//! when `pmu` exists in sysfs and no space follows it.
//!
//! Values: each event stands for its count summed over the measured threads during the
//! interval; `heartbeat` for beats; `energy` for joules. An expression whose dimension is
//! one count (`instructions`, `a + b`, `energy`) is turned into a per-second rate; a ratio
//! (`instructions/cycles`) is used as is. More is better unless energy appears in a
//! numerator (then less is better) or `min:`/`max:` says otherwise.

use crate::counting::CountingMode;
use crate::error::PerfError;
use crate::event::EventSpec;
use crate::sysfs::Sysfs;
use std::collections::BTreeMap;
use std::time::Duration;

/// Measured change over one interval, summed over the covered threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    pub elapsed: Duration,
    /// Event key (`EventSpec::key`) → increase, in event units (sysfs scale applied).
    pub events: BTreeMap<String, f64>,
    /// Heartbeats during the interval, if a back channel exists.
    pub heartbeats: Option<u64>,
    /// Joules consumed during the interval, if an energy source exists.
    pub energy_joules: Option<f64>,
    /// Completed OpenMP constructs during the interval, if the preload library counts them.
    pub omp_progress: Option<u64>,
    /// The same counted once per team whatever its size (regions, the barriers and
    /// construct ends a team passes, tasks: `OmpCounts::team_total`).
    pub omp_team_progress: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectiveKind {
    /// One event, per second.
    EventRate,
    /// Any other expression of events.
    Expression,
    Heartbeat,
    /// Completed OpenMP work (regions, chunks, barriers, tasks) per second.
    OpenMp,
    /// Completed OpenMP work counted once per team whatever its size, per second: teams of
    /// different sizes compare on it (a barrier of two threads counts one, as one of
    /// sixteen does).
    OpenMpTeam,
    Power,
    Energy,
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Num(f64),
    Event(usize),
    Heartbeat,
    OpenMp,
    OpenMpTeam,
    Energy,
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    text: String,
    kind: ObjectiveKind,
    expr: Expr,
    events: Vec<EventSpec>,
    /// Number of count dimensions (1: divide by seconds).
    degree: i32,
    higher_is_better: bool,
    unit: String,
}

/// What the engine knows about the target, for `Objective::warnings`.
#[derive(Debug, Clone, Default)]
pub struct WarningContext {
    /// Environment the target runs with.
    pub env: Vec<(String, String)>,
    /// Shared libraries the target links or has mapped (file names or paths).
    pub linked_libraries: Vec<String>,
    pub counting_mode: Option<CountingMode>,
    pub in_vm: bool,
}

impl Default for Objective {
    /// The paper's objective: user-space instructions retired per second, summed over threads.
    fn default() -> Self {
        Objective::parse_with("instructions:u", &Sysfs::at("/nonexistent"))
            .expect("generic events parse without sysfs")
    }
}

impl Objective {
    pub fn parse(s: &str) -> Result<Objective, PerfError> {
        Objective::parse_with(s, &Sysfs::system())
    }

    pub fn parse_with(s: &str, sysfs: &Sysfs) -> Result<Objective, PerfError> {
        let trimmed = s.trim();
        let lead = s.len() - s.trim_start().len();
        let (force, body, body_pos) = if let Some(b) = trimmed.strip_prefix("max:") {
            (Some(true), b, lead + 4)
        } else if let Some(b) = trimmed.strip_prefix("min:") {
            (Some(false), b, lead + 4)
        } else {
            (None, trimmed, lead)
        };
        if body.trim().is_empty() {
            return Err(PerfError::parse(
                "objective",
                s,
                body_pos,
                "empty objective; valid: an event (instructions), a ratio (instructions/cycles), heartbeat, power, energy",
            ));
        }
        let word = body.trim();
        let instr = || EventSpec::parse_with("instructions:u", sysfs);
        let (kind, expr, events) = match word {
            "heartbeat" => (ObjectiveKind::Heartbeat, Expr::Heartbeat, vec![]),
            "openmp" | "omp" => (ObjectiveKind::OpenMp, Expr::OpenMp, vec![]),
            "openmp-team" => (ObjectiveKind::OpenMpTeam, Expr::OpenMpTeam, vec![]),
            "power" => (ObjectiveKind::Power, Expr::Energy, vec![]),
            "energy" => (
                ObjectiveKind::Energy,
                // joules per 1e9 instructions
                Expr::Bin(
                    '*',
                    Box::new(Expr::Bin(
                        '/',
                        Box::new(Expr::Energy),
                        Box::new(Expr::Event(0)),
                    )),
                    Box::new(Expr::Num(1e9)),
                ),
                vec![instr()?],
            ),
            _ => {
                let mut p = ExprParser {
                    input: s,
                    chars: s.char_indices().collect(),
                    i: s[..body_pos].chars().count(),
                    sysfs,
                    events: Vec::new(),
                };
                let e = p.expr()?;
                p.skip_ws();
                if p.i < p.chars.len() {
                    return Err(p.err(
                        p.i,
                        format!(
                            "unexpected '{}'; expected an operator (+, -, *, /) or the end",
                            p.chars[p.i].1
                        ),
                    ));
                }
                let kind = if matches!(e, Expr::Event(_)) {
                    ObjectiveKind::EventRate
                } else {
                    ObjectiveKind::Expression
                };
                (kind, e, p.events)
            }
        };
        let degree = dimension(&expr).map_err(|(op, msg)| {
            PerfError::parse("objective", s, body_pos + body.find(op).unwrap_or(0), msg)
        })?;
        let lower = kind == ObjectiveKind::Power || energy_in_numerator(&expr, false);
        let higher_is_better = force.unwrap_or(!lower);
        let unit = match kind {
            ObjectiveKind::Heartbeat => "beats/s".to_string(),
            ObjectiveKind::OpenMp => "OpenMP constructs/s".to_string(),
            ObjectiveKind::OpenMpTeam => "OpenMP team constructs/s".to_string(),
            ObjectiveKind::Power => "W".to_string(),
            ObjectiveKind::Energy => "J per 1e9 instructions".to_string(),
            ObjectiveKind::EventRate => {
                format!("{}/s", events[0].unit.as_deref().unwrap_or(events[0].key()))
            }
            ObjectiveKind::Expression => match degree {
                1 if matches!(expr, Expr::Energy) => "W".to_string(),
                1 => "per second".to_string(),
                0 => "ratio".to_string(),
                d => format!("count^{d}"),
            },
        };
        Ok(Objective {
            text: trimmed.to_string(),
            kind,
            expr,
            events,
            degree,
            higher_is_better,
            unit,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn kind(&self) -> ObjectiveKind {
        self.kind
    }

    /// Events that must be counted for this objective.
    pub fn events(&self) -> Vec<EventSpec> {
        self.events.clone()
    }

    pub fn higher_is_better(&self) -> bool {
        self.higher_is_better
    }

    pub fn unit(&self) -> &str {
        &self.unit
    }

    pub fn needs_heartbeat(&self) -> bool {
        contains(&self.expr, &|e| matches!(e, Expr::Heartbeat))
    }

    /// True when the objective reads the preload library's OpenMP counts.
    pub fn needs_openmp(&self) -> bool {
        contains(&self.expr, &|e| {
            matches!(e, Expr::OpenMp | Expr::OpenMpTeam)
        })
    }

    pub fn needs_energy(&self) -> bool {
        contains(&self.expr, &|e| matches!(e, Expr::Energy))
    }

    /// Is `a` better than `b` under this objective?
    pub fn better(&self, a: f64, b: f64) -> bool {
        if self.higher_is_better {
            a > b
        } else {
            a < b
        }
    }

    /// One line for reports: "instructions:u per second (more is better)".
    pub fn describe(&self) -> String {
        format!(
            "{} [{}] ({} is better)",
            self.text,
            self.unit,
            if self.higher_is_better {
                "more"
            } else {
                "less"
            }
        )
    }

    /// The objective's value over one interval. `None` when an input is missing (event not
    /// counted or multiplexed out, no heartbeat, no energy), time did not pass, or a
    /// denominator is zero — never a made-up number.
    pub fn evaluate(&self, d: &Delta) -> Option<f64> {
        let v = self.eval(&self.expr, d)?;
        let v = if self.degree == 1 {
            let s = d.elapsed.as_secs_f64();
            if s <= 0.0 {
                return None;
            }
            v / s
        } else {
            v
        };
        v.is_finite().then_some(v)
    }

    fn eval(&self, e: &Expr, d: &Delta) -> Option<f64> {
        Some(match e {
            Expr::Num(n) => *n,
            Expr::Event(i) => *d.events.get(self.events[*i].key())?,
            Expr::Heartbeat => d.heartbeats? as f64,
            Expr::OpenMp => d.omp_progress? as f64,
            Expr::OpenMpTeam => d.omp_team_progress? as f64,
            Expr::Energy => d.energy_joules?,
            Expr::Neg(a) => -self.eval(a, d)?,
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.eval(a, d)?, self.eval(b, d)?);
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    _ => {
                        if b == 0.0 {
                            return None;
                        }
                        a / b
                    }
                }
            }
        })
    }

    /// Reasons this objective may mislead for this target.
    pub fn warnings(&self, ctx: &WarningContext) -> Vec<String> {
        let mut w = Vec::new();
        let counts_work = self.events.iter().any(|e| e.needs_hardware());
        if counts_work {
            let active = ctx
                .env
                .iter()
                .any(|(k, v)| k == "OMP_WAIT_POLICY" && v.eq_ignore_ascii_case("active"));
            let spinner_lib = ctx.linked_libraries.iter().find_map(|l| {
                let name = l.rsplit('/').next().unwrap_or(l);
                ["libgomp", "libomp", "libiomp", "libopenblas", "libblis"]
                    .iter()
                    .find(|p| name.starts_with(*p))
                    .map(|_| name.to_string())
            });
            let why = match (active, spinner_lib) {
                (true, _) => Some("the target runs with OMP_WAIT_POLICY=active".to_string()),
                (false, Some(lib)) => Some(format!(
                    "the target links {lib}, whose threads spin or sched_yield while waiting"
                )),
                _ => None,
            };
            if let Some(why) = why {
                w.push(format!(
                    "instruction rates are misleading for OpenMP spin-waits (OMP_WAIT_POLICY=active, sched_yield spinners) — {why}: waiting threads retire instructions without doing work; use --objective heartbeat"
                ));
            }
        }
        if self.kind == ObjectiveKind::Expression && self.degree == 0 && counts_work {
            let ipc = self.events.iter().any(|e| e.is_instructions())
                && self
                    .events
                    .iter()
                    .any(|e| e.type_ == crate::event::TYPE_HARDWARE && e.config == 0);
            if ipc {
                w.push("IPC (instructions/cycles) can rank pinnings wrongly: a pinning that runs fewer threads at once can have a higher IPC yet less throughput; prefer instructions:u or heartbeat".into());
            }
        }
        if ctx.in_vm
            && ctx.counting_mode == Some(CountingMode::PerThread)
            && !self.events.is_empty()
        {
            w.push("per-thread counting in a virtual machine adds a cost to every context switch of the target; threads that block often (passive-wait OpenMP, pipes, locks) are slowed and the ranking may change — see the perturbation estimate".into());
        }
        w
    }
}

fn contains(e: &Expr, f: &dyn Fn(&Expr) -> bool) -> bool {
    f(e) || match e {
        Expr::Neg(a) => contains(a, f),
        Expr::Bin(_, a, b) => contains(a, f) || contains(b, f),
        _ => false,
    }
}

fn energy_in_numerator(e: &Expr, in_denominator: bool) -> bool {
    match e {
        Expr::Energy => !in_denominator,
        Expr::Neg(a) => energy_in_numerator(a, in_denominator),
        Expr::Bin('/', a, b) => {
            energy_in_numerator(a, in_denominator) || energy_in_numerator(b, !in_denominator)
        }
        Expr::Bin(_, a, b) => {
            energy_in_numerator(a, in_denominator) || energy_in_numerator(b, in_denominator)
        }
        _ => false,
    }
}

/// Count dimension of an expression; adding a count to a plain number is an error.
fn dimension(e: &Expr) -> Result<i32, (char, String)> {
    Ok(match e {
        Expr::Num(_) => 0,
        Expr::Event(_) | Expr::Heartbeat | Expr::OpenMp | Expr::OpenMpTeam | Expr::Energy => 1,
        Expr::Neg(a) => dimension(a)?,
        Expr::Bin(op, a, b) => {
            let (da, db) = (dimension(a)?, dimension(b)?);
            match op {
                '*' => da + db,
                '/' => da - db,
                _ if da == db => da,
                _ => {
                    return Err((
                        *op,
                        format!("'{op}' mixes quantities of different kinds (a count and a ratio or a plain number); scale with * or / instead"),
                    ))
                }
            }
        }
    })
}

struct ExprParser<'a> {
    input: &'a str,
    chars: Vec<(usize, char)>,
    i: usize,
    sysfs: &'a Sysfs,
    events: Vec<EventSpec>,
}

const EXPECT_ATOM: &str = "expected an event, a number, heartbeat, energy or '('";

impl<'a> ExprParser<'a> {
    fn err(&self, pos: usize, msg: impl Into<String>) -> PerfError {
        PerfError::parse("objective", self.input, pos, msg)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).map(|c| c.1)
    }

    fn skip_ws(&mut self) -> bool {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_whitespace()) {
            self.i += 1;
        }
        self.i > start
    }

    fn expr(&mut self) -> Result<Expr, PerfError> {
        let mut lhs = self.term()?;
        loop {
            self.skip_ws();
            match self.peek() {
                Some(op @ ('+' | '-')) => {
                    self.i += 1;
                    let rhs = self.term()?;
                    lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
                }
                _ => return Ok(lhs),
            }
        }
    }

    fn term(&mut self) -> Result<Expr, PerfError> {
        let mut lhs = self.unary()?;
        loop {
            self.skip_ws();
            match self.peek() {
                Some(op @ ('*' | '/')) => {
                    self.i += 1;
                    let rhs = self.unary()?;
                    lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
                }
                _ => return Ok(lhs),
            }
        }
    }

    fn unary(&mut self) -> Result<Expr, PerfError> {
        self.skip_ws();
        if self.peek() == Some('-') {
            self.i += 1;
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, PerfError> {
        self.skip_ws();
        let start = self.i;
        let Some(c) = self.peek() else {
            return Err(self.err(start, format!("unexpected end; {EXPECT_ATOM}")));
        };
        if c == '(' {
            self.i += 1;
            let e = self.expr()?;
            self.skip_ws();
            if self.peek() != Some(')') {
                return Err(self.err(
                    self.i,
                    format!("missing ')' to close the '(' at position {start}"),
                ));
            }
            self.i += 1;
            return Ok(e);
        }
        if c.is_ascii_digit() || c == '.' {
            while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                self.i += 1;
            }
            if self.peek().is_some_and(|c| c == 'e' || c == 'E') {
                self.i += 1;
                if self.peek().is_some_and(|c| c == '+' || c == '-') {
                    self.i += 1;
                }
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.i += 1;
                }
            }
            let text = self.slice(start, self.i);
            return text
                .parse::<f64>()
                .map(Expr::Num)
                .map_err(|_| self.err(start, format!("'{text}' is not a number")));
        }
        if !(c.is_ascii_alphabetic() || c == '_') {
            return Err(self.err(start, format!("unexpected '{c}'; {EXPECT_ATOM}")));
        }
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
        {
            self.i += 1;
        }
        let mut word = self.slice(start, self.i).to_string();
        if self.peek() == Some('/') && self.sysfs.has_pmu(&word) {
            // pmu/terms/ plus optional modifiers.
            self.i += 1;
            while self.peek().is_some_and(|c| c != '/' && !c.is_whitespace()) {
                self.i += 1;
            }
            if self.peek() == Some('/') {
                self.i += 1;
                while self.peek().is_some_and(|c| matches!(c, 'u' | 'k' | ':')) {
                    self.i += 1;
                }
            }
            word = self.slice(start, self.i).to_string();
        }
        match word.as_str() {
            "heartbeat" => return Ok(Expr::Heartbeat),
            "openmp" => return Ok(Expr::OpenMp),
            "energy" => return Ok(Expr::Energy),
            "power" => {
                return Err(self.err(start, "'power' is a whole objective; inside an expression use energy (joules), e.g. energy/heartbeat"))
            }
            _ => {}
        }
        let spec = EventSpec::parse_with(&word, self.sysfs).map_err(|e| match e {
            PerfError::Parse { pos, msg, .. } => {
                let extra = if word.contains('-')
                    && word
                        .split('-')
                        .all(|p| EventSpec::parse_with(p, self.sysfs).is_ok())
                {
                    "; to subtract, put spaces around '-' (a - b)"
                } else {
                    ""
                };
                self.err(start + pos, format!("{msg}{extra}"))
            }
            other => other,
        })?;
        let idx = match self.events.iter().position(|e| e.key() == spec.key()) {
            Some(i) => i,
            None => {
                self.events.push(spec);
                self.events.len() - 1
            }
        };
        Ok(Expr::Event(idx))
    }

    fn slice(&self, from: usize, to: usize) -> &'a str {
        let a = self
            .chars
            .get(from)
            .map(|c| c.0)
            .unwrap_or(self.input.len());
        let b = self.chars.get(to).map(|c| c.0).unwrap_or(self.input.len());
        &self.input[a..b]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::fake;

    fn with_sysfs<T>(f: impl FnOnce(&Sysfs) -> T) -> T {
        let d = tempfile::tempdir().unwrap();
        fake::populate(d.path(), 2);
        f(&Sysfs::at(d.path()))
    }

    fn obj(s: &str) -> Result<Objective, PerfError> {
        with_sysfs(|sys| Objective::parse_with(s, sys))
    }

    fn delta(ms: u64, ev: &[(&str, f64)]) -> Delta {
        Delta {
            elapsed: Duration::from_millis(ms),
            events: ev.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            heartbeats: None,
            energy_joules: None,
            omp_progress: None,
            omp_team_progress: None,
        }
    }

    #[test]
    fn openmp_progress_is_a_rate_of_completed_constructs() {
        let o = obj("openmp").unwrap();
        assert_eq!(o.kind(), ObjectiveKind::OpenMp);
        assert!(o.needs_openmp() && o.events().is_empty() && o.higher_is_better());
        assert_eq!(o.unit(), "OpenMP constructs/s");
        let mut d = delta(500, &[]);
        assert_eq!(o.evaluate(&d), None, "no counts: no value");
        d.omp_progress = Some(300);
        assert_eq!(o.evaluate(&d), Some(600.0));
        assert_eq!(obj("omp").unwrap().kind(), ObjectiveKind::OpenMp);
        let team = obj("openmp-team").unwrap();
        assert_eq!(team.kind(), ObjectiveKind::OpenMpTeam);
        assert!(team.needs_openmp() && team.higher_is_better());
        assert_eq!(team.unit(), "OpenMP team constructs/s");
        d.omp_team_progress = Some(40);
        assert_eq!(team.evaluate(&d), Some(40.0 / d.elapsed.as_secs_f64()));
        assert!(!obj("heartbeat").unwrap().needs_openmp());
    }

    #[test]
    fn the_kernel_clocks_are_cpu_seconds_per_second() {
        for name in ["task-clock", "cpu-clock"] {
            let o = obj(name).unwrap();
            assert_eq!(o.unit(), "CPU-s/s", "{name}");
            assert_eq!(o.events()[0].scale, 1e-9, "{name}: counts are nanoseconds");
        }
        assert_eq!(obj("page-faults").unwrap().unit(), "page-faults/s");
    }

    #[test]
    fn default_is_instructions_per_second() {
        let o = Objective::default();
        assert_eq!(o.kind(), ObjectiveKind::EventRate);
        assert_eq!(o.events()[0].key(), "instructions:u");
        assert!(o.higher_is_better());
        assert_eq!(o.unit(), "instructions:u/s");
        assert_eq!(
            o.evaluate(&delta(500, &[("instructions:u", 1e9)])),
            Some(2e9)
        );
        assert_eq!(o.evaluate(&delta(500, &[])), None);
        assert_eq!(o.evaluate(&delta(0, &[("instructions:u", 1e9)])), None);
        let same = obj("instructions").unwrap();
        assert_eq!((same.events(), same.unit()), (o.events(), o.unit()));
    }

    #[test]
    fn ratios_and_arithmetic() {
        let o = obj("instructions/cycles").unwrap();
        assert_eq!(o.kind(), ObjectiveKind::Expression);
        assert_eq!(o.unit(), "ratio");
        assert_eq!(o.events().len(), 2);
        let d = delta(100, &[("instructions:u", 300.0), ("cycles:u", 200.0)]);
        assert_eq!(o.evaluate(&d), Some(1.5));
        assert_eq!(
            o.evaluate(&delta(100, &[("instructions:u", 3.0), ("cycles:u", 0.0)])),
            None
        );

        let o = obj("(instructions + branches) / cycles").unwrap();
        let d = delta(
            100,
            &[
                ("instructions:u", 300.0),
                ("branches:u", 100.0),
                ("cycles:u", 200.0),
            ],
        );
        assert_eq!(o.evaluate(&d), Some(2.0));
        let o = obj("(instructions+branches)/cycles").unwrap();
        assert_eq!(o.evaluate(&d), Some(2.0));
        // One count dimension: a rate per second.
        let o = obj("instructions - branches").unwrap();
        assert_eq!(o.unit(), "per second");
        assert_eq!(o.evaluate(&d), Some(2000.0));
        let o = obj("2 * cache-misses / LLC-load-misses").unwrap();
        let d = delta(100, &[("cache-misses:u", 10.0), ("LLC-load-misses:u", 4.0)]);
        assert_eq!(o.evaluate(&d), Some(5.0));
        // Precedence: a + b * c.
        let o = obj("-instructions + 2*cycles").unwrap();
        let d = delta(1000, &[("instructions:u", 1.0), ("cycles:u", 3.0)]);
        assert_eq!(o.evaluate(&d), Some(5.0));
        // Events with PMU form inside expressions.
        let o = obj("cpu/event=0xc0/ / cycles").unwrap();
        assert_eq!(o.events()[0].key(), "cpu/event=0xc0/u");
    }

    #[test]
    fn heartbeat_power_energy() {
        let o = obj("heartbeat").unwrap();
        assert!(o.needs_heartbeat() && o.events().is_empty() && o.higher_is_better());
        let mut d = delta(2000, &[]);
        assert_eq!(o.evaluate(&d), None, "no back channel: no value");
        d.heartbeats = Some(50);
        assert_eq!(o.evaluate(&d), Some(25.0));
        assert_eq!(o.unit(), "beats/s");

        let p = obj("power").unwrap();
        assert!(!p.higher_is_better() && p.needs_energy());
        assert_eq!(p.unit(), "W");
        d.energy_joules = Some(100.0);
        assert_eq!(p.evaluate(&d), Some(50.0));
        assert!(p.better(40.0, 50.0));

        let e = obj("energy").unwrap();
        assert!(!e.higher_is_better());
        assert_eq!(e.events()[0].key(), "instructions:u");
        d.events.insert("instructions:u".into(), 2e9);
        assert_eq!(e.evaluate(&d), Some(50.0));

        let per_beat = obj("energy/heartbeat").unwrap();
        assert!(!per_beat.higher_is_better());
        assert_eq!(per_beat.evaluate(&d), Some(2.0));
        let beats_per_joule = obj("heartbeat/energy").unwrap();
        assert!(beats_per_joule.higher_is_better());
        assert!(obj("max:energy/heartbeat").unwrap().higher_is_better());
        assert!(!obj("min:instructions").unwrap().higher_is_better());
        let rapl = obj("power/energy-pkg/").unwrap();
        assert_eq!(rapl.unit(), "Joules/s");
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = obj("instructions/").unwrap_err();
        assert_eq!(e.position(), Some(13));
        assert!(e.to_string().contains("unexpected end"));
        let e = obj("(instructions/cycles").unwrap_err();
        assert_eq!(e.position(), Some(20));
        assert!(e.to_string().contains("missing ')'"));
        let e = obj("instructions/cyclez").unwrap_err();
        assert_eq!(e.position(), Some(13));
        assert!(e.to_string().contains("did you mean 'cycles'"), "{e}");
        let e = obj("instructions-cycles").unwrap_err();
        assert!(e.to_string().contains("put spaces around '-'"), "{e}");
        let e = obj("instructions:q").unwrap_err();
        assert_eq!(e.position(), Some(13));
        let e = obj("instructions + 1").unwrap_err();
        assert_eq!(e.position(), Some(13));
        assert!(e.to_string().contains("mixes quantities"));
        let e = obj("instructions cycles").unwrap_err();
        assert_eq!(e.position(), Some(13));
        let e = obj("").unwrap_err();
        assert!(e.to_string().contains("heartbeat"));
        let e = obj("power * 2").unwrap_err();
        assert!(e.to_string().contains("whole objective"));
        let e = obj("cpu/event=0x1ff/").unwrap_err();
        assert_eq!(e.position(), Some(10));
        let e = obj("#").unwrap_err();
        assert_eq!(e.position(), Some(0));
    }

    #[test]
    fn warnings_for_spinners_and_ipc() {
        let o = Objective::default();
        let ctx = WarningContext {
            env: vec![("OMP_WAIT_POLICY".into(), "ACTIVE".into())],
            ..Default::default()
        };
        let w = o.warnings(&ctx);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("use --objective heartbeat") && w[0].contains("OMP_WAIT_POLICY=active")
        );
        let ctx = WarningContext {
            linked_libraries: vec!["/usr/lib/x86_64-linux-gnu/libopenblas.so.0".into()],
            ..Default::default()
        };
        assert!(o.warnings(&ctx)[0].contains("libopenblas.so.0"));
        assert!(o.warnings(&WarningContext::default()).is_empty());
        assert!(obj("heartbeat").unwrap().warnings(&ctx).is_empty());
        let ipc = obj("instructions/cycles").unwrap();
        assert!(ipc.warnings(&WarningContext::default())[0].contains("IPC"));
        let vm = WarningContext {
            in_vm: true,
            counting_mode: Some(CountingMode::PerThread),
            ..Default::default()
        };
        assert!(o.warnings(&vm)[0].contains("context switch"));
    }
}
