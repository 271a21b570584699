//! `verso reproduce`: every experiment's quick size runs through the library, writes its
//! report (HTML, a PNG and an SVG per figure, JSON), and measures something in every run;
//! `--list` and an unknown name on the command line.

mod common;

use std::path::Path;
use std::process::Command;

use common::reproduce::{assert_clean_text, quick};
use verso::{ConcurrencyControl, GarbageCollector};
use verso_lab::reproduce::{reproduce, Point, ReproduceOptions, Reproduction, EXPERIMENTS};
use verso_lab::workload::LabError;

/// As in the `verso` binary: the experiments run in this process, and `wu-fig16` opens
/// databases with memory spaces, which need this allocator.
#[global_allocator]
static ALLOCATOR: verso::research::MemorySpaces<std::alloc::System> =
    verso::research::MemorySpaces::new(std::alloc::System);

#[test]
fn regression_experiment_texts_have_no_doubled_apostrophes_or_runs_of_spaces() {
    for experiment in EXPERIMENTS {
        for text in [
            experiment.title,
            experiment.paper_ref,
            experiment.compares,
            experiment.full_scale,
        ] {
            assert_clean_text(experiment.name, text);
        }
    }
}

fn names() -> Vec<&'static str> {
    GarbageCollector::STEAM_PAPER
        .iter()
        .map(|gc| gc.name())
        .collect()
}

/// The points' series, in order.
fn series(points: &[Point]) -> Vec<&str> {
    points.iter().map(|p| p.series.as_str()).collect()
}

/// Every collector once at each of `xs`, in `GarbageCollector::STEAM_PAPER`'s order.
fn every_collector_at(points: &[Point], xs: &[f64]) {
    assert_eq!(points.len(), xs.len() * GarbageCollector::STEAM_PAPER.len());
    for (chunk, x) in points.chunks(GarbageCollector::STEAM_PAPER.len()).zip(xs) {
        assert_eq!(series(chunk), names());
        assert!(chunk.iter().all(|p| p.x == Some(*x)), "expected x = {x}");
    }
}

#[test]
fn fig7_runs_every_collector_on_ch_and_plots_them_over_time() {
    let (r, _) = quick("steam-fig7");
    assert_eq!(series(&r.points), names());
    for point in &r.points {
        let c = &point.run.configuration;
        assert_eq!((c.oltp_workers, c.olap_workers), (1, 1));
        assert_eq!(c.garbage_collector, point.series);
    }
    let steam = &r.points[0].run;
    assert!(
        steam
            .summary
            .max_read_chain
            .max(steam.summary.max_write_chain)
            <= 3,
        "steam's chains stay at most active + 1"
    );
    let none = r.points.last().expect("none ran");
    assert_eq!(
        none.run.engine.versions_reclaimed, 0,
        "'none' reclaims nothing"
    );
    let keys: Vec<&str> = r
        .panels
        .iter()
        .flat_map(|p| &p.time_series)
        .map(|t| t.key.as_str())
        .collect();
    for key in [
        "oltp_commits_per_second",
        "olap_queries_per_second",
        "live_versions",
        "rss_bytes",
    ] {
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }
}

#[test]
fn table5_compares_watermark_with_steam_over_a_counted_run() {
    let (r, printed) = quick("steam-table5");
    assert_eq!(
        series(&r.points),
        ["watermark", "steam", "watermark, cut", "steam, cut"]
    );
    for point in &r.points {
        let run = &point.run;
        assert_eq!(run.configuration.transactions, Some(300));
        assert_eq!(run.totals.oltp_commits, 300);
        assert!(run.engine.reads > 0 && run.engine.read_versions_traversed > 0);
        assert!(run.engine.gc_chain_visits > 0);
    }
    let (watermark, steam) = (&r.points[0].run, &r.points[1].run);
    assert_eq!(watermark.engine.versions_pruned_eagerly, 0);
    assert!(
        steam.engine.versions_pruned_eagerly > 0,
        "EPO pruned nothing"
    );
    assert!(steam.engine.active_list_refreshes > 0);
    let table = r.panels[0].table.as_ref().expect("Table 5 itself");
    assert_eq!(table.header.len(), 7);
    assert!(table
        .rows
        .iter()
        .any(|row| row[5] == "1,197m" && row[6] == "4.2m"));
    // Both ways of removing versions ran (their costs: verso's tests/collectors.rs).
    let (watermark_cut, steam_cut) = (&r.points[2].run, &r.points[3].run);
    assert_eq!(watermark_cut.engine.versions_pruned_eagerly, 0);
    assert!(steam_cut.engine.versions_pruned_eagerly > 0);
    assert!(watermark.engine.versions_reclaimed > 0 && watermark_cut.engine.versions_reclaimed > 0);
    assert!(
        steam.engine.active_list_seconds > 0.0,
        "refreshes are timed"
    );
    assert!(steam.engine.scan_reads > 0 && steam.engine.scan_reads <= steam.engine.reads);
    let row = |label: &str| {
        table
            .rows
            .iter()
            .find(|row| row[0] == label)
            .unwrap_or_else(|| panic!("no row {label:?}"))
    };
    assert_eq!(row("Table scans: traversed versions")[5], "120m");
    assert!(row("Version retrieval (reads): time")[2].ends_with("%)"));
    assert!(printed.contains("30,580"), "{printed}");
}

#[test]
fn fig8_runs_tpcc_at_one_and_two_threads() {
    let (r, printed) = quick("steam-fig8");
    every_collector_at(&r.points, &[1.0, 2.0]);
    for point in &r.points {
        assert_eq!(
            point.run.configuration.oltp_workers as f64,
            point.x.expect("x")
        );
    }
    let figure = &r.panels[0].figures[0];
    assert_eq!(figure.lines.len(), GarbageCollector::STEAM_PAPER.len());
    assert!(figure
        .lines
        .iter()
        .all(|line| line.points.len() == 2 && line.points.iter().all(|p| p[1] > 0.0)));
    assert!(printed.contains("OLTP threads"), "{printed}");
}

