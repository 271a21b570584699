//! # Verso
//!
//! An embeddable multi-version (MVCC) transactional storage engine for programs that mix
//! short writes with long-running reads. Old versions are pruned the moment no running
//! transaction can see them (Steam's eager pruning), not when the oldest transaction ends,
//! so a long analytical read does not make writes slower or memory grow without bound.
//! (Under [`Isolation::Serializable`] and the serializable protocols, declare it read-only
//! with [`Database::begin_read_only`]: a long transaction that may still write keeps the
//! commit records its own validation will need for as long as it runs.)
//! A database lives in memory, or in a directory ([`Options::path`]) where a redo log,
//! checkpoints and recovery keep every acknowledged commit across a crash.
//!
//! Start with [`Database`] (open one with [`Options`]), [`Schema`] (a table's columns,
//! primary key and secondary indexes), [`Transaction`] (reads and writes at a snapshot),
//! [`Value`] (one column's value) and [`Error`] (what went wrong, and whether to retry).
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
//! txn.insert(accounts, &[Value::U64(2), "bob".into(), Value::I64(20)])?;
//! txn.commit()?;
//!
//! let reader = db.begin(Isolation::Snapshot); // a snapshot taken now
//! // `run` begins, commits, and runs the closure again if the transaction loses a race.
//! db.run(Isolation::Snapshot, |txn| {
//!     txn.update(accounts, &[Value::U64(1)], &[(2, Value::I64(50))]).map(drop)
//! })?;
//!
//! // The reader still sees its snapshot; scans are iterators of rows with named columns.
//! let mut total = 0;
//! for row in reader.scan(accounts, ..)? {
//!     total += row?.get::<i64>("balance")?;
//! }
//! assert_eq!(total, 120);
//! let fresh = db.begin(Isolation::Snapshot);
//! assert_eq!(fresh.get(accounts, &[Value::U64(1)])?.unwrap()[2], Value::I64(50));
//! # Ok::<(), verso::Error>(())
//! ```
//!
//! Then: [`Row`] and [`FromRow`]/[`IntoRow`] to map rows to your own types, [`Scan`] for
//! how range scans read, [`Database::run`] and [`RetryPolicy`] for conflicts, and
//! [`Transaction`]'s sections on reading and on threads (a transaction belongs to the
//! thread that began it).
//!
//! Every design the five MVCC papers behind Verso describe is a configuration of the same
//! engine, chosen in [`Options`]: the version storage ([`VersionStorageKind`]), the
//! concurrency-control protocol ([`ConcurrencyControl`]), the garbage collector
//! ([`GarbageCollector`]) and what index entries point at ([`IndexPointers`]). The defaults
//! are the ones to use. The knobs that only reproduce the papers' experiments are in
//! [`research`]. Architecture: one engine, generic over those four seams; see
//! `ARCHITECTURE.md`.

#![warn(missing_docs)]
// `unsafe` is allowed only where `docs/unsafe.md` lists it, with its invariant.
#![deny(unsafe_code)]

mod cc;
mod db;
pub mod disk;
mod durability;
mod engine;
mod error;
pub mod fs;
mod gc;
mod index;
mod key;
mod memory_spaces;
pub mod pmem;
mod prefetch;
pub mod research;
mod retry;
mod row;
mod rows;
mod scan;
mod schema;
mod stats;
mod sync;
mod ticks;
mod txn;
mod value;
mod version;

pub use db::{
    ChainConsolidation, CommitTicket, ConcurrencyControl, Database, GarbageCollector,
    IndexPointers, Isolation, KeyRange, Options, PlantedBug, TableId, ThreadBound, Transaction,
    VersionPlacement, VersionStorageKind, DEFAULT_BUFFER_POOL_BYTES,
    DEFAULT_CHECKPOINT_AFTER_LOG_BYTES, DEFAULT_LOG_SEGMENT_BYTES, DEFAULT_LOG_SYNCS_IN_FLIGHT,
};
pub use durability::{CheckpointReport, Durability, DurabilityStats, RecoveryStats};
pub use error::{Error, Result};
pub use retry::RetryPolicy;
pub use row::{RowView, ValueRef};
pub use rows::{ColumnIndex, FromRow, FromValue, IntoRow, Row};
pub use scan::Scan;
pub use schema::{PrimaryKeyIndex, Schema, MAX_COLUMNS, MAX_VALUE_BYTES};
pub use stats::{DiskStats, Stats, VersionAccesses};
pub use txn::slots::MAX_THREADS;
pub use value::{ColumnType, Value};
// The engine's own short paths to the research knobs (the public path is `research::`).
use research::{NonInline, VersionRemoval};

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
