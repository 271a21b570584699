//! A row of the append-nvm storage and its version chain (`NvmRow`, `NvmChain`), and the
//! `VersionStorage` and `ChainEdit` implementations over them. The slots, their headers
//! and the reuse lists are the store's (`mod.rs`); the invariants N1-N3 stated there hold
//! here.
//!
//! Chains run newest to oldest: the row (what the indexes point at, in DRAM) holds its
//! newest version's slot; each version's header links the next older one.

use super::{NvmStore, BEGIN, END, EXISTS, LATEST, META, NEVER_EXISTED, NEXT, NONE};
use crate::error::Result;
use crate::pmem::PmStats;
use crate::row::{NonInline, PackedRef, PackedRow, RowView};
use crate::schema::ColumnMask;
use crate::sync::{Arc, WriteGuard};
use crate::txn::state::{TxnOutcome, TxnShared};
use crate::value::Value;
use crate::version::append::{whole_copies_mask, Decision, PruneDecisions};
use crate::version::linked::{LatchedRow, LinkedChain};
use crate::version::{
    ActiveSnapshots, ChainEdit, Created, GoneVersion, NewRowContext, PruneReport, ReadCost,
    Refusal, RollbackReport, Snapshot, StampReport, VersionStorage, WriteIntent, WriteResult,
};

/// One row, as the indexes point at it.
pub(crate) type NvmRow = LatchedRow<NvmChain>;

/// A row's chain, under its latch.
pub(crate) struct NvmChain {
    store: std::sync::Arc<NvmStore>,
    table: u32,
    arity: usize,
    /// The newest version's slot; a chain always has one.
    head: u64,
    /// The owner of an uncommitted head (only the head can be uncommitted).
    pending: Option<Arc<TxnShared>>,
    /// The head is a new key's insert not yet folded by its commit (it counts as a record).
    insert_record: bool,
    /// Set once the collector removed the row from the indexes and freed its slot: no
    /// version of it is read again.
    dead: bool,
    /// Versions behind the head (kept, not walked: a write asks for it every time).
    len: usize,
}

impl LinkedChain for NvmChain {
    type Link = u64;

    fn head(&self) -> u64 {
        self.head
    }

    fn older(&self, at: u64) -> Option<u64> {
        Some(self.store.next(at)).filter(|&next| next != NONE)
    }

    /// Only the head can be uncommitted; a rolled-back insert's version "committed" at 0,
    /// a row in no snapshot.
    fn commit_ts(&self, at: u64) -> Option<u64> {
        if at == self.head {
            if let Some(owner) = &self.pending {
                return match owner.outcome() {
                    TxnOutcome::Committed(ts) => Some(ts),
                    _ => None,
                };
            }
        }
        Some(self.store.begin(at))
    }

    fn mine(&self, owner: &TxnShared) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| std::ptr::eq(&**p, owner))
    }

    fn exists(&self, at: u64) -> bool {
        self.store.exists(at)
    }

    #[allow(unsafe_code)]
    fn values_of(&self, at: u64) -> PackedRef<'_> {
        // SAFETY: a slot's contents are a row this storage packed with `NonInline::Packed`
        // for the row's table (of `self.arity` columns), stored before the slot was linked
        // and never changed while it is (N2, N3); nothing is read back from an earlier
        // process (the storage recovers nothing).
        unsafe { PackedRef::from_stored(self.store.contents(at), self.arity) }
    }

    /// Frees what it cuts, the keeper's link rewritten in place first.
    fn cut_after(&mut self, keeper: u64) -> (usize, usize) {
        let cut: Vec<u64> = self.behind(keeper).collect();
        if cut.is_empty() {
            return (0, 0);
        }
        let bytes = cut.iter().map(|&at| self.store.version_bytes(at)).sum();
        let store = std::sync::Arc::clone(&self.store);
        store.with_appender(|appender| {
            store.set(appender, keeper, NEXT, NONE);
            for &at in &cut {
                self.free(appender, at);
            }
        });
        self.len -= cut.len();
        (cut.len(), bytes)
    }
}

impl NvmChain {
    /// Marks the version at `at` obsolete and puts its slot on the table's reuse list. It
    /// must be unlinked already (N1).
    fn free(&self, appender: &mut super::Appender, at: u64) {
        self.store.mark_obsolete(appender, at);
        self.store.free_slot(self.table, at);
    }

