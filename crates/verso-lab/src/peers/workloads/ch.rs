//! CH-benCHmark in SQL, for PostgreSQL and DuckDB: TPC-C's transactions (as in
//! [`super::tpcc`]) beside the 22 queries, each query in a read-only transaction of its own.
//!
//! The query texts are Cole et al.'s as `workloads::ch::queries` quotes them, with the same
//! adaptations (`docs/design/ch.md`): the upper date bounds become 2100-01-01, dates are
//! microseconds since the epoch (so the date literals are those numbers, and `extract(year
//! from ...)` is the dialect's year of a microsecond timestamp), money is summed exactly,
//! as the benchmark's `DECIMAL(6,2)` columns would be (`CAST(x AS DECIMAL(12,2))`; the lab
//! stores money as DOUBLE, in whole cents), Q8's division by zero is NULL (`nullif`), and
//! every ORDER BY ends with the remaining output columns so the order is total. SQLite is
//! not offered: its SQL lacks `extract` and exact decimal sums; it runs the OLTP workloads.

use crate::peers::sql::{Dialect, Session, SqlRow, SqlType, TableDef};
use crate::peers::workloads::{at_one_snapshot, SqlWorkload};
use crate::peers::PeerKind;
use crate::workload::{LabError, OlapWorker, OltpWorker, QueryOutcome};
use crate::workloads::ch::queries::{
    FAR_FUTURE, JAN_1_1999, JAN_2_2007, MAY_23_2010_NOON, QUERY_NAMES,
};
use crate::workloads::ch::schema::{nation, region, supplier, NATIONS, REGIONS, SUPPLIER_COUNT};
use crate::workloads::ch::Ch;

