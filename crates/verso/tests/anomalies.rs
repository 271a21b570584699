//! The isolation anomaly suite for `Isolation::Snapshot`, for every configuration.
//!
//! The schedules are Hermitage's (Kleppmann's test suite for isolation levels), adapted to
//! this API: a table `test(id U64 primary key, value I64)` holding (1, 10) and (2, 20).
//! Where Hermitage uses a predicate (`where value % 3 = 0`) we scan the whole table and
//! filter in Rust; a predicate-based write updates or deletes each matching key.
//!
//! Verso never blocks: where Hermitage's second writer waits for a lock, first-updater-wins
//! fails it at once with `Error::WriteConflict`, which rolls it back. Several transactions
//! are open on one thread, so every schedule is deterministic.
//!
//! Each test asserts the invariant snapshot isolation promises (which values may be read,
//! which write must fail), not more.

mod common;

use common::{all_configurations, open};
use verso::{ColumnType, Database, Error, Isolation, Result, Schema, TableId, Transaction, Value};

/// Column of `value` in the `test` table.
const VALUE: usize = 1;

/// A database with the `test` table holding (1, 10) and (2, 20).
struct Fixture {
    db: Database,
    table: TableId,
    design: String,
}

impl Fixture {
    fn new(db: Database) -> Fixture {
        let design = db.design();
        let table = db
            .create_table(
                "test",
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("value", ColumnType::I64)
                    .primary_key(&["id"]),
            )
            .unwrap_or_else(|e| panic!("{design}: create test: {e}"));
        let fixture = Fixture { db, table, design };
        let mut setup = fixture.begin();
        for (id, value) in [(1, 10), (2, 20)] {
            setup
                .insert(table, &[Value::U64(id), Value::I64(value)])
                .unwrap_or_else(|e| panic!("{}: insert ({id}, {value}): {e}", fixture.design));
        }
        fixture.commit(setup, "setup");
        fixture
    }

    fn begin(&self) -> Transaction<'_> {
        self.db.begin(Isolation::Snapshot)
    }

    /// The value of row `id` as `txn` sees it (`None`: no such row).
    fn read(&self, txn: &Transaction<'_>, id: u64) -> Option<i64> {
        txn.get(self.table, &[Value::U64(id)])
            .unwrap_or_else(|e| panic!("{}: read {id}: {e}", self.design))
            .map(|row| value_of(&self.design, &row))
    }

    /// Every row `txn` sees, as (id, value), in key order.
    fn scan(&self, txn: &Transaction<'_>) -> Vec<(u64, i64)> {
        txn.scan(self.table, ..)
            .unwrap_or_else(|e| panic!("{}: scan: {e}", self.design))
            .iter()
            .map(|row| {
                let id = row[0]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{}: bad id in {row:?}", self.design));
                (id, value_of(&self.design, row))
            })
            .collect()
    }

    /// The ids of the rows `txn` sees whose value satisfies `predicate`.
    fn scan_where(&self, txn: &Transaction<'_>, predicate: impl Fn(i64) -> bool) -> Vec<u64> {
        self.scan(txn)
            .into_iter()
            .filter(|&(_, value)| predicate(value))
            .map(|(id, _)| id)
            .collect()
    }

    /// Sets row `id` to `value`; the raw result, for schedules where the write may fail.
    fn try_set(&self, txn: &mut Transaction<'_>, id: u64, value: i64) -> Result<bool> {
        txn.update(self.table, &[Value::U64(id)], &[(VALUE, Value::I64(value))])
    }

    /// Sets row `id` to `value`, which must succeed on an existing row.
    fn set(&self, txn: &mut Transaction<'_>, id: u64, value: i64) {
        match self.try_set(txn, id, value) {
            Ok(true) => {}
            Ok(false) => panic!("{}: set {id} = {value}: no such row", self.design),
            Err(e) => panic!("{}: set {id} = {value}: {e}", self.design),
        }
    }

    fn commit(&self, txn: Transaction<'_>, who: &str) {
        txn.commit()
            .unwrap_or_else(|e| panic!("{}: commit of {who}: {e}", self.design));
    }

    /// Asserts that `result` is a write conflict and that it rolled `txn` back.
    fn assert_conflict<T: std::fmt::Debug>(
        &self,
        result: Result<T>,
        txn: Transaction<'_>,
        what: &str,
    ) {
        match result {
            Err(error @ Error::WriteConflict { .. }) => {
                assert!(error.is_retryable(), "{}: {what}", self.design);
            }
            other => panic!(
                "{}: {what}: expected a write conflict, got {other:?}",
                self.design
            ),
        }
        assert_eq!(
            txn.get(self.table, &[Value::U64(1)]),
            Err(Error::TransactionAborted),
            "{}: {what}: the conflict must roll the transaction back",
            self.design
        );
        assert_eq!(
            txn.commit(),
            Err(Error::TransactionAborted),
            "{}: {what}: commit after a conflict",
            self.design
        );
    }

    /// What a new snapshot sees.
    fn committed(&self) -> Vec<(u64, i64)> {
        let txn = self.begin();
        let rows = self.scan(&txn);
        self.commit(txn, "final read");
        rows
    }
}

