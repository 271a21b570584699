//! Delta (undo-log) version storage, newest to oldest: the design of HyPer and Steam.
//!
//! The newest version of a row, committed or not, lives in place in the [`DeltaRow`]. Each
//! write links a [`VersionRecord`] at the head of the row's chain holding the *before-images*
//! of only the columns it changed and an attribute mask (Steam Table 3). A reader copies the
//! in-place values and walks the chain, applying before-images, until it reaches a record
//! whose change it can see.
//!
//! Definitions (record `R_i`, newest first, `C_i` its commit timestamp):
//! - `R_i` undoes the change that transaction `T_i` made; a snapshot `S` applies `R_i`
//!   exactly when it cannot see `T_i` (`T_i` uncommitted, or `C_i >= S`).
//! - Committed timestamps strictly decrease along the chain; at most one record is
//!   uncommitted, and it is the head.
//! - A committed insert does not keep its record: when it is stamped and it is the tail of
//!   the chain (nothing older to undo into), it folds into the row's `born` timestamp, a
//!   virtual tail record "the row did not exist before `born`". So rows inserted behind a
//!   long snapshot pin no version records (found by the lab's TPC-B run,
//!   `regression_inserts_behind_a_held_snapshot_do_not_pin_version_records`). `born` is
//!   older than every record in the chain.
//!
//! Concurrency: everything about a row, the in-place values and the whole chain, is guarded
//! by the row's reader-writer latch. Readers hold it shared while they walk; writers, the
//! pruner and the collector hold it exclusively while they link or unlink records. A record
//! is reachable only through its chain, so once it is unlinked under the exclusive latch no
//! reader can reach it and it is freed at once: the latch is the grace period. Stamping at
//! commit takes the exclusive latch too (it lets go of the record's owner and may fold an
//! insert), so nothing is written under a shared latch; a record's timestamp and the row's
//! copy of the head's (`head_ts`) are atomics all the same, which costs a reader nothing.

use std::sync::atomic::Ordering;

use crate::sync::{Arc, AtomicU64, Latch, ReadGuard, WriteGuard};

use crate::row::{self, tail_classes, Cell, InPlaceRow, NonInline, PackedRow, RowView, ValueRef};
use crate::schema::ColumnMask;
use crate::txn::state::{TxnOutcome, TxnShared, MAX_TIMESTAMP};
use crate::value::Value;
use crate::version::{
    ActiveSnapshots, ChainEdit, Created, GoneVersion, NoExact, PruneReport, ReadCost,
    RollbackReport, Snapshot, StampReport, VersionStorage, WriteIntent, WriteResult,
};

/// `ts` of a record whose transaction has not stamped it yet.
const UNSTAMPED: u64 = u64::MAX;

/// One row: its newest state in place, and the chain of before-images behind it.
///
/// `D` is the tail that holds the newest values: `[u8]` for a stored row, whose tail was
/// sized (see [`TAIL_CLASSES`]) when the row was created, so the latch, the chain's head
/// and the values share one allocation.
pub(crate) struct DeltaRow<D: ?Sized + AsRef<[u8]> = [u8]> {
    /// The concurrency-control protocol's row word (`VersionStorage::cc_word`).
    cc: AtomicU64,
    latch: Latch<RowState<D>>,
}

pub(crate) struct RowState<D: ?Sized + AsRef<[u8]> = [u8]> {
    /// Whether the newest state is a live row (false: deleted, or inserted and rolled back).
    exists: bool,
    /// Set once the collector has removed the row from the indexes; a writer that still
    /// finds it must look the key up again.
    dead: bool,
    /// Commit timestamp of the insert folded into the row (see the module notes): a
    /// snapshot at or before it, having undone the whole chain, sees no row. `NOT_BORN`
    /// when no insert was folded (the chain says everything).
    born: u64,
    /// Number of records in the chain, kept as records are linked and unlinked so that
    /// knowing the length costs nothing (a walk made every write to a long chain slow:
    /// `regression_writes_to_a_long_chain_do_not_walk_it`).
    /// (32 bits: a chain of four billion records would not fit in memory; the header word
    /// it saves counts in every row.)
    records: u32,
    head: Option<Box<VersionRecord>>,
    /// The head record's commit timestamp once its transaction stamped it, else `UNSTAMPED`
    /// (also with no head): a copy in the row's own cache line, so that a reader whose
    /// snapshot sees the head, and a writer that finds it committed, decide so without
    /// touching the record. Behind a long snapshot every row keeps its last writer's record
    /// at the head, allocated when that row was last written, so it is cold: reading it cost
    /// TPC-B with a held snapshot 172 samples per million commits of 1,824 (`docs/lab.md`).
    ///
    /// Invariant: `UNSTAMPED` or equal to the head's `ts`. Everything that changes the head
    /// or its `ts`, under the exclusive latch, copies it again (`head_changed`): a write, a
    /// stamp, a prune, a truncation, a rollback.
    head_ts: AtomicU64,
    /// The address of the record behind the head (0 if there is none): a prefetch hint, so
    /// that a reader who asks for the head can ask for the record behind it at the same
    /// time instead of after the head arrives. Behind a long snapshot an updated row's
    /// chain is its last writer's record and the snapshot's record; the write and its
    /// eager prune read both, and both are cold. Asking for the second only once the head
    /// had arrived left the head's miss in the write: 244 samples per million commits of
    /// 3,039 in TPC-B with a held snapshot (`docs/lab.md`).
    ///
    /// Invariant: the address of `head.next`, or 0 when there is no such record. Like
    /// `head_ts` it is set again by `head_changed`, which everything that links or unlinks
    /// a record calls under the exclusive latch, and checked where `head_ts` is. Nothing's
    /// correctness rests on it: it is only ever passed to a prefetch, which reads nothing
    /// and would be harmless on a stale address (`prefetch.rs`).
    next_hint: usize,
    /// The newest values (possibly written by a transaction that has not committed). Last,
    /// because it holds the unsized tail.
    values: InPlaceRow<D>,
}

