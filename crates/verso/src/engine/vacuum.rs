//! Tuple-level garbage collection (Wu et al. §5.1), the mechanism behind the 'vac' and
//! 'coop' collectors (`gc/vacuum.rs`, `gc/cooperative.rs` say when and what).
//!
//! # Definitions
//! - A table's **blocks**: its rows fall into [`BLOCKS`] blocks by the hash of their
//!   primary key; each block lists the row objects it holds (the "heap" a vacuum scans:
//!   Verso's rows live in their own allocations, found through the indexes, so the table
//!   keeps this list for the collector).
//! - The **dirty bitmap**: one bit per block, set when a row of the block was written since
//!   a pass last examined it.
//! - **Vacuuming a row** (under its exclusive latch): unlink every version no snapshot at
//!   or after the bound applies, remove the secondary entries only those had, and bury the
//!   row if no snapshot can see it any more.
//! - The **recorded** rows ('coop'): rows a reader or writer walked past an obsolete
//!   version in, listed per table for the cleaner.
//!
//! # Invariants
//! - Every row object that is in the table's primary index is in its block's list (it is
//!   listed right after it is indexed, and leaves the list only once it is buried).
//! - With dirty bits ('vac'): a row holding a version record, or not yet buried although
//!   no snapshot sees it, is in a dirty block, or in a block a pass is examining and will
//!   mark dirty again. (A write sets the bit after installing; a pass clears the bit
//!   before examining the rows, and sets it again if a row it leaves still holds any.)
//!
//! # Key operations
//! - [`TupleGc::register`] (insert of a new row object), [`TupleGc::mark_dirty`] (every
//!   write), [`TupleGc::record`] ('coop' traversals).
//! - [`vacuum_round`]: the background thread's round: 'vac' vacuums the dirty blocks;
//!   'coop' cleans the recorded rows, and every so often vacuums every block.
//! - [`vacuum_everything`]: every block of every table at the exact watermark
//!   (`Database::collect_garbage`).

use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::Mutex;

use crate::engine::collect::reclaim_row;
use crate::engine::{Engine, RowRef, Table};
use crate::gc::Collector;
use crate::stats::{Counter, SlotStats};
use crate::sync::AtomicU64;
use crate::txn::slots::LocalSlot;
use crate::version::{ChainEdit, VersionStorage};
use crate::VersionRemoval;

/// Blocks per table.
pub(crate) const BLOCKS: usize = 1024;
const BLOCK_SHIFT: u32 = 64 - BLOCKS.trailing_zeros();

/// A table's rows in blocks, with the dirty bitmap and the recorded rows.
pub(crate) struct TupleGc<R> {
    blocks: Box<[Mutex<Vec<R>>]>,
    dirty: Box<[AtomicU64]>,
    recorded: Mutex<Vec<R>>,
}

/// Which blocks a pass examines.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Only blocks whose dirty bit is set ('vac').
    Dirty,
    /// Every block (dusty corners, `collect_garbage`).
    Full,
}

impl<R> TupleGc<R> {
    pub(crate) fn new() -> Self {
        TupleGc {
            blocks: (0..BLOCKS).map(|_| Mutex::new(Vec::new())).collect(),
            dirty: (0..BLOCKS / 64).map(|_| AtomicU64::new(0)).collect(),
            recorded: Mutex::new(Vec::new()),
        }
    }

    /// The block of the row with this encoded primary key.
    fn block_of(key: &[u8]) -> usize {
        use std::hash::BuildHasher;
        let hash = foldhash::fast::FixedState::with_seed(0x5eed_b10c).hash_one(key);
        (hash >> BLOCK_SHIFT) as usize
    }

    /// Lists a row object just indexed under `key`, and marks its block dirty (its insert
    /// record, or its rollback, is for a pass to settle).
    pub(crate) fn register(&self, key: &[u8], row: R) {
        let block = Self::block_of(key);
        self.blocks[block].lock().push(row);
        self.set_dirty(block);
    }

    /// Marks the block of the row under `key` dirty (after a write to it).
    pub(crate) fn mark_dirty(&self, key: &[u8]) {
        self.set_dirty(Self::block_of(key));
    }

    fn set_dirty(&self, block: usize) {
        let word = &self.dirty[block / 64];
        let bit = 1u64 << (block % 64);
        // A load first: under a busy workload the bit is mostly set already, and a
        // read-only check keeps the line shared between the writers.
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::SeqCst);
        }
    }

    /// Clears the block's bit; returns whether it was set.
    fn take_dirty(&self, block: usize) -> bool {
        let bit = 1u64 << (block % 64);
        self.dirty[block / 64].fetch_and(!bit, Ordering::SeqCst) & bit != 0
    }

    /// Records a row for the cleaner ('coop'; the caller claimed it).
    pub(crate) fn record(&self, row: R) {
        self.recorded.lock().push(row);
    }

    /// Rows listed in all blocks (for tests and assertions).
    #[cfg(test)]
    pub(crate) fn listed(&self) -> usize {
        self.blocks.iter().map(|b| b.lock().len()).sum()
    }
}

