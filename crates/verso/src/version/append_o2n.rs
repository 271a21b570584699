//! Append-only version storage, oldest to newest (Wu et al. §4.1, "O2N"): the same whole-row
//! versions as [`super::append`], chained from the oldest to the newest.
//!
//! The row object (the index's logical pointer) holds the *oldest* version, so installing a
//! version never moves what the row points at, but every reader of the newest version and
//! every writer walks the whole chain to reach it: the cost Wu et al. measure against N2O
//! (their Figure 7: N2O ahead by 2.4–3.4x under contention, when chains are long). In
//! exchange the collector's work is at the front: the oldest versions are unlinked without a
//! walk (Wu et al.'s cooperative cleaning relies on this order).
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

use super::append::{
    count_versions, free_versions, insert_version, lend, prune_versions, whole_copies_mask,
    TupleVersion, NEVER_EXISTED, UNSTAMPED,
};
use crate::row::{NonInline, RowView};
use crate::schema::ColumnMask;
use crate::txn::state::TxnShared;
use crate::value::Value;
use crate::version::{
    ActiveSnapshots, ChainEdit, Created, GoneVersion, NoExact, PruneReport, ReadCost,
    RollbackReport, Snapshot, StampReport, VersionStorage, WriteIntent, WriteResult,
};

/// One row: the latched chain of its versions, oldest first.
pub(crate) struct O2nRow {
    /// The concurrency-control protocol's row word (`VersionStorage::cc_word`).
    cc: AtomicU64,
    /// Cooperative cleaning: the row waits in the cleaner's list
    /// (`VersionStorage::claim_for_cleaning`).
    recorded: AtomicBool,
    latch: Latch<O2nChain>,
}

/// A row's chain, oldest version first (`next` is the next newer version).
pub(crate) struct O2nChain {
    /// Always `Some` but for the moment `prune` has the versions out to turn them around.
    oldest: Option<Box<TupleVersion>>,
    /// Versions before the newest (kept with the chain: knowing it costs no walk).
    older: usize,
    /// Set once the collector has removed the row from the indexes.
    dead: bool,
}

impl Drop for O2nChain {
    fn drop(&mut self) {
        free_versions(self.oldest.take());
    }
}

impl O2nChain {
    fn oldest(&self) -> &TupleVersion {
        self.oldest
            .as_deref()
            .expect("a chain always has a version")
    }

    fn oldest_mut(&mut self) -> &mut TupleVersion {
        self.oldest
            .as_deref_mut()
            .expect("a chain always has a version")
    }

    /// The newest version: a walk of the whole chain (the price of this order).
    fn newest(&self) -> &TupleVersion {
        let mut version = self.oldest();
        while let Some(next) = version.next.as_deref() {
            version = next;
        }
        version
    }

    fn newest_mut(&mut self) -> &mut TupleVersion {
        let mut version = self.oldest_mut();
        while version.next.is_some() {
            version = version.next.as_deref_mut().expect("checked");
        }
        version
    }

    /// Versions in the chain, by walking (for assertions).
    fn walk_len(&self) -> usize {
        count_versions(self.oldest.as_deref())
    }

    /// Whether the version after the oldest committed below `watermark` (then every snapshot
    /// at or after it sees that one or a newer one, and the oldest is obsolete).
    fn second_oldest_committed_below(&self, watermark: u64) -> bool {
        self.oldest()
            .next
            .as_deref()
            .and_then(TupleVersion::commit_ts)
            .is_some_and(|ts| ts < watermark)
    }

    /// Unlinks the oldest version (there is a newer one) and returns it.
    fn pop_oldest(&mut self) -> Box<TupleVersion> {
        let mut oldest = self.oldest.take().expect("a chain always has a version");
        self.oldest = Some(oldest.next.take().expect("a newer version exists"));
        oldest
    }

