//! The log's records: how a committed transaction's writes, a table's creation and a sync
//! point are encoded, framed and found again in a segment's bytes.
//!
//! # Framing
//!
//! Every record is a 16-byte header and a body, padded with zeros to a multiple of 8 bytes:
//!
//! ```text
//! | body length: u32 | crc32c: u32 | lsn: u64 | body (length bytes) | zeros to 8 |
//! ```
//!
//! The *LSN* of a record is its position in the log stream (bytes from the stream's
//! start); the header repeats it, so that stale bytes of an earlier use of a recycled
//! segment, or a record seen at the wrong place, never pass for a record here. The CRC
//! covers the body, then the length and the LSN.
//!
//! # Bodies
//!
//! The first byte is the kind:
//! - [`KIND_COMMIT`]: commit timestamp (u64), operation count (u32), then the operations
//!   in the order the transaction made them: insert (table u32, row values), update (table
//!   u32, key values, count u16 and (column u16, value) pairs), delete (table u32, key
//!   values). Logical redo: the same bytes under every version storage.
//! - [`KIND_CREATE_TABLE`]: table index (u32), name and schema.
//! - [`KIND_SYNC_POINT`]: an LSN below which every byte of the log was synced before this
//!   record was written. Recovery uses it to tell a torn tail (a bad record after which no
//!   sync point vouches for anything) from corruption (a bad record that a later sync
//!   point says was synced).

use crate::durability::codec::{self, DecodeError, Decoded, Reader};
use crate::row::ValueRef;
use crate::schema::TableSchema;
use crate::value::Value;

/// Bytes of a record's header.
pub(crate) const HEADER_BYTES: usize = 16;
/// Records start at multiples of this many bytes of the stream.
pub(crate) const ALIGN: usize = 8;
/// The largest body a record may have (a transaction's writes; 1 GiB).
pub(crate) const MAX_BODY_BYTES: usize = 1 << 30;

pub(crate) const KIND_COMMIT: u8 = 1;
pub(crate) const KIND_CREATE_TABLE: u8 = 2;
pub(crate) const KIND_SYNC_POINT: u8 = 3;
/// The disk engine's page changes (`disk::page_log`), in the disk engine's log only.
pub(crate) const KIND_PAGES: u8 = 4;

const OP_INSERT: u8 = 1;
const OP_UPDATE: u8 = 2;
const OP_DELETE: u8 = 3;

/// Offsets inside a commit record as [`Redo`] builds it.
const COMMIT_TS_AT: usize = HEADER_BYTES + 1;
const COMMIT_COUNT_AT: usize = COMMIT_TS_AT + 8;
const COMMIT_OPS_AT: usize = COMMIT_COUNT_AT + 4;

/// The bytes a record occupies in the stream for a body of `body` bytes.
pub(crate) fn framed_len(body: usize) -> usize {
    HEADER_BYTES + body.div_ceil(ALIGN) * ALIGN
}

fn checksum(body: &[u8], len: u32, lsn: u64) -> u32 {
    let mut tail = [0u8; 12];
    tail[..4].copy_from_slice(&len.to_le_bytes());
    tail[4..].copy_from_slice(&lsn.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(body), &tail)
}

/// A record being built: the header's room, then the body, then room for padding.
/// [`FramedRecord::frame`] fills the header once the LSN is known (under the log's append
/// lock: that part is a few stores; the body's checksum was computed before).
pub(crate) struct FramedRecord {
    bytes: Vec<u8>,
    body_crc: u32,
}

impl FramedRecord {
    fn from_body_in_place(mut bytes: Vec<u8>) -> Self {
        debug_assert!(bytes.len() > HEADER_BYTES);
        let body_len = bytes.len() - HEADER_BYTES;
        let body_crc = crc32c::crc32c(&bytes[HEADER_BYTES..]);
        bytes.resize(framed_len(body_len), 0);
        let len = u32::try_from(body_len).expect("bodies stay below MAX_BODY_BYTES");
        bytes[..4].copy_from_slice(&len.to_le_bytes());
        FramedRecord { bytes, body_crc }
    }

