//! `PrimaryKeyIndex::OrderedOnly` against the default `HashAndOrdered`: the same answers to
//! every operation (only the cost differs), uniqueness under concurrent inserts, and index
//! upkeep when rows are deleted and collected.
//!
//! The other suites run both kinds too: `common::primary_key_index_for` gives half the
//! configurations the ordered index alone.

mod common;

use common::ScanRows;
use common::{all_configurations, assert_collected_everything, collects, open};
use verso::{
    ColumnType, ConcurrencyControl, Database, Error, Isolation, PrimaryKeyIndex, Schema, TableId,
    Value,
};

const KINDS: [PrimaryKeyIndex; 2] = [
    PrimaryKeyIndex::HashAndOrdered,
    PrimaryKeyIndex::OrderedOnly,
];

/// `(group Text, id U64) -> value I64`: a composite key with a text column, as TPC-C's
/// tables have.
fn create(db: &Database, name: &str, kind: PrimaryKeyIndex) -> TableId {
    db.create_table(
        name,
        Schema::new()
            .column("group", ColumnType::Text)
            .column("id", ColumnType::U64)
            .column("value", ColumnType::I64)
            .primary_key(&["group", "id"])
            .primary_key_index(kind),
    )
    .unwrap_or_else(|error| panic!("{}: create {name}: {error}", db.design()))
}

/// Keys of two groups; the second's name makes its keys longer than the 32 bytes an index
/// node holds inline, so the trees compare long keys by their prefix and then their tails.
fn key(id: u64) -> Vec<Value> {
    let group = if id % 3 == 0 {
        "a"
    } else {
        "b, a group whose name spills the key beyond its inline prefix"
    };
    vec![Value::from(group), Value::U64(id)]
}

fn row(id: u64, value: i64) -> Vec<Value> {
    let mut row = key(id);
    row.push(Value::I64(value));
    row
}

/// A small deterministic generator (xorshift), so a failure reproduces.
struct Steps(u64);

