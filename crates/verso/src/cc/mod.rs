//! The concurrency-control seam: the read, write and commit rules.
//!
//! Implementations: [`snapshot::FirstUpdaterWins`] — snapshot isolation's first-updater-wins
//! for every transaction, plus precision-locking validation ([`precision`]) at commit for
//! `Isolation::Serializable` ones (the default protocol).
//!
//! The write rule is checked where the version is installed (the storage reports the
//! newest version's owner and commit timestamp under the row's exclusive latch); the commit
//! rule runs after the commit timestamp is drawn and before the transaction is marked
//! committed (its versions wait, invisible, in the COMMITTING state meanwhile).

pub(crate) mod precision;
pub(crate) mod snapshot;

use crate::sync::Arc;
use crate::Isolation;
use precision::{CommitRecord, ReadSet};

/// A concurrency-control protocol.
pub(crate) trait Protocol: Send + Sync + 'static {
    /// Name in configuration and reports.
    const NAME: &'static str;

    /// Whether a (not read-only) transaction at `isolation` records its reads and
    /// validates them at commit.
    fn validates(isolation: Isolation) -> bool;

    /// Validation at commit of a transaction that started at `start_ts`, read `reads` and
    /// drew `commit_ts`, against the commit records other transactions published. Returns
    /// the table index of a conflicting write, or `None` if the transaction may commit.
    fn validate_commit(
        &self,
        reads: &ReadSet,
        start_ts: u64,
        commit_ts: u64,
        others: &[Arc<CommitRecord>],
    ) -> Option<u32>;
}
