//! Model-based test: random single-thread interleavings of up to four open snapshot
//! transactions (plus one-step autocommit transactions), checked after every step against a
//! simple reference model.
//!
//! Operations: begin, get, insert, update (1 to 3 non-key columns), delete, primary-key
//! range scan (prefix bounds), secondary-index range scan (NULL sorts first; ascending or
//! descending, to the end or stopped after a few rows), commit, abort, `collect_garbage`,
//! short transactions of one to three writes (among them insert-then-delete and
//! insert-delete-insert of one key), and requests the engine must refuse without harming
//! the transaction (updating a key column, a wrong type, NULL in a key). The table has a
//! composite primary key `(a U64, b I64)` over 9 keys (one of them hot), so writes collide
//! often.
//!
//! The reference keeps the committed history as a list of versions (commit sequence number,
//! keys written, whole table after the commit). Each open model transaction keeps a clone
//! of the committed table taken at `begin` plus its own write set. First-updater-wins is
//! modelled exactly: a write to key `k` conflicts if another open transaction has written
//! `k`, or if a transaction that committed after this one began wrote `k` (even if it left
//! the row as it found it, e.g. insert then delete). The conflict check comes before the
//! existence check, so `update`/`delete` of an invisible key that a concurrent transaction
//! wrote is a conflict, not `Ok(false)`. A conflict rolls the transaction back; the next
//! call on it must return `TransactionAborted`.
//!
//! Every generated case runs once per garbage collector over each storage it supports, so
//! that eager pruning and the watermark collector both see long-lived snapshots (slot 0 is
//! begun first and rarely ended) across many commits. Names and notes are sometimes long
//! enough to be non-inline attributes, and the configurations take the three non-inline
//! policies in turn (`non_inline_of`); every other configuration over an append-only storage
//! takes physical index pointers (`index_pointers_of`). At the end every transaction is
//! ended, a fresh transaction must see exactly the model's committed table, and after
//! `collect_garbage` with nothing open no version record may be left and the secondary
//! index must hold exactly one entry per row (also at every `collect_garbage` step with
//! nothing open).
//!
//! `PROPTEST_CASES` overrides the number of cases (256 by default).

mod common;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use common::ScanRows;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use verso::research::{NonInline, NON_INLINE_MIN_BYTES};
use verso::{
    ColumnType, Database, Error, GarbageCollector, IndexPointers, Isolation, KeyRange, Options,
    Schema, TableId, Transaction, Value, VersionStorageKind,
};

/// Transactions the generated operations keep open at once (slots `0..SLOTS`).
const SLOTS: usize = 4;
/// One more slot for [`Op::AutoCommit`]: begun, written once and ended within one step.
const AUTO: usize = SLOTS;
/// Column positions: `a U64, b I64` (primary key), `name Text`, `score I64` (indexed),
/// `note Bytes` (mostly NULL).
const COL_NAME: usize = 2;
const COL_SCORE: usize = 3;
const COL_NOTE: usize = 4;
const INDEX: &str = "by_score";
/// Key space: `a` in `0..A_KEYS`, `b` in `B_KEYS` (9 keys, so writes collide often).
const A_KEYS: u64 = 3;
const B_KEYS: std::ops::RangeInclusive<i64> = -1..=1;

type Key = (u64, i64);
type Row = Vec<Value>;
type Range = (Bound<Vec<Value>>, Bound<Vec<Value>>);

#[derive(Clone, Debug)]
enum Op {
    Begin(usize),
    Get(usize, Key),
    /// The non-key columns: name, score, note.
    Insert(usize, Key, [Value; 3]),
    Update(usize, Key, Vec<(usize, Value)>),
    Delete(usize, Key),
    Scan(usize, Range),
    ScanIndex(usize, IndexScan),
    Commit(usize),
    Abort(usize),
    CollectGarbage,
    /// A request the engine must refuse without touching the transaction.
    Misuse(usize, Misuse, Key),
    /// A short transaction in slot [`AUTO`]: these writes, then commit (so that long
    /// snapshots see many commits within a few steps).
    AutoCommit(Vec<Op>),
}

/// A secondary-index scan: the range, the direction, and where the caller stops.
#[derive(Clone, Debug)]
struct IndexScan {
    range: Range,
    descending: bool,
    /// Stop after this many rows (the visitor returns `false` on the last), or read to the
    /// end.
    limit: Option<usize>,
}

#[derive(Clone, Copy, Debug)]
enum Misuse {
    /// `update` of a primary-key column.
    UpdatePrimaryKey,
    /// `insert` with a text in the I64 column.
    InsertWrongType,
    /// `get` with NULL in the key.
    GetNullKey,
}

/// What one step returned, in a form both sides produce.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Done,
    Row(Option<Row>),
    Rows(Vec<Row>),
    Changed(bool),
    WriteConflict,
    TransactionAborted,
    DuplicateKey,
    PrimaryKeyUpdate,
    WrongType,
    NullInPrimaryKey,
    Other(String),
}

