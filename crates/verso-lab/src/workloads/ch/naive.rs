//! A second evaluation of the 22 queries, as unlike the plans of [`super::queries`] as is
//! practical, so that the tests can check one against the other.
//!
//! Where the plans read borrowed rows with `scan_view`, project typed tuples, join with hash
//! tables and aggregate in hash maps, this module reads every table whole with the plain
//! `Transaction::scan` into `Vec<Vec<Value>>`, follows the SQL text literally (FROM tables in
//! nested loops, each join predicate checked by looking the joined row up in an *ordered*
//! index, a `BTreeMap`, as an index nested-loop join does; subqueries evaluated as written,
//! `exists` per outer row), and groups in `BTreeMap`s. It is slow and only meant for tiny
//! databases.
//!
//! Row variables carry the column prefix of their table, as in the SQL (`ol` for an
//! ORDER_LINE row, `o`, `c`, `s`, `i`, `su`, `n`, `r`), so each loop reads like its query.
//!
//! Shared with the plans, on purpose: the date constants, the computed join keys
//! ([`supplier_of_stock`], [`nation_of_state`]), money in cents, and the result type.

use std::collections::{BTreeMap, BTreeSet};

use verso::{TableId, Transaction, Value};

use super::operators::{compare_rows, Cell, QueryResult};
use super::queries::{
    market_share, promo_revenue, year_of, ChTables, FAR_FUTURE, JAN_1_1999, JAN_2_2007,
    MAY_23_2010_NOON,
};
use super::schema::{nation, nation_of_state, region, supplier, supplier_of_stock};
use crate::workload::LabError;
use crate::workloads::tpcc::schema::{
    customer, from_cents, item, new_order, order_line, orders, stock, to_cents,
};

/// Evaluates query `index` (0 for Q1) naively at `txn`'s snapshot.
pub fn run_query(
    txn: &Transaction<'_>,
    tables: &ChTables,
    index: usize,
) -> Result<QueryResult, LabError> {
    let db = Naive { txn, tables };
    match index {
        0 => db.q1(),
        1 => db.q2(),
        2 => db.q3(),
        3 => db.q4(),
        4 => db.q5(),
        5 => db.q6(),
        6 => db.q7(),
        7 => db.q8(),
        8 => db.q9(),
        9 => db.q10(),
        10 => db.q11(),
        11 => db.q12(),
        12 => db.q13(),
        13 => db.q14(),
        14 => db.q15(),
        15 => db.q16(),
        16 => db.q17(),
        17 => db.q18(),
        18 => db.q19(),
        19 => db.q20(),
        20 => db.q21(),
        21 => db.q22(),
        _ => Err(LabError::BadOption(format!(
            "ch: there is no query number {}",
            index + 1
        ))),
    }
}

type Row = Vec<Value>;

/// A lookup key of an ordered index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Int(i64),
    Text(String),
}

fn key_of(value: &Value) -> Option<Key> {
    match value {
        Value::I64(v) => Some(Key::Int(*v)),
        Value::Text(v) => Some(Key::Text(v.clone())),
        _ => None,
    }
}

/// A table read whole, with ordered indexes on demand.
struct Table {
    rows: Vec<Row>,
}

/// An ordered index: key values → the positions of the rows that have them.
struct Index<'t> {
    table: &'t Table,
    entries: BTreeMap<Vec<Key>, Vec<usize>>,
}

impl Table {
    fn read(txn: &Transaction<'_>, table: TableId) -> Result<Table, LabError> {
        let rows = txn.scan(table, ..)?.map(|row| row.map(Vec::from));
        Ok(Table {
            rows: rows.collect::<verso::Result<_>>()?,
        })
    }

    fn index(&self, columns: &[usize]) -> Index<'_> {
        let mut entries: BTreeMap<Vec<Key>, Vec<usize>> = BTreeMap::new();
        for (position, row) in self.rows.iter().enumerate() {
            let key: Option<Vec<Key>> = columns.iter().map(|&c| key_of(&row[c])).collect();
            if let Some(key) = key {
                entries.entry(key).or_default().push(position);
            }
        }
        Index {
            table: self,
            entries,
        }
    }
}

impl<'t> Index<'t> {
    /// The rows whose key columns equal `key` (NULL never equals anything).
    fn lookup(&self, key: &[Option<i64>]) -> impl Iterator<Item = &'t Row> + '_ {
        let key: Option<Vec<Key>> = key.iter().map(|v| v.map(Key::Int)).collect();
        key.and_then(|key| self.entries.get(&key))
            .into_iter()
            .flatten()
            .map(|&position| &self.table.rows[position])
    }
}

fn int(value: &Value) -> Option<i64> {
    value.as_i64()
}

fn text(value: &Value) -> Option<&str> {
    value.as_text()
}

fn money_cents(value: &Value) -> Option<i64> {
    value.as_f64().map(to_cents)
}

/// SQL `like 'prefix%'`.
fn starts(value: &Value, prefix: &str) -> bool {
    text(value).is_some_and(|v| v.starts_with(prefix))
}

/// SQL `like '%suffix'`.
fn ends(value: &Value, suffix: &str) -> bool {
    text(value).is_some_and(|v| v.ends_with(suffix))
}

/// `substr(x, 1, n)`.
fn prefix(value: &Value, chars: usize) -> Option<String> {
    text(value).map(|v| v.chars().take(chars).collect())
}

/// A SQL comparison with NULL semantics: true only when both sides are present.
fn cmp_holds(a: Option<i64>, b: Option<i64>, holds: impl Fn(i64, i64) -> bool) -> bool {
    matches!((a, b), (Some(a), Some(b)) if holds(a, b))
}

fn money(cents: Option<i64>) -> Cell {
    cents.map_or(Cell::Null, |c| Cell::Float(from_cents(c)))
}

fn text_cell(value: &Value) -> Cell {
    text(value).map_or(Cell::Null, |v| Cell::Text(v.to_owned()))
}

fn int_cell(value: &Value) -> Cell {
    int(value).map_or(Cell::Null, Cell::Int)
}

/// Adds a nullable value to a nullable sum, as SQL's `sum` does.
fn add(sum: &mut Option<i64>, value: Option<i64>) {
    if let Some(value) = value {
        *sum = Some(sum.unwrap_or(0) + value);
    }
}

/// ORDER BY, done differently from the plans: sort whole rows first (the tie-breaker),
/// then stable-sort by each key from the last to the first.
fn sorted(mut rows: Vec<Vec<Cell>>, keys: &[(usize, bool)]) -> QueryResult {
    rows.sort_by(|a, b| compare_rows(a, b));
    for &(column, descending) in keys.iter().rev() {
        rows.sort_by(|a, b| {
            let ordering = a[column].total_cmp(&b[column]);
            if descending {
                ordering.reverse()
            } else {
                ordering
            }
        });
    }
    QueryResult::ordered(rows)
}

