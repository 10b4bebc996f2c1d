//! Where a process's CPU controller lives in the cgroup file system, from its
//! `/proc/PID/cgroup`: the unified (v2) directory, and cgroup v1's `cpu` controller.

use std::path::{Path, PathBuf};

/// Which cgroup hierarchy a directory belongs to (its files differ: v2 `cpu.max`, v1
/// `cpu.cfs_quota_us`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    Unified,
    V1,
}

/// The directories holding the process's CPU controller files, below `root` (`/` live), in
/// the order `/proc/PID/cgroup` lists them (`text` is that file).
pub fn cpu_dirs(root: &Path, text: &str) -> Vec<(Hierarchy, PathBuf)> {
    let base = root.join("sys/fs/cgroup");
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.trim_start_matches('/');
            if controllers.is_empty() {
                Some((Hierarchy::Unified, base.join(path)))
            } else if controllers.split(',').any(|c| c == "cpu") {
                Some((Hierarchy::V1, base.join(controllers).join(path)))
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_hierarchies_in_file_order() {
        let text = "4:cpu,cpuacct:/batch/job7\n1:name=systemd:/\n3:memory:/x\n0::/user.slice\n";
        assert_eq!(
            cpu_dirs(Path::new("/r"), text),
            vec![
                (
                    Hierarchy::V1,
                    PathBuf::from("/r/sys/fs/cgroup/cpu,cpuacct/batch/job7")
                ),
                (
                    Hierarchy::Unified,
                    PathBuf::from("/r/sys/fs/cgroup/user.slice")
                ),
            ]
        );
    }
}