/// The tail classes, for documentation and tests.
#[allow(dead_code)]
const TAIL_CLASSES: &[usize] = {
    macro_rules! list {
        ($($class:literal)*) => { &[$($class),*] };
    }
    tail_classes!(list)
};

/// A new row holding `values`, with its insert record `head`, in the smallest tail class
/// that fits them.
fn allocate_row(
    values: &[Value],
    head: Box<VersionRecord>,
    non_inline: NonInline,
) -> Arc<DeltaRow> {
    let needed = row::packed_len_of(values, non_inline);
    macro_rules! smallest_fitting {
        ($($class:literal)*) => {
            $(
                if needed <= $class {
                    return row_with_tail::<$class>(values, head, non_inline);
                }
            )*
        };
    }
    tail_classes!(smallest_fitting);
    row_with_tail::<0>(values, head, non_inline) // beyond every class: the values spill
}

fn row_with_tail<const N: usize>(
    values: &[Value],
    head: Box<VersionRecord>,
    non_inline: NonInline,
) -> Arc<DeltaRow> {
    let state = RowState::<[u8; N]> {
        exists: true,
        dead: false,
        born: NOT_BORN,
        records: 1,
        head: Some(head),
        head_ts: AtomicU64::new(UNSTAMPED),
        next_hint: 0, // an insert record has nothing behind it
        values: InPlaceRow::new(values, non_inline),
    };
    #[cfg(not(loom))]
    let row: Arc<DeltaRow> = Arc::new(DeltaRow {
        cc: AtomicU64::new(0),
        latch: Latch::new(state),
    });
    #[cfg(loom)]
    let row: Arc<DeltaRow> = Arc::new(DeltaRow {
        cc: AtomicU64::new(0),
        latch: Latch::from_box(Box::new(state)),
    });
    row
}

/// `born` of a row whose insert is not folded (timestamps start at 1).
const NOT_BORN: u64 = 0;

impl RowState {
    /// Whether `snapshot`, having undone every record of the chain, still sees the row
    /// exist (as far as its birth goes).
    fn born_before(&self, snapshot: &Snapshot<'_>) -> bool {
        self.born == NOT_BORN || self.born < snapshot.start_ts
    }

    /// The head's commit timestamp if its copy in the row says it is stamped.
    fn stamped_head_ts(&self) -> Option<u64> {
        let ts = self.head_ts.load(Ordering::Acquire);
        debug_assert!(
            ts == UNSTAMPED
                || self
                    .head
                    .as_deref()
                    .is_some_and(|head| head.ts.load(Ordering::Acquire) == ts),
            "the row's copy of the head's timestamp follows the head"
        );
        debug_assert_eq!(
            self.next_hint,
            self.next_address(),
            "the prefetch hint names the record behind the head"
        );
        (ts != UNSTAMPED).then_some(ts)
    }

    /// Re-establishes `head_ts` and `next_hint` after the chain changed under the exclusive
    /// latch (the new head, if any, was just touched by whatever changed it).
    fn head_changed(&mut self) {
        let head = self.head.as_deref();
        let ts = head.map_or(UNSTAMPED, |head| head.ts.load(Ordering::Acquire));
        self.head_ts.store(ts, Ordering::Release);
        self.next_hint = self.next_address();
    }

    /// The address of the record behind the head, or 0 (what `next_hint` holds).
    fn next_address(&self) -> usize {
        self.head
            .as_deref()
            .and_then(|head| head.next.as_deref())
            .map_or(0, |next| std::ptr::from_ref(next) as usize)
    }

    /// Asks the processor for the head record and the one behind it, both at once (see
    /// `next_hint`): a hint with no effect on what anything reads.
    #[inline(always)]
    fn prefetch_head_and_next(&self) {
        if let Some(head) = self.head.as_deref() {
            crate::prefetch::prefetch_object(head);
        }
        if self.next_hint != 0 {
            crate::prefetch::prefetch_object_at(self.next_hint);
        }
    }
}

/// A before-image: what the row looked like before one transaction's change.
pub(crate) struct VersionRecord {
    /// Commit timestamp of the transaction whose change this undoes, or `UNSTAMPED`.
    ts: AtomicU64,
    /// That transaction, consulted while the record is unstamped; let go when its
    /// transaction stamps it.
    ///
    /// Invariant: `None` only once `ts` is stamped. Stamping lets go of it under the
    /// exclusive latch, on the committing thread, while its counts are still in that
    /// thread's cache: a record that outlives its commit (behind a long snapshot, for
    /// seconds) does not keep its transaction's state alive, nor drop it later, cold and
    /// often on another thread (`stamping_lets_go_of_the_transaction`).
    owner: Option<Arc<TxnShared>>,
    /// Whether the row existed before the change.
    before_exists: bool,
    /// The columns this record holds before-images of.
    mask: ColumnMask,
    /// Before-images of the masked columns, in ascending column order.
    before: PackedRow,
    next: Option<Box<VersionRecord>>,
}

impl VersionRecord {
    /// The commit timestamp of the change this record undoes, if it committed.
    fn commit_ts(&self) -> Option<u64> {
        let ts = self.ts.load(Ordering::Acquire);
        if ts != UNSTAMPED {
            debug_assert!(ts <= MAX_TIMESTAMP);
            return Some(ts);
        }
        let owner = self
            .owner
            .as_deref()
            .expect("an unstamped record keeps its transaction");
        match owner.outcome() {
            TxnOutcome::Committed(ts) => Some(ts),
            TxnOutcome::Uncommitted => None,
        }
    }

    /// Whether `owner`'s change is the one this record undoes (never, once stamped).
    fn is_owned_by(&self, owner: &Arc<TxnShared>) -> bool {
        self.owner
            .as_ref()
            .is_some_and(|mine| Arc::ptr_eq(mine, owner))
    }

