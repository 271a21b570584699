//! The collection mechanism: what the collector policy (`gc/`) decides, executed against
//! tables, indexes and chains.
//!
//! - `prune_after_write`: Steam's EPO on the chain a writer just extended, under the latch
//!   the write already holds.
//! - `after_end`: interspersed finalizing of the thread's committed transactions below the
//!   watermark, and every few milliseconds the same for idle threads' slots.
//! - Index upkeep: a secondary entry is removed once no version of its row has its key;
//!   a row no snapshot can see any more (deleted below the watermark, or inserted and
//!   rolled back) is removed from every index and marked dead, all under its latch.

use std::collections::VecDeque;

use std::time::Instant;

use crate::engine::{Engine, RowRef, Table, WrittenRow};
use crate::gc::{self, Collector, Finalizing};
use crate::key;
use crate::row::RowView;
use crate::stats::Counter;
use crate::sync::Arc;
use crate::ticks;
use crate::txn::identity_set::IdentitySet;
use crate::txn::slots::{Committed, LocalSlot, Slot};
use crate::version::{ChainEdit, GoneVersion, VersionStorage};
use crate::VersionRemoval;

/// Beyond this many waiting committed transactions (a long reader holds the watermark),
/// a slot's queue is folded into one entry per distinct row, so its memory is bounded by
/// the rows written, not by the time the reader runs.
pub(crate) const QUEUE_FOLD_AT: usize = 1024;

/// How many identities ahead of its inserts a fold prefetches their slots: enough misses in
/// flight to cover one's latency with the inserts in between, few enough to stay in the
/// processor's fill buffers.
const FOLD_PREFETCH_AHEAD: usize = 16;

/// Steam's EPO on the chain of `row`, which the caller holds exclusively.
pub(crate) fn prune_after_write<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
    table: &Table<V>,
    row: &RowRef<V>,
    chain: &mut V::Chain,
) {
    let met = chain.chain_len();
    if met < 2 {
        return; // only this transaction's own record: nothing anyone could have left behind
    }
    let started = ticks::now();
    let stats = &local.slot.stats;
    let mut local_gc = local.gc.borrow_mut();
    let local_gc = &mut *local_gc;
    if gc::active_list_is_stale::<G>(local_gc, || engine.txns.now_ns()) {
        refresh_active_list(engine, local_gc, stats);
    }
    let mut entry = Vec::new();
    let report = with_index_upkeep(table, row, chain, &mut entry, |chain| {
        let mut report = chain.prune(&local_gc.active);
        if report.blocked_by_horizon && engine.txns.clock() > local_gc.active.horizon {
            // A record committed after the list was taken is in the way: the list is too
            // old for this chain. Take a fresh one (Steam's period trades precision for
            // cost; a hot row is worth the scan) and prune again.
            refresh_active_list(engine, local_gc, stats);
            let again = chain.prune(&local_gc.active);
            report.removed += again.removed;
            report.freed_bytes += again.freed_bytes;
            report.remaining = again.remaining;
        }
        report
    });
    debug_assert!(report.remaining >= 1, "the writer's own record stays");
    stats.add(Counter::VersionsPrunedEagerly, report.removed as u64);
    stats.add(Counter::VersionBytesFreed, report.freed_bytes as u64);
    stats.record_gc_chain(met);
    stats.add(Counter::PruneTicks, ticks::now().saturating_sub(started));
}

fn refresh_active_list<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local_gc: &mut gc::LocalGc,
    stats: &crate::stats::SlotStats,
) {
    let started = ticks::now();
    let mut buffer = std::mem::take(&mut local_gc.scan_buffer);
    local_gc.active = engine.txns.active_snapshots(&mut buffer);
    local_gc.scan_buffer = buffer;
    local_gc.taken_ns = engine.txns.now_ns().max(1);
    local_gc.writes_since_age_check = 0;
    stats.add(Counter::ActiveListRefreshes, 1);
    stats.add(
        Counter::ActiveListTicks,
        ticks::now().saturating_sub(started),
    );
}

/// Queues a committed transaction on its thread's slot, folding the queue if it grew long.
/// The lists of written rows a fold empties go back to the thread for its next transactions
/// (`LocalSlot::give_back_row_list`).
pub(crate) fn enqueue_committed<R: RowIdentity>(local: &LocalSlot<R>, mut committed: Committed<R>) {
    let slot = &local.slot;
    let mut queue = slot.committed.lock();
    // Keep the queue in timestamp order. Under MVTO a transaction commits at its start id,
    // so an older one that ends later on this thread comes in below the back: finalizing
    // it at the back's timestamp instead only waits longer, which is as safe.
    if let Some(back) = queue.back() {
        committed.commit_ts = committed.commit_ts.max(back.commit_ts);
    }
    queue.push_back(committed);
    if queue.len() >= QUEUE_FOLD_AT {
        let moved = fold_queue(&mut queue, |list| local.give_back_row_list(list));
        slot.stats.add(Counter::RowsFolded, moved as u64);
    }
}