/// The 22 queries with `{JAN_2_2007}`, `{FAR_FUTURE}`, `{JAN_1_1999}`, `{MAY_23_2010}`,
/// `YEAR(column)` and `MONEY(column)` still to be filled in for a dialect ([`query_texts`]).
const QUERIES: [&str; 22] = [
    // Q1
    "SELECT ol_number, sum(ol_quantity) AS sum_qty, sum(MONEY(ol_amount)) AS sum_amount, \
     avg(ol_quantity) AS avg_qty, avg(ol_amount) AS avg_amount, count(*) AS count_order \
     FROM order_line WHERE ol_delivery_d > {JAN_2_2007} GROUP BY ol_number ORDER BY ol_number",
    // Q2
    "SELECT su_suppkey, su_name, n_name, i_id, i_name, su_address, su_phone, su_comment \
     FROM item, supplier, stock, nation, region, \
     (SELECT s_i_id AS m_i_id, min(s_quantity) AS m_s_quantity FROM stock, supplier, nation, \
     region WHERE mod((s_w_id * s_i_id), 10000) = su_suppkey AND su_nationkey = n_nationkey \
     AND n_regionkey = r_regionkey AND r_name LIKE 'Europ%' GROUP BY s_i_id) m \
     WHERE i_id = s_i_id AND mod((s_w_id * s_i_id), 10000) = su_suppkey \
     AND su_nationkey = n_nationkey AND n_regionkey = r_regionkey AND i_data LIKE '%b' \
     AND r_name LIKE 'Europ%' AND i_id = m_i_id AND s_quantity = m_s_quantity \
     ORDER BY n_name, su_name, i_id, 1, 5, 6, 7, 8",
    // Q3
    "SELECT ol_o_id, ol_w_id, ol_d_id, sum(MONEY(ol_amount)) AS revenue, o_entry_d \
     FROM customer, new_order, orders, order_line \
     WHERE c_state LIKE 'A%' AND c_id = o_c_id AND c_w_id = o_w_id AND c_d_id = o_d_id \
     AND no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id AND ol_w_id = o_w_id \
     AND ol_d_id = o_d_id AND ol_o_id = o_id AND o_entry_d > {JAN_2_2007} \
     GROUP BY ol_o_id, ol_w_id, ol_d_id, o_entry_d ORDER BY revenue DESC, o_entry_d, 1, 2, 3",
    // Q4
    "SELECT o_ol_cnt, count(*) AS order_count FROM orders \
     WHERE o_entry_d >= {JAN_2_2007} AND o_entry_d < {FAR_FUTURE} \
     AND EXISTS (SELECT * FROM order_line WHERE o_id = ol_o_id AND o_w_id = ol_w_id \
     AND o_d_id = ol_d_id AND ol_delivery_d >= o_entry_d) \
     GROUP BY o_ol_cnt ORDER BY o_ol_cnt",
    // Q5
    "SELECT n_name, sum(MONEY(ol_amount)) AS revenue \
     FROM customer, orders, order_line, stock, supplier, nation, region \
     WHERE c_id = o_c_id AND c_w_id = o_w_id AND c_d_id = o_d_id AND ol_o_id = o_id \
     AND ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_w_id = s_w_id AND ol_i_id = s_i_id \
     AND mod((s_w_id * s_i_id), 10000) = su_suppkey \
     AND ascii(substr(c_state, 1, 1)) = su_nationkey AND su_nationkey = n_nationkey \
     AND n_regionkey = r_regionkey AND r_name = 'Europe' AND o_entry_d >= {JAN_2_2007} \
     GROUP BY n_name ORDER BY revenue DESC, 1",
    // Q6
    "SELECT sum(MONEY(ol_amount)) AS revenue FROM order_line \
     WHERE ol_delivery_d >= {JAN_1_1999} AND ol_delivery_d < {FAR_FUTURE} \
     AND ol_quantity BETWEEN 1 AND 100000",
    // Q7
    "SELECT su_nationkey AS supp_nation, substr(c_state, 1, 1) AS cust_nation, \
     YEAR(o_entry_d) AS l_year, sum(MONEY(ol_amount)) AS revenue \
     FROM supplier, stock, order_line, orders, customer, nation n1, nation n2 \
     WHERE ol_supply_w_id = s_w_id AND ol_i_id = s_i_id \
     AND mod((s_w_id * s_i_id), 10000) = su_suppkey AND ol_w_id = o_w_id \
     AND ol_d_id = o_d_id AND ol_o_id = o_id AND c_id = o_c_id AND c_w_id = o_w_id \
     AND c_d_id = o_d_id AND su_nationkey = n1.n_nationkey \
     AND ascii(substr(c_state, 1, 1)) = n2.n_nationkey \
     AND ((n1.n_name = 'Germany' AND n2.n_name = 'Cambodia') \
       OR (n1.n_name = 'Cambodia' AND n2.n_name = 'Germany')) \
     AND ol_delivery_d BETWEEN {JAN_2_2007} AND {FAR_FUTURE} \
     GROUP BY su_nationkey, substr(c_state, 1, 1), YEAR(o_entry_d) \
     ORDER BY su_nationkey, cust_nation, l_year, 4",
    // Q8
    "SELECT YEAR(o_entry_d) AS l_year, \
     sum(CASE WHEN n2.n_name = 'Germany' THEN MONEY(ol_amount) ELSE 0 END) \
       / nullif(sum(MONEY(ol_amount)), 0) AS mkt_share \
     FROM item, supplier, stock, order_line, orders, customer, nation n1, nation n2, region \
     WHERE i_id = s_i_id AND ol_i_id = s_i_id AND ol_supply_w_id = s_w_id \
     AND mod((s_w_id * s_i_id), 10000) = su_suppkey AND ol_w_id = o_w_id \
     AND ol_d_id = o_d_id AND ol_o_id = o_id AND c_id = o_c_id AND c_w_id = o_w_id \
     AND c_d_id = o_d_id AND n1.n_nationkey = ascii(substr(c_state, 1, 1)) \
     AND n1.n_regionkey = r_regionkey AND ol_i_id < 1000 AND r_name = 'Europe' \
     AND su_nationkey = n2.n_nationkey \
     AND o_entry_d BETWEEN {JAN_2_2007} AND {FAR_FUTURE} AND i_data LIKE '%b' \
     AND i_id = ol_i_id GROUP BY YEAR(o_entry_d) ORDER BY l_year, 2",
    // Q9
    "SELECT n_name, YEAR(o_entry_d) AS l_year, sum(MONEY(ol_amount)) AS sum_profit \
     FROM item, stock, supplier, order_line, orders, nation \
     WHERE ol_i_id = s_i_id AND ol_supply_w_id = s_w_id \
     AND mod((s_w_id * s_i_id), 10000) = su_suppkey AND ol_w_id = o_w_id \
     AND ol_d_id = o_d_id AND ol_o_id = o_id AND ol_i_id = i_id \
     AND su_nationkey = n_nationkey AND i_data LIKE '%bb' \
     GROUP BY n_name, YEAR(o_entry_d) ORDER BY n_name, l_year DESC, 3",
    // Q10
    "SELECT c_id, c_last, sum(MONEY(ol_amount)) AS revenue, c_city, c_phone, n_name \
     FROM customer, orders, order_line, nation \
     WHERE c_id = o_c_id AND c_w_id = o_w_id AND c_d_id = o_d_id AND ol_w_id = o_w_id \
     AND ol_d_id = o_d_id AND ol_o_id = o_id AND o_entry_d >= {JAN_2_2007} \
     AND o_entry_d <= ol_delivery_d AND n_nationkey = ascii(substr(c_state, 1, 1)) \
     GROUP BY c_id, c_last, c_city, c_phone, n_name \
     ORDER BY revenue DESC, 1, 2, 4, 5, 6",
    // Q11
    "SELECT s_i_id, sum(s_order_cnt) AS ordercount FROM stock, supplier, nation \
     WHERE mod((s_w_id * s_i_id), 10000) = su_suppkey AND su_nationkey = n_nationkey \
     AND n_name = 'Germany' GROUP BY s_i_id \
     HAVING sum(s_order_cnt) > (SELECT sum(s_order_cnt) * .005 FROM stock, supplier, nation \
       WHERE mod((s_w_id * s_i_id), 10000) = su_suppkey AND su_nationkey = n_nationkey \
       AND n_name = 'Germany') \
     ORDER BY ordercount DESC, 1",
    // Q12
    "SELECT o_ol_cnt, \
     sum(CASE WHEN o_carrier_id = 1 OR o_carrier_id = 2 THEN 1 ELSE 0 END) AS high_line_count, \
     sum(CASE WHEN o_carrier_id <> 1 AND o_carrier_id <> 2 THEN 1 ELSE 0 END) AS low_line_count \
     FROM orders, order_line WHERE ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
     AND o_entry_d <= ol_delivery_d AND ol_delivery_d < {FAR_FUTURE} \
     GROUP BY o_ol_cnt ORDER BY o_ol_cnt",
    // Q13
    "SELECT c_count, count(*) AS custdist FROM \
     (SELECT c_id, count(o_id) AS c_count FROM customer LEFT OUTER JOIN orders ON \
       (c_w_id = o_w_id AND c_d_id = o_d_id AND c_id = o_c_id AND o_carrier_id > 8) \
      GROUP BY c_id) AS c_orders \
     GROUP BY c_count ORDER BY custdist DESC, c_count DESC",
    // Q14
    "SELECT 100.00 * sum(CASE WHEN i_data LIKE 'PR%' THEN MONEY(ol_amount) ELSE 0 END) \
       / (1 + sum(MONEY(ol_amount))) AS promo_revenue \
     FROM order_line, item WHERE ol_i_id = i_id AND ol_delivery_d >= {JAN_2_2007} \
     AND ol_delivery_d < {FAR_FUTURE}",
    // Q15
    "WITH revenue (supplier_no, total_revenue) AS ( \
       SELECT mod((s_w_id * s_i_id), 10000) AS supplier_no, sum(MONEY(ol_amount)) AS total_revenue \
       FROM order_line, stock WHERE ol_i_id = s_i_id AND ol_supply_w_id = s_w_id \
       AND ol_delivery_d >= {JAN_2_2007} GROUP BY mod((s_w_id * s_i_id), 10000)) \
     SELECT su_suppkey, su_name, su_address, su_phone, total_revenue FROM supplier, revenue \
     WHERE su_suppkey = supplier_no \
     AND total_revenue = (SELECT max(total_revenue) FROM revenue) \
     ORDER BY su_suppkey",
    // Q16
    "SELECT i_name, substr(i_data, 1, 3) AS brand, MONEY(i_price) AS price, \
     count(DISTINCT (mod((s_w_id * s_i_id), 10000))) AS supplier_cnt FROM stock, item \
     WHERE i_id = s_i_id AND i_data NOT LIKE 'zz%' \
     AND (mod((s_w_id * s_i_id), 10000) NOT IN \
       (SELECT su_suppkey FROM supplier WHERE su_comment LIKE '%bad%')) \
     GROUP BY i_name, substr(i_data, 1, 3), MONEY(i_price) ORDER BY supplier_cnt DESC, 1, 2, 3",
    // Q17
    "SELECT sum(MONEY(ol_amount)) / 2.0 AS avg_yearly FROM order_line, \
     (SELECT i_id, avg(ol_quantity) AS a FROM item, order_line \
      WHERE i_data LIKE '%b' AND ol_i_id = i_id GROUP BY i_id) t \
     WHERE ol_i_id = t.i_id AND ol_quantity < t.a",
    // Q18
    "SELECT c_last, c_id, o_id, o_entry_d, o_ol_cnt, sum(MONEY(ol_amount)) AS amount_sum \
     FROM customer, orders, order_line WHERE c_id = o_c_id AND c_w_id = o_w_id \
     AND c_d_id = o_d_id AND ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
     GROUP BY o_id, o_w_id, o_d_id, c_id, c_last, o_entry_d, o_ol_cnt \
     HAVING sum(MONEY(ol_amount)) > 200 ORDER BY amount_sum DESC, o_entry_d, 1, 2, 3, 5",
    // Q19
    "SELECT sum(MONEY(ol_amount)) AS revenue FROM order_line, item \
     WHERE (ol_i_id = i_id AND i_data LIKE '%a' AND ol_quantity >= 1 AND ol_quantity <= 10 \
            AND i_price BETWEEN 1 AND 400000 AND ol_w_id IN (1, 2, 3)) \
        OR (ol_i_id = i_id AND i_data LIKE '%b' AND ol_quantity >= 1 AND ol_quantity <= 10 \
            AND i_price BETWEEN 1 AND 400000 AND ol_w_id IN (1, 2, 4)) \
        OR (ol_i_id = i_id AND i_data LIKE '%c' AND ol_quantity >= 1 AND ol_quantity <= 10 \
            AND i_price BETWEEN 1 AND 400000 AND ol_w_id IN (1, 5, 3))",
    // Q20
    "SELECT su_name, su_address FROM supplier, nation \
     WHERE su_suppkey IN (SELECT mod(s_i_id * s_w_id, 10000) FROM stock, order_line \
       WHERE s_i_id IN (SELECT i_id FROM item WHERE i_data LIKE 'co%') \
       AND ol_i_id = s_i_id AND ol_delivery_d > {MAY_23_2010} \
       GROUP BY s_i_id, s_w_id, s_quantity HAVING 2 * s_quantity > sum(ol_quantity)) \
     AND su_nationkey = n_nationkey AND n_name = 'Germany' ORDER BY su_name, 2",
    // Q21
    "SELECT su_name, count(*) AS numwait FROM supplier, order_line l1, orders, stock, nation \
     WHERE ol_o_id = o_id AND ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_w_id = s_w_id \
     AND ol_i_id = s_i_id AND mod((s_w_id * s_i_id), 10000) = su_suppkey \
     AND l1.ol_delivery_d > o_entry_d \
     AND NOT EXISTS (SELECT * FROM order_line l2 WHERE l2.ol_o_id = l1.ol_o_id \
       AND l2.ol_w_id = l1.ol_w_id AND l2.ol_d_id = l1.ol_d_id \
       AND l2.ol_delivery_d > l1.ol_delivery_d) \
     AND su_nationkey = n_nationkey AND n_name = 'Germany' \
     GROUP BY su_name ORDER BY numwait DESC, su_name",
    // Q22
    "SELECT substr(c_state, 1, 1) AS country, count(*) AS numcust, \
     sum(MONEY(c_balance)) AS totacctbal FROM customer \
     WHERE substr(c_phone, 1, 1) IN ('1', '2', '3', '4', '5', '6', '7') \
     AND c_balance > (SELECT avg(c_balance) FROM customer WHERE c_balance > 0.00 \
       AND substr(c_phone, 1, 1) IN ('1', '2', '3', '4', '5', '6', '7')) \
     AND NOT EXISTS (SELECT * FROM orders WHERE o_c_id = c_id AND o_w_id = c_w_id \
       AND o_d_id = c_d_id) \
     GROUP BY substr(c_state, 1, 1) ORDER BY substr(c_state, 1, 1)",
];

