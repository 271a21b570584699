//! The primary key's point-lookup index: a hash table whose slots are one cache line each,
//! holding the key and the row pointer side by side, so a lookup costs one cache miss for the
//! slot and one for the row it points at (scc's `HashIndex`, used before, keeps a bucket's
//! metadata and its entries in separate arrays: three dependent misses per point read,
//! `docs/design/index-choice.md`).
//!
//! Definitions
//! - The table is [`SHARDS`] shards; a key's *routing hash* (the top [`ROUTE_BITS`] bits of
//!   its 64-bit hash) picks its shard through `route`, and its low bits pick its *home* slot
//!   in the shard's power-of-two array. Collisions probe linearly to the next slot.
//! - Shard `i` takes a share of the keys proportional to `2^(i / SHARDS)`, so the shards
//!   double at moments spread evenly over each doubling of the table (an scc table that
//!   doubled all at once stalled every writer for seconds: `docs/known-issues.md`).
//!
//! Invariants (each shard, under its latch)
//! - At most [`MAX_LOAD_PERCENT`] of the slots are full, so every probe ends at an empty
//!   slot.
//! - Every entry lies between its home slot and the first empty slot after it (linear
//!   probing's invariant; removal shifts later entries back to keep it, so there are no
//!   tombstones).
//! - A key is in at most one slot.
//! - `published_slots`/`published_mask` describe the current array; they are written under
//!   the exclusive latch and only ever read to compute a *prefetch* address, which may be
//!   stale (prefetching memory that was freed is harmless, see `crate::prefetch`).
//!
//! Key operations
//! - `get` takes the shard's shared latch, probes, clones the value out and lets go: the
//!   caller reads the row with no latch of the index held, so it may use the index again.
//! - `insert_if_absent` and `remove_if` take the shard's exclusive latch; an insert that
//!   would fill more than [`MAX_LOAD_PERCENT`] of the array first doubles it (a rehash of
//!   that shard alone).
//! - `prefetch_slot` asks for the lines of the home slot and the next with no latch at all;
//!   `peek_for_prefetch`
//!   finds the value under the shared latch, for a caller that prefetches the row next.

use std::hash::BuildHasher;
use std::sync::atomic::Ordering;

use crate::sync::{AtomicUsize, Latch};

/// Shards of the table.
const SHARDS: usize = 64;

/// Bits of the routing hash that choose the shard.
const ROUTE_BITS: u32 = 12;

/// Slots a shard starts with.
const INITIAL_SLOTS: usize = 16;

/// Fullest a shard's array may be, in percent. Linear probing's expected probe is
/// `(1 + 1 / (1 - load)) / 2` slots for a key that is present: 2.5 lines at this bound and
/// about 1.5 on average over a doubling, on adjacent lines. A lower bound shortens probes
/// but costs memory, and fresh memory costs page faults as tables grow: at one half, TPC-B's
/// resident memory grew 31% faster than with scc's table.
const MAX_LOAD_PERCENT: usize = 75;

/// Key bytes held in the slot itself; longer keys spill to the heap.
const INLINE_KEY: usize = 32;

/// A key as a slot holds it.
enum SlotKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Spilled(Box<[u8]>),
}

impl SlotKey {
    fn new(key: &[u8]) -> Self {
        if key.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..key.len()].copy_from_slice(key);
            SlotKey::Inline {
                len: u8::try_from(key.len()).expect("at most INLINE_KEY bytes"),
                bytes,
            }
        } else {
            SlotKey::Spilled(key.into())
        }
    }

    fn matches(&self, key: &[u8]) -> bool {
        match self {
            SlotKey::Inline { len, bytes } => {
                usize::from(*len) == key.len() && bytes[..key.len()] == *key
            }
            SlotKey::Spilled(bytes) => **bytes == *key,
        }
    }
}

