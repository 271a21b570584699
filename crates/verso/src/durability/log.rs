//! The write-ahead (redo) log: an in-memory buffer committers copy their records into, and
//! segment files a *leader* writes and syncs for everyone waiting (group commit).
//!
//! # The commit protocol (what `engine::txn` does with it)
//!
//! 1. Before its commit timestamp is visible to anyone, a committing transaction copies its
//!    framed record into the buffer ([`Log::append`]): a memory copy under a mutex, never
//!    a wait on I/O, because readers and first-updater-wins writers may be waiting on the
//!    committing transaction.
//! 2. Its commit becomes visible.
//! 3. Before `commit()` returns, it waits until the log holding its record is as durable as
//!    the database's [`Durability`] promises ([`Log::acknowledge`]). The first waiter that
//!    finds no leader becomes the leader: it takes everything buffered, writes it to the
//!    current segment, syncs it, and wakes the others. Those whose records were in the
//!    batch return; one of the rest leads the next batch. No thread of the log's own
//!    takes a core from the workers.
//!
//! A record appended after another is durable only if the other is: the stream is written
//! and synced in order. So a transaction that read a commit (visible, hence appended
//! before) and then commits has a record after it; a read-only transaction waits for the
//! end of the last commit record appended when it commits ([`Log::commits_end`]).
//!
//! # Invariants
//! - `durable <= written <= tail`: bytes below `durable` are synced, below `written` are
//!   handed to the operating system, below `tail` are in the stream.
//! - Only the holder of `io` writes or syncs a segment; batches are written in LSN order.
//! - A segment is synced whole before its successor is created (so a successor proves its
//!   predecessor whole), and a new segment's header and directory entry are synced before
//!   any record is written into it.
//! - After any failed write or sync the log is *failed*: nothing more is appended, no
//!   waiter is told its record is durable, and no sync is retried (a failed fsync may have
//!   dropped the data it was to write; PostgreSQL's lesson of 2018).
//!
//! # Segment files
//!
//! `log-<start LSN, 16 hex digits>.wal`: a 512-byte header (magic, format version, start
//! LSN, CRC) in its own sector, then records (`durability::record`), record LSN `l` at
//! offset `512 + l - start`. Spare files (`spare-<n>.wal`), zero-filled ahead of time or
//! recycled from segments a checkpoint covers, become segments by a rename: overwriting
//! allocated blocks syncs about twice as fast here as appending to a growing file
//! (`docs/design/durability.md`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::durability::record::{self, FramedRecord};
use crate::durability::{io_error, Durability, Settings};
use crate::error::{Error, Result};
use crate::fs::{File, FileSystem, OpenMode};

/// Bytes of a segment's header.
pub(crate) const SEGMENT_HEADER_BYTES: u64 = 512;
/// What every write of the log ends with, after its records: a zero record header, which
/// the next write overwrites. A log whose last write arrived whole ends in it, so recovery
/// tells a clean end from a torn write (`record::ScanEnd`).
pub(crate) const END_MARKER: [u8; record::HEADER_BYTES] = [0; record::HEADER_BYTES];
const SEGMENT_MAGIC: &[u8; 8] = b"VERSOLOG";
/// The log's format version; files of another version are refused.
pub(crate) const LOG_FORMAT_VERSION: u32 = 1;
/// Above this many buffered bytes a committer under `Async` writes the buffer itself
/// instead of leaving it to the interval.
const MAX_BUFFERED_BYTES: usize = 64 << 20;

/// A segment's file name.
pub(crate) fn segment_name(start_lsn: u64) -> String {
    format!("log-{start_lsn:016x}.wal")
}

/// The start LSN of a segment file name, if it is one.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("log-")?.strip_suffix(".wal")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

pub(crate) fn is_spare_name(name: &str) -> bool {
    name.starts_with("spare-") && name.ends_with(".wal")
}

