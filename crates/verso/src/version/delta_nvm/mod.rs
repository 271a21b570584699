//! The delta-nvm storage: the delta layout OneShot runs over in TB-Collect's experiments
//! (Wei et al. 2025, §2.3.3 and §5.1 Table 2: "partition clearing with delta NVM
//! storage"), over the same emulated region and counters as the other region storages.
//!
//! Definitions:
//! - The *main heap* holds each row's newest version, in place, in a slot of the region
//!   (`pmem/slot_heap.rs`): a 32-byte header (begin timestamp, the link to the newest old
//!   version, a word of length, capacity and `EXISTS`) and the contents (a packed row).
//!   An update rewrites it in place ([`Purpose::NewestInPlace`]); when the new contents do
//!   not fit, the row moves to a larger slot and the old one goes to its table's reuse list.
//! - The *version store* holds the old versions: before an update overwrites the newest
//!   version, its *before-image* (begin, end = the updater's id, the link it had, its
//!   contents) is appended to the open *partition* (`partitions.rs`). Chains run newest to
//!   oldest: main heap, then before-images, each linking the next older one by (partition,
//!   offset).
//! - A partition is released whole (OneShot's "partition clearing") once no snapshot can
//!   read its versions; or, when only long snapshots (older than every version's end in
//!   it) still may, after the versions they may read or walk past are copied into its
//!   *version index* (`pmem/version_index.rs`). A walk whose link names a released partition
//!   looks the version up there, or finds nothing older it may see.
//!
//! Invariants:
//! - D1. The main heap slot of a row changes only under the row's exclusive latch, and
//!   every reader reads it under the row's latch: readers borrow the newest contents in
//!   place.
//! - D2. A before-image never changes after it is appended, except that a rollback marks
//!   its own `ABORTED` (then no chain links it). It is read only under a pin of its
//!   partition's slot (`gate.rs`), so its bytes stay in place for as long as they are
//!   borrowed.
//! - D3. Only the newest version can be uncommitted; a before-image's begin and end are
//!   commit timestamps (MVTO ids) of committed transactions, or its end is the id of a
//!   transaction still running, which keeps its partition from being released (the
//!   partition's bounds contain the id: `gc/oneshot.rs`).
//! - D4. Every value is inline (`NonInline::Packed`): the region holds no pointer into DRAM.
//! - D5. A row's walks stop at its *cut* (`DeltaNvmChain::cut_at`, DRAM only): the link
//!   behind the first version committed below a finalizing's watermark. No snapshot at or
//!   after the watermark reads past that version, and every running or future snapshot is
//!   at or after it, so what lies behind is never read again; it stays in its partition
//!   until the partition goes.
//!
//! Durability: as the append-nvm storage, a commit persists every line its thread dirtied
//! (its before-images, its rewritten newest versions); nothing is recovered from the region
//! (`Options::path` is refused): the storage exists to measure OneShot.

pub(crate) mod chain;
mod collect;
pub(crate) mod gate;
#[cfg(all(test, loom))]
mod loom_tests;
pub(crate) mod partitions;
use crate::pmem::version_index;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::Result;
use crate::pmem::slot_heap::{self, SlotHeap};
use crate::pmem::space::Space;
use crate::pmem::{self, LineWriter, PmStats, Purpose, Region};
use partitions::{lock, OpenFrame, Partitions};

pub(crate) use chain::DeltaNvmStorage;

/// Main heap header words, by offset.
const MAIN_BEGIN: u64 = 0;
const MAIN_LINK_PART: u64 = 8;
const MAIN_LINK_AT: u64 = 16;
const MAIN_META: u64 = 24;
const MAIN_HEADER: u64 = 32;
/// Before-image header words, by offset.
const OLD_BEGIN: u64 = 0;
const OLD_END: u64 = 8;
const OLD_LINK_PART: u64 = 16;
const OLD_LINK_AT: u64 = 24;
const OLD_META: u64 = 32;
const OLD_HEADER: u64 = 40;
/// Meta words: the contents' length in bits 0..32; in the main heap the slot's capacity in
/// 64-byte units in bits 32..62; the flags in bits 62 and 63.
const CAPACITY_UNITS: u64 = (1 << 30) - 1;
const EXISTS: u64 = 1 << 62;
/// A before-image whose update rolled back (no chain links it; a release skips it).
const ABORTED: u64 = 1 << 63;
/// The begin timestamp of a rolled-back insert's version (no snapshot sees it).
const NEVER_EXISTED: u64 = 0;
/// A link to no version (partition numbers start at 1).
const NO_LINK: (u64, u64) = (0, 0);

