//! The tiny mode of every workload the lab framework owns (YCSB, key-value, scans, TPC-B,
//! sysbench):
//! each runs through the runner and passes its consistency checks, does the work it names,
//! and its consistency check catches a planted inconsistency.

mod common;

use std::time::Duration;

use verso::{Database, GarbageCollector, Isolation, Options, Value};
use verso_lab::metrics::RunResult;
use verso_lab::runner::{run_configuration, RunConfig, StopAfter};
use verso_lab::workload::{LabError, NoProgress, TxnOutcome, Workload};
use verso_lab::workloads::kv_updates::{KvConfig, KvWorkload};
use verso_lab::workloads::scan_updates::{ScansConfig, ScansWorkload};
use verso_lab::workloads::sysbench::{SysbenchConfig, SysbenchUpdate, SysbenchWorkload};
use verso_lab::workloads::tpcb::{TpcbConfig, TpcbWorkload};
use verso_lab::workloads::ycsb::{YcsbConfig, YcsbWorkload};

fn counted(gc: GarbageCollector, workers: usize, transactions: u64) -> RunConfig {
    RunConfig {
        oltp_workers: workers,
        stop: StopAfter::Transactions(transactions),
        sample_interval: Duration::from_millis(50),
        // 'coop' works only on the storage it needs; every other collector on the default.
        ..RunConfig::with_options(
            gc.name(),
            Options::default()
                .garbage_collector(gc)
                .version_storage(gc.required_storage().unwrap_or_default()),
        )
    }
}

fn run(workload: &dyn Workload, config: &RunConfig) -> RunResult {
    run_configuration(workload, config)
        .unwrap_or_else(|e| panic!("{} / {}: {e}", workload.name(), config.label))
}

/// A loaded database and one OLTP worker's transactions, run directly (no runner).
fn load(workload: &dyn Workload) -> Database {
    let db = Database::open(Options::default()).expect("open");
    workload.load(&db, &NoProgress).expect("load");
    workload
        .check_consistency(&db)
        .expect("consistent after load");
    db
}

fn run_directly(workload: &dyn Workload, db: &Database, seed: u64, transactions: usize) -> usize {
    let mut worker = workload.oltp_worker(db, 0, 1, seed).expect("worker");
    let mut committed = 0;
    for _ in 0..transactions {
        match worker
            .run_one(Isolation::Snapshot)
            .expect("no unexpected error")
        {
            TxnOutcome::Committed { .. } => committed += 1,
            TxnOutcome::Aborted { reason, .. } => panic!("one worker alone aborted: {reason:?}"),
        }
    }
    committed
}

fn values(db: &Database, table: &str, column: usize) -> Vec<Value> {
    let table = db.table(table).expect("table");
    let txn = db.begin(Isolation::Snapshot);
    txn.scan(table, ..)
        .expect("scan")
        .map(|row| row.expect("scan")[column].clone())
        .collect()
}

#[test]
fn kv_runs_counted_on_both_collectors_and_adds_up() {
    let workload = KvWorkload::new(KvConfig::tiny()).expect("config");
    for gc in GarbageCollector::ALL {
        let result = run(&workload, &counted(gc, 2, 600));
        assert_eq!(result.totals.oltp_commits, 600, "{}", gc.name());
        assert_eq!(result.totals.oltp_commits_by_kind["update"], 600);
        // Watermark-only links one before-image per increment; Steam may skip those no
        // snapshot can need.
        let created = result.engine.versions_created;
        match gc {
            GarbageCollector::WatermarkOnly => assert_eq!(created, 600, "{:?}", result.engine),
            _ => assert!((1..=600).contains(&created), "{:?}", result.engine),
        }
    }
}

