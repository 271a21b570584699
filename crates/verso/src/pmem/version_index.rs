//! OneShot's version index (TB §2.3.3: "OneShotGC uses a hashmap to build a version index
//! for old versions in the partition. When intermediate versions are missing, the version
//! index is used for access"): built in the region when a run of versions (OneShot's
//! partition, TB-Collect-hash's block) is freed while long snapshots may still reach it,
//! with one small write per entry and one per bucket head (the "numerous small writes" TB
//! charges it with). Used by the delta-nvm storage (`version/delta_nvm`) and by the
//! tile-block storage's `ChainConsolidation::HashIndex` (`version/tile_block`).
//!
//! Definitions:
//! - An index maps a *key* (the version's name in what was freed: its offset in the
//!   partition, or its slot in the block) to an *entry*: the version's begin and end
//!   timestamps, its link to the next older version (two words, the storage's to read), its
//!   length, whether the row exists in it, and its contents if some snapshot may read it (a
//!   *copy*), or none if snapshots only walk past it to older versions (a *stub*).
//! - Layout: a `Scratch` run of frames (`pmem::layout`: freed by the next open, as a crash
//!   makes it garbage); `buckets` words first (the heads of the bucket lists, 0 for none),
//!   then the entries, each `ENTRY_HEADER` bytes and its contents, 8-byte aligned.
//!
//! Invariant: an index is written whole and persisted before what it stands for is freed.
//! Only an entry's link words change after (`Entry::set_link`, TB-Collect-hash, under the
//! row latch every reader of that row holds). Its owner says when no reader can reach it
//! (delta-nvm: a pin of its partition's slot in state `INDEXED`, `gate.rs`; tile-block: no
//! chain links into it) and frees it then.

use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::pmem::layout::FrameState;
use crate::pmem::space::{Extent, Space};
use crate::pmem::{LineWriter, Purpose, Region};

/// Entry words, by offset.
const KEY: u64 = 0;
const NEXT: u64 = 8;
const BEGIN: u64 = 16;
// The end timestamp is at 24 (kept for whoever inspects the region; walks do not read it).
const LINK_PART: u64 = 32;
const LINK_AT: u64 = 40;
const META: u64 = 48;
pub(crate) const ENTRY_HEADER: u64 = 56;
/// Meta word: the version's length in bits 0..32 (of the contents, for a copy); whether the
/// row exists in the version; whether the entry holds the contents (a copy) or not (a stub).
const EXISTS: u64 = 1 << 62;
const COPY: u64 = 1 << 63;

/// One version to index (what the release's scan found in the partition).
pub(crate) struct Indexed<'a> {
    pub(crate) at: u64,
    pub(crate) begin: u64,
    pub(crate) end: u64,
    pub(crate) link: (u64, u64),
    pub(crate) exists: bool,
    /// The version's length (what the storage counts its bytes by); a copy's contents are
    /// this long.
    pub(crate) len: usize,
    /// The contents, for a copy; `None` for a stub.
    pub(crate) contents: Option<&'a [u8]>,
}

/// A partition's index in the region.
pub(crate) struct VersionIndex {
    pub(crate) extents: Vec<Extent>,
    buckets_at: u64,
    buckets: u64,
    pub(crate) entries: u64,
    pub(crate) copies: u64,
    pub(crate) bytes: u64,
}

/// An entry found: a version of the released partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) at: u64,
}

fn entry_bytes(contents: usize) -> u64 {
    (ENTRY_HEADER + contents as u64).next_multiple_of(8)
}

fn bucket_of(key: u64, buckets: u64) -> u64 {
    debug_assert!(buckets.is_power_of_two());
    // Fibonacci hashing: offsets are multiples of 8 and clustered, the product spreads them.
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) & (buckets - 1)
}

