//! TB-Collect-hash's chain consolidation (TB §5.4 and Fig. 11: "we implement the hash index
//! of OneShotGC in TB-Collect, named TB-Collect-hash, which is used to access old versions"):
//! with `ChainConsolidation::HashIndex`, a collection that would keep a freed block's tile
//! (TB §4.4 case 2, or chains still reach its headers: finalizing is not done with them)
//! writes its superseded versions' headers to a version index in the region instead
//! (`pmem::version_index`, OneShot's: an entry and a bucket-head write per version, the
//! "numerous small writes" TB charges it with), switches every link into the block to the
//! index, and frees the tile with the block. A case-2 block no chain reaches is indexed
//! too, as TB-Collect keeps its tile: neither design asks what chains reach (TB §4.4
//! decides by the block's bounds against the epochs), and Fig. 11 compares what each
//! keeps for a long transaction.
//!
//! Definitions:
//! - An *indexed link* (`Link::indexed`) names an entry of an index: the first frame and
//!   generation of the index's run, and the slot the version had in its block (the entry's
//!   key). An entry's own link to an older version in the same block is stored as it was
//!   (a link into the block); `IndexedBlock::link_out_of` reads it as the indexed link.
//! - `IndexedBlock`: the DRAM side of one index: where it lies, the freed block's extent
//!   and bounds, and `pinned`, the entries chains reach (as `Tile::pinned` counts headers).
//!
//! Invariants:
//! - H1. An index is built whole and persisted before any link names it.
//! - H2. A link into the block is switched to the index under its row's exclusive latch,
//!   and in the same step each of the block's versions that chain reaches moves its pin
//!   from the tile to the index, its entry's link set to what its header says then (the
//!   entries were copied without the latches: another collection or a finalizer may have
//!   changed a header since, and after the switch no one reads the header again): `Tile::pinned` and `IndexedBlock::pinned` each count what
//!   chains reach. The tile is freed with the block only if no chain reaches it any more
//!   (its pins are zero); otherwise (a row the collection cannot find: a buried one) it is
//!   kept as TB-Collect keeps it, and the two are freed each by its own rule.
//! - H3. Versions in an index are ones no active snapshot reads (the block was in case 1 or
//!   2): only their headers are indexed (stubs), and nothing reads their contents.
//! - H4. An index is freed (its frames `FREE`, persisted) only when no chain reaches it
//!   (`pinned` zero) and every active snapshot is newer than the block's bounds; a reader
//!   reaches an entry only through a chain, under the row's latch, so none reads it then.
//!   Only the thread whose `ThreadGc::indexes` lists it frees it.
//! - Recovery never reads an index: its run is `Scratch` (the next open frees it), as the
//!   headers it stands for do not survive a restart either.

use std::sync::atomic::{AtomicU32, Ordering};

use super::{lock, Link, TileStore, ABORTED, COMMIT_SLOT, EXISTS, LATEST};
use crate::gc::tb_collect::{self, BlockCase};
use crate::pmem::layout::{self, RecordScan};
use crate::pmem::space::Extent;
use crate::pmem::version_index::{Entry, Indexed, VersionIndex};
use crate::pmem::LineWriter;
use crate::row::{PackedRef, RowView};
use crate::sync::Arc;
use crate::version::{ActiveSnapshots, BlockGcContext};

use super::reclaim::{ThreadGc, TileFate};
use super::TileRow;

/// The DRAM side of one version index.
pub(super) struct IndexedBlock {
    index: VersionIndex,
    /// The index's run (its first frame and generation name it in indexed links).
    run: Extent,
    /// The freed block's extent: an entry's link into it is a link into this index.
    block: Extent,
    /// The freed block's bounds (`Tile::min_txnid`, `Tile::max_txnid`) when it was frozen.
    min_txnid: u64,
    max_txnid: u64,
    /// Entries a chain reaches (H2).
    pinned: AtomicU32,
}

