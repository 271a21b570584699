//! What a paced TPC-C run (`verso tpcc --terminals-per-warehouse`) reports beside the
//! summary: NOTPM, the load offered and completed, and response times by transaction
//! type, in the terminal and in the HTML report (docs/lab.md, "Paced TPC-C").

use crate::format::{compact, thousands};
use crate::metrics::{LatencySummary, RunResult};
use crate::plot;
use crate::report::{fitted_tables, wrap, SUMMARY_WIDTH};

/// The transaction types in the order TPC-C lists them, with the short names the tables
/// use.
const TYPES: [(&str, &str); 5] = [
    ("NewOrder", "New-Order"),
    ("Payment", "Payment"),
    ("OrderStatus", "Order-Status"),
    ("Delivery", "Delivery"),
    ("StockLevel", "Stock-Level"),
];

/// Milliseconds from microseconds, with two decimals below 10 ms.
fn ms(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.0}", us / 1e3)
    } else {
        format!("{:.2}", us / 1e3)
    }
}

/// `mean / p50 / p90 / p99` of one type's response times, in milliseconds ("-" if none
/// committed). SI-CV's figures plot the mean.
fn percentiles(latency: Option<&LatencySummary>) -> String {
    match latency {
        Some(l) if l.count > 0 => format!(
            "{} / {} / {} / {}",
            ms(l.mean),
            ms(l.p50),
            ms(l.p90),
            ms(l.p99)
        ),
        _ => "-".to_owned(),
    }
}

/// The paced runs' load table: header and one row per paced run; `None` if none was
/// paced.
pub fn load_cells(runs: &[RunResult]) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    let header = vec![
        "configuration",
        "terminals",
        "offered tx/min",
        "completed tx/min",
        "NOTPM",
        "offered NOTPM",
        "Order-Status",
        "waiting at end",
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .filter_map(|run| {
            let p = run.paced.as_ref()?;
            Some(vec![
                plot::run_label(run),
                format!(
                    "{} x {}",
                    p.terminals / u64::from(p.terminals_per_warehouse.max(1)),
                    p.terminals_per_warehouse
                ),
                thousands(p.offered_per_minute),
                thousands(p.completed_per_minute),
                thousands(p.notpm),
                thousands(p.offered_new_orders_per_minute),
                thousands(p.order_status_committed as f64),
                compact(p.waiting_at_end as f64),
            ])
        })
        .collect();
    (!rows.is_empty()).then_some((header, rows))
}

/// The paced runs' response times: header and one row per paced run, mean / p50 / p90 /
/// p99 in milliseconds for each type; `None` if none was paced.
pub fn response_time_cells(runs: &[RunResult]) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    let mut header = vec!["response ms mean/p50/p90/p99"];
    header.extend(TYPES.iter().map(|(_, shown)| *shown));
    let rows: Vec<Vec<String>> = runs
        .iter()
        .filter(|run| run.paced.is_some())
        .map(|run| {
            std::iter::once(plot::run_label(run))
                .chain(
                    TYPES
                        .iter()
                        .map(|(kind, _)| percentiles(run.latency.get(*kind))),
                )
                .collect()
        })
        .collect();
    (!rows.is_empty()).then_some((header, rows))
}

/// What the paced tables' columns mean.
pub const NOTE: &str = "Paced TPC-C: terminals (warehouses x per warehouse) key, submit and \
    think with TPC-C's times divided by the pacing; the workers are the connections. offered \
    tx/min: what the terminals would submit with instant responses; completed tx/min: \
    committed, or rolled back as New-Order's 1% must be; NOTPM: committed New-Orders per \
    minute; Order-Status: committed in the run; waiting at end: submitted, no connection yet. \
    Response time: from submission (end of keying) to completion, queueing for a connection \
    included.";

/// The paced runs' tables for the terminal, with what they mean; `None` if no run was
/// paced.
pub fn paced_tables(runs: &[RunResult]) -> Option<String> {
    let (header, rows) = load_cells(runs)?;
    let mut out = fitted_tables(&header, &rows, SUMMARY_WIDTH);
    if let Some((header, rows)) = response_time_cells(runs) {
        out.push('\n');
        out.push_str(&fitted_tables(&header, &rows, SUMMARY_WIDTH));
    }
    out.push_str(&wrap(NOTE, SUMMARY_WIDTH));
    Some(out)
}
