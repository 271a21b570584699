//! Snapshot isolation with first-updater-wins, and precision locking on top for
//! serializable transactions.
//!
//! Every transaction reads its snapshot, and a write to a row whose newest version belongs
//! to a running transaction, or to one that committed after this transaction began, fails
//! at once with a write-write conflict (the check runs under the row's exclusive latch in
//! `VersionStorage::write`). That prevents G0, G1, lost updates (P4) and read skew
//! (G-single). A serializable transaction also validates its reads at commit against what
//! committed since it began ([`super::precision`]), which rules out write skew (G2-item) and
//! predicate anomalies (G2), so serializable transactions are serializable in commit order.

use super::precision::{self, CommitRecord, ReadSet};
use super::Protocol;
use crate::sync::Arc;
use crate::Isolation;

/// Snapshot isolation, first updater wins; precision locking for `Serializable`.
pub(crate) struct FirstUpdaterWins;

impl Protocol for FirstUpdaterWins {
    const NAME: &'static str = "si-first-updater-wins+precision-locking";

    fn validates(isolation: Isolation) -> bool {
        isolation == Isolation::Serializable
    }

    fn validate_commit(
        &self,
        reads: &ReadSet,
        start_ts: u64,
        commit_ts: u64,
        others: &[Arc<CommitRecord>],
    ) -> Option<u32> {
        precision::validate(reads, start_ts, commit_ts, others)
    }
}
