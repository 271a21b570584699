//! Time-travel version storage (Wu et al. §4.2): the master version of a row lives in the
//! main table (here: in place, in the row's own allocation), and the older versions are
//! whole copies in a separate time-travel store, chained newest to oldest from the master.
//!
//! An update copies the master into the time-travel store and then overwrites the master
//! in place, so the index's pointer (the row object) never moves and a reader of the newest
//! version finds it without a hop; a reader of an older version walks the copies.
//!
//! Definitions, as in [`super::append`] with the master as the newest version: a snapshot
//! sees the master if it can, else the first copy it can see, else no row. The master keeps
//! its own commit timestamp and transaction. "Version records" are the copies, plus an
//! insert of a new key until its commit folds it (`insert_record`), as in the other
//! storages; a copy's bytes count while it is in the store.
//!
//! Concurrency: the row's latch guards the master and the copies; only the timestamps and
//! `insert_record` change under the shared latch (the stamp), and they are atomic.

use std::sync::atomic::Ordering;

use crate::sync::{Arc, AtomicBool, AtomicU64, Latch, ReadGuard, WriteGuard};

use super::append::{
    allocate_version, count_versions, free_versions, linked, prune_behind, read_behind,
    truncate_behind, unlink_oldest_behind, whole_copies_mask, NewValues, TupleVersion,
    NEVER_EXISTED, UNSTAMPED,
};
use crate::row::{self, tail_classes, InPlaceRow, NonInline, RowView};
use crate::schema::ColumnMask;
use crate::txn::state::{TxnOutcome, TxnShared, MAX_TIMESTAMP};
use crate::value::Value;
use crate::version::{
    ActiveSnapshots, ChainEdit, Created, GoneVersion, NoExact, PruneReport, ReadCost,
    RollbackReport, Snapshot, StampReport, VersionStorage, WriteIntent, WriteResult,
};

/// One row: the latched master and its copies. `D` is the master's values tail, sized when
/// the row is created (see [`tail_classes`]).
pub(crate) struct TtRow<D: ?Sized + AsRef<[u8]> = [u8]> {
    /// The concurrency-control protocol's row word (`VersionStorage::cc_word`).
    cc: AtomicU64,
    latch: Latch<TtState<D>>,
}

/// A row's master version and its time-travel copies.
pub(crate) struct TtState<D: ?Sized + AsRef<[u8]> = [u8]> {
    /// Commit timestamp of the master's transaction, or `UNSTAMPED`.
    ts: AtomicU64,
    /// The master's transaction, consulted while it is unstamped.
    owner: Arc<TxnShared>,
    /// Whether the row exists in the master (false: a tombstone keeping the deleted values).
    exists: bool,
    /// The master is an insert of a new key not yet folded by its commit.
    insert_record: AtomicBool,
    /// Set once the collector has removed the row from the indexes.
    dead: bool,
    /// Copies in the time-travel store.
    older: usize,
    /// The copies, newest first.
    copies: Option<Box<TupleVersion>>,
    /// The master's values. Last: the unsized tail.
    values: InPlaceRow<D>,
}

impl<D: ?Sized + AsRef<[u8]>> Drop for TtState<D> {
    fn drop(&mut self) {
        free_versions(self.copies.take());
    }
}

/// A new row holding `owner`'s insert of `values`, in the smallest tail class that fits.
fn allocate_row(values: &[Value], owner: &Arc<TxnShared>, non_inline: NonInline) -> Arc<TtRow> {
    let needed = row::packed_len_of(values, non_inline);
    macro_rules! smallest_fitting {
        ($($class:literal)*) => {
            $(
                if needed <= $class {
                    return row_with_tail::<$class>(values, owner, non_inline);
                }
            )*
        };
    }
    tail_classes!(smallest_fitting);
    row_with_tail::<0>(values, owner, non_inline) // beyond every class: the values spill
}

fn row_with_tail<const N: usize>(
    values: &[Value],
    owner: &Arc<TxnShared>,
    non_inline: NonInline,
) -> Arc<TtRow> {
    let state = TtState::<[u8; N]> {
        ts: AtomicU64::new(UNSTAMPED),
        owner: Arc::clone(owner),
        exists: true,
        insert_record: AtomicBool::new(true),
        dead: false,
        older: 0,
        copies: None,
        values: InPlaceRow::new(values, non_inline),
    };
    #[cfg(not(loom))]
    let row: Arc<TtRow> = Arc::new(TtRow {
        cc: AtomicU64::new(0),
        latch: Latch::new(state),
    });
    #[cfg(loom)]
    let row: Arc<TtRow> = Arc::new(TtRow {
        cc: AtomicU64::new(0),
        latch: Latch::from_box(Box::new(state)),
    });
    row
}

