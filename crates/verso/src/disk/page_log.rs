//! The page log: physiological redo of the disk engine's page changes through the
//! durability log (`durability::log`: the same segments, framing, group commit and
//! recovery scan as the in-memory engine's), fuzzy checkpoints, and recovery by page LSN
//! (design note: `docs/design/buffer-pool.md`, "The page log").
//!
//! # Records
//!
//! One record ([`KIND_PAGES`]) holds every page a change touched, so a change over several
//! pages (a B+-tree split: the split nodes, their new siblings, the parent or a new root and
//! the meta page) is redone whole or not at all:
//!
//! ```text
//! | kind: u8 = 4 | pages: u16 | per page: file u32 | block u32 | changes: u16 | per change: op u8 | length u32 | payload |
//! ```
//!
//! A page's changes are redone in order, all or none (the page's LSN is checked once).
//!
//! Ops: [`OP_IMAGE`] (the page's kind u16 and whole body: a full page image); the B+-tree
//! leaf's [`OP_BTREE_PUT`] (key length u16, key, value) and [`OP_BTREE_REMOVE`] (key); the
//! heap page's [`OP_HEAP_INSERT`] (line u16, tuple header, data: redo checks the insert
//! lands on the same line), [`OP_HEAP_SET_HEADER`] (line, header), [`OP_HEAP_PRUNE`] (the
//! prune's plan: redirects, dead and unused lines, each list counted by a u16) and
//! [`OP_HEAP_FREE_DEAD`] (lines); the commit log's [`OP_COMMIT_LOG_SET`] (slot u16, value
//! u64: a commit record or an abort) and [`OP_COMMIT_LOG_RESERVE`] (the new bound u64);
//! the undo page's [`OP_UNDO_WRITE`] (offset u16, bytes: `disk::undo`).
//! Hint bits are not logged as changes ([`PageLog::hint`]).
//! A page's LSN is the end of the last record that changed it.
//!
//! # Invariants
//!
//! - **L1** A page changes only under its exclusive latch, and the record of the change is
//!   appended before the latch is let go: a page's records are in the log in the order of
//!   its changes, and its LSN is the end of the newest.
//! - **L2** (write-ahead, the buffer pool's B4) A page reaches its file only after the log
//!   is durable up to its LSN; once the log failed, no page reaches its file (a change
//!   made in memory whose record could not be appended must never be written).
//! - **L3** (torn pages) The first change of a page after the redo point (a page whose LSN
//!   is at or below it: a page's LSN is the *end* of its last record) is logged as a full
//!   page image, whatever the change: recovery never needs the page's bytes on disk, which
//!   a crash may have torn while they were written back. The decision is taken against the
//!   redo point read under the log's append mutex, the only place a checkpoint moves it,
//!   and after the page was changed (so dirty): a checkpoint moving the redo point later
//!   sweeps the pool after that and writes the page.
//!
//! # Checkpoint (the file protocol, in order)
//!
//! 1. With appends stopped, the redo point becomes the log's tail (L3 from here on).
//! 2. The buffer pool's fuzzy flush: every page dirty when the sweep reaches it is written
//!    (each after the log covering it is durable, L2), then every page file is synced.
//! 3. The log is made durable up to the redo point.
//! 4. The manifest (`MANIFEST`, written to `MANIFEST.tmp`, synced, renamed, directory
//!    synced) records the redo point as where recovery starts.
//! 5. Log segments wholly below the redo point are recycled or removed.
//!
//! A crash before step 4 recovers from the previous redo point, whose records are all
//! still there; after it, every change below the new redo point is in the page files,
//! synced in step 2.
//!
//! # Recovery
//!
//! [`PageLog::open`] locks the directory, reads the manifest, reads the log from its redo
//! point (the in-memory engine's scan: a torn tail is cut, corruption refused), syncs the
//! last segment and starts the log past the cut. The caller builds its buffer pool over
//! the returned log, attaches its page files under their numbers, and calls
//! [`Recovering::redo`]: each record's pages are redone in log order, a full image always
//! (over whatever the file holds, torn or not), any other change only if the page's LSN is
//! below the record's end.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::btree::{KIND_BTREE_META, KIND_BTREE_NODE};
use super::buffer_pool::{BufferPool, DirtyCause, PageMut, WriteAheadLog};
use super::heap_page::KIND_HEAP_PAGE;
use super::heap_page::{HeapPage, PrunePlan, TupleHeader, TUPLE_HEADER_BYTES};
use super::page::{FileNo, PageId, PAGE_HEADER_BYTES, PAGE_SIZE};
use crate::durability::log::Log;
use crate::durability::manifest::{self, Manifest, MANIFEST_TEMPORARY};
use crate::durability::record::{self, FramedRecord};
use crate::durability::recovery::{self, Segment};
use crate::durability::{open_directory, remove_if_present, Durability, RecoveryStats, Settings};
use crate::fs::{DirectoryLock, FileSystem};
use crate::{Error, Result};

/// The record kind of page changes (beside the durability log's kinds).
pub(crate) const KIND_PAGES: u8 = record::KIND_PAGES;
/// A full page image: the page's kind and body.
pub(crate) const OP_IMAGE: u8 = 1;
/// A B+-tree leaf's put (insert or replace).
pub(crate) const OP_BTREE_PUT: u8 = 2;
/// A B+-tree leaf's removal.
pub(crate) const OP_BTREE_REMOVE: u8 = 3;
/// A tuple added to a heap page.
pub(crate) const OP_HEAP_INSERT: u8 = 4;
/// A heap tuple's header rewritten (`xmax`, `ctid`, flags).
pub(crate) const OP_HEAP_SET_HEADER: u8 = 5;
/// A heap page pruned ([`PrunePlan`]).
pub(crate) const OP_HEAP_PRUNE: u8 = 6;
/// A heap page's dead lines freed by vacuum.
pub(crate) const OP_HEAP_FREE_DEAD: u8 = 7;
/// A commit log entry set (a commit or an abort).
pub(crate) const OP_COMMIT_LOG_SET: u8 = 8;
/// The commit log's reserved bound raised.
pub(crate) const OP_COMMIT_LOG_RESERVE: u8 = 9;
/// An undo page's bytes written at an offset of its body (`disk::undo`): at u16, bytes.
pub(crate) const OP_UNDO_WRITE: u8 = 10;

