//! 'zen' (background scanning as TB-Collect runs Zen's collection over append-only NVM
//! storage, Wei et al. 2025 §2.3.2 and §5.1): "In the collecting phase, using the
//! transaction ID, old versions that meet the recycling conditions are placed into the
//! local recycle queue. In the cleaning phase, a background thread periodically scans the
//! local recycle queue for obsolete versions and reclaims them, maintaining the reclaimed
//! space using a reuse list."
//!
//! Mechanism: the collecting phase is every thread's queue of committed transactions (the
//! rows each wrote); the cleaning phase is the background round 'Hana' runs too
//! (`engine::collect::collect_in_background`): every period it finalizes the transactions
//! below the oldest snapshot and prunes, exactly, the chain of every row written by a
//! transaction committed after it. The storage puts what is removed on its table's reuse
//! list (the append-nvm storage, the only one this collector runs over). Unlike 'Hana',
//! transactions register in their thread's slot (no global tracker under a mutex): Zen's
//! transactions do not share HANA's tracker. Zen's DRAM cache of hot tuples (Met-Cache) is
//! not built: the paper gives neither its size nor its policy, and it is a cache of
//! tables, not part of collection. The period is unspecified by the paper: 1 ms, as
//! 'Hana''s (`Options::background_gc_period` sets it).
//!
//! Reclaim bound and its proof (`Collector::active_snapshots`' default): the active list is
//! taken first (its horizon is the clock read before the slots are scanned), then the slot
//! watermark, which is exact (`txn/slots.rs`); the bound is the smaller of the two, so it
//! is a reclaim bound and at most the list's horizon, as a round needs.

use super::{Collector, Finalizing, GcConfig};

/// Zen's collector (its state is the engine's background thread and the threads' queues).
pub(crate) struct Zen;

impl Collector for Zen {
    const NAME: &'static str = "zen";
    const FINALIZING: Finalizing = Finalizing::Background;
    const BACKGROUND_PRUNING: bool = true;

    fn new(_config: &GcConfig) -> Self {
        Zen
    }
}
