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
//! it exclusively to link or unlink versions. Only a version's timestamp is written under
//! the shared latch (by its transaction's stamp at commit), and it is atomic.
//!
//! Physical index pointers (Wu et al. §6.2): the chain holds its versions through `Arc`s
//! (the head, then a deque of the older ones, newest first: the links live in the chain,
//! not in the versions, so that a version an index entry shares never needs changing to
//! unlink another; `append_o2n.rs` walks the same chain from its oldest end, so both orders
//! have physical pointers). Under physical pointers every secondary index has an entry per version
//! that holds the exact version ([`VersionStorage::Exact`]); an unlinked version is freed
//! once nothing holds it: its entries are removed with it, but the ordered index (scc)
//! drops a removed entry's value only when it rewrites the entry's leaf. Invariants:
//! - A version is changed in place only through `Arc::get_mut`, i.e. while nothing else
//!   holds it; one that index entries hold is replaced by a copy instead (its own
//!   transaction's rewrite, a rolled-back insert), and the copy gets its own entries.
//! - A version no longer in the chain is read by no snapshot that can still read: it was
//!   unlinked because every such snapshot reads a newer one (or none), so a reader that
//!   follows a stale entry to it finds no row there.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use crate::sync::{Arc, AtomicBool, AtomicU64, Latch, ReadGuard, WriteGuard};

use crate::row::{self, tail_classes, InPlaceRow, NonInline, PackedRef, PackedRow, RowView};
use crate::schema::ColumnMask;
use crate::txn::state::{TxnOutcome, TxnShared, MAX_TIMESTAMP};
use crate::value::Value;
use crate::version::{
    ActiveSnapshots, ChainEdit, Created, GoneVersion, PruneReport, ReadCost, RollbackReport,
    Snapshot, StampReport, VersionStorage, WriteIntent, WriteResult,
};

/// A version of an append-only chain, shared with the index entries that point at it exactly
/// (physical pointers). A `std` `Arc` even under loom: only its unsizing coercion is
/// needed, and the version's own state is synchronized by the row's latch.
pub(crate) type SharedVersion = std::sync::Arc<TupleVersion>;

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
    head: SharedVersion,
    /// The versions behind the head, newest first (empty: no allocation).
    older: VecDeque<SharedVersion>,
    /// Set once the collector has removed the row from the indexes.
    dead: bool,
}

/// One whole copy of a row, as one transaction left it, in one allocation: `D` is the tail
/// that holds the values (`[u8; N]` while it is built, `[u8]` once boxed; see
/// [`tail_classes`]), so a reader that reaches the version has its values too.
pub(crate) struct TupleVersion<D: ?Sized + AsRef<[u8]> = [u8]> {
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
    /// The next version in time-travel's linked copies; always `None` in the append-only
    /// chains, which keep their versions in a deque.
    pub(super) next: Option<Box<TupleVersion>>,
    /// All the row's values (a tombstone keeps the values of the row it deleted). Last,
    /// because it holds the unsized tail.
    pub(super) values: InPlaceRow<D>,
}

/// What a new version's values are made of, and how its new long values are stored.
pub(super) enum NewValues<'a> {
    /// Given values (an insert).
    Given(&'a [Value], NonInline),
    /// A copy of the previous version's values with `changes` applied (an update; a delete
    /// with no changes). Unchanged out-of-line values are shared or copied as they are.
    Copied(PackedRef<'a>, &'a [(usize, Value)], NonInline),
}

/// How a chain holds its versions: `Box` in time-travel's linked copies,
/// [`SharedVersion`] in the append-only chains. Built from a version with a sized tail, then unsized.
pub(super) trait HeldVersion: Sized {
    fn hold<const N: usize>(version: TupleVersion<[u8; N]>) -> Self;
}

impl HeldVersion for Box<TupleVersion> {
    fn hold<const N: usize>(version: TupleVersion<[u8; N]>) -> Self {
        Box::new(version)
    }
}

impl HeldVersion for SharedVersion {
    fn hold<const N: usize>(version: TupleVersion<[u8; N]>) -> Self {
        std::sync::Arc::new(version)
    }
}

