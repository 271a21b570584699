//! The undo space of InnoDB's design (`disk::clustered`): the before-images of updated and
//! deleted rows, in undo pages of one file through the buffer pool, every change in the
//! page log; each writing transaction's undo log (its records, on pages of its own, as
//! InnoDB's undo log segments), the history list of committed logs purge works through,
//! and what recovery needs to roll back the transactions a crash ended (design note:
//! `docs/design/buffer-pool.md`, "InnoDB's design: undo and purge").
//!
//! # Layout
//!
//! Every page of the file is an undo page ([`KIND_UNDO_PAGE`]) or not yet formatted (a
//! page the file was extended by whose format the crash lost; it is free). An undo page's
//! body starts with its header:
//!
//! ```text
//! | taker xid u64 (0: free) | generation u32 | reserved u32 | used u16 | records u16 | done u16 | reserved u16 |
//! ```
//!
//! then `used` bytes of records, each framed `| length u16 | owner xid u64 | sequence u32 |
//! body |` ([`UndoRecord`] is the body). Pages are shared, as InnoDB reuses a committed
//! log's page for the next logs while it is less than full: every record goes to an
//! *open* page until it is full (then a free or new page opens), whoever its owner, so a
//! transaction that writes one record takes 80-odd bytes, not a page. There are two open
//! pages, one per [`UndoLane`]: records a long snapshot may need for long apart from
//! records soon done, so that pages of the second empty and are freed behind a held
//! snapshot while the first pin only pages of their own. `sequence` orders
//! one owner's records across pages. The top bit of a record's first byte (its kind)
//! says eager pruning unlinked it from its row's chain; the next bit says it is *done*:
//! nothing will read it again (unlinked, or its log purged, rolled back, or of inserts
//! only and committed). `done` counts those. A delete's record unlinked by pruning is not
//! done: it keeps its duty for purge. `generation` grows each time the page is taken from
//! the free list, and a roll pointer ([`RollPtr`]) names it, so a reader holding a
//! pointer into a page that was freed and taken again finds out instead of reading
//! another transaction's record (U3). The taker is the transaction that opened the page
//! (for the curious; nothing depends on it but 0 meaning free).
//!
//! # Invariants
//!
//! - **U1** A transaction's records are appended only by it, in the order of its writes
//!   (their `sequence`), each framed with its id. Its log (its records) is live until its
//!   end, then (committed, with records that purge needs) in the history list until
//!   purged, else done at once; its inserts' records are done at its commit.
//! - **U2** (write-ahead of undo) A record is appended, logged, before the change it undoes
//!   is made to the row: any row change recovery redoes finds its undo record redone
//!   before it.
//! - **U3** A page's generation changes, logged, whenever it is taken from the free list,
//!   and a record is read only under its page's latch after checking the pointer's
//!   generation: a reader never decodes bytes of a record that is not the one its pointer
//!   named.
//! - **U4** A page is freed (taker 0, logged) only when every record on it is done, and
//!   closed first if it is an open page (no record will be appended to it): no row and no record of a
//!   live chain can then lead to one of its records for a reader that needs it. A record
//!   is done at its owner's rollback (the rows were restored first; a log holding records
//!   eager pruning wrote, which restored rows may lead to, waits in the history list
//!   instead), when purge is done with its owner's log (every snapshot sees a newer
//!   version of every row it wrote), at the commit for an insert's record (no reader
//!   follows one), and when eager pruning unlinked it from its chain.
//!
//! # Recovery
//!
//! [`UndoSpace::open`] reads every page after the page log's redo: free pages and pages
//! whose records are all done go to the free list; the records not done are grouped by
//! owner. The engine rolls back every log whose owner did not commit (in progress at the
//! crash, or aborted before its rollback finished: the commit log reads both as aborted,
//! X3), then puts the committed ones in the history list in commit order.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::buffer_pool::{BufferPool, PageMut};
use super::page::{FileNo, PageId, PAGE_HEADER_BYTES, PAGE_SIZE};
use super::page_log::{PageChange, PageLog};
use crate::sync::Mutex;
use crate::{Error, Result};

/// The page kind of undo pages (format 2: shared pages, records framed with their owner).
pub const KIND_UNDO_PAGE: u16 = 0x0DD2;
/// The page kind of the first undo format (a page per transaction), which this build
/// refuses to read.
const KIND_UNDO_PAGE_FORMAT_1: u16 = 0x0DD0;
/// The undo format this build reads.
const UNDO_FORMAT: u32 = 2;

const BODY_BYTES: usize = PAGE_SIZE - PAGE_HEADER_BYTES;
/// Bytes of an undo page's header.
pub const UNDO_HEADER_BYTES: usize = 24;
const TAKER_AT: usize = 0;
const GENERATION_AT: usize = 8;
const USED_AT: usize = 16;
const RECORDS_AT: usize = 18;
const DONE_AT: usize = 20;
/// Bytes of a record's frame before its body: length u16, owner u64, sequence u32.
const FRAME_BYTES: usize = 14;
/// The bit of a record's first byte that says eager pruning unlinked it.
const UNLINKED_BIT: u8 = 0x80;
/// The bit of a record's first byte that says it is done (counted in the page's `done`).
const DONE_BIT: u8 = 0x40;

/// The most bytes a record's body takes (one always fits an empty page).
pub const MAX_UNDO_RECORD_BYTES: usize = BODY_BYTES - UNDO_HEADER_BYTES - FRAME_BYTES;

/// Which open page a record goes to: records a long snapshot is likely to need for long
/// apart from records soon done, so that a page of the second empties and is freed while
/// the first pin only pages of their own kind (behind a held snapshot, a page is freed
/// only when every record on it is done).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UndoLane {
    /// A change whose before-image may be the version an old snapshot reads, or whose
    /// row is cold, and a merged record (a version a snapshot keeps): done when the
    /// snapshot ends.
    Long = 0,
    /// A change of a hot row whose write pruned its row's chain (a row rewritten while
    /// snapshots live: its next writer, soon, prunes this record too), or an insert (done
    /// at commit).
    Short = 1,
}

/// Where a record is: its page, its offset in the page's body, and the page's generation
/// when it was written (U3). [`RollPtr::NONE`] leads nowhere (a row with no older version).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RollPtr {
    /// The undo page.
    pub block: u32,
    /// The record's offset in the page's body.
    pub offset: u16,
    /// The page's generation.
    pub generation: u32,
}

/// Bytes of an encoded roll pointer.
pub const ROLL_PTR_BYTES: usize = 10;

impl Default for RollPtr {
    fn default() -> Self {
        RollPtr::NONE
    }
}

