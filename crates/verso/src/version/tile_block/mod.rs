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

use std::cell::RefCell;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, Weak};

use crate::error::{Error, Result};
use crate::gc::tb_collect;
use crate::pmem::layout::{self, FrameState, Record, RecordKind, METADATA_LINE_BYTES};
use crate::pmem::space::{Extent, Opened, Space};
use crate::pmem::{self, LineWriter, PmStats, Purpose, RecoveryReport, Region};
use crate::row::{NonInline, PackedRef, PackedRow, RowView};
use crate::schema::ColumnMask;
use crate::sync::{Arc, Latch, WriteGuard};
use crate::txn::state::{TxnOutcome, TxnShared};
use crate::value::Value;
use crate::version::append::{whole_copies_mask, Decision, PruneDecisions};
#[cfg(all(test, loom))]
mod loom_tests;
mod reclaim;
mod recovery;

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

/// A version's name: `frame:22 | generation:31 | slot + 1:11` (zero: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Link(u64);

impl Link {
    const NONE: Link = Link(0);

    fn new(frame: u64, generation: u64, slot: u32) -> Link {
        debug_assert!(frame < layout::MAX_FRAMES && slot < layout::SLOTS_PER_BLOCK);
        Link(frame << 42 | (generation & 0x7FFF_FFFF) << 11 | u64::from(slot + 1))
    }

    fn is_none(self) -> bool {
        self.0 == 0
    }

    fn frame(self) -> usize {
        (self.0 >> 42) as usize
    }

    fn generation(self) -> u64 {
        (self.0 >> 11) & 0x7FFF_FFFF
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

/// A thread's appending state: its writer, and the block it appends to. Only its thread
/// uses it (so no lock); when the thread ends, its open block goes to the store's spares
/// for the next thread, so threads that come and go do not leave near-empty blocks behind.
struct Appender {
    writer: LineWriter,
    open: Option<OpenBlock>,
    /// The block a collection on this thread copies latest versions into (TB Algorithm
    /// 2's "block N+1"), apart from `open`: its records carry old ids, which would widen
    /// the append block's `[min_txnid, max_txnid]` and delay its collection.
    relocation: Option<OpenBlock>,
    /// This thread's collection queues (also in the store's registry).
    gc: std::sync::Arc<Mutex<reclaim::ThreadGc>>,
}

/// Which of a thread's open blocks a record goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// The block the thread's transactions append to.
    Append,
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
    /// Blocks that became candidates, for the next thread that collects (its pending
    /// queue), and how many (read without the lock at every collection point).
    candidates: Mutex<Vec<usize>>,
    candidate_count: std::sync::atomic::AtomicUsize,
    /// Held by whoever walks the whole tile table (reading tiles it does not own) and by
    /// a collection while it takes tiles out of the table.
    table_scans: Mutex<()>,
    /// Open blocks of threads that ended, for the next thread that appends.
    spare_blocks: Mutex<Vec<OpenBlock>>,
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
    /// `Database::close` was called: no commit or collection writes to the region.
    closed: std::sync::atomic::AtomicBool,
    /// The database directory's lock (with `Options::path`), held for as long as the store
    /// lives, so that no other open maps the region while anything here may still write
    /// to it (a clone's uncommitted appends, a round of the janitor).
    directory_lock: Mutex<Option<Box<dyn crate::fs::DirectoryLock>>>,
}

/// This thread's appender of each store it appended to.
struct ThreadAppenders(Vec<(u64, Weak<TileStore>, Appender)>);

impl Drop for ThreadAppenders {
    /// The thread ends: each store that lives on gets the thread's open block back.
    fn drop(&mut self) {
        for (_, store, appender) in self.0.drain(..) {
            if let Some(store) = store.upgrade() {
                store.retire_appender(appender);
            }
        }
    }
}

thread_local! {
    static APPENDERS: RefCell<ThreadAppenders> = const { RefCell::new(ThreadAppenders(Vec::new())) };
}

static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

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
        let Opened { space, blocks, .. } = Space::open(&region, &mut writer, plan)?;
        let g = *space.geometry();
        let mut catalog = vec![0u8; g.catalog_bytes as usize];
        region.read(g.catalog_offset, &mut catalog);
        let (tables, catalog_next) =
            layout::decode_catalog(&catalog, &region.describe(), g.catalog_offset)?;
        let slots_per_block = g.slots_per_block;
        let store = TileStore {
            id: NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed),
            region,
            space,
            slots_per_block,
            tiles: recovery::null_table(g.frame_count),
            kept_tiles: recovery::null_table(g.frame_count),
            table_scans: Mutex::new(()),
            candidates: Mutex::new(Vec::new()),
            candidate_count: std::sync::atomic::AtomicUsize::new(0),
            spare_blocks: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            opened: std::time::Instant::now(),
            epoch: options.block_gc_epoch.unwrap_or(tb_collect::EPOCH),
            long_mark: AtomicU64::new(0),
            counters: reclaim::Counters::default(),
            catalog_next: Mutex::new(catalog_next as u64),
            recovered: Mutex::new(None),
            recovered_frozen: Mutex::new(Vec::new()),
            recovery: Mutex::new(None),
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
        let mut f = Some(f);
        let cached = APPENDERS.try_with(|cache| {
            let mut cache = cache.borrow_mut();
            cache.0.retain(|(_, store, _)| store.strong_count() > 0);
            let i = match cache.0.iter().position(|(id, _, _)| *id == self.id) {
                Some(i) => i,
                None => {
                    let appender = self.new_appender();
                    cache
                        .0
                        .push((self.id, std::sync::Arc::downgrade(self), appender));
                    cache.0.len() - 1
                }
            };
            (f.take().expect("called once"))(&mut cache.0[i].2)
        });
        match cached {
            Ok(result) => result,
            // The thread's locals are being destroyed (a transaction dropped by another
            // local's destructor): a passing appender, whose block goes to the spares.
            Err(_) => {
                let mut appender = self.new_appender();
                let result = (f.take().expect("not called"))(&mut appender);
                self.retire_appender(appender);
                result
            }
        }
    }

    /// The appender of a thread that ends: its open blocks go to the spares, its
    /// candidates to its pending queue (which stays in the registry for others to drain).
    fn retire_appender(&self, mut appender: Appender) {
        // What the thread stored but never persisted (a rolled-back transaction's records,
        // a directory word of a block it opened) is persisted before another thread
        // appends after it: recovery reads a block up to its first torn record, and the
        // other thread's persist points cover only its own stores
        // (`regression_a_block_a_thread_left_keeps_the_next_threads_commits`). A failure
        // fails the region, which then refuses every commit.
        let _ = appender.writer.persist();
        for block in [appender.open, appender.relocation].into_iter().flatten() {
            self.spare(block);
        }
        lock(&appender.gc).retired = true;
    }

    /// A thread's appender, its collection queues registered with the store.
    fn new_appender(&self) -> Appender {
        let gc = std::sync::Arc::new(Mutex::new(reclaim::ThreadGc::default()));
        lock(&self.threads).push(std::sync::Arc::clone(&gc));
        Appender {
            writer: self.region.writer(),
            open: None,
            relocation: None,
            gc,
        }
    }

    /// An open block whose thread ended, for another.
    fn spare(&self, block: OpenBlock) {
        lock(&self.spare_blocks).push(block);
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
        let generation = link.generation();
        let matches = |tile: &&Tile| tile.generation & 0x7FFF_FFFF == generation;
        self.tile_at(link.frame())
            .filter(matches)
            .or_else(|| self.kept_tile_at(link.frame()).filter(matches))
            .unwrap_or_else(|| panic!("a link into a freed tile (frame {})", link.frame()))
    }

    fn header(&self, link: Link) -> &Header {
        &self.tile(link).headers[link.slot()]
    }

    /// The payload of `link`'s record, in place (invariant T2).
    #[allow(unsafe_code)]
    fn payload(&self, link: Link) -> &[u8] {
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
        HEADER_BYTES
            + layout::stored_record_bytes(self.header(link).len.load(Ordering::Relaxed) as usize)
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
        let current = match into {
            Target::Append => &appender.open,
            Target::Relocation => &appender.relocation,
        };
        if !current.as_ref().is_some_and(fits) {
            let spare = {
                let mut spares = lock(&self.spare_blocks);
                spares.iter().position(fits).map(|i| spares.swap_remove(i))
            };
            let next = match spare {
                Some(block) => block,
                None => self.open_block(appender, stored, txn_id)?,
            };
            let current = match into {
                Target::Append => &mut appender.open,
                Target::Relocation => &mut appender.relocation,
            };
            if let Some(full) = current.replace(next) {
                self.seal(appender, full);
            }
        }
        let current = match into {
            Target::Append => &mut appender.open,
            Target::Relocation => &mut appender.relocation,
        };
        Ok(current.as_mut().expect("opened above"))
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
    fn open_block(&self, appender: &mut Appender, stored: u64, txn_id: u64) -> Result<OpenBlock> {
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
        stats.recovery = self.recovery_report();
        stats
    }
}

