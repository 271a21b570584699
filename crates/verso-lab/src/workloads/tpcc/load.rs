//! The initial population of clause 4.3.3.1, scaled by [`TpccConfig`].
//!
//! Deterministic in the seed: ITEM draws from one stream, each warehouse from its own, so
//! the data does not depend on how many threads load it. Warehouses load in parallel (one
//! thread per core at most); rows are committed in batches so no transaction grows large.

use verso::{Database, Isolation, TableId, Transaction, Value};

use super::random::{last_name, TpccRandom};
use super::schema::{from_cents, Tables};
use super::{TpccConfig, LOAD_TIME_MICROS};
use crate::workload::{LabError, LoadProgress};

/// Rows per load transaction: large enough that commits cost nothing, small enough that
/// one transaction's write set stays a few hundred kilobytes.
const ROWS_PER_COMMIT: usize = 1_000;

/// Expected order lines per order (5..=15 uniformly), for the progress total.
const MEAN_ORDER_LINES: u64 = 10;

/// Creates the nine tables and loads them. Returns the number of rows loaded.
pub fn load(
    db: &Database,
    config: &TpccConfig,
    progress: &dyn LoadProgress,
) -> Result<u64, LabError> {
    config.validate()?;
    let tables = Tables::create(db)?;
    progress.set_total(expected_rows(config));

    let mut loaded = {
        let mut batch = Batch::new(db, progress);
        load_items(&mut batch, &tables, config)?;
        batch.finish()?
    };

    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(config.warehouses as usize)
        .max(1);
    let results: Vec<Result<u64, LabError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let tables = &tables;
                scope.spawn(move || -> Result<u64, LabError> {
                    let mut batch = Batch::new(db, progress);
                    let mut warehouse = 1 + thread as i64;
                    while warehouse <= i64::from(config.warehouses) {
                        load_warehouse(&mut batch, tables, config, warehouse)?;
                        warehouse += threads as i64;
                    }
                    batch.finish()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(LabError::ThreadFailed(
                        "a TPC-C loader thread panicked".into(),
                    ))
                })
            })
            .collect()
    });
    for result in results {
        loaded += result?;
    }
    // The order-line count is random; let the progress end exactly at what was loaded.
    progress.set_total(loaded);
    Ok(loaded)
}

/// The expected number of rows (order lines at their mean).
pub fn expected_rows(config: &TpccConfig) -> u64 {
    let items = u64::from(config.items);
    let districts = u64::from(config.districts_per_warehouse);
    let customers = u64::from(config.customers_per_district);
    let new_orders = config.initial_new_orders_per_district() as u64;
    let per_district = 1 + customers * (3 + MEAN_ORDER_LINES) + new_orders;
    items + u64::from(config.warehouses) * (1 + items + districts * per_district)
}

/// Inserts rows in transactions of [`ROWS_PER_COMMIT`] rows.
struct Batch<'db, 'p> {
    db: &'db Database,
    progress: &'p dyn LoadProgress,
    txn: Option<Transaction<'db>>,
    rows_in_txn: usize,
    rows_total: u64,
}

impl<'db, 'p> Batch<'db, 'p> {
    fn new(db: &'db Database, progress: &'p dyn LoadProgress) -> Self {
        Batch {
            db,
            progress,
            txn: None,
            rows_in_txn: 0,
            rows_total: 0,
        }
    }