impl RollPtr {
    /// No record.
    pub const NONE: RollPtr = RollPtr {
        block: u32::MAX,
        offset: 0,
        generation: 0,
    };

    /// Whether it leads nowhere.
    pub fn is_none(self) -> bool {
        self.block == u32::MAX
    }

    /// Its bytes.
    pub fn encode(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.block.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
    }

    /// From its bytes ([`ROLL_PTR_BYTES`] of them).
    pub fn decode(bytes: &[u8]) -> RollPtr {
        debug_assert_eq!(bytes.len(), ROLL_PTR_BYTES);
        RollPtr {
            block: u32::from_le_bytes(bytes[0..4].try_into().expect("four bytes")),
            offset: u16::from_le_bytes(bytes[4..6].try_into().expect("two bytes")),
            generation: u32::from_le_bytes(bytes[6..10].try_into().expect("four bytes")),
        }
    }
}

/// What a record undoes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UndoKind {
    /// A row inserted where the table had none: rollback removes it; no reader follows it.
    Insert = 1,
    /// A row replaced (updated, or inserted over a deleted version): the record restores
    /// the version before.
    Update = 2,
    /// A row delete-marked: the record restores it unmarked.
    Delete = 3,
    /// A kept version of a row, written again by eager pruning over the pruned ones (as
    /// an update's record for readers and purge; rollback never applies it).
    Merged = 4,
}

/// One undo record: which row, the version before the change (its creator, roll pointer,
/// delete mark, and its bytes as a delta from the version after), and what the change did
/// to the secondary indexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoRecord {
    /// What it undoes.
    pub kind: UndoKind,
    /// The table's position in the catalog.
    pub table: u32,
    /// The row's encoded primary key.
    pub key: Vec<u8>,
    /// The creator of the version before (0 for an insert).
    pub prev_creator: u64,
    /// The roll pointer of the version before.
    pub prev_roll: RollPtr,
    /// Whether the version before was delete-marked.
    pub prev_deleted: bool,
    /// Secondary indexes (bit `i`: index `i`) whose entry for the version after did not
    /// exist before the change (rollback removes it; else rollback marks it again).
    pub fresh: u64,
    /// The version before as a delta of the version after: its first `prefix` bytes and
    /// last `suffix` bytes are the version after's, `middle` lies between (the changed
    /// columns' span; empty for a delete).
    pub prefix: u32,
    /// See `prefix`.
    pub suffix: u32,
    /// See `prefix`.
    pub middle: Vec<u8>,
    /// The index entries the change delete-marked (index, entry key): purge removes them
    /// once no version a snapshot may need has that key.
    pub marked: Vec<(u16, Vec<u8>)>,
    /// A merged record that holds its version's whole row (`prefix` and `suffix` 0) and
    /// every one of its index keys in `marked`: it restores its version from any newer
    /// one, so a later prune may leave it linked (`ClusteredTable::prune`). Bit 1 of the
    /// delete-mark byte on the page.
    pub whole: bool,
}

impl UndoRecord {
    /// The delta that turns `after` back into `before`: their common prefix and suffix
    /// (not overlapping), and `before`'s bytes between.
    pub fn delta(before: &[u8], after: &[u8]) -> (u32, u32, Vec<u8>) {
        let prefix = before.iter().zip(after).take_while(|(a, b)| a == b).count();
        let room = before.len().min(after.len()) - prefix;
        let suffix = before
            .iter()
            .rev()
            .zip(after.iter().rev())
            .take(room)
            .take_while(|(a, b)| a == b)
            .count();
        let middle = before[prefix..before.len() - suffix].to_vec();
        (prefix as u32, suffix as u32, middle)
    }

    /// The version before, from the version after; `None` if the delta does not fit it
    /// (a record that is not this row's: corruption).
    pub fn restore(&self, after: &[u8]) -> Option<Vec<u8>> {
        let (prefix, suffix) = (self.prefix as usize, self.suffix as usize);
        if prefix.checked_add(suffix)? > after.len() {
            return None;
        }
        let mut before = Vec::with_capacity(prefix + self.middle.len() + suffix);
        before.extend_from_slice(&after[..prefix]);
        before.extend_from_slice(&self.middle);
        before.extend_from_slice(&after[after.len() - suffix..]);
        Some(before)
    }

    /// The record's body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + self.key.len() + self.middle.len());
        out.push(self.kind as u8);
        out.extend_from_slice(&self.table.to_le_bytes());
        out.extend_from_slice(&(self.key.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.key);
        out.extend_from_slice(&self.prev_creator.to_le_bytes());
        self.prev_roll.encode(&mut out);
        out.push(u8::from(self.prev_deleted) | (u8::from(self.whole) << 1));
        out.extend_from_slice(&self.fresh.to_le_bytes());
        out.extend_from_slice(&self.prefix.to_le_bytes());
        out.extend_from_slice(&self.suffix.to_le_bytes());
        out.extend_from_slice(&(self.middle.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.middle);
        out.extend_from_slice(&(self.marked.len() as u16).to_le_bytes());
        for (index, key) in &self.marked {
            out.extend_from_slice(&index.to_le_bytes());
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key);
        }
        out
    }

    /// Decodes a record's body. Never panics, whatever the bytes (fuzzed); the reason of
    /// the first defect otherwise.
    pub fn decode(bytes: &[u8]) -> std::result::Result<UndoRecord, String> {
        let mut at = 0usize;
        let mut take = |n: usize| -> std::result::Result<&[u8], String> {
            let end = at
                .checked_add(n)
                .filter(|&end| end <= bytes.len())
                .ok_or_else(|| {
                    format!(
                        "an undo record ends early (at byte {at} of {})",
                        bytes.len()
                    )
                })?;
            let taken = &bytes[at..end];
            at = end;
            Ok(taken)
        };
        let kind = match take(1)?[0] & !(UNLINKED_BIT | DONE_BIT) {
            1 => UndoKind::Insert,
            2 => UndoKind::Update,
            3 => UndoKind::Delete,
            4 => UndoKind::Merged,
            other => return Err(format!("an undo record of unknown kind {other}")),
        };
        let table = u32::from_le_bytes(take(4)?.try_into().expect("four bytes"));
        let key_len = u16::from_le_bytes(take(2)?.try_into().expect("two bytes")) as usize;
        let key = take(key_len)?.to_vec();
        let prev_creator = u64::from_le_bytes(take(8)?.try_into().expect("eight bytes"));
        let prev_roll = RollPtr::decode(take(ROLL_PTR_BYTES)?);
        let marks = take(1)?[0];
        if marks & !3 != 0 {
            return Err(format!("an undo record's marks are {marks:#04x}"));
        }
        let (prev_deleted, whole) = (marks & 1 != 0, marks & 2 != 0);
        let fresh = u64::from_le_bytes(take(8)?.try_into().expect("eight bytes"));
        let prefix = u32::from_le_bytes(take(4)?.try_into().expect("four bytes"));
        let suffix = u32::from_le_bytes(take(4)?.try_into().expect("four bytes"));
        let middle_len = u16::from_le_bytes(take(2)?.try_into().expect("two bytes")) as usize;
        let middle = take(middle_len)?.to_vec();
        let marked_count = u16::from_le_bytes(take(2)?.try_into().expect("two bytes"));
        let mut marked = Vec::with_capacity(marked_count.min(64) as usize);
        for _ in 0..marked_count {
            let index = u16::from_le_bytes(take(2)?.try_into().expect("two bytes"));
            let len = u16::from_le_bytes(take(2)?.try_into().expect("two bytes")) as usize;
            marked.push((index, take(len)?.to_vec()));
        }
        if at != bytes.len() {
            return Err(format!("{} bytes after an undo record", bytes.len() - at));
        }
        if whole && (kind != UndoKind::Merged || prefix != 0 || suffix != 0) {
            return Err(format!(
                "an undo record of kind {kind:?} with a delta of {prefix} + {suffix} bytes says it holds a whole row"
            ));
        }
        Ok(UndoRecord {
            kind,
            table,
            key,
            prev_creator,
            prev_roll,
            prev_deleted,
            fresh,
            prefix,
            suffix,
            middle,
            marked,
            whole,
        })
    }
}