impl TtState {
    /// The master's commit timestamp, if its transaction committed.
    fn master_commit_ts(&self) -> Option<u64> {
        let ts = self.ts.load(Ordering::Acquire);
        if ts != UNSTAMPED {
            debug_assert!(ts <= MAX_TIMESTAMP);
            return Some(ts);
        }
        match self.owner.outcome() {
            TxnOutcome::Committed(ts) => Some(ts),
            TxnOutcome::Uncommitted => None,
        }
    }

    fn master_owned_by(&self, owner: &TxnShared) -> bool {
        std::ptr::eq(owner, Arc::as_ptr(&self.owner))
    }

    fn master_visible_to(&self, snapshot: &Snapshot<'_>) -> bool {
        if snapshot.owner.is_some_and(|me| self.master_owned_by(me)) {
            return true;
        }
        self.master_commit_ts()
            .is_some_and(|ts| ts < snapshot.start_ts)
    }

    /// Copies the master into the time-travel store (it is about to be overwritten by a
    /// newer version). The copy keeps the master's timestamp and transaction (an unstamped
    /// master's stamp then finds its copy), and counts as a record (unless the master still
    /// counted as its insert's record: then only the reason changes).
    fn copy_master_out(&mut self) -> Created {
        let copy: Box<TupleVersion> = allocate_version(
            &self.owner,
            self.exists,
            NewValues::Copied(self.values.packed(), &[], NonInline::Packed),
        );
        copy.ts
            .store(self.ts.load(Ordering::Acquire), Ordering::Release);
        let already_a_record = self.insert_record.swap(false, Ordering::Relaxed);
        let created = Created {
            records: usize::from(!already_a_record),
            bytes: copy.footprint(),
        };
        let mut copy = copy;
        copy.next = self.copies.take();
        self.copies = Some(copy);
        self.older += 1;
        created
    }
}

/// The time-travel storage design.
pub(crate) struct TimeTravelStorage;

impl TtRow {
    fn read(&self) -> ReadGuard<'_, TtState> {
        self.latch.read()
    }

    fn write(&self) -> WriteGuard<'_, TtState> {
        self.latch.write()
    }
}

impl VersionStorage for TimeTravelStorage {
    type Row = TtRow;
    type Chain = TtState;
    type Guard<'a> = WriteGuard<'a, TtState>;
    type Exact = NoExact;
    const NAME: &'static str = "time-travel";

    crate::version::heap_storage_shared!();

    fn read<R>(
        row: &TtRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let state = row.read();
        if state.master_visible_to(snapshot) {
            // The common path: the master, in the row itself; not timed.
            let seen = state.exists.then(|| RowView::packed(state.values.packed()));
            return (reader(seen), ReadCost::default());
        }
        read_behind(linked(state.copies.as_deref()), snapshot, reader)
    }

