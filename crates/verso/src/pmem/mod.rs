//! Emulated persistent memory: the region the tile-block storage of TB-Collect (Wei et al.,
//! Electronics 2025, §4) keeps its version contents in, and the counters of what reaching
//! it costs.
//!
//! There is no persistent memory on the machines Verso runs on. A memory-mapped file stands
//! in for it ([`MmapRegion`]: on a RAM-backed file system for speed, or on disk), and tests
//! use a simulated device that loses, tears and reorders what was not persisted
//! ([`SimulatedRegion`]). Both sit behind [`RegionBackend`].
//!
//! Definitions:
//! - The *region* ([`Region`]) is `len` bytes at a fixed address, 8-byte words. Every load
//!   and store is an atomic access to one word (a relaxed one unless an operation says
//!   otherwise), so two threads touching one word never race in the language's sense.
//! - A *line* is `line_bytes` aligned bytes ([`LineSize`]: 256, 128 or 64), the unit the
//!   media writes: Optane writes 256-byte lines internally (TB §2.1), and a cache line is
//!   64 bytes. A store *dirties* the lines it touches.
//! - A *persist point* ([`LineWriter::persist`]) makes durable every line its writer dirtied
//!   since its previous one: on real persistent memory, `clwb` of each line and one
//!   `sfence`. The lines of one persist point reach the media in no promised order.
//! - Every store goes through a [`LineWriter`] (one per thread), which keeps the counters:
//!   logical bytes the caller asked to store, lines persisted and the media bytes they are
//!   (lines × line size), by [`Purpose`]; [`Region::stats`] sums every writer's.
//!
//! Invariants:
//! - After `persist` returns `Ok`, every store its writer made before the call survives a
//!   crash (power loss); a store not yet persisted may survive or not, word by word (or in
//!   the backend's larger unit), independently of every other: nothing orders unpersisted
//!   stores. The mmap backend on a RAM-backed file system survives a process crash but not
//!   a power loss, and says so ([`RegionKind::Emulated`]).
//! - A line dirtied twice between two persist points of one writer is counted once (a
//!   write-back cache coalesces), and once per writer that persists it.
//! - A failed persist counts nothing and leaves its lines dirty: the caller must treat the
//!   region's durability as lost (`Error::DurabilityLost`), as the log does a failed fsync.
//!
//! Key operations: [`LineWriter::store`] (bytes at any offset), the word operations
//! ([`LineWriter::store_u64`], [`LineWriter::fetch_or_u64`], ...), [`LineWriter::persist`],
//! [`Region::load_u64`] and [`Region::read`].
//!
//! The per-line delay ([`Region::with_line_delay`]) is an emulation of slower media's write
//! bandwidth at the point a real program waits for it (the fence): it spins. It does not
//! emulate read latency; loads from the region are loads from DRAM.

pub(crate) mod appenders;
pub(crate) mod layout;
pub mod mmap;
pub mod simulated;
pub(crate) mod slot_heap;
pub(crate) mod space;
pub(crate) mod version_index;
mod writer;

use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use mmap::MmapRegion;
pub use simulated::{AtomicUnit, SimulatedMapping, SimulatedRegion};
pub use writer::{LineWriter, PersistReport};

use crate::error::{Error, Result};

/// The bytes a region's length must be a multiple of: the largest line size, so that every
/// line of every size lies wholly inside it.
pub const REGION_ALIGN: usize = 256;

/// Where the region's bytes live and what "persisted" means for them.
///
/// The backend is called only at persist points and at open; loads and stores go straight
/// to the memory at [`RegionBackend::base`] (through [`Region`] and [`LineWriter`]), so a
/// store costs no dynamic call.
///
/// # Safety
///
/// [`Region`] turns `base() + offset` into `&AtomicU64` for every aligned word below
/// `len()`, so an implementation must guarantee that `base()` is aligned to 8 bytes, valid
/// for reads and writes of all `len()` bytes (the pointer's provenance covers them all), at
/// the same address for the backend's whole life, and that nothing else accesses that
/// memory other than by atomic 8-byte loads and stores (or the operating system, as an
/// msync does) while the backend lives.
#[allow(unsafe_code)]
pub unsafe trait RegionBackend: Send + Sync + fmt::Debug {
    /// The first byte of the region (see the trait's safety contract).
    fn base(&self) -> NonNull<u8>;

    /// The region's length in bytes, a multiple of [`REGION_ALIGN`].
    fn len(&self) -> usize;

    /// Whether the region is empty (never, for a valid backend).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes the listed lines durable. `lines` are line numbers (of `line_bytes` each),
    /// sorted and distinct. Returns only when they are durable, or with the error that kept
    /// them from being so.
    fn persist(&self, lines: &[u64], line_bytes: u32) -> io::Result<()>;

