//! Page migration: after a decision that moves threads to other NUMA nodes, move the
//! target's pages after them (first-touch placement would otherwise leave the memory behind
//! on the old node). Pages move with `move_pages(2)` in bounded batches, so the target keeps
//! running between them and the result is known per page: where it went, or why it stayed.

use autopin_engine::sensors::OsError;
use autopin_topology::Machine;
use std::time::Instant;

pub use autopin_engine::report::MigrationOutcome;
pub use autopin_engine::run::page_migration::nodes_of;

/// Which mappings move.
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    /// Also private file-backed mappings (mapped files, data segments of the program and its
    /// libraries); default: only heap, anonymous mappings and stacks. Shared mappings never
    /// move: their pages belong to every process that maps them.
    pub include_files: bool,
    /// Pages per move_pages call (rounded up to a multiple of 512, one 2 MiB huge page).
    pub batch: usize,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        MigrateOptions {
            include_files: false,
            batch: 4096,
        }
    }
}

/// `kernel.numa_balancing` from /proc/sys: Some(on) or None when the kernel lacks it.
pub fn numa_balancing() -> Option<bool> {
    std::fs::read_to_string("/proc/sys/kernel/numa_balancing")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|v| v != 0)
}

/// A mapping from /proc/PID/maps worth moving: (start, end).
pub fn movable_ranges(maps: &str, include_files: bool) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let path = f.nth(3).unwrap_or("");
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        // Reserved address space (guard pages, arena reserves) holds no pages.
        if perms.starts_with("---") {
            continue;
        }
        let private = perms.as_bytes().get(3) == Some(&b'p');
        let anonymous = path.is_empty() || path.starts_with("[heap") || path.starts_with("[stack");
        let special = path.starts_with("[v"); // [vdso], [vvar], [vsyscall]
        if special {
            continue;
        }
        if private && (anonymous || include_files) {
            out.push((a, b));
        }
    }
    out
}

const MPOL_MF_MOVE: libc::c_int = 1 << 1;

