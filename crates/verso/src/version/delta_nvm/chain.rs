//! A row of the delta-nvm storage and its chain (`DeltaNvmRow`, `DeltaNvmChain`), and the
//! `VersionStorage` and `ChainEdit` implementations over them. The main heap, the
//! partitions and the index are the store's (`mod.rs`); the invariants D1-D4 and P1-P3
//! stated there hold here.
//!
//! A walk behind the newest version pins each partition it reads (`DeltaStore::locate`)
//! and drops the pin only once it is past the version, or once the reader it lent the
//! version to returned.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use super::{DeltaStore, Located, MAIN_BEGIN, MAIN_META};
use super::{EXISTS, NEVER_EXISTED, NO_LINK};
use crate::error::Result;
use crate::pmem::PmStats;
use crate::row::{NonInline, PackedRef, PackedRow, RowView};
use crate::schema::ColumnMask;
use crate::sync::{Arc, WriteGuard};
use crate::txn::state::{TxnOutcome, TxnShared};
use crate::value::Value;
use crate::version::append::whole_copies_mask;
use crate::version::linked::LatchedRow;
use crate::version::{
    ActiveSnapshots, BlockGcContext, ChainEdit, Created, GoneVersion, NewRowContext, PruneReport,
    ReadCost, Refusal, RollbackReport, Snapshot, StampReport, VersionStorage, WriteIntent,
    WriteResult,
};

/// One row, as the indexes point at it.
pub(crate) type DeltaNvmRow = LatchedRow<DeltaNvmChain>;

/// A row's chain, under its latch.
pub(crate) struct DeltaNvmChain {
    store: std::sync::Arc<DeltaStore>,
    table: u32,
    arity: usize,
    /// The row's main heap slot (the newest version, in place).
    main: u64,
    /// The owner of an uncommitted newest version.
    pending: Option<Arc<TxnShared>>,
    /// The newest is a new key's insert not yet folded by its commit (it counts as a record).
    insert_record: bool,
    /// Set once the collector removed the row from the indexes: no version of it is read
    /// again.
    dead: bool,
    /// The row's before-images by partition, newest first: (partition, how many). Kept so
    /// that the chain's length is known without a walk: runs in released partitions
    /// (below `oldest_live`, P2) are dropped as the row is next touched (P3 makes them the
    /// oldest).
    runs: VecDeque<(u64, u32)>,
    /// Where walks stop (D5): the link behind the first version committed below the last
    /// finalizing's watermark (no snapshot at or after it reads further), a cut kept in
    /// DRAM only; `NO_LINK` when nothing was cut.
    cut_at: (u64, u64),
}

impl DeltaNvmChain {
    /// The newest version's link, as the main heap holds it.
    fn head_link(&self) -> (u64, u64) {
        self.store.main_link(self.main)
    }

    /// The link to the newest old version a walk may reach (`NO_LINK`: none).
    fn older_link(&self) -> (u64, u64) {
        let link = self.head_link();
        if link == self.cut_at {
            NO_LINK
        } else {
            link
        }
    }

    /// The newest version's commit timestamp, if it committed.
    fn head_commit_ts(&self) -> Option<u64> {
        if let Some(owner) = &self.pending {
            return match owner.outcome() {
                TxnOutcome::Committed(ts) => Some(ts),
                _ => None,
            };
        }
        Some(self.store.main_begin(self.main))
    }

