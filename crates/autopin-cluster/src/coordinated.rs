//! Coordinated probing: a [`Strategy`] wrapper that makes the local ranks of a step search
//! together. Between probes (when the session asks its strategy for the next step) every rank
//! publishes the score of the probe it just finished and waits for the others — a barrier, so
//! the next probe starts at the same moment on every rank. The scores of one candidate are
//! combined (`min`: the slowest rank sets the pace of a bulk-synchronous program; `sum`:
//! throughput of independent ranks) and fed to each rank's own copy of the strategy, with the
//! same search clock (the latest rank's). The strategies are deterministic, so every rank
//! then plans the same next probe and takes the same decision, without a leader.
//!
//! The hook is the run plan's [`Coordination`] ([`Coordinator`]): the engine wraps the
//! strategy of every search with it; session and driver are unchanged.

use autopin_engine::run::Coordination;
use autopin_engine::strategy::{ProbeOutcome, Step, Strategy};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// The slowest rank's score (bulk-synchronous programs run at its pace).
    Min,
    /// The ranks' scores added up (independent ranks: node throughput).
    Sum,
}

/// A `--combine` value that is neither `min` nor `sum`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--combine {text:?}: valid values are min and sum")]
pub struct UnknownCombine {
    pub text: String,
}

impl Combine {
    pub fn parse(s: &str) -> Result<Combine, UnknownCombine> {
        match s {
            "min" => Ok(Combine::Min),
            "sum" => Ok(Combine::Sum),
            _ => Err(UnknownCombine {
                text: s.to_string(),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Combine::Min => "min",
            Combine::Sum => "sum",
        }
    }

    pub fn apply(self, scores: &[f64]) -> Option<f64> {
        if scores.is_empty() {
            return None;
        }
        Some(match self {
            Combine::Min => scores.iter().copied().fold(f64::INFINITY, f64::min),
            Combine::Sum => scores.iter().sum(),
        })
    }
}

/// What a rank tells the others between probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub rank: usize,
    /// Search clock of the rank when it got here.
    pub elapsed: f64,
    /// The probe it just finished (None at the start of a search).
    pub candidate: Option<usize>,
    pub score: Option<f64>,
    /// The rank's search settings ([`Strategy::settings`]): ranks whose settings differ
    /// (e.g. one checks a remembered decision, another searches) would decide in different
    /// rounds, and one would wait for the other at a barrier it never comes to.
    #[serde(default)]
    pub settings: Option<String>,
    /// Which of the rank's searches this is (0: the first). A rank that finds the program
    /// changed (threads came, a phase began) a tick before its partner starts its next
    /// search while the partner still ends a probe of the last one: with the same settings
    /// they would exchange out of step, each one turn off the other.
    #[serde(default)]
    pub search: Option<usize>,
    /// The rank works beside CPUs busy with other work ([`Strategy::set_busy_neighbours`]).
    /// Each rank looks at its own share of the node, so under a partial load one rank sees
    /// a busy CPU where another sees none; the ranks take it as the node's (any rank's)
    /// rather than part of the settings that must match.
    #[serde(default)]
    pub busy: Option<bool>,
}

/// Why a round of the exchange between ranks failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The rendezvous itself (its directory, a rank that never came).
    #[error("{0}")]
    Rendezvous(#[from] std::io::Error),
    /// A turn that is not one this autopin writes (another version on another rank).
    #[error("a turn that cannot be read: {0}")]
    Turn(#[from] serde_json::Error),
    /// The other end went away (a link between threads).
    #[error("the other ranks went away")]
    Gone,
}

/// The exchange between ranks: publish my turn, get everyone's (mine included) — one
/// barrier. [`crate::rendezvous::Rendezvous`] is the real one; tests use threads.
pub trait Link: Send {
    fn rank(&self) -> usize;
    fn exchange(&mut self, mine: &Turn) -> Result<Vec<Turn>, ExchangeError>;
    /// Things worth a line in the report (ranks dropped, failures).
    fn take_notes(&mut self) -> Vec<String>;
}

impl Link for crate::rendezvous::Rendezvous {
    fn rank(&self) -> usize {
        crate::rendezvous::Rendezvous::rank(self)
    }

    fn exchange(&mut self, mine: &Turn) -> Result<Vec<Turn>, ExchangeError> {
        let body = serde_json::to_value(mine)?;
        let settled = crate::rendezvous::Rendezvous::exchange(self, body)?;
        settled
            .messages
            .into_iter()
            .map(|m| serde_json::from_value(m.body).map_err(ExchangeError::from))
            .collect()
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dropped)
            .into_iter()
            .map(|(r, why)| format!("local rank {r} dropped from the coordinated search: {why}"))
            .collect()
    }
}

/// A link shared by the strategies of successive searches (one per session).
pub type SharedLink = Arc<Mutex<Box<dyn Link>>>;

/// The engine's [`Coordination`] hook for one run: every search's strategy is wrapped in a
/// [`Coordinated`] on the same link, and their report lines are gathered in one place.
pub struct Coordinator {
    link: SharedLink,
    combine: Combine,
    notes: Arc<Mutex<Vec<String>>>,
    /// Set once the ranks were found in different searches (see [`Turn::search`]).
    parted: Arc<AtomicBool>,
}

impl Coordinator {
    pub fn new(link: Box<dyn Link>, combine: Combine) -> Coordinator {
        Coordinator {
            link: Arc::new(Mutex::new(link)),
            combine,
            notes: Arc::new(Mutex::new(Vec::new())),
            parted: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("combine", &self.combine)
            .finish_non_exhaustive()
    }
}

impl Coordination for Coordinator {
    fn wrap(&self, strategy: Box<dyn Strategy>, search: usize) -> Box<dyn Strategy> {
        Box::new(Coordinated::new(
            strategy,
            search,
            self.link.clone(),
            self.combine,
            self.notes.clone(),
            self.parted.clone(),
        ))
    }