/// One entry: the low half of the key's hash (its home slot, and a cheap filter before the
/// key comparison), the key, and the value.
struct Entry<V> {
    hash: u32,
    key: SlotKey,
    value: V,
}

/// One slot, one cache line (for values up to two words, such as an `Arc` of an unsized
/// row): a probe that finds its key reads nothing else of the index.
#[repr(align(64))]
struct Slot<V> {
    entry: Option<Entry<V>>,
}

/// One shard's array.
struct ShardTable<V> {
    slots: Box<[Slot<V>]>,
    len: usize,
}

impl<V> ShardTable<V> {
    fn with_slots(count: usize) -> Self {
        debug_assert!(count.is_power_of_two());
        ShardTable {
            slots: (0..count).map(|_| Slot { entry: None }).collect(),
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `key`, if any.
    fn find(&self, hash: u32, key: &[u8]) -> Option<usize> {
        let mask = self.mask();
        let mut at = hash as usize & mask;
        loop {
            match &self.slots[at].entry {
                None => return None,
                Some(entry) if entry.hash == hash && entry.key.matches(key) => return Some(at),
                Some(_) => at = (at + 1) & mask,
            }
        }
    }

    /// The entry of a full slot (one that [`ShardTable::find`] returned).
    fn entry(&self, at: usize) -> &Entry<V> {
        self.slots[at].entry.as_ref().expect("a full slot")
    }

    /// Places an entry whose key is not in the table (used by inserts and by a rehash).
    fn place(&mut self, entry: Entry<V>) {
        let mask = self.mask();
        let mut at = entry.hash as usize & mask;
        while self.slots[at].entry.is_some() {
            at = (at + 1) & mask;
        }
        self.slots[at].entry = Some(entry);
        self.len += 1;
        debug_assert!(
            self.len * 100 <= self.slots.len() * MAX_LOAD_PERCENT,
            "within the load bound"
        );
    }

    /// Empties slot `hole` and shifts the entries after it back where their probes need
    /// them (backward-shift deletion: no tombstones, probes stay short).
    fn remove_at(&mut self, mut hole: usize) -> Entry<V> {
        let mask = self.mask();
        let removed = self.slots[hole].entry.take().expect("a full slot");
        self.len -= 1;
        let mut next = (hole + 1) & mask;
        while let Some(entry) = &self.slots[next].entry {
            let home = entry.hash as usize & mask;
            // The entry may move to the hole unless its home lies cyclically in
            // (hole, next]: then the hole is before its home and a probe would not see it.
            let home_after_hole = if hole <= next {
                hole < home && home <= next
            } else {
                hole < home || home <= next
            };
            if !home_after_hole {
                self.slots[hole].entry = self.slots[next].entry.take();
                hole = next;
            }
            next = (next + 1) & mask;
        }
        removed
    }

    /// Doubles the array and places every entry again.
    fn grow(&mut self) {
        let mut bigger = ShardTable::with_slots(self.slots.len() * 2);
        for slot in self.slots.iter_mut() {
            if let Some(entry) = slot.entry.take() {
                bigger.place(entry);
            }
        }
        debug_assert_eq!(bigger.len, self.len);
        *self = bigger;
    }
}

/// One shard: its array behind a reader-writer latch, and where the array lies for
/// prefetching. Aligned to two lines so that two shards' latches never share one.
#[repr(align(128))]
struct Shard<V> {
    table: Latch<ShardTable<V>>,
    /// Address of the array's first slot and its mask, for [`HashedIndex::prefetch_slot`].
    published_slots: AtomicUsize,
    published_mask: AtomicUsize,
}

impl<V> Shard<V> {
    fn new() -> Self {
        let table = ShardTable::with_slots(INITIAL_SLOTS);
        let shard = Shard {
            published_slots: AtomicUsize::new(0),
            published_mask: AtomicUsize::new(0),
            table: Latch::new(table),
        };
        shard.publish(&shard.table.read());
        shard
    }

    fn publish(&self, table: &ShardTable<V>) {
        self.published_slots
            .store(table.slots.as_ptr() as usize, Ordering::Relaxed);
        self.published_mask.store(table.mask(), Ordering::Relaxed);
    }
}

/// The point-lookup index of a primary key (see the module notes).
pub(crate) struct HashedIndex<V> {
    shards: Box<[Shard<V>]>,
    /// Shard of each value of the routing hash's top bits; ascending.
    route: Box<[u8]>,
    hasher: foldhash::fast::RandomState,
}

impl<V: Clone> HashedIndex<V> {
    pub(crate) fn new() -> Self {
        HashedIndex {
            shards: (0..SHARDS).map(|_| Shard::new()).collect(),
            route: staggered_route(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The key's shard and the low half of its hash.
    fn locate(&self, key: &[u8]) -> (&Shard<V>, u32) {
        let hash = self.hasher.hash_one(key);
        let shard = self.route[(hash >> (u64::BITS - ROUTE_BITS)) as usize];
        (&self.shards[usize::from(shard)], hash as u32)
    }

    /// The value under `key`, cloned out so that no latch of the index is held after.
    pub(crate) fn get(&self, key: &[u8]) -> Option<V> {
        let (shard, hash) = self.locate(key);
        let table = shard.table.read();
        table
            .find(hash, key)
            .map(|at| table.entry(at).value.clone())
    }

    /// Inserts unless the key is present; on failure hands the value back.
    pub(crate) fn insert_if_absent(&self, key: &[u8], value: V) -> Result<(), V> {
        let (shard, hash) = self.locate(key);
        let mut table = shard.table.write();
        if table.find(hash, key).is_some() {
            return Err(value);
        }
        if (table.len + 1) * 100 > table.slots.len() * MAX_LOAD_PERCENT {
            table.grow();
            shard.publish(&table);
        }
        table.place(Entry {
            hash,
            key: SlotKey::new(key),
            value,
        });
        Ok(())
    }

    /// Removes `key` if its value satisfies `condition`; returns whether it did.
    pub(crate) fn remove_if(&self, key: &[u8], condition: impl FnOnce(&V) -> bool) -> bool {
        let (shard, hash) = self.locate(key);
        let mut table = shard.table.write();
        let Some(at) = table.find(hash, key) else {
            return false;
        };
        if !condition(&table.entry(at).value) {
            return false;
        }
        let removed = table.remove_at(at);
        drop(table);
        drop(removed); // the value's drop may be long (a row); not under the latch
        true
    }

    /// Asks the processor for the lines of `key`'s home slot and the next, taking no latch: many such
    /// requests in a row overlap their cache misses. A hint only: it may name a line of an
    /// array that a concurrent resize has just replaced, which costs nothing but the line.
    pub(crate) fn prefetch_slot(&self, key: &[u8]) {
        let (shard, hash) = self.locate(key);
        let slots = shard.published_slots.load(Ordering::Relaxed);
        let mask = shard.published_mask.load(Ordering::Relaxed);
        // The home slot and the next: at the load bound a present key lies past its home
        // slot more often than not (`MAX_LOAD_PERCENT`).
        let slot_bytes = std::mem::size_of::<Slot<V>>();
        let home = hash as usize & mask;
        crate::prefetch::prefetch_address(slots.wrapping_add(home * slot_bytes));
        crate::prefetch::prefetch_address(slots.wrapping_add(((home + 1) & mask) * slot_bytes));
    }

    /// Calls `touch` with the value under `key` while holding the shard's shared latch, for
    /// a caller that prefetches what the value points at, and says whether there was one.
    /// `touch` must not use this index.
    pub(crate) fn peek_for_prefetch(&self, key: &[u8], touch: impl FnOnce(&V)) -> bool {
        let (shard, hash) = self.locate(key);
        let table = shard.table.read();
        let Some(at) = table.find(hash, key) else {
            return false;
        };
        touch(&table.entry(at).value);
        true
    }

    #[cfg(test)]
    fn shard_lens(&self) -> Vec<usize> {
        self.shards.iter().map(|s| s.table.read().len).collect()
    }
}

/// The routing table: shard `i` takes a share proportional to `2^(i / SHARDS)`, each entry
/// going to the shard whose cumulative share covers the entry's midpoint.
fn staggered_route() -> Box<[u8]> {
    let weights: Vec<f64> = (0..SHARDS)
        .map(|i| (i as f64 / SHARDS as f64).exp2())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut cumulative = 0.0;
    let upper: Vec<f64> = weights
        .iter()
        .map(|w| {
            cumulative += w / total;
            cumulative
        })
        .collect();
    let entries = 1usize << ROUTE_BITS;
    let route: Box<[u8]> = (0..entries)
        .map(|entry| {
            let midpoint = (entry as f64 + 0.5) / entries as f64;
            let shard = upper.partition_point(|&u| u <= midpoint).min(SHARDS - 1);
            u8::try_from(shard).expect("fewer than 256 shards")
        })
        .collect();
    debug_assert!(route.windows(2).all(|w| w[0] <= w[1]));
    route
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// A reader looking up a key that is present throughout never misses it, and never
    /// sees another key's value, while a writer inserts enough keys to double the shard the
    /// key lives in and then removes one of them (whether the removal shifts the reader's
    /// key back depends on the hasher's seed). Every path but the prefetch holds the
    /// shard latch, so this checks that discipline: a doubling that let go of the latch
    /// half-way fails it.
    #[test]
    fn loom_a_present_key_is_found_through_a_doubling_and_a_removal() {
        loom::model(|| {
            let index: loom::sync::Arc<HashedIndex<u64>> = loom::sync::Arc::new(HashedIndex::new());
            // One shard for every key, so that the inserts double the reader's shard.
            let shard = index.route[0];
            let keys: Vec<Vec<u8>> = (0u64..)
                .map(|i| i.to_be_bytes().to_vec())
                .filter(|k| {
                    let hash = index.hasher.hash_one(k.as_slice());
                    index.route[(hash >> (u64::BITS - ROUTE_BITS)) as usize] == shard
                })
                .take(INITIAL_SLOTS)
                .collect();
            assert!(index.insert_if_absent(&keys[0], 0).is_ok());
            let writer = {
                let index = index.clone();
                let keys = keys.clone();
                loom::thread::spawn(move || {
                    for (i, key) in keys.iter().enumerate().skip(1) {
                        assert!(index.insert_if_absent(key, i as u64).is_ok());
                    }
                    assert!(index.remove_if(&keys[1], |_| true));
                })
            };
            index.prefetch_slot(&keys[0]);
            assert_eq!(index.get(&keys[0]), Some(0));
            assert_eq!(index.get(&keys[0]), Some(0));
            writer.join().expect("the writer finishes");
            assert_eq!(index.get(&keys[1]), None);
            for (i, key) in keys.iter().enumerate().skip(2) {
                assert_eq!(index.get(key), Some(i as u64));
            }
            assert!(index.shards[usize::from(shard)].table.read().slots.len() > INITIAL_SLOTS);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Arc;

    fn key(i: u64) -> Vec<u8> {
        let mut k = vec![1u8];
        k.extend_from_slice(&(i * 2 + 10).to_be_bytes());
        k
    }

    #[test]
    fn a_slot_is_one_cache_line_for_a_fat_pointer_value() {
        assert_eq!(std::mem::size_of::<Slot<Arc<[u8]>>>(), 64);
        assert_eq!(std::mem::size_of::<Slot<u64>>(), 64);
    }

    /// Random inserts and conditional removals against a `HashMap`, with keys of every
    /// length class (empty, short, exactly inline, spilled), through several doublings.
    #[test]
    fn agrees_with_a_hash_map_through_growth_and_removal() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let index: HashedIndex<u64> = HashedIndex::new();
        let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
        // Lengths on both sides of the inline limit; every byte depends on `n` (a key
        // shorter than 8 bytes is a prefix of a mixed word, so short keys also differ).
        let key_of = |n: u64| -> Vec<u8> {
            let len = [0usize, 3, 8, 31, 32, 33, 60][(n % 7) as usize];
            let mixed = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
            let mut k = mixed.to_le_bytes().repeat(8);
            k.truncate(len);
            k
        };
        for step in 0..60_000u64 {
            let n = rng.random_range(0..8_000u64);
            let k = key_of(n);
            match rng.random_range(0..3) {
                0 | 1 => {
                    let expected_absent = !model.contains_key(&k);
                    let result = index.insert_if_absent(&k, step);
                    assert_eq!(result.is_ok(), expected_absent, "insert {n}");
                    if let Err(back) = result {
                        assert_eq!(back, step, "the refused value comes back");
                    } else {
                        model.insert(k.clone(), step);
                    }
                }
                _ => {
                    let odd = rng.random_bool(0.5);
                    let removed = index.remove_if(&k, |&v| (v % 2 == 1) == odd);
                    let expected = model.get(&k).is_some_and(|&v| (v % 2 == 1) == odd);
                    assert_eq!(removed, expected, "remove {n}");
                    if removed {
                        model.remove(&k);
                    }
                }
            }
            if step % 997 == 0 {
                for n in 0..8_000u64 {
                    let k = key_of(n);
                    assert_eq!(index.get(&k), model.get(&k).copied(), "get {n}");
                }
            }
        }
        assert_eq!(index.shard_lens().iter().sum::<usize>(), model.len());
    }

    /// Shards take unequal shares, from 1 to about 2 (so they double at spread moments).
    #[test]
    fn shards_take_staggered_shares() {
        let index: HashedIndex<u64> = HashedIndex::new();
        const KEYS: u64 = 64_000;
        for i in 0..KEYS {
            assert!(index.insert_if_absent(&key(i), i).is_ok());
        }
        for i in (0..KEYS).step_by(7) {
            assert_eq!(index.get(&key(i)), Some(i));
        }
        let counts = index.shard_lens();
        assert_eq!(counts.iter().sum::<usize>(), KEYS as usize);
        let first: usize = counts[..8].iter().sum();
        let last: usize = counts[SHARDS - 8..].iter().sum();
        let ratio = last as f64 / first as f64;
        assert!(
            (1.6..2.2).contains(&ratio),
            "last / first shards: {ratio} ({counts:?})"
        );
        let mut entries = vec![0usize; SHARDS];
        for &shard in index.route.iter() {
            entries[usize::from(shard)] += 1;
        }
        assert!(entries.iter().all(|&n| n >= 40), "{entries:?}");
        let (first, last) = (entries[0] as f64, entries[SHARDS - 1] as f64);
        assert!((1.8..2.2).contains(&(last / first)), "{entries:?}");
    }

    /// Readers on one thread never miss a key that is permanently present, and never see a
    /// value that was not inserted under their key, while another thread inserts and
    /// removes other keys (forcing doublings and backward shifts around them).
    #[test]
    fn readers_always_find_permanent_keys_while_others_churn() {
        use std::sync::atomic::AtomicBool;
        const PERMANENT: u64 = 2_000;
        let index: HashedIndex<u64> = HashedIndex::new();
        for i in 0..PERMANENT {
            assert!(index.insert_if_absent(&key(i), i).is_ok());
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let base = PERMANENT + (round % 50) * 1_000;
                    for i in base..base + 1_000 {
                        let _ = index.insert_if_absent(&key(i), i);
                    }
                    for i in base..base + 1_000 {
                        index.remove_if(&key(i), |_| true);
                    }
                    round += 1;
                }
            });
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(1500);
            while std::time::Instant::now() < deadline {
                for i in 0..PERMANENT {
                    index.prefetch_slot(&key(i));
                    let got = index.get(&key(i));
                    if got != Some(i) {
                        stop.store(true, Ordering::Relaxed);
                        panic!("key {i}: {got:?}");
                    }
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    }

    /// Keys that share their whole stored hash are told apart by the key alone: different
    /// lengths, one a prefix of another, inline against spilled, spilled against spilled.
    #[test]
    fn keys_with_the_same_hash_are_told_apart_by_their_bytes() {
        let mut table: ShardTable<u64> = ShardTable::with_slots(32);
        let long = vec![7u8; 40];
        let mut long_other = long.clone();
        long_other[39] = 8;
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![7],
            vec![7, 7],
            vec![7; 32],
            long.clone(),
            long_other,
            long[..39].to_vec(),
        ];
        const HASH: u32 = 5;
        for (i, key) in keys.iter().enumerate() {
            assert!(
                table.find(HASH, key).is_none(),
                "key {i} absent before its insert"
            );
            table.place(Entry {
                hash: HASH,
                key: SlotKey::new(key),
                value: i as u64,
            });
        }
        for (i, key) in keys.iter().enumerate() {
            let at = table.find(HASH, key);
            assert!(at.is_some(), "key {i}");
            assert_eq!(at.map(|at| table.entry(at).value), Some(i as u64));
        }
        assert!(table.find(HASH, &[7, 7, 7]).is_none());
        assert!(table.find(HASH, &[8]).is_none());
        assert!(
            table.find(HASH + 1, &[7]).is_none(),
            "another hash, same key bytes"
        );
    }

    /// The prefetch stages: the first asks for lines only; the second hands the value of a
    /// present key to its caller, and says whether there was one.
    #[test]
    fn prefetch_stages_find_exactly_the_present_keys() {
        let index: HashedIndex<u64> = HashedIndex::new();
        for i in 0..1_000 {
            assert!(index.insert_if_absent(&key(i), i).is_ok());
        }
        for i in 0..2_000 {
            index.prefetch_slot(&key(i));
            let mut seen = None;
            let found = index.peek_for_prefetch(&key(i), |&v| seen = Some(v));
            assert_eq!(found, i < 1_000, "key {i}");
            assert_eq!(seen, (i < 1_000).then_some(i), "key {i}");
        }
    }

    /// Backward shifts across the array's end: a full run of collisions that wraps around,
    /// emptied from the middle, keeps every remaining key reachable.
    #[test]
    fn removal_keeps_wrapped_probe_runs_reachable() {
        let mut table: ShardTable<u64> = ShardTable::with_slots(16);
        let mask = table.mask() as u32;
        // Seven keys whose home is slot 14 (the run wraps to 0..4) and one whose home is 0.
        let homes = [14u32, 14, 14, 14, 14, 14, 14, 16];
        for (i, &home) in homes.iter().enumerate() {
            let hash = (home & mask) | ((i as u32) << 8);
            table.place(Entry {
                hash,
                key: SlotKey::new(&[i as u8]),
                value: i as u64,
            });
        }
        for victim in [2usize, 0, 7, 4] {
            let hash = (homes[victim] & mask) | ((victim as u32) << 8);
            let at = table.find(hash, &[victim as u8]);
            assert!(at.is_some());
            assert_eq!(table.remove_at(at.expect("found")).value, victim as u64);
            for (i, &home) in homes.iter().enumerate() {
                let hash = (home & mask) | ((i as u32) << 8);
                let gone = [2usize, 0, 7, 4][..=[2usize, 0, 7, 4]
                    .iter()
                    .position(|&v| v == victim)
                    .expect("listed")]
                    .contains(&i);
                assert_eq!(table.find(hash, &[i as u8]).is_some(), !gone, "key {i}");
            }
        }
    }
}
