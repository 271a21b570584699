//! Durability for the in-memory engine: a redo log with group commit (`log`), checkpoints
//! taken at a snapshot while writers run (`checkpoint`), the manifest that names the
//! current checkpoint (`manifest`), and recovery (`recovery`). All file access goes
//! through [`crate::fs::FileSystem`].
//!
//! The design note is `docs/design/durability.md` (Definitions / Invariants / Key
//! operations, and the order of every file protocol's writes, syncs and renames).
//!
//! A database directory holds:
//! - `LOCK`: locked while a process has the database open;
//! - `MANIFEST`: the current checkpoint and where replay starts;
//! - `checkpoint-<snapshot>.ckpt`: every table as of a snapshot;
//! - `log-<start LSN>.wal`: the log's segments; `spare-<n>.wal`: files ready to become
//!   segments.

pub(crate) mod checkpoint;
pub(crate) mod codec;
pub(crate) mod log;
pub(crate) mod manifest;
pub(crate) mod record;
pub(crate) mod recovery;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

pub use checkpoint::CheckpointReport;
use log::Log;
use manifest::Manifest;

use crate::error::{Error, Result};
use crate::fs::{DirectoryLock, FileSystem};

/// How durable a commit is when `commit()` returns (a persistent database's
/// [`crate::Options::durability`]).
///
/// | level | a process crash loses | a power loss (or OS crash) loses |
/// |---|---|---|
/// | `Sync` | nothing acknowledged | nothing acknowledged |
/// | `Async { interval }` | at most the last `interval` of commits | at most the last `interval` of commits |
/// | `None` | nothing acknowledged | anything not yet written back by the OS |
///
/// Whatever the level, a crash never corrupts the database or leaves part of a
/// transaction: recovery restores a prefix of the commit order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `commit()` returns only after the log holding the commit is on stable storage
    /// (synced), and a read-only transaction's only after every commit it may have read
    /// is. Concurrent committers share one sync (group commit). The default with a path,
    /// like SQLite's `synchronous=FULL`, redb's `Durability::Immediate` and PostgreSQL's
    /// `synchronous_commit = on`.
    #[default]
    Sync,
    /// `commit()` returns at once; the log is written and synced at least every
    /// `interval` (by a background thread), so a crash loses at most that window of
    /// acknowledged commits, like PostgreSQL's `synchronous_commit = off`.
    Async {
        /// The longest time between a commit and the sync that makes it durable.
        interval: Duration,
    },
    /// `commit()` returns once the log holding the commit is handed to the operating
    /// system; nothing is ever synced (but when a segment fills, and at `close`). Survives
    /// a crash of the process, not of the machine, like SQLite's `synchronous=OFF`.
    None,
}

impl Durability {
    /// The name used in configuration and reports: `sync`, `async`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Async { .. } => "async",
            Durability::None => "none",
        }
    }
}

/// What recovery did when the database was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryStats {
    /// Whether the directory held no database and one was created.
    pub created: bool,
    /// Nanoseconds `open` spent recovering, in all.
    pub nanos: u64,
    /// Of those, loading the checkpoint's rows (into their primary indexes).
    pub checkpoint_load_nanos: u64,
    /// Of those, building the secondary indexes of the checkpoint's rows.
    pub index_build_nanos: u64,
    /// Of those, replaying the log after the checkpoint.
    pub log_replay_nanos: u64,
    /// Rows loaded from the checkpoint.
    pub checkpoint_rows: u64,
    /// Bytes of the checkpoint file loaded.
    pub checkpoint_bytes: u64,
    /// Commit records replayed, and their operations.
    pub log_commits_replayed: u64,
    /// Operations (inserts, updates, deletes) replayed.
    pub log_operations_replayed: u64,
    /// Of the commit records replayed, those below the checkpoint's snapshot (appended
    /// while it began), which the checkpoint may hold already: applied idempotently.
    pub log_commits_below_checkpoint: u64,
    /// Threads the log replay ran on (each applying the operations of its share of the
    /// rows).
    pub log_replay_threads: u32,
    /// Bytes of log read.
    pub log_bytes_read: u64,
    /// Whether the log ended in a torn record (a write a crash interrupted, never
    /// acknowledged), which recovery cut off.
    pub torn_tail: bool,
    /// Whether the newest log segment's creation had been interrupted (no whole header:
    /// nothing was ever written into it), and recovery removed it.
    pub unfinished_segment_removed: bool,
}

