//! The peers: each runs each workload it offers in tiny mode, with its consistency
//! conditions checked after the load and after the run; TPC-C's conditions can fail on a
//! peer (a corrupted row is found); CH's 22 queries agree between Verso, PostgreSQL and
//! DuckDB on one database; a private PostgreSQL server is stopped and removed after a failed
//! or interrupted run; bad peer options fail before anything runs.
//!
//! PostgreSQL's tests need its server programs (`apt-get install postgresql`; `.ci/run`
//! installs them) and start private servers of their own. DuckDB's need the `duckdb`
//! feature: the on-demand run `.ci/duckdb`, not `.ci/run`.

use std::path::Path;
use std::process::Command;

use verso::{Database, Isolation, Options};
use verso_lab::peers::workloads::tpcc::TpccSqlWorker;
use verso_lab::peers::workloads::{ch as ch_sql, tpcc_consistency, SqlWorkload};
use verso_lab::peers::{PeerKind, PeerSpec, SqlValue};
use verso_lab::workload::{NoProgress, OltpWorker, TxnOutcome, Workload};
use verso_lab::workloads::ch::operators::{compare_rows, Cell, QueryResult};
use verso_lab::workloads::ch::{Ch, ChConfig};
use verso_lab::workloads::tpcc::{Tpcc, TpccConfig};

fn verso(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .output()
        .expect("the verso binary runs")
}

/// A fresh directory that the `postgres` user (a private server's, when the tests run as
/// root) can reach, as the system's temporary directory is.
fn reachable_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// The peers this build offers.
fn peers() -> Vec<PeerKind> {
    PeerKind::ALL.into_iter().filter(|k| k.built_in()).collect()
}

