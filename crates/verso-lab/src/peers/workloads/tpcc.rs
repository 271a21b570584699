//! TPC-C's five transactions in SQL (clauses 2.4-2.8), as a TPC-C driver for a SQL database
//! writes them: one explicit transaction each, prepared statements by primary key, the
//! customer-by-name lookup through the `customer_by_name` index, Stock-Level as one join.
//!
//! Inputs come from the same [`Terminal`] as Verso's worker (same mix, same keys from the
//! same seed), and every step mirrors Verso's (`workloads::tpcc::transactions`): rows are
//! read then written with the values computed in whole cents, so the twelve consistency
//! conditions can be checked exactly on every system. Order-Status and Stock-Level are
//! read-only transactions. StockScan, TPC-C's analytical query in the lab, is one scan of
//! STOCK grouped by warehouse.

use verso::Isolation;

use crate::peers::sql::{Session, SqlValue, TableDef, TxnMode};
use crate::peers::workloads::{attempt, one_row, BodyError, Flow, SqlWorkload};
use crate::peers::PeerKind;
use crate::workload::{LabError, OlapWorker, OltpWorker, QueryOutcome, TxnOutcome};
use crate::workloads::tpcc::schema::{
    customer, district, from_cents, history, item, new_order, order_line, orders, stock, to_cents,
    warehouse,
};
use crate::workloads::tpcc::terminal::{
    CustomerChoice, NewOrderInput, OrderItem, PaymentInput, Terminal,
};
use crate::workloads::tpcc::transactions::{
    DELIVERY, NEW_ORDER, ORDER_STATUS, PAYMENT, STOCK_LEVEL,
};
use crate::workloads::tpcc::{Tpcc, TpccConfig};

/// The nine tables as Verso's: the same columns, keys and secondary indexes.
pub fn tables() -> Vec<TableDef> {
    vec![
        TableDef::of_verso(warehouse::TABLE, warehouse::COLUMNS, warehouse::PRIMARY_KEY),
        TableDef::of_verso(district::TABLE, district::COLUMNS, district::PRIMARY_KEY),
        TableDef::of_verso(customer::TABLE, customer::COLUMNS, customer::PRIMARY_KEY)
            .index(customer::BY_NAME, customer::BY_NAME_COLUMNS),
        TableDef::of_verso(history::TABLE, history::COLUMNS, history::PRIMARY_KEY),
        TableDef::of_verso(new_order::TABLE, new_order::COLUMNS, new_order::PRIMARY_KEY),
        TableDef::of_verso(orders::TABLE, orders::COLUMNS, orders::PRIMARY_KEY)
            .index(orders::BY_CUSTOMER, orders::BY_CUSTOMER_COLUMNS),
        TableDef::of_verso(
            order_line::TABLE,
            order_line::COLUMNS,
            order_line::PRIMARY_KEY,
        ),
        TableDef::of_verso(item::TABLE, item::COLUMNS, item::PRIMARY_KEY),
        TableDef::of_verso(stock::TABLE, stock::COLUMNS, stock::PRIMARY_KEY),
    ]
}

const WAREHOUSE_TAX: &str = "SELECT w_tax FROM warehouse WHERE w_id = $1";
const DISTRICT_FOR_ORDER: &str =
    "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = $1 AND d_id = $2";
const DISTRICT_NEXT_ORDER: &str =
    "UPDATE district SET d_next_o_id = $1 WHERE d_w_id = $2 AND d_id = $3";
const CUSTOMER_FOR_ORDER: &str = "SELECT c_discount, c_last, c_credit FROM customer WHERE \
                                  c_w_id = $1 AND c_d_id = $2 AND c_id = $3";
const INSERT_ORDER: &str = "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, \
                            o_carrier_id, o_ol_cnt, o_all_local) VALUES ($1, $2, $3, $4, $5, \
                            NULL, $6, $7)";
const INSERT_NEW_ORDER: &str =
    "INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES ($1, $2, $3)";
const ITEM: &str = "SELECT i_price, i_name, i_data FROM item WHERE i_id = $1";
const UPDATE_STOCK: &str = "UPDATE stock SET s_quantity = $1, s_ytd = $2, s_order_cnt = $3, \
                            s_remote_cnt = $4 WHERE s_w_id = $5 AND s_i_id = $6";
