//! The runner and its outputs: the time series and its keys (each documented in
//! `docs/lab.md`), JSON round trips, report files, the held snapshot, and failures that
//! must stop a run.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use verso::{Database, GarbageCollector, Isolation};
use verso_lab::format::compact;
use verso_lab::metrics::{LabReport, RunResult, FORMAT_VERSION};
use verso_lab::plot::{metrics_for, METRICS};
use verso_lab::report::{comparison_line, read_json, summary_table, write_json, write_report};
use verso_lab::runner::{run_configuration, RunConfig, StopAfter};
use verso_lab::workload::{LabError, LoadProgress, OlapWorker, OltpWorker, TxnOutcome, Workload};
use verso_lab::workloads::kv_updates::{KvConfig, KvWorkload};
use verso_lab::workloads::scan_updates::{ScansConfig, ScansWorkload};

const SAMPLE: Duration = Duration::from_millis(100);

fn timed(gc: GarbageCollector, millis: u64) -> RunConfig {
    RunConfig {
        stop: StopAfter::Duration(Duration::from_millis(millis)),
        sample_interval: SAMPLE,
        ..RunConfig::new(gc.name(), gc)
    }
}

fn kv() -> KvWorkload {
    KvWorkload::new(KvConfig::tiny()).expect("config")
}

fn run(workload: &dyn Workload, config: &RunConfig) -> RunResult {
    run_configuration(workload, config).unwrap_or_else(|e| panic!("{}: {e}", config.label))
}

fn report_of(workload: &dyn Workload, runs: Vec<RunResult>) -> LabReport {
    LabReport {
        format_version: FORMAT_VERSION,
        workload: workload.name().to_owned(),
        description: workload.describe(),
        started_unix_seconds: 1,
        command_line: vec!["verso".into(), "test".into()],
        comparison: comparison_line(&runs),
        conclusions: Vec::new(),
        runs,
    }
}

/// Every object key in a JSON value, except the keys of the maps keyed by the workload's
/// own names (transaction kinds, queries, abort reasons).
fn keys(value: &serde_json::Value, out: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                out.insert(key.clone());
                let named_map = key.ends_with("_by_kind")
                    || key.ends_with("_by_name")
                    || key.ends_with("_by_reason")
                    || key.ends_with("_by_kind_per_second")
                    || key.ends_with("_by_reason_per_second");
                if key == "latency" {
                    // Keyed by transaction type; each type's summary has documented keys.
                    if let serde_json::Value::Object(by_kind) = inner {
                        by_kind.values().for_each(|summary| keys(summary, out));
                    }
                } else if !named_map {
                    keys(inner, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| keys(item, out)),
        _ => {}
    }
}

