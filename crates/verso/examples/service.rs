//! A small service on Verso: writer threads move money between accounts while a report
//! reads every account at one snapshot, slowly, the way an analytical query over live data
//! does.
//!
//! `cargo run --release --example service -- [seconds, default 3] [writers, default 4]`
//!
//! What it shows:
//! - **One transaction per task, begun on the thread that runs it.** A `Transaction` is
//!   not `Send`; each writer thread runs its own transactions through [`Database::run`],
//!   which begins, commits, and runs the closure again when the transaction lost a race
//!   (two transfers touching the same account at once).
//! - **A business rule inside the transaction.** A transfer that would overdraw reads the
//!   balance, writes nothing and reports it in its result; nothing needs rolling back.
//! - **A long report over an iterator.** The report walks the accounts with
//!   `txn.scan(..)`, taking its time between rows; the iterator holds no latch between
//!   rows, so the writers never wait for it, and it reads its snapshot throughout: the
//!   total it sums is exactly the money in the bank, however many transfers commit while
//!   it runs.
//! - **Rows as the program's own types.** `Account` implements `FromRow`, so rows are read
//!   by column name, not by position.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use verso::{
    ColumnType, Database, FromRow, IntoRow, Isolation, Options, Row, Schema, TableId, Value,
};

const ACCOUNTS: u64 = 2_000;
/// Transfers pick from the first few accounts more often, so that some collide.
const HOT_ACCOUNTS: u64 = 20;
const OPENING_BALANCE: i64 = 100;

/// One row of the `accounts` table.
#[derive(Debug)]
struct Account {
    id: u64,
    owner: String,
    balance: i64,
}

impl FromRow for Account {
    fn from_row(row: &Row<'_>) -> verso::Result<Self> {
        Ok(Account {
            id: row.get("id")?,
            owner: row.get("owner")?,
            balance: row.get("balance")?,
        })
    }
}

impl IntoRow for &Account {
    fn into_row(self) -> Vec<Value> {
        (self.id, self.owner.as_str(), self.balance).into_row()
    }
}

/// What a transfer came to.
enum Transfer {
    Done,
    /// The payer's balance was too small: nothing was written.
    Insufficient,
}

/// What a report found at its snapshot.
#[derive(Debug)]
struct Report {
    accounts: u64,
    total: i64,
    richest: Option<(String, i64)>,
    took: Duration,
}

/// What a whole run did.
#[derive(Debug, Default)]
struct Totals {
    transfers: u64,
    insufficient: u64,
    /// Attempts beyond the first, over all transfers.
    retries: u64,
    /// Transfers that still lost after the helper's last attempt.
    gave_up: u64,
    reports: Vec<Report>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut number = |what: &str, default: u64| -> Result<u64, String> {
        args.next().map_or(Ok(default), |arg| {
            arg.parse()
                .map_err(|_| format!("{what}: not a number: {arg:?}"))
        })
    };
    let seconds = number("seconds", 3)?;
    let writers = number("writers", 4)?.max(1);
    let totals = serve(
        Duration::from_secs(seconds),
        writers as usize,
        Duration::from_micros(50),
    )?;
    let money = ACCOUNTS as i64 * OPENING_BALANCE;
    let exact = totals.reports.iter().filter(|r| r.total == money).count();
    let slowest = totals
        .reports
        .iter()
        .map(|r| r.took)
        .max()
        .unwrap_or_default();
    println!(
        "{writers} writers: {} transfers committed, {} refused for want of money, {} retries \
         after conflicts, {} given up",
        totals.transfers, totals.insufficient, totals.retries, totals.gave_up
    );
    println!(
        "{} reports, each over every account at one snapshot while the transfers committed \
         (the slowest took {:.0} ms): {exact} of them summed exactly the bank's {money}",
        totals.reports.len(),
        slowest.as_secs_f64() * 1000.0
    );
    if let Some(last) = totals.reports.last() {
        println!("the last report's richest account: {:?}", last.richest);
    }
    Ok(())
}

