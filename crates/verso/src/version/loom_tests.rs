//! Loom model checks of one chain, for every version storage: installing, committing
//! (mark, draw, stamp), reading and eager pruning, run concurrently. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p verso --lib --release loom`.
//!
//! The clock is modelled by one atomic, as in the transaction manager: a reader's snapshot
//! is a load of it; a committer marks itself committing, draws with `fetch_add`, marks
//! itself committed, then stamps its record.

use std::sync::atomic::Ordering;

use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

use crate::research::ColumnMask;
use crate::row::NonInline;
use crate::txn::state::TxnShared;
use crate::value::Value;
use crate::version::append::AppendStorage;
use crate::version::append_o2n::AppendO2nStorage;
use crate::version::delta::DeltaStorage;
use crate::version::time_travel::TimeTravelStorage;
use crate::version::{
    ActiveSnapshots, ChainEdit, Snapshot, VersionStorage, WriteIntent, WriteResult,
};

fn value_of<V: VersionStorage>(row: &V::Row, start_ts: u64) -> Option<i64> {
    let snapshot = Snapshot {
        start_ts,
        owner: None,
        obsolete_below: 0,
    };
    V::read(row, &snapshot, |v| {
        v.map(|v| v.get(1).as_i64().expect("an i64 column"))
    })
    .0
}

/// A committed row `(1, initial)` with its insert stamped at timestamp 1; the clock at 2.
fn committed_row<V: crate::version::HeapStorage>(initial: i64) -> (Arc<V::Row>, Arc<AtomicU64>) {
    let inserter = Arc::new(TxnShared::new());
    let (row, _) = V::new_row(
        &[Value::U64(1), Value::I64(initial)],
        &inserter,
        NonInline::Packed,
    );
    inserter.mark_committing();
    inserter.mark_committed(1);
    V::stamp(&row, &inserter, 1);
    (row, Arc::new(AtomicU64::new(2)))
}

/// Installs `value` as transaction `owner` started at `start_ts`, commits it, returns its
/// commit timestamp.
fn update_and_commit<V: VersionStorage>(
    row: &V::Row,
    clock: &AtomicU64,
    start_ts: u64,
    value: i64,
    prune_with: Option<&ActiveSnapshots>,
) -> u64 {
    let owner = Arc::new(TxnShared::new());
    let changes = [(1usize, Value::I64(value))];
    let snapshot = Snapshot {
        start_ts,
        owner: Some(&owner),
        obsolete_below: 0,
    };
    let intent = WriteIntent::Update(ColumnMask::from_columns(&[1]), &changes);
    match V::write(row, &snapshot, intent, &owner, NonInline::Packed) {
        WriteResult::Installed { mut chain, .. } => {
            if let Some(active) = prune_with {
                chain.prune(active);
            }
        }
        _ => panic!("the only writer cannot conflict"),
    }
    owner.mark_committing();
    let ts = clock.fetch_add(1, Ordering::SeqCst);
    owner.mark_committed(ts);
    V::stamp(row, &owner, ts);
    ts
}

#[test]
fn loom_commit_is_atomic_for_a_reader_that_starts_mid_commit() {
    commit_is_atomic_for_a_reader_that_starts_mid_commit::<DeltaStorage>();
}

#[test]
fn loom_append_commit_is_atomic_for_a_reader_that_starts_mid_commit() {
    commit_is_atomic_for_a_reader_that_starts_mid_commit::<AppendStorage>();
}

#[test]
fn loom_append_o2n_commit_is_atomic_for_a_reader_that_starts_mid_commit() {
    commit_is_atomic_for_a_reader_that_starts_mid_commit::<AppendO2nStorage>();
}

#[test]
fn loom_time_travel_commit_is_atomic_for_a_reader_that_starts_mid_commit() {
    commit_is_atomic_for_a_reader_that_starts_mid_commit::<TimeTravelStorage>();
}

fn commit_is_atomic_for_a_reader_that_starts_mid_commit<V: crate::version::HeapStorage>() {
    loom::model(|| {
        let (row, clock) = committed_row::<V>(10);
        let writer = {
            let (row, clock) = (Arc::clone(&row), Arc::clone(&clock));
            thread::spawn(move || update_and_commit::<V>(&row, &clock, 2, 20, None))
        };
        // The reader takes its snapshot at any point of the commit and reads twice: both
        // reads agree, and they show the update exactly when it committed before the
        // snapshot.
        let start_ts = clock.load(Ordering::SeqCst);
        let first = value_of::<V>(&row, start_ts);
        let second = value_of::<V>(&row, start_ts);
        let commit_ts = writer.join().expect("writer");
        let expected = if commit_ts < start_ts { 20 } else { 10 };
        assert_eq!(first, Some(expected));
        assert_eq!(second, Some(expected));
    });
}

#[test]
fn loom_pruning_never_changes_what_a_live_snapshot_reads() {
    pruning_never_changes_what_a_live_snapshot_reads::<DeltaStorage>();
}

#[test]
fn loom_append_pruning_never_changes_what_a_live_snapshot_reads() {
    pruning_never_changes_what_a_live_snapshot_reads::<AppendStorage>();
}

#[test]
fn loom_append_o2n_pruning_never_changes_what_a_live_snapshot_reads() {
    pruning_never_changes_what_a_live_snapshot_reads::<AppendO2nStorage>();
}

#[test]
fn loom_time_travel_pruning_never_changes_what_a_live_snapshot_reads() {
    pruning_never_changes_what_a_live_snapshot_reads::<TimeTravelStorage>();
}

fn pruning_never_changes_what_a_live_snapshot_reads<V: crate::version::HeapStorage>() {
    loom::model(|| {
        let (row, clock) = committed_row::<V>(10);
        // A long reader at snapshot 2 (sees only the insert).
        let reader_ts = 2;
        // A first update commits at 2 before anything runs concurrently.
        let first = update_and_commit::<V>(&row, &clock, 2, 20, None);
        assert_eq!(first, 2);
        // The writer's list of active snapshots: the reader; horizon: the clock now.
        let active = ActiveSnapshots::new(clock.load(Ordering::SeqCst), vec![reader_ts]);
        let writer = {
            let (row, clock) = (Arc::clone(&row), Arc::clone(&clock));
            thread::spawn(move || {
                let ts = update_and_commit::<V>(&row, &clock, 3, 30, Some(&active));
                let _ = update_and_commit::<V>(&row, &clock, ts + 1, 40, Some(&active));
            })
        };
        // Meanwhile the long reader keeps reading its original value, and a reader that
        // starts now reads one of the committed values consistent with its snapshot.
        assert_eq!(value_of::<V>(&row, reader_ts), Some(10));
        let start_ts = clock.load(Ordering::SeqCst);
        let seen = value_of::<V>(&row, start_ts).expect("row");
        assert!(
            matches!((start_ts, seen), (3, 20) | (4, 30) | (5, 40)),
            "snapshot {start_ts} read {seen}"
        );
        writer.join().expect("writer");
        assert_eq!(value_of::<V>(&row, reader_ts), Some(10));
        assert_eq!(value_of::<V>(&row, start_ts), Some(seen));
        assert_eq!(value_of::<V>(&row, clock.load(Ordering::SeqCst)), Some(40));
    });
}
