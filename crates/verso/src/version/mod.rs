//! The version-storage seam: where the versions of a row live, how a reader finds the one
//! its snapshot sees, how a writer installs one, and how versions are unlinked.
//!
//! Contract every implementation keeps (checked by `tests/contract.rs`, `tests/model.rs` and the loom tests):
//! - `read` returns exactly the state of the row produced by the transactions committed
//!   before `snapshot.start_ts`, plus the snapshot owner's own writes; it never blocks on a
//!   running writer (it may wait the few instructions between a writer's "committing" mark
//!   and its timestamp).
//! - `write` either refuses (conflict, duplicate, not found, row gone) and changes nothing,
//!   or installs the change, leaves the row exclusively latched in the returned guard, and
//!   counts the bytes of version records it added.
//! - `rollback` restores the row exactly as it was before the transaction's first write.
//! - `prune` and `truncate` never change what any snapshot in the list (or at or after its
//!   horizon) reads; they return what they freed.
//!
//! - Every storage counts what it keeps besides the newest state of a row as *version
//!   records* ([`Created`], [`RollbackReport::freed_records`], [`StampReport::folded_records`],
//!   and the removals of [`ChainEdit`]): the statistics' live versions are those, so they
//!   return to zero once nothing old is needed, whatever the storage.
//!
//! Implementations: [`delta::DeltaStorage`] (default; HyPer/Steam undo-log deltas, newest to
//! oldest), [`append::AppendStorage`] (append-only whole copies, newest to oldest; Wu et
//! al. §4.1), [`append_o2n::AppendO2nStorage`] (the same, oldest to newest) and
//! [`time_travel::TimeTravelStorage`] (master in place, whole copies behind it; §4.2).

pub(crate) mod append;
pub(crate) mod append_nvm;
pub(crate) mod append_o2n;
pub(crate) mod delta;
pub(crate) mod delta_nvm;
pub(crate) mod linked;
#[cfg(all(test, loom))]
mod loom_tests;
pub(crate) mod tile_block;
pub(crate) mod time_travel;

use crate::sync::{Arc, AtomicU64};
use std::ops::DerefMut;

use crate::row::{NonInline, PackedRow, RowView};
use crate::schema::ColumnMask;
use crate::txn::state::TxnShared;
use crate::value::Value;

/// Who is reading: the snapshot timestamp, and the transaction whose own writes it sees.
#[derive(Clone, Copy)]
pub(crate) struct Snapshot<'a> {
    /// Sees every transaction with a commit timestamp strictly below this.
    pub(crate) start_ts: u64,
    /// The reading transaction's own state, if it has written anything.
    pub(crate) owner: Option<&'a TxnShared>,
    /// Cooperative cleaning (Wu et al. §5.1, 'coop'): a reclaim bound the reader knows
    /// (possibly stale, never above the true one); a storage that supports it reports in
    /// [`ReadCost::passed_obsolete`] whether the walk passed a version no snapshot at or
    /// after it applies. 0: do not look.
    pub(crate) obsolete_below: u64,
}

/// The snapshots that may still read old versions, as the pruner knows them.
///
/// Invariant: every transaction running now either has its start timestamp in `starts`, or
/// began at or after `horizon` (the clock value read *before* the slots were scanned).
#[derive(Clone, Debug, Default)]
pub(crate) struct ActiveSnapshots {
    pub(crate) horizon: u64,
    /// Distinct start timestamps below `horizon`, newest first.
    starts_desc: Vec<u64>,
}

impl ActiveSnapshots {
    /// Builds the list from the horizon and the start timestamps seen in the slots.
    pub(crate) fn new(horizon: u64, mut starts: Vec<u64>) -> Self {
        starts.retain(|&s| s < horizon);
        starts.sort_unstable_by(|a, b| b.cmp(a));
        starts.dedup();
        ActiveSnapshots {
            horizon,
            starts_desc: starts,
        }
    }

    pub(crate) fn starts_desc(&self) -> &[u64] {
        &self.starts_desc
    }
}

/// Version records a write (or an insert) created: what the row keeps besides its newest
/// state grew by this much.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Created {
    pub(crate) records: usize,
    pub(crate) bytes: usize,
}

