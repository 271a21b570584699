//! The five TPC-C transactions (clauses 2.4–2.8), each one engine transaction.
//!
//! Hot-path rules, for the 40,000 commits/s on one warehouse and one worker:
//! rows are read through [`Transaction::get_view`] / [`Transaction::scan_view`] (no copy,
//! no allocation), updates name only the columns they change, keys are stack arrays, and
//! the one row built per order line reuses a buffer whose text value keeps its capacity.
//!
//! Conflicts end the attempt: the engine has already rolled the transaction back, and the
//! runner counts the abort (no retry here). Any other engine error, or a row the data
//! must contain but does not, is a bug and stops the run.

use std::ops::Bound;

use verso::{Database, Isolation, KeyRange, RowView, TableId, Transaction, Value};

use super::random::ORIGINAL;
use super::schema::{
    customer, district, from_cents, item, new_order, order_line, orders, stock, to_cents,
    warehouse, Tables,
};
use super::terminal::{CustomerChoice, NewOrderInput, OrderItem, PaymentInput, Terminal};
use super::{TpccConfig, LOAD_TIME_MICROS};
use crate::workload::{AbortReason, LabError, OltpWorker, TxnOutcome, Work};

/// Index of New-Order in [`super::TRANSACTION_KINDS`].
pub const NEW_ORDER: usize = 0;
/// Index of Payment.
pub const PAYMENT: usize = 1;
/// Index of Order-Status.
pub const ORDER_STATUS: usize = 2;
/// Index of Delivery.
pub const DELIVERY: usize = 3;
/// Index of Stock-Level.
pub const STOCK_LEVEL: usize = 4;

/// How a transaction that raised no error ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    /// Committed, having read and written what [`Work`] counts (docs/lab.md,
    /// "Operations": each row a lookup found or a scan returned, each row inserted,
    /// updated or deleted).
    Committed(Work),
    /// New-Order's deliberate rollback on an unused item id (clause 2.4.2.3).
    RolledBack,
}

/// What the terminal would display after the last New-Order: kept so the work that
/// computes it is not optimized away, and for tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NewOrderOutput {
    /// The order's total in cents, after discount and taxes.
    pub total_cents: i64,
    /// Lines whose item and stock both say `ORIGINAL` (brand-generic `B`).
    pub brand_lines: u32,
}

/// Counters a worker keeps about what it did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerCounters {
    /// Districts a Delivery found without an undelivered order (clause 2.7.4.2 wants
    /// these reported when above 1%).
    pub deliveries_skipped: u64,
    /// Districts a Delivery delivered an order in.
    pub deliveries_done: u64,
    /// Stock-Level's last result: distinct items below the threshold.
    pub last_low_stock: u64,
}

/// STOCK rows Stock-Level announces at a time with `Transaction::prefetch`.
const STOCK_LEVEL_PREFETCH_BATCH: usize = 16;

/// A TPC-C terminal: runs the standard mix against its home warehouse(s).
///
/// Worker `i` of `n` owns the warehouses `w` with `(w - 1) % n == i` and picks one of them
/// per transaction; with more workers than warehouses, worker `i` uses warehouse
/// `i % W + 1`, several workers sharing one (clause 2.1.1 binds each terminal to one
/// warehouse).
pub struct TpccWorker<'db> {
    db: &'db Database,
    tables: Tables,
    config: TpccConfig,
    /// What each transaction is asked to do.
    terminal: Terminal,
    /// The ORDER_LINE row New-Order inserts, reused so its text keeps its capacity.
    order_line_row: Vec<Value>,
    order_items: Vec<OrderItem>,
    /// Scratch: New-Order's ITEM and STOCK keys (and a batch of Stock-Level's STOCK keys),
    /// handed to the engine's prefetch hint.
    item_keys: Vec<[Value; 1]>,
    stock_keys: Vec<[Value; 2]>,
    /// Scratch: customer ids by name, order-line numbers, item ids.
    scratch_ids: Vec<i64>,
    /// Scratch: the warehouse and district names Payment concatenates into H_DATA.
    history_data: String,
    counters: WorkerCounters,
    last_new_order: NewOrderOutput,
    /// Per district (index `(w - 1) * districts + d - 1`): an order id at or below the
    /// district's oldest undelivered order, where Delivery starts its NEW_ORDER scan.
    /// See [`TpccWorker::delivery`] for why and why it is safe.
    delivery_floor: Vec<i64>,
    /// Scratch: the order each district's Delivery took, for `delivery_floor` on commit.
    delivered_orders: Vec<Option<i64>>,
}

