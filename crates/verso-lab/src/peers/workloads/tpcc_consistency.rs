//! TPC-C's twelve consistency conditions (clause 3.3.2) in SQL, as Verso's
//! `workloads::tpcc::consistency` states them (condition 11 in the form that holds after
//! Deliveries too; money compared in whole cents: `round(x * 100)`, exact for the sums of
//! whole cents every transaction stores).
//!
//! Each condition is one query that returns the first offending row's key, or nothing;
//! all twelve run in one read-only transaction, so they see one snapshot.

use crate::peers::sql::{Session, SqlValue};
use crate::peers::workloads::at_one_snapshot;
use crate::peers::PeerKind;
use crate::workload::LabError;
use crate::workloads::tpcc::consistency::STATEMENTS;

/// Condition `i + 1`'s query: the key of its first offending row.
const CONDITIONS: [&str; 12] = [
    // 1. W_YTD = sum(D_YTD).
    "SELECT w_id FROM warehouse WHERE round(w_ytd * 100) <> coalesce((SELECT \
     sum(round(d_ytd * 100)) FROM district WHERE d_w_id = w_id), 0) ORDER BY w_id LIMIT 1",
    // 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID), the latter where there are new orders.
    "SELECT d_w_id, d_id FROM district WHERE d_next_o_id - 1 <> coalesce((SELECT max(o_id) \
     FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id), 0) OR d_next_o_id - 1 <> \
     coalesce((SELECT max(no_o_id) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = \
     d_id), d_next_o_id - 1) ORDER BY d_w_id, d_id LIMIT 1",
    // 3. max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW_ORDER) per district.
    "SELECT no_w_id, no_d_id FROM new_order GROUP BY no_w_id, no_d_id HAVING max(no_o_id) - \
     min(no_o_id) + 1 <> count(*) ORDER BY no_w_id, no_d_id LIMIT 1",
    // 4. sum(O_OL_CNT) = count(ORDER_LINE) per district.
    "WITH o AS (SELECT o_w_id AS w, o_d_id AS d, sum(o_ol_cnt) AS n FROM orders GROUP BY \
     o_w_id, o_d_id), l AS (SELECT ol_w_id AS w, ol_d_id AS d, count(*) AS n FROM order_line \
     GROUP BY ol_w_id, ol_d_id) SELECT coalesce(o.w, l.w), coalesce(o.d, l.d) FROM o FULL \
     OUTER JOIN l ON o.w = l.w AND o.d = l.d WHERE coalesce(o.n, 0) <> coalesce(l.n, 0) \
     ORDER BY 1, 2 LIMIT 1",
    // 5. O_CARRIER_ID is null iff the order is in NEW_ORDER.
    "SELECT o_w_id, o_d_id, o_id FROM orders LEFT JOIN new_order ON no_w_id = o_w_id AND \
     no_d_id = o_d_id AND no_o_id = o_id WHERE (o_carrier_id IS NULL) <> (no_o_id IS NOT \
     NULL) ORDER BY o_w_id, o_d_id, o_id LIMIT 1",
    // 6. O_OL_CNT = the order's ORDER_LINE rows.
    "SELECT o_w_id, o_d_id, o_id FROM orders LEFT JOIN (SELECT ol_w_id, ol_d_id, ol_o_id, \
     count(*) AS n FROM order_line GROUP BY ol_w_id, ol_d_id, ol_o_id) l ON ol_w_id = o_w_id \
     AND ol_d_id = o_d_id AND ol_o_id = o_id WHERE o_ol_cnt <> coalesce(l.n, 0) ORDER BY \
     o_w_id, o_d_id, o_id LIMIT 1",
    // 7. OL_DELIVERY_D is null iff its order's O_CARRIER_ID is null.
    "SELECT ol_w_id, ol_d_id, ol_o_id, ol_number FROM order_line JOIN orders ON o_w_id = \
     ol_w_id AND o_d_id = ol_d_id AND o_id = ol_o_id WHERE (ol_delivery_d IS NULL) <> \
     (o_carrier_id IS NULL) ORDER BY ol_w_id, ol_d_id, ol_o_id, ol_number LIMIT 1",
    // 8. W_YTD = sum(H_AMOUNT) per warehouse.
    "SELECT w_id FROM warehouse WHERE round(w_ytd * 100) <> coalesce((SELECT \
     sum(round(h_amount * 100)) FROM history WHERE h_w_id = w_id), 0) ORDER BY w_id LIMIT 1",
    // 9. D_YTD = sum(H_AMOUNT) per district.
    "SELECT d_w_id, d_id FROM district WHERE round(d_ytd * 100) <> coalesce((SELECT \
     sum(round(h_amount * 100)) FROM history WHERE h_w_id = d_w_id AND h_d_id = d_id), 0) \
     ORDER BY d_w_id, d_id LIMIT 1",
    // 10. C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT) per customer.
    "WITH delivered AS (SELECT o_w_id AS w, o_d_id AS d, o_c_id AS c, sum(round(ol_amount * \
     100)) AS amount FROM orders JOIN order_line ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND \
     ol_o_id = o_id WHERE ol_delivery_d IS NOT NULL GROUP BY o_w_id, o_d_id, o_c_id), paid AS \
     (SELECT h_c_w_id AS w, h_c_d_id AS d, h_c_id AS c, sum(round(h_amount * 100)) AS amount \
     FROM history GROUP BY h_c_w_id, h_c_d_id, h_c_id) SELECT c_w_id, c_d_id, c_id FROM \
     customer LEFT JOIN delivered dl ON dl.w = c_w_id AND dl.d = c_d_id AND dl.c = c_id LEFT \
     JOIN paid p ON p.w = c_w_id AND p.d = c_d_id AND p.c = c_id WHERE round(c_balance * 100) \
     <> coalesce(dl.amount, 0) - coalesce(p.amount, 0) ORDER BY c_w_id, c_d_id, c_id LIMIT 1",
    // 11. count(ORDER) - count(NEW_ORDER) = min(NO_O_ID) - 1 (D_NEXT_O_ID - 1 if none).
    "SELECT d_w_id, d_id FROM district WHERE (SELECT count(*) FROM orders WHERE o_w_id = \
     d_w_id AND o_d_id = d_id) - (SELECT count(*) FROM new_order WHERE no_w_id = d_w_id AND \
     no_d_id = d_id) <> coalesce((SELECT min(no_o_id) FROM new_order WHERE no_w_id = d_w_id \
     AND no_d_id = d_id), d_next_o_id) - 1 ORDER BY d_w_id, d_id LIMIT 1",
    // 12. C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT) per customer.
    "WITH delivered AS (SELECT o_w_id AS w, o_d_id AS d, o_c_id AS c, sum(round(ol_amount * \
     100)) AS amount FROM orders JOIN order_line ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND \
     ol_o_id = o_id WHERE ol_delivery_d IS NOT NULL GROUP BY o_w_id, o_d_id, o_c_id) SELECT \
     c_w_id, c_d_id, c_id FROM customer LEFT JOIN delivered dl ON dl.w = c_w_id AND dl.d = \
     c_d_id AND dl.c = c_id WHERE round(c_balance * 100) + round(c_ytd_payment * 100) <> \
     coalesce(dl.amount, 0) ORDER BY c_w_id, c_d_id, c_id LIMIT 1",
];