#[test]
fn fig9_adds_olap_threads_beside_one_oltp_thread() {
    let (r, _) = quick("steam-fig9");
    every_collector_at(&r.points, &[1.0, 2.0]);
    for point in &r.points {
        let c = &point.run.configuration;
        assert_eq!(c.oltp_workers, 1);
        assert_eq!(c.olap_workers as f64, point.x.expect("x"));
    }
    assert_eq!(r.panels[0].figures.len(), 2);
}

#[test]
fn fig10_sweeps_the_period_and_the_epoch_threshold() {
    let (r, _) = quick("steam-fig10");
    let reference = &r.points[0];
    assert_eq!((reference.series.as_str(), reference.x), ("steam", None));
    let mut periods = 0;
    let mut thresholds = 0;
    for point in &r.points[1..] {
        let gc = GarbageCollector::from_name(&point.series).expect("a collector");
        let c = &point.run.configuration;
        let x = point.x.expect("a swept point has x");
        if gc.runs_in_background() {
            periods += 1;
            assert_eq!(c.background_gc_period_ms, Some(x));
            assert_eq!(c.epoch_advance_threshold, None);
            if x == 1.0 {
                assert!(point.run.engine.background_gc_rounds > 0, "{}", c.label);
            }
        } else {
            assert!(gc.uses_epochs(), "{} is neither", point.series);
            thresholds += 1;
            assert_eq!(c.epoch_advance_threshold, Some(x as u64));
            assert_eq!(c.background_gc_period_ms, None);
        }
    }
    assert_eq!((periods, thresholds), (4, 4));
    let figures = &r.panels[0].figures;
    assert_eq!(figures.len(), 2);
    assert!(figures.iter().all(|f| f.log_x));
    // hana, hekaton and steam's reference line; deuteronomy, ermia and the reference.
    assert_eq!(figures[0].lines.len(), 3);
    assert_eq!(figures[1].lines.len(), 3);
}

#[test]
fn fig11_sweeps_the_zipf_skew() {
    let (r, _) = quick("steam-fig11");
    every_collector_at(&r.points, &[0.0, 1.0]);
    assert!(r
        .points
        .iter()
        .all(|p| p.run.configuration.oltp_workers == 2));
}

#[test]
fn fig12_sweeps_the_share_of_scans() {
    let (r, _) = quick("steam-fig12");
    every_collector_at(&r.points, &[10.0, 100.0]);
    for point in &r.points {
        let by_kind = &point.run.totals.oltp_commits_by_kind;
        let scans = by_kind.get("scan").copied().unwrap_or(0);
        let updates = by_kind.get("update").copied().unwrap_or(0);
        assert!(scans > 0, "{}: no scan", point.run.configuration.label);
        if point.x == Some(100.0) {
            assert_eq!(updates, 0, "read-only runs update nothing");
        } else {
            assert!(updates > 0);
        }
    }
}

#[test]
fn wu_fig7_runs_every_protocol_on_both_ycsb_mixes() {
    let (r, _) = quick("wu-fig7");
    assert_eq!(r.points.len(), 5 * 2 * 2, "protocols x mixes x thetas");
    for protocol in ConcurrencyControl::ALL {
        for mix in ["read-intensive", "update-intensive"] {
            for theta in [0.5, 0.9] {
                let series = format!("{} {mix}", protocol.short_name());
                let point = r
                    .points
                    .iter()
                    .find(|p| p.series == series && p.x == Some(theta))
                    .unwrap_or_else(|| panic!("no point {series} at {theta}"));
                let config = &point.run.configuration;
                assert!(
                    config.design.ends_with(protocol.name()),
                    "{}",
                    config.design
                );
                assert!(
                    config.design.starts_with("append-n2o/"),
                    "{}",
                    config.design
                );
                assert_eq!(config.isolation, "serializable");
                assert_eq!(config.oltp_workers, 2);
            }
        }
    }
    assert_eq!(r.panels.len(), 2, "one panel per mixture");
}

/// Figures 18-19: vac, coop and none over append-o2n under MVTO, at low and high
/// contention, each run's throughput and memory over time; the cooperative run recorded
/// rows on its walks and the vacuum run vacuumed.
#[test]
fn wu_fig18_compares_vacuuming_with_cooperative_cleaning_over_time() {
    let (r, _) = quick("wu-fig18");
    assert_eq!(r.points.len(), 3 * 2, "collectors x contention levels");
    for point in &r.points {
        let config = &point.run.configuration;
        assert!(
            config.design.starts_with("append-o2n/") && config.design.ends_with("mvto"),
            "{}",
            config.design
        );
        let engine = &point.run.engine;
        match point.series.split(' ').next() {
            Some("vac") => assert!(
                engine.vacuum_passes > 0 && engine.versions_reclaimed > 0,
                "{engine:?}"
            ),
            Some("coop") => assert!(
                engine.rows_recorded_for_cleaning > 0
                    && engine.rows_cleaned_cooperatively > 0
                    && engine.versions_reclaimed > 0,
                "{engine:?}"
            ),
            Some("none") => assert_eq!(engine.versions_reclaimed, 0, "{engine:?}"),
            other => panic!("unexpected series {other:?}"),
        }
    }
    assert_eq!(r.panels.len(), 2, "one panel per contention level");
    for panel in &r.panels {
        assert_eq!(panel.time_series.len(), 3, "throughput, version bytes, RSS");
        assert_eq!(panel.table.as_ref().expect("a table").rows.len(), 3);
        assert_eq!(panel.verdicts.len(), 3);
    }
}

