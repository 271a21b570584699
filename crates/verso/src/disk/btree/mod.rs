//! A paged B+-tree through the buffer pool: one file of 8 KiB pages, keys and values as
//! byte strings compared bytewise (Verso's keys are order-preserving encodings: `key.rs`),
//! for the disk engine's primary and secondary indexes (design note:
//! `docs/design/buffer-pool.md`).
//!
//! Page 0 of the file is the meta page (the root's block and level); every other page is a
//! node ([`node`]). Concurrency is latch coupling (Bayer and Schkolnick's protocol):
//!
//! - A reader latches each node shared and its child before letting the node go, from the
//!   meta page down to a leaf: it never sees a node half split.
//! - A writer descends the same way and latches the leaf exclusive. If the change fits in
//!   the leaf it is made there (most are). Otherwise the writer lets everything go and
//!   descends again latching exclusive from the meta page down, releasing every ancestor of
//!   a node that can take one more separator (a *safe* node); the nodes still held are the
//!   ones a split can reach, and it splits them bottom up.
//! - Latches are taken top-down only, so no two threads wait on each other in a cycle.
//!   (Scans re-descend for each leaf rather than follow sibling links: see [`Range`].)
//!
//! Invariants:
//! - **T1** Every key in the subtree of an internal node's child `i` lies in the child's
//!   fences: at or above separator `i` (`i > 0`) and below separator `i + 1`.
//! - **T2** All leaves are at level 0 and a node's children are one level below it; the
//!   meta page's root level is the root's level.
//! - **T3** A node is changed only under its exclusive latch, and a split changes the split
//!   node, its new right sibling and its parent (or the meta page) under their exclusive
//!   latches, all held until the split is whole.
//!
//! Where a leaf splits: near the middle of its bytes, unless the new key continues an
//! ascending run in the leaf (the last insert into it went to the slot just before), as
//! TPC-C's order lines, orders and new orders do within each district, and any load in key
//! order does. Then the leaf splits before the new key where the left node is
//! [`RUN_SPLIT_FILL_PERCENT`] full (PostgreSQL's leaf fill factor, which leaves room for
//! the entries of later updates that are not HOT), if that leaves at least half the bytes
//! on the left, and the run goes on in the right node (InnoDB splits at the insert point
//! on the same sign; PostgreSQL's "split after new tuple" aims at the same pattern).
//! Midpoint splits would leave every leaf of such a run half empty for good. Where the last inserts went is a lossy, unlogged hint
//! ([`LastInserts`]): it only ever chooses between two valid split points.
//!
//! Removal takes an entry out of its leaf and leaves the leaf in place even when it becomes
//! empty (as PostgreSQL's B-tree does until VACUUM deletes an empty page); reclaiming empty
//! pages belongs with the disk engine's vacuum.
//!
//! Crash safety comes from the page log ([`super::page_log`]) for a tree opened with
//! [`BTree::open_logged`]: a leaf's put or removal is logged as a change, a split as one
//! record of images of every page it changed, each before the pages' latches go. An
//! unlogged tree ([`BTree::open`]) survives exactly what [`BufferPool::flush`] made
//! durable.

mod node;

#[cfg(all(test, loom))]
mod loom_tests;

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use node::{room_for, Node, MAX_ENTRY_BYTES, MAX_KEY_BYTES, MAX_SEPARATOR_ROOM, NODE_ROOM};

use super::buffer_pool::{BufferPool, DirtyCause, PageMut, PageRef};
use super::page::{FileNo, Page, PageId};
use super::page_log::{PageChange, PageLog};
use crate::sync::Mutex;
use crate::{Error, Result};

/// The page kind of a tree's meta page.
pub const KIND_BTREE_META: u16 = 0xB701;
/// The page kind of a tree's nodes.
pub const KIND_BTREE_NODE: u16 = 0xB702;
/// The most bytes an entry's key and value may have together.
pub const MAX_BTREE_ENTRY_BYTES: usize = MAX_ENTRY_BYTES;
/// The most bytes a key may have (four fewer than an entry: a key is also a separator,
/// stored with its child's block).
pub const MAX_BTREE_KEY_BYTES: usize = MAX_KEY_BYTES;

const META_BLOCK: u32 = 0;

/// How full a leaf split at an ascending run leaves its left node: PostgreSQL's default
/// leaf fill factor for B-tree indexes.
pub const RUN_SPLIT_FILL_PERCENT: usize = 90;
const MAGIC: &[u8; 4] = b"VBT1";

/// A B+-tree in one file of a [`BufferPool`]. Cheap to clone; every clone is the same tree.
#[derive(Clone, Debug)]
pub struct BTree {
    pool: Arc<BufferPool>,
    file: FileNo,
    /// Blocks of pages no parent points at, left untouched by splits that failed after
    /// taking them; the next splits use them first.
    spares: Arc<Mutex<Vec<u32>>>,
    /// The log of every change (`None`: an unlogged tree, which survives a crash only as
    /// of its last flush).
    log: Option<Arc<PageLog>>,
    /// Inserts completed through this tree (and its clones) since it was opened, counted
    /// after the entry is in its leaf (see [`BTree::inserts_completed`]).
    inserts_completed: Arc<AtomicU64>,
    /// Where recent inserts went, to recognise an ascending run at a split.
    last_inserts: Arc<LastInserts>,
}

/// The slot of the last insert into each of a few leaves: a lossy map from a leaf's block
/// (modulo [`LastInserts::WAYS`]) to `block << 32 | slot + 1` (0: none). Unlogged and racy
/// by design: a stale or overwritten entry only makes a split choose the midpoint.
#[derive(Debug)]
struct LastInserts([AtomicU64; LastInserts::WAYS]);