/// Puts what a background round kept of a queue back in front of what arrived meanwhile,
/// keeping the queue in timestamp order: under MVTO an arrival can be older than a kept
/// entry (a transaction commits at its start id), and is then finalized at the kept one's
/// timestamp, later, which is as safe
/// (`regression_an_older_arrival_behind_a_kept_queue_keeps_the_order`).
fn put_back<R>(queue: &mut VecDeque<Committed<R>>, mut taken: VecDeque<Committed<R>>) {
    let floor = taken.back().map_or(0, |c| c.commit_ts);
    for arrived in queue.iter_mut() {
        arrived.commit_ts = arrived.commit_ts.max(floor);
    }
    taken.append(queue);
    *queue = taken;
    debug_assert!(queue
        .iter()
        .zip(queue.iter().skip(1))
        .all(|(a, b)| a.commit_ts <= b.commit_ts));
}

/// Something with an identity to deduplicate by: the address of an `Arc`'s value (a row),
/// so that the `Arc`'s counts sit just before it (`prefetch::prefetch_arc_counts`).
pub(crate) trait RowIdentity {
    fn identity(&self) -> usize;
}

impl<V: VersionStorage> RowIdentity for WrittenRow<V> {
    fn identity(&self) -> usize {
        Arc::as_ptr(&self.row) as *const () as usize
    }
}

/// Replaces the queue by one entry holding each distinct row once, with the newest commit
/// timestamp: finalizing it later is exactly as safe (it waits for the newest) and does the
/// same unlinking, because finalizing a row truncates below the watermark whichever
/// transaction queued it.
///
/// The folded entry stays at the front (it has the queue's oldest rows, and it is freed only
/// once the watermark passes its newest timestamp) and keeps the identities of its rows, so
/// the next fold only adds the entries queued since: the work is linear in the commits
/// (`regression_queue_folding_behind_a_held_snapshot_is_not_quadratic`). Each list of rows
/// it empties goes to `emptied` (to be reused, or dropped). Returns the number of row
/// references moved.
fn fold_queue<R: RowIdentity>(
    queue: &mut VecDeque<Committed<R>>,
    mut emptied: impl FnMut(Vec<R>),
) -> usize {
    let commit_ts = queue.back().map_or(0, |c| c.commit_ts);
    let mut folded = match queue.pop_front() {
        Some(front) if !front.folded_identities.is_empty() => front,
        Some(front) => {
            let oldest = front.commit_ts;
            queue.push_front(front);
            let mut folded = Committed::new(commit_ts, Vec::new());
            folded.folded_since = oldest;
            folded
        }
        None => return 0,
    };
    folded.commit_ts = commit_ts;
    // A later folded entry is possible where a background collector put a taken-out queue
    // back in front of one its owner folded meanwhile ('Hana'); its rows are distinct like
    // any entry's, so it merges the same way.
    debug_assert!(
        queue.iter().all(|c| c.commit_ts <= commit_ts),
        "in commit order"
    );
    let moved: usize = queue.iter().map(|c| c.rows.len()).sum();
    // Each insert is a cold probe of a large set, and a row already in it is dropped: its
    // reference count, written thousands of rows ago and perhaps by the other thread since,
    // is cold too. Ask for both a few rows ahead, so that the misses overlap (the set's
    // alone left the counts' misses in a row: 85% of the fold's time after it). Reserving
    // first keeps the prefetched slots where they are.
    folded.folded_identities.reserve(moved);
    let prefetch = |set: &IdentitySet, id: usize| {
        set.prefetch(id);
        crate::prefetch::prefetch_arc_counts(id);
    };
    // The rows go straight from the queue into the folded entry through a window of the next
    // few: gathering them first into a vector as long as the queue took a large block that
    // the allocator faulted in afresh on every fold
    // (`regression_folding_the_queue_behind_a_held_snapshot_allocates_nothing_large`).
    let mut window: VecDeque<R> = VecDeque::with_capacity(FOLD_PREFETCH_AHEAD + 1);
    let admit = |row: R, folded: &mut Committed<R>| {
        if folded.folded_identities.insert(row.identity()) {
            folded.rows.push(row);
        }
    };
    for mut arrived in queue.drain(..) {
        for row in arrived.rows.drain(..) {
            prefetch(&folded.folded_identities, row.identity());
            window.push_back(row);
            if window.len() > FOLD_PREFETCH_AHEAD {
                let due = window.pop_front().expect("the window is not empty");
                admit(due, &mut folded);
            }
        }
        emptied(arrived.rows);
    }
    for due in window {
        admit(due, &mut folded);
    }
    debug_assert_eq!(folded.rows.len(), folded.folded_identities.len());
    queue.push_back(folded);
    moved
}

/// After a transaction ends on this thread: what the collector's policy has the thread do
/// between transactions.
pub(crate) fn after_end<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
    committed: bool,
    start_ts: u64,
) {
    match G::FINALIZING {
        Finalizing::Interspersed => finalize_interspersed(engine, local, committed),
        Finalizing::BackgroundHandsToWorkers => finalize_assigned(engine, local),
        Finalizing::Background | Finalizing::Never | Finalizing::TupleLevel => {}
    }
    if G::BLOCK_LEVEL {
        collect_blocks(engine, local, Some(start_ts));
    }
}

