//! PostgreSQL's free-space map for the disk engine's heap files: how much room each heap
//! page has, one byte per page, in a tree of max-trees, so an insert finds a page with room
//! in a few page reads (PostgreSQL's `src/backend/storage/freespace/README`; design note:
//! `docs/design/buffer-pool.md`, "The free-space map").
//!
//! # Categories
//!
//! A heap page's free bytes are recorded as a *category*, `free / 32` (8 KiB / 256), at most
//! 255: a page of category `c` has at least `32 c` bytes free. A request for `n` bytes needs
//! category `ceil(n / 32)` ([`needed_category`]), so any page found really has the room;
//! the rounding down of what is recorded and up of what is asked costs at most 31 bytes
//! a page.
//!
//! # Layout
//!
//! Each map page's body holds a complete binary max-tree of [`SLOTS`] leaves in an array
//! (node `i`'s children are `2i + 1` and `2i + 2`; the leaves, in order, are the last
//! [`SLOTS`] nodes), after a 4-byte reserved word. The pages form a tree of three levels:
//! a level-0 page's leaves are heap pages, a level-1 page's leaves are level-0 pages (each
//! slot the root of its child's tree), and the one level-2 page (the map's root) has the
//! level-1 pages under it; three levels cover `2048^3` heap pages, more than a `u32` block
//! number reaches. Pages are laid out depth first, as PostgreSQL does: block 0 is the
//! root, level-1 page `i` is at `1 + i (1 + 2048)`, and level-0 page `j` right after its
//! parent, at `block(level 1, j / 2048) + 1 + j % 2048`. A page never written (zeros, or
//! past the end of the file) is a tree of zeros: no room recorded.
//!
//! # Invariants
//!
//! - **F1** Within a page, every inner node is the maximum of its two children, whenever
//!   the page is not latched exclusive.
//! - **F2** (approximate, as PostgreSQL's) An upper slot is its child page's root as of
//!   the last update that went up through it; concurrent updates and crashes may leave it
//!   stale. Every record refreshes the slots on its path; a search that finds a slot
//!   promising more than its child holds lowers the slot and the path above it and goes
//!   on; [`FreeSpaceMap::vacuum`] recomputes every upper slot (zero for a child the file
//!   no longer has). With no crash or I/O error since the last vacuum, F2 is exact
//!   whenever nothing runs: every change refreshes the path above it, each slot from its child read under
//!   the slot's latch (loom models below check two threads at a time).
//! - **F3** Latches are taken one page at a time, or a parent then its child (top down),
//!   never a child then its parent: no cycle.
//!
//! # Not logged
//!
//! The map is a hint, as PostgreSQL's: its pages carry no log records (LSN 0, so their
//! write-back waits for nothing; a page found with another kind or an LSN is not the map's
//! and is started over whole, header included), a crash may lose or tear them, and the
//! caller re-checks the heap page it is given. A map page that reads as corrupt (torn) is
//! taken as zeros and rewritten: it only hides room until the pages below it are recorded
//! again or vacuum runs. I/O errors reach the caller.

use std::collections::HashMap;
use std::sync::Arc;

use super::buffer_pool::{BufferPool, PageMut};
use super::page::{FileNo, PageId, PAGE_HEADER_BYTES, PAGE_SIZE};
use crate::sync::Mutex;
use crate::{Error, Result};

/// The page kind of a free-space map page.
pub const KIND_FSM_PAGE: u16 = 0xF5A1;
/// Leaves per map page (a power of two, so the leaves are in order).
pub const SLOTS: u32 = 2048;
/// Bytes per category step.
pub const CATEGORY_BYTES: usize = PAGE_SIZE / 256;

const LEVELS: u32 = 3;
const NODES: usize = 2 * SLOTS as usize - 1;
/// Body bytes before the tree.
const TREE_AT: usize = 4;
const _: () = assert!(TREE_AT + NODES <= PAGE_SIZE - PAGE_HEADER_BYTES);

/// The category recorded for a page with `free` bytes: `free / 32`, at most 255.
pub fn available_category(free: usize) -> u8 {
    (free / CATEGORY_BYTES).min(255) as u8
}

/// The largest request the map can answer: category 255 promises only this much room.
pub const MAX_REQUEST_BYTES: usize = 255 * CATEGORY_BYTES;