impl IndexedBlock {
    /// The link an entry's stored `link` stands for: into this index if it named the freed
    /// block, else as stored.
    pub(super) fn link_out_of(&self, link: Link) -> Link {
        if link.names_block(self.block) {
            return Link::into_index(
                self.run.first_frame,
                self.run.generation,
                link.slot() as u32,
            );
        }
        link
    }

    fn names_me(&self, link: Link) -> bool {
        link.indexed()
            && link.frame() as u64 == self.run.first_frame
            && link.generation() == self.run.generation & super::LINK_GENERATION_MASK
    }

    fn pin(&self) {
        self.pinned.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn unpin(&self) {
        let before = self.pinned.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "unpinned more than pinned (index)");
    }

    /// The region bytes it takes.
    pub(super) fn region_bytes(&self) -> u64 {
        self.index.bytes
    }
}

impl TileStore {
    /// The index whose run starts at `frame`.
    #[allow(unsafe_code)]
    fn indexed_at(&self, frame: usize) -> &IndexedBlock {
        let pointer = self.indexes[frame].load(Ordering::Acquire);
        assert!(
            !pointer.is_null(),
            "a link into a freed version index (frame {frame})"
        );
        // SAFETY: a non-null entry points at an `IndexedBlock` made by `Box::into_raw` in
        // `consolidate_into_index`, which `free_unreached_indexes` drops only after nulling
        // the entry and only when no chain reaches it (`pinned` zero, H4). Whoever asks
        // holds an indexed link it read from a chain under its row's latch (H2), or is the
        // collection that just published the index: it is not freed while this reference
        // lives.
        unsafe { &*pointer }
    }

    /// The index an indexed link names, and the link's entry in it.
    pub(super) fn index_entry(&self, link: Link) -> (&IndexedBlock, Entry) {
        debug_assert!(link.indexed());
        let indexed = self.indexed_at(link.frame());
        debug_assert!(indexed.names_me(link), "a link into another index's run");
        let entry = indexed
            .index
            .find(&self.region, link.slot() as u64)
            .expect("every superseded version of an indexed block has an entry");
        (indexed, entry)
    }

    /// Stores `next` as the version older than `link`'s, through `writer` for an entry.
    pub(super) fn set_next_through(&self, writer: &mut LineWriter, link: Link, next: Link) {
        if link.indexed() {
            let (_, entry) = self.index_entry(link);
            entry.set_link(writer, (next.0, 0));
        } else {
            self.header(link).next.store(next.0, Ordering::Relaxed);
        }
    }

