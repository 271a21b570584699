//! Contract tests: what every configuration (every collector, every storage) must do the
//! same way. Each test loops over `common::all_configurations()` and names the
//! configuration (`db.design()`) in its assertion messages.

mod common;

use std::cmp::Ordering;
use std::ops::Bound::{Excluded, Included, Unbounded};

use common::ScanRows;
use common::{
    all_configurations, all_databases, all_rows, assert_collected_everything, commit_rows,
    create_items, if_collected, index_rows, item, item_key, items, items_schema, open, ITEMS,
};
use verso::{
    ColumnType, Database, Error, Isolation, KeyRange, PrimaryKeyIndex, RowView, Schema, TableId,
    Transaction, Value, MAX_COLUMNS,
};

/// Asserts that `$result` is `Err` matching `$pattern`, naming the configuration otherwise,
/// and evaluates to the error.
macro_rules! assert_err {
    ($design:expr, $result:expr, $pattern:pat) => {
        match $result {
            Err(error @ $pattern) => error,
            other => panic!(
                "{}: `{}` returned {:?}, expected {}",
                $design,
                stringify!($result),
                other,
                stringify!($pattern)
            ),
        }
    };
}

/// Unwraps a result, naming the configuration and the call on failure.
macro_rules! ok {
    ($design:expr, $result:expr) => {
        match $result {
            Ok(value) => value,
            Err(error) => panic!("{}: `{}` failed: {error}", $design, stringify!($result)),
        }
    };
}

// ----- helpers -----------------------------------------------------------------------------

fn primary_order(a: &[Value], b: &[Value]) -> Ordering {
    let key = |row: &[Value]| {
        (
            row[items::REGION].as_text().map(str::to_owned),
            row[items::ID].as_u64(),
        )
    };
    key(a).cmp(&key(b))
}

/// Order of the `by_name` index: NULL first, then by name, ties in primary-key order.
fn name_order(a: &[Value], b: &[Value]) -> Ordering {
    let name = |row: &[Value]| row[items::NAME].as_text().map(str::to_owned);
    name(a).cmp(&name(b)).then_with(|| primary_order(a, b))
}

/// Order of the `by_score` index: `(score, weight)` with NULL first, ties by primary key.
fn score_order(a: &[Value], b: &[Value]) -> Ordering {
    let score = |row: &[Value]| row[items::SCORE].as_i64();
    let weight = |x: &Value, y: &Value| match (x.as_f64(), y.as_f64()) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => x.total_cmp(&y),
    };
    score(a)
        .cmp(&score(b))
        .then_with(|| weight(&a[items::WEIGHT], &b[items::WEIGHT]))
        .then_with(|| primary_order(a, b))
}

fn sorted(rows: &[Vec<Value>], order: fn(&[Value], &[Value]) -> Ordering) -> Vec<Vec<Value>> {
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| order(a, b));
    rows
}

/// Asserts that `txn` sees exactly `expected` in the items table, through every access
/// path: a full scan, a `get` per row, both secondary indexes in full, and an equality
/// lookup per name that occurs in `expected` or in `other_names`.
fn assert_items(
    design: &str,
    txn: &Transaction<'_>,
    table: TableId,
    expected: &[Vec<Value>],
    other_names: &[&str],
    context: &str,
) {
    let by_key = sorted(expected, primary_order);
    assert_eq!(
        ok!(design, txn.scan(table, ..).rows()),
        by_key,
        "{design}: {context}: full scan"
    );
    for row in expected {
        let key = [row[items::REGION].clone(), row[items::ID].clone()];
        assert_eq!(
            ok!(design, txn.get(table, &key)).as_ref(),
            Some(row),
            "{design}: {context}: get {key:?}"
        );
    }
    assert_eq!(
        ok!(design, txn.scan_index(table, items::BY_NAME, ..).rows()),
        sorted(expected, name_order),
        "{design}: {context}: full scan of {}",
        items::BY_NAME
    );
    assert_eq!(
        ok!(design, txn.scan_index(table, items::BY_SCORE, ..).rows()),
        sorted(expected, score_order),
        "{design}: {context}: full scan of {}",
        items::BY_SCORE
    );
    let mut names: Vec<Value> = expected.iter().map(|r| r[items::NAME].clone()).collect();
    names.extend(other_names.iter().map(|&n| Value::from(n)));
    for name in names {
        let want: Vec<Vec<Value>> = sorted(expected, primary_order)
            .into_iter()
            .filter(|r| r[items::NAME] == name)
            .collect();
        let prefix = vec![name.clone()];
        assert_eq!(
            ok!(
                design,
                txn.scan_index(table, items::BY_NAME, prefix.clone()..=prefix)
                    .rows()
            ),
            want,
            "{design}: {context}: {} = {name}",
            items::BY_NAME
        );
    }
}

/// `assert_items` in a fresh snapshot.
fn assert_committed_items(
    db: &Database,
    table: TableId,
    expected: &[Vec<Value>],
    other_names: &[&str],
    context: &str,
) {
    let design = db.design();
    let txn = db.begin(Isolation::Snapshot);
    assert_items(&design, &txn, table, expected, other_names, context);
    // Commit rather than drop, so that checking does not count as an abort.
    ok!(design, txn.commit());
}

fn with_score(mut row: Vec<Value>, score: i64) -> Vec<Value> {
    row[items::SCORE] = Value::I64(score);
    row
}

fn with_name(mut row: Vec<Value>, name: &str) -> Vec<Value> {
    row[items::NAME] = Value::from(name);
    row
}

fn keys_of(rows: &[Vec<Value>]) -> Vec<(String, u64)> {
    rows.iter()
        .map(|row| {
            (
                row[items::REGION].as_text().unwrap_or("?").to_owned(),
                row[items::ID].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect()
}

fn keys(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|&(r, i)| (r.to_owned(), i)).collect()
}

/// Opens every configuration with the items table holding `rows`.
fn all_with_items(rows: &[Vec<Value>]) -> impl Iterator<Item = (Database, TableId)> + '_ {
    with_items(all_databases(), rows)
}

/// Opens every configuration whose transactions read the snapshot taken at `begin` and are
/// never refused a read (every protocol but MVTO and MV2PL, whose contract is in "the
/// locking protocols" below), with the items table holding `rows`. The tests of snapshots
/// and of first-updater-wins use these.
fn snapshot_with_items(rows: &[Vec<Value>]) -> impl Iterator<Item = (Database, TableId)> + '_ {
    with_items(snapshot_databases(), rows)
}

fn snapshot_databases() -> impl Iterator<Item = Database> {
    common::snapshot_read_configurations()
        .into_iter()
        .map(|options| open(&options))
}

/// The default protocol's configurations (snapshot isolation, not validated at
/// `Snapshot`), with the items table holding `rows`.
fn si_with_items(rows: &[Vec<Value>]) -> impl Iterator<Item = (Database, TableId)> + '_ {
    with_items(si_databases(), rows)
}

fn si_databases() -> impl Iterator<Item = Database> {
    common::si_configurations()
        .into_iter()
        .map(|options| open(&options))
}

fn with_items<'r>(
    databases: impl Iterator<Item = Database> + 'r,
    rows: &'r [Vec<Value>],
) -> impl Iterator<Item = (Database, TableId)> + 'r {
    databases.map(move |db| {
        let table = create_items(&db);
        if !rows.is_empty() {
            commit_rows(&db, table, rows);
        }
        (db, table)
    })
}

// ----- schema ------------------------------------------------------------------------------

#[test]
fn schema_validation_rejects_bad_schemas_with_typed_errors() {
    for db in all_databases() {
        let d = db.design();
        let u64_col = |s: Schema, name: &str| s.column(name, ColumnType::U64);

        assert_err!(
            d,
            db.create_table("t", Schema::new()),
            Error::InvalidSchema { .. }
        );
        assert_err!(
            d,
            db.create_table("t", u64_col(Schema::new(), "a")),
            Error::InvalidSchema { .. }
        );
        assert_err!(
            d,
            db.create_table(
                "t",
                u64_col(u64_col(Schema::new(), "a"), "a").primary_key(&["a"])
            ),
            Error::InvalidSchema { .. }
        );
        assert_err!(
            d,
            db.create_table("t", u64_col(Schema::new(), "a").primary_key(&["b"])),
            Error::UnknownColumn { .. }
        );
        assert_err!(
            d,
            db.create_table(
                "t",
                u64_col(Schema::new(), "a")
                    .primary_key(&["a"])
                    .index("by_b", &["b"])
            ),
            Error::UnknownColumn { .. }
        );
        let too_many = (0..=MAX_COLUMNS)
            .fold(Schema::new(), |s, i| u64_col(s, &format!("c{i}")))
            .primary_key(&["c0"]);
        assert_err!(
            d,
            db.create_table("t", too_many),
            Error::InvalidSchema { .. }
        );

        // Nothing failed half-way: no table was registered.
        assert!(db.table_names().is_empty(), "{d}: {:?}", db.table_names());
        assert_err!(d, db.table("t"), Error::UnknownTable { .. });

        let table = create_items(&db);
        commit_rows(&db, table, &[item("a", 1, 1, "x")]);
        assert_err!(
            d,
            db.create_table(ITEMS, items_schema()),
            Error::DuplicateTable { .. }
        );
        assert_err!(
            d,
            db.create_table(ITEMS, u64_col(Schema::new(), "z").primary_key(&["z"])),
            Error::DuplicateTable { .. }
        );
        // The duplicate did not replace the table or its rows.
        assert_eq!(db.table(ITEMS), Ok(table), "{d}");
        assert_eq!(db.table_names(), vec![ITEMS.to_owned()], "{d}");
        assert_eq!(all_rows(&db, table), vec![item("a", 1, 1, "x")], "{d}");

        let columns = [
            ("region", items::REGION),
            ("id", items::ID),
            ("score", items::SCORE),
            ("weight", items::WEIGHT),
            ("name", items::NAME),
            ("blob", items::BLOB),
            ("tag", items::TAG),
        ];
        assert_eq!(columns.len(), items::ARITY);
        for (name, position) in columns {
            assert_eq!(db.column_index(table, name), Ok(position), "{d}: {name}");
        }
        assert_err!(
            d,
            db.column_index(table, "nope"),
            Error::UnknownColumn { .. }
        );
        assert_err!(
            d,
            db.column_index(table, "Region"),
            Error::UnknownColumn { .. }
        );

        let other = db
            .create_table("other", u64_col(Schema::new(), "k").primary_key(&["k"]))
            .expect("second table");
        assert_ne!(other, table, "{d}");
        assert_eq!(
            db.table_names(),
            vec![ITEMS.to_owned(), "other".into()],
            "{d}"
        );
    }
}

#[test]
fn a_table_of_max_columns_works_up_to_its_last_column() {
    for db in snapshot_databases() {
        let d = db.design();
        let schema = (0..MAX_COLUMNS)
            .fold(Schema::new(), |s, i| {
                s.column(&format!("c{i}"), ColumnType::I64)
            })
            .primary_key(&["c0"])
            .index("by_last", &[&format!("c{}", MAX_COLUMNS - 1)]);
        let table = ok!(d, db.create_table("wide", schema));
        let last = MAX_COLUMNS - 1;
        assert_eq!(db.column_index(table, &format!("c{last}")), Ok(last), "{d}");
        let row: Vec<Value> = (0..MAX_COLUMNS as i64).map(Value::I64).collect();
        commit_rows(&db, table, std::slice::from_ref(&row));

        let before = db.begin(Isolation::Snapshot);
        let mut writer = db.begin(Isolation::Snapshot);
        let key = [Value::I64(0)];
        assert!(
            ok!(d, writer.update(table, &key, &[(last, Value::I64(-1))])),
            "{d}"
        );
        assert!(
            ok!(d, writer.update(table, &key, &[(64, Value::Null)])),
            "{d}"
        );
        ok!(d, writer.commit());

        let mut changed = row.clone();
        changed[last] = Value::I64(-1);
        changed[64] = Value::Null;
        let after = db.begin(Isolation::Snapshot);
        assert_eq!(ok!(d, before.get(table, &key)), Some(row.clone()), "{d}");
        assert_eq!(ok!(d, after.get(table, &key)), Some(changed.clone()), "{d}");
        let old = vec![Value::I64(last as i64)];
        let new = vec![Value::I64(-1)];
        let by_last = |txn: &Transaction<'_>, k: &Vec<Value>| {
            ok!(
                d,
                txn.scan_index(table, "by_last", k.clone()..=k.clone())
                    .rows()
            )
        };
        assert_eq!(by_last(&before, &old), vec![row.clone()], "{d}");
        assert!(by_last(&before, &new).is_empty(), "{d}");
        assert_eq!(by_last(&after, &new), vec![changed], "{d}");
        assert!(by_last(&after, &old).is_empty(), "{d}");
    }
}

#[test]
fn table_ids_of_another_database_are_unknown_tables() {
    for options in all_configurations() {
        let db = open(&options);
        let other = open(&options);
        let d = db.design();
        let table = create_items(&db);
        let foreign = create_items(&other);
        assert_ne!(table, foreign, "{d}: ids of two databases must differ");
        commit_rows(&db, table, &[item("a", 1, 1, "x")]);
        let key = item_key("a", 1);

        assert_err!(
            d,
            db.column_index(foreign, "id"),
            Error::UnknownTable { .. }
        );
        assert_err!(
            d,
            db.version_chain_length(foreign, &key),
            Error::UnknownTable { .. }
        );
        assert_err!(
            d,
            db.primary_index_entries(foreign),
            Error::UnknownTable { .. }
        );

        let mut txn = db.begin(Isolation::Snapshot);
        assert_err!(d, txn.get(foreign, &key), Error::UnknownTable { .. });
        assert_err!(d, txn.scan(foreign, ..).rows(), Error::UnknownTable { .. });
        assert_err!(
            d,
            txn.scan_index(foreign, items::BY_NAME, ..).rows(),
            Error::UnknownTable { .. }
        );
        assert_err!(
            d,
            txn.insert(foreign, &item("b", 1, 1, "y")),
            Error::UnknownTable { .. }
        );
        assert_err!(
            d,
            txn.update(foreign, &key, &[(items::SCORE, Value::I64(5))]),
            Error::UnknownTable { .. }
        );
        assert_err!(d, txn.delete(foreign, &key), Error::UnknownTable { .. });
        assert_err!(
            d,
            txn.prefetch(foreign, &[&key]),
            Error::UnknownTable { .. }
        );
        // Misuse leaves the transaction usable.
        assert!(
            ok!(d, txn.update(table, &key, &[(items::SCORE, Value::I64(5))])),
            "{d}"
        );
        ok!(d, txn.commit());

        assert_eq!(
            all_rows(&db, table),
            vec![with_score(item("a", 1, 1, "x"), 5)],
            "{d}"
        );
        assert!(all_rows(&other, foreign).is_empty(), "{d}");
        assert_err!(d, db.table("nope"), Error::UnknownTable { .. });
    }
}

