//! The commit log: each disk transaction's fate (in progress, committed at a timestamp,
//! aborted), in pages of one file through the buffer pool, every change in the page log.
//! PostgreSQL's `pg_xact` (CLOG) with its `commit_ts`, in one entry: the disk engine's
//! snapshots are Verso's timestamps, so a reader needs a writer's commit timestamp, not
//! only whether it committed (design note: `docs/design/buffer-pool.md`, "The commit log").
//!
//! # Layout
//!
//! Block 0 is the meta page: the *reserved* bound (u64): every transaction id handed out
//! is below it. Blocks 1.. hold [`ENTRIES_PER_PAGE`] entries of 8 bytes each: transaction
//! id `x` (ids start at 1; 0 is no transaction) at block `1 + x / ENTRIES_PER_PAGE`, slot
//! `x % ENTRIES_PER_PAGE`. An entry is 0 (not ended), [`ABORTED`], or the commit
//! timestamp.
//!
//! # Invariants
//!
//! - **X1** Ids are handed out below the reserved bound, which only grows, a page at a
//!   time: raising it allocates the next entry page and rewrites the meta page in one
//!   logged change. A page record holding an id (a tuple's `xmin`) follows in the log the
//!   change that reserved it, so whatever survives a crash holding an id also holds its
//!   reservation: after a restart, ids start at the recovered bound and none is reused.
//! - **X2** An entry changes once, from 0, under its page's exclusive latch, logged; a
//!   commit is durable exactly when its entry's record is (what `commit` returns the end
//!   of, for the caller to wait on: the commit record).
//! - **X3** After a restart no transaction of an earlier run is in progress: an entry still
//!   0 below the bound recovered at open is a transaction the crash ended, and reads as
//!   aborted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::buffer_pool::{BufferPool, PageMut};
use super::page::{FileNo, PageId, PAGE_HEADER_BYTES, PAGE_SIZE};
use super::page_log::{PageChange, PageLog};
use crate::sync::Mutex;
use crate::{Error, Result};

/// The page kind of the commit log's meta page.
pub const KIND_COMMIT_LOG_META: u16 = 0xC106;
/// The page kind of the commit log's entry pages.
pub const KIND_COMMIT_LOG_PAGE: u16 = 0xC107;
/// Entries per page: the body's 8-byte words.
pub const ENTRIES_PER_PAGE: u64 = ((PAGE_SIZE - PAGE_HEADER_BYTES) / 8) as u64;
/// An entry's value for an aborted transaction.
pub const ABORTED: u64 = u64::MAX;

const META_BLOCK: u32 = 0;

/// Ids run below this: their entry pages' blocks fit a `u32`.
pub const MAX_XID: u64 = (u32::MAX as u64 - 1) * ENTRIES_PER_PAGE;

/// What became of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionStatus {
    /// Running in this process.
    InProgress,
    /// Committed at this timestamp.
    Committed(u64),
    /// Aborted, or ended by a crash before it committed (X3).
    Aborted,
}

/// The commit log of a disk database. Cheap to clone; every clone is the same log.
#[derive(Clone, Debug)]
pub struct CommitLog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    pool: Arc<BufferPool>,
    file: FileNo,
    log: Arc<PageLog>,
    /// The next id to hand out.
    next: AtomicU64,
    /// Ids below this are reserved (X1); raised under `reserving`.
    reserved: AtomicU64,
    reserving: Mutex<()>,
    /// The bound recovered at open: entries still 0 below it are crashed (X3).
    crashed_below: u64,
}

