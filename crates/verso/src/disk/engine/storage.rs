//! A disk table's storage, in the design the database was created with: PostgreSQL's heap
//! and indexes ([`DiskTable`]) or InnoDB's clustered tree and undo ([`ClusteredTable`]).
//! The transaction layer (`txn.rs`) drives both through this one face.

use std::ops::Bound;

use super::super::btree::BTree;
use super::super::clustered::ClusteredTable;
use super::super::heap_file::{HeapFile, Tid};
use super::super::table::{DiskTable, RowVisitor};
use super::super::transactions::{DiskTransaction, DiskTransactions};
use crate::Result;

/// Which version organization the disk engine's tables use (`Options::disk_storage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DiskStorage {
    /// PostgreSQL's: whole-tuple versions in heap files, oldest to newest, HOT, vacuum.
    #[default]
    Heap,
    /// InnoDB's: the newest version in place in a clustered B+-tree, older ones as undo
    /// records chained newest to oldest, purge.
    Undo,
}

impl DiskStorage {
    /// Every storage, in the order the lab lists them.
    pub const ALL: [DiskStorage; 2] = [DiskStorage::Heap, DiskStorage::Undo];

    /// Its name in designs and on the lab's command line.
    pub fn name(self) -> &'static str {
        match self {
            DiskStorage::Heap => "heap",
            DiskStorage::Undo => "undo",
        }
    }

    /// The storage with this name.
    pub fn from_name(name: &str) -> Option<DiskStorage> {
        DiskStorage::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Where a read found the version it returns, for the update that follows it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Located {
    /// A heap tuple's address.
    Heap(Tid),
    /// The row's record in the clustered tree (its key says where).
    Clustered,
}

/// A table's storage. One per table, never moved: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum TableStorage {
    Heap(DiskTable),
    Clustered(ClusteredTable),
}

impl TableStorage {
    pub(crate) fn heap(&self) -> Option<&HeapFile> {
        match self {
            TableStorage::Heap(table) => Some(table.heap()),
            TableStorage::Clustered(_) => None,
        }
    }

    pub(crate) fn clustered(&self) -> Option<&ClusteredTable> {
        match self {
            TableStorage::Heap(_) => None,
            TableStorage::Clustered(table) => Some(table),
        }
    }

    pub(crate) fn get(
        &self,
        txn: &DiskTransaction<'_>,
        key: &[u8],
    ) -> Result<Option<(Located, Vec<u8>)>> {
        match self {
            TableStorage::Heap(table) => Ok(table
                .get(txn, key)?
                .map(|(tid, row)| (Located::Heap(tid), row))),
            TableStorage::Clustered(table) => {
                Ok(table.get(txn, key)?.map(|row| (Located::Clustered, row)))
            }
        }
    }

    pub(crate) fn insert(&self, txn: &mut DiskTransaction<'_>, row: &[u8]) -> Result<()> {
        match self {
            TableStorage::Heap(table) => table.insert(txn, row).map(drop),
            TableStorage::Clustered(table) => table.insert(txn, row),
        }
    }

    pub(crate) fn update_found(
        &self,
        txn: &mut DiskTransaction<'_>,
        key: &[u8],
        (located, old): (Located, &[u8]),
        row: &[u8],
    ) -> Result<bool> {
        match (self, located) {
            (TableStorage::Heap(table), Located::Heap(tid)) => {
                table.update_found(txn, key, (tid, old), row)
            }
            // The newest version is read again under the key's stripe (C4): the one found
            // is it, or the update is a conflict.
            (TableStorage::Clustered(table), _) => table.update(txn, key, row),
            (TableStorage::Heap(_), Located::Clustered) => {
                unreachable!("a heap's read locates a tuple")
            }
        }
    }

