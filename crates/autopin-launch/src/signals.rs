//! Forwarding termination and user signals from autopin to the program it launched.
//!
//! The child stays in our process group, so a key press on the terminal (Ctrl-C, Ctrl-\)
//! or a terminal hangup already reaches it directly. Those arrive with si_code SI_KERNEL;
//! we do not forward them, so the program sees each such signal once. Signals someone sent
//! to autopin with kill(2) (SI_USER, SI_QUEUE, SI_TKILL) are forwarded. One duplicate can
//! remain: `kill -TERM -<pgid>` aimed at the whole group reaches the child directly and
//! through us; programs treat a repeated TERM/INT like the first one, which we accept.

use std::io;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

/// The signals autopin passes on to its child.
pub const FORWARDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

const SLOTS: usize = 8;
const WAITING: i32 = -1;
// Children to forward to: 0 free, -1 reserved before spawn, >0 a pid.
static CHILDREN: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
// Bit per signal number that arrived while a reserved slot had no pid yet.
static PENDING: AtomicU64 = AtomicU64::new(0);
// The last forwarded signal that reached autopin (0: none), however it was sent.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

struct Installed {
    users: usize,
    old: Vec<(libc::c_int, libc::sigaction)>,
}
static INSTALLED: Mutex<Installed> = Mutex::new(Installed {
    users: 0,
    old: Vec::new(),
});

/// Sends `sig` (one of [`FORWARDED`]) to `pid`; a failure (the child just ended) is
/// ignored. rustix makes the system call itself, so this is async-signal-safe.
fn forward(pid: i32, sig: libc::c_int) {
    let pid = rustix::process::Pid::from_raw(pid);
    let sig = rustix::process::Signal::from_named_raw(sig);
    if let (Some(pid), Some(sig)) = (pid, sig) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // Only async-signal-safe work here: atomics and kill(2).
    RECEIVED.store(sig, Ordering::Release);
    // SAFETY: the kernel passes a valid siginfo_t with SA_SIGINFO.
    let code = if info.is_null() {
        0
    } else {
        unsafe { (*info).si_code }
    };
    let mut any_child = false;
    let mut waiting = false;
    for slot in &CHILDREN {
        let pid = slot.load(Ordering::Acquire);
        if pid > 0 {
            any_child = true;
            if code != libc::SI_KERNEL {
                forward(pid, sig);
            }
        } else if pid == WAITING {
            waiting = true;
        }
    }
    if !any_child && waiting && (0..64).contains(&sig) {
        PENDING.fetch_or(1u64 << sig, Ordering::AcqRel);
    }
}

/// The last of the [`FORWARDED`] signals that reached autopin while a [`Forwarding`] was
/// alive: a caller running several programs in a row (compare) stops starting new ones.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::Acquire) {
        0 => None,
        s => Some(s),
    }
}

/// While alive, the forwarded signals go to the registered child instead of killing us.
#[derive(Debug)]
pub struct Forwarding {
    slot: usize,
}

impl Forwarding {
    /// Installs the handlers (once per process, shared) and reserves a slot. Call before
    /// spawning, so a signal in between is kept and delivered by [`Forwarding::set_child`].
    pub fn begin() -> io::Result<Forwarding> {
        let slot = CHILDREN
            .iter()
            .position(|s| {
                s.compare_exchange(0, WAITING, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            })
            .ok_or_else(|| io::Error::other("more than 8 launched programs at once"))?;
        let mut inst = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        if inst.users == 0 {
            for sig in FORWARDED {
                // SAFETY: sigaction structs are plain data; zeroed is a valid start, and the
                // handler has the SA_SIGINFO signature.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    let handler: extern "C" fn(
                        libc::c_int,
                        *mut libc::siginfo_t,
                        *mut libc::c_void,
                    ) = on_signal;
                    sa.sa_sigaction = handler as usize;
                    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                    libc::sigemptyset(&mut sa.sa_mask);
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, &sa, &mut old) != 0 {
                        let e = io::Error::last_os_error();
                        CHILDREN[slot].store(0, Ordering::Release);
                        return Err(e);
                    }
                    inst.old.push((sig, old));
                }
            }
        }
        inst.users += 1;
        Ok(Forwarding { slot })
    }

    /// Starts forwarding to `pid` and hands it any signal that came while it was starting.
    pub fn set_child(&self, pid: i32) {
        CHILDREN[self.slot].store(pid, Ordering::Release);
        let pending = PENDING.swap(0, Ordering::AcqRel);
        for sig in 1..64 {
            if pending >> sig & 1 == 1 {
                forward(pid, sig);
            }
        }
    }

    /// Stops forwarding to the child (call right after reaping it: its pid may be reused).
    pub fn clear_child(&self) {
        CHILDREN[self.slot].store(WAITING, Ordering::Release);
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        CHILDREN[self.slot].store(0, Ordering::Release);
        let mut inst = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        inst.users -= 1;
        if inst.users == 0 {
            for (sig, old) in inst.old.drain(..) {
                // SAFETY: restoring the action we saved from the kernel.
                unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
            }
        }
    }
}

/// Lets SIGPIPE end the process quietly, as it ends `ls` or `cat`: for the commands that
/// only print, so that `autopin topology | head` stops when `head` has read enough, instead
/// of panicking on the closed pipe. Not for the commands that run or watch a program
/// (`run`, `pin`, `attach`, `stat`, `compare`): those must outlive a closed output and put
/// the program back as it was.
pub fn end_quietly_on_closed_output() {
    // SAFETY: restores the default disposition of one signal with a zeroed action (no
    // handler, no flags, an empty mask); no memory is shared with a handler.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(libc::SIGPIPE, &dfl, std::ptr::null_mut());
    }
}
