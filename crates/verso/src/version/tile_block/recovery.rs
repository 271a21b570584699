//! Reopening a tile-block region after a restart or a crash (TB §4.5): the tiles and the
//! rows are rebuilt from the blocks, and a collection the crash interrupted is finished
//! (Algorithm 3).
//!
//! Definitions:
//! - A record is *whole* when it decodes with its block's checksum key
//!   (`layout::decode_record`); a block's records are read in order from its metadata line
//!   up to the first that is not whole (a torn tail: nothing after it was persisted, see
//!   "Invariants").
//! - A transaction is *committed* iff a whole commit record with its id is in the region
//!   (the original or a collection's copy); a `Relocated` record is committed by
//!   construction (a collection copies only committed newest versions). A record named by
//!   a whole `Withdrawn` record (an insert whose key was taken) is no version of anything.
//! - Of one key's records of committed transactions, the *winner* is the one with the
//!   highest transaction id; among one transaction's, a `Relocated` copy (which is of its
//!   last version), else the last appended: the highest block sequence, then the highest
//!   slot (a transaction's records go to its thread's blocks in order).
//!
//! Invariants this relies on (design note "Commit records" and "Recovery"):
//! - A block holds no persisted record after an unpersisted one: its records are appended
//!   by one thread at a time, whose persist points cover every line it stored, and a
//!   thread persists before its open block passes to another (`Appender::retire`).
//! - A whole commit record comes with every record it counts, and outlives them (copied
//!   when its block is freed while theirs remain); a `Withdrawn` record likewise outlives
//!   the record it names.
//! - A key whose winner is a tombstone has no row; the tombstone stays in its block, a
//!   buried row's tombstone as in a running store (D23), so a later collection drops it only
//!   when nothing older of any key is left.
//!
//! Key operations: `scan` (read every listed block), `rebuild` (tiles, the winners as
//! rows, candidates queued, `FROZEN` blocks kept for Algorithm 3), and
//! `TileStore::finish_interrupted_collections` (`reclaim.rs`; run by the engine once the
//! rows are in its indexes: relocation finds rows through them).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicPtr, Ordering};

use super::{
    block_id, block_state, lock, Link, Tile, TileChain, TileRow, TileStore, ABORTED, BURIED,
    COMMIT_SLOT, EXISTS, LATEST,
};
use crate::error::{Error, Result};
use crate::pmem::layout::{self, FrameState, ListedBlock, RecordKind, RecordScan};
use crate::pmem::space::Extent;
use crate::pmem::RecoveryReport;
use crate::row::PackedRef;
use crate::schema::{Schema, TableSchema};
use crate::sync::Arc;
use crate::version::Recovered;

/// A whole record found in a block.
struct Found {
    slot: u32,
    kind: RecordKind,
    flags: u8,
    table: u16,
    txn_id: u64,
    sequence: u16,
    /// Region offset of its payload, and the payload's length.
    payload_at: u64,
    len: u32,
    /// For a `Withdrawn` record: the record it names (block key, slot).
    names: Option<(u64, u32)>,
}

/// A block the directory lists, with its records.
struct ScannedBlock {
    listed: ListedBlock,
    at: u64,
    records: Vec<Found>,
}

/// What recovery found, before the tiles are built.
pub(super) struct Scan {
    tables: Vec<(String, Schema, TableSchema)>,
    blocks: Vec<ScannedBlock>,
}

fn corruption(store: &TileStore, offset: u64, reason: String) -> Error {
    Error::Corruption {
        file: store.region.describe(),
        offset,
        reason: format!("in the persistent-memory region: {reason}"),
    }
}