    /// What surviving a crash means for this backend.
    fn kind(&self) -> RegionKind;

    /// Where the region lives, for error messages.
    fn describe(&self) -> String;
}

/// What surviving a crash means for a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegionKind {
    /// A file on a RAM-backed file system (tmpfs): persisting is a fence (and the emulated
    /// delay). The region survives a process crash, not a power loss or a reboot.
    Emulated,
    /// A file on a disk file system: persisting is an `msync` of the lines' pages, so the
    /// region survives a power loss (at about 0.1 ms a persist point on this VM's disk).
    Msync,
    /// [`SimulatedRegion`]: survives exactly what was persisted, plus any subset of the rest.
    Simulated,
}

/// The media's write unit: what one dirtied line costs. TB Table 3 varies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LineSize(u32);

impl LineSize {
    /// 256 bytes: Optane's internal write unit, and the paper's (TB §4.1: a 240-byte update
    /// bitmap and two 8-byte transaction ids fill one line). The default.
    pub const B256: LineSize = LineSize(256);
    /// 128 bytes.
    pub const B128: LineSize = LineSize(128);
    /// 64 bytes: a cache line.
    pub const B64: LineSize = LineSize(64);

    /// The line size of `bytes` (64, 128 or 256).
    pub fn new(bytes: u32) -> Result<LineSize> {
        match bytes {
            64 | 128 | 256 => Ok(LineSize(bytes)),
            _ => Err(Error::UnsupportedConfiguration {
                reason: format!(
                    "{bytes} bytes is not a line size of the persistent-memory media (64, 128 \
                     or 256)"
                ),
            }),
        }
    }

    /// The size in bytes.
    pub fn bytes(self) -> u32 {
        self.0
    }

    /// The line holding byte `offset`.
    #[inline]
    pub fn line_of(self, offset: u64) -> u64 {
        offset / u64::from(self.0)
    }
}

impl Default for LineSize {
    fn default() -> Self {
        LineSize::B256
    }
}

/// What a store was for, so that write amplification can be split by cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Purpose {
    /// A version's contents, appended.
    Content,
    /// The record that makes a transaction's contents committed.
    CommitRecord,
    /// A block's metadata line (update bitmap, `max_txnid`, `min_txnid`), rewritten in place.
    BlockMetadata,
    /// The directory of the region's blocks.
    Directory,
    /// A still-needed version copied out of a block being collected.
    Relocation,
    /// Table definitions.
    Catalog,
    /// The region's superblock.
    Superblock,
    /// Writes made while recovering after a crash.
    Recovery,
    /// A version header rewritten in place (the append-nvm storage: an end timestamp, a
    /// link, an obsolete mark).
    VersionHeader,
    /// A row's newest version rewritten in place in the main heap (the delta-nvm storage).
    NewestInPlace,
    /// A released partition's version index: its entries and bucket heads (the delta-nvm
    /// storage under OneShot).
    VersionIndex,
}

impl Purpose {
    /// Every purpose, in the order of [`Purpose::index`].
    pub const ALL: [Purpose; 11] = [
        Purpose::Content,
        Purpose::CommitRecord,
        Purpose::BlockMetadata,
        Purpose::Directory,
        Purpose::Relocation,
        Purpose::Catalog,
        Purpose::Superblock,
        Purpose::Recovery,
        Purpose::VersionHeader,
        Purpose::NewestInPlace,
        Purpose::VersionIndex,
    ];

    /// The purpose's position in [`Purpose::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Content => "content",
            Purpose::CommitRecord => "commit-record",
            Purpose::BlockMetadata => "block-metadata",
            Purpose::Directory => "directory",
            Purpose::Relocation => "relocation",
            Purpose::Catalog => "catalog",
            Purpose::Superblock => "superblock",
            Purpose::Recovery => "recovery",
            Purpose::VersionHeader => "version-header",
            Purpose::NewestInPlace => "newest-in-place",
            Purpose::VersionIndex => "version-index",
        }
    }
}

const PURPOSES: usize = Purpose::ALL.len();

/// What the writes of one [`Purpose`] cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurposeStats {
    /// Bytes the engine asked to store.
    pub logical_bytes: u64,
    /// Lines persisted (a line dirtied for several purposes in one persist window counts
    /// for the first of them).
    pub lines_persisted: u64,
}

