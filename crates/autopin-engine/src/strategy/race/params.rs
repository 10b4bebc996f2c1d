//! The race's settings (`RaceParams`) and their defaults: probe lengths, the error levels,
//! the rules' thresholds. What each is for, and what other values did: docs/search.md.

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RaceParams {
    /// Warm-up after each re-pin before measuring (cache refill, migration), seconds. 0.02 s
    /// by default: the driver reads the counters when it ends, `sched_setaffinity` has moved
    /// the thread before it returns, and caches refill within milliseconds.
    pub warmup: f64,
    /// The warm-up once the first whole probe after a move has shown that moves do not slow
    /// the program beyond their warm-up (its warm-up read at most `QUIET_DEFICIT` below it),
    /// seconds; 0.01 by default. A warm-up that shows a
    /// candidate far behind is its whole probe, so each such look (the OS placement's
    /// collapses beside a busy CPU) costs its length. Not from the start: until then a stall
    /// as long as the warm-up may be what it reads (in the simulator, with every move
    /// stalling the program 20 ms, 10 ms warm-ups from the start lost 20% more work and
    /// made 44% more wrong decisions). Equal to `warmup` to keep that one throughout.
    pub quiet_warmup: f64,
    /// Base probe length, seconds: every first probe, and every probe of a candidate that is
    /// not a close call.
    pub probe: f64,
    /// Probe length of a pinning more than `FAR_BEHIND` behind the leader after its first
    /// round, seconds: one sampling tick shows whether it is still behind, and each further
    /// one is lost work. The OS placement keeps the base length (its rate may swing).
    pub far_probe: f64,
    /// Bounds for the probe length, seconds.
    pub min_probe: f64,
    pub max_probe: f64,
    /// Search time budget (warm-ups included), seconds.
    pub budget: f64,
    /// When a first search that is clean (`Race::clean`: no OS placement still racing
    /// beside CPUs busy with other work, no change of the whole machine, no lengthened probe,
    /// no candidate whose ticks swing) ends, seconds from the program's start
    /// (`Strategy::set_started_at`; at least `MIN_CLEAN_SEARCH` of searching): 2.9 s, so that
    /// the decision comes within 3 s. It ends as the budget does (the leader only when it is
    /// ahead of what a tie keeps at `end_error`). Re-searches, and ranks that search
    /// together, keep their budget. In the simulator's table over every real topology (230
    /// cases, 10 seeds) the median decision came at 5.3 s without it, 69 cases within 3 s;
    /// with it 2.8 s, 203 within 3 s (the rest beside busy CPUs, where the OS placement
    /// needs its three looks, one a round, before it may go), and two cases' medians at
    /// 0.947–0.948 of the optimum instead of one. The hazards that make a search unclean
    /// are those for which this crate's tests showed a 2.4 s budget wrong: a stacking or
    /// swinging OS placement beside busy CPUs, a drop of the whole machine, a coarse
    /// objective's long probes.
    pub deadline: f64,
    /// Relative difference below which two candidates count as equally good.
    pub tolerance: f64,
    /// Chance of eliminating a candidate that was in fact the best, per look at the data.
    /// Only the leader eliminates, so the best goes wrongly in one comparison a look, the
    /// one with the leader: the level is that comparison's, not shared out over all of them.
    pub error: f64,
    /// When the budget ends, the leader is kept over the OS placement (or the first
    /// candidate) only when it is ahead at this one-sided error level.
    pub end_error: f64,
    /// Relative per-probe noise above which a close call gets longer probes (when moves
    /// stall the program, `stall_share`).
    pub target_cv: f64,
    /// Rounds every survivor gets before the search may stop as "indistinguishable", and
    /// before close calls get longer probes.
    pub min_rounds: usize,
    /// Smallest relative gap that can end a candidate after one probe.
    pub decisive_gap: f64,
    /// Survivors confidently within this relative distance of the leader count as
    /// indistinguishable (checked from `min_rounds` rounds on).
    pub indistinct: f64,
    /// Smallest relative per-probe noise assumed, whatever the probes show: a few quiet probes
    /// do not prove a machine quiet.
    pub noise_floor: f64,
    /// How much more variance one probe has than its ticks say, while a candidate has only
    /// one probe (slow drift is invisible inside one probe). 4 doubles the standard error.
    pub one_probe_allowance: f64,
    /// Challengers within this relative distance of the leader are close calls.
    pub close: f64,
    /// The work a move onto a pinning costs the program (its warm-up's measured deficit,
    /// `Race::moves_stall`), as a share of the base probe, from which close calls' noisy
    /// probes grow: a longer probe then spreads a move's cost over more work. Below it they
    /// keep the base length, since more probes tell Welch's test more than fewer long ones.
    pub stall_share: f64,
    /// Probes of the OS placement before it can win or lose by anything but the
    /// half-the-leader rule (its rate may swing from probe to probe).
    pub os_probes: usize,
    /// Sampling ticks of the OS placement before it can win or lose by anything but the
    /// half-the-leader rule: a probe cut after one tick says little about a rate that swings.
    pub os_ticks: usize,
    /// Highest ÷ lowest probe, or tick, of the OS placement at which its swing counts as
    /// seen: from `os_probes` probes on, it is then judged before `os_ticks` ticks (0: never).
    pub os_swing: f64,
    /// A probe ends early once every tick so far is below this share of the leader's
    /// lowest tick (it is far behind; more ticks would only cost).
    pub cut_below: f64,
    /// How far above the leader's mean rate a swinging challenger's ticks may rise, less
    /// what its slow looks take off (`Race::swing_reach`), and still count as never above
    /// it (`under_ceiling`; 0 turns the rule off).
    pub ceiling: f64,
    /// The band, as (lowest, highest) share of an incumbent's expected score, in which its
    /// first probe confirms it with no probe of another candidate
    /// ([`Strategy::expect_incumbent`]). Below, something slows it today (a neighbour on its
    /// CPUs, another build); well above, something changed that may favour another pinning
    /// too (a neighbour it kept away from has gone): either way the others are probed. The
    /// top allows for the move stalls its probes had and a pinning applied at birth has not
    /// (in the simulator a pinning whose probes each began with a stalled tick read 1.16×
    /// its probes' rate once applied at birth).
    ///
    /// [`Strategy::expect_incumbent`]: crate::strategy::Strategy::expect_incumbent
    pub confirm_band: (f64, f64),
}

