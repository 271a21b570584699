//! Regression test for a bug found in review: a transaction that changed an indexed column
//! and then deleted the row left the index entry of the value it wrote behind for ever (and
//! with it the row object), whether it then aborted or re-inserted the row.
//!
//! It counts live heap bytes per thread, so it is the only test in this binary: with other
//! tests running beside it, the index's epoch reclamation (process-wide) may free one
//! thread's retired nodes on another thread and blur the count. The janitor is off for the
//! same reason.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use verso::{Database, Isolation, Options, Value};

// ----- a per-thread count of live heap bytes ------------------------------------------------

struct Counting;

thread_local! {
    static NET_BYTES: Cell<i64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` with the caller's own arguments, so `System`'s
// guarantees hold unchanged; the counting touches only a thread-local integer (and does
// nothing once that thread-local is gone), never the memory being managed.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = NET_BYTES.try_with(|n| n.set(n.get() + layout.size() as i64));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = NET_BYTES.try_with(|n| n.set(n.get() - layout.size() as i64));
        // SAFETY: `ptr` was allocated by this allocator (so by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = NET_BYTES.try_with(|n| n.set(n.get() - layout.size() as i64 + new_size as i64));
        // SAFETY: `ptr` was allocated by `System` with `layout`; the caller upholds the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn net_bytes() -> i64 {
    NET_BYTES.with(|n| n.get())
}

fn open_quiet(options: Options) -> Database {
    Database::open(options.idle_collection_interval(None)).expect("open")
}

/// Runs `step(i)` `n` times after a warm-up and returns the growth of live heap bytes on
/// this thread per step.
fn growth_per_step(db: &Database, n: u64, mut step: impl FnMut(u64)) -> i64 {
    for i in 0..2_000 {
        step(i);
    }
    settle(db);
    let before = net_bytes();
    for i in 2_000..2_000 + n {
        step(i);
    }
    settle(db);
    (net_bytes() - before) / n as i64
}

/// Lets deferred frees (the indexes reclaim removed entries by epochs) happen: collects
/// garbage and pins and unpins the epoch for a while.
fn settle(db: &Database) {
    for _ in 0..200 {
        db.collect_garbage();
        let txn = db.begin(Isolation::Snapshot);
        drop(txn);
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

// ----- index entries that linger forever ----------------------------------------------------

/// A transaction that changes an indexed column and then deletes the row, and is rolled
/// back, leaves the index entry of the value it wrote behind for ever (it also keeps the row
/// object alive once the row is buried). Repeating it grows memory without bound.
fn update_then_delete_then_abort() {
    for options in [
        Options::default(),
        Options::default().garbage_collector(verso::GarbageCollector::WatermarkOnly),
    ] {
        let db = open_quiet(options);
        let table = common::create_named(&db);
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &[Value::U64(1), Value::from("a")])
            .unwrap();
        txn.commit().unwrap();
        // Control: update + abort (no delete) does not grow.
        let control = growth_per_step(&db, 20_000, |i| {
            let mut txn = db.begin(Isolation::Snapshot);
            let name = format!("name-{i:08}");
            assert!(txn
                .update(table, &[Value::U64(1)], &[(1, Value::from(name.as_str()))])
                .unwrap());
            txn.abort();
        });
        let leaking = growth_per_step(&db, 20_000, |i| {
            let mut txn = db.begin(Isolation::Snapshot);
            let name = format!("other-{i:08}");
            assert!(txn
                .update(table, &[Value::U64(1)], &[(1, Value::from(name.as_str()))])
                .unwrap());
            assert!(txn.delete(table, &[Value::U64(1)]).unwrap());
            txn.abort();
        });
        assert!(
            control < 8,
            "{}: control grows by {control} bytes per step",
            db.design()
        );
        assert!(
            leaking < 8,
            "{}: update+delete+abort grows memory by {leaking} bytes per transaction (control: {control})",
            db.design()
        );
    }
}

/// Same, when the transaction re-inserts the row after deleting it and commits.
fn update_delete_reinsert() {
    let db = open_quiet(Options::default());
    let table = common::create_named(&db);
    let mut txn = db.begin(Isolation::Snapshot);
    txn.insert(table, &[Value::U64(1), Value::from("a")])
        .unwrap();
    txn.commit().unwrap();
    let leaking = growth_per_step(&db, 20_000, |i| {
        let mut txn = db.begin(Isolation::Snapshot);
        let name = format!("other-{i:08}");
        assert!(txn
            .update(table, &[Value::U64(1)], &[(1, Value::from(name.as_str()))])
            .unwrap());
        assert!(txn.delete(table, &[Value::U64(1)]).unwrap());
        txn.insert(table, &[Value::U64(1), Value::from("a")])
            .unwrap();
        txn.commit().unwrap();
    });
    assert!(
        leaking < 8,
        "{}: update+delete+insert grows memory by {leaking} bytes per transaction",
        db.design()
    );
}

/// Found when OneShot's storage joined (delta-nvm under 'oneshot'): its finalizing cut no
/// chain (its versions go with their partitions), so the entry of each value an update of
/// an indexed column replaced stayed in the secondary index after the version's partition
/// went, one per update, for ever. The chain is now cut in DRAM at finalizing, and the
/// entries only the cut versions had are removed.
fn delta_nvm_updates_of_an_indexed_column() {
    let db = open_quiet(
        Options::default()
            .version_storage(verso::VersionStorageKind::DeltaNvm)
            .concurrency_control(verso::ConcurrencyControl::Mvto)
            .garbage_collector(verso::GarbageCollector::OneShot)
            .persistent_memory(
                verso::pmem::PmOptions::default()
                    .capacity_bytes(256 << 20)
                    .slots_per_block(16)
                    .partition_frames(32),
            ),
    );
    let table = common::create_named(&db);
    let mut txn = db.begin(Isolation::Serializable);
    txn.insert(table, &[Value::U64(1), Value::from("a")])
        .unwrap();
    txn.commit().unwrap();
    let leaking = growth_per_step(&db, 20_000, |i| {
        let mut txn = db.begin(Isolation::Serializable);
        let name = format!("name-{i:08}");
        assert!(txn
            .update(table, &[Value::U64(1)], &[(1, Value::from(name.as_str()))])
            .unwrap());
        txn.commit().unwrap();
    });
    let released = db
        .stats()
        .persistent_memory
        .expect("a region")
        .partitions
        .released;
    assert!(released > 10, "partitions were released: {released}");
    assert!(
        leaking < 8,
        "{}: updates of an indexed column grow memory by {leaking} bytes each",
        db.design()
    );
}

/// One test, so that nothing else runs in this process while it measures.
#[test]
fn regression_update_then_delete_leaks_no_index_entry() {
    update_then_delete_then_abort();
    update_delete_reinsert();
    delta_nvm_updates_of_an_indexed_column();
}
