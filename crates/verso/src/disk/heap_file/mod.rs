//! A table's heap in PostgreSQL's version storage: every version a whole tuple in heap
//! pages of one file, chained oldest to newest by `ctid`; a new version on its
//! predecessor's page when it fits and no indexed column changed (a HOT update: indexes
//! untouched), else on a page the free-space map offers; pruning of HOT chains on access;
//! vacuum (design note: `docs/design/buffer-pool.md`, "Heap files"). Pruning, vacuum
//! and freezing are in [`pruning`]; placement, reads and writes here.
//!
//! Every change goes through the page log (one record per change, both pages of an update
//! in one record); hint bits are set as the page log's hints, with the page's LSN raised
//! to the commit record they rest on (T4 of `disk::transactions`).
//!
//! Where a new version goes is the heap's placement policy (`disk::placement`):
//! PostgreSQL's (above, the default), or SI-CV's co-located pages, where every new version
//! goes to a page its creator owns (its P1) and a HOT update stays on its predecessor's
//! page only when the page is the updater's; the mechanism (latches, formatting,
//! extension, logging) is the same for both, and so is every order of writes.
//!
//! # Latch order
//!
//! - **HL1** A thread holds at most two heap pages, and takes the second only at a higher
//!   block than the first (an update that must move a version to a lower block lets its
//!   old page go and takes both again in order, then checks the old version again).
//! - **HL2** No heap page is held while the free-space map is searched or updated, nor
//!   while a transaction's fate is resolved from the commit log, except that a held page's
//!   tuples are resolved under it (the commit log is latched only ever alone, or after a
//!   heap page, never before one).
//!
//! # Invariants
//!
//! - **HF1** Index entries (kept by the caller) point at chain roots: at the line where a
//!   row's version was inserted or placed by a non-HOT update. Within a page, a HOT chain
//!   is reached only from its root; a root line is freed only by vacuum, after the caller
//!   removed the index entries pointing at it ([`HeapFile::vacuum`]'s order), or with its
//!   whole page when an aborted owner's page is dropped unwritten, after the caller
//!   removed the entries naming its roots ([`HeapFile::drop_aborted_pages`]'s order).
//! - **HF2** A version is replaced (its `xmax` set) only under its page's exclusive latch,
//!   after [`visibility::write_check`] found it free under that latch: two writers of one
//!   row cannot both succeed.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use super::buffer_pool::{BufferPool, PageMut};
use super::free_space_map::FreeSpaceMap;
use super::heap_page::{
    infomask, HeapPage, Line, TupleHeader, KIND_HEAP_PAGE, MAX_TUPLE_DATA_BYTES, TUPLE_HEADER_BYTES,
};
use super::injection::Injection;
use super::page::{FileNo, Page, PageId};
use super::page_log::{PageChange, PageLog};
use super::placement::{Barray, Claim, VersionPlacement};
use super::transactions::Resolve;
use super::visibility::{self, Hints, Snapshot, WriteCheck};
use crate::sync::Mutex;
use crate::{Error, Result};

mod pruning;

/// A tuple's address: its page and line (PostgreSQL's `ItemPointer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tid {
    /// The heap block.
    pub block: u32,
    /// The line pointer, from 1.
    pub line: u16,
}

impl std::fmt::Display for Tid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({},{})", self.block, self.line)
    }
}

impl Tid {
    /// The six bytes an index entry carries: block then line, big-endian, so that entries
    /// of one key sort by address.
    pub fn to_bytes(self) -> [u8; 6] {
        let mut out = [0; 6];
        out[..4].copy_from_slice(&self.block.to_be_bytes());
        out[4..].copy_from_slice(&self.line.to_be_bytes());
        out
    }

    /// Reads [`Tid::to_bytes`]'s six bytes.
    pub fn from_bytes(bytes: [u8; 6]) -> Self {
        Tid {
            block: u32::from_be_bytes(bytes[..4].try_into().expect("four bytes")),
            line: u16::from_be_bytes(bytes[4..].try_into().expect("two bytes")),
        }
    }
}

const NO_TARGET: u32 = u32::MAX;

/// What a heap file counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeapStats {
    /// Tuples inserted as new rows.
    pub inserts: u64,
    /// Updates whose new version went on the same page (no index touched).
    pub hot_updates: u64,
    /// Updates whose new version went to another page (or changed an indexed column).
    pub cold_updates: u64,
    /// Deletes.
    pub deletes: u64,
    /// Times hint bits were set on a page (each dirties it: PostgreSQL's hint-bit writes).
    pub hint_writes: u64,
    /// Pages pruned on access.
    pub pages_pruned: u64,
    /// Tuples removed by pruning (on access and by vacuum).
    pub tuples_pruned: u64,
    /// Of those, tuples whose creator aborted (rolled back, not superseded).
    pub aborted_tuples_pruned: u64,
    /// Of those, tuples only eager pruning removed (newer than the horizon, seen by no
    /// active snapshot).
    pub tuples_pruned_eagerly: u64,
    /// Pages added to the file.
    pub pages_extended: u64,
    /// Pages taken by a transaction for its own new versions (co-located placement:
    /// SI-CV's Barray entries made).
    pub pages_claimed: u64,
    /// Pages owned by live transactions now (co-located placement; a gauge).
    pub pages_owned: u64,
    /// Pages an aborted owner formatted that left the pool without being written
    /// ([`HeapFile::drop_aborted_pages`]; co-located placement).
    pub pages_dropped_at_abort: u64,
}

