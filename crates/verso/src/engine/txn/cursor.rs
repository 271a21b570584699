//! Scans a batch at a time, for the public scan iterator (`crate::scan::Scan`).
//!
//! An iterator lives between calls the engine does not control: holding a row latch or the
//! index's epoch pin from one `next()` to the next would let a slow consumer stall writers
//! and the index's memory reclamation. So the iterator asks for a batch of rows, which are
//! decoded under their latches and handed over with every latch released and the pin
//! dropped, and the [`ScanCursor`] keeps only what is needed to resume: the part of the range
//! not fetched yet, as encoded bounds that exclude the last key fetched.
//!
//! Invariants:
//! - `lower..upper` is the part of the range not yet fetched; a front batch raises `lower`
//!   past its last key, a back batch lowers `upper` below its last key. Once a batch ends
//!   short of its size, nothing is left: the two ends met or the range ran out.
//! - What the program was handed is recorded for validation, row by row as the iterator
//!   hands rows out (`record_scanned`), exactly as a one-shot scan that stopped at the
//!   same row would record it: from the range's start to that row's key (from that key to
//!   the range's end, walking back), and the whole range once the iterator has said there
//!   is no more. One range per direction, widened in place (`ReadSet::widen_range`), so a
//!   scan of a million rows adds two ranges, not a million. Rows a batch fetched and the
//!   program never saw are not recorded: they cannot have influenced it. Records only
//!   grow.
//! - MVTO publishes the whole range once, before the first batch searches the index (as a
//!   one-shot scan does); MV2PL's validation window starts at the first batch.
//! - Snapshot reads do not depend on when a batch runs: each batch reads at the
//!   transaction's snapshot, which a commit in between does not change (MV2PL's locked reads
//!   see the newest committed rows, and its validation checks the range at commit).

use std::collections::VecDeque;
use std::ops::Bound;

use super::{encode_range, EncodedBound, EngineTxn};

use crate::cc::precision::RangeRead;
use crate::error::Result;
use crate::gc::Collector;
use crate::row::RowView;
use crate::schema::TableSchema;
use crate::version::VersionStorage;
use crate::{KeyRange, TableId};

/// A scan between batches. Plain data: it borrows nothing, so the iterator holds no latch,
/// no pin and no borrow of the engine's structures between calls.
#[derive(Debug)]
pub(crate) struct ScanCursor {
    table: TableId,
    /// The secondary index scanned, `None` for the primary key.
    index: Option<usize>,
    /// The whole range, as encoded when the scan began.
    start: EncodedBound,
    end: EncodedBound,
    /// What is left of it (see the module's invariants).
    lower: EncodedBound,
    upper: EncodedBound,
    /// Where the read set holds what the program was handed from the front and the back.
    front_record: Option<usize>,
    back_record: Option<usize>,
    /// MVTO: the whole range's predicate is published.
    published: bool,
    /// Nothing is left to fetch.
    exhausted: bool,
    /// The range is empty by construction (`(a..a]`): there is nothing to read, nor to
    /// record, as a one-shot scan of it records nothing.
    empty: bool,
}

impl ScanCursor {
    /// Whether every row of the range has been fetched (or the scan failed).
    pub(crate) fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    /// Ends the scan: nothing more is fetched (after an error).
    pub(crate) fn finish(&mut self) {
        self.exhausted = true;
    }

    /// A cursor over an encoded range (`None`: empty by construction) for an engine that
    /// records nothing for validation (the disk engine).
    pub(crate) fn over(
        table: TableId,
        index: Option<usize>,
        encoded: Option<(EncodedBound, EncodedBound)>,
    ) -> Self {
        let exhausted = encoded.is_none();
        let (start, end) = encoded.unwrap_or((Bound::Unbounded, Bound::Unbounded));
        ScanCursor {
            table,
            index,
            lower: start.clone(),
            upper: end.clone(),
            start,
            end,
            front_record: None,
            back_record: None,
            published: true,
            exhausted,
            empty: exhausted,
        }
    }

    /// The table, the index (`None`: the primary key), and what is left of the range.
    pub(crate) fn remaining(&self) -> (TableId, Option<usize>, &EncodedBound, &EncodedBound) {
        (self.table, self.index, &self.lower, &self.upper)
    }

    /// Records in `reads` that the program was handed the rows of one end up to the row
    /// with index key `upto` (`None`: all of the range), widening that end's one record
    /// (`upto` without a physical pointer's tag).
    pub(crate) fn record_into(
        &mut self,
        reads: &mut crate::cc::precision::ReadSet,
        from: End,
        upto: Option<Vec<u8>>,
    ) {
        if self.empty {
            return;
        }
        let (lower, upper) = match (upto, from) {
            (None, _) => (self.start.clone(), self.end.clone()),
            (Some(key), End::Front) => (self.start.clone(), Bound::Included(key)),
            (Some(key), End::Back) => (Bound::Included(key), self.end.clone()),
        };
        let range = RangeRead {
            table: self.table.index,
            index: self
                .index
                .map(|i| u16::try_from(i).expect("indexes per table fit u16")),
            lower,
            upper,
        };
        let record = match from {
            End::Front => &mut self.front_record,
            End::Back => &mut self.back_record,
        };
        match *record {
            Some(at) => reads.widen_range(at, range),
            None => *record = Some(reads.record_range(range)),
        }
    }