#[test]
fn kv_consistency_check_catches_a_lost_or_extra_increment() {
    let workload = KvWorkload::new(KvConfig::tiny()).expect("config");
    let db = load(&workload);
    assert_eq!(run_directly(&workload, &db, 1, 200), 200);
    workload
        .check_consistency(&db)
        .expect("consistent after 200 increments");
    // An increment the workload did not count.
    let table = db.table("kv").expect("table");
    let mut txn = db.begin(Isolation::Snapshot);
    txn.update(table, &[Value::U64(7)], &[(1, Value::I64(1_000))])
        .expect("update");
    txn.commit().expect("commit");
    assert!(matches!(
        workload.check_consistency(&db),
        Err(LabError::Inconsistent(_))
    ));
}

#[test]
fn kv_skew_concentrates_updates_and_a_seed_repeats_them() {
    let updates_of = |theta: f64, seed: u64| {
        let workload = KvWorkload::new(KvConfig {
            theta,
            ..KvConfig::tiny()
        })
        .expect("config");
        let db = load(&workload);
        run_directly(&workload, &db, seed, 3_000);
        workload.check_consistency(&db).expect("consistent");
        values(&db, "kv", 1)
            .into_iter()
            .map(|v| v.as_i64().unwrap_or(-1))
            .collect::<Vec<i64>>()
    };
    let uniform = updates_of(0.0, 5);
    let skewed = updates_of(1.2, 5);
    assert_eq!(uniform.iter().sum::<i64>(), 3_000);
    assert_eq!(skewed.iter().sum::<i64>(), 3_000);
    let hottest = |v: &[i64]| v.iter().copied().max().unwrap_or(0);
    // Uniform over 1,000 rows: the hottest row gets about 3 + a few; theta 1.2: the top key
    // alone gets about 1/zeta(1.2) = 23% of all updates.
    assert!(
        hottest(&uniform) < 20,
        "uniform hottest {}",
        hottest(&uniform)
    );
    assert!(
        hottest(&skewed) > 400,
        "skewed hottest {}",
        hottest(&skewed)
    );
    assert_eq!(skewed, updates_of(1.2, 5), "same seed, same updates");
    assert_ne!(skewed, updates_of(1.2, 6), "another seed, other updates");
}

fn ycsb(read_ratio: f64) -> YcsbWorkload {
    YcsbWorkload::new(YcsbConfig {
        read_ratio,
        update_columns: 2,
        ..YcsbConfig::tiny()
    })
    .expect("config")
}

#[test]
fn ycsb_reads_change_nothing_and_updates_change_rows() {
    let columns = |db: &Database| -> Vec<Vec<Value>> {
        (1..=10).map(|c| values(db, "usertable", c)).collect()
    };
    let read_only = ycsb(1.0);
    let db = load(&read_only);
    let before = columns(&db);
    assert_eq!(run_directly(&read_only, &db, 3, 100), 100);
    assert_eq!(columns(&db), before, "a read-only mix changed data");

    let update_only = ycsb(0.0);
    let db = load(&update_only);
    assert_eq!(columns(&db), before, "the load is deterministic");
    assert_eq!(run_directly(&update_only, &db, 3, 20), 20);
    update_only.check_consistency(&db).expect("consistent");
    let after = columns(&db);
    let changed_fields: usize = after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.iter().zip(b).filter(|(x, y)| x != y).count())
        .sum();
    // 20 transactions x 16 updates x 2 fields, minus fields hit twice.
    assert!(
        (200..=640).contains(&changed_fields),
        "{changed_fields} fields changed"
    );
}

#[test]
fn ycsb_runs_through_the_runner_and_checks_its_rows() {
    let workload = ycsb(0.5);
    let result = run(&workload, &counted(GarbageCollector::Steam, 2, 200));
    assert_eq!(result.totals.oltp_commits, 200);
    // About half of 16 operations update; Steam may skip before-images nobody needs.
    assert!(result.engine.versions_created > 0, "{:?}", result.engine);
    // The check notices a row with a wrong field width.
    let db = load(&workload);
    let table = db.table("usertable").expect("table");
    let mut txn = db.begin(Isolation::Snapshot);
    txn.update(table, &[Value::U64(3)], &[(4, Value::Bytes(vec![1, 2]))])
        .expect("update");
    txn.commit().expect("commit");
    assert!(matches!(
        workload.check_consistency(&db),
        Err(LabError::Inconsistent(_))
    ));
}

