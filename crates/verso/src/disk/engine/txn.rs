//! A transaction of the disk engine behind [`crate::Transaction`]: the public operations
//! checked as the in-memory engine checks them (the same schema checks, the same errors),
//! then done on the tables in PostgreSQL's design under snapshot isolation.
//!
//! Errors follow [`crate::Transaction`]'s rule: a write conflict rolls the transaction back
//! at once (every later call: [`Error::TransactionAborted`]); bad input and a duplicate key
//! change nothing and leave it usable; any other error from a write (an I/O error midway
//! through a heap and its indexes) rolls it back too, so nothing is left half-applied.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use super::{Counters, DiskEngine, DiskTableEntry};
use crate::cc::precision::{CommitRecord, RangeRead, ReadSet, WrittenKey};
// The slots' records and owners are the crate's `Arc` (loom's under `--cfg loom`).
use crate::disk::transactions::DiskTransaction;
use crate::durability::log::Log;
use crate::engine::txn::{encode_range, End, ScanCursor};
use crate::key;
use crate::row::{PackedRef, PackedRow, RowView};
use crate::schema::TableSchema;
use crate::sync::Arc as SyncArc;
use crate::txn::state::TxnShared;
use crate::{Error, Isolation, KeyRange, NonInline, Result, TableId, Value};

/// Points of a commit where a unit test pauses the committing thread to force an
/// interleaving (test builds only; `tests::regression_*`).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pause {
    /// A commit's error path begins: its record is still published, its owner undecided.
    RefusedCommitBegins,
    /// A refused commit is about to do its first I/O (the drop of its pages, the rollback
    /// of its undo).
    RollbackIoBegins,
    /// A validator holds its candidate records (and its commit-log entry's latch).
    ValidatorCollected,
}

/// What a test runs at a pause point.
#[cfg(test)]
type PauseHook = Box<dyn FnMut(Pause)>;

#[cfg(test)]
thread_local! {
    /// The calling thread's pause hook, if a test set one.
    static PAUSE: RefCell<Option<PauseHook>> = const { RefCell::new(None) };
}

/// Runs the calling thread's pause hook at `point`, if a test set one.
#[cfg(test)]
fn pause(point: Pause) {
    PAUSE.with(|hook| {
        if let Some(hook) = hook.borrow_mut().as_mut() {
            hook(point);
        }
    });
}

/// Versions a transaction wrote in one table, for autovacuum's counts.
#[derive(Clone, Copy, Default)]
struct Written {
    inserts: u64,
    /// Updates and deletes: each makes the version it replaced dead once committed.
    replaced: u64,
    /// Updates: each made a new version, dead if the transaction aborts.
    updates: u64,
    /// Deletes: rolled back with nothing to collect if the transaction aborts.
    deletes: u64,
}

/// A walk's end: the key it stopped at (if it stopped), or its error with the last key it
/// handed out.
type Walked = std::result::Result<Option<Vec<u8>>, (Error, Option<Vec<u8>>)>;

/// A disk transaction as the public API drives it.
pub(crate) struct DiskTxn<'e> {
    engine: &'e DiskEngine,
    /// `None` once rolled back after a conflict or a failed write.
    txn: Option<DiskTransaction<'e>>,
    /// The snapshot, kept past a rollback for `start_ts`.
    start: u64,
    isolation: Isolation,
    read_only: bool,
    written: RefCell<HashMap<u32, Written>>,
    /// A serializable transaction that may write: its reads, validated at commit against
    /// the commit records of writers that committed since its snapshot (precision
    /// locking, `cc::precision`, as the in-memory engine does).
    reads: Option<RefCell<ReadSet>>,
    /// The rows it wrote as validators see them: primary key, and index keys before and
    /// after (for its commit record, if a serializable transaction may need one).
    written_keys: RefCell<Vec<WrittenKey>>,
    /// Reused for keys.
    scratch: RefCell<Vec<u8>>,
    rolled_back: Cell<bool>,
    /// Tables whose heap it may have placed new versions in (inserts and updates), whose
    /// pages it owns under co-located placement until its end (`disk::placement`, P2).
    placed_in: RefCell<Vec<u32>>,
}