impl Outcome {
    fn from_error(error: Error) -> Outcome {
        match error {
            Error::WriteConflict { .. } => Outcome::WriteConflict,
            Error::TransactionAborted => Outcome::TransactionAborted,
            Error::DuplicateKey { .. } => Outcome::DuplicateKey,
            Error::PrimaryKeyUpdate { .. } => Outcome::PrimaryKeyUpdate,
            Error::WrongType { .. } => Outcome::WrongType,
            Error::NullInPrimaryKey { .. } => Outcome::NullInPrimaryKey,
            other => Outcome::Other(format!("{other:?}")),
        }
    }

    fn from_result<T>(result: Result<T, Error>, ok: impl FnOnce(T) -> Outcome) -> Outcome {
        match result {
            Ok(value) => ok(value),
            Err(error) => Outcome::from_error(error),
        }
    }
}

fn key_values((a, b): Key) -> Vec<Value> {
    vec![Value::U64(a), Value::I64(b)]
}

fn full_row(key: Key, rest: &[Value; 3]) -> Row {
    let mut row = key_values(key);
    row.extend_from_slice(rest);
    row
}

fn score_of(row: &Row) -> Option<i64> {
    match &row[COL_SCORE] {
        Value::Null => None,
        Value::I64(v) => Some(*v),
        other => panic!("score column holds {other:?}"),
    }
}

/// Rows in secondary-index order: by score (NULL first), ties by primary key.
fn index_order(rows: impl IntoIterator<Item = (Key, Row)>) -> Vec<Row> {
    let mut rows: Vec<(Key, Row)> = rows.into_iter().collect();
    rows.sort_by_key(|(key, row)| (score_of(row), *key));
    rows.into_iter().map(|(_, row)| row).collect()
}

/// Compares a key with a primary-key prefix over the prefix's columns only.
fn cmp_key_prefix((a, b): Key, prefix: &[Value]) -> Ordering {
    let mut ordering = Ordering::Equal;
    if let Some(value) = prefix.first() {
        ordering = ordering.then(a.cmp(&value.as_u64().expect("U64 bound")));
    }
    if let Some(value) = prefix.get(1) {
        ordering = ordering.then(b.cmp(&value.as_i64().expect("I64 bound")));
    }
    ordering
}

/// Compares an index value (NULL first) with an index-key prefix.
fn cmp_score_prefix(score: Option<i64>, prefix: &[Value]) -> Ordering {
    match prefix.first() {
        None => Ordering::Equal,
        Some(bound) => score.cmp(&bound.as_i64()),
    }
}

/// Whether a value lies in a range of prefixes (see `verso::KeyRange`).
fn in_range(range: &Range, cmp: impl Fn(&[Value]) -> Ordering) -> bool {
    let lower = match &range.0 {
        Bound::Unbounded => true,
        Bound::Included(p) => cmp(p) != Ordering::Less,
        Bound::Excluded(p) => cmp(p) == Ordering::Greater,
    };
    let upper = match &range.1 {
        Bound::Unbounded => true,
        Bound::Included(p) => cmp(p) != Ordering::Greater,
        Bound::Excluded(p) => cmp(p) == Ordering::Less,
    };
    lower && upper
}

// ----- the reference model -------------------------------------------------------------

/// One committed version of the whole table.
struct Version {
    seq: u64,
    written: BTreeSet<Key>,
    table: BTreeMap<Key, Row>,
}

struct ModelTxn {
    /// Sees exactly the versions with `seq <= begin_seq`.
    begin_seq: u64,
    snapshot: BTreeMap<Key, Row>,
    /// `None` marks a delete.
    writes: BTreeMap<Key, Option<Row>>,
    rolled_back: bool,
}

impl ModelTxn {
    fn visible(&self, key: Key) -> Option<&Row> {
        match self.writes.get(&key) {
            Some(write) => write.as_ref(),
            None => self.snapshot.get(&key),
        }
    }

    fn view(&self) -> BTreeMap<Key, Row> {
        let mut view = self.snapshot.clone();
        for (key, write) in &self.writes {
            match write {
                Some(row) => view.insert(*key, row.clone()),
                None => view.remove(key),
            };
        }
        view
    }
}

struct Model {
    /// Committed history, oldest first; the first entry is the empty table at seq 0.
    history: Vec<Version>,
    slots: [Option<ModelTxn>; SLOTS + 1],
}

enum WriteKind<'a> {
    Insert(Row),
    Update(&'a [(usize, Value)]),
    Delete,
}

impl Model {
    fn new() -> Model {
        Model {
            history: vec![Version {
                seq: 0,
                written: BTreeSet::new(),
                table: BTreeMap::new(),
            }],
            slots: Default::default(),
        }
    }

    fn committed(&self) -> &Version {
        self.history.last().expect("history starts with seq 0")
    }

    fn begin(&mut self, slot: usize) {
        assert!(self.slots[slot].is_none());
        let current = self.committed();
        self.slots[slot] = Some(ModelTxn {
            begin_seq: current.seq,
            snapshot: current.table.clone(),
            writes: BTreeMap::new(),
            rolled_back: false,
        });
    }

