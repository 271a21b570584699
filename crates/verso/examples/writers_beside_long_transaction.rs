//! Writers beside one long transaction: how much does it slow them down? (Issue 36 measured
//! writers 20-25x slower under MVOCC and SSN before the fix; `docs/known-issues.md`, "Long
//! transactions under the validating protocols", has the numbers before and after.)
//!
//! `cargo run --release -p verso --example writers_beside_long_transaction -- PROTOCOL HOLD
//! [SECONDS, default 20] [WRITERS, default 2]`
//!
//! - PROTOCOL: `si`, `mvocc`, `mvto`, `mv2pl` or `ssn` (`ConcurrencyControl::short_name`).
//!   Every transaction asks for `Isolation::Serializable`, so under `si` too the writers
//!   validate (precision locking) and the long transaction counts as serializable.
//! - HOLD: `none` (no long transaction), `undeclared` (one begun with `Database::begin`, as a
//!   transaction that may still write) or `read-only` (`Database::begin_read_only`). It
//!   begins before the writers, reads one row no writer touches, and stays open, its thread
//!   asleep, until the writers stop.
//!
//! Each writer reads two random rows of 100,000 and adds one to the first, in a loop,
//! retrying what fails as retryable. Every second the example prints the writers' commits
//! per second; at the end one line with the first and the last five seconds' rates, which is
//! what to compare: a cost that grows with the long transaction's age shows in the last
//! seconds. The program uses only the public API, so the same file builds against older
//! versions of the engine and runs the same workload there.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use verso::{ColumnType, ConcurrencyControl, Database, Isolation, Options, Schema, TableId, Value};

/// Rows in the table the writers write (the test runs on fewer).
const ROWS: u64 = 100_000;
/// The row the long transaction reads; writers never touch it (under MV2PL its read lock
/// would refuse them).
const HELD_ROW: u64 = 0;
/// Seconds at each end of the run that the summary line averages.
const SUMMARY_WINDOW: usize = 5;

/// The long transaction beside the writers, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    None,
    Undeclared,
    ReadOnly,
}

