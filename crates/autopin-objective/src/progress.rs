//! What a program reports of its own progress through the heartbeat channel (which
//! `autopin-perf` maps and reads): heartbeats and the phase it is in, the OpenMP work the
//! preload library counted, and what the library saw of the program's team size. Plain
//! values, so the engine and the simulator use them without the channel.

/// Which OpenMP runtime the preload library saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum OmpRuntime {
    /// GNU libgomp: its GOMP_* entry points, interposed.
    Gnu,
    /// LLVM/Intel libomp (libiomp5): its `__kmpc_*` entry points.
    Llvm,
    Unknown(u32),
}

impl OmpRuntime {
    /// The runtime from its code in the channel file (1 libgomp, 2 libomp).
    pub fn from_code(c: u32) -> OmpRuntime {
        match c {
            1 => OmpRuntime::Gnu,
            2 => OmpRuntime::Llvm,
            x => OmpRuntime::Unknown(x),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            OmpRuntime::Gnu => "GNU libgomp (GOMP_* entry points)".into(),
            OmpRuntime::Llvm => "LLVM/Intel libomp (__kmpc_* entry points)".into(),
            OmpRuntime::Unknown(c) => format!("runtime code {c}"),
        }
    }
}

/// Completed OpenMP work counted by the preload library, summed over threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OmpCounts {
    /// Parallel regions completed.
    pub regions: u64,
    /// Work-sharing loop chunks, sections and single blocks completed.
    pub chunks: u64,
    /// Barriers passed (explicit and implicit), taskwait and taskgroup ends.
    pub barriers: u64,
    /// Explicit tasks (created with libgomp, completed with libomp).
    pub tasks: u64,
    /// Critical and ordered blocks left, loops ended without a barrier.
    pub other: u64,
    /// Barriers and construct ends passed by the thread that starts the program's regions:
    /// once per team, whatever its size.
    pub team: u64,
}

impl OmpCounts {
    /// The progress objective's unit: every completed construct counts one.
    pub fn total(&self) -> u64 {
        self.regions
            .saturating_add(self.chunks)
            .saturating_add(self.barriers)
            .saturating_add(self.tasks)
            .saturating_add(self.other)
    }

    /// The team-size-free unit, for comparing teams of different sizes: regions, the
    /// barriers and construct ends a team passes (counted once per team), and tasks
    /// created. A barrier of two threads is one, as is a barrier of sixteen.
    pub fn team_total(&self) -> u64 {
        self.regions
            .saturating_add(self.team)
            .saturating_add(self.tasks)
    }
}

/// What the preload library saw of the program's use of its team size (the file's
/// `team_flags`): why a smaller team is, or is not, applied mid-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TeamFlags(pub u32);

impl TeamFlags {
    /// The program asked its count or its CPUs outside a region (omp_get_max_threads,
    /// omp_get_num_procs, omp_get_thread_limit): it may have sized its work by the answer.
    pub const ASKED: u32 = 1;
    /// The program set its count itself (omp_set_num_threads).
    pub const SET: u32 = 2;
    /// dyn-var was true at a region: the runtime may size every team itself.
    pub const DYNAMIC: u32 = 4;
    /// A region with a num_threads clause ran (it keeps its count).
    pub const CLAUSE: u32 = 8;
    /// libomp's threadprivate data was used.
    pub const THREADPRIVATE: u32 = 16;
    /// A want was not applied.
    pub const REFUSED: u32 = 32;
    /// The program asked its team's size inside a region (omp_get_num_threads) and later
    /// began a region that did not ask: it may split its work by the size it kept.
    pub const KEPT: u32 = 64;

    pub fn has(&self, f: u32) -> bool {
        self.0 & f != 0
    }

    /// Whether the library may change the team mid-run (its rule, in the preload library).
    pub fn mid_run_allowed(&self) -> bool {
        self.has(Self::DYNAMIC)
            || !self.has(Self::ASKED | Self::SET | Self::THREADPRIVATE | Self::KEPT)
    }

    /// Why a team is not changed mid-run, in words (None when it may be).
    pub fn why_not(&self) -> Option<String> {
        if self.mid_run_allowed() {
            return None;
        }
        let mut why = Vec::new();
        if self.has(Self::ASKED) {
            why.push("the program asked for its thread count or CPUs outside a parallel region (it may size its work by the answer)");
        }
        if self.has(Self::SET) {
            why.push("the program sets its own thread count (omp_set_num_threads)");
        }
        if self.has(Self::THREADPRIVATE) {
            why.push("the program keeps threadprivate data, which persists only while the team keeps its size");
        }
        if self.has(Self::KEPT) {
            why.push("the program asked its team's size in one parallel region (omp_get_num_threads) and began later regions without asking again (it may split their work by the size it kept)");
        }
        Some(why.join("; "))
    }
}

/// The team-size part of the OpenMP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TeamState {
    /// The want the engine wrote (0: the program's own count).
    pub want: u32,
    /// The want the library applied (equal to `want` once in force).
    pub applied: u32,
    pub flags: TeamFlags,
    /// The program's own team size (0 before its first region).
    pub own: u32,
    /// Outermost parallel regions begun so far: a team change applies at the next one.
    pub starts: u32,
    /// The largest team size the program named itself (omp_set_num_threads, num_threads
    /// clauses; 0: none).
    pub named: u32,
}

/// The OpenMP part of the file, once the program made an OpenMP call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OmpProgress {
    pub runtime: OmpRuntime,
    /// Threads that took a slot.
    pub threads: u32,
    pub counts: OmpCounts,
    pub team: TeamState,
}

/// What the program reported so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatState {
    pub beats: u64,
    /// `None` when no phase was set or it could not be read consistently.
    pub phase: Option<String>,
    /// Even sequence number of the phase read; it grows by 2 with every phase change, so a
    /// larger value than last time means the program entered a new phase (even a same-named one).
    pub phase_seq: u64,
    /// OpenMP work the preload library counted (None: no OpenMP call seen, or a file too
    /// small for the OpenMP part).
    pub omp: Option<OmpProgress>,
}

#[cfg(test)]
mod tests {
    use super::TeamFlags;

    /// The preload library's rule, as the engine reads it: any one way a program may depend
    /// on its team size keeps the team mid-run, and says why; dyn-var true lifts them all.
    #[test]
    fn each_way_a_program_may_depend_on_its_team_size_keeps_it_mid_run() {
        assert!(TeamFlags(0).mid_run_allowed());
        assert_eq!(TeamFlags(0).why_not(), None);
        // (a clause keeps its own region's count; a refusal is what follows from the rest)
        assert!(TeamFlags(TeamFlags::CLAUSE | TeamFlags::REFUSED).mid_run_allowed());
        for (flag, words) in [
            (TeamFlags::ASKED, "outside a parallel region"),
            (TeamFlags::SET, "omp_set_num_threads"),
            (TeamFlags::THREADPRIVATE, "threadprivate"),
            (TeamFlags::KEPT, "without asking again"),
        ] {
            let f = TeamFlags(flag);
            assert!(!f.mid_run_allowed(), "{flag}");
            let why = f.why_not().unwrap_or_default();
            assert!(why.contains(words), "{flag}: {why}");
            assert!(
                TeamFlags(flag | TeamFlags::DYNAMIC).mid_run_allowed(),
                "{flag}"
            );
        }
        let both = TeamFlags(TeamFlags::ASKED | TeamFlags::KEPT)
            .why_not()
            .unwrap();
        assert!(both.contains("; "), "{both}");
    }
}
