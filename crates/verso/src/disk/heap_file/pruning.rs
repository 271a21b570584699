//! Pruning and vacuum of a heap file: PostgreSQL's pruning of a page on access
//! (`heap_page_prune_opt`) under its rule or Steam's eager one, lazy vacuum in its three
//! passes, freezing, and the page check (design note: `docs/design/buffer-pool.md`, "Heap
//! files" and "Eager pruning on pages"). The heap's invariants and latch order are in the
//! parent module.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use super::super::buffer_pool::PageMut;
use super::super::heap_page::{infomask, HeapPage, Line, Pruned, TupleHeader};
use super::super::page::PAGE_SIZE;
use super::super::page_log::PageChange;
use super::super::transactions::{Fate as XidFate, Resolve};
use super::super::visibility;
use super::{corrupt, heap_kind, HeapFile, Pruning, Tid, VacuumStats};
use crate::Result;

/// What pruning makes of a tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Some snapshot may see it.
    Live,
    /// Dead: replaced or deleted by a transaction every snapshot sees.
    Superseded,
    /// Dead: its creator aborted.
    CreatorAborted,
}

/// PostgreSQL prunes on access a page with less free space than this (a tenth of a page,
/// `heap_page_prune_opt` without a fill factor).
const PRUNE_WHEN_FREE_BELOW: usize = PAGE_SIZE / 10;

/// Fates and obsolete sets keyed by a tuple's (`xmin`, `xmax`) on the prune path, hashed by
/// foldhash: SipHash was a measurable share of pruning on access.
type ByXids<V> = HashMap<(u64, u64), V, foldhash::fast::FixedState>;

/// Sets of (`xmin`, `xmax`) pairs on the prune path, hashed by foldhash as [`ByXids`].
type XidPairs = HashSet<(u64, u64), foldhash::fast::FixedState>;

/// Whether a replaced tuple of page `block` may be its row's last version (a
/// delete's: PostgreSQL's `heap_delete` leaves `ctid` naming the tuple itself), which eager
/// pruning keeps so that a writer of the key meets its deleter (first-updater-wins). Not
/// hot-updated and naming a line of its own page: a delete (this engine's deletes name the
/// tuple itself; older ones left `ctid` as it was, possibly at an aborted update's version
/// on the page), or a cold update that stayed on the page, which is kept too, needlessly
/// but safely. A cold update to another page is not a last version.
fn may_be_last_version(header: &TupleHeader, block: u32) -> bool {
    !header.has(infomask::HOT_UPDATED) && header.ctid_block == block
}