const BODY_BYTES: usize = PAGE_SIZE - PAGE_HEADER_BYTES;

/// A change made to a page held exclusive, as the log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageChange<'a> {
    /// The page as it is now, whole (its kind and body).
    Image,
    /// A B+-tree leaf took `key` with `value` (replacing any value it had).
    BTreePut {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// A B+-tree leaf lost `key`.
    BTreeRemove {
        /// The key.
        key: &'a [u8],
    },
    /// A heap page took a tuple at `line` ([`HeapPage::insert`]'s answer).
    HeapInsert {
        /// The line the insert chose.
        line: u16,
        /// The tuple's header.
        header: TupleHeader,
        /// The tuple's data.
        data: &'a [u8],
    },
    /// A heap tuple's header was rewritten ([`HeapPage::set_header`]).
    HeapSetHeader {
        /// Its line.
        line: u16,
        /// The new header.
        header: TupleHeader,
    },
    /// A heap page was pruned ([`HeapPage::execute_prune`] of this plan).
    HeapPrune {
        /// What the prune changed.
        plan: &'a PrunePlan,
    },
    /// Vacuum freed dead lines of a heap page ([`HeapPage::free_dead_lines`]).
    HeapFreeDead {
        /// The lines.
        lines: &'a [u16],
    },
    /// A commit log entry was set ([`super::CommitLog`]).
    CommitLogSet {
        /// Its slot in the page.
        slot: u16,
        /// The commit timestamp, or the aborted mark.
        value: u64,
    },
    /// The commit log's reserved bound was raised.
    CommitLogReserve {
        /// The new bound.
        up_to: u64,
    },
    /// Bytes written into an undo page's body at offset `at` (a record appended, the
    /// page's header rewritten: `disk::undo`).
    UndoWrite {
        /// The offset in the body.
        at: u16,
        /// The bytes.
        bytes: &'a [u8],
    },
}

/// A page change as decoded from a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LoggedChange<'a> {
    Image {
        kind: u16,
        body: &'a [u8],
    },
    BTreePut {
        key: &'a [u8],
        value: &'a [u8],
    },
    BTreeRemove {
        key: &'a [u8],
    },
    HeapInsert {
        line: u16,
        header: TupleHeader,
        data: &'a [u8],
    },
    HeapSetHeader {
        line: u16,
        header: TupleHeader,
    },
    HeapPrune(PrunePlan),
    HeapFreeDead(Vec<u16>),
    CommitLogSet {
        slot: u16,
        value: u64,
    },
    CommitLogReserve {
        up_to: u64,
    },
    UndoWrite {
        at: u16,
        bytes: &'a [u8],
    },
}

/// What the page log counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PageLogStats {
    /// Records of page changes appended.
    pub records: u64,
    /// Pages logged as full images (L3, and changes logged whole).
    pub full_page_images: u64,
    /// Pages logged as a change (physiological redo).
    pub page_changes: u64,
    /// Checkpoints completed.
    pub checkpoints: u64,
    /// Full page images logged because hint bits dirtied a page ([`PageLog::hint`]).
    pub hint_images: u64,
    /// Bytes of records appended (framing included).
    pub bytes: u64,
}

/// The log of a disk database's page changes. It is the [`WriteAheadLog`] of the buffer
/// pool over its pages.
pub struct PageLog {
    settings: Settings,
    log: Arc<Log>,
    /// Where recovery would start if the system crashed now: the redo point of the newest
    /// checkpoint (L3). Moved only with the log's appends stopped.
    redo_point: AtomicU64,
    lock: crate::sync::Mutex<Option<Box<dyn DirectoryLock>>>,
    /// Held by the `Async` sync thread while it syncs: closing waits for it, so no thread
    /// of this log touches the directory after its lock is let go.
    background: Arc<crate::sync::Mutex<()>>,
    checkpoint_lock: crate::sync::Mutex<()>,
    records: AtomicU64,
    full_page_images: AtomicU64,
    page_changes: AtomicU64,
    checkpoints: AtomicU64,
    hint_images: AtomicU64,
}

impl std::fmt::Debug for PageLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageLog")
            .field("dir", &self.settings.dir)
            .field("redo_point", &self.redo_point.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl WriteAheadLog for PageLog {
    fn make_durable(&self, lsn: u64) -> Result<()> {
        // L2: `Log::make_durable` fails once the log has failed, whatever `lsn` is.
        self.log.make_durable(lsn)
    }
}

/// A page log opened over a directory, with the records recovery must redo.
pub struct Recovering {
    log: Arc<PageLog>,
    segments: Vec<Arc<Segment>>,
    stats: RecoveryStats,
}

/// What [`Recovering::redo`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedoStats {
    /// Records of page changes read.
    pub records: u64,
    /// Full page images restored.
    pub images_restored: u64,
    /// Changes applied to pages whose LSN was below the record's.
    pub changes_applied: u64,
    /// Changes skipped: the page already had them.
    pub changes_skipped: u64,
    /// Whether the log ended in a torn write (cut off; nothing in it was acknowledged).
    pub torn_tail: bool,
}