impl Steps {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// One pseudo-random sequence of inserts (new and duplicate), reads, updates, deletes,
/// scans, commits and rollbacks, applied to a table of each kind inside the same
/// transactions: every answer must be the same, error variants included.
#[test]
fn both_kinds_answer_every_operation_alike() {
    for options in all_configurations() {
        let db = open(&options);
        let d = db.design();
        let tables = KINDS.map(|kind| create(&db, &format!("{kind:?}"), kind));
        let mut steps = Steps(0x9E37_79B9_7F4A_7C15);
        let (mut succeeded, mut refused) = (0, 0);
        for round in 0..40 {
            let mut txn = db.begin(Isolation::Snapshot);
            for _ in 0..12 {
                let id = steps.next(24);
                let op = steps.next(6);
                // Errors name their table: compare with the names taken out.
                let answers: Vec<String> = tables
                    .iter()
                    .zip(KINDS)
                    .map(|(&table, kind)| {
                        match op {
                            0 | 1 => format!("{:?}", txn.insert(table, &row(id, round))),
                            2 => format!("{:?}", txn.get(table, &key(id))),
                            3 => format!(
                                "{:?}",
                                txn.update(table, &key(id), &[(2, Value::I64(-round))])
                            ),
                            4 => format!("{:?}", txn.delete(table, &key(id))),
                            _ => format!("{:?}", txn.scan(table, key(id)..).rows()),
                        }
                        .replace(&format!("{kind:?}"), "T")
                    })
                    .collect();
                assert_eq!(
                    answers[0], answers[1],
                    "{d}: round {round}, op {op}, id {id}"
                );
                if answers[0].starts_with("Ok(") {
                    succeeded += 1;
                } else {
                    refused += 1;
                }
            }
            if steps.next(4) == 0 {
                txn.abort();
            } else {
                txn.commit()
                    .unwrap_or_else(|error| panic!("{d}: round {round}: commit: {error}"));
            }
        }
        // The sequence is not vacuous: most operations ran, and some were refused (duplicate
        // keys) without ending their transaction.
        assert!(
            succeeded > 300 && refused > 0,
            "{d}: {succeeded} ran, {refused} refused"
        );
        let txn = db.begin(Isolation::Snapshot);
        let [hashed, ordered] = tables.map(|table| {
            txn.scan(table, ..)
                .rows()
                .unwrap_or_else(|error| panic!("{d}: scan: {error}"))
        });
        assert!(!hashed.is_empty(), "{d}: the sequence leaves rows");
        assert_eq!(hashed, ordered, "{d}");
        for id in 0..24 {
            let [a, b] = tables.map(|table| txn.get(table, &key(id)).expect("get"));
            assert_eq!(a, b, "{d}: key {id}");
        }
    }
}

/// Without a hash index the ordered index decides uniqueness: two threads inserting the
/// same keys at once commit each key exactly once, and the loser of each race is refused
/// with a typed error, never a second row.
#[test]
fn concurrent_inserts_of_one_key_commit_it_once_without_a_hash_index() {
    const KEYS: u64 = 300;
    for options in common::si_configurations() {
        let db = open(&options);
        let d = db.design();
        let table = create(&db, "t", PrimaryKeyIndex::OrderedOnly);
        let committed: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..2)
                .map(|worker| {
                    let db = &db;
                    scope.spawn(move || {
                        let mut won = Vec::new();
                        for id in 0..KEYS {
                            let mut txn = db.begin(Isolation::Snapshot);
                            let inserted = txn.insert(table, &row(id, worker));
                            match inserted.and_then(|()| txn.commit()) {
                                Ok(()) => won.push(id),
                                Err(
                                    Error::DuplicateKey { .. }
                                    | Error::WriteConflict { .. }
                                    | Error::TransactionAborted,
                                ) => {}
                                Err(other) => panic!("{}: insert {id}: {other}", db.design()),
                            }
                        }
                        won
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().expect("no panic"))
                .collect()
        });
        let mut all: Vec<u64> = committed.concat();
        all.sort_unstable();
        assert_eq!(
            all,
            (0..KEYS).collect::<Vec<_>>(),
            "{d}: each key committed once"
        );
        let txn = db.begin(Isolation::Snapshot);
        let rows = txn.scan(table, ..).rows().expect("scan");
        assert_eq!(rows.len() as u64, KEYS, "{d}");
        assert_eq!(
            db.primary_index_entries(table).expect("entries"),
            KEYS as usize,
            "{d}"
        );
    }
}

/// Deleted rows leave the ordered-only index once no snapshot can see them, and their keys
/// can be inserted again.
#[test]
fn deleted_rows_leave_an_ordered_only_index_and_their_keys_come_back() {
    for options in all_configurations() {
        let db = open(&options);
        let d = db.design();
        let table = create(&db, "t", PrimaryKeyIndex::OrderedOnly);
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..50 {
            txn.insert(table, &row(id, 1)).expect("insert");
        }
        txn.commit().expect("commit");
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..50 {
            assert!(txn.delete(table, &key(id)).expect("delete"), "{d}");
        }
        txn.commit().expect("commit");
        db.collect_garbage();
        if collects(&db) {
            assert_collected_everything(&db, &d);
            assert_eq!(db.primary_index_entries(table).expect("entries"), 0, "{d}");
        }
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..50 {
            txn.insert(table, &row(id, 2))
                .unwrap_or_else(|error| panic!("{d}: insert again {id}: {error}"));
        }
        txn.commit().expect("commit");
        let txn = db.begin(Isolation::Snapshot);
        assert_eq!(
            txn.get(table, &key(7)).expect("get"),
            Some(row(7, 2)),
            "{d}"
        );
        assert_eq!(txn.scan(table, ..).rows().expect("scan").len(), 50, "{d}");
    }
}

/// An insert into an ordered-only table tries the tree first and looks the key up only when
/// that fails. Where the key still has a row object (deleted, but seen by a snapshot), the
/// insert must then write over that object, so that the snapshot still reads the row it
/// saw through it; and a duplicate of a live key is refused on that path too.
#[test]
fn an_insert_over_a_deleted_row_a_snapshot_still_sees_writes_over_it_without_a_hash_index() {
    const KEYS: u64 = 10;
    for options in all_configurations() {
        let db = open(&options);
        let d = db.design();
        let table = create(&db, "t", PrimaryKeyIndex::OrderedOnly);
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..KEYS {
            txn.insert(table, &row(id, 1)).expect("insert");
        }
        txn.commit().expect("commit");
        // Its snapshot keeps the rows' objects in the index (it reads only at the end: under
        // MV2PL a read would lock the row against the delete).
        let reader = db.begin(Isolation::Snapshot);
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..KEYS {
            assert!(txn.delete(table, &key(id)).expect("delete"), "{d}");
        }
        txn.commit().expect("commit");
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..KEYS {
            txn.insert(table, &row(id, 3))
                .unwrap_or_else(|error| panic!("{d}: insert over deleted {id}: {error}"));
        }
        txn.commit().expect("commit");
        // Had the insert put a new object under the key, the older snapshot would find no
        // row. (MVTO's and MV2PL's reads do not simply read the snapshot: see
        // `common::snapshot_read_configurations`.)
        let reads_its_snapshot = !matches!(
            options.concurrency_control,
            ConcurrencyControl::Mvto | ConcurrencyControl::Mv2pl
        );
        if reads_its_snapshot {
            for id in 0..KEYS {
                assert_eq!(
                    reader.get(table, &key(id)).expect("get"),
                    Some(row(id, 1)),
                    "{d}: the older snapshot still sees the first row"
                );
            }
        }
        reader.abort();
        // A duplicate of a live key is refused, and the row stays writable.
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(
            matches!(
                txn.insert(table, &row(4, 9)),
                Err(Error::DuplicateKey { .. })
            ),
            "{d}: duplicate refused"
        );
        txn.abort();
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(
            txn.update(table, &key(4), &[(2, Value::I64(5))])
                .expect("update"),
            "{d}"
        );
        txn.commit()
            .unwrap_or_else(|error| panic!("{d}: update after a refused insert: {error}"));
        let txn = db.begin(Isolation::Snapshot);
        assert_eq!(
            txn.get(table, &key(4)).expect("get"),
            Some(row(4, 5)),
            "{d}"
        );
        assert_eq!(
            txn.scan(table, ..).rows().expect("scan").len() as u64,
            KEYS,
            "{d}"
        );
    }
}