/// Replaces every `NAME(argument)` in `sql` (argument without parentheses) by `with`
/// applied to the argument.
fn replace_calls(sql: &str, name: &str, with: impl Fn(&str) -> String) -> String {
    let pattern = format!("{name}(");
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find(&pattern) {
        // Only a whole word: `avg(` must not match `YEAR(`'s tail, nor the reverse.
        let word_start = at == 0
            || !rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let Some(close) = rest[at + pattern.len()..].find(')') else {
            break;
        };
        if !word_start {
            out.push_str(&rest[..at + pattern.len()]);
            rest = &rest[at + pattern.len()..];
            continue;
        }
        out.push_str(&rest[..at]);
        out.push_str(&with(&rest[at + pattern.len()..at + pattern.len() + close]));
        rest = &rest[at + pattern.len() + close + 1..];
    }
    out.push_str(rest);
    out
}

/// The 22 queries in `dialect`, in stream order.
pub fn query_texts(dialect: Dialect) -> Vec<String> {
    QUERIES
        .iter()
        .map(|sql| {
            let sql = sql
                .replace("{JAN_2_2007}", &JAN_2_2007.to_string())
                .replace("{FAR_FUTURE}", &FAR_FUTURE.to_string())
                .replace("{JAN_1_1999}", &JAN_1_1999.to_string())
                .replace("{MAY_23_2010}", &MAY_23_2010_NOON.to_string());
            let sql = replace_calls(&sql, "MONEY", |column| {
                format!("CAST({column} AS DECIMAL(12,2))")
            });
            replace_calls(&sql, "YEAR", |column| match dialect {
                Dialect::Postgres => format!(
                    "CAST(extract(year FROM to_timestamp({column} / 1000000.0) AT TIME ZONE \
                     'UTC') AS BIGINT)"
                ),
                _ => format!("year(make_timestamp({column}))"),
            })
        })
        .collect()
}

