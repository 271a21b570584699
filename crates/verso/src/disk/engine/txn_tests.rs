//! Interleavings of the disk engine's commit path forced with the test-only pause points
//! (`Pause`): what a stress run found once, replayed step by step.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use super::{Pause, PAUSE};
use crate::disk::DiskStorage;
use crate::fs::SimulatedFileSystem;
use crate::{
    ColumnType, Database, Durability, Error, GarbageCollector, Isolation, Options, Schema, Value,
};

/// How long the refused committer waits for the validator it would block: long enough
/// for a validator that is not blocked on anything on a loaded machine.
const VALIDATOR_DEADLINE: Duration = Duration::from_secs(30);

fn set(txn: &mut crate::Transaction<'_>, table: crate::TableId, id: i64, value: i64) {
    assert!(txn
        .update(table, &[Value::I64(id)], &[(1, Value::I64(value))])
        .unwrap());
}

fn value(txn: &crate::Transaction<'_>, table: crate::TableId, id: i64) -> i64 {
    txn.get(table, &[Value::I64(id)]).unwrap().unwrap()[1]
        .as_i64()
        .unwrap()
}

/// The history suite hung in CI under InnoDB's design: a serializable commit refused by
/// validation rolled back its undo (reads of the files) before marking its owner aborted,
/// while a second validator, holding its commit-log entry's latch, waited on that owner;
/// the rollback's read of the same commit-log page then waited on the validator.
///
/// Replayed: A (read 1, wrote 2) is refused because C wrote 1 meanwhile; B (read 2, writes
/// 3) collects A's record while A's error path begins, so B must wait for A's outcome. At
/// A's first rollback I/O, B must already be able to finish: A's owner is decided before
/// any I/O, so nothing A's rollback waits for can be waiting on A.
#[test]
fn regression_a_refused_commit_decides_its_owner_before_its_rollback_does_io() {
    let fs = Arc::new(SimulatedFileSystem::new(35));
    let db = Arc::new(
        Database::open(
            Options::default()
                .disk("/refused-commit")
                .disk_storage(DiskStorage::Undo)
                .garbage_collector(GarbageCollector::Steam)
                .file_system(fs)
                .buffer_pool(64 * crate::disk::PAGE_SIZE)
                .durability(Durability::Sync)
                .autovacuum_naptime(None),
        )
        .unwrap(),
    );
    let schema = Schema::new()
        .column("id", ColumnType::I64)
        .column("value", ColumnType::I64)
        .primary_key(&["id"]);
    let table = db.create_table("t", schema).unwrap();
    let mut load = db.begin(Isolation::Snapshot);
    for id in 1..=3 {
        load.insert(table, &[Value::I64(id), Value::I64(0)])
            .unwrap();
    }
    load.commit().unwrap();

    let mut a = db.begin(Isolation::Serializable);
    assert_eq!(value(&a, table, 1), 0);
    set(&mut a, table, 2, 20);

    // B begins before A commits and reads A's row: A's record is a candidate of B's.
    let (go_b, b_may_commit) = mpsc::channel::<()>();
    let (b_collected, collected) = mpsc::channel::<()>();
    let (b_began, began) = mpsc::channel::<()>();
    let (b_done, done) = mpsc::channel::<crate::Result<()>>();
    let b = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut b = db.begin(Isolation::Serializable);
            assert_eq!(value(&b, table, 2), 0);
            set(&mut b, table, 3, 30);
            b_began.send(()).unwrap();
            b_may_commit.recv().unwrap();
            PAUSE.with(|hook| {
                *hook.borrow_mut() = Some(Box::new(move |point| {
                    if point == Pause::ValidatorCollected {
                        let _ = b_collected.send(());
                    }
                }))
            });
            let _ = b_done.send(b.commit());
        })
    };
    began.recv().unwrap();

    let mut c = db.begin(Isolation::Snapshot);
    set(&mut c, table, 1, 10);
    c.commit().unwrap();

    // A's hook: when its error path begins, B commits and collects A's record; at A's
    // first I/O of the rollback, B must be done.
    let (b_finished_before_io, finished) = mpsc::channel::<bool>();
    PAUSE.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move |point| match point {
            Pause::RefusedCommitBegins => {
                go_b.send(()).unwrap();
                collected
                    .recv_timeout(VALIDATOR_DEADLINE)
                    .expect("B reaches its validation");
            }
            Pause::RollbackIoBegins => {
                let outcome = done.recv_timeout(VALIDATOR_DEADLINE);
                let _ = b_finished_before_io.send(outcome.is_ok());
                assert!(
                    outcome.is_ok(),
                    "B still waits on A's undecided owner when A's rollback starts its I/O"
                );
                outcome
                    .unwrap()
                    .expect("B commits: A, whose write it read, aborted");
            }
            Pause::ValidatorCollected => {}
        }))
    });
    let refused = a.commit();
    PAUSE.with(|hook| hook.borrow_mut().take());
    assert!(
        matches!(refused, Err(Error::SerializationFailure { .. })),
        "{refused:?}"
    );
    assert_eq!(finished.try_recv(), Ok(true), "A's rollback began its I/O");
    b.join().unwrap();

    let check = db.begin_read_only(Isolation::Snapshot);
    assert_eq!(
        (1..=3)
            .map(|id| value(&check, table, id))
            .collect::<Vec<_>>(),
        vec![10, 0, 30],
        "C and B committed, A rolled back"
    );
}