const INSERT_ORDER_LINE: &str = "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, \
                                 ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, \
                                 ol_quantity, ol_amount, ol_dist_info) VALUES ($1, $2, $3, $4, \
                                 $5, $6, NULL, $7, $8, $9)";

const WAREHOUSE_FOR_PAYMENT: &str = "SELECT w_name, w_ytd FROM warehouse WHERE w_id = $1";
const WAREHOUSE_YTD: &str = "UPDATE warehouse SET w_ytd = $1 WHERE w_id = $2";
const DISTRICT_FOR_PAYMENT: &str =
    "SELECT d_name, d_ytd FROM district WHERE d_w_id = $1 AND d_id = $2";
const DISTRICT_YTD: &str = "UPDATE district SET d_ytd = $1 WHERE d_w_id = $2 AND d_id = $3";
/// By last name, in first-name order; ties in the order of the key, as Verso's index.
const CUSTOMERS_BY_NAME: &str = "SELECT c_id FROM customer WHERE c_w_id = $1 AND c_d_id = $2 \
                                 AND c_last = $3 ORDER BY c_first, c_id";
const CUSTOMER_FOR_PAYMENT: &str = "SELECT c_balance, c_ytd_payment, c_payment_cnt, \
                                    c_credit, c_data FROM customer WHERE c_w_id = $1 AND \
                                    c_d_id = $2 AND c_id = $3";
const CUSTOMER_PAYMENT: &str = "UPDATE customer SET c_balance = $1, c_ytd_payment = $2, \
                                c_payment_cnt = $3 WHERE c_w_id = $4 AND c_d_id = $5 AND \
                                c_id = $6";
const CUSTOMER_PAYMENT_DATA: &str = "UPDATE customer SET c_balance = $1, c_ytd_payment = $2, \
                                     c_payment_cnt = $3, c_data = $4 WHERE c_w_id = $5 AND \
                                     c_d_id = $6 AND c_id = $7";
const INSERT_HISTORY: &str = "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, \
                              h_w_id, h_date, h_amount, h_data, h_seq) VALUES ($1, $2, $3, \
                              $4, $5, $6, $7, $8, $9)";

const CUSTOMER_FOR_STATUS: &str = "SELECT c_balance, c_first, c_middle, c_last FROM customer \
                                   WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3";
const LATEST_ORDER: &str = "SELECT o_id, o_entry_d, o_carrier_id FROM orders WHERE o_w_id = \
                            $1 AND o_d_id = $2 AND o_c_id = $3 ORDER BY o_id DESC LIMIT 1";
const ORDER_LINES: &str = "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, \
                           ol_delivery_d FROM order_line WHERE ol_w_id = $1 AND ol_d_id = $2 \
                           AND ol_o_id = $3";

const OLDEST_NEW_ORDER: &str = "SELECT no_o_id FROM new_order WHERE no_w_id = $1 AND \
                                no_d_id = $2 ORDER BY no_o_id LIMIT 1";
const DELETE_NEW_ORDER: &str =
    "DELETE FROM new_order WHERE no_w_id = $1 AND no_d_id = $2 AND no_o_id = $3";
const ORDER_CUSTOMER: &str =
    "SELECT o_c_id FROM orders WHERE o_w_id = $1 AND o_d_id = $2 AND o_id = $3";
const ORDER_CARRIER: &str =
    "UPDATE orders SET o_carrier_id = $1 WHERE o_w_id = $2 AND o_d_id = $3 AND o_id = $4";
const ORDER_LINE_AMOUNTS: &str = "SELECT ol_amount FROM order_line WHERE ol_w_id = $1 AND \
                                  ol_d_id = $2 AND ol_o_id = $3";
const DELIVER_ORDER_LINES: &str = "UPDATE order_line SET ol_delivery_d = $1 WHERE ol_w_id = \
                                   $2 AND ol_d_id = $3 AND ol_o_id = $4";
const CUSTOMER_FOR_DELIVERY: &str = "SELECT c_balance, c_delivery_cnt FROM customer WHERE \
                                     c_w_id = $1 AND c_d_id = $2 AND c_id = $3";
