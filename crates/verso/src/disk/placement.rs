//! Where a heap file puts the new versions its writers create: the placement policy of the
//! disk engine's PostgreSQL heap (design note: `docs/design/buffer-pool.md`, "SI-CV's
//! co-located placement").
//!
//! Two policies, chosen per database ([`crate::Options::version_placement`]):
//!
//! - [`VersionPlacement::PostgreSql`] (the default): PostgreSQL's `heap_update` and
//!   `RelationGetBufferForTuple`: an update's new version on its predecessor's page when
//!   it fits and no indexed column changed (HOT), else the heap's target block (the last
//!   insert's page), then a page the free-space map offers, then a new page at the file's
//!   end. Any page may hold new versions of any number of running transactions.
//! - [`VersionPlacement::CoLocated`]: SI-CV's (Gottstein, Petrov and Buchmann, "SI-CV:
//!   Snapshot Isolation With Co-Located Versions", §5): every new version a transaction
//!   creates goes to a page it owns. It takes its first page at its first new version in
//!   the heap, from the free-space map among pages no live transaction owns, or by
//!   extending the file; another when that one is full; the pages return to the map when
//!   it ends. The ownership is the [`Barray`] (the paper's name: transaction → pages).
//!   An update is HOT (on its predecessor's page) only when that page is its own.
//! - [`VersionPlacement::CoLocatedHot`]: SI-CV's, with PostgreSQL's HOT kept: an update
//!   that changes no indexed column and fits its predecessor's page claims that page if no
//!   live transaction owns it, and its new version stays there (the page is then the
//!   updater's until its end, P1); other new versions go to the updater's current page as
//!   under `CoLocated`. The paper is silent on HOT; this is the other answer, measured
//!   beside the first (`docs/design/buffer-pool.md`, "SI-CV's co-located placement").
//!
//! This module is the policy: which pages a transaction may use and who owns what. The
//! mechanism (latching, formatting, extending, logging) stays in [`super::heap_file`].
//!
//! # Definitions
//!
//! - A *new version* is a tuple a transaction places: an insert's, or an update's
//!   successor. A delete places none (it stamps `xmax` on the old version in place, as
//!   does an update: SI-CV leaves those stamps where they are).
//! - A transaction is *live* from its first write until its end (commit or abort)
//!   returned; a page is *owned* while it is in the [`Barray`] under a transaction.
//!
//! # Invariants (co-located placement)
//!
//! - **P1** A page is owned by at most one transaction, and a transaction places new
//!   versions only on pages it owns: so no page holds new versions of two live
//!   transactions at once. [`Barray::claim`] is the only way in, and it refuses a page
//!   another transaction owns (the free-space map's exclusion only spares the attempt).
//! - **P2** A transaction's pages stay owned until its end returned, and are released
//!   then, whatever the outcome (commit, abort, an error at the end): a page leaves the
//!   Barray only once its owner is no longer live, so nothing another transaction places
//!   there meets a live owner's versions.
//! - **P3** The Barray is a leaf lock: held for a few hash-map operations, never across
//!   a page latch, a free-space map access or any I/O.
//! - **P4** The Barray is volatile. After a crash every transaction that was live is
//!   aborted (the commit log's X3), so an empty Barray at open is exact: every page is
//!   usable again. The free-space map (a hint, not logged) may have lost what the
//!   releases recorded; pages it hides are offered again once vacuum records them, as
//!   under PostgreSQL's placement.
//! - **P5** A page its owner *formatted* while owning it (from a page never written: it
//!   extended the file for it, or the map offered a page that read as new) holds only the
//!   owner's tuples while owned (P1, and no one else sees them to stamp them). The Barray
//!   marks such pages ([`Barray::formatted`]); only they may be dropped from the pool
//!   unwritten when their owner aborts (`HeapFile::drop_aborted_pages`: SI-CV's "if T_j
//!   aborts Block2 is not written").

use std::collections::HashMap;

use crate::sync::Mutex;

/// Where the disk engine's heap puts new versions ([`crate::Options::version_placement`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VersionPlacement {
    /// PostgreSQL's: the predecessor's page (HOT), the heap's target block, a page the
    /// free-space map offers, or a new page. Pages are shared by every writer.
    #[default]
    PostgreSql,
    /// SI-CV's co-located versions: each writing transaction gets its own page(s) for the
    /// versions it creates (the Barray); the free-space map never offers a page a live
    /// transaction owns; the pages go back to the map when the transaction ends.
    /// Read-only transactions take none. A HOT update stays on its predecessor's page
    /// only when that page is the updater's own.
    CoLocated,
    /// SI-CV's co-located versions with HOT kept: a HOT update claims its predecessor's
    /// page when no live transaction owns it, and stays there; everything else as
    /// [`VersionPlacement::CoLocated`].
    CoLocatedHot,
}

