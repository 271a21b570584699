//! The region's format on the media: where the superblock, the frame directory, the catalog
//! and the heap of frames lie, and the encoders and decoders of each thing stored there.
//! All integers are little-endian.
//!
//! ```text
//! offset 0            superblock (512 B): magic, format version, geometry, CRC32C
//! directory_offset    frame directory: one 8-byte word per frame
//! catalog_offset      catalog: append-only table-definition records (1 MiB)
//! heap_offset         frames of `frame_bytes`; a block is a run of frames; its first
//!                     256 bytes are its metadata line, then content records
//! ```
//!
//! Every offset is a multiple of 256, so a block's metadata line is one media line at the
//! default line size (TB §4.1: a 240-byte update bitmap, then `max_txnid` and `min_txnid`).
//!
//! Invariant of every decoder here: it never panics and never allocates more than the bytes
//! it was given hold, whatever they are (the proptests below feed random and mutated
//! bytes). A decoder says *what* is wrong; the caller decides whether that is a torn tail or
//! corruption.

use crate::durability::codec::{self, Reader};
use crate::error::{Error, Result};
use crate::schema::{Schema, TableSchema};

/// The superblock's first bytes.
pub(crate) const MAGIC: [u8; 8] = *b"VERSOPM1";
/// The format this build writes and reads. 2: a record's checksum covers its block's
/// frame and generation (`block_key`). 3: a record carries its transaction's block
/// sequence, and an insert whose key was taken leaves a `Withdrawn` record (recovery).
pub(crate) const FORMAT_VERSION: u32 = 3;
/// The superblock's size.
pub(crate) const SUPERBLOCK_BYTES: u64 = 512;
/// The catalog area's size by default.
pub(crate) const CATALOG_BYTES: u64 = 1 << 20;
/// The smallest catalog area.
pub(crate) const MIN_CATALOG_BYTES: u64 = 4096;
/// Content slots per block (TB §4.1: "every 1920 tuple_contents form a block").
pub(crate) const SLOTS_PER_BLOCK: u32 = 1920;
/// The bytes a block's content records get per slot, on average, when frames are sized.
pub(crate) const DEFAULT_SLOT_BUDGET: u64 = 256;
/// A block's metadata line: the update bitmap (1,920 bits = 240 bytes), `max_txnid`,
/// `min_txnid`.
pub(crate) const METADATA_LINE_BYTES: u64 = 256;
/// Where `max_txnid` and `min_txnid` lie in the metadata line.
pub(crate) const MAX_TXNID_AT: u64 = 240;
pub(crate) const MIN_TXNID_AT: u64 = 248;
/// The most frames a region has: a version link names its frame in 22 bits.
pub(crate) const MAX_FRAMES: u64 = 1 << 22;
/// The largest run of frames one block spans (the directory word's 21-bit run field).
pub(crate) const MAX_RUN_FRAMES: u32 = (1 << 21) - 1;

const ALIGN: u64 = 256;

fn round_up(value: u64, to: u64) -> u64 {
    value.div_ceil(to) * to
}

/// Where everything lies in a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) region_bytes: u64,
    pub(crate) slots_per_block: u32,
    pub(crate) frame_bytes: u64,
    pub(crate) frame_count: u64,
    pub(crate) directory_offset: u64,
    pub(crate) catalog_offset: u64,
    pub(crate) catalog_bytes: u64,
    pub(crate) heap_offset: u64,
}

/// How to lay out a new region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Content slots per block.
    pub(crate) slots_per_block: u32,
    /// Bytes a slot's record gets on average, when frames are sized.
    pub(crate) slot_budget: u64,
    /// The catalog area's size.
    pub(crate) catalog_bytes: u64,
}

impl Default for Plan {
    /// TB's blocks of 1,920 slots, 256 bytes a slot, and a catalog of 1 MiB.
    fn default() -> Plan {
        Plan {
            slots_per_block: SLOTS_PER_BLOCK,
            slot_budget: DEFAULT_SLOT_BUDGET,
            catalog_bytes: CATALOG_BYTES,
        }
    }
}

impl Geometry {
    /// The geometry of a new region of `region_bytes` laid out as `plan` says: as many
    /// frames as fit.
    pub(crate) fn plan(region_bytes: u64, plan: &Plan) -> Result<Geometry> {
        let Plan {
            slots_per_block,
            slot_budget,
            catalog_bytes,
        } = *plan;
        let refuse = |reason: String| Err(Error::UnsupportedConfiguration { reason });
        if slots_per_block == 0 || slots_per_block > SLOTS_PER_BLOCK {
            return refuse(format!(
                "{slots_per_block} slots per block: a block has 1 to {SLOTS_PER_BLOCK} (its update bitmap is 240 bytes)"
            ));
        }
        if !(24..=1 << 20).contains(&slot_budget) {
            return refuse(format!("{slot_budget} bytes a slot: between 24 and 1 MiB"));
        }
        if catalog_bytes < MIN_CATALOG_BYTES || catalog_bytes % ALIGN != 0 {
            return refuse(format!(
                "a catalog of {catalog_bytes} bytes: at least {MIN_CATALOG_BYTES}, a multiple of {ALIGN}"
            ));
        }
        let frame_bytes = round_up(
            METADATA_LINE_BYTES + u64::from(slots_per_block) * slot_budget,
            ALIGN,
        );
        let directory_offset = SUPERBLOCK_BYTES;
        // The directory grows with the frames it lists: take as many frames as fit with it.
        let fixed = (directory_offset + catalog_bytes + 2 * ALIGN).min(region_bytes);
        let mut frame_count = region_bytes.saturating_sub(fixed) / (frame_bytes + 8);
        frame_count = frame_count.min(MAX_FRAMES);
        loop {
            let geometry = Geometry::with_frames(
                region_bytes,
                slots_per_block,
                frame_bytes,
                frame_count,
                catalog_bytes,
            );
            if frame_count == 0 {
                return refuse(format!(
                    "a persistent-memory region of {region_bytes} bytes holds no frame of {frame_bytes} bytes \
                     beside its superblock, directory and {catalog_bytes}-byte catalog"
                ));
            }
            if geometry.heap_offset + frame_count * frame_bytes <= region_bytes {
                return Ok(geometry);
            }
            frame_count -= 1;
        }
    }

