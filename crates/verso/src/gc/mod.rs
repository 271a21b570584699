//! The garbage-collection seam.
//!
//! Policy and mechanism are apart: a [`Collector`] says *what* to do and when (prune on
//! every write or not, who finalizes and how often, how a transaction registers so that the
//! collector knows the oldest snapshot); the mechanism that executes it, the finalizing of
//! committed transactions, the pruning of chains, the background threads' rounds and the
//! handing out of work, lives in the engine (`engine/collect.rs`) and in the version
//! storage (`ChainEdit`).
//!
//! Shared by every collector (Steam §4.1–§4.2, HyPer): each thread keeps its committed
//! transactions in its slot's queue. *Finalizing* a committed transaction whose commit
//! timestamp is below a **reclaim bound** unlinks its records that are still linked and
//! buries rows no snapshot can see. Collectors differ in how they compute the bound (a scan
//! of the slots, a tracker under a mutex, a transaction map, epochs), who finalizes
//! (the committing thread, a background thread, workers handed work by a background
//! thread, nobody) and whether in-between versions are pruned (Steam eagerly on write,
//! 'Hana' in the background, the others never).
//!
//! Invariant of every collector (what makes reclamation safe; brief: safe reclamation): a
//! reclaim bound is at most the start timestamp of every transaction running when the bound
//! is used or beginning later. Each implementation proves it in its module header.
//!
//! Implementations, one file per design (Steam paper Table 4):
//! [`steam::Steam`] (default), [`watermark::WatermarkOnly`] (HyPer), [`hana::Hana`],
//! [`hekaton::Hekaton`], [`deuteronomy::Deuteronomy`], [`ermia::Ermia`],
//! [`none::NoCollection`]; and Wu et al.'s §5 granularities: [`vacuum::Vacuum`] (tuple-level
//! background vacuuming with a dirty-block bitmap), [`cooperative::Cooperative`]
//! (tuple-level cooperative cleaning, O2N only) and [`txn_epochs::TxnEpochs`]
//! (transaction-level, epochs with membership counters); and TB-Collect's block-level
//! collection, [`tb_collect::TbCollect`], over the tile-block storage; and the baselines
//! TB-Collect compares itself with over the append-nvm storage, [`tvcp::Tvcp`] (timely
//! version chain pruning at commit) and [`zen::Zen`] (background scanning).

pub(crate) mod cooperative;
pub(crate) mod deuteronomy;
pub(crate) mod ermia;
pub(crate) mod hana;
pub(crate) mod hekaton;
#[cfg(all(test, loom))]
mod loom_tests;
pub(crate) mod none;
pub(crate) mod oneshot;
pub(crate) mod steam;
pub(crate) mod tb_collect;
pub(crate) mod tvcp;
pub(crate) mod txn_epochs;
pub(crate) mod vacuum;
pub(crate) mod watermark;
pub(crate) mod zen;

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::sync::AtomicU64;

use crate::txn::slots::{LocalSlot, TxnManager};
use crate::version::ActiveSnapshots;

/// Who finalizes committed transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finalizing {
    /// The thread that committed, right after its commit, when [`Collector::after_commit`]
    /// says so; busy threads also finalize for idle ones, and the janitor for all idle
    /// threads (HyPer, Steam, the epoch collectors).
    Interspersed,
    /// A background thread, every period, for every thread ('Hana').
    Background,
    /// A background thread finds what is due every period and hands it to the worker
    /// threads, which finalize it between transactions ('Hekaton').
    BackgroundHandsToWorkers,
    /// Nobody ('none').
    Never,
    /// Nobody finalizes transactions: tuple-level collection (Wu et al. §5.1). A
    /// background thread examines rows, not write sets: 'vac' vacuums the blocks of rows
    /// written since its last pass, 'coop' cleans the rows that readers and writers
    /// recorded and now and then vacuums everything (`engine/vacuum.rs`).
    TupleLevel,
}

/// Settings of a collector, from [`crate::Options`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct GcConfig {
    /// Commits per thread between epoch advances ('Deuteronomy', 'Ermia').
    pub(crate) epoch_threshold: Option<u64>,
}