// ----- basics --------------------------------------------------------------------------------

/// The prefetch hint reads and records nothing: every read after it returns what it
/// returns without it (committed rows, own writes, absent keys, keys long enough to leave
/// the index slot), bad keys are refused with typed errors before anything happens, and it
/// takes no lock and no read a concurrent writer could conflict with.
#[test]
fn prefetch_is_only_a_hint_and_checks_its_keys() {
    let long_region = "a region whose name is far longer than an index slot holds";
    let base = vec![
        item("a", 1, 1, "x"),
        item("a", 2, 2, "y"),
        item(long_region, 3, 3, "z"),
    ];
    for (db, table) in all_with_items(&base) {
        let d = db.design();
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(ok!(
            d,
            txn.update(table, &tk("a", 2), &[(items::SCORE, Value::I64(20))])
        ));
        ok!(d, txn.insert(table, &item("b", 9, 9, "new")));
        let keys = [
            tk("a", 1),
            tk("a", 2),
            tk(long_region, 3),
            tk("b", 9),
            tk("absent", 4),
        ];
        let before = db.stats();
        ok!(d, txn.prefetch(table, &keys));
        ok!(d, txn.prefetch(table, &keys[..0]));
        let after = db.stats();
        // The hint found the four keys that have a row object (its own insert among them)
        // through the same key encoding the reads use; a table without a hash index has no
        // slot to ask for, and the hint finds nothing there. The disk engine's primary
        // index is its B+-tree whatever the schema declares, and the hint looks there.
        assert_eq!(after.prefetch_keys - before.prefetch_keys, 5, "{d}");
        let found = match common::primary_key_index_for(&db) {
            PrimaryKeyIndex::OrderedOnly if !d.starts_with("disk-") => 0,
            _ => 4,
        };
        assert_eq!(
            after.prefetch_rows_found - before.prefetch_rows_found,
            found,
            "{d}"
        );
        let expected = [
            Some(item("a", 1, 1, "x")),
            Some(with_score(item("a", 2, 2, "y"), 20)),
            Some(item(long_region, 3, 3, "z")),
            Some(item("b", 9, 9, "new")),
            None,
        ];
        for (key, expected) in keys.iter().zip(&expected) {
            assert_eq!(&ok!(d, txn.get(table, key)), expected, "{d}: {key:?}");
        }

        // Bad keys: typed errors, and the transaction goes on as before.
        assert_err!(
            d,
            txn.prefetch(table, &[tk("a", 1), vec![Value::from("a")]]),
            Error::WrongArity { .. }
        );
        assert_err!(
            d,
            txn.prefetch(table, &[vec![Value::from("a"), Value::I64(1)]]),
            Error::WrongType { .. }
        );
        assert_err!(
            d,
            txn.prefetch(table, &[vec![Value::Null, Value::U64(1)]]),
            Error::NullInPrimaryKey { .. }
        );
        ok!(d, txn.commit());
        assert_eq!(
            ok!(d, db.begin(Isolation::Snapshot).get(table, &tk("a", 2))),
            Some(with_score(item("a", 2, 2, "y"), 20)),
            "{d}"
        );

        // No read and no lock: an older writer updates the prefetched row while the
        // prefetching transaction runs, and both commit. A read of the row would refuse the
        // older writer under MVTO and MV2PL and fail the prefetcher's validation under
        // precision locking and MVOCC; under SSN one such edge alone aborts nobody, so
        // there this part shows only that the hint takes no lock.
        let mut older = db.begin(Isolation::Serializable);
        let mut prefetcher = db.begin(Isolation::Serializable);
        ok!(d, prefetcher.prefetch(table, &[tk("a", 1)]));
        assert!(ok!(
            d,
            older.update(table, &tk("a", 1), &[(items::SCORE, Value::I64(100))])
        ));
        ok!(d, older.commit());
        assert!(ok!(
            d,
            prefetcher.update(
                table,
                &tk(long_region, 3),
                &[(items::SCORE, Value::I64(30))]
            )
        ));
        ok!(d, prefetcher.commit());
    }
}

fn mixed_rows() -> Vec<Vec<Value>> {
    vec![
        item("b", 2, 5, "x"),
        item("a", 10, -3, "y"),
        item("ab", 1, 0, "z"),
        item("a", 2, 7, "x"),
        item("b", 1, 1, "w"),
        // NULL in every non-key column.
        vec![
            Value::from("a"),
            Value::U64(3),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ],
        // Extremes, an empty text and bytes with 0x00 and 0xFF.
        vec![
            Value::from("a\0b"),
            Value::U64(u64::MAX),
            Value::I64(i64::MIN),
            Value::F64(f64::NEG_INFINITY),
            Value::from(""),
            Value::Bytes(vec![0, 0xFF, 0, 0]),
            Value::U64(0),
        ],
    ]
}

#[test]
fn insert_get_update_delete_scan_with_composite_keys_and_every_type() {
    for (db, table) in all_with_items(&[]) {
        let d = db.design();
        let rows = mixed_rows();
        let mut txn = db.begin(Isolation::Snapshot);
        for row in &rows {
            ok!(d, txn.insert(table, row));
        }
        // Its own inserts, in primary-key order: "a" < "a\0b" < "ab" < "b".
        assert_eq!(
            keys_of(&ok!(d, txn.scan(table, ..).rows())),
            keys(&[
                ("a", 2),
                ("a", 3),
                ("a", 10),
                ("a\0b", u64::MAX),
                ("ab", 1),
                ("b", 1),
                ("b", 2),
            ]),
            "{d}"
        );
        ok!(d, txn.commit());
        assert_committed_items(&db, table, &rows, &["nobody"], "after insert");

        let mut txn = db.begin(Isolation::Snapshot);
        assert_eq!(ok!(d, txn.get(table, &item_key("a", 4))), None, "{d}");
        assert_eq!(ok!(d, txn.get(table, &item_key("c", 2))), None, "{d}");
        assert_eq!(ok!(d, txn.get(table, &item_key("", 0))), None, "{d}");
        // Set every type of column, to a value and to NULL, and NULL back to a value.
        assert!(
            ok!(
                d,
                txn.update(
                    table,
                    &item_key("a", 2),
                    &[
                        (items::SCORE, Value::I64(8)),
                        (items::WEIGHT, Value::F64(-0.5)),
                        (items::NAME, Value::Null),
                        (items::BLOB, Value::Bytes(Vec::new())),
                    ],
                )
            ),
            "{d}"
        );
        assert!(
            ok!(
                d,
                txn.update(
                    table,
                    &item_key("a", 3),
                    &[
                        (items::NAME, Value::from("now named")),
                        (items::TAG, Value::U64(7)),
                    ],
                )
            ),
            "{d}"
        );
        assert!(ok!(d, txn.delete(table, &item_key("b", 1))), "{d}");
        assert_eq!(ok!(d, txn.get(table, &item_key("b", 1))), None, "{d}");
        ok!(d, txn.commit());

        let mut expected = rows.clone();
        expected[3] = vec![
            Value::from("a"),
            Value::U64(2),
            Value::I64(8),
            Value::F64(-0.5),
            Value::Null,
            Value::Bytes(Vec::new()),
            Value::U64(20),
        ];
        expected[5][items::NAME] = Value::from("now named");
        expected[5][items::TAG] = Value::U64(7);
        expected.remove(4);
        assert_committed_items(&db, table, &expected, &["w"], "after update and delete");
    }
}

#[test]
fn scan_orders_every_key_type_like_its_values() {
    let cases: Vec<(ColumnType, Vec<Value>)> = vec![
        (
            ColumnType::I64,
            [i64::MIN, -300, -1, 0, 1, 255, 256, i64::MAX]
                .map(Value::I64)
                .to_vec(),
        ),
        (
            ColumnType::U64,
            [0, 1, 255, 256, 1 << 40, u64::MAX].map(Value::U64).to_vec(),
        ),
        (
            ColumnType::F64,
            [
                f64::NEG_INFINITY,
                -1e300,
                -2.5,
                -0.0,
                0.0,
                1e-300,
                3.25,
                f64::INFINITY,
            ]
            .map(Value::F64)
            .to_vec(),
        ),
        (
            ColumnType::Text,
            ["", "\0", "a", "a\0", "a\0b", "aa", "ab", "b", "é"]
                .map(Value::from)
                .to_vec(),
        ),
        (
            ColumnType::Bytes,
            [
                vec![],
                vec![0],
                vec![0, 0],
                vec![0, 1],
                vec![0, 0xFF],
                vec![1],
                vec![0xFF],
                vec![0xFF, 0],
            ]
            .map(Value::Bytes)
            .to_vec(),
        ),
    ];
    for db in all_databases() {
        let d = db.design();
        for (ty, ascending) in &cases {
            let table = ok!(
                d,
                db.create_table(
                    &format!("k_{ty}"),
                    Schema::new()
                        .column("k", *ty)
                        .column("v", ColumnType::U64)
                        .primary_key(&["k"])
                )
            );
            // Insert in a scrambled order.
            let mut txn = db.begin(Isolation::Snapshot);
            let n = ascending.len();
            for step in 0..n {
                let i = (step * 5 + 3) % n;
                ok!(
                    d,
                    txn.insert(table, &[ascending[i].clone(), Value::U64(i as u64)])
                );
            }
            ok!(d, txn.commit());
            let rows = all_rows(&db, table);
            let scanned: Vec<Value> = rows.iter().map(|row| row[0].clone()).collect();
            assert_eq!(&scanned, ascending, "{d}: {ty}");
            // F64 -0.0 == 0.0 under PartialEq: check the order through the payload too.
            let payloads: Vec<u64> = rows
                .iter()
                .map(|row| row[1].as_u64().expect("payload"))
                .collect();
            assert_eq!(
                payloads,
                (0..n as u64).collect::<Vec<_>>(),
                "{d}: {ty} order"
            );
        }
    }
}

fn range_rows() -> Vec<Vec<Value>> {
    [
        ("a", 1),
        ("a", 2),
        ("a", 3),
        ("ab", 1),
        ("b", 1),
        ("b", 2),
        ("c", 5),
    ]
    .into_iter()
    .map(|(r, i)| item(r, i, i as i64, r))
    .collect()
}

fn t(region: &str) -> Vec<Value> {
    vec![Value::from(region)]
}

fn tk(region: &str, id: u64) -> Vec<Value> {
    item_key(region, id)
}

/// A scan case: its name, the range, and the keys it must yield.
type RangeCase<'a> = (&'a str, Range, Vec<(&'a str, u64)>);

type Range = (std::ops::Bound<Vec<Value>>, std::ops::Bound<Vec<Value>>);

#[test]
fn scan_bounds_are_key_prefixes() {
    let all = [
        ("a", 1),
        ("a", 2),
        ("a", 3),
        ("ab", 1),
        ("b", 1),
        ("b", 2),
        ("c", 5),
    ];
    let cases: Vec<RangeCase<'_>> = vec![
        ("..", (Unbounded, Unbounded), all.to_vec()),
        (
            "[a]..=[a]",
            (Included(t("a")), Included(t("a"))),
            all[..3].to_vec(),
        ),
        (
            "[ab]..=[ab]",
            (Included(t("ab")), Included(t("ab"))),
            vec![("ab", 1)],
        ),
        (
            "[zz]..=[zz]",
            (Included(t("zz")), Included(t("zz"))),
            vec![],
        ),
        ("..=[a]", (Unbounded, Included(t("a"))), all[..3].to_vec()),
        ("..[a]", (Unbounded, Excluded(t("a"))), vec![]),
        ("..[ab]", (Unbounded, Excluded(t("ab"))), all[..3].to_vec()),
        ("..[b]", (Unbounded, Excluded(t("b"))), all[..4].to_vec()),
        ("[a]..", (Included(t("a")), Unbounded), all.to_vec()),
        ("[ab]..", (Included(t("ab")), Unbounded), all[3..].to_vec()),
        ("(a..", (Excluded(t("a")), Unbounded), all[3..].to_vec()),
        ("(b..", (Excluded(t("b")), Unbounded), vec![("c", 5)]),
        (
            "[a,2]..[b,2]",
            (Included(tk("a", 2)), Excluded(tk("b", 2))),
            all[1..5].to_vec(),
        ),
        (
            "[a,2]..=[b,2]",
            (Included(tk("a", 2)), Included(tk("b", 2))),
            all[1..6].to_vec(),
        ),
        (
            "(a,2..=[b]",
            (Excluded(tk("a", 2)), Included(t("b"))),
            all[2..6].to_vec(),
        ),
        (
            "(a,2..[b]",
            (Excluded(tk("a", 2)), Excluded(t("b"))),
            all[2..4].to_vec(),
        ),
        (
            "[ab]..=[b,1]",
            (Included(t("ab")), Included(tk("b", 1))),
            all[3..5].to_vec(),
        ),
        (
            "[a,2]..=[a,2]",
            (Included(tk("a", 2)), Included(tk("a", 2))),
            vec![("a", 2)],
        ),
        (
            "[a,2]..[a,2]",
            (Included(tk("a", 2)), Excluded(tk("a", 2))),
            vec![],
        ),
        (
            "(a,2..(a,3",
            (Excluded(tk("a", 2)), Excluded(tk("a", 3))),
            vec![],
        ),
        (
            "(a,2..=[a,3]",
            (Excluded(tk("a", 2)), Included(tk("a", 3))),
            vec![("a", 3)],
        ),
        (
            "[a,4]..=[a,9]",
            (Included(tk("a", 4)), Included(tk("a", 9))),
            vec![],
        ),
        (
            "[b]..[a] (inverted)",
            (Included(t("b")), Excluded(t("a"))),
            vec![],
        ),
        (
            "[b]..=[a] (inverted)",
            (Included(t("b")), Included(t("a"))),
            vec![],
        ),
        (
            "(b..=[a] (inverted)",
            (Excluded(t("b")), Included(t("a"))),
            vec![],
        ),
        ("[zz]..", (Included(t("zz")), Unbounded), vec![]),
        ("[c,6]..", (Included(tk("c", 6)), Unbounded), vec![]),
        ("(c,MAX..", (Excluded(tk("c", u64::MAX)), Unbounded), vec![]),
    ];
    for (db, table) in all_with_items(&range_rows()) {
        let d = db.design();
        let txn = db.begin(Isolation::Snapshot);
        for (name, range, want) in &cases {
            let mut streamed = Vec::new();
            ok!(
                d,
                txn.scan_view(table, range.clone(), |row| {
                    streamed.push(row.to_values());
                    true
                })
            );
            assert_eq!(keys_of(&streamed), keys(want), "{d}: scan_view {name}");
            let collected = ok!(d, txn.scan(table, range.clone()).rows());
            assert_eq!(
                collected, streamed,
                "{d}: scan and scan_view differ on {name}"
            );
        }
        for prefix in [t("a"), t("ab"), tk("a", 2), t("zz"), t("")] {
            let mut streamed = Vec::new();
            ok!(
                d,
                txn.scan_view(table, KeyRange::prefix(prefix.clone()), |row| {
                    streamed.push(row.to_values());
                    true
                })
            );
            let want: Vec<Vec<Value>> = sorted(&range_rows(), primary_order)
                .into_iter()
                .filter(|row| row[..prefix.len()] == prefix[..])
                .collect();
            assert_eq!(streamed, want, "{d}: KeyRange::prefix({prefix:?})");
        }

        // scan_view stops when the visitor says so.
        let mut visited = 0;
        ok!(
            d,
            txn.scan_view(table, .., |_| {
                visited += 1;
                visited < 2
            })
        );
        assert_eq!(visited, 2, "{d}: scan_view must stop after false");

        // Bad bounds are typed errors.
        assert_err!(
            d,
            txn.scan(
                table,
                vec![Value::from("a"), Value::U64(1), Value::U64(2)]..
            )
            .rows(),
            Error::WrongArity { .. }
        );
        assert_err!(
            d,
            txn.scan(table, vec![Value::Null]..).rows(),
            Error::NullInPrimaryKey { .. }
        );
        assert_err!(
            d,
            txn.scan(table, ..vec![Value::U64(1)]).rows(),
            Error::WrongType { .. }
        );
        assert_err!(
            d,
            txn.scan(table, t("a")..vec![Value::from("b"), Value::I64(1)])
                .rows(),
            Error::WrongType { .. }
        );
        // The transaction is still usable after bad bounds.
        assert_eq!(ok!(d, txn.scan(table, ..).rows()).len(), all.len(), "{d}");
    }
}