const CUSTOMER_DELIVERY: &str = "UPDATE customer SET c_balance = $1, c_delivery_cnt = $2 \
                                 WHERE c_w_id = $3 AND c_d_id = $4 AND c_id = $5";

const DISTRICT_NEXT_ORDER_ID: &str =
    "SELECT d_next_o_id FROM district WHERE d_w_id = $1 AND d_id = $2";
const LOW_STOCK: &str = "SELECT count(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id = \
                         $1 AND ol_d_id = $2 AND ol_o_id < $3 AND ol_o_id >= $4 AND s_w_id = \
                         $1 AND s_i_id = ol_i_id AND s_quantity < $5";

const STOCK_SCAN: &str =
    "SELECT s_w_id, count(*), sum(s_quantity) FROM stock GROUP BY s_w_id ORDER BY s_w_id";

fn int(i: i64) -> SqlValue {
    SqlValue::Int(i)
}

fn money(cents: i64) -> SqlValue {
    SqlValue::Float(from_cents(cents))
}

/// The one row a lookup by key must find, or the inconsistency that names it.
fn the_row(
    mut rows: Vec<Vec<SqlValue>>,
    what: impl FnOnce() -> String,
) -> Result<Vec<SqlValue>, BodyError> {
    match rows.len() {
        1 => Ok(rows.swap_remove(0)),
        n => Err(BodyError::Lab(LabError::Inconsistent(format!(
            "{}: {n} rows, not 1",
            what()
        )))),
    }
}

/// Column `i` of `row` as an integer, or the inconsistency that names it.
fn int_at(row: &[SqlValue], i: usize, what: &str) -> Result<i64, BodyError> {
    row.get(i).and_then(SqlValue::as_i64).ok_or_else(|| {
        BodyError::Lab(LabError::Inconsistent(format!(
            "{what}: column {i} is {:?}, not an integer",
            row.get(i)
        )))
    })
}

/// Column `i` of `row` as money in cents.
fn cents_at(row: &[SqlValue], i: usize, what: &str) -> Result<i64, BodyError> {
    row.get(i)
        .and_then(SqlValue::as_f64)
        .map(to_cents)
        .ok_or_else(|| {
            BodyError::Lab(LabError::Inconsistent(format!(
                "{what}: column {i} is {:?}, not a number",
                row.get(i)
            )))
        })
}

/// Column `i` of `row` as text.
fn text_at<'r>(row: &'r [SqlValue], i: usize, what: &str) -> Result<&'r str, BodyError> {
    row.get(i).and_then(SqlValue::as_text).ok_or_else(|| {
        BodyError::Lab(LabError::Inconsistent(format!(
            "{what}: column {i} is {:?}, not text",
            row.get(i)
        )))
    })
}

/// The `stock` query of district `d` (its own `s_dist_XX`).
fn stock_query(d_id: i64) -> String {
    format!(
        "SELECT s_quantity, s_ytd, s_order_cnt, s_remote_cnt, s_data, s_dist_{d_id:02} FROM \
         stock WHERE s_w_id = $1 AND s_i_id = $2"
    )
}

impl SqlWorkload for Tpcc {
    fn tables(&self) -> Vec<TableDef> {
        tables()
    }

    fn snapshot_read(&self) -> &'static str {
        "SELECT w_ytd FROM warehouse WHERE w_id = 1"
    }

    fn oltp_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Box<dyn OltpWorker + 'a>, LabError> {
        Ok(Box::new(TpccSqlWorker::new(
            session,
            peer,
            self.config(),
            worker,
            workers,
            seed,
        )?))
    }

    fn olap_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        _worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'a>>, LabError> {
        Ok(Some(Box::new(StockScanSql { session, peer })))
    }

    fn check_consistency(&self, session: &mut dyn Session, peer: PeerKind) -> Result<(), LabError> {
        super::tpcc_consistency::check(session, peer)
    }
}

/// StockScan in SQL.
struct StockScanSql {
    session: Box<dyn Session>,
    peer: PeerKind,
}

