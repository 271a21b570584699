//! A paged B+-tree through the buffer pool: one file of 8 KiB pages, keys and values as
//! byte strings compared bytewise (Verso's keys are order-preserving encodings: `key.rs`),
//! for the disk engine's primary and secondary indexes (design note:
//! `docs/design/btree.md`).
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
//! Removal takes an entry out of its leaf and leaves the leaf in place even when it becomes
//! empty (as PostgreSQL's B-tree does until VACUUM deletes an empty page); reclaiming empty
//! pages belongs with the disk engine's vacuum.
//!
//! Crash safety comes from the page log (each change logged with the page's LSN before the
//! page may be written back); until that log exists, a tree survives exactly what
//! [`BufferPool::flush`] made durable.

mod node;

#[cfg(all(test, loom))]
mod loom_tests;

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use node::{room_for, Node, MAX_ENTRY_BYTES, MAX_SEPARATOR_ROOM};

use super::buffer_pool::{BufferPool, PageMut, PageRef};
use super::page::{FileNo, Page, PageId};
use crate::{Error, Result};

/// The page kind of a tree's meta page.
pub const KIND_BTREE_META: u16 = 0xB701;
/// The page kind of a tree's nodes.
pub const KIND_BTREE_NODE: u16 = 0xB702;
/// The most bytes an entry's key and value may have together.
pub const MAX_BTREE_ENTRY_BYTES: usize = MAX_ENTRY_BYTES;

const META_BLOCK: u32 = 0;
const MAGIC: &[u8; 4] = b"VBT1";

/// A B+-tree in one file of a [`BufferPool`]. Cheap to clone; every clone is the same tree.
#[derive(Clone, Debug)]
pub struct BTree {
    pool: Arc<BufferPool>,
    file: FileNo,
}

/// Where a leaf sits between its fences: the separators above it on the path from the root
/// (`None`: unbounded on that side).
struct Fences {
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
}

