//! The twelve consistency conditions of TPC-C clause 3.3.2, checked at one snapshot.
//!
//! All tables are read once, in primary-key order, into per-warehouse, per-district,
//! per-customer and per-order facts; each condition then walks its facts in key order
//! and reports its first offending row. Money is compared in whole cents (every stored
//! amount is a whole number of cents, see [`super::schema::to_cents`]), so the sums are
//! exact: no tolerance can hide a lost cent.
//!
//! Condition 11 as written (`count(ORDER) - count(NEW-ORDER) = 2100` per district) holds
//! only until the first Delivery, which removes a NEW-ORDER row and keeps its ORDER row.
//! What it expresses holds for ever: every order older than the district's oldest
//! undelivered order has been delivered, so `count(ORDER) - count(NEW-ORDER) =
//! min(NO_O_ID) - 1` (or `D_NEXT_O_ID - 1` when nothing is undelivered). On the initial
//! population that is the specification's 2,100 (scaled: `first_new_order_id() - 1`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use verso::{Database, Isolation, KeyRange, RowView, TableId, Transaction};

use super::schema::{
    customer, district, history, new_order, order_line, orders, to_cents, warehouse, Tables,
};
use crate::workload::LabError;

/// One failed condition, with its first offending row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The condition's number, 1..=12 (clause 3.3.2.1 to 3.3.2.12).
    pub condition: u8,
    /// The condition and the first row that breaks it.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TPC-C consistency condition {} ({}): {}",
            self.condition,
            STATEMENTS[usize::from(self.condition) - 1],
            self.detail
        )
    }
}

/// What each condition states, for messages.
pub const STATEMENTS: [&str; 12] = [
    "W_YTD = sum(D_YTD) per warehouse",
    "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) per district",
    "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW_ORDER) per district",
    "sum(O_OL_CNT) = count(ORDER_LINE) per district",
    "O_CARRIER_ID is null iff the order is in NEW_ORDER",
    "O_OL_CNT = count of the order's ORDER_LINE rows",
    "OL_DELIVERY_D is null iff its order's O_CARRIER_ID is null",
    "W_YTD = sum(H_AMOUNT) per warehouse",
    "D_YTD = sum(H_AMOUNT) per district",
    "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT) per customer",
    "count(ORDER) - count(NEW_ORDER) = min(NO_O_ID) - 1 per district (2100 after load)",
    "C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT) per customer",
];

/// Checks all twelve conditions; fails with [`LabError::Inconsistent`] naming the first
/// failed condition (lowest number) and its first offending row.
pub fn check(db: &Database) -> Result<(), LabError> {
    match violations(db)?.into_iter().next() {
        Some(violation) => Err(LabError::Inconsistent(violation.to_string())),
        None => Ok(()),
    }
}

type DistrictKey = (i64, i64);
type CustomerKey = (i64, i64, i64);
type OrderKey = (i64, i64, i64);

#[derive(Default)]
struct DistrictFacts {
    ytd_cents: i64,
    next_order_id: i64,
}

#[derive(Default)]
struct NewOrderFacts {
    min: Option<i64>,
    max: Option<i64>,
    count: i64,
}

#[derive(Default)]
struct OrderTotals {
    max: Option<i64>,
    count: i64,
    line_count_sum: i64,
}

struct OrderFacts {
    customer: i64,
    carrier_is_null: bool,
    line_count: i64,
    lines_seen: i64,
}

struct CustomerFacts {
    balance_cents: i64,
    ytd_payment_cents: i64,
}

/// Everything the conditions compare, gathered at one snapshot.
#[derive(Default)]
struct Facts {
    warehouse_ytd: BTreeMap<i64, i64>,
    districts: BTreeMap<DistrictKey, DistrictFacts>,
    customers: BTreeMap<CustomerKey, CustomerFacts>,
    history_by_warehouse: HashMap<i64, i64>,
    history_by_district: HashMap<DistrictKey, i64>,
    history_by_customer: HashMap<CustomerKey, i64>,
    new_orders: BTreeMap<DistrictKey, NewOrderFacts>,
    new_order_keys: BTreeSet<OrderKey>,
    order_totals: BTreeMap<DistrictKey, OrderTotals>,
    orders: BTreeMap<OrderKey, OrderFacts>,
    lines_by_district: BTreeMap<DistrictKey, i64>,
    delivered_by_customer: HashMap<CustomerKey, i64>,
    /// Condition 7 is checked while the lines stream by (there are many of them).
    first_delivery_mismatch: Option<String>,
}