impl OlapWorker for StockScanSql {
    fn run_one(&mut self) -> Result<QueryOutcome, LabError> {
        let rows = super::at_one_snapshot(&mut *self.session, self.peer, "StockScan", |s| {
            s.query(STOCK_SCAN, &[])
        })?;
        let scanned: i64 = rows
            .iter()
            .filter_map(|row| row.get(1).and_then(SqlValue::as_i64))
            .sum();
        Ok(QueryOutcome {
            query: crate::workloads::tpcc::stock_scan::STOCK_SCAN,
            scanned_tuples: scanned.max(0) as u64,
        })
    }
}

/// A TPC-C terminal on a peer.
pub struct TpccSqlWorker {
    session: Box<dyn Session>,
    peer: PeerKind,
    config: TpccConfig,
    terminal: Terminal,
    lines: Vec<OrderItem>,
    stock_queries: Vec<String>,
}

impl TpccSqlWorker {
    /// Terminal `worker` of `workers` on `session`, drawing from `seed` as Verso's does.
    pub fn new(
        session: Box<dyn Session>,
        peer: PeerKind,
        config: &TpccConfig,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<TpccSqlWorker, LabError> {
        Ok(TpccSqlWorker {
            session,
            peer,
            config: config.clone(),
            terminal: Terminal::new(config, worker, workers, seed)?,
            lines: Vec::with_capacity(15),
            stock_queries: (1..=10).map(stock_query).collect(),
        })
    }

    /// Runs one attempt of transaction `kind` (an index of the TPC-C transaction kinds).
    pub fn run(&mut self, kind: usize, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        let read_write = TxnMode::ReadWrite(isolation);
        let read_only = TxnMode::ReadOnly(isolation);
        let peer = self.peer;
        match kind {
            NEW_ORDER => {
                let input = self.terminal.new_order(&mut self.lines);
                let (lines, stock_queries, items) = (
                    &self.lines,
                    &self.stock_queries,
                    i64::from(self.config.items),
                );
                attempt(
                    &mut *self.session,
                    peer,
                    "New-Order",
                    read_write,
                    kind,
                    |s| new_order(s, input, lines, stock_queries, items),
                )
            }
            PAYMENT => {
                let input = self.terminal.payment();
                let last_name = self.terminal.last_name().to_owned();
                attempt(&mut *self.session, peer, "Payment", read_write, kind, |s| {
                    payment(s, input, &last_name)
                })
            }
            ORDER_STATUS => {
                let (w_id, d_id, customer) = self.terminal.order_status();
                let last_name = self.terminal.last_name().to_owned();
                attempt(
                    &mut *self.session,
                    peer,
                    "Order-Status",
                    read_only,
                    kind,
                    |s| order_status(s, w_id, d_id, customer, &last_name),
                )
            }
            DELIVERY => {
                let (w_id, carrier) = self.terminal.delivery();
                let districts = i64::from(self.config.districts_per_warehouse);
                attempt(
                    &mut *self.session,
                    peer,
                    "Delivery",
                    read_write,
                    kind,
                    |s| delivery(s, w_id, carrier, districts),
                )
            }
            STOCK_LEVEL => {
                let (w_id, d_id, threshold) = self.terminal.stock_level();
                attempt(
                    &mut *self.session,
                    peer,
                    "Stock-Level",
                    read_only,
                    kind,
                    |s| stock_level(s, w_id, d_id, threshold),
                )
            }
            _ => Err(LabError::BadOption(format!(
                "tpcc: no transaction kind {kind}"
            ))),
        }
    }
}

impl TpccSqlWorker {
    /// The worker's inputs (paced TPC-C swaps a terminal's in for an attempt:
    /// `crate::workloads::tpcc::paced::TerminalTransactions`).
    pub fn terminal_mut(&mut self) -> &mut Terminal {
        &mut self.terminal
    }
}

impl OltpWorker for TpccSqlWorker {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        let kind = self.terminal.next_kind();
        self.run(kind, isolation)
    }
}

/// Microseconds since the epoch, as Verso's TPC-C stamps dates.
fn now() -> SqlValue {
    int(crate::workloads::tpcc::transactions::now_micros())
}

