//! TPC-C (revision 5.11) with Wu et al.'s StockScan query.
//!
//! - [`schema`]: the nine tables, their columns (positions and names) and indexes;
//! - `load`: the initial population of clause 4.3.3.1;
//! - [`random`]: NURand, a-strings, last names;
//! - [`terminal`]: what each transaction is asked to do, drawn as the specification says;
//! - [`transactions`]: the five transactions and the terminal ([`TpccWorker`]);
//! - [`stock_scan`]: Wu et al.'s StockScan, the workload's analytical query;
//! - [`consistency`]: the twelve consistency conditions of clause 3.3.2;
//! - [`pacing`] and [`paced`]: terminals paced by keying and think times over a pool of
//!   connections (DBT2's model, `--terminals-per-warehouse`).
//!
//! Design notes, including where this departs from the specification:
//! `docs/design/tpcc.md`.

pub mod consistency;
mod load;
pub mod paced;
pub mod pacing;
pub mod random;
pub mod schema;
pub mod stock_scan;
pub mod terminal;
pub mod transactions;

use crate::workload::{LabError, LoadProgress, OlapWorker, OltpWorker, Workload};
use verso::Database;

pub use load::expected_rows;
use random::NurandConstants;
pub use stock_scan::{StockScanResult, StockScanWorker};
pub use transactions::TpccWorker;

/// The load date and time of every initial row (`c_since`, `o_entry_d`, `h_date`, ...):
/// 2024-01-01T00:00:00Z in microseconds since the Unix epoch. A constant, so the data
/// depends only on the seed.
pub const LOAD_TIME_MICROS: i64 = 1_704_067_200_000_000;

/// The size and seed of a TPC-C database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpccConfig {
    /// Number of warehouses: the scale factor W.
    pub warehouses: u32,
    /// Seed of the data and of the workers' random streams.
    pub seed: u64,
    /// Districts per warehouse (10 in the specification; at most 10, one `s_dist_XX` each).
    pub districts_per_warehouse: u32,
    /// Customers per district (3,000), which is also the initial orders per district.
    pub customers_per_district: u32,
    /// Items in the catalogue, and stock rows per warehouse (100,000).
    pub items: u32,
}

impl TpccConfig {
    /// The specification's cardinalities with `warehouses` warehouses.
    pub fn standard(warehouses: u32) -> Self {
        TpccConfig {
            warehouses,
            seed: 0x7470_6363, // "tpcc"
            districts_per_warehouse: 10,
            customers_per_district: 3_000,
            items: 100_000,
        }
    }

    /// A database small enough for debug-build tests that still takes every path: two
    /// warehouses (remote payments and remote stock), 2 districts, 30 customers per
    /// district (orders 1..=21 delivered, 22..=30 new), 1,000 items.
    pub fn tiny() -> Self {
        TpccConfig {
            warehouses: 2,
            seed: 0x7470_6363,
            districts_per_warehouse: 2,
            customers_per_district: 30,
            items: 1_000,
        }
    }

    /// This configuration with another number of warehouses.
    #[must_use]
    pub fn with_warehouses(mut self, warehouses: u32) -> Self {
        self.warehouses = warehouses;
        self
    }

    /// This configuration with another seed.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks the sizes make sense.
    pub fn validate(&self) -> Result<(), LabError> {
        let bad = |what: String| Err(LabError::BadOption(format!("tpcc: {what}")));
        if self.warehouses == 0 {
            return bad("at least one warehouse is needed".into());
        }
        if !(1..=10).contains(&self.districts_per_warehouse) {
            return bad(format!(
                "{} districts per warehouse; 1..=10 are possible (one s_dist_XX column each)",
                self.districts_per_warehouse
            ));
        }
        if self.customers_per_district < 10 {
            return bad(format!(
                "{} customers per district; at least 10 are needed",
                self.customers_per_district
            ));
        }
        if self.items < 100 {
            return bad(format!("{} items; at least 100 are needed", self.items));
        }
        Ok(())
    }

    /// Initial orders per district: one per customer (3,000).
    pub fn orders_per_district(&self) -> i64 {
        i64::from(self.customers_per_district)
    }

    /// Initial undelivered orders per district: the newest 30% (900 of 3,000).
    pub fn initial_new_orders_per_district(&self) -> i64 {
        self.orders_per_district() * 900 / 3_000
    }

    /// The id of the oldest initially undelivered order (2,101).
    pub fn first_new_order_id(&self) -> i64 {
        self.orders_per_district() - self.initial_new_orders_per_district() + 1
    }

    /// The largest last-name number a run asks for: NURand(255, 0, 999) in the
    /// specification, where the first 1,000 customers of each district take every name;
    /// with fewer customers, only the names they took, so a lookup by name finds someone.
    pub fn last_name_max(&self) -> i64 {
        (self.orders_per_district() - 1).min(999)
    }

    /// The NURand constants C for this seed.
    pub fn nurand_constants(&self) -> NurandConstants {
        NurandConstants::from_seed(self.seed)
    }
}

/// The TPC-C workload: the nine tables, the five transactions in the standard mix, the
/// twelve consistency conditions, and StockScan as its analytical query.
#[derive(Debug)]
pub struct Tpcc {
    config: TpccConfig,
}

impl Tpcc {
    /// A TPC-C workload of this size. Fails if the configuration does not make sense.
    pub fn new(config: TpccConfig) -> Result<Self, LabError> {
        config.validate()?;
        Ok(Tpcc { config })
    }

    /// The configuration.
    pub fn config(&self) -> &TpccConfig {
        &self.config
    }

    /// A terminal for OLTP thread `worker` of `workers`, with the concrete type (so tests
    /// and CH-benCHmark can run chosen transactions and read its counters).
    pub fn worker<'db>(
        &self,
        db: &'db Database,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<TpccWorker<'db>, LabError> {
        TpccWorker::new(db, &self.config, worker, workers, seed)
    }
}

/// The analytical queries, indexed by [`crate::workload::QueryOutcome`]'s `query`.
pub const QUERY_NAMES: &[&str] = &["StockScan"];

/// The names of the five transactions, indexed by [`crate::workload::TxnOutcome`]'s kind.
pub const TRANSACTION_KINDS: &[&str] = &[
    "NewOrder",
    "Payment",
    "OrderStatus",
    "Delivery",
    "StockLevel",
];

impl Workload for Tpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "TPC-C, {} warehouse(s), {} districts/warehouse, {} customers/district, {} items",
            c.warehouses, c.districts_per_warehouse, c.customers_per_district, c.items
        )
    }

    fn load(&self, db: &Database, progress: &dyn LoadProgress) -> Result<(), LabError> {
        load::load(db, &self.config, progress).map(drop)
    }

    fn transaction_kinds(&self) -> Vec<String> {
        TRANSACTION_KINDS
            .iter()
            .map(|&kind| kind.to_owned())
            .collect()
    }

    fn query_names(&self) -> &'static [&'static str] {
        QUERY_NAMES
    }

    fn oltp_worker<'db>(
        &'db self,
        db: &'db Database,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'db>, LabError> {
        Ok(Box::new(self.worker(db, worker, workers, seed)?))
    }

    fn olap_worker<'db>(
        &'db self,
        db: &'db Database,
        _worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'db>>, LabError> {
        Ok(Some(Box::new(StockScanWorker::new(
            db,
            self.config.warehouses,
        )?)))
    }

    fn check_consistency(&self, db: &Database) -> Result<(), LabError> {
        consistency::check(db)
    }

    fn sql(&self) -> Option<&dyn crate::peers::SqlWorkload> {
        Some(self)
    }
}