/// Block-level collection (tb-collect): the storage's Algorithms 1 and 2 after the
/// transaction that started at `ended` ended on this thread, or, with `None`, everything
/// safe to collect (`collect_garbage`). The time of a collection that did something is
/// counted in the thread's collection time.
fn collect_blocks<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
    ended: Option<u64>,
) {
    let started = Instant::now();
    let active = || {
        let mut buffer = Vec::new();
        engine.txns.active_snapshots(&mut buffer)
    };
    let context = crate::version::BlockGcContext {
        ended,
        everything: ended.is_none(),
        active: &active,
        threads: engine.txns.slots().count(),
        rows: &EngineRows(engine),
    };
    if V::collect_blocks(&engine.storage, &context) {
        local
            .slot
            .stats
            .add(Counter::GcNanos, started.elapsed().as_nanos() as u64);
    }
}

/// After a storage's recovery put its rows in the indexes: the storage finishes the
/// collection a crash interrupted (TB Algorithm 3), whatever the collector (a region
/// collected under tb-collect may be reopened under 'none'), before the database opens.
pub(crate) fn finish_recovery<V: VersionStorage, G: Collector>(engine: &Engine<V, G>) {
    let active = || {
        let mut buffer = Vec::new();
        engine.txns.active_snapshots(&mut buffer)
    };
    let context = crate::version::BlockGcContext {
        ended: None,
        everything: false,
        active: &active,
        threads: engine.txns.slots().count().max(1),
        rows: &EngineRows(engine),
    };
    V::finish_recovery(&engine.storage, &context);
}

/// The engine's primary indexes, for a storage that moves rows' newest versions.
struct EngineRows<'a, V: VersionStorage, G: Collector>(&'a Engine<V, G>);

impl<V: VersionStorage, G: Collector> crate::version::RowFinder<V::Row> for EngineRows<'_, V, G> {
    fn arity(&self, table: u32) -> Option<usize> {
        self.0.table_by_index(table).map(|t| t.schema.arity())
    }

    fn find(&self, table: u32, values: &RowView<'_>) -> Option<Arc<V::Row>> {
        let table = self.0.table_by_index(table)?;
        let mut key_bytes = Vec::new();
        key::encode_row_key(&mut key_bytes, values, &table.schema.primary_key);
        table.primary.with(&key_bytes, Arc::clone)
    }
}

/// Interspersed collection: after a commit, finalize the thread's own queue if the
/// collector says so (with the bound it gives), and now and then help idle threads.
fn finalize_interspersed<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
    committed: bool,
) {
    let help = {
        let mut local_gc = local.gc.borrow_mut();
        gc::due_to_help::<G>(&mut local_gc, || engine.txns.now_ns())
    };
    if !committed && !help {
        return;
    }
    let mut bound = None;
    if committed {
        bound = engine.gc.after_commit(&engine.txns, local);
        if let Some(bound) = bound {
            let mut queue = local.slot.committed.lock();
            finalize_queue(engine, &mut queue, bound, &local.slot.stats);
        }
        if G::COMMIT_PRUNING {
            prune_recycle_queue(engine, local);
        }
    }
    if help {
        let bound = bound.unwrap_or_else(|| engine.gc.reclaim_bound(&engine.txns));
        for slot in engine.txns.slots() {
            if let Some(mut queue) = slot.committed.try_lock() {
                finalize_queue(engine, &mut queue, bound, &local.slot.stats);
            }
        }
    }
}

/// Finalizes what a background collector handed to this thread ('Hekaton'), each with the
/// bound it was found below.
fn finalize_assigned<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
) {
    let slot = &local.slot;
    let work: Vec<(u64, Committed<WrittenRow<V>>)> = {
        let mut assigned = slot.assigned.lock();
        if assigned.is_empty() {
            return;
        }
        assigned.drain(..).collect()
    };
    let started = Instant::now();
    let mut entry = Vec::new();
    for (bound, committed) in work {
        finalize_committed(engine, committed, bound, &slot.stats, &mut entry);
    }
    slot.stats
        .add(Counter::GcNanos, started.elapsed().as_nanos() as u64);
}

/// Finalizes every committed transaction of every slot that is below the exact watermark
/// now ([`crate::Database::collect_garbage`]), including work handed out and not yet done.
/// Nothing under the 'none' collector.
pub(crate) fn collect_all<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
) {
    if G::FINALIZING == Finalizing::Never {
        return;
    }
    // Not while a background round holds transactions it took out of the queues.
    let _round = engine.collection_round.lock();
    let watermark = engine.txns.watermark();
    if G::FINALIZING == Finalizing::TupleLevel {
        crate::engine::vacuum::vacuum_everything(engine, watermark, &local.slot.stats);
        return;
    }
    let mut entry = Vec::new();
    for slot in engine.txns.slots() {
        let mut queue = slot.committed.lock();
        finalize_queue(engine, &mut queue, watermark, &local.slot.stats);
        drop(queue);
        let assigned: Vec<_> = slot.assigned.lock().drain(..).collect();
        for (bound, committed) in assigned {
            finalize_committed(engine, committed, bound, &local.slot.stats, &mut entry);
        }
    }
    if G::BLOCK_LEVEL {
        // After finalizing, which unlinks the versions a block's collection waits on.
        drop(_round);
        collect_blocks(engine, local, None);
    }
}

