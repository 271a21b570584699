//! The append-nvm storage (TB-Collect's baselines' append-only storage with version headers
//! in persistent memory, Wei et al. 2025 §2.3, §5.1) and its collectors 'tvcp' and 'zen',
//! beyond the suites every configuration passes: what each write costs the region, that
//! collected slots go to per-table reuse lists and are reused, when each collector
//! reclaims, and what `open` refuses.

use std::time::{Duration, Instant};

use verso::pmem::{LineSize, PmOptions, Purpose};
use verso::{
    ConcurrencyControl, Database, Error, GarbageCollector, Isolation, Options, TableId, Value,
    VersionStorageKind,
};

#[path = "common/region.rs"]
mod region;
use region::{delta, insert, pm, table, text, update};

fn options(gc: GarbageCollector, line: LineSize) -> Options {
    Options::default()
        .version_storage(VersionStorageKind::AppendNvm)
        .concurrency_control(ConcurrencyControl::Mvto)
        .garbage_collector(gc)
        .persistent_memory(PmOptions::default().capacity_bytes(64 << 20).line(line))
}

fn read(txn: &verso::Transaction<'_>, table: TableId, id: u64) -> Value {
    txn.get(table, &[Value::U64(id)]).unwrap().expect("row")[1].clone()
}

/// An update appends the new version whole (its 32-byte header and its contents) and
/// rewrites the old version's end timestamp in place: one 8-byte store that costs a whole
/// line of the media, whatever the line size (TB-Collect's reading notes: "an in-place
/// header update costs a whole line"). Nothing else is written; one persist point.
#[test]
fn an_update_appends_its_version_and_rewrites_the_old_header_in_place() {
    for line in [LineSize::B256, LineSize::B128, LineSize::B64] {
        let db = Database::open(options(GarbageCollector::NoCollection, line)).unwrap();
        let table = table(&db, "t");
        // 8 + 180 bytes of values: a slot of 256 bytes (32-byte header, packed row).
        insert(&db, table, 1, 180);
        let before = pm(&db);
        update(&db, table, 1, 7, 180);
        let after = pm(&db);
        assert_eq!(after.persist_points - before.persist_points, 1);
        assert_eq!(
            delta(&after, &before, Purpose::VersionHeader),
            (1, 8),
            "{line:?}: the old version's end timestamp"
        );
        let (content_lines, content_bytes) = delta(&after, &before, Purpose::Content);
        assert!(
            (213..=256).contains(&content_bytes),
            "{line:?}: {content_bytes}"
        );
        // The slot is 256 bytes at a 64-byte boundary: its lines are exactly those.
        let line_bytes = u64::from(line.bytes());
        let spans = content_bytes.div_ceil(line_bytes);
        assert!(
            content_lines == spans || content_lines == spans + 1,
            "{line:?}: {content_lines} lines for {content_bytes} bytes"
        );
        for purpose in Purpose::ALL {
            if !matches!(purpose, Purpose::Content | Purpose::VersionHeader) {
                assert_eq!(delta(&after, &before, purpose), (0, 0), "{purpose:?}");
            }
        }
        let txn = db.begin(Isolation::Serializable);
        assert_eq!(read(&txn, table, 1), text(7, 180));
        txn.commit().unwrap();
    }
}

/// TVCP (§2.3.1) reclaims at every commit: with no snapshot that could read the old
/// version, the commit marks it obsolete and unlinks it (two more header words in place)
/// and its slot goes to the table's reuse list, from which the next update takes it; so
/// the region stops growing after the first updates, where without a collector it grows
/// by a slot per update.
#[test]
fn tvcp_reclaims_at_commit_and_the_next_version_reuses_the_slot() {
    let mut frames = Vec::new();
    for gc in [GarbageCollector::NoCollection, GarbageCollector::Tvcp] {
        let db = Database::open(options(gc, LineSize::B256)).unwrap();
        let table = table(&db, "t");
        insert(&db, table, 1, 180);
        for n in 1..=10 {
            update(&db, table, 1, n, 180);
        }
        let before = pm(&db);
        for n in 11..=2_010 {
            update(&db, table, 1, n, 180);
            if gc == GarbageCollector::Tvcp {
                assert_eq!(
                    db.version_chain_length(table, &[Value::U64(1)]),
                    Ok(Some(0))
                );
            }
        }
        let after = pm(&db);
        let header_bytes = delta(&after, &before, Purpose::VersionHeader).1;
        let slots = after.slots;
        match gc {
            GarbageCollector::Tvcp => {
                // The end timestamp, the obsolete mark, the link that skips it.
                assert_eq!(header_bytes, 2_000 * 24);
                assert_eq!(slots.slots_reused - before.slots.slots_reused, 2_000);
                assert_eq!(slots.slots_cut, before.slots.slots_cut, "{slots:?}");
                assert!(slots.slots_on_reuse_lists <= 1, "{slots:?}");
            }
            _ => {
                assert_eq!(header_bytes, 2_000 * 8);
                assert_eq!(slots.slots_cut - before.slots.slots_cut, 2_000);
                assert_eq!(slots.slots_reused, 0);
            }
        }
        frames.push(after.blocks.frames_in_use);
        let txn = db.begin(Isolation::Serializable);
        assert_eq!(read(&txn, table, 1), text(2_010, 180));
        txn.commit().unwrap();
    }
    assert!(frames[1] < frames[0], "{frames:?}");
}