    /// TB-Collect-hash's step for the frozen block at `frame` (its latest versions
    /// relocated and persisted, its tile to be kept otherwise): builds the index of its
    /// superseded versions (H1), switches every chain that reaches the block to it (H2),
    /// and says what happens to the tile: `FreeIndexed` once no chain reaches it (at once
    /// for a block no chain reached: indexed all the same, no switch), `Free` only for a
    /// block with nothing superseded, `Keep` when a chain could not be switched.
    pub(super) fn consolidate_into_index(
        &self,
        writer: &mut LineWriter,
        gc: &mut ThreadGc,
        frame: usize,
        context: &BlockGcContext<'_, TileRow>,
    ) -> TileFate {
        let tile = self.tile_at(frame).expect("a frozen block has a tile");
        // A tile no chain reaches is kept by TB-Collect all the same when the block is in
        // case 2 (TB §4.4 decides by the block's bounds against the epochs, not by what
        // chains reach), so the hash variant indexes it all the same: the two designs
        // differ only in what they keep for a long transaction (TB §5.4), and Fig. 11
        // compares exactly that. Its chains need no switch.
        let reached = tile.pinned.load(Ordering::SeqCst) > 0;
        debug_assert_eq!(tile.pinned_indexed.load(Ordering::SeqCst), 0, "fate()");
        let used = tile.used.load(Ordering::Relaxed) as usize;
        let superseded: Vec<usize> = (0..used)
            .filter(|&slot| {
                let header = &tile.headers[slot];
                header.end.load(Ordering::Relaxed) != LATEST
                    && header.flags.load(Ordering::Relaxed) & (ABORTED | COMMIT_SLOT) == 0
            })
            .collect();
        if superseded.is_empty() {
            if !reached {
                // Nothing a long transaction could read: nothing to index or keep.
                return TileFate::Free;
            }
            // Pinned yet nothing superseded: not a state a chain leaves (kept, to be safe).
            debug_assert!(false, "a pinned tile without a superseded version");
            self.counters.add(&self.counters.consolidations_refused, 1);
            return TileFate::Keep;
        }
        let versions: Vec<Indexed<'_>> = superseded
            .iter()
            .map(|&slot| {
                let header = &tile.headers[slot];
                Indexed {
                    at: slot as u64,
                    begin: header.begin.load(Ordering::Acquire),
                    end: header.end.load(Ordering::Relaxed),
                    link: (header.next.load(Ordering::Relaxed), 0),
                    exists: header.flags.load(Ordering::Relaxed) & EXISTS != 0,
                    len: header.len.load(Ordering::Relaxed) as usize,
                    contents: None,
                }
            })
            .collect();
        let Ok(index) = VersionIndex::build(&self.space, writer, &versions) else {
            // No room in the region (or it failed): the tile is kept, as TB-Collect's.
            self.counters.add(&self.counters.consolidations_refused, 1);
            return TileFate::Keep;
        };
        let run = index.extents[0];
        self.counters
            .add(&self.counters.index_entries, index.entries);
        let indexed = Box::new(IndexedBlock {
            index,
            run,
            block: tile.extent,
            min_txnid: tile.min_txnid.load(Ordering::SeqCst),
            max_txnid: tile.max_txnid.load(Ordering::SeqCst),
            pinned: AtomicU32::new(0),
        });
        let before =
            self.indexes[run.first_frame as usize].swap(Box::into_raw(indexed), Ordering::AcqRel);
        debug_assert!(before.is_null(), "an index's run is its own");
        gc.indexes.push(run.first_frame as usize);
        self.counters.add(&self.counters.indexes_built, 1);
        let indexed = self.indexed_at(run.first_frame as usize);
        #[cfg(test)]
        {
            let hook = lock(&self.after_index_built).take();
            if let Some(hook) = hook {
                hook();
            }
        }
        if !reached {
            // No chain to switch (and none can come to reach it: links only ever point at
            // older versions, and the block's newest ones were moved out). Indexed like a
            // reached one, freed by H4 when the snapshots it was kept for are gone.
            return TileFate::FreeIndexed;
        }
        // H2: every row with a version here, once, its chain switched under its latch.
        let mut rows: Vec<Arc<TileRow>> = Vec::new();
        for &slot in &superseded {
            if let Some(row) = self.row_of(tile, slot, context) {
                if !rows.iter().any(|r| Arc::ptr_eq(r, &row)) {
                    rows.push(row);
                }
            }
        }
        let mut switched = 0;
        for row in &rows {
            let chain = row.write();
            if chain.dead {
                continue; // (never walked again; its pins, if any, keep the tile)
            }
            let mut at = chain.head;
            debug_assert!(!at.names_block(tile.extent), "latest versions were moved");
            loop {
                let mut next = if indexed.names_me(at) {
                    // One of the block's versions: what follows it is what its header says
                    // now, under this latch. The entry was copied before any latch was
                    // taken, and another thread may have changed the header since (a
                    // collection switching it to its own index, a finalizer with an older
                    // list of snapshots pruning): the entry is brought up to date first.
                    let live = Link(tile.headers[at.slot()].next.load(Ordering::Relaxed));
                    let (_, entry) = self.index_entry(at);
                    if entry.link(&self.region).0 != live.0 {
                        entry.set_link(writer, (live.0, 0));
                        self.counters.add(&self.counters.index_entries_refreshed, 1);
                    }
                    indexed.link_out_of(live)
                } else {
                    self.next_of(at)
                };
                if next.is_none() {
                    break;
                }
                if next.names_block(tile.extent) {
                    next = indexed.link_out_of(next);
                    self.set_next_through(writer, at, next);
                    switched += 1;
                }
                if indexed.names_me(next) {
                    tile.unpin(false);
                    indexed.pin();
                }
                at = next;
            }
        }
        self.counters
            .add(&self.counters.index_links_switched, switched);
        // The entries' link words changed above: one more persist point (H1's order holds
        // without it; recovery never reads an index).
        let _ = writer.persist();
        if tile.pinned.load(Ordering::SeqCst) == 0 {
            TileFate::FreeIndexed
        } else {
            self.counters.add(&self.counters.consolidations_refused, 1);
            TileFate::Keep
        }
    }