/// Microseconds since the Unix epoch, never before the load time (a clock set in the past
/// would otherwise date new orders before old ones).
pub fn now_micros() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    since_epoch.max(LOAD_TIME_MICROS + 1)
}

/// The row a lookup needed, or an error naming what is missing: the data must contain it.
fn must<R>(found: Option<Option<R>>, what: impl FnOnce() -> String) -> Result<R, LabError> {
    found
        .flatten()
        .ok_or_else(|| LabError::Inconsistent(format!("{} is missing or malformed", what())))
}

/// An update of a row the transaction has just read must find it.
fn updated(found: bool, what: impl FnOnce() -> String) -> Result<(), LabError> {
    if found {
        Ok(())
    } else {
        Err(LabError::Inconsistent(format!(
            "{} vanished before its update",
            what()
        )))
    }
}

/// Sets money column `column` of the row under `key` (just read) to `cents`.
fn set_money(
    txn: &mut Transaction<'_>,
    table: TableId,
    key: &[Value],
    column: usize,
    cents: i64,
    what: impl FnOnce() -> String,
) -> Result<(), LabError> {
    updated(
        txn.update(table, key, &[(column, Value::F64(from_cents(cents)))])?,
        what,
    )
}

fn money_cents(row: &RowView<'_>, column: usize) -> Option<i64> {
    row.get(column).as_f64().map(to_cents)
}

impl<'db> TpccWorker<'db> {
    /// Worker number `worker` of `workers` on a database loaded with `config`.
    pub fn new(
        db: &'db Database,
        config: &TpccConfig,
        worker: usize,
        workers: usize,
        seed: u64,
    ) -> Result<Self, LabError> {
        let terminal = Terminal::new(config, worker, workers, seed)?;
        let mut order_line_row = vec![Value::I64(0); order_line::COLUMNS.len()];
        order_line_row[order_line::OL_DIST_INFO] = Value::Text(String::with_capacity(24));
        let tables = Tables::open(db)?;
        Ok(TpccWorker {
            db,
            tables,
            config: config.clone(),
            terminal,
            order_line_row,
            order_items: Vec::with_capacity(15),
            item_keys: Vec::with_capacity(15),
            stock_keys: Vec::with_capacity(15),
            scratch_ids: Vec::with_capacity(64),
            history_data: String::with_capacity(24),
            counters: WorkerCounters::default(),
            last_new_order: NewOrderOutput::default(),
            delivery_floor: vec![
                1;
                config.warehouses as usize
                    * config.districts_per_warehouse as usize
            ],
            delivered_orders: Vec::with_capacity(config.districts_per_warehouse as usize),
        })
    }

    /// What the worker counted so far.
    pub fn counters(&self) -> WorkerCounters {
        self.counters
    }

    /// The terminal output of the last committed New-Order.
    pub fn last_new_order(&self) -> NewOrderOutput {
        self.last_new_order
    }

    /// Draws the next transaction type of the standard mix (clause 5.2.3: 45% New-Order,
    /// 43% Payment, 4% each of Order-Status, Delivery and Stock-Level).
    pub fn next_kind(&mut self) -> usize {
        self.terminal.next_kind()
    }

    /// Runs one attempt of transaction `kind` (an index of [`super::TRANSACTION_KINDS`]).
    pub fn run(&mut self, kind: usize, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        let result = match kind {
            NEW_ORDER => self.new_order(isolation),
            PAYMENT => self.payment(isolation),
            ORDER_STATUS => self.order_status(isolation),
            DELIVERY => self.delivery(isolation),
            STOCK_LEVEL => self.stock_level(isolation),
            _ => {
                return Err(LabError::BadOption(format!(
                    "tpcc: no transaction kind {kind}"
                )))
            }
        };
        match result {
            Ok(Flow::Committed(work)) => Ok(TxnOutcome::Committed { kind, work }),
            Ok(Flow::RolledBack) => Ok(TxnOutcome::Aborted {
                kind,
                reason: AbortReason::ByWorkload,
            }),
            Err(LabError::Engine(error)) => match AbortReason::of(&error) {
                Some(reason) => Ok(TxnOutcome::Aborted { kind, reason }),
                None => Err(LabError::Engine(error)),
            },
            Err(other) => Err(other),
        }
    }

