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
//! | owner xid u64 (0: free) | generation u32 | sequence u32 | used u16 | records u16 | dead u16 | reserved u16 |
//! ```
//!
//! then `used` bytes of records, each `| length u16 | body |` ([`UndoRecord`]); a record
//! eager pruning unlinked from its row's chain has the top bit of its first byte (its
//! kind) set and counts in `dead`, unless it is a delete's (which keeps its page for its
//! purge). `sequence`
//! orders the pages of one owner's log; `generation` grows each time the page is given to
//! a new owner, and a roll pointer ([`RollPtr`]) names it, so a reader holding a pointer
//! into a page that was freed and taken again finds out instead of reading another
//! transaction's record (U3).
//!
//! # Invariants
//!
//! - **U1** A transaction's records are on pages it owns (owner = its id) and are appended
//!   only by it, in the order of its writes; pages of one owner are in `sequence` order.
//!   Its log is live until its end, then (committed, with records that purge needs)
//!   in the history list until purged, else free at once.
//! - **U2** (write-ahead of undo) A record is appended, logged, before the change it undoes
//!   is made to the row: any row change recovery redoes finds its undo record redone
//!   before it.
//! - **U3** A page's generation changes, logged, whenever it is given to a new owner, and a
//!   record is read only under its page's latch after checking the pointer's generation:
//!   a reader never decodes bytes of a record that is not the one its pointer named.
//! - **U4** A page is freed (owner 0, logged) only when no row and no record of a live
//!   chain can still lead to one of its records for a reader that needs it: at its
//!   owner's rollback (the rows were restored first; a log holding records eager pruning
//!   wrote, which restored rows may lead to, waits in the history list instead), when
//!   purge is done with its owner's log (every snapshot sees a newer version of every row
//!   it wrote), and when every record on it is dead and its owner has ended (eager
//!   pruning unlinked each from its chain).
//!
//! # Recovery
//!
//! [`UndoSpace::open`] reads every page after the page log's redo: free pages go to the
//! free list, owned pages are grouped by owner in `sequence` order. The engine rolls back
//! every log whose owner did not commit (in progress at the crash, or aborted before its
//! rollback finished: the commit log reads both as aborted, X3), then puts the committed
//! ones in the history list in commit order.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::buffer_pool::{BufferPool, PageMut};
use super::page::{FileNo, PageId, PAGE_HEADER_BYTES, PAGE_SIZE};
use super::page_log::{PageChange, PageLog};
use crate::sync::Mutex;
use crate::{Error, Result};

/// The page kind of undo pages.
pub const KIND_UNDO_PAGE: u16 = 0x0DD0;

const BODY_BYTES: usize = PAGE_SIZE - PAGE_HEADER_BYTES;
/// Bytes of an undo page's header.
pub const UNDO_HEADER_BYTES: usize = 24;
const OWNER_AT: usize = 0;
const GENERATION_AT: usize = 8;
const SEQUENCE_AT: usize = 12;
const USED_AT: usize = 16;
const RECORDS_AT: usize = 18;
const DEAD_AT: usize = 20;
/// The bit of a record's first byte that says eager pruning unlinked it.
const DEAD_BIT: u8 = 0x80;

/// The most bytes a record's body takes (one always fits an empty page).
pub const MAX_UNDO_RECORD_BYTES: usize = BODY_BYTES - UNDO_HEADER_BYTES - 2;

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
        out.push(u8::from(self.prev_deleted));
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
        let kind = match take(1)?[0] & !DEAD_BIT {
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
        let prev_deleted = match take(1)?[0] {
            0 => false,
            1 => true,
            other => return Err(format!("an undo record's delete mark is {other}")),
        };
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
        })
    }
}

/// An undo page's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    owner: u64,
    generation: u32,
    sequence: u32,
    used: u16,
    records: u16,
    dead: u16,
}