/// Figures 20-21: vac, txn and none over append-n2o under MVTO, on both YCSB mixes.
#[test]
fn wu_fig20_compares_tuple_level_with_transaction_level_gc_over_time() {
    let (r, _) = quick("wu-fig20");
    let series: Vec<&str> = r.points.iter().map(|p| p.series.as_str()).collect();
    assert_eq!(
        series,
        [
            "vac read-intensive",
            "txn read-intensive",
            "none read-intensive",
            "vac update-intensive",
            "txn update-intensive",
            "none update-intensive",
        ]
    );
    for point in &r.points {
        assert!(
            point.run.configuration.design.starts_with("append-n2o/"),
            "{}",
            point.run.configuration.design
        );
        // Both collectors reclaim while the workers run (the first full run of this
        // experiment found 'txn' reclaiming nothing: `tests/collectors.rs`,
        // `regression_a_queue_folded_faster_than_the_bound_moves_is_still_finalized`).
        let engine = &point.run.engine;
        if point.series.starts_with("none") {
            assert_eq!(engine.versions_reclaimed, 0, "{engine:?}");
        } else {
            assert!(
                engine.versions_reclaimed > 0,
                "{}: {engine:?}",
                point.series
            );
        }
    }
    assert_eq!(r.panels.len(), 2, "one panel per mixture");
    assert!(r.panels.iter().all(|p| p.verdicts.len() == 3));
}

/// Figures 8-9: every protocol's read-write thread beside 0 and 1 read-only threads, the
/// read-only transactions undeclared and then declared READ ONLY; the read-only threads
/// committed transactions exactly when there were some.
#[test]
fn wu_fig8_runs_read_only_threads_beside_read_write_ones_with_and_without_the_hint() {
    let (r, _) = quick("wu-fig8");
    assert_eq!(
        r.points.len(),
        5 * 2 * 2,
        "protocols x hints x read-only threads"
    );
    for point in &r.points {
        let config = &point.run.configuration;
        let threads = point.x.expect("read-only threads") as usize;
        assert_eq!(config.oltp_workers, 1);
        assert_eq!(config.olap_workers, threads, "{}", point.series);
        assert_eq!(config.isolation, "serializable");
        let declared = point.series.ends_with(" declared");
        assert_eq!(
            config.workload_parameters.contains("declared READ ONLY"),
            declared,
            "{}: {}",
            point.series,
            config.workload_parameters
        );
        assert_eq!(
            point.run.totals.olap_queries > 0,
            threads > 0,
            "{}: read-only commits with {threads} read-only thread(s)",
            point.series
        );
    }
    assert_eq!(r.panels.len(), 2, "Figure 8 and Figure 9");
    for panel in &r.panels {
        assert_eq!(
            panel.figures.len(),
            2,
            "read-write and read-only throughput"
        );
        assert_eq!(panel.verdicts.len(), 4);
    }
}

/// Figure 12: both append-only orders on both mixtures at each contention level, under
/// MVTO and 'txn'; O2N's readers walk from the oldest version, so they walk more.
#[test]
fn wu_fig12_compares_the_two_append_only_chain_orders() {
    let (r, _) = quick("wu-fig12");
    assert_eq!(r.points.len(), 2 * 2 * 2, "orders x mixes x thetas");
    for point in &r.points {
        let design = &point.run.configuration.design;
        let storage = point.series.split(' ').next().expect("a series name");
        assert!(
            design.starts_with(&format!("{storage}/txn")) && design.ends_with("mvto"),
            "{design}"
        );
    }
    assert_eq!(r.panels.len(), 2, "one panel per mixture");
    for panel in &r.panels {
        assert_eq!(panel.figures.len(), 2, "throughput and records walked");
        assert_eq!(panel.verdicts.len(), 2);
    }
}

/// Figure 17: the three storages at one and two OLTP threads, each beside one StockScan
/// thread that completes scans.
#[test]
fn wu_fig17_runs_tpcc_with_stock_scan_on_each_storage() {
    let (r, _) = quick("wu-fig17");
    assert_eq!(r.points.len(), 3 * 2, "storages x thread counts");
    for point in &r.points {
        let configuration = &point.run.configuration;
        assert!(
            configuration
                .design
                .starts_with(&format!("{}/txn/mvto", point.series)),
            "{}",
            configuration.design
        );
        assert_eq!(configuration.olap_workers, 1);
        assert_eq!(Some(configuration.oltp_workers as f64), point.x);
        assert!(point.run.totals.oltp_commits > 0, "{}", point.series);
        assert!(
            point
                .run
                .totals
                .olap_queries_by_name
                .get("StockScan")
                .copied()
                .unwrap_or(0)
                > 0,
            "{}: {:?}",
            point.series,
            point.run.totals.olap_queries_by_name
        );
    }
    assert_eq!(r.panels.len(), 1);
    assert_eq!(r.panels[0].figures.len(), 2, "throughput and scan latency");
    assert_eq!(r.panels[0].verdicts.len(), 4);
}

/// Figures 24-25: the eight configurations of Table 1 under both contention levels, each
/// run with the protocol, storage, collector and pointers its row names.
#[test]
fn wu_fig24_runs_the_table_1_configurations() {
    let (r, _) = quick("wu-fig24");
    assert_eq!(r.points.len(), 8 * 2, "systems x contention levels");
    let expect = [
        ("oracle/mysql", "delta/vac/mv2pl"),
        ("postgres", "append-o2n/vac/mv2pl"),
        ("hyrise", "append-n2o/none/mvocc"),
        ("hekaton", "append-o2n/coop/mvocc"),
        ("memsql", "append-n2o/vac/mvocc"),
        ("sap hana", "time-travel/hana/mv2pl"),
        ("nuodb", "append-n2o/vac/mv2pl"),
        ("hyper", "delta/txn/mvocc"),
    ];
    for point in &r.points {
        let design = &point.run.configuration.design;
        let (system, storage_gc_protocol) = expect
            .iter()
            .find(|(system, _)| point.series.starts_with(&format!("{system} ")))
            .unwrap_or_else(|| panic!("unknown series {}", point.series));
        assert!(
            design.starts_with(storage_gc_protocol),
            "{system}: {design}"
        );
        let physical = ["postgres", "hyrise", "hekaton", "memsql"].contains(system);
        assert_eq!(
            design.ends_with("/physical"),
            physical,
            "{system}: {design}"
        );
        assert!(point.run.totals.oltp_commits > 0, "{}", point.series);
    }
    assert_eq!(r.panels.len(), 2);
    for panel in &r.panels {
        assert_eq!(panel.figures.len(), 2, "throughput and scan latency");
        assert_eq!(panel.verdicts.len(), 4);
        assert_eq!(panel.table.as_ref().map(|t| t.rows.len()), Some(8));
    }
}