fn new_order(
    s: &mut dyn Session,
    input: NewOrderInput,
    lines: &[OrderItem],
    stock_queries: &[String],
    items: i64,
) -> Result<Flow, BodyError> {
    let NewOrderInput { w_id, d_id, c_id } = input;
    let all_local = lines.iter().all(|l| l.supply_warehouse == w_id);
    let warehouse_row = the_row(s.query(WAREHOUSE_TAX, &[int(w_id)])?, || {
        format!("warehouse {w_id}")
    })?;
    let district_row = the_row(
        s.query(DISTRICT_FOR_ORDER, &[int(w_id), int(d_id)])?,
        || format!("district ({w_id}, {d_id})"),
    )?;
    let o_id = int_at(&district_row, 1, "district")?;
    one_row(
        s.execute(DISTRICT_NEXT_ORDER, &[int(o_id + 1), int(w_id), int(d_id)])?,
        || format!("district ({w_id}, {d_id})"),
    )?;
    let customer_row = the_row(
        s.query(CUSTOMER_FOR_ORDER, &[int(w_id), int(d_id), int(c_id)])?,
        || format!("customer ({w_id}, {d_id}, {c_id})"),
    )?;
    std::hint::black_box((&warehouse_row, &customer_row));
    one_row(
        s.execute(
            INSERT_ORDER,
            &[
                int(o_id),
                int(d_id),
                int(w_id),
                int(c_id),
                now(),
                int(lines.len() as i64),
                int(i64::from(all_local)),
            ],
        )?,
        || "the order's insert".to_owned(),
    )?;
    one_row(
        s.execute(INSERT_NEW_ORDER, &[int(o_id), int(d_id), int(w_id)])?,
        || "the new order's insert".to_owned(),
    )?;
    let stock_query = &stock_queries[(d_id - 1) as usize];
    for (index, line) in lines.iter().enumerate() {
        let item_rows = s.query(ITEM, &[int(line.item_id)])?;
        let Some(item_row) = item_rows.first() else {
            if line.item_id <= items {
                return Err(BodyError::Lab(LabError::Inconsistent(format!(
                    "item {} is missing",
                    line.item_id
                ))));
            }
            // The deliberate rollback (clause 2.4.2.3).
            return Ok(Flow::RollBack);
        };
        let price_cents = cents_at(item_row, 0, "item")?;
        let stock_row = the_row(
            s.query(
                stock_query,
                &[int(line.supply_warehouse), int(line.item_id)],
            )?,
            || format!("stock ({}, {})", line.supply_warehouse, line.item_id),
        )?;
        let quantity = int_at(&stock_row, 0, "stock")?;
        let ytd = int_at(&stock_row, 1, "stock")?;
        let order_count = int_at(&stock_row, 2, "stock")?;
        let remote_count = int_at(&stock_row, 3, "stock")?;
        let dist_info = text_at(&stock_row, 5, "stock")?.to_owned();
        let new_quantity = if quantity >= line.quantity + 10 {
            quantity - line.quantity
        } else {
            quantity - line.quantity + 91
        };
        let remote = line.supply_warehouse != w_id;
        one_row(
            s.execute(
                UPDATE_STOCK,
                &[
                    int(new_quantity),
                    int(ytd + line.quantity),
                    int(order_count + 1),
                    int(remote_count + i64::from(remote)),
                    int(line.supply_warehouse),
                    int(line.item_id),
                ],
            )?,
            || format!("stock ({}, {})", line.supply_warehouse, line.item_id),
        )?;
        one_row(
            s.execute(
                INSERT_ORDER_LINE,
                &[
                    int(o_id),
                    int(d_id),
                    int(w_id),
                    int(index as i64 + 1),
                    int(line.item_id),
                    int(line.supply_warehouse),
                    int(line.quantity),
                    money(line.quantity * price_cents),
                    SqlValue::Text(dist_info),
                ],
            )?,
            || "an order line's insert".to_owned(),
        )?;
    }
    Ok(Flow::Commit)
}

/// Clause 2.5.2.2's customer by last name: of those in the district, by first name, the
/// one at position ceil(n / 2).
fn customer_by_name(
    s: &mut dyn Session,
    w_id: i64,
    d_id: i64,
    last_name: &str,
) -> Result<i64, BodyError> {
    let rows = s.query(
        CUSTOMERS_BY_NAME,
        &[int(w_id), int(d_id), SqlValue::Text(last_name.to_owned())],
    )?;
    if rows.is_empty() {
        return Err(BodyError::Lab(LabError::Inconsistent(format!(
            "no customer named {last_name} in district ({w_id}, {d_id})"
        ))));
    }
    int_at(&rows[(rows.len() - 1) / 2], 0, "customer")
}