/// The counters of a region's writes, exact: every store and persist point of every
/// [`LineWriter`] of the region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmStats {
    /// The line size the counts are in.
    pub line_bytes: u32,
    /// Persist points that persisted at least one line.
    pub persist_points: u64,
    /// Nanoseconds spent in the emulated per-line delay.
    pub line_delay_nanos: u64,
    by_purpose: [PurposeStats; PURPOSES],
    /// The blocks of the storage in the region, and their collection.
    pub blocks: BlockStats,
    /// The slots of the append-nvm storage and its reuse lists (zero for the tile-block
    /// storage).
    pub slots: SlotStats,
    /// The delta-nvm storage's partitions and version indexes (zero for the others).
    pub partitions: PartitionStats,
    /// Versions whose contents the region holds now, under any of its storages: every
    /// row's newest plus every old version whose space is not reclaimed yet (rolled-back
    /// ones too where the storage keeps them until their space goes; not commit records).
    /// This is what a chain would link if nothing but the collector unlinked versions: the
    /// "average version chain length" of TB §5.2 (Fig. 14), which "reflects the efficiency
    /// of GC in reclaiming space", is this over the rows.
    pub versions_held: u64,
    /// What the open recovered from the region (`None`: the region was new).
    pub recovery: Option<RecoveryReport>,
}

/// What opening a region that held a database found and did (TB §4.5): the tile-block
/// storage's recovery (`docs/design/tile-block.md`, "Recovery").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Blocks the directory listed.
    pub blocks: u64,
    /// Whole records read.
    pub records: u64,
    /// Rows rebuilt (keys whose newest committed version is not a tombstone).
    pub rows: u64,
    /// Records of transactions without a whole commit record.
    pub uncommitted_records: u64,
    /// Blocks a crash left frozen: Algorithm 3 finishes their collection.
    pub frozen_blocks: u64,
    /// Blocks without a single whole record, freed at once.
    pub empty_blocks_freed: u64,
    /// Frames of version indexes (TB-Collect-hash's `Scratch` runs) a crash or a close
    /// left in the region, freed by the open (nothing in them is recovered).
    pub version_index_frames_freed: u64,
    /// The highest transaction id in the region.
    pub max_txn_id: u64,
}

/// The blocks and tiles of the tile-block storage, and what its collector (tb-collect)
/// did: counts since the database opened, and sizes now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockStats {
    /// The bytes of one frame (a block spans one or more).
    pub frame_bytes: u64,
    /// Frames allocated to blocks now.
    pub frames_in_use: u64,
    /// Frames free now.
    pub frames_free: u64,
    /// Tiles in DRAM now (one per block, and the kept ones whose block was freed).
    pub tiles: u64,
    /// Of them, tiles kept for long transactions after their block was freed (TB §4.4
    /// case 2).
    pub tiles_kept: u64,
    /// DRAM bytes the tiles take now (headers and update-bitmap mirrors).
    pub tile_bytes: u64,
    /// Blocks sealed (full).
    pub blocks_sealed: u64,
    /// Queues of blocks the collector froze and collected (TB Algorithm 2, lines 12–24).
    pub collections: u64,
    /// Blocks freed with their tile (case 1).
    pub blocks_freed: u64,
    /// Blocks freed while their tile was kept (case 2, or versions still linked).
    pub blocks_freed_tile_kept: u64,
    /// Kept tiles freed later.
    pub kept_tiles_freed: u64,
    /// Blocks put back in the pending queue when frozen (a writer or a snapshot came).
    pub blocks_requeued: u64,
    /// Still-latest versions copied out of blocks being freed.
    pub versions_relocated: u64,
    /// Latest tombstones of buried rows dropped instead of copied (nothing older of their
    /// key is left in the region).
    pub tombstones_dropped: u64,
    /// Commit records copied out of blocks being freed because their transactions'
    /// records in other blocks are still in the region.
    pub commit_records_relocated: u64,
    /// TB-Collect-hash (`ChainConsolidation::HashIndex`): blocks freed with their tile
    /// once their superseded versions were indexed (where TB-Collect keeps the tile) and
    /// the chains that reached them were switched to the index.
    pub blocks_freed_indexed: u64,
    /// Version indexes in the region now.
    pub version_indexes: u64,
    /// The region bytes the version indexes take now.
    pub version_index_bytes: u64,
    /// Version indexes built.
    pub version_indexes_built: u64,
    /// Entries the version indexes got (one per superseded version indexed).
    pub version_index_entries: u64,
    /// Links into freed blocks switched to an index (one small write each, in DRAM or in
    /// an older index's entry).
    pub index_links_switched: u64,
    /// Entries whose link a consolidation set again while it switched a chain: the block's
    /// header had changed after the entry was copied (another collection, or a finalizer).
    pub index_entries_refreshed: u64,
    /// Version indexes freed (no chain reached them any more).
    pub version_indexes_freed: u64,
    /// Blocks whose tile was kept although the consolidation was the hash index (a chain
    /// the collection could not switch, or no room for the index).
    pub consolidations_refused: u64,
}

