//! All file access of a persistent database goes through [`FileSystem`]: the real file
//! system ([`RealFileSystem`], the default) and a simulated one for crash tests
//! ([`SimulatedFileSystem`]) implement it.
//!
//! The trait is small on purpose: what the log, checkpoints and the manifest need (open,
//! read and write at an offset, sync a file's data, length, set length, rename, remove, sync
//! a directory, list a directory, lock a directory) and nothing a protocol could use to
//! order writes behind the simulation's back. Every file protocol built on it states the
//! order of its writes, syncs and renames (`docs/design/durability.md`), and the simulated
//! disk is free to reorder what the protocol does not order.
//!
//! A `dyn` call costs nothing next to the system call behind it.

pub mod simulated;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use simulated::{Fault, SimulatedFileSystem};

/// How [`FileSystem::open`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// An existing file, for reading only.
    Read,
    /// An existing file, for reading and writing.
    ReadWrite,
    /// A new file, for reading and writing; fails with [`io::ErrorKind::AlreadyExists`] if
    /// the name is taken. Its directory entry is durable only once the directory is synced.
    CreateNew,
}

/// An open file. Reads see every write made through any handle of the file, synced or not
/// (as the page cache does); only [`File::sync_data`] makes writes survive a power loss.
pub trait File: Send + Sync + fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at or past the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Makes every write to this file so far (and its length) durable. After a failure the
    /// writes since the last successful sync may be lost for ever, even if a later sync
    /// succeeds (Linux drops dirty pages whose write-back failed): never retry a failed
    /// sync as if it had not happened.
    fn sync_data(&self) -> io::Result<()>;

    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Truncates or extends (with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with
    /// [`io::ErrorKind::UnexpectedEof`].
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file ends before the bytes asked for",
                    ))
                }
                n => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
}

/// Held while a database has its directory open; dropping it releases the directory.
pub trait DirectoryLock: Send + Sync + fmt::Debug {}

/// The file system a persistent database lives in.
pub trait FileSystem: Send + Sync + fmt::Debug {
    /// Creates a directory and its missing parents (durable once their parents are synced).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Opens a file.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>>;

    /// Removes a file's directory entry (durable once the directory is synced).
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Renames a file atomically, replacing `to` if it exists (durable once the directory
    /// is synced; both names are in the same directory in every protocol of Verso).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;

    /// The names of the files in a directory (not sorted).
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;

    /// Whether a file or directory exists at `path`.
    fn exists(&self, path: &Path) -> io::Result<bool>;

    /// Takes the exclusive lock of the file at `path` (created if missing) for this
    /// process; fails with [`io::ErrorKind::WouldBlock`] if another holder has it. A
    /// process that dies releases its locks.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirectoryLock>>;
}

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFileSystem;

#[derive(Debug)]
struct RealFile(std::fs::File);

impl File for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.0, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.0, buf, offset)
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

#[derive(Debug)]
struct RealLock {
    // The lock lives as long as the open file description.
    _file: std::fs::File,
}

impl DirectoryLock for RealLock {}

/// Takes `flock(LOCK_EX | LOCK_NB)` on the file: held by its open file description until
/// it is closed (a process that dies closes it), and exclusive between two descriptions
/// even in one process.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn lock_exclusive(file: &std::fs::File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: `flock` only reads its arguments; the descriptor is open for as long as
    // `file` lives, which outlives the call.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.kind() == io::ErrorKind::WouldBlock {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "another process (or another open database of this one) holds the lock",
        ));
    }
    Err(error)
}

#[cfg(not(target_os = "linux"))]
fn lock_exclusive(_file: &std::fs::File) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "persistent databases lock their directory with flock, on Linux only",
    ))
}

impl FileSystem for RealFileSystem {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>> {
        let mut options = std::fs::OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
        };
        Ok(Box::new(RealFile(options.open(path)?)))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(path)?.sync_all()
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirectoryLock>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        lock_exclusive(&file)?;
        Ok(Box::new(RealLock { _file: file }))
    }
}

/// The file system a database was given ([`crate::Options::file_system`]), compared by
/// identity so that [`crate::Options`] stays comparable.
#[derive(Clone)]
pub struct FileSystemHandle(pub(crate) Arc<dyn FileSystem>);

impl FileSystemHandle {
    /// Wraps a file system.
    pub fn new(fs: Arc<dyn FileSystem>) -> Self {
        FileSystemHandle(fs)
    }

    /// The real file system.
    pub fn real() -> Self {
        FileSystemHandle(Arc::new(RealFileSystem))
    }
}

impl PartialEq for FileSystemHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for FileSystemHandle {}

impl fmt::Debug for FileSystemHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