    fn take_notes(&self) -> Vec<String> {
        self.notes
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default()
    }
}

pub struct Coordinated {
    inner: Box<dyn Strategy>,
    /// Which of the session's searches this is (0: the first).
    search: usize,
    link: SharedLink,
    combine: Combine,
    pending: Option<ProbeOutcome>,
    /// How long the probe planned last was to measure: the same on every rank, where the
    /// length each rank measured differs with its sampling ticks.
    planned: Option<f64>,
    /// Lines for the report: drops, disagreements, link failures.
    pub notes: Arc<Mutex<Vec<String>>>,
    alone: bool,
    /// This rank's own view ([`Strategy::set_busy_neighbours`]) and the one the search
    /// goes by: true once any rank said it works beside busy CPUs.
    busy_here: bool,
    busy_agreed: bool,
    /// Shared by the run's searches: once the ranks were found in different searches, every
    /// later search of this rank is its own too. Its partner's next search begins at another
    /// moment, and an exchange would wait for it until the link timed out.
    parted: Arc<AtomicBool>,
}

impl Coordinated {
    pub fn new(
        inner: Box<dyn Strategy>,
        search: usize,
        link: SharedLink,
        combine: Combine,
        notes: Arc<Mutex<Vec<String>>>,
        parted: Arc<AtomicBool>,
    ) -> Coordinated {
        Coordinated {
            inner,
            search,
            link,
            combine,
            pending: None,
            planned: None,
            notes,
            alone: parted.load(Ordering::Relaxed),
            busy_here: false,
            busy_agreed: false,
            parted,
        }
    }

    /// The inner strategy's settings apart from the busy-neighbours view, which the ranks
    /// agree on at the exchange instead of requiring it to match (see [`Turn::busy`]).
    fn settings_to_match(&mut self) -> String {
        self.inner.set_busy_neighbours(false);
        let s = self.inner.settings();
        self.inner.set_busy_neighbours(self.busy_agreed);
        s
    }

    fn note(&self, s: String) {
        if let Ok(mut n) = self.notes.lock() {
            n.push(s);
        }
    }
}

impl Strategy for Coordinated {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn record(&mut self, outcome: ProbeOutcome) {
        // Held until the next barrier, where it is combined with the other ranks' scores.
        self.pending = Some(outcome);
    }

    fn settings(&self) -> String {
        self.inner.settings()
    }

    // What every rank knows alike, or what its settings carry (ranks whose settings differ
    // decide alone): the search takes it as a search on one node does.
    fn set_os_placement(&mut self, candidate: usize) {
        self.inner.set_os_placement(candidate);
    }

    fn set_busy_neighbours(&mut self, busy: bool) {
        self.busy_here = busy;
        self.busy_agreed = busy;
        self.inner.set_busy_neighbours(busy);
    }

    fn set_shares_cpus(&mut self, candidate: usize) {
        self.inner.set_shares_cpus(candidate);
    }