impl LastInserts {
    const WAYS: usize = 64;

    fn new() -> Self {
        LastInserts(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    fn record(&self, block: u32, slot: usize) {
        let packed = (u64::from(block) << 32) | (slot as u64 + 1);
        self.0[block as usize % Self::WAYS].store(packed, Ordering::Relaxed);
    }

    /// Whether the last insert recorded for `block` went to slot `slot`.
    fn was_at(&self, block: u32, slot: usize) -> bool {
        let packed = (u64::from(block) << 32) | (slot as u64 + 1);
        self.0[block as usize % Self::WAYS].load(Ordering::Relaxed) == packed
    }
}

/// What [`BTree::check`] found so far.
#[derive(Default)]
struct Walk {
    entries: u64,
    reached: std::collections::HashSet<u32>,
}

/// Where a leaf sits between its fences: the separators above it on the path from the root
/// (`None`: unbounded on that side).
struct Fences {
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
}

impl BTree {
    /// Opens the unlogged tree in `file` (attached to `pool`), formatting an empty tree if
    /// the file has no pages. It survives a crash only as of its last
    /// [`BufferPool::flush`].
    pub fn open(pool: Arc<BufferPool>, file: FileNo) -> Result<Self> {
        Self::open_with(pool, file, None)
    }

    /// Opens the tree in `file` with every change logged in `log` (the pool's write-ahead
    /// log, after [`super::Recovering::redo`]), formatting an empty tree if the file has no
    /// pages.
    pub fn open_logged(pool: Arc<BufferPool>, file: FileNo, log: Arc<PageLog>) -> Result<Self> {
        Self::open_with(pool, file, Some(log))
    }

    fn open_with(pool: Arc<BufferPool>, file: FileNo, log: Option<Arc<PageLog>>) -> Result<Self> {
        let tree = BTree {
            pool,
            file,
            spares: Arc::new(Mutex::new(Vec::new())),
            log,
            inserts_completed: Arc::new(AtomicU64::new(0)),
            last_inserts: Arc::new(LastInserts::new()),
        };
        if tree.pool.file_pages(file)? == 0 {
            let mut meta = tree.pool.allocate(file)?;
            let mut root = tree.pool.allocate(file)?;
            debug_assert_eq!((meta.id().block, root.id().block), (META_BLOCK, 1));
            root.set_kind(KIND_BTREE_NODE);
            Node::new(root.body_mut()).init(0, 0);
            meta.set_kind(KIND_BTREE_META);
            write_meta(&mut meta, root.id().block, 0);
            tree.log(&mut [
                (&mut meta, &[PageChange::Image]),
                (&mut root, &[PageChange::Image]),
            ])?;
        } else {
            let meta = tree.pool.read(tree.page(META_BLOCK))?;
            tree.read_meta(&meta)?;
        }
        Ok(tree)
    }
    /// Pages of these trees' files, together.
    pub fn pages_of<'a>(trees: impl IntoIterator<Item = &'a BTree>) -> Result<u64> {
        let mut pages = 0;
        for tree in trees {
            pages += u64::from(tree.pool.file_pages(tree.file)?);
        }
        Ok(pages)
    }

    /// The file the tree lives in.
    pub fn file(&self) -> FileNo {
        self.file
    }

    /// The buffer pool the tree lives in.
    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    /// The number of levels (1: the root is a leaf).
    pub fn height(&self) -> Result<u16> {
        let meta = self.pool.read(self.page(META_BLOCK))?;
        Ok(self.read_meta(&meta)?.1 + 1)
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (leaf, _) = self.descend_shared(&|node| node.child_index_for(key), false)?;
        let node = Node::new(leaf.body());
        Ok(node.search(key).ok().map(|slot| node.value(slot).to_vec()))
    }

    /// Stores `value` under `key`; returns the value it replaced. Fails with
    /// [`Error::EntryTooLarge`] if the key exceeds [`MAX_BTREE_KEY_BYTES`] or key and value
    /// together exceed [`MAX_BTREE_ENTRY_BYTES`]. An insert that fails changes nothing,
    /// but one whose log record could not be appended ([`Error::DurabilityLost`]: the
    /// database must be reopened, and its change never reaches the files).
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        let replaced = self.put(key, value)?;
        // After the entry is in its leaf, before the caller goes on (to commit): see
        // `inserts_completed`.
        self.inserts_completed.fetch_add(1, Ordering::Release);
        Ok(replaced)
    }

    /// How many inserts through this tree (and its clones) completed since it was opened
    /// (not persisted; another `BTree` opened over the same file counts apart). Each is
    /// counted after its entry is in its leaf. A reader that reads the count, searches,
    /// and reads the same count again knows that no insert completed in between: every
    /// insert that completed before its second read was in the tree when it searched. An
    /// insert still running may have added its entry unseen; the disk engine's key checks
    /// care only about inserts whose transaction committed, which completed first (DT4).
    /// Entries added by [`redo_put`] are not counted: redo runs before the tree is used.
    pub fn inserts_completed(&self) -> u64 {
        self.inserts_completed.load(Ordering::Acquire)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.len() > MAX_KEY_BYTES {
            return Err(Error::EntryTooLarge {
                what: "a B+-tree key",
                bytes: key.len(),
                limit: MAX_KEY_BYTES,
            });
        }
        if key.len() + value.len() > MAX_ENTRY_BYTES {
            return Err(Error::EntryTooLarge {
                what: "a B+-tree entry (key and value)",
                bytes: key.len() + value.len(),
                limit: MAX_ENTRY_BYTES,
            });
        }
        {
            let mut leaf = self.leaf_exclusive(key)?;
            if let Some(put) = put_if_it_fits(&mut leaf, key, value) {
                self.log(&mut [(&mut leaf, &[PageChange::BTreePut { key, value }])])?;
                if put.replaced.is_none() {
                    self.last_inserts.record(leaf.id().block, put.slot);
                }
                return Ok(put.replaced);
            }
        }
        self.insert_splitting(key, value)
    }

