//! # Verso
//!
//! An embeddable multi-version (MVCC) transactional storage engine for programs that mix
//! short writes with long-running reads. Old versions are pruned the moment no running
//! transaction can see them (Steam's eager pruning), not when the oldest transaction ends,
//! so a long analytical read does not make writes slower or memory grow without bound.
//!
//! ```
//! use verso::{ColumnType, Database, Isolation, Options, Schema, Value};
//!
//! let db = Database::open(Options::default())?;
//! let accounts = db.create_table(
//!     "accounts",
//!     Schema::new()
//!         .column("id", ColumnType::U64)
//!         .column("owner", ColumnType::Text)
//!         .column("balance", ColumnType::I64)
//!         .primary_key(&["id"])
//!         .index("by_owner", &["owner"]),
//! )?;
//!
//! let mut txn = db.begin(Isolation::Snapshot);
//! txn.insert(accounts, &[Value::U64(1), "ada".into(), Value::I64(100)])?;
//! txn.commit()?;
//!
//! let reader = db.begin(Isolation::Snapshot); // a snapshot taken now
//! let mut writer = db.begin(Isolation::Snapshot);
//! writer.update(accounts, &[Value::U64(1)], &[(2, Value::I64(50))])?;
//! writer.commit()?;
//!
//! // The reader still sees its snapshot; a new transaction sees the update.
//! assert_eq!(reader.get(accounts, &[Value::U64(1)])?.unwrap()[2], Value::I64(100));
//! let fresh = db.begin(Isolation::Snapshot);
//! assert_eq!(fresh.get(accounts, &[Value::U64(1)])?.unwrap()[2], Value::I64(50));
//! # Ok::<(), verso::Error>(())
//! ```
//!
//! Architecture: one engine, generic over four seams (version storage, concurrency
//! control, garbage collection, index pointers); see `ARCHITECTURE.md`.

#![warn(missing_docs)]
// `unsafe` is allowed only where `docs/unsafe.md` lists it, with its invariant.
#![deny(unsafe_code)]

mod cc;
mod db;
mod durability;
mod engine;
mod error;
pub mod fs;
mod gc;
mod index;
mod key;
mod memory_spaces;
mod prefetch;
mod row;
mod schema;
mod stats;
mod sync;
mod ticks;
mod txn;
mod value;
mod version;

pub use db::{
    CommitTicket, ConcurrencyControl, Database, GarbageCollector, IndexPointers, Isolation,
    KeyRange, Options, PlantedBug, TableId, Transaction, VersionRemoval, VersionStorageKind,
    DEFAULT_CHECKPOINT_AFTER_LOG_BYTES, DEFAULT_LOG_SEGMENT_BYTES,
};
pub use durability::{CheckpointReport, Durability, DurabilityStats, RecoveryStats};
pub use error::{Error, Result};
pub use memory_spaces::{
    memory_space_usage, memory_spaces_installed, MemorySpaceUsage, MemorySpaces, CHUNK_BYTES,
    MAX_CLASS_BYTES, MAX_MEMORY_SPACES,
};
pub use row::{NonInline, RowView, ValueRef, NON_INLINE_MIN_BYTES};
pub use schema::{ColumnMask, PrimaryKeyIndex, Schema, MAX_COLUMNS, MAX_VALUE_BYTES};
pub use stats::{chain_bucket, ChainHistogram, Stats, CHAIN_BUCKETS};
pub use txn::slots::MAX_THREADS;
pub use value::{ColumnType, Value};

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
