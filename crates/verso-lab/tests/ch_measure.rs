//! Release-mode measurement of the CH-benCHmark query stream on one warehouse, alone and
//! with one TPC-C thread beside it. Ignored by default (timing belongs in benchmarks); its
//! tiny mode runs in the normal suite:
//!
//! ```text
//! cargo test --release -p verso-lab --test ch_measure -- --ignored --nocapture
//! ```
//!
//! `CH_WAREHOUSES` and `CH_PASSES` change the scale (default 1) and the passes over the 22
//! queries per phase (default 3; the first pass of the "alone" phase is a warm-up).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use verso::{Database, Isolation, KeyRange, Options};
use verso_lab::workload::{NoProgress, TxnOutcome, Workload};
use verso_lab::workloads::ch::queries::QUERY_NAMES;
use verso_lab::workloads::ch::{run_query, Ch, ChConfig};

type TestError = Box<dyn std::error::Error + Send + Sync>;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// Per query: the time of each pass and the tuples it scanned in the last.
struct Passes {
    seconds: Vec<Vec<f64>>,
    scanned_tuples: Vec<Vec<u64>>,
}

fn run_passes(db: &Database, passes: u64) -> Result<Passes, TestError> {
    let mut result = Passes {
        seconds: vec![Vec::new(); 22],
        scanned_tuples: vec![Vec::new(); 22],
    };
    for _ in 0..passes {
        for query in 0..22 {
            let started = Instant::now();
            let (answer, scanned) = run_query(db, query)?;
            result.seconds[query].push(started.elapsed().as_secs_f64());
            result.scanned_tuples[query].push(scanned);
            std::hint::black_box(answer);
        }
    }
    Ok(result)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

fn report(title: &str, passes: &Passes) {
    println!("\n{title}");
    println!(
        "{:>5} {:>12} {:>12} {:>12} {:>14}",
        "query", "median ms", "min ms", "max ms", "tuples/s (M)"
    );
    let (mut total_seconds, mut total_tuples) = (0.0, 0u64);
    for (query, name) in QUERY_NAMES.iter().enumerate() {
        let seconds = &passes.seconds[query];
        let tuples = &passes.scanned_tuples[query];
        let median_seconds = median(seconds);
        let tuples_median = tuples.get(tuples.len() / 2).copied().unwrap_or(0);
        println!(
            "{name:>5} {:>12.1} {:>12.1} {:>12.1} {:>14.1}   ({tuples_median} tuples)",
            median_seconds * 1e3,
            seconds.iter().copied().fold(f64::INFINITY, f64::min) * 1e3,
            seconds.iter().copied().fold(0.0, f64::max) * 1e3,
            tuples_median as f64 / median_seconds / 1e6,
        );
        total_seconds += seconds.iter().sum::<f64>();
        total_tuples += tuples.iter().sum::<u64>();
    }
    println!(
        "stream: {:.2} s for {} queries, {:.1} M scanned tuples/s, {:.2} queries/s",
        total_seconds,
        passes.seconds.iter().map(Vec::len).sum::<usize>(),
        total_tuples as f64 / total_seconds / 1e6,
        passes.seconds.iter().map(Vec::len).sum::<usize>() as f64 / total_seconds
    );
}

/// The engine's scan alone (count the rows of each table, read nothing), the floor under
/// every plan.
fn raw_scans(db: &Database) -> Result<(), TestError> {
    println!("\nraw scan_view, counting rows only:");
    for table in [
        "order_line",
        "stock",
        "customer",
        "orders",
        "item",
        "supplier",
    ] {
        let id = db.table(table)?;
        let mut best = f64::INFINITY;
        let mut rows = 0u64;
        for _ in 0..3 {
            let txn = db.begin(Isolation::Snapshot);
            let started = Instant::now();
            rows = 0;
            txn.scan_view(id, KeyRange::new(..), |_| {
                rows += 1;
                true
            })?;
            best = best.min(started.elapsed().as_secs_f64());
            txn.commit()?;
        }
        println!(
            "{table:>12}: {rows} rows in {:.1} ms = {:.1} M rows/s",
            best * 1e3,
            rows as f64 / best / 1e6
        );
    }
    Ok(())
}

/// What one measurement found.
struct Measured {
    alone: Passes,
    beside: Passes,
    oltp_commits: u64,
    oltp_seconds: f64,
}

/// Loads `config`, times the query stream alone (after a warm-up pass) and with one TPC-C
/// thread beside it, `passes` passes each, and checks consistency at the end.
fn measure(config: ChConfig, passes: u64) -> Result<Measured, TestError> {
    let db = Database::open(Options::default())?;
    let ch = Ch::new(config)?;
    let load_started = Instant::now();
    ch.load(&db, &NoProgress)?;
    println!(
        "{}: loaded in {:.1} s",
        ch.describe(),
        load_started.elapsed().as_secs_f64()
    );

    raw_scans(&db)?;
    run_passes(&db, 1)?; // warm-up
    let alone = run_passes(&db, passes)?;

    let stop = AtomicBool::new(false);
    let commits = AtomicU64::new(0);
    let (beside, oltp_seconds) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| -> Result<f64, verso_lab::workload::LabError> {
            let started = Instant::now();
            let mut worker = ch.oltp_worker(&db, 0, 1, 11)?;
            while !stop.load(Ordering::Relaxed) {
                if let TxnOutcome::Committed { .. } = worker.run_one(Isolation::Snapshot)? {
                    commits.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(started.elapsed().as_secs_f64())
        });
        // Let the writer start before the first query.
        std::thread::sleep(Duration::from_millis(100));
        let measured = run_passes(&db, passes);
        stop.store(true, Ordering::Relaxed);
        let oltp = writer.join().map_err(|_| "the TPC-C thread panicked");
        (measured, oltp)
    });
    let beside = beside?;
    let oltp_seconds = oltp_seconds??;
    println!("engine after the run: {:?}", db.stats());
    ch.check_consistency(&db)?;
    Ok(Measured {
        alone,
        beside,
        oltp_commits: commits.load(Ordering::Relaxed),
        oltp_seconds,
    })
}

