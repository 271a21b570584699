//! A row of the tile-block storage and its version chain (`TileRow`, `TileChain`), and the
//! `VersionStorage` and `ChainEdit` implementations over them: how reads, writes, stamps,
//! rollbacks and prunes walk a row's versions across tiles. The tiles, blocks and appenders
//! they use are the store's (`mod.rs`); the invariants T1-T3 stated there hold here.

use super::*;
use crate::version::linked::{LatchedRow, LinkedChain};

/// One row, as the indexes point at it.
pub(crate) type TileRow = LatchedRow<TileChain>;

/// A row's chain, under its latch.
pub(crate) struct TileChain {
    pub(super) store: std::sync::Arc<TileStore>,
    pub(super) table: u32,
    pub(super) arity: usize,
    /// The newest version; a chain always has one.
    pub(super) head: Link,
    /// The owner of an uncommitted head (T1).
    pub(super) pending: Option<Arc<TxnShared>>,
    /// The head is a new key's insert not yet folded by its commit (it counts as a record).
    pub(super) insert_record: bool,
    /// Set once the collector has removed the row from the indexes. A dead row's versions
    /// are never read again (every running and future snapshot sees no row in it), so its
    /// newest version's block may be freed under it.
    pub(super) dead: bool,
    /// Whether the row's table has secondary indexes (finalizing reads its old versions'
    /// contents to keep them exact: `Tile::pinned_indexed`).
    pub(super) indexed: bool,
    /// Versions behind the head (kept, not walked: a write asks for it every time).
    pub(super) len: usize,
}

impl LinkedChain for TileChain {
    type Link = Link;

    fn head(&self) -> Link {
        self.head
    }

    fn older(&self, link: Link) -> Option<Link> {
        Some(self.next(link)).filter(|next| !next.is_none())
    }

    /// The creating transaction's commit timestamp, if it committed (only the head can be
    /// unstamped, T1).
    fn commit_ts(&self, link: Link) -> Option<u64> {
        let begin = self.store.begin_of(link);
        if begin != UNSTAMPED {
            return Some(begin);
        }
        debug_assert_eq!(link, self.head, "only the head is unstamped");
        match self.pending.as_ref().map(|owner| owner.outcome()) {
            Some(TxnOutcome::Committed(ts)) => Some(ts),
            _ => None,
        }
    }

    fn mine(&self, owner: &TxnShared) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| std::ptr::eq(&**p, owner))
    }

    fn exists(&self, link: Link) -> bool {
        self.store.exists_in(link)
    }

    #[allow(unsafe_code)]
    fn values_of(&self, link: Link) -> PackedRef<'_> {
        // SAFETY: a record's payload is a row this storage packed with `NonInline::Packed`
        // for the row's table (of `self.arity` columns) in this process, never changed
        // since (T2, T3); the storage reads no record it did not write (no recovery yet).
        unsafe { PackedRef::from_stored(self.store.payload(link), self.arity) }
    }

    /// Cuts the chain after `keeper`; returns the versions and bytes cut off.
    fn cut_after(&mut self, keeper: Link) -> (usize, usize) {
        // Every header read before the first unpin: an unpinned tile may be freed at once.
        let cut: Vec<(Link, usize)> = self
            .behind(keeper)
            .map(|l| (l, self.store.version_bytes(l)))
            .collect();
        let classes: Vec<(Link, bool)> = cut.iter().map(|&(l, _)| (l, self.pin_class(l))).collect();
        self.store.set_next(keeper, Link::NONE);
        self.len -= cut.len();
        let bytes = cut.iter().map(|&(_, b)| b).sum();
        for &(link, class) in &classes {
            self.store.unpin(link, class);
        }
        (cut.len(), bytes)
    }
}

impl TileChain {
    pub(super) fn header(&self, link: Link) -> &Header {
        self.store.header(link)
    }

    /// Whether `link`'s pin counts in `Tile::pinned_indexed` too: a version of a row with
    /// secondary indexes, or a "never existed" one (its burial reads its values).
    pub(super) fn pin_class(&self, link: Link) -> bool {
        self.indexed || self.store.begin_of(link) == NEVER_EXISTED
    }