impl RecoveryStats {
    /// Rows restored per second: checkpoint rows and replayed operations over the whole
    /// recovery time.
    pub fn rows_per_second(&self) -> f64 {
        let rows = (self.checkpoint_rows + self.log_operations_replayed) as f64;
        if self.nanos == 0 {
            0.0
        } else {
            rows * 1e9 / self.nanos as f64
        }
    }
}

/// A log's own counters (its durability, bytes, commit records, writes, syncs, positions
/// and segments) in [`DurabilityStats`], checkpoints and recovery left to the caller: the
/// in-memory engine's persistence and the disk engine's page log share the log.
pub(crate) fn log_stats(log: &Log) -> DurabilityStats {
    let counters = &log.counters;
    DurabilityStats {
        durability: log.durability(),
        log_bytes: counters.bytes_appended.load(Ordering::Relaxed),
        log_commits: counters.commit_records.load(Ordering::Relaxed),
        log_writes: counters.writes.load(Ordering::Relaxed),
        log_syncs: counters.syncs.load(Ordering::Relaxed),
        log_sync_nanos: counters.sync_nanos.load(Ordering::Relaxed),
        log_tail: log.tail(),
        log_written: log.written(),
        log_durable: log.durable(),
        log_segments_created: counters.segments_created.load(Ordering::Relaxed),
        log_segments_recycled: counters.segments_recycled.load(Ordering::Relaxed),
        ..DurabilityStats::default()
    }
}

/// The log's and checkpoints' counters, in [`crate::Stats::durability`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DurabilityStats {
    /// The durability level.
    pub durability: Durability,
    /// Bytes appended to the log (records, framing and padding).
    pub log_bytes: u64,
    /// Commit (and table creation) records appended.
    pub log_commits: u64,
    /// Writes of batches to a segment.
    pub log_writes: u64,
    /// Syncs of a segment (each makes a batch of commits durable).
    pub log_syncs: u64,
    /// Nanoseconds spent in those syncs.
    pub log_sync_nanos: u64,
    /// The log's tail, and how far it is written and synced (LSNs).
    pub log_tail: u64,
    /// LSNs below this are handed to the operating system.
    pub log_written: u64,
    /// LSNs below this are synced.
    pub log_durable: u64,
    /// Segments started, and segments recycled after a checkpoint covered them.
    pub log_segments_created: u64,
    /// Segments renamed into spares after a checkpoint covered them.
    pub log_segments_recycled: u64,
    /// Checkpoints completed since open.
    pub checkpoints: u64,
    /// Nanoseconds those checkpoints took, in all.
    pub checkpoint_nanos: u64,
    /// The last checkpoint, if any completed since open.
    pub last_checkpoint: Option<CheckpointReport>,
    /// Whether a checkpoint is being taken at this moment (its snapshot held).
    pub checkpoint_running: bool,
    /// What recovery did at open.
    pub recovery: RecoveryStats,
}

/// An I/O error as Verso reports it: the file, what it was doing, the OS's words.
pub(crate) fn io_error(path: &Path, operation: &'static str, error: &std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        operation,
        kind: error.kind(),
        message: error.to_string(),
    }
}

/// The settings of a persistent database, from [`crate::Options`].
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) dir: PathBuf,
    pub(crate) durability: Durability,
    pub(crate) segment_bytes: u64,
    pub(crate) preallocate: bool,
    /// Whether the flusher thread serves deferred commits (`Options::log_flush_thread`).
    pub(crate) flush_thread: bool,
    /// How many log syncs may be in flight at once (`Options::log_syncs_in_flight`).
    pub(crate) syncs_in_flight: usize,
    pub(crate) checkpoint_after_log_bytes: Option<u64>,
    pub(crate) recovery_threads: usize,
    pub(crate) log_replay_threads: usize,
    pub(crate) planted_bug: Option<crate::PlantedBug>,
}

impl Settings {
    /// Whether directories are synced after entries change in them (always, but under a
    /// planted bug).
    pub(crate) fn syncs_directories(&self) -> bool {
        self.planted_bug != Some(crate::PlantedBug::RenameWithoutDirectorySync)
    }
}

/// The automatic checkpoint policy's bound on checkpoint bytes written per byte of log
/// (`Persistence::wants_checkpoint`).
pub(crate) const CHECKPOINT_BYTES_PER_LOG_BYTE: u64 = 4;

