//! A table of the disk engine in InnoDB's design (the other "vanilla" of DIVA): a
//! clustered B+-tree whose leaf holds the newest version of each row in place, with its
//! creator and a roll pointer into the undo space ([`super::undo`]); an update writes the
//! before-image of the changed span as an undo record and points the row at it, so versions
//! chain newest to oldest through undo; secondary indexes hold the index key (with the
//! primary key) and a delete mark; purge frees undo no snapshot needs (design note:
//! `docs/design/buffer-pool.md`, "InnoDB's design: undo and purge").
//!
//! # Layout
//!
//! The primary tree maps an encoded primary key to `| creator u64 | roll pointer | flags u8 |
//! row |` (flags bit 0: delete-marked). A secondary tree maps the index key (its columns and
//! the primary key, [`RowKeys::index_key`]) to `| mark u8 | primary key |` (mark 1: the
//! newest version of the row no longer has this key).
//!
//! # Invariants
//!
//! - **C1** A row's versions are its record in the primary tree (the newest) followed by
//!   the records its roll pointer chain leads to, newest to oldest; each record restores
//!   the version before from the version after it.
//! - **C2** A row changes only under its key's lock stripe, its undo record appended
//!   first (U2), then the primary record, then the secondary entries. Rollback and purge
//!   take the same stripe and change the secondary entries first, the primary record last,
//!   so a crash between leaves the primary record saying the work is still to do, and
//!   redoing it is harmless (every step is idempotent).
//! - **C3** The newest version of a row has an unmarked entry in every secondary index;
//!   every version a snapshot may need has an entry (marked or not) in every index; a
//!   reader re-checks the key of the version it finds against the entry, so a marked
//!   entry, or one whose key a newer version changed, yields nothing twice.
//! - **C4** (first-updater-wins) A write meets the newest version: its creator must be the
//!   writer, or committed before the writer's snapshot. A creator running, committed
//!   after the snapshot, or aborted and not yet rolled back is a write conflict.
//! - **C5** Rollback of a transaction happens after its abort is in the commit log: a
//!   reader meeting a version whose creator aborted follows its roll pointer, as for any
//!   version it cannot see.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::btree::BTree;
use super::table::{RowKeys, RowVisitor};
use super::transactions::{DiskTransaction, DiskTransactions, Fate, Resolve};
use super::undo::{RollPtr, UndoKind, UndoLane, UndoRecord, UndoSpace, ROLL_PTR_BYTES};
use super::visibility::Snapshot;
use crate::sync::Mutex;
use crate::{Error, Result};

const KEY_LOCK_STRIPES: usize = 256;
/// Bytes of a primary record's header: creator, roll pointer, flags.
pub const RECORD_HEADER_BYTES: usize = 8 + ROLL_PTR_BYTES + 1;
const DELETED: u8 = 1;
const MARKED: u8 = 1;

/// One version of a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// Its creator.
    pub creator: u64,
    /// The record that restores the version before it.
    pub roll: RollPtr,
    /// Whether it is a delete mark (the row deleted).
    pub deleted: bool,
    /// The row's bytes.
    pub row: Vec<u8>,
}

impl Version {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RECORD_HEADER_BYTES + self.row.len());
        out.extend_from_slice(&self.creator.to_le_bytes());
        self.roll.encode(&mut out);
        out.push(if self.deleted { DELETED } else { 0 });
        out.extend_from_slice(&self.row);
        out
    }

    /// Decodes a primary record; never panics (fuzzed through the tree's pages).
    pub fn decode(bytes: &[u8]) -> std::result::Result<Version, String> {
        if bytes.len() < RECORD_HEADER_BYTES {
            return Err(format!("a clustered record of {} bytes", bytes.len()));
        }
        let flags = bytes[8 + ROLL_PTR_BYTES];
        if flags & !DELETED != 0 {
            return Err(format!("a clustered record's flags are {flags:#04x}"));
        }
        Ok(Version {
            creator: u64::from_le_bytes(bytes[..8].try_into().expect("eight bytes")),
            roll: RollPtr::decode(&bytes[8..8 + ROLL_PTR_BYTES]),
            deleted: flags & DELETED != 0,
            row: bytes[RECORD_HEADER_BYTES..].to_vec(),
        })
    }
}

/// A row whose newest version was written by one of the last `HOT_ROW_XIDS` transaction
/// ids counts as hot: its next writer is expected about as soon, and prunes the record a
/// change of it writes now. Behind a held snapshot a short-lane page is freed only when
/// its last record is done, so a record there must die soon: TPC-B's tellers and branches
/// (rewritten every 10 to 100 transactions at scale 10) are hot, its accounts (every
/// million) are not, and a page of a hundred records of rows rewritten within this window
/// empties within a few windows.
const HOT_ROW_XIDS: u64 = 1024;

/// What [`ClusteredTable::prune`] did: the roll pointer the change gives the version it
/// replaces, the records of the old chain it unlinked, and whether the row is hot.
#[derive(Debug, Default)]
struct Pruned {
    roll: RollPtr,
    unlinked: Vec<RollPtr>,
    hot: bool,
}

