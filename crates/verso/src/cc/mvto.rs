//! Multi-version timestamp ordering, MVTO (Wu et al. §3.1; Reed 1978).
//!
//! Definitions:
//! - Every transaction takes a **unique id** `T_id` when it begins (the clock is advanced
//!   past it), which is both its snapshot (it sees exactly the transactions with smaller
//!   ids that committed) and the commit timestamp its versions get. The serialization order
//!   is the order of the ids, fixed at begin.
//! - Each row carries one **row word** (`VersionStorage::cc_word`): a write-lock bit
//!   ([`LOCKED`], the paper's `txn-id` field) and, below it, the **read timestamp**: the
//!   largest id of a transaction that read the row (the paper's `read-ts`). The paper keeps
//!   `read-ts` per version; a writer only ever checks the newest version's, and a reader of
//!   an older version has an id below the newest version's begin, hence below any writer's
//!   id, so one word per row refuses exactly what per-version fields refuse.
//!
//! Rules:
//! - **Read.** A row whose write lock another transaction holds cannot be read: the reader
//!   aborts ("MVTO never allows a transaction to read uncommitted versions"). Otherwise it
//!   raises the read timestamp to its id (compare-and-swap on the word) and reads the
//!   version its snapshot sees.
//! - **Write.** The writer takes the lock if it is free and no younger transaction read the
//!   row (`read-ts <= T_id`), in one compare-and-swap; then the storage's first-updater
//!   rule refuses a row whose newest version is newer than `T_id`. Held until the
//!   transaction ends; releasing raises the read timestamp to the holder's id (a write that
//!   found no row read its absence).
//! - **Commit.** The versions are stamped with `T_id`; the locks are released after.
//!
//! Both compare-and-swaps are on the same word, so a read and a write of one row are
//! ordered: either the reader sees the lock (and aborts) or the writer sees the read
//! timestamp (and aborts if the reader is younger). Loom checks it (`cc/loom_tests.rs`).
//!
//! Phantoms. Wu et al. leave range queries out ("multi-versioning does not bring any
//! benefits to phantom prevention"); a real engine cannot. A read that no row word can
//! carry — a scan's key range, a point read that found no row object — is published as a
//! **predicate read** in the [`PredicateLog`] *before* the index is searched. A writer,
//! before it commits, checks its written keys (the commit record's before- and
//! after-images, as precision locking has them) against the predicate reads of younger
//! transactions and aborts if one covers them: its version would have been in a younger
//! snapshot that did not see it. Publication-then-search against insertion-then-check is a
//! Dekker pattern, closed by a sequentially consistent fence on each side: either the
//! search finds the new row (locked: the reader aborts; committed: it is visible) or the
//! check finds the predicate.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use super::precision::{ReadSet, WrittenKey};
use crate::stats::{Counter, SlotStats};
use crate::sync::AtomicU64;

/// The protocol's name in configuration and reports.
pub(crate) const NAME: &str = "mvto";

/// The write-lock bit of the row word; the bits below it hold the read timestamp.
pub(crate) const LOCKED: u64 = 1 << 63;

/// Why MVTO refused to read or write a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Another transaction holds the row's write lock.
    Locked,
    /// A younger transaction read the row: writing it would change what that one read.
    ReadByYounger,
}

/// Records a read of the row by transaction `id`: raises the read timestamp to `id`,
/// unless another transaction holds the write lock.
pub(crate) fn stamp_read(word: &AtomicU64, id: u64) -> Result<(), Refusal> {
    debug_assert!(id < LOCKED);
    let mut current = word.load(Ordering::SeqCst);
    loop {
        if current & LOCKED != 0 {
            return Err(Refusal::Locked);
        }
        if current >= id {
            return Ok(());
        }
        match word.compare_exchange_weak(current, id, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return Ok(()),
            Err(seen) => current = seen,
        }
    }
}

/// Takes the row's write lock for transaction `id` (which does not hold it).
pub(crate) fn lock(word: &AtomicU64, id: u64) -> Result<(), Refusal> {
    debug_assert!(id < LOCKED);
    let mut current = word.load(Ordering::SeqCst);
    loop {
        if current & LOCKED != 0 {
            return Err(Refusal::Locked);
        }
        if current > id {
            return Err(Refusal::ReadByYounger);
        }
        match word.compare_exchange_weak(
            current,
            current | LOCKED,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => return Ok(()),
            Err(seen) => current = seen,
        }
    }
}

/// Releases the write lock transaction `id` holds, leaving a read timestamp of at least
/// `id` (what it read of the row stays protected).
pub(crate) fn unlock(word: &AtomicU64, id: u64) {
    let current = word.load(Ordering::SeqCst);
    debug_assert!(current & LOCKED != 0, "the holder releases a held lock");
    // Nobody else changes a locked word: readers and writers fail without writing.
    word.store((current & !LOCKED).max(id), Ordering::SeqCst);
}