    /// Removes `key`'s entry; returns its value.
    pub fn remove(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut leaf = self.leaf_exclusive(key)?;
        let slot = match Node::new(leaf.body()).search(key) {
            Ok(slot) => slot,
            Err(_) => return Ok(None),
        };
        let old = Node::new(leaf.body()).value(slot).to_vec();
        Node::new(leaf.body_mut()).remove_at(slot);
        self.log(&mut [(&mut leaf, &[PageChange::BTreeRemove { key }])])?;
        Ok(Some(old))
    }

    /// The entries with keys between `low` and `high`, in ascending key order.
    pub fn range(&self, low: Bound<&[u8]>, high: Bound<&[u8]>) -> Range<'_> {
        Range::new(self, low, high, true)
    }

    /// The entries with keys between `low` and `high`, in descending key order.
    pub fn range_rev(&self, low: Bound<&[u8]>, high: Bound<&[u8]>) -> Range<'_> {
        Range::new(self, low, high, false)
    }

    /// Checks the whole tree: every node's layout, key order within nodes, the fences of
    /// every subtree (T1), the levels (T2), that no node is reached twice, and that every
    /// page no parent points at holds nothing (a page never written, or an empty node a
    /// failed split left: entries there would be lost). Returns the number of entries. For
    /// tests and `verso check`; latches one node at a time, so run it while nothing writes.
    pub fn check(&self) -> Result<u64> {
        let (root, level) = {
            let meta = self.pool.read(self.page(META_BLOCK))?;
            self.read_meta(&meta)?
        };
        let mut walk = Walk::default();
        self.check_subtree(root, level, None, None, &mut walk)?;
        for block in 1..self.pool.file_pages(self.file)? {
            if walk.reached.contains(&block) {
                continue;
            }
            let page = self.pool.read(self.page(block))?;
            let unused = page.is_zeroed()
                || (page.kind() == KIND_BTREE_NODE && Node::new(page.body()).len() == 0);
            if !unused {
                return Err(self.corrupt(
                    block,
                    "a page no parent points at holds entries (lost by a split?)".into(),
                ));
            }
        }
        Ok(walk.entries)
    }

    fn check_subtree(
        &self,
        block: u32,
        level: u16,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        walk: &mut Walk,
    ) -> Result<()> {
        if block == META_BLOCK || !walk.reached.insert(block) {
            return Err(self.corrupt(block, "a node reached twice".into()));
        }
        let page = self.pool.read(self.page(block))?;
        let node = self.node(&page)?;
        node.check().map_err(|reason| self.corrupt(block, reason))?;
        self.expect_level(&node, block, level)?;
        for slot in 0..node.len() {
            let key = node.key(slot);
            if low.is_some_and(|low| key < low) || high.is_some_and(|high| key >= high) {
                return Err(self.corrupt(block, format!("slot {slot} outside its fences (T1)")));
            }
        }
        if node.is_leaf() {
            walk.entries += node.len() as u64;
            return Ok(());
        }
        let children: Vec<(u32, Fences)> = (0..=node.len())
            .map(|i| {
                let fences = Fences {
                    low: if i == 0 {
                        low.map(<[u8]>::to_vec)
                    } else {
                        Some(node.key(i - 1).to_vec())
                    },
                    high: if i == node.len() {
                        high.map(<[u8]>::to_vec)
                    } else {
                        Some(node.key(i).to_vec())
                    },
                };
                (node.child_block(i), fences)
            })
            .collect();
        drop(page);
        for (child, fences) in children {
            self.check_subtree(
                child,
                level - 1,
                fences.low.as_deref(),
                fences.high.as_deref(),
                walk,
            )?;
        }
        Ok(())
    }

    fn page(&self, block: u32) -> PageId {
        PageId::new(self.file, block)
    }

    fn corrupt(&self, block: u32, reason: String) -> Error {
        Error::Corruption {
            file: format!("B+-tree file {}", self.file.0),
            offset: self.page(block).offset(),
            reason,
        }
    }

    /// The root's block and level.
    fn read_meta(&self, meta: &Page) -> Result<(u32, u16)> {
        let body = meta.body();
        if meta.kind() != KIND_BTREE_META || &body[..4] != MAGIC {
            return Err(self.corrupt(META_BLOCK, "not a B+-tree's meta page".to_string()));
        }
        let root = u32::from_le_bytes(body[4..8].try_into().expect("four bytes"));
        let level = u16::from_le_bytes(body[8..10].try_into().expect("two bytes"));
        if root == META_BLOCK || root >= self.pool.file_pages(self.file)? {
            return Err(self.corrupt(META_BLOCK, format!("root block {root} out of range")));
        }
        Ok((root, level))
    }

    /// A node of this tree (its kind checked; its layout trusted: the page passed its
    /// checksum, so it is what this tree wrote).
    fn node<'p>(&self, page: &'p PageRef<'_>) -> Result<Node<&'p [u8]>> {
        if page.kind() != KIND_BTREE_NODE {
            return Err(self.corrupt(
                page.id().block,
                format!(
                    "a page of kind {:#06x} where a node is expected",
                    page.kind()
                ),
            ));
        }
        Ok(Node::new(page.body()))
    }

    /// As [`BTree::node`], for a page latched exclusive.
    fn node_of_mut<'p>(&self, page: &'p PageMut<'_>) -> Result<Node<&'p [u8]>> {
        if page.kind() != KIND_BTREE_NODE {
            return Err(self.corrupt(
                page.id().block,
                format!(
                    "a page of kind {:#06x} where a node is expected",
                    page.kind()
                ),
            ));
        }
        Ok(Node::new(page.body()))
    }

    /// Latch coupling, shared, from the meta page to the leaf `choose` leads to.
    fn descend_shared(
        &self,
        choose: &dyn Fn(&Node<&[u8]>) -> usize,
        with_fences: bool,
    ) -> Result<(PageRef<'_>, Fences)> {
        let meta = self.pool.read(self.page(META_BLOCK))?;
        let (root, mut level) = self.read_meta(&meta)?;
        let mut page = self.pool.read(self.page(root))?;
        drop(meta);
        let mut fences = Fences {
            low: None,
            high: None,
        };
        loop {
            let child = {
                let node = self.node(&page)?;
                self.expect_level(&node, page.id().block, level)?;
                if node.is_leaf() {
                    break;
                }
                let index = choose(&node);
                if with_fences {
                    if index > 0 {
                        fences.low = Some(node.key(index - 1).to_vec());
                    }
                    if index < node.len() {
                        fences.high = Some(node.key(index).to_vec());
                    }
                }
                node.child_block(index)
            };
            // The child is latched before the parent is let go.
            let next = self.pool.read(self.page(child))?;
            page = next;
            level -= 1;
        }
        Ok((page, fences))
    }

    /// The leaf for `key`, latched exclusive; the internal nodes on the way shared.
    fn leaf_exclusive(&self, key: &[u8]) -> Result<PageMut<'_>> {
        let meta = self.pool.read(self.page(META_BLOCK))?;
        let (root, root_level) = self.read_meta(&meta)?;
        if root_level == 0 {
            let leaf = self.pool.write(self.page(root))?;
            self.expect_level(&self.node_of_mut(&leaf)?, leaf.id().block, 0)?;
            return Ok(leaf);
        }
        let mut page = self.pool.read(self.page(root))?;
        drop(meta);
        let mut level = root_level;
        loop {
            let child = {
                let node = self.node(&page)?;
                self.expect_level(&node, page.id().block, level)?;
                node.child_block(node.child_index_for(key))
            };
            level -= 1;
            if level == 0 {
                let leaf = self.pool.write(self.page(child))?;
                self.expect_level(&self.node_of_mut(&leaf)?, child, 0)?;
                return Ok(leaf);
            }
            let next = self.pool.read(self.page(child))?;
            page = next;
        }
    }

    /// Logs changes made to pages held exclusive, if the tree is logged.
    fn log(&self, changes: &mut [(&mut PageMut<'_>, &[PageChange<'_>])]) -> Result<()> {
        match &self.log {
            Some(log) => log.log(changes).map(drop),
            None => {
                for (page, _) in changes.iter_mut() {
                    page.note_change(DirtyCause::Index, None);
                }
                Ok(())
            }
        }
    }

    /// Fails with [`Error::Corruption`] unless the node at `block` is at `level` (T2): a
    /// child pointer that leads to the wrong level (or back up) would otherwise send a
    /// descent astray.
    fn expect_level<B: AsRef<[u8]>>(&self, node: &Node<B>, block: u32, level: u16) -> Result<()> {
        if node.level() == level {
            Ok(())
        } else {
            Err(self.corrupt(
                block,
                format!("level {} where {level} is expected (T2)", node.level()),
            ))
        }
    }

    /// The pessimistic insert: exclusive latch coupling from the meta page, keeping the
    /// path from the highest unsafe node down, then splits bottom up.
    ///
    /// Every split is planned and every page it needs is latched before any page changes,
    /// so an error (a new page's frame may need a write-back that fails) leaves the tree as
    /// it was; once the pages are held, the splits cannot fail (T3).
    fn insert_splitting(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut meta = Some(self.pool.write(self.page(META_BLOCK))?);
        let (root, root_level) = self.read_meta(meta.as_ref().expect("held"))?;
        let mut path: Vec<PageMut<'_>> = Vec::new();
        let mut block = root;
        let mut level = root_level;
        loop {
            let page = self.pool.write(self.page(block))?;
            let (safe, next) = {
                let node = self.node_of_mut(&page)?;
                self.expect_level(&node, block, level)?;
                if node.is_leaf() {
                    let freed = node
                        .search(key)
                        .map_or(0, |slot| room_for(key, node.value(slot).len()));
                    (node.free() + freed >= room_for(key, value.len()), None)
                } else {
                    (
                        node.free() >= MAX_SEPARATOR_ROOM,
                        Some(node.child_block(node.child_index_for(key))),
                    )
                }
            };
            if safe {
                // Nothing above this node can change: let it all go.
                meta = None;
                path.clear();
            }
            path.push(page);
            match next {
                Some(child) => {
                    block = child;
                    level -= 1;
                }
                None => break,
            }
        }
        let mut leaf = path.pop().expect("the leaf is on the path");
        if let Some(put) = put_if_it_fits(&mut leaf, key, value) {
            self.log(&mut [(&mut leaf, &[PageChange::BTreePut { key, value }])])?;
            if put.replaced.is_none() {
                self.last_inserts.record(leaf.id().block, put.slot);
            }
            return Ok(put.replaced);
        }
        // The leaf's entries with the new one.
        let mut entries = Node::new(leaf.body()).entries();
        let (replaced, inserted_at) = match entries.binary_search_by(|(k, _)| k.as_slice().cmp(key))
        {
            Ok(at) => (
                Some(std::mem::replace(&mut entries[at].1, value.to_vec())),
                None,
            ),
            Err(at) => {
                entries.insert(at, (key.to_vec(), value.to_vec()));
                (None, Some(at))
            }
        };
        // An ascending run: the last insert into this leaf went just before the new key.
        let run_at =
            inserted_at.filter(|&at| at > 0 && self.last_inserts.was_at(leaf.id().block, at - 1));
        // Plan the splits bottom up: `splits[i]` splits the node `i` levels above the leaf
        // (`path[path.len() - i]`), and the last separator goes into the parent at
        // `parent_slot`, or into a new root when the root splits.
        let leaf_split = Split::plan_leaf(entries, run_at);
        let new_key_at = inserted_at.map(|at| match at.checked_sub(leaf_split.lower.len()) {
            None => (Some(leaf.id().block), at),
            Some(in_right) => (None, in_right),
        });
        let mut splits = vec![leaf_split];
        let parent_slot = loop {
            let separator = &splits.last().expect("one split at least").separator;
            let Some(at) = path.len().checked_sub(splits.len()) else {
                break None;
            };
            let parent = Node::new(path[at].body());
            let slot = match parent.search(separator) {
                Err(slot) => slot,
                Ok(_) => {
                    return Err(self.corrupt(path[at].id().block, "a separator twice (T1)".into()))
                }
            };
            if parent.free() >= room_for(separator, node::CHILD_BYTES) {
                break Some(slot);
            }
            let mut entries = parent.entries();
            entries.insert(slot, (separator.clone(), NEW_CHILD.to_le_bytes().to_vec()));
            let (level, leftmost) = (parent.level(), parent.leftmost());
            splits.push(Split::plan(level, leftmost, entries));
        };
        if parent_slot.is_none() && meta.is_none() {
            // Cannot happen: a node deemed safe had room for any separator (its test is
            // unit-tested); refused rather than left half split.
            return Err(self.corrupt(
                META_BLOCK,
                "the root must split but was deemed safe (a node's room misjudged)".into(),
            ));
        }
        let new_pages = splits.len() + usize::from(parent_slot.is_none());
        let mut fresh: Vec<PageMut<'_>> = Vec::with_capacity(new_pages);
        for _ in 0..new_pages {
            match self.empty_page() {
                Ok(page) => fresh.push(page),
                Err(error) => {
                    self.keep_spares(fresh);
                    return Err(error);
                }
            }
        }
        // From here on nothing can fail.
        let blocks: Vec<u32> = fresh.iter().map(|page| page.id().block).collect();
        let mut carried = None;
        let mut separator = Vec::new();
        for (i, mut split) in splits.into_iter().enumerate() {
            if let Some(child) = carried {
                split.resolve_new_child(child);
            }
            let node = if i == 0 {
                &mut leaf
            } else {
                let at = path.len() - i;
                &mut path[at]
            };
            fresh[i].set_kind(KIND_BTREE_NODE);
            separator = split.apply(node, &mut fresh[i]);
            carried = Some(blocks[i]);
        }
        if let Some((block, slot)) = new_key_at {
            // The right node of the leaf's split is the first new page.
            self.last_inserts.record(block.unwrap_or(blocks[0]), slot);
        }
        let right = carried.expect("one split at least").to_le_bytes();
        let splits = blocks.len() - usize::from(parent_slot.is_none());
        match parent_slot {
            Some(slot) => {
                let at = path.len() - splits;
                Node::new(path[at].body_mut()).insert_at(slot, &separator, &right);
            }
            None => {
                // The root split: a new root above it, and the meta page points there.
                let meta = meta.as_mut().expect("checked above");
                let new_root = fresh.last_mut().expect("the new root's page");
                new_root.set_kind(KIND_BTREE_NODE);
                let mut node = Node::new(new_root.body_mut());
                node.init(root_level + 1, root);
                node.insert_at(0, &separator, &right);
                write_meta(meta, new_root.id().block, root_level + 1);
            }
        }
        // One record for every page the split changed: the split nodes (the leaf and the
        // last `splits - 1` nodes of the path), the parent that took the separator (the
        // path's node above those) or the meta page, and the new pages.
        if self.log.is_some() {
            let changed_on_path = path.len().min(splits);
            let at = path.len() - changed_on_path;
            const IMAGE: &[PageChange<'_>] = &[PageChange::Image];
            let mut changed: Vec<(&mut PageMut<'_>, &[PageChange<'_>])> = vec![(&mut leaf, IMAGE)];
            changed.extend(path[at..].iter_mut().map(|page| (page, IMAGE)));
            changed.extend(fresh.iter_mut().map(|page| (page, IMAGE)));
            if parent_slot.is_none() {
                changed.push((meta.as_mut().expect("checked above"), IMAGE));
            }
            self.log(&mut changed)?;
        }
        Ok(replaced)
    }

    /// A page for a new node, latched exclusive and left as it is (the split formats it
    /// once every page it needs is held): a spare left by a failed split, or a new page at
    /// the end of the file.
    fn empty_page(&self) -> Result<PageMut<'_>> {
        let spare = self.spares.lock().pop();
        let page = match spare {
            Some(block) => match self.pool.write(self.page(block)) {
                Ok(page) => page,
                Err(error) => {
                    self.spares.lock().push(block);
                    return Err(error);
                }
            },
            None => self.pool.allocate(self.file)?,
        };
        Ok(page)
    }

    /// Keeps pages a failed split had taken, untouched and pointed at by no parent, for
    /// the next split (a restart forgets them: [`BTree::check`] accepts unreachable pages
    /// that hold nothing).
    fn keep_spares(&self, pages: Vec<PageMut<'_>>) {
        let mut spares = self.spares.lock();
        spares.extend(pages.iter().map(|page| page.id().block));
    }
}

