//! The disk engine's transactions: snapshots are Verso's timestamps (the in-memory engine's
//! clock and per-thread slots, `txn::slots`), writers are PostgreSQL's transaction ids
//! (from the [`CommitLog`], taken at the first write), and a transaction's fate is read
//! from a table of the running ones in memory, then from the commit log (design note:
//! `docs/design/buffer-pool.md`, "Disk transactions").
//!
//! # Definitions
//!
//! - A snapshot's *start* is the clock when it began; it sees exactly the transactions
//!   that committed at a timestamp below its start, and its own writes.
//! - A writer is *live* from [`DiskTransaction::xid`] (its first write) until its end is
//!   in the commit log; the live table holds its state meanwhile: running, committing
//!   (its commit timestamp drawn, its outcome not yet decided), or committed (its commit
//!   record appended).
//!
//! # Invariants
//!
//! - **T1** An id is in the live table before any tuple carries it, and leaves only after
//!   its end is set in the commit log's page: so a reader that finds an id in a tuple and
//!   not in the table finds its end in the commit log.
//! - **T2** The commit window (from the commit timestamp's draw to the commit record's
//!   append) does no I/O: the commit log's entry page is latched before the draw
//!   ([`CommitLog::prepare_end`]). The writer is marked committing, at a lower bound of its
//!   timestamp (the clock), before the draw, then at the timestamp drawn: a snapshot that
//!   began after the draw (its start above the timestamp) never takes it for running (a
//!   review found it did, between the draw and the mark). A reader waits in the window
//!   only if its snapshot could see the commit; for any other snapshot a committing
//!   writer is as good as running.
//! - **T3** A reader acts on a commit only after its record is appended (the live state
//!   says committed, or the commit log has it), so whatever the reader then logs lies
//!   after that record: a transaction that read a commit is never durable before it.
//! - **T4** A hint that a transaction committed is set on a page only with the page's LSN
//!   raised to the commit record's end (or past it), so the write-ahead rule keeps the
//!   hint off the files until the commit is durable.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use super::commit_log::{CommitLog, TransactionStatus};
use crate::sync::Mutex;
use crate::txn::slots::{LocalSlot, TxnManager};
use crate::{Error, Result};

const LIVE_SHARDS: usize = 64;

/// A live writer's state ([`DiskTransactions`]'s table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Live {
    Running,
    /// Committing at a timestamp at or above this one (a lower bound until the draw,
    /// then the timestamp drawn); the outcome is not decided yet.
    Committing(u64),
    /// Ended without an end in the commit log (an I/O error at its end): aborted for
    /// this run, as a restart will read it (X3). Stays in the table until then.
    Aborted,
    /// The commit record is appended and ends at `lsn`.
    Committed {
        ts: u64,
        lsn: u64,
    },
}

/// What a snapshot needs to know of a transaction id found in a tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Running, or committing at a timestamp the asking snapshot cannot see: its writes
    /// are not there for that snapshot, and a writer must not overwrite them.
    Running,
    /// Committed at `ts`; its record ends at or before `lsn` (T4).
    Committed {
        /// The commit timestamp.
        ts: u64,
        /// An LSN at or past the end of the commit record.
        lsn: u64,
    },
    /// Aborted, or ended by a crash before it committed.
    Aborted,
}

/// Resolves transaction ids for visibility checks: [`DiskTransactions`], or a test's model.
pub trait Resolve {
    /// The fate of `xid` as a snapshot starting at `start` must see it. May wait for a
    /// commit in its window (T2); may read the commit log.
    fn resolve(&self, xid: u64, start: u64) -> Result<Fate>;

    /// The oldest snapshot any transaction holds now or can take later: a version whose
    /// deleter committed below it is seen by no one (PostgreSQL's xmin horizon).
    fn horizon(&self) -> u64;

    /// The snapshots that may read versions newer than the horizon (for eager pruning).
    fn readers(&self) -> super::visibility::Readers;
}

/// One shard of the running transactions by xid (foldhash: every visibility check that
/// misses the hint bits looks here).
type LiveShard = Mutex<HashMap<u64, Live, foldhash::fast::FixedState>>;

/// The transactions of one disk database.
pub struct DiskTransactions {
    commit_log: CommitLog,
    manager: TxnManager<()>,
    live: Box<[LiveShard]>,
    /// Shared with the buffer pool, which asks it which transactions aborted
    /// ([`super::BufferPool::watch_aborts`]).
    fates: Arc<FateCache>,
}

const FATE_CACHE_SLOTS: usize = 1 << 16;
/// A cache slot's id while a writer fills it.
const FILLING: u64 = u64::MAX;

