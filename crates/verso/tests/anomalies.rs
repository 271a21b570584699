//! The isolation anomaly suite, for both isolation levels and every configuration.
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
//! Each test asserts the invariant the isolation level promises (which values may be read,
//! which write must fail, that some transaction of a cycle fails), not which transaction
//! fails where either may. Every scenario runs under `Snapshot` and `Serializable`; those
//! where the two differ (write skew and its predicate and read-only forms) say so. Under
//! the protocols other than the default every transaction is serializable
//! ([`Fixture::serializable`]).
//!
//! MVTO and MV2PL (no-wait) refuse reads and writes *during* a schedule (a row lock or a
//! read timestamp): such a refusal must be a retryable [`Error::LockConflict`] that rolled
//! its transaction back, and it ends the schedule there ([`Fixture::refused_early`]); the
//! invariants are about what committed transactions saw, and a transaction rolled back
//! before the end of a schedule saw nothing that counts. Where a protocol must refuse at a
//! given step, the scenario asserts that step (`locking_protocol_refusals`). MV2PL's locked
//! reads see the newest committed version, not the snapshot: the scenarios that read after
//! a concurrent commit say what MV2PL must do instead.

mod common;

use common::ScanRows;
use common::{all_configurations, open};
use verso::{
    ColumnType, ConcurrencyControl, Database, Error, Isolation, Result, Schema, TableId,
    Transaction, Value,
};

/// Column of `value` in the `test` table.
const VALUE: usize = 1;

/// The unwind payload that ends a schedule at a refusal of MVTO or MV2PL.
struct RefusedEarly;

/// A database with the `test` table holding (1, 10) and (2, 20).
struct Fixture {
    db: Database,
    table: TableId,
    isolation: Isolation,
    design: String,
}

impl Fixture {
    fn new(db: Database, isolation: Isolation) -> Fixture {
        let design = format!("{} at {isolation:?}", db.design());
        let table = db
            .create_table(
                "test",
                Schema::new()
                    .column("id", ColumnType::U64)
                    .column("value", ColumnType::I64)
                    .primary_key(&["id"])
                    .index("by_value", &["value"]),
            )
            .unwrap_or_else(|e| panic!("{design}: create test: {e}"));
        let fixture = Fixture {
            db,
            table,
            isolation,
            design,
        };
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
        self.db.begin(self.isolation)
    }

    /// Whether the protocol refuses reads and writes during a schedule (MVTO, MV2PL).
    /// Whether the serialization order is the order of the start timestamps (MVTO).
    fn orders_by_start(&self) -> bool {
        self.db.options().concurrency_control == ConcurrencyControl::Mvto
    }

    /// Whether serializable transactions are serializable in commit order (every protocol
    /// but MVTO, which orders by start, and SSN, which allows any acyclic order).
    fn serializes_in_commit_order(&self) -> bool {
        !matches!(
            self.db.options().concurrency_control,
            ConcurrencyControl::Mvto | ConcurrencyControl::Ssn
        )
    }

    fn refuses_early(&self) -> bool {
        matches!(
            self.db.options().concurrency_control,
            ConcurrencyControl::Mvto | ConcurrencyControl::Mv2pl
        )
    }

    /// Whether locked reads see the newest committed versions (MV2PL).
    fn reads_newest(&self) -> bool {
        self.db.options().concurrency_control == ConcurrencyControl::Mv2pl
    }

    /// Under MVTO or MV2PL, a lock conflict ends the schedule: checks that it rolled `txn`
    /// back and unwinds to [`for_each_configuration`]. Returns otherwise.
    fn refused_early(&self, error: &Error, txn: &Transaction<'_>, what: &str) {
        if self.refuses_early() && matches!(error, Error::LockConflict { .. }) {
            assert!(error.is_retryable(), "{}: {what}", self.design);
            assert_eq!(
                txn.get(self.table, &[Value::U64(1)]),
                Err(Error::TransactionAborted),
                "{}: {what}: a refusal rolls the transaction back",
                self.design
            );
            std::panic::resume_unwind(Box::new(RefusedEarly));
        }
    }