/// A snapshot held across TVCP's commits keeps the version it reads (every version in
/// between is reclaimed at the commit that covers it); once it ends, the next commit on
/// the thread reclaims it from the recycle queue.
#[test]
fn tvcp_keeps_what_a_held_snapshot_reads_and_reclaims_it_after() {
    let db = Database::open(options(GarbageCollector::Tvcp, LineSize::B256)).unwrap();
    let table = table(&db, "t");
    insert(&db, table, 1, 40);
    let held = db.begin(Isolation::Serializable);
    assert_eq!(read(&held, table, 1), text(0, 40));
    for n in 1..=50 {
        update(&db, table, 1, n, 40);
        assert_eq!(
            db.version_chain_length(table, &[Value::U64(1)]),
            Ok(Some(1))
        );
    }
    assert_eq!(read(&held, table, 1), text(0, 40));
    held.commit().unwrap();
    update(&db, table, 1, 51, 40);
    assert_eq!(
        db.version_chain_length(table, &[Value::U64(1)]),
        Ok(Some(0))
    );
    assert_eq!(db.stats().live_versions(), 0);
}

/// 'zen' (§2.3.2): workers never collect; the background thread does, and its slots go to
/// the reuse list.
#[test]
fn zen_reclaims_in_the_background() {
    let db = Database::open(options(GarbageCollector::Zen, LineSize::B256)).unwrap();
    let table = table(&db, "t");
    insert(&db, table, 1, 40);
    for n in 1..=200 {
        update(&db, table, 1, n, 40);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.version_chain_length(table, &[Value::U64(1)]) != Ok(Some(0)) {
        assert!(Instant::now() < deadline, "the background thread reclaims");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(pm(&db).slots.slots_freed >= 200, "{:?}", pm(&db).slots);
}

/// Reuse lists are per table (§2.3.1: "the reuse list of the corresponding table"): a slot
/// another table freed is not reused.
#[test]
fn a_freed_slot_is_reused_by_its_own_table_only() {
    let db = Database::open(options(GarbageCollector::Tvcp, LineSize::B256)).unwrap();
    let (a, b) = (table(&db, "a"), table(&db, "b"));
    insert(&db, a, 1, 40);
    update(&db, a, 1, 1, 40);
    let before = pm(&db).slots;
    assert_eq!(before.slots_on_reuse_lists, 1, "{before:?}");
    insert(&db, b, 1, 40);
    let after = pm(&db).slots;
    assert_eq!(after.slots_cut, before.slots_cut + 1, "{after:?}");
    assert_eq!(after.slots_on_reuse_lists, 1);
    update(&db, a, 1, 2, 40);
    let reused = pm(&db).slots;
    assert_eq!(reused.slots_reused, before.slots_reused + 1, "{reused:?}");
}

/// What the append-nvm storage and its collectors cannot run with is refused at `open`,
/// with the reason.
#[test]
fn what_append_nvm_cannot_run_with_is_refused_with_a_reason() {
    let refused = |options: Options, expected: &str| match Database::open(options) {
        Err(Error::UnsupportedConfiguration { reason }) => {
            assert!(reason.contains(expected), "{reason}")
        }
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("opened"),
    };
    let nvm = || options(GarbageCollector::Tvcp, LineSize::B256);
    refused(
        nvm().concurrency_control(ConcurrencyControl::SnapshotIsolation),
        "MVTO only",
    );
    refused(
        nvm().garbage_collector(GarbageCollector::Steam),
        "none, tvcp, zen only",
    );
    refused(
        nvm().garbage_collector(GarbageCollector::TbCollect),
        "needs the tile-block version storage",
    );
    let dir = std::env::temp_dir().join(format!("verso-append-nvm-{}", std::process::id()));
    refused(nvm().path(&dir), "no path");
    assert!(!dir.exists(), "a refused open creates nothing");
    for gc in [GarbageCollector::Tvcp, GarbageCollector::Zen] {
        refused(
            Options::default().garbage_collector(gc),
            "needs the append-nvm version storage",
        );
    }
    refused(
        Options::default()
            .version_storage(VersionStorageKind::TileBlock)
            .concurrency_control(ConcurrencyControl::Mvto)
            .garbage_collector(GarbageCollector::Tvcp),
        "needs the append-nvm version storage",
    );
}

/// Found by the limits suite when append-nvm joined it: a slot's capacity was kept in 16
/// bits of 64-byte units (4 MiB), and a row with a value at the 16 MiB limit overflowed
/// it. A slot larger than a frame gets frames of its own, and its capacity must be kept
/// whole for the reuse list.
#[test]
fn regression_a_version_larger_than_4_mib_gets_a_slot_of_its_own_and_is_reused() {
    const LEN: usize = verso::MAX_VALUE_BYTES;
    let db = Database::open(
        options(GarbageCollector::Tvcp, LineSize::B256)
            .persistent_memory(PmOptions::default().capacity_bytes(256 << 20)),
    )
    .unwrap();
    let table = table(&db, "t");
    insert(&db, table, 1, LEN);
    update(&db, table, 1, 1, LEN);
    update(&db, table, 1, 2, LEN);
    let slots = pm(&db).slots;
    assert_eq!(slots.slots_cut, 2, "{slots:?}");
    assert_eq!(slots.slots_reused, 1, "{slots:?}");
    let txn = db.begin(Isolation::Serializable);
    assert_eq!(read(&txn, table, 1), text(2, LEN));
    txn.commit().unwrap();
}

/// Found in review: 'tvcp''s recycle queue was kept in the thread's handle on its slot,
/// which outlives the database (until the thread next begins a transaction elsewhere or
/// ends), and the rows in it hold the storage: a database dropped with rows in the queue
/// kept its region mapped. Now the queue is the slot's, which the engine clears as it goes.
/// The simulated device maps one region at a time, so a second open tells.
#[test]
fn regression_a_dropped_database_lets_go_of_its_region_with_rows_in_the_recycle_queue() {
    let device = verso::pmem::SimulatedRegion::new(16 << 20, 7);
    let options = options(GarbageCollector::Tvcp, LineSize::B256).persistent_memory(
        PmOptions::default()
            .capacity_bytes(16 << 20)
            .backing(verso::pmem::PmBacking::Simulated(device.clone())),
    );
    let db = Database::open(options.clone()).unwrap();
    let table = table(&db, "t");
    insert(&db, table, 1, 40);
    let held = db.begin(Isolation::Serializable);
    assert_eq!(read(&held, table, 1), text(0, 40));
    update(&db, table, 1, 1, 40);
    // The held snapshot reads the old version: the row stays in the recycle queue.
    assert_eq!(
        db.version_chain_length(table, &[Value::U64(1)]),
        Ok(Some(1))
    );
    held.commit().unwrap();
    drop(db);
    // Mapped again: refused because it holds a database (this storage reads nothing back),
    // not because the dropped one still maps it.
    match Database::open(options) {
        Err(Error::UnsupportedConfiguration { reason }) => {
            assert!(reason.contains("needs a new region"), "{reason}")
        }
        Err(other) => panic!("the region is still held: {other}"),
        Ok(_) => panic!("append-nvm opened a region that holds a database"),
    }
}

/// Found by CI: each region storage numbered its stores from 1, and a thread's appender
/// cache tells stores apart by that number, so a thread that had written to a tile-block
/// database and then to an append-nvm one found the first one's (emptied) entry under the
/// second one's number and panicked. Both storages now draw from one counter.
#[test]
fn regression_stores_of_both_region_storages_have_distinct_ids() {
    let tile_block = Database::open(
        Options::default()
            .version_storage(VersionStorageKind::TileBlock)
            .concurrency_control(ConcurrencyControl::Mvto)
            .garbage_collector(GarbageCollector::NoCollection)
            .persistent_memory(PmOptions::default().capacity_bytes(64 << 20)),
    )
    .unwrap();
    let t = table(&tile_block, "t");
    insert(&tile_block, t, 1, 40);
    drop(tile_block);
    for _ in 0..2 {
        let db = Database::open(options(GarbageCollector::Tvcp, LineSize::B256)).unwrap();
        let t = table(&db, "t");
        insert(&db, t, 1, 40);
        update(&db, t, 1, 1, 40);
    }
}
