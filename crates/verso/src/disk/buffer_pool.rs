//! The buffer pool: a fixed number of frames holding pages of files behind the file trait,
//! with pins, shared and exclusive page latches, an eviction policy
//! ([`super::replacement`]), write-back that respects the write-ahead log, and counters of
//! what reached the disk and of why pages were dirtied (design note:
//! `docs/design/buffer-pool.md`, "Counters by cause").
//!
//! # Invariants
//!
//! - **B1** A frame's page-table mapping (`Frame::holds`, the table's map) and its pin
//!   count's rise from zero change only under the table lock. Pins fall without it.
//! - **B2** A frame's latch is held only by a thread that holds one of its pins, and every
//!   guard releases its latch before its pin. So a frame found unpinned under the table lock
//!   has a free latch, and a frame cannot be evicted or remapped while anyone reads it.
//! - **B3** `Frame::dirty` is set only under the frame's exclusive latch and cleared only
//!   under its shared latch after the page reached the file (or with the page, B7). Under the table lock, an
//!   unpinned frame's dirty flag cannot change (B1, B2): the pool evicts only clean frames,
//!   and writes a dirty victim back (pinned and latched shared under the table lock, so
//!   the evicting thread never waits for a latch it does not already hold; written outside
//!   the lock) before it retries.
//! - **B4** Write-ahead rule: a page reaches its file only after
//!   [`WriteAheadLog::make_durable`] returned for the page's LSN.
//! - **B5** `FrameData::loaded` is `Some(id)` exactly when the frame's bytes are page `id`'s
//!   newest contents; a thread that finds a frame through the table checks it under the
//!   latch (a load that failed leaves it `None`, unmapped, and the finder retries).
//! - **B6** After a file sync failed, nothing more is written or read: pages written since
//!   the last successful sync may be lost (Linux drops them) while their frames are clean,
//!   so the pool no longer knows what the files hold. Every call fails with
//!   [`Error::DurabilityLost`]; recovery from the log rebuilds them at the next open.
//! - **B7** A page leaves the pool unwritten ([`BufferPool::drop_unwritten`]: SI-CV's
//!   "an aborted transaction's own pages are never written") only under the table lock,
//!   unpinned (so no write-back is under way: eviction and flush pin the frame under the
//!   table lock before writing it, B1), and only if it was never written since it came
//!   in as a page never written (`Frame::never_written`): its file then holds zeros or
//!   nothing there, which reads as a new page, exactly what the pool's copy becomes. A
//!   write-back that pins the frame first makes the drop refuse; a drop that unmaps it
//!   first leaves a flush or an eviction nothing to find. The caller answers for the log
//!   (see the method).

use std::collections::HashMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use super::page::{FileNo, Page, PageId, PAGE_SIZE};
use super::replacement::{Replacement, ReplacementPolicy};
use crate::durability::io_error;
use crate::fs::File;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Latch, Mutex, ReadGuard, WriteGuard};
use crate::{Error, Result};

/// The log the buffer pool's write-back waits on (invariant B4).
pub trait WriteAheadLog: Send + Sync + fmt::Debug {
    /// Returns once the log is durable up to and including the record at `lsn`, or fails
    /// (then the page is not written).
    fn make_durable(&self, lsn: u64) -> Result<()>;
}

/// For pages that no log covers (their LSN stays 0): scratch files, tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unlogged;

impl WriteAheadLog for Unlogged {
    fn make_durable(&self, lsn: u64) -> Result<()> {
        debug_assert_eq!(lsn, 0, "a page with an LSN in an unlogged pool");
        Ok(())
    }
}

/// Tells the pool which transactions aborted, for
/// [`BufferPoolStats::pages_written_for_aborted_transactions`] ([`BufferPool::watch_aborts`]).
/// Asked during a write-back, with the page latched: it answers from memory, never waits
/// and never reads a page.
pub trait AbortedTransactions: Send + Sync {
    /// Whether transaction `xid` is known to have aborted.
    fn has_aborted(&self, xid: u64) -> bool;
}

/// Why a page changed: what the pool's counts of pages dirtied are separated by
/// ([`PageMut::note_change`]; the page log notes every change it logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DirtyCause {
    /// A new tuple version placed on a heap page: a row inserted or an update's new
    /// version (and the formatting of a new heap page that takes it).
    NewVersion,
    /// An old version stamped as replaced or deleted: its `xmax` and `ctid` set by the
    /// writer that replaced it.
    OldVersionStamp,
    /// Hint bits set on tuples (a fate learned by a reader or a writer; no record
    /// describes them).
    HintBits,
    /// A B+-tree page changed: a leaf's entry put or removed, a split's pages, the meta
    /// page.
    Index,
    /// Anything else: pruning, vacuum (freeing dead lines, freezing), the commit log.
    Other,
}

impl DirtyCause {
    /// Every cause, in the order of the counters.
    pub const ALL: [DirtyCause; 5] = [
        DirtyCause::NewVersion,
        DirtyCause::OldVersionStamp,
        DirtyCause::HintBits,
        DirtyCause::Index,
        DirtyCause::Other,
    ];

    fn index(self) -> usize {
        self as usize
    }

    fn bit(self) -> u32 {
        1 << self.index()
    }
}

/// How a page is latched while pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Shared,
    Exclusive,
}