/// A write a transaction asks to install.
pub(crate) enum WriteIntent<'a> {
    /// Change the listed columns (the mask is the set of columns assigned).
    Update(ColumnMask, &'a [(usize, Value)]),
    /// Delete the row.
    Delete,
    /// Insert the row over a deleted one with the same key.
    Insert(&'a [Value]),
}

/// Why a write was refused without conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Insert: the row exists in this transaction's view.
    DuplicateKey,
    /// Update or delete: the row does not exist in this transaction's view.
    NotFound,
    /// The storage has no room for the new version (a full persistent-memory region).
    NoSpace,
}

/// The outcome of [`VersionStorage::write`].
pub(crate) enum WriteResult<G> {
    /// Installed; the row stays exclusively latched in `chain` until it is dropped.
    Installed {
        chain: G,
        /// Whether this is the transaction's first write to the row (it joins the write set).
        new_record: bool,
        /// Version records added.
        created: Created,
        /// When the transaction overwrote its own earlier write to the row: the values it
        /// had in place (an uncommitted version that is now gone, so its index entries may
        /// be unneeded), including those of a row it had deleted.
        replaced: Option<GoneVersion>,
    },
    /// Another transaction wrote the row first (first-updater-wins).
    Conflict,
    /// Refused for a reason that is the caller's, not a race.
    Refused(Refusal),
    /// The collector removed the row from the indexes; look the key up again.
    RowGone,
    /// The row's newest version is being moved by a block-level collection (its block is
    /// frozen): nothing was written; try again once the move is done (the caller yields
    /// and looks the key up again).
    Retry,
}

impl WriteResult<()> {
    /// This outcome, with `chain` (the latched chain it was reached under) as the guard an
    /// installed write keeps.
    pub(crate) fn with_chain<G>(self, chain: G) -> WriteResult<G> {
        match self {
            WriteResult::Installed {
                chain: (),
                new_record,
                created,
                replaced,
            } => WriteResult::Installed {
                chain,
                new_record,
                created,
                replaced,
            },
            WriteResult::Conflict => WriteResult::Conflict,
            WriteResult::Refused(refusal) => WriteResult::Refused(refusal),
            WriteResult::RowGone => WriteResult::RowGone,
            WriteResult::Retry => WriteResult::Retry,
        }
    }
}

/// The write rules every storage applies to the newest version of a row, under its
/// exclusive latch: `None` if the write may go ahead, else the refusal to return.
///
/// First updater wins: unless the newest version is the writer's own (`mine`), it must be
/// committed (`newest_commit_ts`, asked only then) before the writer's snapshot. Then the
/// newest version is the writer's view of the row, and existence decides: an insert needs
/// the row absent, an update or delete needs it present.
pub(crate) fn refuse_write<G>(
    mine: bool,
    newest_commit_ts: impl FnOnce() -> Option<u64>,
    newest_exists: bool,
    snapshot: &Snapshot<'_>,
    intent: &WriteIntent<'_>,
) -> Option<WriteResult<G>> {
    if !mine && newest_commit_ts().is_none_or(|ts| ts >= snapshot.start_ts) {
        return Some(WriteResult::Conflict);
    }
    match (intent, newest_exists) {
        (WriteIntent::Insert(_), true) => Some(WriteResult::Refused(Refusal::DuplicateKey)),
        (WriteIntent::Update(..) | WriteIntent::Delete, false) => {
            Some(WriteResult::Refused(Refusal::NotFound))
        }
        _ => None,
    }
}

/// What finding a snapshot's version of a row cost a reader.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadCost {
    /// Version records walked.
    pub(crate) walked: usize,
    /// Nanoseconds spent reconstructing an older version from the chain (0 when the newest
    /// version was visible: that path is not timed, it is the common one).
    pub(crate) reconstruct_nanos: u64,
    /// The walk passed an obsolete version (see [`Snapshot::obsolete_below`]) and claimed
    /// the row for the cleaner ([`VersionStorage::claim_for_cleaning`]): the reader records
    /// it. Only storages with [`VersionStorage::COOPERATIVE_CLEANING`] set it.
    pub(crate) passed_obsolete: bool,
}

/// What a rollback undid.
pub(crate) struct RollbackReport {
    /// Version records the rollback removed.
    pub(crate) freed_records: usize,
    pub(crate) freed_bytes: usize,
    /// The values the transaction had in place (also when it had deleted the row, whose
    /// values stay in place): the caller drops index entries only they needed.
    pub(crate) written: GoneVersion,
}