    fn txn(&self, slot: usize) -> &ModelTxn {
        self.slots[slot].as_ref().expect("slot is open")
    }

    /// First-updater-wins: another open transaction wrote `key`, or a transaction that
    /// committed after `slot`'s began did.
    fn conflicts(&self, slot: usize, key: Key) -> bool {
        let begin_seq = self.txn(slot).begin_seq;
        let concurrent_writer = self.slots.iter().enumerate().any(|(other, txn)| {
            other != slot && txn.as_ref().is_some_and(|t| t.writes.contains_key(&key))
        });
        let committed_after_begin = self
            .history
            .iter()
            .any(|v| v.seq > begin_seq && v.written.contains(&key));
        concurrent_writer || committed_after_begin
    }

    fn read(&self, slot: usize, read: impl FnOnce(&ModelTxn) -> Outcome) -> Outcome {
        let txn = self.txn(slot);
        if txn.rolled_back {
            Outcome::TransactionAborted
        } else {
            read(txn)
        }
    }

    fn write(&mut self, slot: usize, key: Key, kind: WriteKind<'_>) -> Outcome {
        if self.txn(slot).rolled_back {
            return Outcome::TransactionAborted;
        }
        if self.conflicts(slot, key) {
            let txn = self.slots[slot].as_mut().expect("slot is open");
            txn.writes.clear();
            txn.rolled_back = true;
            return Outcome::WriteConflict;
        }
        let txn = self.slots[slot].as_mut().expect("slot is open");
        let visible = txn.visible(key).cloned();
        match (kind, visible) {
            (WriteKind::Insert(_), Some(_)) => Outcome::DuplicateKey,
            (WriteKind::Insert(row), None) => {
                txn.writes.insert(key, Some(row));
                Outcome::Done
            }
            (WriteKind::Update(_) | WriteKind::Delete, None) => Outcome::Changed(false),
            (WriteKind::Update(changes), Some(mut row)) => {
                for (column, value) in changes {
                    row[*column] = value.clone();
                }
                txn.writes.insert(key, Some(row));
                Outcome::Changed(true)
            }
            (WriteKind::Delete, Some(_)) => {
                txn.writes.insert(key, None);
                Outcome::Changed(true)
            }
        }
    }

    fn commit(&mut self, slot: usize) -> Outcome {
        let txn = self.slots[slot].take().expect("slot is open");
        if txn.rolled_back {
            return Outcome::TransactionAborted;
        }
        if txn.writes.is_empty() {
            return Outcome::Done;
        }
        let current = self.committed();
        let mut table = current.table.clone();
        for (key, write) in &txn.writes {
            match write {
                Some(row) => table.insert(*key, row.clone()),
                None => table.remove(key),
            };
        }
        let version = Version {
            seq: current.seq + 1,
            written: txn.writes.keys().copied().collect(),
            table,
        };
        self.history.push(version);
        Outcome::Done
    }

    fn apply(&mut self, op: &Op) -> Outcome {
        match op {
            Op::Begin(_) | Op::CollectGarbage => Outcome::Done,
            Op::AutoCommit(_) => unreachable!("the harness splits an autocommit"),
            Op::Get(slot, key) => self.read(*slot, |txn| Outcome::Row(txn.visible(*key).cloned())),
            Op::Insert(slot, key, rest) => {
                self.write(*slot, *key, WriteKind::Insert(full_row(*key, rest)))
            }
            Op::Update(slot, key, changes) => self.write(*slot, *key, WriteKind::Update(changes)),
            Op::Delete(slot, key) => self.write(*slot, *key, WriteKind::Delete),
            Op::Scan(slot, range) => self.read(*slot, |txn| {
                Outcome::Rows(
                    txn.view()
                        .into_iter()
                        .filter(|(key, _)| in_range(range, |p| cmp_key_prefix(*key, p)))
                        .map(|(_, row)| row)
                        .collect(),
                )
            }),
            Op::ScanIndex(slot, scan) => self.read(*slot, |txn| {
                let mut rows = index_order(txn.view().into_iter().filter(|(_, row)| {
                    in_range(&scan.range, |p| cmp_score_prefix(score_of(row), p))
                }));
                if scan.descending {
                    rows.reverse();
                }
                rows.truncate(scan.limit.unwrap_or(usize::MAX));
                Outcome::Rows(rows)
            }),
            Op::Commit(slot) => self.commit(*slot),
            Op::Abort(slot) => {
                self.slots[*slot] = None;
                Outcome::Done
            }
            Op::Misuse(slot, misuse, _) => self.read(*slot, |_| match misuse {
                Misuse::UpdatePrimaryKey => Outcome::PrimaryKeyUpdate,
                Misuse::InsertWrongType => Outcome::WrongType,
                Misuse::GetNullKey => Outcome::NullInPrimaryKey,
            }),
        }
    }
}

// ----- the engine side ------------------------------------------------------------------

