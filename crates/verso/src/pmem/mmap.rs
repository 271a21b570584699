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
    /// Creating the file does not make its directory entry durable; the caller syncs the
    /// directory (through `fs::FileSystem`) when that matters.
    pub fn open(path: &Path, create_len: u64) -> io::Result<MmapRegion> {
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(file) => {
                if create_len == 0 || create_len % REGION_ALIGN as u64 != 0 {
                    let _ = std::fs::remove_file(path);
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("a region is a non-zero multiple of {REGION_ALIGN} bytes, not {create_len}"),
                    ));
                }
                file.set_len(create_len)?;
                file
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                OpenOptions::new().read(true).write(true).open(path)?
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

/// `Emulated` on a RAM-backed file system, else `Msync`.
fn kind_of(file: &File) -> RegionKind {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        const RAMFS_MAGIC: i64 = 0x8584_58f6;
        let mut stats = std::mem::MaybeUninit::<libc::statfs>::zeroed();
        // SAFETY: `fstatfs` writes a `statfs` into the buffer we pass, which is large enough
        // for one; the descriptor is open (we hold `file`).
        let ok = unsafe { libc::fstatfs(file.as_raw_fd(), stats.as_mut_ptr()) } == 0;
        if ok {
            // SAFETY: `fstatfs` returned 0, so it filled the structure.
            let stats = unsafe { stats.assume_init() };
            #[allow(clippy::unnecessary_cast)] // `f_type`'s type differs between targets
            let magic = stats.f_type as i64;
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

impl RegionBackend for MmapRegion {
    fn base(&self) -> NonNull<u8> {
        NonNull::new(self.map.as_mut_ptr()).expect("a mapping is never at address zero")
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn persist(&self, lines: &[u64], line_bytes: u32) -> io::Result<()> {
        match self.kind {
            RegionKind::Msync => {
                // One msync per run of consecutive lines.
                let line = u64::from(line_bytes);
                let mut i = 0;
                while i < lines.len() {
                    let mut j = i + 1;
                    while j < lines.len() && lines[j] == lines[j - 1] + 1 {
                        j += 1;
                    }
                    let offset = lines[i] * line;
                    let len = (lines[j - 1] + 1) * line - offset;
                    self.map.flush_range(offset as usize, len as usize)?;
                    i = j;
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