impl Drop for TileStore {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        for entry in self.tiles.iter().chain(self.kept_tiles.iter()) {
            let tile = entry.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !tile.is_null() {
                // SAFETY: from `Box::into_raw`; the store is going, and no row outlives it
                // (each holds an `Arc` of it).
                drop(unsafe { Box::from_raw(tile) });
            }
        }
        // This thread's appender of the store holds the region (its writer): dropped now,
        // so that the mapping goes with the store (a reopening maps it again; the
        // simulated device refuses a second live mapping). Another thread's goes when that
        // thread ends or next appends to any store.
        let id = self.id;
        let _ = APPENDERS.try_with(|cache| {
            if let Ok(mut cache) = cache.try_borrow_mut() {
                cache.0.retain(|(store, _, _)| *store != id);
            }
        });
    }
}

/// A mutex's guard, whether or not a thread panicked holding it (what it guards is kept
/// consistent step by step).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// One row, as the indexes point at it.
pub(crate) struct TileRow {
    /// The concurrency-control protocol's row word (`VersionStorage::cc_word`).
    cc: crate::sync::AtomicU64,
    latch: Latch<TileChain>,
}

/// A row's chain, under its latch.
pub(crate) struct TileChain {
    store: std::sync::Arc<TileStore>,
    table: u32,
    arity: usize,
    /// The newest version; a chain always has one.
    head: Link,
    /// The owner of an uncommitted head (T1).
    pending: Option<Arc<TxnShared>>,
    /// The head is a new key's insert not yet folded by its commit (it counts as a record).
    insert_record: bool,
    /// Set once the collector has removed the row from the indexes. A dead row's versions
    /// are never read again (every running and future snapshot sees no row in it), so its
    /// newest version's block may be freed under it.
    dead: bool,
    /// Whether the row's table has secondary indexes (finalizing reads its old versions'
    /// contents to keep them exact: `Tile::pinned_indexed`).
    indexed: bool,
    /// Versions behind the head (kept, not walked: a write asks for it every time).
    len: usize,
}

impl TileChain {
    fn header(&self, link: Link) -> &Header {
        self.store.header(link)
    }

    /// Whether `link`'s pin counts in `Tile::pinned_indexed` too: a version of a row with
    /// secondary indexes, or a "never existed" one (its burial reads its values).
    fn pin_class(&self, link: Link) -> bool {
        self.indexed || self.header(link).begin.load(Ordering::Relaxed) == NEVER_EXISTED
    }

    fn exists(&self, link: Link) -> bool {
        self.header(link).flags.load(Ordering::Relaxed) & EXISTS != 0
    }

    fn next(&self, link: Link) -> Link {
        Link(self.header(link).next.load(Ordering::Relaxed))
    }

    /// The versions behind `from`, newest first.
    fn behind(&self, from: Link) -> impl Iterator<Item = Link> + '_ {
        let some = |link: Link| (!link.is_none()).then_some(link);
        std::iter::successors(some(self.next(from)), move |&l| some(self.next(l)))
    }

    /// The versions, newest first.
    fn versions(&self) -> impl Iterator<Item = Link> + '_ {
        std::iter::once(self.head).chain(self.behind(self.head))
    }

    #[allow(unsafe_code)]
    fn values_of(&self, link: Link) -> PackedRef<'_> {
        // SAFETY: a record's payload is a row this storage packed with `NonInline::Packed`
        // for the row's table (of `self.arity` columns) in this process, never changed
        // since (T2, T3); the storage reads no record it did not write (no recovery yet).
        unsafe { PackedRef::from_stored(self.store.payload(link), self.arity) }
    }

    fn mine(&self, owner: &TxnShared) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| std::ptr::eq(&**p, owner))
    }

    /// The creating transaction's commit timestamp, if it committed (only the head can be
    /// unstamped, T1).
    fn commit_ts(&self, link: Link) -> Option<u64> {
        let begin = self.header(link).begin.load(Ordering::Acquire);
        if begin != UNSTAMPED {
            return Some(begin);
        }
        debug_assert_eq!(link, self.head, "only the head is unstamped");
        match self.pending.as_ref().map(|owner| owner.outcome()) {
            Some(TxnOutcome::Committed(ts)) => Some(ts),
            _ => None,
        }
    }

    fn visible_to(&self, link: Link, snapshot: &Snapshot<'_>) -> bool {
        if link == self.head && snapshot.owner.is_some_and(|me| self.mine(me)) {
            return true;
        }
        self.commit_ts(link)
            .is_some_and(|ts| ts < snapshot.start_ts)
    }

    fn lend(&self, link: Link) -> Option<RowView<'_>> {
        self.exists(link)
            .then(|| RowView::packed(self.values_of(link)))
    }

    /// Cuts the chain after `keeper`; returns the versions and bytes cut off.
    fn cut_after(&mut self, keeper: Link) -> (usize, usize) {
        // Every header read before the first unpin: an unpinned tile may be freed at once.
        let cut: Vec<(Link, usize)> = self
            .behind(keeper)
            .map(|l| (l, self.store.version_bytes(l)))
            .collect();
        let classes: Vec<(Link, bool)> = cut.iter().map(|&(l, _)| (l, self.pin_class(l))).collect();
        self.header(keeper)
            .next
            .store(Link::NONE.0, Ordering::Relaxed);
        self.len -= cut.len();
        let bytes = cut.iter().map(|&(_, b)| b).sum();
        for &(link, class) in &classes {
            self.store.tile(link).unpin(class);
        }
        (cut.len(), bytes)
    }

    /// The values `intent` makes of the newest version's.
    fn successor_values(&self, intent: &WriteIntent<'_>) -> (PackedRow, RecordKind) {
        let current = self.values_of(self.head);
        match intent {
            WriteIntent::Update(_, changes) => (
                current.with_changes(changes, NonInline::Packed),
                RecordKind::Version,
            ),
            WriteIntent::Delete => (PackedRow::copy_of(current), RecordKind::Tombstone),
            WriteIntent::Insert(values) => (
                PackedRow::from_values(values, NonInline::Packed),
                RecordKind::Version,
            ),
        }
    }

    fn install(
        &mut self,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
    ) -> WriteResult<()> {
        if self.dead {
            return WriteResult::RowGone;
        }
        let head = self.head;
        let mine = self.mine(owner);
        if let Some(refused) = super::refuse_write(
            mine,
            || self.commit_ts(head),
            self.exists(head),
            snapshot,
            &intent,
        ) {
            return refused;
        }
        let txn_id = snapshot.start_ts;
        let (values, kind) = self.successor_values(&intent);
        let store = std::sync::Arc::clone(&self.store);
        if !mine {
            let tile = store.tile(head);
            if !may_cover(&tile.max_txnid, &tile.state, txn_id) {
                return WriteResult::Retry;
            }
        }
        store.with_appender(|appender| {
            // The transaction's own version is replaced in its place in the chain (records
            // never change in place); another's is covered by the new one.
            let next = if mine { self.next(head) } else { head };
            let link = match store.append_version(
                appender,
                Target::Append,
                (kind, 0),
                (self.table, Sequence::Of(owner)),
                txn_id,
                values.packed().bytes(),
                next,
            ) {
                Ok(link) => link,
                Err(_) => return WriteResult::Refused(Refusal::NoSpace),
            };
            store.count_record(owner, link);
            if mine {
                // Only its transaction can see the replaced version: an aborted slot now.
                let replaced = PackedRow::copy_of(self.values_of(head));
                self.header(head).flags.fetch_or(ABORTED, Ordering::Relaxed);
                store.obsolete(appender, head, txn_id);
                // Its record carries the transaction's id, which may commit: for D23 it is
                // an older record of the key, like a superseded version.
                store
                    .tile(head)
                    .min_superseded
                    .fetch_min(txn_id, Ordering::SeqCst);
                self.head = link;
                return WriteResult::Installed {
                    chain: (),
                    new_record: false,
                    created: Created::default(),
                    replaced: Some(GoneVersion::untagged(replaced)),
                };
            }
            // T1: the covered head's transaction committed (refuse_write checked); stamp it
            // before its owner is forgotten.
            if let Some(ts) = self.commit_ts(head) {
                let _ = self.header(head).begin.compare_exchange(
                    UNSTAMPED,
                    ts,
                    Ordering::Release,
                    Ordering::Relaxed,
                );
            }
            // TB §4.3: the end timestamp in DRAM; the bit and `max_txnid` in one line.
            self.header(head).end.store(txn_id, Ordering::Relaxed);
            if store.obsolete(appender, head, txn_id) {
                // A latest version is now behind the head: pinned until finalizing cuts it
                // (a "never existed" head was pinned when its insert rolled back).
                let tile = store.tile(head);
                tile.pin(self.indexed);
                let begin = self.header(head).begin.load(Ordering::Relaxed);
                tile.min_superseded.fetch_min(begin, Ordering::SeqCst);
            }
            let created = Created {
                records: usize::from(!std::mem::take(&mut self.insert_record)),
                bytes: store.version_bytes(head),
            };
            self.head = link;
            self.len += 1;
            self.pending = Some(Arc::clone(owner));
            WriteResult::Installed {
                chain: (),
                new_record: true,
                created,
                replaced: None,
            }
        })
    }
}

