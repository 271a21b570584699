//! Transaction benchmarks of Verso, and the workload generators they use.
//!
//! `cargo run --release -p verso-bench -- core --bench all --runs 5` measures, on one
//! worker thread, committed transactions per second of a one-row point read, a one-row
//! update, and a YCSB transaction (16 operations, 90% reads, scrambled Zipf keys); see
//! [`core`]. `--tiny` runs everything on tiny data in about a second, and
//! `tests/tiny.rs` runs that mode and checks each benchmark did the work it names.

pub mod core;
pub mod pages;

/// `1234567.8` as `1,234,568` (shared with the lab's reports).
pub use verso_lab::format::thousands;
/// The random number generator and the key distributions live in the lab (`verso-lab`),
/// which every workload shares; re-exported here under their old paths.
pub use verso_lab::{rng, zipf};

use std::fmt::Write as _;

use crate::core::{Bench, BenchResult, Config};

/// The throughput each benchmark must reach (commits per second, one thread).
pub fn target(bench: Bench) -> f64 {
    match bench {
        Bench::PointRead => 1_000_000.0,
        Bench::Update => 500_000.0,
        Bench::Ycsb | Bench::YcsbPrefetch => 120_000.0,
    }
}

/// A Markdown table of the results: median and range of commits/s, aborts, load time.
///
/// Commits per second are of wall time. The worker's CPU share and its commits per
/// CPU-second are shown beside them: on a machine where other processes compete for the
/// cores the wall-time rate drops, the CPU-time rate does not.
pub fn report_table(results: &[BenchResult]) -> String {
    let mut out = String::new();
    out.push_str(
        "| benchmark | design | rows | load | median commits/s | min–max commits/s | aborts \
         | runs | CPU share | median commits/CPU-s | target |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in results {
        let (median, min, max) = r.summary();
        let (cpu_median, _, _) = r.cpu_summary();
        let t = target(r.bench);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} s | {} | {}–{} | {} | {} × {:.2} s | {:.0}% | {} | {} ({:.0}%) |",
            r.bench.name(),
            r.design,
            thousands(r.rows as f64),
            r.load_seconds,
            thousands(median),
            thousands(min),
            thousands(max),
            r.aborts(),
            r.runs.len(),
            r.runs.first().map_or(0.0, |run| run.seconds),
            100.0 * r.cpu_share(),
            thousands(cpu_median),
            thousands(t),
            100.0 * median / t,
        );
    }
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_f64(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}

/// The results as a JSON array (one object per benchmark).
pub fn report_json(results: &[BenchResult]) -> String {
    let mut out = String::from("[\n");
    for (i, r) in results.iter().enumerate() {
        let (median, min, max) = r.summary();
        let runs: Vec<String> = r
            .runs
            .iter()
            .map(|run| {
                format!(
                    "{{\"commits\": {}, \"aborts\": {}, \"seconds\": {}, \"cpu_seconds\": {}, \
                     \"commits_per_second\": {}, \"commits_per_cpu_second\": {}}}",
                    run.commits,
                    run.aborts,
                    json_f64(run.seconds),
                    json_f64(run.cpu_seconds),
                    json_f64(run.commits_per_second()),
                    json_f64(run.commits_per_cpu_second())
                )
            })
            .collect();
        let c = &r.checks;
        let _ = writeln!(
            out,
            "  {{\"bench\": {}, \"design\": {}, \"rows\": {}, \"load_seconds\": {}, \
             \"median_commits_per_second\": {}, \"min_commits_per_second\": {}, \
             \"max_commits_per_second\": {}, \"median_commits_per_cpu_second\": {}, \
             \"cpu_share\": {}, \"aborts\": {}, \"target_commits_per_second\": {}, \
             \"warmup\": {{\"commits\": {}, \"seconds\": {}}}, \"runs\": [{}], \
             \"checks\": {{\"reads\": {}, \"reads_found\": {}, \"reads_wrong_row\": {}, \
             \"updates\": {}, \"updates_applied\": {}, \"keys_drawn\": {}, \
             \"keys_out_of_range\": {}, \"max_key\": {}, \"distinct_keys_in_sample\": {}, \
             \"ops_per_commit\": {}, \"last_update_visible\": {}}}}}{}",
            json_string(r.bench.name()),
            json_string(&r.design),
            r.rows,
            json_f64(r.load_seconds),
            json_f64(median),
            json_f64(min),
            json_f64(max),
            json_f64(r.cpu_summary().0),
            json_f64(r.cpu_share()),
            r.aborts(),
            json_f64(target(r.bench)),
            r.warmup.commits,
            json_f64(r.warmup.seconds),
            runs.join(", "),
            c.reads,
            c.reads_found,
            c.reads_wrong_row,
            c.updates,
            c.updates_applied,
            c.keys_drawn,
            c.keys_out_of_range,
            c.max_key,
            c.distinct_keys_in_sample,
            json_f64(c.ops_per_commit),
            c.last_update_visible,
            if i + 1 < results.len() { "," } else { "" },
        );
    }
    out.push_str("]\n");
    out
}

