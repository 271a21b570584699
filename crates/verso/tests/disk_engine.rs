//! The disk engine behind `Database` (`Options::disk`): on the real file system across
//! restarts, with data larger than its buffer pool, across power cuts on the simulated
//! disk (no acknowledged commit lost, nothing uncommitted visible), under one long
//! snapshot (PostgreSQL's bloat, and autovacuum reclaiming it once the snapshot ends), and
//! the choices it refuses at `open`. The shared suites (contract, anomalies, bank,
//! history, model) run it too (`common::disk_configurations`).

mod common;

use common::ScanRows;

use std::sync::Arc;

use verso::disk::DiskStorage;
use verso::fs::SimulatedFileSystem;
use verso::{
    ColumnType, Database, Durability, Error, GarbageCollector, Isolation, KeyRange, Options,
    Schema, Value, VersionPlacement, VersionStorageKind,
};

fn accounts_schema() -> Schema {
    Schema::new()
        .column("id", ColumnType::U64)
        .column("owner", ColumnType::Text)
        .column("balance", ColumnType::I64)
        .primary_key(&["id"])
        .index("by_owner", &["owner"])
}

fn account(id: u64, owner: &str, balance: i64) -> Vec<Value> {
    vec![Value::U64(id), Value::from(owner), Value::I64(balance)]
}

fn all_rows(db: &Database, table: verso::TableId) -> Vec<Vec<Value>> {
    let txn = db.begin(Isolation::Snapshot);
    txn.scan(table, ..).rows().unwrap()
}

#[test]
fn a_disk_database_keeps_its_tables_and_rows_across_a_restart() {
    let dir = common::temp_dir("disk-restart");
    let _cleanup = common::Cleanup(dir.clone());
    let options = || {
        Options::default()
            .disk(&dir)
            .buffer_pool(64 * verso::disk::PAGE_SIZE)
            .log_segment_bytes(1 << 20)
    };
    {
        let db = Database::open(options()).unwrap();
        assert_eq!(db.path(), Some(dir.as_path()));
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..300 {
            txn.insert(accounts, &account(id, &format!("owner{}", id % 7), 100))
                .unwrap();
        }
        txn.commit().unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        for id in (0..300).step_by(3) {
            txn.update(accounts, &[Value::U64(id)], &[(2, Value::I64(7))])
                .unwrap();
        }
        assert!(txn.delete(accounts, &[Value::U64(299)]).unwrap());
        txn.commit().unwrap();
        // A second process (or handle) is refused while this one holds the directory.
        assert!(matches!(
            Database::open(options()),
            Err(Error::DatabaseLocked { .. })
        ));
        db.close().unwrap();
    }
    let db = Database::open(options()).unwrap();
    assert_eq!(db.table_names(), vec!["accounts".to_owned()]);
    let accounts = db.table("accounts").unwrap();
    let rows = all_rows(&db, accounts);
    assert_eq!(rows.len(), 299);
    for row in &rows {
        let id = row[0].as_u64().unwrap();
        let expected = if id % 3 == 0 { 7 } else { 100 };
        assert_eq!(row, &account(id, &format!("owner{}", id % 7), expected));
    }
    let txn = db.begin(Isolation::Snapshot);
    let owners = txn
        .scan_index(
            accounts,
            "by_owner",
            KeyRange::prefix(vec![Value::from("owner3")]),
        )
        .rows()
        .unwrap();
    assert_eq!(owners.len(), (0..299).filter(|id| id % 7 == 3).count());
    // Writes go on after the restart, and transaction ids are new.
    drop(txn);
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(accounts, &account(1000, "new", 1)).unwrap();
    txn.commit().unwrap();
    assert_eq!(all_rows(&db, accounts).len(), 300);
}