/// The tile-block storage design.
pub(crate) struct TileBlockStorage;

impl TileRow {
    fn read(&self) -> crate::sync::ReadGuard<'_, TileChain> {
        self.latch.read()
    }

    fn write(&self) -> WriteGuard<'_, TileChain> {
        self.latch.write()
    }
}

impl VersionStorage for TileBlockStorage {
    type Row = TileRow;
    type Chain = TileChain;
    type Guard<'a> = WriteGuard<'a, TileChain>;
    type Exact = super::NoExact;
    type Shared = std::sync::Arc<TileStore>;
    const NAME: &'static str = "tile-block";

    fn open_shared(options: &crate::Options) -> Result<std::sync::Arc<TileStore>> {
        let (store, scan) = TileStore::open(options)?;
        let store = std::sync::Arc::new(store);
        if let Some(scan) = scan {
            let (recovered, report) = store.rebuild(scan)?;
            *lock(&store.recovered) = Some(recovered);
            *lock(&store.recovery) = Some(report);
        }
        Ok(store)
    }

    fn record_table(
        shared: &std::sync::Arc<TileStore>,
        index: u32,
        schema: &crate::schema::TableSchema,
    ) -> Result<()> {
        shared.record_table(index, schema)
    }

    fn take_recovered(
        shared: &std::sync::Arc<TileStore>,
    ) -> Option<crate::version::Recovered<TileRow>> {
        lock(&shared.recovered).take()
    }

    fn finish_recovery(shared: &std::sync::Arc<TileStore>, context: &BlockGcContext<'_, TileRow>) {
        shared.finish_interrupted_collections(context);
    }

    fn insert_row(
        shared: &std::sync::Arc<TileStore>,
        context: NewRowContext,
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> Result<(Arc<TileRow>, Created)> {
        debug_assert_eq!(
            non_inline,
            NonInline::Packed,
            "T3: validate refuses the others"
        );
        let packed = PackedRow::from_values(values, NonInline::Packed);
        let head = shared.with_appender(|appender| {
            shared.append_version(
                appender,
                Target::Append,
                (RecordKind::Version, 0),
                (context.table, Sequence::Of(owner)),
                context.txn_id,
                packed.packed().bytes(),
                Link::NONE,
            )
        })?;
        shared.count_record(owner, head);
        let chain = TileChain {
            store: std::sync::Arc::clone(shared),
            table: context.table,
            arity: values.len(),
            head,
            pending: Some(Arc::clone(owner)),
            insert_record: true,
            dead: false,
            indexed: context.indexed,
            len: 0,
        };
        let row = Arc::new(TileRow {
            cc: crate::sync::AtomicU64::new(0),
            latch: Latch::new(chain),
        });
        // As in the other storages: a record until its commit folds it; no bytes counted.
        Ok((
            row,
            Created {
                records: 1,
                bytes: 0,
            },
        ))
    }

    fn read<R>(
        row: &TileRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let chain = row.read();
        if chain.dead {
            // Buried: no running or future snapshot sees a row in it (and its newest
            // version's block may be gone).
            return (reader(None), ReadCost::default());
        }
        if chain.visible_to(chain.head, snapshot) {
            return (reader(chain.lend(chain.head)), ReadCost::default());
        }
        let started = std::time::Instant::now();
        let mut walked = 0;
        let seen = chain.behind(chain.head).find(|&link| {
            walked += 1;
            chain.visible_to(link, snapshot)
        });
        let cost = ReadCost {
            walked,
            reconstruct_nanos: started.elapsed().as_nanos() as u64,
            passed_obsolete: false,
        };
        (reader(seen.and_then(|link| chain.lend(link))), cost)
    }

    fn write<'a>(
        row: &'a TileRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, TileChain>> {
        debug_assert_eq!(
            non_inline,
            NonInline::Packed,
            "T3: validate refuses the others"
        );
        let mut chain = row.write();
        chain.install(snapshot, intent, owner).with_chain(chain)
    }

    fn stamp(row: &TileRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        let mut chain = row.write();
        if !chain.mine(owner) {
            return StampReport::default();
        }
        let head = chain.head;
        chain.header(head).begin.store(commit_ts, Ordering::Release);
        chain.pending = None;
        let folded = std::mem::take(&mut chain.insert_record);
        StampReport {
            folded_records: usize::from(folded),
            freed_bytes: 0,
            nothing_to_finalize: chain.exists(head) && chain.next(head).is_none(),
        }
    }

