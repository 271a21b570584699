//! The delta-nvm storage (the delta layout OneShot runs over in TB-Collect's experiments,
//! Wei et al. 2025 §2.3.3, §5.1) and its collector 'oneshot', beyond the suites every
//! configuration passes: what each write costs the region, that partitions are released
//! whole and their frames come back, that long snapshots read through the version index
//! after their partitions went, and what `open` refuses.

use verso::pmem::{LineSize, PmOptions, PmStats, Purpose};
use verso::{
    ColumnType, ConcurrencyControl, Database, Error, GarbageCollector, Isolation, Options, Schema,
    TableId, Value, VersionStorageKind,
};

#[path = "common/region.rs"]
mod region;
use region::{delta, insert, pm, table, text, update};

fn options(gc: GarbageCollector, line: LineSize) -> Options {
    Options::default()
        .version_storage(VersionStorageKind::DeltaNvm)
        .concurrency_control(ConcurrencyControl::Mvto)
        .garbage_collector(gc)
        .persistent_memory(
            PmOptions::default()
                .capacity_bytes(64 << 20)
                .line(line)
                .slots_per_block(16)
                .partition_frames(2),
        )
}

fn oneshot() -> Options {
    options(GarbageCollector::OneShot, LineSize::B256)
}

fn read(txn: &verso::Transaction<'_>, table: TableId, id: u64) -> Option<Value> {
    txn.get(table, &[Value::U64(id)])
        .unwrap()
        .map(|row| row[1].clone())
}

/// An update appends the before-image to the open partition (its 40-byte header and the
/// old contents) and rewrites the newest version in place in the main heap (its 32-byte
/// header and the new contents): TB's "two NVM writes, one of them a random in-place
/// write" (the reading notes on delta storage). Nothing else; one persist point.
#[test]
fn an_update_appends_the_before_image_and_rewrites_the_newest_in_place() {
    for line in [LineSize::B256, LineSize::B128, LineSize::B64] {
        let db = Database::open(options(GarbageCollector::NoCollection, line)).unwrap();
        let table = table(&db, "t");
        insert(&db, table, 1, 180);
        insert(&db, table, 2, 180);
        // The first before-image takes the open partition's first frame (a directory
        // word); later ones append to it.
        update(&db, table, 2, 1, 180);
        let before = pm(&db);
        update(&db, table, 1, 7, 180);
        let after = pm(&db);
        assert_eq!(after.persist_points - before.persist_points, 1);
        let line_bytes = u64::from(line.bytes());
        // The packed row of 8 + 180 bytes of values, behind each header.
        let (old_lines, old_bytes) = delta(&after, &before, Purpose::Content);
        let (new_lines, new_bytes) = delta(&after, &before, Purpose::NewestInPlace);
        assert_eq!(
            old_bytes,
            (new_bytes + 8).next_multiple_of(8),
            "{line:?}: the before-image's header is 8 bytes longer, and records 8-byte aligned"
        );
        assert!((213..=256).contains(&new_bytes), "{line:?}: {new_bytes}");
        for (lines, bytes) in [(old_lines, old_bytes), (new_lines, new_bytes)] {
            let spans = bytes.div_ceil(line_bytes);
            assert!(
                lines == spans || lines == spans + 1,
                "{line:?}: {lines} lines for {bytes} bytes"
            );
        }
        for purpose in Purpose::ALL {
            if !matches!(purpose, Purpose::Content | Purpose::NewestInPlace) {
                assert_eq!(delta(&after, &before, purpose), (0, 0), "{purpose:?}");
            }
        }
        let txn = db.begin(Isolation::Serializable);
        assert_eq!(read(&txn, table, 1), Some(text(7, 180)));
        assert_eq!(read(&txn, table, 2), Some(text(1, 180)));
        txn.commit().unwrap();
    }
}