/// What the pool counted since it was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BufferPoolStats {
    /// Frames in the pool.
    pub frames: u64,
    /// Pins of a page already in the pool.
    pub hits: u64,
    /// Pins that had to bring the page in (a read, or a new page).
    pub misses: u64,
    /// Pages read from files.
    pub pages_read: u64,
    /// Pages written to files.
    pub pages_written: u64,
    /// Of those, pages written right after the page before them in the same file (SI-CV's
    /// sequential writes); the others are random.
    pub sequential_writes: u64,
    /// Pages written back to free a frame for another page (the rest were flushes).
    pub eviction_writes: u64,
    /// Of the pages written, those whose changes since their previous write (hint bits,
    /// pruning and index changes aside) were all made by one transaction that had
    /// aborted by the time of the write: writes SI-CV's placement avoids ("if T_j aborts
    /// Block2 is not written"). Heap pages only (index changes name no transaction); 0
    /// until [`BufferPool::watch_aborts`]; a page written while its writer still ran is
    /// not counted (its fate was not known).
    pub pages_written_for_aborted_transactions: u64,
    /// Pages that left the pool dirty without being written, because the only
    /// transaction that changed them since they were new aborted
    /// ([`BufferPool::drop_unwritten`]: SI-CV's "if T_j aborts Block2 is not written").
    pub pages_dropped_unwritten: u64,
    /// Pages dirtied: a page going from clean to dirty (its first change since it was
    /// read, allocated or last written), whatever the change. Each such page is written
    /// once before it can be dirtied again.
    pub pages_dirtied: u64,
    /// Pages dirtied by new versions ([`DirtyCause::NewVersion`]): a page counts once per
    /// cause per clean-to-dirty cycle, so a page that takes a new version and then an
    /// old version's stamp before it is written counts here and under
    /// [`BufferPoolStats::pages_dirtied_by_old_version_stamps`]; changes to a page
    /// already dirtied by the same cause add nothing.
    pub pages_dirtied_by_new_versions: u64,
    /// Pages dirtied by stamps on old versions ([`DirtyCause::OldVersionStamp`]: `xmax`
    /// and `ctid` of the replaced or deleted version), counted as above.
    pub pages_dirtied_by_old_version_stamps: u64,
    /// Pages dirtied by hint bits ([`DirtyCause::HintBits`]), counted as above.
    pub pages_dirtied_by_hint_bits: u64,
    /// Index pages dirtied ([`DirtyCause::Index`]: B+-tree leaf and inner changes),
    /// counted as above.
    pub pages_dirtied_by_index_changes: u64,
    /// Pages dirtied by anything else ([`DirtyCause::Other`]: pruning, vacuum, the commit
    /// log), counted as above. Changes noted by no cause (the free-space map's pages,
    /// redo at recovery) count only in [`BufferPoolStats::pages_dirtied`].
    pub pages_dirtied_by_other_changes: u64,
    /// Pages that left the pool for another.
    pub evictions: u64,
    /// Pages added at the end of a file.
    pub pages_allocated: u64,
    /// File syncs.
    pub file_syncs: u64,
}

impl BufferPoolStats {
    /// The share of pins served from the pool (1 when nothing was pinned).
    pub fn hit_ratio(&self) -> f64 {
        let pins = self.hits + self.misses;
        if pins == 0 {
            1.0
        } else {
            self.hits as f64 / pins as f64
        }
    }

    /// Pages written that were not sequential.
    pub fn random_writes(&self) -> u64 {
        // The two counters are read one after the other while writes go on.
        self.pages_written.saturating_sub(self.sequential_writes)
    }

    /// The share of pages written that were sequential (0 when none were written).
    pub fn sequential_write_share(&self) -> f64 {
        if self.pages_written == 0 {
            0.0
        } else {
            self.sequential_writes.min(self.pages_written) as f64 / self.pages_written as f64
        }
    }