/// The append-nvm storage's slots (one version each) and its per-table reuse lists
/// (TB-Collect §2.3: collected versions' space is reused, not released): counts since the
/// database opened, and sizes now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotStats {
    /// New slots cut from frames.
    pub slots_cut: u64,
    /// Slots taken from a reuse list for a new version.
    pub slots_reused: u64,
    /// Slots a collector (or a rollback) put on a reuse list.
    pub slots_freed: u64,
    /// Slots on the reuse lists now.
    pub slots_on_reuse_lists: u64,
    /// Their bytes.
    pub bytes_on_reuse_lists: u64,
}

/// The delta-nvm storage's partitions (OneShot's partition clearing) and version indexes:
/// counts since the database opened, and sizes now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionStats {
    /// Partitions not released now (the open one and the sealed ones waiting).
    pub partitions_now: u64,
    /// Released partitions whose version index lives now.
    pub indexes_now: u64,
    /// Partitions sealed (full, or sealed by `collect_garbage`).
    pub sealed: u64,
    /// Partitions released (their frames freed).
    pub released: u64,
    /// Of those, the ones released after their version index was built.
    pub released_with_index: u64,
    /// Version indexes freed.
    pub indexes_freed: u64,
    /// Old versions the released partitions held.
    pub versions_released: u64,
    /// Entries of the indexes that live now.
    pub index_entries: u64,
    /// The copies among them (the rest are stubs a walk passes).
    pub index_copies: u64,
    /// The indexes' bytes in the region.
    pub index_bytes: u64,
}

impl PmStats {
    /// Zero counts in lines of `line_bytes`.
    pub fn new(line_bytes: u32) -> PmStats {
        PmStats {
            line_bytes,
            persist_points: 0,
            line_delay_nanos: 0,
            by_purpose: [PurposeStats::default(); PURPOSES],
            blocks: BlockStats::default(),
            slots: SlotStats::default(),
            partitions: PartitionStats::default(),
            versions_held: 0,
            recovery: None,
        }
    }

    /// The counts of one purpose.
    pub fn purpose(&self, purpose: Purpose) -> PurposeStats {
        self.by_purpose[purpose.index()]
    }

    /// Bytes the engine asked to store, all purposes.
    pub fn logical_bytes_stored(&self) -> u64 {
        self.by_purpose.iter().map(|p| p.logical_bytes).sum()
    }

    /// Lines persisted, all purposes.
    pub fn lines_persisted(&self) -> u64 {
        self.by_purpose.iter().map(|p| p.lines_persisted).sum()
    }

    /// Bytes the media wrote: lines persisted × line size.
    pub fn media_bytes_written(&self) -> u64 {
        self.lines_persisted() * u64::from(self.line_bytes)
    }

    /// Media bytes written per byte stored, or `None` before anything was stored.
    pub fn write_amplification(&self) -> Option<f64> {
        let logical = self.logical_bytes_stored();
        (logical > 0).then(|| self.media_bytes_written() as f64 / logical as f64)
    }

    /// Adds `other`'s counts (in the same line size) to these.
    pub fn add(&mut self, other: &PmStats) {
        debug_assert_eq!(self.line_bytes, other.line_bytes);
        self.persist_points += other.persist_points;
        self.line_delay_nanos += other.line_delay_nanos;
        for (mine, theirs) in self.by_purpose.iter_mut().zip(&other.by_purpose) {
            mine.logical_bytes += theirs.logical_bytes;
            mine.lines_persisted += theirs.lines_persisted;
        }
    }
}

/// One writer's counters. Only its writer changes them (a relaxed load and store, no
/// read-modify-write on the store path); anyone may read them. A sum read while writers run
/// is a moment's approximation; once they are quiescent it is exact.
#[derive(Debug)]
struct WriterCounters {
    persist_points: AtomicU64,
    line_delay_nanos: AtomicU64,
    logical_bytes: [AtomicU64; PURPOSES],
    lines_persisted: [AtomicU64; PURPOSES],
}