    fn insert(&mut self, table: TableId, row: &[Value]) -> Result<(), LabError> {
        let db = self.db;
        let txn = self
            .txn
            .get_or_insert_with(|| db.begin(Isolation::Snapshot));
        txn.insert(table, row)?;
        self.rows_in_txn += 1;
        if self.rows_in_txn >= ROWS_PER_COMMIT {
            self.commit()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), LabError> {
        if let Some(txn) = self.txn.take() {
            txn.commit()?;
            self.progress.advance(self.rows_in_txn as u64);
            self.rows_total += self.rows_in_txn as u64;
            self.rows_in_txn = 0;
        }
        Ok(())
    }

    /// Commits the last batch and returns the number of rows inserted.
    fn finish(mut self) -> Result<u64, LabError> {
        self.commit()?;
        Ok(self.rows_total)
    }
}

fn text(value: impl Into<String>) -> Value {
    Value::Text(value.into())
}

fn load_items(batch: &mut Batch, tables: &Tables, config: &TpccConfig) -> Result<(), LabError> {
    let mut random = TpccRandom::new(config.seed ^ 0x6974_656d); // "item"
    for i_id in 1..=i64::from(config.items) {
        let row = [
            Value::I64(i_id),
            Value::I64(random.uniform(1, 10_000)),
            text(random.a_string(14, 24)),
            Value::F64(from_cents(random.cents(100, 10_000))),
            text(random.data_maybe_original(26, 50)),
        ];
        batch.insert(tables.item, &row)?;
    }
    Ok(())
}

/// The seed of warehouse `w`'s stream: independent of the thread that loads it.
fn warehouse_seed(config: &TpccConfig, warehouse: i64) -> u64 {
    config
        .seed
        .wrapping_add((warehouse as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A street, a second street line, a city, a state and a zip code (clause 4.3.3.1),
/// drawn in that order.
fn address(random: &mut TpccRandom) -> [Value; 5] {
    [
        text(random.a_string(10, 20)),
        text(random.a_string(10, 20)),
        text(random.a_string(10, 20)),
        text(random.state()),
        text(random.zip()),
    ]
}

fn load_warehouse(
    batch: &mut Batch,
    tables: &Tables,
    config: &TpccConfig,
    w_id: i64,
) -> Result<(), LabError> {
    let mut random = TpccRandom::new(warehouse_seed(config, w_id));
    let customers = i64::from(config.customers_per_district);
    let district_ytd_cents = customers * 1_000; // 10.00 of initial payment per customer
    let warehouse_ytd_cents = district_ytd_cents * i64::from(config.districts_per_warehouse);

    let warehouse_row = [
        &[Value::I64(w_id), text(random.a_string(6, 10))][..],
        &address(&mut random),
        &[
            Value::F64(random.rate(2_000)),
            Value::F64(from_cents(warehouse_ytd_cents)),
        ],
    ]
    .concat();
    batch.insert(tables.warehouse, &warehouse_row)?;

    for s_i_id in 1..=i64::from(config.items) {
        let mut row = Vec::with_capacity(17);
        row.push(Value::I64(s_i_id));
        row.push(Value::I64(w_id));
        row.push(Value::I64(random.uniform(10, 100)));
        for _ in 0..10 {
            row.push(text(random.a_string(24, 24)));
        }
        row.push(Value::I64(0)); // s_ytd
        row.push(Value::I64(0)); // s_order_cnt
        row.push(Value::I64(0)); // s_remote_cnt
        row.push(text(random.data_maybe_original(26, 50)));
        batch.insert(tables.stock, &row)?;
    }

    for d_id in 1..=i64::from(config.districts_per_warehouse) {
        load_district(
            batch,
            tables,
            config,
            &mut random,
            w_id,
            d_id,
            district_ytd_cents,
        )?;
    }
    Ok(())
}

fn load_district(
    batch: &mut Batch,
    tables: &Tables,
    config: &TpccConfig,
    random: &mut TpccRandom,
    w_id: i64,
    d_id: i64,
    district_ytd_cents: i64,
) -> Result<(), LabError> {
    let customers = i64::from(config.customers_per_district);
    let orders = config.orders_per_district();
    let first_new_order = config.first_new_order_id();
    let district_row = [
        &[
            Value::I64(d_id),
            Value::I64(w_id),
            text(random.a_string(6, 10)),
        ][..],
        &address(random),
        &[
            Value::F64(random.rate(2_000)),
            Value::F64(from_cents(district_ytd_cents)),
            Value::I64(orders + 1),
        ],
    ]
    .concat();
    batch.insert(tables.district, &district_row)?;

    let constants = config.nurand_constants();
    for c_id in 1..=customers {
        // The first 1,000 customers take every last name once; the rest are NURand-skewed.
        let name_number = if c_id <= 1_000 {
            c_id - 1
        } else {
            random.nurand(255, 0, 999, constants.last_name_load)
        };
        let credit = if random.percent(10) { "BC" } else { "GC" };
        let customer_row = [
            &[
                Value::I64(c_id),
                Value::I64(d_id),
                Value::I64(w_id),
                text(random.a_string(8, 16)),
                text("OE"),
                text(last_name(name_number)),
            ][..],
            &address(random),
            &[
                text(random.n_string(16)),
                Value::I64(LOAD_TIME_MICROS),
                text(credit),
                Value::F64(from_cents(5_000_000)),
                Value::F64(random.rate(5_000)),
                Value::F64(from_cents(-1_000)),
                Value::F64(from_cents(1_000)),
                Value::I64(1),
                Value::I64(0),
                text(random.a_string(300, 500)),
            ],
        ]
        .concat();
        batch.insert(tables.customer, &customer_row)?;
        let history_row = [
            Value::I64(c_id),
            Value::I64(d_id),
            Value::I64(w_id),
            Value::I64(d_id),
            Value::I64(w_id),
            Value::I64(LOAD_TIME_MICROS),
            Value::F64(from_cents(1_000)),
            text(random.a_string(12, 24)),
            Value::I64(1), // h_seq: the customer's first payment
        ];
        batch.insert(tables.history, &history_row)?;
    }

    let ordering_customers = random.permutation(customers);
    for o_id in 1..=orders {
        let delivered = o_id < first_new_order;
        let line_count = random.uniform(5, 15);
        let order_row = [
            Value::I64(o_id),
            Value::I64(d_id),
            Value::I64(w_id),
            Value::I64(ordering_customers[(o_id - 1) as usize]),
            Value::I64(LOAD_TIME_MICROS),
            if delivered {
                Value::I64(random.uniform(1, 10))
            } else {
                Value::Null
            },
            Value::I64(line_count),
            Value::I64(1),
        ];
        batch.insert(tables.orders, &order_row)?;
        for ol_number in 1..=line_count {
            let line_row = [
                Value::I64(o_id),
                Value::I64(d_id),
                Value::I64(w_id),
                Value::I64(ol_number),
                Value::I64(random.uniform(1, i64::from(config.items))),
                Value::I64(w_id),
                if delivered {
                    Value::I64(LOAD_TIME_MICROS)
                } else {
                    Value::Null
                },
                Value::I64(5),
                Value::F64(if delivered {
                    0.0
                } else {
                    from_cents(random.cents(1, 999_999))
                }),
                text(random.a_string(24, 24)),
            ];
            batch.insert(tables.order_line, &line_row)?;
        }
        if !delivered {
            batch.insert(
                tables.new_order,
                &[Value::I64(o_id), Value::I64(d_id), Value::I64(w_id)],
            )?;
        }
    }
    Ok(())
}
