//! Key-value updates under Zipf skew (Steam, Böttcher et al. 2019, §5.5, Figure 11).
//!
//! One table `kv (key U64, value I64)` of `rows` rows. Each transaction increments the value
//! of `updates_per_transaction` distinct keys (read, then write: a read-modify-write, so a
//! lost update would show), the keys drawn by a scrambled Zipf distribution of skew
//! `theta`: 0 is uniform, 1 the harmonic law (Steam sweeps 0.0 to 1.0). The more skew, the
//! more updates hit the same few rows and the longer their version chains grow unless the
//! collector prunes them.
//!
//! Consistency: the values sum to the number of increments committed (every row starts at
//! 0), and every key is present.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use verso::{ColumnType, Database, Isolation, KeyRange, Schema, TableId, Value};

use crate::load::insert_rows;
use crate::rng::SplitMix64;
use crate::workload::{
    LabError, LoadProgress, OltpWorker, TxnOutcome, Work, Workload, MAX_TABLE_ROWS,
};
use crate::zipf::{draw_distinct, AnyZipf};

/// The table's name.
pub const TABLE: &str = "kv";
/// Column of the value.
pub const VALUE_COLUMN: usize = 1;

/// The key-value workload's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct KvConfig {
    /// Rows in the table.
    pub rows: u64,
    /// Zipf skew of the keys, at least 0 (0 is uniform).
    pub theta: f64,
    /// Distinct rows each transaction increments.
    pub updates_per_transaction: usize,
}

impl KvConfig {
    /// Rows per unit of `--scale`.
    pub const ROWS_PER_SCALE: u64 = 1_000_000;

    /// The default: a million rows, theta 0.8, one update per transaction.
    pub fn new(scale: u64) -> KvConfig {
        KvConfig {
            rows: scale * Self::ROWS_PER_SCALE,
            theta: 0.8,
            updates_per_transaction: 1,
        }
    }

    /// Tiny sizes for tests: 1,000 rows.
    pub fn tiny() -> KvConfig {
        KvConfig {
            rows: 1_000,
            ..KvConfig::new(1)
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), LabError> {
        validate_rows_and_theta(self.rows, self.theta)?;
        if self.updates_per_transaction == 0 || self.updates_per_transaction as u64 > self.rows {
            return Err(LabError::BadOption(format!(
                "--updates-per-transaction {} must lie in [1, rows = {}]",
                self.updates_per_transaction, self.rows
            )));
        }
        Ok(())
    }
}

/// Checks `--rows` and `--theta` of the key-value table's workloads.
pub(crate) fn validate_rows_and_theta(rows: u64, theta: f64) -> Result<(), LabError> {
    if !(1..=MAX_TABLE_ROWS).contains(&rows) {
        return Err(LabError::BadOption(format!(
            "--rows {rows} must lie in [1, {MAX_TABLE_ROWS}]"
        )));
    }
    if !(theta.is_finite() && (0.0..=10.0).contains(&theta)) {
        return Err(LabError::BadOption(format!(
            "--theta {theta}: the Zipf skew must lie in [0, 10]"
        )));
    }
    Ok(())
}

/// Creates the `kv` table and loads `rows` rows with value 0.
pub(crate) fn create_and_load(
    db: &Database,
    rows: u64,
    progress: &dyn LoadProgress,
) -> Result<TableId, LabError> {
    let table = db.create_table(
        TABLE,
        Schema::new()
            .column("key", ColumnType::U64)
            .column("value", ColumnType::I64)
            .primary_key(&["key"]),
    )?;
    progress.set_total(rows);
    insert_rows(db, table, 0..rows, progress, |key, row| {
        row.push(Value::U64(key));
        row.push(Value::I64(0));
    })?;
    Ok(table)
}

/// Scans the whole table in one transaction of `isolation`: `(rows, sum of values)`.
pub(crate) fn count_and_sum(
    db: &Database,
    table: TableId,
    isolation: Isolation,
) -> Result<(u64, i64), LabError> {
    let txn = db.begin(isolation);
    let (mut rows, mut sum) = (0u64, 0i64);
    txn.scan_view(table, KeyRange::new(..), |row| {
        rows += 1;
        sum = sum.wrapping_add(row.get(VALUE_COLUMN).as_i64().unwrap_or_default());
        true
    })?;
    txn.commit()?;
    Ok((rows, sum))
}

/// Increments committed so far, one counter per worker (no shared write on the hot path).
#[derive(Default)]
struct CommittedIncrements {
    workers: Mutex<Vec<Arc<AtomicU64>>>,
}

impl CommittedIncrements {
    /// Forgets all counters (a fresh load).
    fn reset(&self) {
        if let Ok(mut workers) = self.workers.lock() {
            workers.clear();
        }
    }

    /// A new counter for one worker.
    fn register(&self) -> Result<Arc<AtomicU64>, LabError> {
        let counter = Arc::new(AtomicU64::new(0));
        self.workers
            .lock()
            .map_err(|_| LabError::ThreadFailed("a worker panicked while registering".into()))?
            .push(Arc::clone(&counter));
        Ok(counter)
    }

