//! CH-benCHmark's 22 query plans against the naive evaluator on a tiny database.

use std::time::Instant;

use verso::{Database, Isolation, Options};
use verso_lab::workload::{NoProgress, Workload};
use verso_lab::workloads::ch::queries::{run_query, ChTables, QUERY_NAMES};
use verso_lab::workloads::ch::{naive, operators::QueryScope, Ch, ChConfig};

#[test]
fn plans_agree_with_the_naive_evaluation() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let db = Database::open(Options::default())?;
    let ch = Ch::new(ChConfig::tiny())?;
    ch.load(&db, &NoProgress)?;
    eprintln!("load {:?}", started.elapsed());
    let tables = ChTables::open(&db)?;
    let txn = db.begin(Isolation::Snapshot);
    let mut with_data = Vec::new();
    for (index, name) in QUERY_NAMES.iter().enumerate() {
        let t0 = Instant::now();
        let scope = QueryScope::new(&txn);
        let planned = run_query(index, &scope, &tables)?;
        let t1 = t0.elapsed();
        let expected = naive::run_query(&txn, &tables, index)?;
        eprintln!(
            "{name}: {} rows, plan {:?}, naive {:?}",
            planned.rows.len(),
            t1,
            t0.elapsed() - t1
        );
        if let Err(difference) = expected.check_matches(&planned, 1e-9) {
            panic!("{name}: {difference}");
        }
        if planned.has_data() {
            with_data.push(*name);
        }
    }
    eprintln!(
        "with data: {} {:?} total {:?}",
        with_data.len(),
        with_data,
        started.elapsed()
    );
    Ok(())
}