#[test]
fn empty_tables_scan_empty() {
    for (db, table) in all_with_items(&[]) {
        let d = db.design();
        let txn = db.begin(Isolation::Snapshot);
        assert!(ok!(d, txn.scan(table, ..).rows()).is_empty(), "{d}");
        assert!(
            ok!(d, txn.scan(table, t("a")..=t("z")).rows()).is_empty(),
            "{d}"
        );
        assert!(
            ok!(d, txn.scan_index(table, items::BY_NAME, ..).rows()).is_empty(),
            "{d}"
        );
        assert_eq!(ok!(d, txn.get(table, &tk("a", 1))), None, "{d}");
        assert_eq!(db.primary_index_entries(table), Ok(0), "{d}");
    }
}

#[test]
fn long_scans_cross_batch_boundaries_in_order() {
    const ROWS: u64 = 700;
    let names = ["n0", "n1", "n2"];
    let rows: Vec<Vec<Value>> = (0..ROWS)
        .map(|i| {
            item(
                if i % 2 == 0 { "even" } else { "odd" },
                i,
                (i % 7) as i64,
                names[(i % 3) as usize],
            )
        })
        .collect();
    for (db, table) in all_with_items(&rows) {
        let d = db.design();
        // Delete every fifth row, so batches also meet invisible rows.
        let mut txn = db.begin(Isolation::Snapshot);
        for i in (0..ROWS).step_by(5) {
            let region = if i % 2 == 0 { "even" } else { "odd" };
            assert!(ok!(d, txn.delete(table, &tk(region, i))), "{d}");
        }
        ok!(d, txn.commit());
        let expected: Vec<Vec<Value>> = rows
            .iter()
            .filter(|r| r[items::ID].as_u64().is_some_and(|i| i % 5 != 0))
            .cloned()
            .collect();
        assert_committed_items(&db, table, &expected, &[], "long scans");
        let txn = db.begin(Isolation::Snapshot);
        let mut visited = 0;
        ok!(
            d,
            txn.scan_view(table, .., |_| {
                visited += 1;
                visited < 300
            })
        );
        assert_eq!(visited, 300, "{d}");
        let mut visited = 0;
        ok!(
            d,
            txn.scan_index_view(
                table,
                items::BY_NAME,
                KeyRange::prefix(vec!["n1".into()]),
                |_| {
                    visited += 1;
                    visited < 100
                }
            )
        );
        assert_eq!(visited, 100, "{d}");
    }
}

/// Every row a scan streams, in the order it streams them (`stop_after`: how many it takes
/// before it asks to stop).
fn streamed(
    txn: &Transaction<'_>,
    table: TableId,
    index: Option<&str>,
    range: KeyRange,
    stop_after: usize,
) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    let mut take = |row: RowView<'_>| {
        rows.push(row.to_values());
        rows.len() < stop_after
    };
    match index {
        None => txn.scan_view(table, range, &mut take),
        Some(index) => txn.scan_index_view(table, index, range, &mut take),
    }
    .expect("the scan runs");
    rows
}

/// A descending scan streams exactly the rows its ascending twin streams, last first:
/// across batch boundaries, past invisible rows, with the transaction's own uncommitted
/// writes, over the primary key and a secondary index; and one that stops early has
/// streamed the largest keys of the range.
#[test]
fn descending_scans_stream_the_ascending_rows_in_reverse() {
    const ROWS: u64 = 700;
    let names = ["n0", "n1", "n2"];
    let rows: Vec<Vec<Value>> = (0..ROWS)
        .map(|i| {
            let region = if i % 2 == 0 { "even" } else { "odd" };
            item(region, i, (i % 7) as i64, names[(i % 3) as usize])
        })
        .collect();
    let ranges = || {
        [
            (None, KeyRange::new(..)),
            (None, KeyRange::prefix(t("odd"))),
            (None, KeyRange::new(tk("even", 100)..tk("odd", 13))),
            (None, KeyRange::new(..=t("even"))),
            (None, KeyRange::new(t("nothing")..t("nothing else"))),
            (Some(items::BY_NAME), KeyRange::new(..)),
            (Some(items::BY_NAME), KeyRange::prefix(vec!["n1".into()])),
            (
                Some(items::BY_NAME),
                KeyRange::new(vec!["n0".into()]..vec!["n2".into()]),
            ),
        ]
    };
    for (db, table) in all_with_items(&rows) {
        let d = db.design();
        // Delete every fifth row, so batches also meet invisible rows.
        let mut deleter = db.begin(Isolation::Snapshot);
        for i in (0..ROWS).step_by(5) {
            let region = if i % 2 == 0 { "even" } else { "odd" };
            assert!(ok!(d, deleter.delete(table, &tk(region, i))), "{d}");
        }
        ok!(d, deleter.commit());
        let mut txn = db.begin(Isolation::Snapshot);
        ok!(d, txn.insert(table, &item("odd", 10_001, 3, "n1")));
        assert!(ok!(d, txn.delete(table, &tk("odd", 1))), "{d}");
        for (index, range) in ranges() {
            assert!(!range.is_descending());
            let ascending = streamed(&txn, table, index, range.clone(), usize::MAX);
            let descending = range.clone().descending();
            assert!(descending.is_descending());
            let mut backwards = streamed(&txn, table, index, descending.clone(), usize::MAX);
            backwards.reverse();
            assert_eq!(
                keys_of(&backwards),
                keys_of(&ascending),
                "{d}: {index:?} {range:?}"
            );
            assert_eq!(backwards, ascending, "{d}: {index:?} {range:?}");
            let first_three = streamed(&txn, table, index, descending, 3);
            let last_three: Vec<_> = ascending.iter().rev().take(3).cloned().collect();
            assert_eq!(first_three, last_three, "{d}: {index:?} {range:?}, stopped");
        }
        let whole = streamed(&txn, table, None, KeyRange::new(..), usize::MAX);
        assert_eq!(
            whole.len(),
            700 - 140 + 1 - 1,
            "{d}: the rows this transaction sees"
        );
        let mut latest_n1 = None;
        ok!(
            d,
            txn.scan_index_view(
                table,
                items::BY_NAME,
                KeyRange::prefix(vec!["n1".into()]).descending(),
                |row| {
                    latest_n1 = row.get(items::ID).as_u64();
                    false
                }
            )
        );
        assert_eq!(
            latest_n1,
            Some(10_001),
            "{d}: the own insert is the largest n1 key"
        );
    }
}

/// Asserts that at least one step of two transactions in a dependency cycle failed, and
/// that every failure is one a serializable protocol gives for it.
fn assert_a_cycle_member_failed(d: &str, outcomes: &[verso::Result<()>]) {
    let failed = outcomes.iter().filter(|outcome| outcome.is_err()).count();
    assert!(failed >= 1, "{d}: both committed: {outcomes:?}");
    for error in outcomes.iter().filter_map(|outcome| outcome.as_ref().err()) {
        assert!(
            matches!(
                error,
                Error::SerializationFailure { .. }
                    | Error::LockConflict { .. }
                    | Error::WriteConflict { .. }
                    | Error::TransactionAborted
            ),
            "{d}: {error:?}"
        );
    }
}

/// Under serializable isolation a descending scan that stopped early has read the keys
/// from where it stopped to the range's end, so a phantom inserted there by a transaction
/// in a cycle with it must cost one of them its commit. (Recording the other end of the
/// range, as an ascending scan's would be, lets both commit where a recorded read set is
/// validated; MVTO and MV2PL publish the whole range before the scan and pass either way.)
#[test]
fn a_descending_scan_that_stopped_early_read_the_top_of_its_range() {
    for (db, table) in all_with_items(&range_rows()) {
        let d = db.design();
        let mut ranger = db.begin(Isolation::Serializable);
        let mut inserter = db.begin(Isolation::Serializable);
        let mut outcomes = Vec::new();
        // The inserter reads the row the ranger will write.
        outcomes.push(inserter.get(table, &tk("a", 3)).map(|_| ()));
        // The ranger reads the latest "a" row, ("a", 3), and stops there.
        let mut latest = None;
        outcomes.push(
            ranger.scan_view(table, KeyRange::prefix(t("a")).descending(), |row| {
                latest = row.get(items::ID).as_u64();
                false
            }),
        );
        if outcomes.iter().all(Result::is_ok) {
            assert_eq!(latest, Some(3), "{d}");
        }
        outcomes.push(
            ranger
                .update(table, &tk("a", 3), &[(items::SCORE, Value::I64(-1))])
                .map(|_| ()),
        );
        // A phantom above where the ranger stopped: in the part it read.
        outcomes.push(inserter.insert(table, &item("a", 9, 9, "phantom")));
        outcomes.push(inserter.commit());
        outcomes.push(ranger.commit());
        assert_a_cycle_member_failed(&d, &outcomes);
    }
}

// ----- range updates -------------------------------------------------------------------------

/// `update_range` over a descending range shows `choose` the rows largest key first: a
/// `choose` that picks only the first row it sees updates the range's largest key.
#[test]
fn update_range_over_a_descending_range_chooses_from_the_largest_key() {
    for (db, table) in all_with_items(&range_rows()) {
        let d = db.design();
        let mut txn = db.begin(Isolation::Snapshot);
        let mut seen = Vec::new();
        let updated = ok!(
            d,
            txn.update_range(
                table,
                KeyRange::prefix(t("a")).descending(),
                &[(items::SCORE, Value::I64(-7))],
                |row| {
                    seen.push(row.get(items::ID).as_u64());
                    seen.len() == 1
                },
            )
        );
        assert_eq!(updated, 1, "{d}");
        assert_eq!(seen, [Some(3), Some(2), Some(1)], "{d}");
        ok!(d, txn.commit());
        let reader = db.begin(Isolation::Snapshot);
        let score = |id| {
            reader
                .get(table, &tk("a", id))
                .expect("the read runs")
                .map(|row| row[items::SCORE].clone())
        };
        assert_eq!(score(3), Some(Value::I64(-7)), "{d}");
        assert_eq!(score(2), Some(Value::I64(2)), "{d}");
        assert_eq!(score(1), Some(Value::I64(1)), "{d}");
    }
}

/// `update_range` updates exactly the rows of its range that the transaction sees and
/// `choose` picks (own inserts in, own deletes out, rows outside the range untouched),
/// returns their count, and leaves the table as updating each picked row by key would.
#[test]
fn update_range_updates_the_chosen_rows_it_sees() {
    for (db, table) in all_with_items(&range_rows()) {
        let d = db.design();
        let mut txn = db.begin(Isolation::Snapshot);
        ok!(d, txn.insert(table, &item("a", 4, 4, "own")));
        assert!(ok!(d, txn.delete(table, &tk("a", 2))), "{d}");
        let mut seen = Vec::new();
        let updated = ok!(
            d,
            txn.update_range(
                table,
                KeyRange::prefix(t("a")),
                &[(items::TAG, Value::Null), (items::SCORE, Value::I64(-1))],
                |row| {
                    let id = row.get(items::ID).as_u64().expect("an id");
                    seen.push(id);
                    id != 3
                },
            )
        );
        assert_eq!(
            seen,
            [1, 3, 4],
            "{d}: the rows of the range it sees, in key order"
        );
        assert_eq!(updated, 2, "{d}");
        let changed = |row: Vec<Value>| {
            let mut row = with_score(row, -1);
            row[items::TAG] = Value::Null;
            row
        };
        let expected = vec![
            changed(item("a", 1, 1, "a")),
            item("a", 3, 3, "a"),
            changed(item("a", 4, 4, "own")),
            item("ab", 1, 1, "ab"),
            item("b", 1, 1, "b"),
            item("b", 2, 2, "b"),
            item("c", 5, 5, "c"),
        ];
        assert_eq!(
            ok!(d, txn.scan(table, ..).rows()),
            expected,
            "{d}: own view"
        );
        // An empty range, and a range nothing is chosen from, update nothing.
        let none = ok!(
            d,
            txn.update_range(table, KeyRange::prefix(t("zz")), &[], |_| true)
        );
        assert_eq!(none, 0, "{d}");
        let none = ok!(
            d,
            txn.update_range(
                table,
                KeyRange::prefix(t("b")),
                &[(items::SCORE, Value::I64(9))],
                |_| false
            )
        );
        assert_eq!(none, 0, "{d}");
        ok!(d, txn.commit());
        assert_eq!(all_rows(&db, table), expected, "{d}: committed");
        // The secondary index follows the updated score.
        let by_score = index_rows(&db, table, items::BY_SCORE, &[Value::I64(-1)]);
        assert_eq!(by_score.len(), 2, "{d}: {by_score:?}");
    }
}

