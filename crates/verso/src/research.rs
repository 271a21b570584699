//! The research knobs: settings and measurements that reproduce the papers' experiments,
//! which a program embedding Verso does not need.
//!
//! Everything here changes *how* the engine keeps versions, never *what* a transaction
//! reads: every setting passes the same contract tests and isolation anomaly suite as the
//! defaults. The lab (`verso reproduce …`) uses them to redo the papers' figures.
//!
//! - [`VersionRemoval`] ([`Options::version_removal`](crate::Options::version_removal)):
//!   how finalizing removes obsolete versions from a chain. HyPer's one-at-a-time removal
//!   reproduces the cost of long chains the Steam paper measures.
//! - [`NonInline`] ([`Options::non_inline`](crate::Options::non_inline)) and
//!   [`NON_INLINE_MIN_BYTES`]: long text and bytes values stored out of line, copied or
//!   shared between versions (the non-inline attributes of Wu et al.'s *An Empirical
//!   Evaluation of In-Memory Multi-Version Concurrency Control*, §4.1).
//! - [`MemorySpaces`] ([`Options::memory_spaces`](crate::Options::memory_spaces)) and its
//!   constants and counters: separate memory spaces for the version storage (the same
//!   paper, §4.4), a global allocator a binary installs.
//! - [`ChainHistogram`], [`chain_bucket`], [`CHAIN_BUCKETS`]: the version-chain length
//!   histograms inside [`Stats`](crate::Stats).
//! - [`ColumnMask`]: the set of columns a version record changed (the Steam paper's
//!   attribute mask).
//!
//! The design axes themselves (version storage, concurrency control, garbage collector,
//! index pointers) are [`Options`](crate::Options) fields at the crate's root: choosing one
//! is part of using the engine, and `Options::default()` chooses well.

pub use crate::db::VersionRemoval;
pub use crate::memory_spaces::{
    memory_space_usage, memory_spaces_installed, MemorySpaceUsage, MemorySpaces, CHUNK_BYTES,
    MAX_CLASS_BYTES, MAX_MEMORY_SPACES,
};
pub use crate::row::{NonInline, NON_INLINE_MIN_BYTES};
pub use crate::schema::ColumnMask;
pub use crate::stats::{chain_bucket, ChainHistogram, CHAIN_BUCKETS};