    /// A record with this body.
    pub(crate) fn with_body(body: &[u8]) -> Self {
        let mut bytes = Vec::with_capacity(framed_len(body.len()));
        bytes.resize(HEADER_BYTES, 0);
        bytes.extend_from_slice(body);
        Self::from_body_in_place(bytes)
    }

    /// The bytes it occupies in the stream.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Fills in the LSN and the checksum; returns the record's bytes.
    pub(crate) fn frame(&mut self, lsn: u64) -> &[u8] {
        debug_assert_eq!(lsn % ALIGN as u64, 0, "records are aligned");
        let len = u32::from_le_bytes(self.bytes[..4].try_into().expect("4 bytes"));
        let mut tail = [0u8; 12];
        tail[..4].copy_from_slice(&len.to_le_bytes());
        tail[4..].copy_from_slice(&lsn.to_le_bytes());
        let crc = crc32c::crc32c_append(self.body_crc, &tail);
        self.bytes[4..8].copy_from_slice(&crc.to_le_bytes());
        self.bytes[8..16].copy_from_slice(&lsn.to_le_bytes());
        &self.bytes
    }

    /// Gives the buffer back for reuse (emptied).
    pub(crate) fn into_buffer(mut self) -> Vec<u8> {
        self.bytes.clear();
        self.bytes
    }
}

/// A transaction's redo, assembled as it writes: what its commit record will hold.
/// Nothing of it reaches the log unless the transaction commits.
#[derive(Default)]
pub(crate) struct Redo {
    /// Empty until the first operation; then the header's room, the kind, the commit
    /// timestamp's and the count's room, and the operations.
    bytes: Vec<u8>,
    ops: u32,
}

impl Redo {
    /// A redo that reuses `buffer`'s allocation.
    pub(crate) fn with_buffer(buffer: Vec<u8>) -> Self {
        debug_assert!(buffer.is_empty());
        Redo {
            bytes: buffer,
            ops: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ops == 0
    }

    fn begin_op(&mut self, op: u8, table: u32) {
        if self.bytes.is_empty() {
            self.bytes.resize(COMMIT_OPS_AT, 0);
            self.bytes[HEADER_BYTES] = KIND_COMMIT;
        }
        self.ops += 1;
        codec::put_u8(&mut self.bytes, op);
        codec::put_u32(&mut self.bytes, table);
    }

    pub(crate) fn insert(&mut self, table: u32, row: &[Value]) {
        self.begin_op(OP_INSERT, table);
        codec::put_values(&mut self.bytes, row.iter().map(ValueRef::from));
    }

    pub(crate) fn update<'k>(
        &mut self,
        table: u32,
        key: impl ExactSizeIterator<Item = ValueRef<'k>>,
        changes: &[(usize, Value)],
    ) {
        self.begin_op(OP_UPDATE, table);
        codec::put_values(&mut self.bytes, key);
        codec::put_u16(&mut self.bytes, changes.len() as u16);
        for (column, value) in changes {
            codec::put_u16(&mut self.bytes, *column as u16);
            codec::put_value(&mut self.bytes, value.into());
        }
    }

    pub(crate) fn delete(&mut self, table: u32, key: &[Value]) {
        self.begin_op(OP_DELETE, table);
        codec::put_values(&mut self.bytes, key.iter().map(ValueRef::from));
    }

    /// The commit record of these operations at `commit_ts`, ready to be framed.
    pub(crate) fn seal(mut self, commit_ts: u64) -> FramedRecord {
        debug_assert!(!self.is_empty());
        self.bytes[COMMIT_TS_AT..COMMIT_COUNT_AT].copy_from_slice(&commit_ts.to_le_bytes());
        self.bytes[COMMIT_COUNT_AT..COMMIT_OPS_AT].copy_from_slice(&self.ops.to_le_bytes());
        FramedRecord::from_body_in_place(self.bytes)
    }
}

