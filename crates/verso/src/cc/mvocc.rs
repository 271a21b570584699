//! MVOCC (Wu et al. §3.2), as HyPer runs it (Neumann et al., SIGMOD 2015; Wu et al.
//! Table 1): a read phase at the transaction's snapshot that writes nothing into the rows
//! it reads, first-updater-wins for writes ("T is allowed to update version A_x if its
//! write lock is not acquired"), and at commit a validation phase: the transaction draws
//! `T_commit` and checks that nothing in its read set was changed by a transaction that
//! committed in between; then its versions become visible at `T_commit` (write phase).
//!
//! The read set is validated by precision locking ([`super::precision`]): the point reads
//! and the scanned key ranges against the keys the committed transactions wrote, which
//! also covers phantoms (Wu et al. leave range queries out; HyPer validates predicates).
//! Unlike the default protocol, *every* writing transaction validates, whatever isolation
//! it asked for. A declared read-only transaction needs no validation: every writer
//! validates, so the writers are serializable in commit order, and its snapshot is a prefix
//! of that order.
//!
//! What it costs (Wu et al. §3.5): nothing on reads, but a read-mostly transaction that
//! writes validates a large read set and fails if any of it changed, so long read-write
//! transactions starve under writers.

/// The protocol's name in configuration and reports.
pub(crate) const NAME: &str = "mvocc";