impl TileStore {
    /// Reads every block the directory lists (`blocks`), the catalog's `catalog` tables
    /// validated beside them.
    pub(super) fn scan(
        &self,
        catalog: Vec<(String, Schema)>,
        blocks: &[ListedBlock],
    ) -> Result<Scan> {
        let g = *self.space.geometry();
        let mut tables = Vec::new();
        for (name, schema) in catalog {
            let validated = schema
                .clone()
                .validate(&name)
                .map_err(|e| corruption(self, g.catalog_offset, format!("table {name}: {e}")))?;
            tables.push((name, schema, validated));
        }
        let mut scanned = Vec::with_capacity(blocks.len());
        for &listed in blocks {
            let at = g.frame_offset(listed.first_frame);
            let bytes = u64::from(listed.frames) * g.frame_bytes;
            let mut image = vec![0u8; bytes as usize];
            self.region.read(at, &mut image);
            let key = layout::block_key(listed.first_frame, listed.generation);
            let mut records = Vec::new();
            let mut cursor = layout::METADATA_LINE_BYTES as usize;
            while records.len() < self.slots_per_block as usize && cursor < image.len() {
                let RecordScan::Valid(record) = layout::decode_record(&image[cursor..], key) else {
                    break; // the end of what was appended, or a torn tail
                };
                let slot = records.len() as u32;
                if record.txn_id == 0 || record.txn_id > crate::txn::state::MAX_TIMESTAMP {
                    // No transaction has such an id: the clock could not move past it.
                    return Err(corruption(
                        self,
                        at + cursor as u64,
                        format!(
                            "a record of transaction {}, beyond the clock",
                            record.txn_id
                        ),
                    ));
                }
                if u32::from(record.slot) != slot {
                    return Err(corruption(
                        self,
                        at + cursor as u64,
                        format!(
                            "record {slot} of its block says it is record {}",
                            record.slot
                        ),
                    ));
                }
                if record.kind != RecordKind::Commit
                    && record.kind != RecordKind::Withdrawn
                    && usize::from(record.table) >= tables.len()
                {
                    return Err(corruption(
                        self,
                        at + cursor as u64,
                        format!(
                            "a record of table {}, which the catalog lacks",
                            record.table
                        ),
                    ));
                }
                let names = (record.kind == RecordKind::Withdrawn).then(|| {
                    let p = record.payload;
                    (
                        u64::from_le_bytes(p[..8].try_into().expect("checked by the decoder")),
                        u32::from_le_bytes(p[8..12].try_into().expect("checked by the decoder")),
                    )
                });
                if let Some((named, named_slot)) = names {
                    // It must name a record a block of this region could hold (its frame is
                    // what collections look the block up by).
                    if named >> 40 >= g.frame_count || named_slot >= self.slots_per_block {
                        return Err(corruption(
                            self,
                            at + cursor as u64,
                            format!(
                                "a withdrawn record naming slot {named_slot} of frame {}, \
                                 which this region has not",
                                named >> 40
                            ),
                        ));
                    }
                }
                records.push(Found {
                    slot,
                    kind: record.kind,
                    flags: record.flags,
                    table: record.table,
                    txn_id: record.txn_id,
                    sequence: record.sequence,
                    payload_at: at + (cursor + layout::RECORD_HEADER_BYTES) as u64,
                    len: record.payload.len() as u32,
                    names,
                });
                cursor += record.stored_bytes();
            }
            scanned.push(ScannedBlock {
                listed,
                at,
                records,
            });
        }
        Ok(Scan {
            tables,
            blocks: scanned,
        })
    }