/// The body of a table's creation.
pub(crate) fn create_table_body(table: u32, schema: &TableSchema) -> Vec<u8> {
    let mut body = vec![KIND_CREATE_TABLE];
    codec::put_u32(&mut body, table);
    codec::put_schema(&mut body, schema);
    body
}

/// The body of a sync point.
pub(crate) fn sync_point_body(synced_below: u64) -> Vec<u8> {
    let mut body = vec![KIND_SYNC_POINT];
    codec::put_u64(&mut body, synced_below);
    body
}

/// A decoded record body.
#[derive(Debug)]
pub(crate) enum Record<'a> {
    Commit {
        commit_ts: u64,
        ops: OpReader<'a>,
    },
    CreateTable {
        table: u32,
        name: String,
        schema: crate::Schema,
    },
    SyncPoint {
        synced_below: u64,
    },
}

/// Decodes a record's body.
pub(crate) fn decode_body(body: &[u8]) -> Decoded<Record<'_>> {
    let mut reader = Reader::new(body);
    match reader.u8("a record kind")? {
        KIND_COMMIT => {
            let commit_ts = reader.u64("a commit timestamp")?;
            let count = reader.u32("an operation count")?;
            let offset = reader.position();
            let ops = reader.take(reader.remaining(), "operations")?;
            Ok(Record::Commit {
                commit_ts,
                ops: OpReader {
                    reader: Reader::new(ops),
                    offset,
                    left: count,
                },
            })
        }
        KIND_CREATE_TABLE => {
            let table = reader.u32("a table index")?;
            let (name, schema) = reader.schema()?;
            if !reader.is_empty() {
                return reader.error("bytes after a table's schema");
            }
            Ok(Record::CreateTable {
                table,
                name,
                schema,
            })
        }
        KIND_SYNC_POINT => {
            let synced_below = reader.u64("a synced LSN")?;
            Ok(Record::SyncPoint { synced_below })
        }
        other => reader.error(format!("unknown record kind {other}")),
    }
}

/// One write of a committed transaction, decoded into buffers the caller reuses.
#[derive(Debug, PartialEq)]
pub(crate) enum Op {
    /// Insert the row (`values`).
    Insert { table: u32 },
    /// Set `changes` on the row with key `key`.
    Update { table: u32 },
    /// Delete the row with key `key`.
    Delete { table: u32 },
}

/// Buffers an operation is decoded into.
#[derive(Debug, Default)]
pub(crate) struct OpBuffers {
    /// The inserted row, or the key of an update or delete.
    pub(crate) values: Vec<Value>,
    pub(crate) changes: Vec<(usize, Value)>,
}

/// The operations of a commit record, one at a time.
#[derive(Debug)]
pub(crate) struct OpReader<'a> {
    reader: Reader<'a>,
    /// Where the operations start in the body (for error offsets).
    offset: usize,
    left: u32,
}

impl OpReader<'_> {
    /// The next operation, or `None` after the last. Checks that the count and the bytes
    /// agree.
    pub(crate) fn next_op(&mut self, into: &mut OpBuffers) -> Decoded<Option<Op>> {
        let shift = |e: DecodeError, offset: usize| DecodeError {
            offset: e.offset + offset,
            reason: e.reason,
        };
        if self.left == 0 {
            if !self.reader.is_empty() {
                return self
                    .reader
                    .error("bytes after the last operation")
                    .map_err(|e| shift(e, self.offset));
            }
            return Ok(None);
        }
        self.left -= 1;
        let offset = self.offset;
        self.read_op(into).map(Some).map_err(|e| shift(e, offset))
    }

    fn read_op(&mut self, into: &mut OpBuffers) -> Decoded<Op> {
        let r = &mut self.reader;
        let op = r.u8("an operation")?;
        let table = r.u32("a table index")?;
        r.values_into(&mut into.values)?;
        into.changes.clear();
        Ok(match op {
            OP_INSERT => Op::Insert { table },
            OP_DELETE => Op::Delete { table },
            OP_UPDATE => {
                let count = r.u16("a change count")? as usize;
                if count > crate::schema::MAX_COLUMNS {
                    return r.error(format!("{count} changes; a row has at most 128 columns"));
                }
                for _ in 0..count {
                    let column = r.u16("a changed column")? as usize;
                    into.changes.push((column, r.value()?));
                }
                Op::Update { table }
            }
            other => return r.error(format!("unknown operation {other}")),
        })
    }
}

