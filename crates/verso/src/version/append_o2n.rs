//! Append-only version storage, oldest to newest (Wu et al. §4.1, "O2N"): the same whole-row
//! versions as [`super::append`], walked from the oldest to the newest.
//!
//! The row object (the index's logical pointer) reaches the *oldest* version first, so every
//! reader of the newest version and every writer walks the whole chain to reach it: the cost Wu et al. measure
//! against N2O (their Figure 12: N2O ahead by 2.4–3.4x under contention, when chains are
//! long). In exchange the collector's work is at the front: the oldest versions are
//! unlinked without a walk (Wu et al.'s cooperative cleaning relies on this order).
//!
//! The versions are N2O's [`AppendChain`] (the newest, then a deque of the older ones), so
//! no version links to another: a version is unlinked without changing its neighbours,
//! which is what lets index entries hold exact versions (physical pointers, Wu et al. §6.2)
//! over this order too. What makes it O2N is the order every walk takes: readers, writers
//! and stamps start at the oldest and step forward through each version, each step
//! waiting for the version's header as following a link would ([`O2nChain::walk`]), and
//! the collector works at the front.
//!
//! Definitions, as in [`super::append`] with the order reversed (`V_0` oldest ... `V_n`
//! newest): a snapshot `S` sees the last version it can see; the versions it can see form a
//! prefix of the chain (commit timestamps increase along it, and the only uncommitted
//! version, its writer's, is the newest). If `S` sees none, it sees no row. "Version
//! records" are the versions before the newest, plus an insert of a new key until its
//! commit folds it (`insert_record`), so the statistics mean what they mean for the other
//! storages.
//!
//! Concurrency: the row's latch guards the whole chain, as in the other storages.

use std::sync::atomic::Ordering;

use crate::sync::{Arc, AtomicBool, AtomicU64, Latch, ReadGuard, WriteGuard};

use super::append::{lend, tag_of, AppendChain, SharedVersion};
use crate::row::{NonInline, RowView};
use crate::schema::ColumnMask;
use crate::txn::state::TxnShared;
use crate::value::Value;
use crate::version::{
    ActiveSnapshots, ChainEdit, Created, PruneReport, ReadCost, RollbackReport, Snapshot,
    StampReport, VersionStorage, WriteIntent, WriteResult,
};

/// One row: the latched chain of its versions, walked oldest first.
pub(crate) struct O2nRow {
    /// The concurrency-control protocol's row word (`VersionStorage::cc_word`).
    cc: AtomicU64,
    /// Cooperative cleaning: the row waits in the cleaner's list
    /// (`VersionStorage::claim_for_cleaning`).
    recorded: AtomicBool,
    latch: Latch<O2nChain>,
}

/// A row's chain: N2O's versions, walked from the oldest.
pub(crate) struct O2nChain {
    versions: AppendChain,
}

/// A value no version's timestamp takes (timestamps are at most `MAX_TIMESTAMP`, 2^62 - 1,
/// or `UNSTAMPED`, u64::MAX): see [`O2nChain::walk`].
const NO_TIMESTAMP: u64 = u64::MAX - 1;

impl O2nChain {
    /// The versions from the oldest, as a walk along links meets them: each step reads the
    /// version's header (its timestamp) and only then finds the next version, whose
    /// position is made to depend on that read (it adds `ts == NO_TIMESTAMP`, always 0),
    /// so the processor cannot fetch the next header before this one has arrived, just as
    /// when the next address is read from a link in this version. The versions sit in a
    /// deque so that none links another (module notes); without the dependency a long
    /// walk would overlap the cache misses a linked O2N walk takes one after the other,
    /// which is the cost Wu et al. measure.
    fn walk(&self) -> impl Iterator<Item = &SharedVersion> {
        let count = self.versions.len();
        let mut position = 0;
        std::iter::from_fn(move || {
            if position >= count {
                return None;
            }
            let version = self.versions.nth_oldest(position);
            let ts = version.ts.load(Ordering::Relaxed);
            debug_assert_ne!(ts, NO_TIMESTAMP);
            position += 1 + usize::from(ts == NO_TIMESTAMP);
            Some(version)
        })
    }

    /// The newest version, reached as O2N reaches it: a walk from the oldest.
    fn walk_to_newest(&self) -> &SharedVersion {
        self.walk().last().expect("a chain always has a version")
    }
}

/// The append-only, oldest-to-newest storage design.
pub(crate) struct AppendO2nStorage;

