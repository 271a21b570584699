//! What a run measures: one [`Sample`] per sampling interval (a second by default), and a
//! [`RunResult`] per configuration with totals and a [`Summary`] of medians and maxima.
//!
//! These types are what the JSON output holds; `docs/lab.md` documents every key. Rates
//! are per second of the sample's own interval, so a short last interval is not inflated.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Version of the JSON layout; bumped when a key changes meaning or disappears.
pub const FORMAT_VERSION: u32 = 1;

/// One point of the time series: what happened during one sampling interval, and the
/// gauges at its end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds from the start of the run to the end of this interval.
    pub t_seconds: f64,
    /// Length of the interval in seconds (the sampling interval, except maybe the last).
    pub interval_seconds: f64,
    /// OLTP transactions committed per second.
    pub oltp_commits_per_second: f64,
    /// The same, by transaction type (the workload's names).
    pub oltp_commits_by_kind_per_second: BTreeMap<String, f64>,
    /// Operations (rows read or written, docs/lab.md "Operations") of the OLTP
    /// transactions that committed, per second.
    #[serde(default)]
    pub oltp_operations_per_second: f64,
    /// OLTP attempts rolled back per second, all reasons.
    pub oltp_aborts_per_second: f64,
    /// The same, by reason (`write_conflict`, `serialization`, `lock_conflict`, `by_workload`).
    pub aborts_by_reason_per_second: BTreeMap<String, f64>,
    /// Analytical queries completed per second.
    pub olap_queries_per_second: f64,
    /// Base-table tuples those queries read, per second.
    pub olap_scanned_tuples_per_second: f64,
    /// Version records alive at the end of the interval (`Stats::live_versions`).
    pub live_versions: u64,
    /// Bytes of those version records (`Stats::live_version_bytes`).
    pub live_version_bytes: u64,
    /// Rows the tables hold at the end of the interval: those counted by a scan before the
    /// run, plus the rows committed transactions inserted, minus those they deleted (the
    /// engine counts versions, not rows). 0 for a peer.
    #[serde(default)]
    pub live_rows: u64,
    /// The mean version chain over all rows: `1 + live_versions / live_rows` (the row's
    /// newest version plus the old versions stored for it, whether or not any reader
    /// still needs them). 0 when `live_rows` is 0 (a peer).
    #[serde(default)]
    pub chain_length_mean: f64,
    /// Resident memory of the whole process at the end of the interval (0 if unknown).
    pub rss_bytes: u64,
    /// The part of it not backed by a file or shared memory (0 if unknown): the
    /// process's DRAM without the pages of the persistent-memory region's mapping
    /// (`crate::memory::anonymous_resident_bytes`); TB-Collect's Fig. 12 "DRAM".
    #[serde(default)]
    pub dram_bytes: u64,
    /// Mean number of version records a read walked during the interval.
    pub read_chain_mean: f64,
    /// Longest chain a read walked during the interval.
    pub read_chain_max: u64,
    /// Mean number of version records a writer left behind the row it wrote (after
    /// pruning, under Steam) during the interval; recorded under every collector.
    #[serde(default)]
    pub write_chain_mean: f64,
    /// Longest chain a writer left behind during the interval.
    #[serde(default)]
    pub write_chain_max: u64,
    /// Mean chain length the collector met (a writer before pruning, finalizing before
    /// cutting) during the interval.
    pub gc_chain_mean: f64,
    /// Longest chain the collector met during the interval.
    pub gc_chain_max: u64,
    /// Versions examined during the interval, by readers, writers and the collector
    /// (`verso::Stats::version_accesses`), per live row: TB-Collect's Fig. 14 "version
    /// accesses per tuple" is their sum over the samples up to a moment.
    #[serde(default)]
    pub version_accesses_per_tuple: f64,
    /// The collector's part of `version_accesses_per_tuple`.
    #[serde(default)]
    pub collector_accesses_per_tuple: f64,
    /// Milliseconds per second all threads spent collecting garbage (finalizing plus
    /// eager pruning): 1000 is one core's worth.
    pub gc_ms_per_second: f64,
    /// The eager-pruning part of `gc_ms_per_second`.
    pub prune_ms_per_second: f64,
    /// Version records created per second.
    pub versions_created_per_second: f64,
    /// Version records pruned eagerly (EPO) per second.
    pub versions_pruned_per_second: f64,
    /// Version records freed below the watermark per second.
    pub versions_reclaimed_per_second: f64,
    /// The system's own measure of growth at the end of the interval, in bytes
    /// ([`Configuration::growth_measure`] says what it is): Verso's resident memory,
    /// PostgreSQL's `pg_total_relation_size` of the workload's tables, SQLite's database and
    /// WAL files, DuckDB's `duckdb_memory()`.
    #[serde(default)]
    pub growth_bytes: u64,
    /// Bytes appended to the log per second (a database with `--path`; else 0).
    #[serde(default)]
    pub log_bytes_per_second: f64,
    /// Syncs of the log per second (each makes a group of commits durable).
    #[serde(default)]
    pub log_syncs_per_second: f64,
    /// Whether a checkpoint ran during the interval (running at its end, or completed in
    /// it).
    #[serde(default)]
    pub checkpoint_running: bool,
    /// Lines of the persistent-memory region persisted per second (a storage that keeps
    /// its versions there; else 0).
    #[serde(default)]
    pub pm_lines_per_second: f64,
    /// The media bytes those lines are, per second (lines × line size).
    #[serde(default)]
    pub pm_media_bytes_per_second: f64,
    /// Media bytes written per byte the engine stored in the region, in the interval (0
    /// without a region or without stores).
    #[serde(default)]
    pub pm_write_amplification: f64,
    /// Bytes of the persistent-memory region in blocks at the end of the interval (frames
    /// in use × frame size; 0 without a region): its space, TB-Collect's Fig. 12 "NVM".
    #[serde(default)]
    pub pm_bytes_in_use: u64,
    /// DRAM bytes of the region's tiles (version headers and bitmap mirrors, kept tiles
    /// included) at the end of the interval: TB-Collect's Fig. 12 "DRAM" beside the rows.
    #[serde(default)]
    pub pm_tile_bytes: u64,
    /// Blocks tb-collect freed in case 2 (TB §4.4: long snapshots older than the block) or
    /// while chains still reached their headers, since the database opened (at the end of
    /// the interval): each got chain consolidation, a kept tile or (TB-Collect-hash) a
    /// version index.
    #[serde(default)]
    pub pm_blocks_consolidated: u64,
    /// Entries TB-Collect-hash's version indexes got since the database opened (one per
    /// superseded version indexed: its small writes).
    #[serde(default)]
    pub pm_version_index_entries: u64,
    /// The versions the persistent-memory region holds per live row at the end of the
    /// interval (`PmStats::versions_held / live_rows`: every row's newest plus the old
    /// versions whose space is not reclaimed, linked or not): the chain a design would
    /// have if only its collector unlinked versions (TB Fig. 14). 0 without a region.
    #[serde(default)]
    pub pm_versions_held_per_row: f64,
    /// The disk engine's (`--disk`; else 0): pages read from its files per second (buffer
    /// pool misses).
    #[serde(default)]
    pub disk_pages_read_per_second: f64,
    /// Pages written to its files per second (write-back, eviction and checkpoints).
    #[serde(default)]
    pub disk_pages_written_per_second: f64,
    /// The share of those writes that were sequential (the block after the file's
    /// previous write: SI-CV's metric); 0 when nothing was written.
    #[serde(default)]
    pub disk_sequential_write_share: f64,
    /// Pages dirtied per second: pages going from clean to dirty in the buffer pool (each
    /// is written once before it can be dirtied again), whatever changed them.
    #[serde(default)]
    pub disk_pages_dirtied_per_second: f64,
    /// Pages dirtied by new versions (inserted rows, updates' new versions) per second:
    /// each page once per cause between two writes of it, so a page that takes a new
    /// version and a stamp counts here and under the stamps (SI-CV's counters by cause).
    #[serde(default)]
    pub disk_pages_dirtied_by_new_versions_per_second: f64,
    /// Pages dirtied by stamps on old versions (`xmax`/`ctid` of the replaced or deleted
    /// version) per second, counted as above.
    #[serde(default)]
    pub disk_pages_dirtied_by_old_version_stamps_per_second: f64,
    /// Pages dirtied by hint bits per second, counted as above.
    #[serde(default)]
    pub disk_pages_dirtied_by_hint_bits_per_second: f64,
    /// Index pages dirtied (B+-tree leaf and inner changes) per second, counted as above.
    #[serde(default)]
    pub disk_pages_dirtied_by_index_changes_per_second: f64,
    /// Pages dirtied by other changes (pruning, vacuum, the commit log) per second,
    /// counted as above.
    #[serde(default)]
    pub disk_pages_dirtied_by_other_changes_per_second: f64,
    /// Pages written per second whose changes since their previous write were all one
    /// transaction's that had aborted by then (heap pages; SI-CV: "if T_j aborts Block2 is
    /// not written").
    #[serde(default)]
    pub disk_pages_written_for_aborted_transactions_per_second: f64,
    /// Page requests the buffer pool served without a read, as a share of all in the
    /// interval; 0 when there were none.
    #[serde(default)]
    pub buffer_hit_ratio: f64,
    /// Bytes of the tables' heaps at the end of the interval (InnoDB's design: its
    /// clustered trees, which hold the rows).
    #[serde(default)]
    pub heap_bytes: u64,
    /// Bytes of the tables' indexes (primary and secondary) at the end of the interval.
    #[serde(default)]
    pub index_bytes: u64,
    /// InnoDB's design (`--disk-storage undo`): bytes of undo pages in use (not free) at
    /// the end of the interval: the space old versions take.
    #[serde(default)]
    pub undo_bytes: u64,
    /// InnoDB's design: committed undo logs waiting for purge (the history list length)
    /// at the end of the interval.
    #[serde(default)]
    pub undo_history_list_length: u64,
    /// Dead tuples counted since each table's last vacuum (PostgreSQL's `n_dead_tup`) at
    /// the end of the interval.
    #[serde(default)]
    pub dead_tuples: u64,
    /// Tuples removed by pruning on access and by vacuum per second.
    #[serde(default)]
    pub tuples_pruned_per_second: f64,
    /// The part of them only eager pruning removed (seen by no active snapshot, newer
    /// than the oldest).
    #[serde(default)]
    pub tuples_pruned_eagerly_per_second: f64,
    /// Vacuums autovacuum ran since the database opened (at the end of the interval).
    #[serde(default)]
    pub vacuums: u64,
}

