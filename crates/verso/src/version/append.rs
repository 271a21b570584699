//! Append-only version storage, newest to oldest (Wu et al. §4.1, "N2O"): every write by a
//! new transaction appends a whole new copy of the row, and the chain runs from that newest
//! copy to the oldest.
//!
//! The index points at the row object (a logical pointer: Wu et al. §6's indirection
//! layer), which holds the chain's head, so installing a version moves the head without
//! touching any index. Unlike the delta storage, no version is kept in place: the newest
//! version is itself a [`TupleVersion`], and a reader that needs an older one finds a whole
//! copy instead of undoing before-images.
//!
//! Definitions (versions `V_0` newest ... `V_n` oldest, `C_i` the commit timestamp of the
//! transaction that created `V_i`):
//! - A snapshot `S` sees the first version it can see: its own (uncommitted) version, or one
//!   with `C_i < S`. Walking past the oldest version, it sees no row (the row did not exist
//!   yet, or the versions it would have seen were collected because no snapshot as old as
//!   `S` remains).
//! - A delete appends a tombstone: a version that says "no row" and keeps the values (the
//!   collector needs their keys to remove the index entries). An insert over a tombstone
//!   appends a live version again.
//! - Committed timestamps strictly decrease along the chain; at most one version is
//!   uncommitted, and it is the head. A transaction has at most one version per row: its
//!   later writes change that version in place (no one else can see it).
//! - "Version records" (what the statistics count and collectors reclaim) are the versions
//!   *behind* the newest: the newest copy is the row itself. An update or delete turns the
//!   previous newest version into one. An insert of a new key counts its version as a
//!   record until its commit folds it into the row, as the delta storage counts its insert
//!   records, so the statistics mean the same under both storages. Invariants: a version
//!   counts as one record exactly when it is behind the head or is `insert_record`; its
//!   bytes count exactly while it is behind the head (where it never changes).
//!
//! Concurrency: as in the delta storage, the row's reader-writer latch guards the whole
//! chain. Readers hold it shared while they walk; writers, pruners and the collector hold
//! it exclusively to link or unlink versions, and an unlinked version is freed at once (the
//! latch is the grace period). Only a version's timestamp is written under the shared
//! latch (by its transaction's stamp at commit), and it is atomic.

use std::sync::atomic::Ordering;

use crate::sync::{Arc, AtomicBool, AtomicU64, Latch, ReadGuard, WriteGuard};

use crate::row::{self, tail_classes, InPlaceRow, PackedRef, PackedRow, RowView};
use crate::schema::ColumnMask;
use crate::txn::state::{TxnOutcome, TxnShared, MAX_TIMESTAMP};
use crate::value::Value;
use crate::version::{
    ActiveSnapshots, ChainEdit, Created, PruneReport, ReadCost, RollbackReport, Snapshot,
    StampReport, VersionStorage, WriteIntent, WriteResult,
};

/// `ts` of a version whose transaction has not stamped it yet.
pub(super) const UNSTAMPED: u64 = u64::MAX;

/// `ts` of the tombstone a rolled-back insert of a new key leaves: visible to every
/// snapshot, and saying "no row" to all of them (the key never existed).
pub(super) const NEVER_EXISTED: u64 = 0;

/// One row: the latched chain of its versions.
pub(crate) struct AppendRow {
    /// The concurrency-control protocol's row word (`VersionStorage::cc_word`).
    cc: AtomicU64,
    latch: Latch<AppendChain>,
}

/// A row's chain, newest version first.
pub(crate) struct AppendChain {
    /// The newest version; a chain always has one.
    head: Box<TupleVersion>,
    /// Versions behind the head (kept as versions are linked and unlinked, so knowing the
    /// length costs no walk).
    older: usize,
    /// Set once the collector has removed the row from the indexes.
    dead: bool,
}