    fn with_frames(
        region_bytes: u64,
        slots_per_block: u32,
        frame_bytes: u64,
        frame_count: u64,
        catalog_bytes: u64,
    ) -> Geometry {
        let directory_offset = SUPERBLOCK_BYTES;
        let catalog_offset = round_up(directory_offset + frame_count * 8, ALIGN);
        let heap_offset = round_up(catalog_offset + catalog_bytes, ALIGN);
        Geometry {
            region_bytes,
            slots_per_block,
            frame_bytes,
            frame_count,
            directory_offset,
            catalog_offset,
            catalog_bytes,
            heap_offset,
        }
    }

    /// Whether the geometry is one [`Geometry::plan`] could have made for its region: every
    /// part inside the region, in order, aligned. What a decoded superblock must satisfy
    /// before anything is read through it.
    fn check(&self) -> std::result::Result<(), String> {
        let expected = Geometry::with_frames(
            self.region_bytes,
            self.slots_per_block,
            self.frame_bytes,
            self.frame_count,
            self.catalog_bytes,
        );
        if *self != expected {
            return Err(format!(
                "its parts are not where its frame count puts them: {self:?}"
            ));
        }
        if self.slots_per_block == 0 || self.slots_per_block > SLOTS_PER_BLOCK {
            return Err(format!("{} slots per block", self.slots_per_block));
        }
        if self.catalog_bytes < MIN_CATALOG_BYTES || self.catalog_bytes % ALIGN != 0 {
            return Err(format!("a catalog of {} bytes", self.catalog_bytes));
        }
        if self.frame_count == 0 || self.frame_count > MAX_FRAMES {
            return Err(format!("{} frames", self.frame_count));
        }
        if self.frame_bytes < METADATA_LINE_BYTES + 24 || self.frame_bytes % ALIGN != 0 {
            return Err(format!("frames of {} bytes", self.frame_bytes));
        }
        let heap_end = self
            .frame_count
            .checked_mul(self.frame_bytes)
            .and_then(|heap| heap.checked_add(self.heap_offset));
        if heap_end.is_none_or(|end| end > self.region_bytes) {
            return Err(format!(
                "{} frames of {} bytes from {} do not fit {} bytes",
                self.frame_count, self.frame_bytes, self.heap_offset, self.region_bytes
            ));
        }
        Ok(())
    }

    /// The region offset of frame `frame`'s first byte.
    pub(crate) fn frame_offset(&self, frame: u64) -> u64 {
        debug_assert!(frame < self.frame_count);
        self.heap_offset + frame * self.frame_bytes
    }

    /// The region offset of frame `frame`'s directory word.
    pub(crate) fn directory_word(&self, frame: u64) -> u64 {
        debug_assert!(frame < self.frame_count);
        self.directory_offset + frame * 8
    }
}

/// What the superblock records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Superblock {
    /// The line size the region was created with (an accounting setting, not a format: a
    /// region may be reopened with another).
    pub(crate) created_line_bytes: u32,
    pub(crate) geometry: Geometry,
}

const SUPERBLOCK_CRC_AT: usize = 80;

/// The superblock's bytes.
pub(crate) fn encode_superblock(superblock: &Superblock) -> [u8; SUPERBLOCK_BYTES as usize] {
    let g = &superblock.geometry;
    let mut out = Vec::with_capacity(SUPERBLOCK_BYTES as usize);
    out.extend_from_slice(&MAGIC);
    codec::put_u32(&mut out, FORMAT_VERSION);
    codec::put_u32(&mut out, superblock.created_line_bytes);
    codec::put_u64(&mut out, g.region_bytes);
    codec::put_u32(&mut out, g.slots_per_block);
    codec::put_u32(&mut out, 0); // reserved
    codec::put_u64(&mut out, g.frame_bytes);
    codec::put_u64(&mut out, g.frame_count);
    codec::put_u64(&mut out, g.directory_offset);
    codec::put_u64(&mut out, g.catalog_offset);
    codec::put_u64(&mut out, g.catalog_bytes);
    codec::put_u64(&mut out, g.heap_offset);
    debug_assert_eq!(out.len(), SUPERBLOCK_CRC_AT);
    let crc = crc32c::crc32c(&out);
    codec::put_u32(&mut out, crc);
    let mut bytes = [0u8; SUPERBLOCK_BYTES as usize];
    bytes[..out.len()].copy_from_slice(&out);
    bytes
}