#[test]
fn ycsb_refuses_parameters_it_cannot_run() {
    for config in [
        YcsbConfig {
            theta: 1.0,
            ..YcsbConfig::tiny()
        },
        YcsbConfig {
            read_columns: 11,
            ..YcsbConfig::tiny()
        },
        YcsbConfig {
            operations: 3_000,
            ..YcsbConfig::tiny()
        },
        YcsbConfig {
            read_ratio: 1.5,
            ..YcsbConfig::tiny()
        },
    ] {
        assert!(matches!(
            YcsbWorkload::new(config),
            Err(LabError::BadOption(_))
        ));
    }
}

/// Wu et al.'s heterogeneous workload: with read-only transactions configured, the OLAP
/// threads run them (declared READ ONLY or not) beside the read-write threads, under a
/// protocol that locks what ordinary readers read; without them YCSB has no queries.
#[test]
fn ycsb_read_only_transactions_run_on_the_olap_threads_declared_or_not() {
    use verso::ConcurrencyControl;
    use verso_lab::workloads::ycsb::ReadOnlyTransactions;
    for declared in [false, true] {
        let workload = YcsbWorkload::new(YcsbConfig {
            read_only: Some(ReadOnlyTransactions {
                operations: 50,
                declared,
            }),
            ..YcsbConfig::tiny()
        })
        .expect("config");
        assert_eq!(workload.query_names(), ["read-only"]);
        assert_eq!(
            workload.describe().contains("declared READ ONLY"),
            declared,
            "{}",
            workload.describe()
        );
        let mut config = counted(GarbageCollector::Steam, 1, 2_000);
        config.olap_workers = 1;
        config.isolation = Isolation::Serializable;
        config.options = config
            .options
            .concurrency_control(ConcurrencyControl::Mv2pl);
        let result = run(&workload, &config);
        assert_eq!(result.totals.oltp_commits, 2_000);
        assert!(result.totals.olap_queries > 0, "declared {declared}");
        assert_eq!(
            result.totals.olap_scanned_tuples,
            50 * result.totals.olap_queries,
            "a query is one committed transaction of 50 reads"
        );
    }
    assert!(ycsb(0.5).query_names().is_empty());
    for operations in [0, 2_001] {
        let config = YcsbConfig {
            read_only: Some(ReadOnlyTransactions {
                operations,
                declared: true,
            }),
            ..YcsbConfig::tiny()
        };
        assert!(matches!(
            YcsbWorkload::new(config),
            Err(LabError::BadOption(_))
        ));
    }
}

#[test]
fn scans_mix_follows_the_scan_percentage() {
    let with_percent = |scan_percent: f64| {
        ScansWorkload::new(ScansConfig {
            scan_percent,
            ..ScansConfig::tiny()
        })
        .expect("config")
    };
    let result = run(
        &with_percent(100.0),
        &counted(GarbageCollector::Steam, 1, 30),
    );
    assert_eq!(result.totals.oltp_commits_by_kind["scan"], 30);
    assert_eq!(result.totals.oltp_commits_by_kind["update"], 0);
    let result = run(
        &with_percent(0.0),
        &counted(GarbageCollector::Steam, 1, 300),
    );
    assert_eq!(result.totals.oltp_commits_by_kind["update"], 300);
    assert_eq!(result.totals.oltp_commits_by_kind["scan"], 0);
    let result = run(
        &with_percent(20.0),
        &counted(GarbageCollector::Steam, 2, 500),
    );
    let scans = result.totals.oltp_commits_by_kind["scan"];
    assert!((50..=150).contains(&scans), "{scans} scans of 500 at 20%");
}