/// Final fates (committed at a timestamp, with the LSN its record ends by; or aborted) of
/// recent ids, by id modulo its size. PostgreSQL's readers decide most tuples by hint bits
/// and their snapshot's list of running ids; a snapshot here compares commit timestamps,
/// which no hint holds, so without this every check of a committed `xmin` or `xmax` would
/// read the commit log's page (a pool lookup and a latch): behind a long snapshot, a read
/// of a row with a long chain checks every version. A fate is final once known and ids are
/// never reused (X1), so an entry is never stale.
struct FateCache {
    slots: Box<[CachedFate]>,
}

struct CachedFate {
    /// The id the slot holds (0: none; [`FILLING`]: a writer is filling it).
    xid: std::sync::atomic::AtomicU64,
    ts: std::sync::atomic::AtomicU64,
    lsn: std::sync::atomic::AtomicU64,
}

impl FateCache {
    fn new() -> Self {
        FateCache {
            slots: (0..FATE_CACHE_SLOTS)
                .map(|_| CachedFate {
                    xid: Default::default(),
                    ts: Default::default(),
                    lsn: Default::default(),
                })
                .collect(),
        }
    }

    fn slot(&self, xid: u64) -> &CachedFate {
        &self.slots[xid as usize % FATE_CACHE_SLOTS]
    }

    /// The fate of `xid` if cached: the slot held `xid` before and after its fields were
    /// read, so they are `xid`'s (a writer claims the slot before it writes them).
    fn get(&self, xid: u64) -> Option<Fate> {
        use std::sync::atomic::Ordering::SeqCst;
        let slot = self.slot(xid);
        if slot.xid.load(SeqCst) != xid {
            return None;
        }
        let (ts, lsn) = (slot.ts.load(SeqCst), slot.lsn.load(SeqCst));
        if slot.xid.load(SeqCst) != xid {
            return None;
        }
        Some(if ts == super::commit_log::ABORTED {
            Fate::Aborted
        } else {
            Fate::Committed { ts, lsn }
        })
    }

    /// Caches a final fate (skipped if another writer holds the slot).
    fn put(&self, xid: u64, fate: Fate) {
        use std::sync::atomic::Ordering::SeqCst;
        let (ts, lsn) = match fate {
            Fate::Committed { ts, lsn } => (ts, lsn),
            Fate::Aborted => (super::commit_log::ABORTED, 0),
            Fate::Running => return,
        };
        let slot = self.slot(xid);
        let old = slot.xid.load(SeqCst);
        if old == FILLING
            || slot
                .xid
                .compare_exchange(old, FILLING, SeqCst, SeqCst)
                .is_err()
        {
            return;
        }
        slot.ts.store(ts, SeqCst);
        slot.lsn.store(lsn, SeqCst);
        slot.xid.store(xid, SeqCst);
    }
}

impl super::buffer_pool::AbortedTransactions for FateCache {
    /// From the cache only (no lookup of the commit log: asked during a write-back): an
    /// abort is cached when it happens, so this misses only an id whose slot a later id
    /// took (65,536 ids later) or an abort that found its slot being filled.
    fn has_aborted(&self, xid: u64) -> bool {
        self.get(xid) == Some(Fate::Aborted)
    }
}

impl std::fmt::Debug for DiskTransactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskTransactions")
            .field("clock", &self.manager.clock())
            .field("next_xid", &self.commit_log.next_xid())
            .finish()
    }
}

impl DiskTransactions {
    /// Transactions over `commit_log`, with the clock past every commit timestamp in it.
    pub fn open(commit_log: CommitLog) -> Result<Self> {
        let manager = TxnManager::new();
        manager.advance_clock_past(commit_log.newest_commit_ts()?);
        let fates = Arc::new(FateCache::new());
        // The pool's count of pages written for aborted transactions asks the cache.
        commit_log
            .pool()
            .watch_aborts(Arc::clone(&fates) as Arc<dyn super::buffer_pool::AbortedTransactions>);
        Ok(DiskTransactions {
            commit_log,
            manager,
            live: (0..LIVE_SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            fates,
        })
    }

    /// The commit log.
    pub fn commit_log(&self) -> &CommitLog {
        &self.commit_log
    }

    /// The clock: the commit timestamp the next committer takes.
    pub fn clock(&self) -> u64 {
        self.manager.clock()
    }

    /// Begins a transaction on this thread: its snapshot is published (it holds back
    /// [`Resolve::horizon`]) until it ends, on this thread.
    pub fn begin(&self) -> Result<DiskTransaction<'_>> {
        self.begin_as(false)
    }