const ASC: bool = false;
const DESC: bool = true;

struct Naive<'a, 'db> {
    txn: &'a Transaction<'db>,
    tables: &'a ChTables,
}

impl Naive<'_, '_> {
    fn read(&self, table: TableId) -> Result<Table, LabError> {
        Table::read(self.txn, table)
    }

    fn order_line(&self) -> Result<Table, LabError> {
        self.read(self.tables.tpcc.order_line)
    }
    fn orders(&self) -> Result<Table, LabError> {
        self.read(self.tables.tpcc.orders)
    }
    fn customer(&self) -> Result<Table, LabError> {
        self.read(self.tables.tpcc.customer)
    }
    fn stock(&self) -> Result<Table, LabError> {
        self.read(self.tables.tpcc.stock)
    }
    fn item(&self) -> Result<Table, LabError> {
        self.read(self.tables.tpcc.item)
    }
    fn supplier(&self) -> Result<Table, LabError> {
        self.read(self.tables.extra.supplier)
    }
    fn nation(&self) -> Result<Table, LabError> {
        self.read(self.tables.extra.nation)
    }
    fn region(&self) -> Result<Table, LabError> {
        self.read(self.tables.extra.region)
    }

    fn q1(&self) -> Result<QueryResult, LabError> {
        /// The aggregates of one `ol_number`.
        #[derive(Default)]
        struct Group {
            quantity_sum: Option<i64>,
            amount_cents: Option<i64>,
            quantity_total: f64,
            quantity_count: i64,
            amount_total: f64,
            amount_count: i64,
            lines: i64,
        }
        let mut groups: BTreeMap<i64, Group> = BTreeMap::new();
        for ol in &self.order_line()?.rows {
            if !cmp_holds(
                int(&ol[order_line::OL_DELIVERY_D]),
                Some(JAN_2_2007),
                |a, b| a > b,
            ) {
                continue;
            }
            let Some(number) = int(&ol[order_line::OL_NUMBER]) else {
                continue;
            };
            let group = groups.entry(number).or_default();
            let quantity = int(&ol[order_line::OL_QUANTITY]);
            let amount = ol[order_line::OL_AMOUNT].as_f64();
            add(&mut group.quantity_sum, quantity);
            add(&mut group.amount_cents, amount.map(to_cents));
            if let Some(q) = quantity {
                group.quantity_total += q as f64;
                group.quantity_count += 1;
            }
            if let Some(a) = amount {
                group.amount_total += a;
                group.amount_count += 1;
            }
            group.lines += 1;
        }
        let average = |sum: f64, count: i64| {
            if count == 0 {
                Cell::Null
            } else {
                Cell::Float(sum / count as f64)
            }
        };
        let rows = groups
            .into_iter()
            .map(|(number, g)| {
                vec![
                    Cell::Int(number),
                    g.quantity_sum.map_or(Cell::Null, Cell::Int),
                    money(g.amount_cents),
                    average(g.quantity_total, g.quantity_count),
                    average(g.amount_total, g.amount_count),
                    Cell::Int(g.lines),
                ]
            })
            .collect();
        Ok(sorted(rows, &[(0, ASC)]))
    }

    fn q2(&self) -> Result<QueryResult, LabError> {
        let (item, supplier_t, stock_t, nation_t, region_t) = (
            self.item()?,
            self.supplier()?,
            self.stock()?,
            self.nation()?,
            self.region()?,
        );
        let supplier_by_key = supplier_t.index(&[supplier::SU_SUPPKEY]);
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        let region_by_key = region_t.index(&[region::R_REGIONKEY]);
        let item_by_key = item.index(&[item::I_ID]);
        // The stock row's supplier, its nation, and whether the nation is in 'Europ%'.
        let european = |s: &Row| -> Option<(&Row, &Row)> {
            let key = supplier_of_stock(int(&s[stock::S_W_ID])?, int(&s[stock::S_I_ID])?);
            let su = supplier_by_key.lookup(&[Some(key)]).next()?;
            let n = nation_by_key
                .lookup(&[int(&su[supplier::SU_NATIONKEY])])
                .next()?;
            let r = region_by_key
                .lookup(&[int(&n[nation::N_REGIONKEY])])
                .next()?;
            starts(&r[region::R_NAME], "Europ").then_some((su, n))
        };
        // The subquery m: per item, the smallest quantity among its European stock rows.
        let mut m: BTreeMap<i64, i64> = BTreeMap::new();
        for s in &stock_t.rows {
            if european(s).is_some() {
                let (Some(item_id), Some(quantity)) =
                    (int(&s[stock::S_I_ID]), int(&s[stock::S_QUANTITY]))
                else {
                    continue;
                };
                let min = m.entry(item_id).or_insert(quantity);
                *min = (*min).min(quantity);
            }
        }
        let mut rows = Vec::new();
        for s in &stock_t.rows {
            let Some((su, n)) = european(s) else { continue };
            for i in item_by_key.lookup(&[int(&s[stock::S_I_ID])]) {
                if !ends(&i[item::I_DATA], "b") {
                    continue;
                }
                let m_quantity = int(&i[item::I_ID]).and_then(|id| m.get(&id).copied());
                if !cmp_holds(int(&s[stock::S_QUANTITY]), m_quantity, |a, b| a == b) {
                    continue;
                }
                rows.push(vec![
                    int_cell(&su[supplier::SU_SUPPKEY]),
                    text_cell(&su[supplier::SU_NAME]),
                    text_cell(&n[nation::N_NAME]),
                    int_cell(&i[item::I_ID]),
                    text_cell(&i[item::I_NAME]),
                    text_cell(&su[supplier::SU_ADDRESS]),
                    text_cell(&su[supplier::SU_PHONE]),
                    text_cell(&su[supplier::SU_COMMENT]),
                ]);
            }
        }
        Ok(sorted(rows, &[(2, ASC), (1, ASC), (3, ASC)]))
    }