/// Decodes the superblock of a region of `region_bytes` bytes. `what` names the region in
/// errors.
pub(crate) fn decode_superblock(bytes: &[u8], region_bytes: u64, what: &str) -> Result<Superblock> {
    let corrupt = |offset: usize, reason: String| Error::Corruption {
        file: what.to_string(),
        offset: offset as u64,
        reason,
    };
    if bytes.len() < SUPERBLOCK_CRC_AT + 4 {
        return Err(corrupt(
            0,
            format!("{} bytes hold no superblock", bytes.len()),
        ));
    }
    if bytes[..8] != MAGIC {
        return Err(corrupt(
            0,
            "not a Verso persistent-memory region (no magic number)".into(),
        ));
    }
    let mut reader = Reader::new(&bytes[8..SUPERBLOCK_CRC_AT + 4]);
    let field = |reader: &mut Reader<'_>, what: &str| {
        reader
            .u64(what)
            .map_err(|e| corrupt(8 + e.offset, e.reason))
    };
    let version = reader
        .u32("the format version")
        .map_err(|e| corrupt(8 + e.offset, e.reason))?;
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedFormat {
            file: what.to_string(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let stored = u32::from_le_bytes(
        bytes[SUPERBLOCK_CRC_AT..SUPERBLOCK_CRC_AT + 4]
            .try_into()
            .expect("4 bytes"),
    );
    if crc32c::crc32c(&bytes[..SUPERBLOCK_CRC_AT]) != stored {
        return Err(corrupt(
            SUPERBLOCK_CRC_AT,
            "the superblock's checksum does not match".into(),
        ));
    }
    let created_line_bytes = reader
        .u32("the line size")
        .map_err(|e| corrupt(8 + e.offset, e.reason))?;
    let recorded_bytes = field(&mut reader, "the region's size")?;
    let slots_per_block = reader
        .u32("slots per block")
        .map_err(|e| corrupt(8 + e.offset, e.reason))?;
    let _reserved = reader
        .u32("reserved")
        .map_err(|e| corrupt(8 + e.offset, e.reason))?;
    let geometry = Geometry {
        region_bytes: recorded_bytes,
        slots_per_block,
        frame_bytes: field(&mut reader, "the frame size")?,
        frame_count: field(&mut reader, "the frame count")?,
        directory_offset: field(&mut reader, "the directory's offset")?,
        catalog_offset: field(&mut reader, "the catalog's offset")?,
        catalog_bytes: field(&mut reader, "the catalog's size")?,
        heap_offset: field(&mut reader, "the heap's offset")?,
    };
    if recorded_bytes != region_bytes {
        return Err(corrupt(
            16,
            format!("the superblock describes a region of {recorded_bytes} bytes; the region has {region_bytes}"),
        ));
    }
    if !matches!(created_line_bytes, 64 | 128 | 256) {
        return Err(corrupt(12, format!("line size {created_line_bytes}")));
    }
    geometry.check().map_err(|reason| {
        corrupt(
            24,
            format!("the superblock's geometry is impossible: {reason}"),
        )
    })?;
    Ok(Superblock {
        created_line_bytes,
        geometry,
    })
}

/// The state of a frame, in its directory word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameState {
    /// Not part of any block. Zero, so a new region's directory is all free.
    Free = 0,
    /// The first frame of a block a thread appends to.
    Open = 1,
    /// The first frame of a full block.
    Sealed = 2,
    /// The first frame of a block a collection froze: the persisted frozen queue (TB §4.5's
    /// `local_gc_queue_frozen`).
    Frozen = 3,
    /// A later frame of a block that spans several.
    Tail = 4,
    /// The first frame of a run holding what recovery never reads and a crash makes
    /// garbage: a version index (`pmem::version_index`), built from DRAM headers that do
    /// not survive a restart. Freed by the next open.
    Scratch = 5,
}

/// A frame's directory word: `state:3 | run:21 | generation:40`.
///
/// - For a block's first frame, `run` is the number of frames the block spans (≥ 1).
/// - For a `Tail`, `run` is its distance from the block's first frame (≥ 1).
/// - For a `Free` frame, `run` is 0.
/// - `generation` counts the frame's frees (wrapping at 2^40): links into a freed block
///   carry an older one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirectoryEntry {
    pub(crate) state: FrameState,
    pub(crate) run: u32,
    pub(crate) generation: u64,
}

const GENERATION_BITS: u32 = 40;
const GENERATION_MASK: u64 = (1 << GENERATION_BITS) - 1;

impl DirectoryEntry {
    pub(crate) fn encode(self) -> u64 {
        debug_assert!(self.run <= MAX_RUN_FRAMES);
        debug_assert_eq!(self.state == FrameState::Free, self.run == 0);
        (self.state as u64) << 61
            | u64::from(self.run) << GENERATION_BITS
            | (self.generation & GENERATION_MASK)
    }

    pub(crate) fn decode(word: u64) -> std::result::Result<DirectoryEntry, String> {
        let state = match word >> 61 {
            0 => FrameState::Free,
            1 => FrameState::Open,
            2 => FrameState::Sealed,
            3 => FrameState::Frozen,
            4 => FrameState::Tail,
            5 => FrameState::Scratch,
            other => {
                return Err(format!(
                    "unknown frame state {other} in directory word {word:#018x}"
                ))
            }
        };
        let run = ((word >> GENERATION_BITS) & u64::from(MAX_RUN_FRAMES)) as u32;
        if (state == FrameState::Free) != (run == 0) {
            return Err(format!(
                "a {state:?} frame with run {run} in directory word {word:#018x}"
            ));
        }
        Ok(DirectoryEntry {
            state,
            run,
            generation: word & GENERATION_MASK,
        })
    }
}

/// A block the directory lists: its first frame, how many it spans, and its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListedBlock {
    pub(crate) first_frame: u64,
    pub(crate) frames: u32,
    pub(crate) state: FrameState,
    pub(crate) generation: u64,
}

/// What the directory lists: whole blocks, and the runs a crash cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DirectoryScan {
    pub(crate) blocks: Vec<ListedBlock>,
    /// Frames that are not free but belong to no whole block: a crash inside the persist
    /// point of an allocation or of a free of a block spanning several frames (its words
    /// are separate 8-byte stores, and a power loss keeps any subset of them). Nothing
    /// acknowledged lies in such frames (an allocation's persist point never completed, or
    /// a freed block's still-needed versions were persisted elsewhere first), so recovery
    /// frees them.
    pub(crate) torn_frames: Vec<u64>,
    /// Frames of whole `Scratch` runs (version indexes a crash made garbage): freed too.
    pub(crate) scratch_frames: Vec<u64>,
}