impl Pruned {
    /// The undo lane of the record of a change of `kind` that pruned as `self` says: an
    /// insert's record is done at commit, and a change of a hot row whose write pruned
    /// its chain is to a row rewritten while snapshots live, whose next writer (soon)
    /// prunes this record too; any other may hold the version an old snapshot reads, or
    /// wait long for the next writer, until the snapshot ends.
    fn lane(&self, kind: UndoKind) -> UndoLane {
        if kind == UndoKind::Insert || (self.hot && !self.unlinked.is_empty()) {
            UndoLane::Short
        } else {
            UndoLane::Long
        }
    }
}

/// A committed version a prune walked past: the record that restores it, whether a
/// snapshot needs it, and whether that record holds its whole row.
struct Walked {
    record: RollPtr,
    version: Version,
    needed: bool,
    whole: bool,
}

fn entry_value(mark: u8, key: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(1 + key.len());
    value.push(mark);
    value.extend_from_slice(key);
    value
}

/// What a clustered table counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusteredStats {
    /// Rows inserted.
    pub inserts: u64,
    /// Rows updated in place.
    pub updates: u64,
    /// Rows delete-marked.
    pub deletes: u64,
    /// Undo records a reader applied to reach the version its snapshot sees.
    pub undo_hops: u64,
    /// Records rolled back.
    pub records_rolled_back: u64,
    /// Delete-marked rows purge removed.
    pub rows_purged: u64,
    /// Marked secondary entries purge (or eager pruning) removed.
    pub entries_purged: u64,
    /// Old versions eager pruning unlinked from their rows' undo chains (no snapshot,
    /// running or future, sees them).
    pub versions_pruned: u64,
}

/// A disk table in InnoDB's design.
pub struct ClusteredTable {
    name: String,
    position: u32,
    primary: BTree,
    indexes: Vec<BTree>,
    keys: Box<dyn RowKeys>,
    undo: Arc<UndoSpace>,
    key_locks: Box<[Mutex<()>]>,
    /// Steam's eager pruning of undo chains at each change (else purge alone).
    eager: bool,
    inserts: AtomicU64,
    updates: AtomicU64,
    deletes: AtomicU64,
    undo_hops: AtomicU64,
    records_rolled_back: AtomicU64,
    rows_purged: AtomicU64,
    entries_purged: AtomicU64,
    versions_pruned: AtomicU64,
}

impl std::fmt::Debug for ClusteredTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusteredTable")
            .field("name", &self.name)
            .field("indexes", &self.indexes.len())
            .finish_non_exhaustive()
    }
}

/// Whether `snapshot` sees versions created by `creator`.
fn sees(creator: u64, snapshot: &Snapshot, txns: &dyn Resolve) -> Result<bool> {
    if snapshot.xid != 0 && creator == snapshot.xid {
        return Ok(true);
    }
    Ok(match txns.resolve(creator, snapshot.start)? {
        Fate::Committed { ts, .. } => ts < snapshot.start,
        Fate::Running | Fate::Aborted => false,
    })
}

impl ClusteredTable {
    /// A table over its trees (opened by the caller, after redo) and the undo space.
    pub fn new(
        name: impl Into<String>,
        position: u32,
        primary: BTree,
        indexes: Vec<BTree>,
        keys: Box<dyn RowKeys>,
        undo: Arc<UndoSpace>,
    ) -> Self {
        ClusteredTable {
            name: name.into(),
            position,
            primary,
            indexes,
            keys,
            undo,
            key_locks: (0..KEY_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            eager: false,
            inserts: AtomicU64::new(0),
            updates: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            undo_hops: AtomicU64::new(0),
            records_rolled_back: AtomicU64::new(0),
            rows_purged: AtomicU64::new(0),
            entries_purged: AtomicU64::new(0),
            versions_pruned: AtomicU64::new(0),
        }
    }

    /// The table with Steam's eager pruning of undo chains ([`ClusteredTable::prune`]).
    pub fn with_eager_pruning(mut self, eager: bool) -> Self {
        self.eager = eager;
        self
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The clustered (primary) tree.
    pub fn primary_index(&self) -> &BTree {
        &self.primary
    }

    /// Secondary index `index`.
    pub fn index(&self, index: usize) -> Option<&BTree> {
        self.indexes.get(index)
    }

    /// Pages of the table's trees.
    pub fn pages(&self) -> Result<u64> {
        BTree::pages_of(std::iter::once(&self.primary).chain(&self.indexes))
    }

    /// Pages of the secondary indexes.
    pub fn index_pages(&self) -> Result<u64> {
        BTree::pages_of(&self.indexes)
    }

    /// What it counted.
    pub fn stats(&self) -> ClusteredStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClusteredStats {
            inserts: get(&self.inserts),
            updates: get(&self.updates),
            deletes: get(&self.deletes),
            undo_hops: get(&self.undo_hops),
            records_rolled_back: get(&self.records_rolled_back),
            rows_purged: get(&self.rows_purged),
            entries_purged: get(&self.entries_purged),
            versions_pruned: get(&self.versions_pruned),
        }
    }

    fn conflict(&self) -> Error {
        Error::WriteConflict {
            table: self.name.clone(),
        }
    }

    fn corrupt(&self, reason: String) -> Error {
        Error::Corruption {
            file: format!("the clustered index of table {}", self.name),
            offset: 0,
            reason,
        }
    }

    /// The lock stripe of `key` (C2).
    fn stripe(&self, key: &[u8]) -> &Mutex<()> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        &self.key_locks[(hasher.finish() as usize) % KEY_LOCK_STRIPES]
    }

