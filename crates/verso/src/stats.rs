//! What the engine measures about itself (`docs/brief.md`): cheap per-thread counters,
//! summed when read.
//!
//! Each counter lives in a thread slot and is written only by the thread that owns the slot
//! (a plain load and store, no read-modify-write), so counting costs no shared traffic.

use std::sync::atomic::Ordering;

use crate::sync::AtomicU64;

/// Number of buckets in a [`ChainHistogram`].
pub const CHAIN_BUCKETS: usize = 16;

#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub(crate) enum Counter {
    TxnBegun,
    Committed,
    CommittedReadOnly,
    AbortedByUser,
    AbortedWriteConflict,
    AbortedSerialization,
    AbortedLockConflict,
    /// Rolled back at commit because the log had failed (nothing of it became visible).
    AbortedDurability,
    VersionsCreated,
    VersionsPrunedEagerly,
    VersionsReclaimed,
    VersionsRolledBack,
    VersionBytesCreated,
    VersionBytesFreed,
    RowsReclaimed,
    GcNanos,
    /// In ticks of [`crate::ticks`]: timed once per write.
    PruneTicks,
    ActiveListRefreshes,
    CommitRecordsPublished,
    CommitRecordsDropped,
    RowsFolded,
    InsertRecordsFolded,
    VersionsPrunedInBackground,
    BackgroundNanos,
    BackgroundRounds,
    TransactionsHandedOut,
    EpochAdvances,
    VersionRetrievalNanos,
    /// In ticks of [`crate::ticks`], like `PruneTicks` (which includes it).
    ActiveListTicks,
    PrefetchKeys,
    PrefetchRowsFound,
    VacuumPasses,
    BlocksVacuumed,
    BlocksSkippedClean,
    RowsVacuumed,
    RowsRecordedForCleaning,
    RowsCleanedCooperatively,
    ValidationRecordsExamined,
}

const COUNTERS: usize = Counter::ValidationRecordsExamined as usize + 1;

/// A slot's counters and histograms.
pub(crate) struct SlotStats {
    counters: [AtomicU64; COUNTERS],
    read_chain: HistogramCell,
    scan_chain: HistogramCell,
    write_chain: HistogramCell,
    gc_chain: HistogramCell,
}

impl Default for SlotStats {
    fn default() -> Self {
        // Arrays derive `Default` only up to 32 elements.
        SlotStats {
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
            read_chain: HistogramCell::default(),
            scan_chain: HistogramCell::default(),
            write_chain: HistogramCell::default(),
            gc_chain: HistogramCell::default(),
        }
    }
}

/// One slot's histogram of chain lengths.
///
/// The owner records; any thread may read. A reader must never see a record half done (an
/// observation counted in its bucket but not yet in `total`, or the reverse): a per-second
/// mean taken from such a snapshot falls below the shortest length recorded. So a record is
/// guarded by `sequence`, a seqlock the owner alone writes (Boehm, "Can seqlocks get along
/// with programming language memory models?", MSPC 2012).
///
/// Invariants: `sequence` is even whenever no record is in progress; a reader's snapshot of
/// `buckets`, `total` and `max` is taken between two equal even readings of it, so it holds
/// whole records only. `window_max` stays outside: the sampler swaps it (see its comment).
#[derive(Default)]
struct HistogramCell {
    /// Odd while the owner is recording, even otherwise; grows by two per record.
    sequence: AtomicU64,
    buckets: [AtomicU64; CHAIN_BUCKETS],
    total: AtomicU64,
    max: AtomicU64,
    /// The longest chain since the last [`crate::Database::sample_stats`]; the sampler
    /// swaps it to 0. The owner's load+store can race with that swap and carry one length
    /// into the next window, which a per-second plot tolerates.
    window_max: AtomicU64,
}