#[test]
fn a_run_yields_a_time_series_with_every_documented_key() {
    let workload = kv();
    let result = run(&workload, &timed(GarbageCollector::Steam, 600));
    let samples = &result.samples;
    // A loaded machine may oversleep the sampler (it then catches up with short samples) or
    // starve the one worker for a whole interval: the counts below allow for both, while
    // the invariants hold for every sample in which anything was written.
    assert!(
        samples.len() >= 2,
        "{} samples in 0.6 s at 0.1 s",
        samples.len()
    );
    for pair in samples.windows(2) {
        assert!(pair[0].t_seconds < pair[1].t_seconds, "time goes forward");
    }
    let covered: f64 = samples.iter().map(|s| s.interval_seconds).sum();
    let last = samples.last().expect("samples").t_seconds;
    assert!(
        (covered - last).abs() < 1e-6 && last >= 0.6,
        "the samples cover the run: {covered} s of intervals, last at {last} s"
    );
    let full_with_writes: Vec<_> = samples
        .iter()
        .filter(|s| s.is_full(0.1) && s.versions_created_per_second > 0.0)
        .collect();
    assert!(!full_with_writes.is_empty(), "{samples:?}");
    for sample in &full_with_writes {
        assert!(sample.oltp_commits_per_second > 0.0, "{sample:?}");
        assert!(
            sample.gc_chain_max >= 1,
            "Steam prunes on every write: {sample:?}"
        );
        assert!(
            sample.write_chain_max >= 1 && sample.write_chain_mean >= 1.0,
            "every write leaves at least its own version: {sample:?}"
        );
    }
    // The rates add up to the totals.
    let commits: f64 = samples
        .iter()
        .map(|s| s.oltp_commits_per_second * s.interval_seconds)
        .sum();
    assert!(
        (commits - result.totals.oltp_commits as f64).abs() < 1.0,
        "{commits} vs {}",
        result.totals.oltp_commits
    );
    assert!(result.summary.oltp_commits_per_second > 0.0);

    let sample = serde_json::to_value(&samples[0]).expect("to JSON");
    let mut sample_keys = BTreeSet::new();
    keys(&sample, &mut sample_keys);
    for key in [
        "t_seconds",
        "interval_seconds",
        "oltp_commits_per_second",
        "oltp_commits_by_kind_per_second",
        "oltp_aborts_per_second",
        "aborts_by_reason_per_second",
        "olap_queries_per_second",
        "olap_scanned_tuples_per_second",
        "live_versions",
        "live_version_bytes",
        "rss_bytes",
        "read_chain_mean",
        "read_chain_max",
        "write_chain_mean",
        "write_chain_max",
        "gc_chain_mean",
        "gc_chain_max",
        "gc_ms_per_second",
    ] {
        assert!(sample_keys.contains(key), "sample lacks {key}");
    }
    assert_eq!(
        sample["aborts_by_reason_per_second"]
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec![
            "busy".to_owned(),
            "by_workload".to_owned(),
            "deadlock".to_owned(),
            "lock_conflict".to_owned(),
            "serialization".to_owned(),
            "write_conflict".to_owned()
        ])
    );

    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/lab.md"))
        .expect("docs/lab.md");
    let report = serde_json::to_value(report_of(&workload, vec![result])).expect("to JSON");
    let mut all_keys = BTreeSet::new();
    keys(&report, &mut all_keys);
    for key in all_keys {
        assert!(
            docs.contains(&format!("| `{key}` |")),
            "JSON key {key} is not documented in docs/lab.md"
        );
    }
}

#[test]
fn json_round_trips() {
    let workload = kv();
    let result = run(&workload, &timed(GarbageCollector::WatermarkOnly, 300));
    let report = report_of(&workload, vec![result]);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("run.json");
    write_json(&path, &report).expect("write");
    let back = read_json(&path).expect("read");
    assert_eq!(back, report);
    assert!(!back.runs[0].samples.is_empty());
}

#[test]
fn report_writes_html_and_a_png_and_svg_per_metric() {
    let workload = ScansWorkload::new(ScansConfig::tiny()).expect("config");
    let runs: Vec<RunResult> = GarbageCollector::STEAM_PAPER
        .into_iter()
        .map(|gc| {
            run(
                &workload,
                &RunConfig {
                    olap_workers: 1,
                    ..timed(gc, 300)
                },
            )
        })
        .collect();
    let report = report_of(&workload, runs);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("nested").join("report");
    write_report(&out, &report).expect("report");
    let html = std::fs::read_to_string(out.join("index.html")).expect("index.html");
    for metric in [
        "oltp_commits_per_second",
        "olap_queries_per_second",
        "live_versions",
        "gc_chain_max",
        "write_chain_max",
        "rss_bytes",
    ] {
        assert!(
            html.contains(&format!("<img src=\"{metric}.svg\"")),
            "{metric}"
        );
        let png = std::fs::read(out.join(format!("{metric}.png"))).expect("png");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{metric}.png is a PNG");
        let svg = std::fs::read_to_string(out.join(format!("{metric}.svg"))).expect("svg");
        assert!(svg.contains("<svg") && svg.contains("steam") && svg.contains("watermark"));
    }
    assert!(html.contains("<td>steam</td>") && html.contains("<td>watermark</td>"));
    let comparison = report.comparison.as_deref().expect("two runs compare");
    assert!(html.contains(&verso_lab::report::escape(comparison)));
    assert_eq!(read_json(&out.join("report.json")).expect("json"), report);

    // Without OLAP workers there are no OLAP figures.
    let without_olap: Vec<RunResult> = report
        .runs
        .iter()
        .cloned()
        .map(|mut run| {
            run.configuration.olap_workers = 0;
            run
        })
        .collect();
    let drawn: Vec<&str> = metrics_for(&without_olap).iter().map(|m| m.key).collect();
    assert!(drawn.contains(&"live_versions"));
    assert!(
        !drawn.iter().any(|key| key.starts_with("olap_")),
        "{drawn:?}"
    );
    // In memory there are no disk figures; a run with disk series draws them all.
    let in_memory = METRICS.iter().filter(|m| !m.disk).count();
    assert_eq!(metrics_for(&report.runs).len(), in_memory);
    let mut on_disk = report.runs.clone();
    on_disk[0].samples[0].heap_bytes = 8192;
    assert_eq!(metrics_for(&on_disk).len(), METRICS.len());
    assert!(in_memory < METRICS.len());
}

