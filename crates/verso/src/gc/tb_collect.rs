//! TB-Collect's block-level collection (Wei et al., Electronics 2025, §4.2–§4.4): the
//! policy, as data and pure functions. The mechanism (the queues, freezing, relocation,
//! freeing, kept tiles) is the tile-block storage's (`version/tile_block/reclaim.rs`); the
//! engine calls it after every transaction ends on a thread, with no thread of its own
//! ("there is no need for additional background threads", TB §4.3).
//!
//! Definitions:
//! - A block's bounds: `min` and `max`, the lowest and highest MVTO ids of the
//!   transactions that appended a version to it or obsoleted one of its slots (the paper's
//!   `min_txnid` and `max_txnid`; ids, not epochs: see `classify`).
//! - A *candidate* is a sealed block more than θ = 90% of whose used slots are obsolete.
//! - The *epoch* is ⌊elapsed / 40 ms⌋ of the monotonic clock (the paper's global timer,
//!   with no thread); a thread rebuilds its list of active snapshots when it meets a newer
//!   epoch than its list's, so its knowledge is at most one epoch old.
//!
//! Reclaim bound (for the interspersed finalizing Verso runs beside it, which keeps its
//! indexes exact and buries deleted rows: DBx1000, the paper's host, has neither to do):
//! the slot watermark, as HyPer's and Steam's, which is at most every running or future
//! snapshot's start.

use std::time::Duration;

use super::{Collector, Finalizing, GcConfig};
use crate::version::ActiveSnapshots;

/// A block is a candidate when more than this share of its used slots is obsolete (TB §4.2:
/// θ = 90%, 1,728 of 1,920 slots). Named for what it is, not `theta` (YCSB's skew is).
pub(crate) const BLOCK_OBSOLETE_THRESHOLD: f64 = 0.90;

/// The total capacity of every thread's `local_gc_queue`, as a share of the data volume
/// (TB §4.4: "15% of the current data volume ... evenly divided among all threads").
pub(crate) const QUEUE_SHARE_OF_DATA: f64 = 0.15;

/// The global epoch's length (TB §4.2: 40 ms).
pub(crate) const EPOCH: Duration = Duration::from_millis(40);

/// TB-Collect: block-level collection over the tile-block storage.
pub(crate) struct TbCollect;

impl Collector for TbCollect {
    const NAME: &'static str = "tb-collect";
    const FINALIZING: Finalizing = Finalizing::Interspersed;
    const BLOCK_LEVEL: bool = true;

    fn new(_config: &GcConfig) -> Self {
        TbCollect
    }
}

/// Which of TB §4.4's three cases a block is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockCase {
    /// Case 1: every active snapshot is younger than every transaction that wrote to or
    /// obsoleted a slot of the block: no snapshot can read an obsolete version in it, and
    /// no uncommitted version is in it. Relocate its latest versions, free block and tile.
    Reclaim,
    /// Case 2: the snapshots older than the block's `min` (the *long* ones, the newest of
    /// which is `newest_long`) see none of its versions but may walk its headers to older
    /// versions; every other snapshot is younger than `max`. Relocate the latest versions,
    /// free the block, keep the tile until the long snapshots end.
    KeepTileFreeBlock { newest_long: u64 },
    /// Case 3: some active snapshot lies in `[min, max]`: keep the block.
    Keep,
}

/// Classifies a block of bounds `[min, max]` against the active snapshots (TB §4.4, Fig. 6).
///
/// The paper compares `local_epoch_min` (an epoch) with `max_txnid` (an id); here both are
/// MVTO ids, a thread's list of active snapshots standing for its local epochs: `a_0 < a_1
/// < …` are the starts below the horizon `H`, and `H` stands for every snapshot to come
/// (every transaction not in the list starts at or after it). Comparisons are strict, as
/// the paper's "exceeds" and "smaller than": a start equal to `min` is the creator's own
/// id, active only while uncommitted.
///
/// Why each case is safe: a version in the block has begin `b` in `[min, max]` and, if
/// superseded, end `e` with `b < e <= max`. A snapshot `S` reads it iff `b < S` and its
/// successor is not committed below `S`. Case 1: every `S >= a_0 > max >= e` sees the
/// successor (committed: its writer's id is below every active start; an aborted one's bit
/// was cleared). Case 2: the long snapshots `S < min <= b` see nothing in the block; every
/// other is above `max`, as in case 1; and no writer is active (its id would lie in
/// `[min, max]`), so nothing uncommitted is in the block.
pub(crate) fn classify(min: u64, max: u64, active: &ActiveSnapshots) -> BlockCase {
    debug_assert!(min <= max || min == u64::MAX, "bounds [{min}, {max}]");
    let mut starts = active
        .starts_desc()
        .iter()
        .rev()
        .copied()
        .chain(std::iter::once(active.horizon));
    let mut newest_long = None;
    for start in &mut starts {
        if newest_long.is_none() && start > max {
            return BlockCase::Reclaim;
        }
        if start < min {
            newest_long = Some(start);
            continue;
        }
        return match newest_long {
            Some(newest_long) if start > max => BlockCase::KeepTileFreeBlock { newest_long },
            _ => BlockCase::Keep,
        };
    }
    // Even the horizon is below `min` (a list older than the block): a snapshot to come
    // may fall inside it.
    BlockCase::Keep
}

