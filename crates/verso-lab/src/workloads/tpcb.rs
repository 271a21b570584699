//! pgbench's TPC-B-like transaction (PostgreSQL's `pgbench`, builtin script `tpcb-like`).
//!
//! Tables as `pgbench -i` creates them, per unit of scale: 100,000 accounts, 10 tellers,
//! 1 branch; `pgbench_history` starts empty. pgbench's history table has no key; Verso
//! needs one, so it gets `hid` (the worker's number in the high 24 bits, its own sequence
//! number below), which no statement reads. Fillers are blank-padded to pgbench's `char(n)`
//! widths (84, 84, 88); the history filler is NULL as pgbench inserts it.
//!
//! The transaction draws, as pgbench does, `aid` in `[1, 100000 * scale]`, `bid` in
//! `[1, scale]`, `tid` in `[1, 10 * scale]` (each uniform and independent) and `delta` in
//! `[-5000, 5000]`, then runs pgbench's five statements:
//!
//! ```sql
//! UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
//! SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
//! UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
//! UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
//! INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (...);
//! ```
//!
//! Each `UPDATE ... SET x = x + :delta` is a read of the row then an update of it.
//!
//! Consistency: the sums of `abalance`, `tbalance`, `bbalance` and of the history's
//! `delta` are equal (every committed transaction added the same delta to each), and the
//! tables hold the loaded number of rows.

use std::time::{SystemTime, UNIX_EPOCH};

use verso::{ColumnType, Database, Isolation, KeyRange, PrimaryKeyIndex, Schema, TableId, Value};

use crate::load::insert_rows;
use crate::rng::SplitMix64;
use crate::workload::{LabError, LoadProgress, OltpWorker, TxnOutcome, Work, Workload};

/// Accounts per unit of scale (pgbench's `naccounts`).
pub const ACCOUNTS_PER_SCALE: u64 = 100_000;
/// Tellers per unit of scale (pgbench's `ntellers`).
pub const TELLERS_PER_SCALE: u64 = 10;
/// Branches per unit of scale (pgbench's `nbranches`).
pub const BRANCHES_PER_SCALE: u64 = 1;

/// Table names, as pgbench's.
pub const ACCOUNTS: &str = "pgbench_accounts";
/// Tellers.
pub const TELLERS: &str = "pgbench_tellers";
/// Branches.
pub const BRANCHES: &str = "pgbench_branches";
/// History.
pub const HISTORY: &str = "pgbench_history";

/// Column of the balance in accounts, tellers and branches.
const ACCOUNT_BALANCE: usize = 2;
const TELLER_BALANCE: usize = 2;
const BRANCH_BALANCE: usize = 1;
const HISTORY_DELTA: usize = 4;

/// TPC-B's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct TpcbConfig {
    /// pgbench's scale factor.
    pub scale: u64,
    /// Accounts per unit of scale: 100,000 in pgbench; lowered only by tiny mode.
    pub accounts_per_scale: u64,
}

impl TpcbConfig {
    /// pgbench's sizes at `scale`.
    pub fn new(scale: u64) -> TpcbConfig {
        TpcbConfig {
            scale,
            accounts_per_scale: ACCOUNTS_PER_SCALE,
        }
    }

    /// Tiny sizes for tests: scale 1 with 1,000 accounts (tellers and branches as pgbench).
    pub fn tiny() -> TpcbConfig {
        TpcbConfig {
            scale: 1,
            accounts_per_scale: 1_000,
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), LabError> {
        if self.scale == 0 || self.accounts_per_scale == 0 {
            return Err(LabError::BadOption("--scale must be at least 1".into()));
        }
        if self.scale > 1 << 20 {
            return Err(LabError::BadOption(format!(
                "--scale {} is too large",
                self.scale
            )));
        }
        Ok(())
    }

    /// Number of accounts.
    pub fn accounts(&self) -> u64 {
        self.scale * self.accounts_per_scale
    }

    /// Number of tellers.
    pub fn tellers(&self) -> u64 {
        self.scale * TELLERS_PER_SCALE
    }

    /// Number of branches.
    pub fn branches(&self) -> u64 {
        self.scale * BRANCHES_PER_SCALE
    }
}

/// The TPC-B-like workload.
pub struct TpcbWorkload {
    config: TpcbConfig,
}

impl TpcbWorkload {
    /// The workload; fails with [`LabError::BadOption`] on bad parameters.
    pub fn new(config: TpcbConfig) -> Result<TpcbWorkload, LabError> {
        config.validate()?;
        Ok(TpcbWorkload { config })
    }
}

struct Tables {
    accounts: TableId,
    tellers: TableId,
    branches: TableId,
    history: TableId,
}

impl Tables {
    fn of(db: &Database) -> Result<Tables, LabError> {
        Ok(Tables {
            accounts: db.table(ACCOUNTS)?,
            tellers: db.table(TELLERS)?,
            branches: db.table(BRANCHES)?,
            history: db.table(HISTORY)?,
        })
    }
}

fn blanks(width: usize) -> Value {
    Value::Text(" ".repeat(width))
}

impl Workload for TpcbWorkload {
    fn name(&self) -> &'static str {
        "tpcb"
    }