    fn write<'a>(
        row: &'a TtRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, TtState>> {
        let mut state = row.write();
        if state.dead {
            return WriteResult::RowGone;
        }
        let mine = state.master_owned_by(owner);
        if let Some(refused) = super::refuse_write(
            mine,
            || state.master_commit_ts(),
            state.exists,
            snapshot,
            &intent,
        ) {
            return refused;
        }
        // What this transaction had in the master (its own earlier write), if anything.
        let replaced = mine.then(|| GoneVersion::untagged(state.values.to_packed()));
        let created = if mine {
            Created::default()
        } else {
            let created = state.copy_master_out();
            state.owner = Arc::clone(owner);
            state.ts.store(UNSTAMPED, Ordering::Release);
            created
        };
        match intent {
            WriteIntent::Update(_, changes) => state.values.apply_changes(changes, non_inline),
            WriteIntent::Delete => state.exists = false,
            WriteIntent::Insert(values) => {
                debug_assert_eq!(values.len(), state.values.arity());
                state.values.set_values(values, non_inline);
                state.exists = true;
            }
        }
        WriteResult::Installed {
            chain: state,
            new_record: !mine,
            created,
            replaced,
        }
    }

    fn stamp(row: &TtRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        // Usually the master; a writer may have copied it out once the owner's state said
        // committed (then the copy carries it), or a pruner dropped that copy.
        let state = row.read();
        if state.master_owned_by(owner) {
            let _ = state.ts.compare_exchange(
                UNSTAMPED,
                commit_ts,
                Ordering::Release,
                Ordering::Relaxed,
            );
            let folded = state.insert_record.swap(false, Ordering::Relaxed);
            return StampReport {
                folded_records: usize::from(folded),
                freed_bytes: 0,
                nothing_to_finalize: state.older == 0 && state.exists,
            };
        }
        let mut cursor = state.copies.as_deref();
        while let Some(copy) = cursor {
            if copy.owned_by(owner) {
                let _ = copy.ts.compare_exchange(
                    UNSTAMPED,
                    commit_ts,
                    Ordering::Release,
                    Ordering::Relaxed,
                );
                break;
            }
            cursor = copy.next.as_deref();
        }
        StampReport::default()
    }

    fn cc_word(row: &TtRow) -> &AtomicU64 {
        &row.cc
    }

    fn edit<R>(row: &TtRow, edit: impl FnOnce(&mut TtState) -> R) -> R {
        let mut state = row.write();
        edit(&mut state)
    }
}

impl crate::version::HeapStorage for TimeTravelStorage {
    fn new_row(
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> (Arc<TtRow>, Created) {
        // As in the append storages: a record until its commit folds it; no bytes counted.
        let created = Created {
            records: 1,
            bytes: 0,
        };
        (allocate_row(values, owner, non_inline), created)
    }
}

impl ChainEdit for TtState {
    fn values(&self) -> (RowView<'_>, bool) {
        (RowView::packed(self.values.packed()), self.exists)
    }

    fn chain_len(&self) -> usize {
        debug_assert!(
            self.older > 64 || self.older == count_versions(self.copies.as_deref()),
            "the copy count follows the store"
        );
        self.older
    }

