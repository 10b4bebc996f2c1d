//! Atomic words in a file that several processes map shared (the heartbeat channel, the
//! thread registry): the one place where a mapping's bytes are viewed as atomics.

use memmap2::MmapRaw;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8};

/// An atomic type a shared word can be viewed as.
pub trait Word: sealed::Sealed {}
impl Word for AtomicU8 {}
impl Word for AtomicU32 {}
impl Word for AtomicI32 {}
impl Word for AtomicU64 {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for std::sync::atomic::AtomicU8 {}
    impl Sealed for std::sync::atomic::AtomicU32 {}
    impl Sealed for std::sync::atomic::AtomicI32 {}
    impl Sealed for std::sync::atomic::AtomicU64 {}
}

/// A whole file mapped shared, readable and writable; unmapped when dropped.
#[derive(Debug)]
pub struct SharedWords {
    map: MmapRaw,
}

impl SharedWords {
    /// Maps all of `file` (opened for reading and writing).
    pub fn map(file: &File) -> io::Result<SharedWords> {
        Ok(SharedWords {
            map: MmapRaw::map_raw(file)?,
        })
    }

    /// Grows `file` to `len` bytes by writing zeros after its end, then maps all of it.
    ///
    /// Why not `set_len`: that leaves a sparse file whose blocks are allocated only when a
    /// process first writes a page through its mapping, and on a full filesystem (a full
    /// TMPDIR) that write kills the writer with SIGBUS, autopin or the program it runs. Writing
    /// the zeros here makes the same shortage an error this call returns (ENOSPC, EDQUOT).
    pub fn map_allocated(file: &File, len: usize) -> io::Result<SharedWords> {
        use std::os::unix::fs::FileExt;
        let have = file.metadata()?.len() as usize;
        if have < len {
            file.write_all_at(&vec![0u8; len - have], have as u64)?;
        }
        Self::map(file)
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// The word of type `T` at byte offset `off`.
    ///
    /// Panics when it does not lie wholly inside the mapping or is misaligned for `T`: the
    /// offsets are constants of a file layout, so either is a bug in the caller.
    pub fn at<T: Word>(&self, off: usize) -> &T {
        let size = std::mem::size_of::<T>();
        let ptr = self.map.as_mut_ptr().wrapping_add(off);
        assert!(
            off.checked_add(size).is_some_and(|end| end <= self.len())
                && (ptr as usize).is_multiple_of(std::mem::align_of::<T>()),
            "a {size}-byte word at offset {off} does not fit a {}-byte mapping",
            self.len()
        );
        // SAFETY: the word lies inside the mapping and is aligned for T (checked above); the
        // mapping lives as long as `self`, and other processes may write the same bytes only
        // because every access, theirs and ours, is atomic.
        unsafe { &*(ptr as *const T) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::Ordering;

    fn mapped(bytes: &[u8]) -> (tempfile::NamedTempFile, SharedWords) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(f.path())
            .unwrap();
        let w = SharedWords::map(&file).unwrap();
        (f, w)
    }

    #[test]
    fn words_read_and_write_the_files_bytes() {
        let mut bytes = vec![0u8; 16];
        bytes[8..16].copy_from_slice(&7u64.to_le_bytes());
        let (f, w) = mapped(&bytes);
        assert_eq!(w.len(), 16);
        assert_eq!(w.at::<AtomicU64>(8).load(Ordering::Acquire), 7);
        w.at::<AtomicU32>(4).store(0x0102_0304, Ordering::Release);
        let on_disk = std::fs::read(f.path()).unwrap();
        assert_eq!(&on_disk[4..8], &0x0102_0304u32.to_le_bytes());
        assert_eq!(w.at::<AtomicU8>(5).load(Ordering::Acquire), 0x03);
    }

    #[test]
    fn an_allocated_mapping_keeps_the_files_bytes_and_fills_the_rest_with_zeros() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&[1, 2, 3, 4]).unwrap();
        let file = f.reopen().unwrap();
        let w = SharedWords::map_allocated(&file, 4096).unwrap();
        assert_eq!(w.len(), 4096);
        assert_eq!(w.at::<AtomicU32>(0).load(Ordering::Relaxed), 0x0403_0201);
        assert_eq!(w.at::<AtomicU64>(4088).load(Ordering::Relaxed), 0);
        // Written, not a hole: the blocks exist before anyone writes through the mapping.
        use std::os::unix::fs::MetadataExt;
        assert!(file.metadata().unwrap().blocks() * 512 >= 4096);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn a_word_past_the_end_is_refused() {
        let (_f, w) = mapped(&[0u8; 16]);
        w.at::<AtomicU64>(12);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn a_misaligned_word_is_refused() {
        let (_f, w) = mapped(&[0u8; 16]);
        w.at::<AtomicU32>(2);
    }
}