/// The janitor's round (interspersed collectors): finalizes, for slots whose thread ended
/// no transaction since the previous round, what is below the collector's idle bound.
/// Busy slots are left to their threads (no contention on their queue).
pub(crate) fn collect_idle<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut bound = None;
    let mut serializable_horizon = None;
    for slot in engine.txns.slots() {
        let ends = slot.ends.load(Relaxed);
        if slot.ends_seen_by_janitor.swap(ends, Relaxed) != ends {
            continue; // busy since the last round: it collects for itself
        }
        if !slot.validation_log.lock().is_empty() {
            let horizon =
                *serializable_horizon.get_or_insert_with(|| engine.txns.serializable_horizon());
            trim_validation_log(slot, horizon, &local.slot.stats);
        }
        if G::FINALIZING != Finalizing::Interspersed {
            continue;
        }
        if let Some(mut queue) = slot.committed.try_lock() {
            if queue.is_empty() {
                continue;
            }
            let bound = *bound.get_or_insert_with(|| engine.gc.idle_bound(&engine.txns));
            finalize_queue(engine, &mut queue, bound, &local.slot.stats);
        }
    }
}

/// One round of a background collector's thread (every period): 'Hana' and 'txn' collect
/// ('txn' after advancing its epoch), 'Hekaton' hands out, 'vac' and 'coop' vacuum.
/// Counted in the background thread's own slot.
pub(crate) fn background_round<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
) {
    let started = Instant::now();
    let _round = engine.collection_round.lock();
    let round = engine
        .background_rounds
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    if engine.gc.background_tick(&engine.txns) {
        local.slot.stats.add(Counter::EpochAdvances, 1);
    }
    match G::FINALIZING {
        Finalizing::Background => collect_in_background(engine, local),
        Finalizing::BackgroundHandsToWorkers => hand_out_due(engine, local),
        Finalizing::TupleLevel => crate::engine::vacuum::vacuum_round(engine, local, round),
        Finalizing::Interspersed | Finalizing::Never => return,
    }
    // These collectors run no janitor: trim the commit records idle threads left too.
    let stats = &local.slot.stats;
    let mut serializable_horizon = None;
    for slot in engine.txns.slots() {
        if !slot.validation_log.lock().is_empty() {
            let horizon =
                *serializable_horizon.get_or_insert_with(|| engine.txns.serializable_horizon());
            trim_validation_log(slot, horizon, stats);
        }
    }
    stats.add(Counter::BackgroundRounds, 1);
    stats.add(
        Counter::BackgroundNanos,
        started.elapsed().as_nanos() as u64,
    );
}

/// 'Hana''s round: finalize every thread's committed transactions below the oldest
/// snapshot, then prune, exactly, the chain of every row written by a transaction
/// committed after it (interval GC, Steam §4.3.2).
///
/// A thread's queue is taken out whole (its owner keeps committing into an empty one,
/// never waiting for the round) and what stays is put back in front of what arrived
/// meanwhile, so the queue stays in commit order.
fn collect_in_background<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
) {
    let stats = &local.slot.stats;
    let (bound, active) = engine.gc.active_snapshots(&engine.txns);
    debug_assert!(bound <= active.horizon);
    let mut entry = Vec::new();
    for slot in engine.txns.slots() {
        let mut taken = std::mem::take(&mut *slot.committed.lock());
        if taken.is_empty() {
            continue;
        }
        finalize_queue(engine, &mut taken, bound, stats);
        if G::BACKGROUND_PRUNING && !taken.is_empty() {
            let started = ticks::now();
            let mut pruned = 0;
            let mut freed = 0;
            for committed in &taken {
                debug_assert!(committed.commit_ts >= bound, "finalizing took those below");
                for written in &committed.rows {
                    if let Some((removed, bytes, _)) =
                        prune_exactly(engine, written, &active, 2, stats, &mut entry)
                    {
                        pruned += removed;
                        freed += bytes;
                    }
                }
            }
            stats.add(Counter::VersionsPrunedInBackground, pruned as u64);
            stats.add(Counter::VersionBytesFreed, freed as u64);
            stats.add(Counter::PruneTicks, ticks::now().saturating_sub(started));
        }
        let mut queue = slot.committed.lock();
        put_back(&mut queue, taken);
        if queue.len() >= QUEUE_FOLD_AT {
            // This thread is not the queue's owner: the emptied lists are freed.
            let moved = fold_queue(&mut queue, drop);
            // Counted by this thread: a slot's counters are written by one thread only.
            stats.add(Counter::RowsFolded, moved as u64);
        }
    }
}