/// Reads the directory's words: the blocks they list and the frames a crash left torn, or
/// the first word that cannot be what Verso wrote (its frame and why).
pub(crate) fn scan_directory(words: &[u64]) -> std::result::Result<DirectoryScan, (u64, String)> {
    let mut scan = DirectoryScan::default();
    let entry = |frame: usize| {
        DirectoryEntry::decode(words[frame]).map_err(|reason| (frame as u64, reason))
    };
    let mut frame = 0usize;
    while frame < words.len() {
        let at = frame as u64;
        let head = entry(frame)?;
        match head.state {
            FrameState::Free => frame += 1,
            FrameState::Tail => {
                // A tail whose first frame is free: a torn allocation or free.
                let distance = head.run as usize;
                if distance > frame || entry(frame - distance)?.state != FrameState::Free {
                    return Err((
                        at,
                        format!(
                            "a tail frame {distance} after a frame that is not its block's first"
                        ),
                    ));
                }
                scan.torn_frames.push(at);
                frame += 1;
            }
            state => {
                let frames = head.run as usize;
                if frames > words.len() - frame {
                    return Err((
                        at,
                        format!("a block of {frames} frames runs past the directory's end"),
                    ));
                }
                let mut whole = true;
                let mut tails = Vec::new();
                for distance in 1..frames {
                    let tail = entry(frame + distance)?;
                    match tail.state {
                        FrameState::Tail if tail.run as usize == distance => tails.push((frame + distance) as u64),
                        FrameState::Free => whole = false,
                        _ => {
                            return Err((
                                (frame + distance) as u64,
                                format!("frame {distance} of a {frames}-frame block is {tail:?}, not its tail"),
                            ))
                        }
                    }
                }
                if whole && state == FrameState::Scratch {
                    scan.scratch_frames.push(at);
                    scan.scratch_frames.extend(tails);
                } else if whole {
                    scan.blocks.push(ListedBlock {
                        first_frame: at,
                        frames: head.run,
                        state,
                        generation: head.generation,
                    });
                } else {
                    scan.torn_frames.push(at);
                    scan.torn_frames.extend(tails);
                }
                frame += frames;
            }
        }
    }
    Ok(scan)
}

/// What a content record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordKind {
    /// A version's packed row.
    Version = 1,
    /// A delete: the packed row of the deleted version (index upkeep at recovery needs it).
    Tombstone = 2,
    /// A committed version (or tombstone, flag [`RELOCATED_TOMBSTONE`]) copied by a
    /// collection, with its original transaction id.
    Relocated = 3,
    /// The record that makes a transaction's records committed; its payload is the number
    /// of version and tombstone records the transaction wrote.
    Commit = 4,
    /// Takes back one record of its transaction, which its payload names (block key and
    /// slot, [`withdrawn_payload`]): an insert whose key was taken leaves its record
    /// unpublished, and the transaction may still commit (the caller gets `DuplicateKey`
    /// and goes on).
    Withdrawn = 5,
}

/// Flag of a `Relocated` record: the copy is of a tombstone.
pub(crate) const RELOCATED_TOMBSTONE: u8 = 1;

/// A content record's header: `kind:u8 | flags:u8 | table:u16 | len:u32 | txn_id:u64 |
/// slot:u16 | sequence:u16 | crc32c:u32`, then `len` payload bytes, padded to 8. The
/// sequence is the number of blocks the transaction appended to before this record's (0
/// for a collection's copies): with the position in a block it orders one transaction's
/// records, so that recovery takes the last of them for a key. The CRC
/// covers the block's key (`block_key`: its first frame and generation), then the header
/// with its CRC field zeroed, then the payload. The key makes a record left in frames that
/// a freed block had read as invalid in a later block at those frames: appends do not
/// clear what lies past them, so without it a new block's tail could run on into an old
/// block's records (`regression_stale_records_in_reused_frames_are_not_read_as_the_new_blocks`).
pub(crate) const RECORD_HEADER_BYTES: usize = 24;
const RECORD_CRC_AT: usize = 20;

/// A decoded content record, borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) kind: RecordKind,
    pub(crate) flags: u8,
    pub(crate) table: u16,
    pub(crate) txn_id: u64,
    pub(crate) slot: u16,
    /// The transaction's blocks before this record's (see the header's layout).
    pub(crate) sequence: u16,
    pub(crate) payload: &'a [u8],
}

impl Record<'_> {
    /// The bytes the record takes in its block, padding included.
    pub(crate) fn stored_bytes(&self) -> usize {
        stored_record_bytes(self.payload.len())
    }

    /// A commit record's count of the transaction's version and tombstone records (the
    /// tests' check of whole transactions; recovery relies on no count).
    #[cfg(test)]
    pub(crate) fn committed_records(&self) -> Option<u32> {
        (self.kind == RecordKind::Commit)
            .then(|| u32::from_le_bytes(self.payload[..4].try_into().expect("4 bytes")))
    }
}

/// The key a block's records are checksummed with: its first frame and its generation
/// (the directory's 40 bits), which no other block at those frames has.
pub(crate) fn block_key(first_frame: u64, generation: u64) -> u64 {
    first_frame << 40 | (generation & ((1 << 40) - 1))
}

/// The record checksum's seed for a block.
fn record_crc_seed(block: u64) -> u32 {
    crc32c::crc32c(&block.to_le_bytes())
}

/// The bytes a record of `payload` bytes takes, padding included.
pub(crate) fn stored_record_bytes(payload: usize) -> usize {
    RECORD_HEADER_BYTES + payload.div_ceil(8) * 8
}

