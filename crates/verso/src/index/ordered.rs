//! The concurrent maps behind the indexes, chosen by measurement
//! (`docs/design/index-choice.md`): scc's `TreeIndex`, a B+-tree with lock-free reads, for
//! every ordered index; and for the primary key also a hash index of Verso's own
//! (`hashed.rs`: key and row pointer in one cache line), which answers point lookups in one
//! cache miss instead of a descent through the tree. The tree reclaims removed entries by
//! epochs (`sdd`), so a reader holding a [`Guard`] may keep using a value it found even while
//! it is removed; the hash index hands out clones of its values.

use std::ops::Bound;

use scc::{Guard, TreeIndex};

use super::hashed::HashedIndex;

use crate::key::Key;
use crate::schema::PrimaryKeyIndex;

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

    /// Calls `visit` with entries in descending key order within the bounds, until it
    /// returns `false`.
    fn range_back(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        guard: &Guard,
        visit: impl FnMut(&[u8], &V) -> bool,
    );
}

/// Whether `key` lies below `lower`.
fn below(lower: Bound<&[u8]>, key: &[u8]) -> bool {
    match lower {
        Bound::Unbounded => false,
        Bound::Included(l) => key < l,
        Bound::Excluded(l) => key <= l,
    }
}

/// Whether `key` lies above `upper`.
fn above(upper: Bound<&[u8]>, key: &[u8]) -> bool {
    match upper {
        Bound::Unbounded => false,
        Bound::Included(u) => key > u,
        Bound::Excluded(u) => key >= u,
    }
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

    /// A clone of the value under `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<V> {
        self.map
            .peek_with(&Key::from_bytes(key), |_, value| value.clone())
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
        // scc's `range` with a lower bound below the tree's smallest key walks the whole
        // leaf list before it starts (about a second per 300,000 keys; found by the TPC-C
        // workload, `regression_scan_from_below_the_smallest_key_is_not_a_full_walk`). A
        // scan from the smallest key is cheap, so start there instead, skipping the keys a
        // concurrent insert may put below `lower` meanwhile.
        let starts_at_or_below_min = match lower {
            Bound::Unbounded => false,
            Bound::Included(l) | Bound::Excluded(l) => self
                .map
                .iter(guard)
                .next()
                .is_some_and(|(min, _)| l <= min.as_bytes()),
        };
        if lower == Bound::Unbounded || starts_at_or_below_min {
            // From the smallest key: scc's `range` would start at the leftmost leaf and stop
            // at once if that leaf has just been emptied and is not unlinked yet, missing
            // every key (`regression_a_scan_from_the_start_sees_past_an_emptied_leftmost_leaf`);
            // its plain iterator steps over empty leaves. The upper bound is checked here.
            for (key, value) in self.map.iter(guard) {
                let key = key.as_bytes();
                if below(lower, key) {
                    continue;
                }
                if above(upper, key) || !visit(key, value) {
                    return;
                }
            }
            return;
        }
        for (key, value) in self.map.range((to_key(lower), to_key(upper)), guard) {
            if !visit(key.as_bytes(), value) {
                return;
            }
        }
    }

    fn range_back(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        guard: &Guard,
        mut visit: impl FnMut(&[u8], &V) -> bool,
    ) {
        // The mirror of `range_from`: scc's backward `range` from at or above the largest
        // key starts at the rightmost leaf and would end at once if that leaf had just been
        // emptied (`regression_a_backward_scan_from_the_end_sees_past_an_emptied_rightmost_leaf`); the
        // plain iterator's backward steps pass over empty leaves.
        let starts_at_or_above_max = match upper {
            Bound::Unbounded => false,
            Bound::Included(u) | Bound::Excluded(u) => self
                .map
                .iter(guard)
                .next_back()
                .is_some_and(|(max, _)| u >= max.as_bytes()),
        };
        if upper == Bound::Unbounded || starts_at_or_above_max {
            for (key, value) in self.map.iter(guard).rev() {
                let key = key.as_bytes();
                if above(upper, key) {
                    continue;
                }
                if below(lower, key) || !visit(key, value) {
                    return;
                }
            }
            return;
        }
        let to_key = |bound: Bound<&[u8]>| bound.map(Key::from_bytes);
        for (key, value) in self.map.range((to_key(lower), to_key(upper)), guard).rev() {
            if !visit(key.as_bytes(), value) {
                return;
            }
        }
    }
}