#[test]
fn scans_olap_workers_scan_every_row() {
    let workload = ScansWorkload::new(ScansConfig::tiny()).expect("config");
    let config = RunConfig {
        olap_workers: 1,
        stop: StopAfter::Duration(Duration::from_millis(400)),
        ..counted(GarbageCollector::WatermarkOnly, 1, 1)
    };
    let result = run(&workload, &config);
    let queries = result.totals.olap_queries;
    assert!(queries > 0, "no scan finished");
    assert_eq!(result.totals.olap_queries_by_name["full_scan"], queries);
    assert_eq!(
        result.totals.olap_scanned_tuples,
        queries * ScansConfig::tiny().rows
    );
}

#[test]
fn tpcb_balances_agree_after_concurrent_runs() {
    let workload = TpcbWorkload::new(TpcbConfig::tiny()).expect("config");
    for gc in GarbageCollector::ALL {
        let result = run(&workload, &counted(gc, 2, 400));
        assert_eq!(result.totals.oltp_commits, 400);
        assert_eq!(result.totals.oltp_commits_by_kind["tpcb"], 400);
    }
}

#[test]
fn tpcb_writes_one_history_row_per_commit_and_catches_a_skewed_balance() {
    let workload = TpcbWorkload::new(TpcbConfig::tiny()).expect("config");
    let db = load(&workload);
    assert_eq!(values(&db, "pgbench_accounts", 0).len(), 1_000);
    assert_eq!(values(&db, "pgbench_tellers", 0).len(), 10);
    assert_eq!(values(&db, "pgbench_branches", 0).len(), 1);
    assert_eq!(run_directly(&workload, &db, 9, 150), 150);
    workload.check_consistency(&db).expect("consistent");
    let deltas = values(&db, "pgbench_history", 4);
    assert_eq!(deltas.len(), 150);
    for delta in &deltas {
        let delta = delta.as_i64().expect("delta is an I64");
        assert!((-5_000..=5_000).contains(&delta), "delta {delta}");
    }
    let branch_balance = values(&db, "pgbench_branches", 1)[0].as_i64();
    let delta_sum: i64 = deltas.iter().filter_map(Value::as_i64).sum();
    assert_eq!(branch_balance, Some(delta_sum));

    let tellers = db.table("pgbench_tellers").expect("table");
    let mut txn = db.begin(Isolation::Snapshot);
    txn.update(tellers, &[Value::U64(4)], &[(2, Value::I64(123_456))])
        .expect("update");
    txn.commit().expect("commit");
    assert!(matches!(
        workload.check_consistency(&db),
        Err(LabError::Inconsistent(_))
    ));
}

/// A transaction's keys are distinct, and were drawn again until they were. But the
/// scrambled Zipfian never produces some keys (`fnv(rank) % rows` is not one-to-one), and a
/// steep skew makes rare keys unreachable in practice, so a transaction that asked for
/// nearly as many keys as the table has drew forever: `verso kv --tiny --rows 3
/// --updates-per-transaction 3` and `verso ycsb --tiny --rows 10 --operations 10` hung.
#[test]
fn regression_a_transaction_of_as_many_distinct_keys_as_rows_finishes() {
    let kv = |rows, theta, updates_per_transaction| {
        KvWorkload::new(KvConfig {
            rows,
            theta,
            updates_per_transaction,
        })
        .expect("config")
    };
    let ycsb = YcsbWorkload::new(YcsbConfig {
        rows: 10,
        operations: 10,
        ..YcsbConfig::tiny()
    })
    .expect("config");
    let workloads: Vec<Box<dyn Workload + Send>> = vec![
        Box::new(kv(3, 0.8, 3)),
        Box::new(kv(1_000, 10.0, 20)),
        Box::new(kv(1_000, 0.8, 1_000)),
        Box::new(ycsb),
    ];
    for workload in workloads {
        let result = common::within(Duration::from_secs(60), move || {
            run(&*workload, &counted(GarbageCollector::Steam, 1, 50)).totals
        });
        assert_eq!(result.oltp_commits, 50);
    }
}