/// Prunes `written`'s chain exactly against `active` if it holds at least `at_least`
/// versions behind the newest (and the row is not buried), keeping its secondary indexes
/// exact and recording the chain met. Returns the versions and bytes removed and the
/// versions left behind the newest, or `None` if it did not prune.
fn prune_exactly<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    written: &WrittenRow<V>,
    active: &crate::version::ActiveSnapshots,
    at_least: usize,
    stats: &crate::stats::SlotStats,
    entry: &mut Vec<u8>,
) -> Option<(usize, usize, usize)> {
    let table = engine
        .table_by_index(written.table)
        .expect("a written table exists");
    V::edit(&written.row, |chain| {
        if chain.is_dead() || chain.chain_len() < at_least {
            return None;
        }
        stats.record_gc_chain(chain.chain_len());
        let report = with_index_upkeep(table, &written.row, chain, entry, |chain| {
            chain.prune(active)
        });
        Some((report.removed, report.freed_bytes, chain.chain_len()))
    })
}

/// 'tvcp' after a commit (`gc/tvcp.rs`): the rows the committed transaction wrote join the
/// thread's recycle queue, and every row in it is pruned exactly against a fresh list of
/// the active snapshots; a row left with no version behind its newest (or buried) leaves.
fn prune_recycle_queue<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
) {
    let started = ticks::now();
    let stats = &local.slot.stats;
    let mut recycle = local.slot.recycle.lock();
    let (rows, joined_up_to) = &mut *recycle;
    {
        // The newest entry of the queue is the transaction that just committed, unless it
        // queued nothing (then it left nothing behind a newest version either).
        let queue = local.slot.committed.lock();
        if let Some(newest) = queue.back() {
            if newest.commit_ts > *joined_up_to {
                *joined_up_to = newest.commit_ts;
                let queued: std::collections::HashSet<usize> =
                    rows.iter().map(RowIdentity::identity).collect();
                for written in &newest.rows {
                    if !queued.contains(&written.identity()) {
                        rows.push(WrittenRow {
                            table: written.table,
                            row: Arc::clone(&written.row),
                        });
                    }
                }
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    let (_, active) = engine.gc.active_snapshots(&engine.txns);
    let mut entry = Vec::new();
    let (mut pruned, mut freed) = (0, 0);
    rows.retain(
        |written| match prune_exactly(engine, written, &active, 1, stats, &mut entry) {
            Some((removed, bytes, left)) => {
                pruned += removed;
                freed += bytes;
                left > 0
            }
            None => false,
        },
    );
    stats.add(Counter::VersionsPrunedEagerly, pruned as u64);
    stats.add(Counter::VersionBytesFreed, freed as u64);
    stats.add(Counter::PruneTicks, ticks::now().saturating_sub(started));
}

/// 'Hekaton''s round: refresh the global minimum, take every thread's committed
/// transactions below it, and hand them to the worker threads: to the owner if it is
/// busy, else to a busy thread, else (every thread idle) finalize them here, as the work
/// queues of idle threads too.
fn hand_out_due<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    local: &LocalSlot<WrittenRow<V>>,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let stats = &local.slot.stats;
    let bound = engine.gc.refresh(&engine.txns);
    // Every slot, this thread's own too: it may have been another thread's, which exited
    // with committed transactions queued (`regression_hekaton_collects_the_queue_its_
    // background_thread_inherits`). It never ends transactions, so it counts as idle.
    let slots: Vec<_> = engine.txns.slots().collect();
    let busy: Vec<bool> = slots
        .iter()
        .map(|slot| {
            let ends = slot.ends.load(Relaxed);
            let changed = slot.ends_seen_by_janitor.swap(ends, Relaxed) != ends;
            changed && !std::sync::Arc::ptr_eq(slot, &local.slot)
        })
        .collect();
    let busy_slots: Vec<usize> = (0..slots.len()).filter(|&i| busy[i]).collect();
    let mut entry = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        let started = Instant::now();
        let mut due = Vec::new();
        {
            let mut queue = slot.committed.lock();
            while queue.front().is_some_and(|c| c.commit_ts < bound) {
                due.push(queue.pop_front().expect("front exists"));
            }
            if let Some(front) = queue.front_mut() {
                // Not handed out: it stays queued (see the function).
                finalize_folded_in_part(engine, front, bound, stats, &mut entry);
            }
        }
        let target = if busy[i] {
            Some(i)
        } else if !busy_slots.is_empty() {
            Some(busy_slots[i % busy_slots.len()])
        } else {
            None
        };
        match target {
            Some(target) if !due.is_empty() => {
                stats.add(Counter::TransactionsHandedOut, due.len() as u64);
                let mut assigned = slots[target].assigned.lock();
                assigned.extend(due.into_iter().map(|committed| (bound, committed)));
            }
            _ => {
                // Every worker is idle: nobody would come for it.
                for committed in due {
                    finalize_committed(engine, committed, bound, stats, &mut entry);
                }
            }
        }
        if !busy[i] {
            // An idle thread does not come back for what it was handed earlier either.
            let left: Vec<_> = slot.assigned.lock().drain(..).collect();
            for (bound, committed) in left {
                finalize_committed(engine, committed, bound, stats, &mut entry);
            }
        }
        stats.add(Counter::GcNanos, started.elapsed().as_nanos() as u64);
    }
}

/// Drops the commit records of `slot` that no serializable transaction needs any more:
/// drawn below `horizon` (the serializable horizon) and decided. The log is in commit
/// order, so trimming stops at the first record that must stay.
/// Counts the dropped records in `stats` (the calling thread's).
pub(crate) fn trim_validation_log<R>(
    slot: &Slot<R>,
    horizon: u64,
    stats: &crate::stats::SlotStats,
) {
    let mut log = slot.validation_log.lock();
    let mut dropped = 0;
    while let Some(front) = log.front() {
        match front.commit_ts_if_drawn() {
            Some(ts) if ts < horizon && front.is_decided() => {
                log.pop_front();
                dropped += 1;
            }
            _ => break,
        }
    }
    stats.add(Counter::CommitRecordsDropped, dropped);
}

fn finalize_queue<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    queue: &mut VecDeque<Committed<WrittenRow<V>>>,
    bound: u64,
    stats: &crate::stats::SlotStats,
) {
    // Nothing to do unless the front entry, or a folded front entry's oldest part, is
    // below the bound.
    if queue.front().is_none_or(|c| c.folded_since >= bound) {
        return;
    }
    let started = Instant::now();
    let mut entry = Vec::new();
    while queue.front().is_some_and(|c| c.commit_ts < bound) {
        let committed = queue.pop_front().expect("front exists");
        finalize_committed(engine, committed, bound, stats, &mut entry);
    }
    if let Some(front) = queue.front_mut() {
        finalize_folded_in_part(engine, front, bound, stats, &mut entry);
    }
    stats.add(Counter::GcNanos, started.elapsed().as_nanos() as u64);
}