    fn commit_durably(
        shared: &std::sync::Arc<TileStore>,
        owner: &TxnShared,
        txn_id: u64,
    ) -> Result<()> {
        let records = owner.storage_records();
        shared.check_open()?;
        if owner.storage_poisoned() {
            return Err(Error::CapacityExceeded {
                what: "persistent-memory region bytes (the record that takes back an \
                       insert whose key was taken found no room)"
                    .into(),
                limit: shared.region.len(),
            });
        }
        if shared.region.has_failed() {
            return Err(Error::DurabilityLost {
                reason: "an earlier persist point of the persistent-memory region failed".into(),
            });
        }
        shared.with_appender(|appender| {
            let lost = |error: Error| Error::DurabilityLost {
                reason: format!("persisting a commit to the persistent-memory region: {error}"),
            };
            // A whole commit record in the region must say that every record it counts is
            // there too, even after collections freed some of them (design note, "Commit
            // records"). In one block the order of appends gives it: recovery reads a
            // block's records up to the first torn one, so a torn record hides the commit
            // record after it. A transaction whose records went to other blocks, or whose
            // commit record opens a new block, first persists its records; only then is
            // the commit record written.
            let payload = layout::commit_payload(records);
            let blocks = owner.storage_blocks();
            let commit_bytes = layout::stored_record_bytes(payload.len()) as u64;
            let in_one_block = appender.open.as_ref().is_some_and(|open| {
                open.slots < shared.slots_per_block
                    && open.cursor + commit_bytes <= open.bytes
                    && blocks.iter().all(|&b| b == block_id(open.extent))
            });
            if !in_one_block {
                appender.writer.persist().map_err(lost)?;
            }
            let link = shared.append_marker(
                appender,
                Target::Append,
                (RecordKind::Commit, 0, Sequence::Copied(0)),
                txn_id,
                &payload,
            )?;
            let tile = shared.tile(link);
            let here = block_id(tile.extent);
            let elsewhere: Vec<u64> = owner
                .storage_blocks()
                .into_iter()
                .filter(|&b| b != here)
                .collect();
            if !elsewhere.is_empty() {
                lock(&tile.spans).push((link.slot() as u32, elsewhere));
            }
            // Second persist point: the commit record.
            appender.writer.persist().map_err(|error| {
                // The transaction rolls back: its commit record must never read as whole,
                // even if the page cache writes it back later. Its first word (kind, table,
                // length) zeroed makes it a torn record: the end of what the block holds.
                let header = shared.header(link);
                let record_at =
                    header.at.load(Ordering::Relaxed) - layout::RECORD_HEADER_BYTES as u64;
                appender
                    .writer
                    .store_u64(record_at, 0, Purpose::CommitRecord);
                lock(&shared.tile(link).spans).retain(|&(slot, _)| slot as usize != link.slot());
                lost(error)
            })?;
            Ok(())
        })
    }

    fn discard_unpublished(row: &TileRow, owner: &TxnShared) {
        // The row's only version is the insert's record, which no one can read: an aborted,
        // obsolete slot. It stays counted in the transaction's records (it is in the
        // region, with the transaction's id); recovery must take, of one transaction's
        // records for one key, the last it appended (`docs/design/tile-block.md`).
        let chain = row.write();
        debug_assert!(chain.mine(owner) && chain.next(chain.head).is_none());
        let store = std::sync::Arc::clone(&chain.store);
        let txn_id = store.record_txn_id(chain.head);
        chain
            .header(chain.head)
            .flags
            .fetch_or(ABORTED, Ordering::Relaxed);
        store.with_appender(|appender| {
            store.obsolete(appender, chain.head, txn_id);
            // The transaction may commit without writing the key again: a `Withdrawn`
            // record tells recovery that this record is no version of it.
            if store.withdraw(appender, &chain, owner, txn_id).is_err() {
                owner.poison_storage();
            }
        });
        // The transaction goes on to write the key's row, and may commit: for D23 this
        // record is an older record of the key, like a superseded version.
        store
            .tile(chain.head)
            .min_superseded
            .fetch_min(txn_id, Ordering::SeqCst);
    }

    fn collect_blocks(
        shared: &std::sync::Arc<TileStore>,
        context: &BlockGcContext<'_, TileRow>,
    ) -> bool {
        shared.collect_blocks(context)
    }

    fn persistent_memory_stats(shared: &std::sync::Arc<TileStore>) -> Option<PmStats> {
        Some(shared.stats())
    }

    fn edit<R>(row: &TileRow, edit: impl FnOnce(&mut TileChain) -> R) -> R {
        edit(&mut row.write())
    }

    fn cc_word(row: &TileRow) -> &crate::sync::AtomicU64 {
        &row.cc
    }
}

impl ChainEdit for TileChain {
    fn values(&self) -> (RowView<'_>, bool) {
        debug_assert!(!self.dead, "a buried row's versions are not read");
        (
            RowView::packed(self.values_of(self.head)),
            self.exists(self.head),
        )
    }

    fn chain_len(&self) -> usize {
        // Checked against a walk where the walk is cheap (never for a buried row: its
        // newest version's block may be gone).
        debug_assert!(self.dead || self.len > 16 || self.len == self.behind(self.head).count());
        self.len
    }