    /// The worker's inputs (paced TPC-C swaps a terminal's in for an attempt:
    /// `crate::workloads::tpcc::paced::TerminalTransactions`).
    pub fn terminal_mut(&mut self) -> &mut Terminal {
        &mut self.terminal
    }

    /// Customer selection by last name (clause 2.5.2.2): of the customers with this last
    /// name in the district, sorted by first name, the one at position ceil(n / 2).
    fn customer_by_last_name(
        txn: &Transaction<'_>,
        tables: &Tables,
        ids: &mut Vec<i64>,
        warehouse: i64,
        district: i64,
        last_name: &str,
    ) -> Result<i64, LabError> {
        ids.clear();
        // The index is ordered by (c_w_id, c_d_id, c_last, c_first): first-name order.
        txn.scan_index_view(
            tables.customer,
            customer::BY_NAME,
            KeyRange::prefix(vec![
                Value::I64(warehouse),
                Value::I64(district),
                Value::Text(last_name.to_owned()),
            ]),
            |row| {
                if let Some(id) = row.get(customer::C_ID).as_i64() {
                    ids.push(id);
                }
                true
            },
        )?;
        if ids.is_empty() {
            return Err(LabError::Inconsistent(format!(
                "no customer named {last_name} in district ({warehouse}, {district})"
            )));
        }
        Ok(ids[(ids.len() - 1) / 2])
    }

