//! 'Ermia' (Kim et al., SIGMOD 2016, as the Steam paper runs it: §3, Table 4): a
//! three-phase epoch manager, advanced after every transaction, with all collection
//! interspersed in the foreground.
//!
//! - **Three phases.** Epochs are numbered; at any time a running transaction is in the
//!   current epoch `E` or the previous one `E - 1`, never older: the global epoch may
//!   advance from `E` to `E + 1` only when no thread is still in `E - 1`. So only three
//!   epochs are ever live (the one closing, the current, the next), and their start clocks
//!   fit in a ring of three.
//! - **Entering** (at begin): the thread publishes the oldest epoch its running
//!   transactions are in (`Slot::collector_value`), then re-reads the global epoch and
//!   retries if it moved, so it never ends up in an epoch an advance did not see; only
//!   then does it take its start timestamp. It leaves at end.
//! - **Advancing** (every `threshold` commits of a thread, default 1): one thread at a time
//!   (a try-lock flag: a thread that finds another advancing skips), if no thread is in
//!   `E - 1`, stores the clock as the start of `E + 1` and publishes `E + 1`. Then the
//!   committing thread finalizes its committed transactions below the start of the
//!   previous epoch ([`Collector::reclaim_bound`]). A thread holding a long snapshot stays
//!   in its epoch and stops the advance: garbage waits as under a watermark, only coarser.
//!
//! Reclaim bound and its proof: every running transaction is in `E - 1` or `E`, and took
//! its start after it saw its epoch published, which was after that epoch's start clock
//! was stored; so its start is at least the start clock of `E - 1`. The ring slot of
//! `E - 1` is overwritten only when the epoch advances to `E + 2`; the bound re-reads the
//! epoch after reading the ring and retries if it moved, so it never uses an overwritten
//! value. Checked in every interleaving by `gc::loom_tests`.

use std::sync::atomic::Ordering;

use super::{epoch_registration, Collector, Finalizing, GcConfig};
use crate::stats::Counter;
use crate::sync::{AtomicBool, AtomicU64};
use crate::txn::slots::{LocalSlot, TxnManager};

/// The three-phase epoch manager (mechanism; the collector below is the policy).
pub(crate) struct ThreePhaseEpochs {
    /// The current epoch number (starts at 1, so `E - 1` always exists).
    epoch: AtomicU64,
    /// The clock when epoch `e` began, at `e % 3`.
    start_clocks: [AtomicU64; 3],
    /// Set by the one thread advancing.
    advancing: AtomicBool,
}

impl ThreePhaseEpochs {
    pub(crate) fn new() -> Self {
        ThreePhaseEpochs {
            epoch: AtomicU64::new(1),
            start_clocks: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            advancing: AtomicBool::new(false),
        }
    }

    fn start_clock(&self, epoch: u64) -> &AtomicU64 {
        &self.start_clocks[(epoch % 3) as usize]
    }

    /// Enters the current epoch: `publish(e)` makes `e` visible to advancers (the caller
    /// publishes the oldest epoch of its thread), `withdraw()` undoes it when the epoch
    /// moved meanwhile. Returns the epoch entered; the caller takes its start after.
    pub(crate) fn enter(&self, mut publish: impl FnMut(u64), mut withdraw: impl FnMut()) -> u64 {
        loop {
            let epoch = self.epoch.load(Ordering::SeqCst);
            publish(epoch);
            crate::sync::fence_seq_cst(); // the publication before the re-check
            if self.epoch.load(Ordering::SeqCst) == epoch {
                return epoch;
            }
            // An advance may not have seen us: step out and enter the new epoch.
            withdraw();
        }
    }

    /// Advances the epoch if no thread is in the previous one (`min_published` is the
    /// oldest epoch any thread published). `clock` reads the commit clock. Returns whether
    /// it advanced.
    pub(crate) fn try_advance(
        &self,
        clock: impl FnOnce() -> u64,
        min_published: impl FnOnce() -> u64,
    ) -> bool {
        if self
            .advancing
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false; // another thread is advancing
        }
        let current = self.epoch.load(Ordering::SeqCst);
        crate::sync::fence_seq_cst(); // a thread that re-checked `current` is seen below
        let advanced = min_published() >= current;
        if advanced {
            // The start clock first: a thread that sees the new epoch takes its start after.
            self.start_clock(current + 1)
                .store(clock(), Ordering::SeqCst);
            self.epoch.store(current + 1, Ordering::SeqCst);
        }
        self.advancing.store(false, Ordering::SeqCst);
        advanced
    }

    /// The start clock of the previous epoch: at most the start of every running
    /// transaction and of every later one.
    pub(crate) fn reclaim_bound(&self) -> u64 {
        loop {
            let epoch = self.epoch.load(Ordering::SeqCst);
            let bound = self.start_clock(epoch - 1).load(Ordering::SeqCst);
            if self.epoch.load(Ordering::SeqCst) == epoch {
                return bound;
            }
        }
    }

    /// The start clock of `epoch` (for assertions).
    pub(crate) fn started_at(&self, epoch: u64) -> u64 {
        self.start_clock(epoch).load(Ordering::SeqCst)
    }
}

/// 'Ermia''s collector.
pub(crate) struct Ermia {
    epochs: ThreePhaseEpochs,
    threshold: u64,
}

impl Ermia {
    /// Commits between epoch advances (Steam Table 4).
    pub(crate) const DEFAULT_EPOCH_THRESHOLD: u64 = 1;

    fn try_advance<R: Send + 'static>(&self, txns: &TxnManager<R>) -> bool {
        self.epochs
            .try_advance(|| txns.clock(), || super::min_published(txns))
    }
}

impl Collector for Ermia {
    const NAME: &'static str = "ermia";
    const FINALIZING: Finalizing = Finalizing::Interspersed;

    fn new(config: &GcConfig) -> Self {
        Ermia {
            epochs: ThreePhaseEpochs::new(),
            threshold: config
                .epoch_threshold
                .unwrap_or(Self::DEFAULT_EPOCH_THRESHOLD),
        }
    }

    fn begin<R: Send + 'static>(
        &self,
        _txns: &TxnManager<R>,
        local: &LocalSlot<R>,
        take_start: impl FnOnce() -> u64,
    ) -> u64 {
        let epoch = self.epochs.enter(
            |epoch| epoch_registration::enter(local, epoch),
            || epoch_registration::withdraw(local),
        );
        let start_ts = take_start();
        debug_assert!(start_ts >= self.epochs.started_at(epoch));
        epoch_registration::started(local, start_ts);
        start_ts
    }

    fn end<R: Send + 'static>(&self, _txns: &TxnManager<R>, local: &LocalSlot<R>, start_ts: u64) {
        epoch_registration::leave(local, start_ts);
    }

    fn reclaim_bound<R: Send + 'static>(&self, _txns: &TxnManager<R>) -> u64 {
        self.epochs.reclaim_bound()
    }

    fn after_commit<R: Send + 'static>(
        &self,
        txns: &TxnManager<R>,
        local: &LocalSlot<R>,
    ) -> Option<u64> {
        if !local.gc.borrow_mut().count_commit(self.threshold) {
            return None;
        }
        if self.try_advance(txns) {
            local.slot.stats.add(Counter::EpochAdvances, 1);
        }
        Some(self.epochs.reclaim_bound())
    }

    fn idle_bound<R: Send + 'static>(&self, txns: &TxnManager<R>) -> u64 {
        self.try_advance(txns);
        self.epochs.reclaim_bound()
    }
}