    /// Whether the transactions run serializably: asked for, or the protocol runs every
    /// transaction so.
    fn serializable(&self) -> bool {
        self.isolation == Isolation::Serializable
            || self.db.options().concurrency_control.always_serializable()
    }

    /// The ids of the rows `txn` sees whose value lies in `range`, through the secondary
    /// index on `value` (a predicate read the validation must cover).
    fn scan_values(&self, txn: &Transaction<'_>, range: std::ops::RangeInclusive<i64>) -> Vec<u64> {
        let (low, high) = range.into_inner();
        txn.scan_index(
            self.table,
            "by_value",
            vec![Value::I64(low)]..=vec![Value::I64(high)],
        )
        .rows()
        .unwrap_or_else(|e| {
            self.refused_early(&e, txn, "scan by value");
            panic!("{}: scan by value: {e}", self.design)
        })
        .iter()
        .map(|row| row[0].as_u64().expect("id"))
        .collect()
    }

    fn insert(&self, txn: &mut Transaction<'_>, id: u64, value: i64) {
        txn.insert(self.table, &[Value::U64(id), Value::I64(value)])
            .unwrap_or_else(|e| {
                self.refused_early(&e, txn, "insert");
                panic!("{}: insert ({id}, {value}): {e}", self.design)
            });
    }

