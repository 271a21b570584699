//! Process crash loop: a child process runs transfers between accounts on a real directory
//! under `Durability::Sync`, with automatic checkpoints and small log segments, and writes
//! the id of every acknowledged transfer to an oracle file; the parent kills it with
//! SIGKILL at a random moment, reopens the directory, and checks that every acknowledged
//! transfer is there and that the balances still sum to what they started at. Then again,
//! on the same directory: each child first recovers what the previous one left.
//!
//! `CRASH_KILLS` sets the number of kills (default 100; the documented longer run is
//! `CRASH_KILLS=1000 cargo test --release -p verso --test crash_kill`).

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use verso::{ColumnType, Database, Durability, Error, Isolation, Options, Schema, Value};

const ACCOUNTS: u64 = 50;
const INITIAL_BALANCE: i64 = 1000;
const CHILD_DIR: &str = "VERSO_CRASH_KILL_DIR";
const CHILD_RUN: &str = "VERSO_CRASH_KILL_RUN";

/// The rows of a scan, collected (the iterator's first error, if any).
fn all_rows(scan: verso::Result<verso::Scan<'_, '_>>) -> verso::Result<Vec<Vec<Value>>> {
    scan?.map(|row| row.map(verso::Row::into_values)).collect()
}

fn options(dir: &Path) -> Options {
    Options::default()
        .path(dir)
        .durability(Durability::Sync)
        .checkpoint_after_log_bytes(Some(256 << 10))
        .log_segment_bytes(128 << 10)
}

fn oracle_path(dir: &Path) -> PathBuf {
    dir.with_extension("acknowledged")
}

/// Creates the tables and the accounts if the database does not hold them yet. A child
/// killed at its very start may have left the tables (each created durably on its own)
/// without the accounts (one transaction after them): then only the accounts are added.
/// (Seen once: a kill 20 ms after the start left the tables empty, and the check read a
/// balance sum of 0 as a lost transaction. Early kills now happen on purpose.)
fn prepare(db: &Database) {
    let table = |name: &str, schema: Schema| {
        db.table(name)
            .or_else(|_| db.create_table(name, schema))
            .unwrap()
    };
    let accounts = table(
        "accounts",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("balance", ColumnType::I64)
            .primary_key(&["id"]),
    );
    table(
        "history",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("from", ColumnType::U64)
            .column("to", ColumnType::U64)
            .column("amount", ColumnType::I64)
            .primary_key(&["id"])
            .index("by_from", &["from"]),
    );
    let txn = db.begin(Isolation::Snapshot);
    let loaded = txn.get(accounts, &[Value::U64(0)]).unwrap().is_some();
    txn.commit().unwrap();
    if loaded {
        return;
    }
    let mut txn = db.begin(Isolation::Snapshot);
    for id in 0..ACCOUNTS {
        txn.insert(accounts, &[Value::U64(id), Value::I64(INITIAL_BALANCE)])
            .unwrap();
    }
    txn.commit().unwrap();
}

/// The child: transfers on two threads until killed.
#[test]
fn crash_kill_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return; // Run by the harness itself: nothing to do.
    };
    let run: u64 = std::env::var(CHILD_RUN).unwrap().parse().unwrap();
    let dir = PathBuf::from(dir);
    let db = Database::open(options(&dir)).unwrap();
    prepare(&db);
    let oracle = std::sync::Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(oracle_path(&dir))
            .unwrap(),
    );
    std::thread::scope(|scope| {
        for thread in 0..2u64 {
            let db = &db;
            let oracle = &oracle;
            scope.spawn(move || {
                let accounts = db.table("accounts").unwrap();
                let history = db.table("history").unwrap();
                let mut rng = StdRng::seed_from_u64(run << 8 | thread);
                for seq in 0u64.. {
                    let id = run << 40 | thread << 32 | seq;
                    let from = rng.random_range(0..ACCOUNTS);
                    let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
                    let amount = rng.random_range(1..50);
                    let transfer = || -> Result<(), Error> {
                        let mut txn = db.begin(Isolation::Snapshot);
                        let balance = |txn: &verso::Transaction<'_>, id| {
                            txn.get(accounts, &[Value::U64(id)])
                                .map(|row| row.unwrap()[1].as_i64().unwrap())
                        };
                        let a = balance(&txn, from)?;
                        let b = balance(&txn, to)?;
                        txn.update(
                            accounts,
                            &[Value::U64(from)],
                            &[(1, Value::I64(a - amount))],
                        )?;
                        txn.update(accounts, &[Value::U64(to)], &[(1, Value::I64(b + amount))])?;
                        txn.insert(
                            history,
                            &[
                                Value::U64(id),
                                Value::U64(from),
                                Value::U64(to),
                                Value::I64(amount),
                            ],
                        )?;
                        txn.commit()
                    };
                    match transfer() {
                        Ok(()) => {
                            // One write per line: atomic with O_APPEND.
                            let line = format!("{id}\n");
                            oracle.lock().unwrap().write_all(line.as_bytes()).unwrap();
                        }
                        Err(error) if error.is_retryable() => {}
                        Err(error) => panic!("transfer {id}: {error}"),
                    }
                }
            });
        }
    });
}

