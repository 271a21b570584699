//! The append-nvm storage: the append-only storage with version headers in persistent
//! memory that TB-Collect's baselines run over (Wei et al. 2025, §2.3 and §5.1: Steam,
//! N2DB and Zen are "DBx1000 … adopting … append-only NVM storage"), over the same emulated
//! region and counters as the tile-block storage.
//!
//! Definitions:
//! - A *version* is a *slot* of the region: a 32-byte header (begin and end timestamps,
//!   the link to the next older version, and a word of length, capacity and flags)
//!   followed by the version's contents (a packed row). Header and contents are written
//!   together when the version is created ([`Purpose::Content`]); afterwards only header
//!   words are rewritten in place ([`Purpose::VersionHeader`]): the end timestamp when a
//!   newer version covers it (TB §2.3 and the reading notes: "modifies the old version's
//!   header in place"), the link when a collector unlinks the version behind it, the
//!   flags when a collector marks it obsolete or a rollback makes it a "never existed".
//! - A slot's *capacity* is its header and contents rounded up to 64 bytes. New slots are
//!   cut from the thread's *open frame* (a frame of the region's space); a slot too large
//!   for a frame gets frames of its own.
//! - A *reuse list* per table holds the slots a collector freed, by capacity: a new version
//!   of that table whose capacity matches takes one before a new slot is cut (TB §2.3.1:
//!   "placed into the reuse list of the corresponding table"; space is reused, never
//!   released). One mutex per table, as contended as the paper says it is.
//! - A transaction's id is its MVTO timestamp, its start and its commit timestamp: a
//!   version's begin is written once, with its contents. Whether the newest version's
//!   transaction committed is the DRAM row's business (`pending`), as in the other storages.
//!
//! Invariants:
//! - N1. A slot is in at most one place: linked in one chain, on one reuse list, or held by
//!   a thread that is writing it. A slot is freed only under the exclusive latch of the row
//!   that linked it, after it was unlinked (or with the row buried): so no reader (every
//!   reader holds its row's latch while it reads a version) can still reach it, and it may
//!   be reused at once, with no grace period.
//! - N2. A version's contents never change while a chain links it (readers borrow them in
//!   place); its header words change only under its row's exclusive latch, as atomic
//!   stores (readers load them atomically).
//! - N3. Every value is inline (`NonInline::Packed`): the region holds no pointer into DRAM.
//!
//! Durability: a commit persists every line its thread dirtied since its last persist point
//! (the versions it appended, the headers it rewrote), so that the line counts and the
//! emulated media delay are the same discipline as the tile-block storage's. Nothing is
//! recovered from the region: there are no commit records, and a database of this storage
//! stays in memory (`Options::path` is refused); it exists to measure the baselines.

pub(crate) mod chain;
#[cfg(all(test, loom))]
mod loom_tests;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::pmem::slot_heap::{self, SlotHeap, SLOT_ALIGN};
use crate::pmem::space::Space;
use crate::pmem::{self, LineWriter, PmStats, Purpose, Region};

pub(crate) use chain::AppendNvmStorage;

/// Bytes of a version's header.
const HEADER_BYTES: u64 = 32;
/// Header words, by offset in the slot.
const BEGIN: u64 = 0;
const END: u64 = 8;
const NEXT: u64 = 16;
const META: u64 = 24;
/// The end timestamp of a version nothing covers.
const LATEST: u64 = u64::MAX;
/// The begin timestamp of a rolled-back insert's version (no snapshot sees it).
const NEVER_EXISTED: u64 = 0;
/// A link to no version (offset 0 is the superblock's: never a slot).
const NONE: u64 = 0;
/// The meta word: the contents' length in bits 0..32, the slot's capacity in 64-byte units
/// in bits 32..62 (a packed row is under 4 GiB: `schema::MAX_VALUE_BYTES` × `MAX_COLUMNS`
/// is 2 GiB), the flags in bits 62 and 63.
const CAPACITY_UNITS: u64 = (1 << 30) - 1;
const EXISTS: u64 = 1 << 62;
const OBSOLETE: u64 = 1 << 63;