/// A report whose `index.html` could not be written (a directory of that name in the way)
/// left the plots and a new `report.json` in the directory beside the old page: half a
/// report, mixed with the one before. Now the files appear together or not at all.
#[test]
fn regression_a_report_that_cannot_be_finished_leaves_its_directory_as_it_was() {
    let workload = kv();
    let report = report_of(
        &workload,
        vec![run(&workload, &timed(GarbageCollector::Steam, 300))],
    );
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("index.html")).expect("mkdir");
    std::fs::write(dir.path().join("report.json"), "the report before").expect("write");

    let error = write_report(dir.path(), &report).expect_err("index.html is a directory");
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["index.html", "report.json"],
        "nothing new was left behind"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("report.json")).expect("read"),
        "the report before"
    );
    assert!(matches!(error, LabError::Io(_)), "{error}");
    assert!(error.to_string().contains("index.html"), "{error}");

    // With the way clear, the same report replaces the old one whole.
    std::fs::remove_dir(dir.path().join("index.html")).expect("rmdir");
    write_report(dir.path(), &report).expect("report");
    assert_eq!(
        read_json(&dir.path().join("report.json")).expect("json"),
        report
    );
    assert!(dir.path().join("index.html").is_file());
}

#[test]
fn a_held_snapshot_pins_versions_under_watermark_only_but_not_under_steam() {
    let workload = kv();
    let rows = KvConfig::tiny().rows;
    let counted = |gc: GarbageCollector, hold_snapshot: bool| RunConfig {
        stop: StopAfter::Transactions(3_000),
        hold_snapshot,
        ..timed(gc, 0)
    };
    let pinned = run(&workload, &counted(GarbageCollector::WatermarkOnly, true));
    // Nothing committed after the held snapshot can be reclaimed: one version per commit.
    assert!(
        pinned.engine.live_versions_at_end >= 3_000,
        "watermark with a held snapshot: {:?}",
        pinned.engine
    );
    assert_eq!(pinned.engine.versions_reclaimed, 0);
    assert_eq!(
        pinned.summary.max_live_versions,
        pinned.engine.live_versions_at_end
    );

    let free = run(&workload, &counted(GarbageCollector::WatermarkOnly, false));
    assert!(
        free.engine.versions_reclaimed > 0 && free.engine.live_versions_at_end < 1_500,
        "watermark without a held snapshot: {:?}",
        free.engine
    );

    let steam = run(&workload, &counted(GarbageCollector::Steam, true));
    // Eager pruning keeps the held snapshot's version and the newest per row.
    assert!(
        steam.engine.versions_pruned_eagerly > 0,
        "{:?}",
        steam.engine
    );
    assert!(
        steam.engine.live_versions_at_end <= 2 * rows,
        "steam with a held snapshot: {:?}",
        steam.engine
    );
    let line = comparison_line(&[steam, pinned]).expect("comparison");
    assert!(line.starts_with("steam: "), "{line}");
    assert!(line.contains("the OLTP throughput of watermark"), "{line}");
    assert!(line.contains("live versions"), "{line}");
}

