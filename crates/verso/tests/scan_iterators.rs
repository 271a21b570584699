//! The scan iterators (`Transaction::scan`, `Transaction::scan_index`) against the one-shot
//! zero-copy scans (`scan_view`, `scan_index_view`), over every configuration: the same rows
//! in the same order from either end, across batch boundaries and invisible rows, at a
//! stable snapshot while other transactions commit between two `next()` calls; what a
//! stopped or finished iterator counts as read; and what a refused read does mid-scan.

mod common;

use std::ops::Bound::{self, Excluded, Included, Unbounded};

use common::{all_configurations, configurations_of, create_items, item, item_key, items, open};
use verso::{
    ConcurrencyControl, Database, Error, Isolation, KeyRange, Scan, TableId, Transaction, Value,
};

/// Asserts two lists of items rows are equal, printing only their keys when they are not
/// (a row's blob is long).
macro_rules! assert_rows {
    ($got:expr, $want:expr, $($context:tt)+) => {{
        let (got, want) = (&$got, &$want);
        assert!(
            got == want,
            "{}: got {:?}, want {:?}",
            format!($($context)+),
            keys(got),
            keys(want)
        );
    }};
}

fn keys(rows: &[Vec<Value>]) -> Vec<(String, u64)> {
    rows.iter()
        .map(|row| {
            let region = row[items::REGION].as_text().unwrap_or("?").to_owned();
            (region, row[items::ID].as_u64().unwrap_or(u64::MAX))
        })
        .collect()
}

/// Enough rows for several batches of the largest size, from either end.
const ROWS: u64 = 1_100;

fn region(id: u64) -> &'static str {
    ["east", "north", "west"][(id % 3) as usize]
}

fn name(id: u64) -> String {
    format!("n{}", id % 7)
}

fn row(id: u64) -> Vec<Value> {
    item(region(id), id, (id % 11) as i64, &name(id))
}

/// A database of `options` whose items table holds `ROWS` rows, every fifth of them
/// deleted again (so that batches meet index entries whose rows are invisible).
fn loaded(options: &verso::Options) -> (Database, TableId) {
    let db = open(options);
    let table = create_items(&db);
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 0..ROWS {
        txn.insert(table, &row(id)).expect("insert");
    }
    txn.commit().expect("load");
    let mut txn = db.begin(Isolation::Snapshot);
    for id in (0..ROWS).step_by(5) {
        assert!(txn
            .delete(table, &item_key(region(id), id))
            .expect("delete"));
    }
    txn.commit().expect("delete every fifth");
    (db, table)
}

/// What the one-shot visitor form streams.
fn viewed(
    txn: &Transaction<'_>,
    table: TableId,
    index: Option<&str>,
    range: KeyRange,
) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    let mut take = |row: verso::RowView<'_>| {
        rows.push(row.to_values());
        true
    };
    match index {
        None => txn.scan_view(table, range, &mut take),
        Some(index) => txn.scan_index_view(table, index, range, &mut take),
    }
    .expect("the view scan runs");
    rows
}

fn open_scan<'t, 'db>(
    txn: &'t Transaction<'db>,
    table: TableId,
    index: Option<&str>,
    range: KeyRange,
) -> Scan<'t, 'db> {
    match index {
        None => txn.scan(table, range),
        Some(index) => txn.scan_index(table, index, range),
    }
    .expect("the scan opens")
}

fn values<'db>(rows: impl Iterator<Item = verso::Result<verso::Row<'db>>>) -> Vec<Vec<Value>> {
    rows.map(|row| row.expect("a row").into_values()).collect()
}

type KeyBounds = (Bound<Vec<Value>>, Bound<Vec<Value>>);