    fn total(&self) -> Result<u64, LabError> {
        Ok(self
            .workers
            .lock()
            .map_err(|_| LabError::ThreadFailed("a worker panicked while registering".into()))?
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum())
    }
}

/// Reads the value under `key`, writes it back plus one. `Ok(false)` if the row is missing
/// (which the workload reports as an inconsistency).
fn increment(txn: &mut verso::Transaction<'_>, table: TableId, key: u64) -> verso::Result<bool> {
    let key = [Value::U64(key)];
    let Some(value) = txn.get_view(table, &key, |row| row.get(VALUE_COLUMN).as_i64())? else {
        return Ok(false);
    };
    let value = value.unwrap_or_default();
    txn.update(table, &key, &[(VALUE_COLUMN, Value::I64(value + 1))])
}

/// The key-value table as its workloads (key-value updates, scans with updates) see it:
/// its size, the distribution of the updated keys and the increments committed.
pub(crate) struct KvTable {
    rows: u64,
    keys: AnyZipf,
    committed: CommittedIncrements,
}

impl KvTable {
    /// `rows` rows whose updates pick keys with Zipf skew `theta`.
    pub(crate) fn new(rows: u64, theta: f64) -> KvTable {
        KvTable {
            rows,
            keys: AnyZipf::new(rows, theta),
            committed: CommittedIncrements::default(),
        }
    }

    /// Creates and loads the table, forgetting the increments of an earlier load.
    pub(crate) fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        self.committed.reset();
        create_and_load(db, self.rows, progress)?;
        Ok(())
    }

    /// Every row is present and the values sum to the increments committed.
    pub(crate) fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        let (rows, sum) = count_and_sum(db, db.table(TABLE)?, Isolation::Snapshot)?;
        if rows != self.rows {
            return Err(LabError::Inconsistent(format!(
                "kv has {rows} rows, loaded {}",
                self.rows
            )));
        }
        let committed = self.committed.total()?;
        if sum != committed as i64 {
            return Err(LabError::Inconsistent(format!(
                "kv values sum to {sum}, but {committed} increments committed"
            )));
        }
        Ok(())
    }

    /// An updater for one OLTP thread, with its own random stream and counter; room for
    /// `keys_per_transaction` keys.
    pub(crate) fn updater<'db>(
        &'db self,
        db: &'db Database,
        seed: u64,
        keys_per_transaction: usize,
    ) -> Result<KvUpdater<'db>, LabError> {
        Ok(KvUpdater {
            db,
            table: db.table(TABLE)?,
            kv: self,
            rng: SplitMix64::new(seed),
            keys: Vec::with_capacity(keys_per_transaction),
            committed: self.committed.register()?,
        })
    }
}

/// One OLTP thread's side of the key-value table.
pub(crate) struct KvUpdater<'db> {
    pub(crate) db: &'db Database,
    pub(crate) table: TableId,
    kv: &'db KvTable,
    pub(crate) rng: SplitMix64,
    keys: Vec<u64>,
    committed: Arc<AtomicU64>,
}

impl KvUpdater<'_> {
    /// One transaction of type `kind` incrementing `count` distinct Zipf-chosen rows; a
    /// missing row is an inconsistency.
    pub(crate) fn increment_rows(
        &mut self,
        isolation: Isolation,
        kind: usize,
        count: usize,
    ) -> Result<TxnOutcome, LabError> {
        let (zipf, rng) = (&self.kv.keys, &mut self.rng);
        draw_distinct(zipf.items(), count, &mut self.keys, || zipf.next(rng));
        let mut missing = None;
        let result = (|| {
            let mut txn = self.db.begin(isolation);
            for &key in &self.keys {
                if !increment(&mut txn, self.table, key)? {
                    missing = Some(key);
                    txn.abort();
                    return Ok(());
                }
            }
            crate::clients::commit(txn)
        })();
        if let Some(key) = missing {
            return Err(LabError::Inconsistent(format!("kv row {key} is missing")));
        }
        // Each increment reads and rewrites one row: one operation, as a YCSB update.
        let work = Work::operations(self.keys.len() as u64);
        let outcome = TxnOutcome::of(kind, work, result)?;
        if let TxnOutcome::Committed { .. } = outcome {
            self.committed
                .fetch_add(self.keys.len() as u64, Ordering::Relaxed);
        }
        Ok(outcome)
    }
}

/// The key-value update workload.
pub struct KvWorkload {
    config: KvConfig,
    table: KvTable,
}

impl KvWorkload {
    /// The workload; fails with [`LabError::BadOption`] on bad parameters.
    pub fn new(config: KvConfig) -> Result<KvWorkload, LabError> {
        config.validate()?;
        Ok(KvWorkload {
            table: KvTable::new(config.rows, config.theta),
            config,
        })
    }

    /// Its parameters.
    pub fn config(&self) -> &KvConfig {
        &self.config
    }
}

impl Workload for KvWorkload {
    fn name(&self) -> &'static str {
        "kv"
    }

    fn describe(&self) -> String {
        format!(
            "key-value updates (Steam §5.5): {} rows, Zipf theta {}, {} increment(s) per transaction",
            crate::format::thousands(self.config.rows as f64),
            self.config.theta,
            self.config.updates_per_transaction
        )
    }

    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        self.table.load(db, progress)
    }

    fn transaction_kinds(&self) -> Vec<String> {
        vec!["update".to_owned()]
    }

    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        _worker: usize,
        _workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError> {
        let count = self.config.updates_per_transaction;
        Ok(Box::new(KvWorker {
            updater: self.table.updater(db, seed, count)?,
            count,
        }))
    }

    fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        self.table.check_consistency(db)
    }
}

struct KvWorker<'db> {
    updater: KvUpdater<'db>,
    count: usize,
}

impl OltpWorker for KvWorker<'_> {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        self.updater.increment_rows(isolation, 0, self.count)
    }
}
