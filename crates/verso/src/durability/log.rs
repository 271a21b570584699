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
//!    current segment, releases the I/O lock, syncs, and wakes the others. Those whose
//!    records were in the batch return; one of the rest leads the next batch. No thread of
//!    the log's own takes a core from the workers.
//!
//! # Overlapping syncs
//!
//! A sync runs outside the I/O lock, so the next leader can write the next batch and start
//! its own sync while the previous one is still in flight: up to
//! [`Settings::syncs_in_flight`] at once (a leader finding them all busy waits for one to
//! finish, holding the I/O lock, and then writes everything appended by then). This disk
//! completes overlapping `fdatasync`s of one file at a higher rate than one at a time
//! (`docs/design/durability.md`, "Decisions"), and with clients waiting on their commits
//! the sync's latency, not its rate, bounds throughput.
//!
//! Linux reports a failed write-back once per *open file description* (errseq): of two
//! syncs through one descriptor only the first to look sees the error, and the other
//! succeeds though pages it waited for were lost. So each sync slot has its own handle of
//! the segment (`OpenSegment::sync_handles`), used by one sync at a time: a sync through
//! it sees every write-back error since that handle's previous sync. And durability is
//! acknowledged *in the order the syncs were issued*: a sync that finished vouches for its
//! batch only once every earlier one finished too, so no batch is acknowledged while an
//! earlier sync, which may yet report its loss, is in flight.
//!
//! A record appended after another is durable only if the other is: the stream is written
//! and synced in order. So a transaction that read a commit (visible, hence appended
//! before) and then commits has a record after it; a read-only transaction waits for the
//! end of the last commit record appended when it commits ([`Log::commits_end`]).
//!
//! # Invariants
//! - `durable <= written <= tail`: bytes below `durable` are synced, below `written` are
//!   handed to the operating system, below `tail` are in the stream.
//! - Only the holder of `io` writes a segment; batches are written in LSN order. Syncs are
//!   issued by the holder of `io` (the target, `written` at that moment, is increasing in
//!   issue order) and run after it is released; `durable` only ever becomes the target of
//!   a sync all of whose predecessors succeeded (`pending_syncs` is that queue), or, at a
//!   rotation with no sync pending, the start of the new segment (the old one synced
//!   whole). `durable <= issued <= written`, where `issued` is the largest target issued.
//! - At most `syncs_in_flight` syncs are pending, no two through the same sync handle;
//!   a segment is rotated only with none pending.
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

use std::collections::VecDeque;
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
/// A written batch's buffer keeps at most this much capacity for the next one: a group
/// of commits needs far less, and a backlog written once (hint images of a read-only scan
/// after a checkpoint, up to [`MAX_BUFFERED_BYTES`]) must not stay resident for the
/// log's lifetime in both swapped buffers.
const KEPT_BUFFER_BYTES: usize = 1 << 20;

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
    /// The handle the leader writes through (and rotation syncs through).
    file: Box<dyn File>,
    /// One handle of the file per sync slot, each used by at most one sync at a time and
    /// shared with it (syncs run without the I/O lock): see "Overlapping syncs".
    sync_handles: Vec<Arc<dyn File>>,
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
    /// The largest target of a sync issued (finished or not).
    issued: AtomicU64,
    /// Syncs issued and not yet acknowledged, in issue order (their targets increase).
    pending_syncs: Mutex<VecDeque<PendingSync>>,
    /// Notified (under `pending_syncs`) whenever a pending sync finishes.
    sync_finished: Condvar,
    /// At most this many syncs are pending at once (at least 1).
    syncs_in_flight: usize,
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

/// A sync issued by a leader: it makes everything written below `target` durable.
#[derive(Clone, Copy, Debug)]
struct PendingSync {
    target: u64,
    /// The index of the sync handle it runs through.
    slot: usize,
    finished: bool,
}

/// A sync a leader issued under the I/O lock and runs after releasing it.
struct SyncJob {
    file: Arc<dyn File>,
    path: PathBuf,
    target: u64,
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
        let syncs_in_flight = settings.syncs_in_flight.max(1);
        let segment = open_new_segment(
            &*fs,
            dir,
            start_lsn,
            previous_end,
            &spares,
            sync_dirs,
            syncs_in_flight,
        )?;
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
            issued: AtomicU64::new(start_lsn),
            pending_syncs: Mutex::new(VecDeque::new()),
            sync_finished: Condvar::new(),
            syncs_in_flight,
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
        {
            let _pending = self.pending_syncs.lock();
            self.sync_finished.notify_all();
        }
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