/// How a scan of a segment's records ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// At `stop` (the next segment's start), at the end of the bytes, or at the zero
    /// header every write of the log ends with.
    Clean,
    /// At a record that is not whole or not valid, after which no sync point claims
    /// that the bad bytes were ever synced: a write torn by a crash, never acknowledged.
    Torn,
    /// At a bad record that a later valid sync point says was synced: the log lost
    /// bytes it had made durable.
    Corrupt { reason: String },
}

/// What [`scan_records`] found: every valid record until `end_lsn`, and why it stopped.
#[derive(Debug)]
pub(crate) struct Scan {
    /// The LSN after the last valid record.
    pub(crate) end_lsn: u64,
    pub(crate) end: ScanEnd,
}

/// The record at `at` (an offset into `bytes`, whose first byte is LSN `base`), if it is
/// valid there: its body.
fn record_at(bytes: &[u8], base: u64, at: usize) -> Option<&[u8]> {
    let header = bytes.get(at..at.checked_add(HEADER_BYTES)?)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?);
    let crc = u32::from_le_bytes(header[4..8].try_into().ok()?);
    let lsn = u64::from_le_bytes(header[8..16].try_into().ok()?);
    if lsn != base + at as u64 || len == 0 || len as usize > MAX_BODY_BYTES {
        return None;
    }
    let body_at = at + HEADER_BYTES;
    let body = bytes.get(body_at..body_at.checked_add(len as usize)?)?;
    // The padding must be there too: a record is whole only with it.
    bytes.get(at..at + framed_len(len as usize))?;
    (checksum(body, len, lsn) == crc).then_some(body)
}

/// Reads the records of a segment: `bytes` are its records' bytes, the first at LSN
/// `base`. Calls `visit` with each valid record's LSN and body, in order, until the bytes
/// end, LSN `stop` is reached (the next segment's start; bytes after it are stale), or a
/// record is bad; then decides whether the bad record is a torn tail or corruption by
/// looking for a later valid sync point that vouches for it.
pub(crate) fn scan_records<'b, E>(
    bytes: &'b [u8],
    base: u64,
    stop: Option<u64>,
    mut visit: impl FnMut(u64, &'b [u8]) -> Result<(), E>,
) -> Result<Scan, E> {
    debug_assert_eq!(base % ALIGN as u64, 0);
    let mut at = 0usize;
    loop {
        let lsn = base + at as u64;
        if stop == Some(lsn) {
            return Ok(Scan {
                end_lsn: lsn,
                end: ScanEnd::Clean,
            });
        }
        if stop.is_some_and(|stop| lsn > stop) {
            return Ok(Scan {
                end_lsn: lsn,
                end: ScanEnd::Corrupt {
                    reason: format!(
                        "a record runs past LSN {}, where the next segment starts",
                        stop.unwrap_or_default()
                    ),
                },
            });
        }
        match record_at(bytes, base, at) {
            Some(body) => {
                visit(lsn, body)?;
                at += framed_len(body.len());
            }
            None => {
                let end = judge_bad_record(bytes, base, at, stop);
                return Ok(Scan { end_lsn: lsn, end });
            }
        }
    }
}