/// Whether a sealed block with `obsolete` of its `used` slots obsolete is a candidate
/// (more than θ of them; `used` rather than the block's capacity, so that a block sealed
/// because its bytes ran out can qualify too).
pub(crate) fn is_candidate(obsolete: u32, used: u32) -> bool {
    used > 0 && f64::from(obsolete) > BLOCK_OBSOLETE_THRESHOLD * f64::from(used)
}

/// The capacity of one thread's `local_gc_queue` (and of its `long_tx_gc_queue`, which the
/// paper leaves unsized), in blocks: 15% of the blocks in use, split over the threads, at
/// least one.
pub(crate) fn queue_capacity(blocks_in_use: usize, threads: usize) -> usize {
    let share = QUEUE_SHARE_OF_DATA * blocks_in_use as f64 / threads.max(1) as f64;
    (share.ceil() as usize).max(1)
}

/// The global epoch `elapsed` after the store opened, in epochs of `length`
/// (`Options::block_gc_epoch`, [`EPOCH`] by default).
pub(crate) fn epoch(elapsed: Duration, length: Duration) -> u64 {
    (elapsed.as_nanos() / length.as_nanos().max(1)) as u64
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn active(horizon: u64, starts: &[u64]) -> ActiveSnapshots {
        ActiveSnapshots::new(horizon, starts.to_vec())
    }

    /// TB Figure 6's example and its neighbours, one row per case.
    #[test]
    fn the_three_cases_of_tb_section_4_4() {
        use BlockCase::*;
        let rows: [(u64, u64, u64, &[u64], BlockCase); 10] = [
            // Fig. 6: block [55, 150]; snapshots 50 and 200: keep the tile for 50.
            (
                55,
                150,
                300,
                &[50, 200],
                KeepTileFreeBlock { newest_long: 50 },
            ),
            // Every snapshot younger than max: reclaim.
            (55, 150, 300, &[151, 200], Reclaim),
            // Nothing running, the horizon past max: reclaim.
            (55, 150, 151, &[], Reclaim),
            // A snapshot inside [min, max]: keep.
            (55, 150, 300, &[50, 100], Keep),
            (55, 150, 300, &[100], Keep),
            // Several long snapshots: the newest of them is marked.
            (
                55,
                150,
                300,
                &[10, 20, 54, 151],
                KeepTileFreeBlock { newest_long: 54 },
            ),
            // Strict comparisons: a start equal to min or max keeps the block.
            (55, 150, 300, &[55], Keep),
            (55, 150, 300, &[150], Keep),
            // The horizon not past max: a future snapshot may fall inside; keep.
            (55, 150, 150, &[50], Keep),
            // A list older than the block (its horizon below min): keep.
            (55, 150, 40, &[10], Keep),
        ];
        for (min, max, horizon, starts, expected) in rows {
            assert_eq!(
                classify(min, max, &active(horizon, starts)),
                expected,
                "[{min}, {max}] against {starts:?} below {horizon}"
            );
        }
    }

    #[test]
    fn a_candidate_has_more_than_ninety_percent_of_its_used_slots_obsolete() {
        assert!(!is_candidate(1728, 1920), "exactly 90% is not more");
        assert!(is_candidate(1729, 1920));
        assert!(is_candidate(10, 10));
        assert!(!is_candidate(9, 10));
        assert!(!is_candidate(0, 0), "an empty block is no candidate");
    }

    #[test]
    fn queue_capacity_is_fifteen_percent_of_the_blocks_split_over_threads() {
        // The design's example: YCSB, 1 M rows of 232 B, about 484 blocks, 2 threads.
        assert_eq!(queue_capacity(484, 2), 37);
        assert_eq!(queue_capacity(0, 8), 1, "at least one");
        assert_eq!(queue_capacity(100, 1), 15);
    }

    #[test]
    fn epochs_are_forty_milliseconds() {
        assert_eq!(epoch(Duration::from_millis(39), EPOCH), 0);
        assert_eq!(epoch(Duration::from_millis(40), EPOCH), 1);
        assert_eq!(epoch(Duration::from_millis(1000), EPOCH), 25);
        assert_eq!(epoch(Duration::from_millis(3), Duration::from_millis(1)), 3);
    }

    proptest::proptest! {
        /// Whatever the case, it agrees with its definition on the list it was given.
        #[test]
        fn classify_agrees_with_the_definitions(
            min in 1u64..200, width in 0u64..100,
            starts in proptest::collection::vec(0u64..400, 0..6), extra in 1u64..100,
        ) {
            let max = min + width;
            let horizon = starts.iter().copied().max().unwrap_or(0) + extra;
            let list = active(horizon, &starts);
            let all: Vec<u64> = list.starts_desc().iter().copied().chain([horizon]).collect();
            match classify(min, max, &list) {
                BlockCase::Reclaim => proptest::prop_assert!(all.iter().all(|&s| s > max)),
                BlockCase::KeepTileFreeBlock { newest_long } => {
                    proptest::prop_assert!(all.iter().all(|&s| s < min || s > max));
                    proptest::prop_assert!(all.contains(&newest_long) && newest_long < min);
                    proptest::prop_assert!(all.iter().all(|&s| s >= min || s <= newest_long));
                }
                BlockCase::Keep => proptest::prop_assert!(
                    all.iter().any(|&s| s >= min && s <= max) || horizon < min
                ),
            }
        }
    }
}