impl Sample {
    /// Whether the interval is long enough for its rates to count in medians and plots:
    /// at least half the nominal sampling interval (the last, cut-off interval of a run
    /// is usually shorter and its rates noisy).
    pub fn is_full(&self, nominal_interval_seconds: f64) -> bool {
        self.interval_seconds >= 0.5 * nominal_interval_seconds
    }
}

/// How one configuration was run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Configuration {
    /// The configuration's name in reports (the collector's name, e.g. `steam`).
    pub label: String,
    /// The garbage collector (`steam`, `watermark`, `hana`, ...: `GarbageCollector::name`).
    pub garbage_collector: String,
    /// The background collectors' period in milliseconds (`Options::background_gc_period`),
    /// if the run set it; `None`: the engine's default, or not a background collector.
    #[serde(default)]
    pub background_gc_period_ms: Option<f64>,
    /// The epoch collectors' commits between epoch advances
    /// (`Options::epoch_advance_threshold`), if the run set it; `None`: the collector's
    /// default, or not an epoch collector.
    #[serde(default)]
    pub epoch_advance_threshold: Option<u64>,
    /// `snapshot` or `serializable`.
    pub isolation: String,
    /// The engine's own description: `storage/collector/protocol`.
    pub design: String,
    /// The workload's parameters in words (`Workload::describe`): what a point of a
    /// sweep varied.
    #[serde(default)]
    pub workload_parameters: String,
    /// OLTP worker threads.
    pub oltp_workers: usize,
    /// OLAP worker threads.
    pub olap_workers: usize,
    /// Whether an idle transaction held its snapshot from the start to the end of the run.
    pub hold_snapshot: bool,
    /// Whether that transaction was declared read-only.
    #[serde(default)]
    pub hold_read_only: bool,
    /// The seed of the data and of every worker's random stream.
    pub seed: u64,
    /// The run's planned length in seconds, if it was timed.
    pub duration_seconds: Option<f64>,
    /// The system driven: `verso`, or a peer: `postgres`, `duckdb`, `sqlite`.
    #[serde(default = "verso_system")]
    pub system: String,
    /// The system's name and version, e.g. `PostgreSQL 15.14`, `SQLite 3.50.4`.
    #[serde(default)]
    pub system_version: String,
    /// The isolation level the system ran the OLTP transactions at, in its own words
    /// (`REPEATABLE READ` for PostgreSQL at `snapshot`, ...).
    #[serde(default)]
    pub system_isolation: String,
    /// The settings that matter for the numbers, in words (a peer's memory, commit and
    /// vacuum settings; Verso's are in `design`).
    #[serde(default)]
    pub settings: String,
    /// What survives a crash, in words: Verso today keeps everything in memory, a peer may
    /// write a log (and may or may not wait for it at commit).
    #[serde(default)]
    pub durability: String,
    /// What [`Sample::growth_bytes`] measures for this system.
    #[serde(default)]
    pub growth_measure: String,
    /// The emulated persistent memory's media (line size, delay per line persisted) of a
    /// storage that keeps its versions in a region; empty otherwise.
    #[serde(default)]
    pub persistent_memory_media: String,
    /// The committed OLTP transactions planned, if the run was counted.
    pub transactions: Option<u64>,
    /// The sampling interval in seconds.
    pub sample_interval_seconds: f64,
}

