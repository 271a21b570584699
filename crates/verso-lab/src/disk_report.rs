//! What a run on the disk engine (`--disk`) reports beside the summary: the pages its
//! commits dirtied, by cause, and what reached the files, per commit over the run: the
//! device-independent counters SI-CV argues with (docs/lab.md, "Pages per commit").

use crate::metrics::{RunResult, Sample};
use crate::plot;
use crate::report::{fitted_tables, wrap, SUMMARY_WIDTH};

/// One run's page counters over its samples, per commit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PagesPerCommit {
    /// OLTP commits over the samples (any transaction type, read-only ones included).
    pub commits: f64,
    /// Pages dirtied (clean to dirty, any cause) per commit.
    pub dirtied: f64,
    /// Pages dirtied by new versions per commit.
    pub new_versions: f64,
    /// Pages dirtied by stamps on old versions per commit.
    pub old_version_stamps: f64,
    /// Pages dirtied by hint bits per commit.
    pub hint_bits: f64,
    /// Index pages dirtied per commit.
    pub index_changes: f64,
    /// Pages dirtied by other changes (pruning, vacuum, the commit log) per commit.
    pub other_changes: f64,
    /// Pages written to the files per commit.
    pub written: f64,
    /// The share of those writes that were sequential.
    pub sequential_share: f64,
    /// Pages written for aborted transactions over the samples (a count, not per commit).
    pub written_for_aborted_transactions: f64,
    /// Pages written per committed TPC-C New-Order transaction (the whole mix's writes
    /// over the New-Orders: SI-CV's and DBT2's unit, as NOTPM); `None` without New-Orders.
    pub written_per_new_order: Option<f64>,
}

impl PagesPerCommit {
    /// The run's counters, summed over its samples (each rate times its interval); `None`
    /// for a run without the disk engine's page counters (in memory, or a peer) or
    /// without a commit.
    pub fn of(run: &RunResult) -> Option<PagesPerCommit> {
        let total = |rate: fn(&Sample) -> f64| -> f64 {
            run.samples
                .iter()
                .map(|s| rate(s) * s.interval_seconds)
                .sum()
        };
        let dirtied = total(|s| s.disk_pages_dirtied_per_second);
        let commits = total(|s| s.oltp_commits_per_second);
        if dirtied <= 0.0 || commits <= 0.0 {
            return None;
        }
        let written = total(|s| s.disk_pages_written_per_second);
        let sequential = total(|s| s.disk_pages_written_per_second * s.disk_sequential_write_share);
        Some(PagesPerCommit {
            commits,
            dirtied: dirtied / commits,
            new_versions: total(|s| s.disk_pages_dirtied_by_new_versions_per_second) / commits,
            old_version_stamps: total(|s| s.disk_pages_dirtied_by_old_version_stamps_per_second)
                / commits,
            hint_bits: total(|s| s.disk_pages_dirtied_by_hint_bits_per_second) / commits,
            index_changes: total(|s| s.disk_pages_dirtied_by_index_changes_per_second) / commits,
            other_changes: total(|s| s.disk_pages_dirtied_by_other_changes_per_second) / commits,
            written: written / commits,
            sequential_share: if written > 0.0 {
                sequential / written
            } else {
                0.0
            },
            written_for_aborted_transactions: total(|s| {
                s.disk_pages_written_for_aborted_transactions_per_second
            }),
            written_per_new_order: {
                let new_orders: f64 = run
                    .samples
                    .iter()
                    .filter_map(|s| {
                        let rate = s.oltp_commits_by_kind_per_second.get(NEW_ORDER)?;
                        Some(rate * s.interval_seconds)
                    })
                    .sum();
                (new_orders > 0.0).then(|| written / new_orders)
            },
        })
    }
}

/// TPC-C's New-Order transaction type, as the workload names it.
const NEW_ORDER: &str = "NewOrder";

/// What the table's columns mean.
pub const NOTE: &str = "(pages per commit over the run, any transaction type: dirtied = \
    pages going from clean to dirty in the buffer pool, whatever changed them; by cause, a \
    page counts once per cause between two writes of it, so a page that took a new version \
    and an old version's stamp counts under both and the causes may sum to more than \
    dirtied; stamps = xmax/ctid of replaced or deleted versions; other = pruning, vacuum, \
    the commit log; written = pages written to the files, seq = the share of them written \
    right after the block before in the same file; for aborted = pages written, in all, \
    whose changes were all one aborted transaction's; written/NewOrder, for TPC-C = pages \
    written over the committed New-Orders, the whole mix's writes, as NOTPM counts)";

/// The disk runs' pages per commit: header and one row per run with the page counters;
/// `None` if no run has them.
pub fn cells(runs: &[RunResult]) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    let header = vec![
        "configuration",
        "dirtied",
        "new versions",
        "stamps",
        "hint bits",
        "index",
        "other",
        "written",
        "seq",
        "for aborted",
    ];
    let per = |x: f64| format!("{x:.2}");
    let measured: Vec<(&RunResult, PagesPerCommit)> = runs
        .iter()
        .filter_map(|run| Some((run, PagesPerCommit::of(run)?)))
        .collect();
    let new_orders = measured
        .iter()
        .any(|(_, p)| p.written_per_new_order.is_some());
    let mut header = header;
    if new_orders {
        header.push("written/NewOrder");
    }
    let rows: Vec<Vec<String>> = measured
        .into_iter()
        .map(|(run, p)| {
            let mut row = vec![
                plot::run_label(run),
                per(p.dirtied),
                per(p.new_versions),
                per(p.old_version_stamps),
                per(p.hint_bits),
                per(p.index_changes),
                per(p.other_changes),
                per(p.written),
                format!("{:.0}%", 100.0 * p.sequential_share),
                format!("{:.0}", p.written_for_aborted_transactions),
            ];
            if new_orders {
                row.push(p.written_per_new_order.map_or("-".to_owned(), per));
            }
            row
        })
        .collect();
    (!rows.is_empty()).then_some((header, rows))
}