/// After a bad record at `at`: torn, clean (zeros or nothing left), or corrupt.
fn judge_bad_record(bytes: &[u8], base: u64, at: usize, stop: Option<u64>) -> ScanEnd {
    let lsn = base + at as u64;
    if let Some(stop) = stop {
        // The segment was synced whole before the next one began: every byte up to the
        // next segment's start was durable.
        return ScanEnd::Corrupt {
            reason: format!(
                "a bad record at LSN {lsn}, before LSN {stop} where the next segment starts \
                 (the segment was synced whole before it)"
            ),
        };
    }
    let mut later = at + ALIGN;
    while later + HEADER_BYTES <= bytes.len() {
        if let Some(body) = record_at(bytes, base, later) {
            if let Ok(Record::SyncPoint { synced_below }) = decode_body(body) {
                if synced_below > lsn {
                    return ScanEnd::Corrupt {
                        reason: format!(
                            "a bad record at LSN {lsn}, though a sync point at LSN {} says \
                             every byte below LSN {synced_below} was synced",
                            base + later as u64
                        ),
                    };
                }
            }
        }
        later += ALIGN;
    }
    // Every write of the log ends with a zero header (`log::END_MARKER`), which the next
    // write overwrites: a log whose last write arrived whole ends in one. Anything else is a
    // write a crash interrupted (or the stale bytes of a recycled segment, which no
    // record's LSN can match): cut off either way.
    let rest = &bytes[at.min(bytes.len())..];
    if rest[..rest.len().min(HEADER_BYTES)].iter().all(|&b| b == 0) {
        ScanEnd::Clean
    } else {
        ScanEnd::Torn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream(records: &mut [FramedRecord], base: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for record in records {
            let lsn = base + out.len() as u64;
            out.extend_from_slice(record.frame(lsn));
        }
        out
    }

    fn commit(ts: u64) -> FramedRecord {
        let mut redo = Redo::default();
        redo.insert(3, &[Value::U64(ts), Value::Text("row".into())]);
        redo.update(
            3,
            [ValueRef::U64(ts)].into_iter(),
            &[(1, Value::Text("new".into()))],
        );
        redo.delete(3, &[Value::U64(ts)]);
        redo.seal(ts)
    }

    fn lsns(bytes: &[u8], base: u64, stop: Option<u64>) -> (Vec<u64>, Scan) {
        let mut seen = Vec::new();
        let scan = scan_records::<()>(bytes, base, stop, |lsn, _| {
            seen.push(lsn);
            Ok(())
        })
        .unwrap();
        (seen, scan)
    }

    #[test]
    fn a_commit_record_round_trips() {
        let mut record = commit(7);
        let bytes = record.frame(64).to_vec();
        let body = record_at(&bytes, 64, 0).expect("valid");
        let Record::Commit { commit_ts, mut ops } = decode_body(body).unwrap() else {
            panic!("a commit")
        };
        assert_eq!(commit_ts, 7);
        let mut buffers = OpBuffers::default();
        assert_eq!(
            ops.next_op(&mut buffers).unwrap(),
            Some(Op::Insert { table: 3 })
        );
        assert_eq!(buffers.values, [Value::U64(7), Value::Text("row".into())]);
        assert_eq!(
            ops.next_op(&mut buffers).unwrap(),
            Some(Op::Update { table: 3 })
        );
        assert_eq!(buffers.values, [Value::U64(7)]);
        assert_eq!(buffers.changes, [(1, Value::Text("new".into()))]);
        assert_eq!(
            ops.next_op(&mut buffers).unwrap(),
            Some(Op::Delete { table: 3 })
        );
        assert_eq!(ops.next_op(&mut buffers).unwrap(), None);
    }

    #[test]
    fn a_record_read_at_another_lsn_is_not_valid() {
        let mut record = commit(1);
        let bytes = record.frame(8).to_vec();
        assert!(record_at(&bytes, 8, 0).is_some());
        assert!(
            record_at(&bytes, 16, 0).is_none(),
            "stale bytes from a recycled segment"
        );
    }

    #[test]
    fn zeros_after_the_last_record_end_the_log_cleanly() {
        let mut bytes = stream(&mut [commit(1), commit(2)], 0);
        let end = bytes.len() as u64;
        bytes.resize(bytes.len() + 4096, 0);
        let (seen, scan) = lsns(&bytes, 0, None);
        assert_eq!(seen.len(), 2);
        assert_eq!(scan.end_lsn, end);
        assert_eq!(scan.end, ScanEnd::Clean);
    }

    #[test]
    fn a_bad_record_without_a_later_sync_point_is_a_torn_tail() {
        let mut records = [commit(1), commit(2), commit(3)];
        let mut bytes = stream(&mut records, 0);
        let second = records[0].len();
        bytes[second + HEADER_BYTES + 2] ^= 0xFF;
        let (seen, scan) = lsns(&bytes, 0, None);
        assert_eq!(seen, [0]);
        assert_eq!(scan.end, ScanEnd::Torn);
        assert_eq!(scan.end_lsn, second as u64);
    }

    #[test]
    fn a_bad_record_that_a_later_sync_point_vouches_for_is_corruption() {
        let first = commit(1).len() as u64;
        let mut records = [
            commit(1),
            commit(2),
            FramedRecord::with_body(&sync_point_body(first + 8)),
            commit(3),
        ];
        let mut bytes = stream(&mut records, 0);
        bytes[first as usize + HEADER_BYTES + 2] ^= 0xFF;
        let (_, scan) = lsns(&bytes, 0, None);
        assert!(matches!(scan.end, ScanEnd::Corrupt { .. }), "{scan:?}");
        // A sync point that covers only what came before the bad record is no evidence.
        let mut records = [
            commit(1),
            commit(2),
            FramedRecord::with_body(&sync_point_body(first)),
        ];
        let mut bytes = stream(&mut records, 0);
        bytes[first as usize + HEADER_BYTES + 2] ^= 0xFF;
        assert_eq!(lsns(&bytes, 0, None).1.end, ScanEnd::Torn);
    }

    #[test]
    fn a_segment_ends_where_the_next_begins_and_must_reach_it() {
        let mut records = [commit(1), commit(2)];
        let bytes = stream(&mut records, 0);
        let first = records[0].len() as u64;
        let (seen, scan) = lsns(&bytes, 0, Some(first));
        assert_eq!((seen.len(), scan.end), (1, ScanEnd::Clean));
        let mut cut = bytes.clone();
        cut.truncate(first as usize + 4);
        let (_, scan) = lsns(&cut, 0, Some(bytes.len() as u64));
        assert!(matches!(scan.end, ScanEnd::Corrupt { .. }));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// Random bytes: records or an end, never a panic or a hang.
        #[test]
        fn scanning_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2000), base in 0u64..1000) {
            let base = base * ALIGN as u64;
            let _ = scan_records::<()>(&bytes, base, None, |_, body| {
                if let Ok(Record::Commit { mut ops, .. }) = decode_body(body) {
                    let mut buffers = OpBuffers::default();
                    while let Ok(Some(_)) = ops.next_op(&mut buffers) {}
                }
                Ok(())
            });
        }

        /// A valid stream with bytes changed or cut: what is read before the damage is
        /// exactly what was written, and nothing panics.
        #[test]
        fn damage_never_changes_the_records_read_before_it(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4), cut in any::<prop::sample::Index>()) {
            let mut records: Vec<FramedRecord> = (1..6).map(commit).collect();
            let original = stream(&mut records, 0);
            let mut bytes = original.clone();
            let first_damage = flips.iter().map(|(i, _)| i.index(bytes.len())).min().unwrap_or(bytes.len());
            for (i, b) in &flips {
                let i = i.index(bytes.len());
                bytes[i] ^= b | 1;
            }
            let cut = cut.index(bytes.len() + 1);
            bytes.truncate(cut);
            let damage = first_damage.min(cut);
            let (seen, _) = lsns(&bytes, 0, None);
            let mut expected_lsn = 0u64;
            for (record, lsn) in records.iter().zip(&seen) {
                prop_assert_eq!(*lsn, expected_lsn);
                expected_lsn += record.len() as u64;
            }
            // Every record that ends before the damage is read.
            let whole = records.iter().scan(0u64, |end, r| { *end += r.len() as u64; Some(*end) })
                .take_while(|&end| end as usize <= damage).count();
            prop_assert!(seen.len() >= whole);
        }
    }
}