/// One whole copy of a row, as one transaction left it, in one allocation: `D` is the tail
/// that holds the values (`[u8; N]` while it is built, `[u8]` once boxed; see
/// [`tail_classes`]), so a reader that reaches the version has its values too.
pub(crate) struct TupleVersion<D: ?Sized = [u8]> {
    /// Commit timestamp of the creating transaction, or `UNSTAMPED`.
    pub(super) ts: AtomicU64,
    /// The creating transaction, consulted while the version is unstamped.
    pub(super) owner: Arc<TxnShared>,
    /// Whether the row exists in this version (false: a tombstone).
    pub(super) exists: bool,
    /// An insert of a new key not yet folded by its commit (see the module notes). Set only
    /// on a head; cleared under the shared latch by the stamp (hence atomic) or under the
    /// exclusive latch when a writer covers the version or the insert rolls back.
    pub(super) insert_record: AtomicBool,
    pub(super) next: Option<Box<TupleVersion>>,
    /// All the row's values (a tombstone keeps the values of the row it deleted). Last,
    /// because it holds the unsized tail.
    pub(super) values: InPlaceRow<D>,
}

/// What a new version's values are made of.
pub(super) enum NewValues<'a> {
    /// Given values (an insert).
    Given(&'a [Value]),
    /// A copy of the previous version's values with `changes` applied (an update; a delete
    /// with no changes).
    Copied(PackedRef<'a>, &'a [(usize, Value)]),
}

/// A new, unstamped version of `owner`, in the smallest tail class that holds its values.
pub(super) fn allocate_version(
    owner: &Arc<TxnShared>,
    exists: bool,
    values: NewValues<'_>,
) -> Box<TupleVersion> {
    // An update usually keeps the row's size: size the tail for the values copied.
    let needed = match &values {
        NewValues::Given(values) => row::packed_len_of(values),
        NewValues::Copied(packed, _) => packed.len_bytes(),
    };
    macro_rules! smallest_fitting {
        ($($class:literal)*) => {
            $(
                if needed <= $class {
                    return version_with_tail::<$class>(owner, exists, values);
                }
            )*
        };
    }
    tail_classes!(smallest_fitting);
    version_with_tail::<0>(owner, exists, values) // beyond every class: the values spill
}

fn version_with_tail<const N: usize>(
    owner: &Arc<TxnShared>,
    exists: bool,
    values: NewValues<'_>,
) -> Box<TupleVersion> {
    let in_place = match values {
        NewValues::Given(values) => InPlaceRow::<[u8; N]>::new(values),
        NewValues::Copied(packed, changes) => {
            let mut copy = InPlaceRow::<[u8; N]>::from_packed(packed);
            if !changes.is_empty() {
                copy.apply_changes(changes);
            }
            copy
        }
    };
    Box::new(TupleVersion {
        ts: AtomicU64::new(UNSTAMPED),
        owner: Arc::clone(owner),
        exists,
        insert_record: AtomicBool::new(false),
        next: None,
        values: in_place,
    })
}

/// The version of an insert of a new key, and the record it counts as until its commit
/// folds it (see the module notes; its bytes are the row's, counted only once a newer
/// version covers it).
pub(super) fn insert_version(
    values: &[Value],
    owner: &Arc<TxnShared>,
) -> (Box<TupleVersion>, Created) {
    let version = allocate_version(owner, true, NewValues::Given(values));
    version.insert_record.store(true, Ordering::Relaxed);
    let created = Created {
        records: 1,
        bytes: 0,
    };
    (version, created)
}

impl TupleVersion {
    /// A write by this version's own (uncommitted) transaction: only it can see the
    /// version, so the write changes it in place. Returns what it held before (even a
    /// deleted row's values: their index entries may be needed by no version now).
    pub(super) fn rewrite_own(&mut self, intent: WriteIntent<'_>) -> PackedRow {
        let replaced = self.values.to_packed();
        match intent {
            WriteIntent::Update(_, changes) => self.values.apply_changes(changes),
            WriteIntent::Delete => self.exists = false,
            WriteIntent::Insert(values) => {
                debug_assert_eq!(values.len(), self.values.arity());
                self.values.set_values(values);
                self.exists = true;
            }
        }
        replaced
    }