impl VersionPlacement {
    /// Every placement, the default first.
    pub const ALL: [VersionPlacement; 3] = [
        VersionPlacement::PostgreSql,
        VersionPlacement::CoLocated,
        VersionPlacement::CoLocatedHot,
    ];

    /// Its name in designs, reports and the lab's flag: `postgres`, `co-located` or
    /// `co-located-hot`.
    pub fn name(self) -> &'static str {
        match self {
            VersionPlacement::PostgreSql => "postgres",
            VersionPlacement::CoLocated => "co-located",
            VersionPlacement::CoLocatedHot => "co-located-hot",
        }
    }

    /// Whether new versions go to pages their creators own (SI-CV's, either answer on
    /// HOT): the Barray, its releases and the drop of an aborted owner's pages apply.
    pub fn co_located(self) -> bool {
        matches!(
            self,
            VersionPlacement::CoLocated | VersionPlacement::CoLocatedHot
        )
    }

    /// The placement named `name` ([`VersionPlacement::name`]; `si-cv` is `co-located`).
    pub fn from_name(name: &str) -> Option<VersionPlacement> {
        match name {
            "postgres" | "postgresql" => Some(VersionPlacement::PostgreSql),
            "co-located" | "colocated" | "si-cv" => Some(VersionPlacement::CoLocated),
            "co-located-hot" | "si-cv-hot" => Some(VersionPlacement::CoLocatedHot),
            _ => None,
        }
    }

    /// Whether a HOT update of `xid` (no indexed column changed, and its new version fits
    /// its predecessor's page `block`, whose room is `free`) may stay on that page, as
    /// `barray` says; under PostgreSQL's placement no Barray lock is taken. PostgreSQL:
    /// always. Co-located: only on the updater's own page (P1): a new version must go to a
    /// page of its creator, and the predecessor's page is usually someone else's or no
    /// one's. Co-located with HOT kept: also on a page no one owns, which the updater
    /// claims here ([`Barray::claim_for_hot`]; the caller holds the page's exclusive
    /// latch, and the Barray is a leaf lock, P3).
    pub(crate) fn may_stay_on_page(
        self,
        barray: &Barray,
        xid: u64,
        block: u32,
        free: impl FnOnce() -> usize,
    ) -> bool {
        match self {
            VersionPlacement::PostgreSql => true,
            VersionPlacement::CoLocated => barray.owner(block) == Some(xid),
            VersionPlacement::CoLocatedHot => {
                barray.claim_for_hot(xid, block, free()) != Claim::Refused
            }
        }
    }
}

/// How a claim went ([`Barray::claim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The page was no one's and is now the claimer's.
    Taken,
    /// The claimer owned it already.
    Owned,
    /// Another live transaction owns it (P1).
    Refused,
}

/// One page a transaction owns.
#[derive(Clone, Copy, Debug)]
struct OwnedPage {
    block: u32,
    /// Its free bytes after the owner's last placement there (a lower bound: pruning and
    /// vacuum only add room, and no one else places there), recorded in the free-space
    /// map at release without reading the page again.
    free: usize,
    /// The owner formatted it from a page never written (it extended the file for it, or
    /// the map offered a page that read as new), so every version on it is the owner's
    /// (P1): a candidate for `HeapFile::drop_aborted_pages` if the owner aborts.
    formatted: bool,
    /// Claimed for a HOT update onto a predecessor's page ([`Barray::claim_for_hot`]):
    /// never the owner's current page, where its other versions go.
    hot: bool,
}

#[derive(Debug, Default)]
struct Owners {
    /// Transaction → its pages, in the order taken (the last is its current page).
    by_xid: HashMap<u64, Vec<OwnedPage>, foldhash::fast::FixedState>,
    /// Page → its owner.
    by_block: HashMap<u32, u64, foldhash::fast::FixedState>,
    /// Pages ever claimed (a counter for `HeapStats`).
    claimed: u64,
}

impl Owners {
    /// Both maps agree (P1: each owned page under exactly one transaction, once).
    fn consistent(&self) -> bool {
        let pages: usize = self.by_xid.values().map(Vec::len).sum();
        pages == self.by_block.len()
            && self.by_xid.iter().all(|(xid, pages)| {
                !pages.is_empty()
                    && pages
                        .iter()
                        .all(|page| self.by_block.get(&page.block) == Some(xid))
            })
    }
}