/// The header of a segment whose records start at `start_lsn` and whose predecessor's
/// records end at `previous_end` (equal, except after a recovery: see [`Log::start`]).
pub(crate) fn segment_header(start_lsn: u64, previous_end: u64) -> Vec<u8> {
    debug_assert!(previous_end <= start_lsn);
    let mut header = Vec::with_capacity(SEGMENT_HEADER_BYTES as usize);
    header.extend_from_slice(SEGMENT_MAGIC);
    header.extend_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
    header.extend_from_slice(&start_lsn.to_le_bytes());
    header.extend_from_slice(&previous_end.to_le_bytes());
    let crc = crc32c::crc32c(&header);
    header.extend_from_slice(&crc.to_le_bytes());
    header.resize(SEGMENT_HEADER_BYTES as usize, 0);
    header
}

/// Why a segment's header is not one of this version's.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BadHeader {
    /// Not a header at all (wrong magic, bad checksum, too short).
    Invalid(&'static str),
    /// A valid header of another format version.
    Version(u32),
}

/// What a segment's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    pub(crate) start: u64,
    pub(crate) previous_end: u64,
}

/// Checks a segment's header.
pub(crate) fn parse_segment_header(bytes: &[u8]) -> std::result::Result<SegmentHeader, BadHeader> {
    if bytes.len() < 32 {
        return Err(BadHeader::Invalid("shorter than a segment header"));
    }
    if &bytes[..8] != SEGMENT_MAGIC {
        return Err(BadHeader::Invalid(
            "not a Verso log segment (wrong magic bytes)",
        ));
    }
    let crc = u32::from_le_bytes(bytes[28..32].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..28]) != crc {
        return Err(BadHeader::Invalid(
            "the segment header's checksum does not match",
        ));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != LOG_FORMAT_VERSION {
        return Err(BadHeader::Version(version));
    }
    let start = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let previous_end = u64::from_le_bytes(bytes[20..28].try_into().expect("8 bytes"));
    if previous_end > start || start % record::ALIGN as u64 != 0 {
        return Err(BadHeader::Invalid(
            "the segment header's positions are inconsistent",
        ));
    }
    Ok(SegmentHeader {
        start,
        previous_end,
    })
}

/// How far a waiter needs the log to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reached {
    /// Handed to the operating system (survives the process, not a power loss).
    Written,
    /// Synced to stable storage.
    Durable,
}

/// Counters of the log, read by `Database::stats`.
#[derive(Debug, Default)]
pub(crate) struct LogCounters {
    pub(crate) bytes_appended: AtomicU64,
    pub(crate) commit_records: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) sync_nanos: AtomicU64,
    pub(crate) segments_created: AtomicU64,
    pub(crate) segments_recycled: AtomicU64,
}

struct Appender {
    /// Framed records not yet taken by a leader; `buffer_start` is the LSN of its first byte.
    buffer: Vec<u8>,
    buffer_start: u64,
    /// The end of the last commit (or catalog) record appended.
    commits_end: u64,
    /// The largest LSN a sync point in the stream has vouched for.
    vouched: u64,
}

struct OpenSegment {
    file: Box<dyn File>,
    path: PathBuf,
    start: u64,
    /// The LSN after the last byte written into it.
    end: u64,
    /// Whether the preparer was asked for a spare to follow this segment.
    asked_for_spare: bool,
}

struct Io {
    segment: OpenSegment,
    /// Segments before the current one, oldest first: (start LSN, path).
    sealed: Vec<(u64, PathBuf)>,
    /// An emptied batch buffer, swapped with the appender's.
    spare_buffer: Vec<u8>,
}

/// The log of one database.
pub(crate) struct Log {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    durability: Durability,
    segment_bytes: u64,
    /// False only under a planted bug (`crate::PlantedBug`).
    sync_dirs: bool,
    /// True only under a planted bug.
    acknowledge_before_sync: bool,
    append: Mutex<Appender>,
    io: Mutex<Io>,
    written: AtomicU64,
    durable: AtomicU64,
    progress: Mutex<()>,
    progressed: Condvar,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Set by `Database::close`: every later use fails with `DatabaseClosed`.
    closed: AtomicBool,
    /// A deferred commit asked the flusher to write (and under `Sync`, sync) the log.
    /// Invariant: set before `flush_request` is taken to notify, so the flusher, which
    /// checks it under `flush_request` before waiting, never misses a request.
    flush_wanted: AtomicBool,
    flush_request: Mutex<()>,
    flush_requested: Condvar,
    pub(crate) counters: LogCounters,
    spares: Arc<Spares>,
}