    fn next(&mut self, elapsed: f64) -> Step {
        let pending = self.pending.take();
        if self.alone {
            if let Some(p) = pending {
                self.inner.record(p);
            }
            return self.inner.next(elapsed);
        }
        let settings = self.settings_to_match();
        let (rank, result, notes) = {
            let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
            let rank = link.rank();
            let mine = Turn {
                rank,
                elapsed,
                candidate: pending.as_ref().map(|p| p.candidate),
                score: pending.as_ref().map(|p| p.score),
                settings: Some(settings),
                search: Some(self.search),
                busy: Some(self.busy_here),
            };
            let r = link.exchange(&mine);
            (rank, r, link.take_notes())
        };
        for n in notes {
            self.note(n);
        }
        let mut turns = match result {
            Ok(t) => t,
            Err(e) => {
                self.note(format!(
                    "coordination failed ({e}); rank {rank} goes on searching alone"
                ));
                self.alone = true;
                vec![]
            }
        };
        // Every rank sees the same turns, so every rank finds the difference in the same
        // round and each goes on alone from there, on its own scores.
        if let Some(other) = turns
            .iter()
            .find(|t| t.search.is_some() && t.search != turns[0].search)
        {
            let nth = |t: &Turn| t.search.map_or(0, |s| s + 1);
            self.note(format!(
                "local ranks {} and {} were in different searches at an exchange (search {} and search {}: one found the program changed before the other): each rank decides alone",
                turns[0].rank,
                other.rank,
                nth(&turns[0]),
                nth(other)
            ));
            self.parted.store(true, Ordering::Relaxed);
            self.alone = true;
            turns.clear();
        } else if let Some(other) = turns
            .iter()
            .find(|t| t.settings.is_some() && t.settings != turns[0].settings)
        {
            self.note(format!(
                "local ranks {} and {} search with different settings (one checks a remembered decision while another searches, their candidates differ in number, or their options differ): each rank decides alone",
                turns[0].rank, other.rank
            ));
            self.alone = true;
            turns.clear();
        }
        // Beside busy CPUs on any rank, the search of every rank goes by the rules for them:
        // the ranks' scores are combined, and the candidate kept on a tie is kept on all.
        if !self.busy_agreed {
            if let Some(other) = turns.iter().find(|t| t.busy == Some(true)) {
                self.note(format!(
                    "local rank {} works beside CPUs busy with other work where rank {rank}'s share has none: the coordinated search judges the OS placement as beside busy CPUs on every rank",
                    other.rank
                ));
                self.busy_agreed = true;
                self.inner.set_busy_neighbours(true);
            }
        }
        if let Some(p) = pending {
            let mine = p.candidate;
            let mut scores: Vec<f64> = Vec::new();
            for t in &turns {
                match (t.candidate, t.score) {
                    (Some(c), Some(s)) if c == mine => scores.push(s),
                    (c, _) => self.note(format!(
                        "local rank {} probed {c:?} while rank {rank} probed {mine}; its score is left out",
                        t.rank
                    )),
                }
            }
            if scores.is_empty() {
                scores.push(p.score);
            }
            let score = self.combine.apply(&scores).unwrap_or(p.score);
            // The spread inside this rank's probe says nothing about the combined score, and
            // the ranks must feed their strategies the same outcome to decide alike: no
            // one-probe elimination on per-rank noise, and the planned length rather than
            // the one this rank measured (the race weighs a probe by its length; fed each
            // rank's own, two ranks weighed the same scores differently, parted, and one
            // waited at a barrier the other never came to).
            self.inner.record(ProbeOutcome {
                score,
                duration: self.planned.unwrap_or(p.duration),
                interval_range: None,
                intervals: 0,
                ..p
            });
        }
        let clock = turns.iter().map(|t| t.elapsed).fold(elapsed, f64::max);
        let step = self.inner.next(clock);
        if let Step::Probe { measure, .. } = step {
            self.planned = Some(measure);
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autopin_engine::strategy::{Race, RaceParams};
    use std::sync::mpsc;

    /// Threads linked through channels: a barrier that hands every turn to every rank.
    struct ThreadLink {
        rank: usize,
        to_hub: mpsc::Sender<Turn>,
        from_hub: mpsc::Receiver<Vec<Turn>>,
    }

    impl Link for ThreadLink {
        fn rank(&self) -> usize {
            self.rank
        }
        fn exchange(&mut self, mine: &Turn) -> Result<Vec<Turn>, ExchangeError> {
            self.to_hub
                .send(mine.clone())
                .map_err(|_| ExchangeError::Gone)?;
            self.from_hub.recv().map_err(|_| ExchangeError::Gone)
        }
        fn take_notes(&mut self) -> Vec<String> {
            vec![]
        }
    }

    fn hub(n: usize) -> Vec<ThreadLink> {
        let (tx, rx) = mpsc::channel::<Turn>();
        let mut outs = Vec::new();
        let mut links = Vec::new();
        for rank in 0..n {
            let (otx, orx) = mpsc::channel();
            outs.push(otx);
            links.push(ThreadLink {
                rank,
                to_hub: tx.clone(),
                from_hub: orx,
            });
        }
        std::thread::spawn(move || loop {
            let mut turns = Vec::new();
            for _ in 0..n {
                match rx.recv() {
                    Ok(t) => turns.push(t),
                    Err(_) => return,
                }
            }
            turns.sort_by_key(|t: &Turn| t.rank);
            for o in &outs {
                if o.send(turns.clone()).is_err() {
                    return;
                }
            }
        });
        links
    }

    /// Rank r's rate for candidate c: rank 0 likes candidate 0, rank 1 suffers on it; the
    /// candidate best for the slowest rank is 1.
    fn rate(rank: usize, cand: usize, probe: usize) -> f64 {
        let table = [[10.0, 6.0, 3.0], [2.0, 5.0, 3.0]];
        table[rank][cand] * (1.0 + 0.001 * (probe % 3) as f64)
    }

    fn search(link: ThreadLink, combine: Combine, skew: f64) -> (Vec<usize>, usize) {
        let (probed, decided, _) = search_for(link, combine, skew, 5.0);
        (probed, decided)
    }

    /// One rank's search with a race of `budget` seconds: what it probed, what it decided
    /// and the report's notes.
    fn search_for(
        link: ThreadLink,
        combine: Combine,
        skew: f64,
        budget: f64,
    ) -> (Vec<usize>, usize, Vec<String>) {
        let params = RaceParams {
            budget,
            probe: 0.2,
            warmup: 0.0,
            ..RaceParams::default()
        };
        drive_rank(
            link,
            combine,
            Race::new(params, 3),
            skew,
            |rank, candidate, k, measure| (rate(rank, candidate, k), measure),
        )
    }

    /// One rank's `race`: `outcome(rank, candidate, k, measure)` is the k-th probe's score
    /// and the length it was measured over. Each rank's clock runs `skew` fast;
    /// coordination must hide that.
    fn drive_rank(
        link: ThreadLink,
        combine: Combine,
        race: Race,
        skew: f64,
        outcome: impl Fn(usize, usize, usize, f64) -> (f64, f64),
    ) -> (Vec<usize>, usize, Vec<String>) {
        drive_coordinated(link, 0, combine, race, skew, |_| {}, outcome)
    }

    /// `drive_rank` for the session's search number `search`, with `setup` called on the
    /// coordinated strategy before the search, as a session calls it.
    fn drive_coordinated(
        link: ThreadLink,
        search: usize,
        combine: Combine,
        race: Race,
        skew: f64,
        setup: impl FnOnce(&mut dyn Strategy),
        outcome: impl Fn(usize, usize, usize, f64) -> (f64, f64),
    ) -> (Vec<usize>, usize, Vec<String>) {
        let rank = link.rank;
        let coordinator = Coordinator::new(Box::new(link), combine);
        let mut s = coordinator.wrap(Box::new(race), search);
        setup(s.as_mut());
        let (probed, decided) = drive(s.as_mut(), rank, skew, outcome);
        (probed, decided, coordinator.take_notes())
    }

    /// A search as a session drives it: what it probed and what it decided.
    fn drive(
        s: &mut dyn Strategy,
        rank: usize,
        skew: f64,
        outcome: impl Fn(usize, usize, usize, f64) -> (f64, f64),
    ) -> (Vec<usize>, usize) {
        let mut elapsed = 0.0;
        let mut probed = Vec::new();
        for k in 0..1000 {
            match s.next(elapsed) {
                Step::Probe {
                    candidate, measure, ..
                } => {
                    probed.push(candidate);
                    elapsed += measure * (1.0 + skew);
                    let (score, duration) = outcome(rank, candidate, k, measure);
                    s.record(ProbeOutcome {
                        candidate,
                        score,
                        duration,
                        interval_cv: Some(0.001),
                        interval_range: None,
                        intervals: 10,
                        ended_collapsed: false,
                    });
                }
                Step::Decide(d) => return (probed, d.candidate),
            }
        }
        panic!("no decision");
    }

    /// Ranks whose searches would end in different rounds (one checks a remembered
    /// decision on a short budget, the other searches on a long one) find it at their first
    /// barrier and each decides alone: neither waits for a barrier the other never reaches.
    #[test]
    fn ranks_with_different_settings_each_decide_alone() {
        let (tx, rx) = mpsc::channel();
        for (link, budget) in hub(2).into_iter().zip([0.4, 5.0]) {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(search_for(link, Combine::Min, 0.0, budget));
            });
        }
        for _ in 0..2 {
            let (probed, _, notes) = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("a rank waits for a barrier the other never reaches");
            assert!(!probed.is_empty());
            assert!(
                notes.iter().any(|n| n.contains("different settings")),
                "{notes:?}"
            );
        }
    }