    /// The row whose version is at `slot` of `tile` (found by its key), if the primary
    /// index still holds one.
    #[allow(unsafe_code)]
    fn row_of(
        &self,
        tile: &super::Tile,
        slot: usize,
        context: &BlockGcContext<'_, TileRow>,
    ) -> Option<Arc<TileRow>> {
        let bytes = self.record_bytes(tile, slot);
        let RecordScan::Valid(record) = layout::decode_record(&bytes, super::block_id(tile.extent))
        else {
            debug_assert!(self.region.has_failed(), "slot {slot} is torn");
            return None;
        };
        let table = u32::from(record.table);
        let arity = context.rows.arity(table)?;
        // SAFETY: the payload is a row this storage packed for a table of `arity` columns
        // with every value inline (T3), copied out of a record whose checksum was just
        // verified.
        let values = unsafe { PackedRef::from_stored(record.payload, arity) };
        context.rows.find(table, &RowView::packed(values))
    }

    /// H4: frees the indexes of `list` that no chain reaches and no active snapshot may
    /// walk any more; the others stay listed.
    #[allow(unsafe_code)]
    pub(super) fn free_unreached_indexes(
        &self,
        writer: &mut LineWriter,
        list: &mut Vec<usize>,
        active: &ActiveSnapshots,
    ) {
        list.retain(|&frame| {
            let pointer = self.indexes[frame].load(Ordering::Acquire);
            // SAFETY: an index is freed only here, by the thread whose list held its frame,
            // which is this one.
            let indexed = unsafe { &*pointer };
            let free = indexed.pinned.load(Ordering::SeqCst) == 0
                && tb_collect::classify(indexed.min_txnid, indexed.max_txnid, active)
                    == BlockCase::Reclaim;
            if free {
                let scans = lock(&self.table_scans);
                self.indexes[frame].store(std::ptr::null_mut(), Ordering::Release);
                drop(scans);
                // SAFETY: from `Box::into_raw` in `consolidate_into_index`, out of the
                // table now (under `table_scans`, which statistics read it under), and
                // nothing reaches it (H4).
                let indexed = unsafe { Box::from_raw(pointer) };
                // On a failure the frames stay out of the free list (their durable state is
                // unknown) and the region refuses every later commit; the next open frees
                // them (`Scratch`).
                let _ = self.space.free(writer, &indexed.index.extents);
                self.counters.add(&self.counters.indexes_freed, 1);
            }
            !free
        });
    }

    /// The live indexes' count and region bytes.
    #[allow(unsafe_code)]
    pub(super) fn index_sizes(&self) -> (u64, u64) {
        let _scans = lock(&self.table_scans);
        let mut count = 0;
        let mut bytes = 0;
        for entry in self.indexes.iter() {
            let pointer = entry.load(Ordering::Acquire);
            if !pointer.is_null() {
                count += 1;
                // SAFETY: an index leaves the table and is dropped under `table_scans`
                // (`free_unreached_indexes`), which this thread holds.
                bytes += unsafe { &*pointer }.region_bytes();
            }
        }
        (count, bytes)
    }
}