    /// Commits each of `txns` in order; returns which committed. A failure must be a
    /// serialization failure (retryable).
    fn commit_all(&self, txns: Vec<(Transaction<'_>, &str)>) -> Vec<bool> {
        txns.into_iter()
            .map(|(txn, who)| match txn.commit() {
                Ok(()) => true,
                Err(error @ Error::SerializationFailure { .. }) => {
                    assert!(error.is_retryable(), "{}: {who}", self.design);
                    false
                }
                Err(error) => panic!("{}: commit of {who}: {error}", self.design),
            })
            .collect()
    }

    /// The value of row `id` as `txn` sees it (`None`: no such row).
    fn read(&self, txn: &Transaction<'_>, id: u64) -> Option<i64> {
        txn.get(self.table, &[Value::U64(id)])
            .unwrap_or_else(|e| {
                self.refused_early(&e, txn, "read");
                panic!("{}: read {id}: {e}", self.design)
            })
            .map(|row| value_of(&self.design, &row))
    }

    /// Every row `txn` sees, as (id, value), in key order.
    fn scan(&self, txn: &Transaction<'_>) -> Vec<(u64, i64)> {
        txn.scan(self.table, ..)
            .rows()
            .unwrap_or_else(|e| {
                self.refused_early(&e, txn, "scan");
                panic!("{}: scan: {e}", self.design)
            })
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
            Err(e) => {
                self.refused_early(&e, txn, "set");
                panic!("{}: set {id} = {value}: {e}", self.design)
            }
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
            // MVTO's and MV2PL's locks refuse what first-updater-wins would.
            Err(error @ Error::LockConflict { .. }) if self.refuses_early() => {
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

/// Runs `scenario` on a fresh fixture for every configuration at both isolation levels.
fn for_each_configuration(scenario: impl Fn(&Fixture)) {
    for options in all_configurations() {
        for isolation in [Isolation::Snapshot, Isolation::Serializable] {
            let fixture = Fixture::new(open(&options), isolation);
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(&fixture)));
            if let Err(payload) = run {
                if !payload.is::<RefusedEarly>() {
                    std::panic::resume_unwind(payload);
                }
            }
        }
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
        let committed = f.commit_all(vec![(t1, "T1"), (t2, "T2")]);
        if f.serializable() {
            // Each read what the other overwrote: also write skew, so one must fail.
            assert!(
                !committed.iter().all(|&c| c),
                "{}: both committed",
                f.design
            );
        } else {
            assert_eq!(committed, [true, true], "{}", f.design);
        }
        let expected: Vec<(u64, i64)> = [(1, 11, 10, committed[0]), (2, 22, 20, committed[1])]
            .into_iter()
            .map(|(id, new, old, c)| (id, if c { new } else { old }))
            .collect();
        assert_eq!(f.committed(), expected, "{}", f.design);
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
        if f.reads_newest() {
            // MV2PL reads the newest rows: T1 sees the phantom now, so the scan that
            // missed it must fail T1's validation.
            assert_eq!(f.scan_where(&t1, |v| v == 30), [3], "{}", f.design);
            assert_eq!(f.commit_all(vec![(t1, "T1")]), [false], "{}", f.design);
            assert_eq!(f.committed(), [(1, 10), (2, 20), (3, 30)], "{}", f.design);
            return;
        }
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
    if t1_commits_first && (f.orders_by_start() || f.reads_newest()) {
        // MVTO: T2 is younger than T1, whose commit it sees; MV2PL reads the newest rows.
        // Either way T2 comes after T1 and deletes what has 20 now.
        assert_eq!(matching, [1], "{}: T2 after T1", f.design);
        assert_eq!(
            t2.delete(f.table, &[Value::U64(1)]),
            Ok(true),
            "{}",
            f.design
        );
        f.commit(t2, "T2");
        assert_eq!(f.committed(), [(2, 30)], "{}", f.design);
        return;
    }
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
                            let value = match txn.get(f.table, &[Value::U64(1)]) {
                                Ok(Some(row)) => value_of(&f.design, &row),
                                // MVTO, MV2PL: a concurrent writer's lock.
                                Err(e) if e.is_retryable() => continue,
                                other => panic!("{}: read: {other:?}", f.design),
                            };
                            match f.try_set(&mut txn, 1, value + 1) {
                                Ok(true) => match txn.commit() {
                                    Ok(()) => {
                                        commits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                        break;
                                    }
                                    Err(e) if e.is_retryable() => continue,
                                    Err(e) => panic!("{}: commit: {e}", f.design),
                                },
                                Err(e) if e.is_retryable() => continue,
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

/// Two transactions each read both rows and write a different one. Snapshot isolation lets
/// both commit (the known write skew); serializable must fail one of them.
#[test]
fn g2_item_write_skew() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        assert_eq!(f.scan(&t1), [(1, 10), (2, 20)], "{}", f.design);
        assert_eq!(f.scan(&t2), [(1, 10), (2, 20)], "{}", f.design);
        f.set(&mut t1, 1, 11);
        f.set(&mut t2, 2, 21);
        let committed = f.commit_all(vec![(t1, "T1"), (t2, "T2")]);
        if f.serializable() {
            assert_eq!(committed, [true, false], "{}: write skew", f.design);
            assert_eq!(f.committed(), [(1, 11), (2, 20)], "{}", f.design);
        } else {
            assert_eq!(committed, [true, true], "{}", f.design);
            assert_eq!(f.committed(), [(1, 11), (2, 21)], "{}", f.design);
        }
    });
}

/// Write skew through point reads, the transactions committing in the opposite order of
/// their writes: whichever commits second read what the first wrote.
#[test]
fn g2_item_write_skew_point_reads() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        // Invariant the application keeps: value(1) + value(2) >= 0, each withdrawing 25.
        let sum1 = f.read(&t1, 1).unwrap() + f.read(&t1, 2).unwrap();
        let sum2 = f.read(&t2, 1).unwrap() + f.read(&t2, 2).unwrap();
        assert_eq!((sum1, sum2), (30, 30), "{}", f.design);
        f.set(&mut t1, 1, 10 - 25);
        f.set(&mut t2, 2, 20 - 25);
        let committed = f.commit_all(vec![(t2, "T2"), (t1, "T1")]);
        let sum: i64 = f.committed().iter().map(|&(_, v)| v).sum();
        if f.serializable() {
            assert_eq!(committed.iter().filter(|&&c| c).count(), 1, "{}", f.design);
            assert!(sum >= 0, "{}: invariant broken: {sum}", f.design);
        } else {
            assert_eq!(committed, [true, true], "{}", f.design);
            assert_eq!(sum, -20, "{}: SI's write skew", f.design);
        }
    });
}

// ----- G2: anti-dependency cycles over predicates (phantoms) -------------------------------

