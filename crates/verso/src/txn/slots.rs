//! Per-thread slots (Steam §4.2): each thread publishes the start timestamps of its running
//! transactions in its own slot; the global minimum and the list of active snapshots are
//! scans over the slots. Begin and commit take no global lock; the commit clock is the only
//! shared word they write.
//!
//! Invariants:
//! - **Exact publication.** A thread publishes a start timestamp *before* it is final: it
//!   reads the clock, publishes the value, then re-reads the clock and retries if it moved.
//!   So when `begin` returns `s`, `s` is in the slot; and a scan that read the clock as `t`
//!   before reading the slot and missed the publication can only have missed a transaction
//!   whose start is `>= t` (all loads and stores here are SeqCst).
//! - A slot's `oldest` is the smallest start of its thread's running transactions
//!   (`u64::MAX` if none); `others` holds the rest. While the set changes, a value may be
//!   listed twice or linger briefly, never go missing: removal only follows the end of the
//!   transaction it stood for, a promoted value is stored in `oldest` before it leaves
//!   `others`, and scans read `others` before `oldest` (the opposite order could miss it:
//!   found in review, `regression_active_list_misses_a_snapshot_moving_from_others_to_oldest`).
//! - Slots are never freed while the database lives; a thread that exits releases its slot
//!   for reuse, leaving its queue of committed transactions for others to finalize.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use crate::cc::precision::CommitRecord;
use crate::stats::SlotStats;
use crate::txn::identity_set::IdentitySet;
use crate::version::ActiveSnapshots;

const SLOTS_PER_CHUNK: usize = 64;
const CHUNKS: usize = 1024;
/// How many threads may hold a slot of one database at once: a transaction begun on one
/// thread more fails with [`crate::Error::CapacityExceeded`].
pub const MAX_THREADS: usize = SLOTS_PER_CHUNK * CHUNKS;

/// A committed writing transaction waiting until no snapshot can need its versions.
pub(crate) struct Committed<R> {
    pub(crate) commit_ts: u64,
    /// The rows it wrote (each holds its version record, possibly pruned already).
    pub(crate) rows: Vec<R>,
    /// For an entry that folds many transactions (`engine::collect::fold_queue`): the
    /// identities of its rows, kept so that the next fold adds to it without re-hashing
    /// them. Empty (and unallocated) for a plain entry. Behind a held snapshot every commit's
    /// rows are looked up here (a million accounts in pgbench's TPC-B at scale 10): a set
    /// whose probes a fold prefetches in batches (`IdentitySet`).
    pub(crate) folded_identities: IdentitySet,
    /// At most the commit timestamp of every transaction in the entry whose versions may
    /// still be linked: `commit_ts` for a plain entry; for a folded one, the oldest it
    /// folded, raised to each bound it was finalized at in part
    /// (`engine::collect::finalize_folded_in_part`).
    pub(crate) folded_since: u64,
}

impl<R> Committed<R> {
    /// A plain entry: one transaction's rows.
    pub(crate) fn new(commit_ts: u64, rows: Vec<R>) -> Self {
        Committed {
            commit_ts,
            rows,
            folded_identities: IdentitySet::default(),
            folded_since: commit_ts,
        }
    }
}