/// Reads a column that the schema declares non-null.
fn int(row: &RowView<'_>, column: usize) -> i64 {
    row.get(column).as_i64().unwrap_or(i64::MIN)
}

fn cents(row: &RowView<'_>, column: usize) -> i64 {
    row.get(column).as_f64().map_or(i64::MIN, to_cents)
}

fn scan(
    txn: &Transaction<'_>,
    table: TableId,
    visit: impl FnMut(RowView<'_>) -> bool,
) -> Result<(), LabError> {
    txn.scan_view(table, KeyRange::new(..), visit)?;
    Ok(())
}

fn gather(db: &Database) -> Result<Facts, LabError> {
    let tables = Tables::open(db)?;
    let txn = db.begin_read_only(Isolation::Snapshot);
    let mut facts = Facts::default();
    scan(&txn, tables.warehouse, |row| {
        facts
            .warehouse_ytd
            .insert(int(&row, warehouse::W_ID), cents(&row, warehouse::W_YTD));
        true
    })?;
    scan(&txn, tables.district, |row| {
        facts.districts.insert(
            (int(&row, district::D_W_ID), int(&row, district::D_ID)),
            DistrictFacts {
                ytd_cents: cents(&row, district::D_YTD),
                next_order_id: int(&row, district::D_NEXT_O_ID),
            },
        );
        true
    })?;
    scan(&txn, tables.customer, |row| {
        facts.customers.insert(
            (
                int(&row, customer::C_W_ID),
                int(&row, customer::C_D_ID),
                int(&row, customer::C_ID),
            ),
            CustomerFacts {
                balance_cents: cents(&row, customer::C_BALANCE),
                ytd_payment_cents: cents(&row, customer::C_YTD_PAYMENT),
            },
        );
        true
    })?;
    scan(&txn, tables.history, |row| {
        let amount = cents(&row, history::H_AMOUNT);
        let (w, d) = (int(&row, history::H_W_ID), int(&row, history::H_D_ID));
        *facts.history_by_warehouse.entry(w).or_default() += amount;
        *facts.history_by_district.entry((w, d)).or_default() += amount;
        let paying = (
            int(&row, history::H_C_W_ID),
            int(&row, history::H_C_D_ID),
            int(&row, history::H_C_ID),
        );
        *facts.history_by_customer.entry(paying).or_default() += amount;
        true
    })?;
    scan(&txn, tables.new_order, |row| {
        let key = (
            int(&row, new_order::NO_W_ID),
            int(&row, new_order::NO_D_ID),
            int(&row, new_order::NO_O_ID),
        );
        let district = facts.new_orders.entry((key.0, key.1)).or_default();
        district.min = Some(district.min.map_or(key.2, |min| min.min(key.2)));
        district.max = Some(district.max.map_or(key.2, |max| max.max(key.2)));
        district.count += 1;
        facts.new_order_keys.insert(key);
        true
    })?;
    scan(&txn, tables.orders, |row| {
        let key = (
            int(&row, orders::O_W_ID),
            int(&row, orders::O_D_ID),
            int(&row, orders::O_ID),
        );
        let line_count = int(&row, orders::O_OL_CNT);
        let totals = facts.order_totals.entry((key.0, key.1)).or_default();
        totals.max = Some(totals.max.map_or(key.2, |max| max.max(key.2)));
        totals.count += 1;
        totals.line_count_sum += line_count;
        facts.orders.insert(
            key,
            OrderFacts {
                customer: int(&row, orders::O_C_ID),
                carrier_is_null: row.get(orders::O_CARRIER_ID).is_null(),
                line_count,
                lines_seen: 0,
            },
        );
        true
    })?;
    scan(&txn, tables.order_line, |row| {
        let key = (
            int(&row, order_line::OL_W_ID),
            int(&row, order_line::OL_D_ID),
            int(&row, order_line::OL_O_ID),
        );
        *facts.lines_by_district.entry((key.0, key.1)).or_default() += 1;
        let delivery_is_null = row.get(order_line::OL_DELIVERY_D).is_null();
        // A line without an order breaks condition 4 (its district's count); conditions
        // 6, 7 and 10 are about the lines of existing orders.
        if let Some(order) = facts.orders.get_mut(&key) {
            order.lines_seen += 1;
            if delivery_is_null != order.carrier_is_null && facts.first_delivery_mismatch.is_none()
            {
                facts.first_delivery_mismatch = Some(format!(
                    "order line (w={}, d={}, o={}, number={}) has ol_delivery_d {} but its \
                     order's o_carrier_id is {}",
                    key.0,
                    key.1,
                    key.2,
                    int(&row, order_line::OL_NUMBER),
                    if delivery_is_null { "null" } else { "set" },
                    if order.carrier_is_null { "null" } else { "set" },
                ));
            }
            if !delivery_is_null {
                *facts
                    .delivered_by_customer
                    .entry((key.0, key.1, order.customer))
                    .or_default() += cents(&row, order_line::OL_AMOUNT);
            }
        }
        true
    })?;
    txn.commit()?;
    Ok(facts)
}

fn money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", cents.abs() / 100, cents.abs() % 100)
}