    /// The values `intent` makes of the newest version's.
    fn successor_values(&self, intent: &WriteIntent<'_>) -> (PackedRow, bool) {
        let current = self.values_of(self.head);
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
        let head = self.head;
        let mine = self.mine(owner);
        if let Some(refused) = crate::version::refuse_write(
            mine,
            || self.commit_ts(head),
            self.store.exists(head),
            snapshot,
            &intent,
        ) {
            return refused;
        }
        let txn_id = snapshot.start_ts;
        let (values, exists) = self.successor_values(&intent);
        let store = std::sync::Arc::clone(&self.store);
        store.with_appender(|appender| {
            // The transaction's own version is replaced (its slot freed: only it could see
            // it); another's is covered by the new one, its end timestamp set in place.
            let next = if mine { self.store.next(head) } else { head };
            let at = match store.append_version(
                appender,
                self.table,
                txn_id,
                next,
                (values.packed().bytes(), exists),
            ) {
                Ok(at) => at,
                Err(_) => return WriteResult::Refused(Refusal::NoSpace),
            };
            self.head = at;
            if mine {
                let replaced = PackedRow::copy_of(self.values_of(head));
                self.free(appender, head);
                return WriteResult::Installed {
                    chain: (),
                    new_record: false,
                    created: Created::default(),
                    replaced: Some(GoneVersion::untagged(replaced)),
                };
            }
            debug_assert_eq!(
                store.end(head),
                LATEST,
                "nothing covered the newest version"
            );
            store.set(appender, head, END, txn_id);
            let created = Created {
                records: usize::from(!std::mem::take(&mut self.insert_record)),
                bytes: store.version_bytes(head),
            };
            self.len += 1;
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

/// The append-nvm storage design.
pub(crate) struct AppendNvmStorage;

impl VersionStorage for AppendNvmStorage {
    type Row = NvmRow;
    type Chain = NvmChain;
    type Guard<'a> = WriteGuard<'a, NvmChain>;
    type Exact = crate::version::NoExact;
    type Shared = std::sync::Arc<NvmStore>;
    const NAME: &'static str = "append-nvm";

    fn open_shared(options: &crate::Options) -> Result<std::sync::Arc<NvmStore>> {
        Ok(std::sync::Arc::new(NvmStore::open(options)?))
    }

    fn insert_row(
        shared: &std::sync::Arc<NvmStore>,
        context: NewRowContext,
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> Result<(Arc<NvmRow>, Created)> {
        debug_assert_eq!(
            non_inline,
            NonInline::Packed,
            "N3: validate refuses the others"
        );
        let packed = PackedRow::from_values(values, NonInline::Packed);
        let head = shared.with_appender(|appender| {
            shared.append_version(
                appender,
                context.table,
                context.txn_id,
                NONE,
                (packed.packed().bytes(), true),
            )
        })?;
        let chain = NvmChain {
            store: std::sync::Arc::clone(shared),
            table: context.table,
            arity: values.len(),
            head,
            pending: Some(Arc::clone(owner)),
            insert_record: true,
            dead: false,
            len: 0,
        };
        Ok(LatchedRow::inserted(chain))
    }

    fn read<R>(
        row: &NvmRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let chain = row.read();
        if chain.dead {
            return (reader(None), ReadCost::default());
        }
        chain.read_visible(snapshot, reader)
    }

    fn write<'a>(
        row: &'a NvmRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, NvmChain>> {
        debug_assert_eq!(
            non_inline,
            NonInline::Packed,
            "N3: validate refuses the others"
        );
        let mut chain = row.write();
        chain.install(snapshot, intent, owner).with_chain(chain)
    }

    fn stamp(row: &NvmRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        let mut chain = row.write();
        if !chain.mine(owner) {
            return StampReport::default();
        }
        let head = chain.head;
        // MVTO: the id written with the version is its commit timestamp; nothing to stamp.
        debug_assert_eq!(chain.store.begin(head), commit_ts);
        chain.pending = None;
        let folded = std::mem::take(&mut chain.insert_record);
        StampReport {
            folded_records: usize::from(folded),
            freed_bytes: 0,
            nothing_to_finalize: chain.store.exists(head) && chain.older(head).is_none(),
        }
    }

    fn commit_durably(
        shared: &std::sync::Arc<NvmStore>,
        _owner: &TxnShared,
        _txn_id: u64,
    ) -> Result<()> {
        shared.persist()
    }

    fn discard_unpublished(row: &NvmRow, owner: &TxnShared) {
        // The row's only version is the insert's, which no one can read: its slot goes
        // back to the reuse list, and the row is never read again.
        let mut chain = row.write();
        debug_assert!(chain.mine(owner) && chain.older(chain.head).is_none());
        let store = std::sync::Arc::clone(&chain.store);
        let head = chain.head;
        store.with_appender(|appender| chain.free(appender, head));
        chain.dead = true;
    }

    fn persistent_memory_stats(shared: &std::sync::Arc<NvmStore>) -> Option<PmStats> {
        Some(shared.stats())
    }

    fn edit<R>(row: &NvmRow, edit: impl FnOnce(&mut NvmChain) -> R) -> R {
        edit(&mut row.write())
    }

    fn cc_word(row: &NvmRow) -> &crate::sync::AtomicU64 {
        &row.cc
    }
}

impl ChainEdit for NvmChain {
    fn values(&self) -> (RowView<'_>, bool) {
        debug_assert!(!self.dead, "a buried row's versions are not read");
        (
            RowView::packed(self.values_of(self.head)),
            self.store.exists(self.head),
        )
    }

    fn chain_len(&self) -> usize {
        debug_assert!(self.dead || self.len > 16 || self.len == self.behind(self.head).count());
        self.len
    }

    fn chain_mask(&self) -> ColumnMask {
        whole_copies_mask(self.chain_len(), self.arity)
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        if self.dead {
            return;
        }
        self.each_existing(visit);
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn is_unreachable(&self, bound: u64) -> bool {
        self.unreachable_below(bound)
    }

    fn mark_dead(&mut self) {
        debug_assert!(self.is_unreachable(u64::MAX));
        // Out of the indexes: no one reads the row again, and its last version (a
        // tombstone, or a rolled-back insert's) goes to the reuse list.
        self.dead = true;
        let store = std::sync::Arc::clone(&self.store);
        let head = self.head;
        store.with_appender(|appender| self.free(appender, head));
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        self.truncate_below(watermark)
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        self.unlink_oldest_below(watermark)
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        let mut decisions = PruneDecisions::new(self.commit_ts(self.head), active);
        let mut report = PruneReport::default();
        let mut keeper = self.head;
        let mut link = self.older(keeper);
        let store = std::sync::Arc::clone(&self.store);
        while let Some(at) = link {
            let ts = self
                .commit_ts(at)
                .expect("only the head can be uncommitted");
            let next = self.older(at);
            match decisions.decide(ts, &mut report) {
                Decision::Keep => {
                    keeper = at;
                    report.remaining += 1;
                }
                Decision::Drop => {
                    report.removed += 1;
                    report.freed_bytes += store.version_bytes(at);
                    // The keeper's link skips it, in place; then it is freed.
                    store.with_appender(|appender| {
                        store.set(appender, keeper, NEXT, next.unwrap_or(NONE));
                        self.free(appender, at);
                    });
                    self.len -= 1;
                }
                Decision::DropRest => {
                    let (count, bytes) = self.cut_after(keeper);
                    report.removed += count;
                    report.freed_bytes += bytes;
                    break;
                }
            }
            link = next;
        }
        report
    }

    fn rollback(&mut self, owner: &Arc<TxnShared>) -> RollbackReport {
        debug_assert!(self.mine(owner), "the writer's version is the head");
        let rolled_back = self.head;
        let written = GoneVersion::untagged(PackedRow::copy_of(self.values_of(rolled_back)));
        self.pending = None;
        let store = std::sync::Arc::clone(&self.store);
        store.with_appender(|appender| match self.older(rolled_back) {
            None => {
                // An insert of a new key: the row stays (it is in the indexes) as a
                // version no snapshot sees a row in, so that a collector can bury it.
                debug_assert!(self.insert_record);
                self.insert_record = false;
                let meta = store.word(rolled_back, META);
                store.set(appender, rolled_back, META, meta & !EXISTS);
                store.set(appender, rolled_back, BEGIN, NEVER_EXISTED);
                RollbackReport {
                    freed_records: 1,
                    freed_bytes: 0,
                    written,
                }
            }
            Some(previous) => {
                // The previous newest version is the row again: nothing covers it.
                store.set(appender, previous, END, LATEST);
                self.head = previous;
                self.len -= 1;
                self.free(appender, rolled_back);
                RollbackReport {
                    freed_records: 1,
                    freed_bytes: store.version_bytes(previous),
                    written,
                }
            }
        })
    }
}