/// The meta word of a slot of `capacity` bytes holding `len` bytes of contents.
fn meta(len: usize, capacity: u64, exists: bool) -> u64 {
    debug_assert!(capacity % SLOT_ALIGN == 0 && capacity / SLOT_ALIGN <= CAPACITY_UNITS);
    debug_assert!(len as u64 + HEADER_BYTES <= capacity);
    let len = u32::try_from(len).expect("a packed row is under 4 GiB");
    u64::from(len) | ((capacity / SLOT_ALIGN) << 32) | if exists { EXISTS } else { 0 }
}

/// The capacity of a slot for `len` bytes of contents.
fn capacity_for(len: usize) -> u64 {
    slot_heap::capacity_for(HEADER_BYTES + len as u64)
}

/// A thread's appending state: its writer (whose dirty lines its commit persists) and the
/// frame it cuts new slots from.
pub(crate) struct Appender {
    writer: LineWriter,
    /// The open frame: the next free byte and the frame's end.
    open: Option<(u64, u64)>,
    /// The store's spare frames, where the open frame goes when it retires.
    spares: Arc<Mutex<Vec<(u64, u64)>>>,
}

/// What the append-nvm storage keeps beside its rows.
pub(crate) struct NvmStore {
    /// Tells stores apart in the threads' appender caches.
    id: u64,
    region: Arc<Region>,
    space: Space,
    /// Each table's reuse lists and the counters of the slots.
    slots: SlotHeap,
    /// Open frames of threads that ended, for the next thread that appends.
    spare_frames: Arc<Mutex<Vec<(u64, u64)>>>,
    /// Every thread's appender of this store (`pmem/appenders.rs`).
    appenders: pmem::appenders::Registry,
}

