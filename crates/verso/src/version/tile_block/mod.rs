//! TB-Collect's tile-block version storage (Wei et al., Electronics 2025, §4.1 and Figure 3):
//! version headers in DRAM, grouped in *tiles*; version contents appended to *blocks* in a
//! region of (emulated) persistent memory, one tile per block, slot for slot.
//!
//! Definitions:
//! - A *block* is a run of the region's frames (`pmem::space`): a 256-byte metadata line
//!   (TB §4.1: a 240-byte update bitmap, `max_txnid`, `min_txnid`), then content records
//!   (`pmem::layout`), one per slot, appended and never changed. Each thread appends to a
//!   block of its own (its *open* block) until the block has `slots_per_block` records
//!   (1,920, TB §4.1) or the next record does not fit; then the block is *sealed*.
//! - Its *tile* is in DRAM: one header per slot (begin and end timestamps, the link to the
//!   next older version, where the record lies, whether the row exists in it), and the
//!   DRAM mirror of the update bitmap.
//! - A *version* is a header and its record. A *link* names a version: frame, generation,
//!   slot. A row (`TileRow`, what the indexes point at) holds its newest version's link
//!   (`head`); the versions chain newest to oldest through `next`, across tiles.
//! - The *update bitmap* marks a slot obsolete when a newer version supersedes it or its
//!   transaction aborts: the bit in DRAM and in the block's metadata line, with
//!   `max_txnid` raised in the same line (TB §4.3: "one line write"). Only tb-collect
//!   reads them (the DRAM side); the region's are kept from the first write so that the
//!   region's line counts are the paper's. Recovery trusts neither (`recovery.rs`).
//! - A transaction's id is its MVTO timestamp (its start, which is also its commit
//!   timestamp). A commit appends a commit record (the number of records the transaction
//!   appended) and persists every line its thread dirtied since its last persist point:
//!   the records, the metadata lines, the directory words of blocks it opened
//!   (`VersionStorage::commit_durably`). Nothing else is ever persisted; so the persisted
//!   update bitmap may hold bits of transactions that never committed, or miss a rollback's
//!   clearing, and recovery must not trust it (commit records say what committed).
//! - Of one transaction's records for one key, the last appended is its version: an own
//!   rewrite appends a new record and an insert that finds the key taken leaves its record
//!   unpublished (both marked aborted and obsolete in DRAM, not in the region).
//!
//! Invariants:
//! - T1. At most one version of a row is uncommitted, and it is the head; `pending` is its
//!   owner. A committed head is stamped (its `begin` set) before another transaction's
//!   version covers it, so every version behind the head is stamped.
//! - T2. A record's bytes never change once a row links its header (the link is stored
//!   under the row's exclusive latch, which every reader takes, after the record and the
//!   header were written), and its block is never freed while a reader could hold it (this
//!   storage never frees a block; tb-collect will, after a grace period). That is what lets
//!   a reader borrow a version's values in place. (A commit record that failed to persist
//!   is the one record changed later, to unmake it; no row links it.)
//! - T3. Records hold packed rows with every long value inline (`NonInline::Packed`): the
//!   region holds no pointer into DRAM. `Options::validate` refuses the other policies.
//! - A header is changed only under its row's exclusive latch, or before it is published.
//!
//! Version records (what the statistics count) are as in `append.rs`: the versions behind
//! the head, plus a new key's insert until its commit folds it; a version's bytes are its
//! header and its record.

use std::sync::atomic::AtomicPtr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::gc::tb_collect;
use crate::pmem::layout::{self, FrameState, Record, RecordKind, METADATA_LINE_BYTES};
use crate::pmem::space::{Extent, Opened, Space};
use crate::pmem::{self, LineWriter, PmStats, Purpose, RecoveryReport, Region};
use crate::row::{NonInline, PackedRef, PackedRow, RowView};
use crate::schema::ColumnMask;
use crate::sync::{Arc, WriteGuard};
use crate::txn::state::{TxnOutcome, TxnShared};
use crate::value::Value;
use crate::version::append::{whole_copies_mask, Decision, PruneDecisions};
mod chain;
mod hash_index;
#[cfg(all(test, loom))]
mod loom_tests;
mod reclaim;
mod recovery;

pub(crate) use chain::{TileBlockStorage, TileChain, TileRow};

use crate::version::{
    ActiveSnapshots, BlockGcContext, ChainEdit, Created, GoneVersion, NewRowContext, PruneReport,
    ReadCost, Refusal, RollbackReport, Snapshot, StampReport, VersionStorage, WriteIntent,
    WriteResult,
};

/// `begin` of a version whose transaction has not stamped it yet.
const UNSTAMPED: u64 = u64::MAX;
/// `begin` of the tombstone a rolled-back insert of a new key leaves: visible to every
/// snapshot, saying "no row" to all of them.
const NEVER_EXISTED: u64 = 0;
/// `end` of a version nothing superseded.
const LATEST: u64 = u64::MAX;

/// Header flags.
const EXISTS: u32 = 1;
const ABORTED: u32 = 2;
/// The tombstone of a buried row (or a relocated copy of one): obsolete for the block's
/// share (no row reads it), yet a record relocation must weigh (D23) before it drops it.
const BURIED: u32 = 4;
/// A record a collection weighed already (copied, or dropped) in a block it then put back:
/// not weighed again.
const WEIGHED: u32 = 8;
/// A commit record's slot (no version).
const COMMIT_SLOT: u32 = 16;

/// The bytes a header takes in DRAM (counted in a version's bytes).
const HEADER_BYTES: usize = std::mem::size_of::<Header>();

/// One version's header (TB §4.1's `tuple_header`, without `read_ts`, which MVTO keeps in
/// the row word, and without `prev`, which nothing walks).
#[derive(Default)]
struct Header {
    /// Commit timestamp of the creating transaction, `UNSTAMPED` before its stamp.
    begin: AtomicU64,
    /// Id of the transaction whose version superseded this one; `LATEST` if none.
    end: AtomicU64,
    /// Link to the next older version (`Link::NONE`: the oldest).
    next: AtomicU64,
    /// Region offset of the record's payload (the packed row).
    at: AtomicU64,
    /// The payload's length.
    len: AtomicU32,
    flags: AtomicU32,
}

