//! The set of row identities a folded queue entry holds (`engine::collect::fold_queue`):
//! open addressing with linear probing over nonzero `usize`s (row addresses), so that a fold
//! can ask for the slots of the identities it is about to insert ahead of inserting them.
//!
//! Why not a `HashSet`: behind a held snapshot every 1,024 commits fold a few thousand rows
//! into a set of up to all the rows written (a million accounts in pgbench's TPC-B at scale
//! 10, about 16 MiB of table). Each insert is a cold probe, and one after another they cost
//! TPC-B 80 samples per million commits of 1,824 (`docs/lab-notebook.md`). A standard set
//! exposes no slot address to prefetch; this one does ([`IdentitySet::prefetch`]).
//!
//! Definitions: `slots` has a power-of-two length; `0` marks an empty slot (no row lives at
//! address 0). An identity's home is its hash's top bits; it sits at its home or after it,
//! with no empty slot between (linear probing).
//!
//! Invariants: `len` is the number of nonzero slots; `2 * len <= slots.len()` once anything
//! is in it (probe runs stay short); every identity is reachable from its home without
//! crossing an empty slot, which removal keeps by shifting later entries back (no
//! tombstones, so a set that churns does not fill up with them).

/// A set of nonzero `usize`s; empty and unallocated by default.
#[derive(Default)]
pub(crate) struct IdentitySet {
    slots: Box<[usize]>,
    len: usize,
}

/// An empty slot.
const EMPTY: usize = 0;

/// Fibonacci hashing (Knuth's multiplicative method): row addresses differ in their middle
/// bits, and the multiplication carries those into the top bits it keeps.
const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

impl IdentitySet {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, id: usize) -> usize {
        debug_assert!(self.slots.len().is_power_of_two());
        let bits = self.slots.len().trailing_zeros();
        if bits == 0 {
            return 0;
        }
        ((id as u64).wrapping_mul(MULTIPLIER) >> (64 - bits)) as usize
    }

    /// Asks the processor for the cache line where a lookup of `id` starts: a hint with no
    /// effect on the set.
    #[inline]
    pub(crate) fn prefetch(&self, id: usize) {
        if !self.slots.is_empty() {
            let slot = &self.slots[self.home(id)];
            crate::prefetch::prefetch_address(std::ptr::from_ref(slot) as usize);
        }
    }

    /// Makes room for `additional` more identities without growing in between (so that
    /// prefetches issued before a batch of inserts stay pointed at the right slots).
    pub(crate) fn reserve(&mut self, additional: usize) {
        let needed = (self.len + additional).saturating_mul(2).max(16);
        if needed > self.slots.len() {
            self.rehash(needed.next_power_of_two());
        }
    }

    /// Where `id` is (`Ok`), or the empty slot its probe ends at (`Err`). The table must
    /// have slots, and at least one empty (the load bound guarantees it).
    fn probe(&self, id: usize) -> Result<usize, usize> {
        debug_assert!(id != EMPTY && 2 * self.len <= self.slots.len());
        let mask = self.mask();
        let mut at = self.home(id);
        loop {
            match self.slots[at] {
                EMPTY => return Err(at),
                present if present == id => return Ok(at),
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Adds `id`; false if it was there already.
    pub(crate) fn insert(&mut self, id: usize) -> bool {
        assert_ne!(id, EMPTY, "row identities are addresses, never 0");
        self.reserve(1);
        match self.probe(id) {
            Ok(_) => false,
            Err(empty) => {
                self.slots[empty] = id;
                self.len += 1;
                debug_assert!(2 * self.len <= self.slots.len());
                true
            }
        }
    }

    /// Removes `id`; false if it was not there.
    pub(crate) fn remove(&mut self, id: usize) -> bool {
        if self.len == 0 || id == EMPTY {
            return false;
        }
        let Ok(mut hole) = self.probe(id) else {
            return false;
        };
        self.slots[hole] = EMPTY;
        self.len -= 1;
        // Shift back every later entry of the run that the hole now cuts off from its home:
        // one whose home is not in (hole, at] cyclically.
        let mask = self.mask();
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let entry = self.slots[at];
            if entry == EMPTY {
                return true;
            }
            let from_home = at.wrapping_sub(self.home(entry)) & mask;
            let from_hole = at.wrapping_sub(hole) & mask;
            if from_hole <= from_home {
                self.slots[hole] = entry;
                self.slots[at] = EMPTY;
                hole = at;
            }
        }
    }

    /// Whether `id` is in the set.
    #[cfg(test)]
    pub(crate) fn contains(&self, id: usize) -> bool {
        self.len > 0 && id != EMPTY && self.probe(id).is_ok()
    }

    fn rehash(&mut self, capacity: usize) {
        debug_assert!(capacity.is_power_of_two() && capacity >= 2 * self.len);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; capacity].into_boxed_slice());
        let mask = self.mask();
        for id in old.iter().copied().filter(|&id| id != EMPTY) {
            let mut at = self.home(id);
            while self.slots[at] != EMPTY {
                at = (at + 1) & mask;
            }
            self.slots[at] = id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against `std`'s set, through inserts, repeats and removals that cut probe runs (ids
    /// chosen to collide: many share a home in a small table), across growth.
    #[test]
    fn the_set_agrees_with_a_standard_set_through_inserts_removals_and_growth() {
        let mut ours = IdentitySet::default();
        let mut theirs = std::collections::HashSet::new();
        assert!(ours.is_empty());
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..20_000 {
            // Row-like addresses: 64-byte aligned, from a small range so they repeat.
            let id = (1 + (next() % 3_000) as usize) * 64;
            if round % 3 == 2 {
                assert_eq!(ours.remove(id), theirs.remove(&id), "remove {id}");
            } else {
                assert_eq!(ours.insert(id), theirs.insert(id), "insert {id}");
            }
            assert_eq!(ours.len(), theirs.len());
        }
        for id in (1..=3_000).map(|i| i * 64) {
            assert_eq!(ours.contains(id), theirs.contains(&id), "contains {id}");
        }
        assert!(2 * ours.len() <= ours.slots.len());
        for id in theirs.drain() {
            assert!(ours.remove(id));
        }
        assert!(ours.is_empty());
        assert!(!ours.remove(64), "nothing left to remove");
    }

    /// Removal keeps every other member reachable when the hole sits in a run that wraps
    /// around the end of the table.
    #[test]
    fn removing_from_a_run_that_wraps_around_keeps_the_rest_reachable() {
        let mut set = IdentitySet::default();
        set.reserve(1); // 16 slots
        let last_home: Vec<usize> = (1..100_000usize)
            .filter(|&id| set.home(id) == set.mask())
            .take(4)
            .collect();
        assert_eq!(last_home.len(), 4);
        for &id in &last_home {
            assert!(set.insert(id));
        }
        // The run is slots 15, 0, 1, 2; remove its first member.
        assert!(set.remove(last_home[0]));
        for &id in &last_home[1..] {
            assert!(set.contains(id), "{id} is still found");
        }
        assert!(!set.contains(last_home[0]));
        assert_eq!(set.len(), 3);
    }
}