/// Every scan case: `(index, range)`, primary-key and secondary, prefixes, open and empty.
fn cases() -> Vec<(Option<&'static str>, KeyRange)> {
    let k = |r: &str| vec![Value::from(r)];
    let kk = |r: &str, id: u64| item_key(r, id);
    let s = |score: i64| vec![Value::I64(score)];
    let n = |name: &str| vec![Value::from(name)];
    let bounds: Vec<KeyBounds> = vec![
        (Unbounded, Unbounded),
        (Included(k("east")), Included(k("east"))),
        (Included(kk("east", 300)), Excluded(kk("west", 20))),
        (Excluded(kk("north", 1)), Unbounded),
        (Unbounded, Included(kk("north", 700))),
        (Included(k("west")), Included(k("east"))),
        (Included(k("zz")), Unbounded),
    ];
    let mut cases: Vec<(Option<&'static str>, KeyRange)> = bounds
        .into_iter()
        .map(|b| (None, KeyRange::new(b)))
        .collect();
    cases.push((None, KeyRange::prefix(k("north"))));
    cases.push((Some(items::BY_SCORE), KeyRange::new(..)));
    cases.push((Some(items::BY_SCORE), KeyRange::new(s(3)..=s(8))));
    cases.push((Some(items::BY_NAME), KeyRange::prefix(n("n4"))));
    cases.push((Some(items::BY_NAME), KeyRange::new(n("n2")..n("n5"))));
    cases.push((Some(items::BY_NAME), KeyRange::prefix(n("absent"))));
    cases
}

fn reversed(range: &KeyRange) -> KeyRange {
    range.clone().descending()
}

/// Forwards, backwards (`rev`), and over a descending range, the iterator yields what the
/// visitor streams; every prefix of it (`take`) too, across batch boundaries.
#[test]
fn iterators_yield_what_the_view_scans_stream_in_every_configuration() {
    for options in all_configurations() {
        let (db, table) = loaded(&options);
        let d = db.design();
        let txn = db.begin(Isolation::Snapshot);
        for (index, range) in cases() {
            let want = viewed(&txn, table, index, range.clone());
            let want_down = viewed(&txn, table, index, reversed(&range));
            let mut down = want.clone();
            down.reverse();
            assert_eq!(
                want_down, down,
                "{d}: {index:?} {range:?}: the view's own order"
            );

            let got = values(open_scan(&txn, table, index, range.clone()));
            assert_rows!(got, want, "{d}: {index:?} {range:?} forwards");
            let got = values(open_scan(&txn, table, index, range.clone()).rev());
            assert_rows!(got, want_down, "{d}: {index:?} {range:?} rev()");
            let got = values(open_scan(&txn, table, index, reversed(&range)));
            assert_rows!(got, want_down, "{d}: {index:?} {range:?} descending");
            let got = values(open_scan(&txn, table, index, reversed(&range)).rev());
            assert_rows!(got, want, "{d}: {index:?} {range:?} descending, rev()");
            for take in [0, 1, 7, 8, 9, 100, 257, 600] {
                let got = values(open_scan(&txn, table, index, range.clone()).take(take));
                let expected: Vec<_> = want.iter().take(take).cloned().collect();
                assert_rows!(got, expected, "{d}: {index:?} {range:?} take({take})");
            }
        }
        txn.commit().expect("read-only commit");
    }
}

/// `next` and `next_back` meet in the middle: every row once, whatever the interleaving,
/// including when one end has fetched a batch that reaches past the other's last row.
#[test]
fn next_and_next_back_meet_without_losing_or_repeating_a_row() {
    for options in all_configurations() {
        let (db, table) = loaded(&options);
        let d = db.design();
        let txn = db.begin(Isolation::Snapshot);
        for (index, range) in cases() {
            let want = viewed(&txn, table, index, range.clone());
            // Patterns of front (true) and back (false) calls, repeated until both end.
            for pattern in [
                &[true, false][..],
                &[true, true, true, false],
                &[false, false, true],
            ] {
                let mut scan = open_scan(&txn, table, index, range.clone());
                let (mut front, mut back) = (Vec::new(), Vec::new());
                let mut step = 0;
                loop {
                    let from_front = pattern[step % pattern.len()];
                    step += 1;
                    let next = if from_front {
                        scan.next()
                    } else {
                        scan.next_back()
                    };
                    match next {
                        Some(row) => {
                            let row = row.expect("a row").into_values();
                            if from_front {
                                front.push(row);
                            } else {
                                back.push(row);
                            }
                        }
                        None => break,
                    }
                }
                assert!(
                    scan.next().is_none() && scan.next_back().is_none(),
                    "{d}: fused"
                );
                back.reverse();
                front.extend(back);
                assert_rows!(front, want, "{d}: {index:?} {range:?} pattern {pattern:?}");
            }
        }
    }
}

/// Between two `next()` calls the iterator holds nothing of the table: other transactions
/// update, delete and insert rows of the range, commit, and collect garbage; the scan still
/// yields exactly its snapshot. Its own transaction's writes made before the scan began
/// are in it.
#[test]
fn an_iterator_paused_between_rows_keeps_its_snapshot_while_others_commit() {
    for options in common::snapshot_read_configurations() {
        let (db, table) = loaded(&options);
        let d = db.design();
        let mut reader = db.begin(Isolation::Snapshot);
        // An own write: visible to the reader's scans.
        reader
            .update(
                table,
                &item_key(region(1), 1),
                &[(items::SCORE, Value::I64(-1))],
            )
            .unwrap_or_else(|e| panic!("{d}: {e}"));
        let want = viewed(&reader, table, None, KeyRange::new(..));
        let own = want.iter().find(|r| r[items::ID] == Value::U64(1));
        assert_eq!(
            own.map(|r| &r[items::SCORE]),
            Some(&Value::I64(-1)),
            "{d}: own write"
        );
        let mut got = Vec::new();
        let scan = reader
            .scan(table, ..)
            .unwrap_or_else(|e| panic!("{d}: {e}"));
        let mut id = 2;
        for read in scan {
            got.push(read.unwrap_or_else(|e| panic!("{d}: {e}")).into_values());
            // Someone else changes the rows ahead, behind and just read, and commits.
            if got.len() % 97 == 0 {
                let mut writer = db.begin(Isolation::Snapshot);
                for target in [id, id + 400, 3] {
                    let key = item_key(region(target), target);
                    if target % 5 == 0 {
                        writer.insert(table, &row(target)).expect("insert");
                    } else {
                        writer
                            .update(table, &key, &[(items::NAME, Value::from("moved"))])
                            .expect("update");
                    }
                }
                writer.commit().expect("commit");
                db.collect_garbage();
                id += 3;
            }
        }
        assert_rows!(got, want, "{d}: the scan moved with other commits");
        // Not committed: under MVOCC and SSN this writer would rightly fail validation.
        reader.abort();
    }
}

/// Bad requests fail when the scan is asked for, before anything is read; the transaction
/// stays usable.
#[test]
fn a_bad_scan_fails_at_once_and_changes_nothing() {
    for options in all_configurations() {
        let (db, table) = loaded(&options);
        let d = db.design();
        let other = open(&options);
        let foreign = create_items(&other);
        let txn = db.begin(Isolation::Snapshot);
        let bad = [
            txn.scan(foreign, ..).err(),
            txn.scan_index(table, "no_such_index", ..).err(),
            txn.scan(table, vec![Value::I64(1)]..).err(),
            txn.scan(
                table,
                vec![Value::from("a"), Value::U64(1), Value::U64(2)]..,
            )
            .err(),
            txn.scan_index(table, items::BY_SCORE, vec![Value::from("x")]..)
                .err(),
        ];
        assert!(
            matches!(
                bad,
                [
                    Some(Error::UnknownTable { .. }),
                    Some(Error::UnknownIndex { .. }),
                    Some(Error::WrongType { .. }),
                    Some(Error::WrongArity { .. }),
                    Some(Error::WrongType { .. }),
                ]
            ),
            "{d}: {bad:?}"
        );
        assert_eq!(
            txn.scan(table, ..).expect("scan").count() as u64,
            ROWS - ROWS / 5,
            "{d}"
        );
        txn.commit().unwrap_or_else(|e| panic!("{d}: {e}"));
    }
}

/// Serializable: an iterator that was read to its end read the whole range, past its last
/// row: a phantom inserted there by a concurrent transaction is a conflict. One dropped
/// after a few rows read only those: a phantom after them is not.
#[test]
fn what_an_iterator_handed_out_is_what_validation_counts_as_read() {
    for options in common::precision_configurations() {
        for read_to_the_end in [true, false] {
            let (db, table) = loaded(&options);
            let d = db.design();
            let mut scanner = db.begin(Isolation::Serializable);
            let range = KeyRange::prefix(vec![Value::from("east")]);
            let seen = if read_to_the_end {
                scanner.scan(table, range).expect("scan").count()
            } else {
                scanner.scan(table, range).expect("scan").take(3).count()
            };
            assert!(seen >= 3, "{d}");
            // A phantom after the last "east" row (ids stop below ROWS).
            let mut inserter = db.begin(Isolation::Serializable);
            inserter
                .insert(table, &item("east", ROWS + 10, 0, "phantom"))
                .expect("insert");
            inserter.commit().expect("the inserter commits first");
            scanner
                .update(
                    table,
                    &item_key("north", 1),
                    &[(items::SCORE, Value::I64(5))],
                )
                .expect("a write, so that the scanner validates");
            let outcome = scanner.commit();
            if read_to_the_end {
                assert!(
                    matches!(outcome, Err(Error::SerializationFailure { .. })),
                    "{d}: the phantom is in what the scanner read: {outcome:?}"
                );
            } else {
                assert_eq!(outcome, Ok(()), "{d}: the phantom is past what it read");
            }
        }
    }
}

/// Under MVTO and MV2PL a read can be refused mid-scan (another transaction holds the
/// row's write lock): the iterator yields that error once, then ends, and the transaction
/// is rolled back.
#[test]
fn a_read_refused_mid_scan_ends_the_iterator_with_the_error() {
    for protocol in [ConcurrencyControl::Mvto, ConcurrencyControl::Mv2pl] {
        for options in configurations_of(protocol) {
            let (db, table) = loaded(&options);
            let d = db.design();
            let scanner = db.begin(Isolation::Snapshot);
            let mut locker = db.begin(Isolation::Snapshot);
            locker
                .update(
                    table,
                    &item_key("east", 603),
                    &[(items::SCORE, Value::I64(1))],
                )
                .map(|found| assert!(found, "{d}: a live row"))
                .unwrap_or_else(|e| panic!("{d}: {e}"));
            let mut rows = 0;
            let mut errors = Vec::new();
            for row in scanner
                .scan(table, KeyRange::prefix(vec![Value::from("east")]))
                .expect("scan")
            {
                match row {
                    Ok(_) => rows += 1,
                    Err(error) => errors.push(error),
                }
            }
            assert!(
                matches!(errors[..], [Error::LockConflict { .. }]),
                "{d}: {errors:?} after {rows} rows"
            );
            assert!(rows < 200, "{d}: the scan went on after the error");
            assert_eq!(scanner.commit(), Err(Error::TransactionAborted), "{d}");
            locker.abort();
        }
    }
}