impl O2nRow {
    fn read(&self) -> ReadGuard<'_, O2nChain> {
        self.latch.read()
    }

    fn write(&self) -> WriteGuard<'_, O2nChain> {
        self.latch.write()
    }
}

impl VersionStorage for AppendO2nStorage {
    type Row = O2nRow;
    type Chain = O2nChain;
    type Guard<'a> = WriteGuard<'a, O2nChain>;
    type Exact = SharedVersion;
    const NAME: &'static str = "append-o2n";
    const COOPERATIVE_CLEANING: bool = true;
    const PHYSICAL_POINTERS: bool = true;

    crate::version::heap_storage_shared!();

    fn read<R>(
        row: &O2nRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let chain = row.read();
        // Walk forward while the next version is visible too: the last one is ours (the
        // visible versions are a prefix). Every version passed is a record walked (the
        // newest, reached at the end, is not).
        let mut walked = 0;
        let mut seen: Option<&SharedVersion> = None;
        for version in chain.walk() {
            if !version.visible_to(snapshot) {
                break;
            }
            walked += usize::from(seen.is_some());
            seen = Some(version);
        }
        // Cooperative cleaning: the walk began at the oldest version; if it is obsolete,
        // the row is worth recording (the cleaner unlinks every obsolete one).
        let passed_obsolete = snapshot.obsolete_below > 0
            && chain
                .versions
                .second_oldest_committed_below(snapshot.obsolete_below)
            && Self::claim_for_cleaning(row);
        // Not timed: walking is this storage's normal read, not a reconstruction.
        let cost = ReadCost {
            walked,
            reconstruct_nanos: 0,
            passed_obsolete,
        };
        (reader(seen.and_then(|version| lend(version))), cost)
    }

    fn write<'a>(
        row: &'a O2nRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, O2nChain>> {
        let mut chain = row.write();
        if !chain.versions.dead() {
            // First-updater-wins looks at the newest version: walk to it.
            std::hint::black_box(chain.walk_to_newest());
        }
        chain
            .versions
            .install(snapshot, intent, owner, non_inline)
            .with_chain(chain)
    }

    fn stamp(row: &O2nRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        // The version is usually the newest; a writer may have appended after it once the
        // owner's state said committed, or a pruner dropped it: look for it, from the
        // oldest.
        let chain = row.read();
        chain.versions.stamp_in(chain.walk(), owner, commit_ts)
    }

    fn cc_word(row: &O2nRow) -> &AtomicU64 {
        &row.cc
    }

    fn claim_for_cleaning(row: &O2nRow) -> bool {
        // A load first: a row already recorded is read by many; do not write its line.
        !row.recorded.load(Ordering::Relaxed) && !row.recorded.swap(true, Ordering::AcqRel)
    }

    fn release_from_cleaning(row: &O2nRow) {
        row.recorded.store(false, Ordering::Release);
    }

    fn edit<R>(row: &O2nRow, edit: impl FnOnce(&mut O2nChain) -> R) -> R {
        let mut chain = row.write();
        edit(&mut chain)
    }

    fn newest_exact(chain: &O2nChain) -> Option<SharedVersion> {
        chain.versions.newest_exact()
    }

    fn for_each_exact(chain: &O2nChain, visit: &mut dyn FnMut(RowView<'_>, &SharedVersion)) {
        chain.versions.for_each_exact(visit)
    }

    fn exact_tag(exact: &SharedVersion) -> u64 {
        tag_of(exact)
    }

    fn read_exact<R>(
        row: &O2nRow,
        exact: &SharedVersion,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        row.read().versions.read_exact(exact, snapshot, reader)
    }
}

impl crate::version::HeapStorage for AppendO2nStorage {
    fn new_row(
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> (Arc<O2nRow>, Created) {
        let (versions, created) = AppendChain::inserted(values, owner, non_inline);
        let row = Arc::new(O2nRow {
            cc: AtomicU64::new(0),
            recorded: AtomicBool::new(false),
            latch: Latch::new(O2nChain { versions }),
        });
        (row, created)
    }
}

/// The chain edits are N2O's, on the same versions; the oldest is at the front of the walk,
/// so unlinking it looks at two versions, not the whole chain.
impl ChainEdit for O2nChain {
    fn oldest_is_obsolete(&self, watermark: u64) -> bool {
        self.versions.second_oldest_committed_below(watermark)
    }

    fn values(&self) -> (RowView<'_>, bool) {
        let newest = self.walk_to_newest();
        (RowView::packed(newest.values.packed()), newest.exists)
    }