/// Runs `verso <workload> --tiny --peer <peer>` (in this process's child, files under a
/// fresh directory) and returns the peer's run from the JSON; the run checked the
/// workload's consistency conditions after its load and after its run.
fn tiny_run(workload: &str, peer: PeerKind, extra: &[&str]) -> serde_json::Value {
    let dir = reachable_dir();
    let json = dir.path().join("out.json");
    let peer_dir = dir.path().join("peers");
    std::fs::create_dir(&peer_dir).expect("peer dir");
    let mut args = vec![
        workload,
        "--tiny",
        "--peer",
        peer.name(),
        "--peer-dir",
        peer_dir.to_str().expect("utf-8"),
        "--sample-ms",
        "100",
        "--quiet",
        "--json",
        json.to_str().expect("utf-8"),
    ];
    if !extra.contains(&"--transactions") {
        args.extend(["--duration", "0.6"]);
    }
    args.extend(extra);
    let output = verso(&args);
    assert!(
        output.status.success(),
        "{workload} on {}: {}\n{}",
        peer.name(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read_dir(&peer_dir).expect("peer dir").count(),
        0,
        "{workload} on {} left files behind",
        peer.name()
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid");
    let runs = report["runs"].as_array().expect("runs").clone();
    assert_eq!(runs.len(), 2, "Verso's run and the peer's");
    let run = runs[1].clone();
    assert_eq!(run["configuration"]["system"], peer.name());
    assert_eq!(run["consistent"], true);
    assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{run}");
    assert!(
        !run["configuration"]["system_version"]
            .as_str()
            .unwrap_or("")
            .is_empty()
            && !run["configuration"]["durability"]
                .as_str()
                .unwrap_or("")
                .is_empty(),
        "{run}"
    );
    assert!(
        run["samples"]
            .as_array()
            .expect("samples")
            .iter()
            .all(|s| s["growth_bytes"].as_u64() > Some(0)),
        "every sample measures the peer's growth: {run}"
    );
    run
}

#[test]
fn each_peer_runs_tpcb_with_a_held_snapshot_in_tiny_mode() {
    for peer in peers() {
        let run = tiny_run("tpcb", peer, &["--workers", "2", "--hold-snapshot"]);
        assert_eq!(run["configuration"]["hold_snapshot"], true);
        // PostgreSQL fills the disk series from its catalogs and statistics views.
        if peer == PeerKind::Postgres {
            let last = run["samples"].as_array().unwrap().last().unwrap().clone();
            assert!(last["heap_bytes"].as_u64() > Some(0), "{last}");
            assert!(last["index_bytes"].as_u64() > Some(0), "{last}");
        }
    }
}

/// Beside the disk engine, a private PostgreSQL gets the engine's buffer pool size as its
/// `shared_buffers` (the same memory for pages), and both fill the disk series.
#[test]
fn beside_the_disk_engine_postgres_gets_the_same_buffer_size() {
    let dir = reachable_dir();
    let disk = dir.path().join("disk");
    let run = tiny_run(
        "tpcb",
        PeerKind::Postgres,
        &["--disk", disk.to_str().unwrap(), "--buffer-pool-mib", "16"],
    );
    let settings = run["configuration"]["settings"].as_str().unwrap();
    assert!(settings.contains("shared_buffers=16MB"), "{settings}");
}

#[test]
fn each_peer_runs_ycsb_in_tiny_mode() {
    for peer in peers() {
        tiny_run("ycsb", peer, &[]);
        // Wu et al.'s read-only transactions on the OLAP thread.
        let run = tiny_run("ycsb", peer, &["--read-only-operations", "4"]);
        assert!(run["totals"]["olap_queries"].as_u64() > Some(0), "{run}");
    }
}

#[test]
fn each_peer_runs_all_five_tpcc_transactions_in_tiny_mode() {
    for peer in peers() {
        let run = tiny_run("tpcc", peer, &["--transactions", "400"]);
        for kind in [
            "NewOrder",
            "Payment",
            "OrderStatus",
            "Delivery",
            "StockLevel",
        ] {
            assert!(
                run["totals"]["oltp_commits_by_kind"][kind].as_u64() > Some(0),
                "{} ran no {kind}: {run}",
                peer.name()
            );
        }
    }
}

#[test]
fn postgres_and_duckdb_run_ch_in_tiny_mode_and_sqlite_is_refused() {
    for peer in peers().into_iter().filter(|p| *p != PeerKind::Sqlite) {
        let run = tiny_run("ch", peer, &[]);
        assert!(run["totals"]["olap_queries"].as_u64() > Some(0), "{run}");
    }
    let output = verso(&["ch", "--tiny", "--peer", "sqlite"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("SQLite runs tpcb, ycsb and tpcc"),
        "{stderr}"
    );
}

/// The peers' TPC-C consistency check finds a broken row: it is not a check that cannot
/// fail. After 300 transactions through the SQL terminal, all twelve conditions hold; after
/// one warehouse's W_YTD is changed, conditions 1 and 8 fail.
#[test]
fn tpcc_consistency_conditions_hold_after_a_run_on_every_peer_and_catch_a_broken_row() {
    let workload = Tpcc::new(TpccConfig::tiny()).expect("tpcc");
    let staging = Database::open(Options::default()).expect("db");
    workload.load(&staging, &NoProgress).expect("load");
    for kind in peers() {
        let dir = reachable_dir();
        let spec = PeerSpec {
            dir: dir.path().to_owned(),
            ..PeerSpec::new(kind)
        };
        let peer = spec.open().expect("peer opens");
        peer.load(&SqlWorkload::tables(&workload), &staging, &NoProgress)
            .expect("copy");
        let mut worker = TpccSqlWorker::new(
            peer.connect().expect("session"),
            kind,
            workload.config(),
            0,
            1,
            7,
        )
        .expect("worker");
        let mut committed = 0;
        while committed < 300 {
            if let TxnOutcome::Committed { .. } = worker.run_one(Isolation::Snapshot).expect("runs")
            {
                committed += 1;
            }
        }
        let mut session = peer.connect().expect("session");
        let found = tpcc_consistency::violations(&mut *session, kind).expect("check runs");
        assert!(found.is_empty(), "{}: {found:?}", kind.name());
        session
            .batch("UPDATE warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 1")
            .expect("corrupt");
        let found = tpcc_consistency::violations(&mut *session, kind).expect("check runs");
        let conditions: Vec<u8> = found.iter().map(|v| v.condition).collect();
        assert_eq!(conditions, [1, 8], "{}: {found:?}", kind.name());
        assert_eq!(found[0].key, [SqlValue::Int(1)]);
    }
}

/// A peer's row as the lab's query result cell.
fn cell(value: &SqlValue) -> Cell {
    match value {
        SqlValue::Null => Cell::Null,
        SqlValue::Int(i) => Cell::Int(*i),
        SqlValue::Float(f) => Cell::Float(*f),
        SqlValue::Text(t) => Cell::Text(t.clone()),
        SqlValue::Bytes(b) => Cell::Text(format!("{b:?}")),
    }
}

/// Relative tolerance for floating-point cells: averages (Q1) and quotients (Q8, Q14, Q17)
/// computed in another order or in decimal; sums of money are exact on every system.
const TOLERANCE: f64 = 1e-9;

fn same_rows(a: &[Vec<Cell>], b: &[Vec<Cell>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.approx_eq(q, TOLERANCE))
        })
}

/// The ORDER BY keys of each query: (column, descending). A peer's rows must come in this
/// order; ties may come in any order (each system breaks them its own way).
const ORDER_KEYS: [&[(usize, bool)]; 22] = [
    &[(0, false)],
    &[(2, false), (1, false), (3, false)],
    &[(3, true), (4, false)],
    &[(0, false)],
    &[(1, true)],
    &[],
    &[(0, false), (1, false), (2, false)],
    &[(0, false)],
    &[(0, false), (1, true)],
    &[(2, true)],
    &[(1, true)],
    &[(0, false)],
    &[(1, true), (0, true)],
    &[],
    &[(0, false)],
    &[(3, true)],
    &[],
    &[(5, true), (3, false)],
    &[],
    &[(0, false)],
    &[(1, true), (0, false)],
    &[(0, false)],
];

fn in_key_order(rows: &[Vec<Cell>], keys: &[(usize, bool)]) -> bool {
    rows.windows(2).all(|pair| {
        for &(column, descending) in keys {
            let ordering = pair[0][column].total_cmp(&pair[1][column]);
            let ordering = if descending {
                ordering.reverse()
            } else {
                ordering
            };
            match ordering {
                std::cmp::Ordering::Less => return true,
                std::cmp::Ordering::Greater => return false,
                std::cmp::Ordering::Equal => {}
            }
        }
        true
    })
}

/// The 22 CH queries give the same rows on Verso, PostgreSQL and DuckDB, on one tiny
/// database aged by 600 TPC-C transactions and copied into each peer: same rows (money
/// sums exact, averages and quotients within 1e-9 relative), in the queries' order.
#[test]
fn the_22_ch_queries_agree_between_verso_postgres_and_duckdb() {
    let config = ChConfig::tiny();
    let workload = Ch::new(config.clone()).expect("ch");
    let db = Database::open(Options::default()).expect("db");
    workload.load(&db, &NoProgress).expect("load");
    let mut terminal = workload.tpcc().worker(&db, 0, 1, 11).expect("terminal");
    let mut committed = 0;
    while committed < 600 {
        let kind = terminal.next_kind();
        if let TxnOutcome::Committed { .. } = terminal.run(kind, Isolation::Snapshot).expect("tpcc")
        {
            committed += 1;
        }
    }
    let verso_results: Vec<QueryResult> = (0..22)
        .map(|q| {
            verso_lab::workloads::ch::run_query(&db, q)
                .expect("verso query")
                .0
        })
        .collect();
    let with_data = verso_results.iter().filter(|r| r.has_data()).count();
    assert!(with_data >= 18, "only {with_data} queries returned data");
    for kind in peers().into_iter().filter(|p| *p != PeerKind::Sqlite) {
        let dir = reachable_dir();
        let spec = PeerSpec {
            dir: dir.path().to_owned(),
            ..PeerSpec::new(kind)
        };
        let peer = spec.open().expect("peer opens");
        peer.load(&SqlWorkload::tables(&workload), &db, &NoProgress)
            .expect("copy");
        let dialect = match kind {
            PeerKind::Postgres => verso_lab::peers::sql::Dialect::Postgres,
            _ => verso_lab::peers::sql::Dialect::DuckDb,
        };
        let texts = ch_sql::query_texts(dialect);
        let mut session = peer.connect().expect("session");
        for (q, verso_result) in verso_results.iter().enumerate() {
            let rows = ch_sql::run_query(&mut *session, kind, &texts, q)
                .unwrap_or_else(|e| panic!("{} Q{}: {e}", kind.name(), q + 1));
            let peer_rows: Vec<Vec<Cell>> =
                rows.iter().map(|r| r.iter().map(cell).collect()).collect();
            assert!(
                in_key_order(&peer_rows, ORDER_KEYS[q]),
                "{} Q{}: rows out of the query's order",
                kind.name(),
                q + 1
            );
            let mut theirs = peer_rows.clone();
            let mut ours = verso_result.rows.clone();
            theirs.sort_by(|a, b| compare_rows(a, b));
            ours.sort_by(|a, b| compare_rows(a, b));
            assert!(
                same_rows(&ours, &theirs),
                "{} Q{} differs from Verso's:\nverso ({} rows): {:?}\n{} ({} rows): {:?}",
                kind.name(),
                q + 1,
                ours.len(),
                ours.iter().take(5).collect::<Vec<_>>(),
                kind.name(),
                theirs.len(),
                theirs.iter().take(5).collect::<Vec<_>>()
            );
        }
    }
}

/// The server processes (a postmaster names its data directory) whose command line names
/// `dir`; the lab's own process is not one of them.
fn servers_in(dir: &Path) -> Vec<String> {
    let output = Command::new("ps")
        .args(["-eo", "pid,args"])
        .output()
        .expect("ps runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| {
            line.contains(dir.to_str().expect("utf-8"))
                && !line.contains(env!("CARGO_BIN_EXE_verso"))
        })
        .map(str::to_owned)
        .collect()
}