    /// The version `owner`'s write makes of this one (the newest): a copy with the changes,
    /// a tombstone for a delete, the given values for an insert over a tombstone.
    pub(super) fn successor(
        &self,
        owner: &Arc<TxnShared>,
        intent: WriteIntent<'_>,
    ) -> Box<TupleVersion> {
        let values = self.values.packed();
        match intent {
            WriteIntent::Update(_, changes) => {
                allocate_version(owner, true, NewValues::Copied(values, changes))
            }
            WriteIntent::Delete => allocate_version(owner, false, NewValues::Copied(values, &[])),
            WriteIntent::Insert(given) => {
                debug_assert_eq!(given.len(), values.arity());
                allocate_version(owner, true, NewValues::Given(given))
            }
        }
    }

    /// This (previously newest) version becomes a record as a newer one covers it, unless
    /// it still counts as its insert's record (then only the reason it counts changes); its
    /// bytes count from now on (a covered version never changes).
    pub(super) fn cover(&self) -> Created {
        let already_a_record = self.insert_record.swap(false, Ordering::Relaxed);
        Created {
            records: usize::from(!already_a_record),
            bytes: self.footprint(),
        }
    }
    /// The creating transaction's commit timestamp, if it committed.
    pub(super) fn commit_ts(&self) -> Option<u64> {
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

    pub(super) fn owned_by(&self, owner: &TxnShared) -> bool {
        std::ptr::eq(owner, Arc::as_ptr(&self.owner))
    }

    /// Whether `snapshot` sees this version (its own, or committed before it began).
    pub(super) fn visible_to(&self, snapshot: &Snapshot<'_>) -> bool {
        if snapshot.owner.is_some_and(|me| self.owned_by(me)) {
            return true;
        }
        self.commit_ts().is_some_and(|ts| ts < snapshot.start_ts)
    }

    /// Bytes this version occupies (header, tail, and any values spilled beyond it).
    pub(super) fn footprint(&self) -> usize {
        std::mem::size_of_val(self) + self.values.heap_bytes()
    }
}

impl Drop for AppendChain {
    fn drop(&mut self) {
        free_versions(self.head.next.take());
    }
}

/// Frees a list of versions iteratively (a recursive drop of a long chain would overflow
/// the stack). Returns the versions and bytes freed.
pub(super) fn free_versions(mut cursor: Option<Box<TupleVersion>>) -> (usize, usize) {
    let (mut count, mut bytes) = (0, 0);
    while let Some(mut version) = cursor {
        cursor = version.next.take();
        count += 1;
        bytes += version.footprint();
    }
    (count, bytes)
}

/// Versions behind `head`, by walking (for assertions; the chain keeps the count).
pub(super) fn count_versions(mut cursor: Option<&TupleVersion>) -> usize {
    let mut count = 0;
    while let Some(version) = cursor {
        count += 1;
        cursor = version.next.as_deref();
    }
    count
}

/// What a reader gets from a version: its values, or no row for a tombstone.
pub(super) fn lend(version: &TupleVersion) -> Option<RowView<'_>> {
    version
        .exists
        .then(|| RowView::packed(version.values.packed()))
}