fn verso_system() -> String {
    "verso".to_owned()
}

/// Counts over the whole run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// OLTP transactions committed.
    pub oltp_commits: u64,
    /// By transaction type.
    pub oltp_commits_by_kind: BTreeMap<String, u64>,
    /// Operations of the committed OLTP transactions (rows read or written).
    #[serde(default)]
    pub oltp_operations: u64,
    /// OLTP attempts rolled back.
    pub oltp_aborts: u64,
    /// By transaction type (the workload's names).
    #[serde(default)]
    pub oltp_aborts_by_kind: BTreeMap<String, u64>,
    /// By reason.
    pub aborts_by_reason: BTreeMap<String, u64>,
    /// Analytical queries completed.
    pub olap_queries: u64,
    /// By query name.
    pub olap_queries_by_name: BTreeMap<String, u64>,
    /// Base-table tuples the queries read.
    pub olap_scanned_tuples: u64,
}

/// The engine's own counters at the end of the run, minus those at its start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineTotals {
    /// Version records created during the run.
    pub versions_created: u64,
    /// Version records pruned eagerly (EPO).
    pub versions_pruned_eagerly: u64,
    /// Version records freed below the watermark.
    pub versions_reclaimed: u64,
    /// Version records alive at the end of the run, before the held snapshot (if any)
    /// ended.
    pub live_versions_at_end: u64,
    /// Seconds all threads spent finalizing (unlinking below the watermark).
    pub gc_seconds: f64,
    /// Seconds all threads spent pruning eagerly.
    pub prune_seconds: f64,
    /// Mean version records walked per read during the run.
    pub read_chain_mean: f64,
    /// Mean version records a writer left behind the row it wrote during the run.
    #[serde(default)]
    pub write_chain_mean: f64,
    /// Mean chain length the collector met during the run.
    pub gc_chain_mean: f64,
    /// Reads recorded in the read chain histogram during the run (every read of a row,
    /// by OLTP transactions and queries alike).
    #[serde(default)]
    pub reads: u64,
    /// Version records those reads walked in all (the histogram's total).
    #[serde(default)]
    pub read_versions_traversed: u64,
    /// Chains the collector met during the run (the GC histogram's count).
    #[serde(default)]
    pub gc_chain_visits: u64,
    /// Version records on those chains in all (the GC histogram's total).
    #[serde(default)]
    pub gc_versions_traversed: u64,
    /// Reads by range scans (primary or secondary): the part of `reads` the paper's
    /// "table scans" row counts.
    #[serde(default)]
    pub scan_reads: u64,
    /// Version records those scan reads walked in all.
    #[serde(default)]
    pub scan_versions_traversed: u64,
    /// Mean version records walked per scan read.
    #[serde(default)]
    pub scan_chain_mean: f64,
    /// Longest chain a scan read walked.
    #[serde(default)]
    pub scan_chain_max: u64,
    /// Seconds readers spent reconstructing older versions from chains.
    #[serde(default)]
    pub version_retrieval_seconds: f64,
    /// Times a thread rebuilt its sorted list of active snapshots.
    #[serde(default)]
    pub active_list_refreshes: u64,
    /// Seconds spent rebuilding those lists (inside `prune_seconds`).
    #[serde(default)]
    pub active_list_seconds: f64,
    /// Version records a background collector pruned from chains ('hana').
    #[serde(default)]
    pub versions_pruned_in_background: u64,
    /// Seconds a background collector's thread worked ('hana', 'hekaton'; also counted in
    /// `gc_seconds` and `prune_seconds`).
    #[serde(default)]
    pub background_gc_seconds: f64,
    /// Rounds a background collector's thread ran.
    #[serde(default)]
    pub background_gc_rounds: u64,
    /// Committed transactions a background collector handed to the workers to finalize
    /// ('hekaton').
    #[serde(default)]
    pub transactions_handed_out: u64,
    /// Times the global epoch advanced ('deuteronomy', 'ermia', 'txn').
    #[serde(default)]
    pub epoch_advances: u64,
    /// Passes the tuple-level collectors' thread made over the tables ('vac', 'coop').
    #[serde(default)]
    pub vacuum_passes: u64,
    /// Blocks those passes examined.
    #[serde(default)]
    pub blocks_vacuumed: u64,
    /// Blocks 'vac''s passes skipped as clean (the dirty-block bitmap).
    #[serde(default)]
    pub blocks_skipped_clean: u64,
    /// Rows readers and writers recorded for cleaning ('coop').
    #[serde(default)]
    pub rows_recorded_for_cleaning: u64,
    /// Recorded rows the cleaner cleaned ('coop').
    #[serde(default)]
    pub rows_cleaned_cooperatively: u64,
}