fn move_pages(
    pid: i32,
    pages: &[*mut libc::c_void],
    nodes: Option<&[libc::c_int]>,
    status: &mut [libc::c_int],
) -> std::io::Result<()> {
    // SAFETY: pages, nodes and status have the same length, which is the count passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes.map_or(std::ptr::null(), |n| n.as_ptr()),
            status.as_mut_ptr(),
            MPOL_MF_MOVE,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn errno_name(e: i32) -> String {
    match e {
        libc::ENOENT => "not present".into(),
        libc::EBUSY => "busy (EBUSY)".into(),
        libc::EACCES => "shared with other processes (EACCES)".into(),
        libc::EFAULT => "zero page or special mapping (EFAULT)".into(),
        libc::ENOMEM => "target node full (ENOMEM)".into(),
        libc::EIO => "cannot be written back (EIO)".into(),
        libc::EINVAL => "dirty page without migration support (EINVAL)".into(),
        e => format!("errno {e}"),
    }
}

/// Moves the resident pages of `pid`'s heap, anonymous mappings and stacks that are not on
/// the nodes of `cpus` to those nodes (round-robin when there are several).
pub fn migrate_to(
    m: &Machine,
    pid: i32,
    cpus: &[u32],
    opts: &MigrateOptions,
) -> Result<MigrationOutcome, OsError> {
    let started = Instant::now();
    let to: Vec<u32> = nodes_of(m, cpus).into_iter().collect();
    let mut out = MigrationOutcome {
        to_nodes: to.clone(),
        numa_balancing: numa_balancing(),
        ..Default::default()
    };
    if to.is_empty() {
        return Err(OsError::NotSupported(format!(
            "the CPUs {cpus:?} belong to no NUMA node with CPUs"
        )));
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| OsError::from_io(format_args!("/proc/{pid}/maps"), &e))?;
    let ranges = movable_ranges(&maps, opts.include_files);
    out.mappings = ranges.len();
    let page = rustix::param::page_size() as u64;
    let batch = opts.batch.max(1).next_multiple_of(512);
    let mut next_target = 0usize;
    for (a, b) in ranges {
        let mut addr = a;
        while addr < b {
            // Batches end on multiples of their own size (a multiple of 2 MiB), so a
            // transparent huge page never straddles two batches: moving it whole from one
            // batch would make its tail look "already there" in the next.
            let span = batch as u64 * page;
            let boundary = (addr / span + 1) * span;
            let n = ((boundary.min(b) - addr) / page) as usize;
            let pages: Vec<*mut libc::c_void> =
                (0..n as u64).map(|i| (addr + i * page) as *mut _).collect();
            addr += n as u64 * page;
            // Where each page is now (negative: not resident, or why not movable).
            let mut where_ = vec![0; n];
            move_pages(pid, &pages, None, &mut where_).map_err(|e| match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => OsError::PermissionDenied(format!(
                    "move_pages({pid}): {e} — moving another user's pages needs CAP_SYS_NICE"
                )),
                _ => OsError::from_io(format_args!("move_pages({pid})"), &e),
            })?;
            let mut sel = Vec::new();
            let mut dest = Vec::new();
            for (p, &w) in pages.iter().zip(&where_) {
                if w == -libc::ENOENT || w == -libc::EFAULT {
                    continue; // not resident: nothing to move
                }
                out.resident += 1;
                if w < 0 {
                    *out.failed.entry(errno_name(-w)).or_default() += 1;
                } else if to.contains(&(w as u32)) {
                    out.already_there += 1;
                } else {
                    sel.push(*p);
                    dest.push(to[next_target % to.len()] as libc::c_int);
                    next_target += 1;
                }
            }
            if sel.is_empty() {
                continue;
            }
            let mut status = vec![0; sel.len()];
            move_pages(pid, &sel, Some(&dest), &mut status)
                .map_err(|e| OsError::from_io(format_args!("move_pages({pid})"), &e))?;
            // A huge page split while moving can report EBUSY for parts that did move:
            // ask the kernel where the pages that failed are now.
            let retry: Vec<usize> = (0..sel.len()).filter(|&i| status[i] != dest[i]).collect();
            if !retry.is_empty() {
                let again: Vec<*mut libc::c_void> = retry.iter().map(|&i| sel[i]).collect();
                let mut now = vec![0; again.len()];
                if move_pages(pid, &again, None, &mut now).is_ok() {
                    for (&i, &w) in retry.iter().zip(&now) {
                        if w == dest[i] {
                            status[i] = w;
                        }
                    }
                }
            }
            for (s, d) in status.iter().zip(&dest) {
                if *s == *d {
                    *out.moved.entry(*d as u32).or_default() += 1;
                } else if *s < 0 {
                    *out.failed.entry(errno_name(-s)).or_default() += 1;
                } else {
                    *out.failed.entry(format!("stayed on node {s}")).or_default() += 1;
                }
            }
            // Let the target run between batches.
            std::thread::yield_now();
        }
    }
    out.seconds = started.elapsed().as_secs_f64();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c000-55d0d000 r--p 00000000 08:01 123 /usr/bin/prog
55d0d000-55d0e000 rw-p 00001000 08:01 123 /usr/bin/prog
55d0f000-55d30000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0010000000 rw-p 00000000 00:00 0
7f0010000000-7f0014000000 ---p 00000000 00:00 0
7f0020000000-7f0020001000 rw-s 00000000 00:05 9 /dev/shm/x
7ffd000-7ffe000 rw-p 00000000 00:00 0 [stack]
7fff000-7fff100 r-xp 00000000 00:00 0 [vdso]
";

    #[test]
    fn anonymous_heap_and_stack_only_unless_asked() {
        let r = movable_ranges(MAPS, false);
        assert_eq!(
            r,
            vec![
                (0x55d0f000, 0x55d30000),
                (0x7f0000000000, 0x7f0010000000),
                (0x7ffd000, 0x7ffe000)
            ]
        );
        // --migrate-files adds the program's private file mappings, never the shared one.
        let all = movable_ranges(MAPS, true);
        assert_eq!(all.len(), 5, "{all:x?}");
        assert!(all.contains(&(0x55d0c000, 0x55d0d000)));
        assert!(!all.contains(&(0x7f0020000000, 0x7f0020001000)));
    }

    #[test]
    fn own_pages_on_one_node_are_already_there() {
        // On any machine with a node: our own resident heap is on some node of ours.
        let m = autopin_topology::source::sysfs::read(std::path::Path::new("/"));
        if let Ok(m) = m {
            let cpus: Vec<u32> = m.pus().iter().filter_map(|&p| m.obj(p).os_index).collect();
            if !m.numa_nodes.is_empty() && nodes_of(&m, &cpus).len() == m.numa_nodes.len() {
                // black_box: in a release build the unread buffer is never allocated.
                let v = std::hint::black_box(vec![7u8; 1 << 20]);
                let o = migrate_to(
                    &m,
                    std::process::id() as i32,
                    &cpus,
                    &MigrateOptions::default(),
                )
                .unwrap();
                assert!(o.resident >= 256, "{o:?}");
                assert_eq!(o.total_moved(), 0, "{o:?}");
                assert_eq!(o.already_there + o.total_failed(), o.resident);
                drop(v);
            }
        }
    }
}
