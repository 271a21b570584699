//! The bank test, for every configuration: writers move money between accounts while
//! readers check, in their snapshots, that the total never changes. It catches commits
//! that are not atomic for readers (a reader seeing one side of a transfer), lost updates,
//! and pruning that changes what a running snapshot reads.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{all_databases, create_accounts, BALANCE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use verso::{Database, Error, Isolation, TableId, Transaction, Value};

const ACCOUNTS: u64 = 50;
const INITIAL_BALANCE: i64 = 1_000;
const TOTAL: i64 = ACCOUNTS as i64 * INITIAL_BALANCE;
const WRITERS: u64 = 2;
const TRANSFERS_PER_WRITER: u64 = 4_000;
const READERS: u64 = 2;

/// What the writers did.
#[derive(Default)]
struct Tally {
    commits: AtomicU64,
    conflicts: AtomicU64,
    reader_checks: AtomicU64,
}

/// Moves a random amount between two random accounts until it commits; returns the number
/// of write conflicts it retried.
fn transfer(db: &Database, design: &str, table: TableId, rng: &mut StdRng) -> u64 {
    let from = rng.random_range(0..ACCOUNTS);
    let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
    assert_ne!(from, to);
    let amount = rng.random_range(1..=100i64);
    let mut conflicts = 0;
    loop {
        let mut txn = db.begin(Isolation::Snapshot);
        match try_transfer(&mut txn, table, from, to, amount) {
            Ok(()) => {
                txn.commit()
                    .unwrap_or_else(|e| panic!("{design}: commit of a transfer: {e}"));
                return conflicts;
            }
            Err(Error::WriteConflict { .. }) => {
                // Rolled back already: every later call says so.
                assert_eq!(
                    txn.get(table, &[Value::U64(from)]),
                    Err(Error::TransactionAborted),
                    "{design}"
                );
                assert_eq!(txn.commit(), Err(Error::TransactionAborted), "{design}");
                conflicts += 1;
            }
            Err(error) => panic!("{design}: transfer {from} -> {to}: {error}"),
        }
    }
}

fn try_transfer(
    txn: &mut Transaction<'_>,
    table: TableId,
    from: u64,
    to: u64,
    amount: i64,
) -> verso::Result<()> {
    let balance = |txn: &Transaction<'_>, id: u64| -> verso::Result<i64> {
        let row = txn
            .get(table, &[Value::U64(id)])?
            .expect("accounts are never deleted");
        Ok(row[BALANCE].as_i64().expect("balance is I64"))
    };
    let from_balance = balance(txn, from)?;
    let to_balance = balance(txn, to)?;
    let found = txn.update(
        table,
        &[Value::U64(from)],
        &[(BALANCE, Value::I64(from_balance - amount))],
    )?;
    assert!(found, "account {from} exists");
    let found = txn.update(
        table,
        &[Value::U64(to)],
        &[(BALANCE, Value::I64(to_balance + amount))],
    )?;
    assert!(found, "account {to} exists");
    Ok(())
}

/// The balances `txn` sees, by a scan and by one `get` per account; asserts both agree,
/// cover every account and sum to the total. Returns them.
fn check_snapshot(design: &str, txn: &Transaction<'_>, table: TableId, context: &str) -> Vec<i64> {
    let scanned = txn
        .scan(table, ..)
        .unwrap_or_else(|e| panic!("{design}: {context}: scan: {e}"));
    let ids: Vec<u64> = scanned.iter().filter_map(|row| row[0].as_u64()).collect();
    assert_eq!(
        ids,
        (0..ACCOUNTS).collect::<Vec<_>>(),
        "{design}: {context}: the scan must see every account once, in order"
    );
    let by_scan: Vec<i64> = scanned
        .iter()
        .map(|row| row[BALANCE].as_i64().expect("balance"))
        .collect();
    let by_get: Vec<i64> = (0..ACCOUNTS)
        .map(|id| {
            txn.get(table, &[Value::U64(id)])
                .unwrap_or_else(|e| panic!("{design}: {context}: get: {e}"))
                .unwrap_or_else(|| panic!("{design}: {context}: account {id} missing"))[BALANCE]
                .as_i64()
                .expect("balance")
        })
        .collect();
    assert_eq!(
        by_scan.iter().sum::<i64>(),
        TOTAL,
        "{design}: {context}: the total by scan changed (start_ts {})",
        txn.start_ts()
    );
    assert_eq!(
        by_scan, by_get,
        "{design}: {context}: scan and get disagree within one snapshot"
    );
    by_scan
}

