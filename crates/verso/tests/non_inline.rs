//! Wu et al. §4.1's non-inline attributes: long Text and Bytes values kept out of line,
//! copied by every new version ([`NonInline::Copied`]) or shared by the versions that leave
//! them alone ([`NonInline::Shared`]), against Verso's default of packing them in the row
//! ([`NonInline::Packed`]). The contract tests, the anomaly suite and the model-based test
//! run the out-of-line policies too (`common::all_configurations`, `model.rs`); these tests
//! check what each policy stores, on every storage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use verso::research::{NonInline, NON_INLINE_MIN_BYTES};
use verso::{
    ColumnType, Database, Error, GarbageCollector, Isolation, Options, Schema, TableId, Value,
    VersionStorageKind,
};

/// Every storage under every policy, with Steam and the idle janitor off (the tests
/// collect when they mean to).
fn every_storage_and_policy() -> Vec<Options> {
    let mut all = Vec::new();
    for storage in VersionStorageKind::ALL {
        for policy in NonInline::ALL {
            all.push(
                Options::default()
                    .version_storage(storage)
                    .non_inline(policy)
                    .idle_collection_interval(None),
            );
        }
    }
    all
}

/// `docs (id U64, title Text, body Bytes, hits I64)`, indexed by title.
fn create_docs(db: &Database) -> TableId {
    db.create_table(
        "docs",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("title", ColumnType::Text)
            .column("body", ColumnType::Bytes)
            .column("hits", ColumnType::I64)
            .primary_key(&["id"])
            .index("by_title", &["title"]),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", db.design()))
}

const TITLE: usize = 1;
const BODY: usize = 2;
const HITS: usize = 3;

/// A title long enough to be stored out of line, distinct per `(id, version)`.
fn title(id: u64, version: u64) -> String {
    format!("{id:04}-{version:04}-{}", "t".repeat(NON_INLINE_MIN_BYTES))
}

fn body(id: u64, version: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (id as usize * 31 + version as usize * 7 + i) as u8)
        .collect()
}

fn doc(id: u64, version: u64) -> Vec<Value> {
    vec![
        Value::U64(id),
        Value::Text(title(id, version)),
        Value::Bytes(body(id, version, 1_000)),
        Value::I64(0),
    ]
}

fn set(db: &Database, table: TableId, id: u64, changes: &[(usize, Value)]) {
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn.update(table, &[Value::U64(id)], changes).unwrap());
    txn.commit().unwrap();
}

fn get(txn: &verso::Transaction<'_>, table: TableId, id: u64) -> Option<Vec<Value>> {
    txn.get(table, &[Value::U64(id)]).unwrap()
}