/// Every version storage under every collector.
fn configurations() -> impl Iterator<Item = (VersionStorageKind, GarbageCollector)> {
    VersionStorageKind::ALL.into_iter().flat_map(|storage| {
        GarbageCollector::ALL
            .into_iter()
            .filter(move |gc| gc.required_storage().is_none_or(|s| s == storage))
            .map(move |gc| (storage, gc))
    })
}

fn position_of(storage: VersionStorageKind, gc: GarbageCollector) -> usize {
    configurations()
        .position(|c| c == (storage, gc))
        .expect("a listed configuration")
}

/// The way rows store long values for a configuration: the three policies in turn along
/// [`configurations`], so each storage runs under each policy with some collector, at no
/// extra cost per case.
fn non_inline_of(storage: VersionStorageKind, gc: GarbageCollector) -> NonInline {
    NonInline::ALL[position_of(storage, gc) % NonInline::ALL.len()]
}

/// What index entries point at: physical pointers (each exact version) on every other
/// configuration whose storage has them (the append-only ones), so that both kinds meet
/// every case at no extra cost per case.
fn index_pointers_of(storage: VersionStorageKind, gc: GarbageCollector) -> IndexPointers {
    let append_only = matches!(
        storage,
        VersionStorageKind::AppendNewestToOldest | VersionStorageKind::AppendOldestToNewest
    );
    if append_only && position_of(storage, gc) % 2 == 0 {
        IndexPointers::Physical
    } else {
        IndexPointers::Logical
    }
}

fn open(storage: VersionStorageKind, gc: GarbageCollector) -> (Database, TableId) {
    let options = Options::default()
        .version_storage(storage)
        .garbage_collector(gc)
        .non_inline(non_inline_of(storage, gc))
        .index_pointers(index_pointers_of(storage, gc));
    with_table(Database::open(options).expect("open"))
}

/// The disk engine, as the suites run it (`common::disk_configurations`).
fn open_disk(options: &Options) -> (Database, TableId) {
    with_table(common::open(options))
}

fn with_table(db: Database) -> (Database, TableId) {
    let table = db
        .create_table(
            "items",
            Schema::new()
                .column("a", ColumnType::U64)
                .column("b", ColumnType::I64)
                .column("name", ColumnType::Text)
                .column("score", ColumnType::I64)
                .column("note", ColumnType::Bytes)
                .primary_key(&["a", "b"])
                .index(INDEX, &["score"]),
        )
        .expect("create table");
    (db, table)
}

fn engine_apply(
    db: &Database,
    table: TableId,
    txns: &mut [Option<Transaction<'_>>],
    op: &Op,
) -> Outcome {
    let open = |slot: usize| txns[slot].as_ref().expect("slot is open");
    match op {
        Op::Begin(_) => Outcome::Done,
        Op::AutoCommit(_) => unreachable!("the harness splits an autocommit"),
        Op::CollectGarbage => {
            db.collect_garbage();
            Outcome::Done
        }
        Op::Get(slot, key) => {
            Outcome::from_result(open(*slot).get(table, &key_values(*key)), Outcome::Row)
        }
        Op::Scan(slot, range) => {
            Outcome::from_result(open(*slot).scan(table, range.clone()).rows(), Outcome::Rows)
        }
        Op::ScanIndex(slot, scan) => {
            let mut range = KeyRange::new(scan.range.clone());
            if scan.descending {
                range = range.descending();
            }
            let limit = scan.limit.unwrap_or(usize::MAX);
            // Both read paths: the lent view (odd limits) and the batched iterator, whose
            // cursor resumes after each batch and records what it handed out.
            if limit % 2 == 1 {
                let mut rows = Vec::new();
                let scanned = open(*slot).scan_index_view(table, INDEX, range, |row| {
                    rows.push(row.to_values());
                    rows.len() < limit
                });
                Outcome::from_result(scanned, |()| Outcome::Rows(rows))
            } else {
                let scanned = open(*slot)
                    .scan_index(table, INDEX, range)
                    .and_then(|scan| {
                        scan.take(limit)
                            .map(|row| row.map(verso::Row::into_values))
                            .collect()
                    });
                Outcome::from_result(scanned, Outcome::Rows)
            }
        }
        Op::Insert(slot, key, rest) => {
            let txn = txns[*slot].as_mut().expect("slot is open");
            Outcome::from_result(txn.insert(table, &full_row(*key, rest)), |()| Outcome::Done)
        }
        Op::Update(slot, key, changes) => {
            let txn = txns[*slot].as_mut().expect("slot is open");
            Outcome::from_result(
                txn.update(table, &key_values(*key), changes),
                Outcome::Changed,
            )
        }
        Op::Delete(slot, key) => {
            let txn = txns[*slot].as_mut().expect("slot is open");
            Outcome::from_result(txn.delete(table, &key_values(*key)), Outcome::Changed)
        }
        Op::Commit(slot) => {
            let txn = txns[*slot].take().expect("slot is open");
            Outcome::from_result(txn.commit(), |()| Outcome::Done)
        }
        Op::Abort(slot) => {
            txns[*slot].take().expect("slot is open").abort();
            Outcome::Done
        }
        Op::Misuse(slot, misuse, key) => {
            let txn = txns[*slot].as_mut().expect("slot is open");
            match misuse {
                Misuse::UpdatePrimaryKey => Outcome::from_result(
                    txn.update(table, &key_values(*key), &[(1, Value::I64(7))]),
                    Outcome::Changed,
                ),
                Misuse::InsertWrongType => {
                    let rest = [Value::Null, Value::from("not a number"), Value::Null];
                    Outcome::from_result(txn.insert(table, &full_row(*key, &rest)), |()| {
                        Outcome::Done
                    })
                }
                Misuse::GetNullKey => Outcome::from_result(
                    txn.get(table, &[Value::U64(key.0), Value::Null]),
                    Outcome::Row,
                ),
            }
        }
    }
}

/// The slot an operation needs open (begun implicitly if it is empty), and whether the
/// operation ends it (then an empty slot makes it a no-op instead).
fn slot_of(op: &Op) -> Option<(usize, bool)> {
    match op {
        Op::Begin(slot)
        | Op::Get(slot, _)
        | Op::Insert(slot, ..)
        | Op::Update(slot, ..)
        | Op::Delete(slot, _)
        | Op::Scan(slot, _)
        | Op::ScanIndex(slot, _)
        | Op::Misuse(slot, ..) => Some((*slot, false)),
        Op::Commit(slot) | Op::Abort(slot) => Some((*slot, true)),
        Op::CollectGarbage | Op::AutoCommit(_) => None,
    }
}

fn all_keys() -> impl Iterator<Item = Key> {
    (0..A_KEYS).flat_map(|a| B_KEYS.map(move |b| (a, b)))
}

/// The engine and the model side by side.
struct Harness<'db> {
    gc: GarbageCollector,
    db: &'db Database,
    table: TableId,
    model: Model,
    txns: Vec<Option<Transaction<'db>>>,
}