/// A version that left a row: a transaction's own version, overwritten or rolled back.
pub(crate) struct GoneVersion {
    pub(crate) values: PackedRow,
    /// The tag of its physical index entries ([`VersionStorage::exact_tag`]); 0 under
    /// storages without physical pointers.
    pub(crate) tag: u64,
}

impl GoneVersion {
    /// A gone version of a storage without physical pointers.
    pub(crate) fn untagged(values: PackedRow) -> Self {
        GoneVersion { values, tag: 0 }
    }
}

/// The [`VersionStorage::Exact`] of storages without physical pointers: there is none.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NoExact {}

/// What eager pruning did to one chain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PruneReport {
    /// Records unlinked and freed (merged away or dropped).
    pub(crate) removed: usize,
    /// Bytes freed.
    pub(crate) freed_bytes: usize,
    /// Records left in the chain.
    pub(crate) remaining: usize,
    /// Whether a record committed at or after the list's horizon had to be kept as it is:
    /// the list is too old for this chain, and a fresher one would prune more.
    pub(crate) blocked_by_horizon: bool,
}

/// Operations on one row's chain under its exclusive latch: what garbage collection
/// (the mechanism in `gc/`) needs, whatever the storage.
pub(crate) trait ChainEdit {
    /// The newest values and whether the newest state is a live row.
    fn values(&self) -> (RowView<'_>, bool);
    /// Number of version records behind the newest state.
    fn chain_len(&self) -> usize;
    /// Union of the columns the chain's records hold.
    fn chain_mask(&self) -> ColumnMask;
    /// Calls `visit` with every version in which the row exists, newest first.
    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>));
    /// Whether the row has been removed from the indexes.
    fn is_dead(&self) -> bool;
    /// Whether no snapshot can ever see the row again (deleted, no chain left) and no
    /// transaction older than `bound` can conflict with its last committed write (a
    /// committed insert-and-delete leaves a tombstone born at its commit, which a
    /// transaction that began before it must conflict with; `bound` is at most every
    /// running snapshot, e.g. the watermark).
    fn is_unreachable(&self, bound: u64) -> bool;
    /// Marks an unreachable row as removed from the indexes.
    fn mark_dead(&mut self);
    /// Frees every record no snapshot at or after `watermark` applies. Returns the records
    /// and bytes freed.
    fn truncate(&mut self, watermark: u64) -> (usize, usize);
    /// Frees the oldest record if no snapshot at or after `watermark` applies it, finding it
    /// by walking the chain from the newest record, as HyPer removes a finalized version
    /// (Steam §5.1). Returns the records walked and the bytes freed (`None`: the oldest
    /// record is still needed, or there is none). Calling it until `None` frees what
    /// [`ChainEdit::truncate`] frees, at quadratic cost in the chain's length.
    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>);
    /// Eager pruning (Steam §4.3) against a list of active snapshots.
    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport;
    /// Undoes `owner`'s write to the row (its record must be the newest).
    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport;
    /// Cooperative cleaning: whether the chain's oldest version is obsolete to every
    /// snapshot at or after `watermark` (what a writer passed on its way to the newest).
    /// Answered only by storages with [`VersionStorage::COOPERATIVE_CLEANING`]; the
    /// collector that asks is refused at `open` for the others, which answer `false`.
    fn oldest_is_obsolete(&self, _watermark: u64) -> bool {
        false
    }
}

/// What stamping did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StampReport {
    /// Version records compacted away (the delta storage folds a committed insert's record
    /// into its row).
    pub(crate) folded_records: usize,
    /// Bytes of the version records compacted away (0: none).
    pub(crate) freed_bytes: usize,
    /// The row's chain is empty now and the row exists, so finalizing the transaction
    /// would find nothing to unlink or bury in it: the row need not be queued. (A row
    /// inserted and deleted by one transaction must still be queued, to be buried.)
    pub(crate) nothing_to_finalize: bool,
}

/// Which table a new row goes into, and the transaction inserting it (its MVTO id: its
/// start timestamp, which is also its commit timestamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NewRowContext {
    pub(crate) table: u32,
    pub(crate) txn_id: u64,
    /// Whether the table has secondary indexes.
    pub(crate) indexed: bool,
}