/// A new, unstamped version of `owner`, in the smallest tail class that holds its values.
pub(super) fn allocate_version<P: HeldVersion>(
    owner: &Arc<TxnShared>,
    exists: bool,
    values: NewValues<'_>,
) -> P {
    let needed = match &values {
        NewValues::Given(values, non_inline) => row::packed_len_of(values, *non_inline),
        // An update usually keeps the row's size: size the tail for the values copied.
        NewValues::Copied(packed, _, _) => packed.len_bytes(),
    };
    macro_rules! smallest_fitting {
        ($($class:literal)*) => {
            $(
                if needed <= $class {
                    return version_with_tail::<$class, P>(owner, exists, values);
                }
            )*
        };
    }
    tail_classes!(smallest_fitting);
    version_with_tail::<0, P>(owner, exists, values) // beyond every class: the values spill
}

fn version_with_tail<const N: usize, P: HeldVersion>(
    owner: &Arc<TxnShared>,
    exists: bool,
    values: NewValues<'_>,
) -> P {
    let in_place = match values {
        NewValues::Given(values, non_inline) => InPlaceRow::<[u8; N]>::new(values, non_inline),
        NewValues::Copied(packed, changes, non_inline) => {
            InPlaceRow::<[u8; N]>::changed(packed, changes, non_inline)
        }
    };
    P::hold(TupleVersion {
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
pub(super) fn insert_version<P: HeldVersion + std::ops::Deref<Target = TupleVersion>>(
    values: &[Value],
    owner: &Arc<TxnShared>,
    non_inline: NonInline,
) -> (P, Created) {
    let version: P = allocate_version(owner, true, NewValues::Given(values, non_inline));
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
    pub(super) fn rewrite_own(
        &mut self,
        intent: WriteIntent<'_>,
        non_inline: NonInline,
    ) -> PackedRow {
        let replaced = self.values.to_packed();
        match intent {
            WriteIntent::Update(_, changes) => self.values.apply_changes(changes, non_inline),
            WriteIntent::Delete => self.exists = false,
            WriteIntent::Insert(values) => {
                debug_assert_eq!(values.len(), self.values.arity());
                self.values.set_values(values, non_inline);
                self.exists = true;
            }
        }
        replaced
    }

    /// The version `owner`'s write makes of this one (the newest): a copy with the changes,
    /// a tombstone for a delete, the given values for an insert over a tombstone.
    pub(super) fn successor<P: HeldVersion>(
        &self,
        owner: &Arc<TxnShared>,
        intent: WriteIntent<'_>,
        non_inline: NonInline,
    ) -> P {
        let values = self.values.packed();
        match intent {
            WriteIntent::Update(_, changes) => {
                allocate_version(owner, true, NewValues::Copied(values, changes, non_inline))
            }
            WriteIntent::Delete => {
                allocate_version(owner, false, NewValues::Copied(values, &[], non_inline))
            }
            WriteIntent::Insert(given) => {
                debug_assert_eq!(given.len(), values.arity());
                allocate_version(owner, true, NewValues::Given(given, non_inline))
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

/// Versions in a linked list, by walking (for assertions; the chains keep the count).
pub(super) fn count_versions(first: Option<&TupleVersion>) -> usize {
    linked(first).count()
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
pub(super) fn read_behind<'v, R>(
    behind: impl IntoIterator<Item = &'v TupleVersion>,
    snapshot: &Snapshot<'_>,
    reader: impl FnOnce(Option<RowView<'_>>) -> R,
) -> (R, ReadCost) {
    let started = std::time::Instant::now();
    let mut walked = 0;
    let seen = behind.into_iter().find(|version| {
        walked += 1;
        version.visible_to(snapshot)
    });
    let cost = ReadCost {
        walked,
        reconstruct_nanos: started.elapsed().as_nanos() as u64,
        passed_obsolete: false,
    };
    (reader(seen.and_then(lend)), cost)
}

/// The versions of a linked list, first to last.
pub(super) fn linked(first: Option<&TupleVersion>) -> impl Iterator<Item = &TupleVersion> {
    std::iter::successors(first, |version| version.next.as_deref())
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

impl AppendChain {
    /// The chain of a new row: `owner`'s insert of `values`.
    pub(super) fn inserted(
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> (Self, Created) {
        let (head, created) = insert_version(values, owner, non_inline);
        let chain = AppendChain {
            head,
            older: VecDeque::new(),
            dead: false,
        };
        (chain, created)
    }

    /// The versions, newest first.
    pub(super) fn versions(&self) -> impl Iterator<Item = &SharedVersion> {
        std::iter::once(&self.head).chain(self.older.iter())
    }

    /// The number of versions, the newest included.
    pub(super) fn len(&self) -> usize {
        self.older.len() + 1
    }

    /// The `n`-th version from the oldest (`0`: the oldest; `len() - 1`: the newest).
    pub(super) fn nth_oldest(&self, n: usize) -> &SharedVersion {
        debug_assert!(n < self.len());
        match self.older.len().checked_sub(n + 1) {
            Some(back) => &self.older[back],
            None => &self.head,
        }
    }

    pub(super) fn dead(&self) -> bool {
        self.dead
    }

    /// Whether the version after the oldest committed below `watermark` (then every
    /// snapshot at or after it sees that one or a newer one, and the oldest is obsolete).
    pub(super) fn second_oldest_committed_below(&self, watermark: u64) -> bool {
        let second_oldest = match self.older.len() {
            0 => return false,
            1 => &self.head,
            n => &self.older[n - 2],
        };
        second_oldest.commit_ts().is_some_and(|ts| ts < watermark)
    }

    /// Installs `owner`'s write over the newest version, which the caller has reached:
    /// first-updater-wins and the existence rules, then an own rewrite in place (a copy
    /// when entries share the version) or a new newest version.
    pub(super) fn install(
        &mut self,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<()> {
        if self.dead {
            return WriteResult::RowGone;
        }
        let head = &self.head;
        let mine = head.owned_by(owner);
        if let Some(refused) =
            super::refuse_write(mine, || head.commit_ts(), head.exists, snapshot, &intent)
        {
            return refused;
        }
        if mine {
            let tag = tag_of(&self.head);
            let values = self.head_to_change().rewrite_own(intent, non_inline);
            return WriteResult::Installed {
                chain: (),
                new_record: false,
                created: Created::default(),
                replaced: Some(GoneVersion { values, tag }),
            };
        }
        let successor: SharedVersion = self.head.successor(owner, intent, non_inline);
        let previous = std::mem::replace(&mut self.head, successor);
        let created = previous.cover();
        self.older.push_front(previous);
        WriteResult::Installed {
            chain: (),
            new_record: true,
            created,
            replaced: None,
        }
    }

    /// Stamps `owner`'s version, found among `versions` (the chain's, in the order the
    /// storage looks), with `commit_ts` if it is still unstamped.
    pub(super) fn stamp_in<'v>(
        &self,
        mut versions: impl Iterator<Item = &'v SharedVersion>,
        owner: &Arc<TxnShared>,
        commit_ts: u64,
    ) -> StampReport {
        let Some(version) = versions.find(|v| v.owned_by(owner)) else {
            return StampReport::default(); // dropped by a pruner already
        };
        let _ =
            version
                .ts
                .compare_exchange(UNSTAMPED, commit_ts, Ordering::Release, Ordering::Relaxed);
        let folded = version.insert_record.swap(false, Ordering::Relaxed);
        StampReport {
            folded_records: usize::from(folded),
            freed_bytes: 0, // an insert's bytes were never counted (see `new_row`)
            // A live row with nothing behind it: no record to unlink, no row to bury.
            nothing_to_finalize: std::sync::Arc::ptr_eq(version, &self.head)
                && self.older.is_empty()
                && version.exists,
        }
    }

    /// What a physical entry's reader gets: `exact`'s values if `snapshot` reads exactly
    /// that version.
    pub(super) fn read_exact<R>(
        &self,
        exact: &SharedVersion,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let seen = self.is_read_by(exact, snapshot).then(|| lend(exact));
        (reader(seen.flatten()), ReadCost::default())
    }

    /// The newest version, for a new physical entry, if the row exists in it.
    pub(super) fn newest_exact(&self) -> Option<SharedVersion> {
        self.head.exists.then(|| std::sync::Arc::clone(&self.head))
    }

    /// Every version in which the row exists, with itself as the exact target.
    pub(super) fn for_each_exact(&self, visit: &mut dyn FnMut(RowView<'_>, &SharedVersion)) {
        for version in self.versions().filter(|v| v.exists) {
            visit(RowView::packed(version.values.packed()), version);
        }
    }

    /// Whether `snapshot` reads exactly `version` (physical pointers): it sees the version
    /// and not the newer one after it. A version no longer in the chain is read by no
    /// snapshot that can still read (module notes).
    fn is_read_by(&self, version: &SharedVersion, snapshot: &Snapshot<'_>) -> bool {
        if !version.visible_to(snapshot) {
            return false;
        }
        let mut newer: Option<&SharedVersion> = None;
        for candidate in self.versions() {
            if std::sync::Arc::ptr_eq(candidate, version) {
                return newer.is_none_or(|newer| !newer.visible_to(snapshot));
            }
            newer = Some(candidate);
        }
        false
    }

    /// The head, to change in place: itself if nothing else holds it, else (index entries
    /// share it) a copy that replaces it in the chain (module notes).
    fn head_to_change(&mut self) -> &mut TupleVersion {
        if std::sync::Arc::get_mut(&mut self.head).is_none() {
            let head = &self.head;
            let copy: SharedVersion = allocate_version(
                &head.owner,
                head.exists,
                NewValues::Copied(head.values.packed(), &[], NonInline::Packed),
            );
            copy.ts
                .store(head.ts.load(Ordering::Acquire), Ordering::Relaxed);
            copy.insert_record.store(
                head.insert_record.load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
            self.head = copy;
        }
        std::sync::Arc::get_mut(&mut self.head).expect("the copy is held by the chain only")
    }

    /// Gives back the deque's spare slots once the chain is short again: a row whose chain
    /// once grew long (behind a long reader) would otherwise keep that capacity, uncounted,
    /// until it dies.
    fn release_spare_capacity(&mut self) {
        let (len, capacity) = (self.older.len(), self.older.capacity());
        if capacity > SPARE_SLOTS && len * 4 <= capacity {
            self.older.shrink_to(len * 2);
        }
    }

    /// Counts the versions and bytes of `gone` (unlinked from this chain).
    fn count_gone(gone: impl IntoIterator<Item = SharedVersion>) -> (usize, usize) {
        gone.into_iter().fold((0, 0), |(count, bytes), version| {
            (count + 1, bytes + version.footprint())
        })
    }
}

/// Slots the deque of older versions may keep spare (see
/// [`AppendChain::release_spare_capacity`]).
const SPARE_SLOTS: usize = 8;

/// The tag that tells one exact version's index entries from another's: its address,
/// unique among the versions entries hold (an entry keeps its version allocated).
pub(super) fn tag_of(version: &SharedVersion) -> u64 {
    std::sync::Arc::as_ptr(version).cast::<u8>() as usize as u64
}

impl VersionStorage for AppendStorage {
    type Row = AppendRow;
    type Chain = AppendChain;
    type Guard<'a> = WriteGuard<'a, AppendChain>;
    type Exact = SharedVersion;
    const NAME: &'static str = "append-n2o";
    const PHYSICAL_POINTERS: bool = true;

    crate::version::heap_storage_shared!();

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
        read_behind(chain.older.iter().map(|v| &**v), snapshot, reader)
    }

    fn write<'a>(
        row: &'a AppendRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, AppendChain>> {
        // The newest version is the head: no walk.
        let mut chain = row.write();
        chain
            .install(snapshot, intent, owner, non_inline)
            .with_chain(chain)
    }

    fn stamp(row: &AppendRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        // The version is usually the head, but once the owner's state says "committed" a
        // writer may append on top of it, and a pruner may even have dropped it: look for
        // it and stamp it only if it is still unstamped. The shared latch suffices.
        let chain = row.read();
        chain.stamp_in(chain.versions(), owner, commit_ts)
    }

    fn cc_word(row: &AppendRow) -> &AtomicU64 {
        &row.cc
    }

    fn edit<R>(row: &AppendRow, edit: impl FnOnce(&mut AppendChain) -> R) -> R {
        let mut chain = row.write();
        edit(&mut chain)
    }

    fn newest_exact(chain: &AppendChain) -> Option<SharedVersion> {
        chain.newest_exact()
    }

    fn for_each_exact(chain: &AppendChain, visit: &mut dyn FnMut(RowView<'_>, &SharedVersion)) {
        chain.for_each_exact(visit)
    }

    fn exact_tag(exact: &SharedVersion) -> u64 {
        tag_of(exact)
    }

    fn read_exact<R>(
        row: &AppendRow,
        exact: &SharedVersion,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        row.read().read_exact(exact, snapshot, reader)
    }
}

impl crate::version::HeapStorage for AppendStorage {
    fn new_row(
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> (Arc<AppendRow>, Created) {
        let (chain, created) = AppendChain::inserted(values, owner, non_inline);
        let row = Arc::new(AppendRow {
            cc: AtomicU64::new(0),
            latch: Latch::new(chain),
        });
        (row, created)
    }
}

impl ChainEdit for AppendChain {
    fn values(&self) -> (RowView<'_>, bool) {
        (RowView::packed(self.head.values.packed()), self.head.exists)
    }

    fn chain_len(&self) -> usize {
        self.older.len()
    }

    fn chain_mask(&self) -> ColumnMask {
        whole_copies_mask(self.older.len(), self.head.values.arity())
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        for version in self.versions().filter(|v| v.exists) {
            visit(RowView::packed(version.values.packed()));
        }
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn is_unreachable(&self, bound: u64) -> bool {
        !self.head.exists
            && self.older.is_empty()
            && self.head.commit_ts().is_some_and(|ts| ts < bound)
    }

    fn mark_dead(&mut self) {
        debug_assert!(self.is_unreachable(u64::MAX));
        self.dead = true;
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        // The keeper is the first version committed below the watermark: every snapshot at
        // or after it stops there or before; everything older goes.
        let below = |version: &SharedVersion| version.commit_ts().is_some_and(|ts| ts < watermark);
        let keep = if below(&self.head) {
            0
        } else {
            match self.older.iter().position(below) {
                Some(keeper) => keeper + 1,
                None => return (0, 0),
            }
        };
        let gone = Self::count_gone(self.older.drain(keep..));
        self.release_spare_capacity();
        gone
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        let walked = self.older.len();
        let second_oldest = match walked {
            0 => return (0, None),
            1 => &self.head,
            _ => &self.older[walked - 2],
        };
        if second_oldest.commit_ts().is_none_or(|ts| ts >= watermark) {
            return (walked, None);
        }
        let oldest = self.older.pop_back().expect("checked");
        self.release_spare_capacity();
        (walked, Some(oldest.footprint()))
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        let mut decisions = PruneDecisions::new(self.head.commit_ts(), active);
        let mut report = PruneReport::default();
        let mut rest_obsolete = false;
        self.older.retain(|version| {
            let keep = !rest_obsolete && {
                let ts = version
                    .commit_ts()
                    .expect("only the head can be uncommitted");
                match decisions.decide(ts, &mut report) {
                    Decision::Keep => true,
                    Decision::Drop => false,
                    Decision::DropRest => {
                        rest_obsolete = true;
                        false
                    }
                }
            };
            if !keep {
                report.removed += 1;
                report.freed_bytes += version.footprint();
            }
            keep
        });
        self.release_spare_capacity();
        report.remaining = self.older.len();
        report
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        debug_assert!(
            self.head.owned_by(owner),
            "the writer's version is the head"
        );
        let tag = tag_of(&self.head);
        match self.older.pop_front() {
            Some(previous) => {
                // The previous newest version is the row again, no longer a record.
                let freed_bytes = previous.footprint();
                let rolled_back = std::mem::replace(&mut self.head, previous);
                RollbackReport {
                    freed_records: 1,
                    freed_bytes,
                    written: GoneVersion {
                        values: rolled_back.values.to_packed(),
                        tag,
                    },
                }
            }
            None => {
                // An insert of a new key: the row stays (it is in the indexes) as a tombstone
                // every snapshot sees, so that the collector can bury it.
                let head = self.head_to_change();
                debug_assert!(head.insert_record.load(Ordering::Relaxed));
                head.insert_record.store(false, Ordering::Relaxed);
                head.exists = false;
                head.ts.store(NEVER_EXISTED, Ordering::Release);
                RollbackReport {
                    freed_records: 1,
                    freed_bytes: 0, // never counted (see `new_row`)
                    written: GoneVersion {
                        values: head.values.to_packed(),
                        tag,
                    },
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
///
/// [`PruneDecisions`] makes the decisions, for the deque of the append-only chains
/// (`AppendChain::prune`) and the linked copies of time-travel ([`prune_behind`]).
///
/// What [`PruneDecisions::decide`] says of one version.
pub(super) enum Decision {
    Keep,
    /// No reader stops here: unlink it.
    Drop,
    /// Every reader stopped before here: this version and every older one are obsolete.
    DropRest,
}

/// Steam's EPO over one chain's versions behind the newest, newest first (see the notes
/// above [`Decision`]), whatever holds them.
pub(super) struct PruneDecisions<'a> {
    /// Readers newest first: the horizon (standing for every snapshot that can still
    /// begin), then the active snapshots.
    readers: std::iter::Chain<std::iter::Once<u64>, std::iter::Copied<std::slice::Iter<'a, u64>>>,
    /// The newest reader not yet given its version.
    unserved: Option<u64>,
    horizon: u64,
}

impl<'a> PruneDecisions<'a> {
    /// Decisions for a chain whose newest version (always kept: it is the row) committed
    /// at `newest_ts` (`None`: uncommitted); it may serve readers too.
    pub(super) fn new(newest_ts: Option<u64>, active: &'a ActiveSnapshots) -> Self {
        let mut readers =
            std::iter::once(active.horizon).chain(active.starts_desc().iter().copied());
        let unserved = readers.next();
        let mut decisions = PruneDecisions {
            readers,
            unserved,
            horizon: active.horizon,
        };
        if let Some(ts) = newest_ts {
            decisions.serve(ts);
        }
        decisions
    }

    /// Whether some unserved reader stops at a version committed at `ts`; serves them.
    fn serve(&mut self, ts: u64) -> bool {
        let mut stops = false;
        while self.unserved.is_some_and(|reader| ts < reader) {
            stops = true;
            self.unserved = self.readers.next();
        }
        stops
    }

    /// The decision for the next older version, committed at `ts`.
    pub(super) fn decide(&mut self, ts: u64, report: &mut PruneReport) -> Decision {
        let at_or_after_horizon = ts >= self.horizon;
        if at_or_after_horizon {
            report.blocked_by_horizon = true;
        }
        if self.serve(ts) || at_or_after_horizon {
            Decision::Keep
        } else if self.unserved.is_none() {
            Decision::DropRest
        } else {
            Decision::Drop
        }
    }
}

/// [`prune_versions`] for a chain whose newest version is kept elsewhere (committed at
/// `newest_ts`, `None`: uncommitted) and `behind` holds the older versions, newest first.
pub(super) fn prune_behind(
    newest_ts: Option<u64>,
    behind: &mut Option<Box<TupleVersion>>,
    active: &ActiveSnapshots,
) -> PruneReport {
    let mut report = PruneReport::default();
    let mut decisions = PruneDecisions::new(newest_ts, active);
    let mut link = behind;
    while let Some(version) = link.as_deref() {
        let ts = version
            .commit_ts()
            .expect("only the head can be uncommitted");
        match decisions.decide(ts, &mut report) {
            Decision::Keep => link = &mut link.as_mut().expect("checked").next,
            Decision::DropRest => {
                let (count, bytes) = free_versions(link.take());
                report.removed += count;
                report.freed_bytes += bytes;
                break;
            }
            Decision::Drop => {
                let mut dropped = link.take().expect("checked");
                *link = dropped.next.take();
                report.removed += 1;
                report.freed_bytes += dropped.footprint();
            }
        }
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
    use crate::version::HeapStorage;

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

    /// Regression (found in review): the deque of older versions kept the capacity of the
    /// longest chain the row ever had, so a row that once grew a long chain behind a long
    /// reader held that memory, uncounted, until it died.
    #[test]
    fn regression_a_chain_cut_short_gives_back_its_spare_slots() {
        let row = committed(&[Value::U64(1), Value::I64(0)], 2);
        for ts in (3..=401).step_by(2) {
            update_committed(&row, ts as i64, ts, ts + 1);
        }
        assert_eq!(AppendStorage::edit(&row, |c| c.chain_len()), 200);
        let (count, _) = AppendStorage::edit(&row, |c| c.truncate(1_000));
        assert_eq!(count, 200);
        let capacity = AppendStorage::edit(&row, |c| c.older.capacity());
        assert!(capacity <= SPARE_SLOTS, "capacity {capacity} after the cut");
    }

    #[test]
    fn a_rolled_back_insert_of_a_new_key_leaves_a_tombstone_no_snapshot_sees() {
        let owner = Arc::new(TxnShared::new());
        let (row, created) =
            AppendStorage::new_row(&[Value::U64(1), Value::I64(5)], &owner, NonInline::Packed);
        assert_eq!(created.records, 1, "the insert's record until its commit");
        let report = AppendStorage::edit(&row, |c| c.rollback(&owner));
        assert_eq!(report.freed_records, 1);
        assert_eq!(value_at(&row, 1), None);
        assert!(AppendStorage::edit(&row, |c| c.is_unreachable(1)));
    }
}