    fn mine(&self, owner: &TxnShared) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| std::ptr::eq(&**p, owner))
    }

    fn head_visible(&self, snapshot: &Snapshot<'_>) -> bool {
        if snapshot.owner.is_some_and(|me| self.mine(me)) {
            return true;
        }
        self.head_commit_ts()
            .is_some_and(|ts| ts < snapshot.start_ts)
    }

    #[allow(unsafe_code)]
    fn packed<'a>(&self, contents: &'a [u8]) -> PackedRef<'a> {
        // SAFETY: every version's contents are a row this storage packed with
        // `NonInline::Packed` for the row's table (of `self.arity` columns), copied byte
        // for byte into before-images and index entries, and never changed while readable
        // (D1, D2, D4); nothing is read back from an earlier process.
        unsafe { PackedRef::from_stored(contents, self.arity) }
    }

    fn newest_values(&self) -> PackedRef<'_> {
        self.packed(self.store.main_contents(self.main))
    }

    /// Drops the runs of released partitions (P2, P3: they are the oldest).
    fn trim_runs(&mut self) {
        let oldest_live = self.store.partitions.oldest_live.load(Ordering::SeqCst);
        while self
            .runs
            .back()
            .is_some_and(|&(partition, _)| partition < oldest_live)
        {
            self.runs.pop_back();
        }
    }

    /// Keeps the newest `versions` old versions in the runs (the rest were cut).
    fn keep_runs(&mut self, versions: usize) {
        let mut left = versions;
        let mut kept = 0;
        for (_, count) in self.runs.iter_mut() {
            if left == 0 {
                break;
            }
            let take = (*count as usize).min(left);
            *count = take as u32;
            left -= take;
            kept += 1;
        }
        self.runs.truncate(kept);
    }

    /// Visits the old versions newest first, each pinned while `visit` sees it; `visit`
    /// returns `true` to stop (the pin of the version it stopped at is kept and returned).
    fn walk(&self, mut visit: impl FnMut(Located) -> bool) -> (Option<Located>, usize) {
        let store = &self.store;
        let mut link = self.older_link();
        let mut walked = 0;
        while link != self.cut_at {
            let Some(located) = store.locate(link) else {
                break;
            };
            walked += 1;
            if visit(located) {
                return (Some(located), walked);
            }
            link = store.old_link(located);
            store.unpin(located);
        }
        (None, walked)
    }

    /// The values `intent` makes of the newest version's.
    fn successor_values(&self, intent: &WriteIntent<'_>) -> (PackedRow, bool) {
        let current = self.newest_values();
        match intent {
            WriteIntent::Update(_, changes) => {
                (current.with_changes(changes, NonInline::Packed), true)
            }
            WriteIntent::Delete => (PackedRow::copy_of(current), false),
            WriteIntent::Insert(values) => {
                (PackedRow::from_values(values, NonInline::Packed), true)
            }
        }
    }

    fn install(
        &mut self,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
    ) -> WriteResult<()> {
        if self.dead {
            return WriteResult::RowGone;
        }
        let mine = self.mine(owner);
        if let Some(refused) = crate::version::refuse_write(
            mine,
            || self.head_commit_ts(),
            self.store.main_exists(self.main),
            snapshot,
            &intent,
        ) {
            return refused;
        }
        let txn_id = snapshot.start_ts;
        let (values, exists) = self.successor_values(&intent);
        let store = std::sync::Arc::clone(&self.store);
        let table = self.table;
        store.with_appender(|appender| {
            // The transaction's own newest version is rewritten in place (its before-image,
            // the version it covered, stays as it is); another's is appended to the open
            // partition first.
            let replaced = mine.then(|| PackedRow::copy_of(self.newest_values()));
            let appended = if mine {
                None
            } else {
                match store.append_before_image(appender, self.main, txn_id) {
                    Ok(appended) => Some(appended),
                    Err(_) => return WriteResult::Refused(Refusal::NoSpace),
                }
            };
            let link = appended.map_or_else(|| self.head_link(), |(link, _)| link);
            let mut main = Some(self.main);
            let stored = store.store_main(
                appender,
                (table, &mut main),
                (txn_id, link),
                (values.packed().bytes(), exists),
            );
            if stored.is_err() {
                if let Some((link, _)) = appended {
                    store.abort_before_image(appender, link);
                }
                return WriteResult::Refused(Refusal::NoSpace);
            }
            self.main = main.expect("stored");
            let Some((link, bytes)) = appended else {
                return WriteResult::Installed {
                    chain: (),
                    new_record: false,
                    created: Created::default(),
                    replaced: replaced.map(GoneVersion::untagged),
                };
            };
            self.trim_runs();
            match self.runs.front_mut() {
                Some((partition, count)) if *partition == link.0 => *count += 1,
                _ => self.runs.push_front((link.0, 1)),
            }
            let created = Created {
                records: usize::from(!std::mem::take(&mut self.insert_record)),
                bytes: bytes as usize,
            };
            self.pending = Some(Arc::clone(owner));
            WriteResult::Installed {
                chain: (),
                new_record: true,
                created,
                replaced: None,
            }
        })
    }
}

/// The delta-nvm storage design.
pub(crate) struct DeltaNvmStorage;

impl VersionStorage for DeltaNvmStorage {
    type Row = DeltaNvmRow;
    type Chain = DeltaNvmChain;
    type Guard<'a> = WriteGuard<'a, DeltaNvmChain>;
    type Exact = crate::version::NoExact;
    type Shared = std::sync::Arc<DeltaStore>;
    const NAME: &'static str = "delta-nvm";

    fn open_shared(options: &crate::Options) -> Result<std::sync::Arc<DeltaStore>> {
        Ok(std::sync::Arc::new(DeltaStore::open(options)?))
    }