/// After a run that fails with its private server up and loaded, the server is stopped and
/// its directory removed.
#[test]
fn a_private_postgres_is_stopped_and_removed_after_a_failed_run() {
    if !PeerKind::Postgres.built_in() || !Path::new("/usr/lib/postgresql").is_dir() {
        panic!("PostgreSQL's server programs are needed: apt-get install postgresql");
    }
    let peer_dir = reachable_dir();
    let output = Command::new(env!("CARGO_BIN_EXE_verso"))
        .args([
            "tpcb",
            "--tiny",
            "--peer",
            "postgres",
            "--in-process",
            "--quiet",
            "--peer-dir",
            peer_dir.path().to_str().expect("utf-8"),
        ])
        .env(verso_lab::peers::FAIL_AFTER_LOAD_FOR_TESTS, "1")
        .output()
        .expect("verso runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the planted failure fails the run"
    );
    assert!(stderr.contains("a failure planted by"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(peer_dir.path()).expect("dir").count(),
        0,
        "the server's directory is gone"
    );
    assert!(
        servers_in(peer_dir.path()).is_empty(),
        "{:?}",
        servers_in(peer_dir.path())
    );
}

/// Ctrl-C (SIGINT) during a run with a private server: the server is stopped, its
/// directory removed, and the lab exits with status 130.
#[test]
fn a_private_postgres_is_stopped_and_removed_when_the_run_is_interrupted() {
    let peer_dir = reachable_dir();
    let child = Command::new(env!("CARGO_BIN_EXE_verso"))
        .args([
            "tpcb",
            "--tiny",
            "--peer",
            "postgres",
            "--in-process",
            "--quiet",
            // Verso's run comes first and ends within seconds; PostgreSQL's would take
            // minutes, and is interrupted.
            "--transactions",
            "200000",
            "--peer-dir",
            peer_dir.path().to_str().expect("utf-8"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("verso starts");
    // Wait until the server is up (its log and pid file: initdb's own single-user server
    // writes a pid file too, but no log), then a little more: mid-run.
    let started = std::time::Instant::now();
    let server_up = || {
        std::fs::read_dir(peer_dir.path())
            .expect("dir")
            .flatten()
            .any(|entry| {
                entry.path().join("server.log").exists()
                    && entry.path().join("data/postmaster.pid").exists()
            })
    };
    while !server_up() {
        assert!(
            started.elapsed().as_secs() < 120,
            "the server never came up"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!servers_in(peer_dir.path()).is_empty(), "a server runs");
    std::thread::sleep(std::time::Duration::from_secs(3));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let output = child.wait_with_output().expect("verso ends");
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let left: Vec<_> = walk(peer_dir.path());
    assert!(
        left.is_empty(),
        "left behind: {left:?}; the lab said: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        servers_in(peer_dir.path()).is_empty(),
        "{:?}",
        servers_in(peer_dir.path())
    );
}

/// Every path under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        found.push(entry.path());
        if entry.path().is_dir() {
            found.extend(walk(&entry.path()));
        }
    }
    found
}

/// Bad peer options fail before any run (nothing of Verso's runs either), saying what is
/// wrong, and leave nothing behind.
#[test]
fn bad_peer_options_fail_before_anything_runs() {
    let peer_dir = reachable_dir();
    let a_file = peer_dir.path().join("a-file");
    std::fs::write(&a_file, "x").expect("file");
    let empty_bin = tempfile::tempdir().expect("empty dir");
    // Arguments, environment, and what the error must say.
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![
                "tpcb",
                "--tiny",
                "--peer",
                "postgres",
                "--postgres-url",
                "host=/nonexistent-dir port=5999 user=x",
            ],
            vec![],
            "cannot connect to --postgres-url",
        ),
        (
            vec![
                "tpcb",
                "--tiny",
                "--peer",
                "postgres",
                "--postgres-url",
                "not a = connection = string",
            ],
            vec![],
            "--postgres-url",
        ),
        (
            vec!["tpcb", "--tiny", "--peer", "postgres"],
            vec![("VERSO_PG_BIN", empty_bin.path().to_str().expect("utf-8"))],
            "apt-get install postgresql",
        ),
        (
            vec![
                "tpcb",
                "--tiny",
                "--peer",
                "sqlite",
                "--peer-dir",
                a_file.to_str().expect("utf-8"),
            ],
            vec![],
            "--peer-dir",
        ),
        (
            vec!["kv", "--tiny", "--compare", "system=verso,sqlite"],
            vec![],
            "no SQL form",
        ),
        (
            vec!["tpcb", "--tiny", "--peer", "sqlite", "--peer", "sqlite"],
            vec![],
            "given twice",
        ),
        (
            vec![
                "tpcb",
                "--tiny",
                "--peer",
                "sqlite",
                "--postgres-url",
                "host=/tmp",
            ],
            vec![],
            "--postgres-url is for --peer postgres",
        ),
        (
            vec!["tpcb", "--tiny", "--peer", "oracle"],
            vec![],
            "unknown peer",
        ),
        (
            vec!["tpcb", "--tiny", "--peer", "sqlite", "--protocol", "mvto"],
            vec![],
            "a peer runs its own concurrency control",
        ),
    ];
    for (args, env, expected) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_verso"))
            .args(&args)
            .envs(env)
            .output()
            .expect("verso runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} ran: {stdout}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stdout.contains("== "), "{args:?} started a run: {stdout}");
    }
    if !cfg!(feature = "duckdb") {
        let output = verso(&["tpcb", "--tiny", "--peer", "duckdb"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(stderr.contains("--features duckdb"), "{stderr}");
    }
    assert_eq!(
        std::fs::read_dir(peer_dir.path()).expect("dir").count(),
        1,
        "only the file the test made"
    );
}