impl pmem::appenders::ThreadAppender for Appender {
    /// The thread ends (or the store goes): what it stored and did not persist (a
    /// rolled-back transaction's versions) is counted now, as the tile-block storage
    /// counts it, and its open frame goes to the spares.
    fn retire(&mut self) {
        let _ = self.writer.persist();
        if let Some(open) = self.open.take() {
            lock(&self.spares).push(open);
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

impl NvmStore {
    /// A store over a new region as `options` describe it.
    fn open(options: &crate::Options) -> Result<NvmStore> {
        let (region, space) = pmem::open_new_region(options, "append-nvm")?;
        Ok(NvmStore {
            id: pmem::appenders::new_store_id(),
            region,
            space,
            slots: SlotHeap::default(),
            spare_frames: Arc::default(),
            appenders: pmem::appenders::Registry::default(),
        })
    }

    /// Runs `f` with this thread's appender of this store (made on first use).
    fn with_appender<R>(self: &Arc<Self>, f: impl FnOnce(&mut Appender) -> R) -> R {
        let make = || Appender {
            writer: self.region.writer(),
            open: lock(&self.spare_frames).pop(),
            spares: Arc::clone(&self.spare_frames),
        };
        pmem::appenders::with_thread_appender(self.id, &self.appenders, make, f)
    }

    /// Stores a new version of `table` holding `contents` (a packed row), begun by
    /// `begin`, linked to `next`: into a slot of its capacity from the table's reuse list,
    /// or a new one. Returns the slot's offset. Refused when the region has no room.
    fn append_version(
        &self,
        appender: &mut Appender,
        table: u32,
        begin: u64,
        next: u64,
        (contents, exists): (&[u8], bool),
    ) -> Result<u64> {
        let capacity = capacity_for(contents.len());
        let at = self.slots.take(
            &self.space,
            &mut appender.writer,
            &mut appender.open,
            (table, capacity),
        )?;
        let mut bytes = Vec::with_capacity(HEADER_BYTES as usize + contents.len());
        bytes.extend_from_slice(&begin.to_le_bytes());
        bytes.extend_from_slice(&LATEST.to_le_bytes());
        bytes.extend_from_slice(&next.to_le_bytes());
        bytes.extend_from_slice(&meta(contents.len(), capacity, exists).to_le_bytes());
        bytes.extend_from_slice(contents);
        appender.writer.store(at, &bytes, Purpose::Content);
        Ok(at)
    }

    /// Puts the slot at `at` (unlinked from every chain, N1) on its table's reuse list.
    fn free_slot(&self, table: u32, at: u64) {
        self.slots.free(table, at, self.capacity(at));
    }

    fn word(&self, at: u64, field: u64) -> u64 {
        self.region.load_u64(at + field, Ordering::Acquire)
    }

    fn begin(&self, at: u64) -> u64 {
        self.word(at, BEGIN)
    }

    fn end(&self, at: u64) -> u64 {
        self.word(at, END)
    }

    fn next(&self, at: u64) -> u64 {
        self.word(at, NEXT)
    }

    fn exists(&self, at: u64) -> bool {
        self.word(at, META) & EXISTS != 0
    }

    fn contents_len(&self, at: u64) -> usize {
        (self.word(at, META) & 0xFFFF_FFFF) as usize
    }

    fn capacity(&self, at: u64) -> u64 {
        ((self.word(at, META) >> 32) & CAPACITY_UNITS) * SLOT_ALIGN
    }

    /// Rewrites one header word of the version at `at`, in place.
    fn set(&self, appender: &mut Appender, at: u64, field: u64, value: u64) {
        appender
            .writer
            .store_u64(at + field, value, Purpose::VersionHeader);
    }

    /// Marks the version at `at` obsolete in place (TVCP: "marked as obsolete and placed
    /// into the reuse list"), before it is freed.
    fn mark_obsolete(&self, appender: &mut Appender, at: u64) {
        let meta = self.word(at, META);
        self.set(appender, at, META, meta | OBSOLETE);
    }

    /// The contents of the version at `at`, in place.
    #[allow(unsafe_code)]
    fn contents(&self, at: u64) -> &[u8] {
        let len = self.contents_len(at);
        // SAFETY: the contents were stored before any chain linked the slot (under the
        // row's latch, which the caller holds), and no one stores into them while a chain
        // links it or frees the slot while the row's latch is held by a reader (N1, N2):
        // header words are stored to, but they lie before the contents.
        unsafe { self.region.bytes(at + HEADER_BYTES, len) }
    }

    /// Bytes of the version at `at` (what the statistics count): its slot.
    fn version_bytes(&self, at: u64) -> usize {
        self.capacity(at) as usize
    }

    /// Persists what this thread stored since its last persist point (a commit's
    /// versions and rewritten headers).
    fn persist(self: &Arc<Self>) -> Result<()> {
        self.with_appender(|appender| pmem::persist_commit(&self.region, &mut appender.writer))
    }

    /// The region's counters, and the slots'.
    pub(crate) fn stats(&self) -> PmStats {
        let mut stats = self.region.stats();
        let g = self.space.geometry();
        let free = self.space.free_frames();
        stats.blocks.frame_bytes = g.frame_bytes;
        stats.blocks.frames_free = free;
        stats.blocks.frames_in_use = g.frame_count - free;
        stats.slots = self.slots.stats();
        // One version a slot; a slot on a reuse list holds none.
        // (Read one after the other while writers run: saturating.)
        stats.versions_held = stats
            .slots
            .slots_cut
            .saturating_sub(stats.slots.slots_on_reuse_lists);
        stats
    }
}

impl Drop for NvmStore {
    fn drop(&mut self) {
        // Every thread's appender holds the region (its writer): all retire now, so that
        // the mapping goes with the store.
        self.appenders.retire_all();
    }
}

/// A mutex's guard, whether or not a thread panicked holding it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
