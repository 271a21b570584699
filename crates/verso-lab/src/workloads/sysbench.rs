//! DIVA's sysbench-HTAP (Kim et al., SIGMOD 2022, §7.1, as the papers' reading notes
//! describe it in their §2.D): one-row sysbench updates beside long-running join queries.
//!
//! Tables `sbtest1` ... `sbtest<tables>` as sysbench 1.0's `oltp_common.lua` makes them:
//! `id` (the primary key, 1..=rows), `k` (uniform in 1..=rows, indexed by `k_<i>`), `c` (10
//! groups of 11 digits joined by `-`, 119 characters) and `pad` (5 such groups, 59).
//!
//! OLTP: each transaction updates one row of a uniformly chosen table, its id drawn by a
//! Zipf law of skew `theta` (0, uniform, by default; DIVA's Fig. 20 uses 1.0), as
//! sysbench's `oltp_update_non_index` (`c` set to a new random string; the default) or
//! `oltp_update_index` (`k = k + 1`, a read-modify-write that changes the indexed column).
//!
//! OLAP: DIVA's join query `Q_i` (1 <= i <= 4): `SELECT SUM(sbtest1.k + ... +
//! sbtest<i+1>.k) FROM sbtest1, ..., sbtest<i+1> WHERE sbtest1.id = sbtest2.id AND ...`,
//! a merge join of full scans on the primary key. Half the OLAP workers run their query in
//! one open transaction, query after query (DIVA's long-running `Q_i(L)`: one snapshot held
//! across the run), the other half one transaction per query (`Q_i(S)`); workers take the
//! queries in the order Q1, Q4, Q2, Q3 (DIVA shows Q1 and Q4), an L and an S worker each.
//!
//! Phases (DIVA's 10 min OLTP only, 40 min OLTP and OLAP, 10 min OLAP only): a timed run
//! is split in the ratio `phases` (1:4:1 by default).
//!
//! Consistency: every table holds `rows` rows; every query joins `rows` rows; under
//! non-index updates its sum is the loaded one (they never change `k`); under index
//! updates the sum of `k` over all tables after a run is the loaded sum plus the
//! increments committed.

use std::sync::atomic::{AtomicU64, Ordering};

use verso::{ColumnType, Database, Isolation, KeyRange, Schema, TableId, Transaction, Value};

use crate::load::insert_rows;
use crate::rng::SplitMix64;
use crate::workload::{
    LabError, LoadProgress, OlapWorker, OltpWorker, Phases, QueryOutcome, TxnOutcome, Work,
    Workload, MAX_TABLE_ROWS,
};
use crate::zipf::AnyZipf;

/// Column of `k`.
const K: usize = 1;
/// Column of `c`.
const C: usize = 2;

/// The fewest tables: Q4 joins five.
pub const MIN_TABLES: usize = 5;

/// Which sysbench update the OLTP transactions run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SysbenchUpdate {
    /// `oltp_update_non_index`: `UPDATE sbtest<t> SET c = ? WHERE id = ?`.
    NonIndex,
    /// `oltp_update_index`: `UPDATE sbtest<t> SET k = k + 1 WHERE id = ?`.
    Index,
}

impl SysbenchUpdate {
    fn kind(self) -> &'static str {
        match self {
            SysbenchUpdate::NonIndex => "update_non_index",
            SysbenchUpdate::Index => "update_index",
        }
    }
}

/// The sysbench-HTAP workload's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct SysbenchConfig {
    /// Tables (`sbtest1` ...), at least [`MIN_TABLES`].
    pub tables: usize,
    /// Rows per table.
    pub rows: u64,
    /// Zipf skew of the updated ids (0 is uniform).
    pub theta: f64,
    /// The update the OLTP transactions run.
    pub update: SysbenchUpdate,
    /// Lengths of the OLTP-only, OLTP-and-OLAP and OLAP-only phases, as a ratio.
    pub phases: [u32; 3],
}

impl SysbenchConfig {
    /// Rows per table per unit of `--scale`: DIVA's small data set (Figs. 12 and 13).
    pub const ROWS_PER_SCALE: u64 = 10_000;

    /// The default: 12 tables of 10,000 rows × `scale`, uniform non-index updates, phases
    /// 1:4:1.
    pub fn new(scale: u64) -> SysbenchConfig {
        SysbenchConfig {
            tables: 12,
            rows: scale * Self::ROWS_PER_SCALE,
            theta: 0.0,
            update: SysbenchUpdate::NonIndex,
            phases: [1, 4, 1],
        }
    }