/// What one [`HeapFile::vacuum`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VacuumStats {
    /// Pages scanned.
    pub pages_scanned: u64,
    /// Tuples removed by its pruning.
    pub tuples_removed: u64,
    /// Dead lines handed to the index cleanup and freed.
    pub dead_lines_freed: u64,
    /// Tuples left that some snapshot may see (PostgreSQL's `reltuples` after vacuum).
    pub tuples_remaining: u64,
    /// Tuples frozen (committed below every snapshot: no commit-log lookup from now on).
    pub tuples_frozen: u64,
}

/// How an update went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replaced {
    /// Done: the new version's address, and whether it went on the old one's page as a
    /// heap-only tuple (no index entries to add).
    Updated {
        /// The new version.
        tid: Tid,
        /// A HOT update.
        hot: bool,
    },
    /// Deleted.
    Deleted,
    /// Another transaction replaced the version first (first-updater-wins).
    Conflict,
    /// The writer does not see that version (not its current one).
    Invisible,
}

/// What [`HeapFile::drop_aborted_pages`] hands the chain roots of the pages it is about
/// to drop to (each with its tuple's data), to remove the index entries naming them.
pub type RootsVisitor<'a> = dyn FnMut(&[(Tid, Vec<u8>)]) -> Result<()> + 'a;

/// The heap of one table. Shared by every thread (`Sync`).
#[derive(Debug)]
pub struct HeapFile {
    pool: Arc<BufferPool>,
    file: FileNo,
    free_space: FreeSpaceMap,
    log: Arc<PageLog>,
    /// The page the last insert went to (PostgreSQL's relation target block).
    target: AtomicU32,
    /// Held while the file grows by a page (PostgreSQL's relation extension lock).
    extending: Mutex<()>,
    /// Held by a vacuum (PostgreSQL's `ShareUpdateExclusiveLock`): two at once could
    /// remove the index entries of a line one freed and an insert took again.
    vacuuming: Mutex<()>,
    inserts: AtomicU64,
    hot_updates: AtomicU64,
    cold_updates: AtomicU64,
    deletes: AtomicU64,
    hint_writes: AtomicU64,
    pages_pruned: AtomicU64,
    tuples_pruned: AtomicU64,
    aborted_tuples_pruned: AtomicU64,
    tuples_pruned_eagerly: AtomicU64,
    pages_extended: AtomicU64,
    pages_dropped_at_abort: AtomicU64,
    pruning: Pruning,
    /// Bumped by vacuum before it frees a page's dead lines ([`HeapFile::lines_freed`]).
    lines_freed: AtomicU64,
    /// Where new versions go (`disk::placement`).
    placement: VersionPlacement,
    /// Under co-located placement, which live transaction owns which pages (SI-CV's
    /// Barray); empty under PostgreSQL's.
    barray: Barray,
    /// For tests of interleavings ([`HeapFile::inject_before_hints`]).
    before_hints: Injection,
}

/// Which versions pruning removes (the collector of the disk engine).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pruning {
    /// PostgreSQL's: versions replaced below the horizon (the oldest snapshot), and
    /// aborted ones. Pages are pruned on access only when their prune hint's
    /// transaction committed below the horizon.
    #[default]
    Horizon,
    /// Steam's eager pruning (EPO) on pages: also every version no active snapshot sees
    /// ([`visibility::is_obsolete`]), wherever it is in its chain. Pages are pruned on
    /// access once their prune hint's transaction committed at all.
    Eager,
}

fn corrupt(file: FileNo, block: u32, reason: String) -> Error {
    Error::Corruption {
        file: format!("heap file {}", file.0),
        offset: PageId::new(file, block).offset(),
        reason,
    }
}

/// Whether a page is a heap page, or new (never formatted: all zeros, as a page the file
/// grew by and a crash left unwritten); anything else is corruption.
fn heap_kind(page: &Page, id: PageId) -> Result<bool> {
    match page.kind() {
        KIND_HEAP_PAGE => Ok(true),
        0 if page.is_zeroed() => Ok(false),
        kind => Err(corrupt(
            id.file,
            id.block,
            format!("a page of kind {kind:#06x} in a heap file"),
        )),
    }
}

/// A line that claims a tuple its page cannot hold (a span past the page's bounds): the
/// page's bytes lie, which is corruption, never a panic nor a silently missing row.
fn check_line<B: AsRef<[u8]>>(heap: &HeapPage<B>, id: PageId, line: u16) -> Result<()> {
    if matches!(heap.line(line), Line::Normal { .. }) && heap.header(line).is_none() {
        return Err(corrupt(
            id.file,
            id.block,
            format!("line {line} points outside the page"),
        ));
    }
    Ok(())
}