/// What a storage that keeps its data itself found at open
/// ([`VersionStorage::take_recovered`]).
pub(crate) struct Recovered<R: ?Sized> {
    /// The tables, in the order of their indexes.
    pub(crate) tables: Vec<(String, crate::schema::Schema)>,
    /// Each key's row, committed, with its table and its encoded primary key.
    pub(crate) rows: Vec<(u32, Vec<u8>, Arc<R>)>,
    /// The highest transaction id in the data: the clock must move past it.
    pub(crate) max_txn_id: u64,
}

/// What a block-level collection is told by the engine.
pub(crate) struct BlockGcContext<'a, R: ?Sized> {
    /// The id (start timestamp) of the transaction that just ended on this thread; `None`
    /// for `collect_garbage`.
    pub(crate) ended: Option<u64>,
    /// `collect_garbage`: collect every sealed block with an obsolete slot that is safe to
    /// collect, whatever the threshold and the queues' capacities.
    pub(crate) everything: bool,
    /// An exact list of the active snapshots, taken now.
    pub(crate) active: &'a dyn Fn() -> ActiveSnapshots,
    /// Threads with a slot (the queues' capacity is split over them).
    pub(crate) threads: usize,
    /// Finds rows by their values: relocation moves a row's newest version, and only the
    /// indexes know where the row is.
    pub(crate) rows: &'a dyn RowFinder<R>,
}

/// The engine's indexes, as a storage that moves versions needs them.
pub(crate) trait RowFinder<R: ?Sized> {
    /// The number of columns of table `table` (`None`: no such table).
    fn arity(&self, table: u32) -> Option<usize>;
    /// The row object the primary index holds for the key of `values` in table `table`.
    fn find(&self, table: u32, values: &RowView<'_>) -> Option<Arc<R>>;
}

/// A storage whose rows hold all their versions on the heap: nothing shared beside them,
/// and a new row that is always stored.
pub(crate) trait HeapStorage: VersionStorage<Shared = ()> {
    /// A new row inserted by `owner` (uncommitted), its long values stored as `non_inline`
    /// says. Returns it and the version records created.
    fn new_row(
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> (Arc<Self::Row>, Created);
}

/// The [`VersionStorage`] items every [`HeapStorage`] implements alike.
macro_rules! heap_storage_shared {
    () => {
        type Shared = ();

        fn open_shared(_options: &crate::Options) -> crate::error::Result<()> {
            Ok(())
        }

        fn insert_row(
            _shared: &(),
            _context: crate::version::NewRowContext,
            values: &[crate::value::Value],
            owner: &crate::sync::Arc<crate::txn::state::TxnShared>,
            non_inline: crate::row::NonInline,
        ) -> crate::error::Result<(crate::sync::Arc<Self::Row>, crate::version::Created)> {
            Ok(<Self as crate::version::HeapStorage>::new_row(
                values, owner, non_inline,
            ))
        }
    };
}
pub(crate) use heap_storage_shared;

/// A version-storage design.
pub(crate) trait VersionStorage: Send + Sync + 'static {
    /// One row, as the indexes point at it (through an `Arc`; it may be unsized).
    type Row: ?Sized + Send + Sync + 'static;
    /// The row's latched state, for chain edits.
    type Chain: ChainEdit + ?Sized;
    /// An exclusive latch on a row after a write.
    type Guard<'a>: DerefMut<Target = Self::Chain>
    where
        Self: 'a;
    /// What a physical index pointer holds (Wu et al. §6.2): one exact version of a row.
    /// [`NoExact`] for storages without physical pointers.
    type Exact: Clone + Send + Sync + 'static;
    /// The design's name in configuration and reports.
    const NAME: &'static str;
    /// Whether index entries can point at exact versions (Wu et al. §6.2: "only applicable
    /// for append-only storage"). `open` refuses physical pointers for the others, whose
    /// physical-pointer methods below are then never called.
    const PHYSICAL_POINTERS: bool = false;
    /// Whether a chain walk meets the obsolete versions first, so that readers and writers
    /// can spot them on their way (Wu et al. §5.1: cooperative cleaning "only works for
    /// the O2N append-only storage"). The 'coop' collector is refused for the others.
    const COOPERATIVE_CLEANING: bool = false;

    /// What the storage keeps beside its rows: `()` for the storages whose rows hold
    /// everything ([`HeapStorage`]); a region, its allocator and per-thread append state for
    /// a storage whose versions live outside the rows.
    type Shared: Send + Sync + 'static;

