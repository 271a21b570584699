//! Indexes and the index-pointer seam.
//!
//! Verso's indexes hold *logical* pointers (Wu et al. §6): an entry points at the row
//! object, which owns the row's newest state and its version chain, so an update never
//! touches an index unless it changes an indexed column. Entries are hints: an entry may
//! belong to a version that is uncommitted, aborted or invisible to the reader, so every
//! hit is re-checked against the version the reader sees (brief: index entries are hints,
//! `docs/brief.md`).

pub(crate) mod hashed;
pub(crate) mod ordered;