/// An undo page's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    /// The transaction that took the page from the free list (0: the page is free).
    taker: u64,
    generation: u32,
    used: u16,
    records: u16,
    /// Records done (no reader, rollback or purge reads them again).
    done: u16,
}

impl Header {
    fn read(body: &[u8]) -> Header {
        let u16_at = |at: usize| u16::from_le_bytes(body[at..at + 2].try_into().expect("two"));
        let u32_at = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().expect("four"));
        Header {
            taker: u64::from_le_bytes(body[TAKER_AT..TAKER_AT + 8].try_into().expect("eight")),
            generation: u32_at(GENERATION_AT),
            used: u16_at(USED_AT),
            records: u16_at(RECORDS_AT),
            done: u16_at(DONE_AT),
        }
    }

    fn bytes(&self) -> [u8; UNDO_HEADER_BYTES] {
        let mut out = [0u8; UNDO_HEADER_BYTES];
        out[TAKER_AT..TAKER_AT + 8].copy_from_slice(&self.taker.to_le_bytes());
        out[GENERATION_AT..GENERATION_AT + 4].copy_from_slice(&self.generation.to_le_bytes());
        out[USED_AT..USED_AT + 2].copy_from_slice(&self.used.to_le_bytes());
        out[RECORDS_AT..RECORDS_AT + 2].copy_from_slice(&self.records.to_le_bytes());
        out[DONE_AT..DONE_AT + 2].copy_from_slice(&self.done.to_le_bytes());
        out
    }

    /// Whether the header is one an undo page can have (else the page is corrupt).
    fn is_sane(&self) -> bool {
        UNDO_HEADER_BYTES + self.used as usize <= BODY_BYTES && self.done <= self.records
    }

    /// Whether the page may be freed: every record done (U4; the caller checks it is not
    /// the open page).
    fn all_done(&self) -> bool {
        self.done == self.records
    }
}

/// The error for a page of the first undo format (a page per transaction).
fn format_1_refused() -> Error {
    Error::UnsupportedFormat {
        file: "the undo file".into(),
        found: 1,
        supported: UNDO_FORMAT,
    }
}

/// Redoes a logged write of bytes into an undo page's body ([`PageChange::UndoWrite`]).
pub(crate) fn redo_write(page: &mut PageMut<'_>, at: u16, bytes: &[u8]) -> Result<()> {
    let id = page.id();
    if page.kind() == KIND_UNDO_PAGE_FORMAT_1 {
        return Err(format_1_refused());
    }
    let end = at as usize + bytes.len();
    if page.kind() != KIND_UNDO_PAGE || end > BODY_BYTES {
        return Err(Error::Corruption {
            file: format!("undo file {}", id.file.0),
            offset: id.offset(),
            reason: format!(
                "an undo write of {} bytes at {at} on a page of kind {:#06x}",
                bytes.len(),
                page.kind()
            ),
        });
    }
    page.body_mut()[at as usize..end].copy_from_slice(bytes);
    Ok(())
}

/// One framed record on a page, as [`page_records`] finds it.
#[derive(Clone, Copy, Debug)]
struct Frame<'a> {
    /// The frame's offset in the page's body (a roll pointer's `offset`).
    at: u16,
    owner: u64,
    sequence: u32,
    /// The record's body; its first byte is the kind with the unlinked and done bits.
    body: &'a [u8],
}

impl Frame<'_> {
    fn flags(&self) -> u8 {
        self.body.first().copied().unwrap_or(0)
    }

    fn unlinked(&self) -> bool {
        self.flags() & UNLINKED_BIT != 0
    }

    fn done(&self) -> bool {
        self.flags() & DONE_BIT != 0
    }
}

/// The records of one page, each framed; a defect (including a `done` count that does not
/// match the records' bits) is the page's corruption.
fn page_records(body: &[u8]) -> std::result::Result<Vec<Frame<'_>>, String> {
    let header = Header::read(body);
    if !header.is_sane() {
        return Err(format!(
            "an undo page claims {} bytes used and {} of {} records done",
            header.used, header.done, header.records
        ));
    }
    let end = UNDO_HEADER_BYTES + header.used as usize;
    let mut at = UNDO_HEADER_BYTES;
    let mut records = Vec::with_capacity(header.records as usize);
    while at < end {
        if at + FRAME_BYTES > end {
            return Err(format!("an undo record's frame cut at byte {at}"));
        }
        let len = u16::from_le_bytes(body[at..at + 2].try_into().expect("two")) as usize;
        if len == 0 || at + FRAME_BYTES + len > end {
            return Err(format!(
                "an undo record at byte {at} of {len} bytes runs past the page's used bytes"
            ));
        }
        records.push(Frame {
            at: at as u16,
            owner: u64::from_le_bytes(body[at + 2..at + 10].try_into().expect("eight")),
            sequence: u32::from_le_bytes(body[at + 10..at + 14].try_into().expect("four")),
            body: &body[at + FRAME_BYTES..at + FRAME_BYTES + len],
        });
        at += FRAME_BYTES + len;
    }
    if records.len() != header.records as usize {
        return Err(format!(
            "an undo page claims {} records and holds {}",
            header.records,
            records.len()
        ));
    }
    let done = records.iter().filter(|frame| frame.done()).count();
    if done != header.done as usize {
        return Err(format!(
            "an undo page claims {} records done and marks {done}",
            header.done
        ));
    }
    Ok(records)
}