/// The partition size by default: 32 frames (TB's blocks of 1,920 slots make frames of
/// about 480 KiB, so about 15 MiB; OneShot's are "typically dozens of GB" beside 14-140 GB
/// of data, and the lab's data is about a thousandth of that).
pub(crate) const DEFAULT_PARTITION_FRAMES: u32 = 32;

/// A thread's appending state: its writer (whose dirty lines its commit persists), the
/// frame it cuts main heap slots from, and its open frame in the version store.
pub(crate) struct Appender {
    writer: LineWriter,
    main_open: Option<(u64, u64)>,
    old_open: Option<OpenFrame>,
    /// The store's spare main heap frames, where the open one goes when it retires.
    spares: Arc<std::sync::Mutex<Vec<(u64, u64)>>>,
}

impl pmem::appenders::ThreadAppender for Appender {
    /// The thread ends (or the store goes): what it stored and did not persist is counted
    /// now, and its main heap frame goes to the spares (its partition frame is its
    /// partition's, released with it).
    fn retire(&mut self) {
        let _ = self.writer.persist();
        if let Some(open) = self.main_open.take() {
            lock(&self.spares).push(open);
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// What the delta-nvm storage keeps beside its rows.
pub(crate) struct DeltaStore {
    /// Tells stores apart in the threads' appender caches.
    id: u64,
    region: Arc<Region>,
    space: Space,
    /// The main heap's slots.
    main: SlotHeap,
    spare_frames: Arc<std::sync::Mutex<Vec<(u64, u64)>>>,
    pub(crate) partitions: Partitions,
    appenders: pmem::appenders::Registry,
}

/// Where an old version of a chain lies (the newest is in the row's main heap slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Located {
    /// A before-image in a partition not released, pinned.
    Old { partition: u64, at: u64 },
    /// An entry of a released partition's index, its slot pinned.
    Indexed {
        partition: u64,
        entry: version_index::Entry,
    },
}

/// The bytes of a main heap slot for `len` bytes of contents.
fn main_capacity(len: usize) -> u64 {
    slot_heap::capacity_for(MAIN_HEADER + len as u64)
}

/// The bytes of a before-image of `len` bytes of contents (records are 8-byte aligned).
fn old_bytes(len: usize) -> u64 {
    (OLD_HEADER + len as u64).next_multiple_of(8)
}

impl DeltaStore {
    /// A store over a new region as `options` describe it.
    fn open(options: &crate::Options) -> Result<DeltaStore> {
        let (region, space) = pmem::open_new_region(options, "delta-nvm")?;
        let frame_count = space.geometry().frame_count;
        Ok(DeltaStore {
            id: pmem::appenders::new_store_id(),
            region,
            space,
            main: SlotHeap::default(),
            spare_frames: Arc::default(),
            partitions: Partitions::new(
                options
                    .persistent_memory
                    .clone()
                    .unwrap_or_default()
                    .partition_frames,
                frame_count,
            ),
            appenders: pmem::appenders::Registry::default(),
        })
    }

    /// Runs `f` with this thread's appender of this store (made on first use).
    fn with_appender<R>(self: &Arc<Self>, f: impl FnOnce(&mut Appender) -> R) -> R {
        let make = || Appender {
            writer: self.region.writer(),
            main_open: lock(&self.spare_frames).pop(),
            old_open: None,
            spares: Arc::clone(&self.spare_frames),
        };
        pmem::appenders::with_thread_appender(self.id, &self.appenders, make, f)
    }

    fn word(&self, at: u64) -> u64 {
        self.region.load_u64(at, Ordering::Acquire)
    }

    // The main heap (read under the row's latch, D1).

    fn main_begin(&self, at: u64) -> u64 {
        self.word(at + MAIN_BEGIN)
    }

    fn main_link(&self, at: u64) -> (u64, u64) {
        (self.word(at + MAIN_LINK_PART), self.word(at + MAIN_LINK_AT))
    }

    fn main_exists(&self, at: u64) -> bool {
        self.word(at + MAIN_META) & EXISTS != 0
    }

    fn main_capacity_of(&self, at: u64) -> u64 {
        ((self.word(at + MAIN_META) >> 32) & CAPACITY_UNITS) * slot_heap::SLOT_ALIGN
    }

    fn main_contents(&self, at: u64) -> &[u8] {
        let len = (self.word(at + MAIN_META) & 0xFFFF_FFFF) as usize;
        self.bytes(at + MAIN_HEADER, len)
    }

    /// Writes a row's newest version (header and contents, one store) into its main heap
    /// slot `*main` (`None`: a new row), in place if it fits, else into a new slot (the old
    /// one goes to the reuse list). Returns whether the row moved.
    fn store_main(
        &self,
        appender: &mut Appender,
        (table, main): (u32, &mut Option<u64>),
        (begin, link): (u64, (u64, u64)),
        (contents, exists): (&[u8], bool),
    ) -> Result<()> {
        let needed = main_capacity(contents.len());
        let (at, capacity) = match *main {
            // In place whenever it fits (a row that grew once keeps its larger slot, so a
            // rollback always restores in place).
            Some(at) if self.main_capacity_of(at) >= needed => (at, self.main_capacity_of(at)),
            old => {
                let at = self.main.take(
                    &self.space,
                    &mut appender.writer,
                    &mut appender.main_open,
                    (table, needed),
                )?;
                if let Some(old) = old {
                    self.main.free(table, old, self.main_capacity_of(old));
                }
                *main = Some(at);
                (at, needed)
            }
        };
        let len = u32::try_from(contents.len()).expect("a packed row is under 4 GiB");
        let meta = u64::from(len)
            | ((capacity / slot_heap::SLOT_ALIGN) << 32)
            | if exists { EXISTS } else { 0 };
        let mut bytes = Vec::with_capacity((MAIN_HEADER as usize) + contents.len());
        for word in [begin, link.0, link.1, meta] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(contents);
        appender.writer.store(at, &bytes, Purpose::NewestInPlace);
        Ok(())
    }

    /// Rewrites one word of the main heap slot `at` in place.
    fn set_main(&self, appender: &mut Appender, at: u64, field: u64, value: u64) {
        appender
            .writer
            .store_u64(at + field, value, Purpose::NewestInPlace);
    }

    /// Puts a buried row's main heap slot on its table's reuse list.
    fn free_main(&self, table: u32, at: u64) {
        self.main.free(table, at, self.main_capacity_of(at));
    }

    // The version store.

    /// Appends the before-image of the main heap slot `main` (covered by `end`'s write) to
    /// the open partition. Returns its link and its bytes.
    fn append_before_image(
        &self,
        appender: &mut Appender,
        main: u64,
        end: u64,
    ) -> Result<((u64, u64), u64)> {
        let contents = self.main_contents(main);
        let meta = contents.len() as u64 | if self.main_exists(main) { EXISTS } else { 0 };
        let size = old_bytes(contents.len());
        let mut bytes = Vec::with_capacity(size as usize);
        let link = self.main_link(main);
        for word in [self.main_begin(main), end, link.0, link.1, meta] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(contents);
        bytes.resize(size as usize, 0);
        let Appender {
            writer, old_open, ..
        } = appender;
        let at = self
            .partitions
            .append(&self.space, writer, old_open, &bytes, end)?;
        Ok((at, size))
    }

    /// Marks a before-image whose update rolled back (its partition is live: D3).
    fn abort_before_image(&self, appender: &mut Appender, (partition, at): (u64, u64)) {
        let meta = self.word(at + OLD_META);
        appender
            .writer
            .store_u64(at + OLD_META, meta | ABORTED, Purpose::VersionHeader);
        let slot = self.partitions.slot(partition);
        slot.versions.fetch_sub(1, Ordering::Relaxed);
        self.partitions
            .counters
            .versions_held
            .fetch_sub(1, Ordering::Relaxed);
        slot.bytes
            .fetch_sub(old_bytes((meta & 0xFFFF_FFFF) as usize), Ordering::Relaxed);
    }

    /// Pins and finds the version `link` names: a before-image of a live partition, an
    /// entry of a released one's index, or nothing (`None`: released without it, so no
    /// walk that got here sees anything older). A `Some` holds a pin: [`Self::unpin`].
    fn locate(&self, (partition, at): (u64, u64)) -> Option<Located> {
        if partition == NO_LINK.0 {
            return None;
        }
        let slot = self.partitions.slot(partition);
        let states = gate::bit(gate::OPEN) | gate::bit(gate::SEALED) | gate::bit(gate::INDEXED);
        match slot.gate.pin(partition, states) {
            gate::Pinned::Gone => None,
            gate::Pinned::In(gate::INDEXED) => {
                let found = lock(&slot.index)
                    .as_ref()
                    .and_then(|index| index.find(&self.region, at));
                match found {
                    Some(entry) => Some(Located::Indexed { partition, entry }),
                    None => {
                        slot.gate.unpin();
                        None
                    }
                }
            }
            gate::Pinned::In(_) => Some(Located::Old { partition, at }),
        }
    }

    fn unpin(&self, located: Located) {
        let (Located::Old { partition, .. } | Located::Indexed { partition, .. }) = located;
        self.partitions.slot(partition).gate.unpin();
    }

    /// The begin timestamp (commit timestamp of its writer) of a located old version.
    fn old_begin(&self, located: Located) -> u64 {
        match located {
            Located::Old { at, .. } => self.word(at + OLD_BEGIN),
            Located::Indexed { entry, .. } => entry.begin(&self.region),
        }
    }

    fn old_link(&self, located: Located) -> (u64, u64) {
        match located {
            Located::Old { at, .. } => (self.word(at + OLD_LINK_PART), self.word(at + OLD_LINK_AT)),
            Located::Indexed { entry, .. } => entry.link(&self.region),
        }
    }

    fn old_exists(&self, located: Located) -> bool {
        match located {
            Located::Old { at, .. } => self.word(at + OLD_META) & EXISTS != 0,
            Located::Indexed { entry, .. } => entry.exists(&self.region),
        }
    }

    /// A located version's contents, in place (`None`: an index stub, which no snapshot
    /// that reaches it reads).
    fn contents_of(&self, located: Located) -> Option<&[u8]> {
        match located {
            Located::Old { at, .. } => {
                let len = (self.word(at + OLD_META) & 0xFFFF_FFFF) as usize;
                Some(self.bytes(at + OLD_HEADER, len))
            }
            Located::Indexed { entry, .. } => entry
                .contents(&self.region)
                .map(|(at, len)| self.bytes(at, len)),
        }
    }

    /// `len` bytes of the region at `at`, in place.
    #[allow(unsafe_code)]
    fn bytes(&self, at: u64, len: usize) -> &[u8] {
        // SAFETY: the callers pass the contents of a main heap slot, read under its row's
        // latch, which every change of the slot holds exclusively (D1); or of a
        // before-image or an index entry, read under a pin of its partition's slot, which
        // keeps the bytes in place and unchanged until the pin is dropped (D2,
        // `version_index.rs`), and the borrow does not outlive the pin (`chain.rs`).
        unsafe { self.region.bytes(at, len) }
    }

    /// Persists what this thread stored since its last persist point.
    fn persist(self: &Arc<Self>) -> Result<()> {
        self.with_appender(|appender| pmem::persist_commit(&self.region, &mut appender.writer))
    }

    /// The region's counters, the main heap's slots and the partitions'.
    pub(crate) fn stats(&self) -> PmStats {
        let mut stats = self.region.stats();
        let g = self.space.geometry();
        let free = self.space.free_frames();
        stats.blocks.frame_bytes = g.frame_bytes;
        stats.blocks.frames_free = free;
        stats.blocks.frames_in_use = g.frame_count - free;
        stats.slots = self.main.stats();
        let c = &self.partitions.counters;
        // The newest versions in place (one a main-heap slot), and the before-images in the
        // partitions not released yet.
        stats.versions_held = stats
            .slots
            .slots_cut
            .saturating_sub(stats.slots.slots_on_reuse_lists)
            + c.versions_held.load(Ordering::Relaxed);
        let (live, indexed) = self.partitions.now();
        let (index_entries, index_copies, index_bytes) = self.index_sizes();
        stats.partitions = pmem::PartitionStats {
            partitions_now: live,
            indexes_now: indexed,
            sealed: c.sealed.load(Ordering::Relaxed),
            released: c.released.load(Ordering::Relaxed),
            released_with_index: c.released_with_index.load(Ordering::Relaxed),
            indexes_freed: c.indexes_freed.load(Ordering::Relaxed),
            versions_released: c.versions_released.load(Ordering::Relaxed),
            index_entries,
            index_copies,
            index_bytes,
        };
        stats
    }

    /// Entries, copies and bytes of the indexes that live now.
    fn index_sizes(&self) -> (u64, u64, u64) {
        let indexed: Vec<u64> = lock(&self.partitions.waiting).1.iter().copied().collect();
        let mut sizes = (0, 0, 0);
        for number in indexed {
            if let Some(index) = lock(&self.partitions.slot(number).index).as_ref() {
                sizes.0 += index.entries;
                sizes.1 += index.copies;
                sizes.2 += index.bytes;
            }
        }
        sizes
    }

    /// Versions and bytes the partitions released, for the engine's counters.
    pub(crate) fn released(&self) -> (u64, u64) {
        let c = &self.partitions.counters;
        (
            c.versions_released.load(Ordering::Relaxed),
            c.bytes_released.load(Ordering::Relaxed),
        )
    }
}

impl Drop for DeltaStore {
    fn drop(&mut self) {
        // Every thread's appender holds the region (its writer): all retire now, so that
        // the mapping goes with the store.
        self.appenders.retire_all();
    }
}
