//! The `verso` binary: a tiny run writes its outputs, and bad options exit with a non-zero
//! status and say what is wrong.

use std::process::Command;

fn verso(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .output()
        .expect("the verso binary runs")
}

/// Runs `verso` with `args` and `--json FILE`, checks that it succeeded (else shows what it
/// printed, under `what`), and returns the JSON it wrote.
fn run_to_json(what: &str, args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("out.json");
    let mut args = args.to_vec();
    args.extend(["--json", json.to_str().expect("utf-8 path")]);
    let output = verso(&args);
    assert!(
        output.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid")
}

#[test]
fn a_tiny_compared_run_prints_the_summary_and_writes_json_and_a_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("out.json");
    let report = dir.path().join("report");
    let output = verso(&[
        "tpcb",
        "--tiny",
        "--workers",
        "2",
        "--duration",
        "0.4",
        "--sample-ms",
        "100",
        "--compare",
        "steam,watermark",
        "--hold-snapshot",
        "--quiet",
        "--json",
        json.to_str().expect("utf-8 path"),
        "--report",
        report.to_str().expect("utf-8 path"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("configuration"), "{stdout}");
    assert!(stdout.contains("steam +held snapshot"), "{stdout}");
    assert!(
        stdout.contains("the OLTP throughput of watermark"),
        "{stdout}"
    );
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid");
    assert_eq!(parsed["workload"], "tpcb");
    assert_eq!(parsed["runs"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        parsed["runs"][1]["configuration"]["garbage_collector"],
        "watermark"
    );
    assert_eq!(parsed["runs"][0]["configuration"]["hold_snapshot"], true);
    assert!(report.join("index.html").exists());
    assert!(report.join("oltp_commits_per_second.svg").exists());
}

/// `--hold-read-only` declares the held transaction read-only and says so in the JSON and
/// the summary; without `--hold-snapshot` it is refused.
#[test]
fn hold_read_only_declares_the_held_snapshot_read_only() {
    let parsed = run_to_json(
        "hold read-only",
        &[
            "kv",
            "--tiny",
            "--duration",
            "0.3",
            "--protocol",
            "ssn",
            "--hold-snapshot",
            "--hold-read-only",
            "--in-process",
            "--quiet",
        ],
    );
    let configuration = &parsed["runs"][0]["configuration"];
    assert_eq!(configuration["hold_snapshot"], true, "{configuration}");
    assert_eq!(configuration["hold_read_only"], true, "{configuration}");
    let refused = verso(&["kv", "--tiny", "--hold-read-only", "--quiet"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--hold-snapshot"), "{stderr}");
}

#[test]
fn storage_selects_the_version_storage_of_every_compared_configuration() {
    let parsed = run_to_json(
        "storage",
        &[
            "tpcc",
            "--tiny",
            "--duration",
            "0.3",
            "--storage",
            "append-n2o",
            "--compare",
            "steam,watermark",
            "--in-process",
            "--quiet",
        ],
    );
    let runs = parsed["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for (run, gc) in runs.iter().zip(["steam", "watermark"]) {
        let design = run["configuration"]["design"].as_str().expect("design");
        assert!(design.starts_with(&format!("append-n2o/{gc}/")), "{design}");
        // TPC-C's consistency conditions were checked after the run (or it would fail).
        assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{run}");
    }
}

/// `--non-inline` stores YCSB's long fields as it says, on every storage: the design names
/// the policy, and the run's consistency check (every field its width) holds.
#[test]
fn non_inline_selects_how_long_values_are_stored() {
    for (policy, storage) in [
        ("shared", "time-travel"),
        ("copied", "delta"),
        ("shared", "append-o2n"),
    ] {
        let parsed = run_to_json(
            policy,
            &[
                "ycsb",
                "--tiny",
                "--field-bytes",
                "100",
                "--duration",
                "0.3",
                "--storage",
                storage,
                "--non-inline",
                policy,
                "--in-process",
                "--quiet",
            ],
        );
        let run = &parsed["runs"][0];
        let design = run["configuration"]["design"].as_str().expect("design");
        assert!(design.starts_with(storage), "{design}");
        assert!(
            design.ends_with(&format!("/non-inline-{policy}")),
            "{design}"
        );
        assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{run}");
    }
}

/// `--memory-spaces` gives the version storage separate memory spaces (the binary installs
/// their allocator); the design says how many.
#[test]
fn memory_spaces_select_the_spaces_the_version_storage_allocates_from() {
    let parsed = run_to_json(
        "memory spaces",
        &[
            "ycsb",
            "--tiny",
            "--duration",
            "0.3",
            "--workers",
            "2",
            "--storage",
            "append-n2o",
            "--memory-spaces",
            "2",
            "--in-process",
            "--quiet",
        ],
    );
    let run = &parsed["runs"][0];
    let design = run["configuration"]["design"].as_str().expect("design");
    assert!(design.ends_with("/spaces-2"), "{design}");
    assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{run}");
}

/// `--protocol` runs every transaction of the workload under that protocol; TPC-C's
/// consistency conditions hold after the run.
#[test]
fn protocol_selects_the_concurrency_control_of_the_run() {
    for (name, engine_name) in [
        ("mvto", "mvto"),
        ("mv2pl", "mv2pl-no-wait"),
        ("ssn", "si+ssn"),
        ("mvocc", "mvocc"),
    ] {
        let parsed = run_to_json(
            name,
            &[
                "tpcc",
                "--tiny",
                "--duration",
                "0.3",
                "--workers",
                "2",
                "--protocol",
                name,
                "--in-process",
                "--quiet",
            ],
        );
        let run = &parsed["runs"][0];
        let design = run["configuration"]["design"].as_str().expect("design");
        assert!(design.ends_with(&format!("/{engine_name}")), "{design}");
        assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{run}");
    }
}

#[test]
fn bad_options_exit_non_zero_with_a_message() {
    let cases: &[(&[&str], &str)] = &[
        (&["kv", "--gc", "nope"], "unknown garbage collector"),
        (&["kv", "--storage", "heap"], "unknown version storage"),
        (&["kv", "--protocol", "2pc"], "unknown concurrency control"),
        (
            &["kv", "--non-inline", "inline"],
            "unknown non-inline storage",
        ),
        (
            &["kv", "--memory-spaces", "0", "--tiny"],
            "memory spaces must number",
        ),
        (&["kv", "--duration", "0"], "duration must be above 0"),
        (&["kv", "--duration", "soon"], "not a number"),
        (
            &["kv", "--duration", "1", "--transactions", "5"],
            "cannot be used with",
        ),
        (
            &["kv", "--gc", "steam", "--compare", "steam,watermark"],
            "takes its values from --compare only",
        ),
        (
            &[
                "kv",
                "--tiny",
                "--storage",
                "delta",
                "--compare",
                "storage=delta,time-travel",
            ],
            "takes its values from --compare only",
        ),
        (
            &[
                "tpcb",
                "--tiny",
                "--peer",
                "sqlite",
                "--compare",
                "system=verso,sqlite",
            ],
            "takes its values from --compare only",
        ),
        (
            &["kv", "--compare", "colour=red,blue"],
            "the axes: gc, storage, protocol, index-pointers, non-inline, eviction, placement, disk-storage, design, system",
        ),
        (&["kv", "--compare", "storage=delta,btree"], "btree"),
        (&["kv", "--compare", "protocol=si"], "at least two"),
        (
            &["kv", "--tiny", "--compare", "protocol=si,mvto,si"],
            "names si twice",
        ),
        (
            &[
                "kv",
                "--tiny",
                "--compare",
                "index-pointers=logical,physical",
            ],
            "append",
        ),
        (&["kv", "--tiny", "--compare", "system=verso,sqlite"], "kv"),
        (&["kv", "--compare", "steam,steam", "--tiny"], "twice"),
        (&["kv", "--workers", "0", "--tiny"], "nothing to run"),
        (
            &["kv", "--olap-workers", "1", "--tiny"],
            "unexpected argument '--olap-workers'",
        ),
        (
            &["tpcb", "--olap-workers", "1", "--tiny"],
            "unexpected argument '--olap-workers'",
        ),
        (
            &["scans", "--peer", "sqlite", "--tiny"],
            "unexpected argument '--peer'",
        ),
        (&["kv", "--theta=-1", "--tiny"], "theta"),
        (&["ycsb", "--theta", "1.5", "--tiny"], "0 < theta < 1"),
        (&["ycsb", "--read-columns", "11", "--tiny"], "read-columns"),
        (
            &["scans", "--scan-percent", "101", "--tiny"],
            "scan-percent",
        ),
        (&["tpcb", "--scale", "0"], "scale"),
        (&["tpcb", "--isolation", "chaos"], "isolation"),
        (&["tpcb", "--sample-ms", "1"], "sample-ms"),
        (&["nosuchworkload"], "unrecognized subcommand"),
        // A negative number is a bad value of its option, not an unknown argument.
        (
            &["kv", "--workers", "-1"],
            "invalid value '-1' for '--workers",
        ),
        (
            &["reproduce", "--list", "--json", "list.json"],
            "cannot be used with",
        ),
    ];
    for (args, message) in cases {
        let output = verso(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(
            stderr.contains(message),
            "{args:?}: expected {message:?} in:\n{stderr}"
        );
    }
}

/// Options a review of the command line found running anyway: sizes that overflowed (a
/// panic in debug builds, a wrapped-around size in release), worker counts that panicked,
/// combinations the engine refused only after the configurations before them had run,
/// output paths refused only after the whole run (a report directory holding a directory named
/// `index.html` among them), and YCSB's OLAP options that did
/// nothing. Each is now refused before any configuration starts, naming the option.
#[test]
fn regression_options_that_cannot_work_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a_dir = dir.path().to_str().expect("utf-8 path").to_owned();
    let a_file = dir.path().join("a-file");
    std::fs::write(&a_file, "").expect("write");
    let a_file = a_file.to_str().expect("utf-8 path").to_owned();
    let no_parent = format!("{a_dir}/missing/out.json");
    let blocked_report = dir.path().join("blocked-report");
    std::fs::create_dir_all(blocked_report.join("index.html")).expect("mkdir");
    let blocked_report = blocked_report.to_str().expect("utf-8 path").to_owned();
    let cases: &[(&[&str], &str)] = &[
        (
            &["kv", "--tiny", "--scale", "18446744073709551615"],
            "--scale 18446744073709551615 is too large",
        ),
        (
            &["ycsb", "--scale", "18446744073710"],
            "--scale 18446744073710 is too large",
        ),
        (
            &["scans", "--tiny", "--scale", "2", "--rows", "10"],
            "both set the rows",
        ),
        (&["kv", "--tiny", "--rows", "1099511627777"], "--rows"),
        (
            &["kv", "--tiny", "--workers", "18446744073709551615"],
            "a database serves at most 65536 threads",
        ),
        (
            &["ch", "--tiny", "--olap-workers", "18446744073709551615"],
            "a database serves at most 65536 threads",
        ),
        (
            &["ycsb", "--tiny", "--compare", "steam,coop"],
            "needs the append-o2n version storage",
        ),
        (
            &["kv", "--tiny", "--index-pointers", "physical"],
            "physical index pointers need",
        ),
        (
            &["kv", "--tiny", "--memory-spaces", "100000000000"],
            "memory spaces must number",
        ),
        (&["kv", "--tiny", "--json", &a_dir], "is a directory"),
        (
            &["kv", "--tiny", "--json", &no_parent],
            "not an existing directory",
        ),
        (
            &["kv", "--tiny", "--report", &a_file],
            "exists and is not a directory",
        ),
        (
            &["demo", "--tiny", "--report", &a_file],
            "exists and is not a directory",
        ),
        (
            &["reproduce", "steam-fig11", "--quick", "--report", &a_file],
            "exists and is not a directory",
        ),
        (
            &["kv", "--tiny", "--report", &blocked_report],
            "holds a directory named index.html",
        ),
        (
            &[
                "reproduce",
                "steam-fig11",
                "--quick",
                "--report",
                &blocked_report,
            ],
            "holds a directory named index.html",
        ),
        (
            &["ycsb", "--tiny", "--olap-workers", "1"],
            "give --read-only-operations",
        ),
        (
            &[
                "ycsb",
                "--tiny",
                "--read-only-operations",
                "5",
                "--olap-workers",
                "0",
            ],
            "--olap-workers is 0",
        ),
    ];
    for (args, message) in cases {
        let output = verso(args);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {stdout}\n{stderr}"
        );
        assert!(
            stderr.contains(message),
            "{args:?}: expected {message:?} in:\n{stderr}"
        );
        assert!(
            !stdout.contains("== ") && !stdout.contains("point 1"),
            "{args:?}: a configuration ran before the refusal:\n{stdout}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&a_file).expect("still there"),
        "",
        "a refused --report left its file alone"
    );
}

/// The same review: a run shorter than one sampling interval summarized 1,000 commits as
/// 0 commits/s, the non-SI protocols were labelled "snapshot" although every transaction is
/// serializable under them, and `--read-only-operations` without `--olap-workers` ran no
/// read-only transaction.
#[test]
fn regression_short_runs_protocol_labels_and_read_only_transactions_report_what_ran() {
    let parsed = run_to_json(
        "short",
        &["kv", "--tiny", "--transactions", "1000", "--quiet"],
    );
    let run = &parsed["runs"][0];
    assert_eq!(run["totals"]["oltp_commits"], 1000);
    assert!(
        run["summary"]["oltp_commits_per_second"].as_f64() > Some(0.0),
        "{run}"
    );

    let parsed = run_to_json(
        "mvto",
        &[
            "ycsb",
            "--tiny",
            "--protocol",
            "mvto",
            "--duration",
            "0.3",
            "--quiet",
        ],
    );
    assert_eq!(
        parsed["runs"][0]["configuration"]["isolation"],
        "serializable"
    );

    let parsed = run_to_json(
        "read-only",
        &[
            "ycsb",
            "--tiny",
            "--read-only-operations",
            "5",
            "--duration",
            "0.3",
            "--quiet",
        ],
    );
    let run = &parsed["runs"][0];
    assert_eq!(run["configuration"]["olap_workers"], 1);
    assert!(run["totals"]["olap_queries"].as_u64() > Some(0), "{run}");
}

/// The demo's tiny mode: TPC-B with a held snapshot on Steam, watermark-only and every peer
/// this build and machine have, each beside its baseline; the summary says per system what
/// the snapshot cost, and the report overlays them all.
#[test]
fn the_demo_holds_a_snapshot_on_verso_and_every_peer_and_writes_its_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("demo-report");
    let peer_dir = tempfile::tempdir().expect("peer dir");
    {
        // Reachable by the `postgres` user a private server runs as when the tests run as
        // root, as the system's temporary directory is.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(peer_dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let output = verso(&[
        "demo",
        "--tiny",
        "--duration",
        "0.5",
        "--baseline-duration",
        "0.3",
        "--sample-ms",
        "100",
        "--quiet",
        "--peer-dir",
        peer_dir.path().to_str().expect("utf-8 path"),
        "--report",
        report.to_str().expect("utf-8 path"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("TPC-B"), "{stdout}");
    let postgres_installed = std::path::Path::new("/usr/lib/postgresql").is_dir();
    let mut systems = vec!["steam", "watermark", "sqlite"];
    if postgres_installed {
        systems.push("postgres");
    }
    if cfg!(feature = "duckdb") {
        systems.push("duckdb");
    } else {
        // The demo names the feature that adds DuckDB, and how to enable it.
        assert!(
            stdout.contains("note: duckdb: left out") && stdout.contains("--features duckdb"),
            "{stdout}"
        );
    }
    for system in &systems {
        assert!(
            stdout.contains(&format!("{system}: with one snapshot held, its run ran")),
            "{system}: {stdout}"
        );
    }
    assert!(stdout.contains("What to conclude: "), "{stdout}");
    assert!(
        stdout.contains("Durability differs unless stated alike: Verso memory"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(report.join("index.html")).expect("index.html");
    assert!(html.contains("growth_bytes.svg") && html.contains("What happened"));
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("report.json")).expect("report.json"),
    )
    .expect("valid JSON");
    let runs = json["runs"].as_array().expect("runs");
    assert_eq!(
        runs.len(),
        2 * systems.len(),
        "a held run and its baseline each"
    );
    for pair in runs.chunks(2) {
        assert_eq!(pair[0]["configuration"]["hold_snapshot"], true);
        assert_eq!(pair[1]["configuration"]["hold_snapshot"], false);
        assert_eq!(
            pair[0]["configuration"]["label"],
            pair[1]["configuration"]["label"]
        );
        for run in pair {
            assert_eq!(run["configuration"]["oltp_workers"], 2);
            assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{run}");
            assert!(
                run["summary"]["last_growth_bytes"].as_u64() > Some(0),
                "{run}"
            );
        }
    }
    // Nothing of the peers is left behind.
    assert_eq!(
        std::fs::read_dir(peer_dir.path())
            .expect("peer dir")
            .count(),
        0
    );
}

/// Compared configurations run each in a child process by default, in this one with
/// `--in-process`; both give every configuration's run.
#[test]
fn compared_configurations_run_in_child_processes_unless_told_in_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    for in_process in [false, true] {
        let json = dir.path().join(format!("kv-{in_process}.json"));
        let mut args = vec![
            "kv",
            "--tiny",
            "--duration",
            "0.3",
            "--compare",
            "steam,watermark,hana",
            "--quiet",
            "--json",
            json.to_str().expect("utf-8 path"),
        ];
        if in_process {
            args.push("--in-process");
        }
        let output = verso(&args);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json");
        let runs = report["runs"].as_array().expect("runs");
        let collectors: Vec<&str> = runs
            .iter()
            .map(|run| {
                run["configuration"]["garbage_collector"]
                    .as_str()
                    .expect("name")
            })
            .collect();
        assert_eq!(
            collectors,
            ["steam", "watermark", "hana"],
            "in process: {in_process}"
        );
        assert!(runs
            .iter()
            .all(|run| run["totals"]["oltp_commits"].as_u64() > Some(0)));
    }
    // What a child is asked for must exist.
    let output = verso(&[
        "kv",
        "--tiny",
        "--quiet",
        "--config-index",
        "3",
        "--config-json",
        dir.path().join("x.json").to_str().expect("utf-8 path"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("configuration 3 does not exist"));
}

/// A configuration whose child process dies (here it aborts; in a long TPC-B run with a held
/// snapshot, watermark-only's child was killed by the out-of-memory killer) is reported as a
/// child that died, not as a failed consistency check (the message said so before), and
/// the configurations that finished before it are printed and written to the JSON.
#[test]
fn regression_a_dead_child_is_reported_as_such_and_earlier_configurations_are_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("kept.json");
    let output = Command::new(env!("CARGO_BIN_EXE_verso"))
        .args([
            "kv",
            "--tiny",
            "--duration",
            "0.2",
            "--compare",
            "steam,watermark",
            "--quiet",
            "--json",
            json.to_str().expect("utf-8 path"),
        ])
        .env(verso_lab::cli::KILL_CHILD_FOR_TESTS, "1")
        .output()
        .expect("the verso binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the child process running configuration 1 failed: killed by signal 6"),
        "{stderr}"
    );
    assert!(!stderr.contains("consistency"), "{stderr}");
    assert!(
        stdout.contains("The configurations that finished before the failure:")
            && stdout.contains("steam"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{report}");
    assert_eq!(runs[0]["configuration"]["garbage_collector"], "steam");
}

/// How a child's end is put in words: the out-of-memory killer's signal is named.
#[test]
fn a_child_killed_by_sigkill_is_said_to_be_probably_out_of_memory() {
    use std::os::unix::process::ExitStatusExt;
    let killed = verso_lab::workload::LabError::child_failed(
        "configuration 1",
        std::process::ExitStatus::from_raw(9),
        "",
    );
    let said = killed.to_string();
    assert!(
        said.contains("signal 9 (SIGKILL)") && said.contains("out-of-memory"),
        "{said}"
    );
    let exited = verso_lab::workload::LabError::child_failed(
        "point 2",
        std::process::ExitStatus::from_raw(1 << 8),
        "verso: consistency check failed: x\n",
    );
    assert_eq!(
        exited.to_string(),
        "the child process running point 2 failed: exit status 1; it said: verso: consistency \
         check failed: x"
    );
}

/// `--memory-limit`: a run whose resident memory passes the limit stops at the next sample,
/// keeps what it measured, and says why; the configurations after it still run.
#[test]
fn a_run_past_its_memory_limit_stops_early_and_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("out.json");
    let output = verso(&[
        "kv",
        "--tiny",
        "--compare",
        "steam,watermark",
        "--duration",
        "30",
        "--sample-ms",
        "100",
        "--memory-limit",
        "0.001",
        "--quiet",
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("passed --memory-limit"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert!(run["run_seconds"].as_f64() < Some(5.0), "{run}");
        assert!(
            run["stopped_early"]
                .as_str()
                .is_some_and(|why| why.contains("resident memory")),
            "{run}"
        );
        assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{run}");
    }
}

/// A compared configuration runs in a child process whose standard error is a pipe, where
/// its progress bars drew nothing: `verso demo`, `--compare` and `reproduce` sat silent for
/// minutes. Asked to, the child sends its bars up the pipe and the parent draws them; its
/// own output (an error) stays apart.
#[test]
fn regression_a_childs_progress_reaches_the_parent() {
    use verso_lab::progress::MARKER;
    use verso_lab::runner::run_child;
    let dir = tempfile::tempdir().expect("temp dir");
    let program = std::path::Path::new(env!("CARGO_BIN_EXE_verso"));
    let args: Vec<String> = [
        "kv",
        "--tiny",
        "--duration",
        "1.5",
        "--compare",
        "steam,watermark",
        "--config-index",
        "1",
    ]
    .map(str::to_owned)
    .into();
    for forward in [Some(100), None] {
        let bar = indicatif::ProgressBar::hidden();
        let (run, stderr) = run_child(
            program,
            &args,
            "--config-json",
            "configuration 1",
            forward,
            &bar,
        )
        .expect("the child runs");
        assert_eq!(run.configuration.label, "watermark");
        assert!(
            !stderr.text.contains(MARKER.trim_end()),
            "progress kept as the child's output: {:?}",
            stderr.text
        );
        if forward.is_none() {
            // Not asked (the parent is not on a terminal): the child sends nothing.
            assert_eq!(stderr.progress_lines, 0, "{stderr:?}");
            continue;
        }
        let first = stderr.first_progress.clone().unwrap_or_default();
        let last = stderr.last_progress.clone().unwrap_or_default();
        assert!(first.contains("watermark load"), "{stderr:?}");
        assert!(
            last.contains("watermark run") && last.contains("commits/s"),
            "{stderr:?}"
        );
        assert!(
            first.chars().count() <= 100 && last.chars().count() <= 100,
            "drawn at the parent's width: {stderr:?}"
        );
    }
    drop(dir);
}

/// End to end, on a terminal (a pseudo-terminal from util-linux's `script`): the bars of
/// `--compare`'s children show; with standard error not a terminal, nothing of them does.
#[test]
fn regression_compare_shows_its_childrens_progress_on_a_terminal_only() {
    let command = format!(
        "{} kv --tiny --duration 1.5 --compare steam,watermark",
        env!("CARGO_BIN_EXE_verso")
    );
    let on_terminal = Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux's `script` runs (package bsdutils)");
    assert!(on_terminal.status.success(), "{on_terminal:?}");
    let shown = String::from_utf8_lossy(&on_terminal.stdout);
    for bar in ["steam run", "watermark run"] {
        assert!(
            shown.contains(bar),
            "no {bar:?} bar on the terminal:\n{shown}"
        );
    }
    let piped = verso(&[
        "kv",
        "--tiny",
        "--duration",
        "1.5",
        "--compare",
        "steam,watermark",
    ]);
    assert!(piped.status.success(), "{piped:?}");
    let both = format!(
        "{}{}",
        String::from_utf8_lossy(&piped.stdout),
        String::from_utf8_lossy(&piped.stderr)
    );
    assert!(
        !both.contains(" run [") && !both.contains("verso-progress"),
        "bars in output that is not a terminal:\n{both}"
    );
}

/// `--compare` compares any one axis, not only collectors: every axis runs, each
/// configuration labelled by its value and built as that value says.
#[test]
fn compare_compares_any_axis() {
    for (args, labels, design_has) in [
        (
            vec!["kv", "--compare", "storage=delta,append-n2o,time-travel"],
            vec!["delta", "append-n2o", "time-travel"],
            vec!["delta/", "append-n2o/", "time-travel/"],
        ),
        (
            vec!["kv", "--compare", "protocol=si,mvocc,mv2pl"],
            vec!["si", "mvocc", "mv2pl"],
            vec!["/si-", "/mvocc", "/mv2pl"],
        ),
        (
            vec![
                "ycsb",
                "--storage",
                "append-o2n",
                "--secondary-indexes",
                "1",
                "--compare",
                "index-pointers=logical,physical",
            ],
            vec!["logical", "physical"],
            vec!["append-o2n/", "physical"],
        ),
        (
            vec![
                "ycsb",
                "--field-bytes",
                "80",
                "--compare",
                "non-inline=packed,shared",
            ],
            vec!["packed", "shared"],
            vec!["delta/", "shared"],
        ),
        (
            vec![
                "tpcb",
                "--gc",
                "watermark",
                "--compare",
                "system=verso,sqlite",
            ],
            vec!["watermark", "sqlite"],
            vec!["delta/watermark/", ""],
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--tiny", "--duration", "0.3", "--in-process", "--quiet"]);
        let parsed = run_to_json(&args.join(" "), &all);
        let runs = parsed["runs"].as_array().expect("runs");
        let got: Vec<&str> = runs
            .iter()
            .map(|run| run["configuration"]["label"].as_str().expect("label"))
            .collect();
        assert_eq!(got, labels, "{args:?}");
        for (run, has) in runs.iter().zip(&design_has) {
            let design = run["configuration"]["design"].as_str().expect("design");
            assert!(design.contains(has), "{args:?}: {design} lacks {has}");
            assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{run}");
        }
    }
}

/// `--compare design=...` sets the collector, the disk storage and in memory or on disk at
/// once: `--gc` and `--disk-storage` beside it are refused, as are a disk design without
/// `--disk`, an unknown design (the message lists the designs) and `--purge-delay` where
/// no design purges; all before anything is created.
#[test]
fn compare_design_refuses_what_it_sets_and_needs_disk() {
    let dir = tempfile::tempdir().expect("temp dir");
    let disk = dir.path().join("db");
    let disk = disk.to_str().expect("utf-8 path");
    let designs = "design=memory,disk-undo-eager";
    let cases: &[(&[&str], &str)] = &[
        (
            &["--disk", disk, "--gc", "vac", "--compare", designs],
            "--compare design=... and --gc: the compared axis takes its values from --compare \
             only (each design sets the collector, the disk engine's version organization, \
             and whether it runs in memory or on disk)",
        ),
        (
            &[
                "--disk",
                disk,
                "--disk-storage",
                "undo",
                "--compare",
                designs,
            ],
            "--compare design=... and --disk-storage: the compared axis takes its values",
        ),
        (
            &["--compare", designs],
            "disk-undo-eager runs on the disk engine; give --disk DIR",
        ),
        (
            &["--path", disk, "--compare", "design=disk-heap,disk-undo"],
            "disk-heap runs on the disk engine; give --disk DIR instead of --path",
        ),
        (
            &["--disk", disk, "--compare", "design=memory,innodb"],
            "unknown design \"innodb\" (memory, disk-heap, disk-heap-eager, disk-undo, \
             disk-undo-eager)",
        ),
        (
            &["--disk", disk, "--compare", "design=disk-heap,disk-heap"],
            "names disk-heap twice",
        ),
        (
            &[
                "--disk",
                disk,
                "--purge-delay",
                "1",
                "--compare",
                "design=memory,disk-heap-eager",
            ],
            "--purge-delay 1: it delays InnoDB's purge",
        ),
        (
            &[
                "--disk",
                disk,
                "--purge-delay",
                "1",
                "--disk-storage",
                "heap",
            ],
            "--purge-delay 1: it delays InnoDB's purge",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["tpcb", "--tiny", "--quiet"];
        all.extend_from_slice(args);
        let output = verso(&all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(
            stderr.contains(message),
            "{args:?}: expected {message:?} in:\n{stderr}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("temp dir").count(),
        0,
        "a refused invocation created nothing"
    );
}

/// `--compare design=...` runs the in-memory engine and the four disk designs in one
/// invocation, each held run beside its own unheld baseline: every run is labelled by its
/// design; `memory` ran in memory (no directory, no page series) and each disk design on
/// the disk engine with its storage and collector (its directory, its heap or undo bytes).
#[test]
fn compare_design_runs_memory_and_each_disk_design_in_one_invocation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let disk = dir.path().join("db");
    let designs = [
        "memory",
        "disk-heap",
        "disk-heap-eager",
        "disk-undo",
        "disk-undo-eager",
    ];
    let compare = format!("design={}", designs.join(","));
    let parsed = run_to_json(
        "five designs",
        &[
            "tpcb",
            "--tiny",
            "--workers",
            "2",
            "--duration",
            "0.4",
            "--sample-ms",
            "100",
            "--hold-snapshot",
            "--baseline",
            "--disk",
            disk.to_str().expect("utf-8 path"),
            "--buffer-pool-mib",
            "1",
            "--compare",
            &compare,
            "--quiet",
        ],
    );
    let runs = parsed["runs"].as_array().expect("runs");
    let got: Vec<(&str, bool)> = runs
        .iter()
        .map(|run| {
            let configuration = &run["configuration"];
            (
                configuration["label"].as_str().expect("label"),
                configuration["hold_snapshot"].as_bool().expect("held"),
            )
        })
        .collect();
    let expected: Vec<(&str, bool)> = designs
        .iter()
        .flat_map(|design| [(*design, true), (*design, false)])
        .collect();
    assert_eq!(got, expected, "each design held, then its baseline");
    for run in runs {
        let configuration = &run["configuration"];
        let label = configuration["label"].as_str().expect("label");
        let design = configuration["design"].as_str().expect("design");
        let gc = configuration["garbage_collector"].as_str().expect("gc");
        let last = run["samples"]
            .as_array()
            .and_then(|samples| samples.last())
            .expect("samples");
        let bytes = |key: &str| last[key].as_u64().expect(key);
        assert!(run["totals"]["oltp_commits"].as_u64() > Some(0), "{label}");
        match label {
            "memory" => {
                assert!(!design.starts_with("disk-"), "{label}: {design}");
                assert_eq!(gc, "steam", "{label}");
                assert_eq!(
                    (bytes("heap_bytes"), bytes("undo_bytes")),
                    (0, 0),
                    "{label}"
                );
                let durability = configuration["durability"].as_str().expect("durability");
                assert!(!durability.contains("disk engine"), "{label}: {durability}");
            }
            _ => {
                let storage = if label.starts_with("disk-undo") {
                    "undo"
                } else {
                    "heap"
                };
                assert!(
                    design.starts_with(&format!("disk-{storage}/")),
                    "{label}: {design}"
                );
                let eager = label.ends_with("-eager");
                assert_eq!(gc, if eager { "steam" } else { "vac" }, "{label}");
                assert!(bytes("heap_bytes") > 0, "{label}: {last}");
                if storage == "undo" {
                    assert!(bytes("undo_bytes") > 0, "{label}: {last}");
                } else {
                    assert_eq!(bytes("undo_bytes"), 0, "{label}: {last}");
                }
            }
        }
    }
    // The disk designs' databases, numbered in plan order; none for `memory`.
    let mut directories: Vec<String> = std::fs::read_dir(&disk)
        .expect("the disk designs' directory")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .collect();
    directories.sort();
    assert_eq!(
        directories,
        [
            "03-disk-heap-held",
            "04-disk-heap",
            "05-disk-heap-eager-held",
            "06-disk-heap-eager",
            "07-disk-undo-held",
            "08-disk-undo",
            "09-disk-undo-eager-held",
            "10-disk-undo-eager",
        ]
    );
    // The held runs compared with one another, each judged against its own baseline.
    let comparison = parsed["comparison"].as_str().expect("comparison line");
    for design in &designs[1..] {
        assert!(
            comparison.contains(&format!("the OLTP throughput of {design},")),
            "{comparison}"
        );
    }
    assert!(comparison.starts_with("memory: "), "{comparison}");
    let conclusions: Vec<&str> = parsed["conclusions"]
        .as_array()
        .expect("conclusions")
        .iter()
        .map(|line| line.as_str().expect("line"))
        .collect();
    for design in designs {
        assert!(
            conclusions.iter().any(|line| line
                .starts_with(&format!("{design}: with one snapshot held"))
                && line.contains("of its run without the snapshot")),
            "{design}: {conclusions:#?}"
        );
    }
}

/// `kv --help` and `tpcb --help` listed `--olap-workers`, which both refuse (they have no
/// queries), and `kv` and `scans` listed `--peer` (no SQL form): a subcommand's help lists
/// only what it takes.
#[test]
fn regression_help_lists_only_the_options_a_subcommand_takes() {
    let takes = |subcommand: &str, option: &str| {
        let help = verso(&[subcommand, "--help"]);
        assert!(help.status.success(), "{help:?}");
        let text = String::from_utf8_lossy(&help.stdout).into_owned();
        assert!(text.contains("--workers"), "{subcommand}: {text}");
        text.contains(&format!("{option} "))
    };
    for (subcommand, olap, peers) in [
        ("ycsb", true, true),
        ("tpcc", true, true),
        ("ch", true, true),
        ("scans", true, false),
        ("sysbench", true, false),
        ("kv", false, false),
        ("tpcb", false, true),
    ] {
        assert_eq!(takes(subcommand, "--olap-workers"), olap, "{subcommand}");
        for option in ["--peer", "--postgres-url", "--peer-dir"] {
            assert_eq!(takes(subcommand, option), peers, "{subcommand} {option}");
        }
    }
}