    fn describe(&self) -> String {
        format!(
            "pgbench TPC-B-like, scale {}: {} accounts, {} tellers, {} branch(es)",
            self.config.scale,
            crate::format::thousands(self.config.accounts() as f64),
            self.config.tellers(),
            self.config.branches()
        )
    }

    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        let branches = db.create_table(
            BRANCHES,
            Schema::new()
                .column("bid", ColumnType::U64)
                .column("bbalance", ColumnType::I64)
                .column("filler", ColumnType::Text)
                .primary_key(&["bid"]),
        )?;
        let tellers = db.create_table(
            TELLERS,
            Schema::new()
                .column("tid", ColumnType::U64)
                .column("bid", ColumnType::U64)
                .column("tbalance", ColumnType::I64)
                .column("filler", ColumnType::Text)
                .primary_key(&["tid"]),
        )?;
        let accounts = db.create_table(
            ACCOUNTS,
            Schema::new()
                .column("aid", ColumnType::U64)
                .column("bid", ColumnType::U64)
                .column("abalance", ColumnType::I64)
                .column("filler", ColumnType::Text)
                .primary_key(&["aid"]),
        )?;
        db.create_table(
            HISTORY,
            Schema::new()
                .column("hid", ColumnType::U64)
                .column("tid", ColumnType::U64)
                .column("bid", ColumnType::U64)
                .column("aid", ColumnType::U64)
                .column("delta", ColumnType::I64)
                .column("mtime", ColumnType::I64)
                .column("filler", ColumnType::Text)
                .primary_key(&["hid"])
                // Only inserted, never looked up (pgbench's history has no key at all).
                .primary_key_index(PrimaryKeyIndex::OrderedOnly),
        )?;
        let c = &self.config;
        progress.set_total(c.branches() + c.tellers() + c.accounts());
        let (filler84, filler88) = (blanks(84), blanks(88));
        insert_rows(db, branches, 1..c.branches() + 1, progress, |bid, row| {
            row.extend([Value::U64(bid), Value::I64(0), filler88.clone()]);
        })?;
        insert_rows(db, tellers, 1..c.tellers() + 1, progress, |tid, row| {
            let bid = (tid - 1) / TELLERS_PER_SCALE + 1;
            row.extend([
                Value::U64(tid),
                Value::U64(bid),
                Value::I64(0),
                filler84.clone(),
            ]);
        })?;
        let per_branch = c.accounts_per_scale;
        insert_rows(db, accounts, 1..c.accounts() + 1, progress, |aid, row| {
            let bid = (aid - 1) / per_branch + 1;
            row.extend([
                Value::U64(aid),
                Value::U64(bid),
                Value::I64(0),
                filler84.clone(),
            ]);
        })
    }

    fn transaction_kinds(&self) -> Vec<String> {
        vec!["tpcb".to_owned()]
    }

    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        _workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError> {
        Ok(Box::new(TpcbWorker {
            db,
            tables: Tables::of(db)?,
            config: &self.config,
            rng: SplitMix64::new(seed),
            worker,
            history_sequence: 0,
        }))
    }

    fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        let tables = Tables::of(db)?;
        let txn = db.begin(Isolation::Snapshot);
        let sum_of = |table: TableId, column: usize| -> Result<(u64, i64), LabError> {
            let (mut rows, mut sum) = (0u64, 0i64);
            txn.scan_view(table, KeyRange::new(..), |row| {
                rows += 1;
                sum = sum.wrapping_add(row.get(column).as_i64().unwrap_or_default());
                true
            })?;
            Ok((rows, sum))
        };
        let (accounts, abalance) = sum_of(tables.accounts, ACCOUNT_BALANCE)?;
        let (tellers, tbalance) = sum_of(tables.tellers, TELLER_BALANCE)?;
        let (branches, bbalance) = sum_of(tables.branches, BRANCH_BALANCE)?;
        let (history, delta) = sum_of(tables.history, HISTORY_DELTA)?;
        txn.commit()?;
        self.judge(&TpcbTotals {
            accounts,
            tellers,
            branches,
            history,
            abalance,
            tbalance,
            bbalance,
            delta,
        })
    }

    fn sql(&self) -> Option<&dyn crate::peers::SqlWorkload> {
        Some(self)
    }
}

/// Row counts and balance sums of the four tables, read at one snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TpcbTotals {
    /// Rows of `pgbench_accounts`.
    pub accounts: u64,
    /// Rows of `pgbench_tellers`.
    pub tellers: u64,
    /// Rows of `pgbench_branches`.
    pub branches: u64,
    /// Rows of `pgbench_history`.
    pub history: u64,
    /// Sum of `abalance`.
    pub abalance: i64,
    /// Sum of `tbalance`.
    pub tbalance: i64,
    /// Sum of `bbalance`.
    pub bbalance: i64,
    /// Sum of the history's `delta`.
    pub delta: i64,
}