/// A committed transaction's undo log, waiting in the history list for purge.
#[derive(Clone, Debug)]
pub struct CommittedLog {
    /// The transaction.
    pub xid: u64,
    /// Its commit timestamp.
    pub commit_ts: u64,
    /// The pages holding its records (each once).
    pub pages: Vec<u32>,
    /// When it joined the history list (purge's delay counts from here).
    pub since: std::time::Instant,
    /// An aborted transaction's log (rolled back; kept for the versions eager pruning
    /// merged into it, its only records that stand for versions).
    pub aborted: bool,
}

/// A live transaction's undo log.
#[derive(Debug, Default)]
struct LiveLog {
    /// The pages holding its records, in the order of its first record on each.
    pages: Vec<u32>,
    /// The next record's sequence number.
    next_sequence: u32,
    /// It holds a record purge must see (an update or a delete): at commit it joins the
    /// history list; a log of inserts only is done at commit (no reader follows them).
    needs_purge: bool,
    /// It holds an insert's record: done at commit (only a rollback reads it; InnoDB
    /// keeps insert undo apart and frees it at commit).
    has_inserts: bool,
    /// It holds records eager pruning wrote (merged versions of rows it changed), which
    /// a row its rollback restores leads to: after a rollback it waits in the history
    /// list rather than be freed (U4).
    holds_versions: bool,
}

/// A live log that ended without a commit.
#[derive(Debug)]
pub struct EndedLog {
    /// The pages holding its records.
    pub pages: Vec<u32>,
    /// Whether it holds records eager pruning wrote.
    pub holds_versions: bool,
}

#[derive(Debug, Default)]
struct State {
    free: Vec<u32>,
    /// The page each lane's records are appended to (U4: closed before it is freed); none
    /// before the lane's first record, and after its open one filled or was freed until
    /// the lane's next record opens another.
    open: [Option<u32>; 2],
    live: HashMap<u64, LiveLog>,
    /// By commit timestamp (then id), the committed logs purge has not finished.
    history: BTreeMap<(u64, u64), CommittedLog>,
}

/// What the undo space counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UndoStats {
    /// Committed logs waiting for purge (InnoDB's history list length).
    pub history_list_length: u64,
    /// Pages of the undo file.
    pub pages: u64,
    /// Pages free for the next log.
    pub free_pages: u64,
    /// Records appended.
    pub records_written: u64,
    /// Record reads by readers walking a row's versions (each an I/O when not cached).
    pub records_read: u64,
    /// Logs purge finished.
    pub logs_purged: u64,
    /// Records of updates and deletes purge finished (each an old version reclaimed).
    pub records_purged: u64,
    /// Logs rolled back (at abort or in recovery).
    pub logs_rolled_back: u64,
    /// Records eager pruning wrote (each a row's kept version, merged over pruned ones).
    pub records_merged: u64,
    /// Records eager pruning unlinked from their rows' chains.
    pub records_pruned: u64,
    /// Pages freed when eager pruning marked the last of their records done (before
    /// purge reached them).
    pub pages_freed_eagerly: u64,
}

/// The undo space of a disk database. Shared by every table of InnoDB's design.
pub struct UndoSpace {
    pool: Arc<BufferPool>,
    file: FileNo,
    log: Arc<PageLog>,
    state: Mutex<State>,
    records_written: AtomicU64,
    records_read: AtomicU64,
    logs_purged: AtomicU64,
    records_purged: AtomicU64,
    logs_rolled_back: AtomicU64,
    records_merged: AtomicU64,
    records_pruned: AtomicU64,
    pages_freed_eagerly: AtomicU64,
}

impl std::fmt::Debug for UndoSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UndoSpace")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// The undo logs recovery found: whose to roll back, whose to purge.
#[derive(Debug, Default)]
pub struct FoundLogs {
    /// Logs by owner: the pages holding an owner's records not done, each once.
    pub by_owner: BTreeMap<u64, Vec<u32>>,
}

/// What appending a record to a page came to.
enum Appended {
    /// Written there.
    At(RollPtr),
    /// The page is the open one and the record does not fit: it was closed.
    Full,
    /// The page is not (or no longer) the open one.
    NotOpen,
}

impl UndoSpace {
    /// Opens the undo space in `file` (attached to `pool`, after the page log's redo),
    /// reading every page: free ones (and those whose records are all done) to the free
    /// list, the records not done returned by owner for the engine to roll back or queue
    /// for purge ([`UndoSpace::adopt`]). A page of the first undo format is refused.
    pub fn open(
        pool: Arc<BufferPool>,
        file: FileNo,
        log: Arc<PageLog>,
    ) -> Result<(Self, FoundLogs)> {
        let pages = pool.file_pages(file)?;
        let mut state = State::default();
        let mut found = FoundLogs::default();
        for block in 0..pages {
            let page = pool.read(PageId::new(file, block))?;
            if page.kind() == KIND_UNDO_PAGE_FORMAT_1 {
                return Err(format_1_refused());
            }
            if page.kind() != KIND_UNDO_PAGE {
                state.free.push(block);
                continue;
            }
            let header = Header::read(page.body());
            let frames = page_records(page.body()).map_err(|reason| Error::Corruption {
                file: "the undo file".into(),
                offset: PageId::new(file, block).offset(),
                reason,
            })?;
            if header.taker == 0 || header.all_done() {
                // Nothing reads its records again (U4); taking it raises its generation.
                state.free.push(block);
                continue;
            }
            for frame in frames.iter().filter(|frame| !frame.done()) {
                let pages = found.by_owner.entry(frame.owner).or_default();
                if pages.last() != Some(&block) {
                    pages.push(block);
                }
            }
        }
        // Taken from the end first: low blocks are reused first, keeping the file dense.
        state.free.sort_unstable_by(|a, b| b.cmp(a));
        Ok((
            UndoSpace {
                pool,
                file,
                log,
                state: Mutex::new(state),
                records_written: AtomicU64::new(0),
                records_read: AtomicU64::new(0),
                logs_purged: AtomicU64::new(0),
                records_purged: AtomicU64::new(0),
                logs_rolled_back: AtomicU64::new(0),
                records_merged: AtomicU64::new(0),
                records_pruned: AtomicU64::new(0),
                pages_freed_eagerly: AtomicU64::new(0),
            },
            found,
        ))
    }

    /// The undo file.
    pub fn file(&self) -> FileNo {
        self.file
    }