/// A bad assignment is refused before anything is read or written, with the error an
/// update by key gives.
#[test]
fn update_range_refuses_bad_assignments_before_writing() {
    for (db, table) in all_with_items(&range_rows()) {
        let d = db.design();
        let mut txn = db.begin(Isolation::Snapshot);
        let mut visited = 0;
        let mut try_changes = |txn: &mut Transaction<'_>, changes: &[(usize, Value)]| {
            txn.update_range(table, KeyRange::prefix(t("a")), changes, |_| {
                visited += 1;
                true
            })
        };
        assert_err!(
            d,
            try_changes(&mut txn, &[(items::ID, Value::U64(9))]),
            Error::PrimaryKeyUpdate { .. }
        );
        assert_err!(
            d,
            try_changes(&mut txn, &[(items::SCORE, Value::from("text"))]),
            Error::WrongType { .. }
        );
        assert_err!(
            d,
            try_changes(&mut txn, &[(items::ARITY, Value::I64(1))]),
            Error::UnknownColumn { .. } | Error::WrongArity { .. }
        );
        assert_eq!(visited, 0, "{d}: nothing was read");
        ok!(d, txn.commit());
        assert_eq!(
            all_rows(&db, table),
            range_rows(),
            "{d}: nothing was written"
        );
    }
}

/// A row of the range that a concurrent transaction updated and committed after this
/// snapshot is a write conflict, as an update by key would be; the transaction is rolled
/// back whole.
#[test]
fn update_range_loses_to_an_earlier_committed_updater() {
    for (db, table) in snapshot_with_items(&range_rows()) {
        let d = db.design();
        let mut txn = db.begin(Isolation::Snapshot);
        ok!(
            d,
            txn.update(table, &tk("c", 5), &[(items::SCORE, Value::I64(50))])
        );
        let mut other = db.begin(Isolation::Snapshot);
        assert!(ok!(
            d,
            other.update(table, &tk("a", 3), &[(items::SCORE, Value::I64(30))])
        ));
        ok!(d, other.commit());
        assert_err!(
            d,
            txn.update_range(
                table,
                KeyRange::prefix(t("a")),
                &[(items::SCORE, Value::I64(-1))],
                |_| true
            ),
            Error::WriteConflict { .. }
        );
        assert_err!(d, txn.commit(), Error::TransactionAborted);
        let mut expected = range_rows();
        expected[2] = with_score(item("a", 3, 3, "a"), 30);
        assert_eq!(
            all_rows(&db, table),
            expected,
            "{d}: only the winner's write"
        );
    }
}

/// `update_range` reads its range: under serializable isolation a transaction that
/// inserts into the range after it, and read a row it updated before it did, cannot also
/// commit (each missed the other's write: a cycle). Under MVTO and MV2PL the point
/// conflict on the row alone already refuses one of them; under the validating protocols
/// only the recorded range read can.
#[test]
fn update_range_reads_its_range_for_serializable_isolation() {
    for (db, table) in all_with_items(&range_rows()) {
        let d = db.design();
        let mut ranger = db.begin(Isolation::Serializable);
        let mut inserter = db.begin(Isolation::Serializable);
        let mut outcomes = Vec::new();
        let read = inserter.get(table, &tk("a", 1));
        outcomes.push(read.map(|_| ()));
        let ranged = ranger.update_range(
            table,
            KeyRange::prefix(t("a")),
            &[(items::SCORE, Value::I64(-1))],
            |_| true,
        );
        outcomes.push(ranged.map(|_| ()));
        outcomes.push(inserter.insert(table, &item("a", 9, 9, "phantom")));
        outcomes.push(inserter.commit());
        outcomes.push(ranger.commit());
        assert_a_cycle_member_failed(&d, &outcomes);
    }
}

// ----- misuse --------------------------------------------------------------------------------

#[test]
fn bad_input_gives_typed_errors_and_leaves_the_transaction_usable() {
    let base = vec![item("a", 1, 1, "x"), item("a", 2, 2, "y")];
    for (db, table) in all_with_items(&base) {
        let d = db.design();
        let before = db.stats();
        let mut txn = db.begin(Isolation::Snapshot);
        // A write of its own first, to check that failed calls do not disturb it.
        assert!(
            ok!(
                d,
                txn.update(table, &tk("a", 1), &[(items::SCORE, Value::I64(10))])
            ),
            "{d}"
        );

        let mut errors = vec![
            assert_err!(
                d,
                txn.insert(table, &item("a", 3, 3, "z")[..6]),
                Error::WrongArity {
                    expected: 7,
                    found: 6,
                    ..
                }
            ),
            assert_err!(
                d,
                txn.insert(table, &[item("a", 3, 3, "z"), vec![Value::Null]].concat()),
                Error::WrongArity { .. }
            ),
            assert_err!(d, txn.insert(table, &[]), Error::WrongArity { .. }),
        ];
        let mut wrong_type = item("a", 3, 3, "z");
        wrong_type[items::SCORE] = Value::U64(3);
        errors.push(assert_err!(
            d,
            txn.insert(table, &wrong_type),
            Error::WrongType {
                expected: ColumnType::I64,
                ..
            }
        ));
        let mut wrong_key_type = item("a", 3, 3, "z");
        wrong_key_type[items::ID] = Value::I64(3);
        errors.push(assert_err!(
            d,
            txn.insert(table, &wrong_key_type),
            Error::WrongType { .. }
        ));
        let mut null_key = item("a", 3, 3, "z");
        null_key[items::REGION] = Value::Null;
        errors.push(assert_err!(
            d,
            txn.insert(table, &null_key),
            Error::NullInPrimaryKey { .. }
        ));
        // Duplicates of a committed row and of its own updated row.
        errors.push(assert_err!(
            d,
            txn.insert(table, &item("a", 2, 9, "dup")),
            Error::DuplicateKey { .. }
        ));
        errors.push(assert_err!(
            d,
            txn.insert(table, &item("a", 1, 9, "dup")),
            Error::DuplicateKey { .. }
        ));

        // Keys of get/update/delete.
        errors.push(assert_err!(
            d,
            txn.get(table, &t("a")),
            Error::WrongArity {
                expected: 2,
                found: 1,
                ..
            }
        ));
        errors.push(assert_err!(
            d,
            txn.get(table, &[tk("a", 1), t("b")].concat()),
            Error::WrongArity { .. }
        ));
        errors.push(assert_err!(
            d,
            txn.get(table, &[Value::from("a"), Value::I64(1)]),
            Error::WrongType { .. }
        ));
        errors.push(assert_err!(
            d,
            txn.get(table, &[Value::Null, Value::U64(1)]),
            Error::NullInPrimaryKey { .. }
        ));
        errors.push(assert_err!(
            d,
            txn.delete(table, &[Value::from("a"), Value::Null]),
            Error::NullInPrimaryKey { .. }
        ));
        errors.push(assert_err!(
            d,
            txn.delete(table, &t("a")),
            Error::WrongArity { .. }
        ));
        errors.push(assert_err!(
            d,
            txn.update(table, &[Value::U64(1), Value::U64(1)], &[]),
            Error::WrongType { .. }
        ));

        // Assignments: key columns, unknown columns, wrong types; a bad assignment after
        // a good one changes nothing.
        for (changes, what) in [
            (
                vec![(items::SCORE, Value::I64(50)), (items::ID, Value::U64(9))],
                "key column",
            ),
            (
                vec![
                    (items::SCORE, Value::I64(50)),
                    (items::REGION, Value::from("q")),
                ],
                "key column",
            ),
            (
                vec![
                    (items::SCORE, Value::I64(50)),
                    (items::ARITY, Value::U64(9)),
                ],
                "unknown column",
            ),
            (
                vec![(items::SCORE, Value::I64(50)), (usize::MAX, Value::Null)],
                "unknown column",
            ),
            (
                vec![(items::SCORE, Value::I64(50)), (items::NAME, Value::U64(9))],
                "wrong type",
            ),
            (vec![(items::SCORE, Value::F64(50.0))], "wrong type"),
        ] {
            for key in [tk("a", 1), tk("a", 2)] {
                let error = match txn.update(table, &key, &changes) {
                    Err(error) => error,
                    Ok(found) => panic!("{d}: update with a {what} returned Ok({found})"),
                };
                let expected_kind = match what {
                    "key column" => matches!(error, Error::PrimaryKeyUpdate { .. }),
                    "unknown column" => matches!(error, Error::UnknownColumn { .. }),
                    _ => matches!(error, Error::WrongType { .. }),
                };
                assert!(expected_kind, "{d}: update with a {what}: {error:?}");
                errors.push(error);
            }
        }
        errors.push(assert_err!(
            d,
            txn.scan_index(table, "by_nothing", ..).rows(),
            Error::UnknownIndex { .. }
        ));

        // A missing key is not an error.
        assert_eq!(
            txn.update(table, &tk("a", 9), &[(items::SCORE, Value::I64(1))]),
            Ok(false),
            "{d}"
        );
        assert_eq!(txn.update(table, &tk("zz", 1), &[]), Ok(false), "{d}");
        assert_eq!(txn.delete(table, &tk("a", 9)), Ok(false), "{d}");
        assert_eq!(txn.delete(table, &tk("", 0)), Ok(false), "{d}");

        for error in &errors {
            assert!(
                !error.is_retryable(),
                "{d}: misuse {error:?} must not be retryable"
            );
            assert_ne!(error, &Error::TransactionAborted, "{d}");
        }

        // Nothing changed, and the transaction still works.
        let mid = vec![with_score(item("a", 1, 1, "x"), 10), item("a", 2, 2, "y")];
        assert_items(
            &d,
            &txn,
            table,
            &mid,
            &["z", "dup"],
            "after misuse, own view",
        );
        ok!(d, txn.insert(table, &item("a", 3, 3, "z")));
        assert!(
            ok!(
                d,
                txn.update(table, &tk("a", 2), &[(items::NAME, Value::from("w"))])
            ),
            "{d}"
        );
        ok!(d, txn.commit());

        let after = vec![
            with_score(item("a", 1, 1, "x"), 10),
            with_name(item("a", 2, 2, "y"), "w"),
            item("a", 3, 3, "z"),
        ];
        assert_committed_items(&db, table, &after, &["y", "dup"], "after misuse, committed");
        let stats = db.stats();
        assert_eq!(stats.commits, before.commits + 1, "{d}");
        assert_eq!(
            stats.aborts(),
            before.aborts(),
            "{d}: misuse is not an abort"
        );
    }
}

#[test]
fn a_duplicate_key_error_leaves_earlier_writes_in_place() {
    for (db, table) in all_with_items(&[item("a", 1, 1, "x")]) {
        let d = db.design();
        let mut txn = db.begin(Isolation::Snapshot);
        ok!(d, txn.insert(table, &item("b", 1, 5, "new")));
        assert_err!(
            d,
            txn.insert(table, &item("b", 1, 6, "again")),
            Error::DuplicateKey { .. }
        );
        assert_err!(
            d,
            txn.insert(table, &item("a", 1, 6, "again")),
            Error::DuplicateKey { .. }
        );
        ok!(d, txn.commit());
        assert_committed_items(
            &db,
            table,
            &[item("a", 1, 1, "x"), item("b", 1, 5, "new")],
            &["again"],
            "after duplicates",
        );
    }
}

// ----- snapshots -----------------------------------------------------------------------------

#[test]
fn a_transaction_sees_its_snapshot_plus_its_own_writes() {
    let base = vec![
        item("a", 1, 1, "x"),
        item("a", 2, 2, "y"),
        item("a", 3, 3, "z"),
    ];
    for (db, table) in snapshot_with_items(&base) {
        let d = db.design();
        let bystander = db.begin(Isolation::Snapshot);
        let mut writer = db.begin(Isolation::Snapshot);
        assert!(writer.start_ts() >= bystander.start_ts(), "{d}");
        assert_eq!(writer.isolation(), Isolation::Snapshot, "{d}");
        assert!(
            ok!(
                d,
                writer.update(table, &tk("a", 1), &[(items::NAME, Value::from("x2"))])
            ),
            "{d}"
        );
        assert!(ok!(d, writer.delete(table, &tk("a", 2))), "{d}");
        ok!(d, writer.insert(table, &item("a", 4, 4, "w")));
        ok!(d, writer.insert(table, &item("0", 0, 0, "first")));

        let own = vec![
            item("0", 0, 0, "first"),
            with_name(item("a", 1, 1, "x"), "x2"),
            item("a", 3, 3, "z"),
            item("a", 4, 4, "w"),
        ];
        assert_items(&d, &writer, table, &own, &["x", "y"], "writer's own view");
        // Neither an older nor a newer snapshot sees uncommitted writes.
        let during = db.begin(Isolation::Snapshot);
        assert_items(
            &d,
            &bystander,
            table,
            &base,
            &["x2", "w"],
            "older snapshot, writer running",
        );
        assert_items(
            &d,
            &during,
            table,
            &base,
            &["x2", "w"],
            "newer snapshot, writer running",
        );
        ok!(d, writer.commit());

        // Snapshots that began before the commit still do not see it.
        assert_items(
            &d,
            &bystander,
            table,
            &base,
            &["x2", "w"],
            "older snapshot, after commit",
        );
        assert_items(
            &d,
            &during,
            table,
            &base,
            &["x2", "w"],
            "newer snapshot, after commit",
        );
        assert_committed_items(&db, table, &own, &["x", "y"], "snapshot after the commit");
    }
}

