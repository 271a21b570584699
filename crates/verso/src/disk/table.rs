//! A table of the disk engine in PostgreSQL's design: its heap ([`HeapFile`]) and its
//! indexes, paged B+-trees whose entries are an encoded key followed by a tuple's address
//! (PostgreSQL's nbtree with the heap TID as the last key column), one entry per chain
//! root: an insert and every non-HOT update add an entry to every index, a HOT update none
//! (design note: `docs/design/buffer-pool.md`, "Disk tables").
//!
//! Rows are byte strings here (the packed row format above this layer); [`RowKeys`] says
//! how to read a row's keys, for the checks an index scan makes on what an entry leads to.
//!
//! # Invariants
//!
//! - **DT1** Every version is reachable from an index entry of each index with that
//!   version's key: through its chain root's entry, which names the key every member of a
//!   HOT chain has (a HOT update changes no indexed column).
//! - **DT2** An entry may lead to a tuple that is not its key's (its line freed by vacuum
//!   and taken again while a reader held the entry); every read re-checks the key of the
//!   tuple it found against the entry's, as PostgreSQL rechecks index conditions.
//! - **DT3** At most one version of a primary key is visible to any snapshot: an insert
//!   checks every version of its key under the key's lock stripe (held across the check
//!   and the new entry), refusing a key another transaction wrote that it cannot see
//!   (write conflict: first-updater-wins, checked first) or one its snapshot sees
//!   (duplicate).
//! - **DT4** A key check sees the key's newest version: a version is pruned eagerly only
//!   once a newer one committed, which is on the same chain (HOT) or whose entry was
//!   added before that commit, so a check that reads the key's entries again after its
//!   heap reads, finds none new and no line freed by vacuum meanwhile (an address it read,
//!   taken again by the newer version) missed nothing; else it reads again. The second
//!   read is skipped when no insert into the primary index completed since the first
//!   ([`BTree::inserts_completed`]). This rests on every primary-index entry being added
//!   through [`BTree::insert`] before its transaction commits (redo adds them only before
//!   the database opens).

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use super::btree::BTree;
use super::heap_file::{HeapFile, Pruning, Replaced, Tid, VacuumStats};
use super::heap_page::TupleHeader;
use super::transactions::{DiskTransaction, DiskTransactions};
use super::visibility::{self, Hints, Snapshot};
use crate::sync::Mutex;
use crate::{Error, Result};

/// The bytes of a tuple address at the end of an index entry.
const TID_BYTES: usize = 6;

const KEY_LOCK_STRIPES: usize = 256;

/// PostgreSQL's `autovacuum_vacuum_threshold`.
pub const AUTOVACUUM_THRESHOLD: u64 = 50;
/// PostgreSQL's `autovacuum_vacuum_scale_factor`.
pub const AUTOVACUUM_SCALE_FACTOR: f64 = 0.2;

/// How to read a row's keys: the order-preserving, prefix-free encodings of its primary
/// key and of each secondary index's columns.
pub trait RowKeys: Send + Sync {
    /// The encoded primary key of a row.
    fn primary_key(&self, row: &[u8]) -> Result<Vec<u8>>;
    /// The encoded key of secondary index `index` for a row.
    fn index_key(&self, index: usize, row: &[u8]) -> Result<Vec<u8>>;
}

/// What a scan hands each visible row to: its index key and its bytes; it returns whether
/// to go on.
pub type RowVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'a;

/// A disk table: a heap, a primary index and secondary indexes.
pub struct DiskTable {
    name: String,
    heap: HeapFile,
    primary: BTree,
    indexes: Vec<BTree>,
    keys: Box<dyn RowKeys>,
    key_locks: Box<[Mutex<()>]>,
    /// Versions made dead since the last vacuum, as PostgreSQL's statistics count them
    /// (`n_dead_tup`): a committed update or delete adds one, an aborted insert or update
    /// one.
    dead_tuples: AtomicU64,
    /// Tuples the last vacuum left (`reltuples`).
    tuples_after_vacuum: AtomicU64,
    /// Tests' injection points: run once between a key check's index read and its heap
    /// reads, and after its first chain ([`DiskTable::inject_after_index_read`],
    /// [`DiskTable::inject_after_first_chain`]).
    after_index_read: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    after_first_chain: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    has_injection: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for DiskTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskTable")
            .field("name", &self.name)
            .field("indexes", &self.indexes.len())
            .finish_non_exhaustive()
    }
}