impl WriterCounters {
    fn new() -> WriterCounters {
        WriterCounters {
            persist_points: AtomicU64::new(0),
            line_delay_nanos: AtomicU64::new(0),
            logical_bytes: std::array::from_fn(|_| AtomicU64::new(0)),
            lines_persisted: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Adds `n` to a counter this writer alone changes.
    #[inline]
    fn bump(counter: &AtomicU64, n: u64) {
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    fn add_to(&self, stats: &mut PmStats) {
        stats.persist_points += self.persist_points.load(Ordering::Relaxed);
        stats.line_delay_nanos += self.line_delay_nanos.load(Ordering::Relaxed);
        for (i, purpose) in stats.by_purpose.iter_mut().enumerate() {
            purpose.logical_bytes += self.logical_bytes[i].load(Ordering::Relaxed);
            purpose.lines_persisted += self.lines_persisted[i].load(Ordering::Relaxed);
        }
    }
}

/// A region of (emulated) persistent memory: the backend, the line size the writes are
/// counted in, the emulated delay, and the counters of every writer made from it.
pub struct Region {
    backend: Arc<dyn RegionBackend>,
    /// `backend.base()`, kept here so an access costs no dynamic call.
    base: NonNull<u8>,
    len: usize,
    line: LineSize,
    line_delay: Duration,
    /// The counters of the live writers.
    writers: Mutex<Vec<Arc<WriterCounters>>>,
    /// The counts of the writers dropped so far.
    retired: Mutex<PmStats>,
    /// Set at the first failed persist: the region's durability is lost, and every later
    /// persist point fails (a later msync could succeed although the failed one's pages
    /// were dropped, as with a failed fsync).
    failed: std::sync::atomic::AtomicBool,
}

// SAFETY: `base` points into memory the backend owns for its whole life (the `Arc` above
// keeps it alive) and every access to it through `Region` is an atomic 8-byte access, so
// sharing the pointer between threads cannot race.
#[allow(unsafe_code)]
unsafe impl Send for Region {}
// SAFETY: as for `Send`: all access through `&Region` is atomic.
#[allow(unsafe_code)]
unsafe impl Sync for Region {}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("backend", &self.backend)
            .field("len", &self.len)
            .field("line_bytes", &self.line.bytes())
            .field("line_delay", &self.line_delay)
            .finish()
    }
}

impl Region {
    /// A region over `backend`, its writes counted in lines of `line`.
    pub fn new(backend: Arc<dyn RegionBackend>, line: LineSize) -> Result<Arc<Region>> {
        let base = backend.base();
        let len = backend.len();
        if len == 0 || len % REGION_ALIGN != 0 || base.as_ptr() as usize % 8 != 0 {
            return Err(Error::UnsupportedConfiguration {
                reason: format!(
                    "{} is {len} bytes at an address aligned to {}: a region must be a \
                     non-empty multiple of {REGION_ALIGN} bytes, aligned to 8",
                    backend.describe(),
                    1usize << (base.as_ptr() as usize).trailing_zeros().min(12),
                ),
            });
        }
        Ok(Arc::new(Region {
            backend,
            base,
            len,
            line,
            line_delay: Duration::ZERO,
            writers: Mutex::new(Vec::new()),
            retired: Mutex::new(PmStats::new(line.bytes())),
            failed: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// The same region with an emulated delay of `delay` per line persisted (a spin at the
    /// persist point: an emulation of slower media's write bandwidth, not a measurement of
    /// any). Only before writers are made.
    pub fn with_line_delay(
        backend: Arc<dyn RegionBackend>,
        line: LineSize,
        delay: Duration,
    ) -> Result<Arc<Region>> {
        let mut region = Region::new(backend, line)?;
        Arc::get_mut(&mut region)
            .expect("a region nobody else holds yet")
            .line_delay = delay;
        Ok(region)
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: [`Region::new`] refuses that).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The line size the writes are counted in.
    pub fn line_size(&self) -> LineSize {
        self.line
    }

    /// The emulated delay per line persisted.
    pub fn line_delay(&self) -> Duration {
        self.line_delay
    }

    /// What surviving a crash means for this region.
    pub fn kind(&self) -> RegionKind {
        self.backend.kind()
    }

    /// Where the region lives.
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// A new writer for one thread; its counts join [`Region::stats`].
    pub fn writer(self: &Arc<Region>) -> LineWriter {
        let counters = Arc::new(WriterCounters::new());
        self.writers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&counters));
        LineWriter::new(Arc::clone(self), counters)
    }

    /// The counts of every writer made from this region, summed (exact once the writers
    /// are quiescent; see [`WriterCounters`]).
    pub fn stats(&self) -> PmStats {
        let mut stats = self
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for counters in self
            .writers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            counters.add_to(&mut stats);
        }
        stats
    }

    /// Folds a dropped writer's counts into the retired total.
    fn retire(&self, counters: &Arc<WriterCounters>) {
        let mut writers = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = writers.iter().position(|c| Arc::ptr_eq(c, counters)) {
            writers.swap_remove(i);
            counters.add_to(&mut self.retired.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    /// Whether a persist point of this region has failed (its durability is lost).
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The word at byte `at` (8-aligned), with `ordering` (a load: `Relaxed`, `Acquire` or
    /// `SeqCst`).
    ///
    /// # Panics
    /// If `at` is not 8-aligned or the word is not inside the region.
    #[inline]
    pub fn load_u64(&self, at: u64, ordering: Ordering) -> u64 {
        self.word(at).load(ordering)
    }

    /// Copies the `buf.len()` bytes at `at` into `buf` (any offset and length inside the
    /// region), each word read atomically.
    ///
    /// # Panics
    /// If the bytes are not inside the region.
    pub fn read(&self, at: u64, buf: &mut [u8]) {
        self.check_range(at, buf.len());
        for piece in word_pieces(at, buf.len()) {
            let bytes = self
                .word(piece.word_at)
                .load(Ordering::Relaxed)
                .to_le_bytes();
            buf[piece.done..piece.done + piece.take]
                .copy_from_slice(&bytes[piece.skip..piece.skip + piece.take]);
        }
    }

    /// The `len` bytes at `at`, borrowed in place.
    ///
    /// # Safety
    /// No thread may store into these bytes while the borrow lives (they were published
    /// before it, and are immutable from then on): a store through a [`LineWriter`] is an
    /// atomic access, and mixing it with this plain borrow would be a data race.
    ///
    /// # Panics
    /// If the bytes are not inside the region.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn bytes(&self, at: u64, len: usize) -> &[u8] {
        self.check_range(at, len);
        // SAFETY: inside the region (checked), which stays mapped while `self` lives; the
        // caller guarantees no concurrent store into these bytes for the borrow's life.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(at as usize), len) }
    }

    /// The atomic word at byte `at`.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn word(&self, at: u64) -> &AtomicU64 {
        assert!(
            at % 8 == 0 && at.checked_add(8).is_some_and(|end| end <= self.len as u64),
            "word at {at} is not an aligned word of a {}-byte region",
            self.len
        );
        // SAFETY: `at` is 8-aligned and the word lies inside the region (checked above);
        // the region is 8-aligned (checked in `new`) and stays mapped while the backend
        // lives, which `self` keeps alive. Every access to region memory through `Region`
        // and `LineWriter` is through such an `AtomicU64`, so no access races with a
        // non-atomic one; the backends read it only atomically or through the kernel.
        unsafe { &*(self.base.as_ptr().add(at as usize) as *const AtomicU64) }
    }

    /// Panics unless `len` bytes at `at` lie inside the region.
    #[inline]
    pub(crate) fn check_range(&self, at: u64, len: usize) {
        assert!(
            at.checked_add(len as u64)
                .is_some_and(|end| end <= self.len as u64),
            "{len} bytes at {at} are not inside a {}-byte region",
            self.len
        );
    }

    /// Persists `lines` (sorted, distinct) through the backend; after a failure, refuses
    /// every later persist point.
    fn persist_lines(&self, lines: &[u64]) -> Result<()> {
        debug_assert!(lines.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        if self.has_failed() {
            return Err(Error::DurabilityLost {
                reason: format!(
                    "an earlier persist point of the persistent-memory region {} failed",
                    self.describe()
                ),
            });
        }
        self.backend
            .persist(lines, self.line.bytes())
            .map_err(|err| {
                self.failed.store(true, Ordering::Release);
                Error::Io {
                    path: self.describe(),
                    operation: "persisting lines of the persistent-memory region",
                    kind: err.kind(),
                    message: err.to_string(),
                }
            })
    }
}

/// The emulated delay per line persisted that makes writes to the region as slow as media
/// writing at `write_share` of DRAM's bandwidth (TB Table 3's write shares: 0.5 for its
/// configuration A, about 0.3 for Optane per TB §5.6): a line of `L` bytes takes
/// `L / bandwidth` in DRAM and `L / (write_share × bandwidth)` on the media, so the delay is
/// `L / bandwidth × (1 / write_share − 1)`. `dram_bytes_per_second` is this machine's DRAM
/// write bandwidth ([`measure_dram_write_bandwidth`]), so one rule gives every
/// configuration the same emulated media. An emulation of write bandwidth only.
pub fn emulated_line_delay(
    line: LineSize,
    write_share: f64,
    dram_bytes_per_second: f64,
) -> Result<Duration> {
    if !(write_share > 0.0 && write_share <= 1.0) {
        return Err(Error::UnsupportedConfiguration {
            reason: format!("a media write share of {write_share}: it must be in (0, 1] of DRAM's"),
        });
    }
    if !(dram_bytes_per_second.is_finite() && dram_bytes_per_second > 0.0) {
        return Err(Error::UnsupportedConfiguration {
            reason: format!("a DRAM write bandwidth of {dram_bytes_per_second} bytes/s"),
        });
    }
    let dram_seconds = f64::from(line.bytes()) / dram_bytes_per_second;
    Ok(Duration::from_secs_f64(
        dram_seconds * (1.0 / write_share - 1.0),
    ))
}

/// This machine's DRAM write bandwidth in bytes per second: the best of three copies of
/// `bytes` (256 MiB is what the lab uses: far beyond the caches) into a buffer touched
/// beforehand, so that page faults are not timed.
pub fn measure_dram_write_bandwidth(bytes: usize) -> f64 {
    let bytes = bytes.max(4096);
    let source = vec![0x5Au8; bytes];
    let mut target = vec![0u8; bytes];
    target.iter_mut().step_by(4096).for_each(|b| *b = 1);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let started = std::time::Instant::now();
        target.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut target);
        best = best.min(started.elapsed().as_secs_f64());
    }
    bytes as f64 / best.max(1e-9)
}

/// One word's share of a byte range: the word's offset, where the range starts in it, how
/// many of its bytes the range takes, and how many bytes of the range came before.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WordPiece {
    pub(crate) word_at: u64,
    pub(crate) skip: usize,
    pub(crate) take: usize,
    pub(crate) done: usize,
}

/// The words `len` bytes at `at` lie in, first to last.
pub(crate) fn word_pieces(at: u64, len: usize) -> impl Iterator<Item = WordPiece> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        (done < len).then(|| {
            let offset = at + done as u64;
            let word_at = offset & !7;
            let skip = (offset - word_at) as usize;
            let take = (8 - skip).min(len - done);
            let piece = WordPiece {
                word_at,
                skip,
                take,
                done,
            };
            done += take;
            piece
        })
    })
}