fn packed<'a>(schema: &TableSchema, bytes: &'a [u8]) -> Result<PackedRef<'a>> {
    PackedRef::from_untrusted(bytes, schema.arity()).map_err(|reason| Error::Corruption {
        file: format!("a heap file of table {}", schema.name),
        offset: 0,
        reason: format!("a tuple that is no row: {reason}"),
    })
}

impl<'e> DiskTxn<'e> {
    /// Begins a transaction. A serializable one that may write records its reads; a
    /// read-only one is serialized at its snapshot and records nothing.
    pub(crate) fn begin(
        engine: &'e DiskEngine,
        isolation: Isolation,
        read_only: bool,
    ) -> Result<Self> {
        engine.check_open()?;
        let validates = isolation == Isolation::Serializable && !read_only;
        let txn = engine.txns.begin_as(validates)?;
        Counters::add(&engine.counters.transactions_begun, 1);
        Ok(DiskTxn {
            engine,
            start: txn.start(),
            txn: Some(txn),
            isolation,
            read_only,
            written: RefCell::new(HashMap::new()),
            reads: validates.then(|| RefCell::new(ReadSet::default())),
            written_keys: RefCell::new(Vec::new()),
            scratch: RefCell::new(Vec::new()),
            rolled_back: Cell::new(false),
            placed_in: RefCell::new(Vec::new()),
        })
    }

    pub(crate) fn start_ts(&self) -> u64 {
        self.start
    }