/// A child block no page has: stands for the right node of the split one level down until
/// its page is allocated ([`Split::resolve_new_child`]). The pool never hands out block
/// `u32::MAX` (a file's page count is a `u32`).
const NEW_CHILD: u32 = u32::MAX;

/// One node's split, computed before any page changes: the lower entries stay in the node,
/// the upper ones go to a new right sibling, and `separator` goes up to the parent.
struct Split {
    level: u16,
    leftmost: u32,
    lower: Vec<(Vec<u8>, Vec<u8>)>,
    /// The right node's leftmost child (internal nodes: the child of the separator that
    /// moved up).
    right_leftmost: u32,
    upper: Vec<(Vec<u8>, Vec<u8>)>,
    separator: Vec<u8>,
}

impl Split {
    /// Splits a leaf's `entries` (with the new one, too many for one node): when the new
    /// key, at slot `run_at`, continues an ascending run, at the last slot up to it that
    /// leaves the left node at most [`RUN_SPLIT_FILL_PERCENT`] full, if at least half the
    /// bytes stay on the left (so the right side fits in a node, as the midpoint's does);
    /// otherwise as [`Split::plan`].
    fn plan_leaf(entries: Vec<(Vec<u8>, Vec<u8>)>, run_at: Option<usize>) -> Split {
        let room = |(k, v): &(Vec<u8>, Vec<u8>)| room_for(k, v.len());
        let total: usize = entries.iter().map(room).sum();
        let at_run = run_at.and_then(|run_at| {
            debug_assert!(run_at < entries.len());
            let mut at = run_at;
            let mut left: usize = entries[..at].iter().map(room).sum();
            while at > 1 && 100 * left > RUN_SPLIT_FILL_PERCENT * NODE_ROOM {
                at -= 1;
                left -= room(&entries[at]);
            }
            (at > 0 && 2 * left >= total).then_some(at)
        });
        match at_run {
            Some(at) => Split::at(0, 0, entries, at),
            None => Split::plan(0, 0, entries),
        }
    }