/// The primary-key index: the ordered index for scans and, unless the table chose
/// [`PrimaryKeyIndex::OrderedOnly`], a hash index beside it for point lookups.
///
/// Invariant: with a hash index, the hash index decides uniqueness (an insert goes there
/// first and into the ordered index only if it won), and a key leaves the ordered index
/// before the hash index, both under the row's exclusive latch. So a row that a scan finds
/// is always found by a point lookup; a row being inserted may be found by a lookup a moment
/// before a scan sees it, but it is uncommitted then and invisible to both. Without one, the
/// ordered index alone decides and answers everything.
pub(crate) struct PrimaryIndex<V: Clone + Send + Sync + 'static> {
    hashed: Option<HashedIndex<V>>,
    ordered: OrderedIndex<V>,
}

impl<V: Clone + Send + Sync + 'static> PrimaryIndex<V> {
    pub(crate) fn new(kind: PrimaryKeyIndex) -> Self {
        PrimaryIndex {
            hashed: (kind == PrimaryKeyIndex::HashAndOrdered).then(HashedIndex::new),
            ordered: OrderedIndex::new(),
        }
    }

    /// Whether the table keeps no hash index: every lookup descends the tree.
    pub(crate) fn is_ordered_only(&self) -> bool {
        self.hashed.is_none()
    }

    /// Calls `read` with the value under `key` (a clone of it, so the value stays valid
    /// while `read` runs even if it is removed meanwhile, and `read` may use the index).
    pub(crate) fn with<R>(&self, key: &[u8], read: impl FnOnce(&V) -> R) -> Option<R> {
        let value = match &self.hashed {
            Some(hashed) => hashed.get(key),
            None => self.ordered.get(key),
        };
        value.map(|value| read(&value))
    }

    /// Inserts unless the key is present; on failure hands the value back.
    pub(crate) fn insert_if_absent(&self, key: &[u8], value: V) -> Result<(), V> {
        let Some(hashed) = &self.hashed else {
            return self.ordered.insert_if_absent(key, value);
        };
        hashed.insert_if_absent(key, value.clone())?;
        let inserted = self.ordered.insert_if_absent(key, value);
        debug_assert!(inserted.is_ok(), "the hash index decides uniqueness");
        Ok(())
    }

    /// Removes `key` if its value satisfies `condition`.
    pub(crate) fn remove_if(&self, key: &[u8], mut condition: impl FnMut(&V) -> bool) -> bool {
        let removed = self.ordered.remove_if(key, &mut condition);
        let Some(hashed) = &self.hashed else {
            return removed;
        };
        let also = hashed.remove_if(key, condition);
        debug_assert_eq!(removed, also, "both indexes hold the same keys");
        removed && also
    }

    /// First stage of a prefetch: asks for the line of each key's slot, with no latch (a
    /// tree has no slot to ask for: nothing then).
    pub(crate) fn prefetch_slot(&self, key: &[u8]) {
        if let Some(hashed) = &self.hashed {
            hashed.prefetch_slot(key);
        }
    }

    /// Second stage: calls `touch` with the value under `key`, under the index's shared
    /// latch (`touch` must not use the index); says whether there was one. Without a hash
    /// index nothing is touched (a descent would cost what the prefetch is meant to hide),
    /// and the answer is `false`.
    pub(crate) fn peek_for_prefetch(&self, key: &[u8], touch: impl FnOnce(&V)) -> bool {
        self.hashed
            .as_ref()
            .is_some_and(|hashed| hashed.peek_for_prefetch(key, touch))
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

    fn range_back(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        guard: &Guard,
        visit: impl FnMut(&[u8], &V) -> bool,
    ) {
        self.ordered.range_back(lower, upper, guard, visit);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn key(i: u64) -> Vec<u8> {
        let mut k = vec![1u8];
        k.extend_from_slice(&(i * 2 + 10).to_be_bytes());
        k
    }

    /// The first three values a scan of `[lower, upper]` visits, ascending or descending.
    fn first_three(
        index: &OrderedIndex<u64>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        descending: bool,
    ) -> Vec<u64> {
        let guard = Guard::new();
        let mut out = Vec::new();
        let visit = |_: &[u8], &v: &u64| {
            out.push(v);
            out.len() < 3
        };
        if descending {
            index.range_back(lower, upper, &guard, visit);
        } else {
            index.range_from(lower, upper, &guard, visit);
        }
        out
    }

    fn collect(index: &OrderedIndex<u64>, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Vec<u64> {
        first_three(index, lower, upper, false)
    }

    /// Found in CI (TPC-C's consistency check under 'Hana' with two workers saw no
    /// NEW_ORDER row at all for a moment): scc's `range` from the smallest key starts at the
    /// leftmost leaf and, if that leaf has just lost its last entry and is not unlinked yet
    /// (its removal could not take the node's lock, or is in between), ends at once, so a
    /// scan over a table whose smallest keys are being deleted misses every row. Here one
    /// thread keeps inserting and removing keys below a block of permanent keys, so the
    /// leftmost leaf empties again and again, while scans from the start (and from below
    /// the smallest key) must always see the whole block.
    #[test]
    fn regression_a_scan_from_the_start_sees_past_an_emptied_leftmost_leaf() {
        let below_everything = [0u8];
        // Permanent keys above every churned one; the churned leaves empty from the
        // smallest key up (as Delivery empties NEW_ORDER).
        scans_see_every_permanent_key_while_an_end_leaf_empties(
            1_000_000,
            0,
            false,
            |index, guard, visit| {
                for lower in [Bound::Unbounded, Bound::Included(&below_everything[..])] {
                    index.range_from(lower, Bound::Unbounded, guard, &mut *visit);
                }
            },
        );
    }

    /// One thread keeps filling a few leaves at one end of the index (churned keys from
    /// `churn_base`, valued `u64::MAX`) and emptying them (from the largest key down when
    /// `empty_downwards`), beside 200 permanent keys from `permanent_base`; meanwhile
    /// `scan` (which runs its scans, each calling `visit` per entry) must see every
    /// permanent key in each of its scans, for two seconds.
    fn scans_see_every_permanent_key_while_an_end_leaf_empties(
        permanent_base: u64,
        churn_base: u64,
        empty_downwards: bool,
        scan: impl Fn(&OrderedIndex<u64>, &Guard, &mut dyn FnMut(&[u8], &u64) -> bool),
    ) {
        use std::sync::atomic::{AtomicBool, Ordering};
        const PERMANENT: u64 = 200;
        let index = OrderedIndex::new();
        for i in 0..PERMANENT {
            assert!(index.insert_if_absent(&key(permanent_base + i), i).is_ok());
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let base = churn_base + (round % 1000) * 100;
                    for i in base..base + 64 {
                        let _ = index.insert_if_absent(&key(i), u64::MAX);
                    }
                    for j in 0..64 {
                        let i = if empty_downwards {
                            base + 63 - j
                        } else {
                            base + j
                        };
                        index.remove_if(&key(i), |_| true);
                    }
                    round += 1;
                }
            });
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
            let guard = Guard::new();
            while std::time::Instant::now() < deadline {
                // Counts per scan: `visit` is called by consecutive scans, each ending at
                // the last permanent key it reaches (or earlier, which is the bug).
                let mut seen_per_scan = Vec::new();
                let mut permanent_seen = 0;
                let mut visit = |_: &[u8], &v: &u64| {
                    if v != u64::MAX {
                        permanent_seen += 1;
                        if permanent_seen == PERMANENT {
                            seen_per_scan.push(PERMANENT);
                            permanent_seen = 0;
                        }
                    }
                    true
                };
                scan(&index, &guard, &mut visit);
                if seen_per_scan.len() != 2 || permanent_seen != 0 {
                    stop.store(true, Ordering::Relaxed);
                    panic!(
                        "of two scans, {} saw all {PERMANENT} keys (then {permanent_seen} more)",
                        seen_per_scan.len()
                    );
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    }

    /// Found by the TPC-C workload: a scan whose lower bound lies below the smallest key
    /// took scc's slow path, a walk over every leaf (seconds on a loaded table, growing with
    /// its size). The bound here is a thousand times what the fixed scan takes even in a
    /// debug build; the walk took longer than it on 200,000 keys.
    #[test]
    fn regression_scan_from_below_the_smallest_key_is_not_a_full_walk() {
        let index = OrderedIndex::new();
        for i in 0..200_000 {
            assert!(index.insert_if_absent(&key(i), i).is_ok());
        }
        let started = std::time::Instant::now();
        for _ in 0..10 {
            assert_eq!(
                collect(&index, Bound::Included(&[1]), Bound::Unbounded),
                [0, 1, 2]
            );
        }
        let elapsed = started.elapsed();
        assert!(
            elapsed < std::time::Duration::from_millis(500),
            "10 scans from below the smallest key took {elapsed:?}"
        );
    }

    #[test]
    fn scans_from_at_or_below_the_smallest_key_keep_their_bounds() {
        let index = OrderedIndex::new();
        for i in 0..10 {
            assert!(index.insert_if_absent(&key(i), i).is_ok());
        }
        let min = key(0);
        assert_eq!(
            collect(&index, Bound::Included(&min), Bound::Unbounded),
            [0, 1, 2]
        );
        assert_eq!(
            collect(&index, Bound::Excluded(&min), Bound::Unbounded),
            [1, 2, 3]
        );
        assert_eq!(
            collect(&index, Bound::Included(&[0]), Bound::Unbounded),
            [0, 1, 2]
        );
        assert_eq!(
            collect(&index, Bound::Included(&[0]), Bound::Excluded(&key(1))),
            [0]
        );
        assert!(collect(&index, Bound::Included(&[2]), Bound::Unbounded).is_empty());
        let between = {
            let mut k = key(4);
            *k.last_mut().expect("non-empty") -= 1;
            k
        };
        assert_eq!(
            collect(&index, Bound::Included(&between), Bound::Unbounded),
            [4, 5, 6]
        );
    }

    fn collect_back(
        index: &OrderedIndex<u64>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Vec<u64> {
        first_three(index, lower, upper, true)
    }

    #[test]
    fn backward_scans_visit_keys_in_descending_order_within_their_bounds() {
        let index = OrderedIndex::new();
        for i in 0..1_000 {
            assert!(index.insert_if_absent(&key(i), i).is_ok());
        }
        let max = key(999);
        let above_everything = [2u8];
        assert_eq!(
            collect_back(&index, Bound::Unbounded, Bound::Unbounded),
            [999, 998, 997]
        );
        assert_eq!(
            collect_back(&index, Bound::Unbounded, Bound::Included(&max)),
            [999, 998, 997]
        );
        assert_eq!(
            collect_back(&index, Bound::Unbounded, Bound::Excluded(&max)),
            [998, 997, 996]
        );
        assert_eq!(
            collect_back(&index, Bound::Unbounded, Bound::Excluded(&above_everything)),
            [999, 998, 997]
        );
        // Bounds inside the tree, through scc's own backward range.
        assert_eq!(
            collect_back(&index, Bound::Unbounded, Bound::Included(&key(500))),
            [500, 499, 498]
        );
        assert_eq!(
            collect_back(&index, Bound::Unbounded, Bound::Excluded(&key(500))),
            [499, 498, 497]
        );
        assert_eq!(
            collect_back(
                &index,
                Bound::Included(&key(499)),
                Bound::Excluded(&key(501))
            ),
            [500, 499]
        );
        assert_eq!(
            collect_back(
                &index,
                Bound::Excluded(&key(499)),
                Bound::Included(&key(501))
            ),
            [501, 500]
        );
        // An upper bound between two keys, and a range that holds none.
        let between = {
            let mut k = key(700);
            *k.last_mut().expect("non-empty") -= 1;
            k
        };
        assert_eq!(
            collect_back(&index, Bound::Unbounded, Bound::Included(&between)),
            [699, 698, 697]
        );
        assert!(collect_back(
            &index,
            Bound::Included(&between),
            Bound::Excluded(&key(700))
        )
        .is_empty());
        assert!(collect_back(&index, Bound::Unbounded, Bound::Excluded(&key(0))).is_empty());
    }

    /// Found while adding backward scans (scc's backward `range` has the mirror of the
    /// leftmost-leaf regression above: with the plain `range(..).rev()` this saw 0 of 200
    /// keys): one thread
    /// keeps inserting and removing keys above a block of permanent keys, so the rightmost
    /// leaf empties again and again, while backward scans from the end (and from above the
    /// largest key) must always see the whole block.
    #[test]
    fn regression_a_backward_scan_from_the_end_sees_past_an_emptied_rightmost_leaf() {
        let above_everything = [2u8];
        scans_see_every_permanent_key_while_an_end_leaf_empties(
            0,
            1_000_000,
            true,
            |index, guard, visit| {
                for upper in [Bound::Unbounded, Bound::Included(&above_everything[..])] {
                    index.range_back(Bound::Unbounded, upper, guard, &mut *visit);
                }
            },
        );
    }
}