/// A folded entry's timestamp is its newest transaction's, and each fold raises it: a
/// thread that folds faster than the reclaim bound moves (more than 1,024 commits per
/// round of a background collector or per epoch) would keep it above the bound for ever,
/// and everything queued behind it
/// (`regression_a_queue_folded_faster_than_the_bound_moves_is_still_finalized`). So once
/// the bound passes the oldest transaction it may still hold versions of, the entry is
/// finalized in part: each row truncated at the bound (safe for any row: the bound is a
/// reclaim bound) and buried if unreachable; rows left with nothing to unlink or bury leave
/// the entry (a later write queues them again).
fn finalize_folded_in_part<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    front: &mut Committed<WrittenRow<V>>,
    bound: u64,
    stats: &crate::stats::SlotStats,
    entry: &mut Vec<u8>,
) {
    if front.folded_identities.is_empty() || front.folded_since >= bound {
        return;
    }
    debug_assert!(
        front.commit_ts >= bound,
        "whole entries below the bound went first"
    );
    let rows = std::mem::take(&mut front.rows);
    for written in rows {
        let keep = reclaim_written(engine, &written, bound, stats, entry)
            .is_some_and(|reclaimed| !reclaimed.buried && reclaimed.holds);
        if keep {
            front.rows.push(written);
        } else {
            front.folded_identities.remove(written.identity());
        }
    }
    front.folded_since = bound;
    debug_assert_eq!(front.rows.len(), front.folded_identities.len());
}

/// Reclaims one row a transaction wrote at `bound` ([`reclaim_row`], under the row's
/// exclusive latch); `None` if the row is dead already (buried: it holds nothing, and no
/// writer can add to it).
fn reclaim_written<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    written: &WrittenRow<V>,
    bound: u64,
    stats: &crate::stats::SlotStats,
    entry: &mut Vec<u8>,
) -> Option<Reclaimed> {
    let table = engine
        .table_by_index(written.table)
        .expect("a written table exists");
    V::edit(&written.row, |chain| {
        if chain.is_dead() {
            debug_assert_eq!(chain.chain_len(), 0, "a buried row holds no versions");
            return None;
        }
        Some(reclaim_row(
            engine.version_removal,
            table,
            &written.row,
            chain,
            bound,
            stats,
            entry,
        ))
    })
}

/// Finalizes one committed transaction below `bound` (a reclaim bound: no running or
/// future snapshot is older): unlinks what no snapshot can read in each row it wrote and
/// buries rows no snapshot can see.
fn finalize_committed<V: VersionStorage, G: Collector>(
    engine: &Engine<V, G>,
    committed: Committed<WrittenRow<V>>,
    bound: u64,
    stats: &crate::stats::SlotStats,
    entry: &mut Vec<u8>,
) {
    debug_assert!(committed.commit_ts < bound);
    for written in committed.rows {
        reclaim_written(engine, &written, bound, stats, entry);
    }
}

/// What [`reclaim_row`] left of a row.
pub(crate) struct Reclaimed {
    /// The row was removed from the indexes (no snapshot can see it any more).
    pub(crate) buried: bool,
    /// It still holds something for a later round: version records, or no visible state
    /// while not buried yet.
    pub(crate) holds: bool,
}