#[test]
fn several_transactions_interleave_on_one_thread() {
    let base = vec![item("a", 1, 0, "x"), item("a", 2, 0, "y")];
    for (db, table) in si_with_items(&base) {
        let d = db.design();
        let mut a = db.begin(Isolation::Snapshot);
        let mut b = db.begin(Isolation::Snapshot);
        let c = db.begin(Isolation::Snapshot);
        let serializable = db.begin(Isolation::Serializable);
        assert_eq!(b.isolation(), Isolation::Snapshot, "{d}");
        assert_eq!(serializable.isolation(), Isolation::Serializable, "{d}");
        drop(serializable);
        assert!(
            ok!(
                d,
                a.update(table, &tk("a", 1), &[(items::SCORE, Value::I64(1))])
            ),
            "{d}"
        );
        assert!(
            ok!(
                d,
                b.update(table, &tk("a", 2), &[(items::SCORE, Value::I64(2))])
            ),
            "{d}"
        );
        ok!(d, b.insert(table, &item("b", 1, 2, "from b")));
        let score = |txn: &Transaction<'_>, id| {
            ok!(d, txn.get(table, &tk("a", id))).map(|row| row[items::SCORE].clone())
        };
        assert_eq!(score(&a, 1), Some(Value::I64(1)), "{d}");
        assert_eq!(score(&a, 2), Some(Value::I64(0)), "{d}");
        assert_eq!(score(&b, 1), Some(Value::I64(0)), "{d}");
        assert_eq!(score(&b, 2), Some(Value::I64(2)), "{d}");
        assert_eq!(score(&c, 1), Some(Value::I64(0)), "{d}");
        ok!(d, a.commit());

        let e = db.begin(Isolation::Snapshot);
        assert_eq!(score(&e, 1), Some(Value::I64(1)), "{d}: sees a's commit");
        assert_eq!(
            score(&e, 2),
            Some(Value::I64(0)),
            "{d}: not b's uncommitted write"
        );
        assert_eq!(
            score(&b, 1),
            Some(Value::I64(0)),
            "{d}: b began before a committed"
        );
        assert_eq!(score(&c, 1), Some(Value::I64(0)), "{d}");
        ok!(d, b.commit());

        let f = db.begin(Isolation::Snapshot);
        assert_eq!(
            score(&e, 2),
            Some(Value::I64(0)),
            "{d}: e began before b committed"
        );
        assert_eq!(ok!(d, e.get(table, &tk("b", 1))), None, "{d}");
        assert_items(&d, &c, table, &base, &["from b"], "c, begun before both");
        // Transactions end out of begin order.
        drop(e);
        let expected = vec![
            with_score(item("a", 1, 0, "x"), 1),
            with_score(item("a", 2, 0, "y"), 2),
            item("b", 1, 2, "from b"),
        ];
        assert_items(&d, &f, table, &expected, &[], "f, begun after both");
        ok!(d, c.commit());
        drop(f);
        assert_committed_items(&db, table, &expected, &[], "after all ended");
    }
}

// ----- first updater wins --------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Update,
    Delete,
    Insert,
}

/// Applies `op` to row `("k", id)` with `score`; returns the update/delete result (`true`
/// for an insert).
fn apply(
    txn: &mut Transaction<'_>,
    table: TableId,
    op: Op,
    id: u64,
    score: i64,
) -> verso::Result<bool> {
    match op {
        Op::Update => txn.update(table, &tk("k", id), &[(items::SCORE, Value::I64(score))]),
        Op::Delete => txn.delete(table, &tk("k", id)),
        Op::Insert => txn.insert(table, &item("k", id, score, "k")).map(|()| true),
    }
}

/// What the row looks like after `op` on `before`.
fn after_op(op: Op, id: u64, before: Option<Vec<Value>>, score: i64) -> Option<Vec<Value>> {
    match op {
        Op::Update => before.map(|row| with_score(row, score)),
        Op::Delete => None,
        Op::Insert => Some(item("k", id, score, "k")),
    }
}

/// Every call on a transaction rolled back by a conflict fails with `TransactionAborted`.
fn assert_dead(design: &str, mut txn: Transaction<'_>, table: TableId) {
    let key = tk("k", 1);
    assert_err!(design, txn.get(table, &key), Error::TransactionAborted);
    assert_err!(design, txn.get_row(table, &key), Error::TransactionAborted);
    assert_err!(
        design,
        txn.get_view(table, &key, |_| ()),
        Error::TransactionAborted
    );
    assert_err!(
        design,
        txn.scan(table, ..).rows(),
        Error::TransactionAborted
    );
    assert_err!(
        design,
        txn.scan_index(table, items::BY_NAME, ..).rows(),
        Error::TransactionAborted
    );
    assert_err!(
        design,
        txn.insert(table, &item("fresh", 1, 1, "f")),
        Error::TransactionAborted
    );
    assert_err!(
        design,
        txn.update(table, &key, &[(items::SCORE, Value::I64(0))]),
        Error::TransactionAborted
    );
    assert_err!(design, txn.delete(table, &key), Error::TransactionAborted);
    assert_err!(
        design,
        txn.update_range(
            table,
            KeyRange::prefix(t("k")),
            &[(items::SCORE, Value::I64(0))],
            |_| true
        ),
        Error::TransactionAborted
    );
    assert_err!(
        design,
        txn.prefetch(table, &[&key]),
        Error::TransactionAborted
    );
    // Misuse is reported as aborted too: the transaction is over.
    assert_err!(design, txn.commit(), Error::TransactionAborted);
}

#[test]
fn first_updater_wins_and_the_loser_is_rolled_back() {
    let pairs = [
        (Op::Update, Op::Update),
        (Op::Update, Op::Delete),
        (Op::Delete, Op::Update),
        (Op::Delete, Op::Delete),
        (Op::Insert, Op::Insert),
    ];
    // Whether the winner is still running at the loser's write, or already committed
    // (after the loser began).
    for winner_committed_first in [false, true] {
        for (first, second) in pairs {
            let new_key = first == Op::Insert;
            let base: Vec<Vec<Value>> = if new_key {
                vec![]
            } else {
                vec![item("k", 1, 1, "k")]
            };
            for (db, table) in snapshot_with_items(&base) {
                let d = db.design();
                let case = format!(
                    "{first:?} then {second:?}, winner committed first: {winner_committed_first}"
                );
                commit_rows(
                    &db,
                    table,
                    &[item("other", 1, 1, "o"), item("other", 2, 2, "o")],
                );
                let stats_before = db.stats();
                let mut winner = db.begin(Isolation::Snapshot);
                let mut loser = db.begin(Isolation::Snapshot);
                // The loser wrote other rows first: they must be rolled back with it.
                ok!(d, loser.insert(table, &item("loser", 1, 1, "l")));
                assert!(
                    ok!(
                        d,
                        loser.update(table, &tk("other", 1), &[(items::NAME, Value::from("l"))])
                    ),
                    "{d}"
                );
                assert_eq!(
                    apply(&mut winner, table, first, 1, 100),
                    Ok(true),
                    "{d}: {case}"
                );
                if winner_committed_first {
                    ok!(d, winner.commit());
                    let error = assert_err!(
                        d,
                        apply(&mut loser, table, second, 1, 200),
                        Error::WriteConflict { .. }
                    );
                    assert!(error.is_retryable(), "{d}: {case}");
                } else {
                    let error = assert_err!(
                        d,
                        apply(&mut loser, table, second, 1, 200),
                        Error::WriteConflict { .. }
                    );
                    assert!(error.is_retryable(), "{d}: {case}");
                    // The loser is rolled back at once: another transaction can write the
                    // rows it had written while it is still open.
                    let mut third = db.begin(Isolation::Snapshot);
                    assert!(
                        ok!(
                            d,
                            third.update(table, &tk("other", 1), &[(items::SCORE, Value::I64(7))])
                        ),
                        "{d}: {case}"
                    );
                    ok!(d, third.commit());
                    ok!(d, winner.commit());
                }
                assert_dead(&d, loser, table);

                let other1 = if winner_committed_first {
                    item("other", 1, 1, "o")
                } else {
                    with_score(item("other", 1, 1, "o"), 7)
                };
                let mut expected = vec![other1, item("other", 2, 2, "o")];
                expected.extend(after_op(first, 1, base.first().cloned(), 100));
                assert_committed_items(&db, table, &expected, &["l"], &case);
                let stats = db.stats();
                assert_eq!(
                    stats.aborts_write_conflict,
                    stats_before.aborts_write_conflict + 1,
                    "{d}: {case}"
                );
                assert_eq!(
                    stats.aborts_by_user, stats_before.aborts_by_user,
                    "{d}: {case}: a conflict is not a user abort"
                );
            }
        }
    }
}

#[test]
fn writing_a_row_committed_after_the_snapshot_conflicts() {
    // The competitor finished before the write: still a conflict, since the snapshot
    // cannot see its version.
    for (db, table) in snapshot_with_items(&[item("k", 1, 1, "k")]) {
        let d = db.design();
        let mut old = db.begin(Isolation::Snapshot);
        let mut newer = db.begin(Isolation::Snapshot);
        assert!(
            ok!(
                d,
                newer.update(table, &tk("k", 1), &[(items::SCORE, Value::I64(2))])
            ),
            "{d}"
        );
        ok!(d, newer.commit());
        db.collect_garbage();
        // The old snapshot still reads the version it began with.
        assert_eq!(
            ok!(d, old.get(table, &tk("k", 1))),
            Some(item("k", 1, 1, "k")),
            "{d}"
        );
        let error = assert_err!(
            d,
            old.update(table, &tk("k", 1), &[(items::NAME, Value::from("lost"))]),
            Error::WriteConflict { .. }
        );
        assert!(error.is_retryable(), "{d}");
        assert_dead(&d, old, table);
        assert_committed_items(
            &db,
            table,
            &[with_score(item("k", 1, 1, "k"), 2)],
            &["lost"],
            "after conflict",
        );
    }
    // A delete committed after the snapshot: an update is a conflict, not "not found".
    for (db, table) in snapshot_with_items(&[item("k", 1, 1, "k")]) {
        let d = db.design();
        let mut old = db.begin(Isolation::Snapshot);
        let mut deleter = db.begin(Isolation::Snapshot);
        assert!(ok!(d, deleter.delete(table, &tk("k", 1))), "{d}");
        ok!(d, deleter.commit());
        assert_err!(
            d,
            old.update(table, &tk("k", 1), &[(items::SCORE, Value::I64(5))]),
            Error::WriteConflict { .. }
        );
        drop(old);
        assert_committed_items(&db, table, &[], &["k"], "after delete conflict");
    }
    // An insert committed after the snapshot: the key is invisible but taken.
    for (db, table) in snapshot_with_items(&[]) {
        let d = db.design();
        let mut old = db.begin(Isolation::Snapshot);
        let mut inserter = db.begin(Isolation::Snapshot);
        ok!(d, inserter.insert(table, &item("k", 1, 1, "k")));
        ok!(d, inserter.commit());
        assert_eq!(ok!(d, old.get(table, &tk("k", 1))), None, "{d}");
        assert_err!(
            d,
            old.insert(table, &item("k", 1, 9, "mine")),
            Error::WriteConflict { .. }
        );
        drop(old);
        assert_committed_items(
            &db,
            table,
            &[item("k", 1, 1, "k")],
            &["mine"],
            "after insert conflict",
        );
    }
}

#[test]
fn a_writer_can_write_after_its_competitor_aborted() {
    let pairs = [
        (Op::Update, Op::Update),
        (Op::Update, Op::Delete),
        (Op::Delete, Op::Delete),
        (Op::Delete, Op::Update),
        (Op::Insert, Op::Insert),
    ];
    for how in ["abort", "drop"] {
        for (first, second) in pairs {
            let base: Vec<Vec<Value>> = if first == Op::Insert {
                vec![]
            } else {
                vec![item("k", 1, 1, "k")]
            };
            for (db, table) in all_with_items(&base) {
                let d = db.design();
                let case = format!("{first:?} {how}ed, then {second:?}");
                let mut competitor = db.begin(Isolation::Snapshot);
                let mut writer = db.begin(Isolation::Snapshot);
                assert_eq!(
                    apply(&mut competitor, table, first, 1, 100),
                    Ok(true),
                    "{d}: {case}"
                );
                if how == "abort" {
                    competitor.abort();
                } else {
                    drop(competitor);
                }
                assert_eq!(
                    apply(&mut writer, table, second, 1, 200),
                    Ok(true),
                    "{d}: {case}"
                );
                ok!(d, writer.commit());
                let expected: Vec<Vec<Value>> = after_op(second, 1, base.first().cloned(), 200)
                    .into_iter()
                    .collect();
                assert_committed_items(&db, table, &expected, &[], &case);
            }
        }
    }
}

// ----- own writes ----------------------------------------------------------------------------