    /// Tiny sizes for tests: 5 tables of 200 rows.
    pub fn tiny() -> SysbenchConfig {
        SysbenchConfig {
            tables: MIN_TABLES,
            rows: 200,
            ..SysbenchConfig::new(1)
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), LabError> {
        if !(MIN_TABLES..=64).contains(&self.tables) {
            return Err(LabError::BadOption(format!(
                "--tables {} must lie in [{MIN_TABLES}, 64] (Q4 joins five tables)",
                self.tables
            )));
        }
        super::kv_updates::validate_rows_and_theta(self.rows, self.theta)?;
        if self.rows.saturating_mul(self.tables as u64) > MAX_TABLE_ROWS {
            return Err(LabError::BadOption(format!(
                "--tables {} x --rows {} is more than {MAX_TABLE_ROWS} rows",
                self.tables, self.rows
            )));
        }
        if self.phases.iter().all(|&p| p == 0) {
            return Err(LabError::BadOption(
                "--phases must give some phase a length".into(),
            ));
        }
        Ok(())
    }
}

/// The sysbench-HTAP workload.
pub struct SysbenchWorkload {
    config: SysbenchConfig,
    ids: AnyZipf,
    /// Per table, the sum of `k` as loaded.
    loaded_k_sums: Vec<u64>,
    /// `k` increments committed since the load (index updates), counted just before
    /// each commit (and taken back if it fails): never below what a snapshot can see.
    increments: AtomicU64,
}

impl SysbenchWorkload {
    /// The workload; fails with [`LabError::BadOption`] on bad parameters.
    pub fn new(config: SysbenchConfig) -> Result<SysbenchWorkload, LabError> {
        config.validate()?;
        let loaded_k_sums = (0..config.tables)
            .map(|table| {
                (1..=config.rows)
                    .map(|id| loaded_k(table, id, config.rows))
                    .sum()
            })
            .collect();
        Ok(SysbenchWorkload {
            ids: AnyZipf::new(config.rows, config.theta),
            loaded_k_sums,
            increments: AtomicU64::new(0),
            config,
        })
    }

    fn table_name(table: usize) -> String {
        format!("sbtest{}", table + 1)
    }

    fn tables(&self, db: &Database) -> Result<Vec<TableId>, LabError> {
        (0..self.config.tables)
            .map(|t| Ok(db.table(&Self::table_name(t))?))
            .collect()
    }
}

/// The row's `k` as loaded: uniform in `1..=rows`, a function of the table and id so that
/// the expected sums are known without reading.
fn loaded_k(table: usize, id: u64, rows: u64) -> u64 {
    let mut rng = SplitMix64::new(((table as u64) << 40) ^ id);
    rng.below(rows) + 1
}

/// sysbench's `c`/`pad` strings: `groups` groups of 11 random digits joined by `-`.
fn digit_groups(rng: &mut SplitMix64, groups: usize) -> String {
    let mut text = String::with_capacity(groups * 12);
    for group in 0..groups {
        if group > 0 {
            text.push('-');
        }
        for _ in 0..11 {
            text.push(char::from(b'0' + rng.below(10) as u8));
        }
    }
    text
}

/// Query names, which [`QueryOutcome::query`] indexes: each query in L mode (one snapshot
/// held across queries) and in S mode (one transaction per query).
const QUERIES: &[&str] = &[
    "Q1(L)", "Q2(L)", "Q3(L)", "Q4(L)", "Q1(S)", "Q2(S)", "Q3(S)", "Q4(S)",
];

/// The order in which OLAP workers take the queries (two workers each, L then S).
const QUERY_ORDER: [usize; 4] = [1, 4, 2, 3];

impl Workload for SysbenchWorkload {
    fn name(&self) -> &'static str {
        "sysbench"
    }