/// Medians over the run's full samples (see [`Sample::is_full`]) and maxima over all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Median OLTP commits per second.
    pub oltp_commits_per_second: f64,
    /// Mean OLTP commits per second over the last ten seconds of full samples (or fewer,
    /// if the run was shorter): the steady state a long reader has settled into.
    pub tail_oltp_commits_per_second: f64,
    /// Mean OLTP commits per second over the full samples.
    #[serde(default)]
    pub commits_per_second_mean: f64,
    /// Their standard deviation (the sample's, over n - 1): how steady the throughput was
    /// from one sampling interval to the next (0 with fewer than two full samples).
    #[serde(default)]
    pub commits_per_second_stddev: f64,
    /// Median operations per second of the committed OLTP transactions.
    #[serde(default)]
    pub oltp_operations_per_second: f64,
    /// Median OLTP aborts per second.
    pub oltp_aborts_per_second: f64,
    /// Median analytical queries per second.
    pub olap_queries_per_second: f64,
    /// Median scanned tuples per second.
    pub olap_scanned_tuples_per_second: f64,
    /// Median live version records.
    pub live_versions: f64,
    /// The most live version records at any sample.
    pub max_live_versions: u64,
    /// Median of [`Sample::chain_length_mean`].
    #[serde(default)]
    pub chain_length_mean: f64,
    /// [`Sample::chain_length_mean`] at the last sample.
    #[serde(default)]
    pub last_chain_length_mean: f64,
    /// The most live version bytes at any sample.
    pub max_live_version_bytes: u64,
    /// The most resident memory at any sample.
    pub max_rss_bytes: u64,
    /// Median of the per-interval mean read chain length.
    pub read_chain_mean: f64,
    /// Longest chain any read walked.
    pub max_read_chain: u64,
    /// Median of the per-interval mean chain length writers left behind.
    #[serde(default)]
    pub write_chain_mean: f64,
    /// Longest chain any writer left behind.
    #[serde(default)]
    pub max_write_chain: u64,
    /// Median of the per-interval mean GC chain length.
    pub gc_chain_mean: f64,
    /// Longest chain the collector met.
    pub max_gc_chain: u64,
    /// Median GC milliseconds per second.
    pub gc_ms_per_second: f64,
    /// Mean OLTP commits per second over the first ten seconds of full samples (or fewer,
    /// if the run was shorter): where a run started, before a held snapshot could cost it
    /// anything.
    #[serde(default)]
    pub head_oltp_commits_per_second: f64,
    /// [`Sample::growth_bytes`] at the first sample.
    #[serde(default)]
    pub first_growth_bytes: u64,
    /// [`Sample::growth_bytes`] at the last sample.
    #[serde(default)]
    pub last_growth_bytes: u64,
}