/// One failed condition on a peer: its number and the first offending row's key.
#[derive(Clone, Debug, PartialEq)]
pub struct SqlViolation {
    /// The condition's number, 1..=12.
    pub condition: u8,
    /// The first offending row's key.
    pub key: Vec<SqlValue>,
}

/// Every failed condition, at one snapshot, lowest number first.
pub fn violations(
    session: &mut dyn Session,
    peer: PeerKind,
) -> Result<Vec<SqlViolation>, LabError> {
    at_one_snapshot(session, peer, "TPC-C's consistency conditions", |s| {
        let mut found = Vec::new();
        for (i, sql) in CONDITIONS.iter().enumerate() {
            if let Some(key) = s.query(sql, &[])?.into_iter().next() {
                found.push(SqlViolation {
                    condition: i as u8 + 1,
                    key,
                });
            }
        }
        Ok(found)
    })
}

/// Checks the twelve conditions; fails with [`LabError::Inconsistent`] naming the first
/// failed one and its first offending row.
pub fn check(session: &mut dyn Session, peer: PeerKind) -> Result<(), LabError> {
    match violations(session, peer)?.into_iter().next() {
        None => Ok(()),
        Some(v) => {
            let key: Vec<String> = v
                .key
                .iter()
                .map(|value| match value.as_i64() {
                    Some(i) => i.to_string(),
                    None => format!("{value:?}"),
                })
                .collect();
            Err(LabError::Inconsistent(format!(
                "{}: TPC-C consistency condition {} ({}): first offending row ({})",
                peer.name(),
                v.condition,
                STATEMENTS[usize::from(v.condition) - 1],
                key.join(", ")
            )))
        }
    }
}
