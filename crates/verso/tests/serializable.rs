//! `Isolation::Serializable` beyond the anomaly schedules: validation keeps working when
//! Steam pruned the versions, a failed validation leaves no trace, commit records stay
//! bounded unless a serializable writer holds them, and declared read-only transactions
//! neither fail nor hold anything back. These are the mechanics of precision locking's
//! commit records, so they run over the protocols that validate with them at the snapshot:
//! the default and MVOCC (`common::precision_configurations`). MV2PL validates only its
//! scans, from the first scan on; MVTO and SSN validate otherwise (`docs/design/protocols.md`).

mod common;

use common::ScanRows;
use common::{create_items, item, item_key, items, open, precision_configurations};
use verso::{Error, GarbageCollector, Isolation, Options, Value};

/// T reads a row, then 500 snapshot-isolation writers update it (Steam prunes the chain
/// down to what live snapshots need); T's validation still finds the conflict.
#[test]
fn validation_outlives_eager_pruning() {
    let db = open(&Options::default().garbage_collector(GarbageCollector::Steam));
    let table = create_items(&db);
    let mut setup = db.begin(Isolation::Snapshot);
    setup.insert(table, &item("a", 1, 0, "x")).unwrap();
    setup.insert(table, &item("a", 2, 0, "y")).unwrap();
    setup.commit().unwrap();

    let mut t = db.begin(Isolation::Serializable);
    assert!(t.get(table, &item_key("a", 1)).unwrap().is_some());
    for round in 1..=500 {
        let mut writer = db.begin(Isolation::Snapshot);
        writer
            .update(
                table,
                &item_key("a", 1),
                &[(items::SCORE, Value::I64(round))],
            )
            .unwrap();
        writer.commit().unwrap();
    }
    let stats = db.stats();
    assert!(
        stats.versions_pruned_eagerly >= 490,
        "the versions were pruned: {stats:?}"
    );
    assert!(db.version_chain_length(table, &item_key("a", 1)).unwrap() <= Some(3));
    t.update(table, &item_key("a", 2), &[(items::SCORE, Value::I64(-1))])
        .unwrap();
    assert!(matches!(
        t.commit(),
        Err(Error::SerializationFailure { .. })
    ));
}

/// A failed validation rolls back every write: rows, columns and secondary-index entries.
#[test]
fn failed_validation_leaves_no_trace() {
    for options in precision_configurations() {
        let db = open(&options);
        let d = db.design();
        let table = create_items(&db);
        let mut setup = db.begin(Isolation::Snapshot);
        setup.insert(table, &item("a", 1, 5, "x")).unwrap();
        setup.commit().unwrap();
        let before = db.stats();

        let mut t = db.begin(Isolation::Serializable);
        assert!(t.get(table, &item_key("a", 1)).unwrap().is_some(), "{d}");
        t.insert(table, &item("b", 7, 70, "inserted")).unwrap();
        t.update(table, &item_key("a", 1), &[(items::NAME, "renamed".into())])
            .unwrap();
        // A phantom: v commits a row into the range t is about to scan.
        let mut v = db.begin(Isolation::Snapshot);
        v.insert(table, &item("a", 0, 1, "phantom")).unwrap();
        v.commit().unwrap();
        // t's scan of region "a" happens after v's commit but at t's snapshot: it does not
        // see v's row, and validation must notice.
        let seen = t
            .scan(table, vec!["a".into()]..=vec!["a".into()])
            .rows()
            .unwrap();
        assert_eq!(seen.len(), 1, "{d}: t's snapshot");
        let error = t
            .commit()
            .expect_err("v's insert falls into t's scanned range");
        assert!(
            matches!(error, Error::SerializationFailure { .. }),
            "{d}: {error}"
        );
        assert!(error.is_retryable(), "{d}");

        let check = db.begin(Isolation::Snapshot);
        assert_eq!(check.get(table, &item_key("b", 7)).unwrap(), None, "{d}");
        assert_eq!(
            check.get(table, &item_key("a", 1)).unwrap().unwrap()[items::NAME],
            Value::Text("x".into()),
            "{d}"
        );
        for name in ["inserted", "renamed"] {
            let entries = check
                .scan_index(table, items::BY_NAME, vec![name.into()]..=vec![name.into()])
                .rows()
                .unwrap();
            assert!(
                entries.is_empty(),
                "{d}: index entry {name} of the failed writes"
            );
        }
        let after = db.stats();
        assert_eq!(
            after.aborts_serialization,
            before.aborts_serialization + 1,
            "{d}"
        );
        assert_eq!(after.commits, before.commits + 1, "{d}: only v committed");
    }
}