/// Figure 11: the three non-inline policies over append-n2o, MVTO and 'txn', on both YCSB
/// mixes, at each attribute count the table is built with (100-byte attributes, one
/// accessed per operation); the out-of-line runs say so in their design.
#[test]
fn wu_fig11_compares_copied_shared_and_packed_non_inline_attributes() {
    let (r, _) = quick("wu-fig11");
    assert_eq!(
        r.points.len(),
        3 * 2 * 2,
        "policies x mixes x attribute counts"
    );
    for point in &r.points {
        let configuration = &point.run.configuration;
        let design = &configuration.design;
        assert!(design.starts_with("append-n2o/txn/mvto"), "{design}");
        let policy = point.series.split(' ').next().expect("a series name");
        match policy {
            "packed" => assert!(!design.contains("non-inline"), "{design}"),
            "copied" | "shared" => {
                assert!(
                    design.ends_with(&format!("/non-inline-{policy}")),
                    "{design}"
                )
            }
            other => panic!("series {other}"),
        }
        let attributes = point.x.expect("a swept value") as usize;
        let workload = &configuration.workload_parameters;
        assert!(
            workload.contains(&format!("rows of {attributes} x 100-byte fields"))
                && workload.contains("reads (1 field(s) each)")
                && workload.contains("updates (1 field(s) each)"),
            "{workload}"
        );
        assert!(point.run.totals.oltp_commits > 0, "{}", point.series);
    }
    assert_eq!(r.panels.len(), 2, "one panel per mix");
    for panel in &r.panels {
        assert_eq!(panel.figures.len(), 2, "throughput and memory");
        assert_eq!(panel.verdicts.len(), 2);
    }
}

/// Figure 16: the three storages with 1 and 2 memory spaces on both YCSB mixes; the design
/// names the spaces, and the runs allocated from them.
#[test]
fn wu_fig16_runs_the_storages_over_one_and_two_memory_spaces() {
    let (r, _) = quick("wu-fig16");
    assert_eq!(r.points.len(), 3 * 2 * 2, "storages x spaces x mixes");
    for point in &r.points {
        let design = &point.run.configuration.design;
        let spaces = point.x.expect("a swept value") as usize;
        assert!([1, 2].contains(&spaces), "{design}");
        assert!(design.ends_with(&format!("/spaces-{spaces}")), "{design}");
        assert!(design.contains("/txn/mvto"), "{design}");
        assert!(point.run.totals.oltp_commits > 0, "{}", point.series);
    }
    assert!(
        verso::research::memory_space_usage()[..2]
            .iter()
            .all(|s| s.chunks > 0),
        "both spaces grew"
    );
    assert_eq!(r.panels.len(), 2);
    for panel in &r.panels {
        assert_eq!(panel.verdicts.len(), 2);
    }
}

/// Figures 22 and 23: both pointer schemes under both contention levels at each index or
/// thread count, over append-n2o, MVTO and 'txn', with the secondary indexes the point
/// names (physical runs say so in their design).
#[test]
fn wu_fig22_and_23_compare_logical_with_physical_index_pointers() {
    for (name, xs) in [("wu-fig22", [1.0, 8.0]), ("wu-fig23", [1.0, 2.0])] {
        let (r, _) = quick(name);
        assert_eq!(
            r.points.len(),
            2 * 2 * 2,
            "{name}: schemes x contention x values"
        );
        for point in &r.points {
            let configuration = &point.run.configuration;
            let design = &configuration.design;
            assert!(
                design.starts_with("append-n2o/txn/mvto"),
                "{name}: {design}"
            );
            let physical = point.series.starts_with("physical");
            assert_eq!(design.ends_with("/physical"), physical, "{name}: {design}");
            let x = point.x.expect("a swept value");
            assert!(xs.contains(&x), "{name}: x {x}");
            let (indexes, threads) = match name {
                "wu-fig22" => (x as usize, 2),
                _ => (8, x as usize),
            };
            assert!(
                configuration
                    .workload_parameters
                    .contains(&format!(", {indexes} secondary indexes")),
                "{name}: {}",
                configuration.workload_parameters
            );
            assert_eq!(configuration.oltp_workers, threads, "{name}");
            assert!(
                point.run.totals.oltp_commits > 0,
                "{name}: {}",
                point.series
            );
        }
        assert_eq!(r.panels.len(), 2, "{name}: one panel per contention level");
        for panel in &r.panels {
            assert_eq!(panel.verdicts.len(), 2, "{name}");
        }
    }
}

/// Figures 13-15: append-n2o, time-travel and delta at each value of the swept parameter,
/// in two panels each, on the YCSB each figure names (the attribute counts it sweeps are
/// those the runs used).
#[test]
fn wu_fig13_to_15_compare_the_storages_as_the_attributes_touched_change() {
    for (name, verdicts_per_panel) in [
        ("wu-fig13", [2, 1]),
        ("wu-fig14", [3, 3]),
        ("wu-fig15", [2, 1]),
    ] {
        let (r, _) = quick(name);
        assert_eq!(
            r.points.len(),
            3 * 2 * 2,
            "{name}: storages x panels x values"
        );
        for point in &r.points {
            let design = &point.run.configuration.design;
            let storage = point.series.split(' ').next().expect("a series name");
            assert!(
                ["append-n2o", "time-travel", "delta"].contains(&storage),
                "{name}: {}",
                point.series
            );
            assert!(design.starts_with(&format!("{storage}/txn")), "{design}");
            let workload = &point.run.configuration.workload_parameters;
            let x = point.x.expect("a swept value");
            let expected = match name {
                "wu-fig13" => format!("{:.0}% updates", x * 100.0),
                "wu-fig14" => format!("updates ({} field(s) each)", x as usize),
                _ => format!("reads ({} field(s) each)", x as usize),
            };
            assert!(
                workload.contains(&expected),
                "{name}: {workload} lacks {expected}"
            );
        }
        let verdicts: Vec<usize> = r.panels.iter().map(|p| p.verdicts.len()).collect();
        assert_eq!(verdicts, verdicts_per_panel, "{name}");
    }
}

