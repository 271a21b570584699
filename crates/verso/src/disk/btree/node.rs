//! The layout of a B+-tree node in a page's body: a slotted page.
//!
//! | body bytes | field |
//! |---|---|
//! | 0..2 | level (0: a leaf) |
//! | 2..4 | number of entries |
//! | 4..6 | start of the cell area (cells grow down from the end of the body) |
//! | 6..8 | bytes of dead cells (removed entries not yet compacted away) |
//! | 8..12 | leftmost child (internal nodes: the child for keys below the first separator) |
//! | 12..16 | reserved (0) |
//! | 16.. | the slot array: one `u16` cell offset per entry, in key order |
//!
//! A cell is `key length: u16 | value length: u16 | key | value`. In a leaf the value is
//! the entry's; in an internal node it is the child's block (`u32`) for keys from the
//! cell's key (the separator) up to the next separator.
//!
//! Invariants (checked by [`Node::check`] in debug builds after every change):
//! - **N1** The slots' keys are strictly increasing.
//! - **N2** Every cell lies between the cell-area start and the end of the body, and the
//!   slot array ends at or before the cell-area start.
//! - **N3** Internal nodes' values are 4 bytes.
//! - **N4** Live cells do not overlap, and they and the dead bytes fill the cell area
//!   exactly: what [`Node::free`] reports is really free.

use std::cmp::Ordering;

use crate::disk::page::{PAGE_HEADER_BYTES, PAGE_SIZE};

/// The bytes of a node's body.
pub(crate) const BODY: usize = PAGE_SIZE - PAGE_HEADER_BYTES;
const HEADER: usize = 16;
/// The room a node has for entries (cells and their slots).
pub(crate) const NODE_ROOM: usize = BODY - HEADER;
const SLOT: usize = 2;
const CELL_HEADER: usize = 4;

/// The bytes of an internal node's value: its child's block.
pub(crate) const CHILD_BYTES: usize = 4;

/// The largest key plus value an entry may have: four of the largest cells fit in a node,
/// so a split always leaves both halves with room and every internal node has at least
/// two children.
pub(crate) const MAX_ENTRY_BYTES: usize = (BODY - HEADER) / 4 - SLOT - CELL_HEADER;

/// The longest key: a separator is a whole key and its child's block, and four of the
/// largest separators must fit in an internal node as four of the largest entries do in a
/// leaf.
pub(crate) const MAX_KEY_BYTES: usize = MAX_ENTRY_BYTES - CHILD_BYTES;

/// The room an entry needs in a node: its cell and its slot.
pub(crate) fn room_for(key: &[u8], value_len: usize) -> usize {
    CELL_HEADER + key.len() + value_len + SLOT
}

/// The room the largest separator needs in an internal node. An internal node with this
/// much free room is safe: whatever separator a split below sends up fits in it.
pub(crate) const MAX_SEPARATOR_ROOM: usize = CELL_HEADER + MAX_KEY_BYTES + CHILD_BYTES + SLOT;

const _: () = assert!(4 * (CELL_HEADER + MAX_ENTRY_BYTES + SLOT) <= BODY - HEADER);
const _: () = assert!(4 * MAX_SEPARATOR_ROOM <= BODY - HEADER);

/// A node's body, read or written in place.
pub(crate) struct Node<B> {
    body: B,
}

fn get16(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes([b[at], b[at + 1]]) as usize
}

fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

impl<B: AsRef<[u8]>> Node<B> {
    pub(crate) fn new(body: B) -> Self {
        debug_assert_eq!(body.as_ref().len(), BODY);
        Node { body }
    }

    fn b(&self) -> &[u8] {
        self.body.as_ref()
    }

    pub(crate) fn level(&self) -> u16 {
        get16(self.b(), 0) as u16
    }

    pub(crate) fn is_leaf(&self) -> bool {
        self.level() == 0
    }

    pub(crate) fn len(&self) -> usize {
        get16(self.b(), 2)
    }

    fn cells_start(&self) -> usize {
        get16(self.b(), 4)
    }

    fn dead(&self) -> usize {
        get16(self.b(), 6)
    }

    pub(crate) fn leftmost(&self) -> u32 {
        get32(self.b(), 8)
    }

    fn cell_at(&self, slot: usize) -> usize {
        get16(self.b(), HEADER + SLOT * slot)
    }

    pub(crate) fn key(&self, slot: usize) -> &[u8] {
        let at = self.cell_at(slot);
        let key_len = get16(self.b(), at);
        &self.b()[at + CELL_HEADER..at + CELL_HEADER + key_len]
    }

    pub(crate) fn value(&self, slot: usize) -> &[u8] {
        let at = self.cell_at(slot);
        let key_len = get16(self.b(), at);
        let value_len = get16(self.b(), at + 2);
        let start = at + CELL_HEADER + key_len;
        &self.b()[start..start + value_len]
    }