    fn q3(&self) -> Result<QueryResult, LabError> {
        let (customer_t, new_order_t, orders_t, order_line_t) = (
            self.customer()?,
            self.read(self.tables.tpcc.new_order)?,
            self.orders()?,
            self.order_line()?,
        );
        let customer_by_key =
            customer_t.index(&[customer::C_W_ID, customer::C_D_ID, customer::C_ID]);
        let new_order_by_key =
            new_order_t.index(&[new_order::NO_W_ID, new_order::NO_D_ID, new_order::NO_O_ID]);
        let lines_by_order = order_line_t.index(&[
            order_line::OL_W_ID,
            order_line::OL_D_ID,
            order_line::OL_O_ID,
        ]);
        let mut groups: BTreeMap<(i64, i64, i64, i64), Option<i64>> = BTreeMap::new();
        for o in &orders_t.rows {
            if !cmp_holds(int(&o[orders::O_ENTRY_D]), Some(JAN_2_2007), |a, b| a > b) {
                continue;
            }
            let (w, d) = (int(&o[orders::O_W_ID]), int(&o[orders::O_D_ID]));
            let customers = customer_by_key.lookup(&[w, d, int(&o[orders::O_C_ID])]);
            for c in customers {
                if !starts(&c[customer::C_STATE], "A") {
                    continue;
                }
                let order_key = [w, d, int(&o[orders::O_ID])];
                for _no in new_order_by_key.lookup(&order_key) {
                    for ol in lines_by_order.lookup(&order_key) {
                        let (Some(o_id), Some(w), Some(d), Some(entry)) = (
                            int(&ol[order_line::OL_O_ID]),
                            int(&ol[order_line::OL_W_ID]),
                            int(&ol[order_line::OL_D_ID]),
                            int(&o[orders::O_ENTRY_D]),
                        ) else {
                            continue;
                        };
                        let sum = groups.entry((o_id, w, d, entry)).or_default();
                        add(sum, money_cents(&ol[order_line::OL_AMOUNT]));
                    }
                }
            }
        }
        let rows = groups
            .into_iter()
            .map(|((o, w, d, entry), sum)| {
                vec![
                    Cell::Int(o),
                    Cell::Int(w),
                    Cell::Int(d),
                    money(sum),
                    Cell::Int(entry),
                ]
            })
            .collect();
        Ok(sorted(rows, &[(3, DESC), (4, ASC)]))
    }

    fn q4(&self) -> Result<QueryResult, LabError> {
        let (orders_t, order_line_t) = (self.orders()?, self.order_line()?);
        let lines_by_order = order_line_t.index(&[
            order_line::OL_W_ID,
            order_line::OL_D_ID,
            order_line::OL_O_ID,
        ]);
        let mut groups: BTreeMap<i64, i64> = BTreeMap::new();
        for o in &orders_t.rows {
            let entry = int(&o[orders::O_ENTRY_D]);
            if !(cmp_holds(entry, Some(JAN_2_2007), |a, b| a >= b)
                && cmp_holds(entry, Some(FAR_FUTURE), |a, b| a < b))
            {
                continue;
            }
            let order_key = [
                int(&o[orders::O_W_ID]),
                int(&o[orders::O_D_ID]),
                int(&o[orders::O_ID]),
            ];
            let exists = lines_by_order
                .lookup(&order_key)
                .any(|ol| cmp_holds(int(&ol[order_line::OL_DELIVERY_D]), entry, |a, b| a >= b));
            if let (true, Some(count)) = (exists, int(&o[orders::O_OL_CNT])) {
                *groups.entry(count).or_default() += 1;
            }
        }
        let rows = groups
            .into_iter()
            .map(|(count, orders)| vec![Cell::Int(count), Cell::Int(orders)])
            .collect();
        Ok(sorted(rows, &[(0, ASC)]))
    }

    fn q5(&self) -> Result<QueryResult, LabError> {
        let (customer_t, orders_t, order_line_t, stock_t, supplier_t, nation_t, region_t) = (
            self.customer()?,
            self.orders()?,
            self.order_line()?,
            self.stock()?,
            self.supplier()?,
            self.nation()?,
            self.region()?,
        );
        let order_by_key = orders_t.index(&[orders::O_W_ID, orders::O_D_ID, orders::O_ID]);
        let customer_by_key =
            customer_t.index(&[customer::C_W_ID, customer::C_D_ID, customer::C_ID]);
        let stock_by_key = stock_t.index(&[stock::S_W_ID, stock::S_I_ID]);
        let supplier_by_key = supplier_t.index(&[supplier::SU_SUPPKEY]);
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        let region_by_key = region_t.index(&[region::R_REGIONKEY]);
        let mut groups: BTreeMap<String, Option<i64>> = BTreeMap::new();
        for ol in &order_line_t.rows {
            let (w, d) = (int(&ol[order_line::OL_W_ID]), int(&ol[order_line::OL_D_ID]));
            for o in order_by_key.lookup(&[w, d, int(&ol[order_line::OL_O_ID])]) {
                if !cmp_holds(int(&o[orders::O_ENTRY_D]), Some(JAN_2_2007), |a, b| a >= b) {
                    continue;
                }
                for c in customer_by_key.lookup(&[w, d, int(&o[orders::O_C_ID])]) {
                    for s in stock_by_key.lookup(&[w, int(&ol[order_line::OL_I_ID])]) {
                        let supplier_key = match (int(&s[stock::S_W_ID]), int(&s[stock::S_I_ID])) {
                            (Some(sw), Some(si)) => Some(supplier_of_stock(sw, si)),
                            _ => None,
                        };
                        for su in supplier_by_key.lookup(&[supplier_key]) {
                            let customer_nation =
                                text(&c[customer::C_STATE]).and_then(nation_of_state);
                            let su_nation = int(&su[supplier::SU_NATIONKEY]);
                            if !cmp_holds(customer_nation, su_nation, |a, b| a == b) {
                                continue;
                            }
                            for n in nation_by_key.lookup(&[su_nation]) {
                                for r in region_by_key.lookup(&[int(&n[nation::N_REGIONKEY])]) {
                                    if text(&r[region::R_NAME]) != Some("Europe") {
                                        continue;
                                    }
                                    let Some(name) = text(&n[nation::N_NAME]) else {
                                        continue;
                                    };
                                    let sum = groups.entry(name.to_owned()).or_default();
                                    add(sum, money_cents(&ol[order_line::OL_AMOUNT]));
                                }
                            }
                        }
                    }
                }
            }
        }
        let rows = groups
            .into_iter()
            .map(|(name, sum)| vec![Cell::Text(name), money(sum)])
            .collect();
        Ok(sorted(rows, &[(1, DESC)]))
    }

    fn q6(&self) -> Result<QueryResult, LabError> {
        let mut sum = None;
        for ol in &self.order_line()?.rows {
            let delivered = int(&ol[order_line::OL_DELIVERY_D]);
            let quantity = int(&ol[order_line::OL_QUANTITY]);
            if cmp_holds(delivered, Some(JAN_1_1999), |a, b| a >= b)
                && cmp_holds(delivered, Some(FAR_FUTURE), |a, b| a < b)
                && cmp_holds(quantity, Some(1), |a, b| a >= b)
                && cmp_holds(quantity, Some(100_000), |a, b| a <= b)
            {
                add(&mut sum, money_cents(&ol[order_line::OL_AMOUNT]));
            }
        }
        Ok(QueryResult::unordered(vec![vec![money(sum)]]))
    }