fn entry(key: &[u8], tid: Tid) -> Vec<u8> {
    let mut entry = Vec::with_capacity(key.len() + TID_BYTES);
    entry.extend_from_slice(key);
    entry.extend_from_slice(&tid.to_bytes());
    entry
}

/// Splits an entry into its key and tuple address.
fn split(entry: &[u8]) -> Option<(&[u8], Tid)> {
    let at = entry.len().checked_sub(TID_BYTES)?;
    let tid = Tid::from_bytes(entry[at..].try_into().expect("six bytes"));
    Some((&entry[..at], tid))
}

/// Bounds on index entries (a key followed by an address) that take in every entry whose
/// key lies in the key range, and maybe some that do not (filtered by [`in_range`]):
/// every entry of a key at or above a low bound sorts at or above it, and every entry of a
/// key at or below a high bound below the high bound's prefix successor. Keys are
/// prefix-free, and no key is a proper prefix of a bound, so entries sort as their keys do.
fn entry_bounds(low: Bound<&[u8]>, high: Bound<&[u8]>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let low = match low {
        Bound::Included(key) | Bound::Excluded(key) => Bound::Included(key.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    let high = match high {
        Bound::Included(key) | Bound::Excluded(key) => {
            crate::key::prefix_successor(key).map_or(Bound::Unbounded, Bound::Excluded)
        }
        Bound::Unbounded => Bound::Unbounded,
    };
    (low, high)
}

/// Where a key lies against a key range: below it, in it, or above it.
fn place(key: &[u8], low: Bound<&[u8]>, high: Bound<&[u8]>) -> std::cmp::Ordering {
    let below = match low {
        Bound::Included(low) => key < low,
        Bound::Excluded(low) => key <= low,
        Bound::Unbounded => false,
    };
    let above = match high {
        Bound::Included(high) => key > high,
        Bound::Excluded(high) => key >= high,
        Bound::Unbounded => false,
    };
    if below {
        std::cmp::Ordering::Less
    } else if above {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
}

impl DiskTable {
    /// A table over its heap and indexes (opened by the caller, after redo).
    pub fn new(
        name: impl Into<String>,
        heap: HeapFile,
        primary: BTree,
        indexes: Vec<BTree>,
        keys: Box<dyn RowKeys>,
    ) -> Self {
        DiskTable {
            name: name.into(),
            heap,
            primary,
            indexes,
            keys,
            key_locks: (0..KEY_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            dead_tuples: AtomicU64::new(0),
            tuples_after_vacuum: AtomicU64::new(0),
            after_index_read: Mutex::new(None),
            after_first_chain: Mutex::new(None),
            has_injection: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// For tests of interleavings: `hook` runs once, on the thread of the next key check
    /// (an insert's uniqueness check, or [`DiskTable::absent`]), after it read the key's
    /// index entries and before it reads their chains.
    #[doc(hidden)]
    pub fn inject_after_index_read(&self, hook: Box<dyn FnOnce() + Send>) {
        *self.after_index_read.lock() = Some(hook);
        self.has_injection.store(true, Ordering::Release);
    }

    /// For tests of interleavings: as [`DiskTable::inject_after_index_read`], after the
    /// check read the chain of the key's first index entry and before the others.
    #[doc(hidden)]
    pub fn inject_after_first_chain(&self, hook: Box<dyn FnOnce() + Send>) {
        *self.after_first_chain.lock() = Some(hook);
        self.has_injection.store(true, Ordering::Release);
    }

    /// Runs the hook at an injection point, if a test set one.
    fn injection_point(&self, point: &Mutex<Option<Box<dyn FnOnce() + Send>>>) {
        if self.has_injection.load(Ordering::Acquire) {
            let hook = point.lock().take();
            if let Some(hook) = hook {
                hook();
            }
        }
    }

    /// The headers of every version of the key's rows (DT2 checked: a chain whose tuple
    /// has another key is skipped), through the key's index entries. Under eager pruning,
    /// if an entry appeared or vacuum freed lines while the chains were read, they are
    /// read again: a version may vanish between the index read and the heap read once a
    /// newer one committed, and that newer one's entry (added before its commit) may be
    /// one the index read missed, or name an address it read before vacuum freed it; read
    /// again, it is there (DT4,
    /// `regression_an_insert_meets_a_key_cold_updated_while_it_checked`). When no insert
    /// into the primary index completed meanwhile, the entries are not read again; a HOT
    /// replacer adds no entry, but its version is on the chain the check read
    /// (`an_insert_meets_a_key_updated_hot_and_pruned_while_it_checked`).
    fn key_versions(&self, key: &[u8]) -> Result<Vec<TupleHeader>> {
        // PostgreSQL's rule keeps every version the checker's snapshot may need to see
        // written: one read suffices.
        let eager = self.heap.pruning() == Pruning::Eager;
        loop {
            let inserted = self.primary.inserts_completed();
            let freed = self.heap.lines_freed();
            let roots = self.roots(key)?;
            self.injection_point(&self.after_index_read);
            let mut headers = Vec::new();
            for (at, &root) in roots.iter().enumerate() {
                for (_, header, data) in self.heap.versions(root)? {
                    if self.keys.primary_key(&data)? == key {
                        headers.push(header);
                    }
                }
                if at == 0 {
                    self.injection_point(&self.after_first_chain);
                }
            }
            // A new entry, or an address vacuum freed (and another tuple may have taken,
            // with an entry for this key naming an address read before): read again.
            // A version pruned meanwhile was replaced by a committed transaction, which
            // completed its entry's insert before committing: when no insert into the
            // primary index completed since the first read, none was added for this key
            // that matters, and the entries need not be read again (the common case).
            if !eager
                || (self.heap.lines_freed() == freed
                    && (self.primary.inserts_completed() == inserted
                        || self.roots(key)?.iter().all(|root| roots.contains(root))))
            {
                return Ok(headers);
            }
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The heap.
    pub fn heap(&self) -> &HeapFile {
        &self.heap
    }

    /// Pages in the table's files: its heap, its free-space map and its indexes.
    pub fn pages(&self) -> Result<u64> {
        let pool = self.primary.pool();
        let mut pages = u64::from(self.heap.pages()?);
        pages += u64::from(pool.file_pages(self.heap.free_space_map().file())?);
        Ok(pages + self.index_pages()?)
    }

    /// Pages in the table's indexes, primary and secondary.
    pub fn index_pages(&self) -> Result<u64> {
        BTree::pages_of(std::iter::once(&self.primary).chain(&self.indexes))
    }

    /// The primary index.
    pub fn primary_index(&self) -> &BTree {
        &self.primary
    }

    /// Secondary index `index`.
    pub fn index(&self, index: usize) -> Option<&BTree> {
        self.indexes.get(index)
    }

    fn conflict(&self) -> Error {
        Error::WriteConflict {
            table: self.name.clone(),
        }
    }

    /// The chain roots the primary index has for `key`.
    fn roots(&self, key: &[u8]) -> Result<Vec<Tid>> {
        let (low, high) = entry_bounds(Bound::Included(key), Bound::Included(key));
        debug_assert!(matches!(&low, Bound::Included(low) if low == key));
        let mut roots = Vec::new();
        for item in self.primary.range(
            low.as_ref().map(Vec::as_slice),
            high.as_ref().map(Vec::as_slice),
        ) {
            let (entry, _) = item?;
            if let Some((entry_key, tid)) = split(&entry) {
                if entry_key == key {
                    roots.push(tid);
                }
            }
        }
        Ok(roots)
    }

    /// The version of the row with primary key `key` that `txn` sees, with its address.
    pub fn get(&self, txn: &DiskTransaction<'_>, key: &[u8]) -> Result<Option<(Tid, Vec<u8>)>> {
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        // Newest roots first: a cold update's version usually lands at a higher address
        // (the target page, or the file's end), and most snapshots see the newest version;
        // behind a long snapshot a key has many roots (at most one visible, DT3).
        for root in self.roots(key)?.into_iter().rev() {
            if let Some(found) = self.visible_with_key(root, &snapshot, txns, None, key)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The visible version on the chain from `root`, if its key (the primary key, or
    /// secondary index `index`'s) is `key` (DT2).
    fn visible_with_key(
        &self,
        root: Tid,
        snapshot: &Snapshot,
        txns: &DiskTransactions,
        index: Option<usize>,
        key: &[u8],
    ) -> Result<Option<(Tid, Vec<u8>)>> {
        let Some((tid, row)) = self.heap.fetch(root, snapshot, txns)? else {
            return Ok(None);
        };
        let row_key = match index {
            None => self.keys.primary_key(&row)?,
            Some(index) => self.keys.index_key(index, &row)?,
        };
        Ok((row_key == key).then_some((tid, row)))
    }

    /// Inserts a row (PostgreSQL's `heap_insert` and `_bt_doinsert` with its uniqueness
    /// check, DT3, under snapshot isolation: a key another transaction wrote that this one
    /// cannot see is a write conflict, not a wait).
    pub fn insert(&self, txn: &mut DiskTransaction<'_>, row: &[u8]) -> Result<Tid> {
        let key = self.keys.primary_key(row)?;
        let index_keys = (0..self.indexes.len())
            .map(|i| self.keys.index_key(i, row))
            .collect::<Result<Vec<_>>>()?;
        for key in std::iter::once(&key).chain(&index_keys) {
            check_key_size(key)?;
        }
        let xid = txn.xid()?;
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        let _stripe = self.key_locks[stripe(&key)].lock();
        // A key another transaction wrote that the snapshot cannot see (running, or
        // committed after it began) is a conflict, whatever the snapshot sees of it (the
        // in-memory engine's rule: the write meets the row's newest change first); else a
        // key the snapshot sees is a duplicate.
        let (mut written_unseen, mut visible) = (false, false);
        for header in self.key_versions(&key)? {
            visible |= visibility::is_visible(&header, &snapshot, txns, &mut Hints::default())?;
            written_unseen |= visibility::written_since(&header, &snapshot, txns)?;
        }
        if written_unseen {
            return Err(self.conflict());
        }
        if visible {
            return Err(Error::DuplicateKey {
                table: self.name.clone(),
            });
        }
        let tid = self.heap.insert(xid, row)?;
        self.primary.insert(&entry(&key, tid), &[])?;
        for (index, index_key) in self.indexes.iter().zip(&index_keys) {
            index.insert(&entry(index_key, tid), &[])?;
        }
        Ok(tid)
    }

    /// Replaces the row with primary key `key` that `txn` sees by `row` (same primary
    /// key). HOT when no secondary index's key changes and the page has room; else the new
    /// version gets an entry in every index. Returns false if `txn` sees no such row;
    /// fails with a write conflict if another transaction replaced it first.
    pub fn update(&self, txn: &mut DiskTransaction<'_>, key: &[u8], row: &[u8]) -> Result<bool> {
        txn.xid()?;
        let Some((tid, old)) = self.get(txn, key)? else {
            return self.absent(txn, key).map(|()| false);
        };
        self.update_found(txn, key, (tid, &old), row)
    }

    /// [`DiskTable::update`] of the version `txn` found under `key` (its address and
    /// bytes, as [`DiskTable::get`] returned them): for a caller that read the row
    /// already, so it is not looked up twice.
    pub fn update_found(
        &self,
        txn: &mut DiskTransaction<'_>,
        key: &[u8],
        (tid, old): (Tid, &[u8]),
        row: &[u8],
    ) -> Result<bool> {
        if self.keys.primary_key(row)? != key {
            return Err(Error::InvalidSchema {
                reason: format!("an update of {} changes the row's primary key", self.name),
            });
        }
        txn.xid()?;
        let mut index_keys = Vec::with_capacity(self.indexes.len());
        let mut hot_allowed = true;
        for index in 0..self.indexes.len() {
            let new_key = self.keys.index_key(index, row)?;
            hot_allowed &= self.keys.index_key(index, old)? == new_key;
            check_key_size(&new_key)?;
            index_keys.push(new_key);
        }
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        match self.heap.update(tid, row, hot_allowed, &snapshot, txns)? {
            Replaced::Updated { tid, hot: true } => {
                debug_assert!(hot_allowed);
                let _ = tid;
            }
            Replaced::Updated { tid, hot: false } => {
                self.primary.insert(&entry(key, tid), &[])?;
                for (index, index_key) in self.indexes.iter().zip(&index_keys) {
                    index.insert(&entry(index_key, tid), &[])?;
                }
            }
            Replaced::Conflict => return Err(self.conflict()),
            Replaced::Invisible | Replaced::Deleted => return Ok(false),
        }
        Ok(true)
    }

    /// Deletes the row with primary key `key` that `txn` sees; returns it (`None` if there
    /// is none). Fails with a write conflict if another transaction replaced it first.
    pub fn delete(&self, txn: &mut DiskTransaction<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        txn.xid()?;
        let Some((tid, row)) = self.get(txn, key)? else {
            return self.absent(txn, key).map(|()| None);
        };
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        match self.heap.delete(tid, &snapshot, txns)? {
            Replaced::Deleted => Ok(Some(row)),
            Replaced::Conflict => Err(self.conflict()),
            Replaced::Invisible | Replaced::Updated { .. } => Ok(None),
        }
    }

    /// An update or delete found no row `txn` sees under `key`: a write conflict if
    /// another transaction wrote the key and `txn` cannot see that write (it inserted the
    /// row and runs, or committed after `txn` began), as first-updater-wins has it for a
    /// row (the in-memory engine's rule: a write meets the row's newest change whoever
    /// sees it); else nothing to do.
    pub fn absent(&self, txn: &DiskTransaction<'_>, key: &[u8]) -> Result<()> {
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        for header in self.key_versions(key)? {
            if visibility::written_since(&header, &snapshot, txns)? {
                return Err(self.conflict());
            }
        }
        Ok(())
    }

    /// A row's key in each secondary index, in index order.
    pub fn index_keys(&self, row: &[u8]) -> Result<Vec<Vec<u8>>> {
        (0..self.indexes.len())
            .map(|index| self.keys.index_key(index, row))
            .collect()
    }

    /// The rows `txn` sees with primary keys in the range, in key order (descending if
    /// asked), each handed to `each` with its key; `each` returns whether to go on.
    pub fn scan(
        &self,
        txn: &DiskTransaction<'_>,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        descending: bool,
        each: &mut RowVisitor<'_>,
    ) -> Result<()> {
        self.scan_tree(&self.primary, None, txn, low, high, descending, each)
    }

    /// The rows `txn` sees whose secondary index `index` key is in the range, in that
    /// key's order (then by address), each handed to `each` with the index key.
    #[allow(clippy::too_many_arguments)]
    pub fn scan_index(
        &self,
        index: usize,
        txn: &DiskTransaction<'_>,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        descending: bool,
        each: &mut RowVisitor<'_>,
    ) -> Result<()> {
        let tree = self.indexes.get(index).ok_or_else(|| Error::UnknownIndex {
            table: self.name.clone(),
            index: format!("#{index}"),
        })?;
        self.scan_tree(tree, Some(index), txn, low, high, descending, each)
    }

    #[allow(clippy::too_many_arguments)]
    fn scan_tree(
        &self,
        tree: &BTree,
        index: Option<usize>,
        txn: &DiskTransaction<'_>,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        descending: bool,
        each: &mut RowVisitor<'_>,
    ) -> Result<()> {
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        let (tree_low, tree_high) = entry_bounds(low, high);
        let range = if descending {
            tree.range_rev(
                tree_low.as_ref().map(Vec::as_slice),
                tree_high.as_ref().map(Vec::as_slice),
            )
        } else {
            tree.range(
                tree_low.as_ref().map(Vec::as_slice),
                tree_high.as_ref().map(Vec::as_slice),
            )
        };
        for item in range {
            let (entry, _) = item?;
            let Some((key, root)) = split(&entry) else {
                continue;
            };
            match (place(key, low, high), descending) {
                (std::cmp::Ordering::Equal, _) => {}
                (std::cmp::Ordering::Greater, false) | (std::cmp::Ordering::Less, true) => break,
                _ => continue,
            }
            if let Some((_, row)) = self.visible_with_key(root, &snapshot, txns, index, key)? {
                if !each(key, &row)? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Whether the primary index has an entry for `key` (live or not).
    pub fn has_entries(&self, key: &[u8]) -> Result<bool> {
        Ok(!self.roots(key)?.is_empty())
    }

    /// How many versions the primary index's entries for `key` lead to, visible or not.
    pub fn versions_of(&self, key: &[u8]) -> Result<usize> {
        let mut versions = 0;
        for root in self.roots(key)? {
            for (_, _, data) in self.heap.versions(root)? {
                versions += usize::from(self.keys.primary_key(&data)? == key);
            }
        }
        Ok(versions)
    }

    /// Counts versions a transaction's end made dead in this table (for autovacuum's
    /// trigger): at a commit, its updates and deletes here; at an abort, its inserts and
    /// updates.
    pub fn add_dead_tuples(&self, count: u64) {
        self.dead_tuples.fetch_add(count, Ordering::Relaxed);
    }

    /// Versions made dead since the last vacuum (PostgreSQL's `n_dead_tup`).
    pub fn dead_tuples(&self) -> u64 {
        self.dead_tuples.load(Ordering::Relaxed)
    }

    /// Whether autovacuum would vacuum the table now: more dead tuples than
    /// [`AUTOVACUUM_THRESHOLD`] plus [`AUTOVACUUM_SCALE_FACTOR`] of the tuples the last
    /// vacuum left (PostgreSQL's rule, with its defaults).
    pub fn needs_vacuum(&self) -> bool {
        let tuples = self.tuples_after_vacuum.load(Ordering::Relaxed) as f64;
        self.dead_tuples() as f64 > AUTOVACUUM_THRESHOLD as f64 + AUTOVACUUM_SCALE_FACTOR * tuples
    }

    /// SI-CV's "an aborted transaction's own pages are never written" (co-located
    /// placement): once `xid`'s abort returned and before its pages are released, drops
    /// the pages it formatted and alone changed from the pool unwritten
    /// ([`HeapFile::drop_aborted_pages`]), after removing (logged) the entries every index
    /// has for its versions there, so that no entry outlives the tuples it names (DT1,
    /// DT2: an address on a dropped page is taken again by the next tuple placed there).
    /// Returns how many pages it dropped.
    pub fn drop_aborted_pages(&self, xid: u64) -> Result<u64> {
        self.heap.drop_aborted_pages(xid, &mut |roots| {
            for (tid, row) in roots {
                let key = self.keys.primary_key(row)?;
                self.primary.remove(&entry(&key, *tid))?;
                for (index, tree) in self.indexes.iter().enumerate() {
                    tree.remove(&entry(&self.keys.index_key(index, row)?, *tid))?;
                }
            }
            Ok(())
        })
    }

    /// Vacuums the table ([`HeapFile::vacuum`]), removing the index entries of dead lines
    /// from every index by a scan of each (PostgreSQL's `ambulkdelete`).
    pub fn vacuum(&self, txns: &DiskTransactions) -> Result<VacuumStats> {
        let dead_before = self.dead_tuples();
        let stats = self.heap.vacuum(txns, &mut |dead| {
            let dead: HashSet<Tid> = dead.iter().copied().collect();
            for tree in std::iter::once(&self.primary).chain(&self.indexes) {
                let mut doomed = Vec::new();
                for item in tree.range(Bound::Unbounded, Bound::Unbounded) {
                    let (entry, _) = item?;
                    if split(&entry).is_some_and(|(_, tid)| dead.contains(&tid)) {
                        doomed.push(entry);
                    }
                }
                for entry in doomed {
                    tree.remove(&entry)?;
                }
            }
            Ok(())
        })?;
        self.tuples_after_vacuum
            .store(stats.tuples_remaining, Ordering::Relaxed);
        // Those counted while it ran may not have been removed: keep them counted.
        let _ = self
            .dead_tuples
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                Some(now - dead_before.min(now))
            });
        Ok(stats)
    }
}

/// Refuses a key whose index entry a B+-tree cannot hold, before anything is written.
fn check_key_size(key: &[u8]) -> Result<()> {
    let limit = super::btree::MAX_BTREE_KEY_BYTES - TID_BYTES;
    if key.len() > limit {
        return Err(Error::EntryTooLarge {
            what: "an index key of a disk table",
            bytes: key.len(),
            limit,
        });
    }
    Ok(())
}

fn stripe(key: &[u8]) -> usize {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    (hasher.finish() as usize) % KEY_LOCK_STRIPES
}
