//! Precision locking (Neumann, Mühlbauer, Kemper, SIGMOD 2015), the mechanism behind
//! `Isolation::Serializable`.
//!
//! Definitions:
//! - A serializable transaction `T` records its **read set** while it runs: the primary
//!   keys of its point reads (found or not) and the key ranges of its scans (primary or
//!   secondary index, cut at the last key a scan looked at when it stopped early). These are
//!   the predicates of precision locking, expressed over the index keys our reads use.
//! - A writing transaction `U` that commits while a serializable transaction may be running
//!   publishes a [`CommitRecord`]: for every row it wrote, the primary key and, for every
//!   secondary index of the table, the index entries of the row before and after `U`'s write
//!   (the before- and after-images precision locking checks predicates against).
//! - `T` validates after drawing its commit timestamp `C_T`: every record with
//!   `S_T <= C_U < C_T` of a transaction that committed must not touch `T`'s read set. Then
//!   `T`'s reads, taken at `S_T`, are also what it would read at `C_T`, and its writes
//!   (first-updater-wins) install atomically at `C_T`: serializable transactions behave as if
//!   each ran alone at its commit timestamp. A transaction that commits without writing is
//!   placed at its snapshot instead and needs no validation: the writers before it are
//!   exactly those with smaller commit timestamps, each atomic at its own.
//!
//! Invariants (the proofs are in `docs/design/serializable.md`):
//! - **Publish before the draw.** A record is in its owner's log before the owner draws
//!   its commit timestamp, so a validator that drew a larger timestamp finds it.
//! - **Validation outlives pruning.** Records hold keys, not versions; eager pruning never
//!   touches them. A record is dropped only once its commit timestamp is below the
//!   start of every running serializable transaction (the serializable horizon).

use std::ops::Bound;
use std::sync::atomic::Ordering;

use crate::key::Key;
use crate::sync::{Arc, AtomicU64};
use crate::txn::state::{TxnOutcome, TxnShared};

/// A range of encoded index keys a scan read, on the primary key (`index == None`) or on a
/// secondary index. Secondary bounds are entries without a physical pointer's version tag,
/// as [`WrittenKey::entries`] are (`Table::untagged_entry`): both sides compare the
/// indexed columns and the primary key only.
#[derive(Debug)]
pub(crate) struct RangeRead {
    pub(crate) table: u32,
    pub(crate) index: Option<u16>,
    pub(crate) lower: Bound<Vec<u8>>,
    pub(crate) upper: Bound<Vec<u8>>,
}

impl RangeRead {
    fn contains(&self, key: &[u8]) -> bool {
        let above = match &self.lower {
            Bound::Unbounded => true,
            Bound::Included(lower) => key >= lower.as_slice(),
            Bound::Excluded(lower) => key > lower.as_slice(),
        };
        let below = match &self.upper {
            Bound::Unbounded => true,
            Bound::Included(upper) => key <= upper.as_slice(),
            Bound::Excluded(upper) => key < upper.as_slice(),
        };
        above && below
    }
}

/// What a serializable transaction read.
#[derive(Debug, Default)]
pub(crate) struct ReadSet {
    /// `(table, primary key)` of point reads, in read order until [`ReadSet::seal`] sorts
    /// them.
    points: Vec<(u32, Key)>,
    ranges: Vec<RangeRead>,
    sealed: bool,
}

impl ReadSet {
    pub(crate) fn record_point(&mut self, table: u32, key: &[u8]) {
        debug_assert!(!self.sealed);
        self.points.push((table, Key::from_bytes(key)));
    }

    /// Records a scanned range; returns its place, for [`ReadSet::widen_range`].
    pub(crate) fn record_range(&mut self, range: RangeRead) -> usize {
        debug_assert!(!self.sealed);
        self.ranges.push(range);
        self.ranges.len() - 1
    }

    /// Replaces the range recorded at `at` by `range`, which contains it: a scan that reads
    /// its range a batch at a time (`Transaction::scan`'s iterator) widens one record per
    /// direction instead of adding one per batch.
    pub(crate) fn widen_range(&mut self, at: usize, range: RangeRead) {
        debug_assert!(!self.sealed);
        let recorded = &mut self.ranges[at];
        debug_assert!(recorded.table == range.table && recorded.index == range.index);
        *recorded = range;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    /// Sorts the point reads for lookups; no more reads are recorded after this.
    pub(crate) fn seal(&mut self) {
        self.points.sort_unstable();
        self.points.dedup();
        self.sealed = true;
    }

    /// The first of `writes` that touches this read set, if any.
    pub(crate) fn first_conflict<'w>(&self, writes: &'w [WrittenKey]) -> Option<&'w WrittenKey> {
        debug_assert!(self.sealed);
        writes.iter().find(|written| self.touches(written))
    }

    fn touches(&self, written: &WrittenKey) -> bool {
        let point_hit = self
            .points
            .binary_search_by(|(table, key)| {
                table
                    .cmp(&written.table)
                    .then_with(|| key.as_bytes().cmp(written.primary.as_bytes()))
            })
            .is_ok();
        point_hit
            || self
                .ranges
                .iter()
                .filter(|range| range.table == written.table)
                .any(|range| match range.index {
                    None => range.contains(written.primary.as_bytes()),
                    Some(index) => written
                        .entries
                        .iter()
                        .any(|(i, entry)| *i == index && range.contains(entry)),
                })
    }
}

