//! TPC-C's initial population (clause 4.3.3.1), at the tiny scale.

mod common;

use common::rows_in;
use verso::{Database, Isolation, KeyRange, Options, Value};
use verso_lab::workload::{LabError, NoProgress, Workload};
use verso_lab::workloads::tpcc::schema::{self, Tables};
use verso_lab::workloads::tpcc::{expected_rows, Tpcc, TpccConfig};

#[test]
fn tiny_load_has_the_scaled_cardinalities() -> Result<(), LabError> {
    let config = TpccConfig::tiny();
    let db = Database::open(Options::default())?;
    Tpcc::new(config.clone())?.load(&db, &NoProgress)?;
    let tables = Tables::open(&db)?;
    let w = u64::from(config.warehouses);
    let districts = w * u64::from(config.districts_per_warehouse);
    let customers = districts * u64::from(config.customers_per_district);
    assert_eq!(rows_in(&db, tables.warehouse)?, w);
    assert_eq!(rows_in(&db, tables.district)?, districts);
    assert_eq!(rows_in(&db, tables.customer)?, customers);
    assert_eq!(rows_in(&db, tables.history)?, customers);
    assert_eq!(rows_in(&db, tables.orders)?, customers);
    assert_eq!(
        rows_in(&db, tables.new_order)?,
        districts * config.initial_new_orders_per_district() as u64
    );
    assert_eq!(rows_in(&db, tables.item)?, u64::from(config.items));
    assert_eq!(rows_in(&db, tables.stock)?, w * u64::from(config.items));
    let lines = rows_in(&db, tables.order_line)?;
    assert!((5 * customers..=15 * customers).contains(&lines), "{lines}");
    // The progress estimate counts order lines at their mean.
    let expected = expected_rows(&config);
    let loaded: u64 = [
        tables.warehouse,
        tables.district,
        tables.customer,
        tables.history,
        tables.new_order,
        tables.orders,
        tables.order_line,
        tables.item,
        tables.stock,
    ]
    .into_iter()
    .map(|t| rows_in(&db, t))
    .sum::<verso::Result<u64>>()?;
    assert!(
        loaded.abs_diff(expected) < expected / 10,
        "{loaded} vs {expected}"
    );

    // Every last name of the run-time range exists in every district.
    let txn = db.begin(Isolation::Snapshot);
    for number in 0..=config.last_name_max() {
        let name = verso_lab::workloads::tpcc::random::last_name(number);
        let prefix = vec![Value::I64(1), Value::I64(1), Value::Text(name.clone())];
        let mut customers = txn.scan_index(
            tables.customer,
            schema::customer::BY_NAME,
            KeyRange::prefix(prefix),
        )?;
        assert!(
            customers.next().transpose()?.is_some(),
            "no customer named {name}"
        );
    }
    Ok(())
}