    /// A rank that saw its program change a tick before its partner begins its second
    /// search while the partner ends a probe of its first, on the same settings (the same
    /// budget, candidate count and OS placement). Exchanged as one search, the two went on
    /// one turn apart: each took the other's probe of another candidate for its own, and
    /// their probe orders parted. They find it at the first exchange and each decides alone.
    #[test]
    fn ranks_in_different_searches_each_decide_alone() {
        let (tx, rx) = mpsc::channel();
        for link in hub(2) {
            let tx = tx.clone();
            let search = link.rank;
            std::thread::spawn(move || {
                let params = RaceParams {
                    budget: 5.0,
                    probe: 0.2,
                    warmup: 0.0,
                    ..RaceParams::default()
                };
                let _ = tx.send(drive_coordinated(
                    link,
                    search,
                    Combine::Min,
                    Race::new(params, 3),
                    0.0,
                    |_| {},
                    |rank, c, k, measure| (rate(rank, c, k), measure),
                ));
            });
        }
        for _ in 0..2 {
            let (_, _, notes) = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .expect("a rank waits for a barrier the other never reaches");
            assert!(
                notes.iter().any(
                    |n| n.contains("different searches") && n.contains("search 1 and search 2")
                ),
                "{notes:?}"
            );
        }
    }