/// Opens the bank, runs `writers` writer threads and one reporting thread for `run_for`,
/// and returns what they did. The report pauses `report_pause` after every 100 rows.
fn serve(
    run_for: Duration,
    writers: usize,
    report_pause: Duration,
) -> Result<Totals, Box<dyn std::error::Error>> {
    let db = Database::open(Options::default())?;
    let accounts = db.create_table(
        "accounts",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("owner", ColumnType::Text)
            .column("balance", ColumnType::I64)
            .primary_key(&["id"]),
    )?;
    db.run(Isolation::Snapshot, |txn| {
        for id in 0..ACCOUNTS {
            let account = Account {
                id,
                owner: format!("customer-{id}"),
                balance: OPENING_BALANCE,
            };
            txn.insert(accounts, &account.into_row())?;
        }
        Ok(())
    })?;

    let stop = AtomicBool::new(false);
    let retries = AtomicU64::new(0);
    let gave_up = AtomicU64::new(0);
    std::thread::scope(|scope| -> Result<Totals, Box<dyn std::error::Error>> {
        let workers: Vec<_> = (0..writers)
            .map(|seed| {
                let (db, stop, retries, gave_up) = (&db, &stop, &retries, &gave_up);
                scope.spawn(move || writer(db, accounts, seed as u64, stop, retries, gave_up))
            })
            .collect();
        let reporter = scope.spawn(|| -> verso::Result<Vec<Report>> {
            let mut reports = Vec::new();
            while !stop.load(Ordering::Relaxed) || reports.is_empty() {
                reports.push(report(&db, accounts, report_pause)?);
            }
            Ok(reports)
        });
        std::thread::sleep(run_for);
        stop.store(true, Ordering::Relaxed);
        let mut totals = Totals::default();
        for worker in workers {
            let (done, insufficient) = worker.join().expect("a writer thread")?;
            totals.transfers += done;
            totals.insufficient += insufficient;
        }
        totals.reports = reporter.join().expect("the reporting thread")?;
        totals.retries = retries.load(Ordering::Relaxed);
        totals.gave_up = gave_up.load(Ordering::Relaxed);
        Ok(totals)
    })
}

/// A writer thread: transfers until told to stop. Returns (committed, insufficient).
fn writer(
    db: &Database,
    accounts: TableId,
    seed: u64,
    stop: &AtomicBool,
    retries: &AtomicU64,
    gave_up: &AtomicU64,
) -> verso::Result<(u64, u64)> {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (seed + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut done, mut insufficient) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        let pick = |r: u64| {
            if r % 4 == 0 {
                r % ACCOUNTS
            } else {
                r % HOT_ACCOUNTS
            }
        };
        let (from, to, amount) = (pick(next()), pick(next()), (next() % 50) as i64 + 1);
        if from == to {
            continue;
        }
        let mut attempts = 0;
        // The closure may run more than once: it only reads and writes the transaction.
        let outcome = db.run(Isolation::Snapshot, |txn| {
            attempts += 1;
            let balance = |txn: &verso::Transaction<'_>, id: u64| -> verso::Result<i64> {
                let row = txn.get_row(accounts, &[Value::U64(id)])?;
                Ok(row
                    .expect("accounts are never deleted")
                    .decode::<Account>()?
                    .balance)
            };
            let payer = balance(txn, from)?;
            if payer < amount {
                return Ok(Transfer::Insufficient);
            }
            let payee = balance(txn, to)?;
            txn.update(
                accounts,
                &[Value::U64(from)],
                &[(2, Value::I64(payer - amount))],
            )?;
            txn.update(
                accounts,
                &[Value::U64(to)],
                &[(2, Value::I64(payee + amount))],
            )?;
            Ok(Transfer::Done)
        });
        retries.fetch_add(attempts - 1, Ordering::Relaxed);
        match outcome {
            Ok(Transfer::Done) => done += 1,
            Ok(Transfer::Insufficient) => insufficient += 1,
            // Every attempt lost a race: a real service would answer "try again".
            Err(error) if error.is_retryable() => {
                gave_up.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => return Err(error),
        }
    }
    Ok((done, insufficient))
}

/// One report: every account at one snapshot, read through the scan iterator, slowly.
fn report(db: &Database, accounts: TableId, pause: Duration) -> verso::Result<Report> {
    let started = Instant::now();
    let txn = db.begin_read_only(Isolation::Snapshot);
    let mut report = Report {
        accounts: 0,
        total: 0,
        richest: None,
        took: Duration::ZERO,
    };
    for row in txn.scan(accounts, ..)? {
        let account: Account = row?.decode()?;
        report.accounts += 1;
        report.total += account.balance;
        if report
            .richest
            .as_ref()
            .is_none_or(|(_, most)| account.balance > *most)
        {
            report.richest = Some((account.owner, account.balance));
        }
        if report.accounts % 100 == 0 {
            // Work between rows (formatting, sending): the iterator holds nothing meanwhile.
            std::thread::sleep(pause);
        }
    }
    txn.commit()?;
    report.took = started.elapsed();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run, as the test suite runs it: transfers commit beside the reports, and
    /// every report sums exactly the bank's money over every account.
    #[test]
    fn the_service_keeps_the_money_while_writers_race_and_reports_read() {
        let totals = serve(Duration::from_millis(500), 3, Duration::from_micros(200))
            .expect("the service runs");
        assert!(totals.transfers > 0, "{totals:?}");
        assert_eq!(totals.gave_up, 0, "{totals:?}");
        assert!(!totals.reports.is_empty());
        for report in &totals.reports {
            assert_eq!(report.accounts, ACCOUNTS, "{report:?}");
            assert_eq!(
                report.total,
                ACCOUNTS as i64 * OPENING_BALANCE,
                "{report:?}"
            );
        }
    }
}