    /// Whether `snapshot` sees the change this record undoes (so it stops here).
    fn change_visible_to(&self, snapshot: &Snapshot<'_>) -> bool {
        let mine = snapshot
            .owner
            .zip(self.owner.as_deref())
            .is_some_and(|(me, owner)| std::ptr::eq(me, owner));
        if mine {
            return true;
        }
        self.commit_ts().is_some_and(|ts| ts < snapshot.start_ts)
    }

    /// Undoes this record's change on a reconstructed row.
    fn apply_to<'a>(&'a self, values: &mut [ValueRef<'a>], exists: &mut bool) {
        for (slot, column) in self.mask.iter().enumerate() {
            values[column] = self.before.get(slot);
        }
        *exists = self.before_exists;
    }

    /// Bytes this record occupies (header, inline before-images, and any spilled ones).
    fn footprint(&self) -> usize {
        std::mem::size_of::<VersionRecord>() + self.before.heap_bytes()
    }

    /// The before-image of `column`, as a cell of a row being packed from it (an
    /// out-of-line value is shared or copied as it is, not packed anew).
    fn before_cell(&self, column: usize) -> Option<Cell<'_>> {
        self.mask
            .contains(column)
            .then(|| self.before.packed().cell(self.mask.rank(column)))
    }
}

impl<D: ?Sized + AsRef<[u8]>> Drop for RowState<D> {
    fn drop(&mut self) {
        free_chain(self.head.take());
    }
}

/// Asks the processor for the record behind `record`, if any: a hint with no effect on what
/// anything reads.
#[inline(always)]
fn prefetch_next(record: &VersionRecord) {
    if let Some(next) = record.next.as_deref() {
        crate::prefetch::prefetch_object(next);
    }
}

/// A number of records as the row counts them.
fn record_count(count: usize) -> u32 {
    u32::try_from(count).expect("a chain holds fewer than 2^32 records")
}

/// Length of a chain by walking it (for assertions; the row keeps the count).
fn walk_len(mut cursor: Option<&VersionRecord>) -> usize {
    let mut len = 0;
    while let Some(record) = cursor {
        len += 1;
        cursor = record.next.as_deref();
    }
    len
}

/// Frees a chain iteratively: a recursive drop of a 100,000-record chain (what the
/// watermark collector builds behind a long reader) would overflow the stack.
fn free_chain(mut cursor: Option<Box<VersionRecord>>) -> (usize, usize) {
    let (mut count, mut bytes) = (0, 0);
    while let Some(mut record) = cursor {
        cursor = record.next.take();
        count += 1;
        bytes += record.footprint();
        spare_records::give_back(record);
    }
    (count, bytes)
}

/// A few records this thread unlinked, kept to hold its next new records.
///
/// Why: behind a long snapshot, every write to a row with Steam's eager pruning links one
/// record and unlinks one (the previous commit's, merged into the snapshot's). The unlinked
/// record was allocated long ago, often by another thread: freeing it is a cross-thread free,
/// and the allocator hands out cold blocks for the new one. In TPC-B with a held snapshot
/// the allocator's paths took 270 more samples per million commits than without it, of
/// 2,104 (`docs/lab.md`). Reusing the block just unlinked, which the pruner has in its
/// cache, costs neither.
///
/// Invariants: a spare record is in no chain (its `next` is `None`), and nothing reads it;
/// its before-images and its owner (if it was unlinked unstamped) are dropped when it is kept,
/// so it holds nothing but its own block. A thread keeps at most [`spare_records::KEEP`] of
/// them. No block of a memory space (Wu et al. §4.4) is kept, and none is served while the
/// thread allocates in a space: those records must come from its space.
mod spare_records {
    use super::VersionRecord;
    #[cfg(not(loom))]
    use std::cell::RefCell;

    /// Spare records a thread keeps; beyond it, records go back to the allocator. A write
    /// links one and a prune unlinks about one, so a handful absorbs the imbalance of a
    /// transaction; a truncation of a long chain frees the rest normally.
    #[cfg(not(loom))]
    pub(super) const KEEP: usize = 8;

    #[cfg(not(loom))]
    thread_local! {
        // The boxes are the point: each is an allocation kept for a new record.
        #[allow(clippy::vec_box)]
        static SPARE: RefCell<Vec<Box<VersionRecord>>> = const { RefCell::new(Vec::new()) };
    }

    /// `record` in a box: a spare one's, or a new one.
    #[inline]
    pub(super) fn boxed(record: VersionRecord) -> Box<VersionRecord> {
        match take() {
            Some(mut spare) => {
                *spare = record;
                spare
            }
            None => Box::new(record),
        }
    }

    #[cfg(not(loom))]
    fn take() -> Option<Box<VersionRecord>> {
        if crate::memory_spaces::allocating_in_a_space() {
            return None;
        }
        // `try_with`: the thread's cache may be gone while the thread exits.
        SPARE
            .try_with(|spare| spare.borrow_mut().pop())
            .ok()
            .flatten()
    }

    /// Loom models: no thread-local cache (the model checks the chains, not the allocator).
    #[cfg(loom)]
    fn take() -> Option<Box<VersionRecord>> {
        None
    }

    /// Keeps an unlinked record for a later write, or frees it.
    #[inline]
    pub(super) fn give_back(record: Box<VersionRecord>) {
        debug_assert!(record.next.is_none(), "a spare record is in no chain");
        #[cfg(not(loom))]
        {
            if crate::memory_spaces::in_a_space(std::ptr::from_ref(&*record) as usize) {
                return; // a space's block goes back to its space
            }
            let mut record = Some(record);
            let _ = SPARE.try_with(|spare| {
                let mut spare = spare.borrow_mut();
                if spare.len() < KEEP {
                    if spare.capacity() == 0 {
                        spare.reserve_exact(KEEP);
                    }
                    let mut kept = record.take().expect("not kept yet");
                    // Its before-images are freed now, as the caller counts them. A stamped
                    // record has let go of its owner already; one unlinked before its stamp
                    // (a rollback's, or one the pruner merged away) lets go now.
                    kept.before = super::PackedRow::empty();
                    kept.owner = None;
                    spare.push(kept);
                }
            });
            drop(record); // not kept: freed
        }
        #[cfg(loom)]
        drop(record);
    }