/// The predicate reads (scans, point reads that found no row) of running and recently
/// ended transactions, by reader id.
///
/// Invariant: a predicate read of transaction `R` stays while a transaction that may write
/// with an id below `R` runs (the writers' horizon, which every transaction not declared
/// read-only registers in, is at most `R`): only those can still write what `R` should
/// have seen, since a writer checks only the predicates of younger readers. A declared
/// read-only transaction, however old, holds none back.
///
/// Kept in id order, so that a writer looks only at the readers younger than itself and a
/// publication trims from the front: a long transaction keeps every predicate published
/// since it began, and a walk over all of them made every commit and every publication as
/// slow as that transaction was old (issue 36).
#[derive(Default)]
pub(crate) struct PredicateLog {
    reads: Mutex<BTreeMap<u64, Vec<ReadSet>>>,
}

impl PredicateLog {
    /// Publishes a predicate read of transaction `reader_id`, before the index is searched;
    /// drops those no running or future writer can check (of readers below `writers`).
    pub(crate) fn publish(&self, reader_id: u64, mut reads: ReadSet, writers: u64) {
        reads.seal();
        {
            let mut log = self.reads.lock();
            while log.first_key_value().is_some_and(|(&id, _)| id < writers) {
                log.pop_first();
            }
            log.entry(reader_id).or_default().push(reads);
        }
        crate::sync::fence_seq_cst(); // the publication before the search
    }

    /// The table of the first of `writes` (of the transaction with id `writer_id`) that a
    /// younger transaction's predicate read covers, if any; counts the predicate reads it
    /// looked at in `stats`. Call after every written row is in the indexes.
    pub(crate) fn younger_reader_of(
        &self,
        writer_id: u64,
        writes: &[WrittenKey],
        stats: &SlotStats,
    ) -> Option<u32> {
        crate::sync::fence_seq_cst(); // the insertions before the check
        let mut examined = 0;
        let found = self
            .reads
            .lock()
            .range((Bound::Excluded(writer_id), Bound::Unbounded))
            .flat_map(|(_, reads)| reads)
            .find_map(|reads| {
                examined += 1;
                reads.first_conflict(writes).map(|w| w.table)
            });
        stats.add(Counter::ValidationRecordsExamined, examined);
        found
    }

    /// Whether any predicate read of a transaction younger than `writer_id` is published
    /// (a writer builds its written keys only then); counts the one it looks at (the
    /// youngest) in `stats`.
    pub(crate) fn any_younger_than(&self, writer_id: u64, stats: &SlotStats) -> bool {
        crate::sync::fence_seq_cst(); // the insertions before the check
        let log = self.reads.lock();
        let youngest = log.last_key_value().map(|(&id, _)| id);
        stats.add(
            Counter::ValidationRecordsExamined,
            u64::from(youngest.is_some()),
        );
        youngest.is_some_and(|youngest| youngest > writer_id)
    }

    /// Predicate reads published.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.reads.lock().values().map(Vec::len).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::key::Key;

    fn range(lower: &[u8], upper: &[u8]) -> ReadSet {
        let mut reads = ReadSet::default();
        reads.record_range(super::super::precision::RangeRead {
            table: 0,
            index: None,
            lower: std::ops::Bound::Included(lower.to_vec()),
            upper: std::ops::Bound::Included(upper.to_vec()),
        });
        reads
    }

    fn written(key: &[u8]) -> Vec<WrittenKey> {
        vec![WrittenKey {
            table: 0,
            primary: Key::from_bytes(key),
            entries: Vec::new(),
        }]
    }

    #[test]
    fn only_younger_predicates_refuse_a_writer_and_old_ones_are_dropped() {
        let log = PredicateLog::default();
        let stats = SlotStats::default();
        log.publish(10, range(b"b", b"d"), 0);
        assert!(log.any_younger_than(9, &stats));
        assert!(!log.any_younger_than(10, &stats));
        assert_eq!(
            log.younger_reader_of(9, &written(b"c"), &stats),
            Some(0),
            "inside, younger"
        );
        assert_eq!(
            log.younger_reader_of(9, &written(b"e"), &stats),
            None,
            "outside"
        );
        assert_eq!(
            log.younger_reader_of(11, &written(b"c"), &stats),
            None,
            "the reader is older"
        );
        log.publish(20, range(b"x", b"z"), 11);
        assert_eq!(
            log.len(),
            1,
            "no writer older than the reader at 10 runs (the writers' horizon is 11)"
        );
    }

    #[test]
    fn a_read_raises_the_read_timestamp_and_a_lock_refuses_older_writers() {
        let word = AtomicU64::new(0);
        assert_eq!(stamp_read(&word, 7), Ok(()));
        assert_eq!(stamp_read(&word, 5), Ok(()), "an older reader reads too");
        assert_eq!(word.load(Ordering::SeqCst), 7, "the largest reader stays");
        assert_eq!(lock(&word, 6), Err(Refusal::ReadByYounger));
        assert_eq!(
            lock(&word, 7),
            Ok(()),
            "its own read does not stop a writer"
        );
        assert_eq!(stamp_read(&word, 9), Err(Refusal::Locked));
        assert_eq!(lock(&word, 9), Err(Refusal::Locked));
        unlock(&word, 7);
        assert_eq!(word.load(Ordering::SeqCst), 7);
        assert_eq!(lock(&word, 8), Ok(()));
        unlock(&word, 8);
        assert_eq!(
            word.load(Ordering::SeqCst),
            8,
            "a release leaves the holder's id"
        );
    }
}