#[test]
fn wu_fig10_runs_tpcc_on_every_protocol_and_counts_aborts_by_transaction() {
    let (r, _) = quick("wu-fig10");
    let series: Vec<&str> = r.points.iter().map(|p| p.series.as_str()).collect();
    assert_eq!(
        series,
        ConcurrencyControl::ALL.map(ConcurrencyControl::short_name)
    );
    for point in &r.points {
        let totals = &point.run.totals;
        assert_eq!(
            totals.oltp_aborts_by_kind.values().sum::<u64>(),
            totals.oltp_aborts,
            "{}: aborts by kind add up",
            point.series
        );
        for kind in ["NewOrder", "Payment"] {
            assert!(totals.oltp_aborts_by_kind.contains_key(kind), "{kind}");
        }
    }
    let table = r.panels[0].table.as_ref().expect("a table");
    assert_eq!(table.rows.len(), 5, "one row per protocol");
}

#[test]
fn an_unknown_experiment_is_refused_with_the_known_names() {
    let options = ReproduceOptions {
        quick: true,
        ..ReproduceOptions::default()
    };
    let mut out = Vec::new();
    match reproduce("steam-fig99", &options, &mut out) {
        Err(LabError::BadOption(message)) => {
            assert!(message.contains("steam-fig99"), "{message}");
            for e in EXPERIMENTS {
                assert!(message.contains(e.name), "{message}");
            }
        }
        Err(other) => panic!("unexpected error: {other}"),
        Ok(_) => panic!("an unknown experiment ran"),
    }
    assert!(
        !Path::new("verso-report/reproduce/steam-fig99").exists(),
        "a report was written for an unknown experiment"
    );
}

fn verso(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .output()
        .expect("the verso binary runs")
}