    fn chain_mask(&self) -> ColumnMask {
        whole_copies_mask(self.chain_len(), self.arity)
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        if self.dead {
            return; // (buried: no version is read again)
        }
        for link in self.versions().filter(|&l| self.exists(l)) {
            visit(RowView::packed(self.values_of(link)));
        }
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn is_unreachable(&self, bound: u64) -> bool {
        !self.exists(self.head)
            && self.next(self.head).is_none()
            && self.commit_ts(self.head).is_some_and(|ts| ts < bound)
    }

    fn mark_dead(&mut self) {
        debug_assert!(self.is_unreachable(u64::MAX));
        self.dead = true;
        let head = self.head;
        let begin = self.header(head).begin.load(Ordering::Relaxed);
        if begin == NEVER_EXISTED {
            // Pinned when its insert rolled back; a dead row's versions are never read.
            self.store.tile(head).unpin(true);
        } else {
            // A committed delete's tombstone no row reads any more: it counts as obsolete
            // toward its block's share, and relocation decides whether it must be kept.
            // `BURIED` is the last thing this row does with its block: a collection that
            // finds the row gone from the index waits for it (it may be burying now, under
            // the latch relocation does not take for a row it cannot find).
            let store = std::sync::Arc::clone(&self.store);
            store.with_appender(|appender| store.obsolete(appender, head, begin));
            self.header(head).flags.fetch_or(BURIED, Ordering::Release);
        }
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        // The keeper is the first version committed below the watermark: every snapshot at
        // or after it stops there or before. The versions behind it are cut off; their
        // space comes back with their blocks (tb-collect), not one by one.
        let keeper = self
            .versions()
            .find(|&l| self.commit_ts(l).is_some_and(|ts| ts < watermark));
        match keeper {
            Some(keeper) => self.cut_after(keeper),
            None => (0, 0),
        }
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        let versions: Vec<Link> = self.versions().collect();
        let walked = versions.len() - 1;
        if walked == 0 {
            return (0, None);
        }
        let second_oldest = versions[walked - 1];
        if self
            .commit_ts(second_oldest)
            .is_none_or(|ts| ts >= watermark)
        {
            return (walked, None);
        }
        let (_, bytes) = self.cut_after(second_oldest);
        (walked, Some(bytes))
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        let mut decisions = PruneDecisions::new(self.commit_ts(self.head), active);
        let mut report = PruneReport::default();
        let mut keeper = self.head;
        let mut link = self.next(keeper);
        while !link.is_none() {
            let ts = self
                .commit_ts(link)
                .expect("only the head can be uncommitted");
            let next = self.next(link);
            match decisions.decide(ts, &mut report) {
                Decision::Keep => {
                    keeper = link;
                    report.remaining += 1;
                }
                Decision::Drop => {
                    report.removed += 1;
                    report.freed_bytes += self.store.version_bytes(link);
                    let class = self.pin_class(link);
                    self.header(keeper).next.store(next.0, Ordering::Relaxed);
                    self.len -= 1;
                    self.store.tile(link).unpin(class);
                }
                Decision::DropRest => {
                    let (count, bytes) = self.cut_after(keeper);
                    report.removed += count;
                    report.freed_bytes += bytes;
                    break;
                }
            }
            link = next;
        }
        report
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        debug_assert!(self.mine(owner), "the writer's version is the head");
        let rolled_back = self.head;
        let written = GoneVersion::untagged(PackedRow::copy_of(self.values_of(rolled_back)));
        let store = std::sync::Arc::clone(&self.store);
        let txn_id = store.record_txn_id(rolled_back);
        self.pending = None;
        store.with_appender(|appender| {
            self.header(rolled_back)
                .flags
                .fetch_or(ABORTED, Ordering::Relaxed);
            store.obsolete(appender, rolled_back, txn_id);
            let previous = self.next(rolled_back);
            if previous.is_none() {
                // An insert of a new key: the row stays (it is in the indexes) as a
                // tombstone every snapshot sees, so that a collector can bury it.
                debug_assert!(self.insert_record);
                self.insert_record = false;
                let header = self.header(rolled_back);
                header.flags.fetch_and(!EXISTS, Ordering::Relaxed);
                header.begin.store(NEVER_EXISTED, Ordering::Release);
                // Obsolete (no record of a key), yet the row's newest version until the row
                // is buried, whose burial reads its values (the key): its block stays.
                store.tile(rolled_back).pin(true);
                return RollbackReport {
                    freed_records: 1,
                    freed_bytes: 0,
                    written,
                };
            }
            // The previous newest version is the row again, no longer a record.
            self.header(previous).end.store(LATEST, Ordering::Relaxed);
            if self.header(previous).begin.load(Ordering::Relaxed) != NEVER_EXISTED {
                store.unobsolete(appender, previous);
                // Latest again: relocation moves it, nothing needs its tile pinned.
                store.tile(previous).unpin(self.indexed);
            }
            self.head = previous;
            self.len -= 1;
            RollbackReport {
                freed_records: 1,
                freed_bytes: store.version_bytes(previous),
                written,
            }
        })
    }
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
        let marker = self.append_marker(
            appender,
            Target::Append,
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
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use crate::pmem::layout::{self, RecordKind, RecordScan};
    use crate::pmem::{PmBacking, PmOptions, SimulatedRegion};
    #[allow(unused_imports)]
    use crate::row::RowView;
    use crate::{
        ColumnType, ConcurrencyControl, Database, GarbageCollector, Isolation, Options, Schema,
        Value, VersionStorageKind,
    };

    /// Tile-block on `device`, blocks of `slots` slots.
    fn simulated_options(device: &SimulatedRegion, slots: u32) -> Options {
        Options::default()
            .version_storage(VersionStorageKind::TileBlock)
            .concurrency_control(ConcurrencyControl::Mvto)
            .garbage_collector(GarbageCollector::NoCollection)
            .persistent_memory(
                PmOptions::default()
                    .backing(PmBacking::Simulated(device.clone()))
                    .slots_per_block(slots),
            )
    }

    /// The number of seeds of a crash test: `PM_CRASH_SEEDS`, or `default` (the documented
    /// longer run: `PM_CRASH_SEEDS=2000 cargo test --release -p verso --lib pmem tile_block`).
    pub(crate) fn crash_seeds(default: u64) -> u64 {
        std::env::var("PM_CRASH_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    /// The records a region image holds: for each transaction id, how many version and
    /// tombstone records, and the count its commit record states (if one is whole). Blocks
    /// are read as recovery will read them: records in order from the metadata line, up to
    /// the first that is not whole (a torn tail).
    fn records_in(image: &[u8]) -> BTreeMap<u64, (u32, Option<u32>)> {
        let superblock = layout::decode_superblock(&image[..512], image.len() as u64, "image")
            .expect("a formatted region");
        let g = superblock.geometry;
        let words: Vec<u64> = (0..g.frame_count)
            .map(|f| {
                let at = g.directory_word(f) as usize;
                u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
            })
            .collect();
        let scan = layout::scan_directory(&words).expect("a directory no crash can make");
        let mut by_txn: BTreeMap<u64, (u32, Option<u32>)> = BTreeMap::new();
        for block in scan.blocks {
            let start = g.frame_offset(block.first_frame) as usize;
            let end = start + block.frames as usize * g.frame_bytes as usize;
            let mut at = start + layout::METADATA_LINE_BYTES as usize;
            let key = layout::block_key(block.first_frame, block.generation);
            while let RecordScan::Valid(record) = layout::decode_record(&image[at..end], key) {
                let entry = by_txn.entry(record.txn_id).or_default();
                match record.kind {
                    RecordKind::Commit => entry.1 = record.committed_records(),
                    _ => entry.0 += 1,
                }
                at += record.stored_bytes();
            }
        }
        by_txn
    }

    /// The durability point: once `commit()` returned, a power loss at any later moment
    /// keeps the transaction's commit record and every record it counts. (What recovery,
    /// TB §4.5, will rebuild from.) And no partial transaction: a whole commit record comes
    /// with all its records. Crashes at every persist point of a run of transactions of 1 to
    /// 3 inserts, updates or deletes in blocks of 4 slots (so that many span two blocks),
    /// each unpersisted word kept or lost at random.
    #[test]
    fn every_acknowledged_commit_survives_a_power_loss_whole() {
        let mut crashes = 0;
        let seeds = crash_seeds(40);
        for seed in 0..seeds {
            let device = SimulatedRegion::new(4 << 20, seed);
            let db = Database::open(simulated_options(&device, 4)).unwrap();
            let table = db
                .create_table(
                    "t",
                    Schema::new()
                        .column("id", ColumnType::U64)
                        .column("value", ColumnType::I64)
                        .primary_key(&["id"]),
                )
                .unwrap();
            device.crash_at_persist(1 + seed % 30);
            let mut acknowledged = Vec::new();
            for step in 0..40u64 {
                let mut txn = db.begin(Isolation::Serializable);
                let id = txn.start_ts();
                // 1 to 3 keys, so that transactions span blocks.
                let mut wrote = false;
                for key in (0..1 + (step * seed) % 3).map(|k| (step + k * 3) % 7) {
                    let key = [Value::U64(key)];
                    wrote |= match step % 3 {
                        0 => txn
                            .insert(table, &[key[0].clone(), Value::I64(step as i64)])
                            .is_ok(),
                        1 => txn
                            .update(table, &key, &[(1, Value::I64(-1))])
                            .unwrap_or(false),
                        _ => txn.delete(table, &key).unwrap_or(false),
                    };
                }
                if !wrote {
                    continue;
                }
                match txn.commit() {
                    Ok(()) => acknowledged.push(id),
                    Err(_) => break, // the power loss: nothing after it is acknowledged
                }
            }
            drop(db);
            if device.persists() < 1 + seed % 30 {
                continue; // the run ended before the crash point
            }
            crashes += 1;
            let found = records_in(&device.durable_image());
            for id in &acknowledged {
                let (records, committed) = found.get(id).copied().unwrap_or_default();
                assert_eq!(
                    committed,
                    Some(records),
                    "seed {seed}: acknowledged transaction {id} lost its commit or a record"
                );
            }
            // No partial transaction: a whole commit record, acknowledged or not, comes
            // with every record it counts (the records are persisted before it is written).
            for (id, &(records, committed)) in &found {
                if let Some(counted) = committed {
                    assert_eq!(
                        counted, records,
                        "seed {seed}: transaction {id}'s commit record is whole but a record \
                         it counts was lost"
                    );
                }
            }
        }
        assert!(crashes > seeds / 2, "{crashes} of {seeds} runs crashed");
    }

    /// A record read back: kind, flags, transaction id, and for content records the key
    /// and value (`None`: a tombstone).
    type FoundRecord = (RecordKind, u8, u64, Option<(u64, Option<i64>)>);

    /// Every record a region image holds in blocks that are not free, read as recovery
    /// reads them: records in order from the metadata line up to the first that is not
    /// whole. Each as (kind, flags, txn id, key and value of a `counters` row).
    #[allow(unsafe_code)]
    fn rows_in(image: &[u8]) -> Vec<FoundRecord> {
        let superblock = layout::decode_superblock(&image[..512], image.len() as u64, "image")
            .expect("a formatted region");
        let g = superblock.geometry;
        let words: Vec<u64> = (0..g.frame_count)
            .map(|f| {
                let at = g.directory_word(f) as usize;
                u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
            })
            .collect();
        let scan = layout::scan_directory(&words).expect("a directory no crash can make");
        let mut found = Vec::new();
        for block in scan.blocks {
            let start = g.frame_offset(block.first_frame) as usize;
            let end = start + block.frames as usize * g.frame_bytes as usize;
            let mut at = start + layout::METADATA_LINE_BYTES as usize;
            let key = layout::block_key(block.first_frame, block.generation);
            while let RecordScan::Valid(record) = layout::decode_record(&image[at..end], key) {
                let holds_a_row =
                    !matches!(record.kind, RecordKind::Commit | RecordKind::Withdrawn);
                let row = holds_a_row.then(|| {
                    // SAFETY: a payload this storage packed for the two-column table,
                    // every value inline (commit and withdrawn records hold none), its
                    // checksum just verified.
                    let values = unsafe { crate::row::PackedRef::from_stored(record.payload, 2) };
                    let key = match values.get(0) {
                        crate::row::ValueRef::U64(key) => key,
                        other => panic!("{other:?}"),
                    };
                    let value = match values.get(1) {
                        crate::row::ValueRef::I64(v) => v,
                        other => panic!("{other:?}"),
                    };
                    let tombstone = record.kind == RecordKind::Tombstone
                        || (record.kind == RecordKind::Relocated
                            && record.flags & layout::RELOCATED_TOMBSTONE != 0);
                    (key, (!tombstone).then_some(value))
                });
                found.push((record.kind, record.flags, record.txn_id, row));
                at += record.stored_bytes();
            }
        }
        found
    }

    /// What recovery (TB §4.5) will take for each key of a region image: of the committed
    /// records of the key, the one with the highest id (its value, or `None` for a
    /// tombstone); a key with no such record is absent. A transaction is committed iff its
    /// commit record is whole; a relocated copy is of a committed version.
    fn newest_committed(image: &[u8]) -> BTreeMap<u64, (u64, Option<i64>)> {
        let rows = rows_in(image);
        let committed: std::collections::BTreeSet<u64> = rows
            .iter()
            .filter(|(kind, ..)| *kind == RecordKind::Commit)
            .map(|&(_, _, id, _)| id)
            .collect();
        let mut newest: BTreeMap<u64, (u64, Option<i64>)> = BTreeMap::new();
        for (kind, _, id, row) in rows {
            let Some((key, value)) = row else { continue };
            if kind != RecordKind::Relocated && !committed.contains(&id) {
                continue;
            }
            if newest
                .get(&key)
                .is_none_or(|&(newest_id, _)| id > newest_id)
            {
                newest.insert(key, (id, value));
            }
        }
        newest
    }

    /// A power loss at any persist point, collections' included (their `FROZEN` words,
    /// relocated copies and `FREE` words), keeps for every key a committed record of the
    /// last acknowledged write (or of the write in flight at the loss, which may or may not
    /// have become durable), as the newest committed record of its key; a deleted key has
    /// nothing newer than its delete. Blocks of 8 slots, transactions of up to 3 records
    /// and a commit record, so that transactions span blocks and blocks are freed often.
    #[test]
    fn collections_keep_every_acknowledged_write_through_a_power_loss() {
        let seeds = crash_seeds(60);
        let mut crashed_in_a_collection = 0;
        let mut total_collections = 0;
        for seed in 0..seeds {
            let device = SimulatedRegion::new(8 << 20, seed);
            let db = Database::open(
                simulated_options(&device, 8)
                    .garbage_collector(GarbageCollector::TbCollect)
                    .block_gc_epoch(std::time::Duration::from_micros(200)),
            )
            .unwrap();
            let table = db
                .create_table(
                    "counters",
                    Schema::new()
                        .column("id", ColumnType::U64)
                        .column("value", ColumnType::I64)
                        .primary_key(&["id"]),
                )
                .unwrap();
            let crash_at = 1 + seed * 7 % 150;
            device.crash_at_persist(crash_at);
            // key → (id, value) of its last acknowledged write (`None`: deleted).
            let mut model: BTreeMap<u64, (u64, Option<i64>)> = BTreeMap::new();
            let mut in_flight: Vec<(u64, u64, Option<i64>)> = Vec::new();
            let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = move |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n
            };
            let mut commits = 0;
            'run: for step in 0..200i64 {
                let mut txn = db.begin(Isolation::Serializable);
                let id = txn.start_ts();
                let mut writes: Vec<(u64, u64, Option<i64>)> = Vec::new();
                for _ in 0..1 + next(3) {
                    let key = next(12);
                    if writes.iter().any(|&(_, k, _)| k == key) {
                        continue;
                    }
                    let exists = model.get(&key).is_some_and(|&(_, v)| v.is_some());
                    let value = step * 100 + key as i64;
                    let done = if exists && next(4) == 0 {
                        txn.delete(table, &[Value::U64(key)]).map(|_| None)
                    } else if exists {
                        txn.update(table, &[Value::U64(key)], &[(1, Value::I64(value))])
                            .map(|_| Some(value))
                    } else {
                        txn.insert(table, &[Value::U64(key), Value::I64(value)])
                            .map(|()| Some(value))
                    };
                    match done {
                        Ok(value) => writes.push((id, key, value)),
                        Err(_) => break 'run,
                    }
                }
                let persists_before = device.persists();
                match txn.commit() {
                    Ok(()) => {
                        commits += 1;
                        for (id, key, value) in writes {
                            model.insert(key, (id, value));
                        }
                    }
                    Err(_) => {
                        // The power went at this commit's persist point, or earlier, at a
                        // collection's (the region refuses commits from then on).
                        if persists_before >= crash_at {
                            crashed_in_a_collection += 1;
                        }
                        in_flight = writes;
                        break;
                    }
                }
            }
            let collections = db
                .stats()
                .persistent_memory
                .map(|pm| pm.blocks.collections)
                .unwrap_or(0);
            total_collections += collections;
            drop(db);
            if device.persists() < crash_at {
                continue; // the run ended before the crash point
            }
            assert!(commits > 0 || crash_at < 3, "seed {seed}");
            let found = newest_committed(&device.durable_image());
            for key in 0..12u64 {
                let expected = model.get(&key).copied();
                let flying = in_flight
                    .iter()
                    .find(|&&(_, k, _)| k == key)
                    .map(|&(id, _, v)| (id, v));
                let got = found.get(&key).copied();
                let deleted_or_absent =
                    |v: Option<(u64, Option<i64>)>| v.is_none_or(|(_, v)| v.is_none());
                let ok = got == expected
                    || (got.is_some() && got == flying)
                    || (deleted_or_absent(got) && deleted_or_absent(expected))
                    || (deleted_or_absent(got) && flying.is_some_and(|(_, v)| v.is_none()));
                let records_of_key = || {
                    rows_in(&device.durable_image())
                        .into_iter()
                        .filter(|r| r.3.is_some_and(|(k, _)| k == key))
                        .collect::<Vec<_>>()
                };
                assert!(
                    ok,
                    "seed {seed} (crash at persist {crash_at}, {collections} collections): \
                     key {key}: acknowledged {expected:?}, in flight {flying:?}, found {got:?} \
                     among {:?}",
                    records_of_key()
                );
            }
        }
        assert!(
            crashed_in_a_collection > 0,
            "no power loss hit a collection"
        );
        assert!(
            total_collections > seeds,
            "{total_collections} collections in {seeds} runs"
        );
    }

    /// Found while writing the crash test above: a transaction whose records span two
    /// blocks has its commit record in the later one. When that block was freed (all its
    /// slots obsolete) while the earlier one stayed, the region kept the transaction's
    /// still-newest record in the earlier block but no commit record saying it committed:
    /// recovery would have dropped an acknowledged write. Blocks of 4 slots: T1 fills 3 of
    /// block A; T2 inserts key 2 into A's last slot and key 3 into block B, and commits
    /// there; T3 and T4 update key 3 until B is all obsolete and collected.
    #[test]
    fn regression_a_transaction_spanning_blocks_keeps_its_commit_when_its_last_block_is_freed() {
        let device = SimulatedRegion::new(4 << 20, 3);
        let db = Database::open(
            simulated_options(&device, 4).garbage_collector(GarbageCollector::TbCollect),
        )
        .unwrap();
        let table = db
            .create_table(
                "counters",
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("value", ColumnType::I64)
                    .primary_key(&["id"]),
            )
            .unwrap();
        let write = |rows: &[(u64, i64)], update: bool| {
            let mut txn = db.begin(Isolation::Serializable);
            let id = txn.start_ts();
            for &(key, value) in rows {
                if update {
                    assert!(txn
                        .update(table, &[Value::U64(key)], &[(1, Value::I64(value))])
                        .unwrap());
                } else {
                    txn.insert(table, &[Value::U64(key), Value::I64(value)])
                        .unwrap();
                }
            }
            txn.commit().unwrap();
            id
        };
        write(&[(0, 0), (1, 1)], false);
        let spanning = write(&[(2, 2), (3, 3)], false);
        write(&[(3, 30)], true);
        write(&[(3, 300)], true);
        // The thread's list of active snapshots is rebuilt once per epoch: the next
        // transaction's end in a new epoch sees B in case 1.
        std::thread::sleep(crate::gc::tb_collect::EPOCH + std::time::Duration::from_millis(10));
        db.begin(Isolation::Serializable).commit().unwrap();
        let blocks = db.stats().persistent_memory.unwrap().blocks;
        assert!(blocks.blocks_freed > 0, "block B was collected: {blocks:?}");
        let found = newest_committed(&device.durable_image());
        assert_eq!(
            found.get(&2),
            Some(&(spanning, Some(2))),
            "key 2's newest record, written by the spanning transaction, reads as committed"
        );
        assert_eq!(found.get(&3).map(|&(_, v)| v), Some(Some(300)));
    }

    fn store_of(slots: u32) -> std::sync::Arc<super::TileStore> {
        use crate::version::VersionStorage;
        let options = simulated_options(&SimulatedRegion::new(8 << 20, 7), slots);
        super::TileBlockStorage::open_shared(&options).unwrap()
    }

    /// Inserts one row of `id` for a new transaction of that id and commits it durably.
    fn insert_and_commit(store: &std::sync::Arc<super::TileStore>, id: u64) {
        use crate::version::{NewRowContext, VersionStorage};
        let owner = crate::sync::Arc::new(crate::txn::state::TxnShared::new());
        let context = NewRowContext {
            table: 0,
            txn_id: id,
            indexed: false,
        };
        let values = [Value::U64(id), Value::I64(0)];
        let (row, _) = super::TileBlockStorage::insert_row(
            store,
            context,
            &values,
            &owner,
            crate::row::NonInline::Packed,
        )
        .unwrap();
        owner.mark_committing();
        super::TileBlockStorage::commit_durably(store, &owner, id).unwrap();
        owner.mark_committed(id);
        super::TileBlockStorage::stamp(&row, &owner, id);
    }

    /// The image of a region after a small workload with collections: two tables (one
    /// with a secondary index), updates, deletes, a frozen-and-freed block or two.
    fn worked_region_image() -> Vec<u8> {
        let device = SimulatedRegion::new(4 << 20, 11);
        let options = simulated_options(&device, 6)
            .garbage_collector(GarbageCollector::TbCollect)
            .block_gc_epoch(std::time::Duration::from_micros(100));
        let db = Database::open(options).unwrap();
        let t = db
            .create_table(
                "t",
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("name", ColumnType::Text)
                    .primary_key(&["id"])
                    .index("by_name", &["name"]),
            )
            .unwrap();
        for round in 0..8u64 {
            let mut txn = db.begin(Isolation::Serializable);
            for id in 0..10u64 {
                let name = Value::Text(format!("n{}", (id * round) % 4));
                if round == 0 {
                    txn.insert(t, &[Value::U64(id), name]).unwrap();
                } else if round == 5 && id % 3 == 0 {
                    let _ = txn.delete(t, &[Value::U64(id)]);
                } else {
                    let _ = txn.update(t, &[Value::U64(id)], &[(1, name)]);
                }
            }
            txn.commit().unwrap();
            db.collect_garbage();
        }
        drop(db);
        device.crash();
        device.durable_image()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Recovery's decoders, fuzzed: a region with bytes changed anywhere in what the
        /// workload wrote opens (and reads, writes and collects) or is refused with a typed
        /// error; it never panics.
        #[test]
        fn a_mutated_region_opens_or_is_refused_without_a_panic(
            flips in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 1u8..), 1..6),
        ) {
            use std::sync::OnceLock;
            static IMAGE: OnceLock<(Vec<u8>, usize)> = OnceLock::new();
            let (image, used) = IMAGE.get_or_init(|| {
                let image = worked_region_image();
                let used = image.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
                (image, used)
            });
            let mut mutated = image.clone();
            for (at, mask) in flips {
                mutated[at.index(*used)] ^= mask;
            }
            let device = SimulatedRegion::from_image(&mutated, 5);
            let options = simulated_options(&device, 6).garbage_collector(GarbageCollector::TbCollect);
            if let Ok(db) = Database::open(options) {
                let t = db.table("t");
                if let Ok(t) = t {
                    let mut txn = db.begin(Isolation::Serializable);
                    let rows: Vec<_> = txn.scan(t, ..).into_iter().flatten().collect();
                    let _ = txn.insert(t, &[Value::U64(1000), Value::Text("new".into())]);
                    let _ = txn.commit();
                    drop(rows);
                }
                db.collect_garbage();
            }
        }
    }

