//! The concurrent maps behind the indexes, chosen by measurement
//! (`docs/design/index-choice.md`): scc's `TreeIndex`, a B+-tree with lock-free reads, for
//! every ordered index; and for the primary key also scc's `HashIndex`, which answers point
//! lookups in one or two cache misses instead of a descent through the tree. Both reclaim
//! removed entries by epochs (`sdd`), so a reader holding a [`Guard`] may keep using a value
//! it found even while it is removed.

use std::ops::Bound;

use scc::{Guard, HashIndex, TreeIndex};

use crate::key::Key;

/// Ordered iteration, as scans use it (both index kinds offer it).
pub(crate) trait RangeScan<V> {
    /// Calls `visit` with entries in ascending key order within the bounds, until it
    /// returns `false`.
    fn range_from(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        guard: &Guard,
        visit: impl FnMut(&[u8], &V) -> bool,
    );
}

/// An ordered map from encoded keys to `V` (a row pointer).
pub(crate) struct OrderedIndex<V: Clone + Send + Sync + 'static> {
    map: TreeIndex<Key, V>,
}

impl<V: Clone + Send + Sync + 'static> OrderedIndex<V> {
    pub(crate) fn new() -> Self {
        OrderedIndex {
            map: TreeIndex::new(),
        }
    }

    /// Inserts unless the key is present; on failure hands the value back.
    pub(crate) fn insert_if_absent(&self, key: &[u8], value: V) -> Result<(), V> {
        self.map
            .insert_sync(Key::from_bytes(key), value)
            .map_err(|(_, value)| value)
    }

    /// Removes `key` if its value satisfies `condition`.
    pub(crate) fn remove_if(&self, key: &[u8], condition: impl FnMut(&V) -> bool) -> bool {
        self.map.remove_if_sync(&Key::from_bytes(key), condition)
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

impl<V: Clone + Send + Sync + 'static> RangeScan<V> for OrderedIndex<V> {
    fn range_from(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        guard: &Guard,
        mut visit: impl FnMut(&[u8], &V) -> bool,
    ) {
        let to_key = |bound: Bound<&[u8]>| bound.map(Key::from_bytes);
        for (key, value) in self.map.range((to_key(lower), to_key(upper)), guard) {
            if !visit(key.as_bytes(), value) {
                return;
            }
        }
    }
}

/// The primary-key index: a hash index for point lookups beside the ordered index for scans.
///
/// Invariant: the hash index decides uniqueness (an insert goes there first and into the
/// ordered index only if it won), and a key leaves the ordered index before the hash index,
/// both under the row's exclusive latch. So a row that a scan finds is always found by a
/// point lookup; a row being inserted may be found by a lookup a moment before a scan sees
/// it, but it is uncommitted then and invisible to both.
pub(crate) struct PrimaryIndex<V: Clone + Send + Sync + 'static> {
    hashed: HashIndex<Key, V, foldhash::fast::RandomState>,
    ordered: OrderedIndex<V>,
}

impl<V: Clone + Send + Sync + 'static> PrimaryIndex<V> {
    pub(crate) fn new() -> Self {
        PrimaryIndex {
            hashed: HashIndex::with_hasher(foldhash::fast::RandomState::default()),
            ordered: OrderedIndex::new(),
        }
    }

    /// The value under `key`, valid while `guard` lives.
    pub(crate) fn get<'g>(&'g self, key: &[u8], guard: &'g Guard) -> Option<&'g V> {
        self.hashed.peek(&Key::from_bytes(key), guard)
    }

    /// Inserts unless the key is present; on failure hands the value back.
    pub(crate) fn insert_if_absent(&self, key: &[u8], value: V) -> Result<(), V> {
        self.hashed
            .insert_sync(Key::from_bytes(key), value.clone())
            .map_err(|(_, value)| value)?;
        let inserted = self.ordered.insert_if_absent(key, value);
        debug_assert!(inserted.is_ok(), "the hash index decides uniqueness");
        Ok(())
    }

    /// Removes `key` if its value satisfies `condition`.
    pub(crate) fn remove_if(&self, key: &[u8], mut condition: impl FnMut(&V) -> bool) -> bool {
        let removed = self.ordered.remove_if(key, &mut condition);
        let also = self.hashed.remove_if_sync(&Key::from_bytes(key), condition);
        debug_assert_eq!(removed, also, "both indexes hold the same keys");
        removed && also
    }

    pub(crate) fn len(&self) -> usize {
        self.ordered.len()
    }
}

impl<V: Clone + Send + Sync + 'static> RangeScan<V> for PrimaryIndex<V> {
    fn range_from(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        guard: &Guard,
        visit: impl FnMut(&[u8], &V) -> bool,
    ) {
        self.ordered.range_from(lower, upper, guard, visit);
    }
}