impl VersionIndex {
    /// Builds the index of `versions` in new frames of `space`, through `writer`, and
    /// persists it. Refused (nothing left allocated) when the region has no room.
    pub(crate) fn build(
        space: &Space,
        writer: &mut LineWriter,
        versions: &[Indexed<'_>],
    ) -> Result<VersionIndex> {
        let buckets = (versions.len() as u64 * 2).next_power_of_two().max(2);
        let entries_bytes: u64 = versions
            .iter()
            .map(|v| entry_bytes(v.contents.map_or(0, <[u8]>::len)))
            .sum();
        let total = buckets * 8 + entries_bytes;
        let g = *space.geometry();
        let frames = u32::try_from(total.div_ceil(g.frame_bytes).max(1)).unwrap_or(u32::MAX);
        let extent = space.allocate(writer, frames, FrameState::Scratch)?;
        let base = g.frame_offset(extent.first_frame);
        let region = std::sync::Arc::clone(writer.region());
        // The bucket heads start empty: one store of the whole array (frames come back
        // with old bytes).
        writer.store(
            base,
            &vec![0u8; (buckets * 8) as usize],
            Purpose::VersionIndex,
        );
        let mut next = base + buckets * 8;
        let mut copies = 0;
        for version in versions {
            let contents = version.contents.unwrap_or(&[]);
            debug_assert!(version.contents.is_none() || contents.len() == version.len);
            let bucket_at = base + bucket_of(version.at, buckets) * 8;
            let head = region.load_u64(bucket_at, Ordering::Acquire);
            let mut bytes = Vec::with_capacity(entry_bytes(contents.len()) as usize);
            let mut meta = version.len as u64;
            if version.exists {
                meta |= EXISTS;
            }
            if version.contents.is_some() {
                meta |= COPY;
                copies += 1;
            }
            for word in [
                version.at,
                head,
                version.begin,
                version.end,
                version.link.0,
                version.link.1,
                meta,
            ] {
                bytes.extend_from_slice(&word.to_le_bytes());
            }
            bytes.extend_from_slice(contents);
            bytes.resize(entry_bytes(contents.len()) as usize, 0);
            // Two small writes per entry: the entry, then its bucket's head.
            writer.store(next, &bytes, Purpose::VersionIndex);
            writer.store_u64(bucket_at, next, Purpose::VersionIndex);
            next += bytes.len() as u64;
        }
        if let Err(error) = writer.persist() {
            let _ = space.free(writer, &[extent]);
            return Err(crate::error::Error::DurabilityLost {
                reason: format!("persisting a partition's version index: {error}"),
            });
        }
        Ok(VersionIndex {
            extents: vec![extent],
            buckets_at: base,
            buckets,
            entries: versions.len() as u64,
            copies,
            bytes: total,
        })
    }

    /// The entry of the version that was at `at` in the partition, if indexed.
    pub(crate) fn find(&self, region: &Region, at: u64) -> Option<Entry> {
        let mut entry = region.load_u64(
            self.buckets_at + bucket_of(at, self.buckets) * 8,
            Ordering::Acquire,
        );
        while entry != 0 {
            if region.load_u64(entry + KEY, Ordering::Acquire) == at {
                return Some(Entry { at: entry });
            }
            entry = region.load_u64(entry + NEXT, Ordering::Acquire);
        }
        None
    }
}

impl Entry {
    pub(crate) fn begin(self, region: &Region) -> u64 {
        region.load_u64(self.at + BEGIN, Ordering::Acquire)
    }

    pub(crate) fn link(self, region: &Region) -> (u64, u64) {
        (
            region.load_u64(self.at + LINK_PART, Ordering::Acquire),
            region.load_u64(self.at + LINK_AT, Ordering::Acquire),
        )
    }

    /// Changes the entry's link to the next older version (one small write, durable at
    /// `writer`'s next persist point): for a chain whose older versions moved to another
    /// index after this one was built. The caller holds the row's latch exclusively.
    pub(crate) fn set_link(self, writer: &mut LineWriter, link: (u64, u64)) {
        writer.store_u64(self.at + LINK_PART, link.0, Purpose::VersionIndex);
        writer.store_u64(self.at + LINK_AT, link.1, Purpose::VersionIndex);
    }

    /// The version's length.
    pub(crate) fn len(self, region: &Region) -> usize {
        (self.meta(region) & 0xFFFF_FFFF) as usize
    }

    fn meta(self, region: &Region) -> u64 {
        region.load_u64(self.at + META, Ordering::Acquire)
    }

    pub(crate) fn exists(self, region: &Region) -> bool {
        self.meta(region) & EXISTS != 0
    }

    /// Where the copied contents lie and their length (`None`: a stub).
    pub(crate) fn contents(self, region: &Region) -> Option<(u64, usize)> {
        let meta = self.meta(region);
        (meta & COPY != 0).then(|| (self.at + ENTRY_HEADER, (meta & 0xFFFF_FFFF) as usize))
    }
}
