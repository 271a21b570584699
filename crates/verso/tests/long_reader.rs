//! The central promise: a long reader does not make chains grow under Steam (they stay
//! within the number of active snapshots plus one), while under watermark-only they grow
//! with every update; the reader reads its original value throughout; once it ends, live
//! versions fall back to near zero under both collectors.

use verso::{
    ColumnType, Database, GarbageCollector, Isolation, Options, Schema, Value, VersionStorageKind,
};

const UPDATES: u64 = 100_000;

fn setup(storage: VersionStorageKind, gc: GarbageCollector) -> (Database, verso::TableId) {
    let options = Options::default()
        .version_storage(storage)
        .garbage_collector(gc);
    let db = Database::open(options).expect("open");
    let table = db
        .create_table(
            "counter",
            Schema::new()
                .column("id", ColumnType::U64)
                .column("value", ColumnType::I64)
                .column("note", ColumnType::Text)
                .primary_key(&["id"]),
        )
        .expect("create");
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(table, &[Value::U64(1), Value::I64(0), "start".into()])
        .expect("insert");
    txn.commit().expect("commit");
    (db, table)
}

/// Returns the longest chain seen while the reader was active.
fn run(storage: VersionStorageKind, gc: GarbageCollector, updates: u64) -> (usize, verso::Stats) {
    let (db, table) = setup(storage, gc);
    let key = [Value::U64(1)];
    let reader = db.begin(Isolation::Snapshot);
    assert_eq!(
        reader.get(table, &key).expect("get").expect("row")[1],
        Value::I64(0)
    );
    let mut longest = 0;
    for i in 1..=updates {
        let mut writer = db.begin(Isolation::Snapshot);
        assert!(writer
            .update(table, &key, &[(1, Value::I64(i as i64))])
            .expect("update"));
        writer.commit().expect("commit");
        if i % 1000 == 0 || i < 100 {
            let len = db
                .version_chain_length(table, &key)
                .expect("chain")
                .expect("row exists");
            longest = longest.max(len);
            // The reader's snapshot is untouched by pruning.
            assert_eq!(
                reader.get(table, &key).expect("get").expect("row")[1],
                Value::I64(0),
                "the long reader must keep reading its original value"
            );
        }
    }
    let during = db.stats();
    drop(reader);
    // The next commit (or an explicit collection) finalizes what the reader held.
    let mut writer = db.begin(Isolation::Snapshot);
    writer
        .update(table, &key, &[(1, Value::I64(-1))])
        .expect("update");
    writer.commit().expect("commit");
    db.collect_garbage();
    let after = db.stats();
    assert!(
        after.live_versions() <= 2,
        "{storage:?}/{gc:?}: live versions after the reader ended: {}",
        after.live_versions()
    );
    assert_eq!(
        db.version_chain_length(table, &key).expect("chain"),
        Some(0)
    );
    let fresh = db.begin(Isolation::Snapshot);
    assert_eq!(
        fresh.get(table, &key).expect("get").expect("row")[1],
        Value::I64(-1)
    );
    (longest, during)
}

#[test]
fn steam_keeps_chains_within_active_snapshots_plus_one() {
    for storage in VersionStorageKind::ALL {
        let (longest, during) = run(storage, GarbageCollector::Steam, UPDATES);
        // Two snapshots may need old versions at once (the reader and the writer's own
        // snapshot), so at most three records.
        assert!(longest <= 3, "{storage:?}: Steam chain grew to {longest}");
        assert!(
            during.live_versions() <= 10,
            "{storage:?}: Steam: {} live versions behind a long reader",
            during.live_versions()
        );
        assert!(
            during.versions_pruned_eagerly >= UPDATES - 10,
            "{storage:?}"
        );
    }
}

#[test]
fn watermark_only_chains_grow_behind_a_long_reader() {
    for storage in VersionStorageKind::ALL {
        // Oldest-to-newest chains make every write walk the whole chain: quadratic in the
        // updates, as the design is; a tenth of them shows the same growth.
        let updates = match storage {
            VersionStorageKind::AppendOldestToNewest => UPDATES / 10,
            _ => UPDATES,
        };
        let (longest, during) = run(storage, GarbageCollector::WatermarkOnly, updates);
        assert!(
            longest as u64 >= updates - 1000,
            "{storage:?}: watermark-only chain was only {longest} long"
        );
        assert!(during.live_versions() >= updates - 1000, "{storage:?}");
        assert_eq!(during.versions_pruned_eagerly, 0, "{storage:?}");
    }
}