/// Direct I/O (`Options::direct_io`) changes where pages go, not what they hold: a
/// database written through it, with its pool far smaller than its data, reads back whole
/// with and without it, across restarts.
#[test]
fn pages_written_with_direct_io_read_back_with_and_without_it() {
    let dir = common::temp_dir("disk-direct-io");
    let _cleanup = common::Cleanup(dir.clone());
    let options = |direct: bool| {
        Options::default()
            .disk(&dir)
            .direct_io(direct)
            .buffer_pool(16 * verso::disk::PAGE_SIZE)
            .log_segment_bytes(1 << 20)
    };
    const ROWS: u64 = 2_000;
    let owner = |id: u64| format!("{:0>100}", id % 13);
    let expected = |id: u64| account(id, &owner(id), if id % 5 == 0 { -1 } else { id as i64 });
    {
        let db = Database::open(options(true)).unwrap();
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(250) {
            let mut txn = db.begin(Isolation::Snapshot);
            for &id in chunk {
                txn.insert(accounts, &account(id, &owner(id), id as i64))
                    .unwrap();
            }
            txn.commit().unwrap();
        }
        let mut txn = db.begin(Isolation::Snapshot);
        for id in (0..ROWS).step_by(5) {
            txn.update(accounts, &[Value::U64(id)], &[(2, Value::I64(-1))])
                .unwrap();
        }
        txn.commit().unwrap();
        let pool = db
            .stats()
            .disk
            .expect("the disk engine's stats")
            .buffer_pool;
        assert!(pool.pages_written > 0 && pool.evictions > 0, "{pool:?}");
        db.close().unwrap();
    }
    for direct in [false, true] {
        let db = Database::open(options(direct)).unwrap();
        let accounts = db.table("accounts").unwrap();
        let rows = all_rows(&db, accounts);
        assert_eq!(rows.len() as u64, ROWS, "direct I/O {direct}");
        for row in &rows {
            assert_eq!(
                row,
                &expected(row[0].as_u64().unwrap()),
                "direct I/O {direct}"
            );
        }
        let pool = db
            .stats()
            .disk
            .expect("the disk engine's stats")
            .buffer_pool;
        assert!(pool.pages_read > 0, "{pool:?}");
        db.close().unwrap();
    }
}

