//! A transaction on one monomorphized engine.

use crate::sync::Arc;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ops::Bound;
use std::rc::Rc;

use scc::Guard;

use crate::cc::precision::{CommitRecord, RangeRead, ReadSet, WrittenKey};
use crate::cc::{mv2pl, mvto, Recording};
use crate::durability::log::Log;
use crate::durability::record::Redo;
use crate::engine::{Engine, IndexTarget, RowRef, Table, WrittenRow};
use crate::error::{Error, Result};
use crate::gc::{Collector, Finalizing};
use crate::index::ordered::RangeScan;
use crate::key;
use crate::row::{Columns, RowView, ValueRef};
use crate::schema::TableSchema;
use crate::stats::Counter;
use crate::txn::slots::{Committed, LocalSlot};
use crate::txn::state::{TxnShared, MAX_TIMESTAMP};
use crate::value::Value;
use crate::version::{ChainEdit, Refusal, Snapshot, VersionStorage, WriteIntent, WriteResult};
use crate::{ConcurrencyControl, Isolation, KeyRange, TableId};

mod cursor;
pub(crate) use cursor::{End, ScanCursor};

/// Rows read per pin of the index's epoch during a scan: long scans re-pin so that they
/// never hold back the index's memory reclamation.
const SCAN_BATCH: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Active,
    /// Rolled back by a conflict; every call now fails.
    RolledBack,
    Finished,
}

/// A row lock a transaction holds (MVTO: write locks; MV2PL: read and write locks).
struct Held<V: VersionStorage> {
    /// Keeps the row (and so the address the map is keyed by) alive while held.
    row: RowRef<V>,
    read: bool,
    write: bool,
}

/// The map key of a held row: its address.
fn row_address<V: VersionStorage>(row: &RowRef<V>) -> usize {
    Arc::as_ptr(row).cast::<()>() as usize
}

/// A read or write the protocol refused: the transaction rolls back with this.
struct Refused {
    reason: &'static str,
}

impl Refused {
    fn mvto(refusal: mvto::Refusal) -> Self {
        Refused {
            reason: match refusal {
                mvto::Refusal::Locked => "MVTO: another transaction holds its write lock",
                mvto::Refusal::ReadByYounger => {
                    "MVTO: a younger transaction read it (its read timestamp is larger)"
                }
            },
        }
    }

    fn mv2pl(refusal: mv2pl::Refusal) -> Self {
        Refused {
            reason: match refusal {
                mv2pl::Refusal::WriteLocked => {
                    "MV2PL no-wait: another transaction holds its write lock"
                }
                mv2pl::Refusal::ReadLocked => {
                    "MV2PL no-wait: other transactions hold read locks on it"
                }
            },
        }
    }
}

/// Reusable buffers.
#[derive(Default)]
struct Scratch {
    key: Vec<u8>,
    entry: Vec<u8>,
    /// The encoded keys of a prefetch, one after another, and where each ends.
    prefetch_keys: Vec<u8>,
    prefetch_ends: Vec<usize>,
}

pub(crate) struct EngineTxn<'e, V: VersionStorage, G: Collector> {
    engine: &'e Engine<V, G>,
    local: Rc<LocalSlot<WrittenRow<V>>>,
    start_ts: u64,
    isolation: Isolation,
    /// Begun read-only: writes are refused.
    read_only: bool,
    /// What the protocol has this transaction record of its reads.
    recording: Recording,
    /// Whether it registered its start in the serializable horizon (what it validates
    /// against is kept from its start on; `Protocol::registers_for_validation`).
    registered_for_validation: bool,
    /// MV2PL: reads and writes take row locks and see the newest committed versions.
    locks_rows: bool,
    /// What the transaction read, for validation at commit; present iff `recording` is
    /// not `Off` (MVTO publishes its predicate reads instead and keeps this empty).
    reads: Option<RefCell<ReadSet>>,
    /// Created on the first write: readers resolve this transaction's records through it.
    shared: Option<Arc<TxnShared>>,
    writes: RefCell<Vec<WrittenRow<V>>>,
    /// Row locks held (MVTO, MV2PL), by row address.
    held: RefCell<HashMap<usize, Held<V>>>,
    /// MV2PL: the clock before the first recorded read (a scan, or a point read that found
    /// no row object); `u64::MAX` until then. Its reads see every commit below it, so the
    /// validation window starts there, not at the begin.
    predicates_since: Cell<u64>,
    phase: Cell<Phase>,
    scratch: RefCell<Scratch>,
    /// 'coop': the bound this transaction's walks spot obsolete versions with (0: none).
    obsolete_below: u64,
    /// The database's log, if it is persistent (and recovered).
    log: Option<&'e Log>,
    /// What this transaction's commit record will hold (only with a log).
    redo: Redo,
    /// A checkpoint's snapshot: reads follow no protocol rule (no MVTO read timestamps,
    /// no MV2PL locks, nothing recorded), so it never aborts or delays a writer.
    plain: bool,
}

/// Where a commit stands in the log once it is visible: what `commit()` waits for before
/// it returns (see `durability::log`).
pub(crate) struct Acknowledgement<'e> {
    /// `None` in memory.
    pub(crate) log: Option<&'e Log>,
    /// The LSN the log must reach: the end of this transaction's own record, or, for a
    /// transaction that logged nothing, the end of the last commit it may have read.
    pub(crate) end: u64,
}

impl Acknowledgement<'_> {
    /// Waits until the commit is as durable as the database's level promises.
    pub(crate) fn wait(self) -> Result<()> {
        match self.log {
            Some(log) => log.acknowledge(self.end),
            None => Ok(()),
        }
    }
}

impl<'e, V: VersionStorage, G: Collector> EngineTxn<'e, V, G> {
    pub(crate) fn begin(
        engine: &'e Engine<V, G>,
        isolation: Isolation,
        read_only: bool,
    ) -> Result<Self> {
        Self::begin_as(engine, isolation, read_only, false)
    }

    /// Begins a checkpoint's snapshot: a read-only snapshot that follows no protocol's
    /// read rules, whatever the database's protocol (see `durability::checkpoint`).
    pub(crate) fn begin_plain_snapshot(engine: &'e Engine<V, G>) -> Result<Self> {
        Self::begin_as(engine, Isolation::Snapshot, true, true)
    }

    fn begin_as(
        engine: &'e Engine<V, G>,
        isolation: Isolation,
        read_only: bool,
        plain: bool,
    ) -> Result<Self> {
        // A failed or closed log is reported by the transaction's first operation, not
        // here: `Database::begin` cannot fail but by panicking.
        let log = engine.log.get().map(|log| &**log);
        let local = engine.txns.local().ok_or_else(|| Error::CapacityExceeded {
            what: "threads using one database at once".into(),
            limit: crate::txn::slots::MAX_THREADS,
        })?;
        let protocol = &engine.protocol;
        // A plain transaction (the checkpoint's snapshot) records nothing, registers for no
        // validation and takes no locks: it only reads its snapshot.
        let (recording, registered_for_validation) = if plain {
            (Recording::Off, false)
        } else {
            (
                protocol.recording(isolation, read_only),
                protocol.registers_for_validation(isolation, read_only),
            )
        };
        let start_ts = engine.gc.begin(&engine.txns, &local, || {
            let unique = protocol.orders_by_start() && !plain;
            if registered_for_validation {
                engine.txns.begin_serializable(&local, unique)
            } else if unique {
                engine.txns.begin_unique(&local)
            } else {
                engine.txns.begin(&local)
            }
        });
        local.slot.stats.add(Counter::TxnBegun, 1);
        let obsolete_below = if G::COOPERATIVE {
            let mut local_gc = local.gc.borrow_mut();
            crate::gc::spotting_bound::<G>(
                &mut local_gc,
                || engine.txns.now_ns(),
                || engine.txns.watermark(),
            )
        } else {
            0
        };
        let keeps_reads = recording != Recording::Off && !protocol.orders_by_start();
        let redo = match log {
            Some(_) if !read_only => Redo::with_buffer(local.take_redo_buffer()),
            _ => Redo::default(),
        };
        Ok(EngineTxn {
            engine,
            local,
            start_ts,
            isolation,
            read_only,
            recording,
            registered_for_validation,
            locks_rows: protocol.locks_rows(read_only) && !plain,
            reads: keeps_reads.then(|| RefCell::new(ReadSet::default())),
            shared: None,
            writes: RefCell::new(Vec::new()),
            held: RefCell::new(HashMap::new()),
            predicates_since: Cell::new(u64::MAX),
            phase: Cell::new(Phase::Active),
            scratch: RefCell::new(Scratch::default()),
            obsolete_below,
            redo,
            log,
            plain,
        })
    }