impl Default for RaceParams {
    fn default() -> Self {
        RaceParams {
            warmup: 0.02,
            quiet_warmup: 0.01,
            probe: 0.2,
            far_probe: 0.1,
            min_probe: 0.1,
            max_probe: 4.0,
            budget: 20.0,
            deadline: 2.9,
            tolerance: 0.005,
            error: 0.1,
            end_error: 0.2,
            target_cv: 0.02,
            min_rounds: 2,
            decisive_gap: 0.15,
            indistinct: 0.03,
            noise_floor: 0.01,
            one_probe_allowance: 4.0,
            close: 0.05,
            stall_share: 0.025,
            os_probes: 3,
            os_ticks: 12,
            os_swing: 1.5,
            cut_below: 0.8,
            ceiling: 0.03,
            confirm_band: (0.9, 1.2),
        }
    }
}

/// The settings `RaceParams::with_settings` knows, as they are written.
pub const SETTING_NAMES: &str = "probe min_probe os_probes os_ticks os_swing allowance warmup quiet_warmup error end_error close stall_share decisive_gap target_cv indistinct tolerance min_rounds budget deadline cut ceiling";

/// A race setting that `RaceParams::with_settings` cannot take: the pair that is wrong and
/// what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error("{0:?} is not name=value (names: {SETTING_NAMES})")]
    NotAPair(String),
    #[error("{name}={value:?}: the value is not a number of 0 or more")]
    BadValue { name: String, value: String },
    #[error("unknown setting {0:?} (names: {SETTING_NAMES})")]
    UnknownName(String),
}

impl RaceParams {
    /// The defaults changed as `spec` says: `name=value` pairs apart by spaces, e.g.
    /// `"tolerance=0.02 indistinct=0.05"` (names: [`SETTING_NAMES`]). For exploring the
    /// search on the simulator; an error names the pair that is wrong and what is valid.
    pub fn with_settings(spec: &str) -> Result<RaceParams, SettingError> {
        let mut p = RaceParams::default();
        for kv in spec.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(SettingError::NotAPair(kv.to_string()));
            };
            let x = v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| SettingError::BadValue {
                    name: k.to_string(),
                    value: v.to_string(),
                })?;
            let count = x.round() as usize;
            match k {
                "probe" => p.probe = x,
                "min_probe" => p.min_probe = x,
                "os_probes" => p.os_probes = count,
                "os_ticks" => p.os_ticks = count,
                "os_swing" => p.os_swing = x,
                "allowance" => p.one_probe_allowance = x,
                "warmup" => p.warmup = x,
                "quiet_warmup" => p.quiet_warmup = x,
                "error" => p.error = x,
                "end_error" => p.end_error = x,
                "close" => p.close = x,
                "stall_share" => p.stall_share = x,
                "decisive_gap" => p.decisive_gap = x,
                "target_cv" => p.target_cv = x,
                "indistinct" => p.indistinct = x,
                "tolerance" => p.tolerance = x,
                "min_rounds" => p.min_rounds = count,
                "budget" => p.budget = x,
                "deadline" => p.deadline = x,
                "cut" => p.cut_below = x,
                "ceiling" => p.ceiling = x,
                _ => return Err(SettingError::UnknownName(k.to_string())),
            }
        }
        Ok(p)
    }

    /// The length of every first probe and of every probe that is not a close call.
    pub(super) fn base_probe(&self) -> f64 {
        self.probe.clamp(self.min_probe, self.max_probe)
    }

    /// The length of a probe of a pinning far behind the leader: `far_probe`, between
    /// `min_probe` and the base length.
    pub(super) fn far_probe(&self) -> f64 {
        self.far_probe.min(self.base_probe()).max(self.min_probe)
    }
}

/// Rule 3's line: a challenger whose every tick is below this share of every tick of the
/// leader goes after one probe (and an OS placement still waiting for its ticks has its
/// probe cut there, `seen_enough`). A fixed line of the rules, not a setting; it lives here
/// because elimination, swing and cut all read it (and would otherwise import in a circle).
pub(super) const HALF_THE_LEADER: f64 = 0.5;
