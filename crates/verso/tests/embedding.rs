//! The embedded API as a program uses it: retrying conflicts, rows by column name, rows to
//! and from a program's own types.

mod common;

use std::time::Duration;

use common::create_counter;
use verso::{
    ColumnType, Database, Error, FromRow, IntoRow, Isolation, Options, RetryPolicy, Row, Schema,
    TableId, Transaction, Value,
};

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

// ----- the retry helper -----------------------------------------------------------------

/// A policy that retries at once, so that the tests take no time.
fn at_once(attempts: u32) -> RetryPolicy {
    RetryPolicy::new()
        .max_attempts(attempts)
        .backoff(Duration::ZERO, Duration::ZERO)
}

/// Makes `txn` lose a write race on the counter: another transaction, begun on this thread,
/// writes the row first (and commits after), so that `txn`'s write fails under every
/// protocol. Returns that failure.
fn lose_a_race(db: &Database, table: TableId, txn: &mut Transaction<'_>, value: i64) -> Error {
    let mut other = db.begin(Isolation::Snapshot);
    other
        .update(table, &KEY, &[(1, Value::I64(value))])
        .expect("the other writer is first");
    let lost = txn
        .update(table, &KEY, &[(1, Value::I64(-1))])
        .expect_err("the second writer loses");
    other.commit().expect("the other writer commits");
    lost
}

fn counter(db: &Database, table: TableId) -> i64 {
    let txn = db.begin(Isolation::Snapshot);
    let value = txn
        .get_row(table, &KEY)
        .expect("get")
        .expect("the counter")
        .get::<i64>("value")
        .expect("an i64");
    txn.commit().expect("read-only commit");
    value
}

/// The first run loses a race; the helper rolls it back, runs the closure again on a fresh
/// snapshot, commits, and returns what the second run returned.
#[test]
fn run_retries_a_conflict_and_returns_the_closures_value() {
    for db in common::all_databases() {
        let d = db.design();
        let table = create_counter(&db, "counter");
        let mut attempts = 0;
        let result = db.run_with(&at_once(5), Isolation::Snapshot, |txn| {
            attempts += 1;
            if attempts == 1 {
                return Err(lose_a_race(&db, table, txn, 10));
            }
            let seen = txn
                .get_row(table, &KEY)?
                .expect("the counter")
                .get::<i64>("value")?;
            txn.update(table, &KEY, &[(1, Value::I64(seen + 1))])?;
            Ok(seen)
        });
        assert_eq!(
            result,
            Ok(10),
            "{d}: the second run saw the other writer's commit"
        );
        assert_eq!(attempts, 2, "{d}");
        assert_eq!(counter(&db, table), 11, "{d}");
    }
    // The default policy (with its waits) retries too.
    let db = Database::open(Options::default()).expect("open");
    let table = create_counter(&db, "counter");
    let mut attempts = 0;
    let result = db.run(Isolation::Snapshot, |txn| {
        attempts += 1;
        if attempts < 3 {
            return Err(lose_a_race(&db, table, txn, attempts));
        }
        Ok("done")
    });
    assert_eq!((result, attempts), (Ok("done"), 3));
}

/// A closure that loses every race runs exactly `max_attempts` times; the last conflict is
/// returned (still retryable) and nothing of it was committed.
#[test]
fn run_gives_up_after_max_attempts_with_the_last_conflict() {
    for db in common::all_databases() {
        let d = db.design();
        let table = create_counter(&db, "counter");
        let mut attempts = 0;
        let result: verso::Result<()> = db.run_with(&at_once(3), Isolation::Snapshot, |txn| {
            attempts += 1;
            Err(lose_a_race(&db, table, txn, 100 + attempts))
        });
        let error = result.expect_err("every run lost");
        assert!(error.is_retryable(), "{d}: {error}");
        assert_eq!(attempts, 3, "{d}");
        assert_eq!(
            counter(&db, table),
            103,
            "{d}: only the other writers' commits"
        );
    }
}