impl PageLog {
    /// Opens (or creates) the page log of the database in `dir`: locks the directory,
    /// reads the log from the manifest's redo point and starts the log after it. Redo the
    /// returned records into the buffer pool with [`Recovering::redo`] before anything
    /// else reads or writes a page. Under `Durability::Async { interval }` a thread syncs
    /// the log every interval until the log is closed or dropped.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        durability: Durability,
        segment_bytes: u64,
    ) -> Result<Recovering> {
        let settings = Settings {
            fs,
            dir: dir.to_path_buf(),
            durability,
            segment_bytes,
            preallocate: false,
            flush_thread: false,
            syncs_in_flight: 1,
            checkpoint_after_log_bytes: None,
            recovery_threads: 1,
            log_replay_threads: 1,
            planted_bug: None,
        };
        let (lock, manifest, names) = open_directory(&settings)?;
        let fs = &*settings.fs;
        if names.iter().any(|name| name == MANIFEST_TEMPORARY) {
            remove_if_present(fs, &dir.join(MANIFEST_TEMPORARY))?;
        }
        let mut stats = RecoveryStats::default();
        let (log, redo_point, segments) = match manifest {
            None => {
                // A creation that crashed before its manifest existed left nothing anyone
                // was told is durable.
                for name in &names {
                    if crate::durability::log::parse_segment_name(name).is_some()
                        || crate::durability::log::is_spare_name(name)
                    {
                        remove_if_present(fs, &dir.join(name))?;
                    }
                }
                let log = Log::start(&settings, 0, 0, Vec::new(), Vec::new())?;
                let manifest = Manifest {
                    checkpoint: None,
                    log_from: 0,
                };
                manifest::write(fs, dir, &manifest, settings.syncs_directories())?;
                stats.created = true;
                (log, 0, Vec::new())
            }
            Some(manifest) => {
                let recovery::LogSegments {
                    segments,
                    headers,
                    spares,
                } = recovery::log_segments(&settings, &names, manifest.log_from, &mut stats)?;
                let mut read = Vec::new();
                let end = recovery::replay_segments(
                    &settings,
                    &segments,
                    &headers,
                    manifest.log_from,
                    &mut |segment, _| {
                        read.push(Arc::clone(segment));
                        Ok(())
                    },
                    &mut stats,
                )?;
                let log = recovery::start_log_after(&settings, segments, spares, end)?;
                (log, manifest.log_from, read)
            }
        };
        let log = Arc::new(PageLog {
            settings,
            log: Arc::new(log),
            background: Arc::new(crate::sync::Mutex::new(())),
            redo_point: AtomicU64::new(redo_point),
            lock: crate::sync::Mutex::new(Some(lock)),
            checkpoint_lock: crate::sync::Mutex::new(()),
            records: AtomicU64::new(0),
            full_page_images: AtomicU64::new(0),
            page_changes: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            hint_images: AtomicU64::new(0),
        });
        if let Durability::Async { interval } = durability {
            // The thread syncs under `background`, which closing takes after marking the
            // log closed: once closing has it, the thread never touches a file again.
            let (sync_log, background) = (Arc::clone(&log.log), Arc::clone(&log.background));
            std::thread::Builder::new()
                .name("verso-page-log-sync".into())
                .spawn(move || loop {
                    std::thread::sleep(interval);
                    let _busy = background.lock();
                    // Closed or failed: nothing more to sync.
                    if sync_log.flush(true).is_err() {
                        return;
                    }
                })
                .map_err(|error| Error::UnsupportedConfiguration {
                    reason: format!("cannot start the page log's sync thread: {error}"),
                })?;
        }
        Ok(Recovering {
            log,
            segments,
            stats,
        })
    }

    /// Logs changes already made to pages the caller holds exclusive, as one record (each
    /// page with the changes made to it, in order), and sets each page's LSN to the
    /// record's end (L1); returns that end. A page whose LSN is at or below the redo point
    /// is logged as a full image whatever its changes (L3). After a failure
    /// ([`Error::DurabilityLost`]: the log failed) the changes stay in memory but can never
    /// reach the files (L2): the database must be reopened.
    ///
    /// Each change is noted on its page for the pool's counts of pages dirtied by cause
    /// ([`PageMut::note_change`], [`cause_of`]) as made for no transaction; changes a
    /// transaction makes to heap pages go through [`PageLog::log_for`].
    pub fn log(&self, pages: &mut [(&mut PageMut<'_>, &[PageChange<'_>])]) -> Result<u64> {
        self.log_and_note(pages, None)
    }

    /// [`PageLog::log`] of changes made for transaction `xid` (a new version, an old
    /// version's stamp): noted as its, for the pool's count of pages written for aborted
    /// transactions, and a header rewrite counts as an old version's stamp (without a
    /// writer it is vacuum's freezing).
    pub fn log_for(
        &self,
        xid: u64,
        pages: &mut [(&mut PageMut<'_>, &[PageChange<'_>])],
    ) -> Result<u64> {
        self.log_and_note(pages, Some(xid))
    }

    fn log_and_note(
        &self,
        pages: &mut [(&mut PageMut<'_>, &[PageChange<'_>])],
        writer: Option<u64>,
    ) -> Result<u64> {
        let end = self.append(pages)?;
        for (page, changes) in pages.iter_mut() {
            let kind = page.kind();
            for change in changes.iter() {
                page.note_change(cause_of(change, kind, writer), writer);
            }
        }
        Ok(end)
    }

    /// Appends the record of [`PageLog::log`] and sets the pages' LSNs (no notes).
    fn append(&self, pages: &mut [(&mut PageMut<'_>, &[PageChange<'_>])]) -> Result<u64> {
        debug_assert!(pages.iter().all(|(_, changes)| !changes.is_empty()));
        // The pages are changed already: a change that cannot be logged must never reach
        // the files, so the log fails (L2) rather than leave it unlogged.
        let too_many = |what: &str| {
            self.log.fail(format!(
                "a change of more than {} {what} cannot be logged",
                u16::MAX
            ))
        };
        let count = u16::try_from(pages.len()).map_err(|_| too_many("pages"))?;
        loop {
            let redo_point = self.redo_point.load(Ordering::Acquire);
            let (mut images, mut changes_logged) = (0, 0);
            let mut body = Vec::with_capacity(64);
            body.push(KIND_PAGES);
            body.extend_from_slice(&count.to_le_bytes());
            for (page, changes) in pages.iter() {
                let id = page.id();
                body.extend_from_slice(&id.file.0.to_le_bytes());
                body.extend_from_slice(&id.block.to_le_bytes());
                // A page's LSN is the end of its last record: at the redo point, that
                // record lies wholly before it.
                let whole = page.lsn() <= redo_point || changes.contains(&PageChange::Image);
                if whole {
                    images += 1;
                    body.extend_from_slice(&1u16.to_le_bytes());
                    body.push(OP_IMAGE);
                    body.extend_from_slice(&((2 + BODY_BYTES) as u32).to_le_bytes());
                    body.extend_from_slice(&page.kind().to_le_bytes());
                    body.extend_from_slice(page.body());
                    continue;
                }
                let n =
                    u16::try_from(changes.len()).map_err(|_| too_many("changes to one page"))?;
                body.extend_from_slice(&n.to_le_bytes());
                for change in changes.iter() {
                    encode_change(&mut body, change);
                }
                changes_logged += changes.len() as u64;
            }
            let mut record = FramedRecord::with_body(&body);
            let appended = self.log.append_unless_changed(&mut record, || {
                self.redo_point.load(Ordering::Acquire) == redo_point
            })?;
            let Some(end) = appended else {
                continue; // a checkpoint moved the redo point: images may be needed now
            };
            if let Some((page, _)) = pages.iter().find(|(page, _)| page.lsn() >= end) {
                // A page ahead of the log: the log lost bytes the page was written after
                // (only possible after a power loss under `Durability::None`). Its LSN can
                // no longer order redo, so nothing more may reach the files.
                return Err(self.log.fail(format!(
                    "{} has LSN {}, past the log's end {end}: the log lost what the page \
                     was written after",
                    page.id(),
                    page.lsn()
                )));
            }
            for (page, _) in pages.iter_mut() {
                page.set_lsn(end);
            }
            self.log.bound_buffer()?;
            self.records.fetch_add(1, Ordering::Relaxed);
            self.full_page_images.fetch_add(images, Ordering::Relaxed);
            self.page_changes
                .fetch_add(changes_logged, Ordering::Relaxed);
            return Ok(end);
        }
    }

    /// Call after setting hint bits (changes no record describes and redo need not replay,
    /// such as a tuple's commit hints) on a page held exclusive: the page is dirty now and
    /// may be written back, torn, with nothing in the log to repair it. So if its LSN is at
    /// or below the redo point its image is logged (L3; PostgreSQL's `wal_log_hints`);
    /// otherwise an image after the redo point exists already. Returns whether it logged.
    /// The decision holds against a checkpoint starting meanwhile: it is confirmed under the
    /// append mutex, and a checkpoint that moves the redo point later sweeps the pool after
    /// that and finds the page dirty.
    pub fn hint(&self, page: &mut PageMut<'_>) -> Result<bool> {
        page.note_change(DirtyCause::HintBits, None);
        loop {
            let redo_point = self.redo_point.load(Ordering::Acquire);
            if page.lsn() <= redo_point {
                self.append(&mut [(&mut *page, &[PageChange::Image])])?;
                self.hint_images.fetch_add(1, Ordering::Relaxed);
                return Ok(true);
            }
            let unchanged = self
                .log
                .with_appends_stopped(|_| self.redo_point.load(Ordering::Acquire) == redo_point);
            if unchanged {
                return Ok(false);
            }
        }
    }

    /// Waits until the record ending at `end` is as durable as the log's durability level
    /// promises a commit (synced under `Sync`, written under `None`, nothing under
    /// `Async`): what a commit waits for before it is acknowledged.
    pub(crate) fn acknowledge(&self, end: u64) -> Result<()> {
        self.log.acknowledge(end)
    }

    /// The durability log under the page log (for commit tickets).
    pub(crate) fn durability_log(&self) -> Arc<Log> {
        Arc::clone(&self.log)
    }

    /// Fails the log (durability lost: nothing more reaches the files, every later call
    /// gets [`Error::DurabilityLost`]) and returns that error.
    pub(crate) fn fail(&self, reason: String) -> Error {
        self.log.fail(reason)
    }

    /// Fails once the log failed (durability lost) or was closed.
    pub(crate) fn check(&self) -> Result<()> {
        self.log.check()
    }

    /// The LSN after the last record appended.
    pub fn tail(&self) -> u64 {
        self.log.tail()
    }

    /// Returns once every record appended before the call is as durable as the log's
    /// durability level makes anything (synced under `Sync`, written under `None`): what a
    /// commit waits for before it is acknowledged.
    pub fn sync(&self) -> Result<()> {
        self.log.make_durable(self.log.tail())
    }

    /// The redo point of the newest checkpoint: where recovery would start now.
    pub fn redo_point(&self) -> u64 {
        self.redo_point.load(Ordering::Acquire)
    }

    /// A fuzzy checkpoint of `pool`, whose pages this log covers (the protocol is in the
    /// module documentation). Writers keep running; one checkpoint runs at a time. Returns
    /// the new redo point.
    pub fn checkpoint(&self, pool: &BufferPool) -> Result<u64> {
        let _one_at_a_time = self.checkpoint_lock.lock();
        let redo_point = self.log.with_appends_stopped(|tail| {
            self.redo_point.store(tail, Ordering::Release);
            tail
        });
        pool.flush()?;
        self.log.make_durable(redo_point)?;
        let manifest = Manifest {
            checkpoint: None,
            log_from: redo_point,
        };
        manifest::write(
            &*self.settings.fs,
            &self.settings.dir,
            &manifest,
            self.settings.syncs_directories(),
        )?;
        self.log.release_below(redo_point)?;
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(redo_point)
    }

    /// What the page log counted.
    pub fn stats(&self) -> PageLogStats {
        PageLogStats {
            records: self.records.load(Ordering::Relaxed),
            full_page_images: self.full_page_images.load(Ordering::Relaxed),
            page_changes: self.page_changes.load(Ordering::Relaxed),
            checkpoints: self.checkpoints.load(Ordering::Relaxed),
            hint_images: self.hint_images.load(Ordering::Relaxed),
            bytes: self.log.counters.bytes_appended.load(Ordering::Relaxed),
        }
    }

    /// The log's counters in the in-memory engine's terms ([`crate::Stats::durability`]):
    /// bytes, commit records, writes and syncs of the shared log, and checkpoints taken
    /// (not whether one is running).
    pub fn durability_stats(&self) -> crate::durability::DurabilityStats {
        crate::durability::DurabilityStats {
            checkpoints: self.checkpoints.load(Ordering::Relaxed),
            ..crate::durability::log_stats(&self.log)
        }
    }

    /// Stops the log and lets the directory go: every later call fails with
    /// [`Error::DatabaseClosed`]. Nothing is synced that was not (close after a
    /// checkpoint or a sync to keep everything).
    pub fn close(&self) {
        self.log.close();
        drop(self.background.lock());
        drop(self.lock.lock().take());
    }

    /// The directory of the database.
    pub fn dir(&self) -> PathBuf {
        self.settings.dir.clone()
    }
}