fn customer_id(
    s: &mut dyn Session,
    w_id: i64,
    d_id: i64,
    customer: CustomerChoice,
    last_name: &str,
) -> Result<i64, BodyError> {
    match customer {
        CustomerChoice::Id(c_id) => Ok(c_id),
        CustomerChoice::LastName => customer_by_name(s, w_id, d_id, last_name),
    }
}

fn payment(s: &mut dyn Session, input: PaymentInput, last_name: &str) -> Result<Flow, BodyError> {
    let PaymentInput {
        w_id,
        d_id,
        c_w_id,
        c_d_id,
        customer,
        amount_cents,
    } = input;
    let warehouse_row = the_row(s.query(WAREHOUSE_FOR_PAYMENT, &[int(w_id)])?, || {
        format!("warehouse {w_id}")
    })?;
    let mut history_data = text_at(&warehouse_row, 0, "warehouse")?.to_owned();
    let w_ytd = cents_at(&warehouse_row, 1, "warehouse")?;
    one_row(
        s.execute(WAREHOUSE_YTD, &[money(w_ytd + amount_cents), int(w_id)])?,
        || format!("warehouse {w_id}"),
    )?;
    let district_row = the_row(
        s.query(DISTRICT_FOR_PAYMENT, &[int(w_id), int(d_id)])?,
        || format!("district ({w_id}, {d_id})"),
    )?;
    history_data.push_str("    ");
    history_data.push_str(text_at(&district_row, 0, "district")?);
    let d_ytd = cents_at(&district_row, 1, "district")?;
    one_row(
        s.execute(
            DISTRICT_YTD,
            &[money(d_ytd + amount_cents), int(w_id), int(d_id)],
        )?,
        || format!("district ({w_id}, {d_id})"),
    )?;
    let c_id = customer_id(s, c_w_id, c_d_id, customer, last_name)?;
    let what = || format!("customer ({c_w_id}, {c_d_id}, {c_id})");
    let row = the_row(
        s.query(CUSTOMER_FOR_PAYMENT, &[int(c_w_id), int(c_d_id), int(c_id)])?,
        what,
    )?;
    let balance = cents_at(&row, 0, "customer")?;
    let ytd = cents_at(&row, 1, "customer")?;
    let payment_number = int_at(&row, 2, "customer")? + 1;
    let bad_credit = text_at(&row, 3, "customer")? == "BC";
    let changed = if bad_credit {
        // Clause 2.5.2.2: the payment's ids and amount go in front, the whole kept at 500
        // characters.
        let mut data = format!(
            "{c_id} {c_d_id} {c_w_id} {d_id} {w_id} {}.{:02} ",
            amount_cents / 100,
            amount_cents % 100
        );
        data.push_str(text_at(&row, 4, "customer")?);
        data.truncate(500);
        s.execute(
            CUSTOMER_PAYMENT_DATA,
            &[
                money(balance - amount_cents),
                money(ytd + amount_cents),
                int(payment_number),
                SqlValue::Text(data),
                int(c_w_id),
                int(c_d_id),
                int(c_id),
            ],
        )?
    } else {
        s.execute(
            CUSTOMER_PAYMENT,
            &[
                money(balance - amount_cents),
                money(ytd + amount_cents),
                int(payment_number),
                int(c_w_id),
                int(c_d_id),
                int(c_id),
            ],
        )?
    };
    one_row(changed, what)?;
    one_row(
        s.execute(
            INSERT_HISTORY,
            &[
                int(c_id),
                int(c_d_id),
                int(c_w_id),
                int(d_id),
                int(w_id),
                now(),
                money(amount_cents),
                SqlValue::Text(history_data),
                int(payment_number),
            ],
        )?,
        || "the history insert".to_owned(),
    )?;
    Ok(Flow::Commit)
}