    /// Begins a transaction that validates its reads at commit (serializable): it is also
    /// published as one, so that writers committing while it runs publish commit records
    /// for it (`cc::precision`).
    pub(crate) fn begin_as(&self, serializable: bool) -> Result<DiskTransaction<'_>> {
        let local = self.manager.local().ok_or(Error::CapacityExceeded {
            what: "threads with a transaction open on one database".into(),
            limit: crate::txn::slots::MAX_THREADS,
        })?;
        let start = if serializable {
            self.manager.begin_serializable(&local, false)
        } else {
            self.manager.begin(&local)
        };
        Ok(DiskTransaction {
            txns: self,
            local,
            start,
            xid: 0,
            serializable,
            ended: false,
        })
    }

    /// The slots' manager (commit records, the serializable horizon).
    pub(crate) fn manager(&self) -> &TxnManager<()> {
        &self.manager
    }

    fn shard(&self, xid: u64) -> &LiveShard {
        &self.live[(xid as usize) % LIVE_SHARDS]
    }

    fn set_live(&self, xid: u64, state: Option<Live>) {
        let mut shard = self.shard(xid).lock();
        match state {
            Some(state) => {
                shard.insert(xid, state);
            }
            None => {
                shard.remove(&xid);
            }
        }
    }

    /// Whether `xid` is live (for tests of T1).
    pub fn is_live(&self, xid: u64) -> bool {
        self.shard(xid).lock().contains_key(&xid)
    }
}

impl Resolve for DiskTransactions {
    fn horizon(&self) -> u64 {
        self.manager.watermark()
    }

    fn readers(&self) -> super::visibility::Readers {
        let active = self.manager.active_snapshots(&mut Vec::new());
        super::visibility::Readers::new(active.horizon, active.starts_desc().to_vec())
    }

    fn resolve(&self, xid: u64, start: u64) -> Result<Fate> {
        if let Some(fate) = self.fates.get(xid) {
            return Ok(fate);
        }
        let mut spins = 0u32;
        loop {
            let live = self.shard(xid).lock().get(&xid).copied();
            match live {
                Some(Live::Running) => return Ok(Fate::Running),
                Some(Live::Committing(ts)) if ts >= start => return Ok(Fate::Running),
                Some(Live::Committing(_)) => {
                    // T2: the window does no I/O, so it ends soon.
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                Some(Live::Committed { ts, lsn }) => return Ok(Fate::Committed { ts, lsn }),
                Some(Live::Aborted) => return Ok(Fate::Aborted),
                None => {
                    // T1: gone from the table, so its end is in the commit log.
                    let (status, lsn) = self.commit_log.status_and_lsn(xid)?;
                    let fate = match status {
                        TransactionStatus::Committed(ts) => Fate::Committed { ts, lsn },
                        TransactionStatus::Aborted => Fate::Aborted,
                        TransactionStatus::InProgress => {
                            return Err(Error::Corruption {
                                file: "commit log".into(),
                                offset: 0,
                                reason: format!(
                                    "transaction {xid} is in progress in the commit log but \
                                     not running (a tuple names an id never handed out?)"
                                ),
                            })
                        }
                    };
                    self.fates.put(xid, fate);
                    return Ok(fate);
                }
            }
        }
    }
}

/// A transaction of a disk database: a snapshot, and a transaction id once it writes.
/// Not `Send`: it ends on the thread that began it. Dropped without an end, it aborts.
pub struct DiskTransaction<'a> {
    txns: &'a DiskTransactions,
    local: Rc<LocalSlot<()>>,
    start: u64,
    xid: u64,
    /// Begun as serializable ([`DiskTransactions::begin_as`]).
    serializable: bool,
    ended: bool,
}

impl std::fmt::Debug for DiskTransaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskTransaction")
            .field("start", &self.start)
            .field("xid", &self.xid)
            .finish()
    }
}