/// SI-CV's Barray for one heap file: which live transaction owns which pages. Blocks are
/// per file (as PostgreSQL's are per relation), so each heap has its own; a transaction
/// that writes several tables owns pages in each, and its end releases them in each.
///
/// Size: one entry per owned page (about 30 bytes with both maps), so the live writers'
/// pages: a transaction owns about as many pages as its new versions fill (one for most
/// OLTP transactions), plus one for each cold update whose predecessor sat on its current
/// page. Concurrency: one mutex per heap (P3); a placement takes it two or three times,
/// the free-space map's exclusion once per candidate page.
#[derive(Debug)]
pub(crate) struct Barray {
    owners: Mutex<Owners>,
}

// By hand: under loom, `crate::sync::Mutex` has no `Default`.
impl Default for Barray {
    fn default() -> Self {
        Barray {
            owners: Mutex::new(Owners::default()),
        }
    }
}

impl Barray {
    /// The owner of `block`, if a live transaction owns it.
    pub(crate) fn owner(&self, block: u32) -> Option<u64> {
        self.owners.lock().by_block.get(&block).copied()
    }

    /// `xid`'s current page: the last it took other than for a HOT update, where its next
    /// version goes first.
    pub(crate) fn current(&self, xid: u64) -> Option<u32> {
        self.owners
            .lock()
            .by_xid
            .get(&xid)
            .and_then(|pages| pages.iter().rev().find(|page| !page.hot))
            .map(|page| page.block)
    }

    /// Every page `xid` owns, in the order taken.
    pub(crate) fn pages_of(&self, xid: u64) -> Vec<u32> {
        self.owners
            .lock()
            .by_xid
            .get(&xid)
            .map(|pages| pages.iter().map(|page| page.block).collect())
            .unwrap_or_default()
    }

    /// Pages owned now, by all live transactions.
    pub(crate) fn pages_owned(&self) -> usize {
        self.owners.lock().by_block.len()
    }

    /// Pages ever claimed.
    pub(crate) fn pages_claimed(&self) -> u64 {
        self.owners.lock().claimed
    }

    /// Makes `block` `xid`'s current page if no one else owns it (P1). A page taken is
    /// recorded with `free` bytes until the owner places a version there.
    pub(crate) fn claim(&self, xid: u64, block: u32, free: usize) -> Claim {
        self.claim_as(xid, block, free, false)
    }

    /// Makes `block`, a predecessor's page a HOT update of `xid` is about to place its
    /// new version on, `xid`'s if no one else owns it (P1), without making it `xid`'s
    /// current page.
    pub(crate) fn claim_for_hot(&self, xid: u64, block: u32, free: usize) -> Claim {
        self.claim_as(xid, block, free, true)
    }

    fn claim_as(&self, xid: u64, block: u32, free: usize, hot: bool) -> Claim {
        debug_assert_ne!(xid, 0, "only a writer owns pages");
        let mut owners = self.owners.lock();
        let claim = match owners.by_block.get(&block) {
            Some(&owner) if owner == xid => Claim::Owned,
            Some(_) => Claim::Refused,
            None => {
                owners.by_block.insert(block, xid);
                owners.by_xid.entry(xid).or_default().push(OwnedPage {
                    block,
                    free,
                    formatted: false,
                    hot,
                });
                owners.claimed += 1;
                Claim::Taken
            }
        };
        debug_assert!(owners.consistent());
        claim
    }

    /// Gives back a page `xid` just took and placed nothing on (it had not the room
    /// the free-space map promised).
    pub(crate) fn unclaim(&self, xid: u64, block: u32) {
        let mut owners = self.owners.lock();
        debug_assert_eq!(owners.by_block.get(&block), Some(&xid));
        owners.by_block.remove(&block);
        if let Some(pages) = owners.by_xid.get_mut(&xid) {
            pages.retain(|page| page.block != block);
            if pages.is_empty() {
                owners.by_xid.remove(&xid);
            }
        }
        debug_assert!(owners.consistent());
    }

    /// Notes that `xid` formatted its page `block` from a page never written (under the
    /// page's exclusive latch, before any version went there).
    pub(crate) fn formatted(&self, xid: u64, block: u32) {
        let mut owners = self.owners.lock();
        debug_assert_eq!(owners.by_block.get(&block), Some(&xid));
        if let Some(page) = owners
            .by_xid
            .get_mut(&xid)
            .and_then(|pages| pages.iter_mut().find(|page| page.block == block))
        {
            page.formatted = true;
        }
    }