#[test]
// Timing belongs in benchmarks: this runs on demand (command in the header); its tiny
// mode, `tiny_mode_runs_every_query_alone_and_beside_tpcc`, runs in the normal suite.
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn measure_the_query_stream() -> Result<(), TestError> {
    let warehouses = u32::try_from(env_or("CH_WAREHOUSES", 1))?;
    let passes = env_or("CH_PASSES", 3);
    let measured = measure(ChConfig::standard(warehouses), passes)?;
    report("query stream alone (1 OLAP thread)", &measured.alone);
    report(
        "query stream with 1 TPC-C thread beside it",
        &measured.beside,
    );
    println!(
        "TPC-C beside the stream: {} commits in {:.1} s = {:.0} commits/s",
        measured.oltp_commits,
        measured.oltp_seconds,
        measured.oltp_commits as f64 / measured.oltp_seconds
    );
    Ok(())
}

/// The measurement's tiny mode: every query runs once per pass in both phases, most of them
/// scan something, and TPC-C commits beside the stream.
#[test]
fn tiny_mode_runs_every_query_alone_and_beside_tpcc() -> Result<(), TestError> {
    let measured = measure(ChConfig::tiny(), 1)?;
    for passes in [&measured.alone, &measured.beside] {
        assert!(passes.seconds.iter().all(|times| times.len() == 1));
        let scanning = passes
            .scanned_tuples
            .iter()
            .filter(|tuples| tuples.iter().all(|&n| n > 0))
            .count();
        assert_eq!(scanning, 22, "every query reads some base table");
    }
    assert!(
        measured.oltp_commits > 0,
        "TPC-C committed beside the stream"
    );
    Ok(())
}