fn dialect_of(peer: PeerKind) -> Dialect {
    match peer {
        PeerKind::Postgres => Dialect::Postgres,
        PeerKind::DuckDb => Dialect::DuckDb,
        PeerKind::Sqlite => Dialect::Sqlite,
    }
}

/// Runs query `index` (0 for Q1) on `session` in a read-only transaction of its own.
pub fn run_query(
    session: &mut dyn Session,
    peer: PeerKind,
    texts: &[String],
    index: usize,
) -> Result<Vec<SqlRow>, LabError> {
    let sql = texts.get(index).ok_or_else(|| {
        LabError::BadOption(format!("ch: there is no query number {}", index + 1))
    })?;
    at_one_snapshot(session, peer, QUERY_NAMES[index], |s| s.query(sql, &[]))
}

impl SqlWorkload for Ch {
    fn tables(&self) -> Vec<TableDef> {
        use SqlType::{BigInt, Double, Text};
        let mut tables = super::tpcc::tables();
        let columns = |names: &[&str], types: &[SqlType]| -> Vec<(String, SqlType)> {
            names
                .iter()
                .map(|n| (*n).to_owned())
                .zip(types.iter().copied())
                .collect()
        };
        for (name, names, types) in [
            (
                region::TABLE,
                &region::COLUMNS[..],
                &[BigInt, Text, Text][..],
            ),
            (
                nation::TABLE,
                &nation::COLUMNS[..],
                &[BigInt, Text, BigInt, Text][..],
            ),
            (
                supplier::TABLE,
                &supplier::COLUMNS[..],
                &[BigInt, Text, Text, BigInt, Text, Double, Text][..],
            ),
        ] {
            tables.push(TableDef {
                name: name.to_owned(),
                columns: columns(names, types),
                primary_key: vec![names[0].to_owned()],
                indexes: Vec::new(),
            });
        }
        tables
    }

