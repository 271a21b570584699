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
//! commit order, so a snapshot alone is not safe (the read-only anomaly).
//!
//! How long a record `V` is kept. `T` looks only at the records in its window
//! (`C_V >= S_T`), found by walking the log back from the newest, so old records cost a
//! committer nothing; but they cost memory, and a long transaction holds them. What `T`
//! needs of `V`:
//! - if `T` writes: `V`'s reads (for `η`) and `V`'s writes and `π(V)` (for `π`). Every
//!   transaction that may write, i.e. every one not declared read-only, registers its start
//!   in the slots' serializable horizon (`TxnManager::begin_serializable`); below that
//!   horizon no running or future writer has `V` in its window.
//! - if `T` writes nothing: `η(T) = S_T - 1`, so `T` fails only if `π(T) < S_T`, that is,
//!   only on a `V` that overwrote `T`'s read with `π(V) < S_T <= C_V`. Such a `V` needs
//!   only its writes and `π` kept (`V`'s own reads matter to writers alone), and only while
//!   a transaction that began in `(π(V), C_V]` runs. In a history without rw edges back
//!   in time, `π(V) = C_V` and no reader needs `V` at all.
//!
//! So below the writers' horizon a record is dropped, or kept as writes and `π` only
//! ([`ForReaders`]) while a running transaction began in `(π(V), C_V]` (the slots' active
//! starts; kept ones are checked again each time their list doubles). A declared read-only
//! transaction, however long, then holds back almost nothing; a long transaction that may
//! write holds every record since it began, as its own exclusion test needs them all
//! (`docs/known-issues.md`).

use std::collections::VecDeque;

use parking_lot::Mutex;

use super::precision::{ReadSet, WrittenKey};
use crate::stats::{Counter, SlotStats};
use crate::version::ActiveSnapshots;

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

/// What a transaction that writes nothing needs of a record below the writers' horizon:
/// its writes and `π`, while a running transaction began in `(π, commit_ts]`.
struct ForReaders {
    commit_ts: u64,
    pi: u64,
    writes: Vec<WrittenKey>,
}

impl ForReaders {
    /// Whether a transaction that began at one of `active`'s starts (or later) can fail on
    /// this record: one began in `(pi, commit_ts]`.
    fn needed(&self, active: &ActiveSnapshots) -> bool {
        active
            .starts_desc()
            .iter()
            .any(|&start| self.pi < start && start <= self.commit_ts)
    }
}

/// A refused commit: the watermarks that met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exclusion {
    pub(crate) pi: u64,
    pub(crate) eta: u64,
}

/// The records, each list in commit order.
#[derive(Default)]
struct Records {
    /// Committed at or above the writers' horizon (as of the last trim): whole.
    recent: VecDeque<SsnRecord>,
    /// Below it: what transactions that write nothing may still need.
    for_readers: VecDeque<ForReaders>,
    /// `for_readers` is checked against the active starts again when it reaches this
    /// length.
    check_readers_at: usize,
}

/// The length at which [`Records::for_readers`] is first checked again.
const CHECK_READERS_FIRST: usize = 64;

/// The active starts, asked of `active` the first time only.
fn asked_once<'a, A: FnOnce() -> ActiveSnapshots>(
    cache: &'a mut Option<ActiveSnapshots>,
    active: &mut Option<A>,
) -> &'a ActiveSnapshots {
    cache.get_or_insert_with(|| (active.take().expect("asked once"))())
}

/// The committed transactions' records.
#[derive(Default)]
pub(crate) struct SsnLog {
    records: Mutex<Records>,
}

/// What bounds which records a commit must keep (read before the log's mutex is taken).
pub(crate) struct Horizons<A: FnOnce() -> ActiveSnapshots> {
    /// No running or future transaction began before it (`TxnManager::watermark`).
    pub(crate) watermark: u64,
    /// No running or future transaction that may write began before it (the slots'
    /// serializable horizon).
    pub(crate) writers: u64,
    /// The start timestamps of the running transactions, asked for only when a record
    /// below the writers' horizon may be needed by one that writes nothing.
    pub(crate) active: A,
}