/// sysbench-HTAP in phases: no query runs in the OLTP-only first sixth, no update in the
/// OLAP-only last one; every query joins every row (and, under non-index updates, sums
/// the loaded k: a snapshot that saw a half-applied state would not); both update kinds
/// keep the tables' k sums as the consistency check expects; L and S queries both run.
#[test]
fn sysbench_runs_its_phases_and_its_joins_see_whole_snapshots() {
    for update in [SysbenchUpdate::NonIndex, SysbenchUpdate::Index] {
        let workload = SysbenchWorkload::new(SysbenchConfig {
            update,
            ..SysbenchConfig::tiny()
        })
        .expect("config");
        let config = RunConfig {
            olap_workers: 4,
            stop: StopAfter::Duration(Duration::from_millis(2400)),
            sample_interval: Duration::from_millis(100),
            ..counted(GarbageCollector::Steam, 1, 1)
        };
        let result = run(&workload, &config);
        assert!(result.consistent, "{update:?}");
        let by_name = &result.totals.olap_queries_by_name;
        for query in ["Q1(L)", "Q1(S)", "Q4(L)", "Q4(S)"] {
            assert!(
                by_name[query] > 0,
                "{update:?}: {query} never ran: {by_name:?}"
            );
        }
        assert!(result.totals.oltp_commits > 0, "{update:?}");
        let full: Vec<_> = result.samples.iter().filter(|s| s.is_full(0.1)).collect();
        let (first, last) = (full.first().unwrap(), full.last().unwrap());
        assert_eq!(
            first.olap_queries_per_second, 0.0,
            "{update:?}: OLAP in the OLTP-only phase"
        );
        assert_eq!(
            last.oltp_commits_per_second, 0.0,
            "{update:?}: OLTP in the OLAP-only phase"
        );
    }
}

#[test]
fn sysbench_consistency_check_catches_a_changed_k() {
    let workload = SysbenchWorkload::new(SysbenchConfig::tiny()).expect("config");
    let db = load(&workload);
    workload
        .check_consistency(&db)
        .expect("consistent after load");
    let table = db.table("sbtest3").unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn
        .update(table, &[Value::U64(7)], &[(1, Value::U64(1_000_000))])
        .unwrap());
    txn.commit().unwrap();
    assert!(matches!(
        workload.check_consistency(&db),
        Err(LabError::Inconsistent(_))
    ));
}

#[test]
fn sysbench_refuses_too_few_tables_and_empty_phases() {
    for config in [
        SysbenchConfig {
            tables: 4,
            ..SysbenchConfig::tiny()
        },
        SysbenchConfig {
            phases: [0, 0, 0],
            ..SysbenchConfig::tiny()
        },
    ] {
        assert!(matches!(
            SysbenchWorkload::new(config),
            Err(LabError::BadOption(_))
        ));
    }
}

/// A query that misses a row (or sees one twice) is an inconsistency: a snapshot that
/// lost a version shows up in the joins themselves, not only in the check after the run.
#[test]
fn sysbench_queries_catch_a_missing_row() {
    let workload = SysbenchWorkload::new(SysbenchConfig::tiny()).expect("config");
    let db = load(&workload);
    for worker in 0..2 {
        let mut query = workload.olap_worker(&db, worker, 1).unwrap().unwrap();
        query.run_one().expect("a whole snapshot");
    }
    let table = db.table("sbtest2").unwrap();
    let mut txn = db.begin(Isolation::Snapshot);
    assert!(txn.delete(table, &[Value::U64(50)]).unwrap());
    txn.commit().unwrap();
    for worker in 0..2 {
        let mut query = workload.olap_worker(&db, worker, 1).unwrap().unwrap();
        assert!(matches!(query.run_one(), Err(LabError::Inconsistent(_))));
    }
}