impl CommitLog {
    /// Opens the commit log in `file` (attached to `pool`, after the page log's redo),
    /// formatting it if the file has no pages.
    pub fn open(pool: Arc<BufferPool>, file: FileNo, log: Arc<PageLog>) -> Result<Self> {
        let reserved = if pool.file_pages(file)? == 0 {
            let mut meta = pool.allocate(file)?;
            debug_assert_eq!(meta.id().block, META_BLOCK);
            meta.set_kind(KIND_COMMIT_LOG_META);
            // Id 0 is no transaction; the first page is reserved at the first `begin`.
            meta.body_mut()[..8].copy_from_slice(&1u64.to_le_bytes());
            log.log(&mut [(&mut meta, &[PageChange::Image])])?;
            1
        } else {
            let meta = pool.read(PageId::new(file, META_BLOCK))?;
            if meta.kind() != KIND_COMMIT_LOG_META {
                return Err(corrupt(
                    file,
                    META_BLOCK,
                    format!("a page of kind {:#06x} where the meta page is", meta.kind()),
                ));
            }
            let reserved = u64::from_le_bytes(meta.body()[..8].try_into().expect("eight bytes"));
            let pages = pool.file_pages(file)?;
            if reserved == 0 || reserved > MAX_XID {
                return Err(corrupt(
                    file,
                    META_BLOCK,
                    format!("ids reserved up to {reserved}, no bound a file can hold"),
                ));
            }
            // Shorter than the bound says is corruption; longer is a reservation whose
            // pages outlived its record (harmless: no id past the bound was handed out).
            if reserved > 1 && block_of(reserved - 1) >= pages {
                return Err(corrupt(
                    file,
                    META_BLOCK,
                    format!("ids reserved up to {reserved}, but the file has {pages} pages"),
                ));
            }
            reserved
        };
        Ok(CommitLog {
            shared: Arc::new(Shared {
                pool,
                file,
                log,
                next: AtomicU64::new(reserved),
                reserved: AtomicU64::new(reserved),
                reserving: Mutex::new(()),
                crashed_below: reserved,
            }),
        })
    }

    /// A new transaction id, in progress until [`CommitLog::commit`] or
    /// [`CommitLog::abort`]. Raises the reserved bound a page at a time (X1).
    pub fn begin(&self) -> Result<u64> {
        let s = &*self.shared;
        let xid = s.next.fetch_add(1, Ordering::AcqRel);
        if xid >= MAX_XID {
            return Err(Error::CapacityExceeded {
                what: "transaction ids of a disk database".into(),
                limit: MAX_XID as usize,
            });
        }
        while xid >= s.reserved.load(Ordering::Acquire) {
            let _one = s.reserving.lock();
            let reserved = s.reserved.load(Ordering::Acquire);
            if xid < reserved {
                break;
            }
            self.reserve_page_at(reserved)?;
        }
        debug_assert!(xid > 0 && xid < s.reserved.load(Ordering::Acquire));
        Ok(xid)
    }

    /// Takes the entry page holding `from` (the reserved bound): a new page at the file's
    /// end, or one already there past the bound (its reservation's record was lost after
    /// the page reached the file; no id on it was handed out), cleared. Raises the bound to
    /// the page's end in one logged change with the meta page.
    fn reserve_page_at(&self, from: u64) -> Result<()> {
        let s = &*self.shared;
        let block = block_of(from);
        let up_to = (u64::from(block)) * ENTRIES_PER_PAGE;
        let mut meta = s.pool.write(PageId::new(s.file, META_BLOCK))?;
        let mut page = if block < s.pool.file_pages(s.file)? {
            let mut page = s.pool.overwrite(PageId::new(s.file, block))?;
            page.body_mut().fill(0);
            page
        } else {
            let page = s.pool.allocate(s.file)?;
            if page.id().block != block {
                return Err(corrupt(
                    s.file,
                    page.id().block,
                    format!("the next entry page is block {block}, the file's end another"),
                ));
            }
            page
        };
        page.set_kind(KIND_COMMIT_LOG_PAGE);
        meta.body_mut()[..8].copy_from_slice(&up_to.to_le_bytes());
        s.log.log(&mut [
            (&mut page, &[PageChange::Image]),
            (&mut meta, &[PageChange::CommitLogReserve { up_to }]),
        ])?;
        s.reserved.store(up_to, Ordering::Release);
        Ok(())
    }

    /// Records that `xid` committed at `commit_ts`; returns the end of the record to wait
    /// on ([`PageLog`]'s durability) before the commit is acknowledged (X2). Fails with
    /// [`Error::TransactionNotInProgress`] if `xid` was not handed out in this run or has
    /// ended.
    pub fn commit(&self, xid: u64, commit_ts: u64) -> Result<u64> {
        if commit_ts == 0 || commit_ts == ABORTED {
            return Err(Error::TransactionNotInProgress {
                xid,
                state: "given a commit timestamp that is no timestamp",
            });
        }
        self.end(xid, commit_ts)
    }

