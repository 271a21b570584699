//! The region as a memory-mapped file: the stand-in for persistent memory on machines
//! without it.
//!
//! On a RAM-backed file system (tmpfs, such as `/dev/shm`) stores are as fast as DRAM and
//! persisting is a fence: the region survives a process crash (the kernel keeps the file's
//! pages) but not a power loss ([`RegionKind::Emulated`]). On a disk file system persisting
//! is an `msync` of the persisted lines' pages, so the region survives a power loss
//! ([`RegionKind::Msync`]), at the cost of a synchronous write per persist point.
//!
//! Invariant: the file is never truncated while mapped. The length is set (sparse) only
//! when the file is created, before it is mapped; the mapping is made once, for the whole
//! file, and is never remapped, so the region's base never moves.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::{RegionBackend, RegionKind, REGION_ALIGN};

/// A region of emulated persistent memory in a memory-mapped file.
pub struct MmapRegion {
    map: MmapRaw,
    /// Kept open for the mapping's life (the mapping does not need it, but holding it
    /// documents that this handle owns the file while mapped).
    _file: File,
    path: PathBuf,
    kind: RegionKind,
}

impl fmt::Debug for MmapRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmapRegion")
            .field("path", &self.path)
            .field("len", &self.map.len())
            .field("kind", &self.kind)
            .finish()
    }
}

impl MmapRegion {
    /// Opens the region file at `path`, creating it `create_len` bytes long (sparse: only
    /// touched pages take memory or disk) if it does not exist. An existing file keeps its
    /// length, which must be a non-zero multiple of [`REGION_ALIGN`] bytes.
    ///
    /// A new file appears whole or not at all: it is created and sized under a temporary
    /// name, then linked to `path` (which fails if another process created `path`
    /// meanwhile; that file is then opened). Creating it does not make its directory entry
    /// durable; the caller syncs the directory (through `fs::FileSystem`) when that matters.
    pub fn open(path: &Path, create_len: u64) -> io::Result<MmapRegion> {
        let existing = OpenOptions::new().read(true).write(true).open(path);
        let file = match existing {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                if create_len == 0 || create_len % REGION_ALIGN as u64 != 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "a region is a non-zero multiple of {REGION_ALIGN} bytes, not \
                             {create_len}"
                        ),
                    ));
                }
                create_whole(path, create_len)?
            }
            Err(err) => return Err(err),
        };
        let len = file.metadata()?.len();
        if len == 0 || len % REGION_ALIGN as u64 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} is {len} bytes: a region file is a non-zero multiple of {REGION_ALIGN}",
                    path.display()
                ),
            ));
        }
        let len_usize = usize::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "region larger than the address space",
            )
        })?;
        let map = MmapOptions::new().len(len_usize).map_raw(&file)?;
        Ok(MmapRegion {
            map,
            kind: kind_of(&file),
            _file: file,
            path: path.to_path_buf(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Creates `path` at `len` bytes under a temporary name first, so that no crash leaves a
/// file of the wrong length at `path`; returns it open.
fn create_whole(path: &Path, len: u64) -> io::Result<File> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".creating-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let temporary = path.with_file_name(name);
    let created = (|| {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.set_len(len)?;
        match std::fs::hard_link(&temporary, path) {
            Ok(()) => Ok(file),
            // Another process won the race: use its file.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                OpenOptions::new().read(true).write(true).open(path)
            }
            Err(err) => Err(err),
        }
    })();
    let _ = std::fs::remove_file(&temporary);
    created
}

/// `Emulated` on a RAM-backed file system, else `Msync`.
#[allow(unsafe_code)]
fn kind_of(file: &File) -> RegionKind {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        const TMPFS_MAGIC: u32 = 0x0102_1994;
        const RAMFS_MAGIC: u32 = 0x8584_58f6;
        let mut stats = std::mem::MaybeUninit::<libc::statfs>::zeroed();
        // SAFETY: `fstatfs` writes a `statfs` into the buffer we pass, which is large enough
        // for one; the descriptor is open (we hold `file`).
        let ok = unsafe { libc::fstatfs(file.as_raw_fd(), stats.as_mut_ptr()) } == 0;
        if ok {
            // SAFETY: `fstatfs` returned 0, so it filled the structure.
            let stats = unsafe { stats.assume_init() };
            // `f_type` is 32 or 64 bits, signed or not, by target: its low 32 bits are the
            // magic number.
            #[allow(clippy::unnecessary_cast)]
            let magic = stats.f_type as u64 as u32;
            if magic == TMPFS_MAGIC || magic == RAMFS_MAGIC {
                return RegionKind::Emulated;
            }
        }
        RegionKind::Msync
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        RegionKind::Msync
    }
}

