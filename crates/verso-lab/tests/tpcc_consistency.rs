//! TPC-C's twelve consistency conditions (clause 3.3.2): they hold after the load, and each
//! one catches a corruption made directly in the data (a check that cannot fail would be
//! worthless).

use verso::{Database, Isolation, Options, Transaction, Value};
use verso_lab::workload::{LabError, NoProgress, Workload};
use verso_lab::workloads::tpcc::consistency::violations;
use verso_lab::workloads::tpcc::schema::{
    customer, district, history, order_line, orders, warehouse, Tables,
};
use verso_lab::workloads::tpcc::{Tpcc, TpccConfig};

fn loaded() -> Result<(Tpcc, Database), LabError> {
    let tpcc = Tpcc::new(TpccConfig::tiny())?;
    let db = Database::open(Options::default())?;
    tpcc.load(&db, &NoProgress)?;
    Ok((tpcc, db))
}

/// Applies `change` in one committed transaction.
fn corrupt(
    db: &Database,
    change: impl FnOnce(&mut Transaction<'_>, &Tables) -> verso::Result<()>,
) -> Result<(), LabError> {
    let tables = Tables::open(db)?;
    let mut txn = db.begin(Isolation::Snapshot);
    change(&mut txn, &tables)?;
    txn.commit()?;
    Ok(())
}

/// The numbers of the failed conditions.
fn failed(db: &Database) -> Result<Vec<u8>, LabError> {
    Ok(violations(db)?.iter().map(|v| v.condition).collect())
}

fn i(values: &[i64]) -> Vec<Value> {
    values.iter().map(|&v| Value::I64(v)).collect()
}

/// Adds `delta` to an F64 column.
fn add_money(
    txn: &mut Transaction<'_>,
    table: verso::TableId,
    key: &[Value],
    column: usize,
    delta: f64,
) -> verso::Result<()> {
    let row = txn.get(table, key)?.expect("the row exists");
    let value = row[column].as_f64().expect("a money column");
    assert!(txn.update(table, key, &[(column, Value::F64(value + delta))])?);
    Ok(())
}

/// Asserts exactly `expected` fail, and that the workload's check names the first.
fn assert_caught(tpcc: &Tpcc, db: &Database, expected: &[u8]) -> Result<(), LabError> {
    assert_eq!(failed(db)?, expected, "{:#?}", violations(db)?);
    match tpcc.check_consistency(db) {
        Err(LabError::Inconsistent(message)) => assert!(
            message.contains(&format!("condition {} (", expected[0])),
            "{message}"
        ),
        other => panic!("expected condition {} to fail, got {other:?}", expected[0]),
    }
    Ok(())
}

// Tiny scale: districts (1..=2) of warehouses (1..=2); orders 1..=21 delivered, 22..=30 new.

#[test]
fn all_twelve_hold_after_the_load() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    assert_eq!(violations(&db)?, vec![]);
    tpcc.check_consistency(&db)
}

#[test]
fn condition_1_warehouse_ytd() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        add_money(txn, t.warehouse, &i(&[1]), warehouse::W_YTD, 1.0)
    })?;
    // W_YTD is also the history's sum (8).
    assert_caught(&tpcc, &db, &[1, 8])
}

#[test]
fn condition_2_next_order_id() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        assert!(txn.update(
            t.district,
            &i(&[1, 2]),
            &[(district::D_NEXT_O_ID, Value::I64(32))]
        )?);
        Ok(())
    })?;
    assert_caught(&tpcc, &db, &[2])
}

#[test]
fn condition_3_new_order_gap() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        assert!(txn.delete(t.new_order, &i(&[2, 1, 25]))?);
        Ok(())
    })?;
    // The order without its new-order row (5) and one fewer new order than ids (11).
    assert_caught(&tpcc, &db, &[3, 5, 11])
}

#[test]
fn condition_4_order_line_count_per_district() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        let mut row = txn
            .get(t.order_line, &i(&[1, 1, 25, 1]))?
            .expect("line exists");
        row[order_line::OL_O_ID] = Value::I64(999); // a line of no order
        txn.insert(t.order_line, &row)
    })?;
    assert_caught(&tpcc, &db, &[4])
}

#[test]
fn condition_5_carrier_set_on_a_new_order() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        assert!(txn.update(
            t.orders,
            &i(&[1, 2, 27]),
            &[(orders::O_CARRIER_ID, Value::I64(3))]
        )?);
        Ok(())
    })?;
    // Its lines are undelivered while the carrier is set (7).
    assert_caught(&tpcc, &db, &[5, 7])
}

#[test]
fn condition_6_order_line_count_of_an_order() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        let count = txn.get(t.orders, &i(&[2, 2, 5]))?.expect("order exists")[orders::O_OL_CNT]
            .as_i64()
            .expect("an integer");
        assert!(txn.update(
            t.orders,
            &i(&[2, 2, 5]),
            &[(orders::O_OL_CNT, Value::I64(count + 1))]
        )?);
        Ok(())
    })?;
    // The district's sum of o_ol_cnt is off too (4).
    assert_caught(&tpcc, &db, &[4, 6])
}

#[test]
fn condition_7_delivery_date_of_a_delivered_line() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        assert!(txn.update(
            t.order_line,
            &i(&[1, 1, 1, 2]),
            &[(order_line::OL_DELIVERY_D, Value::Null)]
        )?);
        Ok(())
    })?;
    // Delivered lines of the initial population have amount 0, so no balance moves.
    assert_caught(&tpcc, &db, &[7])
}

#[test]
fn condition_8_history_amount() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        add_money(txn, t.history, &i(&[1, 1, 1, 1]), history::H_AMOUNT, 0.01)
    })?;
    // One cent off is caught at every level that sums history: warehouse, district,
    // customer.
    assert_caught(&tpcc, &db, &[8, 9, 10])
}

#[test]
fn condition_9_district_ytd() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        // Moved between districts: the warehouse's sums still agree.
        add_money(txn, t.district, &i(&[2, 1]), district::D_YTD, 5.0)?;
        add_money(txn, t.district, &i(&[2, 2]), district::D_YTD, -5.0)
    })?;
    assert_caught(&tpcc, &db, &[9])
}

#[test]
fn condition_10_customer_balance() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        add_money(txn, t.customer, &i(&[1, 2, 17]), customer::C_BALANCE, -0.01)
    })?;
    assert_caught(&tpcc, &db, &[10, 12])
}

#[test]
fn condition_11_delivered_order_lost() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        let count = txn.get(t.orders, &i(&[1, 1, 3]))?.expect("order exists")[orders::O_OL_CNT]
            .as_i64()
            .expect("an integer");
        assert!(txn.delete(t.orders, &i(&[1, 1, 3]))?);
        for number in 1..=count {
            assert!(txn.delete(t.order_line, &i(&[1, 1, 3, number]))?);
        }
        Ok(())
    })?;
    assert_caught(&tpcc, &db, &[11])
}

#[test]
fn condition_12_customer_ytd_payment() -> Result<(), LabError> {
    let (tpcc, db) = loaded()?;
    corrupt(&db, |txn, t| {
        add_money(
            txn,
            t.customer,
            &i(&[2, 1, 30]),
            customer::C_YTD_PAYMENT,
            100.0,
        )
    })?;
    assert_caught(&tpcc, &db, &[12])
}
