//! What the storages whose versions live in a persistent-memory region share (the
//! tile-block storage, `tile_block/`, and the append-nvm storage, `append_nvm/`): a row's
//! chain of versions named by *links* (where each version lies), newest to oldest, only
//! the newest possibly uncommitted; and the walks such a chain does the same way whatever
//! a link is: a reader's walk to the version its snapshot sees, the keeper below a
//! watermark, the oldest version's removal.
//!
//! Invariant every implementation keeps: every version behind the newest committed (its
//! `commit_ts` is `Some`), and the versions' commit timestamps fall from the newest to the
//! oldest.

use crate::row::{PackedRef, RowView};
use crate::sync::{Arc, Latch, ReadGuard, WriteGuard};
use crate::txn::state::TxnShared;
use crate::version::{Created, ReadCost, Snapshot};

/// A row of a region storage, as the indexes point at it: the protocol's word and the
/// latch over the row's chain `C` (the tile-block, append-nvm and delta-nvm storages'
/// chains), which keeps the versions in the region.
pub(crate) struct LatchedRow<C> {
    /// The concurrency-control protocol's row word (`VersionStorage::cc_word`).
    pub(crate) cc: crate::sync::AtomicU64,
    latch: Latch<C>,
}

impl<C> LatchedRow<C> {
    pub(crate) fn new(chain: C) -> LatchedRow<C> {
        LatchedRow {
            cc: crate::sync::AtomicU64::new(0),
            latch: Latch::new(chain),
        }
    }

    /// A row made by an insert, and what it counts: as in the other storages, a record
    /// until its commit folds it, no bytes.
    pub(crate) fn inserted(chain: C) -> (Arc<LatchedRow<C>>, Created) {
        (
            Arc::new(LatchedRow::new(chain)),
            Created {
                records: 1,
                bytes: 0,
            },
        )
    }

    pub(crate) fn read(&self) -> ReadGuard<'_, C> {
        self.latch.read()
    }

    pub(crate) fn write(&self) -> WriteGuard<'_, C> {
        self.latch.write()
    }
}

/// A chain of versions named by links, newest to oldest.
pub(crate) trait LinkedChain {
    /// Names a version.
    type Link: Copy + PartialEq + std::fmt::Debug;

    /// The newest version.
    fn head(&self) -> Self::Link;

    /// The version right behind `link`, if any.
    fn older(&self, link: Self::Link) -> Option<Self::Link>;

    /// The commit timestamp of `link`'s transaction, if it committed.
    fn commit_ts(&self, link: Self::Link) -> Option<u64>;

    /// Whether `owner` wrote the newest version and has not committed it yet.
    fn mine(&self, owner: &TxnShared) -> bool;

    /// Whether the row exists in `link` (a tombstone is a version in which it does not).
    fn exists(&self, link: Self::Link) -> bool;

    /// `link`'s values, in place.
    fn values_of(&self, link: Self::Link) -> PackedRef<'_>;

    /// Cuts the chain after `keeper`; returns the versions and bytes cut off.
    fn cut_after(&mut self, keeper: Self::Link) -> (usize, usize);

    /// The versions behind `from`, newest first.
    fn behind(&self, from: Self::Link) -> impl Iterator<Item = Self::Link> + '_ {
        std::iter::successors(self.older(from), move |&link| self.older(link))
    }

    /// The versions, newest first.
    fn versions(&self) -> impl Iterator<Item = Self::Link> + '_ {
        std::iter::once(self.head()).chain(self.behind(self.head()))
    }

    /// Whether `snapshot` sees `link`: its owner's own newest version, or a version
    /// committed before the snapshot began.
    fn visible_to(&self, link: Self::Link, snapshot: &Snapshot<'_>) -> bool {
        if link == self.head() && snapshot.owner.is_some_and(|me| self.mine(me)) {
            return true;
        }
        self.commit_ts(link)
            .is_some_and(|ts| ts < snapshot.start_ts)
    }

    /// What a reader gets from `link`: its values, or no row for a tombstone.
    fn lend(&self, link: Self::Link) -> Option<RowView<'_>> {
        self.exists(link)
            .then(|| RowView::packed(self.values_of(link)))
    }

    /// A reader's walk: the version `snapshot` sees (or no row past the oldest), lent to
    /// `reader`, and what the walk cost (timed only when it went behind the newest).
    fn read_visible<R>(
        &self,
        snapshot: &Snapshot<'_>,
        reader: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> (R, ReadCost) {
        let head = self.head();
        if self.visible_to(head, snapshot) {
            return (reader(self.lend(head)), ReadCost::default());
        }
        let started = std::time::Instant::now();
        let mut walked = 0;
        let seen = self.behind(head).find(|&link| {
            walked += 1;
            self.visible_to(link, snapshot)
        });
        let cost = ReadCost {
            walked,
            reconstruct_nanos: started.elapsed().as_nanos() as u64,
            passed_obsolete: false,
        };
        (reader(seen.and_then(|link| self.lend(link))), cost)
    }

    /// Every version in which the row exists, newest first.
    fn each_existing(&self, visit: &mut dyn FnMut(RowView<'_>)) {
        for link in self.versions().filter(|&link| self.exists(link)) {
            visit(RowView::packed(self.values_of(link)));
        }
    }

    /// Whether no snapshot at or after `bound` sees a row in the chain: a tombstone (or a
    /// version that never existed) alone, committed below `bound`.
    fn unreachable_below(&self, bound: u64) -> bool {
        let head = self.head();
        !self.exists(head)
            && self.older(head).is_none()
            && self.commit_ts(head).is_some_and(|ts| ts < bound)
    }

    /// `ChainEdit::truncate`: cuts behind the first version committed below the
    /// watermark (every snapshot at or after it stops there or before).
    fn truncate_below(&mut self, watermark: u64) -> (usize, usize) {
        let keeper = self
            .versions()
            .find(|&link| self.commit_ts(link).is_some_and(|ts| ts < watermark));
        match keeper {
            Some(keeper) => self.cut_after(keeper),
            None => (0, 0),
        }
    }

    /// `ChainEdit::unlink_oldest`: the oldest version goes if the one before it committed
    /// below the watermark; returns the versions walked and the bytes freed.
    fn unlink_oldest_below(&mut self, watermark: u64) -> (usize, Option<usize>) {
        let versions: Vec<Self::Link> = self.versions().collect();
        let walked = versions.len() - 1;
        if walked == 0 {
            return (0, None);
        }
        let second_oldest = versions[walked - 1];
        if self
            .commit_ts(second_oldest)
            .is_none_or(|ts| ts >= watermark)
        {
            return (walked, None);
        }
        let (_, bytes) = self.cut_after(second_oldest);
        (walked, Some(bytes))
    }
}
