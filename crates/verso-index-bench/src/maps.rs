//! The candidate maps behind one small trait: the four operations the engine needs.

use std::cell::Cell;
use std::collections::btree_map::Entry as BTreeEntry;
use std::collections::BTreeMap;
use std::ops::Bound;

use crossbeam_skiplist::SkipMap;
use ferntree::OptimisticRead;
use parking_lot::RwLock;
use scc::{Guard, TreeIndex};

use crate::keys::KeyRepr;

/// A concurrent ordered map from keys `K` to pointer-sized values.
pub trait OrderedIndex<K: KeyRepr>: Send + Sync + Sized {
    /// Name used in reports.
    const NAME: &'static str;

    /// An empty map.
    fn new() -> Self;

    /// Point lookup.
    fn get(&self, key: &K::Q) -> Option<usize>;

    /// Inserts `key -> value` unless `key` is present; `true` if this call inserted.
    fn insert_if_absent(&self, key: K, value: usize) -> bool;

    /// Removes `key`; `true` if this call removed it.
    fn remove(&self, key: &K::Q) -> bool;

    /// Visits up to `limit` entries within the bounds in ascending key order; returns how many
    /// were visited.
    fn scan<F: FnMut(&K::Q, usize)>(
        &self,
        lower: Bound<&K::Q>,
        upper: Bound<&K::Q>,
        limit: usize,
        visit: F,
    ) -> usize;
}

/// `scc::TreeIndex` (lock-free reads, `sdd` reclamation).
pub struct SccTree<K: KeyRepr>(pub TreeIndex<K, usize>);

impl<K: KeyRepr> OrderedIndex<K> for SccTree<K> {
    const NAME: &'static str = "scc TreeIndex";

    fn new() -> Self {
        SccTree(TreeIndex::new())
    }

    fn get(&self, key: &K::Q) -> Option<usize> {
        self.0.peek(key, &Guard::new()).copied()
    }

    fn insert_if_absent(&self, key: K, value: usize) -> bool {
        self.0.insert_sync(key, value).is_ok()
    }

    fn remove(&self, key: &K::Q) -> bool {
        self.0.remove_sync(key)
    }

    fn scan<F: FnMut(&K::Q, usize)>(
        &self,
        lower: Bound<&K::Q>,
        upper: Bound<&K::Q>,
        limit: usize,
        mut visit: F,
    ) -> usize {
        let guard = Guard::new();
        let mut n = 0;
        for (k, v) in self.0.range::<K::Q, _>((lower, upper), &guard).take(limit) {
            visit(k.borrow(), *v);
            n += 1;
        }
        n
    }
}

/// `crossbeam_skiplist::SkipMap` (lock-free, crossbeam-epoch, ref-counted entries).
pub struct Skip<K: KeyRepr>(pub SkipMap<K, usize>);

impl<K: KeyRepr> OrderedIndex<K> for Skip<K> {
    const NAME: &'static str = "crossbeam SkipMap";

    fn new() -> Self {
        Skip(SkipMap::new())
    }

    fn get(&self, key: &K::Q) -> Option<usize> {
        self.0.get(key).map(|e| *e.value())
    }

    /// `SkipMap` has no "insert or fail": `get_or_insert` returns whichever entry won, so this
    /// relies on `value` being unique (true for the engine, whose values are fresh pointers).
    fn insert_if_absent(&self, key: K, value: usize) -> bool {
        *self.0.get_or_insert(key, value).value() == value
    }

    fn remove(&self, key: &K::Q) -> bool {
        self.0.remove(key).is_some()
    }

    fn scan<F: FnMut(&K::Q, usize)>(
        &self,
        lower: Bound<&K::Q>,
        upper: Bound<&K::Q>,
        limit: usize,
        mut visit: F,
    ) -> usize {
        let mut n = 0;
        for e in self.0.range::<K::Q, _>((lower, upper)).take(limit) {
            visit(e.key().borrow(), *e.value());
            n += 1;
        }
        n
    }
}

/// `ferntree::Tree` (optimistic lock coupling B+tree, crossbeam-epoch).
pub struct Fern<K: KeyRepr + OptimisticRead>(pub ferntree::Tree<K, usize>);

impl<K: KeyRepr + OptimisticRead> OrderedIndex<K> for Fern<K> {
    const NAME: &'static str = "ferntree";

    fn new() -> Self {
        Fern(ferntree::Tree::new())
    }

    fn get(&self, key: &K::Q) -> Option<usize> {
        self.0.get_optimistic(key)
    }

    /// ferntree has no "insert or fail" either; `get_or_insert_with` calls the closure only when
    /// it is about to insert. See the race check: under contention that is not always atomic.
    fn insert_if_absent(&self, key: K, value: usize) -> bool {
        let inserted = Cell::new(false);
        self.0.get_or_insert_with(key, || {
            inserted.set(true);
            value
        });
        inserted.get()
    }