    fn supports(&self, peer: PeerKind) -> Result<(), String> {
        match peer {
            PeerKind::Postgres | PeerKind::DuckDb => Ok(()),
            PeerKind::Sqlite => Err(
                "CH-benCHmark's 22 queries run on PostgreSQL and DuckDB; SQLite runs tpcb, \
                 ycsb and tpcc"
                    .into(),
            ),
        }
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
        SqlWorkload::oltp_worker(self.tpcc(), session, peer, worker, workers, seed)
    }

    /// A stream of Q1..Q22, repeated, starting at query `worker mod 22` (as Verso's).
    fn olap_worker<'a>(
        &'a self,
        session: Box<dyn Session>,
        peer: PeerKind,
        worker: usize,
        _seed: u64,
    ) -> Result<Option<Box<dyn OlapWorker + 'a>>, LabError> {
        Ok(Some(Box::new(QueryStreamSql {
            session,
            peer,
            texts: query_texts(dialect_of(peer)),
            next_query: worker % QUERIES.len(),
        })))
    }

    /// TPC-C's conditions, and the fixed sizes of the three extra tables.
    fn check_consistency(&self, session: &mut dyn Session, peer: PeerKind) -> Result<(), LabError> {
        super::tpcc_consistency::check(session, peer)?;
        let counts = at_one_snapshot(session, peer, "ch's table sizes", |s| {
            s.query_one(
                "SELECT (SELECT count(*) FROM supplier), (SELECT count(*) FROM nation), \
                 (SELECT count(*) FROM region)",
                &[],
            )
        })?;
        let expected = [SUPPLIER_COUNT, NATIONS.len() as i64, REGIONS.len() as i64];
        for ((table, want), got) in [supplier::TABLE, nation::TABLE, region::TABLE]
            .iter()
            .zip(expected)
            .zip(&counts)
        {
            if got.as_i64() != Some(want) {
                return Err(LabError::Inconsistent(format!(
                    "{}: ch: {table} has {got:?} rows, expected {want}",
                    peer.name()
                )));
            }
        }
        Ok(())
    }
}