impl Drop for PageLog {
    fn drop(&mut self) {
        self.close();
    }
}

impl Recovering {
    /// The page log, already started: build the buffer pool over it.
    pub fn log(&self) -> Arc<PageLog> {
        Arc::clone(&self.log)
    }

    /// What reading the log found (whether it was created, whether its tail was torn).
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.stats
    }

    /// Redoes every page change since the redo point into `pool` (built over
    /// [`Recovering::log`], with every page file the records name attached), in log order.
    /// Fails with [`Error::Corruption`] on a record that does not decode, a page it names
    /// whose file is not attached, or a change that does not apply to its page (with no
    /// full image before it in the log, such a page's bytes on disk were lost).
    pub fn redo(self, pool: &BufferPool) -> Result<RedoStats> {
        let mut stats = RedoStats {
            torn_tail: self.stats.torn_tail,
            ..RedoStats::default()
        };
        for segment in &self.segments {
            for (lsn, body) in segment.records() {
                if body.first() != Some(&KIND_PAGES) {
                    continue; // the log's own sync points
                }
                stats.records += 1;
                let end = lsn + record::framed_len(body.len()) as u64;
                let pages = decode_pages(body).map_err(|reason| segment.corruption(lsn, reason))?;
                for (id, changes) in pages {
                    redo_page(pool, id, changes, end, &mut stats)
                        .map_err(|error| corrupt_redo(segment, lsn, id, error))?;
                }
            }
        }
        Ok(stats)
    }
}