impl HistogramCell {
    fn record(&self, len: usize) {
        // Masked so that even a (forbidden) second writer could not leave it odd for ever.
        let sequence = self.sequence.load(Ordering::Relaxed) & !1;
        self.sequence.store(sequence + 1, Ordering::Relaxed);
        // Orders the odd store before the data: a reader that sees any of this record's
        // data also sees the odd sequence at its second reading, and retries.
        crate::sync::fence(Ordering::Release);
        bump(&self.buckets[chain_bucket(len)], 1);
        bump(&self.total, len as u64);
        if len as u64 > self.max.load(Ordering::Relaxed) {
            self.max.store(len as u64, Ordering::Relaxed);
        }
        self.sequence.store(sequence + 2, Ordering::Release);
        if len as u64 > self.window_max.load(Ordering::Relaxed) {
            self.window_max.store(len as u64, Ordering::Relaxed);
        }
    }

    /// A snapshot of whole records: `(buckets, total, max)`.
    fn read_whole_records(&self) -> ([u64; CHAIN_BUCKETS], u64, u64) {
        loop {
            let before = self.sequence.load(Ordering::Acquire);
            if before % 2 == 1 {
                // A record takes a few instructions; the owner finishes it without waiting.
                crate::sync::yield_now();
                continue;
            }
            let buckets = std::array::from_fn(|b| self.buckets[b].load(Ordering::Relaxed));
            let total = self.total.load(Ordering::Relaxed);
            let max = self.max.load(Ordering::Relaxed);
            // Pairs with the owner's release fence: if a load above saw a newer record's
            // data, the reading below sees that record's odd (or a later) sequence.
            crate::sync::fence(Ordering::Acquire);
            if self.sequence.load(Ordering::Relaxed) == before {
                debug_assert!(
                    total >= buckets[1..].iter().sum::<u64>(),
                    "every observation in a non-zero bucket has a length of at least 1"
                );
                return (buckets, total, max);
            }
        }
    }

    fn add_to(&self, out: &mut ChainHistogram, new_window: bool) {
        let (buckets, total, max) = self.read_whole_records();
        out.total += total;
        for (sum, count) in out.buckets.iter_mut().zip(buckets) {
            *sum += count;
        }
        out.max = out.max.max(max);
        let window_max = if new_window {
            self.window_max.swap(0, Ordering::Relaxed)
        } else {
            self.window_max.load(Ordering::Relaxed)
        };
        out.window_max = out.window_max.max(window_max);
    }
}