// SAFETY: the mapping is made once over the whole file and never remapped or unmapped
// while `self` lives (`MmapRaw` unmaps on drop), so `base` is valid for `len()` bytes at a
// fixed, page-aligned address; the kernel is the only other party (msync). The file is
// never truncated by Verso while mapped; a process that truncates it from outside would
// make accesses fault (SIGBUS), as with any shared mapping: the database's directory lock
// keeps other Verso processes out.
#[allow(unsafe_code)]
unsafe impl RegionBackend for MmapRegion {
    fn base(&self) -> NonNull<u8> {
        NonNull::new(self.map.as_mut_ptr()).expect("a mapping is never at address zero")
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn persist(&self, lines: &[u64], line_bytes: u32) -> io::Result<()> {
        match self.kind {
            RegionKind::Msync => {
                for (offset, len) in page_runs(lines, line_bytes, self.map.len() as u64) {
                    self.map.flush_range(offset as usize, len as usize)?;
                }
                Ok(())
            }
            _ => {
                // The page cache is as durable as this file system gets: order the stores
                // before whatever the caller does next, as `sfence` would.
                fence(Ordering::SeqCst);
                Ok(())
            }
        }
    }

    fn kind(&self) -> RegionKind {
        self.kind
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

/// The unit msync works in: whole pages. 4 KiB on x86-64; where pages are larger, runs of
/// 4 KiB still cover the persisted lines (the kernel rounds each range out to its pages).
const PAGE_BYTES: u64 = 4096;

/// The byte ranges one msync each covers for the persisted `lines` (sorted, distinct) of
/// `line_bytes`: one per run of consecutive pages holding them, clipped to the region's
/// `region_bytes`. (Per run of *lines*, two lines of one page would cost two msyncs of it.)
fn page_runs(lines: &[u64], line_bytes: u32, region_bytes: u64) -> Vec<(u64, u64)> {
    let line = u64::from(line_bytes);
    let mut runs: Vec<(u64, u64)> = Vec::new(); // (first page, last page)
    for &l in lines {
        let (first, last) = (l * line / PAGE_BYTES, ((l + 1) * line - 1) / PAGE_BYTES);
        match runs.last_mut() {
            Some((_, end)) if first <= *end + 1 => *end = (*end).max(last),
            _ => runs.push((first, last)),
        }
    }
    runs.into_iter()
        .map(|(first, last)| {
            let offset = first * PAGE_BYTES;
            (offset, ((last + 1) * PAGE_BYTES).min(region_bytes) - offset)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::page_runs;

    #[test]
    fn lines_of_one_page_are_one_msync_and_runs_of_pages_merge() {
        // Lines 0 and 2 of 256 bytes: one page.
        assert_eq!(page_runs(&[0, 2], 256, 1 << 20), [(0, 4096)]);
        // Lines in pages 0, 1 and 3: two runs.
        assert_eq!(
            page_runs(&[1, 16, 48], 256, 1 << 20),
            [(0, 8192), (12288, 4096)]
        );
        // A line at the end of a region that is not a whole number of pages.
        assert_eq!(page_runs(&[19], 256, 5120), [(4096, 1024)]);
        // 64-byte lines: 64 lines to a page.
        assert_eq!(page_runs(&[63, 64], 64, 1 << 20), [(0, 8192)]);
        assert_eq!(page_runs(&[], 256, 1 << 20), []);
    }
}