    pub(crate) fn start_ts(&self) -> u64 {
        self.start_ts
    }

    pub(crate) fn isolation(&self) -> Isolation {
        self.isolation
    }

    fn check_active(&self) -> Result<()> {
        match self.phase.get() {
            Phase::Active => {}
            Phase::RolledBack | Phase::Finished => return Err(Error::TransactionAborted),
        }
        match self.log {
            Some(log) => log.check(),
            None => Ok(()),
        }
    }

    fn check_writable(&self) -> Result<()> {
        self.check_active()?;
        if self.read_only {
            return Err(Error::ReadOnlyTransaction);
        }
        Ok(())
    }

    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Records a scan of `[lower, upper]` for validation, cut at `stopped_at` if the scan
    /// stopped early: what it read ends there (starts there, for a descending scan).
    fn record_range(
        &self,
        id: TableId,
        index: Option<usize>,
        (lower, upper): (EncodedBound, EncodedBound),
        descending: bool,
        stopped_at: Option<Vec<u8>>,
    ) {
        if let Some(reads) = &self.reads {
            let (lower, upper) = match stopped_at {
                None => (lower, upper),
                Some(at) if descending => (Bound::Included(at), upper),
                Some(at) => (lower, Bound::Included(at)),
            };
            reads.borrow_mut().record_range(RangeRead {
                table: id.index,
                index: index.map(|i| u16::try_from(i).expect("indexes per table fit u16")),
                lower,
                upper,
            });
        }
    }

    /// MV2PL: the clock now, if no recorded read has fixed the validation window yet (call
    /// before a read that may be recorded; then [`Self::note_predicate`]).
    fn predicate_clock(&self) -> Option<u64> {
        (self.locks_rows && self.predicates_since.get() == u64::MAX)
            .then(|| self.engine.txns.clock())
    }

    /// MV2PL: a read that began at `clock` was recorded.
    fn note_predicate(&self, clock: Option<u64>) {
        if let Some(clock) = clock {
            if self.predicates_since.get() == u64::MAX {
                self.predicates_since.set(clock);
            }
        }
    }

    /// Where validation starts: the snapshot, or under MV2PL the first recorded read.
    fn validation_start(&self) -> u64 {
        if self.locks_rows {
            self.predicates_since.get().min(MAX_TIMESTAMP)
        } else {
            self.start_ts
        }
    }

    /// MVTO: publishes a scan's whole range before the scan searches the index.
    fn publish_range_predicate(
        &self,
        id: TableId,
        index: Option<usize>,
        lower: &EncodedBound,
        upper: &EncodedBound,
    ) {
        if self.recording == Recording::Predicates && self.reads.is_none() {
            let mut predicate = ReadSet::default();
            predicate.record_range(RangeRead {
                table: id.index,
                index: index.map(|i| u16::try_from(i).expect("indexes per table fit u16")),
                lower: lower.clone(),
                upper: upper.clone(),
            });
            self.publish_predicate(predicate);
        }
    }

    /// The timestamp reads see: the snapshot, or under MV2PL's locks every committed
    /// version.
    fn read_ts(&self) -> u64 {
        if self.locks_rows {
            MAX_TIMESTAMP
        } else {
            self.start_ts
        }
    }

    fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            start_ts: self.read_ts(),
            owner: self.shared.as_deref(),
            obsolete_below: self.obsolete_below,
        }
    }

    /// 'coop': a walk passed an obsolete version in `row` and claimed it: record it for
    /// the cleaner.
    fn record_if_obsolete(&self, table: &Table<V>, row: &RowRef<V>, claimed: bool) {
        if G::COOPERATIVE && claimed {
            let gc = table
                .tuple_gc
                .as_ref()
                .expect("tuple-level collectors list rows");
            gc.record(Arc::clone(row));
            self.local
                .slot
                .stats
                .add(Counter::RowsRecordedForCleaning, 1);
        }
    }

    // ----- the protocols' row rules (MVTO, MV2PL) -----------------------------------------

    fn mvto(&self) -> bool {
        self.engine.protocol.kind == ConcurrencyControl::Mvto
    }

    /// Before reading `row`: MVTO raises its read timestamp (refused while another holds
    /// its write lock); MV2PL takes a read lock.
    fn before_read(&self, row: &RowRef<V>) -> std::result::Result<(), Refused> {
        if self.plain {
            return Ok(());
        }
        if self.mvto() {
            if self.held.borrow().contains_key(&row_address::<V>(row)) {
                return Ok(()); // its own write lock
            }
            return mvto::stamp_read(V::cc_word(row), self.start_ts).map_err(Refused::mvto);
        }
        if self.locks_rows {
            let mut held = self.held.borrow_mut();
            let address = row_address::<V>(row);
            if held.contains_key(&address) {
                return Ok(());
            }
            mv2pl::read_lock(V::cc_word(row)).map_err(Refused::mv2pl)?;
            held.insert(
                address,
                Held {
                    row: Arc::clone(row),
                    read: true,
                    write: false,
                },
            );
        }
        Ok(())
    }

    /// Before writing `row` (or publishing a row it creates): the write lock of MVTO or
    /// MV2PL. Held to the end, also when the storage then refuses the write (the refusal
    /// read the row).
    fn before_write(&self, row: &RowRef<V>) -> std::result::Result<(), Refused> {
        let mvto = self.mvto();
        if !mvto && !self.locks_rows {
            return Ok(());
        }
        let mut held = self.held.borrow_mut();
        let address = row_address::<V>(row);
        let holds_read = match held.get(&address) {
            Some(h) if h.write => return Ok(()),
            Some(h) => h.read,
            None => false,
        };
        let word = V::cc_word(row);
        if mvto {
            mvto::lock(word, self.start_ts).map_err(Refused::mvto)?;
        } else {
            mv2pl::write_lock(word, holds_read).map_err(Refused::mv2pl)?;
        }
        held.insert(
            address,
            Held {
                row: Arc::clone(row),
                read: false,
                write: true,
            },
        );
        Ok(())
    }

    /// Releases every row lock (after the versions are stamped or rolled back).
    fn release_locks(&self) {
        let mut held = self.held.borrow_mut();
        if held.is_empty() {
            return;
        }
        let mvto = self.mvto();
        for (_, lock) in held.drain() {
            let word = V::cc_word(&lock.row);
            if mvto {
                mvto::unlock(word, self.start_ts);
            } else if lock.write {
                mv2pl::write_unlock(word);
            } else {
                debug_assert!(lock.read);
                mv2pl::read_unlock(word);
            }
        }
    }

    /// Rolls the transaction back for a refused read or write and returns the error.
    fn refuse(&self, table: &Table<V>, refused: Refused) -> Error {
        self.rollback(Counter::AbortedLockConflict);
        self.phase.set(Phase::RolledBack);
        Error::LockConflict {
            table: table.schema.name.clone(),
            reason: refused.reason,
        }
    }

    /// MVTO: publishes a predicate read (before the index is searched).
    fn publish_predicate(&self, reads: ReadSet) {
        // Every transaction that may write registered its id there.
        let writers = self.engine.txns.serializable_horizon();
        self.engine
            .protocol
            .mvto
            .publish(self.start_ts, reads, writers);
    }

    fn owner(&mut self) -> Arc<TxnShared> {
        Arc::clone(
            self.shared
                .get_or_insert_with(|| Arc::new(TxnShared::new())),
        )
    }

    fn table(&self, id: TableId) -> Result<&'e Table<V>> {
        self.engine.table(id)
    }

    /// The schema of a table (its rows' column names), for as long as the database lives.
    pub(crate) fn schema(&self, id: TableId) -> Result<&'e TableSchema> {
        Ok(&self.table(id)?.schema)
    }

    // ----- reads -----------------------------------------------------------------------

    /// Calls `reader` with the visible row under `key`, lent without copying.
    pub(crate) fn get_view<R>(
        &self,
        id: TableId,
        key_values: &[Value],
        reader: impl FnOnce(RowView<'_>) -> R,
    ) -> Result<Option<R>> {
        self.check_active()?;
        let table = self.table(id)?;
        table.schema.check_key(key_values)?;
        let mut scratch = self.scratch.borrow_mut();
        key::encode_key_values(&mut scratch.key, key_values);
        if self.recording == Recording::Everything {
            if let Some(reads) = &self.reads {
                // Found or not: a row appearing under this key changes what was read.
                reads.borrow_mut().record_point(id.index, &scratch.key);
            }
        }
        // The reader may use this transaction again: lend it no borrow of the scratch.
        let key_bytes = std::mem::take(&mut scratch.key);
        drop(scratch);
        let mut reader = Some(reader);
        let mut published = false;
        let clock = self.predicate_clock();
        let found = loop {
            match self.read_point(table, &key_bytes, &mut reader) {
                // No row object, or one whose version this transaction sees is no row (a
                // tombstone): no lock or read timestamp can carry the read of an absent
                // key, since the collector may bury the tombstone and an insert then
                // makes a new row object with a fresh word
                // (`regression_mvto_an_absent_read_through_a_buried_tombstone_stays_protected`).
                absent @ (Ok(None) | Ok(Some((None, _))))
                    if self.recording == Recording::Predicates && !published =>
                {
                    if let Some(reads) = &self.reads {
                        // MV2PL: validated at commit.
                        reads.borrow_mut().record_point(id.index, &key_bytes);
                        self.note_predicate(clock);
                        break absent;
                    }
                    // MVTO: publish, then search again. A row inserted meanwhile is found
                    // now (and read by the rules), or its writer finds the predicate.
                    let mut predicate = ReadSet::default();
                    predicate.record_point(id.index, &key_bytes);
                    self.publish_predicate(predicate);
                    published = true;
                }
                other => break other,
            }
        };
        self.scratch.borrow_mut().key = key_bytes;
        let (result, cost) = match found {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(None),
            Err(refused) => return Err(self.refuse(table, refused)),
        };
        self.local.slot.stats.record_read(cost);
        Ok(result)
    }

    /// The prefetch hint (`Transaction::prefetch`): checks every key, then asks the
    /// processor for each key's index slot, all of them before any is needed, and then for
    /// each row the slots point at. Reads nothing a snapshot sees and records nothing: the
    /// operations that follow read and write exactly as they would without it.
    pub(crate) fn prefetch<K: AsRef<[Value]>>(&self, id: TableId, keys: &[K]) -> Result<()> {
        self.check_active()?;
        let table = self.table(id)?;
        for key in keys {
            table.schema.check_key(key.as_ref())?;
        }
        let mut scratch = self.scratch.borrow_mut();
        let Scratch {
            prefetch_keys,
            prefetch_ends,
            ..
        } = &mut *scratch;
        prefetch_keys.clear();
        prefetch_ends.clear();
        for key in keys {
            key::append_key_values(prefetch_keys, key.as_ref());
            prefetch_ends.push(prefetch_keys.len());
        }
        let encoded = || {
            prefetch_ends.iter().scan(0, |start, &end| {
                let key = &prefetch_keys[*start..end];
                *start = end;
                Some(key)
            })
        };
        // Stage one: every slot's line is requested before any is read, so their misses
        // overlap. Stage two finds each row (its slot is arriving or has arrived) and
        // requests its first lines the same way.
        for key in encoded() {
            table.primary.prefetch_slot(key);
        }
        let mut found = 0;
        for key in encoded() {
            found += u64::from(
                table
                    .primary
                    .peek_for_prefetch(key, |row| crate::prefetch::prefetch_object(&**row)),
            );
        }
        let stats = &self.local.slot.stats;
        stats.add(Counter::PrefetchKeys, prefetch_ends.len() as u64);
        stats.add(Counter::PrefetchRowsFound, found);
        Ok(())
    }

    /// Looks a primary key up and reads the row under the protocol's rule, lending it to
    /// the reader taken from `reader` (`None`: no row object under the key; the reader is
    /// taken only if the row is visible, and left for another search otherwise).
    #[allow(clippy::type_complexity)]
    fn read_point<R, F: FnOnce(RowView<'_>) -> R>(
        &self,
        table: &Table<V>,
        key_bytes: &[u8],
        reader: &mut Option<F>,
    ) -> std::result::Result<Option<(Option<R>, crate::version::ReadCost)>, Refused> {
        let found = table.primary.with(key_bytes, |row| {
            self.before_read(row)?;
            let (seen, cost) = V::read(row, &self.snapshot(), |v| {
                v.map(|v| (reader.take().expect("one visible row is read per call"))(v))
            });
            self.record_if_obsolete(table, row, cost.passed_obsolete);
            Ok((seen, cost))
        });
        found.transpose()
    }

    pub(crate) fn get(&self, id: TableId, key_values: &[Value]) -> Result<Option<Vec<Value>>> {
        self.get_view(id, key_values, |row| row.to_values())
    }

    /// Scans the primary key in `range`: for each row this snapshot sees, `inside` runs
    /// under the row's latch and may borrow the row; `outside` then gets its result with
    /// the latch released, and returns `false` to stop.
    pub(crate) fn scan<T>(
        &self,
        id: TableId,
        range: &KeyRange,
        mut inside: impl FnMut(RowView<'_>) -> T,
        outside: impl FnMut(T) -> bool,
    ) -> Result<()> {
        self.scan_entries(id, range, |_, _, view| inside(view), outside)
    }

    /// [`Self::scan`], with each row's encoded key and row object lent to `inside` too.
    fn scan_entries<T>(
        &self,
        id: TableId,
        range: &KeyRange,
        inside: impl FnMut(&[u8], &RowRef<V>, RowView<'_>) -> T,
        outside: impl FnMut(T) -> bool,
    ) -> Result<()> {
        self.check_active()?;
        let table = self.table(id)?;
        let Some((lower, upper)) = encode_range(&table.schema, range, None)? else {
            return Ok(());
        };
        self.publish_range_predicate(id, None, &lower, &upper);
        let clock = self.predicate_clock();
        let bounds = (&lower, &upper);
        let recording = self.reads.is_some();
        let stopped_at =
            self.scan_primary(table, bounds, range.descending, recording, inside, outside)?;
        self.record_range(id, None, (lower, upper), range.descending, stopped_at);
        self.note_predicate(clock);
        Ok(())
    }

    /// Walks the primary index over encoded `bounds` (see [`Self::scan`] for `inside` and
    /// `outside`). Returns the key of the row `outside` stopped at, if it stopped and
    /// `want_stop` asks for it; rolls back on a refused read.
    fn scan_primary<T>(
        &self,
        table: &Table<V>,
        (lower, upper): (&EncodedBound, &EncodedBound),
        descending: bool,
        want_stop: bool,
        mut inside: impl FnMut(&[u8], &RowRef<V>, RowView<'_>) -> T,
        mut outside: impl FnMut(T) -> bool,
    ) -> Result<Option<Vec<u8>>> {
        let snapshot = self.snapshot();
        let mut stopped_at = None;
        let mut refused = None;
        scan_in_batches(&table.primary, lower, upper, descending, |key, row| {
            if let Err(refusal) = self.before_read(row) {
                refused = Some(refusal);
                return false;
            }
            let (seen, cost) = V::read(row, &snapshot, |v| v.map(|v| inside(key, row, v)));
            self.record_if_obsolete(table, row, cost.passed_obsolete);
            self.local.slot.stats.record_scan_read(cost);
            let go_on = seen.is_none_or(&mut outside);
            if !go_on && want_stop {
                stopped_at = Some(key.to_vec());
            }
            go_on
        });
        match refused {
            Some(refused) => Err(self.refuse(table, refused)),
            None => Ok(stopped_at),
        }
    }

    /// Like [`Self::scan`] over a secondary index: rows whose index key lies in `range`, in
    /// index order (descending if the range is), each re-checked against the version this snapshot sees.
    pub(crate) fn scan_index<T>(
        &self,
        id: TableId,
        index_name: &str,
        range: &KeyRange,
        mut inside: impl FnMut(RowView<'_>) -> T,
        outside: impl FnMut(T) -> bool,
    ) -> Result<()> {
        self.check_active()?;
        let table = self.table(id)?;
        let index = table.schema.index_position(index_name)?;
        let Some((lower, upper)) = encode_range(&table.schema, range, Some(index))? else {
            return Ok(());
        };
        self.publish_range_predicate(id, Some(index), &lower, &upper);
        let clock = self.predicate_clock();
        let bounds = (&lower, &upper);
        let recording = self.reads.is_some();
        let stopped_at = self.scan_secondary(
            table,
            index,
            bounds,
            range.descending,
            recording,
            |_, row| inside(row),
            outside,
        )?;
        // What validation compares: the entry without a physical pointer's tag (commit
        // records hold untagged entries, which sort just below the tagged one).
        let stopped_at = stopped_at.map(|entry| table.untagged_entry(&entry).to_vec());
        self.record_range(
            id,
            Some(index),
            (lower, upper),
            range.descending,
            stopped_at,
        );
        self.note_predicate(clock);
        Ok(())
    }

    /// Walks secondary index `index` over encoded `bounds`, like [`Self::scan_primary`]
    /// (the stop key is the index entry's).
    #[allow(clippy::too_many_arguments)]
    fn scan_secondary<T>(
        &self,
        table: &Table<V>,
        index: usize,
        (lower, upper): (&EncodedBound, &EncodedBound),
        descending: bool,
        want_stop: bool,
        mut inside: impl FnMut(&[u8], RowView<'_>) -> T,
        mut outside: impl FnMut(T) -> bool,
    ) -> Result<Option<Vec<u8>>> {
        let index_schema = &table.schema.indexes[index];
        let snapshot = self.snapshot();
        let mut visible_entry = Vec::new();
        let mut stopped_at = None;
        let mut refused = None;
        scan_in_batches(
            &table.secondary[index],
            lower,
            upper,
            descending,
            |entry, target| {
                let row = &target.row;
                if let Err(refusal) = self.before_read(row) {
                    refused = Some(refusal);
                    return false;
                }
                let (seen, cost) = match &target.exact {
                    // Physical pointer: the entry's own version, if this snapshot reads
                    // exactly that one (no walk, no key to compare).
                    Some(exact) => {
                        V::read_exact(row, exact, &snapshot, |v| v.map(|v| inside(entry, v)))
                    }
                    None => V::read(row, &snapshot, |v| {
                        let v = v?;
                        // The entry is a hint: yield the row only if the version this snapshot
                        // sees has exactly this entry's key.
                        key::encode_index_entry(
                            &mut visible_entry,
                            &v,
                            &index_schema.columns,
                            &table.schema.primary_key,
                        );
                        (visible_entry.as_slice() == entry).then(|| inside(entry, v))
                    }),
                };
                self.record_if_obsolete(table, row, cost.passed_obsolete);
                self.local.slot.stats.record_scan_read(cost);
                let go_on = seen.is_none_or(&mut outside);
                if !go_on && want_stop {
                    // The entry as the index holds it (a cursor resumes past it); validation
                    // compares it without a physical pointer's tag (`untagged_entry`).
                    stopped_at = Some(entry.to_vec());
                }
                go_on
            },
        );
        match refused {
            Some(refused) => Err(self.refuse(table, refused)),
            None => Ok(stopped_at),
        }
    }

    // ----- writes ----------------------------------------------------------------------

    pub(crate) fn insert(&mut self, id: TableId, row_values: &[Value]) -> Result<()> {
        self.check_writable()?;
        let table = self.table(id)?;
        table.schema.check_row(row_values)?;
        let owner = self.owner();
        let mut key_bytes = std::mem::take(&mut self.scratch.get_mut().key);
        key::encode_row_key(&mut key_bytes, row_values, &table.schema.primary_key);
        let result = self.insert_encoded(id, table, &key_bytes, row_values, &owner);
        self.scratch.get_mut().key = key_bytes;
        if result.is_ok() && self.log.is_some() {
            self.redo.insert(id.index, row_values);
        }
        result
    }

    fn insert_encoded(
        &mut self,
        id: TableId,
        table: &'e Table<V>,
        key_bytes: &[u8],
        row_values: &[Value],
        owner: &Arc<TxnShared>,
    ) -> Result<()> {
        // Without a hash index a lookup is a whole descent of the tree, which a successful
        // insert then repeats. A new key is the common case: there, try the insert first and
        // look the key up only if it fails (an existing row object, or a racing insert).
        let mut look_up_first = !table.primary.is_ordered_only();
        loop {
            let existing = if look_up_first {
                table.primary.with(key_bytes, Arc::clone)
            } else {
                None
            };
            look_up_first = true;
            match existing {
                Some(row) => {
                    let written =
                        self.write_row(table, id, key_bytes, &row, WriteIntent::Insert(row_values));
                    if matches!(written, Err(Error::DuplicateKey { .. })) {
                        // The insert read that the key exists
                        // (`regression_a_duplicate_key_is_a_read_validated_at_commit`); under
                        // MVTO and MV2PL the live row's lock, held to the end, carries it.
                        if self.recording == Recording::Everything {
                            if let Some(reads) = &self.reads {
                                reads.borrow_mut().record_point(id.index, key_bytes);
                            }
                        }
                    }
                    match written? {
                        Written::Done => return Ok(()),
                        Written::RowGone => continue,
                        Written::NotFound => unreachable!("an insert never reports not-found"),
                    }
                }
                None => {
                    let (row, created) = {
                        let _space = self.engine.allocate_in_memory_space();
                        let context = crate::version::NewRowContext {
                            table: id.index,
                            txn_id: self.start_ts,
                            indexed: !table.schema.indexes.is_empty(),
                        };
                        V::insert_row(
                            &self.engine.storage,
                            context,
                            row_values,
                            owner,
                            table.non_inline,
                        )?
                    };
                    // Locked before anyone can find it (MVTO, MV2PL): a new word is free.
                    if let Err(refused) = self.before_write(&row) {
                        unreachable!("a new row's word is free: {}", refused.reason);
                    }
                    // Index the row before publishing it: until the primary entry exists
                    // nobody can find it, and its secondary entries are hints anyway. The
                    // row's own record (uncommitted) hides it from everyone else.
                    if table
                        .primary
                        .insert_if_absent(key_bytes, Arc::clone(&row))
                        .is_err()
                    {
                        // The key has a row object (someone inserted it meanwhile, or the
                        // lookup was skipped): write over it. Our row was never published;
                        // drop its lock, and tell the storage its version is no one's.
                        if let Some(lock) = self.held.get_mut().remove(&row_address::<V>(&row)) {
                            let word = V::cc_word(&lock.row);
                            word.store(0, std::sync::atomic::Ordering::SeqCst);
                        }
                        V::discard_unpublished(&row, owner);
                        continue;
                    }
                    let exact = table
                        .physical_pointers
                        .then(|| V::edit(&row, |chain| V::newest_exact(chain)))
                        .flatten();
                    add_secondary_entries(table, &row, row_values, exact.as_ref(), &mut Vec::new());
                    if let Some(gc) = &table.tuple_gc {
                        gc.register(key_bytes, Arc::clone(&row));
                    }
                    let stats = &self.local.slot.stats;
                    stats.add(Counter::VersionsCreated, created.records as u64);
                    stats.add(Counter::VersionBytesCreated, created.bytes as u64);
                    self.record_written(WrittenRow {
                        table: id.index,
                        row,
                    });
                    return Ok(());
                }
            }
        }
    }

    pub(crate) fn update(
        &mut self,
        id: TableId,
        key_values: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<bool> {
        self.check_writable()?;
        let table = self.table(id)?;
        table.schema.check_key(key_values)?;
        let mask = table.schema.check_assignments(changes)?;
        let updated =
            self.write_by_key(id, table, key_values, WriteIntent::Update(mask, changes))?;
        if updated && self.log.is_some() {
            self.redo
                .update(id.index, key_values.iter().map(ValueRef::from), changes);
        }
        Ok(updated)
    }

    /// Sets `changes` on every row of `range` this transaction sees and `choose` picks, in
    /// primary-key order (descending if the range is); returns how many rows it updated. The range is read as
    /// [`Self::scan`] reads it (`choose` sees each row under the scan's rules, latched);
    /// each chosen row is then written through the row object the scan found, with no
    /// second index lookup, or by its key again if the collector buried that object
    /// meanwhile or the write does not find the row (where the by-key path records what
    /// it read, as [`Self::update`] does).
    pub(crate) fn update_range(
        &mut self,
        id: TableId,
        range: &KeyRange,
        changes: &[(usize, Value)],
        mut choose: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<usize> {
        self.check_writable()?;
        let table = self.table(id)?;
        let mask = table.schema.check_assignments(changes)?;
        let mut chosen: Vec<(Vec<u8>, RowRef<V>)> = Vec::new();
        // With a log, the key values of each chosen row, for its redo.
        let mut chosen_keys: Vec<Vec<Value>> = Vec::new();
        let logs = self.log.is_some();
        let key_columns = &table.schema.primary_key;
        self.scan_entries(
            id,
            range,
            |key, row, view| {
                choose(view).then(|| {
                    let values = logs.then(|| {
                        key_columns
                            .iter()
                            .map(|&column| view.get(column).to_value())
                            .collect::<Vec<_>>()
                    });
                    (key.to_vec(), Arc::clone(row), values)
                })
            },
            |picked| {
                if let Some((key, row, values)) = picked {
                    chosen.push((key, row));
                    chosen_keys.extend(values);
                }
                true
            },
        )?;
        let mut updated = 0;
        for (at, (key_bytes, row)) in chosen.iter().enumerate() {
            let intent = WriteIntent::Update(mask, changes);
            let done = match self.write_row(table, id, key_bytes, row, intent)? {
                Written::Done => true,
                Written::NotFound | Written::RowGone => self.write_by_encoded_key(
                    id,
                    table,
                    key_bytes,
                    WriteIntent::Update(mask, changes),
                )?,
            };
            if done && logs {
                self.redo.update(
                    id.index,
                    chosen_keys[at].iter().map(ValueRef::from),
                    changes,
                );
            }
            updated += usize::from(done);
        }
        Ok(updated)
    }

    pub(crate) fn delete(&mut self, id: TableId, key_values: &[Value]) -> Result<bool> {
        self.check_writable()?;
        let table = self.table(id)?;
        table.schema.check_key(key_values)?;
        let deleted = self.write_by_key(id, table, key_values, WriteIntent::Delete)?;
        if deleted && self.log.is_some() {
            self.redo.delete(id.index, key_values);
        }
        Ok(deleted)
    }

    fn write_by_key(
        &mut self,
        id: TableId,
        table: &'e Table<V>,
        key_values: &[Value],
        intent: WriteIntent<'_>,
    ) -> Result<bool> {
        let mut key_bytes = std::mem::take(&mut self.scratch.get_mut().key);
        key::encode_key_values(&mut key_bytes, key_values);
        let result = self.write_by_encoded_key(id, table, &key_bytes, intent);
        self.scratch.get_mut().key = key_bytes;
        result
    }

    /// [`Self::write_by_key`] with the key already encoded.
    fn write_by_encoded_key(
        &mut self,
        id: TableId,
        table: &'e Table<V>,
        key_bytes: &[u8],
        intent: WriteIntent<'_>,
    ) -> Result<bool> {
        let mut published = false;
        let clock = self.predicate_clock();
        loop {
            let row = table.primary.with(key_bytes, Arc::clone);
            let Some(row) = row else {
                // No row object: the write read the key's absence.
                if self.recording == Recording::Predicates && self.reads.is_none() && !published {
                    // MVTO: publish, then search again.
                    let mut predicate = ReadSet::default();
                    predicate.record_point(id.index, key_bytes);
                    self.publish_predicate(predicate);
                    published = true;
                    continue;
                }
                if let Some(reads) = &self.reads {
                    reads.borrow_mut().record_point(id.index, key_bytes);
                }
                self.note_predicate(clock);
                break Ok(false);
            };
            let intent = match &intent {
                WriteIntent::Update(mask, changes) => WriteIntent::Update(*mask, changes),
                WriteIntent::Delete => WriteIntent::Delete,
                WriteIntent::Insert(values) => WriteIntent::Insert(values),
            };
            match self.write_row(table, id, key_bytes, &row, intent) {
                Ok(Written::Done) => break Ok(true),
                Ok(Written::NotFound) => {
                    // The row does not exist in this transaction's view: a read of that.
                    // Not carried by the tombstone's lock or read timestamp alone (it may
                    // be buried and the key inserted into a new row object).
                    if let Some(reads) = &self.reads {
                        reads.borrow_mut().record_point(id.index, key_bytes);
                        self.note_predicate(clock);
                    } else if self.recording == Recording::Predicates && !published {
                        // MVTO: publish, then search again.
                        let mut predicate = ReadSet::default();
                        predicate.record_point(id.index, key_bytes);
                        self.publish_predicate(predicate);
                        published = true;
                        continue;
                    }
                    break Ok(false);
                }
                Ok(Written::RowGone) => continue,
                Err(error) => break Err(error),
            }
        }
    }

    /// Installs a write into one row (`key_bytes`: its encoded primary key); prunes its
    /// chain if the collector says so.
    fn write_row(
        &mut self,
        table: &'e Table<V>,
        id: TableId,
        key_bytes: &[u8],
        row: &RowRef<V>,
        intent: WriteIntent<'_>,
    ) -> Result<Written> {
        let owner = self.owner();
        if let Err(refused) = self.before_write(row) {
            return Err(self.refuse(table, refused));
        }
        let snapshot = Snapshot {
            start_ts: self.read_ts(),
            owner: Some(&owner),
            obsolete_below: 0,
        };
        let has_indexes = !table.schema.indexes.is_empty();
        // Physical pointers: every new version has entries of its own, whatever it changed.
        let adds_entries = match &intent {
            _ if table.physical_pointers => has_indexes,
            WriteIntent::Update(mask, _) => {
                !mask.intersection(table.schema.secondary_mask).is_empty()
            }
            WriteIntent::Insert(_) => has_indexes,
            WriteIntent::Delete => false,
        };
        // A delete adds no entry, but when it replaces this transaction's own version (its
        // insert or update) that version's entries may be needed by no version any more:
        // the tombstone keeps its values, but a row that does not exist needs no entry,
        // and once a later insert covers the tombstone nothing would remove them
        // (`regression_insert_delete_then_reinsert_leaks_no_index_entry`).
        let drops_replaced = adds_entries || (has_indexes && matches!(intent, WriteIntent::Delete));
        let written = {
            let _space = self.engine.allocate_in_memory_space();
            V::write(row, &snapshot, intent, &owner, table.non_inline)
        };
        match written {
            WriteResult::Installed {
                mut chain,
                new_record,
                created,
                replaced,
            } => {
                let stats = &self.local.slot.stats;
                stats.add(Counter::VersionsCreated, created.records as u64);
                stats.add(Counter::VersionBytesCreated, created.bytes as u64);
                if drops_replaced {
                    let mut entry = std::mem::take(&mut self.scratch.get_mut().entry);
                    if adds_entries {
                        let values = chain.values().0;
                        if table.physical_pointers {
                            // A tombstone has no entries (its row is found by no key).
                            if let Some(exact) = V::newest_exact(&chain) {
                                add_secondary_entries(
                                    table,
                                    row,
                                    &values,
                                    Some(&exact),
                                    &mut entry,
                                );
                            }
                        } else {
                            add_secondary_entries(table, row, &values, None, &mut entry);
                        }
                    }
                    if let Some(replaced) = replaced {
                        // This transaction's earlier version of the row is gone: drop the
                        // entries only it had.
                        crate::engine::collect::drop_unused_entries(
                            table, row, &chain, &replaced, &mut entry,
                        );
                    }
                    self.scratch.get_mut().entry = entry;
                }
                if G::DIRTY_BLOCKS {
                    // 'vac': the block of this row has something for the next pass.
                    table
                        .tuple_gc
                        .as_ref()
                        .expect("tuple-level collectors list rows")
                        .mark_dirty(key_bytes);
                }
                if G::COOPERATIVE
                    && chain.oldest_is_obsolete(self.obsolete_below)
                    && V::claim_for_cleaning(row)
                {
                    // 'coop': the writer walked past an obsolete version to the newest.
                    self.record_if_obsolete(table, row, true);
                }
                if G::EAGER_PRUNING {
                    crate::engine::collect::prune_after_write::<V, G>(
                        self.engine,
                        &self.local,
                        table,
                        row,
                        &mut chain,
                    );
                }
                stats.record_write_chain(chain.chain_len());
                drop(chain);
                if new_record {
                    self.record_written(WrittenRow {
                        table: id.index,
                        row: Arc::clone(row),
                    });
                }
                Ok(Written::Done)
            }
            WriteResult::Refused(Refusal::DuplicateKey) => Err(Error::DuplicateKey {
                table: table.schema.name.clone(),
            }),
            WriteResult::Refused(Refusal::NotFound) => Ok(Written::NotFound),
            WriteResult::Refused(Refusal::NoSpace) => Err(Error::CapacityExceeded {
                what: "persistent-memory region frames (no room for a new version)".into(),
                limit: 0,
            }),
            WriteResult::RowGone => Ok(Written::RowGone),
            WriteResult::Retry => {
                // A collection is moving the row's newest version (tile-block): let it
                // finish, then find the row again.
                std::thread::yield_now();
                Ok(Written::RowGone)
            }
            WriteResult::Conflict => {
                self.rollback(Counter::AbortedWriteConflict);
                self.phase.set(Phase::RolledBack);
                Err(Error::WriteConflict {
                    table: table.schema.name.clone(),
                })
            }
        }
    }

    // ----- end ---------------------------------------------------------------------------

    /// Commits, and returns once the commit is as durable as the database promises.
    pub(crate) fn commit(self) -> Result<()> {
        self.commit_visible()?.wait()
    }

    /// Commits until visible; returns the log (if any) and the position its durability
    /// waits for, for a `CommitTicket`.
    pub(crate) fn commit_for_ticket(self) -> Result<(Option<std::sync::Arc<Log>>, u64)> {
        let engine = self.engine;
        let acknowledgement = self.commit_visible()?;
        Ok((engine.log.get().cloned(), acknowledgement.end))
    }

    /// Commits: on success the transaction is visible to every transaction that begins
    /// after, and the returned acknowledgement says what the log must reach before the
    /// commit may be reported durable.
    pub(crate) fn commit_visible(mut self) -> Result<Acknowledgement<'e>> {
        self.check_active()?;
        match self.engine.protocol.kind {
            ConcurrencyControl::Ssn => return self.commit_ssn(),
            ConcurrencyControl::Mvto => return self.commit_mvto(),
            _ => {}
        }
        let writes_nothing = self.writes.get_mut().is_empty();
        let Some(owner) = self.shared.clone().filter(|_| !writes_nothing) else {
            // MV2PL: locked reads are serialized at the locks, but scans and absent keys
            // are not: validate them as a commit that writes nothing.
            if self.locks_rows {
                if let Some(reads) = self.reads.take().filter(|r| !r.borrow().is_empty()) {
                    let mut reads = reads.into_inner();
                    reads.seal();
                    let commit_ts = self.engine.txns.draw_commit_ts();
                    if let Err(error) = self.validate(&reads, commit_ts, None) {
                        return self.fail_at_commit(
                            None,
                            None,
                            error,
                            Counter::AbortedSerialization,
                        );
                    }
                }
            }
            // Otherwise the transaction is placed at its snapshot: it read exactly the
            // writers with smaller commit timestamps, each atomic at its own (the
            // validating ones by their validation), so it needs no validation itself.
            return Ok(self.commit_read_only());
        };
        let txns = &self.engine.txns;
        // A commit record is needed if a serializable transaction may be running whose
        // snapshot will not see this commit. Build it while our records still read as
        // uncommitted (a reader of our own rows in the COMMITTING state would wait for us).
        let mut record = (self.reads.is_some() || txns.serializable_running_since(u64::MAX - 1))
            .then(|| Arc::new(self.commit_record(&owner)));
        owner.mark_committing();
        if let Some(record) = &record {
            self.publish(record);
        }
        let mut commit_ts = txns.draw_commit_ts();
        if record.is_none() && txns.serializable_running_since(commit_ts) {
            // A serializable transaction began between the check and the draw, before our
            // timestamp: it must validate against this commit. Step back, publish, and draw
            // again (the abandoned timestamp stamps nothing).
            owner.mark_not_committing();
            let built = Arc::new(self.commit_record(&owner));
            owner.mark_committing();
            self.publish(&built);
            record = Some(built);
            commit_ts = txns.draw_commit_ts();
        }
        debug_assert!(commit_ts >= self.start_ts);
        if let Some(record) = &record {
            record.set_commit_ts(commit_ts);
        }
        if let Some(reads) = self.reads.take() {
            let mut reads = reads.into_inner();
            reads.seal();
            if let Err(error) = self.validate(&reads, commit_ts, record.as_ref()) {
                return self.fail_at_commit(
                    Some(&owner),
                    record.as_ref(),
                    error,
                    Counter::AbortedSerialization,
                );
            }
        }
        // The redo goes into the log between validation and visibility: a copy, never a
        // wait (readers of our rows wait on us now).
        let end = match self.append_redo(commit_ts) {
            Ok(end) => end,
            Err(error) => {
                return self.fail_at_commit(
                    Some(&owner),
                    record.as_ref(),
                    error,
                    Counter::AbortedDurability,
                )
            }
        };
        owner.mark_committed(commit_ts);
        self.finish_commit(&owner, commit_ts, record.is_some());
        Ok(self.acknowledgement(end))
    }

    /// Appends this transaction's commit record to the log (if the database has one and
    /// the transaction logged anything); returns the LSN after it.
    fn append_redo(&mut self, commit_ts: u64) -> Result<Option<u64>> {
        let Some(log) = self.log else {
            return Ok(None);
        };
        if self.redo.is_empty() {
            return Ok(None);
        }
        let mut record = std::mem::take(&mut self.redo).seal(commit_ts);
        let end = log.append(&mut record, true)?;
        self.local.give_back_redo_buffer(record.into_buffer());
        Ok(Some(end))
    }

    /// What a commit that became visible waits for: its own record, or (having logged
    /// nothing) every commit appended so far, which includes every commit it may have read
    /// (a commit is appended before it is visible).
    fn acknowledgement(&self, own_end: Option<u64>) -> Acknowledgement<'e> {
        match self.log {
            None => Acknowledgement { log: None, end: 0 },
            Some(log) => Acknowledgement {
                log: Some(log),
                end: own_end.unwrap_or_else(|| log.commits_end()),
            },
        }
    }

    /// Commits a transaction that wrote nothing (its validation, if any, passed).
    fn commit_read_only(self) -> Acknowledgement<'e> {
        self.finish();
        self.local.slot.stats.add(Counter::CommittedReadOnly, 1);
        crate::engine::collect::after_end::<V, G>(self.engine, &self.local, false, self.start_ts);
        self.acknowledgement(None)
    }

    /// Rolls back a transaction whose commit failed validation (or found the log failed):
    /// withdraws its commit record, undoes its writes (not visible yet: nobody can have
    /// read them) and ends it.
    fn fail_at_commit(
        self,
        owner: Option<&Arc<TxnShared>>,
        record: Option<&Arc<CommitRecord>>,
        error: Error,
        reason: Counter,
    ) -> Result<Acknowledgement<'e>> {
        if let Some(record) = record {
            let mut log = self.local.slot.validation_log.lock();
            if let Some(at) = log.iter().rposition(|r| Arc::ptr_eq(r, record)) {
                log.remove(at);
                let stats = &self.local.slot.stats;
                stats.add(Counter::CommitRecordsDropped, 1);
            }
        }
        if let Some(owner) = owner {
            owner.mark_not_committing();
        }
        self.rollback(reason);
        self.finish();
        crate::engine::collect::after_end::<V, G>(self.engine, &self.local, false, self.start_ts);
        Err(error)
    }

    /// After the owner is marked committed at `commit_ts`: stamps the versions, releases
    /// the row locks, ends the transaction and queues its rows for finalizing.
    fn finish_commit(&mut self, owner: &Arc<TxnShared>, commit_ts: u64, published_record: bool) {
        let (mut folded, mut folded_bytes) = (0u64, 0usize);
        let mut rows = std::mem::take(self.writes.get_mut());
        rows.retain(|written| {
            let stamped = V::stamp(&written.row, owner, commit_ts);
            folded += stamped.folded_records as u64;
            folded_bytes += stamped.freed_bytes;
            // A live row whose chain is empty has nothing for finalizing to unlink or bury
            // (a committed insert that folded into the row): do not queue it. Later writers
            // queue it again if they link records.
            !stamped.nothing_to_finalize
        });
        let stats = &self.local.slot.stats;
        stats.add(Counter::InsertRecordsFolded, folded);
        stats.add(Counter::VersionBytesFreed, folded_bytes as u64);
        self.finish();
        let slot = &self.local.slot;
        slot.stats.add(Counter::Committed, 1);
        // Without a collector nothing is ever finalized: queueing would only keep the rows.
        // Nor under tuple-level collection, which examines rows, not transactions.
        if !rows.is_empty() && !matches!(G::FINALIZING, Finalizing::Never | Finalizing::TupleLevel)
        {
            crate::engine::collect::enqueue_committed(&self.local, Committed::new(commit_ts, rows));
        } else {
            self.local.give_back_row_list(rows);
        }
        if published_record || !slot.validation_log.lock().is_empty() {
            let horizon = self.engine.txns.serializable_horizon();
            crate::engine::collect::trim_validation_log(slot, horizon, &slot.stats);
        }
        crate::engine::collect::after_end::<V, G>(self.engine, &self.local, true, self.start_ts);
    }

    /// MVTO: the versions are stamped with the transaction's id. Before that, its written
    /// keys are checked against the predicate reads of younger transactions (phantoms).
    fn commit_mvto(mut self) -> Result<Acknowledgement<'e>> {
        let writes_nothing = self.writes.get_mut().is_empty();
        let Some(owner) = self.shared.clone().filter(|_| !writes_nothing) else {
            return Ok(self.commit_read_only());
        };
        let predicates = &self.engine.protocol.mvto;
        if predicates.any_younger_than(self.start_ts, &self.local.slot.stats) {
            let record = self.commit_record(&owner);
            let stats = &self.local.slot.stats;
            if let Some(table) = predicates.younger_reader_of(self.start_ts, &record.writes, stats)
            {
                let error = Error::SerializationFailure {
                    reason: format!(
                        "MVTO: a younger transaction's scan or absent-key read covers a row \
                         this one wrote to {}",
                        self.table_name(table)
                    ),
                };
                return self.fail_at_commit(None, None, error, Counter::AbortedSerialization);
            }
        }
        owner.mark_committing();
        let end = match self.append_redo(self.start_ts) {
            Ok(end) => end,
            Err(error) => {
                return self.fail_at_commit(Some(&owner), None, error, Counter::AbortedDurability)
            }
        };
        // A storage with a durable home of its own makes the writes durable here, before
        // they become visible (`VersionStorage::commit_durably`). Such a storage has no
        // redo log (`Options::validate`), so the log's append above did nothing for it; on
        // a failure the storage fails for good and unmakes its commit record, so that the
        // rolled-back transaction cannot read as committed after a restart.
        if let Err(error) = V::commit_durably(&self.engine.storage, &owner, self.start_ts) {
            return self.fail_at_commit(Some(&owner), None, error, Counter::AbortedDurability);
        }
        owner.mark_committed(self.start_ts);
        self.finish_commit(&owner, self.start_ts, false);
        Ok(self.acknowledgement(end))
    }

    /// SSN: the exclusion test under the log's mutex, for read-only transactions too.
    fn commit_ssn(mut self) -> Result<Acknowledgement<'e>> {
        let mut reads = self
            .reads
            .take()
            .map(RefCell::into_inner)
            .unwrap_or_default();
        reads.seal();
        let writes_nothing = self.writes.get_mut().is_empty();
        let owner = self.shared.clone().filter(|_| !writes_nothing);
        if owner.is_none() && reads.is_empty() {
            return Ok(self.commit_read_only());
        }
        let writes = owner
            .as_ref()
            .map(|owner| self.commit_record(owner).writes)
            .unwrap_or_default();
        let txns = &self.engine.txns;
        let horizons = crate::cc::ssn::Horizons {
            watermark: txns.watermark(),
            writers: txns.serializable_horizon(),
            active: || txns.active_snapshots(&mut Vec::new()),
        };
        // The redo, sealed once the timestamp is drawn and appended just before the commit
        // is marked (inside SSN's serial section: a copy, like every append).
        let log = self.log;
        let mut redo =
            (owner.is_some() && !self.redo.is_empty()).then(|| std::mem::take(&mut self.redo));
        let mut appended: Option<Result<u64>> = None;
        let decided = self.engine.protocol.ssn.commit(
            self.start_ts,
            reads,
            writes,
            horizons,
            || {
                if let Some(owner) = &owner {
                    owner.mark_committing();
                }
                txns.draw_commit_ts()
            },
            |commit_ts| {
                if let (Some(log), Some(redo)) = (log, redo.take()) {
                    let mut record = redo.seal(commit_ts);
                    appended = Some(log.append(&mut record, true));
                }
                // Decided by SSN: the commit stands even if the append found the log
                // failed; then it is never acknowledged (`DurabilityLost` below), and the
                // failed log refuses all further work.
                if let Some(owner) = &owner {
                    owner.mark_committed(commit_ts);
                }
            },
            &self.local.slot.stats,
        );
        match (decided, owner) {
            (Err(exclusion), owner) => {
                let error = Error::SerializationFailure {
                    reason: format!(
                        "SSN: a transaction that must follow this one committed before it \
                         (successor watermark {} <= predecessor watermark {})",
                        exclusion.pi, exclusion.eta
                    ),
                };
                self.fail_at_commit(owner.as_ref(), None, error, Counter::AbortedSerialization)
            }
            (Ok(_), None) => Ok(self.commit_read_only()),
            (Ok(commit_ts), Some(owner)) => {
                self.finish_commit(&owner, commit_ts, false);
                let end = appended.transpose()?;
                Ok(self.acknowledgement(end))
            }
        }
    }

    fn table_name(&self, table: u32) -> &str {
        self.engine
            .table_by_index(table)
            .map_or("a table", |t| t.schema.name.as_str())
    }

    /// Publishes a commit record in this thread's log (before the timestamp is drawn).
    ///
    /// A slot's log stays in commit order, every record but the newest drawn: only its
    /// thread publishes there, one commit at a time, and that commit draws (or withdraws
    /// its record) before the thread can publish again; the clock only grows. Validators
    /// rely on it to stop at the first record their snapshot sees ([`Self::validate`]).
    fn publish(&self, record: &Arc<CommitRecord>) {
        let slot = &self.local.slot;
        let mut log = slot.validation_log.lock();
        debug_assert!(
            log.back()
                .is_none_or(|newest| newest.commit_ts_if_drawn().is_some()),
            "the previous commit on this thread drew before this one publishes"
        );
        log.push_back(Arc::clone(record));
        drop(log);
        slot.stats.add(Counter::CommitRecordsPublished, 1);
    }

    /// Checks the reads against every commit record published by others.
    fn validate(
        &self,
        reads: &ReadSet,
        commit_ts: u64,
        own: Option<&Arc<CommitRecord>>,
    ) -> Result<()> {
        if reads.is_empty() {
            return Ok(());
        }
        let start = self.validation_start();
        let mut others = Vec::new();
        let mut examined = 0;
        for slot in self.engine.txns.slots() {
            let log = slot.validation_log.lock();
            // Newest first, up to the first record drawn before our snapshot (visible to
            // it, as is everything older in this log: a slot's log is in commit order).
            // A long validating transaction keeps every record since its start, so a walk
            // over the whole log made every writer's validation as slow as that
            // transaction was old (issue 36). Records not drawn yet are kept (they may
            // draw below us).
            let window = log.iter().rev().take_while(|r| {
                examined += 1;
                r.commit_ts_if_drawn().is_none_or(|ts| ts >= start)
            });
            others.extend(
                window
                    .filter(|r| own.is_none_or(|own| !Arc::ptr_eq(r, own)))
                    .cloned(),
            );
        }
        let stats = &self.local.slot.stats;
        stats.add(Counter::ValidationRecordsExamined, examined);
        // The slots' locks are released: waiting for an owner to decide happens outside
        // them, so an owner can still lock them to validate.
        match crate::cc::precision::validate(reads, start, commit_ts, &others) {
            None => Ok(()),
            Some(table) => Err(Error::SerializationFailure {
                reason: format!(
                    "a transaction that committed while this one ran wrote to {} what this \
                     one read",
                    self.table_name(table)
                ),
            }),
        }
    }

    /// The keys this transaction wrote, for serializable validators: per row, the primary
    /// key and the secondary-index entries of the row before and after the write.
    fn commit_record(&self, owner: &Arc<TxnShared>) -> CommitRecord {
        // Under first-updater-wins (and MV2PL's write locks) the version this transaction
        // replaced is the one it reads without its own writes.
        let before = Snapshot {
            start_ts: self.read_ts(),
            owner: None,
            obsolete_below: 0,
        };
        let after = Snapshot {
            start_ts: self.read_ts(),
            owner: Some(owner),
            obsolete_below: 0,
        };
        let mut buffer = Vec::new();
        let own_writes = self.writes.borrow();
        let mut writes = Vec::with_capacity(own_writes.len());
        for written in own_writes.iter() {
            let table = self
                .engine
                .table_by_index(written.table)
                .expect("a written table exists");
            let schema = &table.schema;
            let mut primary = None;
            let mut entries: Vec<(u16, Vec<u8>)> = Vec::new();
            for snapshot in [&before, &after] {
                // Under first-updater-wins the version this transaction replaced is the one
                // its snapshot sees without its own writes.
                V::read(&written.row, snapshot, |version| {
                    let Some(version) = version else { return };
                    if primary.is_none() {
                        key::encode_row_key(&mut buffer, &version, &schema.primary_key);
                        primary = Some(crate::key::Key::from_bytes(&buffer));
                    }
                    for (index, index_schema) in schema.indexes.iter().enumerate() {
                        key::encode_index_entry(
                            &mut buffer,
                            &version,
                            &index_schema.columns,
                            &schema.primary_key,
                        );
                        let index = u16::try_from(index).expect("indexes per table fit u16");
                        if !entries.iter().any(|(i, e)| *i == index && *e == buffer) {
                            entries.push((index, buffer.clone()));
                        }
                    }
                });
            }
            // A row inserted and deleted again by this transaction changed nothing anyone
            // could have read.
            if let Some(primary) = primary {
                writes.push(WrittenKey {
                    table: written.table,
                    primary,
                    entries,
                });
            }
        }
        CommitRecord::new(Arc::clone(owner), writes)
    }

    pub(crate) fn abort(self) {
        self.abort_in_place();
    }

    fn abort_in_place(&self) {
        match self.phase.get() {
            Phase::Active => {
                self.rollback(Counter::AbortedByUser);
                self.finish();
            }
            Phase::RolledBack => self.finish(),
            Phase::Finished => {}
        }
    }

    /// Undoes every write, newest first, releases the row locks, and counts the abort.
    fn rollback(&self, reason: Counter) {
        let stats = &self.local.slot.stats;
        stats.add(reason, 1);
        let Some(owner) = self.shared.clone() else {
            self.release_locks();
            return;
        };
        let mut entry = Vec::new();
        // A tombstone some running transaction may still conflict with stays for the
        // finalizing of the transaction that left it
        // (`regression_a_rolled_back_insert_keeps_the_tombstone_a_concurrent_writer_conflicts_with`).
        let mut watermark = None;
        let txns = &self.engine.txns;
        let mut writes = self.writes.borrow_mut();
        for written in writes.drain(..).rev() {
            let table = self
                .engine
                .table_by_index(written.table)
                .expect("a written table exists");
            V::edit(&written.row, |chain| {
                let report = chain.rollback(&owner);
                stats.add(Counter::VersionsRolledBack, report.freed_records as u64);
                stats.add(Counter::VersionBytesFreed, report.freed_bytes as u64);
                crate::engine::collect::drop_unused_entries(
                    table,
                    &written.row,
                    chain,
                    &report.written,
                    &mut entry,
                );
                crate::engine::collect::bury_if_unreachable(
                    table,
                    &written.row,
                    chain,
                    &mut entry,
                    || *watermark.get_or_insert_with(|| txns.watermark()),
                );
                if G::DIRTY_BLOCKS {
                    // 'vac': a pass may have found the block clean while the write was
                    // open (an uncommitted insert holds no record in some storages); the
                    // rollback leaves a row to drop or a tombstone to bury
                    // (`regression_vac_examines_a_block_again_after_a_rollback`).
                    mark_block_dirty(table, chain, &mut entry);
                }
            });
        }
        owner.mark_aborted();
        self.local.give_back_row_list(std::mem::take(&mut *writes));
        drop(writes);
        self.release_locks();
    }

    /// Adds a row to the rows this transaction wrote, in a list its thread kept from an
    /// earlier transaction if it has one (`LocalSlot::take_row_list`).
    fn record_written(&mut self, written: WrittenRow<V>) {
        let writes = self.writes.get_mut();
        if writes.capacity() == 0 {
            *writes = self.local.take_row_list();
        }
        writes.push(written);
    }

    fn finish(&self) {
        if self.phase.get() != Phase::Finished {
            self.release_locks();
            if self.registered_for_validation {
                self.engine
                    .txns
                    .end_serializable(&self.local, self.start_ts);
            }
            self.engine
                .gc
                .end(&self.engine.txns, &self.local, self.start_ts);
            self.engine.txns.end(&self.local, self.start_ts);
            self.phase.set(Phase::Finished);
        }
    }
}

impl<V: VersionStorage, G: Collector> Drop for EngineTxn<'_, V, G> {
    fn drop(&mut self) {
        if self.phase.get() != Phase::Finished {
            self.abort_in_place();
            crate::engine::collect::after_end::<V, G>(
                self.engine,
                &self.local,
                false,
                self.start_ts,
            );
        }
    }
}

