//! Paced TPC-C (`verso tpcc --terminals-per-warehouse N --pacing SCALE`, DBT2's model):
//! the keying and think times, a paced run's counts against its commits, the response
//! time's queueing, the disk engine and the peers, and the options it refuses.

use std::process::Command;
use std::time::Duration;

use verso::Options;
use verso_lab::metrics::RunResult;
use verso_lab::peers::{PeerKind, PeerSpec};
use verso_lab::rng::SplitMix64;
use verso_lab::runner::{run_configuration, RunConfig, StopAfter};
use verso_lab::workloads::tpcc::paced::{
    backoff, PacedOptions, PacedTpcc, FIRST_BACKOFF, MAX_BACKOFF,
};
use verso_lab::workloads::tpcc::pacing::{
    Pacing, KEYING_SECONDS, MEAN_THINK_SECONDS, MIX_SHARES, THINK_TRUNCATION,
};
use verso_lab::workloads::tpcc::TpccConfig;

const NEW_ORDER: usize = 0;

fn verso(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .output()
        .expect("the verso binary runs")
}

#[test]
fn keying_times_are_tpccs_minimums_divided_by_the_pacing() {
    let spec = Pacing::new(1.0).expect("pacing 1");
    assert_eq!(spec.keying_time(NEW_ORDER), Duration::from_secs(18));
    let expected = [18.0, 3.0, 2.0, 2.0, 2.0];
    assert_eq!(KEYING_SECONDS, expected);
    let fast = Pacing::new(100.0).expect("pacing 100");
    for (kind, seconds) in expected.into_iter().enumerate() {
        let keyed = fast.keying_time(kind).as_secs_f64();
        assert!(
            (keyed - seconds / 100.0).abs() < 1e-8,
            "kind {kind}: {keyed} s"
        );
    }
}

#[test]
fn think_times_are_exponential_with_tpccs_means_and_cut_at_ten_times_the_mean() {
    assert_eq!(MEAN_THINK_SECONDS, [12.0, 12.0, 10.0, 5.0, 5.0]);
    let pacing = Pacing::new(1.0).expect("pacing 1");
    let mut rng = SplitMix64::new(0xBEEF);
    const DRAWS: usize = 200_000;
    for (kind, mean) in MEAN_THINK_SECONDS.into_iter().enumerate() {
        let mut draws: Vec<f64> = (0..DRAWS)
            .map(|_| pacing.think_time(kind, &mut rng).as_secs_f64())
            .collect();
        let drawn_mean = draws.iter().sum::<f64>() / DRAWS as f64;
        // The truncated distribution's mean is mean x (1 - e^-10): within 1% of it.
        let truncated_mean = pacing.mean_think_time(kind).as_secs_f64();
        assert!((truncated_mean / mean - 1.0).abs() < 1e-4);
        assert!(
            (drawn_mean / truncated_mean - 1.0).abs() < 0.01,
            "kind {kind}: mean {drawn_mean} s, expected {truncated_mean} s"
        );
        // The shape: an exponential's median is its mean x ln 2 (a uniform or constant
        // think time with the right mean would fail here).
        draws.sort_by(f64::total_cmp);
        let median = draws[DRAWS / 2];
        assert!(
            (median / (mean * std::f64::consts::LN_2) - 1.0).abs() < 0.02,
            "kind {kind}: median {median} s"
        );
        let longest = draws[DRAWS - 1];
        assert!(
            longest <= THINK_TRUNCATION * mean + 1e-9,
            "kind {kind}: {longest} s"
        );
        // The cut itself: the far tail maps to exactly ten times the mean, not beyond.
        let cut = pacing.think_time_for(kind, 1.0 - 1e-15).as_secs_f64();
        assert!(
            (cut - THINK_TRUNCATION * mean).abs() < 1e-9,
            "kind {kind}: {cut} s"
        );
        assert_eq!(pacing.think_time_for(kind, 0.0), Duration::ZERO);
    }
}

#[test]
fn the_pacing_divides_think_times_and_fixes_the_offered_load() {
    let (slow, fast) = (
        Pacing::new(1.0).expect("1"),
        Pacing::new(250.0).expect("250"),
    );
    for kind in 0..5 {
        for uniform in [0.1, 0.5, 0.9, 0.999] {
            let ratio = slow.think_time_for(kind, uniform).as_secs_f64()
                / fast.think_time_for(kind, uniform).as_secs_f64();
            // Durations hold whole nanoseconds: equal to a part in a million.
            assert!(
                (ratio / 250.0 - 1.0).abs() < 1e-6,
                "kind {kind}: ratio {ratio}"
            );
        }
    }
    assert_eq!(MIX_SHARES.iter().sum::<f64>(), 1.0);
    // At TPC-C's own pace, ten terminals offer its well-known ceiling of 12.86 tpmC.
    let new_orders = slow.offered_per_minute(10) * MIX_SHARES[NEW_ORDER];
    assert!((new_orders - 12.86).abs() < 0.02, "{new_orders} tpmC");
    let ratio = fast.offered_per_minute(20) / slow.offered_per_minute(20);
    assert!((ratio / 250.0 - 1.0).abs() < 1e-6, "{ratio}");
}