    /// Once found in different searches, a rank's later searches are its own from their
    /// start: its partner's next search begins at another moment (here never), and an
    /// exchange would wait for it until the link timed out.
    #[test]
    fn ranks_once_parted_search_alone_from_then_on() {
        let params = RaceParams {
            budget: 5.0,
            probe: 0.2,
            warmup: 0.0,
            ..RaceParams::default()
        };
        let (tx, rx) = mpsc::channel();
        for link in hub(2) {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let rank = link.rank;
                let coordinator = Coordinator::new(Box::new(link), Combine::Min);
                let outcome = |rank, c, k, measure| (rate(rank, c, k), measure);
                let mut first = coordinator.wrap(Box::new(Race::new(params, 3)), rank);
                drive(first.as_mut(), rank, 0.0, outcome);
                // Rank 1's program ends; rank 0's grows threads and searches again.
                if rank == 0 {
                    let mut second = coordinator.wrap(Box::new(Race::new(params, 3)), 1);
                    let (probed, _) = drive(second.as_mut(), rank, 0.0, outcome);
                    let _ = tx.send((probed, coordinator.take_notes()));
                }
            });
        }
        let (probed, notes) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the second search waits for a partner that never comes");
        assert!(!probed.is_empty());
        assert_eq!(
            notes
                .iter()
                .filter(|n| n.contains("different searches"))
                .count(),
            1,
            "{notes:?}"
        );
    }

    #[test]
    fn ranks_probe_in_lockstep_and_agree_on_the_slowest_ranks_best() {
        let links = hub(2);
        let hs: Vec<_> = links
            .into_iter()
            .enumerate()
            .map(|(i, l)| std::thread::spawn(move || search(l, Combine::Min, 0.01 * i as f64)))
            .collect();
        let r: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(r[0].0, r[1].0, "same probes in the same order");
        assert_eq!(r[0].1, 1);
        assert_eq!(r[1].1, 1);
    }

