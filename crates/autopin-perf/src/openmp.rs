//! Which OpenMP runtime a program uses, from the libraries its ELF file needs: the run
//! path's objective chain (autopin-engine `ObjectiveSource`) counts completed OpenMP work
//! for such programs when no hardware counters exist and the program reports no heartbeat.

/// The OpenMP runtime among a program's needed libraries (GNU libgomp, LLVM libomp, Intel
/// libiomp5), if any.
pub fn openmp_runtime(needed: &[String]) -> Option<String> {
    needed
        .iter()
        .find(|n| {
            let base = n.rsplit('/').next().unwrap_or(n);
            [
                "libgomp.so",
                "libomp.so",
                "libiomp5.so",
                "libgomp-",
                "libomp-",
            ]
            .iter()
            .any(|p| base.starts_with(p))
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_are_recognised_by_their_library_names() {
        let libs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            openmp_runtime(&libs(&["libm.so.6", "libgomp.so.1", "libc.so.6"])).as_deref(),
            Some("libgomp.so.1")
        );
        assert_eq!(
            openmp_runtime(&libs(&["libomp.so.5"])).as_deref(),
            Some("libomp.so.5")
        );
        assert_eq!(
            openmp_runtime(&libs(&["/opt/intel/lib/libiomp5.so"])).as_deref(),
            Some("/opt/intel/lib/libiomp5.so")
        );
        assert_eq!(openmp_runtime(&libs(&["libc.so.6", "libompx.so"])), None);
    }
}