impl TpcbWorkload {
    /// The consistency conditions over `totals` (Verso's and every peer's): the loaded row
    /// counts, and four equal sums.
    pub fn judge(&self, totals: &TpcbTotals) -> Result<(), LabError> {
        let c = &self.config;
        let TpcbTotals {
            accounts,
            tellers,
            branches,
            history,
            abalance,
            tbalance,
            bbalance,
            delta,
        } = *totals;
        if (accounts, tellers, branches) != (c.accounts(), c.tellers(), c.branches()) {
            return Err(LabError::Inconsistent(format!(
                "tpcb has {accounts} accounts, {tellers} tellers, {branches} branches; loaded {}, {}, {}",
                c.accounts(),
                c.tellers(),
                c.branches()
            )));
        }
        if !(abalance == tbalance && tbalance == bbalance && bbalance == delta) {
            return Err(LabError::Inconsistent(format!(
                "tpcb balances differ: accounts {abalance}, tellers {tbalance}, branches {bbalance}, \
                 history deltas {delta} ({history} history rows)"
            )));
        }
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &TpcbConfig {
        &self.config
    }
}

/// One TPC-B transaction's input, drawn as pgbench draws it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TpcbInput {
    /// The account.
    pub aid: u64,
    /// The branch.
    pub bid: u64,
    /// The teller.
    pub tid: u64,
    /// The amount added to each balance.
    pub delta: i64,
}

impl TpcbInput {
    /// pgbench's `random(lb, ub)` for each (uniform, both ends included), in its order.
    pub fn draw(config: &TpcbConfig, rng: &mut SplitMix64) -> TpcbInput {
        let aid = 1 + rng.below(config.accounts());
        let bid = 1 + rng.below(config.branches());
        let tid = 1 + rng.below(config.tellers());
        let delta = rng.below(10_001) as i64 - 5_000;
        TpcbInput {
            aid,
            bid,
            tid,
            delta,
        }
    }
}

/// The history key of worker `worker`'s `sequence`-th transaction: the worker's number
/// (plus one) in the high bits, its own sequence number below, so workers never collide.
pub fn history_key(worker: usize, sequence: u64) -> u64 {
    debug_assert!(sequence < 1 << HISTORY_SEQUENCE_BITS);
    ((worker as u64 + 1) << HISTORY_SEQUENCE_BITS) | sequence
}

/// The time pgbench stores in `mtime`, as microseconds since the epoch.
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// What one TPC-B transaction does, counted by pgbench's statements: three updates, a read
/// and an insert (the history row it adds).
pub const TPCB_WORK: Work = Work {
    operations: 5,
    rows_added: 1,
};

/// Bits of a history key that hold the worker's own sequence number.
const HISTORY_SEQUENCE_BITS: u32 = 40;

struct TpcbWorker<'db> {
    db: &'db Database,
    tables: Tables,
    config: &'db TpcbConfig,
    rng: SplitMix64,
    worker: usize,
    history_sequence: u64,
}

/// `UPDATE table SET balance = balance + delta WHERE key = id`: read, then write. `Ok(false)`
/// if the row is missing.
fn add_to_balance(
    txn: &mut verso::Transaction<'_>,
    table: TableId,
    id: u64,
    column: usize,
    delta: i64,
) -> verso::Result<bool> {
    let key = [Value::U64(id)];
    let Some(balance) = txn.get_view(table, &key, |row| row.get(column).as_i64())? else {
        return Ok(false);
    };
    txn.update(
        table,
        &key,
        &[(column, Value::I64(balance.unwrap_or_default() + delta))],
    )
}

impl OltpWorker for TpcbWorker<'_> {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        let TpcbInput {
            aid,
            bid,
            tid,
            delta,
        } = TpcbInput::draw(self.config, &mut self.rng);
        self.history_sequence += 1;
        let hid = history_key(self.worker, self.history_sequence);
        let mtime = now_micros();
        let t = &self.tables;
        let mut missing: Option<String> = None;
        let result = (|| {
            let mut txn = self.db.begin(isolation);
            if !add_to_balance(&mut txn, t.accounts, aid, ACCOUNT_BALANCE, delta)? {
                missing = Some(format!("account {aid}"));
            }
            let balance = txn.get_view(t.accounts, &[Value::U64(aid)], |row| {
                row.get(ACCOUNT_BALANCE).as_i64()
            })?;
            std::hint::black_box(balance);
            if !add_to_balance(&mut txn, t.tellers, tid, TELLER_BALANCE, delta)? {
                missing = Some(format!("teller {tid}"));
            }
            if !add_to_balance(&mut txn, t.branches, bid, BRANCH_BALANCE, delta)? {
                missing = Some(format!("branch {bid}"));
            }
            if missing.is_some() {
                txn.abort();
                return Ok(());
            }
            txn.insert(
                t.history,
                &[
                    Value::U64(hid),
                    Value::U64(tid),
                    Value::U64(bid),
                    Value::U64(aid),
                    Value::I64(delta),
                    Value::I64(mtime),
                    Value::Null,
                ],
            )?;
            crate::clients::commit(txn)
        })();
        if let Some(what) = missing {
            return Err(LabError::Inconsistent(format!("tpcb: {what} is missing")));
        }
        TxnOutcome::of(0, TPCB_WORK, result)
    }
}