/// A collector design. The value is the collector's shared state (a tracker, a transaction
/// map, an epoch manager; nothing for Steam), owned by the engine.
pub(crate) trait Collector: Send + Sync + Sized + 'static {
    /// Name in configuration and reports.
    const NAME: &'static str;
    /// Who finalizes.
    const FINALIZING: Finalizing;
    /// Whether a writer prunes every chain it installs a version into (Steam's EPO, §4.3).
    const EAGER_PRUNING: bool = false;
    /// Whether the background thread prunes the chains of every version committed after
    /// the oldest snapshot, exactly ('Hana''s interval GC, §4.3.2; 'zen').
    const BACKGROUND_PRUNING: bool = false;
    /// Whether the committing thread prunes, exactly, the rows of its recycle queue after
    /// every commit ('tvcp': TB-Collect §2.3.1's timely version chain pruning).
    const COMMIT_PRUNING: bool = false;
    /// The background thread's default period (Table 4: 1 ms for 'Hana' and 'Hekaton').
    const DEFAULT_BACKGROUND_PERIOD: Duration = Duration::from_millis(1);
    /// [`Finalizing::TupleLevel`]: writers mark the block of every row they write dirty,
    /// and a pass examines only dirty blocks ('vac').
    const DIRTY_BLOCKS: bool = false;
    /// [`Finalizing::TupleLevel`]: readers and writers record rows whose chains they walked
    /// past obsolete versions in, for the thread to clean ('coop').
    const COOPERATIVE: bool = false;
    /// [`Finalizing::TupleLevel`] with [`Self::COOPERATIVE`]: every this many rounds the
    /// thread vacuums every block (the dusty corners no walk reaches).
    const FULL_PASS_EVERY_ROUNDS: u64 = 0;
    /// Block-level collection (tb-collect): after every transaction ends on a thread, the
    /// version storage collects whole blocks (`VersionStorage::collect_blocks`), beside the
    /// finalizing `FINALIZING` says.
    const BLOCK_LEVEL: bool = false;
    /// How old (in nanoseconds) a thread's cached list of active snapshots may grow before
    /// a writer rebuilds it (Steam §4.3.1 uses a few milliseconds).
    const ACTIVE_LIST_MAX_AGE_NS: u64 = 1_000_000;
    /// How often (in nanoseconds) an interspersed thread also finalizes for idle threads.
    const HELP_IDLE_EVERY_NS: u64 = 1_000_000;

    /// The shared state for these settings.
    fn new(config: &GcConfig) -> Self;

    /// Begins a transaction on `local`'s thread: registers it with the collector around
    /// `take_start`, which takes (and publishes in the slot) the start timestamp.
    fn begin<R: Send + 'static>(
        &self,
        _txns: &TxnManager<R>,
        _local: &LocalSlot<R>,
        take_start: impl FnOnce() -> u64,
    ) -> u64 {
        take_start()
    }

    /// Ends the transaction begun at `start_ts` on `local`'s thread (before the slot
    /// unpublishes it).
    fn end<R: Send + 'static>(&self, _txns: &TxnManager<R>, _local: &LocalSlot<R>, _start_ts: u64) {
    }

    /// The reclaim bound now: committed transactions below it may be finalized. At most
    /// the start of every running or future transaction.
    fn reclaim_bound<R: Send + 'static>(&self, txns: &TxnManager<R>) -> u64 {
        txns.watermark()
    }

    /// After a commit on `local`'s thread ([`Finalizing::Interspersed`] only): the bound to
    /// finalize the thread's queue with now, or `None` for not now.
    fn after_commit<R: Send + 'static>(
        &self,
        txns: &TxnManager<R>,
        _local: &LocalSlot<R>,
    ) -> Option<u64> {
        Some(self.reclaim_bound(txns))
    }

    /// For [`Collector::BACKGROUND_PRUNING`] and [`Collector::COMMIT_PRUNING`]: the bound
    /// and the snapshots that may read old versions, taken together. By default the list
    /// first, then the slot watermark (exact, `txn/slots.rs`), capped at the list's horizon:
    /// a smaller reclaim bound is still one, and a round needs the bound at most the
    /// horizon.
    fn active_snapshots<R: Send + 'static>(&self, txns: &TxnManager<R>) -> (u64, ActiveSnapshots) {
        let mut buffer = Vec::new();
        let active = txns.active_snapshots(&mut buffer);
        (txns.watermark().min(active.horizon), active)
    }

    /// The bound the janitor finalizes idle threads with: the epoch collectors advance
    /// their epoch first (nobody commits to advance it while every thread is idle).
    fn idle_bound<R: Send + 'static>(&self, txns: &TxnManager<R>) -> u64 {
        self.reclaim_bound(txns)
    }

    /// At the start of every background round, before the bound is taken (the
    /// transaction-level epochs advance here).
    fn background_tick<R: Send + 'static>(&self, _txns: &TxnManager<R>) -> bool {
        false
    }

    /// For [`Finalizing::BackgroundHandsToWorkers`]: refreshes the bound the background
    /// thread hands work out with, and returns it.
    fn refresh<R: Send + 'static>(&self, txns: &TxnManager<R>) -> u64 {
        self.reclaim_bound(txns)
    }
}