/// Vacuums one row under its latch ([`reclaim_row`]). Returns whether it stays listed
/// (not buried) and whether it still holds something for a later pass.
fn vacuum_row<V: VersionStorage>(
    table: &Table<V>,
    row: &RowRef<V>,
    removal: VersionRemoval,
    bound: u64,
    stats: &SlotStats,
    entry: &mut Vec<u8>,
) -> (bool, bool) {
    V::edit(row, |chain| {
        if chain.is_dead() {
            return (false, false); // buried by a rollback: only the list still held it
        }
        stats.add(Counter::RowsVacuumed, 1);
        let reclaimed = reclaim_row(removal, table, row, chain, bound, stats, entry);
        (!reclaimed.buried, reclaimed.holds)
    })
}

/// Vacuums the blocks of one table that `pass` selects. Returns (examined, skipped).
fn vacuum_table<V: VersionStorage>(
    table: &Table<V>,
    gc: &TupleGc<RowRef<V>>,
    removal: VersionRemoval,
    bound: u64,
    pass: Pass,
    stats: &SlotStats,
) -> (u64, u64) {
    let (mut examined, mut skipped) = (0, 0);
    let mut entry = Vec::new();
    for block in 0..BLOCKS {
        // Cleared before the rows are examined: a write after this sets it again.
        let was_dirty = gc.take_dirty(block);
        if pass == Pass::Dirty && !was_dirty {
            skipped += 1;
            continue;
        }
        examined += 1;
        let mut still_dirty = false;
        gc.blocks[block].lock().retain(|row| {
            let (listed, holds) = vacuum_row(table, row, removal, bound, stats, &mut entry);
            still_dirty |= holds;
            listed
        });
        if still_dirty {
            gc.set_dirty(block);
        }
    }
    (examined, skipped)
}

/// A pass over every table.
fn vacuum_tables<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    bound: u64,
    pass: Pass,
    stats: &SlotStats,
) {
    let (mut examined, mut skipped) = (0, 0);
    for table in engine.tables() {
        let gc = table
            .tuple_gc
            .as_ref()
            .expect("tuple-level collectors list rows");
        let (e, s) = vacuum_table(table, gc, engine.version_removal, bound, pass, stats);
        examined += e;
        skipped += s;
    }
    stats.add(Counter::VacuumPasses, 1);
    stats.add(Counter::BlocksVacuumed, examined);
    stats.add(Counter::BlocksSkippedClean, skipped);
}

/// 'coop': cleans every row recorded since the last round.
fn clean_recorded<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    bound: u64,
    stats: &SlotStats,
) {
    let mut cleaned = 0;
    let mut entry = Vec::new();
    for table in engine.tables() {
        let gc = table
            .tuple_gc
            .as_ref()
            .expect("tuple-level collectors list rows");
        let recorded = std::mem::take(&mut *gc.recorded.lock());
        for row in recorded {
            // Released first: a walk after the cleaning may record the row again.
            V::release_from_cleaning(&row);
            // A buried row stays listed in its block until a pass drops it.
            vacuum_row(
                table,
                &row,
                engine.version_removal,
                bound,
                stats,
                &mut entry,
            );
            cleaned += 1;
        }
    }
    stats.add(Counter::RowsCleanedCooperatively, cleaned);
}

/// The tuple-level collector thread's round (every period).
pub(crate) fn vacuum_round<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<crate::engine::WrittenRow<V>>,
    round: u64,
) {
    let started = Instant::now();
    let stats = &local.slot.stats;
    let bound = engine.gc.reclaim_bound(&engine.txns);
    if G::COOPERATIVE {
        clean_recorded(engine, bound, stats);
        if G::FULL_PASS_EVERY_ROUNDS > 0 && round % G::FULL_PASS_EVERY_ROUNDS == 0 {
            vacuum_tables(engine, bound, Pass::Full, stats);
        }
    } else {
        debug_assert!(G::DIRTY_BLOCKS);
        vacuum_tables(engine, bound, Pass::Dirty, stats);
    }
    stats.add(Counter::GcNanos, started.elapsed().as_nanos() as u64);
}

/// Every block of every table (and every recorded row) at `bound`
/// (`Database::collect_garbage`, with the exact watermark).
pub(crate) fn vacuum_everything<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    bound: u64,
    stats: &SlotStats,
) {
    if G::COOPERATIVE {
        clean_recorded(engine, bound, stats);
    }
    vacuum_tables(engine, bound, Pass::Full, stats);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{TupleGc, BLOCKS};

    /// A block's bit is set by a write to any of its rows and cleared by taking it; rows
    /// are listed in the block of their key.
    #[test]
    fn dirty_bits_follow_the_keys_blocks() {
        let gc: TupleGc<u32> = TupleGc::new();
        assert!((0..BLOCKS).all(|b| !gc.take_dirty(b)));
        gc.register(b"alpha", 1);
        gc.register(b"beta", 2);
        assert_eq!(gc.listed(), 2);
        let alpha = TupleGc::<u32>::block_of(b"alpha");
        assert!(gc.take_dirty(alpha));
        assert!(!gc.take_dirty(alpha), "taking clears");
        gc.mark_dirty(b"alpha");
        let dirty: Vec<usize> = (0..BLOCKS).filter(|&b| gc.take_dirty(b)).collect();
        let beta = TupleGc::<u32>::block_of(b"beta");
        let mut expected = vec![alpha, beta];
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(dirty, expected);
        // Keys spread over the blocks.
        let used: std::collections::HashSet<usize> = (0u32..10_000)
            .map(|i| TupleGc::<u32>::block_of(&i.to_be_bytes()))
            .collect();
        assert!(used.len() > BLOCKS * 9 / 10, "{} blocks used", used.len());
    }
}