/// Why a logged change dirtied its page (a page of `kind`), for the pool's counts of pages
/// dirtied by cause: a heap insert is a new version (and a heap page's image, logged only
/// when a page is formatted for one); a header rewrite is an old version's stamp when a
/// transaction made it (`writer`), else vacuum's freezing; B+-tree changes and images of
/// its pages are the index's; pruning, vacuum and the commit log are other changes.
pub(crate) fn cause_of(change: &PageChange<'_>, kind: u16, writer: Option<u64>) -> DirtyCause {
    match change {
        PageChange::HeapInsert { .. } => DirtyCause::NewVersion,
        PageChange::HeapSetHeader { .. } if writer.is_some() => DirtyCause::OldVersionStamp,
        PageChange::BTreePut { .. } | PageChange::BTreeRemove { .. } => DirtyCause::Index,
        PageChange::Image => match kind {
            KIND_HEAP_PAGE => DirtyCause::NewVersion,
            KIND_BTREE_META | KIND_BTREE_NODE => DirtyCause::Index,
            _ => DirtyCause::Other,
        },
        PageChange::HeapSetHeader { .. }
        | PageChange::HeapPrune { .. }
        | PageChange::HeapFreeDead { .. }
        | PageChange::CommitLogSet { .. }
        | PageChange::CommitLogReserve { .. }
        | PageChange::UndoWrite { .. } => DirtyCause::Other,
    }
}