    /// Splits `entries` (a node's, with the new one, too many for one node) near the middle
    /// of their bytes, keeping at least one entry on each side. A leaf's separator is the
    /// right node's first key; an internal node's first upper separator moves up and its
    /// child becomes the right node's leftmost.
    fn plan(level: u16, leftmost: u32, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Split {
        debug_assert!(
            entries.len() >= 3,
            "a full node holds at least three entries"
        );
        let total: usize = entries.iter().map(|(k, v)| room_for(k, v.len())).sum();
        let mut at = 0;
        let mut left_bytes = 0;
        while at < entries.len() - 2
            && left_bytes + room_for(&entries[at].0, entries[at].1.len()) <= total / 2
        {
            left_bytes += room_for(&entries[at].0, entries[at].1.len());
            at += 1;
        }
        Split::at(level, leftmost, entries, at.max(1))
    }

    /// Splits `entries` before `entries[at]`: `entries[at..]` go right.
    fn at(level: u16, leftmost: u32, mut entries: Vec<(Vec<u8>, Vec<u8>)>, at: usize) -> Split {
        debug_assert!(at > 0 && at < entries.len(), "a side of a split is empty");
        let mut upper = entries.split_off(at);
        let (separator, right_leftmost) = if level == 0 {
            (upper[0].0.clone(), 0)
        } else {
            let (moved_up, child) = upper.remove(0);
            (moved_up, child_of(&child))
        };
        Split {
            level,
            leftmost,
            lower: entries,
            right_leftmost,
            upper,
            separator,
        }
    }

    /// Puts the block of the right node the split below created where the plan has
    /// [`NEW_CHILD`]: exactly one place, wherever the carried separator landed.
    fn resolve_new_child(&mut self, block: u32) {
        let mut resolved = 0;
        if self.right_leftmost == NEW_CHILD {
            self.right_leftmost = block;
            resolved += 1;
        }
        for (_, child) in self.lower.iter_mut().chain(self.upper.iter_mut()) {
            if child_of(child) == NEW_CHILD {
                child.copy_from_slice(&block.to_le_bytes());
                resolved += 1;
            }
        }
        debug_assert_eq!(resolved, 1, "one separator came up from below");
    }

    /// Rewrites the node with the lower entries and `right` with the upper ones; returns
    /// the separator for the parent.
    fn apply(self, node: &mut PageMut<'_>, right: &mut PageMut<'_>) -> Vec<u8> {
        Node::new(right.body_mut()).rebuild(self.level, self.right_leftmost, &self.upper);
        Node::new(node.body_mut()).rebuild(self.level, self.leftmost, &self.lower);
        self.separator
    }
}

/// An internal node's value as a child block (N3).
fn child_of(value: &[u8]) -> u32 {
    u32::from_le_bytes(value.try_into().expect("a child block (N3)"))
}

/// Redoes a logged put into a leaf (`disk::page_log`): the leaf had room when the change
/// was made, and redo replays its changes in the same order, so it has room again. Only
/// before the database opens: it bypasses [`BTree::inserts_completed`], which the disk
/// engine's key checks rely on while it runs (DT4).
pub(crate) fn redo_put(page: &mut PageMut<'_>, key: &[u8], value: &[u8]) -> Result<()> {
    redo_leaf(page)?;
    put_if_it_fits(page, key, value)
        .map(drop)
        .ok_or_else(|| redo_defect(page, "a logged put does not fit its leaf".into()))
}

/// Redoes a logged removal from a leaf.
pub(crate) fn redo_remove(page: &mut PageMut<'_>, key: &[u8]) -> Result<()> {
    redo_leaf(page)?;
    let slot = Node::new(page.body())
        .search(key)
        .map_err(|_| redo_defect(page, "a logged removal of a key the leaf lacks".into()))?;
    Node::new(page.body_mut()).remove_at(slot);
    Ok(())
}

/// Checks a page a logged leaf change is redone on: a whole leaf.
fn redo_leaf(page: &PageMut<'_>) -> Result<()> {
    if page.kind() != KIND_BTREE_NODE {
        return Err(redo_defect(
            page,
            format!("a leaf change on a page of kind {:#06x}", page.kind()),
        ));
    }
    let node = Node::new(page.body());
    node.check().map_err(|reason| redo_defect(page, reason))?;
    if !node.is_leaf() {
        return Err(redo_defect(
            page,
            "a leaf change on an internal node".into(),
        ));
    }
    Ok(())
}

fn redo_defect(page: &PageMut<'_>, reason: String) -> Error {
    Error::Corruption {
        file: format!("B+-tree file {}", page.id().file.0),
        offset: page.id().offset(),
        reason,
    }
}

/// A put into a leaf: the entry's slot, and the value it replaced (`None`: an insert).
struct Put {
    slot: usize,
    replaced: Option<Vec<u8>>,
}

/// Puts the entry in the latched leaf if it fits; `None` if the leaf must split.
fn put_if_it_fits(leaf: &mut PageMut<'_>, key: &[u8], value: &[u8]) -> Option<Put> {
    let (slot, old) = {
        let node = Node::new(leaf.body());
        debug_assert!(node.is_leaf());
        match node.search(key) {
            Ok(slot) => {
                let old = node.value(slot).to_vec();
                if node.free() + room_for(key, old.len()) < room_for(key, value.len()) {
                    return None;
                }
                (slot, Some(old))
            }
            Err(slot) => {
                if node.free() < room_for(key, value.len()) {
                    return None;
                }
                (slot, None)
            }
        }
    };
    let mut node = Node::new(leaf.body_mut());
    if old.is_some() {
        node.remove_at(slot);
    }
    node.insert_at(slot, key, value);
    Some(Put {
        slot,
        replaced: old,
    })
}

fn write_meta(meta: &mut PageMut<'_>, root: u32, level: u16) {
    let body = meta.body_mut();
    body[..4].copy_from_slice(MAGIC);
    body[4..8].copy_from_slice(&root.to_le_bytes());
    body[8..10].copy_from_slice(&level.to_le_bytes());
}

/// The entries of a key range, in ascending or descending order. Reads one leaf at a time,
/// copying its entries in range under the leaf's shared latch, and holds no latch between
/// leaves: each next leaf is found by a new descent to the fence where the last one ended.
/// So a scan never waits on a writer while holding a latch a writer needs, and it sees each
/// key at most once. An entry inserted or removed while the scan runs may be seen or not
/// (the disk engine decides visibility on the versions, not on the index).
pub struct Range<'a> {
    tree: &'a BTree,
    ascending: bool,
    low: Bound<Vec<u8>>,
    high: Bound<Vec<u8>>,
    batch: VecDeque<(Vec<u8>, Vec<u8>)>,
    finished: bool,
}