    /// The pages `xid` owns that it formatted itself ([`Barray::formatted`]), in the
    /// order taken.
    pub(crate) fn formatted_pages_of(&self, xid: u64) -> Vec<u32> {
        self.owners
            .lock()
            .by_xid
            .get(&xid)
            .map(|pages| {
                pages
                    .iter()
                    .filter(|page| page.formatted)
                    .map(|page| page.block)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Notes the room left on `xid`'s page `block` after it placed a version there.
    pub(crate) fn placed(&self, xid: u64, block: u32, free: usize) {
        let mut owners = self.owners.lock();
        debug_assert_eq!(
            owners.by_block.get(&block),
            Some(&xid),
            "P1: a version placed on a page its creator does not own"
        );
        if let Some(page) = owners
            .by_xid
            .get_mut(&xid)
            .and_then(|pages| pages.iter_mut().find(|page| page.block == block))
        {
            page.free = free;
        }
    }

    /// Ends `xid`'s ownership (P2: its end has returned): its pages leave the Barray, and
    /// are returned with the room each had after its last placement, for the caller to
    /// record in the free-space map.
    pub(crate) fn release(&self, xid: u64) -> Vec<(u32, usize)> {
        let mut owners = self.owners.lock();
        let Some(pages) = owners.by_xid.remove(&xid) else {
            return Vec::new();
        };
        for page in &pages {
            let owner = owners.by_block.remove(&page.block);
            debug_assert_eq!(owner, Some(xid));
        }
        debug_assert!(owners.consistent());
        pages.iter().map(|page| (page.block, page.free)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_has_one_owner_until_it_is_released() {
        let barray = Barray::default();
        assert_eq!(barray.claim(7, 3, 100), Claim::Taken);
        assert_eq!(barray.claim(7, 3, 100), Claim::Owned);
        assert_eq!(barray.claim(8, 3, 100), Claim::Refused);
        assert_eq!(barray.claim(8, 4, 100), Claim::Taken);
        assert_eq!(barray.claim(7, 5, 100), Claim::Taken);
        assert_eq!(barray.current(7), Some(5));
        assert_eq!(barray.pages_of(7), vec![3, 5]);
        assert_eq!(barray.owner(4), Some(8));
        barray.placed(7, 3, 40);
        assert!(barray.formatted_pages_of(7).is_empty());
        barray.formatted(7, 5);
        assert_eq!(barray.formatted_pages_of(7), vec![5]);
        let mut released = barray.release(7);
        released.sort();
        assert_eq!(released, vec![(3, 40), (5, 100)]);
        assert_eq!(barray.owner(3), None);
        assert_eq!(barray.claim(8, 3, 100), Claim::Taken);
        barray.unclaim(8, 3);
        assert_eq!(barray.pages_of(8), vec![4]);
        assert_eq!(barray.pages_owned(), 1);
        assert_eq!(barray.pages_claimed(), 4);
        assert!(barray.release(9).is_empty());
    }

    #[test]
    fn a_page_claimed_for_a_hot_update_is_owned_but_never_current() {
        let barray = Barray::default();
        assert_eq!(barray.claim(7, 3, 100), Claim::Taken);
        assert_eq!(barray.claim_for_hot(7, 9, 50), Claim::Taken);
        assert_eq!(barray.claim_for_hot(8, 9, 50), Claim::Refused);
        assert_eq!(barray.claim_for_hot(8, 3, 50), Claim::Refused);
        assert_eq!(barray.owner(9), Some(7));
        assert_eq!(barray.current(7), Some(3));
        assert_eq!(barray.pages_of(7), vec![3, 9]);
        // A transaction whose only page is a HOT claim has no current page.
        assert_eq!(barray.claim_for_hot(8, 4, 50), Claim::Taken);
        assert_eq!(barray.current(8), None);
        let mut released = barray.release(7);
        released.sort();
        assert_eq!(released, vec![(3, 100), (9, 50)]);
        assert_eq!(barray.owner(9), None);
    }

    #[test]
    fn names_round_trip() {
        for placement in VersionPlacement::ALL {
            assert_eq!(
                VersionPlacement::from_name(placement.name()),
                Some(placement)
            );
        }
        assert_eq!(
            VersionPlacement::from_name("si-cv"),
            Some(VersionPlacement::CoLocated)
        );
        assert_eq!(VersionPlacement::from_name("nowhere"), None);
    }
}