impl HeapFile {
    /// The heap in `file` (attached to `pool`, after the page log's redo), with its
    /// free-space map.
    pub fn open(
        pool: Arc<BufferPool>,
        file: FileNo,
        free_space: FreeSpaceMap,
        log: Arc<PageLog>,
    ) -> Result<Self> {
        pool.file_pages(file)?;
        Ok(HeapFile {
            pool,
            file,
            free_space,
            log,
            target: AtomicU32::new(NO_TARGET),
            extending: Mutex::new(()),
            vacuuming: Mutex::new(()),
            inserts: AtomicU64::new(0),
            hot_updates: AtomicU64::new(0),
            cold_updates: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            hint_writes: AtomicU64::new(0),
            pages_pruned: AtomicU64::new(0),
            tuples_pruned: AtomicU64::new(0),
            aborted_tuples_pruned: AtomicU64::new(0),
            tuples_pruned_eagerly: AtomicU64::new(0),
            pages_extended: AtomicU64::new(0),
            pages_dropped_at_abort: AtomicU64::new(0),
            pruning: Pruning::Horizon,
            lines_freed: AtomicU64::new(0),
            placement: VersionPlacement::PostgreSql,
            barray: Barray::default(),
            before_hints: Injection::default(),
        })
    }

    /// The heap with another placement of new versions (PostgreSQL's by default). Under
    /// a co-located one ([`VersionPlacement::co_located`]) whoever ends a transaction that
    /// wrote here must call [`HeapFile::release`] once its end returned.
    pub fn with_placement(mut self, placement: VersionPlacement) -> Self {
        self.placement = placement;
        self
    }

    /// Its placement of new versions.
    pub fn placement(&self) -> VersionPlacement {
        self.placement
    }

    /// The pages transaction `xid` owns now, in the order it took them (co-located
    /// placement; always empty under PostgreSQL's).
    pub fn pages_owned_by(&self, xid: u64) -> Vec<u32> {
        self.barray.pages_of(xid)
    }

    /// The live transaction owning page `block`, if any (co-located placement).
    pub fn page_owner(&self, block: u32) -> Option<u64> {
        self.barray.owner(block)
    }

    /// The page the free-space map would offer now to a transaction taking a new page
    /// for `bytes` of tuple data under co-located placement: one no live transaction owns
    /// (for tests of SI-CV's exclusion; it takes nothing).
    pub fn page_on_offer(&self, bytes: usize) -> Result<Option<u32>> {
        self.unowned_page_with_room(TUPLE_HEADER_BYTES + bytes + 4)
    }

    /// A page the free-space map records with `needed` bytes of room that no live
    /// transaction owns (SI-CV: "an existing block with sufficient space for the new
    /// version is selected, which currently must not be in Barray"). A hint: the caller
    /// claims it, which may fail if another transaction took it since (P1).
    fn unowned_page_with_room(&self, needed: usize) -> Result<Option<u32>> {
        self.free_space
            .find(needed, &|block| self.barray.owner(block).is_some())
    }

    /// Ends transaction `xid`'s ownership of its pages (co-located placement), once its
    /// end (commit or abort) returned: they leave the Barray and go back to the
    /// free-space map with the room each had after `xid`'s last version there (P2). A
    /// no-op for a transaction that owns nothing, and under PostgreSQL's placement. The
    /// pages are released even when recording them fails: the map is a hint, and a page
    /// it then under-reports is offered again once vacuum records it.
    pub fn release(&self, xid: u64) -> Result<()> {
        if !self.placement.co_located() {
            // Nothing owned, and no Barray lock on PostgreSQL's commit path.
            debug_assert!(self.barray.pages_of(xid).is_empty());
            return Ok(());
        }
        let mut result = Ok(());
        for (block, free) in self.barray.release(xid) {
            if let Err(error) = self.free_space.record(block, free) {
                result = result.and(Err(error));
            }
        }
        result
    }