    pub(super) fn next(&self, link: Link) -> Link {
        self.store.next_of(link)
    }

    /// The values `intent` makes of the newest version's.
    pub(super) fn successor_values(&self, intent: &WriteIntent<'_>) -> (PackedRow, RecordKind) {
        let current = self.values_of(self.head);
        match intent {
            WriteIntent::Update(_, changes) => (
                current.with_changes(changes, NonInline::Packed),
                RecordKind::Version,
            ),
            WriteIntent::Delete => (PackedRow::copy_of(current), RecordKind::Tombstone),
            WriteIntent::Insert(values) => (
                PackedRow::from_values(values, NonInline::Packed),
                RecordKind::Version,
            ),
        }
    }

    pub(super) fn install(
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
            self.exists(head),
            snapshot,
            &intent,
        ) {
            return refused;
        }
        let txn_id = snapshot.start_ts;
        let (values, kind) = self.successor_values(&intent);
        let store = std::sync::Arc::clone(&self.store);
        if !mine {
            let tile = store.tile(head);
            if !may_cover(&tile.max_txnid, &tile.state, txn_id) {
                return WriteResult::Retry;
            }
        }
        store.with_appender(|appender| {
            // The transaction's own version is replaced in its place in the chain (records
            // never change in place); another's is covered by the new one.
            let next = if mine { self.next(head) } else { head };
            let link = match store.append_version(
                appender,
                Target::Append(self.table),
                (kind, 0),
                (self.table, Sequence::Of(owner)),
                txn_id,
                values.packed().bytes(),
                next,
            ) {
                Ok(link) => link,
                Err(_) => return WriteResult::Refused(Refusal::NoSpace),
            };
            store.count_record(owner, link);
            if mine {
                // Only its transaction can see the replaced version: an aborted slot now.
                let replaced = PackedRow::copy_of(self.values_of(head));
                self.header(head).flags.fetch_or(ABORTED, Ordering::Relaxed);
                store.obsolete(appender, head, txn_id);
                // Its record carries the transaction's id, which may commit: for D23 it is
                // an older record of the key, like a superseded version.
                store
                    .tile(head)
                    .min_superseded
                    .fetch_min(txn_id, Ordering::SeqCst);
                self.head = link;
                return WriteResult::Installed {
                    chain: (),
                    new_record: false,
                    created: Created::default(),
                    replaced: Some(GoneVersion::untagged(replaced)),
                };
            }
            // T1: the covered head's transaction committed (refuse_write checked); stamp it
            // before its owner is forgotten.
            if let Some(ts) = self.commit_ts(head) {
                let _ = self.header(head).begin.compare_exchange(
                    UNSTAMPED,
                    ts,
                    Ordering::Release,
                    Ordering::Relaxed,
                );
            }
            // TB §4.3: the end timestamp in DRAM; the bit and `max_txnid` in one line.
            self.header(head).end.store(txn_id, Ordering::Relaxed);
            if store.obsolete(appender, head, txn_id) {
                // A latest version is now behind the head: pinned until finalizing cuts it
                // (a "never existed" head was pinned when its insert rolled back).
                let tile = store.tile(head);
                tile.pin(self.indexed);
                let begin = self.header(head).begin.load(Ordering::Relaxed);
                tile.min_superseded.fetch_min(begin, Ordering::SeqCst);
            }
            let created = Created {
                records: usize::from(!std::mem::take(&mut self.insert_record)),
                bytes: store.version_bytes(head),
            };
            self.head = link;
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

/// The tile-block storage design.
pub(crate) struct TileBlockStorage;

impl VersionStorage for TileBlockStorage {
    type Row = TileRow;
    type Chain = TileChain;
    type Guard<'a> = WriteGuard<'a, TileChain>;
    type Exact = crate::version::NoExact;
    type Shared = std::sync::Arc<TileStore>;
    const NAME: &'static str = "tile-block";

    fn open_shared(options: &crate::Options) -> Result<std::sync::Arc<TileStore>> {
        let (store, scan) = TileStore::open(options)?;
        let store = std::sync::Arc::new(store);
        if let Some(scan) = scan {
            let (recovered, report) = store.rebuild(scan)?;
            *lock(&store.recovered) = Some(recovered);
            *lock(&store.recovery) = Some(report);
        }
        Ok(store)
    }

    fn record_table(
        shared: &std::sync::Arc<TileStore>,
        index: u32,
        schema: &crate::schema::TableSchema,
    ) -> Result<()> {
        shared.record_table(index, schema)
    }

    fn take_recovered(
        shared: &std::sync::Arc<TileStore>,
    ) -> Option<crate::version::Recovered<TileRow>> {
        lock(&shared.recovered).take()
    }

    fn finish_recovery(shared: &std::sync::Arc<TileStore>, context: &BlockGcContext<'_, TileRow>) {
        shared.finish_interrupted_collections(context);
    }

    fn insert_row(
        shared: &std::sync::Arc<TileStore>,
        context: NewRowContext,
        values: &[Value],
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> Result<(Arc<TileRow>, Created)> {
        debug_assert_eq!(
            non_inline,
            NonInline::Packed,
            "T3: validate refuses the others"
        );
        let packed = PackedRow::from_values(values, NonInline::Packed);
        let head = shared.with_appender(|appender| {
            shared.append_version(
                appender,
                Target::Append(context.table),
                (RecordKind::Version, 0),
                (context.table, Sequence::Of(owner)),
                context.txn_id,
                packed.packed().bytes(),
                Link::NONE,
            )
        })?;
        shared.count_record(owner, head);
        let chain = TileChain {
            store: std::sync::Arc::clone(shared),
            table: context.table,
            arity: values.len(),
            head,
            pending: Some(Arc::clone(owner)),
            insert_record: true,
            dead: false,
            indexed: context.indexed,
            len: 0,
        };
        Ok(LatchedRow::inserted(chain))
    }

    fn read<R>(
        row: &TileRow,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let chain = row.read();
        if chain.dead {
            // Buried: no running or future snapshot sees a row in it (and its newest
            // version's block may be gone).
            return (reader(None), ReadCost::default());
        }
        chain.read_visible(snapshot, reader)
    }

    fn write<'a>(
        row: &'a TileRow,
        snapshot: &Snapshot<'_>,
        intent: WriteIntent<'_>,
        owner: &Arc<TxnShared>,
        non_inline: NonInline,
    ) -> WriteResult<WriteGuard<'a, TileChain>> {
        debug_assert_eq!(
            non_inline,
            NonInline::Packed,
            "T3: validate refuses the others"
        );
        let mut chain = row.write();
        chain.install(snapshot, intent, owner).with_chain(chain)
    }

    fn stamp(row: &TileRow, owner: &Arc<TxnShared>, commit_ts: u64) -> StampReport {
        let mut chain = row.write();
        if !chain.mine(owner) {
            return StampReport::default();
        }
        let head = chain.head;
        chain.header(head).begin.store(commit_ts, Ordering::Release);
        chain.pending = None;
        let folded = std::mem::take(&mut chain.insert_record);
        StampReport {
            folded_records: usize::from(folded),
            freed_bytes: 0,
            nothing_to_finalize: chain.exists(head) && chain.next(head).is_none(),
        }
    }

    fn commit_durably(
        shared: &std::sync::Arc<TileStore>,
        owner: &TxnShared,
        txn_id: u64,
    ) -> Result<()> {
        let records = owner.storage_records();
        shared.check_open()?;
        if owner.storage_poisoned() {
            return Err(Error::CapacityExceeded {
                what: "persistent-memory region bytes (the record that takes back an \
                       insert whose key was taken found no room)"
                    .into(),
                limit: shared.region.len(),
            });
        }
        if shared.region.has_failed() {
            return Err(Error::DurabilityLost {
                reason: "an earlier persist point of the persistent-memory region failed".into(),
            });
        }
        shared.with_appender(|appender| {
            let lost = |error: Error| Error::DurabilityLost {
                reason: format!("persisting a commit to the persistent-memory region: {error}"),
            };
            // A whole commit record in the region must say that every record it counts is
            // there too, even after collections freed some of them (design note, "Commit
            // records"). In one block the order of appends gives it: recovery reads a
            // block's records up to the first torn one, so a torn record hides the commit
            // record after it. A transaction whose records went to other blocks, or whose
            // commit record opens a new block, first persists its records; only then is
            // the commit record written.
            let payload = layout::commit_payload(records);
            let blocks = owner.storage_blocks();
            let commit_bytes = layout::stored_record_bytes(payload.len()) as u64;
            // The commit record goes to the block of the table that holds all the
            // transaction's records, if one does (open blocks are per table); else to the
            // block of the table the thread last appended to.
            let all_in = |open: &OpenBlock| blocks.iter().all(|&b| b == block_id(open.extent));
            let home = appender
                .open
                .iter()
                .position(|open| open.as_ref().is_some_and(all_in))
                .map_or(appender.last_table, |table| table as u32);
            let in_one_block = appender
                .open
                .get(home as usize)
                .and_then(Option::as_ref)
                .is_some_and(|open| {
                    open.slots < shared.slots_per_block
                        && open.cursor + commit_bytes <= open.bytes
                        && all_in(open)
                });
            if !in_one_block {
                appender.writer.persist().map_err(lost)?;
            }
            let link = shared.append_marker(
                appender,
                Target::Append(home),
                (RecordKind::Commit, 0, Sequence::Copied(0)),
                txn_id,
                &payload,
            )?;
            let tile = shared.tile(link);
            let here = block_id(tile.extent);
            let elsewhere: Vec<u64> = owner
                .storage_blocks()
                .into_iter()
                .filter(|&b| b != here)
                .collect();
            if !elsewhere.is_empty() {
                lock(&tile.spans).push((link.slot() as u32, elsewhere));
            }
            // Second persist point: the commit record.
            appender.writer.persist().map_err(|error| {
                // The transaction rolls back: its commit record must never read as whole,
                // even if the page cache writes it back later. Its first word (kind, table,
                // length) zeroed makes it a torn record: the end of what the block holds.
                let header = shared.header(link);
                let record_at =
                    header.at.load(Ordering::Relaxed) - layout::RECORD_HEADER_BYTES as u64;
                appender
                    .writer
                    .store_u64(record_at, 0, Purpose::CommitRecord);
                lock(&shared.tile(link).spans).retain(|&(slot, _)| slot as usize != link.slot());
                lost(error)
            })?;
            Ok(())
        })
    }

    fn discard_unpublished(row: &TileRow, owner: &TxnShared) {
        // The row's only version is the insert's record, which no one can read: an aborted,
        // obsolete slot. It stays counted in the transaction's records (it is in the
        // region, with the transaction's id); recovery must take, of one transaction's
        // records for one key, the last it appended (`docs/design/tile-block.md`).
        let chain = row.write();
        debug_assert!(chain.mine(owner) && chain.next(chain.head).is_none());
        let store = std::sync::Arc::clone(&chain.store);
        let txn_id = store.record_txn_id(chain.head);
        chain
            .header(chain.head)
            .flags
            .fetch_or(ABORTED, Ordering::Relaxed);
        store.with_appender(|appender| {
            store.obsolete(appender, chain.head, txn_id);
            // The transaction may commit without writing the key again: a `Withdrawn`
            // record tells recovery that this record is no version of it.
            if store.withdraw(appender, &chain, owner, txn_id).is_err() {
                owner.poison_storage();
            }
        });
        // The transaction goes on to write the key's row, and may commit: for D23 this
        // record is an older record of the key, like a superseded version.
        store
            .tile(chain.head)
            .min_superseded
            .fetch_min(txn_id, Ordering::SeqCst);
    }

    fn collect_blocks(
        shared: &std::sync::Arc<TileStore>,
        context: &BlockGcContext<'_, TileRow>,
    ) -> bool {
        shared.collect_blocks(context)
    }

    fn persistent_memory_stats(shared: &std::sync::Arc<TileStore>) -> Option<PmStats> {
        Some(shared.stats())
    }

    fn edit<R>(row: &TileRow, edit: impl FnOnce(&mut TileChain) -> R) -> R {
        edit(&mut row.write())
    }

    fn cc_word(row: &TileRow) -> &crate::sync::AtomicU64 {
        &row.cc
    }
}

impl ChainEdit for TileChain {
    fn values(&self) -> (RowView<'_>, bool) {
        debug_assert!(!self.dead, "a buried row's versions are not read");
        (
            RowView::packed(self.values_of(self.head)),
            self.exists(self.head),
        )
    }

    fn chain_len(&self) -> usize {
        // Checked against a walk where the walk is cheap (never for a buried row: its
        // newest version's block may be gone).
        debug_assert!(self.dead || self.len > 16 || self.len == self.behind(self.head).count());
        self.len
    }

    fn chain_mask(&self) -> ColumnMask {
        whole_copies_mask(self.chain_len(), self.arity)
    }

    fn for_each_version(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        if self.dead {
            return; // (buried: no version is read again)
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
        self.dead = true;
        let head = self.head;
        let begin = self.header(head).begin.load(Ordering::Relaxed);
        if begin == NEVER_EXISTED {
            // Pinned when its insert rolled back; a dead row's versions are never read.
            self.store.tile(head).unpin(true);
        } else {
            // A committed delete's tombstone no row reads any more: it counts as obsolete
            // toward its block's share, and relocation decides whether it must be kept.
            // `BURIED` is the last thing this row does with its block: a collection that
            // finds the row gone from the index waits for it (it may be burying now, under
            // the latch relocation does not take for a row it cannot find).
            let store = std::sync::Arc::clone(&self.store);
            store.with_appender(|appender| store.obsolete(appender, head, begin));
            self.header(head).flags.fetch_or(BURIED, Ordering::Release);
        }
    }

    fn truncate(&mut self, watermark: u64) -> (usize, usize) {
        // The versions behind the keeper are cut off; their space comes back with their
        // blocks (tb-collect), not one by one.
        self.truncate_below(watermark)
    }

    fn unlink_oldest(&mut self, watermark: u64) -> (usize, Option<usize>) {
        self.unlink_oldest_below(watermark)
    }

    fn prune(&mut self, active: &ActiveSnapshots) -> PruneReport {
        let mut decisions = PruneDecisions::new(self.commit_ts(self.head), active);
        let mut report = PruneReport::default();
        let mut keeper = self.head;
        let mut link = self.next(keeper);
        while !link.is_none() {
            let ts = self
                .commit_ts(link)
                .expect("only the head can be uncommitted");
            let next = self.next(link);
            match decisions.decide(ts, &mut report) {
                Decision::Keep => {
                    keeper = link;
                    report.remaining += 1;
                }
                Decision::Drop => {
                    report.removed += 1;
                    report.freed_bytes += self.store.version_bytes(link);
                    let class = self.pin_class(link);
                    self.store.set_next(keeper, next);
                    self.len -= 1;
                    self.store.unpin(link, class);
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
        let store = std::sync::Arc::clone(&self.store);
        let txn_id = store.record_txn_id(rolled_back);
        self.pending = None;
        store.with_appender(|appender| {
            self.header(rolled_back)
                .flags
                .fetch_or(ABORTED, Ordering::Relaxed);
            store.obsolete(appender, rolled_back, txn_id);
            let previous = self.next(rolled_back);
            if previous.is_none() {
                // An insert of a new key: the row stays (it is in the indexes) as a
                // tombstone every snapshot sees, so that a collector can bury it.
                debug_assert!(self.insert_record);
                self.insert_record = false;
                let header = self.header(rolled_back);
                header.flags.fetch_and(!EXISTS, Ordering::Relaxed);
                header.begin.store(NEVER_EXISTED, Ordering::Release);
                // Obsolete (no record of a key), yet the row's newest version until the row
                // is buried, whose burial reads its values (the key): its block stays.
                store.tile(rolled_back).pin(true);
                return RollbackReport {
                    freed_records: 1,
                    freed_bytes: 0,
                    written,
                };
            }
            // The previous newest version is the row again, no longer a record.
            self.header(previous).end.store(LATEST, Ordering::Relaxed);
            if self.header(previous).begin.load(Ordering::Relaxed) != NEVER_EXISTED {
                store.unobsolete(appender, previous);
                // Latest again: relocation moves it, nothing needs its tile pinned.
                store.tile(previous).unpin(self.indexed);
            }
            self.head = previous;
            self.len -= 1;
            RollbackReport {
                freed_records: 1,
                freed_bytes: store.version_bytes(previous),
                written,
            }
        })
    }
}
