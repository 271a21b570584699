//! Multi-version two-phase locking with the no-wait policy, MV2PL (Wu et al. §3.3).
//!
//! Definitions:
//! - Each row carries one **row word** (`VersionStorage::cc_word`) packing the paper's
//!   `txn-id` write lock ([`WRITE_LOCKED`]) and `read-cnt` (the low 32 bits), so that one
//!   compare-and-swap reads and updates both.
//! - A transaction takes a **read lock** before it reads a row (the count goes up, refused
//!   while the write lock is held) and a **write lock** before it writes one (refused while
//!   any other transaction holds a read or write lock; a transaction that holds the only
//!   read lock upgrades it). **No-wait**: a refused lock aborts the transaction at once, so
//!   no transaction ever waits and no deadlock detector is needed.
//! - Locks are held until the transaction's versions are stamped (strict 2PL) and released
//!   after; so the order in which conflicting transactions commit is a serial order.
//! - A locked read sees the **newest committed version** (the read lock keeps it newest),
//!   not the transaction's snapshot: 2PL serializes at the locks, not at the begin.
//!
//! Phantoms. Row locks cannot lock a row that does not exist yet. Scans and point reads
//! that found no row object are recorded and validated at commit against the commit records
//! of the transactions that committed since the transaction began ([`super::precision`],
//! the "extra validation steps when transactions commit" Wu et al. §3 cite). The window
//! starts at the transaction's begin, not at the scan: a row committed in between that the
//! scan did see still fails the validation (a false abort, never a missed one).
//!
//! A transaction declared read-only takes no locks: it reads its snapshot, which is a prefix
//! of the commit order (above), so it is serializable there and never blocks a writer.

use std::sync::atomic::Ordering;

use crate::sync::AtomicU64;

/// The protocol's name in configuration and reports.
pub(crate) const NAME: &str = "mv2pl-no-wait";

/// The write-lock bit of the row word; the low 32 bits count the read locks.
pub(crate) const WRITE_LOCKED: u64 = 1 << 63;

const READERS: u64 = u32::MAX as u64;

/// The lock that was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Another transaction holds the write lock.
    WriteLocked,
    /// Other transactions hold read locks.
    ReadLocked,
}

/// Takes a read lock.
pub(crate) fn read_lock(word: &AtomicU64) -> Result<(), Refusal> {
    let mut current = word.load(Ordering::SeqCst);
    loop {
        if current & WRITE_LOCKED != 0 {
            return Err(Refusal::WriteLocked);
        }
        assert!(current & READERS < READERS, "read locks on one row fit u32");
        match word.compare_exchange_weak(current, current + 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return Ok(()),
            Err(seen) => current = seen,
        }
    }
}

/// Releases a read lock.
pub(crate) fn read_unlock(word: &AtomicU64) {
    let previous = word.fetch_sub(1, Ordering::SeqCst);
    debug_assert!(
        previous & READERS > 0 && previous & WRITE_LOCKED == 0,
        "a held read lock"
    );
}

/// Takes the write lock; `holds_read` says the caller holds a read lock on the row, which
/// the write lock replaces.
pub(crate) fn write_lock(word: &AtomicU64, holds_read: bool) -> Result<(), Refusal> {
    let expected = u64::from(holds_read);
    match word.compare_exchange(expected, WRITE_LOCKED, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => Ok(()),
        Err(seen) if seen & WRITE_LOCKED != 0 => Err(Refusal::WriteLocked),
        Err(_) => Err(Refusal::ReadLocked),
    }
}

/// Releases the write lock.
pub(crate) fn write_unlock(word: &AtomicU64) {
    let previous = word.swap(0, Ordering::SeqCst);
    debug_assert_eq!(previous, WRITE_LOCKED, "a held write lock, and no reader");
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn readers_share_and_writers_exclude_without_waiting() {
        let word = AtomicU64::new(0);
        assert_eq!(read_lock(&word), Ok(()));
        assert_eq!(read_lock(&word), Ok(()));
        assert_eq!(
            write_lock(&word, true),
            Err(Refusal::ReadLocked),
            "another reader"
        );
        read_unlock(&word);
        assert_eq!(write_lock(&word, true), Ok(()), "the only reader upgrades");
        assert_eq!(read_lock(&word), Err(Refusal::WriteLocked));
        assert_eq!(write_lock(&word, false), Err(Refusal::WriteLocked));
        write_unlock(&word);
        assert_eq!(write_lock(&word, false), Ok(()));
        write_unlock(&word);
        assert_eq!(word.load(Ordering::SeqCst), 0);
    }
}