impl<'db> Harness<'db> {
    fn new(gc: GarbageCollector, db: &'db Database, table: TableId) -> Self {
        Harness {
            gc,
            db,
            table,
            model: Model::new(),
            txns: (0..=SLOTS).map(|_| None).collect(),
        }
    }

    fn run(&mut self, step: usize, op: &Op) -> Result<(), TestCaseError> {
        if let Op::AutoCommit(writes) = op {
            for write in writes {
                self.run(step, write)?;
            }
            return self.run(step, &Op::Commit(AUTO));
        }
        if let Some((slot, ends)) = slot_of(op) {
            if self.txns[slot].is_none() {
                if ends {
                    return Ok(());
                }
                self.txns[slot] = Some(self.db.begin(Isolation::Snapshot));
                self.model.begin(slot);
            }
        }
        let expected = self.model.apply(op);
        let actual = engine_apply(self.db, self.table, &mut self.txns, op);
        prop_assert_eq!(
            &actual,
            &expected,
            "{:?}: step {} {:?} (engine left, model right)",
            self.gc,
            step,
            op
        );
        if expected == Outcome::TransactionAborted {
            // Checked once; a rolled-back transaction has nothing more to show, so free the
            // slot for a fresh one rather than spend the rest of the case on it.
            if let Some((slot, false)) = slot_of(op) {
                if let Some(txn) = self.txns[slot].take() {
                    txn.abort();
                }
                self.model.apply(&Op::Abort(slot));
            }
        }
        if matches!(op, Op::CollectGarbage)
            && self.txns.iter().all(Option::is_none)
            && self.gc != GarbageCollector::NoCollection
        {
            prop_assert_eq!(
                self.db.stats().live_versions(),
                0,
                "{:?}: step {}: versions left after collecting with nothing open",
                self.gc,
                step
            );
            self.check_one_entry_per_row(step)?;
        }
        Ok(())
    }

    /// After collecting with nothing open (every row has one version, every deleted row is
    /// buried): the secondary index holds one entry per row, under either kind of pointer.
    /// An entry of a gone version stays invisible to reads (they re-check it), so only this
    /// count shows a leak.
    fn check_one_entry_per_row(&self, step: usize) -> Result<(), TestCaseError> {
        prop_assert_eq!(
            self.db
                .secondary_index_entries(self.table, INDEX)
                .expect("entries"),
            self.model.committed().table.len(),
            "{:?}: step {}: secondary entries after collecting with nothing open",
            self.gc,
            step
        );
        Ok(())
    }