/// Zero-filled or recycled files ready to become segments, and the preparer's wake-up.
pub(crate) struct Spares {
    files: Mutex<Vec<PathBuf>>,
    wanted: Condvar,
    next_number: AtomicU64,
    /// Set by the leader when the current segment is half full and no spare is ready.
    requested: AtomicBool,
    stop: AtomicBool,
}

impl Log {
    /// Opens the log for appending: a new segment begins at `start_lsn`, its header saying
    /// that the records before it end at `previous_end`.
    ///
    /// After a recovery `previous_end` is where the valid records of the last segment end,
    /// and `start_lsn` lies beyond it: no LSN at or after a cut is ever used again, so the
    /// bytes the cut left behind in the old segment (a torn batch, possibly with whole
    /// records after its torn part) can never be read as part of the stream; recovery reads
    /// a segment only up to its successor's `previous_end`.
    /// `sealed` lists the segments before it that recovery found, oldest first.
    pub(crate) fn start(
        settings: &Settings,
        start_lsn: u64,
        previous_end: u64,
        sealed: Vec<(u64, PathBuf)>,
        spare_files: Vec<PathBuf>,
    ) -> Result<Self> {
        let fs = Arc::clone(&settings.fs);
        let dir = &settings.dir;
        let sync_dirs = settings.syncs_directories();
        debug_assert_eq!(start_lsn % record::ALIGN as u64, 0);
        let spares = Arc::new(Spares {
            files: Mutex::new(spare_files),
            wanted: Condvar::new(),
            next_number: AtomicU64::new(0),
            requested: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let segment = open_new_segment(&*fs, dir, start_lsn, previous_end, &spares, sync_dirs)?;
        Ok(Log {
            fs,
            dir: dir.to_path_buf(),
            durability: settings.durability,
            segment_bytes: settings.segment_bytes,
            sync_dirs,
            acknowledge_before_sync: settings.planted_bug
                == Some(crate::PlantedBug::AcknowledgeBeforeSync),
            append: Mutex::new(Appender {
                buffer: Vec::new(),
                buffer_start: start_lsn,
                commits_end: start_lsn,
                vouched: start_lsn,
            }),
            io: Mutex::new(Io {
                segment,
                sealed,
                spare_buffer: Vec::new(),
            }),
            written: AtomicU64::new(start_lsn),
            durable: AtomicU64::new(start_lsn),
            progress: Mutex::new(()),
            progressed: Condvar::new(),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            closed: AtomicBool::new(false),
            flush_wanted: AtomicBool::new(false),
            flush_request: Mutex::new(()),
            flush_requested: Condvar::new(),
            counters: LogCounters::default(),
            spares,
        })
    }

    pub(crate) fn durability(&self) -> Durability {
        self.durability
    }

    /// `Err(DurabilityLost)` once a write or sync failed, `Err(DatabaseClosed)` once the
    /// database was closed.
    pub(crate) fn check(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.lost());
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::DatabaseClosed);
        }
        Ok(())
    }

    /// Refuses all further work (the database was closed) and stops the preparer.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.spares.stop.store(true, Ordering::Release);
        self.spares.wanted.notify_all();
        self.notify();
        let _guard = self.flush_request.lock();
        self.flush_requested.notify_all();
    }

    fn lost(&self) -> Error {
        Error::DurabilityLost {
            reason: self
                .failure
                .lock()
                .clone()
                .unwrap_or_else(|| "the log failed".into()),
        }
    }

    /// Marks the log failed (first reason wins) and wakes every waiter.
    pub(crate) fn fail(&self, reason: String) -> Error {
        {
            let mut failure = self.failure.lock();
            if failure.is_none() {
                *failure = Some(reason);
            }
        }
        self.failed.store(true, Ordering::Release);
        let _guard = self.progress.lock();
        self.progressed.notify_all();
        self.lost()
    }

    /// Copies a record into the stream; returns the LSN after it. Fails only when the log
    /// has failed. A memory copy under the append mutex: never waits on I/O.
    pub(crate) fn append(&self, record: &mut FramedRecord, is_commit: bool) -> Result<u64> {
        self.check()?;
        let mut appender = self.append.lock();
        let lsn = appender.buffer_start + appender.buffer.len() as u64;
        let bytes = record.frame(lsn);
        appender.buffer.extend_from_slice(bytes);
        let end = lsn + bytes.len() as u64;
        if is_commit {
            appender.commits_end = end;
        }
        drop(appender);
        self.counters
            .bytes_appended
            .fetch_add(record.len() as u64, Ordering::Relaxed);
        if is_commit {
            self.counters.commit_records.fetch_add(1, Ordering::Relaxed);
        }
        Ok(end)
    }

    /// The LSN after the last byte appended.
    pub(crate) fn tail(&self) -> u64 {
        let appender = self.append.lock();
        appender.buffer_start + appender.buffer.len() as u64
    }

    /// The end of the last commit or catalog record appended: what a read-only transaction
    /// committing now may have read.
    pub(crate) fn commits_end(&self) -> u64 {
        self.append.lock().commits_end
    }

    /// Runs `f` with the append mutex held: nothing is appended meanwhile (a checkpoint
    /// takes its snapshot and log position in one such step; a table is created and
    /// logged in one). `f` gets the tail.
    pub(crate) fn with_appends_stopped<R>(&self, f: impl FnOnce(u64) -> R) -> R {
        let appender = self.append.lock();
        f(appender.buffer_start + appender.buffer.len() as u64)
    }

    /// Appends a record while the caller holds the appends stopped (from inside
    /// [`Log::with_appends_stopped`] this would deadlock; use the returned closure form
    /// instead): appends `record` as part of the same step as `f`.
    pub(crate) fn append_with<R>(
        &self,
        f: impl FnOnce() -> Result<(R, Option<FramedRecord>)>,
    ) -> Result<(R, u64)> {
        self.check()?;
        let mut appender = self.append.lock();
        let (result, record) = f()?;
        let mut end = appender.buffer_start + appender.buffer.len() as u64;
        if let Some(mut record) = record {
            let bytes = record.frame(end);
            appender.buffer.extend_from_slice(bytes);
            end += bytes.len() as u64;
            appender.commits_end = end;
            self.counters
                .bytes_appended
                .fetch_add(record.len() as u64, Ordering::Relaxed);
        }
        Ok((result, end))
    }

    /// Waits until the record ending at `end` is as safe as the durability level promises
    /// before a commit returns: synced (`Sync`), handed to the operating system (`None`),
    /// or nothing (`Async`, unless the buffer grew too large).
    pub(crate) fn acknowledge(&self, end: u64) -> Result<()> {
        match self.durability {
            Durability::Sync if self.acknowledge_before_sync => {
                self.wait_for(end, Reached::Written)
            }
            Durability::Sync => self.wait_for(end, Reached::Durable),
            Durability::None => self.wait_for(end, Reached::Written),
            Durability::Async { .. } => {
                self.check()?;
                if self.buffered() > MAX_BUFFERED_BYTES {
                    self.wait_for(end, Reached::Written)?;
                }
                Ok(())
            }
        }
    }

    /// Asks the flusher thread to write what is appended (and under `Sync`, sync it),
    /// without waiting: a deferred commit's way to become durable while its thread runs
    /// the next transaction. Requests made while a flush runs are served by the next one,
    /// which takes everything appended by then (group commit with no committer waiting).
    /// Under `Async` the interval's thread does this already.
    pub(crate) fn request_flush(&self) {
        if matches!(self.durability, Durability::Async { .. }) {
            return;
        }
        if !self.flush_wanted.swap(true, Ordering::AcqRel) {
            let _guard = self.flush_request.lock();
            self.flush_requested.notify_one();
        }
    }

    /// The flusher thread's round: waits up to `timeout` for a request, then serves it
    /// (one write, and a sync under `Sync`, of everything appended). False once the log
    /// is closed or failed: the thread ends.
    pub(crate) fn serve_flush_request(&self, timeout: Duration) -> bool {
        {
            let mut guard = self.flush_request.lock();
            if !self.flush_wanted.load(Ordering::Acquire) && self.check().is_ok() {
                self.flush_requested.wait_for(&mut guard, timeout);
            }
        }
        if self.check().is_err() {
            return false;
        }
        if !self.flush_wanted.swap(false, Ordering::AcqRel) {
            return true;
        }
        let level = match self.durability {
            Durability::Sync => Reached::Durable,
            _ => Reached::Written,
        };
        // A committer that led a flush since the request may have covered it already.
        if self.reached(level) < self.tail() {
            return self.flush(level == Reached::Durable).is_ok();
        }
        true
    }

    /// Whether the record ending at `end` is as safe as [`Log::acknowledge`] waits for.
    pub(crate) fn is_acknowledged(&self, end: u64) -> bool {
        match self.durability {
            Durability::Sync => self.durable.load(Ordering::Acquire) >= end,
            Durability::None => self.written.load(Ordering::Acquire) >= end,
            Durability::Async { .. } => true,
        }
    }

    fn buffered(&self) -> usize {
        self.append.lock().buffer.len()
    }

    fn reached(&self, level: Reached) -> u64 {
        match level {
            Reached::Written => self.written.load(Ordering::Acquire),
            Reached::Durable => self.durable.load(Ordering::Acquire),
        }
    }

    fn wait_for(&self, target: u64, level: Reached) -> Result<()> {
        loop {
            self.check()?;
            if self.reached(level) >= target {
                return Ok(());
            }
            if let Some(mut io) = self.io.try_lock() {
                if self.reached(level) < target {
                    let flushed = self.flush_locked(&mut io, level == Reached::Durable);
                    drop(io);
                    self.notify();
                    flushed?;
                } else {
                    drop(io);
                }
                continue;
            }
            // A leader is at work: wait for it. It releases `io` before it notifies, under
            // `progress`; so if `io` is free here, its notification is already past and we
            // try to lead instead of waiting for one that will not come.
            let mut guard = self.progress.lock();
            if self.reached(level) >= target || self.failed.load(Ordering::Acquire) {
                continue;
            }
            if self.io.is_locked() {
                self.progressed
                    .wait_for(&mut guard, Duration::from_millis(50));
            }
        }
    }

    fn notify(&self) {
        let _guard = self.progress.lock();
        self.progressed.notify_all();
    }

    /// Writes everything appended so far and, if `sync`, syncs it: for the `Async`
    /// interval, a checkpoint, and closing.
    pub(crate) fn flush(&self, sync: bool) -> Result<()> {
        self.check()?;
        let mut io = self.io.lock();
        let flushed = self.flush_locked(&mut io, sync);
        drop(io);
        self.notify();
        flushed
    }

    /// The leader's work: take the buffer, write it, sync it if asked. Any failure fails
    /// the log.
    fn flush_locked(&self, io: &mut Io, sync: bool) -> Result<()> {
        // Checked again under the I/O lock: a flush that failed (and failed the log) held
        // it last, had taken its batch, and wrote none of it; anything written now would
        // lie past that hole (`regression_a_flush_after_another_flush_failed_writes_nothing`).
        // Every failure of a write or sync is declared while the lock is held.
        if self.failed.load(Ordering::Acquire) {
            return Err(self.lost());
        }
        let (start, batch) = {
            let mut appender = self.append.lock();
            // A sync point vouches for what earlier batches made durable, so that recovery
            // can tell a torn tail from lost durable bytes (`record::ScanEnd`).
            let durable = self.durable.load(Ordering::Acquire);
            if self.durability != Durability::None
                && !appender.buffer.is_empty()
                && durable > appender.vouched
            {
                let mut point = FramedRecord::with_body(&record::sync_point_body(durable));
                let lsn = appender.buffer_start + appender.buffer.len() as u64;
                let bytes = point.frame(lsn);
                appender.buffer.extend_from_slice(bytes);
                appender.vouched = durable;
            }
            let start = appender.buffer_start;
            std::mem::swap(&mut appender.buffer, &mut io.spare_buffer);
            appender.buffer_start += io.spare_buffer.len() as u64;
            (start, std::mem::take(&mut io.spare_buffer))
        };
        let mut batch = batch;
        let records = batch.len();
        if records > 0 {
            batch.extend_from_slice(&END_MARKER);
        }
        let result = self.write_batch(io, start, &batch, records, sync);
        batch.clear();
        io.spare_buffer = batch;
        result
    }

    /// Writes `batch` (its first `records` bytes are records, the rest the end marker) at
    /// LSN `start`.
    fn write_batch(
        &self,
        io: &mut Io,
        start: u64,
        batch: &[u8],
        records: usize,
        sync: bool,
    ) -> Result<()> {
        debug_assert_eq!(start, self.written.load(Ordering::Acquire));
        if records > 0 {
            if io.segment.end - io.segment.start >= self.segment_bytes {
                self.rotate(io, start)?;
            }
            let segment = &mut io.segment;
            debug_assert_eq!(segment.end, start);
            let offset = SEGMENT_HEADER_BYTES + (start - segment.start);
            if let Err(error) = segment.file.write_all_at(batch, offset) {
                return Err(self.fail(format!(
                    "writing {} bytes at offset {offset} of {}: {error}",
                    batch.len(),
                    segment.path.display()
                )));
            }
            segment.end = start + records as u64;
            if !segment.asked_for_spare && segment.end - segment.start > self.segment_bytes / 2 {
                segment.asked_for_spare = true;
                if self.spares.files.lock().is_empty() {
                    self.spares.requested.store(true, Ordering::Release);
                    self.spares.wanted.notify_one();
                }
            }
            self.counters.writes.fetch_add(1, Ordering::Relaxed);
            self.written.store(segment.end, Ordering::Release);
        }
        let written = self.written.load(Ordering::Acquire);
        if sync && self.durable.load(Ordering::Acquire) < written {
            let began = Instant::now();
            if let Err(error) = io.segment.file.sync_data() {
                return Err(self.fail(format!("syncing {}: {error}", io.segment.path.display())));
            }
            self.counters
                .sync_nanos
                .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
            self.durable.store(written, Ordering::Release);
        }
        Ok(())
    }

    /// Seals the current segment (synced whole) and opens the next at `start`.
    fn rotate(&self, io: &mut Io, start: u64) -> Result<()> {
        if let Err(error) = io.segment.file.sync_data() {
            return Err(self.fail(format!(
                "syncing {} before starting the next segment: {error}",
                io.segment.path.display()
            )));
        }
        if self.durability != Durability::None {
            // Everything written is synced now (the batch about to be written starts here).
            self.durable.store(start, Ordering::Release);
        }
        let next = open_new_segment(
            &*self.fs,
            &self.dir,
            start,
            start,
            &self.spares,
            self.sync_dirs,
        )
        .map_err(|error| self.fail(error.to_string()))?;
        self.counters
            .segments_created
            .fetch_add(1, Ordering::Relaxed);
        let old = std::mem::replace(&mut io.segment, next);
        io.sealed.push((old.start, old.path));
        Ok(())
    }

    /// Removes (or keeps as spares) the sealed segments whose every record lies below
    /// `lsn`: what a checkpoint covering the log up to `lsn` made unnecessary. The
    /// directory is not synced: a removal that does not survive a crash leaves a segment
    /// recovery skips (it lies below the manifest's position).
    pub(crate) fn release_below(&self, lsn: u64) -> Result<()> {
        let covered: Vec<PathBuf> = {
            let mut io = self.io.lock();
            let current_start = io.segment.start;
            let mut covered = Vec::new();
            // A sealed segment ends where the next begins.
            let starts: Vec<u64> = io
                .sealed
                .iter()
                .map(|(start, _)| *start)
                .skip(1)
                .chain(std::iter::once(current_start))
                .collect();
            let mut keep = Vec::new();
            for ((start, path), end) in io.sealed.drain(..).zip(starts) {
                if end <= lsn {
                    covered.push(path);
                } else {
                    keep.push((start, path));
                }
            }
            io.sealed = keep;
            covered
        };
        for path in covered {
            let mut spares = self.spares.files.lock();
            if spares.len() < 2 {
                let number = self.spares.next_number.fetch_add(1, Ordering::Relaxed);
                let spare = self.dir.join(format!("spare-r{number}.wal"));
                self.fs
                    .rename(&path, &spare)
                    .map_err(|error| io_error(&path, "recycling a log segment", &error))?;
                spares.push(spare);
                self.counters
                    .segments_recycled
                    .fetch_add(1, Ordering::Relaxed);
            } else {
                drop(spares);
                self.fs
                    .remove_file(&path)
                    .map_err(|error| io_error(&path, "removing a log segment", &error))?;
            }
        }
        Ok(())
    }

    /// LSNs below this are written to the operating system.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// LSNs below this are synced.
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// The preparer's shared state, for its thread.
    pub(crate) fn spares(&self) -> Arc<Spares> {
        Arc::clone(&self.spares)
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .field("durability", &self.durability)
            .field("durable", &self.durable())
            .finish_non_exhaustive()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.spares.stop.store(true, Ordering::Release);
        self.spares.wanted.notify_all();
    }
}

