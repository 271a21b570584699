//! The bank test, for every configuration: writers move money between accounts while
//! readers check, in their snapshots, that the total never changes. It catches commits
//! that are not atomic for readers (a reader seeing one side of a transfer), lost updates,
//! and pruning that changes what a running snapshot reads.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::ScanRows;
use common::{all_databases, create_accounts, BALANCE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use verso::{ConcurrencyControl, Database, Error, Isolation, TableId, Transaction, Value};

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
    /// Reader attempts refused (MVTO's and MV2PL's locks, SSN's commit test) and retried.
    reader_retries: AtomicU64,
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
            Ok(()) => match txn.commit() {
                Ok(()) => return conflicts,
                // A validating protocol (MVOCC, SSN, MVTO's phantom check) refused it.
                Err(e @ Error::SerializationFailure { .. }) if e.is_retryable() => conflicts += 1,
                Err(e) => panic!("{design}: commit of a transfer: {e}"),
            },
            // First-updater-wins, or a lock or read timestamp of MVTO or MV2PL.
            Err(Error::WriteConflict { .. } | Error::LockConflict { .. }) => {
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
/// cover every account and sum to the total. Returns them, or the retryable error that
/// rolled the reader back (MVTO's and MV2PL's locks refuse reads).
fn check_snapshot(
    design: &str,
    txn: &Transaction<'_>,
    table: TableId,
    context: &str,
) -> verso::Result<Vec<i64>> {
    let retryable = |e: Error, what: &str| -> Error {
        assert!(e.is_retryable(), "{design}: {context}: {what}: {e}");
        e
    };
    let scanned = txn
        .scan(table, ..)
        .rows()
        .map_err(|e| retryable(e, "scan"))?;
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
            Ok(txn
                .get(table, &[Value::U64(id)])
                .map_err(|e| retryable(e, "get"))?
                .unwrap_or_else(|| panic!("{design}: {context}: account {id} missing"))[BALANCE]
                .as_i64()
                .expect("balance"))
        })
        .collect::<verso::Result<_>>()?;
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
    Ok(by_scan)
}

/// A reader of every account. Under MV2PL it is declared read-only (its snapshot, no
/// locks): readers that read-lock every account back to back leave a no-wait writer no
/// moment to lock two of them, and the writers starve (Wu et al. §7.2 see the same: MV2PL
/// "only completes a few transactions" beside undeclared readers). Locked reads beside
/// writers are exercised by `history.rs` and the anomaly suite's threaded lost update.
fn begin_reader(db: &Database) -> Transaction<'_> {
    if db.options().concurrency_control == ConcurrencyControl::Mv2pl {
        db.begin_read_only(Isolation::Snapshot)
    } else {
        db.begin(Isolation::Snapshot)
    }
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
                        let txn = begin_reader(db);
                        let context = format!("reader {reader}, round {rounds}");
                        if check_snapshot(design, &txn, table, &context).is_err() {
                            tally.reader_retries.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        match txn.commit() {
                            Ok(()) => rounds += 1,
                            // SSN validates read-only transactions too.
                            Err(e) if e.is_retryable() => {
                                tally.reader_retries.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{design}: read-only commit: {e}"),
                        }
                    }
                    tally.reader_checks.fetch_add(rounds, Ordering::Relaxed);
                });
            }
            if long_reader {
                let (db, design, tally, stop) = (&db, &design, &tally, &stop);
                scope.spawn(move || {
                    let mut rounds = 0u64;
                    // A refusal (MVTO's locks; SSN at commit) restarts the reader on a new
                    // snapshot, which again must never change.
                    'attempt: loop {
                        let txn = begin_reader(db);
                        let Ok(first) =
                            check_snapshot(design, &txn, table, "long reader, first look")
                        else {
                            tally.reader_retries.fetch_add(1, Ordering::Relaxed);
                            continue;
                        };
                        rounds += 1;
                        while !stop.load(Ordering::SeqCst) {
                            let context = format!("long reader, round {rounds}");
                            let Ok(now) = check_snapshot(design, &txn, table, &context) else {
                                tally.reader_retries.fetch_add(1, Ordering::Relaxed);
                                continue 'attempt;
                            };
                            // Not only the sum: every balance is what the snapshot first saw.
                            assert_eq!(
                                now, first,
                                "{design}: the long reader's snapshot changed in round {rounds}"
                            );
                            rounds += 1;
                        }
                        match check_snapshot(design, &txn, table, "long reader, last look") {
                            Ok(last) => {
                                assert_eq!(
                                    last, first,
                                    "{design}: the long reader's snapshot changed"
                                )
                            }
                            Err(_) => {
                                tally.reader_retries.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                        }
                        match txn.commit() {
                            Ok(()) => break,
                            Err(e) if e.is_retryable() => {
                                tally.reader_retries.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{design}: long reader commit: {e}"),
                        }
                    }
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
        check_snapshot(&design, &txn, table, "after the run").expect("nothing runs beside it");
        txn.commit().expect("read-only commit");

        let after = db.stats();
        assert_eq!(
            after.commits - before.commits,
            commits,
            "{design}: commits counted"
        );
        let retries = tally.reader_retries.load(Ordering::Relaxed);
        let conflict_aborts = |s: &verso::Stats| {
            s.aborts_write_conflict + s.aborts_lock_conflict + s.aborts_serialization
        };
        assert_eq!(
            conflict_aborts(&after) - conflict_aborts(&before),
            conflicts + retries,
            "{design}: conflicts counted"
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