/// Appends a change's op, payload length and payload (not an image).
fn encode_change(body: &mut Vec<u8>, change: &PageChange<'_>) {
    let (op, payload): (u8, Vec<u8>) = match change {
        PageChange::Image => unreachable!("images are logged whole by the caller"),
        PageChange::BTreePut { key, value } => {
            let mut payload = Vec::with_capacity(2 + key.len() + value.len());
            payload.extend_from_slice(&(key.len() as u16).to_le_bytes());
            payload.extend_from_slice(key);
            payload.extend_from_slice(value);
            (OP_BTREE_PUT, payload)
        }
        PageChange::BTreeRemove { key } => (OP_BTREE_REMOVE, key.to_vec()),
        PageChange::HeapInsert { line, header, data } => {
            let mut payload = vec![0; 2 + TUPLE_HEADER_BYTES];
            payload[..2].copy_from_slice(&line.to_le_bytes());
            header.encode(&mut payload[2..]);
            payload.extend_from_slice(data);
            (OP_HEAP_INSERT, payload)
        }
        PageChange::HeapSetHeader { line, header } => {
            let mut payload = vec![0; 2 + TUPLE_HEADER_BYTES];
            payload[..2].copy_from_slice(&line.to_le_bytes());
            header.encode(&mut payload[2..]);
            (OP_HEAP_SET_HEADER, payload)
        }
        PageChange::HeapPrune { plan } => {
            let mut payload = Vec::new();
            payload.extend_from_slice(&(plan.redirected.len() as u16).to_le_bytes());
            for (root, target) in &plan.redirected {
                payload.extend_from_slice(&root.to_le_bytes());
                payload.extend_from_slice(&target.to_le_bytes());
            }
            for lines in [&plan.dead, &plan.unused] {
                payload.extend_from_slice(&(lines.len() as u16).to_le_bytes());
                for line in lines {
                    payload.extend_from_slice(&line.to_le_bytes());
                }
            }
            // Eager pruning's relinks follow; a plan without them ends here, as every
            // prune record did before there were any.
            if !plan.relinked.is_empty() {
                payload.extend_from_slice(&(plan.relinked.len() as u16).to_le_bytes());
                for (line, header) in &plan.relinked {
                    payload.extend_from_slice(&line.to_le_bytes());
                    let mut bytes = [0u8; TUPLE_HEADER_BYTES];
                    header.encode(&mut bytes);
                    payload.extend_from_slice(&bytes);
                }
            }
            (OP_HEAP_PRUNE, payload)
        }
        PageChange::HeapFreeDead { lines } => {
            let mut payload = Vec::with_capacity(2 * lines.len());
            for line in lines.iter() {
                payload.extend_from_slice(&line.to_le_bytes());
            }
            (OP_HEAP_FREE_DEAD, payload)
        }
        PageChange::CommitLogSet { slot, value } => {
            let mut payload = slot.to_le_bytes().to_vec();
            payload.extend_from_slice(&value.to_le_bytes());
            (OP_COMMIT_LOG_SET, payload)
        }
        PageChange::CommitLogReserve { up_to } => {
            (OP_COMMIT_LOG_RESERVE, up_to.to_le_bytes().to_vec())
        }
        PageChange::UndoWrite { at, bytes } => {
            let mut payload = at.to_le_bytes().to_vec();
            payload.extend_from_slice(bytes);
            (OP_UNDO_WRITE, payload)
        }
    };
    body.push(op);
    body.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    body.extend_from_slice(&payload);
}

/// Errors of redo are reported at the record; I/O errors stay I/O errors.
fn corrupt_redo(segment: &Segment, lsn: u64, id: PageId, error: Error) -> Error {
    match error {
        Error::Corruption { reason, .. } | Error::PageOutOfRange { file: reason, .. } => {
            segment.corruption(lsn, format!("redoing {id}: {reason}"))
        }
        other => other,
    }
}

/// Redoes one page's changes of the record ending at `end`.
fn redo_page(
    pool: &BufferPool,
    id: PageId,
    changes: Vec<LoggedChange<'_>>,
    end: u64,
    stats: &mut RedoStats,
) -> Result<()> {
    pool.extend_to(id.file, id.block + 1)?;
    if let [LoggedChange::Image { kind, body }] = changes[..] {
        // Never read the copy on disk: it may be torn (L3).
        let mut page = pool.overwrite(id)?;
        page.set_kind(kind);
        page.body_mut().copy_from_slice(body);
        page.set_lsn(end);
        stats.images_restored += 1;
        return Ok(());
    }
    let mut page = pool.write(id)?;
    if page.lsn() >= end {
        stats.changes_skipped += changes.len() as u64;
        return Ok(());
    }
    for change in changes {
        match change {
            LoggedChange::Image { .. } => {
                return Err(Error::Corruption {
                    file: format!("file {}", id.file.0),
                    offset: id.offset(),
                    reason: "a page image among other changes of its page".into(),
                })
            }
            LoggedChange::BTreePut { key, value } => super::btree::redo_put(&mut page, key, value)?,
            LoggedChange::BTreeRemove { key } => super::btree::redo_remove(&mut page, key)?,
            LoggedChange::CommitLogSet { slot, value } => {
                super::commit_log::redo_set(&mut page, slot, value)?
            }
            LoggedChange::CommitLogReserve { up_to } => {
                super::commit_log::redo_reserve(&mut page, up_to)?
            }
            LoggedChange::UndoWrite { at, bytes } => super::undo::redo_write(&mut page, at, bytes)?,
            heap_change => redo_heap(&mut page, heap_change)?,
        }
        stats.changes_applied += 1;
    }
    page.set_lsn(end);
    Ok(())
}

/// Redoes a heap page change; a change that does not apply is corruption.
fn redo_heap(page: &mut PageMut<'_>, change: LoggedChange<'_>) -> Result<()> {
    let id = page.id();
    let defect = |reason: String| Error::Corruption {
        file: format!("heap file {}", id.file.0),
        offset: id.offset(),
        reason,
    };
    if page.kind() != super::KIND_HEAP_PAGE {
        return Err(defect(format!(
            "a heap change on a page of kind {:#06x}",
            page.kind()
        )));
    }
    let mut heap = HeapPage::new(page.body_mut());
    heap.check().map_err(&defect)?;
    match change {
        LoggedChange::HeapInsert { line, header, data } => {
            let inserted = heap.insert(&header, data);
            if inserted != Some(line) {
                return Err(defect(format!(
                    "a logged insert at line {line} went to {inserted:?}"
                )));
            }
        }
        LoggedChange::HeapSetHeader { line, header } => {
            if !heap.set_header(line, &header) {
                return Err(defect(format!(
                    "a logged header of line {line}, not a tuple"
                )));
            }
        }
        LoggedChange::HeapPrune(plan) => heap.execute_prune(&plan).map_err(&defect)?,
        LoggedChange::HeapFreeDead(lines) => {
            heap.free_dead_lines(&lines).map_err(&defect)?;
        }
        LoggedChange::Image { .. }
        | LoggedChange::BTreePut { .. }
        | LoggedChange::BTreeRemove { .. }
        | LoggedChange::CommitLogSet { .. }
        | LoggedChange::CommitLogReserve { .. }
        | LoggedChange::UndoWrite { .. } => unreachable!("not a heap change"),
    }
    Ok(())
}