/// The record's bytes, padded to 8.
#[cfg(test)] // the storage stores the header and the payload separately
pub(crate) fn encode_record(record: &Record<'_>, block: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(record.stored_bytes());
    out.extend_from_slice(&record_header(record, block));
    out.extend_from_slice(record.payload);
    out.resize(record.stored_bytes(), 0);
    out
}

/// The record's 24-byte header, its checksum over the header and `record.payload`: what
/// [`encode_record`] puts before the payload, for a writer that stores the payload where it
/// already is instead of copying the record together first.
pub(crate) fn record_header(record: &Record<'_>, block: u64) -> [u8; RECORD_HEADER_BYTES] {
    let mut header = [0u8; RECORD_HEADER_BYTES];
    header[0] = record.kind as u8;
    header[1] = record.flags;
    header[2..4].copy_from_slice(&record.table.to_le_bytes());
    let len = u32::try_from(record.payload.len()).expect("a payload under 4 GiB");
    header[4..8].copy_from_slice(&len.to_le_bytes());
    header[8..16].copy_from_slice(&record.txn_id.to_le_bytes());
    header[16..18].copy_from_slice(&record.slot.to_le_bytes());
    header[18..20].copy_from_slice(&record.sequence.to_le_bytes());
    let crc = crc32c::crc32c_append(
        crc32c::crc32c_append(record_crc_seed(block), &header),
        record.payload,
    );
    header[RECORD_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// A `Withdrawn` record's payload: the block key and slot of the record it takes back.
pub(crate) const WITHDRAWN_PAYLOAD_BYTES: usize = 16;

/// A `Withdrawn` record's payload naming the record at `slot` of the block keyed `block`.
pub(crate) fn withdrawn_payload(block: u64, slot: u32) -> [u8; WITHDRAWN_PAYLOAD_BYTES] {
    let mut payload = [0u8; WITHDRAWN_PAYLOAD_BYTES];
    payload[..8].copy_from_slice(&block.to_le_bytes());
    payload[8..12].copy_from_slice(&slot.to_le_bytes());
    payload
}

/// A commit record's payload: the count, padded to 8.
pub(crate) fn commit_payload(records: u32) -> [u8; 8] {
    let mut payload = [0u8; 8];
    payload[..4].copy_from_slice(&records.to_le_bytes());
    payload
}

/// What the bytes at a record position hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordScan<'a> {
    /// A whole, checksummed record.
    Valid(Record<'a>),
    /// Zeros where a header would be: nothing was appended here.
    End,
    /// Neither: a torn tail or corruption (the caller tells them apart), and why.
    Invalid(&'static str),
}

/// Decodes the record at the start of `bytes` (the rest of the block whose `block_key` is
/// `block`).
pub(crate) fn decode_record(bytes: &[u8], block: u64) -> RecordScan<'_> {
    if bytes.len() < RECORD_HEADER_BYTES {
        return if bytes.iter().all(|&b| b == 0) {
            RecordScan::End
        } else {
            RecordScan::Invalid("a record header cut by the block's end")
        };
    }
    let header = &bytes[..RECORD_HEADER_BYTES];
    if header.iter().all(|&b| b == 0) {
        return RecordScan::End;
    }
    let kind = match header[0] {
        1 => RecordKind::Version,
        2 => RecordKind::Tombstone,
        3 => RecordKind::Relocated,
        4 => RecordKind::Commit,
        5 => RecordKind::Withdrawn,
        _ => return RecordScan::Invalid("an unknown record kind"),
    };
    let len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
    let stored = RECORD_HEADER_BYTES.saturating_add(len.div_ceil(8).saturating_mul(8));
    if stored > bytes.len() {
        return RecordScan::Invalid("a record longer than the rest of its block");
    }
    if kind == RecordKind::Commit && len != 8 {
        return RecordScan::Invalid("a commit record whose payload is not its count");
    }
    if kind == RecordKind::Withdrawn && len != WITHDRAWN_PAYLOAD_BYTES {
        return RecordScan::Invalid("a withdrawn record whose payload is not the record it names");
    }
    let payload = &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len];
    let stored_crc = u32::from_le_bytes(header[RECORD_CRC_AT..].try_into().expect("4 bytes"));
    let mut zeroed = [0u8; RECORD_HEADER_BYTES];
    zeroed[..RECORD_CRC_AT].copy_from_slice(&header[..RECORD_CRC_AT]);
    let crc = crc32c::crc32c_append(
        crc32c::crc32c_append(record_crc_seed(block), &zeroed),
        payload,
    );
    if crc != stored_crc {
        return RecordScan::Invalid("a record whose checksum does not match (or of another block)");
    }
    RecordScan::Valid(Record {
        kind,
        flags: header[1],
        table: u16::from_le_bytes(header[2..4].try_into().expect("2 bytes")),
        txn_id: u64::from_le_bytes(header[8..16].try_into().expect("8 bytes")),
        slot: u16::from_le_bytes(header[16..18].try_into().expect("2 bytes")),
        sequence: u16::from_le_bytes(header[18..20].try_into().expect("2 bytes")),
        payload,
    })
}

/// A catalog record: `len:u32 | crc32c:u32 | payload` padded to 8, the payload a table's
/// name and schema as the log writes them (`codec::put_schema`). The CRC covers the length
/// and the payload.
pub(crate) fn encode_catalog_record(schema: &TableSchema) -> Vec<u8> {
    let mut payload = Vec::new();
    codec::put_schema(&mut payload, schema);
    let mut out = Vec::with_capacity(8 + payload.len().div_ceil(8) * 8);
    codec::put_u32(&mut out, payload.len() as u32);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..4]), &payload);
    codec::put_u32(&mut out, crc);
    out.extend_from_slice(&payload);
    out.resize(8 + payload.len().div_ceil(8) * 8, 0);
    out
}