    fn chain_mask(&self) -> ColumnMask {
        whole_copies_mask(self.older, self.values.arity())
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        if self.exists {
            visit(RowView::packed(self.values.packed()));
        }
        let mut cursor = self.copies.as_deref();
        while let Some(copy) = cursor {
            if copy.exists {
                visit(RowView::packed(copy.values.packed()));
            }
            cursor = copy.next.as_deref();
        }
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn is_unreachable(&self, bound: u64) -> bool {
        self.older == 0 && !self.exists && self.master_commit_ts().is_some_and(|ts| ts < bound)
    }

    fn mark_dead(&mut self) {
        debug_assert!(self.is_unreachable(u64::MAX));
        self.dead = true;
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        if self.copies.is_none() {
            return (0, 0); // (and no need to ask a committing master for its timestamp)
        }
        let newest = self.master_commit_ts();
        let (count, bytes) = truncate_behind(newest, &mut self.copies, watermark);
        self.older -= count;
        (count, bytes)
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        let walked = self.older;
        if self.copies.is_none() {
            return (0, None);
        }
        let newest = self.master_commit_ts();
        let freed = unlink_oldest_behind(newest, &mut self.copies, watermark);
        if freed.is_some() {
            self.older -= 1;
        }
        (walked, freed)
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        if self.copies.is_none() {
            return PruneReport::default();
        }
        let newest = self.master_commit_ts();
        let mut report = prune_behind(newest, &mut self.copies, active);
        self.older -= report.removed;
        report.remaining = self.older;
        report
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        debug_assert!(
            self.master_owned_by(owner),
            "the writer's version is the master"
        );
        let written = GoneVersion::untagged(self.values.to_packed());
        let Some(mut copy) = self.copies.take() else {
            // An insert of a new key: the row stays (it is in the indexes) as a tombstone
            // every snapshot sees, so that the collector buries it.
            debug_assert!(self.insert_record.load(Ordering::Relaxed));
            self.insert_record.store(false, Ordering::Relaxed);
            self.exists = false;
            self.ts.store(NEVER_EXISTED, Ordering::Release);
            return RollbackReport {
                freed_records: 1,
                freed_bytes: 0,
                written,
            };
        };
        // The newest copy becomes the master again (no longer a record).
        self.copies = copy.next.take();
        self.older -= 1;
        self.values.set_packed(copy.values.packed());
        self.exists = copy.exists;
        self.owner = Arc::clone(&copy.owner);
        self.ts
            .store(copy.ts.load(Ordering::Acquire), Ordering::Release);
        RollbackReport {
            freed_records: 1,
            freed_bytes: copy.footprint(),
            written,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::test_steps::{committed_row, update_committed, value_at};
    use crate::version::HeapStorage;
    use crate::version::WriteResult;

    #[test]
    fn rollback_restores_the_master_from_its_copy_or_leaves_a_tombstone_nobody_sees() {
        let row = committed_row::<TimeTravelStorage>(&[Value::U64(1), Value::I64(10)], 2);
        let owner = Arc::new(TxnShared::new());
        let snapshot = Snapshot {
            start_ts: 3,
            owner: Some(&owner),
            obsolete_below: 0,
        };
        let changes = [(1, Value::I64(11))];
        let intent = WriteIntent::Update(ColumnMask::from_columns(&[1]), &changes);
        match TimeTravelStorage::write(&row, &snapshot, intent, &owner, NonInline::Packed) {
            WriteResult::Installed { created, .. } => assert_eq!(created.records, 1),
            _ => panic!("installs"),
        }
        assert_eq!(
            value_at::<TimeTravelStorage>(&row, 100),
            Some(10),
            "uncommitted"
        );
        let report = TimeTravelStorage::edit(&row, |s| s.rollback(&owner));
        assert_eq!(
            (report.freed_records, report.written.values.get(1)),
            (1, crate::row::ValueRef::I64(11))
        );
        assert_eq!(value_at::<TimeTravelStorage>(&row, 100), Some(10));
        assert_eq!(TimeTravelStorage::edit(&row, |s| s.chain_len()), 0);
        // The restored master is still the committed insert: another writer may write it.
        let other = Arc::new(TxnShared::new());
        let snapshot = Snapshot {
            start_ts: 4,
            owner: Some(&other),
            obsolete_below: 0,
        };
        let intent = WriteIntent::Update(ColumnMask::from_columns(&[1]), &changes);
        assert!(matches!(
            TimeTravelStorage::write(&row, &snapshot, intent, &other, NonInline::Packed),
            WriteResult::Installed { .. }
        ));

        // An insert of a new key, rolled back: a tombstone every snapshot sees as no row.
        let inserter = Arc::new(TxnShared::new());
        let (fresh, created) = TimeTravelStorage::new_row(
            &[Value::U64(2), Value::I64(5)],
            &inserter,
            NonInline::Packed,
        );
        assert_eq!(created.records, 1);
        let report = TimeTravelStorage::edit(&fresh, |s| s.rollback(&inserter));
        assert_eq!(report.freed_records, 1);
        assert_eq!(value_at::<TimeTravelStorage>(&fresh, 1), None);
        assert!(TimeTravelStorage::edit(&fresh, |s| s.is_unreachable(1)));
    }

    #[test]
    fn the_master_is_read_in_place_and_copies_serve_older_snapshots() {
        let row = committed_row::<TimeTravelStorage>(&[Value::U64(1), Value::I64(10)], 5);
        update_committed::<TimeTravelStorage>(&row, 20, 6, 8);
        update_committed::<TimeTravelStorage>(&row, 30, 9, 12);
        assert_eq!(value_at::<TimeTravelStorage>(&row, 5), None);
        assert_eq!(value_at::<TimeTravelStorage>(&row, 6), Some(10));
        assert_eq!(value_at::<TimeTravelStorage>(&row, 9), Some(20));
        assert_eq!(value_at::<TimeTravelStorage>(&row, 100), Some(30));
        let snapshot = Snapshot {
            start_ts: 100,
            owner: None,
            obsolete_below: 0,
        };
        let (_, cost) = TimeTravelStorage::read(&row, &snapshot, |_| ());
        assert_eq!(cost.walked, 0, "the master needs no walk");
        assert_eq!(TimeTravelStorage::edit(&row, |s| s.chain_len()), 2);
        let active = ActiveSnapshots::new(100, vec![6]);
        let report = TimeTravelStorage::edit(&row, |s| s.prune(&active));
        assert_eq!((report.removed, report.remaining), (1, 1));
        assert_eq!(value_at::<TimeTravelStorage>(&row, 6), Some(10));
        assert_eq!(TimeTravelStorage::edit(&row, |s| s.truncate(100)).0, 1);
        assert_eq!(value_at::<TimeTravelStorage>(&row, 100), Some(30));
    }
}
