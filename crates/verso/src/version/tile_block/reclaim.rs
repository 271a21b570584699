//! TB-Collect's block-level collection over the tile-block storage (Wei et al. 2025,
//! §4.2–§4.4, Algorithms 1 and 2): the mechanism. The policy (the three cases, θ, the
//! queues' capacity, the epoch) is `gc/tb_collect.rs`.
//!
//! Definitions:
//! - Each thread has a `ThreadGc`: `pending` (the paper's `gc_pending_queue`: candidates
//!   not yet safe to collect), `local` (`local_gc_queue`: case 1), `long`
//!   (`long_tx_gc_queue`: case 2), `kept` (tiles kept after their block was freed), and its
//!   cached list of active snapshots with the epoch it was taken in (its *local epoch*).
//! - A block is in at most one queue: its state moves `SEALED` → `QUEUED` once (by the
//!   thread that found it a candidate), and only the thread whose queue holds it freezes,
//!   frees or puts it back.
//!
//! Invariants:
//! - A collection holds its thread's `ThreadGc` lock from its first step to its last; a
//!   thread never holds two `ThreadGc` locks (it takes blocks out of another's queue, lets
//!   go, then takes its own), so scans of others' queues cannot deadlock.
//! - A block is frozen only after a fresh list of active snapshots, taken after its state
//!   became `FREEZING`, classifies it `Reclaim` or `KeepTileFreeBlock` (D20's Dekker pair
//!   with writers, which raise `max_txnid` before they read the state).
//! - Its latest versions are copied to the collecting thread's relocation block and
//!   persisted before the block's frames are freed (`Space::free` persists the `FREE`
//!   words before the frames can be handed out again), so no committed newest version is
//!   ever lost to a crash.
//! - Its tile leaves the tile table before its frames are freed (a new block at the same
//!   frame publishes a new tile there): freed at once if nothing pins it, else moved to the
//!   kept-tile table until nothing does and no snapshot may walk it.
//!
//! The order of a collection's writes and persists (design note "Freeze, relocate, free"):
//! `FROZEN` directory words, persist; relocated records, persist; `FREE` directory words,
//! persist; then the frames go back to the free list.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{
    block_state, lock, Appender, Link, Sequence, Target, Tile, TileRow, TileStore, ABORTED, BURIED,
    COMMIT_SLOT, EXISTS, WEIGHED,
};
use crate::gc::tb_collect::{self, BlockCase};
use crate::pmem::layout::{self, FrameState, RecordKind, RecordScan};
use crate::row::{PackedRef, RowView};
use crate::version::{ActiveSnapshots, BlockGcContext};

/// A thread's collection queues (TB §4.2), by block (its first frame).
#[derive(Default)]
pub(super) struct ThreadGc {
    /// `gc_pending_queue`: candidates not yet safe to collect.
    pub(super) pending: Vec<usize>,
    /// `local_gc_queue`: blocks in case 1.
    local: Vec<usize>,
    /// `long_tx_gc_queue`: blocks in case 2.
    long: Vec<usize>,
    /// Tiles kept after their blocks were freed, by the frame their block had.
    kept: Vec<usize>,
    /// TB-Collect-hash's version indexes this thread built (or adopted), by their run's
    /// first frame (`hash_index.rs`).
    pub(super) indexes: Vec<usize>,
    /// The thread's list of active snapshots, and the epoch it was taken in.
    active: ActiveSnapshots,
    epoch: Option<u64>,
    /// `pending`'s length when it was last scanned (Algorithm 1 runs again when it grew).
    scanned: usize,
    /// Its thread ended: the running threads adopt what it holds (at their next epoch),
    /// and it leaves the registry once empty.
    pub(super) retired: bool,
}

/// What `adopt_from_every_thread` took for this thread: blocks for its local queue, and
/// (with `everything`) the others' version indexes.
struct Adopted {
    blocks: Vec<usize>,
    indexes: Vec<usize>,
}

/// What the collector did, since the store opened.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) blocks_sealed: AtomicU64,
    pub(super) blocks_live: AtomicU64,
    /// Records of versions (of rows: versions, tombstones, relocated copies; not commit
    /// records) in the blocks the tile table lists: appended or rebuilt, less those of
    /// freed blocks (`PmStats::versions_held`).
    pub(super) version_records: AtomicU64,
    collections: AtomicU64,
    blocks_freed: AtomicU64,
    blocks_freed_tile_kept: AtomicU64,
    kept_tiles_freed: AtomicU64,
    blocks_requeued: AtomicU64,
    versions_relocated: AtomicU64,
    tombstones_dropped: AtomicU64,
    commit_records_relocated: AtomicU64,
    blocks_freed_indexed: AtomicU64,
    pub(super) indexes_built: AtomicU64,
    pub(super) index_entries: AtomicU64,
    pub(super) index_links_switched: AtomicU64,
    pub(super) index_entries_refreshed: AtomicU64,
    pub(super) indexes_freed: AtomicU64,
    pub(super) consolidations_refused: AtomicU64,
}