/// A read that did not stop at the newest version: walks `behind` (the older versions,
/// newest first) to the first one `snapshot` sees, counting and timing the walk as the
/// delta storage counts the records it walks. Past the oldest: no row in this snapshot.
pub(super) fn read_behind<R>(
    behind: Option<&TupleVersion>,
    snapshot: &Snapshot<'_>,
    reader: impl FnOnce(Option<RowView<'_>>) -> R,
) -> (R, ReadCost) {
    let started = std::time::Instant::now();
    let mut walked = 0;
    let mut cursor = behind;
    let seen = loop {
        let Some(version) = cursor else { break None };
        walked += 1;
        if version.visible_to(snapshot) {
            break Some(version);
        }
        cursor = version.next.as_deref();
    };
    let cost = ReadCost {
        walked,
        reconstruct_nanos: started.elapsed().as_nanos() as u64,
        passed_obsolete: false,
    };
    (reader(seen.and_then(lend)), cost)
}

/// The columns older versions may hold differently from the newest (for index upkeep):
/// whole copies hold every column, so all of them once there is an older version.
pub(super) fn whole_copies_mask(older: usize, arity: usize) -> ColumnMask {
    if older == 0 {
        ColumnMask::EMPTY
    } else {
        ColumnMask::all(arity)
    }
}

/// The append-only, newest-to-oldest storage design.
pub(crate) struct AppendStorage;

impl AppendRow {
    fn read(&self) -> ReadGuard<'_, AppendChain> {
        self.latch.read()
    }

    fn write(&self) -> WriteGuard<'_, AppendChain> {
        self.latch.write()
    }
}

impl VersionStorage for AppendStorage {
    type Row = AppendRow;
    type Chain = AppendChain;
    type Guard<'a> = WriteGuard<'a, AppendChain>;
    const NAME: &'static str = "append-n2o";

    fn new_row(values: &[Value], owner: &Arc<TxnShared>) -> (Arc<AppendRow>, Created) {
        let (head, created) = insert_version(values, owner);
        let chain = AppendChain {
            head,
            older: 0,
            dead: false,
        };
        let row = Arc::new(AppendRow {
            cc: AtomicU64::new(0),
            latch: Latch::new(chain),
        });
        (row, created)
    }

    fn read<R>(
        row: &AppendRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let chain = row.read();
        if chain.head.visible_to(snapshot) {
            // The common path: the newest version, no record behind it touched, not timed.
            return (reader(lend(&chain.head)), ReadCost::default());
        }
        read_behind(chain.head.next.as_deref(), snapshot, reader)
    }

    fn write<'a>(
        row: &'a AppendRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
    ) -> WriteResult<WriteGuard<'a, AppendChain>> {
        let mut chain = row.write();
        if chain.dead {
            return WriteResult::RowGone;
        }
        let head = &chain.head;
        let mine = head.owned_by(owner);
        if let Some(refused) =
            super::refuse_write(mine, || head.commit_ts(), head.exists, snapshot, &intent)
        {
            return refused;
        }
        if mine {
            let replaced = chain.head.rewrite_own(intent);
            return WriteResult::Installed {
                chain,
                new_record: false,
                created: Created::default(),
                replaced: Some(replaced),
            };
        }
        let successor = chain.head.successor(owner, intent);
        let state = &mut *chain;
        let previous = std::mem::replace(&mut state.head, successor);
        let created = previous.cover();
        state.head.next = Some(previous);
        state.older += 1;
        WriteResult::Installed {
            chain,
            new_record: true,
            created,
            replaced: None,
        }
    }

    fn stamp(row: &AppendRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        // The version is usually the head, but once the owner's state says "committed" a
        // writer may append on top of it, and a pruner may even have dropped it: look for
        // it and stamp it only if it is still unstamped. The shared latch suffices.
        let chain = row.read();
        let mut cursor = Some(&*chain.head);
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
                    freed_bytes: 0, // an insert's bytes were never counted (see `new_row`)
                    // A live row with nothing behind it: no record to unlink, no row to bury.
                    nothing_to_finalize: std::ptr::eq(version, &*chain.head)
                        && chain.older == 0
                        && version.exists,
                };
            }
            cursor = version.next.as_deref();
        }
        StampReport::default() // dropped by a pruner already
    }

    fn cc_word(row: &AppendRow) -> &AtomicU64 {
        &row.cc
    }

    fn edit<R>(row: &AppendRow, edit: impl FnOnce(&mut AppendChain) -> R) -> R {
        let mut chain = row.write();
        edit(&mut chain)
    }
}

