//! Steam (Böttcher et al., PVLDB 2019, §4): thread-local transaction lists, interspersed
//! finalizing, and eager pruning of obsolete versions (EPO) on every write, so a chain never
//! holds more versions than there are active snapshots. The default collector.
//!
//! Reclaim bound: the slot watermark (`TxnManager::watermark`), exact by the slots'
//! publication protocol (`txn/slots.rs`).

use super::{Collector, Finalizing, GcConfig};

/// Steam's collector.
pub(crate) struct Steam;

impl Collector for Steam {
    const NAME: &'static str = "steam";
    const FINALIZING: Finalizing = Finalizing::Interspersed;
    const EAGER_PRUNING: bool = true;

    fn new(_config: &GcConfig) -> Self {
        Steam
    }
}