    fn insert_row(
        shared: &std::sync::Arc<DeltaStore>,
        context: NewRowContext,
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> Result<(Arc<DeltaNvmRow>, Created)> {
        debug_assert_eq!(
            non_inline,
            NonInline::Packed,
            "D4: validate refuses the others"
        );
        let packed = PackedRow::from_values(values, NonInline::Packed);
        let mut main = None;
        shared.with_appender(|appender| {
            shared.store_main(
                appender,
                (context.table, &mut main),
                (context.txn_id, NO_LINK),
                (packed.packed().bytes(), true),
            )
        })?;
        let chain = DeltaNvmChain {
            store: std::sync::Arc::clone(shared),
            table: context.table,
            arity: values.len(),
            main: main.expect("stored"),
            pending: Some(Arc::clone(owner)),
            insert_record: true,
            dead: false,
            runs: VecDeque::new(),
            cut_at: NO_LINK,
        };
        Ok(LatchedRow::inserted(chain))
    }

    fn read<R>(
        row: &DeltaNvmRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let chain = row.read();
        if chain.dead {
            return (reader(None), ReadCost::default());
        }
        if chain.head_visible(snapshot) {
            let view = chain
                .store
                .main_exists(chain.main)
                .then(|| RowView::packed(chain.newest_values()));
            return (reader(view), ReadCost::default());
        }
        let started = std::time::Instant::now();
        let store = &chain.store;
        let (found, walked) = chain.walk(|located| store.old_begin(located) < snapshot.start_ts);
        let cost = ReadCost {
            walked,
            reconstruct_nanos: started.elapsed().as_nanos() as u64,
            passed_obsolete: false,
        };
        let Some(located) = found else {
            return (reader(None), cost);
        };
        // Lent while pinned (D2); a stub's contents no snapshot that reaches it reads
        // (`version_index.rs`): no row, as for a version nothing older is kept of.
        let view = match store.contents_of(located) {
            Some(contents) if store.old_exists(located) => {
                Some(RowView::packed(chain.packed(contents)))
            }
            _ => None,
        };
        let result = reader(view);
        store.unpin(located);
        (result, cost)
    }

    fn write<'a>(
        row: &'a DeltaNvmRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, DeltaNvmChain>> {
        debug_assert_eq!(
            non_inline,
            NonInline::Packed,
            "D4: validate refuses the others"
        );
        let mut chain = row.write();
        chain.install(snapshot, intent, owner).with_chain(chain)
    }

    fn stamp(row: &DeltaNvmRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        let mut chain = row.write();
        if !chain.mine(owner) {
            return StampReport::default();
        }
        // MVTO: the id written with the version is its commit timestamp; nothing to stamp.
        debug_assert_eq!(chain.store.main_begin(chain.main), commit_ts);
        chain.pending = None;
        let folded = std::mem::take(&mut chain.insert_record);
        StampReport {
            folded_records: usize::from(folded),
            freed_bytes: 0,
            nothing_to_finalize: chain.store.main_exists(chain.main)
                && chain.older_link() == NO_LINK,
        }
    }

    fn commit_durably(
        shared: &std::sync::Arc<DeltaStore>,
        _owner: &TxnShared,
        _txn_id: u64,
    ) -> Result<()> {
        shared.persist()
    }

    fn discard_unpublished(row: &DeltaNvmRow, owner: &TxnShared) {
        // The row's only version is the insert's, which no one can read: its slot goes
        // back to the reuse list, and the row is never read again.
        let mut chain = row.write();
        debug_assert!(chain.mine(owner) && chain.head_link() == NO_LINK);
        chain.store.free_main(chain.table, chain.main);
        chain.dead = true;
    }

    fn persistent_memory_stats(shared: &std::sync::Arc<DeltaStore>) -> Option<PmStats> {
        Some(shared.stats())
    }

    fn collect_blocks(
        shared: &std::sync::Arc<DeltaStore>,
        context: &BlockGcContext<'_, DeltaNvmRow>,
    ) -> bool {
        shared.collect(context.everything, context.active)
    }

    fn reclaimed_outside_chains(shared: &std::sync::Arc<DeltaStore>) -> (u64, u64) {
        shared.released()
    }

    fn edit<R>(row: &DeltaNvmRow, edit: impl FnOnce(&mut DeltaNvmChain) -> R) -> R {
        edit(&mut row.write())
    }

    fn cc_word(row: &DeltaNvmRow) -> &crate::sync::AtomicU64 {
        &row.cc
    }
}

impl ChainEdit for DeltaNvmChain {
    fn values(&self) -> (RowView<'_>, bool) {
        debug_assert!(!self.dead, "a buried row's versions are not read");
        (
            RowView::packed(self.newest_values()),
            self.store.main_exists(self.main),
        )
    }