    fn describe(&self) -> String {
        let [a, b, c] = self.config.phases;
        format!(
            "sysbench-HTAP (DIVA §7.1): {} tables of {} rows, {} with ids Zipf theta {}, \
             join queries Q1-Q4 in L and S mode, phases {a}:{b}:{c}",
            self.config.tables,
            crate::format::thousands(self.config.rows as f64),
            self.config.update.kind(),
            self.config.theta
        )
    }

    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        self.increments.store(0, Ordering::Relaxed);
        let rows = self.config.rows;
        progress.set_total(rows * self.config.tables as u64);
        for table in 0..self.config.tables {
            let name = Self::table_name(table);
            let id = db.create_table(
                &name,
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("k", ColumnType::U64)
                    .column("c", ColumnType::Text)
                    .column("pad", ColumnType::Text)
                    .primary_key(&["id"])
                    .index(&format!("k_{}", table + 1), &["k"]),
            )?;
            insert_rows(db, id, 1..rows + 1, progress, |key, row| {
                let mut rng = SplitMix64::new(((table as u64) << 40) ^ key ^ (1 << 63));
                row.push(Value::U64(key));
                row.push(Value::U64(loaded_k(table, key, rows)));
                row.push(Value::from(digit_groups(&mut rng, 10)));
                row.push(Value::from(digit_groups(&mut rng, 5)));
            })?;
        }
        Ok(())
    }

    fn transaction_kinds(&self) -> Vec<String> {
        vec![self.config.update.kind().to_owned()]
    }

    fn query_names(&self) -> &'static [&'static str] {
        QUERIES
    }

    fn phases(&self) -> Phases {
        let [oltp_only, both, _] = self.config.phases.map(f64::from);
        let total: f64 = self.config.phases.iter().map(|&p| f64::from(p)).sum();
        Phases {
            olap_from: oltp_only / total,
            oltp_until: (oltp_only + both) / total,
        }
    }

    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        _worker: usize,
        _workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError> {
        Ok(Box::new(Updater {
            db,
            tables: self.tables(db)?,
            workload: self,
            rng: SplitMix64::new(seed),
        }))
    }

    fn olap_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'db>>, LabError> {
        let query = QUERY_ORDER[(worker / 2) % QUERY_ORDER.len()];
        let long = worker.is_multiple_of(2);
        Ok(Some(Box::new(Joiner {
            db,
            tables: self.tables(db)?[..=query].to_vec(),
            workload: self,
            query,
            long,
            held: None,
            left: Vec::new(),
        })))
    }

    fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        let txn = db.begin(Isolation::Snapshot);
        let mut k_sum = 0u64;
        for (t, &table) in self.tables(db)?.iter().enumerate() {
            let mut rows = 0u64;
            txn.scan_view(table, KeyRange::new(..), |row| {
                rows += 1;
                k_sum += row.get(K).as_u64().unwrap_or_default();
                true
            })?;
            if rows != self.config.rows {
                return Err(LabError::Inconsistent(format!(
                    "{} has {rows} rows, loaded {}",
                    Self::table_name(t),
                    self.config.rows
                )));
            }
        }
        txn.commit()?;
        let expected =
            self.loaded_k_sums.iter().sum::<u64>() + self.increments.load(Ordering::Relaxed);
        if k_sum != expected {
            return Err(LabError::Inconsistent(format!(
                "the k columns sum to {k_sum}, expected {expected} (loaded, plus the \
                 increments committed)"
            )));
        }
        Ok(())
    }
}

/// One OLTP thread: one-row updates.
struct Updater<'db> {
    db: &'db Database,
    tables: Vec<TableId>,
    workload: &'db SysbenchWorkload,
    rng: SplitMix64,
}

impl OltpWorker for Updater<'_> {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        let workload = self.workload;
        let table = self.tables[self.rng.below(self.tables.len() as u64) as usize];
        let key = [Value::U64(workload.ids.next(&mut self.rng) + 1)];
        let update = workload.config.update;
        let c = match update {
            SysbenchUpdate::NonIndex => Some(digit_groups(&mut self.rng, 10)),
            SysbenchUpdate::Index => None,
        };
        let mut found = true;
        let result = (|| {
            let mut txn = self.db.begin(isolation);
            let value = match c {
                Some(c) => Value::from(c),
                None => match txn.get_view(table, &key, |row| row.get(K).as_u64())? {
                    Some(k) => Value::U64(k.unwrap_or_default() + 1),
                    None => {
                        found = false;
                        txn.abort();
                        return Ok(());
                    }
                },
            };
            let column = if update == SysbenchUpdate::Index {
                K
            } else {
                C
            };
            if !txn.update(table, &key, &[(column, value)])? {
                found = false;
                txn.abort();
                return Ok(());
            }
            if update == SysbenchUpdate::Index {
                // Counted before the commit can be seen, so that a query's bound
                // (loaded + increments) is never below what its snapshot saw; taken back
                // if the commit fails.
                workload.increments.fetch_add(1, Ordering::SeqCst);
                let committed = crate::clients::commit(txn);
                if committed.is_err() {
                    workload.increments.fetch_sub(1, Ordering::SeqCst);
                }
                return committed;
            }
            crate::clients::commit(txn)
        })();
        if !found {
            return Err(LabError::Inconsistent(format!(
                "row {:?} is missing",
                key[0]
            )));
        }
        TxnOutcome::of(0, Work::operations(1), result)
    }
}

