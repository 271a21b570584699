//! 'tvcp' (timely version chain pruning as TB-Collect adapts Steam and N2DB to persistent
//! memory, Wei et al. 2025 §2.3.1 and §5.1; not Verso's own Steam, `steam.rs`): collection
//! at every commit, by the committing thread, with no background thread.
//!
//! "Utilizing transaction commits as the GC trigger … it traverses the local recycle
//! queue, and for each old version in the queue, if it meets the recycling conditions (it
//! can no longer be accessed by any active transaction), it is marked as obsolete and
//! placed into the reuse list of the corresponding table. If the transaction contains
//! version chain updates, and the old version meets the recycling conditions, it is
//! immediately [reclaimed] … If [not] … it is placed into the local recycle queue."
//!
//! Mechanism (`engine::collect::prune_recycle_queue`): the thread's recycle queue holds
//! the rows whose chains hold versions behind the newest that were not reclaimable when
//! last examined. After each commit the rows the transaction wrote join it, and every row
//! in it is pruned exactly against a fresh list of the active snapshots (a version is
//! removed iff no active snapshot can read it: the recycling condition, decided for every
//! version of the row at once); a row whose chain is then empty leaves the queue. The
//! storage marks each removed version obsolete and puts its slot on its table's reuse list
//! (the append-nvm storage, the only one this collector runs over). Besides, as every
//! collector, committed transactions are finalized at commit below the reclaim bound
//! (burying deleted rows).
//!
//! N2DB (its reference [42]) is "similar to Steam's, but with some optimizations in NVM
//! writes", which TB-Collect does not list; without N2DB's paper we cannot source them, so
//! the lab's N2DB configuration is this collector under another name (the lab says so).
//!
//! Reclaim bound: the slot watermark (`TxnManager::watermark`), exact by the slots'
//! publication protocol (`txn/slots.rs`). The active list's invariant (every running
//! transaction is in it or began at or after its horizon) is `ActiveSnapshots`'.

use super::{Collector, Finalizing, GcConfig};

/// TVCP's collector (its state is the threads' recycle queues, in their local slots).
pub(crate) struct Tvcp;

impl Collector for Tvcp {
    const NAME: &'static str = "tvcp";
    const FINALIZING: Finalizing = Finalizing::Interspersed;
    const COMMIT_PRUNING: bool = true;

    fn new(_config: &GcConfig) -> Self {
        Tvcp
    }
}