fn value_of(design: &str, row: &[Value]) -> i64 {
    row[VALUE]
        .as_i64()
        .unwrap_or_else(|| panic!("{design}: bad value in {row:?}"))
}

/// Runs `scenario` on a fresh fixture for every configuration.
fn for_each_configuration(scenario: impl Fn(&Fixture)) {
    for options in all_configurations() {
        scenario(&Fixture::new(open(&options)));
    }
}

// ----- G0: write cycles (dirty writes) ----------------------------------------------------

#[test]
fn g0_write_cycles_same_order() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        f.set(&mut t1, 1, 11);
        let dirty = f.try_set(&mut t2, 1, 12);
        f.assert_conflict(dirty, t2, "T2 overwrites T1's uncommitted row 1");
        f.set(&mut t1, 2, 21);
        f.commit(t1, "T1");
        assert_eq!(f.committed(), [(1, 11), (2, 21)], "{}", f.design);
    });
}

#[test]
fn g0_write_cycles_crossed_order() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        f.set(&mut t1, 1, 11);
        f.set(&mut t2, 2, 22);
        // Each now wants the other's row: whoever writes second loses.
        let dirty = f.try_set(&mut t1, 2, 21);
        f.assert_conflict(dirty, t1, "T1 overwrites T2's uncommitted row 2");
        // T1's write to row 1 was rolled back, so T2 may write it now.
        f.set(&mut t2, 1, 12);
        f.commit(t2, "T2");
        assert_eq!(f.committed(), [(1, 12), (2, 22)], "{}", f.design);
    });
}

// ----- G1a: aborted reads -----------------------------------------------------------------

#[test]
fn g1a_aborted_reads() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let t2 = f.begin();
        f.set(&mut t1, 1, 101);
        assert_eq!(f.scan(&t2), [(1, 10), (2, 20)], "{}", f.design);
        t1.abort();
        assert_eq!(f.read(&t2, 1), Some(10), "{}", f.design);
        assert_eq!(f.scan(&t2), [(1, 10), (2, 20)], "{}", f.design);
        f.commit(t2, "T2");
        assert_eq!(f.committed(), [(1, 10), (2, 20)], "{}", f.design);
    });
}

#[test]
fn g1a_aborted_reads_by_drop() {
    for_each_configuration(|f| {
        let t2 = f.begin();
        {
            let mut t1 = f.begin();
            f.set(&mut t1, 1, 101);
            f.set(&mut t1, 2, 201);
            // Dropped without commit: aborted.
        }
        let t3 = f.begin();
        assert_eq!(f.scan(&t2), [(1, 10), (2, 20)], "{}", f.design);
        assert_eq!(f.scan(&t3), [(1, 10), (2, 20)], "{}", f.design);
        f.commit(t2, "T2");
        f.commit(t3, "T3");
    });
}