/// Opens a new segment starting at `start`: a spare renamed, or a new file; its header is
/// written and synced, and the directory synced, before it is used.
fn open_new_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    start: u64,
    previous_end: u64,
    spares: &Spares,
    sync_dir: bool,
) -> Result<OpenSegment> {
    let path = dir.join(segment_name(start));
    let spare = spares.files.lock().pop();
    let file = match spare {
        Some(spare) => {
            fs.rename(&spare, &path)
                .map_err(|error| io_error(&spare, "renaming a spare into a log segment", &error))?;
            fs.open(&path, OpenMode::ReadWrite)
        }
        None => fs.open(&path, OpenMode::CreateNew),
    }
    .map_err(|error| io_error(&path, "opening a new log segment", &error))?;
    // The header, then an end marker: a recycled segment's stale bytes never follow it.
    let mut header = segment_header(start, previous_end);
    header.extend_from_slice(&END_MARKER);
    file.write_all_at(&header, 0)
        .and_then(|()| file.sync_data())
        .map_err(|error| io_error(&path, "writing a log segment's header", &error))?;
    if sync_dir {
        fs.sync_dir(dir).map_err(|error| {
            io_error(dir, "syncing the directory after a new log segment", &error)
        })?;
    }
    Ok(OpenSegment {
        file,
        path,
        start,
        end: start,
        asked_for_spare: false,
    })
}