    /// New-Order (clause 2.4).
    fn new_order(&mut self, isolation: Isolation) -> Result<Flow, LabError> {
        let NewOrderInput { w_id, d_id, c_id } = self.terminal.new_order(&mut self.order_items);
        let items = i64::from(self.config.items);
        let line_count = self.order_items.len() as i64;
        let all_local = self.order_items.iter().all(|i| i.supply_warehouse == w_id);
        let entry_d = now_micros();
        let tables = self.tables;

        let mut txn = self.db.begin(isolation);
        // Every ITEM and STOCK row the order lines read is known now: announce them, so
        // that their cache misses overlap instead of following one another (a hint; the
        // reads below are the same either way).
        self.item_keys.clear();
        self.stock_keys.clear();
        for line in &self.order_items {
            self.item_keys.push([Value::I64(line.item_id)]);
            self.stock_keys
                .push([Value::I64(line.supply_warehouse), Value::I64(line.item_id)]);
        }
        txn.prefetch(tables.item, &self.item_keys)?;
        txn.prefetch(tables.stock, &self.stock_keys)?;
        let w_tax = must(
            txn.get_view(tables.warehouse, &[Value::I64(w_id)], |row| {
                row.get(warehouse::W_TAX).as_f64()
            })?,
            || format!("warehouse {w_id}"),
        )?;
        let district_key = [Value::I64(w_id), Value::I64(d_id)];
        let (d_tax, o_id) = must(
            txn.get_view(tables.district, &district_key, |row| {
                Some((
                    row.get(district::D_TAX).as_f64()?,
                    row.get(district::D_NEXT_O_ID).as_i64()?,
                ))
            })?,
            || format!("district ({w_id}, {d_id})"),
        )?;
        updated(
            txn.update(
                tables.district,
                &district_key,
                &[(district::D_NEXT_O_ID, Value::I64(o_id + 1))],
            )?,
            || format!("district ({w_id}, {d_id})"),
        )?;
        let c_discount = must(
            txn.get_view(
                tables.customer,
                &[Value::I64(w_id), Value::I64(d_id), Value::I64(c_id)],
                |row| {
                    // The terminal shows C_LAST and C_CREDIT; reading them is part of the work.
                    let shown = row.get(customer::C_LAST).as_text()?.len()
                        + row.get(customer::C_CREDIT).as_text()?.len();
                    debug_assert!(shown > 0);
                    row.get(customer::C_DISCOUNT).as_f64()
                },
            )?,
            || format!("customer ({w_id}, {d_id}, {c_id})"),
        )?;
        txn.insert(
            tables.orders,
            &[
                Value::I64(o_id),
                Value::I64(d_id),
                Value::I64(w_id),
                Value::I64(c_id),
                Value::I64(entry_d),
                Value::Null,
                Value::I64(line_count),
                Value::I64(i64::from(all_local)),
            ],
        )?;
        txn.insert(
            tables.new_order,
            &[Value::I64(o_id), Value::I64(d_id), Value::I64(w_id)],
        )?;

        let mut total_cents = 0i64;
        let mut brand_lines = 0u32;
        for index in 0..self.order_items.len() {
            let line = self.order_items[index];
            let item_row = txn.get_view(tables.item, &[Value::I64(line.item_id)], |row| {
                Some((
                    money_cents(&row, item::I_PRICE)?,
                    row.get(item::I_NAME).as_text()?.len(),
                    row.get(item::I_DATA).as_text()?.contains(ORIGINAL),
                ))
            })?;
            let Some(Some((price_cents, _name_len, item_original))) = item_row else {
                if line.item_id <= items {
                    return Err(LabError::Inconsistent(format!(
                        "item {} is missing",
                        line.item_id
                    )));
                }
                // The deliberate rollback: undo everything, the terminal reports
                // "Item number is not valid".
                txn.abort();
                return Ok(Flow::RolledBack);
            };

            let stock_key = [Value::I64(line.supply_warehouse), Value::I64(line.item_id)];
            let dist_column = stock::dist_column(d_id);
            let dist_info = &mut self.order_line_row[order_line::OL_DIST_INFO];
            let (quantity, ytd, order_count, remote_count, stock_original) = must(
                txn.get_view(tables.stock, &stock_key, |row| {
                    if let Value::Text(info) = dist_info {
                        info.clear();
                        info.push_str(row.get(dist_column).as_text()?);
                    }
                    Some((
                        row.get(stock::S_QUANTITY).as_i64()?,
                        row.get(stock::S_YTD).as_i64()?,
                        row.get(stock::S_ORDER_CNT).as_i64()?,
                        row.get(stock::S_REMOTE_CNT).as_i64()?,
                        row.get(stock::S_DATA).as_text()?.contains(ORIGINAL),
                    ))
                })?,
                || format!("stock ({}, {})", line.supply_warehouse, line.item_id),
            )?;
            let new_quantity = if quantity >= line.quantity + 10 {
                quantity - line.quantity
            } else {
                quantity - line.quantity + 91
            };
            let remote = line.supply_warehouse != w_id;
            let changes = [
                (stock::S_QUANTITY, Value::I64(new_quantity)),
                (stock::S_YTD, Value::I64(ytd + line.quantity)),
                (stock::S_ORDER_CNT, Value::I64(order_count + 1)),
                (stock::S_REMOTE_CNT, Value::I64(remote_count + 1)),
            ];
            // S_REMOTE_CNT changes only for a remote line; update only what changes.
            let changed = if remote { &changes[..] } else { &changes[..3] };
            updated(txn.update(tables.stock, &stock_key, changed)?, || {
                format!("stock ({}, {})", line.supply_warehouse, line.item_id)
            })?;

            let amount_cents = line.quantity * price_cents;
            total_cents += amount_cents;
            brand_lines += u32::from(item_original && stock_original);
            let row = &mut self.order_line_row;
            row[order_line::OL_O_ID] = Value::I64(o_id);
            row[order_line::OL_D_ID] = Value::I64(d_id);
            row[order_line::OL_W_ID] = Value::I64(w_id);
            row[order_line::OL_NUMBER] = Value::I64(index as i64 + 1);
            row[order_line::OL_I_ID] = Value::I64(line.item_id);
            row[order_line::OL_SUPPLY_W_ID] = Value::I64(line.supply_warehouse);
            row[order_line::OL_DELIVERY_D] = Value::Null;
            row[order_line::OL_QUANTITY] = Value::I64(line.quantity);
            row[order_line::OL_AMOUNT] = Value::F64(from_cents(amount_cents));
            txn.insert(tables.order_line, row)?;
        }
        crate::clients::commit(txn)?;
        let total = total_cents as f64 * (1.0 - c_discount) * (1.0 + w_tax + d_tax);
        self.last_new_order = NewOrderOutput {
            total_cents: total.round() as i64,
            brand_lines,
        };
        // Warehouse, district (read, update), customer, the order and its NEW_ORDER entry;
        // per line the item, the stock (read, update) and the order line.
        let lines = self.order_items.len() as u64;
        Ok(Flow::Committed(Work {
            operations: 6 + 4 * lines,
            rows_added: 2 + lines as i64,
        }))
    }