/// The category a request for `bytes` needs: `ceil(bytes / 32)`; `None` past
/// [`MAX_REQUEST_BYTES`] (no recorded page is known to have the room: extend the heap).
pub fn needed_category(bytes: usize) -> Option<u8> {
    (bytes <= MAX_REQUEST_BYTES).then(|| bytes.div_ceil(CATEGORY_BYTES) as u8)
}

/// The free-space map of one heap file, in its own file of the same buffer pool. Cheap to
/// clone; every clone is the same map.
#[derive(Clone, Debug)]
pub struct FreeSpaceMap {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    pool: Arc<BufferPool>,
    file: FileNo,
    /// Per map page, the slot a search starts from (PostgreSQL's `fp_next_slot`, kept in
    /// memory so a search dirties no page): inserters spread over pages.
    next_slot: Mutex<HashMap<u32, u32>>,
}

/// A map page's place in the tree: its level (0: leaves are heap pages) and its index
/// among that level's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Address {
    level: u32,
    index: u64,
}

impl Address {
    const ROOT: Address = Address {
        level: LEVELS - 1,
        index: 0,
    };

    /// The block of the map file holding this page (depth-first layout).
    fn block(self) -> u32 {
        let fan = u64::from(SLOTS);
        let block = match self.level {
            2 => 0,
            1 => 1 + self.index * (1 + fan),
            _ => 1 + (self.index / fan) * (1 + fan) + 1 + self.index % fan,
        };
        u32::try_from(block).expect("three levels of 2048 stay below 2^32 blocks")
    }

    /// The page holding this page's slot, and the slot.
    fn parent(self) -> Option<(Address, u32)> {
        (self.level + 1 < LEVELS).then(|| {
            (
                Address {
                    level: self.level + 1,
                    index: self.index / u64::from(SLOTS),
                },
                (self.index % u64::from(SLOTS)) as u32,
            )
        })
    }

    /// The first heap block under this page.
    fn first_block(self) -> u64 {
        self.index * u64::from(SLOTS).pow(self.level + 1)
    }

    /// The heap blocks under each of this page's slots.
    fn blocks_per_slot(self) -> u64 {
        u64::from(SLOTS).pow(self.level)
    }

    fn child(self, slot: u32) -> Address {
        debug_assert!(self.level > 0);
        Address {
            level: self.level - 1,
            index: self.index * u64::from(SLOTS) + u64::from(slot),
        }
    }
}

/// The level-0 page and slot of heap block `block`.
fn leaf_of(block: u32) -> (Address, u32) {
    (
        Address {
            level: 0,
            index: u64::from(block / SLOTS),
        },
        block % SLOTS,
    )
}

/// A page's tree, read or changed in place.
struct Tree<B>(B);

impl<B: AsRef<[u8]>> Tree<B> {
    fn node(&self, i: usize) -> u8 {
        self.0.as_ref()[TREE_AT + i]
    }

    fn root(&self) -> u8 {
        self.node(0)
    }

    fn slot(&self, slot: u32) -> u8 {
        self.node(SLOTS as usize - 1 + slot as usize)
    }

    /// The first slot at or after `from` whose value is at least `category`.
    fn first_at_or_after(&self, from: u32, category: u8) -> Option<u32> {
        self.search(0, 0, SLOTS, from, category)
    }

    /// Within node `i`, covering slots `low..high`: the first slot at or after `from`.
    fn search(&self, i: usize, low: u32, high: u32, from: u32, category: u8) -> Option<u32> {
        if high <= from || self.node(i) < category {
            return None;
        }
        if high - low == 1 {
            return Some(low);
        }
        let mid = low + (high - low) / 2;
        self.search(2 * i + 1, low, mid, from, category)
            .or_else(|| self.search(2 * i + 2, mid, high, from, category))
    }