impl Header {
    fn read(body: &[u8]) -> Header {
        let u16_at = |at: usize| u16::from_le_bytes(body[at..at + 2].try_into().expect("two"));
        let u32_at = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().expect("four"));
        Header {
            owner: u64::from_le_bytes(body[OWNER_AT..OWNER_AT + 8].try_into().expect("eight")),
            generation: u32_at(GENERATION_AT),
            sequence: u32_at(SEQUENCE_AT),
            used: u16_at(USED_AT),
            records: u16_at(RECORDS_AT),
            dead: u16_at(DEAD_AT),
        }
    }

    fn bytes(&self) -> [u8; UNDO_HEADER_BYTES] {
        let mut out = [0u8; UNDO_HEADER_BYTES];
        out[OWNER_AT..OWNER_AT + 8].copy_from_slice(&self.owner.to_le_bytes());
        out[GENERATION_AT..GENERATION_AT + 4].copy_from_slice(&self.generation.to_le_bytes());
        out[SEQUENCE_AT..SEQUENCE_AT + 4].copy_from_slice(&self.sequence.to_le_bytes());
        out[USED_AT..USED_AT + 2].copy_from_slice(&self.used.to_le_bytes());
        out[RECORDS_AT..RECORDS_AT + 2].copy_from_slice(&self.records.to_le_bytes());
        out[DEAD_AT..DEAD_AT + 2].copy_from_slice(&self.dead.to_le_bytes());
        out
    }

    /// Whether the header is one an undo page can have (else the page is corrupt).
    fn is_sane(&self) -> bool {
        UNDO_HEADER_BYTES + self.used as usize <= BODY_BYTES && self.dead <= self.records
    }
}