/// Runs the writers, and `readers` short-snapshot readers; if `long_reader`, one more
/// reader holds a single snapshot for the whole run and re-checks it all along.
fn run_bank(long_reader: bool) {
    for db in all_databases() {
        let design = db.design();
        let table = create_accounts(&db, ACCOUNTS, INITIAL_BALANCE);
        let before = db.stats();
        let tally = Tally::default();
        let writers_done = AtomicU64::new(0);
        let stop = AtomicBool::new(false);

        std::thread::scope(|scope| {
            for writer in 0..WRITERS {
                let (db, design, tally, writers_done) = (&db, &design, &tally, &writers_done);
                scope.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(0xBA2C + writer);
                    for _ in 0..TRANSFERS_PER_WRITER {
                        let conflicts = transfer(db, design, table, &mut rng);
                        tally.conflicts.fetch_add(conflicts, Ordering::Relaxed);
                        tally.commits.fetch_add(1, Ordering::Relaxed);
                    }
                    writers_done.fetch_add(1, Ordering::SeqCst);
                });
            }
            for reader in 0..READERS {
                let (db, design, tally, writers_done) = (&db, &design, &tally, &writers_done);
                scope.spawn(move || {
                    let mut rounds = 0u64;
                    // At least a few rounds, then until the writers are done.
                    while rounds < 5 || writers_done.load(Ordering::SeqCst) < WRITERS {
                        let txn = db.begin(Isolation::Snapshot);
                        let context = format!("reader {reader}, round {rounds}");
                        check_snapshot(design, &txn, table, &context);
                        txn.commit()
                            .unwrap_or_else(|e| panic!("{design}: read-only commit: {e}"));
                        rounds += 1;
                    }
                    tally.reader_checks.fetch_add(rounds, Ordering::Relaxed);
                });
            }
            if long_reader {
                let (db, design, tally, stop) = (&db, &design, &tally, &stop);
                scope.spawn(move || {
                    let txn = db.begin(Isolation::Snapshot);
                    let first = check_snapshot(design, &txn, table, "long reader, first look");
                    let mut rounds = 1u64;
                    while !stop.load(Ordering::SeqCst) {
                        let now = check_snapshot(
                            design,
                            &txn,
                            table,
                            &format!("long reader, round {rounds}"),
                        );
                        // Not only the sum: every balance is what the snapshot first saw.
                        assert_eq!(
                            now, first,
                            "{design}: the long reader's snapshot changed in round {rounds}"
                        );
                        rounds += 1;
                    }
                    let last = check_snapshot(design, &txn, table, "long reader, last look");
                    assert_eq!(last, first, "{design}: the long reader's snapshot changed");
                    txn.commit()
                        .unwrap_or_else(|e| panic!("{design}: long reader commit: {e}"));
                    tally.reader_checks.fetch_add(rounds, Ordering::Relaxed);
                });
                // Stop the long reader once the writers are through.
                let writers_done = &writers_done;
                scope.spawn(move || {
                    while writers_done.load(Ordering::SeqCst) < WRITERS {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    stop.store(true, Ordering::SeqCst);
                });
            }
        });

        let commits = tally.commits.load(Ordering::Relaxed);
        let conflicts = tally.conflicts.load(Ordering::Relaxed);
        assert_eq!(commits, WRITERS * TRANSFERS_PER_WRITER, "{design}");
        assert!(
            tally.reader_checks.load(Ordering::Relaxed) >= READERS * 5,
            "{design}"
        );

        let txn = db.begin(Isolation::Snapshot);
        check_snapshot(&design, &txn, table, "after the run");
        txn.commit().expect("read-only commit");

        let after = db.stats();
        assert_eq!(
            after.commits - before.commits,
            commits,
            "{design}: commits counted"
        );
        assert_eq!(
            after.aborts_write_conflict - before.aborts_write_conflict,
            conflicts,
            "{design}: write conflicts counted"
        );
        assert_eq!(after.aborts_by_user, before.aborts_by_user, "{design}");
        // Two records per transfer.
        assert_eq!(
            after.versions_created - before.versions_created,
            2 * commits + (after.versions_rolled_back - before.versions_rolled_back),
            "{design}: versions created = committed + rolled back"
        );
        db.collect_garbage();
        let stats = db.stats();
        if common::collects(&db) {
            assert_eq!(stats.live_versions(), 0, "{design}: {stats:?}");
        } else {
            // Nothing freed but rollbacks and folded insert records.
            assert_eq!(
                stats.live_versions(),
                stats.versions_created - stats.versions_rolled_back - stats.insert_records_folded,
                "{design}: {stats:?}"
            );
            assert_eq!(stats.versions_reclaimed, 0, "{design}");
        }
        assert_eq!(
            db.primary_index_entries(table),
            Ok(ACCOUNTS as usize),
            "{design}"
        );
        eprintln!(
            "{design}: {commits} transfers, {conflicts} conflicts retried, {} reader checks",
            tally.reader_checks.load(Ordering::Relaxed)
        );
    }
}

#[test]
fn transfers_keep_the_total_for_short_readers() {
    run_bank(false);
}

#[test]
fn transfers_keep_the_total_for_a_long_reader() {
    run_bank(true);
}
