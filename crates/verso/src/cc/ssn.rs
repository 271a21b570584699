//! The serial safety net on snapshot isolation, SI+SSN (Wu et al. §3.4; Wang, Johnson,
//! Fekete, Pandis, VLDB Journal 2017).
//!
//! Definitions (for a committed transaction `T` with snapshot `S_T` and commit stamp
//! `C_T`; `U ->rw V`: `U` read a version that `V` overwrote):
//! - `π(T)`, the **successor low watermark** (the paper's `sstamp`): the smallest of
//!   `C_T` and `π(V)` over the transactions `V` that committed before `T` and overwrote
//!   something `T` read (`T ->rw V`, an edge pointing back in commit order).
//! - `η(T)`, the **predecessor high watermark** (`pstamp`): the largest commit stamp of a
//!   transaction that must come before `T` and committed before it: those `T` read from
//!   or overwrote (all committed before `S_T` under snapshot isolation's first updater
//!   wins), and those that read something `T` overwrote (`R ->rw T`).
//! - **Exclusion**: `T` commits only if `π(T) > η(T)`; Wang et al. prove that a history of
//!   such commits has no dependency cycle (serializable).
//!
//! How Verso computes them. Reads and writes are recorded as precision locking records them
//! (`super::precision`: primary keys and index-key ranges, before- and after-images of
//! the index entries written), so the edges cover predicates too. Commits run one at a
//! time under the log's mutex (serial validation: the log then holds exactly the
//! transactions that committed before, in commit order); each committed transaction
//! leaves `(C, π, reads, writes)` in the log. Then for `T`:
//! - `π(T) = min(C_T, π(V))` over the records with `C_V >= S_T` whose writes touch `T`'s
//!   reads (earlier ones `T` saw: no rw edge);
//! - `η(T) = max(S_T - 1, C_R)` over the records with `C_R >= S_T` whose reads touch `T`'s
//!   writes; `S_T - 1` bounds every predecessor that committed before `T` began.
//!
//! Bounding `η` from above and `π` from below can only add aborts, never lose one.
//! Read-only transactions take part (the log keeps their reads): SSN's order is not the
//! commit order, so a snapshot alone is not safe (the read-only anomaly). A record stays
//! until every running transaction began after it (the watermark).

use std::collections::VecDeque;

use parking_lot::Mutex;

use super::precision::{ReadSet, WrittenKey};

/// The protocol's name in configuration and reports.
pub(crate) const NAME: &str = "si+ssn";

/// A committed transaction as later committers see it.
struct SsnRecord {
    commit_ts: u64,
    /// `π` at its commit.
    pi: u64,
    reads: ReadSet,
    writes: Vec<WrittenKey>,
}

/// A refused commit: the watermarks that met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exclusion {
    pub(crate) pi: u64,
    pub(crate) eta: u64,
}

/// The committed transactions' records, in commit order.
#[derive(Default)]
pub(crate) struct SsnLog {
    records: Mutex<VecDeque<SsnRecord>>,
}

impl SsnLog {
    /// Commits a transaction that began at `start_ts` and read `reads` (sealed) and wrote
    /// `writes`: under the log's mutex, `draw` marks it committing and draws its stamp, the
    /// exclusion test runs, and on success `publish` makes it visible (marks it committed)
    /// before its record joins the log. Records older than `watermark` are dropped.
    pub(crate) fn commit(
        &self,
        start_ts: u64,
        reads: ReadSet,
        writes: Vec<WrittenKey>,
        watermark: u64,
        draw: impl FnOnce() -> u64,
        publish: impl FnOnce(u64),
    ) -> Result<u64, Exclusion> {
        let mut log = self.records.lock();
        while log.front().is_some_and(|r| r.commit_ts < watermark) {
            log.pop_front();
        }
        let commit_ts = draw();
        debug_assert!(log.back().is_none_or(|r| r.commit_ts < commit_ts));
        let mut pi = commit_ts;
        let mut eta = start_ts.saturating_sub(1);
        for record in log.iter().filter(|r| r.commit_ts >= start_ts) {
            if reads.first_conflict(&record.writes).is_some() {
                pi = pi.min(record.pi);
            }
            if !writes.is_empty() && record.reads.first_conflict(&writes).is_some() {
                eta = eta.max(record.commit_ts);
            }
        }
        if pi <= eta {
            return Err(Exclusion { pi, eta });
        }
        publish(commit_ts);
        if !(reads.is_empty() && writes.is_empty()) {
            log.push_back(SsnRecord {
                commit_ts,
                pi,
                reads,
                writes,
            });
        }
        Ok(commit_ts)
    }