/// Misuse is not retried: the error comes back after one run, and what the run wrote
/// before it is rolled back.
#[test]
fn run_passes_a_non_retryable_error_through_after_one_run_and_keeps_nothing() {
    for db in common::all_databases() {
        let d = db.design();
        let table = create_counter(&db, "counter");
        let mut attempts = 0;
        let result: verso::Result<()> = db.run_with(&at_once(5), Isolation::Snapshot, |txn| {
            attempts += 1;
            txn.update(table, &KEY, &[(1, Value::I64(7))])?;
            txn.insert(table, &[Value::U64(1), Value::I64(8)])
        });
        assert!(
            matches!(result, Err(Error::DuplicateKey { .. })),
            "{d}: {result:?}"
        );
        assert_eq!(attempts, 1, "{d}");
        assert_eq!(
            counter(&db, table),
            0,
            "{d}: the update before the error was kept"
        );
    }
}

/// A run whose closure swallowed the conflict fails at commit with `TransactionAborted`,
/// which is a retry too; so is a serialization failure found when the commit validates.
#[test]
fn run_retries_failures_that_surface_at_commit() {
    for db in common::all_databases() {
        let d = db.design();
        let table = create_counter(&db, "counter");
        let mut attempts = 0;
        let result = db.run_with(&at_once(5), Isolation::Snapshot, |txn| {
            attempts += 1;
            if attempts == 1 {
                let _ignored = lose_a_race(&db, table, txn, 1);
            }
            Ok(attempts)
        });
        assert_eq!(result, Ok(2), "{d}: TransactionAborted at the first commit");
    }
    for options in common::precision_configurations() {
        let db = common::open(&options);
        let d = db.design();
        let table = create_counter(&db, "counter");
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &[Value::U64(2), Value::I64(0)])
            .expect("insert");
        txn.commit().expect("commit");
        let mut attempts = 0;
        let result = db.run_with(&at_once(5), Isolation::Serializable, |txn| {
            attempts += 1;
            let seen = txn.get(table, &KEY)?.expect("row 1")[1].clone();
            if attempts == 1 {
                // What this run read changes before it commits: its validation fails.
                let mut other = db.begin(Isolation::Snapshot);
                other.update(table, &KEY, &[(1, Value::I64(5))])?;
                other.commit()?;
            }
            txn.update(table, &[Value::U64(2)], &[(1, seen.clone())])?;
            Ok(seen)
        });
        assert_eq!(
            result,
            Ok(Value::I64(5)),
            "{d}: the retry read the other's commit"
        );
        assert_eq!(attempts, 2, "{d}");
    }
}

// ----- rows by column name, and a program's own types -----------------------------------

#[derive(Debug, PartialEq)]
struct Account {
    id: u64,
    owner: String,
    nickname: Option<String>,
    balance: i64,
}

impl FromRow for Account {
    fn from_row(row: &Row<'_>) -> verso::Result<Self> {
        Ok(Account {
            id: row.get("id")?,
            owner: row.get("owner")?,
            nickname: row.get("nickname")?,
            balance: row.get("balance")?,
        })
    }
}

impl IntoRow for &Account {
    fn into_row(self) -> Vec<Value> {
        (
            self.id,
            self.owner.as_str(),
            self.nickname.clone(),
            self.balance,
        )
            .into_row()
    }
}

fn accounts(db: &Database) -> TableId {
    db.create_table(
        "accounts",
        Schema::new()
            .column("id", ColumnType::U64)
            .column("owner", ColumnType::Text)
            .column("nickname", ColumnType::Text)
            .column("balance", ColumnType::I64)
            .primary_key(&["id"])
            .index("by_owner", &["owner"]),
    )
    .expect("create")
}