/// One configuration's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// How it was run.
    pub configuration: Configuration,
    /// Seconds the load took.
    pub load_seconds: f64,
    /// Seconds the measured run took (from the workers' start to their end).
    pub run_seconds: f64,
    /// Why the run ended before its planned end, if it did: `--memory-limit` stops a run
    /// whose resident memory passes the limit.
    #[serde(default)]
    pub stopped_early: Option<String>,
    /// Whether the workload's consistency checks passed after load and after the run (a
    /// failure stops the lab with an error, so a written result always says `true`).
    pub consistent: bool,
    /// Counts over the run.
    pub totals: Totals,
    /// The engine's counters over the run.
    pub engine: EngineTotals,
    /// Medians and maxima.
    pub summary: Summary,
    /// What commits cost in acknowledgements, the log and checkpoints (Verso's runs;
    /// `None` for a peer's).
    #[serde(default)]
    pub durability: Option<DurabilityResult>,
    /// Latency of the committed OLTP transactions by transaction type, in microseconds,
    /// from when each was due to its commit (docs/lab.md, "Latency").
    #[serde(default)]
    pub latency: BTreeMap<String, LatencySummary>,
    /// With `--target-rate`: the rate asked for and the rate run (`None` in closed loop).
    #[serde(default)]
    pub fixed_rate: Option<FixedRateResult>,
    /// With `--terminals-per-warehouse` (paced TPC-C): what the terminals offered, what
    /// was completed, and NOTPM (`None` in closed loop). The response times are in
    /// `latency`, which a paced run measures from each transaction's submission.
    #[serde(default)]
    pub paced: Option<PacedResult>,
    /// The time series.
    pub samples: Vec<Sample>,
}

/// The latency distribution of one transaction type, in microseconds (an HDR histogram of
/// 3 significant digits: each value within 0.1%).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Committed transactions measured.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile (TPC-C's response-time constraints are on it, clause 5.2.5.3).
    #[serde(default)]
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
    /// Standard deviation.
    pub stddev: f64,
}

impl LatencySummary {
    /// The summary of a histogram of microseconds.
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> LatencySummary {
        LatencySummary {
            count: histogram.len(),
            mean: histogram.mean(),
            p50: histogram.value_at_quantile(0.5) as f64,
            p90: histogram.value_at_quantile(0.9) as f64,
            p95: histogram.value_at_quantile(0.95) as f64,
            p99: histogram.value_at_quantile(0.99) as f64,
            max: histogram.max() as f64,
            stddev: histogram.stdev(),
        }
    }
}

/// What a fixed-rate run (`--target-rate`) asked for and ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FixedRateResult {
    /// Committed transactions per second asked for, over all OLTP workers.
    pub target_per_second: f64,
    /// Committed transactions per second run: commits over the run's seconds.
    pub achieved_per_second: f64,
    /// Schedule the workers gave up, summed over them, in seconds: a worker more than its
    /// catch-up window behind drops the slots it missed instead of bursting to make them
    /// up (docs/lab.md, "Fixed rate").
    pub behind_schedule_seconds: f64,
}

