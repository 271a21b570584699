//! CH-benCHmark as a lab workload: the query stream, its scanned-tuple counts, and a run
//! beside TPC-C in the runner.

mod common;

use common::rows_in;
use std::time::Duration;

use verso::{Database, GarbageCollector, Options};
use verso_lab::runner::{run_configuration, RunConfig, StopAfter};
use verso_lab::workload::{NoProgress, Workload};
use verso_lab::workloads::ch::queries::{ChTables, QUERY_NAMES};
use verso_lab::workloads::ch::{Ch, ChConfig};

type TestError = Box<dyn std::error::Error + Send + Sync>;

#[test]
fn the_stream_runs_q1_to_q22_in_turn_and_counts_what_it_scans() -> Result<(), TestError> {
    let db = Database::open(Options::default())?;
    let ch = Ch::new(ChConfig::tiny())?;
    assert_eq!(ch.name(), "ch");
    assert_eq!(ch.query_names(), QUERY_NAMES);
    assert_eq!(ch.query_names().len(), 22);
    ch.load(&db, &NoProgress)?;
    ch.check_consistency(&db)?;

    let tables = ChTables::open(&db)?;
    let order_lines = rows_in(&db, tables.tpcc.order_line)?;
    let stock_rows = rows_in(&db, tables.tpcc.stock)?;
    let suppliers = rows_in(&db, tables.extra.supplier)?;
    assert_eq!(suppliers, 10_000);

    let mut stream = ch.olap_worker(&db, 0, 7)?.ok_or("ch has an OLAP worker")?;
    let mut scanned = Vec::new();
    for expected_query in (0..22).chain(0..1) {
        let outcome = stream.run_one()?;
        assert_eq!(outcome.query, expected_query);
        assert!(
            outcome.scanned_tuples > 0,
            "{} scanned nothing",
            QUERY_NAMES[outcome.query]
        );
        scanned.push(outcome.scanned_tuples);
    }
    // Q1 and Q6 read ORDER_LINE alone, once; Q11 reads NATION, SUPPLIER and STOCK once each.
    assert_eq!(scanned[0], order_lines);
    assert_eq!(scanned[5], order_lines);
    assert_eq!(scanned[10], 62 + suppliers + stock_rows);
    assert_eq!(scanned[22], scanned[0], "the stream starts over with Q1");

    let mut second_stream = ch.olap_worker(&db, 3, 7)?.ok_or("ch has an OLAP worker")?;
    assert_eq!(second_stream.run_one()?.query, 3, "stream 3 starts at Q4");
    Ok(())
}

#[test]
fn the_runner_runs_the_stream_beside_tpcc() -> Result<(), TestError> {
    let ch = Ch::new(ChConfig::tiny())?;
    let config = RunConfig {
        oltp_workers: 1,
        olap_workers: 1,
        stop: StopAfter::Duration(Duration::from_millis(1_500)),
        sample_interval: Duration::from_millis(500),
        ..RunConfig::new("steam", GarbageCollector::Steam)
    };
    let result = run_configuration(&ch, &config)?;
    let totals = &result.totals;
    assert!(totals.oltp_commits > 0);
    assert!(totals.olap_queries > 0, "no query completed");
    assert!(totals.olap_scanned_tuples > 0);
    assert!(totals.olap_queries_by_name.contains_key("Q1"));
    assert!(result.consistent);
    Ok(())
}
