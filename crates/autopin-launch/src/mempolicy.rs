//! Applies a numactl-style memory policy ([`MemPolicy`]) to a program autopin starts: the
//! forked child calls `set_mempolicy(2)` before `exec`, so every allocation of the program,
//! from its first page on, follows the policy (children and threads inherit it).

use autopin_placement::{MemPolicy, MemPolicyMode};
use std::io;

const MPOL_PREFERRED: i32 = 1;
const MPOL_BIND: i32 = 2;
const MPOL_INTERLEAVE: i32 = 3;
const MPOL_LOCAL: i32 = 4;

/// The syscall's arguments, prepared before `fork` (the child may not allocate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedMemPolicy {
    mode: i32,
    mask: Vec<libc::c_ulong>,
}

impl PreparedMemPolicy {
    pub fn new(p: &MemPolicy) -> Self {
        let mode = match p.mode {
            MemPolicyMode::Bind => MPOL_BIND,
            MemPolicyMode::Interleave => MPOL_INTERLEAVE,
            MemPolicyMode::Preferred => MPOL_PREFERRED,
            MemPolicyMode::Local => MPOL_LOCAL,
        };
        let bits = libc::c_ulong::BITS as usize;
        let top = p.nodes.iter().max().map_or(0, |n| *n as usize + 1);
        let mut mask = vec![0; top.div_ceil(bits).max(1)];
        for &n in &p.nodes {
            mask[n as usize / bits] |= 1 << (n as usize % bits);
        }
        PreparedMemPolicy { mode, mask }
    }

    /// Sets the calling thread's policy. Async-signal-safe (one system call on memory
    /// prepared earlier), so it may run between `fork` and `exec`.
    pub fn apply(&self) -> io::Result<()> {
        let (ptr, maxnode) = if self.mode == MPOL_LOCAL {
            (std::ptr::null(), 0)
        } else {
            // maxnode counts bits, plus one: the kernel reads maxnode-1 bits.
            (
                self.mask.as_ptr(),
                self.mask.len() * libc::c_ulong::BITS as usize + 1,
            )
        };
        // SAFETY: `ptr` is null or points at `mask`, which covers maxnode-1 bits.
        let r = unsafe {
            libc::syscall(
                libc::SYS_set_mempolicy,
                self.mode as libc::c_long,
                ptr,
                maxnode as libc::c_ulong,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_cover_the_nodes() {
        let p = PreparedMemPolicy::new(&MemPolicy {
            mode: MemPolicyMode::Interleave,
            nodes: vec![0, 2, 65],
        });
        assert_eq!(p.mode, MPOL_INTERLEAVE);
        assert_eq!(p.mask, vec![0b101, 0b10]);
        let l = PreparedMemPolicy::new(&MemPolicy {
            mode: MemPolicyMode::Local,
            nodes: vec![],
        });
        assert_eq!(l.mode, MPOL_LOCAL);
    }

    #[test]
    fn local_policy_applies_on_any_machine() {
        // MPOL_LOCAL needs no node mask, so it works on one node too; set it on a thread
        // of our own so the test process keeps its policy.
        let p = PreparedMemPolicy::new(&MemPolicy {
            mode: MemPolicyMode::Local,
            nodes: vec![],
        });
        std::thread::spawn(move || p.apply().unwrap())
            .join()
            .unwrap();
    }
}