    /// The shared state of a new database opened with `options`.
    fn open_shared(options: &crate::Options) -> crate::error::Result<Self::Shared>;

    /// A new row inserted by `owner` (uncommitted) into the table and as the transaction
    /// `context` names, its long values stored as `non_inline` says. Returns it and the
    /// version records created, or why it could not be stored (a full region); nothing is
    /// changed then.
    fn insert_row(
        shared: &Self::Shared,
        context: NewRowContext,
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> crate::error::Result<(Arc<Self::Row>, Created)>;

    /// `row`, made by [`VersionStorage::insert_row`] for `owner`, was never published (the
    /// key had a row object already, which the insert writes over instead): its version is
    /// no one's. Nothing to do for the heap storages, whose row is simply dropped.
    fn discard_unpublished(_row: &Self::Row, _owner: &TxnShared) {}

    /// Records a new table (its index and its validated schema) in the storage's own
    /// catalog, durably, before the engine creates it: for a storage that keeps its data
    /// itself (persistent memory). An error fails the creation. Nothing for the others,
    /// whose catalog is the log's.
    fn record_table(
        _shared: &Self::Shared,
        _index: u32,
        _schema: &crate::schema::TableSchema,
    ) -> crate::error::Result<()> {
        Ok(())
    }

    /// What a storage that keeps its data itself found in it at open (tables and each
    /// key's newest committed version), taken once by the engine's recovery; `None` for a
    /// new database and for the other storages.
    fn take_recovered(_shared: &Self::Shared) -> Option<Recovered<Self::Row>> {
        None
    }

    /// The counters of the storage's persistent-memory region, if it has one.
    fn persistent_memory_stats(_shared: &Self::Shared) -> Option<crate::pmem::PmStats> {
        None
    }

    /// Versions and their bytes the storage freed without a chain walk reporting them
    /// (the delta-nvm storage's partitions, released whole), since it opened: the engine
    /// counts them as reclaimed. Nothing for the others.
    fn reclaimed_outside_chains(_shared: &Self::Shared) -> (u64, u64) {
        (0, 0)
    }

    /// Block-level collection (tb-collect, `gc/tb_collect.rs`): called by the engine on a
    /// thread after each of its transactions ends, and by `collect_garbage`, only for a
    /// collector with `Collector::BLOCK_LEVEL` (`Options::validate` pairs such collectors
    /// with storages that implement it). Returns whether it did any work (scanned, froze,
    /// relocated or freed). Nothing for the others.
    fn collect_blocks(_shared: &Self::Shared, _context: &BlockGcContext<'_, Self::Row>) -> bool {
        false
    }

    /// After the engine adopted what [`VersionStorage::take_recovered`] gave (the rows are
    /// in its indexes): finishes the work a crash interrupted that needs them (TB-Collect's
    /// Algorithm 3: a collection's frozen blocks), whatever the collector. Nothing for the
    /// others.
    fn finish_recovery(_shared: &Self::Shared, _context: &BlockGcContext<'_, Self::Row>) {}

    /// Makes `owner`'s writes durable before its commit becomes visible: called by the
    /// protocols that support such a storage (`Options::validate` refuses the others)
    /// between the transaction's "committing" mark and its commit mark. An error fails the
    /// commit. Nothing to do for the storages whose durability is the redo log's.
    fn commit_durably(
        _shared: &Self::Shared,
        _owner: &TxnShared,
        _txn_id: u64,
    ) -> crate::error::Result<()> {
        Ok(())
    }

    /// Calls `reader` with the version `snapshot` sees (`None`: no row in that snapshot).
    /// Returns its result and what finding the version cost.
    fn read<R>(
        row: &Self::Row,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost);

    /// Installs a write of `owner` (whose snapshot is `snapshot`) into the row, the new
    /// long values stored as `non_inline` says (unchanged ones stay as they are).
    fn write<'a>(
        row: &'a Self::Row,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<Self::Guard<'a>>;

    /// Stamps `owner`'s record in the row with its commit timestamp (after the owner's state
    /// says committed; readers are correct before and after). A storage may then compact
    /// the record (the delta storage folds a committed insert into the row's birth
    /// timestamp).
    fn stamp(row: &Self::Row, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport;

    /// Runs `edit` on the row's chain under its exclusive latch.
    fn edit<R>(row: &Self::Row, edit: impl FnOnce(&mut Self::Chain) -> R) -> R;

    /// The row's concurrency-control word, 0 when the row is created: the read timestamp
    /// and write lock of MVTO, the read count and write lock of MV2PL (`cc/mvto.rs`,
    /// `cc/mv2pl.rs`); unused by the other protocols. The storage only keeps it.
    fn cc_word(row: &Self::Row) -> &AtomicU64;

    /// Cooperative cleaning: marks the row as recorded for the cleaner. Returns `true` if
    /// it was not already (the caller then records it, so a row waits in the cleaner's
    /// list at most once). Storages without [`Self::COOPERATIVE_CLEANING`] never claim.
    fn claim_for_cleaning(_row: &Self::Row) -> bool {
        false
    }

    /// Cooperative cleaning: the cleaner took the row out of its list (before cleaning
    /// it, so a walk after the cleaning can record it again).
    fn release_from_cleaning(_row: &Self::Row) {}

    /// Physical pointers: the newest version, for the entries of a new version (`None`:
    /// a tombstone, which no entry points at).
    fn newest_exact(_chain: &Self::Chain) -> Option<Self::Exact> {
        None
    }

    /// Physical pointers: every version in which the row exists, newest first.
    fn for_each_exact(_chain: &Self::Chain, _visit: &mut dyn FnMut(RowView<'_>, &Self::Exact)) {}

    /// Physical pointers: what tells this version's index entries from the row's other
    /// versions' (unique among the versions entries hold).
    fn exact_tag(_exact: &Self::Exact) -> u64 {
        unreachable!("{} has no physical pointers", Self::NAME)
    }

    /// Physical pointers: calls `reader` with `exact`'s values if `snapshot` reads exactly
    /// that version of `row`, else with `None`.
    fn read_exact<R>(
        _row: &Self::Row,
        _exact: &Self::Exact,
        _snapshot: &Snapshot<'_>,
        _reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        unreachable!("{} has no physical pointers", Self::NAME)
    }
}

/// Single-threaded steps on one row of any storage, for the storages' unit tests: a row
/// `(1, value)` committed at a timestamp, updates of its second column committed at given
/// timestamps, and the value a snapshot reads.
#[cfg(test)]
pub(crate) mod test_steps {
    use super::{HeapStorage, Snapshot, VersionStorage, WriteIntent, WriteResult};
    use crate::row::NonInline;
    use crate::schema::ColumnMask;
    use crate::sync::Arc;
    use crate::txn::state::TxnShared;
    use crate::value::Value;

    /// A row inserted by a transaction that committed at `ts`.
    pub(crate) fn committed_row<V: HeapStorage>(values: &[Value], ts: u64) -> Arc<V::Row> {
        let owner = Arc::new(TxnShared::new());
        let (row, _) = V::new_row(values, &owner, NonInline::Packed);
        owner.mark_committing();
        owner.mark_committed(ts);
        V::stamp(&row, &owner, ts);
        row
    }

    /// Column 1 set to `value` by a transaction that began at `start` and committed at `ts`.
    pub(crate) fn update_committed<V: VersionStorage>(
        row: &V::Row,
        value: i64,
        start: u64,
        ts: u64,
    ) {
        let owner = Arc::new(TxnShared::new());
        let snapshot = Snapshot {
            start_ts: start,
            owner: None,
            obsolete_below: 0,
        };
        let changes = [(1, Value::I64(value))];
        let mask = ColumnMask::from_columns(&[1]);
        match V::write(
            row,
            &snapshot,
            WriteIntent::Update(mask, &changes),
            &owner,
            NonInline::Packed,
        ) {
            WriteResult::Installed { .. } => {}
            _ => panic!("the update installs"),
        }
        owner.mark_committing();
        owner.mark_committed(ts);
        V::stamp(row, &owner, ts);
    }

    /// Column 1 as a snapshot at `start_ts` reads it (`None`: no row).
    pub(crate) fn value_at<V: VersionStorage>(row: &V::Row, start_ts: u64) -> Option<i64> {
        let snapshot = Snapshot {
            start_ts,
            owner: None,
            obsolete_below: 0,
        };
        V::read(row, &snapshot, |v| {
            v.map(|v| v.get(1).as_i64().expect("an i64"))
        })
        .0
    }
}