impl HeapFile {
    /// Prunes a page on access if it is nearly full and its prune hint names a transaction
    /// whose versions may be dead now (PostgreSQL's `heap_page_prune_opt`): under
    /// PostgreSQL's rule one that committed below the horizon (or aborted); under eager
    /// pruning, if a look under the shared latch finds a tuple the prune would remove
    /// ([`HeapFile::would_prune_eagerly`]).
    pub(super) fn prune_if_worth_it(&self, block: u32, txns: &dyn Resolve) -> Result<()> {
        {
            let page = self.pool.read(self.id(block))?;
            if !heap_kind(&page, page.id())? {
                return Ok(());
            }
            let heap = HeapPage::new(page.body());
            let hint = heap.prune_hint();
            if hint == 0 || heap.free_space() >= PRUNE_WHEN_FREE_BELOW {
                return Ok(());
            }
            let horizon = txns.horizon();
            // PostgreSQL's test first: it costs one lookup, and what it finds eager
            // pruning removes too.
            let by_horizon = match txns.resolve(hint, horizon)? {
                XidFate::Committed { ts, .. } => ts < horizon,
                XidFate::Aborted => true,
                XidFate::Running => false,
            };
            let worth = by_horizon
                || self.pruning == Pruning::Eager
                    && self.would_prune_eagerly(&heap, block, horizon, txns)?;
            if !worth {
                return Ok(());
            }
        }
        let mut page = self.pool.write(self.id(block))?;
        let pruned = self.prune_page(&mut page, txns.horizon(), txns)?;
        if pruned.tuples_removed > 0 {
            self.pages_pruned.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Under eager pruning, whether a prune would remove something from the page now: a
    /// replaced tuple dead by the horizon or obsolete to every reader (not a deleted
    /// row's last version), or an aborted HOT update's new version. Read under the shared
    /// latch, so a reader of a full page behind a held snapshot does not take it
    /// exclusive for nothing; it reads the fates and readers the prune then reads again.
    fn would_prune_eagerly(
        &self,
        heap: &HeapPage<&[u8]>,
        block: u32,
        horizon: u64,
        txns: &dyn Resolve,
    ) -> Result<bool> {
        let mut readers = None;
        for line in 1..=heap.lines() {
            let Some(header) = heap.header(line) else {
                continue;
            };
            if header.xmax == 0 || header.has(infomask::XMAX_INVALID) {
                continue;
            }
            if visibility::is_dead(&header, horizon, txns)? {
                return Ok(true);
            }
            // An aborted replacer left a dead successor here only if its update was HOT
            // (a cold one's is on another page: nothing to remove on this one).
            if header.has(infomask::HOT_UPDATED)
                && txns.resolve(header.xmax, u64::MAX)? == XidFate::Aborted
            {
                return Ok(true);
            }
            if !may_be_last_version(&header, block) {
                let readers = readers.get_or_insert_with(|| txns.readers());
                if visibility::is_obsolete(&header, readers, txns)? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Prunes a page held exclusive against `horizon` (and, under eager pruning, the
    /// snapshots running now), logged.
    pub(super) fn prune_page(
        &self,
        page: &mut PageMut<'_>,
        horizon: u64,
        txns: &dyn Resolve,
    ) -> Result<Pruned> {
        if !heap_kind(page, page.id())? {
            return Ok(Pruned::default());
        }
        let dead = self.dead_tuples(page, horizon, txns)?;
        let obsolete = match self.pruning {
            Pruning::Horizon => XidPairs::default(),
            Pruning::Eager => self.obsolete_tuples(page, &dead, &txns.readers(), txns)?,
        };
        let block = page.id().block;
        let heap = HeapPage::new(page.body());
        let (plan, pruned) = heap.plan_prune(
            &|header| {
                dead.get(&(header.xmin, header.xmax))
                    .is_some_and(|fate| *fate != Fate::Live)
            },
            &|_, header| {
                !may_be_last_version(header, block)
                    && obsolete.contains(&(header.xmin, header.xmax))
            },
        );
        if plan.is_empty() {
            return Ok(pruned);
        }
        // The tuples the plan removes: heap-only lines it frees, and roots that become
        // redirects or dead lines while holding a tuple.
        let aborted = plan
            .unused
            .iter()
            .copied()
            .chain(plan.redirected.iter().map(|&(root, _)| root))
            .chain(plan.dead.iter().copied())
            .filter_map(|line| heap.header(line))
            .filter(|h| dead.get(&(h.xmin, h.xmax)) == Some(&Fate::CreatorAborted))
            .count() as u64;
        let id = page.id();
        HeapPage::new(page.body_mut())
            .execute_prune(&plan)
            .map_err(|reason| corrupt(id.file, id.block, reason))?;
        self.log
            .log(&mut [(&mut *page, &[PageChange::HeapPrune { plan: &plan }])])?;
        self.tuples_pruned
            .fetch_add(u64::from(pruned.tuples_removed), Ordering::Relaxed);
        self.tuples_pruned_eagerly
            .fetch_add(u64::from(pruned.removed_eagerly), Ordering::Relaxed);
        self.aborted_tuples_pruned
            .fetch_add(aborted, Ordering::Relaxed);
        Ok(pruned)
    }

    /// Which tuples of a page (by `xmin`, `xmax`) that PostgreSQL's rule keeps no
    /// snapshot sees ([`visibility::is_obsolete`]), resolved before the prune is planned.
    fn obsolete_tuples(
        &self,
        page: &PageMut<'_>,
        dead: &ByXids<Fate>,
        readers: &visibility::Readers,
        txns: &dyn Resolve,
    ) -> Result<XidPairs> {
        let heap = HeapPage::new(page.body());
        let mut obsolete = XidPairs::default();
        for line in 1..=heap.lines() {
            if let Some(header) = heap.header(line) {
                let key = (header.xmin, header.xmax);
                if dead.get(&key) == Some(&Fate::Live)
                    && !obsolete.contains(&key)
                    && visibility::is_obsolete(&header, readers, txns)?
                {
                    obsolete.insert(key);
                }
            }
        }
        Ok(obsolete)
    }

    /// Which tuples of a page (by `xmin`, `xmax`) no snapshot can see, resolved before
    /// the prune is planned (the plan's predicate cannot fail).
    fn dead_tuples(
        &self,
        page: &PageMut<'_>,
        horizon: u64,
        txns: &dyn Resolve,
    ) -> Result<ByXids<Fate>> {
        let heap = HeapPage::new(page.body());
        let mut dead = ByXids::default();
        for line in 1..=heap.lines() {
            if let Some(header) = heap.header(line) {
                if let std::collections::hash_map::Entry::Vacant(entry) =
                    dead.entry((header.xmin, header.xmax))
                {
                    let fate = if !visibility::is_dead(&header, horizon, txns)? {
                        Fate::Live
                    } else if visibility::creator_aborted(&header, txns)? {
                        Fate::CreatorAborted
                    } else {
                        Fate::Superseded
                    };
                    entry.insert(fate);
                }
            }
        }
        Ok(dead)
    }

    /// PostgreSQL's lazy vacuum, in its three passes: (1) every page is pruned against the
    /// horizon (HOT chains shortened, dead rows' roots left as dead lines) and versions
    /// committed below the horizon are frozen; (2) `remove_index_entries` is handed every
    /// dead line, to remove the index entries that point at them (HF1); (3) the dead lines
    /// are freed, and every page's free space is recorded in the map, whose upper levels
    /// are then rebuilt. Writers keep running: each page is held only while it is worked on.
    pub fn vacuum(
        &self,
        txns: &dyn Resolve,
        remove_index_entries: &mut dyn FnMut(&[Tid]) -> Result<()>,
    ) -> Result<VacuumStats> {
        let _one_at_a_time = self.vacuuming.lock();
        let mut stats = VacuumStats::default();
        let horizon = txns.horizon();
        // Counted under the extension lock (PostgreSQL's vacuum takes it for a new page,
        // `lazy_scan_new_or_empty`): a block the file grew by is counted before its
        // extender has it pinned and formatted, and a vacuum reading it then saw a new page,
        // offered it in the map, and a writer formatted and filled it, which the extender
        // then formatted again, losing the writer's tuple (the anomalies suite's threads
        // hit the pool's assertion that a block being allocated is still zeros). Every
        // block counted here is formatted, or new for good (a crash or a drop left it).
        let pages = {
            let _no_extension = self.extending.lock();
            self.pages()?
        };
        let mut dead_lines: Vec<Tid> = Vec::new();
        for block in 0..pages {
            let mut page = self.pool.write(self.id(block))?;
            stats.pages_scanned += 1;
            if !heap_kind(&page, page.id())? {
                drop(page);
                // A page the file grew by whose first image a crash lost: empty, and
                // offered to inserts (PostgreSQL's `lazy_scan_new_or_empty`), which
                // format it on first use.
                self.free_space
                    .record(block, super::super::heap_page::EMPTY_PAGE_FREE_BYTES)?;
                continue;
            }
            let pruned = self.prune_page(&mut page, horizon, txns)?;
            stats.tuples_removed += u64::from(pruned.tuples_removed);
            stats.tuples_frozen += self.freeze(&mut page, horizon, txns)?;
            let heap = HeapPage::new(page.body());
            for line in 1..=heap.lines() {
                match heap.line(line) {
                    Line::Dead => dead_lines.push(Tid { block, line }),
                    Line::Normal { .. } => {
                        let header = heap.header(line).expect("a tuple");
                        if !visibility::is_dead(&header, horizon, txns)? {
                            stats.tuples_remaining += 1;
                        }
                    }
                    _ => {}
                }
            }
            let free = heap.free_space();
            let has_dead = dead_lines.last().is_some_and(|tid| tid.block == block);
            drop(page);
            if !has_dead {
                self.free_space.record(block, free)?;
            }
        }
        if !dead_lines.is_empty() {
            remove_index_entries(&dead_lines)?;
            for lines in dead_lines.chunk_by(|a, b| a.block == b.block) {
                let block = lines[0].block;
                let lines: Vec<u16> = lines.iter().map(|tid| tid.line).collect();
                // Before the lines can be taken again (`lines_freed`).
                self.lines_freed.fetch_add(1, Ordering::SeqCst);
                let mut page = self.pool.write(self.id(block))?;
                let id = page.id();
                let freed = HeapPage::new(page.body_mut())
                    .free_dead_lines(&lines)
                    .map_err(|reason| corrupt(id.file, id.block, reason))?;
                self.log
                    .log(&mut [(&mut page, &[PageChange::HeapFreeDead { lines: &lines }])])?;
                stats.dead_lines_freed += u64::from(freed);
                let free = HeapPage::new(page.body()).free_space();
                drop(page);
                self.free_space.record(block, free)?;
            }
        }
        self.free_space.vacuum()?;
        Ok(stats)
    }

    /// Checks every page's invariants (`disk::heap_page`'s H1-H4); the first broken one
    /// is a corruption error.
    pub fn check(&self) -> Result<()> {
        for block in 0..self.pages()? {
            let page = self.pool.read(self.id(block))?;
            if heap_kind(&page, page.id())? {
                HeapPage::new(page.body())
                    .check()
                    .map_err(|reason| corrupt(self.file, block, reason))?;
            }
        }
        Ok(())
    }

    /// Freezes the tuples of a page held exclusive whose creators committed below the
    /// horizon (PostgreSQL's `heap_freeze_tuple`, done eagerly): from then on no reader
    /// looks their creator up. Logged as header changes. Returns how many it froze.
    fn freeze(&self, page: &mut PageMut<'_>, horizon: u64, txns: &dyn Resolve) -> Result<u64> {
        let heap = HeapPage::new(page.body());
        let mut frozen = Vec::new();
        for line in 1..=heap.lines() {
            if let Some(mut header) = heap.header(line) {
                if visibility::may_freeze(&header, horizon, txns)? {
                    header.infomask |= visibility::FROZEN;
                    frozen.push((line, header));
                }
            }
        }
        if frozen.is_empty() {
            return Ok(0);
        }
        let mut heap = HeapPage::new(page.body_mut());
        let changes: Vec<PageChange<'_>> = frozen
            .iter()
            .map(|&(line, header)| {
                heap.set_header(line, &header);
                PageChange::HeapSetHeader { line, header }
            })
            .collect();
        self.log.log(&mut [(&mut *page, &changes)])?;
        Ok(frozen.len() as u64)
    }
}