#[test]
fn writers_chains_show_how_long_watermark_only_chains_grow_behind_a_held_snapshot() {
    // 1,000 rows under Zipf θ = 0.8: the hottest row takes about 6% of the 3,000 updates,
    // i.e. ~190 versions, all pinned by the held snapshot under watermark-only (which never
    // prunes), while Steam keeps the held snapshot's version and the newest one.
    let workload = kv();
    let held = |gc: GarbageCollector| RunConfig {
        stop: StopAfter::Transactions(3_000),
        hold_snapshot: true,
        ..timed(gc, 0)
    };
    let steam = run(&workload, &held(GarbageCollector::Steam));
    let watermark = run(&workload, &held(GarbageCollector::WatermarkOnly));
    let (s, w) = (&steam.summary, &watermark.summary);
    assert!(
        (1..=3).contains(&s.max_write_chain),
        "Steam prunes behind the writer: {s:?}"
    );
    assert!(
        w.max_write_chain >= 50,
        "watermark-only keeps every version of the hottest row: {w:?}"
    );
    // Its collector meets no chain at all here: that measure alone would hide the growth.
    assert!(w.max_gc_chain < 50, "{w:?}");
    assert!(
        watermark.engine.write_chain_mean > steam.engine.write_chain_mean,
        "{:?} vs {:?}",
        watermark.engine,
        steam.engine
    );
    assert_eq!(
        w.max_write_chain,
        watermark
            .samples
            .iter()
            .map(|sample| sample.write_chain_max)
            .max()
            .unwrap_or(0)
    );
    let line = comparison_line(&[steam.clone(), watermark.clone()]).expect("comparison");
    let steam_max = s.max_read_chain.max(s.max_write_chain);
    let watermark_max = w.max_read_chain.max(w.max_write_chain);
    assert!(
        line.contains(&format!(
            "max chain {} vs {}",
            compact(steam_max as f64),
            compact(watermark_max as f64)
        )),
        "{line}"
    );
    let max_write_chain = w.max_write_chain;
    let table = summary_table(&[steam, watermark]);
    assert!(table.contains("max chain r/w/gc"), "{table}");
    assert!(
        table.contains(&format!(" / {} / ", compact(max_write_chain as f64))),
        "{table}"
    );
}

/// Wraps a workload; fails in the consistency check after `checks_before_failure` checks,
/// or makes its OLTP workers fail after `commits_before_error` commits (with an error, or a
/// panic if `panic_instead_of_error`), or panics while creating OLTP worker
/// `panic_creating_worker`.
struct Faulty {
    inner: KvWorkload,
    checks: AtomicUsize,
    checks_before_failure: usize,
    commits_before_error: Option<usize>,
    panic_instead_of_error: bool,
    panic_creating_worker: Option<usize>,
}

impl Faulty {
    fn new(checks_before_failure: usize, commits_before_error: Option<usize>) -> Self {
        Faulty {
            inner: kv(),
            checks: AtomicUsize::new(0),
            checks_before_failure,
            commits_before_error,
            panic_instead_of_error: false,
            panic_creating_worker: None,
        }
    }

    fn panicking_after_commits(commits: usize) -> Self {
        Faulty {
            panic_instead_of_error: true,
            ..Faulty::new(usize::MAX, Some(commits))
        }
    }

    fn panicking_while_creating_worker(worker: usize) -> Self {
        Faulty {
            panic_creating_worker: Some(worker),
            ..Faulty::new(usize::MAX, None)
        }
    }
}

struct FailingWorker<'db> {
    inner: Box<dyn OltpWorker + 'db>,
    left: usize,
    panics: bool,
}

impl OltpWorker for FailingWorker<'_> {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        if self.left == 0 {
            assert!(!self.panics, "planted worker panic");
            return Err(LabError::Inconsistent("planted worker failure".into()));
        }
        self.left -= 1;
        self.inner.run_one(isolation)
    }
}

impl Workload for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn describe(&self) -> String {
        "a workload that fails on purpose".into()
    }
    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        self.inner.load(db, progress)
    }
    fn transaction_kinds(&self) -> Vec<String> {
        self.inner.transaction_kinds()
    }
    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError> {
        assert_ne!(
            Some(worker),
            self.panic_creating_worker,
            "planted panic while creating the worker"
        );
        let inner = self.inner.oltp_worker(db, worker, workers, seed)?;
        Ok(match self.commits_before_error {
            Some(left) => Box::new(FailingWorker {
                inner,
                left,
                panics: self.panic_instead_of_error,
            }),
            None => inner,
        })
    }
    fn olap_worker<'db>(
        &'db self,
        _db: &'db Database,
        _worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'db>>, LabError> {
        Ok(None)
    }
    fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        if self.checks.fetch_add(1, Ordering::SeqCst) >= self.checks_before_failure {
            return Err(LabError::Inconsistent("planted failure".into()));
        }
        self.inner.check_consistency(db)
    }
}

#[test]
fn a_failed_consistency_check_fails_the_run() {
    // After the load.
    let result = run_configuration(&Faulty::new(0, None), &timed(GarbageCollector::Steam, 100));
    assert!(
        matches!(&result, Err(LabError::Inconsistent(what)) if what.contains("after the load")),
        "{result:?}"
    );
    // After the run.
    let result = run_configuration(&Faulty::new(1, None), &timed(GarbageCollector::Steam, 100));
    assert!(
        matches!(&result, Err(LabError::Inconsistent(what)) if what.contains("after the run")),
        "{result:?}"
    );
}