/// The tables a catalog area defines, in the order they were created, and where the next
/// record goes. A record cut by a crash at the end (nothing valid after it) is a torn tail:
/// its `create_table` never returned, so it is dropped. An invalid record with a valid one
/// after it is corruption.
pub(crate) fn decode_catalog(
    area: &[u8],
    what: &str,
    area_offset: u64,
) -> Result<(Vec<(String, Schema)>, usize)> {
    let mut tables = Vec::new();
    let mut at = 0usize;
    loop {
        match catalog_record_at(area, at) {
            CatalogScan::End => return Ok((tables, at)),
            CatalogScan::Valid { payload, next } => {
                let mut reader = Reader::new(payload);
                match reader.schema() {
                    Ok(table) if reader.is_empty() => tables.push(table),
                    Ok(_) => {
                        return Err(catalog_corruption(
                            what,
                            area_offset + at as u64,
                            "bytes after a table definition".into(),
                        ))
                    }
                    Err(e) => {
                        return Err(catalog_corruption(what, area_offset + at as u64, e.reason))
                    }
                }
                at = next;
            }
            CatalogScan::Invalid(reason) => {
                // Torn tail or corruption: is there any valid record after this one?
                let later = (at + 8..area.len()).step_by(8).any(|later| {
                    matches!(catalog_record_at(area, later), CatalogScan::Valid { .. })
                });
                if later {
                    return Err(catalog_corruption(
                        what,
                        area_offset + at as u64,
                        reason.into(),
                    ));
                }
                return Ok((tables, at));
            }
        }
    }
}

fn catalog_corruption(what: &str, offset: u64, reason: String) -> Error {
    Error::Corruption {
        file: what.to_string(),
        offset,
        reason: format!("in the persistent-memory catalog: {reason}"),
    }
}