/// 'vac', after a rollback: marks the block of the row whose latched chain is `chain`
/// dirty (`scratch` receives its encoded key).
fn mark_block_dirty<V: VersionStorage>(table: &Table<V>, chain: &V::Chain, scratch: &mut Vec<u8>) {
    let gc = table
        .tuple_gc
        .as_ref()
        .expect("tuple-level collectors list rows");
    key::encode_row_key(scratch, &chain.values().0, &table.schema.primary_key);
    gc.mark_dirty(scratch);
}

/// How a write to one row ended, short of an error.
enum Written {
    Done,
    /// Update or delete of a row this transaction does not see.
    NotFound,
    /// The collector removed the row from the index: look the key up again.
    RowGone,
}

/// Adds the secondary-index entries of one version (`exact` under physical pointers). An
/// entry that already points at this row stays; one that points at another row is stale
/// (that row was removed from the primary index, since primary keys are unique and the
/// entry holds the primary key) and is replaced.
pub(crate) fn add_secondary_entries<V: VersionStorage, C: Columns + ?Sized>(
    table: &Table<V>,
    row: &RowRef<V>,
    values: &C,
    exact: Option<&V::Exact>,
    entry: &mut Vec<u8>,
) {
    for index in 0..table.schema.indexes.len() {
        add_secondary_entry(table, index, row, values, exact, entry);
    }
}

