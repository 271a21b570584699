//! CH-benCHmark (Cole et al., "The mixed workload CH-benCHmark", DBTest 2011): TPC-C's
//! tables and transactions plus SUPPLIER, NATION and REGION, and 22 analytical queries
//! adapted from TPC-H, run in a stream beside the OLTP workers. The Steam paper's §5
//! experiments use it, with OLAP throughput normalized by scanned tuples (Funke et al.).
//!
//! - [`schema`]: the three extra tables, their population, and the computed join keys;
//! - [`operators`]: scan at a snapshot, filter, hash join, aggregate, sort, limit;
//! - [`queries`]: Q1–Q22 as plans over those operators;
//! - [`naive`]: a second, deliberately simple evaluation of the 22 queries, for tests.
//!
//! Design notes and every adaptation of the published queries: `docs/design/ch.md`.

pub mod naive;
pub mod operators;
pub mod queries;
pub mod schema;

use std::ops::Deref;

use verso::{Database, Isolation};

use crate::workload::{LabError, LoadProgress, OlapWorker, OltpWorker, QueryOutcome, Workload};
use crate::workloads::tpcc::{Tpcc, TpccConfig};
use operators::{QueryResult, QueryScope};
use queries::{ChTables, QUERY_NAMES};
use schema::{nation, region, supplier, EXTRA_ROWS, NATIONS, REGIONS, SUPPLIER_COUNT};

/// The size and seed of a CH-benCHmark database: TPC-C's sizes (the extra tables have fixed
/// sizes: 10,000 suppliers, 62 nations, 5 regions), whose fields it derefs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChConfig(TpccConfig);

impl Deref for ChConfig {
    type Target = TpccConfig;

    fn deref(&self) -> &TpccConfig {
        &self.0
    }
}

impl ChConfig {
    /// The specification's cardinalities with `warehouses` warehouses.
    pub fn standard(warehouses: u32) -> Self {
        Self::from_tpcc(&TpccConfig::standard(warehouses))
    }

    /// A database small enough for debug-build tests in which most queries still return
    /// rows: 2 warehouses, 3 districts, 200 customers per district, 10,000 items (about
    /// 12,000 order lines). Fewer items than that leave the rare item predicates of Q9
    /// (`i_data like '%bb'`, one item in 3,844) without a single item.
    pub fn tiny() -> Self {
        ChConfig(TpccConfig {
            warehouses: 2,
            seed: 0x6368, // "ch"
            districts_per_warehouse: 3,
            customers_per_district: 200,
            items: 10_000,
        })
    }

    /// The CH configuration of a TPC-C configuration.
    pub fn from_tpcc(tpcc: &TpccConfig) -> Self {
        ChConfig(tpcc.clone())
    }

    /// This configuration with another number of warehouses.
    #[must_use]
    pub fn with_warehouses(self, warehouses: u32) -> Self {
        ChConfig(self.0.with_warehouses(warehouses))
    }

    /// This configuration with another seed.
    #[must_use]
    pub fn with_seed(self, seed: u64) -> Self {
        ChConfig(self.0.with_seed(seed))
    }

    /// The TPC-C part of the configuration.
    pub fn tpcc(&self) -> TpccConfig {
        self.0.clone()
    }
}

/// The CH-benCHmark workload: TPC-C's load, transactions and consistency checks, plus the
/// three extra tables and the 22 queries.
#[derive(Debug)]
pub struct Ch {
    config: ChConfig,
    tpcc: Tpcc,
}

impl Ch {
    /// A CH workload of this size. Fails if the configuration does not make sense.
    pub fn new(config: ChConfig) -> Result<Self, LabError> {
        let tpcc = Tpcc::new(config.tpcc())?;
        Ok(Ch { config, tpcc })
    }

    /// The configuration.
    pub fn config(&self) -> &ChConfig {
        &self.config
    }

    /// The TPC-C workload inside.
    pub fn tpcc(&self) -> &Tpcc {
        &self.tpcc
    }
}