/// A review found conflicts retried at once, about ten aborts per conflict: the retry
/// mostly met the same running writer again. The back-off is random below a ceiling that
/// doubles with each conflict in a row, from the first back-off up to the last.
#[test]
fn a_conflicts_back_off_is_random_below_a_doubling_ceiling() {
    assert_eq!(backoff(0, 0.0), Duration::ZERO);
    let top = 1.0 - f64::EPSILON;
    assert!(backoff(0, top) <= FIRST_BACKOFF && backoff(0, top) > FIRST_BACKOFF / 2);
    for conflicts in 0..4 {
        let ceiling = FIRST_BACKOFF * (1 << conflicts);
        let half = backoff(conflicts, 0.5);
        assert!(
            half.abs_diff(ceiling / 2) < Duration::from_nanos(2),
            "{conflicts}: {half:?} against a ceiling of {ceiling:?}"
        );
    }
    for conflicts in [6, 20, 1_000, u32::MAX] {
        assert!(backoff(conflicts, top) <= MAX_BACKOFF);
        assert!(
            backoff(conflicts, top) > MAX_BACKOFF * 99 / 100,
            "{conflicts}"
        );
    }
    let mut rng = SplitMix64::new(7);
    let draws: Vec<Duration> = (0..1000).map(|_| backoff(3, rng.next_f64())).collect();
    let mean = draws.iter().sum::<Duration>() / 1000;
    let ceiling = FIRST_BACKOFF * 8;
    assert!(
        mean > ceiling * 45 / 100 && mean < ceiling * 55 / 100,
        "uniform below the ceiling: mean {mean:?} of {ceiling:?}"
    );
}

#[test]
fn bad_pacings_and_terminal_counts_are_refused() {
    // 1e-19 once panicked: TPC-C's times multiplied by 10^19 overflow a duration.
    for pacing in [0.0, -2.0, f64::NAN, f64::INFINITY, 1e-19, 0.0009] {
        let error = Pacing::new(pacing).expect_err("refused").to_string();
        assert!(error.contains("at least 0.001"), "{pacing}: {error}");
    }
    assert!(Pacing::new(0.001).is_ok());
    let options = |terminals_per_warehouse, pacing| PacedOptions {
        terminals_per_warehouse,
        pacing,
    };
    let error = PacedTpcc::new(TpccConfig::tiny(), options(0, 10.0)).expect_err("refused");
    assert!(
        error.to_string().contains("at least one terminal"),
        "{error}"
    );
    let error = PacedTpcc::new(TpccConfig::tiny(), options(5, -1.0)).expect_err("refused");
    assert!(error.to_string().contains("--pacing"), "{error}");
    let error = PacedTpcc::new(TpccConfig::tiny(), options(u32::MAX, 10.0)).expect_err("refused");
    assert!(error.to_string().contains("more than"), "{error}");
}

/// A paced run on the tiny database (2 warehouses) with `terminals_per_warehouse`,
/// `pacing` and `workers` connections for `seconds`.
fn paced_run(
    options: Options,
    terminals_per_warehouse: u32,
    pacing: f64,
    workers: usize,
    seconds: f64,
) -> RunResult {
    let workload = PacedTpcc::new(
        TpccConfig::tiny(),
        PacedOptions {
            terminals_per_warehouse,
            pacing,
        },
    )
    .expect("workload");
    let config = RunConfig {
        oltp_workers: workers,
        stop: StopAfter::Duration(Duration::from_secs_f64(seconds)),
        sample_interval: Duration::from_millis(100),
        ..RunConfig::with_options("paced", options)
    };
    // `run_configuration` checks TPC-C's twelve consistency conditions after the load and
    // after the run, and fails if one does not hold.
    run_configuration(&workload, &config).expect("a consistent paced run")
}