/// What the terminals of a paced TPC-C run (`--terminals-per-warehouse`, DBT2's model)
/// offered and what was done (docs/lab.md, "Paced TPC-C").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PacedResult {
    /// Terminals per warehouse.
    pub terminals_per_warehouse: u32,
    /// Terminals in all.
    pub terminals: u64,
    /// What keying and think times were divided by (`--pacing`).
    pub pacing: f64,
    /// Transactions per minute the terminals would submit if every response were
    /// instant: terminals x 60 / the mix's mean keying plus think time. A terminal waits
    /// for its response before it thinks, so slow responses lower what it submits.
    pub offered_per_minute: f64,
    /// The New-Orders among them (45% of the mix): the NOTPM the terminals can ask for.
    pub offered_new_orders_per_minute: f64,
    /// Transactions whose keying time ended during the run (submitted to the pool).
    pub submitted: u64,
    /// Of those, transactions completed: committed, or rolled back as New-Order's 1% with
    /// an unused item must be (a conflict's abort is retried, not completed).
    pub completed: u64,
    /// Completed transactions per minute of the run.
    pub completed_per_minute: f64,
    /// Submitted transactions still waiting for a free connection when the run ended
    /// (those being run then are the rest of submitted - completed).
    pub waiting_at_end: u64,
    /// New orders per minute: committed New-Orders over the run's minutes (TPC-C's
    /// throughput metric).
    pub notpm: f64,
    /// Committed Order-Status transactions (SI-CV's Fig. 5 counts them per run).
    pub order_status_committed: u64,
}

/// What a Verso run's commits cost: how long clients waited for acknowledgements, what
/// the log wrote and synced, what checkpoints took and pinned (`--path`, `--durability`,
/// `--clients`; docs/lab.md, "Durability").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DurabilityResult {
    /// `memory` (no `--path`), or the durability level: `sync`, `async`, `none`.
    pub level: String,
    /// The database's directory, kept after the run (`None` in memory).
    pub path: Option<String>,
    /// Logical clients served by the OLTP workers (each waits for its commit's
    /// acknowledgement before its next transaction).
    pub clients: usize,
    /// Commits acknowledged to clients during the run (the latencies' count).
    pub commits_acknowledged: u64,
    /// Commit latency as a client sees it, from asking to commit until acknowledged
    /// (durable as the level promises), in microseconds: median, 99th and 99.9th
    /// percentiles, maximum.
    pub commit_latency_p50_us: f64,
    /// See `commit_latency_p50_us`.
    pub commit_latency_p99_us: f64,
    /// See `commit_latency_p50_us`.
    pub commit_latency_p999_us: f64,
    /// See `commit_latency_p50_us`.
    pub commit_latency_max_us: f64,
    /// Log bytes appended per second of the run.
    pub log_bytes_per_second: f64,
    /// Log syncs per second of the run.
    pub log_syncs_per_second: f64,
    /// Commit records per sync (the group commit's mean group; 0 without syncs).
    pub commits_per_sync: f64,
    /// Mean milliseconds a sync took.
    pub mean_sync_ms: f64,
    /// Checkpoints completed during the run.
    pub checkpoints: u64,
    /// Their mean duration in seconds.
    pub checkpoint_mean_seconds: f64,
    /// OLTP commits per second, mean over the samples during which a checkpoint ran, and
    /// over the others (0 when there were none).
    pub commits_per_second_during_checkpoints: f64,
    /// See `commits_per_second_during_checkpoints`.
    pub commits_per_second_outside_checkpoints: f64,
    /// The most live version records above their level before a checkpoint began, over
    /// the samples while one ran: what checkpoints pinned (to the sampling interval's
    /// resolution).
    pub checkpoint_pinned_versions: u64,
    /// The same for live version bytes.
    pub checkpoint_pinned_version_bytes: u64,
}

impl DurabilityResult {
    /// Fills in what the samples say about checkpoints: throughput during and outside
    /// them, and what they pinned.
    pub fn add_checkpoint_samples(&mut self, samples: &[Sample]) {
        let mean = |values: &[f64]| {
            if values.is_empty() {
                0.0
            } else {
                values.iter().sum::<f64>() / values.len() as f64
            }
        };
        let (mut during, mut outside) = (Vec::new(), Vec::new());
        let (mut base_versions, mut base_bytes) = (None::<u64>, None::<u64>);
        for sample in samples {
            if sample.checkpoint_running {
                during.push(sample.oltp_commits_per_second);
                // A checkpoint already running at the first sample has no level before
                // it to compare with.
                if let (Some(versions), Some(bytes)) = (base_versions, base_bytes) {
                    self.checkpoint_pinned_versions = self
                        .checkpoint_pinned_versions
                        .max(sample.live_versions.saturating_sub(versions));
                    self.checkpoint_pinned_version_bytes = self
                        .checkpoint_pinned_version_bytes
                        .max(sample.live_version_bytes.saturating_sub(bytes));
                }
            } else {
                outside.push(sample.oltp_commits_per_second);
                base_versions = Some(sample.live_versions);
                base_bytes = Some(sample.live_version_bytes);
            }
        }
        self.commits_per_second_during_checkpoints = mean(&during);
        self.commits_per_second_outside_checkpoints = mean(&outside);
    }
}