/// A version's name: `frame:22 | indexed:1 | generation:30 | slot + 1:11` (zero: none).
/// Without `indexed`, the version in the block at `frame` (of that generation) and its
/// tile; with it, the entry for `slot` in the version index at `frame` (TB-Collect-hash,
/// `hash_index.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link(u64);

/// The bits of a frame's generation a link keeps.
const LINK_GENERATION_MASK: u64 = 0x3FFF_FFFF;
const INDEXED_LINK: u64 = 1 << 41;

impl Link {
    const NONE: Link = Link(0);

    fn new(frame: u64, generation: u64, slot: u32) -> Link {
        debug_assert!(frame < layout::MAX_FRAMES && slot < layout::SLOTS_PER_BLOCK);
        Link(frame << 42 | (generation & LINK_GENERATION_MASK) << 11 | u64::from(slot + 1))
    }

    /// The link of the entry for `slot` in the version index whose run starts at `frame`
    /// (of `generation`).
    fn into_index(frame: u64, generation: u64, slot: u32) -> Link {
        Link(Link::new(frame, generation, slot).0 | INDEXED_LINK)
    }

    /// Whether it names a version index's entry rather than a tile's header.
    fn indexed(self) -> bool {
        self.0 & INDEXED_LINK != 0
    }

    /// Whether it names a header of the block `extent` (untagged, same frame and
    /// generation).
    fn names_block(self, extent: Extent) -> bool {
        !self.is_none()
            && !self.indexed()
            && self.frame() as u64 == extent.first_frame
            && self.generation() == extent.generation & LINK_GENERATION_MASK
    }

    fn is_none(self) -> bool {
        self.0 == 0
    }

    fn frame(self) -> usize {
        (self.0 >> 42) as usize
    }

    fn generation(self) -> u64 {
        (self.0 >> 11) & LINK_GENERATION_MASK
    }

    fn slot(self) -> usize {
        ((self.0 & 0x7FF) - 1) as usize
    }
}

/// The DRAM states of a block (`Tile::state`). Only the thread that moves a block out of
/// `SEALED` (into a queue) owns it until it is freed or put back.
mod block_state {
    /// A thread appends to it.
    pub(super) const OPEN: u64 = 0;
    /// Full; no queue holds it.
    pub(super) const SEALED: u64 = 1;
    /// In one thread's queue (pending, local or long).
    pub(super) const QUEUED: u64 = 2;
    /// A collection is deciding its fate: writers that would obsolete one of its slots
    /// retry (the Dekker pair with `max_txnid`, design note "Freezing").
    pub(super) const FREEZING: u64 = 3;
    /// A collection relocates its latest versions and frees it.
    pub(super) const FROZEN: u64 = 4;
    /// Its block is freed; the tile is kept while long transactions or links need its
    /// headers (no content may be read through it).
    pub(super) const BLOCK_FREED: u64 = 5;
}

/// The writer's half of the Dekker pair with a collection freezing a block (design note,
/// "Block-level collection"): before transaction `id` covers a version in the block, it
/// raises the block's `max_txnid`, then reads its state. False: the block is being frozen;
/// the writer retries once its version was moved. Otherwise the freezer, which sets the
/// state before it reads `max_txnid` ([`freeze`]), sees `id` in the block's bounds while
/// the writer runs, and puts the block back.
fn may_cover(max_txnid: &crate::sync::AtomicU64, state: &crate::sync::AtomicU64, id: u64) -> bool {
    max_txnid.fetch_max(id, Ordering::SeqCst);
    // (SeqCst accesses order the pair already; loom checks it through the fence.)
    crate::sync::fence_seq_cst();
    let state = state.load(Ordering::SeqCst);
    debug_assert_ne!(state, block_state::BLOCK_FREED, "a head in a freed block");
    state != block_state::FREEZING && state != block_state::FROZEN
}

/// The freezer's half: the state becomes `FREEZING` (from `QUEUED`); the caller then takes
/// a fresh list of active snapshots and reads `max_txnid`, both after this store.
fn freeze(state: &crate::sync::AtomicU64) {
    let was = state.swap(block_state::FREEZING, Ordering::SeqCst);
    debug_assert_eq!(was, block_state::QUEUED, "only a queued block is frozen");
    crate::sync::fence_seq_cst();
}

/// The DRAM side of one block.
struct Tile {
    /// Region offset of the block's first byte (its metadata line).
    block_at: u64,
    /// The block's frames (freed with it).
    extent: Extent,
    generation: u64,
    headers: Box<[Header]>,
    /// The update bitmap's DRAM mirror: 1 = obsolete.
    bits: Box<[AtomicU64]>,
    /// Slots used (for tb-collect's share of obsolete slots).
    used: AtomicU32,
    /// Slots marked obsolete.
    obsolete: AtomicU32,
    /// The highest id of a transaction that appended to the block or obsoleted a slot in it
    /// (the region's `max_txnid` is raised only by obsoleting, TB §4.3; appenders too here,
    /// so that a collection never takes a block an uncommitted appender still writes).
    /// Raised with `SeqCst` by an obsoleter before it reads `state` (the Dekker pair,
    /// `may_cover` and `freeze`).
    max_txnid: crate::sync::AtomicU64,
    /// The lowest id of a transaction that appended to the block (exact; the region's is
    /// the first appender's, TB §4.1).
    min_txnid: AtomicU64,
    /// `block_state`.
    state: crate::sync::AtomicU64,
    /// Headers of this tile a chain still reaches other than as a latest version (bit 0)
    /// that relocation moves: versions behind a row's newest, and the "never existed"
    /// newest version a rolled-back insert leaves until its row is buried. The tile may be
    /// freed only at zero (nothing reaches it then: relocation moved the rest).
    pinned: AtomicU32,
    /// Of them, those of rows in tables with secondary indexes: their contents are read by
    /// finalizing's index upkeep, so the block may be freed only at zero.
    pinned_indexed: AtomicU32,
    /// The lowest begin of a committed version in this block that a newer one superseded
    /// (`u64::MAX`: none): a latest tombstone older than every such version in the region
    /// can be dropped (nothing older of its key is left for recovery to mistake for it).
    min_superseded: AtomicU64,
    /// The commit records in this block of transactions whose records went to other
    /// blocks too, by slot, with those blocks (`block_id`s). Such a commit record is
    /// copied when this block is freed while one of those blocks is still in the region:
    /// it is what says their records committed (design note, "Commit records").
    spans: Mutex<Vec<(u32, Vec<u64>)>>,
}