/// Runs `workload` with `workers` OLTP workers for what would be 30 s, and returns the
/// error it failed with, checking that it ended within 10 s: a failure must stop the run at
/// once. A run that hangs fails the test after 30 s.
fn error_of_a_run_stopped_at_once(
    workload: Faulty,
    workers: usize,
    hold_snapshot: bool,
) -> LabError {
    let config = RunConfig {
        oltp_workers: workers,
        hold_snapshot,
        ..timed(GarbageCollector::Steam, 30_000)
    };
    let start = Instant::now();
    let result = common::within(Duration::from_secs(30), move || {
        run_configuration(&workload, &config)
    });
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the run went on for {:?} after it failed",
        start.elapsed()
    );
    result.expect_err("the run failed")
}

#[test]
fn a_worker_error_stops_the_run_at_once() {
    let error = error_of_a_run_stopped_at_once(Faulty::new(usize::MAX, Some(50)), 2, true);
    assert!(
        matches!(&error, LabError::Inconsistent(what) if what.contains("planted worker failure")),
        "{error:?}"
    );
}

#[test]
fn a_worker_panic_stops_the_run_at_once() {
    let error = error_of_a_run_stopped_at_once(Faulty::panicking_after_commits(50), 2, false);
    assert!(
        matches!(&error, LabError::ThreadFailed(what) if what.ends_with("panicked")),
        "{error:?}"
    );
}

/// A worker thread that died before the start (here its workload panicked while creating
/// the worker) never reached the start barrier, so the other workers and the sampler waited
/// there forever: the run hung instead of failing.
#[test]
fn regression_a_worker_that_dies_before_the_start_fails_the_run_instead_of_hanging() {
    let error = error_of_a_run_stopped_at_once(Faulty::panicking_while_creating_worker(1), 3, true);
    assert!(
        matches!(&error, LabError::ThreadFailed(what)
            if what.contains("OLTP worker 1") && what.contains("before the run started")),
        "{error:?}"
    );
}

#[test]
fn options_that_do_not_fit_are_refused_before_running() {
    let workload = kv();
    let refused = |config: RunConfig| {
        matches!(
            run_configuration(&workload, &config),
            Err(LabError::BadOption(_))
        )
    };
    let base = timed(GarbageCollector::Steam, 100);
    assert!(refused(RunConfig {
        oltp_workers: 0,
        ..base.clone()
    }));
    assert!(refused(RunConfig {
        olap_workers: 1,
        ..base.clone()
    }));
    assert!(refused(RunConfig {
        stop: StopAfter::Transactions(0),
        ..base.clone()
    }));
    assert!(refused(RunConfig {
        sample_interval: Duration::from_millis(1),
        ..base.clone()
    }));
    assert!(!refused(base));
}

#[test]
fn summary_table_lists_every_configuration() {
    let workload = kv();
    let runs: Vec<RunResult> = GarbageCollector::STEAM_PAPER
        .into_iter()
        .map(|gc| run(&workload, &timed(gc, 200)))
        .collect();
    let table = summary_table(&runs);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("configuration") && lines[0].contains("commits/s"));
    assert!(
        lines[2].starts_with("steam") && lines[3].starts_with("watermark"),
        "{table}"
    );
    assert!(
        !table.contains("OLAP"),
        "no OLAP columns without OLAP workers:\n{table}"
    );
}

/// A target rate far beyond the machine fails the run (`LabError::TargetRateMissed`),
/// unless the configuration says it need not be met (the quick size of a reproduction),
/// and then the run reports the rate it achieved.
#[test]
fn a_missed_target_rate_fails_the_run_unless_it_is_not_enforced() {
    let unreachable = RunConfig {
        target_rate: Some(1e9),
        ..timed(GarbageCollector::Steam, 200)
    };
    match run_configuration(&kv(), &unreachable) {
        Err(LabError::TargetRateMissed {
            target_per_second, ..
        }) => assert_eq!(target_per_second, 1e9),
        other => panic!(
            "expected a missed target rate, got {:?}",
            other.map(|r| r.fixed_rate)
        ),
    }
    let lenient = RunConfig {
        target_rate_enforced: false,
        ..unreachable
    };
    let result = run(&kv(), &lenient);
    let fixed = result
        .fixed_rate
        .expect("a fixed-rate run reports its rate");
    assert!(
        fixed.achieved_per_second > 0.0 && fixed.achieved_per_second < 1e9,
        "{fixed:?}"
    );
}