/// A sequence of writes one transaction makes to row `("k", 1)`, with the row it leaves.
struct Sequence {
    name: &'static str,
    base: Option<Vec<Value>>,
    steps: Vec<(Op, i64, &'static str)>,
    result: Option<Vec<Value>>,
}

fn own_write_sequences() -> Vec<Sequence> {
    let k = |score, name| item("k", 1, score, name);
    vec![
        Sequence {
            name: "update twice",
            base: Some(k(1, "a")),
            steps: vec![(Op::Update, 2, "b"), (Op::Update, 3, "c")],
            result: Some(with_name(with_score(k(1, "a"), 3), "c")),
        },
        Sequence {
            name: "delete then re-insert",
            base: Some(k(1, "a")),
            steps: vec![(Op::Delete, 0, ""), (Op::Insert, 5, "b")],
            result: Some(k(5, "b")),
        },
        Sequence {
            name: "delete, re-insert, update",
            base: Some(k(1, "a")),
            steps: vec![
                (Op::Delete, 0, ""),
                (Op::Insert, 5, "b"),
                (Op::Update, 6, "c"),
            ],
            result: Some(with_name(with_score(k(5, "b"), 6), "c")),
        },
        Sequence {
            name: "update then delete",
            base: Some(k(1, "a")),
            steps: vec![(Op::Update, 2, "b"), (Op::Delete, 0, "")],
            result: None,
        },
        Sequence {
            name: "insert then delete",
            base: None,
            steps: vec![(Op::Insert, 2, "b"), (Op::Delete, 0, "")],
            result: None,
        },
        Sequence {
            name: "insert then update",
            base: None,
            steps: vec![(Op::Insert, 2, "b"), (Op::Update, 3, "c")],
            result: Some(with_name(with_score(k(2, "b"), 3), "c")),
        },
        Sequence {
            name: "insert, delete, insert",
            base: None,
            steps: vec![
                (Op::Insert, 2, "b"),
                (Op::Delete, 0, ""),
                (Op::Insert, 4, "c"),
            ],
            result: Some(k(4, "c")),
        },
    ]
}

/// Runs one step of a sequence in `txn`, checking the transaction's own view after it.
fn run_step(
    design: &str,
    txn: &mut Transaction<'_>,
    table: TableId,
    step: (Op, i64, &str),
    context: &str,
) {
    let (op, score, name) = step;
    let key = tk("k", 1);
    match op {
        Op::Update => {
            let changes = [
                (items::SCORE, Value::I64(score)),
                (items::NAME, Value::from(name)),
            ];
            assert_eq!(
                txn.update(table, &key, &changes),
                Ok(true),
                "{design}: {context}"
            );
        }
        Op::Delete => {
            assert_eq!(txn.delete(table, &key), Ok(true), "{design}: {context}");
            // Its own delete hides the row from its own later writes too.
            assert_eq!(txn.delete(table, &key), Ok(false), "{design}: {context}");
            assert_eq!(
                txn.update(table, &key, &[(items::TAG, Value::Null)]),
                Ok(false),
                "{design}: {context}"
            );
        }
        Op::Insert => {
            assert_eq!(
                txn.insert(table, &item("k", 1, score, name)),
                Ok(()),
                "{design}: {context}"
            );
            assert_err!(
                design,
                txn.insert(table, &item("k", 1, 0, "dup")),
                Error::DuplicateKey { .. }
            );
        }
    }
}

#[test]
fn own_write_sequences_commit_their_last_state() {
    let names = ["a", "b", "c", "dup"];
    for sequence in own_write_sequences() {
        let base: Vec<Vec<Value>> = sequence.base.iter().cloned().collect();
        for (db, table) in snapshot_with_items(&base) {
            let d = db.design();
            let bystander = db.begin(Isolation::Snapshot);
            let mut txn = db.begin(Isolation::Snapshot);
            let mut state = sequence.base.clone();
            for (i, &step) in sequence.steps.iter().enumerate() {
                let context = format!("{}: step {i}", sequence.name);
                run_step(&d, &mut txn, table, step, &context);
                state = after_op(step.0, 1, state, step.1)
                    .map(|row| with_name(row, if step.0 == Op::Delete { "" } else { step.2 }));
                let own: Vec<Vec<Value>> = state.iter().cloned().collect();
                assert_items(&d, &txn, table, &own, &names, &context);
                assert_items(
                    &d,
                    &bystander,
                    table,
                    &base,
                    &names,
                    &format!("{context}, bystander"),
                );
            }
            assert_eq!(
                state, sequence.result,
                "{d}: {}: the test's model",
                sequence.name
            );
            ok!(d, txn.commit());
            let result: Vec<Vec<Value>> = sequence.result.iter().cloned().collect();
            assert_committed_items(
                &db,
                table,
                &result,
                &names,
                &format!("{}: committed", sequence.name),
            );
            assert_items(
                &d,
                &bystander,
                table,
                &base,
                &names,
                &format!("{}: bystander after commit", sequence.name),
            );
            drop(bystander);
            db.collect_garbage();
            assert_committed_items(
                &db,
                table,
                &result,
                &names,
                &format!("{}: after collection", sequence.name),
            );
            assert_collected_everything(&db, &format!("{d}: {}", sequence.name));
        }
    }
}

#[test]
fn own_write_sequences_leave_no_trace_when_aborted_or_dropped() {
    let names = ["a", "b", "c", "dup"];
    for how in ["abort", "drop", "conflict"] {
        for sequence in own_write_sequences() {
            let base: Vec<Vec<Value>> = sequence.base.iter().cloned().collect();
            for (db, table) in snapshot_with_items(&base) {
                let d = db.design();
                let context = format!("{} then {how}", sequence.name);
                commit_rows(&db, table, &[item("z", 1, 1, "z")]);
                let mut expected = base.clone();
                expected.push(item("z", 1, 1, "z"));
                let mut txn = db.begin(Isolation::Snapshot);
                for &step in &sequence.steps {
                    run_step(&d, &mut txn, table, step, &context);
                }
                match how {
                    "abort" => txn.abort(),
                    "drop" => drop(txn),
                    _ => {
                        // A competitor takes row z; writing it rolls txn back.
                        let mut competitor = db.begin(Isolation::Snapshot);
                        assert!(
                            ok!(
                                d,
                                competitor.update(
                                    table,
                                    &tk("z", 1),
                                    &[(items::TAG, Value::U64(1))]
                                )
                            ),
                            "{d}"
                        );
                        assert_err!(
                            d,
                            txn.update(table, &tk("z", 1), &[(items::TAG, Value::U64(2))]),
                            Error::WriteConflict { .. }
                        );
                        competitor.abort();
                        assert_dead(&d, txn, table);
                    }
                }
                assert_committed_items(&db, table, &expected, &names, &context);
                db.collect_garbage();
                assert_committed_items(
                    &db,
                    table,
                    &expected,
                    &names,
                    &format!("{context}, collected"),
                );
                assert_eq!(db.stats().live_versions(), 0, "{d}: {context}");
                // The key is free (or still taken) exactly as before.
                let mut next = db.begin(Isolation::Snapshot);
                if sequence.base.is_some() {
                    assert_err!(
                        d,
                        next.insert(table, &item("k", 1, 9, "n")),
                        Error::DuplicateKey { .. }
                    );
                    assert_eq!(
                        next.update(table, &tk("k", 1), &[(items::NAME, Value::from("n"))]),
                        Ok(true),
                        "{d}: {context}"
                    );
                } else {
                    assert_eq!(
                        next.update(table, &tk("k", 1), &[(items::NAME, Value::from("n"))]),
                        Ok(false),
                        "{d}: {context}"
                    );
                    assert_eq!(
                        next.insert(table, &item("k", 1, 9, "n")),
                        Ok(()),
                        "{d}: {context}"
                    );
                }
                ok!(d, next.commit());
            }
        }
    }
}

// ----- delete and re-insert ------------------------------------------------------------------

#[test]
fn delete_then_reinsert_in_later_transactions_keeps_old_snapshots_intact() {
    for (db, table) in snapshot_with_items(&[item("k", 1, 1, "old"), item("k", 2, 2, "keep")]) {
        let d = db.design();
        let names = ["old", "new", "keep"];
        let original = vec![item("k", 1, 1, "old"), item("k", 2, 2, "keep")];
        let before_delete = db.begin(Isolation::Snapshot);
        let mut deleter = db.begin(Isolation::Snapshot);
        assert!(ok!(d, deleter.delete(table, &tk("k", 1))), "{d}");
        ok!(d, deleter.commit());
        let after_delete = db.begin(Isolation::Snapshot);
        let mut inserter = db.begin(Isolation::Snapshot);
        ok!(d, inserter.insert(table, &item("k", 1, 7, "new")));
        ok!(d, inserter.commit());
        let after_insert = db.begin(Isolation::Snapshot);
        let deleted = vec![item("k", 2, 2, "keep")];
        let reinserted = vec![item("k", 1, 7, "new"), item("k", 2, 2, "keep")];

        // Churn the other row so that collectors get to run.
        for i in 0..50 {
            let mut w = db.begin(Isolation::Snapshot);
            assert!(
                ok!(
                    d,
                    w.update(table, &tk("k", 2), &[(items::TAG, Value::U64(i))])
                ),
                "{d}"
            );
            ok!(d, w.commit());
        }
        assert_items(
            &d,
            &before_delete,
            table,
            &original,
            &names,
            "before the delete",
        );
        assert_items(
            &d,
            &after_delete,
            table,
            &deleted,
            &names,
            "between delete and insert",
        );
        assert_items(
            &d,
            &after_insert,
            table,
            &reinserted,
            &names,
            "after the insert",
        );
        drop(before_delete);
        assert_items(
            &d,
            &after_delete,
            table,
            &deleted,
            &names,
            "between, after the oldest ended",
        );
        drop(after_delete);
        drop(after_insert);
        db.collect_garbage();
        let mut now = reinserted.clone();
        now[1][items::TAG] = Value::U64(49);
        assert_committed_items(&db, table, &now, &names, "after collection");
        assert_collected_everything(&db, &d);
        assert_eq!(db.primary_index_entries(table), Ok(2), "{d}");
    }
}

// ----- secondary indexes ---------------------------------------------------------------------

#[test]
fn scan_index_by_prefix_and_range_with_duplicate_keys() {
    let mut rows = vec![
        item("c", 1, 5, "x"),
        item("a", 2, 5, "x"),
        item("b", 1, -2, "y"),
        item("a", 1, 9, "x"),
        item("d", 1, 0, "yy"),
    ];
    let mut nulls = item("e", 1, 3, "n");
    nulls[items::NAME] = Value::Null;
    nulls[items::WEIGHT] = Value::Null;
    rows.push(nulls.clone());
    for (db, table) in all_with_items(&rows) {
        let d = db.design();
        let txn = db.begin(Isolation::Snapshot);
        let by_name =
            |range: Range| keys_of(&ok!(d, txn.scan_index(table, items::BY_NAME, range).rows()));
        let by_score = |range: Range| {
            keys_of(&ok!(
                d,
                txn.scan_index(table, items::BY_SCORE, range).rows()
            ))
        };
        let x = vec![Value::from("x")];
        let y = vec![Value::from("y")];
        // Equality: non-unique keys come in primary-key order.
        assert_eq!(
            by_name((Included(x.clone()), Included(x.clone()))),
            keys(&[("a", 1), ("a", 2), ("c", 1)]),
            "{d}"
        );
        assert_eq!(
            by_name((Included(y.clone()), Included(y.clone()))),
            keys(&[("b", 1)]),
            "{d}: y is not a prefix of yy"
        );
        assert_eq!(
            by_name((Included(vec![Value::Null]), Included(vec![Value::Null]))),
            keys(&[("e", 1)]),
            "{d}: NULL"
        );
        assert_eq!(
            by_name((Unbounded, Unbounded)),
            keys(&[("e", 1), ("a", 1), ("a", 2), ("c", 1), ("b", 1), ("d", 1)]),
            "{d}: NULL first"
        );
        assert_eq!(
            by_name((Excluded(x.clone()), Unbounded)),
            keys(&[("b", 1), ("d", 1)]),
            "{d}"
        );
        assert_eq!(
            by_name((Unbounded, Excluded(x.clone()))),
            keys(&[("e", 1)]),
            "{d}"
        );
        assert_eq!(
            by_name((Included(vec![Value::from("w")]), Excluded(y.clone()))),
            keys(&[("a", 1), ("a", 2), ("c", 1)]),
            "{d}"
        );
        assert_eq!(
            by_name((Included(vec![Value::from("z")]), Unbounded)),
            keys(&[]),
            "{d}"
        );
        // Ranges over the first column of a two-column index, and full-key equality.
        let s = |v: i64| vec![Value::I64(v)];
        assert_eq!(
            by_score((Included(s(0)), Included(s(5)))),
            keys(&[("d", 1), ("e", 1), ("a", 2), ("c", 1)]),
            "{d}"
        );
        assert_eq!(
            by_score((Excluded(s(0)), Excluded(s(9)))),
            keys(&[("e", 1), ("a", 2), ("c", 1)]),
            "{d}"
        );
        assert_eq!(
            by_score((Unbounded, Excluded(s(0)))),
            keys(&[("b", 1)]),
            "{d}"
        );
        let full = vec![Value::I64(5), Value::F64(1.25)];
        assert_eq!(
            by_score((Included(full.clone()), Included(full))),
            keys(&[("a", 2), ("c", 1)]),
            "{d}"
        );
        let null_weight = vec![Value::I64(3), Value::Null];
        assert_eq!(
            by_score((Included(null_weight.clone()), Included(null_weight))),
            keys(&[("e", 1)]),
            "{d}"
        );
        assert_eq!(by_score((Included(s(6)), Excluded(s(6)))), keys(&[]), "{d}");
        assert_eq!(
            by_score((Included(s(9)), Included(s(0)))),
            keys(&[]),
            "{d}: inverted"
        );
        // scan_index_view stops early.
        let mut seen = 0;
        ok!(
            d,
            txn.scan_index_view(table, items::BY_NAME, KeyRange::prefix(x.clone()), |_| {
                seen += 1;
                false
            })
        );
        assert_eq!(seen, 1, "{d}");
        // Bad index keys.
        assert_err!(
            d,
            txn.scan_index(table, "nope", ..).rows(),
            Error::UnknownIndex { .. }
        );
        assert_err!(
            d,
            txn.scan_index(
                table,
                items::BY_NAME,
                vec![Value::from("x"), Value::from("y")]..
            )
            .rows(),
            Error::WrongArity { .. }
        );
        assert_err!(
            d,
            txn.scan_index(table, items::BY_NAME, vec![Value::U64(1)]..)
                .rows(),
            Error::WrongType { .. }
        );
        assert_err!(
            d,
            txn.scan_index(table, items::BY_SCORE, ..vec![Value::I64(1), Value::I64(1)])
                .rows(),
            Error::WrongType { .. }
        );
        assert_items(&d, &txn, table, &rows, &["w", "z"], "index contents");
    }
}

#[test]
fn updating_an_indexed_column_moves_the_row_per_snapshot() {
    for (db, table) in snapshot_with_items(&[item("k", 1, 1, "x"), item("k", 2, 2, "x")]) {
        let d = db.design();
        let names = ["x", "y", "z"];
        let v0 = vec![item("k", 1, 1, "x"), item("k", 2, 2, "x")];
        let s0 = db.begin(Isolation::Snapshot);
        let mut w = db.begin(Isolation::Snapshot);
        assert!(
            ok!(
                d,
                w.update(
                    table,
                    &tk("k", 1),
                    &[
                        (items::NAME, Value::from("y")),
                        (items::SCORE, Value::I64(10))
                    ]
                )
            ),
            "{d}"
        );
        let v1 = vec![with_score(item("k", 1, 1, "y"), 10), item("k", 2, 2, "x")];
        assert_items(&d, &w, table, &v1, &names, "writer before commit");
        assert_items(&d, &s0, table, &v0, &names, "s0 while the writer runs");
        ok!(d, w.commit());
        let s1 = db.begin(Isolation::Snapshot);
        // Move it on, and back to its first key (the old entry still exists for s0).
        let mut w = db.begin(Isolation::Snapshot);
        assert!(
            ok!(
                d,
                w.update(table, &tk("k", 1), &[(items::NAME, Value::from("z"))])
            ),
            "{d}"
        );
        ok!(d, w.commit());
        let s2 = db.begin(Isolation::Snapshot);
        let v2 = vec![with_score(item("k", 1, 1, "z"), 10), item("k", 2, 2, "x")];
        let mut w = db.begin(Isolation::Snapshot);
        assert!(
            ok!(
                d,
                w.update(
                    table,
                    &tk("k", 1),
                    &[
                        (items::NAME, Value::from("x")),
                        (items::SCORE, Value::I64(1))
                    ]
                )
            ),
            "{d}"
        );
        ok!(d, w.commit());
        let s3 = db.begin(Isolation::Snapshot);
        let v3 = v0.clone();

        assert_items(&d, &s0, table, &v0, &names, "s0");
        assert_items(&d, &s1, table, &v1, &names, "s1");
        assert_items(&d, &s2, table, &v2, &names, "s2");
        assert_items(&d, &s3, table, &v3, &names, "s3");
        drop(s1);
        assert_items(&d, &s0, table, &v0, &names, "s0 after s1 ended");
        assert_items(&d, &s2, table, &v2, &names, "s2 after s1 ended");
        drop(s0);
        drop(s2);
        drop(s3);
        db.collect_garbage();
        assert_committed_items(&db, table, &v3, &names, "after collection");
        assert_collected_everything(&db, &d);
        // Stale entries (y, z) are gone or ignored: a row inserted under them shows once.
        commit_rows(&db, table, &[item("k", 3, 3, "y"), item("k", 4, 4, "z")]);
        let v4 = [v3.clone(), vec![item("k", 3, 3, "y"), item("k", 4, 4, "z")]].concat();
        assert_committed_items(&db, table, &v4, &names, "new rows under old keys");
    }
}

#[test]
fn deleted_rows_are_not_returned_by_index_scans() {
    for (db, table) in snapshot_with_items(&[
        item("k", 1, 1, "x"),
        item("k", 2, 2, "x"),
        item("k", 3, 3, "y"),
    ]) {
        let d = db.design();
        let names = ["x", "y"];
        let old = db.begin(Isolation::Snapshot);
        let mut w = db.begin(Isolation::Snapshot);
        assert!(ok!(d, w.delete(table, &tk("k", 1))), "{d}");
        assert!(ok!(d, w.delete(table, &tk("k", 3))), "{d}");
        let left = vec![item("k", 2, 2, "x")];
        assert_items(&d, &w, table, &left, &names, "the deleter's own view");
        ok!(d, w.commit());
        assert_committed_items(&db, table, &left, &names, "after the delete");
        assert_items(
            &d,
            &old,
            table,
            &[
                item("k", 1, 1, "x"),
                item("k", 2, 2, "x"),
                item("k", 3, 3, "y"),
            ],
            &names,
            "old snapshot",
        );
        drop(old);
        db.collect_garbage();
        assert_committed_items(&db, table, &left, &names, "after collection");
        assert_eq!(
            db.primary_index_entries(table),
            Ok(if_collected(&db, 1, 3)),
            "{d}: deleted rows are reclaimed (kept by 'none')"
        );
    }
}

/// Many snapshots open at once, each on a different version of a row whose indexed and
/// unindexed columns change: pruning in between must not change what any of them reads.
#[test]
fn every_open_snapshot_keeps_its_version_while_the_row_changes() {
    const VERSIONS: i64 = 40;
    for (db, table) in snapshot_with_items(&[item("k", 1, 0, "n0"), item("k", 2, 0, "still")]) {
        let d = db.design();
        let version = |i: i64| {
            let mut row = item("k", 1, i, &format!("n{}", i % 7));
            if i % 3 == 0 {
                row[items::BLOB] = Value::Null;
            }
            row
        };
        let mut snapshots = Vec::new();
        for i in 1..=VERSIONS {
            snapshots.push((i - 1, db.begin(Isolation::Snapshot)));
            let mut w = db.begin(Isolation::Snapshot);
            let row = version(i);
            let changes: Vec<(usize, Value)> =
                [items::SCORE, items::WEIGHT, items::NAME, items::BLOB]
                    .into_iter()
                    .filter(|&c| (c + i as usize) % 2 == 0 || c == items::SCORE)
                    .map(|c| (c, row[c].clone()))
                    .collect();
            // Apply only some columns per commit, then the rest in a second commit, so
            // records with different column masks pile up.
            assert!(ok!(d, w.update(table, &tk("k", 1), &changes)), "{d}");
            ok!(d, w.commit());
            let mut w = db.begin(Isolation::Snapshot);
            let all: Vec<(usize, Value)> = [items::WEIGHT, items::NAME, items::BLOB]
                .into_iter()
                .map(|c| (c, row[c].clone()))
                .collect();
            assert!(ok!(d, w.update(table, &tk("k", 1), &all)), "{d}");
            ok!(d, w.commit());
            // End every third snapshot early, so the active list has holes.
            if i % 3 == 0 {
                snapshots.remove(snapshots.len() / 2);
            }
        }
        let names: Vec<String> = (0..7).map(|i| format!("n{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        for (i, snapshot) in &snapshots {
            let expected = vec![
                if *i == 0 {
                    item("k", 1, 0, "n0")
                } else {
                    version(*i)
                },
                item("k", 2, 0, "still"),
            ];
            assert_items(
                &d,
                snapshot,
                table,
                &expected,
                &names,
                &format!("snapshot of version {i}"),
            );
        }
        drop(snapshots);
        db.collect_garbage();
        assert_committed_items(
            &db,
            table,
            &[version(VERSIONS), item("k", 2, 0, "still")],
            &names,
            "after all ended",
        );
        assert_collected_everything(&db, &d);
        assert_eq!(
            db.version_chain_length(table, &tk("k", 1)),
            Ok(Some(if_collected(&db, 0, 80))),
            "{d}"
        );
    }
}

// ----- stats ---------------------------------------------------------------------------------

#[test]
fn stats_count_commits_aborts_and_versions() {
    for (db, table) in snapshot_with_items(&[]) {
        let d = db.design();
        let s0 = db.stats();

        let mut txn = db.begin(Isolation::Snapshot);
        for i in 0..3 {
            ok!(d, txn.insert(table, &item("k", i, 0, "x")));
        }
        ok!(d, txn.commit());
        let s1 = db.stats();
        assert_eq!(s1.commits, s0.commits + 1, "{d}");
        assert_eq!(s1.versions_created, s0.versions_created + 3, "{d}");
        assert_eq!(s1.transactions_begun, s0.transactions_begun + 1, "{d}");

        // Two rows, each written twice.
        let mut txn = db.begin(Isolation::Snapshot);
        for _ in 0..2 {
            for i in 0..2 {
                assert!(
                    ok!(
                        d,
                        txn.update(table, &tk("k", i), &[(items::SCORE, Value::I64(5))])
                    ),
                    "{d}"
                );
            }
        }
        ok!(d, txn.commit());
        let s2 = db.stats();
        assert_eq!(s2.commits, s1.commits + 1, "{d}");
        // At least one record per row written, at most one per write (the delta storage
        // keeps one record per row per transaction).
        let created = s2.versions_created - s1.versions_created;
        assert!(
            (2..=4).contains(&created),
            "{d}: {created} records for 4 writes"
        );

        // Read-only commit, user abort, drop, a conflict.
        let reader = db.begin(Isolation::Snapshot);
        assert_eq!(ok!(d, reader.scan(table, ..).rows()).len(), 3, "{d}");
        ok!(d, reader.commit());
        let mut aborted = db.begin(Isolation::Snapshot);
        assert!(ok!(d, aborted.delete(table, &tk("k", 0))), "{d}");
        aborted.abort();
        let dropped = db.begin(Isolation::Snapshot);
        drop(dropped);
        let mut winner = db.begin(Isolation::Snapshot);
        let mut loser = db.begin(Isolation::Snapshot);
        assert!(
            ok!(
                d,
                winner.update(table, &tk("k", 2), &[(items::SCORE, Value::I64(1))])
            ),
            "{d}"
        );
        assert_err!(
            d,
            loser.update(table, &tk("k", 2), &[(items::SCORE, Value::I64(2))]),
            Error::WriteConflict { .. }
        );
        drop(loser);
        ok!(d, winner.commit());
        let s3 = db.stats();
        assert_eq!(s3.commits, s2.commits + 1, "{d}");
        assert_eq!(s3.read_only_commits, s2.read_only_commits + 1, "{d}");
        assert_eq!(s3.aborts_by_user, s2.aborts_by_user + 2, "{d}");
        assert_eq!(
            s3.aborts_write_conflict,
            s2.aborts_write_conflict + 1,
            "{d}"
        );
        assert_eq!(s3.aborts_serialization, s2.aborts_serialization, "{d}");
        assert_eq!(s3.aborts(), s2.aborts() + 3, "{d}");
        assert_eq!(s3.transactions_begun, s2.transactions_begun + 5, "{d}");
        // The aborted delete's record was created and rolled back.
        assert_eq!(s3.versions_created, s2.versions_created + 2, "{d}");
        assert_eq!(s3.versions_rolled_back, s2.versions_rolled_back + 1, "{d}");

        // With nothing open, everything is collectable.
        db.collect_garbage();
        let s4 = db.stats();
        assert_collected_everything(&db, &d);
        if common::collects(&db) {
            assert_eq!(s4.live_version_bytes(), 0, "{d}: {s4:?}");
        }
        assert!(s4.versions_created >= 6, "{d}");

        // Counters only grow.
        for (a, b) in [(&s0, &s1), (&s1, &s2), (&s2, &s3), (&s3, &s4)] {
            assert!(
                b.commits >= a.commits && b.versions_created >= a.versions_created,
                "{d}"
            );
            assert!(
                b.versions_reclaimed + b.versions_pruned_eagerly
                    >= a.versions_reclaimed + a.versions_pruned_eagerly,
                "{d}"
            );
        }
    }
}

#[test]
fn live_versions_return_to_zero_after_a_reader_holds_them() {
    for (db, table) in snapshot_with_items(&[item("k", 1, 0, "x")]) {
        let d = db.design();
        let reader = db.begin(Isolation::Snapshot);
        for i in 1..=20 {
            let mut w = db.begin(Isolation::Snapshot);
            assert!(
                ok!(
                    d,
                    w.update(
                        table,
                        &tk("k", 1),
                        &[
                            (items::SCORE, Value::I64(i)),
                            (items::NAME, Value::from(format!("v{i}")))
                        ]
                    )
                ),
                "{d}"
            );
            ok!(d, w.commit());
        }
        db.collect_garbage();
        assert!(
            db.stats().live_versions() >= 1,
            "{d}: the reader needs the original version"
        );
        assert_eq!(
            ok!(d, reader.get(table, &tk("k", 1))),
            Some(item("k", 1, 0, "x")),
            "{d}"
        );
        drop(reader);
        db.collect_garbage();
        assert_collected_everything(&db, &d);
        assert_eq!(
            db.version_chain_length(table, &tk("k", 1)),
            Ok(Some(if_collected(&db, 0, 20))),
            "{d}"
        );
        assert_eq!(
            index_rows(&db, table, items::BY_NAME, &[Value::from("v20")]).len(),
            1,
            "{d}"
        );
        assert!(
            index_rows(&db, table, items::BY_NAME, &[Value::from("x")]).is_empty(),
            "{d}"
        );
    }
}

// ----- threads -------------------------------------------------------------------------------

fn assert_send_sync_clone<T: Send + Sync + Clone + 'static>() {}

#[test]
fn database_is_send_sync_clone() {
    assert_send_sync_clone::<Database>();
    assert_send_sync_clone::<verso::Options>();
    assert_send_sync_clone::<TableId>();
    assert_send_sync_clone::<Value>();
    assert_send_sync_clone::<Error>();
    for (db, table) in all_with_items(&[]) {
        let d = db.design();
        let clone = db.clone();
        commit_rows(&clone, table, &[item("k", 1, 1, "x")]);
        assert_eq!(
            all_rows(&db, table),
            vec![item("k", 1, 1, "x")],
            "{d}: clones share data"
        );
        assert_eq!(clone.design(), d);
        assert_eq!(clone.options(), db.options());
    }
}

#[test]
fn one_transaction_per_thread_with_scoped_threads() {
    const THREADS: u64 = 4;
    const ROWS_PER_THREAD: u64 = 40;
    for (db, table) in snapshot_with_items(&[item("counter", 0, 0, "c")]) {
        let d = db.design();
        let conflicts = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let db = db.clone();
                    let d = d.clone();
                    scope.spawn(move || {
                        let mut conflicts = 0u64;
                        for i in 0..ROWS_PER_THREAD {
                            // Each thread's own rows never conflict.
                            let mut txn = db.begin(Isolation::Snapshot);
                            ok!(
                                d,
                                txn.insert(table, &item(&format!("t{thread}"), i, i as i64, "t"))
                            );
                            ok!(d, txn.commit());
                            // The shared counter does; retry until the increment lands.
                            loop {
                                let mut txn = db.begin(Isolation::Snapshot);
                                let row =
                                    ok!(d, txn.get(table, &tk("counter", 0))).expect("counter row");
                                let n = row[items::SCORE].as_i64().expect("score");
                                match txn.update(
                                    table,
                                    &tk("counter", 0),
                                    &[(items::SCORE, Value::I64(n + 1))],
                                ) {
                                    Ok(found) => {
                                        assert!(found, "{d}");
                                        ok!(d, txn.commit());
                                        break;
                                    }
                                    Err(error) => {
                                        assert!(error.is_retryable(), "{d}: {error}");
                                        assert_err!(d, txn.commit(), Error::TransactionAborted);
                                        conflicts += 1;
                                    }
                                }
                            }
                        }
                        conflicts
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .sum::<u64>()
        });
        let rows = all_rows(&db, table);
        assert_eq!(rows.len() as u64, 1 + THREADS * ROWS_PER_THREAD, "{d}");
        let counter = rows
            .iter()
            .find(|r| r[items::REGION] == Value::from("counter"))
            .expect("counter");
        assert_eq!(
            counter[items::SCORE],
            Value::I64((THREADS * ROWS_PER_THREAD) as i64),
            "{d}: lost update"
        );
        let stats = db.stats();
        assert_eq!(stats.aborts_write_conflict, conflicts, "{d}");
        assert_eq!(stats.commits, 1 + 2 * THREADS * ROWS_PER_THREAD, "{d}");
        db.collect_garbage();
        assert_collected_everything(&db, &d);
    }
}

// ----- regressions ---------------------------------------------------------------------------

fn named_rows(db: &Database, table: TableId, name: &str) -> Vec<Vec<Value>> {
    index_rows(db, table, "by_name", &[Value::from(name)])
}

/// A transaction that overwrites an indexed column of its own uncommitted version twice
/// leaves the index entry of the middle value behind after its rollback; the row is buried,
/// and a later row with the same primary key and that value is then missing from the index
/// (its entry cannot be added over the stale one).
#[test]
fn regression_rolled_back_own_overwrite_leaves_an_index_entry_that_hides_a_new_row() {
    for db in all_databases() {
        let d = db.design();
        let table = common::create_named(&db);
        let mut txn = db.begin(Isolation::Snapshot);
        ok!(d, txn.insert(table, &[Value::U64(1), Value::from("b")]));
        assert!(
            ok!(
                d,
                txn.update(table, &[Value::U64(1)], &[(1, Value::from("c"))])
            ),
            "{d}"
        );
        assert!(
            ok!(
                d,
                txn.update(table, &[Value::U64(1)], &[(1, Value::from("d"))])
            ),
            "{d}"
        );
        txn.abort();
        let row = vec![Value::U64(1), Value::from("c")];
        commit_rows(&db, table, std::slice::from_ref(&row));
        assert_eq!(all_rows(&db, table), vec![row.clone()], "{d}");
        assert_eq!(
            named_rows(&db, table, "c"),
            vec![row],
            "{d}: scan_index misses the row"
        );
    }
}

/// The same stale entry, left by a committed transaction that inserted a row and then
/// changed its indexed column: after the row is deleted and collected, re-inserting it
/// with the first value leaves it out of the index.
#[test]
fn regression_committed_own_overwrite_leaves_an_index_entry_that_hides_a_reinserted_row() {
    for db in all_databases() {
        let d = db.design();
        let table = common::create_named(&db);
        let mut txn = db.begin(Isolation::Snapshot);
        ok!(d, txn.insert(table, &[Value::U64(1), Value::from("b")]));
        assert!(
            ok!(
                d,
                txn.update(table, &[Value::U64(1)], &[(1, Value::from("c"))])
            ),
            "{d}"
        );
        ok!(d, txn.commit());
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(ok!(d, txn.delete(table, &[Value::U64(1)])), "{d}");
        ok!(d, txn.commit());
        db.collect_garbage();
        let row = vec![Value::U64(1), Value::from("b")];
        commit_rows(&db, table, std::slice::from_ref(&row));
        assert_eq!(all_rows(&db, table), vec![row.clone()], "{d}");
        assert_eq!(
            named_rows(&db, table, "b"),
            vec![row],
            "{d}: scan_index misses the row"
        );
    }
}

// ----- the locking protocols: MVTO and MV2PL ---------------------------------------------------
//
// Their reads take row locks or stamp read timestamps, so the snapshot tests above (which
// interleave readers and writers of the same rows freely) are not theirs. These are: what
// each refuses, when, with which error, and that a refusal rolls back and releases.

/// Opens every configuration of `protocol` with the items table holding `rows`.
fn protocol_with_items(
    protocol: verso::ConcurrencyControl,
    rows: &[Vec<Value>],
) -> impl Iterator<Item = (Database, TableId)> + '_ {
    with_items(
        common::configurations_of(protocol)
            .into_iter()
            .map(|options| open(&options)),
        rows,
    )
}

/// Asserts a lock conflict that rolled `txn` back: later calls fail as aborted.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(
    d: &str,
    result: verso::Result<T>,
    txn: &Transaction<'_>,
    table: TableId,
) {
    let error = assert_err!(d, result, Error::LockConflict { .. });
    assert!(error.is_retryable(), "{d}");
    assert_eq!(
        txn.get(table, &tk("a", 1)).map(|_| ()),
        Err(Error::TransactionAborted),
        "{d}: a refusal rolls back"
    );
}