/// Commit records live only while a serializable writer may validate against them: not
/// behind a long snapshot reader or a declared read-only serializable reader, and they go
/// away once a long serializable writer ends.
#[test]
fn commit_records_stay_bounded_unless_a_serializable_writer_needs_them() {
    // Under MVOCC every undeclared transaction validates, so the long snapshot below would
    // rightly hold the records: this is the default protocol's promise.
    for options in common::si_configurations() {
        let db = open(&options);
        let d = db.design();
        let table = create_items(&db);
        let mut setup = db.begin(Isolation::Snapshot);
        for id in 0..10 {
            setup.insert(table, &item("a", id, 0, "x")).unwrap();
        }
        setup.commit().unwrap();

        let long_snapshot = db.begin(Isolation::Snapshot);
        let long_read_only = db.begin_read_only(Isolation::Serializable);
        let read_only_view = long_read_only.scan(table, ..).rows().unwrap();
        let mut max_live = 0;
        for round in 0..1000 {
            let mut writer = db.begin(Isolation::Serializable);
            let id = round % 10;
            let score = writer.get(table, &item_key("a", id)).unwrap().unwrap()[items::SCORE]
                .as_i64()
                .unwrap();
            writer
                .update(
                    table,
                    &item_key("a", id),
                    &[(items::SCORE, Value::I64(score + 1))],
                )
                .unwrap();
            writer.commit().unwrap();
            max_live = max_live.max(db.stats().live_commit_records());
        }
        assert!(
            max_live <= 2,
            "{d}: {max_live} commit records behind long readers"
        );
        assert_eq!(
            long_read_only.scan(table, ..).rows().unwrap(),
            read_only_view,
            "{d}"
        );
        long_read_only
            .commit()
            .expect("a read-only transaction never fails");
        drop(long_snapshot);

        // A long serializable writer needs every record committed after it began.
        let long_writer = db.begin(Isolation::Serializable);
        for round in 0..100 {
            let mut writer = db.begin(Isolation::Serializable);
            writer
                .update(
                    table,
                    &item_key("a", round % 10),
                    &[(items::WEIGHT, Value::F64(1.0))],
                )
                .unwrap();
            writer.commit().unwrap();
        }
        assert!(
            db.stats().live_commit_records() >= 100,
            "{d}: {:?}",
            db.stats()
        );
        drop(long_writer);
        let mut last = db.begin(Isolation::Serializable);
        last.update(
            table,
            &item_key("a", 0),
            &[(items::WEIGHT, Value::F64(2.0))],
        )
        .unwrap();
        last.commit().unwrap();
        assert_eq!(db.stats().live_commit_records(), 0, "{d}: {:?}", db.stats());
    }
}

/// The sum of every account's balance, as `txn` sees it.
fn total_balance(txn: &verso::Transaction<'_>, table: verso::TableId) -> i64 {
    txn.scan(table, ..)
        .rows()
        .unwrap()
        .iter()
        .map(|row| row[common::BALANCE].as_i64().unwrap())
        .sum()
}