/// Owner-only increment: no other thread writes this counter, so load+store is exact.
fn bump(cell: &AtomicU64, by: u64) {
    cell.store(
        cell.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// Bucket of a chain length: 0 for 0, then one bucket per power of two
/// (`1`, `2..=3`, `4..=7`, ...), the last bucket open-ended.
pub fn chain_bucket(len: usize) -> usize {
    ((usize::BITS - len.leading_zeros()) as usize).min(CHAIN_BUCKETS - 1)
}

impl SlotStats {
    pub(crate) fn add(&self, counter: Counter, by: u64) {
        bump(&self.counters[counter as usize], by);
    }

    pub(crate) fn record_read(&self, cost: crate::version::ReadCost) {
        self.read_chain.record(cost.walked);
        if cost.reconstruct_nanos > 0 {
            self.add(Counter::VersionRetrievalNanos, cost.reconstruct_nanos);
        }
    }

    /// A read by a range scan: counted as a read and among the scans' reads.
    pub(crate) fn record_scan_read(&self, cost: crate::version::ReadCost) {
        self.record_read(cost);
        self.scan_chain.record(cost.walked);
    }

    pub(crate) fn record_write_chain(&self, len: usize) {
        self.write_chain.record(len);
    }

    pub(crate) fn record_gc_chain(&self, len: usize) {
        self.gc_chain.record(len);
    }

    /// Adds this slot's counters to `stats`, converting tick counters at `rate`; with
    /// `new_window`, also starts a new window for the histograms' `window_max`.
    pub(crate) fn add_to(&self, stats: &mut Stats, rate: crate::ticks::Rate, new_window: bool) {
        let get = |c: Counter| self.counters[c as usize].load(Ordering::Relaxed);
        stats.transactions_begun += get(Counter::TxnBegun);
        stats.commits += get(Counter::Committed);
        stats.read_only_commits += get(Counter::CommittedReadOnly);
        stats.aborts_by_user += get(Counter::AbortedByUser);
        stats.aborts_write_conflict += get(Counter::AbortedWriteConflict);
        stats.aborts_serialization += get(Counter::AbortedSerialization);
        stats.aborts_lock_conflict += get(Counter::AbortedLockConflict);
        stats.aborts_durability += get(Counter::AbortedDurability);
        stats.versions_created += get(Counter::VersionsCreated);
        stats.versions_pruned_eagerly += get(Counter::VersionsPrunedEagerly);
        stats.versions_reclaimed += get(Counter::VersionsReclaimed);
        stats.versions_rolled_back += get(Counter::VersionsRolledBack);
        stats.version_bytes_created += get(Counter::VersionBytesCreated);
        stats.version_bytes_freed += get(Counter::VersionBytesFreed);
        stats.rows_reclaimed += get(Counter::RowsReclaimed);
        stats.gc_nanos += get(Counter::GcNanos);
        stats.prune_nanos += rate.to_nanos(get(Counter::PruneTicks));
        stats.active_list_refreshes += get(Counter::ActiveListRefreshes);
        stats.commit_records_published += get(Counter::CommitRecordsPublished);
        stats.commit_records_dropped += get(Counter::CommitRecordsDropped);
        stats.validation_records_examined += get(Counter::ValidationRecordsExamined);
        stats.rows_folded += get(Counter::RowsFolded);
        stats.insert_records_folded += get(Counter::InsertRecordsFolded);
        stats.versions_pruned_in_background += get(Counter::VersionsPrunedInBackground);
        stats.background_gc_nanos += get(Counter::BackgroundNanos);
        stats.background_gc_rounds += get(Counter::BackgroundRounds);
        stats.transactions_handed_out += get(Counter::TransactionsHandedOut);
        stats.epoch_advances += get(Counter::EpochAdvances);
        stats.version_retrieval_nanos += get(Counter::VersionRetrievalNanos);
        stats.active_list_nanos += rate.to_nanos(get(Counter::ActiveListTicks));
        stats.prefetch_keys += get(Counter::PrefetchKeys);
        stats.prefetch_rows_found += get(Counter::PrefetchRowsFound);
        stats.vacuum_passes += get(Counter::VacuumPasses);
        stats.blocks_vacuumed += get(Counter::BlocksVacuumed);
        stats.blocks_skipped_clean += get(Counter::BlocksSkippedClean);
        stats.rows_vacuumed += get(Counter::RowsVacuumed);
        stats.rows_recorded_for_cleaning += get(Counter::RowsRecordedForCleaning);
        stats.rows_cleaned_cooperatively += get(Counter::RowsCleanedCooperatively);
        self.read_chain
            .add_to(&mut stats.read_chain_lengths, new_window);
        self.scan_chain
            .add_to(&mut stats.scan_chain_lengths, new_window);
        self.write_chain
            .add_to(&mut stats.write_chain_lengths, new_window);
        self.gc_chain
            .add_to(&mut stats.gc_chain_lengths, new_window);
    }
}

/// Chain lengths seen, in power-of-two buckets (see [`chain_bucket`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChainHistogram {
    /// `buckets[b]` counts lengths whose bucket is `b`.
    pub buckets: [u64; CHAIN_BUCKETS],
    /// Sum of all lengths seen (so `total / count` is the exact mean).
    pub total: u64,
    /// The longest chain seen.
    pub max: u64,
    /// The longest chain seen since the previous [`crate::Database::sample_stats`]
    /// (since the start, for [`crate::Database::stats`], which starts no window).
    pub window_max: u64,
}

impl ChainHistogram {
    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Mean length, 0 when nothing was seen.
    pub fn mean(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.total as f64 / n as f64,
        }
    }
}