    /// How many spare records the calling thread keeps (tests).
    #[cfg(all(test, not(loom)))]
    pub(super) fn kept() -> usize {
        SPARE.with(|spare| spare.borrow().len())
    }
}

/// The delta storage design.
pub(crate) struct DeltaStorage;

impl DeltaRow {
    fn read(&self) -> ReadGuard<'_, RowState> {
        self.latch.read()
    }

    fn write(&self) -> WriteGuard<'_, RowState> {
        self.latch.write()
    }
}

impl VersionStorage for DeltaStorage {
    type Row = DeltaRow;
    type Chain = RowState;
    type Guard<'a> = WriteGuard<'a, RowState>;
    type Exact = NoExact;
    const NAME: &'static str = "delta";

    crate::version::heap_storage_shared!();

    fn read<R>(
        row: &DeltaRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let state = row.read();
        let newest = || state.exists.then(|| RowView::packed(state.values.packed()));
        let Some(head) = state.head.as_deref() else {
            let seen = newest().filter(|_| state.born_before(snapshot));
            return (reader(seen), ReadCost::default());
        };
        let seen_in_place = ReadCost {
            walked: 1,
            reconstruct_nanos: 0,
            passed_obsolete: false,
        };
        if state
            .stamped_head_ts()
            .is_some_and(|ts| ts < snapshot.start_ts)
        {
            // The snapshot sees the head, decided from the row alone (a stamped head's
            // transaction has ended, so it is not the snapshot's own). A reader that sees
            // the head may be about to update the row (a read, then a write), and with a long
            // snapshot alive that write's eager pruning reads the head and the record behind
            // it: ask for both now so that their misses overlap each other and the work in
            // between.
            state.prefetch_head_and_next();
            return (reader(newest()), seen_in_place);
        }
        if head.change_visible_to(snapshot) {
            // A reader that sees the head may be about to update the row (a read, then a
            // write), and with a long snapshot alive that write's eager pruning reads the
            // record behind the head (the long snapshot's): ask for it now so that its miss
            // overlaps the work in between instead of following the head's. A reader that
            // writes nothing wastes one line fetch, and only on a chain of two or more.
            prefetch_next(head);
            return (reader(newest()), seen_in_place);
        }
        // Reconstruct: start from the newest values and undo invisible changes, borrowing
        // every value from the row or its records (all pinned by the latch).
        let started = std::time::Instant::now();
        let mut values: Vec<ValueRef<'_>> = (0..state.values.arity())
            .map(|i| state.values.get(i))
            .collect();
        let mut exists = state.exists;
        let mut walked = 0;
        let mut cursor = Some(head);
        while let Some(record) = cursor {
            walked += 1;
            if record.change_visible_to(snapshot) {
                break;
            }
            record.apply_to(&mut values, &mut exists);
            cursor = record.next.as_deref();
        }
        if cursor.is_none() && !state.born_before(snapshot) {
            exists = false; // undid the whole chain: before the row's birth
        }
        let cost = ReadCost {
            walked,
            reconstruct_nanos: started.elapsed().as_nanos() as u64,
            passed_obsolete: false,
        };
        (
            reader(exists.then(|| RowView::reconstructed(&values))),
            cost,
        )
    }

