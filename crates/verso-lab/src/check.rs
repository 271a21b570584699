//! `verso check DIR`: opens a persistent database (which recovers it), says what recovery
//! did, and checks what the data must satisfy: TPC-C's twelve consistency conditions where
//! it holds TPC-C's tables (TPC-C and CH-benCHmark runs), the TPC-B balance sums where it
//! holds TPC-B's, and for any database that every table's rows can be read and every
//! secondary index holds exactly one entry per row.
//!
//! The database is opened with default options: recovery needs none of the run's (the
//! log and checkpoints are logical, the same under every configuration). A directory
//! holding a persistent-memory region (a tile-block run) is opened with that storage,
//! under MVTO and without a collector: its recovery finishes an interrupted collection
//! whatever the collector. It is closed again at the end, so a check leaves the directory
//! as a clean shutdown would (a torn tail cut, a new log segment begun).

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use verso::{Database, Isolation, KeyRange, Options, RecoveryStats};

use crate::workload::{LabError, Workload};
use crate::workloads::tpcb::{TpcbConfig, TpcbWorkload};

/// What `verso check` found.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// The database's directory.
    pub path: String,
    /// What recovery did at open.
    pub recovery: RecoveryReport,
    /// For a persistent-memory region: what its recovery read and rebuilt.
    pub region: Option<RegionRecovery>,
    /// Every table with its rows.
    pub tables: Vec<TableReport>,
    /// Which workload's conditions were checked (`tpcc`, `tpcb`), if the tables are one's.
    pub workload: Option<String>,
}

/// [`RecoveryStats`] in the units a person reads.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryReport {
    /// Seconds `open` spent recovering, in all.
    pub seconds: f64,
    /// Of which loading the checkpoint's rows, building secondary indexes, replaying the
    /// log.
    pub checkpoint_load_seconds: f64,
    /// See `checkpoint_load_seconds`.
    pub index_build_seconds: f64,
    /// See `checkpoint_load_seconds`.
    pub log_replay_seconds: f64,
    /// Rows loaded from the checkpoint.
    pub checkpoint_rows: u64,
    /// Commit records and operations replayed from the log.
    pub log_commits_replayed: u64,
    /// See `log_commits_replayed`.
    pub log_operations_replayed: u64,
    /// Threads the log replay ran on.
    pub log_replay_threads: u32,
    /// Bytes of log read.
    pub log_bytes_read: u64,
    /// Rows restored per second (checkpoint rows and replayed operations).
    pub rows_per_second: f64,
    /// Whether the log ended in a torn write, which recovery cut off.
    pub torn_tail: bool,
}

impl From<RecoveryStats> for RecoveryReport {
    fn from(r: RecoveryStats) -> Self {
        RecoveryReport {
            seconds: r.nanos as f64 / 1e9,
            checkpoint_load_seconds: r.checkpoint_load_nanos as f64 / 1e9,
            index_build_seconds: r.index_build_nanos as f64 / 1e9,
            log_replay_seconds: r.log_replay_nanos as f64 / 1e9,
            checkpoint_rows: r.checkpoint_rows,
            log_commits_replayed: r.log_commits_replayed,
            log_operations_replayed: r.log_operations_replayed,
            log_replay_threads: r.log_replay_threads,
            log_bytes_read: r.log_bytes_read,
            rows_per_second: r.rows_per_second(),
            torn_tail: r.torn_tail,
        }
    }
}

/// What the tile-block storage's recovery did ([`verso::pmem::RecoveryReport`]).
#[derive(Clone, Debug, Serialize)]
pub struct RegionRecovery {
    /// Blocks the region's directory listed.
    pub blocks: u64,
    /// Whole records read from them.
    pub records: u64,
    /// Rows rebuilt.
    pub rows: u64,
    /// Records of transactions that never committed.
    pub uncommitted_records: u64,
    /// Blocks a crash left frozen, whose collection recovery finished.
    pub frozen_blocks: u64,
    /// Blocks without a whole record, freed.
    pub empty_blocks_freed: u64,
}

/// One table of the database.
#[derive(Clone, Debug, Serialize)]
pub struct TableReport {
    /// Its name.
    pub name: String,
    /// Its rows.
    pub rows: u64,
}

/// How `verso check` opens the database: recovery's threads (`None`: Verso's defaults).
#[derive(Clone, Copy, Debug, Default)]
pub struct CheckOptions {
    /// Threads that load the checkpoint and build its indexes.
    pub recovery_threads: Option<usize>,
    /// Threads that replay the log.
    pub replay_threads: Option<usize>,
}