/// A snapshot of the engine's counters, summed over all threads. Counters only grow; the
/// `live_*` methods derive what is alive now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Transactions begun.
    pub transactions_begun: u64,
    /// Transactions that committed writes.
    pub commits: u64,
    /// Transactions that committed without writing.
    pub read_only_commits: u64,
    /// Transactions the user aborted (or dropped without committing).
    pub aborts_by_user: u64,
    /// Transactions rolled back by a write-write conflict.
    pub aborts_write_conflict: u64,
    /// Transactions rolled back by a failed serializability validation.
    pub aborts_serialization: u64,
    /// Transactions rolled back because a row lock or read timestamp refused a read or
    /// write (MVTO, MV2PL).
    pub aborts_lock_conflict: u64,
    /// Version records created by writes.
    pub versions_created: u64,
    /// Version records removed from chains by eager pruning (Steam's EPO).
    pub versions_pruned_eagerly: u64,
    /// Version records freed when their transaction fell below the watermark (or, under
    /// the tuple-level collectors, when a pass found them below it).
    pub versions_reclaimed: u64,
    /// Version records freed by rollbacks.
    pub versions_rolled_back: u64,
    /// Insert records folded into their row's birth timestamp at commit (no longer needed
    /// as records: the row keeps the timestamp).
    pub insert_records_folded: u64,
    /// Bytes of version records created.
    pub version_bytes_created: u64,
    /// Bytes of version records freed.
    pub version_bytes_freed: u64,
    /// Deleted rows removed from the indexes and freed.
    pub rows_reclaimed: u64,
    /// Nanoseconds spent finalizing committed transactions (unlinking below the watermark).
    pub gc_nanos: u64,
    /// Nanoseconds spent in eager pruning (including refreshing the active list).
    pub prune_nanos: u64,
    /// Times a thread rebuilt its sorted list of active snapshots.
    pub active_list_refreshes: u64,
    /// Nanoseconds spent rebuilding those lists (Steam Table 5's "fetch active txn-ids";
    /// part of `prune_nanos`).
    pub active_list_nanos: u64,
    /// Commit records published for validation: precision locking's (the keys a
    /// committing transaction wrote, kept while a serializable transaction may validate
    /// against them) and, under SSN, the log's (a committed transaction's reads, writes and
    /// stamps, kept while a running transaction may need them).
    pub commit_records_published: u64,
    /// Commit records and MVTO predicate reads that committing transactions looked at to
    /// validate: the work validation costs. It grows with what committed (or was read)
    /// while each validator ran, not with the age of the oldest running transaction.
    pub validation_records_examined: u64,
    /// Row references moved while folding a thread's queue of committed transactions (the
    /// work a long snapshot costs the committers: it should grow with the commits, not with
    /// their square).
    pub rows_folded: u64,
    /// Commit records dropped (no running or future transaction needed them any more, or
    /// their transaction failed its own validation).
    pub commit_records_dropped: u64,
    /// Version records removed from chains by a background collector's interval pruning
    /// ('Hana': versions no snapshot can see, in chains written after the oldest snapshot).
    pub versions_pruned_in_background: u64,
    /// Nanoseconds a background collector thread worked ('Hana', 'Hekaton'; its
    /// finalizing is also in `gc_nanos`, its pruning also in `prune_nanos`).
    pub background_gc_nanos: u64,
    /// Rounds a background collector thread ran.
    pub background_gc_rounds: u64,
    /// Committed transactions a background collector handed to worker threads to
    /// finalize ('Hekaton').
    pub transactions_handed_out: u64,
    /// Times the global epoch advanced ('Deuteronomy', 'Ermia').
    pub epoch_advances: u64,
    /// Nanoseconds readers spent reconstructing an older version of a row from its chain
    /// (Steam Table 5's "version retrieval"; reads of the newest version are not timed).
    pub version_retrieval_nanos: u64,
    /// Keys handed to `Transaction::prefetch`.
    pub prefetch_keys: u64,
    /// Of those, keys the primary index held a row object for, whose lines the hint then
    /// requested (a row object may hold a row the transaction does not see).
    pub prefetch_rows_found: u64,
    /// Passes the tuple-level collectors' thread made over the tables ('vac': over the
    /// dirty blocks; 'coop': the complete passes for dusty corners).
    pub vacuum_passes: u64,
    /// Blocks whose rows a pass examined.
    pub blocks_vacuumed: u64,
    /// Blocks a 'vac' pass skipped because nobody wrote to them since it last examined
    /// them (the dirty-block bitmap's saving).
    pub blocks_skipped_clean: u64,
    /// Rows a pass examined.
    pub rows_vacuumed: u64,
    /// Transactions rolled back at commit because the log had failed
    /// ([`crate::Error::DurabilityLost`]).
    pub aborts_durability: u64,
    /// The log's, checkpoints' and recovery's counters, for a persistent database (`None`
    /// in memory).
    pub durability: Option<crate::DurabilityStats>,
    /// The persistent-memory region's counters (lines and media bytes written, by
    /// purpose), for a storage that keeps its versions there (`None` otherwise).
    pub persistent_memory: Option<crate::pmem::PmStats>,
    /// The disk engine's counters (`None` for the in-memory engine).
    pub disk: Option<DiskStats>,
    /// Rows a reader or writer recorded for cleaning because it walked past obsolete
    /// versions in their chain ('coop').
    pub rows_recorded_for_cleaning: u64,
    /// Recorded rows the cleaner then cleaned ('coop').
    pub rows_cleaned_cooperatively: u64,
    /// Version records walked per read.
    pub read_chain_lengths: ChainHistogram,
    /// The part of `read_chain_lengths` read by range scans (primary or secondary), the
    /// "table scans" of Steam Table 5.
    pub scan_chain_lengths: ChainHistogram,
    /// Version records behind a row right after a writer installed its version (and, under
    /// Steam, pruned the chain): recorded on every write, under every collector.
    pub write_chain_lengths: ChainHistogram,
    /// Chain lengths the collector met: a writer's chain before it pruned it (Steam), a
    /// row's chain before finalizing cut it.
    pub gc_chain_lengths: ChainHistogram,
}