/// The state of an open persistent database beside its engine.
pub(crate) struct Persistence {
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) dir: PathBuf,
    pub(crate) log: Arc<Log>,
    lock: Mutex<Option<Box<dyn DirectoryLock>>>,
    pub(crate) manifest: Mutex<Manifest>,
    /// Held by a checkpoint from start to end: one at a time.
    pub(crate) checkpoint_lock: Mutex<()>,
    /// The log position the current checkpoint covers up to.
    pub(crate) checkpointed_from: AtomicU64,
    /// The current checkpoint file's size (0 without one): the automatic policy's
    /// threshold grows with it.
    pub(crate) checkpoint_bytes: AtomicU64,
    checkpoints: Mutex<(u64, u64, Option<CheckpointReport>)>,
    pub(crate) recovery: RecoveryStats,
    pub(crate) settings: Settings,
    closed: AtomicBool,
}

impl std::fmt::Debug for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistence")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Persistence {
    pub(crate) fn record_checkpoint(&self, report: CheckpointReport) {
        let mut checkpoints = self.checkpoints.lock();
        checkpoints.0 += 1;
        checkpoints.1 += report.nanos;
        checkpoints.2 = Some(report);
    }

    pub(crate) fn stats(&self) -> DurabilityStats {
        let (checkpoints, checkpoint_nanos, last_checkpoint) = *self.checkpoints.lock();
        DurabilityStats {
            checkpoints,
            checkpoint_nanos,
            last_checkpoint,
            checkpoint_running: self.checkpoint_lock.is_locked(),
            recovery: self.recovery,
            ..log_stats(&self.log)
        }
    }

    /// Whether the automatic policy wants a checkpoint now: the log grew since the
    /// current checkpoint's position by its threshold, or by a quarter of the current
    /// checkpoint's size if that is more. A checkpoint rewrites the whole database, so a
    /// fixed threshold would rewrite a large one back to back (a 3 GiB TPC-C database was
    /// checkpointed for 18 s of every 20 at 256 MiB); scaled, checkpoints write at most
    /// four bytes per byte of log, and recovery replays at most a quarter of the
    /// checkpoint's size of log after loading it.
    pub(crate) fn wants_checkpoint(&self) -> bool {
        self.settings
            .checkpoint_after_log_bytes
            .is_some_and(|bytes| {
                let threshold = bytes.max(
                    self.checkpoint_bytes.load(Ordering::Relaxed) / CHECKPOINT_BYTES_PER_LOG_BYTE,
                );
                self.log.tail() - self.checkpointed_from.load(Ordering::Acquire) >= threshold
            })
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Makes everything committed durable, stops accepting work, and releases the
    /// directory. Idempotent.
    pub(crate) fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let flushed = self.log.flush(true);
        self.log.close();
        // A checkpoint running now stops at its next block (the closed log says so) and
        // removes its file; only then is the directory released, so that nothing of this
        // process writes into it once another may have opened it.
        drop(self.checkpoint_lock.lock());
        self.lock.lock().take();
        flushed
    }
}

impl Drop for Persistence {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::Acquire) {
            // The last handle went away without `close`: write and sync what is buffered,
            // as `close` (a clean shutdown) would.
            let _ = self.log.flush(true);
            self.log.close();
        }
    }
}