    /// Payment (clause 2.5).
    fn payment(&mut self, isolation: Isolation) -> Result<Flow, LabError> {
        let PaymentInput {
            w_id,
            d_id,
            c_w_id,
            c_d_id,
            customer,
            amount_cents,
        } = self.terminal.payment();
        let h_date = now_micros();
        let tables = self.tables;

        let mut txn = self.db.begin(isolation);
        let history_data = &mut self.history_data;
        history_data.clear();
        let warehouse_key = [Value::I64(w_id)];
        let w_ytd_cents = must(
            txn.get_view(tables.warehouse, &warehouse_key, |row| {
                history_data.push_str(row.get(warehouse::W_NAME).as_text()?);
                money_cents(&row, warehouse::W_YTD)
            })?,
            || format!("warehouse {w_id}"),
        )?;
        set_money(
            &mut txn,
            tables.warehouse,
            &warehouse_key,
            warehouse::W_YTD,
            w_ytd_cents + amount_cents,
            || format!("warehouse {w_id}"),
        )?;
        let district_key = [Value::I64(w_id), Value::I64(d_id)];
        let history_data = &mut self.history_data;
        let d_ytd_cents = must(
            txn.get_view(tables.district, &district_key, |row| {
                history_data.push_str("    ");
                history_data.push_str(row.get(district::D_NAME).as_text()?);
                money_cents(&row, district::D_YTD)
            })?,
            || format!("district ({w_id}, {d_id})"),
        )?;
        set_money(
            &mut txn,
            tables.district,
            &district_key,
            district::D_YTD,
            d_ytd_cents + amount_cents,
            || format!("district ({w_id}, {d_id})"),
        )?;

        let mut customers_by_name = 0;
        let c_id = match customer {
            CustomerChoice::Id(c_id) => c_id,
            CustomerChoice::LastName => Self::customer_by_last_name(
                &txn,
                &tables,
                &mut self.scratch_ids,
                c_w_id,
                c_d_id,
                self.terminal.last_name(),
            )
            .inspect(|_| customers_by_name = self.scratch_ids.len() as u64)?,
        };
        let customer_key = [Value::I64(c_w_id), Value::I64(c_d_id), Value::I64(c_id)];
        let (balance_cents, ytd_cents, payment_count, old_data) = must(
            txn.get_view(tables.customer, &customer_key, |row| {
                let bad_credit = row.get(customer::C_CREDIT).as_text()? == "BC";
                Some((
                    money_cents(&row, customer::C_BALANCE)?,
                    money_cents(&row, customer::C_YTD_PAYMENT)?,
                    row.get(customer::C_PAYMENT_CNT).as_i64()?,
                    // Only bad-credit customers' C_DATA changes, so only theirs is copied.
                    if bad_credit {
                        Some(row.get(customer::C_DATA).as_text()?.to_owned())
                    } else {
                        None
                    },
                ))
            })?,
            || format!("customer ({c_w_id}, {c_d_id}, {c_id})"),
        )?;
        let payment_number = payment_count + 1;
        let mut changes = [
            (
                customer::C_BALANCE,
                Value::F64(from_cents(balance_cents - amount_cents)),
            ),
            (
                customer::C_YTD_PAYMENT,
                Value::F64(from_cents(ytd_cents + amount_cents)),
            ),
            (customer::C_PAYMENT_CNT, Value::I64(payment_number)),
            (customer::C_DATA, Value::Null),
        ];
        let changed = match old_data {
            Some(old) => {
                // Clause 2.5.2.2: the payment's ids and amount go in front, the whole kept
                // at 500 characters (all ASCII, so bytes are characters).
                let mut data = format!(
                    "{c_id} {c_d_id} {c_w_id} {d_id} {w_id} {}.{:02} ",
                    amount_cents / 100,
                    amount_cents % 100
                );
                data.push_str(&old);
                data.truncate(500);
                changes[3].1 = Value::Text(data);
                &changes[..]
            }
            None => &changes[..3],
        };
        updated(txn.update(tables.customer, &customer_key, changed)?, || {
            format!("customer ({c_w_id}, {c_d_id}, {c_id})")
        })?;
        // H_SEQ is the payment count just written: unique per customer, because a second
        // payment of the same customer conflicts on the CUSTOMER row above.
        txn.insert(
            tables.history,
            &[
                Value::I64(c_id),
                Value::I64(c_d_id),
                Value::I64(c_w_id),
                Value::I64(d_id),
                Value::I64(w_id),
                Value::I64(h_date),
                Value::F64(from_cents(amount_cents)),
                Value::Text(self.history_data.clone()),
                Value::I64(payment_number),
            ],
        )?;
        crate::clients::commit(txn)?;
        // Warehouse, district and customer (each read, updated), the customers of the
        // name, the history row.
        Ok(Flow::Committed(Work {
            operations: 7 + customers_by_name,
            rows_added: 1,
        }))
    }