impl SsnLog {
    /// Commits a transaction that began at `start_ts` and read `reads` (sealed) and wrote
    /// `writes`: under the log's mutex, `draw` marks it committing and draws its stamp, the
    /// exclusion test runs, and on success `publish` makes it visible (marks it committed)
    /// before its record joins the log. First drops what no transaction needs any more
    /// (`horizons`; the module's header says what each needs). Counts the records it
    /// looked at, kept and dropped in `stats` (as commit records).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit<A: FnOnce() -> ActiveSnapshots>(
        &self,
        start_ts: u64,
        reads: ReadSet,
        writes: Vec<WrittenKey>,
        horizons: Horizons<A>,
        draw: impl FnOnce() -> u64,
        publish: impl FnOnce(u64),
        stats: &SlotStats,
    ) -> Result<u64, Exclusion> {
        let mut log = self.records.lock();
        let dropped = log.trim(horizons);
        stats.add(Counter::CommitRecordsDropped, dropped);
        let mut examined = 0;
        let commit_ts = draw();
        debug_assert!(log.recent.back().is_none_or(|r| r.commit_ts < commit_ts));
        let mut pi = commit_ts;
        let mut eta = start_ts.saturating_sub(1);
        // Only the records committed since `start_ts` take part, found from the newest
        // back: a long transaction holds records since its start, and a walk over all of
        // them made every commit as slow as that transaction was old (issue 36).
        let window = log.recent.iter().rev().take_while(|r| {
            examined += 1;
            r.commit_ts >= start_ts
        });
        for record in window {
            if reads.first_conflict(&record.writes).is_some() {
                pi = pi.min(record.pi);
            }
            if !writes.is_empty() && record.reads.first_conflict(&writes).is_some() {
                eta = eta.max(record.commit_ts);
            }
        }
        // Below the writers' horizon: nothing in the window of a transaction that writes
        // (it registered before it began), only `π` for one that does not.
        let older = log.for_readers.iter().rev().take_while(|r| {
            examined += 1;
            r.commit_ts >= start_ts
        });
        for record in older {
            debug_assert!(
                writes.is_empty(),
                "a writer began above the writers' horizon"
            );
            if reads.first_conflict(&record.writes).is_some() {
                pi = pi.min(record.pi);
            }
        }
        stats.add(Counter::ValidationRecordsExamined, examined);
        if pi <= eta {
            return Err(Exclusion { pi, eta });
        }
        publish(commit_ts);
        if !(reads.is_empty() && writes.is_empty()) {
            log.recent.push_back(SsnRecord {
                commit_ts,
                pi,
                reads,
                writes,
            });
            stats.add(Counter::CommitRecordsPublished, 1);
        }
        Ok(commit_ts)
    }

    /// Records kept, whole and for readers.
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, usize) {
        let log = self.records.lock();
        (log.recent.len(), log.for_readers.len())
    }
}

impl Records {
    /// Drops what no running or future transaction needs, and keeps of a record below the
    /// writers' horizon only what one that writes nothing may need. Returns how many
    /// records it dropped.
    fn trim<A: FnOnce() -> ActiveSnapshots>(&mut self, horizons: Horizons<A>) -> u64 {
        let Horizons {
            watermark,
            writers,
            active,
        } = horizons;
        let mut active = Some(active);
        let mut snapshots = None;
        let before = self.recent.len() + self.for_readers.len();
        while self.recent.front().is_some_and(|r| r.commit_ts < writers) {
            let record = self.recent.pop_front().expect("a front record");
            // A transaction that wrote nothing has nothing a reader can fail on, and one
            // with `π = C` fails no reader either.
            if record.commit_ts < watermark
                || record.writes.is_empty()
                || record.pi >= record.commit_ts
            {
                continue;
            }
            let kept = ForReaders {
                commit_ts: record.commit_ts,
                pi: record.pi,
                writes: record.writes,
            };
            if kept.needed(asked_once(&mut snapshots, &mut active)) {
                self.for_readers.push_back(kept);
            }
        }
        while self
            .for_readers
            .front()
            .is_some_and(|r| r.commit_ts < watermark)
        {
            self.for_readers.pop_front();
        }
        if self.for_readers.len() >= self.check_readers_at.max(CHECK_READERS_FIRST) {
            // The transactions a kept record was for may have ended: check them all again,
            // each time the list doubles (amortized a constant per record).
            let active = asked_once(&mut snapshots, &mut active);
            self.for_readers.retain(|r| r.needed(active));
            self.check_readers_at = 2 * self.for_readers.len();
        }
        (before - self.recent.len() - self.for_readers.len()) as u64
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

    /// Horizons that keep everything (nothing began before 0).
    fn keep_all() -> Horizons<impl FnOnce() -> ActiveSnapshots> {
        horizons(0, 0, &[])
    }

    /// Horizons with these running starts (the clock far ahead).
    fn horizons(
        watermark: u64,
        writers: u64,
        running: &[u64],
    ) -> Horizons<impl FnOnce() -> ActiveSnapshots> {
        let running = running.to_vec();
        Horizons {
            watermark,
            writers,
            active: move || ActiveSnapshots::new(u64::MAX, running),
        }
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
            keep_all(),
            &mut draw,
            |_| {},
            &SlotStats::default(),
        );
        assert_eq!(first, Ok(11));
        let second = log.commit(
            10,
            reads_of(&[b"x", b"y"]),
            writes_of(&[b"y"]),
            keep_all(),
            &mut draw,
            |_| panic!("refused commits publish nothing"),
            &SlotStats::default(),
        );
        assert_eq!(second, Err(Exclusion { pi: 11, eta: 11 }));
        assert_eq!(log.len(), (1, 0));
    }