    /// Ends every open transaction (by committing it), then checks that a fresh transaction
    /// sees exactly the model's committed table and that collecting with nothing open
    /// leaves no version record behind.
    fn finish(mut self, step: usize) -> Result<(), TestCaseError> {
        let gc = self.gc;
        for slot in 0..=SLOTS {
            self.run(step, &Op::Commit(slot))?;
        }
        let (db, table) = (self.db, self.table);
        let committed = &self.model.committed().table;
        let fresh = db.begin(Isolation::Snapshot);
        let rows = fresh.scan(table, ..).rows().expect("final scan");
        let expected_rows: Vec<Row> = committed.values().cloned().collect();
        prop_assert_eq!(&rows, &expected_rows, "{:?}: final state", gc);
        for key in all_keys() {
            let row = fresh.get(table, &key_values(key)).expect("final get");
            prop_assert_eq!(
                row.as_ref(),
                committed.get(&key),
                "{:?}: final get {:?}",
                gc,
                key
            );
        }
        let by_score = fresh
            .scan_index(table, INDEX, ..)
            .rows()
            .expect("final index scan");
        let expected_by_score = index_order(committed.clone());
        prop_assert_eq!(&by_score, &expected_by_score, "{:?}: final index scan", gc);
        fresh.commit().expect("read-only commit");

        db.collect_garbage();
        let stats = db.stats();
        if gc == GarbageCollector::NoCollection {
            // Nothing is freed but by rollback and insert folding; deleted rows stay.
            let freed = stats.versions_reclaimed
                + stats.versions_pruned_eagerly
                + stats.versions_pruned_in_background
                + stats.rows_reclaimed;
            prop_assert_eq!(freed, 0, "none: collection freed something");
            prop_assert!(
                db.primary_index_entries(table).expect("entries") >= committed.len(),
                "none: fewer index entries than rows"
            );
            return Ok(());
        }
        prop_assert_eq!(
            stats.live_versions(),
            0,
            "{:?}: versions left after the final collection",
            gc
        );
        prop_assert_eq!(
            db.primary_index_entries(table).expect("entries"),
            committed.len(),
            "{:?}: primary index entries after the final collection",
            gc
        );
        self.check_one_entry_per_row(step)?;
        for key in committed.keys() {
            prop_assert_eq!(
                db.version_chain_length(table, &key_values(*key))
                    .expect("chain length"),
                Some(0),
                "{:?}: chain of {:?} after the final collection",
                gc,
                key
            );
        }
        Ok(())
    }
}

/// Runs `ops` against a fresh database with collector `gc` and the model, comparing every
/// outcome; then ends everything and checks the final state and the collector's cleanup.
fn run(storage: VersionStorageKind, gc: GarbageCollector, ops: &[Op]) -> Result<(), TestCaseError> {
    let (db, table) = open(storage, gc);
    run_on(&db, table, gc, ops)
}

/// [`run`] on an open database, whose collection `gc` describes (the disk engine's vacuum
/// collects everything no snapshot needs, as Steam does).
fn run_on(
    db: &Database,
    table: TableId,
    gc: GarbageCollector,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut harness = Harness::new(gc, db, table);
    for (step, op) in ops.iter().enumerate() {
        harness.run(step, op)?;
    }
    harness.finish(ops.len())
}

// ----- generators -----------------------------------------------------------------------

/// A key, with one hot key so that its chain grows long and gets pruned.
fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        1 => Just((1, 0)),
        3 => (0..A_KEYS, B_KEYS),
    ]
}

fn name() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        4 => prop::sample::select(vec!["", "a", "b", "a\0b", "a longer text"]).prop_map(Value::from),
        // Long enough to be stored out of line under the non-inline policies.
        1 => prop::sample::select(vec!["n".repeat(NON_INLINE_MIN_BYTES), "m".repeat(90)])
            .prop_map(Value::from),
    ]
}

fn score() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        4 => (-2i64..=2).prop_map(Value::I64),
    ]
}

fn note() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => Just(Value::Null),
        1 => prop::collection::vec(any::<u8>(), 0..3).prop_map(Value::Bytes),
        1 => prop::collection::vec(any::<u8>(), NON_INLINE_MIN_BYTES..NON_INLINE_MIN_BYTES + 40)
            .prop_map(Value::Bytes),
    ]
}

fn changes() -> impl Strategy<Value = Vec<(usize, Value)>> {
    (1u8..8, name(), score(), note()).prop_map(|(mask, name, score, note)| {
        [(COL_NAME, name), (COL_SCORE, score), (COL_NOTE, note)]
            .into_iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, change)| change)
            .collect()
    })
}

fn bound(
    prefix: impl Strategy<Value = Vec<Value>> + Clone,
) -> impl Strategy<Value = Bound<Vec<Value>>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => prefix.clone().prop_map(Bound::Included),
        2 => prefix.prop_map(Bound::Excluded),
    ]
}

/// Primary-key prefixes of length 0 to 2, reaching just past the key space.
fn key_prefix() -> impl Strategy<Value = Vec<Value>> + Clone {
    prop_oneof![
        1 => Just(Vec::new()),
        3 => (0..=A_KEYS).prop_map(|a| vec![Value::U64(a)]),
        4 => (0..=A_KEYS, -2i64..=2).prop_map(|(a, b)| vec![Value::U64(a), Value::I64(b)]),
    ]
}

/// Index-key prefixes: empty, NULL, or a score just around the generated ones.
fn score_prefix() -> impl Strategy<Value = Vec<Value>> + Clone {
    prop_oneof![
        1 => Just(Vec::new()),
        1 => Just(vec![Value::Null]),
        4 => (-3i64..=3).prop_map(|s| vec![Value::I64(s)]),
    ]
}