    /// SI-CV's "if T_j aborts Block2 is not written" (co-located placement, P5): called
    /// once `xid`'s abort returned (the commit log says aborted) and before
    /// [`HeapFile::release`], drops from the pool, unwritten, every page `xid` formatted
    /// from a page never written that the pool still holds unwritten with no
    /// transaction's changes but `xid`'s. Returns how many it dropped. For each such page,
    /// in order:
    ///
    /// 1. its chain roots are read (each with its tuple's data) under the shared latch,
    ///    with its LSN; a page with a dead or redirected line (pruned: a root whose key
    ///    can no longer be read) is kept;
    /// 2. `remove_index_entries` removes, logged, every index entry naming those roots
    ///    (the entries of `xid`'s versions; HOT members share their root's);
    /// 3. the log is made durable up to its tail (past those removals): once the page is
    ///    dropped, a checkpoint may move the redo point past its changes, which its file
    ///    then never holds, and an entry replayed from after that point must not outlive
    ///    its removal;
    /// 4. [`HeapFile::lines_freed`] is bumped (the page's addresses may be taken again,
    ///    as after vacuum: DT4's key checks read again);
    /// 5. `BufferPool::drop_unwritten` drops the page if no one pins it, it is still
    ///    unwritten, and its LSN did not move (a prune or a hint image since step 1
    ///    keeps it).
    ///
    /// A page dropped reads as new (zeros), its room is the room of an empty page, and
    /// the release that follows offers it in the free-space map; whoever takes it
    /// formats it again, logged as an image. Vacuum is excluded meanwhile (its second
    /// pass frees lines it found dead, which a dropped page no longer has): if a vacuum
    /// runs, nothing is dropped. A no-op under PostgreSQL's placement.
    pub fn drop_aborted_pages(
        &self,
        xid: u64,
        remove_index_entries: &mut RootsVisitor<'_>,
    ) -> Result<u64> {
        if !self.placement.co_located() || xid == 0 {
            return Ok(0);
        }
        let candidates: Vec<u32> = self
            .barray
            .formatted_pages_of(xid)
            .into_iter()
            .filter(|&block| self.pool.unwritten_by(self.id(block), xid))
            .collect();
        if candidates.is_empty() {
            return Ok(0);
        }
        let Some(_no_vacuum) = self.vacuuming.try_lock() else {
            return Ok(0);
        };
        // 1. The roots of each page, and its LSN.
        let mut pages: Vec<(u32, u64)> = Vec::with_capacity(candidates.len());
        let mut roots: Vec<(Tid, Vec<u8>)> = Vec::new();
        'pages: for block in candidates {
            let page = self.pool.read(self.id(block))?;
            if !heap_kind(&page, page.id())? {
                continue; // formatted, but the format's record failed: nothing on it
            }
            let heap = HeapPage::new(page.body());
            let mut page_roots = Vec::new();
            for line in 1..=heap.lines() {
                match heap.line(line) {
                    Line::Unused => {}
                    Line::Normal { .. } => {
                        check_line(&heap, page.id(), line)?;
                        let header = heap.header(line).expect("checked");
                        debug_assert_eq!(
                            header.xmin, xid,
                            "P5: a page its aborted owner formatted holds only its versions"
                        );
                        if header.xmin != xid {
                            continue 'pages;
                        }
                        if !header.has(infomask::HEAP_ONLY) {
                            let data = heap.data(line).expect("a tuple").to_vec();
                            page_roots.push((Tid { block, line }, data));
                        }
                    }
                    Line::Redirect(_) | Line::Dead => continue 'pages,
                }
            }
            pages.push((block, page.lsn()));
            roots.extend(page_roots);
        }
        if pages.is_empty() {
            return Ok(0);
        }
        // 2. Its entries, logged.
        if !roots.is_empty() {
            remove_index_entries(&roots)?;
        }
        // 3. The removals durable before any page goes.
        self.log.sync()?;
        // 4. Addresses about to be free.
        self.lines_freed.fetch_add(1, Ordering::SeqCst);
        // 5. The drops.
        let mut dropped = 0;
        for (block, lsn) in pages {
            if self.pool.drop_unwritten(self.id(block), xid, lsn)? {
                dropped += 1;
                self.barray
                    .placed(xid, block, super::heap_page::EMPTY_PAGE_FREE_BYTES);
            }
        }
        self.pages_dropped_at_abort
            .fetch_add(dropped, Ordering::Relaxed);
        Ok(dropped)
    }

    /// For tests of interleavings: `hook` runs once, on the thread of the next
    /// [`HeapFile::fetch`] that learned hint bits, after it let the page go and before it
    /// takes the page again to set them.
    #[doc(hidden)]
    pub fn inject_before_hints(&self, hook: Box<dyn FnOnce() + Send>) {
        self.before_hints.set(hook);
    }

    /// The heap with another pruning rule (PostgreSQL's by default).
    pub fn with_pruning(mut self, pruning: Pruning) -> Self {
        self.pruning = pruning;
        self
    }

    /// Its pruning rule.
    pub fn pruning(&self) -> Pruning {
        self.pruning
    }

    /// A counter vacuum bumps before it frees dead lines, which inserts and updates may
    /// then take: a reader that read it before and after reading chains and found it
    /// unchanged knows no address it read was freed and taken by another tuple meanwhile.
    pub fn lines_freed(&self) -> u64 {
        self.lines_freed.load(Ordering::SeqCst)
    }

    /// The heap's file.
    pub fn file(&self) -> FileNo {
        self.file
    }

    /// Pages in the file.
    pub fn pages(&self) -> Result<u32> {
        self.pool.file_pages(self.file)
    }

    /// The free-space map.
    pub fn free_space_map(&self) -> &FreeSpaceMap {
        &self.free_space
    }

    /// What the heap counted.
    pub fn stats(&self) -> HeapStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        HeapStats {
            inserts: get(&self.inserts),
            hot_updates: get(&self.hot_updates),
            cold_updates: get(&self.cold_updates),
            deletes: get(&self.deletes),
            hint_writes: get(&self.hint_writes),
            pages_pruned: get(&self.pages_pruned),
            tuples_pruned: get(&self.tuples_pruned),
            aborted_tuples_pruned: get(&self.aborted_tuples_pruned),
            tuples_pruned_eagerly: get(&self.tuples_pruned_eagerly),
            pages_extended: get(&self.pages_extended),
            pages_claimed: self.barray.pages_claimed(),
            pages_owned: self.barray.pages_owned() as u64,
            pages_dropped_at_abort: get(&self.pages_dropped_at_abort),
        }
    }

    fn id(&self, block: u32) -> PageId {
        PageId::new(self.file, block)
    }

    fn check_size(data: &[u8]) -> Result<()> {
        if data.len() > MAX_TUPLE_DATA_BYTES {
            return Err(Error::EntryTooLarge {
                what: "a heap tuple's data",
                bytes: data.len(),
                limit: MAX_TUPLE_DATA_BYTES,
            });
        }
        Ok(())
    }

    /// Inserts a new row's first version, created by `xid`.
    pub fn insert(&self, xid: u64, data: &[u8]) -> Result<Tid> {
        debug_assert_ne!(xid, 0);
        Self::check_size(data)?;
        let (mut page, extended) = self.page_with_room(xid, data.len(), None)?;
        let tid = self.insert_on(&mut page, xid, data, 0)?;
        self.inserts.fetch_add(1, Ordering::Relaxed);
        let free = HeapPage::new(page.body()).free_space();
        drop(page);
        self.placed(xid, tid.block, free, extended)?;
        Ok(tid)
    }

    /// After `xid` placed a version on page `block` (let go: HL2), which has `free`
    /// bytes left: under co-located placement the Barray notes the room (P1: the page is
    /// `xid`'s), and a page the file grew by for it is recorded in the free-space map at
    /// once (excluded while owned), so that a crash before its owner's end leaves it
    /// offered once the map page is on disk (P4), rather than hidden until vacuum.
    fn placed(&self, xid: u64, block: u32, free: usize, extended: bool) -> Result<()> {
        if self.placement.co_located() {
            self.barray.placed(xid, block, free);
            if extended {
                self.free_space.record(block, free)?;
            }
        }
        Ok(())
    }

    /// Puts a tuple on a page held exclusive that has room, and logs it.
    fn insert_on(&self, page: &mut PageMut<'_>, xid: u64, data: &[u8], mask: u16) -> Result<Tid> {
        let block = page.id().block;
        let mut header = TupleHeader {
            xmin: xid,
            xmax: 0,
            ctid_block: block,
            ctid_line: 0,
            infomask: mask | infomask::XMAX_INVALID,
        };
        let mut heap = HeapPage::new(page.body_mut());
        let Some(line) = heap.insert(&header, data) else {
            unreachable!("the caller checked that the tuple fits");
        };
        // A tuple's `ctid` names itself until it is replaced.
        header.ctid_line = line;
        heap.set_header(line, &header);
        self.log.log_for(
            xid,
            &mut [(&mut *page, &[PageChange::HeapInsert { line, header, data }])],
        )?;
        Ok(Tid { block, line })
    }

    /// An exclusively latched heap page with room for a new version of `xid` of `len`
    /// bytes of data, not `avoid` (a cold update's old page), by the heap's placement;
    /// and whether the file grew by it.
    fn page_with_room(
        &self,
        xid: u64,
        len: usize,
        avoid: Option<u32>,
    ) -> Result<(PageMut<'_>, bool)> {
        match self.placement {
            // Whether the file grew matters only to the co-located placement's record.
            VersionPlacement::PostgreSql => Ok((self.shared_page_with_room(len, avoid)?, false)),
            VersionPlacement::CoLocated | VersionPlacement::CoLocatedHot => {
                self.own_page_with_room(xid, len, avoid)
            }
        }
    }

    /// SI-CV's placement (`disk::placement`, P1): a page `xid` owns with room for a tuple
    /// of `len` bytes of data, not `avoid`, latched exclusive: its current page; else one
    /// the free-space map offers among pages no live transaction owns (claimed before it
    /// is latched; given back if it has not the room promised); else a new page at the
    /// file's end. A page too full for this version stays `xid`'s until its end: it holds
    /// `xid`'s versions, and no one else may place next to them while `xid` is live.
    fn own_page_with_room(
        &self,
        xid: u64,
        len: usize,
        avoid: Option<u32>,
    ) -> Result<(PageMut<'_>, bool)> {
        debug_assert_ne!(xid, 0, "a writer has an id");
        if let Some(block) = self.barray.current(xid).filter(|&b| Some(b) != avoid) {
            let page = self.pool.write(self.id(block))?;
            // Formatted when taken (below), and no one else places on it.
            if heap_kind(&page, page.id())? && HeapPage::new(page.body()).fits(len) {
                return Ok((page, false));
            }
        }
        let needed = TUPLE_HEADER_BYTES + len + 4;
        for _ in 0..64 {
            let Some(block) = self.unowned_page_with_room(needed)? else {
                break;
            };
            if block >= self.pages()? || Some(block) == avoid {
                continue; // a map slot past a file a crash left shorter
            }
            let claim = self.barray.claim(xid, block, 0);
            if claim == Claim::Refused {
                continue; // another transaction took it since the map's look (P1)
            }
            let mut page = self.pool.write(self.id(block))?;
            if !heap_kind(&page, page.id())? {
                self.format(&mut page)?;
                // Claimed before it was latched: no one else formatted it (P1, P5).
                self.barray.formatted(xid, block);
            }
            let heap = HeapPage::new(page.body());
            let free = heap.free_space();
            if heap.fits(len) {
                self.barray.placed(xid, block, free);
                return Ok((page, false));
            }
            drop(page);
            if claim == Claim::Taken {
                self.barray.unclaim(xid, block);
            }
            self.free_space.record(block, free)?;
        }
        let page = self.extend()?;
        let claim = self.barray.claim(xid, page.id().block, 0);
        debug_assert_eq!(claim, Claim::Taken, "a new page is no one's");
        self.barray.formatted(xid, page.id().block);
        Ok((page, true))
    }

    /// PostgreSQL's placement: an exclusively latched heap page with room for a tuple of
    /// `len` bytes of data, not `avoid`: the last insert's page, then one the free-space
    /// map offers, then a new page at the file's end (PostgreSQL's
    /// `RelationGetBufferForTuple`). Pages found fuller than recorded are recorded again
    /// as they are.
    fn shared_page_with_room(&self, len: usize, avoid: Option<u32>) -> Result<PageMut<'_>> {
        let needed = TUPLE_HEADER_BYTES + len + 4;
        let mut candidate = match self.target.load(Ordering::Relaxed) {
            NO_TARGET => None,
            block => Some(block),
        };
        for _ in 0..64 {
            let block = match candidate.take() {
                Some(block) if Some(block) != avoid => block,
                _ => match self.free_space.find(needed, &|b| Some(b) == avoid)? {
                    Some(block) => block,
                    None => break,
                },
            };
            if block >= self.pages()? {
                continue; // a map slot or target past a file a crash left shorter
            }
            let mut page = self.pool.write(self.id(block))?;
            if !heap_kind(&page, page.id())? {
                self.format(&mut page)?;
            }
            let heap = HeapPage::new(page.body());
            if heap.fits(len) {
                self.target.store(block, Ordering::Relaxed);
                return Ok(page);
            }
            let free = heap.free_space();
            drop(page);
            self.free_space.record(block, free)?;
        }
        self.extend()
    }

    /// Formats a new page (all zeros) as an empty heap page, logged as its image.
    fn format(&self, page: &mut PageMut<'_>) -> Result<()> {
        page.set_kind(KIND_HEAP_PAGE);
        HeapPage::new(page.body_mut()).init();
        self.log.log(&mut [(&mut *page, &[PageChange::Image])])?;
        Ok(())
    }

    /// A new page at the file's end, formatted and latched exclusive.
    fn extend(&self) -> Result<PageMut<'_>> {
        let _extending = self.extending.lock();
        let mut page = self.pool.allocate(self.file)?;
        self.format(&mut page)?;
        self.pages_extended.fetch_add(1, Ordering::Relaxed);
        self.target.store(page.id().block, Ordering::Relaxed);
        Ok(page)
    }

    /// The version of the row whose chain starts at `root` that `snapshot` sees, with its
    /// address and data (PostgreSQL's `heap_hot_search_buffer`): the chain is followed
    /// within the page. Prunes the page first if it is worth it; sets the hints learned.
    pub fn fetch(
        &self,
        root: Tid,
        snapshot: &Snapshot,
        txns: &dyn Resolve,
    ) -> Result<Option<(Tid, Vec<u8>)>> {
        if root.block >= self.pages()? {
            return Ok(None);
        }
        self.prune_if_worth_it(root.block, txns)?;
        let page = self.pool.read(self.id(root.block))?;
        if !heap_kind(&page, page.id())? {
            return Ok(None);
        }
        let heap = HeapPage::new(page.body());
        check_line(&heap, page.id(), root.line)?;
        let mut hints = Vec::new();
        let mut found = None;
        for member in heap.chain(root.line) {
            let header = heap.header(member).expect("a chain's members are tuples");
            let mut hint = Hints::default();
            let visible = visibility::is_visible(&header, snapshot, txns, &mut hint)?;
            if hint.bits & !header.infomask != 0 {
                hints.push((member, header, hint));
            }
            if visible {
                let data = heap.data(member).expect("a tuple").to_vec();
                found = Some((
                    Tid {
                        block: root.block,
                        line: member,
                    },
                    data,
                ));
                break;
            }
        }
        drop(page);
        if !hints.is_empty() {
            self.before_hints.run();
        }
        self.set_hints(root.block, &hints)?;
        Ok(found)
    }

    /// Every version on the chain from `root`, visible or not, oldest first, with its
    /// address, header and data: what a uniqueness check examines (PostgreSQL's
    /// `_bt_check_unique` looks at every version an index entry leads to).
    pub fn versions(&self, root: Tid) -> Result<Vec<(Tid, TupleHeader, Vec<u8>)>> {
        if root.block >= self.pages()? {
            return Ok(Vec::new());
        }
        let page = self.pool.read(self.id(root.block))?;
        if !heap_kind(&page, page.id())? {
            return Ok(Vec::new());
        }
        let heap = HeapPage::new(page.body());
        check_line(&heap, page.id(), root.line)?;
        Ok(heap
            .chain(root.line)
            .into_iter()
            .map(|line| {
                (
                    Tid {
                        block: root.block,
                        line,
                    },
                    heap.header(line).expect("a chain's members are tuples"),
                    heap.data(line).expect("a tuple").to_vec(),
                )
            })
            .collect())
    }

    /// Every version `snapshot` sees, page by page in block order (PostgreSQL's sequential
    /// scan), handed to `each` with its address; `each` returns whether to go on.
    pub fn scan(
        &self,
        snapshot: &Snapshot,
        txns: &dyn Resolve,
        each: &mut dyn FnMut(Tid, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let pages = self.pages()?;
        let mut visible: Vec<(u16, Vec<u8>)> = Vec::new();
        for block in 0..pages {
            self.prune_if_worth_it(block, txns)?;
            let page = self.pool.read(self.id(block))?;
            if !heap_kind(&page, page.id())? {
                continue;
            }
            let heap = HeapPage::new(page.body());
            visible.clear();
            let mut hints = Vec::new();
            for line in 1..=heap.lines() {
                check_line(&heap, page.id(), line)?;
                let Some(header) = heap.header(line) else {
                    continue;
                };
                let mut hint = Hints::default();
                if visibility::is_visible(&header, snapshot, txns, &mut hint)? {
                    visible.push((line, heap.data(line).expect("a tuple").to_vec()));
                }
                if hint.bits & !header.infomask != 0 {
                    hints.push((line, header, hint));
                }
            }
            drop(page);
            self.set_hints(block, &hints)?;
            for (line, data) in visible.drain(..) {
                if !each(Tid { block, line }, &data)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Sets hint bits learned under a shared latch: takes the page exclusive, and sets
    /// each only if the tuple's `xmin` and `xmax` are still those the hint is about.
    /// Hints are never needed for correctness, only to spare lookups.
    fn set_hints(&self, block: u32, hints: &[(u16, TupleHeader, Hints)]) -> Result<()> {
        if hints.is_empty() {
            return Ok(());
        }
        let mut page = self.pool.write(self.id(block))?;
        if !heap_kind(&page, page.id())? {
            // Dropped unwritten since it was read (an aborted owner's page: SI-CV), it
            // reads as new: no tuple to hint, and its bytes must not be touched, which
            // would mark it dirty and make the pool write a sealed page of zeros, a page
            // of kind 0 that is not new (corrupt) when read back
            // (`regression_hints_set_on_a_page_dropped_meanwhile_never_write_it`).
            return Ok(());
        }
        let mut lsn = 0;
        let mut changed = false;
        {
            let mut heap = HeapPage::new(page.body_mut());
            for (line, seen, hint) in hints {
                let Some(mut header) = heap.header(*line) else {
                    continue;
                };
                if header.xmin != seen.xmin || header.xmax != seen.xmax {
                    continue;
                }
                let bits = hint.bits;
                if bits & !header.infomask == 0 {
                    continue;
                }
                header.infomask |= bits;
                heap.set_header(*line, &header);
                lsn = lsn.max(hint.lsn);
                changed = true;
            }
        }
        if changed {
            // L3 first (an image if the page has none since the redo point), then T4.
            self.log.hint(&mut page)?;
            if page.lsn() < lsn {
                page.set_lsn(lsn);
            }
            self.hint_writes.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Replaces the version at `old` (which `snapshot`'s transaction `xid` sees) by a new
    /// one with `data`: on the same page as a heap-only tuple if `hot_allowed` (no indexed
    /// column changed) and it fits, else on a page with room (PostgreSQL's `heap_update`).
    pub fn update(
        &self,
        old: Tid,
        data: &[u8],
        hot_allowed: bool,
        snapshot: &Snapshot,
        txns: &dyn Resolve,
    ) -> Result<Replaced> {
        Self::check_size(data)?;
        let xid = snapshot.xid;
        debug_assert_ne!(xid, 0, "a writer has an id");
        if old.block >= self.pages()? {
            return Ok(Replaced::Invisible);
        }
        if hot_allowed {
            self.prune_if_worth_it(old.block, txns)?;
        }
        let mut old_page = self.pool.write(self.id(old.block))?;
        if let Some(refused) = self.check_replaceable(&old_page, old, snapshot, txns)? {
            return Ok(refused);
        }
        // Under co-located placement a HOT update stays on the old page only when the
        // placement lets it (the updater's own page, or one it may claim); otherwise its
        // version goes cold to the updater's page.
        let same_page = hot_allowed
            && HeapPage::new(old_page.body()).fits(data.len())
            && self
                .placement
                .may_stay_on_page(&self.barray, xid, old.block, || {
                    HeapPage::new(old_page.body()).free_space()
                });
        if same_page {
            let new = {
                let mut heap = HeapPage::new(old_page.body_mut());
                let mut header = TupleHeader {
                    xmin: xid,
                    xmax: 0,
                    ctid_block: old.block,
                    ctid_line: 0,
                    infomask: infomask::HEAP_ONLY | infomask::UPDATED | infomask::XMAX_INVALID,
                };
                let line = heap.insert(&header, data).expect("it fits");
                header.ctid_line = line;
                heap.set_header(line, &header);
                (line, header)
            };
            let old_header = self.replaced_header(&old_page, old, xid, Some(new.0), true);
            HeapPage::new(old_page.body_mut()).set_header(old.line, &old_header);
            self.log.log_for(
                xid,
                &mut [(
                    &mut old_page,
                    &[
                        PageChange::HeapInsert {
                            line: new.0,
                            header: new.1,
                            data,
                        },
                        PageChange::HeapSetHeader {
                            line: old.line,
                            header: old_header,
                        },
                    ],
                )],
            )?;
            self.hot_updates.fetch_add(1, Ordering::Relaxed);
            let free = HeapPage::new(old_page.body()).free_space();
            drop(old_page);
            self.placed(xid, old.block, free, false)?;
            return Ok(Replaced::Updated {
                tid: Tid {
                    block: old.block,
                    line: new.0,
                },
                hot: true,
            });
        }
        // A cold update: the new version goes to another page. Let the old page go while
        // the map is searched (HL2), then hold both in block order (HL1).
        drop(old_page);
        let mut extended = false;
        loop {
            let (new_page, grew) = self.page_with_room(xid, data.len(), Some(old.block))?;
            extended |= grew;
            let new_block = new_page.id().block;
            debug_assert_ne!(new_block, old.block);
            let (mut old_page, mut new_page) = if new_block < old.block {
                let old_page = self.pool.write(self.id(old.block))?;
                (old_page, new_page)
            } else {
                drop(new_page);
                let old_page = self.pool.write(self.id(old.block))?;
                let new_page = self.pool.write(self.id(new_block))?;
                // Let go meanwhile: the room may be gone.
                if !heap_kind(&new_page, new_page.id())?
                    || !HeapPage::new(new_page.body()).fits(data.len())
                {
                    continue;
                }
                (old_page, new_page)
            };
            if let Some(refused) = self.check_replaceable(&old_page, old, snapshot, txns)? {
                return Ok(refused);
            }
            debug_assert!(HeapPage::new(new_page.body()).fits(data.len()));
            let new_block = new_page.id().block;
            let new_line;
            let new_header;
            {
                let mut heap = HeapPage::new(new_page.body_mut());
                let mut header = TupleHeader {
                    xmin: xid,
                    xmax: 0,
                    ctid_block: new_block,
                    ctid_line: 0,
                    infomask: infomask::UPDATED | infomask::XMAX_INVALID,
                };
                let line = heap.insert(&header, data).expect("it fits");
                header.ctid_line = line;
                heap.set_header(line, &header);
                new_line = line;
                new_header = header;
            }
            let mut old_header = self.replaced_header(&old_page, old, xid, None, false);
            old_header.ctid_block = new_block;
            old_header.ctid_line = new_line;
            HeapPage::new(old_page.body_mut()).set_header(old.line, &old_header);
            self.log.log_for(
                xid,
                &mut [
                    (
                        &mut new_page,
                        &[PageChange::HeapInsert {
                            line: new_line,
                            header: new_header,
                            data,
                        }],
                    ),
                    (
                        &mut old_page,
                        &[PageChange::HeapSetHeader {
                            line: old.line,
                            header: old_header,
                        }],
                    ),
                ],
            )?;
            self.cold_updates.fetch_add(1, Ordering::Relaxed);
            let free = HeapPage::new(new_page.body()).free_space();
            drop((old_page, new_page));
            self.placed(xid, new_block, free, extended)?;
            return Ok(Replaced::Updated {
                tid: Tid {
                    block: new_block,
                    line: new_line,
                },
                hot: false,
            });
        }
    }

    /// Deletes the version at `tid`, which `snapshot`'s transaction sees (PostgreSQL's
    /// `heap_delete`): its `xmax` is set; the tuple stays until no snapshot sees it.
    pub fn delete(&self, tid: Tid, snapshot: &Snapshot, txns: &dyn Resolve) -> Result<Replaced> {
        let xid = snapshot.xid;
        debug_assert_ne!(xid, 0, "a writer has an id");
        if tid.block >= self.pages()? {
            return Ok(Replaced::Invisible);
        }
        let mut page = self.pool.write(self.id(tid.block))?;
        if let Some(refused) = self.check_replaceable(&page, tid, snapshot, txns)? {
            return Ok(refused);
        }
        let header = self.replaced_header(&page, tid, xid, None, false);
        HeapPage::new(page.body_mut()).set_header(tid.line, &header);
        self.log.log_for(
            xid,
            &mut [(
                &mut page,
                &[PageChange::HeapSetHeader {
                    line: tid.line,
                    header,
                }],
            )],
        )?;
        self.deletes.fetch_add(1, Ordering::Relaxed);
        Ok(Replaced::Deleted)
    }

    /// HF2: under the page's exclusive latch, whether the version at `tid` may be
    /// replaced; `Some` says why not. (Hints learned here are not set: the next reader
    /// sets them.)
    fn check_replaceable(
        &self,
        page: &PageMut<'_>,
        tid: Tid,
        snapshot: &Snapshot,
        txns: &dyn Resolve,
    ) -> Result<Option<Replaced>> {
        if !heap_kind(page, page.id())? {
            return Ok(Some(Replaced::Invisible));
        }
        let heap = HeapPage::new(page.body());
        check_line(&heap, page.id(), tid.line)?;
        let Some(header) = heap.header(tid.line) else {
            return Ok(Some(Replaced::Invisible));
        };
        let mut hint = Hints::default();
        let check = visibility::write_check(&header, snapshot, txns, &mut hint)?;
        Ok(match check {
            WriteCheck::Free => None,
            WriteCheck::Conflict => Some(Replaced::Conflict),
            WriteCheck::Invisible => Some(Replaced::Invisible),
        })
    }

    /// The header of the version at `tid` as replaced by `xid`: its `xmax`, its `ctid`
    /// (`hot_line` on the same page for a HOT update), its xmax hints cleared (they were
    /// about an aborted earlier `xmax`, or none).
    fn replaced_header(
        &self,
        page: &PageMut<'_>,
        tid: Tid,
        xid: u64,
        hot_line: Option<u16>,
        hot: bool,
    ) -> TupleHeader {
        let mut header = HeapPage::new(page.body())
            .header(tid.line)
            .expect("checked replaceable");
        header.xmax = xid;
        header.infomask &= !(infomask::XMAX_INVALID | infomask::XMAX_COMMITTED);
        header.infomask &= !infomask::HOT_UPDATED;
        // A delete leaves `ctid` naming the tuple itself (PostgreSQL's `heap_delete`):
        // eager pruning keeps a tuple replaced by no successor, the row's last version.
        // A cold update sets it to the new version after this.
        header.ctid_block = tid.block;
        header.ctid_line = hot_line.unwrap_or(tid.line);
        if hot {
            header.infomask |= infomask::HOT_UPDATED;
        }
        header
    }
}