impl<'a> Range<'a> {
    fn new(tree: &'a BTree, low: Bound<&[u8]>, high: Bound<&[u8]>, ascending: bool) -> Self {
        Range {
            tree,
            ascending,
            low: low.map(<[u8]>::to_vec),
            high: high.map(<[u8]>::to_vec),
            batch: VecDeque::new(),
            finished: false,
        }
    }

    fn above_low(&self, key: &[u8]) -> bool {
        match &self.low {
            Bound::Included(low) => key >= low.as_slice(),
            Bound::Excluded(low) => key > low.as_slice(),
            Bound::Unbounded => true,
        }
    }

    fn below_high(&self, key: &[u8]) -> bool {
        match &self.high {
            Bound::Included(high) => key <= high.as_slice(),
            Bound::Excluded(high) => key < high.as_slice(),
            Bound::Unbounded => true,
        }
    }

    /// The first slot of `node` at or above the scan's low bound, by binary search: a
    /// point lookup must not compare every key of the leaf before its own.
    fn first_slot_above_low(&self, node: &Node<&[u8]>) -> usize {
        match &self.low {
            Bound::Included(low) => node.search(low).unwrap_or_else(|slot| slot),
            Bound::Excluded(low) => node.search(low).map_or_else(|slot| slot, |slot| slot + 1),
            Bound::Unbounded => 0,
        }
    }