    /// The newest version of the row under `key`, if the tree has a record.
    fn newest(&self, key: &[u8]) -> Result<Option<Version>> {
        match self.primary.get(key)? {
            Some(bytes) => Version::decode(&bytes)
                .map(Some)
                .map_err(|r| self.corrupt(r)),
            None => Ok(None),
        }
    }

    /// The version before `after`, through its roll pointer: `Ok(None)` if the record's
    /// page was given to another owner (U3: read the row again).
    fn older(&self, key: &[u8], after: &Version) -> Result<Option<Version>> {
        Ok(self.older_record(key, after)?.map(|(version, _)| version))
    }

    /// [`ClusteredTable::older`], and whether the record is a merged one holding the
    /// version's whole row (restores it from any version after, and marks all its keys,
    /// so a prune may keep it in the chain over pruned versions).
    fn older_record(&self, key: &[u8], after: &Version) -> Result<Option<(Version, bool)>> {
        let Some((_, record)) = self.undo.read(after.roll)? else {
            return Ok(None);
        };
        if record.table != self.position || record.key != key || record.kind == UndoKind::Insert {
            return Err(self.corrupt(format!(
                "a roll pointer of a row leads to an undo record of another row ({:?})",
                record.kind
            )));
        }
        let row = record
            .restore(&after.row)
            .ok_or_else(|| self.corrupt("an undo record's delta does not fit its row".into()))?;
        // Only a whole merged record marks every key of its version: an update's record
        // marks the keys its change dropped, a duty its successors' records share.
        let whole = record.whole;
        let version = Version {
            creator: record.prev_creator,
            roll: record.prev_roll,
            deleted: record.prev_deleted,
            row,
        };
        Ok(Some((version, whole)))
    }

