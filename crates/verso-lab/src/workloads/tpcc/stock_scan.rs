//! StockScan, the analytical query Wu et al. add to TPC-C (§7.1 of "An Empirical Evaluation
//! of In-Memory Multi-Version Concurrency Control"): a read-only scan of the whole STOCK
//! table that counts the items of each warehouse. It runs at a snapshot of its own while
//! New-Order keeps updating stock rows, so it reads through version chains.

use verso::{Database, Isolation, KeyRange};

use super::schema::{stock, Tables};
use crate::workload::{AbortReason, LabError, OlapWorker, QueryOutcome};

/// Index of StockScan in [`super::QUERY_NAMES`].
pub const STOCK_SCAN: usize = 0;

/// What one StockScan computed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StockScanResult {
    /// Stock rows (items) per warehouse; index `w - 1` for warehouse `w`.
    pub items_per_warehouse: Vec<u64>,
    /// Sum of `s_quantity` per warehouse (what the scan reads besides the key).
    pub quantity_per_warehouse: Vec<i64>,
    /// Rows read.
    pub scanned_tuples: u64,
}

/// Runs StockScan in its own snapshot transaction.
pub fn stock_scan(
    db: &Database,
    tables: &Tables,
    warehouses: u32,
) -> Result<StockScanResult, LabError> {
    let mut result = StockScanResult {
        items_per_warehouse: vec![0; warehouses as usize],
        quantity_per_warehouse: vec![0; warehouses as usize],
        scanned_tuples: 0,
    };
    let mut out_of_range = None;
    let txn = db.begin_read_only(Isolation::Snapshot);
    txn.scan_view(tables.stock, KeyRange::new(..), |row| {
        result.scanned_tuples += 1;
        let warehouse = row.get(stock::S_W_ID).as_i64().unwrap_or(0);
        let slot = usize::try_from(warehouse - 1)
            .ok()
            .filter(|&slot| slot < result.items_per_warehouse.len());
        match slot {
            Some(slot) => {
                result.items_per_warehouse[slot] += 1;
                result.quantity_per_warehouse[slot] +=
                    row.get(stock::S_QUANTITY).as_i64().unwrap_or(0);
                true
            }
            None => {
                out_of_range = Some(warehouse);
                false
            }
        }
    })?;
    txn.commit()?;
    if let Some(warehouse) = out_of_range {
        return Err(LabError::Inconsistent(format!(
            "StockScan found a stock row of warehouse {warehouse}, outside 1..={warehouses}"
        )));
    }
    Ok(result)
}

/// An OLAP worker that runs StockScan over and over.
pub struct StockScanWorker<'db> {
    db: &'db Database,
    tables: Tables,
    warehouses: u32,
}

impl<'db> StockScanWorker<'db> {
    /// A worker on a loaded TPC-C database of `warehouses` warehouses.
    pub fn new(db: &'db Database, warehouses: u32) -> Result<Self, LabError> {
        Ok(StockScanWorker {
            db,
            tables: Tables::open(db)?,
            warehouses,
        })
    }
}

impl OlapWorker for StockScanWorker<'_> {
    fn run_one(&mut self) -> Result<QueryOutcome, LabError> {
        let result = loop {
            match stock_scan(self.db, &self.tables, self.warehouses) {
                Ok(result) => break result,
                // Lost a conflict: under MVTO even a READ ONLY snapshot meets write locks
                // (docs/known-issues.md). Scan again, as every worker retries a lost
                // conflict (`regression_stock_scan_retries_a_scan_that_met_a_write_lock`).
                Err(LabError::Engine(error)) if AbortReason::of(&error).is_some() => continue,
                Err(error) => return Err(error),
            }
        };
        Ok(QueryOutcome {
            query: STOCK_SCAN,
            scanned_tuples: result.scanned_tuples,
        })
    }
}