    fn q7(&self) -> Result<QueryResult, LabError> {
        let (supplier_t, stock_t, order_line_t, orders_t, customer_t, nation_t) = (
            self.supplier()?,
            self.stock()?,
            self.order_line()?,
            self.orders()?,
            self.customer()?,
            self.nation()?,
        );
        let stock_by_key = stock_t.index(&[stock::S_W_ID, stock::S_I_ID]);
        let supplier_by_key = supplier_t.index(&[supplier::SU_SUPPKEY]);
        let order_by_key = orders_t.index(&[orders::O_W_ID, orders::O_D_ID, orders::O_ID]);
        let customer_by_key =
            customer_t.index(&[customer::C_W_ID, customer::C_D_ID, customer::C_ID]);
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        let mut groups: BTreeMap<(i64, String, i64), Option<i64>> = BTreeMap::new();
        for ol in &order_line_t.rows {
            let delivered = int(&ol[order_line::OL_DELIVERY_D]);
            if !(cmp_holds(delivered, Some(JAN_2_2007), |a, b| a >= b)
                && cmp_holds(delivered, Some(FAR_FUTURE), |a, b| a <= b))
            {
                continue;
            }
            let stock_key = [
                int(&ol[order_line::OL_SUPPLY_W_ID]),
                int(&ol[order_line::OL_I_ID]),
            ];
            for s in stock_by_key.lookup(&stock_key) {
                let supplier_key = int(&s[stock::S_W_ID])
                    .zip(int(&s[stock::S_I_ID]))
                    .map(|(w, i)| supplier_of_stock(w, i));
                for su in supplier_by_key.lookup(&[supplier_key]) {
                    let (w, d) = (int(&ol[order_line::OL_W_ID]), int(&ol[order_line::OL_D_ID]));
                    for o in order_by_key.lookup(&[w, d, int(&ol[order_line::OL_O_ID])]) {
                        for c in customer_by_key.lookup(&[w, d, int(&o[orders::O_C_ID])]) {
                            let customer_nation =
                                text(&c[customer::C_STATE]).and_then(nation_of_state);
                            for n1 in nation_by_key.lookup(&[int(&su[supplier::SU_NATIONKEY])]) {
                                for n2 in nation_by_key.lookup(&[customer_nation]) {
                                    let (name1, name2) =
                                        (text(&n1[nation::N_NAME]), text(&n2[nation::N_NAME]));
                                    let crosses = (name1 == Some("Germany")
                                        && name2 == Some("Cambodia"))
                                        || (name1 == Some("Cambodia") && name2 == Some("Germany"));
                                    if !crosses {
                                        continue;
                                    }
                                    let (Some(su_nation), Some(letter), Some(entry)) = (
                                        int(&su[supplier::SU_NATIONKEY]),
                                        prefix(&c[customer::C_STATE], 1),
                                        int(&o[orders::O_ENTRY_D]),
                                    ) else {
                                        continue;
                                    };
                                    let sum = groups
                                        .entry((su_nation, letter, year_of(entry)))
                                        .or_default();
                                    add(sum, money_cents(&ol[order_line::OL_AMOUNT]));
                                }
                            }
                        }
                    }
                }
            }
        }
        let rows = groups
            .into_iter()
            .map(|((nation, letter, year), sum)| {
                vec![
                    Cell::Int(nation),
                    Cell::Text(letter),
                    Cell::Int(year),
                    money(sum),
                ]
            })
            .collect();
        Ok(sorted(rows, &[(0, ASC), (1, ASC), (2, ASC)]))
    }