/// Problems in a result that mean the benchmark did not run the work it names; empty
/// when it did.
pub fn validate(result: &BenchResult, config: &Config) -> Vec<String> {
    let c = &result.checks;
    let mut problems = Vec::new();
    let name = result.bench.name();
    let commits = result.warmup.commits + result.commits();
    if result.commits() == 0 {
        problems.push(format!(
            "{name}: no transaction committed in the measured runs"
        ));
    }
    if c.keys_drawn == 0 || c.keys_out_of_range != 0 || c.max_key >= result.rows {
        problems.push(format!(
            "{name}: {} keys drawn, {} out of range (max {} for {} rows)",
            c.keys_drawn, c.keys_out_of_range, c.max_key, result.rows
        ));
    }
    if c.reads_found != c.reads || c.reads_wrong_row != 0 {
        problems.push(format!(
            "{name}: {} reads, {} found their row, {} found another row",
            c.reads, c.reads_found, c.reads_wrong_row
        ));
    }
    if c.updates_applied != c.updates {
        problems.push(format!(
            "{name}: {} updates, {} returned Ok(true)",
            c.updates, c.updates_applied
        ));
    }
    if !c.last_update_visible {
        problems.push(format!("{name}: the last update is not visible afterwards"));
    }
    match result.bench {
        Bench::PointRead => {
            if c.reads != commits || c.updates != 0 || c.values_touched != 4 * c.reads {
                problems.push(format!(
                    "point-read: {commits} commits but {} reads, {} updates",
                    c.reads, c.updates
                ));
            }
        }
        Bench::Update => {
            if c.updates != commits || c.reads != 0 {
                problems.push(format!(
                    "update: {commits} commits but {} updates, {} reads",
                    c.updates, c.reads
                ));
            }
        }
        Bench::Ycsb | Bench::YcsbPrefetch => {
            let ops = config.ycsb_ops.min(result.rows as usize) as u64;
            if c.reads + c.updates != ops * commits {
                problems.push(format!(
                    "ycsb: {commits} commits but {} operations (expected {ops} each)",
                    c.reads + c.updates
                ));
            }
            if c.values_touched != c.reads * (1 + core::YCSB_FIELDS as u64) {
                problems.push(format!(
                    "ycsb: reads touched {} values, expected {} per read",
                    c.values_touched,
                    1 + core::YCSB_FIELDS
                ));
            }
            // The read share within a generous band (tiny runs draw a few thousand
            // operations).
            let total = (c.reads + c.updates).max(1) as f64;
            let read_share = c.reads as f64 / total;
            if (read_share - config.ycsb_read_ratio).abs() > 0.07
                || (config.ycsb_read_ratio < 1.0 && c.updates == 0)
            {
                problems.push(format!(
                    "ycsb: read share {read_share:.3}, expected about {}",
                    config.ycsb_read_ratio
                ));
            }
        }
    }
    problems
}