/// Decodes a [`KIND_PAGES`] record's body: each page and its change. Never panics, whatever
/// the bytes (fuzzed); the reason of the first defect otherwise.
pub(crate) fn decode_pages(
    body: &[u8],
) -> std::result::Result<Vec<(PageId, Vec<LoggedChange<'_>>)>, String> {
    let mut at = 0usize;
    let mut take = |n: usize| -> std::result::Result<&[u8], String> {
        let bytes = at
            .checked_add(n)
            .and_then(|end| body.get(at..end))
            .ok_or_else(|| format!("a page record ends early (at byte {at}, {n} more wanted)"))?;
        at += n;
        Ok(bytes)
    };
    if take(1)? != [KIND_PAGES] {
        return Err("not a page record".into());
    }
    let count = u16::from_le_bytes(take(2)?.try_into().expect("two bytes"));
    if count == 0 {
        return Err("a page record of no page".into());
    }
    let mut pages = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let file = u32::from_le_bytes(take(4)?.try_into().expect("four bytes"));
        let block = u32::from_le_bytes(take(4)?.try_into().expect("four bytes"));
        if block == u32::MAX {
            return Err(format!("block {block} is past any file"));
        }
        let n = u16::from_le_bytes(take(2)?.try_into().expect("two bytes"));
        if n == 0 {
            return Err(format!("no change to block {block}"));
        }
        let mut changes = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let op = take(1)?[0];
            let len = u32::from_le_bytes(take(4)?.try_into().expect("four bytes")) as usize;
            let payload = take(len)?;
            let change = match op {
                OP_IMAGE => {
                    if payload.len() != 2 + BODY_BYTES {
                        return Err(format!("a page image of {} bytes", payload.len()));
                    }
                    LoggedChange::Image {
                        kind: u16::from_le_bytes([payload[0], payload[1]]),
                        body: &payload[2..],
                    }
                }
                OP_BTREE_PUT => {
                    let key_len = payload
                        .get(..2)
                        .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
                        .ok_or("a B+-tree put without its key length")?;
                    let key = payload
                        .get(2..2 + key_len)
                        .ok_or("a B+-tree put's key runs past its payload")?;
                    LoggedChange::BTreePut {
                        key,
                        value: &payload[2 + key_len..],
                    }
                }
                OP_BTREE_REMOVE => LoggedChange::BTreeRemove { key: payload },
                OP_HEAP_INSERT | OP_HEAP_SET_HEADER => {
                    if payload.len() < 2 + TUPLE_HEADER_BYTES
                        || (op == OP_HEAP_SET_HEADER && payload.len() != 2 + TUPLE_HEADER_BYTES)
                    {
                        return Err(format!("a heap tuple change of {} bytes", payload.len()));
                    }
                    let line = u16::from_le_bytes([payload[0], payload[1]]);
                    let header = TupleHeader::decode(&payload[2..2 + TUPLE_HEADER_BYTES]);
                    if op == OP_HEAP_INSERT {
                        LoggedChange::HeapInsert {
                            line,
                            header,
                            data: &payload[2 + TUPLE_HEADER_BYTES..],
                        }
                    } else {
                        LoggedChange::HeapSetHeader { line, header }
                    }
                }
                OP_HEAP_PRUNE => LoggedChange::HeapPrune(decode_prune(payload)?),
                OP_HEAP_FREE_DEAD => {
                    if payload.len() % 2 != 0 {
                        return Err("a list of lines of an odd length".into());
                    }
                    LoggedChange::HeapFreeDead(
                        payload
                            .chunks_exact(2)
                            .map(|b| u16::from_le_bytes([b[0], b[1]]))
                            .collect(),
                    )
                }
                OP_COMMIT_LOG_SET => {
                    if payload.len() != 10 {
                        return Err(format!(
                            "a commit log entry change of {} bytes",
                            payload.len()
                        ));
                    }
                    LoggedChange::CommitLogSet {
                        slot: u16::from_le_bytes([payload[0], payload[1]]),
                        value: u64::from_le_bytes(payload[2..].try_into().expect("eight bytes")),
                    }
                }
                OP_COMMIT_LOG_RESERVE => LoggedChange::CommitLogReserve {
                    up_to: u64::from_le_bytes(
                        payload
                            .try_into()
                            .map_err(|_| format!("a reservation of {} bytes", payload.len()))?,
                    ),
                },
                OP_UNDO_WRITE => {
                    if payload.len() < 2 {
                        return Err(format!("an undo write of {} bytes", payload.len()));
                    }
                    LoggedChange::UndoWrite {
                        at: u16::from_le_bytes([payload[0], payload[1]]),
                        bytes: &payload[2..],
                    }
                }
                other => return Err(format!("unknown page change {other}")),
            };
            changes.push(change);
        }
        pages.push((PageId::new(FileNo(file), block), changes));
    }
    if at != body.len() {
        return Err(format!(
            "{} bytes after the last page change",
            body.len() - at
        ));
    }
    Ok(pages)
}

/// Decodes a prune's plan: redirect pairs, dead lines, unused lines, each counted.
/// Reads a record's payload front to back.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        if self.rest.len() < n {
            return Err("a prune's plan ends early".to_string());
        }
        let (bytes, after) = self.rest.split_at(n);
        self.rest = after;
        Ok(bytes)
    }

    fn u16(&mut self) -> std::result::Result<u16, String> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
}