    /// Moves past a batch taken from `from` that stopped at the key `at` (`None`: it
    /// reached the end of the range).
    pub(crate) fn advance(&mut self, from: End, at: Option<Vec<u8>>) {
        match (at, from) {
            (None, _) => self.exhausted = true,
            (Some(at), End::Front) => self.lower = Bound::Excluded(at),
            (Some(at), End::Back) => self.upper = Bound::Excluded(at),
        }
    }
}

/// Which end of the remaining range a batch is taken from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// The smallest keys, ascending.
    Front,
    /// The largest keys, descending.
    Back,
}

impl<'e, V: VersionStorage, G: Collector> EngineTxn<'e, V, G> {
    /// Checks a scan's table, index and range and encodes the range. Reads nothing and
    /// records nothing yet. Returns the table's schema (the rows' column names) with it.
    pub(crate) fn open_scan(
        &self,
        id: TableId,
        index_name: Option<&str>,
        range: &KeyRange,
    ) -> Result<(ScanCursor, &'e TableSchema)> {
        self.check_active()?;
        let table = self.table(id)?;
        let index = index_name
            .map(|name| table.schema.index_position(name))
            .transpose()?;
        let encoded = encode_range(&table.schema, range, index)?;
        let mut cursor = ScanCursor::over(id, index, encoded);
        cursor.published = false;
        Ok((cursor, &table.schema))
    }

    /// Fetches up to `max_rows` visible rows from one end of what is left of the cursor's
    /// range, each decoded by `decode` (given the row's index key, and the row under its
    /// latch) into `out`, in the end's order, and moves the cursor past them. Records
    /// nothing for validation: [`Self::record_scanned`] does, as the rows are handed out.
    pub(crate) fn scan_batch<T>(
        &self,
        cursor: &mut ScanCursor,
        from: End,
        max_rows: usize,
        mut decode: impl FnMut(&[u8], RowView<'_>) -> T,
        out: &mut VecDeque<T>,
    ) -> Result<()> {
        debug_assert!(max_rows > 0);
        if cursor.exhausted {
            return Ok(());
        }
        self.check_active()?;
        let table = self.table(cursor.table)?;
        if !cursor.published {
            self.publish_range_predicate(cursor.table, cursor.index, &cursor.start, &cursor.end);
            cursor.published = true;
        }
        let clock = self.predicate_clock();
        let descending = from == End::Back;
        let mut fetched = 0;
        let mut keep = |row: T| {
            out.push_back(row);
            fetched += 1;
            fetched < max_rows
        };
        let bounds = (&cursor.lower, &cursor.upper);
        let stopped_at = match cursor.index {
            None => self.scan_primary(
                table,
                bounds,
                descending,
                true,
                |key, _, row| decode(key, row),
                &mut keep,
            )?,
            Some(index) => self.scan_secondary(
                table,
                index,
                bounds,
                descending,
                true,
                &mut decode,
                &mut keep,
            )?,
        };
        match (stopped_at, from) {
            (None, _) => cursor.exhausted = true,
            (Some(at), End::Front) => cursor.lower = Bound::Excluded(at),
            (Some(at), End::Back) => cursor.upper = Bound::Excluded(at),
        }
        self.note_predicate(clock);
        Ok(())
    }

    /// Whether the scan's reads are recorded for validation (so the iterator keeps each
    /// row's key for [`Self::record_scanned`]).
    pub(crate) fn records_scans(&self) -> bool {
        self.reads.is_some()
    }

    /// Records that the program was handed the rows of one end of the cursor's range up to
    /// the row with index key `upto` (`None`: all of the range, its end included, once the
    /// iterator found no more rows). Widens that end's one record: records only grow.
    pub(crate) fn record_scanned(&self, cursor: &mut ScanCursor, from: End, upto: Option<Vec<u8>>) {
        let Some(reads) = &self.reads else {
            return;
        };
        debug_assert!(
            !cursor.empty || upto.is_none(),
            "an empty range hands out no row"
        );
        // Validation compares index entries without a physical pointer's tag (commit
        // records hold untagged entries, which sort just below the tagged one).
        let upto = match (cursor.index, upto) {
            (Some(_), Some(key)) => {
                let table = self.table(cursor.table).expect("the cursor's table exists");
                Some(table.untagged_entry(&key).to_vec())
            }
            (_, upto) => upto,
        };
        cursor.record_into(&mut reads.borrow_mut(), from, upto);
    }
}