    /// Appends `record` as [`Log::append`] does (not a commit), but only if `still_valid`
    /// holds when called under the append mutex; `Ok(None)` if it did not (the caller
    /// builds its record again). The page log's way to decide consistently whether a change
    /// needs a full page image: a checkpoint moves its redo point only with appends stopped.
    pub(crate) fn append_unless_changed(
        &self,
        record: &mut FramedRecord,
        still_valid: impl FnOnce() -> bool,
    ) -> Result<Option<u64>> {
        self.check()?;
        let mut appender = self.append.lock();
        if !still_valid() {
            return Ok(None);
        }
        let lsn = appender.buffer_start + appender.buffer.len() as u64;
        let bytes = record.frame(lsn);
        appender.buffer.extend_from_slice(bytes);
        let end = lsn + bytes.len() as u64;
        drop(appender);
        self.counters
            .bytes_appended
            .fetch_add(record.len() as u64, Ordering::Relaxed);
        Ok(Some(end))
    }

    /// Writes the buffer out (without syncing it) once it holds more than
    /// `MAX_BUFFERED_BYTES`: appenders that never wait for durability (the page log's
    /// changes between commits) must not grow it without bound.
    pub(crate) fn bound_buffer(&self) -> Result<()> {
        if self.buffered() > MAX_BUFFERED_BYTES {
            self.wait_for(self.tail(), Reached::Written)?;
        }
        Ok(())
    }