    /// The region offset and checksum key of the first block `image`'s directory lists.
    fn first_block(image: &[u8]) -> (usize, u64) {
        let superblock = layout::decode_superblock(&image[..512], image.len() as u64, "image")
            .expect("a formatted region");
        let g = superblock.geometry;
        let words: Vec<u64> = (0..g.frame_count)
            .map(|f| {
                let at = g.directory_word(f) as usize;
                u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
            })
            .collect();
        let block = layout::scan_directory(&words)
            .expect("a whole directory")
            .blocks[0];
        (
            g.frame_offset(block.first_frame) as usize,
            layout::block_key(block.first_frame, block.generation),
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Recovery's checks past the checksum, fuzzed: a record whose checksum is valid but
        /// whose fields are anything (any kind, table, transaction id, slot, sequence, a
        /// payload of random bytes or a well-formed row of other values) put first in a
        /// block opens or is refused with a typed error; it never panics.
        #[test]
        fn a_checksummed_record_of_any_content_opens_or_is_refused_without_a_panic(
            kind in 1u8..=5,
            flags in proptest::prelude::any::<u8>(),
            table in 0u16..3,
            txn_id in proptest::prop_oneof![
                proptest::strategy::Just(0u64),
                1u64..2_000,
                (1u64 << 62)..,
            ],
            slot in 0u16..3,
            sequence in proptest::prelude::any::<u16>(),
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            row in proptest::option::of((proptest::prelude::any::<u64>(), "[a-z]{0,12}")),
        ) {
            use std::sync::OnceLock;
            static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
            let mut image = IMAGE.get_or_init(worked_region_image).clone();
            let (block_at, key) = first_block(&image);
            let kind = match kind {
                1 => RecordKind::Version,
                2 => RecordKind::Tombstone,
                3 => RecordKind::Relocated,
                4 => RecordKind::Commit,
                _ => RecordKind::Withdrawn,
            };
            let packed;
            let payload: Vec<u8> = match (kind, row) {
                (RecordKind::Commit, _) => bytes.iter().copied().chain([0; 8]).take(8).collect(),
                (RecordKind::Withdrawn, _) => {
                    bytes.iter().copied().chain([0; 16]).take(16).collect()
                }
                (_, Some((id, name))) => {
                    packed = crate::row::PackedRow::from_values(
                        &[Value::U64(id), Value::Text(name)],
                        crate::row::NonInline::Packed,
                    );
                    packed.packed().bytes().to_vec()
                }
                (_, None) => bytes,
            };
            let record = layout::Record { kind, flags, table, txn_id, slot, sequence, payload: &payload };
            let encoded = layout::encode_record(&record, key);
            let at = block_at + layout::METADATA_LINE_BYTES as usize;
            image[at..at + encoded.len()].copy_from_slice(&encoded);
            let device = SimulatedRegion::from_image(&image, 5);
            let options = simulated_options(&device, 6).garbage_collector(GarbageCollector::TbCollect);
            if let Ok(db) = Database::open(options) {
                if let Ok(t) = db.table("t") {
                    let mut txn = db.begin(Isolation::Serializable);
                    let rows: Vec<_> = txn.scan(t, ..).into_iter().flatten().collect();
                    let _ = txn.insert(t, &[Value::U64(1000), Value::Text("new".into())]);
                    let _ = txn.commit();
                    drop(rows);
                }
                db.collect_garbage();
            }
        }
    }

    /// Found by the checksummed-record proptest: a whole `Withdrawn` record naming a frame
    /// past the region's last went into the rebuilt commit spans, and the first collection
    /// indexed the tile table with it (a panic). Recovery refuses it as corruption.
    #[test]
    fn regression_a_withdrawn_record_naming_a_frame_past_the_region_is_refused() {
        let mut image = worked_region_image();
        let (block_at, key) = first_block(&image);
        let past = layout::block_key(1 << 20, 0);
        let payload = layout::withdrawn_payload(past, 0);
        let record = layout::Record {
            kind: RecordKind::Withdrawn,
            flags: 0,
            table: 0,
            txn_id: 1,
            slot: 0,
            sequence: 0,
            payload: &payload,
        };
        let encoded = layout::encode_record(&record, key);
        let at = block_at + layout::METADATA_LINE_BYTES as usize;
        image[at..at + encoded.len()].copy_from_slice(&encoded);
        let device = SimulatedRegion::from_image(&image, 5);
        let options = simulated_options(&device, 6).garbage_collector(GarbageCollector::TbCollect);
        let opened = Database::open(options);
        assert!(
            matches!(&opened, Err(crate::Error::Corruption { reason, .. }) if reason.contains("withdrawn")),
            "{opened:?}"
        );
    }

    /// An insert that loses its key to a concurrent insert leaves its record unpublished
    /// (`discard_unpublished`) and its transaction goes on, may get `DuplicateKey`, and
    /// may commit. Recovery took the record, the highest id of its key, for the key's
    /// newest version; a `Withdrawn` record now takes it back. (The engine's insert looks
    /// the key up first, so only the race reaches this: driven here through the storage.)
    #[test]
    fn regression_an_insert_that_lost_its_key_is_no_version_after_recovery() {
        use crate::version::{NewRowContext, VersionStorage};
        let device = SimulatedRegion::new(4 << 20, 3);
        let options = simulated_options(&device, 8);
        let schema = Schema::new()
            .column("id", ColumnType::U64)
            .column("value", ColumnType::I64)
            .primary_key(&["id"]);
        {
            let store = super::TileBlockStorage::open_shared(&options).unwrap();
            let validated = schema.clone().validate("t").unwrap();
            super::TileBlockStorage::record_table(&store, 0, &validated).unwrap();
            insert_and_commit(&store, 5); // key 5, value 0, by transaction 5
            let owner = crate::sync::Arc::new(crate::txn::state::TxnShared::new());
            let context = NewRowContext {
                table: 0,
                txn_id: 9,
                indexed: false,
            };
            let (row, _) = super::TileBlockStorage::insert_row(
                &store,
                context,
                &[Value::U64(5), Value::I64(-1)],
                &owner,
                crate::row::NonInline::Packed,
            )
            .unwrap();
            super::TileBlockStorage::discard_unpublished(&row, &owner);
            owner.mark_committing();
            super::TileBlockStorage::commit_durably(&store, &owner, 9).unwrap();
            owner.mark_committed(9);
        }
        device.crash();
        let store = super::TileBlockStorage::open_shared(&options).unwrap();
        let recovered = super::TileBlockStorage::take_recovered(&store).expect("recovered");
        assert_eq!(recovered.rows.len(), 1);
        let (_, _, row) = &recovered.rows[0];
        let chain = row.read();
        assert_eq!(
            chain.store.record_txn_id(chain.head),
            5,
            "the withdrawn record of transaction 9 was taken for key 5's version"
        );
        assert_eq!(recovered.max_txn_id, 9);
    }

    fn blocks(store: &super::TileStore) -> usize {
        store
            .tiles
            .iter()
            .filter(|t| !t.load(std::sync::atomic::Ordering::Relaxed).is_null())
            .count()
    }

    /// Blocks of 4 slots: 6 transactions of one version and one commit record fill 3
    /// blocks; the full ones are sealed in the directory, the last stays open; a commit
    /// record's slot is obsolete from the start.
    #[test]
    fn blocks_fill_seal_and_count_commit_slots_obsolete() {
        let store = store_of(4);
        for id in 1..=6 {
            insert_and_commit(&store, id);
        }
        assert_eq!(blocks(&store), 3);
        let g = *store.space.geometry();
        let states: Vec<_> = (0..3)
            .map(|f| {
                layout::DirectoryEntry::decode(
                    store
                        .region
                        .load_u64(g.directory_word(f), std::sync::atomic::Ordering::Acquire),
                )
                .unwrap()
                .state
            })
            .collect();
        use layout::FrameState::{Open, Sealed};
        assert_eq!(states, [Sealed, Sealed, Open]);
        for f in 0..3 {
            let tile = store.tile_at(f).unwrap();
            let used = tile.used.load(std::sync::atomic::Ordering::Relaxed);
            let obsolete = tile.obsolete.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(
                (used, obsolete),
                (4, 2),
                "block {f}: two versions, two commit records"
            );
        }
    }

    /// Threads that come and go hand their open block to the next one instead of leaving
    /// near-empty blocks behind.
    #[test]
    fn threads_that_come_and_go_share_blocks() {
        let store = store_of(64);
        for id in 1..=20u64 {
            let store = std::sync::Arc::clone(&store);
            std::thread::spawn(move || insert_and_commit(&store, id))
                .join()
                .unwrap();
        }
        // 40 slots of 64: one block, whatever the number of threads.
        assert_eq!(blocks(&store), 1);
        assert_eq!(store.spare_blocks.lock().unwrap().len(), 1);
        // Two threads at once each need a block of their own.
        std::thread::scope(|scope| {
            for id in [100u64, 200] {
                let store = &store;
                scope.spawn(move || {
                    for i in 0..10 {
                        insert_and_commit(store, id + i);
                    }
                });
            }
        });
        assert!(blocks(&store) <= 2, "{} blocks", blocks(&store));
    }
}