    /// Order-Status (clause 2.6). Declared read-only, so at `Serializable` it keeps no
    /// read set and cannot fail validation (it is serialized at its snapshot).
    fn order_status(&mut self, isolation: Isolation) -> Result<Flow, LabError> {
        let (w_id, d_id, customer) = self.terminal.order_status();
        let tables = self.tables;

        let txn = self.db.begin_read_only(isolation);
        let mut customers_by_name = 0;
        let c_id = match customer {
            CustomerChoice::Id(c_id) => c_id,
            CustomerChoice::LastName => Self::customer_by_last_name(
                &txn,
                &tables,
                &mut self.scratch_ids,
                w_id,
                d_id,
                self.terminal.last_name(),
            )
            .inspect(|_| customers_by_name = self.scratch_ids.len() as u64)?,
        };
        let balance_cents = must(
            txn.get_view(
                tables.customer,
                &[Value::I64(w_id), Value::I64(d_id), Value::I64(c_id)],
                |row| {
                    let shown = row.get(customer::C_FIRST).as_text()?.len()
                        + row.get(customer::C_MIDDLE).as_text()?.len()
                        + row.get(customer::C_LAST).as_text()?.len();
                    debug_assert!(shown > 0);
                    money_cents(&row, customer::C_BALANCE)
                },
            )?,
            || format!("customer ({w_id}, {d_id}, {c_id})"),
        )?;
        // The customer's latest order: the first entry of a descending scan of the (w, d, c)
        // prefix of the index. (An ascending scan read every order of the customer, a
        // number that grows all run long, and the run slowed down as it grew.)
        let mut latest = None;
        txn.scan_index_view(
            tables.orders,
            orders::BY_CUSTOMER,
            KeyRange::prefix(vec![Value::I64(w_id), Value::I64(d_id), Value::I64(c_id)])
                .descending(),
            |row| {
                latest = Some((
                    row.get(orders::O_ID).as_i64(),
                    row.get(orders::O_ENTRY_D).as_i64(),
                    row.get(orders::O_CARRIER_ID).as_i64(),
                ));
                false
            },
        )?;
        let Some((Some(o_id), _entry_d, _carrier)) = latest else {
            return Err(LabError::Inconsistent(format!(
                "customer ({w_id}, {d_id}, {c_id}) has no order"
            )));
        };
        let mut lines = 0;
        let mut amount_cents = 0;
        txn.scan_view(
            tables.order_line,
            KeyRange::prefix(vec![Value::I64(w_id), Value::I64(d_id), Value::I64(o_id)]),
            |row| {
                lines += 1;
                amount_cents += money_cents(&row, order_line::OL_AMOUNT).unwrap_or(0);
                // Shown per line: item, supplier, quantity, amount, delivery date.
                let _ = (
                    row.get(order_line::OL_I_ID),
                    row.get(order_line::OL_SUPPLY_W_ID),
                    row.get(order_line::OL_QUANTITY),
                    row.get(order_line::OL_DELIVERY_D),
                );
                true
            },
        )?;
        debug_assert!((1..=15).contains(&lines), "order {o_id} has {lines} lines");
        debug_assert!(balance_cents > i64::MIN && amount_cents >= 0);
        crate::clients::commit(txn)?;
        // The customers of the name, the customer, the latest order, its lines.
        Ok(Flow::Committed(Work::operations(
            customers_by_name + 2 + lines as u64,
        )))
    }