impl Counters {
    pub(super) fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What a frozen block's collection does with its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TileFate {
    /// Case 1 with nothing pinning it: freed with the block.
    Free,
    /// TB-Collect-hash: its superseded versions were indexed and the chains that reached
    /// it (if any) switched to the index (`hash_index.rs`); freed with the block.
    FreeIndexed,
    /// Case 2 (long snapshots may walk its headers), or case 1 while finalizing has not
    /// yet cut every link into it: kept until neither holds.
    Keep,
}

impl TileStore {
    /// Algorithms 1 and 2 on this thread after a transaction ended (or everything safe
    /// to collect, for `collect_garbage`). Returns whether it did any work.
    pub(super) fn collect_blocks(
        self: &std::sync::Arc<Self>,
        context: &BlockGcContext<'_, TileRow>,
    ) -> bool {
        self.with_appender(|appender| self.collect_on_thread(appender, context))
    }

    fn collect_on_thread(
        &self,
        appender: &mut Appender,
        context: &BlockGcContext<'_, TileRow>,
    ) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false; // nothing more is written to a closed database's region
        }
        let mine = std::sync::Arc::clone(&appender.gc);
        let epoch = tb_collect::epoch(self.opened.elapsed(), self.epoch);
        let mut worked = false;
        // Algorithm 2, lines 3–7: a long transaction ended; what waited for it may go.
        let ended_long = context
            .ended
            .is_some_and(|ended| ended <= self.long_mark.load(Ordering::SeqCst));
        if ended_long || context.everything {
            let active = (context.active)();
            let adopted = self.adopt_from_every_thread(&mine, &active, context.everything);
            let mut gc = lock(&mine);
            gc.local.extend(adopted.blocks);
            gc.indexes.extend(adopted.indexes);
            if !gc.indexes.is_empty() {
                self.free_unreached_indexes(&mut appender.writer, &mut gc.indexes, &active);
            }
            gc.active = active;
            gc.epoch = Some(epoch);
            gc.scanned = 0;
            worked = true;
        }
        let mut gc = lock(&mine);
        self.take_candidates(&mut gc);
        if context.everything {
            self.seal_open_blocks(appender);
            self.take_candidates(&mut gc);
            self.queue_every_block_with_obsolete_slots(&mut gc);
        }
        let new_epoch = gc.epoch != Some(epoch);
        if new_epoch {
            gc.active = (context.active)();
            gc.epoch = Some(epoch);
            drop(gc);
            let adopted = self.adopt_from_retired_threads(&mine);
            gc = lock(&mine);
            gc.pending.extend(adopted.pending);
            gc.local.extend(adopted.local);
            gc.long.extend(adopted.long);
            gc.kept.extend(adopted.kept);
            gc.indexes.extend(adopted.indexes);
        }
        // Algorithm 1: only when the queue or the list changed (D28), so an unchanged
        // pair of them costs nothing per transaction.
        if new_epoch || gc.pending.len() != gc.scanned || context.everything {
            self.scan_pending(&mut gc, context.everything);
            worked = true;
        }
        if new_epoch && !gc.kept.is_empty() {
            let active = gc.active.clone();
            self.free_kept_tiles(&mut gc.kept, &active);
        }
        if new_epoch && !gc.indexes.is_empty() {
            let active = gc.active.clone();
            let mut indexes = std::mem::take(&mut gc.indexes);
            self.free_unreached_indexes(&mut appender.writer, &mut indexes, &active);
            gc.indexes = indexes;
        }
        let capacity = tb_collect::queue_capacity(
            self.counters.blocks_live.load(Ordering::Relaxed) as usize,
            context.threads,
        );
        // Algorithm 2, lines 8–11: a full long queue frees its blocks, keeping the tiles.
        if gc.long.len() >= capacity || (context.everything && !gc.long.is_empty()) {
            let blocks = std::mem::take(&mut gc.long);
            self.collect_queue(appender, &mut gc, blocks, context);
            worked = true;
        }
        // Lines 12–24: a full local queue is frozen, relocated and freed.
        if gc.local.len() >= capacity || (context.everything && !gc.local.is_empty()) {
            let blocks = std::mem::take(&mut gc.local);
            self.collect_queue(appender, &mut gc, blocks, context);
            worked = true;
        }
        gc.scanned = gc.pending.len();
        worked
    }

    /// Algorithm 3 (TB §4.5): the blocks a crash left frozen (the persisted
    /// `local_gc_queue_frozen`) are collected now, on this thread, and nothing else: their
    /// latest versions relocated (found through `context.rows`, which holds the recovered
    /// rows), spanning commit and withdrawn records copied, then freed. A block the crash
    /// had freed is not listed (its words say `FREE`, or its torn run was freed at open).
    /// Run by the engine's recovery before `open` returns, whatever the collector.
    pub(super) fn finish_interrupted_collections(
        self: &std::sync::Arc<Self>,
        context: &BlockGcContext<'_, TileRow>,
    ) {
        let frozen = self.take_recovered_frozen();
        if frozen.is_empty() {
            return;
        }
        self.with_appender(|appender| {
            let mine = std::sync::Arc::clone(&appender.gc);
            let mut gc = lock(&mine);
            self.collect_queue(appender, &mut gc, frozen, context);
        });
    }

    /// Algorithm 2's step 1 across threads (and `collect_garbage`'s gathering): from every
    /// thread's queues, the blocks `active` now classifies `Reclaim` (every queue, with
    /// `everything`), for this thread's local queue; and the kept tiles nothing needs any
    /// more, freed. Locks one thread's queues at a time, never this thread's with another.
    fn adopt_from_every_thread(
        &self,
        mine: &std::sync::Arc<Mutex<ThreadGc>>,
        active: &ActiveSnapshots,
        everything: bool,
    ) -> Adopted {
        let threads: Vec<_> = lock(&self.threads).clone();
        let mut adopted = Vec::new();
        let mut indexes = Vec::new();
        for thread in threads {
            let mut kept = {
                let mut gc = lock(&thread);
                let reclaimable = |frame: &usize| {
                    let tile = self.tile_at(*frame).expect("a queued block has a tile");
                    everything || self.case_of(tile, active) == BlockCase::Reclaim
                };
                let (take, stay): (Vec<usize>, Vec<usize>) =
                    gc.long.drain(..).partition(reclaimable);
                gc.long = stay;
                adopted.extend(take);
                if everything && !std::sync::Arc::ptr_eq(&thread, mine) {
                    adopted.append(&mut gc.local);
                    adopted.append(&mut gc.pending);
                    indexes.append(&mut gc.indexes);
                    gc.scanned = 0;
                }
                std::mem::take(&mut gc.kept)
            };
            self.free_kept_tiles(&mut kept, active);
            if !kept.is_empty() {
                lock(&thread).kept.append(&mut kept);
            }
        }
        Adopted {
            blocks: adopted,
            indexes,
        }
    }

    /// What the threads that ended left in their queues, for this thread; their emptied
    /// queues leave the registry. Locks one thread's queues at a time.
    fn adopt_from_retired_threads(&self, mine: &std::sync::Arc<Mutex<ThreadGc>>) -> ThreadGc {
        let others: Vec<_> = lock(&self.threads)
            .iter()
            .filter(|thread| !std::sync::Arc::ptr_eq(thread, mine))
            .cloned()
            .collect();
        let mut adopted = ThreadGc::default();
        for thread in others {
            let mut gc = lock(&thread);
            if gc.retired {
                adopted.pending.append(&mut gc.pending);
                adopted.local.append(&mut gc.local);
                adopted.long.append(&mut gc.long);
                adopted.kept.append(&mut gc.kept);
                adopted.indexes.append(&mut gc.indexes);
            }
        }
        lock(&self.threads).retain(|thread| {
            let gc = lock(thread);
            let empty = gc.pending.is_empty()
                && gc.local.is_empty()
                && gc.long.is_empty()
                && gc.kept.is_empty()
                && gc.indexes.is_empty();
            std::sync::Arc::ptr_eq(thread, mine) || !(gc.retired && empty)
        });
        adopted
    }

    /// The store's new candidates, into this thread's pending queue.
    fn take_candidates(&self, gc: &mut ThreadGc) {
        if self.candidate_count.load(Ordering::Acquire) > 0 {
            let mut candidates = lock(&self.candidates);
            self.candidate_count.store(0, Ordering::Release);
            gc.pending.append(&mut candidates);
        }
    }

    /// The case of `tile`'s block under `active`, with its current bounds.
    fn case_of(&self, tile: &Tile, active: &ActiveSnapshots) -> BlockCase {
        tb_collect::classify(
            tile.min_txnid.load(Ordering::SeqCst),
            tile.max_txnid.load(Ordering::SeqCst),
            active,
        )
    }

    /// Algorithm 1, lines 5–19: each pending block in case 1 goes to the local queue, in
    /// case 2 to the long queue (its long snapshots marked, D17); case 3 stays.
    fn scan_pending(&self, gc: &mut ThreadGc, everything: bool) {
        let pending = std::mem::take(&mut gc.pending);
        for frame in pending {
            let tile = self.tile_at(frame).expect("a queued block has a tile");
            match self.case_of(tile, &gc.active) {
                BlockCase::Reclaim => gc.local.push(frame),
                BlockCase::KeepTileFreeBlock { newest_long } => {
                    self.long_mark.fetch_max(newest_long, Ordering::SeqCst);
                    if everything {
                        gc.local.push(frame);
                    } else {
                        gc.long.push(frame);
                    }
                }
                BlockCase::Keep => gc.pending.push(frame),
            }
        }
    }

    /// `collect_garbage`: this thread's open blocks (and the spares threads that ended
    /// left) are sealed, so that what they hold can be collected. Other running threads'
    /// open blocks stay open (only their owner appends to them).
    fn seal_open_blocks(&self, appender: &mut Appender) {
        let spares: Vec<_> = lock(&self.spare_blocks).drain(..).collect();
        let mut open: Vec<_> = appender.open.iter_mut().filter_map(Option::take).collect();
        open.extend(appender.relocation.take());
        for block in open.into_iter().chain(spares) {
            self.seal(appender, block);
        }
    }

    /// `collect_garbage`: every sealed block with an obsolete slot is queued, whatever θ.
    fn queue_every_block_with_obsolete_slots(&self, gc: &mut ThreadGc) {
        let _scans = lock(&self.table_scans);
        for frame in 0..self.tiles.len() {
            let Some(tile) = self.tile_at(frame) else {
                continue;
            };
            if tile.obsolete.load(Ordering::Relaxed) > 0 && tile.claim_for_a_queue() {
                gc.pending.push(frame);
            }
        }
    }

    /// Freezes, relocates and frees the blocks of one queue (TB Algorithm 2, lines 8–24;
    /// design note "Freeze, relocate, free"). Blocks that no longer qualify go back to the
    /// pending queue.
    #[allow(unsafe_code)]
    pub(super) fn collect_queue(
        &self,
        appender: &mut Appender,
        gc: &mut ThreadGc,
        blocks: Vec<usize>,
        context: &BlockGcContext<'_, TileRow>,
    ) {
        // F1: freezing. The state first, then a fresh list, then the bounds (D20).
        for &frame in &blocks {
            super::freeze(
                &self
                    .tile_at(frame)
                    .expect("a queued block has a tile")
                    .state,
            );
        }
        let active = (context.active)();
        let mut frozen = Vec::new();
        for frame in blocks {
            let tile = self.tile_at(frame).expect("a queued block has a tile");
            match self.fate(frame, tile, &active) {
                Some(fate) => frozen.push((frame, fate)),
                None => {
                    tile.state.store(block_state::QUEUED, Ordering::SeqCst);
                    gc.pending.push(frame);
                    self.counters.add(&self.counters.blocks_requeued, 1);
                }
            }
        }
        if frozen.is_empty() {
            return;
        }
        self.counters.add(&self.counters.collections, 1);
        // F2: the persisted frozen queue (D22): `FROZEN` directory words.
        for &(frame, _) in &frozen {
            let tile = self.tile_at(frame).expect("a frozen block has a tile");
            self.space
                .set_state(&mut appender.writer, tile.extent, FrameState::Frozen);
            tile.state.store(block_state::FROZEN, Ordering::SeqCst);
        }
        if appender.writer.persist().is_err() {
            return self.abandon(frozen);
        }
        // F3: the latest versions to block N+1, persisted before any block is freed. A
        // block whose versions find no room (a full region), or with a record whose fate
        // cannot be told yet, stays, sealed again.
        let mut low_water = None;
        let mut relocated: Vec<(usize, TileFate)> = Vec::with_capacity(frozen.len());
        for &(frame, fate) in &frozen {
            if let Ok(true) = self.relocate_block(appender, frame, context, &mut low_water) {
                relocated.push((frame, fate));
            } else {
                let tile = self.tile_at(frame).expect("a frozen block has a tile");
                self.space
                    .set_state(&mut appender.writer, tile.extent, FrameState::Sealed);
                tile.state.store(block_state::QUEUED, Ordering::SeqCst);
                gc.pending.push(frame);
                self.counters.add(&self.counters.blocks_requeued, 1);
            }
        }
        // The commit records of transactions whose records went to other blocks too, for
        // the blocks that are freed now that it is known which are. If one finds no room,
        // no block is freed (each was weighed against the others' going).
        let committed_kept = relocated
            .iter()
            .try_for_each(|&(frame, _)| self.keep_commits(appender, frame, &relocated));
        if committed_kept.is_err() {
            for (frame, _) in relocated.drain(..) {
                let tile = self.tile_at(frame).expect("a frozen block has a tile");
                self.space
                    .set_state(&mut appender.writer, tile.extent, FrameState::Sealed);
                tile.state.store(block_state::QUEUED, Ordering::SeqCst);
                gc.pending.push(frame);
                self.counters.add(&self.counters.blocks_requeued, 1);
            }
        }
        let mut frozen = relocated;
        if appender.writer.persist().is_err() {
            return self.abandon(frozen);
        }
        // TB-Collect-hash: a tile TB-Collect would keep is indexed in the region instead,
        // the chains that reach it switched to the index (`hash_index.rs`).
        if self.consolidation == crate::ChainConsolidation::HashIndex {
            for (frame, fate) in &mut frozen {
                if *fate == TileFate::Keep {
                    *fate = self.consolidate_into_index(&mut appender.writer, gc, *frame, context);
                }
            }
        }
        // F5 before F4's frames go back: each tile leaves the tile table (freed, or
        // kept), so that a block allocated at its frame can publish its own. A kept tile
        // is in the kept table before it leaves the tile table: a walker following a link
        // into it finds it in one or the other.
        let mut extents = Vec::with_capacity(frozen.len());
        let mut ids = Vec::with_capacity(frozen.len());
        let _scans = lock(&self.table_scans);
        for &(frame, fate) in &frozen {
            let tile = self.tiles[frame].load(Ordering::Acquire);
            // SAFETY: a frozen block's tile, owned by this collection (its queue).
            let tile_ref = unsafe { &*tile };
            extents.push(tile_ref.extent);
            let id = super::block_id(tile_ref.extent);
            ids.push(id);
            lock(&self.frees_not_durable)
                .push((id, tile_ref.min_superseded.load(Ordering::SeqCst)));
            self.counters.blocks_live.fetch_sub(1, Ordering::Relaxed);
            let used = tile_ref.used.load(Ordering::Relaxed) as usize;
            let versions = tile_ref.headers[..used]
                .iter()
                .filter(|h| h.flags.load(Ordering::Relaxed) & COMMIT_SLOT == 0)
                .count();
            self.counters
                .version_records
                .fetch_sub(versions as u64, Ordering::Relaxed);
            match fate {
                TileFate::Free | TileFate::FreeIndexed => {
                    self.tiles[frame].store(std::ptr::null_mut(), Ordering::Release);
                    // SAFETY: from `Box::into_raw` (`open_block`), out of the table now,
                    // and nothing reaches it (`fate`: not pinned, or every chain switched
                    // to an index, H2; latest versions moved).
                    drop(unsafe { Box::from_raw(tile) });
                    let counter = if fate == TileFate::Free {
                        &self.counters.blocks_freed
                    } else {
                        &self.counters.blocks_freed_indexed
                    };
                    self.counters.add(counter, 1);
                }
                TileFate::Keep => {
                    tile_ref
                        .state
                        .store(block_state::BLOCK_FREED, Ordering::SeqCst);
                    let before = self.kept_tiles[frame].swap(tile, Ordering::AcqRel);
                    debug_assert!(before.is_null(), "fate() checked the kept slot");
                    self.tiles[frame].store(std::ptr::null_mut(), Ordering::Release);
                    gc.kept.push(frame);
                    self.counters.add(&self.counters.blocks_freed_tile_kept, 1);
                }
            }
        }
        drop(_scans);
        #[cfg(test)]
        {
            let hook = lock(&self.before_free_is_durable).take();
            if let Some(hook) = hook {
                hook();
            }
        }
        // F4: `FREE` words persisted, then the frames are free to hand out. Until then the
        // blocks stay in `frees_not_durable` (for good if the persist failed: the region
        // refuses every later write, and the next open finishes them).
        if self.space.free(&mut appender.writer, &extents).is_ok() {
            lock(&self.frees_not_durable).retain(|(id, _)| !ids.contains(id));
        }
    }

    /// F1's decision for a block in state `FREEZING`: what happens to its tile if it is
    /// collected, or `None` to put it back (a snapshot or a writer is in its bounds, or
    /// finalizing still reads contents of it, or a tile kept at its frame is still there).
    fn fate(&self, frame: usize, tile: &Tile, active: &ActiveSnapshots) -> Option<TileFate> {
        let case = self.case_of(tile, active);
        if case == BlockCase::Keep || tile.pinned_indexed.load(Ordering::SeqCst) > 0 {
            return None;
        }
        if !self.kept_tiles[frame].load(Ordering::Acquire).is_null() {
            // A tile is kept at this frame from an older block: a walker following a link
            // into it reads this block's tile first (to compare generations), so this one
            // stays until the kept one is gone.
            return None;
        }
        let fate = if case == BlockCase::Reclaim && tile.pinned.load(Ordering::SeqCst) == 0 {
            TileFate::Free
        } else {
            TileFate::Keep
        };
        Some(fate)
    }

    /// After a failed persist (the region's durability is lost, every later commit is
    /// refused): the blocks stay where they are, out of every queue, never freed.
    fn abandon(&self, frozen: Vec<(usize, TileFate)>) {
        for (frame, _) in frozen {
            let tile = self.tile_at(frame).expect("a frozen block has a tile");
            tile.state.store(block_state::QUEUED, Ordering::SeqCst);
        }
    }

    /// F3 for one frozen block: every slot still latest (bit 0) is copied to this thread's
    /// relocation block and its row's newest version switched to the copy, under the
    /// row's latch. `low_water` is D23's bound, computed when first needed. `Ok(false)`: a
    /// record no row links and no burial marked (a row being buried right now) must wait;
    /// fails when the region has no room for a copy. Either way the block stays, and the
    /// versions moved so far stay moved (their slots marked obsolete).
    #[allow(unsafe_code)]
    fn relocate_block(
        &self,
        appender: &mut Appender,
        frame: usize,
        context: &BlockGcContext<'_, TileRow>,
        low_water: &mut Option<u64>,
    ) -> crate::error::Result<bool> {
        let tile = self.tile_at(frame).expect("a frozen block has a tile");
        let used = tile.used.load(Ordering::Relaxed) as usize;
        // Every record that is a key's newest (not superseded, rolled back, replaced,
        // weighed before, nor a commit record), whatever its bit: the bit of a buried
        // row's tombstone is set before `BURIED` is (`mark_dead`).
        let to_weigh = |slot: &usize| {
            let header = &tile.headers[*slot];
            header.end.load(Ordering::Relaxed) == super::LATEST
                && header.flags.load(Ordering::Relaxed) & (ABORTED | WEIGHED | COMMIT_SLOT) == 0
        };
        for slot in (0..used).filter(to_weigh) {
            let header = &tile.headers[slot];
            let bytes = self.record_bytes(tile, slot);
            let RecordScan::Valid(record) =
                layout::decode_record(&bytes, super::block_id(tile.extent))
            else {
                // Only a commit record whose persist failed is unmade (and the region
                // refuses everything since).
                debug_assert!(
                    self.region.has_failed(),
                    "frame {frame} slot {slot} is torn"
                );
                continue;
            };
            if record.kind == RecordKind::Commit {
                continue; // (weighed once the blocks to free are known: `keep_commits`)
            }
            let link = Link::new(frame as u64, tile.generation, slot as u32);
            let table = u32::from(record.table);
            let tombstone = header.flags.load(Ordering::Relaxed) & EXISTS == 0;
            let row = context.rows.arity(table).and_then(|arity| {
                // SAFETY: the payload is a row this storage packed for a table of `arity`
                // columns with every value inline (T3), copied out of a record whose
                // checksum was just verified.
                let values = unsafe { PackedRef::from_stored(record.payload, arity) };
                context.rows.find(table, &RowView::packed(values))
            });
            if let Some(row) = row {
                let mut chain = row.write();
                if !chain.dead && chain.head == link {
                    debug_assert!(
                        chain.pending.is_none(),
                        "a latest version to move is committed"
                    );
                    let begin = header.begin.load(Ordering::Acquire);
                    let flags = if tombstone {
                        layout::RELOCATED_TOMBSTONE
                    } else {
                        0
                    };
                    let next = chain.next(link);
                    chain.head = self.relocated_copy(appender, &record, flags, begin, next)?;
                    // Moved: should this block be put back later (a failure further on),
                    // the slot is not weighed again; and its record, left beside the copy,
                    // is an older record of the key for D23 once the copy is superseded (a
                    // resurrected key in `collections_keep_every_acknowledged_write_...`).
                    self.obsolete_in_dram(link, record.txn_id);
                    header.flags.fetch_or(WEIGHED, Ordering::Relaxed);
                    tile.min_superseded
                        .fetch_min(record.txn_id, Ordering::SeqCst);
                    continue;
                }
            }
            if header.flags.load(Ordering::Acquire) & BURIED == 0 {
                // No row has it as its newest, yet no burial marked it: its row is being
                // buried now (out of the index, `mark_dead` to come under its latch).
                return Ok(false);
            }
            // The tombstone of a buried row (or a copy of one). D23: it may go once nothing
            // older of any key is left in the region; until then a copy no row links keeps
            // it (and counts as obsolete).
            let bound = *low_water.get_or_insert_with(|| self.oldest_superseded());
            if record.txn_id < bound {
                self.counters.add(&self.counters.tombstones_dropped, 1);
            } else {
                let flags = layout::RELOCATED_TOMBSTONE;
                let begin = header.begin.load(Ordering::Acquire);
                let copy = self.relocated_copy(appender, &record, flags, begin, Link::NONE)?;
                let copy_tile = self.tile(copy);
                copy_tile.headers[copy.slot()]
                    .flags
                    .fetch_or(BURIED, Ordering::Relaxed);
                self.obsolete_in_dram(copy, begin);
            }
            // Weighed: not again, should the block be put back.
            header.flags.fetch_or(WEIGHED, Ordering::Relaxed);
        }
        Ok(true)
    }

    /// Copies, out of a block being freed, the commit records of transactions whose
    /// records went to other blocks too, while one of those is still in the region (not
    /// among the `freeing` ones): the commit record is what says those records committed.
    fn keep_commits(
        &self,
        appender: &mut Appender,
        frame: usize,
        freeing: &[(usize, TileFate)],
    ) -> crate::error::Result<()> {
        let tile = self.tile_at(frame).expect("a frozen block has a tile");
        let spans = lock(&tile.spans).clone();
        for (slot, blocks) in spans {
            let bytes = self.record_bytes(tile, slot as usize);
            let RecordScan::Valid(record) =
                layout::decode_record(&bytes, super::block_id(tile.extent))
            else {
                debug_assert!(
                    self.region.has_failed(),
                    "frame {frame} slot {slot} is torn"
                );
                continue;
            };
            debug_assert!(matches!(
                record.kind,
                RecordKind::Commit | RecordKind::Withdrawn
            ));
            if !self.still_vouches(record.kind, &blocks, freeing) {
                continue;
            }
            let copy = self.append_marker(
                appender,
                Target::Relocation,
                (record.kind, record.table, Sequence::Copied(record.sequence)),
                record.txn_id,
                record.payload,
            )?;
            let copy_tile = self.tile(copy);
            lock(&copy_tile.spans).push((copy.slot() as u32, blocks));
            self.counters
                .add(&self.counters.commit_records_relocated, 1);
        }
        Ok(())
    }

    /// Appends a relocated copy of `record` (its table, payload and original id) to this
    /// thread's relocation block, its header committed at `begin` with `next` behind it.
    fn relocated_copy(
        &self,
        appender: &mut Appender,
        record: &layout::Record<'_>,
        flags: u8,
        begin: u64,
        next: Link,
    ) -> crate::error::Result<Link> {
        debug_assert_ne!(begin, super::UNSTAMPED, "a relocated version is committed");
        let moved = self.append_version(
            appender,
            Target::Relocation,
            (RecordKind::Relocated, flags),
            (u32::from(record.table), Sequence::Copied(record.sequence)),
            record.txn_id,
            record.payload,
            next,
        )?;
        self.header(moved).begin.store(begin, Ordering::Release);
        self.counters.add(&self.counters.versions_relocated, 1);
        Ok(moved)
    }

    /// D23's bound: the lowest begin of a superseded committed version in any block of the
    /// region (`u64::MAX` if none). The blocks this collection frees count too, and those
    /// other collections took out of the table without their `FREE` words persisted yet
    /// (`frees_not_durable`): a power loss inside the persist point of those words may keep
    /// one of them (`FROZEN`, with its old records) and lose the tombstone's.
    pub(super) fn oldest_superseded(&self) -> u64 {
        let _scans = lock(&self.table_scans);
        let in_table = (0..self.tiles.len())
            .filter_map(|frame| self.tile_at(frame))
            .map(|tile| tile.min_superseded.load(Ordering::SeqCst));
        let freeing = lock(&self.frees_not_durable)
            .iter()
            .map(|&(_, oldest)| oldest)
            .min();
        in_table.chain(freeing).min().unwrap_or(u64::MAX)
    }

    /// Whether a `kind` record (commit or `Withdrawn`) in a block this collection frees
    /// must be copied, because one of the `blocks` it vouches for (`block_id`s) may still
    /// be in the region after a power loss:
    /// - A commit record says the records in those blocks committed. One in the tile table
    ///   and not among the `freeing` blocks counts (frozen by another thread's collection
    ///   too: its relocation may fail and put it back). One freed with this collection, or
    ///   by another whose `FREE` words are not persisted yet, does not: its latest
    ///   versions were relocated (committed copies) and persisted before any `FREE` word,
    ///   so should a power loss keep it, its records that lose their commit are superseded
    ///   ones, and a record that loses its commit can only lose, never win, a key.
    /// - A `Withdrawn` record says a record is nobody's version; lost while that record's
    ///   block stays, the record would win its key (the highest id). So it stays until the
    ///   block is durably free: in the table, among the `freeing` ones (their `FREE` words
    ///   are persisted in one persist point, of which a power loss keeps any subset), or in
    ///   `frees_not_durable` all count
    ///   (`regression_a_refused_insert_stays_withdrawn_when_a_crash_frees_only_some_blocks`).
    fn still_vouches(
        &self,
        kind: RecordKind,
        blocks: &[u64],
        freeing: &[(usize, TileFate)],
    ) -> bool {
        let withdrawn = kind == RecordKind::Withdrawn;
        let _scans = lock(&self.table_scans);
        let not_durable = lock(&self.frees_not_durable);
        blocks.iter().any(|&id| {
            let frame = (id >> 40) as usize;
            let in_table = self
                .tile_at(frame)
                .is_some_and(|tile| super::block_id(tile.extent) == id);
            let freed_now = freeing.iter().any(|&(f, _)| f == frame);
            if withdrawn {
                in_table || not_durable.iter().any(|&(freed, _)| freed == id)
            } else {
                in_table && !freed_now
            }
        })
    }

    /// Frees the kept tiles of `kept` that nothing reaches and no snapshot may walk any
    /// more (their long transactions ended: the block is in case 1 now); the others stay.
    #[allow(unsafe_code)]
    fn free_kept_tiles(&self, kept: &mut Vec<usize>, active: &ActiveSnapshots) {
        kept.retain(|&frame| {
            let tile = self.kept_tiles[frame].load(Ordering::Acquire);
            // SAFETY: a kept tile is freed only here, by the thread whose list held its
            // frame, which is this one.
            let tile_ref = unsafe { &*tile };
            let free = tile_ref.pinned.load(Ordering::SeqCst) == 0
                && self.case_of(tile_ref, active) == BlockCase::Reclaim;
            if free {
                self.kept_tiles[frame].store(std::ptr::null_mut(), Ordering::Release);
                // SAFETY: from `Box::into_raw` in `collect_queue`, out of the table now.
                drop(unsafe { Box::from_raw(tile) });
                self.counters.add(&self.counters.kept_tiles_freed, 1);
            }
            !free
        });
    }

    /// The blocks' counters now.
    pub(super) fn block_stats(&self) -> crate::pmem::BlockStats {
        let c = &self.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let live = self
            .tiles
            .iter()
            .filter(|t| !t.load(Ordering::Relaxed).is_null())
            .count() as u64;
        let kept = self
            .kept_tiles
            .iter()
            .filter(|t| !t.load(Ordering::Relaxed).is_null())
            .count() as u64;
        let g = self.space.geometry();
        let free = self.space.free_frames();
        let (version_indexes, version_index_bytes) = self.index_sizes();
        crate::pmem::BlockStats {
            blocks_freed_indexed: get(&c.blocks_freed_indexed),
            version_indexes,
            version_index_bytes,
            version_indexes_built: get(&c.indexes_built),
            version_index_entries: get(&c.index_entries),
            index_links_switched: get(&c.index_links_switched),
            index_entries_refreshed: get(&c.index_entries_refreshed),
            version_indexes_freed: get(&c.indexes_freed),
            consolidations_refused: get(&c.consolidations_refused),
            frame_bytes: g.frame_bytes,
            frames_free: free,
            frames_in_use: g.frame_count - free,
            tiles: live + kept,
            tiles_kept: kept,
            tile_bytes: (live + kept) * Tile::bytes(self.slots_per_block),
            blocks_sealed: get(&c.blocks_sealed),
            collections: get(&c.collections),
            blocks_freed: get(&c.blocks_freed),
            blocks_freed_tile_kept: get(&c.blocks_freed_tile_kept),
            kept_tiles_freed: get(&c.kept_tiles_freed),
            blocks_requeued: get(&c.blocks_requeued),
            versions_relocated: get(&c.versions_relocated),
            tombstones_dropped: get(&c.tombstones_dropped),
            commit_records_relocated: get(&c.commit_records_relocated),
        }
    }
}