impl BTree {
    /// Opens the tree in `file` (attached to `pool`), formatting an empty tree if the file
    /// has no pages.
    pub fn open(pool: Arc<BufferPool>, file: FileNo) -> Result<Self> {
        let tree = BTree { pool, file };
        if tree.pool.file_pages(file) == 0 {
            let mut meta = tree.pool.allocate(file)?;
            let mut root = tree.pool.allocate(file)?;
            debug_assert_eq!((meta.id().block, root.id().block), (META_BLOCK, 1));
            root.set_kind(KIND_BTREE_NODE);
            Node::new(root.body_mut()).init(0, 0);
            meta.set_kind(KIND_BTREE_META);
            write_meta(&mut meta, root.id().block, 0);
        } else {
            let meta = tree.pool.read(tree.page(META_BLOCK))?;
            tree.read_meta(&meta)?;
        }
        Ok(tree)
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
    /// [`Error::EntryTooLarge`] if key and value together exceed
    /// [`MAX_BTREE_ENTRY_BYTES`].
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.len() + value.len() > MAX_ENTRY_BYTES {
            return Err(Error::EntryTooLarge {
                what: "a B+-tree entry (key and value)",
                bytes: key.len() + value.len(),
                limit: MAX_ENTRY_BYTES,
            });
        }
        {
            let mut leaf = self.leaf_exclusive(key)?;
            if let Some(replaced) = put_if_it_fits(&mut leaf, key, value) {
                return Ok(replaced);
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
    /// every subtree (T1), the levels (T2). For tests and `verso check`; latches one node at
    /// a time, so run it while nothing writes.
    pub fn check(&self) -> Result<u64> {
        let (root, level) = {
            let meta = self.pool.read(self.page(META_BLOCK))?;
            self.read_meta(&meta)?
        };
        let mut entries = 0;
        self.check_subtree(root, level, None, None, &mut entries)?;
        Ok(entries)
    }

    fn check_subtree(
        &self,
        block: u32,
        level: u16,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        entries: &mut u64,
    ) -> Result<()> {
        let page = self.pool.read(self.page(block))?;
        let node = self.node(&page)?;
        node.check().map_err(|reason| self.corrupt(block, reason))?;
        if node.level() != level {
            return Err(self.corrupt(
                block,
                format!("level {} where {level} is expected (T2)", node.level()),
            ));
        }
        for slot in 0..node.len() {
            let key = node.key(slot);
            if low.is_some_and(|low| key < low) || high.is_some_and(|high| key >= high) {
                return Err(self.corrupt(block, format!("slot {slot} outside its fences (T1)")));
            }
        }
        if node.is_leaf() {
            *entries += node.len() as u64;
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
                entries,
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
        if root == META_BLOCK || root >= self.pool.file_pages(self.file) {
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
        let (root, _) = self.read_meta(&meta)?;
        let mut page = self.pool.read(self.page(root))?;
        drop(meta);
        let mut fences = Fences {
            low: None,
            high: None,
        };
        loop {
            let child = {
                let node = self.node(&page)?;
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
        }
        Ok((page, fences))
    }

    /// The leaf for `key`, latched exclusive; the internal nodes on the way shared.
    fn leaf_exclusive(&self, key: &[u8]) -> Result<PageMut<'_>> {
        let meta = self.pool.read(self.page(META_BLOCK))?;
        let (root, root_level) = self.read_meta(&meta)?;
        if root_level == 0 {
            return self.pool.write(self.page(root));
        }
        let mut page = self.pool.read(self.page(root))?;
        drop(meta);
        loop {
            let (level, child) = {
                let node = self.node(&page)?;
                (node.level(), node.child_block(node.child_index_for(key)))
            };
            if level == 1 {
                return self.pool.write(self.page(child));
            }
            let next = self.pool.read(self.page(child))?;
            page = next;
        }
    }

    /// The pessimistic insert: exclusive latch coupling from the meta page, keeping the
    /// path from the highest unsafe node down, then splits bottom up.
    fn insert_splitting(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut meta = Some(self.pool.write(self.page(META_BLOCK))?);
        let (root, root_level) = self.read_meta(meta.as_ref().expect("held"))?;
        let mut path: Vec<PageMut<'_>> = Vec::new();
        let mut block = root;
        loop {
            let page = self.pool.write(self.page(block))?;
            let (safe, next) = {
                let node = self.node_of_mut(&page)?;
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
                Some(child) => block = child,
                None => break,
            }
        }
        let mut leaf = path.pop().expect("the leaf is on the path");
        if let Some(replaced) = put_if_it_fits(&mut leaf, key, value) {
            return Ok(replaced);
        }
        // Split the leaf with the new entry in it.
        let mut entries = Node::new(leaf.body()).entries();
        let replaced = match entries.binary_search_by(|(k, _)| k.as_slice().cmp(key)) {
            Ok(at) => Some(std::mem::replace(&mut entries[at].1, value.to_vec())),
            Err(at) => {
                entries.insert(at, (key.to_vec(), value.to_vec()));
                None
            }
        };
        let mut carry = Some(self.split(&mut leaf, 0, 0, entries)?);
        drop(leaf);
        while let Some((separator, right)) = carry.take() {
            let Some(mut parent) = path.pop() else {
                // The root split: a new root above it, and the meta page points there.
                let mut meta = meta
                    .take()
                    .expect("an unsafe root keeps the meta page latched");
                let mut new_root = self.pool.allocate(self.file)?;
                new_root.set_kind(KIND_BTREE_NODE);
                let mut node = Node::new(new_root.body_mut());
                node.init(root_level + 1, root);
                node.insert_at(0, &separator, &right.to_le_bytes());
                let new_root_block = new_root.id().block;
                write_meta(&mut meta, new_root_block, root_level + 1);
                break;
            };
            let (slot, fits, level, leftmost) = {
                let node = Node::new(parent.body());
                let slot = node
                    .search(&separator)
                    .expect_err("separators are unique (T1)");
                (
                    slot,
                    node.free() >= room_for(&separator, 4),
                    node.level(),
                    node.leftmost(),
                )
            };
            if fits {
                Node::new(parent.body_mut()).insert_at(slot, &separator, &right.to_le_bytes());
                break;
            }
            let mut entries = Node::new(parent.body()).entries();
            entries.insert(slot, (separator, right.to_le_bytes().to_vec()));
            carry = Some(self.split(&mut parent, level, leftmost, entries)?);
        }
        Ok(replaced)
    }

    /// Splits a node whose new `entries` do not fit: the lower part stays, the upper part
    /// goes to a new right sibling. Returns the separator for the parent and the new
    /// node's block.
    fn split(
        &self,
        page: &mut PageMut<'_>,
        level: u16,
        leftmost: u32,
        mut entries: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<(Vec<u8>, u32)> {
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
        let at = at.max(1);
        let upper = entries.split_off(at);
        let mut right = self.pool.allocate(self.file)?;
        right.set_kind(KIND_BTREE_NODE);
        let right_block = right.id().block;
        let separator;
        if level == 0 {
            separator = upper[0].0.clone();
            Node::new(right.body_mut()).rebuild(0, 0, &upper);
        } else {
            // The first upper separator moves up; its child becomes the right node's
            // leftmost.
            let mut upper = upper.into_iter();
            let (moved_up, child) = upper.next().expect("at least one upper entry");
            let child =
                u32::from_le_bytes(child.as_slice().try_into().expect("a child block (N3)"));
            let rest: Vec<_> = upper.collect();
            Node::new(right.body_mut()).rebuild(level, child, &rest);
            separator = moved_up;
        }
        Node::new(page.body_mut()).rebuild(level, leftmost, &entries);
        Ok((separator, right_block))
    }
}

/// Puts the entry in the latched leaf if it fits; `None` if the leaf must split.
fn put_if_it_fits(leaf: &mut PageMut<'_>, key: &[u8], value: &[u8]) -> Option<Option<Vec<u8>>> {
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
    Some(old)
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

    /// Copies a leaf's entries in range into the batch, walking `slots` in the scan's
    /// direction: entries the scan has not reached are skipped, and the first one past its
    /// far end finishes the scan.
    fn copy_in_range(&mut self, node: &Node<&[u8]>, slots: impl Iterator<Item = usize>) {
        for slot in slots {
            let key = node.key(slot);
            let (not_reached, past_the_end) = if self.ascending {
                (!self.above_low(key), !self.below_high(key))
            } else {
                (!self.below_high(key), !self.above_low(key))
            };
            if not_reached {
                continue;
            }
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
                self.copy_in_range(&node, 0..node.len());
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
                self.copy_in_range(&node, (0..node.len()).rev());
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