    /// Delivery (clause 2.7): one transaction over every district of the warehouse.
    ///
    /// NEW_ORDER is a queue per district: New-Order inserts at the tail, Delivery deletes
    /// the head. Scanning from the start of the district's range walks over the index
    /// entries of every order delivered before (the ordered index keeps removed entries
    /// in its leaves for a while), which made Delivery half of the mix's time. So the scan
    /// starts at `delivery_floor`, one past the last order this worker delivered in the
    /// district *and committed*. That is a safe lower bound: order ids of a district only
    /// grow, a committed Delivery removed that order for every later snapshot, and other
    /// terminals' Deliveries only raise the true minimum; an aborted Delivery leaves the
    /// floor alone.
    fn delivery(&mut self, isolation: Isolation) -> Result<Flow, LabError> {
        let (w_id, carrier) = self.terminal.delivery();
        let delivery_d = now_micros();
        let tables = self.tables;
        let mut skipped = 0;
        let mut work = Work::default();
        let districts = i64::from(self.config.districts_per_warehouse);
        self.delivered_orders.clear();

        let mut txn = self.db.begin(isolation);
        for d_id in 1..=districts {
            // The district's oldest undelivered order: the first NEW_ORDER key of (w, d)
            // at or above the floor.
            let floor = self.delivery_floor[((w_id - 1) * districts + d_id - 1) as usize];
            let mut oldest = None;
            txn.scan_view(
                tables.new_order,
                KeyRange::new((
                    Bound::Included(vec![Value::I64(w_id), Value::I64(d_id), Value::I64(floor)]),
                    Bound::Included(vec![Value::I64(w_id), Value::I64(d_id)]),
                )),
                |row| {
                    oldest = row.get(new_order::NO_O_ID).as_i64();
                    false
                },
            )?;
            self.delivered_orders.push(oldest);
            let Some(o_id) = oldest else {
                skipped += 1;
                continue;
            };
            debug_assert!(o_id >= floor, "order {o_id} below the floor {floor}");
            let order_key = [Value::I64(w_id), Value::I64(d_id), Value::I64(o_id)];
            updated(txn.delete(tables.new_order, &order_key)?, || {
                format!("new order ({w_id}, {d_id}, {o_id})")
            })?;
            let c_id = must(
                txn.get_view(tables.orders, &order_key, |row| {
                    row.get(orders::O_C_ID).as_i64()
                })?,
                || format!("order ({w_id}, {d_id}, {o_id})"),
            )?;
            updated(
                txn.update(
                    tables.orders,
                    &order_key,
                    &[(orders::O_CARRIER_ID, Value::I64(carrier))],
                )?,
                || format!("order ({w_id}, {d_id}, {o_id})"),
            )?;
            // UPDATE ORDER_LINE SET ol_delivery_d ... WHERE the order's lines, summing
            // their amounts on the way: one pass, each line written through the entry the
            // range read found.
            let mut amount_cents = 0;
            let mut chosen = 0;
            let lines = txn.update_range(
                tables.order_line,
                KeyRange::prefix(order_key.to_vec()),
                &[(order_line::OL_DELIVERY_D, Value::I64(delivery_d))],
                |row| {
                    amount_cents += money_cents(&row, order_line::OL_AMOUNT).unwrap_or(0);
                    chosen += 1;
                    true
                },
            )?;
            // The NEW_ORDER entry (found, deleted), the order (read, updated), its lines
            // (updated), the customer (read, updated).
            work.operations += 6 + lines as u64;
            work.rows_added -= 1;
            if chosen == 0 || lines != chosen {
                return Err(LabError::Inconsistent(format!(
                    "order ({w_id}, {d_id}, {o_id}): {chosen} lines read, {lines} updated"
                )));
            }
            let customer_key = [Value::I64(w_id), Value::I64(d_id), Value::I64(c_id)];
            let (balance_cents, delivery_count) = must(
                txn.get_view(tables.customer, &customer_key, |row| {
                    Some((
                        money_cents(&row, customer::C_BALANCE)?,
                        row.get(customer::C_DELIVERY_CNT).as_i64()?,
                    ))
                })?,
                || format!("customer ({w_id}, {d_id}, {c_id})"),
            )?;
            updated(
                txn.update(
                    tables.customer,
                    &customer_key,
                    &[
                        (
                            customer::C_BALANCE,
                            Value::F64(from_cents(balance_cents + amount_cents)),
                        ),
                        (customer::C_DELIVERY_CNT, Value::I64(delivery_count + 1)),
                    ],
                )?,
                || format!("customer ({w_id}, {d_id}, {c_id})"),
            )?;
        }
        crate::clients::commit(txn)?;
        for (d_index, delivered) in self.delivered_orders.iter().enumerate() {
            if let Some(o_id) = delivered {
                let floor =
                    &mut self.delivery_floor[(w_id - 1) as usize * districts as usize + d_index];
                *floor = (*floor).max(o_id + 1);
            }
        }
        self.counters.deliveries_skipped += skipped;
        self.counters.deliveries_done += districts as u64 - skipped;
        Ok(Flow::Committed(work))
    }