/// Everything one invocation of the lab measured: what the JSON file holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabReport {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The workload's name (`ycsb`, `tpcb`, ...).
    pub workload: String,
    /// The workload's size and parameters in words.
    pub description: String,
    /// Seconds since the Unix epoch when the lab started.
    pub started_unix_seconds: u64,
    /// The command line.
    pub command_line: Vec<String>,
    /// One result per configuration, in the order they ran.
    pub runs: Vec<RunResult>,
    /// For several configurations, one line saying what differed.
    pub comparison: Option<String>,
    /// With a held snapshot: one line per held run saying what it kept and how it grew,
    /// then what to conclude and what is not compared (`report::held_snapshot_lines`).
    #[serde(default)]
    pub conclusions: Vec<String>,
}

/// The median of `values` (0 for none).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Seconds at the end of a run over which [`Summary::tail_oltp_commits_per_second`] is
/// taken.
pub const TAIL_SECONDS: f64 = 10.0;

impl Summary {
    /// The summary of a run's samples; `interval` is the nominal sampling interval.
    pub fn of(samples: &[Sample], interval_seconds: f64) -> Summary {
        let mut full: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.is_full(interval_seconds))
            .collect();
        // A run shorter than a sampling interval has no full sample; its short ones are
        // still rates over their own intervals, and better than a summary of zeros.
        if full.is_empty() {
            full = samples.iter().collect();
        }
        let med = |f: fn(&Sample) -> f64| median(full.iter().map(|s| f(s)));
        let max = |f: fn(&Sample) -> u64| samples.iter().map(f).max().unwrap_or(0);
        let end = full.last().map_or(0.0, |s| s.t_seconds);
        // The samples whose whole interval lies in the last TAIL_SECONDS.
        let tail: Vec<&&Sample> = full
            .iter()
            .filter(|s| s.t_seconds - s.interval_seconds >= end - TAIL_SECONDS - 1e-9)
            .collect();
        // The samples whose whole interval lies in the first TAIL_SECONDS.
        let head: Vec<&&Sample> = full
            .iter()
            .filter(|s| s.t_seconds <= TAIL_SECONDS + 1e-9)
            .collect();
        let rates: Vec<f64> = full.iter().map(|s| s.oltp_commits_per_second).collect();
        let (commits_per_second_mean, commits_per_second_stddev) = mean_and_stddev(&rates);
        Summary {
            oltp_commits_per_second: med(|s| s.oltp_commits_per_second),
            commits_per_second_mean,
            commits_per_second_stddev,
            oltp_operations_per_second: med(|s| s.oltp_operations_per_second),
            chain_length_mean: med(|s| s.chain_length_mean),
            last_chain_length_mean: samples.last().map_or(0.0, |s| s.chain_length_mean),
            tail_oltp_commits_per_second: mean_commit_rate(&tail),
            head_oltp_commits_per_second: mean_commit_rate(&head),
            first_growth_bytes: samples.first().map_or(0, |s| s.growth_bytes),
            last_growth_bytes: samples.last().map_or(0, |s| s.growth_bytes),
            oltp_aborts_per_second: med(|s| s.oltp_aborts_per_second),
            olap_queries_per_second: med(|s| s.olap_queries_per_second),
            olap_scanned_tuples_per_second: med(|s| s.olap_scanned_tuples_per_second),
            live_versions: med(|s| s.live_versions as f64),
            max_live_versions: max(|s| s.live_versions),
            max_live_version_bytes: max(|s| s.live_version_bytes),
            max_rss_bytes: max(|s| s.rss_bytes),
            read_chain_mean: med(|s| s.read_chain_mean),
            max_read_chain: max(|s| s.read_chain_max),
            write_chain_mean: med(|s| s.write_chain_mean),
            max_write_chain: max(|s| s.write_chain_max),
            gc_chain_mean: med(|s| s.gc_chain_mean),
            max_gc_chain: max(|s| s.gc_chain_max),
            gc_ms_per_second: med(|s| s.gc_ms_per_second),
        }
    }
}