    fn write<'a>(
        row: &'a DeltaRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, RowState>> {
        let mut state = row.write();
        if state.dead {
            return WriteResult::RowGone;
        }
        // The pruner after this write reads the head and the record behind it (see `read`);
        // a stamped head is decided from the row's copy of its timestamp, so this write
        // itself need not wait for either.
        state.prefetch_head_and_next();
        let head = state.head.as_deref();
        let stamped_head_ts = state.stamped_head_ts();
        // A stamped head's transaction has ended: it is not this one.
        let mine = stamped_head_ts.is_none() && head.is_some_and(|head| head.is_owned_by(owner));
        // The newest committed change: the head record's, or with no record left the folded
        // insert's (its birth; `NOT_BORN` is 0, below every snapshot).
        let newest_commit_ts = || match state.head.as_deref() {
            Some(_) if stamped_head_ts.is_some() => stamped_head_ts,
            Some(head) => head.commit_ts(),
            None => Some(state.born),
        };
        // The in-place state is this transaction's view of the row once the rules pass.
        if let Some(refused) =
            super::refuse_write(mine, newest_commit_ts, state.exists, snapshot, &intent)
        {
            return refused;
        }
        let arity = state.values.arity();
        let changed = match &intent {
            WriteIntent::Update(mask, _) => *mask,
            WriteIntent::Delete => ColumnMask::EMPTY,
            WriteIntent::Insert(_) => ColumnMask::all(arity),
        };
        let mut created_bytes = 0usize;
        let new_record = !mine;
        // Whatever this transaction had in place, even a deleted row's values: their index
        // entries may be needed by no version once they are overwritten.
        let replaced = mine.then(|| GoneVersion::untagged(state.values.to_packed()));
        if mine {
            // Extend this transaction's own record with before-images of newly touched
            // columns: one record per row per transaction.
            let state = &mut *state;
            let head = state.head.as_deref_mut().expect("own head exists");
            let missing = changed.difference(head.mask);
            if !missing.is_empty() {
                let old_bytes = head.footprint();
                let mask = head.mask.union(missing);
                let before = PackedRow::project(mask, |column| {
                    head.before_cell(column)
                        .unwrap_or_else(|| state.values.cell(column))
                });
                head.mask = mask;
                head.before = before;
                created_bytes += head.footprint() - old_bytes;
            }
        } else {
            let before = PackedRow::project(changed, |column| state.values.cell(column));
            let record = spare_records::boxed(VersionRecord {
                ts: AtomicU64::new(UNSTAMPED),
                owner: Some(Arc::clone(owner)),
                before_exists: state.exists,
                mask: changed,
                before,
                next: state.head.take(),
            });
            created_bytes += record.footprint();
            state.head = Some(record);
            state.head_changed();
            state.records += 1;
        }
        match intent {
            WriteIntent::Update(_, assignments) => {
                state.values.apply_changes(assignments, non_inline);
            }
            WriteIntent::Delete => state.exists = false,
            WriteIntent::Insert(values) => {
                debug_assert_eq!(values.len(), arity);
                state.values.set_values(values, non_inline);
                state.exists = true;
            }
        }
        WriteResult::Installed {
            chain: state,
            new_record,
            created: Created {
                records: usize::from(new_record),
                bytes: created_bytes,
            },
            replaced,
        }
    }

    fn stamp(row: &DeltaRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        // The record is usually the head, but once the owner's state says "committed" a
        // writer may install on top of it, and the pruner may even merge it away or fold it
        // into an older survivor whose timestamp it then sets; so look for it, and stamp
        // only a record that is still unstamped. Under the exclusive latch the record lets go
        // of its owner (see `VersionRecord::owner`) and a committed insert folds.
        let mut guard = row.write();
        let state = &mut *guard;
        let mut link = &mut state.head;
        loop {
            let Some(record) = link.as_deref() else {
                return StampReport::default(); // merged away by the pruner
            };
            if record.is_owned_by(owner) {
                break;
            }
            link = &mut link.as_mut().expect("checked").next;
        }
        let record = link.as_deref_mut().expect("found above");
        if record.ts.load(Ordering::Relaxed) == UNSTAMPED {
            record.ts.store(commit_ts, Ordering::Release);
        }
        record.owner = None;
        let mut report = StampReport::default();
        if record.next.is_none() && !record.before_exists {
            // A committed insert at the tail: keep only its timestamp (which the pruner may
            // have raised when it merged newer records into it) as the row's birth.
            let record = link.take().expect("found above");
            let born = record.ts.load(Ordering::Acquire);
            debug_assert!(born != UNSTAMPED && born != NOT_BORN);
            state.born = born;
            state.records -= 1;
            report.folded_records = 1;
            report.freed_bytes = record.footprint();
            spare_records::give_back(record);
            report.nothing_to_finalize = state.head.is_none() && state.exists;
        }
        state.head_changed();
        report
    }

    fn cc_word(row: &DeltaRow) -> &AtomicU64 {
        &row.cc
    }

    fn edit<R>(row: &DeltaRow, edit: impl FnOnce(&mut RowState) -> R) -> R {
        let mut state = row.write();
        edit(&mut state)
    }
}

impl crate::version::HeapStorage for DeltaStorage {
    fn new_row(
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> (Arc<DeltaRow>, Created) {
        let record = spare_records::boxed(VersionRecord {
            ts: AtomicU64::new(UNSTAMPED),
            owner: Some(Arc::clone(owner)),
            before_exists: false,
            mask: ColumnMask::EMPTY,
            before: PackedRow::empty(),
            next: None,
        });
        let created = Created {
            records: 1,
            bytes: record.footprint(),
        };
        (allocate_row(values, record, non_inline), created)
    }
}

impl ChainEdit for RowState {
    fn values(&self) -> (RowView<'_>, bool) {
        (RowView::packed(self.values.packed()), self.exists)
    }

    fn chain_len(&self) -> usize {
        debug_assert!(
            self.records > 64 || self.records as usize == walk_len(self.head.as_deref()),
            "the record count follows the chain"
        );
        self.records as usize
    }