    /// A reader of what a later writer overwrites comes before it: no cycle, both commit,
    /// in either commit order.
    #[test]
    fn a_single_anti_dependency_commits() {
        for reader_first in [true, false] {
            let log = SsnLog::default();
            let mut draw = clock_after(10);
            let mut commit = |reads: &[&[u8]], writes: &[&[u8]]| {
                log.commit(
                    10,
                    reads_of(reads),
                    writes_of(writes),
                    keep_all(),
                    &mut draw,
                    |_| {},
                    &SlotStats::default(),
                )
            };
            let (a, b) = if reader_first {
                let a = commit(&[b"x"], &[b"z"]);
                (a, commit(&[], &[b"x"]))
            } else {
                let b = commit(&[], &[b"x"]);
                (commit(&[b"x"], &[b"z"]), b)
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
            keep_all(),
            &mut draw,
            |_| {},
            &SlotStats::default(),
        )
        .unwrap();
        assert_eq!(log.len(), (1, 0));
        log.commit(
            12,
            reads_of(&[]),
            writes_of(&[b"y"]),
            horizons(12, 12, &[12]),
            &mut draw,
            |_| {},
            &SlotStats::default(),
        )
        .unwrap();
        assert_eq!(
            log.len(),
            (1, 0),
            "the first record (11) went, the second joined"
        );
    }

    /// The read-only anomaly (Fekete et al.), with the reader's snapshot far behind the
    /// writers' horizon: W1 (begun at 10) reads x and y and writes y; W2 (begun at 10)
    /// writes x and commits first (11); R begins at 12, reads x (W2's) and y (before W1),
    /// and commits after W1 (13). W1 ->rw W2 gives π(W1) = 11 < C(W1) = 13, so W1's record
    /// is kept, as writes and π, for a reader begun in (11, 13]: R fails on it although
    /// the writers' horizon (14) is past everything. A record with π = C is dropped there.
    #[test]
    fn a_reader_behind_the_writers_horizon_still_meets_the_read_only_anomaly() {
        let log = SsnLog::default();
        let mut draw = clock_after(10);
        assert_eq!(
            log.commit(
                10,
                reads_of(&[]),
                writes_of(&[b"x"]),
                keep_all(),
                &mut draw,
                |_| {},
                &SlotStats::default(),
            ),
            Ok(11)
        );
        let _reader_begins = draw(); // 12
        assert_eq!(
            log.commit(
                10,
                reads_of(&[b"x", b"y"]),
                writes_of(&[b"y"]),
                keep_all(),
                &mut draw,
                |_| {},
                &SlotStats::default(),
            ),
            Ok(13),
            "W1 -rw-> W2 alone is no cycle"
        );
        // A writer commits with every writer's start past 13; only R (12) runs otherwise.
        let _writer_begins = draw(); // 14
        assert_eq!(
            log.commit(
                14,
                reads_of(&[]),
                writes_of(&[b"z"]),
                horizons(12, 14, &[12, 14]),
                &mut draw,
                |_| {},
                &SlotStats::default(),
            ),
            Ok(15)
        );
        assert_eq!(log.len(), (1, 1), "W2 (π = C) went; W1 stays for R");
        let read_only = log.commit(
            12,
            reads_of(&[b"x", b"y"]),
            Vec::new(),
            horizons(12, 16, &[12]),
            &mut draw,
            |_| panic!("refused commits publish nothing"),
            &SlotStats::default(),
        );
        assert_eq!(read_only, Err(Exclusion { pi: 11, eta: 11 }));
    }

    /// A record kept for readers goes once no running transaction began in (π, C]: at the
    /// check when the list has doubled.
    #[test]
    fn records_kept_for_readers_go_when_those_readers_end() {
        let log = SsnLog::default();
        {
            let mut records = log.records.lock();
            for i in 0..CHECK_READERS_FIRST as u64 - 1 {
                records.for_readers.push_back(ForReaders {
                    commit_ts: 100 + 2 * i,
                    pi: 99 + 2 * i,
                    writes: writes_of(&[b"x"]),
                });
            }
        }
        let mut draw = clock_after(1_000);
        // The one reader that needed them (began at 100) ended; a long one began at 50.
        log.commit(
            1_000,
            reads_of(&[]),
            writes_of(&[b"y"]),
            horizons(50, 1_000, &[50]),
            &mut draw,
            |_| {},
            &SlotStats::default(),
        )
        .unwrap();
        assert_eq!(log.len(), (1, CHECK_READERS_FIRST - 1), "not checked yet");
        {
            let mut records = log.records.lock();
            records.for_readers.push_back(ForReaders {
                commit_ts: 500,
                pi: 40,
                writes: writes_of(&[b"x"]),
            });
        }
        log.commit(
            1_001,
            reads_of(&[]),
            writes_of(&[b"z"]),
            horizons(50, 1_002, &[50]),
            &mut draw,
            |_| {},
            &SlotStats::default(),
        )
        .unwrap();
        assert_eq!(
            log.len(),
            (1, 1),
            "the first writer (π = C) went; of the kept records only the one the reader at \
             50 needs stays"
        );
    }
}
