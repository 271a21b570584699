//! No collection: the baseline that shows what garbage costs. Committed transactions are
//! not even queued; every version record stays linked in its chain, and deleted rows stay
//! in the indexes, for as long as the database lives. Rollback still undoes an aborted
//! transaction's writes (that is not collection, it is atomicity).

use super::{Collector, Finalizing, GcConfig};
use crate::txn::slots::TxnManager;

/// No garbage collector.
pub(crate) struct NoCollection;

impl Collector for NoCollection {
    const NAME: &'static str = "none";
    const FINALIZING: Finalizing = Finalizing::Never;

    fn new(_config: &GcConfig) -> Self {
        NoCollection
    }

    /// Nothing is ever below the bound.
    fn reclaim_bound<R: Send + 'static>(&self, _txns: &TxnManager<R>) -> u64 {
        0
    }
}
