//! 'txn': transaction-level garbage collection with epochs (Wu et al. §5.2; the
//! epoch-based memory management of Silo and Peloton that their §5 describes).
//!
//! - **Epochs.** There is always one active epoch and a FIFO queue of prior ones. Each
//!   epoch has a start (the clock when it became active) and a *membership counter*: the
//!   number of transactions registered in it and not finished.
//! - **Registering** (at begin): a transaction increments the active epoch's counter, then
//!   re-reads the active epoch and, if it moved meanwhile, leaves and tries the new one;
//!   only then does it take its start timestamp. At end it decrements the counter of the
//!   epoch it registered in, which may no longer be the active one.
//! - **Advancing.** The GC thread, every period (default 40 ms: the epoch length), makes a
//!   new epoch active. The queue is a ring of [`RING`] epochs; if the oldest epoch still
//!   holding transactions is a whole ring behind (a very long transaction), the active
//!   epoch simply lasts longer.
//! - **Reclaiming.** Then the thread walks the prior epochs from the oldest: while an
//!   epoch's counter is zero, it and everything before it are over. The start of the first
//!   epoch that still has members (or of the active one) is the reclaim bound, and every
//!   transaction committed below it is finalized by the thread: its versions unlinked from
//!   their chains as a batch, its rows buried if no snapshot sees them. The write sets are
//!   the thread queues of committed transactions every collector keeps.
//!
//! Reclaim bound and its proof: a transaction in epoch `e` confirmed `e` active after its
//! increment, so after `e`'s start was stored; its start timestamp, read later, is at
//! least `start(e)`. An epoch `o` below the active one whose counter reads zero has no
//! member and gets none: a thread that increments its counter later re-reads the active
//! epoch, finds it moved, and leaves without taking a start (the increment and the
//! re-read against the advance and the counter read are a Dekker pair, all `SeqCst`).
//! So every running transaction is in an epoch at or after the first occupied one, or
//! begins later in the active one, and starts at or after the bound. Checked in every
//! interleaving by `gc::loom_tests`.

use std::time::Duration;

use super::{Collector, Finalizing, GcConfig};
use crate::sync::AtomicU64;
use crate::txn::slots::{LocalSlot, TxnManager};
use crate::version::ActiveSnapshots;
use std::sync::atomic::Ordering::SeqCst;

/// Epochs the ring holds: the active one and the prior ones not yet over.
pub(crate) const RING: u64 = 1024;

/// One epoch's cell in the ring.
struct EpochCell {
    /// The epoch the cell holds now (cells are reused around the ring).
    epoch: AtomicU64,
    /// The clock when the epoch became active.
    start: AtomicU64,
    /// Transactions registered in it and not finished (transiently also a straggler that
    /// read an older epoch of this cell and is about to leave).
    members: AtomicU64,
}

/// Epochs with membership counters (mechanism; the collector below is the policy).
pub(crate) struct EpochCounters {
    /// The active epoch's number; epoch `e` lives in cell `e % RING`.
    active: AtomicU64,
    /// The oldest epoch that may still have members; those before it are over. Raised only
    /// by [`Self::reclaim_bound`].
    oldest: AtomicU64,
    /// [`RING`] cells (fewer in the loom model, to wrap around).
    cells: Box<[EpochCell]>,
}

impl EpochCounters {
    pub(crate) fn new() -> Self {
        Self::with_ring(RING)
    }

