//! The tile-block storage (TB-Collect, Wei et al. 2025, §4.1 and §4.3) beyond the suites
//! every configuration passes: what each write costs the persistent-memory region, line by
//! line; blocks that fill and seal; a full region; and what `open` refuses.

use verso::pmem::{LineSize, PmBacking, PmOptions, Purpose, SimulatedRegion};
use verso::{
    ColumnType, ConcurrencyControl, Database, Error, GarbageCollector, Isolation, Options, Schema,
    TableId, Value, VersionStorageKind,
};

fn options(pm: PmOptions) -> Options {
    Options::default()
        .version_storage(VersionStorageKind::TileBlock)
        .concurrency_control(ConcurrencyControl::Mvto)
        .garbage_collector(GarbageCollector::NoCollection)
        .persistent_memory(pm)
}

fn small_region() -> PmOptions {
    PmOptions::default().capacity_bytes(64 << 20)
}

fn counters(db: &Database) -> TableId {
    db.create_table(
        "counters",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("value", ColumnType::I64)
            .primary_key(&["id"]),
    )
    .unwrap()
}

fn pm(db: &Database) -> verso::pmem::PmStats {
    db.stats()
        .persistent_memory
        .expect("a tile-block database counts its region")
}

/// TB §4.3 and Figure 5: an update writes the old version's end timestamp in DRAM, its
/// bit in the update bitmap and `max_txnid` in the block's metadata line (one 256-byte
/// line), and appends the new content; the commit appends its commit record and persists
/// all of it in one persist point. At 64-byte lines the bitmap word and `max_txnid` lie in
/// two lines (TB Table 3's point).
#[test]
fn an_update_writes_one_metadata_line_and_appends_its_content() {
    for (line, metadata_lines) in [(LineSize::B256, 1), (LineSize::B128, 2), (LineSize::B64, 2)] {
        let db = Database::open(options(small_region().line(line))).unwrap();
        let table = counters(&db);
        let mut txn = db.begin(Isolation::Serializable);
        txn.insert(table, &[Value::U64(1), Value::I64(0)]).unwrap();
        txn.commit().unwrap();
        let before = pm(&db);
        let mut txn = db.begin(Isolation::Serializable);
        assert!(txn
            .update(table, &[Value::U64(1)], &[(1, Value::I64(7))])
            .unwrap());
        txn.commit().unwrap();
        let after = pm(&db);
        let delta = |purpose| {
            let (a, b) = (after.purpose(purpose), before.purpose(purpose));
            (
                a.lines_persisted - b.lines_persisted,
                a.logical_bytes - b.logical_bytes,
            )
        };
        assert_eq!(
            after.persist_points - before.persist_points,
            1,
            "one persist point per commit"
        );
        // The bit (fetch_or of one word) and max_txnid (fetch_max of one word).
        assert_eq!(
            delta(Purpose::BlockMetadata),
            (metadata_lines, 16),
            "{line:?}"
        );
        // The new version's record (a 24-byte header and the packed row), and the commit
        // record (a header and its 8-byte count), appended.
        let (content_lines, content_bytes) = delta(Purpose::Content);
        assert!(
            content_bytes > 24 && content_bytes % 8 == 0,
            "{content_bytes} bytes"
        );
        assert!(
            (1..=2).contains(&content_lines),
            "{line:?}: {content_lines} lines"
        );
        let (commit_lines, commit_bytes) = delta(Purpose::CommitRecord);
        assert_eq!(commit_bytes, 32);
        // A line the version's record dirtied first counts for it (first purpose wins).
        assert!(
            (1..=3).contains(&(content_lines + commit_lines)),
            "{line:?}: {content_lines} + {commit_lines} lines"
        );
        let txn = db.begin(Isolation::Serializable);
        assert_eq!(
            txn.get(table, &[Value::U64(1)]).unwrap(),
            Some(vec![Value::U64(1), Value::I64(7)])
        );
        txn.commit().unwrap();
    }
}

#[test]
fn blocks_fill_and_seal_and_a_long_value_gets_a_block_of_its_own() {
    let db = Database::open(options(small_region().slots_per_block(4))).unwrap();
    let table = db
        .create_table(
            "blobs",
            Schema::new()
                .column("id", ColumnType::U64)
                .column("data", ColumnType::Bytes)
                .primary_key(&["id"]),
        )
        .unwrap();
    let blob = |id: u64| Value::Bytes(vec![id as u8; if id == 7 { 3 << 20 } else { 100 }]);
    for id in 0..12u64 {
        let mut txn = db.begin(Isolation::Serializable);
        txn.insert(table, &[Value::U64(id), blob(id)]).unwrap();
        txn.commit().unwrap();
    }
    // 12 inserts and 12 commit records in blocks of 4 slots: 6 blocks opened (a directory
    // word each) and 5 sealed (another each), and the 3 MiB value's block of its own (the
    // unit tests count the blocks and their states).
    let stats = pm(&db);
    assert!(
        stats.purpose(Purpose::Directory).logical_bytes >= 8 * 11,
        "{stats:?}"
    );
    assert!(stats.purpose(Purpose::Content).logical_bytes > 3 << 20);
    let txn = db.begin(Isolation::Serializable);
    for id in 0..12u64 {
        assert_eq!(
            txn.get(table, &[Value::U64(id)]).unwrap(),
            Some(vec![Value::U64(id), blob(id)]),
            "row {id}"
        );
    }
    txn.commit().unwrap();
}

