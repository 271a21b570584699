//! TPC-C throughput: the standard mix on one warehouse with one worker (the issue's target
//! is 40,000 commits/s in a release build). Timing belongs in benchmarks, not tests, so
//! this is ignored by default; run it with
//!
//! ```text
//! cargo test --release -p verso-lab --test tpcc_throughput -- --ignored --nocapture
//! ```
//!
//! `TPCC_RUNS` (default 5), `TPCC_SECONDS` (default 3) and `TPCC_WAREHOUSES` (default 1)
//! change the measurement. Its tiny mode runs in the normal suite, so it cannot rot.

use std::time::{Duration, Instant};

use verso::{Database, Isolation, Options};
use verso_lab::workload::{LabError, NoProgress, TxnOutcome, Workload};
use verso_lab::workloads::tpcc::{Tpcc, TpccConfig, TRANSACTION_KINDS};

struct Measurement {
    commits_per_second: f64,
    /// Commits per second of the worker thread's own CPU time (None where /proc is
    /// missing): what the engine does with a core to itself on a shared machine.
    commits_per_cpu_second: Option<f64>,
    committed: [u64; 5],
    aborted: u64,
    /// The slowest attempt of each kind, in microseconds.
    latency_us_max: [u64; 5],
}

fn measure(
    tpcc: &Tpcc,
    db: &Database,
    seed: u64,
    duration: Duration,
) -> Result<Measurement, LabError> {
    let mut worker = tpcc.worker(db, 0, 1, seed)?;
    let mut committed = [0u64; 5];
    let mut aborted = 0;
    let mut latency_us_max = [0u64; 5];
    let cpu_start = thread_cpu_seconds();
    let start = Instant::now();
    // Check the clock every 64 transactions: reading it costs more than a Payment's commit.
    while start.elapsed() < duration {
        for _ in 0..64 {
            let kind = worker.next_kind();
            let attempt_start = Instant::now();
            match worker.run(kind, Isolation::Snapshot)? {
                TxnOutcome::Committed { kind, .. } => committed[kind] += 1,
                TxnOutcome::Aborted { .. } => aborted += 1,
            }
            let latency_us = attempt_start.elapsed().as_micros() as u64;
            latency_us_max[kind] = latency_us_max[kind].max(latency_us);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let commits = committed.iter().sum::<u64>() as f64;
    let cpu = cpu_start.zip(thread_cpu_seconds()).map(|(a, b)| b - a);
    Ok(Measurement {
        commits_per_second: commits / elapsed,
        commits_per_cpu_second: cpu.filter(|&cpu| cpu > 0.0).map(|cpu| commits / cpu),
        committed,
        aborted,
        latency_us_max,
    })
}

/// The calling thread's user + system CPU time, from `/proc/thread-self/stat` (in clock
/// ticks of 10 ms: fine for runs of seconds).
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesized command name; utime and stime are fields 14 and 15.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
// Timing belongs in benchmarks: this one runs on demand (command above); its tiny mode,
// `tiny_mode_measures_something`, runs in the normal suite.
#[ignore = "a benchmark: run in release with --ignored --nocapture"]
fn standard_mix_one_warehouse_one_worker() -> Result<(), LabError> {
    let runs = env_or("TPCC_RUNS", 5);
    let seconds = env_or("TPCC_SECONDS", 3);
    let warehouses = env_or("TPCC_WAREHOUSES", 1) as u32;
    let tpcc = Tpcc::new(TpccConfig::standard(warehouses))?;
    let db = Database::open(Options::default())?;
    let load_start = Instant::now();
    tpcc.load(&db, &NoProgress)?;
    eprintln!(
        "loaded {} in {:.2} s",
        tpcc.describe(),
        load_start.elapsed().as_secs_f64()
    );
    measure(&tpcc, &db, 1, Duration::from_secs(1))?; // warm-up
    let mut rates = Vec::new();
    let mut cpu_rates = Vec::new();
    for run in 0..runs {
        let m = measure(&tpcc, &db, 100 + run, Duration::from_secs(seconds))?;
        eprintln!(
            "run {run}: {:>9.0} commits/s, {:>9.0} per CPU-second  (aborted {}; {})",
            m.commits_per_second,
            m.commits_per_cpu_second.unwrap_or(f64::NAN),
            m.aborted,
            TRANSACTION_KINDS
                .iter()
                .zip(m.committed)
                .zip(m.latency_us_max)
                .map(|((name, n), max)| format!("{name} {n} (max {max} µs)"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        rates.push(m.commits_per_second);
        cpu_rates.extend(m.commits_per_cpu_second);
    }
    rates.sort_by(f64::total_cmp);
    cpu_rates.sort_by(f64::total_cmp);
    eprintln!(
        "median {:.0} commits/s, min {:.0}, max {:.0} ({runs} runs of {seconds} s, {} design)",
        rates[rates.len() / 2],
        rates[0],
        rates[rates.len() - 1],
        db.design()
    );
    if !cpu_rates.is_empty() {
        eprintln!(
            "median {:.0} commits per CPU-second of the worker (min {:.0}, max {:.0})",
            cpu_rates[cpu_rates.len() / 2],
            cpu_rates[0],
            cpu_rates[cpu_rates.len() - 1]
        );
    }
    let check_start = Instant::now();
    tpcc.check_consistency(&db)?;
    eprintln!(
        "consistency: all twelve conditions hold ({:.2} s)",
        check_start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The benchmark's tiny mode, in the normal suite.
#[test]
fn tiny_mode_measures_something() -> Result<(), LabError> {
    let tpcc = Tpcc::new(TpccConfig::tiny().with_warehouses(1))?;
    let db = Database::open(Options::default())?;
    tpcc.load(&db, &NoProgress)?;
    let m = measure(&tpcc, &db, 1, Duration::from_millis(100))?;
    assert!(m.commits_per_second > 0.0);
    // At least one batch of 64 ran to its end (a NewOrder may roll back by design: 1%).
    assert!(
        m.committed.iter().sum::<u64>() + m.aborted >= 64,
        "{:?}",
        m.committed
    );
    tpcc.check_consistency(&db)
}

/// The fastest time of a scan and the rows it returned.
type TimedScan = (Duration, u32);

/// The fastest of three scans of order (1, 1, 1)'s lines with the start bound (below the
/// index's smallest key) and without one.
fn range_start_scans(config: TpccConfig) -> Result<(TimedScan, TimedScan), LabError> {
    use verso::{KeyRange, Value};
    use verso_lab::workloads::tpcc::schema::Tables;
    let tpcc = Tpcc::new(config)?;
    let db = Database::open(Options::default())?;
    tpcc.load(&db, &NoProgress)?;
    let tables = Tables::open(&db)?;
    let order_one = vec![Value::I64(1), Value::I64(1), Value::I64(1)];
    let time_scan = |range: KeyRange| -> Result<TimedScan, LabError> {
        let txn = db.begin_read_only(Isolation::Snapshot);
        let start = Instant::now();
        let mut rows = 0;
        txn.scan_view(tables.order_line, range, |_| {
            rows += 1;
            rows < 15
        })?;
        Ok((start.elapsed(), rows))
    };
    // The first scan touches cold memory: alternate the two and keep each one's fastest.
    let (mut below, mut unbounded) = (Duration::MAX, Duration::MAX);
    let (mut rows_below, mut rows_unbounded) = (0, 0);
    for _ in 0..3 {
        let (time, rows) = time_scan(KeyRange::prefix(order_one.clone()))?;
        (below, rows_below) = (below.min(time), rows);
        let (time, rows) = time_scan(KeyRange::new(..=order_one.clone()))?;
        (unbounded, rows_unbounded) = (unbounded.min(time), rows);
    }
    Ok(((below, rows_below), (unbounded, rows_unbounded)))
}

/// The engine gap `docs/design/tpcc.md` reported: a range whose start lies below the
/// ordered index's smallest key took the index's slow path (seconds at one warehouse), while
/// the same range without a start bound was fast. The engine now starts such a scan at the
/// smallest key, so the terminals scan with start bounds as they are; this measures both
/// ranges and fails if the bounded one is slow again. Release build:
/// `cargo test --release -p verso-lab --test tpcc_throughput range_start -- --ignored --nocapture`
#[test]
// Timing belongs in benchmarks: this runs on demand (command above); the same scans run
// untimed in `range_start_scans_agree_on_a_tiny_database`, and the engine's own regression
// test (`regression_scan_from_below_the_smallest_key_is_not_a_full_walk`) guards the fix.
#[ignore = "a measurement of an engine gap: run in release with --ignored --nocapture"]
fn range_start_below_the_smallest_key() -> Result<(), LabError> {
    let ((below, rows_below), (unbounded, rows_unbounded)) =
        range_start_scans(TpccConfig::standard(1))?;
    eprintln!(
        "lines of order (1, 1, 1), fastest of 3: start bound below the smallest key {below:?} \
         ({rows_below} rows), no start bound {unbounded:?} ({rows_unbounded} rows)"
    );
    assert_eq!(rows_below, rows_unbounded);
    // The slow path took seconds; both scans now take microseconds (a generous bound, for
    // a busy machine).
    assert!(
        below < Duration::from_millis(50),
        "the start-bound scan took {below:?}: the slow path is back"
    );
    Ok(())
}

/// The range-start measurement's tiny mode, in the normal suite: both scans find the same
/// lines.
#[test]
fn range_start_scans_agree_on_a_tiny_database() -> Result<(), LabError> {
    let ((_, rows_below), (_, rows_unbounded)) =
        range_start_scans(TpccConfig::tiny().with_warehouses(1))?;
    assert!(rows_below > 0, "order (1, 1, 1) has lines");
    assert_eq!(rows_below, rows_unbounded);
    Ok(())
}