    /// One past the last slot of `node` at or below the scan's high bound (the mirror of
    /// [`Range::first_slot_above_low`] for descending scans).
    fn end_of_slots_below_high(&self, node: &Node<&[u8]>) -> usize {
        match &self.high {
            Bound::Included(high) => node.search(high).map_or_else(|slot| slot, |slot| slot + 1),
            Bound::Excluded(high) => node.search(high).unwrap_or_else(|slot| slot),
            Bound::Unbounded => node.len(),
        }
    }

    /// Copies a leaf's entries in range into the batch, walking `slots` in the scan's
    /// direction from the first slot the scan has reached; the first entry past its far
    /// end finishes the scan.
    fn copy_in_range(&mut self, node: &Node<&[u8]>, slots: impl Iterator<Item = usize>) {
        for slot in slots {
            let key = node.key(slot);
            let (reached, past_the_end) = if self.ascending {
                (self.above_low(key), !self.below_high(key))
            } else {
                (self.below_high(key), !self.above_low(key))
            };
            debug_assert!(reached, "the walk starts at the first slot in range");
            if past_the_end {
                self.finished = true;
                break;
            }
            self.batch
                .push_back((key.to_vec(), node.value(slot).to_vec()));
        }
    }

    /// Reads the next leaf in the scan's direction that has entries in range.
    fn refill(&mut self) -> Result<()> {
        while self.batch.is_empty() && !self.finished {
            if self.ascending {
                let low = self.low.clone();
                let choose = |node: &Node<&[u8]>| match &low {
                    Bound::Included(k) | Bound::Excluded(k) => node.child_index_for(k),
                    Bound::Unbounded => 0,
                };
                let (leaf, fences) = self.tree.descend_shared(&choose, true)?;
                let node = Node::new(leaf.body());
                let first = self.first_slot_above_low(&node);
                self.copy_in_range(&node, first..node.len());
                match fences.high {
                    Some(fence) if !self.finished => {
                        // Every key from the fence on is in later leaves.
                        self.finished = !self.below_high(&fence);
                        self.low = Bound::Included(fence);
                    }
                    _ => self.finished = true,
                }
            } else {
                let high = self.high.clone();
                let choose = |node: &Node<&[u8]>| match &high {
                    Bound::Included(k) => node.child_index_for(k),
                    Bound::Excluded(k) => node.child_index_below(k),
                    Bound::Unbounded => node.len(),
                };
                let (leaf, fences) = self.tree.descend_shared(&choose, true)?;
                let node = Node::new(leaf.body());
                let end = self.end_of_slots_below_high(&node);
                self.copy_in_range(&node, (0..end).rev());
                match fences.low {
                    Some(fence) if !self.finished => {
                        // Every key below the fence is in earlier leaves.
                        self.finished = match &self.low {
                            Bound::Included(low) | Bound::Excluded(low) => *low >= fence,
                            Bound::Unbounded => false,
                        };
                        self.high = Bound::Excluded(fence);
                    }
                    _ => self.finished = true,
                }
            }
        }
        Ok(())
    }
}