    /// The before-images in partitions not released (the index's copies are for the long
    /// snapshots that need them, not part of the chain).
    fn chain_len(&self) -> usize {
        let oldest_live = self.store.partitions.oldest_live.load(Ordering::SeqCst);
        self.runs
            .iter()
            .filter(|&&(partition, _)| partition >= oldest_live)
            .map(|&(_, count)| count as usize)
            .sum()
    }

    fn chain_mask(&self) -> ColumnMask {
        whole_copies_mask(self.chain_len(), self.arity)
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        if self.dead {
            return;
        }
        if self.store.main_exists(self.main) {
            visit(RowView::packed(self.newest_values()));
        }
        let store = &self.store;
        self.walk(|located| {
            if store.old_exists(located) {
                if let Some(contents) = store.contents_of(located) {
                    visit(RowView::packed(self.packed(contents)));
                }
            }
            false
        });
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn is_unreachable(&self, bound: u64) -> bool {
        !self.store.main_exists(self.main)
            && self.older_link() == NO_LINK
            && self.head_commit_ts().is_some_and(|ts| ts < bound)
    }

    fn mark_dead(&mut self) {
        debug_assert!(self.is_unreachable(u64::MAX));
        // Out of the indexes: no one reads the row again; its main heap slot is reused.
        self.dead = true;
        self.store.free_main(self.table, self.main);
    }

    /// Versions go with their partitions, not one by one (OneShot walks no chain to free
    /// them, and they are counted when their partitions go): the chain is cut in DRAM only
    /// (D5), behind the first version committed below the watermark, so that walks, the
    /// secondary indexes' upkeep and the burying of deleted rows stop there, and nothing
    /// is written to the region.
    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        self.trim_runs();
        if self.head_commit_ts().is_some_and(|ts| ts < watermark) {
            self.cut_at = self.head_link();
            self.runs.clear();
            return (0, 0);
        }
        let store = std::sync::Arc::clone(&self.store);
        let (found, walked) = self.walk(|located| store.old_begin(located) < watermark);
        if let Some(located) = found {
            self.cut_at = store.old_link(located);
            store.unpin(located);
            self.keep_runs(walked);
        }
        (0, 0)
    }

    fn unlink_oldest(&mut self, _watermark: u64) -> (usize, Option<usize>) {
        (0, None)
    }

    /// Not pruned version by version: the partitions are released whole.
    fn prune(&mut self, _active: &ActiveSnapshots) -> PruneReport {
        PruneReport::default()
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        debug_assert!(self.mine(owner), "the writer's version is the newest");
        let written = GoneVersion::untagged(PackedRow::copy_of(self.newest_values()));
        self.pending = None;
        let store = std::sync::Arc::clone(&self.store);
        let main = self.main;
        let link = self.head_link();
        store.with_appender(|appender| {
            if link == NO_LINK {
                // An insert of a new key: the row stays (it is in the indexes) as a
                // version no snapshot sees a row in, so that a collector can bury it.
                debug_assert!(self.insert_record);
                self.insert_record = false;
                let meta = store.word(main + MAIN_META);
                store.set_main(appender, main, MAIN_META, meta & !EXISTS);
                store.set_main(appender, main, MAIN_BEGIN, NEVER_EXISTED);
                return RollbackReport {
                    freed_records: 1,
                    freed_bytes: 0,
                    written,
                };
            }
            // The before-image is the row again: copied back in place. Its partition is
            // not released while this transaction runs (D3).
            let located = store
                .locate(link)
                .expect("a running writer's before-image is in a live partition");
            debug_assert!(matches!(located, Located::Old { .. }));
            let begin = store.old_begin(located);
            let older = store.old_link(located);
            let exists = store.old_exists(located);
            let contents = store
                .contents_of(located)
                .expect("a before-image holds its contents")
                .to_vec();
            let mut slot = Some(main);
            let restored = store.store_main(
                appender,
                (self.table, &mut slot),
                (begin, older),
                (&contents, exists),
            );
            store.unpin(located);
            // The old version fits the slot it came from, unless the update moved the row
            // to a larger one and no slot of the old size is left: then the row keeps the
            // larger slot, rewritten.
            debug_assert!(restored.is_ok(), "a rolled-back row's old version has room");
            self.main = slot.expect("stored");
            store.abort_before_image(appender, link);
            let bytes = super::old_bytes(contents.len()) as usize;
            if let Some((partition, count)) = self.runs.front_mut() {
                debug_assert_eq!(*partition, link.0);
                *count -= 1;
                if *count == 0 {
                    self.runs.pop_front();
                }
            }
            RollbackReport {
                freed_records: 1,
                freed_bytes: bytes,
                written,
            }
        })
    }
}
