//! 'Hekaton' (Larson et al. 2013, Diaconu et al. 2013, as the Steam paper runs it: §3,
//! Table 4): a latch-free transaction map, and a background thread that controls the
//! collection while the worker threads do it.
//!
//! - **Transaction map.** Every begin enters the transaction under a fresh id into a
//!   concurrent hash map (`scc::HashMap`: lock-free reads, no global lock), every end
//!   removes it.
//! - **Background thread** (`engine::collect::background_round`), every period (1 ms):
//!   refreshes the global minimum from the map ([`Collector::refresh`]), takes from every
//!   thread's queue the committed transactions below it, and hands them to the worker
//!   threads' work queues (the owner if it is busy, else a busy thread, else it does them
//!   itself: nobody else will). Workers finalize their work queue between transactions.
//!   The chains are newest to oldest here as in the paper's runs, so Hekaton's on-the-fly
//!   cleaning of traversed old-to-new chains has nothing to apply to.
//!
//! Reclaim bound and its proof: a transaction is entered with a lower bound of its start
//! (the clock read *before* it takes its start). A refresh reads the clock, then the map.
//! A transaction the refresh missed was entered after the refresh's clock read, so its
//! lower bound, and its start, are at least that clock value. The minimum of the clock and
//! the entries is therefore at most every running or future start. It is published in one
//! atomic and only ever used for work handed out with it.

use std::sync::atomic::Ordering;

use super::{Collector, Finalizing, GcConfig};
use crate::txn::slots::{LocalSlot, TxnManager};

/// 'Hekaton''s collector: the transaction map and the published global minimum.
pub(crate) struct Hekaton {
    /// Transaction id → a lower bound of its start timestamp.
    map: scc::HashMap<u64, u64>,
    next_id: crate::sync::AtomicU64,
    /// The global minimum as of the last refresh.
    global_minimum: crate::sync::AtomicU64,
}

impl Collector for Hekaton {
    const NAME: &'static str = "hekaton";
    const FINALIZING: Finalizing = Finalizing::BackgroundHandsToWorkers;

    fn new(_config: &GcConfig) -> Self {
        Hekaton {
            map: scc::HashMap::new(),
            next_id: crate::sync::AtomicU64::new(0),
            global_minimum: crate::sync::AtomicU64::new(0),
        }
    }

    fn begin<R: Send + 'static>(
        &self,
        txns: &TxnManager<R>,
        local: &LocalSlot<R>,
        take_start: impl FnOnce() -> u64,
    ) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let lower_bound = txns.clock();
        let inserted = self.map.insert_sync(id, lower_bound);
        debug_assert!(inserted.is_ok(), "transaction ids are unique");
        let start_ts = take_start();
        debug_assert!(start_ts >= lower_bound);
        local.gc.borrow_mut().register(start_ts, id);
        start_ts
    }

    fn end<R: Send + 'static>(&self, _txns: &TxnManager<R>, local: &LocalSlot<R>, start_ts: u64) {
        let id = local.gc.borrow_mut().unregister(start_ts);
        let removed = self.map.remove_sync(&id);
        debug_assert!(removed.is_some(), "an ending transaction is in the map");
    }

    /// The minimum as of the last refresh (stale by up to a period, by design).
    fn reclaim_bound<R: Send + 'static>(&self, _txns: &TxnManager<R>) -> u64 {
        self.global_minimum.load(Ordering::SeqCst)
    }

    fn refresh<R: Send + 'static>(&self, txns: &TxnManager<R>) -> u64 {
        // The proof needs the scan to see every entry inserted before it began: scc 3.8's
        // `iter_sync` reads each bucket under its reader lock and follows a resize in
        // progress, so it does (a property of the version pinned in Cargo.toml, not a
        // documented promise; check it when scc is upgraded).
        let mut minimum = txns.clock();
        self.map.iter_sync(|_, &lower_bound| {
            minimum = minimum.min(lower_bound);
            true
        });
        super::raise(&self.global_minimum, minimum);
        debug_assert!(self.global_minimum.load(Ordering::SeqCst) <= txns.clock());
        minimum
    }
}