    /// Records that `xid` aborted. Nothing waits on it: a crash before it is durable ends
    /// the transaction the same way (X3).
    pub fn abort(&self, xid: u64) -> Result<()> {
        self.end(xid, ABORTED).map(drop)
    }

    fn end(&self, xid: u64, value: u64) -> Result<u64> {
        self.prepare_end(xid)?.set(value)
    }

    /// Latches the entry page of `xid`, which must be in progress, so that ending it
    /// later ([`EndingEntry::commit`], [`EndingEntry::abort`]) does no I/O: a committer
    /// takes this before it draws its commit timestamp, so nothing that waits on it waits
    /// on a read of the commit log. Every committer of a page's transactions passes its
    /// latch; hold it only across the commit's short window.
    pub fn prepare_end(&self, xid: u64) -> Result<EndingEntry<'_>> {
        let s = &*self.shared;
        if xid < s.crashed_below || xid >= s.handed_out() {
            return Err(Error::TransactionNotInProgress {
                xid,
                state: "not begun in this run",
            });
        }
        let (block, slot) = address(xid);
        let page = s.pool.write(PageId::new(s.file, block))?;
        check_entry_page(&page, s.file, block)?;
        let at = slot as usize * 8;
        let entry = u64::from_le_bytes(page.body()[at..at + 8].try_into().expect("eight bytes"));
        if entry != 0 {
            return Err(Error::TransactionNotInProgress {
                xid,
                state: if entry == ABORTED {
                    "already aborted"
                } else {
                    "already committed"
                },
            });
        }
        Ok(EndingEntry {
            log: &s.log,
            page,
            slot,
        })
    }

    /// What became of `xid`. Ids never handed out (0, or at or past the next) are
    /// [`Error::TransactionNotInProgress`].
    pub fn status(&self, xid: u64) -> Result<TransactionStatus> {
        self.status_and_lsn(xid).map(|(status, _)| status)
    }

    /// [`CommitLog::status`], with the LSN of the entry's page: at or past the end of the
    /// record that ended `xid`. A page that takes a hint about `xid` (that it committed)
    /// must not reach the files before that record is durable, or a crash that loses the
    /// record would leave the hint claiming a commit the log does not have; raising the
    /// page's LSN to this makes the write-ahead rule wait for it (what PostgreSQL's
    /// `SetHintBits` ensures by not setting a hint before the commit is flushed).
    pub fn status_and_lsn(&self, xid: u64) -> Result<(TransactionStatus, u64)> {
        let s = &*self.shared;
        if xid == 0 || xid >= s.handed_out() {
            return Err(Error::TransactionNotInProgress {
                xid,
                state: "never begun",
            });
        }
        let (block, slot) = address(xid);
        let page = s.pool.read(PageId::new(s.file, block))?;
        if page.kind() != KIND_COMMIT_LOG_PAGE {
            return Err(corrupt(
                s.file,
                block,
                format!("a page of kind {:#06x} holds entries", page.kind()),
            ));
        }
        let at = slot as usize * 8;
        let entry = u64::from_le_bytes(page.body()[at..at + 8].try_into().expect("eight bytes"));
        let status = match entry {
            0 if xid < s.crashed_below => TransactionStatus::Aborted,
            0 => TransactionStatus::InProgress,
            ABORTED => TransactionStatus::Aborted,
            commit_ts => TransactionStatus::Committed(commit_ts),
        };
        Ok((status, page.lsn()))
    }

    /// The newest commit timestamp in the log (0 if none): a restarted database's clock
    /// starts past it. Reads every entry page once.
    pub fn newest_commit_ts(&self) -> Result<u64> {
        let s = &*self.shared;
        let handed_out = s.handed_out();
        let mut newest = 0;
        if handed_out <= 1 {
            return Ok(0);
        }
        for block in 1..=block_of(handed_out - 1) {
            let page = s.pool.read(PageId::new(s.file, block))?;
            if page.kind() != KIND_COMMIT_LOG_PAGE {
                return Err(corrupt(
                    s.file,
                    block,
                    format!("a page of kind {:#06x} holds entries", page.kind()),
                ));
            }
            for entry in page.body().chunks_exact(8) {
                let value = u64::from_le_bytes(entry.try_into().expect("eight bytes"));
                if value != ABORTED {
                    newest = newest.max(value);
                }
            }
        }
        Ok(newest)
    }

    /// The buffer pool its pages are in.
    pub(crate) fn pool(&self) -> &Arc<BufferPool> {
        &self.shared.pool
    }

    /// The next id [`CommitLog::begin`] hands out: every id below it was handed out.
    pub fn next_xid(&self) -> u64 {
        self.shared.next.load(Ordering::Acquire)
    }
}