enum CatalogScan<'a> {
    Valid { payload: &'a [u8], next: usize },
    End,
    Invalid(&'static str),
}

fn catalog_record_at(area: &[u8], at: usize) -> CatalogScan<'_> {
    let Some(header) = area.get(at..at + 8) else {
        return CatalogScan::End;
    };
    if header.iter().all(|&b| b == 0) {
        return CatalogScan::End;
    }
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let Some(payload) = area.get(at + 8..(at + 8).saturating_add(len)) else {
        return CatalogScan::Invalid("a catalog record longer than the catalog");
    };
    let stored = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    if crc32c::crc32c_append(crc32c::crc32c(&header[..4]), payload) != stored {
        return CatalogScan::Invalid("a catalog record whose checksum does not match");
    }
    CatalogScan::Valid {
        payload,
        next: at + 8 + len.div_ceil(8) * 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::PrimaryKeyIndex;
    use crate::value::ColumnType;
    use proptest::prelude::*;

    fn geometry() -> Geometry {
        Geometry::plan(64 << 20, &Plan::default()).unwrap()
    }

    fn people() -> TableSchema {
        Schema::new()
            .column("id", ColumnType::U64)
            .column("name", ColumnType::Text)
            .primary_key(&["id"])
            .primary_key_index(PrimaryKeyIndex::OrderedOnly)
            .index("by_name", &["name"])
            .validate("people")
            .unwrap()
    }

    #[test]
    fn a_planned_geometry_fits_its_region_aligned_and_in_order() {
        for bytes in [2u64 << 20, 64 << 20, 8 << 30] {
            let g = Geometry::plan(bytes, &Plan::default()).unwrap();
            g.check().unwrap();
            assert_eq!(
                g.frame_bytes,
                256 + 1920 * 256,
                "TB's 1,920 slots at 256 bytes each"
            );
            assert!(g.directory_offset + g.frame_count * 8 <= g.catalog_offset);
            assert!(g.catalog_offset + g.catalog_bytes <= g.heap_offset);
            assert!(g.heap_offset + g.frame_count * g.frame_bytes <= bytes);
            // As many frames as fit: one more would not.
            let more = Geometry::with_frames(
                bytes,
                g.slots_per_block,
                g.frame_bytes,
                g.frame_count + 1,
                g.catalog_bytes,
            );
            assert!(more.heap_offset + more.frame_count * more.frame_bytes > bytes);
            for offset in [
                g.catalog_offset,
                g.heap_offset,
                g.frame_offset(g.frame_count - 1),
            ] {
                assert_eq!(offset % 256, 0);
            }
        }
        assert!(matches!(
            Geometry::plan(1 << 20, &Plan::default()),
            Err(Error::UnsupportedConfiguration { .. })
        ));
        let with = |slots_per_block, slot_budget, catalog_bytes| Plan {
            slots_per_block,
            slot_budget,
            catalog_bytes,
        };
        assert!(Geometry::plan(64 << 20, &with(0, 256, CATALOG_BYTES)).is_err());
        assert!(Geometry::plan(64 << 20, &with(1920, 256, 1000)).is_err());
        let small = Geometry::plan(64 << 10, &with(4, 64, MIN_CATALOG_BYTES)).unwrap();
        small.check().unwrap();
        assert!(small.frame_count > 100);
        assert!(Geometry::plan(64 << 20, &with(1921, 256, CATALOG_BYTES)).is_err());
        assert!(Geometry::plan(64 << 20, &with(1920, 8, CATALOG_BYTES)).is_err());
    }

    #[test]
    fn the_superblock_round_trips_and_refuses_what_is_not_it() {
        let superblock = Superblock {
            created_line_bytes: 256,
            geometry: geometry(),
        };
        let bytes = encode_superblock(&superblock);
        assert_eq!(
            decode_superblock(&bytes, 64 << 20, "r").unwrap(),
            superblock
        );
        // Zeros: a region nobody initialized.
        assert!(matches!(
            decode_superblock(&[0; 512], 64 << 20, "r"),
            Err(Error::Corruption { offset: 0, .. })
        ));
        // Another format version.
        let mut newer = bytes;
        newer[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        assert!(matches!(
            decode_superblock(&newer, 64 << 20, "r"),
            Err(Error::UnsupportedFormat {
                found,
                supported: FORMAT_VERSION,
                ..
            }) if found == FORMAT_VERSION + 1
        ));
        // A flipped bit anywhere the checksum covers.
        let mut flipped = bytes;
        flipped[40] ^= 4;
        assert!(matches!(
            decode_superblock(&flipped, 64 << 20, "r"),
            Err(Error::Corruption { .. })
        ));
        // A region of another size than the superblock says.
        assert!(matches!(
            decode_superblock(&bytes, 32 << 20, "r"),
            Err(Error::Corruption { offset: 16, .. })
        ));
    }

    #[test]
    fn directory_words_round_trip_and_a_zero_word_is_a_free_frame() {
        assert_eq!(
            DirectoryEntry::decode(0).unwrap(),
            DirectoryEntry {
                state: FrameState::Free,
                run: 0,
                generation: 0
            }
        );
        for (state, run) in [
            (FrameState::Free, 0),
            (FrameState::Open, 1),
            (FrameState::Sealed, 7),
            (FrameState::Frozen, MAX_RUN_FRAMES),
            (FrameState::Tail, 3),
            (FrameState::Scratch, 2),
        ] {
            let entry = DirectoryEntry {
                state,
                run,
                generation: GENERATION_MASK,
            };
            assert_eq!(DirectoryEntry::decode(entry.encode()).unwrap(), entry);
        }
        assert!(
            DirectoryEntry::decode(6 << 61 | 1 << 40).is_err(),
            "unknown state"
        );
        assert!(
            DirectoryEntry::decode(5 << 61).is_err(),
            "a scratch run of no frames"
        );
        assert!(
            DirectoryEntry::decode(1 << 61).is_err(),
            "an open block of no frames"
        );
        assert!(
            DirectoryEntry::decode(1 << 40).is_err(),
            "a free frame with a run"
        );
    }

    fn word(state: FrameState, run: u32, generation: u64) -> u64 {
        DirectoryEntry {
            state,
            run,
            generation,
        }
        .encode()
    }

    #[test]
    fn a_directory_scan_lists_blocks_frees_torn_runs_and_refuses_the_impossible() {
        let words = [
            word(FrameState::Sealed, 1, 3),
            0,
            word(FrameState::Open, 3, 0),
            word(FrameState::Tail, 1, 0),
            word(FrameState::Tail, 2, 0),
            word(FrameState::Free, 0, 9),
            word(FrameState::Frozen, 1, 1),
        ];
        let scan = scan_directory(&words).unwrap();
        assert!(scan.torn_frames.is_empty());
        assert_eq!(scan.blocks.len(), 3);
        let b = scan.blocks[1];
        assert_eq!((b.first_frame, b.frames, b.state), (2, 3, FrameState::Open));
        assert_eq!(scan.blocks[2].state, FrameState::Frozen);
        // A power loss inside the persist of the allocation or the free of frames 2..5:
        // the head kept and a tail lost, or the head lost and the tails kept.
        let mut lost_tail = words;
        lost_tail[3] = 0;
        let scan = scan_directory(&lost_tail).unwrap();
        assert_eq!(scan.blocks.len(), 2);
        assert_eq!(scan.torn_frames, [2, 4]);
        let mut lost_head = words;
        lost_head[2] = word(FrameState::Free, 0, 1);
        assert_eq!(scan_directory(&lost_head).unwrap().torn_frames, [3, 4]);
        // What no crash makes: a tail after another block's frame, a tail of the wrong
        // distance, a run past the end.
        let mut misplaced = words;
        misplaced[1] = word(FrameState::Tail, 1, 0);
        assert_eq!(scan_directory(&misplaced).unwrap_err().0, 1);
        let mut wrong = words;
        wrong[4] = word(FrameState::Tail, 1, 0);
        assert_eq!(scan_directory(&wrong).unwrap_err().0, 4);
        let past = [word(FrameState::Sealed, 4, 0), word(FrameState::Tail, 1, 0)];
        assert_eq!(scan_directory(&past).unwrap_err().0, 0);
        // A whole `Scratch` run (a version index) is freed, never listed; a torn one too.
        let scratch = [
            word(FrameState::Scratch, 2, 0),
            word(FrameState::Tail, 1, 0),
            word(FrameState::Sealed, 1, 5),
        ];
        let scan = scan_directory(&scratch).unwrap();
        assert_eq!(scan.scratch_frames, [0, 1]);
        assert!(scan.torn_frames.is_empty());
        assert_eq!(scan.blocks.len(), 1);
        let mut torn_scratch = scratch;
        torn_scratch[1] = 0;
        let scan = scan_directory(&torn_scratch).unwrap();
        assert_eq!(scan.torn_frames, [0]);
        assert_eq!(scan.blocks.len(), 1);
    }

    #[test]
    fn records_round_trip_and_a_flipped_bit_or_a_cut_is_invalid() {
        let payload = b"a packed row of thirteen".to_vec();
        let record = Record {
            kind: RecordKind::Version,
            flags: 0,
            table: 4095,
            txn_id: 77,
            slot: 1919,
            sequence: 65535,
            payload: &payload,
        };
        let bytes = encode_record(&record, 7);
        assert_eq!(bytes.len(), 24 + 24);
        let mut block = bytes.clone();
        block.extend_from_slice(&[0; 64]);
        let RecordScan::Valid(decoded) = decode_record(&block, 7) else {
            panic!("valid")
        };
        assert_eq!(decoded, record);
        assert_eq!(
            decode_record(&block[decoded.stored_bytes()..], 7),
            RecordScan::End
        );
        for bit in [0, 9, 17 * 8, 30 * 8 + 3] {
            let mut flipped = block.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(decode_record(&flipped, 7), RecordScan::Invalid(_)),
                "bit {bit}"
            );
        }
        assert!(
            matches!(decode_record(&bytes[..40], 7), RecordScan::Invalid(_)),
            "cut by the block's end"
        );
        // Of another block (the same frames, another generation): invalid.
        assert!(matches!(decode_record(&block, 8), RecordScan::Invalid(_)));
        let commit = encode_record(
            &Record {
                kind: RecordKind::Commit,
                flags: 0,
                table: 0,
                txn_id: 77,
                slot: 0,
                sequence: 0,
                payload: &commit_payload(3),
            },
            7,
        );
        let RecordScan::Valid(decoded) = decode_record(&commit, 7) else {
            panic!("valid")
        };
        assert_eq!(decoded.payload, &commit_payload(3));
    }

    /// Found by the tile-block collection's crash test: a block's frames freed and
    /// allocated to a new block keep the old block's bytes past the new one's appends, so a
    /// reader of the new block ran on into the old block's records wherever one began
    /// where the new block's appends ended (same-sized records make that likely), taking a
    /// superseded, deleted key's version for one of the new block's. The checksum now
    /// covers the block's frame and generation.
    #[test]
    fn regression_stale_records_in_reused_frames_are_not_read_as_the_new_blocks() {
        let record = |txn_id: u64, slot: u16| Record {
            kind: RecordKind::Version,
            flags: 0,
            table: 1,
            txn_id,
            slot,
            sequence: 0,
            payload: b"sixteen bytes!!!",
        };
        let (old, new) = (block_key(3, 0), block_key(3, 1));
        let mut frames = Vec::new();
        for slot in 0..4 {
            frames.extend_from_slice(&encode_record(&record(10 + u64::from(slot), slot), old));
        }
        frames.extend_from_slice(&[0; 64]);
        // The new block at the same frames appends two records of the same size.
        let mut at = 0;
        for slot in 0..2 {
            let bytes = encode_record(&record(50 + u64::from(slot), slot), new);
            frames[at..at + bytes.len()].copy_from_slice(&bytes);
            at += bytes.len();
        }
        let mut read = Vec::new();
        let mut at = 0;
        while let RecordScan::Valid(r) = decode_record(&frames[at..], new) {
            read.push(r.txn_id);
            at += r.stored_bytes();
        }
        assert_eq!(
            read,
            [50, 51],
            "the old block's records 12 and 13 are not the new one's"
        );
    }

    #[test]
    fn the_catalog_lists_its_tables_drops_a_torn_tail_and_refuses_corruption() {
        let mut area = vec![0u8; 4096];
        let first = encode_catalog_record(&people());
        let mut second_schema = people();
        second_schema.name = "others".into();
        let second = encode_catalog_record(&second_schema);
        area[..first.len()].copy_from_slice(&first);
        area[first.len()..first.len() + second.len()].copy_from_slice(&second);
        let (tables, end) = decode_catalog(&area, "r", 1000).unwrap();
        assert_eq!(
            tables.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["people", "others"]
        );
        assert_eq!(end, first.len() + second.len());
        // The second record torn: dropped, and the next one goes where it began.
        let mut torn = area.clone();
        torn[first.len() + 12] ^= 0xFF;
        let (tables, end) = decode_catalog(&torn, "r", 1000).unwrap();
        assert_eq!(tables.len(), 1);
        assert_eq!(end, first.len());
        // The first record damaged while the second is whole: corruption, at its offset.
        let mut corrupt = area.clone();
        corrupt[12] ^= 0xFF;
        assert!(matches!(
            decode_catalog(&corrupt, "r", 1000),
            Err(Error::Corruption { offset: 1000, .. })
        ));
    }

    proptest! {
        /// Random bytes: every decoder answers (a value or a typed error) without panicking.
        #[test]
        fn decoders_never_panic_on_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..700), word in any::<u64>()) {
            let _ = decode_superblock(&bytes, bytes.len() as u64, "r");
            let _ = decode_record(&bytes, 7);
            let _ = decode_catalog(&bytes, "r", 0);
            let _ = DirectoryEntry::decode(word);
            let words: Vec<u64> = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
            let _ = scan_directory(&words);
        }

        /// Valid bytes mutated: a mutation the checksum covers is never taken for a valid
        /// record that differs from the original.
        #[test]
        fn mutated_records_and_superblocks_are_refused_or_unchanged(
            payload in prop::collection::vec(any::<u8>(), 0..200),
            position in any::<prop::sample::Index>(),
            mask in 1u8..,
        ) {
            let record = Record { kind: RecordKind::Tombstone, flags: 0, table: 3, txn_id: 9, slot: 5, sequence: 2, payload: &payload };
            let mut bytes = encode_record(&record, 7);
            let i = position.index(bytes.len());
            bytes[i] ^= mask;
            match decode_record(&bytes, 7) {
                RecordScan::Valid(decoded) => prop_assert_eq!(decoded, record, "byte {} is padding", i),
                RecordScan::End | RecordScan::Invalid(_) => {}
            }
            let superblock = Superblock { created_line_bytes: 128, geometry: geometry() };
            let mut bytes = encode_superblock(&superblock);
            let i = position.index(SUPERBLOCK_CRC_AT + 4);
            bytes[i] ^= mask;
            prop_assert!(decode_superblock(&bytes, 64 << 20, "r").is_err());
        }
    }
}