/// Without a collector the version store only grows, a partition after another; under
/// 'oneshot' each sealed partition is released whole once no snapshot can read it (no
/// chain is walked: no version is pruned one by one), its frames come back, and the
/// region stops growing.
#[test]
fn partitions_are_released_whole_and_the_region_stays_bounded() {
    let mut in_use = Vec::new();
    for gc in [GarbageCollector::NoCollection, GarbageCollector::OneShot] {
        let db = Database::open(options(gc, LineSize::B256)).unwrap();
        let table = table(&db, "t");
        for id in 0..50 {
            insert(&db, table, id, 100);
        }
        for round in 1..=60 {
            for id in 0..50 {
                update(&db, table, id, round, 100);
            }
        }
        let stats = db.stats();
        let pm = stats.persistent_memory.clone().unwrap();
        assert!(pm.partitions.sealed >= 10, "{:?}", pm.partitions);
        if gc == GarbageCollector::OneShot {
            assert!(
                pm.partitions.released + 2 >= pm.partitions.sealed,
                "{:?}",
                pm.partitions
            );
            assert_eq!(pm.partitions.released_with_index, 0, "no long snapshot");
            assert!(pm.partitions.versions_released > 2_000);
            assert_eq!(stats.versions_pruned_eagerly, 0, "no chain is pruned");
            assert!(
                stats.live_versions() < 1_000,
                "released versions leave the counts: {}",
                stats.live_versions()
            );
        } else {
            assert_eq!(pm.partitions.released, 0);
            assert_eq!(stats.live_versions(), 3_000);
        }
        in_use.push(pm.blocks.frames_in_use);
        let txn = db.begin(Isolation::Serializable);
        for id in 0..50 {
            assert_eq!(read(&txn, table, id), Some(text(60, 100)));
        }
        txn.commit().unwrap();
    }
    assert!(
        in_use[1] * 4 < in_use[0],
        "oneshot's region is a fraction of no collection's: {in_use:?}"
    );
}

/// TB §2.3.3: a partition a long snapshot may still read is released once only long
/// snapshots may (they began before every update in it), after the versions they read or
/// walk past are copied into its version index with small writes; the long snapshot then
/// reads every version it should through the index, and once it ends the indexes go and
/// the space comes back.
#[test]
fn a_long_snapshot_reads_through_the_version_index_of_released_partitions() {
    let db = Database::open(oneshot()).unwrap();
    let table = table(&db, "t");
    for id in 0..40 {
        insert(&db, table, id, 100);
    }
    // Updated once before the long snapshot: it reads round 1 of these.
    for id in 0..20 {
        update(&db, table, id, 1, 100);
    }
    let long = db.begin_read_only(Isolation::Serializable);
    for round in 2..=40 {
        for id in 0..40 {
            update(&db, table, id, round, 100);
        }
    }
    let before = pm(&db);
    assert!(
        before.partitions.released_with_index >= 5,
        "{:?}",
        before.partitions
    );
    assert!(
        before.partitions.index_copies >= 40,
        "{:?}",
        before.partitions
    );
    assert!(delta(&before, &PmStats::new(256), Purpose::VersionIndex).0 > 0);
    for id in 0..40 {
        let expected = if id < 20 { text(1, 100) } else { text(0, 100) };
        assert_eq!(read(&long, table, id), Some(expected), "row {id}");
    }
    let now = db.begin(Isolation::Serializable);
    assert_eq!(read(&now, table, 3), Some(text(40, 100)));
    now.commit().unwrap();
    let held = pm(&db).blocks.frames_in_use;
    long.commit().unwrap();
    db.collect_garbage();
    let after = pm(&db);
    assert_eq!(after.partitions.indexes_now, 0, "{:?}", after.partitions);
    assert!(after.partitions.indexes_freed >= 5);
    assert!(
        after.blocks.frames_in_use < held,
        "space falls back: {} < {held}",
        after.blocks.frames_in_use
    );
}