    /// Reverses the chain in place (oldest first ↔ newest first), returning the new first
    /// version. No allocation: the links are turned around one by one.
    fn reversed(first: Box<TupleVersion>) -> Box<TupleVersion> {
        let mut reversed: Option<Box<TupleVersion>> = None;
        let mut cursor = Some(first);
        while let Some(mut version) = cursor {
            cursor = version.next.take();
            version.next = reversed;
            reversed = Some(version);
        }
        reversed.expect("a chain has at least one version")
    }

    /// Runs `edit` on the chain turned newest first, then turns it back.
    fn with_newest_first<R>(&mut self, edit: impl FnOnce(&mut TupleVersion) -> R) -> R {
        let oldest = self.oldest.take().expect("a chain always has a version");
        let mut newest_first = Self::reversed(oldest);
        let result = edit(&mut newest_first);
        self.oldest = Some(Self::reversed(newest_first));
        result
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
    type Exact = NoExact;
    const NAME: &'static str = "append-o2n";
    const COOPERATIVE_CLEANING: bool = true;

    fn new_row(
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> (Arc<O2nRow>, Created) {
        let (oldest, created) = insert_version(values, owner, non_inline);
        let chain = O2nChain {
            oldest: Some(oldest),
            older: 0,
            dead: false,
        };
        let row = Arc::new(O2nRow {
            cc: AtomicU64::new(0),
            recorded: AtomicBool::new(false),
            latch: Latch::new(chain),
        });
        (row, created)
    }

    fn read<R>(
        row: &O2nRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let chain = row.read();
        if !chain.oldest().visible_to(snapshot) {
            // The visible versions are a prefix of the chain, and this one is empty.
            return (reader(None), ReadCost::default());
        }
        // Walk forward while the next version is visible too: the last one is ours. Every
        // version passed is a record walked (the newest, reached at the end, is not).
        let mut walked = 0;
        let mut version = chain.oldest();
        while let Some(next) = version.next.as_deref() {
            if !next.visible_to(snapshot) {
                break;
            }
            walked += 1;
            version = next;
        }
        let seen = lend(version);
        // Cooperative cleaning: the walk began at the oldest version; if it is obsolete,
        // the row is worth recording (the cleaner unlinks every obsolete one).
        let passed_obsolete = snapshot.obsolete_below > 0
            && chain.second_oldest_committed_below(snapshot.obsolete_below)
            && Self::claim_for_cleaning(row);
        // Not timed: walking is this storage's normal read, not a reconstruction.
        let cost = ReadCost {
            walked,
            reconstruct_nanos: 0,
            passed_obsolete,
        };
        (reader(seen), cost)
    }

    fn write<'a>(
        row: &'a O2nRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, O2nChain>> {
        let mut chain = row.write();
        if chain.dead {
            return WriteResult::RowGone;
        }
        let newest = chain.newest();
        let mine = newest.owned_by(owner);
        if let Some(refused) = super::refuse_write(
            mine,
            || newest.commit_ts(),
            newest.exists,
            snapshot,
            &intent,
        ) {
            return refused;
        }
        if mine {
            let replaced = chain.newest_mut().rewrite_own(intent, non_inline);
            return WriteResult::Installed {
                chain,
                new_record: false,
                created: Created::default(),
                replaced: Some(GoneVersion::untagged(replaced)),
            };
        }
        let successor = newest.successor(owner, intent, non_inline);
        let previous = chain.newest_mut();
        let created = previous.cover();
        previous.next = Some(successor);
        chain.older += 1;
        WriteResult::Installed {
            chain,
            new_record: true,
            created,
            replaced: None,
        }
    }

    fn stamp(row: &O2nRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        // The version is usually the newest; a writer may have appended after it once the
        // owner's state said committed, or a pruner dropped it: look for it.
        let chain = row.read();
        let mut cursor = Some(chain.oldest());
        while let Some(version) = cursor {
            if version.owned_by(owner) {
                let _ = version.ts.compare_exchange(
                    UNSTAMPED,
                    commit_ts,
                    Ordering::Release,
                    Ordering::Relaxed,
                );
                let folded = version.insert_record.swap(false, Ordering::Relaxed);
                return StampReport {
                    folded_records: usize::from(folded),
                    freed_bytes: 0,
                    nothing_to_finalize: version.next.is_none()
                        && chain.older == 0
                        && version.exists,
                };
            }
            cursor = version.next.as_deref();
        }
        StampReport::default()
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
}

impl ChainEdit for O2nChain {
    fn oldest_is_obsolete(&self, watermark: u64) -> bool {
        self.second_oldest_committed_below(watermark)
    }

    fn values(&self) -> (RowView<'_>, bool) {
        let newest = self.newest();
        (RowView::packed(newest.values.packed()), newest.exists)
    }

    fn chain_len(&self) -> usize {
        debug_assert!(
            self.older > 64 || self.older + 1 == self.walk_len(),
            "the version count follows the chain"
        );
        self.older
    }

    fn chain_mask(&self) -> ColumnMask {
        whole_copies_mask(self.older, self.oldest().values.arity())
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        let mut cursor = Some(self.oldest());
        while let Some(version) = cursor {
            if version.exists {
                visit(RowView::packed(version.values.packed()));
            }
            cursor = version.next.as_deref();
        }
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn is_unreachable(&self, bound: u64) -> bool {
        let only = self.oldest();
        self.older == 0 && !only.exists && only.commit_ts().is_some_and(|ts| ts < bound)
    }

    fn mark_dead(&mut self) {
        debug_assert!(self.is_unreachable(u64::MAX));
        self.dead = true;
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        // Every snapshot at or after the watermark sees the next version if it committed
        // below the watermark: then the oldest is obsolete. Repeat from the front.
        let (mut count, mut bytes) = (0, 0);
        while self.second_oldest_committed_below(watermark) {
            let dropped = self.pop_oldest();
            count += 1;
            bytes += dropped.footprint();
            self.older -= 1;
        }
        (count, bytes)
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        // The oldest is at the front: no walk (one record looked at, and the next).
        if self.older == 0 {
            return (0, None);
        }
        if !self.second_oldest_committed_below(watermark) {
            return (1, None);
        }
        let dropped = self.pop_oldest();
        self.older -= 1;
        (1, Some(dropped.footprint()))
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        // The rule is the N2O storage's (keep what some reader stops at), applied to the
        // chain turned newest first for the occasion.
        let mut report = self.with_newest_first(|newest| prune_versions(newest, active));
        self.older -= report.removed;
        debug_assert_eq!(self.older + 1, self.walk_len());
        report.remaining = self.older;
        report
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        if self.older == 0 {
            // An insert of a new key: the row stays as a tombstone every snapshot sees (the
            // collector buries it), as in the N2O storage.
            let only = self.oldest_mut();
            debug_assert!(only.owned_by(owner) && only.insert_record.load(Ordering::Relaxed));
            only.insert_record.store(false, Ordering::Relaxed);
            only.exists = false;
            only.ts.store(NEVER_EXISTED, Ordering::Release);
            return RollbackReport {
                freed_records: 1,
                freed_bytes: 0,
                written: GoneVersion::untagged(only.values.to_packed()),
            };
        }
        // Unlink the newest (ours); the one before it is the newest again, no longer a record.
        let mut before = self.oldest_mut();
        while before
            .next
            .as_deref()
            .is_some_and(|next| next.next.is_some())
        {
            before = before.next.as_deref_mut().expect("checked");
        }
        let rolled_back = before.next.take().expect("older > 0");
        debug_assert!(rolled_back.owned_by(owner));
        let freed_bytes = before.footprint();
        self.older -= 1;
        RollbackReport {
            freed_records: 1,
            freed_bytes,
            written: GoneVersion::untagged(rolled_back.values.to_packed()),
        }
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