impl ChainEdit for AppendChain {
    fn values(&self) -> (RowView<'_>, bool) {
        (RowView::packed(self.head.values.packed()), self.head.exists)
    }

    fn chain_len(&self) -> usize {
        debug_assert!(
            self.older > 64 || self.older == count_versions(self.head.next.as_deref()),
            "the version count follows the chain"
        );
        self.older
    }

    fn chain_mask(&self) -> ColumnMask {
        whole_copies_mask(self.older, self.head.values.arity())
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        let mut cursor = Some(&*self.head);
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
        !self.head.exists && self.older == 0 && self.head.commit_ts().is_some_and(|ts| ts < bound)
    }

    fn mark_dead(&mut self) {
        debug_assert!(self.is_unreachable(u64::MAX));
        self.dead = true;
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        let (count, bytes) = truncate_behind(self.head.commit_ts(), &mut self.head.next, watermark);
        self.older -= count;
        (count, bytes)
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        let walked = self.older;
        if walked == 0 {
            return (0, None);
        }
        let freed = unlink_oldest_behind(self.head.commit_ts(), &mut self.head.next, watermark);
        if freed.is_some() {
            self.older -= 1;
        }
        (walked, freed)
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        let mut report = prune_versions(&mut self.head, active);
        self.older -= report.removed;
        debug_assert_eq!(self.older, count_versions(self.head.next.as_deref()));
        report.remaining = self.older;
        report
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        debug_assert!(
            self.head.owned_by(owner),
            "the writer's version is the head"
        );
        match self.head.next.take() {
            Some(previous) => {
                // The previous newest version is the row again, no longer a record.
                let freed_bytes = previous.footprint();
                let rolled_back = std::mem::replace(&mut self.head, previous);
                self.older -= 1;
                RollbackReport {
                    freed_records: 1,
                    freed_bytes,
                    written: rolled_back.values.to_packed(),
                }
            }
            None => {
                // An insert of a new key: the row stays (it is in the indexes) as a tombstone
                // every snapshot sees, so that the collector can bury it.
                let head = &mut self.head;
                debug_assert!(head.insert_record.load(Ordering::Relaxed));
                head.insert_record.store(false, Ordering::Relaxed);
                head.exists = false;
                head.ts.store(NEVER_EXISTED, Ordering::Release);
                RollbackReport {
                    freed_records: 1,
                    freed_bytes: 0, // never counted (see `new_row`)
                    written: head.values.to_packed(),
                }
            }
        }
    }
}

/// Steam's EPO (§4.3) over whole versions: keep exactly the versions some snapshot reads.
///
/// The readers are every active snapshot and every snapshot that can still begin (at or
/// after `active.horizon`). An uncommitted head is kept (its owner reads it); a version
/// committed at or after the horizon is kept (a snapshot we do not know of may sit just
/// after it); then each active snapshot, newest first, keeps the first version committed
/// before it. Versions no reader stops at are unlinked and freed: with whole copies there
/// is nothing to merge. Walking past the oldest version means "no row", so dropping the
/// tail is safe whenever no snapshot stops at it.
pub(super) fn prune_versions(head: &mut TupleVersion, active: &ActiveSnapshots) -> PruneReport {
    prune_behind(head.commit_ts(), &mut head.next, active)
}