/// One OLAP thread: query `Q_query` over the first `query + 1` tables, in one held
/// transaction (`long`) or one per query.
struct Joiner<'db> {
    db: &'db Database,
    tables: Vec<TableId>,
    workload: &'db SysbenchWorkload,
    query: usize,
    long: bool,
    /// L mode's transaction, begun at the first query and kept to the end, and the sum
    /// its first query found (every later one in the same snapshot must find it too).
    held: Option<(Transaction<'db>, Option<u64>)>,
    /// The join's running result: `(id, sum of k so far)` in id order.
    left: Vec<(u64, u64)>,
}

impl Joiner<'_> {
    /// The merge join of the tables on `id` in `txn`'s snapshot: `(rows joined, SUM of
    /// k, tuples scanned)`. Each scan must see every id once, in order (a snapshot that
    /// saw a row twice, or none of it, is an inconsistency).
    fn join(&mut self, txn: &Transaction<'_>) -> Result<(u64, u64, u64), LabError> {
        let rows = self.workload.config.rows;
        let left = &mut self.left;
        left.clear();
        let mut scanned = 0u64;
        // The ids a scan saw, and whether they came strictly ascending.
        let in_order = |previous: &mut u64, id: u64| {
            let ascending = id > *previous;
            *previous = id;
            ascending
        };
        let (mut previous, mut ordered) = (0u64, true);
        txn.scan_view(self.tables[0], KeyRange::new(..), |row| {
            scanned += 1;
            let id = row.get(0).as_u64().unwrap_or_default();
            ordered &= in_order(&mut previous, id);
            left.push((id, row.get(K).as_u64().unwrap_or_default()));
            true
        })?;
        let mut seen = vec![left.len() as u64];
        for &table in &self.tables[1..] {
            // Both sides in id order: keep the left rows the right side has, adding its k.
            let (mut at, mut kept, mut count) = (0usize, 0usize, 0u64);
            previous = 0;
            txn.scan_view(table, KeyRange::new(..), |row| {
                scanned += 1;
                count += 1;
                let id = row.get(0).as_u64().unwrap_or_default();
                ordered &= in_order(&mut previous, id);
                while at < left.len() && left[at].0 < id {
                    at += 1;
                }
                if at < left.len() && left[at].0 == id {
                    left[kept] = (id, left[at].1 + row.get(K).as_u64().unwrap_or_default());
                    kept += 1;
                    at += 1;
                }
                true
            })?;
            left.truncate(kept);
            seen.push(count);
        }
        if !ordered || seen.iter().any(|&count| count != rows) {
            return Err(LabError::Inconsistent(format!(
                "Q{}'s scans saw {seen:?} rows of {rows} each{}",
                self.query,
                if ordered {
                    ""
                } else {
                    ", ids not strictly ascending"
                }
            )));
        }
        let sum = left.iter().map(|&(_, k)| k).sum();
        Ok((left.len() as u64, sum, scanned))
    }
}

impl OlapWorker for Joiner<'_> {
    fn run_one(&mut self) -> Result<QueryOutcome, LabError> {
        let config = &self.workload.config;
        let (joined, sum, scanned) = if self.long {
            let (txn, first_sum) = match self.held.take() {
                Some(held) => held,
                None => (self.db.begin(Isolation::Snapshot), None),
            };
            let result = self.join(&txn);
            let first_sum = first_sum.or(result.as_ref().ok().map(|&(_, sum, _)| sum));
            self.held = Some((txn, first_sum));
            let result = result?;
            // One snapshot, one answer, however many commits ran since its first query.
            if first_sum != Some(result.1) {
                return Err(LabError::Inconsistent(format!(
                    "Q{}(L) summed k to {} in the snapshot where it first summed {first_sum:?}",
                    self.query, result.1
                )));
            }
            result
        } else {
            let txn = self.db.begin(Isolation::Snapshot);
            let result = self.join(&txn)?;
            txn.commit()?;
            result
        };
        if joined != config.rows {
            return Err(LabError::Inconsistent(format!(
                "Q{} joined {joined} rows of {}",
                self.query, config.rows
            )));
        }
        let loaded: u64 = self.workload.loaded_k_sums[..=self.query].iter().sum();
        // Non-index updates never change k; index updates add one per commit, each
        // counted before it could be seen, so before this reads the count.
        let most = loaded + self.workload.increments.load(Ordering::SeqCst);
        if !(loaded..=most).contains(&sum)
            || config.update == SysbenchUpdate::NonIndex && sum != loaded
        {
            return Err(LabError::Inconsistent(format!(
                "Q{} summed k to {sum}, loaded {loaded}, at most {most} after the increments \
                 committed",
                self.query
            )));
        }
        std::hint::black_box(sum);
        let mode = if self.long { 0 } else { 4 };
        Ok(QueryOutcome {
            query: mode + self.query - 1,
            scanned_tuples: scanned,
        })
    }
}