impl<'a> DiskTransaction<'a> {
    /// The transactions it belongs to.
    pub fn transactions(&self) -> &'a DiskTransactions {
        self.txns
    }

    /// The snapshot's start timestamp.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The thread's slot (its log of commit records).
    pub(crate) fn local(&self) -> &LocalSlot<()> {
        &self.local
    }

    /// Whether it has an id (it wrote).
    pub fn has_written(&self) -> bool {
        self.xid != 0
    }

    /// Unpublishes the snapshot (the transaction's end, on its thread).
    fn end_snapshot(&self) {
        if self.serializable {
            self.txns.manager.end_serializable(&self.local, self.start);
        }
        self.txns.manager.end(&self.local, self.start);
    }

    /// The snapshot this transaction reads at.
    pub fn snapshot(&self) -> super::visibility::Snapshot {
        super::visibility::Snapshot {
            start: self.start,
            xid: self.xid,
        }
    }

    /// The transaction's id, taken from the commit log at the first call (its first write)
    /// and live from then on (T1).
    pub fn xid(&mut self) -> Result<u64> {
        if self.xid == 0 {
            let xid = self.txns.commit_log.begin()?;
            self.txns.set_live(xid, Some(Live::Running));
            self.xid = xid;
        }
        Ok(self.xid)
    }

    /// Commits: draws the commit timestamp in a window that does no I/O (T2), appends
    /// the commit record, then makes the commit visible. Returns the timestamp and the
    /// end of the record, to wait on before acknowledging (`None` for a transaction that
    /// wrote nothing: it has no record). `at_draw` runs in the window with each timestamp
    /// drawn: `Ok(true)` keeps it, `Ok(false)` draws again (it published something that
    /// must precede the draw: an abandoned timestamp stamps nothing), an error aborts.
    pub fn commit_with(
        self,
        at_draw: impl FnMut(u64) -> Result<bool>,
    ) -> Result<(u64, Option<u64>)> {
        self.commit_prepared(|| {}, at_draw)
    }

    /// [`DiskTransaction::commit_with`], with `before_draw` run once the commit log's
    /// entry is latched and before the first draw (no I/O follows it before the commit is
    /// decided): where a commit record is published for serializable validators.
    pub(crate) fn commit_prepared(
        mut self,
        before_draw: impl FnOnce(),
        mut at_draw: impl FnMut(u64) -> Result<bool>,
    ) -> Result<(u64, Option<u64>)> {
        self.ended = true;
        let txns = self.txns;
        if self.xid == 0 {
            let ts = txns.manager.clock();
            self.end_snapshot();
            return Ok((ts, None));
        }
        let xid = self.xid;
        let ending = txns.commit_log.prepare_end(xid);
        let ending = match ending {
            Ok(ending) => ending,
            Err(error) => {
                self.end_aborted();
                return Err(error);
            }
        };
        before_draw();
        let ts = loop {
            // T2: marked committing before the draw, at a lower bound of the timestamp, so
            // a snapshot that begins once the clock moved past the draw waits for the
            // outcome rather than take the writer for running.
            txns.set_live(xid, Some(Live::Committing(txns.manager.clock())));
            let ts = txns.manager.draw_commit_ts();
            txns.set_live(xid, Some(Live::Committing(ts)));
            match at_draw(ts) {
                Ok(true) => break ts,
                Ok(false) => continue,
                Err(error) => {
                    // The entry is latched: abort through it (no I/O; nothing waits on it).
                    let aborted = ending.abort();
                    if aborted.is_ok() {
                        txns.fates.put(xid, Fate::Aborted);
                        txns.set_live(xid, None);
                    } else {
                        // T1: with no end in the commit log, the id stays live, aborted.
                        txns.set_live(xid, Some(Live::Aborted));
                    }
                    self.end_snapshot();
                    aborted?;
                    return Err(error);
                }
            }
        };
        match ending.commit(ts) {
            Ok(lsn) => {
                // T1: the entry page's latch went with `ending`; the commit log has it.
                txns.fates.put(xid, Fate::Committed { ts, lsn });
                txns.set_live(xid, Some(Live::Committed { ts, lsn }));
                txns.set_live(xid, None);
                self.end_snapshot();
                Ok((ts, Some(lsn)))
            }
            Err(error) => {
                // The log failed (durability lost): the commit is not in it, and nothing
                // more reaches the files. Aborted for this run, as a restart reads it.
                txns.set_live(xid, Some(Live::Aborted));
                self.end_snapshot();
                Err(error)
            }
        }
    }

    /// [`DiskTransaction::commit_with`] with no validation.
    pub fn commit(self) -> Result<(u64, Option<u64>)> {
        self.commit_with(|_| Ok(true))
    }

    /// Aborts: the commit log marks the id aborted (not waited on: a crash ends it the
    /// same way, X3), its versions become invisible, and later pruning removes them.
    pub fn abort(mut self) -> Result<()> {
        self.ended = true;
        self.abort_inner()
    }

    fn abort_inner(&mut self) -> Result<()> {
        let result = if self.xid != 0 {
            let result = self.txns.commit_log.abort(self.xid);
            if result.is_ok() {
                // Final: readers and the pool's count of pages written for aborted
                // transactions find it without the commit log.
                self.txns.fates.put(self.xid, Fate::Aborted);
            }
            // T1: an abort that failed (an I/O error) leaves the id in the table, aborted;
            // a restart reads it aborted too (X3).
            self.txns.set_live(
                self.xid,
                if result.is_ok() {
                    None
                } else {
                    Some(Live::Aborted)
                },
            );
            result
        } else {
            Ok(())
        };
        self.end_snapshot();
        result
    }

    fn end_aborted(&mut self) {
        // The entry page could not be latched (an I/O error): the id stays in the table,
        // aborted (its tuples invisible and prunable, its rows writable again), rather
        // than leave it with no end in the commit log (T1); a restart reads it aborted.
        self.txns.set_live(self.xid, Some(Live::Aborted));
        self.end_snapshot();
    }
}

impl Drop for DiskTransaction<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.ended = true;
            let _ = self.abort_inner();
        }
    }
}