/// Moves one unit from account `from` to account `to` (reading both balances first).
fn move_one(
    txn: &mut verso::Transaction<'_>,
    table: verso::TableId,
    from: u64,
    to: u64,
) -> verso::Result<()> {
    let balance = |txn: &verso::Transaction<'_>, id: u64| {
        txn.get(table, &[Value::U64(id)]).map(|row| {
            row.expect("account")[common::BALANCE]
                .as_i64()
                .expect("i64")
        })
    };
    let (a, b) = (balance(txn, from)?, balance(txn, to)?);
    if from != to {
        txn.update(
            table,
            &[Value::U64(from)],
            &[(common::BALANCE, Value::I64(a - 1))],
        )?;
        txn.update(
            table,
            &[Value::U64(to)],
            &[(common::BALANCE, Value::I64(b + 1))],
        )?;
    }
    Ok(())
}

/// Declared read-only serializable transactions beside serializable writers on other
/// threads: they never fail and every report they make is a consistent total.
#[test]
fn read_only_transactions_never_fail_and_see_consistent_totals() {
    const ACCOUNTS: u64 = 8;
    for options in precision_configurations() {
        let db = open(&options);
        let d = db.design();
        let table = common::create_accounts(&db, ACCOUNTS, 100);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for seed in 0..2u64 {
                let (db, stop) = (&db, &stop);
                scope.spawn(move || {
                    let mut n = seed;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        n = n
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let (from, to) = ((n >> 33) % ACCOUNTS, (n >> 13) % ACCOUNTS);
                        let mut txn = db.begin(Isolation::Serializable);
                        let transfer = move_one(&mut txn, table, from, to);
                        match transfer.and_then(|()| txn.commit()) {
                            Ok(()) => {}
                            Err(e) if e.is_retryable() => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                });
            }
            for _ in 0..300 {
                let reader = db.begin_read_only(Isolation::Serializable);
                let total = total_balance(&reader, table);
                assert_eq!(total, 100 * ACCOUNTS as i64, "{d}");
                reader.commit().expect("read-only commits never fail");
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
}

/// Readers never abort a writer (Wu et al. Fig. 9): one serializable writer moves money
/// while two threads run serializable read-only transactions (declared and undeclared)
/// that scan every account; the writer never fails, the readers never fail.
#[test]
fn readers_never_abort_a_serializable_writer() {
    const ACCOUNTS: u64 = 8;
    const TRANSFERS: u64 = 2_000;
    for options in precision_configurations() {
        let db = open(&options);
        let d = db.design();
        let table = common::create_accounts(&db, ACCOUNTS, 100);
        let done = std::sync::atomic::AtomicBool::new(false);
        let reads = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for declared in [true, false] {
                let (db, done, reads, d) = (&db, &done, &reads, &d);
                scope.spawn(move || {
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        let reader = if declared {
                            db.begin_read_only(Isolation::Serializable)
                        } else {
                            db.begin(Isolation::Serializable)
                        };
                        let total = total_balance(&reader, table);
                        assert_eq!(total, 100 * ACCOUNTS as i64, "{d}");
                        reader.commit().expect("a reader never fails");
                        reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                });
            }
            for transfer in 0..TRANSFERS {
                let (from, to) = (transfer % ACCOUNTS, (transfer * 3 + 1) % ACCOUNTS);
                let mut txn = db.begin(Isolation::Serializable);
                move_one(&mut txn, table, from, to)
                    .unwrap_or_else(|e| panic!("{d}: the lone writer failed: {e}"));
                txn.commit()
                    .unwrap_or_else(|e| panic!("{d}: the lone writer failed: {e}"));
            }
            // A starved reader thread may not have started yet: let one read before stopping.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while reads.load(std::sync::atomic::Ordering::Relaxed) == 0
                && std::time::Instant::now() < deadline
            {
                std::thread::yield_now();
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let stats = db.stats();
        assert_eq!(
            stats.aborts_serialization + stats.aborts_write_conflict,
            0,
            "{d}"
        );
        assert!(reads.into_inner() > 0, "{d}: the readers ran");
    }
}