/// Commits per second over the time `samples` cover (0 for none).
impl RunResult {
    /// Bytes the system's growth measure ([`Sample::growth_bytes`]) rose per OLTP commit
    /// over the run's last [`TAIL_SECONDS`]: from the last sample before that window (or
    /// its first sample) to the run's last sample, divided by the commits of the samples
    /// after the starting one. `None` when the system measured no growth or nothing
    /// committed in that window. What a held snapshot still costs per transaction once
    /// the run has settled: flat under a collector that prunes behind it, the size of
    /// every version created under one that cannot.
    pub fn tail_growth_bytes_per_commit(&self) -> Option<f64> {
        let last = self.samples.last()?;
        if last.growth_bytes == 0 {
            return None;
        }
        // The window is (end - TAIL_SECONDS, end]; the sample ending at its start opens it.
        let window_start = last.t_seconds - TAIL_SECONDS + 1e-9;
        // The sample whose end opens the window: the last one that ended before it, else
        // the first one (its own commits then fall before the starting point).
        let start = self
            .samples
            .iter()
            .rposition(|s| s.t_seconds <= window_start)
            .unwrap_or(0);
        let commits: f64 = self.samples[start + 1..]
            .iter()
            .map(|s| s.oltp_commits_per_second * s.interval_seconds)
            .sum();
        if commits < 1.0 {
            return None;
        }
        let grown = last.growth_bytes as f64 - self.samples[start].growth_bytes as f64;
        Some(grown / commits)
    }
}

/// The mean of `values` and their sample standard deviation (over n - 1; 0 for fewer than
/// two values).
pub fn mean_and_stddev(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let squares: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    (mean, (squares / (n - 1.0)).sqrt())
}

fn mean_commit_rate(samples: &[&&Sample]) -> f64 {
    let seconds: f64 = samples.iter().map(|s| s.interval_seconds).sum();
    let commits: f64 = samples
        .iter()
        .map(|s| s.oltp_commits_per_second * s.interval_seconds)
        .sum();
    if seconds > 0.0 {
        commits / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, interval: f64, commits: f64, live: u64) -> Sample {
        Sample {
            t_seconds: t,
            interval_seconds: interval,
            oltp_commits_per_second: commits,
            live_versions: live,
            ..Sample::default()
        }
    }

    /// `verso kv --tiny --transactions 1000` committed 1,000 transactions in less than a
    /// sampling interval and summarized them as 0 commits/s: medians skipped every sample
    /// as short.
    #[test]
    fn regression_a_run_shorter_than_a_sampling_interval_is_summarized_by_its_samples() {
        let samples = [sample(0.2, 0.2, 5_000.0, 7)];
        let summary = Summary::of(&samples, 1.0);
        assert_eq!(summary.oltp_commits_per_second, 5_000.0);
        assert_eq!(summary.tail_oltp_commits_per_second, 5_000.0);
        assert_eq!(summary.live_versions, 7.0);
        // With a full sample, the short last one still does not count.
        let samples = [sample(1.0, 1.0, 100.0, 1), sample(1.2, 0.2, 5_000.0, 1)];
        assert_eq!(Summary::of(&samples, 1.0).oltp_commits_per_second, 100.0);
    }

    #[test]
    fn the_summary_has_the_mean_and_standard_deviation_of_the_full_samples_rates() {
        let samples = vec![
            sample(1.0, 1.0, 100.0, 0),
            sample(2.0, 1.0, 200.0, 0),
            sample(3.0, 1.0, 300.0, 0),
            sample(4.0, 1.0, 400.0, 0),
            // Short: left out.
            sample(4.1, 0.1, 9_000.0, 0),
        ];
        let summary = Summary::of(&samples, 1.0);
        assert_eq!(summary.commits_per_second_mean, 250.0);
        // Sample standard deviation of 100, 200, 300, 400: sqrt(50,000 / 3).
        assert!((summary.commits_per_second_stddev - (50_000.0f64 / 3.0).sqrt()).abs() < 1e-9);
        assert_eq!(mean_and_stddev(&[5.0]), (5.0, 0.0));
        assert_eq!(mean_and_stddev(&[]), (0.0, 0.0));
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median([]), 0.0);
        assert_eq!(median([f64::NAN, 1.0]), 1.0);
    }

    #[test]
    fn summary_skips_short_intervals_in_medians_but_not_in_maxima() {
        let samples = vec![
            sample(1.0, 1.0, 100.0, 5),
            sample(2.0, 1.0, 300.0, 7),
            sample(3.0, 1.0, 200.0, 6),
            // A cut-off last interval with a wild rate and the largest gauge.
            sample(3.01, 0.01, 90_000.0, 50),
        ];
        let summary = Summary::of(&samples, 1.0);
        assert_eq!(summary.oltp_commits_per_second, 200.0);
        assert_eq!(summary.max_live_versions, 50);
        assert_eq!(summary.live_versions, 6.0);
        assert!((summary.tail_oltp_commits_per_second - 200.0).abs() < 1e-9);
    }

    #[test]
    fn tail_covers_only_the_last_ten_seconds() {
        let samples: Vec<Sample> = (1..=30)
            .map(|t| sample(t as f64, 1.0, if t > 20 { 50.0 } else { 1000.0 }, 0))
            .collect();
        let summary = Summary::of(&samples, 1.0);
        assert!((summary.tail_oltp_commits_per_second - 50.0).abs() < 1e-9);
        assert!((summary.head_oltp_commits_per_second - 1000.0).abs() < 1e-9);
        assert_eq!(summary.oltp_commits_per_second, 1000.0);
    }
}
