//! The program's threads outgrowing the candidate list. A list is made for the threads the
//! program runs when its search begins; a program that spawns its workers later (a serial
//! start-up reading input, then OpenMP) gets the newcomers placed by the list's wrap-around,
//! on the CPUs of the threads it was made for. A list made for one thread then stacks every
//! newcomer on that thread's CPU: a 2-thread OpenMP loop with spinning barriers, searched
//! during its 2.5 s serial start-up, ran 22× slower than pinned one thread a CPU, and the
//! search had nothing to say about it (each thread's CPU time per second read as before).

/// Seconds the program must run more threads than the list was made for before a new search
/// begins: threads that come and go at once (a helper thread for one task) are not the
/// program's shape, and workers created one after another join one search, not one each.
pub(super) const GROWTH_HOLD: f64 = 0.3;

/// Searches begun because the threads grew, at most, in one run: a program that adds a
/// thread now and then for ever would otherwise search for ever.
pub(super) const MAX_GROWTH_SEARCHES: usize = 8;

/// How many threads the candidates were made for, and since when the program has run more.
#[derive(Debug, Default)]
pub(super) struct ThreadGrowth {
    made_for: usize,
    above_since: Option<f64>,
    searches: usize,
}

impl ThreadGrowth {
    /// A candidate list was made for `threads` threads.
    pub(super) fn made_for(&mut self, threads: usize) {
        self.made_for = threads.max(1);
        self.above_since = None;
    }

    /// The program runs `tracked` threads at `now`: Some(threads the list was made for)
    /// once it has run more than those for `GROWTH_HOLD` seconds, and a search for them is
    /// still allowed (the caller begins it, which makes a new list).
    pub(super) fn outgrown(&mut self, now: f64, tracked: usize) -> Option<usize> {
        if self.made_for == 0 || tracked <= self.made_for {
            self.above_since = None;
            return None;
        }
        let since = *self.above_since.get_or_insert(now);
        if now - since < GROWTH_HOLD - 1e-9 || self.searches >= MAX_GROWTH_SEARCHES {
            return None;
        }
        self.searches += 1;
        self.above_since = None;
        Some(self.made_for)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_counts_once_it_has_held_and_only_above_the_list() {
        let mut g = ThreadGrowth::default();
        // No list yet: nothing to outgrow.
        assert_eq!(g.outgrown(0.0, 4), None);
        g.made_for(1);
        assert_eq!(g.outgrown(1.0, 1), None);
        assert_eq!(g.outgrown(1.1, 2), None, "just born");
        assert_eq!(g.outgrown(1.2, 1), None, "gone again");
        assert_eq!(g.outgrown(1.3, 2), None);
        assert_eq!(g.outgrown(1.5, 2), None);
        assert_eq!(g.outgrown(1.6, 2), Some(1), "held 0.3 s");
        g.made_for(2);
        assert_eq!(g.outgrown(1.7, 2), None);
        // Fewer threads than the list was made for is no growth.
        assert_eq!(g.outgrown(5.0, 1), None);
    }

    #[test]
    fn growth_searches_are_bounded() {
        let mut g = ThreadGrowth::default();
        let mut t = 0.0;
        let mut searches = 0;
        for n in 1..40 {
            g.made_for(n);
            g.outgrown(t, n + 1);
            t += 1.0;
            if g.outgrown(t, n + 1).is_some() {
                searches += 1;
            }
        }
        assert_eq!(searches, MAX_GROWTH_SEARCHES);
    }
}