    pub(crate) fn delete(
        &self,
        txn: &mut DiskTransaction<'_>,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        match self {
            TableStorage::Heap(table) => table.delete(txn, key),
            TableStorage::Clustered(table) => table.delete(txn, key),
        }
    }

    pub(crate) fn absent(&self, txn: &DiskTransaction<'_>, key: &[u8]) -> Result<()> {
        match self {
            TableStorage::Heap(table) => table.absent(txn, key),
            TableStorage::Clustered(table) => table.absent(txn, key),
        }
    }

    pub(crate) fn index_keys(&self, row: &[u8]) -> Result<Vec<Vec<u8>>> {
        match self {
            TableStorage::Heap(table) => table.index_keys(row),
            TableStorage::Clustered(table) => table.index_keys(row),
        }
    }

    pub(crate) fn scan(
        &self,
        txn: &DiskTransaction<'_>,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        descending: bool,
        each: &mut RowVisitor<'_>,
    ) -> Result<()> {
        match self {
            TableStorage::Heap(table) => table.scan(txn, low, high, descending, each),
            TableStorage::Clustered(table) => table.scan(txn, low, high, descending, each),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scan_index(
        &self,
        index: usize,
        txn: &DiskTransaction<'_>,
        low: Bound<&[u8]>,
        high: Bound<&[u8]>,
        descending: bool,
        each: &mut RowVisitor<'_>,
    ) -> Result<()> {
        match self {
            TableStorage::Heap(table) => table.scan_index(index, txn, low, high, descending, each),
            TableStorage::Clustered(table) => {
                table.scan_index(index, txn, low, high, descending, each)
            }
        }
    }

    pub(crate) fn has_entries(&self, key: &[u8]) -> Result<bool> {
        match self {
            TableStorage::Heap(table) => table.has_entries(key),
            TableStorage::Clustered(table) => table.has_entries(key),
        }
    }

    pub(crate) fn versions_of(&self, key: &[u8]) -> Result<usize> {
        match self {
            TableStorage::Heap(table) => table.versions_of(key),
            TableStorage::Clustered(table) => table.versions_of(key),
        }
    }

    /// Counts versions a transaction's end made dead (autovacuum's trigger; purge, not a
    /// count, drives InnoDB's design).
    pub(crate) fn add_dead_tuples(&self, count: u64) {
        if let TableStorage::Heap(table) = self {
            table.add_dead_tuples(count);
        }
    }

    pub(crate) fn dead_tuples(&self) -> u64 {
        match self {
            TableStorage::Heap(table) => table.dead_tuples(),
            TableStorage::Clustered(_) => 0,
        }
    }

    pub(crate) fn needs_vacuum(&self) -> bool {
        match self {
            TableStorage::Heap(table) => table.needs_vacuum(),
            TableStorage::Clustered(_) => false,
        }
    }

    /// Drops, unwritten, the heap pages aborted transaction `xid` alone formatted and
    /// changed (SI-CV's co-located placement, [`DiskTable::drop_aborted_pages`]); InnoDB's
    /// design rolls back in place instead.
    pub(crate) fn drop_aborted_pages(&self, xid: u64) -> Result<()> {
        match self {
            TableStorage::Heap(table) => table.drop_aborted_pages(xid).map(drop),
            TableStorage::Clustered(_) => Ok(()),
        }
    }

    /// Vacuums a heap table; InnoDB's design has purge instead (engine-wide).
    pub(crate) fn vacuum(&self, txns: &DiskTransactions) -> Result<()> {
        match self {
            TableStorage::Heap(table) => table.vacuum(txns).map(drop),
            TableStorage::Clustered(_) => Ok(()),
        }
    }

    pub(crate) fn pages(&self) -> Result<u64> {
        match self {
            TableStorage::Heap(table) => table.pages(),
            TableStorage::Clustered(table) => table.pages(),
        }
    }

    pub(crate) fn index_pages(&self) -> Result<u64> {
        match self {
            TableStorage::Heap(table) => table.index_pages(),
            TableStorage::Clustered(table) => table.index_pages(),
        }
    }

    pub(crate) fn primary_index(&self) -> &BTree {
        match self {
            TableStorage::Heap(table) => table.primary_index(),
            TableStorage::Clustered(table) => table.primary_index(),
        }
    }

    pub(crate) fn index(&self, index: usize) -> Option<&BTree> {
        match self {
            TableStorage::Heap(table) => table.index(index),
            TableStorage::Clustered(table) => table.index(index),
        }
    }
}