    fn q8(&self) -> Result<QueryResult, LabError> {
        let (item_t, supplier_t, stock_t, order_line_t, orders_t, customer_t, nation_t, region_t) = (
            self.item()?,
            self.supplier()?,
            self.stock()?,
            self.order_line()?,
            self.orders()?,
            self.customer()?,
            self.nation()?,
            self.region()?,
        );
        let item_by_key = item_t.index(&[item::I_ID]);
        let stock_by_key = stock_t.index(&[stock::S_W_ID, stock::S_I_ID]);
        let supplier_by_key = supplier_t.index(&[supplier::SU_SUPPKEY]);
        let order_by_key = orders_t.index(&[orders::O_W_ID, orders::O_D_ID, orders::O_ID]);
        let customer_by_key =
            customer_t.index(&[customer::C_W_ID, customer::C_D_ID, customer::C_ID]);
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        let region_by_key = region_t.index(&[region::R_REGIONKEY]);
        let mut groups: BTreeMap<i64, (Option<i64>, Option<i64>)> = BTreeMap::new();
        for ol in &order_line_t.rows {
            let item_id = int(&ol[order_line::OL_I_ID]);
            if !cmp_holds(item_id, Some(1_000), |a, b| a < b) {
                continue;
            }
            for i in item_by_key.lookup(&[item_id]) {
                if !ends(&i[item::I_DATA], "b") {
                    continue;
                }
                let stock_key = [int(&ol[order_line::OL_SUPPLY_W_ID]), item_id];
                for s in stock_by_key.lookup(&stock_key) {
                    let supplier_key = int(&s[stock::S_W_ID])
                        .zip(int(&s[stock::S_I_ID]))
                        .map(|(w, i)| supplier_of_stock(w, i));
                    for su in supplier_by_key.lookup(&[supplier_key]) {
                        let (w, d) = (int(&ol[order_line::OL_W_ID]), int(&ol[order_line::OL_D_ID]));
                        for o in order_by_key.lookup(&[w, d, int(&ol[order_line::OL_O_ID])]) {
                            let entry = int(&o[orders::O_ENTRY_D]);
                            if !(cmp_holds(entry, Some(JAN_2_2007), |a, b| a >= b)
                                && cmp_holds(entry, Some(FAR_FUTURE), |a, b| a <= b))
                            {
                                continue;
                            }
                            for c in customer_by_key.lookup(&[w, d, int(&o[orders::O_C_ID])]) {
                                let customer_nation =
                                    text(&c[customer::C_STATE]).and_then(nation_of_state);
                                for n1 in nation_by_key.lookup(&[customer_nation]) {
                                    let regions =
                                        region_by_key.lookup(&[int(&n1[nation::N_REGIONKEY])]);
                                    for r in regions {
                                        if text(&r[region::R_NAME]) != Some("Europe") {
                                            continue;
                                        }
                                        let su_nation = int(&su[supplier::SU_NATIONKEY]);
                                        for n2 in nation_by_key.lookup(&[su_nation]) {
                                            let Some(entry) = entry else { continue };
                                            let amount = money_cents(&ol[order_line::OL_AMOUNT]);
                                            let german =
                                                if text(&n2[nation::N_NAME]) == Some("Germany") {
                                                    amount
                                                } else {
                                                    Some(0)
                                                };
                                            let group = groups.entry(year_of(entry)).or_default();
                                            add(&mut group.0, german);
                                            add(&mut group.1, amount);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let rows = groups
            .into_iter()
            .map(|(year, (german, total))| vec![Cell::Int(year), market_share(german, total)])
            .collect();
        Ok(sorted(rows, &[(0, ASC)]))
    }

    fn q9(&self) -> Result<QueryResult, LabError> {
        let (item_t, stock_t, supplier_t, order_line_t, orders_t, nation_t) = (
            self.item()?,
            self.stock()?,
            self.supplier()?,
            self.order_line()?,
            self.orders()?,
            self.nation()?,
        );
        let item_by_key = item_t.index(&[item::I_ID]);
        let stock_by_key = stock_t.index(&[stock::S_W_ID, stock::S_I_ID]);
        let supplier_by_key = supplier_t.index(&[supplier::SU_SUPPKEY]);
        let order_by_key = orders_t.index(&[orders::O_W_ID, orders::O_D_ID, orders::O_ID]);
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        let mut groups: BTreeMap<(String, i64), Option<i64>> = BTreeMap::new();
        for ol in &order_line_t.rows {
            let item_id = int(&ol[order_line::OL_I_ID]);
            for i in item_by_key.lookup(&[item_id]) {
                if !ends(&i[item::I_DATA], "bb") {
                    continue;
                }
                for s in stock_by_key.lookup(&[int(&ol[order_line::OL_SUPPLY_W_ID]), item_id]) {
                    let supplier_key = int(&s[stock::S_W_ID])
                        .zip(int(&s[stock::S_I_ID]))
                        .map(|(w, i)| supplier_of_stock(w, i));
                    for su in supplier_by_key.lookup(&[supplier_key]) {
                        let order_key = [
                            int(&ol[order_line::OL_W_ID]),
                            int(&ol[order_line::OL_D_ID]),
                            int(&ol[order_line::OL_O_ID]),
                        ];
                        for o in order_by_key.lookup(&order_key) {
                            for n in nation_by_key.lookup(&[int(&su[supplier::SU_NATIONKEY])]) {
                                let (Some(name), Some(entry)) =
                                    (text(&n[nation::N_NAME]), int(&o[orders::O_ENTRY_D]))
                                else {
                                    continue;
                                };
                                let sum =
                                    groups.entry((name.to_owned(), year_of(entry))).or_default();
                                add(sum, money_cents(&ol[order_line::OL_AMOUNT]));
                            }
                        }
                    }
                }
            }
        }
        let rows = groups
            .into_iter()
            .map(|((name, year), sum)| vec![Cell::Text(name), Cell::Int(year), money(sum)])
            .collect();
        Ok(sorted(rows, &[(0, ASC), (1, DESC)]))
    }

    fn q10(&self) -> Result<QueryResult, LabError> {
        let (customer_t, orders_t, order_line_t, nation_t) = (
            self.customer()?,
            self.orders()?,
            self.order_line()?,
            self.nation()?,
        );
        let customer_by_key =
            customer_t.index(&[customer::C_W_ID, customer::C_D_ID, customer::C_ID]);
        let lines_by_order = order_line_t.index(&[
            order_line::OL_W_ID,
            order_line::OL_D_ID,
            order_line::OL_O_ID,
        ]);
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        type Group = (i64, String, String, String, String);
        let mut groups: BTreeMap<Group, Option<i64>> = BTreeMap::new();
        for o in &orders_t.rows {
            let entry = int(&o[orders::O_ENTRY_D]);
            if !cmp_holds(entry, Some(JAN_2_2007), |a, b| a >= b) {
                continue;
            }
            let (w, d) = (int(&o[orders::O_W_ID]), int(&o[orders::O_D_ID]));
            for c in customer_by_key.lookup(&[w, d, int(&o[orders::O_C_ID])]) {
                let customer_nation = text(&c[customer::C_STATE]).and_then(nation_of_state);
                for n in nation_by_key.lookup(&[customer_nation]) {
                    for ol in lines_by_order.lookup(&[w, d, int(&o[orders::O_ID])]) {
                        if !cmp_holds(entry, int(&ol[order_line::OL_DELIVERY_D]), |a, b| a <= b) {
                            continue;
                        }
                        let key = (
                            int(&c[customer::C_ID]),
                            text(&c[customer::C_LAST]),
                            text(&c[customer::C_CITY]),
                            text(&c[customer::C_PHONE]),
                            text(&n[nation::N_NAME]),
                        );
                        let (Some(id), Some(last), Some(city), Some(phone), Some(name)) = key
                        else {
                            continue;
                        };
                        let group = (
                            id,
                            last.to_owned(),
                            city.to_owned(),
                            phone.to_owned(),
                            name.to_owned(),
                        );
                        add(
                            groups.entry(group).or_default(),
                            money_cents(&ol[order_line::OL_AMOUNT]),
                        );
                    }
                }
            }
        }
        let rows = groups
            .into_iter()
            .map(|((id, last, city, phone, name), sum)| {
                vec![
                    Cell::Int(id),
                    Cell::Text(last),
                    money(sum),
                    Cell::Text(city),
                    Cell::Text(phone),
                    Cell::Text(name),
                ]
            })
            .collect();
        Ok(sorted(rows, &[(2, DESC)]))
    }

    fn q11(&self) -> Result<QueryResult, LabError> {
        let (stock_t, supplier_t, nation_t) = (self.stock()?, self.supplier()?, self.nation()?);
        let supplier_by_key = supplier_t.index(&[supplier::SU_SUPPKEY]);
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        // Rows of `stock, supplier, nation where ... and n_name = 'Germany'`.
        let mut german_stock: Vec<&Row> = Vec::new();
        for s in &stock_t.rows {
            let supplier_key = int(&s[stock::S_W_ID])
                .zip(int(&s[stock::S_I_ID]))
                .map(|(w, i)| supplier_of_stock(w, i));
            for su in supplier_by_key.lookup(&[supplier_key]) {
                for n in nation_by_key.lookup(&[int(&su[supplier::SU_NATIONKEY])]) {
                    if text(&n[nation::N_NAME]) == Some("Germany") {
                        german_stock.push(s);
                    }
                }
            }
        }
        let mut total = None;
        let mut groups: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        for s in &german_stock {
            add(&mut total, int(&s[stock::S_ORDER_CNT]));
            if let Some(item_id) = int(&s[stock::S_I_ID]) {
                add(
                    groups.entry(item_id).or_default(),
                    int(&s[stock::S_ORDER_CNT]),
                );
            }
        }
        let rows = groups
            .into_iter()
            .filter(|(_, sum)| match (sum, total) {
                (Some(sum), Some(total)) => *sum as f64 > total as f64 * 0.005,
                _ => false,
            })
            .map(|(item_id, sum)| vec![Cell::Int(item_id), sum.map_or(Cell::Null, Cell::Int)])
            .collect();
        Ok(sorted(rows, &[(1, DESC)]))
    }

    fn q12(&self) -> Result<QueryResult, LabError> {
        let (orders_t, order_line_t) = (self.orders()?, self.order_line()?);
        let lines_by_order = order_line_t.index(&[
            order_line::OL_W_ID,
            order_line::OL_D_ID,
            order_line::OL_O_ID,
        ]);
        let mut groups: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for o in &orders_t.rows {
            let order_key = [
                int(&o[orders::O_W_ID]),
                int(&o[orders::O_D_ID]),
                int(&o[orders::O_ID]),
            ];
            for ol in lines_by_order.lookup(&order_key) {
                let delivered = int(&ol[order_line::OL_DELIVERY_D]);
                if !(cmp_holds(int(&o[orders::O_ENTRY_D]), delivered, |a, b| a <= b)
                    && cmp_holds(delivered, Some(FAR_FUTURE), |a, b| a < b))
                {
                    continue;
                }
                let carrier = int(&o[orders::O_CARRIER_ID]);
                let high = cmp_holds(carrier, Some(1), |a, b| a == b)
                    || cmp_holds(carrier, Some(2), |a, b| a == b);
                let low = cmp_holds(carrier, Some(1), |a, b| a != b)
                    && cmp_holds(carrier, Some(2), |a, b| a != b);
                let Some(count) = int(&o[orders::O_OL_CNT]) else {
                    continue;
                };
                let group = groups.entry(count).or_default();
                group.0 += i64::from(high);
                group.1 += i64::from(low);
            }
        }
        let rows = groups
            .into_iter()
            .map(|(count, (high, low))| vec![Cell::Int(count), Cell::Int(high), Cell::Int(low)])
            .collect();
        Ok(sorted(rows, &[(0, ASC)]))
    }

    fn q13(&self) -> Result<QueryResult, LabError> {
        let (customer_t, orders_t) = (self.customer()?, self.orders()?);
        let orders_by_customer = orders_t.index(&[orders::O_W_ID, orders::O_D_ID, orders::O_C_ID]);
        // The left outer join, grouped by c_id: count(o_id) counts the matched orders.
        let mut c_orders: BTreeMap<i64, i64> = BTreeMap::new();
        for c in &customer_t.rows {
            let Some(id) = int(&c[customer::C_ID]) else {
                continue;
            };
            let key = [
                int(&c[customer::C_W_ID]),
                int(&c[customer::C_D_ID]),
                Some(id),
            ];
            let matched = orders_by_customer
                .lookup(&key)
                .filter(|o| cmp_holds(int(&o[orders::O_CARRIER_ID]), Some(8), |a, b| a > b))
                .filter(|o| !o[orders::O_ID].is_null())
                .count() as i64;
            *c_orders.entry(id).or_default() += matched;
        }
        let mut groups: BTreeMap<i64, i64> = BTreeMap::new();
        for count in c_orders.into_values() {
            *groups.entry(count).or_default() += 1;
        }
        let rows = groups
            .into_iter()
            .map(|(count, customers)| vec![Cell::Int(count), Cell::Int(customers)])
            .collect();
        Ok(sorted(rows, &[(1, DESC), (0, DESC)]))
    }

    fn q14(&self) -> Result<QueryResult, LabError> {
        let (order_line_t, item_t) = (self.order_line()?, self.item()?);
        let item_by_key = item_t.index(&[item::I_ID]);
        let (mut promo, mut total) = (None, None);
        for ol in &order_line_t.rows {
            let delivered = int(&ol[order_line::OL_DELIVERY_D]);
            if !(cmp_holds(delivered, Some(JAN_2_2007), |a, b| a >= b)
                && cmp_holds(delivered, Some(FAR_FUTURE), |a, b| a < b))
            {
                continue;
            }
            for i in item_by_key.lookup(&[int(&ol[order_line::OL_I_ID])]) {
                let amount = money_cents(&ol[order_line::OL_AMOUNT]);
                add(
                    &mut promo,
                    if starts(&i[item::I_DATA], "PR") {
                        amount
                    } else {
                        Some(0)
                    },
                );
                add(&mut total, amount);
            }
        }
        Ok(QueryResult::unordered(vec![vec![promo_revenue(
            promo, total,
        )]]))
    }

    fn q15(&self) -> Result<QueryResult, LabError> {
        let (order_line_t, stock_t, supplier_t) =
            (self.order_line()?, self.stock()?, self.supplier()?);
        let stock_by_key = stock_t.index(&[stock::S_W_ID, stock::S_I_ID]);
        let mut revenue: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        for ol in &order_line_t.rows {
            if !cmp_holds(
                int(&ol[order_line::OL_DELIVERY_D]),
                Some(JAN_2_2007),
                |a, b| a >= b,
            ) {
                continue;
            }
            let stock_key = [
                int(&ol[order_line::OL_SUPPLY_W_ID]),
                int(&ol[order_line::OL_I_ID]),
            ];
            for s in stock_by_key.lookup(&stock_key) {
                let (Some(w), Some(i)) = (int(&s[stock::S_W_ID]), int(&s[stock::S_I_ID])) else {
                    continue;
                };
                add(
                    revenue.entry(supplier_of_stock(w, i)).or_default(),
                    money_cents(&ol[order_line::OL_AMOUNT]),
                );
            }
        }
        let best = revenue.values().flatten().max().copied();
        let mut rows = Vec::new();
        for su in &supplier_t.rows {
            let Some(key) = int(&su[supplier::SU_SUPPKEY]) else {
                continue;
            };
            let total = revenue.get(&key).copied().flatten();
            if cmp_holds(total, best, |a, b| a == b) {
                rows.push(vec![
                    Cell::Int(key),
                    text_cell(&su[supplier::SU_NAME]),
                    text_cell(&su[supplier::SU_ADDRESS]),
                    text_cell(&su[supplier::SU_PHONE]),
                    money(total),
                ]);
            }
        }
        Ok(sorted(rows, &[(0, ASC)]))
    }

    fn q16(&self) -> Result<QueryResult, LabError> {
        let (stock_t, item_t, supplier_t) = (self.stock()?, self.item()?, self.supplier()?);
        let item_by_key = item_t.index(&[item::I_ID]);
        let bad: BTreeSet<i64> = supplier_t
            .rows
            .iter()
            .filter(|su| {
                text(&su[supplier::SU_COMMENT]).is_some_and(|comment| comment.contains("bad"))
            })
            .filter_map(|su| int(&su[supplier::SU_SUPPKEY]))
            .collect();
        let mut groups: BTreeMap<(String, String, i64), BTreeSet<i64>> = BTreeMap::new();
        for s in &stock_t.rows {
            let (Some(w), Some(item_id)) = (int(&s[stock::S_W_ID]), int(&s[stock::S_I_ID])) else {
                continue;
            };
            for i in item_by_key.lookup(&[Some(item_id)]) {
                if starts(&i[item::I_DATA], "zz") {
                    continue;
                }
                let supplier_key = supplier_of_stock(w, item_id);
                if bad.contains(&supplier_key) {
                    continue;
                }
                let (Some(name), Some(brand), Some(price)) = (
                    text(&i[item::I_NAME]),
                    prefix(&i[item::I_DATA], 3),
                    money_cents(&i[item::I_PRICE]),
                ) else {
                    continue;
                };
                groups
                    .entry((name.to_owned(), brand, price))
                    .or_default()
                    .insert(supplier_key);
            }
        }
        let rows = groups
            .into_iter()
            .map(|((name, brand, price), suppliers)| {
                vec![
                    Cell::Text(name),
                    Cell::Text(brand),
                    money(Some(price)),
                    Cell::Int(suppliers.len() as i64),
                ]
            })
            .collect();
        Ok(sorted(rows, &[(3, DESC)]))
    }

    fn q17(&self) -> Result<QueryResult, LabError> {
        let (order_line_t, item_t) = (self.order_line()?, self.item()?);
        let lines_by_item = order_line_t.index(&[order_line::OL_I_ID]);
        // The derived table t: per item like '%b', the average quantity of its lines.
        let mut averages: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for i in &item_t.rows {
            if !ends(&i[item::I_DATA], "b") {
                continue;
            }
            let Some(item_id) = int(&i[item::I_ID]) else {
                continue;
            };
            for ol in lines_by_item.lookup(&[Some(item_id)]) {
                if let Some(quantity) = int(&ol[order_line::OL_QUANTITY]) {
                    let average = averages.entry(item_id).or_default();
                    average.0 += quantity;
                    average.1 += 1;
                }
            }
        }
        let mut sum = None;
        for ol in &order_line_t.rows {
            let Some(item_id) = int(&ol[order_line::OL_I_ID]) else {
                continue;
            };
            let Some(&(quantity_sum, count)) = averages.get(&item_id) else {
                continue;
            };
            let below = int(&ol[order_line::OL_QUANTITY])
                .is_some_and(|q| (q as f64) < quantity_sum as f64 / count as f64);
            if below {
                add(&mut sum, money_cents(&ol[order_line::OL_AMOUNT]));
            }
        }
        let result = sum.map_or(Cell::Null, |cents| Cell::Float(from_cents(cents) / 2.0));
        Ok(QueryResult::unordered(vec![vec![result]]))
    }

    fn q18(&self) -> Result<QueryResult, LabError> {
        let (customer_t, orders_t, order_line_t) =
            (self.customer()?, self.orders()?, self.order_line()?);
        let customer_by_key =
            customer_t.index(&[customer::C_W_ID, customer::C_D_ID, customer::C_ID]);
        let lines_by_order = order_line_t.index(&[
            order_line::OL_W_ID,
            order_line::OL_D_ID,
            order_line::OL_O_ID,
        ]);
        let mut rows = Vec::new();
        for o in &orders_t.rows {
            let (w, d) = (int(&o[orders::O_W_ID]), int(&o[orders::O_D_ID]));
            for c in customer_by_key.lookup(&[w, d, int(&o[orders::O_C_ID])]) {
                let mut sum = None;
                let mut lines = 0;
                for ol in lines_by_order.lookup(&[w, d, int(&o[orders::O_ID])]) {
                    add(&mut sum, money_cents(&ol[order_line::OL_AMOUNT]));
                    lines += 1;
                }
                if lines > 0 && cmp_holds(sum, Some(20_000), |a, b| a > b) {
                    rows.push(vec![
                        text_cell(&c[customer::C_LAST]),
                        int_cell(&c[customer::C_ID]),
                        int_cell(&o[orders::O_ID]),
                        int_cell(&o[orders::O_ENTRY_D]),
                        int_cell(&o[orders::O_OL_CNT]),
                        money(sum),
                    ]);
                }
            }
        }
        Ok(sorted(rows, &[(5, DESC), (3, ASC)]))
    }

    fn q19(&self) -> Result<QueryResult, LabError> {
        let (order_line_t, item_t) = (self.order_line()?, self.item()?);
        let item_by_key = item_t.index(&[item::I_ID]);
        let mut sum = None;
        for ol in &order_line_t.rows {
            for i in item_by_key.lookup(&[int(&ol[order_line::OL_I_ID])]) {
                let quantity = int(&ol[order_line::OL_QUANTITY]);
                let price = money_cents(&i[item::I_PRICE]);
                let common = cmp_holds(quantity, Some(1), |a, b| a >= b)
                    && cmp_holds(quantity, Some(10), |a, b| a <= b)
                    && cmp_holds(price, Some(100), |a, b| a >= b)
                    && cmp_holds(price, Some(40_000_000), |a, b| a <= b);
                let warehouse = int(&ol[order_line::OL_W_ID]);
                let among = |set: [i64; 3]| warehouse.is_some_and(|w| set.contains(&w));
                let data = &i[item::I_DATA];
                let branch_a = ends(data, "a") && among([1, 2, 3]);
                let branch_b = ends(data, "b") && among([1, 2, 4]);
                let branch_c = ends(data, "c") && among([1, 5, 3]);
                if common && (branch_a || branch_b || branch_c) {
                    add(&mut sum, money_cents(&ol[order_line::OL_AMOUNT]));
                }
            }
        }
        Ok(QueryResult::unordered(vec![vec![money(sum)]]))
    }

    fn q20(&self) -> Result<QueryResult, LabError> {
        let (supplier_t, nation_t, stock_t, item_t, order_line_t) = (
            self.supplier()?,
            self.nation()?,
            self.stock()?,
            self.item()?,
            self.order_line()?,
        );
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        let lines_by_item = order_line_t.index(&[order_line::OL_I_ID]);
        let co_items: BTreeSet<i64> = item_t
            .rows
            .iter()
            .filter(|i| starts(&i[item::I_DATA], "co"))
            .filter_map(|i| int(&i[item::I_ID]))
            .collect();
        // The IN subquery: grouped per stock row, having 2 * s_quantity > sum(ol_quantity).
        let mut chosen: BTreeSet<i64> = BTreeSet::new();
        for s in &stock_t.rows {
            let (Some(w), Some(item_id)) = (int(&s[stock::S_W_ID]), int(&s[stock::S_I_ID])) else {
                continue;
            };
            if !co_items.contains(&item_id) {
                continue;
            }
            let mut sum = None;
            let mut joined = 0;
            for ol in lines_by_item.lookup(&[Some(item_id)]) {
                let delivered = int(&ol[order_line::OL_DELIVERY_D]);
                if cmp_holds(delivered, Some(MAY_23_2010_NOON), |a, b| a > b) {
                    add(&mut sum, int(&ol[order_line::OL_QUANTITY]));
                    joined += 1;
                }
            }
            let twice = int(&s[stock::S_QUANTITY]).map(|q| 2 * q);
            if joined > 0 && cmp_holds(twice, sum, |a, b| a > b) {
                chosen.insert(supplier_of_stock(w, item_id));
            }
        }
        let mut rows = Vec::new();
        for su in &supplier_t.rows {
            let in_subquery = int(&su[supplier::SU_SUPPKEY]).is_some_and(|k| chosen.contains(&k));
            if !in_subquery {
                continue;
            }
            for n in nation_by_key.lookup(&[int(&su[supplier::SU_NATIONKEY])]) {
                if text(&n[nation::N_NAME]) == Some("Germany") {
                    rows.push(vec![
                        text_cell(&su[supplier::SU_NAME]),
                        text_cell(&su[supplier::SU_ADDRESS]),
                    ]);
                }
            }
        }
        Ok(sorted(rows, &[(0, ASC)]))
    }

    fn q21(&self) -> Result<QueryResult, LabError> {
        let (supplier_t, order_line_t, orders_t, stock_t, nation_t) = (
            self.supplier()?,
            self.order_line()?,
            self.orders()?,
            self.stock()?,
            self.nation()?,
        );
        let order_by_key = orders_t.index(&[orders::O_W_ID, orders::O_D_ID, orders::O_ID]);
        let stock_by_key = stock_t.index(&[stock::S_W_ID, stock::S_I_ID]);
        let supplier_by_key = supplier_t.index(&[supplier::SU_SUPPKEY]);
        let nation_by_key = nation_t.index(&[nation::N_NATIONKEY]);
        let lines_by_order = order_line_t.index(&[
            order_line::OL_W_ID,
            order_line::OL_D_ID,
            order_line::OL_O_ID,
        ]);
        let mut groups: BTreeMap<String, i64> = BTreeMap::new();
        for l1 in &order_line_t.rows {
            let order_key = [
                int(&l1[order_line::OL_W_ID]),
                int(&l1[order_line::OL_D_ID]),
                int(&l1[order_line::OL_O_ID]),
            ];
            let delivered = int(&l1[order_line::OL_DELIVERY_D]);
            for o in order_by_key.lookup(&order_key) {
                if !cmp_holds(delivered, int(&o[orders::O_ENTRY_D]), |a, b| a > b) {
                    continue;
                }
                let later_exists = lines_by_order.lookup(&order_key).any(|l2| {
                    cmp_holds(int(&l2[order_line::OL_DELIVERY_D]), delivered, |a, b| a > b)
                });
                if later_exists {
                    continue;
                }
                let stock_key = [order_key[0], int(&l1[order_line::OL_I_ID])];
                for s in stock_by_key.lookup(&stock_key) {
                    let supplier_key = int(&s[stock::S_W_ID])
                        .zip(int(&s[stock::S_I_ID]))
                        .map(|(w, i)| supplier_of_stock(w, i));
                    for su in supplier_by_key.lookup(&[supplier_key]) {
                        for n in nation_by_key.lookup(&[int(&su[supplier::SU_NATIONKEY])]) {
                            if text(&n[nation::N_NAME]) != Some("Germany") {
                                continue;
                            }
                            if let Some(name) = text(&su[supplier::SU_NAME]) {
                                *groups.entry(name.to_owned()).or_default() += 1;
                            }
                        }
                    }
                }
            }
        }
        let rows = groups
            .into_iter()
            .map(|(name, count)| vec![Cell::Text(name), Cell::Int(count)])
            .collect();
        Ok(sorted(rows, &[(1, DESC), (0, ASC)]))
    }

    fn q22(&self) -> Result<QueryResult, LabError> {
        let (customer_t, orders_t) = (self.customer()?, self.orders()?);
        let orders_by_customer = orders_t.index(&[orders::O_W_ID, orders::O_D_ID, orders::O_C_ID]);
        let phone_selected = |c: &Row| {
            prefix(&c[customer::C_PHONE], 1)
                .is_some_and(|first| ["1", "2", "3", "4", "5", "6", "7"].contains(&first.as_str()))
        };
        // The scalar subquery: avg(c_balance) over positive balances with a selected phone.
        let (mut sum, mut count) = (0i64, 0i64);
        for c in &customer_t.rows {
            let balance = money_cents(&c[customer::C_BALANCE]);
            if phone_selected(c) && cmp_holds(balance, Some(0), |a, b| a > b) {
                sum += balance.unwrap_or(0);
                count += 1;
            }
        }
        let average = (count > 0).then(|| sum as f64 / count as f64);
        let mut groups: BTreeMap<String, (i64, Option<i64>)> = BTreeMap::new();
        for c in &customer_t.rows {
            let balance = money_cents(&c[customer::C_BALANCE]);
            let above = match (balance, average) {
                (Some(balance), Some(average)) => balance as f64 > average,
                _ => false,
            };
            if !(phone_selected(c) && above) {
                continue;
            }
            let key = [
                int(&c[customer::C_W_ID]),
                int(&c[customer::C_D_ID]),
                int(&c[customer::C_ID]),
            ];
            if orders_by_customer.lookup(&key).next().is_some() {
                continue;
            }
            let Some(country) = prefix(&c[customer::C_STATE], 1) else {
                continue;
            };
            let group = groups.entry(country).or_default();
            group.0 += 1;
            add(&mut group.1, balance);
        }
        let rows = groups
            .into_iter()
            .map(|(country, (customers, balance))| {
                vec![Cell::Text(country), Cell::Int(customers), money(balance)]
            })
            .collect();
        Ok(sorted(rows, &[(0, ASC)]))
    }
}