/// Each transaction checks that no row has a value divisible by 3, then inserts one: each
/// would have seen the other's row. Serializable must fail one.
#[test]
fn g2_predicate_write_skew_with_inserts() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        assert!(f.scan_where(&t1, |v| v % 3 == 0).is_empty(), "{}", f.design);
        assert!(f.scan_where(&t2, |v| v % 3 == 0).is_empty(), "{}", f.design);
        f.insert(&mut t1, 3, 30);
        f.insert(&mut t2, 4, 42);
        let committed = f.commit_all(vec![(t1, "T1"), (t2, "T2")]);
        let multiples = f.committed().iter().filter(|&&(_, v)| v % 3 == 0).count();
        if f.serializable() {
            // Under MVTO the older one fails (its insert is in the younger one's scanned
            // range); elsewhere the second to commit.
            let expected = if f.orders_by_start() {
                [false, true]
            } else {
                [true, false]
            };
            assert_eq!(committed, expected, "{}", f.design);
            assert_eq!(multiples, 1, "{}", f.design);
        } else {
            assert_eq!(committed, [true, true], "{}", f.design);
            assert_eq!(multiples, 2, "{}", f.design);
        }
    });
}

/// Predicate reads through a secondary index: T1 finds no row with value in 25..=100 and
/// writes row 2; T2 moves row 1 into that range (an index entry appearing) and commits
/// first. T1's predicate would now see row 1.
#[test]
fn g2_predicate_row_moves_into_a_scanned_index_range() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        assert!(f.scan_values(&t1, 25..=100).is_empty(), "{}", f.design);
        assert_eq!(f.scan_values(&t2, 0..=100), [1, 2], "{}", f.design);
        f.set(&mut t2, 1, 30);
        f.set(&mut t1, 2, 0);
        let committed = f.commit_all(vec![(t2, "T2"), (t1, "T1")]);
        if f.serializable() {
            assert_eq!(committed, [true, false], "{}", f.design);
            assert_eq!(f.committed(), [(1, 30), (2, 20)], "{}", f.design);
        } else {
            assert_eq!(committed, [true, true], "{}", f.design);
        }
    });
}

/// T1 sees row 2 in the index range 15..=100 and writes row 1; T2 moves row 2 out of the
/// range (an index entry disappearing, caught by its before-image) and commits first.
#[test]
fn g2_predicate_row_moves_out_of_a_scanned_index_range() {
    for_each_configuration(|f| {
        let mut t1 = f.begin();
        let mut t2 = f.begin();
        assert_eq!(f.scan_values(&t1, 15..=100), [2], "{}", f.design);
        assert_eq!(f.read(&t2, 1), Some(10), "{}", f.design);
        f.set(&mut t2, 2, 5);
        f.set(&mut t1, 1, 0);
        let committed = f.commit_all(vec![(t2, "T2"), (t1, "T1")]);
        if f.serializable() {
            assert_eq!(committed, [true, false], "{}", f.design);
        } else {
            assert_eq!(committed, [true, true], "{}", f.design);
        }
    });
}

/// A scan stopped after its first row read only that row: a later insert beyond it is
/// not a conflict (precision), one before it is. The same for the visitor that stops and
/// for the iterator the program takes one row from (its first batch fetched more, which
/// the program never saw).
#[test]
fn g2_predicate_scan_stopped_early_covers_only_what_it_read() {
    for_each_configuration(|f| {
        for (inserted_id, must_fail, iterator) in [
            (5, false, false),
            (0, true, false),
            (5, false, true),
            (0, true, true),
        ] {
            let mut t1 = f.begin();
            let mut t2 = f.begin();
            let mut first = None;
            if iterator {
                let mut rows = t1
                    .scan(f.table, ..)
                    .unwrap_or_else(|e| panic!("{}: scan: {e}", f.design));
                first = rows.next().and_then(|row| row.ok()?[0].as_u64());
            } else {
                t1.scan_view(f.table, .., |row| {
                    first = row.get(0).as_u64();
                    false
                })
                .unwrap_or_else(|e| panic!("{}: scan: {e}", f.design));
            }
            assert_eq!(first, Some(1), "{}", f.design);
            f.insert(&mut t2, inserted_id, 7);
            f.set(&mut t1, 2, 99);
            let committed = f.commit_all(vec![(t2, "T2"), (t1, "T1")]);
            // T1 missed T2's insert, so T1 must come first. The protocols that serialize
            // in commit order fail T1; MVTO (T1 is older) and SSN (no cycle) commit both.
            let fails = f.serializable() && must_fail && f.serializes_in_commit_order();
            assert_eq!(
                committed,
                [true, !fails],
                "{}: insert of {inserted_id} (iterator: {iterator})",
                f.design
            );
            let mut cleanup = f.db.begin(Isolation::Snapshot);
            cleanup
                .delete(f.table, &[Value::U64(inserted_id)])
                .unwrap_or_else(|e| panic!("{}: cleanup: {e}", f.design));
            cleanup
                .update(f.table, &[Value::U64(2)], &[(VALUE, Value::I64(20))])
                .unwrap_or_else(|e| panic!("{}: cleanup: {e}", f.design));
            f.commit(cleanup, "cleanup");
        }
    });
}