/// A snapshot that began before a row existed walks past every version of it, through
/// the index stubs of released partitions, to nothing.
#[test]
fn a_long_snapshot_finds_no_row_inserted_after_it_through_released_partitions() {
    let db = Database::open(oneshot()).unwrap();
    let table = table(&db, "t");
    insert(&db, table, 0, 100);
    let long = db.begin_read_only(Isolation::Serializable);
    for id in 1..30 {
        insert(&db, table, id, 100);
    }
    for round in 1..=40 {
        for id in 0..30 {
            update(&db, table, id, round, 100);
        }
    }
    assert!(pm(&db).partitions.released_with_index > 0);
    assert_eq!(read(&long, table, 0), Some(text(0, 100)));
    for id in 1..30 {
        assert_eq!(
            read(&long, table, id),
            None,
            "row {id} was inserted after it"
        );
    }
    long.commit().unwrap();
}

/// A rolled-back update puts the before-image back in place; its copy in the partition is
/// marked and never read again, and it leaves the partition's count.
#[test]
fn a_rollback_restores_the_before_image_in_place() {
    let db = Database::open(oneshot()).unwrap();
    let table = table(&db, "t");
    insert(&db, table, 1, 100);
    update(&db, table, 1, 5, 100);
    let mut txn = db.begin(Isolation::Serializable);
    txn.update(table, &[Value::U64(1)], &[(1, text(9, 300))])
        .unwrap();
    txn.update(table, &[Value::U64(1)], &[(1, text(8, 20))])
        .unwrap();
    txn.abort();
    let check = db.begin(Isolation::Serializable);
    assert_eq!(read(&check, table, 1), Some(text(5, 100)));
    check.commit().unwrap();
    let live = db.stats().live_versions();
    update(&db, table, 1, 6, 100);
    assert_eq!(db.stats().live_versions(), live + 1);
    let check = db.begin(Isolation::Serializable);
    assert_eq!(read(&check, table, 1), Some(text(6, 100)));
    check.commit().unwrap();
}

/// A deleted row is buried once every snapshot sees it deleted: its chain is cut behind
/// the tombstone (one word in place) and its main heap slot goes to the reuse list, from
/// which the next row of its size takes it.
#[test]
fn deleted_rows_are_buried_and_their_main_heap_slots_reused() {
    let db = Database::open(oneshot()).unwrap();
    let table = table(&db, "t");
    for id in 0..10 {
        insert(&db, table, id, 100);
        update(&db, table, id, 1, 100);
    }
    for id in 0..10 {
        let mut txn = db.begin(Isolation::Serializable);
        assert!(txn.delete(table, &[Value::U64(id)]).unwrap());
        txn.commit().unwrap();
    }
    db.collect_garbage();
    let freed = pm(&db).slots.slots_freed;
    assert!(freed >= 10, "{freed}");
    let cut = pm(&db).slots.slots_cut;
    for id in 100..110 {
        insert(&db, table, id, 100);
    }
    let after = pm(&db).slots;
    assert_eq!(
        after.slots_cut, cut,
        "the new rows took the buried rows' slots"
    );
    assert!(after.slots_reused >= 10);
}

#[test]
fn open_refuses_what_delta_nvm_cannot_do() {
    let refused = |options: Options, what: &str| match Database::open(options) {
        Err(Error::UnsupportedConfiguration { reason }) => {
            assert!(reason.contains(what), "{reason}")
        }
        other => panic!("expected a refusal about {what}, got {other:?}"),
    };
    let nvm = || {
        Options::default()
            .version_storage(VersionStorageKind::DeltaNvm)
            .concurrency_control(ConcurrencyControl::Mvto)
    };
    refused(
        nvm().garbage_collector(GarbageCollector::Tvcp),
        "needs the append-nvm version storage",
    );
    refused(
        nvm().garbage_collector(GarbageCollector::Steam),
        "oneshot only",
    );
    refused(
        Options::default().garbage_collector(GarbageCollector::OneShot),
        "needs the delta-nvm version storage",
    );
    let dir = std::env::temp_dir().join(format!("verso-delta-nvm-{}", std::process::id()));
    refused(
        nvm()
            .garbage_collector(GarbageCollector::OneShot)
            .path(&dir),
        "no path",
    );
    assert!(!dir.exists(), "a refused open creates nothing");
}

