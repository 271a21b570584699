//! The building blocks of the disk engine, whose data is larger than memory (design notes:
//! `docs/design/buffer-pool.md`): fixed-size pages ([`page`]) in files behind the file
//! trait ([`crate::fs`]), cached in a [`BufferPool`] of a configured size with pins, page
//! latches, an eviction policy ([`ReplacementPolicy`]), write-back that waits on the log
//! ([`WriteAheadLog`]), and counters of what reached the disk.
//!
//! On these stand PostgreSQL's version storage ([`heap_file`], [`table`]), its
//! transactions ([`transactions`], [`visibility`], [`commit_log`]), where new versions go
//! ([`placement`]: PostgreSQL's, or SI-CV's co-located pages) and the engine behind
//! [`crate::Database`] that [`crate::Options::disk`] selects.

pub mod btree;
mod buffer_pool;
pub mod clustered;
pub mod commit_log;
pub(crate) mod engine;
pub mod free_space_map;
pub mod heap_file;
pub mod heap_page;
mod injection;
pub mod page;
pub mod page_log;
pub mod placement;
mod replacement;
pub mod table;
pub mod transactions;
pub mod undo;
pub mod visibility;

#[cfg(all(test, loom))]
mod loom_tests;

pub use btree::{BTree, MAX_BTREE_ENTRY_BYTES, MAX_BTREE_KEY_BYTES};
pub use buffer_pool::{
    AbortedTransactions, BufferPool, BufferPoolStats, DirtyCause, PageMut, PageRef, Unlogged,
    WriteAheadLog, MAX_FILES,
};
pub use clustered::{ClusteredStats, ClusteredTable};
pub use commit_log::{CommitLog, TransactionStatus};
pub use engine::DiskStorage;
pub use free_space_map::FreeSpaceMap;
pub use heap_file::{HeapFile, HeapStats, Pruning, Replaced, Tid, VacuumStats};
pub use heap_page::{HeapPage, PrunePlan, TupleHeader, KIND_HEAP_PAGE};
pub use page::{FileNo, Page, PageDefect, PageId, PAGE_SIZE};
pub use page_log::{PageChange, PageLog, PageLogStats, Recovering, RedoStats};
pub use placement::VersionPlacement;
pub use replacement::ReplacementPolicy;
pub use table::{DiskTable, RowKeys};
pub use transactions::{DiskTransaction, DiskTransactions, Fate, Resolve};
pub use undo::{UndoStats, KIND_UNDO_PAGE};
pub use visibility::{Readers, Snapshot};