/// The segment preparer: keeps one zero-filled spare ready, so that a new segment is
/// overwritten in place rather than grown (a sync of a growing file also writes its
/// metadata). Runs until the log is dropped. Order: write zeros to `prepare-<n>.tmp`,
/// sync it, rename it to `spare-<n>.wal`, sync the directory.
pub(crate) fn run_preparer(
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    segment_bytes: u64,
    spares: Arc<Spares>,
) {
    let zeros = vec![0u8; 1 << 20];
    loop {
        {
            let mut files = spares.files.lock();
            let stop = || spares.stop.load(Ordering::Acquire);
            while !(stop() || spares.requested.load(Ordering::Acquire) && files.is_empty()) {
                // A recycled segment may have arrived meanwhile: nothing to prepare.
                spares.requested.store(false, Ordering::Release);
                spares.wanted.wait_for(&mut files, Duration::from_secs(1));
            }
            if spares.stop.load(Ordering::Acquire) {
                return;
            }
        }
        let number = spares.next_number.fetch_add(1, Ordering::Relaxed);
        let temporary = dir.join(format!("prepare-{number}.tmp"));
        let spare = dir.join(format!("spare-{number}.wal"));
        let prepared = (|| -> std::io::Result<()> {
            let file = fs.open(&temporary, OpenMode::CreateNew)?;
            let total = SEGMENT_HEADER_BYTES + segment_bytes + (1 << 20);
            let mut at = 0;
            while at < total {
                if spares.stop.load(Ordering::Acquire) {
                    return Err(std::io::Error::other("stopped"));
                }
                let n = zeros.len().min((total - at) as usize);
                file.write_all_at(&zeros[..n], at)?;
                at += n as u64;
            }
            file.sync_data()?;
            fs.rename(&temporary, &spare)?;
            fs.sync_dir(&dir)
        })();
        match prepared {
            Ok(()) => {
                spares.files.lock().push(spare);
                spares.requested.store(false, Ordering::Release);
            }
            Err(_) => {
                // Preparing is an optimization: a segment can always be created instead.
                let _ = fs.remove_file(&temporary);
                if spares.stop.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_segment_header_round_trips_and_is_checked() {
        let header = segment_header(4096, 4000);
        assert_eq!(
            parse_segment_header(&header),
            Ok(SegmentHeader {
                start: 4096,
                previous_end: 4000
            })
        );
        for at in 0..32 {
            let mut bad = header.clone();
            bad[at] ^= 0x10;
            assert!(parse_segment_header(&bad).is_err(), "byte {at}");
        }
        assert_eq!(parse_segment_name(&segment_name(4096)), Some(4096));
        assert_eq!(parse_segment_name("log-12.wal"), None);
    }

    /// Found by CI (`durability::what_the_flusher_made_durable_survives_a_power_loss`, the
    /// debug assertion `start == written` in `write_batch`): a flush that passed `check`
    /// before another flush's write failed, then took the I/O lock after it, went on. The
    /// failed flush had taken its batch (the appender's start moved past it), so the second
    /// one would write its own batch past a hole where the failed batch belonged, after
    /// the log had failed. Once the log has failed, a flush must write and sync nothing.
    #[test]
    fn regression_a_flush_after_another_flush_failed_writes_nothing() {
        use crate::fs::simulated::{Fault, SimulatedFileSystem};
        let fs = SimulatedFileSystem::new(7);
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        let settings = Settings {
            fs: Arc::new(fs.clone()),
            dir,
            durability: Durability::Sync,
            segment_bytes: 1 << 20,
            preallocate: false,
            flush_thread: false,
            checkpoint_after_log_bytes: None,
            recovery_threads: 1,
            planted_bug: None,
        };
        let log = Log::start(&settings, 0, 0, Vec::new(), Vec::new()).unwrap();
        log.append(&mut FramedRecord::with_body(b"first"), true)
            .unwrap();
        fs.fail_after(1, Fault::Eio);
        assert!(log.flush(true).is_err(), "the first flush's write fails");
        assert!(log.check().is_err(), "and the log with it");
        // The second flush passed `check` before the failure; it holds the lock now.
        let before = fs.stats();
        let mut io = log.io.lock();
        assert!(log.flush_locked(&mut io, true).is_err());
        drop(io);
        let after = fs.stats();
        assert_eq!(
            (after.bytes_written, after.file_syncs),
            (before.bytes_written, before.file_syncs),
            "nothing written or synced after the log failed"
        );
        assert_eq!(log.written(), 0);
        assert_eq!(log.durable(), 0);
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_headers_and_names_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), name in ".{0,30}") {
            let _ = parse_segment_header(&bytes);
            let _ = parse_segment_name(&name);
        }
    }
}