/// Where a database's persistent-memory region lives, and how its writes are counted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PmOptions {
    /// The region's backing.
    pub backing: PmBacking,
    /// The media's write unit the counters use (TB Table 3: 256, 128 or 64 bytes).
    pub line: LineSize,
    /// The emulated delay per line persisted ([`emulated_line_delay`]); zero by default.
    pub line_delay: std::time::Duration,
    /// The region's size: virtual until touched. 8 GiB by default.
    pub capacity_bytes: u64,
    /// Content slots per block: TB's 1,920 (§4.1) unless a test asks for fewer.
    #[doc(hidden)]
    pub slots_per_block: u32,
    /// Frames per partition of the delta-nvm storage's version store (OneShot's partition
    /// size); 32 by default (about 15 MiB with TB's blocks). Ignored by the others.
    pub partition_frames: u32,
}

impl Default for PmOptions {
    /// A region in a file on `/dev/shm` (unlinked once mapped), 256-byte lines, no delay,
    /// 8 GiB.
    fn default() -> PmOptions {
        PmOptions {
            backing: PmBacking::Tmpfs(std::path::PathBuf::from("/dev/shm")),
            line: LineSize::B256,
            line_delay: Duration::ZERO,
            capacity_bytes: 8 << 30,
            slots_per_block: layout::SLOTS_PER_BLOCK,
            partition_frames: crate::version::delta_nvm::DEFAULT_PARTITION_FRAMES,
        }
    }
}