/// A thread's collector state.
#[derive(Default)]
pub(crate) struct LocalGc {
    /// The cached, sorted list of active snapshots (Steam's EPO).
    pub(crate) active: ActiveSnapshots,
    /// When `active` was taken (manager nanoseconds); 0 = never.
    pub(crate) taken_ns: u64,
    /// Writes pruned since the age was last checked (the clock is read every few writes).
    pub(crate) writes_since_age_check: u32,
    /// Reused buffer for scanning the slots.
    pub(crate) scan_buffer: Vec<u64>,
    /// When this thread last finalized for other threads.
    pub(crate) helped_ns: u64,
    /// Transactions ended since the help timer was last checked.
    pub(crate) ends_since_help_check: u32,
    /// Registrations of this thread's running transactions with the collector: (start
    /// timestamp, what the collector registered: an epoch, a transaction-map key).
    pub(crate) registered: Vec<(u64, u64)>,
    /// Commits since this thread last tried to advance the epoch.
    pub(crate) commits_since_epoch_advance: u64,
    /// 'coop': the watermark this thread's walks spot obsolete versions with, and when it
    /// was taken (manager nanoseconds; 0 = never).
    pub(crate) spotting_bound: u64,
    pub(crate) spotting_bound_ns: u64,
    /// Transactions begun since the spotting bound's age was last checked.
    pub(crate) begins_since_spotting_check: u32,
}

impl LocalGc {
    /// Records that the transaction starting at `start_ts` registered `value`.
    pub(crate) fn register(&mut self, start_ts: u64, value: u64) {
        self.registered.push((start_ts, value));
    }

    /// Forgets one registration of the transaction that started at `start_ts` (several
    /// transactions of a thread may share a start) and returns its value.
    pub(crate) fn unregister(&mut self, start_ts: u64) -> u64 {
        let at = self
            .registered
            .iter()
            .position(|&(s, _)| s == start_ts)
            .expect("an ending transaction was registered on its thread");
        self.registered.swap_remove(at).1
    }

