//! The lab with persistent databases: `--path`, `--durability`, `--clients`, the durability
//! measures in the JSON and the summary, and `verso check` on what a run kept.

use std::path::Path;
use std::process::Command;

use verso::{Database, Isolation, Options, Value};

fn verso(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .output()
        .expect("the verso binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `verso args`, asserts success, and returns its standard output.
fn succeeds(what: &str, args: &[&str]) -> String {
    let output = verso(args);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{what}: {stdout}\n{}",
        text(&output.stderr)
    );
    stdout
}

/// Runs `verso args`, asserts failure, and returns its standard error.
fn fails(what: &str, args: &[&str]) -> String {
    let output = verso(args);
    assert!(
        !output.status.success(),
        "{what} succeeded: {}",
        text(&output.stdout)
    );
    text(&output.stderr)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn a_durable_run_with_clients_reports_its_log_and_latencies_and_check_verifies_what_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let databases = dir.path().join("db");
    let json = dir.path().join("out.json");
    let stdout = succeeds(
        "tpcb with a sync log and 8 clients",
        &[
            "tpcb",
            "--tiny",
            "--workers",
            "2",
            "--clients",
            "8",
            "--duration",
            "0.5",
            "--path",
            path(&databases),
            "--durability",
            "sync",
            "--checkpoint-mib",
            "1",
            "--log-syncs",
            "3",
            "--quiet",
            "--json",
            path(&json),
        ],
    );
    assert!(stdout.contains("8 clients, sync log in"), "{stdout}");
    assert!(stdout.contains("commit ms p50/p99/p99.9"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &report["runs"][0];
    let durability = &run["durability"];
    assert_eq!(durability["level"], "sync", "{durability}");
    assert_eq!(durability["clients"], 8);
    let commits = run["totals"]["oltp_commits"].as_u64().unwrap();
    assert!(commits > 0);
    assert_eq!(
        durability["commits_acknowledged"].as_u64().unwrap(),
        commits,
        "every counted commit acknowledged by the run's end"
    );
    assert!(durability["log_syncs_per_second"].as_f64().unwrap() > 0.0);
    assert!(durability["commits_per_sync"].as_f64().unwrap() >= 1.0);
    assert!(durability["log_bytes_per_second"].as_f64().unwrap() > 0.0);
    let p50 = durability["commit_latency_p50_us"].as_f64().unwrap();
    let p99 = durability["commit_latency_p99_us"].as_f64().unwrap();
    assert!(0.0 < p50 && p50 <= p99, "{durability}");
    assert!(
        run["configuration"]["durability"]
            .as_str()
            .unwrap()
            .starts_with("sync: a redo log in"),
        "{}",
        run["configuration"]["durability"]
    );
    assert!(
        run["configuration"]["durability"]
            .as_str()
            .unwrap()
            .contains("at most 3 syncs in flight"),
        "--log-syncs reaches the database and the report: {}",
        run["configuration"]["durability"]
    );

    // The run kept its database; `check` recovers it and checks TPC-B's sums.
    let kept = databases.join("01-steam");
    assert!(
        kept.join("MANIFEST").is_file(),
        "the run's directory is kept"
    );
    let check_json = dir.path().join("check.json");
    let stdout = succeeds(
        "check",
        &["check", path(&kept), "--json", path(&check_json)],
    );
    assert!(
        stdout.contains("consistent: TPC-B's balance sums hold"),
        "{stdout}"
    );
    assert!(stdout.contains("pgbench_accounts: 1000 rows"), "{stdout}");
    let checked: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&check_json).unwrap()).unwrap();
    let history = checked["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "pgbench_history")
        .expect("the history table");
    assert_eq!(
        history["rows"].as_u64().unwrap(),
        commits,
        "every acknowledged transaction's history row recovered"
    );

    // A database whose sums no longer hold is caught.
    {
        let db = Database::open(Options::default().path(&kept)).unwrap();
        let accounts = db.table("pgbench_accounts").unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        let balance = db.column_index(accounts, "abalance").unwrap();
        assert!(txn
            .update(
                accounts,
                &[Value::U64(1)],
                &[(balance, Value::I64(1_000_000))]
            )
            .unwrap());
        txn.commit().unwrap();
        db.close().unwrap();
    }
    let stderr = fails("check of a broken database", &["check", path(&kept)]);
    assert!(stderr.contains("tpcb balances differ"), "{stderr}");
}

#[test]
fn tpcc_on_an_async_log_is_recovered_and_its_twelve_conditions_hold() {
    let dir = tempfile::tempdir().unwrap();
    let databases = dir.path().join("db");
    succeeds(
        "tpcc with an async log",
        &[
            "tpcc",
            "--tiny",
            "--duration",
            "0.5",
            "--path",
            path(&databases),
            "--durability",
            "async",
            "--quiet",
        ],
    );
    let kept = databases.join("01-steam");
    let stdout = succeeds("check", &["check", path(&kept), "--replay-threads", "2"]);
    assert!(
        stdout.contains("consistent: TPC-C's twelve consistency conditions (clause 3.3.2) hold"),
        "{stdout}"
    );
    assert!(stdout.contains("recovered"), "{stdout}");
    assert!(stdout.contains("on 2 thread(s)"), "{stdout}");
    let stderr = fails(
        "check with no replay thread",
        &["check", path(&kept), "--replay-threads", "0"],
    );
    assert!(stderr.contains("at least one thread"), "{stderr}");
}

/// TPC-C on the tile-block storage with `--path` keeps a region file (no log); `check`
/// recovers it (TB-Collect §4.5), reports what recovery read, and TPC-C's conditions hold.
/// A durability level other than sync is refused for it before anything runs.
#[test]
fn a_tile_block_run_keeps_its_region_and_check_recovers_it() {
    let dir = tempfile::tempdir().unwrap();
    let databases = dir.path().join("db");
    let tile_block = [
        "--storage",
        "tile-block",
        "--protocol",
        "mvto",
        "--gc",
        "tb-collect",
        "--quiet",
    ];
    let mut args = vec![
        "tpcc",
        "--tiny",
        "--duration",
        "0.5",
        "--path",
        path(&databases),
    ];
    args.extend(tile_block);
    succeeds("tpcc on tile-block", &args);
    let kept = databases.join("01-tb-collect");
    assert!(kept.join("region.pm").is_file());
    assert!(!kept.join("MANIFEST").exists(), "no log beside a region");
    let stdout = succeeds("check", &["check", path(&kept)]);
    assert!(stdout.contains("a persistent-memory region"), "{stdout}");
    assert!(
        stdout.contains("consistent: TPC-C's twelve consistency conditions (clause 3.3.2) hold"),
        "{stdout}"
    );
    let elsewhere = dir.path().join("async");
    let mut args = vec![
        "tpcc",
        "--tiny",
        "--path",
        path(&elsewhere),
        "--durability",
        "async",
    ];
    args.extend(tile_block);
    let stderr = fails("tile-block with an async log", &args);
    assert!(stderr.contains("Durability::Sync"), "{stderr}");
}

#[test]
fn in_memory_clients_are_served_by_deferred_commits_too() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    succeeds(
        "ycsb in memory with 6 clients",
        &[
            "ycsb",
            "--tiny",
            "--workers",
            "2",
            "--clients",
            "6",
            "--duration",
            "0.3",
            "--quiet",
            "--json",
            path(&json),
        ],
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let durability = &report["runs"][0]["durability"];
    assert_eq!(durability["level"], "memory");
    assert_eq!(durability["clients"], 6);
    assert_eq!(durability["path"], serde_json::Value::Null);
    assert_eq!(
        durability["commits_acknowledged"],
        report["runs"][0]["totals"]["oltp_commits"]
    );
}

#[test]
fn durability_options_that_cannot_work_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    // A level without a directory: clap's usage error.
    let stderr = fails(
        "--durability without --path",
        &["tpcb", "--tiny", "--durability", "sync"],
    );
    assert!(stderr.contains("--path"), "{stderr}");
    // No sync in flight at all.
    let stderr = fails(
        "--log-syncs 0",
        &[
            "tpcb",
            "--tiny",
            "--path",
            path(dir.path()),
            "--log-syncs",
            "0",
        ],
    );
    assert!(stderr.contains("--log-syncs"), "{stderr}");
    // Fewer clients than workers.
    let stderr = fails(
        "--clients below --workers",
        &["tpcb", "--tiny", "--workers", "2", "--clients", "1"],
    );
    assert!(
        stderr.contains("every worker serves at least one client"),
        "{stderr}"
    );
    // A configuration's directory that holds something already.
    let used = dir.path().join("used");
    std::fs::create_dir_all(used.join("01-steam")).unwrap();
    std::fs::write(used.join("01-steam").join("x"), b"x").unwrap();
    let stderr = fails(
        "--path over a used directory",
        &["tpcb", "--tiny", "--path", path(&used), "--quiet"],
    );
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(used.join("01-steam")).unwrap().count(),
        1,
        "nothing written into it"
    );
    // `check` of a directory without a database creates nothing.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let stderr = fails("check of an empty directory", &["check", path(&empty)]);
    assert!(stderr.contains("no Verso database here"), "{stderr}");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

/// `--placement co-located` runs the disk engine under SI-CV's placement of new versions:
/// its label and its design say so.
#[test]
fn a_disk_run_with_the_co_located_placement_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    succeeds(
        "tpcb on the disk engine, co-located placement",
        &[
            "tpcb",
            "--tiny",
            "--workers",
            "2",
            "--duration",
            "0.4",
            "--disk",
            path(&dir.path().join("db")),
            "--buffer-pool-mib",
            "1",
            "--placement",
            "co-located",
            "--quiet",
            "--json",
            path(&json),
        ],
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let configuration = &report["runs"][0]["configuration"];
    assert_eq!(configuration["label"], "disk-heap-eager-co-located");
    assert!(
        configuration["design"]
            .as_str()
            .unwrap()
            .ends_with("/co-located"),
        "{configuration}"
    );
}

/// `--disk` under both pruning rules: each run is labelled by its rule, and its samples
/// carry the disk series (heap and index bytes, pages, hit ratio), which the report plots.
#[test]
fn a_disk_run_under_both_pruning_rules_reports_its_page_series() {
    let dir = tempfile::tempdir().unwrap();
    let databases = dir.path().join("db");
    let json = dir.path().join("out.json");
    let report_dir = dir.path().join("report");
    succeeds(
        "tpcb on the disk engine, eager and PostgreSQL's pruning",
        &[
            "tpcb",
            "--tiny",
            "--workers",
            "2",
            "--duration",
            "0.6",
            "--sample-ms",
            "100",
            "--disk",
            path(&databases),
            "--buffer-pool-mib",
            "1",
            "--compare",
            "gc=steam,vac",
            "--hold-snapshot",
            "--quiet",
            "--json",
            path(&json),
            "--report",
            path(&report_dir),
        ],
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    let labels: Vec<&str> = runs
        .iter()
        .map(|run| run["configuration"]["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["disk-heap-eager", "disk-heap"]);
    for run in runs {
        let samples = run["samples"].as_array().unwrap();
        let last = samples.last().unwrap();
        let label = &run["configuration"]["label"];
        assert!(last["heap_bytes"].as_u64().unwrap() > 0, "{label}: {last}");
        assert!(last["index_bytes"].as_u64().unwrap() > 0, "{label}: {last}");
        assert!(
            samples
                .iter()
                .any(|s| s["buffer_hit_ratio"].as_f64().unwrap() > 0.0),
            "{label}"
        );
        assert!(
            samples
                .iter()
                .any(|s| s["log_bytes_per_second"].as_f64().unwrap() > 0.0),
            "{label}: the page log's bytes"
        );
        // TPC-B's updates dirty heap pages by new versions and stamps, its history
        // inserts index pages (per second, by cause).
        for series in [
            "disk_pages_dirtied_per_second",
            "disk_pages_dirtied_by_new_versions_per_second",
            "disk_pages_dirtied_by_old_version_stamps_per_second",
            "disk_pages_dirtied_by_index_changes_per_second",
        ] {
            assert!(
                samples.iter().any(|s| s[series].as_f64().unwrap() > 0.0),
                "{label}: {series}"
            );
        }
        for series in [
            "disk_pages_dirtied_by_hint_bits_per_second",
            "disk_pages_dirtied_by_other_changes_per_second",
            "disk_pages_written_for_aborted_transactions_per_second",
        ] {
            assert!(
                samples.iter().all(|s| s[series].is_f64()),
                "{label}: {series}"
            );
        }
    }
    let html = std::fs::read_to_string(report_dir.join("index.html")).unwrap();
    assert!(
        html.contains("<h2>Pages per commit</h2>"),
        "the report's table of pages per commit by cause"
    );
    for plot in [
        "heap_bytes",
        "index_bytes",
        "buffer_hit_ratio",
        "disk_pages_written_per_second",
        "disk_pages_dirtied_per_second",
        "disk_pages_dirtied_by_new_versions_per_second",
    ] {
        assert!(
            report_dir.join(format!("{plot}.png")).exists(),
            "{plot}.png is missing"
        );
    }
}