/// The paced counts agree with what the runner counted.
fn check_counts_against_commits(run: &RunResult) {
    let paced = run.paced.as_ref().expect("a paced result");
    let totals = &run.totals;
    let committed = |kind: &str| totals.oltp_commits_by_kind[kind];
    // Completed: every commit, and every New-Order rolled back on its unused item.
    assert_eq!(
        paced.completed,
        totals.oltp_commits + totals.aborts_by_reason["by_workload"],
        "{paced:?}"
    );
    let minutes = run.run_seconds / 60.0;
    assert!((paced.notpm - committed("NewOrder") as f64 / minutes).abs() < 1e-6 * paced.notpm);
    assert!(
        (paced.completed_per_minute - paced.completed as f64 / minutes).abs()
            < 1e-6 * paced.completed_per_minute
    );
    assert_eq!(paced.order_status_committed, committed("OrderStatus"));
    assert!(paced.order_status_committed > 0, "{paced:?}");
    // Submitted: completed, still queued, or on a connection at the end.
    assert!(paced.submitted >= paced.completed + paced.waiting_at_end);
    let in_service = paced.submitted - paced.completed - paced.waiting_at_end;
    assert!(
        in_service <= run.configuration.oltp_workers as u64,
        "{paced:?}"
    );
    // Every committed transaction has a response time, by its type.
    for (kind, &count) in &totals.oltp_commits_by_kind {
        let latency = &run.latency[kind];
        assert_eq!(latency.count, count, "{kind}");
        if count > 0 {
            assert!(
                latency.p50 <= latency.p90 && latency.p90 <= latency.p99,
                "{kind}"
            );
        }
    }
}

#[test]
fn a_paced_run_completes_what_its_terminals_offer_and_counts_it_consistently() {
    // 2 warehouses x 10 terminals at pacing 200: about 190 transactions a second, far
    // below what even a debug build serves, so what completes is what was offered.
    let run = paced_run(Options::default(), 10, 200.0, 2, 2.0);
    check_counts_against_commits(&run);
    let paced = run.paced.as_ref().expect("paced");
    assert_eq!((paced.terminals, paced.terminals_per_warehouse), (20, 10));
    assert_eq!(paced.pacing, 200.0);
    let share = paced.completed_per_minute / paced.offered_per_minute;
    assert!(
        (0.75..1.25).contains(&share),
        "completed {:.0}/min of {:.0} offered",
        paced.completed_per_minute,
        paced.offered_per_minute
    );
    // Under the knee nothing queues for long: responses are far below a cycle (10 ms).
    assert!(run.latency["NewOrder"].p50 < 10_000.0, "{:?}", run.latency);
}

#[test]
fn a_paced_run_works_on_the_disk_engine() {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = Options::default().disk(dir.path().join("db"));
    let run = paced_run(options, 5, 400.0, 2, 1.5);
    check_counts_against_commits(&run);
    assert!(run.totals.oltp_commits > 0);
}

#[test]
fn response_time_includes_the_wait_for_a_free_connection() {
    // 100 terminals at a pace no engine keeps up with, over one connection: nearly every
    // terminal has a transaction queued, so each waits for about all the others.
    let run = paced_run(Options::default(), 50, 1e6, 1, 1.5);
    check_counts_against_commits(&run);
    let paced = run.paced.as_ref().expect("paced");
    // One connection served `completed` transactions in the run: the mean service time
    // is at most run_seconds / completed.
    let service_us = run.run_seconds * 1e6 / paced.completed as f64;
    let response_us = run.latency["NewOrder"].mean;
    assert!(
        response_us > 10.0 * service_us,
        "New-Order response {response_us:.0} us vs at most {service_us:.0} us of service"
    );
    assert!(paced.waiting_at_end > 10, "{paced:?}");
    assert!(paced.completed_per_minute < 0.5 * paced.offered_per_minute);
}