/// Opens the database in `dir`, reports to `out` and checks it; an inconsistency is
/// [`LabError::Inconsistent`], a directory without a database [`LabError::BadOption`].
pub fn check(
    dir: &Path,
    threads: CheckOptions,
    out: &mut dyn Write,
) -> Result<CheckReport, LabError> {
    let region = dir.join(verso::pmem::REGION_FILE).is_file();
    if !region && !dir.join("MANIFEST").is_file() {
        // Opening would create a database here: refuse instead.
        return Err(LabError::BadOption(format!(
            "{}: no Verso database here (no MANIFEST file, no {} region); `verso check` \
             opens the directory of a run with --path (DIR/<n>-<label>)",
            dir.display(),
            verso::pmem::REGION_FILE
        )));
    }
    if threads.recovery_threads == Some(0) || threads.replay_threads == Some(0) {
        return Err(LabError::BadOption(
            "--recovery-threads and --replay-threads need at least one thread".into(),
        ));
    }
    let mut options = Options::default().path(dir);
    if region {
        options = options
            .version_storage(verso::VersionStorageKind::TileBlock)
            .concurrency_control(verso::ConcurrencyControl::Mvto)
            .garbage_collector(verso::GarbageCollector::NoCollection);
    }
    options.recovery_threads = threads.recovery_threads;
    options.log_replay_threads = threads.replay_threads;
    let opening = std::time::Instant::now();
    let db = Database::open(options)?;
    let open_seconds = opening.elapsed().as_secs_f64();
    let region = db
        .stats()
        .persistent_memory
        .and_then(|pm| pm.recovery)
        .map(|r| RegionRecovery {
            blocks: r.blocks,
            records: r.records,
            rows: r.rows,
            uncommitted_records: r.uncommitted_records,
            frozen_blocks: r.frozen_blocks,
            empty_blocks_freed: r.empty_blocks_freed,
        });
    let mut recovery = RecoveryReport::from(
        db.stats()
            .durability
            .map(|d| d.recovery)
            .unwrap_or_default(),
    );
    if let Some(r) = &region {
        recovery.seconds = open_seconds;
        writeln!(
            out,
            "recovered {} (a persistent-memory region) in {:.2} s: {} blocks, {} records \
             read ({} of transactions that never committed), {} rows rebuilt, {} frozen \
             blocks' collection finished, {} empty blocks freed",
            dir.display(),
            open_seconds,
            r.blocks,
            r.records,
            r.uncommitted_records,
            r.rows,
            r.frozen_blocks,
            r.empty_blocks_freed
        )?;
    } else {
        write_log_recovery(out, dir, &recovery)?;
    }
    let tables = check_tables(&db)?;
    for table in &tables {
        writeln!(out, "  {}: {} rows", table.name, table.rows)?;
    }
    let workload = check_workload(&db, &tables)?;
    match &workload {
        Some(name) => writeln!(out, "consistent: {name} hold")?,
        None => writeln!(
            out,
            "consistent: every row readable, every secondary index one entry per row (no \
             workload's tables recognised, so no workload's conditions checked)"
        )?,
    }
    db.close()?;
    Ok(CheckReport {
        path: dir.display().to_string(),
        recovery,
        region,
        tables,
        workload,
    })
}

/// What a log-based database's recovery did, in a line.
fn write_log_recovery(
    out: &mut dyn Write,
    dir: &Path,
    recovery: &RecoveryReport,
) -> Result<(), LabError> {
    writeln!(
        out,
        "recovered {} in {:.2} s: {} checkpoint rows loaded in {:.2} s, secondary indexes \
         built in {:.2} s, {} commits ({} operations, {:.1} MiB) replayed in {:.2} s on {} \
         thread(s); {:.2}M rows/s{}",
        dir.display(),
        recovery.seconds,
        recovery.checkpoint_rows,
        recovery.checkpoint_load_seconds,
        recovery.index_build_seconds,
        recovery.log_commits_replayed,
        recovery.log_operations_replayed,
        recovery.log_bytes_read as f64 / f64::from(1u32 << 20),
        recovery.log_replay_seconds,
        recovery.log_replay_threads,
        recovery.rows_per_second / 1e6,
        if recovery.torn_tail {
            "; a torn write at the log's end (never acknowledged) was cut off"
        } else {
            ""
        }
    )?;
    Ok(())
}

/// Reads every table at one snapshot: its rows, and each secondary index's entries, which
/// must be one per row.
fn check_tables(db: &Database) -> Result<Vec<TableReport>, LabError> {
    let txn = db.begin_read_only(Isolation::Snapshot);
    let mut tables = Vec::new();
    for name in db.table_names() {
        let table = db.table(&name)?;
        let mut rows = 0u64;
        txn.scan_view(table, KeyRange::new(..), |_| {
            rows += 1;
            true
        })?;
        for index in db.index_names(table)? {
            let mut entries = 0u64;
            txn.scan_index_view(table, &index, KeyRange::new(..), |_| {
                entries += 1;
                true
            })?;
            if entries != rows {
                return Err(LabError::Inconsistent(format!(
                    "table {name}: index {index} reaches {entries} rows, the table holds {rows}"
                )));
            }
        }
        tables.push(TableReport { name, rows });
    }
    txn.commit()?;
    Ok(tables)
}

/// Checks the conditions of the workload whose tables the database holds, if any.
fn check_workload(db: &Database, tables: &[TableReport]) -> Result<Option<String>, LabError> {
    let has = |name: &str| tables.iter().any(|t| t.name == name);
    if has("warehouse") && has("district") && has("order_line") {
        crate::workloads::tpcc::consistency::check(db)?;
        return Ok(Some(
            "TPC-C's twelve consistency conditions (clause 3.3.2)".to_owned(),
        ));
    }
    if let Some(branches) = tables
        .iter()
        .find(|t| t.name == crate::workloads::tpcb::BRANCHES)
    {
        // The scale is the number of branches (pgbench's), the accounts per branch what
        // the run loaded (fewer in tiny mode); the conditions check the row counts
        // against them and the balance sums.
        let accounts = tables
            .iter()
            .find(|t| t.name == crate::workloads::tpcb::ACCOUNTS)
            .map_or(0, |t| t.rows);
        let scale = branches.rows.max(1);
        let workload = TpcbWorkload::new(TpcbConfig {
            scale,
            accounts_per_scale: (accounts / scale).max(1),
        })?;
        workload.check_consistency(db)?;
        return Ok(Some("TPC-B's balance sums".to_owned()));
    }
    Ok(None)
}