    /// Stock-Level (clause 2.8): distinct items of the district's last 20 orders whose
    /// stock is below a threshold. Read-only, like Order-Status.
    fn stock_level(&mut self, isolation: Isolation) -> Result<Flow, LabError> {
        let (w_id, d_id, threshold) = self.terminal.stock_level();
        let tables = self.tables;

        let txn = self.db.begin_read_only(isolation);
        let next_o_id = must(
            txn.get_view(
                tables.district,
                &[Value::I64(w_id), Value::I64(d_id)],
                |row| row.get(district::D_NEXT_O_ID).as_i64(),
            )?,
            || format!("district ({w_id}, {d_id})"),
        )?;
        let item_ids = &mut self.scratch_ids;
        item_ids.clear();
        txn.scan_view(
            tables.order_line,
            KeyRange::new((
                Bound::Included(vec![
                    Value::I64(w_id),
                    Value::I64(d_id),
                    Value::I64(next_o_id - 20),
                ]),
                Bound::Excluded(vec![
                    Value::I64(w_id),
                    Value::I64(d_id),
                    Value::I64(next_o_id),
                ]),
            )),
            |row| {
                if let Some(id) = row.get(order_line::OL_I_ID).as_i64() {
                    item_ids.push(id);
                }
                true
            },
        )?;
        let order_lines = item_ids.len() as u64;
        item_ids.sort_unstable();
        item_ids.dedup();
        let mut low_stock = 0;
        // The STOCK rows to read are all known: announce them a batch ahead of reading, so
        // that their cache misses overlap (a batch's lines fit the first-level cache).
        for batch in item_ids.chunks(STOCK_LEVEL_PREFETCH_BATCH) {
            self.stock_keys.clear();
            self.stock_keys
                .extend(batch.iter().map(|&id| [Value::I64(w_id), Value::I64(id)]));
            txn.prefetch(tables.stock, &self.stock_keys)?;
            for &item_id in batch {
                let quantity = must(
                    txn.get_view(
                        tables.stock,
                        &[Value::I64(w_id), Value::I64(item_id)],
                        |row| row.get(stock::S_QUANTITY).as_i64(),
                    )?,
                    || format!("stock ({w_id}, {item_id})"),
                )?;
                low_stock += u64::from(quantity < threshold);
            }
        }
        crate::clients::commit(txn)?;
        self.counters.last_low_stock = low_stock;
        // The district, the order lines, the stock of each distinct item.
        Ok(Flow::Committed(Work::operations(
            1 + order_lines + item_ids.len() as u64,
        )))
    }
}

impl OltpWorker for TpccWorker<'_> {
    fn run_one(&mut self, isolation: Isolation) -> Result<TxnOutcome, LabError> {
        let kind = self.next_kind();
        self.run(kind, isolation)
    }
}
