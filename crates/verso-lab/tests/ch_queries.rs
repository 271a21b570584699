//! CH-benCHmark: the 22 query plans against the naive evaluator on a tiny database, aged by
//! TPC-C transactions and read while more of them run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use verso::{Database, Isolation, Options};
use verso_lab::workload::{NoProgress, TxnOutcome, Workload};
use verso_lab::workloads::ch::operators::QueryScope;
use verso_lab::workloads::ch::queries::{run_query, ChTables, QUERY_NAMES};
use verso_lab::workloads::ch::{naive, Ch, ChConfig};

/// TPC-C transactions run before the queries: enough New-Orders that STOCK's order counts
/// and ORDER_LINE's quantities vary (Q11, Q17) and enough Deliveries that some lines are
/// delivered after their order was entered (Q21).
const AGING_TRANSACTIONS: usize = 1_000;

/// The pause of the TPC-C thread between two transactions while the queries run.
const WRITER_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// The queries that must return data on the tiny database. Q20 (items `like 'co%'` whose
/// stock a German supplier delivers) and Q22 (customers without orders: TPC-C gives every
/// customer one) are empty at this size; see docs/design/ch.md.
const QUERIES_WITH_DATA_AT_LEAST: usize = 18;

/// Float sums and averages may differ in their last bits between two summation orders.
const TOLERANCE: f64 = 1e-9;

type TestError = Box<dyn std::error::Error + Send + Sync>;

#[test]
fn plans_agree_with_the_naive_evaluation_while_tpcc_runs() -> Result<(), TestError> {
    let db = Database::open(Options::default())?;
    let ch = Ch::new(ChConfig::tiny())?;
    ch.load(&db, &NoProgress)?;
    ch.check_consistency(&db)?;

    let mut worker = ch.oltp_worker(&db, 0, 2, 1)?;
    let mut committed = 0;
    for _ in 0..AGING_TRANSACTIONS {
        if let TxnOutcome::Committed { .. } = worker.run_one(Isolation::Snapshot)? {
            committed += 1;
        }
    }
    assert!(committed > AGING_TRANSACTIONS / 2, "{committed} commits");
    drop(worker);

    let tables = ChTables::open(&db)?;
    let stop = AtomicBool::new(false);
    let concurrent_commits = AtomicU64::new(0);
    let with_data = std::thread::scope(|scope| {
        let writer = scope.spawn(|| -> Result<(), verso_lab::workload::LabError> {
            let mut worker = ch.oltp_worker(&db, 1, 2, 2)?;
            while !stop.load(Ordering::Relaxed) {
                if let TxnOutcome::Committed { .. } = worker.run_one(Isolation::Snapshot)? {
                    concurrent_commits.fetch_add(1, Ordering::Relaxed);
                }
                // Unthrottled, the writer would multiply the tiny database many times over
                // while the naive evaluation runs, and slow the test down with it.
                std::thread::sleep(WRITER_PAUSE);
            }
            Ok(())
        });
        let compared = compare_every_query(&db, &tables);
        stop.store(true, Ordering::Relaxed);
        let written = writer.join().map_err(|_| "the TPC-C thread panicked")?;
        written?;
        compared
    })?;

    assert!(
        concurrent_commits.load(Ordering::Relaxed) > 0,
        "no TPC-C transaction ran beside the queries"
    );
    assert!(
        with_data.len() >= QUERIES_WITH_DATA_AT_LEAST,
        "only {} queries returned data: {with_data:?}",
        with_data.len()
    );
    ch.check_consistency(&db)?;
    Ok(())
}

/// Evaluates every query twice at one snapshot, by its plan and naively, and checks that
/// the results agree. Returns the names of the queries whose results hold data.
fn compare_every_query(db: &Database, tables: &ChTables) -> Result<Vec<&'static str>, TestError> {
    let mut with_data = Vec::new();
    for (index, name) in QUERY_NAMES.iter().enumerate() {
        let txn = db.begin(Isolation::Snapshot);
        let planned = run_query(index, &QueryScope::new(&txn), tables)?;
        let expected = naive::run_query(&txn, tables, index)?;
        txn.commit()?;
        if let Err(difference) = expected.check_matches(&planned, TOLERANCE) {
            return Err(format!("{name}: plan and naive evaluation differ: {difference}").into());
        }
        if planned.has_data() {
            with_data.push(*name);
        }
    }
    eprintln!(
        "queries with data: {} of 22: {with_data:?}",
        with_data.len()
    );
    Ok(with_data)
}