    /// Puts a log into the history list: committed at `commit_ts` (recovery finding it, or
    /// a commit), or rolled back when the clock read `commit_ts` (`aborted`).
    pub fn adopt(&self, xid: u64, commit_ts: u64, pages: Vec<u32>, aborted: bool) {
        self.state.lock().history.insert(
            (commit_ts, xid),
            CommittedLog {
                xid,
                commit_ts,
                pages,
                since: std::time::Instant::now(),
                aborted,
            },
        );
    }

    /// Appends `record` to `xid`'s log, on `lane`'s open page (opening one if there is
    /// none or it is full), and returns where it is. Logged before the row change it
    /// undoes (U2).
    pub fn append(&self, xid: u64, record: &UndoRecord, lane: UndoLane) -> Result<RollPtr> {
        self.append_as(xid, record, false, lane)
    }

    /// [`UndoSpace::append`] of a record eager pruning wrote: a kept version of a row,
    /// merged over the pruned ones (U4: the log then outlives a rollback).
    pub fn append_merged(&self, xid: u64, record: &UndoRecord) -> Result<RollPtr> {
        let ptr = self.append_as(xid, record, true, UndoLane::Long)?;
        self.records_merged.fetch_add(1, Ordering::Relaxed);
        Ok(ptr)
    }

    fn append_as(
        &self,
        xid: u64,
        record: &UndoRecord,
        merged: bool,
        lane: UndoLane,
    ) -> Result<RollPtr> {
        debug_assert_ne!(xid, 0);
        let body = record.encode();
        if body.len() > MAX_UNDO_RECORD_BYTES {
            return Err(Error::EntryTooLarge {
                what: "an undo record (a row's changed span and key)",
                bytes: body.len(),
                limit: MAX_UNDO_RECORD_BYTES,
            });
        }
        let (sequence, open) = {
            let mut state = self.state.lock();
            let open = state.open[lane as usize];
            let live = state.live.entry(xid).or_default();
            live.needs_purge |= record.kind != UndoKind::Insert;
            live.has_inserts |= record.kind == UndoKind::Insert;
            live.holds_versions |= merged;
            let sequence = live.next_sequence;
            live.next_sequence += 1;
            (sequence, open)
        };
        let mut frame = Vec::with_capacity(FRAME_BYTES + body.len());
        frame.extend_from_slice(&(body.len() as u16).to_le_bytes());
        frame.extend_from_slice(&xid.to_le_bytes());
        frame.extend_from_slice(&sequence.to_le_bytes());
        frame.extend_from_slice(&body);
        let mut open = open;
        loop {
            if let Some(block) = open {
                let mut page = self.pool.write(PageId::new(self.file, block))?;
                if let Appended::At(ptr) = self.write_record(&mut page, xid, &frame, lane)? {
                    return Ok(self.noted(xid, ptr));
                }
                drop(page);
                // Full (closed now) or closed by another appender, who may have opened
                // the next one already.
                let now = self.state.lock().open[lane as usize];
                if now.is_some() && now != Some(block) {
                    open = now;
                    continue;
                }
            }
            let mut page = self.take_page(xid, lane)?;
            if let Appended::At(ptr) = self.write_record(&mut page, xid, &frame, lane)? {
                return Ok(self.noted(xid, ptr));
            }
            // Another appender opened a page meanwhile (this one went back free).
            drop(page);
            open = self.state.lock().open[lane as usize];
        }
    }

    /// Notes that `xid` has a record on `ptr`'s page.
    fn noted(&self, xid: u64, ptr: RollPtr) -> RollPtr {
        let mut state = self.state.lock();
        let pages = &mut state
            .live
            .get_mut(&xid)
            .expect("live while it appends")
            .pages;
        if !pages.contains(&ptr.block) {
            pages.push(ptr.block);
        }
        ptr
    }

    /// Writes a framed record at the end of `page` if it is `lane`'s open page and the
    /// record fits; a full open page is closed (and freed if every record on it is done,
    /// U4).
    fn write_record(
        &self,
        page: &mut PageMut<'_>,
        xid: u64,
        frame: &[u8],
        lane: UndoLane,
    ) -> Result<Appended> {
        let block = page.id().block;
        let open = &|state: &State| state.open[lane as usize] == Some(block);
        if page.kind() != KIND_UNDO_PAGE || !open(&self.state.lock()) {
            return Ok(Appended::NotOpen);
        }
        let mut header = Header::read(page.body());
        debug_assert_ne!(header.taker, 0, "U4: the open page is not free");
        let at = UNDO_HEADER_BYTES + header.used as usize;
        if at + frame.len() > BODY_BYTES {
            let mut state = self.state.lock();
            if open(&state) {
                state.open[lane as usize] = None;
            }
            drop(state);
            if header.all_done() {
                self.log_done(page, &mut header, &[])?;
            }
            return Ok(Appended::Full);
        }
        page.body_mut()[at..at + frame.len()].copy_from_slice(frame);
        header.used += frame.len() as u16;
        header.records += 1;
        let header_bytes = header.bytes();
        page.body_mut()[..UNDO_HEADER_BYTES].copy_from_slice(&header_bytes);
        self.log.log_for(
            xid,
            &mut [(
                &mut *page,
                &[
                    PageChange::UndoWrite {
                        at: at as u16,
                        bytes: frame,
                    },
                    PageChange::UndoWrite {
                        at: 0,
                        bytes: &header_bytes,
                    },
                ],
            )],
        )?;
        self.records_written.fetch_add(1, Ordering::Relaxed);
        Ok(Appended::At(RollPtr {
            block,
            offset: at as u16,
            generation: header.generation,
        }))
    }

