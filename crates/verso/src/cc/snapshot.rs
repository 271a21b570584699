//! Snapshot isolation with first-updater-wins, and precision locking on top for
//! serializable transactions: the default protocol.
//!
//! Every transaction reads its snapshot, and a write to a row whose newest version belongs
//! to a running transaction, or to one that committed after this transaction began, fails
//! at once with a write-write conflict (the check runs under the row's exclusive latch in
//! `VersionStorage::write`). That prevents G0, G1, lost updates (P4) and read skew
//! (G-single). A serializable transaction also validates its reads at commit against what
//! committed since it began ([`super::precision`]), which rules out write skew (G2-item) and
//! predicate anomalies (G2), so serializable transactions are serializable in commit order.

/// The protocol's name in configuration and reports.
pub(crate) const NAME: &str = "si-first-updater-wins+precision-locking";