    /// Waits until the log is on stable storage up to `end` (written, under
    /// [`Durability::None`], which never syncs): the write-ahead rule a page's write-back
    /// waits on, whatever commits are promised.
    pub(crate) fn make_durable(&self, end: u64) -> Result<()> {
        match self.durability {
            Durability::None => self.wait_for(end, Reached::Written),
            Durability::Sync | Durability::Async { .. } => self.wait_for(end, Reached::Durable),
        }
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
        // A committer that led a flush since the request may have covered it already (a
        // sync in flight covers what was written before it was issued).
        if self.covered(level) < self.tail() {
            let sync = level == Reached::Durable;
            return self.lead(self.io.lock(), sync).is_ok();
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

    /// How far the log will reach `level` without a new leader: what is written, or what
    /// the syncs issued so far will make durable once they finish.
    fn covered(&self, level: Reached) -> u64 {
        match level {
            Reached::Written => self.written.load(Ordering::Acquire),
            Reached::Durable => self.issued.load(Ordering::Acquire),
        }
    }

    fn wait_for(&self, target: u64, level: Reached) -> Result<()> {
        loop {
            self.check()?;
            if self.reached(level) >= target {
                return Ok(());
            }
            if self.covered(level) < target {
                if let Some(io) = self.io.try_lock() {
                    if self.covered(level) < target {
                        self.lead(io, level == Reached::Durable)?;
                    }
                    continue;
                }
            }
            // A leader is at work, or a sync in flight covers `target`: wait for it. Both
            // notify under `progress` after releasing `io` or acknowledging a sync; so if
            // neither holds here, the notification is already past and we try to lead
            // instead of waiting for one that will not come.
            let mut guard = self.progress.lock();
            if self.reached(level) >= target || self.failed.load(Ordering::Acquire) {
                continue;
            }
            if self.io.is_locked() || self.covered(level) >= target {
                self.progressed
                    .wait_for(&mut guard, Duration::from_millis(50));
            }
        }
    }

    fn notify(&self) {
        let _guard = self.progress.lock();
        self.progressed.notify_all();
    }

    /// Writes everything appended so far and, if `sync`, returns once it is durable: for
    /// the `Async` interval, a checkpoint, and closing.
    pub(crate) fn flush(&self, sync: bool) -> Result<()> {
        self.check()?;
        let target = self.tail();
        self.lead(self.io.lock(), sync)?;
        if sync {
            // An earlier sync still in flight may hold the acknowledgement back.
            self.wait_for(target, Reached::Durable)?;
        }
        Ok(())
    }

    /// The leader's work: with a sync slot free (waited for holding `io`), take the buffer
    /// and write it; release `io`; then, if `sync`, sync it and acknowledge in issue order.
    /// Any failure fails the log.
    fn lead(&self, mut io: parking_lot::MutexGuard<'_, Io>, sync: bool) -> Result<()> {
        if sync {
            // Waiting here, rather than after writing, lets the batch grow until the sync
            // can actually start.
            self.wait_for_pending_syncs(self.syncs_in_flight - 1);
        }
        let job = self.write_locked(&mut io, sync);
        drop(io);
        self.notify();
        match job? {
            Some(job) => self.run_sync(job),
            None => Ok(()),
        }
    }

    /// Waits until at most `most` syncs are pending, or the log failed.
    fn wait_for_pending_syncs(&self, most: usize) {
        let mut pending = self.pending_syncs.lock();
        while pending.len() > most && !self.failed.load(Ordering::Acquire) {
            self.sync_finished
                .wait_for(&mut pending, Duration::from_millis(50));
        }
    }

    /// Runs a sync issued by [`Log::write_locked`] and acknowledges what it may.
    fn run_sync(&self, job: SyncJob) -> Result<()> {
        let began = Instant::now();
        let synced = job.file.sync_data();
        let result = match synced {
            Ok(()) => {
                self.counters
                    .sync_nanos
                    .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
                self.counters.syncs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            // Declared before the sync counts as finished: a later sync's success cannot
            // be acknowledged past this one (see "Overlapping syncs").
            Err(error) => Err(self.fail(format!("syncing {}: {error}", job.path.display()))),
        };
        self.finish_sync(job.target);
        result
    }

    /// Marks the sync to `target` finished and advances `durable` over the syncs that
    /// finished in issue order, unless the log failed.
    fn finish_sync(&self, target: u64) {
        {
            let mut pending = self.pending_syncs.lock();
            let at = pending
                .iter()
                .position(|p| p.target == target)
                .expect("a finishing sync is pending");
            pending[at].finished = true;
            let mut durable = None;
            while pending.front().is_some_and(|p| p.finished) {
                durable = pending.pop_front().map(|p| p.target);
            }
            if let Some(durable) = durable {
                // Under `pending_syncs`: durable advances in issue order, and never after
                // a failure (every sync issued later than a failed one finds `failed` set
                // here, because `fail` runs before the failed sync is marked finished).
                if !self.failed.load(Ordering::Acquire) {
                    debug_assert!(durable >= self.durable.load(Ordering::Acquire));
                    debug_assert!(durable <= self.written.load(Ordering::Acquire));
                    self.durable.store(durable, Ordering::Release);
                }
            }
            self.sync_finished.notify_all();
        }
        self.notify();
    }

    /// Under the I/O lock: take the buffer and write it; if `sync` and something written is
    /// not covered by a sync issued already, issue one (to run after `io` is released).
    fn write_locked(&self, io: &mut Io, sync: bool) -> Result<Option<SyncJob>> {
        // Checked again under the I/O lock: a flush whose write failed (and failed the log)
        // held it last, had taken its batch, and wrote none of it; anything written now
        // would lie past that hole
        // (`regression_a_flush_after_another_flush_failed_writes_nothing`). Every failed
        // write is declared while the lock is held; a failed sync is declared outside it,
        // and is checked for again before a sync is issued (`write_locked`).
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
        let result = self.write_batch(io, start, &batch, records);
        batch.clear();
        batch.shrink_to(KEPT_BUFFER_BYTES);
        io.spare_buffer = batch;
        result?;
        let written = self.written.load(Ordering::Acquire);
        if !sync || self.issued.load(Ordering::Acquire) >= written {
            return Ok(None);
        }
        let mut pending = self.pending_syncs.lock();
        // A sync that failed meanwhile (declared outside `io`) ends the log: no fsync
        // after a failed one.
        if self.failed.load(Ordering::Acquire) {
            return Err(self.lost());
        }
        debug_assert!(
            pending.len() < self.syncs_in_flight,
            "a slot was waited for"
        );
        debug_assert!(pending.back().is_none_or(|p| p.target < written));
        let slot = (0..self.syncs_in_flight)
            .find(|slot| pending.iter().all(|p| p.slot != *slot))
            .expect("fewer syncs pending than slots");
        pending.push_back(PendingSync {
            target: written,
            slot,
            finished: false,
        });
        self.issued.store(written, Ordering::Release);
        Ok(Some(SyncJob {
            file: Arc::clone(&io.segment.sync_handles[slot]),
            path: io.segment.path.clone(),
            target: written,
        }))
    }

    /// Writes `batch` (its first `records` bytes are records, the rest the end marker) at
    /// LSN `start`.
    fn write_batch(&self, io: &mut Io, start: u64, batch: &[u8], records: usize) -> Result<()> {
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
        Ok(())
    }

    /// Seals the current segment (synced whole) and opens the next at `start`, once no
    /// sync is pending (so that `durable` may jump to `start` here without overtaking one).
    fn rotate(&self, io: &mut Io, start: u64) -> Result<()> {
        self.wait_for_pending_syncs(0);
        if self.failed.load(Ordering::Acquire) {
            return Err(self.lost());
        }
        if let Err(error) = io.segment.file.sync_data() {
            return Err(self.fail(format!(
                "syncing {} before starting the next segment: {error}",
                io.segment.path.display()
            )));
        }
        if self.durability != Durability::None {
            // Everything written is synced now (the batch about to be written starts here),
            // and no sync is pending to be overtaken.
            debug_assert!(self.pending_syncs.lock().is_empty());
            self.durable.store(start, Ordering::Release);
            self.issued.fetch_max(start, Ordering::AcqRel);
        }
        let next = open_new_segment(
            &*self.fs,
            &self.dir,
            start,
            start,
            &self.spares,
            self.sync_dirs,
            self.syncs_in_flight,
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
        // A waiter that found `io` held by this step sleeps until notified.
        self.notify();
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
/// written and synced, and the directory synced, before it is used; then `sync_handles`
/// more handles of it are opened, one per sync slot.
fn open_new_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    start: u64,
    previous_end: u64,
    spares: &Spares,
    sync_dir: bool,
    sync_handles: usize,
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
    // Opened after the header's sync: each handle then reports every write-back error of
    // the records written through `file` (errseq samples the error state at open).
    let sync_handles = (0..sync_handles)
        .map(|_| fs.open(&path, OpenMode::ReadWrite).map(Arc::from))
        .collect::<std::io::Result<Vec<Arc<dyn File>>>>()
        .map_err(|error| io_error(&path, "opening a log segment's sync handles", &error))?;
    Ok(OpenSegment {
        file,
        sync_handles,
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

    /// A `Sync` log in `/db` of `fs`, with no threads of its own.
    fn sync_log(fs: Arc<dyn FileSystem>, syncs_in_flight: usize) -> Log {
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        let settings = Settings {
            fs,
            dir,
            durability: Durability::Sync,
            segment_bytes: 1 << 20,
            preallocate: false,
            flush_thread: false,
            syncs_in_flight,
            checkpoint_after_log_bytes: None,
            recovery_threads: 1,
            log_replay_threads: 1,
            planted_bug: None,
        };
        Log::start(&settings, 0, 0, Vec::new(), Vec::new()).unwrap()
    }

    /// Found by measuring the disk engine's memory (docs/known-issues.md): a backlog
    /// written once, such as the hint images of a read-only scan after a checkpoint, left
    /// both swapped buffers at its size for the log's lifetime (about 1.2 times the buffer
    /// pool of resident memory). A written batch's buffer now keeps at most
    /// `KEPT_BUFFER_BYTES`.
    #[test]
    fn regression_a_large_backlog_does_not_stay_resident_in_the_buffers() {
        use crate::fs::simulated::SimulatedFileSystem;
        let fs = SimulatedFileSystem::new(3);
        let log = sync_log(Arc::new(fs), 1);
        let body = vec![7u8; 64 << 10];
        // Two backlogs of 8 MiB each, so that both buffers have held one.
        for _ in 0..2 {
            for _ in 0..128 {
                log.append(&mut FramedRecord::with_body(&body), false)
                    .unwrap();
            }
            log.flush(true).unwrap();
        }
        let appended = log.append.lock().buffer.capacity();
        let spare = log.io.lock().spare_buffer.capacity();
        assert!(
            appended <= KEPT_BUFFER_BYTES && spare <= KEPT_BUFFER_BYTES,
            "capacities after the backlogs: {appended} and {spare} bytes"
        );
        // Small groups still reuse their buffer.
        log.append(&mut FramedRecord::with_body(b"small"), true)
            .unwrap();
        log.flush(true).unwrap();
        assert_eq!(log.durable(), log.written());
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
        let log = sync_log(Arc::new(fs.clone()), 1);
        log.append(&mut FramedRecord::with_body(b"first"), true)
            .unwrap();
        fs.fail_after(1, Fault::Eio);
        assert!(log.flush(true).is_err(), "the first flush's write fails");
        assert!(log.check().is_err(), "and the log with it");
        // The second flush passed `check` before the failure; it holds the lock now.
        let before = fs.stats();
        let io = log.io.lock();
        assert!(log.lead(io, true).is_err());
        let after = fs.stats();
        assert_eq!(
            (after.bytes_written, after.file_syncs),
            (before.bytes_written, before.file_syncs),
            "nothing written or synced after the log failed"
        );
        assert_eq!(log.written(), 0);
        assert_eq!(log.durable(), 0);
    }

    /// A file system whose next armed `sync_data` blocks until the test releases it, with
    /// the result the test chooses: two syncs of the log in flight at once, on demand.
    #[derive(Debug)]
    struct GatedFileSystem {
        inner: crate::fs::SimulatedFileSystem,
        gate: Arc<Gate>,
    }

    #[derive(Debug, Default)]
    struct Gate {
        state: Mutex<GateState>,
        changed: Condvar,
    }

    #[derive(Debug, Default)]
    struct GateState {
        armed: bool,
        blocked: bool,
        release: Option<bool>,
    }

    impl Gate {
        fn arm(&self) {
            self.state.lock().armed = true;
        }
        fn wait_until_blocked(&self) {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut state = self.state.lock();
            while !state.blocked {
                assert!(Instant::now() < deadline, "the gated sync never began");
                self.changed.wait_for(&mut state, Duration::from_millis(10));
            }
        }
        fn release(&self, succeed: bool) {
            self.state.lock().release = Some(succeed);
            self.changed.notify_all();
        }
    }

    /// Releases the gate (the sync failing) if the test did not: a failed assertion
    /// unwinds through it, so the blocked thread ends and the test fails instead of
    /// hanging.
    struct ReleaseOnDrop<'a>(&'a Gate);

    impl Drop for ReleaseOnDrop<'_> {
        fn drop(&mut self) {
            if self.0.state.lock().release.is_none() {
                self.0.release(false);
            }
        }
    }

    #[derive(Debug)]
    struct GatedFile {
        inner: Box<dyn File>,
        gate: Arc<Gate>,
    }

    impl File for GatedFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            self.inner.read_at(buf, offset)
        }
        fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            self.inner.write_all_at(buf, offset)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            let mut state = self.gate.state.lock();
            if std::mem::take(&mut state.armed) {
                state.blocked = true;
                self.gate.changed.notify_all();
                while state.release.is_none() {
                    self.gate.changed.wait(&mut state);
                }
                if state.release == Some(false) {
                    return Err(std::io::Error::other("injected: write-back failed"));
                }
            }
            drop(state);
            self.inner.sync_data()
        }
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.inner.set_len(len)
        }
    }

    impl FileSystem for GatedFileSystem {
        fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
            self.inner.create_dir_all(path)
        }
        fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Box<dyn File>> {
            Ok(Box::new(GatedFile {
                inner: self.inner.open(path, mode)?,
                gate: Arc::clone(&self.gate),
            }))
        }
        fn remove_file(&self, path: &Path) -> std::io::Result<()> {
            self.inner.remove_file(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
            self.inner.rename(from, to)
        }
        fn sync_dir(&self, path: &Path) -> std::io::Result<()> {
            self.inner.sync_dir(path)
        }
        fn list_dir(&self, path: &Path) -> std::io::Result<Vec<String>> {
            self.inner.list_dir(path)
        }
        fn exists(&self, path: &Path) -> std::io::Result<bool> {
            self.inner.exists(path)
        }
        fn lock(&self, path: &Path) -> std::io::Result<Box<dyn crate::fs::DirectoryLock>> {
            self.inner.lock(path)
        }
    }

    /// A log whose first sync after `arm` blocks; two syncs may be in flight.
    fn gated_log() -> (Log, Arc<Gate>) {
        let gate = Arc::new(Gate::default());
        let fs = GatedFileSystem {
            inner: crate::fs::SimulatedFileSystem::new(11),
            gate: Arc::clone(&gate),
        };
        (sync_log(Arc::new(fs), 2), gate)
    }

    /// Runs two overlapping syncs: the first (of record A) blocks until released with
    /// `first_succeeds`; the second (of record B, appended after A was written) runs
    /// while the first is in flight and succeeds. Returns what `durable` was while the
    /// first was still in flight, A's and B's ends, and both waiters' results.
    fn two_overlapping_syncs(first_succeeds: bool) -> (Log, u64, u64, u64, Result<()>, Result<()>) {
        let (log, gate) = gated_log();
        let end_a = log
            .append(&mut FramedRecord::with_body(b"A"), true)
            .unwrap();
        gate.arm();
        let shared = &log;
        let (durable_meanwhile, end_b, first, second) = std::thread::scope(|scope| {
            let log = shared;
            let _release = ReleaseOnDrop(&gate);
            let first = scope.spawn(move || log.acknowledge(end_a));
            gate.wait_until_blocked();
            assert!(
                log.written() >= end_a,
                "A was written before its sync began"
            );
            let end_b = log
                .append(&mut FramedRecord::with_body(b"B"), true)
                .unwrap();
            let second = scope.spawn(move || log.acknowledge(end_b));
            // The second sync runs (the first holds no lock) and finishes: once it is
            // marked finished, whatever it was going to acknowledge is acknowledged.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !log
                .pending_syncs
                .lock()
                .back()
                .is_some_and(|p| p.finished && p.target >= end_b)
            {
                assert!(Instant::now() < deadline, "the second sync never finished");
                std::thread::sleep(Duration::from_millis(1));
            }
            let durable_meanwhile = log.durable();
            let second_returned_early = second.is_finished();
            // Released before any assertion, so that a failing one cannot hang the test.
            gate.release(first_succeeds);
            assert!(
                !second_returned_early,
                "B acknowledged with A's sync in flight"
            );
            (
                durable_meanwhile,
                end_b,
                first.join().unwrap(),
                second.join().unwrap(),
            )
        });
        (log, durable_meanwhile, end_a, end_b, first, second)
    }

    #[test]
    fn a_sync_that_finished_first_waits_for_the_earlier_one_in_flight() {
        let (log, durable_meanwhile, end_a, end_b, first, second) = two_overlapping_syncs(true);
        assert!(
            durable_meanwhile < end_a,
            "nothing acknowledged while the earlier sync was in flight"
        );
        first.unwrap();
        second.unwrap();
        assert!(log.durable() >= end_b);
        assert_eq!(
            log.counters.syncs.load(Ordering::Acquire),
            2,
            "the syncs overlapped"
        );
    }

    /// A write-back error is reported to one `fsync` caller only: the later sync's success
    /// does not prove the earlier batch durable, so B must not be acknowledged either.
    #[test]
    fn a_later_sync_that_succeeded_acknowledges_nothing_after_an_earlier_one_failed() {
        let (log, durable_meanwhile, end_a, _, first, second) = two_overlapping_syncs(false);
        assert!(durable_meanwhile < end_a);
        assert!(
            matches!(first, Err(Error::DurabilityLost { .. })),
            "{first:?}"
        );
        assert!(
            matches!(second, Err(Error::DurabilityLost { .. })),
            "{second:?}"
        );
        assert!(
            log.durable() < end_a,
            "nothing after the failed sync is durable"
        );
        assert!(log.check().is_err());
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_headers_and_names_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), name in ".{0,30}") {
            let _ = parse_segment_header(&bytes);
            let _ = parse_segment_name(&name);
        }
    }
}