    fn chain_len(&self) -> usize {
        self.versions.chain_len()
    }

    fn chain_mask(&self) -> ColumnMask {
        self.versions.chain_mask()
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        self.versions.for_each_version(visit)
    }

    fn is_dead(&self) -> bool {
        self.versions.is_dead()
    }

    fn is_unreachable(&self, bound: u64) -> bool {
        self.versions.is_unreachable(bound)
    }

    fn mark_dead(&mut self) {
        self.versions.mark_dead()
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        self.versions.truncate(watermark)
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        // The oldest is at the front: no walk (one record looked at, and the next).
        let (walked, freed) = self.versions.unlink_oldest(watermark);
        (walked.min(1), freed)
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        self.versions.prune(active)
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        self.versions.rollback(owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::test_steps;

    fn committed(values: &[Value], ts: u64) -> Arc<O2nRow> {
        test_steps::committed_row::<AppendO2nStorage>(values, ts)
    }

    fn update_committed(row: &O2nRow, value: i64, start: u64, ts: u64) {
        test_steps::update_committed::<AppendO2nStorage>(row, value, start, ts);
    }

    fn value_at(row: &O2nRow, start_ts: u64) -> Option<i64> {
        test_steps::value_at::<AppendO2nStorage>(row, start_ts)
    }

    #[test]
    fn readers_walk_forward_to_the_last_version_they_see() {
        let row = committed(&[Value::U64(1), Value::I64(10)], 5);
        update_committed(&row, 20, 6, 8);
        update_committed(&row, 30, 9, 12);
        assert_eq!(value_at(&row, 5), None, "before the insert");
        assert_eq!(value_at(&row, 6), Some(10));
        assert_eq!(value_at(&row, 9), Some(20));
        assert_eq!(value_at(&row, 100), Some(30));
        let snapshot = Snapshot {
            start_ts: 100,
            owner: None,
            obsolete_below: 0,
        };
        let (_, cost) = AppendO2nStorage::read(&row, &snapshot, |_| ());
        assert_eq!(cost.walked, 2, "the newest is reached through both records");
    }

    #[test]
    fn pruning_truncating_and_unlinking_keep_what_snapshots_read() {
        let row = committed(&[Value::U64(1), Value::I64(0)], 2);
        for (i, ts) in (3..=20).step_by(2).enumerate() {
            update_committed(&row, i as i64 + 1, ts, ts + 1);
        }
        let before: Vec<_> = (1..32).map(|s| value_at(&row, s)).collect();
        let active = ActiveSnapshots::new(30, vec![7, 15]);
        let report = AppendO2nStorage::edit(&row, |c| c.prune(&active));
        assert_eq!((report.removed, report.remaining), (7, 2), "{report:?}");
        for snapshot in [7, 15, 30, 31] {
            assert_eq!(value_at(&row, snapshot), before[snapshot as usize - 1]);
        }
        // The oldest kept version (seen by 7) goes once the watermark passes 15.
        let (walked, freed) = AppendO2nStorage::edit(&row, |c| c.unlink_oldest(16));
        assert_eq!(walked, 1, "the oldest is at the front");
        assert!(freed.is_some());
        assert_eq!(AppendO2nStorage::edit(&row, |c| c.truncate(31)).0, 1);
        assert_eq!(value_at(&row, 31), before[30]);
        assert_eq!(AppendO2nStorage::edit(&row, |c| c.chain_len()), 0);
    }

    #[test]
    fn rollback_restores_the_previous_newest_version() {
        let row = committed(&[Value::U64(1), Value::I64(10)], 2);
        let owner = Arc::new(TxnShared::new());
        let snapshot = Snapshot {
            start_ts: 3,
            owner: Some(&owner),
            obsolete_below: 0,
        };
        let changes = [(1, Value::I64(11))];
        let mask = ColumnMask::from_columns(&[1]);
        let intent = WriteIntent::Update(mask, &changes);
        match AppendO2nStorage::write(&row, &snapshot, intent, &owner, NonInline::Packed) {
            WriteResult::Installed { .. } => {}
            _ => panic!("installs"),
        }
        let report = AppendO2nStorage::edit(&row, |c| c.rollback(&owner));
        assert_eq!(report.freed_records, 1);
        assert_eq!(value_at(&row, 100), Some(10));
        assert_eq!(AppendO2nStorage::edit(&row, |c| c.chain_len()), 0);
    }
}