/// One thread's slot.
pub(crate) struct Slot<R> {
    oldest: AtomicU64,
    others_len: AtomicUsize,
    others: Mutex<Vec<u64>>,
    in_use: AtomicBool,
    /// Committed transactions not yet finalized, in commit order.
    pub(crate) committed: Mutex<VecDeque<Committed<R>>>,
    /// Transactions the owner has ended (written only by the owner).
    pub(crate) ends: AtomicU64,
    /// `ends` as the janitor saw it on its previous round (written only by the janitor):
    /// equal means the owner ended nothing for a whole round, so it is idle.
    pub(crate) ends_seen_by_janitor: AtomicU64,
    /// At most the start timestamp of the oldest running serializable (validating)
    /// transaction of the owner, `u64::MAX` if none. Published (as a lower bound) before
    /// the start timestamp is read, like `oldest`.
    serializable_oldest: AtomicU64,
    /// Commit records the owner published for serializable validators, in commit order
    /// (see `cc::precision`).
    pub(crate) validation_log: Mutex<VecDeque<crate::sync::Arc<CommitRecord>>>,
    /// What the owner publishes for its collector (the oldest epoch its running
    /// transactions entered, for the epoch collectors; see `gc/`), `u64::MAX` if nothing.
    pub(crate) collector_value: AtomicU64,
    /// Committed transactions a background collector handed to the owner to finalize
    /// ('Hekaton'), each with the reclaim bound it was found below.
    pub(crate) assigned: Mutex<VecDeque<(u64, Committed<R>)>>,
    /// 'tvcp''s local recycle queue (`engine::collect::prune_recycle_queue`): rows the
    /// slot's transactions wrote whose chains held versions no pruning could remove yet,
    /// each once; and the commit timestamp of the newest queue entry whose rows joined it.
    /// Only the slot's thread uses it; it is here, not in the thread's handle, so that the
    /// engine's drop clears it (a handle may outlive the engine, and rows hold storage).
    pub(crate) recycle: Mutex<(Vec<R>, u64)>,
    pub(crate) stats: SlotStats,
}

impl<R> Slot<R> {
    fn new() -> Self {
        Slot {
            oldest: AtomicU64::new(u64::MAX),
            others_len: AtomicUsize::new(0),
            others: Mutex::new(Vec::new()),
            in_use: AtomicBool::new(false),
            committed: Mutex::new(VecDeque::new()),
            ends: AtomicU64::new(0),
            ends_seen_by_janitor: AtomicU64::new(0),
            serializable_oldest: AtomicU64::new(u64::MAX),
            validation_log: Mutex::new(VecDeque::new()),
            collector_value: AtomicU64::new(u64::MAX),
            assigned: Mutex::new(VecDeque::new()),
            recycle: Mutex::new((Vec::new(), 0)),
            stats: SlotStats::default(),
        }
    }

    /// Publishes the sorted start timestamps of the owner's running transactions.
    fn publish(&self, starts: &[u64]) {
        match starts {
            [] => {
                self.oldest.store(u64::MAX, Ordering::SeqCst);
                if self.others_len.load(Ordering::Relaxed) != 0 {
                    self.others.lock().clear();
                    self.others_len.store(0, Ordering::SeqCst);
                }
            }
            [oldest, rest @ ..] => {
                // New oldest first, then the rest: a value is listed twice for a moment
                // rather than missing.
                self.oldest.store(*oldest, Ordering::SeqCst);
                if !rest.is_empty() || self.others_len.load(Ordering::Relaxed) != 0 {
                    let mut others = self.others.lock();
                    others.clear();
                    others.extend_from_slice(rest);
                    self.others_len.store(rest.len(), Ordering::SeqCst);
                }
            }
        }
    }

    /// Adds one start timestamp to what is published (before it is final).
    fn publish_additional(&self, running: &[u64], candidate: u64) {
        if running.is_empty() {
            self.oldest.store(candidate, Ordering::SeqCst);
        } else {
            let mut others = self.others.lock();
            others.push(candidate);
            self.others_len.store(others.len(), Ordering::SeqCst);
        }
    }
}

/// A fixed-size block of slots; blocks are allocated on demand and never move.
type SlotChunk<R> = Box<[Arc<Slot<R>>]>;

/// The clock and the slots.
pub(crate) struct TxnManager<R> {
    /// The next commit timestamp. A snapshot taken now sees commits below this value.
    clock: AtomicU64,
    chunks: Box<[OnceLock<SlotChunk<R>>]>,
    slots_used: AtomicUsize,
    epoch: std::time::Instant,
    /// Alive while the database is; thread-local handles hold a weak reference.
    liveness: Arc<()>,
    id: u64,
}