    /// With a ring of `ring` epochs (at least 2: the active one and one prior).
    pub(crate) fn with_ring(ring: u64) -> Self {
        assert!(ring >= 2, "a ring holds the active epoch and a prior one");
        EpochCounters {
            active: AtomicU64::new(0),
            oldest: AtomicU64::new(0),
            cells: (0..ring)
                .map(|cell| EpochCell {
                    epoch: AtomicU64::new(cell),
                    start: AtomicU64::new(0),
                    members: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    fn cell(&self, epoch: u64) -> &EpochCell {
        &self.cells[(epoch % self.cells.len() as u64) as usize]
    }

    /// Registers a transaction in the active epoch and returns it; the caller takes its
    /// start timestamp after.
    pub(crate) fn enter(&self) -> u64 {
        loop {
            let epoch = self.active.load(SeqCst);
            self.cell(epoch).members.fetch_add(1, SeqCst);
            crate::sync::fence_seq_cst(); // the increment before the re-read (Dekker)
            if self.active.load(SeqCst) == epoch {
                return epoch;
            }
            // An advance (and a reclaim scan) may have missed us: leave and retry.
            self.cell(epoch).members.fetch_sub(1, SeqCst);
        }
    }

    /// The transaction registered in `epoch` finished.
    pub(crate) fn leave(&self, epoch: u64) {
        let before = self.cell(epoch).members.fetch_sub(1, SeqCst);
        debug_assert!(before > 0, "a member leaves epoch {epoch} it never entered");
    }

    /// Makes a new epoch active, started at `clock` (read just now). Returns whether it
    /// did (not if the ring is full behind a long transaction). One thread at a time (the
    /// GC thread, under the collection round).
    pub(crate) fn advance(&self, clock: u64) -> bool {
        let next = self.active.load(SeqCst) + 1;
        if next - self.oldest.load(SeqCst) >= self.cells.len() as u64 {
            return false;
        }
        let cell = self.cell(next);
        debug_assert!(cell.start.load(SeqCst) <= clock);
        // The tag first: a reader that sees the new start sees the new tag too.
        cell.epoch.store(next, SeqCst);
        cell.start.store(clock, SeqCst);
        self.active.store(next, SeqCst);
        crate::sync::fence_seq_cst(); // the new epoch before a scan of the counters
        true
    }

    /// The start of `epoch` (tests).
    #[cfg(test)]
    pub(crate) fn started_at(&self, epoch: u64) -> u64 {
        self.cell(epoch).start.load(SeqCst)
    }

    /// The start of the oldest epoch that may still have members (or of the active one):
    /// every running or future transaction starts at or after it.
    pub(crate) fn reclaim_bound(&self) -> u64 {
        loop {
            let active = self.active.load(SeqCst);
            let mut oldest = self.oldest.load(SeqCst);
            while oldest < active && self.cell(oldest).members.load(SeqCst) == 0 {
                oldest += 1;
            }
            self.oldest.fetch_max(oldest, SeqCst);
            let cell = self.cell(oldest);
            let start = cell.start.load(SeqCst);
            // Another thread's scan may have let the ring move on past `oldest` meanwhile
            // and its cell hold a later epoch now (only when bounds are taken by more
            // than the advancing thread): then look again.
            if cell.epoch.load(SeqCst) == oldest {
                return start;
            }
        }
    }
}

/// The 'txn' collector.
pub(crate) struct TxnEpochs {
    epochs: EpochCounters,
}

impl Collector for TxnEpochs {
    const NAME: &'static str = "txn";
    const FINALIZING: Finalizing = Finalizing::Background;
    /// The epoch length: Peloton's 40 ms, the engine Wu et al. ran (Silo's is 40 ms too).
    const DEFAULT_BACKGROUND_PERIOD: Duration = Duration::from_millis(40);

    fn new(_config: &GcConfig) -> Self {
        TxnEpochs {
            epochs: EpochCounters::new(),
        }
    }

    fn begin<R: Send + 'static>(
        &self,
        _txns: &TxnManager<R>,
        local: &LocalSlot<R>,
        take_start: impl FnOnce() -> u64,
    ) -> u64 {
        let epoch = self.epochs.enter();
        let start_ts = take_start();
        local.gc.borrow_mut().register(start_ts, epoch);
        start_ts
    }

    fn end<R: Send + 'static>(&self, _txns: &TxnManager<R>, local: &LocalSlot<R>, start_ts: u64) {
        let epoch = local.gc.borrow_mut().unregister(start_ts);
        self.epochs.leave(epoch);
    }

    fn reclaim_bound<R: Send + 'static>(&self, _txns: &TxnManager<R>) -> u64 {
        self.epochs.reclaim_bound()
    }

    fn active_snapshots<R: Send + 'static>(&self, txns: &TxnManager<R>) -> (u64, ActiveSnapshots) {
        // No interval pruning: only the bound is used.
        let bound = self.reclaim_bound(txns);
        (bound, ActiveSnapshots::new(bound, Vec::new()))
    }

    fn background_tick<R: Send + 'static>(&self, txns: &TxnManager<R>) -> bool {
        self.epochs.advance(txns.clock())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::EpochCounters;

    /// The bound is the start of the oldest epoch with members; an epoch whose members all
    /// left is over, whatever came after it.
    #[test]
    fn the_bound_is_the_start_of_the_oldest_occupied_epoch() {
        let epochs = EpochCounters::with_ring(8);
        assert_eq!(epochs.reclaim_bound(), 0);
        assert!(epochs.advance(10)); // epoch 1 starts at 10
        let long = epochs.enter();
        assert_eq!((long, epochs.started_at(long)), (1, 10));
        assert!(epochs.advance(20)); // epoch 2
        let short = epochs.enter();
        assert!(epochs.advance(30)); // epoch 3
        assert_eq!(epochs.reclaim_bound(), 10, "epoch 1 still has a member");
        epochs.leave(short);
        assert_eq!(epochs.reclaim_bound(), 10);
        epochs.leave(long);
        assert_eq!(epochs.reclaim_bound(), 30, "only the active epoch is left");
    }

    /// A member a whole ring behind stops the advance (cells are not reused under it);
    /// once it leaves, epochs advance again.
    #[test]
    fn a_full_ring_waits_for_its_oldest_member() {
        let epochs = EpochCounters::with_ring(4);
        let member = epochs.enter(); // epoch 0
        for clock in 1..=3 {
            assert!(epochs.advance(clock));
        }
        assert!(!epochs.advance(4), "epoch 4 would reuse epoch 0's cell");
        assert_eq!(epochs.reclaim_bound(), 0);
        epochs.leave(member);
        assert_eq!(epochs.reclaim_bound(), 3);
        assert!(epochs.advance(4));
        assert_eq!(epochs.reclaim_bound(), 4);
    }
}