    /// Builds every listed block's tile from `scan`, the winners' rows, and the list of
    /// frozen blocks for Algorithm 3; frees blocks that hold no whole record. Returns what
    /// the engine adopts and what recovery did.
    pub(super) fn rebuild(
        self: &std::sync::Arc<Self>,
        scan: Scan,
    ) -> Result<(Recovered<TileRow>, RecoveryReport)> {
        let Scan { tables, blocks } = scan;
        let mut report = RecoveryReport {
            blocks: blocks.len() as u64,
            version_index_frames_freed: self.scratch_frames_freed_at_open,
            ..RecoveryReport::default()
        };
        let mut committed = HashSet::new();
        let mut withdrawn = HashSet::new();
        // Each transaction's blocks with records of its own (for the commit records' spans).
        let mut txn_blocks: HashMap<u64, Vec<u64>> = HashMap::new();
        for block in &blocks {
            let id = layout::block_key(block.listed.first_frame, block.listed.generation);
            for record in &block.records {
                report.records += 1;
                report.max_txn_id = report.max_txn_id.max(record.txn_id);
                match record.kind {
                    RecordKind::Commit => {
                        committed.insert(record.txn_id);
                    }
                    RecordKind::Withdrawn => {
                        withdrawn.insert(record.names.expect("a withdrawn record names one"));
                    }
                    RecordKind::Version | RecordKind::Tombstone => {
                        let list = txn_blocks.entry(record.txn_id).or_default();
                        if list.last() != Some(&id) {
                            list.push(id);
                        }
                    }
                    RecordKind::Relocated => {}
                }
            }
        }
        // The winner of each key: (block index, record index), ranked as the module says.
        type Rank = (u64, bool, u16, u32);
        let mut winners: HashMap<(u16, Vec<u8>), (Rank, usize, usize)> = HashMap::new();
        let mut key = Vec::new();
        for (b, block) in blocks.iter().enumerate() {
            let id = layout::block_key(block.listed.first_frame, block.listed.generation);
            for (r, record) in block.records.iter().enumerate() {
                let relocated = record.kind == RecordKind::Relocated;
                if !matches!(record.kind, RecordKind::Version | RecordKind::Tombstone) && !relocated
                {
                    continue;
                }
                if !relocated && !committed.contains(&record.txn_id) {
                    report.uncommitted_records += 1;
                    continue;
                }
                if withdrawn.contains(&(id, record.slot)) {
                    continue;
                }
                let schema = &tables[usize::from(record.table)].2;
                self.recovered_key(record, schema, &mut key)?;
                let rank = (record.txn_id, relocated, record.sequence, record.slot);
                let entry = winners.entry((record.table, key.clone()));
                match entry {
                    std::collections::hash_map::Entry::Occupied(mut best) => {
                        if rank > best.get().0 {
                            best.insert((rank, b, r));
                        }
                    }
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert((rank, b, r));
                    }
                }
            }
        }
        let mut winner_of: HashMap<(usize, usize), Vec<u8>> = HashMap::new();
        for ((_, key), (_, b, r)) in winners {
            winner_of.insert((b, r), key);
        }
        // Tiles.
        let mut rows = Vec::new();
        let mut empty = Vec::new();
        let mut frozen = Vec::new();
        for (b, block) in blocks.iter().enumerate() {
            let listed = block.listed;
            let extent = Extent {
                first_frame: listed.first_frame,
                frames: listed.frames,
                generation: listed.generation,
            };
            if block.records.is_empty() {
                empty.push(extent);
                continue;
            }
            let id = block_id(extent);
            let tile = Tile::new(block.at, extent, self.slots_per_block);
            let mut spans = Vec::new();
            for (r, record) in block.records.iter().enumerate() {
                let header = &tile.headers[r];
                header.at.store(record.payload_at, Ordering::Relaxed);
                header.len.store(record.len, Ordering::Relaxed);
                header.begin.store(record.txn_id, Ordering::Relaxed);
                header.end.store(LATEST, Ordering::Relaxed);
                tile.min_txnid.fetch_min(record.txn_id, Ordering::Relaxed);
                let tombstone = match record.kind {
                    RecordKind::Tombstone => true,
                    RecordKind::Relocated => record.flags & layout::RELOCATED_TOMBSTONE != 0,
                    _ => false,
                };
                let obsolete = |tile: &Tile| {
                    tile.bits[r / 64].fetch_or(1 << (r % 64), Ordering::Relaxed);
                    tile.obsolete.fetch_add(1, Ordering::Relaxed);
                };
                match record.kind {
                    RecordKind::Commit | RecordKind::Withdrawn => {
                        header.flags.store(COMMIT_SLOT, Ordering::Relaxed);
                        obsolete(&tile);
                        let elsewhere: Vec<u64> = match record.names {
                            Some((named, _)) => vec![named],
                            None => txn_blocks
                                .get(&record.txn_id)
                                .map(|list| list.to_vec())
                                .unwrap_or_default(),
                        };
                        let elsewhere: Vec<u64> =
                            elsewhere.into_iter().filter(|&other| other != id).collect();
                        if !elsewhere.is_empty() {
                            spans.push((r as u32, elsewhere));
                        }
                    }
                    _ => match winner_of.remove(&(b, r)) {
                        Some(key) if !tombstone => {
                            header.flags.store(EXISTS, Ordering::Relaxed);
                            let table = &tables[usize::from(record.table)].2;
                            let link = Link::new(listed.first_frame, listed.generation, r as u32);
                            rows.push((u32::from(record.table), key, link, table));
                        }
                        Some(_) => {
                            // A key deleted last: a buried row's tombstone (D23).
                            header.flags.store(BURIED, Ordering::Relaxed);
                            obsolete(&tile);
                        }
                        None => {
                            // Superseded, uncommitted or withdrawn: no row reads it. A
                            // committed one is an older record of its key (D23).
                            let exists = if tombstone { 0 } else { EXISTS };
                            let committed_here = record.kind == RecordKind::Relocated
                                || committed.contains(&record.txn_id);
                            if committed_here {
                                header.end.store(report.max_txn_id, Ordering::Relaxed);
                                header.flags.store(exists, Ordering::Relaxed);
                                tile.min_superseded
                                    .fetch_min(record.txn_id, Ordering::SeqCst);
                            } else {
                                header.flags.store(exists | ABORTED, Ordering::Relaxed);
                            }
                            obsolete(&tile);
                        }
                    },
                }
            }
            tile.used
                .store(block.records.len() as u32, Ordering::Relaxed);
            let versions = block
                .records
                .iter()
                .filter(|r| !matches!(r.kind, RecordKind::Commit | RecordKind::Withdrawn))
                .count();
            self.counters
                .version_records
                .fetch_add(versions as u64, Ordering::Relaxed);
            // Every transaction after recovery has a higher id than any here: the block's
            // bounds say nothing any snapshot could need.
            tile.max_txnid.store(report.max_txn_id, Ordering::SeqCst);
            *lock(&tile.spans) = spans;
            tile.state.store(block_state::SEALED, Ordering::SeqCst);
            let frame = listed.first_frame as usize;
            let before = self.tiles[frame].swap(Box::into_raw(Box::new(tile)), Ordering::AcqRel);
            debug_assert!(before.is_null(), "one tile per listed block");
            self.counters.blocks_live.fetch_add(1, Ordering::Relaxed);
            let tile = self.tile_at(frame).expect("just published");
            if listed.state == FrameState::Frozen {
                // Algorithm 3: the collection the crash interrupted is finished.
                let claimed = tile.claim_for_a_queue();
                debug_assert!(claimed);
                frozen.push(frame);
            } else {
                self.queue_if_candidate(frame, tile);
            }
        }
        report.frozen_blocks = frozen.len() as u64;
        report.empty_blocks_freed = empty.len() as u64;
        if !empty.is_empty() {
            let mut writer = self.region.writer();
            self.space.free(&mut writer, &empty)?;
        }
        *lock(&self.recovered_frozen) = frozen;
        report.rows = rows.len() as u64;
        let rows = rows
            .into_iter()
            .map(|(table, key, link, schema)| {
                let chain = TileChain {
                    store: std::sync::Arc::clone(self),
                    table,
                    arity: schema.arity(),
                    head: link,
                    pending: None,
                    insert_record: false,
                    dead: false,
                    indexed: !schema.indexes.is_empty(),
                    len: 0,
                };
                let row = Arc::new(TileRow::new(chain));
                (table, key, row)
            })
            .collect();
        let recovered = Recovered {
            tables: tables
                .into_iter()
                .map(|(name, schema, _)| (name, schema))
                .collect(),
            rows,
            max_txn_id: report.max_txn_id,
        };
        Ok((recovered, report))
    }

    /// The encoded primary key of a record's row, its values checked against its table's
    /// schema first: a checksum says only that the bytes are whole, not that they are a
    /// row of that table.
    fn recovered_key(&self, record: &Found, schema: &TableSchema, key: &mut Vec<u8>) -> Result<()> {
        let at = record.payload_at;
        let mut bytes = vec![0u8; record.len as usize];
        self.region.read(at, &mut bytes);
        let values = PackedRef::from_untrusted(&bytes, schema.arity()).map_err(|reason| {
            corruption(self, at, format!("a record of {}: {reason}", schema.name))
        })?;
        let owned: Vec<crate::value::Value> = (0..schema.arity())
            .map(|i| values.get(i).to_value())
            .collect();
        schema
            .check_row(&owned)
            .map_err(|e| corruption(self, at, format!("a record of {}: {e}", schema.name)))?;
        crate::key::encode_row_key(key, owned.as_slice(), &schema.primary_key);
        Ok(())
    }

    /// The blocks a crash left frozen, for Algorithm 3
    /// (`TileStore::finish_interrupted_collections`), once.
    pub(super) fn take_recovered_frozen(&self) -> Vec<usize> {
        std::mem::take(&mut *lock(&self.recovered_frozen))
    }
}

/// A null table (of tiles, or of version indexes) of `frames` entries.
pub(super) fn null_table<T>(frames: u64) -> Box<[AtomicPtr<T>]> {
    (0..frames)
        .map(|_| AtomicPtr::new(std::ptr::null_mut()))
        .collect()
}