impl PmOptions {
    /// These options with the region in `backing`.
    pub fn backing(mut self, backing: PmBacking) -> Self {
        self.backing = backing;
        self
    }

    /// These options counting lines of `line` bytes.
    pub fn line(mut self, line: LineSize) -> Self {
        self.line = line;
        self
    }

    /// These options with an emulated delay per line persisted.
    pub fn line_delay(mut self, delay: std::time::Duration) -> Self {
        self.line_delay = delay;
        self
    }

    /// These options with a region of `bytes` (a multiple of 256).
    pub fn capacity_bytes(mut self, bytes: u64) -> Self {
        self.capacity_bytes = bytes;
        self
    }

    /// These options with blocks of `slots` slots (tests: to fill blocks quickly).
    #[doc(hidden)]
    pub fn slots_per_block(mut self, slots: u32) -> Self {
        self.slots_per_block = slots;
        self
    }

    /// These options with partitions of `frames` frames in the delta-nvm storage (tests: to
    /// seal partitions quickly; at least 1).
    pub fn partition_frames(mut self, frames: u32) -> Self {
        self.partition_frames = frames;
        self
    }
}

/// The backing of a database's region.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum PmBacking {
    /// A new file in this directory of a RAM-backed file system, unlinked as soon as it is
    /// mapped: the region of a database without a path, gone with the process.
    Tmpfs(std::path::PathBuf),
    /// A simulated device, for crash tests.
    Simulated(SimulatedRegion),
}