    fn remove(&self, key: &K::Q) -> bool {
        // `remove_defer` is the documented companion of the optimistic read path.
        self.0.remove_defer(key)
    }

    fn scan<F: FnMut(&K::Q, usize)>(
        &self,
        lower: Bound<&K::Q>,
        upper: Bound<&K::Q>,
        limit: usize,
        mut visit: F,
    ) -> usize {
        // ferntree's `Range` has an inherent `next`, not an `Iterator` impl.
        let mut range = self.0.range(lower, upper);
        let mut n = 0;
        while n < limit {
            let Some((k, v)) = range.next() else { break };
            visit(k.borrow(), *v);
            n += 1;
        }
        n
    }
}

/// `parking_lot::RwLock<BTreeMap>`: the baseline.
pub struct LockedBTree<K: KeyRepr>(pub RwLock<BTreeMap<K, usize>>);

impl<K: KeyRepr> OrderedIndex<K> for LockedBTree<K> {
    const NAME: &'static str = "RwLock<BTreeMap>";

    fn new() -> Self {
        LockedBTree(RwLock::new(BTreeMap::new()))
    }

    fn get(&self, key: &K::Q) -> Option<usize> {
        self.0.read().get(key).copied()
    }

    fn insert_if_absent(&self, key: K, value: usize) -> bool {
        match self.0.write().entry(key) {
            BTreeEntry::Vacant(e) => {
                e.insert(value);
                true
            }
            BTreeEntry::Occupied(_) => false,
        }
    }

    fn remove(&self, key: &K::Q) -> bool {
        self.0.write().remove(key).is_some()
    }

    fn scan<F: FnMut(&K::Q, usize)>(
        &self,
        lower: Bound<&K::Q>,
        upper: Bound<&K::Q>,
        limit: usize,
        mut visit: F,
    ) -> usize {
        let map = self.0.read();
        let mut n = 0;
        for (k, v) in map.range::<K::Q, _>((lower, upper)).take(limit) {
            visit(k.borrow(), *v);
            n += 1;
        }
        n
    }
}

/// `congee::Congee` (ART for 8-byte keys, crossbeam-epoch); `u64` keys only.
pub struct CongeeArt(pub congee::Congee<usize, usize>);

/// Number of entries one congee range call may return at most in `scan`.
const CONGEE_SCAN_BUF: usize = 128;

impl OrderedIndex<u64> for CongeeArt {
    const NAME: &'static str = "congee ART";

    fn new() -> Self {
        CongeeArt(congee::Congee::default())
    }

    fn get(&self, key: &u64) -> Option<usize> {
        let guard = self.0.pin();
        self.0.get(&to_usize(*key), &guard)
    }

    fn insert_if_absent(&self, key: u64, value: usize) -> bool {
        let guard = self.0.pin();
        // `compute_or_insert` keeps an existing value (the closure returns it unchanged) and
        // reports it as `Some(old)`; `None` means this call inserted.
        matches!(
            self.0
                .compute_or_insert(to_usize(key), |old| old.unwrap_or(value), &guard),
            Ok(None)
        )
    }

    fn remove(&self, key: &u64) -> bool {
        let guard = self.0.pin();
        self.0.remove(&to_usize(*key), &guard).is_some()
    }

    /// congee scans the half-open range `[start, end)` into a caller buffer.
    fn scan<F: FnMut(&u64, usize)>(
        &self,
        lower: Bound<&u64>,
        upper: Bound<&u64>,
        limit: usize,
        mut visit: F,
    ) -> usize {
        let start = match lower {
            Bound::Included(&k) => k,
            Bound::Excluded(&k) => match k.checked_add(1) {
                Some(k) => k,
                None => return 0,
            },
            Bound::Unbounded => 0,
        };
        // An inclusive upper bound of u64::MAX cannot be expressed; it is treated as exclusive.
        let end = match upper {
            Bound::Included(&k) => k.saturating_add(1),
            Bound::Excluded(&k) => k,
            Bound::Unbounded => u64::MAX,
        };
        let mut buf = [(0usize, 0usize); CONGEE_SCAN_BUF];
        let want = limit.min(CONGEE_SCAN_BUF);
        let guard = self.0.pin();
        let n = self
            .0
            .range(&to_usize(start), &to_usize(end), &mut buf[..want], &guard);
        for &(k, v) in &buf[..n] {
            visit(&(k as u64), v);
        }
        n
    }
}

fn to_usize(k: u64) -> usize {
    usize::try_from(k).expect("congee keys are usize; this benchmark needs a 64-bit target")
}