fn fmt_option(value: Option<i64>) -> String {
    value.map_or_else(|| "none".into(), |v| v.to_string())
}

/// Every failed condition (at most one entry per condition, with its first offending row),
/// in condition order. Empty when the database is consistent.
pub fn violations(db: &Database) -> Result<Vec<Violation>, LabError> {
    let facts = gather(db)?;
    let mut found = Vec::new();
    let mut report = |condition: u8, detail: Option<String>| {
        if let Some(detail) = detail {
            found.push(Violation { condition, detail });
        }
    };

    // 1. W_YTD = sum(D_YTD).
    report(
        1,
        facts.warehouse_ytd.iter().find_map(|(&w, &w_ytd)| {
            let sum: i64 = facts
                .districts
                .range((w, i64::MIN)..=(w, i64::MAX))
                .map(|(_, d)| d.ytd_cents)
                .sum();
            (sum != w_ytd).then(|| {
                format!(
                    "warehouse {w}: w_ytd {} but its districts' d_ytd sum to {}",
                    money(w_ytd),
                    money(sum)
                )
            })
        }),
    );

    // 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID); the NEW_ORDER part only where the
    // district has new orders.
    report(
        2,
        facts.districts.iter().find_map(|(&(w, d), district)| {
            let last = district.next_order_id - 1;
            let max_order = facts.order_totals.get(&(w, d)).and_then(|t| t.max);
            let max_new_order = facts.new_orders.get(&(w, d)).and_then(|n| n.max);
            let orders_ok = max_order.unwrap_or(0) == last;
            let new_orders_ok = max_new_order.is_none_or(|max| max == last);
            (!orders_ok || !new_orders_ok).then(|| {
                format!(
                    "district (w={w}, d={d}): d_next_o_id - 1 = {last}, max(o_id) = {}, \
                     max(no_o_id) = {}",
                    fmt_option(max_order),
                    fmt_option(max_new_order)
                )
            })
        }),
    );

    // 3. max(NO_O_ID) - min(NO_O_ID) + 1 = count.
    report(
        3,
        facts.new_orders.iter().find_map(|(&(w, d), n)| {
            let (min, max) = (n.min.unwrap_or(0), n.max.unwrap_or(0));
            (max - min + 1 != n.count).then(|| {
                format!(
                    "district (w={w}, d={d}): new orders {min}..={max} but {} rows",
                    n.count
                )
            })
        }),
    );

    // 4. sum(O_OL_CNT) = count(ORDER_LINE), over every district that has either.
    let districts_with_orders_or_lines: BTreeSet<DistrictKey> = facts
        .order_totals
        .keys()
        .chain(facts.lines_by_district.keys())
        .copied()
        .collect();
    report(
        4,
        districts_with_orders_or_lines.iter().find_map(|&(w, d)| {
            let sum = facts
                .order_totals
                .get(&(w, d))
                .map_or(0, |t| t.line_count_sum);
            let lines = facts.lines_by_district.get(&(w, d)).copied().unwrap_or(0);
            (sum != lines).then(|| {
                format!("district (w={w}, d={d}): sum(o_ol_cnt) = {sum} but {lines} order lines")
            })
        }),
    );

    // 5. O_CARRIER_ID null iff in NEW_ORDER.
    report(
        5,
        facts.orders.iter().find_map(|(&(w, d, o), order)| {
            let in_new_order = facts.new_order_keys.contains(&(w, d, o));
            (order.carrier_is_null != in_new_order).then(|| {
                format!(
                    "order (w={w}, d={d}, o={o}): o_carrier_id is {} but the order is {}in \
                     new_order",
                    if order.carrier_is_null { "null" } else { "set" },
                    if in_new_order { "" } else { "not " }
                )
            })
        }),
    );

    // 6. O_OL_CNT = number of its lines.
    report(
        6,
        facts.orders.iter().find_map(|(&(w, d, o), order)| {
            (order.line_count != order.lines_seen).then(|| {
                format!(
                    "order (w={w}, d={d}, o={o}): o_ol_cnt = {} but {} order lines",
                    order.line_count, order.lines_seen
                )
            })
        }),
    );

    // 7. OL_DELIVERY_D null iff the order's O_CARRIER_ID null.
    report(7, facts.first_delivery_mismatch.clone());

    // 8. W_YTD = sum(H_AMOUNT) by H_W_ID.
    report(
        8,
        facts.warehouse_ytd.iter().find_map(|(&w, &w_ytd)| {
            let sum = facts.history_by_warehouse.get(&w).copied().unwrap_or(0);
            (sum != w_ytd).then(|| {
                format!(
                    "warehouse {w}: w_ytd {} but its history sums to {}",
                    money(w_ytd),
                    money(sum)
                )
            })
        }),
    );

    // 9. D_YTD = sum(H_AMOUNT) by (H_W_ID, H_D_ID).
    report(
        9,
        facts.districts.iter().find_map(|(&(w, d), district)| {
            let sum = facts.history_by_district.get(&(w, d)).copied().unwrap_or(0);
            (sum != district.ytd_cents).then(|| {
                format!(
                    "district (w={w}, d={d}): d_ytd {} but its history sums to {}",
                    money(district.ytd_cents),
                    money(sum)
                )
            })
        }),
    );

    // 10. C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT).
    report(
        10,
        facts.customers.iter().find_map(|(key, c)| {
            let delivered = facts.delivered_by_customer.get(key).copied().unwrap_or(0);
            let paid = facts.history_by_customer.get(key).copied().unwrap_or(0);
            (c.balance_cents != delivered - paid).then(|| {
                format!(
                    "customer (w={}, d={}, c={}): c_balance {} but delivered {} - paid {}",
                    key.0,
                    key.1,
                    key.2,
                    money(c.balance_cents),
                    money(delivered),
                    money(paid)
                )
            })
        }),
    );

    // 11. count(ORDER) - count(NEW_ORDER) = min(NO_O_ID) - 1 (see the module header).
    report(
        11,
        facts.districts.iter().find_map(|(&(w, d), district)| {
            let order_count = facts.order_totals.get(&(w, d)).map_or(0, |t| t.count);
            let new_orders = facts.new_orders.get(&(w, d));
            let new_order_count = new_orders.map_or(0, |n| n.count);
            let delivered_ids = match new_orders.and_then(|n| n.min) {
                Some(min) => min - 1,
                None => district.next_order_id - 1,
            };
            (order_count - new_order_count != delivered_ids).then(|| {
                format!(
                    "district (w={w}, d={d}): {order_count} orders - {new_order_count} new \
                     orders != {delivered_ids} orders older than the oldest new order"
                )
            })
        }),
    );

    // 12. C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT).
    report(
        12,
        facts.customers.iter().find_map(|(key, c)| {
            let delivered = facts.delivered_by_customer.get(key).copied().unwrap_or(0);
            (c.balance_cents + c.ytd_payment_cents != delivered).then(|| {
                format!(
                    "customer (w={}, d={}, c={}): c_balance {} + c_ytd_payment {} but \
                     delivered {}",
                    key.0,
                    key.1,
                    key.2,
                    money(c.balance_cents),
                    money(c.ytd_payment_cents),
                    money(delivered)
                )
            })
        }),
    );

    debug_assert!(found.windows(2).all(|w| w[0].condition < w[1].condition));
    Ok(found)
}