    fn chain_mask(&self) -> ColumnMask {
        let mut mask = ColumnMask::EMPTY;
        let mut cursor = self.head.as_deref();
        while let Some(record) = cursor {
            mask = mask.union(record.mask);
            cursor = record.next.as_deref();
        }
        mask
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        let mut values: Vec<ValueRef<'_>> = (0..self.values.arity())
            .map(|i| self.values.get(i))
            .collect();
        let mut exists = self.exists;
        if exists {
            visit(RowView::reconstructed(&values));
        }
        let mut cursor = self.head.as_deref();
        while let Some(record) = cursor {
            record.apply_to(&mut values, &mut exists);
            if exists {
                visit(RowView::reconstructed(&values));
            }
            cursor = record.next.as_deref();
        }
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn is_unreachable(&self, bound: u64) -> bool {
        !self.exists && self.head.is_none() && (self.born == NOT_BORN || self.born < bound)
    }

    fn mark_dead(&mut self) {
        debug_assert!(self.is_unreachable(u64::MAX));
        self.dead = true;
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        // Find the first record every snapshot can see past: it and all older are obsolete.
        let mut link = &mut self.head;
        loop {
            let obsolete = match link.as_deref() {
                None => return (0, 0),
                Some(record) => record.commit_ts().is_some_and(|ts| ts < watermark),
            };
            if obsolete {
                let (count, bytes) = free_chain(link.take());
                self.records -= record_count(count);
                self.head_changed();
                return (count, bytes);
            }
            link = &mut link.as_mut().expect("checked above").next;
        }
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        let mut link = &mut self.head;
        let mut walked = 0;
        loop {
            let Some(record) = link.as_deref() else {
                return (walked, None); // an empty chain
            };
            walked += 1;
            if record.next.is_none() {
                break;
            }
            link = &mut link.as_mut().expect("checked above").next;
        }
        let oldest = link.as_deref().expect("the loop stops at a record");
        if oldest.commit_ts().is_none_or(|ts| ts >= watermark) {
            return (walked, None);
        }
        let (count, bytes) = free_chain(link.take());
        debug_assert_eq!(count, 1);
        self.records -= 1;
        self.head_changed();
        (walked, Some(bytes))
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        let report = prune_chain(&mut self.head, active);
        self.records -= record_count(report.removed);
        self.head_changed();
        debug_assert_eq!(self.records as usize, report.remaining);
        report
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        let state = self;
        let mut record = state
            .head
            .take()
            .expect("a row in a write set has its writer's record at the head");
        debug_assert!(record.is_owned_by(owner));
        let restored = if record.mask.is_empty() {
            None
        } else {
            Some(PackedRow::build(
                state.values.arity(),
                |column| {
                    record
                        .before_cell(column)
                        .unwrap_or_else(|| state.values.cell(column))
                },
                NonInline::Packed,
            ))
        };
        let written = GoneVersion::untagged(state.values.to_packed());
        if let Some(restored) = restored {
            state.values.set_packed(restored.packed());
        }
        state.exists = record.before_exists;
        state.head = record.next.take();
        state.records -= 1;
        state.head_changed();
        let freed_bytes = record.footprint();
        spare_records::give_back(record);
        RollbackReport {
            freed_records: 1,
            freed_bytes,
            written,
        }
    }
}

/// Steam's EPO (§4.3) over a delta chain.
///
/// Every active snapshot `S` (and every snapshot that can still begin, which is at or after
/// `active.horizon`) must read exactly what it read before. Records committed at or after
/// the horizon are kept as they are (a snapshot we do not know of may sit between any two of
/// them). Older committed records are grouped by the active snapshot that first needs them:
/// the group applied by `S` but not by the next newer snapshot collapses into its oldest
/// record, which takes the columns of the newer ones it lacks (the older image of a column
/// wins) and the timestamp of the newest one, so it is applied by exactly the snapshots that
/// applied any of them. Records no snapshot applies are dropped. An uncommitted head is
/// never touched.
fn prune_chain(head: &mut Option<Box<VersionRecord>>, active: &ActiveSnapshots) -> PruneReport {
    let mut report = PruneReport::default();
    // Skip the uncommitted head, if any (at most one record is uncommitted, the head).
    let mut link: &mut Option<Box<VersionRecord>> = head;
    if link.as_deref().is_some_and(|h| h.commit_ts().is_none()) {
        report.remaining += 1;
        link = &mut link.as_mut().expect("checked").next;
    }
    // Keep records committed at or after the horizon.
    while link
        .as_deref()
        .and_then(VersionRecord::commit_ts)
        .is_some_and(|ts| ts >= active.horizon)
    {
        report.remaining += 1;
        report.blocked_by_horizon = true;
        link = &mut link.as_mut().expect("checked").next;
    }
    for &snapshot in active.starts_desc() {
        debug_assert!(snapshot < active.horizon);
        // The group: records with commit timestamp >= snapshot from here on.
        let Some(first) = link.as_deref() else { break };
        let first_ts = first.commit_ts().expect("only the head can be uncommitted");
        if first_ts < snapshot {
            continue; // this snapshot needs the same state as the newer one
        }
        let mut group = link.take().expect("checked");
        let mut rest = group.next.take();
        // Collapse while the next record is still applied by `snapshot`.
        while let Some(mut older) = rest {
            let older_ts = older.commit_ts().expect("committed");
            debug_assert!(older_ts < first_ts);
            if older_ts < snapshot {
                rest = Some(older);
                break;
            }
            rest = older.next.take();
            report.removed += 1;
            report.freed_bytes += merge_newer_into(&mut older, group);
            group = older;
        }
        group.ts.store(first_ts, Ordering::Release);
        group.next = rest;
        *link = Some(group);
        report.remaining += 1;
        link = &mut link.as_mut().expect("just set").next;
    }
    let (dropped, bytes) = free_chain(link.take());
    report.removed += dropped;
    report.freed_bytes += bytes;
    report
}

/// Folds `newer` into `older` (the survivor, applied after `newer` when walking): columns
/// only `newer` has are added; for columns both have, `older`'s image wins. Returns the
/// bytes freed.
fn merge_newer_into(older: &mut VersionRecord, newer: Box<VersionRecord>) -> usize {
    let before_bytes = older.footprint() + newer.footprint();
    if !older.mask.covers(newer.mask) {
        let mask = older.mask.union(newer.mask);
        let before = PackedRow::project(mask, |column| {
            older
                .before_cell(column)
                .or_else(|| newer.before_cell(column))
                .expect("the union mask covers the column")
        });
        older.mask = mask;
        older.before = before;
    }
    let freed = before_bytes - older.footprint();
    spare_records::give_back(newer);
    freed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::HeapStorage;

    fn new_row(values: &[Value]) -> Arc<DeltaRow> {
        DeltaStorage::new_row(values, &Arc::new(TxnShared::new()), NonInline::Packed).0
    }

    /// `intent` by `owner` with a snapshot at `start_ts` (owning nothing before); whether
    /// it installed.
    fn write_at(
        row: &DeltaRow,
        start_ts: u64,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
    ) -> bool {
        let snapshot = Snapshot {
            start_ts,
            owner: None,
            obsolete_below: 0,
        };
        matches!(
            DeltaStorage::write(row, &snapshot, intent, owner, NonInline::Packed),
            WriteResult::Installed { .. }
        )
    }

    /// Records a prune unlinks become the thread's next new records; a reused record reads
    /// as the new change only (nothing of the record it was); a thread keeps a few at most,
    /// and none serve a write that allocates in a memory space.
    #[test]
    #[cfg(not(loom))] // loom builds keep no spare records
    fn pruned_records_hold_the_next_writes_and_a_thread_keeps_only_a_few() {
        use crate::version::test_steps::{committed_row, update_committed, value_at};
        // A fresh thread: no other test's spare records.
        std::thread::spawn(|| {
            let row = committed_row::<DeltaStorage>(&[Value::U64(1), Value::I64(0)], 2);
            for ts in (3..=41).step_by(2) {
                update_committed::<DeltaStorage>(&row, ts as i64, ts, ts + 1);
            }
            let kept_before = spare_records::kept();
            assert!(kept_before < spare_records::KEEP);
            // Only snapshots from 100 on: every record goes.
            let active = ActiveSnapshots::new(100, vec![]);
            let report = DeltaStorage::edit(&row, |c| c.prune(&active));
            assert_eq!(report.removed, 20);
            assert_eq!(
                spare_records::kept(),
                spare_records::KEEP,
                "20 freed, a few kept"
            );

            // The next update's record is a spare one, and reads as its own change.
            update_committed::<DeltaStorage>(&row, 500, 100, 102);
            assert_eq!(spare_records::kept(), spare_records::KEEP - 1);
            assert_eq!(DeltaStorage::edit(&row, |c| c.chain_len()), 1);
            assert_eq!(value_at::<DeltaStorage>(&row, 101), Some(41), "before it");
            assert_eq!(
                value_at::<DeltaStorage>(&row, 102),
                Some(41),
                "at its commit"
            );
            assert_eq!(value_at::<DeltaStorage>(&row, 103), Some(500), "after it");
            assert_eq!(value_at::<DeltaStorage>(&row, 2), None, "before the insert");

            // Allocating in a memory space: a new block, not a spare.
            {
                let _space = crate::memory_spaces::allocate_in(Some(0));
                update_committed::<DeltaStorage>(&row, 600, 103, 104);
            }
            assert_eq!(spare_records::kept(), spare_records::KEEP - 1);
            assert_eq!(value_at::<DeltaStorage>(&row, 103), Some(500));
            assert_eq!(value_at::<DeltaStorage>(&row, 105), Some(600));

            // A delete in a spare record (an update's, with another mask and an existing
            // row before it): it undoes to the row, and nothing of the update's record shows.
            let owner = Arc::new(TxnShared::new());
            assert!(write_at(&row, 105, WriteIntent::Delete, &owner));
            assert_eq!(spare_records::kept(), spare_records::KEEP - 2);
            owner.mark_committing();
            owner.mark_committed(106);
            DeltaStorage::stamp(&row, &owner, 106);
            assert_eq!(value_at::<DeltaStorage>(&row, 106), Some(600), "before it");
            assert_eq!(value_at::<DeltaStorage>(&row, 107), None, "deleted");
            assert_eq!(value_at::<DeltaStorage>(&row, 104), Some(500));
        })
        .join()
        .expect("the test thread");
    }

    /// The row's copy of the head's commit timestamp (`head_ts`), which readers and writers
    /// decide by without touching the head record, is exact after every change of the head:
    /// a fold, a write, a stamp, a rollback, a prune, a truncation.
    #[test]
    fn the_rows_copy_of_the_head_timestamp_follows_every_change_of_the_head() {
        use crate::version::test_steps::{committed_row, update_committed, value_at};
        fn head_ts(row: &DeltaRow) -> Option<u64> {
            row.read().stamped_head_ts()
        }
        let row = committed_row::<DeltaStorage>(&[Value::U64(1), Value::I64(0)], 2);
        assert_eq!(
            head_ts(&row),
            None,
            "the insert folded into the row: no head"
        );

        update_committed::<DeltaStorage>(&row, 10, 3, 4);
        assert_eq!(head_ts(&row), Some(4), "stamped at the head");
        assert_eq!(value_at::<DeltaStorage>(&row, 5), Some(10), "sees the head");
        assert_eq!(
            value_at::<DeltaStorage>(&row, 4),
            Some(0),
            "at its commit: undoes it"
        );

        // An uncommitted write on top: no stamped head; others undo it.
        let owner = Arc::new(TxnShared::new());
        let changes = [(1, Value::I64(99))];
        let update = WriteIntent::Update(ColumnMask::from_columns(&[1]), &changes);
        assert!(write_at(&row, 5, update, &owner));
        assert_eq!(head_ts(&row), None, "the new head is unstamped");
        assert_eq!(value_at::<DeltaStorage>(&row, 6), Some(10));
        DeltaStorage::edit(&row, |chain| chain.rollback(&owner));
        assert_eq!(
            head_ts(&row),
            Some(4),
            "the rolled-back write's predecessor"
        );
        assert_eq!(value_at::<DeltaStorage>(&row, 6), Some(10));

        update_committed::<DeltaStorage>(&row, 20, 5, 8);
        assert_eq!(head_ts(&row), Some(8));
        // Only a snapshot at 3 is active: the two records collapse into one that takes
        // the newest timestamp.
        let active = ActiveSnapshots::new(100, vec![3]);
        let report = DeltaStorage::edit(&row, |chain| chain.prune(&active));
        assert_eq!((report.removed, report.remaining), (1, 1));
        assert_eq!(
            head_ts(&row),
            Some(8),
            "the survivor took the head's timestamp"
        );
        assert_eq!(value_at::<DeltaStorage>(&row, 3), Some(0));
        assert_eq!(value_at::<DeltaStorage>(&row, 9), Some(20));

        let (removed, _) = DeltaStorage::edit(&row, |chain| chain.truncate(100));
        assert_eq!(removed, 1);
        assert_eq!(head_ts(&row), None, "no head left");
        assert_eq!(value_at::<DeltaStorage>(&row, 9), Some(20));

        // A stamped head that a prune drops with the whole chain (no snapshot needs it).
        update_committed::<DeltaStorage>(&row, 30, 9, 10);
        assert_eq!(head_ts(&row), Some(10));
        let nobody = ActiveSnapshots::new(100, vec![]);
        let report = DeltaStorage::edit(&row, |chain| chain.prune(&nobody));
        assert_eq!((report.removed, report.remaining), (1, 0));
        assert_eq!(head_ts(&row), None, "pruned away");

        // One-at-a-time removal of the only record, which is the head.
        update_committed::<DeltaStorage>(&row, 40, 11, 12);
        assert_eq!(head_ts(&row), Some(12));
        let (_, freed) = DeltaStorage::edit(&row, |chain| chain.unlink_oldest(100));
        assert!(freed.is_some());
        assert_eq!(head_ts(&row), None, "unlinked");

        // A committed head its transaction has not stamped yet: a prune (which reads the
        // outcome) sets the copy, and a writer whose snapshot is not past it conflicts.
        let owner = Arc::new(TxnShared::new());
        let changes = [(1, Value::I64(50))];
        let mask = ColumnMask::from_columns(&[1]);
        assert!(write_at(
            &row,
            13,
            WriteIntent::Update(mask, &changes),
            &owner
        ));
        owner.mark_committing();
        owner.mark_committed(14);
        DeltaStorage::edit(&row, |chain| {
            // A snapshot at 13 keeps the record: the prune stamps it as its group's.
            chain.prune(&ActiveSnapshots::new(100, vec![13]))
        });
        assert_eq!(
            head_ts(&row),
            Some(14),
            "copied from the outcome the prune read"
        );
        assert!(
            !write_at(
                &row,
                14,
                WriteIntent::Update(mask, &changes),
                &Arc::new(TxnShared::new())
            ),
            "first updater wins against a head committed at the snapshot"
        );
    }

    /// A stamped record no longer holds its transaction's shared state: the committing
    /// thread lets go of it at once, for updates, for a record a writer already covered, and
    /// for a committed insert folded into the row; an unstamped record keeps it, and reads
    /// resolve both through the timestamp alone.
    #[test]
    fn stamping_lets_go_of_the_transaction() {
        use crate::version::test_steps::value_at;
        let inserter = Arc::new(TxnShared::new());
        let (row, _) = DeltaStorage::new_row(
            &[Value::U64(1), Value::I64(0)],
            &inserter,
            NonInline::Packed,
        );
        assert_eq!(
            Arc::strong_count(&inserter),
            2,
            "the insert record holds it"
        );
        inserter.mark_committing();
        inserter.mark_committed(2);
        let report = DeltaStorage::stamp(&row, &inserter, 2);
        assert_eq!(report.folded_records, 1, "the committed insert folds");
        assert_eq!(Arc::strong_count(&inserter), 1, "folded and let go");

        let update = |value: i64, start: u64, owner: &Arc<TxnShared>| {
            let changes = [(1, Value::I64(value))];
            let intent = WriteIntent::Update(ColumnMask::from_columns(&[1]), &changes);
            assert!(write_at(&row, start, intent, owner));
        };
        let first = Arc::new(TxnShared::new());
        update(10, 3, &first);
        assert_eq!(
            Arc::strong_count(&first),
            2,
            "its record holds it until stamped"
        );
        first.mark_committing();
        first.mark_committed(4);
        // A second writer covers the committed, unstamped record before it is stamped.
        let second = Arc::new(TxnShared::new());
        update(20, 5, &second);
        assert_eq!(
            value_at::<DeltaStorage>(&row, 4),
            Some(0),
            "resolved by its owner"
        );
        assert_eq!(
            value_at::<DeltaStorage>(&row, 5),
            Some(10),
            "resolved by its owner"
        );
        DeltaStorage::stamp(&row, &first, 4);
        assert_eq!(
            Arc::strong_count(&first),
            1,
            "stamped below the head and let go"
        );
        assert_eq!(Arc::strong_count(&second), 2, "the head is still unstamped");
        second.mark_committing();
        second.mark_committed(6);
        DeltaStorage::stamp(&row, &second, 6);
        assert_eq!(
            Arc::strong_count(&second),
            1,
            "stamped at the head and let go"
        );
        for (start, expected) in [(1, None), (3, Some(0)), (5, Some(10)), (7, Some(20))] {
            assert_eq!(
                value_at::<DeltaStorage>(&row, start),
                expected,
                "at {start}"
            );
        }
        // Stamping again (a record merged away or stamped already) changes nothing.
        DeltaStorage::stamp(&row, &second, 6);
        assert_eq!(value_at::<DeltaStorage>(&row, 7), Some(20));
    }

    #[test]
    fn a_new_row_gets_the_smallest_tail_class_that_holds_its_values() {
        assert!(TAIL_CLASSES.windows(2).all(|pair| pair[0] < pair[1]));
        // A YCSB row: a key and ten 10-byte fields, 204 packed bytes.
        let mut ycsb = vec![Value::U64(1)];
        ycsb.extend((0..10).map(|_| Value::Bytes(vec![7; 10])));
        let needed = row::packed_len_of(&ycsb, NonInline::Packed);
        let row = new_row(&ycsb);
        let state = row.read();
        assert_eq!(
            state.values.heap_bytes(),
            0,
            "the values are in the row's tail"
        );
        let class = *TAIL_CLASSES
            .iter()
            .find(|&&c| c >= needed)
            .expect("a class fits");
        assert_eq!(state.values.tail_len(), class);
        assert_eq!(RowView::packed(state.values.packed()).to_values(), ycsb);
    }

    #[test]
    fn values_beyond_the_largest_class_spill_and_updates_still_apply() {
        let largest = *TAIL_CLASSES.last().expect("classes");
        let huge = vec![Value::U64(1), Value::Text("h".repeat(largest))];
        let row = new_row(&huge);
        let mut state = row.write();
        assert!(state.values.heap_bytes() > largest);
        state
            .values
            .apply_changes(&[(1, Value::Text("small".into()))], NonInline::Packed);
        assert_eq!(state.values.get(1), ValueRef::Text("small"));
        assert_eq!(state.values.tail_len(), 0);
        assert_eq!(
            state.values.heap_bytes(),
            29 + std::mem::size_of::<Box<[u8]>>(),
            "an empty tail: still spilled (29 bytes, and the box of their pointer)"
        );
    }
}
