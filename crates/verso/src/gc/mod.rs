//! The garbage-collection seam.
//!
//! Policy and mechanism are apart: a [`Collector`] says *what* to do and when (prune on
//! every write or not, how stale the active list may be); the mechanism that executes it,
//! the finalizing of committed transactions and the pruning of chains, lives in the
//! engine (`engine/collect.rs`) and in the version storage (`ChainEdit`).
//!
//! Shared by every collector (Steam §4.1–§4.2, HyPer): each thread keeps its committed
//! transactions in its slot; after each commit it *finalizes* those whose commit timestamp
//! is below the watermark (the oldest snapshot any transaction can hold), unlinking their
//! records that are still linked, and every few milliseconds it does the same for the slots
//! of idle threads, so an idle thread never holds garbage forever.
//!
//! Implementations: [`steam::Steam`] (default: EPO on every write), [`watermark::WatermarkOnly`]
//! (HyPer's: no pruning of in-between versions).

pub(crate) mod steam;
pub(crate) mod watermark;

use crate::version::ActiveSnapshots;

/// A collector design.
pub(crate) trait Collector: Send + Sync + 'static {
    /// Name in configuration and reports.
    const NAME: &'static str;
    /// Whether a writer prunes every chain it installs a version into (Steam's EPO, §4.3).
    const EAGER_PRUNING: bool;
    /// How old (in nanoseconds) a thread's cached list of active snapshots may grow before
    /// a writer rebuilds it (Steam §4.3.1 uses a few milliseconds).
    const ACTIVE_LIST_MAX_AGE_NS: u64 = 1_000_000;
    /// How often (in nanoseconds) a thread also finalizes for idle threads.
    const HELP_IDLE_EVERY_NS: u64 = 1_000_000;
}

/// A thread's collector state: its cached, sorted list of active snapshots.
#[derive(Default)]
pub(crate) struct LocalGc {
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