#[test]
fn data_far_larger_than_the_buffer_pool_reads_back_in_both_directions() {
    let db = common::open(
        &Options::default()
            .disk(common::SUITE_DISK_DIR)
            .buffer_pool(32 * verso::disk::PAGE_SIZE)
            .durability(Durability::None),
    );
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    const ROWS: u64 = 10_000;
    let owner = "x".repeat(120);
    for batch in 0..ROWS / 500 {
        let mut txn = db.begin(Isolation::Snapshot);
        for id in batch * 500..(batch + 1) * 500 {
            txn.insert(accounts, &account(id, &owner, id as i64))
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let disk = db.stats().disk.expect("the disk engine's counters");
    // The heap alone is several times the pool, and with its indexes ten times or more.
    assert!(disk.heap_pages > 4 * 32, "{disk:?}");
    assert!(disk.buffer_pool.pages_allocated > 10 * 32, "{disk:?}");
    assert!(disk.buffer_pool.evictions > 0, "{disk:?}");
    let txn = db.begin(Isolation::Snapshot);
    let ascending: Vec<u64> = txn
        .scan(accounts, ..)
        .unwrap()
        .map(|row| row.unwrap().into_values()[0].as_u64().unwrap())
        .collect();
    assert_eq!(ascending, (0..ROWS).collect::<Vec<_>>());
    let descending: Vec<u64> = txn
        .scan(accounts, KeyRange::new(..).descending())
        .unwrap()
        .map(|row| row.unwrap().into_values()[0].as_u64().unwrap())
        .collect();
    assert_eq!(descending, (0..ROWS).rev().collect::<Vec<_>>());
    for id in (0..ROWS).step_by(97) {
        assert_eq!(
            txn.get(accounts, &[Value::U64(id)]).unwrap(),
            Some(account(id, &owner, id as i64))
        );
    }
}

/// Power cuts at random moments of a run of transactions through `Database` (each sets a
/// few accounts' balances; some abort) under `Sync`, under both pruning rules and both
/// placements of new versions (PostgreSQL's and SI-CV's co-located pages, whose owners a
/// cut leaves behind): after the restart, the commits that
/// survived are a prefix of the commit order holding every acknowledged one, and each
/// account reads as that prefix left it. Under the co-located placement an aborting
/// transaction also inserts rows enough for a page of its own, which its abort drops
/// unwritten: no aborted row shows after the cut, through either index.
#[test]
fn power_cuts_lose_no_acknowledged_commit_and_show_nothing_uncommitted() {
    let seeds: u64 = std::env::var("DISK_ENGINE_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let (mut cut_mid_work, mut dropped) = (0, 0);
    for seed in 0..seeds {
        let fs = SimulatedFileSystem::new(7000 + seed);
        // Even seeds prune eagerly (the default), odd ones by PostgreSQL's rule.
        let gc = if seed % 2 == 0 {
            GarbageCollector::Steam
        } else {
            GarbageCollector::Vacuum
        };
        // Seeds 2, 10, 18, ... place new versions on their transactions' own pages, and
        // seeds 6, 14, 22, ... so with HOT kept (a HOT update claims its page); seeds
        // 3, 7, 11, ... run InnoDB's design (in place, undo, purge: recovery rolls back
        // what the cut left uncommitted in place), and seeds 0, 8, 16, ... it with Steam's
        // pruning of undo chains.
        let placement = match seed % 8 {
            2 => VersionPlacement::CoLocated,
            6 => VersionPlacement::CoLocatedHot,
            _ => VersionPlacement::PostgreSql,
        };
        let storage = if seed % 4 == 3 || seed % 8 == 0 {
            DiskStorage::Undo
        } else {
            DiskStorage::Heap
        };
        let options = || {
            Options::default()
                .disk("/db")
                .garbage_collector(gc)
                .version_placement(placement)
                .disk_storage(storage)
                .file_system(Arc::new(fs.clone()))
                .buffer_pool(24 * verso::disk::PAGE_SIZE)
                .log_segment_bytes(64 << 10)
                .autovacuum_naptime(Some(std::time::Duration::from_millis(5)))
        };
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Every commit in order: the writes it made, and whether it was acknowledged.
        let mut commits: Vec<(Vec<(u64, i64)>, bool)> = Vec::new();
        {
            let db = Database::open(options()).unwrap();
            let accounts = db.create_table("accounts", accounts_schema()).unwrap();
            let mut txn = db.begin(Isolation::Snapshot);
            for id in 0..40 {
                txn.insert(accounts, &account(id, "o", 0)).unwrap();
            }
            txn.commit().unwrap();
            fs.crash_after(50 + next() % 1500);
            for n in 0..2000i64 {
                // An abort that dropped pages synced the log first: a cut there loses
                // durability, and nothing begins after it.
                let Ok(mut txn) = db.try_begin(Isolation::Snapshot) else {
                    break;
                };
                let mut writes = Vec::new();
                let mut failed = false;
                for _ in 0..1 + next() % 3 {
                    let id = next() % 40;
                    match txn.update(accounts, &[Value::U64(id)], &[(2, Value::I64(n))]) {
                        Ok(_) => writes.push((id, n)),
                        Err(_) => {
                            failed = true;
                            break;
                        }
                    }
                }
                if failed {
                    break;
                }
                if next() % 8 == 0 {
                    if placement.co_located() {
                        // Rows enough for a page of its own, which the abort drops
                        // unwritten (and the next writers take as new): aborts with
                        // dropped pages are among the cut's points.
                        for k in 0..4 + next() % 10 {
                            let id = 1_000_000 + n as u64 * 100 + k;
                            let owner = format!("{id}").repeat(100);
                            if txn.insert(accounts, &account(id, &owner, n)).is_err() {
                                failed = true;
                                break;
                            }
                        }
                    }
                    txn.abort();
                    if failed {
                        break;
                    }
                    continue;
                }
                match txn.commit() {
                    Ok(()) => commits.push((writes, true)),
                    Err(_) => {
                        // Maybe in the log, maybe not: not acknowledged.
                        commits.push((writes, false));
                        break;
                    }
                }
                if n % 50 == 0 && db.checkpoint().is_err() {
                    break;
                }
            }
            dropped += db.stats().disk.unwrap().heap.pages_dropped_at_abort;
            cut_mid_work += usize::from(fs.is_crashed());
            fs.crash();
            fs.clear_faults();
        }
        fs.restart();
        let db = Database::open(options()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // No aborted row shows through the secondary index either.
        let by_owner = db
            .begin(Isolation::Snapshot)
            .scan_index(db.table("accounts").unwrap(), "by_owner", ..)
            .rows()
            .unwrap();
        assert_eq!(by_owner.len(), 40, "seed {seed}");
        // The owners the cut left behind are gone with the Barray.
        assert_eq!(db.stats().disk.unwrap().heap.pages_owned, 0, "seed {seed}");
        let accounts = db.table("accounts").unwrap();
        let balances: Vec<i64> = all_rows(&db, accounts)
            .iter()
            .map(|row| row[2].as_i64().unwrap())
            .collect();
        assert_eq!(balances.len(), 40, "seed {seed}");
        let acknowledged = commits
            .iter()
            .rposition(|(_, acked)| *acked)
            .map_or(0, |at| at + 1);
        let mut state = vec![0i64; 40];
        for (writes, _) in &commits[..acknowledged] {
            for &(id, value) in writes {
                state[id as usize] = value;
            }
        }
        let mut prefixes = vec![state.clone()];
        for (writes, _) in &commits[acknowledged..] {
            for &(id, value) in writes {
                state[id as usize] = value;
            }
            prefixes.push(state.clone());
        }
        assert!(
            prefixes.contains(&balances),
            "seed {seed}: the balances are no prefix of the commits holding the {acknowledged} \
             acknowledged ones"
        );
        db.close().unwrap();
    }
    assert!(
        cut_mid_work as u64 >= seeds / 2,
        "cut mid-work {cut_mid_work} times"
    );
    assert!(dropped > 0, "no abort dropped a page");
}

/// Accounts in the held-snapshot rounds' table.
const ROWS: u64 = 400;

/// A disk database (a 256-page pool, autovacuum every 10 ms) under `gc` with `ROWS`
/// accounts of balance 0.
fn rounds_database(gc: GarbageCollector) -> Database {
    let db = common::open(
        &Options::default()
            .disk(common::SUITE_DISK_DIR)
            .garbage_collector(gc)
            .buffer_pool(256 * verso::disk::PAGE_SIZE)
            .durability(Durability::None)
            .autovacuum_naptime(Some(std::time::Duration::from_millis(10))),
    );
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 0..ROWS {
        txn.insert(accounts, &account(id, "o", 0)).unwrap();
    }
    txn.commit().unwrap();
    db
}

/// One round: every account's balance set to `value`, one transaction each.
fn update_every_account(db: &Database, accounts: verso::TableId, value: i64) {
    for id in 0..ROWS {
        let mut txn = db.begin(Isolation::Snapshot);
        assert!(txn
            .update(accounts, &[Value::U64(id)], &[(2, Value::I64(value))])
            .unwrap());
        txn.commit().unwrap();
    }
}

/// The same rounds behind the same held snapshot under eager pruning (the default):
/// pruning on access removes every version no snapshot reads, so the heap stays within
/// the two versions per row the snapshots need (the held one's and the newest), while
/// PostgreSQL's rule grows it six-fold (the test above). A snapshot taken between the
/// rounds keeps its version too.
#[test]
fn eager_pruning_keeps_the_heap_flat_behind_a_held_snapshot() {
    let db = rounds_database(GarbageCollector::Steam);
    let accounts = db.table("accounts").unwrap();
    let round = |value: i64| update_every_account(&db, accounts, value);
    let pages = || db.stats().disk.unwrap().heap_pages;
    let initial = pages();
    let held = db.begin(Isolation::Snapshot);
    let mut middle = None;
    for value in 1..=8 {
        round(value);
        if value == 4 {
            middle = Some(db.begin(Isolation::Snapshot));
        }
    }
    let middle = middle.unwrap();
    let heap = db.stats().disk.unwrap().heap;
    assert!(
        pages() <= initial * 3,
        "{initial} pages became {} behind the snapshots",
        pages()
    );
    assert!(heap.tuples_pruned_eagerly > 0, "{heap:?}");
    for id in [0, 5, ROWS - 1] {
        let key = [Value::U64(id)];
        assert_eq!(held.get(accounts, &key).unwrap(), Some(account(id, "o", 0)));
        assert_eq!(
            middle.get(accounts, &key).unwrap(),
            Some(account(id, "o", 4))
        );
        assert_eq!(
            db.begin(Isolation::Snapshot).get(accounts, &key).unwrap(),
            Some(account(id, "o", 8))
        );
    }
    assert_eq!(held.scan(accounts, ..).rows().unwrap().len() as u64, ROWS);
    assert_eq!(
        middle
            .scan(accounts, ..)
            .rows()
            .unwrap()
            .iter()
            .filter(|row| row[2] == Value::I64(4))
            .count() as u64,
        ROWS
    );
}

/// One snapshot held open while every row is updated round after round: PostgreSQL's
/// version storage cannot prune what the snapshot may read, so the heap grows with every
/// round (the bloat the lab's held-snapshot runs show on PostgreSQL), and the snapshot
/// still reads the rows as they were. Once it ends, autovacuum (by the dead-tuple
/// threshold) and pruning on access reclaim the old versions, and further rounds reuse the
/// space instead of growing the heap.
#[test]
fn a_held_snapshot_bloats_the_heap_and_autovacuum_reclaims_it_after() {
    let db = rounds_database(GarbageCollector::Vacuum);
    let accounts = db.table("accounts").unwrap();
    let round = |value: i64| update_every_account(&db, accounts, value);
    let pages = || db.stats().disk.unwrap().heap_pages;
    let initial = pages();
    let held = db.begin(Isolation::Snapshot);
    for value in 1..=8 {
        round(value);
    }
    let bloated = pages();
    assert!(
        bloated >= initial * 6,
        "{initial} pages became {bloated} behind the snapshot"
    );
    assert_eq!(
        held.get(accounts, &[Value::U64(5)]).unwrap(),
        Some(account(5, "o", 0))
    );
    drop(held);
    // Autovacuum wakes every 10 ms and vacuums a table past its threshold.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.stats().disk.unwrap().vacuums == 0 {
        assert!(std::time::Instant::now() < deadline, "autovacuum never ran");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    round(9);
    let after = pages();
    for value in 10..=17 {
        round(value);
    }
    assert!(
        pages() <= after + after / 10,
        "rounds with no snapshot held grew the heap from {after} to {} pages",
        pages()
    );
    assert_eq!(
        db.begin(Isolation::Snapshot)
            .get(accounts, &[Value::U64(5)])
            .unwrap(),
        Some(account(5, "o", 17))
    );
}

#[test]
fn the_disk_engine_refuses_the_in_memory_engine_s_choices_at_open() {
    let base = || {
        Options::default()
            .disk("/db")
            .file_system(Arc::new(SimulatedFileSystem::new(1)))
    };
    for (options, words) in [
        (
            base().version_storage(VersionStorageKind::AppendNewestToOldest),
            "version storage",
        ),
        (base().path("/elsewhere"), "Options::path"),
        (base().buffer_pool(4096), "too small"),
        (
            base().concurrency_control(verso::ConcurrencyControl::Mvto),
            "concurrency-control",
        ),
    ] {
        match Database::open(options) {
            Err(Error::UnsupportedConfiguration { reason }) => {
                assert!(reason.contains(words), "{reason}")
            }
            other => panic!("{words}: {other:?}"),
        }
    }
    for in_memory in [
        Options::default().buffer_pool(1 << 20),
        Options::default().buffer_pool_eviction(verso::disk::ReplacementPolicy::Lru2),
    ] {
        match Database::open(in_memory) {
            Err(Error::UnsupportedConfiguration { reason }) => {
                assert!(reason.contains("disk engine"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
    // The eviction policy chosen is the one the design names.
    let lru2 =
        Database::open(base().buffer_pool_eviction(verso::disk::ReplacementPolicy::Lru2)).unwrap();
    assert!(lru2.design().ends_with("/lru2"), "{}", lru2.design());
    let clock = Database::open(
        Options::default()
            .disk("/db")
            .file_system(Arc::new(SimulatedFileSystem::new(2))),
    )
    .unwrap();
    assert!(!clock.design().contains("lru2"), "{}", clock.design());
}

// ----- regressions found by review ---------------------------------------------------

fn sim_options(fs: &SimulatedFileSystem) -> Options {
    Options::default()
        .disk("/db")
        .file_system(Arc::new(fs.clone()))
        .buffer_pool(16 * verso::disk::PAGE_SIZE)
        .log_segment_bytes(1 << 20)
        .autovacuum_naptime(None)
        .checkpoint_after_log_bytes(None)
}

/// A `create_table` that failed on an I/O error (nothing else failed: the log is fine)
/// can be retried, and the database reopens afterwards. Each run injects one EIO at the
/// n-th file operation of the creation.
#[test]
fn regression_a_create_table_that_failed_on_an_io_error_can_be_retried() {
    use verso::fs::Fault;
    let mut problems = Vec::new();
    let mut failed_at_all = 0;
    for n in 1..40u64 {
        let fs = SimulatedFileSystem::new(300 + n);
        {
            let db = Database::open(sim_options(&fs)).unwrap();
            fs.fail_after(n, Fault::Eio);
            let first = db.create_table("accounts", accounts_schema());
            fs.clear_faults();
            let Err(first) = first else { continue };
            failed_at_all += 1;
            match db.create_table("accounts", accounts_schema()) {
                Ok(id) => {
                    let mut txn = db.begin(Isolation::Snapshot);
                    if let Err(e) = txn
                        .insert(id, &account(1, "o", 1))
                        .and_then(|()| txn.commit())
                    {
                        problems.push(format!("n={n}: ({first}) retried table unusable: {e}"));
                    }
                }
                // A failed log is for good: the retry may report it.
                Err(Error::DurabilityLost { .. }) => {}
                Err(e) => problems.push(format!("n={n}: first ({first}), retry: {e:?}")),
            }
            let _ = db.close();
        }
        match Database::open(sim_options(&fs)) {
            Ok(db) => {
                let _ = db.close();
            }
            Err(e) => problems.push(format!("n={n}: reopen: {e:?}")),
        }
    }
    assert!(failed_at_all > 0);
    assert!(problems.is_empty(), "{problems:#?}");
}

/// A commit whose commit-log entry page cannot be read back (an I/O error while the page
/// was evicted) fails with that error; it must not panic.
#[test]
fn regression_a_commit_whose_commit_log_page_cannot_be_read_fails_without_panicking() {
    use verso::fs::Fault;
    let fs = SimulatedFileSystem::new(77);
    let db = Database::open(sim_options(&fs)).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let owner = "x".repeat(200);
    for batch in 0..4u64 {
        let mut txn = db.begin(Isolation::Snapshot);
        for id in batch * 500..(batch + 1) * 500 {
            txn.insert(accounts, &account(id, &owner, 0)).unwrap();
        }
        txn.commit().unwrap();
    }
    // Vacuum freezes every tuple (reads need no commit-log lookup any more); the
    // checkpoint leaves every page clean.
    db.collect_garbage();
    db.checkpoint().unwrap();
    let mut writer = db.begin(Isolation::Snapshot);
    assert!(writer
        .update(accounts, &[Value::U64(0)], &[(2, Value::I64(1))])
        .unwrap());
    // A long read evicts the commit log's pages from the 16-frame pool.
    {
        let reader = db.begin_read_only(Isolation::Snapshot);
        assert_eq!(reader.scan(accounts, ..).unwrap().count(), 2000);
    }
    fs.fail_after(1, Fault::Eio);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.commit()));
    fs.clear_faults();
    match outcome {
        Ok(Err(_)) => {}
        Ok(Ok(())) => panic!("the commit did no I/O: the test did not reach its case"),
        Err(panic) => panic!(
            "the commit panicked: {:?}",
            panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
        ),
    }
}

/// A serializable scan that an I/O error cut short has still shown its rows to the
/// program: either they are recorded as read, or the transaction can no longer commit.
/// Here the program read row 0 before the error, another transaction then changed row 0
/// and committed, and the scanner wrote elsewhere and committed: a write skew.
#[test]
fn regression_rows_a_failed_serializable_scan_showed_are_validated() {
    use verso::fs::Fault;
    for k in 1..60u64 {
        let fs = SimulatedFileSystem::new(900 + k);
        let db = Database::open(sim_options(&fs)).unwrap();
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let owner = "x".repeat(200);
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..1000u64 {
            txn.insert(accounts, &account(id, &owner, 0)).unwrap();
        }
        txn.commit().unwrap();
        db.checkpoint().unwrap();
        let mut scanner = db.begin(Isolation::Serializable);
        let mut seen = 0;
        fs.fail_after(k, Fault::Eio);
        let scanned = scanner.scan_view(accounts, .., |_| {
            seen += 1;
            true
        });
        fs.clear_faults();
        if scanned.is_ok() || seen == 0 {
            continue;
        }
        // Row 0 was handed to the program. Another transaction changes it and commits.
        let mut other = db.begin(Isolation::Serializable);
        if other
            .update(accounts, &[Value::U64(0)], &[(2, Value::I64(-100))])
            .is_err()
            || other.commit().is_err()
        {
            continue; // the fault failed more than the scan
        }
        // The scanner, having seen row 0's old balance, writes elsewhere and commits.
        let wrote = scanner.update(accounts, &[Value::U64(999)], &[(2, Value::I64(100))]);
        let committed = wrote.and_then(|_| scanner.commit());
        assert!(
            committed.is_err(),
            "k={k}: a serializable transaction that saw {seen} rows of a failed scan \
             committed after another changed one of them"
        );
        return;
    }
    panic!("no fault cut a scan after its first row");
}

/// Dropping the last handle releases the directory (as `close` does): another `open`
/// right after succeeds. The background worker must not keep the engine (and its
/// directory lock) alive past the drop by holding the last reference during a round.
#[test]
fn regression_dropping_the_last_handle_releases_the_directory_at_once() {
    let fs = SimulatedFileSystem::new(11);
    fs.set_sync_latency(
        std::time::Duration::from_millis(20),
        std::time::Duration::from_millis(20),
    );
    let options = || {
        sim_options(&fs)
            .durability(Durability::None)
            .autovacuum_naptime(Some(std::time::Duration::from_millis(1)))
            .checkpoint_after_log_bytes(Some(1))
    };
    for round in 0..5u64 {
        let db = Database::open(options()).unwrap();
        let accounts = match db.table("accounts") {
            Ok(id) => id,
            Err(_) => db.create_table("accounts", accounts_schema()).unwrap(),
        };
        let mut txn = db.begin(Isolation::Snapshot);
        for id in 0..50u64 {
            txn.insert(accounts, &account(round * 1000 + id, "o", 0))
                .unwrap();
        }
        txn.commit().unwrap();
        // The worker sees the log grew and starts a checkpoint (its syncs are slow).
        std::thread::sleep(std::time::Duration::from_millis(5));
        drop(db);
        match Database::open(options()) {
            Ok(db) => drop(db),
            Err(e) => panic!("round {round}: reopening right after the drop: {e:?}"),
        }
    }
}

/// One background checkpoint that failed on a transient write error (the log is fine, the
/// database goes on) must not end the background worker: autovacuum and later
/// checkpoints go on.
#[test]
fn regression_a_failed_background_checkpoint_does_not_stop_autovacuum_for_good() {
    use verso::fs::Fault;
    let fs = SimulatedFileSystem::new(12);
    let db = Database::open(
        sim_options(&fs)
            .buffer_pool(256 * verso::disk::PAGE_SIZE)
            .durability(Durability::Sync)
            .autovacuum_naptime(Some(std::time::Duration::from_millis(20)))
            .checkpoint_after_log_bytes(Some(1)),
    )
    .unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 0..200u64 {
        txn.insert(accounts, &account(id, "o", 0)).unwrap();
    }
    txn.commit().unwrap();
    let checkpoints = || db.stats().disk.unwrap().page_log.checkpoints;
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what} never happened"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    wait_for("a first background checkpoint", &|| checkpoints() >= 1);
    // A commit (synced) grows the log; the next file operation, the worker's checkpoint
    // writing a dirty page, fails once.
    let mut txn = db.begin(Isolation::Snapshot);
    txn.update(accounts, &[Value::U64(1)], &[(2, Value::I64(1))])
        .unwrap();
    txn.commit().unwrap();
    let before = checkpoints();
    fs.fail_after(1, Fault::Eio);
    std::thread::sleep(std::time::Duration::from_millis(200));
    fs.clear_faults();
    // The database is fine: writes and a checkpoint of our own succeed.
    let mut txn = db.begin(Isolation::Snapshot);
    txn.update(accounts, &[Value::U64(2)], &[(2, Value::I64(1))])
        .unwrap();
    txn.commit().unwrap();
    // Dead tuples past autovacuum's threshold; the worker should vacuum them.
    for round in 0..2 {
        for id in 0..200u64 {
            let mut txn = db.begin(Isolation::Snapshot);
            txn.update(accounts, &[Value::U64(id)], &[(2, Value::I64(round))])
                .unwrap();
            txn.commit().unwrap();
        }
    }
    wait_for("a background checkpoint after the failed one", &|| {
        checkpoints() > before
    });
    wait_for("autovacuum after a failed background checkpoint", &|| {
        db.stats().disk.unwrap().vacuums > 0
    });
}

/// Found by the model test once it ran the disk engine: an update of a key that only
/// another, running transaction wrote (its insert, invisible to this snapshot) answered
/// "no such row"; the in-memory engine's rule, first-updater-wins on the row, makes it a
/// write conflict (the write meets the row's newest change).
#[test]
fn regression_an_update_of_a_key_a_running_transaction_inserted_conflicts() {
    for options in common::disk_configurations() {
        let db = common::open(&options);
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let mut inserter = db.begin(Isolation::Snapshot);
        inserter.insert(accounts, &account(1, "a", 1)).unwrap();
        let mut updater = db.begin(Isolation::Snapshot);
        assert!(matches!(
            updater.update(accounts, &[Value::U64(1)], &[(2, Value::I64(2))]),
            Err(Error::WriteConflict { .. })
        ));
        let mut deleter = db.begin(Isolation::Snapshot);
        assert!(matches!(
            deleter.delete(accounts, &[Value::U64(1)]),
            Err(Error::WriteConflict { .. })
        ));
        inserter.commit().unwrap();
    }
}

/// Found by the model test: an insert of a key whose row this snapshot sees but another,
/// running transaction deleted was refused as a duplicate key; the newest change is the
/// other transaction's, so it is a write conflict first (as in memory).
#[test]
fn regression_an_insert_over_a_row_a_running_transaction_deleted_conflicts() {
    for options in common::disk_configurations() {
        let db = common::open(&options);
        let accounts = db.create_table("accounts", accounts_schema()).unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(accounts, &account(1, "a", 1)).unwrap();
        txn.commit().unwrap();
        let mut deleter = db.begin(Isolation::Snapshot);
        assert!(deleter.delete(accounts, &[Value::U64(1)]).unwrap());
        let mut inserter = db.begin(Isolation::Snapshot);
        assert!(matches!(
            inserter.insert(accounts, &account(1, "b", 2)),
            Err(Error::WriteConflict { .. })
        ));
        deleter.commit().unwrap();
    }
}

/// A database on the simulated disk with a pool large enough that nothing is evicted, no
/// autovacuum and no checkpoint but the test's: every page write is the test's flush.
fn counting_database(fs: &SimulatedFileSystem) -> (Database, verso::TableId) {
    let db = Database::open(sim_options(fs).buffer_pool(256 * verso::disk::PAGE_SIZE)).unwrap();
    let accounts = db.create_table("accounts", accounts_schema()).unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 0..20 {
        txn.insert(accounts, &account(id, "o", 0)).unwrap();
    }
    txn.commit().unwrap();
    // Every row read once (hint bits set), then every page written: the pool is warm and
    // clean.
    assert_eq!(all_rows(&db, accounts).len(), 20);
    db.checkpoint().unwrap();
    (db, accounts)
}

fn pool_stats(db: &Database) -> verso::disk::BufferPoolStats {
    db.stats().disk.expect("a disk database").buffer_pool
}

/// What the pool counted since `before`: (pages dirtied by new versions, by old versions'
/// stamps, by hint bits, by index changes).
fn dirtied_since(db: &Database, before: &verso::disk::BufferPoolStats) -> (u64, u64, u64, u64) {
    let now = pool_stats(db);
    (
        now.pages_dirtied_by_new_versions - before.pages_dirtied_by_new_versions,
        now.pages_dirtied_by_old_version_stamps - before.pages_dirtied_by_old_version_stamps,
        now.pages_dirtied_by_hint_bits - before.pages_dirtied_by_hint_bits,
        now.pages_dirtied_by_index_changes - before.pages_dirtied_by_index_changes,
    )
}

/// A HOT update (no indexed column changed) on a warm, clean page dirties that one heap
/// page, under both the new version and the old version's stamp, and no index page; the
/// page dirtied is one page (the commit log's page is the other dirtied).
#[test]
fn a_hot_update_dirties_one_heap_page_by_a_new_version_and_a_stamp_and_no_index_page() {
    let fs = SimulatedFileSystem::new(71);
    let (db, accounts) = counting_database(&fs);
    let before = pool_stats(&db);
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(accounts, &[Value::U64(3)], &[(2, Value::I64(5))])
        .unwrap());
    txn.commit().unwrap();
    assert_eq!(dirtied_since(&db, &before), (1, 1, 0, 0));
    let now = pool_stats(&db);
    assert_eq!(
        now.pages_dirtied - before.pages_dirtied,
        2,
        "the heap page and the commit log's"
    );
    // Another update of a row on the same, still dirty, page dirties nothing new.
    let before = now;
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(accounts, &[Value::U64(4)], &[(2, Value::I64(5))])
        .unwrap());
    txn.commit().unwrap();
    assert_eq!(dirtied_since(&db, &before), (0, 0, 0, 0));
    assert_eq!(pool_stats(&db).pages_dirtied, before.pages_dirtied);
}

/// An update of an indexed column is not HOT: the new version goes to another page (a
/// new one: the only heap page is avoided), the old one is stamped on its own page, and
/// the primary and secondary indexes each take an entry on a leaf.
#[test]
fn a_non_hot_update_dirties_a_second_heap_page_and_a_leaf_of_each_index() {
    let fs = SimulatedFileSystem::new(72);
    let (db, accounts) = counting_database(&fs);
    let before = pool_stats(&db);
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(accounts, &[Value::U64(3)], &[(1, Value::from("p"))])
        .unwrap());
    txn.commit().unwrap();
    assert_eq!(dirtied_since(&db, &before), (1, 1, 0, 2));
}

/// A read after a commit sets the hint bits of the tuples it resolved: one heap page
/// dirtied by hint bits, nothing else.
#[test]
fn a_read_after_a_commit_dirties_its_page_by_hint_bits() {
    let fs = SimulatedFileSystem::new(73);
    let (db, accounts) = counting_database(&fs);
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(accounts, &[Value::U64(3)], &[(2, Value::I64(5))])
        .unwrap());
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    let before = pool_stats(&db);
    let txn = db.begin(Isolation::Snapshot);
    assert_eq!(
        txn.get(accounts, &[Value::U64(3)]).unwrap(),
        Some(account(3, "o", 5))
    );
    drop(txn);
    assert_eq!(dirtied_since(&db, &before), (0, 0, 1, 0));
    assert_eq!(pool_stats(&db).pages_dirtied - before.pages_dirtied, 1);
}

/// A heap page whose only change since it was written is an aborted transaction's is
/// written for an aborted transaction; the same change committed is not, nor is a page
/// a committed transaction changed too before it was written. Index pages never count
/// (their changes name no transaction).
#[test]
fn a_page_changed_only_by_an_aborted_transaction_is_written_for_it() {
    let fs = SimulatedFileSystem::new(74);
    let (db, accounts) = counting_database(&fs);
    let written_for_aborted = |db: &Database| pool_stats(db).pages_written_for_aborted_transactions;
    assert_eq!(written_for_aborted(&db), 0);

    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(accounts, &account(100, "o", 0)).unwrap();
    txn.abort();
    db.checkpoint().unwrap();
    assert_eq!(written_for_aborted(&db), 1, "the heap page it inserted on");

    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(accounts, &account(101, "o", 0)).unwrap();
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    assert_eq!(written_for_aborted(&db), 1, "a committed insert's page");

    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(accounts, &[Value::U64(5)], &[(2, Value::I64(1))])
        .unwrap());
    txn.abort();
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(accounts, &[Value::U64(6)], &[(2, Value::I64(1))])
        .unwrap());
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    assert_eq!(
        written_for_aborted(&db),
        1,
        "a page a committed transaction changed too"
    );
}