/// One row a committing transaction wrote, as validation sees it.
#[derive(Debug)]
pub(crate) struct WrittenKey {
    pub(crate) table: u32,
    pub(crate) primary: Key,
    /// `(secondary index, entry)` for the row before and after the write (each distinct
    /// entry once; a deleted row has only before-entries, an inserted one only after);
    /// never with a physical pointer's version tag.
    pub(crate) entries: Vec<(u16, Vec<u8>)>,
}

/// Not yet drawn: a validator that meets this waits (the owner draws right after
/// publishing).
const NOT_DRAWN: u64 = 0;

/// The keys a committing transaction wrote, published for serializable validators.
pub(crate) struct CommitRecord {
    drawn_ts: AtomicU64,
    pub(crate) owner: Arc<TxnShared>,
    pub(crate) writes: Vec<WrittenKey>,
}

impl CommitRecord {
    pub(crate) fn new(owner: Arc<TxnShared>, writes: Vec<WrittenKey>) -> Self {
        CommitRecord {
            drawn_ts: AtomicU64::new(NOT_DRAWN),
            owner,
            writes,
        }
    }

    /// Called by the owner once it holds its commit timestamp.
    pub(crate) fn set_commit_ts(&self, commit_ts: u64) {
        debug_assert!(commit_ts != NOT_DRAWN, "the clock starts at 1");
        self.drawn_ts.store(commit_ts, Ordering::SeqCst);
    }

    /// The owner's commit timestamp, waiting the few instructions between its publication
    /// and its draw.
    pub(crate) fn commit_ts(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            let ts = self.drawn_ts.load(Ordering::SeqCst);
            if ts != NOT_DRAWN {
                return ts;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                crate::sync::yield_now();
            }
        }
    }

    /// The commit timestamp if drawn, without waiting.
    pub(crate) fn commit_ts_if_drawn(&self) -> Option<u64> {
        match self.drawn_ts.load(Ordering::SeqCst) {
            NOT_DRAWN => None,
            ts => Some(ts),
        }
    }

    /// Whether the owner has decided (committed or rolled back) without waiting; a record
    /// may be dropped only then.
    pub(crate) fn is_decided(&self) -> bool {
        self.owner.is_decided()
    }

    /// Whether the owner committed, waiting while it is still validating.
    pub(crate) fn committed(&self) -> bool {
        matches!(self.owner.outcome(), TxnOutcome::Committed(_))
    }
}

/// Validates a serializable transaction that started at `start_ts` and drew `commit_ts`
/// against the records in `candidates` (every published record, its own excluded). Returns
/// the table index of the first conflicting write of a transaction that committed in
/// between.
///
/// Waiting is well-founded: a validator waits only for records with a smaller commit
/// timestamp, to be drawn or decided, and their owners wait only for smaller ones still.
pub(crate) fn validate(
    reads: &ReadSet,
    start_ts: u64,
    commit_ts: u64,
    candidates: &[Arc<CommitRecord>],
) -> Option<u32> {
    debug_assert!(start_ts <= commit_ts);
    for record in candidates {
        let theirs = record.commit_ts();
        if theirs < start_ts || theirs >= commit_ts {
            continue; // visible to the snapshot already, or serialized after us
        }
        if let Some(written) = reads.first_conflict(&record.writes) {
            if record.committed() {
                return Some(written.table);
            }
        }
    }
    None
}

#[cfg(all(test, loom))]
#[path = "loom_tests.rs"]
mod loom_tests;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn written(table: u32, primary: &[u8], entries: &[(u16, &[u8])]) -> WrittenKey {
        WrittenKey {
            table,
            primary: Key::from_bytes(primary),
            entries: entries.iter().map(|(i, e)| (*i, e.to_vec())).collect(),
        }
    }

    #[test]
    fn points_and_ranges_match_only_their_own_table_and_index() {
        let mut reads = ReadSet::default();
        reads.record_point(1, b"k1");
        reads.record_range(RangeRead {
            table: 2,
            index: None,
            lower: Bound::Included(b"b".to_vec()),
            upper: Bound::Excluded(b"d".to_vec()),
        });
        reads.record_range(RangeRead {
            table: 2,
            index: Some(0),
            lower: Bound::Unbounded,
            upper: Bound::Included(b"m".to_vec()),
        });
        reads.seal();
        assert!(reads.touches(&written(1, b"k1", &[])));
        assert!(!reads.touches(&written(2, b"k1", &[])), "other table");
        assert!(!reads.touches(&written(1, b"k2", &[])));
        assert!(
            reads.touches(&written(2, b"c", &[])),
            "inside the primary range"
        );
        assert!(
            !reads.touches(&written(2, b"d", &[])),
            "upper bound excluded"
        );
        assert!(
            !reads.touches(&written(2, b"a", &[(1, b"a")])),
            "other index"
        );
        assert!(
            reads.touches(&written(2, b"a", &[(0, b"m")])),
            "upper bound included"
        );
        assert!(!reads.touches(&written(2, b"a", &[(0, b"n")])));
    }
}
