//! The concurrency-control seam: the read, write and commit rules.
//!
//! Implementations: [`snapshot::FirstUpdaterWins`] (snapshot isolation, the default for
//! both isolation levels until the serializable validation lands).
//!
//! The write rule is checked where the version is installed (the storage reports the
//! newest version's owner and commit timestamp under the row's exclusive latch); the commit
//! rule runs between "committing" and the draw of the commit timestamp.

pub(crate) mod snapshot;

use crate::error::Result;

/// A concurrency-control protocol.
pub(crate) trait Protocol: Send + Sync + 'static {
    /// Name in configuration and reports.
    const NAME: &'static str;
    /// Validation at commit, after the transaction's writes are installed and before its
    /// commit timestamp is drawn. A failure rolls the transaction back.
    fn validate_commit(&self, start_ts: u64) -> Result<()>;
}