fn score_of(d: &str, txn: &Transaction<'_>, table: TableId, id: u64) -> Option<i64> {
    ok!(d, txn.get(table, &tk("a", id))).map(|row| row[items::SCORE].as_i64().expect("score"))
}

fn set_score(
    txn: &mut Transaction<'_>,
    table: TableId,
    id: u64,
    score: i64,
) -> verso::Result<bool> {
    txn.update(table, &tk("a", id), &[(items::SCORE, Value::I64(score))])
}

/// MVTO: a transaction reads the versions of older transactions that committed (also after
/// it began) and never those of younger ones; an older transaction may not overwrite what
/// a younger one read; a read or write of a row another transaction has locked is refused
/// and rolls back.
#[test]
fn mvto_orders_transactions_by_their_start() {
    let base = vec![item("a", 1, 10, "x"), item("a", 2, 20, "y")];
    for (db, table) in protocol_with_items(verso::ConcurrencyControl::Mvto, &base) {
        let d = db.design();
        // Older writes, younger reads after the older commits: it sees the write.
        let mut older = db.begin(Isolation::Snapshot);
        let younger = db.begin(Isolation::Snapshot);
        assert!(
            older.start_ts() < younger.start_ts(),
            "{d}: unique, increasing ids"
        );
        assert!(ok!(d, set_score(&mut older, table, 1, 11)), "{d}");
        ok!(d, older.commit());
        assert_eq!(
            score_of(&d, &younger, table, 1),
            Some(11),
            "{d}: older commit visible"
        );
        ok!(d, younger.commit());

        // Younger writes and commits: an older reader keeps the version before it.
        let older = db.begin(Isolation::Snapshot);
        let mut younger = db.begin(Isolation::Snapshot);
        assert!(ok!(d, set_score(&mut younger, table, 2, 21)), "{d}");
        ok!(d, younger.commit());
        assert_eq!(
            score_of(&d, &older, table, 2),
            Some(20),
            "{d}: younger commit invisible"
        );
        ok!(d, older.commit());

        // A younger transaction read row 1: the older one may not write it.
        let mut older = db.begin(Isolation::Snapshot);
        let younger = db.begin(Isolation::Snapshot);
        assert_eq!(score_of(&d, &younger, table, 1), Some(11), "{d}");
        assert_refused(&d, set_score(&mut older, table, 1, 12), &older, table);
        ok!(d, younger.commit());
        // A writer younger than every reader may.
        let mut latest = db.begin(Isolation::Snapshot);
        assert!(ok!(d, set_score(&mut latest, table, 1, 12)), "{d}");

        // The row is locked until `latest` ends: reads and writes of it are refused.
        let reader = db.begin(Isolation::Snapshot);
        assert_refused(&d, reader.get(table, &tk("a", 1)), &reader, table);
        let mut writer = db.begin(Isolation::Snapshot);
        assert_refused(&d, set_score(&mut writer, table, 1, 13), &writer, table);
        // Its own locked row it reads and writes again.
        assert_eq!(score_of(&d, &latest, table, 1), Some(12), "{d}");
        assert!(ok!(d, set_score(&mut latest, table, 1, 14)), "{d}");
        latest.abort();
        // Released by the abort, the row is as before.
        let after = db.begin(Isolation::Snapshot);
        assert_eq!(score_of(&d, &after, table, 1), Some(11), "{d}");
        ok!(d, after.commit());
        assert!(
            db.stats().aborts_lock_conflict >= 3,
            "{d}: refusals counted"
        );
    }
}