    /// F1 over the page: the first inner node that is not the max of its children.
    fn check(&self) -> std::result::Result<(), String> {
        for i in 0..SLOTS as usize - 1 {
            let max = self.node(2 * i + 1).max(self.node(2 * i + 2));
            if self.node(i) != max {
                return Err(format!(
                    "node {i} holds {}, its children's max is {max} (F1)",
                    self.node(i)
                ));
            }
        }
        Ok(())
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Tree<B> {
    /// Sets a slot and the max-tree above it (only as far as something changes); returns
    /// whether the page's root changed.
    fn set_slot(&mut self, slot: u32, value: u8) -> bool {
        let root = self.root();
        let mut i = SLOTS as usize - 1 + slot as usize;
        self.0.as_mut()[TREE_AT + i] = value;
        while i > 0 {
            let parent = (i - 1) / 2;
            let max = self.node(2 * parent + 1).max(self.node(2 * parent + 2));
            if self.node(parent) == max {
                break;
            }
            self.0.as_mut()[TREE_AT + parent] = max;
            i = parent;
        }
        self.root() != root
    }

    /// Recomputes every inner node from the slots.
    fn rebuild(&mut self) {
        for i in (0..SLOTS as usize - 1).rev() {
            let max = self.node(2 * i + 1).max(self.node(2 * i + 2));
            self.0.as_mut()[TREE_AT + i] = max;
        }
    }
}

impl FreeSpaceMap {
    /// The map in `file` (attached to `pool`; empty or not).
    pub fn open(pool: Arc<BufferPool>, file: FileNo) -> Result<Self> {
        pool.file_pages(file)?;
        Ok(FreeSpaceMap {
            shared: Arc::new(Shared {
                pool,
                file,
                next_slot: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The file the map lives in.
    pub fn file(&self) -> FileNo {
        self.shared.file
    }

    /// The buffer pool the map lives in.
    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.shared.pool
    }

    /// Latches map page `at` exclusive, making it a map page if it never was one or reads
    /// as torn (the map is a hint: a lost page only hides room).
    fn write(&self, at: Address) -> Result<PageMut<'_>> {
        let s = &*self.shared;
        let id = PageId::new(s.file, at.block());
        s.pool.extend_to(s.file, id.block + 1)?;
        let mut page = match s.pool.write(id) {
            Ok(page) => page,
            // Torn: the pool loaded nothing. `overwrite` gives zeros, or the pool's copy if
            // another thread rewrote the page meanwhile, which is a whole map page whose
            // records must not be wiped.
            Err(Error::Corruption { .. }) => s.pool.overwrite(id)?,
            Err(other) => return Err(other),
        };
        if page.kind() != KIND_FSM_PAGE || page.lsn() != 0 {
            // Never written (zeros), torn, or not a map page (no map page has an LSN): start
            // it over as zeros, header included. Map pages keep LSN 0, so their write-back
            // never waits for the log; a foreign page's LSN kept here would make it wait
            // for a record that is not the map's, or one the log never reached.
            page.clear();
            page.set_kind(KIND_FSM_PAGE);
        }
        Ok(page)
    }

    /// The values of map page `at` (zeros if it does not exist or is not readable as one).
    fn read(&self, at: Address) -> Result<Vec<u8>> {
        let s = &*self.shared;
        let id = PageId::new(s.file, at.block());
        if id.block >= s.pool.file_pages(s.file)? {
            return Ok(vec![0; NODES + TREE_AT]);
        }
        match s.pool.read(id) {
            Ok(page) if page.kind() == KIND_FSM_PAGE && page.lsn() == 0 => {
                Ok(page.body()[..TREE_AT + NODES].to_vec())
            }
            Ok(_) | Err(Error::Corruption { .. }) => Ok(vec![0; NODES + TREE_AT]),
            Err(other) => Err(other),
        }
    }

    /// Records that heap block `block` has `free_bytes` free, and refreshes the slots on
    /// its page's path to the root, each to its child's root as it is then: an upper slot
    /// a crash left too low (F2) is repaired by the next record below it, not only by
    /// `vacuum`. A slot that already holds its child's root is not written.
    pub fn record(&self, block: u32, free_bytes: usize) -> Result<()> {
        let (at, slot) = leaf_of(block);
        {
            let mut page = self.write(at)?;
            let value = available_category(free_bytes);
            if Tree(page.body()).slot(slot) != value {
                Tree(page.body_mut()).set_slot(slot, value);
            }
        }
        self.refresh_path_above(at)
    }

    /// Sets every slot on the path from page `at` up to the root to its child's root as it
    /// is then, bottom up, so that the slots above a changed page promise what it holds.
    fn refresh_path_above(&self, mut at: Address) -> Result<()> {
        while let Some((parent, slot)) = at.parent() {
            self.copy_root_up(parent, slot, at)?;
            at = parent;
        }
        Ok(())
    }

    /// Sets `parent`'s `slot` to `child`'s root as it is now (the parent latched first,
    /// F3), writing the page only if the slot changes; returns whether it changed. Under
    /// the parent's latch the child is read as it is then, so whichever thread refreshes a
    /// slot last read its child last: once every change below has refreshed its path, the
    /// slot is right (F2 when nothing runs).
    fn copy_root_up(&self, parent: Address, slot: u32, child: Address) -> Result<bool> {
        let mut page = self.write(parent)?;
        let root = self.read(child)?[TREE_AT];
        let changed = Tree(page.body()).slot(slot) != root;
        if changed {
            Tree(page.body_mut()).set_slot(slot, root);
        }
        Ok(changed)
    }

    /// The category recorded for heap block `block` (0 if never recorded).
    pub fn recorded(&self, block: u32) -> Result<u8> {
        let (at, slot) = leaf_of(block);
        Ok(Tree(self.read(at)?).slot(slot))
    }

    /// A heap block recorded with room for `bytes`, skipping those `exclude` refuses (SI-CV:
    /// pages a live transaction owns); `None` if there is none. Searches from the root down,
    /// each page from its next-slot hint on (then from its start), and lowers any upper slot
    /// found promising more than its child holds (F2).
    pub fn find(&self, bytes: usize, exclude: &dyn Fn(u32) -> bool) -> Result<Option<u32>> {
        match needed_category(bytes) {
            Some(category) => self.find_in(Address::ROOT, category.max(1), exclude),
            None => Ok(None),
        }
    }

    fn find_in(
        &self,
        at: Address,
        category: u8,
        exclude: &dyn Fn(u32) -> bool,
    ) -> Result<Option<u32>> {
        let tree = Tree(self.read(at)?);
        let hint = self
            .shared
            .next_slot
            .lock()
            .get(&at.block())
            .copied()
            .unwrap_or(0);
        // From the hint to the end, then from the start to the hint.
        for (from, end) in [(hint, SLOTS), (0, hint)] {
            let mut next = from;
            while let Some(slot) = tree.first_at_or_after(next, category) {
                if slot >= end {
                    break;
                }
                next = slot + 1;
                let found = if at.level == 0 {
                    let block = at.index * u64::from(SLOTS) + u64::from(slot);
                    match u32::try_from(block) {
                        Ok(block) if !exclude(block) => Some(block),
                        _ => None,
                    }
                } else {
                    let child = at.child(slot);
                    let found = self.find_in(child, category, exclude)?;
                    // Stale (F2), or every candidate below excluded: set the slot to what
                    // the child holds (a no-op in the second case). A lowered slot may
                    // lower this page's root, and the search may yet succeed in another
                    // slot here and never come back through the slots above: carry it up
                    // now, so no slot above keeps promising what this page lost.
                    if found.is_none() && self.copy_root_up(at, slot, child)? {
                        self.refresh_path_above(at)?;
                    }
                    found
                };
                if let Some(block) = found {
                    // PostgreSQL's `fsm_search_avail` with `advancenext` at the bottom only:
                    // the next search starts past this heap block (inserters spread over
                    // heap pages), but upper pages keep pointing at the same child, so
                    // successive inserts fill heap blocks near each other rather than
                    // jumping to another map page's blocks each time.
                    let next = if at.level == 0 {
                        (slot + 1) % SLOTS
                    } else {
                        slot
                    };
                    self.shared.next_slot.lock().insert(at.block(), next);
                    return Ok(Some(block));
                }
            }
        }
        Ok(None)
    }

    /// Recomputes every page's inner nodes and every upper slot from the level below
    /// (PostgreSQL's `FreeSpaceMapVacuum`): stale upper slots (F2) end here.
    pub fn vacuum(&self) -> Result<()> {
        self.vacuum_page(Address::ROOT)
    }

    /// Vacuums the subtree of page `at`: the children first, then this page's slots and
    /// inner nodes ([`FreeSpaceMap::rewrite_slots_from`]).
    fn vacuum_page(&self, at: Address) -> Result<()> {
        if !self.exists(at)? {
            return Ok(());
        }
        if at.level == 0 {
            return self.rewrite_slots_from(at, SLOTS); // the slots are the truth: F1 only
        }
        for slot in 0..SLOTS {
            let child = at.child(slot);
            if !self.exists(child)? {
                break; // blocks grow with the slot: none after this one exists
            }
            self.vacuum_page(child)?;
        }
        self.rewrite_slots_from(at, 0)
    }

    /// Forgets the room of heap blocks `heap_blocks` and after, for a heap file truncated to
    /// `heap_blocks` blocks (PostgreSQL's `FreeSpaceMapPrepareTruncateRel`): their slots
    /// become 0 and every slot above them is set to its child's root, so no search is sent
    /// to a block the heap no longer has. The map's file keeps its pages (the pool does not
    /// shrink files). The caller records nothing at or past `heap_blocks` meanwhile;
    /// records and finds below it may run.
    pub fn truncate(&self, heap_blocks: u32) -> Result<()> {
        self.truncate_page(Address::ROOT, u64::from(heap_blocks))
    }

    /// Truncates the subtree of page `at` to the heap blocks before `end`; `at` covers
    /// `end` or lies wholly past it. The children from the one covering `end` on first,
    /// then this page's slots from that child's on.
    fn truncate_page(&self, at: Address, end: u64) -> Result<()> {
        if !self.exists(at)? {
            return Ok(());
        }
        // A page wholly past `end` loses every slot (`saturating_sub` gives 0); the page
        // covering `end` keeps the slots before the one covering it.
        let from = end.saturating_sub(at.first_block()) / at.blocks_per_slot();
        let from = u32::try_from(from).expect("the page covers `end` or lies past it");
        debug_assert!(from < SLOTS);
        if at.level > 0 {
            for slot in from..SLOTS {
                let child = at.child(slot);
                if !self.exists(child)? {
                    break; // blocks grow with the slot: none after this one exists
                }
                self.truncate_page(child, end)?;
            }
        }
        self.rewrite_slots_from(at, from)
    }

    /// Under page `at`'s exclusive latch, sets its slots from `from` on (an upper page's to
    /// its children's roots as they are then, 0 for a child past the file's end; a level-0
    /// page's to 0, their heap blocks gone) and recomputes every inner node from the slots
    /// (F1). Children are read under this page's latch (F3), so a record that went up
    /// meanwhile is not overwritten with an older value; and the file's length is read
    /// under it too, so a child a record adds after that read has its slot refreshed by
    /// that record after this latch is let go.
    fn rewrite_slots_from(&self, at: Address, from: u32) -> Result<()> {
        let mut page = self.write(at)?;
        let pages = self.shared.pool.file_pages(self.shared.file)?;
        let mut slots = vec![0u8; (SLOTS - from) as usize];
        if at.level > 0 {
            for (slot, value) in (from..SLOTS).zip(slots.iter_mut()) {
                let child = at.child(slot);
                if child.block() >= pages {
                    break;
                }
                *value = self.read(child)?[TREE_AT];
            }
        }
        let first = TREE_AT + SLOTS as usize - 1 + from as usize;
        page.body_mut()[first..TREE_AT + NODES].copy_from_slice(&slots);
        Tree(page.body_mut()).rebuild();
        Ok(())
    }

    /// Whether the map's file reaches page `at` (a page past its end reads as zeros).
    fn exists(&self, at: Address) -> Result<bool> {
        Ok(at.block() < self.shared.pool.file_pages(self.shared.file)?)
    }

    /// Checks F1 on every page and that every upper slot equals its child's root (true
    /// after [`FreeSpaceMap::vacuum`] with nothing recording meanwhile). For tests.
    pub fn check(&self) -> Result<()> {
        self.check_page(Address::ROOT).map(drop)
    }

    fn check_page(&self, at: Address) -> Result<u8> {
        let tree = Tree(self.read(at)?);
        let corrupt = |reason: String| Error::Corruption {
            file: format!("free-space map file {}", self.shared.file.0),
            offset: PageId::new(self.shared.file, at.block()).offset(),
            reason,
        };
        tree.check().map_err(corrupt)?;
        if at.level > 0 {
            let pages = self.shared.pool.file_pages(self.shared.file)?;
            for slot in 0..SLOTS {
                let child = at.child(slot);
                let root = if child.block() < pages {
                    self.check_page(child)?
                } else {
                    0
                };
                if tree.slot(slot) != root {
                    return Err(corrupt(format!(
                        "slot {slot} holds {}, its child's root is {root} (F2)",
                        tree.slot(slot)
                    )));
                }
            }
        }
        Ok(tree.root())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_round_recorded_room_down_and_requests_up() {
        assert_eq!(available_category(0), 0);
        assert_eq!(available_category(31), 0);
        assert_eq!(available_category(32), 1);
        assert_eq!(available_category(8191), 255);
        assert_eq!(available_category(8192), 255);
        assert_eq!(needed_category(1), Some(1));
        assert_eq!(needed_category(32), Some(1));
        assert_eq!(needed_category(33), Some(2));
        assert_eq!(needed_category(MAX_REQUEST_BYTES), Some(255));
        assert_eq!(needed_category(MAX_REQUEST_BYTES + 1), None);
        // A page found for a request has the room: category c means at least 32 c bytes.
        for free in 0..9000usize {
            for bytes in [1usize, 31, 32, 33, 500, 8000, MAX_REQUEST_BYTES] {
                let needed = needed_category(bytes).unwrap();
                if available_category(free) >= needed {
                    assert!(free >= bytes, "{free} free taken for {bytes}");
                }
            }
        }
    }

    #[test]
    fn the_layout_is_depth_first_and_addresses_go_up_and_down() {
        assert_eq!(Address::ROOT.block(), 0);
        let first_l1 = Address { level: 1, index: 0 };
        assert_eq!(first_l1.block(), 1);
        assert_eq!(Address { level: 0, index: 0 }.block(), 2);
        assert_eq!(
            Address {
                level: 0,
                index: 2047
            }
            .block(),
            2049
        );
        assert_eq!(Address { level: 1, index: 1 }.block(), 2050);
        assert_eq!(
            Address {
                level: 0,
                index: 2048
            }
            .block(),
            2051
        );
        let (leaf, slot) = leaf_of(u32::MAX);
        assert_eq!(slot, u32::MAX % SLOTS);
        let (l1, l1_slot) = leaf.parent().unwrap();
        assert_eq!(l1.child(l1_slot), leaf);
        let (root, root_slot) = l1.parent().unwrap();
        assert_eq!((root, root.child(root_slot)), (Address::ROOT, l1));
        assert!(root.parent().is_none());
        // Every page has its own block.
        let mut blocks: Vec<u32> = (0..3u64)
            .flat_map(|i| {
                [Address { level: 1, index: i }]
                    .into_iter()
                    .chain((0..SLOTS as u64).map(move |j| Address {
                        level: 0,
                        index: i * SLOTS as u64 + j,
                    }))
            })
            .map(Address::block)
            .collect();
        let n = blocks.len();
        blocks.sort_unstable();
        blocks.dedup();
        assert_eq!(blocks.len(), n);
        assert!(!blocks.contains(&0));
    }

    proptest::proptest! {
        /// A page's tree answers "the first slot at or after `from` with at least `c`" as
        /// a scan of its slots does, and keeps F1 through any sets.
        #[test]
        fn a_page_tree_finds_what_a_scan_finds(
            sets in proptest::collection::vec((0u32..SLOTS, proptest::prelude::any::<u8>()), 0..200),
            from in 0u32..SLOTS,
            category in 1u8..=255,
        ) {
            let mut tree = Tree(vec![0u8; TREE_AT + NODES]);
            let mut slots = vec![0u8; SLOTS as usize];
            for (slot, value) in sets {
                tree.set_slot(slot, value);
                slots[slot as usize] = value;
            }
            proptest::prop_assert_eq!(tree.check(), Ok(()));
            let expected = (from..SLOTS).find(|&s| slots[s as usize] >= category);
            proptest::prop_assert_eq!(tree.first_at_or_after(from, category), expected);
        }

        /// Checking any bytes never panics.
        #[test]
        fn checking_any_bytes_never_panics(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), TREE_AT + NODES),
        ) {
            let _ = Tree(bytes).check();
        }
    }
}

/// Loom model checks of the map's latch protocol (F2 and F3): two threads record, find or
/// truncate under pages they share, and in every interleaving no latch cycle forms and,
/// once both are done, every upper slot equals its child's root (`check`) and every block
/// holds what was last recorded. Run with `RUSTFLAGS="--cfg loom" cargo test -p verso --lib
/// --release disk::free_space_map`.
#[cfg(all(test, loom))]
mod loom_tests {
    use std::path::Path;

    use loom::sync::Arc;
    use loom::thread;

    use super::{available_category, FreeSpaceMap, SLOTS};
    use crate::disk::loom_tests::MemoryFile;
    use crate::disk::{BufferPool, FileNo, ReplacementPolicy, Unlogged};

    /// A map with heap block 1 recorded at 1,000 free bytes, so its file already has the
    /// root, level-1 page 0 and level-0 page 0 (the models explore latching, not the first
    /// formatting of pages), and, with `second_page`, heap block `SLOTS + 1` (level-0 page
    /// 1) too. Six frames: nothing is evicted.
    fn map_with_block_1(second_page: bool) -> FreeSpaceMap {
        let pool = BufferPool::new(6, ReplacementPolicy::Clock, std::sync::Arc::new(Unlogged));
        let file = FileNo(0);
        pool.attach(
            file,
            Path::new("loom"),
            Box::new(MemoryFile(std::sync::Mutex::new(Vec::new()))),
        )
        .unwrap();
        let map = FreeSpaceMap::open(std::sync::Arc::new(pool), file).unwrap();
        map.record(1, 1000).unwrap();
        if second_page {
            map.record(SLOTS + 1, 1000).unwrap();
        }
        map
    }

    /// Both records change level-0 page 0's root and race to carry it up: whichever
    /// refreshes a slot last must have read the child after both changes.
    #[test]
    fn loom_two_recorders_under_one_page_leave_every_upper_slot_right() {
        loom::model(|| {
            let map = Arc::new(map_with_block_1(false));
            let other = {
                let map = Arc::clone(&map);
                // Lowers the page's root: block 1 held its largest value.
                thread::spawn(move || map.record(1, 0).unwrap())
            };
            map.record(2, 3000).unwrap();
            other.join().unwrap();
            map.check().unwrap();
            assert_eq!(
                (map.recorded(1).unwrap(), map.recorded(2).unwrap()),
                (0, available_category(3000))
            );
        });
    }

    /// A finder meets block 1's room while a recorder takes it and then gives block 2
    /// more: the finder finds a block that had the room or nothing, and a slot it lowers
    /// on the way (promising block 1's room after block 1's page lost it) is set from the
    /// child as it is when lowered, never from what the finder saw before block 2 came.
    #[test]
    fn loom_a_finder_beside_a_recorder_finds_only_what_was_there_and_hides_nothing() {
        loom::model(|| {
            let map = Arc::new(map_with_block_1(false));
            let finder = {
                let map = Arc::clone(&map);
                thread::spawn(move || map.find(900, &|_| false).unwrap())
            };
            map.record(1, 0).unwrap();
            map.record(2, 3000).unwrap();
            let found = finder.join().unwrap();
            assert!(matches!(found, None | Some(1 | 2)), "found {found:?}");
            map.check().unwrap();
            assert_eq!(map.find(900, &|_| false).unwrap(), Some(2));
        });
    }

    /// Truncating the heap to `SLOTS` blocks (level-0 page 1's block goes) while block 2,
    /// below the new end, is recorded: truncate rewrites the level-1 page and the root from
    /// their children under their latches, so it never puts back a root older than the
    /// record's.
    #[test]
    fn loom_truncate_beside_a_recorder_below_the_end_keeps_the_record() {
        loom::model(|| {
            let map = Arc::new(map_with_block_1(true));
            let truncater = {
                let map = Arc::clone(&map);
                thread::spawn(move || map.truncate(SLOTS).unwrap())
            };
            map.record(2, 3000).unwrap();
            truncater.join().unwrap();
            map.check().unwrap();
            assert_eq!(
                [1, 2, SLOTS + 1].map(|block| map.recorded(block).unwrap()),
                [available_category(1000), available_category(3000), 0]
            );
            assert_eq!(map.find(2000, &|_| false).unwrap(), Some(2));
        });
    }
}
