//! The sweep's verdicts on made-up runs: where the knee is, Table 2's maxima, and which way
//! Figure 3's and Figure 4's claims go.

use super::*;
use crate::metrics::{Configuration, LatencySummary, PacedResult, Summary};

/// A paced run of `notpm` New-Orders per minute of `offered`, every transaction answered in
/// `response_ms` on average.
fn run(notpm: f64, offered: f64, response_ms: f64) -> RunResult {
    RunResult {
        configuration: Configuration {
            label: "made up".into(),
            garbage_collector: "vac".into(),
            background_gc_period_ms: None,
            epoch_advance_threshold: None,
            isolation: "snapshot".into(),
            design: String::new(),
            workload_parameters: String::new(),
            oltp_workers: 2,
            olap_workers: 0,
            hold_snapshot: false,
            hold_read_only: false,
            seed: 1,
            duration_seconds: Some(30.0),
            system: "verso".into(),
            system_version: String::new(),
            system_isolation: String::new(),
            settings: String::new(),
            durability: String::new(),
            growth_measure: String::new(),
            persistent_memory_media: String::new(),
            transactions: None,
            sample_interval_seconds: 1.0,
        },
        load_seconds: 0.0,
        stopped_early: None,
        run_seconds: 30.0,
        consistent: true,
        totals: Default::default(),
        engine: Default::default(),
        summary: Summary::default(),
        durability: None,
        latency: [(
            "NewOrder".to_owned(),
            LatencySummary {
                count: 100,
                mean: response_ms * 1e3,
                ..LatencySummary::default()
            },
        )]
        .into(),
        fixed_rate: None,
        paced: Some(PacedResult {
            notpm,
            offered_new_orders_per_minute: offered,
            order_status_committed: (notpm / 10.0) as u64,
            ..PacedResult::default()
        }),
        samples: Vec::new(),
    }
}

/// Points of SI and SI-CV at 1, 2, 4 and 8 warehouses, 1,000 NOTPM offered per warehouse:
/// `(notpm, response ms)` for each.
fn sweep(si: [(f64, f64); 4], cv: [(f64, f64); 4]) -> Vec<Point> {
    let mut points = Vec::new();
    for (i, w) in [1.0, 2.0, 4.0, 8.0].into_iter().enumerate() {
        for (system, (notpm, ms)) in [(SI, si[i]), (SI_CV, cv[i])] {
            points.push(Point {
                series: system.name.to_owned(),
                x: Some(w),
                run: run(notpm, 1_000.0 * w, ms),
            });
        }
    }
    points
}

/// The paper's shape: equal below the knee (4 warehouses, where SI completes 70% of what
/// is offered), then SI flat and slow while SI-CV keeps rising at low response times.
fn papers_shape() -> Vec<Point> {
    sweep(
        [
            (1_000.0, 5.0),
            (1_950.0, 6.0),
            (2_800.0, 80.0),
            (2_800.0, 900.0),
        ],
        [
            (1_000.0, 5.0),
            (1_960.0, 6.0),
            (3_400.0, 20.0),
            (4_000.0, 100.0),
        ],
    )
}

#[test]
fn the_knee_is_where_si_first_completes_under_80_percent_of_the_offered_notpm() {
    let points = papers_shape();
    assert_eq!(warehouses(&points), [1.0, 2.0, 4.0, 8.0]);
    assert_eq!(knee(&points), Some(4.0));
    assert_eq!(below_knee(&points), Some(2.0));
    assert_eq!(
        max_notpm(&points, SI),
        (2_800.0, 4.0),
        "the first of equal maxima"
    );
    assert_eq!(max_notpm(&points, SI_CV), (4_000.0, 8.0));
    // SI keeping up everywhere: no knee, and the last point is below it.
    let all = [
        (1_000.0, 5.0),
        (2_000.0, 5.0),
        (4_000.0, 5.0),
        (8_000.0, 5.0),
    ];
    let keeping_up = sweep(all, all);
    assert_eq!(knee(&keeping_up), None);
    assert_eq!(below_knee(&keeping_up), Some(8.0));
}

#[test]
fn the_papers_shape_agrees_with_every_throughput_and_response_time_claim() {
    let points = papers_shape();
    for panel in [
        table2_panel(&points),
        fig3_panel(&points),
        fig4_panel(&points),
    ] {
        for v in &panel.verdicts {
            if v.paper.starts_with("HDD") {
                assert_eq!(v.agreement, Agreement::Inconclusive, "not run: {}", v.ours);
            } else {
                assert_eq!(v.agreement, Agreement::Agrees, "{}: {}", v.paper, v.ours);
            }
        }
    }
    let table = table2_panel(&points).table.expect("Table 2");
    assert_eq!(table.rows[2][1], "2,800 (4)");
    assert_eq!(table.rows[2][2], "4,000 (8)");
    assert_eq!(table.rows[2][3], "+42.9%");
}

#[test]
fn si_cv_reaching_the_knee_first_differs_from_the_paper() {
    // SI-CV slower from 4 warehouses on, as measured on the virtual disk.
    let points = sweep(
        [
            (1_000.0, 5.0),
            (1_950.0, 6.0),
            (3_000.0, 40.0),
            (2_700.0, 450.0),
        ],
        [
            (1_000.0, 5.0),
            (1_950.0, 6.0),
            (2_400.0, 100.0),
            (2_000.0, 600.0),
        ],
    );
    let table2 = table2_panel(&points);
    assert_eq!(table2.verdicts[0].agreement, Agreement::Differs);
    let fig3 = fig3_panel(&points);
    assert_eq!(fig3.verdicts[0].agreement, Agreement::Agrees, "equal at 2");
    assert_eq!(
        fig3.verdicts[2].agreement,
        Agreement::Differs,
        "SI ahead at 8"
    );
    let fig4 = fig4_panel(&points);
    assert_eq!(
        fig4.verdicts[2].agreement,
        Agreement::Differs,
        "SI-CV slower at 8"
    );
    let fig5 = fig5_panel(&points);
    assert_eq!(
        fig5.verdicts[0].agreement,
        Agreement::Differs,
        "fewer Order-Status"
    );
}