fn decode_prune(payload: &[u8]) -> std::result::Result<PrunePlan, String> {
    let mut cursor = Cursor { rest: payload };
    let mut plan = PrunePlan::default();
    for _ in 0..cursor.u16()? {
        plan.redirected.push((cursor.u16()?, cursor.u16()?));
    }
    for _ in 0..cursor.u16()? {
        plan.dead.push(cursor.u16()?);
    }
    for _ in 0..cursor.u16()? {
        plan.unused.push(cursor.u16()?);
    }
    if cursor.rest.is_empty() {
        return Ok(plan);
    }
    let count = cursor.u16()?;
    if count == 0 {
        return Err("an empty list of relinks (never written)".into());
    }
    for _ in 0..count {
        let line = cursor.u16()?;
        let header = TupleHeader::decode(cursor.take(TUPLE_HEADER_BYTES)?);
        plan.relinked.push((line, header));
    }
    if !cursor.rest.is_empty() {
        return Err("bytes after a prune's plan".into());
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of logged change dirties its page under the cause the counters by
    /// cause name: a header rewrite is a stamp only when a transaction made it, an image
    /// is the index's on a B+-tree page, a new version's on a heap page (its formatting),
    /// another change elsewhere.
    #[test]
    fn logged_changes_dirty_their_pages_by_their_cause() {
        use DirtyCause::*;
        let header = TupleHeader {
            xmin: 7,
            xmax: 0,
            ctid_block: 0,
            ctid_line: 1,
            infomask: 0,
        };
        let plan = PrunePlan::default();
        let heap = KIND_HEAP_PAGE;
        let cases: [(PageChange<'_>, u16, Option<u64>, DirtyCause); 13] = [
            (
                PageChange::HeapInsert {
                    line: 1,
                    header,
                    data: b"x",
                },
                heap,
                Some(7),
                NewVersion,
            ),
            (
                PageChange::HeapInsert {
                    line: 1,
                    header,
                    data: b"x",
                },
                heap,
                None,
                NewVersion,
            ),
            (
                PageChange::HeapSetHeader { line: 1, header },
                heap,
                Some(7),
                OldVersionStamp,
            ),
            (
                PageChange::HeapSetHeader { line: 1, header },
                heap,
                None,
                Other,
            ),
            (PageChange::HeapPrune { plan: &plan }, heap, None, Other),
            (PageChange::HeapFreeDead { lines: &[1] }, heap, None, Other),
            (
                PageChange::BTreePut {
                    key: b"k",
                    value: b"",
                },
                KIND_BTREE_NODE,
                None,
                Index,
            ),
            (
                PageChange::BTreeRemove { key: b"k" },
                KIND_BTREE_NODE,
                None,
                Index,
            ),
            (PageChange::Image, KIND_BTREE_NODE, None, Index),
            (PageChange::Image, KIND_BTREE_META, None, Index),
            (PageChange::Image, heap, None, NewVersion),
            (
                PageChange::Image,
                super::super::commit_log::KIND_COMMIT_LOG_PAGE,
                None,
                Other,
            ),
            (
                PageChange::CommitLogSet { slot: 0, value: 1 },
                0,
                None,
                Other,
            ),
        ];
        for (change, kind, writer, cause) in cases {
            assert_eq!(
                cause_of(&change, kind, writer),
                cause,
                "{change:?} on {kind:#x}"
            );
        }
    }

    proptest::proptest! {
        /// The decoder of page records never panics, whatever the bytes, and a record cut
        /// anywhere or with a byte changed in its framing fields decodes to an error or
        /// to something that is not the original.
        #[test]
        fn decoding_any_bytes_never_panics(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            count in 0u16..4,
        ) {
            let mut body = vec![KIND_PAGES];
            body.extend_from_slice(&count.to_le_bytes());
            body.extend_from_slice(&bytes);
            let _ = decode_pages(&body);
            let _ = decode_pages(&bytes);
        }

        /// A prune's plan, eager relinks or none, decodes to itself; any payload decodes
        /// or fails without a panic.
        #[test]
        fn a_prune_plan_round_trips(
            redirected in proptest::collection::vec((1u16..300, 1u16..300), 0..5),
            dead in proptest::collection::vec(1u16..300, 0..5),
            unused in proptest::collection::vec(1u16..300, 0..5),
            relinked in proptest::collection::vec((1u16..300, proptest::prelude::any::<[u64; 3]>()), 0..4),
            noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
        ) {
            let plan = PrunePlan {
                redirected,
                dead,
                unused,
                relinked: relinked
                    .into_iter()
                    .map(|(line, [xmin, xmax, rest])| {
                        (line, TupleHeader {
                            xmin,
                            xmax,
                            ctid_block: rest as u32,
                            ctid_line: (rest >> 32) as u16,
                            infomask: (rest >> 48) as u16,
                        })
                    })
                    .collect(),
            };
            let mut body = vec![KIND_PAGES, 1, 0];
            body.extend_from_slice(&3u32.to_le_bytes());
            body.extend_from_slice(&9u32.to_le_bytes());
            body.extend_from_slice(&1u16.to_le_bytes());
            encode_change(&mut body, &PageChange::HeapPrune { plan: &plan });
            let decoded = decode_pages(&body).unwrap();
            proptest::prop_assert_eq!(
                decoded,
                vec![(PageId::new(FileNo(3), 9), vec![LoggedChange::HeapPrune(plan)])]
            );
            let _ = decode_prune(&noise);
        }

        #[test]
        fn a_cut_record_never_decodes(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..40),
            value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            cut in 1usize..80,
        ) {
            let mut body = vec![KIND_PAGES, 1, 0];
            body.extend_from_slice(&3u32.to_le_bytes());
            body.extend_from_slice(&9u32.to_le_bytes());
            body.extend_from_slice(&1u16.to_le_bytes());
            body.push(OP_BTREE_PUT);
            body.extend_from_slice(&((2 + key.len() + value.len()) as u32).to_le_bytes());
            body.extend_from_slice(&(key.len() as u16).to_le_bytes());
            body.extend_from_slice(&key);
            body.extend_from_slice(&value);
            let decoded = decode_pages(&body).unwrap();
            proptest::prop_assert_eq!(
                decoded,
                vec![(
                    PageId::new(FileNo(3), 9),
                    vec![LoggedChange::BTreePut { key: &key, value: &value }]
                )]
            );
            let cut = cut.min(body.len() - 1);
            proptest::prop_assert!(decode_pages(&body[..cut]).is_err());
        }
    }
}