/// Adds the entry of `values` (a version of `row`) to secondary index `index`.
pub(crate) fn add_secondary_entry<V: VersionStorage, C: Columns + ?Sized>(
    table: &Table<V>,
    index: usize,
    row: &RowRef<V>,
    values: &C,
    exact: Option<&V::Exact>,
    entry: &mut Vec<u8>,
) {
    table.encode_entry(entry, values, index, exact.map(V::exact_tag));
    let secondary = &table.secondary[index];
    let target = || IndexTarget {
        row: Arc::clone(row),
        exact: exact.cloned(),
    };
    while secondary.insert_if_absent(entry, target()).is_err() {
        if !secondary.remove_if(entry, |other| !Arc::ptr_eq(&other.row, row)) {
            break; // the entry is this row's already
        }
    }
}

/// Walks an index range in batches of [`SCAN_BATCH`] entries, pinning the index's epoch
/// once per batch and resuming past the last key (after it, or before it when
/// `descending`), until `on_entry` returns `false`.
pub(crate) fn scan_in_batches<R, I: RangeScan<R>>(
    index: &I,
    lower: &EncodedBound,
    upper: &EncodedBound,
    descending: bool,
    mut on_entry: impl FnMut(&[u8], &R) -> bool,
) {
    let mut resume: Option<Vec<u8>> = None;
    loop {
        let mut seen = 0;
        let mut stopped = false;
        let mut last_key = Vec::new();
        {
            let guard = Guard::new();
            let visit = |key: &[u8], row: &R| {
                seen += 1;
                if !on_entry(key, row) {
                    stopped = true;
                    return false;
                }
                if seen == SCAN_BATCH {
                    last_key.extend_from_slice(key);
                    return false;
                }
                true
            };
            let resumed = resume.as_deref().map(Bound::Excluded);
            if descending {
                let upper = resumed.unwrap_or_else(|| upper.as_ref().map(Vec::as_slice));
                index.range_back(lower.as_ref().map(Vec::as_slice), upper, &guard, visit);
            } else {
                let lower = resumed.unwrap_or_else(|| lower.as_ref().map(Vec::as_slice));
                index.range_from(lower, upper.as_ref().map(Vec::as_slice), &guard, visit);
            }
        }
        if stopped || seen < SCAN_BATCH {
            return;
        }
        resume = Some(last_key);
    }
}