    #[test]
    fn ranks_whose_probes_last_differently_still_decide_alike() {
        // Two close candidates and the same scores on both ranks, but each rank's probes
        // last a different time (its sampling ticks fall differently). The race weighs a
        // probe by its length: fed each rank's own lengths, the two races weighed the same
        // combined scores differently, and the ranks went apart.
        let run = |link: ThreadLink| {
            let params = RaceParams {
                budget: 6.0,
                warmup: 0.0,
                ..RaceParams::default()
            };
            let (probed, decided, _) = drive_rank(
                link,
                Combine::Min,
                Race::new(params, 2),
                0.0,
                |rank, c, k, measure| {
                    let noise = [0.06, -0.06, -0.06, 0.06, 0.04, -0.04, -0.04, 0.04][k % 8];
                    let stretch = if rank == 0 {
                        1.0
                    } else {
                        [0.25, 4.0, 1.0][k % 3]
                    };
                    ([100.0, 99.0][c] * (1.0 + noise), measure * stretch)
                },
            );
            (probed, decided)
        };
        let (tx, rx) = mpsc::channel();
        for link in hub(2) {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(run(link));
            });
        }
        let mut r: Vec<_> = (0..2)
            .map(|_| {
                rx.recv_timeout(std::time::Duration::from_secs(20))
                    .expect("a rank waits for a barrier the other never reaches")
            })
            .collect();
        r.dedup();
        assert_eq!(
            r.len(),
            1,
            "the same probes and decision on both ranks: {r:?}"
        );
    }

    /// Each rank's coordinated race of two tied candidates, the second the OS placement,
    /// with CPUs busy with other work beside `busy[rank]`: what each decided and its notes.
    fn tie_on_ranks(busy: [bool; 2]) -> Vec<(usize, Vec<String>)> {
        let (tx, rx) = mpsc::channel();
        for link in hub(2) {
            let tx = tx.clone();
            let busy = busy[link.rank];
            std::thread::spawn(move || {
                let params = RaceParams {
                    budget: 6.0,
                    warmup: 0.0,
                    ..RaceParams::default()
                };
                let setup = |s: &mut dyn Strategy| {
                    s.set_os_placement(1);
                    s.set_busy_neighbours(busy);
                };
                let (_, decided, notes) = drive_coordinated(
                    link,
                    0,
                    Combine::Min,
                    Race::new(params, 2),
                    0.0,
                    setup,
                    |_, c, k, measure| {
                        let j = [0.003, -0.003, 0.002, -0.002][(k + c) % 4];
                        ([100.0, 100.1][c] * (1.0 + j), measure)
                    },
                );
                let _ = tx.send((decided, notes));
            });
        }
        (0..2)
            .map(|_| {
                rx.recv_timeout(std::time::Duration::from_secs(20))
                    .expect("a rank waits for a barrier the other never reaches")
            })
            .collect()
    }

    #[test]
    fn ranks_know_the_os_placement_and_the_busy_cpus_as_one_node_does() {
        // Tied: the OS placement stays, as on one node (unforwarded, the race kept its
        // first candidate, a pinning).
        for (decided, notes) in tie_on_ranks([false, false]) {
            assert_eq!(decided, 1, "{notes:?}");
        }
        // Beside busy CPUs on every rank, a tie keeps the pinning.
        for (decided, notes) in tie_on_ranks([true, true]) {
            assert_eq!(decided, 0, "{notes:?}");
        }
        // Busy CPUs in one rank's share only (a partial load of the node): the ranks search
        // together, both by the rules beside busy CPUs, and keep the pinning alike.
        let ranks = tie_on_ranks([true, false]);
        for (decided, notes) in &ranks {
            assert_eq!(*decided, 0, "{notes:?}");
            assert!(
                !notes.iter().any(|n| n.contains("different settings")),
                "{notes:?}"
            );
        }
        assert_eq!(
            ranks
                .iter()
                .filter(|(_, notes)| notes.iter().any(|n| n.contains(
                    "local rank 0 works beside CPUs busy with other work where rank 1's share has none"
                )))
                .count(),
            1,
            "the idle rank says whose busy CPUs it goes by: {ranks:?}"
        );
    }

    #[test]
    fn sum_picks_the_best_total() {
        let links = hub(2);
        let hs: Vec<_> = links
            .into_iter()
            .map(|l| std::thread::spawn(move || search(l, Combine::Sum, 0.0)))
            .collect();
        for h in hs {
            // 10+2 = 12 beats 6+5 = 11 and 3+3.
            assert_eq!(h.join().unwrap().1, 0);
        }
    }

    #[test]
    fn combine_parses_and_says_what_is_valid() {
        assert_eq!(Combine::parse("min"), Ok(Combine::Min));
        assert!(Combine::parse("max")
            .unwrap_err()
            .to_string()
            .contains("min and sum"));
        assert_eq!(Combine::Min.apply(&[3.0, 1.0]), Some(1.0));
        assert_eq!(Combine::Sum.apply(&[3.0, 1.0]), Some(4.0));
        assert_eq!(Combine::Sum.apply(&[]), None);
    }
}