#[test]
fn a_full_region_refuses_the_write_and_keeps_what_was_committed() {
    // 2 MiB: a 1 MiB catalog and three frames of 491,776 bytes.
    let db = Database::open(options(PmOptions::default().capacity_bytes(2 << 20))).unwrap();
    let table = counters(&db);
    let mut committed = 0u64;
    let refused = loop {
        let mut txn = db.begin(Isolation::Serializable);
        match txn.insert(table, &[Value::U64(committed), Value::I64(-1)]) {
            Ok(()) => {}
            Err(error) => break error,
        }
        match txn.commit() {
            Ok(_) => committed += 1,
            Err(error) => break error,
        }
    };
    assert!(
        matches!(refused, Error::CapacityExceeded { .. }),
        "{refused}"
    );
    assert!(committed > 1000, "{committed} rows fit");
    let txn = db.begin(Isolation::Serializable);
    for id in [0, committed / 2, committed - 1] {
        assert_eq!(
            txn.get(table, &[Value::U64(id)]).unwrap(),
            Some(vec![Value::U64(id), Value::I64(-1)])
        );
    }
    assert_eq!(txn.get(table, &[Value::U64(committed)]).unwrap(), None);
    txn.commit().unwrap();
    // An update needs a new record too: refused the same way, and the row keeps its value;
    // the transaction can still end either way.
    let mut txn = db.begin(Isolation::Serializable);
    let refused = txn.update(table, &[Value::U64(0)], &[(1, Value::I64(5))]);
    assert!(
        matches!(refused, Err(Error::CapacityExceeded { .. })),
        "{refused:?}"
    );
    assert_eq!(
        txn.get(table, &[Value::U64(0)]).unwrap(),
        Some(vec![Value::U64(0), Value::I64(-1)])
    );
    txn.abort();
    let txn = db.begin(Isolation::Serializable);
    assert_eq!(
        txn.get(table, &[Value::U64(0)]).unwrap(),
        Some(vec![Value::U64(0), Value::I64(-1)])
    );
    txn.commit().unwrap();
}

#[test]
fn what_the_tile_block_storage_cannot_run_with_is_refused_with_a_reason() {
    let refused = |options: Options, words: &str| match Database::open(options) {
        Err(Error::UnsupportedConfiguration { reason }) => {
            assert!(reason.contains(words), "{reason}")
        }
        Ok(db) => panic!("{} opened", db.design()),
        Err(other) => panic!("{other}"),
    };
    let tb = options(small_region());
    refused(
        tb.clone()
            .concurrency_control(ConcurrencyControl::SnapshotIsolation),
        "MVTO only",
    );
    refused(
        tb.clone().garbage_collector(GarbageCollector::Steam),
        "the collectors none, tb-collect only, not steam: it is collected block by block",
    );
    refused(
        Options::default().garbage_collector(GarbageCollector::TbCollect),
        "needs the tile-block version storage",
    );
    refused(
        tb.clone().non_inline(verso::research::NonInline::Shared),
        "inline",
    );
    refused(
        tb.clone()
            .garbage_collector(GarbageCollector::NoCollection)
            .chain_consolidation(verso::ChainConsolidation::HashIndex),
        "chain consolidation 'hash-index' applies only to tb-collect, not to none",
    );
    assert_eq!(
        verso::ChainConsolidation::from_name("hash-index").unwrap(),
        verso::ChainConsolidation::HashIndex
    );
    assert!(matches!(
        verso::ChainConsolidation::from_name("hash"),
        Err(verso::Error::UnsupportedConfiguration { .. })
    ));
    refused(
        tb.clone()
            .path(std::env::temp_dir().join("verso-tb-refused"))
            .durability(verso::Durability::None),
        "which is Durability::Sync",
    );
    refused(
        Options::default().persistent_memory(small_region()),
        "persistent-memory region is for",
    );
    assert!(VersionStorageKind::from_name("tile-block")
        .unwrap()
        .uses_persistent_memory());
}

/// The region is written through the simulated device too (the crash tests' backing).
#[test]
fn a_simulated_region_holds_the_database_and_counts_alike() {
    let device = SimulatedRegion::new(8 << 20, 1);
    let db = Database::open(options(
        PmOptions::default()
            .backing(PmBacking::Simulated(device.clone()))
            .capacity_bytes(8 << 20),
    ))
    .unwrap();
    let table = counters(&db);
    for id in 0..100u64 {
        let mut txn = db.begin(Isolation::Serializable);
        txn.insert(table, &[Value::U64(id), Value::I64(id as i64)])
            .unwrap();
        txn.commit().unwrap();
    }
    assert_eq!(device.persists(), pm(&db).persist_points);
    assert!(pm(&db).write_amplification().unwrap() > 1.0);
}