#[test]
fn the_policy_is_named_in_the_design_and_parsed_by_name() {
    for policy in NonInline::ALL {
        let db = Database::open(Options::default().non_inline(policy)).unwrap();
        let shows = db
            .design()
            .ends_with(&format!("/non-inline-{}", policy.name()));
        assert_eq!(shows, policy != NonInline::Packed, "{}", db.design());
        assert_eq!(NonInline::from_name(policy.name()).unwrap(), policy);
        assert_eq!(policy.to_string(), policy.name());
    }
    assert_eq!(NonInline::default(), NonInline::Packed);
    match NonInline::from_name("inline") {
        Err(Error::UnsupportedConfiguration { reason }) => {
            assert!(reason.contains("packed, copied, shared"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

/// Every read sees the long values its snapshot should, through inserts, updates of other
/// columns, of the long columns themselves, rollbacks, deletes and re-inserts, and
/// collection leaves nothing behind.
#[test]
fn long_values_read_back_at_every_snapshot_on_every_storage_and_policy() {
    for options in every_storage_and_policy() {
        let db = Database::open(options).unwrap();
        let d = db.design();
        let table = create_docs(&db);
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..4 {
            txn.insert(table, &doc(id, 0)).unwrap();
        }
        txn.commit().unwrap();
        let at_load = db.begin(Isolation::Snapshot);

        // An update of a short column leaves the long values as they were.
        set(&db, table, 1, &[(HITS, Value::I64(5))]);
        let after_hits = db.begin(Isolation::Snapshot);
        // An update of a long column, twice in one transaction (the second rewrites the
        // transaction's own version), then one rolled back.
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(txn
            .update(
                table,
                &[Value::U64(1)],
                &[(TITLE, Value::Text(title(1, 1)))]
            )
            .unwrap());
        assert!(txn
            .update(
                table,
                &[Value::U64(1)],
                &[(BODY, Value::Bytes(body(1, 1, 2_000)))]
            )
            .unwrap());
        txn.commit().unwrap();
        let mut rolled_back = db.begin(Isolation::Snapshot);
        assert!(rolled_back
            .update(
                table,
                &[Value::U64(1)],
                &[(TITLE, Value::Text(title(1, 9)))]
            )
            .unwrap());
        rolled_back.abort();
        // A delete, and a re-insert of another key's values.
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(txn.delete(table, &[Value::U64(2)]).unwrap());
        txn.commit().unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &doc(2, 3)).unwrap();
        txn.commit().unwrap();

        let mut newest = doc(1, 1);
        newest[BODY] = Value::Bytes(body(1, 1, 2_000));
        newest[HITS] = Value::I64(5);
        let mut hit = doc(1, 0);
        hit[HITS] = Value::I64(5);
        assert_eq!(get(&at_load, table, 1), Some(doc(1, 0)), "{d}");
        assert_eq!(get(&after_hits, table, 1), Some(hit.clone()), "{d}");
        assert_eq!(get(&at_load, table, 2), Some(doc(2, 0)), "{d}");
        let now = db.begin(Isolation::Snapshot);
        assert_eq!(get(&now, table, 1), Some(newest.clone()), "{d}");
        assert_eq!(get(&now, table, 2), Some(doc(2, 3)), "{d}");
        assert_eq!(get(&now, table, 3), Some(doc(3, 0)), "{d}");
        // The index over the long title finds each snapshot's row under its title only.
        let by_title = |txn: &verso::Transaction<'_>, title: String| {
            let key = vec![Value::Text(title)];
            txn.scan_index(table, "by_title", key.clone()..=key)
                .unwrap()
                .map(|row| row.unwrap()[0].as_u64().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(by_title(&now, title(1, 1)), vec![1], "{d}");
        assert_eq!(by_title(&now, title(1, 0)), Vec::<u64>::new(), "{d}");
        assert_eq!(by_title(&at_load, title(1, 0)), vec![1], "{d}");
        assert_eq!(by_title(&now, title(1, 9)), Vec::<u64>::new(), "{d}");
        drop((at_load, after_hits));
        assert_eq!(get(&now, table, 1), Some(newest), "{d}");
        drop(now);

        db.collect_garbage();
        assert_eq!(db.stats().live_versions(), 0, "{d}: {:?}", db.stats());
        let reader = db.begin(Isolation::Snapshot);
        let rows: Vec<Vec<Value>> = reader
            .scan(table, ..)
            .unwrap()
            .map(|row| row.unwrap().into_values())
            .collect();
        assert_eq!(rows.len(), 4, "{d}");
        assert_eq!(rows[0], doc(0, 0), "{d}");
    }
}

/// What a version that leaves a long value alone costs: under 'copied' each version holds
/// a copy of the 1,000-byte body, under 'shared' none does, and 'packed' copies it inside
/// the version's own allocation. Held by a snapshot, 50 updates of the short column keep
/// 50 versions; the version bytes say which policy copied.
#[test]
fn an_update_of_a_short_column_copies_the_long_value_unless_it_is_shared() {
    for storage in VersionStorageKind::ALL {
        let bytes_of = |policy: NonInline| {
            let db = Database::open(
                Options::default()
                    .version_storage(storage)
                    .non_inline(policy)
                    .garbage_collector(GarbageCollector::Steam)
                    .idle_collection_interval(None),
            )
            .unwrap();
            let table = create_docs(&db);
            let mut txn = db.begin(Isolation::Snapshot);
            txn.insert(table, &doc(1, 0)).unwrap();
            txn.commit().unwrap();
            let mut held = Vec::new();
            for hits in 1..=50 {
                held.push(db.begin(Isolation::Snapshot)); // each version stays needed
                set(&db, table, 1, &[(HITS, Value::I64(hits))]);
            }
            let stats = db.stats();
            assert_eq!(stats.live_versions(), 50, "{}: {stats:?}", db.design());
            stats.live_version_bytes()
        };
        let packed = bytes_of(NonInline::Packed);
        let copied = bytes_of(NonInline::Copied);
        let shared = bytes_of(NonInline::Shared);
        if storage == VersionStorageKind::Delta {
            // Before-images of the one changed column: no policy copies the body.
            assert_eq!(
                (packed, copied),
                (shared, shared),
                "{storage:?}: delta keeps only the changed column"
            );
        } else {
            // Whole copies: every version copies the body, unless it is shared.
            assert!(
                copied >= shared + 50 * 1_000 && packed >= shared + 50 * 1_000,
                "{storage:?}: packed {packed}, copied {copied}, shared {shared}"
            );
        }
    }
}

/// Writers replace long values (and leave them alone) while readers check that every
/// row they read is one version's whole: the title, body and hits all name the same
/// version. Refcounts are shared across the threads through the rows' versions.
#[test]
fn concurrent_readers_see_whole_versions_while_writers_share_and_replace_long_values() {
    for storage in VersionStorageKind::ALL {
        for policy in [NonInline::Copied, NonInline::Shared] {
            let db = Database::open(
                Options::default()
                    .version_storage(storage)
                    .non_inline(policy),
            )
            .unwrap();
            let table = create_docs(&db);
            let mut txn = db.begin(Isolation::Snapshot);
            for id in 0..8 {
                txn.insert(table, &doc(id, 0)).unwrap();
            }
            txn.commit().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let version_of = |row: &[Value]| -> u64 {
                let id = row[0].as_u64().unwrap();
                let version = row[HITS].as_i64().unwrap() as u64;
                assert_eq!(row[TITLE], Value::Text(title(id, version / 2 * 2)));
                assert_eq!(row[BODY], Value::Bytes(body(id, version / 2 * 2, 1_000)));
                version
            };
            std::thread::scope(|scope| {
                let reader = scope.spawn(|| {
                    let mut reads = 0u64;
                    while !stop.load(Ordering::Relaxed) || reads < 200 {
                        let txn = db.begin(Isolation::Snapshot);
                        for row in txn.scan(table, ..).unwrap() {
                            version_of(&row.unwrap());
                            reads += 1;
                        }
                    }
                });
                // Even versions replace the long values, odd ones only the hits.
                for version in 1..=60u64 {
                    for id in 0..8 {
                        let mut changes = vec![(HITS, Value::I64(version as i64))];
                        if version % 2 == 0 {
                            changes.push((TITLE, Value::Text(title(id, version))));
                            changes.push((BODY, Value::Bytes(body(id, version, 1_000))));
                        }
                        set(&db, table, id, &changes);
                    }
                }
                stop.store(true, Ordering::Relaxed);
                reader.join().expect("the reader saw whole versions");
            });
            let txn = db.begin(Isolation::Snapshot);
            for row in txn.scan(table, ..).unwrap() {
                assert_eq!(version_of(&row.unwrap()), 60, "{}", db.design());
            }
            drop(txn);
            db.collect_garbage();
            assert_eq!(db.stats().live_versions(), 0, "{}", db.design());
        }
    }
}
