//! Full table scans mixed with updates (Steam, Böttcher et al. 2019, §5.6, Figure 12).
//!
//! The key-value table of [`super::kv_updates`]. Every OLTP thread runs a mix: with
//! probability `scan_percent / 100` a read-only transaction that scans the whole table
//! (kind `scan`), otherwise an update transaction incrementing one Zipf-chosen row (kind
//! `update`); Steam varies the share of reads from 0 to 100%. OLAP workers, if asked for,
//! scan the table back to back (query `full_scan`).
//!
//! Consistency: as for the key-value workload, and every scan sees exactly `rows` rows.

use verso::{Database, Isolation, TableId};

use super::kv_updates::{count_and_sum, validate_rows_and_theta, KvTable, KvUpdater, TABLE};
use crate::workload::{
    LabError, LoadProgress, OlapWorker, OltpWorker, QueryOutcome, TxnOutcome, Work, Workload,
};

/// The scans-with-updates workload's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ScansConfig {
    /// Rows in the table.
    pub rows: u64,
    /// Zipf skew of the updated keys (0 is uniform).
    pub theta: f64,
    /// Percentage of an OLTP thread's transactions that are full table scans.
    pub scan_percent: f64,
}

impl ScansConfig {
    /// Rows per unit of `--scale`.
    pub const ROWS_PER_SCALE: u64 = 100_000;

    /// The default: 100,000 rows, uniform updates, 1% scans.
    pub fn new(scale: u64) -> ScansConfig {
        ScansConfig {
            rows: scale * Self::ROWS_PER_SCALE,
            theta: 0.0,
            scan_percent: 1.0,
        }
    }

    /// Tiny sizes for tests: 500 rows, 5% scans.
    pub fn tiny() -> ScansConfig {
        ScansConfig {
            rows: 500,
            scan_percent: 5.0,
            ..ScansConfig::new(1)
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), LabError> {
        validate_rows_and_theta(self.rows, self.theta)?;
        if !(0.0..=100.0).contains(&self.scan_percent) {
            return Err(LabError::BadOption(format!(
                "--scan-percent {} must lie in [0, 100]",
                self.scan_percent
            )));
        }
        Ok(())
    }
}

/// The scans-with-updates workload.
pub struct ScansWorkload {
    config: ScansConfig,
    table: KvTable,
}

impl ScansWorkload {
    /// The workload; fails with [`LabError::BadOption`] on bad parameters.
    pub fn new(config: ScansConfig) -> Result<ScansWorkload, LabError> {
        config.validate()?;
        Ok(ScansWorkload {
            table: KvTable::new(config.rows, config.theta),
            config,
        })
    }
}

/// Transaction kinds: an update, a full scan.
const KINDS: &[&str] = &["update", "scan"];
const UPDATE: usize = 0;
const SCAN: usize = 1;

impl Workload for ScansWorkload {
    fn name(&self) -> &'static str {
        "scans"
    }

    fn describe(&self) -> String {
        format!(
            "full table scans mixed with updates (Steam §5.6): {} rows, {}% scans, update keys Zipf theta {}",
            crate::format::thousands(self.config.rows as f64),
            self.config.scan_percent,
            self.config.theta
        )
    }

    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        self.table.load(db, progress)
    }

    fn transaction_kinds(&self) -> Vec<String> {
        KINDS.iter().map(|&kind| kind.to_owned()).collect()
    }

    fn query_names(&self) -> &'static [&'static str] {
        &["full_scan"]
    }

    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        _worker: usize,
        _workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError> {
        Ok(Box::new(ScansWorker {
            updater: self.table.updater(db, seed, 1)?,
            workload: self,
        }))
    }

    fn olap_worker<'db>(
        &'db self,
        db: &'db Database,
        _worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'db>>, LabError> {
        Ok(Some(Box::new(FullScanner {
            db,
            table: db.table(TABLE)?,
            rows: self.config.rows,
        })))
    }

    fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        self.table.check_consistency(db)
    }
}

/// Scans the whole table in one read-only transaction; the rows it saw, checked against
/// the table's size.
fn full_scan(
    db: &Database,
    table: TableId,
    isolation: Isolation,
    rows: u64,
) -> Result<u64, LabError> {
    let (seen, sum) = count_and_sum(db, table, isolation)?;
    std::hint::black_box(sum);
    if seen != rows {
        return Err(LabError::Inconsistent(format!(
            "a full scan saw {seen} rows of {rows}"
        )));
    }
    Ok(seen)
}

struct ScansWorker<'db> {
    updater: KvUpdater<'db>,
    workload: &'db ScansWorkload,
}

impl OltpWorker for ScansWorker<'_> {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        let config = &self.workload.config;
        if self.updater.rng.next_f64() * 100.0 < config.scan_percent {
            let seen = full_scan(self.updater.db, self.updater.table, isolation, config.rows)?;
            return Ok(TxnOutcome::Committed {
                kind: SCAN,
                work: Work::operations(seen),
            });
        }
        self.updater.increment_rows(isolation, UPDATE, 1)
    }
}

struct FullScanner<'db> {
    db: &'db Database,
    table: TableId,
    rows: u64,
}

impl OlapWorker for FullScanner<'_> {
    fn run_one(&mut self) -> Result<QueryOutcome, LabError> {
        let scanned_tuples = full_scan(self.db, self.table, verso::Isolation::Snapshot, self.rows)?;
        Ok(QueryOutcome {
            query: 0,
            scanned_tuples,
        })
    }
}