/// Versions looked at, by who looked ([`Stats::version_accesses`]). A version is counted
/// each time an operation examines it (its header, to decide whether it applies, or its
/// contents); what the counts include is exactly what each field says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VersionAccesses {
    /// By reads: each read examines the row's newest version and then every version it
    /// walks to the one its snapshot sees (per read, 1 + its `read_chain_lengths` entry).
    pub readers: u64,
    /// By writes: each write examines the row's newest version, once (one per
    /// `write_chain_lengths` entry). A pruning walk a writer makes is the collector's.
    pub writers: u64,
    /// By the collector: every chain it met, whole (per `gc_chain_lengths` entry, the
    /// newest version and the records behind it), and each version a block-level
    /// collector (tb-collect) relocated out of a block it freed. A block-level collector
    /// decides which slots are obsolete from the block's update bitmap, not by examining
    /// versions, so the obsolete versions of a freed block are not counted.
    pub collector: u64,
}

impl VersionAccesses {
    /// Accesses by everyone.
    pub fn total(&self) -> u64 {
        self.readers
            .saturating_add(self.writers)
            .saturating_add(self.collector)
    }
}

impl Stats {
    /// Version records alive now.
    pub fn live_versions(&self) -> u64 {
        self.versions_created.saturating_sub(
            self.versions_pruned_eagerly
                + self.versions_pruned_in_background
                + self.versions_reclaimed
                + self.versions_rolled_back
                + self.insert_records_folded,
        )
    }

    /// Bytes of version records alive now.
    pub fn live_version_bytes(&self) -> u64 {
        self.version_bytes_created
            .saturating_sub(self.version_bytes_freed)
    }

    /// Commit records alive now.
    pub fn live_commit_records(&self) -> u64 {
        self.commit_records_published
            .saturating_sub(self.commit_records_dropped)
    }

