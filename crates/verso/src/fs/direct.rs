//! Direct I/O for page files: reads and writes that go to the device, not into the
//! operating system's page cache ([`crate::fs::FileSystem::open_direct`]).
//!
//! Why: the disk engine's buffer pool is its cache. Through the page cache, a page it evicts
//! is only copied into the kernel's memory, and a "read" of it is a copy back; a pool much
//! smaller than the data then measures memory copies, not the page writes and reads that
//! SI-CV's experiments argue about. With `O_DIRECT` (Linux) every page write reaches the
//! device when the call returns (into its volatile cache: [`File::sync_data`] is still what
//! makes it durable, so no file protocol changes).
//!
//! `O_DIRECT` needs the memory, the offset and the length of each transfer aligned to the
//! device's logical block. Offsets and lengths must be multiples of [`DIRECT_IO_ALIGNMENT`]
//! (whole pages always are: the disk engine reads and writes 8 KiB pages at page offsets);
//! anything else is refused with [`io::ErrorKind::InvalidInput`]. The caller's memory is not
//! aligned, so each transfer goes through an aligned bounce buffer, one page at a time.

use std::io;
use std::os::unix::fs::FileExt;

use super::File;

/// The alignment direct I/O asks of offsets and lengths: 4 KiB, the largest logical block
/// size of common devices (512-byte devices accept it too).
pub const DIRECT_IO_ALIGNMENT: usize = 4096;

/// The most bytes one bounce buffer carries: a disk-engine page.
const CHUNK: usize = 8192;

/// An aligned bounce buffer; its array starts at the struct's start, so it is aligned too.
#[repr(C, align(4096))]
struct Bounce([u8; CHUNK]);

const _: () = assert!(std::mem::align_of::<Bounce>() == DIRECT_IO_ALIGNMENT);
const _: () = assert!(CHUNK % DIRECT_IO_ALIGNMENT == 0);

/// A file opened with `O_DIRECT`.
#[derive(Debug)]
pub(super) struct DirectFile(pub(super) std::fs::File);

impl DirectFile {
    /// Opens `options` with `O_DIRECT` added.
    #[cfg(target_os = "linux")]
    pub(super) fn open(
        mut options: std::fs::OpenOptions,
        path: &std::path::Path,
    ) -> io::Result<DirectFile> {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_DIRECT);
        options.open(path).map(DirectFile).map_err(|error| {
            if error.raw_os_error() == Some(libc::EINVAL) {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "the file system does not do direct I/O (O_DIRECT refused: {error}; \
                         tmpfs before Linux 6.6, for one, does not)"
                    ),
                )
            } else {
                error
            }
        })
    }

    /// Direct I/O is built for Linux only.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn open(
        _options: std::fs::OpenOptions,
        _path: &std::path::Path,
    ) -> io::Result<DirectFile> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "direct I/O is implemented for Linux (O_DIRECT) only",
        ))
    }
}

/// Refuses a transfer direct I/O cannot make.
fn check_aligned(offset: u64, len: usize) -> io::Result<()> {
    if offset % DIRECT_IO_ALIGNMENT as u64 == 0 && len % DIRECT_IO_ALIGNMENT == 0 {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "direct I/O of {len} bytes at offset {offset}: both must be multiples of \
                 {DIRECT_IO_ALIGNMENT}"
            ),
        ))
    }
}

impl File for DirectFile {
    /// Reads chunk by chunk through the bounce buffer; stops at the end of the file (a
    /// short count, as [`File::read_at`] allows). A file a crash left ending inside a
    /// block gives a short count there; the caller's next read, at that unaligned offset,
    /// is at the end and reads nothing, as with [`FileSystem::open`](super::FileSystem).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if !buf.is_empty() && offset >= self.len()? {
            return Ok(0);
        }
        check_aligned(offset, buf.len())?;
        let mut bounce = Box::new(Bounce([0; CHUNK]));
        let mut done = 0;
        while done < buf.len() {
            let want = (buf.len() - done).min(CHUNK);
            let got = self
                .0
                .read_at(&mut bounce.0[..want], offset + done as u64)?;
            buf[done..done + got].copy_from_slice(&bounce.0[..got]);
            done += got;
            if got < want {
                break; // the end of the file
            }
        }
        Ok(done)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        check_aligned(offset, buf.len())?;
        let mut bounce = Box::new(Bounce([0; CHUNK]));
        for (i, chunk) in buf.chunks(CHUNK).enumerate() {
            bounce.0[..chunk.len()].copy_from_slice(chunk);
            self.0
                .write_all_at(&bounce.0[..chunk.len()], offset + (i * CHUNK) as u64)?;
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, OpenMode, RealFileSystem};

    /// A directory on the build's own file system (a temporary directory may be tmpfs,
    /// which refuses O_DIRECT).
    fn dir(name: &str) -> std::path::PathBuf {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/direct-io-tests")
            .join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn whole_pages_go_through_direct_io_and_read_back_and_unaligned_transfers_are_refused() {
        let dir = dir("pages");
        let path = dir.join("t0.heap");
        let file = RealFileSystem
            .open_direct(&path, OpenMode::CreateNew)
            .unwrap();
        let pages: Vec<u8> = (0..3 * CHUNK).map(|i| (i % 251) as u8).collect();
        file.write_all_at(&pages[..2 * CHUNK], 0).unwrap();
        file.write_all_at(&pages[2 * CHUNK..], 2 * CHUNK as u64)
            .unwrap();
        file.sync_data().unwrap();
        assert_eq!(file.len().unwrap(), 3 * CHUNK as u64);
        let mut back = vec![0; 3 * CHUNK];
        assert_eq!(file.read_at(&mut back, 0).unwrap(), 3 * CHUNK);
        assert_eq!(back, pages);
        // One 4 KiB block, and a read past the end: a short count.
        let mut block = vec![0; DIRECT_IO_ALIGNMENT];
        assert_eq!(file.read_at(&mut block, 4096).unwrap(), 4096);
        assert_eq!(block, pages[4096..8192]);
        let mut beyond = vec![0; 2 * CHUNK];
        assert_eq!(file.read_at(&mut beyond, 2 * CHUNK as u64).unwrap(), CHUNK);
        assert_eq!(beyond[..CHUNK], pages[2 * CHUNK..]);
        for (len, offset) in [(100, 0), (4096, 100), (8192 + 1, 0)] {
            let error = file.write_all_at(&vec![0; len], offset).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{error}");
            let error = file.read_at(&mut vec![0; len], offset).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{error}");
        }
        // A file ending inside a block (a torn extension): the block's bytes, then nothing.
        file.set_len(3 * CHUNK as u64 + 1000).unwrap();
        let mut torn = vec![0; CHUNK];
        assert_eq!(file.read_at(&mut torn, 3 * CHUNK as u64).unwrap(), 1000);
        assert_eq!(
            file.read_at(&mut torn[1000..], 3 * CHUNK as u64 + 1000)
                .unwrap(),
            0
        );
        file.set_len(3 * CHUNK as u64).unwrap();
        // The same bytes through an ordinary handle (the page cache, kept coherent).
        let plain = RealFileSystem.open(&path, OpenMode::Read).unwrap();
        let mut again = vec![0; 3 * CHUNK];
        assert_eq!(plain.read_at(&mut again, 0).unwrap(), 3 * CHUNK);
        assert_eq!(again, pages);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