/// One OLAP thread's query stream on a peer.
struct QueryStreamSql {
    session: Box<dyn Session>,
    peer: PeerKind,
    texts: Vec<String>,
    next_query: usize,
}

impl OlapWorker for QueryStreamSql {
    /// Runs the next query. A peer does not say how many tuples its plan read, so
    /// `scanned_tuples` is 0 and reports show queries per second only.
    fn run_one(&mut self) -> Result<QueryOutcome, LabError> {
        let query = self.next_query;
        self.next_query = (query + 1) % QUERIES.len();
        let rows = run_query(&mut *self.session, self.peer, &self.texts, query)?;
        std::hint::black_box(&rows);
        Ok(QueryOutcome {
            query,
            scanned_tuples: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_replaced_as_whole_words() {
        assert_eq!(
            replace_calls("sum(MONEY(a)) + avg(b) + XMONEY(c)", "MONEY", |c| format!(
                "m[{c}]"
            )),
            "sum(m[a]) + avg(b) + XMONEY(c)"
        );
        let texts = query_texts(Dialect::DuckDb);
        assert!(texts
            .iter()
            .all(|t| !t.contains("MONEY(") && !t.contains("YEAR(")));
        assert!(texts.iter().all(|t| !t.contains('{')));
        assert!(texts[6].contains("year(make_timestamp(o_entry_d))"));
    }
}