// ----- G1b: intermediate reads ------------------------------------------------------------

#[test]
fn g1b_intermediate_reads() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let t2 = f.begin();
        f.set(&mut t1, 1, 101);
        assert_eq!(f.scan(&t2), [(1, 10), (2, 20)], "{}", f.design);
        f.set(&mut t1, 1, 11);
        assert_eq!(f.read(&t2, 1), Some(10), "{}", f.design);
        f.commit(t1, "T1");
        // T2's snapshot predates T1's commit; a later one sees the final value only.
        assert_eq!(f.scan(&t2), [(1, 10), (2, 20)], "{}", f.design);
        let t3 = f.begin();
        assert_eq!(f.read(&t3, 1), Some(11), "{}", f.design);
        f.commit(t2, "T2");
        f.commit(t3, "T3");
    });
}

// ----- G1c: circular information flow -----------------------------------------------------

#[test]
fn g1c_circular_information_flow() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        f.set(&mut t1, 1, 11);
        f.set(&mut t2, 2, 22);
        assert_eq!(f.read(&t1, 2), Some(20), "{}", f.design);
        assert_eq!(f.read(&t2, 1), Some(10), "{}", f.design);
        // Each still sees its own write.
        assert_eq!(f.read(&t1, 1), Some(11), "{}", f.design);
        assert_eq!(f.read(&t2, 2), Some(22), "{}", f.design);
        f.commit(t1, "T1");
        f.commit(t2, "T2");
        assert_eq!(f.committed(), [(1, 11), (2, 22)], "{}", f.design);
    });
}

// ----- OTV: observed transaction vanishes -------------------------------------------------

#[test]
fn otv_observed_transaction_vanishes() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        f.set(&mut t1, 1, 11);
        f.set(&mut t1, 2, 19);
        // Hermitage's T2 blocks here; first-updater-wins fails it instead.
        let dirty = f.try_set(&mut t2, 1, 12);
        f.assert_conflict(dirty, t2, "T2 writes T1's uncommitted row 1");
        f.commit(t1, "T1");

        // T2 retried after T1's commit; T3 begins while it runs.
        let mut t2 = f.begin();
        f.set(&mut t2, 1, 12);
        let t3 = f.begin();
        assert_eq!(f.read(&t3, 1), Some(11), "{}", f.design);
        f.set(&mut t2, 2, 18);
        assert_eq!(f.read(&t3, 2), Some(19), "{}", f.design);
        f.commit(t2, "T2 (retried)");
        // T3 must not see T1's effects vanish, nor a mix of T1 and T2.
        assert_eq!(f.read(&t3, 2), Some(19), "{}", f.design);
        assert_eq!(f.read(&t3, 1), Some(11), "{}", f.design);
        assert_eq!(f.scan(&t3), [(1, 11), (2, 19)], "{}", f.design);
        f.commit(t3, "T3");
        assert_eq!(f.committed(), [(1, 12), (2, 18)], "{}", f.design);
    });
}

// ----- PMP: predicate-many-preceders ------------------------------------------------------

#[test]
fn pmp_predicate_many_preceders_read() {
    for_each_configuration(|f| {
        let t1 = f.begin();
        assert!(f.scan_where(&t1, |v| v == 30).is_empty(), "{}", f.design);
        let mut t2 = f.begin();
        t2.insert(f.table, &[Value::U64(3), Value::I64(30)])
            .unwrap_or_else(|e| panic!("{}: insert (3, 30): {e}", f.design));
        f.commit(t2, "T2");
        assert!(
            f.scan_where(&t1, |v| v == 30).is_empty(),
            "{}: phantom",
            f.design
        );
        assert_eq!(f.read(&t1, 3), None, "{}", f.design);
        f.commit(t1, "T1");
        assert_eq!(f.committed(), [(1, 10), (2, 20), (3, 30)], "{}", f.design);
    });
}