    /// The smallest registered value (`u64::MAX` if none).
    pub(crate) fn min_registered(&self) -> u64 {
        self.registered
            .iter()
            .map(|&(_, v)| v)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Counts a commit; true every `threshold` commits.
    pub(crate) fn count_commit(&mut self, threshold: u64) -> bool {
        self.commits_since_epoch_advance += 1;
        if self.commits_since_epoch_advance >= threshold {
            self.commits_since_epoch_advance = 0;
            true
        } else {
            false
        }
    }
}

/// Whether the cached list needs rebuilding before a prune.
pub(crate) fn active_list_is_stale<G: Collector>(
    local: &mut LocalGc,
    now_ns: impl Fn() -> u64,
) -> bool {
    if local.taken_ns == 0 {
        return true;
    }
    local.writes_since_age_check += 1;
    if local.writes_since_age_check < 32 {
        return false;
    }
    local.writes_since_age_check = 0;
    now_ns().saturating_sub(local.taken_ns) > G::ACTIVE_LIST_MAX_AGE_NS
}

/// 'coop': the bound this thread's walks spot obsolete versions with, refreshed from
/// `watermark` when older than [`Collector::ACTIVE_LIST_MAX_AGE_NS`] (the clock is read
/// every 32 begins). A stale bound is lower than the true one: it spots less, never wrongly.
pub(crate) fn spotting_bound<G: Collector>(
    local: &mut LocalGc,
    now_ns: impl Fn() -> u64,
    watermark: impl FnOnce() -> u64,
) -> u64 {
    local.begins_since_spotting_check += 1;
    if local.spotting_bound_ns == 0 || local.begins_since_spotting_check >= 32 {
        local.begins_since_spotting_check = 0;
        let now = now_ns().max(1);
        if now.saturating_sub(local.spotting_bound_ns) > G::ACTIVE_LIST_MAX_AGE_NS
            || local.spotting_bound_ns == 0
        {
            local.spotting_bound = watermark();
            local.spotting_bound_ns = now;
        }
    }
    local.spotting_bound
}

/// Whether this thread should finalize for idle threads now.
pub(crate) fn due_to_help<G: Collector>(local: &mut LocalGc, now_ns: impl Fn() -> u64) -> bool {
    local.ends_since_help_check += 1;
    if local.ends_since_help_check < 16 {
        return false;
    }
    local.ends_since_help_check = 0;
    let now = now_ns();
    if now.saturating_sub(local.helped_ns) > G::HELP_IDLE_EVERY_NS {
        local.helped_ns = now;
        true
    } else {
        false
    }
}

/// The epoch bookkeeping of a thread, shared by the epoch collectors: the epochs its running
/// transactions entered, the oldest of which it publishes in its slot.
pub(crate) mod epoch_registration {
    use std::sync::atomic::Ordering;

    use crate::txn::slots::LocalSlot;

    /// A start not known yet: the transaction entering is registered under it until then.
    const PENDING: u64 = u64::MAX;

    /// Registers the entering transaction in `epoch` and publishes the thread's oldest.
    pub(crate) fn enter<R>(local: &LocalSlot<R>, epoch: u64) {
        let mut gc = local.gc.borrow_mut();
        gc.register(PENDING, epoch);
        local
            .slot
            .collector_value
            .store(gc.min_registered(), Ordering::SeqCst);
    }

    /// Forgets the entering transaction's epoch (the epoch moved; it enters again). What is
    /// published may stay older for a moment, which only holds advances back.
    pub(crate) fn withdraw<R>(local: &LocalSlot<R>) {
        local.gc.borrow_mut().unregister(PENDING);
    }

    /// The entering transaction took its start: file its epoch under it.
    pub(crate) fn started<R>(local: &LocalSlot<R>, start_ts: u64) -> u64 {
        let mut gc = local.gc.borrow_mut();
        let epoch = gc.unregister(PENDING);
        gc.register(start_ts, epoch);
        epoch
    }

    /// The transaction that started at `start_ts` leaves its epoch; the thread publishes
    /// its oldest remaining one.
    pub(crate) fn leave<R>(local: &LocalSlot<R>, start_ts: u64) {
        let mut gc = local.gc.borrow_mut();
        gc.unregister(start_ts);
        local
            .slot
            .collector_value
            .store(gc.min_registered(), Ordering::SeqCst);
    }
}

/// The smallest value the slots publish for the collector (`u64::MAX` if none).
pub(crate) fn min_published<R: Send + 'static>(txns: &TxnManager<R>) -> u64 {
    txns.slots()
        .map(|slot| slot.collector_value.load(Ordering::SeqCst))
        .min()
        .unwrap_or(u64::MAX)
}

/// A monotonic maximum, for clocks the collectors keep. Returns whether it rose.
pub(crate) fn raise(word: &AtomicU64, to: u64) -> bool {
    word.fetch_max(to, Ordering::SeqCst) < to
}
