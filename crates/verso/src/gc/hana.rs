//! 'Hana' (Lee et al., SIGMOD 2016, as the Steam paper runs it, §3, §4.3.2, Table 4): a
//! global snapshot tracker guarded by one mutex, and a dedicated background thread that
//! does all of the collection.
//!
//! - **Tracker.** A reference-counted ordered map from start timestamp to the number of
//!   running transactions that hold it (HANA's "Global STS Tracker"). Every begin and end
//!   takes its mutex; this is the global synchronization the paper measures against
//!   Steam's thread-local lists (Figure 8, Figure 11 at theta 0).
//! - **Background thread** (`engine::collect::background_round`), every period (1 ms):
//!   takes the tracker's snapshots, finalizes every thread's committed transactions below
//!   the oldest one (transaction-level GC), and then, exactly, prunes the chain of every
//!   row written by a transaction committed after it (interval GC: the versions no
//!   snapshot can see are removed, attributes merged as in Steam's EPO). Workers never
//!   collect; between rounds chains grow with every update (Table 2).
//!
//! Reclaim bound and its proof: `begin` takes the start timestamp *under* the tracker's
//! mutex and enters it before unlocking; a round reads the clock and the entries under
//! the same mutex. So a transaction is either in the entries the round read, or it takes
//! its start after the round's clock read, hence at or above it. The bound (the smallest
//! entry, else the clock) and the active list's horizon (the clock) are therefore exact.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use super::{Collector, Finalizing, GcConfig};
use crate::txn::slots::{LocalSlot, TxnManager};
use crate::version::ActiveSnapshots;

/// 'Hana''s collector: the tracker.
pub(crate) struct Hana {
    /// Start timestamp → number of running transactions holding it.
    tracker: Mutex<BTreeMap<u64, u32>>,
}

impl Collector for Hana {
    const NAME: &'static str = "hana";
    const FINALIZING: Finalizing = Finalizing::Background;
    const BACKGROUND_PRUNING: bool = true;

    fn new(_config: &GcConfig) -> Self {
        Hana {
            tracker: Mutex::new(BTreeMap::new()),
        }
    }

    fn begin<R: Send + 'static>(
        &self,
        _txns: &TxnManager<R>,
        _local: &LocalSlot<R>,
        take_start: impl FnOnce() -> u64,
    ) -> u64 {
        let mut tracker = self.tracker.lock();
        let start_ts = take_start();
        *tracker.entry(start_ts).or_insert(0) += 1;
        start_ts
    }

    fn end<R: Send + 'static>(&self, _txns: &TxnManager<R>, _local: &LocalSlot<R>, start_ts: u64) {
        let mut tracker = self.tracker.lock();
        let count = tracker
            .get_mut(&start_ts)
            .expect("an ending transaction is in the tracker");
        debug_assert!(*count > 0);
        *count -= 1;
        if *count == 0 {
            tracker.remove(&start_ts);
        }
    }

    fn reclaim_bound<R: Send + 'static>(&self, txns: &TxnManager<R>) -> u64 {
        self.active_snapshots(txns).0
    }

    fn active_snapshots<R: Send + 'static>(&self, txns: &TxnManager<R>) -> (u64, ActiveSnapshots) {
        let tracker = self.tracker.lock();
        let horizon = txns.clock();
        let oldest = tracker.keys().next().copied().unwrap_or(horizon);
        let starts: Vec<u64> = tracker.keys().copied().collect();
        drop(tracker);
        debug_assert!(oldest <= horizon);
        (oldest, ActiveSnapshots::new(horizon, starts))
    }
}