impl Iterator for Range<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.batch.is_empty() {
            if let Err(error) = self.refill() {
                self.finished = true;
                self.batch.clear();
                return Some(Err(error));
            }
        }
        self.batch.pop_front().map(Ok)
    }
}

#[cfg(test)]
mod redo_tests {
    use super::*;
    use crate::disk::buffer_pool::Unlogged;
    use crate::disk::ReplacementPolicy;
    use crate::fs::{FileSystem, OpenMode, SimulatedFileSystem};
    use std::panic::AssertUnwindSafe;
    use std::path::Path;

    /// Builds a leaf with `fill`, sets its dead-cell count (body bytes 6..8) to `dead`,
    /// checks that `Node::check` sees the lie, and hands the page to `redo`, which must
    /// answer `Error::Corruption`, not panic.
    fn redo_on_a_leaf_with_a_wrong_dead_count(
        fill: impl FnOnce(&mut Node<&mut [u8]>),
        dead: u16,
        redo: impl FnOnce(&mut PageMut<'_>) -> Result<()>,
    ) {
        let fs = SimulatedFileSystem::new(1);
        fs.create_dir_all(Path::new("/d")).unwrap();
        let file = fs.open(Path::new("/d/f"), OpenMode::CreateNew).unwrap();
        let pool = BufferPool::new(4, ReplacementPolicy::Clock, Arc::new(Unlogged));
        pool.attach(FileNo(0), Path::new("/d/f"), file).unwrap();
        let mut page = pool.allocate(FileNo(0)).unwrap();
        page.set_kind(KIND_BTREE_NODE);
        {
            let mut node = Node::new(page.body_mut());
            node.init(0, 0);
            fill(&mut node);
        }
        page.body_mut()[6..8].copy_from_slice(&dead.to_le_bytes());
        assert!(Node::new(page.body()).check().is_err(), "the check sees it");
        match std::panic::catch_unwind(AssertUnwindSafe(|| redo(&mut page))) {
            Ok(Err(Error::Corruption { .. })) => {}
            Ok(other) => panic!("redo returned {other:?}"),
            Err(_) => panic!("redo panicked on a page whose node check fails"),
        }
    }

    /// Regression (a review of 2026-11-29): a leaf whose dead-cell count is wrong passed
    /// `Node::check`, which never looked at it, `free()` trusted it, and redoing a put into
    /// the leaf panicked instead of reporting corruption. The check now accounts for every
    /// byte of the cell area (N4).
    #[test]
    fn regression_redo_put_on_a_leaf_with_a_wrong_dead_count_is_corruption() {
        redo_on_a_leaf_with_a_wrong_dead_count(
            |node| {
                let mut i = 0u32;
                while node.free() >= room_for(&i.to_be_bytes(), 1000) {
                    let key = i.to_be_bytes();
                    let slot = node.search(&key).unwrap_err();
                    node.insert_at(slot, &key, &[1; 1000]);
                    i += 1;
                }
            },
            60_000,
            |page| redo_put(page, &[0xff; 4], &[2; 1000]),
        );
    }

    /// Regression (the same review): the same for a removal, whose dead count overflowed
    /// a u16 (debug: a panic in `put16`; release: the count wrapped silently).
    #[test]
    fn regression_redo_remove_on_a_leaf_with_a_wrong_dead_count_is_corruption() {
        redo_on_a_leaf_with_a_wrong_dead_count(
            |node| {
                node.insert_at(0, b"a", &[1; 1000]);
                node.insert_at(1, b"b", &[1; 1000]);
            },
            65_000,
            |page| redo_remove(page, b"a"),
        );
    }
}