    /// Pages dirtied by `cause` (the counter of that cause).
    pub fn pages_dirtied_by(&self, cause: DirtyCause) -> u64 {
        match cause {
            DirtyCause::NewVersion => self.pages_dirtied_by_new_versions,
            DirtyCause::OldVersionStamp => self.pages_dirtied_by_old_version_stamps,
            DirtyCause::HintBits => self.pages_dirtied_by_hint_bits,
            DirtyCause::Index => self.pages_dirtied_by_index_changes,
            DirtyCause::Other => self.pages_dirtied_by_other_changes,
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    pages_read: AtomicU64,
    pages_written: AtomicU64,
    sequential_writes: AtomicU64,
    eviction_writes: AtomicU64,
    evictions: AtomicU64,
    pages_allocated: AtomicU64,
    file_syncs: AtomicU64,
    pages_written_for_aborted_transactions: AtomicU64,
    pages_dropped_unwritten: AtomicU64,
    pages_dirtied: AtomicU64,
    /// By [`DirtyCause::index`].
    pages_dirtied_by: [AtomicU64; DirtyCause::ALL.len()],
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// `Frame::holds` of a frame that holds no page.
const NO_PAGE: u64 = u64::MAX;

struct Frame {
    latch: Latch<FrameData>,
    /// The packed id of the page mapped to this frame, or [`NO_PAGE`] (B1).
    holds: AtomicU64,
    pins: AtomicU32,
    /// The page changed since it was last written (B3).
    dirty: AtomicBool,
    /// The [`DirtyCause::bit`]s noted since the page was last written: set with dirty,
    /// under the exclusive latch, and cleared with it, under the shared latch (B3).
    causes: AtomicU32,
    /// The transaction whose changes the page took since it was last written: 0 if
    /// none, [`SEVERAL_WRITERS`] if more than one. Set and cleared as `causes`.
    writer: AtomicU64,
    /// B7: the file holds nothing of the page's present contents: it came into the frame
    /// as a page never written (allocated, or read as zeros) and has not been written
    /// since. Set when the frame is loaded (pinned, latched exclusive), cleared with
    /// `dirty` by a write-back (pinned, latched shared); so under the table lock an
    /// unpinned frame's flag cannot change.
    never_written: AtomicBool,
}

/// `Frame::writer` of a page changed by more than one transaction since its last write.
const SEVERAL_WRITERS: u64 = u64::MAX;

struct FrameData {
    page: Page,
    /// B5.
    loaded: Option<PageId>,
}

impl FrameData {
    /// The page a guard holds: loaded, since a guard is handed out only then (B5).
    fn id(&self) -> PageId {
        self.loaded
            .expect("a guard's frame holds its loaded page (B5)")
    }
}

struct Table {
    /// Packed page id to frame index.
    map: HashMap<u64, usize, foldhash::fast::FixedState>,
    /// Frames that never held a page.
    free: Vec<usize>,
    policy: Box<dyn Replacement>,
}

struct PageFile {
    path: PathBuf,
    file: Box<dyn File>,
    /// The number of blocks handed out: the file's pages, written or not yet.
    blocks: AtomicU32,
}

/// A fixed set of frames caching the pages of the files attached to it. See the module
/// documentation for its invariants.
pub struct BufferPool {
    frames: Box<[Frame]>,
    table: Mutex<Table>,
    /// Indexed by file number.
    files: parking_lot::RwLock<Vec<Option<PageFile>>>,
    log: Arc<dyn WriteAheadLog>,
    counters: Counters,
    /// The packed id of the page written last, or [`NO_PAGE`].
    last_written: AtomicU64,
    /// B6: why durability was lost, once it was.
    lost: OnceLock<String>,
    /// Who tells which transactions aborted ([`BufferPool::watch_aborts`]).
    aborts: OnceLock<Arc<dyn AbortedTransactions>>,
    /// For tests of interleavings ([`BufferPool::inject_after_counting_a_block`]), and
    /// the file whose allocation runs it.
    after_counting: super::injection::Injection,
    after_counting_in: std::sync::atomic::AtomicU32,
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("frames", &self.frames.len())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// What picking a frame for a page found.
enum Victim<'a> {
    /// A clean unpinned frame, ready for the page (still under the table lock).
    Clean(usize),
    /// A dirty unpinned frame, now pinned by the caller and latched shared (the latch taken
    /// under the table lock, where it is free by B2): write it back, unpin, retry. Waiting
    /// for its latch after the table lock is let go could deadlock: a thread that pinned
    /// the frame meanwhile may latch it exclusive and then wait for a latch the evicting
    /// thread holds.
    Dirty(usize, ReadGuard<'a, FrameData>),
}

impl BufferPool {
    /// A pool of `frames` frames (`frames * PAGE_SIZE` bytes of pages, plus about 100 bytes
    /// a frame), whose write-backs wait on `log`.
    pub fn new(frames: usize, policy: ReplacementPolicy, log: Arc<dyn WriteAheadLog>) -> Self {
        assert!(frames > 0, "a buffer pool has at least one frame");
        let frames_vec: Vec<Frame> = (0..frames)
            .map(|_| Frame {
                latch: Latch::new(FrameData {
                    page: Page::zeroed(),
                    loaded: None,
                }),
                holds: AtomicU64::new(NO_PAGE),
                pins: AtomicU32::new(0),
                dirty: AtomicBool::new(false),
                causes: AtomicU32::new(0),
                writer: AtomicU64::new(0),
                never_written: AtomicBool::new(false),
            })
            .collect();
        BufferPool {
            frames: frames_vec.into_boxed_slice(),
            table: Mutex::new(Table {
                map: HashMap::with_capacity_and_hasher(frames, Default::default()),
                // Popped from the end: frame 0 first.
                free: (0..frames).rev().collect(),
                policy: policy.build(frames),
            }),
            files: parking_lot::RwLock::new(Vec::new()),
            log,
            counters: Counters::default(),
            last_written: AtomicU64::new(NO_PAGE),
            lost: OnceLock::new(),
            aborts: OnceLock::new(),
            after_counting: super::injection::Injection::default(),
            after_counting_in: std::sync::atomic::AtomicU32::new(u32::MAX),
        }
    }

    /// For tests of interleavings: runs `hook` once, in the next [`BufferPool::allocate`]
    /// in `file`, after its block is counted in the file (so [`BufferPool::file_pages`]
    /// includes it) and before the block is pinned; the hook may let other threads read
    /// the pool meanwhile
    /// (`regression_a_vacuum_beside_an_extension_never_offers_the_new_block`).
    pub fn inject_after_counting_a_block(&self, file: FileNo, hook: Box<dyn FnOnce() + Send>) {
        self.after_counting_in.store(file.0, Ordering::Release);
        self.after_counting.set(hook);
    }

    /// A pool of about `bytes` of pages (at least one frame).
    pub fn with_bytes(
        bytes: usize,
        policy: ReplacementPolicy,
        log: Arc<dyn WriteAheadLog>,
    ) -> Self {
        BufferPool::new((bytes / PAGE_SIZE).max(1), policy, log)
    }

    /// Counts from now on, among the pages written, those written only for transactions
    /// that `aborts` says aborted ([`BufferPoolStats::pages_written_for_aborted_transactions`]).
    /// The first call sets it; later ones are ignored (the disk engine's transactions call
    /// it when they open).
    pub fn watch_aborts(&self, aborts: Arc<dyn AbortedTransactions>) {
        let _ = self.aborts.set(aborts);
    }

    /// The number of frames.
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// Attaches a file of pages opened for reading and writing as file `number`; `path`
    /// names it in errors. The number is the file's identity: every page header records it
    /// (a page read from another file is corrupt), and the page log will name pages by it,
    /// so the layer above gives each file the same number at every open (as PostgreSQL's
    /// catalog gives a relation its file node). Numbers below [`MAX_FILES`], each once;
    /// [`Error::FileNumberInUse`] otherwise. A partial page at the file's end (a torn
    /// extension) counts as a page, which reads as corrupt until it is rewritten.
    pub fn attach(&self, number: FileNo, path: &Path, file: Box<dyn File>) -> Result<()> {
        if number.0 as usize >= MAX_FILES {
            return Err(Error::CapacityExceeded {
                what: format!("file numbers of a buffer pool ({} asked for)", number.0),
                limit: MAX_FILES,
            });
        }
        let len = file
            .len()
            .map_err(|e| io_error(path, "reading the length of a page file", &e))?;
        let blocks =
            u32::try_from(len.div_ceil(PAGE_SIZE as u64)).map_err(|_| Error::CapacityExceeded {
                what: format!("pages in the file {}", path.display()),
                limit: u32::MAX as usize,
            })?;
        let mut files = self.files.write();
        let at = number.0 as usize;
        if files.len() <= at {
            files.resize_with(at + 1, || None);
        }
        if let Some(attached) = &files[at] {
            return Err(Error::FileNumberInUse {
                number: number.0,
                path: attached.path.display().to_string(),
            });
        }
        files[at] = Some(PageFile {
            path: path.to_path_buf(),
            file,
            blocks: AtomicU32::new(blocks),
        });
        Ok(())
    }

    /// The attached file `number`.
    fn file(files: &[Option<PageFile>], number: FileNo) -> Result<&PageFile> {
        files
            .get(number.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| not_attached(number, 0))
    }

    /// The number of pages of `file` (written or allocated); [`Error::PageOutOfRange`] if
    /// no such file is attached.
    pub fn file_pages(&self, file: FileNo) -> Result<u32> {
        let files = self.files.read();
        Ok(Self::file(&files, file)?.blocks.load(Ordering::Acquire))
    }

    /// Pins page `id` and latches it shared, reading it from its file if it is not in the
    /// pool. Fails with [`Error::Corruption`] if the bytes on disk are not a page written
    /// at that address (`super::page::PageDefect`), with [`Error::Io`] if a read or a
    /// write-back for a free frame failed, and with [`Error::CapacityExceeded`] if every
    /// frame is pinned.
    pub fn read(&self, id: PageId) -> Result<PageRef<'_>> {
        let (frame, guard) = self.pin(id, Access::Shared, Load::FromFile)?;
        match guard {
            Latched::Shared(guard) => Ok(PageRef {
                pool: self,
                frame,
                guard: Some(guard),
            }),
            Latched::Exclusive(_) => unreachable!("a shared pin latches shared"),
        }
    }

    /// Pins page `id` and latches it exclusive, as [`BufferPool::read`] does otherwise.
    pub fn write(&self, id: PageId) -> Result<PageMut<'_>> {
        let (frame, guard) = self.pin(id, Access::Exclusive, Load::FromFile)?;
        Ok(self.page_mut(frame, guard))
    }

    /// Adds a page at the end of `file` and returns it pinned, latched exclusive, zeroed.
    /// It reaches the file at its first write-back (until then a crash loses it: the layer
    /// above logs the allocation).
    pub fn allocate(&self, file: FileNo) -> Result<PageMut<'_>> {
        let block = {
            let files = self.files.read();
            let page_file = Self::file(&files, file)?;
            let counter = &page_file.blocks;
            let mut current = counter.load(Ordering::Acquire);
            loop {
                let next = current
                    .checked_add(1)
                    .ok_or_else(|| Error::CapacityExceeded {
                        what: format!("pages in the file {}", page_file.path.display()),
                        limit: u32::MAX as usize,
                    })?;
                match counter.compare_exchange_weak(
                    current,
                    next,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break current,
                    Err(seen) => current = seen,
                }
            }
        };
        if self.after_counting_in.load(Ordering::Acquire) == file.0 {
            self.after_counting.run();
        }
        match self.pin(PageId::new(file, block), Access::Exclusive, Load::Zeroed) {
            Ok((frame, guard)) => {
                bump(&self.counters.pages_allocated);
                Ok(self.page_mut(frame, guard))
            }
            Err(error) => {
                // Give the block back if no later allocation took the next one; else it
                // stays a page never written, which reads as zeros.
                let files = self.files.read();
                let page_file = Self::file(&files, file).expect("attached files stay");
                let _ = page_file.blocks.compare_exchange(
                    block + 1,
                    block,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                Err(error)
            }
        }
    }

    /// Pins page `id` and latches it exclusive without reading it from its file: its bytes
    /// are the pool's copy if it is in the pool, else zeros. For recovery restoring a full
    /// page image, which must not read the copy on disk (it may be torn); the caller
    /// rewrites the page whole.
    pub fn overwrite(&self, id: PageId) -> Result<PageMut<'_>> {
        let (frame, guard) = self.pin(id, Access::Exclusive, Load::Overwrite)?;
        Ok(self.page_mut(frame, guard))
    }

    /// Makes `file` at least `blocks` pages long in the pool's eyes (pages past the end of
    /// the file read as never written): recovery redoing a change to a page allocated
    /// after the file was last extended on disk.
    pub fn extend_to(&self, file: FileNo, blocks: u32) -> Result<()> {
        let files = self.files.read();
        Self::file(&files, file)?
            .blocks
            .fetch_max(blocks, Ordering::AcqRel);
        Ok(())
    }

    /// Whether page `id` is in the pool, never written since it was new (B7), and
    /// changed since then for no transaction but `writer` (only `writer`'s changes noted
    /// with a transaction, [`PageMut::note_change`]): a hint, for a caller deciding
    /// whether [`BufferPool::drop_unwritten`] is worth preparing for; it may change as
    /// soon as it is answered. Reads nothing from a file.
    pub fn unwritten_by(&self, id: PageId, writer: u64) -> bool {
        let table = self.table.lock();
        table.map.get(&id.pack()).is_some_and(|&frame| {
            let f = &self.frames[frame];
            f.never_written.load(Ordering::Acquire) && f.writer.load(Ordering::Relaxed) == writer
        })
    }

    /// Drops page `id` from the pool without writing it (SI-CV: "if T_j aborts Block2 is
    /// not written"), if, under the table lock: it is in the pool, no one pins it (so no
    /// write-back of it is under way, and none can start: eviction and flush pin under
    /// the table lock), it was never written since it was new (B7: its file holds zeros or
    /// nothing there), the only transaction its changes were noted for is `writer`, and
    /// its LSN is still `lsn` (nothing logged it since the caller looked). Returns whether
    /// it dropped it. Afterwards the page reads as new (zeros), as its file has it: its
    /// next change is logged as a full image (the page log's L3, its LSN being 0).
    ///
    /// The caller answers for the log, which still holds the dropped changes: recovery
    /// may replay them (onto a page no one else changed) from a redo point before them,
    /// while a checkpoint whose flush passed the page after the drop skips them. So
    /// nothing that survives a crash may refer to what the page held unless replaying the
    /// log brings it back: the disk heap removes its aborted owner's index entries to the
    /// page's tuples, logged, and makes the log durable past those removals, before it
    /// calls this (`HeapFile::drop_aborted_pages`). File protocol: nothing is written,
    /// synced or appended here.
    pub fn drop_unwritten(&self, id: PageId, writer: u64, lsn: u64) -> Result<bool> {
        debug_assert!(writer != 0 && writer != SEVERAL_WRITERS);
        self.check_durability()?;
        let key = id.pack();
        let table = &mut *self.table.lock();
        let Some(&frame) = table.map.get(&key) else {
            return Ok(false); // evicted: written back if it was dirty
        };
        let f = &self.frames[frame];
        // B1: no pin can rise while the table lock is held, and an unpinned frame's
        // `never_written` and `writer` cannot change (B3, B7).
        if f.pins.load(Ordering::Acquire) != 0
            || !f.never_written.load(Ordering::Acquire)
            || f.writer.load(Ordering::Relaxed) != writer
        {
            return Ok(false);
        }
        // Unpinned, so nobody holds the latch (B2).
        let mut data = f
            .latch
            .try_write()
            .expect("an unpinned frame's latch is free (B2)");
        debug_assert_eq!(
            data.loaded,
            Some(id),
            "a mapped, unpinned frame is loaded (B5)"
        );
        if data.loaded != Some(id) || data.page.lsn() != lsn {
            return Ok(false);
        }
        data.loaded = None;
        data.page.clear();
        drop(data);
        table.map.remove(&key);
        f.holds.store(NO_PAGE, Ordering::Release);
        // The first victim, as a frame whose load failed.
        table.policy.forget(frame);
        f.dirty.store(false, Ordering::Release);
        f.causes.store(0, Ordering::Relaxed);
        f.writer.store(0, Ordering::Relaxed);
        f.never_written.store(false, Ordering::Release);
        bump(&self.counters.pages_dropped_unwritten);
        Ok(true)
    }

    fn page_mut<'a>(&'a self, frame: usize, guard: Latched<'a>) -> PageMut<'a> {
        match guard {
            Latched::Exclusive(guard) => PageMut {
                pool: self,
                frame,
                guard: Some(guard),
            },
            Latched::Shared(_) => unreachable!("an exclusive pin latches exclusive"),
        }
    }

    /// Writes every page that is dirty when the sweep reaches it (writers keep running: a
    /// fuzzy flush) and then syncs every file. A checkpoint calls it after taking its redo
    /// point: what changed after the sweep passed a page is in the log after that point.
    /// Returns how many pages were written. The caller must hold no page guard of this
    /// pool: the sweep waits for each dirty page's latch.
    pub fn flush(&self) -> Result<u64> {
        self.check_durability()?;
        let mut written = 0;
        for frame in 0..self.frames.len() {
            {
                let _table = self.table.lock();
                let f = &self.frames[frame];
                if f.holds.load(Ordering::Acquire) == NO_PAGE || !f.dirty.load(Ordering::Acquire) {
                    continue;
                }
                // Pinned under the table lock (B1), so it stays mapped while written.
                f.pins.fetch_add(1, Ordering::AcqRel);
            }
            // Nothing is latched here, so waiting for the frame's latch cannot close a
            // cycle (a caller holding a page guard must not flush: it would wait for
            // itself).
            let result = self.write_back_pinned(frame, self.frames[frame].latch.read());
            self.unpin(frame);
            if result? {
                written += 1;
            }
        }
        self.sync_files()?;
        Ok(written)
    }

    /// Syncs every attached file. A failure loses durability for good (B6).
    pub fn sync_files(&self) -> Result<()> {
        self.check_durability()?;
        let files = self.files.read();
        for page_file in files.iter().flatten() {
            if let Err(e) = page_file.file.sync_data() {
                let error = io_error(&page_file.path, "syncing a page file", &e);
                let reason = error.to_string();
                let _ = self.lost.set(reason.clone());
                return Err(Error::DurabilityLost { reason });
            }
            bump(&self.counters.file_syncs);
        }
        Ok(())
    }

    /// What the pool counted.
    pub fn stats(&self) -> BufferPoolStats {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BufferPoolStats {
            frames: self.frames.len() as u64,
            hits: load(&c.hits),
            misses: load(&c.misses),
            pages_read: load(&c.pages_read),
            pages_written: load(&c.pages_written),
            sequential_writes: load(&c.sequential_writes),
            eviction_writes: load(&c.eviction_writes),
            evictions: load(&c.evictions),
            pages_allocated: load(&c.pages_allocated),
            file_syncs: load(&c.file_syncs),
            pages_written_for_aborted_transactions: load(&c.pages_written_for_aborted_transactions),
            pages_dropped_unwritten: load(&c.pages_dropped_unwritten),
            pages_dirtied: load(&c.pages_dirtied),
            pages_dirtied_by_new_versions: load(
                &c.pages_dirtied_by[DirtyCause::NewVersion.index()],
            ),
            pages_dirtied_by_old_version_stamps: load(
                &c.pages_dirtied_by[DirtyCause::OldVersionStamp.index()],
            ),
            pages_dirtied_by_hint_bits: load(&c.pages_dirtied_by[DirtyCause::HintBits.index()]),
            pages_dirtied_by_index_changes: load(&c.pages_dirtied_by[DirtyCause::Index.index()]),
            pages_dirtied_by_other_changes: load(&c.pages_dirtied_by[DirtyCause::Other.index()]),
        }
    }

    /// The number of dirty pages in the pool now.
    pub fn dirty_pages(&self) -> usize {
        self.frames
            .iter()
            .filter(|f| f.dirty.load(Ordering::Acquire))
            .count()
    }

    fn check_durability(&self) -> Result<()> {
        match self.lost.get() {
            Some(reason) => Err(Error::DurabilityLost {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Refuses a page its file does not have (never allocated, or no such file).
    fn check_in_range(&self, id: PageId) -> Result<()> {
        let files = self.files.read();
        let Some(page_file) = files.get(id.file.0 as usize).and_then(Option::as_ref) else {
            return Err(not_attached(id.file, id.block));
        };
        let pages = page_file.blocks.load(Ordering::Acquire);
        if id.block >= pages {
            return Err(Error::PageOutOfRange {
                file: page_file.path.display().to_string(),
                page: id.block,
                pages,
            });
        }
        Ok(())
    }

    fn pin(&self, id: PageId, access: Access, load: Load) -> Result<(usize, Latched<'_>)> {
        self.check_in_range(id)?;
        let key = id.pack();
        let mut waits_for_a_frame = 0u32;
        loop {
            self.check_durability()?;
            let mut table = self.table.lock();
            if let Some(&frame) = table.map.get(&key) {
                let f = &self.frames[frame];
                f.pins.fetch_add(1, Ordering::AcqRel);
                table.policy.accessed(frame);
                drop(table);
                let guard = latch(f, access);
                if guard.data().loaded == Some(id) {
                    // A page being allocated can be found here only if a reader of every
                    // page of the file (`file_pages`) read it, as zeros, first.
                    debug_assert!(load != Load::Zeroed || guard.data().page.is_zeroed());
                    bump(&self.counters.hits);
                    return Ok((frame, guard));
                }
                // Its load failed and the frame was unmapped (B5): look again.
                drop(guard);
                self.unpin(frame);
                continue;
            }
            let victim = match self.victim(&mut table) {
                Err(Error::CapacityExceeded { .. }) if waits_for_a_frame < FRAME_WAITS => {
                    // Every frame is pinned. Pins are short, so wait for one to go.
                    drop(table);
                    waits_for_a_frame += 1;
                    wait_for_a_frame(waits_for_a_frame);
                    continue;
                }
                other => other?,
            };
            let frame = match victim {
                Victim::Dirty(frame, latched) => {
                    drop(table);
                    let result = self.write_back_pinned(frame, latched);
                    self.unpin(frame);
                    if result? {
                        bump(&self.counters.eviction_writes);
                    }
                    continue;
                }
                Victim::Clean(frame) => frame,
            };
            let f = &self.frames[frame];
            let old = f.holds.swap(key, Ordering::AcqRel);
            if old != NO_PAGE {
                table.map.remove(&old);
                bump(&self.counters.evictions);
            }
            table.map.insert(key, frame);
            debug_assert_eq!(f.pins.load(Ordering::Acquire), 0);
            f.pins.store(1, Ordering::Release);
            table.policy.loaded(frame);
            // Unpinned until a moment ago, so nobody holds the latch (B2).
            let mut guard = f
                .latch
                .try_write()
                .expect("an unpinned frame's latch is free (B2)");
            drop(table);
            bump(&self.counters.misses);
            let loaded = match load {
                Load::Zeroed | Load::Overwrite => {
                    guard.page.clear();
                    Ok(())
                }
                Load::FromFile => self.read_into(id, &mut guard.page),
            };
            match loaded {
                Ok(()) => {
                    guard.loaded = Some(id);
                    // B7: a page the file holds nothing of (zeros read, or none) is new;
                    // an overwrite's file may hold anything.
                    let never_written = match load {
                        Load::Zeroed => true,
                        Load::Overwrite => false,
                        Load::FromFile => guard.page.is_zeroed(),
                    };
                    f.never_written.store(never_written, Ordering::Release);
                    let guard = match access {
                        Access::Exclusive => Latched::Exclusive(guard),
                        Access::Shared => {
                            // Still pinned: nobody can take the frame meanwhile.
                            drop(guard);
                            Latched::Shared(f.latch.read())
                        }
                    };
                    return Ok((frame, guard));
                }
                Err(error) => {
                    guard.loaded = None;
                    f.never_written.store(false, Ordering::Release);
                    {
                        let mut table = self.table.lock();
                        table.map.remove(&key);
                        f.holds.store(NO_PAGE, Ordering::Release);
                        table.policy.forget(frame);
                    }
                    drop(guard);
                    self.unpin(frame);
                    return Err(error);
                }
            }
        }
    }

    /// Picks a frame for a new page, under the table lock.
    fn victim(&self, table: &mut Table) -> Result<Victim<'_>> {
        if let Some(frame) = table.free.pop() {
            return Ok(Victim::Clean(frame));
        }
        let frames = &self.frames;
        let chosen = table
            .policy
            .victim(&mut |frame| frames[frame].pins.load(Ordering::Acquire) == 0)
            .ok_or_else(|| Error::CapacityExceeded {
                what: "pinned frames in the buffer pool (every frame is pinned)".to_string(),
                limit: frames.len(),
            })?;
        let f = &frames[chosen];
        if f.dirty.load(Ordering::Acquire) {
            f.pins.fetch_add(1, Ordering::AcqRel);
            let latched = f
                .latch
                .try_read()
                .expect("an unpinned frame's latch is free (B2)");
            Ok(Victim::Dirty(chosen, latched))
        } else {
            Ok(Victim::Clean(chosen))
        }
    }

    /// Writes a pinned frame's page, latched shared by the caller, back if it is still
    /// dirty; returns whether it wrote.
    fn write_back_pinned(&self, frame: usize, data: ReadGuard<'_, FrameData>) -> Result<bool> {
        let f = &self.frames[frame];
        if !f.dirty.load(Ordering::Acquire) {
            return Ok(false); // written by another thread meanwhile
        }
        let id = data.loaded.expect("a dirty frame holds a loaded page (B5)");
        self.check_durability()?;
        // B4: the log first.
        self.log.make_durable(data.page.lsn())?;
        let mut sealed = data.page.clone();
        sealed.seal(id);
        // B7: from the first byte of this write on the file may hold part of the page
        // (a write that fails may have written some): never dropped unwritten again while
        // it is in the pool. Set before the write, under the shared latch, pinned.
        f.never_written.store(false, Ordering::Release);
        {
            let files = self.files.read();
            let page_file = Self::file(&files, id.file).expect("a pinned page's file stays");
            page_file
                .file
                .write_all_at(sealed.as_bytes(), id.offset())
                .map_err(|e| io_error(&page_file.path, "writing a page", &e))?;
        }
        // Still latched shared: no writer can have dirtied it again (B3).
        f.dirty.store(false, Ordering::Release);
        f.causes.store(0, Ordering::Relaxed);
        let writer = f.writer.swap(0, Ordering::Relaxed);
        bump(&self.counters.pages_written);
        if writer != 0
            && writer != SEVERAL_WRITERS
            && self.aborts.get().is_some_and(|a| a.has_aborted(writer))
        {
            bump(&self.counters.pages_written_for_aborted_transactions);
        }
        let previous = self.last_written.swap(id.pack(), Ordering::AcqRel);
        if previous != NO_PAGE && id.follows(PageId::unpack(previous)) {
            bump(&self.counters.sequential_writes);
        }
        Ok(true)
    }

    fn read_into(&self, id: PageId, page: &mut Page) -> Result<()> {
        let files = self.files.read();
        let page_file = Self::file(&files, id.file).expect("a pinned page's file stays");
        let raw = page.raw_mut();
        let mut read = 0;
        while read < PAGE_SIZE {
            match page_file
                .file
                .read_at(&mut raw[read..], id.offset() + read as u64)
            {
                Ok(0) => break,
                Ok(n) => read += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(&page_file.path, "reading a page", &e)),
            }
        }
        raw[read..].fill(0);
        bump(&self.counters.pages_read);
        Page::check(raw, read, id).map_err(|defect| Error::Corruption {
            file: page_file.path.display().to_string(),
            offset: id.offset(),
            reason: format!("{id}: {defect}"),
        })
    }

    fn unpin(&self, frame: usize) {
        let before = self.frames[frame].pins.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "frame {frame} unpinned more than pinned");
    }
}

/// File numbers run below this: a pool holds a table of `MAX_FILES` entries at most.
pub const MAX_FILES: usize = 1 << 16;

fn not_attached(file: FileNo, block: u32) -> Error {
    Error::PageOutOfRange {
        file: format!("number {} (not attached)", file.0),
        page: block,
        pages: 0,
    }
}

/// How many times a pin waits for a frame to be unpinned when every frame is pinned, before
/// it fails with [`Error::CapacityExceeded`]: about 100 ms in all. Under loom a few yields
/// (each a point where loom may switch threads) explore the same interleavings.
const FRAME_WAITS: u32 = if cfg!(loom) { 3 } else { 1064 };

fn wait_for_a_frame(waits: u32) {
    if waits <= 64 || cfg!(loom) {
        crate::sync::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    FromFile,
    /// A new page: zeros.
    Zeroed,
    /// A page the caller rewrites whole: zeros if not in the pool.
    Overwrite,
}

enum Latched<'a> {
    Shared(ReadGuard<'a, FrameData>),
    Exclusive(WriteGuard<'a, FrameData>),
}

impl Latched<'_> {
    fn data(&self) -> &FrameData {
        match self {
            Latched::Shared(g) => g,
            Latched::Exclusive(g) => g,
        }
    }
}

fn latch(frame: &Frame, access: Access) -> Latched<'_> {
    match access {
        Access::Shared => Latched::Shared(frame.latch.read()),
        Access::Exclusive => Latched::Exclusive(frame.latch.write()),
    }
}

/// A page pinned and latched shared. Dropping it unlatches, then unpins (B2).
pub struct PageRef<'a> {
    pool: &'a BufferPool,
    frame: usize,
    guard: Option<ReadGuard<'a, FrameData>>,
}

impl PageRef<'_> {
    /// The page's address.
    pub fn id(&self) -> PageId {
        self.guard.as_ref().expect("latched until dropped").id()
    }
}