/// Starts the background threads a persistent database needs: the `Async` interval's
/// syncs, the flusher that makes deferred commits durable (`Sync`, `None`), the segment
/// preparer, and the automatic checkpointer (`checkpoint` runs one).
pub(crate) fn spawn_threads(
    persistence: &Arc<Persistence>,
    checkpoint: impl Fn() -> Option<Result<()>> + Send + 'static,
) -> Result<()> {
    let spawn = |name: &str, body: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(body)
            .map(drop)
            .map_err(|error| Error::UnsupportedConfiguration {
                reason: format!("cannot start the {name} thread: {error}"),
            })
    };
    if let Durability::Async { interval } = persistence.settings.durability {
        let weak = Arc::downgrade(persistence);
        spawn(
            "verso-log-sync",
            Box::new(move || loop {
                std::thread::sleep(interval);
                let Some(persistence) = weak.upgrade() else {
                    return;
                };
                if persistence.is_closed() || persistence.log.flush(true).is_err() {
                    return;
                }
            }),
        )?;
    }
    if persistence.settings.flush_thread
        && !matches!(persistence.settings.durability, Durability::Async { .. })
    {
        // Hold the log, not the database: dropping the database closes the log, which
        // wakes these threads to end (the directory's lock is released with the database).
        // Under `Sync` one per sync that may be in flight: a flusher blocks in its sync
        // while the next one writes and syncs what was appended meanwhile.
        let flushers = match persistence.settings.durability {
            Durability::Sync => persistence.settings.syncs_in_flight.max(1),
            _ => 1,
        };
        for _ in 0..flushers {
            let log = Arc::clone(&persistence.log);
            spawn(
                "verso-log-flush",
                Box::new(move || while log.serve_flush_request(Duration::from_millis(100)) {}),
            )?;
        }
    }
    if persistence.settings.preallocate {
        let fs = Arc::clone(&persistence.fs);
        let dir = persistence.dir.clone();
        let segment_bytes = persistence.settings.segment_bytes;
        let spares = persistence.log.spares();
        spawn(
            "verso-log-prepare",
            Box::new(move || log::run_preparer(fs, dir, segment_bytes, spares)),
        )?;
    }
    if persistence.settings.checkpoint_after_log_bytes.is_some() {
        spawn(
            "verso-checkpoint",
            Box::new(move || loop {
                std::thread::sleep(Duration::from_millis(100));
                // `None`: the database is gone or closed. A failed checkpoint leaves the
                // previous one and the log intact: the next round tries again; a failure
                // of the log itself reaches users through the log's state.
                if checkpoint().is_none() {
                    return;
                }
            }),
        )?;
    }
    Ok(())
}

/// The directory's lock, its manifest (`None`: a new database) and its file names.
pub(crate) type OpenedDirectory = (Box<dyn DirectoryLock>, Option<Manifest>, Vec<String>);

/// Opens or creates the database directory: the lock, the manifest, leftovers of
/// interrupted work. Returns the lock and the manifest (`None`: a new database).
pub(crate) fn open_directory(settings: &Settings) -> Result<OpenedDirectory> {
    let fs = &*settings.fs;
    let dir = &settings.dir;
    let lock = lock_directory(fs, dir)?;
    let manifest = manifest::read(fs, dir)?;
    let names = fs
        .list_dir(dir)
        .map_err(|error| io_error(dir, "listing the database directory", &error))?;
    if names.iter().any(|name| name == crate::pmem::REGION_FILE) {
        // Opening would start a log beside a region nothing here reads.
        return Err(Error::UnsupportedConfiguration {
            reason: format!(
                "{} holds a database of a persistent-memory storage (its region file {}): \
                 open it with that storage (tile-block)",
                dir.display(),
                crate::pmem::REGION_FILE
            ),
        });
    }
    Ok((lock, manifest, names))
}

/// Creates `dir` if needed and takes its lock (`LOCK`): a second open of it, in this
/// process or another, gets [`Error::DatabaseLocked`] while the lock is held.
pub(crate) fn lock_directory(
    fs: &dyn FileSystem,
    dir: &Path,
) -> Result<Box<dyn crate::fs::DirectoryLock>> {
    fs.create_dir_all(dir)
        .map_err(|error| io_error(dir, "creating the database directory", &error))?;
    let lock_path = dir.join("LOCK");
    fs.lock(&lock_path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::WouldBlock {
            Error::DatabaseLocked {
                path: dir.display().to_string(),
            }
        } else {
            io_error(&lock_path, "locking the database directory", &error)
        }
    })
}

/// Removes a file if it exists.
pub(crate) fn remove_if_present(fs: &dyn FileSystem, path: &Path) -> Result<()> {
    match fs.remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io_error(path, "removing a leftover file", &error)),
    }
}

impl Persistence {
    pub(crate) fn new(
        settings: Settings,
        lock: Box<dyn DirectoryLock>,
        log: Log,
        manifest: Manifest,
        recovery: RecoveryStats,
    ) -> Self {
        Persistence {
            fs: Arc::clone(&settings.fs),
            dir: settings.dir.clone(),
            log: Arc::new(log),
            lock: Mutex::new(Some(lock)),
            checkpointed_from: AtomicU64::new(manifest.log_from),
            checkpoint_bytes: AtomicU64::new(recovery.checkpoint_bytes),
            manifest: Mutex::new(manifest),
            checkpoint_lock: Mutex::new(()),
            checkpoints: Mutex::new((0, 0, None)),
            recovery,
            settings,
            closed: AtomicBool::new(false),
        }
    }
}
