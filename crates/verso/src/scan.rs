//! Range scans as iterators: [`Transaction::scan`], [`Transaction::scan_index`] and the
//! [`Scan`] they return.
//!
//! A [`Scan`] fetches rows in batches (`engine/txn/cursor.rs`): each batch decodes its rows
//! under their latches, releases them and unpins the index before the iterator hands the
//! first row out, and the next batch resumes after the last key fetched. So a program may
//! take as long as it likes between two `next()` calls, or stop and drop the iterator:
//! nothing is held meanwhile but the transaction's snapshot, which is what a long reader
//! holds anyway (and under Steam's eager pruning costs at most one version per row written
//! meanwhile). Batches start small (a `take(1)` decodes a few rows, not hundreds) and grow
//! to [`Scan::MAX_BATCH`] rows.

use std::collections::VecDeque;
use std::iter::FusedIterator;

use crate::db::{KeyRange, TableId, Transaction};
use crate::engine::txn::{End, ScanCursor};
use crate::error::Result;
use crate::rows::Row;
use crate::schema::TableSchema;
use crate::value::Value;

impl<'db> Transaction<'db> {
    /// The rows whose primary key lies in `range`, in primary-key order, as an iterator of
    /// [`Row`]s: `for row in txn.scan(table, ..)? { let row = row?; … }`.
    ///
    /// `range` is any range of key prefixes (`..`, `a..b`, `a..=b`, `a..`, `..b`, see
    /// [`KeyRange`]); the iterator is double-ended (`.rev()` walks from the largest key
    /// down, `next_back` meets `next` in the middle), and a [`KeyRange::descending`] range
    /// starts from the largest key.
    ///
    /// Errors in the request itself (an unknown table, a bound of the wrong arity or type)
    /// are returned here, before anything is read. An item is an error when reading failed
    /// (a lock conflict under MVTO or MV2PL, which rolls the transaction back, or a
    /// transaction rolled back already); the iterator ends after it.
    ///
    /// Rows are read in batches, with no latch or pin held between two calls of `next`
    /// (see [`Scan`]). What the iterator has handed out counts as read for serializable
    /// validation (and the whole range once it has said there is no more); rows a batch
    /// fetched that the program never saw do not. Under MVTO and MV2PL, whose reads stamp
    /// or lock rows, a row is read when its batch is fetched, a few rows ahead of the
    /// program. For the fastest scans, with no copy of the rows, see
    /// [`Transaction::scan_view`].
    pub fn scan<'t>(&'t self, table: TableId, range: impl Into<KeyRange>) -> Result<Scan<'t, 'db>> {
        Scan::open(self, table, None, range.into())
    }

    /// The rows whose key in secondary index `index` lies in `range` (prefixes of the
    /// index's columns), in index order (ties in primary-key order), as an iterator like
    /// [`Transaction::scan`]'s.
    pub fn scan_index<'t>(
        &'t self,
        table: TableId,
        index: &str,
        range: impl Into<KeyRange>,
    ) -> Result<Scan<'t, 'db>> {
        Scan::open(self, table, Some(index), range.into())
    }
}

/// The rows of a range, read a batch at a time: the iterator [`Transaction::scan`] and
/// [`Transaction::scan_index`] return. Items are `Result<Row>`.
///
/// Between two calls it holds no row latch and no index pin, only its place in the range
/// (the last key fetched at each end) and the rows of the current batch, already copied.
/// It borrows the transaction, so the transaction cannot write or commit while the
/// iterator lives; collect what you need first, or drop the iterator.
pub struct Scan<'t, 'db> {
    txn: &'t Transaction<'db>,
    schema: &'db TableSchema,
    cursor: ScanCursor,
    /// Rows fetched from the front, ascending, and from the back, descending, each with its
    /// index key when the transaction records its reads for validation.
    front: VecDeque<Fetched>,
    back: VecDeque<Fetched>,
    /// Whether handing a row out records it as read (`EngineTxn::record_scanned`).
    records: bool,
    /// Each end has handed out its last row and recorded the whole range.
    ended: [bool; 2],
    /// Whether `next` walks from the largest key ([`KeyRange::descending`]).
    reversed: bool,
    /// Rows the next batch fetches.
    batch: usize,
}

/// A fetched row: its index key (only when reads are recorded) and its values.
type Fetched = (Option<Vec<u8>>, Vec<Value>);

impl<'t, 'db> Scan<'t, 'db> {
    /// Rows in the first batch: a `take(1)` or a `next()` for "the first row" decodes no
    /// more than this.
    pub const FIRST_BATCH: usize = 8;
    /// Rows in a batch once batches have grown (each batch doubles the next, up to this).
    pub const MAX_BATCH: usize = 256;

    fn open(
        txn: &'t Transaction<'db>,
        table: TableId,
        index: Option<&str>,
        range: KeyRange,
    ) -> Result<Self> {
        let (cursor, schema, records) = txn.open_scan(table, index, &range)?;
        Ok(Scan {
            txn,
            schema,
            cursor,
            front: VecDeque::new(),
            back: VecDeque::new(),
            records,
            ended: [false; 2],
            reversed: range.is_descending(),
            batch: Self::FIRST_BATCH,
        })
    }

    /// The next row from one end of the range: from that end's batch, else from a new
    /// batch, else (once everything is fetched) from the far end of the other end's batch.
    fn take(&mut self, end: End) -> Option<Result<Row<'db>>> {
        let (near, far) = match end {
            End::Front => (&mut self.front, &mut self.back),
            End::Back => (&mut self.back, &mut self.front),
        };
        if near.is_empty() && !self.cursor.is_exhausted() {
            let fetched =
                self.txn
                    .scan_batch(&mut self.cursor, end, self.batch, self.records, near);
            self.batch = (self.batch * 2).min(Self::MAX_BATCH);
            if let Err(error) = fetched {
                // A refused read rolled the transaction back: nothing more to read.
                self.cursor.finish();
                near.clear();
                far.clear();
                self.ended = [true; 2];
                return Some(Err(error));
            }
        }
        let Some((key, values)) = near.pop_front().or_else(|| far.pop_back()) else {
            // The program now knows there is no more at this end: it read the whole range.
            let ended = &mut self.ended[end as usize];
            if self.records && !*ended {
                self.txn.record_scanned(&mut self.cursor, end, None);
            }
            *ended = true;
            return None;
        };
        if self.records {
            self.txn.record_scanned(&mut self.cursor, end, key);
        }
        Some(Ok(Row::new(self.schema, values)))
    }

    /// The end `next` takes from.
    fn forward(&self) -> End {
        if self.reversed {
            End::Back
        } else {
            End::Front
        }
    }
}

impl<'db> Iterator for Scan<'_, 'db> {
    type Item = Result<Row<'db>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.take(self.forward())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let fetched = self.front.len() + self.back.len();
        if self.cursor.is_exhausted() {
            (fetched, Some(fetched))
        } else {
            (fetched, None)
        }
    }
}

impl DoubleEndedIterator for Scan<'_, '_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let backward = match self.forward() {
            End::Front => End::Back,
            End::Back => End::Front,
        };
        self.take(backward)
    }
}

impl FusedIterator for Scan<'_, '_> {}

impl std::fmt::Debug for Scan<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("table", &self.schema.name)
            .field("fetched", &(self.front.len() + self.back.len()))
            .field("exhausted", &self.cursor.is_exhausted())
            .finish_non_exhaustive()
    }
}