impl Deref for PageRef<'_> {
    type Target = Page;
    fn deref(&self) -> &Page {
        &self.guard.as_ref().expect("latched until dropped").page
    }
}

impl Drop for PageRef<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.pool.unpin(self.frame);
    }
}

/// A page pinned and latched exclusive. Changing it marks it dirty. Dropping it
/// unlatches, then unpins (B2).
pub struct PageMut<'a> {
    pool: &'a BufferPool,
    frame: usize,
    guard: Option<WriteGuard<'a, FrameData>>,
}

impl PageMut<'_> {
    /// The page's address.
    pub fn id(&self) -> PageId {
        self.guard.as_ref().expect("latched until dropped").id()
    }

    /// Notes a change made to the page, for the counts of pages dirtied by cause: the
    /// page counts under `cause` if no change of that cause was noted since it was last
    /// written; `writer`, the transaction the change was made for (`None` for changes
    /// made for none: hints, pruning, vacuum, index entries), for the count of pages
    /// written for aborted transactions. Marks the page dirty. Cheap: two atomics of the
    /// frame, which the exclusive latch keeps to this thread (B3).
    pub fn note_change(&mut self, cause: DirtyCause, writer: Option<u64>) {
        self.mark_dirty();
        let pool = self.pool;
        let f = &pool.frames[self.frame];
        let bit = cause.bit();
        let noted = f.causes.load(Ordering::Relaxed);
        if noted & bit == 0 {
            f.causes.store(noted | bit, Ordering::Relaxed);
            bump(&pool.counters.pages_dirtied_by[cause.index()]);
        }
        if let Some(xid) = writer {
            match f.writer.load(Ordering::Relaxed) {
                0 => f.writer.store(xid, Ordering::Relaxed),
                same if same == xid => {}
                _ => f.writer.store(SEVERAL_WRITERS, Ordering::Relaxed),
            }
        }
    }

    /// B3: dirty set under the exclusive latch; a clean page going dirty is counted.
    fn mark_dirty(&self) {
        let f = &self.pool.frames[self.frame];
        // Cleared only under the shared latch (B3), so nobody clears it between the two.
        if !f.dirty.load(Ordering::Relaxed) {
            f.dirty.store(true, Ordering::Release);
            bump(&self.pool.counters.pages_dirtied);
        }
    }
}

impl Deref for PageMut<'_> {
    type Target = Page;
    fn deref(&self) -> &Page {
        &self.guard.as_ref().expect("latched until dropped").page
    }
}

impl DerefMut for PageMut<'_> {
    fn deref_mut(&mut self) -> &mut Page {
        self.mark_dirty();
        &mut self.guard.as_mut().expect("latched until dropped").page
    }
}

impl Drop for PageMut<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.pool.unpin(self.frame);
    }
}
