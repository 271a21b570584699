//! OneShot's partition clearing (TB §2.3.3, after Raza et al.'s OneShotGC): the policy, as
//! data and pure functions. The mechanism (partitions, their release, the version index)
//! is the delta-nvm storage's (`version/delta_nvm/`); the engine calls it after every
//! transaction ends on a thread, as TB says OneShot does ("perform GC checks upon
//! transaction commit, initiating GC work only when obsolete tuple versions reach a
//! threshold": here, when a partition is sealed).
//!
//! Definitions: a partition's bounds `[min, max]` are the lowest and highest end timestamps
//! of its before-images (the MVTO ids of the transactions whose updates made them). A
//! version in it with begin `b` and end `e` (`b < e`, `min <= e <= max`) is read by a
//! snapshot `S` iff `b < S <= e`.
//!
//! A sealed partition is, against an exact list of the active snapshots:
//! - *released whole* when every snapshot (and every one to come) is above `max`: none
//!   reads or walks into it (a reader stops at the successor of each version in it, which
//!   committed at `e <= max`);
//! - *indexed, then released* when some snapshots are at or below `max` (the *readers*)
//!   but no transaction that updated a row into it is still running (no before-image's end
//!   is an active start: under MVTO a transaction's id is its start): the versions the
//!   readers read or walk past are copied into the partition's index, and the partition
//!   is released (TB: "when a tuple version may be accessed by a long-running
//!   transaction, the entire partition ... cannot be released; otherwise, it would result
//!   in the loss of the version chain. In order to perform chain consolidation and access
//!   earlier tuple versions, OneShotGC uses a hashmap to build a version index");
//! - *kept* while a writer of it runs (its rollback puts a before-image back), and with it
//!   every younger partition (they are released in order).
//!
//! The first test needs the bounds only; the second a scan of the partition's records,
//! which the index needs anyway.
//!
//! Reclaim bound for the interspersed finalizing that buries deleted rows and keeps the
//! indexes exact (which DBx1000, the paper's host, does not need): the slot watermark, as
//! under tb-collect.

use super::{Collector, Finalizing, GcConfig};
use crate::version::ActiveSnapshots;

/// OneShot: partition clearing over the delta-nvm storage.
pub(crate) struct OneShot;

impl Collector for OneShot {
    const NAME: &'static str = "oneshot";
    const FINALIZING: Finalizing = Finalizing::Interspersed;
    const BLOCK_LEVEL: bool = true;

    fn new(_config: &GcConfig) -> Self {
        OneShot
    }
}

/// What to do with a sealed partition, or with a released one's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PartitionCase {
    /// No snapshot reads it: release it whole (or free its index).
    Release,
    /// The `readers` (ascending, each at or below `max`) may read it: unless one of its
    /// writers runs ([`writer_running`]), index what they read or walk past, then release
    /// it.
    IndexAndRelease { readers: Vec<u64> },
    /// The list of active snapshots is older than the partition (its horizon not past
    /// `max`): a snapshot to come may fall inside it; keep it.
    Keep,
}

/// Classifies a partition of bounds `(min, max)` against the active snapshots. An empty
/// partition (bounds `(u64::MAX, 0)`) holds nothing to read.
pub(crate) fn classify((min, max): (u64, u64), active: &ActiveSnapshots) -> PartitionCase {
    if min > max {
        return PartitionCase::Release;
    }
    if active.horizon <= max {
        return PartitionCase::Keep;
    }
    if active.starts_desc().iter().all(|&start| start > max) {
        return PartitionCase::Release;
    }
    let mut readers: Vec<u64> = active
        .starts_desc()
        .iter()
        .copied()
        .filter(|&start| start <= max)
        .collect();
    readers.reverse();
    PartitionCase::IndexAndRelease { readers }
}

/// Whether the transaction whose update made a before-image ending at `end` is still
/// running: its id is one of the `readers`' starts (MVTO: a transaction's id is its start).
pub(crate) fn writer_running(end: u64, readers: &[u64]) -> bool {
    readers.binary_search(&end).is_ok()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn active(horizon: u64, starts: &[u64]) -> ActiveSnapshots {
        ActiveSnapshots::new(horizon, starts.to_vec())
    }

    #[test]
    fn a_partition_is_released_when_no_snapshot_reaches_it_else_indexed() {
        use PartitionCase::*;
        assert_eq!(classify((55, 150), &active(300, &[151, 200])), Release);
        assert_eq!(classify((55, 150), &active(151, &[])), Release);
        assert_eq!(
            classify((55, 150), &active(300, &[10, 50, 200])),
            IndexAndRelease {
                readers: vec![10, 50]
            }
        );
        assert_eq!(
            classify((55, 150), &active(300, &[50, 100, 150])),
            IndexAndRelease {
                readers: vec![50, 100, 150]
            }
        );
        assert_eq!(
            classify((55, 150), &active(150, &[])),
            Keep,
            "the horizon not past max: a snapshot may still begin at it"
        );
        assert_eq!(
            classify((u64::MAX, 0), &active(1, &[])),
            Release,
            "an empty partition"
        );
        assert!(writer_running(100, &[50, 100, 150]));
        assert!(!writer_running(99, &[50, 100, 150]));
    }
}