static NEXT_MANAGER_ID: AtomicU64 = AtomicU64::new(1);

impl<R: Send + 'static> TxnManager<R> {
    pub(crate) fn new() -> Self {
        TxnManager {
            clock: AtomicU64::new(1),
            chunks: (0..CHUNKS).map(|_| OnceLock::new()).collect(),
            slots_used: AtomicUsize::new(0),
            epoch: std::time::Instant::now(),
            liveness: Arc::new(()),
            id: NEXT_MANAGER_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The clock: the commit timestamp the next committer will take.
    pub(crate) fn clock(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }

    /// Moves the clock past `ts` (recovery: every recovered timestamp lies below the clock).
    pub(crate) fn advance_clock_past(&self, ts: u64) {
        self.clock.fetch_max(ts + 1, Ordering::SeqCst);
    }

    /// Draws a commit timestamp. The caller has marked itself committing first.
    pub(crate) fn draw_commit_ts(&self) -> u64 {
        let ts = self.clock.fetch_add(1, Ordering::SeqCst);
        debug_assert!(ts < crate::txn::state::MAX_TIMESTAMP, "clock exhausted");
        ts
    }

    fn slot(&self, index: usize) -> Option<&Arc<Slot<R>>> {
        self.chunks[index / SLOTS_PER_CHUNK]
            .get()
            .map(|chunk| &chunk[index % SLOTS_PER_CHUNK])
    }

    /// Every slot that exists (in use or not).
    pub(crate) fn slots(&self) -> impl Iterator<Item = &Arc<Slot<R>>> {
        let used = self.slots_used.load(Ordering::SeqCst).min(MAX_THREADS);
        (0..used).filter_map(|index| self.slot(index))
    }

    /// The calling thread's handle for this manager, created (and a slot claimed) on first
    /// use. Returns `None` when all `MAX_THREADS` slots are taken.
    pub(crate) fn local(&self) -> Option<Rc<LocalSlot<R>>> {
        LocalSlot::lookup(self)
    }

    fn claim_slot(&self) -> Option<Arc<Slot<R>>> {
        for slot in self.slots() {
            if slot
                .in_use
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some(Arc::clone(slot));
            }
        }
        let index = self.slots_used.fetch_add(1, Ordering::SeqCst);
        if index >= MAX_THREADS {
            self.slots_used.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        let chunk = self.chunks[index / SLOTS_PER_CHUNK].get_or_init(|| {
            (0..SLOTS_PER_CHUNK)
                .map(|_| Arc::new(Slot::new()))
                .collect()
        });
        let slot = &chunk[index % SLOTS_PER_CHUNK];
        // A fresh index is ours alone, but an earlier thread may have claimed it by the
        // scan above once `slots_used` covered it; take it only if still free.
        if slot
            .in_use
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            Some(Arc::clone(slot))
        } else {
            self.claim_slot()
        }
    }

    /// Begins a snapshot on `local`'s thread: publishes, then returns the start timestamp.
    pub(crate) fn begin(&self, local: &LocalSlot<R>) -> u64 {
        self.begin_at(local, false)
    }

    /// Begins a snapshot whose start timestamp no other transaction shares and no commit
    /// draws: the clock is advanced past it (MVTO's transaction ids, which are also their
    /// commit timestamps).
    pub(crate) fn begin_unique(&self, local: &LocalSlot<R>) -> u64 {
        self.begin_at(local, true)
    }

    /// Publishes a candidate start, then keeps it if the clock still reads it (and, if
    /// `claim`, advances the clock past it in the same step).
    fn begin_at(&self, local: &LocalSlot<R>, claim: bool) -> u64 {
        let mut running = local.running.borrow_mut();
        loop {
            let candidate = self.clock.load(Ordering::SeqCst);
            local.slot.publish_additional(&running, candidate);
            let kept = if claim {
                self.clock
                    .compare_exchange(candidate, candidate + 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            } else {
                self.clock.load(Ordering::SeqCst) == candidate
            };
            if kept {
                let at = running.partition_point(|&s| s <= candidate);
                running.insert(at, candidate);
                // `publish_additional` may have left an older candidate behind in `others`.
                local.slot.publish(&running);
                return candidate;
            }
            // The clock moved: the candidate is too old to be exact. Publish the running set
            // again (dropping the candidate) and retry.
            local.slot.publish(&running);
        }
    }

    /// Ends the transaction that started at `start_ts` on `local`'s thread.
    pub(crate) fn end(&self, local: &LocalSlot<R>, start_ts: u64) {
        let mut running = local.running.borrow_mut();
        let at = running
            .iter()
            .position(|&s| s == start_ts)
            .expect("an ending transaction is running on its thread");
        running.remove(at);
        local.slot.publish(&running);
        let ends = &local.slot.ends;
        ends.store(ends.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Begins a transaction that validates at commit (a serializable one under SI, one
    /// that may write under the other protocols: `Protocol::registers_for_validation`):
    /// like [`TxnManager::begin`] (or [`TxnManager::begin_unique`] if `unique`), and
    /// publishes it as one whose validation needs what committed (or was published) from
    /// its start on: the serializable horizon.
    pub(crate) fn begin_serializable(&self, local: &LocalSlot<R>, unique: bool) -> u64 {
        // A lower bound first: the start about to be taken is at least the clock now, and a
        // committer that draws a timestamp at or after that start must see this (its draw
        // follows our clock read, which follows this store).
        let lower_bound = self.clock.load(Ordering::SeqCst);
        let slot = &local.slot;
        if lower_bound < slot.serializable_oldest.load(Ordering::SeqCst) {
            slot.serializable_oldest
                .store(lower_bound, Ordering::SeqCst);
        }
        let start_ts = self.begin_at(local, unique);
        debug_assert!(start_ts >= lower_bound);
        let mut running = local.serializable_running.borrow_mut();
        let at = running.partition_point(|&s| s <= start_ts);
        running.insert(at, start_ts);
        slot.serializable_oldest.store(running[0], Ordering::SeqCst);
        start_ts
    }

    /// Ends a serializable transaction begun by [`TxnManager::begin_serializable`] (before
    /// [`TxnManager::end`]).
    pub(crate) fn end_serializable(&self, local: &LocalSlot<R>, start_ts: u64) {
        let mut running = local.serializable_running.borrow_mut();
        let at = running
            .iter()
            .position(|&s| s == start_ts)
            .expect("an ending serializable transaction is running on its thread");
        running.remove(at);
        let oldest = running.first().copied().unwrap_or(u64::MAX);
        local
            .slot
            .serializable_oldest
            .store(oldest, Ordering::SeqCst);
    }

    /// Whether a running serializable transaction may have started at or before `ts`, so
    /// that a commit at `ts` must publish a commit record for it.
    pub(crate) fn serializable_running_since(&self, ts: u64) -> bool {
        self.slots()
            .any(|slot| slot.serializable_oldest.load(Ordering::SeqCst) <= ts)
    }

    /// Commit records below this timestamp are needed by no serializable transaction,
    /// running or future.
    pub(crate) fn serializable_horizon(&self) -> u64 {
        let mut horizon = self.clock.load(Ordering::SeqCst);
        for slot in self.slots() {
            horizon = horizon.min(slot.serializable_oldest.load(Ordering::SeqCst));
        }
        horizon
    }

    /// The oldest snapshot any transaction can hold now or later: versions committed
    /// before it and superseded before it are invisible to everyone.
    pub(crate) fn watermark(&self) -> u64 {
        let mut watermark = self.clock.load(Ordering::SeqCst);
        for slot in self.slots() {
            watermark = watermark.min(slot.oldest.load(Ordering::SeqCst));
        }
        watermark
    }

    /// The snapshots that may read old versions now (see [`ActiveSnapshots`]).
    pub(crate) fn active_snapshots(&self, into: &mut Vec<u64>) -> ActiveSnapshots {
        let horizon = self.clock.load(Ordering::SeqCst);
        into.clear();
        for slot in self.slots() {
            // `others` before `oldest`: `publish` stores a new `oldest` (promoted from
            // `others`) before it clears `others`, so reading in the opposite order sees a
            // promoted value in one place or the other, never in neither.
            if slot.others_len.load(Ordering::SeqCst) != 0 {
                into.extend_from_slice(&slot.others.lock());
            }
            let oldest = slot.oldest.load(Ordering::SeqCst);
            if oldest != u64::MAX {
                into.push(oldest);
            }
        }
        ActiveSnapshots::new(horizon, std::mem::take(into))
    }

    pub(crate) fn is_alive_token(&self) -> Weak<()> {
        Arc::downgrade(&self.liveness)
    }
}

/// A thread's handle on its slot in one database. Not `Send`: it is the thread's.
pub(crate) struct LocalSlot<R> {
    pub(crate) slot: Arc<Slot<R>>,
    /// Start timestamps of this thread's running transactions, ascending.
    running: RefCell<Vec<u64>>,
    /// Those of them that validate at commit (serializable), ascending.
    serializable_running: RefCell<Vec<u64>>,
    /// Thread-local collector state (the cached active-snapshot list, scratch buffers).
    pub(crate) gc: RefCell<crate::gc::LocalGc>,
    /// Emptied lists of written rows, for this thread's next writing transactions. Behind a
    /// held snapshot a fold empties the lists of a thousand queued transactions at once
    /// (`engine::collect::fold_queue`); freed together, their pages went back to the system
    /// and every fold's worth of new lists faulted fresh pages in again
    /// (`regression_behind_a_held_snapshot_a_fold_freed_every_queued_write_list`).
    /// Invariant: every list here is empty, with a capacity in `1..=SPARE_ROW_LIST_CAPACITY`,
    /// and there are at most `SPARE_ROW_LISTS` of them.
    spare_row_lists: RefCell<Vec<Vec<R>>>,
    /// A persistent database's emptied redo buffer, for this thread's next writing
    /// transaction (empty; capacity at most `SPARE_REDO_CAPACITY`).
    spare_redo: RefCell<Vec<u8>>,
}

/// A redo buffer that grew beyond this (a bulk load's) is freed, not kept.
const SPARE_REDO_CAPACITY: usize = 1 << 20;

/// At most this many spare lists of written rows per thread: one fold's worth.
pub(crate) const SPARE_ROW_LISTS: usize = crate::engine::collect::QUEUE_FOLD_AT;
/// A list that grew beyond this many rows (a bulk load's) is freed, not kept for reuse.
pub(crate) const SPARE_ROW_LIST_CAPACITY: usize = 64;

impl<R> LocalSlot<R> {
    fn new(slot: Arc<Slot<R>>) -> Self {
        LocalSlot {
            slot,
            running: RefCell::new(Vec::new()),
            serializable_running: RefCell::new(Vec::new()),
            gc: RefCell::new(crate::gc::LocalGc::default()),
            spare_row_lists: RefCell::new(Vec::new()),
            spare_redo: RefCell::new(Vec::new()),
        }
    }

    /// An empty buffer for a transaction's redo: the spare one, if any.
    pub(crate) fn take_redo_buffer(&self) -> Vec<u8> {
        std::mem::take(&mut *self.spare_redo.borrow_mut())
    }

    /// Keeps an emptied redo buffer for the thread's next transaction, unless it is large.
    pub(crate) fn give_back_redo_buffer(&self, mut buffer: Vec<u8>) {
        buffer.clear();
        if buffer.capacity() <= SPARE_REDO_CAPACITY {
            *self.spare_redo.borrow_mut() = buffer;
        }
    }

    /// An empty list for a transaction's written rows: a spare one if there is any.
    pub(crate) fn take_row_list(&self) -> Vec<R> {
        self.spare_row_lists.borrow_mut().pop().unwrap_or_default()
    }

    /// Keeps `list`'s allocation for a later [`LocalSlot::take_row_list`], if it is worth
    /// keeping (allocated, not too large) and there is room; frees it otherwise.
    pub(crate) fn give_back_row_list(&self, mut list: Vec<R>) {
        list.clear();
        if !(1..=SPARE_ROW_LIST_CAPACITY).contains(&list.capacity()) {
            return;
        }
        let mut spare = self.spare_row_lists.borrow_mut();
        if spare.len() < SPARE_ROW_LISTS {
            spare.push(list);
        }
        debug_assert!(spare.len() <= SPARE_ROW_LISTS);
    }
}

impl<R> Drop for LocalSlot<R> {
    fn drop(&mut self) {
        debug_assert!(self.running.borrow().is_empty());
        debug_assert!(self.serializable_running.borrow().is_empty());
        self.slot.publish(&[]);
        self.slot
            .serializable_oldest
            .store(u64::MAX, Ordering::SeqCst);
        self.slot.collector_value.store(u64::MAX, Ordering::SeqCst);
        self.slot.in_use.store(false, Ordering::Release);
    }
}

type AnyLocal = Rc<dyn std::any::Any>;

struct LocalEntry {
    manager_id: u64,
    alive: Weak<()>,
    local: AnyLocal,
}

thread_local! {
    static LOCALS: RefCell<Vec<LocalEntry>> = const { RefCell::new(Vec::new()) };
}

impl<R: Send + 'static> LocalSlot<R> {
    fn lookup(manager: &TxnManager<R>) -> Option<Rc<LocalSlot<R>>> {
        LOCALS.with(|locals| {
            let mut locals = locals.borrow_mut();
            if let Some(entry) = locals.iter().find(|e| e.manager_id == manager.id) {
                return Rc::clone(&entry.local).downcast::<LocalSlot<R>>().ok();
            }
            // Forget handles of databases that are gone (their slots die with them).
            locals.retain(|entry| entry.alive.strong_count() > 0);
            let local = Rc::new(LocalSlot::new(manager.claim_slot()?));
            locals.push(LocalEntry {
                manager_id: manager.id,
                alive: manager.is_alive_token(),
                local: Rc::clone(&local) as AnyLocal,
            });
            Some(local)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list given back is handed out again, emptied, with its allocation; lists with no
    /// allocation or a bulk load's large one are not kept, and no more than a fold's worth.
    #[test]
    fn a_thread_reuses_the_write_lists_it_gives_back_within_bounds() {
        let local = LocalSlot::<u64>::new(Arc::new(Slot::new()));
        let mut list = Vec::with_capacity(4);
        list.extend([1, 2, 3]);
        let address = list.as_ptr();
        local.give_back_row_list(list);
        let reused = local.take_row_list();
        assert!(reused.is_empty());
        assert_eq!(reused.as_ptr(), address, "the same allocation");
        assert_eq!(local.take_row_list().capacity(), 0, "none left: a new one");

        local.give_back_row_list(Vec::new());
        local.give_back_row_list(Vec::with_capacity(SPARE_ROW_LIST_CAPACITY + 1));
        assert_eq!(local.spare_row_lists.borrow().len(), 0, "neither kept");

        for _ in 0..SPARE_ROW_LISTS + 10 {
            local.give_back_row_list(Vec::with_capacity(SPARE_ROW_LIST_CAPACITY));
        }
        assert_eq!(local.spare_row_lists.borrow().len(), SPARE_ROW_LISTS);
    }
}