/// [`prune_versions`] for a chain whose newest version is kept elsewhere (committed at
/// `newest_ts`, `None`: uncommitted) and `behind` holds the older versions, newest first.
pub(super) fn prune_behind(
    newest_ts: Option<u64>,
    behind: &mut Option<Box<TupleVersion>>,
    active: &ActiveSnapshots,
) -> PruneReport {
    let mut report = PruneReport::default();
    // Readers newest first: the horizon (standing for every snapshot that can still
    // begin), then the active snapshots. `unserved` is the newest one not yet given its
    // version.
    let mut readers = std::iter::once(active.horizon).chain(active.starts_desc().iter().copied());
    let mut unserved = readers.next();
    // Whether some unserved reader stops at a version committed at `ts`; serves them.
    let mut stops_here = |ts: u64, unserved: &mut Option<u64>| {
        let mut stops = false;
        while unserved.is_some_and(|reader| ts < reader) {
            stops = true;
            *unserved = readers.next();
        }
        stops
    };
    // The newest version is always kept (it is the row); it may serve readers too.
    if let Some(ts) = newest_ts {
        stops_here(ts, &mut unserved);
    }
    let mut link = behind;
    while let Some(version) = link.as_deref() {
        let ts = version
            .commit_ts()
            .expect("only the head can be uncommitted");
        let at_or_after_horizon = ts >= active.horizon;
        if at_or_after_horizon {
            report.blocked_by_horizon = true;
        }
        if stops_here(ts, &mut unserved) || at_or_after_horizon {
            link = &mut link.as_mut().expect("checked").next;
            continue;
        }
        if unserved.is_none() {
            // Every reader stopped before here: the rest of the chain is obsolete.
            let (count, bytes) = free_versions(link.take());
            report.removed += count;
            report.freed_bytes += bytes;
            break;
        }
        // No reader stops here: unlink it.
        let mut dropped = link.take().expect("checked");
        *link = dropped.next.take();
        report.removed += 1;
        report.freed_bytes += dropped.footprint();
    }
    report
}

/// Finalizing below `watermark` on a chain whose newest version, committed at `newest_ts`,
/// is kept elsewhere and `behind` holds the older ones, newest first: every snapshot at or
/// after the watermark stops at or before the first version committed below it, so
/// everything older goes. Returns the versions and bytes freed.
pub(super) fn truncate_behind(
    newest_ts: Option<u64>,
    behind: &mut Option<Box<TupleVersion>>,
    watermark: u64,
) -> (usize, usize) {
    let mut keeper_found = newest_ts.is_some_and(|ts| ts < watermark);
    let mut link = behind;
    loop {
        if keeper_found {
            return free_versions(link.take());
        }
        let Some(version) = link.as_deref() else {
            return (0, 0);
        };
        keeper_found = version.commit_ts().is_some_and(|ts| ts < watermark);
        link = &mut link.as_mut().expect("checked above").next;
    }
}

