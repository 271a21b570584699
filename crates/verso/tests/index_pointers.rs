//! Wu et al. §6's index pointers: what physical pointers (an entry per version, pointing at
//! that exact version) change against logical ones (an entry per key, pointing at the
//! row), and that both answer every read the same way. The contract tests and the anomaly
//! suite run the physical configurations too (`common::all_configurations`); these tests
//! look at the entries themselves.

mod common;

use common::ScanRows;
use common::{commit_rows, create_items, index_rows, item, item_key, items, open, ITEMS};
use verso::{
    Database, Error, GarbageCollector, IndexPointers, Isolation, Options, Value, VersionStorageKind,
};

/// Physical and logical pointers over both append-only orders, the storages that have
/// both, under a collector that prunes eagerly (Steam) and one that leaves chains to a
/// background pass ('vac'), and over O2N under cooperative cleaning, which unlinks
/// versions as walks pass them.
fn both_schemes() -> Vec<Options> {
    let mut all = Vec::new();
    for storage in [
        VersionStorageKind::AppendNewestToOldest,
        VersionStorageKind::AppendOldestToNewest,
    ] {
        for gc in [GarbageCollector::Steam, GarbageCollector::Vacuum] {
            for pointers in IndexPointers::ALL {
                all.push(
                    Options::default()
                        .version_storage(storage)
                        .garbage_collector(gc)
                        .index_pointers(pointers)
                        .idle_collection_interval(None),
                );
            }
        }
    }
    for pointers in IndexPointers::ALL {
        all.push(
            Options::default()
                .version_storage(VersionStorageKind::AppendOldestToNewest)
                .garbage_collector(GarbageCollector::Cooperative)
                .index_pointers(pointers)
                .idle_collection_interval(None),
        );
    }
    all
}

fn physical(db: &Database) -> bool {
    db.options().index_pointers == IndexPointers::Physical
}

fn set(db: &Database, id: u64, column: usize, value: Value) {
    let table = db.table(ITEMS).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(table, &item_key("eu", id), &[(column, value)])
        .unwrap());
    txn.commit().unwrap();
}

fn names_at(txn: &verso::Transaction<'_>, name: &str) -> Vec<u64> {
    txn.scan_index(
        verso_items(txn),
        items::BY_NAME,
        vec![Value::from(name)]..=vec![Value::from(name)],
    )
    .rows()
    .unwrap()
    .iter()
    .map(|row| row[items::ID].as_u64().unwrap())
    .collect()
}

/// The items table's id (the first table of every database these tests open).
fn verso_items(_txn: &verso::Transaction<'_>) -> verso::TableId {
    ITEMS_ID.with(|id| id.get().expect("create_items ran"))
}

/// A database of `options` with the items table, whose id the helpers above find.
fn open_with_items(options: &Options) -> (Database, verso::TableId) {
    let db = open(options);
    let table = create_items(&db);
    ITEMS_ID.with(|id| id.set(Some(table)));
    (db, table)
}

thread_local! {
    static ITEMS_ID: std::cell::Cell<Option<verso::TableId>> = const { std::cell::Cell::new(None) };
}

#[test]
fn physical_pointers_are_refused_with_every_storage_but_append_only() {
    for storage in VersionStorageKind::ALL {
        let options = Options::default()
            .version_storage(storage)
            .index_pointers(IndexPointers::Physical);
        let append_only = matches!(
            storage,
            VersionStorageKind::AppendNewestToOldest | VersionStorageKind::AppendOldestToNewest
        );
        match (append_only, Database::open(options)) {
            (true, Ok(db)) => assert!(db.design().ends_with("/physical"), "{}", db.design()),
            (true, Err(error)) => panic!("{storage:?} with physical pointers: {error}"),
            (false, Err(Error::UnsupportedConfiguration { reason })) => {
                assert!(reason.contains("need append-only storage"), "{reason}");
                assert!(reason.contains(storage.name()), "{reason}");
            }
            (_, other) => panic!("{storage:?} with physical pointers: {:?}", other.err()),
        }
    }
    assert_eq!(
        IndexPointers::from_name("physical").unwrap(),
        IndexPointers::Physical
    );
    assert!(matches!(
        IndexPointers::from_name("direct"),
        Err(Error::UnsupportedConfiguration { .. })
    ));
}