    /// Versions looked at since the database opened, by who looked: TB-Collect's
    /// "version accesses" (Wei et al. §5.6, Fig. 14: all accesses to versions, the
    /// collector's included, per tuple).
    pub fn version_accesses(&self) -> VersionAccesses {
        let whole_chains = |lengths: &ChainHistogram| lengths.count().saturating_add(lengths.total);
        VersionAccesses {
            readers: whole_chains(&self.read_chain_lengths),
            writers: self.write_chain_lengths.count(),
            collector: whole_chains(&self.gc_chain_lengths).saturating_add(
                self.persistent_memory
                    .as_ref()
                    .map_or(0, |pm| pm.blocks.versions_relocated),
            ),
        }
    }

    /// Transactions aborted for any reason.
    pub fn aborts(&self) -> u64 {
        self.aborts_by_user
            + self.aborts_write_conflict
            + self.aborts_serialization
            + self.aborts_lock_conflict
            + self.aborts_durability
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc;
    use loom::thread;

    use super::{ChainHistogram, HistogramCell};

    /// Found in CI: the lab's per-second sampler read a write-chain mean of 0.99994 while
    /// every write recorded a length of at least 1. The sampler had read `total` before a
    /// record bumped it and that record's bucket after: an observation counted without its
    /// length. A snapshot of one cell must hold whole records only.
    #[test]
    fn loom_regression_a_histogram_snapshot_never_counts_an_observation_without_its_length() {
        loom::model(|| {
            let cell = Arc::new(HistogramCell::default());
            let owner = {
                let cell = Arc::clone(&cell);
                thread::spawn(move || {
                    cell.record(1);
                    cell.record(1);
                })
            };
            let mut seen = ChainHistogram::default();
            cell.add_to(&mut seen, true);
            assert_eq!(
                seen.total,
                seen.count(),
                "every recorded length is 1: {seen:?}"
            );
            owner.join().expect("the owner records");
            let mut after = ChainHistogram::default();
            cell.add_to(&mut after, false);
            assert_eq!((after.total, after.count(), after.max), (2, 2, 1));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(chain_bucket(0), 0);
        assert_eq!(chain_bucket(1), 1);
        assert_eq!(chain_bucket(2), 2);
        assert_eq!(chain_bucket(3), 2);
        assert_eq!(chain_bucket(4), 3);
        assert_eq!(chain_bucket(usize::MAX), CHAIN_BUCKETS - 1);
    }
}

/// The disk engine's counters ([`Stats::disk`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiskStats {
    /// The buffer pool's: pages read, written (sequential and random), evicted; pages
    /// dirtied, by cause (new versions, old versions' stamps, hint bits, index, other),
    /// and pages written for aborted transactions (SI-CV's counters;
    /// `docs/design/buffer-pool.md`, "Counters by cause").
    pub buffer_pool: crate::disk::BufferPoolStats,
    /// The page log's: records, full page images, checkpoints, bytes.
    pub page_log: crate::disk::PageLogStats,
    /// The heaps' (summed over tables): inserts, HOT and cold updates, hint-bit writes,
    /// pruning.
    pub heap: crate::disk::HeapStats,
    /// Pages in every table's heap (InnoDB's design: its clustered tree, which holds the
    /// rows).
    pub heap_pages: u64,
    /// Pages in every table's indexes (primary and secondary B+-trees; InnoDB's design:
    /// the secondary ones).
    pub index_pages: u64,
    /// Pages in every table's files: heap, free-space map and indexes (what PostgreSQL's
    /// `pg_total_relation_size` counts, in pages).
    pub table_pages: u64,
    /// Dead tuples counted since each table's last vacuum (PostgreSQL's `n_dead_tup`).
    pub dead_tuples: u64,
    /// Vacuums autovacuum ran.
    pub vacuums: u64,
    /// InnoDB's design: the undo space (history list length, pages, records written and
    /// read, logs purged and rolled back).
    pub undo: crate::disk::UndoStats,
    /// InnoDB's design, summed over tables: in-place updates, undo hops of readers, rows and
    /// entries purge removed.
    pub clustered: crate::disk::ClusteredStats,
}