/// A block's id while it is in the region: its first frame and its generation (the
/// directory's 40 bits).
fn block_id(extent: Extent) -> u64 {
    layout::block_key(extent.first_frame, extent.generation)
}

impl Tile {
    fn new(block_at: u64, extent: Extent, slots: u32) -> Tile {
        Tile {
            block_at,
            extent,
            generation: extent.generation,
            headers: (0..slots).map(|_| Header::default()).collect(),
            bits: (0..slots.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            used: AtomicU32::new(0),
            obsolete: AtomicU32::new(0),
            max_txnid: crate::sync::AtomicU64::new(0),
            min_txnid: AtomicU64::new(u64::MAX),
            state: crate::sync::AtomicU64::new(block_state::OPEN),
            pinned: AtomicU32::new(0),
            pinned_indexed: AtomicU32::new(0),
            min_superseded: AtomicU64::new(u64::MAX),
            spans: Mutex::new(Vec::new()),
        }
    }

    /// The DRAM bytes a tile of `slots` slots takes.
    fn bytes(slots: u32) -> u64 {
        (std::mem::size_of::<Tile>()
            + slots as usize * HEADER_BYTES
            + slots.div_ceil(64) as usize * 8) as u64
    }

    /// Moves a sealed block into a queue (`SEALED` → `QUEUED`): true for the one caller that
    /// did, which puts it in a queue.
    fn claim_for_a_queue(&self) -> bool {
        self.state
            .compare_exchange(
                block_state::SEALED,
                block_state::QUEUED,
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Counts a header of a row in an `indexed` table that a chain now reaches other than
    /// as a relocatable latest version (`Tile::pinned`).
    fn pin(&self, indexed: bool) {
        self.pinned.fetch_add(1, Ordering::SeqCst);
        if indexed {
            self.pinned_indexed.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn unpin(&self, indexed: bool) {
        let before = self.pinned.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "unpinned more than pinned");
        if indexed {
            let before = self.pinned_indexed.fetch_sub(1, Ordering::SeqCst);
            debug_assert!(before > 0, "unpinned more than pinned (indexed)");
        }
    }
}

/// A thread's appending state: its writer, and the blocks it appends to, one per table.
/// Only its thread uses it (so no lock); when the thread ends, its open blocks go to the
/// store's spares for the next thread, so threads that come and go do not leave
/// near-empty blocks behind.
///
/// One open block per table, not one for all (TB §3: "the same table heap" holds a
/// table's versions): a block's slots then age together. Mixed in one block, the records
/// that stay latest for ever (TPC-C's history rows, its delivered orders and order lines)
/// kept nearly every block of a TPC-C run below θ, so tb-collect freed almost nothing
/// (`tb-fig12`, docs/lab-notebook.md).
struct Appender {
    writer: LineWriter,
    /// The open block of each table, by table index (grown as tables get records).
    open: Vec<Option<OpenBlock>>,
    /// The table of the last version this thread appended: where a transaction's commit
    /// record goes when its records are not in one block (any block would do: the commit
    /// protocol persists them first then).
    last_table: u32,
    /// The block a collection on this thread copies latest versions into (TB Algorithm
    /// 2's "block N+1"), apart from `open`: its records carry old ids, which would widen
    /// the append block's `[min_txnid, max_txnid]` and delay its collection.
    relocation: Option<OpenBlock>,
    /// This thread's collection queues (also in the store's registry).
    gc: std::sync::Arc<Mutex<reclaim::ThreadGc>>,
    /// The store's spare blocks, where its open blocks go when it retires.
    spares: std::sync::Arc<Mutex<Vec<OpenBlock>>>,
}

/// Which of a thread's open blocks a record goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// The block the thread's transactions append this table's records to.
    Append(u32),
    /// The block its collections copy latest versions into.
    Relocation,
}

/// The block sequence a record gets (`layout::RECORD_HEADER_BYTES`' `sequence`).
#[derive(Clone, Copy)]
enum Sequence<'a> {
    /// The next record of this transaction.
    Of(&'a TxnShared),
    /// A commit record's (none needed: 0) or a collection's copy's (the original's).
    Copied(u16),
}

struct OpenBlock {
    /// What it was opened for: a table's records or a collection's copies (a spare block
    /// is taken again only for the same).
    target: Target,
    extent: Extent,
    /// Region offset of the block's first byte, and its size.
    at: u64,
    bytes: u64,
    /// Offset of the next record within the block.
    cursor: u64,
    /// Slots used.
    slots: u32,
}

/// What the tile-block storage keeps beside its rows.
pub(crate) struct TileStore {
    /// Tells stores apart in the threads' appender caches.
    id: u64,
    region: std::sync::Arc<Region>,
    space: Space,
    slots_per_block: u32,
    /// The tile of each block, by the block's first frame (null: none). A tile is freed
    /// (swapped out and dropped) only when nothing reaches it (`Tile::pinned` is zero and
    /// its latest versions were relocated) and no queue holds it but the freeing thread's.
    tiles: Box<[AtomicPtr<Tile>]>,
    /// Tiles kept after their blocks were freed (TB §4.4 case 2), by the frame the block
    /// had (null: none); at most one per frame (a block at a frame whose kept tile is still
    /// there waits to be freed). Freed by the thread whose `kept` list holds the frame.
    kept_tiles: Box<[AtomicPtr<Tile>]>,
    /// How a collection keeps chains whole when it frees a block they reach (TB-Collect's
    /// kept tiles, or TB-Collect-hash's version indexes).
    consolidation: crate::ChainConsolidation,
    /// The version indexes of TB-Collect-hash, by the first frame of their run (null:
    /// none). Freed by the thread whose `indexes` list holds the frame (`hash_index.rs`).
    indexes: Box<[AtomicPtr<hash_index::IndexedBlock>]>,
    /// Blocks that became candidates, for the next thread that collects (its pending
    /// queue), and how many (read without the lock at every collection point).
    candidates: Mutex<Vec<usize>>,
    candidate_count: std::sync::atomic::AtomicUsize,
    /// Held by whoever walks the whole tile table (reading tiles it does not own) and by
    /// a collection while it takes tiles out of the table.
    table_scans: Mutex<()>,
    /// Blocks a collection took out of the tile table whose `FREE` words are not persisted
    /// yet, as (block id, `min_superseded`): a power loss may still keep any of them
    /// (`FROZEN`, read again by recovery), so for every other collection they are still in
    /// the region (D23's bound, a `Withdrawn` record naming one). Entered under
    /// `table_scans` before the tile leaves the table; left once the words are persisted.
    frees_not_durable: Mutex<Vec<(u64, u64)>>,
    /// Tests: run by the next collection between its tiles leaving the table and the
    /// persist point of its `FREE` words (another collection runs there).
    #[cfg(test)]
    before_free_is_durable: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// Tests: run by the next TB-Collect-hash consolidation between its index's build and
    /// its switch of the chains (another collection runs there).
    #[cfg(test)]
    after_index_built: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// Open blocks of threads that ended, for the next thread that appends.
    spare_blocks: std::sync::Arc<Mutex<Vec<OpenBlock>>>,
    /// Every thread's appender of this store (`pmem/appenders.rs`).
    appenders: pmem::appenders::Registry,
    /// Every thread's collection queues (Algorithm 2 scans them all when a long
    /// transaction ends; `collect_garbage` drains them).
    threads: Mutex<Vec<std::sync::Arc<Mutex<reclaim::ThreadGc>>>>,
    /// When the store opened: the origin of the epochs, and their length.
    opened: std::time::Instant,
    epoch: std::time::Duration,
    /// The newest start a classification marked long (D17): a transaction that ends with
    /// a start at or below it runs Algorithm 2's step 1.
    long_mark: AtomicU64,
    counters: reclaim::Counters,
    /// The catalog area's next free byte (the tables it lists are the engine's, in order).
    catalog_next: Mutex<u64>,
    /// What recovery rebuilt, until the engine takes it (`VersionStorage::take_recovered`).
    recovered: Mutex<Option<crate::version::Recovered<TileRow>>>,
    /// Blocks a crash left frozen, for Algorithm 3 (`finish_interrupted_collections`, which
    /// the engine's recovery runs before the database opens).
    recovered_frozen: Mutex<Vec<usize>>,
    /// What the open recovered (`None`: a new region).
    recovery: Mutex<Option<RecoveryReport>>,
    /// Frames of version indexes (`Scratch` runs) the open freed (TB-Collect-hash).
    scratch_frames_freed_at_open: u64,
    /// `Database::close` was called: no commit or collection writes to the region.
    closed: std::sync::atomic::AtomicBool,
    /// The database directory's lock (with `Options::path`), held for as long as the store
    /// lives, so that no other open maps the region while anything here may still write
    /// to it (a clone's uncommitted appends, a round of the janitor).
    directory_lock: Mutex<Option<Box<dyn crate::fs::DirectoryLock>>>,
}

impl pmem::appenders::ThreadAppender for Appender {
    /// The thread ends (or the store goes): its open blocks go to the spares, its
    /// candidates stay in its pending queue (in the store's registry, for others to drain).
    fn retire(&mut self) {
        // What the thread stored but never persisted (a rolled-back transaction's records,
        // a directory word of a block it opened) is persisted before another thread
        // appends after it: recovery reads a block up to its first torn record, and the
        // other thread's persist points cover only its own stores
        // (`regression_a_block_a_thread_left_keeps_the_next_threads_commits`). A failure
        // fails the region, which then refuses every commit.
        let _ = self.writer.persist();
        let open = self.open.iter_mut().map(Option::take);
        for block in open.chain([self.relocation.take()]).flatten() {
            lock(&self.spares).push(block);
        }
        lock(&self.gc).retired = true;
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

impl TileStore {
    /// Opens the region `options` name (in the database's directory with a path), with the
    /// catalog and blocks found in it scanned for recovery (`None`: nothing to recover).
    fn open(options: &crate::Options) -> Result<(TileStore, Option<recovery::Scan>)> {
        let pm = options.persistent_memory.clone().unwrap_or_default();
        let region = pmem::open_region(&pm, options.path.as_deref())?;
        let mut writer = region.writer();
        let plan = layout::Plan {
            slots_per_block: pm.slots_per_block,
            ..layout::Plan::default()
        };
        let Opened {
            space,
            blocks,
            scratch_frames_freed,
            ..
        } = Space::open(&region, &mut writer, plan)?;
        let g = *space.geometry();
        let mut catalog = vec![0u8; g.catalog_bytes as usize];
        region.read(g.catalog_offset, &mut catalog);
        let (tables, catalog_next) =
            layout::decode_catalog(&catalog, &region.describe(), g.catalog_offset)?;
        let slots_per_block = g.slots_per_block;
        let store = TileStore {
            id: pmem::appenders::new_store_id(),
            region,
            space,
            slots_per_block,
            tiles: recovery::null_table(g.frame_count),
            kept_tiles: recovery::null_table(g.frame_count),
            consolidation: options.chain_consolidation,
            indexes: recovery::null_table(g.frame_count),
            table_scans: Mutex::new(()),
            frees_not_durable: Mutex::new(Vec::new()),
            #[cfg(test)]
            before_free_is_durable: Mutex::new(None),
            #[cfg(test)]
            after_index_built: Mutex::new(None),
            candidates: Mutex::new(Vec::new()),
            candidate_count: std::sync::atomic::AtomicUsize::new(0),
            spare_blocks: std::sync::Arc::default(),
            appenders: pmem::appenders::Registry::default(),
            threads: Mutex::new(Vec::new()),
            opened: std::time::Instant::now(),
            epoch: options.block_gc_epoch.unwrap_or(tb_collect::EPOCH),
            long_mark: AtomicU64::new(0),
            counters: reclaim::Counters::default(),
            catalog_next: Mutex::new(catalog_next as u64),
            recovered: Mutex::new(None),
            recovered_frozen: Mutex::new(Vec::new()),
            recovery: Mutex::new(None),
            scratch_frames_freed_at_open: scratch_frames_freed,
            closed: std::sync::atomic::AtomicBool::new(false),
            directory_lock: Mutex::new(None),
        };
        drop(writer); // the format's persist points are counted; appenders start afresh
        let scan = if tables.is_empty() && blocks.is_empty() {
            None
        } else {
            Some(store.scan(tables, &blocks)?)
        };
        Ok((store, scan))
    }

    /// Refuses a write to the region once the database is closed.
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::DatabaseClosed);
        }
        Ok(())
    }

    /// `Database::close`: no commit or collection writes to the region any more (every
    /// acknowledged commit is persisted already; a transaction still running fails to
    /// commit with `Error::DatabaseClosed`).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Holds the database directory's lock until the store is dropped.
    pub(crate) fn hold_directory_lock(&self, lock: Box<dyn crate::fs::DirectoryLock>) {
        *self::lock(&self.directory_lock) = Some(lock);
    }

    /// What the open recovered (`None`: the region was new).
    pub(crate) fn recovery_report(&self) -> Option<RecoveryReport> {
        *lock(&self.recovery)
    }

    /// Appends a table's definition to the region's catalog and persists it: the table
    /// exists after a crash iff this returned (the catalog's decoder drops a torn tail).
    /// `index` is the engine's, which is the catalog's order.
    fn record_table(&self, index: u32, schema: &crate::schema::TableSchema) -> Result<()> {
        self.check_open()?;
        let g = *self.space.geometry();
        let mut next = lock(&self.catalog_next);
        let record = layout::encode_catalog_record(schema);
        if *next + record.len() as u64 > g.catalog_bytes {
            return Err(Error::CapacityExceeded {
                what: format!(
                    "bytes of table definitions in the persistent-memory catalog (table {index}, {})",
                    schema.name
                ),
                limit: g.catalog_bytes as usize,
            });
        }
        let mut writer = self.region.writer();
        writer.store(g.catalog_offset + *next, &record, Purpose::Catalog);
        writer.persist().map_err(|error| Error::DurabilityLost {
            reason: format!(
                "persisting table {} to the persistent-memory catalog: {error}",
                schema.name
            ),
        })?;
        *next += record.len() as u64;
        Ok(())
    }

    /// Runs `f` with this thread's appender of this store (made on first use).
    fn with_appender<R>(self: &std::sync::Arc<Self>, f: impl FnOnce(&mut Appender) -> R) -> R {
        pmem::appenders::with_thread_appender(self.id, &self.appenders, || self.new_appender(), f)
    }

    /// A thread's appender, its collection queues registered with the store.
    fn new_appender(&self) -> Appender {
        let gc = std::sync::Arc::new(Mutex::new(reclaim::ThreadGc::default()));
        lock(&self.threads).push(std::sync::Arc::clone(&gc));
        Appender {
            writer: self.region.writer(),
            open: Vec::new(),
            last_table: 0,
            relocation: None,
            gc,
            spares: std::sync::Arc::clone(&self.spare_blocks),
        }
    }

    /// The tile of the block whose first frame is `frame`, if it has one.
    fn tile_at(&self, frame: usize) -> Option<&Tile> {
        Self::tile_in(&self.tiles, frame)
    }

    /// The tile kept at `frame` after its block was freed, if there is one.
    fn kept_tile_at(&self, frame: usize) -> Option<&Tile> {
        Self::tile_in(&self.kept_tiles, frame)
    }

    /// The tile `table` (the tile table or the kept-tile table) holds at `frame`.
    #[allow(unsafe_code)]
    fn tile_in(table: &[AtomicPtr<Tile>], frame: usize) -> Option<&Tile> {
        let tile = table[frame].load(Ordering::Acquire);
        if tile.is_null() {
            return None;
        }
        // SAFETY: a non-null entry points at a tile made by `Box::into_raw` in
        // `open_block`, which a collection drops (`reclaim.rs`) only after nulling its
        // entry, and only when no chain reaches the tile (`Tile::pinned` is zero and its
        // latest versions were moved) and no queue holds its block but the freeing
        // thread's; a kept tile, when nothing pins it. Whoever loaded the pointer reached
        // it through a link a chain holds under its row's latch, or owns the block through
        // a queue, or appends to it, or holds `table_scans` (which the freeing holds too):
        // none of them overlaps a free.
        Some(unsafe { &*tile })
    }

    /// A copy of the record at `slot` of `tile`'s block (its header and padded payload),
    /// for a collection, which owns the block.
    fn record_bytes(&self, tile: &Tile, slot: usize) -> Vec<u8> {
        let header = &tile.headers[slot];
        let len = header.len.load(Ordering::Relaxed) as usize;
        let record_at = header.at.load(Ordering::Relaxed) - layout::RECORD_HEADER_BYTES as u64;
        let mut bytes = vec![0u8; layout::stored_record_bytes(len)];
        self.region.read(record_at, &mut bytes);
        bytes
    }

    /// The tile `link` names: its block's, or the tile kept after the block was freed. A
    /// link into a freed tile is a broken invariant: it panics rather than read another
    /// block's tile.
    fn tile(&self, link: Link) -> &Tile {
        debug_assert!(!link.indexed(), "an index entry has no tile");
        let generation = link.generation();
        let matches = |tile: &&Tile| tile.generation & LINK_GENERATION_MASK == generation;
        self.tile_at(link.frame())
            .filter(matches)
            .or_else(|| self.kept_tile_at(link.frame()).filter(matches))
            .unwrap_or_else(|| panic!("a link into a freed tile (frame {})", link.frame()))
    }

    fn header(&self, link: Link) -> &Header {
        &self.tile(link).headers[link.slot()]
    }

    /// `begin` of `link`'s version (its header's, or its index entry's).
    fn begin_of(&self, link: Link) -> u64 {
        if link.indexed() {
            let (_, entry) = self.index_entry(link);
            return entry.begin(&self.region);
        }
        self.header(link).begin.load(Ordering::Acquire)
    }

    /// The link to the version older than `link`'s.
    fn next_of(&self, link: Link) -> Link {
        if link.indexed() {
            let (indexed, entry) = self.index_entry(link);
            return indexed.link_out_of(Link(entry.link(&self.region).0));
        }
        Link(self.header(link).next.load(Ordering::Relaxed))
    }

    /// Whether the row exists in `link`'s version.
    fn exists_in(&self, link: Link) -> bool {
        if link.indexed() {
            let (_, entry) = self.index_entry(link);
            return entry.exists(&self.region);
        }
        self.header(link).flags.load(Ordering::Relaxed) & EXISTS != 0
    }

    /// Makes `next` the version older than `link`'s (the caller holds the row's latch
    /// exclusively). In an index entry: one small write, persisted now.
    fn set_next(&self, link: Link, next: Link) {
        if link.indexed() {
            let mut writer = self.region.writer();
            self.set_next_through(&mut writer, link, next);
            // Nothing recovery reads: a failure fails the region, which refuses every
            // later commit.
            let _ = writer.persist();
            return;
        }
        self.header(link).next.store(next.0, Ordering::Relaxed);
    }

    /// Un-counts `link`'s version among what chains reach (`Tile::pinned`, or its index's).
    fn unpin(&self, link: Link, indexed_table: bool) {
        if link.indexed() {
            debug_assert!(
                !indexed_table,
                "no version of an indexed table is in an index"
            );
            let (indexed, _) = self.index_entry(link);
            indexed.unpin();
            return;
        }
        self.tile(link).unpin(indexed_table);
    }

    /// The payload of `link`'s record, in place (invariant T2).
    #[allow(unsafe_code)]
    fn payload(&self, link: Link) -> &[u8] {
        assert!(
            !link.indexed(),
            "no one reads the contents of a version in an index (hash_index.rs, H3)"
        );
        debug_assert_ne!(
            self.tile(link).state.load(Ordering::Relaxed),
            block_state::BLOCK_FREED,
            "no one reads a version whose block was freed (case proofs, gc/tb_collect.rs)"
        );
        let header = self.header(link);
        let (at, len) = (
            header.at.load(Ordering::Relaxed),
            header.len.load(Ordering::Relaxed),
        );
        // SAFETY: the record was stored before a row linked its header (under the row's
        // latch), and no one stores into a linked record or frees its block while this
        // store lives (T2).
        unsafe { self.region.bytes(at, len as usize) }
    }

    /// Counts a record `owner` appended at `link`, and the block it went to.
    fn count_record(&self, owner: &TxnShared, link: Link) {
        owner.count_storage_record();
        owner.note_storage_block(block_id(self.tile(link).extent));
    }

    /// The bytes a version takes: its header and its record.
    fn version_bytes(&self, link: Link) -> usize {
        let len = if link.indexed() {
            let (_, entry) = self.index_entry(link);
            entry.len(&self.region)
        } else {
            self.header(link).len.load(Ordering::Relaxed) as usize
        };
        HEADER_BYTES + layout::stored_record_bytes(len)
    }

    /// Appends a record of `kind` to this thread's open block (opening one if needed) and
    /// publishes a header for it: `begin` unstamped, `end` latest, `next` as given.
    /// `sequence`: the transaction's block sequence, of the record's owner or a copy's.
    #[allow(clippy::too_many_arguments)]
    fn append_version(
        &self,
        appender: &mut Appender,
        into: Target,
        (kind, flags): (RecordKind, u8),
        (table, sequence): (u32, Sequence<'_>),
        txn_id: u64,
        payload: &[u8],
        next: Link,
    ) -> Result<Link> {
        let table = u16::try_from(table).expect("at most 4,096 tables");
        let stored = layout::stored_record_bytes(payload.len()) as u64;
        let block = self.block_for(appender, into, stored, txn_id)?;
        let sequence = match sequence {
            Sequence::Copied(sequence) => sequence,
            Sequence::Of(owner) => {
                let sequence = owner.storage_block_sequence(block_id(block.extent));
                u16::try_from(sequence).map_err(|_| Error::CapacityExceeded {
                    what: "blocks one transaction's records span".into(),
                    limit: usize::from(u16::MAX) + 1,
                })?
            }
        };
        let slot = block.slots;
        let record_at = block.at + block.cursor;
        block.cursor += stored;
        block.slots += 1;
        let extent = block.extent;
        let header = layout::record_header(
            &Record {
                kind,
                flags,
                table,
                txn_id,
                slot: slot as u16,
                sequence,
                payload,
            },
            block_id(extent),
        );
        let purpose = match kind {
            RecordKind::Commit | RecordKind::Withdrawn => Purpose::CommitRecord,
            RecordKind::Relocated => Purpose::Relocation,
            RecordKind::Version | RecordKind::Tombstone => Purpose::Content,
        };
        // The header, the payload from where it is (no copy of the record put together
        // first: this is every write's path), then the padding to 8.
        let payload_at = record_at + layout::RECORD_HEADER_BYTES as u64;
        appender.writer.store(record_at, &header, purpose);
        appender.writer.store(payload_at, payload, purpose);
        let padding = stored as usize - layout::RECORD_HEADER_BYTES - payload.len();
        appender.writer.store(
            payload_at + payload.len() as u64,
            &[0u8; 7][..padding],
            purpose,
        );
        let tile = self
            .tile_at(extent.first_frame as usize)
            .expect("an open block has a tile");
        let header = &tile.headers[slot as usize];
        header.begin.store(UNSTAMPED, Ordering::Relaxed);
        header.end.store(LATEST, Ordering::Relaxed);
        header.next.store(next.0, Ordering::Relaxed);
        header.at.store(payload_at, Ordering::Relaxed);
        header.len.store(payload.len() as u32, Ordering::Relaxed);
        let exists = match kind {
            RecordKind::Version => EXISTS,
            RecordKind::Relocated if flags & layout::RELOCATED_TOMBSTONE == 0 => EXISTS,
            _ => 0,
        };
        header.flags.store(exists, Ordering::Relaxed);
        tile.max_txnid.fetch_max(txn_id, Ordering::SeqCst);
        tile.min_txnid.fetch_min(txn_id, Ordering::Relaxed);
        tile.used.store(slot + 1, Ordering::Relaxed);
        if !matches!(kind, RecordKind::Commit | RecordKind::Withdrawn) {
            // (`append_marker` flags the others `COMMIT_SLOT`, which a free counts by.)
            self.counters
                .version_records
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(Link::new(extent.first_frame, extent.generation, slot))
    }

    /// This thread's open block (`into` says which: the append block or the relocation
    /// block) with room for a record of `stored` bytes: the current one, a spare one a
    /// thread that ended left, or a new one; the current one is sealed when another takes
    /// its place (only then: a full region refuses before anything changed).
    fn block_for<'a>(
        &self,
        appender: &'a mut Appender,
        into: Target,
        stored: u64,
        txn_id: u64,
    ) -> Result<&'a mut OpenBlock> {
        let fits = |b: &OpenBlock| b.slots < self.slots_per_block && b.cursor + stored <= b.bytes;
        if let Target::Append(table) = into {
            let needed = table as usize + 1;
            if appender.open.len() < needed {
                appender.open.resize_with(needed, || None);
            }
            appender.last_table = table;
        }
        if !Self::open_for(appender, into).as_ref().is_some_and(fits) {
            let spare = {
                let mut spares = lock(&self.spare_blocks);
                spares
                    .iter()
                    .position(|b| b.target == into && fits(b))
                    .map(|i| spares.swap_remove(i))
            };
            let next = match spare {
                Some(block) => block,
                None => self.open_block(appender, into, stored, txn_id)?,
            };
            if let Some(full) = Self::open_for(appender, into).replace(next) {
                self.seal(appender, full);
            }
        }
        Ok(Self::open_for(appender, into)
            .as_mut()
            .expect("opened above"))
    }

    /// `appender`'s open block for `into` (the table's entry exists: `block_for` grew the
    /// list).
    fn open_for(appender: &mut Appender, into: Target) -> &mut Option<OpenBlock> {
        match into {
            Target::Append(table) => &mut appender.open[table as usize],
            Target::Relocation => &mut appender.relocation,
        }
    }

    /// Seals a full block: sealed in the directory (durable at the writer's next persist
    /// point) and in DRAM, where it becomes a candidate (queued in this thread's pending
    /// queue) if it is one already.
    fn seal(&self, appender: &mut Appender, full: OpenBlock) {
        self.space
            .set_state(&mut appender.writer, full.extent, FrameState::Sealed);
        let tile = self
            .tile_at(full.extent.first_frame as usize)
            .expect("an open block has a tile");
        self.counters.add(&self.counters.blocks_sealed, 1);
        tile.state.store(block_state::SEALED, Ordering::SeqCst);
        self.queue_if_candidate(full.extent.first_frame as usize, tile);
    }

    /// A new block with room for a record of `stored` bytes, its directory word and
    /// metadata line stored through `appender`'s writer, its tile published.
    fn open_block(
        &self,
        appender: &mut Appender,
        target: Target,
        stored: u64,
        txn_id: u64,
    ) -> Result<OpenBlock> {
        let g = *self.space.geometry();
        let frames = (METADATA_LINE_BYTES + stored).div_ceil(g.frame_bytes);
        let frames = u32::try_from(frames).unwrap_or(u32::MAX);
        let extent = self
            .space
            .allocate(&mut appender.writer, frames, FrameState::Open)?;
        let at = g.frame_offset(extent.first_frame);
        // TB §4.1: the metadata line is written when the block gets its first version: an
        // empty bitmap, `max_txnid` 0, `min_txnid` the first appender's id. (The DRAM side
        // keeps the exact minimum, which a later, older appender may lower; tb-collect
        // decides by the DRAM side.)
        let mut line = [0u8; METADATA_LINE_BYTES as usize];
        line[layout::MIN_TXNID_AT as usize..].copy_from_slice(&txn_id.to_le_bytes());
        appender.writer.store(at, &line, Purpose::BlockMetadata);
        // The directory word is durable before any record goes into the block: were it to
        // become durable only with the block's first records, a power loss could keep the
        // records and lose the word, and the next block at this frame, of the same
        // generation (nothing freed it), would take them for its own
        // (`regression_records_of_a_block_whose_allocation_was_lost_never_come_back`).
        // One more persist point per block: one per 1,920 records.
        appender
            .writer
            .persist()
            .map_err(|error| Error::DurabilityLost {
                reason: format!(
                    "persisting a new block's directory word in the persistent-memory region: \
                     {error}"
                ),
            })?;
        let tile = Box::into_raw(Box::new(Tile::new(at, extent, self.slots_per_block)));
        self.counters.blocks_live.fetch_add(1, Ordering::Relaxed);
        let before = self.tiles[extent.first_frame as usize].swap(tile, Ordering::AcqRel);
        debug_assert!(before.is_null(), "a freshly allocated block has no tile");
        Ok(OpenBlock {
            target,
            extent,
            at,
            bytes: u64::from(frames) * g.frame_bytes,
            cursor: METADATA_LINE_BYTES,
            slots: 0,
        })
    }

    /// Marks `link`'s slot obsolete (TB §4.3 step 2: the bit and `max_txnid` in the block's
    /// metadata line, one line) on behalf of transaction `by`; queues the block if that
    /// made it a candidate (TB Algorithm 1, line 4). Returns whether the bit was clear.
    fn obsolete(&self, appender: &mut Appender, link: Link, by: u64) -> bool {
        let (tile, newly) = self.obsolete_in_dram(link, by);
        let slot = link.slot();
        let mask = 1u64 << (slot % 64);
        let word_at = tile.block_at + (slot / 64 * 8) as u64;
        appender
            .writer
            .fetch_or_u64(word_at, mask, Purpose::BlockMetadata);
        appender.writer.fetch_max_u64(
            tile.block_at + layout::MAX_TXNID_AT,
            by,
            Purpose::BlockMetadata,
        );
        if newly {
            self.queue_if_candidate(link.frame(), tile);
        }
        newly
    }

    /// Marks `link`'s slot obsolete in the tile only: for a slot whose record was never a
    /// version anyone could read (a commit record), which the persisted bitmap need not
    /// record (recovery never trusts it). Returns the tile and whether the bit was clear.
    fn obsolete_in_dram(&self, link: Link, by: u64) -> (&Tile, bool) {
        let tile = self.tile(link);
        let slot = link.slot();
        let mask = 1u64 << (slot % 64);
        let before = tile.bits[slot / 64].fetch_or(mask, Ordering::Relaxed);
        let newly = before & mask == 0;
        if newly {
            tile.obsolete.fetch_add(1, Ordering::Relaxed);
        }
        tile.max_txnid.fetch_max(by, Ordering::SeqCst);
        (tile, newly)
    }

    /// A sealed block that just became a candidate goes to the store's list of new
    /// candidates, which the next thread to reach a collection point moves to its pending
    /// queue (not straight to a thread's queue: its lock may be held by this very thread's
    /// collection, which seals relocation blocks, and threads that never collect, such as
    /// the janitor, obsolete slots too). The state moves `SEALED` → `QUEUED` once, so a
    /// block is in one list or queue at most.
    fn queue_if_candidate(&self, frame: usize, tile: &Tile) {
        let (obsolete, used) = (
            tile.obsolete.load(Ordering::Relaxed),
            tile.used.load(Ordering::Relaxed),
        );
        if tb_collect::is_candidate(obsolete, used) && tile.claim_for_a_queue() {
            lock(&self.candidates).push(frame);
            self.candidate_count.fetch_add(1, Ordering::Release);
        }
    }

    /// Clears `link`'s obsolete bit (a rollback restores the version as the row's newest).
    /// `max_txnid` stays: it only ever delays a collection.
    fn unobsolete(&self, appender: &mut Appender, link: Link) {
        let tile = self.tile(link);
        let slot = link.slot();
        let mask = 1u64 << (slot % 64);
        let before = tile.bits[slot / 64].fetch_and(!mask, Ordering::Relaxed);
        if before & mask != 0 {
            tile.obsolete.fetch_sub(1, Ordering::Relaxed);
        }
        let word_at = tile.block_at + (slot / 64 * 8) as u64;
        appender
            .writer
            .fetch_and_u64(word_at, !mask, Purpose::BlockMetadata);
    }

    /// The region's counters, and the blocks'.
    pub(crate) fn stats(&self) -> PmStats {
        let mut stats = self.region.stats();
        stats.blocks = self.block_stats();
        stats.versions_held = self.counters.version_records.load(Ordering::Relaxed);
        stats.recovery = self.recovery_report();
        stats
    }
}

impl Drop for TileStore {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // Every thread's appender holds the region (its writer): all retire now, so that
        // the mapping goes with the store (a reopening maps it again; the simulated device
        // refuses a second live mapping), whatever threads are still alive.
        self.appenders.retire_all();
        for entry in self.tiles.iter().chain(self.kept_tiles.iter()) {
            let tile = entry.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !tile.is_null() {
                // SAFETY: from `Box::into_raw`; the store is going, and no row outlives it
                // (each holds an `Arc` of it).
                drop(unsafe { Box::from_raw(tile) });
            }
        }
        for entry in self.indexes.iter() {
            let indexed = entry.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !indexed.is_null() {
                // SAFETY: as the tiles' (its frames are `Scratch`: the next open frees them).
                drop(unsafe { Box::from_raw(indexed) });
            }
        }
    }
}

/// A mutex's guard, whether or not a thread panicked holding it (what it guards is kept
/// consistent step by step).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl TileStore {
    /// Appends the `Withdrawn` record of `chain`'s unpublished insert record (naming its
    /// block and slot): obsolete from the start, a slot holding no version
    /// (`COMMIT_SLOT`), and, when it went to another block than the record it takes back,
    /// noted there so that a collection freeing its block copies it while that one is
    /// still in the region (as a spanning transaction's commit record).
    fn withdraw(
        &self,
        appender: &mut Appender,
        chain: &TileChain,
        owner: &TxnShared,
        txn_id: u64,
    ) -> Result<()> {
        let withdrawn_from = block_id(self.tile(chain.head).extent);
        let payload = layout::withdrawn_payload(withdrawn_from, chain.head.slot() as u32);
        // In the taken-back record's table's block: most often the same block, so nothing
        // spans.
        let marker = self.append_marker(
            appender,
            Target::Append(chain.table),
            (RecordKind::Withdrawn, 0, Sequence::Copied(0)),
            txn_id,
            &payload,
        )?;
        owner.note_storage_block(block_id(self.tile(marker).extent));
        let tile = self.tile(marker);
        if withdrawn_from != block_id(tile.extent) {
            lock(&tile.spans).push((marker.slot() as u32, vec![withdrawn_from]));
        }
        Ok(())
    }

