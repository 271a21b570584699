//! The shared state of one writing transaction, which readers consult to resolve a version
//! record that its transaction has not stamped yet.

use std::sync::atomic::Ordering;

use crate::sync::AtomicU64;

/// Largest timestamp the clock may hand out; every state marker is above it.
pub(crate) const MAX_TIMESTAMP: u64 = (1 << 62) - 1;
/// The transaction is running (or rolling back): its versions are invisible to others.
const ACTIVE: u64 = u64::MAX;
/// The transaction has decided to commit and is taking its timestamp; wait for it.
const COMMITTING: u64 = u64::MAX - 1;
/// The transaction rolled back.
const ABORTED: u64 = u64::MAX - 2;

/// What a reader learns from a transaction's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxnOutcome {
    /// Running or rolled back: its writes are not visible to anyone else.
    Uncommitted,
    /// Committed at this timestamp.
    Committed(u64),
}

/// The state word of a writing transaction.
///
/// Invariant: moves only ACTIVE → COMMITTING → commit timestamp, or ACTIVE → ABORTED.
/// COMMITTING is stored (SeqCst) *before* the commit timestamp is drawn from the clock, so a
/// reader that began after the draw (its start timestamp is larger) can never see ACTIVE:
/// it sees COMMITTING and waits, or the final timestamp. This makes a commit atomic for
/// readers without a second shared counter (brief: atomic commits, `docs/brief.md`).
#[derive(Debug)]
pub(crate) struct TxnShared {
    state: AtomicU64,
    /// Records a version storage with a durable home of its own appended for the
    /// transaction (the tile-block storage's commit record carries the count). Only the
    /// transaction's own thread changes it.
    storage_records: std::sync::atomic::AtomicU32,
    /// The blocks (the storage's ids) the transaction's records went to, in order; the
    /// last also in `last_storage_block`, so that another record in the same block takes
    /// no lock. Only the transaction's own thread changes them.
    storage_blocks: std::sync::Mutex<Vec<u64>>,
    last_storage_block: std::sync::atomic::AtomicU64,
    /// `storage_blocks`' length, read without the lock.
    storage_block_count: std::sync::atomic::AtomicU32,
    /// The storage could not record something the transaction's commit needs: it must
    /// not commit.
    storage_poisoned: std::sync::atomic::AtomicBool,
}

impl TxnShared {
    pub(crate) fn new() -> Self {
        TxnShared {
            state: AtomicU64::new(ACTIVE),
            storage_records: std::sync::atomic::AtomicU32::new(0),
            storage_blocks: std::sync::Mutex::new(Vec::new()),
            last_storage_block: std::sync::atomic::AtomicU64::new(u64::MAX),
            storage_block_count: std::sync::atomic::AtomicU32::new(0),
            storage_poisoned: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The transaction's storage appended a record to block `block`.
    pub(crate) fn note_storage_block(&self, block: u64) {
        if self.last_storage_block.load(Ordering::Relaxed) != block {
            self.last_storage_block.store(block, Ordering::Relaxed);
            self.storage_block_count.fetch_add(1, Ordering::Relaxed);
            self.storage_blocks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(block);
        }
    }

    /// How many of the transaction's blocks come before `block` if its next record goes
    /// there: the record's sequence, which orders its records across blocks for recovery.
    pub(crate) fn storage_block_sequence(&self, block: u64) -> u32 {
        let count = self.storage_block_count.load(Ordering::Relaxed);
        if self.last_storage_block.load(Ordering::Relaxed) == block {
            count - 1
        } else {
            count
        }
    }

    /// The storage could not record what the transaction's commit needs: its commit fails.
    pub(crate) fn poison_storage(&self) {
        self.storage_poisoned.store(true, Ordering::Relaxed);
    }

    /// Whether [`Self::poison_storage`] was called.
    pub(crate) fn storage_poisoned(&self) -> bool {
        self.storage_poisoned.load(Ordering::Relaxed)
    }

    /// The blocks the transaction's records went to ([`Self::note_storage_block`]).
    pub(crate) fn storage_blocks(&self) -> Vec<u64> {
        self.storage_blocks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One more record appended for the transaction by its storage.
    pub(crate) fn count_storage_record(&self) {
        self.storage_records.fetch_add(1, Ordering::Relaxed);
    }

    /// The records appended for the transaction by its storage.
    pub(crate) fn storage_records(&self) -> u32 {
        self.storage_records.load(Ordering::Relaxed)
    }

    /// The transaction's outcome; spins (yielding) while it is between COMMITTING and its
    /// timestamp, which takes two instructions on the committing thread.
    pub(crate) fn outcome(&self) -> TxnOutcome {
        let mut spins = 0u32;
        loop {
            match self.state.load(Ordering::SeqCst) {
                ACTIVE | ABORTED => return TxnOutcome::Uncommitted,
                COMMITTING => {
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        crate::sync::yield_now();
                    }
                }
                ts => {
                    debug_assert!(ts <= MAX_TIMESTAMP);
                    return TxnOutcome::Committed(ts);
                }
            }
        }
    }

    /// Committed or rolled back (not running, not committing), without waiting.
    pub(crate) fn is_decided(&self) -> bool {
        !matches!(self.state.load(Ordering::SeqCst), ACTIVE | COMMITTING)
    }

    pub(crate) fn mark_committing(&self) {
        let previous = self.state.swap(COMMITTING, Ordering::SeqCst);
        debug_assert_eq!(previous, ACTIVE, "only an active transaction can commit");
    }

    pub(crate) fn mark_committed(&self, commit_ts: u64) {
        debug_assert!(commit_ts <= MAX_TIMESTAMP);
        let previous = self.state.swap(commit_ts, Ordering::SeqCst);
        debug_assert_eq!(previous, COMMITTING);
    }

    /// A committing transaction goes back to ACTIVE (its records are still invisible): when
    /// its validation failed, so that it rolls back like any active transaction; or when it
    /// must prepare more before drawing a timestamp again. A reader that began after the
    /// abandoned draw waited and now sees ACTIVE, which is right: any later draw is larger
    /// than its start.
    pub(crate) fn mark_not_committing(&self) {
        let previous = self.state.swap(ACTIVE, Ordering::SeqCst);
        debug_assert_eq!(previous, COMMITTING);
    }

    pub(crate) fn mark_aborted(&self) {
        let previous = self.state.swap(ABORTED, Ordering::SeqCst);
        debug_assert_eq!(previous, ACTIVE, "only an active transaction can abort");
    }
}