#[test]
fn rows_read_by_name_and_position_and_map_to_a_programs_types() {
    let db = Database::open(Options::default()).expect("open");
    let table = accounts(&db);
    let ada = Account {
        id: 1,
        owner: "ada".into(),
        nickname: None,
        balance: 100,
    };
    let bob = Account {
        id: 2,
        owner: "bob".into(),
        nickname: Some("b".into()),
        balance: -5,
    };
    db.run(Isolation::Snapshot, |txn| {
        txn.insert(table, &ada.into_row())?;
        txn.insert(table, &bob.into_row())
    })
    .expect("insert");

    let txn = db.begin(Isolation::Snapshot);
    let row = txn
        .get_row(table, &[Value::U64(1)])
        .expect("get")
        .expect("ada");
    assert_eq!(row.get::<u64>("id"), Ok(1));
    assert_eq!(row.get::<&str>("owner"), Ok("ada"));
    assert_eq!(row.get::<String>(1), Ok("ada".to_owned()));
    assert_eq!(row.get::<Option<String>>("nickname"), Ok(None));
    assert_eq!(row.get::<Option<i64>>("balance"), Ok(Some(100)));
    assert_eq!(row.value("balance"), Ok(&Value::I64(100)));
    assert_eq!(row[3], Value::I64(100), "by position, as a slice");
    assert_eq!(row.len(), 4);
    assert_eq!(row.table_name(), "accounts");
    assert_eq!(
        row.column_names().collect::<Vec<_>>(),
        ["id", "owner", "nickname", "balance"]
    );
    assert_eq!(
        format!("{row:?}"),
        r#"accounts { id: U64(1), owner: Text("ada"), nickname: Null, balance: I64(100) }"#
    );
    assert_eq!(row.decode::<Account>(), Ok(ada));
    let (id, owner, nickname, balance): (u64, String, Option<String>, i64) =
        row.decode().expect("a tuple");
    assert_eq!(
        (id, owner.as_str(), nickname, balance),
        (1, "ada", None, 100)
    );
    assert_eq!(
        row.clone().into_values(),
        txn.get(table, &[Value::U64(1)]).unwrap().unwrap()
    );

    // Scans hand out the same rows; map them with `decode`.
    let everyone = txn
        .scan(table, ..)
        .expect("scan")
        .map(|row| row?.decode::<Account>())
        .collect::<verso::Result<Vec<_>>>()
        .expect("decode");
    assert_eq!(everyone.iter().map(|a| a.id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(everyone[1], bob);
    let by_owner = txn
        .scan_index(
            table,
            "by_owner",
            vec![Value::from("bob")]..=vec![Value::from("bob")],
        )
        .expect("scan")
        .map(|row| row?.get::<i64>("balance"))
        .collect::<verso::Result<Vec<_>>>();
    assert_eq!(by_owner, Ok(vec![-5]));
    txn.commit().expect("commit");
}

#[test]
fn reading_a_column_wrongly_is_a_typed_error() {
    let db = Database::open(Options::default()).expect("open");
    let table = accounts(&db);
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(
        table,
        &[Value::U64(1), "ada".into(), Value::Null, Value::I64(3)],
    )
    .expect("insert");
    let row = txn
        .get_row(table, &[Value::U64(1)])
        .expect("get")
        .expect("row");
    assert!(matches!(
        row.get::<i64>("no_such_column"),
        Err(Error::UnknownColumn { column, .. }) if column == "no_such_column"
    ));
    assert!(matches!(row.get::<i64>(4), Err(Error::UnknownColumn { column, .. }) if column == "4"));
    let null = row
        .get::<String>("nickname")
        .expect_err("NULL is not a String");
    assert_eq!(
        null.to_string(),
        "cannot read accounts.nickname as String: it holds NULL (read a column that may be \
         NULL as Option<String>)"
    );
    assert!(!null.is_retryable());
    assert!(matches!(
        row.get::<u64>("balance"),
        Err(Error::ValueConversion { target, value, .. }) if target == "u64" && value == "I64(3)"
    ));
    assert!(matches!(
        row.decode::<(u64, String)>(),
        Err(Error::WrongArity {
            expected: 4,
            found: 2,
            ..
        })
    ));
    // NULL nickname is an Option: the row decodes.
    assert_eq!(
        row.decode::<Account>().map(|account| account.nickname),
        Ok(None)
    );
    txn.commit().expect("commit");
}