/// Slot 0 holds a long-lived snapshot (begun before the first generated step): it reads
/// often, never writes and ends rarely. Slot 1 is a long-lived writer; slots 2 and 3 are
/// short writers.
fn read_slot() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(0usize), 1 => Just(1usize), 2 => 2..SLOTS]
}

fn write_slot() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(1usize), 4 => 2..SLOTS]
}

fn end_slot() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 4 => Just(1usize), 20 => 2..SLOTS]
}

fn op() -> impl Strategy<Value = Op> {
    let misuse = prop_oneof![
        Just(Misuse::UpdatePrimaryKey),
        Just(Misuse::InsertWrongType),
        Just(Misuse::GetNullKey),
    ];
    let auto_write = prop_oneof![
        2 => (key(), name(), score(), note())
            .prop_map(|(k, n, sc, no)| Op::Insert(AUTO, k, [n, sc, no])),
        3 => (key(), changes()).prop_map(|(k, c)| Op::Update(AUTO, k, c)),
        2 => key().prop_map(|k| Op::Delete(AUTO, k)),
    ];
    // One key inserted and deleted by one short transaction, and maybe inserted again
    // (with other values): the tombstone's values then belong to no version.
    let churn = (key(), score(), score(), any::<bool>()).prop_map(|(k, first, again, reinsert)| {
        let mut writes = vec![
            Op::Insert(AUTO, k, [Value::Null, first, Value::Null]),
            Op::Delete(AUTO, k),
        ];
        if reinsert {
            writes.push(Op::Insert(AUTO, k, [Value::Null, again, Value::Null]));
        }
        writes
    });
    let index_scan = (
        bound(score_prefix()),
        bound(score_prefix()),
        any::<bool>(),
        prop_oneof![2 => Just(None), 3 => (1usize..=3).prop_map(Some)],
    )
        .prop_map(|(lo, hi, descending, limit)| IndexScan {
            range: (lo, hi),
            descending,
            limit,
        });
    prop_oneof![
        1 => (0..SLOTS).prop_map(Op::Begin),
        4 => (read_slot(), key()).prop_map(|(s, k)| Op::Get(s, k)),
        5 => (write_slot(), key(), name(), score(), note())
            .prop_map(|(s, k, n, sc, no)| Op::Insert(s, k, [n, sc, no])),
        5 => (write_slot(), key(), changes()).prop_map(|(s, k, c)| Op::Update(s, k, c)),
        2 => (write_slot(), key()).prop_map(|(s, k)| Op::Delete(s, k)),
        2 => (read_slot(), bound(key_prefix()), bound(key_prefix()))
            .prop_map(|(s, lo, hi)| Op::Scan(s, (lo, hi))),
        3 => (read_slot(), index_scan).prop_map(|(s, scan)| Op::ScanIndex(s, scan)),
        6 => end_slot().prop_map(Op::Commit),
        2 => end_slot().prop_map(Op::Abort),
        1 => Just(Op::CollectGarbage),
        1 => (read_slot(), misuse, key()).prop_map(|(s, m, k)| Op::Misuse(s, m, k)),
        6 => auto_write.clone().prop_map(|write| Op::AutoCommit(vec![write])),
        1 => prop::collection::vec(auto_write, 2..=3).prop_map(Op::AutoCommit),
        2 => churn.prop_map(Op::AutoCommit),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 8..=MAX_OPS).prop_map(|mut ops| {
        ops.insert(0, Op::Begin(0));
        ops
    })
}

/// Operations per generated case.
const MAX_OPS: usize = 100;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 4096,
        // Integration tests have no `lib.rs` to put a regressions file beside; a failure
        // found here becomes a named `regression_*` test instead.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_model(ops in ops()) {
        for (storage, gc) in configurations() {
            let non_inline = non_inline_of(storage, gc);
            let pointers = index_pointers_of(storage, gc);
            run(storage, gc, &ops).map_err(|e| {
                TestCaseError::fail(format!(
                    "{storage:?} storage, non-inline {non_inline}, {pointers:?} pointers: {e}"
                ))
            })?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 4096,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The disk engine against the same model: PostgreSQL's version storage through a
    /// 48-page pool, under eager pruning and under PostgreSQL's horizon rule.
    #[test]
    fn disk_engine_matches_model(ops in ops()) {
        for options in common::disk_configurations() {
            let (db, table) = open_disk(&options);
            run_on(&db, table, GarbageCollector::Steam, &ops).map_err(|e| {
                TestCaseError::fail(format!(
                    "the disk engine under {}: {e}",
                    options.garbage_collector.name()
                ))
            })?;
        }
    }
}

// ----- regressions found by the model ---------------------------------------------------

fn row_with_score(key: Key, score: i64) -> Row {
    full_row(key, &[Value::Null, Value::I64(score), Value::Null])
}