/// T1: `update test set value = value + 10`; T2: `delete from test where value = 20`.
/// `t1_commits_first`: T1 commits before T2 deletes (else T1 is still running then).
fn pmp_write(f: &Fixture, t1_commits_first: bool) {
    let mut t1 = f.begin();
    let mut t2 = f.begin();
    for (id, value) in f.scan(&t1) {
        f.set(&mut t1, id, value + 10);
    }
    let t1 = if t1_commits_first {
        f.commit(t1, "T1");
        None
    } else {
        Some(t1)
    };
    // T2's snapshot still has row 2 at 20, but T1 has written row 2: T2 must conflict
    // rather than delete a row T1 updated (which would lose T1's update silently).
    let matching = f.scan_where(&t2, |v| v == 20);
    assert_eq!(matching, [2], "{}: T2's snapshot", f.design);
    let delete = t2.delete(f.table, &[Value::U64(2)]);
    f.assert_conflict(delete, t2, "T2 deletes the row T1 updated");
    if let Some(t1) = t1 {
        f.commit(t1, "T1");
    }
    // Only T1 committed: the state is T1's alone.
    assert_eq!(f.committed(), [(1, 20), (2, 30)], "{}", f.design);
}

#[test]
fn pmp_predicate_many_preceders_write_concurrent() {
    for_each_configuration(|f| pmp_write(f, false));
}

#[test]
fn pmp_predicate_many_preceders_write_after_commit() {
    for_each_configuration(|f| pmp_write(f, true));
}

// ----- P4: lost update --------------------------------------------------------------------

#[test]
fn p4_lost_update() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        let v1 = f.read(&t1, 1).unwrap();
        let v2 = f.read(&t2, 1).unwrap();
        assert_eq!((v1, v2), (10, 10), "{}", f.design);
        f.set(&mut t1, 1, v1 + 1);
        let lost = f.try_set(&mut t2, 1, v2 + 1);
        f.assert_conflict(lost, t2, "T2 overwrites T1's uncommitted increment");
        f.commit(t1, "T1");
        assert_eq!(f.committed(), [(1, 11), (2, 20)], "{}", f.design);
    });
}

#[test]
fn p4_lost_update_after_commit() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        let v1 = f.read(&t1, 1).unwrap();
        let v2 = f.read(&t2, 1).unwrap();
        f.set(&mut t1, 1, v1 + 1);
        f.commit(t1, "T1");
        // T1 committed after T2 began: T2's increment would overwrite it.
        let lost = f.try_set(&mut t2, 1, v2 + 1);
        f.assert_conflict(lost, t2, "T2 overwrites T1's committed increment");
        assert_eq!(f.committed(), [(1, 11), (2, 20)], "{}", f.design);
    });
}

/// Four threads increment one counter, retrying on conflict: no increment is lost.
#[test]
fn p4_lost_update_threads() {
    const THREADS: u64 = 4;
    const INCREMENTS: u64 = 200;
    for_each_configuration(|f| {
        let commits = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..THREADS {
                scope.spawn(|| {
                    for _ in 0..INCREMENTS {
                        loop {
                            let mut txn = f.begin();
                            let value = f.read(&txn, 1).unwrap();
                            match f.try_set(&mut txn, 1, value + 1) {
                                Ok(true) => {
                                    f.commit(txn, "an increment");
                                    commits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                    break;
                                }
                                Err(Error::WriteConflict { .. }) => continue,
                                other => panic!("{}: increment: {other:?}", f.design),
                            }
                        }
                    }
                });
            }
        });
        let commits = commits.into_inner();
        assert_eq!(commits, THREADS * INCREMENTS, "{}", f.design);
        assert_eq!(
            f.committed(),
            [(1, 10 + commits as i64), (2, 20)],
            "{}",
            f.design
        );
    });
}