impl Hold {
    fn from_arg(arg: &str) -> Result<Hold, String> {
        match arg {
            "none" => Ok(Hold::None),
            "undeclared" => Ok(Hold::Undeclared),
            "read-only" => Ok(Hold::ReadOnly),
            other => Err(format!(
                "HOLD is none, undeclared or read-only, not {other:?}"
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Hold::None => "none",
            Hold::Undeclared => "undeclared",
            Hold::ReadOnly => "read-only",
        }
    }
}

/// A writer's commit counter on a cache line of its own, so that counting does not make
/// the writers share a line.
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// What one run measured: the writers' commits in each second.
#[derive(Debug)]
struct Run {
    per_second: Vec<u64>,
    retries: u64,
    /// Commit records alive at the end, the long transaction still open
    /// (`Stats::live_commit_records`).
    commit_records: u64,
    /// The process's resident memory then, in MiB (Linux; 0 elsewhere).
    rss_mib: u64,
}

impl Run {
    /// Mean commits per second over the first (`from_end == false`) or last `SUMMARY_WINDOW`
    /// seconds (fewer if the run was shorter).
    fn window_rate(&self, from_end: bool) -> f64 {
        let n = self.per_second.len().clamp(1, SUMMARY_WINDOW);
        let window = if from_end {
            &self.per_second[self.per_second.len().saturating_sub(n)..]
        } else {
            &self.per_second[..self.per_second.len().min(n)]
        };
        window.iter().sum::<u64>() as f64 / n as f64
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: writers_beside_long_transaction PROTOCOL HOLD [SECONDS] [WRITERS]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (protocol, hold) = match (args.first(), args.get(1)) {
        (Some(protocol), Some(hold)) => (
            ConcurrencyControl::from_name(protocol)?,
            Hold::from_arg(hold)?,
        ),
        _ => return Err(usage.into()),
    };
    let number = |i: usize, default: u64, what: &str| -> Result<u64, String> {
        args.get(i).map_or(Ok(default), |arg| match arg.parse() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{what} is a whole number above 0, not {arg:?}")),
        })
    };
    let seconds = number(2, 20, "SECONDS")?;
    let writers = number(3, 2, "WRITERS")?;
    let run = run(
        ROWS,
        protocol,
        hold,
        Duration::from_secs(seconds),
        writers as usize,
        true,
    )?;
    println!(
        "protocol={} hold={} seconds={seconds} writers={writers} first_{SUMMARY_WINDOW}s={:.0} \
         last_{SUMMARY_WINDOW}s={:.0} retries={} commit_records={} rss_mib={}",
        protocol.short_name(),
        hold.name(),
        run.window_rate(false),
        run.window_rate(true),
        run.retries,
        run.commit_records,
        run.rss_mib
    );
    Ok(())
}

fn run(
    rows: u64,
    protocol: ConcurrencyControl,
    hold: Hold,
    run_for: Duration,
    writers: usize,
    print_seconds: bool,
) -> Result<Run, Box<dyn std::error::Error>> {
    let db = Database::open(Options::default().concurrency_control(protocol))?;
    let table = db.create_table(
        "counters",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("n", ColumnType::I64)
            .primary_key(&["id"]),
    )?;
    let mut load = db.begin(Isolation::Snapshot);
    for id in 0..rows {
        load.insert(table, &[Value::U64(id), Value::I64(0)])?;
    }
    load.commit()?;

    let stop = AtomicBool::new(false);
    let counters: Vec<Counter> = (0..writers).map(|_| Counter::default()).collect();
    let retries = AtomicU64::new(0);
    let mut at_end = (0, 0);
    let per_second = std::thread::scope(|scope| -> Result<Vec<u64>, verso::Error> {
        // The long transaction begins, on its own thread (a transaction belongs to the
        // thread that began it), before any writer starts.
        let (release, released) = mpsc::channel::<()>();
        let (begun, is_begun) = mpsc::channel::<()>();
        let holder = (hold != Hold::None).then(|| {
            let db = &db;
            scope.spawn(move || -> verso::Result<()> {
                let long = match hold {
                    Hold::ReadOnly => db.try_begin_read_only(Isolation::Serializable)?,
                    _ => db.try_begin(Isolation::Serializable)?,
                };
                long.get(table, &[Value::U64(HELD_ROW)])?;
                let _ = begun.send(());
                // Asleep until the writers stop: the long transaction takes no CPU.
                let _ = released.recv();
                long.commit()
            })
        });
        if holder.is_some() && is_begun.recv().is_err() {
            // The holder failed before it began; its error comes out of the join below.
            stop.store(true, Ordering::Relaxed);
        }
        let workers: Vec<_> = counters
            .iter()
            .enumerate()
            .map(|(i, counter)| {
                let (db, stop, retries) = (&db, &stop, &retries);
                scope.spawn(move || write_loop(db, table, rows, i as u64, stop, counter, retries))
            })
            .collect();
        let mut per_second = Vec::new();
        let mut previous = 0;
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) && started.elapsed() < run_for {
            let next = Duration::from_secs(per_second.len() as u64 + 1);
            std::thread::sleep(next.saturating_sub(started.elapsed()));
            let total: u64 = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
            per_second.push(total - previous);
            previous = total;
            if print_seconds {
                println!(
                    "{:>4} s {:>10} commits/s",
                    per_second.len(),
                    per_second[per_second.len() - 1]
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        for worker in workers {
            worker.join().expect("a writer thread panicked")?;
        }
        at_end = (db.stats().live_commit_records(), resident_mib());
        drop(release);
        if let Some(holder) = holder {
            holder
                .join()
                .expect("the long transaction's thread panicked")?;
        }
        Ok(per_second)
    })?;
    Ok(Run {
        per_second,
        retries: retries.load(Ordering::Relaxed),
        commit_records: at_end.0,
        rss_mib: at_end.1,
    })
}

/// Resident memory of this process in MiB, from `/proc/self/statm` (0 where there is none).
fn resident_mib() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * 4096 / (1 << 20)
}

/// One writer: read two of the table's `rows` rows, add one to the first, commit; again
/// until `stop`.
fn write_loop(
    db: &Database,
    table: TableId,
    rows: u64,
    seed: u64,
    stop: &AtomicBool,
    commits: &Counter,
    retries: &AtomicU64,
) -> verso::Result<()> {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (seed + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut next_row = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Rows 1..rows: the long transaction's row is never written.
        1 + rng % (rows - 1)
    };
    while !stop.load(Ordering::Relaxed) {
        let (a, b) = (next_row(), next_row());
        let attempt = (|| {
            let mut txn = db.try_begin(Isolation::Serializable)?;
            let n = match txn.get(table, &[Value::U64(a)])?.as_deref() {
                Some([_, Value::I64(n)]) => *n,
                other => panic!("row {a} reads as {other:?}"),
            };
            txn.get(table, &[Value::U64(b)])?;
            txn.update(table, &[Value::U64(a)], &[(1, Value::I64(n + 1))])?;
            txn.commit()
        })();
        match attempt {
            Ok(()) => {
                commits.0.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if e.is_retryable() => {
                retries.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run of every protocol with each kind of long transaction: the writers commit,
    /// and a long transaction that may still write keeps every commit record (under every
    /// protocol but MVTO, which keeps predicate reads instead) where one declared read-only,
    /// or none, lets them go.
    #[test]
    fn writers_commit_beside_each_kind_of_long_transaction() {
        for protocol in ConcurrencyControl::ALL {
            for hold in [Hold::None, Hold::Undeclared, Hold::ReadOnly] {
                let what = format!("{protocol:?} {hold:?}");
                let run = run(1_000, protocol, hold, Duration::from_secs(1), 2, false)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(run.per_second.len(), 1, "{what}");
                assert!(run.per_second[0] > 0, "{what}: {run:?}");
                assert_eq!(run.window_rate(true), run.per_second[0] as f64, "{what}");
                assert_eq!(run.window_rate(false), run.per_second[0] as f64, "{what}");
                let keeps_records =
                    hold == Hold::Undeclared && protocol != ConcurrencyControl::Mvto;
                // Records alive at the end against the commits of the run's one second
                // (the writers commit a little more before they stop): all of them, or
                // fewer (trimming lags the horizon by a few hundred at most).
                if keeps_records {
                    assert!(run.commit_records >= run.per_second[0], "{what}: {run:?}");
                } else {
                    assert!(run.commit_records < run.per_second[0], "{what}: {run:?}");
                }
            }
        }
    }
}