/// Redoes a logged write of bytes into an undo page's body ([`PageChange::UndoWrite`]).
pub(crate) fn redo_write(page: &mut PageMut<'_>, at: u16, bytes: &[u8]) -> Result<()> {
    let id = page.id();
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

/// The records of one page, each with its offset; a defect is the page's corruption.
fn page_records(body: &[u8]) -> std::result::Result<Vec<(u16, &[u8])>, String> {
    let header = Header::read(body);
    if !header.is_sane() {
        return Err(format!("an undo page claims {} bytes used", header.used));
    }
    let end = UNDO_HEADER_BYTES + header.used as usize;
    let mut at = UNDO_HEADER_BYTES;
    let mut records = Vec::with_capacity(header.records as usize);
    while at < end {
        if at + 2 > end {
            return Err(format!("an undo record's length cut at byte {at}"));
        }
        let len = u16::from_le_bytes(body[at..at + 2].try_into().expect("two")) as usize;
        if at + 2 + len > end {
            return Err(format!(
                "an undo record at byte {at} runs past the page's used bytes"
            ));
        }
        records.push((at as u16, &body[at + 2..at + 2 + len]));
        at += 2 + len;
    }
    if records.len() != header.records as usize {
        return Err(format!(
            "an undo page claims {} records and holds {}",
            header.records,
            records.len()
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
    /// Its pages, in order.
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
    pages: Vec<u32>,
    /// It holds a record purge must see (an update or a delete): at commit it joins the
    /// history list; a log of inserts only is freed at commit (no reader follows them).
    needs_purge: bool,
    /// It holds records eager pruning wrote (merged versions of rows it changed), which
    /// a row its rollback restores leads to: after a rollback it waits in the history
    /// list rather than be freed (U4).
    holds_versions: bool,
}

/// A live log that ended without a commit.
#[derive(Debug)]
pub struct EndedLog {
    /// Its pages.
    pub pages: Vec<u32>,
    /// Whether it holds records eager pruning wrote.
    pub holds_versions: bool,
}

#[derive(Debug, Default)]
struct State {
    free: Vec<u32>,
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
    /// Pages freed because every record on them was pruned (before purge reached them).
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
    /// Logs by owner, pages in `sequence` order.
    pub by_owner: BTreeMap<u64, Vec<u32>>,
}

impl UndoSpace {
    /// Opens the undo space in `file` (attached to `pool`, after the page log's redo),
    /// reading every page: free ones to the free list, owned ones returned by owner for
    /// the engine to roll back or queue for purge ([`UndoSpace::adopt`]).
    pub fn open(
        pool: Arc<BufferPool>,
        file: FileNo,
        log: Arc<PageLog>,
    ) -> Result<(Self, FoundLogs)> {
        let pages = pool.file_pages(file)?;
        let mut state = State::default();
        let mut owned: BTreeMap<u64, Vec<(u32, u32)>> = BTreeMap::new();
        for block in 0..pages {
            let page = pool.read(PageId::new(file, block))?;
            if page.kind() != KIND_UNDO_PAGE {
                state.free.push(block);
                continue;
            }
            let header = Header::read(page.body());
            page_records(page.body()).map_err(|reason| Error::Corruption {
                file: "the undo file".into(),
                offset: PageId::new(file, block).offset(),
                reason,
            })?;
            if header.owner == 0 {
                state.free.push(block);
            } else {
                owned
                    .entry(header.owner)
                    .or_default()
                    .push((header.sequence, block));
            }
        }
        let mut found = FoundLogs::default();
        for (owner, mut pages) in owned {
            pages.sort_unstable();
            found
                .by_owner
                .insert(owner, pages.into_iter().map(|(_, block)| block).collect());
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

    /// Appends `record` to `xid`'s log (taking a page for it if its last is full or it has
    /// none) and returns where it is. Logged before the row change it undoes (U2).
    pub fn append(&self, xid: u64, record: &UndoRecord) -> Result<RollPtr> {
        self.append_as(xid, record, false)
    }

    /// [`UndoSpace::append`] of a record eager pruning wrote: a kept version of a row,
    /// merged over the pruned ones (U4: the log then outlives a rollback).
    pub fn append_merged(&self, xid: u64, record: &UndoRecord) -> Result<RollPtr> {
        let ptr = self.append_as(xid, record, true)?;
        self.records_merged.fetch_add(1, Ordering::Relaxed);
        Ok(ptr)
    }

    fn append_as(&self, xid: u64, record: &UndoRecord, merged: bool) -> Result<RollPtr> {
        debug_assert_ne!(xid, 0);
        let body = record.encode();
        if body.len() > MAX_UNDO_RECORD_BYTES {
            return Err(Error::EntryTooLarge {
                what: "an undo record (a row's changed span and key)",
                bytes: body.len(),
                limit: MAX_UNDO_RECORD_BYTES,
            });
        }
        let last = {
            let mut state = self.state.lock();
            let live = state.live.entry(xid).or_default();
            live.needs_purge |= record.kind != UndoKind::Insert;
            live.holds_versions |= merged;
            live.pages.last().copied()
        };
        if let Some(block) = last {
            let mut page = self.pool.write(PageId::new(self.file, block))?;
            if let Some(ptr) = self.write_record(&mut page, xid, &body)? {
                return Ok(ptr);
            }
        }
        let mut page = self.take_page(xid)?;
        let ptr = self
            .write_record(&mut page, xid, &body)?
            .expect("a record fits an empty page");
        Ok(ptr)
    }

    /// Writes a record at the end of an owned page, if it fits.
    fn write_record(
        &self,
        page: &mut PageMut<'_>,
        xid: u64,
        body: &[u8],
    ) -> Result<Option<RollPtr>> {
        let mut header = Header::read(page.body());
        debug_assert_eq!(header.owner, xid, "U1: a record goes on its owner's page");
        let at = UNDO_HEADER_BYTES + header.used as usize;
        if at + 2 + body.len() > BODY_BYTES {
            return Ok(None);
        }
        let mut bytes = Vec::with_capacity(2 + body.len());
        bytes.extend_from_slice(&(body.len() as u16).to_le_bytes());
        bytes.extend_from_slice(body);
        page.body_mut()[at..at + bytes.len()].copy_from_slice(&bytes);
        header.used += bytes.len() as u16;
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
                        bytes: &bytes,
                    },
                    PageChange::UndoWrite {
                        at: 0,
                        bytes: &header_bytes,
                    },
                ],
            )],
        )?;
        self.records_written.fetch_add(1, Ordering::Relaxed);
        Ok(Some(RollPtr {
            block: page.id().block,
            offset: at as u16,
            generation: header.generation,
        }))
    }

    /// Gives `xid` a page of its own: a free one (its generation raised, U3) or a new one.
    fn take_page(&self, xid: u64) -> Result<PageMut<'_>> {
        let (free, sequence) = {
            let mut state = self.state.lock();
            let sequence = state.live.get(&xid).map_or(0, |log| log.pages.len()) as u32;
            (state.free.pop(), sequence)
        };
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
            owner: xid,
            generation,
            sequence,
            used: 0,
            records: 0,
            dead: 0,
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
        logged?;
        let block = page.id().block;
        self.state
            .lock()
            .live
            .entry(xid)
            .or_default()
            .pages
            .push(block);
        Ok(page)
    }

    /// The record `ptr` names, or `None` if its page was given to another owner since
    /// (U3: the caller reads the row again).
    pub fn read(&self, ptr: RollPtr) -> Result<Option<(u64, UndoRecord)>> {
        debug_assert!(!ptr.is_none());
        self.records_read.fetch_add(1, Ordering::Relaxed);
        let id = PageId::new(self.file, ptr.block);
        let page = self.pool.read(id)?;
        if page.kind() != KIND_UNDO_PAGE {
            return Ok(None);
        }
        let header = Header::read(page.body());
        if header.generation != ptr.generation || header.owner == 0 {
            return Ok(None);
        }
        let corrupt = |reason: String| Error::Corruption {
            file: "the undo file".into(),
            offset: id.offset() + (PAGE_HEADER_BYTES + ptr.offset as usize) as u64,
            reason,
        };
        let at = ptr.offset as usize;
        if at < UNDO_HEADER_BYTES || at + 2 > UNDO_HEADER_BYTES + header.used as usize {
            return Err(corrupt(format!(
                "a roll pointer past the page's {} used bytes",
                header.used
            )));
        }
        let body = page.body();
        let len = u16::from_le_bytes(body[at..at + 2].try_into().expect("two")) as usize;
        if at + 2 + len > UNDO_HEADER_BYTES + header.used as usize {
            return Err(corrupt("an undo record past the page's used bytes".into()));
        }
        let record = UndoRecord::decode(&body[at + 2..at + 2 + len]).map_err(corrupt)?;
        Ok(Some((header.owner, record)))
    }

    /// Every record of a log (its pages in order), each with its pointer and whether eager
    /// pruning unlinked it (dead), oldest first. Pages no longer the owner's (freed and
    /// taken again) are skipped.
    pub fn records_of(&self, xid: u64, pages: &[u32]) -> Result<Vec<(RollPtr, UndoRecord, bool)>> {
        let mut out = Vec::new();
        for &block in pages {
            let id = PageId::new(self.file, block);
            let page = self.pool.read(id)?;
            if page.kind() != KIND_UNDO_PAGE {
                continue;
            }
            let header = Header::read(page.body());
            if header.owner != xid {
                continue;
            }
            let records = page_records(page.body()).map_err(|reason| Error::Corruption {
                file: "the undo file".into(),
                offset: id.offset(),
                reason,
            })?;
            for (offset, bytes) in records {
                let record = UndoRecord::decode(bytes).map_err(|reason| Error::Corruption {
                    file: "the undo file".into(),
                    offset: id.offset() + (PAGE_HEADER_BYTES + offset as usize) as u64,
                    reason,
                })?;
                let dead = bytes.first().is_some_and(|kind| kind & DEAD_BIT != 0);
                out.push((
                    RollPtr {
                        block,
                        offset,
                        generation: header.generation,
                    },
                    record,
                    dead,
                ));
            }
        }
        Ok(out)
    }

    /// The pages of a live transaction's log.
    pub fn live_pages(&self, xid: u64) -> Vec<u32> {
        self.state
            .lock()
            .live
            .get(&xid)
            .map(|log| log.pages.clone())
            .unwrap_or_default()
    }

    /// `xid` committed at `commit_ts`: its log joins the history list if purge needs it,
    /// else its pages are freed (inserts only: no reader follows an insert's record).
    pub fn committed(&self, xid: u64, commit_ts: u64) -> Result<()> {
        let log = self.state.lock().live.remove(&xid);
        let Some(log) = log else { return Ok(()) };
        if log.needs_purge {
            self.adopt(xid, commit_ts, log.pages, false);
            Ok(())
        } else {
            self.free_pages(xid, &log.pages)
        }
    }

    /// Ends a live log without a commit (before its rollback): the caller frees its
    /// pages after the rollback, or queues them for purge if it holds merged versions.
    pub fn forget(&self, xid: u64) -> Option<EndedLog> {
        self.state.lock().live.remove(&xid).map(|log| EndedLog {
            pages: log.pages,
            holds_versions: log.holds_versions,
        })
    }

    /// Marks the record `ptr` names dead (eager pruning unlinked it from its row's chain),
    /// and frees its page if every record on it is dead and its owner has ended (U4). A
    /// pointer whose page was given to another owner since, or a record dead already, is
    /// left alone.
    pub fn mark_dead(&self, ptr: RollPtr) -> Result<()> {
        let id = PageId::new(self.file, ptr.block);
        let mut page = self.pool.write(id)?;
        if page.kind() != KIND_UNDO_PAGE {
            return Ok(());
        }
        let mut header = Header::read(page.body());
        let at = ptr.offset as usize + 2;
        if header.generation != ptr.generation
            || header.owner == 0
            || at >= UNDO_HEADER_BYTES + header.used as usize
            || page.body()[at] & DEAD_BIT != 0
        {
            return Ok(());
        }
        let kind = page.body()[at] | DEAD_BIT;
        page.body_mut()[at] = kind;
        // A delete's record keeps a duty while its log waits for purge: removing the row
        // if the delete is its newest version then (a rollback may have made it newest
        // again after the prune): it stays, and so does its page
        // (`regression_a_delete_s_record_unlinked_by_pruning_still_removes_its_row`).
        if kind & !DEAD_BIT != UndoKind::Delete as u8 {
            header.dead += 1;
        }
        debug_assert!(header.dead <= header.records);
        let owner = header.owner;
        let ended = !self.state.lock().live.contains_key(&owner);
        let free = ended && header.dead == header.records;
        if free {
            header.owner = 0;
        }
        let bytes = header.bytes();
        page.body_mut()[..UNDO_HEADER_BYTES].copy_from_slice(&bytes);
        self.log.log(&mut [(
            &mut page,
            &[
                PageChange::UndoWrite {
                    at: at as u16,
                    bytes: &[kind],
                },
                PageChange::UndoWrite {
                    at: 0,
                    bytes: &bytes,
                },
            ],
        )])?;
        drop(page);
        self.records_pruned.fetch_add(1, Ordering::Relaxed);
        if free {
            self.state.lock().free.push(ptr.block);
            self.pages_freed_eagerly.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Frees `xid`'s pages (owner 0, logged), once nothing needs their records (U4). A
    /// page already another's is left alone.
    pub fn free_pages(&self, xid: u64, pages: &[u32]) -> Result<()> {
        for &block in pages {
            let mut page = self.pool.write(PageId::new(self.file, block))?;
            if page.kind() != KIND_UNDO_PAGE {
                continue;
            }
            let mut header = Header::read(page.body());
            if header.owner != xid {
                continue;
            }
            header.owner = 0;
            let bytes = header.bytes();
            page.body_mut()[..UNDO_HEADER_BYTES].copy_from_slice(&bytes);
            self.log.log(&mut [(
                &mut page,
                &[PageChange::UndoWrite {
                    at: 0,
                    bytes: &bytes,
                }],
            )])?;
            drop(page);
            self.state.lock().free.push(block);
        }
        Ok(())
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
            let header = Header { owner: 1, generation: 0, sequence: 0, used, records, dead: 0 };
            body[..UNDO_HEADER_BYTES].copy_from_slice(&header.bytes());
            body[UNDO_HEADER_BYTES..UNDO_HEADER_BYTES + bytes.len()].copy_from_slice(&bytes);
            let _ = page_records(&body);
            let _ = crate::disk::clustered::Version::decode(&bytes);
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