/// HyPer's removal on the same kind of chain: walks to the second-oldest version; the
/// oldest is obsolete when the one before it is already seen by every snapshot at or after
/// the watermark. Returns the bytes freed, if it removed the oldest.
pub(super) fn unlink_oldest_behind(
    newest_ts: Option<u64>,
    behind: &mut Option<Box<TupleVersion>>,
    watermark: u64,
) -> Option<usize> {
    let second_oldest_ts = match behind.as_deref() {
        None => return None,
        Some(only) if only.next.is_none() => newest_ts,
        Some(_) => {
            let mut link = behind.as_deref_mut().expect("checked");
            while link.next.as_deref().is_some_and(|v| v.next.is_some()) {
                link = link.next.as_deref_mut().expect("checked");
            }
            if link.commit_ts().is_none_or(|ts| ts >= watermark) {
                return None;
            }
            let (count, bytes) = free_versions(link.next.take());
            debug_assert_eq!(count, 1);
            return Some(bytes);
        }
    };
    if second_oldest_ts.is_none_or(|ts| ts >= watermark) {
        return None;
    }
    let (count, bytes) = free_versions(behind.take());
    debug_assert_eq!(count, 1);
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::test_steps;

    fn committed(values: &[Value], ts: u64) -> Arc<AppendRow> {
        test_steps::committed_row::<AppendStorage>(values, ts)
    }

    fn update_committed(row: &AppendRow, value: i64, start: u64, ts: u64) {
        test_steps::update_committed::<AppendStorage>(row, value, start, ts);
    }

    fn value_at(row: &AppendRow, start_ts: u64) -> Option<i64> {
        test_steps::value_at::<AppendStorage>(row, start_ts)
    }

    #[test]
    fn readers_see_the_version_committed_before_them_and_no_row_before_the_insert() {
        let row = committed(&[Value::U64(1), Value::I64(10)], 5);
        update_committed(&row, 20, 6, 8);
        update_committed(&row, 30, 9, 12);
        assert_eq!(value_at(&row, 5), None, "before the insert");
        assert_eq!(value_at(&row, 6), Some(10));
        assert_eq!(
            value_at(&row, 8),
            Some(10),
            "a commit at 8 is not seen at 8"
        );
        assert_eq!(value_at(&row, 9), Some(20));
        assert_eq!(value_at(&row, 100), Some(30));
        assert_eq!(AppendStorage::edit(&row, |c| c.chain_len()), 2);
    }

    #[test]
    fn pruning_keeps_exactly_what_each_snapshot_reads() {
        let row = committed(&[Value::U64(1), Value::I64(0)], 2);
        for (i, ts) in (3..=20).step_by(2).enumerate() {
            update_committed(&row, i as i64 + 1, ts, ts + 1);
        }
        // Versions committed at 2, 4, 6, ..., 20. Snapshots at 7 and 15; horizon 30.
        let before: Vec<_> = (1..32).map(|s| value_at(&row, s)).collect();
        let active = ActiveSnapshots::new(30, vec![7, 15]);
        let report = AppendStorage::edit(&row, |c| c.prune(&active));
        // Kept: the newest (seen from 30 on), the one 15 sees, the one 7 sees.
        assert_eq!(report.remaining, 2, "{report:?}");
        assert_eq!(report.removed, 7, "{report:?}");
        for snapshot in [7, 15, 30, 31] {
            assert_eq!(
                value_at(&row, snapshot),
                before[snapshot as usize - 1],
                "snapshot {snapshot}"
            );
        }
        // Truncating at 16 leaves what 16 and later read.
        let (count, _) = AppendStorage::edit(&row, |c| c.truncate(16));
        assert_eq!(count, 1);
        assert_eq!(value_at(&row, 16), before[15]);
        assert_eq!(value_at(&row, 30), before[29]);
    }

    #[test]
    fn unlinking_the_oldest_one_at_a_time_frees_what_truncating_frees() {
        let row = committed(&[Value::U64(1), Value::I64(0)], 2);
        for ts in (3..=11).step_by(2) {
            update_committed(&row, ts as i64, ts, ts + 1);
        }
        let mut freed = 0;
        while let (_, Some(_)) = AppendStorage::edit(&row, |c| c.unlink_oldest(9)) {
            freed += 1;
        }
        // Versions at 2, 4, 6, 8, 10, 12: snapshots from 9 on need the one at 8 and newer.
        assert_eq!(freed, 3);
        assert_eq!(value_at(&row, 9), Some(7));
        assert_eq!(AppendStorage::edit(&row, |c| c.chain_len()), 2);
    }

    #[test]
    fn a_rolled_back_insert_of_a_new_key_leaves_a_tombstone_no_snapshot_sees() {
        let owner = Arc::new(TxnShared::new());
        let (row, created) = AppendStorage::new_row(&[Value::U64(1), Value::I64(5)], &owner);
        assert_eq!(created.records, 1, "the insert's record until its commit");
        let report = AppendStorage::edit(&row, |c| c.rollback(&owner));
        assert_eq!(report.freed_records, 1);
        assert_eq!(value_at(&row, 1), None);
        assert!(AppendStorage::edit(&row, |c| c.is_unreachable(1)));
    }
}