// ----- G-single: read skew ----------------------------------------------------------------

#[test]
fn g_single_read_skew() {
    for_each_configuration(|f| {
        let t1 = f.begin();
        let mut t2 = f.begin();
        let first = f.read(&t1, 1).unwrap();
        assert_eq!(first, 10, "{}", f.design);
        assert_eq!(f.scan(&t2), [(1, 10), (2, 20)], "{}", f.design);
        f.set(&mut t2, 1, 12);
        f.set(&mut t2, 2, 18);
        f.commit(t2, "T2");
        let second = f.read(&t1, 2).unwrap();
        assert_eq!(second, 20, "{}: T1 must read its snapshot", f.design);
        assert_eq!(first + second, 30, "{}", f.design);
        f.commit(t1, "T1");
    });
}

#[test]
fn g_single_read_skew_predicate() {
    for_each_configuration(|f| {
        let t1 = f.begin();
        let mut t2 = f.begin();
        assert_eq!(f.scan_where(&t1, |v| v % 5 == 0), [1, 2], "{}", f.design);
        f.set(&mut t2, 1, 12);
        f.set(&mut t2, 2, 18);
        f.commit(t2, "T2");
        // 12 and 18 match `value % 3 = 0`; T1's snapshot (10, 20) has no match.
        assert!(f.scan_where(&t1, |v| v % 3 == 0).is_empty(), "{}", f.design);
        f.commit(t1, "T1");
    });
}

#[test]
fn g_single_read_skew_write_after_commit() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        assert_eq!(f.read(&t1, 1), Some(10), "{}", f.design);
        f.set(&mut t2, 1, 12);
        f.set(&mut t2, 2, 18);
        f.commit(t2, "T2");
        // `delete from test where value = 20`: T1's snapshot still has row 2 at 20, but
        // it was rewritten after T1 began.
        assert_eq!(f.scan_where(&t1, |v| v == 20), [2], "{}", f.design);
        let delete = t1.delete(f.table, &[Value::U64(2)]);
        f.assert_conflict(delete, t1, "T1 deletes the row T2 committed");
        assert_eq!(f.committed(), [(1, 12), (2, 18)], "{}", f.design);
    });
}

#[test]
fn g_single_read_skew_write_concurrent() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        assert_eq!(f.read(&t1, 1), Some(10), "{}", f.design);
        f.set(&mut t2, 1, 12);
        // T1 deletes row 2 (value 20) before T2 touches it; T2 then loses on row 2.
        assert_eq!(f.scan_where(&t1, |v| v == 20), [2], "{}", f.design);
        assert_eq!(
            t1.delete(f.table, &[Value::U64(2)]),
            Ok(true),
            "{}",
            f.design
        );
        let late = f.try_set(&mut t2, 2, 18);
        f.assert_conflict(late, t2, "T2 writes the row T1 deleted");
        assert_eq!(f.read(&t1, 1), Some(10), "{}", f.design);
        f.commit(t1, "T1");
        assert_eq!(f.committed(), [(1, 10)], "{}", f.design);
    });
}

// ----- G2-item: write skew ----------------------------------------------------------------

/// Write skew is ALLOWED under snapshot isolation: the two transactions write different
/// rows, so first-updater-wins sees no conflict and both commit. This documents the known
/// SI behaviour. `Isolation::Serializable` must prevent it (one of the two must fail) once
/// its validation lands; that test belongs with the serializable suite.
#[test]
fn g2_item_write_skew_allowed_under_snapshot() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        assert_eq!(f.scan(&t1), [(1, 10), (2, 20)], "{}", f.design);
        assert_eq!(f.scan(&t2), [(1, 10), (2, 20)], "{}", f.design);
        f.set(&mut t1, 1, 11);
        f.set(&mut t2, 2, 21);
        f.commit(t1, "T1");
        f.commit(t2, "T2");
        assert_eq!(f.committed(), [(1, 11), (2, 21)], "{}", f.design);
    });
}