/// MVTO: a scan, and a point read that found no row, are predicate reads: an older
/// transaction may not commit a row into what a younger one read as empty.
#[test]
fn mvto_an_older_insert_into_a_younger_scan_fails_at_commit() {
    let base = vec![item("a", 1, 10, "x")];
    for (db, table) in protocol_with_items(verso::ConcurrencyControl::Mvto, &base) {
        let d = db.design();
        for by_scan in [true, false] {
            let mut older = db.begin(Isolation::Snapshot);
            let younger = db.begin(Isolation::Snapshot);
            if by_scan {
                let rows = ok!(
                    d,
                    younger
                        .scan(table, vec![Value::from("b")]..=vec![Value::from("b")])
                        .rows()
                );
                assert!(rows.is_empty(), "{d}");
            } else {
                assert_eq!(ok!(d, younger.get(table, &tk("b", 1))), None, "{d}");
            }
            // Refused at commit; or at once, where the deleted row of the last round is
            // still there for the read to stamp (a collector that has not removed it yet).
            match older.insert(table, &item("b", 1, 5, "new")) {
                Ok(()) => {
                    assert_err!(d, older.commit(), Error::SerializationFailure { .. });
                }
                Err(Error::LockConflict { .. }) => {}
                Err(error) => panic!("{d}: insert: {error}"),
            }
            ok!(d, younger.commit());
            // A younger inserter is fine: the reader is before it.
            let reader = db.begin(Isolation::Snapshot);
            assert_eq!(ok!(d, reader.get(table, &tk("b", 1))), None, "{d}");
            let mut inserter = db.begin(Isolation::Snapshot);
            ok!(d, inserter.insert(table, &item("b", 1, 5, "new")));
            ok!(d, inserter.commit());
            ok!(d, reader.commit());
            let mut cleanup = db.begin(Isolation::Snapshot);
            assert!(ok!(d, cleanup.delete(table, &tk("b", 1))), "{d}");
            ok!(d, cleanup.commit());
        }
    }
}

/// MV2PL: a locked read sees the newest committed version; readers share, a writer needs
/// the row to itself (no-wait: refused at once, rolled back); a sole reader upgrades; locks
/// go at commit and at abort; a declared read-only transaction reads its snapshot without
/// locks.
#[test]
fn mv2pl_locks_rows_without_waiting() {
    let base = vec![item("a", 1, 10, "x"), item("a", 2, 20, "y")];
    for (db, table) in protocol_with_items(verso::ConcurrencyControl::Mv2pl, &base) {
        let d = db.design();
        // Locked reads see the newest committed version, not the begin snapshot.
        let early = db.begin(Isolation::Snapshot);
        let snapshot = db.begin_read_only(Isolation::Snapshot);
        let mut writer = db.begin(Isolation::Snapshot);
        assert!(ok!(d, set_score(&mut writer, table, 1, 11)), "{d}");
        ok!(d, writer.commit());
        assert_eq!(
            score_of(&d, &early, table, 1),
            Some(11),
            "{d}: newest committed"
        );
        assert_eq!(
            score_of(&d, &snapshot, table, 1),
            Some(10),
            "{d}: declared: snapshot"
        );

        // `early` holds a read lock on row 1: a writer is refused, a reader shares it.
        let other_reader = db.begin(Isolation::Snapshot);
        assert_eq!(score_of(&d, &other_reader, table, 1), Some(11), "{d}");
        let mut blocked = db.begin(Isolation::Snapshot);
        assert_refused(&d, set_score(&mut blocked, table, 1, 12), &blocked, table);
        // The declared read-only one holds no lock: it blocks nobody.
        ok!(d, snapshot.commit());
        ok!(d, other_reader.commit());
        // `early` is now the only reader: it upgrades.
        let mut early = early;
        assert!(ok!(d, set_score(&mut early, table, 1, 12)), "{d}");
        // Its write lock refuses readers and writers.
        let reader = db.begin(Isolation::Snapshot);
        assert_refused(&d, reader.get(table, &tk("a", 1)), &reader, table);
        ok!(d, early.commit());
        // Released at commit.
        let mut next = db.begin(Isolation::Snapshot);
        assert_eq!(score_of(&d, &next, table, 1), Some(12), "{d}");
        assert!(ok!(d, set_score(&mut next, table, 1, 13)), "{d}");
        next.abort();
        // Released at abort, the write undone.
        let mut last = db.begin(Isolation::Snapshot);
        assert!(ok!(d, set_score(&mut last, table, 1, 14)), "{d}");
        ok!(d, last.commit());
        let check = db.begin(Isolation::Snapshot);
        assert_eq!(score_of(&d, &check, table, 1), Some(14), "{d}");
        ok!(d, check.commit());
        assert!(
            db.stats().aborts_lock_conflict >= 2,
            "{d}: refusals counted"
        );
    }
}

/// MV2PL: a scan cannot lock the rows inserted after it: a transaction whose scan missed a
/// row committed before it commits fails its validation (a phantom); one whose scan came
/// after the insert's commit does not.
#[test]
fn mv2pl_validates_scans_against_later_inserts() {
    let base = vec![item("a", 1, 10, "x")];
    for (db, table) in protocol_with_items(verso::ConcurrencyControl::Mv2pl, &base) {
        let d = db.design();
        let mut scanner = db.begin(Isolation::Snapshot);
        assert!(
            ok!(
                d,
                scanner
                    .scan(table, vec![Value::from("b")]..=vec![Value::from("b")])
                    .rows()
            )
            .is_empty(),
            "{d}"
        );
        let mut inserter = db.begin(Isolation::Snapshot);
        ok!(d, inserter.insert(table, &item("b", 1, 5, "new")));
        ok!(d, inserter.commit());
        assert!(ok!(d, set_score(&mut scanner, table, 1, 11)), "{d}");
        assert_err!(d, scanner.commit(), Error::SerializationFailure { .. });

        let mut late = db.begin(Isolation::Snapshot);
        let mut inserter = db.begin(Isolation::Snapshot);
        ok!(d, inserter.insert(table, &item("b", 2, 5, "newer")));
        ok!(d, inserter.commit());
        let seen = ok!(
            d,
            late.scan(table, vec![Value::from("b")]..=vec![Value::from("b")])
                .rows()
        );
        assert_eq!(seen.len(), 2, "{d}: the newest committed rows");
        assert!(ok!(d, set_score(&mut late, table, 1, 12)), "{d}");
        ok!(d, late.commit());
    }
}