    /// The version of the row under `key` that `snapshot` sees, starting from `newest`
    /// (read again from the tree if a record of its chain was freed meanwhile); `None` if
    /// it sees none or a delete.
    fn visible_from(
        &self,
        key: &[u8],
        mut newest: Option<Version>,
        snapshot: &Snapshot,
        txns: &dyn Resolve,
    ) -> Result<Option<Vec<u8>>> {
        'read: loop {
            let Some(mut version) = newest.take() else {
                return Ok(None);
            };
            loop {
                if sees(version.creator, snapshot, txns)? {
                    return Ok((!version.deleted).then_some(version.row));
                }
                if version.roll.is_none() {
                    return Ok(None);
                }
                self.undo_hops.fetch_add(1, Ordering::Relaxed);
                match self.older(key, &version)? {
                    Some(older) => version = older,
                    None => {
                        newest = self.newest(key)?;
                        continue 'read;
                    }
                }
            }
        }
    }

    /// The version of the row with primary key `key` that `txn` sees.
    pub fn get(&self, txn: &DiskTransaction<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let newest = self.newest(key)?;
        self.visible_from(key, newest, &txn.snapshot(), txn.transactions())
    }

    /// Whether the tree has a record for `key` (visible or not).
    pub fn has_entries(&self, key: &[u8]) -> Result<bool> {
        Ok(self.primary.get(key)?.is_some())
    }

    /// How many versions the row under `key` has (its record and its undo chain).
    /// A pointer into a log purge freed ends the count: the versions past it are gone.
    pub fn versions_of(&self, key: &[u8]) -> Result<usize> {
        let Some(mut version) = self.newest(key)? else {
            return Ok(0);
        };
        let mut versions = 1;
        while !version.roll.is_none() {
            match self.older(key, &version)? {
                Some(older) => {
                    version = older;
                    versions += 1;
                }
                None => break,
            }
        }
        Ok(versions)
    }

    /// C4: whether a write by `snapshot`'s transaction may replace `newest`.
    fn check_writable(
        &self,
        newest: &Version,
        snapshot: &Snapshot,
        txns: &DiskTransactions,
    ) -> Result<()> {
        if newest.creator == snapshot.xid {
            return Ok(());
        }
        match txns.resolve(newest.creator, snapshot.start)? {
            Fate::Committed { ts, .. } if ts < snapshot.start => Ok(()),
            _ => Err(self.conflict()),
        }
    }

    /// Refuses a row whose record or entries a tree cannot hold, before anything is
    /// written.
    fn check_sizes(&self, key: &[u8], row: &[u8], index_keys: &[Vec<u8>]) -> Result<()> {
        let record = key.len() + RECORD_HEADER_BYTES + row.len();
        if key.len() > super::MAX_BTREE_KEY_BYTES || record > super::MAX_BTREE_ENTRY_BYTES {
            return Err(Error::EntryTooLarge {
                what: "a row of a clustered disk table (key and record in a B+-tree leaf)",
                bytes: record,
                limit: super::MAX_BTREE_ENTRY_BYTES,
            });
        }
        for index_key in index_keys {
            let entry = index_key.len() + 1 + key.len();
            if index_key.len() > super::MAX_BTREE_KEY_BYTES || entry > super::MAX_BTREE_ENTRY_BYTES
            {
                return Err(Error::EntryTooLarge {
                    what: "an index entry of a clustered disk table",
                    bytes: entry,
                    limit: super::MAX_BTREE_ENTRY_BYTES,
                });
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

    /// Puts an unmarked entry for `index_key` in index `index`; returns whether it is new.
    fn add_entry(&self, index: usize, index_key: &[u8], key: &[u8]) -> Result<bool> {
        let before = self.indexes[index].insert(index_key, &entry_value(0, key))?;
        Ok(before.is_none())
    }

    /// Sets the mark of an existing entry (no entry: nothing to do, as redone).
    fn set_mark(&self, index: usize, index_key: &[u8], key: &[u8], mark: u8) -> Result<()> {
        let tree = &self.indexes[index];
        if let Some(value) = tree.get(index_key)? {
            if value.first() != Some(&mark) {
                tree.insert(index_key, &entry_value(mark, key))?;
            }
        }
        Ok(())
    }

    /// Which new entries would be fresh (bit `i`: index `i` has no entry for the key yet).
    fn fresh_bits(&self, keys: &[(usize, &Vec<u8>)]) -> Result<u64> {
        let mut fresh = 0u64;
        for &(index, index_key) in keys {
            if self.indexes[index].get(index_key)?.is_none() {
                fresh |= 1 << index;
            }
        }
        Ok(fresh)
    }

    /// Inserts a row: a new record, or one over the delete-marked newest version of its
    /// key (an update in InnoDB's terms). A key another transaction wrote that this one
    /// cannot see is a write conflict (C4); one it sees is a duplicate.
    pub fn insert(&self, txn: &mut DiskTransaction<'_>, row: &[u8]) -> Result<()> {
        let key = self.keys.primary_key(row)?;
        let new_keys = self.index_keys(row)?;
        self.check_sizes(&key, row, &new_keys)?;
        let xid = txn.xid()?;
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        let _stripe = self.stripe(&key).lock();
        let newest = self.newest(&key)?;
        let all: Vec<(usize, &Vec<u8>)> = new_keys.iter().enumerate().collect();
        let mut pruned = Pruned::default();
        let record = match &newest {
            None => UndoRecord {
                kind: UndoKind::Insert,
                table: self.position,
                key: key.clone(),
                prev_creator: 0,
                prev_roll: RollPtr::NONE,
                prev_deleted: false,
                fresh: self.fresh_bits(&all)?,
                prefix: 0,
                suffix: 0,
                middle: Vec::new(),
                marked: Vec::new(),
                whole: false,
            },
            Some(newest) => {
                self.check_writable(newest, &snapshot, txns)?;
                if !newest.deleted {
                    return Err(Error::DuplicateKey {
                        table: self.name.clone(),
                    });
                }
                pruned = self.prune(xid, &key, newest, &new_keys, txns)?;
                let (prefix, suffix, middle) = UndoRecord::delta(&newest.row, row);
                UndoRecord {
                    kind: UndoKind::Update,
                    table: self.position,
                    key: key.clone(),
                    prev_creator: newest.creator,
                    prev_roll: pruned.roll,
                    prev_deleted: true,
                    fresh: self.fresh_bits(&all)?,
                    prefix,
                    suffix,
                    middle,
                    // The deleted version's entries were marked by its delete.
                    marked: Vec::new(),
                    whole: false,
                }
            }
        };
        let roll = self.undo.append(xid, &record, pruned.lane(record.kind))?;
        // An insert has no older version a reader could need: its record only rolls back.
        let roll = if record.kind == UndoKind::Insert {
            RollPtr::NONE
        } else {
            roll
        };
        let version = Version {
            creator: xid,
            roll,
            deleted: false,
            row: row.to_vec(),
        };
        self.primary.insert(&key, &version.encode())?;
        for (index, index_key) in new_keys.iter().enumerate() {
            self.add_entry(index, index_key, &key)?;
        }
        self.finish_pruning(pruned)?;
        self.inserts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Replaces the row under `key` that `txn` sees by `row` (same primary key), in place.
    /// Returns false if `txn` sees no such row; a write conflict if another transaction
    /// wrote it that `txn` cannot see (C4).
    pub fn update(&self, txn: &mut DiskTransaction<'_>, key: &[u8], row: &[u8]) -> Result<bool> {
        if self.keys.primary_key(row)? != key {
            return Err(Error::InvalidSchema {
                reason: format!("an update of {} changes the row's primary key", self.name),
            });
        }
        let new_keys = self.index_keys(row)?;
        self.check_sizes(key, row, &new_keys)?;
        let xid = txn.xid()?;
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        let _stripe = self.stripe(key).lock();
        let Some(newest) = self.newest(key)? else {
            return Ok(false);
        };
        self.check_writable(&newest, &snapshot, txns)?;
        if newest.deleted {
            return Ok(false);
        }
        let old_keys = self.index_keys(&newest.row)?;
        let changed: Vec<(usize, &Vec<u8>)> = new_keys
            .iter()
            .enumerate()
            .filter(|(index, new_key)| old_keys[*index] != **new_key)
            .collect();
        let (prefix, suffix, middle) = UndoRecord::delta(&newest.row, row);
        let pruned = self.prune(xid, key, &newest, &new_keys, txns)?;
        let record = UndoRecord {
            kind: UndoKind::Update,
            table: self.position,
            key: key.to_vec(),
            prev_creator: newest.creator,
            prev_roll: pruned.roll,
            prev_deleted: false,
            fresh: self.fresh_bits(&changed)?,
            prefix,
            suffix,
            middle,
            marked: changed
                .iter()
                .map(|&(index, _)| (index as u16, old_keys[index].clone()))
                .collect(),
            whole: false,
        };
        let roll = self.undo.append(xid, &record, pruned.lane(record.kind))?;
        let version = Version {
            creator: xid,
            roll,
            deleted: false,
            row: row.to_vec(),
        };
        self.primary.insert(key, &version.encode())?;
        for &(index, new_key) in &changed {
            self.set_mark(index, &old_keys[index], key, MARKED)?;
            self.add_entry(index, new_key, key)?;
        }
        self.finish_pruning(pruned)?;
        self.updates.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Delete-marks the row under `key` that `txn` sees; returns it (`None` if there is
    /// none). A write conflict as [`ClusteredTable::update`].
    pub fn delete(&self, txn: &mut DiskTransaction<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let xid = txn.xid()?;
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        let _stripe = self.stripe(key).lock();
        let Some(newest) = self.newest(key)? else {
            return Ok(None);
        };
        self.check_writable(&newest, &snapshot, txns)?;
        if newest.deleted {
            return Ok(None);
        }
        let keys = self.index_keys(&newest.row)?;
        let pruned = self.prune(xid, key, &newest, &[], txns)?;
        let record = UndoRecord {
            kind: UndoKind::Delete,
            table: self.position,
            key: key.to_vec(),
            prev_creator: newest.creator,
            prev_roll: pruned.roll,
            prev_deleted: false,
            fresh: 0,
            prefix: newest.row.len() as u32,
            suffix: 0,
            middle: Vec::new(),
            marked: keys
                .iter()
                .enumerate()
                .map(|(index, k)| (index as u16, k.clone()))
                .collect(),
            whole: false,
        };
        let roll = self.undo.append(xid, &record, pruned.lane(record.kind))?;
        let version = Version {
            creator: xid,
            roll,
            deleted: true,
            row: newest.row.clone(),
        };
        self.primary.insert(key, &version.encode())?;
        for (index, index_key) in keys.iter().enumerate() {
            self.set_mark(index, index_key, key, MARKED)?;
        }
        self.finish_pruning(pruned)?;
        self.deletes.fetch_add(1, Ordering::Relaxed);
        Ok(Some(newest.row))
    }

    /// An update or delete found no row `txn` sees under `key`: a write conflict if the
    /// newest version is another's that `txn` cannot see (C4), else nothing to do.
    pub fn absent(&self, txn: &DiskTransaction<'_>, key: &[u8]) -> Result<()> {
        match self.newest(key)? {
            Some(newest) => self.check_writable(&newest, &txn.snapshot(), txn.transactions()),
            None => Ok(()),
        }
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
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        let range = if descending {
            self.primary.range_rev(low, high)
        } else {
            self.primary.range(low, high)
        };
        for item in range {
            let (key, bytes) = item?;
            let newest = Version::decode(&bytes).map_err(|r| self.corrupt(r))?;
            if let Some(row) = self.visible_from(&key, Some(newest), &snapshot, txns)? {
                if !each(&key, &row)? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The rows `txn` sees whose secondary index `index` key is in the range, in that
    /// key's order, each handed to `each` with the index key (C3: an entry yields the row
    /// only if the version `txn` sees has the entry's key).
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
        let (snapshot, txns) = (txn.snapshot(), txn.transactions());
        let range = if descending {
            tree.range_rev(low, high)
        } else {
            tree.range(low, high)
        };
        for item in range {
            let (index_key, value) = item?;
            let Some(key) = value.get(1..) else {
                return Err(self.corrupt("a secondary entry with no primary key".into()));
            };
            let newest = self.newest(key)?;
            if let Some(row) = self.visible_from(key, newest, &snapshot, txns)? {
                if self.keys.index_key(index, &row)? == index_key && !each(&index_key, &row)? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Undoes one record of aborted transaction `xid` (C2, C5): only if the row still
    /// shows the change (its newest version is `xid`'s, pointing at this record; for an
    /// insert, `xid`'s with no older version), so redoing a rollback a crash cut short
    /// is harmless. An entry the change found marked and unmarked is marked again only if
    /// a version a snapshot may need (below `horizon` or after) still has its key; else
    /// the purge that would have removed it has run, and it is removed now
    /// (`regression_a_rolled_back_update_leaves_no_marked_entry_behind`).
    pub fn roll_back(
        &self,
        xid: u64,
        ptr: RollPtr,
        record: &UndoRecord,
        horizon: u64,
        txns: &dyn Resolve,
    ) -> Result<()> {
        let key = &record.key;
        let _stripe = self.stripe(key).lock();
        let Some(newest) = self.newest(key)? else {
            return Ok(());
        };
        if record.kind == UndoKind::Merged {
            return Ok(());
        }
        let expected_roll = if record.kind == UndoKind::Insert {
            RollPtr::NONE
        } else {
            ptr
        };
        if newest.creator != xid || newest.roll != expected_roll {
            return Ok(());
        }
        let new_keys = self.index_keys(&newest.row)?;
        match record.kind {
            UndoKind::Insert => {
                // No version of the row remains: no entry of it is needed.
                for (index, index_key) in new_keys.iter().enumerate() {
                    self.indexes[index].remove(index_key)?;
                }
                self.primary.remove(key)?;
            }
            UndoKind::Merged => unreachable!("never rolled back"),
            UndoKind::Update | UndoKind::Delete => {
                let old = record.restore(&newest.row).ok_or_else(|| {
                    self.corrupt("an undo record's delta does not fit its row".into())
                })?;
                let old_keys = self.index_keys(&old)?;
                let restored = Version {
                    creator: record.prev_creator,
                    roll: record.prev_roll,
                    deleted: record.prev_deleted,
                    row: old,
                };
                // A delete every snapshot sees comes back as the row's newest version: the
                // purge of its log may have run while this change covered it, so the row
                // is purged now, entries first
                // (`regression_a_rollback_that_revives_a_purged_delete_removes_the_row`).
                let settled_delete = restored.deleted
                    && matches!(
                        txns.resolve(restored.creator, u64::MAX)?,
                        Fate::Committed { ts, .. } if ts < horizon
                    );
                if settled_delete {
                    for (index, tree) in self.indexes.iter().enumerate() {
                        for index_key in [&new_keys[index], &old_keys[index]] {
                            if let Some(value) = tree.get(index_key)? {
                                if value.get(1..) == Some(key.as_slice()) {
                                    tree.remove(index_key)?;
                                }
                            }
                        }
                    }
                    self.primary.remove(key)?;
                    self.rows_purged.fetch_add(1, Ordering::Relaxed);
                    self.records_rolled_back.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                let needed = if record.kind == UndoKind::Update {
                    self.needed_keys(key, restored.clone(), horizon, txns)?
                } else {
                    None
                };
                for index in 0..self.indexes.len() {
                    let (old_key, new_key) = (&old_keys[index], &new_keys[index]);
                    if record.kind == UndoKind::Delete {
                        // The delete marked the row's entries; the row is back.
                        self.set_mark(index, new_key, key, 0)?;
                    } else if record.prev_deleted || old_key != new_key {
                        let fresh = record.fresh & (1 << index) != 0;
                        let still_needed = match &needed {
                            Some(needed) => needed[index].iter().any(|k| k == new_key),
                            // Unknown (a record freed meanwhile): keep it, marked.
                            None => true,
                        };
                        if fresh || !still_needed {
                            self.indexes[index].remove(new_key)?;
                        } else {
                            self.set_mark(index, new_key, key, MARKED)?;
                        }
                        if !record.prev_deleted {
                            self.set_mark(index, old_key, key, 0)?;
                        }
                    }
                }
                self.primary.insert(key, &restored.encode())?;
            }
        }
        self.records_rolled_back.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Purges one record of committed transaction `xid`, committed below `horizon` (every
    /// snapshot sees its version and the versions after): removes the entries it marked
    /// that no version a snapshot may need has any more, and, for a delete still the
    /// row's newest version, the row (C2: entries first).
    pub fn purge(
        &self,
        xid: u64,
        record: &UndoRecord,
        horizon: u64,
        txns: &dyn Resolve,
    ) -> Result<()> {
        if record.kind == UndoKind::Insert {
            return Ok(());
        }
        let key = &record.key;
        let _stripe = self.stripe(key).lock();
        let newest = self.newest(key)?;
        let remove_row = matches!(&newest, Some(v) if v.creator == xid && v.deleted && record.kind == UndoKind::Delete);
        let needed = match &newest {
            Some(newest) if !remove_row => {
                match self.needed_keys(key, newest.clone(), horizon, txns)? {
                    Some(needed) => needed,
                    None => return Ok(()),
                }
            }
            _ => vec![Vec::new(); self.indexes.len()],
        };
        for (index, index_key) in &record.marked {
            let index = *index as usize;
            let Some(tree) = self.indexes.get(index) else {
                return Err(self.corrupt(format!("an undo record names index {index}")));
            };
            if needed[index].iter().any(|k| k == index_key) {
                continue;
            }
            if let Some(value) = tree.get(index_key)? {
                if value.first() == Some(&MARKED) && value.get(1..) == Some(key.as_slice()) {
                    tree.remove(index_key)?;
                    self.entries_purged.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if remove_row {
            self.primary.remove(key)?;
            self.rows_purged.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Steam's rule on the undo chain of the row under `key`, whose newest version `newest`
    /// a change by `xid` (whose version will have `new_keys`) is about to replace: of the
    /// committed versions older than `newest`, keeps only those some snapshot, running or
    /// future, sees (a snapshot starting between a version's commit and its successor's),
    /// down to the first committed below the oldest snapshot (the records past it are
    /// purge's; if that is `newest`, the change's record ends the chain). Writes nothing
    /// unless it prunes a version. The kept versions then chain anew: the oldest of them
    /// whose records hold their whole rows, with no pruned version between, stay linked
    /// as they are (merged records an earlier prune wrote); the others are written again,
    /// whole, as merged records in `xid`'s log, chained oldest last. A version a snapshot
    /// keeps is thus written again once while the snapshot lives, however often its row
    /// changes (again only if an older kept version below it is dropped, or it is too
    /// large to merge whole). Returns the roll pointer the change's record gives `newest` (its
    /// own, if nothing is pruned). The records of the versions dropped or written again
    /// are marked dead (their pages freed once all are, U4), and secondary entries only
    /// pruned versions had are removed (their purge's work, done now). Runs at a
    /// transaction's first change of a row (`newest` committed), under the row's stripe;
    /// does nothing if a record it reads was freed meanwhile.
    fn prune(
        &self,
        xid: u64,
        key: &[u8],
        newest: &Version,
        new_keys: &[Vec<u8>],
        txns: &DiskTransactions,
    ) -> Result<Pruned> {
        let unchanged = Pruned {
            roll: newest.roll,
            unlinked: Vec::new(),
            hot: false,
        };
        if !self.eager || newest.creator == xid || newest.roll.is_none() {
            return Ok(unchanged);
        }
        let committed_at = |creator: u64| -> Result<Option<u64>> {
            Ok(match txns.resolve(creator, u64::MAX)? {
                Fate::Committed { ts, .. } => Some(ts),
                _ => None,
            })
        };
        let Some(newest_ts) = committed_at(newest.creator)? else {
            return Ok(unchanged);
        };
        let readers = txns.readers();
        let oldest = readers.starts.first().copied().unwrap_or(readers.horizon);
        // The committed versions after `newest`, each with the record that restores it,
        // down to the first committed below the oldest snapshot.
        let mut walked: Vec<Walked> = Vec::new();
        let (mut after, mut after_ts) = (newest.clone(), newest_ts);
        let mut cut = newest_ts < oldest;
        while !cut && !after.roll.is_none() {
            let Some((older, whole)) = self.older_record(key, &after)? else {
                return Ok(unchanged);
            };
            let Some(ts) = committed_at(older.creator)? else {
                return Ok(unchanged);
            };
            walked.push(Walked {
                record: after.roll,
                version: older.clone(),
                needed: readers.any_in(ts, after_ts),
                whole,
            });
            cut = ts < oldest;
            (after, after_ts) = (older, ts);
        }
        if walked.is_empty() {
            // Every snapshot sees `newest`: nothing older is needed, and the change's
            // record ends the chain (the records past it are purge's), at no cost.
            return Ok(Pruned {
                roll: RollPtr::NONE,
                ..unchanged
            });
        }
        if walked.iter().all(|w| w.needed) {
            return Ok(unchanged);
        }
        let staying = walked
            .iter()
            .rev()
            .take_while(|w| w.needed && w.whole)
            .count();
        let (relinked, staying) = walked.split_at(walked.len() - staying);
        debug_assert!(relinked.iter().any(|w| !w.needed), "a prune prunes");
        // The kept versions written again, oldest first, each over the next newer kept.
        let rewritten: Vec<&Version> = relinked
            .iter()
            .filter(|w| w.needed)
            .map(|w| &w.version)
            .collect();
        let mut prev_roll = staying.first().map_or(RollPtr::NONE, |w| w.record);
        for (at, version) in rewritten.iter().enumerate().rev() {
            let newer = if at == 0 { newest } else { rewritten[at - 1] };
            let record = self.merged_record(key, version, newer, prev_roll)?;
            prev_roll = self.undo.append_merged(xid, &record)?;
        }
        // Entries only pruned versions had: theirs to purge, now.
        let mut keep: Vec<Vec<Vec<u8>>> = vec![Vec::new(); self.indexes.len()];
        let kept = walked.iter().filter(|w| w.needed).map(|w| &w.version);
        for version in std::iter::once(newest).chain(kept).filter(|v| !v.deleted) {
            for (index, index_key) in self.index_keys(&version.row)?.into_iter().enumerate() {
                keep[index].push(index_key);
            }
        }
        for (index, index_key) in new_keys.iter().enumerate() {
            keep[index].push(index_key.clone());
        }
        for pruned in relinked.iter().filter(|w| !w.needed && !w.version.deleted) {
            for (index, index_key) in self
                .index_keys(&pruned.version.row)?
                .into_iter()
                .enumerate()
            {
                if keep[index].contains(&index_key) {
                    continue;
                }
                let tree = &self.indexes[index];
                if let Some(value) = tree.get(&index_key)? {
                    if value.first() == Some(&MARKED) && value.get(1..) == Some(key) {
                        tree.remove(&index_key)?;
                        self.entries_purged.fetch_add(1, Ordering::Relaxed);
                    }
                }
                keep[index].push(index_key);
            }
        }
        let pruned = relinked.iter().filter(|w| !w.needed).count() as u64;
        self.versions_pruned.fetch_add(pruned, Ordering::Relaxed);
        Ok(Pruned {
            roll: prev_roll,
            unlinked: relinked.iter().map(|w| w.record).collect(),
            hot: xid.saturating_sub(newest.creator) < HOT_ROW_XIDS,
        })
    }

    /// The merged record that restores kept `version` (chained to `prev_roll`) from
    /// `newer`: whole (its row, and all its index keys as purge duties: purge removes
    /// only the entries no version a snapshot may need has), so a later prune may leave it
    /// linked; or, if that would not fit an undo record, a delta of `newer` carrying the
    /// keys `newer` lacks, which a later prune writes again
    /// (`regression_a_wide_row_s_held_version_too_large_whole_is_merged_as_a_delta`).
    fn merged_record(
        &self,
        key: &[u8],
        version: &Version,
        newer: &Version,
        prev_roll: RollPtr,
    ) -> Result<UndoRecord> {
        let keys = if version.deleted {
            Vec::new()
        } else {
            self.index_keys(&version.row)?
        };
        let whole = UndoRecord {
            kind: UndoKind::Merged,
            table: self.position,
            key: key.to_vec(),
            prev_creator: version.creator,
            prev_roll,
            prev_deleted: version.deleted,
            fresh: 0,
            prefix: 0,
            suffix: 0,
            middle: version.row.clone(),
            marked: keys
                .iter()
                .enumerate()
                .map(|(index, k)| (index as u16, k.clone()))
                .collect(),
            whole: true,
        };
        if whole.encode().len() <= super::undo::MAX_UNDO_RECORD_BYTES {
            return Ok(whole);
        }
        let newer_keys = if newer.deleted {
            Vec::new()
        } else {
            self.index_keys(&newer.row)?
        };
        let (prefix, suffix, middle) = UndoRecord::delta(&version.row, &newer.row);
        Ok(UndoRecord {
            prefix,
            suffix,
            middle,
            marked: keys
                .into_iter()
                .enumerate()
                .filter(|(index, k)| newer_keys.get(*index) != Some(k))
                .map(|(index, k)| (index as u16, k))
                .collect(),
            whole: false,
            ..whole
        })
    }

    /// Marks dead the records a prune unlinked, once the row's new version (written
    /// after the prune) no longer leads to them.
    fn finish_pruning(&self, pruned: Pruned) -> Result<()> {
        for ptr in pruned.unlinked {
            self.undo.mark_dead(ptr)?;
        }
        Ok(())
    }

    /// Each index's keys of the versions of a row some snapshot may still need: the newest
    /// ones down to the first committed below `horizon`, which every snapshot sees.
    fn needed_keys(
        &self,
        key: &[u8],
        newest: Version,
        horizon: u64,
        txns: &dyn Resolve,
    ) -> Result<Option<Vec<Vec<Vec<u8>>>>> {
        let mut needed = vec![Vec::new(); self.indexes.len()];
        let mut version = newest;
        loop {
            if !version.deleted {
                for (index, index_key) in self.index_keys(&version.row)?.into_iter().enumerate() {
                    needed[index].push(index_key);
                }
            }
            let settled = matches!(
                txns.resolve(version.creator, u64::MAX)?,
                Fate::Committed { ts, .. } if ts < horizon
            );
            if settled || version.roll.is_none() {
                return Ok(Some(needed));
            }
            match self.older(key, &version)? {
                Some(older) => version = older,
                // Freed meanwhile: keep every entry this time (a later purge of a newer
                // change of the row removes what is left).
                None => return Ok(None),
            }
        }
    }
}