// ----- The read-only anomaly (Fekete, O'Neil, O'Neil 2004) --------------------------------

/// Row 1 is a checking account `x`, row 2 a savings account `y`, both 0. T2 withdraws 10
/// from checking, charging 1 more if `x + y` would go negative; T1 deposits 20 into
/// savings; read-only T3 sees T1's deposit but not T2's withdrawal, and T2 then charges the
/// fee. Under snapshot isolation all three commit and T3's report is impossible in any
/// serial order (T2 -> T1 -> T3 -> T2). Serializable must break the cycle; the read-only T3
/// is declared read-only (`declared`) or not, and never fails either way.
fn read_only_anomaly_schedule(f: &Fixture, declared: bool) {
    let mut reset = f.db.begin(Isolation::Snapshot);
    for id in [1, 2] {
        f.set(&mut reset, id, 0);
    }
    f.commit(reset, "reset");

    let mut t2 = f.begin();
    let (x, y) = (f.read(&t2, 1).unwrap(), f.read(&t2, 2).unwrap());
    let mut t1 = f.begin();
    let y1 = f.read(&t1, 2).unwrap();
    f.set(&mut t1, 2, y1 + 20);
    f.commit(t1, "T1 (deposit)");
    let t3 = if declared {
        f.db.begin_read_only(f.isolation)
    } else {
        f.begin()
    };
    let report = (f.read(&t3, 1).unwrap(), f.read(&t3, 2).unwrap());
    assert_eq!(report, (0, 20), "{}", f.design);
    f.commit(t3, "T3 (read-only report)");
    let fee = if x + y - 10 < 0 { 1 } else { 0 };
    f.set(&mut t2, 1, x - 10 - fee);
    let committed = f.commit_all(vec![(t2, "T2 (withdrawal)")]);
    if f.serializable() {
        assert_eq!(committed, [false], "{}: the cycle must break", f.design);
        assert_eq!(f.committed(), [(1, 0), (2, 20)], "{}", f.design);
    } else {
        assert_eq!(committed, [true], "{}", f.design);
        assert_eq!(f.committed(), [(1, -11), (2, 20)], "{}", f.design);
    }
}

#[test]
fn read_only_anomaly() {
    for_each_configuration(|f| read_only_anomaly_schedule(f, false));
}

#[test]
fn read_only_anomaly_with_a_declared_read_only_transaction() {
    for_each_configuration(|f| read_only_anomaly_schedule(f, true));
}

/// A declared read-only transaction refuses writes with a typed error and stays usable.
#[test]
fn declared_read_only_transactions_refuse_writes() {
    for_each_configuration(|f| {
        let mut txn = f.db.begin_read_only(f.isolation);
        assert!(txn.is_read_only(), "{}", f.design);
        assert_eq!(f.try_set(&mut txn, 1, 5), Err(Error::ReadOnlyTransaction));
        assert_eq!(
            txn.insert(f.table, &[Value::U64(9), Value::I64(9)]),
            Err(Error::ReadOnlyTransaction)
        );
        assert_eq!(
            txn.delete(f.table, &[Value::U64(1)]),
            Err(Error::ReadOnlyTransaction)
        );
        assert_eq!(f.read(&txn, 1), Some(10), "{}: still usable", f.design);
        f.commit(txn, "read-only");
        assert_eq!(f.committed(), [(1, 10), (2, 20)], "{}", f.design);
    });
}