    /// An internal node's child at `slot`.
    pub(crate) fn child(&self, slot: usize) -> u32 {
        debug_assert_eq!(self.value(slot).len(), CHILD_BYTES, "N3");
        get32(self.value(slot), 0)
    }

    /// Free bytes between the slot array and the cells.
    fn gap(&self) -> usize {
        self.cells_start() - (HEADER + SLOT * self.len())
    }

    /// Free bytes once dead cells are compacted away.
    pub(crate) fn free(&self) -> usize {
        self.gap() + self.dead()
    }

    /// The slot of `key`, or where it would go.
    pub(crate) fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let mid = (low + high) / 2;
            match self.key(mid).cmp(key) {
                Ordering::Less => low = mid + 1,
                Ordering::Greater => high = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    /// An internal node: the index of the child that holds `key` (0 is the leftmost child,
    /// `i > 0` the child of slot `i - 1`).
    pub(crate) fn child_index_for(&self, key: &[u8]) -> usize {
        match self.search(key) {
            Ok(slot) => slot + 1,
            Err(slot) => slot,
        }
    }

    /// An internal node: the index of the child holding the greatest keys below `key`.
    pub(crate) fn child_index_below(&self, key: &[u8]) -> usize {
        match self.search(key) {
            Ok(slot) | Err(slot) => slot,
        }
    }

    /// An internal node: the block of child `index` (see [`Node::child_index_for`]).
    pub(crate) fn child_block(&self, index: usize) -> u32 {
        if index == 0 {
            self.leftmost()
        } else {
            self.child(index - 1)
        }
    }

    /// Every entry, in order.
    pub(crate) fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..self.len())
            .map(|s| (self.key(s).to_vec(), self.value(s).to_vec()))
            .collect()
    }

    /// Checks N1-N3; returns what is wrong. Runs in debug builds after every change.
    pub(crate) fn check(&self) -> Result<(), String> {
        let len = self.len();
        let start = self.cells_start();
        if HEADER + SLOT * len > start || start > BODY {
            return Err(format!("{len} slots overlap the cells at {start} (N2)"));
        }
        for slot in 0..len {
            let at = self.cell_at(slot);
            if at < start || at + CELL_HEADER > BODY {
                return Err(format!(
                    "slot {slot}'s cell at {at} is outside the cells (N2)"
                ));
            }
            let end = at + CELL_HEADER + get16(self.b(), at) + get16(self.b(), at + 2);
            if end > BODY {
                return Err(format!(
                    "slot {slot}'s cell ends at {end}, past the body (N2)"
                ));
            }
            if !self.is_leaf() && get16(self.b(), at + 2) != 4 {
                return Err(format!(
                    "slot {slot} of an internal node is not a child (N3)"
                ));
            }
            if slot > 0 && self.key(slot - 1) >= self.key(slot) {
                return Err(format!("keys out of order at slot {slot} (N1)"));
            }
        }
        // N4: the live cells do not overlap, and with the dead bytes they fill the cell
        // area exactly (`free` trusts the dead count).
        let mut cells: Vec<(usize, usize)> = (0..len)
            .map(|slot| {
                let at = self.cell_at(slot);
                (
                    at,
                    at + CELL_HEADER + get16(self.b(), at) + get16(self.b(), at + 2),
                )
            })
            .collect();
        cells.sort_unstable();
        if let Some(pair) = cells.windows(2).find(|pair| pair[0].1 > pair[1].0) {
            return Err(format!(
                "the cells at {} and {} overlap (N4)",
                pair[0].0, pair[1].0
            ));
        }
        let live: usize = cells.iter().map(|(at, end)| end - at).sum();
        if live + self.dead() != BODY - start {
            return Err(format!(
                "{live} live and {} dead bytes in a cell area of {} (N4)",
                self.dead(),
                BODY - start
            ));
        }
        Ok(())
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Node<B> {
    fn m(&mut self) -> &mut [u8] {
        self.body.as_mut()
    }

    fn put16(&mut self, at: usize, v: usize) {
        debug_assert!(v <= u16::MAX as usize);
        self.m()[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
    }

    /// Formats an empty node of `level` (internal nodes: with `leftmost` as first child).
    pub(crate) fn init(&mut self, level: u16, leftmost: u32) {
        self.m().fill(0);
        self.put16(0, level as usize);
        self.put16(2, 0);
        self.put16(4, BODY);
        self.put16(6, 0);
        self.m()[8..12].copy_from_slice(&leftmost.to_le_bytes());
    }

    /// Inserts an entry at `slot` (from [`Node::search`]); the caller checked the room
    /// ([`Node::free`] at least [`room_for`]). Compacts first if the gap is too small.
    pub(crate) fn insert_at(&mut self, slot: usize, key: &[u8], value: &[u8]) {
        let room = room_for(key, value.len());
        debug_assert!(self.free() >= room, "the caller checks the room");
        if self.gap() < room {
            self.compact();
        }
        let cell = CELL_HEADER + key.len() + value.len();
        let at = self.cells_start() - cell;
        self.put16(at, key.len());
        self.put16(at + 2, value.len());
        self.m()[at + CELL_HEADER..at + CELL_HEADER + key.len()].copy_from_slice(key);
        self.m()[at + CELL_HEADER + key.len()..at + cell].copy_from_slice(value);
        self.put16(4, at);
        let len = self.len();
        let slots = HEADER + SLOT * slot..HEADER + SLOT * len;
        self.m().copy_within(slots, HEADER + SLOT * (slot + 1));
        self.put16(HEADER + SLOT * slot, at);
        self.put16(2, len + 1);
        debug_assert_eq!(self.check(), Ok(()));
    }

    /// Removes the entry at `slot`; its cell becomes dead space.
    pub(crate) fn remove_at(&mut self, slot: usize) {
        let len = self.len();
        debug_assert!(slot < len);
        let at = self.cell_at(slot);
        let cell = CELL_HEADER + get16(self.b(), at) + get16(self.b(), at + 2);
        let dead = self.dead() + cell;
        self.put16(6, dead);
        self.m().copy_within(
            HEADER + SLOT * (slot + 1)..HEADER + SLOT * len,
            HEADER + SLOT * slot,
        );
        self.put16(2, len - 1);
        if len == 1 {
            // Empty: nothing is alive in the cells.
            self.put16(4, BODY);
            self.put16(6, 0);
        }
        debug_assert_eq!(self.check(), Ok(()));
    }

    /// Rewrites the node with only its live cells, packed at the end of the body.
    fn compact(&mut self) {
        let level = self.level();
        let leftmost = self.leftmost();
        let entries = self.entries();
        self.rebuild(level, leftmost, &entries);
    }

    /// Formats the node to hold exactly `entries` (in order; they fit).
    pub(crate) fn rebuild(&mut self, level: u16, leftmost: u32, entries: &[(Vec<u8>, Vec<u8>)]) {
        self.init(level, leftmost);
        for (slot, (key, value)) in entries.iter().enumerate() {
            self.insert_at(slot, key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_stay_ordered_through_inserts_removals_and_compaction() {
        let mut node = Node::new(vec![0u8; BODY]);
        node.init(0, 0);
        let value = vec![7u8; 200];
        let mut n = 0u32;
        // Fill, remove every other entry, and fill again: the second fill needs compaction.
        while node.free() >= room_for(&n.to_be_bytes(), value.len()) {
            let key = n.to_be_bytes();
            let slot = node.search(&key).unwrap_err();
            node.insert_at(slot, &key, &value);
            n += 2;
        }
        let full = node.len();
        for slot in (0..full).rev().step_by(2) {
            node.remove_at(slot);
        }
        let mut odd = 1u32;
        while node.free() >= room_for(&odd.to_be_bytes(), value.len()) {
            let key = odd.to_be_bytes();
            let slot = node.search(&key).unwrap_err();
            node.insert_at(slot, &key, &value);
            odd += 2;
        }
        assert!(node.len() >= full - 1);
        assert_eq!(node.check(), Ok(()));
        let keys: Vec<Vec<u8>> = node.entries().into_iter().map(|(k, _)| k).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn four_of_the_largest_entries_fit_in_a_node() {
        let mut node = Node::new(vec![0u8; BODY]);
        node.init(0, 0);
        for i in 0..4u8 {
            let key = vec![i; MAX_ENTRY_BYTES - 8];
            assert!(node.free() >= room_for(&key, 8));
            node.insert_at(i as usize, &key, &[0; 8]);
        }
    }

    /// Regression (a review of 2026-11-28): the safe-node test counted a separator's room
    /// without its child's four bytes.
    #[test]
    fn four_of_the_longest_separators_fit_in_an_internal_node() {
        let mut node = Node::new(vec![0u8; BODY]);
        node.init(1, 7);
        for i in 0..4u8 {
            let key = vec![i; MAX_KEY_BYTES];
            assert_eq!(room_for(&key, CHILD_BYTES), MAX_SEPARATOR_ROOM);
            assert!(node.free() >= MAX_SEPARATOR_ROOM, "separator {i}");
            node.insert_at(i as usize, &key, &u32::from(i).to_le_bytes());
        }
        assert_eq!(node.check(), Ok(()));
    }

    proptest::proptest! {
        /// The checker of on-disk node bytes never panics, whatever the bytes.
        #[test]
        fn checking_any_bytes_never_panics(
            words in proptest::collection::vec((0usize..BODY, proptest::prelude::any::<u32>()), 0..64),
            len in 0u16..600,
            start in 0u16..9000,
            level in 0u16..3,
        ) {
            let mut body = vec![0u8; BODY];
            body[0..2].copy_from_slice(&level.to_le_bytes());
            body[2..4].copy_from_slice(&len.to_le_bytes());
            body[4..6].copy_from_slice(&start.to_le_bytes());
            for (at, word) in words {
                let at = at.min(BODY - 4);
                body[at..at + 4].copy_from_slice(&word.to_le_bytes());
            }
            let _ = Node::new(body).check();
        }
    }
}