/// The region file's name in a persistent database's directory: with `Options::path`, a
/// `Tmpfs` backing is replaced by this file, kept across restarts (on a RAM-backed file
/// system it survives a process crash, on a disk a power loss too, [`RegionKind`]).
pub const REGION_FILE: &str = "region.pm";

impl PartialEq for PmBacking {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (PmBacking::Tmpfs(a), PmBacking::Tmpfs(b)) => a == b,
            (PmBacking::Simulated(a), PmBacking::Simulated(b)) => a.same_device(b),
            _ => false,
        }
    }
}

impl Eq for PmBacking {}

/// A new region for a storage that recovers nothing from one (append-nvm, delta-nvm,
/// named `storage`), as `options` describe it, formatted, with its space. A simulated
/// device handed over again keeps what it held: refused, since nothing would read it.
pub(crate) fn open_new_region(
    options: &crate::Options,
    storage: &str,
) -> Result<(Arc<Region>, space::Space)> {
    let pm = options.persistent_memory.clone().unwrap_or_default();
    debug_assert!(options.path.is_none(), "validate refuses a path");
    let region = open_region(&pm, None)?;
    let mut writer = region.writer();
    let plan = layout::Plan {
        slots_per_block: pm.slots_per_block,
        ..layout::Plan::default()
    };
    let space::Opened {
        space, formatted, ..
    } = space::Space::open(&region, &mut writer, plan)?;
    if !formatted {
        return Err(Error::UnsupportedConfiguration {
            reason: format!(
                "{storage} recovers nothing from a region, and {} holds a database already: \
                 it needs a new region",
                region.describe()
            ),
        });
    }
    Ok((region, space))
}

/// A commit of a region storage that persists no commit record (append-nvm, delta-nvm):
/// persists what `writer` stored since its last persist point; refused once an earlier
/// persist point of the region failed.
pub(crate) fn persist_commit(region: &Region, writer: &mut LineWriter) -> Result<()> {
    if region.has_failed() {
        return Err(Error::DurabilityLost {
            reason: "an earlier persist point of the persistent-memory region failed".into(),
        });
    }
    writer
        .persist()
        .map(|_| ())
        .map_err(|error| Error::DurabilityLost {
            reason: format!("persisting a commit to the persistent-memory region: {error}"),
        })
}

/// The region `options` describe, mapped: in a database with a path (`database_dir`) the
/// file [`REGION_FILE`] there instead of a file on tmpfs.
pub(crate) fn open_region(
    options: &PmOptions,
    database_dir: Option<&std::path::Path>,
) -> Result<Arc<Region>> {
    static NEXT_FILE: AtomicU64 = AtomicU64::new(0);
    let backend: Arc<dyn RegionBackend> = match (&options.backing, database_dir) {
        // A database with a path: its region file, kept.
        (PmBacking::Tmpfs(_), Some(dir)) => {
            let path = &dir.join(REGION_FILE);
            let io_error = |operation: &'static str, err: io::Error| Error::Io {
                path: path.display().to_string(),
                operation,
                kind: err.kind(),
                message: err.to_string(),
            };
            let region = MmapRegion::open(path, options.capacity_bytes)
                .map_err(|err| io_error("opening the persistent-memory region", err))?;
            // A new file's name must survive a crash before anything in it is relied on.
            if let Some(dir) = path.parent() {
                std::fs::File::open(dir)
                    .and_then(|dir| dir.sync_all())
                    .map_err(|err| io_error("syncing the region's directory", err))?;
            }
            Arc::new(region)
        }
        (PmBacking::Tmpfs(dir), None) => {
            let name = format!(
                "verso-pm-{}-{}",
                std::process::id(),
                NEXT_FILE.fetch_add(1, Ordering::Relaxed)
            );
            let path = dir.join(name);
            let io_error = |err: io::Error| Error::Io {
                path: path.display().to_string(),
                operation: "creating the persistent-memory region",
                kind: err.kind(),
                message: err.to_string(),
            };
            let region = MmapRegion::open(&path, options.capacity_bytes).map_err(io_error)?;
            // The mapping outlives the name: the region goes with the last handle.
            std::fs::remove_file(&path).map_err(io_error)?;
            Arc::new(region)
        }
        (PmBacking::Simulated(device), _) => device.map().map_err(|err| Error::Io {
            path: "simulated persistent-memory region".into(),
            operation: "mapping the persistent-memory region",
            kind: err.kind(),
            message: err.to_string(),
        })?,
    };
    Region::with_line_delay(backend, options.line, options.line_delay)
}
