//! The embedded API as a program uses it: retrying conflicts, rows by column name, rows to
//! and from a program's own types.

mod common;

use common::create_counter;
use verso::{Error, Isolation, Value};

const KEY: [Value; 1] = [Value::U64(1)];

/// A transaction that lost a write race is rolled back at once; a program that ignored the
/// error (or called on) then commits and gets `TransactionAborted`. That error says to run
/// the transaction again too, so `is_retryable` must say so (it said "misuse").
#[test]
fn regression_a_commit_after_a_conflict_is_retryable() {
    for db in common::all_databases() {
        let d = db.design();
        let table = create_counter(&db, "counter");
        let mut loser = db.begin(Isolation::Snapshot);
        let mut winner = db.begin(Isolation::Snapshot);
        winner
            .update(table, &KEY, &[(1, Value::I64(1))])
            .unwrap_or_else(|e| panic!("{d}: {e}"));
        // Under every protocol, a write to a row another running transaction wrote fails.
        let conflict = loser
            .update(table, &KEY, &[(1, Value::I64(2))])
            .expect_err("the second writer loses");
        assert!(conflict.is_retryable(), "{d}: {conflict}");
        winner.commit().unwrap_or_else(|e| panic!("{d}: {e}"));
        let at_commit = loser.commit().expect_err("rolled back already");
        assert_eq!(at_commit, Error::TransactionAborted, "{d}");
        assert!(at_commit.is_retryable(), "{d}: {at_commit}");
    }
}