/// The one way every collector reclaims a row, under its exclusive latch (`chain`), at a
/// reclaim bound: unlinks what no snapshot at or after `bound` applies (as `removal` says),
/// drops the secondary entries only those versions had, and buries the row if no snapshot
/// can see it. Counts what it freed in `stats`.
pub(crate) fn reclaim_row<V: VersionStorage>(
    removal: VersionRemoval,
    table: &Table<V>,
    row: &RowRef<V>,
    chain: &mut V::Chain,
    bound: u64,
    stats: &crate::stats::SlotStats,
    entry: &mut Vec<u8>,
) -> Reclaimed {
    let (removed, bytes) = with_index_upkeep(table, row, chain, entry, |chain| {
        remove_below(removal, chain, bound, stats)
    });
    stats.add(Counter::VersionsReclaimed, removed as u64);
    stats.add(Counter::VersionBytesFreed, bytes as u64);
    if bury_if_unreachable(table, row, chain, entry, || bound) {
        stats.add(Counter::RowsReclaimed, 1);
        return Reclaimed {
            buried: true,
            holds: false,
        };
    }
    Reclaimed {
        buried: false,
        holds: chain.chain_len() > 0 || !chain.values().1,
    }
}

/// Unlinks from `chain` every version no snapshot at or after `bound` applies, the way
/// `removal` says (`crate::VersionRemoval`), recording the chain lengths met. Returns the
/// records and bytes freed.
pub(crate) fn remove_below<C: ChainEdit + ?Sized>(
    removal: VersionRemoval,
    chain: &mut C,
    bound: u64,
    stats: &crate::stats::SlotStats,
) -> (usize, usize) {
    match removal {
        VersionRemoval::CutBelowBound => {
            stats.record_gc_chain(chain.chain_len());
            chain.truncate(bound)
        }
        VersionRemoval::OneVersionAtATime => {
            let (mut removed, mut bytes) = (0, 0);
            loop {
                let (walked, freed) = chain.unlink_oldest(bound);
                stats.record_gc_chain(walked);
                let Some(freed) = freed else { break };
                removed += 1;
                bytes += freed;
            }
            (removed, bytes)
        }
    }
}

/// Runs `op` (which unlinks versions) and then removes the secondary entries only the
/// unlinked versions had. Cheap under logical pointers when the chain holds no indexed
/// column: then every version has the newest state's index keys. Under physical pointers
/// every version has entries of its own.
fn with_index_upkeep<V: VersionStorage, T>(
    table: &Table<V>,
    row: &RowRef<V>,
    chain: &mut V::Chain,
    entry: &mut Vec<u8>,
    op: impl FnOnce(&mut V::Chain) -> T,
) -> T {
    let secondary = table.schema.secondary_mask;
    if secondary.is_empty()
        || (!table.physical_pointers && chain.chain_mask().intersection(secondary).is_empty())
    {
        return op(chain);
    }
    let before = version_entries(table, chain);
    let result = op(chain);
    let after = version_entries(table, chain);
    for (index, bytes) in before {
        if !needs(&after, index, &bytes) {
            table.secondary[index].remove_if(&bytes, |target| Arc::ptr_eq(&target.row, row));
        }
    }
    entry.clear();
    result
}

/// Every (index, entry) pair some version of the row needs, sorted and without repeats
/// (for [`needs`]: a row's versions times its indexes can be many pairs, and a pairwise
/// check of them was a quarter of the workers' time under physical pointers).
fn version_entries<V: VersionStorage>(table: &Table<V>, chain: &V::Chain) -> Vec<(usize, Vec<u8>)> {
    let mut entries = Vec::new();
    let mut add = |values: RowView<'_>, exact: Option<&V::Exact>| {
        for index in 0..table.schema.indexes.len() {
            let mut entry = Vec::new();
            table.encode_entry(&mut entry, &values, index, exact.map(V::exact_tag));
            entries.push((index, entry));
        }
    };
    if table.physical_pointers {
        V::for_each_exact(chain, &mut |values, exact| add(values, Some(exact)));
    } else {
        chain.for_each_version(&mut |values| add(values, None));
    }
    entries.sort_unstable();
    entries.dedup();
    entries
}

/// Whether `entries` (from [`version_entries`]) has `entry` in secondary index `index`.
fn needs(entries: &[(usize, Vec<u8>)], index: usize, entry: &[u8]) -> bool {
    entries
        .binary_search_by(|(i, e)| (*i, e.as_slice()).cmp(&(index, entry)))
        .is_ok()
}

/// After a transaction's own version left the row (overwritten or rolled back): removes
/// the entries of `gone` that no remaining version needs.
pub(crate) fn drop_unused_entries<V: VersionStorage>(
    table: &Table<V>,
    row: &RowRef<V>,
    chain: &V::Chain,
    gone: &GoneVersion,
    entry: &mut Vec<u8>,
) {
    if table.schema.indexes.is_empty() {
        return;
    }
    let remaining = version_entries(table, chain);
    for index in 0..table.schema.indexes.len() {
        let tag = table.physical_pointers.then_some(gone.tag);
        table.encode_entry(entry, &gone.values, index, tag);
        if !needs(&remaining, index, entry) {
            table.secondary[index].remove_if(entry, |target| Arc::ptr_eq(&target.row, row));
        }
    }
}