fn order_status(
    s: &mut dyn Session,
    w_id: i64,
    d_id: i64,
    customer: CustomerChoice,
    last_name: &str,
) -> Result<Flow, BodyError> {
    let c_id = customer_id(s, w_id, d_id, customer, last_name)?;
    let customer_row = the_row(
        s.query(CUSTOMER_FOR_STATUS, &[int(w_id), int(d_id), int(c_id)])?,
        || format!("customer ({w_id}, {d_id}, {c_id})"),
    )?;
    let order = the_row(
        s.query(LATEST_ORDER, &[int(w_id), int(d_id), int(c_id)])?,
        || format!("the latest order of customer ({w_id}, {d_id}, {c_id})"),
    )?;
    let o_id = int_at(&order, 0, "order")?;
    let lines = s.query(ORDER_LINES, &[int(w_id), int(d_id), int(o_id)])?;
    if !(1..=15).contains(&lines.len()) {
        return Err(BodyError::Lab(LabError::Inconsistent(format!(
            "order ({w_id}, {d_id}, {o_id}) has {} lines",
            lines.len()
        ))));
    }
    std::hint::black_box((&customer_row, &lines));
    Ok(Flow::Commit)
}

fn delivery(
    s: &mut dyn Session,
    w_id: i64,
    carrier: i64,
    districts: i64,
) -> Result<Flow, BodyError> {
    let delivery_d = now();
    for d_id in 1..=districts {
        let oldest = s.query(OLDEST_NEW_ORDER, &[int(w_id), int(d_id)])?;
        let Some(first) = oldest.first() else {
            continue; // nothing to deliver in this district (clause 2.7.4.2)
        };
        let o_id = int_at(first, 0, "new order")?;
        let key = [int(w_id), int(d_id), int(o_id)];
        one_row(s.execute(DELETE_NEW_ORDER, &key)?, || {
            format!("new order ({w_id}, {d_id}, {o_id})")
        })?;
        let order = the_row(s.query(ORDER_CUSTOMER, &key)?, || {
            format!("order ({w_id}, {d_id}, {o_id})")
        })?;
        let c_id = int_at(&order, 0, "order")?;
        one_row(
            s.execute(
                ORDER_CARRIER,
                &[int(carrier), int(w_id), int(d_id), int(o_id)],
            )?,
            || format!("order ({w_id}, {d_id}, {o_id})"),
        )?;
        let amounts = s.query(ORDER_LINE_AMOUNTS, &key)?;
        let mut amount_cents = 0;
        for row in &amounts {
            amount_cents += cents_at(row, 0, "order line")?;
        }
        let delivered = s.execute(
            DELIVER_ORDER_LINES,
            &[delivery_d.clone(), int(w_id), int(d_id), int(o_id)],
        )?;
        if amounts.is_empty() || delivered != amounts.len() as u64 {
            return Err(BodyError::Lab(LabError::Inconsistent(format!(
                "order ({w_id}, {d_id}, {o_id}): {} lines read, {delivered} updated",
                amounts.len()
            ))));
        }
        let customer_key = [int(w_id), int(d_id), int(c_id)];
        let customer_row = the_row(s.query(CUSTOMER_FOR_DELIVERY, &customer_key)?, || {
            format!("customer ({w_id}, {d_id}, {c_id})")
        })?;
        let balance = cents_at(&customer_row, 0, "customer")?;
        let deliveries = int_at(&customer_row, 1, "customer")?;
        one_row(
            s.execute(
                CUSTOMER_DELIVERY,
                &[
                    money(balance + amount_cents),
                    int(deliveries + 1),
                    int(w_id),
                    int(d_id),
                    int(c_id),
                ],
            )?,
            || format!("customer ({w_id}, {d_id}, {c_id})"),
        )?;
    }
    Ok(Flow::Commit)
}

fn stock_level(
    s: &mut dyn Session,
    w_id: i64,
    d_id: i64,
    threshold: i64,
) -> Result<Flow, BodyError> {
    let district_row = the_row(
        s.query(DISTRICT_NEXT_ORDER_ID, &[int(w_id), int(d_id)])?,
        || format!("district ({w_id}, {d_id})"),
    )?;
    let next_o_id = int_at(&district_row, 0, "district")?;
    let low = s.query(
        LOW_STOCK,
        &[
            int(w_id),
            int(d_id),
            int(next_o_id),
            int(next_o_id - 20),
            int(threshold),
        ],
    )?;
    std::hint::black_box(low);
    Ok(Flow::Commit)
}