    /// Records kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.records.lock().len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::key::Key;

    fn reads_of(keys: &[&[u8]]) -> ReadSet {
        let mut reads = ReadSet::default();
        for key in keys {
            reads.record_point(0, key);
        }
        reads.seal();
        reads
    }

    /// A commit clock that hands out `start + 1`, `start + 2`, ...
    fn clock_after(start: u64) -> impl FnMut() -> u64 {
        let mut clock = start;
        move || {
            clock += 1;
            clock
        }
    }

    fn writes_of(keys: &[&[u8]]) -> Vec<WrittenKey> {
        keys.iter()
            .map(|key| WrittenKey {
                table: 0,
                primary: Key::from_bytes(key),
                entries: Vec::new(),
            })
            .collect()
    }

    /// Both read x and y from the snapshot at 10; one writes x, the other y: the second to
    /// commit has π = C1 (the first overwrote its read) and η = C1 (the first read what it
    /// overwrites).
    #[test]
    fn write_skew_fails_the_second_committer() {
        let log = SsnLog::default();
        let mut draw = clock_after(10);
        let first = log.commit(
            10,
            reads_of(&[b"x", b"y"]),
            writes_of(&[b"x"]),
            0,
            &mut draw,
            |_| {},
        );
        assert_eq!(first, Ok(11));
        let second = log.commit(
            10,
            reads_of(&[b"x", b"y"]),
            writes_of(&[b"y"]),
            0,
            &mut draw,
            |_| panic!("refused commits publish nothing"),
        );
        assert_eq!(second, Err(Exclusion { pi: 11, eta: 11 }));
        assert_eq!(log.len(), 1);
    }

    /// A reader of what a later writer overwrites comes before it: no cycle, both commit,
    /// in either commit order.
    #[test]
    fn a_single_anti_dependency_commits() {
        for reader_first in [true, false] {
            let log = SsnLog::default();
            let mut draw = clock_after(10);
            let (a, b) = if reader_first {
                let a = log.commit(
                    10,
                    reads_of(&[b"x"]),
                    writes_of(&[b"z"]),
                    0,
                    &mut draw,
                    |_| {},
                );
                let b = log.commit(10, reads_of(&[]), writes_of(&[b"x"]), 0, &mut draw, |_| {});
                (a, b)
            } else {
                let b = log.commit(10, reads_of(&[]), writes_of(&[b"x"]), 0, &mut draw, |_| {});
                let a = log.commit(
                    10,
                    reads_of(&[b"x"]),
                    writes_of(&[b"z"]),
                    0,
                    &mut draw,
                    |_| {},
                );
                (a, b)
            };
            assert!(
                a.is_ok() && b.is_ok(),
                "reader first: {reader_first}: {a:?} {b:?}"
            );
        }
    }

    #[test]
    fn records_below_the_watermark_are_dropped() {
        let log = SsnLog::default();
        let mut draw = clock_after(10);
        log.commit(
            10,
            reads_of(&[b"x"]),
            writes_of(&[b"x"]),
            0,
            &mut draw,
            |_| {},
        )
        .unwrap();
        assert_eq!(log.len(), 1);
        log.commit(12, reads_of(&[]), writes_of(&[b"y"]), 12, &mut draw, |_| {})
            .unwrap();
        assert_eq!(
            log.len(),
            1,
            "the first record (11) went, the second joined"
        );
    }
}