#[test]
fn the_command_line_lists_the_experiments_and_refuses_unknown_ones() {
    let listed = verso(&["reproduce", "--list"]);
    assert!(listed.status.success());
    let stdout = String::from_utf8_lossy(&listed.stdout);
    for e in EXPERIMENTS {
        assert!(stdout.contains(e.name), "{stdout}");
        assert!(stdout.contains(e.paper_ref), "{stdout}");
    }
    assert_eq!(EXPERIMENTS.len(), 37);

    let unknown = verso(&["reproduce", "steam-fig99", "--quick"]);
    assert_eq!(unknown.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("unknown experiment \"steam-fig99\""),
        "{stderr}"
    );
    assert!(stderr.contains("steam-table5"), "{stderr}");

    let missing = verso(&["reproduce"]);
    assert_eq!(missing.status.code(), Some(2));

    let help = verso(&["reproduce", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("steam-fig10") && help.contains("--quick"),
        "{help}"
    );

    let gc_help = verso(&["kv", "--help"]);
    let gc_help = String::from_utf8_lossy(&gc_help.stdout);
    for name in names() {
        assert!(
            gc_help.contains(name),
            "--gc's help misses {name}: {gc_help}"
        );
    }
}

#[test]
fn a_run_carries_the_collectors_frequency_settings() {
    use std::time::Duration;
    use verso::Options;
    use verso_lab::runner::{run_configuration, RunConfig, StopAfter};
    use verso_lab::workloads::kv_updates::{KvConfig, KvWorkload};

    let workload = KvWorkload::new(KvConfig::tiny()).expect("config");
    let timed = |options: Options| RunConfig {
        stop: StopAfter::Duration(Duration::from_millis(200)),
        sample_interval: Duration::from_millis(50),
        ..RunConfig::with_options("settings", options)
    };
    let hana = GarbageCollector::STEAM_PAPER
        .into_iter()
        .find(|gc| gc.runs_in_background())
        .expect("a background collector");
    let epochs = GarbageCollector::STEAM_PAPER
        .into_iter()
        .find(|gc| gc.uses_epochs())
        .expect("an epoch collector");

    let run = run_configuration(
        &workload,
        &timed(
            Options::default()
                .garbage_collector(hana)
                .background_gc_period(Duration::from_millis(5)),
        ),
    )
    .expect("a background run");
    assert_eq!(run.configuration.background_gc_period_ms, Some(5.0));
    assert!(run.engine.background_gc_rounds > 0);

    let run = run_configuration(
        &workload,
        &timed(
            Options::default()
                .garbage_collector(epochs)
                .epoch_advance_threshold(3),
        ),
    )
    .expect("an epoch run");
    assert_eq!(run.configuration.epoch_advance_threshold, Some(3));
    assert!(run.engine.epoch_advances > 0);

    // A setting for a collector it does not apply to is refused before anything runs.
    for options in [
        Options::default()
            .garbage_collector(GarbageCollector::Steam)
            .background_gc_period(Duration::from_millis(5)),
        Options::default()
            .garbage_collector(hana)
            .epoch_advance_threshold(3),
    ] {
        match timed(options).validate(&workload) {
            Err(LabError::BadOption(message)) => {
                assert!(message.contains("applies only"), "{message}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

/// `verso reproduce` runs each point in a child process of its own (so no point inherits
/// another's heap or resident memory), and the parent's report holds every child's run.
#[test]
fn the_command_line_runs_each_point_in_a_child_process() {
    let dir = std::env::temp_dir().join(format!("verso-child-points-{}", std::process::id()));
    let json = dir.join("fig8.json");
    let _ = std::fs::remove_dir_all(&dir);
    let report = dir.join("report");
    let run = verso(&[
        "reproduce",
        "steam-fig8",
        "--quick",
        "--quiet",
        "--report",
        report.to_str().expect("utf-8 path"),
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let reproduction: verso_lab::reproduce::Reproduction =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
            .expect("a reproduction");
    assert_eq!(
        reproduction.points.len(),
        2 * GarbageCollector::STEAM_PAPER.len()
    );
    assert!(reproduction
        .points
        .iter()
        .all(|p| p.run.totals.oltp_commits > 0));
    assert!(report.join("index.html").exists());

    // A child asked for a point that does not exist fails with a clear error.
    let child = verso(&[
        "reproduce",
        "steam-fig8",
        "--quick",
        "--quiet",
        "--point-index",
        "99",
        "--point-json",
        dir.join("p.json").to_str().expect("utf-8 path"),
    ]);
    assert_eq!(child.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&child.stderr).contains("point 99 does not exist"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The configuration (`storage/gc/protocol` design) of each TB-Collect system, by the
/// start of its series name.
fn tb_design_of(series: &str) -> &'static str {
    for (name, design) in [
        ("NoGC", "append-nvm/none/mvto"),
        ("TB-Collect", "tile-block/tb-collect/mvto"),
        ("Steam/N2DB", "append-nvm/tvcp/mvto"),
        ("Zen", "append-nvm/zen/mvto"),
        ("OneShot", "delta-nvm/oneshot/mvto"),
    ] {
        if series.starts_with(name) {
            return design;
        }
    }
    panic!("no TB-Collect system is called {series:?}")
}

/// Checks that every point of a TB-Collect reproduction runs its system's configuration,
/// on persistent memory, and that the systems write lines of it.
fn assert_tb_points(r: &Reproduction) {
    for point in &r.points {
        let design = &point.run.configuration.design;
        assert!(
            design.starts_with(tb_design_of(&point.series)),
            "{}: {design}",
            point.series
        );
        assert!(
            point
                .run
                .samples
                .iter()
                .any(|s| s.pm_lines_per_second > 0.0),
            "{}: no line of the region persisted",
            point.series
        );
    }
}

/// TB-Collect Figure 8: five systems at 1 and 2 threads under 50% and 100% writes, and at
/// three shares of writes; each panel draws commits/s and the share of NoGC's.
#[test]
fn tb_fig8_runs_the_five_systems_on_persistent_memory() {
    let (r, _) = quick("tb-fig8");
    assert_eq!(
        r.points.len(),
        5 * (2 + 2 + 3),
        "systems x points of the three panels"
    );
    assert_tb_points(&r);
    assert_eq!(r.panels.len(), 3);
    for panel in &r.panels {
        assert_eq!(panel.figures.len(), 2, "commits/s and the share of NoGC's");
    }
    assert_eq!(
        r.notes.len(),
        4,
        "one note of shares per panel, one of the spread"
    );
}

/// TB-Collect Figures 9 and 10: the five systems over theta and over the transaction size.
#[test]
fn tb_fig9_and_fig10_sweep_skew_and_transaction_size() {
    let (r, _) = quick("tb-fig9");
    assert_eq!(r.points.len(), 5 * 2, "systems x thetas");
    assert_tb_points(&r);
    let (r, _) = quick("tb-fig10");
    assert_eq!(r.points.len(), 5 * 2, "systems x sizes");
    assert_tb_points(&r);
    assert_eq!(
        r.panels[0].figures.len(),
        3,
        "commits/s, share, operations/s"
    );
}

/// TB-Collect Figure 11: NoGC, TB-Collect and TB-Collect-hash at 1 and 2 threads in the two
/// scenarios; TB-Collect-hash runs tb-collect with the hash index (its design says so),
/// and the notes count each system's consolidated blocks.
#[test]
fn tb_fig11_runs_tb_collect_and_tb_collect_hash_in_two_scenarios() {
    let (r, _) = quick("tb-fig11");
    assert_eq!(r.points.len(), 3 * 2 * 2, "systems x threads x scenarios");
    assert_tb_points(&r);
    assert_eq!(r.panels.len(), 2);
    for point in &r.points {
        let design = &point.run.configuration.design;
        assert_eq!(
            point.series.starts_with("TB-Collect-hash"),
            design.ends_with("/hash-index"),
            "{}: {design}",
            point.series
        );
    }
    assert_eq!(
        r.notes.len(),
        2 * 3 + 1,
        "shares, consolidation, spread per scenario"
    );
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("blocks that got chain consolidation")));
}

/// TB-Collect Figure 7: the five systems on TPC-C at 1 and 2 threads; shares (a) and
/// latency (c) as tables, scalability (b) as figures.
#[test]
fn tb_fig7_runs_tpcc_on_the_five_systems_with_latency_by_type() {
    let (r, _) = quick("tb-fig7");
    assert_eq!(r.points.len(), 5 * 2, "systems x thread counts");
    assert_tb_points(&r);
    assert_eq!(r.panels.len(), 3);
    assert_eq!(r.panels[0].table.as_ref().expect("shares").rows.len(), 5);
    assert_eq!(r.panels[1].figures.len(), 2);
    let latency = r.panels[2].table.as_ref().expect("latency");
    for row in &latency.rows {
        assert!(
            !row[1].starts_with('-') && !row[2].starts_with('-'),
            "NewOrder and Payment latency of {}",
            row[0]
        );
    }
}

/// The five systems' runs of a TB-Collect experiment over time: one each, in the paper's
/// order, each series named after its system; at a fixed rate when `target` is given (a
/// quick run is not held to it: a busy machine's stall drops a tenth of 0.2 s).
fn assert_one_run_per_system(r: &Reproduction, target: Option<f64>) {
    let series: Vec<&str> = r.points.iter().map(|p| p.series.as_str()).collect();
    assert_eq!(
        series,
        ["NoGC", "TB-Collect", "Steam/N2DB (tvcp)", "Zen", "OneShot"]
    );
    assert_tb_points(r);
    for point in &r.points {
        let run = &point.run;
        match target {
            Some(target) => {
                let fixed = run.fixed_rate.as_ref().expect("a fixed-rate run");
                assert_eq!(fixed.target_per_second, target, "{}", point.series);
                assert!(
                    fixed.achieved_per_second > 0.0 && fixed.achieved_per_second < 2.0 * target,
                    "{}: {fixed:?}",
                    point.series
                );
            }
            None => assert!(run.fixed_rate.is_none(), "{}", point.series),
        }
        assert!(
            run.samples
                .iter()
                .all(|s| s.dram_bytes > 0 && s.dram_bytes <= s.rss_bytes),
            "{}: DRAM is part of the resident memory",
            point.series
        );
    }
}

/// TB-Collect Figure 12: the five systems at one fixed TPC-C rate; the growth of the
/// region and of DRAM in a table, and both over time.
#[test]
fn tb_fig12_measures_space_growth_at_a_fixed_rate() {
    let (r, _) = quick("tb-fig12");
    assert_one_run_per_system(&r, Some(100.0));
    assert!(r
        .points
        .iter()
        .all(|p| p.run.samples.iter().all(|s| s.pm_bytes_in_use > 0)));
    let panel = &r.panels[0];
    assert_eq!(panel.table.as_ref().expect("growth").rows.len(), 5);
    assert_eq!(panel.figures.len(), 2, "the region and DRAM over time");
    for figure in &panel.figures {
        assert_eq!(figure.lines.len(), 5, "{}", figure.key);
        assert!(figure.lines.iter().all(|l| !l.points.is_empty()));
    }
}

/// TB-Collect Figure 13: the five systems as fast as they go, each run's commits/s
/// second by second drawn, their means and standard deviations in a table.
#[test]
fn tb_fig13_measures_throughput_over_time() {
    let (r, _) = quick("tb-fig13");
    assert_one_run_per_system(&r, None);
    let panel = &r.panels[0];
    assert_eq!(panel.time_series.len(), 1);
    assert_eq!(panel.time_series[0].metric, "oltp_commits_per_second");
    let table = panel.table.as_ref().expect("means and deviations");
    assert_eq!(table.rows.len(), 5);
    for row in &table.rows {
        let mean: f64 = row[1].parse().expect("a mean");
        assert!(mean > 0.0, "{row:?}");
    }
    assert_eq!(panel.verdicts.len(), 5);
}

/// TB-Collect Figure 14: the five systems at one fixed YCSB rate; the versions each holds
/// per row, the linked chain, and the version accesses per tuple since the start, which
/// never fall.
#[test]
fn tb_fig14_measures_chains_and_version_accesses_at_a_fixed_rate() {
    let (r, _) = quick("tb-fig14");
    assert_one_run_per_system(&r, Some(100.0));
    let panel = &r.panels[0];
    assert_eq!(panel.table.as_ref().expect("chains").rows.len(), 5);
    let [held, chains, accesses] = &panel.figures[..] else {
        panic!("three figures: {:?}", panel.figures);
    };
    for line in held.lines.iter().chain(&chains.lines) {
        assert!(line.points.iter().all(|p| p[1] >= 1.0), "{line:?}");
    }
    // Without a collector the region only gains versions (YCSB's rows stay as many).
    let nogc = held
        .lines
        .iter()
        .find(|line| line.label.starts_with("NoGC"))
        .expect("NoGC's line");
    assert!(
        nogc.points.windows(2).all(|w| w[1][1] >= w[0][1]),
        "{nogc:?}"
    );
    for line in &accesses.lines {
        assert!(
            line.points.windows(2).all(|w| w[1][1] >= w[0][1]),
            "accesses since the start never fall: {line:?}"
        );
        assert!(line.points.last().is_some_and(|p| p[1] > 0.0), "{line:?}");
    }
}

/// TB-Collect Figure 1: NoGC and the three approaches on TPC-C over two emulated media,
/// each run on the media its panel names, a table of the shares of NoGC's beside the
/// paper's.
#[test]
fn tb_fig1_runs_the_collectors_on_two_media() {
    let (r, _) = quick("tb-fig1");
    assert_eq!(r.points.len(), 4 * 2, "systems x media");
    assert_tb_points(&r);
    for point in &r.points {
        let media = &point.run.configuration.persistent_memory_media;
        let expected = if point.series.ends_with("DRAM-like media") {
            "64-byte lines, 0 ns added"
        } else {
            assert!(
                point.series.ends_with("Optane-like media"),
                "{}",
                point.series
            );
            "256-byte lines"
        };
        assert!(media.starts_with(expected), "{}: {media}", point.series);
    }
    let table = r.panels[0].table.as_ref().expect("shares by media");
    assert_eq!(table.rows.len(), 4);
    assert_eq!(r.panels[0].verdicts.len(), 5);
}

/// TB-Collect Figure 15b: the five systems on Table 3's configurations A and E (the quick
/// size), each run on its configuration's line size, with a delay at A and none at E.
#[test]
fn tb_fig15b_runs_the_five_systems_on_table3s_configurations() {
    let (r, _) = quick("tb-fig15b");
    assert_eq!(r.points.len(), 5 * 2, "systems x configurations");
    assert_tb_points(&r);
    for point in &r.points {
        let media = &point.run.configuration.persistent_memory_media;
        match point.x {
            Some(0.0) => {
                assert!(media.starts_with("256-byte lines, "), "{media}");
                assert!(!media.contains(", 0 ns"), "A delays each line: {media}");
            }
            Some(4.0) => assert!(media.starts_with("64-byte lines, 0 ns"), "{media}"),
            other => panic!("configuration {other:?}"),
        }
    }
    let table = r.panels[0]
        .table
        .as_ref()
        .expect("rates and lines by configuration");
    assert_eq!(table.rows.len(), 2);
    assert_eq!(table.header.len(), 2 + 5);
}

/// The SI-CV experiments' two systems, by series name: the disk engine with PostgreSQL's
/// placement, and with co-located placement.
const SICV_SYSTEMS: [&str; 2] = ["SI", "SI-CV"];

/// Checks what every SI-CV reproduction must hold: both systems at each warehouse count of
/// the quick size, on the disk engine with the right placement, a counters panel with SI
/// and SI-CV side by side whose pages are counted, SI-CV's new versions dirtying fewer
/// pages per commit than SI's, and the notes on the virtual disk and direct I/O.
fn assert_sicv(r: &Reproduction) {
    assert_eq!(r.points.len(), 2 * 2, "systems x warehouses");
    for (chunk, w) in r.points.chunks(2).zip([1.0, 2.0]) {
        assert_eq!(series(chunk), SICV_SYSTEMS);
        assert!(
            chunk.iter().all(|p| p.x == Some(w)),
            "expected {w} warehouses"
        );
    }
    for point in &r.points {
        let design = &point.run.configuration.design;
        assert_eq!(
            design.ends_with("/co-located"),
            point.series == "SI-CV",
            "{}: {design}",
            point.series
        );
        let pages = verso_lab::disk_report::PagesPerCommit::of(&point.run)
            .unwrap_or_else(|| panic!("{}: no page counters", point.series));
        assert!(pages.dirtied > 0.0 && pages.written_per_new_order.is_some());
    }
    let counters = r
        .panels
        .iter()
        .find(|p| p.title.starts_with("Device-independent counters"))
        .expect("the counters panel");
    let table = counters.table.as_ref().expect("the counters' table");
    for system in SICV_SYSTEMS {
        assert!(
            table
                .rows
                .iter()
                .any(|row| row[0] == format!("{system}, all runs")),
            "{system} pooled"
        );
    }
    // Pooled over the runs: SI-CV's transactions place their versions on pages of their
    // own, so they dirty fewer pages by new versions per commit; both write pages through
    // the small pool.
    let pooled = |system: &str, column: &str| -> f64 {
        let at = table.header.iter().position(|h| h == column).expect(column);
        let row = table
            .rows
            .iter()
            .find(|row| row[0] == format!("{system}, all runs"))
            .expect("pooled row");
        row[at].trim_end_matches('%').parse().expect("a number")
    };
    let (si, cv) = (
        pooled("SI", "new versions"),
        pooled("SI-CV", "new versions"),
    );
    assert!(
        si > 0.0 && cv > 0.0,
        "new-version pages: SI {si}, SI-CV {cv}"
    );
    assert!(cv < si, "new-version pages per commit: SI {si}, SI-CV {cv}");
    for system in SICV_SYSTEMS {
        assert!(pooled(system, "written") > 0.0, "{system} wrote no page");
        assert!(
            pooled(system, "stamps") > 0.0,
            "{system} stamped no old version"
        );
    }
    let notes = r.notes.join(" ");
    assert!(notes.contains("virtual disk may lack"), "{notes}");
    assert!(notes.contains("direct I/O"), "{notes}");
    assert!(r.our_setup.contains("direct I/O"), "{}", r.our_setup);
    assert!(r.our_setup.contains("virtual disk"), "{}", r.our_setup);
}

/// The paced runs' measure `f` per system, summed over the warehouses.
fn sicv_paced_total(
    r: &Reproduction,
    system: &str,
    f: fn(&verso_lab::metrics::PacedResult) -> f64,
) -> f64 {
    r.points
        .iter()
        .filter(|p| p.series == system)
        .map(|p| f(p.run.paced.as_ref().expect("a paced run")))
        .sum()
}

/// SI-CV Table 2: the most NOTPM of each system over the sweep, beside the paper's SSD and
/// HDD numbers (the HDD column not run).
#[test]
fn sicv_table2_compares_the_most_notpm_of_si_and_si_cv_beside_the_papers() {
    let (r, printed) = quick("sicv-table2");
    assert_sicv(&r);
    let table = r.panels[0].table.as_ref().expect("Table 2");
    let cells = table.rows.concat().join(" ");
    for number in ["2500", "3588", "210", "219", "+43.5%", "not run"] {
        assert!(cells.contains(number), "{number} missing: {cells}");
    }
    for system in SICV_SYSTEMS {
        assert!(sicv_paced_total(&r, system, |p| p.notpm) > 0.0, "{system}");
    }
    assert!(printed.contains("Pages per commit") || printed.contains("pages per commit"));
}

/// SI-CV Figures 3 and 4: NOTPM (beside what the terminals offered) and the mean response
/// time over the warehouses, both systems.
#[test]
fn sicv_fig3_and_fig4_sweep_the_warehouses_with_paced_terminals() {
    let (r, _) = quick("sicv-fig3");
    assert_sicv(&r);
    let lines: Vec<&str> = r.panels[0].figures[0]
        .lines
        .iter()
        .map(|l| l.label.as_str())
        .collect();
    assert_eq!(lines, ["SI", "SI-CV", "offered"]);
    for point in &r.points {
        let paced = point.run.paced.as_ref().expect("paced");
        assert_eq!(paced.terminals_per_warehouse, 20, "DBT2's terminals");
        assert_eq!(paced.terminals, 20 * point.x.unwrap() as u64);
        assert!(paced.offered_new_orders_per_minute > 0.0);
    }
    let (r, _) = quick("sicv-fig4");
    assert_sicv(&r);
    for point in &r.points {
        let new_order = &point.run.latency["NewOrder"];
        assert!(
            new_order.count > 0 && new_order.mean > 0.0,
            "{}",
            point.series
        );
    }
    assert_eq!(r.panels[0].figures[0].key, "fig4_response_time");
}

/// SI-CV Figure 5: committed Order-Status transactions per run.
#[test]
fn sicv_fig5_counts_order_status_transactions() {
    let (r, _) = quick("sicv-fig5");
    assert_sicv(&r);
    for system in SICV_SYSTEMS {
        assert!(
            sicv_paced_total(&r, system, |p| p.order_status_committed as f64) > 0.0,
            "{system} completed no Order-Status"
        );
    }
}

/// SI-CV's space claim: the same committed work on both placements, then the heaps' and
/// indexes' bytes.
#[test]
fn sicv_space_measures_heap_and_indexes_after_the_same_work() {
    let (r, _) = quick("sicv-space");
    assert_sicv(&r);
    for pair in r.points.chunks(2) {
        assert_eq!(
            pair[0].run.totals.oltp_commits, pair[1].run.totals.oltp_commits,
            "the same committed work"
        );
        for point in pair {
            assert!(point.run.paced.is_none(), "counted closed-loop runs");
            let last = point.run.samples.last().expect("a sample");
            assert!(last.heap_bytes > 0 && last.index_bytes > 0);
        }
    }
    let table = r.panels[0].table.as_ref().expect("space table");
    assert_eq!(table.rows.len(), 2);
}