/// The latched entry page of a transaction about to end ([`CommitLog::prepare_end`]).
/// Dropping it without ending the transaction leaves it in progress.
pub struct EndingEntry<'a> {
    log: &'a Arc<PageLog>,
    page: PageMut<'a>,
    slot: u16,
}

impl std::fmt::Debug for EndingEntry<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndingEntry")
            .field("xid", &self.xid())
            .finish()
    }
}

impl EndingEntry<'_> {
    /// Records the commit at `commit_ts`; returns the end of the record to wait on before
    /// the commit is acknowledged (X2).
    pub fn commit(self, commit_ts: u64) -> Result<u64> {
        if commit_ts == 0 || commit_ts == ABORTED {
            return Err(Error::TransactionNotInProgress {
                xid: self.xid(),
                state: "given a commit timestamp that is no timestamp",
            });
        }
        self.set(commit_ts)
    }

    /// Records the abort.
    pub fn abort(self) -> Result<()> {
        self.set(ABORTED).map(drop)
    }

    fn xid(&self) -> u64 {
        u64::from(self.page.id().block - 1) * ENTRIES_PER_PAGE + u64::from(self.slot)
    }

    fn set(mut self, value: u64) -> Result<u64> {
        let at = self.slot as usize * 8;
        debug_assert_eq!(
            &self.page.body()[at..at + 8],
            &[0; 8],
            "X2: an entry changes once"
        );
        self.page.body_mut()[at..at + 8].copy_from_slice(&value.to_le_bytes());
        let slot = self.slot;
        self.log
            .log(&mut [(&mut self.page, &[PageChange::CommitLogSet { slot, value }])])
    }
}

impl Shared {
    /// Ids below this were handed out: below the next id, and below the reserved bound
    /// (an id past it is still being reserved by its `begin`, which has not returned).
    fn handed_out(&self) -> u64 {
        self.next
            .load(Ordering::Acquire)
            .min(self.reserved.load(Ordering::Acquire))
    }
}

/// The entry page and slot of `xid`.
fn address(xid: u64) -> (u32, u16) {
    (block_of(xid), (xid % ENTRIES_PER_PAGE) as u16)
}

fn block_of(xid: u64) -> u32 {
    debug_assert!(xid < MAX_XID);
    u32::try_from(1 + xid / ENTRIES_PER_PAGE).expect("ids below MAX_XID")
}

fn check_entry_page(page: &PageMut<'_>, file: FileNo, block: u32) -> Result<()> {
    if page.kind() == KIND_COMMIT_LOG_PAGE {
        Ok(())
    } else {
        Err(corrupt(
            file,
            block,
            format!("a page of kind {:#06x} holds entries", page.kind()),
        ))
    }
}

fn corrupt(file: FileNo, block: u32, reason: String) -> Error {
    Error::Corruption {
        file: format!("commit log file {}", file.0),
        offset: PageId::new(file, block).offset(),
        reason,
    }
}

/// Redoes a logged entry change (`disk::page_log`).
pub(crate) fn redo_set(page: &mut PageMut<'_>, slot: u16, value: u64) -> Result<()> {
    let id = page.id();
    check_entry_page(page, id.file, id.block)?;
    if u64::from(slot) >= ENTRIES_PER_PAGE {
        return Err(corrupt(id.file, id.block, format!("entry slot {slot}")));
    }
    let at = slot as usize * 8;
    page.body_mut()[at..at + 8].copy_from_slice(&value.to_le_bytes());
    Ok(())
}

/// Redoes a logged raise of the reserved bound.
pub(crate) fn redo_reserve(page: &mut PageMut<'_>, up_to: u64) -> Result<()> {
    let id = page.id();
    if page.kind() != KIND_COMMIT_LOG_META {
        return Err(corrupt(
            id.file,
            id.block,
            format!("a reservation on a page of kind {:#06x}", page.kind()),
        ));
    }
    page.body_mut()[..8].copy_from_slice(&up_to.to_le_bytes());
    Ok(())
}
