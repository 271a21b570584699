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

mod direct;
pub mod simulated;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use direct::DIRECT_IO_ALIGNMENT;
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

    /// Opens a file for direct I/O, around the operating system's page cache: every read
    /// and write reaches the device, and must move whole multiples of
    /// [`DIRECT_IO_ALIGNMENT`] at such offsets. Syncs are needed exactly as with
    /// [`FileSystem::open`], so no protocol changes. A file system without a page cache
    /// of its own (the simulated one) opens the file as `open` does; the real one refuses
    /// with [`io::ErrorKind::Unsupported`] where the file system cannot (tmpfs before
    /// Linux 6.6).
    fn open_direct(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>> {
        self.open(path, mode)
    }

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

/// A held directory lock: a POSIX record lock on the whole `LOCK` file, and this process's
/// entry for that file in [`LOCKS_HELD`].
///
/// Why a record lock and not `flock`: an `flock` belongs to the open file description, which
/// a child process forked by any thread of this one shares until it execs (or, without
/// close-on-exec, for its life), so a directory closed here stayed locked while such a
/// child lived on (`regression_a_child_forked_while_the_database_was_open_does_not_keep_its_lock`).
/// A record lock belongs to the process: a child never inherits it, and it goes when the
/// process closes any descriptor of the file or dies. Two consequences, both kept by
/// [`LOCKS_HELD`]: a process does not conflict with its own record locks (so the registry
/// refuses a second open in this process), and this process must never open and close a
/// held `LOCK` file beside the lock's own descriptor (so the registry is checked by path
/// before the file is opened).
#[derive(Debug)]
struct RealLock {
    /// The descriptor the lock was taken through; `None` only inside `drop`.
    file: Option<std::fs::File>,
    /// The file's identity in [`LOCKS_HELD`].
    id: FileId,
}

/// A file's device and inode number.
type FileId = (u64, u64);

/// The `LOCK` files this process holds a lock on. Taking, refusing and releasing a lock all
/// hold this mutex, so that no thread opens a held file's path while another closes it.
static LOCKS_HELD: std::sync::Mutex<Vec<FileId>> = std::sync::Mutex::new(Vec::new());

fn locks_held() -> std::sync::MutexGuard<'static, Vec<FileId>> {
    // Every change under the mutex is one push or one removal, so a panic while it is
    // held leaves a consistent list.
    LOCKS_HELD
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn file_id(metadata: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    (metadata.dev(), metadata.ino())
}

fn held_elsewhere_in_this_process() -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        "another open database of this process holds the lock",
    )
}

impl Drop for RealLock {
    /// Order: the descriptor is closed (releasing the record lock) before the registry
    /// entry goes, both under the registry's mutex: until the entry is gone no thread of
    /// this process opens the path, and once it is, no descriptor of ours is left to close.
    fn drop(&mut self) {
        let mut held = locks_held();
        drop(self.file.take());
        let position = held.iter().position(|id| *id == self.id);
        debug_assert!(position.is_some(), "a held lock is registered");
        if let Some(position) = position {
            held.swap_remove(position);
        }
    }
}

impl DirectoryLock for RealLock {}

/// Takes a POSIX write lock on the whole file without waiting (`fcntl(F_SETLK)`): held by
/// this process until it closes a descriptor of the file or dies; never inherited by a child.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn lock_exclusive(file: &std::fs::File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // A write lock from byte 0 to the end of the file, however it grows (`l_len` 0).
    let whole_file = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    // SAFETY: `fcntl(F_SETLK)` reads the `flock` struct through the pointer, which points at
    // a live local for the duration of the call; the descriptor belongs to `file`, borrowed
    // for the call, so it is open.
    let locked = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &whole_file) };
    if locked == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if matches!(
        error.raw_os_error(),
        Some(libc::EACCES) | Some(libc::EAGAIN)
    ) {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "another process holds the lock",
        ));
    }
    Err(error)
}

#[cfg(not(target_os = "linux"))]
fn lock_exclusive(_file: &std::fs::File) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "persistent databases lock their directory with fcntl record locks, on Linux only",
    ))
}

/// The options that open a file in `mode`.
fn open_options(mode: OpenMode) -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    match mode {
        OpenMode::Read => options.read(true),
        OpenMode::ReadWrite => options.read(true).write(true),
        OpenMode::CreateNew => options.read(true).write(true).create_new(true),
    };
    options
}

impl FileSystem for RealFileSystem {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>> {
        Ok(Box::new(RealFile(open_options(mode).open(path)?)))
    }

    fn open_direct(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn File>> {
        Ok(Box::new(direct::DirectFile::open(
            open_options(mode),
            path,
        )?))
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

    /// Order, under [`LOCKS_HELD`]'s mutex: the path is looked up by `stat` (no descriptor
    /// opened, since closing one would release this process's lock), then opened (created
    /// if new), identified again through the descriptor, locked, and registered.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirectoryLock>> {
        let mut held = locks_held();
        match std::fs::metadata(path) {
            Ok(metadata) if held.contains(&file_id(&metadata)) => {
                return Err(held_elsewhere_in_this_process());
            }
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let id = file_id(&file.metadata()?);
        if held.contains(&id) {
            // Another process swapped a held lock file into this path between the two
            // looks. Closing this descriptor would release our own lock on it, so it is
            // left open (one descriptor, for a case that needs a hostile renamer).
            std::mem::forget(file);
            return Err(held_elsewhere_in_this_process());
        }
        lock_exclusive(&file)?;
        held.push(id);
        Ok(Box::new(RealLock {
            file: Some(file),
            id,
        }))
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