/// If no snapshot can see the row any more and no running transaction can conflict with
/// its last write (`bound`, asked only then, is at most every running snapshot), removes it
/// from every index and marks it dead (a writer that still holds it looks its key up
/// again). Returns whether it did.
pub(crate) fn bury_if_unreachable<V: VersionStorage>(
    table: &Table<V>,
    row: &RowRef<V>,
    chain: &mut V::Chain,
    entry: &mut Vec<u8>,
    bound: impl FnOnce() -> u64,
) -> bool {
    if chain.is_dead() || !chain.is_unreachable(u64::MAX) || !chain.is_unreachable(bound()) {
        return false;
    }
    let values = chain.values().0;
    key::encode_row_key(entry, &values, &table.schema.primary_key);
    let removed = table.primary.remove_if(entry, |r| Arc::ptr_eq(r, row));
    debug_assert!(removed, "a live row is in the primary index");
    // Under physical pointers only versions in which the row exists have entries, and
    // every one of them was unlinked (with its entries) before the row became unreachable.
    if !table.physical_pointers {
        for index in 0..table.schema.indexes.len() {
            table.encode_entry(entry, &values, index, None);
            table.secondary[index].remove_if(entry, |target| Arc::ptr_eq(&target.row, row));
        }
    }
    chain.mark_dead();
    true
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A background round took out a queue ending at 20 and keeps it; meanwhile the owner
    /// committed an MVTO transaction with the older id 15. Put back, the queue stays in
    /// timestamp order (finalizing and folding rely on it).
    #[test]
    fn regression_an_older_arrival_behind_a_kept_queue_keeps_the_order() {
        let mut queue: VecDeque<Committed<u32>> = [Committed::new(15, vec![3])].into();
        let taken: VecDeque<Committed<u32>> =
            [Committed::new(10, vec![1]), Committed::new(20, vec![2])].into();
        put_back(&mut queue, taken);
        let order: Vec<(u64, Vec<u32>)> = queue
            .iter()
            .map(|c| (c.commit_ts, c.rows.clone()))
            .collect();
        assert_eq!(order, [(10, vec![1]), (20, vec![2]), (20, vec![3])]);
    }

    /// A row for the fold's tests: its identity is its number.
    #[derive(Debug)]
    struct Numbered(usize);

    impl RowIdentity for Numbered {
        fn identity(&self) -> usize {
            self.0
        }
    }

    fn plain(commit_ts: u64, rows: &[usize]) -> Committed<Numbered> {
        let mut list = Vec::with_capacity(4);
        list.extend(rows.iter().map(|&n| Numbered(n)));
        Committed::new(commit_ts, list)
    }

    /// A fold keeps each row once (across plain entries and a second folded entry, as a
    /// 'Hana' round's put-back leaves one), counts the references it moved, and hands every
    /// entry's list over emptied, with its allocation.
    #[test]
    fn a_fold_keeps_each_row_once_and_hands_back_every_emptied_list() {
        let mut first: VecDeque<Committed<Numbered>> = [plain(1, &[1, 2])].into();
        first.extend((0..2).map(|_| plain(1, &[])));
        assert_eq!(fold_queue(&mut first, drop), 2);
        let mut folded_front = first.pop_back().expect("the folded entry");
        assert_eq!(folded_front.folded_identities.len(), 2);
        folded_front.commit_ts = 2;
        let mut later: VecDeque<Committed<Numbered>> = [plain(3, &[3, 4]), plain(3, &[])].into();
        assert_eq!(fold_queue(&mut later, drop), 2);
        let folded_later = later.pop_back().expect("the later folded entry");

        let mut queue: VecDeque<Committed<Numbered>> = [
            folded_front,
            plain(3, &[2, 3]),
            folded_later,
            plain(4, &[5]),
            plain(5, &[1, 5, 6]),
        ]
        .into();
        let arriving: Vec<usize> = queue
            .iter()
            .skip(1)
            .map(|c| c.rows.as_ptr() as usize)
            .collect();
        let mut emptied = Vec::new();
        let moved = fold_queue(&mut queue, |list| emptied.push(list));
        assert_eq!(
            moved,
            2 + 2 + 1 + 3,
            "the references behind the folded front"
        );
        assert_eq!(queue.len(), 1);
        let folded = &queue[0];
        let mut rows: Vec<usize> = folded.rows.iter().map(|r| r.0).collect();
        rows.sort_unstable();
        assert_eq!(rows, [1, 2, 3, 4, 5, 6]);
        assert_eq!(folded.rows.len(), folded.folded_identities.len());
        assert_eq!((folded.commit_ts, folded.folded_since), (5, 1));
        assert!(emptied.iter().all(Vec::is_empty));
        let handed: Vec<usize> = emptied.iter().map(|l| l.as_ptr() as usize).collect();
        assert_eq!(handed, arriving, "each entry's own list, in queue order");
    }
}