/// §6.2: "When updating any tuple in a table, the DBMS inserts the newly created version
/// into all the secondary indexes" — even when the update changes no indexed column. Under
/// logical pointers such an update adds nothing. Collection (and eager pruning) takes the
/// old versions' entries away with them.
#[test]
fn every_new_version_gets_an_entry_in_every_secondary_index_under_physical_pointers() {
    for options in both_schemes() {
        let (db, table) = open_with_items(&options);
        commit_rows(
            &db,
            table,
            &[item("eu", 1, 10, "ann"), item("eu", 2, 20, "bob")],
        );
        let held = db.begin(Isolation::Snapshot); // keeps every version
        for tag in 0..3 {
            set(&db, 1, items::TAG, Value::U64(100 + tag)); // no indexed column
        }
        // Row 1's versions: the newest and those behind it that the collector kept (at
        // least the one `held` reads; Steam prunes the ones between).
        let behind = db
            .version_chain_length(table, &item_key("eu", 1))
            .unwrap()
            .unwrap();
        assert!(
            behind >= 1,
            "{}: the held snapshot's version stays",
            db.design()
        );
        let per_index = if physical(&db) { 1 + (1 + behind) } else { 2 };
        for index in [items::BY_NAME, items::BY_SCORE] {
            assert_eq!(
                db.secondary_index_entries(table, index).unwrap(),
                per_index,
                "{}: {index}",
                db.design()
            );
        }
        assert_eq!(names_at(&held, "ann"), [1], "{}", db.design());
        held.commit().unwrap();
        db.collect_garbage();
        for index in [items::BY_NAME, items::BY_SCORE] {
            assert_eq!(
                db.secondary_index_entries(table, index).unwrap(),
                2,
                "{}: {index} after collection",
                db.design()
            );
        }
        assert_eq!(
            index_rows(&db, table, items::BY_NAME, &[Value::from("ann")]).len(),
            1
        );
    }
}

/// A snapshot follows an exact entry only to the version it reads: the old key for an old
/// snapshot, the new key for a new one, its own uncommitted key for the writer, and nothing
/// of a row deleted before it.
#[test]
fn each_snapshot_finds_a_row_under_exactly_the_key_its_version_has() {
    for options in both_schemes() {
        let (db, table) = open_with_items(&options);
        let design = db.design();
        commit_rows(
            &db,
            table,
            &[item("eu", 1, 10, "ann"), item("eu", 2, 20, "bob")],
        );
        let before_rename = db.begin(Isolation::Snapshot);
        set(&db, 1, items::NAME, Value::from("amy"));
        let after_rename = db.begin(Isolation::Snapshot);
        assert_eq!(names_at(&before_rename, "ann"), [1], "{design}");
        assert!(names_at(&before_rename, "amy").is_empty(), "{design}");
        assert!(names_at(&after_rename, "ann").is_empty(), "{design}");
        assert_eq!(names_at(&after_rename, "amy"), [1], "{design}");

        // The writer sees its own version, twice rewritten, and nobody else does.
        let mut writer = db.begin(Isolation::Snapshot);
        for name in ["ada", "abe"] {
            writer
                .update(
                    table,
                    &item_key("eu", 1),
                    &[(items::NAME, Value::from(name))],
                )
                .unwrap();
        }
        assert_eq!(names_at(&writer, "abe"), [1], "{design}");
        assert!(names_at(&writer, "ada").is_empty(), "{design}");
        assert!(names_at(&writer, "amy").is_empty(), "{design}");
        assert_eq!(names_at(&after_rename, "amy"), [1], "{design}");
        assert!(names_at(&after_rename, "abe").is_empty(), "{design}");
        writer.commit().unwrap();

        let mut deleter = db.begin(Isolation::Snapshot);
        assert!(deleter.delete(table, &item_key("eu", 2)).unwrap());
        assert!(names_at(&deleter, "bob").is_empty(), "{design}");
        deleter.commit().unwrap();
        assert_eq!(names_at(&after_rename, "bob"), [2], "{design}");
        let now = db.begin(Isolation::Snapshot);
        assert!(names_at(&now, "bob").is_empty(), "{design}");
        assert_eq!(names_at(&now, "abe"), [1], "{design}");
        for txn in [before_rename, after_rename, now] {
            txn.commit().unwrap();
        }
        db.collect_garbage();
        assert_eq!(
            db.secondary_index_entries(table, items::BY_NAME).unwrap(),
            1,
            "{design}: only abe's entry is left"
        );
    }
}

/// A rolled-back write takes its version's entries with it, whether its version was a new
/// one over a committed row or the first of a new key, and whether it was rewritten first.
#[test]
fn a_rollback_leaves_no_entry_of_the_versions_it_undid() {
    for options in both_schemes() {
        let (db, table) = open_with_items(&options);
        let design = db.design();
        commit_rows(&db, table, &[item("eu", 1, 10, "ann")]);
        let mut txn = db.begin(Isolation::Snapshot);
        txn.update(
            table,
            &item_key("eu", 1),
            &[(items::NAME, Value::from("ida"))],
        )
        .unwrap();
        txn.update(table, &item_key("eu", 1), &[(items::SCORE, Value::I64(11))])
            .unwrap();
        txn.insert(table, &item("eu", 2, 20, "joe")).unwrap();
        txn.abort();
        db.collect_garbage();
        for index in [items::BY_NAME, items::BY_SCORE] {
            assert_eq!(
                db.secondary_index_entries(table, index).unwrap(),
                1,
                "{design}: {index}"
            );
        }
        let now = db.begin(Isolation::Snapshot);
        assert_eq!(names_at(&now, "ann"), [1], "{design}");
        assert!(names_at(&now, "ida").is_empty(), "{design}");
        assert!(names_at(&now, "joe").is_empty(), "{design}");
        now.commit().unwrap();
    }
}