    /// Opens a page for `lane`'s appends: a free one (its generation raised, U3) or a new
    /// one. If another appender opened one meanwhile, that one stays open and this one is
    /// given back to the free list (the caller appends to the open one).
    fn take_page(&self, xid: u64, lane: UndoLane) -> Result<PageMut<'_>> {
        let free = self.state.lock().free.pop();
        let mut page = match free {
            Some(block) => match self.pool.write(PageId::new(self.file, block)) {
                Ok(page) => page,
                Err(error) => {
                    self.state.lock().free.push(block);
                    return Err(error);
                }
            },
            None => self.pool.allocate(self.file)?,
        };
        let formatted = page.kind() == KIND_UNDO_PAGE;
        let generation = if formatted {
            Header::read(page.body()).generation.wrapping_add(1)
        } else {
            0
        };
        let header = Header {
            taker: xid,
            generation,
            used: 0,
            records: 0,
            done: 0,
        };
        let bytes = header.bytes();
        let logged = if formatted {
            page.body_mut()[..UNDO_HEADER_BYTES].copy_from_slice(&bytes);
            self.log.log_for(
                xid,
                &mut [(
                    &mut page,
                    &[PageChange::UndoWrite {
                        at: 0,
                        bytes: &bytes,
                    }],
                )],
            )
        } else {
            page.set_kind(KIND_UNDO_PAGE);
            page.body_mut().fill(0);
            page.body_mut()[..UNDO_HEADER_BYTES].copy_from_slice(&bytes);
            self.log
                .log_for(xid, &mut [(&mut page, &[PageChange::Image])])
        };
        let block = page.id().block;
        if let Err(error) = logged {
            self.state.lock().free.push(block);
            return Err(error);
        }
        let mut state = self.state.lock();
        if state.open[lane as usize].is_none() {
            state.open[lane as usize] = Some(block);
        } else {
            // Taken, formatted and empty: back to the free list as it is (a later take
            // raises its generation again).
            state.free.push(block);
        }
        drop(state);
        Ok(page)
    }

    /// The record `ptr` names, with its owner, or `None` if its page was freed (and maybe
    /// taken again) since (U3: the caller reads the row again).
    pub fn read(&self, ptr: RollPtr) -> Result<Option<(u64, UndoRecord)>> {
        debug_assert!(!ptr.is_none());
        self.records_read.fetch_add(1, Ordering::Relaxed);
        let id = PageId::new(self.file, ptr.block);
        let page = self.pool.read(id)?;
        if page.kind() != KIND_UNDO_PAGE {
            return Ok(None);
        }
        let header = Header::read(page.body());
        if header.generation != ptr.generation || header.taker == 0 {
            return Ok(None);
        }
        let corrupt = |reason: String| Error::Corruption {
            file: "the undo file".into(),
            offset: id.offset() + (PAGE_HEADER_BYTES + ptr.offset as usize) as u64,
            reason,
        };
        let at = ptr.offset as usize;
        let used_end = UNDO_HEADER_BYTES + header.used as usize;
        if at < UNDO_HEADER_BYTES || at + FRAME_BYTES > used_end {
            return Err(corrupt(format!(
                "a roll pointer past the page's {} used bytes",
                header.used
            )));
        }
        let body = page.body();
        let len = u16::from_le_bytes(body[at..at + 2].try_into().expect("two")) as usize;
        if at + FRAME_BYTES + len > used_end {
            return Err(corrupt("an undo record past the page's used bytes".into()));
        }
        let owner = u64::from_le_bytes(body[at + 2..at + 10].try_into().expect("eight"));
        let record =
            UndoRecord::decode(&body[at + FRAME_BYTES..at + FRAME_BYTES + len]).map_err(corrupt)?;
        Ok(Some((owner, record)))
    }

    /// Every record of `xid`'s log on `pages` (done ones too: rolling back or purging one
    /// again changes nothing, C2), each with its pointer and whether eager pruning
    /// unlinked it, oldest first. Pages freed since are skipped.
    pub fn records_of(&self, xid: u64, pages: &[u32]) -> Result<Vec<(RollPtr, UndoRecord, bool)>> {
        let mut out = Vec::new();
        for &block in pages {
            let id = PageId::new(self.file, block);
            let page = self.pool.read(id)?;
            if page.kind() != KIND_UNDO_PAGE {
                continue;
            }
            let header = Header::read(page.body());
            if header.taker == 0 {
                continue;
            }
            let frames = page_records(page.body()).map_err(|reason| Error::Corruption {
                file: "the undo file".into(),
                offset: id.offset(),
                reason,
            })?;
            for frame in frames.iter().filter(|frame| frame.owner == xid) {
                let record =
                    UndoRecord::decode(frame.body).map_err(|reason| Error::Corruption {
                        file: "the undo file".into(),
                        offset: id.offset() + (PAGE_HEADER_BYTES + frame.at as usize) as u64,
                        reason,
                    })?;
                let ptr = RollPtr {
                    block,
                    offset: frame.at,
                    generation: header.generation,
                };
                out.push((frame.sequence, ptr, record, frame.unlinked()));
            }
        }
        out.sort_by_key(|(sequence, ..)| *sequence);
        debug_assert!(
            out.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "U1: one owner's records have distinct sequence numbers"
        );
        Ok(out
            .into_iter()
            .map(|(_, ptr, record, unlinked)| (ptr, record, unlinked))
            .collect())
    }

    /// `xid` committed at `commit_ts`: its inserts' records are done (no reader follows an
    /// insert's record, and only a rollback needs it), and its log joins the history list
    /// if purge needs it (it holds an update's or a delete's record).
    pub fn committed(&self, xid: u64, commit_ts: u64) -> Result<()> {
        let log = self.state.lock().live.remove(&xid);
        let Some(log) = log else { return Ok(()) };
        if log.needs_purge {
            let inserts_done = if log.has_inserts {
                self.mark_done(xid, &log.pages, Some(UndoKind::Insert))
            } else {
                Ok(())
            };
            // Queued even if that failed: purge's finish marks them too.
            self.adopt(xid, commit_ts, log.pages, false);
            inserts_done
        } else {
            self.finish(xid, &log.pages)
        }
    }

    /// Ends a live log without a commit (before its rollback): the caller finishes it
    /// after the rollback, or queues it for purge if it holds merged versions.
    pub fn forget(&self, xid: u64) -> Option<EndedLog> {
        self.state.lock().live.remove(&xid).map(|log| EndedLog {
            pages: log.pages,
            holds_versions: log.holds_versions,
        })
    }

    /// Marks the record `ptr` names unlinked (eager pruning took it out of its row's
    /// chain) and done, unless it is a delete's; frees its page if that was the last
    /// record not done (U4). A pointer whose page was
    /// freed since, or a record unlinked already, is left alone.
    pub fn mark_dead(&self, ptr: RollPtr) -> Result<()> {
        let id = PageId::new(self.file, ptr.block);
        let mut page = self.pool.write(id)?;
        if page.kind() != KIND_UNDO_PAGE {
            return Ok(());
        }
        let mut header = Header::read(page.body());
        let at = ptr.offset as usize + FRAME_BYTES;
        if header.generation != ptr.generation
            || header.taker == 0
            || at >= UNDO_HEADER_BYTES + header.used as usize
            || page.body()[at] & UNLINKED_BIT != 0
        {
            return Ok(());
        }
        let mut flags = page.body()[at] | UNLINKED_BIT;
        // A delete's record keeps a duty while its log waits for purge: removing the row
        // if the delete is its newest version then (a rollback may have made it newest
        // again after the prune): it is not done, and its page stays
        // (`regression_a_delete_s_record_unlinked_by_pruning_still_removes_its_row`).
        if flags & !(UNLINKED_BIT | DONE_BIT) != UndoKind::Delete as u8 && flags & DONE_BIT == 0 {
            flags |= DONE_BIT;
            header.done += 1;
        }
        debug_assert!(header.done <= header.records);
        page.body_mut()[at] = flags;
        let freed = self.log_done(&mut page, &mut header, &[at as u16])?;
        drop(page);
        self.records_pruned.fetch_add(1, Ordering::Relaxed);
        if freed {
            self.pages_freed_eagerly.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Marks every record of `xid`'s log on `pages` done (U4: after its rollback, when
    /// purge is through with it, or at the commit of a log of inserts only), freeing the
    /// pages whose records are then all done.
    pub fn finish(&self, xid: u64, pages: &[u32]) -> Result<()> {
        self.mark_done(xid, pages, None)
    }

    /// Marks `xid`'s records on `pages` done, of kind `only` or every kind.
    fn mark_done(&self, xid: u64, pages: &[u32], only: Option<UndoKind>) -> Result<()> {
        for &block in pages {
            let id = PageId::new(self.file, block);
            let mut page = self.pool.write(id)?;
            if page.kind() != KIND_UNDO_PAGE {
                continue;
            }
            let mut header = Header::read(page.body());
            if header.taker == 0 {
                continue;
            }
            let marks: Vec<u16> = page_records(page.body())
                .map_err(|reason| Error::Corruption {
                    file: "the undo file".into(),
                    offset: id.offset(),
                    reason,
                })?
                .iter()
                .filter(|frame| frame.owner == xid && !frame.done())
                .filter(|frame| {
                    only.is_none_or(|kind| frame.flags() & !(UNLINKED_BIT | DONE_BIT) == kind as u8)
                })
                .map(|frame| frame.at + FRAME_BYTES as u16)
                .collect();
            if marks.is_empty() {
                continue;
            }
            for &at in &marks {
                page.body_mut()[at as usize] |= DONE_BIT;
            }
            header.done += marks.len() as u16;
            debug_assert!(header.done <= header.records);
            self.log_done(&mut page, &mut header, &marks)?;
        }
        Ok(())
    }

    /// Logs the flag bytes at `marks` (set in the page already) and the header; frees the
    /// page (taker 0, in the same logged change) if every record on it is done, closing
    /// it first if it is the open page (U4). Returns whether it freed it.
    fn log_done(&self, page: &mut PageMut<'_>, header: &mut Header, marks: &[u16]) -> Result<bool> {
        let block = page.id().block;
        let free = header.all_done();
        if free {
            let mut state = self.state.lock();
            for open in &mut state.open {
                if *open == Some(block) {
                    *open = None;
                }
            }
            header.taker = 0;
        }
        let header_bytes = header.bytes();
        page.body_mut()[..UNDO_HEADER_BYTES].copy_from_slice(&header_bytes);
        let flags: Vec<[u8; 1]> = marks.iter().map(|&at| [page.body()[at as usize]]).collect();
        let mut changes: Vec<PageChange<'_>> = marks
            .iter()
            .zip(&flags)
            .map(|(&at, flag)| PageChange::UndoWrite { at, bytes: flag })
            .collect();
        changes.push(PageChange::UndoWrite {
            at: 0,
            bytes: &header_bytes,
        });
        self.log.log(&mut [(&mut *page, &changes)])?;
        if free {
            self.state.lock().free.push(block);
        }
        Ok(free)
    }

    /// Counts a rolled-back log.
    pub fn note_rolled_back(&self) {
        self.logs_rolled_back.fetch_add(1, Ordering::Relaxed);
    }

    /// The oldest committed logs purge may take now: committed below `horizon` (every
    /// snapshot sees them, and every newer version of the rows they wrote) and in the
    /// history list for at least `delay`. Taken out of the list; give back with
    /// [`UndoSpace::requeue`] what could not be purged.
    pub fn purgeable(
        &self,
        horizon: u64,
        delay: std::time::Duration,
        most: usize,
    ) -> Vec<CommittedLog> {
        let mut state = self.state.lock();
        let mut taken = Vec::new();
        while taken.len() < most {
            let Some((&(ts, xid), log)) = state.history.iter().next() else {
                break;
            };
            if ts >= horizon || log.since.elapsed() < delay {
                break;
            }
            let _ = xid;
            let (_, log) = state.history.pop_first().expect("just seen");
            taken.push(log);
        }
        taken
    }

    /// Gives a log back to the history list (purge failed on it: an I/O error).
    pub fn requeue(&self, log: CommittedLog) {
        self.state
            .lock()
            .history
            .insert((log.commit_ts, log.xid), log);
    }

    /// Counts a purged log and its records of updates and deletes.
    pub fn note_purged(&self, versions: u64) {
        self.logs_purged.fetch_add(1, Ordering::Relaxed);
        self.records_purged.fetch_add(versions, Ordering::Relaxed);
    }

    /// What the undo space counted.
    pub fn stats(&self) -> UndoStats {
        let state = self.state.lock();
        UndoStats {
            history_list_length: state.history.len() as u64,
            pages: u64::from(self.pool.file_pages(self.file).unwrap_or(0)),
            free_pages: state.free.len() as u64,
            records_written: self.records_written.load(Ordering::Relaxed),
            records_read: self.records_read.load(Ordering::Relaxed),
            logs_purged: self.logs_purged.load(Ordering::Relaxed),
            records_purged: self.records_purged.load(Ordering::Relaxed),
            logs_rolled_back: self.logs_rolled_back.load(Ordering::Relaxed),
            records_merged: self.records_merged.load(Ordering::Relaxed),
            records_pruned: self.records_pruned.load(Ordering::Relaxed),
            pages_freed_eagerly: self.pages_freed_eagerly.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> UndoRecord {
        let (prefix, suffix, middle) = UndoRecord::delta(b"abcXYZdef", b"abcQdef");
        UndoRecord {
            kind: UndoKind::Update,
            table: 3,
            key: b"key".to_vec(),
            prev_creator: 17,
            prev_roll: RollPtr {
                block: 4,
                offset: 24,
                generation: 2,
            },
            prev_deleted: false,
            fresh: 0b10,
            prefix,
            suffix,
            middle,
            marked: vec![(0, b"old".to_vec())],
            whole: false,
        }
    }

    #[test]
    fn a_record_round_trips_and_restores_the_version_before() {
        let record = record();
        assert_eq!((record.prefix, record.suffix), (3, 3));
        assert_eq!(record.middle, b"XYZ");
        let decoded = UndoRecord::decode(&record.encode()).unwrap();
        assert_eq!(decoded, record);
        assert_eq!(decoded.restore(b"abcQdef").unwrap(), b"abcXYZdef");
    }

    #[test]
    fn deltas_restore_every_pair_of_rows() {
        let rows: [&[u8]; 6] = [b"", b"a", b"aa", b"abc", b"abcabc", b"xbcabx"];
        for before in rows {
            for after in rows {
                let (prefix, suffix, middle) = UndoRecord::delta(before, after);
                let record = UndoRecord {
                    prefix,
                    suffix,
                    middle,
                    ..record()
                };
                assert_eq!(
                    record.restore(after).unwrap(),
                    before,
                    "{before:?} from {after:?}"
                );
            }
        }
    }

    #[test]
    fn a_page_whose_done_count_disagrees_with_its_records_is_corrupt() {
        let body_of = |done_flag: bool, done: u16| {
            let mut body = vec![0u8; BODY_BYTES];
            let record = record().encode();
            let mut at = UNDO_HEADER_BYTES;
            for owner in [7u64, 9] {
                body[at..at + 2].copy_from_slice(&(record.len() as u16).to_le_bytes());
                body[at + 2..at + 10].copy_from_slice(&owner.to_le_bytes());
                body[at + 10..at + 14].copy_from_slice(&0u32.to_le_bytes());
                body[at + FRAME_BYTES..at + FRAME_BYTES + record.len()].copy_from_slice(&record);
                if done_flag && owner == 7 {
                    body[at + FRAME_BYTES] |= DONE_BIT;
                }
                at += FRAME_BYTES + record.len();
            }
            let header = Header {
                taker: 7,
                generation: 3,
                used: (at - UNDO_HEADER_BYTES) as u16,
                records: 2,
                done,
            };
            body[..UNDO_HEADER_BYTES].copy_from_slice(&header.bytes());
            body
        };
        let body = body_of(true, 1);
        let frames = page_records(&body).unwrap();
        assert_eq!(
            frames
                .iter()
                .map(|f| (f.owner, f.done(), f.unlinked()))
                .collect::<Vec<_>>(),
            vec![(7, true, false), (9, false, false)]
        );
        assert_eq!(
            UndoRecord::decode(frames[0].body).unwrap(),
            record(),
            "the flags are not part of the kind"
        );
        assert!(page_records(&body_of(true, 0)).is_err());
        assert!(page_records(&body_of(false, 1)).is_err());
    }

    /// A database whose undo file was written by the first undo format (a page per
    /// transaction, records not framed with their owner) is refused with a typed error,
    /// not misread.
    #[test]
    fn an_undo_page_of_the_first_format_is_refused() {
        use crate::fs::SimulatedFileSystem;
        use crate::{ColumnType, Database, Isolation, Options, Schema, Value};
        let fs = std::sync::Arc::new(SimulatedFileSystem::new(5));
        let options = || {
            Options::default()
                .disk("/format-1")
                .disk_storage(crate::disk::DiskStorage::Undo)
                .file_system(fs.clone())
                .autovacuum_naptime(None)
        };
        let db = Database::open(options()).unwrap();
        let schema = Schema::new()
            .column("id", ColumnType::I64)
            .column("v", ColumnType::I64)
            .primary_key(&["id"]);
        let table = db.create_table("t", schema).unwrap();
        let mut txn = db.begin(Isolation::Snapshot);
        txn.insert(table, &[Value::I64(1), Value::I64(0)]).unwrap();
        txn.commit().unwrap();
        let held = db.begin_read_only(Isolation::Snapshot);
        let mut txn = db.begin(Isolation::Snapshot);
        txn.update(table, &[Value::I64(1)], &[(1, Value::I64(5))])
            .unwrap();
        txn.commit().unwrap();
        drop(held);
        db.checkpoint().unwrap();
        db.close().unwrap();

        let path = std::path::Path::new("/format-1/undo");
        let bytes = fs.read_file(path).unwrap();
        assert!(bytes.len() >= PAGE_SIZE, "the update wrote undo");
        let raw: [u8; PAGE_SIZE] = bytes[..PAGE_SIZE].try_into().unwrap();
        let id = PageId::new(super::super::engine::UNDO_FILE, 0);
        let mut page = crate::disk::Page::decode(&raw, PAGE_SIZE, id).unwrap();
        assert_eq!(page.kind(), KIND_UNDO_PAGE);
        page.set_kind(KIND_UNDO_PAGE_FORMAT_1);
        page.seal(id);
        fs.overwrite_durably(path, 0, page.as_bytes()).unwrap();
        match Database::open(options()) {
            Err(Error::UnsupportedFormat {
                found: 1,
                supported: UNDO_FORMAT,
                ..
            }) => {}
            other => panic!("{:?}", other.map(|_| "opened")),
        }
    }

    proptest::proptest! {
        /// The decoders of undo bytes never panic, whatever the bytes: a record's body, and
        /// a page's records as its header describes them.
        #[test]
        fn decoding_any_bytes_never_panics(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            used in 0u16..600,
            records in 0u16..8,
        ) {
            let _ = UndoRecord::decode(&bytes);
            let mut body = vec![0u8; BODY_BYTES];
            let header = Header { taker: 1, generation: 0, used, records, done: 0 };
            body[..UNDO_HEADER_BYTES].copy_from_slice(&header.bytes());
            body[UNDO_HEADER_BYTES..UNDO_HEADER_BYTES + bytes.len()].copy_from_slice(&bytes);
            let _ = page_records(&body);
            let _ = crate::disk::clustered::Version::decode(&bytes);
        }
    }

    #[test]
    fn a_whole_merged_record_round_trips_and_only_a_merged_whole_row_may_say_so() {
        let whole = UndoRecord {
            kind: UndoKind::Merged,
            prefix: 0,
            suffix: 0,
            middle: b"abcXYZdef".to_vec(),
            whole: true,
            ..record()
        };
        let decoded = UndoRecord::decode(&whole.encode()).unwrap();
        assert_eq!(decoded, whole);
        assert_eq!(decoded.restore(b"anything").unwrap(), b"abcXYZdef");
        // The same marks on an update's record, or on a delta, are corruption.
        for wrong in [
            UndoRecord {
                kind: UndoKind::Update,
                ..whole.clone()
            },
            UndoRecord {
                prefix: 1,
                ..whole.clone()
            },
        ] {
            assert!(UndoRecord::decode(&wrong.encode()).is_err(), "{wrong:?}");
        }
    }

    #[test]
    fn decoding_never_panics_on_cut_or_changed_bytes() {
        let bytes = record().encode();
        for cut in 0..bytes.len() {
            assert!(UndoRecord::decode(&bytes[..cut]).is_err());
        }
        for at in 0..bytes.len() {
            for flip in [1u8, 0x80, 0xFF] {
                let mut changed = bytes.clone();
                changed[at] ^= flip;
                let _ = UndoRecord::decode(&changed);
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(UndoRecord::decode(&longer).is_err());
    }
}