    /// Appends a record that holds no version (a commit record, a withdrawn record, or a
    /// collection's copy of one) to `into`: obsolete from the start, its slot a
    /// `COMMIT_SLOT` (relocation never weighs it; `Tile::spans` says when it is copied).
    fn append_marker(
        &self,
        appender: &mut Appender,
        into: Target,
        (kind, table, sequence): (RecordKind, u16, Sequence<'_>),
        txn_id: u64,
        payload: &[u8],
    ) -> Result<Link> {
        debug_assert!(matches!(kind, RecordKind::Commit | RecordKind::Withdrawn));
        let link = self.append_version(
            appender,
            into,
            (kind, 0),
            (u32::from(table), sequence),
            txn_id,
            payload,
            Link::NONE,
        )?;
        self.obsolete_in_dram(link, txn_id);
        self.header(link)
            .flags
            .fetch_or(COMMIT_SLOT, Ordering::Relaxed);
        Ok(link)
    }

    /// The transaction id in `link`'s record header.
    fn record_txn_id(&self, link: Link) -> u64 {
        let at = self.header(link).at.load(Ordering::Relaxed) - layout::RECORD_HEADER_BYTES as u64;
        let mut id = [0u8; 8];
        self.region.read(at + 8, &mut id);
        u64::from_le_bytes(id)
    }
}

#[cfg(test)]
pub(crate) mod tests;