/// Runs `verso` with `args` and `--json FILE` and returns the JSON, failing with its
/// output if it did not succeed.
fn run_to_json(args: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("out.json");
    let mut args = args.to_vec();
    args.extend(["--json", json.to_str().expect("utf-8 path")]);
    let output = verso(&args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid");
    (stdout, value)
}

#[test]
fn the_command_line_reports_notpm_and_response_times_in_text_json_and_the_report() {
    let report = tempfile::tempdir().expect("temp dir");
    let report_dir = report.path().join("report");
    let (stdout, json) = run_to_json(&[
        "tpcc",
        "--report",
        report_dir.to_str().expect("utf-8 path"),
        "--tiny",
        "--terminals-per-warehouse",
        "5",
        "--pacing",
        "300",
        "--workers",
        "2",
        "--duration",
        "1",
        "--sample-ms",
        "100",
        "--quiet",
    ]);
    for shown in [
        "NOTPM",
        "offered tx/min",
        "New-Order",
        "Order-Status",
        "10 terminals",
    ] {
        assert!(stdout.contains(shown), "{shown}: {stdout}");
    }
    let run = &json["runs"][0];
    let paced = &run["paced"];
    assert_eq!(paced["terminals"], 10);
    assert_eq!(paced["pacing"], 300.0);
    assert!(paced["notpm"].as_f64().expect("notpm") > 0.0, "{paced}");
    assert!(run["latency"]["NewOrder"]["p90"].as_f64().expect("p90") > 0.0);
    let html = std::fs::read_to_string(report_dir.join("index.html")).expect("the report");
    for shown in ["Paced TPC-C", "NOTPM", "response ms mean/p50/p90/p99"] {
        assert!(html.contains(shown), "{shown} not in the report");
    }
    // A closed-loop run has none.
    let (_, closed) = run_to_json(&["tpcc", "--tiny", "--duration", "0.3", "--quiet"]);
    assert!(closed["runs"][0]["paced"].is_null());
}

#[test]
fn options_a_paced_run_cannot_take_are_refused_with_a_reason() {
    let paced = ["tpcc", "--tiny", "--duration", "0.2", "--quiet"];
    for (extra, says) in [
        (
            vec!["--terminals-per-warehouse", "0"],
            "at least one terminal",
        ),
        (
            vec!["--terminals-per-warehouse", "4", "--pacing", "0"],
            "at least 0.001",
        ),
        (
            vec!["--terminals-per-warehouse", "4", "--pacing", "-5"],
            "at least 0.001",
        ),
        (
            vec!["--terminals-per-warehouse", "4", "--target-rate", "100"],
            "--target-rate",
        ),
        (
            vec!["--terminals-per-warehouse", "4", "--clients", "8"],
            "--clients",
        ),
        (
            vec!["--terminals-per-warehouse", "4", "--workers", "0"],
            "--workers 0",
        ),
        (vec!["--pacing", "10"], "--terminals-per-warehouse"),
    ] {
        let mut args = paced.to_vec();
        args.extend(&extra);
        let output = verso(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{extra:?} ran");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    }
}

/// The peers serve the same terminals over their connections (PostgreSQL when its
/// programs are installed, as `.ci/run` installs them; SQLite always).
#[test]
fn a_paced_run_on_each_peer_counts_consistently() {
    for kind in [PeerKind::Sqlite, PeerKind::Postgres] {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            use std::os::unix::fs::PermissionsExt;
            // A private PostgreSQL server's user must reach it when the tests run as root.
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        let workload = PacedTpcc::new(
            TpccConfig::tiny(),
            PacedOptions {
                terminals_per_warehouse: 5,
                pacing: 200.0,
            },
        )
        .expect("workload");
        let spec = PeerSpec {
            dir: dir.path().to_path_buf(),
            ..PeerSpec::new(kind)
        };
        let config = RunConfig {
            oltp_workers: 2,
            stop: StopAfter::Duration(Duration::from_secs(1)),
            sample_interval: Duration::from_millis(100),
            ..RunConfig::for_peer(spec)
        };
        let run = run_configuration(&workload, &config).expect("a consistent paced peer run");
        check_counts_against_commits(&run);
    }
}

/// Clause 2.8.1.1: a terminal's Stock-Level district is constant (a review found paced
/// terminals drawing it per transaction); the closed loop's workers still draw it.
#[test]
fn a_paced_terminal_keeps_its_stock_level_district() {
    use verso_lab::workloads::tpcc::terminal::Terminal;
    let config = TpccConfig::standard(2);
    let mut fixed = Terminal::new(&config, 1, 2, 11).unwrap();
    fixed.fix_stock_level_district(7);
    let mut drawn = Terminal::new(&config, 1, 2, 11).unwrap();
    let mut drawn_districts = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let (w_id, d_id, threshold) = fixed.stock_level();
        assert_eq!((w_id, d_id), (2, 7));
        assert!((10..=20).contains(&threshold));
        drawn_districts.insert(drawn.stock_level().1);
    }
    assert!(drawn_districts.len() > 5, "{drawn_districts:?}");
}

/// The offered load is computed from `MIX_SHARES`; the terminals draw their types with
/// `Terminal::next_kind`. The two must agree (a review found nothing comparing them).
#[test]
fn the_mix_the_terminals_draw_is_the_mix_the_offered_load_assumes() {
    use verso_lab::workloads::tpcc::terminal::Terminal;
    let mut terminal = Terminal::new(&TpccConfig::standard(1), 0, 1, 5).unwrap();
    let draws = 200_000;
    let mut counts = [0u64; 5];
    for _ in 0..draws {
        counts[terminal.next_kind()] += 1;
    }
    for (kind, &count) in counts.iter().enumerate() {
        let share = count as f64 / draws as f64;
        assert!(
            (share - MIX_SHARES[kind]).abs() < 0.005,
            "type {kind}: drawn {share}, assumed {}",
            MIX_SHARES[kind]
        );
    }
}