/// Writers move amounts between accounts while long snapshots, each held across many
/// partition releases, keep summing their view: every sum is the total, whether its
/// versions come from the main heap, a live partition or a released partition's index.
#[test]
fn long_snapshots_see_consistent_totals_while_partitions_are_released_under_them() {
    let db = Database::open(oneshot()).unwrap();
    let accounts = db
        .create_table(
            "accounts",
            Schema::new()
                .column("id", ColumnType::U64)
                .column("balance", ColumnType::I64)
                .primary_key(&["id"]),
        )
        .unwrap();
    const ACCOUNTS: u64 = 64;
    const TOTAL: i64 = ACCOUNTS as i64 * 100;
    let mut txn = db.begin(Isolation::Serializable);
    for id in 0..ACCOUNTS {
        txn.insert(accounts, &[Value::U64(id), Value::I64(100)])
            .unwrap();
    }
    txn.commit().unwrap();
    // MVTO refuses a read of a row another transaction holds the write lock of
    // (`LockConflict`); the caller reads again.
    let sum = |txn: &verso::Transaction<'_>| -> verso::Result<i64> {
        let mut total = 0;
        for id in 0..ACCOUNTS {
            match txn.get(accounts, &[Value::U64(id)])? {
                Some(row) => match row[1] {
                    Value::I64(balance) => total += balance,
                    ref other => panic!("{other:?}"),
                },
                None => panic!("account {id} missing"),
            }
        }
        Ok(total)
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    // Writers run their transactions side by side under read turns; the long snapshot's
    // second sum takes the write turn.
    let turns = std::sync::RwLock::new(());
    std::thread::scope(|scope| {
        for writer in 0..2u64 {
            let (db, stop, turns) = (&db, &stop, &turns);
            scope.spawn(move || {
                let mut n = writer;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n = n
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (from, to) = ((n >> 20) % ACCOUNTS, (n >> 40) % ACCOUNTS);
                    if from == to {
                        continue;
                    }
                    let _turn = turns.read().unwrap();
                    let mut txn = db.begin(Isolation::Serializable);
                    let moved = (|| -> verso::Result<()> {
                        for (id, amount) in [(from, -1i64), (to, 1)] {
                            let row = txn.get(accounts, &[Value::U64(id)])?.expect("account");
                            let Value::I64(balance) = row[1] else {
                                unreachable!()
                            };
                            txn.update(
                                accounts,
                                &[Value::U64(id)],
                                &[(1, Value::I64(balance + amount))],
                            )?;
                        }
                        Ok(())
                    })();
                    if moved.is_ok() {
                        let _ = txn.commit();
                    }
                }
            });
        }
        // Stops the writers also when an assertion below fails (else the scope waits).
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        for _ in 0..6 {
            let long = loop {
                let long = db.begin_read_only(Isolation::Serializable);
                match sum(&long) {
                    Ok(total) => {
                        assert_eq!(total, TOTAL);
                        break long;
                    }
                    Err(verso::Error::LockConflict { .. }) => continue,
                    Err(other) => panic!("{other}"),
                }
            };
            std::thread::sleep(std::time::Duration::from_millis(150));
            // The same snapshot, partitions released under it; read while no writer holds a
            // lock (MVTO rolls a reader back on a locked row).
            let again = {
                let _no_writer = turns.write().unwrap();
                sum(&long).unwrap()
            };
            assert_eq!(
                again, TOTAL,
                "the same snapshot, partitions released under it"
            );
            long.commit().unwrap();
        }
    });
    let partitions = pm(&db).partitions;
    assert!(partitions.released_with_index > 0, "{partitions:?}");
    let txn = db.begin(Isolation::Serializable);
    assert_eq!(sum(&txn).unwrap(), TOTAL);
    txn.commit().unwrap();
}
