//! 'Deuteronomy' (Levandoski et al., CIDR 2015, as the Steam paper runs it: §3, Table 4):
//! infinite epochs, advanced after a threshold of committed transactions (100), with all
//! collection interspersed in the foreground.
//!
//! - **Epochs.** The global epoch is an ever-increasing number; here it is the clock value
//!   read when the epoch began, which keeps it monotonic and makes "everything committed
//!   before the oldest occupied epoch began" a timestamp bound directly.
//! - **Entering.** A transaction enters the current epoch at begin: its thread publishes
//!   the oldest epoch any of its running transactions entered, in its slot
//!   (`Slot::collector_value`), *before* taking the start timestamp; it leaves at end.
//! - **Advancing** (every `threshold` commits of a thread, default 100): the thread raises
//!   the global epoch to the clock, then refreshes: it scans every thread's epoch
//!   ([`Collector::reclaim_bound`]) and finalizes its committed transactions below the
//!   oldest occupied epoch. Between advances nothing is finalized: the epoch is the
//!   granularity (the paper's Figure 10 sweeps the threshold).
//!
//! Reclaim bound and its proof: the bound is the minimum of the global epoch, read before
//! the scan, and the published epochs. A published epoch `e` is a clock value stored
//! before its thread read it, and the thread takes its start after that, so its start is
//! at least `e`. A thread the scan missed published after the scan, hence after the
//! global epoch was read, and took its start later still, so its start is at least the
//! epoch read, which is a clock value read earlier.

use std::sync::atomic::Ordering;

use super::{epoch_registration, Collector, Finalizing, GcConfig};
use crate::stats::Counter;
use crate::sync::AtomicU64;
use crate::txn::slots::{LocalSlot, TxnManager};

/// Infinite epochs (mechanism; the collector below is the policy). An epoch is named by
/// the clock value read when it began.
pub(crate) struct InfiniteEpochs {
    epoch: AtomicU64,
}

impl InfiniteEpochs {
    pub(crate) fn new() -> Self {
        InfiniteEpochs {
            epoch: AtomicU64::new(0),
        }
    }

    /// Enters the current epoch: reads it, has `publish` make it visible to other
    /// threads, and returns it. The caller takes its start after.
    pub(crate) fn enter(&self, publish: impl FnOnce(u64)) -> u64 {
        let epoch = self.epoch.load(Ordering::SeqCst);
        publish(epoch);
        crate::sync::fence_seq_cst(); // the publication before the start's clock read
        epoch
    }

    /// Begins a new epoch at `clock` (read by the caller just now). Returns whether the
    /// epoch moved (another thread may have advanced further already).
    pub(crate) fn advance(&self, clock: u64) -> bool {
        super::raise(&self.epoch, clock)
    }

    /// The oldest occupied epoch: the current epoch, read first, or the oldest any thread
    /// published (`min_published`, read after).
    pub(crate) fn reclaim_bound(&self, min_published: impl FnOnce() -> u64) -> u64 {
        let epoch = self.epoch.load(Ordering::SeqCst);
        crate::sync::fence_seq_cst(); // a thread that entered after this read is seen below
        epoch.min(min_published())
    }
}

/// 'Deuteronomy''s collector.
pub(crate) struct Deuteronomy {
    epochs: InfiniteEpochs,
    threshold: u64,
}

impl Deuteronomy {
    /// Commits between epoch advances (Steam Table 4).
    pub(crate) const DEFAULT_EPOCH_THRESHOLD: u64 = 100;
}

impl Collector for Deuteronomy {
    const NAME: &'static str = "deuteronomy";
    const FINALIZING: Finalizing = Finalizing::Interspersed;

    fn new(config: &GcConfig) -> Self {
        Deuteronomy {
            epochs: InfiniteEpochs::new(),
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
        let epoch = self
            .epochs
            .enter(|epoch| epoch_registration::enter(local, epoch));
        let start_ts = take_start();
        debug_assert!(start_ts >= epoch);
        epoch_registration::started(local, start_ts);
        start_ts
    }

    fn end<R: Send + 'static>(&self, _txns: &TxnManager<R>, local: &LocalSlot<R>, start_ts: u64) {
        epoch_registration::leave(local, start_ts);
    }

    fn reclaim_bound<R: Send + 'static>(&self, txns: &TxnManager<R>) -> u64 {
        self.epochs.reclaim_bound(|| super::min_published(txns))
    }

    fn after_commit<R: Send + 'static>(
        &self,
        txns: &TxnManager<R>,
        local: &LocalSlot<R>,
    ) -> Option<u64> {
        if !local.gc.borrow_mut().count_commit(self.threshold) {
            return None;
        }
        if self.epochs.advance(txns.clock()) {
            local.slot.stats.add(Counter::EpochAdvances, 1);
        }
        Some(self.reclaim_bound(txns))
    }

    fn idle_bound<R: Send + 'static>(&self, txns: &TxnManager<R>) -> u64 {
        self.epochs.advance(txns.clock());
        self.reclaim_bound(txns)
    }
}