/// Runs query `index` (0 for Q1) at a fresh snapshot of a loaded CH database and returns
/// its result and the number of base-table tuples it scanned.
pub fn run_query(db: &Database, index: usize) -> Result<(QueryResult, u64), LabError> {
    let tables = ChTables::open(db)?;
    run_query_on(db, &tables, index)
}

fn run_query_on(
    db: &Database,
    tables: &ChTables,
    index: usize,
) -> Result<(QueryResult, u64), LabError> {
    let txn = db.begin(Isolation::Snapshot);
    let (result, scanned_tuples) = {
        let scope = QueryScope::new(&txn);
        (
            queries::run_query(index, &scope, tables)?,
            scope.scanned_tuples(),
        )
    };
    txn.commit()?;
    Ok((result, scanned_tuples))
}

/// Passes TPC-C's load progress through, counting the extra tables' rows in the total.
struct WithExtraRows<'p>(&'p dyn LoadProgress);

impl LoadProgress for WithExtraRows<'_> {
    fn set_total(&self, rows: u64) {
        self.0.set_total(rows + EXTRA_ROWS);
    }

    fn advance(&self, rows: u64) {
        self.0.advance(rows);
    }
}

impl Workload for Ch {
    fn name(&self) -> &'static str {
        "ch"
    }

    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "CH-benCHmark, {} warehouse(s), {} districts/warehouse, {} customers/district, \
             {} items, {SUPPLIER_COUNT} suppliers",
            c.warehouses, c.districts_per_warehouse, c.customers_per_district, c.items
        )
    }

    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        let progress = WithExtraRows(progress);
        self.tpcc.load(db, &progress)?;
        schema::load(db, self.config.seed, &progress)
    }

    fn transaction_kinds(&self) -> Vec<String> {
        self.tpcc.transaction_kinds()
    }

    fn query_names(&self) -> &'static [&'static str] {
        &QUERY_NAMES
    }

    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError> {
        self.tpcc.oltp_worker(db, worker, workers, seed)
    }

    /// A stream of Q1..Q22, repeated; OLAP thread `worker` starts at query `worker mod 22`
    /// so that concurrent streams do not run the same query in lockstep.
    fn olap_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'db>>, LabError> {
        Ok(Some(Box::new(QueryStream {
            db,
            tables: ChTables::open(db)?,
            next_query: worker % QUERY_NAMES.len(),
        })))
    }

    /// TPC-C's consistency conditions, and the extra tables' fixed sizes (no transaction
    /// writes them).
    fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        self.tpcc.check_consistency(db)?;
        let txn = db.begin(Isolation::Snapshot);
        let expected = [
            (supplier::TABLE, SUPPLIER_COUNT as usize),
            (nation::TABLE, NATIONS.len()),
            (region::TABLE, REGIONS.len()),
        ];
        for (table, rows) in expected {
            let mut found = 0;
            txn.scan_view(db.table(table)?, verso::KeyRange::new(..), |_| {
                found += 1;
                true
            })?;
            if found != rows {
                return Err(LabError::Inconsistent(format!(
                    "ch: {table} has {found} rows, expected {rows}"
                )));
            }
        }
        txn.commit()?;
        Ok(())
    }

    fn sql(&self) -> Option<&dyn crate::peers::SqlWorkload> {
        Some(self)
    }
}

/// One OLAP thread's query stream: each query at a snapshot of its own, read only.
struct QueryStream<'db> {
    db: &'db Database,
    tables: ChTables,
    next_query: usize,
}

impl OlapWorker for QueryStream<'_> {
    fn run_one(&mut self) -> Result<QueryOutcome, LabError> {
        let query = self.next_query;
        self.next_query = (query + 1) % QUERY_NAMES.len();
        let (result, scanned_tuples) = run_query_on(self.db, &self.tables, query)?;
        // The stream measures the work, not the answer; keep the answer from being
        // optimized away all the same.
        std::hint::black_box(&result);
        Ok(QueryOutcome {
            query,
            scanned_tuples,
        })
    }
}