pub(crate) type EncodedBound = Bound<Vec<u8>>;

/// Encodes a range of key prefixes (primary key, or a secondary index's key when `index`
/// is given). A prefix bound stands for all keys that start with it: `..=p` includes them,
/// `..p` excludes them. Returns `None` for a range that is empty by construction.
pub(crate) fn encode_range(
    schema: &TableSchema,
    range: &KeyRange,
    index: Option<usize>,
) -> Result<Option<(EncodedBound, EncodedBound)>> {
    let encode = |values: &Vec<Value>| -> Result<Vec<u8>> {
        let mut out = Vec::new();
        match index {
            None => {
                if values.len() > schema.primary_key.len() {
                    return Err(Error::WrongArity {
                        what: format!("primary-key range bound of {}", schema.name),
                        expected: schema.primary_key.len(),
                        found: values.len(),
                    });
                }
                for (value, &column) in values.iter().zip(&schema.primary_key) {
                    if value.is_null() {
                        return Err(Error::NullInPrimaryKey {
                            table: schema.name.clone(),
                            column: schema.column_names[column].clone(),
                        });
                    }
                    if !value.fits(schema.column_types[column]) {
                        // Reuse the full check for its error.
                        let mut probe = vec![Value::Null; schema.arity()];
                        probe[column] = value.clone();
                        schema.check_row(&probe)?;
                    }
                    key::encode_value(&mut out, ValueRef::from(value));
                }
            }
            Some(index) => {
                schema.check_index_key(index, values)?;
                for value in values {
                    key::encode_tagged(&mut out, ValueRef::from(value));
                }
            }
        }
        Ok(out)
    };
    let lower = match &range.start {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(p) => Bound::Included(encode(p)?),
        Bound::Excluded(p) => match key::prefix_successor(&encode(p)?) {
            Some(s) => Bound::Included(s),
            None => return Ok(None),
        },
    };
    let upper = match &range.end {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Excluded(p) => Bound::Excluded(encode(p)?),
        Bound::Included(p) => match key::prefix_successor(&encode(p)?) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        },
    };
    Ok(Some((lower, upper)))
}