/// [`cells`] as the terminal's text tables with the note; `None` if no run has them.
pub fn table(runs: &[RunResult]) -> Option<String> {
    let (header, rows) = cells(runs)?;
    let mut out = String::from("Pages per commit (disk engine)\n");
    out.push_str(&fitted_tables(&header, &rows, SUMMARY_WIDTH));
    out.push_str(&wrap(NOTE, SUMMARY_WIDTH));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(interval: f64, commits: f64, dirtied: f64, written: f64, share: f64) -> Sample {
        Sample {
            interval_seconds: interval,
            oltp_commits_per_second: commits,
            disk_pages_dirtied_per_second: dirtied,
            disk_pages_dirtied_by_new_versions_per_second: dirtied / 2.0,
            disk_pages_dirtied_by_old_version_stamps_per_second: dirtied / 4.0,
            disk_pages_written_per_second: written,
            disk_sequential_write_share: share,
            disk_pages_written_for_aborted_transactions_per_second: 1.0,
            ..Sample::default()
        }
    }

    fn run_of(samples: Vec<Sample>) -> RunResult {
        use crate::metrics::{Configuration, Summary};
        RunResult {
            configuration: Configuration {
                label: "disk".into(),
                garbage_collector: "steam".into(),
                background_gc_period_ms: None,
                epoch_advance_threshold: None,
                isolation: "snapshot".into(),
                design: String::new(),
                workload_parameters: String::new(),
                oltp_workers: 1,
                olap_workers: 0,
                hold_snapshot: false,
                hold_read_only: false,
                seed: 1,
                duration_seconds: Some(1.5),
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
            run_seconds: 1.5,
            consistent: true,
            totals: Default::default(),
            engine: Default::default(),
            summary: Summary::of(&samples, 1.0),
            durability: None,
            latency: Default::default(),
            fixed_rate: None,
            paced: None,
            samples,
        }
    }

    /// Totals weigh each sample's rates by its interval: a short sample counts less.
    #[test]
    fn pages_per_commit_sum_rates_over_intervals() {
        let run = run_of(vec![
            sample(1.0, 100.0, 400.0, 300.0, 0.5),
            sample(0.5, 100.0, 200.0, 100.0, 1.0),
        ]);
        let p = PagesPerCommit::of(&run).unwrap();
        assert_eq!(p.commits, 150.0);
        assert!((p.dirtied - 500.0 / 150.0).abs() < 1e-12);
        assert!((p.new_versions - 250.0 / 150.0).abs() < 1e-12);
        assert!((p.old_version_stamps - 125.0 / 150.0).abs() < 1e-12);
        assert!((p.written - 350.0 / 150.0).abs() < 1e-12);
        assert!((p.sequential_share - 200.0 / 350.0).abs() < 1e-12);
        assert!((p.written_for_aborted_transactions - 1.5).abs() < 1e-12);
        assert_eq!(p.written_per_new_order, None);
        let (header, rows) = cells(&[run]).unwrap();
        assert_eq!(header.len(), rows[0].len());
        assert_eq!(rows[0][1], "3.33");
        assert!(!header.contains(&"written/NewOrder"));
    }

    /// TPC-C's runs also get the pages written per committed New-Order (the whole mix's
    /// writes over the New-Orders); a run without New-Orders beside one shows "-".
    #[test]
    fn tpcc_runs_get_pages_written_per_new_order() {
        let mut first = sample(1.0, 100.0, 400.0, 300.0, 0.5);
        first
            .oltp_commits_by_kind_per_second
            .insert(NEW_ORDER.to_owned(), 40.0);
        let mut second = sample(0.5, 100.0, 200.0, 100.0, 1.0);
        second
            .oltp_commits_by_kind_per_second
            .insert(NEW_ORDER.to_owned(), 60.0);
        let tpcc = run_of(vec![first, second]);
        let p = PagesPerCommit::of(&tpcc).unwrap();
        assert!((p.written_per_new_order.unwrap() - 350.0 / 70.0).abs() < 1e-12);
        let other = run_of(vec![sample(1.0, 100.0, 400.0, 300.0, 0.5)]);
        let (header, rows) = cells(&[tpcc, other]).unwrap();
        assert_eq!(header.last(), Some(&"written/NewOrder"));
        assert_eq!(rows[0].last().unwrap(), "5.00");
        assert_eq!(rows[1].last().unwrap(), "-");
    }

    /// A run without the page counters (in memory, a peer) has no row.
    #[test]
    fn runs_without_page_counters_have_no_row() {
        let run = run_of(vec![sample(1.0, 100.0, 0.0, 0.0, 0.0)]);
        assert_eq!(PagesPerCommit::of(&run), None);
        assert!(cells(&[run]).is_none());
    }
}
