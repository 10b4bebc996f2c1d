//! The engine's end of the keeper's socket (see [`crate::keeper`]): what the engine, the
//! guardian and the launch tell the keeper (the program's PID and exit code, the guardian's
//! PID, the starting mask, whether a decision is in force, autopin's temporary files).
//! Apart from the keeper itself so that the guardian can speak to the keeper while the
//! keeper calls the guardian's restore, without the two importing each other.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Mutex;

/// The engine's end of the channel to its keeper.
static CHANNEL: Mutex<Option<UnixDatagram>> = Mutex::new(None);

/// Engine: connects to the keeper's socket of abstract name `name` (nothing when it cannot:
/// the engine goes on untold).
pub(crate) fn connect(name: &str) {
    if let Some(sock) = SocketAddr::from_abstract_name(name.as_bytes())
        .ok()
        .and_then(|addr| {
            let s = UnixDatagram::unbound().ok()?;
            s.connect_addr(&addr).ok()?;
            Some(s)
        })
    {
        *CHANNEL.lock().unwrap_or_else(|p| p.into_inner()) = Some(sock);
    }
}

/// In a child of fork that closes the descriptors it inherited (the guardian): the channel
/// is the engine's, never this process's; its descriptor is forgotten, not closed again
/// (its number may name another file by then).
pub(crate) fn forget_in_child() {
    if let Some(s) = CHANNEL.lock().unwrap_or_else(|p| p.into_inner()).take() {
        std::mem::forget(s);
    }
}

pub(crate) fn tell(msg: &str) {
    if let Some(s) = CHANNEL.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        // A keeper that is gone cannot be told; the engine goes on.
        let _ = s.send(msg.as_bytes());
    }
}

/// Engine: what the launched program writes before exec to tell the keeper its PID itself
/// (`program PID`), so that it is known even if the engine dies before `spawn` returns (the
/// program would run on as the keeper's child, unknown to it). None without a keeper.
pub fn pid_note() -> Option<autopin_launch::PidNote> {
    use std::os::fd::AsRawFd;
    CHANNEL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|s| autopin_launch::PidNote {
            fd: s.as_raw_fd(),
            prefix: b"program ".to_vec(),
            suffix: Vec::new(),
        })
}

/// Engine: the program was launched with this PID.
pub fn tell_launched(pid: i32) {
    tell(&format!("program {pid}"));
}

/// Engine: the program ended, and this is its exit code (as a shell gives it).
pub fn tell_exit(code: i32) {
    tell(&format!("exit {code}"));
}

/// Engine: the guardian started, with this PID.
pub(crate) fn tell_guardian(pid: u32) {
    tell(&format!("guardian {pid}"));
}

/// Engine: the CPUs the program starts with.
pub(crate) fn tell_mask(mask: &autopin_topology::CpuSet) {
    tell(&format!("mask {mask}"));
}

/// Engine: whether a decided pinning is in force (told when it changes).
pub(crate) fn tell_decided(yes: bool) {
    use std::sync::atomic::{AtomicU8, Ordering};
    static TOLD: AtomicU8 = AtomicU8::new(0);
    let now = if yes { 2 } else { 1 };
    if TOLD.swap(now, Ordering::Relaxed) != now {
        tell(if yes { "decided" } else { "searching" });
    }
}

/// Engine: a temporary file of autopin's, told before it is made.
pub(crate) fn tell_file(path: &std::path::Path) {
    tell(&format!("file {}", path.display()));
}

/// Engine: a temporary directory of autopin's, told before it is made.
pub(crate) fn tell_dir(path: &std::path::Path) {
    tell(&format!("dir {}", path.display()));
}
