//! The measurements every workload gets (docs/lab.md): operations per second, mixed YCSB
//! transaction sizes, latency percentiles per transaction type, the fixed-rate (open-loop)
//! mode, the throughput's standard deviation, and the mean chain length over all rows.
//! Each runs the `verso` binary in tiny mode and reads its JSON.

use std::process::Command;

use serde_json::Value;

fn verso(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .output()
        .expect("the verso binary runs")
}

/// Runs `verso` with `args`, `--quiet` and `--json FILE`, checks that it succeeded, and
/// returns its one run's JSON.
fn run(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("out.json");
    let mut args = args.to_vec();
    args.extend(["--quiet", "--json", json.to_str().expect("utf-8 path")]);
    let output = verso(&args);
    assert!(
        output.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid");
    parsed["runs"][0].clone()
}

/// Runs `verso` with `args` and returns what it wrote to stderr, checking that it failed.
fn refused(args: &[&str]) -> String {
    let output = verso(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{args:?} succeeded: {stderr}");
    stderr
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

fn count(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {value}"))
}

/// The full samples' commit rates (an interval of at least half the nominal one), as the
/// summary takes them.
fn full_sample_rates(run: &Value) -> Vec<f64> {
    let nominal = number(&run["configuration"]["sample_interval_seconds"]);
    run["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .filter(|s| number(&s["interval_seconds"]) >= 0.5 * nominal)
        .map(|s| number(&s["oltp_commits_per_second"]))
        .collect()
}

#[test]
fn operations_per_second_count_each_committed_transactions_rows() {
    // YCSB: every transaction is its 7 operations.
    let ycsb = run(&[
        "ycsb",
        "--tiny",
        "--operations",
        "7",
        "--duration",
        "0.5",
        "--sample-ms",
        "100",
    ]);
    let commits = count(&ycsb["totals"]["oltp_commits"]);
    assert!(commits > 0);
    assert_eq!(count(&ycsb["totals"]["oltp_operations"]), 7 * commits);
    // A sample reads the commit and operation counters one after the other while the
    // workers run, so a transaction committing between the two reads shows in one and not
    // yet in the other (seen in a CI run): per sample, 7 operations a commit give or take
    // the transactions of the workers in flight (each adds to both within a few
    // instructions). The totals above, read after the run, are exact.
    let in_flight = 7.0 * count(&ycsb["configuration"]["oltp_workers"]) as f64;
    for sample in ycsb["samples"].as_array().expect("samples") {
        let (operations, transactions, interval) = (
            number(&sample["oltp_operations_per_second"]),
            number(&sample["oltp_commits_per_second"]),
            number(&sample["interval_seconds"]),
        );
        assert!(
            (operations - 7.0 * transactions).abs() * interval <= in_flight + 1e-6,
            "{operations} operations/s against {transactions} commits/s over {interval} s"
        );
    }
    let summary = &ycsb["summary"];
    let (operations, transactions) = (
        number(&summary["oltp_operations_per_second"]),
        number(&summary["oltp_commits_per_second"]),
    );
    assert!(
        (operations - 7.0 * transactions).abs() <= 0.01 * operations,
        "medians: {operations} operations/s against {transactions} commits/s"
    );

    // TPC-B: pgbench's five statements.
    let tpcb = run(&["tpcb", "--tiny", "--duration", "0.3"]);
    assert_eq!(
        count(&tpcb["totals"]["oltp_operations"]),
        5 * count(&tpcb["totals"]["oltp_commits"])
    );

    // TPC-C: rows read and written, between 2 (Order-Status's least) and some hundreds a
    // transaction.
    let tpcc = run(&["tpcc", "--tiny", "--duration", "0.5"]);
    let (operations, commits) = (
        count(&tpcc["totals"]["oltp_operations"]),
        count(&tpcc["totals"]["oltp_commits"]),
    );
    assert!(commits > 0);
    assert!(
        operations > 10 * commits && operations < 500 * commits,
        "{operations} operations over {commits} commits"
    );
}

#[test]
fn an_operations_mix_draws_each_transactions_size_and_reports_each_size_apart() {
    let run = run(&[
        "ycsb",
        "--tiny",
        "--operations-mix",
        "10:0.8,100:0.2",
        "--duration",
        "1",
    ]);
    let by_kind = &run["totals"]["oltp_commits_by_kind"];
    let (short, long) = (
        count(&by_kind["10_operations"]),
        count(&by_kind["100_operations"]),
    );
    assert!(by_kind.get("ycsb").is_none(), "{by_kind}");
    // Drawn per transaction: about a fifth are long (a retried transaction keeps its size,
    // so aborts do not bias the draw).
    let share = long as f64 / (short + long) as f64;
    assert!(short + long >= 100, "{short} + {long} transactions");
    assert!(
        (0.1..0.3).contains(&share),
        "{long} long of {}",
        short + long
    );
    assert_eq!(
        count(&run["totals"]["oltp_operations"]),
        10 * short + 100 * long
    );
    // Each size has its own latencies, and ten times the operations take longer.
    let latency = &run["latency"];
    assert_eq!(count(&latency["10_operations"]["count"]), short);
    assert_eq!(count(&latency["100_operations"]["count"]), long);
    assert!(
        number(&latency["100_operations"]["p50"]) > number(&latency["10_operations"]["p50"]),
        "{latency}"
    );
    assert!(run["configuration"]["workload_parameters"]
        .as_str()
        .expect("text")
        .contains("80% 10, 20% 100 operations per transaction"));
}

#[test]
fn bad_operations_mixes_are_refused_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["ycsb", "--tiny", "--operations-mix", "10:0.9,100:0.05"],
            "sum to",
        ),
        (
            &["ycsb", "--tiny", "--operations-mix", "10:0.9,100"],
            "has no ':'",
        ),
        (
            &["ycsb", "--tiny", "--operations-mix", "ten:1"],
            "not a number of operations",
        ),
        (
            &["ycsb", "--tiny", "--operations-mix", "10:0.5,10:0.5"],
            "named twice",
        ),
        (
            &["ycsb", "--tiny", "--operations-mix", "10:1.5,100:-0.5"],
            "must lie in (0, 1]",
        ),
        (
            &["ycsb", "--tiny", "--operations-mix", "0:1"],
            "must lie in [1, rows",
        ),
        (
            &[
                "ycsb",
                "--tiny",
                "--operations",
                "5",
                "--operations-mix",
                "10:1",
            ],
            "cannot be used with",
        ),
    ];
    for (args, expected) in cases {
        let stderr = refused(args);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn latency_percentiles_are_reported_per_transaction_type() {
    let run = run(&["tpcc", "--tiny", "--duration", "1"]);
    let latency = run["latency"].as_object().expect("latency by type");
    let kinds: Vec<&str> = latency.keys().map(String::as_str).collect();
    assert_eq!(
        kinds,
        [
            "Delivery",
            "NewOrder",
            "OrderStatus",
            "Payment",
            "StockLevel"
        ]
    );
    for (kind, summary) in latency {
        // Every commit of the type is measured once.
        assert_eq!(
            count(&summary["count"]),
            count(&run["totals"]["oltp_commits_by_kind"][kind]),
            "{kind}"
        );
        if count(&summary["count"]) == 0 {
            continue;
        }
        let p = |key: &str| number(&summary[key]);
        assert!(p("p50") >= 1.0, "{kind}: {summary}");
        assert!(
            p("p50") <= p("p95") && p("p95") <= p("p99") && p("p99") <= p("max"),
            "{kind}: {summary}"
        );
        assert!(
            p("mean") > 0.0 && p("mean") <= p("max"),
            "{kind}: {summary}"
        );
        assert!(p("stddev") >= 0.0, "{kind}: {summary}");
    }
    // The commit latencies of the clients stay as they were.
    assert!(count(&run["durability"]["commits_acknowledged"]) > 0);
    // One type for TPC-B.
    let tpcb = run_tpcb_briefly();
    let kinds: Vec<&String> = tpcb["latency"]
        .as_object()
        .expect("latency")
        .keys()
        .collect();
    assert_eq!(kinds, ["tpcb"]);
}

fn run_tpcb_briefly() -> Value {
    run(&["tpcb", "--tiny", "--duration", "0.3"])
}

/// A target of 200 transactions/s over two workers runs at 200/s, not at what the machine
/// could do (thousands a second even in a debug build); the summary's mean and standard
/// deviation are those of the full samples.
#[test]
fn a_target_rate_runs_at_that_rate_and_reports_what_it_achieved() {
    let run = run(&[
        "tpcb",
        "--tiny",
        "--workers",
        "2",
        "--target-rate",
        "200",
        "--duration",
        "2",
        "--sample-ms",
        "250",
    ]);
    let fixed = &run["fixed_rate"];
    assert_eq!(number(&fixed["target_per_second"]), 200.0);
    let achieved = number(&fixed["achieved_per_second"]);
    assert!(
        (190.0..=210.0).contains(&achieved),
        "achieved {achieved}/s of 200"
    );
    let commits = count(&run["totals"]["oltp_commits"]);
    assert!((380..=420).contains(&commits), "{commits} commits in 2 s");
    assert!(number(&fixed["behind_schedule_seconds"]) < 0.1, "{fixed}");

    // The summary's throughput statistics are those of the full samples.
    let rates = full_sample_rates(&run);
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let stddev = (rates.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>()
        / (rates.len() - 1) as f64)
        .sqrt();
    let summary = &run["summary"];
    assert!((number(&summary["commits_per_second_mean"]) - mean).abs() < 1e-6);
    assert!((number(&summary["commits_per_second_stddev"]) - stddev).abs() < 1e-6);
    // Paced, the rate is steady: within a quarter of the target from sample to sample.
    assert!(stddev < 50.0, "{rates:?}");

    // Closed loop has no fixed rate.
    assert!(run_tpcb_briefly()["fixed_rate"].is_null());
}

#[test]
fn a_target_rate_the_system_cannot_reach_fails_the_run() {
    let stderr = refused(&[
        "tpcb",
        "--tiny",
        "--target-rate",
        "100000000",
        "--duration",
        "0.5",
        "--quiet",
    ]);
    assert!(stderr.contains("--target-rate 100000000"), "{stderr}");
    assert!(stderr.contains("not reached"), "{stderr}");
}

#[test]
fn a_target_rate_is_refused_where_it_cannot_work() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["tpcb", "--tiny", "--target-rate", "100", "--clients", "4"],
            "one client per worker",
        ),
        (
            &["tpcb", "--tiny", "--target-rate", "0"],
            "must be a positive number",
        ),
        (
            &["tpcb", "--tiny", "--target-rate", "-5"],
            "must be a positive number",
        ),
    ];
    for (args, expected) in cases {
        let stderr = refused(args);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    // One client per worker composes.
    let run = run(&[
        "tpcb",
        "--tiny",
        "--target-rate",
        "100",
        "--clients",
        "1",
        "--duration",
        "1",
    ]);
    assert!(number(&run["fixed_rate"]["achieved_per_second"]) >= 95.0);
}

/// Every sample counts the versions examined per live row, the collector's among them:
/// none under 'none', some under Steam (each writer prunes the chain it met), and never
/// more than everyone's.
#[test]
fn samples_count_version_accesses_per_row_and_the_collectors_share() {
    let mut collectors_total = Vec::new();
    for gc in ["none", "steam"] {
        let run = run(&[
            "ycsb",
            "--tiny",
            "--read-ratio",
            "0.5",
            "--gc",
            gc,
            "--duration",
            "0.5",
            "--sample-ms",
            "100",
        ]);
        let samples = run["samples"].as_array().expect("samples");
        let (mut everyone, mut collector) = (0.0, 0.0);
        for sample in samples {
            let all = number(&sample["version_accesses_per_tuple"]);
            let collector_part = number(&sample["collector_accesses_per_tuple"]);
            assert!(collector_part <= all, "{gc}: {sample}");
            everyone += all;
            collector += collector_part;
        }
        assert!(everyone > 0.0, "{gc}: reads and writes examine versions");
        collectors_total.push(collector);
    }
    assert_eq!(collectors_total[0], 0.0, "'none' examines nothing");
    assert!(
        collectors_total[1] > 0.0,
        "Steam prunes: {collectors_total:?}"
    );
}

/// YCSB never inserts or deletes: every sample counts the loaded rows, and the mean chain
/// is one plus the live versions per row. With a held snapshot and only updates the
/// versions pile up, so the chain grows past 1.
#[test]
fn the_mean_chain_length_counts_stored_versions_over_all_rows() {
    let run = run(&[
        "ycsb",
        "--tiny",
        "--read-ratio",
        "0",
        "--hold-snapshot",
        "--gc",
        "watermark",
        "--duration",
        "0.5",
        "--sample-ms",
        "100",
    ]);
    let samples = run["samples"].as_array().expect("samples");
    for sample in samples {
        assert_eq!(count(&sample["live_rows"]), 2_000);
        let expected = 1.0 + count(&sample["live_versions"]) as f64 / 2_000.0;
        assert!((number(&sample["chain_length_mean"]) - expected).abs() < 1e-9);
    }
    let last = samples.last().expect("a sample");
    assert!(number(&last["chain_length_mean"]) > 1.5, "{last}");
    assert_eq!(
        number(&run["summary"]["last_chain_length_mean"]),
        number(&last["chain_length_mean"])
    );

    // TPC-B inserts a history row per commit: the live rows grow by the commits.
    let tpcb = run_tpcb_briefly();
    let config = verso_lab::workloads::tpcb::TpcbConfig::tiny();
    let loaded = config.accounts() + config.tellers() + config.branches();
    let last = tpcb["samples"]
        .as_array()
        .expect("samples")
        .last()
        .cloned()
        .expect("one");
    assert_eq!(
        count(&last["live_rows"]),
        loaded + count(&tpcb["totals"]["oltp_commits"])
    );
}

/// `--storage tile-block` (TB-Collect's storage) runs with its region's counters in every
/// sample: lines persisted and the media bytes they are, in the line size asked for; the
/// emulated write share slows nothing down that the counters would miss; and the storage's
/// refusals reach the user.
#[test]
fn the_tile_block_storage_reports_its_persistent_memory_writes() {
    let tile_block = [
        "ycsb",
        "--tiny",
        "--duration",
        "1",
        "--storage",
        "tile-block",
        "--protocol",
        "mvto",
        "--gc",
        "none",
    ];
    for (line, share) in [("256", None), ("64", Some("0.5"))] {
        let mut args = tile_block.to_vec();
        args.extend(["--pm-line", line]);
        if let Some(share) = share {
            args.extend(["--pm-write-share", share]);
        }
        let run = run(&args);
        let samples = run["samples"].as_array().expect("samples");
        let lines: f64 = samples
            .iter()
            .map(|s| number(&s["pm_lines_per_second"]))
            .sum();
        let media: f64 = samples
            .iter()
            .map(|s| number(&s["pm_media_bytes_per_second"]))
            .sum();
        assert!(lines > 0.0, "line {line}: no lines persisted");
        let line_bytes: f64 = line.parse().unwrap();
        assert!(
            (media / lines - line_bytes).abs() < 1e-6,
            "media bytes = lines × {line}"
        );
        assert!(samples
            .iter()
            .any(|s| number(&s["pm_write_amplification"]) > 0.0));
        // The region's space and the tiles' DRAM at every sample: the loaded rows' blocks
        // at least (2,000 rows of about 160 bytes), tiles beside them.
        for sample in samples {
            let (space, tiles) = (
                number(&sample["pm_bytes_in_use"]),
                number(&sample["pm_tile_bytes"]),
            );
            assert!(
                space >= 2_000.0 * 100.0,
                "line {line}: {space} bytes in blocks"
            );
            assert!(tiles > 0.0, "line {line}: no tile bytes");
        }
    }
    // Without the storage the counters stay 0.
    let run = run(&["ycsb", "--tiny", "--duration", "1"]);
    assert!(run["samples"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| number(&s["pm_lines_per_second"]) == 0.0 && number(&s["pm_bytes_in_use"]) == 0.0));
    let stderr = refused(&[
        "ycsb",
        "--tiny",
        "--duration",
        "1",
        "--storage",
        "tile-block",
    ]);
    assert!(stderr.contains("MVTO only"), "{stderr}");
    let stderr = refused(&[
        "ycsb",
        "--tiny",
        "--duration",
        "1",
        "--storage",
        "tile-block",
        "--protocol",
        "mvto",
        "--gc",
        "none",
        "--pm-line",
        "100",
    ]);
    assert!(stderr.contains("64, 128"), "{stderr}");
}

/// `--storage append-nvm` (TB-Collect's baselines' storage) runs under each of its
/// collectors with its region's counters in every sample: lines persisted, the frames its
/// slots take (space that reuse lists keep, never released), and no tiles (its headers are
/// in the region).
#[test]
fn the_append_nvm_storage_runs_under_its_collectors_and_reports_its_region() {
    for gc in ["none", "tvcp", "zen"] {
        let run = run(&[
            "ycsb",
            "--tiny",
            "--duration",
            "0.5",
            "--storage",
            "append-nvm",
            "--protocol",
            "mvto",
            "--gc",
            gc,
        ]);
        let samples = run["samples"].as_array().expect("samples");
        let lines: f64 = samples
            .iter()
            .map(|s| number(&s["pm_lines_per_second"]))
            .sum();
        assert!(lines > 0.0, "{gc}: no lines persisted");
        for sample in samples {
            assert!(
                number(&sample["pm_bytes_in_use"]) >= 2_000.0 * 100.0,
                "{gc}: {sample}"
            );
            assert_eq!(number(&sample["pm_tile_bytes"]), 0.0, "{gc}");
        }
        assert!(
            run["configuration"]["design"]
                .as_str()
                .is_some_and(|d| d.contains("append-nvm") && d.contains(gc)),
            "{}",
            run["configuration"]
        );
    }
}