/// A transaction that inserts a row and then sets its indexed column twice (1, then 2,
/// then 3) leaves the secondary entry of the middle value (2) behind when it aborts:
/// rollback drops the entry of the last written value and burying the row drops the entry
/// of the restored value, but nothing remembers the middle one. The stale entry, pointing
/// at the dead row, then shadows the entry of a new row with the same key and index value,
/// so an index scan misses the new row.
#[test]
fn regression_rolled_back_intermediate_index_entry_hides_reinserted_row() {
    for (storage, gc) in configurations() {
        let (db, table) = open(storage, gc);
        let gc = (storage, gc); // both, in the messages
        let key = (0, 0);
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &row_with_score(key, 1)).expect("insert");
        for score in [2, 3] {
            assert!(txn
                .update(table, &key_values(key), &[(COL_SCORE, Value::I64(score))])
                .expect("update"));
        }
        txn.abort();

        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &row_with_score(key, 2))
            .expect("insert again");
        txn.commit().expect("commit");

        let reader = db.begin(Isolation::Snapshot);
        assert_eq!(
            reader.get(table, &key_values(key)).expect("get"),
            Some(row_with_score(key, 2)),
            "{gc:?}"
        );
        assert_eq!(
            reader
                .scan_index(table, INDEX, ..)
                .rows()
                .expect("index scan"),
            vec![row_with_score(key, 2)],
            "{gc:?}"
        );
    }
}

/// The same stale entry, left by a committed transaction that set the indexed column twice
/// (1 at insert, then 2): the overwritten value 1 was never a committed version, so neither
/// collection nor burying the later deleted row removes its entry, and a new row with the
/// same key and the value 1 is missing from index scans.
#[test]
fn regression_committed_intermediate_index_entry_hides_reinserted_row() {
    for (storage, gc) in configurations() {
        let (db, table) = open(storage, gc);
        let gc = (storage, gc); // both, in the messages
        let key = (0, 0);
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &row_with_score(key, 1)).expect("insert");
        assert!(txn
            .update(table, &key_values(key), &[(COL_SCORE, Value::I64(2))])
            .expect("update"));
        txn.commit().expect("commit");

        let mut txn = db.begin(Isolation::Snapshot);
        assert!(txn.delete(table, &key_values(key)).expect("delete"));
        txn.commit().expect("commit");
        db.collect_garbage();

        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &row_with_score(key, 1))
            .expect("insert again");
        txn.commit().expect("commit");

        let reader = db.begin(Isolation::Snapshot);
        assert_eq!(
            reader.get(table, &key_values(key)).expect("get"),
            Some(row_with_score(key, 1)),
            "{gc:?}"
        );
        assert_eq!(
            reader
                .scan_index(table, INDEX, ..)
                .rows()
                .expect("index scan"),
            vec![row_with_score(key, 1)],
            "{gc:?}"
        );
    }
}

/// The same stale entry via delete and re-insert inside one transaction (the model's own
/// shrunk case): the first insert's value 1 is overwritten by the second insert's NULL.
#[test]
fn regression_reinsert_in_one_transaction_leaves_index_entry_behind() {
    for (storage, gc) in configurations() {
        let (db, table) = open(storage, gc);
        let gc = (storage, gc); // both, in the messages
        let key = (1, 0);
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &row_with_score(key, 1)).expect("insert");
        assert!(txn.delete(table, &key_values(key)).expect("delete"));
        txn.insert(
            table,
            &full_row(key, &[Value::Null, Value::Null, Value::Null]),
        )
        .expect("insert again in the same transaction");
        txn.commit().expect("commit");

        let mut txn = db.begin(Isolation::Snapshot);
        assert!(txn.delete(table, &key_values(key)).expect("delete"));
        txn.commit().expect("commit");
        db.collect_garbage();

        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &row_with_score(key, 1)).expect("insert");
        txn.commit().expect("commit");

        let reader = db.begin(Isolation::Snapshot);
        assert_eq!(
            reader
                .scan_index(table, INDEX, ..)
                .rows()
                .expect("index scan"),
            vec![row_with_score(key, 1)],
            "{gc:?}"
        );
    }
}

/// Found by the model (after the collectors of the Steam paper were added, by chance of
/// the random cases): a transaction that inserted and deleted a key commits it as a
/// tombstone (no row, born at its commit); a later transaction that inserted the key again
/// and rolled back buried the tombstone at once, so a transaction older than the commit
/// could insert the key without the write conflict first-updater-wins owes it.
#[test]
fn regression_a_rolled_back_insert_keeps_the_tombstone_a_concurrent_writer_conflicts_with() {
    for (storage, gc) in configurations() {
        let (db, table) = open(storage, gc);
        let gc = (storage, gc); // both, in the messages
        let key = (1, 0);
        let mut older = db.begin(Isolation::Snapshot);

        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &row_with_score(key, 1)).expect("insert");
        assert_eq!(txn.delete(table, &key_values(key)), Ok(true));
        txn.commit().expect("commit the insert and delete");

        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &row_with_score(key, 2))
            .expect("insert again");
        txn.abort();

        let result = older.insert(table, &row_with_score(key, 3));
        assert!(
            matches!(result, Err(Error::WriteConflict { .. })),
            "{gc:?}: the key was written after this snapshot, got {result:?}"
        );
    }
}