    pub(crate) fn isolation(&self) -> Isolation {
        self.isolation
    }

    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn active(&self) -> Result<&DiskTransaction<'e>> {
        self.engine.check_open()?;
        match &self.txn {
            Some(txn) if !self.rolled_back.get() => Ok(txn),
            _ => Err(Error::TransactionAborted),
        }
    }

    fn writable(&mut self) -> Result<()> {
        self.active()?;
        if self.read_only {
            return Err(Error::ReadOnlyTransaction);
        }
        Ok(())
    }

    fn table(&self, id: TableId) -> Result<&'e DiskTableEntry> {
        self.engine.table(id)
    }

    pub(crate) fn schema(&self, id: TableId) -> Result<&'e TableSchema> {
        Ok(&self.table(id)?.schema)
    }

    /// Rolls the transaction back after a failed write and returns the error; a
    /// duplicate key or an entry too large changed nothing and leaves it usable.
    fn fail(&mut self, error: Error) -> Error {
        let c = &self.engine.counters;
        let cause = match &error {
            // Refused before anything was written (the table layer checks keys and sizes
            // first): the transaction stays usable.
            Error::DuplicateKey { .. } | Error::EntryTooLarge { .. } => return error,
            Error::WriteConflict { .. } => &c.aborts_write_conflict,
            _ => &c.aborts_durability,
        };
        self.roll_back(cause);
        error
    }

    /// Rolls back, counting the abort under `cause`.
    fn roll_back(&mut self, cause: &std::sync::atomic::AtomicU64) {
        if let Some(txn) = self.txn.take() {
            let xid = txn.snapshot().xid;
            if txn.abort().is_ok() {
                self.drop_aborted_pages(xid);
            }
            // InnoDB's design: the rows it changed in place go back (after the abort is in
            // the commit log, C5; an abort that failed failed the log, and recovery rolls
            // them back).
            self.engine.roll_back_undo(xid, self.start);
            self.release_pages(xid);
            Counters::add(cause, 1);
            self.count_ended(false);
        }
        self.rolled_back.set(true);
    }

    /// Notes that a write of table `id` may place a new version in its heap (before the
    /// write: a write that fails midway may have taken a page).
    fn note_placing(&self, id: TableId) {
        let mut placed_in = self.placed_in.borrow_mut();
        if !placed_in.contains(&id.index) {
            placed_in.push(id.index);
        }
    }

    /// Gives back the pages `xid` owns in the heaps it placed versions in, once its end
    /// (commit or abort, successful or not) returned: it is no longer live (P2). Under
    /// PostgreSQL's placement it owns none. A failure to record a page's room in the
    /// free-space map is not the transaction's: its end stands, the page leaves the
    /// Barray all the same, and the map (a hint) offers it again after the next vacuum.
    fn release_pages(&self, xid: u64) {
        if xid == 0 {
            return;
        }
        for &table in self.placed_in.borrow().iter() {
            if let Ok(entry) = self.engine.table(TableId {
                index: table,
                database: self.engine.tag,
            }) {
                if let Some(heap) = entry.table.heap() {
                    let _ = heap.release(xid);
                    debug_assert!(heap.pages_owned_by(xid).is_empty());
                }
            }
        }
    }

    /// Drops, unwritten, the pages `xid` formatted and alone changed in the heaps it
    /// placed versions in, once its abort returned (co-located placement: SI-CV's "if
    /// T_j aborts Block2 is not written", `DiskTable::drop_aborted_pages`). A failure
    /// (an I/O error removing an entry or syncing the log) only keeps pages: they are
    /// written as any other.
    fn drop_aborted_pages(&self, xid: u64) {
        if xid == 0 {
            return;
        }
        for &table in self.placed_in.borrow().iter() {
            if let Ok(entry) = self.engine.table(TableId {
                index: table,
                database: self.engine.tag,
            }) {
                let _ = entry.table.drop_aborted_pages(xid);
            }
        }
    }

    /// Counts what the transaction's end left to collect (autovacuum's dead tuples) and
    /// its versions' fates.
    fn count_ended(&self, committed: bool) {
        let c = &self.engine.counters;
        for (&table, written) in self.written.borrow().iter() {
            let Ok(entry) = self.engine.table(TableId {
                index: table,
                database: self.engine.tag,
            }) else {
                continue;
            };
            if committed {
                entry.table.add_dead_tuples(written.replaced);
                Counters::add(&c.insert_records_folded, written.inserts);
            } else {
                // Invisible at once: rolled back, though the tuples stay until pruned
                // (pruning does not count a tuple whose creator aborted as reclaimed).
                entry
                    .table
                    .add_dead_tuples(written.inserts + written.updates);
                Counters::add(
                    &c.versions_rolled_back,
                    written.inserts + written.updates + written.deletes,
                );
            }
        }
    }

    fn note(&self, id: TableId, change: impl FnOnce(&mut Written)) {
        change(self.written.borrow_mut().entry(id.index).or_default());
    }

    fn record_point(&self, id: TableId, key: &[u8]) {
        if let Some(reads) = &self.reads {
            reads.borrow_mut().record_point(id.index, key);
        }
    }

    /// Records a scan of encoded `[lower, upper]`, cut at `stopped_at` if it stopped
    /// early (its end, for a descending scan).
    fn record_range(
        &self,
        id: TableId,
        index: Option<usize>,
        (lower, upper): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        descending: bool,
        stopped_at: Option<Vec<u8>>,
    ) {
        let Some(reads) = &self.reads else { return };
        let (lower, upper) = match (stopped_at, descending) {
            (None, _) => (lower, upper),
            (Some(at), false) => (lower, Bound::Included(at)),
            (Some(at), true) => (Bound::Included(at), upper),
        };
        reads.borrow_mut().record_range(RangeRead {
            table: id.index,
            index: index.map(|i| u16::try_from(i).expect("indexes per table fit u16")),
            lower,
            upper,
        });
    }

    /// Notes a written row for the commit record: its primary key and its index keys
    /// before and after the write (each distinct one once).
    fn note_written_keys(
        &self,
        id: TableId,
        entry: &DiskTableEntry,
        key: &[u8],
        before: Option<&[u8]>,
        after: Option<&[u8]>,
    ) -> Result<()> {
        let mut entries: Vec<(u16, Vec<u8>)> = Vec::new();
        for row in [before, after].into_iter().flatten() {
            for (index, index_key) in entry.table.index_keys(row)?.into_iter().enumerate() {
                let index = u16::try_from(index).expect("indexes per table fit u16");
                if !entries.iter().any(|(i, k)| *i == index && *k == index_key) {
                    entries.push((index, index_key));
                }
            }
        }
        self.written_keys.borrow_mut().push(WrittenKey {
            table: id.index,
            primary: crate::key::Key::from_bytes(key),
            entries,
        });
        Ok(())
    }

    // ----- reads ---------------------------------------------------------------------

    pub(crate) fn get_view<R>(
        &self,
        id: TableId,
        key_values: &[Value],
        reader: impl FnOnce(RowView<'_>) -> R,
    ) -> Result<Option<R>> {
        let txn = self.active()?;
        let entry = self.table(id)?;
        entry.schema.check_key(key_values)?;
        let mut key = self.scratch.borrow_mut();
        key::encode_key_values(&mut key, key_values);
        self.record_point(id, &key);
        let Some((_, bytes)) = entry.table.get(txn, &key)? else {
            return Ok(None);
        };
        Ok(Some(reader(RowView::packed(packed(
            &entry.schema,
            &bytes,
        )?))))
    }

    pub(crate) fn get(&self, id: TableId, key_values: &[Value]) -> Result<Option<Vec<Value>>> {
        self.get_view(id, key_values, |row| row.to_values())
    }

    /// Checks the keys as a read would, then looks each up in the primary index, which
    /// brings its leaf into the buffer pool (and counts the keys that have entries); the
    /// heap pages are read by the operations that follow.
    pub(crate) fn prefetch<K: AsRef<[Value]>>(&self, id: TableId, keys: &[K]) -> Result<()> {
        self.active()?;
        let entry = self.table(id)?;
        for key in keys {
            entry.schema.check_key(key.as_ref())?;
        }
        let mut encoded = self.scratch.borrow_mut();
        let mut found = 0;
        for key in keys {
            key::encode_key_values(&mut encoded, key.as_ref());
            found += u64::from(entry.table.has_entries(&encoded)?);
        }
        let c = &self.engine.counters;
        Counters::add(&c.prefetch_keys, keys.len() as u64);
        Counters::add(&c.prefetch_rows_found, found);
        Ok(())
    }

    pub(crate) fn scan<T>(
        &self,
        id: TableId,
        range: &KeyRange,
        inside: impl FnMut(RowView<'_>) -> T,
        outside: impl FnMut(T) -> bool,
    ) -> Result<()> {
        self.scan_inner(id, None, range, inside, outside)
    }

    pub(crate) fn scan_index<T>(
        &self,
        id: TableId,
        index_name: &str,
        range: &KeyRange,
        inside: impl FnMut(RowView<'_>) -> T,
        outside: impl FnMut(T) -> bool,
    ) -> Result<()> {
        self.scan_inner(id, Some(index_name), range, inside, outside)
    }

    fn scan_inner<T>(
        &self,
        id: TableId,
        index_name: Option<&str>,
        range: &KeyRange,
        mut inside: impl FnMut(RowView<'_>) -> T,
        mut outside: impl FnMut(T) -> bool,
    ) -> Result<()> {
        let txn = self.active()?;
        let entry = self.table(id)?;
        let index = index_name
            .map(|name| entry.schema.index_position(name))
            .transpose()?;
        let Some((lower, upper)) = encode_range(&entry.schema, range, index)? else {
            return Ok(());
        };
        let walked = self.walk(
            entry,
            txn,
            index,
            (&lower, &upper),
            range.is_descending(),
            &mut |_, view| outside(inside(view)),
        );
        self.record_walk(id, index, (lower, upper), range.is_descending(), walked)
    }

    /// Records what a walk read (to where it stopped, or to the last row it handed out
    /// before an error) and passes its error on.
    fn record_walk(
        &self,
        id: TableId,
        index: Option<usize>,
        bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        descending: bool,
        walked: Walked,
    ) -> Result<()> {
        match walked {
            Ok(stopped_at) => {
                self.record_range(id, index, bounds, descending, stopped_at);
                Ok(())
            }
            Err((error, last)) => {
                if last.is_some() {
                    self.record_range(id, index, bounds, descending, last);
                }
                Err(error)
            }
        }
    }

    /// Walks an index over encoded bounds, handing each visible row (with its index key)
    /// to `each` until it returns false; returns the key it stopped at, if it stopped. On
    /// an error, returns it with the last key handed out: the rows handed out before the
    /// error were read all the same, and a serializable transaction records them.
    fn walk(
        &self,
        entry: &DiskTableEntry,
        txn: &DiskTransaction<'e>,
        index: Option<usize>,
        (lower, upper): (&Bound<Vec<u8>>, &Bound<Vec<u8>>),
        descending: bool,
        each: &mut dyn FnMut(&[u8], RowView<'_>) -> bool,
    ) -> Walked {
        let mut last = None;
        let mut stopped = false;
        let mut visit = |key: &[u8], bytes: &[u8]| -> Result<bool> {
            let row = packed(&entry.schema, bytes)?;
            last = Some(key.to_vec());
            let go_on = each(key, RowView::packed(row));
            stopped = !go_on;
            Ok(go_on)
        };
        let (low, high) = (
            lower.as_ref().map(Vec::as_slice),
            upper.as_ref().map(Vec::as_slice),
        );
        let walked = match index {
            None => entry.table.scan(txn, low, high, descending, &mut visit),
            Some(index) => entry
                .table
                .scan_index(index, txn, low, high, descending, &mut visit),
        };
        match walked {
            Ok(()) => Ok(if stopped { last } else { None }),
            Err(error) => Err((error, last)),
        }
    }

    pub(crate) fn open_scan(
        &self,
        id: TableId,
        index_name: Option<&str>,
        range: &KeyRange,
    ) -> Result<(ScanCursor, &'e TableSchema)> {
        self.active()?;
        let entry = self.table(id)?;
        let index = index_name
            .map(|name| entry.schema.index_position(name))
            .transpose()?;
        let encoded = encode_range(&entry.schema, range, index)?;
        Ok((ScanCursor::over(id, index, encoded), &entry.schema))
    }

    /// Whether the scan's reads are recorded for validation.
    pub(crate) fn records_scans(&self) -> bool {
        self.reads.is_some()
    }

    pub(crate) fn scan_batch<T>(
        &self,
        cursor: &mut ScanCursor,
        from: End,
        max_rows: usize,
        mut decode: impl FnMut(&[u8], RowView<'_>) -> T,
        out: &mut VecDeque<T>,
    ) -> Result<()> {
        debug_assert!(max_rows > 0);
        if cursor.is_exhausted() {
            return Ok(());
        }
        let txn = self.active()?;
        let (id, index, lower, upper) = cursor.remaining();
        let entry = self.table(id)?;
        let mut fetched = 0;
        let walked = self.walk(
            entry,
            txn,
            index,
            (lower, upper),
            from == End::Back,
            &mut |key, view| {
                out.push_back(decode(key, view));
                fetched += 1;
                fetched < max_rows
            },
        );
        match walked {
            Ok(stopped_at) => {
                cursor.advance(from, stopped_at);
                Ok(())
            }
            Err((error, last)) => {
                // The rows fetched before the error are handed out (and recorded as the
                // iterator hands them out); the scan goes no further.
                cursor.advance(from, last);
                cursor.finish();
                Err(error)
            }
        }
    }

    pub(crate) fn record_scanned(&self, cursor: &mut ScanCursor, from: End, upto: Option<Vec<u8>>) {
        if let Some(reads) = &self.reads {
            cursor.record_into(&mut reads.borrow_mut(), from, upto);
        }
    }

    // ----- writes --------------------------------------------------------------------

    pub(crate) fn insert(&mut self, id: TableId, row_values: &[Value]) -> Result<()> {
        self.writable()?;
        let entry = self.table(id)?;
        entry.schema.check_row(row_values)?;
        let row = PackedRow::from_values(row_values, NonInline::Packed);
        let mut key = Vec::new();
        key::encode_row_key(&mut key, row_values, &entry.schema.primary_key);
        self.note_placing(id);
        let txn = self.txn.as_mut().expect("active");
        match entry.table.insert(txn, row.packed().bytes()) {
            Ok(_) => {
                self.note(id, |w| w.inserts += 1);
                Counters::add(&self.engine.counters.versions_created, 1);
                if let Err(error) =
                    self.note_written_keys(id, entry, &key, None, Some(row.packed().bytes()))
                {
                    return Err(self.fail(error));
                }
                Ok(())
            }
            Err(error) => {
                if matches!(error, Error::DuplicateKey { .. }) {
                    // The insert read that the key exists.
                    self.record_point(id, &key);
                }
                Err(self.fail(error))
            }
        }
    }

    pub(crate) fn update(
        &mut self,
        id: TableId,
        key_values: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<bool> {
        self.writable()?;
        let entry = self.table(id)?;
        entry.schema.check_key(key_values)?;
        entry.schema.check_assignments(changes)?;
        let mut key = Vec::new();
        key::encode_key_values(&mut key, key_values);
        self.update_encoded(id, entry, &key, changes)
    }

    fn update_encoded(
        &mut self,
        id: TableId,
        entry: &'e DiskTableEntry,
        key: &[u8],
        changes: &[(usize, Value)],
    ) -> Result<bool> {
        self.record_point(id, key);
        self.note_placing(id);
        let txn = self.txn.as_mut().expect("active");
        let (tid, current) = match entry.table.get(txn, key) {
            Ok(Some(found)) => found,
            Ok(None) => {
                return match entry.table.absent(txn, key) {
                    Ok(()) => Ok(false),
                    Err(error) => Err(self.fail(error)),
                }
            }
            Err(error) => return Err(self.fail(error)),
        };
        let mut values = RowView::packed(packed(&entry.schema, &current)?).to_values();
        for (column, value) in changes {
            values[*column] = value.clone();
        }
        let row = PackedRow::from_values(&values, NonInline::Packed);
        match entry
            .table
            .update_found(txn, key, (tid, &current), row.packed().bytes())
        {
            Ok(updated) => {
                if updated {
                    self.note(id, |w| {
                        w.replaced += 1;
                        w.updates += 1;
                    });
                    Counters::add(&self.engine.counters.versions_created, 1);
                    let noted = self.note_written_keys(
                        id,
                        entry,
                        key,
                        Some(&current),
                        Some(row.packed().bytes()),
                    );
                    if let Err(error) = noted {
                        return Err(self.fail(error));
                    }
                }
                Ok(updated)
            }
            Err(error) => Err(self.fail(error)),
        }
    }

    pub(crate) fn update_range(
        &mut self,
        id: TableId,
        range: &KeyRange,
        changes: &[(usize, Value)],
        mut choose: impl FnMut(RowView<'_>) -> bool,
    ) -> Result<usize> {
        self.writable()?;
        let entry = self.table(id)?;
        entry.schema.check_assignments(changes)?;
        let Some((lower, upper)) = encode_range(&entry.schema, range, None)? else {
            return Ok(0);
        };
        let mut chosen = Vec::new();
        let walked = {
            let txn = self.active()?;
            self.walk(
                entry,
                txn,
                None,
                (&lower, &upper),
                range.is_descending(),
                &mut |key, view| {
                    if choose(view) {
                        chosen.push(key.to_vec());
                    }
                    true
                },
            )
        };
        self.record_walk(id, None, (lower, upper), range.is_descending(), walked)?;
        let mut updated = 0;
        for key in chosen {
            updated += usize::from(self.update_encoded(id, entry, &key, changes)?);
        }
        Ok(updated)
    }

    pub(crate) fn delete(&mut self, id: TableId, key_values: &[Value]) -> Result<bool> {
        self.writable()?;
        let entry = self.table(id)?;
        entry.schema.check_key(key_values)?;
        let mut key = Vec::new();
        key::encode_key_values(&mut key, key_values);
        self.record_point(id, &key);
        let txn = self.txn.as_mut().expect("active");
        match entry.table.delete(txn, &key) {
            Ok(Some(old)) => {
                self.note(id, |w| {
                    w.replaced += 1;
                    w.deletes += 1;
                });
                Counters::add(&self.engine.counters.versions_created, 1);
                if let Err(error) = self.note_written_keys(id, entry, &key, Some(&old), None) {
                    return Err(self.fail(error));
                }
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(error) => Err(self.fail(error)),
        }
    }

    // ----- the end -------------------------------------------------------------------

    /// Commits and makes the commit visible; returns the log and the end of the commit
    /// record to wait on. A writer publishes a commit record when a serializable
    /// transaction may be running (before it draws its timestamp, or it draws again), and
    /// a serializable writer validates its reads against the records of the writers that
    /// committed since its snapshot (`cc::precision`; `docs/design/serializable.md`).
    pub(crate) fn commit_for_ticket(mut self) -> Result<(Option<Arc<Log>>, u64)> {
        self.active()?;
        let txn = self.txn.take().expect("active");
        let engine = self.engine;
        let c = &engine.counters;
        if !txn.has_written() {
            // Serialized at its snapshot: no validation. It may have read a commit whose
            // record is not durable yet: it is acknowledged only after every record
            // appended before its end.
            txn.commit()?;
            Counters::add(&c.read_only_commits, 1);
            return Ok((Some(engine.log.durability_log()), engine.log.tail()));
        }
        let manager = engine.txns.manager();
        let slot = Arc::clone(&txn.local().slot);
        let start = txn.start();
        let reads = self.reads.take().map(|reads| {
            let mut reads = reads.into_inner();
            reads.seal();
            reads
        });
        let xid = txn.snapshot().xid;
        let owner = SyncArc::new(TxnShared::new());
        // Whether `owner` was marked committing (not if the commit failed before its draw).
        let committing = Cell::new(false);
        let written = std::mem::take(&mut *self.written_keys.borrow_mut());
        let written = RefCell::new(Some(written));
        let record: RefCell<Option<SyncArc<CommitRecord>>> = RefCell::new(None);
        // Publishes the commit record (once) in this thread's log.
        let publish = || {
            let built = SyncArc::new(CommitRecord::new(
                SyncArc::clone(&owner),
                written.borrow_mut().take().unwrap_or_default(),
            ));
            slot.validation_log.lock().push_back(SyncArc::clone(&built));
            slot.stats
                .add(crate::stats::Counter::CommitRecordsPublished, 1);
            *record.borrow_mut() = Some(built);
        };
        let result = txn.commit_prepared(
            || {
                owner.mark_committing();
                committing.set(true);
                if reads.is_some() || manager.serializable_running_since(u64::MAX - 1) {
                    publish();
                }
            },
            |ts| {
                let published = record.borrow().clone();
                let Some(published) = published else {
                    if manager.serializable_running_since(ts) {
                        // A serializable transaction began between the check and the
                        // draw, before this timestamp: publish, then draw again.
                        publish();
                        return Ok(false);
                    }
                    return Ok(true);
                };
                published.set_commit_ts(ts);
                match &reads {
                    Some(reads) => validate(engine, reads, start, ts, Some(&published)),
                    None => Ok(true),
                }
            },
        );
        match result {
            Ok((ts, lsn)) => {
                // Ended: its pages go back to the free-space map (P2).
                self.release_pages(xid);
                owner.mark_committed(ts);
                engine.committed_undo(xid, ts);
                Counters::add(&c.commits, 1);
                self.count_ended(true);
                let horizon = manager.serializable_horizon();
                crate::engine::collect::trim_validation_log(&slot, horizon, &slot.stats);
                Ok((Some(engine.log.durability_log()), lsn.unwrap_or(0)))
            }
            Err(error) => {
                #[cfg(test)]
                pause(Pause::RefusedCommitBegins);
                if let Some(record) = &*record.borrow() {
                    let mut log = slot.validation_log.lock();
                    if let Some(at) = log.iter().rposition(|r| SyncArc::ptr_eq(r, record)) {
                        log.remove(at);
                        slot.stats
                            .add(crate::stats::Counter::CommitRecordsDropped, 1);
                    }
                }
                if committing.get() {
                    owner.mark_not_committing();
                }
                owner.mark_aborted();
                // I/O only now that the owner says aborted: a validator in its commit window
                // may wait on it while it holds a commit-log page that a rollback's reads
                // need (the history suite hung in CI with the rollback before these marks).
                #[cfg(test)]
                pause(Pause::RollbackIoBegins);
                if matches!(error, Error::SerializationFailure { .. }) {
                    // Refused by validation: aborted in the commit log (a failed abort
                    // would have been the error). Before the release, which forgets which
                    // pages it formatted
                    // (`regression_a_commit_refused_by_validation_drops_the_pages_it_formatted`).
                    self.drop_aborted_pages(xid);
                }
                // Ended: its pages go back to the free-space map (P2).
                self.release_pages(xid);
                engine.roll_back_undo(xid, start);
                let cause = match error {
                    Error::SerializationFailure { .. } => &c.aborts_serialization,
                    _ => &c.aborts_durability,
                };
                Counters::add(cause, 1);
                self.count_ended(false);
                Err(error)
            }
        }
    }

    pub(crate) fn commit(self) -> Result<()> {
        let engine = self.engine;
        let (_, end) = self.commit_for_ticket()?;
        engine.log.acknowledge(end)
    }

    pub(crate) fn abort(mut self) {
        let engine = self.engine;
        self.roll_back(&engine.counters.aborts_by_user);
    }
}

impl Drop for DiskTxn<'_> {
    fn drop(&mut self) {
        if self.txn.is_some() {
            let engine = self.engine;
            self.roll_back(&engine.counters.aborts_by_user);
        }
    }
}

/// Validates a serializable writer's reads against every commit record others published
/// from its snapshot on (the in-memory engine's walk: each slot's log newest first, up to
/// the first record its snapshot sees); `Ok(true)` keeps the timestamp.
fn validate(
    engine: &DiskEngine,
    reads: &ReadSet,
    start: u64,
    commit_ts: u64,
    own: Option<&SyncArc<CommitRecord>>,
) -> Result<bool> {
    if reads.is_empty() {
        return Ok(true);
    }
    let mut others = Vec::new();
    for slot in engine.txns.manager().slots() {
        let log = slot.validation_log.lock();
        let window = log
            .iter()
            .rev()
            .take_while(|r| r.commit_ts_if_drawn().is_none_or(|ts| ts >= start));
        others.extend(
            window
                .filter(|r| own.is_none_or(|own| !SyncArc::ptr_eq(r, own)))
                .cloned(),
        );
    }
    #[cfg(test)]
    pause(Pause::ValidatorCollected);
    match crate::cc::precision::validate(reads, start, commit_ts, &others) {
        None => Ok(true),
        Some(table) => Err(Error::SerializationFailure {
            reason: format!(
                "a transaction that committed after this one began wrote a row of {} that \
                 this one read",
                engine
                    .tables()
                    .nth(table as usize)
                    .map_or("a table", |entry| entry.schema.name.as_str())
            ),
        }),
    }
}

#[cfg(test)]
#[path = "txn_tests.rs"]
mod tests;
