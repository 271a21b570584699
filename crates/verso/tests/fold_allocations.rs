//! Regression test for a cost found by profiling the lab (`verso tpcb --hold-snapshot`): behind
//! a held snapshot, every 1,024 commits a thread folds its queue of committed transactions,
//! and each fold collected the queued rows (and their identities) into fresh vectors as long
//! as the queue. Blocks that large come from the allocator's large pages, which it returns
//! to the system between folds, so every fold faulted fresh memory in again: about 14% of
//! TPC-B's time with a held snapshot went to the kernel clearing those pages.
//!
//! And a second cost of the same fold: it freed the list of written rows of every one of the
//! 1,024 transactions it emptied, all at once. A thousand small blocks freed together
//! empty whole pages, which the allocator also returns to the system; the next
//! transactions' lists and new rows then fault fresh pages in. With mimalloc's purging off,
//! `verso tpcb --hold-snapshot` made 1.3k page faults in 20 s instead of 52k and ran 6-12%
//! faster (side by side). The emptied lists now go back to the thread for its next
//! transactions.
//!
//! The allocator counts per thread, so the tests do not see each other's allocations, and
//! the janitor is off (it could fold this thread's queue on its own thread).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use verso::{Database, Isolation, Options, Value};

// ----- per-thread counts: large allocations, and every deallocation --------------------------

/// An allocation (or a reallocation to) at least this large counts as large: a fold of
/// 1,024 one-row transactions gathered 16 KiB of rows and 8 KiB of identities.
const LARGE_BYTES: usize = 8 * 1024;

struct CountingLarge;

thread_local! {
    static LARGE_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static DEALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_allocation(bytes: usize) {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    count_if_large(bytes);
}

fn count_if_large(bytes: usize) {
    if bytes >= LARGE_BYTES {
        let _ = LARGE_ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the caller's own arguments, so `System`'s
// guarantees hold unchanged; the counting touches only thread-local integers (and does
// nothing once they are gone), never the memory being managed.
unsafe impl GlobalAlloc for CountingLarge {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = DEALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: `ptr` was allocated by this allocator (so by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_if_large(new_size);
        // SAFETY: `ptr` was allocated by `System` with `layout`; the caller upholds the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingLarge = CountingLarge;

fn large_allocations() -> u64 {
    LARGE_ALLOCATIONS.with(|n| n.get())
}

fn allocations() -> u64 {
    ALLOCATIONS.with(|n| n.get())
}

fn deallocations() -> u64 {
    DEALLOCATIONS.with(|n| n.get())
}

const ROWS: u64 = 64;
const WARM_UP_COMMITS: u64 = 4 * 1024;
const MEASURED_COMMITS: u64 = 10 * 1024;

/// Behind a held snapshot, one thread updates the same 64 rows over and over: warms up with
/// 4,096 commits, then hands `measure` a function that makes update number `i` (a commit),
/// for it to run the measured 10,240 with. Checks that the queue folded while measuring,
/// that the held snapshot still reads its own state and a new one each row's last update,
/// and that once the snapshot ends every old version goes.
fn behind_a_held_snapshot(measure: impl FnOnce(&dyn Fn(u64))) {
    let db = Database::open(Options::default().idle_collection_interval(None)).expect("open");
    let table = common::create_id_value_table(&db, "counters");
    let rows: Vec<Vec<Value>> = (0..ROWS)
        .map(|id| vec![Value::U64(id), Value::I64(0)])
        .collect();
    common::commit_rows(&db, table, &rows);
    let held = db.begin(Isolation::Snapshot);
    let update = |i: u64| {
        let mut txn = db.begin(Isolation::Snapshot);
        let found = txn
            .update(table, &[Value::U64(i % ROWS)], &[(1, Value::I64(i as i64))])
            .expect("update");
        assert!(found);
        txn.commit().expect("commit");
    };
    for i in 0..WARM_UP_COMMITS {
        update(i);
    }
    let folded_before = db.stats().rows_folded;
    measure(&update);
    let folded = db.stats().rows_folded - folded_before;
    assert!(
        folded >= MEASURED_COMMITS / 2,
        "the queue was folded while measuring ({folded} rows moved)"
    );
    let seen = common::column_sum(&held, table, 1);
    assert_eq!(seen, 0, "the held snapshot reads its own state");
    let last = WARM_UP_COMMITS + MEASURED_COMMITS - 1;
    let newest = common::all_rows(&db, table);
    for (id, row) in (0..ROWS).zip(&newest) {
        let last_update = last - (last - id) % ROWS;
        assert_eq!(row, &vec![Value::U64(id), Value::I64(last_update as i64)]);
    }
    drop(held);
    db.collect_garbage();
    common::assert_collected_everything(&db, "after the held snapshot");
}

fn measured_commits() -> std::ops::Range<u64> {
    WARM_UP_COMMITS..WARM_UP_COMMITS + MEASURED_COMMITS
}

/// After the first folds the folded entry holds all 64 rows and the queue has its full
/// capacity, so a steady fold has nothing to grow: it must allocate nothing large.
#[test]
fn regression_folding_the_queue_behind_a_held_snapshot_allocates_nothing_large() {
    behind_a_held_snapshot(|update| {
        let large_before = large_allocations();
        for i in measured_commits() {
            update(i);
        }
        let large = large_allocations() - large_before;
        assert_eq!(
            large, 0,
            "{large} allocations of {LARGE_BYTES} bytes or more in {MEASURED_COMMITS} commits \
             whose folds had nothing to grow"
        );
    });
}

/// Every 1,024th commit folds the queue. A steady commit frees about two blocks; the fold
/// used to free, in that one commit, the lists of written rows of all 1,024 transactions it
/// emptied. No commit may free more than a few dozen blocks now: the fold hands the lists
/// back to the thread, whose next transactions write into them.
#[test]
fn regression_behind_a_held_snapshot_a_fold_freed_every_queued_write_list() {
    /// Far below a fold's 1,024 lists, far above a steady commit's couple of blocks.
    const MOST_FREED_BY_ONE_COMMIT: u64 = 64;
    behind_a_held_snapshot(|update| {
        let (mut most_freed, mut freed) = (0, 0);
        let allocated_before = allocations();
        for i in measured_commits() {
            let before = deallocations();
            update(i);
            let by_this_commit = deallocations() - before;
            most_freed = most_freed.max(by_this_commit);
            freed += by_this_commit;
        }
        assert!(
            freed >= MEASURED_COMMITS,
            "the count sees the commits' own frees ({freed} in {MEASURED_COMMITS} commits)"
        );
        assert!(
            most_freed <= MOST_FREED_BY_ONE_COMMIT,
            "one commit freed {most_freed} blocks: a fold freed the queued write lists at once"
        );
        // Not by keeping them: what the commits allocate, they free (a list kept and a new
        // one allocated per commit would leave one block per commit).
        let allocated = allocations() - allocated_before;
        assert!(
            allocated.abs_diff(freed) <= MEASURED_COMMITS / 16,
            "{allocated} blocks allocated and {freed} freed in {MEASURED_COMMITS} commits"
        );
    });
}