/// The ids in the oracle: every line the child finished. A SIGKILL can cut the child's
/// last write where it crosses a 4 KiB page of the file (the kernel copies a write page
/// by page and stops at a fatal signal), leaving a line without its newline: an
/// acknowledgment the oracle did not get whole, so it names no id.
fn acknowledged(oracle: &str) -> Vec<u64> {
    oracle
        .split_inclusive('\n')
        .filter_map(|line| line.strip_suffix('\n'))
        .map(|line| line.parse().unwrap())
        .collect()
}

/// Found when a kill cut the oracle's last line at a page boundary of the file: the check
/// read "7586630231", the head of "75866302317xxx", as an acknowledged id that was missing.
#[test]
fn regression_a_line_the_kill_tore_in_the_oracle_is_no_acknowledged_id() {
    assert_eq!(acknowledged(""), Vec::<u64>::new());
    assert_eq!(acknowledged("12\n34\n"), vec![12, 34]);
    assert_eq!(acknowledged("12\n34\n7586630231"), vec![12, 34]);
}

/// Checks the directory against the oracle; returns the transfers found.
fn check(dir: &Path) -> usize {
    let db = Database::open(options(dir)).unwrap();
    prepare(&db);
    let accounts = db.table("accounts").unwrap();
    let history = db.table("history").unwrap();
    let txn = db.begin(Isolation::Snapshot);
    let total: i64 = all_rows(txn.scan(accounts, ..))
        .unwrap()
        .iter()
        .map(|row| row[1].as_i64().unwrap())
        .sum();
    assert_eq!(total, ACCOUNTS as i64 * INITIAL_BALANCE, "balances sum");
    let found: HashSet<u64> = all_rows(txn.scan(history, ..))
        .unwrap()
        .iter()
        .map(|row| row[0].as_u64().unwrap())
        .collect();
    let oracle = std::fs::read_to_string(oracle_path(dir)).unwrap_or_default();
    for id in acknowledged(&oracle) {
        assert!(found.contains(&id), "acknowledged transfer {id} is missing");
    }
    // The index agrees with the rows.
    let indexed = all_rows(txn.scan_index(history, "by_from", ..)).unwrap();
    assert_eq!(indexed.len(), found.len());
    drop(txn);
    db.close().unwrap();
    found.len()
}

#[test]
fn every_acknowledged_transfer_survives_sigkill() {
    let kills: u64 = std::env::var("CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let dir = std::env::temp_dir().join(format!("verso-crash-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(oracle_path(&dir));
    let mut rng = StdRng::seed_from_u64(u64::from(std::process::id()));
    let exe = std::env::current_exe().unwrap();
    let began = Instant::now();
    let mut transfers = 0;
    for run in 1..=kills {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_kill_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, &dir)
            .env(CHILD_RUN, run.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // One kill in eight comes within the child's first milliseconds: while it opens,
        // recovers and prepares the tables.
        let life = if rng.random_ratio(1, 8) {
            rng.random_range(0..20)
        } else {
            rng.random_range(20..250)
        };
        std::thread::sleep(Duration::from_millis(life));
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("the child of run {run} ended by itself ({status}): {stderr}");
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        transfers = check(&dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(oracle_path(&dir));
    assert!(transfers > 0, "no transfer was ever committed");
    eprintln!(
        "{kills} kills in {:.1} s; {transfers} transfers survived",
        began.elapsed().as_secs_f64()
    );
}
